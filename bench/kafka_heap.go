package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
)

// kafkaHeapProfiles runs the engine in this process over the largest RSS
// backlog at the RSS cap and writes a heap profile after every
// kc.HeapEvery-th batch (after a GC), to find what grows with the backlog:
//
//	go tool pprof -top -base DIR/heap-0005.pb.gz DIR/heap-0045.pb.gz
//
// The broker lives in this process too, so its records are in the
// profiles; -base cancels them out (they do not change while the query
// runs).
func kafkaHeapProfiles(ctx context.Context, kc KafkaConfig, addr, dir string, out io.Writer) error {
	if err := os.MkdirAll(kc.HeapProfile, 0o755); err != nil {
		return fmt.Errorf("create heap profile directory: %w", err)
	}
	n := slices.Max(kc.RSSRows)
	every := max(kc.HeapEvery, 1)
	runDir := filepath.Join(dir, "kafka-heap")
	defer os.RemoveAll(runDir)
	var perr error
	var ms runtime.MemStats
	onReport := func(p *progress.Report) {
		if p.BatchID%ids.BatchID(every) != 0 || perr != nil {
			return
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		name := filepath.Join(kc.HeapProfile, fmt.Sprintf("heap-%04d.pb.gz", p.BatchID))
		f, err := os.Create(name)
		if err != nil {
			perr = err
			return
		}
		perr = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
		fmt.Fprintf(out, "kafka heap: batch %d: HeapInuse %.0f MiB, HeapSys %.0f MiB → %s\n", p.BatchID, float64(ms.HeapInuse)/(1<<20), float64(ms.HeapSys)/(1<<20), name)
	}
	job, err := microbatch.Build(ctx, kafkaSpec(addr, kafkaTopic(n), runDir, kc.RSSMaxOffsets, kc.ClientOptions), microbatch.Options{Parallelism: kc.Parallelism, Observer: progress.Committed(onReport)})
	if err != nil {
		return fmt.Errorf("build engine: %w", err)
	}
	err = errors.Join(job.Run(ctx, nil), job.Close(), perr)
	if err != nil {
		return fmt.Errorf("heap-profiled engine run: %w", err)
	}
	return nil
}
