package e2e

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// The driver is SIGKILLed at random moments while a processingTime query
// runs and input keeps arriving, and restarted each time in a fresh
// working directory. Once the input stops and an availableNow pass drains
// the query, every closed window is in the sink exactly once (by listing
// and by the sink log), no file is orphaned, the log is gap-free and
// contiguous, and every restart re-ran the pending batch as logged.
func TestChaosRandomDriverKillsLoseAndDoubleNothing(t *testing.T) {
	randomKills(t, oneProcess, localPlace(t))
}

// The same on an S3 checkpoint and sink (the soak only: it is the slower
// twin of the local run).
func TestChaosRandomDriverKillsOnS3LoseAndDoubleNothing(t *testing.T) {
	if !chaosSoak() {
		t.Skip("soak only (SLUICE_CHAOS_SOAK=1)")
	}
	srv := s3test.Start(t)
	randomKills(t, oneProcess, s3Place(t, srv, "chaos", srv.Endpoint))
}

// randomKills runs the random-kill scenario on topo at p and returns its
// summary.
func randomKills(t *testing.T, topo topology, p place) {
	seed := chaosSeed(t)
	rng := chaosRand(seed)
	iterations := chaosIterations(t, 5)
	f := newFeeder(t, seed, 100, 500*time.Millisecond)
	f.writeN(t, 4)
	spec := chaosSpec(f.dir, p, 3, query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)})
	// Log and state cleanup and state snapshots run during the kills.
	spec.MinBatchesToRetain = 10
	spec.SnapshotInterval = 4
	specPath := writeSpec(t, spec)
	f.run(t, 50*time.Millisecond)
	// A directory reader polls the sink through every kill.
	reader := startListingReader(t, p)

	dir := t.TempDir()
	var (
		kills        []time.Time
		commits      []time.Time
		startToFirst []time.Duration
		all          []progress.Report
		rerunChecks  int
	)
	observe := func(run *queryRun, pending bool, prog []progress.Report) {
		if len(prog) == 0 {
			return
		}
		if pending {
			rerunChecks++
		}
		startToFirst = append(startToFirst, committedAt(t, prog[0]).Sub(run.started))
		for _, pr := range prog {
			commits = append(commits, committedAt(t, pr))
		}
		all = append(all, prog...)
	}
	for i := range iterations {
		pending := pendingBatch(t, p.checkpoint(t))
		run := topo.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, fmt.Sprintf("progress-%d.jsonl", i)), env: p.Env})
		life := 300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond)))
		time.Sleep(time.Until(run.started.Add(life))) // spacing the kills, not waiting for a condition
		if rng.IntN(2) == 0 {
			// Batches are short next to the trigger interval: half the
			// kills aim at a batch in flight (offsets/N written, commits/N
			// not yet), landing in whatever phase it is in.
			awaitPending(t, p, 2*time.Second)
		}
		if run.exited() {
			t.Fatalf("iteration %d: the query exited before it was killed: %v\n%s", i, run.driver.err, run.logs())
		}
		run.kill()
		kills = append(kills, time.Now())
		prog := readProgressIf(t, run.progress)
		if pending != nil && len(prog) > 0 {
			checkRerun(t, pending, prog[0])
		}
		observe(run, pending != nil, prog)
	}
	files, events := f.Stop(t)

	drain := spec
	drain.Trigger = query.Trigger{AvailableNow: true}
	pending := pendingBatch(t, p.checkpoint(t))
	run := topo.start(t, queryArgs{spec: writeSpec(t, drain), progress: filepath.Join(dir, "progress-drain.jsonl"), env: p.Env})
	if err := run.wait(180 * time.Second); err != nil {
		t.Fatalf("the draining availableNow run failed: %v\n%s", err, run.logs())
	}
	prog := readProgressIf(t, run.progress)
	if pending != nil {
		if len(prog) == 0 {
			t.Fatalf("the drain did not re-run pending batch %d", pending.BatchID)
		}
		checkRerun(t, pending, prog[0])
	}
	observe(run, pending != nil, prog)

	// From each kill to the next commit by any later driver.
	sort.Slice(commits, func(i, j int) bool { return commits[i].Before(commits[j]) })
	var killToCommit []time.Duration
	for _, k := range kills {
		j := sort.Search(len(commits), func(i int) bool { return commits[i].After(k) })
		if j < len(commits) {
			killToCommit = append(killToCommit, commits[j].Sub(k))
		}
	}
	finish(t, p, f.oracle(), summary{
		scenario: "random-kills/" + topo.name + "/" + p.Name, seed: seed, kills: len(kills), retries: retries(all),
		extra: []string{
			fmt.Sprintf("files=%d", files), fmt.Sprintf("events=%d", events),
			fmt.Sprintf("reruns_checked=%d", rerunChecks),
			"start_to_first_commit_ms(median/max)=" + durations(startToFirst),
			"kill_to_next_commit_ms(median/max)=" + durations(killToCommit),
		},
	})
	n := reader.check(f.oracle())
	t.Logf("listing reader: %d snapshots of the sink directory, each only committed windows, each once", n)
}

// awaitPending polls the checkpoint until a batch is in flight, or the
// timeout passes.
func awaitPending(t *testing.T, p place, timeout time.Duration) {
	t.Helper()
	cp := p.checkpoint(t)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if pendingBatch(t, cp) != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// The named kill points on an S3 checkpoint and sink: the driver is
// SIGKILLed at each point of batch 2 and a new driver (fresh directory)
// finishes; the output is exact and the restart re-ran batch 2 as logged
// (or, after commits/2, planned batch 3). crash_test.go covers the local
// checkpoint; this is the same promise over S3, with the chaos summary.
func TestChaosNamedKillPointsOnS3(t *testing.T) {
	srv := s3test.Start(t)
	events := tiletest.Events(91, 6000, time.Second, chaosDisorder, 6)
	want := tiletest.Oracle(events, chaosWindow, chaosDelay)
	seed := uint64(91)
	for i, point := range []string{"after-offsets", "map-done", "maps-done", "state-commit", "before-sink-gather", "before-sink-commit", "after-sink-commit", "after-commit"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			in := filepath.Join(t.TempDir(), "in")
			if err := tiletest.WriteFiles(in, events, 500); err != nil {
				t.Fatal(err)
			}
			p := s3Place(t, srv, fmt.Sprintf("points-%d", i), srv.Endpoint)
			specPath := writeSpec(t, chaosSpec(in, p, 3, query.Trigger{AvailableNow: true}))
			dir := t.TempDir()
			first := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "first.jsonl"), env: append(p.Env, "SLUICE_FAULT="+point+":2")})
			if err := first.wait(90 * time.Second); !killedBySignal(err) {
				t.Fatalf("the driver was not killed at %s (exit %v):\n%s", point, err, first.logs())
			}
			pending := pendingBatch(t, p.checkpoint(t))
			second := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "second.jsonl"), env: p.Env})
			if err := second.wait(90 * time.Second); err != nil {
				t.Fatalf("the restarted driver failed: %v\n%s", err, second.logs())
			}
			prog := readProgressIf(t, second.progress)
			if len(prog) == 0 {
				t.Fatal("the restarted driver ran no batch")
			}
			if point == "after-commit" {
				if pending != nil || prog[0].Rerun || prog[0].BatchID != 3 {
					t.Fatalf("after commits/2 the restart should plan batch 3, ran batch %d (rerun=%v)", prog[0].BatchID, prog[0].Rerun)
				}
			} else {
				if pending == nil || pending.BatchID != 2 {
					t.Fatalf("killed at %s of batch 2, the log's pending batch is %v", point, pending)
				}
				checkRerun(t, pending, prog[0])
			}
			all := append(readProgressIf(t, first.progress), prog...)
			finish(t, p, want, summary{scenario: "kill-point/" + point + "/s3", seed: seed, kills: 1, retries: retries(all)})
		})
	}
}
