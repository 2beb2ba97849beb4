// Command purchases is the shop pipeline's purchases stage as a Pulsar
// Function.
package main

import (
	"github.com/foldline/foldline/functions/shop/purchases"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(purchases.Transformation) }
