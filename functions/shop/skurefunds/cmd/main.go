// Command skurefunds is the shop pipeline's sku-refunds stage as a Pulsar
// Function (stateful: its orders' purchases live in its state table).
package main

import (
	"github.com/foldline/foldline/functions/shop/skurefunds"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(skurefunds.Transformation) }
