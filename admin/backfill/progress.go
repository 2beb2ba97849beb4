package backfill

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/progress"
)

// StageProgress is how far one stage of a backfill has got. Counts are in
// the broker's entries (a batch of events is one entry), the unit of both
// topic sizes and subscription backlogs; Processed is in events.
type StageProgress struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Subscription string `json:"subscription"`
	// Done is how many entries of its input the stage has acknowledged;
	// Total what it has to get through: the ledger's size when the
	// backfill started for a stage that reads the ledger, the input's
	// current size for a later stage (it grows as the stage before works).
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// Backlog is what waits on its subscription now (live traffic too).
	Backlog int64 `json:"backlog"`
	// RatePerSecond is Done over the time since the backfill started;
	// ETASeconds the time left at that rate (absent when unknown).
	RatePerSecond float64  `json:"ratePerSecond"`
	ETASeconds    *float64 `json:"etaSeconds,omitempty"`
	// Processed counts events the running instances processed (since they
	// started: a restarted instance counts from zero again).
	Processed int64 `json:"processed"`
	Running   int   `json:"running"`
	Instances int   `json:"instances"`
	// DeadLettered counts the entries in the stage's dead-letter topic.
	DeadLettered int64 `json:"deadLettered"`
	// Problem says why the stage may not progress ("" when nothing is
	// wrong): an instance down with its error, a subscription or function
	// missing.
	Problem string `json:"problem,omitempty"`
	// unsubscribed counts the inputs without the stage's subscription.
	unsubscribed int
	// readsLedger: the stage reads a ledger topic, whose size at the
	// start is its Total.
	readsLedger bool
}

// Snapshot is a backfill's progress at one moment (-o json prints one per
// poll).
type Snapshot struct {
	View     string `json:"view"`
	Table    string `json:"table"`
	OldTable string `json:"oldTable,omitempty"`
	State    string `json:"state"`
	// Until is a replay's cutoff, "" for a backfill that switches.
	Until   string          `json:"until,omitempty"`
	At      time.Time       `json:"at"`
	Elapsed float64         `json:"elapsedSeconds"`
	Stages  []StageProgress `json:"stages"`
	// CaughtUp: every stage has got through the ledger as it was at the
	// start and its backlog is at most the threshold.
	CaughtUp bool `json:"caughtUp"`
}

// floodMinFailures is how many handler failures a stage must have before
// failureFlood calls their share a flood.
const floodMinFailures = 100

// failureFlood describes a stage whose handler fails more often than it
// succeeds (a changed transformation rejecting what the ledger holds, a
// dependency down): its inputs pour into the dead-letter topic, or wait in
// retries, while the progress figures still move. Some bad events are
// expected and are no problem; "" when there is none. Counts are the
// instances' since they started: a failure is one handler call, so a
// message retried three times before its dead letter counts four.
func failureFlood(processed, failed int64, latest, deadLetterTopic string) string {
	if failed < floodMinFailures || failed <= processed {
		return ""
	}
	msg := fmt.Sprintf("the handler failed %d times and succeeded %d times", failed, processed)
	if deadLetterTopic != "" {
		msg += "; failed inputs go to " + deadLetterTopic
	}
	if latest != "" {
		msg += "; latest error: " + latest
	}
	return msg
}

// snapshot measures r's stages, upstream first. Reading the upstream
// stages before the downstream ones makes "all caught up" sound: whatever
// an upstream stage had acknowledged it had also written before a later
// stage's backlog was read.
func snapshot(ctx context.Context, pulsar *pulsarx.Clients, r *backfillrecord.Record, threshold int64, now time.Time) (*Snapshot, error) {
	s := &Snapshot{View: r.View, Table: r.Table, OldTable: r.OldTable, State: r.State, Until: r.Until, At: now.UTC(),
		Elapsed: now.Sub(r.StartedAt).Seconds(), CaughtUp: r.Unfinished()}
	for i, ref := range append(slices.Clone(r.Shares), r.Stages...) {
		p := StageProgress{Name: ref.Name, Kind: ref.Kind, Subscription: ref.SubName}
		if i < len(r.Shares) {
			// Not the backfill's: its output feeds the copy, and the copy
			// has caught up only once it is through the ledger too.
			p.Name += " (shared)"
		}
		var problems []string
		for _, in := range ref.Inputs {
			sub, ok, err := pulsarx.Subscription(ctx, pulsar, in, ref.SubName)
			if err != nil {
				return nil, err
			}
			if !ok {
				problems = append(problems, "no subscription on "+in)
				p.unsubscribed++
				s.CaughtUp = false
				continue
			}
			size, err := pulsarx.Entries(ctx, pulsar, in)
			if err != nil {
				return nil, err
			}
			p.Backlog += sub.MsgBacklog
			p.Done += max(size-sub.MsgBacklog, 0)
			if atStart, ledger := r.LedgerAtStart[in]; ledger {
				p.Total += atStart
				p.readsLedger = true
			} else {
				p.Total += size
			}
		}
		if p.Done < p.Total || p.Backlog > threshold {
			s.CaughtUp = false
		}
		if s.Elapsed > 0 {
			p.RatePerSecond = float64(p.Done) / s.Elapsed
		}
		if p.RatePerSecond > 0 && p.Done < p.Total {
			eta := float64(p.Total-p.Done) / p.RatePerSecond
			p.ETASeconds = &eta
		}
		status, err := pulsar.Functions.GetFunctionStatusWithContext(ctx, ref.Tenant, ref.Namespace, ref.Name)
		switch {
		case pulsarx.IsNotFound(err):
			problems = append(problems, "function "+ref.FullName()+" is not deployed")
		case err != nil:
			// The worker answers 500 while an instance restarts: a
			// condition to show, not a reason to stop watching.
			problems = append(problems, fmt.Sprintf("reading status of function %s: %v", ref.FullName(), err))
			s.CaughtUp = false
		default:
			p.Instances = status.NumInstances
			var failed int64
			var latest utils.ExceptionInformation
			for _, inst := range status.Instances {
				p.Processed += inst.Status.NumSuccessfullyProcessed
				failed += inst.Status.NumUserExceptions
				for _, e := range inst.Status.LatestUserExceptions {
					if e.TimestampMs >= latest.TimestampMs {
						latest = e
					}
				}
				if inst.Status.Running {
					p.Running++
				} else {
					problems = append(problems, fmt.Sprintf("instance %d not running: %s", inst.InstanceID, orUnknown(inst.Status.Err)))
				}
			}
			if msg := failureFlood(p.Processed, failed, latest.ExceptionString, ref.DeadLetterTopic); msg != "" {
				problems = append(problems, msg)
			}
		}
		if ref.DeadLetterTopic != "" {
			n, err := pulsarx.Entries(ctx, pulsar, ref.DeadLetterTopic)
			if err != nil {
				return nil, err
			}
			p.DeadLettered = n // bad events are expected there: shown, not a problem
		}
		p.Problem = strings.Join(problems, "; ")
		s.Stages = append(s.Stages, p)
	}
	return s, nil
}

// timeLeft is the longest time left of the stages still working, at their
// rates so far; false when one of them has no estimate yet, or none is
// working. Once every stage that reads the ledger is through it, only
// what the later stages have queued is left, which takes them little
// time, whatever their rates so far (a stage that has done nothing yet has
// none): then it is zero.
func (s *Snapshot) timeLeft() (time.Duration, bool) {
	var left float64
	working, unknown, ledgerDone := false, false, true
	for _, p := range s.Stages {
		if p.Done >= p.Total {
			continue
		}
		working = true
		if p.readsLedger {
			ledgerDone = false
		}
		if p.ETASeconds == nil {
			unknown = true
			continue
		}
		left = max(left, *p.ETASeconds)
	}
	switch {
	case !working:
		return 0, false
	case ledgerDone:
		return 0, true
	case unknown:
		return 0, false
	}
	return time.Duration(left * float64(time.Second)), true
}

func orUnknown(s string) string {
	if s == "" {
		return "no error reported"
	}
	return s
}

// Write prints the snapshot, one line per stage; bars draws progress bars
// (on a terminal).
func (s *Snapshot) Write(w io.Writer, bars bool) {
	state := s.State
	if s.CaughtUp {
		state = "caught up"
	}
	what := "backfill of " + s.View
	if s.Until != "" {
		what = "replay of " + s.View + " as of " + s.Until
	}
	fmt.Fprintf(w, "%s into %s: %s after %s\n", what, s.Table, state, (time.Duration(s.Elapsed) * time.Second).Round(time.Second))
	width := 0
	for _, p := range s.Stages {
		width = max(width, len(p.Name))
	}
	for _, p := range s.Stages {
		label := fmt.Sprintf("  %-*s", width, p.Name)
		line := progress.Format(label, "entries", p.Done, p.Total, time.Duration(s.Elapsed*float64(time.Second)), bars)
		fmt.Fprintf(w, "%s, backlog %d, %d events processed, %d dead-letter entries, %d/%d running\n", line, p.Backlog, p.Processed, p.DeadLettered, p.Running, p.Instances)
		if p.Problem != "" {
			fmt.Fprintf(w, "  %-*s  ! %s\n", width, "", p.Problem)
		}
	}
}
