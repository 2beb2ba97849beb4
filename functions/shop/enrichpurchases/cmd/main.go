// Command enrichpurchases is the shop pipeline's enrich-purchases stage as a
// Pulsar Function (stateful: its users' page views live in its state table).
package main

import (
	"github.com/foldline/foldline/functions/shop/enrichpurchases"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(enrichpurchases.Transformation) }
