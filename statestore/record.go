package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/objstore"
)

// CommitRecord is the state part of the checkpoint's commits/N: the state
// partitions whose batch-N reduce wrote a delta (and a snapshot) for
// version N+1. A partition not listed was unchanged by the committed
// attempt, so a file for version N+1 there is a stray of an abandoned
// attempt and is never loaded; a listed file that is missing is an error.
// The driver writes it from the reduce results (a delta was written when
// the partition's state writes are >= 1, a snapshot when >= 2).
type CommitRecord struct {
	Deltas    []int `json:"deltas"`
	Snapshots []int `json:"snapshots,omitempty"`
}

// records reads the CommitRecords of committed batches from the
// checkpoint (commits/N is immutable once written, so they are cached).
type records struct {
	store objstore.Store
	mu    sync.Mutex
	cache map[int64]*CommitRecord
}

func newRecords(store objstore.Store) *records {
	return &records{store: store, cache: map[int64]*CommitRecord{}}
}

// get returns batch's record, or nil when commits/<batch> is absent
// (cleaned up, or not committed) or has no state record (written by an
// older version).
func (r *records) get(ctx context.Context, batch int64) (*CommitRecord, error) {
	if batch < 0 {
		return nil, nil
	}
	r.mu.Lock()
	rec, ok := r.cache[batch]
	r.mu.Unlock()
	if ok {
		return rec, nil
	}
	key := "commits/" + strconv.FormatInt(batch, 10)
	data, err := r.store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state record %s: %w", key, err)
	}
	var doc struct {
		State *CommitRecord `json:"state"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read state record %s: %w", key, err)
	}
	r.mu.Lock()
	r.cache[batch] = doc.State
	r.mu.Unlock()
	return doc.State, nil
}

// follow makes fs (partition p's files) follow the commit records for
// loading version v: from v down to the newest snapshot a record lists, a
// delta or snapshot no record lists is dropped (a stray of an abandoned
// attempt), and a listed one that is missing is an error naming the
// object. Below the first version without a record (an older checkpoint,
// or records cleaned up with the log) the files are taken as listed.
func (r *records) follow(ctx context.Context, fs fileSet, op, p int, v Version) error {
	for u := v; u >= 1; u-- {
		rec, err := r.get(ctx, int64(u)-1)
		if err != nil {
			return err
		}
		if rec == nil {
			return nil
		}
		inDelta, inSnap := slices.Contains(rec.Deltas, p), slices.Contains(rec.Snapshots, p)
		if _, ok := fs.deltas[u]; ok && !inDelta {
			delete(fs.deltas, u)
		}
		if _, ok := fs.snaps[u]; ok && !inSnap {
			delete(fs.snaps, u)
		}
		if _, ok := fs.deltas[u]; inDelta && !ok {
			return fmt.Errorf("load state partition %d version %d: %s, listed by commits/%d, is missing: %w", p, v, deltaKey(op, p, u), u-1, ErrCorrupt)
		}
		if inSnap {
			if _, ok := fs.snaps[u]; !ok {
				return fmt.Errorf("load state partition %d version %d: %s, listed by commits/%d, is missing: %w", p, v, snapKey(op, p, u), u-1, ErrCorrupt)
			}
			return nil // the base: nothing older is read
		}
	}
	return nil
}

// changedAt reports what the committed record says of partition p at
// version v: known is false without a record.
func (r *records) changedAt(ctx context.Context, p int, v Version) (changed, known bool, err error) {
	if v < 1 {
		return false, false, nil
	}
	rec, err := r.get(ctx, int64(v)-1)
	if err != nil || rec == nil {
		return false, false, err
	}
	return slices.Contains(rec.Deltas, p), true, nil
}
