package pf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// Record is one output message of a handler.
type Record struct {
	// Topic is where the record goes; "" means the function's output topic.
	Topic string
	// Key is the message key; "" means keep the input message's key.
	Key string
	// Payload is the message body.
	Payload []byte
	// Properties are added over the input's properties (the input's map is
	// never modified); the origin position is kept unless set here
	// (envelope.Origin.SetOn or SetPairOn; the runtime writes it in the
	// function's form, see UserConfigOriginProperty).
	Properties map[string]string
	// EventTime is the message's event time; zero means the input's event time.
	EventTime time.Time
}

// permanentError marks a handler error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks a handler error as not worth retrying (bad input): the
// message goes straight to the dead-letter topic with the error text as the
// reason. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type contextKey struct{}

// FromContext returns the function context that the runtime puts into the
// context it hands to a handler. Like the FunctionContext, that context
// carries the current input only until the handler returns (or its
// deferral is complete): a goroutine the handler leaves behind may still
// use it as a context (Done, Err, other values), not to reach the input.
func FromContext(ctx context.Context) (*FunctionContext, bool) {
	fc, ok := ctx.Value(contextKey{}).(*FunctionContext)
	return fc, ok
}

// Input is the message a handler is called with and its origin (see
// FunctionContext.GetCurrentRecord and FunctionContext.Origin). Unlike the
// FunctionContext, the handler may keep it after it returns, except the
// message's properties, which it must not read then (GetCurrentRecord says
// why).
type Input struct {
	Message pulsar.Message
	Origin  envelope.Origin
}

// InputOf returns the message the handler that got ctx is called with and
// its origin, during the call (see FromContext). A handler that needs
// nothing else of its FunctionContext should use it instead of
// FromContext: under the worker the runtime then reuses the input's state
// for a later input once it is over, which saves an allocation of about
// 600 bytes per message; a handler that took its FunctionContext keeps it
// to itself, and the input's state is then never reused.
func InputOf(ctx context.Context) (Input, bool) {
	fc, ok := unlent(ctx)
	if !ok {
		return Input{}, false
	}
	return Input{Message: fc.msg, Origin: fc.origin}, true
}

// Defer is FunctionContext.Defer for a handler that takes its input with
// InputOf and no FunctionContext, so that its inputs' state is reused as
// InputOf says; ok is false when ctx is not a handler's.
func Defer(ctx context.Context) (complete func(error), ok bool) {
	fc, ok := unlent(ctx)
	if !ok {
		return nil, false
	}
	return fc.Defer(), true
}

// AfterSent registers settle for the input of the handler that got ctx,
// during the call: once every output of the input is confirmed (or, when
// the handler failed, its dead letter), the runtime calls settle before it
// acknowledges the input, and acknowledges it only when settle calls done
// with nil. done with an error leaves the input unacknowledged and ends the
// session as a failed send does (see session): the input and every later
// one come again, in order. settle is never called when a send fails, since
// the input comes again anyway. settle and done may be called from any
// goroutine; done must be called exactly once. Shutdown waits for done
// within its grace, as for outputs in flight.
//
// A stateful transformation (package transform) commits the state change
// an input caused here: after its outputs are stored in their topics, and
// before the input is acknowledged, so that a crash between the two gives
// the same outputs again, from the same state. Each call of the handler
// starts without a registration (a retry registers again); ok is false
// when ctx is not a handler's.
func AfterSent(ctx context.Context, settle func(done func(error))) (ok bool) {
	fc, ok := unlent(ctx)
	if !ok {
		return false
	}
	fc.settle = settle
	return true
}

// Exporting what a local run's functions hold once their input has ended:
// the driver (Foldline's fused backfill) sends one more input, a marker with
// the property PropExportStates, through the path. A local instance does not
// hand it to its handler: it sends what its exporter (SetExporter) gives to
// StatesTopic, each record with the function's name in PropStatesFunction,
// and passes the marker on to its output topic, for the next function.
//
// The driver may ask again while the input goes on (a fused backfill's
// checkpoint): an exporter then gives only what changed since it last
// gave. Both markers are the driver's own: it takes every property that
// starts with PropLocalPrefix off what it reads from topics, so that no
// event can pose as one.
const (
	PropLocalPrefix    = "foldline.local."
	PropExportStates   = PropLocalPrefix + "export-states"
	StatesTopic        = PropLocalPrefix + "states"
	PropStatesFunction = PropLocalPrefix + "states-function"
	// PropImportStates names the function whose states the input's
	// payload holds: a resumed fused backfill hands a local run the
	// states its checkpoint saved before the first event. The instance of
	// that function hands the payload to its handler, which takes it
	// (TakesImport); any other passes the marker on.
	PropImportStates = PropLocalPrefix + "import-states"
)

// SetExporter registers, for a local run, what the instance of the handler
// that got ctx exports when the driver asks (see PropExportStates): a
// stateful transformation's keyed states, which a fused backfill writes
// into the state table of the copy it deploys from there. Under the worker
// it does nothing; ok is false when ctx is not a handler's.
func SetExporter(ctx context.Context, export func() ([]Record, error)) (ok bool) {
	fc, ok := unlent(ctx)
	if !ok {
		return false
	}
	if fc.inst.local {
		fc.inst.exporter = export
	}
	return true
}

// ImportedStates reports whether the input of the handler that got ctx is
// the driver's import marker (PropImportStates) for its function, in a
// local run: the handler takes the payload as the states to start from,
// calls TakesImport and returns no record. ok is false for any other
// input.
func ImportedStates(ctx context.Context) (ok bool) {
	fc, ok := unlent(ctx)
	return ok && fc.importing
}

// TakesImport tells the runtime that the handler that got ctx took the
// import it was handed (ImportedStates); an import no handler takes ends
// the run with an error.
func TakesImport(ctx context.Context) {
	if fc, ok := unlent(ctx); ok && fc.importing {
		fc.imported = true
	}
}

// RunsLocally reports whether the handler that got ctx runs locally
// (LocalFlag, or a chain: see StartChain) rather than under the functions
// worker: its inputs then come from the driver, from the ledger's first
// event on, and never again. A stateful transformation keeps its state in
// memory then, and in Cassandra under the worker.
func RunsLocally(ctx context.Context) bool {
	fc, ok := unlent(ctx)
	return ok && fc.inst.local
}

// unlent returns the function context in ctx for the runtime's own use
// during the call, without lending it to the handler when ctx is the
// handler's own; a context derived from it lends it (FromContext), as the
// runtime cannot tell what else the derived context reaches.
func unlent(ctx context.Context) (*FunctionContext, bool) {
	if hc, ok := ctx.(*handlerContext); ok {
		return hc.fc, true
	}
	return FromContext(ctx)
}

// handlerContext is the context a handler gets: the run's context carrying
// the function context, as context.WithValue would make it but living in the
// input's state instead of an allocation of its own.
type handlerContext struct {
	context.Context
	fc *FunctionContext
}

func (c *handlerContext) Value(key any) any {
	if key == (contextKey{}) {
		c.fc.lent.Store(true)
		return c.fc
	}
	return c.Context.Value(key)
}

// Start runs handler as a Pulsar Function instance under the functions worker
// until SIGTERM or SIGINT, reading the instance config from os.Args. It is
// meant to be main's exit point. An instance that cannot start says why in
// its status (pulsar-admin functions status: not running, the reason as
// its error): one whose config it refuses (no token of its own on a Pulsar
// with authentication, a bad instance or user config, an unsupported
// handler shape) until it is stopped, one that cannot connect or subscribe
// while it tries again (see refusal.go). When stopped after a refusal, or
// on a fault (FunctionContext.Fail), it prints the error to stderr and
// exits the process with status 1; after a clean shutdown it returns.
func Start(handler any) {
	if err := startMain(func(ctx context.Context, args []string) error { return run(ctx, handler, args) }); err != nil {
		fmt.Fprintln(os.Stderr, "pf:", err)
		os.Exit(1)
	}
}

// UserConfig returns the user config of the instance config in args (the
// command line without the program name, os.Args[1:]), so that main can
// check it before Start and hand the error to Refuse: an instance whose
// config is wrong then says so where the worker shows it (not running,
// the reason as its error) instead of running and doing nothing.
func UserConfig(args []string) (map[string]any, error) {
	if len(args) > 0 && args[0] == LocalFlag {
		args = args[1:]
	}
	conf, err := parseArgs(args, io.Discard)
	if err != nil {
		return nil, err
	}
	return conf.UserConfig, nil
}

// Run does what Start does but returns errors instead of exiting. args are
// the command-line arguments without the program name (os.Args[1:]). It
// returns nil once ctx is cancelled and everything has been closed. A
// config it refuses is returned once ctx is cancelled, or at once when the
// config names no control port to report it on.
func Run(ctx context.Context, handler any, args []string) error {
	return run(ctx, handler, args)
}

// FunctionContext gives a handler the function's identity and config, the
// message being processed and a way to publish to other topics. The runtime
// hands a fresh one to every invocation. What concerns the input (Publish,
// Defer, Ack, GetCurrentRecord, Origin) must not be used after the handler
// returns, except the complete function of Defer; what concerns the
// instance (Fail, Pending, RecordMetric, GetSecret and the Get methods of
// its identity and config) may be used from any goroutine at any time:
// an input whose handler took its FunctionContext keeps its state to
// itself (see InputOf).
type FunctionContext struct {
	inst   *instance
	msg    pulsar.Message
	origin envelope.Origin
	acks   acker
	// published holds the records Publish buffered during the current call.
	published []Record
	// finished is set once the handler has returned for good.
	finished bool
	// importing is set while the handler gets the driver's import marker
	// (ImportedStates), imported once it took it (TakesImport).
	importing, imported bool
	// deferral is set when the current call deferred its outcome.
	deferral *deferral
	// lent is set once the handler took its FunctionContext (FromContext):
	// the input's state is then never recycled (see input.recycle).
	lent atomic.Bool
	// settle is what the current call registered with AfterSent.
	settle func(done func(error))
}

// Defer lets the handler finish the current input after it returns, so the
// runtime can hand it the next input meanwhile: a sink collects many inputs
// into one batch and answers each once the batch is stored. The handler
// returns nil and calls complete exactly once, later, from any goroutine:
// nil processes the input as a successful return would (its returned
// records are sent, then it is acknowledged); an error marked Permanent
// sends it to the dead-letter topic; any other error has it delivered
// again (the retries in place are over by then): when the runtime
// acknowledges (ATLEAST_ONCE with auto-ack), it ends the session as a
// failed send does, so that the input comes again before the ones after
// it; when the handler acknowledges (MANUAL, or auto-ack off), it
// negatively acknowledges the input; under ATMOST_ONCE the input was
// acknowledged on receipt and is not delivered again.
// Acknowledgements then come out of input order. If the handler returns an
// error after calling Defer, the deferral is void and complete does nothing.
func (c *FunctionContext) Defer() (complete func(error)) {
	c.deferral = &deferral{}
	return c.deferral.complete
}

// Pending returns how many input messages have been received and are
// waiting for the handler. A handler that batches (see Defer) can keep its
// batch open while more input is already here, instead of flushing a batch
// of one whenever it is called faster than it is fed.
func (c *FunctionContext) Pending() int {
	if c.inst.pending == nil {
		return 0
	}
	return c.inst.pending()
}

// Ack acknowledges the current input message. Only functions with processing
// guarantee MANUAL (or auto-ack off) need it; the runtime acknowledges
// everything else itself. Dead-lettered messages are always acknowledged by
// the runtime.
func (c *FunctionContext) Ack() error {
	if err := c.acks.Ack(c.msg); err != nil {
		return fmt.Errorf("acknowledging %v: %w", c.msg.ID(), err)
	}
	return nil
}

// Fail stops the instance because of err, a fault the handler cannot
// recover from (a panic in one of its own goroutines, a setup that can never
// succeed): the runtime stops taking input and shuts down as on SIGTERM,
// then Run returns err and Start exits with status 1, so that the worker
// starts the instance again. Inputs not yet acknowledged come again. Fail
// may be called from any goroutine, also after the handler returned; the
// first fault wins.
func (c *FunctionContext) Fail(err error) {
	c.inst.faults.Report(fmt.Errorf("stopped by the handler: %w", err))
}

// GetInstanceID returns the instance index, 0 to parallelism-1.
func (c *FunctionContext) GetInstanceID() int { return c.inst.conf.InstanceID }

// GetFuncTenant returns the function's tenant.
func (c *FunctionContext) GetFuncTenant() string { return c.inst.conf.Tenant }

// GetFuncNamespace returns the function's namespace (without the tenant).
func (c *FunctionContext) GetFuncNamespace() string { return c.inst.conf.Namespace }

// GetFuncName returns the function's name.
func (c *FunctionContext) GetFuncName() string { return c.inst.conf.Name }

// GetFuncID returns the id the worker gave this run of the function.
func (c *FunctionContext) GetFuncID() string { return c.inst.conf.FuncID }

// GetFuncVersion returns the version the worker gave this run of the function.
func (c *FunctionContext) GetFuncVersion() string { return c.inst.conf.FuncVersion }

// GetInputTopics returns the input topics and topic patterns.
func (c *FunctionContext) GetInputTopics() []string {
	topics := make([]string, 0, len(c.inst.conf.Inputs))
	for _, in := range c.inst.conf.Inputs {
		topics = append(topics, in.Topic)
	}
	return topics
}

// GetOutputTopic returns the function's output topic, "" when it has none.
func (c *FunctionContext) GetOutputTopic() string { return c.inst.conf.OutputTopic }

// GetUserConfMap returns the function's user config, decoded from JSON
// (numbers are float64).
func (c *FunctionContext) GetUserConfMap() map[string]any { return c.inst.conf.UserConfig }

// GetUserConfValue returns one user config value, nil when absent.
func (c *FunctionContext) GetUserConfValue(key string) any { return c.inst.conf.UserConfig[key] }

// GetSecret returns one of the function's secrets (given with
// `functions create --secrets` or by foldline deploy); ok is false when the
// function has no such secret, or its value is not a string.
func (c *FunctionContext) GetSecret(key string) (value string, ok bool) {
	value, ok = c.inst.conf.Secrets[key]
	return value, ok
}

// GetCurrentRecord returns the input message being processed. Its
// properties must not be modified, and must not be read once the handler
// has returned (or, if it deferred, reported its outcome): the runtime
// then turns them into its output's.
func (c *FunctionContext) GetCurrentRecord() pulsar.Message { return c.msg }

// Origin returns the origin position of the input message: the one its
// properties carry, or the message's own topic and position when it is a
// ledger event.
func (c *FunctionContext) Origin() envelope.Origin { return c.origin }

// RecordMetric records a user metric; functions stats and the Prometheus
// endpoint show the last value recorded under name.
func (c *FunctionContext) RecordMetric(name string, value float64) {
	c.inst.stats.recordUserMetric(name, value)
}

// RecordMetricFunc records a user metric whose value functions stats and
// the Prometheus endpoint read from value each time they report it: for a
// figure that changes with every message (a count, a time), which
// RecordMetric would have to set per message. value is called from other
// goroutines, must be safe for that and quick, and must not call back into
// the FunctionContext. Under one name the later of RecordMetric and
// RecordMetricFunc wins.
func (c *FunctionContext) RecordMetricFunc(name string, value func() float64) {
	c.inst.stats.recordUserMetricFunc(name, value)
}

// Publish sends rec (to rec.Topic, or to the output topic when it is empty)
// with the same defaults as a handler's returned records: the input's key,
// properties, origin and event time unless rec sets them. The send is
// asynchronous; with ATLEAST_ONCE the input is acknowledged only after every
// record published during the invocation is confirmed.
func (c *FunctionContext) Publish(ctx context.Context, rec Record) error {
	return c.inst.publish(ctx, c, rec)
}
