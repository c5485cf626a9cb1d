package source

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Kind is one kind of source as a query spec names it (source.kafka,
// source.file, source.generator). It is the whole seam between a source
// package and the rest of Sluice: package source/catalog lists the kinds,
// and validation, record metadata columns, explain and opening go through
// it, so adding a source is its package plus one line in the catalog.
type Kind interface {
	// Name is the key under source: in a spec ("kafka").
	Name() string
	// Configured reports whether src sets this kind.
	Configured(src *query.Source) bool
	// Validate checks this kind's options once, without I/O, and returns
	// every problem, each naming its field (under source.<name>), the value
	// (never a secret) and the rule. s has its defaults applied.
	Validate(s *query.Spec) []query.Problem
	// MetaColumns are the record metadata a schema entry may read with
	// from: (kafka.key, ...), in the order Record.Meta indexes them; nil
	// when records carry none.
	MetaColumns() []MetaColumn
	// FixedSchema is the schema the source emits itself (the generator's),
	// nil when the query declares it: a declared column must be one of
	// these, with its type.
	FixedSchema() []query.Field
	// Explain is the source's node in driver explain.
	Explain(src *query.Source) Explanation
	// Locations are the places src reads or writes (directories, topics,
	// local files its options name), for the checks before anything
	// opens and for the driver's location policy.
	Locations(src *query.Source) []Location
	// Open builds the source of s (validated) for a driver or an executor.
	Open(ctx context.Context, s *query.Spec, env Env) (Source, error)
}

// MetaColumn is a record metadata column a source offers (Spark's Kafka
// key, topic, partition, offset and timestamp columns).
type MetaColumn struct {
	// Name is what a schema entry's from: says ("kafka.key").
	Name string
	// Type is the column's type; a schema entry reading it must declare it.
	Type row.Kind
}

// Metadata gives a record's metadata columns by their index in the kind's
// MetaColumns. A source fills them per record without allocating; a value
// is built only when a query reads that column.
type Metadata interface {
	Column(i int) row.Value
}

// Explanation is a source's part of driver explain.
type Explanation struct {
	// Title names the source and what it reads; Detail says how it plans,
	// caps and splits batches, a line each.
	Title  string
	Detail []string
	// Cap is the per-trigger cap in words ("500 files (maxFilesPerTrigger)"),
	// empty when there is none.
	Cap string
}

// Location is one place a source's options name.
type Location struct {
	// Field is the spec field that names it ("source.file.path").
	Field string
	// Value is the location as written: a URI, a local path, a topic or a
	// topic pattern.
	Value string
	Use   LocationUse
}

// LocationUse says what the source does with a Location.
type LocationUse int

const (
	// ReadsDir is a directory or URI prefix the source reads data from;
	// it must exist before the query starts.
	ReadsDir LocationUse = iota
	// WritesDir is a directory or URI prefix the source writes or moves
	// data into (the file source's archive).
	WritesDir
	// ReadsFile is a local file an option names (a PEM file), read by
	// every process that opens the source.
	ReadsFile
	// Topic is a Kafka topic the source reads.
	Topic
	// TopicPattern is a regular expression of topics the source reads:
	// it may match any topic.
	TopicPattern
)

// Describer is optional for a Source: the description progress shows in
// sources[].description (Spark's, e.g. "KafkaV2[Subscribe[topic]]").
type Describer interface {
	Description() string
}

// Env is what a source may use from the process that opens it.
type Env struct {
	Logger *slog.Logger
	// OpenStore opens an object-store URI or local path with the process's
	// store settings (counted as the source's reads).
	OpenStore func(ctx context.Context, uri string) (objstore.Store, error)
	// Shared is the process's cache of clients sources may share across
	// queries (one set of broker connections per cluster); nil shares
	// nothing.
	Shared *Shared
}
