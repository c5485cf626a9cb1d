package dispatch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/task"
	"github.com/sluicehq/sluice/wire"
)

// failingReads fails every read of the source with err.
type failingReads struct {
	objstore.Store
	err error
}

func (s failingReads) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, fmt.Errorf("get %s: %w", key, s.err)
}

// A map task that fails on the data (data loss) is not launched again on
// the other executor: the batch fails at once with the sentinel and the
// scheduler, as in one process, stops the query. One that fails on the
// executor's own condition (its lease) is launched again, on the other
// executor, and the scheduler retries the batch.
func TestMapTaskFailingOnTheDataIsNotRelaunched(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sentinel error
		// launches of the one map task over the whole run
		launches uint64
	}{
		{"data loss", source.ErrDataLoss, 1},
		// MapAttempts (3) launches per batch attempt, three batch attempts
		// (scheduler MaxAttempts; no PlanRetryFor).
		{"lease expired", wire.ErrLeaseExpired, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 0, "")
			for range 2 {
				c.addNode(func(o *executor.NodeOptions) {
					o.Task.WrapStore = func(role string, st objstore.Store) objstore.Store {
						if role == task.RoleSource {
							return failingReads{Store: st, err: tc.sentinel}
						}
						return st
					}
				})
			}
			c.waitLive(2)
			dir := t.TempDir()
			in := filepath.Join(dir, "in")
			if err := tiletest.WriteFiles(in, tiletest.Events(3, 100, 0, 0, 1), 100); err != nil {
				t.Fatal(err)
			}
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			r, err := c.tryRunOn(spec, nil)
			var re *wire.RemoteError
			if !errors.Is(err, tc.sentinel) || !errors.As(err, &re) {
				t.Fatalf("the run ended with %v, want %v from an executor", err, tc.sentinel)
			}
			if got := r.attempts.Load(); got != tc.launches {
				t.Fatalf("the map task was launched %d times, want %d (%v)", got, tc.launches, err)
			}
		})
	}
}
