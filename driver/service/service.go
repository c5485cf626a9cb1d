package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/policy"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// ErrLeaseLost is returned by Run when another driver took the lease: this
// one abandoned its batches in flight and must exit.
var ErrLeaseLost = errors.New("lost the driver lease to another driver")

// Options configure a Service.
type Options struct {
	Registry *registry.Registry
	Tracker  *monitor.Tracker
	// Lease is this driver's lease participant settings (Holder is set
	// from the host name and pid when empty).
	Lease registry.LeaseConfig
	// Cluster, if set, runs queries on its executors; nil runs them in
	// this process (tests, labs).
	Cluster      *dispatch.Driver
	MinExecutors int
	// Engine is the base of every query's engine options (store settings,
	// logger, fault hook, progress sink, source retry).
	Engine microbatch.Options
	Logger *slog.Logger
	// Poll is how often the registry and the lease are read (default 1s).
	Poll time.Duration
	// StopTimeout bounds a graceful stop and the shutdown: past it, the
	// batch in flight is abandoned (default 30s).
	StopTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Policy limits the locations a submitted spec may use (nil: any, as
	// in a lab).
	Policy *policy.Policy
}

// Service is the driver service.
type Service struct {
	opts  Options
	reg   *registry.Registry
	tr    *monitor.Tracker
	log   *slog.Logger
	lease *registry.Lease

	active atomic.Bool // holds the lease and has loaded the registry
	// settled is closed once Run's first lease attempt (and registry
	// load) is over: until then the driver is starting, not a standby.
	settled    chan struct{}
	settleOnce sync.Once
	// activated is closed when the driver first becomes active.
	activated chan struct{}
	kick      chan struct{}
	// submitMu serializes submits, so two cannot both pass the check
	// that no other query uses their checkpoint.
	submitMu sync.Mutex

	mu   sync.Mutex
	runs map[string]*run
	wg   sync.WaitGroup
	// base is the context runs derive from: not the serve context, so a
	// shutdown can let batches finish.
	base context.Context
}

// New returns a service; Run runs it.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tracker == nil {
		opts.Tracker = monitor.New(monitor.Options{})
	}
	if opts.Lease.Holder == "" {
		host, _ := os.Hostname()
		opts.Lease.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), registry.NewID()[:8])
	}
	if opts.Engine.Logger == nil {
		opts.Engine.Logger = opts.Logger
	}
	s := &Service{
		opts: opts, reg: opts.Registry, tr: opts.Tracker, log: opts.Logger,
		kick: make(chan struct{}, 1), runs: map[string]*run{}, base: context.Background(),
		settled: make(chan struct{}), activated: make(chan struct{}),
	}
	s.lease = registry.NewLease(opts.Registry.Store(), opts.Lease, opts.Now, opts.Logger)
	return s
}

// startWait bounds how long a call waits for a starting driver's first
// lease attempt (awaitActive).
const startWait = 10 * time.Second

// awaitActive returns nil when this driver is active. A driver still
// starting (its first lease attempt not over) is waited for, within ctx
// and startWait, so a call made right after serve starts is not refused
// as if another driver held the lease; then a driver that is not active
// is a standby (ErrStandby).
func (s *Service) awaitActive(ctx context.Context) error {
	if s.active.Load() {
		return nil
	}
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-s.settled:
	case <-ctx.Done():
	case <-t.C:
	}
	if !s.active.Load() {
		return ErrStandby
	}
	return nil
}

// Activated returns a channel closed when this driver first becomes
// active (it holds the lease and has loaded the registry).
func (s *Service) Activated() <-chan struct{} { return s.activated }

func (s *Service) settle() { s.settleOnce.Do(func() { close(s.settled) }) }

// Tracker returns the service's tracker.
func (s *Service) Tracker() *monitor.Tracker { return s.tr }

// Ready reports nil when this driver holds the lease and has loaded the
// registry (readiness), or why not.
func (s *Service) Ready() error {
	if !s.active.Load() {
		return errors.New("standby: another driver holds the lease, or the registry is not loaded yet")
	}
	return nil
}

// Holder returns this driver's lease holder name.
func (s *Service) Holder() string { return s.lease.Config().Holder }

// Run acquires the lease (waiting as a standby while another driver holds
// it), then reconciles the registry until ctx ends. On ctx's end it stops
// every query without changing its desired state (finishing the batch in
// flight within StopTimeout), releases the lease and returns nil. It
// returns ErrLeaseLost if another driver takes the lease.
func (s *Service) Run(ctx context.Context) error {
	// Tick at least twice per renewal period so a renewal is never late
	// by a whole poll.
	every := min(s.opts.Poll, s.lease.Config().Renew/2)
	t := time.NewTicker(every)
	defer t.Stop()
	standbyLogged, activatedOnce := false, false
	defer s.settle()
	for {
		held, lost, err := s.lease.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("driver lease", "err", err)
		}
		if lost {
			s.active.Store(false)
			s.abandonAll()
			return fmt.Errorf("%w (holder now %s)", ErrLeaseLost, s.lease.State().Latest.Holder)
		}
		if held {
			if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reconcile the registry", "err", err)
			} else if err == nil && !s.active.Load() {
				s.active.Store(true)
				if !activatedOnce {
					activatedOnce = true
					close(s.activated)
				}
				s.log.Info("active: holding the driver lease; registry loaded", "holder", s.Holder())
			}
		} else if !standbyLogged && ctx.Err() == nil {
			standbyLogged = true
			s.log.Info("standby: another driver holds the lease; waiting for it to lapse", "holder", s.lease.State().Latest.Holder)
		}
		s.settle()
		select {
		case <-ctx.Done():
			s.shutdown()
			return nil
		case <-t.C:
		case <-s.kick:
		}
	}
}

// Kick makes Run reconcile now.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// shutdown stops every run without touching the registry, then releases
// the lease.
func (s *Service) shutdown() {
	s.active.Store(false)
	s.mu.Lock()
	for _, r := range s.runs {
		r.stop(microbatch.Signal{Kind: microbatch.Shutdown}, false)
	}
	s.mu.Unlock()
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.lease.Release(ctx); err != nil {
		s.log.Warn("release the driver lease", "err", err)
	}
}

// abandonAll stops every run at once, writing nothing more: the lease is
// another driver's.
func (s *Service) abandonAll() {
	s.mu.Lock()
	for _, r := range s.runs {
		r.stop(microbatch.Signal{Kind: microbatch.LeaseLost}, false)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// reconcile reads the registry and makes the runs follow it.
func (s *Service) reconcile(ctx context.Context) error {
	recs, err := s.reg.List(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		ref := monitor.Ref{Name: rec.Name, ID: rec.ID}
		s.tr.SetDesired(ref, monitor.Desired(rec.Desired), rec.Generation)
		r := s.runs[rec.Name]
		switch rec.Desired {
		case registry.Running:
			switch {
			case r == nil || (r.ended() && r.gen < rec.Generation):
				s.start(rec)
			case !r.ended() && r.spec != rec.Spec && !r.stopping():
				s.log.Info("query changed: stopping the old version after its batch in flight", "query", rec.Name, "generation", rec.Generation)
				r.stop(microbatch.Signal{Kind: microbatch.Stop}, false)
			}
		case registry.Stopped:
			if r != nil && !r.ended() && !r.stopping() {
				sig := microbatch.Signal{Kind: microbatch.Stop}
				if rec.Change == ChangeStopNow {
					sig.Kind = microbatch.StopNow
				}
				r.stop(sig, true)
			}
			if r == nil {
				if v, ok := s.tr.Get(rec.Name); ok && v.State == monitor.Pending {
					s.tr.SetState(ref, monitor.Stopped, nil)
				}
			}
		}
	}
	return nil
}

// run is one query's run in this process. The service decides nothing
// about its batches: it sends signals, and the run's loop decides.
type run struct {
	name    string
	gen     int64
	spec    string
	done    chan struct{}
	signals chan microbatch.Signal

	mu       sync.Mutex
	stopReq  bool // a stop was sent
	userStop bool // ... by an operator (STOPPED), not a shutdown
}

func (r *run) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *run) stopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReq
}

// stop sends sig to the run's loop (user: an operator asked).
func (r *run) stop(sig microbatch.Signal, user bool) {
	r.mu.Lock()
	r.stopReq = true
	r.userStop = r.userStop || user
	r.mu.Unlock()
	select {
	case r.signals <- sig:
	case <-r.done:
	}
}

// start runs rec in a goroutine (s.mu held).
func (s *Service) start(rec registry.Record) {
	ctx, cancel := context.WithCancel(s.base)
	// The signals a run can be sent are few (stop, stop now, the lease
	// lost, a shutdown): the buffer takes them all, so a sender never
	// waits on a loop that has not started yet.
	r := &run{name: rec.Name, gen: rec.Generation, spec: rec.Spec, done: make(chan struct{}), signals: make(chan microbatch.Signal, 8)}
	s.runs[rec.Name] = r
	ref := monitor.Ref{Name: rec.Name, ID: rec.ID}
	s.tr.SetState(ref, monitor.Starting, nil)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(r.done)
		defer cancel()
		err := s.runQuery(ctx, r, rec, ref)
		r.mu.Lock()
		stopped, user := r.stopReq, r.userStop
		r.mu.Unlock()
		canceled := err == nil || errors.Is(err, context.Canceled) || errors.Is(err, microbatch.ErrLeaseLost)
		switch {
		case stopped && canceled:
			s.tr.SetState(ref, monitor.Stopped, nil)
			s.log.Info("query stopped", "query", rec.Name, "by_operator", user)
		case err != nil:
			s.tr.SetState(ref, monitor.Failed, err)
			s.log.Error("query failed", "query", rec.Name, "err", err)
		default:
			s.tr.SetState(ref, monitor.Finished, nil)
			s.log.Info("query finished", "query", rec.Name)
		}
	}()
}

// runQuery builds the query and runs it to its end.
func (s *Service) runQuery(ctx context.Context, r *run, rec registry.Record, ref monitor.Ref) error {
	spec, err := query.Parse([]byte(rec.Spec))
	if err != nil {
		return err
	}
	opts := s.opts.Engine
	opts.AllowFirstStart, opts.AllowReplay, opts.QueryID = rec.AllowFirstStart, rec.AllowReplay, rec.ID
	opts.Ticket, opts.ApprovedBy = rec.Ticket, rec.ApprovedBy
	opts.StopTimeout = s.opts.StopTimeout
	s.tr.SetTrigger(ref, time.Duration(spec.Trigger.ProcessingTime))
	opts.Observer = progress.Observers{s.tr.Observer(ref), opts.Observer}
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	if id := job.Query.QueryID(); id != rec.ID {
		s.log.Info("the checkpoint has its own query id (it was created before the registry entry)", "query", rec.Name, "registry_id", rec.ID, "checkpoint_id", id)
	}
	if !r.stopping() {
		s.tr.SetState(ref, monitor.Running, nil)
	}
	s.log.Info("query running", "query", rec.Name, "generation", rec.Generation, "id", job.Query.QueryID())
	if s.opts.Cluster == nil {
		return job.Run(ctx, r.signals)
	}
	runner, err := s.opts.Cluster.NewRunner(dispatch.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: opts.Logger, Hook: opts.Hook, MinExecutors: s.opts.MinExecutors})
	if err != nil {
		return err
	}
	start := s.opts.Now()
	err = job.RunWith(ctx, runner, r.signals)
	st := runner.Stats()
	s.log.Info("query run ended", "query", rec.Name, "id", job.Query.QueryID(), "batches", st.Batches, "inputRows", st.InputRows,
		"shuffleBytes", st.ShuffleBytes, "shuffleRecords", st.ShuffleRecords, "mapRetries", st.MapRetries, "seconds", s.opts.Now().Sub(start).Seconds())
	return err
}

// runOf returns name's current run (nil if it has none).
func (s *Service) runOf(name string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[name]
}

// SetCluster sets the cluster queries run on (before Run).
func (s *Service) SetCluster(d *dispatch.Driver) { s.opts.Cluster = d }
