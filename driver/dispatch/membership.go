package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ids"
)

// Member is a registered executor.
type Member struct {
	ID ids.ExecutorID
	// Address serves ExecutorService and ShuffleService.
	Address string
	Name    string
	Slots   int
}

// Membership is the driver's list of executors: who registered, who is
// still heartbeating, who is draining, and which batches use whom. It is
// safe for concurrent use.
type Membership struct {
	timeout time.Duration
	logger  *slog.Logger
	// OnRemove, if set, is called (without locks held) after a member is
	// removed.
	onRemove func(Member)

	mu      sync.Mutex
	seq     int
	members map[ids.ExecutorID]*member
	changed chan struct{}
}

type member struct {
	Member
	lastSeen time.Time
	draining bool
	holds    int
	gone     chan struct{}
	idle     chan struct{} // closed when holds drop to zero; nil when none waits
}

// NewMembership returns an empty membership that forgets executors silent
// for longer than timeout (see Expire).
func NewMembership(timeout time.Duration, logger *slog.Logger, onRemove func(Member)) *Membership {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Membership{timeout: timeout, logger: logger, onRemove: onRemove, members: map[ids.ExecutorID]*member{}, changed: make(chan struct{})}
}

func (ms *Membership) notify() {
	close(ms.changed)
	ms.changed = make(chan struct{})
}

// Register adds an executor seen at now and returns its id. An executor
// registered before at the same address is replaced (it restarted or lost
// its registration).
func (ms *Membership) Register(now time.Time, address, name string, slots int) Member {
	ms.mu.Lock()
	var replaced []Member
	for _, m := range ms.members {
		if m.Address == address {
			replaced = append(replaced, ms.removeLocked(m.ID))
		}
	}
	ms.seq++
	m := &member{Member: Member{ID: ids.ExecutorID(fmt.Sprintf("exec-%d", ms.seq)), Address: address, Name: name, Slots: slots}, lastSeen: now, gone: make(chan struct{})}
	ms.members[m.ID] = m
	ms.notify()
	ms.mu.Unlock()
	for _, r := range replaced {
		ms.logger.Info("executor replaced by a new registration at its address", "executor", r.ID, "address", r.Address)
		ms.removed(r)
	}
	ms.logger.Info("executor registered", "executor", m.ID, "address", address, "name", name, "slots", slots)
	return m.Member
}

// Heartbeat records that id, at address, is alive at now; false means id
// is unknown, or was given to an executor at another address (a restarted
// driver numbers executors afresh, so an executor registered with the old
// one may send an id the new one gave another): it must register again.
// An empty address (an executor that does not send it) matches any.
func (ms *Membership) Heartbeat(now time.Time, id ids.ExecutorID, address string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	m := ms.members[id]
	if m == nil || (address != "" && m.Address != address) {
		return false
	}
	m.lastSeen = now
	return true
}

// Expire removes the executors not heard from since now-timeout and
// returns them.
func (ms *Membership) Expire(now time.Time) []Member {
	ms.mu.Lock()
	var out []Member
	for id, m := range ms.members {
		if now.Sub(m.lastSeen) > ms.timeout {
			out = append(out, ms.removeLocked(id))
		}
	}
	ms.mu.Unlock()
	for _, m := range out {
		ms.logger.Warn("executor lost: no heartbeat", "executor", m.ID, "address", m.Address, "timeout", ms.timeout)
		ms.removed(m)
	}
	return out
}

// Remove drops id from the membership (it failed a call, or drained);
// unknown ids are ignored.
func (ms *Membership) Remove(id ids.ExecutorID, reason string) {
	ms.mu.Lock()
	if ms.members[id] == nil {
		ms.mu.Unlock()
		return
	}
	m := ms.removeLocked(id)
	ms.mu.Unlock()
	ms.logger.Warn("executor removed", "executor", id, "address", m.Address, "reason", reason)
	ms.removed(m)
}

// leave removes a drained executor.
func (ms *Membership) leave(id ids.ExecutorID) {
	ms.mu.Lock()
	if ms.members[id] == nil {
		ms.mu.Unlock()
		return
	}
	m := ms.removeLocked(id)
	ms.mu.Unlock()
	ms.logger.Info("executor drained and left", "executor", id, "address", m.Address)
	ms.removed(m)
}

func (ms *Membership) removeLocked(id ids.ExecutorID) Member {
	m := ms.members[id]
	delete(ms.members, id)
	close(m.gone)
	if m.idle != nil {
		close(m.idle)
		m.idle = nil
	}
	ms.notify()
	return m.Member
}

func (ms *Membership) removed(m Member) {
	if ms.onRemove != nil {
		ms.onRemove(m)
	}
}

// Gone returns a channel closed when id leaves the membership (closed
// already for unknown ids).
func (ms *Membership) Gone(id ids.ExecutorID) <-chan struct{} {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.members[id]; m != nil {
		return m.gone
	}
	c := make(chan struct{})
	close(c)
	return c
}

// IsMember reports whether id is registered (draining or not).
func (ms *Membership) IsMember(id ids.ExecutorID) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.members[id] != nil
}

// Live returns the members that take new batches (registered and not
// draining), by id.
func (ms *Membership) Live() []Member {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.liveLocked()
}

func (ms *Membership) liveLocked() []Member {
	var out []Member
	for _, m := range ms.members {
		if !m.draining {
			out = append(out, m.Member)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// BatchHold is a batch's hold on the executors it uses: a draining executor
// waits until no batch holds it.
type BatchHold struct {
	ms      *Membership
	Members []Member
	once    sync.Once
}

// AcquireLive returns the live members, held until Release.
func (ms *Membership) AcquireLive() *BatchHold {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	l := &BatchHold{ms: ms, Members: ms.liveLocked()}
	for _, m := range l.Members {
		ms.members[m.ID].holds++
	}
	return l
}

// Release ends the hold. It is idempotent.
func (l *BatchHold) Release() {
	l.once.Do(func() {
		ms := l.ms
		ms.mu.Lock()
		defer ms.mu.Unlock()
		for _, lm := range l.Members {
			m := ms.members[lm.ID]
			if m == nil {
				continue
			}
			m.holds--
			if m.holds == 0 && m.idle != nil {
				close(m.idle)
				m.idle = nil
			}
		}
	})
}

// Drain stops giving id new batches, waits until no running batch uses it
// (or ctx ends), then removes it.
func (ms *Membership) Drain(ctx context.Context, id ids.ExecutorID) error {
	ms.mu.Lock()
	m := ms.members[id]
	if m == nil {
		ms.mu.Unlock()
		return nil
	}
	if !m.draining {
		m.draining = true
		ms.notify()
		ms.logger.Info("executor draining: no new batches", "executor", id, "batchesUsingIt", m.holds)
	}
	var wait chan struct{}
	if m.holds > 0 {
		if m.idle == nil {
			m.idle = make(chan struct{})
		}
		wait = m.idle
	}
	ms.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("drain executor %s: %w", id, ctx.Err())
		}
	}
	ms.leave(id)
	return nil
}

// WaitForLive waits until at least n members take batches.
func (ms *Membership) WaitForLive(ctx context.Context, n int) ([]Member, error) {
	for {
		ms.mu.Lock()
		live := ms.liveLocked()
		ch := ms.changed
		ms.mu.Unlock()
		if len(live) >= n && len(live) > 0 {
			return live, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}
