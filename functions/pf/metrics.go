package pf

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics an instance serves on its metricsPort (and the worker's
// /metrics copies as they are). The pulsar_function_ names are the worker's
// own, with the same meaning as under the Java and upstream Go runtimes; the
// foldline_ names are this runtime's additions. Every series carries the
// instance's labels (see promLabels); the _1min gauges are the counts of the
// current one-minute window.
const (
	MetricReceived                  = "pulsar_function_received_total"
	MetricProcessedSuccessfully     = "pulsar_function_processed_successfully_total"
	MetricUserExceptions            = "pulsar_function_user_exceptions_total"
	MetricSystemExceptions          = "pulsar_function_system_exceptions_total"
	MetricLastInvocation            = "pulsar_function_last_invocation"
	MetricProcessLatencyMs          = "pulsar_function_process_latency_ms"
	MetricUserException             = "pulsar_function_user_exception"
	MetricSystemException           = "pulsar_function_system_exception"
	MetricUserMetric                = "pulsar_function_user_metric"
	windowSuffix                    = "_1min"
	MetricReceived1Min              = MetricReceived + windowSuffix
	MetricProcessedSuccessfully1Min = MetricProcessedSuccessfully + windowSuffix
	MetricUserExceptions1Min        = MetricUserExceptions + windowSuffix
	MetricSystemExceptions1Min      = MetricSystemExceptions + windowSuffix
	MetricProcessLatencyMs1Min      = MetricProcessLatencyMs + windowSuffix

	// MetricDeadLetters counts the inputs whose dead letter the broker
	// confirmed, by LabelReason (one of DeadLetterReasons, never the
	// error's text: that would make a series per distinct error).
	MetricDeadLetters = "foldline_dead_letters_total"
	// LabelReason is MetricDeadLetters' label.
	LabelReason = "reason"
)

// MetricNames lists every metric name the runtime itself serves, for
// dashboards and their tests. Handlers add their own (see
// FunctionContext.MetricsRegisterer).
func MetricNames() []string {
	return []string{
		MetricReceived, MetricProcessedSuccessfully, MetricUserExceptions, MetricSystemExceptions,
		MetricReceived1Min, MetricProcessedSuccessfully1Min, MetricUserExceptions1Min, MetricSystemExceptions1Min,
		MetricLastInvocation, MetricProcessLatencyMs, MetricProcessLatencyMs1Min,
		MetricUserException, MetricSystemException, MetricUserMetric, MetricDeadLetters,
	}
}

// DeadLetterReason classes why an input went to the dead-letter topic. The
// set is small and fixed so that it can label a metric; the dead letter's
// foldline.dlq.reason property keeps the full text.
type DeadLetterReason string

// The dead-letter reasons.
const (
	// ReasonMalformed: the input cannot be decoded — its payload, or its
	// origin properties.
	ReasonMalformed DeadLetterReason = "malformed"
	// ReasonSchema: the input decodes but does not fit the schema it is
	// meant for (a view's unknown column, a key of the wrong shape, a value
	// that does not fit its column's type).
	ReasonSchema DeadLetterReason = "schema"
	// ReasonRejected: refused for good for any other reason; what a
	// Permanent error without a reason of its own counts as.
	ReasonRejected DeadLetterReason = "rejected"
	// ReasonTooLarge: an output is larger than a message may be.
	ReasonTooLarge DeadLetterReason = "too_large"
	// ReasonRetriesExhausted: the handler kept failing with an error not
	// marked Permanent until maxRetries ran out.
	ReasonRetriesExhausted DeadLetterReason = "retries_exhausted"
	// ReasonOther: a reason this runtime does not know (a handler's own
	// DeadLetterReason method returned something else).
	ReasonOther DeadLetterReason = "other"
)

// DeadLetterReasons lists every reason, in the order of deadLetterReason.
func DeadLetterReasons() []DeadLetterReason {
	return []DeadLetterReason{ReasonMalformed, ReasonSchema, ReasonRejected, ReasonTooLarge, ReasonRetriesExhausted, ReasonOther}
}

// deadLetterReason is a DeadLetterReason as an index into the counters.
type deadLetterReason uint8

const (
	reasonMalformed deadLetterReason = iota
	reasonSchema
	reasonRejected
	reasonTooLarge
	reasonRetriesExhausted
	reasonOther
	deadLetterReasons
)

// reasonIndex maps a reason's text to its counter; anything unknown is other.
func reasonIndex(r string) deadLetterReason {
	for i, known := range DeadLetterReasons() {
		if string(known) == r {
			return deadLetterReason(i)
		}
	}
	return reasonOther
}

// reasoned is implemented by an error that knows its dead-letter reason. A
// package that cannot import pf (transform's MalformedError) implements it
// with a plain string.
type reasoned interface{ DeadLetterReason() string }

// reasonedError is an error marked by WithReason.
type reasonedError struct {
	reason DeadLetterReason
	err    error
}

func (e *reasonedError) Error() string            { return e.err.Error() }
func (e *reasonedError) Unwrap() error            { return e.err }
func (e *reasonedError) DeadLetterReason() string { return string(e.reason) }

// WithReason marks err with the reason its input would go to the
// dead-letter topic for; it does not make err Permanent (wrap one in the
// other for both). WithReason(r, nil) is nil.
func WithReason(reason DeadLetterReason, err error) error {
	if err == nil {
		return nil
	}
	return &reasonedError{reason: reason, err: err}
}

// classify returns why err sends its input to the dead-letter topic: the
// reason it carries (WithReason, or an error's own DeadLetterReason
// method), then too large, then rejected for a Permanent error, and
// retries exhausted for any other.
func classify(err error) deadLetterReason {
	var r reasoned
	switch {
	case errors.As(err, &r):
		return reasonIndex(r.DeadLetterReason())
	case isTooLarge(err):
		return reasonTooLarge
	case IsPermanent(err):
		return reasonRejected
	}
	return reasonRetriesExhausted
}

// ReasonOf returns the reason the runtime counts the dead letter of an
// input whose handler failed with err under (after its retries, for an
// error not marked Permanent).
func ReasonOf(err error) DeadLetterReason { return DeadLetterReasons()[classify(err)] }

// MetricsRegisterer returns where the handler registers metrics of its
// own (histograms, counters) to be served on the instance's metricsPort
// next to the runtime's, each series with the instance's labels (tenant,
// namespace, name, instance_id, cluster, fqfn), which the handler's
// metrics must therefore not use. Unlike RecordMetric's values, they do
// not reach functions stats, whose user metrics are single numbers. In a
// local run nothing serves them. Register once per instance (a second
// registration of the same metric fails with
// prometheus.AlreadyRegisteredError).
func (c *FunctionContext) MetricsRegisterer() prometheus.Registerer {
	return prometheus.WrapRegistererWith(promLabels(c.inst.conf), c.inst.registry)
}
