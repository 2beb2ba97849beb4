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
)

// shutdownGrace bounds the whole shutdown; the worker kills an instance 10 s
// after SIGTERM.
const shutdownGrace = 8 * time.Second

func startMain(handler any) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, orphaned := context.WithCancel(ctx)
	defer orphaned()
	go exitWithParent(ctx, orphaned)
	done := make(chan error, 1)
	go func() { done <- run(ctx, handler, os.Args[1:]) }()
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

func run(ctx context.Context, handler any, args []string) error {
	h, err := adaptHandler(handler)
	if err != nil {
		return err
	}
	conf, err := parseArgs(args, os.Stderr)
	if err != nil {
		return err
	}
	tuneGC(conf, os.Getenv)
	return newInstance(conf, h, os.Stderr).run(ctx)
}

// instance is one running function instance.
type instance struct {
	conf    *instanceConf
	handler invoker
	stats   *stats
	log     *slog.Logger
	stderr  io.Writer

	out sender
	// controlAddr and metricsAddr are where serve listens (tests dial them).
	controlAddr, metricsAddr string
	// inFlight counts inputs whose outputs are not yet all confirmed.
	inFlight sync.WaitGroup
	// pending counts the inputs received and not yet handed to the handler.
	pending func() int
}

func newInstance(conf *instanceConf, h invoker, stderr io.Writer) *instance {
	return &instance{
		conf:    conf,
		handler: h,
		stats:   newStats(),
		stderr:  stderr,
		log:     slog.New(slog.NewTextHandler(stderr, nil)).With("function", conf.FQFN(), "instance", conf.InstanceID),
	}
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
	// success counts the input as processed once out is confirmed; ack
	// acknowledges it then.
	success, ack bool
	remaining    atomic.Int32
	failed       atomic.Pointer[error]
}

// process handles one input message: calls the handler (retrying in place
// with backoff), sends the outputs or the dead letter asynchronously and
// acknowledges the input once they are confirmed. It returns before the
// sends complete, so that the next message is taken while they are in
// flight; sends to one topic keep their order. It returns an error only when
// ctx ends while a retry waits: the message is then left unacknowledged.
func (inst *instance) process(ctx context.Context, msg pulsar.Message, acks acker) error {
	inst.stats.received.inc()
	autoAck := inst.conf.AutoAck && inst.conf.Guarantee != manual
	if autoAck && inst.conf.Guarantee == atMostOnce {
		if err := acks.Ack(msg); err != nil {
			inst.stats.recordException(sourceException, fmt.Errorf("acknowledging %v: %w", msg.ID(), err))
		}
		autoAck = false
	}
	origin, err := originOf(msg)
	in := &input{fc: FunctionContext{inst: inst, msg: msg, origin: origin, acks: acks}}
	in.ctx = handlerContext{Context: ctx, fc: &in.fc}
	if err == nil && inst.conf.Until.skips(msg, origin) {
		// Beyond the replay's cutoff: acknowledged, never handled.
		in.fc.finished = true
		inst.send(in, inst.conf.Guarantee != atMostOnce, true, nil)
		return nil
	}
	var records []Record
	attempts := 0
	if err != nil {
		err = Permanent(fmt.Errorf("reading origin of input: %w", err))
		inst.stats.recordException(userException, err)
	}
	for err == nil {
		attempts++
		records, err = inst.invoke(in)
		if err == nil {
			break
		}
		inst.stats.recordException(userException, err)
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

	switch {
	case err != nil:
		inst.deadLetter(in, attempts, err)
	case in.fc.deferral != nil:
		inst.finishLater(in, autoAck, records)
	default:
		inst.send(in, autoAck, true, inst.outputs(in, records))
	}
	return nil
}

// deadLetter sends the input to the dead-letter topic with the reason and
// acknowledges it once the dead letter is confirmed.
func (inst *instance) deadLetter(in *input, attempts int, reason error) {
	msg := in.fc.msg
	inst.log.Warn("sending to dead-letter topic", "topic", msg.Topic(), "id", msg.ID().String(), "attempts", attempts, "error", reason)
	setDeadLetter(&in.first, msg, in.fc.origin, inst.conf.FQFN(), attempts, reason)
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
		setOutput(pm, in.fc.msg, in.fc.origin.Child(i, len(records)), rec)
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
			inst.send(in, autoAck, true, inst.outputs(in, records))
		case IsPermanent(outcome):
			inst.stats.recordException(userException, outcome)
			inst.deadLetter(in, 1, outcome)
		default:
			inst.stats.recordException(userException, outcome)
			if autoAck {
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
// sink exception and negatively acknowledges the input for redelivery. An
// input is sent once.
func (inst *instance) send(in *input, ack, success bool, out []outbound) {
	inst.inFlight.Add(1)
	in.ack, in.success, in.out = ack, success, out
	if len(out) == 0 {
		in.finish(nil)
		return
	}
	in.remaining.Store(int32(len(out)))
	done := in.sent
	for _, o := range out {
		// Not the run's ctx: sends already started finish during shutdown.
		if err := inst.out.sendAsync(context.Background(), o.topic, o.msg, done); err != nil {
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

// finish counts and acknowledges the input once its sends are over, or
// negatively acknowledges it when one failed.
func (in *input) finish(err error) {
	inst, acks, msg := in.fc.inst, in.fc.acks, in.fc.msg
	defer inst.inFlight.Done()
	if err != nil {
		inst.stats.recordException(sinkException, err)
		if in.ack {
			acks.Nack(msg)
		}
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
}

// invoke calls the handler once and returns the records it published and
// returned, in that order.
func (inst *instance) invoke(in *input) ([]Record, error) {
	fc := &in.fc
	fc.published = fc.published[:0]
	fc.deferral = nil
	start := inst.stats.now()
	records, err := inst.handler.call(&in.ctx, fc.msg.Payload(), in.records[:0])
	inst.stats.recordInvocation(start, inst.stats.now())
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

// run connects, serves the control and metrics endpoints and processes
// messages until ctx ends, then shuts down within shutdownGrace.
func (inst *instance) run(ctx context.Context) error {
	c := inst.conf
	stopServers, err := inst.serve()
	if err != nil {
		return err
	}
	defer stopServers()

	client, err := pulsar.NewClient(inst.clientOptions())
	if err != nil {
		return fmt.Errorf("creating pulsar client for %s: %w", c.ServiceURL, err)
	}
	defer client.Close()

	prods := newProducers(client, inst.producerOptions)
	inst.out = prods
	defer prods.close()
	if c.LogTopic != "" {
		if err := inst.forwardLogs(prods); err != nil {
			return err
		}
	}
	if c.OutputTopic != "" {
		if _, err := prods.get(c.OutputTopic); err != nil {
			return err
		}
	}

	queue := defaultReceiverQ
	if len(c.Inputs) > 0 && c.Inputs[0].ReceiverQueueSize > 0 {
		queue = c.Inputs[0].ReceiverQueueSize
	}
	messages := make(chan pulsar.ConsumerMessage, queue)
	inst.pending = func() int { return len(messages) }
	cons, err := newConsumers(c.Inputs, func(in inputSpec) (pulsar.Consumer, error) {
		consumer, err := client.Subscribe(inst.consumerOptions(in, messages))
		if err != nil {
			return nil, fmt.Errorf("subscribing %s to %s: %w", c.SubscriptionName, in.Topic, err)
		}
		return consumer, nil
	}, inst.log)
	if err != nil {
		return err
	}
	defer cons.close()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go cons.watch(watchCtx, inst.stats.received.total.Load)
	inst.log.Info("running", "inputs", len(c.Inputs), "subscription", c.SubscriptionName,
		"type", c.SubscriptionType, "output", c.OutputTopic, "deadLetterTopic", c.DeadLetterTopic)

	window := time.NewTicker(time.Minute)
	defer window.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-window.C:
			inst.stats.resetWindow()
		case cm := <-messages:
			if err := inst.process(ctx, cm.Message, cm.Consumer); err != nil {
				break loop
			}
		}
	}
	inst.log.Info("shutting down")
	inst.drain(prods)
	return nil
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
		Topic:                   topic,
		CompressionType:         c.Compression,
		BatchingMaxPublishDelay: 10 * time.Millisecond,
		MaxPendingMessages:      c.MaxPendingMessages,
		Properties:              inst.clientProperties(),
	}
	if c.KeyBasedBatching {
		opts.BatcherBuilderType = pulsar.KeyBasedBatchBuilder
	}
	return opts
}

// serve starts the gRPC control service on port and the Prometheus endpoint
// on metricsPort; the returned func stops both.
func (inst *instance) serve() (stop func(), err error) {
	c := inst.conf
	grpcListener, err := net.Listen("tcp", fmt.Sprintf(":%d", c.Port))
	if err != nil {
		return nil, fmt.Errorf("listening for control calls on port %d: %w", c.Port, err)
	}
	metricsListener, err := net.Listen("tcp", fmt.Sprintf(":%d", c.MetricsPort))
	if err != nil {
		grpcListener.Close()
		return nil, fmt.Errorf("listening for metrics on port %d: %w", c.MetricsPort, err)
	}
	grpcServer := grpc.NewServer()
	instancepb.RegisterInstanceControlServer(grpcServer, &controlService{s: inst.stats, instanceID: c.InstanceID})
	go func() { _ = grpcServer.Serve(grpcListener) }()

	registry := prometheus.NewRegistry()
	registry.MustRegister(&collector{s: inst.stats, labels: promLabels(c)})
	metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("/", metrics)
	mux.Handle("/metrics", metrics)
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = httpServer.Serve(metricsListener) }()

	inst.controlAddr = grpcListener.Addr().String()
	inst.metricsAddr = metricsListener.Addr().String()
	return func() {
		grpcServer.Stop()
		_ = httpServer.Close()
	}, nil
}
