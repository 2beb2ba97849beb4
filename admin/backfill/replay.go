package backfill

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
)

// The clocks of --until-clock.
const (
	// ClockPublish cuts by the ledger's publish time (the default): the
	// view exactly as it was served then.
	ClockPublish = "publish"
	// ClockEvent cuts by each event's own time: the view as if every event
	// had arrived on time. The whole ledger is read.
	ClockEvent = "event"
)

// cutoff turns --until into the runtime's user config key and value: an
// RFC 3339 time (no later than now) bounds the ledger events by publish
// time; a ledger position ledger:entry[:batch] bounds them by position,
// inclusive (without batch, the whole entry), and needs a path that reads
// one ledger topic, since positions of different topics have no order.
func cutoff(until, clock string, now time.Time, ledgerTopics int) (key, value string, err error) {
	switch clock {
	case "", ClockPublish, ClockEvent:
	default:
		return "", "", fmt.Errorf("--until-clock %q: want publish or event: %w", clock, exitcode.ErrUsage)
	}
	if t, terr := time.Parse(time.RFC3339Nano, until); terr == nil {
		if t.After(now) {
			return "", "", fmt.Errorf("--until %s is in the future: the ledger does not hold it yet: %w", until, exitcode.ErrUsage)
		}
		if clock == ClockEvent {
			return pf.UserConfigUntilEventTime, t.UTC().Format(time.RFC3339Nano), nil
		}
		return pf.UserConfigUntilPublishTime, t.UTC().Format(time.RFC3339Nano), nil
	}
	if clock == ClockEvent {
		return "", "", fmt.Errorf("--until %q with --until-clock event: want an RFC 3339 time (2026-11-30T12:00:00Z): %w", until, exitcode.ErrUsage)
	}
	pos := until
	if strings.Count(pos, ":") == 1 {
		pos += fmt.Sprintf(":%d", math.MaxInt32)
	}
	p, perr := envelope.ParsePosition(pos)
	if perr != nil {
		return "", "", fmt.Errorf("--until %q is neither an RFC 3339 time (2026-11-30T12:00:00Z) nor a ledger position (ledger:entry[:batch]): %w", until, exitcode.ErrUsage)
	}
	if ledgerTopics != 1 {
		return "", "", fmt.Errorf("--until %s: a ledger position needs a path that reads one ledger topic, this one reads %d (give a time instead): %w", until, ledgerTopics, exitcode.ErrUsage)
	}
	return pf.UserConfigUntilPosition, p.String(), nil
}

// applyCutoff gives the stages of forked that read the ledger the cutoff of
// until, and returns the cutoff as recorded ("" for none): a time in UTC, a
// position as given.
func (e *env) applyCutoff(until, clock string, forked []*manifest.Stage, now time.Time) (string, error) {
	if until == "" {
		return "", nil
	}
	ledgers := map[string]bool{}
	for _, st := range forked {
		for _, in := range st.Inputs {
			if e.graph.Ledger[in] {
				ledgers[in] = true
			}
		}
	}
	key, value, err := cutoff(until, clock, now, len(ledgers))
	if err != nil {
		return "", err
	}
	recorded := value
	switch key {
	case pf.UserConfigUntilPosition:
		recorded = until // as given: ledger:entry means the whole entry
	case pf.UserConfigUntilEventTime:
		recorded = value + " by event time"
	}
	for _, st := range forked {
		if !readsAny(st, ledgers) {
			continue
		}
		if st.Function != nil {
			f := *st.Function
			f.Config.UserConfig = maps.Clone(f.Config.UserConfig)
			f.Config.UserConfig[key] = value
			st.Function = &f
		} else {
			v := *st.View
			v.Sink.UserConfig = maps.Clone(v.Sink.UserConfig)
			v.Sink.UserConfig[key] = value
			st.View = &v
		}
	}
	return recorded, nil
}

func readsAny(st *manifest.Stage, topics map[string]bool) bool {
	for _, in := range st.Inputs {
		if topics[in] {
			return true
		}
	}
	return false
}

// finishReplay ends a replay that has caught up: every event up to the
// cutoff has reached its table and nothing else will. Its functions,
// subscriptions and topics are removed, and its table is registered as a
// snapshot; the view's active table stays as it is.
func (e *env) finishReplay(ctx context.Context, opts Options, rec *backfillrecord.Record) (*Result, error) {
	ks := e.set.Tenant.Keyspace
	retired, err := e.removeStages(ctx, opts, rec)
	if err != nil {
		return nil, fmt.Errorf("removing the replay's functions of %s: %w", rec.View, err)
	}
	if err := registry.MarkSnapshot(ctx, e.cql, ks, rec.View, rec.Table); err != nil {
		return nil, err
	}
	rec.State, rec.FinishedAt = backfillrecord.StateSnapshot, time.Now().UTC()
	if err := e.store.Put(ctx, rec); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.ErrOut, "%s.%s holds view %s as of %s (the view still reads %s)\n", ks, rec.Table, rec.View, rec.Until, orNone(rec.OldTable))
	if retired == nil {
		retired = []string{}
	}
	return &Result{View: rec.View, Table: rec.Table, OldTable: rec.OldTable, State: rec.State, Until: rec.Until, Retired: retired, Dropped: []string{}}, nil
}
