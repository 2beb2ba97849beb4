// Package jsonwiretest helps test hand-written JSON codecs against
// encoding/json: it turns a valid payload into the variants another
// producer might write, and into damaged ones, for differential tests.
package jsonwiretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Variants returns payload re-spaced; with its fields reordered, an unknown
// field added, some names upper-cased or escaped and some values retyped;
// with "u escaped; and damaged four ways (cut, a byte changed, dropped or
// added). A codec must read each exactly as encoding/json does.
func Variants(rng *rand.Rand, payload []byte) [][]byte {
	var out [][]byte
	var ind bytes.Buffer
	if json.Indent(&ind, payload, " ", "\t") == nil {
		out = append(out, ind.Bytes())
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) == nil {
		names := make([]string, 0, len(m)+1)
		for k := range m {
			names = append(names, k)
		}
		m["extra"] = json.RawMessage(`{"nested":[1,"two",null,{"x":false,"deep":[-1.5e9]}]}`)
		names = append(names, "extra")
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		var b bytes.Buffer
		b.WriteByte('{')
		for i, k := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			name, v := k, m[k]
			switch rng.IntN(12) {
			case 0:
				name = strings.ToUpper(k)
			case 1:
				name = `\u00` + fmt.Sprintf("%x", k[0]) + k[1:]
			}
			switch rng.IntN(10) {
			case 0:
				v = json.RawMessage("null")
			case 1:
				v = json.RawMessage(`"` + strings.Trim(string(v), `"`) + `"`)
			case 2:
				v = json.RawMessage([]string{"1.5", "-0", "2e2", "true", `""`, "{}", "12345678901234567890"}[rng.IntN(7)])
			}
			fmt.Fprintf(&b, "%q : %s", name, v)
		}
		b.WriteByte('}')
		out = append(out, bytes.ReplaceAll(b.Bytes(), []byte(`\\u00`), []byte(`\u00`)))
	}
	out = append(out, bytes.ReplaceAll(payload, []byte(`"u`), []byte(`"\u0075`)))
	for range 4 {
		d := bytes.Clone(payload)
		switch i := rng.IntN(len(d)); rng.IntN(4) {
		case 0:
			d = d[:i]
		case 1:
			d[i] = []byte{'"', '{', '}', '[', ']', ',', ':', ' ', '\\', 'x', '0', '-', 0xff}[rng.IntN(13)]
		case 2:
			d = append(d[:i], d[i+1:]...)
		default:
			d = append(d[:i:i], append([]byte{[]byte{',', '"', '1', 'n'}[rng.IntN(4)]}, d[i:]...)...)
		}
		out = append(out, d)
	}
	return out
}
