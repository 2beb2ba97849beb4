package grafana

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/metrics"
	"github.com/foldline/foldline/admin/verify"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/sinks/cassandra"
)

// exported is every metric name the code serves, by the constants of the
// components that serve them.
func exported() []string {
	return slices.Concat(pf.MetricNames(), cassandra.MetricNames(), metrics.MetricNames(), backfill.MetricNames(), verify.MetricNames())
}

// withSeries are the histograms and summaries, which Prometheus exposes as
// their _bucket, _sum and _count series.
var withSeries = []string{cassandra.MetricWriteSeconds, cassandra.MetricFreshnessSeconds, cassandra.MetricApplyDelaySeconds,
	pf.MetricProcessLatencyMs, pf.MetricProcessLatencyMs1Min}

// TestDashboardNamesOnlyExportedMetrics reads every query of the dashboard
// and checks each metric it names, and each user metric it selects from
// pulsar_function_user_metric by its metric label, against the code's
// constants: a renamed metric fails here, not in an empty panel.
func TestDashboardNamesOnlyExportedMetrics(t *testing.T) {
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(Dashboard, &dash); err != nil {
		t.Fatalf("foldline.json is not valid JSON: %v", err)
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid")
	}
	known := exported()
	used := map[string]bool{}
	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			names, userMetrics := metricsOf(target.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric found in %q", p.Title, target.Expr)
			}
			for _, name := range names {
				base := seriesOf(name)
				if !slices.Contains(known, base) {
					t.Errorf("panel %q names %s, which no component exports", p.Title, name)
				}
				used[base] = true
			}
			for _, um := range userMetrics {
				if !slices.Contains(cassandra.UserMetricNames(), um) {
					t.Errorf("panel %q selects user metric %s, which the sink does not record", p.Title, um)
				}
			}
		}
	}
	for _, query := range templateQueries(t) {
		m := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),`).FindStringSubmatch(query)
		if m == nil || !slices.Contains(known, m[1]) {
			t.Errorf("variable query %q does not name an exported metric", query)
		}
	}
	// What the dashboard is for: each of these has a panel.
	for _, want := range []string{metrics.MetricSubscriptionBacklog, cassandra.MetricFreshnessSeconds, cassandra.MetricWriteSeconds,
		pf.MetricDeadLetters, backfill.MetricEntriesDone, metrics.MetricViewRowsEstimated} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	t.Logf("%d queries over %d metrics", queries, len(used))
}

// seriesOf returns the metric a series name belongs to: a histogram's or
// summary's _bucket, _sum and _count series belong to it.
func seriesOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(withSeries, base) {
			return base
		}
	}
	return name
}

func templateQueries(t *testing.T) []string {
	var dash struct {
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(Dashboard, &dash); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil || q.Query == "" {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				t.Fatalf("variable query %s: %v", v.Query, err)
			}
			q.Query = s
		}
		out = append(out, q.Query)
	}
	return out
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	userMetric = regexp.MustCompile(`\bmetric\s*(=~|=)\s*"([^"]*)"`)
	keywords   = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// metricsOf returns the metric names a PromQL expression selects, and the
// user metrics it selects from pulsar_function_user_metric (by label
// metric, = or =~ with a plain alternation). It reads the subset of PromQL
// a dashboard uses: functions and aggregations are the identifiers
// followed by "(", and label matchers, ranges and grouping lists are not
// names.
func metricsOf(expr string) (names, userMetrics []string) {
	for _, m := range matchers.FindAllString(expr, -1) {
		for _, um := range userMetric.FindAllStringSubmatch(m, -1) {
			if um[1] == "=" {
				userMetrics = append(userMetrics, um[2])
			} else {
				userMetrics = append(userMetrics, strings.Split(um[2], "|")...)
			}
		}
	}
	rest := grouping.ReplaceAllString(ranges.ReplaceAllString(matchers.ReplaceAllString(quoted.ReplaceAllString(expr, `""`), " "), " "), " ")
	for _, loc := range identifier.FindAllStringIndex(rest, -1) {
		word := rest[loc[0]:loc[1]]
		if loc[0] > 0 && (rest[loc[0]-1] >= '0' && rest[loc[0]-1] <= '9' || rest[loc[0]-1] == '.') {
			continue // a number's exponent or a duration's unit
		}
		if next := strings.TrimLeft(rest[loc[1]:], " "); strings.HasPrefix(next, "(") || slices.Contains(keywords, strings.ToLower(word)) {
			continue
		}
		names = append(names, word)
	}
	return names, userMetrics
}

func TestMetricsOf(t *testing.T) {
	cases := []struct {
		name        string
		expr        string
		names, user []string
	}{
		{name: "plain selector", expr: `foldline_view_rows_estimated{tenant="$tenant"}`, names: []string{"foldline_view_rows_estimated"}},
		{name: "quantile of a histogram", expr: `histogram_quantile(0.99, sum by (name, le) (rate(x_seconds_bucket{a="b"}[5m])))`, names: []string{"x_seconds_bucket"}},
		{name: "arithmetic of two", expr: `100 * a_done{t="1"} / a_expected > 0 and bool 1e3`, names: []string{"a_done", "a_expected"}},
		{name: "time minus a gauge", expr: `time() - max without (instance) (last_time offset 5m)`, names: []string{"last_time"}},
		{name: "user metrics", expr: `rate(pulsar_function_user_metric{metric=~"a|b", x="metric"}[1m]) + pulsar_function_user_metric{metric="c"}`,
			names: []string{"pulsar_function_user_metric", "pulsar_function_user_metric"}, user: []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			names, user := metricsOf(tc.expr)
			if !slices.Equal(names, tc.names) || !slices.Equal(user, tc.user) {
				t.Errorf("metricsOf(%q) = %v, %v; want %v, %v", tc.expr, names, user, tc.names, tc.user)
			}
		})
	}
}
