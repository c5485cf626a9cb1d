package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/objstore"
)

// LockKey is the lease one CompactDates run holds on a sink path, so that
// two compactions (driver compact and the compactClosedDates policy, or
// two operators) never work on one sink at once: two runs finishing one
// interrupted directory exchange would swap it back.
const LockKey = LogDir + "compact-lock"

// DefaultLockTTL is how old a lease must be before another run takes it
// over (its holder died without releasing it).
const DefaultLockTTL = time.Hour

// ErrCompactionRunning is returned (wrapped) by CompactDates when another
// run holds the lease.
var ErrCompactionRunning = errors.New("another compaction of this sink is running")

type compactLease struct {
	Owner string `json:"owner"`
	Since string `json:"since"`
}

// acquireLease takes the lease, or takes over one older than ttl. It
// returns the function that releases it.
func acquireLease(ctx context.Context, store objstore.Store, now time.Time, ttl time.Duration) (func(), error) {
	host, _ := os.Hostname()
	mine := compactLease{Owner: fmt.Sprintf("%s:%d:%s", host, os.Getpid(), newAttemptID()), Since: now.UTC().Format(time.RFC3339Nano)}
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	err = store.PutIfAbsent(ctx, LockKey, data)
	if errors.Is(err, objstore.ErrExists) {
		held, rerr := readLease(ctx, store)
		if rerr != nil {
			return nil, rerr
		}
		since, perr := time.Parse(time.RFC3339Nano, held.Since)
		if perr == nil && now.Sub(since) < ttl {
			return nil, fmt.Errorf("%w: %s holds %s since %s (if that run is gone, delete %s or wait until %s)",
				ErrCompactionRunning, held.Owner, LockKey, held.Since, LockKey, since.Add(ttl).UTC().Format(time.RFC3339))
		}
		// Stale: take it over; of two runs doing so, the last Put wins and
		// the other sees it.
		if err = store.Put(ctx, LockKey, data); err == nil {
			if held, err = readLease(ctx, store); err == nil && held.Owner != mine.Owner {
				return nil, fmt.Errorf("%w: %s took over %s", ErrCompactionRunning, held.Owner, LockKey)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("take %s: %w", LockKey, err)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if held, err := readLease(ctx, store); err == nil && held.Owner == mine.Owner {
			_ = store.Delete(ctx, LockKey)
		}
	}, nil
}

func readLease(ctx context.Context, store objstore.Store) (compactLease, error) {
	var l compactLease
	b, err := store.Get(ctx, LockKey)
	if err != nil {
		return l, fmt.Errorf("read %s: %w", LockKey, err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("read %s: %w", LockKey, err)
	}
	return l, nil
}
