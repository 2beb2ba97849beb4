// Package examples holds small functions built on the pf runtime, used by
// the runtime's integration tests and its benchmark: identity (the payload
// unchanged) and exclaim (appends "!", fails on payloads containing "boom");
// and fanout, two typed transformations whose every input yields two
// outputs on one row, for the end-to-end test of exactly-once fan-out.
package examples
