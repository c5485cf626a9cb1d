package join

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// ErrNoManifest matches a dimension path that holds no file of the
// join's format.
var ErrNoManifest = errors.New("no manifest files")

// SnapshotColumns returns the columns a snapshot of spec's dimension
// keeps, in order: the join keys (with the source columns' kinds), the
// columns the query adds, and the manifest id column when it is not one of
// them (read as a string).
func SnapshotColumns(spec *query.Spec) []query.Column {
	j := spec.Join
	var cols []query.Column
	seen := map[string]bool{}
	for _, k := range j.Keys {
		for _, f := range spec.Source.Schema {
			if f.Name == k {
				kind, _ := row.ParseKind(f.Type)
				cols = append(cols, query.Column{Name: k, Kind: kind})
			}
		}
		seen[k] = true
	}
	for _, f := range j.Columns {
		kind, _ := row.ParseKind(f.Type)
		cols = append(cols, query.Column{Name: f.Name, Kind: kind})
		seen[f.Name] = true
	}
	if id := j.ManifestIDColumn; id != "" && !seen[id] {
		cols = append(cols, query.Column{Name: id, Kind: row.String})
	}
	return cols
}

// separateIDColumn is the manifest id column when the query does not add
// it (it is then read as a string), or "".
func separateIDColumn(spec *query.Spec) string {
	j := spec.Join
	if j.ManifestIDColumn == "" || slices.Contains(j.Keys, j.ManifestIDColumn) {
		return ""
	}
	for _, f := range j.Columns {
		if f.Name == j.ManifestIDColumn {
			return ""
		}
	}
	return j.ManifestIDColumn
}

// Read reads the dimension of spec (validated) from dim, the store rooted
// at join.path, into a snapshot: every file with the format's extension
// (.parquet; .json or .jsonl), in key order, names under _ or . skipped.
func Read(ctx context.Context, dim objstore.Store, spec *query.Spec) (*Snapshot, error) {
	j := spec.Join
	keys, err := dim.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list join.path %s: %w", j.Path, err)
	}
	cols := SnapshotColumns(spec)
	var rows []row.Row
	files := 0
	for _, k := range keys {
		if hidden(k) || !hasFormatExt(k, j.JoinFormat()) {
			continue
		}
		files++
		data, err := dim.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read join.path %s file %s: %w", j.Path, k, err)
		}
		var rs []row.Row
		if j.JoinFormat() == query.JoinJSON {
			rs, err = readJSONLines(data, cols, spec.SessionZone())
		} else {
			rs, err = readParquet(data, cols, separateIDColumn(spec))
		}
		if err != nil {
			return nil, fmt.Errorf("read join.path %s file %s: %w", j.Path, k, err)
		}
		rows = append(rows, rs...)
	}
	if files == 0 {
		return nil, fmt.Errorf("join.path %s holds no %s files (%d objects listed): %w", j.Path, j.JoinFormat(), len(keys), ErrNoManifest)
	}
	s, err := NewSnapshot(cols, rows, j.ManifestIDColumn)
	if err != nil {
		return nil, fmt.Errorf("join.path %s: %w", j.Path, err)
	}
	s.Source = j.Path
	return s, nil
}

func hidden(key string) bool {
	for _, part := range strings.Split(key, "/") {
		if strings.HasPrefix(part, "_") || strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

func hasFormatExt(key, format string) bool {
	if format == query.JoinJSON {
		return strings.HasSuffix(key, ".json") || strings.HasSuffix(key, ".jsonl")
	}
	return strings.HasSuffix(key, ".parquet")
}

func readJSONLines(data []byte, cols []query.Column, zone *row.Zone) ([]row.Row, error) {
	fields := make([]row.Field, len(cols))
	for i, c := range cols {
		fields[i] = row.Field{Name: c.Name, Kind: c.Kind, Nullable: true}
	}
	dec := row.NewDecoder(fields)
	dec.SetSessionTimeZone(zone) // timestamps without a zone, as the stream's
	var rows []row.Row
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		r, err := dec.Decode(b, nil)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// readParquet reads cols from a Parquet file; the column named asString
// (a manifest id column the query does not add) may have any type and is
// read as a string.
func readParquet(data []byte, cols []query.Column, asString string) ([]row.Row, error) {
	fileCols, frows, err := parquet.ReadFile(data)
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(cols))
	for i, c := range cols {
		idx[i] = -1
		for fi, fc := range fileCols {
			if fc.Name == c.Name {
				idx[i] = fi
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("has no column %s (it has %s)", c.Name, columnNames(fileCols))
		}
		if fk := fileCols[idx[i]].Kind; fk != c.Kind && c.Name != asString {
			return nil, fmt.Errorf("column %s is %s in the file, the query reads it as %s", c.Name, fk, c.Kind)
		}
	}
	rows := make([]row.Row, len(frows))
	for ri, fr := range frows {
		r := make(row.Row, len(cols))
		for i, fi := range idx {
			v := fr[fi]
			if v.Kind != row.Null && v.Kind != cols[i].Kind {
				v = row.StringValue(v.String())
			}
			r[i] = v
		}
		rows[ri] = r
	}
	return rows, nil
}

// Taker takes snapshots of one query's dimension and stores them in its
// checkpoint: the driver's side of the join.
type Taker struct {
	Spec *query.Spec
	// Dim is the store rooted at join.path; Checkpoint the query's
	// checkpoint.
	Dim, Checkpoint objstore.Store
	Logger          *slog.Logger
}

// Take reads the dimension now and stores the snapshot in the checkpoint
// under its content hash (create-if-absent: a snapshot with the same
// content is already there and is kept as it is). now is recorded as
// the time it was taken.
func (t *Taker) Take(ctx context.Context, now time.Time) (Ref, error) {
	s, err := Read(ctx, t.Dim, t.Spec)
	if err != nil {
		return Ref{}, err
	}
	s.TakenAt = now.UTC().Format(time.RFC3339)
	data, err := s.Encode()
	if err != nil {
		return Ref{}, fmt.Errorf("encode manifest snapshot %s: %w", s.Ref.ID, err)
	}
	key := ObjectKey(s.Ref.Hash)
	switch err := t.Checkpoint.PutIfAbsent(ctx, key, data); {
	case errors.Is(err, objstore.ErrExists):
	case err != nil:
		return Ref{}, fmt.Errorf("store manifest snapshot %s: %w", key, err)
	}
	if t.Logger != nil {
		t.Logger.Info("manifest snapshot taken", "query", t.Spec.Name, "manifest_id", s.Ref.ID, "hash", s.Ref.Hash, "rows", len(s.Rows), "path", t.Spec.Join.Path)
	}
	return s.Ref, nil
}
