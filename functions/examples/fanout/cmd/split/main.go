// Command split is the fanout test pipeline's split stage as a Pulsar
// Function: two records for every ledger event.
package main

import (
	"github.com/foldline/foldline/functions/examples/fanout"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(fanout.Split) }
