package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform/memview"
	"github.com/foldline/foldline/internal/services"
)

// opsReport reads every view operation the tenant's ops topics hold and,
// for each row a diff line names ("product_sales sku-10 = …"), says what
// those operations fold to with each origin counted once and how many came
// more than once, and, for every topic of the pipeline, where an origin
// partition's positions (on an operations topic, a row's) first came out
// of order (orderReport). It tells a loss before the sink (the
// topics lack the operation, or hold it out of order, so the sink skipped
// it) from one in the sink or the subscription feeding it (the topics have
// it, in order).
func (s *shop) opsReport(t testing.TB, diffText string) string {
	rows := map[string]bool{} // "view key" the diff names
	for line := range strings.Lines(diffText) {
		if f := strings.Fields(line); len(f) >= 2 {
			rows[f[0]+" "+f[1]] = true
		}
	}
	if len(rows) == 0 {
		return "(no rows to report)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := s.pulsarAdmin(t)
	ns, err := utils.GetNameSpaceName(s.tenant, pipelineNS)
	if err != nil {
		return fmt.Sprintf("(no operations report: %v)", err)
	}
	_, topics, err := admin.Topics().List(*ns)
	if err != nil {
		return fmt.Sprintf("(no operations report: listing topics: %v)", err)
	}
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		return fmt.Sprintf("(no operations report: %v)", err)
	}
	defer client.Close()

	type seen struct {
		ops  map[string]envelope.ViewOp // origin → the first operation with it
		dups int
	}
	byRow := map[string]*seen{}
	var b strings.Builder
	slices.Sort(topics)
	// Where a disorder first appears: every stage's output, in the
	// pipeline's order (valid, purchases, … the ops topics).
	for _, topic := range topics {
		if !strings.Contains(topic, "dlq") {
			b.WriteString(orderReport(ctx, client, topic))
		}
	}
	for _, topic := range topics {
		name := topic[strings.LastIndex(topic, "/")+1:]
		if !strings.HasSuffix(name, "-ops") && !strings.Contains(name, "-ops-partition-") {
			continue
		}
		n, err := readOps(ctx, client, topic, func(op envelope.ViewOp, origin envelope.Origin) {
			for _, v := range op.Key {
				id := op.View + " " + strings.Trim(string(v), `"`)
				if !rows[id] {
					continue
				}
				r := byRow[id]
				if r == nil {
					r = &seen{ops: map[string]envelope.ViewOp{}}
					byRow[id] = r
				}
				if _, dup := r.ops[origin.String()]; dup {
					r.dups++
					continue
				}
				r.ops[origin.String()] = op
			}
		})
		fmt.Fprintf(&b, "%s: %d operations read", topic, n)
		if err != nil {
			fmt.Fprintf(&b, " (%v)", err)
		}
		b.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		r := byRow[id]
		if r == nil {
			fmt.Fprintf(&b, "%s: no operation in the topics\n", id)
			continue
		}
		views := memview.New()
		for _, origin := range slices.Sorted(maps.Keys(r.ops)) {
			if err := views.Apply(r.ops[origin]); err != nil {
				fmt.Fprintf(&b, "%s: folding %s: %v\n", id, origin, err)
			}
		}
		view, key, _ := strings.Cut(id, " ")
		fmt.Fprintf(&b, "%s: %d distinct operations (%d more than once), folded once each: %v\n",
			id, len(r.ops), r.dups, views.Rows(view))
		b.WriteString(s.traceReport(key, slices.Collect(maps.Keys(r.ops))))
	}
	return b.String()
}

// traceReport reads the sinks' trace (the sink setting trace, which the
// test manifests turn on; the worker copies each instance's output to the
// stack's pulsar.out) for the row with key and says which sink processes
// applied its operations; every application by one process past a position
// that another had applied, from a row read without it (a second writer
// of the row at the same time, or an operation delivered after a later
// one); and, for each of origins (the operations the topics hold) that no
// process applied, every line about it: skipped as applied while the row
// held a later position of its partition (it came after a later one), or
// never seen (lost before the sink, or the trace is incomplete).
func (s *shop) traceReport(key string, origins []string) string {
	path := filepath.Join(services.StackDir(), "pulsar", "logs", "pulsar.out")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("  (no sink trace: %v)\n", err)
	}
	return analyzeTrace(string(data), s.tenant, key, origins)
}

// analyzeTrace is traceReport on the text of the worker's output.
func analyzeTrace(data, tenant, key string, origins []string) string {
	rowField := fmt.Sprintf("row=%q", strconv.Quote(key)+",")
	tenantOrigin := "origin=persistent://" + tenant + "/"
	applied := map[string]bool{}
	about := map[string][]string{} // origin → its trace lines
	pids := map[string]int{}       // pid → operations it applied to the row
	// last is, per ledger partition, the latest position any process
	// applied and that line; stale lists applications past it by another
	// process that had not seen it (a stale read: a second writer of the
	// row, or an operation delivered after a later one).
	type applier struct {
		pos  envelope.Position
		line string
	}
	last := map[string]applier{}
	var stale []string
	for line := range strings.Lines(data) {
		if !strings.Contains(line, " trace ") || !strings.Contains(line, rowField) || !strings.Contains(line, tenantOrigin) {
			continue
		}
		line = strings.TrimSpace(line)
		fields := traceFields(line)
		origin := fields["position"] + " " + fields["origin"] // as envelope.Origin.String
		about[origin] = append(about[origin], line)
		if fields["fate"] != "applied" {
			continue
		}
		applied[origin] = true
		pids[fields["pid"]]++
		pos, err := envelope.ParsePosition(fields["position"])
		if err != nil {
			continue
		}
		had, _ := envelope.ParsePosition(fields["row_had"]) // none: the zero position
		prev, ok := last[fields["origin"]]
		if ok && pos.Compare(prev.pos) > 0 && had.Compare(prev.pos) < 0 && !strings.Contains(prev.line, "pid="+fields["pid"]+" ") {
			stale = append(stale, line+"\n      after "+prev.line)
		}
		if !ok || pos.Compare(prev.pos) > 0 {
			last[fields["origin"]] = applier{pos, line}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  sink trace of %s: operations applied per sink process %v\n", key, pids)
	for _, line := range stale {
		fmt.Fprintf(&b, "  applied by a process that had not seen another's later one:\n    %s\n", line)
	}
	for _, origin := range slices.Sorted(slices.Values(origins)) {
		if applied[origin] {
			continue
		}
		lines := about[origin]
		if len(lines) == 0 {
			fmt.Fprintf(&b, "  %s: never reached a sink\n", origin)
			continue
		}
		fmt.Fprintf(&b, "  %s: never applied:\n    %s\n", origin, strings.Join(lines, "\n    "))
	}
	return b.String()
}

// traceFields splits a sink trace line's key=value fields (values quoted
// when they hold spaces) into a map.
func traceFields(line string) map[string]string {
	fields := map[string]string{}
	rest := line
	for {
		eq := strings.Index(rest, "=")
		if eq < 0 {
			return fields
		}
		name := rest[strings.LastIndex(rest[:eq], " ")+1 : eq]
		rest = rest[eq+1:]
		value := rest
		if strings.HasPrefix(rest, `"`) {
			if quoted, err := strconv.QuotedPrefix(rest); err == nil {
				value, _ = strconv.Unquote(quoted)
				rest = rest[len(quoted):]
			}
		} else if sp := strings.IndexAny(rest, " \n"); sp >= 0 {
			value, rest = rest[:sp], rest[sp:]
		} else {
			rest = ""
		}
		fields[name] = strings.TrimSpace(value)
	}
}

// readOps reads topic from its first message to its last, calling f with
// each view operation and its origin, and returns how many it read.
func readOps(ctx context.Context, client pulsar.Client, topic string, f func(envelope.ViewOp, envelope.Origin)) (int, error) {
	n := 0
	err := readTopic(ctx, client, topic, func(msg pulsar.Message, origin envelope.Origin) {
		op, err := envelope.DecodeViewOp(msg.Payload())
		if err != nil {
			return // not an operation: a dead letter's topic, say
		}
		f(op, origin)
		n++
	})
	return n, err
}

// readTopic reads topic from its first message to its last, calling f with
// each message that carries an origin.
func readTopic(ctx context.Context, client pulsar.Client, topic string, f func(pulsar.Message, envelope.Origin)) error {
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return err
	}
	defer reader.Close()
	for reader.HasNext() {
		msg, err := reader.Next(ctx)
		if err != nil {
			return err
		}
		if origin, err := envelope.OriginFromProperties(msg.Properties()); err == nil {
			f(msg, origin)
		}
	}
	return nil
}

// orderReport reads a pipeline topic (one partition) and says how many of
// its messages carry an origin, how many repeat an origin, and where an
// origin partition's positions first appear out of their order, with the
// producer and publish time of the late message and of the later one it
// came after: the stage whose output topic first shows a disorder is the
// one that made it, and the producers tell one instance from two. On an
// operations topic the order that counts is each row's (message key's):
// the stage batches by key, which reorders different keys' operations.
func orderReport(ctx context.Context, client pulsar.Client, topic string) string {
	perKey := strings.Contains(topic[strings.LastIndex(topic, "/")+1:], "-ops")
	type first struct {
		pos  envelope.Position
		from string // producer and publish time
	}
	last := map[string]first{} // origin topic → latest first occurrence
	seen := map[string]bool{}
	n, dups, late := 0, 0, 0
	var examples []string
	err := readTopic(ctx, client, topic, func(msg pulsar.Message, origin envelope.Origin) {
		n++
		if seen[origin.String()] {
			dups++
			return
		}
		seen[origin.String()] = true
		from := fmt.Sprintf("%s at %s", msg.ProducerName(), msg.PublishTime().UTC().Format("15:04:05.000"))
		order := origin.Topic
		if perKey {
			order += " " + msg.Key()
		}
		prev, ok := last[order]
		switch {
		case !ok || origin.Position.Compare(prev.pos) > 0:
			last[order] = first{origin.Position, from}
		default:
			late++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("%s (%s) after %s (%s)", origin.Position, from, prev.pos, prev.from))
			}
		}
	})
	line := fmt.Sprintf("%s: %d messages with an origin, %d repeating one, %d first seen after a later one of their partition", topic, n, dups, late)
	if err != nil {
		line += fmt.Sprintf(" (read failed: %v)", err)
	}
	for _, e := range examples {
		line += "\n    " + e
	}
	return line + "\n"
}

func TestTraceFields(t *testing.T) {
	line := `2026/12/05 10:03:41 INFO trace pid=4242 row="\"sku-1\"," origin=persistent://t/ledger/events-partition-2 position=10788:129:26@e1 row_had=10788:129:70@e1 fate="skipped as applied"` + "\n"
	got := traceFields(line)
	want := map[string]string{"pid": "4242", "row": `"sku-1",`, "origin": "persistent://t/ledger/events-partition-2",
		"position": "10788:129:26@e1", "row_had": "10788:129:70@e1", "fate": "skipped as applied"}
	if !maps.Equal(got, want) {
		t.Errorf("traceFields = %v, want %v", got, want)
	}
}

func TestAnalyzeTrace(t *testing.T) {
	const p0 = "persistent://t/ledger/events-partition-0"
	line := func(pid int, pos, had, fate string) string {
		return fmt.Sprintf("2026/12/05 10:03:41 INFO trace pid=%d row=\"\\\"sku-1\\\",\" origin=%s position=%s row_had=%s fate=%s\n", pid, p0, pos, had, fate)
	}
	data := line(1, "5:1:0@e", "", "applied") +
		line(1, "5:2:0@e", "5:1:0@e", "applied") +
		// Process 2 applies 5:4 from a row that lacks 1's 5:2.
		line(2, "5:4:0@e", "5:1:0@e", "applied") +
		line(2, "5:3:0@e", "5:4:0@e", `"skipped as applied"`) +
		strings.Replace(line(3, "5:9:0@e", "5:1:0@e", "applied"), "sku-1", "sku-2", 1) // another row's
	got := analyzeTrace(data, "t", "sku-1", []string{"5:1:0@e " + p0, "5:2:0@e " + p0, "5:3:0@e " + p0, "5:4:0@e " + p0, "5:5:0@e " + p0})
	for _, want := range []string{
		"operations applied per sink process map[1:2 2:1]",
		"applied by a process that had not seen another's later one:\n    " + strings.TrimSpace(line(2, "5:4:0@e", "5:1:0@e", "applied")),
		"5:3:0@e " + p0 + ": never applied:\n    " + strings.TrimSpace(line(2, "5:3:0@e", "5:4:0@e", `"skipped as applied"`)),
		"5:5:0@e " + p0 + ": never reached a sink",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "5:1:0@e "+p0+": never") || strings.Contains(got, "5:2:0@e "+p0+": never") {
		t.Errorf("the report names an applied operation as never applied:\n%s", got)
	}
}
