package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// RangeStreamer is an optional capability of a Store: a byte range of an
// object read as a stream, so a reader of part of a large object (a file
// source's split of a JSON-lines file) holds a buffer, not the range.
// Find it through GetRangeReader, which falls back to GetRange, GetStream
// or Get for a store without it. Decorators forward it.
//
// GetRangeStream returns the bytes [off, off+n) of key as a stream, fewer
// if the object ends first (none if off is at or past its end); n < 0
// reads to the end. off must be >= 0. An absent key is ErrNotExist. A
// failure part-way shows as an error from Read.
type RangeStreamer interface {
	GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
}

// GetRangeReader opens the bytes [off, off+n) of key on s (n < 0: to the
// end) as a stream: through RangeStreamer, else a ranged read held in
// memory (RangeReader; n < 0 reads the whole object), else the object's
// stream with the first off bytes skipped, else Get.
func GetRangeReader(ctx context.Context, s Store, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("get %s: negative offset %d", key, off)
	}
	if rs, ok := s.(RangeStreamer); ok {
		return rs.GetRangeStream(ctx, key, off, n)
	}
	if rr, ok := s.(RangeReader); ok && n >= 0 {
		b, _, err := rr.GetRange(ctx, key, off, n)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	rc, err := GetReader(ctx, s, key)
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, off); err != nil && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, fmt.Errorf("get %s: skip to byte %d: %w", key, off, err)
	}
	return limited(rc, n), nil
}

// limited reads at most n bytes of rc (n < 0: all) and closes rc.
func limited(rc io.ReadCloser, n int64) io.ReadCloser {
	if n < 0 {
		return rc
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, n), rc}
}

// GetRangeStream opens the key's file at off.
func (s *FS) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.GetStream(ctx, key)
	if err != nil {
		return nil, err
	}
	f := rc.(*os.File)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("get %s at byte %d: %w", key, off, err)
	}
	return limited(f, n), nil
}

// GetRangeStream reads the range from the object in memory.
func (m *Mem) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	b, err := m.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		n = int64(len(b))
	}
	from, to := clampRange(off, n, int64(len(b)))
	return io.NopCloser(bytes.NewReader(b[from:to])), nil
}

// GetRangeStream is a GET with a Range header whose body is streamed and
// resumed after a broken read as GetStream's is. A range starting at or
// past the end reads nothing.
func (s *S3) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, s.fail("get", key, err)
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if n > 0 {
		rng += fmt.Sprint(off + n - 1)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), Range: aws.String(rng)})
	if err != nil {
		if isNotFound(err) {
			return nil, s.fail("get", key, ErrNotExist)
		}
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || apiCode(err) == "InvalidRange" {
			// At or past the end: nothing to read (or an absent key,
			// which the HEAD tells apart).
			if _, _, err := s.getRangeUnsatisfiable(ctx, key, off, 1); err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.fail("get", key, err)
	}
	size := aws.ToInt64(out.ContentLength)
	if cr, ok := contentRangeSize(aws.ToString(out.ContentRange)); !ok || cr < 0 {
		// A whole-object answer (200): skip to off.
		if _, err := io.CopyN(io.Discard, out.Body, off); err != nil && !errors.Is(err, io.EOF) {
			out.Body.Close()
			return nil, s.fail("get", key, fmt.Errorf("skip to byte %d: %w", off, err))
		}
		size = max(size-off, 0)
	}
	// The resumed read asks for the rest of the object; limited stops at
	// the range's end.
	body := &resumingBody{s: s, ctx: ctx, key: key, etag: aws.ToString(out.ETag), off: off, size: off + size, body: out.Body}
	return limited(body, n), nil
}

// GetRangeStream forwards to the inner store's ranged stream.
func (p *prefixed) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return GetRangeReader(ctx, p.inner, p.prefix+key, off, n)
}

// GetRangeStream counts one get whose bytes are those read from the
// stream, recorded when it is closed.
func (c *Counting) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := GetRangeReader(ctx, c.inner, key, off, n)
	if err != nil {
		c.record(OpGet, key, 0, err)
		return nil, err
	}
	return &countingReader{ReadCloser: rc, done: func(n int, err error) { c.record(OpGet, key, n, err) }}, nil
}

// GetRangeStream runs the open through the rules as a Get (a read
// failing part-way is not injected).
func (f *Faulty) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := f.do(OpGet, key, func() (err error) { rc, err = GetRangeReader(ctx, f.inner, key, off, n); return err })
	if err != nil {
		if rc != nil {
			rc.Close()
		}
		return nil, err
	}
	return rc, nil
}

var (
	_ RangeStreamer = (*FS)(nil)
	_ RangeStreamer = (*Mem)(nil)
	_ RangeStreamer = (*S3)(nil)
	_ RangeStreamer = (*prefixed)(nil)
	_ RangeStreamer = (*Counting)(nil)
	_ RangeStreamer = (*Faulty)(nil)
)
