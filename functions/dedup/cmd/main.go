// Command dedup is the event-id deduplication stage (package dedup) as a
// Pulsar Function: the first stage of every tenant whose manifest names an
// eventId.
package main

import (
	"github.com/foldline/foldline/functions/dedup"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(dedup.Transformation) }
