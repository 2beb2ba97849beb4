package backfill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/ledgerepoch"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/functions/pf/localwire"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The engines that bring a backfill's copy up to the ledger's end
// (Options.Engine).
const (
	// EngineDeployed deploys the copy with subscriptions at the ledger's
	// first event: the functions worker runs the whole catch-up, every
	// event crossing a topic between stages.
	EngineDeployed = "deployed"
	// EngineFused first runs the copy's path on this machine over the
	// ledger as it is — every function binary in one local process of its
	// own (pf's -local mode), no topic in between, the sink's own code
	// writing the new table — and then deploys the copy with the ledger
	// subscriptions at the last event it read, to carry on live.
	EngineFused = "fused"
)

// EngineAuto (the default) is EngineFused for a ledger of at least
// fusedFromEntries entries and EngineDeployed below: the fused run's
// fixed costs (a process per function, then deploying the copy anyway)
// pay off only on a ledger long enough. On the shop (scripts/bench;
// docs/benchmarks.md) fused takes half the deployed engine's time from
// start to switch at 1 000 000 events (2000 entries), and still less at
// 100 000 (200 entries).
const EngineAuto = "auto"

// EngineForDeploy is the engine of a backfill that deploy --backfill runs
// (deploy.Backfiller): EngineDeployed when a later backfill of the same
// deploy shares stages this one copies (sharedLater), since a fused run's
// copies have no history in their output topics and could not be shared;
// EngineAuto otherwise.
func EngineForDeploy(sharedLater bool) string {
	if sharedLater {
		return EngineDeployed
	}
	return EngineAuto
}

// fusedFromEntries is where EngineAuto starts to fuse: the shortest
// ledger measured faster fused.
const fusedFromEntries = 200

// chooseEngine resolves engine for a ledger of entries entries.
func chooseEngine(engine string, entries int64) (string, error) {
	switch engine {
	case EngineDeployed, EngineFused, EngineCluster:
		return engine, nil
	case EngineAuto, "":
		if entries >= fusedFromEntries {
			return EngineFused, nil
		}
		return EngineDeployed, nil
	}
	return "", fmt.Errorf("--engine %q: want auto, deployed, fused or cluster: %w", engine, exitcode.ErrUsage)
}

// fusedGCPercent is the garbage collector's setting while a fused run
// goes (GOGC, when set, wins): the run's live heap is the reader's queue
// and a few batches in flight, and Go's default (a collection each time
// the heap doubles) spent about a sixth of this process's CPU collecting
// (perf, 300 000 events); the deployed instances run at the same 400.
const fusedGCPercent = 400

// fuse runs the forked path locally over the ledger as it is now into the
// new table, sends its dead letters to the copy's dead-letter topics, and
// creates the subscriptions of the copy's ledger readers at the last event
// it read of each ledger topic (partitions apart), so that the deployed
// copy goes on from there. The whole ledger entry (a batch of events) of
// that position comes once more: the sink skips its operations as applied,
// and the fused run leaves its dead letters to the copy (deadLetters). It
// returns how many ledger events it read. The new table exists already.
//
// It writes its checkpoint into rec every Options.Checkpoint (the last
// events whose operations the applier confirmed written, see checkpoints)
// with a heartbeat, and starts from rec's checkpoint when it has one (a
// run resumed after its CLI died): it reads the checkpoint's entries
// again, which the sink skips as applied. A run whose record changed under
// it (another CLI resumed it, an abort) stops with ErrTakenOver.
func (e *env) fuse(ctx context.Context, opts Options, forked []*manifest.Stage, rec *backfillrecord.Record) (int64, error) {
	sink := forked[len(forked)-1]
	schema := sink.View.Schema()
	settings, err := cassandra.ParseSettings(sink.View.Sink.UserConfig)
	if err != nil {
		return 0, fmt.Errorf("reading the sink settings of view %s: %w", sink.View.Name, err)
	}
	settings = settings.Defaults()
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(fusedGCPercent))
	}
	applier, err := cassandra.NewApplier(e.cql, schema, settings)
	if err != nil {
		return 0, err
	}
	defer applier.Close()

	ledgers, epochs, err := e.sourceInputs(ctx, forked)
	if err != nil {
		return 0, err
	}
	var path *localrun.Pipeline
	if opts.chain != nil {
		path, err = localrun.StartPathChained(ctx, forked, *opts.chain, epochs, opts.ErrOut)
	} else {
		path, err = localrun.StartPath(ctx, forked, localBuilder(opts), epochs)
	}
	if err != nil {
		return 0, err
	}
	defer path.Close()
	client, err := pulsarx.NewClient(opts.Services)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	letters := &deadLetters{client: client, producers: map[string]pulsar.Producer{}}
	defer letters.close()
	path.OnDeadLetter = letters.send

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batcher := cassandra.NewBatcher(applier, settings.BuildingCut(), settings.Pipeline)
	go batcher.Run(ctx)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure error
		read    int64
	)
	fail := func(err error) {
		mu.Lock()
		if failure == nil {
			failure = err
		}
		mu.Unlock()
	}
	last := map[string]localrun.Message{} // ledger topic (partition) → last event read
	if rec.Fused == nil {
		rec.Fused = &backfillrecord.FusedProgress{Runs: 1}
	}
	resumed := rec.Fused.Runs > 1
	every := cmp.Or(opts.Checkpoint, defaultCheckpointEvery)
	rec.Fused.Every = every
	from := map[string]localrun.Entry{}
	for topic, p := range rec.Fused.Positions {
		from[topic] = localrun.Entry{Ledger: p.Ledger, Entry: p.Entry}
	}
	// A stateful function's keyed states live in the run's memory: the
	// checkpoint moves only where the run saved them into the copy's state
	// tables (checkpoints, saveExports), and a resumed run starts from them.
	stateful := slices.ContainsFunc(forked, func(st *manifest.Stage) bool { return st.Stateful })
	cp := newCheckpoints(rec.Fused.Positions, rec.Fused.Events, stateful)
	if resumed {
		fmt.Fprintf(opts.ErrOut, "fused backfill of %s: resuming from its checkpoint (%d ledger events written) — run %d\n", e.view.Name, rec.Fused.Events, rec.Fused.Runs)
	}
	if resumed && stateful {
		if err := e.restoreStates(ctx, opts, forked, path); err != nil {
			return 0, fmt.Errorf("resuming the backfill of %s: %w", e.view.Name, err)
		}
	}
	batches := throttled(ctx, localrun.ReadLedgerFrom(ctx, client, ledgers, 2000, from), opts.MaxRate)
	stopSaves := func() error { return nil }
	if stateful {
		path.OnExport = func(states localrun.Exported) error { cp.exported(states); return nil }
		batches = withExports(batches, cmp.Or(opts.Checkpoint, defaultExportEvery), cp.beginExport, path.ExportMarkers)
		stopSaves = e.saveExports(ctx, opts, forked, cp, letters, func(err error) { fail(err); cancel() })
	}
	stopCheckpoints := e.checkpointLoop(ctx, every, rec, cp, letters, func(err error) { fail(err); cancel() })
	checkpointing := true
	defer func() {
		if checkpointing {
			stopCheckpoints()
			_ = stopSaves()
		}
	}()
	var (
		current *batchMark  // the batch whose operations op sees: set by batch, on the same goroutine
		applied func(error) // what the batcher calls once an operation of current is written, or failed
	)
	start, lastReport := time.Now(), time.Now()
	opts.Progress.fusing(e.view.Name, schema.Table)
	err = path.Stream(ctx, batches, func(batch []localrun.Message) {
		for _, m := range batch {
			last[m.Topic] = m
		}
		m := cp.open(batch)
		current = m
		applied = func(err error) { // one per batch, not one per operation
			if err != nil {
				fail(err)
			} else {
				cp.applied(m)
			}
			wg.Done()
		}
		read += int64(len(batch))
		opts.Progress.read(len(batch))
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(opts.ErrOut, "fused backfill of %s: %d events after %s\n", e.view.Name, read, time.Since(start).Round(time.Second))
		}
	}, func(op cassandra.Op, _ localrun.Message) error {
		mu.Lock()
		failed := failure
		mu.Unlock()
		if failed != nil {
			return failed
		}
		cp.submitted(current)
		wg.Add(1)
		return batcher.SubmitAsync(ctx, op, applied)
	})
	cp.seal()
	batcher.Flush() // the ledger's end: the last batch need not linger
	waitApplied(ctx, &wg)
	saveErr := stopSaves() // the last export's states saved, if it came out whole
	stopCheckpoints()
	checkpointing = false
	if saveErr != nil {
		fail(saveErr)
	}
	mu.Lock()
	if failure != nil && (err == nil || errors.Is(failure, ErrTakenOver)) {
		err = failure
	}
	mu.Unlock()
	if err == nil {
		err = letters.release(e.replayed(forked, last))
	}
	if err == nil {
		err = letters.flush(ctx)
	}
	if err == nil && stateful {
		err = e.saveStates(ctx, opts, forked, path)
	}
	if err == nil {
		cp.allSaved()
		err = e.subscribeAfter(ctx, forked, last)
	}
	if err == nil {
		err = e.writeCheckpoint(ctx, rec, cp, nil, true)
	}
	if err != nil {
		return read, fmt.Errorf("running the backfill of %s on this machine: %w", e.view.Name, err)
	}
	fmt.Fprintf(opts.ErrOut, "fused backfill of %s: %d events of %s into %s.%s in %s; deploying the copy from there\n", e.view.Name, read, strings.Join(ledgers, ", "), schema.Keyspace, schema.Table, time.Since(start).Round(100*time.Millisecond))
	return read, nil
}

// waitApplied waits until every operation submitted to the batcher has
// its answer (submitted counts them), or only until ctx ends: the batcher
// stops with ctx (a failure, a run taken over), and the operations it
// still queued then are never answered. Waiting for them hung the command
// instead of letting it report why the run stopped.
func waitApplied(ctx context.Context, submitted *sync.WaitGroup) {
	answered := make(chan struct{})
	go func() {
		submitted.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-ctx.Done():
	}
}

// replayed returns the entries of last (ledger topic → last event read)
// that the deployed copy reads again and makes something of: those of
// the topics read by a stateless function. A stateful reader recognises
// the entry's events as folded (saveStates) and passes nothing on, so
// the fused run's dead letters of that entry are the only ones.
func (e *env) replayed(forked []*manifest.Stage, last map[string]localrun.Message) map[string]localrun.Message {
	out := map[string]localrun.Message{}
	for topic, m := range last {
		for _, st := range forked {
			if !st.Stateful && slices.ContainsFunc(st.Inputs, func(in string) bool {
				return e.graph.Ledger[in] && (in == topic || isPartitionOf(topic, in))
			}) {
				out[topic] = m
			}
		}
	}
	return out
}

// saveStates writes the keyed states of the forked path's stateful
// functions, as the local run left them (those changed since its last
// checkpoint), into the state tables of the copies deployed next: they
// carry on from the last event read (whose whole entry comes again, and
// which the states hold as folded already).
func (e *env) saveStates(ctx context.Context, opts Options, forked []*manifest.Stage, path *localrun.Pipeline) error {
	states, err := path.ExportStates()
	if err != nil {
		return err
	}
	return e.writeStates(ctx, opts, forked, states, true)
}

// writeStates writes states (by function of forked, then key) into the
// state tables of forked's stateful functions, downstream first: a run
// that dies part-way leaves no function's states ahead of those of a
// function downstream of it. A resumed run starts from them all
// (restoreStates): a key whose state is ahead of the checkpoint skips the
// events it folded, whose operations are written, and the functions
// downstream have folded whatever it made of them. report says how many
// keys of each function went where.
func (e *env) writeStates(ctx context.Context, opts Options, forked []*manifest.Stage, states localrun.Exported, report bool) error {
	ks := e.set.Tenant.Keyspace
	for _, st := range slices.Backward(forked) {
		if !st.Stateful {
			continue
		}
		table := cqlstate.TableName(st.Name)
		if err := cqlstate.Ensure(ctx, e.cql, ks, table); err != nil {
			return err
		}
		backend := cqlstate.New(e.cql, ks, table)
		keys := states[st.Name]
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		slots := make(chan struct{}, 32)
		for key, snap := range keys {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if err := backend.Save(ctx, key, snap); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if first != nil {
			return fmt.Errorf("saving the states of %s into %s.%s: %w", st.Name, ks, table, first)
		}
		if report {
			fmt.Fprintf(opts.ErrOut, "fused backfill of %s: the states of %d keys of %s saved into %s.%s\n", e.view.Name, len(keys), st.Name, ks, table)
		}
	}
	return nil
}

// restoreStates hands the local run of a resumed fused backfill the states
// its checkpoints saved into the copy's state tables (writeStates).
func (e *env) restoreStates(ctx context.Context, opts Options, forked []*manifest.Stage, path *localrun.Pipeline) error {
	ks := e.set.Tenant.Keyspace
	states := localrun.Exported{}
	for _, st := range forked {
		if !st.Stateful {
			continue
		}
		table := cqlstate.TableName(st.Name)
		if err := cqlstate.Ensure(ctx, e.cql, ks, table); err != nil {
			return err
		}
		keys, err := cqlstate.New(e.cql, ks, table).All(ctx)
		if err != nil {
			return fmt.Errorf("reading the states of %s from %s.%s: %w", st.Name, ks, table, err)
		}
		states[st.Name] = keys
		fmt.Fprintf(opts.ErrOut, "fused backfill of %s: starting %s from the states of %d keys its checkpoints saved\n", e.view.Name, st.Name, len(keys))
	}
	return path.ImportStates(states)
}

// saveExports saves, as they come (checkpoints.due), the states the path
// exported part-way (withExports) into the copy's state tables, the dead
// letters of the events before them published first, and makes each the
// checkpoint once saved. A failure goes to fail. stop saves what is due
// still and returns the first failure.
func (e *env) saveExports(ctx context.Context, opts Options, forked []*manifest.Stage, cp *checkpoints, letters *deadLetters, fail func(error)) (stop func() error) {
	done, stopped := make(chan struct{}), make(chan struct{})
	var failure error
	save := func(sc stateCheckpoint) bool {
		err := letters.publishBefore(ctx, sc.positions)
		if err == nil {
			err = e.writeStates(ctx, opts, forked, sc.states, false)
		}
		if err != nil {
			failure = fmt.Errorf("saving the states of a checkpoint: %w", err)
			fail(failure)
			return false
		}
		cp.savedAt(sc)
		return true
	}
	go func() {
		defer close(stopped)
		for {
			select {
			case sc := <-cp.due:
				if !save(sc) {
					return
				}
			case <-done:
				select {
				case sc := <-cp.due:
					save(sc)
				default:
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() error { close(done); <-stopped; return failure }
}

// throttled is batches at most rate events per second on average since
// the first (Options.MaxRate): after each batch it waits until the events
// so far are due. A rate of 0 or less is batches as they come.
func throttled(ctx context.Context, batches iter.Seq2[[]localrun.Message, error], rate int) iter.Seq2[[]localrun.Message, error] {
	if rate <= 0 {
		return batches
	}
	return func(yield func([]localrun.Message, error) bool) {
		start, read := time.Now(), 0
		for events, err := range batches {
			if !yield(events, err) || err != nil {
				return
			}
			read += len(events)
			due := start.Add(time.Duration(float64(read) / float64(rate) * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-ctx.Done():
				return
			}
		}
	}
}

// withExports is batches with a batch of the path's ExportMarkers after a
// batch every so often, when begin says an export may begin.
func withExports(batches iter.Seq2[[]localrun.Message, error], every time.Duration, begin func() bool, markers func() []localrun.Message) iter.Seq2[[]localrun.Message, error] {
	return func(yield func([]localrun.Message, error) bool) {
		last := time.Now()
		for events, err := range batches {
			if !yield(events, err) || err != nil {
				return
			}
			if time.Since(last) >= every && begin() {
				last = time.Now()
				if !yield(markers(), nil) {
					return
				}
			}
		}
	}
}

// localBuilder returns the builder of the binaries a fused run starts on
// this machine: the deploy's own (opts.Builder), whose builds the copy then
// deploys, when it builds for this machine's platform; else one of its own.
func localBuilder(opts Options) *gobuild.Builder {
	host := gobuild.Platform{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if p, err := opts.Platform.OrDefault(); err == nil && p == host && opts.Builder != nil {
		return opts.Builder
	}
	return &gobuild.Builder{Dir: gobuild.ModuleDir(opts.Dir, "."), CacheDir: opts.CacheDir, Platform: host, Progress: opts.ErrOut}
}

// sourceInputs returns the topics the forked path reads from outside
// itself (sources: the ledger topics, or the outputs of the stages it
// shares) and the ledger topics' epochs.
func (e *env) sourceInputs(ctx context.Context, forked []*manifest.Stage) ([]string, map[string]string, error) {
	topics := sources(forked)
	epochs := map[string]string{}
	for _, in := range topics {
		if !e.graph.Ledger[in] {
			continue
		}
		tn, err := utils.GetTopicName(in)
		if err != nil {
			return nil, nil, fmt.Errorf("naming topic %s: %w", in, err)
		}
		epoch, err := ledgerepoch.Ensure(ctx, e.pulsar.Admin.Topics(), *tn)
		if err != nil {
			return nil, nil, err
		}
		epochs[in] = epoch
	}
	return topics, epochs, nil
}

// subscribeAfter creates the subscription of every forked stage that reads
// a topic from outside the copy (sources) at the last event read of each
// such topic (a partition for a partitioned one); a topic nothing was read
// of gets none here, and the stage's own position (earliest) applies.
func (e *env) subscribeAfter(ctx context.Context, forked []*manifest.Stage, last map[string]localrun.Message) error {
	outside := sources(forked)
	for _, st := range forked {
		for _, in := range st.Inputs {
			if !slices.Contains(outside, in) {
				continue
			}
			for topic, m := range last {
				if topic != in && !isPartitionOf(topic, in) {
					continue
				}
				tn, err := utils.GetTopicName(topic)
				if err != nil {
					return fmt.Errorf("naming topic %s: %w", topic, err)
				}
				id := utils.MessageID{LedgerID: m.Ledger, EntryID: m.Entry, PartitionIndex: tn.GetPartitionIndex()}
				err = e.pulsar.Admin.Subscriptions().CreateWithContext(ctx, *tn, st.SubName, id)
				if pulsarx.IsConflict(err) {
					// Made by a run that died before it recorded its end:
					// moved to where this one stopped.
					err = e.pulsar.Admin.Subscriptions().ResetCursorToMessageIDWithContext(ctx, *tn, st.SubName, id)
				}
				if err != nil {
					return fmt.Errorf("creating subscription %s of %s at %d:%d: %w", st.SubName, topic, m.Ledger, m.Entry, err)
				}
			}
		}
	}
	return nil
}

// isPartitionOf reports whether topic is a partition of partitioned.
func isPartitionOf(topic, partitioned string) bool {
	return strings.HasPrefix(topic, partitioned+"-partition-")
}

// deadLetters publishes a local run's dead letters to their topics, but
// those of the last ledger entry read of each topic only once the run is
// over, and only if the deployed copy does not read that entry again: its
// ledger subscription starts at the last event read, and a subscription
// starts at a whole entry (a batch of events, each dead-lettered again by
// the copy).
type deadLetters struct {
	client    pulsar.Client
	producers map[string]pulsar.Producer
	mu        sync.Mutex
	err       error
	held      map[string]*heldLetters // by origin topic
}

// heldLetters are the dead letters of one ledger entry.
type heldLetters struct {
	ledger, entry int64
	letters       []*localwire.Output
}

// send takes dead letter o of the ledger event at origin; the stages of a
// local run call it at once.
func (d *deadLetters) send(o *localwire.Output, origin envelope.Origin) error {
	if origin.Topic == "" {
		return d.publish(o)
	}
	pos := origin.Position
	d.mu.Lock()
	h := d.held[origin.Topic]
	var due []*localwire.Output
	switch {
	case h == nil || pos.Ledger > h.ledger || pos.Ledger == h.ledger && pos.Entry > h.entry:
		if h != nil {
			due = h.letters
		}
		if d.held == nil {
			d.held = map[string]*heldLetters{}
		}
		d.held[origin.Topic] = &heldLetters{ledger: pos.Ledger, entry: pos.Entry, letters: []*localwire.Output{o}}
	case pos.Ledger == h.ledger && pos.Entry == h.entry:
		h.letters = append(h.letters, o)
	default: // an earlier entry's (another stage's, behind): due at once
		due = []*localwire.Output{o}
	}
	d.mu.Unlock()
	for _, o := range due {
		if err := d.publish(o); err != nil {
			return err
		}
	}
	return nil
}

// release publishes the held dead letters but those of the entries of
// last (ledger topic → last event read), which the deployed copy reads
// again.
func (d *deadLetters) release(last map[string]localrun.Message) error {
	d.mu.Lock()
	held := d.held
	d.held = nil
	d.mu.Unlock()
	for topic, h := range held {
		if m, ok := last[topic]; ok && m.Ledger == h.ledger && m.Entry == h.entry {
			continue
		}
		for _, o := range h.letters {
			if err := d.publish(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// publish sends o to its topic.
func (d *deadLetters) publish(o *localwire.Output) error {
	d.mu.Lock()
	p, ok := d.producers[o.Topic]
	failed := d.err
	if !ok && failed == nil {
		var err error
		if p, err = d.client.CreateProducer(pulsar.ProducerOptions{Topic: o.Topic, SendTimeout: -1}); err != nil {
			failed = fmt.Errorf("creating a producer on %s: %w", o.Topic, err)
		} else {
			d.producers[o.Topic] = p
		}
	}
	d.mu.Unlock()
	if failed != nil {
		return failed
	}
	p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: o.Payload, Key: o.Key, Properties: o.Properties, EventTime: o.EventTime},
		func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				d.mu.Lock()
				d.err = fmt.Errorf("publishing a dead letter to %s: %w", o.Topic, err)
				d.mu.Unlock()
			}
		})
	return nil
}

func (d *deadLetters) flush(ctx context.Context) error {
	d.mu.Lock()
	producers := maps.Clone(d.producers)
	d.mu.Unlock()
	for topic, p := range producers {
		if err := p.FlushWithCtx(ctx); err != nil {
			return fmt.Errorf("flushing the dead letters of %s: %w", topic, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// releaseBefore publishes the held dead letters of entries before those of
// positions (ledger topic → a checkpoint's last event): a run resumed from
// the checkpoint reads the checkpoint's entries again, not the earlier
// ones, so theirs must be out before it is written.
func (d *deadLetters) releaseBefore(positions map[string]backfillrecord.Position) error {
	d.mu.Lock()
	var due []*localwire.Output
	for topic, h := range d.held {
		p, ok := positions[topic]
		if ok && (h.ledger < p.Ledger || h.ledger == p.Ledger && h.entry < p.Entry) {
			due = append(due, h.letters...)
			delete(d.held, topic)
		}
	}
	d.mu.Unlock()
	for _, o := range due {
		if err := d.publish(o); err != nil {
			return err
		}
	}
	return nil
}

// publishBefore publishes the held dead letters of entries before those of
// positions (releaseBefore) and waits until every dead letter sent so far
// is stored: what a checkpoint at positions needs first.
func (d *deadLetters) publishBefore(ctx context.Context, positions map[string]backfillrecord.Position) error {
	if err := d.releaseBefore(positions); err != nil {
		return err
	}
	return d.flush(ctx)
}

func (d *deadLetters) close() {
	for _, p := range d.producers {
		p.Close()
	}
}
