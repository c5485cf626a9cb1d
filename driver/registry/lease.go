package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/objstore"
)

// The driver lease. Every renewal is a new object lease/<seq>.json created
// with PutIfAbsent, holding the holder's id; the latest object (highest
// seq) says who holds the lease. The holder renews every Renew by creating
// seq+1. A standby that sees the same latest object for a whole TTL, by its
// own clock from when it first saw it, creates seq+1 naming itself; of a
// late renewal and a takeover only one can create seq+1. A holder that
// releases creates seq+1 marked released, and a standby takes over at once.
//
// Why create-if-absent and not compare-and-swap on one object: the store
// contract already guarantees one winner per key on every backend (the
// checkpoint's fencing relies on it), whereas a CAS would need a new
// primitive on the filesystem backend too. Comparing against when the
// standby first saw an object, not against a time written by the holder,
// makes the lease independent of clock offsets between nodes (only clock
// rates matter): the holder counts its TTL from before it sent the renewal,
// the standby from after it saw it, so the holder always believes it holds
// the lease for less time than the standby waits.

// LeaseRecord is one lease object.
type LeaseRecord struct {
	Seq      int64     `json:"seq"`
	Holder   string    `json:"holder"`
	Released bool      `json:"released,omitempty"`
	At       time.Time `json:"at"` // the writer's clock, for display only
}

// LeaseConfig is a lease participant's settings.
type LeaseConfig struct {
	// Holder names this participant uniquely (host, pid, random suffix).
	Holder string
	// TTL is how long a lease lasts without renewal (default 10s).
	TTL time.Duration
	// Renew is how often the holder renews and a standby polls (default
	// TTL/3).
	Renew time.Duration
}

func (c *LeaseConfig) defaults() {
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.Renew <= 0 {
		c.Renew = c.TTL / 3
	}
}

// LeaseState is what a participant remembers between steps.
type LeaseState struct {
	// Latest is the latest lease object seen (Seq 0: none yet).
	Latest LeaseRecord
	// SeenAt is when Latest was first seen, by this participant's clock.
	SeenAt time.Time
	// HeldUntil is when this participant's hold ends unless renewed (zero:
	// not held). It counts from the send time of its last write.
	HeldUntil time.Time
	// WroteAt is the send time of this participant's last successful write.
	WroteAt time.Time
}

// Holds reports whether the participant holds the lease at now.
func (s LeaseState) Holds(now time.Time) bool {
	return !s.HeldUntil.IsZero() && now.Before(s.HeldUntil)
}

// LeaseAction is what the runner does after a step.
type LeaseAction struct {
	// Write, if non-zero, is the seq to create naming this participant
	// (an acquisition or a renewal).
	Write int64
	// Lost is set when this participant held the lease and no longer does.
	Lost bool
}

// LeaseStep is the lease's pure decision: given the remembered state, the
// latest object read from the store (Seq 0 if none) and the time, it
// returns the new state and what to do.
func LeaseStep(cfg LeaseConfig, st LeaseState, latest LeaseRecord, now time.Time) (LeaseState, LeaseAction) {
	cfg.defaults()
	var act LeaseAction
	if latest.Seq != st.Latest.Seq || st.SeenAt.IsZero() {
		st.Latest, st.SeenAt = latest, now
	}
	mine := latest.Seq > 0 && latest.Holder == cfg.Holder && !latest.Released
	if mine && !st.HeldUntil.IsZero() {
		if !now.Before(st.HeldUntil) {
			// The renewal came too late: a standby may already act.
			// Give up; acquiring again starts a new term.
			st.HeldUntil = time.Time{}
			act.Lost = true
			return st, act
		}
		if now.Sub(st.WroteAt) >= cfg.Renew {
			act.Write = latest.Seq + 1
		}
		return st, act
	}
	if !st.HeldUntil.IsZero() {
		st.HeldUntil = time.Time{}
		act.Lost = true
		return st, act
	}
	if latest.Seq == 0 || latest.Released || now.Sub(st.SeenAt) >= cfg.TTL || latest.Holder == cfg.Holder {
		act.Write = latest.Seq + 1
	}
	return st, act
}

// LeaseWrote updates the state after this participant created seq, sent
// at sentAt.
func LeaseWrote(cfg LeaseConfig, st LeaseState, seq int64, sentAt time.Time) LeaseState {
	cfg.defaults()
	st.Latest = LeaseRecord{Seq: seq, Holder: cfg.Holder, At: sentAt}
	st.SeenAt, st.WroteAt, st.HeldUntil = sentAt, sentAt, sentAt.Add(cfg.TTL)
	return st
}

// Lease runs the lease protocol against a store. Tick does one step; Run
// ticks every Renew until ctx ends. It is used from one goroutine.
type Lease struct {
	cfg   LeaseConfig
	store objstore.Store
	now   func() time.Time
	log   *slog.Logger
	st    LeaseState
}

// NewLease returns a participant on store (now nil: time.Now).
func NewLease(store objstore.Store, cfg LeaseConfig, now func() time.Time, log *slog.Logger) *Lease {
	cfg.defaults()
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lease{cfg: cfg, store: store, now: now, log: log}
}

// Config returns the participant's settings (defaults applied).
func (l *Lease) Config() LeaseConfig { return l.cfg }

// Holds reports whether this participant holds the lease now.
func (l *Lease) Holds() bool { return l.st.Holds(l.now()) }

// State returns the remembered state.
func (l *Lease) State() LeaseState { return l.st }

func leaseKey(seq int64) string { return fmt.Sprintf("lease/%0*d.json", genDigits, seq) }

func (l *Lease) seqs(ctx context.Context) ([]int64, error) {
	keys, err := l.store.List(ctx, "lease/")
	if err != nil {
		return nil, fmt.Errorf("lease: list: %w", err)
	}
	var out []int64
	for _, k := range keys {
		s, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(k, "lease/"), ".json"), 10, 64)
		if err == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Latest reads the latest lease object (Seq 0 if none).
func (l *Lease) Latest(ctx context.Context) (LeaseRecord, error) {
	for {
		seqs, err := l.seqs(ctx)
		if err != nil || len(seqs) == 0 {
			return LeaseRecord{}, err
		}
		b, err := l.store.Get(ctx, leaseKey(seqs[len(seqs)-1]))
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return LeaseRecord{}, fmt.Errorf("lease: read: %w", err)
		}
		var rec LeaseRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return LeaseRecord{}, fmt.Errorf("lease: decode %s: %w", leaseKey(seqs[len(seqs)-1]), err)
		}
		rec.Seq = seqs[len(seqs)-1]
		return rec, nil
	}
}

func (l *Lease) create(ctx context.Context, rec LeaseRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return l.store.PutIfAbsent(ctx, leaseKey(rec.Seq), b)
}

// Tick reads the lease, steps, and writes if the step says so. It returns
// whether this participant holds the lease afterwards and whether it lost
// it in this tick. Store errors are returned; the state stays consistent.
func (l *Lease) Tick(ctx context.Context) (held, lost bool, err error) {
	latest, err := l.Latest(ctx)
	if err != nil {
		if l.st.Holds(l.now()) {
			return true, false, err
		}
		lost = !l.st.HeldUntil.IsZero()
		l.st.HeldUntil = time.Time{}
		return false, lost, err
	}
	var act LeaseAction
	l.st, act = LeaseStep(l.cfg, l.st, latest, l.now())
	if act.Write > 0 {
		sent := l.now()
		err := l.create(ctx, LeaseRecord{Seq: act.Write, Holder: l.cfg.Holder, At: sent.UTC()})
		switch {
		case err == nil:
			if !l.st.Holds(sent) {
				l.log.Info("acquired the driver lease", "holder", l.cfg.Holder, "seq", act.Write)
			}
			l.st = LeaseWrote(l.cfg, l.st, act.Write, sent)
			l.prune(ctx, act.Write)
		case errors.Is(err, objstore.ErrExists):
			// Someone else wrote that seq first; the next tick sees it.
		default:
			return l.st.Holds(l.now()), act.Lost, fmt.Errorf("lease: write: %w", err)
		}
	}
	return l.st.Holds(l.now()), act.Lost, nil
}

// prune deletes lease objects older than the last few.
func (l *Lease) prune(ctx context.Context, seq int64) {
	if seq%8 != 0 {
		return
	}
	seqs, err := l.seqs(ctx)
	if err != nil {
		return
	}
	for _, s := range seqs {
		if s < seq-4 {
			_ = l.store.Delete(ctx, leaseKey(s))
		}
	}
}

// Release gives the lease up if held, so a standby takes over at once.
func (l *Lease) Release(ctx context.Context) error {
	if !l.st.Holds(l.now()) {
		return nil
	}
	seq := l.st.Latest.Seq + 1
	l.st.HeldUntil = time.Time{}
	err := l.create(ctx, LeaseRecord{Seq: seq, Holder: l.cfg.Holder, Released: true, At: l.now().UTC()})
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("lease: release: %w", err)
	}
	l.log.Info("released the driver lease", "holder", l.cfg.Holder, "seq", seq)
	return nil
}

// Run ticks until ctx ends, calling onChange(held) whenever holding
// changes. Store errors are logged; a holder that cannot renew within its
// TTL loses the lease.
func (l *Lease) Run(ctx context.Context, onChange func(held bool)) {
	was := false
	t := time.NewTicker(l.cfg.Renew)
	defer t.Stop()
	for {
		held, _, err := l.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			l.log.Warn("driver lease", "err", err)
		}
		if held != was {
			was = held
			onChange(held)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
