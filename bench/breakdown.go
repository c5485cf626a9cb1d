package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// A Breakdown is one profiled run's CPU per event by part of the work:
// each sample goes to the part of the innermost frame that names one
// (costParts), so a part's figure includes the runtime work (allocation,
// syscalls) its own code calls; background GC is its own part.
type Breakdown struct {
	Events int64
	// NsPerEvent is CPU nanoseconds per event by part; Total sums them
	// (the broker's part, when the broker ran in the profiled process,
	// is left out of Total: it is neither side's work).
	NsPerEvent map[string]float64
	Total      float64
}

// CostCompare is the engine's and the reference's breakdowns for one
// pair, from one profiled run of each over the same input.
type CostCompare struct {
	Engine, Reference Breakdown
	// Files are the two sides' profiles, engine first (a side of several
	// processes has several, merged).
	Files [2][]string
	// Names are how the Why names the two sides (default "the engine"
	// and "the reference").
	Names [2]string `json:",omitempty"`
}

// costParts maps a frame's function name prefix to its part, checked in
// order from the innermost frame out. The reference's own code (this
// program's package main) is split by function below.
var costParts = []struct{ prefix, part string }{
	{"runtime.gcBgMarkWorker", "GC (background)"},
	{"github.com/sluicehq/sluice/row.", "decode"},
	{"github.com/valyala/fastjson", "decode"},
	{"github.com/sluicehq/sluice/source/", "source read"},
	{"github.com/twmb/franz-go", "source read"},
	{"github.com/sluicehq/sluice/agg.", "aggregate"},
	{"github.com/sluicehq/sluice/executor/shuffle", "shuffle"},
	{"github.com/sluicehq/sluice/statestore", "state store"},
	{"github.com/sluicehq/sluice/sink/", "sink (Parquet)"},
	{"github.com/parquet-go/", "sink (Parquet)"},
	{"github.com/sluicehq/sluice/checkpoint", "checkpoint"},
	{"github.com/sluicehq/sluice/objstore", "object store writes"},
	{"google.golang.org/grpc", partRPC},
	{"google.golang.org/protobuf", partRPC},
	{"github.com/sluicehq/sluice/proto", partRPC},
	{"github.com/sluicehq/sluice/driver/dispatch", partRPC},
	{"github.com/sluicehq/sluice/executor.", partRPC},
	{"github.com/sluicehq/sluice/wire", partRPC},
	{"github.com/sluicehq/sluice/task", "engine control (tasks, batch loop)"},
	{"github.com/sluicehq/sluice/driver/microbatch", "engine control (tasks, batch loop)"},
	{"github.com/sluicehq/sluice/", "engine control (tasks, batch loop)"},
	// The reference: its map update and merge are its aggregation; the
	// rest of its loops (reading, splitting lines, polling) its source
	// read.
	{"main.(*tileCounter)", "aggregate"},
	// The bare loop: fastjson (above) and time.Parse are its decode, its
	// map updates its aggregate.
	{"main.(*bareCounter).decode", "decode"},
	{"time.Parse", "decode"},
	{"time.parse", "decode"},
	{"main.(*bareCounter)", "aggregate"},
	{"main.mergeCounts", "aggregate"},
	{"main.refFiles", "source read"},
	{"main.refGenerator", "source read"},
	{"main.refKafka", "source read"},
	{"main.kafkaReader", "source read"},
}

const partBroker = "broker (kfake, same process)"

// partRPC is the cluster's own work: gRPC, protobuf, the driver's
// dispatch, the executor process and the wire codec.
const partRPC = "cluster RPC (gRPC, protobuf, task dispatch)"

// remedies says, per part, what would cut the engine's excess there.
var remedies = map[string]string{
	"decode":                             "both sides call the same decoder: an excess here is the engine's wrapper around it (record metadata, event-time extraction, setting aside malformed records), or one run's noise",
	"source read":                        "fewer copies between the source's buffers and the decoder (the reference reads the same bytes)",
	"aggregate":                          "a cheaper partial aggregation per row (the reference's is one map update); the engine also sorts and merges the partials into state",
	"shuffle":                            "sending fewer partials per batch: one per group per map task, merged before the shuffle",
	"state store":                        "fewer state partitions for small state, and fewer copies of a batch's changes on their way into the delta",
	"sink (Parquet)":                     "fewer Parquet files per batch: outputs under the gather bound already share one file per directory, larger ones are a file per partition and date",
	"checkpoint":                         "fewer checkpoint objects per batch",
	partRPC:                              "fewer and larger messages: partials merged per executor before the shuffle, task results batched",
	"object store writes":                "fewer synced writes per batch (a state delta and a Parquet file per partition, each fsynced with its directory)",
	"engine control (tasks, batch loop)": "less per-batch bookkeeping (planning, progress, task results)",
	"GC (background)":                    "fewer allocations per row and per group (the collector's work grows with them)",
	"other (runtime)":                    "fewer goroutine switches and allocations outside the parts above",
}

// costBreakdown reads the CPU profiles of a run over events events (one
// per process of the run).
func costBreakdown(files []string, events int64) (Breakdown, error) {
	b := Breakdown{Events: events, NsPerEvent: map[string]float64{}}
	for _, file := range files {
		if err := b.add(file); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (b *Breakdown) add(file string) error {
	events := b.Events
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("parse %s: %w", file, err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 || events <= 0 {
		return fmt.Errorf("%s: not a CPU profile of a run with events", file)
	}
	for _, s := range p.Sample {
		part := partOf(s)
		ns := float64(s.Value[idx]) / float64(events)
		b.NsPerEvent[part] += ns
		if part != partBroker {
			b.Total += ns
		}
	}
	return nil
}

func partOf(s *profile.Sample) string {
	// The broker's goroutines, wherever their stack goes (its encoding
	// is franz-go's kmsg, the client's too).
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && strings.HasPrefix(ln.Function.Name, "github.com/twmb/franz-go/pkg/kfake") {
				return partBroker
			}
		}
	}
	for _, loc := range s.Location {
		// A location's lines are innermost first (inlined calls).
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			for _, c := range costParts {
				if strings.HasPrefix(name, c.prefix) {
					return c.part
				}
			}
		}
	}
	return "other (runtime)"
}

// compareCosts compares two profiles' breakdowns; nil when either is
// missing.
func compareCosts(engineFile, refFile string, events int64) *CostCompare {
	return compareCostFiles([]string{engineFile}, []string{refFile}, events, [2]string{})
}

// compareCostFiles compares two sides of one or more processes each,
// named names (empty: the engine, the reference); nil when a profile is
// missing.
func compareCostFiles(engine, ref []string, events int64, names [2]string) *CostCompare {
	e, err := costBreakdown(engine, events)
	if err != nil {
		return nil
	}
	r, err := costBreakdown(ref, events)
	if err != nil {
		return nil
	}
	return &CostCompare{Engine: e, Reference: r, Files: [2][]string{engine, ref}, Names: names}
}

// excess lists the parts where the engine spends more CPU per event than
// the reference, largest first.
func (c *CostCompare) excess() (parts []string, delta map[string]float64) {
	delta = map[string]float64{}
	for part, ns := range c.Engine.NsPerEvent {
		if part != partBroker {
			delta[part] = ns - c.Reference.NsPerEvent[part]
		}
	}
	for part, ns := range c.Reference.NsPerEvent {
		if _, ok := delta[part]; !ok && part != partBroker {
			delta[part] = -ns
		}
	}
	for part := range delta {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool {
		if delta[parts[i]] != delta[parts[j]] {
			return delta[parts[i]] > delta[parts[j]]
		}
		return parts[i] < parts[j]
	})
	return parts, delta
}

// Why is the sentence a missed target's row gets from the comparison:
// the CPU per event each side spent, the parts where the engine spent
// more, and what would cut the largest two. cores is the engine's median
// cores busy (CPU / wall) when known, of procs.
func (c *CostCompare) Why(cores float64, procs int) string {
	parts, delta := c.excess()
	var more []string
	for _, p := range parts {
		if delta[p] >= 5 {
			more = append(more, fmt.Sprintf("%s +%.0f", p, delta[p]))
		}
	}
	var less []string
	for i := len(parts) - 1; i >= 0; i-- {
		if delta[parts[i]] <= -5 {
			less = append(less, fmt.Sprintf("%s %.0f", parts[i], delta[parts[i]]))
		}
	}
	eng, ref := "the engine", "the reference"
	if c.Names[0] != "" {
		eng, ref = c.Names[0], c.Names[1]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "from one profiled run of each side over the same input (`%s` against `%s`), %s spent %.0f CPU ns/event and %s %.0f", shortNames(c.Files[0]), shortNames(c.Files[1]), eng, c.Engine.Total, ref, c.Reference.Total)
	if len(more) > 0 {
		fmt.Fprintf(&b, "; %s spent more on %s ns/event", eng, strings.Join(more, ", "))
	}
	if len(less) > 0 {
		fmt.Fprintf(&b, " and less on %s", strings.Join(less, ", "))
	}
	if cores > 0 && procs > 0 {
		idle := 1 - cores/float64(procs)
		fmt.Fprintf(&b, ". %s kept %.2f of %d cores busy: %.0f %% of its wall time was idle cores (waiting on synced writes, on a batch's last task, or between batches)", capitalize(eng), cores, procs, 100*idle)
	}
	var fix []string
	for _, p := range parts {
		if len(fix) == 2 || delta[p] < 5 {
			break
		}
		if r, ok := remedies[p]; ok {
			fix = append(fix, fmt.Sprintf("%s (%s)", p, r))
		}
	}
	if len(fix) > 0 {
		fmt.Fprintf(&b, ". What would close it: %s", strings.Join(fix, "; "))
	}
	return b.String() + "."
}

func shortNames(files []string) string {
	var names []string
	for _, f := range files {
		if i := strings.LastIndexByte(f, '/'); i >= 0 {
			f = f[i+1:]
		}
		names = append(names, f)
	}
	return strings.Join(names, "` + `")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// breakdownTable renders the breakdowns of profiles side by side as a
// Markdown table, CPU ns per event by part, one column per profile: specs
// are label=file (label=file1+file2 merges the processes of one run), each
// over events (-breakdown, -breakdown-events: before/after figures of one
// part of the work from the profiles of two builds).
func breakdownTable(specs []string, events int64) (string, error) {
	var labels []string
	var bds []Breakdown
	parts := map[string]bool{}
	for _, spec := range specs {
		label, files, ok := strings.Cut(spec, "=")
		if !ok {
			label, files = spec, spec
		}
		b, err := costBreakdown(strings.Split(files, "+"), events)
		if err != nil {
			return "", fmt.Errorf("breakdown of %s: %w", spec, err)
		}
		labels, bds = append(labels, label), append(bds, b)
		for part := range b.NsPerEvent {
			parts[part] = true
		}
	}
	names := make([]string, 0, len(parts))
	for part := range parts {
		names = append(names, part)
	}
	sort.Slice(names, func(i, j int) bool {
		if bds[0].NsPerEvent[names[i]] != bds[0].NsPerEvent[names[j]] {
			return bds[0].NsPerEvent[names[i]] > bds[0].NsPerEvent[names[j]]
		}
		return names[i] < names[j]
	})
	var w strings.Builder
	fmt.Fprintf(&w, "| part (CPU ns/event) | %s |\n|---|%s\n", strings.Join(labels, " | "), strings.Repeat("---|", len(labels)))
	for _, part := range names {
		fmt.Fprintf(&w, "| %s |", part)
		for _, b := range bds {
			fmt.Fprintf(&w, " %.0f |", b.NsPerEvent[part])
		}
		w.WriteString("\n")
	}
	w.WriteString("| **total** (broker excluded) |")
	for _, b := range bds {
		fmt.Fprintf(&w, " **%.0f** |", b.Total)
	}
	w.WriteString("\n")
	return w.String(), nil
}
