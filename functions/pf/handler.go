package pf

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrUnsupportedHandler is returned by Start and Run for a handler of a shape
// the runtime does not know.
var ErrUnsupportedHandler = errors.New("unsupported handler shape")

// invoker is every handler shape brought to one: it appends the records to
// send for one input payload to out, which is empty with room for one
// record, and returns them (the shape returning []Record returns its own).
type invoker func(ctx context.Context, payload []byte, out []Record) ([]Record, error)

// adaptHandler turns any accepted handler shape into an invoker. A []byte
// result of nil means "send nothing", as upstream.
func adaptHandler(handler any) (invoker, error) {
	switch h := handler.(type) {
	case func(context.Context, []byte) ([]Record, error):
		return func(ctx context.Context, in []byte, _ []Record) ([]Record, error) { return h(ctx, in) }, nil
	case func():
		return func(context.Context, []byte, []Record) ([]Record, error) { h(); return nil, nil }, nil
	case func() error:
		return func(context.Context, []byte, []Record) ([]Record, error) { return nil, h() }, nil
	case func([]byte) error:
		return func(_ context.Context, in []byte, _ []Record) ([]Record, error) { return nil, h(in) }, nil
	case func(context.Context) error:
		return func(ctx context.Context, _ []byte, _ []Record) ([]Record, error) { return nil, h(ctx) }, nil
	case func(context.Context, []byte) error:
		return func(ctx context.Context, in []byte, _ []Record) ([]Record, error) { return nil, h(ctx, in) }, nil
	case func() ([]byte, error):
		return onePayload(func(context.Context, []byte) ([]byte, error) { return h() }), nil
	case func([]byte) ([]byte, error):
		return onePayload(func(_ context.Context, in []byte) ([]byte, error) { return h(in) }), nil
	case func(context.Context) ([]byte, error):
		return onePayload(func(ctx context.Context, _ []byte) ([]byte, error) { return h(ctx) }), nil
	case func(context.Context, []byte) ([]byte, error):
		return onePayload(h), nil
	case nil:
		return nil, fmt.Errorf("%w: handler is nil", ErrUnsupportedHandler)
	}
	return nil, fmt.Errorf("%w: %T; want one of func(), func() error, func([]byte) error, "+
		"func() ([]byte, error), func([]byte) ([]byte, error), func(context.Context) error, "+
		"func(context.Context, []byte) error, func(context.Context) ([]byte, error), "+
		"func(context.Context, []byte) ([]byte, error), func(context.Context, []byte) ([]pf.Record, error)",
		ErrUnsupportedHandler, handler)
}

// onePayload adapts a handler shape that returns one payload: a record of
// that payload, none for a nil payload.
func onePayload(h func(context.Context, []byte) ([]byte, error)) invoker {
	return func(ctx context.Context, in []byte, out []Record) ([]Record, error) {
		payload, err := h(ctx, in)
		if err != nil || payload == nil {
			return nil, err
		}
		return append(out, Record{Payload: payload}), nil
	}
}

// PanicError is the user error of a handler that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// call runs the handler, turning a panic into a *PanicError.
func (h invoker) call(ctx context.Context, payload []byte, out []Record) (records []Record, err error) {
	defer func() {
		if v := recover(); v != nil {
			records, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h(ctx, payload, out)
}
