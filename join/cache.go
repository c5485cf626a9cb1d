package join

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// cacheSize is how many indexed snapshots a Cache keeps: the current one
// and the one before a refresh, so a batch re-run across a refresh does
// not reload.
const cacheSize = 2

// Cache loads a query's snapshots by hash from its checkpoint and keeps
// the newest few indexed: the executors' side of the join. It never reads
// join.path. Safe for concurrent use.
type Cache struct {
	spec       *query.Spec
	checkpoint objstore.Store
	mu         sync.Mutex
	tables     []*Table // most recently used last
	// loads counts snapshot reads from the checkpoint (for tests and
	// metrics).
	loads int
}

// NewCache returns a cache for spec (validated) over its checkpoint.
func NewCache(spec *query.Spec, checkpoint objstore.Store) *Cache {
	return &Cache{spec: spec, checkpoint: checkpoint}
}

// Table returns the indexed snapshot ref names, loading it from the
// checkpoint the first time.
func (c *Cache) Table(ctx context.Context, ref Ref) (*Table, error) {
	if ref.IsZero() {
		return nil, fmt.Errorf("join: the batch names no manifest snapshot")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.tables {
		if t.ref.Hash == ref.Hash {
			c.tables = append(append(c.tables[:i:i], c.tables[i+1:]...), t)
			return t, nil
		}
	}
	key := ObjectKey(ref.Hash)
	data, err := c.checkpoint.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("load manifest snapshot %s (%s): %w", ref.ID, key, err)
	}
	c.loads++
	snap, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if snap.Ref != ref {
		return nil, fmt.Errorf("load manifest snapshot %s: it is %s/%s: %w", key, snap.Ref.ID, snap.Ref.Hash, ErrCorruptSnapshot)
	}
	t, err := NewTable(c.spec, snap)
	if err != nil {
		return nil, err
	}
	c.tables = append(c.tables, t)
	if len(c.tables) > cacheSize {
		c.tables = c.tables[len(c.tables)-cacheSize:]
	}
	return t, nil
}

// Loads returns how many snapshots the cache has read from the checkpoint.
func (c *Cache) Loads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}
