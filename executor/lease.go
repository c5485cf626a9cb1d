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
type leasedStore struct {
	objstore.Store
	lease *writeLease
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
	return s.Store.Put(ctx, key, data)
}

func (s *leasedStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.check("put-if-absent", key); err != nil {
		return err
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// GetStream forwards a streamed read (reads pass).
func (s *leasedStore) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	return objstore.GetReader(ctx, s.Store, key)
}

// PutStream refuses a streamed write while the lease is lapsed.
func (s *leasedStore) PutStream(ctx context.Context, key string, r io.Reader) error {
	if err := s.check("put", key); err != nil {
		return err
	}
	return objstore.PutReader(ctx, s.Store, key, r)
}

var _ objstore.Streamer = (*leasedStore)(nil)

func (s *leasedStore) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

// The multipart calls a reduce task makes (create, upload part) are writes
// and need the lease; completing and aborting are the driver's, but pass
// the same check when an executor makes them.

func (s *leasedStore) multipart(op, key string) (objstore.Multipart, error) {
	if err := s.check(op, key); err != nil {
		return nil, err
	}
	mp, ok := s.Store.(objstore.Multipart)
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", op, key, objstore.ErrMultipartUnsupported)
	}
	return mp, nil
}

func (s *leasedStore) CreateMultipart(ctx context.Context, key string) (string, error) {
	mp, err := s.multipart("create-multipart", key)
	if err != nil {
		return "", err
	}
	return mp.CreateMultipart(ctx, key)
}

func (s *leasedStore) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (objstore.Part, error) {
	mp, err := s.multipart("upload-part", key)
	if err != nil {
		return objstore.Part{}, err
	}
	return mp.UploadPart(ctx, key, uploadID, number, data)
}

func (s *leasedStore) CompleteMultipart(ctx context.Context, key, uploadID string, parts []objstore.Part) error {
	mp, err := s.multipart("complete-multipart", key)
	if err != nil {
		return err
	}
	return mp.CompleteMultipart(ctx, key, uploadID, parts)
}

func (s *leasedStore) AbortMultipart(ctx context.Context, key, uploadID string) error {
	mp, err := s.multipart("abort-multipart", key)
	if err != nil {
		return err
	}
	return mp.AbortMultipart(ctx, key, uploadID)
}

// ListsStaged answers for the wrapped store: a reduce task on a store that
// lists its staged uploads writes no pending-upload record.
func (s *leasedStore) ListsStaged() bool {
	_, ok := objstore.StagedListerOf(s.Store)
	return ok
}

// ListStaged is a read: it passes.
func (s *leasedStore) ListStaged(ctx context.Context, prefix string) ([]objstore.StagedUpload, error) {
	l, ok := objstore.StagedListerOf(s.Store)
	if !ok {
		return nil, fmt.Errorf("list staged uploads %s: %w", prefix, objstore.ErrStagedListUnsupported)
	}
	return l.ListStaged(ctx, prefix)
}
