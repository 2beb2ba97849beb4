// Command identity is the smallest Pulsar Function: it forwards every payload
// unchanged (with key, properties and origin kept by the runtime). The
// runtime benchmark deploys it.
package main

import "github.com/foldline/foldline/functions/pf"

func identity(in []byte) ([]byte, error) { return in, nil }

func main() { pf.Start(identity) }
