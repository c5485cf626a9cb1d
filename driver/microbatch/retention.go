package microbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/statestore"
)

// CleanupEvery is how many batches the checkpoint's cleaner lets commit
// between two passes: the checkpoint holds at most minBatchesToRetain +
// CleanupEvery batches of log entries (and the state versions they need)
// while the cleaner keeps up.
const CleanupEvery = 10

// cleaner keeps the checkpoint to the spec's minBatchesToRetain batches, off
// the batch path: Run starts it, tells it of each commit and stops it (its
// context is cancelled and Run waits for it) when the run ends. One pass
// deletes, for keep = checkpoint.RetainFrom(committed, retain):
//
//  1. each state partition's files that no version >= keep needs (the
//     provider classifies them from the commit records first, so the
//     records it reads still exist);
//  2. offsets/N and commits/N for N < keep, oldest first.
//
// What it deletes is disjoint from what a batch writes or a re-run reads:
// the batch in flight (committed+1) writes offsets/committed+1, state
// version committed+2 and commits/committed+1, and reads commits/committed
// and version committed+1, all at or after keep. A pass stopped half-way
// (a kill, a stop) leaves older objects for the next pass, never a hole in
// what is kept. Passes run one at a time. An error is logged, counted in
// the next batch's progress (retentionErrors) and the pass is abandoned;
// batches never fail for it.
type cleaner struct {
	q      *Query
	kick   chan ids.BatchID // the newest committed batch; capacity 1, newest wins
	drain  chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// lastKeep is the keep of the last complete pass (-1: none yet);
	// used by the cleaner goroutine only.
	lastKeep ids.BatchID
	// deleted and errors accumulate until the next progress report takes
	// them.
	deleted, errors atomic.Int64
	// manifests caches the join snapshot hash each retained offsets entry
	// records ("" for none): entries never change once written. Used by
	// the cleaner goroutine only.
	manifests map[ids.BatchID]string
}

// startCleaner starts the query's cleaner; stop ends it.
func (q *Query) startCleaner(ctx context.Context) *cleaner {
	ctx, cancel := context.WithCancel(ctx)
	c := &cleaner{q: q, kick: make(chan ids.BatchID, 1), drain: make(chan struct{}), cancel: cancel, lastKeep: -1}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case committed := <-c.kick:
				c.maybeClean(ctx, committed)
			case <-c.drain:
				select {
				case committed := <-c.kick:
					c.maybeClean(ctx, committed)
				default:
				}
				return
			}
		}
	}()
	return c
}

// committed tells the cleaner that batch id committed; it never blocks.
func (c *cleaner) committed(id ids.BatchID) {
	if c == nil {
		return
	}
	for {
		select {
		case c.kick <- id:
			return
		default:
		}
		select {
		case <-c.kick: // drop the older id: the newest decides
		default:
		}
	}
}

// stop ends the cleaner and waits for it: with drain, after the pass the
// last commit asked for (if due); otherwise a pass in progress is
// cancelled.
func (c *cleaner) stop(drain bool) {
	if c == nil {
		return
	}
	if drain {
		close(c.drain)
		c.wg.Wait()
	}
	c.cancel()
	c.wg.Wait()
}

// take returns and resets the objects deleted and the errors since the last
// call, for a batch's progress.
func (c *cleaner) take() (deleted, errors int64) {
	if c == nil {
		return 0, 0
	}
	return c.deleted.Swap(0), c.errors.Swap(0)
}

// due reports whether a pass should run for keep: the first one of a run
// (which also finishes a pass a crash interrupted), then every
// CleanupEvery batches.
func (c *cleaner) due(keep ids.BatchID) bool {
	if keep <= 0 {
		return false
	}
	return c.lastKeep < 0 || keep-c.lastKeep >= CleanupEvery
}

func (c *cleaner) maybeClean(ctx context.Context, committed ids.BatchID) {
	keep := checkpoint.RetainFrom(committed, int64(c.q.cfg.Spec.MinBatchesToRetain))
	if !c.due(keep) {
		return
	}
	if c.clean(ctx, committed, keep) {
		c.lastKeep = keep
	}
}

// clean runs one pass; it reports whether the pass completed.
func (c *cleaner) clean(ctx context.Context, committed, keep ids.BatchID) bool {
	q := c.q
	log := q.cfg.Logger
	fail := func(what string, err error, args ...any) bool {
		if ctx.Err() != nil {
			return false // stopped: not a failure
		}
		c.errors.Add(1)
		log.Warn(what+" failed; the next pass retries (batches are unaffected)", append([]any{"query", q.cfg.Spec.Name, "keep_from", keep, "err", err}, args...)...)
		return false
	}
	q.hook("cleanup-state", committed)
	if q.cfg.State != nil && q.qplan.Stateful() {
		for p := range ids.PartitionID(q.meta.ShufflePartitions) {
			n, err := q.cfg.State.Cleanup(ctx, p, statestore.Version(keep))
			c.deleted.Add(int64(n))
			if err != nil {
				// The log keeps the records the state's cleanup reads.
				return fail("state cleanup", err, "partition", p)
			}
		}
	}
	q.hook("cleanup-log", committed)
	n, err := q.log.Cleanup(ctx, keep)
	c.deleted.Add(int64(n))
	if err != nil {
		return fail("checkpoint log cleanup", err)
	}
	if q.cfg.Spec.Join != nil {
		n, err := c.cleanManifests(ctx, keep)
		c.deleted.Add(int64(n))
		if err != nil {
			return fail("join snapshot cleanup", err)
		}
	}
	log.Debug("checkpoint cleaned", "query", q.cfg.Spec.Name, "batch", committed, "keep_from", keep)
	return true
}

// cleanManifests deletes the stored join snapshots (manifests/<hash>.json)
// that no retained offsets entry records and that are not the run's
// current snapshot. It holds manifestMu from listing to deleting, so a
// snapshot stored for the next batch (stored and made current under the
// same lock, before its offsets entry is written) is never taken for
// unused.
func (c *cleaner) cleanManifests(ctx context.Context, keep ids.BatchID) (int, error) {
	q := c.q
	st := q.log.Store()
	q.manifestMu.Lock()
	defer q.manifestMu.Unlock()
	keys, err := st.List(ctx, "manifests/")
	if err != nil {
		return 0, fmt.Errorf("list manifests/: %w", err)
	}
	if len(keys) <= 1 {
		return 0, nil // at most the current one
	}
	logged, err := q.log.OffsetIDs(ctx)
	if err != nil {
		return 0, err
	}
	if c.manifests == nil {
		c.manifests = map[ids.BatchID]string{}
	}
	for id := range c.manifests {
		if id < keep {
			delete(c.manifests, id)
		}
	}
	used := map[string]bool{}
	if !q.manifest.IsZero() {
		used[join.ObjectKey(q.manifest.Hash)] = true
	}
	for _, id := range logged {
		if id < keep {
			continue
		}
		h, ok := c.manifests[id]
		if !ok {
			e, err := q.log.Offsets(ctx, id)
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, err
			}
			if e.Manifest != nil {
				h = e.Manifest.Hash
			}
			c.manifests[id] = h
		}
		if h != "" {
			used[join.ObjectKey(h)] = true
		}
	}
	var unused []string
	for _, k := range keys {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	if len(unused) == 0 {
		return 0, nil
	}
	return objstore.DeleteAll(ctx, st, unused, 4)
}
