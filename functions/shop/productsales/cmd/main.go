// Command productsales is the shop pipeline's product-sales stage as a Pulsar
// Function.
package main

import (
	"github.com/foldline/foldline/functions/shop/productsales"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(productsales.Transformation) }
