// Package benchreport carries the figures Foldline's benchmarks measure to
// one table. Each benchmark appends its figures, one JSON object a line, to
// the file named by FOLDLINE_BENCH_JSON (scripts/bench sets it for all of
// them); the renderer reads that file back, prints one aligned table and
// writes a combined JSON document.
//
// A figure is compared with a limit measured in the same run (a plain
// reader, a plain writer, a plain consume-produce loop): its ratio is its
// value over the limit's. The aim is what the issue asks of the figure,
// either of the ratio ("<= 8x") or of the value itself ("< 250 ms"). The
// record's field names are a contract shared with emitters outside Go
// (and outside this package): bench, figure, value, unit, limit,
// limit_value, ratio, aim.
package benchreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// EnvFile names the environment variable that holds the JSON Lines file
// figures are appended to. Unset, Emit writes nothing.
const EnvFile = "FOLDLINE_BENCH_JSON"

// Figure is one measured number of one benchmark.
type Figure struct {
	// Bench names the benchmark, e.g. "backfill".
	Bench string `json:"bench"`
	// Figure names what was measured, e.g. "backfill, deploy to switch".
	Figure string `json:"figure"`
	// Value is the measurement, in Unit.
	Value float64 `json:"value"`
	// Unit is Value's unit, e.g. "s", "ms", "events/s".
	Unit string `json:"unit"`
	// Limit names what the figure is compared with, measured in the same
	// run (e.g. "plain reader"); "" when there is none.
	Limit string `json:"limit"`
	// LimitValue is the limit's measurement, in Unit; 0 with no limit.
	LimitValue float64 `json:"limit_value"`
	// Ratio is Value / LimitValue; 0 with no limit.
	Ratio float64 `json:"ratio"`
	// Aim is what the figure should reach: an operator (<, <=, >, >=) and
	// a number with "x" for the ratio ("<= 8x") or a unit for the value
	// ("< 250 ms"); "" when the figure is context only.
	Aim string `json:"aim"`
}

// Against returns f compared with the limit named name, whose value is
// limit (in f's unit): the ratio is f's value over limit.
func (f Figure) Against(name string, limit float64) Figure {
	f.Limit, f.LimitValue = name, limit
	f.Ratio = 0
	if limit != 0 {
		f.Ratio = f.Value / limit
	}
	return f
}

// Aiming returns f with the aim aim.
func (f Figure) Aiming(aim string) Figure {
	f.Aim = aim
	return f
}

// Emit appends figs to the file named by FOLDLINE_BENCH_JSON, and does
// nothing when it is unset.
func Emit(figs ...Figure) error {
	path := os.Getenv(EnvFile)
	if path == "" {
		return nil
	}
	return Append(path, figs...)
}

// Append appends figs to the JSON Lines file at path, creating it if
// needed, in one write so that records of benchmarks writing the same
// file do not interleave.
func Append(path string, figs ...Figure) error {
	var buf bytes.Buffer
	if err := Write(&buf, figs...); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s for bench figures: %w", path, err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("appending bench figures to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return nil
}

// Write writes figs to w as JSON Lines.
func Write(w io.Writer, figs ...Figure) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // aims read "<= 8x", not "\u003c= 8x"
	for _, f := range figs {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("encoding figure %s/%s: %w", f.Bench, f.Figure, err)
		}
	}
	return nil
}

// ErrMalformed is matched by the error Read returns for a line that is not
// a figure.
var ErrMalformed = errors.New("malformed figure")

// Read reads JSON Lines figures from r, skipping blank lines. A line that
// is not a figure does not stop it: Read returns the figures of every other
// line, and an error (matching ErrMalformed) naming each bad one.
func Read(r io.Reader) ([]Figure, error) {
	var (
		figs []Figure
		bad  []error
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var f Figure
		if err := json.Unmarshal(line, &f); err != nil {
			bad = append(bad, fmt.Errorf("line %d: %w: %w", n, ErrMalformed, err))
			continue
		}
		if f.Bench == "" || f.Figure == "" {
			bad = append(bad, fmt.Errorf("line %d: %w: bench and figure are required", n, ErrMalformed))
			continue
		}
		figs = append(figs, f)
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, fmt.Errorf("reading bench figures: %w", err))
	}
	return figs, errors.Join(bad...)
}
