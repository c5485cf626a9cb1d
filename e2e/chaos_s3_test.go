package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// s3Input writes the tile's input for the S3 fault scenarios and returns
// the directory and the oracle.
func s3Input(t *testing.T, seed uint64) (string, []tiletest.Window) {
	t.Helper()
	events := tiletest.Events(seed, 8000, time.Second, chaosDisorder, 6)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 400); err != nil {
		t.Fatal(err)
	}
	return in, tiletest.Oracle(events, chaosWindow, chaosDelay)
}

func newFaultProxy(t *testing.T, target string, cfg faultproxy.Config) *faultproxy.HTTP {
	t.Helper()
	p, err := faultproxy.NewHTTP(target, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// faultFraction is $SLUICE_CHAOS_S3_FAULTS, or 0.1.
func faultFraction(t *testing.T) float64 {
	if s := os.Getenv("SLUICE_CHAOS_S3_FAULTS"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > 1 {
			t.Fatalf("SLUICE_CHAOS_S3_FAULTS=%q: want a fraction in [0, 1]", s)
		}
		return f
	}
	return 0.1
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// A tenth of the object store's requests fail (500, 503, SlowDown), lose
// their connection before or after reaching the server, or arrive late:
// the query completes (the client retries with backoff; a create-if-absent
// whose response was lost recognises its own write) and the output is
// exact, the log sound.
func TestChaosS3FaultsQueryCompletesExactly(t *testing.T) {
	seed := chaosSeed(t)
	srv := s3test.Start(t)
	proxy := newFaultProxy(t, srv.Endpoint, faultproxy.Config{Seed: seed, Fraction: faultFraction(t), MaxDelay: 100 * time.Millisecond})
	p := s3Place(t, srv, "faults", proxy.URL())
	in, want := s3Input(t, 111)
	spec := chaosSpec(in, p, 1, query.Trigger{AvailableNow: true})
	run := oneProcess.start(t, queryArgs{spec: writeSpec(t, spec), progress: filepath.Join(t.TempDir(), "progress.jsonl"), env: p.Env})
	if err := run.wait(180 * time.Second); err != nil {
		t.Fatalf("the query failed under object-store faults: %v\n%s\nproxy: %v", err, run.logs(), proxy.Stats())
	}
	st := proxy.Stats()
	if st.TotalFaulted() == 0 {
		t.Fatalf("no request was faulted: %v", st)
	}
	prog := readProgressIf(t, run.progress)
	finish(t, p, want, summary{scenario: "s3-faults", seed: seed, retries: int(st.TotalFaulted()) + retries(prog),
		extra: []string{fmt.Sprintf("fraction=%g", faultFraction(t)), "proxy=" + strings.ReplaceAll(st.String(), " ", ",")}})
}

// Every write of one named object of batch 3 fails: the query fails
// loudly (non-zero exit, the error names the object), commits/3 does not
// exist, and a restart without the fault completes with exact output.
func TestChaosS3PersistentWriteFailureFailsLoudlyAndRestartIsExact(t *testing.T) {
	srv := s3test.Start(t)
	in, want := s3Input(t, 112)
	for i, tc := range []struct {
		name  string
		match faultproxy.Match
		named string // what the error must name
		rerun bool   // offsets/3 was written: the restart re-runs batch 3
	}{
		{"offsets", faultproxy.Match{Suffix: "/checkpoints/tile/offsets/3"}, "offsets/3", false},
		{"data-file", faultproxy.Match{Contains: "/warehouse/tile/", Suffix: ".parquet"}, "part-00003-", true},
		{"state-delta", faultproxy.Match{Contains: "/4-", Suffix: ".delta"}, "version 4", true}, // state/0/<p>/4-<attempt>.delta
		{"sink-log", faultproxy.Match{Suffix: "/warehouse/tile/_sink_log/3"}, "_sink_log/3", true},
		{"commits", faultproxy.Match{Suffix: "/checkpoints/tile/commits/3"}, "commits/3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := newFaultProxy(t, srv.Endpoint, faultproxy.Config{})
			if tc.name == "data-file" {
				tc.match.Contains = "/part-00003-" // batch 3's files only
			}
			proxy.FailWrites(tc.match, faultproxy.InternalError)
			p := s3Place(t, srv, fmt.Sprintf("persist-%d", i), proxy.URL())
			specPath := writeSpec(t, chaosSpec(in, p, 4, query.Trigger{AvailableNow: true}))
			dir := t.TempDir()
			first := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "first.jsonl"), env: p.Env, runArgs: []string{"--s3-max-retries", "2", "--source-retry-for", "0s"}})
			err := first.wait(180 * time.Second)
			if err == nil || killedBySignal(err) {
				t.Fatalf("the query did not fail loudly on a persistent write failure (exit %v):\n%s", err, first.logs())
			}
			t.Logf("the failure as the operator sees it: %s", lastLine(first.driver.Logs()))
			if !strings.Contains(first.driver.Logs(), tc.named) {
				t.Fatalf("the error does not name %s:\n%s", tc.named, first.driver.Logs())
			}
			if proxy.Stats().RuleFaults == 0 {
				t.Fatal("the rule never fired")
			}
			cp := p.checkpoint(t)
			if _, err := cp.Get(context.Background(), "commits/3"); !errors.Is(err, objstore.ErrNotExist) {
				t.Fatalf("commits/3 exists (or cannot be read: %v) after batch 3's %s write failed", err, tc.name)
			}
			pending := pendingBatch(t, cp)
			if tc.rerun != (pending != nil && pending.BatchID == 3) {
				t.Fatalf("after the failure the pending batch is %v, want batch 3 pending=%v", pending, tc.rerun)
			}

			proxy.ClearRules()
			second := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "second.jsonl"), env: p.Env})
			if err := second.wait(180 * time.Second); err != nil {
				t.Fatalf("the restart without the fault failed: %v\n%s", err, second.logs())
			}
			prog := readProgressIf(t, second.progress)
			if len(prog) == 0 || prog[0].BatchID != 3 {
				t.Fatalf("the restart should start at batch 3: %+v", prog)
			}
			if pending != nil {
				checkRerun(t, pending, prog[0])
			}
			all := append(readProgressIf(t, first.progress), prog...)
			finish(t, p, want, summary{scenario: "s3-persistent-failure/" + tc.name, retries: retries(all),
				extra: []string{fmt.Sprintf("failed_writes=%d", proxy.Stats().RuleFaults)}})
		})
	}
}
