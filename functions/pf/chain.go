package pf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/pf/localwire"
)

// StartChain runs handlers as one local chain in this process: the
// command line is LocalFlag and then one -instance-conf per handler, in
// the chain's order. The driver writes Input frames (the first function's
// inputs, ledger events) to standard input, as to a single function run
// with LocalFlag, and reads back for each input, before its Done frame,
// the Output frames the chain made of it, function by function in the
// chain's order: what the last function sent, the dead letters of every
// function, and what any of them sent to a topic other than its output
// topic. Each function runs in a goroutine of its own, a batch of inputs
// behind the one before it. What function i sends to its output
// topic is function i+1's input, handed over in memory, as the driver of
// separate processes would hand it over (no position of its own, its
// properties, key and event time as sent). Each function is an instance
// of its own with its own config, origin positions and dead letters; only
// the pipes in between are gone.
//
// Foldline builds such a binary for a backfill's path of transformations
// (package transform/run, MainChain) when every one is a one-line main.
// A handler that defers its outcome (FunctionContext.Defer) cannot run in
// a chain: the chain stops with an error at its first deferred input.
func StartChain(handlers ...any) {
	if err := startMain(func(ctx context.Context, args []string) error {
		return runChain(ctx, handlers, args, os.Stdin, os.Stdout)
	}); err != nil {
		fmt.Fprintln(os.Stderr, "pf:", err)
		os.Exit(1)
	}
}

// chainArgs splits a chain's command line (LocalFlag, then -instance-conf
// and a config per handler) into each handler's arguments.
func chainArgs(args []string, handlers int) ([][]string, error) {
	if len(args) == 0 || args[0] != LocalFlag {
		return nil, fmt.Errorf("%w: a chain runs only locally: want %s first", ErrBadConfig, LocalFlag)
	}
	args = args[1:]
	if len(args) != 2*handlers {
		return nil, fmt.Errorf("%w: a chain of %d functions wants %d -instance-conf arguments, got %q", ErrBadConfig, handlers, handlers, args)
	}
	each := make([][]string, handlers)
	for i := range each {
		if args[2*i] != "-instance-conf" {
			return nil, fmt.Errorf("%w: argument %d of the chain: want -instance-conf, got %q", ErrBadConfig, 2*i+2, args[2*i])
		}
		each[i] = args[2*i : 2*i+2]
	}
	return each, nil
}

// runChain runs handlers as a chain (see StartChain) on in and out until in
// ends. The first function's config sets the process's garbage collector
// and CPU profile.
func runChain(ctx context.Context, handlers []any, args []string, in io.Reader, out io.Writer) error {
	if len(handlers) == 0 {
		return fmt.Errorf("%w: a chain of no functions", ErrBadConfig)
	}
	each, err := chainArgs(args, len(handlers))
	if err != nil {
		return err
	}
	c := &chain{w: localwire.NewWriter(out)}
	for i, h := range handlers {
		inv, err := adaptHandler(h)
		if err != nil {
			return fmt.Errorf("function %d of the chain: %w", i+1, err)
		}
		conf, err := parseArgs(each[i], os.Stderr)
		if err != nil {
			return fmt.Errorf("function %d of the chain: %w", i+1, err)
		}
		inst := newInstance(conf, inv, os.Stderr)
		// As runLocal: every input is answered once its outputs are out.
		inst.conf.MaxRetries, inst.conf.AutoAck, inst.conf.Guarantee = 0, true, atLeastOnce
		inst.untimed, inst.inputs, inst.local = true, new(slab[input]), true
		link := &chainLink{c: c, inst: inst, last: i == len(handlers)-1}
		inst.sess = newSession(link)
		inst.pending = func() int { return 0 }
		c.links = append(c.links, link)
	}
	first := c.links[0].inst.conf
	tuneRuntime(first.Runtime, os.Getenv)
	stopProfile, err := startCPUProfile(first.CPUProfile)
	if err != nil {
		return err
	}
	return errors.Join(c.run(ctx, localwire.NewReader(in)), stopProfile())
}

// chain is a chain's functions and where their outputs go. Each function
// runs in a goroutine of its own, on batches of the driver's inputs: a
// chain of k functions keeps up to k cores busy, as k processes do.
type chain struct {
	links []*chainLink
	w     *localwire.Writer
}

// chainItem is one driver input on its way down the chain: the inputs the
// next function gets of it, and the frames the functions before wrote of
// it, in the order they wrote them.
type chainItem struct {
	seq    uint64
	msgs   []*localMessage
	frames []*localwire.Output
	// input holds the driver's input, which msgs holds first.
	input [1]*localMessage
}

// chainBatch is how many driver inputs go down the chain at once, at
// most: fewer when the driver has sent no more yet.
const chainBatch = 256

// run reads the driver's inputs until in ends, and writes, for each, the
// frames of each function in turn, then its Done frame. A function's
// error ends it at once, whatever the reader waits for: the driver waits
// for outputs that will not come, and learns of the error from the
// process's exit.
func (c *chain) run(ctx context.Context, r *localwire.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := make(chan []*chainItem, 4)
	errs := make(chan error, len(c.links)+1)
	from := in
	for i, l := range c.links {
		var to chan []*chainItem
		if i < len(c.links)-1 {
			to = make(chan []*chainItem, 4)
		}
		go func(from <-chan []*chainItem) { errs <- l.run(ctx, from, to) }(from)
		from = to
	}
	readDone := make(chan error, 1)
	go func() {
		defer close(in)
		readDone <- c.read(ctx, r, in)
	}()
	for range c.links {
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := <-readDone; err != nil {
		return err
	}
	return c.w.Flush()
}

// read reads the driver's inputs into batches for the first function.
func (c *chain) read(ctx context.Context, r *localwire.Reader, to chan<- []*chainItem) error {
	batch := make([]*chainItem, 0, chainBatch)
	var (
		msgs  slab[localMessage]
		items slab[chainItem]
	)
	send := func() bool {
		if len(batch) == 0 {
			return true
		}
		select {
		case to <- batch:
			batch = make([]*chainItem, 0, chainBatch)
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		msg, err := readLocalInput(r, &msgs)
		if errors.Is(err, io.EOF) {
			send()
			return nil
		}
		if err != nil {
			return err
		}
		item := items.new()
		item.seq, item.input[0] = msg.f.Seq, msg
		item.msgs = item.input[:]
		batch = append(batch, item)
		// Nothing more at hand: the driver waits for these.
		if (len(batch) == chainBatch || r.Buffered() == 0) && !send() {
			return nil // a function failed: its error is the run's
		}
	}
}

// chainLink is one function of a chain: its sender and its acker.
type chainLink struct {
	c    *chain
	inst *instance
	last bool
	// item is the driver input being handled; what the function sends to
	// its output topic becomes the next function's inputs of it.
	item *chainItem
	next []*localMessage
	// msgs and nexts make the next function's inputs.
	msgs  slab[localMessage]
	nexts slab[[1]*localMessage]
	// acked is set when the input being handled is finished.
	acked bool
}

// run hands the inputs of each batch from from to the function and the
// batch on to to, or, for the last function, writes the batch's frames.
func (l *chainLink) run(ctx context.Context, from <-chan []*chainItem, to chan<- []*chainItem) error {
	if to != nil {
		defer close(to)
	}
	for batch := range from {
		for _, item := range batch {
			if err := l.handle(ctx, item); err != nil {
				return err
			}
		}
		if !l.last {
			select {
			case to <- batch:
			case <-ctx.Done():
				return nil
			}
			continue
		}
		if len(from) == 0 {
			// Nothing more at hand: let the driver see what is done.
			if err := l.c.w.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// handle runs the function over item's inputs and leaves in item what the
// next function gets; the last function writes item's frames instead.
func (l *chainLink) handle(ctx context.Context, item *chainItem) error {
	l.item = item
	if l.last {
		for _, f := range item.frames {
			if err := l.c.w.Output(f); err != nil {
				return err
			}
		}
		item.frames = nil
	}
	msgs := item.msgs
	l.next = nil
	for _, msg := range msgs {
		l.acked = false
		if err := l.inst.process(ctx, msg, l); err != nil {
			return err
		}
		if err := l.inst.sess.err(); err != nil {
			return err // a local write failed: the driver is gone
		}
		if !l.acked {
			return fmt.Errorf("function %s did not finish an input when its handler returned (it deferred it): it cannot run in a chain", l.inst.conf.FQFN())
		}
	}
	if len(l.next) > 1 {
		// Each input its own properties: a function rewrites the one
		// output's in place (outputProperties).
		for _, m := range l.next {
			m.f.Properties = maps.Clone(m.f.Properties)
		}
	}
	item.msgs = l.next
	if l.last {
		return l.c.w.Done(item.seq)
	}
	return nil
}

func (l *chainLink) sendAsync(_ context.Context, topic string, msg *pulsar.ProducerMessage, done sendDone) error {
	var err error
	seq := l.item.seq
	switch {
	case !l.last && topic == l.inst.conf.OutputTopic:
		// As a driver hands an output on: no position, no publish time,
		// and the event time as a frame carries it.
		m := l.msgs.new()
		*m = localMessage{f: localwire.Input{Seq: seq, Topic: topic, Ledger: -1, Entry: -1, Batch: -1,
			Key: msg.Key, Payload: msg.Payload, Properties: msg.Properties, EventTime: frameTime(msg.EventTime)}}
		m.id = localID{ledger: -1, entry: -1, batch: -1}
		if l.next == nil {
			l.next = l.nexts.new()[:0]
		}
		l.next = append(l.next, m)
	case !l.last:
		l.item.frames = append(l.item.frames, outputFrame(seq, topic, msg))
	default:
		err = l.c.w.Output(outputFrame(seq, topic, msg))
	}
	done.sent(nil, msg, err)
	return nil
}

// frameTime is t as it comes out of a frame (localwire): to the
// nanosecond, in UTC, the Unix epoch itself as the zero time.
func frameTime(t time.Time) time.Time {
	if t.IsZero() || t.UnixNano() == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.UnixNano()).UTC()
}

// Ack marks the input being handled as finished.
func (l *chainLink) Ack(pulsar.Message) error {
	l.acked = true
	return nil
}

// Nack is never called: a failed local write ends the run.
func (l *chainLink) Nack(pulsar.Message) {}
