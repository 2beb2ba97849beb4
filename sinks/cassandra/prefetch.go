package cassandra

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// exactKeyTypes are the key types whose values come back from Cassandra
// exactly as operations carry them, so that a row read ahead is matched to
// its operations by key. (A timestamp, say, comes back at millisecond
// precision: such views are not read ahead, rather than risk taking an
// existing row for a missing one.)
var exactKeyTypes = map[string]bool{"text": true, "ascii": true, "bigint": true, "int": true, "smallint": true, "tinyint": true, "uuid": true}

// prefetchStatement is the read of many rows by key (IN) for a view whose
// key is one column of an exact type, and "" for other views. A windowed
// view's rows are read a tile at a time: the entities IN the list, the tile
// equal (a live stream's new rows are mostly the current hop's tiles).
func prefetchStatement(s ViewSchema) string {
	if len(s.Key) != 1 {
		return ""
	}
	t, ok := lookupType(s.Key[0].Type)
	if !ok || !exactKeyTypes[t.name] {
		return ""
	}
	var cols []string
	for _, c := range s.Columns {
		cols = append(cols, quote(c.Name))
	}
	tile := ""
	if s.Windowed() {
		tile = " AND " + quote(ColumnTile) + " = ?"
	}
	return fmt.Sprintf("SELECT %s, %s, %s, %s, %s FROM %s WHERE %s IN ?%s",
		quote(s.Key[0].Name), strings.Join(cols, ", "), ColumnDeleted, ColumnLatestAt, ColumnApplied,
		s.qualifiedTable(), quote(s.Key[0].Name), tile)
}

// prefetch reads the rows of want (at least two) with prefetchRows: all at
// once, or for a windowed view each tile's rows at once.
func (a *Applier) prefetch(ctx context.Context, want []*rowGroup) {
	if !a.view.windowed {
		a.prefetchRows(ctx, want)
		return
	}
	var tiles []time.Time
	byTile := map[time.Time][]*rowGroup{}
	for _, g := range want {
		tile := g.key[len(g.key)-1].(time.Time)
		if _, ok := byTile[tile]; !ok {
			tiles = append(tiles, tile)
		}
		byTile[tile] = append(byTile[tile], g)
	}
	for _, tile := range tiles {
		if chunk := byTile[tile]; len(chunk) > 1 {
			a.prefetchRows(ctx, chunk)
		}
	}
}

// prefetchRows reads chunk's rows in one query and sets each group's
// before: the row's state, or an empty row when Cassandra has none.
func (a *Applier) prefetchRows(ctx context.Context, chunk []*rowGroup) {
	keyType := a.view.keyTypes[0]
	keys := make([]any, len(chunk))
	for i, g := range chunk {
		keys[i] = keyType.bind(g.key[0])
	}
	args := []any{keys}
	var tile []any // a windowed view's chunk is of one tile
	if a.view.windowed {
		tile = chunk[0].key[1:]
		args = append(args, tile[0])
	}
	iter := a.session.Query(a.prefetchCQL, args...).WithContext(ctx).
		Consistency(a.settings.consistency()).Idempotent(true).Iter()
	found := make(map[string]*rowState, len(chunk))
	for {
		keyDest := keyType.scanDest()
		dests := append([]any{keyDest}, a.view.rowDests()...)
		if !iter.Scan(dests...) {
			break
		}
		state, err := a.view.scanned(dests[1:])
		if err != nil {
			_ = iter.Close()
			return
		}
		// The same row key that binding an operation computes.
		found[keyString(append([]any{keyType.fromScan(keyDest)}, tile...))] = state
	}
	if err := iter.Close(); err != nil {
		return
	}
	for _, g := range chunk {
		if state, ok := found[g.rowKey]; ok {
			g.before = state
		} else {
			g.before = newRowState(len(a.view.colTypes))
		}
	}
}
