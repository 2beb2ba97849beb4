// Package confnum reads a number from a function's user config, where it
// arrives as a JSON double from the worker (3 as 3.0), a Go integer from a
// decoded YAML manifest, or a string of digits. Whether it must be whole,
// and its range, are the caller's to check.
package confnum

import (
	"fmt"
	"strconv"
)

// Number returns v as a float64, or an error saying what v is instead.
func Number(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, fmt.Errorf("want a number, got %q", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %v", v)
}
