// Command hello is the smallest program the builder's tests build for
// other platforms (a cross build of a real function compiles the whole
// Pulsar client for that platform first).
package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
