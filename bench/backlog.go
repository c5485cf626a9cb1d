package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Backlog (-only backlog, in -report): peak RSS of a `driver run` process
// catching up on a Kafka backlog of each size at one maxOffsetsPerTrigger.
// Each size gets its own kfake broker in this process, preloaded, with
// its log segments on disk (kfake.DataDir under the work directory, removed
// after the size ran), so the broker holds only indexes in memory and a
// backlog of 100 M records fits on a machine of this size; the driver runs
// as a grandchild through the launcher, so its peak is its own. A size
// whose segments would not fit on the work directory's disk (estimated
// from the bytes per record the first size took) is skipped, and the
// report says so.

// BacklogRun is one size's runs.
type BacklogRun struct {
	Records int
	Runs    []RSSRun
	Skipped string `json:",omitempty"` // why it did not run
}

// diskAvailable is the bytes free to an unprivileged writer on the
// filesystem holding dir (0: unknown).
func diskAvailable(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// brokerBytesPerRecord is the first estimate of what kfake's segments take
// on disk per record, before a size has been measured.
const brokerBytesPerRecord = 200

func runBacklog(ctx context.Context, e *ModeEnv, sizes []int, maxOffsets int64, runs int) ([]BacklogRun, error) {
	driver, err := e.Driver(ctx)
	if err != nil {
		return nil, err
	}
	perRecord := float64(brokerBytesPerRecord)
	var out []BacklogRun
	for _, n := range sizes {
		br := BacklogRun{Records: n}
		need := int64(perRecord*float64(n)*1.3) + 1<<30 // the segments, headroom, the checkpoint
		if avail := diskAvailable(e.Dir); avail > 0 && need > avail {
			br.Skipped = fmt.Sprintf("not run: the broker's segments would need about %.1f GiB of disk (%.0f bytes per record measured or assumed), %.1f GiB free", float64(need)/(1<<30), perRecord, float64(avail)/(1<<30))
			fmt.Fprintf(e.Out, "backlog %d: %s\n", n, br.Skipped)
			out = append(out, br)
			continue
		}
		topic := kafkaTopic(n)
		segments := filepath.Join(e.Dir, fmt.Sprintf("backlog-%d-kafka", n))
		b, err := startKafkaIn(segments, e.Config.kafka.Partitions, topic)
		if err != nil {
			return out, err
		}
		pr, err := produceTile(ctx, b.addr, topic, generatorOptions(int64(n), 0), n, e.Config.kafka.Partitions)
		if err != nil {
			b.close()
			return out, err
		}
		if used := dirBytes(segments); used > 0 {
			perRecord = float64(used) / float64(n)
		}
		fmt.Fprintf(e.Out, "backlog %d: produced in %v (the broker's segments take about %.0f bytes per record on disk)\n", n, pr.Elapsed.Round(time.Millisecond), perRecord)
		for r := range max(runs, 1) {
			rr, err := rssRun(ctx, driver, b.addr, topic, filepath.Join(e.Dir, fmt.Sprintf("backlog-%d-%d", n, r)), maxOffsets, e.Config.kafka.ClientOptions)
			if err == nil && rr.InputRows != int64(n) {
				err = fmt.Errorf("driver run over a backlog of %d records read %d", n, rr.InputRows)
			}
			if err != nil {
				b.close()
				os.RemoveAll(segments)
				return append(out, br), err
			}
			rr.Rows = n
			br.Runs = append(br.Runs, *rr)
			fmt.Fprintf(e.Out, "backlog %d, maxOffsetsPerTrigger %d: peak RSS %.0f MiB, %d batches, %v\n", n, maxOffsets, float64(rr.MaxRSSKiB)/1024, rr.Batches, rr.Elapsed.Round(time.Millisecond))
		}
		b.close()
		os.RemoveAll(segments)
		debug.FreeOSMemory()
		out = append(out, br)
	}
	return out, nil
}

func runBacklogMode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config
	sizes := c.backlog
	runs := c.backlogRuns
	sec := &Section{Title: "Peak RSS against the Kafka backlog"}
	brs, err := runBacklog(ctx, e, sizes, c.backlogMaxOffsets, runs)
	sec.Data = brs
	var ran, skipped []string
	var xs, ys []float64
	sec.Table = &Table{Header: []string{"records behind", "runs", "batches", "catch-up s (median)", "peak RSS MiB, median [min–max]", "× the smallest's"}}
	first := 0.0
	for _, br := range brs {
		if br.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("%d (%s)", br.Records, br.Skipped))
			sec.Table.Rows = append(sec.Table.Rows, []string{fmt.Sprint(br.Records), "0", "–", "–", br.Skipped, "–"})
			continue
		}
		if len(br.Runs) == 0 {
			continue
		}
		ran = append(ran, fmt.Sprint(br.Records))
		var peaks, secs []float64
		for _, r := range br.Runs {
			peaks = append(peaks, float64(r.MaxRSSKiB)/1024)
			secs = append(secs, r.Elapsed.Seconds())
		}
		m := median(peaks)
		if first == 0 {
			first = m
		}
		xs, ys = append(xs, float64(br.Records)), append(ys, m)
		sec.Table.Rows = append(sec.Table.Rows, []string{fmt.Sprint(br.Records), fmt.Sprint(len(br.Runs)), fmt.Sprint(br.Runs[0].Batches), fmt.Sprintf("%.1f", median(secs)), rangeOf(peaks, "%.0f"), fmt.Sprintf("%.2f", m/first)})
		sec.Rows = append(sec.Rows, Row{Name: fmt.Sprintf("backlog: driver run peak RSS, %d records behind, maxOffsetsPerTrigger %d, MiB", br.Records, c.backlogMaxOffsets), Value: rangeOf(peaks, "%.0f") + fmt.Sprintf(" (%.2f× the smallest backlog's)", m/first)})
	}
	text := fmt.Sprintf("`driver run` catching up on a backlog on kfake (%d partitions, over TCP, log segments on disk), maxOffsetsPerTrigger %d for every size, in-memory state; peak RSS is the driver process's own (getrusage through a launcher). Sizes asked for (-backlog): %s; ran: %s.",
		c.kafka.Partitions, c.backlogMaxOffsets, joinInts(sizes), orDash(strings.Join(ran, ", ")))
	if len(skipped) > 0 {
		text += " Skipped: " + strings.Join(skipped, "; ") + "."
	}
	text += " With a fixed maxOffsetsPerTrigger the driver holds one batch at a time, so its peak should not grow with the backlog; the state grows only with the groups (windows × courses), which the generator's event time bounds."
	sec.Text = text
	if len(xs) > 0 {
		sec.Plots = []Plot{{File: "backlog-rss.png", Title: fmt.Sprintf("driver run peak RSS against backlog (maxOffsetsPerTrigger %d)", c.backlogMaxOffsets), XLabel: "records behind (log scale)", YLabel: "peak RSS MiB", LogX: true,
			Series: []Series{{Name: "peak RSS (median)", X: xs, Y: ys}}}}
	}
	if len(ys) > 1 {
		sec.Rows = append(sec.Rows, Row{Name: "backlog: peak RSS at the largest / the smallest backlog that ran", Value: fmt.Sprintf("%.2f (%s records / %s; the highest median %.0f MiB)", ys[len(ys)-1]/first, ran[len(ran)-1], ran[0], slices.Max(ys)), Target: "flat"})
	}
	return sec, err
}
