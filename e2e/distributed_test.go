package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// locations says where a distributed test keeps a query's checkpoint and
// sink: local directories here; an S3-compatible server plugs in by giving
// s3:// URIs, the processes' environment (endpoint, credentials) and the
// options to read the results back with.
type locations struct {
	Checkpoint, Sink string
	Env              []string
	Store            objstore.Options
}

func localLocations(t *testing.T, name string) locations {
	dir := filepath.Join(t.TempDir(), name)
	return locations{Checkpoint: filepath.Join(dir, "cp"), Sink: filepath.Join(dir, "out")}
}

func (l locations) store(t *testing.T, uri string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), uri, l.Store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sinkDiff compares the sink, read by following its log and by listing
// its files, with the oracle ("" when both equal it).
func sinkDiff(t *testing.T, l locations, want []tiletest.Window) string {
	t.Helper()
	store := l.store(t, l.Sink)
	for _, read := range []func(context.Context, objstore.Store) ([]query.Column, []row.Row, error){parquet.ReadCommitted, parquet.ReadAllFiles} {
		cols, rows, err := read(context.Background(), store)
		if err != nil {
			return err.Error()
		}
		got, err := tiletest.FromRows(cols, rows)
		if err != nil {
			return err.Error()
		}
		if d := tiletest.Diff(want, got); d != "" {
			return d
		}
	}
	return ""
}

var queryIDInName = regexp.MustCompile(`-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.`)

// committedFiles returns the sink's committed files by name without the
// query id (two checkpoints give two ids).
func committedFiles(t *testing.T, l locations) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	store := l.store(t, l.Sink)
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

// cluster is a driver process serving queries and executor processes.
type cluster struct {
	t         *testing.T
	tokenFile string
	env       []string
	driver    *Proc
	addr      string
	executors []*Proc
}

var (
	addrInLog     = regexp.MustCompile(`msg="driver listening" address=(\S+)`)
	execAddrInLog = regexp.MustCompile(`msg="executor listening" address=(\S+)`)
	execIDInLog   = regexp.MustCompile(`msg="executor registered" executor=(\S+)`)
)

func logMatch(t *testing.T, p *Proc, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("%s logs lack %s:\n%s", p.name, re, p.Logs())
	}
	return m[1]
}

// startCluster starts `driver serve` with specs and executors executors,
// all sharing a token, and waits until every executor registered.
func startCluster(t *testing.T, l locations, executors int, driverArgs []string, specs ...string) *cluster {
	t.Helper()
	return startClusterWith(t, l, executors, driverArgs, nil, specs...)
}

// startClusterWith is startCluster with extra environment for the driver.
func startClusterWith(t *testing.T, l locations, executors int, driverArgs, driverEnv []string, specs ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, tokenFile: filepath.Join(t.TempDir(), "token"), env: l.Env}
	if err := os.WriteFile(c.tokenFile, []byte("e2e-cluster-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--token-file", c.tokenFile, "--heartbeat-timeout", "3s",
		"--min-executors", fmt.Sprint(executors)}
	for _, s := range specs {
		args = append(args, "--query", s)
	}
	c.driver = NewProc(t, "driver", bins.driver, append(args, driverArgs...)...).Env(l.Env...).Env(driverEnv...)
	c.driver.Start()
	c.driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	c.addr = logMatch(t, c.driver, addrInLog)
	for range executors {
		c.addExecutor()
	}
	return c
}

// addExecutor starts one executor and waits until it registered.
func (c *cluster) addExecutor(env ...string) *Proc {
	c.t.Helper()
	name := fmt.Sprintf("executor-%d", len(c.executors)+1)
	p := NewProc(c.t, name, bins.executor, "--driver", c.addr, "--token-file", c.tokenFile, "--data-dir", c.t.TempDir()).Env(c.env...).Env(env...)
	p.Start()
	p.WaitForLog(`msg="executor registered"`, 30*time.Second)
	c.executors = append(c.executors, p)
	return p
}

func (c *cluster) logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- driver:\n%s", c.driver.Logs())
	for _, e := range c.executors {
		fmt.Fprintf(&b, "--- %s:\n%s", e.name, e.Logs())
	}
	return b.String()
}

// tileFiles writes the tile's input as files and returns the directory and
// the oracle.
func tileFiles(t *testing.T, seed uint64, n, perFile int) (string, []tiletest.Window) {
	t.Helper()
	events := tiletest.Events(seed, n, 150*time.Millisecond, 4*time.Minute, 9)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, perFile); err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) == 0 {
		t.Fatal("the input closes no window")
	}
	return in, want
}

func tileSpec(in string, l locations, filesPerTrigger int) query.Spec {
	spec := tiletest.Spec(in, l.Sink, l.Checkpoint)
	spec.Source.File.MaxFilesPerTrigger = filesPerTrigger
	return spec
}

// The tile on a driver and three executor processes writes exactly the
// oracle, and the very same Parquet files (byte for byte, per batch and
// partition) as the one-process engine on the same input.
func TestDistributedTileEqualsOracleAndOneProcessOutput(t *testing.T) {
	in, want := tileFiles(t, 31, 8000, 250)
	dist := localLocations(t, "dist")
	c := startCluster(t, dist, 3, []string{"--exit-when-done"}, writeSpec(t, tileSpec(in, dist, 4)))
	if err := c.driver.Wait(120 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}
	if d := sinkDiff(t, dist, want); d != "" {
		t.Fatalf("distributed output differs from the oracle:\n%s\n%s", d, c.logs())
	}
	if !strings.Contains(c.driver.Logs(), `executors=3`) {
		t.Fatalf("the batches did not run on 3 executors:\n%s", c.driver.Logs())
	}

	one := localLocations(t, "one")
	run := NewProc(t, "driver run", bins.driver, "run", "-f", writeSpec(t, tileSpec(in, one, 4))).Env(one.Env...)
	run.Start()
	if err := run.Wait(120 * time.Second); err != nil {
		t.Fatalf("driver run: %v\n%s", err, run.Logs())
	}
	want1, got := committedFiles(t, one), committedFiles(t, dist)
	if len(want1) == 0 {
		t.Fatal("the one-process engine wrote no file")
	}
	var names []string
	for n := range want1 {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if string(got[n]) != string(want1[n]) {
			t.Errorf("file %s differs between the cluster and the one-process engine (or is missing)", n)
		}
	}
	if len(got) != len(want1) {
		t.Errorf("the cluster committed %d files, the one-process engine %d", len(got), len(want1))
	}
}

// An executor SIGKILLed in the middle of batch 2 (after reading its split,
// before pushing) fails that attempt; the batch completes on the other
// two and the output is exact.
func TestDistributedExecutorKilledMidBatchOutputStaysExact(t *testing.T) {
	in, want := tileFiles(t, 32, 8000, 250)
	l := localLocations(t, "dist")
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	// The victim is one of the three executors the first batch waits for,
	// so it takes map tasks of batch 2 however slowly it starts.
	c := startCluster(t, l, 2, []string{"--exit-when-done", "--progress-json", progress, "--min-executors", "3"}, writeSpec(t, tileSpec(in, l, 4)))
	victim := c.addExecutor("SLUICE_FAULT=map-done:2")
	if err := victim.Wait(120 * time.Second); !killedBySignal(err) {
		t.Fatalf("the executor was not killed at map-done of batch 2 (exit %v)\n%s", err, c.logs())
	}
	if err := c.driver.Wait(120 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}
	if d := sinkDiff(t, l, want); d != "" {
		t.Fatalf("output differs from the oracle:\n%s\n%s", d, c.logs())
	}
	victimID := logMatch(t, victim, execIDInLog)
	if !strings.Contains(c.driver.Logs(), "executor removed") || !strings.Contains(c.driver.Logs(), "executor="+victimID) {
		t.Fatalf("the driver did not report losing %s:\n%s", victimID, c.driver.Logs())
	}
	var batch2 int
	for _, p := range readProgress(t, progress) {
		if p.BatchID == 2 {
			batch2 = p.Attempts
		}
	}
	if batch2 < 2 {
		t.Fatalf("batch 2 took %d attempt(s); the killed executor's attempt should have failed", batch2)
	}
	checkLog(t, l.Checkpoint)
}

// A fourth executor started while the query runs takes partitions at the
// next batch boundary; the output stays exact.
func TestDistributedFourthExecutorJoinsMidRunAndTakesPartitions(t *testing.T) {
	in, want := tileFiles(t, 33, 8000, 400)
	l := localLocations(t, "dist")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(250 * time.Millisecond)}
	c := startCluster(t, l, 3, nil, writeSpec(t, spec))
	c.driver.WaitForLog("batch 2", 60*time.Second)
	joined := c.addExecutor()
	id := logMatch(t, joined, execIDInLog)
	c.driver.WaitForLog("executors=4", 30*time.Second)
	deadline := time.Now().Add(90 * time.Second)
	for {
		d := sinkDiff(t, l, want)
		if d == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("output still differs from the oracle:\n%s\n%s", d, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.driver.Stop(30 * time.Second); err != nil {
		t.Fatalf("driver did not stop cleanly: %v\n%s", err, c.logs())
	}
	assigned := regexp.MustCompile(`msg="partitions assigned".*executors=4.*owners="[^"]*` + regexp.QuoteMeta(id) + `:\[`)
	if !assigned.MatchString(c.driver.Logs()) {
		t.Fatalf("no assignment gave %s partitions:\n%s", id, c.driver.Logs())
	}
	if !strings.Contains(joined.Logs(), `msg="query prepared"`) {
		t.Fatalf("the joined executor never prepared the query:\n%s", joined.Logs())
	}
	checkLog(t, l.Checkpoint)
}

// Without the cluster token a process cannot register, push shuffle data
// to an executor or submit to the driver; each refusal is logged on both
// sides.
func TestDistributedPeersWithoutTheTokenAreRefused(t *testing.T) {
	l := localLocations(t, "dist")
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{}
	c := startCluster(t, l, 1, nil, writeSpec(t, spec))
	execAddr := logMatch(t, c.executors[0], execAddrInLog)

	intruder := NewProc(t, "intruder", bins.executor, "--driver", c.addr, "--data-dir", t.TempDir())
	intruder.Start()
	if err := intruder.Wait(30 * time.Second); err == nil {
		t.Fatalf("an executor without the token ran:\n%s", intruder.Logs())
	}
	if !strings.Contains(intruder.Logs(), "refused") || !strings.Contains(intruder.Logs(), "SLUICE_TOKEN") {
		t.Fatalf("the refused executor's log does not say why:\n%s", intruder.Logs())
	}
	c.driver.WaitForLog(`refused a call without the cluster token" method=/sluice.v1.DriverService/Register`, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(addr string) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	stream, err := sluicepb.NewShuffleServiceClient(dial(execAddr)).PushPartials(ctx)
	if err == nil {
		stream.Send(&sluicepb.PushPartialsRequest{QueryId: "q", RunId: "r", Data: []byte("forged"), Last: true})
		_, err = stream.CloseAndRecv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("shuffle push without the token: got %v, want UNAUTHENTICATED", err)
	}
	c.executors[0].WaitForLog(`refused a call without the cluster token" method=/sluice.v1.ShuffleService/PushPartials`, 10*time.Second)

	_, err = sluicepb.NewControlServiceClient(dial(c.addr)).SubmitQuery(ctx, &sluicepb.SubmitQueryRequest{Spec: []byte("name: x")})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("submit without the token: got %v, want UNAUTHENTICATED", err)
	}
	c.driver.WaitForLog(`method=/sluice.v1.ControlService/SubmitQuery`, 10*time.Second)
	if err := c.driver.Stop(30 * time.Second); err != nil {
		t.Fatalf("driver did not stop cleanly: %v\n%s", err, c.logs())
	}
}
