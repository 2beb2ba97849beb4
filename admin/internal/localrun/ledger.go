package localrun

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/ledgerepoch"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/sinks/cassandra"
)

// ReadLedger yields the ledger topics' events, from the first to the last
// one the broker holds when reading starts (later ones are left), merged
// in publish order, in batches of up to size events.
func ReadLedger(ctx context.Context, client pulsar.Client, topics []string, size int) iter.Seq2[[]Message, error] {
	return ReadLedgerFrom(ctx, client, topics, size, nil)
}

// Entry is a ledger entry's position: where a resumed read starts.
type Entry struct{ Ledger, Entry int64 }

// ReadLedgerFrom is ReadLedger from the entries of from (by topic, or by
// partition of a partitioned topic) on, each included; a topic or
// partition that from does not name is read from its first event.
func ReadLedgerFrom(ctx context.Context, client pulsar.Client, topics []string, size int, from map[string]Entry) iter.Seq2[[]Message, error] {
	return func(yield func([]Message, error) bool) {
		type cursor struct {
			r pulsar.Reader
			// next is the topic's next event, when has.
			next Message
			has  bool
			// last is the topic's last entry when reading started: while
			// the event read last is of an earlier entry, more is there
			// without asking HasNext, which costs the client two
			// goroutines, a channel and a context per call (0.66 µs of
			// the fused backfill's CPU per event in its profile).
			last struct{ ledger, entry int64 }
		}
		var cursors []*cursor
		defer func() {
			for _, c := range cursors {
				c.r.Close()
			}
		}()
		advance := func(c *cursor) error {
			more := c.has && c.last.entry >= 0 &&
				(c.next.Ledger < c.last.ledger || c.next.Ledger == c.last.ledger && c.next.Entry < c.last.entry)
			c.has = false
			if !more && !c.r.HasNext() {
				return nil
			}
			msg, err := c.r.Next(ctx)
			if err != nil {
				return fmt.Errorf("reading the ledger: %w", err)
			}
			c.next, c.has = FromPulsar(msg), true
			return nil
		}
		readFrom, err := startsOf(client, topics, from)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, start := range readFrom {
			topic := start.topic
			r, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: start.id, StartMessageIDInclusive: start.inclusive, ReceiverQueueSize: 5000})
			if err != nil {
				yield(nil, fmt.Errorf("reading ledger topic %s: %w", topic, err))
				return
			}
			c := &cursor{r: r}
			c.last.entry = -1 // unknown: HasNext decides
			if id, err := r.GetLastMessageID(); err == nil {
				c.last.ledger, c.last.entry = id.LedgerID(), id.EntryID()
			}
			cursors = append(cursors, c)
			if err := advance(c); err != nil {
				yield(nil, err)
				return
			}
		}
		batch := make([]Message, 0, size)
		for {
			var first *cursor
			for _, c := range cursors {
				if c.has && (first == nil || c.next.PublishTime.Before(first.next.PublishTime)) {
					first = c
				}
			}
			if first == nil {
				break
			}
			batch = append(batch, first.next)
			if err := advance(first); err != nil {
				yield(nil, err)
				return
			}
			if len(batch) == size {
				if !yield(batch, nil) {
					return
				}
				batch = make([]Message, 0, size)
			}
		}
		if len(batch) > 0 {
			yield(batch, nil)
		}
	}
}

// readStart is where to read one topic (or partition) from.
type readStart struct {
	topic     string
	id        pulsar.MessageID
	inclusive bool
}

// startsOf returns where to read each of topics from: the first event, or
// for a topic (or the partitions of one) that from names, that entry, the
// whole entry included (batch index 0), each partition of a partitioned
// topic on its own reader.
func startsOf(client pulsar.Client, topics []string, from map[string]Entry) ([]readStart, error) {
	var out []readStart
	for _, topic := range topics {
		partitioned := false
		for name := range from {
			partitioned = partitioned || strings.HasPrefix(name, topic+"-partition-")
		}
		names := []string{topic}
		if partitioned {
			var err error
			if names, err = client.TopicPartitions(topic); err != nil {
				return nil, fmt.Errorf("listing the partitions of ledger topic %s: %w", topic, err)
			}
		}
		for _, name := range names {
			start := readStart{topic: name, id: pulsar.EarliestMessageID()}
			if e, ok := from[name]; ok {
				partition := int32(-1)
				if _, n, found := strings.Cut(name, "-partition-"); found {
					if p, err := strconv.Atoi(n); err == nil {
						partition = int32(p)
					}
				}
				start.id, start.inclusive = pulsar.NewMessageID(e.Ledger, e.Entry, 0, partition), true
			}
			out = append(out, start)
		}
	}
	return out, nil
}

// FromPulsar is a ledger event as a local input. Properties that only the
// driver of a local run may set (pf.PropLocalPrefix: its markers to export
// or import states) are taken off: a producer cannot make an event pose as
// one.
func FromPulsar(msg pulsar.Message) Message {
	id := msg.ID()
	return Message{
		Topic: msg.Topic(), Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: int64(id.BatchIdx()),
		Key: msg.Key(), Payload: msg.Payload(), Properties: withoutLocal(msg.Properties()),
		EventTime: msg.EventTime(), PublishTime: msg.PublishTime(),
	}
}

// withoutLocal returns props without the properties of pf.PropLocalPrefix,
// props itself when it has none.
func withoutLocal(props map[string]string) map[string]string {
	for k := range props {
		if strings.HasPrefix(k, pf.PropLocalPrefix) {
			props = maps.Clone(props)
			maps.DeleteFunc(props, func(k, _ string) bool { return strings.HasPrefix(k, pf.PropLocalPrefix) })
			return props
		}
	}
	return props
}

// Job is one or more views of the manifests, to run locally over their
// tenant's ledger.
type Job struct {
	Set   *manifest.Set
	Graph *manifest.Graph
	// View is the first of Views: the one OverLedger runs.
	View  *manifest.View
	Views []*manifest.View
	// Clients talk to the tenant's Pulsar.
	Clients *pulsarx.Clients

	svc           services.Services
	dir, cacheDir string
}

// Open reads the manifests of cmd and connects to the tenant of view; an
// unknown view or tenant is an exitcode.ErrNotFound error. cacheDir
// receives the built binaries (default gobuild's).
func Open(ctx context.Context, cmd target.Command, view, cacheDir string) (*Job, error) {
	return OpenViews(ctx, cmd, []string{view}, cacheDir)
}

// OpenViews is Open for several views of the manifests, to run at once
// over one read of the ledger (OverLedgerEach).
func OpenViews(ctx context.Context, cmd target.Command, views []string, cacheDir string) (*Job, error) {
	if len(views) == 0 {
		return nil, fmt.Errorf("running views locally: no view named: %w", exitcode.ErrUsage)
	}
	set, graph, err := cmd.Target.LoadGraph(cmd.Dir)
	if err != nil {
		return nil, err
	}
	vs := make([]*manifest.View, len(views))
	for i, name := range views {
		if vs[i], err = set.ViewByName(name); err != nil {
			return nil, fmt.Errorf("%w: %w", err, exitcode.ErrNotFound)
		}
	}
	clients, err := pulsarx.ConnectTenant(ctx, cmd.Services, set.Tenant.Name)
	if err != nil {
		return nil, err
	}
	return &Job{Set: set, Graph: graph, View: vs[0], Views: vs, Clients: clients, svc: cmd.Services, dir: cmd.Dir, cacheDir: cacheDir}, nil
}

// OverLedger runs the view's path (Job.View's) locally over the ledger as
// it is now, with the ledger topics' epochs as deploy gives them: batch
// sees each batch of ledger events, op each view operation in ledger order
// with the ledger event that caused it. It returns the dead letters of
// each function.
func (j *Job) OverLedger(ctx context.Context, batch func([]Message), op func(cassandra.Op, Message) error) (map[string]int64, error) {
	dead, err := j.overLedger(ctx, j.Views[:1], batch, func(_ int, o cassandra.Op, e Message) error { return op(o, e) })
	if err != nil {
		return nil, err
	}
	return dead[0], nil
}

// OverLedgerEach is OverLedger for every view of the job at once, over one
// read of the ledger (StreamEach): op gets the index in Views of the view
// whose operation it is, and is called from one goroutine per view, so
// that calls for different views may run at the same time; batch sees each
// batch once, from the goroutine that reads the ledger, as it hands it
// out. Each view's path runs in processes of its own: a function on the
// paths of two views (the shop's validate) runs twice, once for each. It
// returns the dead letters of each view's functions.
func (j *Job) OverLedgerEach(ctx context.Context, batch func([]Message), op func(view int, op cassandra.Op, event Message) error) ([]map[string]int64, error) {
	return j.overLedger(ctx, j.Views, batch, op)
}

func (j *Job) overLedger(ctx context.Context, views []*manifest.View, batch func([]Message), op func(int, cassandra.Op, Message) error) ([]map[string]int64, error) {
	var ledgers []string
	epochs := map[string]string{}
	for _, t := range j.Set.Tenant.Ledger {
		tn, err := utils.GetTopicName(t.Name)
		if err != nil {
			return nil, fmt.Errorf("naming topic %s: %w", t.Name, err)
		}
		if epoch, ok, err := ledgerepoch.Read(ctx, j.Clients.Admin.Topics(), *tn); err != nil {
			return nil, err
		} else if ok {
			epochs[t.Name] = epoch
		}
		ledgers = append(ledgers, t.Name)
	}
	builder := &gobuild.Builder{Dir: gobuild.ModuleDir(j.dir, "."), CacheDir: j.cacheDir, Platform: gobuild.Platform{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}}
	var pipelines []*Pipeline
	closeAll := func() {
		for _, p := range pipelines {
			p.Close()
		}
	}
	for _, v := range views {
		p, err := Start(ctx, j.Graph, v.Name, builder, epochs)
		if err != nil {
			closeAll()
			return nil, err
		}
		pipelines = append(pipelines, p)
	}
	client, err := pulsarx.NewClient(j.svc)
	if err != nil {
		closeAll()
		return nil, err
	}
	defer client.Close()
	if err := StreamEach(ctx, pipelines, ReadLedger(ctx, client, ledgers, 2000), batch, op); err != nil {
		closeAll()
		return nil, err
	}
	var errs []error
	dead := make([]map[string]int64, len(pipelines))
	for i, p := range pipelines {
		if err := p.Close(); err != nil {
			errs = append(errs, err)
		}
		dead[i] = p.DeadLetters
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return dead, nil
}
