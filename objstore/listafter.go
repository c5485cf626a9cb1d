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
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// AfterLister is an optional capability of a Store: listing, with sizes
// and modification times, only the keys with a prefix that sort strictly
// after a given key, at a cost that follows the keys returned rather than
// every key under the prefix (S3's ListObjectsV2 StartAfter; on the
// filesystem a walk that skips the directories whose keys all sort before
// it). Find it with ListInfoAfter, which falls back to ListInfo and a
// filter. Decorators forward it.
//
// ListInfoAfter(ctx, prefix, "") is ListInfo(ctx, prefix).
type AfterLister interface {
	ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error)
}

// ListInfoAfter lists the keys with prefix that sort after startAfter on
// s, with their sizes and modification times, in lexical order.
func ListInfoAfter(ctx context.Context, s Store, prefix, startAfter string) ([]ObjectInfo, error) {
	if al, ok := s.(AfterLister); ok {
		return al.ListInfoAfter(ctx, prefix, startAfter)
	}
	il, ok := s.(InfoLister)
	if !ok {
		return nil, fmt.Errorf("list %s: the store cannot list modification times", prefix)
	}
	infos, err := il.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return after(infos, startAfter), nil
}

// after returns the infos whose key sorts after startAfter (infos sorted).
func after(infos []ObjectInfo, startAfter string) []ObjectInfo {
	i := sort.Search(len(infos), func(i int) bool { return infos[i].Key > startAfter })
	return infos[i:]
}

// ListInfoAfter walks the directory tree in order, skipping every
// directory whose keys all sort at or before startAfter, so the work
// follows the files after it, not the tree.
func (s *FS) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p == start || key == "." {
				return nil
			}
			// Every key under dir starts with dir+"/": when that sorts
			// before startAfter and startAfter is not itself under dir,
			// all of them sort before it.
			dir := key + "/"
			if dir < startAfter && !strings.HasPrefix(startAfter, dir) {
				return fs.SkipDir
			}
			// Keys under dir that cannot have the prefix.
			if !strings.HasPrefix(dir, prefix) && !strings.HasPrefix(prefix, dir) {
				return fs.SkipDir
			}
			return nil
		}
		if isTemp(d.Name()) || isStaged(d.Name()) || key <= startAfter || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			fi, err = os.Stat(p) // the target's size and time, as Get reads it
		}
		if absent(err) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ListInfoAfter lists with StartAfter: S3 returns only the keys after it.
func (s *S3) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	return s.listInfo(ctx, prefix, in)
}

// ListInfoAfter filters the sorted keys.
func (m *Mem) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	infos, err := m.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return after(infos, startAfter), nil
}

// ListInfoAfter forwards with both keys under the prefix.
func (p *prefixed) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	sa := ""
	if startAfter != "" {
		sa = p.prefix + startAfter
	}
	infos, err := ListInfoAfter(ctx, p.inner, p.prefix+prefix, sa)
	if err != nil {
		return nil, err
	}
	out := infos[:0]
	for _, o := range infos {
		if rel, ok := strings.CutPrefix(o.Key, p.prefix); ok {
			o.Key = rel
			out = append(out, o)
		}
	}
	return out, nil
}

// ListInfoAfter counts one list, and the objects it returned.
func (c *Counting) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	infos, err := ListInfoAfter(ctx, c.inner, prefix, startAfter)
	c.recordList(prefix, len(infos), err)
	return infos, err
}

// ListInfoAfter runs the list through the rules.
func (f *Faulty) ListInfoAfter(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	var infos []ObjectInfo
	err := f.do(OpList, prefix, func() error {
		var err error
		infos, err = ListInfoAfter(ctx, f.inner, prefix, startAfter)
		return err
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// The backends and decorators that list after a key.
var (
	_ AfterLister = (*FS)(nil)
	_ AfterLister = (*S3)(nil)
	_ AfterLister = (*Mem)(nil)
	_ AfterLister = (*prefixed)(nil)
	_ AfterLister = (*Counting)(nil)
	_ AfterLister = (*Faulty)(nil)
)
