package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/demo"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// TestMain lets the tests run this test binary as the driver binary
// (SLUICE_DRIVER_MAIN=1), so they see real exit codes, stdout and stderr.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_DRIVER_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// runDriver runs the driver with args in dir.
func runDriver(t *testing.T, dir string, args ...string) result {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the driver as a process")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_DRIVER_MAIN=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run driver %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func (r result) expect(t *testing.T, code int, stderrHas ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			t.Fatalf("stderr does not say %q:\n%s", s, r.stderr)
		}
	}
}

// labSpec is examples/tile-file.yaml, read from the repository so the test
// follows the example.
func labSpec(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("../../examples/tile-file.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "q.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		out = append(out, strings.TrimPrefix(p, dir))
		return err
	})
	return out
}

// The README's lab, with the messages a new user sees at each step.
func TestCLILab(t *testing.T) {
	dir := t.TempDir()
	labSpec(t, dir)

	// No input directory yet: refused, and nothing is created (not the
	// checkpoint, not the --progress-json file).
	before := entries(t, dir)
	runDriver(t, dir, "run", "-f", "q.yaml", "--progress-json", "p.json").expect(t, 1,
		`error: source.file.path: "./lab/in" is not a readable directory: it does not exist`)
	if after := entries(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("a refused run created files: before %v, after %v", before, after)
	}

	write(t, filepath.Join(dir, "lab/in/001.jsonl"),
		`{"event_id":"e1","course_id":"c1","lesson_id":"l1","event_time":"2026-03-02T09:01:00Z"}`,
		`not json`,
		`{"event_id":"e2","course_id":"c1","lesson_id":"l2","event_time":"2026-03-02T09:03:30Z"}`)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0,
		"batch 0: 3 rows read (2 good, 1 malformed)",
		"malformed records set aside in ./lab/checkpoint/bad_records/batch_id=0/")
	if _, err := os.Stat(filepath.Join(dir, "lab/checkpoint/bad_records/batch_id=0")); err != nil {
		t.Fatalf("the batch line names a bad-records directory that is not there: %v", err)
	}

	write(t, filepath.Join(dir, "lab/in/003.jsonl"), `{"event_id":"e3","course_id":"c1","lesson_id":"l1","event_time":"2026-03-02T09:31:00Z"}`)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0, "1 out")

	// Nothing new: one line saying so, with the watermark held.
	r := runDriver(t, dir, "run", "-f", "q.yaml")
	r.expect(t, 0, "nothing new", "watermark 2026-03-02T09:21:00Z")
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; n != 1 {
		t.Fatalf("a run with nothing new printed %d lines, want 1:\n%s", n, r.stderr)
	}

	r = runDriver(t, dir, "sink", "cat", "lab/course_activity_tile")
	r.expect(t, 0)
	want := `{"window_start":"2026-03-02T09:00:00Z","window_end":"2026-03-02T09:05:00Z","course_id":"c1","event_count":2}` + "\n"
	if r.stdout != want {
		t.Fatalf("sink cat printed\n%s\nwant\n%s", r.stdout, want)
	}

	r = runDriver(t, dir, "checkpoint", "inspect", "lab/checkpoint")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "last committed     3") {
		t.Fatalf("inspect:\n%s", r.stdout)
	}

	// The wrong path for each reader: a message and a non-zero exit.
	runDriver(t, dir, "sink", "cat", "lab/checkpoint").expect(t, 1,
		"sink lab/checkpoint: no _sink_log/ directory: not a Parquet sink", "it is a checkpoint: read it with driver checkpoint inspect")
	runDriver(t, dir, "checkpoint", "inspect", "lab/course_activity_tile").expect(t, 1,
		"checkpoint lab/course_activity_tile: no metadata file: not a checkpoint", "it is a Parquet sink: read it with driver sink cat")
	before = entries(t, dir)
	runDriver(t, dir, "sink", "cat", "lab/typo").expect(t, 1, "sink lab/typo: no such directory")
	runDriver(t, dir, "checkpoint", "inspect", "lab/typo").expect(t, 1, "checkpoint lab/typo: no such directory")
	runDriver(t, dir, "sink", "cat", "q.yaml").expect(t, 1, "sink q.yaml: not a directory")
	if after := entries(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("reading a wrong path created it: before %v, after %v", before, after)
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	runDriver(t, dir, "sink", "cat", "empty").expect(t, 1, "not a Parquet sink, or no batch has committed to it yet")
}

func TestCLIRefusesUnknownLogLevel(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--log-level", "verbose", "sink", "cat", "x"},
		{"run", "-f", "q.yaml", "--log-level", "trace"},
		{"checkpoint", "inspect", "x", "--log-level=warning"},
	} {
		runDriver(t, dir, args...).expect(t, 1, `for "--log-level" flag: not a level: use debug, info, warn, error`)
	}
	runDriver(t, dir, "--log-level", "WARN", "sink", "cat", "nowhere").expect(t, 1, "no such directory")
}

func TestCLIUsageErrors(t *testing.T) {
	dir := t.TempDir()
	runDriver(t, dir, "run").expect(t, 1, "run: -f QUERY.yaml is required")
	runDriver(t, dir, "run", "-f", "missing.yaml").expect(t, 1, "load query", "missing.yaml")
	runDriver(t, dir, "sink", "cat").expect(t, 1, "accepts 1 arg(s), received 0")
	runDriver(t, dir, "nosuch").expect(t, 1, `unknown command "nosuch"`)
	write(t, filepath.Join(dir, "bad.yaml"), "name: Bad_Name")
	runDriver(t, dir, "run", "-f", "bad.yaml").expect(t, 1, `name: "Bad_Name" must match [a-z0-9-]+`)
}

func TestProductionFlagsHelpSaysWhatTheyAllow(t *testing.T) {
	r := runDriver(t, t.TempDir(), "run", "--help")
	r.expect(t, 0)
	for _, s := range []string{"environment: production", "--allow-first-start", "first start", "--allow-replay", "intended replay"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("run --help does not say %q:\n%s", s, r.stdout)
		}
	}
}

func TestDemoBannerExplainsTheOldFirstWindows(t *testing.T) {
	gen := demo.Events()
	for _, src := range []query.Source{{Generator: &gen}, {Kafka: &query.KafkaSource{BootstrapServers: "x:1", Subscribe: demo.Topic}}} {
		var b bytes.Buffer
		announce(&b, demo.Spec(t.TempDir(), src), "test", "http://127.0.0.1:8080/")
		for _, want := range []string{"first windows printed are about 2h0m0s older than the ones after them", "0.2% of events", "batch 0 has no watermark yet",
			"demo: status page http://127.0.0.1:8080/ (Prometheus metrics at http://127.0.0.1:8080/metrics)"} {
			if !strings.Contains(b.String(), want) {
				t.Fatalf("banner does not say %q:\n%s", want, b.String())
			}
		}
	}
}

// The production guards take a ticket; a run recording one shows it in
// checkpoint inspect, with who and when.
func TestCLIApprovalInCheckpointInspect(t *testing.T) {
	dir := t.TempDir()
	labSpec(t, dir)
	runDriver(t, dir, "run", "-f", "q.yaml", "--allow-first-start").expect(t, 1,
		"the approval needs its ticket: write --allow-first-start=TICKET")
	runDriver(t, dir, "run", "--allow-replay", "-f", "q.yaml").expect(t, 1,
		"write --allow-replay=TICKET")
	write(t, filepath.Join(dir, "lab/in/001.jsonl"),
		`{"event_id":"e1","course_id":"c1","lesson_id":"l1","event_time":"2026-03-02T09:01:00Z"}`)
	runDriver(t, dir, "run", "-f", "q.yaml", "--allow-first-start=CHG-1234", "--approved-by", "alice@ops").expect(t, 0)
	r := runDriver(t, dir, "checkpoint", "inspect", "lab/checkpoint")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "approval           first-start: ticket CHG-1234, by alice@ops, at 20") {
		t.Fatalf("inspect does not show the approval:\n%s", r.stdout)
	}
	r = runDriver(t, dir, "checkpoint", "inspect", "lab/checkpoint", "--json")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, `"ticket": "CHG-1234"`) || !strings.Contains(r.stdout, `"by": "alice@ops"`) {
		t.Fatalf("inspect --json:\n%s", r.stdout)
	}
}

// driver replay writes the stopped query's spec with the new checkpoint and
// starting offsets, and refuses what would not be a replay.
func TestCLIReplayWritesTheSpec(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/tile-kafka.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lab := strings.NewReplacer("environment: production", "environment: lab",
		"s3://warehouse/course_activity_tile/", "out", "s3://checkpoints/prod/course-activity-tile/", "cp1").Replace(string(b))
	write(t, filepath.Join(dir, "q.yaml"), lab)
	offsets := `{"learning.progress":{"0":1500,"1":-2}}`

	runDriver(t, dir, "replay", "-f", "q.yaml", "--checkpoint", "cp2", "--starting-offsets", offsets, "--dry-run").expect(t, 2, "--ticket is required")
	runDriver(t, dir, "replay", "-f", "q.yaml", "--checkpoint", "cp1", "--starting-offsets", offsets, "--ticket", "INC-9", "--dry-run").expect(t, 2, "is the query's current checkpointLocation")
	if err := os.Rename(filepath.Join(dir, "q.yaml"), filepath.Join(dir, "k.yaml")); err != nil {
		t.Fatal(err)
	}
	labSpec(t, dir) // q.yaml: the file source
	runDriver(t, dir, "replay", "-f", "q.yaml", "--checkpoint", "cp2", "--starting-offsets", offsets, "--ticket", "INC-9", "--dry-run").expect(t, 2, "does not read Kafka")

	// A checkpoint that exists is not a replay's new one.
	st, err := objstore.NewFS(filepath.Join(dir, "used"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.New(st).CreateMetadata(context.Background(), &checkpoint.Metadata{Name: "other", QueryID: "id-1"}); err != nil {
		t.Fatal(err)
	}
	runDriver(t, dir, "replay", "-f", "k.yaml", "--checkpoint", "used", "--starting-offsets", offsets, "--ticket", "INC-9", "--dry-run").expect(t, 2, "already holds query other's checkpoint")

	r := runDriver(t, dir, "replay", "-f", "k.yaml", "--checkpoint", "cp2", "--starting-offsets", offsets, "--ticket", "INC-9", "--approved-by", "alice@ops", "--dry-run")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "replay spec written to k.replay.yaml") {
		t.Fatalf("stdout: %s", r.stdout)
	}
	got, err := query.Load(filepath.Join(dir, "k.replay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got.CheckpointLocation != "cp2" || got.Source.Kafka.StartingOffsets != offsets || got.Name != "course-activity-tile" {
		t.Fatalf("replay spec: checkpoint %q, startingOffsets %q", got.CheckpointLocation, got.Source.Kafka.StartingOffsets)
	}
	text, _ := os.ReadFile(filepath.Join(dir, "k.replay.yaml"))
	if !strings.Contains(string(text), "ticket INC-9, approved by alice@ops") {
		t.Fatalf("the replay spec does not record its ticket:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "cp2")); err == nil {
		t.Fatal("a dry run created the new checkpoint")
	}
}
