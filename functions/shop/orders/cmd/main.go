// Command orders is the shop pipeline's orders stage as a Pulsar Function.
package main

import (
	"github.com/foldline/foldline/functions/shop/orders"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(orders.Transformation) }
