package localrun

import (
	"context"
	"fmt"
	"iter"
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
}

// Stream runs the batches of ledger events through the path like Feed, but
// with every stage of a chain working at once, each on its own batch: the
// stages are separate processes, so a path of k stages keeps up to k+1
// cores busy instead of one. op sees the view operations in the same order
// as with Feed. A path that is no chain is fed batch by batch.
func (p *Pipeline) Stream(ctx context.Context, batches iter.Seq2[[]Message, error], batch func([]Message), op func(cassandra.Op, Message) error) error {
	if !p.chain() {
		for events, err := range batches {
			if err != nil {
				return err
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
			if !send(head, flowing{events: events, msgs: events}) {
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
						f.msgs, f.err = p.route(s, f.msgs, outs, f.first)
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
func (p *Pipeline) step(s *stage, in []Message) ([]Message, error) {
	outs, first, err := s.run(in)
	if err != nil {
		return nil, err
	}
	return p.route(s, in, outs, first)
}

// route takes the dead letters out of outs, the outputs of inputs in
// (numbered from first on), and returns the rest.
func (p *Pipeline) route(s *stage, in, outs []Message, first uint64) ([]Message, error) {
	next := outs[:0] // the dead letters taken out in place
	for _, o := range outs {
		if o.Topic == pf.StatesTopic {
			if err := p.state(s, o); err != nil {
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
	causes := causes{events: events}
	var topic string // the origin topic of the last operation: the next one's too, most often
	for _, m := range msgs {
		if m.Topic != p.sinkInput || isExportMarker(m) {
			continue
		}
		payload, origin, err := payloadAndOrigin(m, topic)
		if err != nil {
			return fmt.Errorf("the origin of a view operation on %s: %w", p.sinkInput, err)
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

// ExportStates asks the path's stateful functions, once the ledger has run
// through (Stream), for their keys' states (pf.PropExportStates), and
// returns them per function name and key: what a fused backfill writes
// into the state tables of the copy it deploys to carry on from there.
func (p *Pipeline) ExportStates() (map[string]map[string]keyed.Snapshot, error) {
	p.states = map[string]map[string]keyed.Snapshot{}
	written := map[string]bool{}
	for _, s := range p.stages {
		written[s.output] = true
	}
	var markers []Message
	seen := map[string]bool{}
	for _, s := range p.stages {
		for _, in := range s.inputs {
			if !written[in] && !seen[in] {
				seen[in] = true
				markers = append(markers, Message{Topic: in, Ledger: -1, Entry: -1, Batch: -1,
					Properties: map[string]string{pf.PropExportStates: "true"}})
			}
		}
	}
	if err := p.Feed(markers, func(cassandra.Op, Message) error { return nil }); err != nil {
		return nil, fmt.Errorf("exporting the states of the path's functions: %w", err)
	}
	states := p.states
	p.states = nil
	return states, nil
}

// state takes one key's exported state from stage s's output o.
func (p *Pipeline) state(s *stage, o Message) error {
	out, err := localwire.DecodeOutput(o.Seq, o.Topic, o.Encoded)
	if err != nil {
		return s.failed(err)
	}
	snap, err := keyed.DecodeSnapshot(out.Payload)
	if err != nil {
		return s.failed(err)
	}
	function := out.Properties[pf.PropStatesFunction]
	if p.states == nil {
		return s.failed(fmt.Errorf("states of %s exported unasked", function))
	}
	if p.states[function] == nil {
		p.states[function] = map[string]keyed.Snapshot{}
	}
	p.states[function][out.Key] = snap
	return nil
}

// isExportMarker reports whether m is ExportStates's marker, passed on by
// the path's functions.
func isExportMarker(m Message) bool {
	if m.Encoded == nil {
		return m.Properties[pf.PropExportStates] != ""
	}
	f, err := localwire.ParseFields(m.Encoded)
	if err != nil {
		return false
	}
	v, ok := f.Property(pf.PropExportStates)
	return ok && len(v) > 0
}

// payloadAndOrigin returns a derived message's payload and origin; the
// origin's topic is the string lastTopic when they are equal.
func payloadAndOrigin(m Message, lastTopic string) ([]byte, envelope.Origin, error) {
	if m.Encoded == nil {
		origin, err := envelope.OriginFromProperties(m.Properties)
		return m.Payload, origin, err
	}
	f, err := localwire.ParseFields(m.Encoded)
	if err != nil {
		return nil, envelope.Origin{}, err
	}
	origin, err := fieldsOrigin(f, lastTopic)
	return f.Payload, origin, err
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
}

// causesLookahead is how many events on the cursor looks.
const causesLookahead = 32

// of returns the event at origin, or the zero Message when events hold
// none.
func (c *causes) of(origin envelope.Origin) Message {
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
