package join

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Ref names a snapshot: its manifest id (a value of join.manifestIdColumn,
// or a prefix of the content hash) and its content hash, which names the
// snapshot's copy in the checkpoint.
type Ref struct {
	ID   string `json:"id"`
	Hash string `json:"hash"`
}

// IsZero reports whether r names no snapshot.
func (r Ref) IsZero() bool { return r.Hash == "" }

// Table is a snapshot indexed by join key for one query: Apply joins an
// event row with it. A Table is read-only and safe for concurrent use.
type Table struct {
	ref   Ref
	inner bool
	// keyIdx are the positions of the join columns in an event row.
	keyIdx []int
	// byKey maps an encoded key to the added values of every matching
	// dimension row (join.columns order).
	byKey map[string][][]row.Value
	// width is how many values a join adds (columns, then manifest_id).
	width  int
	withID bool
}

// NewTable indexes snap for spec (validated): the join keys are the
// spec's join.keys columns, the added values its join.columns.
func NewTable(spec *query.Spec, snap *Snapshot) (*Table, error) {
	j := spec.Join
	if j == nil {
		return nil, fmt.Errorf("join: the query has no join")
	}
	pos := map[string]int{}
	for i, c := range snap.Columns {
		pos[c.Name] = i
	}
	t := &Table{ref: snap.Ref, inner: j.JoinType() == query.JoinInner, withID: j.WithManifestID, byKey: map[string][][]row.Value{}}
	var dimKeys []int
	for _, k := range j.Keys {
		sp := -1
		for i, f := range spec.Source.Schema {
			if f.Name == k {
				sp = i
			}
		}
		dp, ok := pos[k]
		if sp < 0 || !ok {
			return nil, fmt.Errorf("join: snapshot %s has no join column %s (it has %s)", snap.Ref.ID, k, columnNames(snap.Columns))
		}
		t.keyIdx = append(t.keyIdx, sp)
		dimKeys = append(dimKeys, dp)
	}
	var add []int
	for _, c := range j.Columns {
		dp, ok := pos[c.Name]
		if !ok {
			return nil, fmt.Errorf("join: snapshot %s has no column %s (it has %s): the query's join.columns changed since it was taken", snap.Ref.ID, c.Name, columnNames(snap.Columns))
		}
		add = append(add, dp)
	}
	t.width = len(add)
	if t.withID {
		t.width++
	}
	keyVals := make([]row.Value, len(dimKeys))
	for _, r := range snap.Rows {
		for i, p := range dimKeys {
			keyVals[i] = r[p]
		}
		key, ok := encodeKey(keyVals)
		if !ok {
			continue // a null key matches nothing
		}
		vals := make([]row.Value, len(add))
		for i, p := range add {
			vals[i] = r[p]
		}
		t.byKey[key] = append(t.byKey[key], vals)
	}
	return t, nil
}

// Ref returns the snapshot the table was built from.
func (t *Table) Ref() Ref { return t.ref }

// Keys returns how many distinct join keys the snapshot has.
func (t *Table) Keys() int { return len(t.byKey) }

// Apply joins the event row ev with the snapshot and appends the result
// to out: one row per matching dimension row (ev's values, then the added
// columns, then manifest_id when asked); for an event without a match, one
// row with null added columns (left) or none (inner). ev is not kept: the
// appended rows are new. matched reports whether ev found a match.
func (t *Table) Apply(ev row.Row, out []row.Row) (_ []row.Row, matched bool) {
	var matches [][]row.Value
	kv := make([]row.Value, len(t.keyIdx))
	for i, p := range t.keyIdx {
		kv[i] = ev[p]
	}
	if key, ok := encodeKey(kv); ok {
		matches = t.byKey[key]
	}
	if len(matches) == 0 {
		if t.inner {
			return out, false
		}
		return append(out, t.joined(ev, nil)), false
	}
	for _, m := range matches {
		out = append(out, t.joined(ev, m))
	}
	return out, true
}

func (t *Table) joined(ev row.Row, add []row.Value) row.Row {
	r := make(row.Row, len(ev), len(ev)+t.width)
	copy(r, ev)
	if add == nil {
		r = r[:len(ev)+t.width] // nulls
		if t.withID {
			r[len(r)-1] = row.StringValue(t.ref.ID)
		}
		return r
	}
	r = append(r, add...)
	if t.withID {
		r = append(r, row.StringValue(t.ref.ID))
	}
	return r
}

// encodeKey encodes join key values so that equal keys (same kinds, same
// values) encode equally; ok is false when a value is null (SQL: a null
// key equals nothing).
func encodeKey(vals []row.Value) (string, bool) {
	var b strings.Builder
	for _, v := range vals {
		b.WriteByte(byte(v.Kind))
		switch v.Kind {
		case row.Null:
			return "", false
		case row.String:
			b.WriteString(strconv.Itoa(len(v.S)))
			b.WriteByte(':')
			b.WriteString(v.S)
		case row.Double:
			f := v.F
			if f == 0 {
				f = 0 // -0 joins 0
			}
			b.WriteString(strconv.FormatUint(math.Float64bits(f), 16))
		default:
			b.WriteString(strconv.FormatInt(v.I, 10))
		}
		b.WriteByte(';')
	}
	return b.String(), true
}

func columnNames(cols []query.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
