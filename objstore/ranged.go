package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// RangeReader is an optional capability of a Store: reading a byte range
// of an object, so a reader that needs random access (a Parquet footer,
// then its column chunks) holds only the ranges it reads. Find it through
// OpenReaderAt, which falls back to Get for a store without it. Decorators
// forward it.
//
// GetRange returns the bytes [off, off+n) of key, fewer if the object ends
// first (none if off is at or past its end), and the object's size. A
// negative off asks for the last n bytes (all of them if the object is
// smaller), so one request finds the size and reads the tail. An absent
// key is ErrNotExist.
type RangeReader interface {
	GetRange(ctx context.Context, key string, off, n int64) (data []byte, size int64, err error)
}

// ReaderAt is an object opened for random access: an io.ReaderAt over
// ranged reads (see RangeReader) that keeps the object's tail, read when
// it was opened, and nothing else. Reads after the object changed see the
// new bytes: open only immutable objects (sink files).
type ReaderAt struct {
	ctx      context.Context
	rr       RangeReader
	key      string
	size     int64
	tail     []byte // the object's last len(tail) bytes
	tailFrom int64
}

// OpenReaderAt opens key for random access. The first request reads the
// last tail bytes (the whole object if it is no larger), so a small object
// costs one GET, as Get would, and a large one's footer is at hand. On a
// store without RangeReader the object is read whole.
func OpenReaderAt(ctx context.Context, s Store, key string, tail int64) (*ReaderAt, error) {
	rr, ok := s.(RangeReader)
	if !ok {
		b, err := s.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		return &ReaderAt{ctx: ctx, key: key, size: int64(len(b)), tail: b}, nil
	}
	if tail < 1 {
		tail = 1
	}
	b, size, err := rr.GetRange(ctx, key, -1, tail)
	if err != nil {
		return nil, err
	}
	return &ReaderAt{ctx: ctx, rr: rr, key: key, size: size, tail: b, tailFrom: size - int64(len(b))}, nil
}

// Size returns the object's size in bytes.
func (r *ReaderAt) Size() int64 { return r.size }

// ReadAt reads len(p) bytes at off, from the kept tail or with one ranged
// read; fewer only at the object's end, with io.EOF.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: negative offset", r.key, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	var n int
	if off >= r.tailFrom {
		n = copy(p[:want], r.tail[off-r.tailFrom:])
	} else {
		b, _, err := r.rr.GetRange(r.ctx, r.key, off, want)
		if err != nil {
			return 0, err
		}
		n = copy(p[:want], b)
		if int64(n) < want {
			return n, fmt.Errorf("read %s at %d: got %d of %d bytes: %w", r.key, off, n, want, io.ErrUnexpectedEOF)
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// clampRange turns (off, n) into [from, to) within an object of size.
func clampRange(off, n, size int64) (from, to int64) {
	if off < 0 {
		return max(0, size-n), size
	}
	from = min(off, size)
	return from, min(size, from+max(n, 0))
}

// GetRange reads the range from the key's file.
func (s *FS) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if absent(err) {
		return nil, 0, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	from, to := clampRange(off, n, fi.Size())
	b := make([]byte, to-from)
	if _, err := f.ReadAt(b, from); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return nil, 0, fmt.Errorf("get %s bytes %d-%d: %w", key, from, to, err)
	}
	return b, fi.Size(), nil
}

// GetRange reads the range from the object in memory.
func (m *Mem) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	b, err := m.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	from, to := clampRange(off, n, int64(len(b)))
	return b[from:to], int64(len(b)), nil
}

// GetRange is a GET with a Range header ("bytes=a-b", or "bytes=-n" for
// the tail); the size comes from the answer's Content-Range. A range
// starting at or past the end (416) reads nothing.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, s.fail("get", key, err)
	}
	if n <= 0 {
		n = 1
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	if off < 0 {
		rng = fmt.Sprintf("bytes=-%d", n)
	}
	for attempt := 1; ; attempt++ {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), Range: aws.String(rng)})
		if err != nil {
			if isNotFound(err) {
				return nil, 0, s.fail("get", key, ErrNotExist)
			}
			if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || apiCode(err) == "InvalidRange" {
				return s.getRangeUnsatisfiable(ctx, key, off, n)
			}
			return nil, 0, s.fail("get", key, err)
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err == nil {
			size, ok := contentRangeSize(aws.ToString(out.ContentRange))
			if !ok { // a whole-object answer (200)
				size = int64(len(b))
				from, to := clampRange(off, n, size)
				b = b[from:to]
			}
			return b, size, nil
		}
		if attempt >= s.maxAttempt || ctx.Err() != nil {
			return nil, 0, s.fail("get", key, fmt.Errorf("read body of %s: %w", rng, err))
		}
		if err := sleepCtx(ctx, s.backoff(attempt)); err != nil {
			return nil, 0, s.fail("get", key, err)
		}
	}
}

// getRangeUnsatisfiable answers a range S3 refused (past the end, or a
// tail of an empty object): no bytes, and the size from a HEAD.
func (s *S3) getRangeUnsatisfiable(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		if isNotFound(err) {
			return nil, 0, s.fail("get", key, ErrNotExist)
		}
		return nil, 0, s.fail("get", key, err)
	}
	size := aws.ToInt64(h.ContentLength)
	if from, to := clampRange(off, n, size); to > from {
		return nil, 0, s.fail("get", key, fmt.Errorf("range %d+%d of a %d-byte object refused", off, n, size))
	}
	return nil, size, nil
}

// contentRangeSize parses the total of "bytes a-b/total".
func contentRangeSize(cr string) (int64, bool) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok || total == "*" {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil
}

// GetRange forwards to the inner store's ranged read (or reads it whole).
func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, err
	}
	return GetRange(ctx, p.inner, p.prefix+key, off, n)
}

// GetRange counts one get of the bytes the range returned.
func (c *Counting) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	b, size, err := GetRange(ctx, c.inner, key, off, n)
	c.record(OpGet, key, len(b), err)
	return b, size, err
}

// GetRange runs the ranged read through the rules as a Get.
func (f *Faulty) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	var b []byte
	var size int64
	err := f.do(OpGet, key, func() (err error) { b, size, err = GetRange(ctx, f.inner, key, off, n); return err })
	if err != nil {
		return nil, 0, err
	}
	return b, size, nil
}

// GetRange reads a range of key from s (see RangeReader): through its
// RangeReader, or whole and cut when it has none.
func GetRange(ctx context.Context, s Store, key string, off, n int64) ([]byte, int64, error) {
	if rr, ok := s.(RangeReader); ok {
		return rr.GetRange(ctx, key, off, n)
	}
	b, err := s.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	from, to := clampRange(off, n, int64(len(b)))
	return b[from:to], int64(len(b)), nil
}

// The backends and decorators that read ranges.
var (
	_ RangeReader = (*FS)(nil)
	_ RangeReader = (*Mem)(nil)
	_ RangeReader = (*S3)(nil)
	_ RangeReader = (*prefixed)(nil)
	_ RangeReader = (*Counting)(nil)
	_ RangeReader = (*Faulty)(nil)
)
