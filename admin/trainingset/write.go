package trainingset

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/parquet-go/parquet-go"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

// writeSet writes the training set to path: each label's fields as in the
// label file, then columns from its rows (rows[label][view], nil for
// nulls), in the labels' order. It writes a file beside path and renames
// it at the end, so that a failed run leaves no half-written file and
// nothing of a file it was to replace is lost; without force it refuses a
// file that has appeared at path meanwhile.
func writeSet(path, format string, force bool, header []string, columns []column, labels []label, rows [][]map[string]any) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the training set: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if format == ".csv" {
		err = writeCSV(tmp, header, columns, labels, rows)
	} else {
		err = writeParquet(tmp, header, columns, labels, rows)
	}
	if err == nil {
		err = tmp.Chmod(0o644) // as readable as a file os.Create makes, not CreateTemp's 0600
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the training set %s: %w", path, err)
	}
	if force {
		err = os.Rename(tmp.Name(), path)
	} else {
		// A link fails where a file exists: none is overwritten.
		err = os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			os.Remove(tmp.Name())
			return fmt.Errorf("--out %s: %w (it appeared while the training set was built; pass --force to overwrite it): %w", path, ErrOutExists, exitcode.ErrUsage)
		}
		if err == nil {
			err = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return fmt.Errorf("writing the training set %s: %w", path, err)
	}
	return nil
}

func writeCSV(f *os.File, header []string, columns []column, labels []label, rows [][]map[string]any) error {
	w := csv.NewWriter(f)
	cols := slices.Clone(header)
	for _, c := range columns {
		cols = append(cols, c.out)
	}
	if err := w.Write(cols); err != nil {
		return err
	}
	rec := make([]string, 0, len(cols))
	for i, l := range labels {
		rec = append(rec[:0], l.fields...)
		for _, c := range columns {
			rec = append(rec, csvValue(rows[i][c.view][c.name]))
		}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// formulaStart holds the first characters that make a spreadsheet read a
// cell as a formula (OWASP, CSV injection): = + - @, tab, carriage return.
const formulaStart = "=+-@\t\r"

// csvValue is a view value (nil for null) as a CSV cell. Text that a
// spreadsheet would take for a formula gets a ' in front, as OWASP
// recommends, so that it shows as the text it is; a number never does (a
// negative one stays a number). The label file's own fields are written as
// they are: they are the caller's, not the events'.
func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		if x != "" && strings.ContainsRune(formulaStart, rune(x[0])) {
			return "'" + x
		}
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func writeParquet(f *os.File, header []string, columns []column, labels []label, rows [][]map[string]any) error {
	group := parquet.Group{}
	for _, h := range header {
		if h == LabelTime {
			// As precise as given: a label may fall between two events of
			// one millisecond.
			group[h] = parquet.Timestamp(parquet.Nanosecond)
		} else {
			group[h] = parquet.String()
		}
	}
	for _, c := range columns {
		group[c.out] = parquet.Optional(parquetNode(c.cqlType))
	}
	w := parquet.NewWriter(f, parquet.NewSchema("training_set", group))
	for i, l := range labels {
		m := make(map[string]any, len(header)+len(columns))
		for j, h := range header {
			if h == LabelTime {
				m[h] = l.at
			} else {
				m[h] = l.fields[j]
			}
		}
		for _, c := range columns {
			m[c.out] = parquetValue(rows[i][c.view][c.name])
		}
		if err := w.Write(m); err != nil {
			return err
		}
	}
	return w.Close()
}

// parquetNode is the Parquet type of a view column's CQL type.
func parquetNode(cqlType string) parquet.Node {
	switch strings.ToLower(cqlType) {
	case "bigint", "int", "smallint", "tinyint":
		return parquet.Int(64)
	case "double", "float":
		return parquet.Leaf(parquet.DoubleType)
	case "boolean":
		return parquet.Leaf(parquet.BooleanType)
	case "timestamp":
		return parquet.Timestamp(parquet.Millisecond)
	}
	return parquet.String() // text, varchar, ascii, uuid
}

func parquetValue(v any) any {
	if u, isUUID := v.(gocql.UUID); isUUID {
		return u.String()
	}
	return v
}
