// Package exitcode is the one place that maps a command's error to the
// foldline CLI's exit code, so that scripts and CI can tell "fix the
// manifests" from "start the stack" from "it does not exist".
package exitcode

import (
	"errors"

	"github.com/foldline/foldline/internal/services"
)

// The exit codes of every foldline command.
const (
	// OK: the command did what it was asked.
	OK = 0
	// Failed: the command failed; also the code of invalid manifests
	// (lint's findings).
	Failed = 1
	// Usage: a bad flag or argument, a bad connection setting or config
	// file (services.ErrConfig), or a refusal of what the arguments
	// ask: removing data unconfirmed (destroy --tables/--purge without
	// --yes and no terminal), dropping the active table.
	Usage = 2
	// Unreachable: Pulsar or Cassandra did not answer; start them with
	// scripts/stack up.
	Unreachable = 3
	// NotFound: the tenant, view or function named does not exist.
	NotFound = 4
	// NotReady: deploy finished its changes but some instance did not run
	// within --wait; status shows which.
	NotReady = 5
)

// Help documents the exit codes for the root command's help.
const Help = `Exit codes:
  0  success
  1  the command failed, or the manifests have problems (lint)
  2  bad flag, argument or connection setting (foldline config view); removing data unconfirmed (destroy without --yes); dropping the active table
  3  Pulsar or Cassandra unreachable: start them with scripts/stack up
  4  unknown tenant, view or function
  5  deployed, but not every function instance runs yet (see foldline status)`

// ErrNotFound marks an error about something that does not exist.
var ErrNotFound = errors.New("not found")

// ErrUsage marks a bad flag value or argument that cobra cannot see (a
// flag whose value is checked by the command).
var ErrUsage = errors.New("bad usage")

// ErrNotReady marks a deploy whose instances did not all start in time.
var ErrNotReady = errors.New("not ready")

// For returns the exit code for err (which is not a usage error: the root
// command knows those itself).
func For(err error) int {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrUsage), errors.Is(err, services.ErrConfig):
		return Usage
	case errors.Is(err, services.ErrUnreachable):
		return Unreachable
	case errors.Is(err, ErrNotFound):
		return NotFound
	case errors.Is(err, ErrNotReady):
		return NotReady
	}
	return Failed
}
