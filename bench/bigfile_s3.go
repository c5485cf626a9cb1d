package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/generator"
)

// One large object in the distributed path (-only bigfile-s3, in
// -report): one JSON-lines object of -bigfile-s3-events
// generator events (1 000 courses; 8 M events are about 760 MB) on the S3
// test server (versitygw on loopback), read with source.file.minPartitions
// -bigfile-s3-min-partitions (16), so a batch is that many byte ranges of
// the one object. Each round runs `driver run` (one process) and `driver
// serve --exit-when-done` with two `executor` processes on this machine,
// alternating which goes first, each timed from its first process's start
// to the driver's exit; both must read every event. The figure is the
// cluster's throughput over the one process's (target: at least 0.7 on
// two cores: each split on an executor should read only its own bytes).
// Checkpoint and sink are local directories (the processes share the
// machine).

// BigFileS3Result is the measurement's rounds.
type BigFileS3Result struct {
	Events, Bytes    int64
	MinPartitions    int
	UploadSecs       float64
	OneSecs, Cluster []float64
	Ratio            []float64 // cluster throughput / one process's
	RunEnded         []string  `json:",omitempty"`
}

const bigFileS3Bucket = "bigfile"

const bigFileS3TargetName = "one large object on S3 (minPartitions 16): driver serve + 2 executor processes / one driver run (throughput)"

// bigFileS3PartSize is the multipart upload's part size.
const bigFileS3PartSize = 16 << 20

func runBigFileS3Mode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config
	dir := filepath.Join(e.Dir, "bigfile-s3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sec := &Section{Title: "One large object in the distributed path"}
	target := Target{Name: bigFileS3TargetName, Want: "≥ 0.70", Status: "not measured"}
	sec.Targets = []Target{target}
	driver, err := e.Driver(ctx)
	if err != nil {
		return sec, err
	}
	executor, err := e.Executor(ctx)
	if err != nil {
		return sec, err
	}
	g, err := startVersitygw(ctx, dir)
	if err != nil {
		return sec, err
	}
	defer g.stop()
	if err := os.MkdirAll(filepath.Join(g.dataDir, bigFileS3Bucket), 0o755); err != nil { // a bucket is a directory
		return sec, err
	}
	st, err := objstore.NewS3(ctx, bigFileS3Bucket, "in/", g.opts)
	if err != nil {
		return sec, err
	}
	res := &BigFileS3Result{Events: c.bigS3Events, MinPartitions: c.bigS3MinPartitions}
	sec.Data = res
	t := time.Now()
	if res.Bytes, err = uploadBigObject(ctx, st, "big.jsonl", c.bigS3Events); err != nil {
		return sec, err
	}
	res.UploadSecs = time.Since(t).Seconds()
	fmt.Fprintf(e.Out, "bigfile-s3: uploaded %d events, %.0f MB, in %.1f s\n", res.Events, float64(res.Bytes)/1e6, res.UploadSecs)
	env := []string{
		"AWS_ENDPOINT_URL_S3=" + g.opts.Endpoint, "AWS_ACCESS_KEY_ID=" + g.opts.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + g.opts.SecretAccessKey, "AWS_REGION=" + g.opts.Region,
	}
	src := query.Source{
		File:   &query.FileSource{Path: "s3://" + bigFileS3Bucket + "/in/", MinPartitions: c.bigS3MinPartitions},
		Schema: query.GeneratorSchema(),
	}
	writeSpec := func(runDir string) (string, error) {
		b, err := json.MarshalIndent(tileSpec(src, runDir, query.Trigger{AvailableNow: true}), "", "  ")
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return "", err
		}
		f := filepath.Join(runDir, "query.json")
		return f, os.WriteFile(f, b, 0o644)
	}
	table := &Table{Header: []string{"round", "driver run, s", "driver serve + 2 executors, s", "cluster / one process"}}
	for r := range c.bigS3Runs {
		var one, cl time.Duration
		oneDir, clDir := filepath.Join(dir, fmt.Sprintf("one-%d", r)), filepath.Join(dir, fmt.Sprintf("cluster-%d", r))
		err := alternate(r, func() error {
			spec, err := writeSpec(oneDir)
			if err != nil {
				return err
			}
			progress := filepath.Join(oneDir, "progress.jsonl")
			pr, err := launchProcess(ctx, env, driver, "run", "-f", spec, "--progress-json", progress)
			if err != nil {
				return fmt.Errorf("driver run: %w", err)
			}
			one = pr.Elapsed
			if rows, _, err := progressTotals(progress); err != nil || rows != res.Events {
				return fmt.Errorf("driver run read %d rows (%v), want %d", rows, err, res.Events)
			}
			return nil
		}, func() error {
			spec, err := writeSpec(clDir)
			if err != nil {
				return err
			}
			var ended string
			cl, ended, err = runCluster(ctx, driver, executor, spec, clDir, 2, res.Events, "", env...)
			if ended != "" {
				res.RunEnded = append(res.RunEnded, ended)
			}
			return err
		})
		os.RemoveAll(oneDir)
		os.RemoveAll(clDir)
		if err != nil {
			return sec, fmt.Errorf("bigfile-s3 round %d: %w", r+1, err)
		}
		res.OneSecs = append(res.OneSecs, one.Seconds())
		res.Cluster = append(res.Cluster, cl.Seconds())
		res.Ratio = append(res.Ratio, one.Seconds()/cl.Seconds())
		table.Rows = append(table.Rows, []string{fmt.Sprint(r + 1), fmt.Sprintf("%.2f", one.Seconds()), fmt.Sprintf("%.2f", cl.Seconds()), fmt.Sprintf("%.2f", one.Seconds()/cl.Seconds())})
		fmt.Fprintf(e.Out, "bigfile-s3 round %d: driver run %.2f s | driver serve + 2 executors %.2f s | ratio %.2f\n", r+1, one.Seconds(), cl.Seconds(), one.Seconds()/cl.Seconds())
	}
	sec.Text = fmt.Sprintf("One JSON-lines object of %d generator events (%.0f MB, %d courses) on the S3 test server, read with source.file.minPartitions %d: `driver run` against `driver serve` with two `executor` processes on this machine, %d rounds alternating which goes first, each timed from its first process's start to the driver's exit. The ratio is the cluster's throughput over the one process's.",
		res.Events, float64(res.Bytes)/1e6, processCourses, res.MinPartitions, len(res.Ratio))
	sec.Table = table
	if len(res.Ratio) > 0 {
		sec.Rows = []Row{{
			Name:  fmt.Sprintf("one %.0f MB object on S3 (minPartitions %d): driver run s / driver serve + 2 executors s", float64(res.Bytes)/1e6, res.MinPartitions),
			Value: rangeOf(res.OneSecs, "%.2f") + " / " + rangeOf(res.Cluster, "%.2f"),
		}}
		sec.Targets = []Target{ratioTarget(bigFileS3TargetName, &Pair{Name: "big object", Ratio: res.Ratio}, 0.7)}
		if t := &sec.Targets[0]; t.Status == "missed" {
			t.Why = "each split an executor reads should cost only its own bytes; if the cluster's time grows with the object's size more than the one process's, the executors read (and throw away) the bytes before each split's offset: see the driver's end-of-run line in report.json (RunEnded)"
		}
	}
	return sec, nil
}

// uploadBigObject writes events generator lines (processCourses courses)
// as one object, by a multipart upload in bigFileS3PartSize parts, and
// returns its size.
func uploadBigObject(ctx context.Context, st *objstore.S3, key string, events int64) (int64, error) {
	opts := generatorOptions(events, 0)
	opts.Courses = processCourses
	g := generator.New(opts)
	id, err := st.CreateMultipart(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	var parts []objstore.Part
	var size int64
	buf := make([]byte, 0, bigFileS3PartSize+4096)
	flush := func() error {
		p, err := st.UploadPart(ctx, key, id, len(parts)+1, buf)
		if err != nil {
			return err
		}
		parts = append(parts, p)
		size += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	for i := range events {
		buf = append(g.AppendLine(buf, i), '\n')
		if len(buf) >= bigFileS3PartSize {
			if err := flush(); err != nil {
				st.AbortMultipart(ctx, key, id)
				return 0, fmt.Errorf("upload %s: %w", key, err)
			}
		}
	}
	if len(buf) > 0 || len(parts) == 0 {
		if err := flush(); err != nil {
			st.AbortMultipart(ctx, key, id)
			return 0, fmt.Errorf("upload %s: %w", key, err)
		}
	}
	if err := st.CompleteMultipart(ctx, key, id, parts); err != nil {
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	return size, nil
}
