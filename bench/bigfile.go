package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/file"
	"github.com/sluicehq/sluice/source/generator"
)

// The big-file measurement (-only bigfile, in -report): the
// bounded memory on one large source file, and the file source's
// per-trigger listing cost as the files already taken grow.
//
//   - One JSON-lines file of -bigfile-bytes (2 GiB) of the generator's
//     events is written to the work directory, read by `driver run` (the
//     tile, availableNow) started through the launcher, and deleted. The
//     figure is the driver's peak RSS against the file's size; the rows it
//     read must equal the lines written.
//   - The listing cost: a directory of hour-partitioned files
//     (date=D/hour=H/part-N.jsonl, 100 an hour) grown to 10, 1,000 and
//     100,000 files (41 days), all taken by a first trigger; then one new
//     file per trigger, planned (Latest + Next) as the scheduler does, with
//     maxFileAge 1d and fullListingInterval 1h (partial listings) or none
//     (a full listing at every trigger), and with maxFileAge 60d (every
//     name taken kept in the offset). The figures are objects listed and
//     planning time per trigger, and the offset's size.

// BigFileResult is the big-file measurement.
type BigFileResult struct {
	FileBytes   int64
	Lines       int64
	WriteSecs   float64 // generating and writing the file (untimed for the figure)
	RunSecs     float64 // driver run, start to exit
	MaxRSSMiB   float64 // driver run's peak RSS
	RowsRead    int64
	ListingRuns []ListingCost
}

// ListingCost is the per-trigger cost with Taken files already taken.
type ListingCost struct {
	Taken int
	// Partial: fullListingInterval set; Full: a full listing per trigger.
	PartialObjects, FullObjects float64 // objects listed per trigger, median
	PartialMs, FullMs           float64 // Latest + Next per trigger, median
	OffsetBytes                 int     // the offset after the last trigger
	// KeepAll: partial listings with maxFileAge 60 days, so every name
	// taken stays in the offset (the taken set is bounded by maxFileAge,
	// not by the listing).
	KeepAllMs          float64
	KeepAllOffsetBytes int
}

// bigFileFilesPerDir is the listing directory's files per hour directory.
const bigFileFilesPerDir = 100

// runBigFile runs both parts.
func runBigFile(ctx context.Context, c config, driver, dir string, out io.Writer) (*BigFileResult, error) {
	res := &BigFileResult{}
	if err := bigFileRSS(ctx, c, driver, dir, res, out); err != nil {
		return nil, err
	}
	costs, err := listingCosts(ctx, filepath.Join(dir, "listing"), []int{10, 1_000, 100_000}, out)
	if err != nil {
		return nil, fmt.Errorf("listing cost: %w", err)
	}
	res.ListingRuns = costs
	return res, nil
}

// bigFileRSS writes the big file, runs driver run over it and deletes it.
func bigFileRSS(ctx context.Context, c config, driver, dir string, res *BigFileResult, out io.Writer) error {
	src := filepath.Join(dir, "bigfile-in")
	runDir := filepath.Join(dir, "bigfile-run")
	defer os.RemoveAll(src)
	defer os.RemoveAll(runDir)
	for _, d := range []string{src, runDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	t := time.Now()
	n, size, err := writeBigFile(filepath.Join(src, "big.jsonl"), c.bigFileBytes)
	if err != nil {
		return err
	}
	res.FileBytes, res.Lines, res.WriteSecs = size, n, time.Since(t).Seconds()
	fmt.Fprintf(out, "bigfile: wrote %d lines, %.0f MiB, in %.1f s\n", n, float64(size)/(1<<20), res.WriteSecs)

	spec := tileSpec(query.Source{File: &query.FileSource{Path: src}, Schema: query.GeneratorSchema()}, runDir, query.Trigger{AvailableNow: true})
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	specFile, progress := filepath.Join(runDir, "query.json"), filepath.Join(runDir, "progress.jsonl")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	pr, err := launchProcess(ctx, nil, driver, "run", "-f", specFile, "--progress-json", progress)
	if err != nil {
		return fmt.Errorf("bigfile: driver run: %w", err)
	}
	rows, _, err := progressTotals(progress)
	if err != nil {
		return fmt.Errorf("bigfile: %w", err)
	}
	if rows != n {
		return fmt.Errorf("bigfile: driver run read %d rows, the file has %d lines", rows, n)
	}
	res.RowsRead, res.RunSecs, res.MaxRSSMiB = rows, pr.Elapsed.Seconds(), float64(pr.MaxRSSKiB)/1024
	fmt.Fprintf(out, "bigfile: driver run read %d rows of a %.0f MiB file in %.1f s, peak RSS %.0f MiB\n", rows, float64(size)/(1<<20), res.RunSecs, res.MaxRSSMiB)
	return nil
}

// writeBigFile writes the generator's rows as JSON lines until the file
// holds at least size bytes; it returns the lines and bytes written.
func writeBigFile(name string, size int64) (lines, written int64, err error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, 0, fmt.Errorf("create big file: %w", err)
	}
	defer f.Close()
	g := generator.New(generatorOptions(0, 0))
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for written < size {
		buf = append(g.AppendLine(buf[:0], lines), '\n')
		if _, err := w.Write(buf); err != nil {
			return 0, 0, fmt.Errorf("write big file: %w", err)
		}
		written += int64(len(buf))
		lines++
	}
	if err := w.Flush(); err != nil {
		return 0, 0, fmt.Errorf("write big file: %w", err)
	}
	return lines, written, f.Close()
}

// listingCosts measures the per-trigger planning cost for each count of
// files taken, growing one directory: 100 files an hour, one hour
// directory each, so 100,000 files are about 41 days of history.
func listingCosts(ctx context.Context, dir string, counts []int, out io.Writer) ([]ListingCost, error) {
	defer os.RemoveAll(dir)
	st, err := objstore.NewFS(dir)
	if err != nil {
		return nil, err
	}
	const every = time.Hour / bigFileFilesPerDir
	last := counts[len(counts)-1] + 5*len(counts)
	base := time.Now().Add(-time.Duration(last) * every).Truncate(time.Hour)
	written := 0
	write := func(i int) error {
		at := base.Add(time.Duration(i) * every)
		p := filepath.Join(dir, "date="+at.UTC().Format("2006-01-02"), "hour="+at.UTC().Format("15"), fmt.Sprintf("part-%06d.jsonl", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			return err
		}
		return os.Chtimes(p, at, at)
	}
	day, long := query.Duration(24*time.Hour), query.Duration(60*24*time.Hour)
	var costs []ListingCost
	for _, n := range counts {
		for ; written < n; written++ {
			if err := write(written); err != nil {
				return nil, err
			}
		}
		partial := newPlanner(st, query.FileSource{Path: dir, MaxFileAge: day, FullListingInterval: query.Duration(time.Hour)})
		full := newPlanner(st, query.FileSource{Path: dir, MaxFileAge: day})
		keepAll := newPlanner(st, query.FileSource{Path: dir, MaxFileAge: long, FullListingInterval: query.Duration(time.Hour)})
		planners := []*planner{partial, full, keepAll}
		for _, p := range planners {
			if taken, _, _, err := p.trigger(ctx); err != nil || taken != n {
				return nil, fmt.Errorf("first trigger over %d files took %d (%v)", n, taken, err)
			}
		}
		lc := ListingCost{Taken: n}
		obj := make([][]float64, len(planners))
		ms := make([][]float64, len(planners))
		for range 5 {
			if err := write(written); err != nil {
				return nil, err
			}
			written++
			for i, p := range planners {
				taken, objects, d, err := p.trigger(ctx)
				if err != nil || taken != 1 {
					return nil, fmt.Errorf("trigger after %d files took %d (%v)", n, taken, err)
				}
				obj[i], ms[i] = append(obj[i], float64(objects)), append(ms[i], d.Seconds()*1000)
			}
		}
		lc.PartialObjects, lc.FullObjects, lc.PartialMs, lc.FullMs = median(obj[0]), median(obj[1]), median(ms[0]), median(ms[1])
		lc.OffsetBytes = len(partial.at)
		lc.KeepAllMs, lc.KeepAllOffsetBytes = median(ms[2]), len(keepAll.at)
		fmt.Fprintf(out, "bigfile: %d files taken (maxFileAge 1d): per trigger, partial listing %.0f objects %.2f ms, full listing %.0f objects %.2f ms; offset %d bytes | maxFileAge 60d (all kept): partial %.2f ms, offset %d bytes\n",
			n, lc.PartialObjects, lc.PartialMs, lc.FullObjects, lc.FullMs, lc.OffsetBytes, lc.KeepAllMs, lc.KeepAllOffsetBytes)
		costs = append(costs, lc)
	}
	return costs, nil
}

// planner plans batches of a file source as the scheduler does.
type planner struct {
	store *objstore.Counting
	src   *file.Source
	at    source.Offset
	now   time.Time
}

func newPlanner(st objstore.Store, opts query.FileSource) *planner {
	c := objstore.NewCounting(st)
	p := &planner{store: c, src: file.New(c, opts, slog.New(slog.DiscardHandler)), now: time.Now()}
	p.at, _ = p.src.Initial(context.Background())
	return p
}

// trigger plans one batch (a minute after the last) and returns the files
// it took, the objects its listings returned and its duration.
func (p *planner) trigger(ctx context.Context) (int, int64, time.Duration, error) {
	p.store.Reset()
	p.now = p.now.Add(time.Minute)
	t := time.Now()
	limit, err := p.src.Latest(ctx, p.at, p.now)
	if err != nil {
		return 0, 0, 0, err
	}
	end, err := p.src.Next(ctx, p.at, limit)
	if err != nil {
		return 0, 0, 0, err
	}
	d := time.Since(t)
	o, err := file.ParseOffset(end)
	if err != nil {
		return 0, 0, 0, err
	}
	taken := 0
	if !slices.Equal(end, p.at) {
		taken = len(o.Files)
	}
	p.at = end
	return taken, p.store.Stats()[objstore.OpList].Objects, d, nil
}

// bigFileLines are the report's rows.
func bigFileLines(r *BigFileResult) []line {
	if r == nil {
		return nil
	}
	ls := []line{{
		fmt.Sprintf("big file: driver run over one %.0f MiB JSON-lines file (%d rows), peak RSS MiB", float64(r.FileBytes)/(1<<20), r.RowsRead),
		fmt.Sprintf("%.0f (%.1f s)", r.MaxRSSMiB, r.RunSecs), "bounded, ≪ file size",
	}}
	for _, c := range r.ListingRuns {
		ls = append(ls, line{
			fmt.Sprintf("file source, %d files taken (maxFileAge 1d): objects listed / ms per trigger, partial listings (fullListingInterval 1h) vs a full listing; offset bytes", c.Taken),
			fmt.Sprintf("%.0f / %.2f vs %.0f / %.2f; %d", c.PartialObjects, c.PartialMs, c.FullObjects, c.FullMs, c.OffsetBytes), "partial flat",
		}, line{
			"  same, maxFileAge 60d (every name kept): partial ms per trigger; offset bytes",
			fmt.Sprintf("%.2f; %d", c.KeepAllMs, c.KeepAllOffsetBytes), "",
		})
	}
	return ls
}
