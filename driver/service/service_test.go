package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/task"
)

type lab struct {
	dir, in, out, cp string
	events           []tiletest.Event
	files            int
}

func newLab(t *testing.T, dir string) *lab {
	l := &lab{dir: dir, in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), cp: filepath.Join(dir, "cp")}
	if err := os.MkdirAll(l.in, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// add writes n more events (later than the previous ones) as new files.
func (l *lab) add(t *testing.T, n int) {
	t.Helper()
	evs := tiletest.Events(uint64(len(l.events)+1), n, 7*time.Second, 30*time.Second, 3)
	shift := time.Duration(len(l.events)) * 7 * time.Second
	for i := range evs {
		evs[i].Time = evs[i].Time.Add(shift)
	}
	sub := filepath.Join(l.dir, fmt.Sprintf("batch%03d", l.files))
	if err := tiletest.WriteFiles(sub, evs, 50); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(sub)
	for _, e := range ents {
		if err := os.Rename(filepath.Join(sub, e.Name()), filepath.Join(l.in, fmt.Sprintf("%03d-%s", l.files, e.Name()))); err != nil {
			t.Fatal(err)
		}
	}
	l.files++
	l.events = append(l.events, evs...)
}

func (l *lab) spec(mutate func(*query.Spec)) []byte {
	s := tiletest.Spec(l.in, l.out, l.cp)
	s.Trigger = query.Trigger{ProcessingTime: query.Duration(50 * time.Millisecond)}
	if mutate != nil {
		mutate(&s)
	}
	b, _ := json.Marshal(s)
	return b
}

func (l *lab) check(t *testing.T) string {
	t.Helper()
	st, err := objstore.NewFS(l.out)
	if err != nil {
		return err.Error()
	}
	cols, rows, err := parquet.ReadCommitted(context.Background(), st)
	if err != nil {
		return err.Error()
	}
	got, err := tiletest.FromRows(cols, rows)
	if err != nil {
		return err.Error()
	}
	return tiletest.Diff(tiletest.Oracle(l.events, 5*time.Minute, 10*time.Minute), got)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newService(t *testing.T, regDir string) (*Service, context.CancelFunc, chan error) {
	st, err := objstore.NewFS(regDir)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		Registry: registry.New(st, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
		Engine:   microbatch.Options{Parallelism: 2},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "the service to become active", func() bool { return s.Ready() == nil })
	return s, cancel, done
}

func state(s *Service, name string) monitor.State {
	v, _ := s.tr.Get(name)
	return v.State
}

func TestServiceSubmitStopResumeShutdown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 400)
	s, cancel, done := newService(t, filepath.Join(dir, "registry"))
	const name = "course-activity-tile"

	if _, err := s.Submit(ctx, Submission{Spec: []byte("name: x\nsource: {}")}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("a malformed spec: %v, want ErrInvalidSpec", err)
	}
	res, err := s.Submit(ctx, Submission{Spec: l.spec(nil), ChangedBy: "test"})
	if err != nil || res.Outcome != "submitted" || res.Record.Generation != 1 {
		t.Fatalf("submit: %+v, %v", res, err)
	}
	waitFor(t, "the output to equal the oracle", func() bool { return l.check(t) == "" })
	if st := state(s, name); st != monitor.Running {
		t.Fatalf("state %s, want RUNNING", st)
	}
	if res, err := s.Submit(ctx, Submission{Spec: l.spec(nil)}); err != nil || res.Outcome != "unchanged" || res.Record.Generation != 1 {
		t.Fatalf("the same spec again: %+v, %v", res, err)
	}
	_, err = s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.ShufflePartitions = 3 })})
	if !IsIncompatible(err) {
		t.Fatalf("changed shufflePartitions: %v, want new checkpoint required", err)
	}
	if st := state(s, name); st != monitor.Running {
		t.Fatalf("after a refused change: %s, want the old version RUNNING", st)
	}
	// A compatible change (the trigger) is applied: the query restarts on
	// the new generation.
	res, err = s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.Trigger.ProcessingTime = query.Duration(80 * time.Millisecond) })})
	if err != nil || res.Outcome != "updated" || res.Record.Generation != 2 {
		t.Fatalf("compatible change: %+v, %v", res, err)
	}
	if _, err := s.WaitStarted(ctx, name, 2); err != nil {
		t.Fatal(err)
	}

	rec, v, err := s.Stop(ctx, name, false, 0, "test")
	if err != nil || rec.Desired != registry.Stopped || v.State != monitor.Stopped {
		t.Fatalf("stop: %+v %+v %v", rec, v, err)
	}
	if _, _, err := s.Stop(ctx, "nope", false, 0, "test"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("stop of an unknown query: %v", err)
	}
	l.add(t, 300)
	time.Sleep(300 * time.Millisecond) // a stopped query reads nothing
	if state(s, name) != monitor.Stopped {
		t.Fatalf("stopped query restarted: %s", state(s, name))
	}
	res, err = s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.Trigger.ProcessingTime = query.Duration(80 * time.Millisecond) })})
	if err != nil || res.Outcome != "resumed" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	waitFor(t, "the resumed output to equal the oracle", func() bool { return l.check(t) == "" })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := s.reg.Get(ctx, name)
	if err != nil || got.Desired != registry.Running {
		t.Fatalf("after shutdown the desired state is %q (%v), want running", got.Desired, err)
	}
	latest, err := s.lease.Latest(ctx)
	if err != nil || !latest.Released {
		t.Fatalf("lease after shutdown: %+v %v, want released", latest, err)
	}

	// A new service on the same registry resumes the query.
	l.add(t, 200)
	s2, cancel2, done2 := newService(t, filepath.Join(dir, "registry"))
	waitFor(t, "the new driver's output to equal the oracle", func() bool { return l.check(t) == "" })
	if state(s2, name) != monitor.Running {
		t.Fatalf("new driver: %s", state(s2, name))
	}
	cancel2()
	<-done2
}

func TestWatcherAddChangeRemove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 200)
	s, cancel, done := newService(t, filepath.Join(dir, "registry"))
	defer func() { cancel(); <-done }()
	qdir := filepath.Join(dir, "queries")
	os.MkdirAll(qdir, 0o755)
	w := &Watcher{Dir: qdir, S: s}
	file := filepath.Join(qdir, "tile.json")
	const name = "course-activity-tile"
	write := func(b []byte) {
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w.Scan(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(l.spec(nil))
	rec, err := s.reg.Get(ctx, name)
	if err != nil || rec.Generation != 1 || rec.Desired != registry.Running {
		t.Fatalf("after adding a file: %+v %v", rec, err)
	}
	waitFor(t, "output", func() bool { return l.check(t) == "" })
	write(l.spec(func(q *query.Spec) { q.Trigger.ProcessingTime = query.Duration(70 * time.Millisecond) }))
	if rec, _ = s.reg.Get(ctx, name); rec.Generation != 2 {
		t.Fatalf("compatible change not applied: generation %d", rec.Generation)
	}
	write(l.spec(func(q *query.Spec) { q.ShufflePartitions = 2 }))
	if rec, _ = s.reg.Get(ctx, name); rec.Generation != 2 {
		t.Fatalf("incompatible change applied: generation %d", rec.Generation)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := w.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ = s.reg.Get(ctx, name); rec.Desired != registry.Running {
		t.Fatal("a removed file stopped its query without --prune")
	}
	w.Prune = true
	write(l.spec(nil)) // back to generation 1's spec: an update
	os.Remove(file)
	if err := w.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ = s.reg.Get(ctx, name); rec.Desired != registry.Stopped || state(s, name) != monitor.Stopped {
		t.Fatalf("with --prune a removed file stops its query: %+v %s", rec, state(s, name))
	}
}

// A batch failing for a retryable reason (the sink's store refusing writes)
// shows RECOVERING with the error, not FAILED; once the store is back the
// query is RUNNING again and the output is exact.
func TestServiceRetryableFailureIsRecovering(t *testing.T) {
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 300)
	st, err := objstore.NewFS(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	var sinkFaults *objstore.Faulty
	s := New(Options{
		Registry: registry.New(st, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
		Engine: microbatch.Options{Parallelism: 2, SourceRetryFor: time.Minute, WrapStore: func(role string, s objstore.Store) objstore.Store {
			if role != task.RoleSink {
				return s
			}
			sinkFaults = objstore.NewFaulty(s, objstore.FaultRule{Name: "down", Op: objstore.OpPut}, objstore.FaultRule{Name: "down2", Op: objstore.OpPutIfAbsent})
			return sinkFaults
		}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "active", func() bool { return s.Ready() == nil })
	if _, err := s.Submit(ctx, Submission{Spec: l.spec(nil)}); err != nil {
		t.Fatal(err)
	}
	const name = "course-activity-tile"
	waitFor(t, "RECOVERING", func() bool { return state(s, name) == monitor.Recovering })
	v, _ := s.tr.Get(name)
	if v.LastError == "" || v.LastErrorAt.IsZero() {
		t.Fatalf("RECOVERING without the error: %+v", v)
	}
	sinkFaults.ClearRules()
	waitFor(t, "the output after the store is back", func() bool { return l.check(t) == "" })
	if st := state(s, name); st != monitor.Running {
		t.Fatalf("after recovery: %s", st)
	}
}

// Two clients submitting the same name at once: one wins, the other is
// told the query changed concurrently.
func TestConcurrentSubmitsOfOneNameHaveOneWinner(t *testing.T) {
	dir := t.TempDir()
	l := newLab(t, dir)
	s, cancel, done := newService(t, filepath.Join(dir, "registry"))
	defer func() { cancel(); <-done }()
	specs := [][]byte{
		l.spec(func(q *query.Spec) { q.Trigger.ProcessingTime = query.Duration(time.Second) }),
		l.spec(func(q *query.Spec) { q.Trigger.ProcessingTime = query.Duration(2 * time.Second) }),
	}
	errs := make([]error, len(specs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Submit(context.Background(), Submission{Spec: specs[i]})
		})
	}
	close(start)
	wg.Wait()
	won, lost := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, registry.ErrConflict):
			lost++
		default:
			t.Fatalf("submit: %v", err)
		}
	}
	// Both may also succeed one after the other (the second an update);
	// never two first generations.
	rec, err := s.reg.Get(context.Background(), "course-activity-tile")
	if err != nil || won+lost != 2 || won == 0 || (lost == 1 && rec.Generation != 1) || (won == 2 && rec.Generation != 2) {
		t.Fatalf("won %d lost %d, registry at %+v (%v)", won, lost, rec, err)
	}
}

// A driver that sees another holder in the lease abandons its queries and
// Run returns ErrLeaseLost (the process exits; the checkpoint's fencing
// stays the last line of defence).
func TestLostLeaseStopsTheDriver(t *testing.T) {
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 100)
	regDir := filepath.Join(dir, "registry")
	s, _, done := newService(t, regDir)
	if _, err := s.Submit(context.Background(), Submission{Spec: l.spec(nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitStarted(context.Background(), "course-activity-tile", 1); err != nil {
		t.Fatal(err)
	}
	st, _ := objstore.NewFS(regDir)
	latest, err := s.lease.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(registry.LeaseRecord{Seq: latest.Seq + 5, Holder: "intruder"})
	if err := st.PutIfAbsent(context.Background(), fmt.Sprintf("lease/%020d.json", latest.Seq+5), b); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Run returned %v, want ErrLeaseLost", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the driver kept running after losing the lease")
	}
	if s.Ready() == nil {
		t.Fatal("a driver that lost the lease is still ready")
	}
	if r := s.runOf("course-activity-tile"); r == nil || !r.ended() {
		t.Fatal("the query still runs after the lease was lost")
	}
}

// A batch logged but still waiting for executors has run nothing: a
// graceful stop (an operator's or the driver's shutdown) abandons it at
// once instead of holding the stop until StopTimeout, and the next run
// re-runs its logged offsets.
func TestGracefulStopAbandonsABatchWaitingForExecutors(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a driver serving gRPC on loopback")
	}
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 200)
	drv, err := dispatch.NewDriver(dispatch.DriverOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	go drv.Serve(serveCtx)
	st, err := objstore.NewFS(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	logged := make(chan struct{}, 16)
	s := New(Options{
		Registry:    registry.New(st, registry.Options{}),
		Lease:       registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:        50 * time.Millisecond,
		StopTimeout: 10 * time.Minute,
		Cluster:     drv,
		Engine: microbatch.Options{Parallelism: 2, Observer: progress.Funcs{OnBatchStarted: func(ids.BatchID) {
			logged <- struct{}{}
		}}},
	})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	waitFor(t, "the service to become active", func() bool { return s.Ready() == nil })
	const name = "course-activity-tile"
	wait := func(what string) {
		t.Helper()
		select {
		case <-logged:
		case <-time.After(60 * time.Second):
			t.Fatalf("no batch logged %s", what)
		}
	}

	// An operator's graceful stop.
	if _, err := s.Submit(ctx, Submission{Spec: l.spec(nil), ChangedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	wait("after submit")
	stopped := make(chan error, 1)
	go func() {
		_, v, err := s.Stop(ctx, name, false, 0, "test")
		if err == nil && v.State != monitor.Stopped {
			err = fmt.Errorf("state %s, want STOPPED", v.State)
		}
		stopped <- err
	}()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a graceful stop waited for a batch that has no executor to run on (StopTimeout is 10 min)")
	}

	// The driver's shutdown, with the batch logged before (re-run on resume).
	if res, err := s.Submit(ctx, Submission{Spec: l.spec(nil)}); err != nil || res.Outcome != "resumed" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if _, err := s.WaitStarted(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed query to wait for executors", func() bool { return state(s, name) == monitor.Running })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the shutdown waited for a batch that has no executor to run on (StopTimeout is 10 min)")
	}
	if got := state(s, name); got != monitor.Stopped {
		t.Fatalf("after shutdown: %s, want STOPPED", got)
	}

	// Nothing was lost: a new driver on the same registry, now with an
	// executor, re-runs the logged batch and the output equals the oracle.
	if len(tiletest.Oracle(l.events, 5*time.Minute, 10*time.Minute)) == 0 {
		t.Fatal("the input closes no window: the oracle check would be empty")
	}
	if l.check(t) == "" {
		t.Fatal("the output already equals the oracle before any batch ran on an executor")
	}
	node, err := executor.NewNode(executor.NodeOptions{Driver: drv.Addr(), Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	go node.Run(serveCtx)
	s2 := New(Options{
		Registry: registry.New(st, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
		Cluster:  drv,
		Engine:   microbatch.Options{Parallelism: 2},
	})
	ctx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- s2.Run(ctx2) }()
	waitFor(t, "the new driver's output to equal the oracle", func() bool { return l.check(t) == "" })
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}

// gatedStore holds every List until gate is closed (the lease's first
// call), so a driver stays "starting" for as long as a test wants.
type gatedStore struct {
	objstore.Store
	gate chan struct{}
}

func (g *gatedStore) List(ctx context.Context, prefix string) ([]string, error) {
	<-g.gate
	return g.Store.List(ctx, prefix)
}

// A call made while the driver is still starting (its first lease attempt
// not over) waits for it instead of being refused as a standby; a real
// standby is still refused at once.
func TestSubmitToAStartingDriverWaitsForItsFirstLeaseAttempt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 100)
	fs, err := objstore.NewFS(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	st := &gatedStore{Store: fs, gate: make(chan struct{})}
	s := New(Options{
		Registry: registry.New(st, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
		Engine:   microbatch.Options{Parallelism: 2},
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	submitted := make(chan error, 1)
	go func() {
		_, err := s.Submit(ctx, Submission{Spec: l.spec(nil), ChangedBy: "test"})
		submitted <- err
	}()
	select {
	case err := <-submitted:
		t.Fatalf("submit to a starting driver returned before its first lease attempt: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case <-s.Activated():
		t.Fatal("Activated is closed before the driver holds the lease")
	default:
	}
	close(st.gate)
	select {
	case <-s.Activated():
	case <-time.After(30 * time.Second):
		t.Fatal("Activated was not closed once the driver held the lease")
	}
	select {
	case err := <-submitted:
		if err != nil {
			t.Fatalf("submit to a starting driver: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit did not return once the driver was active")
	}
	waitFor(t, "the output to equal the oracle", func() bool { return l.check(t) == "" })

	// A second driver on the same registry is a standby: refused at once.
	other := New(Options{
		Registry: registry.New(fs, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
	})
	otherCtx, stopOther := context.WithCancel(ctx)
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Run(otherCtx) }()
	start := time.Now()
	if _, err := other.Submit(ctx, Submission{Spec: l.spec(nil)}); !errors.Is(err, ErrStandby) {
		t.Fatalf("submit to a standby: %v, want ErrStandby", err)
	}
	if d := time.Since(start); d > startWait {
		t.Fatalf("a standby took %v to refuse", d)
	}
	stopOther()
	<-otherDone
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
