package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/admin/ui"
	"github.com/foldline/foldline/internal/testenv"
)

// TestStatusPageInABrowser serves foldline ui for a deployed shop and opens
// it in a real headless Chromium: the DAG shows the ledger, every stage and
// every view, with an edge for each link, and the numbers on the page move
// as events are ingested.
func TestStatusPageInABrowser(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := deployShop(t, "ui")
	s.ingest(t, generate(t, 500, 31))
	s.waitForFold(t, 3*time.Minute)

	opts := ui.Options{Options: status.Options{Command: s.opts.Command}, Interval: 500 * time.Millisecond}
	report, err := status.Get(t.Context(), opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ledger:ledger"}
	edges := 0
	for _, st := range report.Stages {
		want = append(want, "stage:"+st.Name)
		edges += len(st.Upstream)
		if st.View != "" {
			edges++
		}
	}
	for _, v := range report.Views {
		want = append(want, "view:"+v.View)
	}
	if len(report.Stages) < 6 || len(report.Views) < 2 {
		t.Fatalf("the shop's report has %d stages and %d views", len(report.Stages), len(report.Views))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- ui.Serve(ctx, opts, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("foldline ui: %v", err)
		}
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU)...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	url := "http://" + ln.Addr().String() + "/"
	// The first call starts the browser and must have no deadline; later
	// ones get theirs from a context derived from it.
	if err := chromedp.Do(browser, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s in Chromium: %v", url, err)
	}
	page, cancelPage := context.WithTimeout(browser, 3*time.Minute)
	defer cancelPage()
	if err := chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(`g.node[data-name="validate"]`))); err != nil {
		t.Fatalf("waiting for the DAG to show validate: %v", err)
	}
	nodes, err := chromedp.Run(page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("g.node")].map(n => n.dataset.kind + ":" + n.dataset.name)`))
	if err != nil {
		t.Fatal(err)
	}
	drawnEdges, err := chromedp.Run(page, chromedp.Evaluate[int](`document.querySelectorAll("path.edge").length`))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(nodes)
	slices.Sort(want)
	if !slices.Equal(nodes, want) {
		t.Errorf("the page draws %v, want %v", nodes, want)
	}
	if drawnEdges != edges {
		t.Errorf("the page draws %d edges, want %d", drawnEdges, edges)
	}

	processed := func() int {
		v, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('g.node[data-name="validate"]').dataset.processed`))
		if err != nil {
			t.Fatalf("reading validate's processed count on the page: %v", err)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("validate's processed count on the page is %q", v)
		}
		return n
	}
	before := processed()
	s.ingest(t, generate(t, 300, 32))
	testenv.WaitFor(t, 2*time.Minute, "the page shows validate's processed count growing", func() bool { return processed() >= before+250 })
	row, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#views tbody tr[data-view="user_activity"]`)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("validate processed %d, then %d on the page; user_activity row: %s", before, processed(), row)

	// Rows are estimated, and the page says so.
	header, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#views thead`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(header, "rows (estimated)") {
		t.Errorf("the views table's header %q does not say the rows are estimated", header)
	}
	testenv.WaitFor(t, time.Minute, "the page to show user_activity's estimated rows", func() bool {
		rows, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('g.node[data-name="user_activity"]').dataset.rowsEstimated`))
		return err == nil && rows != "" && rows != "undefined" && rows != "0"
	})

	// foldline status --watch -o json: one report per interval until
	// interrupted.
	var out bytes.Buffer
	watch := status.Options{Command: s.opts.Command, Watch: true, Interval: 200 * time.Millisecond}
	watch.Out = &out
	watchCtx, stopWatch := context.WithTimeout(t.Context(), 6*time.Second)
	defer stopWatch()
	if err := status.Run(watchCtx, watch, true); err != nil {
		t.Fatalf("status --watch: %v", err)
	}
	dec := json.NewDecoder(&out)
	reports := 0
	for {
		var r status.Report
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Tenant != s.tenant || len(r.Stages) != len(report.Stages) {
			t.Fatalf("status --watch printed %+v", r)
		}
		reports++
	}
	if reports < 2 {
		t.Errorf("status --watch printed %d reports in 6 s at 200 ms, want several", reports)
	}
}
