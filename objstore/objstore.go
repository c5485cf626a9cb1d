package objstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotExist is returned (wrapped) by Get and Delete when the key is absent.
var ErrNotExist = errors.New("object does not exist")

// ErrExists is returned (wrapped) by PutIfAbsent when the key already
// exists. Fencing depends on this: of any number of concurrent PutIfAbsent
// calls for one key, across processes and machines, exactly one returns nil
// and every other returns an error matching ErrExists.
var ErrExists = errors.New("object already exists")

// Store is a flat key space of immutable-once-written objects. Keys are
// slash-separated paths relative to the store's root ("offsets/12").
//
// Contract:
//   - Put replaces the whole object atomically: a reader sees the old bytes
//     or the new bytes, never a mix or a prefix.
//   - PutIfAbsent creates the object atomically only if no object has that
//     key; otherwise it returns ErrExists and changes nothing.
//   - Get returns the whole object or ErrNotExist.
//   - List returns every key with the prefix, in lexical order, after any
//     Put that returned before List was called.
//   - Delete removes the object; deleting an absent key returns ErrNotExist.
//
// Implementations are safe for concurrent use.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, data []byte) error
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	List(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// InfoLister is the optional capability of listing keys with their size
// and modification time (S3's LastModified, a file's mtime), found by type
// assertion. ListInfo returns the same keys as List, in the same order.
type InfoLister interface {
	ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error)
}
