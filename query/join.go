package query

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/row"
)

// Join is a stream-static join: every event row is joined, on the On
// columns, to a static dimension (a lesson manifest, say) read from Parquet
// or JSON-lines files under Path. The dimension is a snapshot taken when
// the query starts (and again every RefreshInterval, at a batch boundary);
// the snapshot each batch joins against is recorded in its offset-log
// entry, so a re-run of the batch joins against the same snapshot even if
// the files changed since. The join keeps no state and works in every
// output mode (Spark's stream-static join).
type Join struct {
	// Path is the directory (local or s3://) holding the dimension's files;
	// every file under it with the format's extension is read (names
	// starting with _ or . are skipped, as Spark does).
	Path string `json:"path"`
	// Format is parquet (default; files ending .parquet) or json (JSON
	// lines; files ending .json or .jsonl).
	Format string `json:"format,omitempty"`
	// Keys lists the join columns (Spark's on; not named on because
	// YAML 1.1 reads a bare on as true): each is a column of source.schema and of
	// the dimension, with the source column's type. A null key matches
	// nothing.
	Keys []string `json:"keys"`
	// Type is left (default: events without a match keep null dimension
	// columns) or inner (events without a match are dropped).
	Type string `json:"type,omitempty"`
	// Columns are the dimension columns added to each event row (after the
	// source columns), usable in aggregate.groupBy and measures and written
	// by a query without an aggregate.
	Columns []JoinColumn `json:"columns,omitempty"`
	// ManifestIDColumn names a dimension column holding the snapshot's
	// identity (one value in every row). Empty: the identity is a hash of
	// the snapshot's content.
	ManifestIDColumn string `json:"manifestIdColumn,omitempty"`
	// WithManifestID adds the snapshot's identity to each event row as the
	// string column manifest_id.
	WithManifestID bool `json:"withManifestId,omitempty"`
	// RefreshInterval, when set, re-reads the dimension at the first batch
	// boundary this long after the current snapshot was taken. Zero: one
	// snapshot per run of the query.
	RefreshInterval Duration `json:"refreshInterval,omitempty"`
	// Stream (a second streaming source, any shape) is parsed only so
	// that a stream-stream join can be refused with Spark's reason.
	Stream map[string]any `json:"stream,omitempty"`
	// View names the static view in the SQL of sql: (JOIN <view> ON ...).
	View string `json:"view,omitempty"`
}

// JoinColumn is a dimension column a join adds to each event row.
type JoinColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Join types and formats.
const (
	JoinLeft      = "left"
	JoinInner     = "inner"
	JoinParquet   = "parquet"
	JoinJSON      = "json"
	ManifestIDCol = "manifest_id"
)

// JoinType returns the join type, left by default.
func (j *Join) JoinType() string {
	if j.Type == "" {
		return JoinLeft
	}
	return j.Type
}

// JoinFormat returns the dimension's format, parquet by default.
func (j *Join) JoinFormat() string {
	if j.Format == "" {
		return JoinParquet
	}
	return j.Format
}

// JoinColumns returns the columns the join adds to an event row, in order:
// the dimension columns, then manifest_id when withManifestId is set.
func (s *Spec) JoinColumns() []Column {
	j := s.Join
	if j == nil {
		return nil
	}
	cols := make([]Column, 0, len(j.Columns)+1)
	for _, f := range j.Columns {
		k, _ := row.ParseKind(f.Type)
		cols = append(cols, Column{Name: f.Name, Kind: k})
	}
	if j.WithManifestID {
		cols = append(cols, Column{Name: ManifestIDCol, Kind: row.String})
	}
	return cols
}

// join checks the join block; it adds the joined columns to the
// columns later fields (groupBy, measures) may name.
func (v *validator) join() {
	j := v.s.Join
	if j == nil {
		return
	}
	const p = "join."
	if j.Stream != nil {
		mode := v.s.OutputMode
		if mode != Append && mode != "" {
			// Spark's UnsupportedOperationChecker, word for word.
			v.add(p+"stream", "", "is refused: Join between two streaming DataFrames/Datasets is not supported in %s output mode, only in Append output mode", titleMode(mode))
		} else {
			v.add(p+"stream", "", "is refused: Sluice joins a stream only with a static dimension (join.path); a join between two streams needs join state and watermarks on both sides, which Sluice does not keep")
		}
	}
	if j.Path == "" {
		v.add(p+"path", "", "required: the directory (or s3:// URI) of the dimension's Parquet or JSON-lines files")
	}
	switch j.Format {
	case "", JoinParquet, JoinJSON:
	default:
		v.add(p+"format", j.Format, "is not a dimension format: use parquet or json (JSON lines)")
	}
	switch j.Type {
	case "", JoinLeft, JoinInner:
	case "right", "full", "outer", "full_outer", "right_outer":
		v.add(p+"type", j.Type, "is refused: a %s join with a static dimension would emit dimension rows no event matched, which a stream cannot know are final (Spark refuses it too); use left or inner", j.Type)
	default:
		v.add(p+"type", j.Type, "is not a join type: use left (keep unmatched events) or inner (drop them)")
	}
	if len(j.Keys) == 0 {
		v.add(p+"keys", "", "required: the join columns, e.g. [lesson_id]")
	}
	seen := map[string]string{}
	for name := range v.cols {
		seen[name] = "source.schema"
	}
	for i, c := range j.Keys {
		f := fmt.Sprintf("%skeys[%d]", p, i)
		switch {
		case c == "":
			v.add(f, "", "required: a column name")
		case slices.Contains(j.Keys[:i], c):
			v.add(f, c, "is listed twice")
		default:
			v.column(f, c)
		}
	}
	for i, c := range j.Columns {
		f := fmt.Sprintf("%scolumns[%d]", p, i)
		k, ok := row.ParseKind(c.Type)
		switch {
		case c.Name == "":
			v.add(f+".name", "", "required: a dimension column name")
			continue
		case seen[c.Name] != "":
			v.add(f+".name", c.Name, "clashes with a column of %s: joined columns need distinct names", seen[c.Name])
			continue
		case slices.Contains(j.Keys, c.Name):
			v.add(f+".name", c.Name, "is a join column (join.keys): the event's own value is kept; list only the columns to add")
			continue
		}
		if !ok {
			v.add(f+".type", c.Type, "is not a type: use string, long, double, boolean or timestamp")
			continue
		}
		seen[c.Name] = "join.columns"
		v.cols[c.Name] = k
		v.colOrder = append(v.colOrder, c.Name)
	}
	if j.WithManifestID {
		if seen[ManifestIDCol] != "" {
			v.add(p+"withManifestId", "true", "adds the column %s, which clashes with a column of %s: rename that column", ManifestIDCol, seen[ManifestIDCol])
		} else {
			v.cols[ManifestIDCol] = row.String
			v.colOrder = append(v.colOrder, ManifestIDCol)
		}
	}
	if j.ManifestIDColumn != "" && slices.Contains(j.Keys, j.ManifestIDColumn) {
		v.add(p+"manifestIdColumn", j.ManifestIDColumn, "is a join column: the manifest id is one value for the whole snapshot")
	}
	if j.RefreshInterval < 0 {
		v.add(p+"refreshInterval", dur(j.RefreshInterval), "must not be negative (omit it for one snapshot per run)")
	}
}

func titleMode(m OutputMode) string {
	s := string(m)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
