package pf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
	"github.com/foldline/foldline/internal/safego"
)

// shutdownGrace bounds the whole shutdown; the worker kills an instance 10 s
// after SIGTERM.
const shutdownGrace = 8 * time.Second

// minReconnectWait is the least wait before connecting again after a failed
// send, whatever retryBackoffMs says.
const minReconnectWait = 100 * time.Millisecond

// startMain runs run (run or runChain with its handlers) on the command
// line until it returns, SIGTERM or SIGINT, or the worker that started the
// process is gone.
func startMain(run func(ctx context.Context, args []string) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, orphaned := context.WithCancel(ctx)
	defer orphaned()
	go exitWithParent(ctx, orphaned)
	done := make(chan error, 1)
	go func() { done <- run(ctx, os.Args[1:]) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Closing can hang on an unreachable broker; exit before the worker's
	// SIGKILL so the exit is ours. Unacknowledged input is redelivered.
	select {
	case err := <-done:
		return err
	case <-time.After(shutdownGrace + time.Second):
		return errors.New("shutting down: closing consumers, producers and client took too long")
	}
}

// exitWithParent shuts the instance down when the worker that started it
// dies (the process is re-parented): the restarted worker starts a new
// instance on the same ports and subscription.
func exitWithParent(ctx context.Context, shutDown func()) {
	parent := os.Getppid()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if os.Getppid() != parent {
				slog.Warn("the functions worker that started this instance is gone; shutting down")
				shutDown()
				return
			}
		}
	}
}

// run runs handler with the instance config of args. Under the worker, an
// instance that cannot start says why in its status until it is stopped
// (refusal.go); a local run returns the error.
func run(ctx context.Context, handler any, args []string) error {
	local := len(args) > 0 && args[0] == LocalFlag
	if local {
		args = args[1:]
	}
	inst, stopProfile, err := start(handler, args, local)
	if err != nil {
		if local {
			return err
		}
		return refuse(ctx, args, err, os.Stderr)
	}
	if local {
		err = inst.runLocal(ctx, os.Stdin, os.Stdout)
	} else {
		err = inst.run(ctx)
	}
	return errors.Join(err, stopProfile())
}

// start makes the instance of handler that args configure: everything an
// instance needs before it connects.
func start(handler any, args []string, local bool) (_ *instance, stopProfile func() error, _ error) {
	h, err := adaptHandler(handler)
	if err != nil {
		return nil, nil, err
	}
	conf, err := parseArgs(args, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	tuneRuntime(conf.Runtime, os.Getenv)
	inst := newInstance(conf, h, os.Stderr)
	if !local {
		if inst.epochs, err = newTopicEpochs(conf); err != nil {
			return nil, nil, err
		}
	}
	stopProfile, err = startCPUProfile(conf.CPUProfile)
	if err != nil {
		return nil, nil, err
	}
	return inst, stopProfile, nil
}

// instance is one running function instance.
type instance struct {
	conf    *instanceConf
	handler invoker
	stats   *stats
	// registry holds what the metrics endpoint serves: the runtime's
	// collector and the handler's own metrics (MetricsRegisterer).
	registry *prometheus.Registry
	log      *slog.Logger
	stderr   io.Writer
	// deadLetterLog bounds the dead-letter warnings (each dead letter
	// keeps its reason in the dead-letter topic).
	deadLetterLog *logLimit

	// sess is the current session, its producers and whether a send failed.
	sess *session
	// faults stops the instance: a panic in one of the runtime's goroutines,
	// or a fault a handler reports with FunctionContext.Fail.
	faults *safego.Faults
	// controlAddr and metricsAddr are where serve listens (tests dial them).
	controlAddr, metricsAddr string
	// inFlight counts inputs whose outputs are not yet all confirmed.
	inFlight sync.WaitGroup
	// pending counts the inputs received and not yet handed to the handler.
	pending func() int
	// skipped holds the topics whose subscription skipRest moved past a
	// replay's cutoff.
	skipped map[string]bool
	// local is set for a local run (LocalFlag or a chain): see RunsLocally.
	local bool
	// exporter is what a local run exports (SetExporter), nil for none.
	exporter func() ([]Record, error)
	// untimed leaves the handler's calls untimed: a local run has no
	// metrics to report them in, and two clock reads per input cost
	// about 3 % of a chain's CPU.
	untimed bool
	// inputs, in a local run, makes the inputs' state in slabs (see slab);
	// nil under the worker, where an input lives until its sends are
	// confirmed and a chunk would live as long as its slowest input.
	inputs *slab[input]
	// spare holds the state of inputs that are over, for the next inputs
	// to take (see input.recycle) before a new one is made.
	spare sync.Pool
	// epochs gives ledger events without an epoch of their own their
	// topic's: under the worker, read from the topic (topicEpochs) when
	// the admin URL is known; else the deploy's (UserConfigLedgerEpochs).
	epochs epochFinder
}

func newInstance(conf *instanceConf, h invoker, stderr io.Writer) *instance {
	inst := &instance{
		conf:     conf,
		handler:  h,
		stats:    newStats(),
		registry: prometheus.NewRegistry(),
		stderr:   stderr,
		faults:   safego.New(),
		log:      slog.New(slog.NewTextHandler(stderr, nil)).With("function", conf.FQFN(), "instance", conf.InstanceID),

		deadLetterLog: deadLetterLogLimit(),
		epochs:        conf.LedgerEpochs,
	}
	inst.stats.reportFingerprint(conf.UserConfig)
	inst.registry.MustRegister(&collector{s: inst.stats, labels: promLabels(conf)})
	return inst
}

// input is the runtime's state for one input message, from receipt until
// its outputs are confirmed. It holds in one allocation what the hot path
// needs per message: the function context the handler gets and the context
// carrying it, room for one returned record and one output message, and the
// count of sends in flight.
type input struct {
	fc  FunctionContext
	ctx handlerContext
	// records has room for the record of a handler that returns one payload.
	records [1]Record
	// out are the messages sent for the input; one and first hold a single
	// output.
	out   []outbound
	one   [1]outbound
	first pulsar.ProducerMessage
	// sess is the session the input was taken in.
	sess *session
	// success counts the input as processed once out is confirmed; ack
	// acknowledges it then.
	success, ack bool
	// deadLetterReason is why the input is being dead-lettered, counted
	// once the dead letter is confirmed.
	deadLetterReason deadLetterReason
	// attempts is how many times the handler was called.
	attempts int
	// deadLetters counts the dead letters tried: a second one carries no
	// payload (see deadLetter).
	deadLetters int
	remaining   atomic.Int32
	failed      atomic.Pointer[error]
	// callback is sent as a producer's callback (see callback).
	callback func(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

// process handles one input message: calls the handler (retrying in place
// with backoff), sends the outputs or the dead letter asynchronously and
// acknowledges the input once they are confirmed. It returns before the
// sends complete, so that the next message is taken while they are in
// flight; sends to one topic keep their order. It returns an error only when
// ctx ends while a retry waits, or when the handler failed after a fault
// was reported (FunctionContext.Fail): the message is then left
// unacknowledged.
func (inst *instance) process(ctx context.Context, msg pulsar.Message, acks acker) error {
	inst.stats.received.inc()
	autoAck := inst.conf.AutoAck && inst.conf.Guarantee != manual
	if autoAck && inst.conf.Guarantee == atMostOnce {
		if err := acks.Ack(msg); err != nil {
			inst.stats.recordException(sourceException, fmt.Errorf("acknowledging %v: %w", msg.ID(), err))
		}
		autoAck = false
	}
	origin, err := originOf(ctx, msg, inst.epochs)
	for attempt := 1; errors.Is(err, errEpochLookup); attempt++ {
		// Never processed without its epoch: it waits, and the stage's
		// status shows why.
		inst.stats.recordException(sourceException, err)
		inst.log.Warn("a ledger event without an epoch: its topic's epoch could not be read; trying again", "topic", msg.Topic(), "id", msg.ID().String(), "attempt", attempt, "error", err)
		if waitErr := sleep(ctx, inst.backoff(attempt)); waitErr != nil {
			return waitErr
		}
		origin, err = originOf(ctx, msg, inst.epochs)
	}
	in := inst.newInput()
	in.fc, in.sess = FunctionContext{inst: inst, msg: msg, origin: origin, acks: acks}, inst.sess
	in.ctx = handlerContext{Context: ctx, fc: &in.fc}
	if err == nil && inst.conf.Until.skips(msg, origin) {
		// Beyond the replay's cutoff: acknowledged, never handled.
		in.fc.finished = true
		inst.send(in, inst.conf.Guarantee != atMostOnce, true, nil)
		if inst.conf.Until.endsLedger(msg, origin) {
			inst.skipRest(msg, acks)
		}
		return nil
	}
	if inst.local && err == nil {
		if records, marker, markerErr := inst.driverMarker(in); marker {
			if markerErr != nil {
				return markerErr
			}
			in.fc.finished = true
			inst.sendOutputs(in, autoAck, records)
			return nil
		}
	}
	var records []Record
	attempts := 0
	if err != nil {
		err = Permanent(WithReason(ReasonMalformed, fmt.Errorf("reading origin of input: %w", err)))
		inst.stats.recordException(userException, err)
	}
	for err == nil {
		attempts++
		records, err = inst.invoke(in)
		if err == nil {
			break
		}
		inst.stats.recordException(userException, err)
		if fault := inst.faults.Err(); fault != nil {
			// The instance is stopping (FunctionContext.Fail, as a stateful
			// stage does when its state table cannot be opened): the input
			// stays unacknowledged, to come again once the worker has
			// started the instance anew, instead of going to the dead
			// letters for a fault that is not its own.
			return fault
		}
		if IsPermanent(err) || attempts > inst.conf.MaxRetries {
			break
		}
		inst.log.Warn("handler failed; retrying", "topic", msg.Topic(), "id", msg.ID().String(), "attempt", attempts, "error", err)
		if waitErr := sleep(ctx, inst.backoff(attempts)); waitErr != nil {
			return waitErr
		}
		err = nil
	}
	in.fc.finished = true
	in.attempts = attempts

	switch {
	case err != nil:
		inst.deadLetter(in, err)
	case in.fc.deferral != nil:
		inst.finishLater(in, autoAck, records)
	default:
		inst.sendOutputs(in, autoAck, records)
	}
	return nil
}

// driverMarker returns, for an input of a local run's driver that is one
// of its markers (marker true), what the instance sends for it: for an
// export marker (PropExportStates) its exporter's records to StatesTopic,
// each naming the function; for an import marker (PropImportStates) naming
// this function nothing, once its handler took the import; and the marker
// itself for the next function, but for a taken import. An exporter's or
// importer's error, or an import no handler takes, ends the run.
func (inst *instance) driverMarker(in *input) (records []Record, marker bool, err error) {
	msg := in.fc.msg
	props := msg.Properties()
	switch function := props[PropImportStates]; {
	case props[PropExportStates] != "":
		if inst.exporter != nil {
			exported, err := inst.exporter()
			if err != nil {
				return nil, true, fmt.Errorf("exporting the states of %s: %w", inst.conf.FQFN(), err)
			}
			for _, r := range exported {
				r.Topic = StatesTopic
				r.Properties = map[string]string{PropStatesFunction: inst.conf.Name}
				records = append(records, r)
			}
		}
	case function == inst.conf.Name:
		return nil, true, inst.takeImport(in)
	case function == "":
		return nil, false, nil
	}
	if inst.conf.OutputTopic != "" {
		records = append(records, Record{Payload: msg.Payload()})
	}
	return records, true, nil
}

// takeImport hands the driver's import marker for this function to the
// handler, which must take it (TakesImport).
func (inst *instance) takeImport(in *input) error {
	in.fc.importing = true
	_, err := inst.handler.call(&in.ctx, in.fc.msg.Payload(), nil)
	in.fc.importing = false
	if err != nil {
		return fmt.Errorf("importing the states of %s: %w", inst.conf.FQFN(), err)
	}
	if !in.fc.imported {
		return fmt.Errorf("importing the states of %s: its handler keeps no states", inst.conf.FQFN())
	}
	return nil
}

// newInput returns a new input's state.
func (inst *instance) newInput() *input {
	if in, ok := inst.spare.Get().(*input); ok {
		return in
	}
	if inst.inputs != nil {
		return inst.inputs.new()
	}
	return new(input)
}

// recycle gives the input's state to a later input once it is over:
// acknowledged, with at most one output, and a handler that never took
// its FunctionContext (FromContext), so that no one holds a FunctionContext
// that would then be another input's. The producer is done with the
// output by then: it called back, and reads nothing of the message after
// that. A goroutine the handler left behind may still hold the input's
// context: it keeps the run's context, so that Done and Err still work.
// A local run recycles them too: a fused backfill's chain made about 1.2 KB
// of inputs' state per ledger event otherwise, for the collector to sweep.
func (in *input) recycle() {
	inst := in.fc.inst
	if len(in.out) > 1 || in.fc.lent.Load() {
		return
	}
	// callback is bound to in: the next input at in uses it as it is.
	*in = input{callback: in.callback, ctx: handlerContext{Context: in.ctx.Context, fc: &in.fc}}
	inst.spare.Put(in)
}

// skipRest moves the subscription of msg's topic to the end, once per
// topic, when msg is the first ledger event past a replay's cutoff: a
// replay early in a long ledger then stops reading instead of reading and
// skipping the rest. It first waits until every earlier input's outputs
// are confirmed and acknowledged, so that none is lost by the move.
//
// A partition's events are not skipped: pulsar-client-go moves every
// partition of a partitioned topic's consumer at once, which would skip
// the other partitions' events before the cutoff too. A replay of a
// partitioned ledger reads each partition to its end and drops what is
// past the cutoff.
func (inst *instance) skipRest(msg pulsar.Message, acks acker) {
	s, ok := acks.(seeker)
	if _, partition := partitionOf(msg.Topic()); !ok || partition || inst.skipped[msg.Topic()] {
		return
	}
	if inst.skipped == nil {
		inst.skipped = map[string]bool{}
	}
	inst.skipped[msg.Topic()] = true
	inst.inFlight.Wait()
	if inst.sess.isEnded() {
		return // the session's inputs come again; the next one moves
	}
	if err := s.SeekByTime(time.Now()); err != nil {
		inst.log.Warn("moving past the replay's cutoff: reading on instead", "topic", msg.Topic(), "error", err)
		return
	}
	inst.log.Info("past the replay's cutoff: the rest of the topic is skipped", "topic", msg.Topic(), "id", msg.ID().String())
}

// sendOutputs sends the messages of the handler's records, or, when one of
// them is larger than any message may be, sends the input to the
// dead-letter topic instead: such an output can never be sent, and
// retrying it would hold up its input forever.
func (inst *instance) sendOutputs(in *input, ack bool, records []Record) {
	out := inst.outputs(in, records)
	for _, o := range out {
		if n := messageSize(o.msg); n > inst.conf.MaxMessageBytes {
			err := fmt.Errorf("%w: the output to %s has %d bytes, more than the %d a message may have (maxMessageBytes)",
				errTooLarge, o.topic, n, inst.conf.MaxMessageBytes)
			inst.stats.recordException(userException, err)
			inst.deadLetter(in, err)
			return
		}
	}
	inst.send(in, ack, true, out)
}

// deadLetter sends the input to the dead-letter topic with the reason and
// acknowledges it once the dead letter is confirmed. A dead letter that
// would be too large (an input near the size limit), or that the producer
// refused as too large, is sent again without the input's payload and
// properties, with the payload's size: a dead letter that can never be
// sent would hold up its input forever.
func (inst *instance) deadLetter(in *input, reason error) {
	msg := in.fc.msg
	if ok, omitted := inst.deadLetterLog.allow(time.Now()); ok {
		attrs := []any{"topic", msg.Topic(), "id", msg.ID().String(), "batch", msg.ID().BatchIdx(), "attempts", in.attempts, "error", reason}
		if omitted > 0 {
			attrs = append(attrs, "not_logged_before", omitted)
		}
		inst.log.Warn("sending to dead-letter topic", attrs...)
	}
	if in.deadLetters == 0 {
		in.deadLetterReason = classify(reason)
	}
	in.deadLetters++
	in.first = pulsar.ProducerMessage{}
	inst.conf.OriginForm.setDeadLetter(&in.first, msg, in.fc.origin, inst.conf.FQFN(), in.attempts, reason)
	if in.deadLetters > 1 || messageSize(&in.first) > inst.conf.MaxMessageBytes {
		in.deadLetters = 2
		in.first = pulsar.ProducerMessage{}
		inst.conf.OriginForm.setBareDeadLetter(&in.first, msg, in.fc.origin, inst.conf.FQFN(), in.attempts, reason)
	}
	in.one[0] = outbound{topic: inst.conf.DeadLetterTopic, msg: &in.first}
	// A dead letter is acknowledged whatever the guarantee (unless already
	// acknowledged on receipt): no handler will ever ack it.
	ackDead := inst.conf.Guarantee != atMostOnce
	inst.send(in, ackDead, false, in.one[:])
}

// outputs turns a handler's records into messages for their topics, the
// first one in the input's own room.
func (inst *instance) outputs(in *input, records []Record) []outbound {
	out := in.one[:0]
	for i := range records {
		rec := &records[i]
		topic := rec.Topic
		if topic == "" {
			topic = inst.conf.OutputTopic
		}
		if topic == "" {
			continue // no output topic: the output is dropped, as upstream
		}
		pm := &in.first
		if len(out) > 0 {
			pm = new(pulsar.ProducerMessage)
		}
		// Each of several outputs gets its own position under the input's
		// origin, so that a sink tells them apart from redeliveries.
		// The one output may take the input's properties over: the
		// handler has returned.
		inst.conf.OriginForm.setOutput(pm, in.fc.msg, in.fc.origin.Child(i, len(records)), rec, len(records) == 1)
		out = append(out, outbound{topic: topic, msg: pm})
	}
	return out
}

// finishLater finishes an input whose handler deferred its outcome (see
// FunctionContext.Defer) once the outcome is reported. Until then the input
// counts as in flight, so shutdown waits for it within its grace.
func (inst *instance) finishLater(in *input, autoAck bool, records []Record) {
	inst.inFlight.Add(1)
	in.fc.deferral.resolve(func(outcome error) {
		defer inst.inFlight.Done()
		switch {
		case outcome == nil:
			inst.sendOutputs(in, autoAck, records)
		case IsPermanent(outcome):
			inst.stats.recordException(userException, outcome)
			inst.deadLetter(in, outcome)
		default:
			inst.stats.recordException(userException, outcome)
			switch {
			case autoAck:
				// As a failed send does (see session): a negative
				// acknowledgement would let later inputs overtake this one.
				in.sess.end(fmt.Errorf("finishing a deferred input: %w", outcome))
			case inst.conf.Guarantee == atMostOnce:
				// Acknowledged on receipt: at most once, so not again.
			default:
				// The handler acknowledges (MANUAL, or auto-ack off), and
				// it has no input to acknowledge: without a negative
				// acknowledgement the input would stay pending until the
				// consumer closes. The order is the handler's to keep.
				in.fc.acks.Nack(in.fc.msg)
			}
		}
	})
}

// outbound is one message to send.
type outbound struct {
	topic string
	msg   *pulsar.ProducerMessage
}

// send sends out asynchronously; when all are confirmed it counts the input
// as processed (if success) and acknowledges it (if ack). A failed send is a
// sink exception and ends the input's session (see session), which leaves
// the input and every later one for redelivery; nothing is sent once the
// session has ended.
func (inst *instance) send(in *input, ack, success bool, out []outbound) {
	inst.inFlight.Add(1)
	in.ack, in.success, in.out = ack, success, out
	if len(out) == 0 {
		in.finish(nil)
		return
	}
	if in.failed.Load() != nil {
		in.failed.Store(nil) // an input sent again (as a dead letter) starts afresh
	}
	in.remaining.Store(int32(len(out)))
	for _, o := range out {
		if in.sess.isEnded() {
			in.sendDone(errSessionEnded)
			continue
		}
		// Not the run's ctx: sends already started finish during shutdown.
		if err := in.sess.out.sendAsync(context.Background(), o.topic, o.msg, in); err != nil {
			in.sendDone(err)
		}
	}
}

// sent is the producer's callback for each of the input's messages.
func (in *input) sent(_ pulsar.MessageID, msg *pulsar.ProducerMessage, err error) {
	if err != nil {
		err = fmt.Errorf("sending to %s: %w", in.topicOf(msg), err)
	}
	in.sendDone(err)
}

// topicOf returns the topic the input's message msg was sent to.
func (in *input) topicOf(msg *pulsar.ProducerMessage) string {
	for _, o := range in.out {
		if o.msg == msg {
			return o.topic
		}
	}
	return "?"
}

// sendDone counts one of the input's sends as done, with its error, and
// finishes the input after the last one with the first error among them.
func (in *input) sendDone(err error) {
	if err != nil {
		failed := err // declared here, so that only a failure allocates
		in.failed.CompareAndSwap(nil, &failed)
	}
	if in.remaining.Add(-1) > 0 {
		return
	}
	var first error
	if p := in.failed.Load(); p != nil {
		first = *p
	}
	in.finish(first)
}

// finish counts and acknowledges the input once its sends are over. When
// one failed it ends the session (see session), unless the message was too
// large: then the input goes to the dead-letter topic instead. An input
// whose session has ended is left unacknowledged, to come again after the
// one that failed.
func (in *input) finish(err error) {
	inst := in.fc.inst
	defer inst.inFlight.Done()
	if err != nil {
		if !errors.Is(err, errSessionEnded) {
			inst.stats.recordException(sinkException, err)
		}
		if isTooLarge(err) && in.deadLetters < 2 && !in.sess.isEnded() {
			inst.deadLetter(in, err)
			return
		}
		if in.ack {
			in.sess.end(err)
		}
		return
	}
	if in.deadLetters > 0 {
		inst.stats.deadLetters[in.deadLetterReason].Add(1)
	}
	if in.ack && in.sess.isEnded() {
		return
	}
	if settle := in.fc.settle; settle != nil {
		// The handler acknowledges the input's effect first (AfterSent):
		// the input stays in flight until it is done.
		inst.inFlight.Add(1)
		var once sync.Once
		settle(func(err error) {
			once.Do(func() {
				defer inst.inFlight.Done()
				if err != nil {
					inst.stats.recordException(sinkException, fmt.Errorf("settling the input: %w", err))
					if in.ack {
						in.sess.end(err)
					}
					return
				}
				in.acknowledge()
			})
		})
		return
	}
	in.acknowledge()
}

// acknowledge counts the input as processed (if a success) and
// acknowledges it (if ack): its sends are over, and settled.
func (in *input) acknowledge() {
	inst, acks, msg := in.fc.inst, in.fc.acks, in.fc.msg
	if in.ack && in.sess.isEnded() {
		return
	}
	if in.success {
		inst.stats.processed.inc()
	}
	if in.ack {
		if ackErr := acks.Ack(msg); ackErr != nil {
			inst.stats.recordException(sourceException, fmt.Errorf("acknowledging %v: %w", msg.ID(), ackErr))
		}
	}
	in.recycle()
}

// invoke calls the handler once and returns the records it published and
// returned, in that order.
func (inst *instance) invoke(in *input) ([]Record, error) {
	fc := &in.fc
	fc.published = fc.published[:0]
	fc.deferral = nil
	fc.settle = nil
	var start time.Duration
	if !inst.untimed {
		start = inst.stats.now()
	}
	records, err := inst.handler.call(&in.ctx, fc.msg.Payload(), in.records[:0])
	if !inst.untimed {
		inst.stats.recordInvocation(start, inst.stats.now())
	}
	if err != nil {
		return nil, err
	}
	if len(fc.published) == 0 {
		return records, nil
	}
	return append(append([]Record(nil), fc.published...), records...), nil
}

// backoff is the wait before retry number attempt (1-based): the configured
// backoff doubled per attempt, capped.
func (inst *instance) backoff(attempt int) time.Duration {
	d := inst.conf.RetryBackoff
	for i := 1; i < attempt && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// publish buffers rec for sending once the handler returns successfully, so
// that a failed and retried invocation publishes nothing.
func (inst *instance) publish(_ context.Context, fc *FunctionContext, rec Record) error {
	if fc.finished {
		return errors.New("publishing after the handler returned")
	}
	if rec.Topic == "" && inst.conf.OutputTopic == "" {
		return errors.New("publishing a record without topic: the function has no output topic")
	}
	fc.published = append(fc.published, rec)
	return nil
}

// run serves the control and metrics endpoints, connects and processes
// messages until ctx ends, then shuts down within shutdownGrace. A failed
// send ends the connection's session (see session): run then waits, with
// backoff, and connects again. A session that cannot start (no client,
// producer or subscription) leaves the instance not running, with the
// reason in its status, and run tries again with backoff (refusal.go). It
// returns an error when a fault stopped the instance (see
// FunctionContext.Fail).
func (inst *instance) run(ctx context.Context) error {
	stopServers, err := inst.serve()
	if err != nil {
		return err
	}
	defer stopServers()
	failedSends, failedStarts := 0, 0
	for {
		err := inst.connect(ctx)
		var notStarted *startError
		switch {
		case errors.As(err, &notStarted):
			// Not running: the status says why until it runs (refusal.go).
			failedStarts++
			failedSends = 0
			inst.stats.notStarted(err)
			wait := max(inst.backoff(failedStarts), minStartWait)
			inst.log.Error("cannot start; functions status shows why; trying again", "error", err, "wait", wait)
			if sleep(ctx, wait) != nil {
				return nil
			}
		case errors.Is(err, errSendFailed):
			failedSends++
			failedStarts = 0
			wait := max(inst.backoff(failedSends), minReconnectWait)
			inst.log.Warn("a send failed; connecting again so that every input not acknowledged comes again, in order",
				"error", err, "wait", wait)
			if sleep(ctx, wait) != nil {
				return nil
			}
		default:
			return err
		}
	}
}

// minStartWait is the least wait before trying to start again after a
// start failed (the broker unreachable, a subscription refused).
const minStartWait = time.Second

// connect makes one session: a client, its producers and consumers, and
// processes messages until ctx ends, a fault stops the instance or the
// session ends; then it drains and closes them.
func (inst *instance) connect(ctx context.Context) error {
	c := inst.conf
	client, err := pulsar.NewClient(inst.clientOptions())
	if err != nil {
		return notStarting(fmt.Errorf("creating pulsar client for %s: %w", c.ServiceURL, err))
	}
	defer client.Close()

	prods := newProducers(client, inst.producerOptions)
	inst.sess = newSession(prods)
	defer prods.close()
	if c.LogTopic != "" {
		if err := inst.forwardLogs(prods); err != nil {
			return notStarting(err)
		}
	}
	if c.OutputTopic != "" {
		if _, err := prods.get(c.OutputTopic); err != nil {
			return notStarting(err)
		}
	}

	messages := make(chan pulsar.ConsumerMessage, c.messageQueue())
	inst.pending = func() int { return len(messages) }
	cons, err := newConsumers(c.Inputs, func(in inputSpec) (pulsar.Consumer, error) {
		consumer, err := client.Subscribe(inst.consumerOptions(in, messages))
		if err != nil {
			return nil, fmt.Errorf("subscribing %s to %s: %w", c.SubscriptionName, in.Topic, err)
		}
		return consumer, nil
	}, inst.log)
	if err != nil {
		return notStarting(err)
	}
	defer cons.close()
	inst.stats.runs()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	inst.faults.Go("probing consumers", func() { cons.watch(watchCtx, inst.stats.received.total.Load) })
	inst.log.Info("running", "inputs", len(c.Inputs), "subscription", c.SubscriptionName,
		"type", c.SubscriptionType, "output", c.OutputTopic, "deadLetterTopic", c.DeadLetterTopic)

	err = inst.consume(ctx, messages)
	inst.log.Info("closing consumers and producers")
	inst.drain(prods)
	return err
}

// consume processes messages until ctx ends (nil), a fault stops the
// instance or the session ends (their errors).
func (inst *instance) consume(ctx context.Context, messages <-chan pulsar.ConsumerMessage) error {
	window := time.NewTicker(time.Minute)
	defer window.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-inst.faults.Done():
			return inst.faults.Err()
		case <-inst.sess.ended:
			return inst.sess.err()
		case <-window.C:
			inst.stats.resetWindow()
		case cm := <-messages:
			if stop, err := inst.take(ctx, cm); stop {
				return err
			}
			// What has already arrived is taken without the select above,
			// which costs more per message than the handler of a light
			// stage: a backlog passes maxDrain messages per select, so a
			// shutdown or fault waits for at most that many more.
			for range maxDrain {
				select {
				case cm := <-messages:
					if stop, err := inst.take(ctx, cm); stop {
						return err
					}
					continue
				default:
				}
				break
			}
		}
	}
}

// maxDrain bounds the messages consume takes between two checks for the
// end of the run, a fault or a window to start.
const maxDrain = 64

// take processes one message of consume; stop says whether consume ends,
// with err: when the session has ended (the message is left
// unacknowledged, to come again in the next session), when ctx ended during
// a retry's wait (nil), or when a fault stops the instance (the fault; the
// message is left unacknowledged too).
func (inst *instance) take(ctx context.Context, cm pulsar.ConsumerMessage) (stop bool, err error) {
	if inst.sess.isEnded() {
		return true, inst.sess.err()
	}
	// A fault stops the instance before its next input, not only when the
	// select in consume happens to pick it among messages ready.
	if fault := inst.faults.Err(); fault != nil {
		return true, fault
	}
	if err := inst.process(ctx, cm.Message, cm.Consumer); err != nil {
		return true, inst.faults.Err()
	}
	return false, nil
}

// drain waits, within shutdownGrace, for the outputs in flight so that their
// inputs get acknowledged before the consumers close.
func (inst *instance) drain(prods *producers) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace/2)
	defer cancel()
	prods.flush(ctx)
	done := make(chan struct{})
	go func() { inst.inFlight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		inst.log.Warn("shutting down with outputs unconfirmed; their inputs will be redelivered")
	}
}

func (inst *instance) clientOptions() pulsar.ClientOptions {
	c := inst.conf
	opts := pulsar.ClientOptions{
		URL:                        c.ServiceURL,
		TLSTrustCertsFilePath:      c.TLSTrustCertsFilePath,
		TLSAllowInsecureConnection: c.TLSAllowInsecure,
		TLSValidateHostname:        c.TLSHostnameVerification,
		// The client's own logs go to stderr only: forwarding them to the
		// log topic would feed back through the client.
		Logger: pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(inst.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if c.Token != "" {
		opts.Authentication = pulsar.NewAuthenticationToken(c.Token)
	}
	return opts
}

func (inst *instance) clientProperties() map[string]string {
	return map[string]string{
		"application": "pulsar-function",
		"id":          inst.conf.FQFN(),
		"instance_id": fmt.Sprint(inst.conf.InstanceID),
	}
}

func (inst *instance) consumerOptions(in inputSpec, messages chan pulsar.ConsumerMessage) pulsar.ConsumerOptions {
	c := inst.conf
	opts := pulsar.ConsumerOptions{
		SubscriptionName:            c.SubscriptionName,
		Type:                        c.SubscriptionType,
		SubscriptionInitialPosition: c.SubscriptionPosition,
		MessageChannel:              messages,
		ReceiverQueueSize:           in.ReceiverQueueSize,
		NackRedeliveryDelay:         c.NackRedeliveryDelay,
		Properties:                  inst.clientProperties(),
	}
	if in.IsRegex {
		opts.TopicsPattern = in.Topic
	} else {
		opts.Topic = in.Topic
	}
	return opts
}

func (inst *instance) producerOptions(topic string) pulsar.ProducerOptions {
	c := inst.conf
	opts := pulsar.ProducerOptions{
		Topic:      topic,
		Properties: inst.clientProperties(),
		// No send timeout: a timed-out message fails while later ones stay
		// pending and go out after a reconnect, which would let them
		// overtake it (see session).
		SendTimeout: -1,
	}
	c.Client.applyProducer(&opts)
	if c.KeyBasedBatching {
		opts.BatcherBuilderType = pulsar.KeyBasedBatchBuilder
	}
	if c.Routing == routeByOrigin {
		opts.MessageRouter = routeByOriginPartition
	}
	return opts
}

// serve starts the gRPC control service on port and the Prometheus endpoint
// on metricsPort; the returned func stops both. The worker picks the two
// ports one after the other, each a port free at that moment, and can pick
// the same one twice: one listener then serves both (see sharedPort), where
// two would fail to start, and the worker would restart the instance on the
// same ports for ever.
func (inst *instance) serve() (stop func(), err error) {
	c := inst.conf
	grpcServer := grpc.NewServer()
	instancepb.RegisterInstanceControlServer(grpcServer, &controlService{s: inst.stats, instanceID: c.InstanceID})
	metrics := promhttp.HandlerFor(inst.registry, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("/", metrics)
	mux.Handle("/metrics", metrics)

	grpcListener, err := net.Listen("tcp", fmt.Sprintf(":%d", c.Port))
	if err != nil {
		return nil, fmt.Errorf("listening for control calls on port %d: %w", c.Port, err)
	}
	if c.Port != 0 && c.MetricsPort == c.Port {
		inst.log.Warn("the worker gave the control service and the metrics the same port: serving both on it", "port", c.Port)
		shared := sharedPort(grpcServer, mux)
		go func() { _ = shared.Serve(grpcListener) }()
		inst.controlAddr = grpcListener.Addr().String()
		inst.metricsAddr = inst.controlAddr
		return func() { _ = shared.Close() }, nil
	}
	metricsListener, err := net.Listen("tcp", fmt.Sprintf(":%d", c.MetricsPort))
	if err != nil {
		grpcListener.Close()
		return nil, fmt.Errorf("listening for metrics on port %d: %w", c.MetricsPort, err)
	}
	go func() { _ = grpcServer.Serve(grpcListener) }()
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = httpServer.Serve(metricsListener) }()

	inst.controlAddr = grpcListener.Addr().String()
	inst.metricsAddr = metricsListener.Addr().String()
	return func() {
		grpcServer.Stop()
		_ = httpServer.Close()
	}, nil
}

// sharedPort is one HTTP server for the control service and the metrics:
// gRPC calls (HTTP/2 without TLS, as the worker makes them) go to
// grpcServer, every other request to metrics.
func sharedPort(grpcServer *grpc.Server, metrics http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				grpcServer.ServeHTTP(w, r)
				return
			}
			metrics.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		Protocols:         &protocols,
	}
}
