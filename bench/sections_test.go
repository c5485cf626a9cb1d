package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
)

// needVersityGW skips without the S3-compatible test server (fails on CI).
func needVersityGW(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the S3 test server (versitygw), a process")
	}
	if _, err := s3test.Binary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// The counting proxy against the real server: a known sequence of store
// calls through it gives exactly the requests each call sends (a delete
// is a HEAD and a DELETE), in the area its key names, and the bytes
// written are at least the bodies sent.
func TestCountingProxyCountsEachOperationAsTheStoreSendsIt(t *testing.T) {
	needVersityGW(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := startVersityGW(ctx, filepath.Join(t.TempDir(), "data"), "proxytest")
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	px, err := startCountingProxy(g.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	opts := g.storeOptions(px.URL)
	st, err := objstore.NewS3(ctx, "proxytest", "", objstore.S3Options{Region: opts.S3.Region, Endpoint: opts.S3.Endpoint, AccessKeyID: opts.S3.AccessKeyID, SecretAccessKey: opts.S3.SecretAccessKey, PathStyle: opts.S3.PathStyle, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var written int64
	for i, k := range []string{"cp/a", "cp/b", "cp/c"} {
		data := bytes.Repeat([]byte{'x'}, 100*(i+1))
		written += int64(len(data))
		must(st.Put(ctx, k, data))
	}
	must(st.PutIfAbsent(ctx, "cp/d", []byte("d")))
	written++
	if err := st.PutIfAbsent(ctx, "cp/d", []byte("e")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent: %v", err)
	}
	written++
	for _, k := range []string{"cp/a", "cp/d"} {
		if _, err := st.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := st.List(ctx, "cp/")
	must(err)
	if len(keys) != 4 {
		t.Fatalf("listed %v", keys)
	}
	must(st.Delete(ctx, "cp/b"))
	// Multipart in another area: one completed upload of two parts, one
	// aborted.
	id, err := st.CreateMultipart(ctx, "sink/big")
	must(err)
	part := bytes.Repeat([]byte{'p'}, 5<<20) // S3's minimum for a part that is not the last
	p1, err := st.UploadPart(ctx, "sink/big", id, 1, part)
	must(err)
	p2, err := st.UploadPart(ctx, "sink/big", id, 2, []byte("tail"))
	must(err)
	must(st.CompleteMultipart(ctx, "sink/big", id, []objstore.Part{p1, p2}))
	id2, err := st.CreateMultipart(ctx, "sink/gone")
	must(err)
	must(st.AbortMultipart(ctx, "sink/gone", id2))

	got := px.counts()
	want := map[string]map[string]int64{
		"cp":   {opPut: 3, opPutIfAbsent: 2, opGet: 2, opList: 1, opHead: 1, opDelete: 1},
		"sink": {opMultipartCreate: 2, opUploadPart: 2, opMultipartDone: 1, opMultipartAbort: 1},
	}
	for area, ops := range want {
		for op, n := range ops {
			if got.Requests[area][op] != n {
				t.Errorf("%s %s: %d requests, want %d", area, op, got.Requests[area][op], n)
			}
		}
		for op, n := range got.Requests[area] {
			if ops[op] == 0 && n != 0 {
				t.Errorf("%s %s: %d requests, want none", area, op, n)
			}
		}
	}
	for area := range got.Requests {
		if want[area] == nil {
			t.Errorf("requests in unexpected area %q: %v", area, got.Requests[area])
		}
	}
	if got.Bytes["cp"] < written {
		t.Errorf("cp: %d bytes written counted, the bodies were %d", got.Bytes["cp"], written)
	}
	if sink := int64(len(part)) + 4; got.Bytes["sink"] < sink {
		t.Errorf("sink: %d bytes written counted, the parts were %d", got.Bytes["sink"], sink)
	}
}

func TestS3OpClassifiesPathStyleRequests(t *testing.T) {
	for _, c := range []struct {
		method, url string
		header      string
		want        string
	}{
		{"PUT", "/b/k/x", "", opPut},
		{"PUT", "/b/k/x", "If-None-Match", opPutIfAbsent},
		{"PUT", "/b/k/x?partNumber=1&uploadId=u", "", opUploadPart},
		{"POST", "/b/k/x?uploads", "", opMultipartCreate},
		{"POST", "/b/k/x?uploadId=u", "", opMultipartDone},
		{"POST", "/b?delete", "", opDeleteMany},
		{"DELETE", "/b/k/x?uploadId=u", "", opMultipartAbort},
		{"DELETE", "/b/k/x", "", opDelete},
		{"HEAD", "/b/k/x", "", opHead},
		{"GET", "/b?list-type=2&prefix=k/", "", opList},
		{"GET", "/b/?list-type=2", "", opList},
		{"GET", "/b?uploads", "", opListUploads},
		{"GET", "/b/k/x", "", opGet},
		{"PUT", "/b", "", opOther},
	} {
		r, err := http.NewRequest(c.method, "http://h"+c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.header != "" {
			r.Header.Set(c.header, "*")
		}
		if got := s3Op(r); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.url, got, c.want)
		}
	}
	r, _ := http.NewRequest("GET", "http://h/b?list-type=2&prefix=checkpoint/offsets/", nil)
	if a := s3Area(r); a != "checkpoint" {
		t.Errorf("area of a listing under checkpoint/: %q", a)
	}
}

// The tile on the S3-compatible server: every row is read, and each data
// batch writes its commit (a conditional PUT in the checkpoint) and bytes.
func TestS3RequestsPerBatchOnTheTile(t *testing.T) {
	needVersityGW(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const rows, batches = 6000, 3
	r, err := runS3Requests(ctx, t.TempDir(), rows, batches, 50, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var read int64
	data := 0
	for _, b := range r.PerBatch {
		read += b.Rows
		if b.NoData {
			continue
		}
		data++
		if b.Counts.Requests["checkpoint"][opPutIfAbsent] < 1 || b.Counts.Bytes["checkpoint"] <= 0 {
			t.Errorf("batch %d: checkpoint requests %v, bytes %d: no commit written", b.BatchID, b.Counts.Requests["checkpoint"], b.Counts.Bytes["checkpoint"])
		}
	}
	if read != rows || data != batches {
		t.Errorf("read %d rows in %d data batches, want %d in %d", read, data, rows, batches)
	}
}

// A mode that fails or panics is recorded in the report with its error,
// and the modes after it still run and report.
func TestReportRecordsAFailedModeAndRunsTheRest(t *testing.T) {
	saved := modes
	defer func() { modes = saved }()
	modes = []Mode{
		{Name: "broken", Run: func(context.Context, *ModeEnv) (*Section, error) {
			return &Section{Title: "Broken"}, errors.New("the broken mode's own error")
		}},
		{Name: "panicky", Run: func(context.Context, *ModeEnv) (*Section, error) {
			panic("the panicky mode's panic")
		}},
		{Name: "fine", Run: func(_ context.Context, e *ModeEnv) (*Section, error) {
			return &Section{Title: "Fine section", Text: "ran after the failure",
				Rows:    []Row{{Name: "fine row", Value: "42"}},
				Targets: []Target{{Name: "fine target", Want: "≥ 1", Measured: "42", Status: "met"}},
				Plots:   []Plot{{File: "fine.png", Title: "fine", Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{3, 4}}}}},
				Table:   &Table{Header: []string{"a", "b"}, Rows: [][]string{{"1", "2"}}}}, nil
		}},
	}
	rep := t.TempDir()
	err := run(context.Background(), config{only: "broken,panicky,fine", report: rep, dir: t.TempDir(), set: map[string]bool{}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("run: %v, want the broken mode's failure", err)
	}
	md, err := os.ReadFile(filepath.Join(rep, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Failures", "the broken mode's own error", "**panicky**", "panic: the panicky mode's panic", "## Fine section", "ran after the failure", "| fine row | 42 |", "| fine target | ≥ 1 | 42 | met |", "![fine](fine.png)", "| a | b |", pebbleTargetName + " | ≤ 1024 MiB peak RSS in every phase | – | not measured"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rep, "fine.png")); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("fine.png: %v", err)
	}
}

// Every -quick entry names a flag, and -only refuses a name it does not
// know (before running anything).
func TestQuickSizesNameFlagsAndOnlyRefusesUnknownNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	out, err := exec.Command("go", "run", ".", "-quick", "-only", "no-such-measurement").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown measurement "no-such-measurement"`) {
		t.Fatalf("go run . -quick -only no-such-measurement: %v\n%s", err, out)
	}
}

// The state section over two small sizes: every phase holds every group
// (runState checks the rows against the groups written), and the 10 M
// target is not claimed from smaller runs.
func TestStateSectionAtSmallSizes(t *testing.T) {
	c := config{dir: "", state: StateConfig{Groups: []int{2000, 6000}, Batch: 2500, MemLimit: "512MiB", ValueBytes: 24, MemoryToo: true}}
	sec, err := runStateMode(context.Background(), &ModeEnv{Config: &c, Dir: t.TempDir(), Out: io.Discard, Set: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Table.Rows) != 6 {
		t.Errorf("%d table rows, want 3 phases × 2 sizes", len(sec.Table.Rows))
	}
	if len(sec.Targets) != 1 || sec.Targets[0].Status != "not measured" || !strings.Contains(sec.Targets[0].Measured, "only up to 6000 groups") {
		t.Errorf("targets %+v", sec.Targets)
	}
}

func buildBinaries(t *testing.T) (driver, executor string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the driver and the executor")
	}
	ctx := context.Background()
	dir := t.TempDir()
	d, err := buildDriver(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := buildExecutor(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return d, e
}

// Executor kills on real processes: each kill lands mid-batch, the batch
// commits afterwards, and the drained run read exactly the rows written
// (runExecutorRecovery checks that against the files it wrote).
func TestExecutorKillsLoseNoRows(t *testing.T) {
	driver, executor := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := runExecutorRecovery(ctx, driver, executor, filepath.Join(t.TempDir(), "er"), 2, 20_000, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kills != 2 || len(r.KillToCommit) != 2 || len(r.KillAt) != 2 {
		t.Fatalf("%+v", r)
	}
	for i, k := range r.KillAt {
		// The killed batch committed after the kill.
		if r.KillToCommit[i] <= 0 || k <= 0 {
			t.Errorf("kill %d at %.3f s, kill → commit %.1f ms", i, k, r.KillToCommit[i])
		}
	}
	// One commit per file, and maybe a final no-data batch, numbered from 0.
	const files = 2*2 + 4
	if n := len(r.CommitAt); n != files && n != files+1 {
		t.Errorf("%d commits seen, want one per file (%d) and maybe a final no-data batch", n, files)
	}
	for i := range ids.BatchID(len(r.CommitAt)) {
		if _, ok := r.CommitAt[i]; !ok {
			t.Errorf("commit %d not seen (commits seen: %v)", i, r.CommitAt)
		}
	}
}

// Backlogs on kfake: the driver reads every record of each size, and a
// size that cannot fit in memory is skipped and says why.
func TestBacklogReadsEveryRecordAndSkipsWhatCannotFit(t *testing.T) {
	driver, _ := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := config{kafka: KafkaConfig{Partitions: 4, Driver: driver}}
	e := &ModeEnv{Config: &c, Dir: t.TempDir(), Out: io.Discard, Driver: func(context.Context) (string, error) { return driver, nil }}
	brs, err := runBacklog(ctx, e, []int{3000, 9000, 1 << 40}, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(brs) != 3 {
		t.Fatalf("%+v", brs)
	}
	for _, br := range brs[:2] {
		if len(br.Runs) != 1 || br.Runs[0].InputRows != int64(br.Records) || br.Runs[0].MaxRSSKiB <= 0 {
			t.Errorf("backlog %d: %+v", br.Records, br.Runs)
		}
	}
	if brs[2].Skipped == "" || len(brs[2].Runs) != 0 {
		t.Errorf("a backlog of 2^40 records ran: %+v", brs[2])
	}
}

// Bytes per open group: each size's open groups are exactly the
// (window, course) pairs the reference counts over the same events (all
// open: a minute of event time closes nothing), and a heap profile of the
// largest size is written when asked.
func TestGroupsOpenGroupsEqualTheReferencesWindows(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "heap.pprof")
	g, err := runGroups(context.Background(), []int{500, 3000}, 2, dir, profile, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append([]GroupsRun{g.Base}, g.Runs...) {
		rows, gopts := groupsOptions(r.Courses)
		ref, err := refGenerator(fairRef, gopts, rows, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r.OpenGroups != int64(len(ref.Counts)) {
			t.Errorf("%d courses: %d open groups, the reference counts %d windows", r.Courses, r.OpenGroups, len(ref.Counts))
		}
	}
	if len(g.Runs) != 2 || g.BytesPerGroup != g.Runs[1].BytesPerGroup {
		t.Errorf("runs %+v, bytes per group %v", g.Runs, g.BytesPerGroup)
	}
	if _, err := os.Stat(profile); err != nil || g.HeapProfile != profile {
		t.Errorf("heap profile %q: %v", g.HeapProfile, err)
	}
}

// The 10 M-group target: met or missed on the largest run's worst pebble
// phase (write or restore, not the in-memory contrast), with the gap.
func TestPebbleTargetFromTheLargestRun(t *testing.T) {
	c := StateConfig{Groups: []int{1_000_000, 10_000_000}, Batch: 250_000, MemLimit: "512MiB", ValueBytes: 24}
	phases := func(write, restore int64) []StatePhase {
		return []StatePhase{
			{Phase: "write", Groups: 1_000_000, PeakRSSKiB: 200 << 10, SnapBytes: 49 << 20},
			{Phase: "restore", Groups: 1_000_000, PeakRSSKiB: 50 << 10, SnapBytes: 49 << 20, LocalBytes: 13 << 20},
			{Phase: "write", Groups: 10_000_000, PeakRSSKiB: write << 10, SnapBytes: 486 << 20},
			{Phase: "restore", Groups: 10_000_000, PeakRSSKiB: restore << 10, SnapBytes: 486 << 20, LocalBytes: 130 << 20},
			{Phase: "restore-memory", Groups: 10_000_000, PeakRSSKiB: 3000 << 10, SnapBytes: 486 << 20},
		}
	}
	met := stateSection(c, phases(260, 108)).Targets[0]
	if met.Status != "met" || met.Measured != "260 MiB at 10000000 groups" || met.Gap != "764 MiB under" {
		t.Errorf("met: %+v", met)
	}
	missed := stateSection(c, phases(300, 1100)).Targets[0]
	if missed.Status != "missed" || missed.Gap != "76 MiB over" || missed.Why == "" {
		t.Errorf("missed: %+v", missed)
	}
	sec := stateSection(c, phases(260, 108))
	if len(sec.Table.Rows) != 5 || sec.Table.Rows[2][6] != "7" { // (260−200) MiB / 9 M groups
		t.Errorf("rows %v", sec.Table.Rows)
	}
}
