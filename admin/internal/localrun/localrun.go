// Package localrun runs a view's path of the manifests' DAG on this
// machine, without deploying anything: every function binary, built as
// deploy builds it, runs as a local instance (pf's -local mode) in a child
// process, or, for a path that is a chain of transformations with one-line
// mains, one binary built for the path runs them all (startChain, pf's
// StartChain); ledger events go into the stages that read the ledger, each
// output to the stages that read its topic, and the view operations that
// reach the view's sink input come out with their origin, in ledger order,
// for the caller to fold (cassandra.MemTable: the sink's own fold). The
// transformation code, the origin positions and the dead letters are the
// deployed ones; only the topics in between are gone. OverLedger runs it
// over the whole ledger as it is now; foldline verify and foldline
// training-set are built on it. The functions are the tenant's code, run
// by whoever runs the command: each process runs confined (package
// sandbox), with no credential of the caller's in its environment, no
// file, network or process of the caller's within reach.
package localrun

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/foldline/foldline/admin/internal/chainmain"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/sandbox"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/pf/localwire"
	"github.com/foldline/foldline/internal/textcap"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Message is one message between stages, or a ledger event.
type Message = localwire.Input

// Pipeline is a view's path running locally.
type Pipeline struct {
	stages []*stage
	// sinkInput is the topic the view's sink reads.
	sinkInput string
	// DeadLetters counts the inputs each stage sent to its dead-letter
	// topic, by stage name.
	DeadLetters map[string]int64
	// OnExport, when set, receives the states a batch of ExportMarkers
	// brought out of the path's stateful functions part-way through Stream
	// (what changed since the last export), once the view operations of
	// every batch before it went to op: a fused backfill's checkpoint.
	OnExport func(Exported) error
	// OnDeadLetter, when set, receives every dead letter (its topic is the
	// stage's dead-letter topic), e.g. to publish it there, with the ledger
	// origin of the input it holds (zero when that has none).
	OnDeadLetter func(*localwire.Output, envelope.Origin) error

	mu sync.Mutex // guards DeadLetters while Stream's stages run
}

// stage is one function running as a child process, or a chain of them
// in one (see startChain).
type stage struct {
	// name is the function's, or the chain's functions' joined by "+".
	name string
	// functions are the names of its functions.
	functions []string
	// inputs are the topics the (first) function reads, output the one
	// the (last) function writes.
	inputs []string
	output string
	// deadLetters maps each dead-letter topic to its function's name.
	deadLetters map[string]string
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	stdout      io.ReadCloser
	w           *localwire.Writer
	r           *localwire.Reader
	stderr      *tailBuffer
	// seq is the number of the last input numbered (number).
	seq uint64
	// sendErr is why sending inputs failed.
	sendErr atomic.Pointer[error]
	// confinement is what confines the process (package sandbox).
	confinement sandbox.Confinement
}

// Start builds the binaries of view's path and starts its functions (not
// its sink). epochs gives the ledger topics' epochs, as deploy gives them.
func Start(ctx context.Context, graph *manifest.Graph, view string, builder *gobuild.Builder, epochs map[string]string) (*Pipeline, error) {
	path := graph.PathTo(view)
	if len(path) == 0 {
		return nil, fmt.Errorf("running view %s locally: the manifests have no such view", view)
	}
	return StartPath(ctx, path, builder, epochs)
}

// StartPath is Start for a path of stages, upstream first, ending in a
// view's sink: a view's path (manifest.Graph.PathTo), or a backfill's copy
// of one (manifest.ForkPath).
func StartPath(ctx context.Context, path []*manifest.Stage, builder *gobuild.Builder, epochs map[string]string) (*Pipeline, error) {
	p := &Pipeline{DeadLetters: map[string]int64{}}
	functions, sinkInput := splitPath(path)
	p.sinkInput = sinkInput
	if s := startChain(ctx, functions, p.sinkInput, builder, epochs); s != nil {
		p.stages = []*stage{s}
	} else {
		for _, st := range functions {
			s, err := startStage(ctx, []*manifest.Stage{st}, builder, epochs)
			if err != nil {
				p.Close()
				return nil, err
			}
			p.stages = append(p.stages, s)
		}
	}
	p.sayConfinement(builder.Progress)
	return p, nil
}

// sayConfinement says on progress (when set) what the path's functions
// may reach, when their confinement misses something: they are the
// tenant's code, on the machine (and with the user) that runs them.
func (p *Pipeline) sayConfinement(progress io.Writer) {
	if len(p.stages) > 0 && p.stages[0].confinement.Missing != "" && progress != nil {
		fmt.Fprintf(progress, "running the path's functions on this machine with their %s\n", p.stages[0].confinement)
	}
}

// ChainEnv, set to "off", runs every function of a path in a process of
// its own even where they could run as one chain (startChain): to compare
// the two, or to rule the chain out.
const ChainEnv = "FOLDLINE_LOCAL_CHAIN"

// startChain starts the functions of a chain (each reads what the one
// before writes, the last writes the sink's input) as one process of a
// binary built for them (package chainmain), when each is a
// transformation's one-line main; nil, after saying why on the builder's
// progress, when they are not. In one process each transformation hands
// its outputs to the next in memory, not through this process: on the
// shop's user_activity path that spares the functions and this process
// about a tenth of their CPU, though the backfill takes as long either way
// (docs/benchmarks.md).
func startChain(ctx context.Context, functions []*manifest.Stage, sinkInput string, builder *gobuild.Builder, epochs map[string]string) *stage {
	if !isChain(functions, sinkInput) {
		return nil
	}
	notChained := func(err error) *stage {
		if builder.Progress != nil {
			fmt.Fprintf(builder.Progress, "running the functions of the path one process each: %v\n", err)
		}
		return nil
	}
	bin, err := buildChain(ctx, functions, builder)
	if err != nil {
		return notChained(err)
	}
	s, err := startBinary(ctx, bin, functions, epochs)
	if err != nil {
		return notChained(err)
	}
	return s
}

// isChain reports whether functions run as one chain process: two or
// more, each reading what the one before writes, the last writing
// sinkInput, and ChainEnv not off.
func isChain(functions []*manifest.Stage, sinkInput string) bool {
	return len(functions) >= 2 && os.Getenv(ChainEnv) != "off" && linked(functions, sinkInput)
}

// linked reports whether functions, one or more, each read what the one
// before writes, the last writing sinkInput.
func linked(functions []*manifest.Stage, sinkInput string) bool {
	if len(functions) == 0 {
		return false
	}
	for i, st := range functions[1:] {
		if len(st.Inputs) != 1 || st.Inputs[0] != functions[i].Output {
			return false
		}
	}
	return functions[len(functions)-1].Output == sinkInput
}

// buildChain builds the chain binary of functions.
func buildChain(ctx context.Context, functions []*manifest.Stage, builder *gobuild.Builder) (gobuild.Binary, error) {
	ts, err := transformations(functions, builder)
	if err != nil {
		return gobuild.Binary{}, err
	}
	return builder.BuildGenerated(ctx, chainmain.Source(ts))
}

// transformations returns what the one-line mains of functions run.
func transformations(functions []*manifest.Stage, builder *gobuild.Builder) ([]chainmain.Transformation, error) {
	ts := make([]chainmain.Transformation, len(functions))
	for i, st := range functions {
		dir, err := builder.PackageDir(st.Binary)
		if err != nil {
			return nil, err
		}
		if ts[i], err = chainmain.Read(dir); err != nil {
			return nil, fmt.Errorf("function %s: %w", st.Name, err)
		}
	}
	return ts, nil
}

// BuildRunner builds, with builder (for its platform), the runner of a
// backfill of path on the cluster (chainmain.RunnerSource): one binary
// that the functions worker runs as the backfill's driver, and that runs
// every function of path as one local chain (StartPathChained). Every
// function of path must be a transformation's one-line main, each reading
// what the one before writes.
func BuildRunner(ctx context.Context, path []*manifest.Stage, builder *gobuild.Builder) (gobuild.Binary, error) {
	functions, sinkInput := splitPath(path)
	if len(functions) > 0 && !linked(functions, sinkInput) {
		return gobuild.Binary{}, fmt.Errorf("the path's functions do not each read what the one before writes: %w", ErrNotChained)
	}
	ts, err := transformations(functions, builder)
	if err != nil {
		return gobuild.Binary{}, fmt.Errorf("%w: %w", err, ErrNotChained)
	}
	return builder.BuildGenerated(ctx, chainmain.RunnerSource(ts))
}

// ErrNotChained is wrapped by BuildRunner's and StartPathChained's errors
// about a path whose functions cannot run as one chain.
var ErrNotChained = errors.New("the path cannot run as one chain")

// StartPathChained is StartPath for a path whose functions all run in
// bin, as one chain (a runner of BuildRunner's, running itself): nothing
// is built. progress, when set, is told what the confinement misses.
func StartPathChained(ctx context.Context, path []*manifest.Stage, bin gobuild.Binary, epochs map[string]string, progress io.Writer) (*Pipeline, error) {
	functions, sinkInput := splitPath(path)
	p := &Pipeline{DeadLetters: map[string]int64{}, sinkInput: sinkInput}
	if len(functions) == 0 {
		return p, nil // a copy of the sink alone: what it reads goes to it
	}
	if !linked(functions, sinkInput) {
		return nil, fmt.Errorf("the path's functions do not each read what the one before writes: %w", ErrNotChained)
	}
	s, err := startBinary(ctx, bin, functions, epochs)
	if err != nil {
		return nil, err
	}
	p.stages = []*stage{s}
	p.sayConfinement(progress)
	return p, nil
}

// PrepareChain builds, with builder, the binary StartPath runs path's
// functions with when they are a chain, so that a caller can build it
// while it does something else; StartPath with the same builder then
// takes it (or waits for it). Nothing is reported: StartPath says why a
// path runs as processes.
func PrepareChain(ctx context.Context, path []*manifest.Stage, builder *gobuild.Builder) {
	functions, sinkInput := splitPath(path)
	if isChain(functions, sinkInput) {
		_, _ = buildChain(ctx, functions, builder)
	}
}

// splitPath returns the functions of path and the topic its sink reads.
func splitPath(path []*manifest.Stage) (functions []*manifest.Stage, sinkInput string) {
	for _, st := range path {
		if st.View != nil {
			sinkInput = st.View.Sink.Input
			continue
		}
		functions = append(functions, st)
	}
	return functions, sinkInput
}

// startStage builds the binary of functions (one function) and starts it.
func startStage(ctx context.Context, functions []*manifest.Stage, builder *gobuild.Builder, epochs map[string]string) (*stage, error) {
	st := functions[0]
	bin, err := builder.Build(ctx, st.Binary)
	if err != nil {
		return nil, fmt.Errorf("building function %s: %w", st.Name, err)
	}
	return startBinary(ctx, bin, functions, epochs)
}

// startBinary starts bin, the binary of functions (one function, or a
// chain of them), as a local instance.
func startBinary(ctx context.Context, bin gobuild.Binary, functions []*manifest.Stage, epochs map[string]string) (*stage, error) {
	args := []string{pf.LocalFlag}
	s := &stage{inputs: functions[0].Inputs, output: functions[len(functions)-1].Output, deadLetters: map[string]string{}, stderr: &tailBuffer{max: 16 << 10}}
	var names []string
	for _, st := range functions {
		conf, err := instanceConf(st, epochs)
		if err != nil {
			return nil, err
		}
		args = append(args, "-instance-conf", conf)
		names = append(names, st.Name)
		if dlt := st.DeadLetterTopic(); dlt != "" {
			s.deadLetters[dlt] = st.Name
		}
	}
	s.name, s.functions = strings.Join(names, "+"), names
	cmd := exec.CommandContext(ctx, bin.Path, args...)
	cmd.Env = []string{madvFree}
	s.cmd = cmd
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("starting function %s locally: %w", s.name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting function %s locally: %w", s.name, err)
	}
	if s.confinement, err = sandbox.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting function %s locally: %w", s.name, err)
	}
	s.stdout = stdout
	s.w, s.r = localwire.NewWriter(s.stdin), localwire.NewReader(stdout)
	return s, nil
}

// madvFree is the default GODEBUG of a local function: its collector
// returns the memory it frees with MADV_FREE, which the kernel takes back
// only when it needs it, rather than Go's default MADV_DONTNEED, after
// which every page used again costs a page fault and the other cores'
// TLBs a flush. A local function's heap is small and every batch
// allocates it afresh: without MADV_FREE a profile of the chain shows 6 %
// of its CPU in page faults and 4 % in TLB flushes, and with it
// BenchmarkLocalPath spends 4-8 % less CPU per event. The cost is a
// resident size that counts freed pages until the kernel takes them, in a
// process that lives as long as one local run. GODEBUG set in the
// environment wins.
const madvFree = "GODEBUG=madvdontneed=0"

// instanceConf is the instance config the worker would give st: its
// function details, with the user config deploy gives a backfill's copy of
// it (the ledger epochs, the origin as one property).
func instanceConf(st *manifest.Stage, epochs map[string]string) (string, error) {
	c := st.Function.Config
	uc := maps.Clone(c.UserConfig)
	if uc == nil {
		uc = map[string]any{}
	}
	ledger := map[string]any{}
	inputs := map[string]any{}
	for _, in := range st.Inputs {
		inputs[in] = map[string]any{}
		if e, ok := epochs[in]; ok {
			ledger[in] = e
		}
	}
	if len(ledger) > 0 {
		uc[pf.UserConfigLedgerEpochs] = ledger
	}
	if _, set := uc[pf.UserConfigOriginProperty]; !set {
		// As a backfill's copies write it: only this process reads the
		// outputs, and it reads both forms.
		uc[pf.UserConfigOriginProperty] = "single"
	}
	ucJSON, err := json.Marshal(uc)
	if err != nil {
		return "", fmt.Errorf("encoding the user config of %s: %w", st.Name, err)
	}
	details, err := json.Marshal(map[string]any{
		"tenant": st.Tenant, "namespace": st.Namespace, "name": st.Name,
		"userConfig": string(ucJSON),
		"source":     map[string]any{"inputSpecs": inputs},
		"sink":       map[string]any{"topic": st.Output},
	})
	if err != nil {
		return "", fmt.Errorf("encoding the function details of %s: %w", st.Name, err)
	}
	conf, err := json.Marshal(map[string]any{"pulsarServiceURL": "pulsar://local.invalid:6650", "functionDetails": string(details)})
	if err != nil {
		return "", fmt.Errorf("encoding the instance config of %s: %w", st.Name, err)
	}
	return string(conf), nil
}

// Feed runs a batch of ledger events (in ledger order) through the path and
// calls op for every view operation, in ledger order, with its origin and
// the ledger event that caused it (for its publish and event time).
func (p *Pipeline) Feed(events []Message, op func(cassandra.Op, Message) error) error {
	return p.feed(events, op, nil)
}

// feed is Feed, the states exported on the way (ExportMarkers) put into
// states.
func (p *Pipeline) feed(events []Message, op func(cassandra.Op, Message) error, states Exported) error {
	pending := map[string][]Message{}
	for _, e := range events {
		pending[e.Topic] = append(pending[e.Topic], e)
	}
	for _, s := range p.stages {
		var in []Message
		for _, topic := range s.inputs {
			in = append(in, pending[topic]...)
		}
		if len(s.inputs) > 1 {
			sortByOrigin(in)
		}
		next, err := p.step(s, in, states)
		if err != nil {
			return err
		}
		for _, m := range next {
			pending[m.Topic] = append(pending[m.Topic], m)
		}
	}
	return p.emit(events, pending[p.sinkInput], op)
}

// eventKey names a ledger event by its topic and position.
type eventKey struct {
	topic                string
	ledger, entry, batch int64
}

// sortByOrigin orders the inputs of a stage that reads several topics by
// their origin positions, as they left the ledger.
func sortByOrigin(in []Message) {
	origin := func(m Message) envelope.Origin {
		o, err := originOf(m)
		if err != nil {
			return envelope.Origin{Topic: m.Topic, Position: envelope.Position{Ledger: m.Ledger, Entry: m.Entry, Batch: int32(m.Batch)}}
		}
		return o
	}
	slices.SortStableFunc(in, func(a, b Message) int {
		oa, ob := origin(a), origin(b)
		if c := cmp.Compare(oa.Topic, ob.Topic); c != 0 {
			return c
		}
		return oa.Position.Compare(ob.Position)
	})
}

// originOf reads the origin a derived message carries in its properties,
// encoded (a stage's output passed on) or not.
func originOf(m Message) (envelope.Origin, error) {
	if m.Encoded == nil {
		return envelope.OriginFromProperties(m.Properties)
	}
	f, err := localwire.ParseFields(m.Encoded)
	if err != nil {
		return envelope.Origin{}, err
	}
	return fieldsOrigin(f, "")
}

// fieldsOrigin reads the origin among encoded properties as
// envelope.OriginFromProperties does, without making a map of them but
// to say what is wrong. An origin topic equal to reuse is reuse itself,
// not a new string.
func fieldsOrigin(f localwire.Fields, reuse string) (envelope.Origin, error) {
	text, ok := f.Property(envelope.PropOrigin)
	if !ok {
		topic, hasTopic := f.Property(envelope.PropOriginTopic)
		pos, hasPos := f.Property(envelope.PropOriginPosition)
		return envelope.LegacyOrigin(string(topic), string(pos), hasTopic, hasPos)
	}
	if pos, topic, found := bytes.Cut(text, []byte{' '}); found && len(topic) > 0 {
		if p, err := envelope.ParsePosition(string(pos)); err == nil {
			if string(topic) != reuse {
				reuse = string(topic)
			}
			return envelope.Origin{Topic: reuse, Position: p}, nil
		}
	}
	return envelope.OriginFromProperties(map[string]string{envelope.PropOrigin: string(text)})
}

// run sends the stage its inputs and returns their outputs in input order,
// their fields after the topic still encoded (localwire.Input.Encoded);
// an output's Seq minus first is the index in in of its input.
func (s *stage) run(in []Message) (outs []Message, first uint64, err error) {
	first = s.number(len(in))
	if len(in) == 0 {
		return nil, first, nil
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		s.send(in, first)
	}()
	outs, err = s.receive(first, len(in))
	if err != nil {
		s.stdin.Close() // a send still blocked ends
	}
	<-sent // the next run's sends use the same writer
	if err != nil {
		return nil, 0, err
	}
	return outs, first, nil
}

// number numbers n inputs on from those numbered before and returns the
// number of the first.
func (s *stage) number(n int) uint64 {
	first := s.seq + 1
	s.seq += uint64(n)
	return first
}

// send writes in, numbered from first on, to the stage. Its outputs must
// be read meanwhile (receive): a function writes as it reads, and a pipe
// holds 64 KiB. Only one goroutine sends; a failed write closes the
// stage's input, so that receive ends with the function's exit and says
// why (sendErr).
func (s *stage) send(in []Message, first uint64) {
	for i := range in {
		m := in[i]
		m.Seq = first + uint64(i)
		if err := s.w.Input(&m); err != nil {
			s.sendFailed(err)
			return
		}
	}
	if err := s.w.Flush(); err != nil {
		s.sendFailed(err)
	}
}

func (s *stage) sendFailed(err error) {
	s.sendErr.CompareAndSwap(nil, &err)
	s.stdin.Close()
}

// receive reads the outputs of the n inputs sent from number first on,
// until their Done frames, in input order (see run). Only one goroutine
// receives; it may receive the outputs of one batch while another is sent.
func (s *stage) receive(first uint64, n int) ([]Message, error) {
	outs, err := s.receiveFrames(first, n)
	if err != nil {
		if sendErr := s.sendErr.Load(); sendErr != nil {
			err = errors.Join(err, *sendErr)
		}
		return nil, s.failed(err)
	}
	return outs, nil
}

func (s *stage) receiveFrames(first uint64, n int) ([]Message, error) {
	outs := make([]Message, 0, n)
	// arena holds the outputs' encoded fields: one allocation for a batch
	// of them, not a few per output.
	var arena []byte
	for done := 0; done < n; {
		kind, err := s.r.Next()
		if err != nil {
			return nil, err
		}
		switch kind {
		case localwire.KindOutput:
			seq, topic, encoded, err := s.r.OutputEncoded()
			if err != nil {
				return nil, err
			}
			i := int(seq - first)
			if seq < first || i >= n {
				return nil, fmt.Errorf("an output of input %d, not one of %d..%d", seq, first, first+uint64(n)-1)
			}
			if cap(arena)-len(arena) < len(encoded) {
				arena = make([]byte, 0, max(len(encoded), arenaBytes))
			}
			start := len(arena)
			arena = append(arena, encoded...)
			outs = append(outs, Message{Seq: seq, Topic: topic, Ledger: -1, Entry: -1, Batch: -1, Encoded: arena[start:len(arena):len(arena)]})
		case localwire.KindDone:
			if _, err := s.r.Done(); err != nil {
				return nil, err
			}
			done++
		default:
			return nil, fmt.Errorf("%w: kind %q from the function", localwire.ErrFrame, kind)
		}
	}
	return outs, nil
}

// arenaBytes is the size of the buffers run keeps outputs in.
const arenaBytes = 256 << 10

// failed wraps err with the function's name and its last log lines.
func (s *stage) failed(err error) error {
	// What the process printed last: the tenant's code, printed on the
	// terminal of whoever runs the command.
	return fmt.Errorf("running function %s locally: %w\n%s", s.name, err, textcap.Lines(s.stderr.String()))
}

// Close ends the functions and waits for them.
func (p *Pipeline) Close() error {
	var errs []error
	for _, s := range p.stages {
		// Its output too: a run that ended early (an error downstream)
		// leaves a function blocked writing outputs nobody reads, which
		// then ends on the broken pipe instead of never.
		s.stdin.Close()
		s.stdout.Close()
		if err := s.cmd.Wait(); err != nil {
			errs = append(errs, s.failed(err))
		}
	}
	p.stages = nil
	return errors.Join(errs...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
