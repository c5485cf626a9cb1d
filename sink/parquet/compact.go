package parquet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// DefaultCompactInterval is how many batches make one compacted entry when
// Options.CompactInterval is zero: Spark's
// spark.sql.streaming.fileSink.log.compactInterval default, 10.
const DefaultCompactInterval = 10

// DefaultMinBatchesToRetain is how many batches' entries the log keeps when
// Options.MinBatchesToRetain is zero (the query's minBatchesToRetain
// default, Spark's 100).
const DefaultMinBatchesToRetain = 100

// compactSuffix names a compacted entry: _sink_log/<N>.compact, as Spark's
// FileStreamSinkLog names it.
const compactSuffix = ".compact"

// compactVersion is the format version of compacted entries and
// replacement records. Plain entries stay at logVersion, so a build that
// reads only versions 1 and 2 refuses a compacted log instead of
// misreading it.
const compactVersion = 3

// replacePrefix names a replacement record: _sink_log/replace-<id>.
const replacePrefix = "replace-"

// cleanupTimeout bounds one background cleanup.
const cleanupTimeout = 10 * time.Minute

// Compacted is the part of a compacted entry (N.compact) that stands for
// every earlier entry of its log: the files of batches before N (without
// the files a replacement removed), the files replacements added, and the
// replacement records folded in.
type Compacted struct {
	// Batches are the earlier batches that have files, ascending.
	Batches []BatchFiles `json:"batches"`
	// Replacements are the files replacements (driver compact) added,
	// by replacement id, ascending.
	Replacements []ReplacementFiles `json:"replacements,omitempty"`
	// Applied are the ids of the replacement records this entry folded
	// in; once the newest compacted entry names a record, cleanup may
	// delete it.
	Applied []string `json:"applied,omitempty"`
}

// BatchFiles are one batch's files.
type BatchFiles struct {
	BatchID ids.BatchID `json:"batchId"`
	Files   []string    `json:"files"`
}

// ReplacementFiles are the files one replacement added.
type ReplacementFiles struct {
	ID    string   `json:"id"`
	Files []string `json:"files"`
}

// logIndex is one log's listing: its batch entries and replacement
// records.
type logIndex struct {
	batches      []ids.BatchID        // batch ids with an entry (N or N.compact), ascending, unique
	compact      map[ids.BatchID]bool // batch ids whose entry is N.compact
	replacements []string             // replacement record ids, ascending
}

func newLogIndex() *logIndex { return &logIndex{compact: map[ids.BatchID]bool{}} }

// add records one name under the log's directory; other names are
// ignored.
func (x *logIndex) add(name string) {
	if id, ok := strings.CutPrefix(name, replacePrefix); ok {
		if checkReplacementID(id) == nil {
			x.replacements = append(x.replacements, id)
		}
		return
	}
	num, compact := strings.CutSuffix(name, compactSuffix)
	n, err := ids.ParseBatchID(num)
	if err != nil || n < 0 || n.String() != num {
		return
	}
	x.batches = append(x.batches, n)
	if compact {
		x.compact[n] = true
	}
}

func (x *logIndex) sort() {
	slices.Sort(x.batches)
	x.batches = slices.Compact(x.batches)
	slices.Sort(x.replacements)
}

// last is the newest batch id, -1 if none.
func (x *logIndex) last() ids.BatchID {
	if len(x.batches) == 0 {
		return -1
	}
	return x.batches[len(x.batches)-1]
}

// compactAtOrBefore is the newest compacted entry's batch id <= n, -1 if
// none.
func (x *logIndex) compactAtOrBefore(n ids.BatchID) ids.BatchID {
	for i := len(x.batches) - 1; i >= 0; i-- {
		if b := x.batches[i]; b <= n && x.compact[b] {
			return b
		}
	}
	return -1
}

func (x *logIndex) latestCompact() ids.BatchID { return x.compactAtOrBefore(x.last()) }

func (s *Sink) compactInterval() int64 {
	if s.opts.CompactInterval > 0 {
		return int64(s.opts.CompactInterval)
	}
	return DefaultCompactInterval
}

func (s *Sink) minBatchesToRetain() int64 {
	if s.opts.MinBatchesToRetain > 0 {
		return int64(s.opts.MinBatchesToRetain)
	}
	return DefaultMinBatchesToRetain
}

// isCompactBatch is Spark's rule: batch N is compacted when
// (N+1) % compactInterval == 0.
func (s *Sink) isCompactBatch(n ids.BatchID) bool { return (n+1)%ids.BatchID(s.compactInterval()) == 0 }

// lookup reads batch n's entry in either form, the one this sink's
// interval would write first. It returns the key read; an error matching
// objstore.ErrNotExist when neither is there.
func (s *Sink) lookup(ctx context.Context, l logLayout, n ids.BatchID) (LogEntry, string, error) {
	keys := []string{l.key(n), l.compactKey(n)}
	if s.isCompactBatch(n) {
		keys[0], keys[1] = keys[1], keys[0]
	}
	var err error
	for _, k := range keys {
		var e LogEntry
		if e, err = readEntry(ctx, s.store, k); err == nil {
			return e, k, nil
		}
		if !errors.Is(err, objstore.ErrNotExist) {
			return LogEntry{}, "", err
		}
	}
	return LogEntry{}, "", err
}

// foldedLog is one log's content up to a batch: the files of each batch,
// the files replacements added, and the replacements folded in.
type foldedLog struct {
	prefix  string // the log's
	queryID string
	batches map[ids.BatchID][]string
	reps    map[string][]string
	applied map[string]bool
	// entries are the entries read whole (the newest compacted one and
	// those after it), with their uploads.
	entries []LogEntry
}

// readLog folds the log at prefix up to batch upTo: the newest compacted
// entry at or before upTo, then every plain entry after it. The entries
// are read readLogParallel at a time (a compacted entry's batch reads the
// compactInterval entries before it, one round trip each on S3). An entry
// listed but gone (cleanup between the listing and the read) is an error
// matching objstore.ErrNotExist: list again.
func readLog(ctx context.Context, store objstore.Store, l logLayout, x *logIndex, upTo ids.BatchID) (*foldedLog, error) {
	return readLogCached(ctx, store, l, x, upTo, nil)
}

// readLogCached is readLog taking the entries cached holds (by key) from
// there: log entries never change once written.
func readLogCached(ctx context.Context, store objstore.Store, l logLayout, x *logIndex, upTo ids.BatchID, cached map[string]LogEntry) (*foldedLog, error) {
	f := &foldedLog{prefix: l.prefix, batches: map[ids.BatchID][]string{}, reps: map[string][]string{}, applied: map[string]bool{}}
	c := x.compactAtOrBefore(upTo)
	var keys []string
	var ns []ids.BatchID // the batch of each plain entry in keys
	if c >= 0 {
		keys = append(keys, l.compactKey(c))
	}
	for _, n := range x.batches {
		if n > c && n <= upTo {
			keys = append(keys, l.keyOf(x, n))
			ns = append(ns, n)
		}
	}
	entries := make([]LogEntry, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readLogParallel)
	for i, k := range keys {
		if e, ok := cached[k]; ok {
			entries[i] = e
			continue
		}
		g.Go(func() (err error) {
			entries[i], err = readEntry(gctx, store, k)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if c >= 0 {
		e := entries[0]
		entries = entries[1:]
		if e.Compacted == nil {
			return nil, fmt.Errorf("read sink log entry %s: a compacted entry without its \"compacted\" part", l.compactKey(c))
		}
		f.queryID = e.QueryID
		for _, b := range e.Compacted.Batches {
			f.batches[b.BatchID] = b.Files
		}
		for _, r := range e.Compacted.Replacements {
			f.reps[r.ID] = r.Files
		}
		for _, id := range e.Compacted.Applied {
			f.applied[id] = true
		}
		f.batches[c] = e.Files
		f.entries = append(f.entries, e)
	}
	for i, e := range entries {
		if f.queryID == "" {
			f.queryID = e.QueryID
		}
		f.batches[ns[i]] = e.Files
		f.entries = append(f.entries, e)
	}
	return f, nil
}

// readLogParallel is how many log entries readLog reads at once.
const readLogParallel = 8

// apply folds a replacement in: its removed files leave every batch and
// earlier replacement, its added files are listed under its id.
// Idempotent.
func (f *foldedLog) apply(r *Replacement) {
	gone := make(map[string]bool, len(r.Remove))
	for _, k := range r.Remove {
		gone[k] = true
	}
	drop := func(files []string) []string {
		return slices.DeleteFunc(slices.Clone(files), func(k string) bool { return gone[k] })
	}
	for n, files := range f.batches {
		f.batches[n] = drop(files)
	}
	for id, files := range f.reps {
		f.reps[id] = drop(files)
	}
	f.reps[r.ID] = slices.Clone(r.Add)
	f.applied[r.ID] = true
}

// files returns every file the folded log lists, sorted by batch then
// replacement id.
func (f *foldedLog) files() []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(f.batches)) {
		out = append(out, f.batches[n]...)
	}
	for _, id := range slices.Sorted(maps.Keys(f.reps)) {
		out = append(out, f.reps[id]...)
	}
	return out
}

// buildCompact folds the log before batch n, and the replacements done
// by now, into the compacted part of n's entry. It reads the newest
// compacted entry and the entries after it: compactInterval objects or
// so, and once the whole history of a log written before compaction.
func (s *Sink) buildCompact(ctx context.Context, l logLayout, n ids.BatchID) (*Compacted, error) {
	lk, err := listLog(ctx, s.store)
	if err != nil {
		return nil, err
	}
	x := lk.index(l.prefix)
	f, err := readLogCached(ctx, s.store, l, x, n-1, s.cachedEntries())
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, id := range x.replacements {
		r, err := readReplacement(ctx, s.store, l, id)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // cleaned up meanwhile: an older compacted entry holds it
		}
		if err != nil {
			return nil, err
		}
		if r.State != StateDone {
			continue // readers decide whether it is in effect yet
		}
		if !f.applied[id] {
			f.apply(r)
		}
		applied = append(applied, id)
	}
	c := &Compacted{Batches: []BatchFiles{}, Applied: applied}
	for _, b := range slices.Sorted(maps.Keys(f.batches)) {
		if b < n && len(f.batches[b]) > 0 {
			c.Batches = append(c.Batches, BatchFiles{BatchID: b, Files: f.batches[b]})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.reps)) {
		if len(f.reps[id]) > 0 {
			c.Replacements = append(c.Replacements, ReplacementFiles{ID: id, Files: f.reps[id]})
		}
	}
	return c, nil
}

// cacheEntry keeps an entry this sink wrote (or found written) for the
// next compacted entry's fold, which reads the entries since the last
// compacted one: on S3 a GET each. A compacted entry drops the entries
// before it.
func (s *Sink) cacheEntry(key string, e LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Compacted != nil {
		for k, c := range s.entries {
			if c.BatchID < e.BatchID {
				delete(s.entries, k)
			}
		}
	}
	if len(s.entries) >= 4*int(s.compactInterval())+4 {
		clear(s.entries) // a log that never compacts (a foreign layout): stop caching
	}
	s.entries[key] = e
}

func (s *Sink) cachedEntries() map[string]LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.entries)
}

// cleanupAsync starts a cleanup of the log after batch n's compacted entry
// (and the compaction of closed dates, when on). If one is running, it
// runs once more when done, for the newest batch asked.
func (s *Sink) cleanupAsync(l logLayout, queryID string, n ids.BatchID) {
	s.mu.Lock()
	if s.bgCtx.Err() != nil { // closed
		s.mu.Unlock()
		return
	}
	if s.cleaning {
		s.cleanAgain = max(s.cleanAgain, n)
		s.mu.Unlock()
		return
	}
	s.cleaning, s.cleanAgain = true, -1
	s.cleanWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.cleanWG.Done()
		for {
			// Cleanup is a few deletes: Close waits for it. The
			// compaction of closed dates may take long: Close cuts it
			// short.
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			if err := s.cleanup(ctx, l, n); err != nil {
				s.logger.Warn("sink log cleanup failed (it is retried after the next compacted entry)", "query", queryID, "batch", n, "path", s.path(), "err", err)
			}
			cancel()
			if s.opts.ClosedWatermark != nil && s.bgCtx.Err() == nil {
				ctx, cancel := context.WithTimeout(s.bgCtx, cleanupTimeout)
				s.compactClosed(ctx, queryID, n)
				cancel()
			}
			s.mu.Lock()
			if s.cleanAgain < 0 || s.bgCtx.Err() != nil {
				s.cleaning = false
				s.mu.Unlock()
				return
			}
			n, s.cleanAgain = s.cleanAgain, -1
			s.mu.Unlock()
		}
	}()
}

// compactClosed runs CompactDates with the checkpoint's committed
// watermark: the compactClosedDates policy.
func (s *Sink) compactClosed(ctx context.Context, queryID string, n ids.BatchID) {
	wm, err := s.opts.ClosedWatermark(ctx)
	if err != nil {
		s.logger.Warn("compaction of closed dates: read the committed watermark", "query", queryID, "batch", n, "path", s.path(), "err", err)
		return
	}
	res, err := CompactDates(ctx, s.store, CompactOptions{QueryID: queryID, Watermark: wm})
	if errors.Is(err, ErrCompactionRunning) {
		s.logger.Info("compaction of closed dates skipped this time", "query", queryID, "batch", n, "path", s.path(), "reason", err)
		return
	}
	if err != nil {
		s.logger.Warn("compaction of closed dates failed (retried after the next compacted entry)", "query", queryID, "batch", n, "path", s.path(), "err", err)
	}
	for _, d := range res {
		if d.Skipped == "" {
			s.logger.Info("compacted a closed date", "query", queryID, "path", s.path(), "date", d.Date, "filesBefore", d.FilesBefore, "filesAfter", d.FilesAfter, "rows", d.Rows)
		}
	}
}

// Wait blocks until the background work (log cleanup, the compaction of
// closed dates), if any is running, has finished.
func (s *Sink) Wait() { s.cleanWG.Wait() }

// Close waits for a running log cleanup, cuts a running compaction of
// closed dates short (a replacement left pending is finished by the next
// compaction) and starts no more background work.
func (s *Sink) Close() error {
	s.bgCancel()
	s.cleanWG.Wait()
	return nil
}

// cleanup deletes the entries of the log at l that no longer matter after
// batch n committed: every entry older than the newest compacted entry at
// or before n-minBatchesToRetain+1 (so each of the last
// minBatchesToRetain batches can still be folded from the log), except
// entries of batches whose staged uploads are still pending (a restart
// completes those from their entry); and the replacement records the
// newest compacted entry folded in and that are done.
func (s *Sink) cleanup(ctx context.Context, l logLayout, n ids.BatchID) error {
	lk, err := listLog(ctx, s.store)
	if err != nil {
		return err
	}
	x := lk.index(l.prefix)
	floor := x.compactAtOrBefore(n - ids.BatchID(s.minBatchesToRetain()) + 1)
	pending, err := s.store.List(ctx, PendingDir)
	if err != nil {
		return fmt.Errorf("list pending uploads: %w", err)
	}
	for _, k := range pending {
		num, _, _ := strings.Cut(strings.TrimPrefix(k, PendingDir), "/")
		if p, err := ids.ParseBatchID(num); err == nil && p < floor {
			floor = p
		}
	}
	for _, b := range x.batches {
		if b >= floor {
			break
		}
		if err := s.store.Delete(ctx, l.keyOf(x, b)); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("delete sink log entry %d: %w", b, err)
		}
	}
	latest := x.latestCompact()
	if latest < 0 || len(x.replacements) == 0 {
		return nil
	}
	e, err := readEntry(ctx, s.store, l.compactKey(latest))
	if err != nil {
		return err
	}
	for _, id := range e.Compacted.Applied {
		if !slices.Contains(x.replacements, id) {
			continue
		}
		r, err := readReplacement(ctx, s.store, l, id)
		if err != nil {
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			return err
		}
		if r.State != StateDone {
			continue
		}
		if err := s.store.Delete(ctx, l.prefix+replacePrefix+id); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("delete sink log replacement %s: %w", id, err)
		}
	}
	return nil
}
