package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope/jsonwire/jsonwiretest"
)

// parseReference is Parse with every payload read by encoding/json, as
// before the scan: the definition the scan must match.
func parseReference(data []byte) (Event, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return Event{}, err
	}
	return obj.event()
}

func checkParse(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := Parse(data)
	want, wantErr := parseReference(data)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("Parse(%q)\n got  %+v, %v\n want %+v, %v", data, got, gotErr, want, wantErr)
	}
}

// marshalReference is MarshalJSON as it was, by encoding/json from the
// wire shape of each type.
func marshalReference(e Event) ([]byte, error) {
	type common struct {
		ID   string `json:"id"`
		Type Type   `json:"type"`
		User string `json:"user"`
		Time string `json:"time"`
	}
	c := common{ID: e.ID, Type: e.Type, User: e.User, Time: e.Time.UTC().Format(time.RFC3339Nano)}
	switch e.Type {
	case PageView:
		return json.Marshal(struct {
			common
			URL string `json:"url"`
		}{c, e.URL})
	case AddToCart:
		return json.Marshal(struct {
			common
			SKU string `json:"sku"`
			Qty int64  `json:"qty"`
		}{c, e.SKU, e.Qty})
	case Purchase:
		return json.Marshal(struct {
			common
			Order      string `json:"order"`
			SKU        string `json:"sku"`
			Qty        int64  `json:"qty"`
			PriceCents int64  `json:"price_cents"`
		}{c, e.Order, e.SKU, e.Qty, e.PriceCents})
	case Refund:
		return json.Marshal(struct {
			common
			Order       string `json:"order"`
			AmountCents int64  `json:"amount_cents"`
		}{c, e.Order, e.AmountCents})
	}
	return nil, fmt.Errorf("unknown type")
}

func checkMarshal(t *testing.T, e Event) []byte {
	t.Helper()
	want, wantErr := marshalReference(e)
	got, gotErr := json.Marshal(e)
	direct, directErr := e.AppendJSON(nil)
	if (gotErr == nil) != (wantErr == nil) || (directErr == nil) != (wantErr == nil) {
		t.Fatalf("encoding %+v: errors %v, %v; want %v", e, gotErr, directErr, wantErr)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(direct, want) {
		t.Fatalf("encoding %+v\n json.Marshal %s\n AppendJSON   %s\n want         %s", e, got, direct, want)
	}
	return got
}

func TestParseEdgeCases(t *testing.T) {
	const ok = `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`
	cases := []string{
		ok,
		" \n\t" + ok + "\r\n",
		`{ "price_cents" : 1999 , "qty" : 2 , "sku" : "sku-7" , "order" : "o-1" , "time" : "2026-11-01T10:00:00Z" , "user" : "u42" , "type" : "purchase" , "id" : "e-3" }`,
		`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999,"extra":{"a":[1,{"b":null}]},"qty":3}`,
		`{"\u0069d":"e-3","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`,
		`{"ID":"e-3","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`,
		`{"id":"e-\u0033\n\"","type":"page_\u0076iew","user":"u\xff42","time":"2026-11-01T10:00:00\u002e5Z","url":"/\ud83d\ude00"}`,
		`{"id":"é😀<>&","type":"page_view","user":"u42","time":"2026-11-01T10:00:00.123456789+05:30","url":"/"}`,
		`{"id":"e","type":"page_view","user":"u42","time":"2026-11-01 10:00:00Z","url":"/"}`,
		`{"id":"e","type":"page_view","user":"u42","time":1,"url":"/"}`,
		`{"id":"e","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":null}`,
		`{"id":"e","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":""}`,
		`{"id":"e","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":["/"]}`,
		`{"id":"e","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z"}`,
		`{"id":"e","type":"teleport","user":"u42","time":"2026-11-01T10:00:00Z"}`,
		`{"id":"e","type":7,"user":"u42","time":"2026-11-01T10:00:00Z"}`,
		`{"id":"e","user":"u42","time":"2026-11-01T10:00:00Z"}`,
		`{"id":null,"type":"refund"}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":10000000000000}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":10000000000001}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":-1}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":-0}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":99999999999999999999}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":-99999999999999999999}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":1.0}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":1e3}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":"1"}`,
		`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":true}`,
		`{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":01}`,
		`{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":1,}`,
		`{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":1}}`,
		`{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":1`,
		`{"id":"e` + "\x01" + `","type":"page_view"}`,
		"\xef\xbb\xbf" + ok,
		`null`, `[]`, `"e"`, `1`, `{}`, ``, `{`, `nul`, `{"id" "e"}`, `{"id":"e" "type":"x"}`,
		`{"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	}
	for _, c := range cases {
		checkParse(t, []byte(c))
	}
	if _, ok := scanObject([]byte(cases[3])); !ok {
		t.Error("the scan left a plain event to encoding/json")
	}
}

func TestCodecGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		e := genEvent(rng)
		b := checkMarshal(t, e)
		if b == nil {
			continue
		}
		checkParse(t, b)
		for _, v := range jsonwiretest.Variants(rng, b) {
			checkParse(t, v)
		}
	}
}

func genEvent(rng *rand.Rand) Event {
	str := func() string {
		if rng.IntN(4) > 0 {
			return []string{"e-1", "u42", "sku-7", "/p/sku-7?a=1&b=2", "o-1", ""}[rng.IntN(6)]
		}
		alphabet := []string{"a", "Z", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\x00", "\x7f", "é", "😀", "\u2028", "\xff"}
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64N(10)
		case 1:
			return -rng.Int64N(10)
		case 2:
			return MaxAmountCents + rng.Int64N(3) - 1
		}
		return rng.Int64()
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("", -5*3600-30*60)}
	return Event{
		ID:   str(),
		Type: []Type{PageView, AddToCart, Purchase, Refund, "teleport"}[rng.IntN(5)],
		User: str(),
		Time: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(3)]),
		URL:  str(), SKU: str(), Order: str(),
		Qty: num(), PriceCents: num(), AmountCents: num(),
	}
}

// FuzzParseMatchesEncodingJSON: Parse reads every input as encoding/json
// reads it, with the same result and error text.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`))
	f.Add([]byte(` {"id":"e\u002d1", "type":"page_view","user":"u","time":"2026-11-01T10:00:00.5+01:00","url":null,"x":[{}]} `))
	f.Add([]byte(`{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":-1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}
