package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Streamer is an optional capability of a Store: objects read and written
// as streams, so an object larger than memory (a state snapshot) is never
// held whole. Find it with GetReader and PutReader, which fall back to Get
// and Put for a store without it. Decorators forward it.
//
// Contract, in addition to Store's:
//   - PutStream writes the object from r and replaces it atomically, as Put
//     does: until it returns nil a reader sees the old object (or none),
//     never a prefix. If r returns an error, or ctx ends, the put fails and
//     the old object is unchanged. Memory use is bounded (a part buffer),
//     whatever the object's size.
//   - GetStream returns the object's bytes as a stream, or ErrNotExist. A
//     failure part-way shows as an error from Read; the caller retries the
//     whole read.
type Streamer interface {
	GetStream(ctx context.Context, key string) (io.ReadCloser, error)
	PutStream(ctx context.Context, key string, r io.Reader) error
}

// GetReader opens key for streaming on s, or reads it whole and wraps the
// bytes when s is not a Streamer.
func GetReader(ctx context.Context, s Store, key string) (io.ReadCloser, error) {
	if st, ok := s.(Streamer); ok {
		return st.GetStream(ctx, key)
	}
	b, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// PutReader writes key from r on s by streaming, or reads r whole and
// Puts the bytes when s is not a Streamer.
func PutReader(ctx context.Context, s Store, key string, r io.Reader) error {
	if st, ok := s.(Streamer); ok {
		return st.PutStream(ctx, key, r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return s.Put(ctx, key, b)
}

// PutWriter writes key by calling write with a writer whose bytes stream
// to s (through a pipe, in a goroutine PutWriter waits for). The object
// exists only if write and the put both succeed.
func PutWriter(ctx context.Context, s Store, key string, write func(w io.Writer) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := PutReader(ctx, s, key, pr)
		pr.CloseWithError(err) // unblocks write if the put stopped early
		done <- err
	}()
	werr := write(pw)
	if werr != nil {
		pw.CloseWithError(werr)
	} else {
		pw.Close()
	}
	perr := <-done
	if werr != nil {
		return werr
	}
	return perr
}

// GetStream opens the key's file.
func (s *FS) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if absent(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	return f, nil
}

// PutStream copies r into a fsynced temporary file beside the key's path
// and renames it over the key, as Put does.
func (s *FS) PutStream(ctx context.Context, key string, r io.Reader) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTempFrom(p, ctxReader{ctx, r})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	syncDir(filepath.Dir(p))
	return nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// GetStream forwards to the inner store's stream (or its Get).
func (p *prefixed) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return GetReader(ctx, p.inner, p.prefix+key)
}

// PutStream forwards to the inner store's stream (or its Put).
func (p *prefixed) PutStream(ctx context.Context, key string, r io.Reader) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return PutReader(ctx, p.inner, p.prefix+key, r)
}

// GetStream counts one get whose bytes are those read from the stream,
// recorded when it is closed.
func (c *Counting) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := GetReader(ctx, c.inner, key)
	if err != nil {
		c.record(OpGet, key, 0, err)
		return nil, err
	}
	return &countingReader{ReadCloser: rc, done: func(n int, err error) { c.record(OpGet, key, n, err) }}, nil
}

// PutStream counts one put of the bytes streamed.
func (c *Counting) PutStream(ctx context.Context, key string, r io.Reader) error {
	cr := &countingReader{ReadCloser: io.NopCloser(r)}
	err := PutReader(ctx, c.inner, key, cr)
	c.record(OpPut, key, cr.n, err)
	return err
}

type countingReader struct {
	io.ReadCloser
	n      int
	err    error
	done   func(n int, err error)
	closed bool
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.n += n
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

func (r *countingReader) Close() error {
	err := r.ReadCloser.Close()
	if !r.closed && r.done != nil {
		r.closed = true
		r.done(r.n, r.err)
	}
	return err
}

// GetStream runs the open through the rules (a read failing part-way is
// not injected).
func (f *Faulty) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := f.do(OpGet, key, func() (err error) { rc, err = GetReader(ctx, f.inner, key); return err })
	if err != nil {
		if rc != nil {
			rc.Close()
		}
		return nil, err
	}
	return rc, nil
}

// PutStream runs the put through the rules as a Put.
func (f *Faulty) PutStream(ctx context.Context, key string, r io.Reader) error {
	return f.do(OpPut, key, func() error { return PutReader(ctx, f.inner, key, r) })
}

// The backends and decorators that stream.
var (
	_ Streamer = (*FS)(nil)
	_ Streamer = (*S3)(nil)
	_ Streamer = (*prefixed)(nil)
	_ Streamer = (*Counting)(nil)
	_ Streamer = (*Faulty)(nil)
)
