package objstore

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoSuchUpload is returned (wrapped) by CompleteMultipart when the upload
// no longer exists (completed or aborted) and the object under its key is
// not the one these parts make.
var ErrNoSuchUpload = errors.New("no such multipart upload")

// ErrMultipartUnsupported is returned by a decorator's Multipart methods
// when the store it wraps has none.
var ErrMultipartUnsupported = errors.New("store does not support multipart uploads")

// Part is one uploaded part of a multipart upload, as CompleteMultipart
// needs it. ETag is the quoted hex MD5 of the part's bytes, as S3 answers
// UploadPart; Size is its length in bytes.
type Part struct {
	Number int    `json:"n"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
}

// Multipart is the optional capability of a Store to stage an object
// invisibly and make it visible later, possibly from another process: S3's
// multipart upload; on a filesystem, hidden files renamed into place. Find
// it with a type assertion (store.(objstore.Multipart)).
//
// Contract:
//   - Between CreateMultipart and CompleteMultipart the key is neither
//     readable (Get) nor listed (List) through this store, nor (FS) by a
//     reader that globs "*.parquet" or skips names starting with "_".
//   - UploadPart may be called from any process that knows the upload id;
//     part numbers start at 1.
//   - CompleteMultipart makes the object the parts' concatenation,
//     atomically. It is idempotent: if the upload is gone and the object
//     under key has exactly these parts (its ETag is MultipartETag(parts)),
//     it returns nil; if the upload is gone and the object is not that, an
//     error matching ErrNoSuchUpload.
//   - AbortMultipart discards the upload's parts. An unknown or already
//     completed upload is not an error, and a completed object is left
//     alone.
type Multipart interface {
	CreateMultipart(ctx context.Context, key string) (uploadID string, err error)
	UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error)
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// PartETag returns the ETag S3 gives a part (or a single-part object) with
// these bytes: the quoted hex MD5.
func PartETag(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// MultipartETag returns the ETag S3 gives the object completed from parts:
// the quoted hex MD5 of the concatenated binary part MD5s, a dash and the
// number of parts ("<md5 of part md5s>-<parts>").
func MultipartETag(parts []Part) (string, error) {
	h := md5.New()
	for _, p := range parts {
		b, err := hex.DecodeString(strings.Trim(p.ETag, `"`))
		if err != nil || len(b) != md5.Size {
			return "", fmt.Errorf("part %d etag %q: not a quoted hex MD5", p.Number, p.ETag)
		}
		h.Write(b)
	}
	return `"` + hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts)) + `"`, nil
}

// checkParts rejects an empty list or part numbers that are not 1..n in
// order.
func checkParts(key string, parts []Part) error {
	if len(parts) == 0 {
		return fmt.Errorf("complete multipart %s: no parts", key)
	}
	for i, p := range parts {
		if p.Number != i+1 {
			return fmt.Errorf("complete multipart %s: part %d has number %d, want %d (parts in order from 1)", key, i, p.Number, i+1)
		}
	}
	return nil
}

// matchesParts reports whether data is the concatenation of parts.
func matchesParts(data []byte, parts []Part) bool {
	for _, p := range parts {
		if p.Size < 0 || int64(len(data)) < p.Size {
			return false
		}
		if PartETag(data[:p.Size]) != p.ETag {
			return false
		}
		data = data[p.Size:]
	}
	return len(data) == 0
}

// newUploadID returns a random lower-case hex id.
func newUploadID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
