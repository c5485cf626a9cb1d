package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink"
)

// LogDir is the sink log's directory under the sink path.
const LogDir = "_sink_log/"

// logVersion is the format version of sink log entries this build writes.
// Version 1 (files written visibly by the reduce tasks) is still read;
// version 2 adds "uploads": the staged files Commit completes.
const logVersion = 2

// ErrForeignSinkLog means the sink path holds a sink log written by another
// query id than the one writing now: the checkpoint was probably deleted or
// two queries share a sink path. Production queries refuse it; lab queries
// are warned and write their windows again.
var ErrForeignSinkLog = errors.New("sink log written by another query")

// ForeignSinkLogError details ErrForeignSinkLog.
type ForeignSinkLogError struct {
	Path    string      // the sink path
	QueryID string      // the query writing now
	Other   string      // the query that wrote the log
	Batch   ids.BatchID // the batch whose entry conflicts, or -1 for a start check
}

func (e *ForeignSinkLogError) Error() string {
	if e.Batch >= 0 {
		return fmt.Sprintf("sink %s: %s%d was written by query %s, not by this query %s: one sink path takes the output of one query", e.Path, LogDir, e.Batch, e.Other, e.QueryID)
	}
	return fmt.Sprintf("sink %s holds output of query %s, and this query %s has written nothing there: a production query refuses to write its windows again (the checkpoint was probably deleted); restore the checkpoint or use a new sink path", e.Path, e.Other, e.QueryID)
}

func (e *ForeignSinkLogError) Unwrap() error { return ErrForeignSinkLog }

// LogEntry is one sink log document: the files one batch of one query
// committed.
type LogEntry struct {
	Version int         `json:"version"`
	QueryID string      `json:"queryId"`
	BatchID ids.BatchID `json:"batchId"`
	Files   []string    `json:"files"`
	// Uploads are the staged files that make Files, sorted by key; a
	// restarted driver completes them again (idempotently).
	Uploads []Upload `json:"uploads,omitempty"`
	// Compacted is set on a compacted entry (N.compact, version 3): it
	// stands for every earlier entry of the log.
	Compacted *Compacted `json:"compacted,omitempty"`
	// Replacement is set on the entries LogEntries makes for files a
	// replacement (driver compact) added; their BatchID is -1. Never
	// written.
	Replacement string `json:"-"`
}

// logLayout says where a query's entries live: the primary log
// (_sink_log/<N>) or its own secondary log (_sink_log/<queryID>/<N>).
type logLayout struct {
	prefix string
	// adopted is true when the query writes a secondary log that held
	// nothing of it when resolved: it is writing over another query's
	// output.
	adopted bool
}

func (l logLayout) key(batchID ids.BatchID) string { return l.prefix + batchID.String() }

// compactKey is the key of batch batchID's compacted entry.
func (l logLayout) compactKey(batchID ids.BatchID) string { return l.key(batchID) + compactSuffix }

// keyOf is the key of batch batchID's entry as the index lists it.
func (l logLayout) keyOf(x *logIndex, batchID ids.BatchID) string {
	if x != nil && x.compact[batchID] {
		return l.compactKey(batchID)
	}
	return l.key(batchID)
}

// logKeys is a parsed listing of the sink log.
type logKeys struct {
	primary   *logIndex
	secondary map[string]*logIndex // query id -> its log
}

// index returns the listing of the log at prefix (never nil).
func (lk logKeys) index(prefix string) *logIndex {
	if prefix == LogDir {
		return lk.primary
	}
	if x := lk.secondary[strings.TrimSuffix(strings.TrimPrefix(prefix, LogDir), "/")]; x != nil {
		return x
	}
	return newLogIndex()
}

func listLog(ctx context.Context, store objstore.Store) (logKeys, error) {
	keys, err := store.List(ctx, LogDir)
	if err != nil {
		return logKeys{}, fmt.Errorf("list sink log: %w", err)
	}
	lk := logKeys{primary: newLogIndex(), secondary: make(map[string]*logIndex)}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, LogDir)
		qid, name, nested := strings.Cut(rest, "/")
		x := lk.primary
		if !nested {
			name = qid
		} else {
			if checkQueryID(qid) != nil || strings.Contains(name, "/") {
				continue
			}
			if x = lk.secondary[qid]; x == nil {
				x = newLogIndex()
				lk.secondary[qid] = x
			}
		}
		x.add(name) // not a log entry (an operator's note, a temp file): ignored
	}
	lk.primary.sort()
	for q, x := range lk.secondary {
		if len(x.batches) == 0 && len(x.replacements) == 0 {
			delete(lk.secondary, q)
			continue
		}
		x.sort()
	}
	return lk, nil
}

func readEntry(ctx context.Context, store objstore.Store, key string) (LogEntry, error) {
	data, err := store.Get(ctx, key)
	if err != nil {
		return LogEntry{}, fmt.Errorf("read sink log entry: %w", err)
	}
	var e LogEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return LogEntry{}, fmt.Errorf("read sink log entry %s: %w", key, err)
	}
	if e.Version < 1 || e.Version > compactVersion {
		return LogEntry{}, fmt.Errorf("read sink log entry %s: format version %d, this build reads 1 to %d", key, e.Version, compactVersion)
	}
	return e, nil
}

// primaryOwner returns the query id of the primary log's entries (all of
// them have one: the primary log is only ever written by the query that
// found it empty), or "" if it is empty.
func primaryOwner(ctx context.Context, store objstore.Store, lk logKeys) (string, error) {
	n := lk.primary.last()
	if n < 0 {
		return "", nil
	}
	e, err := readEntry(ctx, store, logLayout{prefix: LogDir}.keyOf(lk.primary, n))
	if err != nil {
		return "", err
	}
	return e.QueryID, nil
}

// resolve decides where queryID's entries go: its secondary log if it has
// one, else the primary log if that is empty or its own, else a new
// secondary log (adopted).
func resolve(ctx context.Context, store objstore.Store, queryID string) (logLayout, error) {
	lk, err := listLog(ctx, store)
	if err != nil {
		return logLayout{}, err
	}
	secondary := logLayout{prefix: LogDir + queryID + "/"}
	if lk.secondary[queryID] != nil {
		return secondary, nil
	}
	owner, err := primaryOwner(ctx, store, lk)
	if err != nil {
		return logLayout{}, err
	}
	if owner == "" || owner == queryID {
		return logLayout{prefix: LogDir}, nil
	}
	secondary.adopted = true
	return secondary, nil
}

// CheckOwner reports whether the sink path holds output of another query
// while queryID has written nothing there: it returns that other query's id
// (the writer of the entry with the highest batch id), or "" when the log is
// empty or queryID already has entries (it is continuing its own run).
func (s *Sink) CheckOwner(ctx context.Context, queryID string) (string, error) {
	return CheckOwner(ctx, s.store, queryID)
}

// CheckOwner is Sink.CheckOwner on a store rooted at a sink path.
func CheckOwner(ctx context.Context, store objstore.Store, queryID string) (string, error) {
	lk, err := listLog(ctx, store)
	if err != nil {
		return "", err
	}
	if lk.secondary[queryID] != nil {
		return "", nil
	}
	owner, err := primaryOwner(ctx, store, lk)
	if err != nil {
		return "", err
	}
	if owner == queryID {
		return "", nil
	}
	other, newest := owner, lk.primary.last()
	qids := make([]string, 0, len(lk.secondary))
	for q := range lk.secondary {
		qids = append(qids, q)
	}
	slices.Sort(qids)
	for _, q := range qids {
		if n := lk.secondary[q].last(); n > newest {
			other, newest = q, n
		}
	}
	return other, nil
}

// Prepare binds the sink to the query that will commit through it and
// checks the sink log. If the path holds output of another query and this
// one has written nothing there (its checkpoint was probably deleted), a
// lab query logs a warning and goes on, writing its windows again into its
// own log; a production query gets an error matching ErrForeignSinkLog.
// env "" means Options.Environment. Committed needs Prepare; WritePartition
// does not (executors never call Prepare).
func (s *Sink) Prepare(ctx context.Context, queryID string, env query.Environment) error {
	if s.initErr != nil {
		return s.initErr
	}
	if err := checkQueryID(queryID); err != nil {
		return err
	}
	if env == "" {
		env = s.opts.Environment
	}
	if env == "" {
		env = query.Lab
	}
	other, err := s.CheckOwner(ctx, queryID)
	if err != nil {
		return fmt.Errorf("prepare parquet sink %s: %w", s.path(), err)
	}
	if other != "" {
		if env == query.Production {
			return &ForeignSinkLogError{Path: s.path(), QueryID: queryID, Other: other, Batch: -1}
		}
		s.logger.Warn(fmt.Sprintf("sink path holds output of query %s; this query will write its windows again (the checkpoint was probably deleted)", other),
			"query", queryID, "otherQuery", other, "path", s.path())
	}
	layout, err := resolve(ctx, s.store, queryID)
	if err != nil {
		return fmt.Errorf("prepare parquet sink %s: %w", s.path(), err)
	}
	layout.adopted = false // warned above; production refused above
	lk, err := listLog(ctx, s.store)
	if err != nil {
		return fmt.Errorf("prepare parquet sink %s: %w", s.path(), err)
	}
	s.mu.Lock()
	s.queryID, s.env = queryID, env
	s.resolved[queryID] = layout
	s.newest = lk.index(layout.prefix).last()
	s.mu.Unlock()
	// Finish the commit of every logged batch a crash interrupted, and
	// abort the staged files of attempts that never reached the log.
	if err := s.sweep(ctx, layout, queryID, -1, nil, nil); err != nil {
		return fmt.Errorf("prepare parquet sink %s: recover staged files: %w", s.path(), err)
	}
	if lister, ok := objstore.StagedListerOf(s.store); ok {
		if err := s.sweepStaged(ctx, lister, layout, queryID, -1, nil, []string{""}); err != nil {
			return fmt.Errorf("prepare parquet sink %s: recover staged files: %w", s.path(), err)
		}
	}
	return nil
}

// layoutFor returns (and caches) where queryID's entries go.
func (s *Sink) layoutFor(ctx context.Context, queryID string) (logLayout, query.Environment, error) {
	s.mu.Lock()
	l, ok := s.resolved[queryID]
	env := s.env
	s.mu.Unlock()
	if ok {
		return l, env, nil
	}
	l, err := resolve(ctx, s.store, queryID)
	if err != nil {
		return logLayout{}, env, err
	}
	s.mu.Lock()
	s.resolved[queryID] = l
	s.mu.Unlock()
	return l, env, nil
}

func (s *Sink) forget(queryID string) {
	s.mu.Lock()
	delete(s.resolved, queryID)
	s.mu.Unlock()
}

// Committed reports whether the prepared query's log holds batchID. It
// needs Prepare: which log to look in depends on the query id. A batch
// newer than every entry the log held at Prepare or since is not read:
// false.
func (s *Sink) Committed(ctx context.Context, batchID ids.BatchID) (bool, error) {
	s.mu.Lock()
	queryID := s.queryID
	s.mu.Unlock()
	if queryID == "" {
		return false, fmt.Errorf("check sink log batch %d: the parquet sink was not prepared (call Prepare with the query id before Committed)", batchID)
	}
	l, _, err := s.layoutFor(ctx, queryID)
	if err != nil {
		return false, fmt.Errorf("check sink log batch %d: %w", batchID, err)
	}
	s.mu.Lock()
	newest := s.newest
	s.mu.Unlock()
	if batchID > newest {
		// Newer than every entry there was at Prepare or since: the
		// usual case, a batch about to run, not read. Only a fenced
		// driver's entry, in the form this interval writes, could be
		// there; Commit's PutIfAbsent finds it (and completes that
		// entry's uploads instead, or refuses another query's).
		return false, nil
	}
	e, _, err := s.lookup(ctx, l, batchID)
	if errors.Is(err, objstore.ErrNotExist) {
		// Not there as N or N.compact: committed all the same if a
		// compacted entry newer than N folded it in and cleanup deleted
		// it (Spark: a batch id up to the log's latest is committed).
		lk, lerr := listLog(ctx, s.store)
		if lerr != nil {
			return false, fmt.Errorf("check sink log batch %d: %w", batchID, lerr)
		}
		x := lk.index(l.prefix)
		c := x.latestCompact()
		if c < batchID || (len(x.batches) > 0 && x.batches[0] <= batchID) {
			return false, nil
		}
		if e, err = readEntry(ctx, s.store, l.compactKey(c)); err != nil {
			return false, fmt.Errorf("check sink log batch %d: %w", batchID, err)
		}
	} else if err != nil {
		return false, fmt.Errorf("check sink log batch %d: %w", batchID, err)
	}
	if e.QueryID != queryID {
		s.forget(queryID)
		return false, &ForeignSinkLogError{Path: s.path(), QueryID: queryID, Other: e.QueryID, Batch: batchID}
	}
	return true, nil
}

// Commit writes the batch's log entry with create-if-absent, listing the
// files and their staged uploads, then completes the uploads (the files
// become visible) and resolves the batch's pending records: uploads of
// attempts the log does not name are aborted. An entry already there from
// the same query and batch wins: its uploads are completed (idempotently)
// and the files offered are ignored, so Commit(b, nil) finishes the commit
// of a logged batch. An entry from another query is an error matching
// ErrForeignSinkLog, and so is a production query about to write its first
// entry beside another query's log.
func (s *Sink) Commit(ctx context.Context, b sink.Batch, files []string) error {
	if s.initErr != nil {
		return s.initErr
	}
	if err := checkQueryID(b.QueryID); err != nil {
		return err
	}
	s.mu.Lock()
	prepared := s.queryID
	s.mu.Unlock()
	if prepared != "" && prepared != b.QueryID {
		return fmt.Errorf("commit sink log batch %d: query %s, but the sink was prepared for query %s", b.ID, b.QueryID, prepared)
	}
	l, env, err := s.layoutFor(ctx, b.QueryID)
	if err != nil {
		return fmt.Errorf("commit sink log batch %d: %w", b.ID, err)
	}
	if l.adopted && env == query.Production {
		s.forget(b.QueryID)
		other, err := s.CheckOwner(ctx, b.QueryID)
		if err != nil {
			return fmt.Errorf("commit sink log batch %d: %w", b.ID, err)
		}
		return &ForeignSinkLogError{Path: s.path(), QueryID: b.QueryID, Other: other, Batch: -1}
	}
	if l.adopted {
		// Prepare was skipped (it would have warned already).
		s.logger.Warn("sink path holds output of another query; this query will write its windows again (the checkpoint was probably deleted)",
			"query", b.QueryID, "batch", b.ID, "path", s.path())
	}
	var keys []string
	var uploads []Upload
	var records []string // the pending records of the offered files
	for _, f := range files {
		sf, staged, err := parseStaged(f)
		if err != nil {
			return fmt.Errorf("commit sink log batch %d: %w", b.ID, err)
		}
		keys = append(keys, sf.Key)
		if staged {
			uploads = append(uploads, sf.Upload)
			if sf.Pending != "" {
				records = append(records, sf.Pending)
			}
		}
	}
	slices.Sort(records)
	records = slices.Compact(records)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if keys == nil {
		keys = []string{}
	}
	slices.SortFunc(uploads, func(a, b Upload) int { return strings.Compare(a.Key, b.Key) })
	entry := LogEntry{Version: logVersion, QueryID: b.QueryID, BatchID: b.ID, Files: keys, Uploads: uploads}
	compact := s.isCompactBatch(b.ID)
	key := l.key(b.ID)
	s.mu.Lock()
	unseen := prepared != "" && b.ID > s.newest
	s.mu.Unlock()
	var err2 error
	if !unseen && (len(files) == 0 || compact) {
		// A re-run's finish (no files) or a compacted entry: the batch
		// may be logged already in the other form (a run with another
		// compactInterval), and that entry wins. A batch newer than
		// every entry there was at Prepare or since (an empty batch
		// about to be logged, usually) can only be there in the form
		// this interval writes (a fenced driver's), which PutIfAbsent
		// finds.
		_, gotKey, lerr := s.lookup(ctx, l, b.ID)
		switch {
		case lerr == nil:
			key, err2 = gotKey, objstore.ErrExists
		case !errors.Is(lerr, objstore.ErrNotExist):
			return fmt.Errorf("commit sink log batch %d: %w", b.ID, lerr)
		}
	}
	if err2 == nil {
		if compact {
			key = l.compactKey(b.ID)
			if entry.Compacted, err = s.buildCompact(ctx, l, b.ID); err != nil {
				return fmt.Errorf("commit sink log batch %d: compact the log: %w", b.ID, err)
			}
			entry.Version = compactVersion
		}
		data, err := json.MarshalIndent(entry, "", "  ")
		if err != nil {
			return fmt.Errorf("commit sink log batch %d: %w", b.ID, err)
		}
		data = append(data, '\n')
		err2 = s.store.PutIfAbsent(ctx, key, data)
	}
	switch err := err2; {
	case err == nil:
		s.mu.Lock()
		s.resolved[b.QueryID] = logLayout{prefix: l.prefix}
		s.newest = max(s.newest, b.ID)
		s.mu.Unlock()
		s.cacheEntry(key, entry)
	case !errors.Is(err, objstore.ErrExists):
		return fmt.Errorf("commit sink log batch %d: %w", b.ID, err)
	default:
		got, rerr := readEntry(ctx, s.store, key)
		if rerr != nil {
			return fmt.Errorf("commit sink log batch %d: %w", b.ID, rerr)
		}
		if got.QueryID != b.QueryID || got.BatchID != b.ID {
			s.forget(b.QueryID)
			return &ForeignSinkLogError{Path: s.path(), QueryID: b.QueryID, Other: got.QueryID, Batch: b.ID}
		}
		if len(files) > 0 && !slices.Equal(got.Files, keys) {
			s.logger.Warn("sink log entry already written with other files; keeping the logged list",
				"query", b.QueryID, "batch", b.ID, "logged", got.Files, "offered", keys)
		}
		entry = got
		s.mu.Lock()
		s.newest = max(s.newest, b.ID)
		s.mu.Unlock()
		s.cacheEntry(key, got)
	}
	// The entry is durable: from here on a restart completes it too. The
	// offered files' records are this attempt's only if the entry is.
	var mine []string
	if err2 == nil {
		mine = records
	}
	if err := s.finish(ctx, logLayout{prefix: l.prefix}, b.QueryID, entry, mine); err != nil {
		return err
	}
	if entry.Compacted != nil {
		// Off the batch path: delete what the new compacted entry makes
		// unnecessary.
		s.cleanupAsync(logLayout{prefix: l.prefix}, b.QueryID, b.ID)
	}
	return nil
}

// checkQueryID accepts ids that are safe as a path component and a file
// name part: letters, digits, '-' and '_', at most 128 characters.
func checkQueryID(id string) error {
	if id == "" {
		return fmt.Errorf("query id is empty")
	}
	if len(id) > 128 {
		return fmt.Errorf("query id %q is longer than 128 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("query id %q has character %q: want letters, digits, '-' or '_'", id, r)
		}
	}
	return nil
}
