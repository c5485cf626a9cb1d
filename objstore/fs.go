package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
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

func (s *FS) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "..") || strings.Contains(key, "\\") {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

func (s *FS) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return b, nil
}

// writeTemp writes data to a fsynced temporary file beside p.
func (s *FS) writeTemp(p string, data []byte) (string, error) {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", filepath.Base(p), os.Getpid(), s.seq.Add(1)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
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
	var keys []string
	// Walk from the deepest directory the prefix names.
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && strings.Contains(d.Name(), ".tmp-") {
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

func (s *FS) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", key, ErrNotExist)
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
