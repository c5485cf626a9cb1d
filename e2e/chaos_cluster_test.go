package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// The random driver kills on `driver serve` with two executor processes:
// each kill takes the driver and its executors (the whole query) down,
// and the next start is a new driver with new executors.
func TestChaosRandomClusterKillsLoseAndDoubleNothing(t *testing.T) {
	randomKills(t, executorsTopology(2), localPlace(t))
}

// clusterQuery is a processingTime tile on `driver serve` with executors,
// fed by a feeder, for the executor chaos scenarios.
type clusterQuery struct {
	t    *testing.T
	p    place
	f    *feeder
	spec query.Spec
	run  *queryRun
}

func startClusterQuery(t *testing.T, seed uint64, p place, executors int, secure ...string) *clusterQuery {
	t.Helper()
	if bins.executor == "" {
		t.Skip("no executor binary")
	}
	f := newFeeder(t, seed, 100, 500*time.Millisecond)
	f.writeN(t, 4)
	spec := chaosSpec(f.dir, p, 3, query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)})
	spec.MinBatchesToRetain = 10
	spec.SnapshotInterval = 4
	run := executorsTopology(executors, secure...).start(t, queryArgs{spec: writeSpec(t, spec), progress: filepath.Join(t.TempDir(), "progress.jsonl"), env: p.Env})
	q := &clusterQuery{t: t, p: p, f: f, spec: spec, run: run}
	q.waitFor("the first committed batch", 60*time.Second, func() bool { return len(q.progress()) > 0 })
	f.run(t, 50*time.Millisecond)
	return q
}

func (q *clusterQuery) progress() []progress.Report { return readProgressIf(q.t, q.run.progress) }

// waitFor polls cond until it holds; the driver exiting fails the test.
func (q *clusterQuery) waitFor(what string, timeout time.Duration, cond func() bool) {
	q.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if q.run.exited() {
			q.t.Fatalf("the driver exited while waiting for %s: %v\n%s", what, q.run.driver.err, q.run.logs())
		}
		if time.Now().After(deadline) {
			q.t.Fatalf("timed out waiting for %s\n%s", what, q.run.logs())
		}
	}
}

// drain stops the input, waits until the running query has written the
// oracle and committed everything, stops it with SIGTERM, and then checks
// the checkpoint holds what a new driver needs: more input, run by a fresh
// one-process driver from the same checkpoint (state loaded from the
// checkpoint), must still give exactly the oracle over all input.
func (q *clusterQuery) drain() ([]progress.Report, int) {
	t := q.t
	t.Helper()
	files, _ := q.f.Stop(t)
	want := q.f.oracle()
	sink, cp := q.p.sink(t), q.p.checkpoint(t)
	q.waitFor("the exact output, committed", 120*time.Second, func() bool {
		return checkSinkStore(t, sink, want).ok() && pendingBatch(t, cp) == nil
	})
	if err := q.run.driver.Stop(60 * time.Second); err != nil {
		t.Fatalf("driver serve did not stop cleanly: %v\n%s", err, q.run.logs())
	}
	q.run.wait(time.Second)
	prog := q.progress()

	q.f.writeN(t, 6)
	spec := q.spec
	spec.Trigger = query.Trigger{AvailableNow: true}
	after := oneProcess.start(t, queryArgs{spec: writeSpec(t, spec), progress: filepath.Join(t.TempDir(), "after.jsonl"), env: q.p.Env})
	if err := after.wait(120 * time.Second); err != nil {
		t.Fatalf("a fresh driver could not continue from the checkpoint: %v\n%s", err, after.logs())
	}
	return append(prog, readProgressIf(t, after.progress)...), files + 6
}

// Executors are SIGKILLed at random moments (one at a time, a new one
// started in its place) while the processingTime query runs with input
// arriving: each loss aborts the batch, which runs again from its logged
// offsets on the executors left. The driver never stops; once the input
// stops the output is exact, and a fresh driver continues from the
// checkpoint exactly.
func TestChaosRandomExecutorKillsLoseAndDoubleNothing(t *testing.T) {
	randomExecutorKills(t)
}

// randomExecutorKills runs the executor-kill scenario; secure are flags
// for the driver and every executor (secureArgs).
func randomExecutorKills(t *testing.T, secure ...string) {
	seed := chaosSeed(t)
	rng := chaosRand(seed)
	iterations := chaosIterations(t, 4)
	q := startClusterQuery(t, seed, localPlace(t), 3, secure...)
	reader := startListingReader(t, q.p)
	var kills []time.Time
	for range iterations {
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond) // spacing the kills
		if rng.IntN(2) == 0 {
			awaitPending(t, q.p, 2*time.Second)
		}
		var live []*Proc
		for _, e := range q.run.executors {
			select {
			case <-e.done:
			default:
				live = append(live, e)
			}
		}
		victim := live[rng.IntN(len(live))]
		victim.Kill()
		kills = append(kills, time.Now())
		q.run.extra(nil)
		if q.run.exited() {
			t.Fatalf("the driver exited after an executor was killed: %v\n%s", q.run.driver.err, q.run.logs())
		}
	}
	lost := regexp.MustCompile(`msg="executor (lost|removed)`)
	q.waitFor("the driver to notice every kill", 30*time.Second, func() bool {
		return len(lost.FindAllString(q.run.driver.Logs(), -1)) >= len(kills)
	})
	prog, files := q.drain()
	var commits []time.Time
	for _, p := range prog {
		commits = append(commits, committedAt(t, p))
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].Before(commits[j]) })
	var killToCommit []time.Duration
	for _, k := range kills {
		if j := sort.Search(len(commits), func(i int) bool { return commits[i].After(k) }); j < len(commits) {
			killToCommit = append(killToCommit, commits[j].Sub(k))
		}
	}
	removed := len(lost.FindAllString(q.run.driver.Logs(), -1))
	scenario := "random-executor-kills/serve+3-executors/local"
	if len(secure) > 0 {
		scenario = "random-executor-kills/serve+3-executors+mtls/local"
	}
	finish(t, q.p, q.f.oracle(), summary{scenario: scenario, seed: seed, kills: len(kills), retries: retries(prog),
		extra: []string{fmt.Sprintf("files=%d", files), fmt.Sprintf("executors_removed=%d", removed),
			"kill_to_next_commit_ms(median/max)=" + durations(killToCommit)}})
	n := reader.check(q.f.oracle())
	t.Logf("listing reader: %d snapshots of the sink directory, each only committed windows, each once", n)
}

func chaosFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var registeredAs = regexp.MustCompile(`msg="executor registered" executor=(\S+)`)

// An executor X is cut off from the driver by a network partition while
// batches run: TCP proxies carry the driver's and the other executors'
// calls to it and its heartbeats to the driver. X reaches the object store
// through its own endpoint, a proxy that logs its requests and holds X's
// next state upload, so X is in the middle of a reduce task when both its
// links are cut. The driver removes X after the heartbeat timeout, its
// partitions move, and batches keep committing without it. Then X's held
// upload lands and X's task goes on, still cut off from the driver but
// not from the object store or the other executors' shuffle service: its
// lease has lapsed, so every later write is refused, and the one write in
// flight at the cut changes no byte the others wrote. The partition heals,
// X joins again (its old tasks cancelled), and in the
// end the output is exact and a fresh driver continues exactly from the
// checkpoint.
func TestChaosExecutorPartitionedFromTheDriverItsLateWritesAreRefused(t *testing.T) {
	seed := chaosSeed(t)
	srv := s3test.Start(t)
	p := s3Place(t, srv, "partition", srv.Endpoint)
	q := startClusterQuery(t, seed, p, 2)
	toDriver, err := faultproxy.NewTCP(q.run.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer toDriver.Close()
	port := chaosFreePort(t)
	toX, err := faultproxy.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer toX.Close()
	xS3 := newFaultProxy(t, srv.Endpoint, faultproxy.Config{})
	x := q.run.extra([]string{"AWS_ENDPOINT_URL_S3=" + xS3.URL()},
		"--driver", toDriver.Addr(), "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--advertise", toX.Addr())
	x.WaitForLog(`msg="executor registered"`, 30*time.Second)
	id := registeredAs.FindStringSubmatch(x.Logs())[1]
	owns := regexp.MustCompile(`msg="partitions assigned".*owners="[^"]*` + regexp.QuoteMeta(id) + `:\[`)
	q.waitFor("partitions assigned to X", 60*time.Second, func() bool { return owns.MatchString(q.run.driver.Logs()) })
	before := len(q.progress())
	q.waitFor("a batch with X", 60*time.Second, func() bool { return len(q.progress()) > before+1 })

	// X's next state upload is held in the object store's proxy: X is in
	// the middle of a reduce task when both its links are cut.
	hold := xS3.Hold(faultproxy.Match{Method: "PUT", Contains: "/partition/checkpoints/tile/state/"})
	select {
	case <-hold.Arrived():
	case <-time.After(60 * time.Second):
		t.Fatalf("X uploaded no state:\n%s", q.run.logs())
	}
	cut := time.Now()
	toDriver.Cut(faultproxy.Partition)
	toX.Cut(faultproxy.Partition)
	removed := regexp.MustCompile(`msg="executor (lost|removed)[^"]*" executor=` + regexp.QuoteMeta(id) + `( |$)`)
	q.waitFor("the driver to remove X", 60*time.Second, func() bool { return removed.MatchString(q.run.driver.Logs()) })
	removedAfter := time.Since(cut)
	var withoutX int
	q.waitFor("three batches committed without X", 60*time.Second, func() bool {
		withoutX = 0
		for _, pr := range q.progress() {
			if committedAt(t, pr).After(cut.Add(removedAfter)) {
				withoutX++
			}
		}
		return withoutX >= 3
	})

	// X's held upload lands now, late, and X's task goes on, still cut
	// off from the driver.
	snapshot := map[string]string{}
	for k, v := range objects(t, p.checkpoint(t)) {
		snapshot["cp/"+k] = v
	}
	for k, v := range objects(t, p.sink(t)) {
		snapshot["sink/"+k] = v
	}
	seen := len(xS3.Requests())
	hold.Release("")
	// X's late requests have ended once none came for a second.
	for last, quiet := len(xS3.Requests()), time.Now(); time.Since(quiet) < time.Second; time.Sleep(50 * time.Millisecond) {
		if n := len(xS3.Requests()); n != last {
			last, quiet = n, time.Now()
		}
	}
	late := []string{hold.Request()}
	for _, r := range xS3.Requests()[seen:] {
		method, _, _ := strings.Cut(r, " ")
		if method == "PUT" || method == "POST" || method == "DELETE" {
			late = append(late, r)
		}
	}
	cpStore, sinkStore := p.checkpoint(t), p.sink(t)
	for _, w := range late {
		method, path, _ := strings.Cut(w, " ")
		key, store, tag := "", cpStore, "cp/"
		if k, ok := strings.CutPrefix(path, "/partition/checkpoints/tile/"); ok {
			key = k
		} else if k, ok := strings.CutPrefix(path, "/partition/warehouse/tile/"); ok {
			key, store, tag = k, sinkStore, "sink/"
		} else {
			t.Errorf("X wrote outside the query's locations: %s", w)
			continue
		}
		old, existed := snapshot[tag+key]
		b, err := store.Get(context.Background(), key)
		switch {
		case method == "DELETE":
			t.Errorf("X deleted %s after it was removed from the pool", path)
		case !existed && recordedSnapshot(t, cpStore, tag, key):
			// A snapshot X's background maintenance wrote of a version
			// that committed, named for the attempt the commit records:
			// the same bytes any executor would write for it.
			t.Logf("X's late write created %s, a snapshot of a committed version under its recorded attempt", path)
		case !existed && strayAttempt(t, cpStore, tag, key):
			// A state file under X's own attempt name: the commit records
			// the attempt of the executors that took over, so it is never
			// loaded (and cleanup deletes it).
			t.Logf("X's late write created %s, a file of its abandoned attempt that no commit lists", path)
		case !existed:
			t.Errorf("X's late write created %s, which the executors that took over never wrote", path)
		case err != nil || string(b) != old:
			t.Errorf("X's late write changed %s (err %v)", path, err)
		}
	}
	t.Logf("X's late writes: %v", late)
	// Only the request already in flight when the links were cut may land:
	// X's writes need a heartbeat lease, which lapsed while it was cut off,
	// so every later write of its task is refused before it is sent.
	if len(late) > 1 {
		t.Errorf("X sent %d writes after its lease lapsed, want none: %v", len(late)-1, late[1:])
	}

	toDriver.Restore()
	toX.Restore()
	healed := time.Now()
	x.WaitForLog("registering again", 60*time.Second)
	q.waitFor("batches after the partition healed", 60*time.Second, func() bool {
		n := 0
		for _, pr := range q.progress() {
			if committedAt(t, pr).After(healed) {
				n++
			}
		}
		return n >= 3
	})
	prog, files := q.drain()
	finish(t, q.p, q.f.oracle(), summary{scenario: "executor-partitioned/serve+3-executors/s3", seed: seed, retries: retries(prog),
		extra: []string{fmt.Sprintf("files=%d", files), fmt.Sprintf("removed_after_ms=%d", removedAfter.Milliseconds()),
			fmt.Sprintf("batches_without_x=%d", withoutX), fmt.Sprintf("late_writes=%d", len(late))}})
}

// strayAttempt reports whether key is a state file (state/OP/P/V-ATTEMPT.delta
// or .snapshot) of an attempt that lost: another attempt's file for the
// same version exists beside it.
func strayAttempt(t *testing.T, cp objstore.Store, tag, key string) bool {
	t.Helper()
	if tag != "cp/" || !strings.HasPrefix(key, "state/") {
		return false
	}
	dash := strings.LastIndex(key, "-")
	if dash < 0 {
		return false
	}
	keys, err := cp.List(context.Background(), key[:dash+1])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k != key && strings.HasSuffix(k, key[strings.LastIndex(key, "."):]) {
			return true
		}
	}
	return false
}

// recordedSnapshot reports whether key is a state snapshot
// (state/OP/P/V-ATTEMPT.snapshot) named for the attempt that commits/V-1
// records as having made partition P's version V.
func recordedSnapshot(t *testing.T, cp objstore.Store, tag, key string) bool {
	t.Helper()
	if tag != "cp/" || !strings.HasPrefix(key, "state/") || !strings.HasSuffix(key, ".snapshot") {
		return false
	}
	parts := strings.Split(strings.TrimSuffix(key, ".snapshot"), "/") // state OP P V-ATTEMPT
	if len(parts) != 4 {
		return false
	}
	vs, attempt, ok := strings.Cut(parts[3], "-")
	v, err := strconv.ParseInt(vs, 10, 64)
	if !ok || err != nil || v < 1 {
		return false
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return false
	}
	p := ids.PartitionID(n)
	c, err := checkpoint.New(cp).Commit(context.Background(), ids.BatchID(v-1)) // version V is batch V-1's commit
	if err != nil || c.State == nil {
		return false
	}
	return slices.Contains(c.State.Deltas, p) && c.State.Attempts[p] == attempt
}
