// Package examples holds small functions built on the pf runtime, used by
// the runtime's integration tests and its benchmark: identity (the payload
// unchanged) and exclaim (appends "!", fails on payloads containing "boom").
package examples
