package trainingset

import (
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

// TestCSVEscapesFormulas: a text value a spreadsheet would read as a
// formula gets a ' in front; numbers, negative ones too, do not, nor the
// label file's own fields.
func TestCSVEscapesFormulas(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  string
	}{
		{"formula", `=HYPERLINK("http://x.example","y")`, `'=HYPERLINK("http://x.example","y")`},
		{"plus", "+1+cmd", "'+1+cmd"},
		{"minus text", "-2+3", "'-2+3"},
		{"at", "@SUM(A1)", "'@SUM(A1)"},
		{"tab", "\t=1", "'\t=1"},
		{"carriage return", "\r=1", "'\r=1"},
		{"plain text", "/p/sku-7", "/p/sku-7"},
		{"empty text", "", ""},
		{"null", nil, ""},
		{"negative bigint", int64(-42), "-42"},
		{"negative double", -1.5, "-1.5"},
		{"time", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "2026-11-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := csvValue(tc.value); got != tc.want {
				t.Fatalf("csvValue(%q) = %q, want %q", tc.value, got, tc.want)
			}
		})
	}

	path := filepath.Join(t.TempDir(), "set.csv")
	labels := []label{{fields: []string{"-u1", "2026-11-01T00:00:00Z", "=label"}}}
	rows := [][]map[string]any{{{"n": int64(-3), "url": "=cmd|' /C calc'!A0"}}}
	columns := []column{{view: 0, name: "n", out: "n", cqlType: "bigint"}, {view: 0, name: "url", out: "url", cqlType: "text"}}
	if err := writeSet(path, ".csv", false, []string{"user", LabelTime, "note"}, columns, labels, rows); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-u1", "2026-11-01T00:00:00Z", "=label", "-3", "'=cmd|' /C calc'!A0"}; !slices.Equal(records[1], want) {
		t.Fatalf("row %q, want %q", records[1], want)
	}
}

// TestOutRefusals: an existing --out is refused without --force, and the
// label file always (even through another name, a hard link); refused
// before anything is read, with the label file intact.
func TestOutRefusals(t *testing.T) {
	dir := t.TempDir()
	labelsPath := filepath.Join(dir, "labels.csv")
	const labelText = "user,label_time\nu1,2026-11-01T00:00:00Z\n"
	if err := os.WriteFile(labelsPath, []byte(labelText), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "old.csv")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "labels-link.csv")
	if err := os.Link(labelsPath, linked); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		out   string
		force bool
		want  error
	}{
		{"existing", existing, false, ErrOutExists},
		{"the labels", labelsPath, false, ErrOutIsLabels},
		{"the labels, forced", labelsPath, true, ErrOutIsLabels},
		{"the labels by another name, forced", linked, true, ErrOutIsLabels},
		{"the labels by a relative path, forced", "./" + filepath.Base(labelsPath), true, ErrOutIsLabels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(dir)
			_, err := Run(t.Context(), Options{Views: []string{"v"}, Labels: labelsPath, Output: tc.out, Force: tc.force})
			if !errors.Is(err, tc.want) || !errors.Is(err, exitcode.ErrUsage) {
				t.Fatalf("Run = %v, want %v (a usage error)", err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(labelsPath); string(b) != labelText {
		t.Fatalf("the label file now holds %q", b)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatalf("the existing file now holds %q", b)
	}
}

// TestWriteSetReplacesOnlyWithForce: with force the file is replaced
// whole; without, a file that appeared at --out while the set was built
// is left alone; neither leaves a temporary file behind.
func TestWriteSetReplacesOnlyWithForce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "set.csv")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	labels := []label{{fields: []string{"u1", "2026-11-01T00:00:00Z"}}}
	rows := [][]map[string]any{{{"n": int64(1)}}}
	columns := []column{{name: "n", out: "n", cqlType: "bigint"}}
	if err := writeSet(path, ".csv", false, []string{"user", LabelTime}, columns, labels, rows); !errors.Is(err, ErrOutExists) {
		t.Fatalf("writeSet without force over a file = %v, want %v", err, ErrOutExists)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("the file now holds %q", b)
	}
	if err := writeSet(path, ".csv", true, []string{"user", LabelTime}, columns, labels, rows); err != nil {
		t.Fatalf("writeSet with force: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "user,label_time,n\nu1,2026-11-01T00:00:00Z,1\n" {
		t.Fatalf("the file holds %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d files, want only the set", len(entries))
	}
}
