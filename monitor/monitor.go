package monitor

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
)

// State is a query's observed state.
type State string

// Observed states. A query moves PENDING → STARTING → RUNNING ⇄ RECOVERING
// → STOPPING → STOPPED | FINISHED | FAILED. RECOVERING is a batch failing
// for a retryable reason (it is retried); FAILED is final until the query
// is submitted again.
const (
	Pending    State = "PENDING"
	Starting   State = "STARTING"
	Running    State = "RUNNING"
	Recovering State = "RECOVERING"
	Stopping   State = "STOPPING"
	Stopped    State = "STOPPED"
	Finished   State = "FINISHED"
	Failed     State = "FAILED"
)

// States lists every observed state, in lifecycle order (for one 0/1 gauge
// per state).
var States = []State{Pending, Starting, Running, Recovering, Stopping, Stopped, Finished, Failed}

// Terminal reports whether s is an end state.
func (s State) Terminal() bool { return s == Stopped || s == Finished || s == Failed }

// Desired is the state an operator asked for, kept in the registry.
type Desired string

// Desired states.
const (
	DesiredRunning Desired = "running"
	DesiredStopped Desired = "stopped"
)

// Ref names a query: its name and its stable id (Spark's query id).
type Ref struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// View is a snapshot of one query.
type View struct {
	Ref
	Desired     Desired   `json:"desired"`
	Generation  int64     `json:"generation"`
	State       State     `json:"state"`
	StateSince  time.Time `json:"stateSince"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Restarts counts the times the query went from RECOVERING or a
	// terminal state back to STARTING within this driver process.
	Restarts int `json:"restarts"`
	// Latest is the last committed batch's progress (nil before the first).
	Latest *progress.Report `json:"latest,omitempty"`
	// Trigger is the processingTime trigger interval (0: back to back or
	// not a processingTime trigger).
	Trigger time.Duration `json:"triggerNs,omitempty"`
	// InFlight is the batch planned (offsets logged) but not yet committed
	// since InFlightSince (zero when none is).
	InFlight      ids.BatchID `json:"inFlightBatch,omitempty"`
	InFlightSince time.Time   `json:"inFlightSince,omitzero"`
	// Health is the query's single verdict at the time Get or List was
	// called (ClassifyHealth); nil on views kept elsewhere.
	Health *HealthStatus `json:"health,omitempty"`
	// Rates are the input and processing rates over the last minute
	// (RecentRates) at the time Get or List was called; nil on views kept
	// elsewhere.
	Rates *Rates `json:"recentRates,omitempty"`
}

// Options configure a Tracker.
type Options struct {
	// Keep is how many progress objects are kept per query (default 200).
	Keep int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Health tunes the health verdict of Get and List.
	Health HealthOptions
	// RateWindow is the window of the views' Rates (default
	// DefaultRateWindow, a minute).
	RateWindow time.Duration
}

// Tracker holds every query's view and recent progress. It is safe for
// concurrent use.
type Tracker struct {
	mu      sync.Mutex
	keep    int
	now     func() time.Time
	health  HealthOptions
	rateWin time.Duration
	queries map[string]*entry
	// changed is closed, and replaced, when a query's desired or observed
	// state changes (see Changed).
	changed chan struct{}

	executors      int
	executorsKnown bool
	stores         map[string][]*objstore.Counting

	// lmu guards the listeners; Observe calls them outside mu.
	lmu          sync.Mutex
	listeners    map[int]func(*progress.Report)
	nextListener int
}

type entry struct {
	view   View
	recent []*progress.Report // ring, oldest first after ordering
	subs   map[chan *progress.Report]struct{}
}

// New returns an empty tracker.
func New(opts Options) *Tracker {
	if opts.Keep <= 0 {
		opts.Keep = 200
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tracker{keep: opts.Keep, now: opts.Now, health: opts.Health, rateWin: opts.RateWindow, queries: map[string]*entry{}}
}

func (t *Tracker) get(r Ref) *entry {
	e, ok := t.queries[r.Name]
	if !ok {
		e = &entry{view: View{Ref: r, State: Pending, StateSince: t.now()}, subs: map[chan *progress.Report]struct{}{}}
		t.queries[r.Name] = e
	}
	if r.ID != "" {
		e.view.ID = r.ID
	}
	return e
}

// Changed returns a channel closed at the next change of a query's
// desired or observed state (SetDesired, SetState, Remove): a waiter for a
// state takes the channel, checks List, and waits on it.
func (t *Tracker) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// signal wakes the waiters of Changed; t.mu is held.
func (t *Tracker) signal() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// SetDesired records the registry's desired state and generation.
func (t *Tracker) SetDesired(r Ref, d Desired, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(r)
	e.view.Desired, e.view.Generation = d, generation
	t.signal()
}

// SetState records an observed state; a non-nil err becomes the last error
// (it is kept when a later call passes nil).
func (t *Tracker) SetState(r Ref, s State, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(r)
	now := t.now()
	if s == Starting && (e.view.State == Recovering || e.view.State.Terminal()) && e.view.Latest != nil {
		e.view.Restarts++
	}
	if s == Starting || s.Terminal() {
		e.view.InFlight, e.view.InFlightSince = 0, time.Time{}
	}
	if e.view.State != s {
		e.view.State, e.view.StateSince = s, now
	}
	if err != nil {
		e.view.LastError, e.view.LastErrorAt = err.Error(), now
	}
	t.signal()
}

// Observe records a committed batch's progress and passes it to followers.
func (t *Tracker) Observe(p *progress.Report) {
	t.observe(p)
	t.notify(p)
}

func (t *Tracker) observe(p *progress.Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(Ref{Name: p.Name, ID: p.ID})
	e.view.Latest = p
	if e.view.InFlight <= p.BatchID {
		e.view.InFlight, e.view.InFlightSince = 0, time.Time{}
	}
	e.recent = append(e.recent, p)
	if len(e.recent) > t.keep {
		e.recent = append(e.recent[:0:0], e.recent[len(e.recent)-t.keep:]...)
	}
	for ch := range e.subs {
		select {
		case ch <- p:
		default: // a slow follower misses objects rather than blocking the query
		}
	}
}

// Remove forgets a query (its followers' channels are closed).
func (t *Tracker) Remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.queries[name]; ok {
		for ch := range e.subs {
			close(ch)
		}
		delete(t.queries, name)
		t.signal()
	}
}

// Get returns one query's view.
func (t *Tracker) Get(name string) (View, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.queries[name]
	if !ok {
		return View{}, false
	}
	return t.withHealth(e), true
}

// withHealth is e's view with its health judged, and its recent rates
// taken, now (t.mu held).
func (t *Tracker) withHealth(e *entry) View {
	v := e.view
	now := t.now()
	h := ClassifyHealth(v, e.recent, now, t.health)
	v.Health = &h
	r := RecentRates(e.recent, now, t.rateWin)
	v.Rates = &r
	return v
}

// SetTrigger records the query's processingTime trigger interval (0 for
// none), which the health verdict compares batch durations with.
func (t *Tracker) SetTrigger(r Ref, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(r).view.Trigger = d
}

// BatchStarted records that batch was planned (its offsets logged) and
// runs until Observe sees it (or a later batch) commit.
func (t *Tracker) BatchStarted(r Ref, batch ids.BatchID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(r)
	if e.view.InFlightSince.IsZero() || e.view.InFlight != batch {
		e.view.InFlight, e.view.InFlightSince = batch, t.now()
	}
}

// List returns every query's view, sorted by name.
func (t *Tracker) List() []View {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]View, 0, len(t.queries))
	for _, e := range t.queries {
		out = append(out, t.withHealth(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Progress returns up to n of a query's most recent progress objects,
// oldest first (n <= 0: all that are kept).
func (t *Tracker) Progress(name string, n int) []*progress.Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.queries[name]
	if !ok {
		return nil
	}
	r := e.recent
	if n > 0 && len(r) > n {
		r = r[len(r)-n:]
	}
	return append([]*progress.Report(nil), r...)
}

// Follow returns a channel that receives the query's progress objects as
// batches commit, and a function that stops following. The channel is
// buffered; a follower that falls behind misses objects.
func (t *Tracker) Follow(r Ref) (<-chan *progress.Report, func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(r)
	ch := make(chan *progress.Report, 64)
	e.subs[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if cur, ok := t.queries[r.Name]; ok {
				if _, ok := cur.subs[ch]; ok {
					delete(cur.subs, ch)
					close(ch)
				}
			}
		})
	}
}

// Observer returns the Observer that records one query's loop in t: a
// batch in flight, a retry (the query is RECOVERING, with the failure),
// each committed batch's report (and RUNNING once a batch commits after
// a start or a retry). It is
// the one adapter from the batch loop to the tracker, for driver run,
// driver serve and the demo alike.
func (t *Tracker) Observer(r Ref) progress.Observer { return queryObserver{t: t, r: r} }

type queryObserver struct {
	t *Tracker
	r Ref
}

func (o queryObserver) BatchStarted(batch ids.BatchID) { o.t.BatchStarted(o.r, batch) }

func (o queryObserver) Retrying(batch ids.BatchID, attempt int, err error) {
	o.t.SetState(o.r, Recovering, fmt.Errorf("batch %d attempt %d: %w", batch, attempt, err))
}

func (queryObserver) Idle(progress.Idle) {}

func (o queryObserver) Committed(p *progress.Report) {
	o.t.Observe(p)
	if v, ok := o.t.Get(p.Name); ok && (v.State == Recovering || v.State == Starting) {
		o.t.SetState(Ref{Name: p.Name, ID: p.ID}, Running, nil)
	}
}
