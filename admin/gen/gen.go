// Package gen generates the shop example's events as JSON lines, for the
// demo, the tests and the benchmarks: `foldline gen`.
//
// The stream looks like a real shop's: a few heavy users and best-selling
// skus (Zipf-distributed), refunds only of orders purchased earlier in the
// stream, event times that drift slightly out of order, and a configurable
// share of malformed lines of every kind the validate stage rejects. It is
// deterministic: the same Options give byte-identical output, on any machine
// and Go version, because it draws from its own PCG stream and never from a
// library's sampling helpers.
package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Options say what to generate. Zero fields take the defaults shown.
type Options struct {
	// Events is the number of lines to write (default 1000).
	Events int
	// Users is the number of distinct users (default 1000).
	Users int
	// SKUs is the number of distinct products (default 100).
	SKUs int
	// Seed picks the stream; the same seed gives the same bytes (default 0).
	Seed uint64
	// Malformed is the share of lines, in [0, 1], that are malformed events
	// (default 0: none; the CLI's default is 0.01).
	Malformed float64
	// Start is the time of the first event (default 2026-11-01T00:00:00Z).
	Start time.Time
	// End, when set, is the time of the last event instead: Start is then
	// End less the events' intervals. Windowed views keep the recent past
	// only (tiles expire a window after their start), so a stream to see in
	// them ends near now.
	End time.Time
	// Interval is the mean time between two events (default 100ms).
	Interval time.Duration
	// Jitter moves each event time by up to ± this much, which puts events
	// slightly out of order (default 2s).
	Jitter time.Duration
	// IDPrefix goes before every event id and order id (default none:
	// e-1, o-1, …). Event ids are unique within a stream, and a ledger
	// counts an event once per id and user: streams of different seeds
	// published to one ledger need prefixes of their own.
	IDPrefix string
}

// Defaults of Options.
var (
	DefaultStart    = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	DefaultInterval = 100 * time.Millisecond
	DefaultJitter   = 2 * time.Second
)

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Events == 0 {
		o.Events = 1000
	}
	if o.Users == 0 {
		o.Users = 1000
	}
	if o.SKUs == 0 {
		o.SKUs = 100
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if !o.End.IsZero() {
		o.Start = o.End.Add(-time.Duration(o.Events-1) * o.Interval)
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	if o.Jitter == 0 {
		o.Jitter = DefaultJitter
	}
	return o
}

// Validate returns every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Events < 0 {
		errs = append(errs, fmt.Errorf("events: must be >= 0, got %d", o.Events))
	}
	if o.Users < 0 {
		errs = append(errs, fmt.Errorf("users: must be >= 0, got %d", o.Users))
	}
	if o.SKUs < 0 {
		errs = append(errs, fmt.Errorf("skus: must be >= 0, got %d", o.SKUs))
	}
	if !(o.Malformed >= 0 && o.Malformed <= 1) {
		errs = append(errs, fmt.Errorf("malformed: must be a share between 0 and 1, got %v", o.Malformed))
	}
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval: must be >= 0, got %v", o.Interval))
	}
	if o.Jitter < 0 {
		errs = append(errs, fmt.Errorf("jitter: must be >= 0, got %v", o.Jitter))
	}
	return errors.Join(errs...)
}

// Stats counts what Generate wrote.
type Stats struct {
	Lines      int
	PageViews  int
	AddToCarts int
	Purchases  int
	Refunds    int
	Malformed  int
}

// Generate writes o.Events JSON lines to w.
func Generate(w io.Writer, o Options) (Stats, error) {
	if err := o.Validate(); err != nil {
		return Stats{}, fmt.Errorf("checking options: %w", err)
	}
	o = o.withDefaults()
	g := newGenerator(o)
	bw := bufio.NewWriterSize(w, 1<<20)
	for i := range o.Events {
		g.buf = g.event(g.buf[:0], i)
		g.buf = append(g.buf, '\n')
		if _, err := bw.Write(g.buf); err != nil {
			return g.stats, fmt.Errorf("writing event %d: %w", i+1, err)
		}
		g.stats.Lines++
	}
	if err := bw.Flush(); err != nil {
		return g.stats, fmt.Errorf("writing events: %w", err)
	}
	return g.stats, nil
}

// Shares of the event types among well-formed events (refunds fall back to
// page views while no order is left to refund).
const (
	sharePageView  = 0.55
	shareAddToCart = 0.20
	sharePurchase  = 0.17
)

// zipfExponent gives a few heavy users and best sellers, and a long tail.
const zipfExponent = 1.1

type order struct {
	id, user string
	total    int64
	at       time.Time
}

type generator struct {
	o      Options
	rng    *rand.PCG
	users  *zipf
	skus   *zipf
	open   []order // purchases not refunded yet
	orders int
	stats  Stats
	buf    []byte
	fields []field
}

func newGenerator(o Options) *generator {
	return &generator{
		o:     o,
		rng:   rand.NewPCG(o.Seed, 0x5eed_f01d_11e),
		users: newZipf(max(o.Users, 1)),
		skus:  newZipf(max(o.SKUs, 1)),
	}
}

// float returns a uniform number in [0, 1) from the generator's own stream.
func (g *generator) float() float64 { return float64(g.rng.Uint64()>>11) / (1 << 53) }

// intn returns a uniform number in [0, n); the modulo bias is negligible for
// the small n used here.
func (g *generator) intn(n int) int { return int(g.rng.Uint64() % uint64(n)) }

func (g *generator) user() string { return "u" + strconv.Itoa(g.users.sample(g.float())+1) }

func (g *generator) sku() (string, int64) {
	k := g.skus.sample(g.float()) + 1
	return "sku-" + strconv.Itoa(k), priceOf(k)
}

// priceOf gives each sku a fixed price between 1.99 and 499.99.
func priceOf(k int) int64 { return 199 + int64(k*7919%49800) }

func (g *generator) qty() int64 {
	if g.float() < 0.05 {
		return 1 + int64(g.intn(20))
	}
	return 1 + int64(g.intn(3))
}

// timeOf returns event i's time: on schedule, jittered, at millisecond
// precision (what a CQL timestamp keeps), sometimes at whole seconds.
func (g *generator) timeOf(i int) time.Time {
	t := g.o.Start.Add(time.Duration(i) * g.o.Interval)
	if g.o.Jitter > 0 {
		t = t.Add(time.Duration(g.intn(int(2*g.o.Jitter/time.Millisecond)+1))*time.Millisecond - g.o.Jitter)
	}
	if g.float() < 0.3 {
		return t.Truncate(time.Second)
	}
	return t.Truncate(time.Millisecond)
}

// field is one JSON member of an event line, kept as a list so that
// malformed lines can drop or retype a member.
type field struct {
	name  string
	str   string
	num   int64
	isNum bool
}

func text(name, v string) field      { return field{name: name, str: v} }
func num(name string, v int64) field { return field{name: name, num: v, isNum: true} }

func timeText(t time.Time) string {
	if t.Nanosecond() == 0 {
		return t.UTC().Format("2006-01-02T15:04:05Z07:00")
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// event appends line i to b.
func (g *generator) event(b []byte, i int) []byte {
	malformed := g.o.Malformed > 0 && g.float() < g.o.Malformed
	at := g.timeOf(i)
	user := g.user()
	g.fields = append(g.fields[:0], text("id", g.o.IDPrefix+"e-"+strconv.Itoa(i+1)), field{}, text("user", user), text("time", timeText(at)))
	const typeField = 1
	u := g.float()
	switch {
	case u < sharePageView || (u >= sharePageView+shareAddToCart+sharePurchase && len(g.open) == 0 && !malformed):
		g.fields[typeField] = text("type", "page_view")
		g.fields = append(g.fields, text("url", g.url()))
		if !malformed {
			g.stats.PageViews++
		}
	case u < sharePageView+shareAddToCart:
		sku, _ := g.sku()
		g.fields[typeField] = text("type", "add_to_cart")
		g.fields = append(g.fields, text("sku", sku), num("qty", g.qty()))
		if !malformed {
			g.stats.AddToCarts++
		}
	case u < sharePageView+shareAddToCart+sharePurchase || malformed:
		// A malformed line is never a refund: refunds only name orders that
		// a well-formed purchase opened.
		g.orders++
		id := g.o.IDPrefix + "o-" + strconv.Itoa(g.orders)
		sku, price := g.sku()
		qty := g.qty()
		g.fields[typeField] = text("type", "purchase")
		g.fields = append(g.fields, text("order", id), text("sku", sku), num("qty", qty), num("price_cents", price))
		if !malformed {
			g.open = append(g.open, order{id: id, user: user, total: qty * price, at: at})
			g.stats.Purchases++
		}
	default:
		j := g.intn(len(g.open))
		o := g.open[j]
		g.open[j] = g.open[len(g.open)-1]
		g.open = g.open[:len(g.open)-1]
		if !at.After(o.at) {
			at = o.at.Add(time.Second)
		}
		amount := o.total
		if o.total > 0 && g.float() < 0.3 {
			amount = 1 + int64(g.intn(int(o.total)))
		}
		g.fields[2], g.fields[3] = text("user", o.user), text("time", timeText(at))
		g.fields[typeField] = text("type", "refund")
		g.fields = append(g.fields, text("order", o.id), num("amount_cents", amount))
		g.stats.Refunds++
	}
	if !malformed {
		return appendObject(b, g.fields)
	}
	g.stats.Malformed++
	return g.corrupt(b)
}

func (g *generator) url() string {
	switch u := g.float(); {
	case u < 0.7:
		sku, _ := g.sku()
		return "/p/" + sku
	case u < 0.9:
		return "/"
	default:
		return "/cart"
	}
}

// The kinds of malformed line, each one a reason the validate stage gives.
const (
	badJSON = iota
	unknownType
	missingField
	wrongType
	negativeQty
	negativePrice
	badTime
	malformedKinds
)

// corrupt appends the event in g.fields, broken in one way.
func (g *generator) corrupt(b []byte) []byte {
	f := g.fields
	switch g.intn(malformedKinds) {
	case badJSON:
		start := len(b)
		b = appendObject(b, f)
		return b[:start+1+g.intn(len(b)-start-1)] // a strict prefix of an object is never JSON
	case unknownType:
		f[1].str = []string{"teleport", "checkout", "PageView", "page view"}[g.intn(4)]
	case missingField:
		drop := g.intn(len(f))
		f = slices.Delete(f, drop, drop+1)
	case wrongType:
		k := g.intn(len(f))
		if f[k].isNum {
			f[k] = text(f[k].name, strconv.FormatInt(f[k].num, 10))
		} else {
			f[k] = num(f[k].name, int64(len(f[k].str)))
		}
	case negativeQty, negativePrice:
		for k := range f {
			if f[k].isNum {
				f[k].num = -1 - f[k].num
				if g.intn(2) == 0 {
					break // sometimes only qty
				}
			}
		}
		if f[1].str == "page_view" {
			f = append(f, num("qty", -1))
			f[1].str = "add_to_cart"
			f = slices.Insert(f, len(f)-1, text("sku", "sku-1"))
			f = slices.Delete(f, 4, 5) // the url
		}
	case badTime:
		f[3].str = []string{"yesterday", "2026-11-01 10:00:00", "1/11/2026", "2026-11-01T25:00:00Z"}[g.intn(4)]
	}
	return appendObject(b, f)
}

// appendObject writes the fields as a JSON object. Every string the
// generator makes is plain ASCII without quotes or backslashes, so quoting
// needs no escaping.
func appendObject(b []byte, fields []field) []byte {
	b = append(b, '{')
	for k, f := range fields {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.name...)
		b = append(b, '"', ':')
		if f.isNum {
			b = strconv.AppendInt(b, f.num, 10)
		} else {
			b = append(b, '"')
			b = append(b, f.str...)
			b = append(b, '"')
		}
	}
	return append(b, '}')
}

// zipf samples ranks 0..n-1 with probability proportional to 1/(rank+1)^s.
type zipf struct{ cdf []float64 }

func newZipf(n int) *zipf {
	cdf := make([]float64, n)
	sum := 0.0
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), zipfExponent)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return &zipf{cdf: cdf}
}

func (z *zipf) sample(u float64) int {
	k, _ := slices.BinarySearch(z.cdf, u)
	return min(k, len(z.cdf)-1)
}
