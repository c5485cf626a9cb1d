package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// CommitRecord is the state part of the checkpoint's commits/N: the state
// partitions whose batch-N reduce wrote a delta (and a snapshot) for
// version N+1, and the attempt that wrote them. A partition not listed was
// unchanged by the committed attempt, so a file for version N+1 there is a
// stray of an abandoned attempt and is never loaded; a listed file that is
// missing is an error. The driver writes it from the reduce results (a
// delta was written when the partition's state writes are >= 1, a
// snapshot when >= 2).
type CommitRecord struct {
	// Format is 2 when the files carry their attempt in their names
	// (<v>-<attempt>.delta); absent (1) for names without it.
	Format    int               `json:"format,omitempty"`
	Deltas    []ids.PartitionID `json:"deltas"`
	Snapshots []ids.PartitionID `json:"snapshots,omitempty"`
	// Attempts names the attempt whose files make each listed partition's
	// version (format 2); a listed partition without one has files named
	// without an attempt.
	Attempts map[ids.PartitionID]string `json:"attempts,omitempty"`
}

// RecordFormat is the CommitRecord format this version writes.
const RecordFormat = 2

// A query with several stateful operators (dedup before an aggregate)
// has a record per operator in commits/N: operator 0's under "state", as
// a query with one operator always had it, and each other operator's
// under "stateOperators" by its id (OperatorsField). A provider follows the
// records of its own operator (MemoryOptions.Operator,
// PebbleOptions.Operator).

// OperatorsField is the commits/N field that holds the CommitRecords of
// the operators other than 0, by operator id in decimal.
const OperatorsField = "stateOperators"

// attempt is the attempt recorded for partition p ("" when none).
func (r *CommitRecord) attempt(p ids.PartitionID) string {
	if r == nil {
		return ""
	}
	return r.Attempts[p]
}

// records reads the CommitRecords of committed batches from the
// checkpoint (commits/N is immutable once written, so they are cached).
type records struct {
	store objstore.Store
	// op is the operator whose records these are.
	op    int
	mu    sync.Mutex
	cache map[ids.BatchID]*CommitRecord
}

// cleanupParallel bounds the deletes a partition's cleanup has in flight.
const cleanupParallel = 8

// recordCacheMax bounds the records cached.
const recordCacheMax = 2048

func newRecords(store objstore.Store, op int) *records {
	return &records{store: store, op: op, cache: map[ids.BatchID]*CommitRecord{}}
}

// get returns batch's record of r's operator, or nil when commits/<batch>
// is absent (cleaned up, or not committed) or has no state record for the
// operator (written by an older version).
func (r *records) get(ctx context.Context, batch ids.BatchID) (*CommitRecord, error) {
	if batch < 0 {
		return nil, nil
	}
	r.mu.Lock()
	rec, ok := r.cache[batch]
	r.mu.Unlock()
	if ok {
		return rec, nil
	}
	key := "commits/" + batch.String()
	data, err := r.store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state record %s: %w", key, err)
	}
	var doc struct {
		State     *CommitRecord            `json:"state"`
		Operators map[string]*CommitRecord `json:"stateOperators"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read state record %s: %w", key, err)
	}
	rec = doc.State
	if r.op != 0 {
		rec = doc.Operators[strconv.Itoa(r.op)]
	}
	r.mu.Lock()
	r.cache[batch] = rec
	if len(r.cache) > recordCacheMax {
		// Bounded however long the query runs: drop the older half (a
		// record dropped is read again if ever needed).
		for b := range r.cache {
			if b < batch-recordCacheMax/2 {
				delete(r.cache, b)
			}
		}
	}
	r.mu.Unlock()
	return rec, nil
}

// follow makes fs (partition p's files) follow the commit records for
// loading version v: from v down to the newest snapshot a record lists,
// the file of the recorded attempt is chosen, a delta or snapshot no
// record lists is dropped (a stray of an abandoned attempt), and a listed
// one that is missing is an error naming the object. Below the first
// version without a record (an older checkpoint, or records cleaned up
// with the log) the files are taken as listed.
func (r *records) follow(ctx context.Context, fs fileSet, op int, p ids.PartitionID, v Version) error {
	for u := v; u >= 1; u-- {
		rec, err := r.get(ctx, ids.BatchID(u-1))
		if err != nil {
			return err
		}
		if rec == nil {
			return nil
		}
		delete(fs.ambiguous, u)
		delete(fs.ambiguousSnap, u)
		delete(fs.deltas, u)
		delete(fs.snaps, u)
		attempt := rec.attempt(p)
		if slices.Contains(rec.Snapshots, p) {
			// Written with the delta by the batch (before snapshots moved
			// to the background): the record requires it.
			key, ok := fs.allSnaps[u][attempt]
			if !ok {
				return fmt.Errorf("load state partition %d version %d: %s, listed by commits/%d, is missing: %w", p, v, snapKey(op, p, u, attempt), u-1, ErrCorrupt)
			}
			fs.snaps[u] = key
			if key, ok := fs.allDeltas[u][attempt]; ok {
				fs.deltas[u] = key
			}
			return nil // the base: nothing older (its delta included) is read
		}
		if !slices.Contains(rec.Deltas, p) {
			continue
		}
		if key, ok := fs.allSnaps[u][attempt]; ok {
			// Written in the background (Maintainer) for the version and
			// attempt this record names: the base. Its delta may be gone
			// (cleanup keeps nothing at or below the base).
			fs.snaps[u] = key
			if key, ok := fs.allDeltas[u][attempt]; ok {
				fs.deltas[u] = key
			}
			return nil
		}
		key, ok := fs.allDeltas[u][attempt]
		if !ok {
			return fmt.Errorf("load state partition %d version %d: %s, listed by commits/%d, is missing: %w", p, v, deltaKey(op, p, u, attempt), u-1, ErrCorrupt)
		}
		fs.deltas[u] = key
	}
	return nil
}

// strays returns the files of versions at or below keep that the commit
// record of their version does not list (left by abandoned attempts).
// Versions without a record are left alone.
func (r *records) strays(ctx context.Context, fs fileSet, p ids.PartitionID, keep Version) ([]string, error) {
	var out []string
	check := func(all map[Version]map[string]string, listed func(*CommitRecord) []ids.PartitionID) error {
		for u, byAttempt := range all {
			if u < 1 || u > keep {
				continue
			}
			rec, err := r.get(ctx, ids.BatchID(u-1))
			if err != nil {
				return err
			}
			if rec == nil {
				continue
			}
			want, in := rec.attempt(p), slices.Contains(listed(rec), p)
			for a, k := range byAttempt {
				if !in || a != want {
					out = append(out, k)
				}
			}
		}
		return nil
	}
	if err := check(fs.allDeltas, func(r *CommitRecord) []ids.PartitionID { return r.Deltas }); err != nil {
		return nil, err
	}
	// A snapshot is the record's when it lists it, or (written in the
	// background) when it is named for the delta the record lists.
	if err := check(fs.allSnaps, func(r *CommitRecord) []ids.PartitionID { return append(slices.Clone(r.Snapshots), r.Deltas...) }); err != nil {
		return nil, err
	}
	return out, nil
}

// changedAt reports what the committed record says of partition p at
// version v: whether a delta made it and the attempt that wrote it; known
// is false without a record.
func (r *records) changedAt(ctx context.Context, p ids.PartitionID, v Version) (changed bool, attempt string, known bool, err error) {
	if v < 1 {
		return false, "", false, nil
	}
	rec, err := r.get(ctx, ids.BatchID(v-1))
	if err != nil || rec == nil {
		return false, "", false, err
	}
	return slices.Contains(rec.Deltas, p), rec.attempt(p), true, nil
}

// cleanup returns the files of partition p that no version >= keep needs,
// following the records: the strays of abandoned attempts at or below
// keep, and everything below the newest recorded snapshot at or below
// keep.
func (r *records) cleanup(ctx context.Context, store objstore.Store, op int, p ids.PartitionID, keep Version) ([]string, error) {
	prefix := partPrefix(op, p)
	keys, err := store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	fs := parseFiles(keys, prefix)
	stray, err := r.strays(ctx, fs, p, keep)
	if err != nil {
		return nil, err
	}
	if err := r.follow(ctx, fs, op, p, keep); err != nil {
		return nil, err
	}
	out := append(stray, fs.obsolete(keep)...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// cleanupPartition deletes the files of partition p that no version >=
// keep needs (records.cleanup classifies them first) and returns how many
// it deleted.
func cleanupPartition(ctx context.Context, store objstore.Store, recs *records, op int, p ids.PartitionID, keep Version) (int, error) {
	obsolete, err := recs.cleanup(ctx, store, op, p, keep)
	if err != nil {
		return 0, fmt.Errorf("clean up state partition %d: %w", p, err)
	}
	deleted, err := objstore.DeleteAll(ctx, store, obsolete, cleanupParallel)
	if err != nil {
		return deleted, fmt.Errorf("clean up state partition %d: %w", p, err)
	}
	return deleted, nil
}
