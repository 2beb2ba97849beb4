package manifest

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Source remembers where a document came from and the line of every field
// the decoder saw, so that checks made after decoding can still point at a
// file and line.
type Source struct {
	// File is the manifest's path as the user gave it (DIR joined with the
	// file's name).
	File  string
	lines map[string]int
	// fields is set on the source of a document Foldline synthesized from
	// another (a declared view's function, from its view): it maps the
	// synthesized document's fields to the fields of the document the user
	// wrote, where its problems are reported. A field it does not name
	// goes to the nearest enclosing field it names, else to its "".
	fields map[string]string
}

// Line returns the line of field (a path such as "namespaces[1].retention"),
// falling back to the nearest enclosing field that has one, then to line 1.
func (s Source) Line(field string) int {
	for f := s.written(field); ; {
		if line, ok := s.lines[f]; ok {
			return line
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	if line, ok := s.lines[""]; ok {
		return line
	}
	return 1
}

// written is the field of the document the user wrote that field stands
// for: field itself, but for a synthesized document (see fields).
func (s Source) written(field string) string {
	if s.fields == nil {
		return field
	}
	for f := field; ; {
		if w, ok := s.fields[f]; ok {
			return w
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return s.fields[""]
		}
		f = f[:i]
	}
}

// Has reports whether the document gave field (a bool left out and one set
// to false look the same once decoded).
func (s Source) Has(field string) bool {
	_, ok := s.lines[field]
	return ok
}

// Problem returns a problem located at field of this source.
func (s Source) Problem(field, format string, args ...any) Problem {
	return Problem{File: s.File, Line: s.Line(field), Field: s.written(field), Message: fmt.Sprintf(format, args...)}
}

// decoder fills Go values from YAML nodes strictly: an unknown field or a
// value of the wrong type is a problem with its line, and decoding goes on
// so that every problem of a file is reported at once.
type decoder struct {
	src      *Source
	problems *Problems
	budget   *budget
}

// budget counts the nodes a file may still decode, aliases expanded; once
// spent, decoding the file stops with one problem.
type budget struct {
	left     int
	exceeded bool
}

// spend takes n nodes from the budget and reports whether it held them.
func (b *budget) spend(n int) bool {
	if b.exceeded {
		return false
	}
	b.left -= n
	if b.left < 0 {
		b.exceeded = true
	}
	return !b.exceeded
}

// expandedSize counts node's nodes with every alias expanded, stopping as
// soon as the count passes limit.
func expandedSize(node *yaml.Node, limit int) int {
	n := 0
	var walk func(*yaml.Node, int)
	walk = func(node *yaml.Node, depth int) {
		if n > limit || depth > limit {
			n = limit + 1
			return
		}
		n++
		if node.Kind == yaml.AliasNode && node.Alias != nil {
			walk(node.Alias, depth+1)
			return
		}
		for _, child := range node.Content {
			walk(child, depth+1)
		}
	}
	walk(node, 0)
	return n
}

// overBudget records the problem of a file that expands past MaxFileNodes.
func (d *decoder) overBudget(line int, path string) {
	d.problem(line, path, "the document expands to more than %d YAML nodes (aliases repeating aliases?): refused", MaxFileNodes)
}

func (d *decoder) problem(line int, field, format string, args ...any) {
	*d.problems = append(*d.problems, Problem{File: d.src.File, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// decode fills v (addressable) from node; path names the field for problems.
func (d *decoder) decode(node *yaml.Node, v reflect.Value, path string) {
	if d.src.lines == nil {
		d.src.lines = map[string]int{}
	}
	if d.budget.exceeded {
		return
	}
	if !d.budget.spend(1) {
		d.overBudget(node.Line, path)
		return
	}
	if _, seen := d.src.lines[path]; !seen {
		d.src.lines[path] = node.Line
	}
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return // absent and null mean the same: the zero value
	}
	if _, ok := textUnmarshaler(v); ok && v.Kind() == reflect.Struct {
		d.decodeScalar(node, v, path) // a struct that reads itself from text (Duration)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(node, elem.Elem(), path)
		v.Set(elem)
	case reflect.Struct:
		if _, ok := textUnmarshaler(v); ok {
			d.decodeScalar(node, v, path) // a value written as text (an expression)
			return
		}
		d.decodeStruct(node, v, path)
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			d.problem(node.Line, path, "want a list, found %s", describe(node))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		for i, item := range node.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(node, v, path)
	case reflect.Interface:
		// yaml.v3 expands the aliases of node.Decode itself, far past this
		// file's budget: count them first.
		if size := expandedSize(node, d.budget.left); !d.budget.spend(size) {
			d.overBudget(node.Line, path)
			return
		}
		var any any
		if err := node.Decode(&any); err != nil {
			d.problem(node.Line, path, "%s", err.Error())
			return
		}
		if any != nil {
			v.Set(reflect.ValueOf(any))
		}
	default:
		d.decodeScalar(node, v, path)
	}
}

func (d *decoder) decodeStruct(node *yaml.Node, v reflect.Value, path string) {
	if node.Kind != yaml.MappingNode {
		d.problem(node.Line, path, "want a mapping of fields, found %s", describe(node))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		name := key.Value
		field := join(path, name)
		index, ok := fields[name]
		switch {
		case !ok:
			d.problem(key.Line, field, "unknown field (known: %s)", strings.Join(sortedNames(fields), ", "))
			continue
		case seen[name]:
			d.problem(key.Line, field, "given twice")
			continue
		}
		seen[name] = true
		d.src.lines[field] = key.Line
		d.decode(value, v.FieldByIndex(index), field)
	}
}

func (d *decoder) decodeMap(node *yaml.Node, v reflect.Value, path string) {
	if node.Kind != yaml.MappingNode {
		d.problem(node.Line, path, "want a mapping, found %s", describe(node))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.problem(node.Line, path, "maps need string keys")
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(node.Content)/2)
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		field := join(path, key.Value)
		d.src.lines[field] = key.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(value, elem, field)
		m.SetMapIndex(reflect.ValueOf(key.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}

// textUnmarshaler is v as an encoding.TextUnmarshaler, when it is one.
func textUnmarshaler(v reflect.Value) (encoding.TextUnmarshaler, bool) {
	if !v.CanAddr() {
		return nil, false
	}
	u, ok := v.Addr().Interface().(encoding.TextUnmarshaler)
	return u, ok
}

func (d *decoder) decodeScalar(node *yaml.Node, v reflect.Value, path string) {
	if node.Kind != yaml.ScalarNode {
		d.problem(node.Line, path, "want a %s, found %s", kindName(v.Kind()), describe(node))
		return
	}
	wrong := func() { d.problem(node.Line, path, "want a %s, found %s", kindName(v.Kind()), describe(node)) }
	// A type that reads itself from text (a window's span, "7d") says what
	// is wrong in its own words.
	if u, ok := textUnmarshaler(v); ok {
		if node.Tag != "!!str" && node.Tag != "!!int" {
			d.problem(node.Line, path, "want text, found %s", describe(node))
			return
		}
		if err := u.UnmarshalText([]byte(node.Value)); err != nil {
			d.problem(node.Line, path, "%s", err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if node.Tag != "!!str" {
			wrong()
			return
		}
		v.SetString(node.Value)
	case reflect.Bool:
		if node.Tag != "!!bool" {
			wrong()
			return
		}
		v.SetBool(node.Value == "true" || node.Value == "True" || node.Value == "TRUE")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(node.Value, 0, v.Type().Bits())
		if node.Tag != "!!int" || err != nil {
			wrong()
			return
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(node.Value, v.Type().Bits())
		if (node.Tag != "!!float" && node.Tag != "!!int") || err != nil {
			wrong()
			return
		}
		v.SetFloat(f)
	default:
		d.problem(node.Line, path, "cannot hold a value of Go kind %s", v.Kind())
	}
}

// fieldsOf maps the YAML names of a struct's fields (yaml tag, else json
// tag, else the lower-cased Go name; embedded structs inline) to their
// indexes. Fields tagged "-" are not decoded.
func fieldsOf(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := tagName(f)
		if name == "-" {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct && name == "" {
			for inner, index := range fieldsOf(f.Type) {
				fields[inner] = append([]int{i}, index...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = []int{i}
	}
	return fields
}

func tagName(f reflect.StructField) string {
	for _, key := range []string{"yaml", "json"} {
		if tag, ok := f.Tag.Lookup(key); ok {
			return strings.Split(tag, ",")[0]
		}
	}
	return ""
}

func sortedNames(fields map[string][]int) []string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func describe(node *yaml.Node) string {
	switch node.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch node.Tag {
	case "!!str":
		return fmt.Sprintf("the string %q", node.Value)
	case "!!int":
		return "the integer " + node.Value
	case "!!float":
		return "the number " + node.Value
	case "!!bool":
		return "the boolean " + node.Value
	}
	return fmt.Sprintf("%q", node.Value)
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return k.String()
}
