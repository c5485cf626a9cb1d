package join

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// ErrCorruptSnapshot matches a stored snapshot whose content does not hash
// to the name it is stored under.
var ErrCorruptSnapshot = errors.New("corrupt manifest snapshot")

// SnapshotFormat is the version of the stored snapshot format.
const SnapshotFormat = 1

// idHashLen is how many hex digits of the content hash make the manifest
// id when the query names no manifestIdColumn.
const idHashLen = 16

// Snapshot is a dimension as read once: its columns (the join keys, the
// columns the query adds and the manifest id column), its rows in a
// canonical order, and its identity.
type Snapshot struct {
	Ref Ref
	// Source is the path it was read from and TakenAt when (RFC 3339);
	// both are information for operators and not part of the hash.
	Source  string
	TakenAt string
	Columns []query.Column
	Rows    []row.Row
}

// NewSnapshot builds a snapshot from the rows read: it sorts them into a
// canonical order, hashes the content and takes the manifest id from
// idColumn (which must hold one non-null value in every row) or, when
// idColumn is empty, from the hash.
func NewSnapshot(cols []query.Column, rows []row.Row, idColumn string) (*Snapshot, error) {
	lines := make([][]byte, len(rows))
	for i, r := range rows {
		b, err := encodeRow(r)
		if err != nil {
			return nil, fmt.Errorf("manifest row %d: %w", i, err)
		}
		lines[i] = b
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return bytes.Compare(lines[order[a]], lines[order[b]]) < 0 })
	s := &Snapshot{Columns: cols, Rows: make([]row.Row, len(rows))}
	sorted := make([][]byte, len(rows))
	for i, o := range order {
		s.Rows[i], sorted[i] = rows[o], lines[o]
	}
	s.Ref.Hash = contentHash(cols, sorted)
	if idColumn == "" {
		s.Ref.ID = s.Ref.Hash[:idHashLen]
		return s, nil
	}
	ci := -1
	for i, c := range cols {
		if c.Name == idColumn {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fmt.Errorf("join.manifestIdColumn %s is not a column of the snapshot", idColumn)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("join.manifestIdColumn %s: the manifest has no rows, so it names no manifest id", idColumn)
	}
	ids := map[string]bool{}
	for _, r := range s.Rows {
		if r[ci].IsNull() {
			return nil, fmt.Errorf("join.manifestIdColumn %s is null in a manifest row: every row must carry the manifest's id", idColumn)
		}
		ids[r[ci].String()] = true
	}
	if len(ids) != 1 {
		names := make([]string, 0, len(ids))
		for id := range ids {
			names = append(names, id)
		}
		sort.Strings(names)
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		return nil, fmt.Errorf("join.manifestIdColumn %s has %d distinct values (%v): a manifest snapshot has one id; was the manifest being rewritten while it was read?", idColumn, len(ids), names)
	}
	s.Ref.ID = s.Rows[0][ci].String()
	return s, nil
}

// ObjectKey is where a snapshot with this hash is stored in the
// checkpoint.
func ObjectKey(hash string) string { return "manifests/" + hash + ".json" }

type header struct {
	Format  int         `json:"format"`
	ID      string      `json:"id"`
	Hash    string      `json:"hash"`
	Source  string      `json:"source,omitempty"`
	TakenAt string      `json:"takenAt,omitempty"`
	Rows    int         `json:"rows"`
	Columns []headerCol `json:"columns"`
}

type headerCol struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Encode renders the snapshot as stored: a JSON header line (format, id,
// hash, source, columns), then one JSON array per row, readable with cat.
func (s *Snapshot) Encode() ([]byte, error) {
	h := header{Format: SnapshotFormat, ID: s.Ref.ID, Hash: s.Ref.Hash, Source: s.Source, TakenAt: s.TakenAt, Rows: len(s.Rows)}
	for _, c := range s.Columns {
		h.Columns = append(h.Columns, headerCol{c.Name, c.Kind.String()})
	}
	var b bytes.Buffer
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	b.Write(hb)
	b.WriteByte('\n')
	for i, r := range s.Rows {
		line, err := encodeRow(r)
		if err != nil {
			return nil, fmt.Errorf("manifest row %d: %w", i, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// Decode reads a stored snapshot and checks that its content hashes to
// the hash in its header (ErrCorruptSnapshot otherwise).
func Decode(data []byte) (*Snapshot, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("decode manifest snapshot: empty: %w", ErrCorruptSnapshot)
	}
	var h header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
		return nil, fmt.Errorf("decode manifest snapshot header: %v: %w", err, ErrCorruptSnapshot)
	}
	if h.Format != SnapshotFormat {
		return nil, fmt.Errorf("decode manifest snapshot: format %d, this build reads %d", h.Format, SnapshotFormat)
	}
	s := &Snapshot{Ref: Ref{ID: h.ID, Hash: h.Hash}, Source: h.Source, TakenAt: h.TakenAt}
	for _, c := range h.Columns {
		k, ok := row.ParseKind(c.Type)
		if !ok {
			return nil, fmt.Errorf("decode manifest snapshot: column %s has type %q: %w", c.Name, c.Type, ErrCorruptSnapshot)
		}
		s.Columns = append(s.Columns, query.Column{Name: c.Name, Kind: k})
	}
	var lines [][]byte
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		r, err := decodeRow(line, s.Columns)
		if err != nil {
			return nil, fmt.Errorf("decode manifest snapshot row %d: %v: %w", len(s.Rows), err, ErrCorruptSnapshot)
		}
		s.Rows = append(s.Rows, r)
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("decode manifest snapshot: %w", err)
	}
	if len(s.Rows) != h.Rows {
		return nil, fmt.Errorf("decode manifest snapshot %s: %d rows, header says %d: %w", h.ID, len(s.Rows), h.Rows, ErrCorruptSnapshot)
	}
	if got := contentHash(s.Columns, lines); got != h.Hash {
		return nil, fmt.Errorf("decode manifest snapshot %s: content hashes to %s, header says %s: %w", h.ID, got, h.Hash, ErrCorruptSnapshot)
	}
	return s, nil
}

// contentHash is the hex SHA-256 of the columns and the encoded rows in
// canonical order.
func contentHash(cols []query.Column, lines [][]byte) string {
	h := sha256.New()
	for _, c := range cols {
		fmt.Fprintf(h, "%s %s\n", c.Name, c.Kind)
	}
	h.Write([]byte("--\n"))
	for _, l := range lines {
		h.Write(l)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// encodeRow renders a row as a JSON array: strings as strings, longs and
// timestamps (microseconds) as integers, doubles as numbers, booleans,
// nulls.
func encodeRow(r row.Row) ([]byte, error) {
	vals := make([]any, len(r))
	for i, v := range r {
		switch v.Kind {
		case row.Null:
			vals[i] = nil
		case row.String:
			vals[i] = v.S
		case row.Long, row.Timestamp:
			vals[i] = v.I
		case row.Double:
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return nil, fmt.Errorf("column %d is %v: a manifest holds finite numbers only", i, v.F)
			}
			vals[i] = v.F
		case row.Bool:
			vals[i] = v.I != 0
		}
	}
	return json.Marshal(vals)
}

func decodeRow(line []byte, cols []query.Column) (row.Row, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var vals []any
	if err := dec.Decode(&vals); err != nil {
		return nil, err
	}
	if len(vals) != len(cols) {
		return nil, fmt.Errorf("%d values for %d columns", len(vals), len(cols))
	}
	r := make(row.Row, len(cols))
	for i, v := range vals {
		if v == nil {
			continue
		}
		k := cols[i].Kind
		switch x := v.(type) {
		case string:
			if k != row.String {
				return nil, fmt.Errorf("column %s: a string for a %s column", cols[i].Name, k)
			}
			r[i] = row.StringValue(x)
		case bool:
			if k != row.Bool {
				return nil, fmt.Errorf("column %s: a boolean for a %s column", cols[i].Name, k)
			}
			r[i] = row.BoolValue(x)
		case json.Number:
			switch k {
			case row.Long, row.Timestamp:
				n, err := strconv.ParseInt(string(x), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("column %s: %v", cols[i].Name, err)
				}
				r[i] = row.Value{Kind: k, I: n}
			case row.Double:
				f, err := strconv.ParseFloat(string(x), 64)
				if err != nil {
					return nil, fmt.Errorf("column %s: %v", cols[i].Name, err)
				}
				r[i] = row.DoubleValue(f)
			default:
				return nil, fmt.Errorf("column %s: a number for a %s column", cols[i].Name, k)
			}
		default:
			return nil, fmt.Errorf("column %s: unexpected %T", cols[i].Name, v)
		}
	}
	return r, nil
}
