package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/generator"
)

// The fair reference: the best simple program a competent engineer would
// write for the tile without exactly-once. It uses the engine's decoder
// with the engine's field list (executor.ValueFields: the columns the
// query never reads are marked Unused, as in the map tasks), one goroutine
// per core, each counting into its own map, merged at the end. No
// checkpoint, no sink, no state store: the difference between it and the
// engine is what exactly-once, planning and the Parquet sink cost.

// refParallelism is the reference's goroutine count: one per core the
// runtime uses.
func refParallelism() int { return runtime.GOMAXPROCS(0) }

// mergeCounts folds the goroutines' results into one, timed from start.
func mergeCounts(parts []*RawResult, start time.Time, cpu time.Duration) *RawResult {
	res := &RawResult{Counts: make(map[WindowKey]int64)}
	for _, p := range parts {
		if p == nil {
			continue
		}
		for k, c := range p.Counts {
			res.Counts[k] += c
		}
		res.MaxTime = max(res.MaxTime, p.MaxTime)
	}
	res.Elapsed = time.Since(start)
	res.CPU = processCPU() - cpu
	return res
}

// refGenerator is the reference for the generator source: p goroutines,
// each rendering a contiguous share of rows [0, n) with the generator (as
// the engine's map tasks do), decoding and counting them as kind does.
func refGenerator(kind refKind, opts query.GeneratorSource, n, p int) (*RawResult, error) {
	cpu := processCPU()
	start := time.Now()
	parts := make([]*RawResult, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := generator.New(opts)
			c := kind.newCounter()
			var buf []byte
			for j := i * n / p; j < (i+1)*n/p; j++ {
				buf = g.AppendLine(buf[:0], int64(j))
				if err := c.add(buf); err != nil {
					errs[i] = fmt.Errorf("decode row %d: %w", j, err)
					return
				}
			}
			parts[i] = c.result()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return mergeCounts(parts, start, cpu), nil
}

// refFiles is the reference for the file source: p goroutines taking the
// directory's files one at a time (in name order, from a shared counter),
// each reading a whole file, splitting it into lines, decoding and
// counting them as kind does.
func refFiles(kind refKind, dir string, p int) (*RawResult, int64, error) {
	cpu := processCPU()
	start := time.Now()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list source files: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(names)
	var next atomic.Int64
	var rows atomic.Int64
	parts := make([]*RawResult, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := kind.newCounter()
			defer func() { parts[i] = c.result() }()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(names) {
					return
				}
				b, err := os.ReadFile(names[k])
				if err != nil {
					errs[i] = fmt.Errorf("read source file: %w", err)
					return
				}
				var n int64
				for len(b) > 0 {
					line := b
					if j := bytes.IndexByte(b, '\n'); j >= 0 {
						line, b = b[:j], b[j+1:]
					} else {
						b = nil
					}
					if len(line) == 0 {
						continue
					}
					if err := c.add(line); err != nil {
						errs[i] = fmt.Errorf("decode a line of %s: %w", names[k], err)
						return
					}
					n++
				}
				rows.Add(n)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	return mergeCounts(parts, start, cpu), rows.Load(), nil
}

// refKafkaFetchBytes is the engine's reading clients' partition fetch size
// (source/kafka defaultPartitionFetchBytes, franz-go's and Kafka's
// default): the reference fetches exactly as the engine does.
const refKafkaFetchBytes = 1 << 20

// refKafka is the reference for Kafka: p franz-go clients, client i
// consuming partitions i, i+p, … of topic from offset 0 below ends (the
// engine's fetch settings: 1 MiB per partition, reset policy none), each
// polled by its own goroutine into its own map (decoded and counted as
// kind does), merged at the end. It is timed from creating the clients to
// closing them and returns the records read.
func refKafka(ctx context.Context, kind refKind, addr, topic string, ends map[int32]int64, p int) (*RawResult, int64, error) {
	cpu := processCPU()
	start := time.Now()
	assign := make([]map[int32]int64, p)
	var parts []int32
	for part, end := range ends {
		if end > 0 {
			parts = append(parts, part)
		}
	}
	slices.Sort(parts)
	for i, part := range parts {
		if assign[i%p] == nil {
			assign[i%p] = map[int32]int64{}
		}
		assign[i%p][part] = ends[part]
	}
	results := make([]*RawResult, p)
	counts := make([]int64, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		if assign[i] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], counts[i], errs[i] = kafkaReader(ctx, kind, addr, topic, assign[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return mergeCounts(results, start, cpu), n, nil
}

// kafkaReader reads the given partitions from offset 0 to their end
// offsets with one client and counts the records as kind does.
func kafkaReader(ctx context.Context, kind refKind, addr, topic string, ends map[int32]int64) (*RawResult, int64, error) {
	offs := map[int32]kgo.Offset{}
	for part := range ends {
		offs[part] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(refKafkaFetchBytes),
	)
	if err != nil {
		return nil, 0, fmt.Errorf("create kafka consumer: %w", err)
	}
	defer cl.Close()
	c := kind.newCounter()
	left := len(ends)
	var n int64
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, n, fmt.Errorf("reference kafka reader: %w", err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s-%d: %w", t, p, err))
		})
		if ferr != nil {
			return nil, n, ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end := ends[p.Partition]
			for _, r := range p.Records {
				if r.Offset >= end || ferr != nil {
					continue
				}
				if err := c.add(r.Value); err != nil {
					ferr = fmt.Errorf("decode %s-%d@%d: %w", p.Topic, p.Partition, r.Offset, err)
					return
				}
				n++
				if r.Offset == end-1 {
					left--
				}
			}
		})
		if ferr != nil {
			return nil, n, ferr
		}
	}
	return c.result(), n, nil
}
