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

// label is one row of a label file: a user (and, for product_sales, a
// sku) at a time.
type label struct {
	user string
	at   time.Time
	sku  string
}

// labelRow is what a training set gave a label: its row in each view (nil:
// no row yet, nulls).
type labelRow struct {
	activity *shopfold.UserActivityRow
	sales    *shopfold.ProductSalesRow
}

// trainingSet runs foldline training-set for user_activity with labels and
// returns, per label, the row it got, and the result.
func (s *shop) trainingSet(t *testing.T, labels []label, clock, out string, extra string) (map[label]labelRow, *trainingset.Result) {
	t.Helper()
	return s.joinedTrainingSet(t, []string{"user_activity"}, labels, clock, out, extra)
}

// joinedTrainingSet runs foldline training-set for views (user_activity,
// product_sales or both, in that order) with labels: a label file of
// user, sku when product_sales is one of them, label_time and a label of
// our own; it returns, per label, its rows, and the result.
func (s *shop) joinedTrainingSet(t *testing.T, views []string, labels []label, clock, out string, extra string) (map[label]labelRow, *trainingset.Result) {
	t.Helper()
	dir := t.TempDir()
	withSKU := slices.Contains(views, "product_sales")
	var b strings.Builder
	header := []string{"user", "label_time", "churned"}
	if withSKU {
		header = []string{"user", "sku", "label_time", "churned"}
	}
	b.WriteString(strings.Join(header, ",") + "\n")
	for i, l := range labels {
		if withSKU {
			fmt.Fprintf(&b, "%s,%s,%s,%d\n", l.user, l.sku, l.at.Format(time.RFC3339Nano), i%2)
		} else {
			fmt.Fprintf(&b, "%s,%s,%d\n", l.user, l.at.Format(time.RFC3339Nano), i%2)
		}
	}
	b.WriteString(extra)
	path := filepath.Join(dir, "labels.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, out)
	res, err := trainingset.Run(t.Context(), trainingset.Options{Command: s.opts.Command, Views: views, Labels: path, Output: outPath, Time: clock, CacheDir: s.opts.CacheDir})
	if err != nil {
		t.Fatalf("training-set: %v", err)
	}
	// The columns: the view's with one view, <view>__<column> with several.
	prefix := func(view string) string {
		if len(views) == 1 {
			return ""
		}
		return view + "__"
	}
	want := header
	for _, v := range views {
		cols := []string{"units", "revenue_cents", "orders"}
		if v == "user_activity" {
			cols = []string{"page_views", "cart_units", "purchases", "spent_cents", "last_seen", "last_url"}
		}
		for _, c := range cols {
			want = append(want, prefix(v)+c)
		}
	}
	got, records := readSet(t, outPath)
	if !slices.Equal(got, want) && !(strings.HasSuffix(out, ".parquet") && slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))) {
		t.Fatalf("columns %v, want %v", got, want) // Parquet's are in the order of their names
	}
	rows := map[label]labelRow{}
	for _, r := range records {
		at, err := time.Parse(time.RFC3339Nano, r["label_time"])
		if err != nil {
			t.Fatal(err)
		}
		var row labelRow
		if slices.Contains(views, "user_activity") {
			row.activity = activityRow(t, r, prefix("user_activity"))
		}
		if withSKU {
			row.sales = salesRow(t, r, prefix("product_sales"))
		}
		rows[label{user: r["user"], at: at, sku: r["sku"]}] = row
	}
	return rows, res
}

// readSet reads a training set, CSV or Parquet: its columns, and each row
// as text as the CSV has it ("" for null; times in RFC 3339).
func readSet(t *testing.T, path string) ([]string, []map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]string
	if strings.HasSuffix(path, ".csv") {
		records, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range records[1:] {
			rec := map[string]string{}
			for i, c := range records[0] {
				rec[c] = r[i]
			}
			out = append(out, rec)
		}
		return records[0], out
	}
	r := parquet.NewReader(f)
	var columns []string
	for _, c := range r.Schema().Fields() {
		columns = append(columns, c.Name())
	}
	for {
		rec := map[string]any{}
		if err := r.Read(&rec); errors.Is(err, io.EOF) {
			return columns, out
		} else if err != nil {
			t.Fatal(err)
		}
		text := map[string]string{}
		for c, v := range rec {
			switch {
			case v == nil:
				text[c] = ""
			case c == "label_time":
				text[c] = time.Unix(0, v.(int64)).UTC().Format(time.RFC3339Nano)
			case strings.HasSuffix(c, "last_seen"):
				text[c] = time.UnixMilli(v.(int64)).UTC().Format(time.RFC3339Nano)
			default:
				text[c] = fmt.Sprint(v)
			}
		}
		out = append(out, text)
	}
}

// activityRow reads a user_activity row from a training set's row (nil:
// nulls).
func activityRow(t *testing.T, r map[string]string, prefix string) *shopfold.UserActivityRow {
	t.Helper()
	if r[prefix+"page_views"]+r[prefix+"cart_units"]+r[prefix+"purchases"]+r[prefix+"spent_cents"]+r[prefix+"last_seen"] == "" {
		return nil
	}
	var seen time.Time
	if v := r[prefix+"last_seen"]; v != "" {
		var err error
		if seen, err = time.Parse(time.RFC3339Nano, v); err != nil {
			t.Fatal(err)
		}
	}
	return &shopfold.UserActivityRow{PageViews: num(t, r[prefix+"page_views"]), CartUnits: num(t, r[prefix+"cart_units"]),
		Purchases: num(t, r[prefix+"purchases"]), SpentCents: num(t, r[prefix+"spent_cents"]), LastSeen: seen.UTC(), LastURL: r[prefix+"last_url"]}
}

// salesRow reads a product_sales row from a training set's row (nil:
// nulls).
func salesRow(t *testing.T, r map[string]string, prefix string) *shopfold.ProductSalesRow {
	t.Helper()
	if r[prefix+"units"]+r[prefix+"revenue_cents"]+r[prefix+"orders"] == "" {
		return nil
	}
	return &shopfold.ProductSalesRow{Units: num(t, r[prefix+"units"]), RevenueCents: num(t, r[prefix+"revenue_cents"]), Orders: num(t, r[prefix+"orders"])}
}

func num(t *testing.T, s string) int64 {
	t.Helper()
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkAsOf compares a training set's rows of labels with want: each
// label's user in user_activity, and its sku in product_sales when it has
// one.
func checkAsOf(t *testing.T, what string, got map[label]labelRow, labels []label, want shopfold.Result) {
	t.Helper()
	bad := 0
	for _, l := range labels {
		l.at = l.at.Round(0).UTC() // as the file gives it back: no monotonic reading
		g, present := got[l]
		wa, okA := want.UserActivity[l.user]
		ws, okS := want.ProductSales[l.sku]
		switch {
		case !present:
			t.Errorf("%s: the training set has no row for %+v", what, l)
		case !okA && g.activity != nil:
			t.Errorf("%s: user %s has %+v, want no row yet (nulls)", what, l.user, *g.activity)
		case okA && (g.activity == nil || *g.activity != wa):
			t.Errorf("%s: user %s has %v, want %+v", what, l.user, g.activity, wa)
		case l.sku != "" && !okS && g.sales != nil:
			t.Errorf("%s: sku %s has %+v, want no row yet (nulls)", what, l.sku, *g.sales)
		case l.sku != "" && okS && (g.sales == nil || *g.sales != ws):
			t.Errorf("%s: sku %s has %v, want %+v", what, l.sku, g.sales, ws)
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
// (whatever their place in the ledger, applied in the order of their
// times), in two views joined from one label file (user_activity by
// user, product_sales by sku) over one read of the ledger, and bad label
// rows are reported with their line while the good ones are written, in
// CSV as in Parquet.
func TestTrainingSetByEventTimeAndBadLabels(t *testing.T) {
	s := deployShop(t, "tset")
	events := generate(t, 2000, 71)
	s.ingest(t, events)
	s.waitForFold(t, 3*time.Minute)

	// Event times of the generated stream: the label time is one in the
	// middle of them.
	type timed struct {
		line []byte
		at   time.Time
	}
	var byTime []timed
	for _, e := range events {
		if at, err := eventTime(e); err == nil {
			byTime = append(byTime, timed{e, at})
		}
	}
	slices.SortStableFunc(byTime, func(a, b timed) int { return a.at.Compare(b.at) })
	cut := byTime[len(byTime)/2].at
	var before [][]byte
	for _, e := range byTime {
		if !e.at.After(cut) {
			before = append(before, e.line)
		}
	}
	late := 0 // events whose time is before that of one earlier in the ledger
	var latest time.Time
	for _, e := range events {
		if at, err := eventTime(e); err == nil {
			if at.Before(latest) {
				late++
			} else {
				latest = at
			}
		}
	}
	if late == 0 {
		t.Fatal("the generated events are in time order: the test would not see the order they are applied in")
	}
	want := foldAtCassandraPrecision(before)
	expected := s.expected()
	users := slices.Sorted(maps.Keys(expected.UserActivity))
	skus := slices.Sorted(maps.Keys(expected.ProductSales))
	var labels []label
	for i, u := range users {
		labels = append(labels, label{user: u, at: cut, sku: skus[i%len(skus)]})
	}
	labels = append(labels, label{user: "nobody", at: cut, sku: "no-such-sku"})
	extra := "u1,sku-1,not-a-time,1\nu2,sku-1,2026-11-01T00:00:00Z\n\"u3,sku-1,2026-11-01T00:00:00Z,1\n"
	for _, out := range []string{"set.csv", "set.parquet"} {
		got, res := s.joinedTrainingSet(t, []string{"user_activity", "product_sales"}, labels, trainingset.TimeEvent, out, extra)
		checkAsOf(t, out+" as of event time "+cut.String(), got, labels, want)
		// The header is line 1 and the labels lines 2 to len+1.
		var lines []int
		for _, b := range res.Skipped {
			lines = append(lines, b.Line)
		}
		if n := len(labels); res.Written != n || !slices.Equal(lines, []int{n + 2, n + 3, n + 4}) {
			t.Errorf("%s: wrote %d, skipped %+v; want %d written, lines %d to %d skipped", out, res.Written, res.Skipped, n, n+2, n+4)
		}
		if res.Events != int64(len(events)) {
			t.Errorf("%s: read %d ledger events for two views, want each of the %d once", out, res.Events, len(events))
		}
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
