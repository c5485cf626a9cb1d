package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
)

// FS is a Store on a local directory, for labs and tests. Put writes a
// temporary file, fsyncs it and renames it over the key; PutIfAbsent links
// the fsynced temporary file to the key, which fails if the key exists, so
// it is atomic across processes on one filesystem.
type FS struct {
	root string
	seq  atomic.Uint64
}

// NewFS returns a Store rooted at dir, creating it if needed.
func NewFS(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return &FS{root: abs}, nil
}

// Root returns the directory the store is rooted at.
func (s *FS) Root() string { return s.root }

// checkKey rejects keys that are not clean relative slash paths: empty
// keys, a leading or trailing slash, empty, "." or ".." segments and
// backslashes. A key must not escape the root or name a directory.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("invalid object key %q: must not be empty", key)
	}
	if strings.Contains(key, "\\") {
		return fmt.Errorf("invalid object key %q: must not contain a backslash", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid object key %q: segments must not be empty, \".\" or \"..\"", key)
		}
	}
	return nil
}

// checkPrefix rejects list prefixes that could leave the root: a leading
// slash, a backslash, or a complete "." or ".." segment.
func checkPrefix(prefix string) error {
	if strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "\\") {
		return fmt.Errorf("invalid list prefix %q: must be relative and use slashes", prefix)
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] { // the last segment is a partial name
		if seg == "." || seg == ".." {
			return fmt.Errorf("invalid list prefix %q: segments must not be \".\" or \"..\"", prefix)
		}
	}
	return nil
}

func (s *FS) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// isTemp reports whether a file name is one of our temporary files.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// absent reports whether err from opening a key's path means there is no
// object: the path does not exist, a parent is a file, or it is a directory
// (a directory is a key prefix, not an object).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

func (s *FS) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if absent(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return b, nil
}

// writeTemp writes data to a fsynced temporary file beside p.
func (s *FS) writeTemp(p string, data []byte) (string, error) {
	return s.writeTempFrom(p, bytes.NewReader(data))
}

// writeTempFrom copies r to a fsynced temporary file beside p.
func (s *FS) writeTempFrom(p string, r io.Reader) (string, error) {
	dir := filepath.Dir(p)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", filepath.Base(p), os.Getpid(), s.seq.Add(1)))
	var f *os.File
	// A concurrent Delete may remove the (empty) directory between MkdirAll
	// and OpenFile; try again a few times.
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		var err error
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt >= 10 {
			return "", err
		}
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func (s *FS) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(p, data)
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

func (s *FS) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(p, data)
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
		}
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	syncDir(filepath.Dir(p))
	return nil
}

func (s *FS) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	var keys []string
	// Walk from the deepest directory the prefix names.
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Gone (a concurrent Delete) or a parent is a file: no keys here.
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if isTemp(d.Name()) || isStaged(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Strings(keys)
	return keys, nil
}

// Delete removes the key's file, then the parent directories it leaves
// empty (up to the root), so that a deleted "a/b" does not leave a
// directory "a" that would make PutIfAbsent("a") fail.
func (s *FS) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	// os.Remove would also remove an empty directory; a directory is not
	// an object.
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return fmt.Errorf("delete %s: %w", key, ErrNotExist)
	}
	if err := os.Remove(p); err != nil {
		if absent(err) {
			return fmt.Errorf("delete %s: %w", key, ErrNotExist)
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		// Fails (and stops) at the first directory that is not empty.
		if os.Remove(dir) != nil {
			break
		}
	}
	syncDir(filepath.Dir(p))
	return nil
}

// stagedSuffix ends the names of the FS backend's multipart parts.
const stagedSuffix = ".inprogress"

// isStaged reports whether a file name is a staged multipart part:
// "_<name>.<uploadID>-<n>.inprogress". Such names start with '_' (skipped
// by Spark, Hive, Trino) and do not end in the object's own suffix (so a
// "*.parquet" glob, DuckDB's included, does not match them). List does not
// return them.
func isStaged(name string) bool {
	return strings.HasPrefix(name, "_") && strings.HasSuffix(name, stagedSuffix)
}

func checkUploadID(id string) error {
	if len(id) == 0 || len(id) > 64 {
		return fmt.Errorf("invalid upload id %q", id)
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return fmt.Errorf("invalid upload id %q: want lower-case hex", id)
		}
	}
	return nil
}

// partPath is where part n of an upload to p is staged.
func partPath(p, uploadID string, n int) string {
	return filepath.Join(filepath.Dir(p), fmt.Sprintf("_%s.%s-%d%s", filepath.Base(p), uploadID, n, stagedSuffix))
}

// CreateMultipart returns a new upload id. Nothing is written until a part
// is uploaded.
func (s *FS) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("create multipart %s: %w", key, err)
	}
	if _, err := s.path(key); err != nil {
		return "", err
	}
	return newUploadID(), nil
}

// UploadPart writes the part to a hidden staged file beside the key.
func (s *FS) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	if err := ctx.Err(); err != nil {
		return Part{}, fmt.Errorf("upload part %d of %s: %w", number, key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return Part{}, err
	}
	if err := checkUploadID(uploadID); err != nil {
		return Part{}, fmt.Errorf("upload part %d of %s: %w", number, key, err)
	}
	if number < 1 {
		return Part{}, fmt.Errorf("upload part %d of %s: part numbers start at 1", number, key)
	}
	pp := partPath(p, uploadID, number)
	tmp, err := s.writeTemp(pp, data)
	if err != nil {
		return Part{}, fmt.Errorf("upload part %d of %s: %w", number, key, err)
	}
	if err := os.Rename(tmp, pp); err != nil {
		os.Remove(tmp)
		return Part{}, fmt.Errorf("upload part %d of %s: %w", number, key, err)
	}
	syncDir(filepath.Dir(pp))
	return Part{Number: number, ETag: PartETag(data), Size: int64(len(data))}, nil
}

// CompleteMultipart renames the single staged part onto the key, or writes
// the parts' concatenation to a temporary file and renames that; either is
// atomic. A repeated call after success finds the parts gone and the object
// equal to them, and returns nil.
func (s *FS) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("complete multipart %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := checkUploadID(uploadID); err != nil {
		return fmt.Errorf("complete multipart %s: %w", key, err)
	}
	if err := checkParts(key, parts); err != nil {
		return err
	}
	var all []byte
	for _, part := range parts {
		b, err := os.ReadFile(partPath(p, uploadID, part.Number))
		if absent(err) {
			return s.completedAlready(ctx, key, uploadID, parts)
		}
		if err != nil {
			return fmt.Errorf("complete multipart %s: %w", key, err)
		}
		if PartETag(b) != part.ETag || int64(len(b)) != part.Size {
			return fmt.Errorf("complete multipart %s upload %s: staged part %d is not the part given (etag %s, size %d)", key, uploadID, part.Number, part.ETag, part.Size)
		}
		if len(parts) > 1 {
			all = append(all, b...)
		}
	}
	if len(parts) == 1 {
		if err := os.Rename(partPath(p, uploadID, 1), p); err != nil {
			if absent(err) { // a concurrent Complete won
				return s.completedAlready(ctx, key, uploadID, parts)
			}
			return fmt.Errorf("complete multipart %s: %w", key, err)
		}
	} else {
		tmp, err := s.writeTemp(p, all)
		if err != nil {
			return fmt.Errorf("complete multipart %s: %w", key, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("complete multipart %s: %w", key, err)
		}
		for _, part := range parts {
			os.Remove(partPath(p, uploadID, part.Number))
		}
	}
	syncDir(filepath.Dir(p))
	return nil
}

func (s *FS) completedAlready(ctx context.Context, key, uploadID string, parts []Part) error {
	b, err := s.Get(ctx, key)
	if err == nil && matchesParts(b, parts) {
		return nil
	}
	if err != nil && !errors.Is(err, ErrNotExist) {
		return fmt.Errorf("complete multipart %s: %w", key, err)
	}
	return fmt.Errorf("complete multipart %s upload %s: %w", key, uploadID, ErrNoSuchUpload)
}

// AbortMultipart removes the upload's staged parts and the directories that
// leaves empty.
func (s *FS) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("abort multipart %s: %w", key, err)
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := checkUploadID(uploadID); err != nil {
		return fmt.Errorf("abort multipart %s: %w", key, err)
	}
	dir := filepath.Dir(p)
	entries, err := os.ReadDir(dir)
	if absent(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("abort multipart %s: %w", key, err)
	}
	prefix := fmt.Sprintf("_%s.%s-", filepath.Base(p), uploadID)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), stagedSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !absent(err) {
				return fmt.Errorf("abort multipart %s: %w", key, err)
			}
		}
	}
	for d := dir; d != s.root && strings.HasPrefix(d, s.root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return nil
}

// ListInfo is List with each file's size and modification time, in one
// walk (ListInfoAfter from the start).
func (s *FS) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return s.ListInfoAfter(ctx, prefix, "")
}
