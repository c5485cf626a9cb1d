package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// Maintainer is implemented by providers that write snapshots in the
// background, off the batch path (Spark's state store maintenance task):
// a batch's Commit writes only its delta, and Maintain later writes, for a
// partition this process holds, a snapshot of a version that has committed.
//
// Which snapshot a load may use: a snapshot is named like the delta of the
// version it holds, <v>-<attempt>.snapshot, and only for a version v that
// a delta made. Loading (records.follow) uses it only when commits/v-1
// records that partition's version v was made by a delta of that very
// attempt: the name is checked against the commit record, never trusted
// because it is there. Maintain writes it only after reading that record
// and checking that its cached version is the one the record names, so a
// process whose cache came from an abandoned attempt writes nothing. An
// attempt id names the driver run, the batch and the map attempts, so two
// writers of the same name wrote the same content. A snapshot is written
// whole or not at all (a put), so an interrupted one is simply absent.
type Maintainer interface {
	// Maintain writes the snapshots due: for each partition held, when
	// SnapshotInterval or more versions separate the newest version a
	// delta made from the partition's last snapshot, and that version has
	// committed. It returns how many it wrote.
	Maintain(ctx context.Context) (written int, err error)
	// MaintenanceDue is signalled (coalesced) when a snapshot may have
	// become due: a batch opened a committed version.
	MaintenanceDue() <-chan struct{}
}

// MaintenanceOptions configures RunMaintenance.
type MaintenanceOptions struct {
	// Interval is the longest wait between passes (default 1s); a pass also
	// runs as soon as the provider signals MaintenanceDue.
	Interval time.Duration
	Logger   *slog.Logger
	// Done, if set, is told after each pass how many snapshots it wrote and
	// its error (for metrics and benchmarks).
	Done func(written int, err error)
}

// RunMaintenance runs m's passes until ctx ends. Errors are logged (and
// passed to Done); the next pass tries again. Batches never wait for it.
func RunMaintenance(ctx context.Context, m Maintainer, opts MaintenanceOptions) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.MaintenanceDue():
		}
		n, err := m.Maintain(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			opts.Logger.Warn("state maintenance failed; the next pass retries (batches are unaffected)", "err", err)
		} else if n > 0 {
			opts.Logger.Debug("state snapshots written in the background", "snapshots", n)
		}
		if opts.Done != nil {
			opts.Done(n, err)
		}
	}
}

// kick signals ch without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// recordWait is how long the pebble provider's maintenance waits for the
// commit record of the version it holds a snapshot of.
const recordWait = time.Second

// waitCommittedAs reports whether commits/v-1 records partition p's
// version v as made by a delta of attempt (only then may a snapshot of v
// be written under that attempt's name), waiting up to wait for a record
// that is not written yet.
func (r *records) waitCommittedAs(ctx context.Context, p ids.PartitionID, v Version, attempt string, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	pause := 10 * time.Millisecond
	for {
		changed, recorded, known, err := r.changedAt(ctx, p, v)
		if err != nil {
			return false, err
		}
		if known {
			return changed && recorded == attempt, nil
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// MaintenanceDue implements Maintainer.
func (m *Memory) MaintenanceDue() <-chan struct{} { return m.due }

// Maintain implements Maintainer: the version is copied (the rows' places
// in the tables, not their bytes, which are never overwritten) holding the
// partition's read lock, between batches: a batch's first change waits for
// the copy. The copy is sorted and streamed to the snapshot file without a
// lock.
func (m *Memory) Maintain(ctx context.Context) (int, error) {
	m.mu.Lock()
	parts := make([]ids.PartitionID, 0, len(m.parts))
	held := make(map[ids.PartitionID]*memPart, len(m.parts))
	for p, part := range m.parts {
		parts, held[p] = append(parts, p), part
	}
	m.mu.Unlock()
	slices.Sort(parts)
	written := 0
	var errs []error
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		ok, err := m.snapshot(ctx, p, held[p])
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			written++
		}
	}
	return written, errors.Join(errs...)
}

type memEntry struct {
	key, val []byte
}

// pendingSnap is a partition's version copied while it was the newest
// version a delta made, to be written once its commit record names it.
type pendingSnap struct {
	v       Version
	attempt string
	entries []memEntry
}

// snapshot writes partition p's snapshot when one is due. The version is
// copied while it is the newest (under the read lock, so the copy is that
// version), then its commit record is checked; a copy whose record is not
// written yet is kept as pending and written by a later pass once the
// record names it, even if batches made newer versions since. (Checking
// the record first and copying after lost the race to every next batch on
// a loaded machine: small batches commit faster than a pass reads a
// record, and no snapshot was ever written, so state files grew without
// bound.)
func (m *Memory) snapshot(ctx context.Context, p ids.PartitionID, part *memPart) (bool, error) {
	part.snapMu.Lock()
	defer part.snapMu.Unlock()
	if ps := part.pending; ps != nil {
		changed, recorded, known, err := m.recs.changedAt(ctx, p, ps.v)
		if err != nil {
			return false, err
		}
		part.mu.RLock()
		newest := part.lastDelta
		part.mu.RUnlock()
		if !known && int(newest-ps.v) < m.opts.SnapshotInterval {
			return false, nil // its batch is still committing
		}
		part.pending = nil
		if known && changed && recorded == ps.attempt {
			return m.writeSnapshot(ctx, p, part, ps)
		}
		// An abandoned attempt's version, or a record that never came:
		// dropped; a copy of the newest version is taken below.
	}
	part.mu.RLock()
	v, attempt, last := part.lastDelta, part.lastAttempt, part.lastSnap
	if part.invalid || v == 0 || int(v-last) < m.opts.SnapshotInterval {
		part.mu.RUnlock()
		return false, nil
	}
	entries := part.data.copyRows()
	part.mu.RUnlock()
	ps := &pendingSnap{v: v, attempt: attempt, entries: entries}
	changed, recorded, known, err := m.recs.changedAt(ctx, p, v)
	if err != nil {
		return false, err
	}
	if !known {
		part.pending = ps
		return false, nil
	}
	if !changed || recorded != attempt {
		return false, nil
	}
	return m.writeSnapshot(ctx, p, part, ps)
}

// writeSnapshot sorts ps's entries and streams them to the snapshot file
// of ps.v, without a lock.
func (m *Memory) writeSnapshot(ctx context.Context, p ids.PartitionID, part *memPart, ps *pendingSnap) (bool, error) {
	entries := ps.entries
	slices.SortFunc(entries, func(a, b memEntry) int { return bytes.Compare(a.key, b.key) })
	key := snapKey(m.opts.Operator, p, ps.v, ps.attempt)
	err := objstore.PutWriter(ctx, m.store, key, func(w io.Writer) error {
		fw, err := newFileWriter(w, kindSnap, uint64(len(entries)))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := fw.put(change{key: e.key, value: e.val}); err != nil {
				return err
			}
		}
		return fw.close()
	})
	if err != nil {
		return false, fmt.Errorf("snapshot state partition %d version %d: %w", p, ps.v, err)
	}
	part.mu.Lock()
	part.lastSnap = max(part.lastSnap, ps.v)
	part.mu.Unlock()
	return true, nil
}

// MaintenanceDue implements Maintainer.
func (pb *Pebble) MaintenanceDue() <-chan struct{} { return pb.due }

// Maintain implements Maintainer: a pebble snapshot of the partition's
// database (a consistent view, its marker included) is streamed to the
// snapshot file while batches go on writing the database; only a rebuild
// of the partition (which closes the database) waits for it.
func (pb *Pebble) Maintain(ctx context.Context) (int, error) {
	pb.mu.Lock()
	if pb.closed {
		pb.mu.Unlock()
		return 0, nil
	}
	type held struct {
		p    ids.PartitionID
		part *pebPart
	}
	var parts []held
	for p, part := range pb.parts {
		parts = append(parts, held{p, part})
	}
	pb.mu.Unlock()
	sort.Slice(parts, func(i, j int) bool { return parts[i].p < parts[j].p })
	written := 0
	var errs []error
	for _, h := range parts {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		ok, err := pb.snapshot(ctx, h.p, h.part)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			written++
		}
	}
	return written, errors.Join(errs...)
}

func (pb *Pebble) snapshot(ctx context.Context, p ids.PartitionID, part *pebPart) (bool, error) {
	part.dbMu.RLock()
	defer part.dbMu.RUnlock()
	if part.db == nil {
		return false, nil
	}
	snap := part.db.NewSnapshot()
	defer snap.Close()
	val, closer, err := snap.Get(markerKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("snapshot state partition %d: read marker: %w", p, err)
	}
	m, ok := decodeMarker(val)
	closer.Close()
	if !ok || m.lastDelta == 0 || int(m.lastDelta-Version(part.lastSnap.Load())) < pb.opts.SnapshotInterval {
		return false, nil
	}
	v := m.lastDelta
	// The pebble snapshot keeps version v whatever batches write next, so
	// a record not written yet is waited for a little (the batch is
	// committing) rather than lost to the next batch, as every pass would
	// be on a loaded machine whose batches commit faster than a pass runs.
	if ok, err := pb.recs.waitCommittedAs(ctx, p, v, m.lastAttempt, recordWait); err != nil || !ok {
		return false, err
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{dataPrefix}, UpperBound: []byte{dataEnd}})
	if err != nil {
		return false, fmt.Errorf("snapshot state partition %d version %d: %w", p, v, err)
	}
	defer it.Close()
	err = objstore.PutWriter(ctx, pb.store, snapKey(pb.opts.Operator, p, v, m.lastAttempt), func(w io.Writer) error {
		// The marker's row count announces the entries; the writer checks
		// it against the rows iterated.
		fw, err := newFileWriter(w, kindSnap, uint64(m.rows))
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			val, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if err := fw.put(change{key: it.Key()[1:], value: val}); err != nil {
				return err
			}
		}
		if err := it.Error(); err != nil {
			return err
		}
		return fw.close()
	})
	if err != nil {
		return false, fmt.Errorf("snapshot state partition %d version %d: %w", p, v, err)
	}
	for {
		old := part.lastSnap.Load()
		if int64(v) <= old || part.lastSnap.CompareAndSwap(old, int64(v)) {
			break
		}
	}
	return true, nil
}
