package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// DefaultMaxRowsPerFile is how many rows one file written by CompactDates
// holds at most when CompactOptions.MaxRowsPerFile is zero.
const DefaultMaxRowsPerFile = 1_000_000

// StagingDir is where CompactDates builds a date's new directory on a
// local filesystem before exchanging it with the old one. Its name starts
// with '_', so Spark, Hive, Trino and ListDirectory skip it.
const StagingDir = "_sink_compact/"

// ErrNotClosed is returned (wrapped) for a date named with --before whose
// windows can still change.
var ErrNotClosed = errors.New("date is not closed")

// CompactOptions configure CompactDates.
type CompactOptions struct {
	// QueryID is the query whose log is compacted: the checkpoint's.
	QueryID string
	// Watermark is the checkpoint's committed watermark: the one the
	// next (or in-flight) batch drops late rows against. A date is closed
	// when every window starting on it ends at or before it.
	Watermark eventtime.Watermark
	// Before, if set (YYYY-MM-DD), limits compaction to earlier dates.
	Before string
	// MaxRowsPerFile bounds a new file; zero means DefaultMaxRowsPerFile.
	MaxRowsPerFile int
	// DryRun reports what would be compacted and changes nothing.
	DryRun bool
	// LockTTL is how old another run's lease must be to be taken over;
	// zero means DefaultLockTTL.
	LockTTL time.Duration
	// Now stamps replacement records; nil means time.Now.
	Now func() time.Time

	// step, in tests, is called after each step of a replacement:
	// "recorded", "visible", "deleted".
	step func(string)
}

// CompactedDate is one date's result.
type CompactedDate struct {
	Date        string `json:"date"`
	FilesBefore int    `json:"filesBefore"`
	FilesAfter  int    `json:"filesAfter"`
	Rows        int    `json:"rows"`
	// Skipped says why the date was left alone ("" if compacted).
	Skipped string `json:"skipped,omitempty"`
	// Replacement is the record's id.
	Replacement string `json:"replacement,omitempty"`
}

// CompactDates rewrites the files of every closed window_date= partition
// of queryID's log into few large ones (see the package doc, "Compaction
// of closed dates"). It first finishes any replacement a crash left
// pending. Rows are kept exactly; each new file holds its rows sorted by
// window_start, then by the other columns. A date is read twice (a pass
// that counts, then each new file reads the old files its rows come from),
// so memory is bounded by MaxRowsPerFile rows and one old file, however
// large the date.
func CompactDates(ctx context.Context, store objstore.Store, opts CompactOptions) ([]CompactedDate, error) {
	if err := checkQueryID(opts.QueryID); err != nil {
		return nil, err
	}
	if opts.Before != "" {
		if _, err := time.Parse(time.DateOnly, opts.Before); err != nil {
			return nil, fmt.Errorf("before %q: want a date YYYY-MM-DD", opts.Before)
		}
	}
	if opts.MaxRowsPerFile <= 0 {
		opts.MaxRowsPerFile = DefaultMaxRowsPerFile
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l, err := compactLayout(ctx, store, opts.QueryID)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		if opts.LockTTL <= 0 {
			opts.LockTTL = DefaultLockTTL
		}
		release, err := acquireLease(ctx, store, opts.Now(), opts.LockTTL)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	lk, err := listLog(ctx, store)
	if err != nil {
		return nil, err
	}
	x := lk.index(l.prefix)
	if !opts.DryRun {
		for _, id := range x.replacements {
			r, err := readReplacement(ctx, store, l, id)
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if r.State != StateDone {
				if err := finishReplacement(ctx, store, l, r, func(string) {}); err != nil {
					return nil, fmt.Errorf("finish the interrupted replacement %s: %w", r.ID, err)
				}
			}
		}
	}
	f, err := foldedView(ctx, store, l)
	if err != nil {
		return nil, err
	}
	byDate := map[string][]string{}
	for _, k := range f.files() {
		dir, _, ok := strings.Cut(k, "/")
		date, isDate := strings.CutPrefix(dir, PartitionByWindowDate+"=")
		if !ok || !isDate || date == nullPartition {
			continue
		}
		byDate[date] = append(byDate[date], k)
	}
	var out []CompactedDate
	for _, date := range slices.Sorted(maps.Keys(byDate)) {
		if opts.Before != "" && date >= opts.Before {
			continue
		}
		res, err := compactDate(ctx, store, l, f, date, byDate[date], opts)
		if err != nil {
			return out, fmt.Errorf("compact %s=%s: %w", PartitionByWindowDate, date, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// compactLayout is the log of queryID, which must have entries.
func compactLayout(ctx context.Context, store objstore.Store, queryID string) (logLayout, error) {
	l, err := resolve(ctx, store, queryID)
	if err != nil {
		return logLayout{}, err
	}
	if l.adopted {
		return logLayout{}, fmt.Errorf("the sink log has no entry of query %s (the checkpoint's): is it this sink's checkpoint?", queryID)
	}
	lk, err := listLog(ctx, store)
	if err != nil {
		return logLayout{}, err
	}
	if lk.index(l.prefix).last() < 0 {
		return logLayout{}, fmt.Errorf("the sink log has no entry of query %s (the checkpoint's): nothing committed yet, or not this sink's checkpoint", queryID)
	}
	return l, nil
}

// foldedView is the log at l with the replacements in effect applied.
func foldedView(ctx context.Context, store objstore.Store, l logLayout) (*foldedLog, error) {
	for attempt := 1; ; attempt++ {
		snap, err := snapshotOnce(ctx, store)
		if err == nil {
			for _, f := range snap.logs {
				if f.prefix == l.prefix {
					return f, nil
				}
			}
			return nil, fmt.Errorf("the sink log at %s has no entries", l.prefix)
		}
		if !errors.Is(err, objstore.ErrNotExist) || attempt >= readAttempts {
			return nil, err
		}
	}
}

func compactDate(ctx context.Context, store objstore.Store, l logLayout, f *foldedLog, date string, old []string, opts CompactOptions) (CompactedDate, error) {
	res := CompactedDate{Date: date, FilesBefore: len(old), FilesAfter: len(old)}
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		res.Skipped = "not a date"
		return res, nil
	}
	// Dates and windows are reckoned in milliseconds, the watermark's unit.
	dayEndMs, wmMs := day.Add(24*time.Hour).UnixNano()/1e6, opts.Watermark.Millis()
	if dayEndMs > wmMs {
		res.Skipped = fmt.Sprintf("open: the committed watermark %s is before the date's end", row.FormatTimestamp(int64(opts.Watermark)))
		return res, nil
	}
	if len(old) < 2 {
		res.Skipped = "already one file"
		return res, nil
	}
	// A first pass learns the columns, each file's row count and the
	// longest window, holding one file's rows at a time; each new file
	// then reads only the files its rows come from. Memory is bounded by
	// MaxRowsPerFile rows and one old file, not by the date.
	scan, err := scanDate(ctx, store, old)
	if err != nil {
		return res, err
	}
	cols, ws, maxLenMicros := scan.cols, scan.ws, scan.maxLenMicros
	res.Rows = scan.total
	// A window starting on the date ends before the date's end plus the
	// window length; all of them were emitted and no later row can reach
	// them once the watermark is there.
	if need := dayEndMs + (maxLenMicros+999)/1000; need > wmMs {
		res.Skipped = fmt.Sprintf("open: its last windows end up to %s, after the committed watermark %s", row.FormatTimestamp(need*1000), row.FormatTimestamp(int64(opts.Watermark)))
		return res, nil
	}
	chunks := (scan.total + opts.MaxRowsPerFile - 1) / opts.MaxRowsPerFile
	res.FilesAfter = chunks
	if opts.DryRun {
		return res, nil
	}
	schema, err := buildSchema(cols)
	if err != nil {
		return res, err
	}
	id, err := nextReplacementID(ctx, store, l, f, date)
	if err != nil {
		return res, err
	}
	res.Replacement = id
	dir := PartitionByWindowDate + "=" + date + "/"
	rep := &Replacement{Version: compactVersion, ID: id, QueryID: f.queryID, Date: date, Remove: slices.Clone(old), State: StatePending,
		Created: opts.Now().UTC().Format(time.RFC3339)}
	for c := 0; c < chunks; c++ {
		rep.Add = append(rep.Add, fmt.Sprintf("%scompact-%s-%04d.snappy.parquet", dir, id, c))
	}
	// Each new file is encoded as it is written (see uploadStreamed).
	data := func(c int, w io.Writer) error {
		part, err := scan.rows(ctx, store, old, c*opts.MaxRowsPerFile, min(scan.total, (c+1)*opts.MaxRowsPerFile))
		if err != nil {
			return err
		}
		slices.SortStableFunc(part, func(a, b row.Row) int { return compareRows(a, b, ws) })
		popts, cleanup, err := pageBuffers(part, objstore.DefaultPartSize, "")
		if err != nil {
			return err
		}
		defer cleanup()
		return encodeTo(w, schema, cols, part, popts...)
	}
	step := opts.step
	if step == nil {
		step = func(string) {}
	}
	if fs, ok := store.(*objstore.FS); ok && exchangeSupported {
		return res, replaceByExchange(ctx, fs, l, rep, data, step)
	}
	mp, ok := store.(objstore.Multipart)
	if !ok {
		return res, fmt.Errorf("the store stages no files invisibly (no multipart uploads): compaction would show readers both sets")
	}
	return res, replaceByUploads(ctx, store, mp, l, rep, data, step)
}

// dateScan is what a first pass over a date's files learned.
type dateScan struct {
	cols         []query.Column
	ws           int // window_start's column
	counts       []int
	total        int
	maxLenMicros int64
}

// scanDate reads files one at a time and keeps only their columns, row
// counts and longest window.
func scanDate(ctx context.Context, store objstore.Store, files []string) (dateScan, error) {
	var d dateScan
	we := -1
	for _, f := range files {
		cols, rows, err := readFiles(ctx, store, []string{f})
		if err != nil {
			return d, err
		}
		if d.cols == nil {
			d.cols = cols
			d.ws = slices.IndexFunc(cols, func(c query.Column) bool { return c.Name == query.WindowStart })
			we = slices.IndexFunc(cols, func(c query.Column) bool { return c.Name == query.WindowEnd })
			if d.ws < 0 || we < 0 {
				return d, fmt.Errorf("the files have no %s and %s columns: only windowed output is compacted", query.WindowStart, query.WindowEnd)
			}
		} else if !slices.Equal(d.cols, cols) {
			return d, fmt.Errorf("read sink file %s: columns %v differ from the first file's %v", f, cols, d.cols)
		}
		for _, r := range rows {
			if !r[d.ws].IsNull() && !r[we].IsNull() {
				d.maxLenMicros = max(d.maxLenMicros, r[we].I-r[d.ws].I)
			}
		}
		d.counts = append(d.counts, len(rows))
		d.total += len(rows)
	}
	return d, nil
}

// rows returns rows [from, to) of the files' rows in order, reading only
// the files that hold them, one at a time.
func (d dateScan) rows(ctx context.Context, store objstore.Store, files []string, from, to int) ([]row.Row, error) {
	out := make([]row.Row, 0, to-from)
	start := 0
	for i, f := range files {
		end := start + d.counts[i]
		if end > from && start < to {
			_, rows, err := readFiles(ctx, store, []string{f})
			if err != nil {
				return nil, err
			}
			if len(rows) != d.counts[i] {
				return nil, fmt.Errorf("sink file %s changed while it was compacted: %d rows, %d at the first read", f, len(rows), d.counts[i])
			}
			out = append(out, rows[max(from, start)-start:min(to, end)-start]...)
		}
		if start = end; start >= to {
			break
		}
	}
	return out, nil
}

// compareRows orders by window_start, then every column in order.
func compareRows(a, b row.Row, ws int) int {
	if c := compareValue(a[ws], b[ws]); c != 0 {
		return c
	}
	for i := range a {
		if c := compareValue(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func compareValue(a, b row.Value) int {
	switch {
	case a.IsNull() && b.IsNull():
		return 0
	case a.IsNull():
		return -1
	case b.IsNull():
		return 1
	}
	switch a.Kind {
	case row.String:
		return strings.Compare(a.S, b.S)
	case row.Decimal:
		return expr.CompareDecimal(a, b)
	case row.Double:
		switch {
		case a.F < b.F:
			return -1
		case a.F > b.F:
			return 1
		}
		return 0
	}
	switch {
	case a.I < b.I:
		return -1
	case a.I > b.I:
		return 1
	}
	return 0
}

// nextReplacementID is "<date>-<generation>", one more than any
// replacement of the date the log knows: two compactions of one date race
// for one record key, and create-if-absent lets one win.
func nextReplacementID(ctx context.Context, store objstore.Store, l logLayout, f *foldedLog, date string) (string, error) {
	lk, err := listLog(ctx, store)
	if err != nil {
		return "", err
	}
	gen := 0
	ids := slices.Concat(lk.index(l.prefix).replacements, slices.Sorted(maps.Keys(f.reps)), slices.Sorted(maps.Keys(f.applied)))
	for _, id := range ids {
		if g, ok := strings.CutPrefix(id, date+"-"); ok {
			if n, err := strconv.Atoi(g); err == nil {
				gen = max(gen, n)
			}
		}
	}
	return fmt.Sprintf("%s-%04d", date, gen+1), nil
}

// writeReplacement writes rep with create-if-absent (first) or replaces it
// (a state change).
func writeReplacement(ctx context.Context, store objstore.Store, l logLayout, rep *Replacement, create bool) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	key := replacementKey(l, rep.ID)
	if create {
		if err := store.PutIfAbsent(ctx, key, b); err != nil {
			if errors.Is(err, objstore.ErrExists) {
				return fmt.Errorf("replacement %s exists already: another compaction of the date is running; run one at a time: %w", rep.ID, err)
			}
			return fmt.Errorf("write replacement %s: %w", rep.ID, err)
		}
		return nil
	}
	if err := store.Put(ctx, key, b); err != nil {
		return fmt.Errorf("write replacement %s: %w", rep.ID, err)
	}
	return nil
}

// replaceByUploads is the object-store path: the new files are staged as
// multipart uploads (invisible), the record is written, the uploads are
// completed (the new files appear), the old files are deleted at once,
// and the record is marked done. A directory lister can see both sets
// between the completion and the deletion; a reader that follows the log
// never does.
func replaceByUploads(ctx context.Context, store objstore.Store, mp objstore.Multipart, l logLayout, rep *Replacement, data func(i int, w io.Writer) error, step func(string)) error {
	for i, key := range rep.Add {
		id, err := mp.CreateMultipart(ctx, key)
		if err != nil {
			return err
		}
		parts, err := uploadStreamed(ctx, mp, key, id, objstore.DefaultPartSize, func(w io.Writer) error { return data(i, w) })
		if err != nil {
			return err
		}
		rep.Uploads = append(rep.Uploads, Upload{Key: key, UploadID: id, Parts: parts})
	}
	if err := writeReplacement(ctx, store, l, rep, true); err != nil {
		for _, u := range rep.Uploads {
			_ = mp.AbortMultipart(ctx, u.Key, u.UploadID)
		}
		return err
	}
	step("recorded")
	return finishReplacement(ctx, store, l, rep, step)
}

// finishReplacement brings a pending record to done; idempotent, so a
// crashed compaction is finished by the next one.
func finishReplacement(ctx context.Context, store objstore.Store, l logLayout, rep *Replacement, step func(string)) error {
	if rep.Staging != "" {
		fs, ok := store.(*objstore.FS)
		if !ok || !exchangeSupported {
			return fmt.Errorf("replacement %s was staged in a local directory %s; finish it where that filesystem is mounted", rep.ID, rep.Staging)
		}
		return finishExchange(ctx, fs, l, rep, step)
	}
	if len(rep.Uploads) > 0 {
		mp, ok := store.(objstore.Multipart)
		if !ok {
			return fmt.Errorf("replacement %s has staged uploads and the store has no multipart support", rep.ID)
		}
		for _, u := range rep.Uploads {
			if err := mp.CompleteMultipart(ctx, u.Key, u.UploadID, u.Parts); err != nil {
				return fmt.Errorf("complete %s: %w", u.Key, err)
			}
		}
	}
	step("visible")
	if err := deleteAll(ctx, store, rep.Remove); err != nil {
		return err
	}
	step("deleted")
	rep.State = StateDone
	return writeReplacement(ctx, store, l, rep, false)
}

// deleteAll deletes keys: in one DeleteObjects request (per 1,000 keys)
// on S3, else a few at a time; absent keys are fine.
func deleteAll(ctx context.Context, store objstore.Store, keys []string) error {
	if bd, ok := store.(objstore.BatchDeleter); ok {
		if err := bd.DeleteMany(ctx, keys); err != nil {
			return fmt.Errorf("delete replaced files: %w", err)
		}
		return nil
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotExist) {
				errs[i] = fmt.Errorf("delete replaced file %s: %w", k, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
