package e2e

// The driver service with real processes: queries submitted through the
// CLI, a registry in the S3-compatible server, drivers SIGKILLed and
// restarted on other ports in fresh working directories, two drivers on
// one registry, stop and stop --now, SIGTERM, --queries-dir, and the CLI's
// messages and exit codes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// svc is one `driver serve` process of the service tests and its
// executors.
type svc struct {
	t         *testing.T
	driver    *Proc
	addr      string
	token     string
	env       []string
	executors []*Proc
}

func writeToken(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("svc-e2e-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startSvc starts `driver serve` on a free port with the given registry,
// in a fresh working directory, and n executors for it.
func startSvc(t *testing.T, token, registryURI string, env []string, executors int, extra ...string) *svc {
	t.Helper()
	s := &svc{t: t, addr: freePort(t), token: token, env: env}
	args := append([]string{"serve", "--listen", s.addr, "--token-file", token, "--registry", registryURI,
		"--heartbeat-timeout", "3s", "--lease-ttl", "3s", "--stop-timeout", "60s"}, extra...)
	s.driver = NewProc(t, "driver", bins.driver, args...).Env(env...)
	s.driver.Start()
	s.driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	for range executors {
		s.addExecutor()
	}
	return s
}

func (s *svc) addExecutor() *Proc {
	s.t.Helper()
	name := fmt.Sprintf("executor-%s-%d", s.addr, len(s.executors)+1)
	p := NewProc(s.t, name, bins.executor, "--driver", s.addr, "--token-file", s.token, "--data-dir", s.t.TempDir()).Env(s.env...)
	p.Start()
	s.executors = append(s.executors, p)
	return p
}

func (s *svc) logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- driver %s:\n%s", s.addr, s.driver.Logs())
	for _, e := range s.executors {
		fmt.Fprintf(&b, "--- %s:\n%s", e.name, e.Logs())
	}
	return b.String()
}

// cli runs a client command of the driver binary and returns its stdout,
// stderr and exit code.
func cli(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bins.driver, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("driver %v did not exit:\n%s%s", args, out.String(), errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// mustCLI runs a client command against s and requires exit 0.
func (s *svc) mustCLI(args ...string) string {
	s.t.Helper()
	out, errs, code := cli(s.t, s.env, append(args, "--server", s.addr, "--token-file", s.token)...)
	if code != 0 {
		s.t.Fatalf("driver %v: exit %d\n%s%s\n%s", args, code, out, errs, s.logs())
	}
	return out
}

type statusJSON struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Desired    string `json:"desired"`
	Generation int64  `json:"generation"`
	State      string `json:"state"`
	LastError  string `json:"lastError"`
	Latest     *struct {
		BatchID int64 `json:"batchId"`
		Rerun   bool  `json:"rerun"`
	} `json:"latest"`
}

func (s *svc) status(name string) statusJSON {
	s.t.Helper()
	var st statusJSON
	if err := json.Unmarshal([]byte(s.mustCLI("status", name, "-o", "json")), &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func waitUntil(t *testing.T, what string, timeout time.Duration, logs func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func registryAt(t *testing.T, uri string, opts objstore.Options) *registry.Registry {
	t.Helper()
	st, err := objstore.Open(context.Background(), uri, opts)
	if err != nil {
		t.Fatal(err)
	}
	return registry.New(st, registry.Options{})
}

// Two queries (files and Kafka) submitted through the CLI to a driver whose
// registry, checkpoints and sinks are on the S3-compatible server; the
// driver is SIGKILLed in the middle of a batch; a new driver on another
// port, in a fresh working directory, against the same registry, resumes
// both from their checkpoints and their outputs equal the oracle exactly
// once.
func TestServiceDriverKilledNewDriverElsewhereResumesEveryQuery(t *testing.T) {
	srv := s3test.Start(t)
	broker := kafkatest.Start(t)
	const topic = "learning.progress"
	broker.CreateTopic(topic, 3)
	kEvents := tiletest.Events(71, 6000, 150*time.Millisecond, 4*time.Minute, 7)
	recs := make([]*kgo.Record, len(kEvents))
	for i, e := range kEvents {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(e.JSON())}
	}
	broker.Produce(recs...)
	in, fileWant := tileFiles(t, 72, 6000, 250)

	files := s3Locations(srv, "files")
	kafka := s3Locations(srv, "kafka")
	fileSpec := tileSpec(in, files, 3)
	fileSpec.Name = "tile-files"
	kafkaSpec := tiletest.Spec("", kafka.Sink, kafka.Checkpoint)
	kafkaSpec.Name = "tile-kafka"
	kafkaSpec.Source.File = nil
	kafkaSpec.Source.Kafka = &query.KafkaSource{BootstrapServers: broker.Addr, Subscribe: topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 1000}
	regURI := srv.URI("control", "sluice/registry/")
	env := srv.Env()
	token := writeToken(t)

	// No executor yet: both queries are registered before any batch runs.
	first := startSvc(t, token, regURI, append(env, "SLUICE_FAULT=maps-done:3"), 0)
	for _, spec := range []query.Spec{fileSpec, kafkaSpec} {
		out := first.mustCLI("submit", "-f", writeSpec(t, spec))
		if !strings.Contains(out, "submitted") {
			t.Fatalf("submit said %q", out)
		}
	}
	list := first.mustCLI("list")
	if !strings.Contains(list, "tile-files") || !strings.Contains(list, "tile-kafka") {
		t.Fatalf("list:\n%s", list)
	}
	first.addExecutor()
	if err := first.driver.Wait(180 * time.Second); !killedBySignal(err) {
		t.Fatalf("the first driver was not killed at maps-done of batch 3 (exit %v)\n%s", err, first.logs())
	}
	for _, e := range first.executors {
		e.Kill()
	}

	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	second := startSvc(t, token, regURI, env, 2, "--exit-when-done", "--progress-json", progress)
	if err := second.driver.Wait(240 * time.Second); err != nil {
		t.Fatalf("the new driver failed: %v\n%s", err, second.logs())
	}
	if !strings.Contains(second.driver.Logs(), "acquired the driver lease") {
		t.Fatalf("the new driver did not take the lease:\n%s", second.driver.Logs())
	}
	if d := sinkDiff(t, files, fileWant); d != "" {
		t.Fatalf("tile-files differs from the oracle:\n%s\n%s", d, second.logs())
	}
	if d := sinkDiff(t, kafka, tiletest.Oracle(kEvents, 5*time.Minute, 10*time.Minute)); d != "" {
		t.Fatalf("tile-kafka differs from the oracle:\n%s\n%s", d, second.logs())
	}
	reruns := 0
	for _, p := range readProgress(t, progress) {
		if p.Rerun && p.BatchID == 3 {
			reruns++
		}
	}
	// The kill hits the first query to reach maps-done of batch 3; the
	// other may have logged its batch 3 by then too, and then re-runs it.
	if reruns < 1 || reruns > 2 {
		t.Fatalf("the new driver should re-run the killed batch 3 (and at most the other query's batch 3 in flight); re-runs of batch 3: %d", reruns)
	}
	// checkpoint inspect and sink cat reach the server through the S3
	// flags alone (no AWS_ENDPOINT_URL_S3 in the environment).
	var keysOnly []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL_S3=") {
			keysOnly = append(keysOnly, kv)
		}
	}
	out, errs, code := cli(t, keysOnly, "checkpoint", "inspect", files.Checkpoint, "--json", "--s3-endpoint", srv.Endpoint)
	if code != 0 || !strings.Contains(out, `"name":"tile-files"`) && !strings.Contains(out, `"name": "tile-files"`) {
		t.Fatalf("checkpoint inspect with --s3-endpoint: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, keysOnly, "sink", "cat", files.Sink, "--s3-endpoint", srv.Endpoint)
	if code != 0 || strings.Count(out, "\n") != len(fileWant) {
		t.Fatalf("sink cat with --s3-endpoint: exit %d, %d lines, want %d\n%s", code, strings.Count(out, "\n"), len(fileWant), errs)
	}
	recs2, err := registryAt(t, regURI, kafka.Store).List(context.Background())
	if err != nil || len(recs2) != 2 || recs2[0].Desired != registry.Running || recs2[1].Desired != registry.Running {
		t.Fatalf("registry after the run: %+v %v", recs2, err)
	}
}

// stop commits the batch in flight, then the query is STOPPED; submit
// resumes it; stop --now with a batch in flight abandons it, and the next
// start re-runs it as logged with no duplicate; SIGTERM of the driver
// leaves every desired state running.
func TestServiceStopResumeStopNowAndSIGTERM(t *testing.T) {
	in, want := tileFiles(t, 73, 8000, 100)
	l := localLocations(t, "q")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}
	specPath := writeSpec(t, spec)
	regDir := filepath.Join(t.TempDir(), "registry")
	token := writeToken(t)
	const name = "course-activity-tile"

	s := startSvc(t, token, regDir, nil, 1)
	if out := s.mustCLI("submit", "-f", specPath, "--wait"); !strings.Contains(out, "RUNNING") {
		t.Fatalf("submit --wait: %q", out)
	}
	if out := s.mustCLI("submit", "-f", specPath); !strings.Contains(out, "nothing changed") {
		t.Fatalf("the same spec again: %q", out)
	}
	waitUntil(t, "batch 3", 60*time.Second, s.logs, func() bool { st := s.status(name); return st.Latest != nil && st.Latest.BatchID >= 3 })
	out := s.mustCLI("stop", name)
	if !strings.Contains(out, "STOPPED") {
		t.Fatalf("stop: %q", out)
	}
	if p := pendingBatch(t, mustFS(t, l.Checkpoint)); p != nil {
		t.Fatalf("stop left batch %d uncommitted; it should finish the batch in flight", p.BatchID)
	}
	st := s.status(name)
	if st.Desired != "stopped" || st.State != "STOPPED" {
		t.Fatalf("after stop: %+v", st)
	}
	if out := s.mustCLI("submit", "-f", specPath); !strings.Contains(out, "resumed") {
		t.Fatalf("submit after stop: %q", out)
	}
	waitUntil(t, "a batch after the resume", 60*time.Second, s.logs, func() bool {
		st := s.status(name)
		return st.State == "RUNNING" && st.Latest != nil && st.Latest.BatchID > 3
	})

	// Freeze the only executor: the next batch is logged and cannot finish.
	exe := s.executors[0]
	if err := exe.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A batch logged just before the freeze may still commit (its tasks
	// were done); wait for one that stays uncommitted.
	var pending *checkpoint.OffsetEntry
	waitUntil(t, "a batch stuck in flight", 60*time.Second, s.logs, func() bool {
		p := pendingBatch(t, mustFS(t, l.Checkpoint))
		if p == nil {
			return false
		}
		time.Sleep(3 * time.Second)
		if q := pendingBatch(t, mustFS(t, l.Checkpoint)); q != nil && q.BatchID == p.BatchID {
			pending = q
			return true
		}
		return false
	})
	if out := s.mustCLI("stop", name, "--now"); !strings.Contains(out, "STOPPED") {
		t.Fatalf("stop --now: %q", out)
	}
	if p := pendingBatch(t, mustFS(t, l.Checkpoint)); p == nil || p.BatchID != pending.BatchID {
		t.Fatalf("stop --now should leave batch %d logged and uncommitted, pending is %v", pending.BatchID, p)
	}
	if err := exe.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("submit", "-f", specPath)
	waitUntil(t, "the re-run of the abandoned batch", 60*time.Second, s.logs, func() bool {
		return strings.Contains(s.driver.Logs(), fmt.Sprintf("batch %d (re-run)", pending.BatchID))
	})
	waitUntil(t, "the output to equal the oracle", 120*time.Second, s.logs, func() bool { return sinkDiff(t, l, want) == "" })
	checkLog(t, l.Checkpoint)

	// history lists every generation the CLI made, oldest first.
	var gens []struct {
		Generation int64  `json:"generation"`
		Change     string `json:"change"`
		Desired    string `json:"desired"`
		ChangedBy  string `json:"changedBy"`
		SpecSHA256 string `json:"specSha256"`
	}
	if err := json.Unmarshal([]byte(s.mustCLI("history", name, "-o", "json")), &gens); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for i, g := range gens {
		changes = append(changes, g.Change+"/"+g.Desired)
		if g.Generation != int64(i+1) || g.ChangedBy == "" || g.SpecSHA256 != gens[0].SpecSHA256 {
			t.Errorf("generation %d: %+v", i+1, g)
		}
	}
	if got, want := strings.Join(changes, " "), "submit/running stop/stopped resume/running stop-now/stopped resume/running"; got != want {
		t.Errorf("history: %s, want %s", got, want)
	}
	if table := s.mustCLI("history", name); !strings.Contains(table, "GEN") || strings.Count(table, "\n") != 6 {
		t.Errorf("history table:\n%s", table)
	}

	if err := s.driver.Stop(90 * time.Second); err != nil {
		t.Fatalf("SIGTERM: driver exit %v\n%s", err, s.logs())
	}
	if !strings.Contains(s.driver.Logs(), "released the driver lease") {
		t.Fatalf("the driver did not release the lease on SIGTERM:\n%s", s.driver.Logs())
	}
	rec, err := registryAt(t, regDir, objstore.Options{}).Get(context.Background(), name)
	if err != nil || rec.Desired != registry.Running {
		t.Fatalf("after SIGTERM the desired state is %q (%v), want running", rec.Desired, err)
	}
}

var standbyMsg = regexp.MustCompile(`standby`)

// Two drivers started at once on one registry: exactly one serves the CLI,
// the other is a standby; SIGKILL the active one and the standby takes over
// and runs the query to the oracle.
func TestServiceTwoDriversOneActiveStandbyTakesOver(t *testing.T) {
	in, want := tileFiles(t, 74, 8000, 100)
	l := localLocations(t, "q")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}
	regDir := filepath.Join(t.TempDir(), "registry")
	token := writeToken(t)
	a := startSvc(t, token, regDir, nil, 1)
	b := startSvc(t, token, regDir, nil, 1)
	var active, standby *svc
	waitUntil(t, "one active driver", 60*time.Second, func() string { return a.logs() + b.logs() }, func() bool {
		_, _, ca := cli(t, nil, "list", "--server", a.addr, "--token-file", token)
		_, errb, cb := cli(t, nil, "list", "--server", b.addr, "--token-file", token)
		switch {
		case ca == 0 && cb == 4 && standbyMsg.MatchString(errb):
			active, standby = a, b
		case cb == 0 && ca == 4:
			active, standby = b, a
		case ca == 0 && cb == 0:
			t.Fatalf("both drivers serve the registry\n%s%s", a.logs(), b.logs())
		}
		return active != nil
	})
	active.mustCLI("submit", "-f", writeSpec(t, spec), "--wait")
	waitUntil(t, "batch 2 on the active driver", 60*time.Second, active.logs, func() bool {
		return strings.Contains(active.driver.Logs(), "batch 2:")
	})
	if strings.Contains(standby.driver.Logs(), "batch ") {
		t.Fatalf("the standby ran batches:\n%s", standby.driver.Logs())
	}
	active.driver.Kill()
	waitUntil(t, "the standby to take over", 60*time.Second, standby.logs, func() bool {
		_, _, code := cli(t, nil, "list", "--server", standby.addr, "--token-file", token)
		return code == 0
	})
	waitUntil(t, "the output to equal the oracle", 180*time.Second, standby.logs, func() bool { return sinkDiff(t, l, want) == "" })
	if st := standby.status("course-activity-tile"); st.State != "RUNNING" {
		t.Fatalf("on the new active driver: %+v", st)
	}
	checkLog(t, l.Checkpoint)
}

// --queries-dir: a new file submits, a compatible change is applied, an
// incompatible one is refused ("new checkpoint required") while the old
// version keeps running, and a removed file stops nothing without --prune.
func TestServiceQueriesDir(t *testing.T) {
	in, _ := tileFiles(t, 75, 8000, 200)
	l := localLocations(t, "q")
	spec := tileSpec(in, l, 2)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(200 * time.Millisecond)}
	dir := t.TempDir()
	file := filepath.Join(dir, "tile.yaml")
	write := func(s query.Spec) {
		b, _ := json.Marshal(s)
		tmp := filepath.Join(dir, ".tmp")
		os.WriteFile(tmp, b, 0o644)
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(spec)
	token := writeToken(t)
	s := startSvc(t, token, filepath.Join(t.TempDir(), "registry"), nil, 1, "--queries-dir", dir)
	const name = "course-activity-tile"
	waitUntil(t, "the file's query to run", 60*time.Second, s.logs, func() bool {
		_, _, code := cli(t, nil, "status", name, "--server", s.addr, "--token-file", token)
		return code == 0 && s.status(name).State == "RUNNING"
	})
	changed := spec
	changed.Trigger.ProcessingTime = query.Duration(300 * time.Millisecond)
	write(changed)
	waitUntil(t, "the compatible change", 60*time.Second, s.logs, func() bool { st := s.status(name); return st.Generation == 2 && st.State == "RUNNING" })
	bad := changed
	bad.ShufflePartitions = 3
	write(bad)
	s.driver.WaitForLog("new checkpoint required", 60*time.Second)
	if st := s.status(name); st.Generation != 2 || st.State != "RUNNING" {
		t.Fatalf("after an incompatible change: %+v", st)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	s.driver.WaitForLog("file removed", 60*time.Second)
	if st := s.status(name); st.Desired != "running" || st.State != "RUNNING" {
		t.Fatalf("a removed file stopped its query without --prune: %+v", st)
	}
}

// Every client command against no server, a wrong token, an unknown query,
// a malformed spec: a one-line message and the documented exit code.
func TestServiceCLIErrorsAndExitCodes(t *testing.T) {
	token := writeToken(t)
	s := startSvc(t, token, filepath.Join(t.TempDir(), "registry"), nil, 0)
	waitUntil(t, "the driver to be active", 60*time.Second, s.logs, func() bool {
		_, _, code := cli(t, nil, "list", "--server", s.addr, "--token-file", token)
		return code == 0
	})
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	good := writeSpec(t, tileSpec(in, localLocations(t, "q"), 1))
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: Bad Name\nsource: {file: {path: /x}}\noutputMode: append\nsink: {console: {}}\ncheckpointLocation: /tmp/x\n"), 0o644)
	wrong := filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong, []byte("not-the-token\n"), 0o600)
	dead := freePort(t)

	commands := [][]string{
		{"submit", "-f", good}, {"stop", "nope"}, {"list"}, {"status", "nope"}, {"progress", "nope"}, {"history", "nope"},
	}
	for _, c := range commands {
		_, errs, code := cli(t, nil, append(c, "--server", dead, "--token-file", token)...)
		if code != 1 || !strings.Contains(errs, "no driver listening at "+dead) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v with no server: exit %d, %q", c, code, errs)
		}
		_, errs, code = cli(t, nil, append(c, "--server", s.addr, "--token-file", wrong)...)
		if code != 4 || !strings.Contains(errs, "wrong or missing cluster token") {
			t.Errorf("%v with a wrong token: exit %d, %q", c, code, errs)
		}
	}
	for _, c := range [][]string{{"stop", "nope"}, {"status", "nope"}, {"progress", "nope"}, {"history", "nope"}} {
		_, errs, code := cli(t, nil, append(c, "--server", s.addr, "--token-file", token)...)
		if code != 3 || !strings.Contains(errs, `no query named "nope"`) {
			t.Errorf("%v of an unknown query: exit %d, %q", c, code, errs)
		}
	}
	// A malformed spec: the messages driver run gives (every problem, one
	// per line), exit 2.
	run := NewProc(t, "driver run", bins.driver, "run", "-f", bad)
	run.Start()
	run.Wait(60 * time.Second)
	runMsg := strings.TrimSpace(run.Logs())
	if !strings.HasPrefix(runMsg, "error: ") {
		t.Fatalf("driver run of a malformed spec: %q", runMsg)
	}
	for _, c := range [][]string{{"submit", "-f", bad, "--server", s.addr, "--token-file", token}, {"contract", "-f", bad}} {
		_, errs, code := cli(t, nil, c...)
		if code != 2 || strings.TrimSpace(errs) != runMsg {
			t.Errorf("%v of a malformed spec: exit %d, %q; driver run says %q", c[0], code, errs, runMsg)
		}
	}
	if _, errs, code := cli(t, nil, "status"); code != 2 || !strings.Contains(errs, "arg") {
		t.Errorf("status without a name: exit %d, %q", code, errs)
	}
	// A production guard refusing: exit 4 with the guard's reason.
	prod := tileSpec(in, localLocations(t, "p"), 1)
	prod.Name, prod.Environment = "prod", query.Production
	_, errs, code := cli(t, nil, "submit", "-f", writeSpec(t, prod), "--server", s.addr, "--token-file", token)
	if code != 4 || !strings.Contains(errs, "refused") || !strings.Contains(errs, "object store") {
		t.Errorf("a production query on a local checkpoint: exit %d, %q", code, errs)
	}
}
