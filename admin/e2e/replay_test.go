package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/trainingset"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/shopfold"
)

// TestReplayAsOfATime replays user_activity as of a time between two
// ingests: the snapshot table equals the fold of the first ingest only,
// although the second was in the ledger before the replay started and more
// events arrive while it runs; the view keeps reading its active table,
// which follows every event; the replay's functions are gone afterwards,
// the registry lists the table as a snapshot, deploy has nothing to
// change, and foldline views --drop removes the snapshot (not the active
// table).
func TestReplayAsOfATime(t *testing.T) {
	s := deployShop(t, "asof")
	events := generate(t, 7000, 43)
	first := time.Now()
	s.ingest(t, events[:3000])
	cut := time.Now()
	time.Sleep(50 * time.Millisecond) // later publish times, at millisecond precision
	s.ingest(t, events[3000:6000])
	s.waitForFold(t, 3*time.Minute)

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.Until = cut.Format(time.RFC3339Nano)
	rec, err := backfill.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting the replay as of %s: %v", opts.Until, err)
	}
	s.ingest(t, events[6000:]) // live traffic during the replay
	var progress bytes.Buffer
	opts.JSON, opts.Out = true, &progress
	res, err := backfill.Run(t.Context(), opts, true)
	if err != nil {
		t.Fatalf("replaying user_activity as of %s: %v", opts.Until, err)
	}
	opts.JSON, opts.Out = false, s.opts.Out
	// The stage that reads the ledger stops at the cut: it moves past the
	// rest instead of reading and skipping all 7000 events.
	var final backfill.Snapshot
	for dec := json.NewDecoder(&progress); dec.More(); {
		var snap backfill.Snapshot
		if err := dec.Decode(&snap); err == nil && len(snap.Stages) > 0 {
			final = snap
		}
	}
	if len(final.Stages) == 0 || final.Stages[0].Processed >= 6000 {
		t.Errorf("the replay's first stage processed %+v of 7000 ledger events, want the 3000 before the cut and not all the rest", final.Stages)
	} else {
		t.Logf("the replay's %s processed %d of 7000 ledger events", final.Stages[0].Name, final.Stages[0].Processed)
	}
	if res.State != backfill.StateSnapshot || res.Table != rec.Table || res.OldTable != "user_activity_v1" || res.Until == "" {
		t.Fatalf("result %+v, want a snapshot in %s beside user_activity_v1", res, rec.Table)
	}

	got, err := s.userActivity(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	want := foldAtCassandraPrecision(events[:3000])
	var problems []string
	diffRows("user_activity as of the cut", got, want.UserActivity, func(format string, args ...any) {
		if len(problems) < 8 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	})
	if len(problems) > 0 {
		t.Fatalf("the snapshot differs from the fold of the first 3000 events:\n%s", strings.Join(problems, "\n"))
	}
	if all := foldAtCassandraPrecision(events); maps.Equal(all.UserActivity, want.UserActivity) {
		t.Fatal("the fold of all events equals that of the first 3000: the test would not see a missing cutoff")
	}

	if active, err := s.activeTable("user_activity"); err != nil || active != "user_activity_v1" {
		t.Fatalf("active table %q (%v), want user_activity_v1 still", active, err)
	}
	s.waitForFold(t, 2*time.Minute) // the live view has every event

	// A training set with labels before, between and after the ingests
	// equals point lookups on the replay as of the cut and on the live
	// table, from one pass over the ledger.
	snapshot, err := s.userActivity(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.userActivity("user_activity_v1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	users := slices.Sorted(maps.Keys(live))
	var before, atCut, atNow []label
	for _, u := range users {
		before = append(before, label{user: u, at: first.Add(-time.Second)})
		atCut = append(atCut, label{user: u, at: cut})
		atNow = append(atNow, label{user: u, at: now})
	}
	rows, tres := s.trainingSet(t, slices.Concat(before, atCut, atNow), trainingset.TimePublish, "asof.parquet", "")
	checkAsOf(t, "before any event", rows, before, shopfold.Result{})
	checkAsOf(t, "as of the replay's cut", rows, atCut, shopfold.Result{UserActivity: snapshot})
	checkAsOf(t, "now", rows, atNow, shopfold.Result{UserActivity: live})
	t.Logf("training set of %d labels from %d ledger events in %.1f s", tres.Written, tres.Events, tres.Seconds)

	list, err := views.List(t.Context(), views.Options{Command: s.opts.Command})
	if err != nil {
		t.Fatalf("listing views: %v", err)
	}
	i := slices.IndexFunc(list, func(v views.View) bool { return v.View == "user_activity" })
	if i < 0 || !slices.Contains(list[i].Versions, views.Version{Table: res.Table, State: registry.StateSnapshot}) {
		t.Fatalf("views %+v, want %s listed as a snapshot", list, res.Table)
	}
	plan, err := deploy.MakePlan(t.Context(), s.opts)
	if err != nil {
		t.Fatalf("planning after the replay: %v", err)
	}
	if pending := plan.Pending(); len(pending) > 0 {
		t.Errorf("deploy after the replay would change %+v", pending)
	}
	functions, err := s.pulsarAdmin(t).Functions().GetFunctions(s.tenant, pipelineNS)
	if err != nil {
		t.Fatalf("listing functions: %v", err)
	}
	for _, name := range functions {
		if strings.Contains(name, res.Table) {
			t.Errorf("function %s of the replay still deployed", name)
		}
	}

	// The last ledger position the snapshot applied: a replay as of that
	// position must give the same table (every valid event touches
	// user_activity).
	last := s.lastApplied(t, res.Table)

	vopts := views.Options{Command: s.opts.Command, Drop: "user_activity_v1"}
	if _, err := views.Drop(t.Context(), vopts); !errors.Is(err, views.ErrInUse) {
		t.Errorf("dropping the active table: err %v, want ErrInUse", err)
	}
	vopts.Drop = res.Table
	if view, err := views.Drop(t.Context(), vopts); err != nil || view != "user_activity" {
		t.Fatalf("dropping the snapshot %s: view %q, err %v", res.Table, view, err)
	}
	if _, err := s.userActivity(res.Table); err == nil {
		t.Errorf("table %s still answers after its drop", res.Table)
	}
	if _, err := views.Drop(t.Context(), vopts); err == nil {
		t.Errorf("dropping %s twice: no error", res.Table)
	}

	// The same table version again (its functions' names too: the worker's
	// stored packages of the first replay must be gone), as of a position.
	opts.Until = last.String()
	res, err = backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("replaying user_activity as of position %s: %v", opts.Until, err)
	}
	if got, err = s.userActivity(res.Table); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want.UserActivity) {
		t.Fatalf("the snapshot as of position %s differs from the fold of the first 3000 events", opts.Until)
	}
}

// lastApplied returns the latest ledger position applied to any row of a
// user_activity table.
func (s *shop) lastApplied(t *testing.T, table string) envelope.Position {
	t.Helper()
	iter := s.session.Query(`SELECT fl_applied FROM ` + s.keyspace + `.` + table).Iter()
	var (
		applied map[string]string
		last    envelope.Position
	)
	for iter.Scan(&applied) {
		for _, pos := range applied {
			p, err := envelope.ParsePosition(pos)
			if err != nil {
				t.Fatalf("reading fl_applied of %s: %v", table, err)
			}
			if p.Compare(last) > 0 {
				last = p
			}
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("reading fl_applied of %s: %v", table, err)
	}
	return last
}

// TestReplayBetweenAnOrderAndItsRefund replays sku_refunds, the keyed-state
// join, as of ledger positions between an order's purchase and its refund
// (issue 47, item 3). The ledger holds generated events and, published
// among them, the purchase of an order, a refund of another order whose
// purchase comes later, then the first order's refund and the second's
// purchase. As of the position of the early refund, the first order's
// refund is absent, and so is every generated refund whose purchase came
// before the cut; the early refund is unattributed. As of the position of
// the first order's refund, that refund counts against its purchase's
// sku, and the early refund stays unattributed, as it does once its
// purchase has come: a refund is judged as of its own place in the ledger.
// Each replay's table equals shopfold's fold of the ledger up to its cut,
// which the replay's own copy of the stateful stage rebuilt from the ledger.
func TestReplayBetweenAnOrderAndItsRefund(t *testing.T) {
	s := deployShop(t, "asofjoin")
	events := generate(t, 3000, 47)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	line := func(id, rest string) []byte {
		return fmt.Appendf(nil, `{"id":"asof-%s","user":"asof-u","time":%q,%s}`, id, at, rest)
	}
	purchase := line("1", `"type":"purchase","order":"asof-o1","sku":"asof-sku1","qty":2,"price_cents":1500`)
	early := line("2", `"type":"refund","order":"asof-o2","amount_cents":700`)
	refund := line("3", `"type":"refund","order":"asof-o1","amount_cents":3000`)
	late := line("4", `"type":"purchase","order":"asof-o2","sku":"asof-sku2","qty":1,"price_cents":700`)
	s.ingest(t, events[:1500])
	s.ingest(t, [][]byte{purchase, early})
	s.ingest(t, events[1500:])
	s.ingest(t, [][]byte{refund, late})
	s.waitForFold(t, 3*time.Minute)

	positions := s.ledgerPositions(t)
	between, after := 1501, len(s.ledger)-2 // the early refund's place; the first order's refund's
	if !bytes.Equal(s.ledger[between], early) || !bytes.Equal(s.ledger[after], refund) {
		t.Fatalf("the ledger holds %q and %q where the refunds were published", s.ledger[between], s.ledger[after])
	}
	asOfBetween := foldAtCassandraPrecision(s.ledger[:between+1])
	asOfAfter := foldAtCassandraPrecision(s.ledger[:after+1])
	all := s.expected()
	// What the fold says, which the replays must show: the refund absent,
	// then counted; the early refund unattributed throughout.
	if _, ok := asOfBetween.SkuRefunds["asof-sku1"]; ok {
		t.Fatalf("the fold as of %s counts a refund of asof-sku1 before it: %+v", positions[between], asOfBetween.SkuRefunds["asof-sku1"])
	}
	if got, want := asOfAfter.SkuRefunds["asof-sku1"], (shopfold.SkuRefundsRow{Refunds: 1, RefundedCents: 3000}); got != want {
		t.Fatalf("the fold as of %s has asof-sku1 %+v, want %+v", positions[after], got, want)
	}
	for name, fold := range map[string]shopfold.Result{"as of the early refund": asOfBetween, "as of the refund": asOfAfter, "of the whole ledger": all} {
		if !slices.Contains(fold.UnknownOrders, between) {
			t.Fatalf("the fold %s does not list the early refund (line %d) as unattributed: %v", name, between, fold.UnknownOrders)
		}
	}
	if _, ok := all.SkuRefunds["asof-sku2"]; ok {
		t.Fatal("the fold counts the early refund against the sku of its later purchase")
	}
	if total(asOfAfter.SkuRefunds) <= total(asOfBetween.SkuRefunds)+1 {
		t.Fatalf("no generated refund falls between the cuts (%d refunds, then %d): only the published one would be checked", total(asOfBetween.SkuRefunds), total(asOfAfter.SkuRefunds))
	}

	opts := s.backfillOptions("sku_refunds", s.opts.Dir)
	for _, cut := range []struct {
		line int
		want shopfold.Result
	}{{between, asOfBetween}, {after, asOfAfter}} {
		opts.Until = positions[cut.line].String()
		res, err := backfill.Run(t.Context(), opts, false)
		if err != nil {
			t.Fatalf("replaying sku_refunds as of %s: %v", opts.Until, err)
		}
		if res.State != backfill.StateSnapshot || res.OldTable != "sku_refunds_v1" {
			t.Fatalf("replay as of %s: %+v, want a snapshot beside sku_refunds_v1", opts.Until, res)
		}
		got, err := s.skuRefundsIn(res.Table)
		if err != nil {
			t.Fatal(err)
		}
		var problems []string
		diffRows("sku_refunds as of "+opts.Until, got, cut.want.SkuRefunds, func(format string, args ...any) {
			if len(problems) < 8 {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		})
		if len(problems) > 0 {
			t.Fatalf("the replay as of %s (line %d) differs from the fold of the ledger up to it:\n%s", opts.Until, cut.line+1, strings.Join(problems, "\n"))
		}
		t.Logf("sku_refunds as of %s (line %d of %d) in %s: %d skus, %d refunds, asof-sku1 %+v, as the fold says",
			opts.Until, cut.line+1, len(s.ledger), res.Table, len(got), total(got), got["asof-sku1"])
	}
	if table, err := s.activeTable("sku_refunds"); err != nil || table != "sku_refunds_v1" {
		t.Fatalf("active table %q (%v) after the replays, want sku_refunds_v1 still", table, err)
	}
}

// total counts the refunds of a sku_refunds view.
func total(rows map[string]shopfold.SkuRefundsRow) int64 {
	var n int64
	for _, r := range rows {
		n += r.Refunds
	}
	return n
}

// ledgerPositions reads the shop's ledger (one topic, not partitioned) from
// its first event and returns the position of each line ingested, in
// order, checking that the ledger holds the lines as ingested.
func (s *shop) ledgerPositions(t *testing.T) []envelope.Position {
	t.Helper()
	topic := ingest.DefaultTopic(s.tenant)
	reader := s.readFromEarliest(t, topic)
	positions := make([]envelope.Position, len(s.ledger))
	for i := range s.ledger {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		msg, err := reader.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("reading event %d of %s: %v", i, topic, err)
		}
		if !bytes.Equal(msg.Payload(), s.ledger[i]) {
			t.Fatalf("event %d of %s is %q, want line %d as ingested, %q", i, topic, msg.Payload(), i+1, s.ledger[i])
		}
		id := msg.ID()
		positions[i] = envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}
	}
	return positions
}
