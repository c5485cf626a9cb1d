package explain

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
)

// Plan validates spec (the same Validate run uses, so a wrong spec gets
// the same *query.ValidationError) and returns its incremental plan.
func Plan(spec query.Spec) (string, error) {
	if err := catalog.Validate(spec); err != nil {
		return "", err
	}
	s := spec.WithDefaults()
	p := &planner{s: &s}
	if s.Aggregate != nil {
		l, err := agg.Compile(&s)
		if err != nil {
			return "", err
		}
		p.layout = l
	}
	return p.render(), nil
}

type planner struct {
	s      *query.Spec
	layout *agg.Layout
}

// node is one operator of the plan: a title and detail lines.
type node struct {
	title  string
	detail []string
}

func (p *planner) render() string {
	s := p.s
	var b strings.Builder
	fmt.Fprintf(&b, "== Incremental plan: %s (environment %s) ==\n", s.Name, s.Environment)
	nodes := p.nodes()
	// Spark prints the sink at the top and the source at the bottom.
	for i := len(nodes) - 1; i >= 0; i-- {
		depth := len(nodes) - 1 - i
		indent := strings.Repeat("   ", depth)
		prefix := indent
		if depth > 0 {
			prefix = strings.Repeat("   ", depth-1) + "+- "
		}
		fmt.Fprintf(&b, "%s%s\n", prefix, nodes[i].title)
		for _, d := range nodes[i].detail {
			fmt.Fprintf(&b, "%s   %s\n", indent, d)
		}
	}
	b.WriteString("\n== Batch ==\n")
	for _, l := range p.batch() {
		fmt.Fprintf(&b, "%s\n", l)
	}
	b.WriteString("\n== Numbers ==\n")
	for _, kv := range p.numbers() {
		fmt.Fprintf(&b, "%-24s %s\n", kv[0], kv[1])
	}
	return b.String()
}

// nodes lists the operators from the source up to the sink.
func (p *planner) nodes() []node {
	s := p.s
	ns := []node{p.source(), p.decode()}
	if w := s.Watermark; w != nil {
		ns = append(ns, node{
			title: fmt.Sprintf("EventTimeWatermark %s, delay %s", w.Column, d(w.Delay)),
			detail: []string{
				fmt.Sprintf("after batch N commits: watermark = max(%s read by batch N, truncated to ms) - %s; it never falls and starts at 1970-01-01T00:00:00Z", w.Column, d(w.Delay)),
				"batch N+1 uses it; the value is written in offsets/N+1 before the batch runs, so a re-run uses the same one",
			},
		})
	}
	if j := s.Join; j != nil {
		ns = append(ns, p.join(j))
	}
	if s.Aggregate == nil {
		ns = append(ns, node{
			title:  "Project [" + colNames(s.OutputSchema()) + "]",
			detail: []string{fmt.Sprintf("no aggregation: every row read is written once, in the batch that read it, spread over %d partitions whose reduce tasks write them; no state", s.ShufflePartitions)},
		})
	} else {
		ns = append(ns, p.aggregate()...)
	}
	return append(ns, p.sink())
}

// join is the stream-static join node.
func (p *planner) join(j *query.Join) node {
	added := colNames(p.s.JoinColumns())
	if added == "" {
		added = "nothing"
	}
	id := "the first 16 hex digits of the snapshot's content hash"
	if j.ManifestIDColumn != "" {
		id = "its column " + j.ManifestIDColumn
	}
	when := "taken when the query (re)starts, at its first batch"
	if j.RefreshInterval > 0 {
		when += fmt.Sprintf(", and again at the first batch boundary %s after the last", d(j.RefreshInterval))
	}
	unmatched := "an event whose key matches nothing keeps null dimension columns"
	if j.JoinType() == query.JoinInner {
		unmatched = "an event whose key matches nothing is dropped"
	}
	return node{
		title: fmt.Sprintf("Join %s [%s], static %s %s", j.JoinType(), strings.Join(j.Keys, ", "), j.JoinFormat(), j.Path),
		detail: []string{
			"adds " + added + "; " + unmatched + " (counted in progress join.numRowsUnmatched); no state, any output mode",
			"snapshot: " + when + "; stored in the checkpoint as manifests/<hash>.json; its manifest id is " + id,
			"offsets/N records the snapshot batch N joins against: a re-run of N joins the same one, whatever the files hold now; executors load it from the checkpoint",
		},
	}
}

func (p *planner) source() node {
	e := catalog.Explain(&p.s.Source)
	return node{title: e.Title, detail: e.Detail}
}

func (p *planner) decode() node {
	s := p.s
	var cols []string
	for _, f := range s.Source.Schema {
		c := f.Name + " " + f.Type
		if !f.IsNullable() {
			c += " not null"
		}
		if f.From != "" {
			c += " from " + f.From
		}
		cols = append(cols, c)
	}
	return node{
		title: fmt.Sprintf("Decode %s [%s]", s.Source.Format, strings.Join(cols, ", ")),
		detail: []string{
			"a record that is not a JSON object, has a value of the wrong type or lacks a non-nullable column is malformed:",
			"counted in numRowsMalformed and written with its reason to " + strings.TrimSuffix(s.BadRecordsDir(0), "batch_id=0/") + "batch_id=N/",
		},
	}
}

func (p *planner) aggregate() []node {
	s, l := p.s, p.layout
	a := s.Aggregate
	var ns []node
	keys := groupKeys(a)
	if w := a.Window; w != nil {
		per := int64(1)
		kind := "tumbling"
		if w.Slide != 0 && w.Slide != w.Size {
			kind = "sliding"
			per = ceilDiv(w.Size.Micros(), w.Slide.Micros())
		}
		ns = append(ns, node{
			title: fmt.Sprintf("WindowAssign window(%s, %s, %s, %s)", w.Column, d(w.Size), d(w.SlideOrSize()), d(w.StartTime)),
			detail: []string{
				fmt.Sprintf("%s: [start, end) with starts at startTime + k*%s; each row falls in %d window(s)", kind, d(w.SlideOrSize()), per),
				fmt.Sprintf("rows with a null %s are dropped", w.Column),
			},
		})
	}
	switch {
	case s.OutputMode == query.Complete:
		ns = append(ns, node{title: "NoLateFilter (complete mode drops nothing)"})
	case l.Bound == agg.WindowBound:
		ns = append(ns, node{
			title:  "DropLate window_end <= the previous batch's watermark",
			detail: []string{"per (row, window); counted in numRowsDroppedByWatermark"},
		})
	case l.Bound == agg.TimeBound:
		c := a.GroupBy[l.BoundGroup]
		ns = append(ns, node{
			title:  fmt.Sprintf("DropLate %s <= the previous batch's watermark", c),
			detail: []string{"counted in numRowsDroppedByWatermark"},
		})
	}
	ns = append(ns,
		node{
			title:  fmt.Sprintf("PartialAggregate keys=[%s], functions=[%s]", keys, measures(a, "partial_")),
			detail: []string{"in each map task: one partial row per key"},
		},
		node{
			title: fmt.Sprintf("Exchange hashpartitioning(%s, %d)", keys, s.ShufflePartitions),
			detail: []string{
				fmt.Sprintf("key hash %s mod %d picks the state partition; partials move map task -> the partition's reduce task", agg.KeyHashName, s.ShufflePartitions),
			},
		},
		node{
			title: fmt.Sprintf("StateStore provider %s, %d partitions", s.StateStore, s.ShufflePartitions),
			detail: []string{
				fmt.Sprintf("reduce task of batch N: load the partition's version N (committed by batch N-1), merge, write version N+1 to %s/state/0/<partition>/", strings.TrimSuffix(s.CheckpointLocation, "/")),
				fmt.Sprintf("a delta per changed partition per batch, a snapshot every %d deltas; the last %d batches are kept", s.SnapshotInterval, s.MinBatchesToRetain),
			},
		},
		node{
			title:  fmt.Sprintf("MergeAggregate keys=[%s], functions=[%s]", keys, measures(a, "merge_")),
			detail: []string{"the partials merged into the state rows of their keys"},
		},
		p.emit(),
	)
	return ns
}

func (p *planner) emit() node {
	s, l := p.s, p.layout
	bound := "window_end"
	if l.Bound == agg.TimeBound {
		bound = s.Aggregate.GroupBy[l.BoundGroup]
	}
	n := node{title: fmt.Sprintf("Emit outputMode %s", s.OutputMode)}
	switch s.OutputMode {
	case query.Append:
		n.detail = []string{
			fmt.Sprintf("a group is emitted once, with its final value, when %s <= this batch's watermark, and removed from state", bound),
			"an open group is never emitted",
		}
	case query.Update:
		n.detail = []string{"every group this batch changed is emitted with its new full value (a group may be emitted many times)"}
		if l.Bound != agg.NoBound {
			n.detail = append(n.detail, fmt.Sprintf("then groups with %s <= this batch's watermark are removed from state without output", bound))
		} else {
			n.detail = append(n.detail, "no event-time bound: groups are never removed and state grows with the number of keys")
		}
	case query.Complete:
		n.detail = []string{
			"the whole result table is emitted after every batch",
			"nothing is ever removed from state: it grows with the number of keys",
		}
	}
	return n
}

func (p *planner) sink() node {
	s := p.s
	switch {
	case s.Sink.Parquet != nil:
		pq := s.Sink.Parquet
		title := "ParquetSink " + pq.Path
		if pq.PartitionBy != "" {
			title += ", partitionBy " + pq.PartitionBy
		}
		detail := []string{
			"each reduce task writes its rows of batch N under names fixed by (batch, partition); a re-run rewrites the same names",
			fmt.Sprintf("commit: the batch's file list goes to %s/_sink_log/N, then commits/N; a batch already in _sink_log is skipped (exactly once)", strings.TrimSuffix(pq.Path, "/")),
			fmt.Sprintf("log: every %d batches a compacted entry N.compact lists every file so far; entries older than minBatchesToRetain (%d) are deleted in the background", compactInterval(pq), s.MinBatchesToRetain),
		}
		if pq.CompactClosedDates {
			detail = append(detail, "compactClosedDates: after each compacted entry, every window_date= partition behind the committed watermark is rewritten into few files, in the background")
		}
		return node{title: title, detail: detail}
	case s.Sink.JSONBatches != nil:
		return node{title: "JSONBatchesSink " + s.Sink.JSONBatches.Path, detail: []string{
			"batch N's rows go to batch_id=N/, replaced whole when the batch re-runs (idempotent on the batch id)",
		}}
	default:
		return node{title: "ConsoleSink", detail: []string{"prints each batch's rows; a re-run batch prints them again (labs only)"}}
	}
}

// batch lists the per-batch facts: trigger, checkpoint, no-data batches.
func (p *planner) batch() []string {
	s := p.s
	var out []string
	t := s.Trigger
	switch {
	case t.AvailableNow:
		out = append(out, "trigger availableNow: process what is available at start, in as many batches as the cap needs, then stop")
	case t.Once:
		out = append(out, "trigger once: exactly one batch, no no-data batch, then stop")
	case t.ProcessingTime > 0:
		out = append(out, fmt.Sprintf("trigger processingTime %s: a batch starts every %s (at once when the last one ran longer)", d(t.ProcessingTime), d(t.ProcessingTime)))
	default:
		out = append(out, "trigger default: the next batch starts as soon as the last one commits and there is data")
	}
	evicts := p.layout != nil && p.layout.Bound != agg.NoBound && s.OutputMode != query.Complete
	switch {
	case !evicts:
		out = append(out, "no-data batches: none (nothing for the watermark to close)")
	case !s.NoDataBatches():
		out = append(out, "no-data batches: off (noDataMicroBatches false): closed groups wait for the next batch with data")
	case t.Once:
		out = append(out, "no-data batches: not with trigger once")
	case t.NoDataBatchesAtOnce:
		out = append(out, "no-data batches: after a batch that raised the watermark, one more batch runs at once, without new data and without waiting for the trigger (noDataBatchesAtOnce), to close what it passed")
	default:
		out = append(out, "no-data batches: after a batch that raised the watermark, one more batch runs without new data to close what it passed")
	}
	cp := strings.TrimSuffix(s.CheckpointLocation, "/")
	out = append(out,
		fmt.Sprintf("checkpoint %s: offsets/N before the batch runs, commits/N after the sink committed; restart re-runs an uncommitted batch as logged", cp))
	if s.Environment == query.Production {
		out = append(out, "production: the checkpoint must be on an object store, and an empty one needs --allow-first-start=TICKET or --allow-replay=TICKET (recorded in its metadata)")
	}
	return out
}

func (p *planner) numbers() [][2]string {
	s := p.s
	var out [][2]string
	out = append(out, [2]string{"cap per trigger", p.cap()})
	if s.Aggregate == nil {
		out = append(out, [2]string{"state", "none"})
		return out
	}
	out = append(out,
		[2]string{"shuffle partitions", fmt.Sprintf("%d (frozen in the checkpoint)", s.ShufflePartitions)},
		[2]string{"state store", fmt.Sprintf("%s (frozen in the checkpoint)", s.StateStore)},
		[2]string{"state row", fmt.Sprintf("one per (%s): the key plus %s of measures", groupKeys(s.Aggregate), measureBytes(s.Aggregate))},
	)
	a, l := s.Aggregate, p.layout
	switch {
	case s.OutputMode == query.Complete || l.Bound == agg.NoBound:
		out = append(out, [2]string{"state expected", "every key ever seen: nothing is evicted"})
	case l.Bound == agg.WindowBound:
		w := a.Window
		open := ceilDiv(s.Watermark.Delay.Micros()+w.Size.Micros(), w.SlideOrSize().Micros())
		keys := "rows"
		if len(a.GroupBy) > 0 {
			keys = "distinct (" + strings.Join(a.GroupBy, ", ") + ") per window"
		}
		out = append(out,
			[2]string{"open windows", fmt.Sprintf("about %d = ceil((delay %s + size %s) / slide %s)", open, d(s.Watermark.Delay), d(w.Size), d(w.SlideOrSize()))},
			[2]string{"state expected", fmt.Sprintf("about %d x %s", open, keys)},
		)
	case l.Bound == agg.TimeBound:
		out = append(out, [2]string{"state expected", fmt.Sprintf("the keys whose %s is within %s of the newest event time", a.GroupBy[l.BoundGroup], d(s.Watermark.Delay))})
	}
	if b := s.StateBudget; b != nil {
		then := "the query is flagged (progress stateBudget.exceeded, sluice_state_budget_exceeded, the status page) and keeps running"
		if b.Stops() {
			then = "the query is flagged, then stops with a message naming the operator, its rows and bytes and the budget"
		}
		out = append(out, [2]string{"state budget", fmt.Sprintf("%s: checked after each batch commits (the batch is kept); past it %s", b, then)})
	}
	return out
}

func (p *planner) cap() string {
	if c := catalog.Explain(&p.s.Source).Cap; c != "" {
		return c
	}
	return "none"
}

func groupKeys(a *query.Aggregate) string {
	var k []string
	if a.Window != nil {
		k = append(k, "window")
	}
	k = append(k, a.GroupBy...)
	if len(k) == 0 {
		return "(no key: one global group)"
	}
	return strings.Join(k, ", ")
}

func measures(a *query.Aggregate, prefix string) string {
	var ms []string
	for _, m := range a.Measures {
		arg := m.Column
		if arg == "" {
			arg = "1"
		}
		ms = append(ms, fmt.Sprintf("%s%s(%s) AS %s", prefix, m.Fn, arg, m.Name))
	}
	return strings.Join(ms, ", ")
}

// measureBytes is the size of a state row's measures, roughly.
func measureBytes(a *query.Aggregate) string {
	b := 0
	hll := 0
	for _, m := range a.Measures {
		switch m.Fn {
		case query.FnAvg:
			b += 16
		case query.FnApproxCountDistinct:
			hll++
		default:
			b += 8
		}
	}
	s := fmt.Sprintf("about %d bytes", b)
	if hll > 0 {
		s += fmt.Sprintf(" and %d HyperLogLog sketch(es) of up to 16 KiB", hll)
	}
	return s
}

func colNames(cols []query.Column) string {
	var n []string
	for _, c := range cols {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(a) / float64(b)))
}

func d(x query.Duration) string { return time.Duration(x).String() }

// compactInterval is sink.parquet.compactInterval with its default.
func compactInterval(pq *query.ParquetSink) int {
	if pq.CompactInterval > 0 {
		return pq.CompactInterval
	}
	return 10
}
