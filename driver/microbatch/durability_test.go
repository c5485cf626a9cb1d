package microbatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/rewrite"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// Two drivers on one checkpoint on S3: the first pauses mid-batch, the
// second takes over, re-runs the batch and finishes; when the first resumes
// its next log write loses and it stops with ErrFenced, committing nothing.
func TestSecondDriverOnSameCheckpointFencesTheFirst(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	events := tiletest.Events(81, 4000, 300*time.Millisecond, 3*time.Minute, 5)
	if err := tiletest.WriteFiles(in, events, 500); err != nil {
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, srv.URI("fence", "out/"), srv.URI("fence", "cp/"))
	spec.Source.File.MaxFilesPerTrigger = 2
	opts := microbatch.Options{Store: objstore.Options{S3: srv.Options("fence")}}

	paused, release := make(chan struct{}), make(chan struct{})
	aOpts := opts
	aOpts.Hook = func(point string, batch ids.BatchID) {
		if point == "before-sink-commit" && batch == 1 {
			close(paused)
			<-release
		}
	}
	a, err := microbatch.Build(context.Background(), spec, aOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var aErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); aErr = a.Run(context.Background(), nil) }()
	<-paused

	progress := run(t, spec, opts)
	if !progress[0].Rerun || progress[0].BatchID != 1 {
		t.Fatalf("second driver should re-run batch 1 as logged, started with %s", progress[0].Line())
	}
	close(release)
	wg.Wait()
	var fe *checkpoint.FencedError
	if !errors.Is(aErr, checkpoint.ErrFenced) || !errors.As(aErr, &fe) || fe.Batch != 1 || fe.Object != "commits/1" {
		t.Fatalf("first driver should be fenced at commits/1, got %v", aErr)
	}
	store := srv.Store(t, "fence", "out/")
	for _, read := range []func(context.Context, objstore.Store) ([]query.Column, []row.Row, error){parquet.ReadAllFiles, parquet.ReadCommitted} {
		cols, rows, err := read(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := tiletest.FromRows(cols, rows)
		if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), got); d != "" {
			t.Fatalf("output after fencing differs from the oracle:\n%s", d)
		}
	}
}

// The object-store writes of a run, as a golden trace: a change to the
// commit order is a reviewable diff.
func TestBatchWriteTraceMatchesGolden(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"), ev("e2", "c2", "2026-03-02T09:02:00Z"))
	writeLines(t, filepath.Join(in, "002.jsonl"), ev("e3", "c1", "2026-03-02T09:31:00Z"))
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 1
	var mu sync.Mutex
	var trace []string
	point := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	opts := microbatch.Options{
		WrapStore: func(role string, s objstore.Store) objstore.Store {
			return &tracing{Store: s, role: role, emit: point}
		},
		Hook:        func(p string, b ids.BatchID) { point(fmt.Sprintf("-- %s %d", p, b)) },
		Parallelism: 1,
	}
	progress := run(t, spec, opts)
	got := strings.Join(normalizeTrace(trace, progress[0].ID), "\n") + "\n"
	golden := filepath.Join("testdata", "write_trace.golden")
	if rewrite.Enabled() {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("write trace changed (run go test ./driver/microbatch -run Trace -rewrite and review the diff):\n%s", got)
	}
}

// tracing records writes (not reads) as they happen.
type tracing struct {
	objstore.Store
	role string
	emit func(string)
}

func (s *tracing) Put(ctx context.Context, key string, data []byte) error {
	err := s.Store.Put(ctx, key, data)
	s.emit(fmt.Sprintf("%s put %s", s.role, key))
	return err
}

func (s *tracing) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	s.emit(fmt.Sprintf("%s put-if-absent %s", s.role, key))
	return err
}

func (s *tracing) Delete(ctx context.Context, key string) error {
	err := s.Store.Delete(ctx, key)
	s.emit(fmt.Sprintf("%s delete %s", s.role, key))
	return err
}

// The multipart calls are writes too; passing them on keeps the sink's
// files staged until commit, as without the tracer.

func (s *tracing) CreateMultipart(ctx context.Context, key string) (string, error) {
	id, err := s.Store.(objstore.Multipart).CreateMultipart(ctx, key)
	s.emit(fmt.Sprintf("%s create-multipart %s", s.role, key))
	return id, err
}

func (s *tracing) UploadPart(ctx context.Context, key, uploadID string, n int, data []byte) (objstore.Part, error) {
	p, err := s.Store.(objstore.Multipart).UploadPart(ctx, key, uploadID, n, data)
	s.emit(fmt.Sprintf("%s upload-part %s", s.role, key))
	return p, err
}

func (s *tracing) CompleteMultipart(ctx context.Context, key, uploadID string, parts []objstore.Part) error {
	err := s.Store.(objstore.Multipart).CompleteMultipart(ctx, key, uploadID, parts)
	s.emit(fmt.Sprintf("%s complete-multipart %s", s.role, key))
	return err
}

func (s *tracing) AbortMultipart(ctx context.Context, key, uploadID string) error {
	err := s.Store.(objstore.Multipart).AbortMultipart(ctx, key, uploadID)
	s.emit(fmt.Sprintf("%s abort-multipart %s", s.role, key))
	return err
}

// Listing staged uploads is a read: passed on, not traced, so that on the
// filesystem the sink writes no pending-upload records, as without the
// tracer.

func (s *tracing) ListsStaged() bool {
	_, ok := objstore.StagedListerOf(s.Store)
	return ok
}

func (s *tracing) ListStaged(ctx context.Context, prefix string) ([]objstore.StagedUpload, error) {
	l, ok := objstore.StagedListerOf(s.Store)
	if !ok {
		return nil, objstore.ErrStagedListUnsupported
	}
	return l.ListStaged(ctx, prefix)
}

// pendingRecord matches a sink pending-upload record; its attempt id is
// random.
var pendingRecord = regexp.MustCompile(`(_sink_pending/\d+/\d{4})-[0-9a-f]+\.json`)

// normalizeTrace replaces the query id and sorts runs of task writes
// between driver points (their order across parallel tasks is free).
// stateFile matches a state file name's attempt (a hash of the run id,
// random per run).
var stateFile = regexp.MustCompile(`(state/\d+/\d+/\d+)-[0-9a-f]{16}\.(delta|snapshot)`)

func normalizeTrace(trace []string, queryID string) []string {
	var out, run []string
	flush := func() {
		sort.Strings(run)
		out = append(out, run...)
		run = nil
	}
	for _, l := range trace {
		l = strings.ReplaceAll(l, queryID, "QUERYID")
		l = pendingRecord.ReplaceAllString(l, "${1}-ATTEMPT.json")
		l = stateFile.ReplaceAllString(l, "${1}-STATEATTEMPT.${2}")
		taskPoint := strings.HasPrefix(l, "-- map-done") || strings.HasPrefix(l, "-- state-commit")
		if strings.HasPrefix(l, "checkpoint put-if-absent") || strings.HasPrefix(l, "sink put-if-absent") || strings.HasPrefix(l, "--") && !taskPoint {
			flush()
			out = append(out, l)
			continue
		}
		run = append(run, l)
	}
	flush()
	return out
}

// A fault injected on each write of a batch: the batch is retried or the
// query fails loudly; a batch is never committed with a write missing, and
// a restart without the fault produces the exact output.
func TestFaultOnEachWriteOfABatchNeverCommitsAMissingWrite(t *testing.T) {
	base := t.TempDir()
	in := filepath.Join(base, "in")
	events := tiletest.Events(91, 3000, 400*time.Millisecond, 2*time.Minute, 4)
	if err := tiletest.WriteFiles(in, events, 500); err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	// Find batch 2's writes from a clean run.
	var mu sync.Mutex
	var keys []string
	clean := tiletest.Spec(in, filepath.Join(base, "out0"), filepath.Join(base, "cp0"))
	clean.Source.File.MaxFilesPerTrigger = 2
	batch := ids.BatchID(-1)
	run(t, clean, microbatch.Options{
		Hook: func(p string, b ids.BatchID) {
			if p == "after-offsets" {
				mu.Lock()
				batch = b
				mu.Unlock()
			}
		},
		WrapStore: func(role string, s objstore.Store) objstore.Store {
			return &tracing{Store: s, role: role, emit: func(l string) {
				mu.Lock()
				defer mu.Unlock()
				if (batch == 2 || strings.HasSuffix(l, "offsets/2")) && !strings.HasSuffix(l, "offsets/3") {
					keys = append(keys, l)
				}
			}}
		},
	})
	if len(keys) < 4 {
		t.Fatalf("batch 2 wrote only %v", keys)
	}
	for i, k := range keys {
		f := strings.Fields(k)
		role, key := f[0], f[2]
		op := map[string]string{"put": objstore.OpPut, "put-if-absent": objstore.OpPutIfAbsent, "delete": objstore.OpDelete,
			"create-multipart": objstore.OpCreateMultipart, "upload-part": objstore.OpUploadPart,
			"complete-multipart": objstore.OpCompleteMultipart, "abort-multipart": objstore.OpAbortMultipart}[f[1]]
		var keyRe *regexp.Regexp
		switch {
		case strings.Contains(key, "part-") && strings.Contains(key, ".parquet"):
			keyRe = parquetFileOfBatch(2) // query id differs per run
		case pendingRecord.MatchString(key):
			keyRe = regexp.MustCompile(`^_sink_pending/2/`) // attempt ids are random
		case stateFile.MatchString(key):
			// The attempt in the name hashes the run id, random per run.
			keyRe = regexp.MustCompile("^" + regexp.QuoteMeta(stateFile.ReplaceAllString(key, "${1}-")) + `[0-9a-f]{16}\.` + regexp.QuoteMeta(stateFile.ReplaceAllString(key, "${2}")) + "$")
		}
		for _, persistent := range []bool{false, true} {
			if testing.Short() && persistent != (i%2 == 1) {
				continue // -short (the fast loop): one of the two faults per write, alternating
			}
			t.Run(fmt.Sprintf("%d-%s-%s-persistent=%v", i, role, f[2], persistent), func(t *testing.T) {
				dir := t.TempDir()
				spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
				spec.Source.File.MaxFilesPerTrigger = 2
				rule := objstore.FaultRule{Op: op, Key: key}
				if keyRe != nil {
					rule.Key, rule.KeyRegexp = "", keyRe
				}
				if !persistent {
					rule.Limit = 1
				}
				opts := microbatch.Options{WrapStore: func(r string, s objstore.Store) objstore.Store {
					if r != role {
						return s
					}
					return objstore.NewFaulty(s, rule)
				}}
				job, err := microbatch.Build(context.Background(), spec, opts)
				if err != nil {
					t.Fatal(err)
				}
				runErr := job.Run(context.Background(), nil)
				job.Close()
				cp, _ := objstore.NewFS(filepath.Join(dir, "cp"))
				if runErr != nil {
					if !errors.Is(runErr, objstore.ErrInjected) {
						t.Fatalf("query failed with something other than the injected fault: %v", runErr)
					}
					if _, err := cp.Get(context.Background(), "commits/2"); err == nil {
						t.Fatalf("batch 2 was committed although a write failed: %v", runErr)
					}
				} else if persistent {
					t.Fatalf("a persistent fault on %s did not fail the query", k)
				}
				run(t, spec, microbatch.Options{})
				if d := tiletest.Diff(want, sinkWindows(t, filepath.Join(dir, "out"), false)); d != "" {
					t.Fatalf("after the fault and a restart the output differs from the oracle:\n%s", d)
				}
			})
		}
	}
}

// parquetFileOfBatch matches any Parquet file batch b writes.
func parquetFileOfBatch(b int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`part-%05d-.*\.parquet$`, b))
}

// A production query on an object-store checkpoint refuses an empty
// checkpoint unless the start says it is a first start or a replay, so a
// lost checkpoint is loud, not a silent replay.
func TestProductionRefusesEmptyCheckpointUnlessFirstStartOrReplay(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
	spec := tiletest.Spec(in, srv.URI("prod", "out/"), srv.URI("prod", "cp/"))
	spec.Environment = query.Production
	opts := microbatch.Options{Store: objstore.Options{S3: srv.Options("prod")}}
	_, err := microbatch.Build(context.Background(), spec, opts)
	if !errors.Is(err, microbatch.ErrProductionGuard) || !strings.Contains(err.Error(), "--allow-first-start") {
		t.Fatalf("want a refusal naming --allow-first-start, got %v", err)
	}
	if _, err := srv.Store(t, "prod", "cp/").Get(context.Background(), "metadata"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("the refused start wrote metadata: %v", err)
	}
	opts.AllowFirstStart = true
	run(t, spec, opts)
	opts.AllowFirstStart = false
	run(t, spec, opts) // an existing checkpoint needs no flag
}
