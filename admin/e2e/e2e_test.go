package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/shopfold"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra/reader"
)

// shop is the shop pipeline deployed into a tenant of its own.
type shop struct {
	svc      testenv.Services
	tenant   string
	keyspace string
	opts     deploy.Options
	session  *gocql.Session
	// ledger holds every line ingested so far, in ledger order.
	ledger [][]byte
	// windowed is set when the deployed manifests declare the shop's
	// windowed views, which waitForResult then compares too.
	windowed bool
	// joined is set when they declare the sku_refunds view, enriched when
	// they declare sku_page_views_before: waitForResult then compares them
	// too.
	joined, enriched bool
}

// deployShop deploys the frozen copy of the shop manifests
// (testenv.ShopManifestsDir), whose views are the ones internal/shopfold
// folds, into a tenant of its own.
func deployShop(t testing.TB, name string) *shop {
	t.Helper()
	return deployShopFrom(t, name, testenv.ShopManifestsDir())
}

// deployShopFrom deploys the manifests in dir (a test's edited copy of the
// shop manifests) into a tenant of their own.
func deployShopFrom(t testing.TB, name, dir string) *shop {
	t.Helper()
	svc := testenv.All(t)
	tenant := fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano()%1_000_000)
	opts := deploy.Options{
		Command: target.Command{
			Dir:      dir,
			Target:   target.Flags{Tenant: tenant},
			Services: svc,
			Out:      testenv.LogWriter{T: t}, ErrOut: testenv.LogWriter{T: t},
		},
		CacheDir: filepath.Join(os.TempDir(), "foldline-test-bin"),
		Wait:     5 * time.Minute,
	}
	t.Cleanup(func() { purge(tenant, opts) })
	if _, err := deploy.Deploy(t.Context(), opts); err != nil {
		t.Fatalf("deploying the shop pipeline as %s: %v", tenant, err)
	}
	session := cassandraSession(t, svc)
	set, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	windowed, joined, enriched := 0, false, false
	for _, v := range set.Views {
		switch v.Name {
		case "user_purchases_7d", "sku_units_1d":
			windowed++
		case "sku_refunds":
			joined = true
		case "sku_page_views_before":
			enriched = true
		}
	}
	return &shop{svc: svc, tenant: tenant, keyspace: manifest.KeyspaceFor(tenant), opts: opts, session: session,
		windowed: windowed == 2, joined: joined, enriched: enriched}
}

// purges are the tenants' purges still going: TestMain waits for them.
var purges sync.WaitGroup

// TestMain runs the tests, then waits for the purges of their tenants.
func TestMain(m *testing.M) {
	m.Run() // its result is the binary's exit code once TestMain returns
	purges.Wait()
}

// purge removes a test's tenant (its functions, topics, tables and
// keyspace) in the background, while the next test runs: about 5 s a
// test, which nothing after it waits for. What it says goes to standard
// error only when it fails, since the test that deployed the tenant is
// over by then.
func purge(tenant string, opts deploy.Options) {
	// The manifests say what to remove, and the test's copy of them may go
	// with its temporary directory as soon as this returns.
	dir, err := os.MkdirTemp("", "e2e-purge-")
	if err == nil {
		err = os.CopyFS(dir, os.DirFS(opts.Dir))
	}
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "purging tenant %s: copying its manifests: %v\n", tenant, err)
		return
	}
	opts.Dir = dir
	purges.Go(func() {
		defer os.RemoveAll(dir)
		var out bytes.Buffer
		opts.Out, opts.ErrOut = &out, &out
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts, Tables: true, Purge: true, Yes: true}); err != nil {
			fmt.Fprintf(os.Stderr, "purging tenant %s: %v\n%s", tenant, err, out.String())
		}
	})
}

// cassandraSession logs in to Cassandra with svc's credentials; the session
// closes when the test ends.
func cassandraSession(t testing.TB, svc testenv.Services) *gocql.Session {
	t.Helper()
	cluster, err := svc.CassandraCluster()
	if err != nil {
		t.Fatal(err)
	}
	cluster.Timeout = 30 * time.Second
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connecting to Cassandra as %q: %v", svc.CassandraUser, err)
	}
	t.Cleanup(session.Close)
	return session
}

// pulsarAdmin is an admin client of the stack's broker.
func (s *shop) pulsarAdmin(t testing.TB) pulsaradmin.Client {
	t.Helper()
	admin, err := pulsaradmin.NewClient(s.svc.PulsarAdminConfig())
	if err != nil {
		t.Fatalf("creating a Pulsar admin client: %v", err)
	}
	return admin
}

// dropFromShop removes views and functions from the shop's manifests in
// dir: the views' and the functions' files, and the functions' entries in
// pipeline.yaml.
func dropFromShop(t testing.TB, dir string, views, functions []string) {
	t.Helper()
	for _, v := range views {
		if err := os.Remove(filepath.Join(dir, "views", v+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	pipeline := filepath.Join(dir, "pipeline.yaml")
	text, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Split(string(text), "\n  - config: ")
	kept := entries[:1]
	for _, entry := range entries[1:] {
		if !slices.ContainsFunc(functions, func(f string) bool { return strings.HasPrefix(entry, "functions/"+f+".yaml\n") }) {
			kept = append(kept, entry)
		}
	}
	if len(kept) != len(entries)-len(functions) {
		t.Fatalf("%s: found %d of the entries of %v", pipeline, len(entries)-len(kept), functions)
	}
	if err := os.WriteFile(pipeline, []byte(strings.Join(kept, "\n  - config: ")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range functions {
		if err := os.Remove(filepath.Join(dir, "functions", f+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
}

// generate makes n shop events (with malformed lines) from seed, with
// ids of the seed's own (the shop counts an event once per user and id:
// two streams into one ledger must not share ids), their event times
// spread over the nine days up to now: the windowed views' 1-day and 7-day
// windows hold some of them, and the oldest are past every window (their
// tiles expired, the sink drops them). Each time moves by up to an
// interval either way, so that some events come after later ones.
func generate(t testing.TB, n int, seed uint64) [][]byte {
	t.Helper()
	lines, err := generateLines(n, seed)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// generateLines is generate for a goroutine other than the test's.
func generateLines(n int, seed uint64) ([][]byte, error) {
	var buf bytes.Buffer
	span := 9 * 24 * time.Hour
	interval := span / time.Duration(n)
	if _, err := gen.Generate(&buf, gen.Options{Events: n, Users: 300, SKUs: 40, Seed: seed, Malformed: 0.01, IDPrefix: fmt.Sprintf("s%d-", seed),
		End: time.Now().UTC().Truncate(time.Second), Interval: interval, Jitter: interval}); err != nil {
		return nil, fmt.Errorf("generating events: %w", err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")), nil
}

// ingest publishes lines to the ledger with foldline ingest.
func (s *shop) ingest(t testing.TB, lines [][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("events-%d.jsonl", len(s.ledger)))
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ingest.Run(t.Context(), ingest.Options{Services: s.svc, Tenant: s.tenant, Files: []string{path}})
	if err != nil {
		t.Fatalf("ingesting %d events: %v", len(lines), err)
	}
	if res[0].Published != int64(len(lines)) {
		t.Fatalf("ingest published %d of %d events", res[0].Published, len(lines))
	}
	s.ledger = append(s.ledger, lines...)
}

// activeTable is the table the view registry names for view (a backfill
// switches it).
func (s *shop) activeTable(view string) (string, error) {
	entry, err := registry.Get(context.Background(), s.session, s.keyspace, view)
	if err != nil {
		return "", err
	}
	if entry.ActiveTable == "" {
		return "", fmt.Errorf("view %s has no active table", view)
	}
	return entry.ActiveTable, nil
}

// views reads both views' active tables in the fold's shape, skipping
// deleted rows.
func (s *shop) views(t testing.TB) (shopfold.Result, error) {
	t.Helper()
	var r shopfold.Result
	r.UserActivity = map[string]shopfold.UserActivityRow{}
	r.ProductSales = map[string]shopfold.ProductSalesRow{}
	userActivity, err := s.activeTable("user_activity")
	if err != nil {
		return r, err
	}
	productSales, err := s.activeTable("product_sales")
	if err != nil {
		return r, err
	}
	if r.UserActivity, err = s.userActivity(userActivity); err != nil {
		return r, err
	}
	if r.SkuRefunds, err = s.skuRefunds(); err != nil {
		return r, err
	}
	if r.SkuPageViewsBefore, err = s.skuPageViewsBefore(); err != nil {
		return r, err
	}
	iter := s.session.Query(`SELECT sku, units, revenue_cents, orders, fl_deleted FROM ` + s.keyspace + `.` + productSales).Iter()
	var (
		key     string
		deleted bool
		sales   shopfold.ProductSalesRow
	)
	for iter.Scan(&key, &sales.Units, &sales.RevenueCents, &sales.Orders, &deleted) {
		if !deleted {
			r.ProductSales[key] = sales
		}
	}
	if err := iter.Close(); err != nil {
		return r, fmt.Errorf("reading product_sales: %w", err)
	}
	return r, nil
}

// skuRefunds reads the sku_refunds view's active table in the fold's shape,
// skipping deleted rows; a tenant deployed without the view has none (nil).
func (s *shop) skuRefunds() (map[string]shopfold.SkuRefundsRow, error) {
	if !s.joined {
		return nil, nil // a test's manifests without it: nothing to compare
	}
	table, err := s.activeTable("sku_refunds")
	if err != nil {
		return nil, err
	}
	return s.skuRefundsIn(table)
}

// skuRefundsIn reads a table of the sku_refunds view (the active one, or a
// replay's snapshot) in the fold's shape, skipping deleted rows.
func (s *shop) skuRefundsIn(table string) (map[string]shopfold.SkuRefundsRow, error) {
	pairs, err := s.skuPairs(table, "refunds", "refunded_cents")
	if err != nil {
		return nil, err
	}
	rows := map[string]shopfold.SkuRefundsRow{}
	for sku, p := range pairs {
		rows[sku] = shopfold.SkuRefundsRow{Refunds: p[0], RefundedCents: p[1]}
	}
	return rows, nil
}

// skuPageViewsBefore reads the sku_page_views_before view's active table in
// the fold's shape; a tenant deployed without the view has none (nil).
func (s *shop) skuPageViewsBefore() (map[string]shopfold.SkuPageViewsBeforeRow, error) {
	if !s.enriched {
		return nil, nil // a test's manifests without it: nothing to compare
	}
	table, err := s.activeTable("sku_page_views_before")
	if err != nil {
		return nil, err
	}
	pairs, err := s.skuPairs(table, "purchases", "page_views_before")
	if err != nil {
		return nil, err
	}
	rows := map[string]shopfold.SkuPageViewsBeforeRow{}
	for sku, p := range pairs {
		rows[sku] = shopfold.SkuPageViewsBeforeRow{Purchases: p[0], PageViewsBefore: p[1]}
	}
	return rows, nil
}

// skuPairs reads a table of a view keyed by sku with two bigint columns a
// and b, skipping deleted rows (a null reads as 0).
func (s *shop) skuPairs(table, a, b string) (map[string][2]int64, error) {
	rows := map[string][2]int64{}
	iter := s.session.Query(`SELECT sku, ` + a + `, ` + b + `, fl_deleted FROM ` + s.keyspace + `.` + table).Iter()
	var (
		key     string
		row     [2]int64
		deleted bool
	)
	for iter.Scan(&key, &row[0], &row[1], &deleted) {
		if !deleted {
			rows[key] = row
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	return rows, nil
}

// userActivity reads a table of the user_activity view in the fold's shape,
// skipping deleted rows.
func (s *shop) userActivity(table string) (map[string]shopfold.UserActivityRow, error) {
	rows := map[string]shopfold.UserActivityRow{}
	iter := s.session.Query(`SELECT user, page_views, cart_units, purchases, spent_cents, last_seen, last_url, fl_deleted FROM ` +
		s.keyspace + `.` + table).Iter()
	var (
		key     string
		row     shopfold.UserActivityRow
		deleted bool
	)
	for iter.Scan(&key, &row.PageViews, &row.CartUnits, &row.Purchases, &row.SpentCents, &row.LastSeen, &row.LastURL, &deleted) {
		if !deleted {
			row.LastSeen = row.LastSeen.UTC()
			rows[key] = row
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	return rows, nil
}

// expected folds the ledger independently, at Cassandra's millisecond precision.
func (s *shop) expected() shopfold.Result {
	return foldAtCassandraPrecision(s.ledger)
}

// foldAtCassandraPrecision folds events as the views should hold them:
// each event once (the shop's tenant names its events' id field).
func foldAtCassandraPrecision(events [][]byte) shopfold.Result {
	want := shopfold.FoldDistinct(events)
	for k, row := range want.UserActivity {
		row.LastSeen = row.LastSeen.Truncate(time.Millisecond).UTC()
		want.UserActivity[k] = row
	}
	return want
}

// diff describes how got differs from want, in a few lines.
func diff(got, want shopfold.Result) string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < 8 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	diffRows("user_activity", got.UserActivity, want.UserActivity, add)
	diffRows("product_sales", got.ProductSales, want.ProductSales, add)
	if got.SkuRefunds != nil { // a tenant without the view has nil
		diffRows("sku_refunds", got.SkuRefunds, want.SkuRefunds, add)
	}
	if got.SkuPageViewsBefore != nil { // the same
		diffRows("sku_page_views_before", got.SkuPageViewsBefore, want.SkuPageViewsBefore, add)
	}
	return strings.Join(out, "\n")
}

// diffRows reports the rows of one view missing from got, differing or
// unexpected.
func diffRows[K cmp.Ordered, V comparable](view string, got, want map[K]V, add func(string, ...any)) {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			add("%s %v missing", view, k)
		} else if g != want[k] {
			add("%s %v = %+v, want %+v", view, k, g, want[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			add("%s %v unexpected", view, k)
		}
	}
}

// windowsDiff describes how the shop's windowed views, read as of now,
// differ from the fold by event time of the ledger's valid purchases (each
// event id once); "" when they do not, or when the deployed manifests
// declare none.
func (s *shop) windowsDiff(t testing.TB) string {
	if !s.windowed {
		return ""
	}
	folder := shopfold.NewDistinctFolder()
	for _, l := range s.ledger {
		_ = folder.Add(l)
	}
	purchases := folder.Purchases()
	now := time.Now()
	users, skus := map[string]bool{}, map[string]bool{}
	for _, p := range purchases {
		users[p.User], skus[p.SKU] = true, true
	}
	var views [2]*reader.View
	for i, name := range []string{"user_purchases_7d", "sku_units_1d"} {
		v, err := reader.Open(t.Context(), s.session, s.keyspace, name, reader.Options{})
		if err != nil {
			return fmt.Sprintf("opening %s: %v", name, err)
		}
		views[i] = v
	}
	return compareDeclared(t.Context(), views[0], views[1], purchases, now, slices.Sorted(maps.Keys(users)), slices.Sorted(maps.Keys(skus)))
}

// waitForFold polls the views until they equal the fold of the ledger, and
// fails with the differences when they do not within timeout.
func (s *shop) waitForFold(t testing.TB, timeout time.Duration) {
	t.Helper()
	s.waitForResult(t, s.expected(), timeout)
}

// waitForResult polls the views until they equal want (a fold of the ledger,
// perhaps adjusted to a changed transformation).
func (s *shop) waitForResult(t testing.TB, want shopfold.Result, timeout time.Duration) {
	t.Helper()
	if len(want.UserActivity) == 0 || len(want.ProductSales) == 0 {
		t.Fatalf("the fold of %d ledger events is empty: nothing would be checked", len(s.ledger))
	}
	var last string
	deadline := time.Now().Add(timeout)
	for {
		got, err := s.views(t)
		if err == nil {
			if last = diff(got, want); last == "" {
				last = s.windowsDiff(t)
			}
			if last == "" {
				t.Logf("views equal the fold of %d ledger events: %d users, %d skus sold, %d skus refunded, %d skus with page views before (compared: sku_refunds %v, sku_page_views_before %v, windowed views %v)",
					len(s.ledger), len(want.UserActivity), len(want.ProductSales), len(want.SkuRefunds), len(want.SkuPageViewsBefore), s.joined, s.enriched, s.windowed)
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("views still differ from the fold of %d ledger events after %v:\n%s\nsubscriptions:\n%s\noperations:\n%s", len(s.ledger), timeout, last, s.subscriptionReport(t), s.opsReport(t, last))
		}
		time.Sleep(foldPoll)
	}
}

// foldPoll is how often waitForResult reads the views, as often as
// testenv.WaitFor polls: a test's views are a few hundred rows, and with a
// second between reads each of the package's waits lasted, on average,
// half a second past the moment the views were equal.
const foldPoll = 250 * time.Millisecond

// TestShopViewsEqualFold is the plain path of the demo: deploy, ingest,
// and the views equal the fold (issue 6 (a), issue 7's end-to-end test);
// every line the independent fold rejects is in validate's dead-letter
// topic, as it was ingested, with the reason and where it came from.
func TestShopViewsEqualFold(t *testing.T) {
	s := deployShop(t, "fold")
	s.ingest(t, generate(t, 5000, 11))
	// A refund of an order no purchase precedes: sku_refunds leaves it out,
	// and sku-refunds dead-letters it with the reason.
	unknown := []byte(`{"id":"x-1","type":"refund","user":"u1","time":"2026-11-02T00:00:00Z","order":"no-such-order","amount_cents":100}`)
	s.ingest(t, [][]byte{unknown})
	s.waitForFold(t, 5*time.Minute)
	if n := len(s.expected().UnknownOrders); n != 1 {
		t.Fatalf("the fold has %d refunds of unknown orders, want the one published", n)
	}
	refundsDLQ := "persistent://" + s.tenant + "/" + pipelineNS + "/sku-refunds-dlq"
	letter := s.deadLetters(t, refundsDLQ, 1, time.Minute)[0]
	if reason := letter.Properties()[envelope.PropDeadLetterReason]; !bytes.Equal(letter.Payload(), unknown) || !strings.Contains(reason, `order "no-such-order": no purchase of the order precedes the refund`) {
		t.Errorf("sku-refunds dead letter %q with reason %q, want the refund of the unknown order, saying so", letter.Payload(), reason)
	}

	rejected := s.expected().Rejected
	if len(rejected) == 0 {
		t.Fatal("the generated events hold no malformed line: nothing checks the dead letters")
	}
	dlq := "persistent://" + s.tenant + "/" + pipelineNS + "/validate-dlq"
	// validate reads the ledger's distinct events (the dedup stage's output).
	source := "persistent://" + s.tenant + "/" + pipelineNS + "/distinct"
	letters := s.deadLetters(t, dlq, len(rejected), time.Minute)
	for i, msg := range letters {
		want := s.ledger[rejected[i]]
		props := msg.Properties()
		origin, err := envelope.OriginFromProperties(props)
		if !bytes.Equal(msg.Payload(), want) || props[envelope.PropDeadLetterReason] == "" ||
			props[envelope.PropDeadLetterSource] != source || err != nil || origin.Topic != ingest.DefaultTopic(s.tenant) {
			t.Errorf("dead letter %d: %q with properties %v; want line %d, %q, with its reason, source and origin", i, msg.Payload(), props, rejected[i]+1, want)
		}
	}
	t.Logf("%d malformed lines dead-lettered, e.g. %q: %s", len(letters), letters[0].Payload(), letters[0].Properties()[envelope.PropDeadLetterReason])
}

// deadLetters reads the first n messages of a dead-letter topic, failing
// when they do not arrive within timeout.
func (s *shop) deadLetters(t *testing.T, topic string, n int, timeout time.Duration) []pulsar.Message {
	t.Helper()
	reader := s.readFromEarliest(t, topic)
	deadline := time.Now().Add(timeout)
	var out []pulsar.Message
	for len(out) < n {
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		msg, err := reader.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s holds %d messages after %v, want %d", topic, len(out), timeout, n)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg)
	}
	return out
}

// readFromEarliest returns a reader of topic from its first message, closed
// (with its client) when the test ends.
func (s *shop) readFromEarliest(t *testing.T, topic string) pulsar.Reader {
	t.Helper()
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	t.Cleanup(reader.Close)
	return reader
}
