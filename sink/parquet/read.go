package parquet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// readAttempts bounds how often a reader lists the log again because an
// object it listed was gone when read (log cleanup, a replacement deleting
// the files it replaced).
const readAttempts = 10

// sinkSnapshot is every log under a sink path, folded, with the
// replacements in effect applied: the primary log first, then secondary
// logs by query id.
type sinkSnapshot struct {
	logs []*foldedLog
}

// snapshot reads the sink log as it is now. It lists _sink_log/ once
// (bounded by cleanup: about minBatchesToRetain entries and a few
// compacted ones) and reads the newest compacted entry of each log and
// the entries after it; it lists again if cleanup deleted something it
// listed.
func snapshot(ctx context.Context, store objstore.Store) (*sinkSnapshot, error) {
	for attempt := 1; ; attempt++ {
		s, err := snapshotOnce(ctx, store)
		if err == nil || !errors.Is(err, objstore.ErrNotExist) || attempt >= readAttempts {
			return s, err
		}
	}
}

func snapshotOnce(ctx context.Context, store objstore.Store) (*sinkSnapshot, error) {
	lk, err := listLog(ctx, store)
	if err != nil {
		return nil, err
	}
	type logRef struct {
		l logLayout
		x *logIndex
	}
	refs := []logRef{{logLayout{prefix: LogDir}, lk.primary}}
	for _, q := range slices.Sorted(maps.Keys(lk.secondary)) {
		refs = append(refs, logRef{logLayout{prefix: LogDir + q + "/"}, lk.secondary[q]})
	}
	snap := &sinkSnapshot{}
	for _, r := range refs {
		if len(r.x.batches) == 0 && len(r.x.replacements) == 0 {
			continue
		}
		f, err := readLog(ctx, store, r.l, r.x, math.MaxInt64)
		if err != nil {
			return nil, err
		}
		for _, id := range r.x.replacements {
			if f.applied[id] {
				continue
			}
			rep, err := readReplacement(ctx, store, r.l, id)
			if err != nil {
				return nil, err
			}
			in := rep.State == StateDone
			if !in {
				if in, err = allExist(ctx, store, rep.Add); err != nil {
					return nil, err
				}
			}
			if in {
				f.apply(rep)
			}
		}
		snap.logs = append(snap.logs, f)
	}
	return snap, nil
}

// allExist reports whether every key is there.
func allExist(ctx context.Context, store objstore.Store, keys []string) (bool, error) {
	for _, k := range keys {
		got, err := store.List(ctx, k)
		if err != nil {
			return false, fmt.Errorf("look for %s: %w", k, err)
		}
		if !slices.Contains(got, k) {
			return false, nil
		}
	}
	return true, nil
}

// LogEntries returns the sink log as one entry per batch that the log
// still describes, ordered by batch id; for one batch id, the primary
// log's entry comes first, then secondary logs by query id. A compacted
// entry is expanded into the batches it stands for (those with files;
// their uploads are not kept), files a replacement removed are left out,
// and the files replacements added come last, as entries with BatchID -1
// and Replacement set. Batches whose entries cleanup deleted and that had
// no files do not appear.
func LogEntries(ctx context.Context, store objstore.Store) ([]LogEntry, error) {
	snap, err := snapshot(ctx, store)
	if err != nil {
		return nil, err
	}
	type ref struct {
		e   LogEntry
		log int
	}
	var refs []ref
	var reps []LogEntry
	for i, f := range snap.logs {
		raw := map[ids.BatchID]LogEntry{}
		for _, e := range f.entries {
			raw[e.BatchID] = e
		}
		for _, n := range slices.Sorted(maps.Keys(f.batches)) {
			e, ok := raw[n]
			if !ok {
				e = LogEntry{Version: compactVersion, QueryID: f.queryID, BatchID: n}
			}
			e.Files = f.batches[n]
			e.Compacted = nil
			refs = append(refs, ref{e: e, log: i})
		}
		for _, id := range slices.Sorted(maps.Keys(f.reps)) {
			reps = append(reps, LogEntry{Version: compactVersion, QueryID: f.queryID, BatchID: -1, Files: f.reps[id], Replacement: id})
		}
	}
	slices.SortStableFunc(refs, func(a, b ref) int {
		if a.e.BatchID != b.e.BatchID {
			if a.e.BatchID < b.e.BatchID {
				return -1
			}
			return 1
		}
		return a.log - b.log
	})
	entries := make([]LogEntry, 0, len(refs)+len(reps))
	for _, r := range refs {
		entries = append(entries, r.e)
	}
	return append(entries, reps...), nil
}

// ReadCommitted reads the rows of every file the sink log lists (see
// LogEntries), each file's rows in file order. A file that is in the
// directory but not in the log is not read. It returns the columns of the
// first file (nil if no file is logged); every file must have the same
// columns. A staged file of a batch entry that is not there yet (the
// driver is completing the batch's uploads, or died before it did and the
// next start completes them) is skipped: it becomes visible with its
// completion. A replacement (driver compact) is read once its new files
// are all there, else the files it replaces are read. Any other logged
// file that is gone when read (a replacement deleted it meanwhile) makes
// it read the log again; after a few tries it is an error.
func ReadCommitted(ctx context.Context, store objstore.Store) ([]query.Column, []row.Row, error) {
	for attempt := 1; ; attempt++ {
		snap, err := snapshot(ctx, store)
		if err != nil {
			return nil, nil, err
		}
		files, staged := snap.committedFiles()
		cols, rows, skipped, err := readFilesSkipping(ctx, store, files, staged)
		if err == nil && len(skipped) > 0 {
			err = checkSkipped(ctx, store, skipped)
		}
		if err != nil && errors.Is(err, objstore.ErrNotExist) && attempt < readAttempts {
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
			continue
		}
		return cols, rows, err
	}
}

// EachCommitted calls fn with the rows of each committed file in turn (the
// rows ReadCommitted returns, in the same order) and holds one file's rows
// at a time. A file that a compaction replaced after the log was read
// makes it read the log again if fn has not been called yet, and fail
// otherwise (fn has seen part of the rows; run it again).
func EachCommitted(ctx context.Context, store objstore.Store, fn func(cols []query.Column, rows []row.Row) error) error {
	for attempt := 1; ; attempt++ {
		called, err := eachCommitted(ctx, store, fn)
		if err != nil && !called && errors.Is(err, objstore.ErrNotExist) && attempt < readAttempts {
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
			continue
		}
		return err
	}
}

func eachCommitted(ctx context.Context, store objstore.Store, fn func(cols []query.Column, rows []row.Row) error) (called bool, err error) {
	snap, err := snapshot(ctx, store)
	if err != nil {
		return false, err
	}
	files, staged := snap.committedFiles()
	var first []query.Column
	for _, f := range files {
		cols, rows, skipped, err := readFilesSkipping(ctx, store, []string{f}, staged)
		if err != nil {
			return called, err
		}
		if len(skipped) > 0 {
			if err := checkSkipped(ctx, store, skipped); err != nil {
				return called, err
			}
			continue
		}
		if first == nil {
			first = cols
		} else if !slices.Equal(first, cols) {
			return called, fmt.Errorf("read sink file %s: columns %v differ from the first file's %v", f, cols, first)
		}
		called = true
		if err := fn(cols, rows); err != nil {
			return called, err
		}
	}
	return called, nil
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
		if hiddenPath(k) {
			continue
		}
		files = append(files, k)
	}
	return files, nil
}

// hiddenPath reports whether a component of key starts with '.' or '_':
// a name Spark, Hive and Trino skip when they list a directory (the
// staged files of a batch, driver compact's staging directory).
func hiddenPath(key string) bool {
	for _, c := range strings.Split(key, "/") {
		if strings.HasPrefix(c, ".") || strings.HasPrefix(c, "_") {
			return true
		}
	}
	return false
}

func readFiles(ctx context.Context, store objstore.Store, files []string) ([]query.Column, []row.Row, error) {
	cols, rows, _, err := readFilesSkipping(ctx, store, files, nil)
	return cols, rows, err
}

// committedFiles returns the files the snapshot's logs list, in order,
// and which of them are staged uploads (a staged file not there yet is one
// whose completion has not run: it is skipped, not an error).
func (snap *sinkSnapshot) committedFiles() (files []string, staged map[string]bool) {
	staged = map[string]bool{}
	for _, f := range snap.logs {
		files = append(files, f.files()...)
		for _, e := range f.entries {
			for _, u := range e.Uploads {
				staged[u.Key] = true
			}
		}
	}
	return files, staged
}

// checkSkipped decides about staged files that were not there: not
// completed yet (nil: skipped), or deleted by a replacement (driver
// compact) the log did not show when read, an error wrapping
// objstore.ErrNotExist that makes a reader read the log again.
func checkSkipped(ctx context.Context, store objstore.Store, skipped []string) error {
	listed, err := stillListed(ctx, store, skipped)
	if err != nil {
		return err
	}
	if !listed {
		return fmt.Errorf("read sink file %s: replaced meanwhile: %w", skipped[0], objstore.ErrNotExist)
	}
	return nil
}

// stillListed reports whether the sink log, read again now, still lists
// every one of keys.
func stillListed(ctx context.Context, store objstore.Store, keys []string) (bool, error) {
	snap, err := snapshot(ctx, store)
	if err != nil {
		return false, err
	}
	listed := map[string]bool{}
	for _, f := range snap.logs {
		for _, k := range f.files() {
			listed[k] = true
		}
	}
	for _, k := range keys {
		if !listed[k] {
			return false, nil
		}
	}
	return true, nil
}

// readFilesSkipping is readFiles where a missing file named in mayBeAbsent
// is skipped; it returns the keys skipped.
func readFilesSkipping(ctx context.Context, store objstore.Store, files []string, mayBeAbsent map[string]bool) ([]query.Column, []row.Row, []string, error) {
	var cols []query.Column
	var rows []row.Row
	var skipped []string
	for _, f := range files {
		obj, err := objstore.OpenReaderAt(ctx, store, f, readTail)
		if errors.Is(err, objstore.ErrNotExist) && mayBeAbsent[f] {
			skipped = append(skipped, f)
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read sink file: %w", err)
		}
		c, rs, err := ReadFileAt(obj, obj.Size())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read sink file %s: %w", f, err)
		}
		if cols == nil {
			cols = c
		} else if !slices.Equal(cols, c) {
			return nil, nil, nil, fmt.Errorf("read sink file %s: columns %v differ from the first file's %v", f, c, cols)
		}
		rows = append(rows, rs...)
	}
	return cols, rows, skipped, nil
}

// readTail is how much of a sink file the readers fetch first, from its
// end: a file no larger is read in one request (most are), a larger one
// has its footer at hand and the rest is read in ranges.
const readTail = 1 << 20

// readBuffer is the read buffer of each column of a file being read:
// every ranged read of a large file is at most this (or one page, if a
// page is larger), and a file being read holds about one buffer and one
// page per column, not the file.
const readBuffer = 1 << 20

// ReadFile decodes one flat Parquet file into rows, with kinds from the
// file's schema (see the package doc for the mapping).
func ReadFile(data []byte) ([]query.Column, []row.Row, error) {
	return ReadFileAt(bytes.NewReader(data), int64(len(data)))
}

// ReadFileAt is ReadFile over random access (objstore.OpenReaderAt's
// ranged reads): the footer, then each column chunk through a bounded
// buffer, never the whole file at once.
func ReadFileAt(r io.ReaderAt, size int64) ([]query.Column, []row.Row, error) {
	f, err := pq.OpenFile(r, size, pq.SkipPageIndex(true), pq.SkipBloomFilters(true), pq.ReadBufferSize(readBuffer))
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
		col, err := columnOf(c)
		if err != nil {
			return nil, nil, fmt.Errorf("open parquet: %w", err)
		}
		cols[i] = col
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
					r[ci] = fromParquet(v, cols[ci], scales[ci])
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

func fromParquet(v pq.Value, c query.Column, scale int64) row.Value {
	if v.IsNull() {
		return row.Value{}
	}
	switch c.Kind {
	case row.Int, row.Date:
		if v.Kind() == pq.Int64 {
			return row.Value{Kind: c.Kind, I: v.Int64()}
		}
		return row.Value{Kind: c.Kind, I: int64(v.Int32())}
	case row.Decimal:
		d := row.Value{Kind: row.Decimal, Scale: c.Scale}
		switch v.Kind() {
		case pq.Int32:
			d.I = int64(v.Int32())
		case pq.Int64:
			d.I = v.Int64()
		default:
			u := decodeTwosComplement(v.ByteArray())
			if u.IsInt64() {
				d.I = u.Int64()
			} else {
				d.S = u.String()
			}
		}
		return d
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

// decodeTwosComplement reads a big-endian two's-complement integer (a
// decimal in a byte array).
func decodeTwosComplement(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return u
}
