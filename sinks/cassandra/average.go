package cassandra

import (
	"fmt"
	"slices"

	"github.com/foldline/foldline/functions/envelope"
)

// Averages.
//
// An average is not folded into a column of its own: a mean of means is
// not the mean, and a window's average is not a combination of its tiles'
// averages. It is stored as two columns that add, the sum of the values
// and the number of events, and computed when read, as
//
//	sum / count                               (a row of a view without windows)
//	sum(x_sum) / sum(x_count) over the tiles  (a windowed view, WindowTiles)
//
// The sink only ever sees the two stored columns; every reader (package
// reader, MemTable.AsOf for training sets, CombineTiles) adds the average
// with Average.Of. A count of 0, or no event at all, is no average: the
// column is null (absent from the row), never 0 or NaN.

// Average is a column that reads compute from two stored ones.
type Average struct {
	// Name is the column readers see; the table has no such column.
	Name string `json:"name" yaml:"name"`
	// Sum is the stored column of the values' sum (merge add).
	Sum string `json:"sum" yaml:"sum"`
	// Count is the stored column of the number of values (merge add, an
	// integer type), with Sum's window.
	Count string `json:"count" yaml:"count"`
}

// Of is the average of a row's (or a window's) values, column name to
// value: a float64, false when the count is absent or 0.
func (a Average) Of(values map[string]any) (float64, bool) {
	count, ok := asFloat(values[a.Count])
	if !ok || count == 0 {
		return 0, false
	}
	sum, ok := asFloat(values[a.Sum])
	if !ok {
		return 0, false
	}
	return sum / count, true
}

// asFloat reads a number as a float64: a canonical one (int64, float64),
// or one as gocql decodes a column of another CQL type (int, smallint,
// tinyint, float).
func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int16:
		return float64(x), true
	case int8:
		return float64(x), true
	case float32:
		return float64(x), true
	}
	return 0, false
}

// AddAverages sets each of the view's averages in values (column name to
// canonical value, as a row or CombineTiles gives them) from its sum and
// count, and leaves it out where there is no event to average.
func (s ViewSchema) AddAverages(values map[string]any) {
	for _, a := range s.Averages {
		if avg, ok := a.Of(values); ok {
			values[a.Name] = avg
		}
	}
}

// ReadColumn is a column as readers see it: a stored value column, or an
// average.
type ReadColumn struct {
	Name string
	// Type is the CQL type of its values: double for an average.
	Type string
}

// ReadColumns are the view's value columns as readers see them: the
// stored ones, then the averages.
func (s ViewSchema) ReadColumns() []ReadColumn {
	out := make([]ReadColumn, 0, len(s.Columns)+len(s.Averages))
	for _, c := range s.Columns {
		out = append(out, ReadColumn{Name: c.Name, Type: c.Type})
	}
	for _, a := range s.Averages {
		out = append(out, ReadColumn{Name: a.Name, Type: "double"})
	}
	return out
}

// validateAverages adds the problems of the view's averages to problem:
// a name of its own, and a sum and a count that are stored columns which
// add, over the same window.
func (s ViewSchema) validateAverages(problem func(format string, args ...any), seen map[string]bool) {
	column := func(name string) *ValueColumn {
		i := slices.IndexFunc(s.Columns, func(c ValueColumn) bool { return c.Name == name })
		if i < 0 {
			return nil
		}
		return &s.Columns[i]
	}
	for i, a := range s.Averages {
		field := fmt.Sprintf("averages[%d]", i)
		switch {
		case a.Name == "":
			problem("%s.name: is empty", field)
		case seen[a.Name]:
			problem("%s.name %q: column defined twice", field, a.Name)
		}
		seen[a.Name] = true
		sum, count := column(a.Sum), column(a.Count)
		for _, part := range []struct {
			what, name string
			c          *ValueColumn
		}{{"sum", a.Sum, sum}, {"count", a.Count, count}} {
			switch {
			case part.c == nil:
				problem("%s.%s %q: not a column of the view", field, part.what, part.name)
			case part.c.Merge != envelope.MergeAdd:
				problem("%s.%s %q: merges by %s, an average's parts add", field, part.what, part.name, part.c.Merge)
			}
			if t, ok := lookupType(typeOf(part.c)); part.c != nil && (!ok || !t.numeric()) {
				problem("%s.%s %q: type %s is not numeric", field, part.what, part.name, part.c.Type)
			}
		}
		if sum != nil && count != nil && sum.Window != count.Window {
			problem("%s: sum %s has window %s, count %s has %s: an average's parts share their window", field, a.Sum, sum.Window, a.Count, count.Window)
		}
	}
}

func typeOf(c *ValueColumn) string {
	if c == nil {
		return ""
	}
	return c.Type
}
