package pf

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestAdaptHandlerShapes(t *testing.T) {
	errHandler := errors.New("handler error")
	tests := []struct {
		name        string
		handler     any
		wantPayload []string
		wantErr     error
	}{
		{name: "func()", handler: func() {}},
		{name: "func() error", handler: func() error { return errHandler }, wantErr: errHandler},
		{name: "func([]byte) error", handler: func([]byte) error { return nil }},
		{name: "func() ([]byte, error)", handler: func() ([]byte, error) { return []byte("out"), nil }, wantPayload: []string{"out"}},
		{name: "func([]byte) ([]byte, error)", handler: func(in []byte) ([]byte, error) { return in, nil }, wantPayload: []string{"in"}},
		{name: "func(ctx) error", handler: func(context.Context) error { return errHandler }, wantErr: errHandler},
		{name: "func(ctx, []byte) error", handler: func(context.Context, []byte) error { return nil }},
		{name: "func(ctx) ([]byte, error)", handler: func(context.Context) ([]byte, error) { return nil, nil }},
		{name: "func(ctx, []byte) ([]byte, error)", handler: func(_ context.Context, in []byte) ([]byte, error) {
			return append(in, '!'), nil
		}, wantPayload: []string{"in!"}},
		{name: "func(ctx, []byte) ([]Record, error)", handler: func(_ context.Context, in []byte) ([]Record, error) {
			return []Record{{Payload: in}, {Payload: in}}, nil
		}, wantPayload: []string{"in", "in"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := adaptHandler(tt.handler)
			if err != nil {
				t.Fatal(err)
			}
			records, err := h.call(t.Context(), []byte("in"), nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			var payloads []string
			for _, r := range records {
				payloads = append(payloads, string(r.Payload))
			}
			if fmt.Sprint(payloads) != fmt.Sprint(tt.wantPayload) {
				t.Errorf("payloads %q, want %q", payloads, tt.wantPayload)
			}
		})
	}
}

func TestAdaptHandlerRejectsOtherShapes(t *testing.T) {
	tests := []struct {
		name    string
		handler any
	}{
		{name: "nil", handler: nil},
		{name: "not a func", handler: 42},
		{name: "string input", handler: func(string) error { return nil }},
		{name: "extra result", handler: func([]byte) ([]byte, int, error) { return nil, 0, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := adaptHandler(tt.handler); !errors.Is(err, ErrUnsupportedHandler) {
				t.Errorf("error = %v, want ErrUnsupportedHandler", err)
			}
		})
	}
}

func TestPanicBecomesError(t *testing.T) {
	h, err := adaptHandler(func([]byte) error { panic("oops") })
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.call(t.Context(), nil, nil)
	var p *PanicError
	if !errors.As(err, &p) || p.Value != "oops" || len(p.Stack) == 0 {
		t.Errorf("error = %#v, want a *PanicError with value and stack", err)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "plain", err: base, want: false},
		{name: "permanent", err: Permanent(base), want: true},
		{name: "wrapped permanent", err: fmt.Errorf("decoding: %w", Permanent(base)), want: true},
		{name: "nil", err: Permanent(nil), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent = %v, want %v", got, tt.want)
			}
		})
	}
	if !errors.Is(Permanent(base), base) {
		t.Error("Permanent hides the error it wraps")
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		handler any
		args    []string
		want    error
	}{
		{name: "bad handler", handler: 1, args: []string{"-instance-conf", "{}"}, want: ErrUnsupportedHandler},
		{name: "bad config", handler: func() {}, args: []string{"-instance-conf", `{"port":"x"}`}, want: ErrBadConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Run(t.Context(), tt.handler, tt.args); !errors.Is(err, tt.want) {
				t.Errorf("Run error = %v, want %v", err, tt.want)
			}
		})
	}
}

type otherKey struct{}

// The context a handler gets carries the function context through contexts
// derived from it, and everything of the run's context.
func TestHandlerContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(t.Context(), otherKey{}, "run"))
	var got *FunctionContext
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context) error {
		child, stop := context.WithCancel(ctx)
		defer stop()
		fc, ok := FromContext(child)
		if !ok || child.Value(otherKey{}) != "run" {
			t.Errorf("derived context: function context %v, run's value %v", ok, child.Value(otherKey{}))
		}
		got = fc
		cancel()
		<-child.Done()
		return nil
	})
	if err := inst.process(parent, ledgerEvent("x", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}
	if got == nil || string(got.GetCurrentRecord().Payload()) != "x" {
		t.Errorf("function context %+v, want the current input's", got)
	}
}
