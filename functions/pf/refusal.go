package pf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// An instance that cannot start says why where `pulsar-admin functions
// status` shows it: its status is not running, with the reason as its error
// (failureException) and as its latest system exception.
//
// It does so by staying up. The worker's process runtime starts an
// instance with its standard error inherited, so the death message it
// keeps for an instance that exited is always empty: a status call then
// shows `error: ""`, and, once the worker has restarted the instance, it
// shows that empty message in place of whatever the instance itself
// reports while not running (Pulsar 4.0.8's RuntimeSpawner). Only the
// latest system exceptions survive that. So an instance that exited would
// hide its reason for good, and restarting one whose config is wrong
// changes nothing: the worker passes the same config again.
//
// A config the instance refuses (no token of its own on a Pulsar with
// authentication, a malformed instance or user config, a handler it
// cannot call) keeps the instance serving its status, not running, until
// the worker stops it (functions update, stop, delete: SIGTERM), which a
// fixed config needs anyway; the process then exits with status 1. An
// instance that cannot connect (no broker, a token the broker refuses, a
// topic it may not read) tries again, with a backoff up to maxRetryBackoff,
// and says why meanwhile (see instance.run).

// startError is an error of an instance's start: it could not connect,
// create a producer or subscribe. It wraps the cause.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// notStarting wraps err as a startError (nil stays nil).
func notStarting(err error) error {
	if err == nil {
		return nil
	}
	return &startError{err: err}
}

// Refuse is for a main that checks its own config before Start (a sink
// reading its settings from the user config): it reports reason as the
// instance's status, not running, where pulsar-admin functions status
// shows it, until SIGTERM or SIGINT, then prints reason to stderr and
// exits the process with status 1. Without an instance config on the
// command line that names its control port, it prints and exits at once.
func Refuse(reason error) {
	err := startMain(func(ctx context.Context, args []string) error {
		if len(args) > 0 && args[0] == LocalFlag {
			return reason
		}
		return refuse(ctx, args, reason, os.Stderr)
	})
	fmt.Fprintln(os.Stderr, "pf:", err)
	os.Exit(1)
}

// controlConf is what refuse needs of an instance config that may be
// otherwise wrong: where the worker asks for the instance's status and
// metrics, and whose instance it is.
type controlConf struct {
	Port        int    `json:"port"`
	MetricsPort int    `json:"metricsPort"`
	InstanceID  int    `json:"instanceID"`
	ClusterName string `json:"clusterName"`
	Tenant      string `json:"tenant"`
	NameSpace   string `json:"nameSpace"`
	Name        string `json:"name"`
}

// controlConfOf reads the control ports and the function's name from the
// instance config of args, as far as they can be read: a key of the wrong
// type leaves its field zero, and the others are still read. ok is false
// when no control port is known.
func controlConfOf(args []string) (c *instanceConf, ok bool) {
	raw, err := confArg(args, io.Discard)
	if err != nil {
		return nil, false
	}
	var cc controlConf
	// encoding/json goes on past a value of the wrong type: what decodes
	// is kept.
	if err := json.Unmarshal(raw, &cc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			return nil, false
		}
	}
	if cc.Port <= 0 {
		return nil, false
	}
	return &instanceConf{Port: cc.Port, MetricsPort: cc.MetricsPort, InstanceID: cc.InstanceID, ClusterName: cc.ClusterName,
		Tenant: cc.Tenant, Namespace: cc.NameSpace, Name: cc.Name}, true
}

// refuse serves reason as the status of the instance that args configure
// (see the comment at the top of this file) until ctx ends, and returns
// reason then. It returns at once when args name no control port, or the
// port cannot be listened on.
func refuse(ctx context.Context, args []string, reason error, stderr io.Writer) error {
	conf, ok := controlConfOf(args)
	if !ok {
		return reason
	}
	inst := newInstance(conf, nil, stderr)
	inst.stats.notStarted(reason)
	stop, err := inst.serve()
	if err != nil {
		return errors.Join(reason, err)
	}
	defer stop()
	inst.log.Error("cannot start: not running until the worker stops this instance; functions status shows why", "error", reason)
	<-ctx.Done()
	return reason
}
