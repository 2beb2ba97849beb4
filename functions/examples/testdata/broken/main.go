// Command broken does not compile: lint must say so at the manifest line
// that names it (admin/lint's test). It lies under functions/ because a
// binary must (gobuild.BinaryRoots), in testdata so that go build ./...
// leaves it alone.
package main

func main() { notDefined() }
