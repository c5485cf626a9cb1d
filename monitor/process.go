package monitor

import (
	"sort"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
)

// Listen calls fn with every progress object Observe records, after it is
// recorded, in the order Observe is called, none missed (unlike Follow, it
// is for in-process consumers that keep up: counters, histograms). fn must
// not block or call back into the Tracker. The returned function stops it.
func (t *Tracker) Listen(fn func(*progress.Report)) (stop func()) {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	if t.listeners == nil {
		t.listeners = map[int]func(*progress.Report){}
	}
	t.nextListener++
	id := t.nextListener
	t.listeners[id] = fn
	return func() {
		t.lmu.Lock()
		defer t.lmu.Unlock()
		delete(t.listeners, id)
	}
}

// notify passes p to the listeners (called by Observe, outside t.mu).
func (t *Tracker) notify(p *progress.Report) {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	ids := make([]int, 0, len(t.listeners))
	for id := range t.listeners {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		t.listeners[id](p)
	}
}

// SetExecutors records how many executors are registered with this
// driver (for the status page and sluice_executors_registered).
func (t *Tracker) SetExecutors(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.executors, t.executorsKnown = n, true
}

// Executors returns the registered executors and whether anyone said.
func (t *Tracker) Executors() (n int, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.executors, t.executorsKnown
}

// CountStore keeps c so that its request counts are reported under role
// (checkpoint, sink, source, badRecords, registry, ...). Counts of every
// store given for a role are summed; a store is never forgotten, so the
// sums only grow.
func (t *Tracker) CountStore(role string, c *objstore.Counting) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stores == nil {
		t.stores = map[string][]*objstore.Counting{}
	}
	t.stores[role] = append(t.stores[role], c)
}

// StoreStats returns the summed counts per role and operation.
func (t *Tracker) StoreStats() map[string]map[string]objstore.OpStats {
	t.mu.Lock()
	stores := make(map[string][]*objstore.Counting, len(t.stores))
	for k, v := range t.stores {
		stores[k] = append([]*objstore.Counting(nil), v...)
	}
	t.mu.Unlock()
	out := make(map[string]map[string]objstore.OpStats, len(stores))
	for role, cs := range stores {
		sum := map[string]objstore.OpStats{}
		for _, c := range cs {
			for op, s := range c.Stats() {
				a := sum[op]
				a.Requests += s.Requests
				a.Bytes += s.Bytes
				a.Errors += s.Errors
				a.Answers += s.Answers
				a.Objects += s.Objects
				sum[op] = a
			}
		}
		out[role] = sum
	}
	return out
}
