// Command cassandra is the Cassandra sink as a Go Pulsar Function binary,
// deployed with `pulsar-admin functions create --go` (or `foldline deploy`)
// on a view's operation topic, with the view's table definition and the
// sink's settings in its user config.
package main

import (
	"fmt"
	"os"

	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/sinks/cassandra"
)

func main() {
	cfg, err := readConfig(os.Args[1:])
	if err != nil {
		// The instance does not run, and functions status says why.
		// Running on would take input and never apply it.
		pf.Refuse(fmt.Errorf("cassandra sink: %w", err))
	}
	pf.Start(NewSink(cfg).Handle)
}

// readConfig reads and checks the sink's config from the instance config
// on the command line (args without the program name).
func readConfig(args []string) (cassandra.Config, error) {
	userConf, err := pf.UserConfig(args)
	if err != nil {
		return cassandra.Config{}, err
	}
	return cassandra.ParseConfig(userConf)
}
