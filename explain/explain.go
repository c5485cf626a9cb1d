package explain

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/expr"
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
	qp, err := s.Plan()
	if err != nil {
		return "", err
	}
	p := &planner{s: &s, plan: qp, cols: qp.MapRow()}
	if qp.Aggregate != nil {
		l, err := agg.CompilePlan(qp, s.OutputMode)
		if err != nil {
			return "", err
		}
		p.layout = l
	}
	return p.render(), nil
}

// planner renders a query's plan (query.Plan: the same for sql: and
// aggregate:, so the tile in SQL and in YAML explain the same).
type planner struct {
	s      *query.Spec
	plan   *query.Plan
	cols   []query.PlanColumn // the map row's
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
	s, qp := p.s, p.plan
	ns := []node{p.source(), p.decode()}
	if len(qp.PreFilter) > 0 {
		ns = append(ns, node{
			title: "Filter " + exprs(qp.PreFilter) + ", below the watermark",
			detail: []string{
				"deterministic and does not read the event-time column: pushed below EventTimeWatermark (Spark's PushPredicateThroughNonJoin), so a row it drops does not count toward the watermark",
				"a row whose expression fails is malformed (counted in numRowsMalformed, set aside with the reason)",
			},
		})
	}
	if w := s.Watermark; w != nil {
		ns = append(ns, node{
			title: fmt.Sprintf("EventTimeWatermark %s, delay %s", w.Column, d(w.Delay)),
			detail: []string{
				fmt.Sprintf("after batch N commits: watermark = max(%s read by batch N, truncated to ms) - %s; it never falls and starts at 1970-01-01T00:00:00Z", w.Column, d(w.Delay)),
				"batch N+1 uses it; the value is written in offsets/N+1 before the batch runs, so a re-run uses the same one",
			},
		})
	}
	if qp.Dedup != nil {
		ns = append(ns, p.dedup()...)
	}
	if j := s.Join; j != nil && qp.Join != nil {
		ns = append(ns, p.join(j))
	}
	if len(qp.Filter) > 0 {
		ns = append(ns, node{
			title: "Filter " + exprs(qp.Filter),
			detail: []string{
				"above the watermark (it reads the event-time column or the static view's columns, or follows a deduplication): rows it drops still count toward the watermark",
			},
		})
	}
	for _, c := range qp.Computed {
		ns = append(ns, node{
			title:  fmt.Sprintf("Compute %s = %s", c.Name, c.Expr),
			detail: []string{"in each map task, before the partial aggregate; a row whose expression fails is malformed"},
		})
	}
	if qp.Aggregate == nil {
		var detail []string
		switch {
		case qp.Dedup != nil:
			detail = []string{"every row the deduplication keeps is written once, in the batch that read it, by its partition's reduce task"}
		default:
			detail = []string{fmt.Sprintf("no aggregation: every row read is written once, in the batch that read it, spread over %d partitions whose reduce tasks write them; no state", s.ShufflePartitions)}
		}
		if qp.Project != nil {
			detail = append(detail, "a row whose expression fails is malformed")
		}
		ns = append(ns, node{title: p.project(), detail: detail})
	} else {
		ns = append(ns, p.aggregate()...)
		if len(qp.Having) > 0 {
			ns = append(ns, node{
				title:  "Filter (having) " + exprs(qp.Having),
				detail: []string{"in the reduce task, on each emitted row of the aggregate; a row whose expression fails is malformed (set aside with the aggregate's row)"},
			})
		}
		if qp.Project != nil {
			ns = append(ns, node{
				title:  p.project(),
				detail: []string{"in the reduce task, on each emitted row"},
			})
		}
	}
	return append(ns, p.sink())
}

// project is the output projection's title: the columns written, with
// the expression each is computed by when it is not a column of the
// same name.
func (p *planner) project() string {
	qp := p.plan
	if qp.Project == nil {
		return "Project [" + colNames(qp.OutputColumns()) + "]"
	}
	var parts []string
	for _, x := range qp.Project {
		if x.Expr.Op == expr.OpColumn && x.Expr.Name == x.Name {
			parts = append(parts, x.Name)
			continue
		}
		parts = append(parts, x.Expr.String()+" AS "+x.Name)
	}
	return "Project [" + strings.Join(parts, ", ") + "]"
}

// dedup is the deduplication's nodes: its map side, the exchange by key,
// its state.
func (p *planner) dedup() []node {
	s, dd := p.s, p.plan.Dedup
	keys := strings.Join(dd.Names, ", ")
	return []node{
		{
			title: fmt.Sprintf("DropDuplicatesWithinWatermark [%s] (map side)", keys),
			detail: []string{
				"a row whose event time is at or before the previous batch's watermark is dropped as late (numRowsDroppedByWatermark)",
				"in each map task, the first row of a key in read order is kept; later ones are duplicates (numDroppedDuplicateRows)",
			},
		},
		{
			title:  fmt.Sprintf("Exchange hashpartitioning(%s, %d)", keys, s.ShufflePartitions),
			detail: []string{fmt.Sprintf("key hash %s mod %d picks the state partition; each map task's rows move to it in read order", agg.KeyHashName, s.ShufflePartitions)},
		},
		{
			title: fmt.Sprintf("DropDuplicatesWithinWatermark [%s], StateStore provider %s, %d partitions", keys, s.StateStore, s.ShufflePartitions),
			detail: []string{
				"reduce task of batch N: the first row of a key in (map task, read order) is kept unless the key is in state; a kept key is stored until the watermark reaches its event time + " + d(s.Watermark.Delay),
				fmt.Sprintf("state in %s/state/0/<partition>/; after the batch, keys whose time is up leave (a no-data batch follows a rise of the watermark to evict them)", strings.TrimSuffix(s.CheckpointLocation, "/")),
			},
		},
	}
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
	s, l, a := p.s, p.layout, p.plan.Aggregate
	var ns []node
	keys := p.groupKeys()
	if w := a.Window; w != nil {
		per := int64(1)
		kind := "tumbling"
		if w.Slide != w.Size {
			kind = "sliding"
			per = ceilDiv(w.Size, w.Slide)
		}
		col := p.cols[w.Column].Name
		ns = append(ns, node{
			title: fmt.Sprintf("WindowAssign window(%s, %s, %s, %s)", col, us(w.Size), us(w.Slide), us(w.StartTime)),
			detail: []string{
				fmt.Sprintf("%s: [start, end) with starts at startTime + k*%s; each row falls in %d window(s)", kind, us(w.Slide), per),
				fmt.Sprintf("rows with a null %s are dropped", col),
			},
		})
	}
	if sw := a.Session; sw != nil {
		col := p.cols[sw.Column].Name
		ns = append(ns, node{
			title: fmt.Sprintf("SessionWindowAssign session_window(%s, %s)", col, us(sw.Gap)),
			detail: []string{
				fmt.Sprintf("a row opens [%s, %s + %s); sessions of a key merge when one starts at or before another's end", col, col, us(sw.Gap)),
				fmt.Sprintf("rows with a null %s are dropped", col),
			},
		})
	}
	switch {
	case l.SessionLate:
		ns = append(ns, node{
			title:  "DropLate session_end <= the previous batch's watermark",
			detail: []string{"per row, its own session [t, t + gap); in every output mode; counted in numRowsDroppedByWatermark"},
		})
	case s.OutputMode == query.Complete:
		ns = append(ns, node{title: "NoLateFilter (complete mode drops nothing)"})
	case l.Bound == agg.WindowBound:
		ns = append(ns, node{
			title:  "DropLate window_end <= the previous batch's watermark",
			detail: []string{"per (row, window); counted in numRowsDroppedByWatermark"},
		})
	case l.Bound == agg.TimeBound:
		c := p.cols[a.GroupBy[l.BoundGroup]].Name
		ns = append(ns, node{
			title:  fmt.Sprintf("DropLate %s <= the previous batch's watermark", c),
			detail: []string{"counted in numRowsDroppedByWatermark"},
		})
	}
	partial := "in each map task: one partial row per key"
	if l.Session {
		partial = "in each map task: one partial row per key and session, a key's overlapping sessions merged"
	}
	exchange := fmt.Sprintf("key hash %s mod %d picks the state partition; partials move map task -> the partition's reduce task", agg.KeyHashName, s.ShufflePartitions)
	if l.Session {
		exchange = fmt.Sprintf("key hash %s of the key without its session mod %d: every session of a key meets in one reduce task", agg.KeyHashName, s.ShufflePartitions)
	}
	ns = append(ns,
		node{
			title:  fmt.Sprintf("PartialAggregate keys=[%s], functions=[%s]", keys, p.measures("partial_")),
			detail: []string{partial},
		},
		node{
			title:  fmt.Sprintf("Exchange hashpartitioning(%s, %d)", keys, s.ShufflePartitions),
			detail: []string{exchange},
		},
		node{
			title: fmt.Sprintf("StateStore provider %s, %d partitions", s.StateStore, s.ShufflePartitions),
			detail: []string{
				fmt.Sprintf("reduce task of batch N: load the partition's version N (committed by batch N-1), merge, write version N+1 to %s/state/0/<partition>/", strings.TrimSuffix(s.CheckpointLocation, "/")),
				fmt.Sprintf("a delta per changed partition per batch, a snapshot every %d deltas; the last %d batches are kept", s.SnapshotInterval, s.MinBatchesToRetain),
			},
		},
		node{
			title:  fmt.Sprintf("MergeAggregate keys=[%s], functions=[%s]", keys, p.measures("merge_")),
			detail: []string{"the partials merged into the state rows of their keys"},
		},
		p.emit(),
	)
	return ns
}

func (p *planner) emit() node {
	s, l := p.s, p.layout
	bound := "window_end"
	switch {
	case l.Bound == agg.TimeBound:
		bound = p.cols[p.plan.Aggregate.GroupBy[l.BoundGroup]].Name
	case l.Session:
		bound = "session_end"
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
	evicts := p.layout != nil && p.layout.Bound != agg.NoBound && s.OutputMode != query.Complete || p.plan.Dedup != nil
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
	s, qp := p.s, p.plan
	var out [][2]string
	out = append(out, [2]string{"cap per trigger", p.cap()})
	if !qp.Stateful() {
		out = append(out, [2]string{"state", "none"})
		return out
	}
	out = append(out,
		[2]string{"shuffle partitions", fmt.Sprintf("%d (frozen in the checkpoint)", s.ShufflePartitions)},
		[2]string{"state store", fmt.Sprintf("%s (frozen in the checkpoint)", s.StateStore)},
	)
	if dd := qp.Dedup; dd != nil {
		out = append(out,
			[2]string{"state row", fmt.Sprintf("two per (%s): the key and its expiry, and an index row by expiry", strings.Join(dd.Names, ", "))},
			[2]string{"state expected", fmt.Sprintf("the keys whose rows' event times are within %s of the watermark", d(s.Watermark.Delay))},
		)
	}
	if a := qp.Aggregate; a != nil {
		l := p.layout
		row := fmt.Sprintf("one per (%s): the key plus %s of measures", p.groupKeys(), p.measureBytes())
		if l.Session {
			row = fmt.Sprintf("one per key (%s) holding its open sessions, each with %s of measures, and an index row per session by its end", p.groupKeys(), p.measureBytes())
		}
		out = append(out, [2]string{"state row", row})
		switch {
		case s.OutputMode == query.Complete || l.Bound == agg.NoBound:
			out = append(out, [2]string{"state expected", "every key ever seen: nothing is evicted"})
		case l.Bound == agg.WindowBound:
			w := a.Window
			open := ceilDiv(s.Watermark.Delay.Micros()+w.Size, w.Slide)
			keys := "rows"
			if len(a.GroupBy) > 0 {
				keys = "distinct (" + p.groupNames() + ") per window"
			}
			out = append(out,
				[2]string{"open windows", fmt.Sprintf("about %d = ceil((delay %s + size %s) / slide %s)", open, d(s.Watermark.Delay), us(w.Size), us(w.Slide))},
				[2]string{"state expected", fmt.Sprintf("about %d x %s", open, keys)},
			)
		case l.Bound == agg.TimeBound:
			out = append(out, [2]string{"state expected", fmt.Sprintf("the keys whose %s is within %s of the newest event time", p.cols[a.GroupBy[l.BoundGroup]].Name, d(s.Watermark.Delay))})
		case l.Bound == agg.SessionBound:
			out = append(out, [2]string{"state expected", fmt.Sprintf("the sessions of each key that end after the watermark (within about %s + gap %s of the newest event time)", d(s.Watermark.Delay), us(a.Session.Gap))})
		}
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

// groupKeys names the aggregate's key: window or session_window, then
// the grouping columns.
func (p *planner) groupKeys() string {
	a := p.plan.Aggregate
	var k []string
	if a.Window != nil {
		k = append(k, "window")
	}
	if a.Session != nil {
		k = append(k, "session_window")
	}
	if g := p.groupNames(); g != "" {
		k = append(k, g)
	}
	if len(k) == 0 {
		return "(no key: one global group)"
	}
	return strings.Join(k, ", ")
}

func (p *planner) groupNames() string {
	var k []string
	for _, g := range p.plan.Aggregate.GroupBy {
		k = append(k, p.cols[g].Name)
	}
	return strings.Join(k, ", ")
}

func (p *planner) measures(prefix string) string {
	var ms []string
	for _, m := range p.plan.Aggregate.Measures {
		arg := "1"
		if m.Arg >= 0 {
			arg = p.cols[m.Arg].Name
		}
		ms = append(ms, fmt.Sprintf("%s%s(%s) AS %s", prefix, m.Fn, arg, m.Name))
	}
	return strings.Join(ms, ", ")
}

// measureBytes is the size of a state row's measures, roughly.
func (p *planner) measureBytes() string {
	b := 0
	hll := 0
	for _, m := range p.plan.Aggregate.Measures {
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

func exprs(es []*expr.Expr) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return strings.Join(s, " AND ")
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

// us writes microseconds as a duration.
func us(x int64) string { return (time.Duration(x) * time.Microsecond).String() }

// compactInterval is sink.parquet.compactInterval with its default.
func compactInterval(pq *query.ParquetSink) int {
	if pq.CompactInterval > 0 {
		return pq.CompactInterval
	}
	return 10
}
