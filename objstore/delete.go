package objstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DeleteAll deletes keys with up to parallel deletes in flight (a cleanup
// of many small objects is dominated by round trips) and returns how many
// it deleted; a key already absent counts as deleted. It stops at the
// first error (or when ctx ends), returning it with the count so far.
func DeleteAll(ctx context.Context, s Store, keys []string, parallel int) (int, error) {
	parallel = max(1, min(parallel, len(keys)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		deleted  atomic.Int64
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) || ctx.Err() != nil {
					return
				}
				if err := s.Delete(ctx, keys[i]); err != nil && !errors.Is(err, ErrNotExist) {
					once.Do(func() { firstErr = fmt.Errorf("delete %s: %w", keys[i], err); cancel() })
					return
				}
				deleted.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return int(deleted.Load()), firstErr
}
