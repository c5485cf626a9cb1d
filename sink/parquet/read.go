package parquet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// LogEntries returns every sink log entry under a store rooted at a sink
// path, ordered by batch id; for one batch id, the primary log's entry
// comes first, then secondary logs by query id.
func LogEntries(ctx context.Context, store objstore.Store) ([]LogEntry, error) {
	lk, err := listLog(ctx, store)
	if err != nil {
		return nil, err
	}
	type ref struct {
		batch int64
		qid   string // "" for the primary log
	}
	var refs []ref
	for _, n := range lk.primary {
		refs = append(refs, ref{batch: n})
	}
	for q, ns := range lk.secondary {
		for _, n := range ns {
			refs = append(refs, ref{batch: n, qid: q})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int {
		if a.batch != b.batch {
			if a.batch < b.batch {
				return -1
			}
			return 1
		}
		return strings.Compare(a.qid, b.qid)
	})
	entries := make([]LogEntry, 0, len(refs))
	for _, r := range refs {
		key := LogDir + strconv.FormatInt(r.batch, 10)
		if r.qid != "" {
			key = LogDir + r.qid + "/" + strconv.FormatInt(r.batch, 10)
		}
		e, err := readEntry(ctx, store, key)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ReadCommitted reads the rows of every file the sink log lists, entry by
// entry in LogEntries order, each file's rows in file order. A file that is
// in the directory but not in the log is not read. It returns the columns
// of the first file (nil if no file is logged); every file must have the
// same columns. A staged file of a version-2 entry that is not there yet
// (the driver is completing the batch's uploads, or died before it did and
// the next start completes them) is skipped: it becomes visible with its
// completion. A missing file of a version-1 entry is an error.
func ReadCommitted(ctx context.Context, store objstore.Store) ([]query.Column, []row.Row, error) {
	entries, err := LogEntries(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	staged := map[string]bool{}
	for _, e := range entries {
		files = append(files, e.Files...)
		for _, u := range e.Uploads {
			staged[u.Key] = true
		}
	}
	return readFilesSkipping(ctx, store, files, staged)
}

// ReadAllFiles reads every .parquet file in the directory, in key order,
// whether the log lists it or not: what a reader that just lists the
// directory sees.
func ReadAllFiles(ctx context.Context, store objstore.Store) ([]query.Column, []row.Row, error) {
	files, err := ListDirectory(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	return readFiles(ctx, store, files)
}

// ListDirectory returns the key of every .parquet file under the sink path,
// sorted, ignoring the sink log.
func ListDirectory(ctx context.Context, store objstore.Store) ([]string, error) {
	keys, err := store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list sink files: %w", err)
	}
	var files []string
	for _, k := range keys {
		if strings.HasPrefix(k, LogDir) || !strings.HasSuffix(k, ".parquet") {
			continue
		}
		base := k[strings.LastIndex(k, "/")+1:]
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue
		}
		files = append(files, k)
	}
	return files, nil
}

func readFiles(ctx context.Context, store objstore.Store, files []string) ([]query.Column, []row.Row, error) {
	return readFilesSkipping(ctx, store, files, nil)
}

// readFilesSkipping is readFiles where a missing file named in mayBeAbsent
// is skipped.
func readFilesSkipping(ctx context.Context, store objstore.Store, files []string, mayBeAbsent map[string]bool) ([]query.Column, []row.Row, error) {
	var cols []query.Column
	var rows []row.Row
	for _, f := range files {
		data, err := store.Get(ctx, f)
		if errors.Is(err, objstore.ErrNotExist) && mayBeAbsent[f] {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read sink file: %w", err)
		}
		c, rs, err := ReadFile(data)
		if err != nil {
			return nil, nil, fmt.Errorf("read sink file %s: %w", f, err)
		}
		if cols == nil {
			cols = c
		} else if !slices.Equal(cols, c) {
			return nil, nil, fmt.Errorf("read sink file %s: columns %v differ from the first file's %v", f, c, cols)
		}
		rows = append(rows, rs...)
	}
	return cols, rows, nil
}

// ReadFile decodes one flat Parquet file into rows, with kinds from the
// file's schema (see the package doc for the mapping).
func ReadFile(data []byte) ([]query.Column, []row.Row, error) {
	f, err := pq.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, fmt.Errorf("open parquet: %w", err)
	}
	leaves := f.Root().Columns()
	cols := make([]query.Column, len(leaves))
	scales := make([]int64, len(leaves))
	for i, c := range leaves {
		if !c.Leaf() || c.Repeated() {
			return nil, nil, fmt.Errorf("open parquet: column %s is nested or repeated; the sink reads flat files", c.Name())
		}
		k, err := kindOfColumn(c)
		if err != nil {
			return nil, nil, fmt.Errorf("open parquet: %w", err)
		}
		cols[i] = query.Column{Name: c.Name(), Kind: k}
		scales[i] = timestampScale(c)
	}
	out := make([]row.Row, 0, f.NumRows())
	buf := make([]pq.Row, 64)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(buf)
			for _, pr := range buf[:n] {
				r := make(row.Row, len(cols))
				for _, v := range pr {
					ci := v.Column()
					if ci < 0 || ci >= len(cols) {
						rr.Close()
						return nil, nil, fmt.Errorf("read parquet: value for column %d of %d", ci, len(cols))
					}
					r[ci] = fromParquet(v, cols[ci].Kind, scales[ci])
				}
				out = append(out, r)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rr.Close()
				return nil, nil, fmt.Errorf("read parquet: %w", err)
			}
		}
		if err := rr.Close(); err != nil {
			return nil, nil, fmt.Errorf("read parquet: %w", err)
		}
	}
	return cols, out, nil
}

func fromParquet(v pq.Value, k row.Kind, scale int64) row.Value {
	if v.IsNull() {
		return row.Value{}
	}
	switch k {
	case row.String:
		return row.StringValue(string(v.ByteArray()))
	case row.Long:
		if v.Kind() == pq.Int32 {
			return row.LongValue(int64(v.Int32()))
		}
		return row.LongValue(v.Int64())
	case row.Double:
		if v.Kind() == pq.Float {
			return row.DoubleValue(float64(v.Float()))
		}
		return row.DoubleValue(v.Double())
	case row.Bool:
		return row.BoolValue(v.Boolean())
	case row.Timestamp:
		i := v.Int64()
		switch {
		case scale > 1:
			i *= scale
		case scale < 0:
			i = floorDiv(i, -scale)
		}
		return row.TimestampValue(i)
	}
	return row.Value{}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
