package benchreport

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Judged is a figure with its verdict, as the combined document holds it.
type Judged struct {
	Figure
	// Met is the verdict as the table shows it: yes, NO, ? or -.
	Met string `json:"met"`
}

// Document is the combined JSON document of one run of the benchmarks.
type Document struct {
	Generated time.Time `json:"generated"`
	// Note says where the figures were measured (machine, load).
	Note    string   `json:"note,omitempty"`
	Figures []Judged `json:"figures"`
	// Met and Missed count the figures whose aims were judged.
	Met    int `json:"met"`
	Missed int `json:"missed"`
}

// NewDocument judges figs, in the order they came.
func NewDocument(figs []Figure, generated time.Time, note string) Document {
	d := Document{Generated: generated.UTC(), Note: note, Figures: make([]Judged, 0, len(figs))}
	for _, f := range figs {
		v := Judge(f)
		switch v {
		case Met:
			d.Met++
		case Missed:
			d.Missed++
		}
		d.Figures = append(d.Figures, Judged{Figure: f, Met: v.String()})
	}
	return d
}

// WriteJSON writes d as indented JSON.
func (d Document) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("writing the bench document: %w", err)
	}
	return nil
}

// WriteTable prints d as one aligned table: bench, figure, value, limit,
// ratio, aim, met?.
func (d Document) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "bench\tfigure\tvalue\tlimit\tratio\taim\tmet?")
	for _, j := range d.Figures {
		f := j.Figure
		limit, ratio := "-", "-"
		if f.Limit != "" || f.LimitValue != 0 {
			limit = strings.TrimSpace(f.Limit + " " + Quantity(f.LimitValue, f.Unit))
			ratio = strconv.FormatFloat(f.Ratio, 'f', 2, 64) + "×"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Bench, f.Figure, Quantity(f.Value, f.Unit), limit, ratio, orDash(f.Aim), j.Met)
	}
	if len(d.Figures) == 0 {
		fmt.Fprintln(tw, "(no figures arrived)\t\t\t\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the bench table: %w", err)
	}
	return nil
}

// Quantity formats a value with its unit, with the digits that matter: no
// decimals from 100 up, one from 10, three significant below.
func Quantity(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
