package e2e

import (
	"bufio"
	"context"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/foldline/foldline/admin/metrics"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// TestObservability deploys the shop and checks what an operator sees of
// it without reading a table whole: status's estimated rows against a
// count, the views' newest events from the sinks' figures, foldline
// metrics' backlogs and rows, and, on the functions worker's /metrics, the
// sinks' write latency and freshness histograms and the validate stage's
// dead letters counted as malformed.
func TestObservability(t *testing.T) {
	s := deployShop(t, "obs")
	s.ingest(t, generate(t, 600, 41))
	s.waitForFold(t, 3*time.Minute)
	malformed := len(s.expected().Rejected)
	if malformed == 0 {
		t.Fatal("the generated events hold no malformed line: nothing checks the dead letters by reason")
	}

	estimated, err := status.Get(t.Context(), status.Options{Command: s.opts.Command})
	if err != nil {
		t.Fatal(err)
	}
	var views []string
	for _, v := range estimated.Views {
		views = append(views, v.View)
	}
	counted, err := status.Get(t.Context(), status.Options{Command: s.opts.Command, CountRows: views})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range estimated.Views {
		c := counted.Views[i]
		switch {
		case v.RowsEstimated == nil || c.Rows == nil:
			t.Errorf("view %s: rows estimated %v, counted %v (error %q)", v.View, v.RowsEstimated, c.Rows, v.Error)
		case *c.Rows < 1000 && *v.RowsEstimated != *c.Rows:
			t.Errorf("view %s: %d rows estimated, %d counted; below 1000 the estimate is the count", v.View, *v.RowsEstimated, *c.Rows)
		case math.Abs(float64(*v.RowsEstimated)/float64(*c.Rows)-1) > 0.15:
			t.Errorf("view %s: %d rows estimated, %d counted", v.View, *v.RowsEstimated, *c.Rows)
		}
		if v.NewestEvent.IsZero() || v.AgeSeconds == nil {
			t.Errorf("view %s: no newest event from its sink", v.View)
		}
		if v.RowsEstimated != nil && c.Rows != nil {
			t.Logf("view %s: %d rows estimated, %d counted; newest event %s from the sink, %s in the table", v.View, *v.RowsEstimated, *c.Rows,
				v.NewestEvent.Format(time.RFC3339), c.NewestEvent.Format(time.RFC3339))
		}
	}

	t.Run("foldline metrics exports backlogs and estimated rows", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		addr := make(chan string, 1)
		served := make(chan error, 1)
		go func() {
			served <- metrics.Serve(ctx, metrics.Options{Options: status.Options{Command: s.opts.Command}, Listen: "127.0.0.1:0"},
				func(a string) { addr <- a })
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("foldline metrics: %v", err)
			}
		})
		var url string
		select {
		case a := <-addr:
			url = "http://" + a + "/metrics"
		case err := <-served:
			t.Fatalf("foldline metrics: %v", err)
		}
		families, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(get(t, url, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if up := families[metrics.MetricUp]; up == nil || up.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("%s: %v", metrics.MetricUp, up)
		}
		subscriptions := 0
		for _, st := range estimated.Stages {
			subscriptions += len(st.Subscriptions)
		}
		if n := len(families[metrics.MetricSubscriptionBacklog].GetMetric()); n != subscriptions {
			t.Errorf("%d backlog series, want one per subscription: %d", n, subscriptions)
		}
		if n := len(families[metrics.MetricViewRowsEstimated].GetMetric()); n != len(estimated.Views) {
			t.Errorf("%d estimated rows series, want one per view: %d", n, len(estimated.Views))
		}
	})

	t.Run("the worker's metrics show the sinks' histograms and dead letters by reason", func(t *testing.T) {
		tenant := `tenant="` + s.tenant + `"`
		var page string
		var deadMalformed float64
		ok := func() bool {
			page = get(t, s.svc.PulsarAdminURL+"/metrics/", s.svc.AuthorizePulsar)
			deadMalformed = sumSeries(page, pf.MetricDeadLetters, tenant, `name="validate"`, `reason="malformed"`)
			for _, st := range estimated.Stages {
				if st.Kind != "sink" {
					continue
				}
				name := `name="` + st.Name + `"`
				if sumSeries(page, cassandra.MetricWriteSeconds+"_count", tenant, name) == 0 ||
					sumSeries(page, cassandra.MetricFreshnessSeconds+"_bucket", tenant, name, `le="+Inf"`) == 0 ||
					sumSeries(page, cassandra.MetricApplyDelaySeconds+"_bucket", tenant, name, `le="+Inf"`) == 0 {
					return false
				}
			}
			return deadMalformed == float64(malformed)
		}
		defer func() {
			if t.Failed() { // what the page had of the tenant's foldline metrics
				for _, line := range strings.Split(page, "\n") {
					if strings.HasPrefix(line, "foldline_") && strings.Contains(line, tenant) && !strings.Contains(line, "_bucket") {
						t.Log(line)
					}
				}
			}
		}()
		testenv.WaitFor(t, time.Minute, "the worker's /metrics to show every sink's histograms and validate's malformed dead letters", ok)
		for _, reason := range pf.DeadLetterReasons() {
			if n := sumSeries(page, pf.MetricDeadLetters, tenant, `reason="`+string(reason)+`"`); reason != pf.ReasonMalformed && n != 0 {
				t.Errorf("%v dead letters counted as %s, want none", n, reason)
			}
		}
	})
}

// get returns the body of url, with authorize (when given) applied to the
// request.
func get(t *testing.T, url string, authorize func(*http.Request) error) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorize != nil {
		if err := authorize(req); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(body)
}

var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)`)

// sumSeries adds up the values of name's samples in a metrics page whose
// labels hold every one of labels (as `key="value"`). The worker's page
// joins the instances' pages as they are, so it is read line by line.
func sumSeries(page, name string, labels ...string) float64 {
	var sum float64
	lines := bufio.NewScanner(strings.NewReader(page))
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		m := sample.FindStringSubmatch(lines.Text())
		if m == nil || m[1] != name {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(m[2], l)
		}
		if v, err := strconv.ParseFloat(m[3], 64); all && err == nil {
			sum += v
		}
	}
	return sum
}
