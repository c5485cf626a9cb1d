package microbatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// fakeClock never waits: Sleep moves its time on and records the wait.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return true
}

// failing fails its first n writes, then collects.
type failing struct {
	n      int
	writes int
}

func (f *failing) WriteBatch(context.Context, ids.BatchID, []row.Row) error {
	if f.n > 0 {
		f.n--
		return errors.New("sink unreachable")
	}
	f.writes++
	return nil
}

// The loop waits only on the injected clock: a batch that fails twice is
// retried after 1s, then 2s, of the clock's time and none of the wall's,
// and its progress is stamped with the clock.
func TestRetriesWaitOnTheInjectedClock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)}
	out := &failing{n: 2}
	var reports []*progress.Report
	began := time.Now()
	runQueryWith(t, lines, 100, func(s *query.Spec) { s.Trigger = query.Trigger{Once: true} }, func(c *microbatch.Config) {
		c.Clock, c.Writer, c.RetryBackoff = clock, out, time.Second
		c.Observer = progress.Committed(func(p *progress.Report) { reports = append(reports, p) })
	})
	if el := time.Since(began); el > 900*time.Millisecond {
		t.Fatalf("run took %v of wall time: it slept for real", el)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(clock.sleeps, want) {
		t.Fatalf("waits %v, want %v", clock.sleeps, want)
	}
	if len(reports) != 1 || reports[0].Attempts != 3 || out.writes != 1 {
		t.Fatalf("progress %d reports (attempts %v), %d successful writes; want one batch written after 3 attempts", len(reports), attemptsOf(reports), out.writes)
	}
	if got, want := reports[0].Timestamp, "2030-05-01T12:00:00Z"; got != want {
		t.Fatalf("batch timestamp %s, want the clock's %s", got, want)
	}
}

func attemptsOf(ps []*progress.Report) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprint(p.Attempts, " ")
	}
	return s
}
