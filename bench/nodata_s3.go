package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// No-data batches on local disk and on the S3-compatible test server
// (-only nodata-s3, in -report): the engine's own benchmark
// (engine/nodata_bench_test.go, BenchmarkNoDataBatch: local, S3, and S3
// with a driver and two executors over gRPC) run as `go test` from the
// module, its metrics parsed. It needs the versitygw binary
// (internal/testutil/s3test: $SLUICE_VERSITYGW or scripts/test.sh's install).

// NoDataS3 is one sub-benchmark's medians.
type NoDataS3 struct {
	Where   string  // local, s3, s3-2-executors
	Quiet   float64 // ms, no-data batch closing nothing
	Closing float64 // ms, no-data batch closing a window
}

// runNoDataS3 runs the benchmark with n iterations; with profile set, under
// a CPU profile written there, whose top it returns.
func runNoDataS3(ctx context.Context, n int, profile string, out io.Writer) ([]NoDataS3, string, error) {
	args := []string{"test", "./driver/microbatch", "-run", "^$", "-bench", "NoDataBatch", "-benchtime", fmt.Sprintf("%dx", n), "-count", "1"}
	if profile != "" {
		abs, err := filepath.Abs(profile)
		if err != nil {
			return nil, "", err
		}
		profile = abs
		// -o keeps the test binary out of the module's directory.
		args = append(args, "-cpuprofile", profile, "-o", strings.TrimSuffix(profile, ".pprof")+".test")
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return nil, "", fmt.Errorf("go test ./driver/microbatch -bench NoDataBatch: %v; output tail:\n%s", err, tail(string(b), 1500))
	}
	res := parseNoDataBench(string(b))
	if len(res) == 0 {
		return nil, "", fmt.Errorf("go test ./driver/microbatch -bench NoDataBatch printed no figures:\n%s", tail(string(b), 1500))
	}
	for _, r := range res {
		fmt.Fprintf(out, "no-data batch on %s: %.1f ms closing nothing, %.1f ms closing a window\n", r.Where, r.Quiet, r.Closing)
	}
	top := ""
	if profile != "" {
		if t, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", profile).Output(); err == nil {
			top = string(t)
		}
		os.Remove(strings.TrimSuffix(profile, ".pprof") + ".test")
	}
	return res, top, nil
}

// parseNoDataBench reads the benchmark's result lines, e.g.
// "BenchmarkNoDataBatch/s3-2  60  123 ns/op  4.0 ms/no-data-batch  14 ms/no-data-batch-closing-a-window".
func parseNoDataBench(s string) []NoDataS3 {
	var out []NoDataS3
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasPrefix(f[0], "BenchmarkNoDataBatch/") {
			continue
		}
		where := strings.TrimPrefix(f[0], "BenchmarkNoDataBatch/")
		if i := strings.LastIndexByte(where, '-'); i > 0 {
			if _, err := strconv.Atoi(where[i+1:]); err == nil {
				where = where[:i] // the GOMAXPROCS suffix
			}
		}
		r := NoDataS3{Where: where}
		for i := 1; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ms/no-data-batch":
				r.Quiet = v
			case "ms/no-data-batch-closing-a-window":
				r.Closing = v
			}
		}
		out = append(out, r)
	}
	return out
}
