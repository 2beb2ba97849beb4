package deploy

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckFailoverHandover(t *testing.T) {
	scaled := []string{"validate (4 instances)"}
	tests := []struct {
		name     string
		scaled   []string
		conf     map[string]string
		readErr  error
		wantErr  string // "" for none
		wantNote bool
	}{
		{name: "one instance each: not asked", scaled: nil, conf: map[string]string{FailoverDelaySetting: "1000"}},
		{name: "handover at once", scaled: scaled, conf: map[string]string{FailoverDelaySetting: "0"}},
		{name: "the default delay", scaled: scaled, conf: map[string]string{FailoverDelaySetting: "1000"},
			wantErr: "activeConsumerFailoverDelayTimeMillis is 1000, and validate (4 instances) run several instances"},
		{name: "not in the config", scaled: scaled, conf: map[string]string{}, wantErr: "unset, 1000 by default"},
		{name: "config not readable", scaled: scaled, readErr: errors.New("403 forbidden"), wantNote: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			note, err := checkFailoverHandover(tc.scaled, tc.conf, tc.readErr)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (!errors.Is(err, ErrFailoverDelay) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want ErrFailoverDelay saying %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), "=0") {
				t.Errorf("error %v does not say what to set", err)
			}
			if (note != nil) != tc.wantNote {
				t.Fatalf("note %+v, want one: %v", note, tc.wantNote)
			}
			if note != nil && (note.Action != Note || !strings.Contains(note.Details[0], "403 forbidden")) {
				t.Errorf("note %+v, want a Note with the read error", note)
			}
		})
	}
}
