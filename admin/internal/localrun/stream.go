package localrun

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/pf/localwire"
	"github.com/foldline/foldline/sinks/cassandra"
)

// chain reports whether the path is a chain: the first stage reads only
// ledger topics, and every later one reads exactly the output of the one
// before it, which the view's sink reads last. A chain's stages can work
// at once on successive batches (Stream).
func (p *Pipeline) chain() bool {
	if len(p.stages) == 0 {
		return false
	}
	for i, s := range p.stages[1:] {
		if len(s.inputs) != 1 || s.inputs[0] != p.stages[i].output {
			return false
		}
	}
	return p.stages[len(p.stages)-1].output == p.sinkInput
}

// flowing is one batch on its way down a chain: the ledger events it
// started as, and what the last stage made of them so far (numbered from
// first on, once sent to the next).
type flowing struct {
	events []Message
	msgs   []Message
	first  uint64
	err    error
	// states, for a batch of ExportMarkers, receives what the stages
	// export.
	states Exported
}

// Stream runs the batches of ledger events through the path like Feed, but
// with every stage of a chain working at once, each on its own batch: the
// stages are separate processes, so a path of k stages keeps up to k+1
// cores busy instead of one. op sees the view operations in the same order
// as with Feed. A path that is no chain is fed batch by batch. A batch of
// ExportMarkers among batches goes to OnExport with the states it brought
// out, not to batch.
func (p *Pipeline) Stream(ctx context.Context, batches iter.Seq2[[]Message, error], batch func([]Message), op func(cassandra.Op, Message) error) error {
	if !p.chain() {
		for events, err := range batches {
			if err != nil {
				return err
			}
			if isMarkerBatch(events) {
				if err := p.export(events); err != nil {
					return err
				}
				continue
			}
			batch(events)
			if err := p.Feed(events, op); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	send := func(ch chan<- flowing, f flowing) bool {
		select {
		case ch <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// One goroutine reads the ledger, one runs each stage; channels of one
	// batch let each work ahead by a batch.
	head := make(chan flowing, 1)
	go func() {
		defer close(head)
		for events, err := range batches {
			if err != nil {
				send(head, flowing{err: err})
				return
			}
			f := flowing{events: events, msgs: events}
			if isMarkerBatch(events) {
				f.states = Exported{}
			}
			if !send(head, f) {
				return
			}
		}
	}()
	in := head
	for _, s := range p.stages {
		// One goroutine sends each batch to the stage, another receives
		// its outputs: the stage has the next batch while it finishes one.
		// The receiver learns of a batch before it is sent, and reads its
		// outputs while it goes.
		sent, out := make(chan flowing, 1), make(chan flowing, 1)
		go func(s *stage, in <-chan flowing, sent chan<- flowing) {
			defer close(sent)
			for f := range in {
				f.first = s.number(len(f.msgs))
				if !send(sent, f) || f.err != nil {
					return
				}
				s.send(f.msgs, f.first)
				if s.sendErr.Load() != nil {
					return // the receiver reports it
				}
			}
		}(s, in, sent)
		go func(s *stage, sent <-chan flowing, out chan<- flowing) {
			defer close(out)
			for f := range sent {
				if f.err == nil && len(f.msgs) > 0 {
					var outs []Message
					if outs, f.err = s.receive(f.first, len(f.msgs)); f.err == nil {
						f.msgs, f.err = p.route(s, f.msgs, outs, f.first, f.states)
					}
				}
				if !send(out, f) || f.err != nil {
					return
				}
			}
		}(s, sent, out)
		in = out
	}
	for f := range in {
		if f.err != nil {
			return f.err
		}
		if f.states != nil {
			if err := p.onExport(f.states); err != nil {
				return err
			}
			continue
		}
		batch(f.events)
		if err := p.emit(f.events, f.msgs, op); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// StreamEach is Stream for several pipelines over the same ledger events:
// the batches are read once, and every pipeline runs on each of them, all
// at once. op gets the index in pipelines of the pipeline whose operation
// it is, from one goroutine per pipeline (each pipeline's in the order
// Stream gives them); batch sees each batch once, from the goroutine that
// reads the batches, as it hands it to the pipelines (which only read it).
// The first pipeline to fail stops the others, and its error is returned.
func StreamEach(ctx context.Context, pipelines []*Pipeline, batches iter.Seq2[[]Message, error], batch func([]Message), op func(int, cassandra.Op, Message) error) error {
	if len(pipelines) == 1 {
		return pipelines[0].Stream(ctx, batches, batch, func(o cassandra.Op, e Message) error { return op(0, o, e) })
	}
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	type handed struct {
		events []Message
		err    error
	}
	feeds := make([]chan handed, len(pipelines))
	for i := range feeds {
		feeds[i] = make(chan handed, 1)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	wg.Go(func() {
		defer func() {
			for _, f := range feeds {
				close(f)
			}
		}()
		for events, err := range batches {
			if err == nil {
				batch(events)
			}
			for _, f := range feeds {
				select {
				case f <- handed{events, err}:
				case <-run.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	for i, p := range pipelines {
		wg.Go(func() {
			feed := func(yield func([]Message, error) bool) {
				for h := range feeds[i] {
					if !yield(h.events, h.err) {
						return
					}
				}
			}
			if err := p.Stream(run, feed, func([]Message) {}, func(o cassandra.Op, e Message) error { return op(i, o, e) }); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err // the caller's: the pipelines may have stopped short without an error of their own
	}
	return firstErr
}

// step runs one stage over its inputs and returns the outputs bound for
// the next topic, counting (and, with OnDeadLetter, handing over) the
// dead letters.
func (p *Pipeline) step(s *stage, in []Message, states Exported) ([]Message, error) {
	outs, first, err := s.run(in)
	if err != nil {
		return nil, err
	}
	return p.route(s, in, outs, first, states)
}

// route takes the dead letters and the exported states (into states) out
// of outs, the outputs of inputs in (numbered from first on), and returns
// the rest.
func (p *Pipeline) route(s *stage, in, outs []Message, first uint64, states Exported) ([]Message, error) {
	next := outs[:0] // the dead letters taken out in place
	for _, o := range outs {
		if o.Topic == pf.StatesTopic {
			if err := states.take(s, o); err != nil {
				return nil, err
			}
			continue
		}
		if function, ok := s.deadLetters[o.Topic]; ok {
			if err := p.deadLetter(function, s, o, in[o.Seq-first]); err != nil {
				return nil, err
			}
			continue
		}
		next = append(next, o)
	}
	return next, nil
}

// deadLetter counts a dead letter of function (of stage s) for input in
// and hands it to OnDeadLetter with in's ledger origin. The input of a
// chain is a ledger event even when a later function of it dead-lettered
// what an earlier one made of it: the origin is that event's.
func (p *Pipeline) deadLetter(function string, s *stage, letter, in Message) error {
	p.mu.Lock()
	p.DeadLetters[function]++
	p.mu.Unlock()
	if p.OnDeadLetter == nil {
		return nil
	}
	o, err := localwire.DecodeOutput(letter.Seq, letter.Topic, letter.Encoded)
	if err != nil {
		return s.failed(err)
	}
	origin := envelope.Origin{Topic: in.Topic, Position: envelope.Position{Ledger: in.Ledger, Entry: in.Entry, Batch: int32(in.Batch)}}
	if in.Ledger < 0 { // a derived message: its origin is in its properties
		origin, _ = originOf(in) // none: the zero origin
	}
	if err := p.OnDeadLetter(o, origin); err != nil {
		return fmt.Errorf("sending a dead letter of %s to %s: %w", function, o.Topic, err)
	}
	return nil
}

// emit decodes the view operations among msgs (the messages bound for the
// sink's input) and calls op for each, with the ledger event among events
// that caused it.
func (p *Pipeline) emit(events, msgs []Message, op func(cassandra.Op, Message) error) error {
	causes := newCauses(events)
	var topic string // the origin topic of the last operation: the next one's too, most often
	for _, m := range msgs {
		if m.Topic != p.sinkInput {
			continue
		}
		payload, origin, marker, err := sinkInput(m, topic)
		if err != nil {
			return fmt.Errorf("the origin of a view operation on %s: %w", p.sinkInput, err)
		}
		if marker {
			continue
		}
		topic = origin.Topic
		// A chain's last function writes them in their local form.
		vo, err := envelope.DecodeLocalRowOp(payload)
		if err != nil {
			return fmt.Errorf("a view operation on %s: %w", p.sinkInput, err)
		}
		if err := op(cassandra.Op{View: vo, Origin: origin}, causes.of(origin)); err != nil {
			return err
		}
	}
	return nil
}

// Exported holds the states the path's stateful functions exported: per
// function name, each key's.
type Exported map[string]map[string]keyed.Snapshot

// ExportMarkers returns a batch that asks the path's stateful functions for
// the states of their keys changed since they were last asked (all of
// them, the first time): one marker (pf.PropExportStates) for each topic
// the path reads from outside. Fed (ExportStates) or streamed (Stream,
// OnExport) after the events, it brings out states that have folded them
// all and nothing after them.
func (p *Pipeline) ExportMarkers() []Message {
	var markers []Message
	for _, topic := range p.outsideInputs() {
		markers = append(markers, Message{Topic: topic, Ledger: -1, Entry: -1, Batch: -1,
			Properties: map[string]string{pf.PropExportStates: "true"}})
	}
	return markers
}

// outsideInputs returns the topics the path's stages read that none of
// them writes, in the stages' order.
func (p *Pipeline) outsideInputs() []string {
	written := map[string]bool{}
	for _, s := range p.stages {
		written[s.output] = true
	}
	var topics []string
	for _, s := range p.stages {
		for _, in := range s.inputs {
			if !written[in] && !slices.Contains(topics, in) {
				topics = append(topics, in)
			}
		}
	}
	return topics
}

// ExportStates asks the path's stateful functions, once the ledger has run
// through (Stream), for the states of their keys changed since they were
// last asked (ExportMarkers), and returns them per function name and key:
// what a fused backfill writes into the state tables of the copy it
// deploys to carry on from there.
func (p *Pipeline) ExportStates() (Exported, error) {
	return p.exportStates(p.ExportMarkers())
}

// exportStates feeds markers (ExportMarkers) through the path and returns
// the states they brought out.
func (p *Pipeline) exportStates(markers []Message) (Exported, error) {
	states := Exported{}
	if err := p.feed(markers, noOps, states); err != nil {
		return nil, fmt.Errorf("exporting the states of the path's functions: %w", err)
	}
	return states, nil
}

// export feeds a batch of ExportMarkers through the path and hands the
// states to OnExport.
func (p *Pipeline) export(markers []Message) error {
	states, err := p.exportStates(markers)
	if err != nil {
		return err
	}
	return p.onExport(states)
}

// noOps takes the view operations of markers fed through the path: none.
func noOps(cassandra.Op, Message) error { return nil }

// onExport hands states to OnExport.
func (p *Pipeline) onExport(states Exported) error {
	if p.OnExport == nil {
		return errors.New("states exported part-way through the ledger with no OnExport to take them")
	}
	return p.OnExport(states)
}

// ImportStates hands the path's stateful functions the states to start
// from (pf.PropImportStates), before the first event: those a fused
// backfill's checkpoint saved, for the run that resumes it. Each function
// gets its keys in markers of about importChunk bytes.
func (p *Pipeline) ImportStates(states Exported) error {
	var markers []Message
	for function, keys := range states {
		i := slices.IndexFunc(p.stages, func(s *stage) bool { return slices.Contains(s.functions, function) })
		if i < 0 {
			return fmt.Errorf("importing states of %s: the path runs no such function", function)
		}
		topic := p.stages[i].inputs[0]
		chunk, size := map[string]keyed.Snapshot{}, 0
		flush := func() error {
			if len(chunk) == 0 {
				return nil
			}
			payload, err := keyed.EncodeSnapshots(chunk)
			if err != nil {
				return fmt.Errorf("importing states of %s: %w", function, err)
			}
			markers = append(markers, Message{Topic: topic, Ledger: -1, Entry: -1, Batch: -1, Payload: payload,
				Properties: map[string]string{pf.PropImportStates: function}})
			chunk, size = map[string]keyed.Snapshot{}, 0
			return nil
		}
		for _, key := range slices.Sorted(maps.Keys(keys)) {
			snap := keys[key]
			chunk[key] = snap
			size += len(key) + len(snap.State) + 64*len(snap.Positions)
			if size >= importChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
	if err := p.Feed(markers, noOps); err != nil {
		return fmt.Errorf("importing the states of the path's functions: %w", err)
	}
	return nil
}

// importChunk is about how many bytes of states one import marker holds.
const importChunk = 256 << 10

// take puts one key's exported state from stage s's output o into states.
func (states Exported) take(s *stage, o Message) error {
	out, err := localwire.DecodeOutput(o.Seq, o.Topic, o.Encoded)
	if err != nil {
		return s.failed(err)
	}
	snap, err := keyed.DecodeSnapshot(out.Payload)
	if err != nil {
		return s.failed(err)
	}
	function := out.Properties[pf.PropStatesFunction]
	if states == nil {
		return s.failed(fmt.Errorf("states of %s exported unasked", function))
	}
	if states[function] == nil {
		states[function] = map[string]keyed.Snapshot{}
	}
	states[function][out.Key] = snap
	return nil
}

// isMarkerBatch reports whether events is a batch of ExportMarkers.
func isMarkerBatch(events []Message) bool {
	return len(events) > 0 && events[0].Ledger < 0 && events[0].Properties[pf.PropExportStates] != ""
}

// sinkInput reads a message bound for the sink's input, its fields parsed
// once: marker for a marker of the driver's (ExportMarkers, ImportStates)
// passed on by the path's functions, else its payload and origin; the
// origin's topic is the string lastTopic when they are equal.
func sinkInput(m Message, lastTopic string) (payload []byte, origin envelope.Origin, marker bool, err error) {
	if m.Encoded == nil {
		if m.Properties[pf.PropExportStates] != "" || m.Properties[pf.PropImportStates] != "" {
			return nil, envelope.Origin{}, true, nil
		}
		origin, err = envelope.OriginFromProperties(m.Properties)
		return m.Payload, origin, false, err
	}
	f, err := localwire.ParseFields(m.Encoded)
	if err != nil {
		return nil, envelope.Origin{}, false, err
	}
	export, _ := f.Property(pf.PropExportStates)
	imported, _ := f.Property(pf.PropImportStates)
	if len(export) > 0 || len(imported) > 0 {
		return nil, envelope.Origin{}, true, nil
	}
	origin, err = fieldsOrigin(f, lastTopic)
	return f.Payload, origin, false, err
}

// causes finds the ledger event among events that caused a view operation.
// The operations of a chain come in the events' order, so a cursor finds
// it a few events on at most (events with no operation in between); the
// operations of a path fed batch by batch may come in another order, and
// a map, made on the first miss, finds it then.
type causes struct {
	events []Message
	next   int
	byKey  map[eventKey]int
	// topic is the topic of every event, when they have one (a ledger of
	// one topic, or a shared stage's output): an operation whose origin is
	// elsewhere has no cause among them, as when the events are a shared
	// stage's outputs and the origins ledger events.
	topic string
}

// newCauses returns the causes among events.
func newCauses(events []Message) causes {
	c := causes{events: events}
	for i, e := range events {
		if i == 0 {
			c.topic = e.Topic
		} else if e.Topic != c.topic {
			c.topic = ""
			break
		}
	}
	return c
}

// causesLookahead is how many events on the cursor looks.
const causesLookahead = 32

// of returns the event at origin, or the zero Message when events hold
// none.
func (c *causes) of(origin envelope.Origin) Message {
	if c.topic != "" && origin.Topic != c.topic {
		return Message{}
	}
	pos := origin.Position
	for i := c.next; i < len(c.events) && i < c.next+causesLookahead; i++ {
		if e := &c.events[i]; e.Entry == pos.Entry && e.Batch == int64(pos.Batch) && e.Ledger == pos.Ledger && e.Topic == origin.Topic {
			c.next = i
			return *e
		}
	}
	if c.byKey == nil {
		c.byKey = make(map[eventKey]int, len(c.events))
		for i, e := range c.events {
			c.byKey[eventKey{e.Topic, e.Ledger, e.Entry, e.Batch}] = i
		}
	}
	i, ok := c.byKey[eventKey{origin.Topic, pos.Ledger, pos.Entry, int64(pos.Batch)}]
	if !ok {
		return Message{}
	}
	c.next = i
	return c.events[i]
}
