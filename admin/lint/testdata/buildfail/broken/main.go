// Command broken does not compile: lint must say so at the manifest line
// that names it.
package main

func main() { notDefined() }
