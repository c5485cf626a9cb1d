package task

import (
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
)

// recordDecoder turns a source record into a row of the declared schema:
// columns without From are decoded from the record's JSON value; columns
// with From take the record's metadata column of that name (the source
// kind's MetaColumns, e.g. Kafka's key or partition).
type recordDecoder struct {
	dec      *row.Decoder
	valueIdx []int // row position of each decoded value column
	meta     []metaCol
	tmp      row.Row
}

type metaCol struct {
	idx  int // row position
	meta int // index in the source kind's MetaColumns
}

func newRecordDecoder(s *query.Spec, p *query.Plan) *recordDecoder {
	d := &recordDecoder{}
	for i, f := range s.Source.Schema {
		if f.From != "" {
			// Validation resolved every from against the source's kind.
			m, _, _ := catalog.MetaColumn(&s.Source, f.From)
			d.meta = append(d.meta, metaCol{idx: i, meta: m})
			continue
		}
		d.valueIdx = append(d.valueIdx, i)
	}
	d.dec = row.NewDecoder(valueFields(s, p))
	d.dec.SetSessionTimeZone(s.SessionZone())
	return d
}

// ValueFields returns the decoder fields the map tasks decode a record's
// JSON value with: the schema's columns without From, in order, a column
// the query never reads marked Unused (checked, not converted). A
// reference program that wants the engine's decoding cost uses exactly
// this list.
func ValueFields(s *query.Spec) []row.Field {
	p, err := s.Plan()
	if err != nil {
		p = nil
	}
	return valueFields(s, p)
}

func valueFields(s *query.Spec, p *query.Plan) []row.Field {
	used := usedColumns(p)
	var fields []row.Field
	for _, f := range s.Source.Schema {
		if f.From != "" {
			continue
		}
		k, _ := row.ParseKind(f.Type)
		fields = append(fields, row.Field{Name: f.Name, Kind: k, Nullable: f.IsNullable(), Unused: used != nil && !used[f.Name]})
	}
	return fields
}

// decode fills dst (reused) from rec.
func (d *recordDecoder) decode(rec *source.Record, dst row.Row) (row.Row, error) {
	if len(d.meta) == 0 {
		return d.dec.Decode(rec.Value, dst)
	}
	var err error
	if d.tmp, err = d.dec.Decode(rec.Value, d.tmp); err != nil {
		return dst, err
	}
	n := len(d.valueIdx) + len(d.meta)
	if cap(dst) < n {
		dst = make(row.Row, n)
	}
	dst = dst[:n]
	for i, idx := range d.valueIdx {
		dst[idx] = d.tmp[i]
	}
	for _, m := range d.meta {
		var v row.Value
		if rec.Meta != nil {
			v = rec.Meta.Column(m.meta)
		}
		dst[m.idx] = v
	}
	return dst, nil
}

// Fields returns the decoder fields of the spec's schema (all columns, as
// read from a JSON value).
func Fields(s *query.Spec) []row.Field {
	fields := make([]row.Field, 0, len(s.Source.Schema))
	for _, f := range s.Source.Schema {
		k, _ := row.ParseKind(f.Type)
		fields = append(fields, row.Field{Name: f.Name, Kind: k, Nullable: f.IsNullable()})
	}
	return fields
}

// usedColumns returns the source columns the query reads (nil: all):
// its plan's (query.Plan.UsedSource), the same for sql: and aggregate:.
func usedColumns(p *query.Plan) map[string]bool {
	if p == nil {
		return nil
	}
	used := map[string]bool{}
	all := true
	for i, u := range p.UsedSource() {
		if u {
			used[p.Source[i].Name] = true
		} else {
			all = false
		}
	}
	if all {
		return nil
	}
	return used
}
