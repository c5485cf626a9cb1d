package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/statestore"
)

// FormatVersion is written in every log entry.
const FormatVersion = 1

// ErrFenced is returned when another writer created a log entry this driver
// meant to create: another driver runs the same checkpoint.
var ErrFenced = errors.New("fenced: another driver wrote this checkpoint")

// ErrIncompatibleCheckpoint is returned when the query no longer matches its
// checkpoint: a new checkpoint is required.
var ErrIncompatibleCheckpoint = errors.New("new checkpoint required")

// FencedError details a lost create-if-absent. It matches ErrFenced.
type FencedError struct {
	Batch  ids.BatchID
	Object string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("batch %d: %s was already written by another driver: %v", e.Batch, e.Object, ErrFenced)
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Metadata describes the query that owns the checkpoint, and the settings
// frozen for its life.
type Metadata struct {
	Version           int    `json:"version"`
	QueryID           string `json:"id"`
	Name              string `json:"name"`
	Fingerprint       string `json:"fingerprint"`
	StateFingerprint  string `json:"stateFingerprint"`
	StateDescription  string `json:"stateDescription"`
	StateStore        string `json:"stateStore"`
	ShufflePartitions int    `json:"shufflePartitions"`
	KeyHash           string `json:"keyHash"`
	CreatedAt         string `json:"createdAt"`
	// Approvals are the production guards' consents this checkpoint was
	// created under (a first start or a replay): who, when and the
	// ticket. Absent in metadata written before approvals were recorded,
	// and for lab queries, which need none.
	Approvals []Approval `json:"approvals,omitempty"`
}

// Approval kinds: what the production guard was told.
const (
	ApprovalFirstStart = "first-start"
	ApprovalReplay     = "replay"
)

// Approval is one recorded consent to start a production query on an
// empty checkpoint.
type Approval struct {
	// Kind is ApprovalFirstStart or ApprovalReplay.
	Kind string `json:"kind"`
	// Ticket is the change or incident ticket the approval was given
	// under (--allow-first-start=TICKET, --allow-replay=TICKET).
	Ticket string `json:"ticket"`
	// By names who approved: user@host, or --approved-by.
	By string `json:"by"`
	// At is when, RFC 3339 UTC.
	At string `json:"at"`
}

// String is "replay TICKET by WHO at WHEN".
func (a Approval) String() string {
	return fmt.Sprintf("%s %s by %s at %s", a.Kind, a.Ticket, a.By, a.At)
}

// SourceRange is one source's range for a batch: [Start, End).
type SourceRange struct {
	Start json.RawMessage `json:"start"`
	End   json.RawMessage `json:"end"`
}

// OffsetEntry is offsets/N: everything a re-run of batch N needs to see
// exactly what the first run saw. Its JSON (entry.go) writes the
// watermarks in milliseconds, as batchWatermarkMs and lateWatermarkMs.
type OffsetEntry struct {
	Version int
	BatchID ids.BatchID
	// BatchWatermark is the watermark batch N evicts with (computed after
	// N-1); LateWatermark is the watermark rows are dropped against
	// (batch N-1's own).
	BatchWatermark   eventtime.Watermark
	LateWatermark    eventtime.Watermark
	BatchTimestampMs int64
	NoData           bool
	Sources          []SourceRange
	// Conf holds the settings frozen for the query's life.
	Conf map[string]string
	// RunID is the driver run that wrote the entry: a retried write that
	// finds the entry already there recognises its own earlier attempt.
	RunID string
	// Manifest is the join's dimension snapshot the batch joins against
	// (absent for a query without a join, and in older entries).
	Manifest *ManifestRef
}

// ManifestRef names a stream-static join's dimension snapshot: its
// manifest id and its content hash, which names its copy in the
// checkpoint (manifests/<hash>.json; see package join).
type ManifestRef struct {
	ID   string `json:"id"`
	Hash string `json:"hash"`
}

// CommitEntry is commits/N. Its JSON (entry.go) writes the watermark in
// milliseconds, as nextBatchWatermarkMs.
type CommitEntry struct {
	Version            int
	BatchID            ids.BatchID
	NextBatchWatermark eventtime.Watermark
	// State says which state partitions' files make version N+1 (absent
	// for a query without state, and in entries of older versions).
	State *statestore.CommitRecord
	// RunID is the driver run that wrote the entry (see OffsetEntry).
	RunID string
	// StateOperators holds the records of the query's stateful operators
	// other than operator 0 (whose record is State), by operator id: a
	// query with dedup before an aggregate keeps two operators' state.
	StateOperators map[int]*statestore.CommitRecord
}

// Log reads and writes a checkpoint's log entries.
type Log struct {
	store objstore.Store
}

// New returns the log of the checkpoint rooted at store.
func New(store objstore.Store) *Log { return &Log{store: store} }

// Store returns the checkpoint's object store.
func (l *Log) Store() objstore.Store { return l.store }

func (l *Log) getJSON(ctx context.Context, key string, v any) error {
	b, err := l.store.Get(ctx, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	return nil
}

// ReadMetadata returns the metadata; an error matching objstore.ErrNotExist
// means the checkpoint is empty.
func (l *Log) ReadMetadata(ctx context.Context) (*Metadata, error) {
	var m Metadata
	if err := l.getJSON(ctx, "metadata", &m); err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	if m.Version > FormatVersion {
		return nil, fmt.Errorf("read metadata: format version %d is newer than this build's %d: %w", m.Version, FormatVersion, ErrIncompatibleCheckpoint)
	}
	return &m, nil
}

// CreateMetadata writes the metadata of a new checkpoint. If another driver
// created it first, the error matches ErrFenced.
func (l *Log) CreateMetadata(ctx context.Context, m *Metadata) error {
	m.Version = FormatVersion
	b, _ := json.Marshal(m)
	if err := l.store.PutIfAbsent(ctx, "metadata", append(b, '\n')); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return &FencedError{Batch: -1, Object: "metadata"}
		}
		return fmt.Errorf("write metadata: %w", err)
	}
	return nil
}

func (l *Log) batchIDs(ctx context.Context, dir string) ([]ids.BatchID, error) {
	keys, err := l.store.List(ctx, dir+"/")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []ids.BatchID
	for _, k := range keys {
		name := strings.TrimPrefix(k, dir+"/")
		if id, err := ids.ParseBatchID(name); err == nil && id >= 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// OffsetIDs and CommitIDs list the batch ids in each log, ascending.
func (l *Log) OffsetIDs(ctx context.Context) ([]ids.BatchID, error) {
	return l.batchIDs(ctx, "offsets")
}
func (l *Log) CommitIDs(ctx context.Context) ([]ids.BatchID, error) {
	return l.batchIDs(ctx, "commits")
}

// Offsets reads offsets/N.
func (l *Log) Offsets(ctx context.Context, id ids.BatchID) (*OffsetEntry, error) {
	var e OffsetEntry
	if err := l.getJSON(ctx, fmt.Sprintf("offsets/%d", id), &e); err != nil {
		return nil, fmt.Errorf("read offsets/%d: %w", id, err)
	}
	return &e, nil
}

// Commit reads commits/N.
func (l *Log) Commit(ctx context.Context, id ids.BatchID) (*CommitEntry, error) {
	var e CommitEntry
	if err := l.getJSON(ctx, fmt.Sprintf("commits/%d", id), &e); err != nil {
		return nil, fmt.Errorf("read commits/%d: %w", id, err)
	}
	return &e, nil
}

// Latest reads the newest offsets and commit entries (nil when absent).
func (l *Log) Latest(ctx context.Context) (*OffsetEntry, *CommitEntry, error) {
	oids, err := l.OffsetIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	cids, err := l.CommitIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	var o *OffsetEntry
	var c *CommitEntry
	if len(oids) > 0 {
		if o, err = l.Offsets(ctx, oids[len(oids)-1]); err != nil {
			return nil, nil, err
		}
	}
	if len(cids) > 0 {
		if c, err = l.Commit(ctx, cids[len(cids)-1]); err != nil {
			return nil, nil, err
		}
	}
	return o, c, nil
}

func (l *Log) create(ctx context.Context, key string, batch ids.BatchID, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := l.store.PutIfAbsent(ctx, key, append(b, '\n')); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return &FencedError{Batch: batch, Object: key}
		}
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// WriteOffsets creates offsets/N before batch N runs.
func (l *Log) WriteOffsets(ctx context.Context, e *OffsetEntry) error {
	e.Version = FormatVersion
	return l.create(ctx, fmt.Sprintf("offsets/%d", e.BatchID), e.BatchID, e)
}

// WrittenBy reports whether the log entry at key (offsets/N or commits/N)
// was written by the driver run runID.
func (l *Log) WrittenBy(ctx context.Context, key, runID string) (bool, error) {
	var e struct {
		RunID string `json:"runId"`
	}
	if err := l.getJSON(ctx, key, &e); err != nil {
		return false, err
	}
	return runID != "" && e.RunID == runID, nil
}

// WriteCommit creates commits/N after the sink committed batch N.
func (l *Log) WriteCommit(ctx context.Context, e *CommitEntry) error {
	e.Version = FormatVersion
	return l.create(ctx, fmt.Sprintf("commits/%d", e.BatchID), e.BatchID, e)
}

// RetainFrom is the oldest batch whose log entries retention keeps once
// batch committed has committed, keeping retain batches (>= 1): entries of
// batches before it, and state versions before it that no kept version
// needs, may be deleted. It is -1 (keep everything) while fewer than
// retain batches have committed. Batch committed+1 (the next, or a re-run
// of an uncommitted one) needs offsets/committed+1, commits/committed and
// state version committed+1, all at or after RetainFrom.
func RetainFrom(committed ids.BatchID, retain int64) ids.BatchID {
	if retain < 1 {
		retain = 1
	}
	from := committed + 1 - ids.BatchID(retain)
	if from < 0 {
		return -1
	}
	return from
}

// Cleanup deletes offsets and commits entries of batches before keep and
// returns how many it deleted. Interrupted, it leaves a
// log whose newest entries are untouched (what a restart reads), so a
// later Cleanup finishes the job.
func (l *Log) Cleanup(ctx context.Context, keep ids.BatchID) (int, error) {
	deleted := 0
	for _, dir := range []string{"offsets", "commits"} {
		batches, err := l.batchIDs(ctx, dir)
		if err != nil {
			return deleted, err
		}
		var keys []string
		for _, id := range batches {
			if id >= keep {
				break
			}
			keys = append(keys, fmt.Sprintf("%s/%d", dir, id))
		}
		// In parallel: the newest entries (what a restart reads) are never
		// among them, so the order does not matter.
		n, err := objstore.DeleteAll(ctx, l.store, keys, 8)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("clean up %s: %w", dir, err)
		}
	}
	return deleted, nil
}

// Resume is what a starting driver does next, decided from the log alone.
type Resume struct {
	// Rerun is set when the newest batch was planned but not committed: it
	// runs again exactly as logged.
	Rerun *OffsetEntry
	// NextBatch is the id of the next batch to plan (when Rerun is nil).
	NextBatch ids.BatchID
	// Last is the newest offsets entry (nil for a fresh checkpoint): its
	// ends are where the next batch starts.
	Last *OffsetEntry
	// Watermark is the watermark the next planned batch evicts with, and
	// LateWatermark the one it drops late rows against (the last batch's).
	Watermark, LateWatermark eventtime.Watermark
}

// Decide applies the restart rule (docs/semantics.md, "Restart") to the
// newest offsets and commit: with commits up to N, the next batch is N+1
// with watermark max(offsets[N]'s, commits[N]'s next); with offsets/N and no
// commits/N, batch N runs again exactly as logged.
func Decide(last *OffsetEntry, commit *CommitEntry) (Resume, error) {
	switch {
	case last == nil && commit == nil:
		return Resume{NextBatch: 0}, nil
	case last == nil:
		return Resume{}, fmt.Errorf("commits/%d exists without offsets: %w", commit.BatchID, ErrIncompatibleCheckpoint)
	case commit == nil || commit.BatchID < last.BatchID:
		if commit != nil && commit.BatchID < last.BatchID-1 {
			return Resume{}, fmt.Errorf("offsets/%d follows commits/%d: batches in between never committed: %w", last.BatchID, commit.BatchID, ErrIncompatibleCheckpoint)
		}
		return Resume{Rerun: last, Last: last}, nil
	case commit.BatchID == last.BatchID:
		wm := max(last.BatchWatermark, commit.NextBatchWatermark)
		return Resume{NextBatch: last.BatchID + 1, Last: last, Watermark: wm, LateWatermark: last.BatchWatermark}, nil
	default:
		return Resume{}, fmt.Errorf("commits/%d is newer than offsets/%d: %w", commit.BatchID, last.BatchID, ErrIncompatibleCheckpoint)
	}
}
