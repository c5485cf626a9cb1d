package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// testCluster is a driver and executors in this process, over real gRPC
// on loopback.
type testCluster struct {
	t      testing.TB
	driver *Driver
	token  string
	tls    *tlsconf.Source
	mu     sync.Mutex
	nodes  []*executor.Node
	stops  []context.CancelFunc
	dones  []chan error
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newTestCluster(t testing.TB, executors int, token string) *testCluster {
	t.Helper()
	return newSecureTestCluster(t, executors, token, nil, testLogger(t))
}

// newSecureTestCluster is newTestCluster with TLS from src (nil: none) on
// every server and client; the driver logs to log.
func newSecureTestCluster(t testing.TB, executors int, token string, src *tlsconf.Source, log *slog.Logger) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs a driver and executors serving gRPC on loopback")
	}
	d, err := NewDriver(DriverOptions{Listen: "127.0.0.1:0", Token: token, TLS: src, HeartbeatTimeout: 2 * time.Second, Logger: log.With("proc", "driver")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	c := &testCluster{t: t, driver: d, token: token, tls: src}
	t.Cleanup(func() {
		c.stopAll()
		cancel()
		<-done
	})
	for range executors {
		c.addNode()
	}
	c.waitLive(executors)
	return c
}

func (c *testCluster) addNode(edit ...func(*executor.NodeOptions)) *executor.Node {
	c.t.Helper()
	opts := executor.NodeOptions{Driver: c.driver.Addr(), DataDir: c.t.TempDir(), Token: c.token, TLS: c.tls, Slots: 2,
		Logger: testLogger(c.t).With("proc", fmt.Sprintf("exec%d", len(c.nodes)))}
	for _, e := range edit {
		e(&opts)
	}
	n, err := executor.NewNode(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	c.mu.Lock()
	c.nodes, c.stops, c.dones = append(c.nodes, n), append(c.stops, cancel), append(c.dones, done)
	c.mu.Unlock()
	return n
}

func (c *testCluster) stopAll() {
	c.mu.Lock()
	stops, dones := c.stops, c.dones
	c.mu.Unlock()
	for i := range stops {
		stops[i]()
		<-dones[i]
	}
}

// drainAsync drains node i in the background; the channel gets what
// stop returned. A progress callback must not drain synchronously: the
// batch started ahead holds the executor until the scheduler, waiting
// on the callback, takes it.
func (c *testCluster) drainAsync(i int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.stop(i) }()
	return done
}

// stop drains node i and returns what its Run returned.
func (c *testCluster) stop(i int) error {
	c.mu.Lock()
	stop, done := c.stops[i], c.dones[i]
	c.mu.Unlock()
	stop()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(30 * time.Second):
		c.t.Fatalf("executor %d did not stop", i)
		return nil
	}
}

func (c *testCluster) waitLive(n int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.driver.Members.Live()) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%d executors live after 10s, want %d", len(c.driver.Members.Live()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runOn runs spec on the cluster to completion.
func (c *testCluster) runOn(spec query.Spec, onProgress func(*progress.Report)) *Runner {
	c.t.Helper()
	r, err := c.tryRunOn(spec, onProgress)
	if err != nil {
		c.t.Fatalf("run on cluster: %v", err)
	}
	return r
}

func (c *testCluster) tryRunOn(spec query.Spec, onProgress func(*progress.Report)) (*Runner, error) {
	c.t.Helper()
	ctx := context.Background()
	job, err := microbatch.Build(ctx, spec, microbatch.Options{Observer: progress.Committed(onProgress), Logger: testLogger(c.t).With("proc", "scheduler")})
	if err != nil {
		c.t.Fatal(err)
	}
	defer job.Close()
	r, err := c.driver.NewRunner(RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: testLogger(c.t).With("proc", "runner")})
	if err != nil {
		c.t.Fatal(err)
	}
	return r, job.RunWith(ctx, r, nil)
}

func runLocal(t *testing.T, spec query.Spec) {
	t.Helper()
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	if err := job.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func sinkWindows(t *testing.T, dir string) []tiletest.Window {
	t.Helper()
	store, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	cols, rows, err := parquet.ReadCommitted(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tiletest.FromRows(cols, rows)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var queryIDInName = regexp.MustCompile(`-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.`)

// sinkFiles returns the committed files by name without the query id.
func sinkFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	store, _ := objstore.NewFS(dir)
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		for _, f := range e.Files {
			b, err := store.Get(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			out[queryIDInName.ReplaceAllString(f, ".")] = b
		}
	}
	return out
}

func compareFiles(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if g, ok := got[n]; !ok {
			t.Errorf("file %s missing from the cluster's output", n)
		} else if string(g) != string(want[n]) {
			t.Errorf("file %s differs from the one-process engine's", n)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("file %s not in the one-process engine's output", n)
		}
	}
	if len(want) == 0 {
		t.Fatal("no output files at all")
	}
}

func tileInput(t testing.TB, n int) (string, []tiletest.Window) {
	events := tiletest.Events(5, n, 150*time.Millisecond, 4*time.Minute, 9)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 250); err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) == 0 {
		t.Fatalf("%d events close no window: the test needs more", n)
	}
	return in, want
}

func TestTileOnThreeExecutorsEqualsOracleAndOneProcessFiles(t *testing.T) {
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, 3, "s3cret")
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 5
	r := c.runOn(spec, nil)
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("cluster output differs from the oracle:\n%s", d)
	}
	local := tiletest.Spec(in, filepath.Join(dir, "local-out"), filepath.Join(dir, "local-cp"))
	local.Source.File.MaxFilesPerTrigger = 5
	runLocal(t, local)
	compareFiles(t, sinkFiles(t, local.Sink.Parquet.Path), sinkFiles(t, spec.Sink.Parquet.Path))
	st := r.Stats()
	if st.InputRows != 6000 || st.ShuffleBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	owners := map[ids.ExecutorID]bool{}
	for _, o := range r.Owners() {
		owners[o] = true
	}
	if len(owners) != 3 {
		t.Fatalf("partitions owned by %d executors, want all 3: %v", len(owners), r.Owners())
	}
}

// A pass-through query with a driver-side sink gets its rows back from the
// executors' reduce tasks.
func TestPassThroughRowsReturnToTheDriverSink(t *testing.T) {
	in, _ := tileInput(t, 6000)
	c := newTestCluster(t, 2, "")
	dir := t.TempDir()
	spec := tiletest.Spec(in, "", filepath.Join(dir, "cp"))
	spec.Aggregate, spec.Watermark = nil, nil
	spec.Sink = query.Sink{JSONBatches: &query.JSONBatchesSink{Path: filepath.Join(dir, "out")}}
	c.runOn(spec, nil)
	var lines int
	filepath.Walk(filepath.Join(dir, "out"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			lines += strings.Count(string(b), "\n")
		}
		return nil
	})
	if lines != 6000 {
		t.Fatalf("%d rows written, want 6000", lines)
	}
}
