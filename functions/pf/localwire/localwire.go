// Package localwire is the framing between a function binary run locally
// (pf's -local mode: no broker, no worker) and the program that drives it:
// the driver writes Input frames to the binary's standard input, the
// binary answers on its standard output with the Output frames of each
// input followed by a Done frame for it, in input order. Foldline's
// in-process folds (verify, training sets) run a view's whole path this way
// with the very binaries a deployment runs.
//
// A frame is a kind byte and a uvarint length, then its fields: uvarints
// and length-prefixed byte strings. An Output frame's fields after its
// topic are laid out as an Input frame's after its position, so a driver
// passes one function's outputs to the next without decoding them
// (Reader.OutputEncoded, Input.Encoded).
package localwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Frame kinds.
const (
	KindInput  = 'I'
	KindOutput = 'O'
	KindDone   = 'D'
)

// MaxFrameBytes bounds one frame (a message the broker would take, with
// room for its properties).
const MaxFrameBytes = 64 << 20

// ErrFrame is wrapped by errors about a malformed frame.
var ErrFrame = errors.New("malformed local frame")

// Input is one message handed to the function.
type Input struct {
	Seq uint64
	// Topic and the position are the message's own (a ledger event's
	// origin); Properties carry a derived message's origin.
	Topic                string
	Ledger, Entry, Batch int64
	Key                  string
	Payload              []byte
	Properties           map[string]string
	EventTime            time.Time
	PublishTime          time.Time
	// Encoded, when set, stands for Key, Payload, Properties and EventTime,
	// which are then unset: those fields as an Output frame holds them
	// (Reader.OutputEncoded), written on unchanged. A driver passes one
	// function's outputs to the next this way without decoding them.
	Encoded []byte
}

// Output is one message the function sent for input Seq.
type Output struct {
	Seq        uint64
	Topic      string
	Key        string
	Payload    []byte
	Properties map[string]string
	EventTime  time.Time
}

// Writer writes frames; Flush sends them.
type Writer struct {
	w   *bufio.Writer
	buf []byte
	// head is a frame's kind and length, here so that it costs no
	// allocation per frame.
	head [1 + binary.MaxVarintLen64]byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 1<<16)} }

// Flush writes the buffered frames.
func (w *Writer) Flush() error { return w.w.Flush() }

func (w *Writer) frame(kind byte) error {
	if len(w.buf) > MaxFrameBytes {
		return fmt.Errorf("%w: %d bytes", ErrFrame, len(w.buf))
	}
	w.head[0] = kind
	n := binary.PutUvarint(w.head[1:], uint64(len(w.buf)))
	if _, err := w.w.Write(w.head[:1+n]); err != nil {
		return err
	}
	_, err := w.w.Write(w.buf)
	return err
}

func (w *Writer) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *Writer) varint(v int64)   { w.buf = binary.AppendVarint(w.buf, v) }
func (w *Writer) bytes(b []byte)   { w.uvarint(uint64(len(b))); w.buf = append(w.buf, b...) }
func (w *Writer) str(s string)     { w.uvarint(uint64(len(s))); w.buf = append(w.buf, s...) }
func (w *Writer) time(t time.Time) {
	if t.IsZero() {
		w.varint(0)
		return
	}
	w.varint(t.UnixNano())
}

// props writes p in the map's order: the reader makes a map again, so
// the order is no part of the frame.
func (w *Writer) props(p map[string]string) {
	w.uvarint(uint64(len(p)))
	for k, v := range p {
		w.str(k)
		w.str(v)
	}
}

// Input writes an Input frame.
func (w *Writer) Input(in *Input) error {
	w.buf = w.buf[:0]
	w.uvarint(in.Seq)
	w.str(in.Topic)
	w.varint(in.Ledger)
	w.varint(in.Entry)
	w.varint(in.Batch)
	if in.Encoded != nil {
		w.buf = append(w.buf, in.Encoded...)
	} else {
		w.str(in.Key)
		w.bytes(in.Payload)
		w.props(in.Properties)
		w.time(in.EventTime)
	}
	w.time(in.PublishTime)
	return w.frame(KindInput)
}

// Output writes an Output frame.
func (w *Writer) Output(out *Output) error {
	w.buf = w.buf[:0]
	w.uvarint(out.Seq)
	w.str(out.Topic)
	w.str(out.Key)
	w.bytes(out.Payload)
	w.props(out.Properties)
	w.time(out.EventTime)
	return w.frame(KindOutput)
}

// Done writes the Done frame of input seq.
func (w *Writer) Done(seq uint64) error {
	w.buf = w.buf[:0]
	w.uvarint(seq)
	return w.frame(KindDone)
}

// Reader reads frames.
type Reader struct {
	r   *bufio.Reader
	buf []byte
	pos int
	err error
	// names holds the topics and property names read so far, up to
	// maxNames of them: a stream repeats a few, and each is then one
	// string instead of one per frame.
	names map[string]string
}

// maxNames bounds Reader.names: a stream with ever new names (a property
// name per message) costs an allocation per name, as without it, and no
// memory beyond the bound.
const maxNames = 1024

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 1<<16)} }

// Buffered is how many bytes have been read ahead and not yet decoded.
func (r *Reader) Buffered() int { return r.r.Buffered() }

// Next reads the next frame and returns its kind; io.EOF at the end.
func (r *Reader) Next() (byte, error) {
	kind, err := r.r.ReadByte()
	if err != nil {
		return 0, err
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if n > MaxFrameBytes {
		return 0, fmt.Errorf("%w: %d bytes", ErrFrame, n)
	}
	r.buf = slices.Grow(r.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	r.pos, r.err = 0, nil
	switch kind {
	case KindInput, KindOutput, KindDone:
		return kind, nil
	}
	return 0, fmt.Errorf("%w: kind %q", ErrFrame, kind)
}

func (r *Reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 {
		r.err = fmt.Errorf("%w: a number", ErrFrame)
		return 0
	}
	r.pos += n
	return v
}

func (r *Reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf[r.pos:])
	if n <= 0 {
		r.err = fmt.Errorf("%w: a number", ErrFrame)
		return 0
	}
	r.pos += n
	return v
}

// field returns the next length-prefixed field, in the frame's buffer.
func (r *Reader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)-r.pos) {
		r.err = fmt.Errorf("%w: a field longer than its frame", ErrFrame)
		return nil
	}
	b := r.buf[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}

// bytes returns the next field, copied out of the frame's buffer.
func (r *Reader) bytes() []byte {
	b := r.field()
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

func (r *Reader) str() string { return string(r.field()) }

// name returns the next field as a string from r.names.
func (r *Reader) name() string {
	b := r.field()
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.names) < maxNames {
		if r.names == nil {
			r.names = map[string]string{}
		}
		r.names[s] = s
	}
	return s
}

func (r *Reader) time() time.Time {
	ns := r.varint()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func (r *Reader) props() map[string]string {
	n := r.propCount()
	if r.err != nil {
		return nil
	}
	p := make(map[string]string, n)
	for range n {
		k := r.name()
		p[k] = r.str()
	}
	return p
}

// Input decodes the frame Next returned as KindInput.
func (r *Reader) Input() (*Input, error) {
	in := new(Input)
	return in, r.InputInto(in)
}

// InputInto decodes the frame Next returned as KindInput into in.
func (r *Reader) InputInto(in *Input) error {
	*in = Input{Seq: r.uvarint(), Topic: r.name(), Ledger: r.varint(), Entry: r.varint(), Batch: r.varint(),
		Key: r.str(), Payload: r.bytes(), Properties: r.props(), EventTime: r.time(), PublishTime: r.time()}
	return r.err
}

// Output decodes the frame Next returned as KindOutput.
func (r *Reader) Output() (*Output, error) {
	out := &Output{Seq: r.uvarint(), Topic: r.name()}
	r.outputFields(out)
	return out, r.err
}

// outputFields decodes what an Output frame holds after its topic into out.
func (r *Reader) outputFields(out *Output) {
	out.Key, out.Payload, out.Properties, out.EventTime = r.str(), r.bytes(), r.props(), r.time()
}

// OutputEncoded decodes the frame Next returned as KindOutput up to its
// topic and returns the rest (key, payload, properties, event time) checked
// but still encoded, in the reader's buffer: it is valid until the next
// call of Next. Input.Encoded writes it on; ParseFields and DecodeOutput
// read it.
func (r *Reader) OutputEncoded() (seq uint64, topic string, encoded []byte, err error) {
	seq, topic = r.uvarint(), r.name()
	start := r.pos
	r.fields()
	if r.err != nil {
		return 0, "", nil, r.err
	}
	return seq, topic, r.buf[start:r.pos:r.pos], nil
}

// fields reads an Output frame's fields after its topic in place.
func (r *Reader) fields() Fields {
	f := Fields{Key: r.field(), Payload: r.field()}
	f.n = r.propCount()
	start := r.pos
	for range f.n {
		r.field()
		r.field()
	}
	f.props = r.buf[start:r.pos]
	f.EventTime = r.time()
	return f
}

// propCount reads the number of properties that follow.
func (r *Reader) propCount() uint64 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.buf)) {
		r.err = fmt.Errorf("%w: too many properties", ErrFrame)
	}
	if r.err != nil {
		return 0
	}
	return n
}

// DecodeOutput decodes the fields of an Output frame that OutputEncoded
// left encoded, with the frame's seq and topic, into an Output of its own.
func DecodeOutput(seq uint64, topic string, encoded []byte) (*Output, error) {
	r := &Reader{buf: encoded}
	out := &Output{Seq: seq, Topic: topic}
	r.outputFields(out)
	return out, r.err
}

// Fields are the fields of an Output frame that OutputEncoded left
// encoded, read in place: Key and Payload are in the encoded bytes.
type Fields struct {
	Key, Payload []byte
	EventTime    time.Time
	// props are the encoded properties, n of them.
	props []byte
	n     uint64
}

// ParseFields reads encoded (see OutputEncoded) without copying it.
func ParseFields(encoded []byte) (Fields, error) {
	r := &Reader{buf: encoded}
	f := r.fields()
	return f, r.err
}

// Property returns the value of property name, in the encoded bytes.
func (f Fields) Property(name string) (value []byte, ok bool) {
	r := &Reader{buf: f.props}
	for range f.n {
		k, v := r.field(), r.field()
		if string(k) == name {
			return v, true
		}
	}
	return nil, false
}

// Done decodes the frame Next returned as KindDone.
func (r *Reader) Done() (uint64, error) {
	seq := r.uvarint()
	return seq, r.err
}
