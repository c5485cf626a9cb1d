package executor

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/wire"
)

// leaseFraction is the share of the driver's heartbeat timeout a lease
// lasts. The lease counts from when a heartbeat was sent, which the driver
// saw no earlier, so an executor stops writing before the driver removes
// it (at its last heartbeat plus the whole timeout).
const leaseFraction = 0.8

// writeLease tracks until when this executor may write, on a monotonic clock.
type writeLease struct {
	start time.Time
	until atomic.Int64 // nanoseconds since start
}

func newWriteLease() *writeLease { return &writeLease{start: time.Now()} }

// renew extends the lease to sentAt + d, if that is later.
func (l *writeLease) renew(sentAt time.Time, d time.Duration) {
	until := int64(sentAt.Sub(l.start) + d)
	for {
		cur := l.until.Load()
		if until <= cur || l.until.CompareAndSwap(cur, until) {
			return
		}
	}
}

// valid reports whether the lease holds at now.
func (l *writeLease) valid(now time.Time) bool { return int64(now.Sub(l.start)) < l.until.Load() }

// leasedStore refuses writes while the lease is lapsed; reads pass.
// A write that started before the lease lapsed may still land: task output
// is deterministic, so it carries the same bytes the new owner writes.
// It is an objstore.Forward: every optional capability of the wrapped
// store passes through (a split of a large source file reads only its own
// bytes on an executor too), and it overrides every write path.
type leasedStore struct {
	objstore.Forward
	lease *writeLease
}

func newLeasedStore(st objstore.Store, lease *writeLease) *leasedStore {
	return &leasedStore{Forward: objstore.Forward{Store: st}, lease: lease}
}

func (s *leasedStore) check(op, key string) error {
	if s.lease.valid(time.Now()) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, key, wire.ErrLeaseExpired)
}

func (s *leasedStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.check("put", key); err != nil {
		return err
	}
	return s.Forward.Put(ctx, key, data)
}

func (s *leasedStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.check("put-if-absent", key); err != nil {
		return err
	}
	return s.Forward.PutIfAbsent(ctx, key, data)
}

func (s *leasedStore) PutStream(ctx context.Context, key string, r io.Reader) error {
	if err := s.check("put", key); err != nil {
		return err
	}
	return s.Forward.PutStream(ctx, key, r)
}

func (s *leasedStore) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.Forward.Delete(ctx, key)
}

func (s *leasedStore) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		if err := s.check("delete", keys[0]); err != nil {
			return err
		}
	}
	return s.Forward.DeleteMany(ctx, keys)
}

// The multipart calls a reduce task makes (create, upload part) are writes
// and need the lease; completing and aborting are the driver's, but pass
// the same check when an executor makes them.

func (s *leasedStore) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := s.check("create-multipart", key); err != nil {
		return "", err
	}
	return s.Forward.CreateMultipart(ctx, key)
}

func (s *leasedStore) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (objstore.Part, error) {
	if err := s.check("upload-part", key); err != nil {
		return objstore.Part{}, err
	}
	return s.Forward.UploadPart(ctx, key, uploadID, number, data)
}

func (s *leasedStore) CompleteMultipart(ctx context.Context, key, uploadID string, parts []objstore.Part) error {
	if err := s.check("complete-multipart", key); err != nil {
		return err
	}
	return s.Forward.CompleteMultipart(ctx, key, uploadID, parts)
}

func (s *leasedStore) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := s.check("abort-multipart", key); err != nil {
		return err
	}
	return s.Forward.AbortMultipart(ctx, key, uploadID)
}

// leasedStore has every optional capability of objstore.
var (
	_ objstore.Streamer      = (*leasedStore)(nil)
	_ objstore.RangeReader   = (*leasedStore)(nil)
	_ objstore.RangeStreamer = (*leasedStore)(nil)
	_ objstore.InfoLister    = (*leasedStore)(nil)
	_ objstore.AfterLister   = (*leasedStore)(nil)
	_ objstore.BatchDeleter  = (*leasedStore)(nil)
	_ objstore.Multipart     = (*leasedStore)(nil)
	_ objstore.StagedLister  = (*leasedStore)(nil)
)
