package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/safego"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Sink is the Pulsar Function handler of the Cassandra sink. main reads
// and checks its config before the runtime starts (a bad one exits the
// instance); the sink connects on the first message.
type Sink struct {
	cfg       cassandra.Config
	startOnce sync.Once
	ready     chan struct{}
	batcher   *cassandra.Batcher
	metrics   *cassandra.SinkMetrics
	// faults holds the sink's own fault: a set-up that gave up, or a
	// failure of its goroutines.
	faults *safego.Faults
	// instance is the first input's FunctionContext, kept for what
	// concerns the instance (secrets, faults, backlog, metrics): the
	// handler takes every other input with pf.InputOf and pf.Defer, so
	// that the runtime reuses their state.
	instance *pf.FunctionContext
}

// NewSink returns a sink of cfg (see readConfig) that connects on the
// first message.
func NewSink(cfg cassandra.Config) *Sink {
	return &Sink{cfg: cfg, ready: make(chan struct{}), metrics: cassandra.NewSinkMetrics()}
}

// Handle queues one view operation for the next batch and returns at once,
// deferring the message's outcome until Cassandra holds its effect: the
// runtime acknowledges only confirmed operations, and meanwhile hands over
// the next messages, which join the same batch. An operation that can never
// apply is reported as pf.Permanent, which sends it to the dead-letter topic
// with the reason.
func (s *Sink) Handle(ctx context.Context, payload []byte) error {
	in, ok := pf.InputOf(ctx)
	if !ok {
		return errors.New("handling a view operation: no function context; run the sink under pf.Start")
	}
	s.startOnce.Do(func() {
		s.instance, _ = pf.FromContext(ctx)
		if err := s.metrics.Register(s.instance.MetricsRegisterer()); err != nil {
			slog.Error("registering the sink's metrics: the metrics endpoint goes without them", "error", err)
		}
		// A panic in the sink's goroutines stops the instance with the
		// error, so that the worker starts it again, instead of ending
		// the process with no word or leaving callers waiting forever.
		// The Cassandra credentials are the tenant's, from the secrets.
		user, _ := s.instance.GetSecret(cassandra.SecretUsername)
		password, _ := s.instance.GetSecret(cassandra.SecretPassword)
		s.faults = safego.New()
		s.faults.Forward(s.instance.Fail)
		s.faults.Go("setting up the sink", func() { s.setUp(s.faults, user, password) })
	})
	op, err := envelope.DecodeRowOp(payload)
	if err != nil {
		return pf.Permanent(pf.WithReason(pf.ReasonMalformed, err))
	}
	origin := in.Origin
	if origin.IsZero() {
		if origin, err = envelope.OriginFromProperties(in.Message.Properties()); err != nil {
			return pf.Permanent(pf.WithReason(pf.ReasonMalformed, fmt.Errorf("reading the origin of a view operation on %s: %w", op.View, err)))
		}
	}
	select {
	case <-s.ready:
	case <-s.faults.Done():
		// The set-up gave up. The instance stops with its error, here and
		// now rather than from Forward's goroutine, so that the runtime
		// leaves this input for the next run instead of retrying it into
		// the dead letters.
		err := s.faults.Err()
		s.instance.Fail(err)
		return fmt.Errorf("waiting for the sink to connect to Cassandra: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the sink to connect to Cassandra: %w", context.Cause(ctx))
	}
	complete, _ := pf.Defer(ctx)
	s.batcher.Upcoming(s.instance.Pending())
	eventTime, published := op.EventTime, in.Message.PublishTime()
	return s.batcher.SubmitAsync(ctx, cassandra.Op{View: op, Origin: origin}, func(err error) {
		switch {
		case err == nil:
			s.metrics.Confirmed(eventTime, published, time.Now())
		case errors.Is(err, cassandra.ErrRejected):
			err = pf.Permanent(pf.WithReason(rejectedReason(err), err))
		}
		complete(err)
	})
}

// rejectedReason classes an operation Cassandra can never hold for its
// dead letter: one that does not fit the view's table (another view, an
// unknown column or merge, a key or value of the wrong shape) is a schema
// problem; anything else (an origin of another epoch, a write Cassandra
// refuses) is rejected.
func rejectedReason(err error) pf.DeadLetterReason {
	for _, target := range []error{cassandra.ErrWrongView, cassandra.ErrUnknownColumn, cassandra.ErrWrongMerge, cassandra.ErrBadKey, cassandra.ErrBadValue} {
		if errors.Is(err, target) {
			return pf.ReasonSchema
		}
	}
	return pf.ReasonRejected
}

// setUp connects, creates or checks the schema and starts the batcher. It
// retries: Cassandra may come up later, and a schema mismatch or a missing
// grant is fixed by an operator. Until it succeeds every handler call
// waits, so no message is acknowledged or dead-lettered for the sink's own
// trouble. After setupPatience of failures it reports the last error as a
// fault, which stops the instance with it: the worker restarts the
// instance (which tries again), and status shows the restarts and the
// error instead of an instance that runs and does nothing.
func (s *Sink) setUp(faults *safego.Faults, user, password string) {
	ctx := context.Background()
	cfg := s.cfg
	cfg.Settings.Username, cfg.Settings.Password = user, password
	wait := cfg.Settings.RetryBackoffMin
	giveUp := time.Now().Add(setupPatience)
	for {
		applier, session, err := cassandra.Open(ctx, cfg)
		if err == nil {
			applier.SetMetrics(s.metrics)
			s.batcher = cassandra.NewBatcher(applier, cfg.Settings.LiveCut(), cfg.Settings.Pipeline)
			s.recordUserMetrics()
			applier.Faults().Forward(faults.Report)
			s.batcher.Faults().Forward(faults.Report)
			if cfg.Settings.Registry != "" {
				watch := cassandra.RegistryWatch{Session: session, Keyspace: cfg.View.Keyspace, Registry: cfg.Settings.Registry,
					View: cfg.View.View, Table: cfg.View.Table}
				faults.Go("watching the view registry", func() { watch.Run(ctx, registryPoll, s.setCut(cfg)) })
			}
			faults.Go("gathering batches", func() { s.batcher.Run(ctx) })
			close(s.ready)
			slog.Info("the sink is applying view operations", "view", cfg.View.View, "table", cfg.View.Keyspace+"."+cfg.View.Table)
			return
		}
		if time.Now().After(giveUp) {
			faults.Report(fmt.Errorf("setting up the sink for %s (failing for %s): %w", cfg.View.Keyspace+"."+cfg.View.Table, setupPatience, err))
			return
		}
		slog.Error("setting up the sink, retrying", "wait", wait, "error", err)
		time.Sleep(wait)
		wait = min(2*wait, cfg.Settings.RetryBackoffMax)
	}
}

// setCut returns the registry watch's callback: batches are cut as for a
// table being built or a live one.
func (s *Sink) setCut(cfg cassandra.Config) func(building bool) {
	return func(building bool) {
		cut := cfg.Settings.LiveCut()
		if building {
			cut = cfg.Settings.BuildingCut()
		}
		s.batcher.SetCut(cut)
	}
}

// setupPatience is how long setUp retries before it stops the instance: a
// Cassandra restart takes well under it.
var setupPatience = 2 * time.Minute

// registryPoll is how often the sink reads its table's state in the
// registry: a table that went live gets live batches within this time.
const registryPoll = 2 * time.Second

// recordUserMetrics exports the batcher's totals, so that no skipped
// operation goes unseen, and the newest event and last publish times the
// sink confirmed, which foldline status shows: as user metrics read when
// functions stats or a scrape asks, not set per operation.
func (s *Sink) recordUserMetrics() {
	totals := func(count func(cassandra.Totals) int64) func() float64 {
		return func() float64 { return float64(count(s.batcher.Totals())) }
	}
	s.instance.RecordMetricFunc(cassandra.MetricApplied, totals(func(t cassandra.Totals) int64 { return t.Applied }))
	s.instance.RecordMetricFunc(cassandra.MetricSkipped, totals(func(t cassandra.Totals) int64 { return t.Skipped }))
	s.instance.RecordMetricFunc(cassandra.MetricRejected, totals(func(t cassandra.Totals) int64 { return t.Rejected }))
	s.instance.RecordMetricFunc(cassandra.MetricExpired, totals(func(t cassandra.Totals) int64 { return t.Expired }))
	s.instance.RecordMetricFunc(cassandra.MetricNewestEventTime, func() float64 { return unixSeconds(s.metrics.NewestEventTime()) })
	s.instance.RecordMetricFunc(cassandra.MetricLastAppliedPublishTime, func() float64 { return unixSeconds(s.metrics.LastAppliedPublishTime()) })
}

// unixSeconds is t in seconds since the epoch, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
