package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// objects returns every object under store, by key.
func objects(t *testing.T, store objstore.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		b, err := store.Get(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) {
			// Deleted between the listing and the read by a query that
			// still runs (a sink's pending-upload records go once their
			// batch commits): not part of this snapshot.
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[k] = string(b)
	}
	return out
}

// objectsDiff describes how after differs from before ("" when equal).
func objectsDiff(before, after map[string]string) string {
	var d []string
	for k, v := range after {
		if old, ok := before[k]; !ok {
			d = append(d, "added "+k)
		} else if old != v {
			d = append(d, "changed "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// Two drivers on one checkpoint. The old one is paused with SIGSTOP in the
// middle of batch 2, while it uploads state (the object store holds that
// upload until the process is stopped); a new driver on another node
// re-runs batch 2 and finishes the query; then the old one is resumed. It
// is fenced at its next log write: it exits non-zero with an error that
// says so, commits nothing, and changes no object of the checkpoint or the
// sink (what it rewrites, it rewrites byte for byte); the output is exact.
func TestChaosTwoDriversOnOneCheckpointOldOneIsFenced(t *testing.T) {
	srv := s3test.Start(t)
	proxy := newFaultProxy(t, srv.Endpoint, faultproxy.Config{})
	p := s3Place(t, srv, "fence", proxy.URL())
	in, want := s3Input(t, 141)
	specPath := writeSpec(t, chaosSpec(in, p, 2, query.Trigger{AvailableNow: true}))
	dir := t.TempDir()

	// state/0/<p>/3-<attempt>.delta (no other object's path holds "/3-").
	hold := proxy.Hold(faultproxy.Match{Method: "PUT", Contains: "/3-", Suffix: ".delta"})
	old := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "old.jsonl"), env: p.Env})
	select {
	case <-hold.Arrived():
	case <-time.After(90 * time.Second):
		t.Fatalf("batch 2 never uploaded state:\n%s", old.logs())
	}
	if err := old.driver.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	hold.Release("") // the upload lands; the stopped driver does not hear back
	t.Logf("old driver stopped in batch 2 at %s", hold.Request())
	pending := pendingBatch(t, p.checkpoint(t))
	if pending == nil || pending.BatchID != 2 {
		t.Fatalf("the old driver should be stopped mid-batch 2; the log's pending batch is %v", pending)
	}

	fresh := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "new.jsonl"), env: p.Env})
	if err := fresh.wait(120 * time.Second); err != nil {
		t.Fatalf("the new driver failed: %v\n%s", err, fresh.logs())
	}
	prog := readProgressIf(t, fresh.progress)
	if len(prog) == 0 {
		t.Fatal("the new driver ran no batch")
	}
	checkRerun(t, pending, prog[0])
	cpBefore, sinkBefore := objects(t, p.checkpoint(t)), objects(t, p.sink(t))

	if err := old.driver.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err := old.wait(120 * time.Second)
	if err == nil || killedBySignal(err) {
		t.Fatalf("the resumed old driver did not fail (exit %v):\n%s", err, old.logs())
	}
	t.Logf("the old driver as the operator sees it: %s", lastLine(old.driver.Logs()))
	if !strings.Contains(old.driver.Logs(), "fenced") {
		t.Fatalf("the old driver's error does not say it was fenced:\n%s", old.logs())
	}
	if n := len(readProgressIf(t, old.progress)); n != 2 {
		t.Fatalf("the old driver reported %d committed batches, want 2 (batches 0 and 1, before it was stopped)", n)
	}
	// The old driver's state writes in flight land under its own
	// attempt's names, which no commit lists (never loaded; cleanup
	// deletes them): strays, not changes. Nothing else may differ.
	var changed []string
	for _, line := range strings.Split(objectsDiff(cpBefore, objects(t, p.checkpoint(t))), "\n") {
		if key, ok := strings.CutPrefix(line, "added "); ok && strayAttempt(t, p.checkpoint(t), "cp/", key) {
			t.Logf("the fenced driver left %s, a file of its abandoned attempt", key)
			continue
		}
		if line != "" {
			changed = append(changed, line)
		}
	}
	if len(changed) > 0 {
		t.Errorf("the fenced driver changed the checkpoint:\n%s", strings.Join(changed, "\n"))
	}
	if d := objectsDiff(sinkBefore, objects(t, p.sink(t))); d != "" {
		t.Errorf("the fenced driver changed the sink:\n%s", d)
	}
	all := append(readProgressIf(t, old.progress), prog...)
	finish(t, p, want, summary{scenario: "two-drivers-fenced", seed: 141, retries: retries(all),
		extra: []string{"paused_at=" + strings.ReplaceAll(hold.Request(), " ", ":"), fmt.Sprintf("old_driver_commits=%d", 2)}})
}
