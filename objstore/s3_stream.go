package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// DefaultPartSize is the part size of a streamed S3 put: the memory one
// streamed put holds. S3 needs parts of at least 5 MiB but the last.
const DefaultPartSize = 8 << 20

// GetStream returns the object's body as a stream. A connection lost
// part-way is resumed where it broke (a ranged GET of the same version,
// If-Match its ETag), up to the store's attempts; a failure beyond them,
// or an object replaced meanwhile, shows as a Read error.
func (s *S3) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, s.fail("get", key, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		if isNotFound(err) {
			return nil, s.fail("get", key, ErrNotExist)
		}
		return nil, s.fail("get", key, err)
	}
	return &resumingBody{s: s, ctx: ctx, key: key, etag: aws.ToString(out.ETag), size: aws.ToInt64(out.ContentLength), body: out.Body}, nil
}

// resumingBody is an S3 object body that resumes after a broken read.
type resumingBody struct {
	s        *S3
	ctx      context.Context
	key      string
	etag     string
	size     int64
	body     io.ReadCloser
	off      int64
	attempts int // resumes so far
}

func (r *resumingBody) Read(b []byte) (int, error) {
	for {
		n, err := r.body.Read(b)
		r.off += int64(n)
		if err == nil || errors.Is(err, io.EOF) || n > 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				err = nil // report the bytes now, the error at the next Read
			}
			return n, err
		}
		if rerr := r.resume(err); rerr != nil {
			return 0, rerr
		}
	}
}

// resume reopens the object at r.off after cause broke the read.
func (r *resumingBody) resume(cause error) error {
	r.body.Close()
	r.body = io.NopCloser(errReader{cause})
	r.attempts++
	if r.off >= r.size && r.size > 0 {
		r.body = io.NopCloser(errReader{io.EOF}) // broke after the last byte
		return nil
	}
	if r.attempts >= r.s.maxAttempt || r.ctx.Err() != nil || r.etag == "" {
		return r.s.fail("get", r.key, fmt.Errorf("read body at byte %d: %w", r.off, cause))
	}
	d := r.s.backoff(r.attempts)
	r.s.logger.Debug("s3 resume body read", "bucket", r.s.bucket, "key", r.s.prefix+r.key, "offset", r.off, "attempt", r.attempts, "delay", d, "err", cause)
	if err := sleepCtx(r.ctx, d); err != nil {
		return r.s.fail("get", r.key, err)
	}
	out, err := r.s.client.GetObject(r.ctx, &s3.GetObjectInput{
		Bucket: aws.String(r.s.bucket), Key: aws.String(r.s.prefix + r.key),
		Range: aws.String(fmt.Sprintf("bytes=%d-", r.off)), IfMatch: aws.String(r.etag),
	})
	if err != nil {
		return r.s.fail("get", r.key, fmt.Errorf("resume read at byte %d (after %v): %w", r.off, cause, err))
	}
	r.body = out.Body
	return nil
}

func (r *resumingBody) Close() error { return r.body.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// PutStream uploads r one part buffer at a time. An object that fits in
// one part is a plain PutObject; a larger one is a multipart upload, which
// S3 makes visible only when it is completed, so the replacement is atomic
// as Put's is. A failed upload is aborted; one left behind by a crash is
// invisible and is removed by the bucket's AbortIncompleteMultipartUpload
// lifecycle rule (see the README).
func (s *S3) PutStream(ctx context.Context, key string, r io.Reader) error {
	if err := checkKey(key); err != nil {
		return s.fail("put", key, err)
	}
	size := s.partSize
	if size <= 0 {
		size = DefaultPartSize
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(r, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.Put(ctx, key, buf[:n])
	}
	if err != nil {
		return s.fail("put", key, fmt.Errorf("read: %w", err))
	}
	full := s.prefix + key
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(full)})
	if err != nil {
		return s.fail("put", key, fmt.Errorf("create multipart upload: %w", err))
	}
	abort := func(cause error) error {
		// A fresh context: the abort must run even when ctx ended.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(full), UploadId: created.UploadId}); err != nil {
			s.logger.Warn("s3 abort multipart upload failed; the bucket's lifecycle rule removes it", "bucket", s.bucket, "key", full, "err", err)
		}
		return s.fail("put", key, cause)
	}
	var parts []types.CompletedPart
	for num := int32(1); ; num++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(s.bucket), Key: aws.String(full), UploadId: created.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return abort(fmt.Errorf("upload part %d: %w", num, err))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		if n < len(buf) {
			break
		}
		n, err = io.ReadFull(r, buf)
		if errors.Is(err, io.EOF) {
			break // the previous part was the last
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return abort(fmt.Errorf("read: %w", err))
		}
		if err := ctx.Err(); err != nil {
			return abort(err)
		}
	}
	if _, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(full), UploadId: created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return abort(fmt.Errorf("complete multipart upload: %w", err))
	}
	return nil
}
