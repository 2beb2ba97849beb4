package e2e

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/foldline/foldline/admin/trainingset"
	"github.com/foldline/foldline/internal/shopfold"
)

// label is one row of a label file: a user at a time.
type label struct {
	user string
	at   time.Time
}

// trainingSet runs foldline training-set for user_activity with labels and
// returns, per label, the row it got (nil: no row yet), and the result.
func (s *shop) trainingSet(t *testing.T, labels []label, clock, out string, extra string) (map[label]*shopfold.UserActivityRow, *trainingset.Result) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("user,label_time,churned\n")
	for i, l := range labels {
		fmt.Fprintf(&b, "%s,%s,%d\n", l.user, l.at.Format(time.RFC3339Nano), i%2)
	}
	b.WriteString(extra)
	path := filepath.Join(dir, "labels.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, out)
	res, err := trainingset.Run(t.Context(), trainingset.Options{Command: s.opts.Command, View: "user_activity", Labels: path, Output: outPath, Time: clock, CacheDir: s.opts.CacheDir})
	if err != nil {
		t.Fatalf("training-set: %v", err)
	}
	rows := map[label]*shopfold.UserActivityRow{}
	if strings.HasSuffix(out, ".parquet") {
		for _, rec := range readParquet(t, outPath) {
			at := time.Unix(0, rec["label_time"].(int64)).UTC()
			rows[label{rec["user"].(string), at}] = parquetRow(rec)
		}
		return rows, res
	}
	f, err := os.Open(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := "user,label_time,churned,page_views,cart_units,purchases,spent_cents,last_seen,last_url"; strings.Join(records[0], ",") != want {
		t.Fatalf("header %v, want %s", records[0], want)
	}
	for _, r := range records[1:] {
		at, err := time.Parse(time.RFC3339Nano, r[1])
		if err != nil {
			t.Fatal(err)
		}
		rows[label{r[0], at}] = csvRow(t, r[3:])
	}
	return rows, res
}

func csvRow(t *testing.T, v []string) *shopfold.UserActivityRow {
	t.Helper()
	if strings.Join(v, "") == "" {
		return nil
	}
	num := func(s string) int64 {
		if s == "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var seen time.Time
	if v[4] != "" {
		var err error
		if seen, err = time.Parse(time.RFC3339Nano, v[4]); err != nil {
			t.Fatal(err)
		}
	}
	return &shopfold.UserActivityRow{PageViews: num(v[0]), CartUnits: num(v[1]), Purchases: num(v[2]), SpentCents: num(v[3]), LastSeen: seen.UTC(), LastURL: v[5]}
}

func readParquet(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := parquet.NewReader(f)
	var out []map[string]any
	for {
		rec := map[string]any{}
		if err := r.Read(&rec); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func parquetRow(rec map[string]any) *shopfold.UserActivityRow {
	if rec["page_views"] == nil && rec["cart_units"] == nil && rec["purchases"] == nil && rec["last_seen"] == nil {
		return nil
	}
	num := func(k string) int64 {
		n, _ := rec[k].(int64)
		return n
	}
	row := &shopfold.UserActivityRow{PageViews: num("page_views"), CartUnits: num("cart_units"), Purchases: num("purchases"), SpentCents: num("spent_cents")}
	if ms, ok := rec["last_seen"].(int64); ok {
		row.LastSeen = time.UnixMilli(ms).UTC()
	}
	row.LastURL, _ = rec["last_url"].(string)
	return row
}

// checkAsOf compares a training set's rows at one label time with want.
func checkAsOf(t *testing.T, what string, got map[label]*shopfold.UserActivityRow, users []string, at time.Time, want map[string]shopfold.UserActivityRow) {
	t.Helper()
	at = at.Round(0).UTC() // as the file gives it back: no monotonic reading
	bad := 0
	for _, u := range users {
		g, present := got[label{u, at}]
		w, ok := want[u]
		switch {
		case !present:
			t.Errorf("%s: the training set has no row for user %s at %s", what, u, at)
		case !ok && g != nil:
			t.Errorf("%s: user %s has %+v, want no row yet (nulls)", what, u, *g)
		case ok && (g == nil || *g != w):
			t.Errorf("%s: user %s has %v, want %+v", what, u, g, w)
		default:
			continue
		}
		if bad++; bad > 5 {
			t.FailNow()
		}
	}
}

// TestTrainingSetByEventTimeAndBadLabels: --time event gives each user's
// row as the fold of the events whose own time is at most the label's
// (whatever their place in the ledger), and bad label rows are reported
// with their line while the good ones are written, in CSV as in Parquet.
func TestTrainingSetByEventTimeAndBadLabels(t *testing.T) {
	s := deployShop(t, "tset")
	events := generate(t, 2000, 71)
	s.ingest(t, events)
	s.waitForFold(t, 3*time.Minute)

	// Event times of the generated stream: the label time is one in the
	// middle of them.
	var times []time.Time
	for _, e := range events {
		if at, err := eventTime(e); err == nil {
			times = append(times, at)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	cut := times[len(times)/2]
	var before [][]byte
	for _, e := range events {
		if at, err := eventTime(e); err != nil || !at.After(cut) {
			before = append(before, e)
		}
	}
	want := foldAtCassandraPrecision(before).UserActivity
	users := slices.Sorted(maps.Keys(s.expected().UserActivity))
	var labels []label
	for _, u := range users {
		labels = append(labels, label{u, cut})
	}
	extra := "u1,not-a-time,1\nu2,2026-11-01T00:00:00Z\n\"u3,2026-11-01T00:00:00Z,1\n"
	for _, out := range []string{"set.csv", "set.parquet"} {
		got, res := s.trainingSet(t, labels, trainingset.TimeEvent, out, extra)
		checkAsOf(t, out+" as of event time "+cut.String(), got, users, cut, want)
		// The header is line 1 and the labels lines 2 to len+1.
		var lines []int
		for _, b := range res.Skipped {
			lines = append(lines, b.Line)
		}
		if n := len(labels); res.Written != n || !slices.Equal(lines, []int{n + 2, n + 3, n + 4}) {
			t.Errorf("%s: wrote %d, skipped %+v; want %d written, lines %d to %d skipped", out, res.Written, res.Skipped, n, n+2, n+4)
		}
	}
	if maps.Equal(want, foldAtCassandraPrecision(events[:len(before)]).UserActivity) {
		t.Log("note: the event-time cut equals a ledger prefix here")
	}
}

// eventTime reads a generated event's own time.
func eventTime(line []byte) (time.Time, error) {
	var e struct {
		Time any `json:"time"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return time.Time{}, err
	}
	text, ok := e.Time.(string)
	if !ok {
		return time.Time{}, errors.New("no time")
	}
	return time.Parse(time.RFC3339Nano, text)
}
