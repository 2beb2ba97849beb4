// Command validate is the shop pipeline's validate stage as a Pulsar Function.
package main

import (
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() { run.Main(validate.Transformation) }
