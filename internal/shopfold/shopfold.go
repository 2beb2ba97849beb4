// Package shopfold folds raw shop events (JSON lines, in ledger order)
// straight into the rows that the shop views must hold: user_activity,
// product_sales, sku_refunds (each valid refund against the sku of its
// order's last valid purchase before it in the ledger; a refund of an order
// with none is not counted, and listed), and sku_page_views_before (each
// valid purchase with the valid page views of its user before it in the
// ledger). It is the
// independent side of every check of the shop pipeline: it shares no code
// with the transformations, the event parser or the merge rules, and does
// its own validation from the rules in the shop package's documentation, so
// that a bug in either side shows up as a difference.
//
// Rows use CQL-friendly Go types: int64 for bigint, time.Time for timestamp,
// string for text. A zero value stands for a column that no event touched,
// which a view holds as null (a user who never viewed a page has no
// page_views and no last_url).
package shopfold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// UserActivityRow is a row of view user_activity.
type UserActivityRow struct {
	PageViews  int64
	CartUnits  int64
	Purchases  int64
	SpentCents int64
	LastSeen   time.Time
	LastURL    string
}

// ProductSalesRow is a row of view product_sales.
type ProductSalesRow struct {
	Units        int64
	RevenueCents int64
	Orders       int64
}

// SkuRefundsRow is a row of view sku_refunds: the refunds of the orders
// of a sku.
type SkuRefundsRow struct {
	Refunds       int64
	RefundedCents int64
}

// SkuPageViewsBeforeRow is a row of view sku_page_views_before: the
// purchases of a sku and, summed over them, the page views each purchase's
// user had made before it.
type SkuPageViewsBeforeRow struct {
	Purchases       int64
	PageViewsBefore int64
}

// Result is the state of the views after the lines folded so far.
type Result struct {
	// UserActivity is view user_activity by user.
	UserActivity map[string]UserActivityRow
	// ProductSales is view product_sales by sku.
	ProductSales map[string]ProductSalesRow
	// SkuRefunds is view sku_refunds by sku: each valid refund counts
	// against the sku of the last valid purchase of its order before it.
	SkuRefunds map[string]SkuRefundsRow
	// SkuPageViewsBefore is view sku_page_views_before by sku.
	SkuPageViewsBefore map[string]SkuPageViewsBeforeRow
	// UnknownOrders lists the 0-based numbers of the valid refunds whose
	// order no valid purchase preceded, in order: sku_refunds has none of
	// them.
	UnknownOrders []int
	// Accepted counts the valid events.
	Accepted int
	// Rejected lists the 0-based numbers of the lines rejected, in order.
	Rejected []int
	// Duplicates lists the 0-based numbers of the lines a distinct fold
	// (NewDistinctFolder) skipped as events seen before, in order.
	Duplicates []int
}

// ErrRejected is matched by the error Add returns for an invalid event.
var ErrRejected = errors.New("event rejected")

// Bounds of quantities and amounts, as the shop's event rules state them.
const (
	maxQty         = 1_000_000
	maxPriceCents  = 10_000_000_000
	maxAmountCents = 10_000_000_000_000
)

// Folder folds events one line at a time. The zero value is not ready; use
// NewFolder.
type Folder struct {
	res  Result
	line int
	// purchases are the valid purchase events, in ledger order.
	purchases []Purchase
	// skuOf is each order's sku, as its last valid purchase gave it.
	skuOf map[string]string
	// seen holds, in a distinct fold, the events seen: user and id.
	seen map[identity]bool
}

// identity is what makes an event the same event again: the user it is
// about and its id.
type identity struct{ user, id string }

// NewFolder returns a folder with empty views.
func NewFolder() *Folder {
	return &Folder{res: Result{
		UserActivity: map[string]UserActivityRow{},
		ProductSales: map[string]ProductSalesRow{},
		SkuRefunds:   map[string]SkuRefundsRow{},

		SkuPageViewsBefore: map[string]SkuPageViewsBeforeRow{},
	}, skuOf: map[string]string{}}
}

// NewDistinctFolder returns a folder that folds each event once, as a
// ledger with event ids does (the shop's tenant names id as its eventId):
// a line with the user and id of an earlier line is skipped before it is
// judged, whether that earlier line was valid or not. A line's user is its
// "user" member when that is a string ("" otherwise); its id is its "id"
// member, a string or a number as written. A line without such an id
// (not a JSON object, no id, an id of another type) is never skipped.
func NewDistinctFolder() *Folder {
	f := NewFolder()
	f.seen = map[identity]bool{}
	return f
}

// Fold folds all lines from empty views.
func Fold(lines [][]byte) Result {
	return foldWith(NewFolder(), lines)
}

// FoldDistinct folds all lines from empty views, each event once
// (NewDistinctFolder).
func FoldDistinct(lines [][]byte) Result {
	return foldWith(NewDistinctFolder(), lines)
}

func foldWith(f *Folder, lines [][]byte) Result {
	for _, l := range lines {
		_ = f.Add(l) // a rejected line is recorded in Result.Rejected
	}
	return f.Result()
}

// Purchases returns the valid purchase events folded so far, in ledger
// order (for the windowed views, see window.go). The slice is the
// folder's own.
func (f *Folder) Purchases() []Purchase { return f.purchases }

// ErrDuplicate is matched by the error Add returns for a line a distinct
// fold skips.
var ErrDuplicate = errors.New("event seen before")

// duplicate reports whether a distinct fold has seen line's event, and
// records it when not.
func (f *Folder) duplicate(line []byte) bool {
	if f.seen == nil {
		return false
	}
	var ev map[string]json.RawMessage
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	var id identity
	_ = json.Unmarshal(ev["user"], &id.user) // not a string: ""
	raw := bytes.TrimSpace(ev["id"])
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if json.Unmarshal(raw, &id.id) != nil {
			return false
		}
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		id.id = string(raw)
	default:
		return false
	}
	if f.seen[id] {
		return true
	}
	f.seen[id] = true
	return false
}

// Result returns the views so far. The maps are the folder's own: do not
// change them, and do not Add while reading them.
func (f *Folder) Result() Result { return f.res }

// Add folds one line. An invalid event leaves the views as they were, is
// listed in Result.Rejected, and returns an error matching ErrRejected.
func (f *Folder) Add(line []byte) error {
	n := f.line
	f.line++
	if f.duplicate(line) {
		f.res.Duplicates = append(f.res.Duplicates, n)
		return fmt.Errorf("line %d: %w", n+1, ErrDuplicate)
	}
	if err := f.add(line); err != nil {
		f.res.Rejected = append(f.res.Rejected, n)
		return fmt.Errorf("line %d: %w: %w", n+1, ErrRejected, err)
	}
	f.res.Accepted++
	return nil
}

func (f *Folder) add(line []byte) error {
	rd := bytes.NewReader(line)
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), rd)) // reading memory cannot fail
	if len(bytes.Trim(rest, " \t\r\n")) > 0 {                 // JSON's whitespace, no other
		return errors.New("trailing data after the event")
	}
	ev, ok := raw.(map[string]any)
	if !ok {
		return errors.New("not an object")
	}
	v := &fieldReader{ev: ev}
	v.str("id")
	typ, user, at := v.str("type"), v.str("user"), v.timestamp("time")
	var apply func()
	switch typ {
	case "page_view":
		url := v.str("url")
		apply = func() {
			r := f.res.UserActivity[user]
			r.PageViews++
			r.LastURL = url
			f.res.UserActivity[user] = seen(r, at)
		}
	case "add_to_cart":
		v.str("sku")
		qty := v.count("qty", maxQty)
		apply = func() {
			r := f.res.UserActivity[user]
			r.CartUnits += qty
			f.res.UserActivity[user] = seen(r, at)
		}
	case "purchase":
		order := v.str("order")
		sku, qty, price := v.str("sku"), v.count("qty", maxQty), v.count("price_cents", maxPriceCents)
		apply = func() {
			r := f.res.UserActivity[user]
			// r.PageViews: the user's valid page views before this
			// purchase, in ledger order.
			f.purchases = append(f.purchases, Purchase{User: user, SKU: sku, Qty: qty, PriceCents: price, Time: at, PageViewsBefore: r.PageViews})
			f.skuOf[order] = sku
			b := f.res.SkuPageViewsBefore[sku]
			b.Purchases++
			b.PageViewsBefore += r.PageViews
			f.res.SkuPageViewsBefore[sku] = b
			r.Purchases++
			r.SpentCents += qty * price
			f.res.UserActivity[user] = seen(r, at)
			p := f.res.ProductSales[sku]
			p.Units += qty
			p.RevenueCents += qty * price
			p.Orders++
			f.res.ProductSales[sku] = p
		}
	case "refund":
		order := v.str("order")
		amount := v.count("amount_cents", maxAmountCents)
		apply = func() {
			r := f.res.UserActivity[user]
			r.SpentCents -= amount
			f.res.UserActivity[user] = seen(r, at)
			sku, known := f.skuOf[order]
			if !known {
				f.res.UnknownOrders = append(f.res.UnknownOrders, f.line-1)
				return
			}
			s := f.res.SkuRefunds[sku]
			s.Refunds++
			s.RefundedCents += amount
			f.res.SkuRefunds[sku] = s
		}
	default:
		if v.err == nil {
			return fmt.Errorf("unknown type %q", typ)
		}
	}
	if v.err != nil {
		return v.err
	}
	apply()
	return nil
}

func seen(r UserActivityRow, at time.Time) UserActivityRow {
	if at.After(r.LastSeen) {
		r.LastSeen = at
	}
	return r
}

// fieldReader reads an event's members, keeping the first problem met.
type fieldReader struct {
	ev  map[string]any
	err error
}

func (r *fieldReader) fail(name, problem string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s %s", name, problem)
	}
}

// str reads a required non-empty string.
func (r *fieldReader) str(name string) string {
	switch s := r.ev[name].(type) {
	case nil:
		r.fail(name, "is missing")
	case string:
		if s == "" {
			r.fail(name, "is empty")
		}
		return s
	default:
		r.fail(name, "is not a string")
	}
	return ""
}

func (r *fieldReader) timestamp(name string) time.Time {
	s := r.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		r.fail(name, "is not an RFC 3339 time")
	}
	if y := t.UTC().Year(); err == nil && (y < 0 || y > 9999) {
		r.fail(name, "is outside the years 0000-9999 in UTC")
	}
	return t.UTC()
}

// count reads a required whole number in [0, limit].
func (r *fieldReader) count(name string, limit int64) int64 {
	switch n := r.ev[name].(type) {
	case nil:
		r.fail(name, "is missing")
	case json.Number:
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 || v > limit {
			r.fail(name, "is not a whole number between 0 and "+strconv.FormatInt(limit, 10))
			return 0
		}
		return v
	default:
		r.fail(name, "is not a number")
	}
	return 0
}
