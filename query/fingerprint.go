package query

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/row"
)

// Fingerprint is the hex SHA-256 of the canonical JSON of the whole spec
// with defaults applied: two specs that differ only in spelling (a duration
// written "5m" or "5 minutes", a default written out or left out, a
// startingOffsets mapping or the same JSON string, a tumbling window with or
// without slide equal to size) have the same
// fingerprint; any change of meaning changes it. Secret Kafka client
// options (passwords, JAAS configurations, keys, tokens) count only by
// name: their values are replaced by a marker before hashing, so the
// fingerprint stored in a checkpoint's metadata reveals nothing about a
// secret (no offline guessing against it), and rotating a password keeps
// the fingerprint.
func (s *Spec) Fingerprint() string {
	d := s.canonical()
	b, err := json.Marshal(&d)
	if err != nil {
		// Every field of Spec marshals; this is a programming error.
		panic(fmt.Sprintf("query: marshal spec for fingerprint: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonical returns a copy of s with defaults applied and every optional
// setting spelled out, sharing nothing mutable with s.
func (s *Spec) canonical() Spec {
	d := s.WithDefaults()
	yes := func(b bool) *bool { return &b }
	d.NoDataMicroBatches = yes(d.NoDataBatches())
	schema := make([]Field, len(d.Source.Schema))
	for i, f := range d.Source.Schema {
		f.Nullable = yes(f.IsNullable())
		schema[i] = f
	}
	d.Source.Schema = schema
	if d.Aggregate != nil {
		a := *d.Aggregate
		if a.Window != nil {
			w := *a.Window
			w.Slide = w.SlideOrSize()
			a.Window = &w
		}
		d.Aggregate = &a
	}
	if d.Source.Kafka != nil {
		k := *d.Source.Kafka
		k.FailOnDataLoss = yes(k.FailsOnDataLoss())
		for _, p := range []*string{&k.StartingOffsets, &k.Assign} {
			if c, err := stringOrMapping(mustJSON(*p)); err == nil {
				*p = c
			}
		}
		if k.Options != nil {
			opts := make(map[string]string, len(k.Options))
			for name, v := range k.Options {
				if secretOption(name) {
					v = SecretSet
				}
				opts[name] = v
			}
			k.Options = opts
		}
		d.Source.Kafka = &k
	}
	if d.Join != nil {
		j := *d.Join
		j.Type, j.Format = j.JoinType(), j.JoinFormat()
		d.Join = &j
	}
	return d
}

// SecretSet replaces a secret option's value where only the fact that it
// is set may show (the fingerprint).
const SecretSet = "[secret set]"

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// stateLayout is what the layout of an aggregation's state depends on. The
// number of state partitions and the state provider are not in it: they
// are frozen in the checkpoint separately.
type stateLayout struct {
	Version         int            `json:"v"`
	OutputMode      OutputMode     `json:"outputMode"`
	WatermarkColumn string         `json:"watermarkColumn,omitempty"`
	Aggregate       bool           `json:"aggregate"`
	Window          *stateWindow   `json:"window,omitempty"`
	GroupBy         []stateColumn  `json:"groupBy,omitempty"`
	Measures        []stateMeasure `json:"measures,omitempty"`
	// Session and Dedup are omitted when unset, so a query without them
	// keeps the fingerprint it had before they existed.
	Session *stateSession `json:"sessionWindow,omitempty"`
	Dedup   []stateColumn `json:"dedup,omitempty"`
}

type stateWindow struct {
	Column    stateColumn `json:"column"`
	SizeUs    int64       `json:"sizeUs"`
	SlideUs   int64       `json:"slideUs"`
	StartUs   int64       `json:"startUs"`
	SizeText  string      `json:"-"`
	SlideText string      `json:"-"`
	StartText string      `json:"-"`
}

type stateSession struct {
	Column  stateColumn `json:"column"`
	GapUs   int64       `json:"gapUs"`
	GapText string      `json:"-"`
}

type stateColumn struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Expr is a computed column's expression (a SQL grouping key or
	// aggregate argument that is not a column), as the plan prints it;
	// omitted for a column, so a YAML query keeps its fingerprint.
	Expr string `json:"expr,omitempty"`
}

type stateMeasure struct {
	Name   string      `json:"name"`
	Fn     string      `json:"fn"`
	Column stateColumn `json:"column"`
}

const stateLayoutVersion = 1

func (s *Spec) stateLayout() stateLayout {
	d := s.WithDefaults()
	kinds := map[string]row.Kind{}
	for _, c := range d.InputSchema() {
		if _, dup := kinds[c.Name]; !dup {
			kinds[c.Name] = c.Kind
		}
	}
	col := func(name string) stateColumn {
		if name == "" {
			return stateColumn{}
		}
		k, ok := kinds[name]
		if !ok {
			return stateColumn{Name: name, Kind: "missing"}
		}
		return stateColumn{Name: name, Kind: k.String()}
	}
	l := stateLayout{Version: stateLayoutVersion, OutputMode: d.OutputMode}
	if d.Watermark != nil {
		l.WatermarkColumn = d.Watermark.Column
	}
	if d.SQL != "" {
		if p, err := d.Plan(); err == nil {
			return planStateLayout(l, p)
		}
		// An invalid query never runs; its SQL keeps it apart.
		l.Aggregate = true
		l.GroupBy = []stateColumn{{Name: "sql", Kind: "invalid", Expr: d.SQL}}
		return l
	}
	if d.Dedup != nil {
		l.Dedup = []stateColumn{}
		for _, k := range d.Dedup.Keys {
			l.Dedup = append(l.Dedup, col(k))
		}
	}
	a := d.Aggregate
	if a == nil {
		return l
	}
	l.Aggregate = true
	if w := a.SessionWindow; w != nil {
		l.Session = &stateSession{Column: col(w.Column), GapUs: w.Gap.Micros(), GapText: dur(w.Gap)}
	}
	if w := a.Window; w != nil {
		l.Window = &stateWindow{
			Column:    col(w.Column),
			SizeUs:    w.Size.Micros(),
			SlideUs:   w.SlideOrSize().Micros(),
			StartUs:   w.StartTime.Micros(),
			SizeText:  dur(w.Size),
			SlideText: dur(w.SlideOrSize()),
			StartText: dur(w.StartTime),
		}
	}
	for _, g := range a.GroupBy {
		l.GroupBy = append(l.GroupBy, col(g))
	}
	for _, m := range a.Measures {
		l.Measures = append(l.Measures, stateMeasure{Name: m.Name, Fn: m.Fn, Column: col(m.Column)})
	}
	return l
}

// planStateLayout is what the state of a SQL query depends on, from its
// plan: the dedup keys, and for an aggregate its window or session
// window, its grouping keys and its measures (with the expressions of
// computed keys and arguments). A SQL aggregate over plain columns has
// the layout of the same aggregate in YAML, so the two share a state
// fingerprint (the tile can move between them on one checkpoint).
// Filters, HAVING and the projection are not in it: they do not change
// what the state holds.
func planStateLayout(l stateLayout, p *Plan) stateLayout {
	cols := p.MapRow()
	nIn := len(p.Input())
	col := func(i int) stateColumn {
		if i < 0 || i >= len(cols) {
			return stateColumn{}
		}
		c := stateColumn{Name: cols[i].Name, Kind: stateKind(cols[i].Type)}
		if i >= nIn {
			c.Expr = p.Computed[i-nIn].Expr.String()
		}
		return c
	}
	if d := p.Dedup; d != nil {
		l.Dedup = []stateColumn{}
		for _, k := range d.Keys {
			l.Dedup = append(l.Dedup, col(k))
		}
	}
	a := p.Aggregate
	if a == nil {
		return l
	}
	l.Aggregate = true
	if w := a.Window; w != nil {
		l.Window = &stateWindow{Column: col(w.Column), SizeUs: w.Size, SlideUs: w.Slide, StartUs: w.StartTime,
			SizeText: usText(w.Size), SlideText: usText(w.Slide), StartText: usText(w.StartTime)}
	}
	if sw := a.Session; sw != nil {
		l.Session = &stateSession{Column: col(sw.Column), GapUs: sw.Gap, GapText: usText(sw.Gap)}
	}
	for _, g := range a.GroupBy {
		l.GroupBy = append(l.GroupBy, col(g))
	}
	for _, m := range a.Measures {
		l.Measures = append(l.Measures, stateMeasure{Name: m.Name, Fn: m.Fn, Column: col(m.Arg)})
	}
	return l
}

// stateKind names a type in the state layout: a schema kind as YAML
// names it (string, long, ...), the other types by their SQL names (int,
// date, decimal(p,s)).
func stateKind(t expr.Type) string {
	switch t.Kind {
	case row.Int, row.Date, row.Decimal:
		return t.String()
	}
	return t.Kind.String()
}

func usText(us int64) string { return dur(Duration(time.Duration(us) * time.Microsecond)) }

// StateFingerprint is the hex SHA-256 of what the layout of the query's
// state depends on: the output mode, the watermark column (not its delay),
// the dedup keys, and for an aggregation its window (column, size, slide,
// start time) or session window (column, gap), its groupBy columns and its
// measures (name, function, column), each column with its type. A checkpoint whose state was written under another state
// fingerprint cannot be read by this query: a new checkpoint is required.
// shufflePartitions and stateStore are not included; the checkpoint freezes
// them separately. Changing the sink, the source, the trigger or the
// watermark delay keeps the state fingerprint.
func (s *Spec) StateFingerprint() string {
	l := s.stateLayout()
	b, err := json.Marshal(&l)
	if err != nil {
		panic(fmt.Sprintf("query: marshal state layout: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// StateSchemaDescription describes in one line the facts StateFingerprint
// covers, for errors that show an old and a new definition side by side:
//
//	outputMode append; watermark on event_time; window(event_time timestamp, size 5m0s, slide 5m0s, start 0s); groupBy [course_id string]; measures [event_count = count(*)]
func (s *Spec) StateSchemaDescription() string {
	l := s.stateLayout()
	parts := []string{"outputMode " + string(l.OutputMode)}
	if l.WatermarkColumn != "" {
		parts = append(parts, "watermark on "+l.WatermarkColumn)
	} else {
		parts = append(parts, "no watermark")
	}
	if l.Dedup != nil {
		ks := make([]string, len(l.Dedup))
		for i, k := range l.Dedup {
			ks[i] = k.Name + " " + k.Kind
		}
		parts = append(parts, "dedup ["+strings.Join(ks, ", ")+"]")
	}
	if !l.Aggregate {
		if l.Dedup != nil {
			parts = append(parts, "no aggregation")
		} else {
			parts = append(parts, "no aggregation (no state)")
		}
		return strings.Join(parts, "; ")
	}
	if w := l.Window; w != nil {
		parts = append(parts, fmt.Sprintf("window(%s %s, size %s, slide %s, start %s)",
			w.Column.Name, w.Column.Kind, w.SizeText, w.SlideText, w.StartText))
	} else if w := l.Session; w != nil {
		parts = append(parts, fmt.Sprintf("session_window(%s %s, gap %s)", w.Column.Name, w.Column.Kind, w.GapText))
	} else {
		parts = append(parts, "no window")
	}
	gs := make([]string, len(l.GroupBy))
	for i, g := range l.GroupBy {
		gs[i] = g.describe()
	}
	parts = append(parts, "groupBy ["+strings.Join(gs, ", ")+"]")
	ms := make([]string, len(l.Measures))
	for i, m := range l.Measures {
		arg := "*"
		if m.Column.Name != "" {
			arg = m.Column.describe()
		}
		ms[i] = fmt.Sprintf("%s = %s(%s)", m.Name, m.Fn, arg)
	}
	parts = append(parts, "measures ["+strings.Join(ms, ", ")+"]")
	return strings.Join(parts, "; ")
}

// describe is "name kind", or "name kind = expr" for a computed column.
func (c stateColumn) describe() string {
	if c.Expr != "" {
		return c.Name + " " + c.Kind + " = " + c.Expr
	}
	return c.Name + " " + c.Kind
}
