package objstore

import (
	"context"
	"fmt"
	"io"
)

// Every decorator in this package forwards every optional capability of
// the store it wraps (falling back as the capability's helper does when
// the wrapped store lacks it), so wrapping a store never turns a ranged
// read into a full one or a batch delete into one request per key.
var (
	_ Streamer      = (*prefixed)(nil)
	_ RangeReader   = (*prefixed)(nil)
	_ RangeStreamer = (*prefixed)(nil)
	_ InfoLister    = (*prefixed)(nil)
	_ AfterLister   = (*prefixed)(nil)
	_ BatchDeleter  = (*prefixed)(nil)
	_ Multipart     = (*prefixed)(nil)
	_ StagedLister  = (*prefixed)(nil)

	_ Streamer      = (*Counting)(nil)
	_ RangeReader   = (*Counting)(nil)
	_ RangeStreamer = (*Counting)(nil)
	_ InfoLister    = (*Counting)(nil)
	_ AfterLister   = (*Counting)(nil)
	_ BatchDeleter  = (*Counting)(nil)
	_ Multipart     = (*Counting)(nil)
	_ StagedLister  = (*Counting)(nil)

	_ Streamer      = (*Faulty)(nil)
	_ RangeReader   = (*Faulty)(nil)
	_ RangeStreamer = (*Faulty)(nil)
	_ InfoLister    = (*Faulty)(nil)
	_ AfterLister   = (*Faulty)(nil)
	_ BatchDeleter  = (*Faulty)(nil)
	_ Multipart     = (*Faulty)(nil)
	_ StagedLister  = (*Faulty)(nil)
)

// Forward is the base of a decorator outside this package: embed it (not
// Store) and the decorator forwards Store and every optional capability
// of the store it wraps, falling back as each capability's helper does.
// A decorator that intercepts writes must override every write path it
// guards, not only Put: PutStream, the multipart calls and DeleteMany
// reach the wrapped store directly.
type Forward struct{ Store }

// GetStream forwards a streamed read (GetReader).
func (f Forward) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	return GetReader(ctx, f.Store, key)
}

// PutStream forwards a streamed write (PutReader).
func (f Forward) PutStream(ctx context.Context, key string, r io.Reader) error {
	return PutReader(ctx, f.Store, key, r)
}

// GetRange forwards a ranged read (GetRange).
func (f Forward) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	return GetRange(ctx, f.Store, key, off, n)
}

// GetRangeStream forwards a ranged stream (GetRangeReader).
func (f Forward) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return GetRangeReader(ctx, f.Store, key, off, n)
}

// ListInfo forwards a listing with sizes and modification times.
func (f Forward) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	il, ok := f.Store.(InfoLister)
	if !ok {
		return nil, fmt.Errorf("list %s: the store cannot list modification times", prefix)
	}
	return il.ListInfo(ctx, prefix)
}

// ListInfoAfter forwards a listing after a key (ListInfoAfter).
func (f Forward) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	return ListInfoAfter(ctx, f.Store, prefix, startAfter)
}

// DeleteMany forwards a batch delete (DeleteMany).
func (f Forward) DeleteMany(ctx context.Context, keys []string) error {
	return DeleteMany(ctx, f.Store, keys)
}

// CreateMultipart forwards to the wrapped store's multipart uploads.
func (f Forward) CreateMultipart(ctx context.Context, key string) (string, error) {
	mp, err := multipartOf(f.Store, OpCreateMultipart, key)
	if err != nil {
		return "", err
	}
	return mp.CreateMultipart(ctx, key)
}

// UploadPart forwards to the wrapped store's multipart uploads.
func (f Forward) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	mp, err := multipartOf(f.Store, OpUploadPart, key)
	if err != nil {
		return Part{}, err
	}
	return mp.UploadPart(ctx, key, uploadID, number, data)
}

// CompleteMultipart forwards to the wrapped store's multipart uploads.
func (f Forward) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	mp, err := multipartOf(f.Store, OpCompleteMultipart, key)
	if err != nil {
		return err
	}
	return mp.CompleteMultipart(ctx, key, uploadID, parts)
}

// AbortMultipart forwards to the wrapped store's multipart uploads.
func (f Forward) AbortMultipart(ctx context.Context, key, uploadID string) error {
	mp, err := multipartOf(f.Store, OpAbortMultipart, key)
	if err != nil {
		return err
	}
	return mp.AbortMultipart(ctx, key, uploadID)
}

// ListsStaged answers for the wrapped store.
func (f Forward) ListsStaged() bool {
	_, ok := StagedListerOf(f.Store)
	return ok
}

// ListStaged forwards to the wrapped store's staged listing.
func (f Forward) ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error) {
	l, err := stagedListerOf(f.Store, prefix)
	if err != nil {
		return nil, err
	}
	return l.ListStaged(ctx, prefix)
}

var (
	_ Streamer      = Forward{}
	_ RangeReader   = Forward{}
	_ RangeStreamer = Forward{}
	_ InfoLister    = Forward{}
	_ AfterLister   = Forward{}
	_ BatchDeleter  = Forward{}
	_ Multipart     = Forward{}
	_ StagedLister  = Forward{}
)
