package envelope_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
)

func TestParsePosition(t *testing.T) {
	tests := []struct {
		name string
		text string
		want envelope.Position
		bad  bool
	}{
		{name: "plain", text: "12:34:5", want: envelope.Position{Ledger: 12, Entry: 34, Batch: 5}},
		{name: "path", text: "12:34:-1/0/17", want: envelope.Position{Ledger: 12, Entry: 34, Batch: -1, Path: "/0/17"}},
		{name: "epoch", text: "12:34:0@e1f2-x_Y", want: envelope.Position{Ledger: 12, Entry: 34, Epoch: "e1f2-x_Y"}},
		{name: "path and epoch", text: "1:2:3/4@abc", want: envelope.Position{Ledger: 1, Entry: 2, Batch: 3, Path: "/4", Epoch: "abc"}},
		{name: "two fields", text: "1:2", bad: true},
		{name: "empty path index", text: "1:2:3//4", bad: true},
		{name: "trailing slash", text: "1:2:3/", bad: true},
		{name: "leading zero", text: "1:2:3/01", bad: true},
		{name: "negative index", text: "1:2:3/-1", bad: true},
		{name: "sign", text: "1:2:3/+1", bad: true},
		{name: "empty epoch", text: "1:2:3@", bad: true},
		{name: "epoch with colon", text: "1:2:3@a:b", bad: true},
		{name: "two epochs", text: "1:2:3@a@b", bad: true},
		{name: "huge index", text: "1:2:3/99999999999", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.ParsePosition(tt.text)
			if tt.bad {
				if err == nil {
					t.Fatalf("ParsePosition(%q) = %+v, want an error", tt.text, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePosition(%q) = %+v, %v; want %+v", tt.text, got, err, tt.want)
			}
			if s := got.String(); s != tt.text {
				t.Errorf("String() = %q, want %q", s, tt.text)
			}
		})
	}
	if _, err := envelope.ParsePosition("1:2:3/x"); !errors.Is(err, envelope.ErrBadPosition) {
		t.Errorf("a bad path gives %v, want ErrBadPosition", err)
	}
}

// The outputs of one ledger event, numbered as the runtime numbers them
// stage by stage, are distinct and compare in the order they were emitted
// (depth-first), whatever each stage's fan-out.
func TestChildPositionsFollowEmissionOrder(t *testing.T) {
	event := envelope.Position{Ledger: 9, Entry: 4, Batch: 2}
	var emitted []envelope.Position
	// Stage 1 emits 3 outputs; stage 2 emits 1, 12 and 2 outputs for them;
	// stage 3 emits 2 for each of those.
	fanout2 := []int{1, 12, 2}
	for i := range 3 {
		p1 := event.Child(i, 3)
		for j := range fanout2[i] {
			p2 := p1.Child(j, fanout2[i])
			for k := range 2 {
				emitted = append(emitted, p2.Child(k, 2))
			}
		}
	}
	for i := 1; i < len(emitted); i++ {
		if c := emitted[i-1].Compare(emitted[i]); c >= 0 {
			t.Errorf("output %d (%s) compares %d to output %d (%s), want -1", i-1, emitted[i-1], c, i, emitted[i])
		}
	}
	sorted := slices.Clone(emitted)
	slices.SortFunc(sorted, envelope.Position.Compare)
	if !slices.Equal(sorted, emitted) {
		t.Errorf("sorting changes the emission order")
	}
	// Every output comes after the event's previous entry and before its next.
	if prev := (envelope.Position{Ledger: 9, Entry: 4, Batch: 1}); prev.Compare(emitted[0]) >= 0 {
		t.Errorf("%s does not come before %s", prev, emitted[0])
	}
	if next := (envelope.Position{Ledger: 9, Entry: 4, Batch: 3}); next.Compare(emitted[len(emitted)-1]) <= 0 {
		t.Errorf("%s does not come after %s", next, emitted[len(emitted)-1])
	}
	// A single output keeps its input's position.
	if got := event.Child(0, 1); got != event {
		t.Errorf("Child(0, 1) = %s, want %s", got, event)
	}
}

// IsChild agrees with Child: every output's position is the child it was
// built as, and no other.
func TestIsChildAgreesWithChild(t *testing.T) {
	parents := []envelope.Position{
		{Ledger: 9, Entry: 4, Batch: 2},
		{Ledger: 9, Entry: 4, Batch: 2, Path: "/1", Epoch: "e1"},
	}
	for _, parent := range parents {
		for _, n := range []int{1, 2, 12, 150} {
			for i := range n {
				child := parent.Child(i, n)
				if !child.IsChild(parent, i, n) {
					t.Errorf("%s is not child %d of %d of %s", child, i, n, parent)
				}
				others := []struct {
					i, n int
					p    envelope.Position
				}{
					{i + 1, n + 1, parent}, // another index (of more outputs)
					{i, n, envelope.Position{Ledger: 9, Entry: 5, Batch: 2, Path: parent.Path, Epoch: parent.Epoch}}, // another event
					{i, n, envelope.Position{Ledger: 9, Entry: 4, Batch: 2, Path: parent.Path, Epoch: "e2"}},         // another epoch
				}
				for _, o := range others {
					if child.IsChild(o.p, o.i, o.n) {
						t.Errorf("%s is child %d of %d of %s too", child, o.i, o.n, o.p)
					}
				}
			}
		}
	}
	if (envelope.Position{Path: "/1/2"}).IsChild(envelope.Position{}, 1, 3) {
		t.Error("a grandchild is a child")
	}
}

func TestSameEpoch(t *testing.T) {
	a := envelope.Position{Ledger: 1, Epoch: "a"}
	tests := []struct {
		name string
		q    envelope.Position
		want bool
	}{
		{name: "same", q: envelope.Position{Ledger: 5, Epoch: "a"}, want: true},
		{name: "other", q: envelope.Position{Ledger: 5, Epoch: "b"}, want: false},
		{name: "unknown", q: envelope.Position{Ledger: 5}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := a.SameEpoch(tt.q); got != tt.want {
				t.Errorf("SameEpoch = %v, want %v", got, tt.want)
			}
		})
	}
}

// Every stage reads a position per message: a well-formed one costs no
// allocation.
func TestParsePositionDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"1:2:3", "123456:7:-1/0/12@ep-1"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = envelope.ParsePosition(s) }); n != 0 {
			t.Errorf("ParsePosition(%q) allocates %v times", s, n)
		}
	}
}

// An origin travels as one property, "position topic", which any topic name
// may end (the position holds no space); the two properties that carried it
// before are still read, and PropOrigin wins over them.
func TestOriginFromProperties(t *testing.T) {
	const topic = "persistent://acme/ledger/events-partition-3"
	tests := []struct {
		name    string
		props   map[string]string
		want    envelope.Origin
		wantErr error // matched with errors.Is; nil: no error
		bad     bool  // some error
	}{
		{name: "plain", props: map[string]string{envelope.PropOrigin: "7:3:1 " + topic},
			want: envelope.Origin{Topic: topic, Position: envelope.Position{Ledger: 7, Entry: 3, Batch: 1}}},
		{name: "path and epoch", props: map[string]string{envelope.PropOrigin: "7:3:1/0/2@e-1 " + topic},
			want: envelope.Origin{Topic: topic, Position: envelope.Position{Ledger: 7, Entry: 3, Batch: 1, Path: "/0/2", Epoch: "e-1"}}},
		{name: "a topic with spaces and @", props: map[string]string{envelope.PropOrigin: "7:3:1 persistent://t/n/a b@c"},
			want: envelope.Origin{Topic: "persistent://t/n/a b@c", Position: envelope.Position{Ledger: 7, Entry: 3, Batch: 1}}},
		{name: "legacy pair", props: map[string]string{envelope.PropOriginTopic: topic, envelope.PropOriginPosition: "7:3:1@e1"},
			want: envelope.Origin{Topic: topic, Position: envelope.Position{Ledger: 7, Entry: 3, Batch: 1, Epoch: "e1"}}},
		{name: "PropOrigin wins", props: map[string]string{envelope.PropOrigin: "8:0:0 " + topic, envelope.PropOriginTopic: "persistent://t/n/old", envelope.PropOriginPosition: "7:3:1"},
			want: envelope.Origin{Topic: topic, Position: envelope.Position{Ledger: 8}}},
		{name: "none", props: map[string]string{"type": "x"}, wantErr: envelope.ErrNoOrigin},
		{name: "no topic", props: map[string]string{envelope.PropOrigin: "7:3:1"}, wantErr: envelope.ErrBadPosition},
		{name: "empty topic", props: map[string]string{envelope.PropOrigin: "7:3:1 "}, wantErr: envelope.ErrBadPosition},
		{name: "bad position", props: map[string]string{envelope.PropOrigin: "7:3 " + topic}, wantErr: envelope.ErrBadPosition},
		{name: "topic first", props: map[string]string{envelope.PropOrigin: topic + " 7:3:1"}, bad: true},
		{name: "empty", props: map[string]string{envelope.PropOrigin: ""}, wantErr: envelope.ErrBadPosition},
		{name: "legacy without topic", props: map[string]string{envelope.PropOriginPosition: "7:3:1"}, bad: true},
		{name: "legacy bad position", props: map[string]string{envelope.PropOriginTopic: topic, envelope.PropOriginPosition: "7:3"}, wantErr: envelope.ErrBadPosition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.OriginFromProperties(tt.props)
			switch {
			case tt.wantErr != nil || tt.bad:
				if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("OriginFromProperties = %+v, %v; want error %v", got, err, tt.wantErr)
				}
				if errors.Is(tt.wantErr, envelope.ErrNoOrigin) == envelope.HasOrigin(tt.props) {
					t.Errorf("HasOrigin = %v for %v", envelope.HasOrigin(tt.props), tt.props)
				}
				return
			case err != nil || got != tt.want:
				t.Fatalf("OriginFromProperties = %+v, %v; want %+v", got, err, tt.want)
			}
			if !envelope.HasOrigin(tt.props) {
				t.Error("HasOrigin = false")
			}
			if ot := envelope.OriginTopic(tt.props); ot != tt.want.Topic {
				t.Errorf("OriginTopic = %q, want %q", ot, tt.want.Topic)
			}
			// Written back, it is one property, read as the same origin.
			props := map[string]string{envelope.PropOriginTopic: "x", envelope.PropOriginPosition: "y", "type": "z"}
			got.SetOn(props)
			if len(props) != 2 || props["type"] != "z" || props[envelope.PropOrigin] != got.String() {
				t.Errorf("SetOn left %v", props)
			}
			if back, err := envelope.ParseOrigin(got.String()); err != nil || back != got {
				t.Errorf("ParseOrigin(%q) = %+v, %v", got.String(), back, err)
			}
		})
	}
}

// Origin.Is agrees with String, and tells apart origins that differ
// anywhere: position, path, epoch or topic.
func TestOriginIs(t *testing.T) {
	o := envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3, Path: "/1", Epoch: "e1"}}
	if !o.Is(o.String()) {
		t.Fatalf("%s is not itself", o)
	}
	for _, text := range []string{"1:2:3/1@e1 persistent://t/n/m", "1:2:3/1@e2 persistent://t/n/l", "1:2:3@e1 persistent://t/n/l",
		"1:2:4/1@e1 persistent://t/n/l", "1:2:3/1@e1persistent://t/n/l", "1:2:3/1@e1 persistent://t/n/l ", ""} {
		if o.Is(text) {
			t.Errorf("%s is %q", o, text)
		}
	}
	long := envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Path: "/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21/22/23/24/25/26/27/28/29/30"}}
	if !long.Is(long.String()) {
		t.Errorf("an origin whose position is longer than the stack buffer is not itself")
	}
	if n := testing.AllocsPerRun(100, func() { _ = o.Is("1:2:3/1@e1 persistent://t/n/l") }); n != 0 {
		t.Errorf("Is allocates %v times", n)
	}
}

// Every output of a ledger event gets its origin formatted: one allocation,
// the string itself.
func TestOriginStringAllocatesOnce(t *testing.T) {
	o := envelope.Origin{Topic: "persistent://acme/ledger/events-partition-12", Position: envelope.Position{Ledger: 123456, Entry: 7890, Batch: 12, Path: "/1/0", Epoch: "20261201T112233Z-9f3a1c2e"}}
	if n := testing.AllocsPerRun(100, func() { _ = o.String() }); n != 1 {
		t.Errorf("Origin.String allocates %v times, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = o.Position.String() }); n != 1 {
		t.Errorf("Position.String allocates %v times, want 1", n)
	}
}
