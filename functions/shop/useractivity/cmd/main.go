// Command useractivity is the shop pipeline's user-activity stage as a Pulsar
// Function.
package main

import (
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(useractivity.Transformation) }
