package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ErrStagedListUnsupported is returned by a decorator's ListStaged when the
// store it wraps cannot list its staged uploads.
var ErrStagedListUnsupported = errors.New("store cannot list its staged uploads")

// StagedUpload is a staged upload ListStaged found: the key its completion
// makes, and its upload id.
type StagedUpload struct {
	Key      string
	UploadID string
}

// StagedLister is the optional capability of a Multipart store to list the
// uploads staged under a key prefix: every upload with at least one part
// uploaded (by any process, before the call) and not yet completed or
// aborted. With it, an upload an interrupted writer leaves behind can be
// found by listing, without a record of it written first. The filesystem
// has it (its staged parts are hidden files beside the key); S3 does not
// (listing uploads by prefix is unreliable: MinIO lists none).
//
// Find it with StagedListerOf, not a bare type assertion: a decorator has
// the methods whatever it wraps, and ListsStaged answers for the store
// underneath.
//
// An upload whose completion was interrupted after the object appeared may
// still be listed; aborting it leaves the object alone (see Multipart).
type StagedLister interface {
	ListsStaged() bool
	ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error)
}

// StagedListerOf returns s's StagedLister when s can list its staged
// uploads.
func StagedListerOf(s Store) (StagedLister, bool) {
	l, ok := s.(StagedLister)
	if !ok || !l.ListsStaged() {
		return nil, false
	}
	return l, true
}

// stagedListerOf is the forwarding decorators' lookup.
func stagedListerOf(inner Store, prefix string) (StagedLister, error) {
	l, ok := StagedListerOf(inner)
	if !ok {
		return nil, fmt.Errorf("list staged uploads %s: %w", prefix, ErrStagedListUnsupported)
	}
	return l, nil
}

// ListsStaged reports true: staged parts are files.
func (s *FS) ListsStaged() bool { return true }

// ListStaged walks the directories under prefix for staged parts
// ("_<name>.<uploadID>-<n>.inprogress") and returns one entry per upload,
// sorted by key and upload id. prefix is a key prefix, as for List.
func (s *FS) ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list staged uploads %s: %w", prefix, err)
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var out []StagedUpload
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		if d.IsDir() || !isStaged(d.Name()) {
			return nil
		}
		name, uploadID, ok := parseStagedName(d.Name())
		if !ok {
			return nil
		}
		rel, err := filepath.Rel(s.root, filepath.Join(filepath.Dir(p), name))
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			out = append(out, StagedUpload{Key: key, UploadID: uploadID})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list staged uploads %s: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b StagedUpload) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.UploadID, b.UploadID)
	})
	return slices.Compact(out), nil
}

// parseStagedName splits a staged part's file name,
// "_<name>.<uploadID>-<n>.inprogress", into the object's name and the
// upload id.
func parseStagedName(file string) (name, uploadID string, ok bool) {
	rest := strings.TrimSuffix(strings.TrimPrefix(file, "_"), stagedSuffix)
	dash := strings.LastIndexByte(rest, '-')
	if dash < 0 {
		return "", "", false
	}
	if n, err := strconv.Atoi(rest[dash+1:]); err != nil || n < 1 {
		return "", "", false
	}
	dot := strings.LastIndexByte(rest[:dash], '.')
	if dot <= 0 {
		return "", "", false
	}
	name, uploadID = rest[:dot], rest[dot+1:dash]
	if checkUploadID(uploadID) != nil || checkKey(name) != nil || strings.Contains(name, "/") {
		return "", "", false
	}
	return name, uploadID, true
}
