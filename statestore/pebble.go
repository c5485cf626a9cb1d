package statestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// PebbleOptions configures the pebble provider.
type PebbleOptions struct {
	// Operator is the stateful operator id (the <op> in file names).
	Operator int
	// SnapshotInterval: a snapshot is written when the committed version is
	// a multiple of it. Zero means 10.
	SnapshotInterval int
	// DataDir is the local directory for the pebble databases, one per
	// partition under DataDir/<op>/<partition>/. It is a cache: anything in
	// it can be rebuilt from the checkpoint. Required.
	DataDir string
	// CacheBytes is the size of the block cache shared by all partitions.
	// Zero means 64 MiB.
	CacheBytes int64
	// Logger receives pebble's messages (info at debug level). Nil
	// discards them.
	Logger *slog.Logger
}

// Pebble keeps each partition in a local pebble database and writes every
// committed version to the checkpoint in the same files as Memory: a delta
// per version that changed the partition, a snapshot every
// SnapshotInterval versions, written in the background by Maintain. The
// checkpoint is the truth; the local database is a cache that says which
// version it holds in a marker key written atomically with the data.
//
// Snapshots use the Memory provider's file format (a sorted dump of every
// key and value), not pebble SST files. Reasons: a checkpoint written by
// either provider can be loaded by the other (switching stateStore, or
// inspecting a pebble checkpoint with the memory loader, needs no
// conversion); a re-run batch writes the same bytes, which SSTs (whose
// properties and block layout depend on pebble's version and options) do
// not promise; there is one checksummed format to maintain; and a snapshot
// is one object instead of a set of SSTs plus a manifest. The cost is that
// a snapshot is written by iterating the partition rather than by linking
// existing SSTs, which is the same O(state) work the Memory provider does.
//
// Open of the version the local database holds is free. Open of a later
// version whose changes are all deltas after the local version applies
// those deltas (catch-up); any other version wipes the local database and
// loads the newest snapshot at or below it plus the deltas after that (the
// snapshot is written as an SST and ingested). A database found on disk
// when the provider first opens its partition (a restart on the same
// DataDir) is used only if the delta it applied last is in the checkpoint
// with the same checksum; otherwise it is rebuilt.
type Pebble struct {
	store  objstore.Store
	recs   *records
	opts   PebbleOptions
	cache  *pebble.Cache
	logger *slog.Logger
	due    chan struct{} // MaintenanceDue

	mu     sync.Mutex
	parts  map[ids.PartitionID]*pebPart
	closed bool
}

// pebPart is one partition's local database. m mirrors the database's
// marker and is valid when ok is true. Fields other than open are used
// only by the holder of the partition (open == true) or under Close.
type pebPart struct {
	// dbMu is held for writing while db is opened, closed or replaced,
	// and for reading by Maintain while it writes a snapshot from db.
	dbMu sync.RWMutex
	// lastSnap is the newest version known to have a snapshot in the
	// checkpoint (0: none).
	lastSnap atomic.Int64
	dir      string
	db       *pebble.DB
	opts     *pebble.Options
	ok       bool
	m        marker
	open     bool
}

// marker is what the local database says about itself, written in the
// same batch as the data it describes.
type marker struct {
	version Version
	rows    int64
	// lastDelta is the newest version whose delta file the database
	// applied since it was last loaded from a snapshot or emptied (0:
	// none), and lastSum that file's checksum. They match a database found
	// on disk to the checkpoint it came from.
	lastDelta Version
	lastSum   uint32
	// lastAttempt is the attempt in lastDelta's file name ("" for a name
	// without one): a version cached locally is reused only if it is the
	// attempt the commit records.
	lastAttempt string
}

// Key space of the local databases: user keys are stored behind dataPrefix
// so that the marker (behind metaPrefix) never shows in a Scan.
const (
	metaPrefix = 0x00
	dataPrefix = 0x01
	dataEnd    = 0x02
	// markerFormat is the first byte of the marker's value: 2 adds
	// lastAttempt; 1 (without it) is still read.
	markerFormat = 2
)

var markerKey = []byte{metaPrefix, 'v', 'e', 'r', 's', 'i', 'o', 'n'}

// NewPebble returns a pebble provider whose files go to store (rooted at
// the checkpoint) and whose local databases live under opts.DataDir.
func NewPebble(store objstore.Store, opts PebbleOptions) (*Pebble, error) {
	if opts.DataDir == "" {
		return nil, errors.New("new pebble state store: DataDir is empty: it must name a local directory")
	}
	if opts.SnapshotInterval < 0 {
		return nil, fmt.Errorf("new pebble state store: SnapshotInterval %d is negative: it must be >= 1 (0 means 10)", opts.SnapshotInterval)
	}
	if opts.SnapshotInterval == 0 {
		opts.SnapshotInterval = 10
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("new pebble state store: %w", err)
	}
	return &Pebble{
		store:  store,
		recs:   newRecords(store, opts.Operator),
		opts:   opts,
		cache:  pebble.NewCache(opts.CacheBytes),
		logger: logger,
		due:    make(chan struct{}, 1),
		parts:  map[ids.PartitionID]*pebPart{},
	}, nil
}

// Open returns partition p at version v.
func (pb *Pebble) Open(ctx context.Context, p ids.PartitionID, v Version) (Store, error) {
	if v < 0 {
		return nil, fmt.Errorf("open state partition %d: version %d is negative", p, v)
	}
	pb.mu.Lock()
	if pb.closed {
		pb.mu.Unlock()
		return nil, fmt.Errorf("open state partition %d: provider closed", p)
	}
	part := pb.parts[p]
	if part != nil && part.open {
		pb.mu.Unlock()
		return nil, fmt.Errorf("open state partition %d: already open", p)
	}
	if part == nil {
		part = &pebPart{dir: filepath.Join(pb.opts.DataDir, strconv.Itoa(pb.opts.Operator), p.String())}
		pb.parts[p] = part
	}
	part.open = true // reserves the partition; released by the store or below
	pb.mu.Unlock()

	if err := pb.prepare(ctx, p, part, v); err != nil {
		pb.release(part)
		return nil, err
	}
	kick(pb.due) // version v is committed: a snapshot may be due
	return newPebStore(pb, p, part), nil
}

// release ends the reservation of a partition.
func (pb *Pebble) release(part *pebPart) {
	pb.mu.Lock()
	part.open = false
	pb.mu.Unlock()
}

// prepare makes the partition's local database hold version v.
func (pb *Pebble) prepare(ctx context.Context, p ids.PartitionID, part *pebPart, v Version) error {
	if part.db == nil {
		if err := pb.openDB(part); err != nil {
			return fmt.Errorf("open state partition %d: %w", p, err)
		}
		if part.ok {
			// Found on disk: trust it only if it comes from this checkpoint.
			same, err := pb.fromCheckpoint(ctx, p, part.m)
			if err != nil {
				return fmt.Errorf("open state partition %d: %w", p, err)
			}
			if !same {
				pb.logger.Info("local state database does not match the checkpoint; rebuilding", "partition", p, "dir", part.dir, "local_version", part.m.version)
				part.ok = false
			}
		}
	}
	if part.ok && part.m.version > 0 {
		// The local version is this process's own: build on it only if the
		// committed attempt agrees on whether that version has a delta (a
		// version an abandoned attempt made differs from the recorded one).
		lv := part.m.version
		changed, attempt, known, err := pb.recs.changedAt(ctx, p, lv)
		if err != nil {
			return fmt.Errorf("open state partition %d: %w", p, err)
		}
		if known && (changed != (part.m.lastDelta == lv) || changed && attempt != part.m.lastAttempt) {
			pb.logger.Info("local state version was made by an attempt that did not commit; rebuilding", "partition", p, "version", lv)
			part.ok = false
		}
	}
	if part.ok && part.m.version == v {
		return nil
	}
	if v == 0 {
		return pb.wipe(p, part, 0)
	}
	prefix := partPrefix(pb.opts.Operator, p)
	keys, err := pb.store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("load state partition %d version %d: %w", p, v, err)
	}
	fs := parseFiles(keys, prefix)
	if err := pb.recs.follow(ctx, fs, pb.opts.Operator, p, v); err != nil {
		return err
	}
	base, deltas := fs.plan(v)
	if err := fs.checkPlan(pb.opts.Operator, p, base, v); err != nil {
		return err
	}
	if part.ok && part.m.version < v && base <= part.m.version {
		// Catch up: every change after the local version is in a delta.
		var after []Version
		for _, d := range deltas {
			if d > part.m.version {
				after = append(after, d)
			}
		}
		pb.logger.Debug("catching up state partition", "partition", p, "from", part.m.version, "to", v, "deltas", len(after))
		return pb.applyDeltas(ctx, p, part, fs, after, v)
	}
	pb.logger.Debug("rebuilding state partition", "partition", p, "version", v, "snapshot", base, "deltas", len(deltas))
	if err := pb.wipe(p, part, -1); err != nil {
		return err
	}
	if base > 0 {
		start := time.Now()
		if err := pb.loadSnapshot(ctx, p, part, fs.snaps[base], base); err != nil {
			return err
		}
		pb.logger.Debug("loaded state snapshot", "partition", p, "version", base, "rows", part.m.rows, "duration", time.Since(start))
		if key, ok := fs.deltas[base]; ok && base == v {
			// Version v was made by a delta (written with the snapshot):
			// the marker says so, as if the delta had been applied, so the
			// check against the commit record holds on the next Open.
			sum, ok, err := streamSum(ctx, pb.store, key)
			if err != nil {
				return fmt.Errorf("load state partition %d: %w", p, err)
			}
			if ok {
				m := part.m
				m.lastDelta, m.lastSum, m.lastAttempt = base, sum, attemptOf(key)
				if err := pb.setMarker(p, part, m); err != nil {
					return err
				}
			}
		}
	} else if err := pb.setMarker(p, part, marker{}); err != nil {
		return err
	}
	return pb.applyDeltas(ctx, p, part, fs, deltas, v)
}

// openDB opens (creating if needed) the partition's database and reads its
// marker.
func (pb *Pebble) openDB(part *pebPart) error {
	if err := os.MkdirAll(part.dir, 0o755); err != nil {
		return err
	}
	opts := &pebble.Options{
		Cache: pb.cache,
		// The checkpoint is the write-ahead log: a batch lost in a crash is
		// lost together with its marker, and the next Open catches up.
		DisableWAL:   true,
		MemTableSize: 32 << 20,
		Logger:       pebbleLogger{pb.logger.With("dir", part.dir)},
	}
	// Reduce reads every group a batch touches, and new groups are absent.
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	opts.EnsureDefaults() // Open defaults a copy; loadSnapshot needs them here
	db, err := pebble.Open(part.dir, opts)
	if err != nil {
		return fmt.Errorf("open local state database %s: %w", part.dir, err)
	}
	part.dbMu.Lock()
	part.db, part.opts = db, opts
	part.dbMu.Unlock()
	part.ok = false
	val, closer, err := db.Get(markerKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state marker in %s: %w", part.dir, err)
	}
	defer closer.Close()
	part.m, part.ok = decodeMarker(val)
	return nil
}

// fromCheckpoint reports whether a database found on disk with marker m
// belongs to this checkpoint: the delta it applied last is there with the
// same checksum. (Another query's, or an older run's, database in the same
// DataDir would otherwise be taken for this one's.) A database whose
// contents came only from a snapshot cannot be checked this cheaply and is
// rebuilt.
func (pb *Pebble) fromCheckpoint(ctx context.Context, p ids.PartitionID, m marker) (bool, error) {
	if m.lastDelta == 0 {
		return m.version == 0 && m.rows == 0, nil
	}
	sum, ok, err := streamSum(ctx, pb.store, deltaKey(pb.opts.Operator, p, m.lastDelta, m.lastAttempt))
	if errors.Is(err, objstore.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check local state against the checkpoint: %w", err)
	}
	return ok && sum == m.lastSum, nil
}

// fileSum is a state file's checksum (its trailer).
func fileSum(data []byte) uint32 { return binary.BigEndian.Uint32(data[len(data)-4:]) }

// wipe empties the partition's database; with v >= 0 it then marks it as
// version v with no rows.
func (pb *Pebble) wipe(p ids.PartitionID, part *pebPart, v Version) error {
	part.dbMu.Lock() // waits for a snapshot being written from it
	if part.db != nil {
		if err := part.db.Close(); err != nil {
			pb.logger.Warn("close local state database", "partition", p, "err", err)
		}
		part.db = nil
	}
	part.dbMu.Unlock()
	part.ok = false
	part.lastSnap.Store(0)
	if err := os.RemoveAll(part.dir); err != nil {
		return fmt.Errorf("wipe state partition %d: %w", p, err)
	}
	if err := pb.openDB(part); err != nil {
		return fmt.Errorf("wipe state partition %d: %w", p, err)
	}
	if v < 0 {
		return nil
	}
	return pb.setMarker(p, part, marker{version: v})
}

func (pb *Pebble) setMarker(p ids.PartitionID, part *pebPart, m marker) error {
	b := part.db.NewBatch()
	defer b.Close()
	if err := b.Set(markerKey, m.encode(), nil); err != nil {
		return fmt.Errorf("mark state partition %d: %w", p, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("mark state partition %d: %w", p, err)
	}
	part.ok, part.m = true, m
	return nil
}

// loadSnapshot loads a snapshot into the (empty) database, then sets the
// marker to its version. The snapshot's entries are sorted by key, so they
// are written straight into an SST that the database ingests: no memtable,
// no flush, no compaction. Until the marker is set the database has no
// valid marker, so an interrupted load is redone by the next Open.
func (pb *Pebble) loadSnapshot(ctx context.Context, p ids.PartitionID, part *pebPart, key string, v Version) error {
	rc, err := objstore.GetReader(ctx, pb.store, key)
	if err != nil {
		return fmt.Errorf("load state partition %d: %w", p, err)
	}
	defer rc.Close()
	path := filepath.Join(part.dir, "load-"+strconv.FormatInt(int64(v), 10)+".sst")
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("load state partition %d: %w", p, err)
	}
	defer os.Remove(path) // after a successful ingest it is already gone
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), part.opts.MakeWriterOptions(0, part.db.TableFormat()))
	var rows int64
	var kbuf []byte
	var werr error
	// Streamed: the snapshot goes from the object store through a read
	// buffer into the SST on disk, so its size is bounded by disk, not
	// memory. The SST is ingested only once the checksum has been read.
	_, derr := decodeStream(key, rc, kindSnap, func(c change) error {
		if werr != nil || c.del {
			return nil
		}
		kbuf = append(append(kbuf[:0], dataPrefix), c.key...)
		werr = w.Set(kbuf, c.value)
		rows++
		return nil
	})
	if err := w.Close(); err != nil && werr == nil {
		werr = err
	}
	if derr != nil {
		return derr
	}
	if werr != nil {
		// Keys out of order or repeated: the file is not a snapshot this
		// package wrote.
		return fmt.Errorf("load state partition %d from %s: %w: %w", p, key, werr, ErrCorrupt)
	}
	if rows > 0 {
		if err := part.db.Ingest(ctx, []string{path}); err != nil {
			return fmt.Errorf("load state partition %d from %s: %w", p, key, err)
		}
	}
	part.lastSnap.Store(int64(v))
	return pb.setMarker(p, part, marker{version: v, rows: rows})
}

// applyDeltas applies deltas (ascending, all after the local version) one
// batch each, with the marker moving to each delta's version, and finally
// marks the database as version v (versions without a delta are unchanged).
func (pb *Pebble) applyDeltas(ctx context.Context, p ids.PartitionID, part *pebPart, fs fileSet, deltas []Version, v Version) error {
	var kbuf []byte
	for _, d := range deltas {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("load state partition %d: %w", p, err)
		}
		rc, err := objstore.GetReader(ctx, pb.store, fs.deltas[d])
		if err != nil {
			return fmt.Errorf("load state partition %d: %w", p, err)
		}
		rows := part.m.rows
		b := part.db.NewBatch()
		// A delta holds each key once, in ascending order, so one forward
		// iterator over the database before this batch says whether each
		// key exists.
		it, werr := part.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataPrefix}, UpperBound: []byte{dataEnd}})
		if werr != nil {
			b.Close()
			rc.Close()
			return fmt.Errorf("load state partition %d: %w", p, werr)
		}
		// A delta holds one batch's changes; the pebble batch that applies
		// it holds them too until it commits (after the checksum).
		var upper []byte // the delta's range deletion
		sum, derr := decodeStream(fs.deltas[d], rc, kindDelta, func(c change) error {
			if werr != nil {
				return nil
			}
			kbuf = append(append(kbuf[:0], dataPrefix), c.key...)
			if c.below {
				// The delta's first entry: count the rows it deletes.
				upper = append(upper[:0], kbuf...)
				for ok := it.First(); ok && bytes.Compare(it.Key(), upper) < 0; ok = it.Next() {
					rows--
				}
				werr = b.DeleteRange([]byte{dataPrefix}, upper, nil)
				return nil
			}
			exists := (upper == nil || bytes.Compare(kbuf, upper) >= 0) && it.SeekGE(kbuf) && bytes.Equal(it.Key(), kbuf)
			if c.del {
				if exists {
					rows--
				}
				werr = b.Delete(kbuf, nil)
				return nil
			}
			if !exists {
				rows++
			}
			werr = b.Set(kbuf, c.value, nil)
			return nil
		})
		rc.Close()
		if err := it.Close(); err != nil && werr == nil {
			werr = err
		}
		if derr != nil {
			b.Close()
			return derr
		}
		m := marker{version: d, rows: rows, lastDelta: d, lastSum: sum, lastAttempt: attemptOf(fs.deltas[d])}
		if werr == nil {
			werr = b.Set(markerKey, m.encode(), nil)
		}
		if werr == nil {
			werr = b.Commit(pebble.NoSync)
		}
		b.Close()
		if werr != nil {
			return fmt.Errorf("load state partition %d from %s: %w", p, fs.deltas[d], werr)
		}
		part.ok, part.m = true, m
	}
	if part.m.version != v {
		m := part.m
		m.version = v
		return pb.setMarker(p, part, m)
	}
	return nil
}

// Cleanup deletes files no version >= keep needs and returns how many. The
// local databases are not touched.
func (pb *Pebble) Cleanup(ctx context.Context, p ids.PartitionID, keep Version) (int, error) {
	return cleanupPartition(ctx, pb.store, pb.recs, pb.opts.Operator, p, keep)
}

// Close closes every local database and releases the block cache. Stores
// still open must not be used afterwards. Close is idempotent; the local
// databases stay on disk and a later provider on the same DataDir reuses
// them.
func (pb *Pebble) Close() error {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if pb.closed {
		return nil
	}
	pb.closed = true
	var errs []error
	for p, part := range pb.parts {
		part.dbMu.Lock()
		if part.db == nil {
			part.dbMu.Unlock()
			continue
		}
		// Without a WAL, unflushed batches would be lost on close; flush
		// so a restart on the same DataDir finds the newest version.
		if err := part.db.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush state partition %d: %w", p, err))
		}
		if err := part.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close state partition %d: %w", p, err))
		}
		part.db = nil
		part.dbMu.Unlock()
	}
	pb.parts = map[ids.PartitionID]*pebPart{}
	pb.cache.Unref()
	return errors.Join(errs...)
}

// Release closes partition p's local database and deletes it from the
// data dir, unless the partition is open.
func (pb *Pebble) Release(p ids.PartitionID) (bool, error) {
	pb.mu.Lock()
	part := pb.parts[p]
	if pb.closed || part == nil || part.open {
		pb.mu.Unlock()
		return false, nil
	}
	delete(pb.parts, p)
	pb.mu.Unlock()
	var errs []error
	part.dbMu.Lock()
	if part.db != nil {
		if err := part.db.Close(); err != nil {
			errs = append(errs, err)
		}
		part.db = nil
	}
	part.dbMu.Unlock()
	if err := os.RemoveAll(part.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return true, fmt.Errorf("release state partition %d: %w", p, err)
	}
	return true, nil
}

// Held returns each local database's size on disk.
func (pb *Pebble) Held() map[ids.PartitionID]int64 {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	out := make(map[ids.PartitionID]int64, len(pb.parts))
	for p, part := range pb.parts {
		var n int64
		if part.db != nil && !part.open {
			n = int64(part.db.Metrics().DiskSpaceUsage())
		}
		out[p] = n
	}
	return out
}

// numParts is the number of local databases open, for sharing the block
// cache's size among them in MemoryBytes.
func (pb *Pebble) numParts() int64 {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return int64(len(pb.parts))
}

// encode encodes the marker's value: a format byte, version, rows and
// lastDelta as uvarints, lastSum big-endian, then lastAttempt's bytes.
func (m marker) encode() []byte {
	b := []byte{markerFormat}
	b = binary.AppendUvarint(b, uint64(m.version))
	b = binary.AppendUvarint(b, uint64(m.rows))
	b = binary.AppendUvarint(b, uint64(m.lastDelta))
	b = binary.BigEndian.AppendUint32(b, m.lastSum)
	return append(b, m.lastAttempt...)
}

func decodeMarker(b []byte) (marker, bool) {
	var m marker
	if len(b) < 1 || b[0] != 1 && b[0] != markerFormat {
		return m, false
	}
	format := b[0]
	b = b[1:]
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return m, false
		}
		vals[i], b = v, b[n:]
	}
	if len(b) < 4 || format == 1 && len(b) != 4 {
		return m, false
	}
	m.version, m.rows, m.lastDelta = Version(vals[0]), int64(vals[1]), Version(vals[2])
	m.lastSum = binary.BigEndian.Uint32(b)
	m.lastAttempt = string(b[4:])
	return m, true
}

// pebbleLogger sends pebble's messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.l.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}
