// Command cassandra is the Cassandra sink as a Go Pulsar Function binary,
// deployed with `pulsar-admin functions create --go` (or `foldline deploy`)
// on a view's operation topic, with the view's table definition and the
// sink's settings in its user config.
package main

import "github.com/foldline/foldline/functions/pf"

func main() {
	pf.Start(NewSink().Handle)
}
