// Command tally is the fanout test pipeline's tally stage as a Pulsar
// Function: two operations on one row of view totals for every record.
package main

import (
	"github.com/foldline/foldline/functions/examples/fanout"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(fanout.Tally) }
