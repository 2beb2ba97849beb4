package declared_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var at = time.Date(2026, 11, 1, 10, 0, 7, 0, time.UTC)

// userPurchases is the shop's user_purchases_7d as its manifest declares it.
func userPurchases(t testing.TB) *declared.Program {
	t.Helper()
	return compile(t, declared.Spec{
		View:   "user_purchases_7d",
		Filter: map[string][]declared.Literal{"type": {literal(t, "purchase")}},
		Key:    declared.KeySpec{Column: "user", Type: "text", Field: "user"},
		Columns: []declared.ColumnSpec{
			{Name: "purchases_7d", Type: "bigint", Aggregate: declared.Count},
			{Name: "spent_cents_7d", Type: "bigint", Aggregate: declared.Sum, Value: declared.MustParseExpr("qty * price_cents")},
			{Name: "purchases_1d", Type: "bigint", Aggregate: declared.Count},
		},
	})
}

func compile(t testing.TB, spec declared.Spec) *declared.Program {
	t.Helper()
	p, err := declared.Compile(spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func literal(t testing.TB, v any) declared.Literal {
	t.Helper()
	l, err := declared.NewLiteral(v)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

const purchase = `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:07Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`

func TestUserPurchases(t *testing.T) {
	p := userPurchases(t).Transformation()
	cases := []struct {
		name  string
		event string
		want  []transform.Output
	}{
		{
			name:  "a purchase counts once in each window and adds its amount",
			event: purchase,
			want: []transform.Output{transform.Row("user_purchases_7d", "user", "u42").Apply(
				transform.Add("purchases_7d", int64(1)), transform.Add("spent_cents_7d", int64(3998)), transform.Add("purchases_1d", int64(1))).At(at)},
		},
		{
			name:  "another type is left out",
			event: `{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`,
		},
		{
			name:  "an event without the filter's field is left out",
			event: `{"user":"u42","qty":1,"price_cents":5}`,
		},
		{
			name:  "a filter value of another type is left out",
			event: `{"type":7,"user":"u42","qty":1,"price_cents":5}`,
		},
		{
			name:  "fields the view does not name are ignored",
			event: `{"type":"purchase","user":"u7","qty":1,"price_cents":5,"coupon":{"code":"x"}}`,
			want: []transform.Output{transform.Row("user_purchases_7d", "user", "u7").Apply(
				transform.Add("purchases_7d", 1), transform.Add("spent_cents_7d", 5), transform.Add("purchases_1d", 1)).At(at)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			transformtest.Expect(t, p, transform.Message{Key: "u42", EventTime: at, Payload: []byte(tc.event)}, tc.want...)
		})
	}
}

func TestColumnsOfEveryType(t *testing.T) {
	p := compile(t, declared.Spec{
		View: "skus",
		Key:  declared.KeySpec{Column: "sku", Type: "bigint", Field: "sku"},
		Columns: []declared.ColumnSpec{
			{Name: "cheapest", Type: "int", Aggregate: declared.Min, Value: declared.MustParseExpr("price")},
			{Name: "dearest", Type: "double", Aggregate: declared.Max, Value: declared.MustParseExpr("price")},
			{Name: "weight", Type: "double", Aggregate: declared.Sum, Value: declared.MustParseExpr("kg")},
			{Name: "first_seen", Type: "timestamp", Aggregate: declared.Min, Value: declared.MustParseExpr("time")},
			{Name: "last_name", Type: "text", Aggregate: declared.Last, Value: declared.MustParseExpr("name")},
			{Name: "in_stock", Type: "boolean", Aggregate: declared.Last, Value: declared.MustParseExpr("stock")},
			{Name: "refunded", Type: "bigint", Aggregate: declared.Sum, Value: declared.MustParseExpr("-amount")},
			{Name: "avg_kg", Type: "double", Aggregate: declared.Avg, Value: declared.MustParseExpr("kg")},
			{Name: "avg_cents", Type: "double", Aggregate: declared.Avg, Value: declared.MustParseExpr("price * 2")},
		},
	}).Transformation()
	event := `{"sku":17,"price":250,"kg":0.5,"time":"2026-11-01T09:00:00.5+01:00","name":"Mug","stock":true,"amount":40}`
	transformtest.Expect(t, p, transform.Message{Key: "k", EventTime: at, Payload: []byte(event)},
		transform.Row("skus", "sku", int64(17)).Apply(
			transform.Min("cheapest", int64(250)), transform.Max("dearest", 250.0), transform.Add("weight", 0.5),
			transform.Min("first_seen", time.Date(2026, 11, 1, 8, 0, 0, 500_000_000, time.UTC)),
			transform.Latest("last_name", "Mug"), transform.Latest("in_stock", true), transform.Add("refunded", int64(-40)),
			transform.Add("avg_kg_sum", 0.5), transform.Add("avg_kg_count", int64(1)),
			transform.Add("avg_cents_sum", int64(500)), transform.Add("avg_cents_count", int64(1))).At(at))
}

func TestFilterOnSeveralFieldsAndValues(t *testing.T) {
	p := compile(t, declared.Spec{
		View:   "carts",
		Filter: map[string][]declared.Literal{"type": {literal(t, "add_to_cart"), literal(t, "purchase")}, "qty": {literal(t, 1)}, "gift": {literal(t, false)}},
		Key:    declared.KeySpec{Column: "user", Type: "text", Field: "user"},
		Columns: []declared.ColumnSpec{
			{Name: "singles", Type: "bigint", Aggregate: declared.Count},
		},
	}).Transformation()
	cases := []struct {
		event string
		keeps bool
	}{
		{`{"type":"add_to_cart","qty":1,"gift":false,"user":"u"}`, true},
		{`{"type":"purchase","qty":1,"gift":false,"user":"u"}`, true},
		{`{"type":"refund","qty":1,"gift":false,"user":"u"}`, false},
		{`{"type":"purchase","qty":2,"gift":false,"user":"u"}`, false},
		{`{"type":"purchase","qty":1.0,"gift":false,"user":"u"}`, false},
		{`{"type":"purchase","qty":"1","gift":false,"user":"u"}`, false},
		{`{"type":"purchase","qty":1,"gift":true,"user":"u"}`, false},
		{`{"type":"purchase","qty":1,"gift":null,"user":"u"}`, false},
		{`{"type":"purchase","qty":1,"user":"u"}`, false},
		{`{"type":"pur\u0063hase","qty":1,"gift":false,"user":"u"}`, true},
	}
	for _, tc := range cases {
		recs, err := p.Process(transform.Message{EventTime: at, Payload: []byte(tc.event)})
		if err != nil || (len(recs) == 1) != tc.keeps {
			t.Errorf("%s: %d outputs, error %v; want kept %v", tc.event, len(recs), err, tc.keeps)
		}
	}
}

// TestBadEventsAreMalformed: an event the filter keeps but that does not
// fit the spec is an error matching transform.ErrMalformed, whose text
// (the dead-letter reason) names the column and the field.
func TestBadEventsAreMalformed(t *testing.T) {
	p := userPurchases(t).Transformation()
	cases := []struct {
		name, event string
		noTime      bool
		want        string
	}{
		{name: "a value's field is missing", event: `{"type":"purchase","user":"u1","qty":2}`,
			want: "column spent_cents_7d: field price_cents is missing"},
		{name: "null counts as missing", event: `{"type":"purchase","user":"u1","qty":2,"price_cents":null}`,
			want: "column spent_cents_7d: field price_cents is missing"},
		{name: "a value's field has another type", event: `{"type":"purchase","user":"u1","qty":"2","price_cents":5}`,
			want: "column spent_cents_7d: field qty is a string, want an integer"},
		{name: "a fraction is not an integer", event: `{"type":"purchase","user":"u1","qty":2.5,"price_cents":5}`,
			want: "column spent_cents_7d: field qty is a number with a fraction or exponent, want an integer"},
		{name: "an integer out of range", event: `{"type":"purchase","user":"u1","qty":99999999999999999999,"price_cents":5}`,
			want: "column spent_cents_7d: field qty is an integer out of the 64-bit range"},
		{name: "the value overflows", event: `{"type":"purchase","user":"u1","qty":9223372036854775807,"price_cents":2}`,
			want: "column spent_cents_7d: qty * price_cents overflows a 64-bit integer"},
		{name: "the key is missing", event: `{"type":"purchase","qty":2,"price_cents":5}`,
			want: "key user: field user is missing"},
		{name: "the key is empty", event: `{"type":"purchase","user":"","qty":2,"price_cents":5}`,
			want: "key user: field user is empty, which keys no row"},
		{name: "every problem at once", event: `{"type":"purchase","user":5,"qty":2}`,
			want: "key user: field user is a number, want a string; column spent_cents_7d: field price_cents is missing"},
		{name: "no event time", event: purchase, noTime: true,
			want: "the message has no event time"},
		{name: "not an object", event: `["purchase"]`,
			want: "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := transform.Message{Key: "u1", EventTime: at, Payload: []byte(tc.event)}
			if tc.noTime {
				m.EventTime = time.Time{}
			}
			recs, err := p.Process(m)
			if !errors.Is(err, transform.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Process = %d records, %v; want transform.ErrMalformed containing %q", len(recs), err, tc.want)
			}
		})
	}
}

func TestRangeOfTheColumnType(t *testing.T) {
	p := compile(t, declared.Spec{
		View: "v", Key: declared.KeySpec{Column: "k", Type: "ascii", Field: "k"},
		Columns: []declared.ColumnSpec{{Name: "small", Type: "tinyint", Aggregate: declared.Max, Value: declared.MustParseExpr("n * 2")}},
	})
	for event, want := range map[string]string{
		`{"k":"a","n":64}`:  "column small: n * 2 is 128, out of the range of tinyint",
		`{"k":"é","n":1}`:   "key k: field k holds a non-ASCII character",
		`{"k":"a","n":-64}`: "",
	} {
		_, err := p.Read([]byte(event))
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("Read(%s) = %v, want %q", event, err, want)
		}
	}
}

func TestReadReportsEveryFieldForLint(t *testing.T) {
	_, err := userPurchases(t).Read([]byte(`{"type":"purchase","qty":"2"}`))
	var fes declared.FieldErrors
	if !errors.As(err, &fes) || len(fes) != 2 {
		t.Fatalf("Read error = %v, want 2 FieldErrors", err)
	}
	if fes[0].Column != -1 || fes[0].Field != "user" || !fes[0].Missing {
		t.Errorf("first problem = %+v, want the key's missing field user", *fes[0])
	}
	if fes[1].Column != 1 || fes[1].Field != "qty" || fes[1].Missing {
		t.Errorf("second problem = %+v, want column 1's field qty of another type", *fes[1])
	}
}

func TestContract(t *testing.T) {
	transformtest.Run(t, userPurchases(t).Transformation(),
		transform.Message{Key: "u42", EventTime: at, Payload: []byte(purchase)},
		transform.Message{Key: "u42", EventTime: at, Payload: []byte(`{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`)})
}

func TestSpecRoundTripsThroughTheUserConfig(t *testing.T) {
	spec := userPurchases(t).Spec()
	spec.Filter["big"] = []declared.Literal{literal(t, int64(1)<<62+1), literal(t, true)}
	text, err := spec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p, err := declared.FromUserConfig(map[string]any{declared.UserConfigSpec: text})
	if err != nil {
		t.Fatalf("FromUserConfig: %v", err)
	}
	again, _ := p.Spec().Encode()
	if again != text {
		t.Errorf("the spec changed on its way:\n%s\n%s", text, again)
	}
	if !strings.Contains(text, `"big":[4611686018427387905,true]`) {
		t.Errorf("a large integer lost its digits: %s", text)
	}
}

func TestFromUserConfigRefuses(t *testing.T) {
	cases := []struct {
		name string
		uc   map[string]any
		want string
	}{
		{name: "no spec", uc: map[string]any{}, want: "key declaredView: want the declared view's spec as JSON text"},
		{name: "not JSON", uc: map[string]any{declared.UserConfigSpec: "{"}, want: "reading the declared view's spec"},
		{name: "an unknown field", uc: map[string]any{declared.UserConfigSpec: `{"view":"v","sauce":1}`}, want: `unknown field "sauce"`},
		{name: "a float in a filter", uc: map[string]any{declared.UserConfigSpec: `{"view":"v","filter":{"x":[1.5]}}`}, want: "filter value 1.5"},
		{name: "an invalid spec", uc: map[string]any{declared.UserConfigSpec: `{"view":"v","key":{"column":"k","type":"text","field":"k"},"columns":[{"name":"c","type":"text","aggregate":"sum","value":"x"}]}`},
			want: "columns[0].type: text: sum folds into a number column"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := declared.FromUserConfig(tc.uc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromUserConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	key := declared.KeySpec{Column: "user", Type: "text", Field: "user"}
	col := func(typ string, a declared.Aggregate, value string) []declared.ColumnSpec {
		c := declared.ColumnSpec{Name: "c", Type: typ, Aggregate: a}
		if value != "" {
			c.Value = declared.MustParseExpr(value)
		}
		return []declared.ColumnSpec{c}
	}
	cases := []struct {
		name string
		spec declared.Spec
		want []string
	}{
		{name: "valid", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", declared.Sum, "qty")}},
		{name: "nothing", spec: declared.Spec{}, want: []string{"view: missing", "key.column: missing", `key.type: "": a declared view's key is`, "key.field: missing", "columns: missing"}},
		{name: "a key of another type", spec: declared.Spec{View: "v", Key: declared.KeySpec{Column: "k", Type: "timestamp", Field: "k"}, Columns: col("bigint", declared.Count, "")},
			want: []string{`key.type: "timestamp"`}},
		{name: "a key field that is no field name", spec: declared.Spec{View: "v", Key: declared.KeySpec{Column: "k", Type: "text", Field: "a.b"}, Columns: col("bigint", declared.Count, "")},
			want: []string{`key.field: "a.b": want a field name`}},
		{name: "a filter field that is no field name", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", declared.Count, ""), Filter: map[string][]declared.Literal{"1x": nil}},
			want: []string{`filter.1x: "1x": want a field name`, "filter.1x: no value"}},
		{name: "no aggregate", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", "", "")},
			want: []string{"columns[0].aggregate: missing: say how events fold into column c (count, sum, min, max, last, avg)"}},
		{name: "an unknown aggregate", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", "mean", "qty")},
			want: []string{`columns[0].aggregate: "mean": want count, sum, min, max, last, avg`}},
		{name: "an avg", spec: declared.Spec{View: "v", Key: key, Columns: col("double", declared.Avg, "qty * price_cents")}},
		{name: "an avg into an integer", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", declared.Avg, "qty")},
			want: []string{"columns[0].type: bigint: avg is a fraction, read as a double"}},
		{name: "an avg into a float", spec: declared.Spec{View: "v", Key: key, Columns: col("float", declared.Avg, "qty")},
			want: []string{"columns[0].type: float: avg is a fraction, read as a double"}},
		{name: "an avg without a value", spec: declared.Spec{View: "v", Key: key, Columns: col("double", declared.Avg, "")},
			want: []string{"columns[0].value: missing: avg needs the event field"}},
		{name: "a count with a value", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", declared.Count, "qty")},
			want: []string{"columns[0].value: qty: count adds 1 per event and takes no value"}},
		{name: "a sum without a value", spec: declared.Spec{View: "v", Key: key, Columns: col("bigint", declared.Sum, "")},
			want: []string{"columns[0].value: missing: sum needs the event field"}},
		{name: "a sum of text", spec: declared.Spec{View: "v", Key: key, Columns: col("text", declared.Sum, "url")},
			want: []string{"columns[0].type: text: sum folds into a number column"}},
		{name: "a max of a boolean", spec: declared.Spec{View: "v", Key: key, Columns: col("boolean", declared.Max, "ok")},
			want: []string{"columns[0].type: boolean: max of a boolean"}},
		{name: "arithmetic on a timestamp", spec: declared.Spec{View: "v", Key: key, Columns: col("timestamp", declared.Last, "time + 1")},
			want: []string{"columns[0].value: time + 1: a timestamp column takes one event field"}},
		{name: "a type declared views do not take", spec: declared.Spec{View: "v", Key: key, Columns: col("uuid", declared.Last, "id")},
			want: []string{`columns[0].type: "uuid": a declared column is one of`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, declared.ErrInvalidSpec) {
				t.Fatalf("Validate = %v, want ErrInvalidSpec", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("Validate gave %d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], want)
				}
			}
		})
	}
}

func TestAggregateImpliesTheMerge(t *testing.T) {
	for a, want := range map[declared.Aggregate]string{declared.Count: "add", declared.Sum: "add", declared.Min: "min", declared.Max: "max", declared.Last: "latest", declared.Avg: "add", "mean": ""} {
		if got := string(a.Merge()); got != want {
			t.Errorf("%s.Merge() = %q, want %q", a, got, want)
		}
	}
}
