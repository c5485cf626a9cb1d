package parquet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// PartitionByWindowDate is the one partitioning the sink supports: Hive-style
// window_date=YYYY-MM-DD directories, the UTC date of window_start.
const PartitionByWindowDate = "window_date"

// nullPartition is the directory value for a row whose window_start is null,
// as Hive and Spark name it.
const nullPartition = "__HIVE_DEFAULT_PARTITION__"

// createdBy is written into every file's footer instead of the library's
// default, which carries the library version and build and would make the
// bytes depend on the binary that wrote them.
const createdBy = "sluice"

// Options configure a Sink.
type Options struct {
	// PartitionBy is "" (files at the root) or "window_date".
	PartitionBy string
	// Environment decides what Prepare and Commit do with a sink log
	// written by another query: lab warns and writes again, production
	// refuses. Empty means lab.
	Environment query.Environment
	// Path names the sink in messages (the spec's sink.parquet.path). If
	// empty, a store with a Root() method gives it.
	Path string
	// Logger receives the foreign-log warning. Nil discards.
	Logger *slog.Logger
	// CompactInterval is how many batches make one compacted log entry
	// (sink.parquet.compactInterval); zero means DefaultCompactInterval.
	CompactInterval int
	// MinBatchesToRetain is how many batches' log entries are kept
	// (the query's minBatchesToRetain); zero means
	// DefaultMinBatchesToRetain.
	MinBatchesToRetain int
	// SpoolDir is where a large file's encoded pages wait, in temporary
	// files, until its one row group is written out (see pageBuffers).
	// Empty means os.TempDir().
	SpoolDir string
	// GatherBelow is the estimated size of a partition's output rows (8
	// bytes a value plus a string's bytes) up to which its reduce task
	// hands them to the driver, which stages the gathered partitions in
	// few files (see Sink.WriteGathered); zero means DefaultGatherBelow,
	// a negative value never gathers. A batch over many partitions
	// gathers less: at most gatherBudget bytes in all.
	GatherBelow int64
	// ClosedWatermark, if set, turns on the compaction of closed dates
	// (sink.parquet.compactClosedDates): after each compacted log entry
	// the background job runs CompactDates with the watermark it returns
	// (the checkpoint's committed one).
	ClosedWatermark func(ctx context.Context) (eventtime.Watermark, error)
}

// DefaultGatherBelow is Options.GatherBelow's default: 64 KiB, about 1,600
// rows of the tile (a file of its own costs three requests on S3, two
// fsynced writes on a filesystem; encoding rows that size on the driver
// costs less).
const DefaultGatherBelow = 64 << 10

// gatherBudget bounds a batch's gathered rows (estimated): the bound per
// partition is at most gatherBudget / partitions, so the driver holds a
// few MiB whatever the partition count.
const gatherBudget = 4 << 20

// Sink is the exactly-once Parquet file sink. It implements sink.FileSink
// and sink.Gatherer.
// It is safe for concurrent use: reduce tasks call WritePartition in
// parallel.
type Sink struct {
	store   objstore.Store
	cols    []query.Column
	opts    Options
	logger  *slog.Logger
	schema  *pq.Schema
	dateCol int   // index of window_start when partitioning by window_date
	initErr error // a schema or option problem, reported by every call
	// partSize is the size of a staged file's parts but the last (and the
	// most of a file's bytes held at once): objstore.DefaultPartSize.
	partSize int
	// spoolAbove is the estimated size of a file's rows above which its
	// pages are spooled to SpoolDir: partSize.
	spoolAbove int64

	mu       sync.Mutex
	queryID  string               // set by Prepare
	env      query.Environment    // set by Prepare
	resolved map[string]logLayout // query id -> where its log entries go
	newest   ids.BatchID          // the newest batch id the prepared query's log held at Prepare or committed since
	entries  map[string]LogEntry  // log key -> entry written since the last compacted one (cacheEntry)
	cleaning bool                 // a background log cleanup is running
	// cleanAgain is the newest batch whose cleanup was asked while one
	// ran (-1: none): the running one goes on with it.
	cleanAgain ids.BatchID
	cleanWG    sync.WaitGroup
	bgCtx      context.Context // background work's; Close cancels it
	bgCancel   context.CancelFunc
}

var (
	_ sink.FileSink = (*Sink)(nil)
	_ sink.Gatherer = (*Sink)(nil)
)

// New returns a sink writing through store, which is rooted at the sink's
// path. A bad schema or option is reported by the first call that needs it.
func New(store objstore.Store, schema []query.Column, opts Options) *Sink {
	s := &Sink{
		store:      store,
		cols:       slices.Clone(schema),
		opts:       opts,
		logger:     opts.Logger,
		dateCol:    -1,
		newest:     -1,
		env:        opts.Environment,
		resolved:   make(map[string]logLayout),
		entries:    make(map[string]LogEntry),
		partSize:   objstore.DefaultPartSize,
		spoolAbove: objstore.DefaultPartSize,
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	if s.env == "" {
		s.env = query.Lab
	}
	s.schema, s.initErr = buildSchema(s.cols)
	switch opts.PartitionBy {
	case "":
	case PartitionByWindowDate:
		for i, c := range s.cols {
			if c.Name == query.WindowStart {
				s.dateCol = i
			}
		}
		if s.dateCol < 0 || s.cols[s.dateCol].Kind != row.Timestamp {
			s.initErr = fmt.Errorf("parquet sink partitionBy %s needs a timestamp column %s in the output (a windowed aggregation)", PartitionByWindowDate, query.WindowStart)
		}
	default:
		s.initErr = fmt.Errorf("parquet sink partitionBy %q is not supported: use %q or leave it empty (never partition by a grouping key)", opts.PartitionBy, PartitionByWindowDate)
	}
	return s
}

// Err reports a problem with the schema or options given to New.
func (s *Sink) Err() error { return s.initErr }

// path names the sink in messages.
func (s *Sink) path() string {
	if s.opts.Path != "" {
		return s.opts.Path
	}
	if r, ok := s.store.(interface{ Root() string }); ok {
		return r.Root()
	}
	return "(sink path)"
}

// FileName returns the object name of (batch, partition)'s file for a query,
// without a directory: part-<batch:05d>-<partition:04d>-<queryID>.snappy.parquet.
// The full query id (not a prefix) keeps two queries' files apart.
func FileName(queryID string, batchID ids.BatchID, partition ids.PartitionID) string {
	return fmt.Sprintf("part-%05d-%04d-%s.snappy.parquet", batchID, partition, queryID)
}

// parseFileName returns the batch and partition of a file name FileName
// made for queryID.
func parseFileName(name, queryID string) (ids.BatchID, ids.PartitionID, bool) {
	rest, ok := strings.CutPrefix(name, "part-")
	if !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutSuffix(rest, "-"+queryID+".snappy.parquet"); !ok {
		return 0, 0, false
	}
	b, p, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	batch, err := ids.ParseBatchID(b)
	if err != nil || batch < 0 {
		return 0, 0, false
	}
	part, err := strconv.Atoi(p)
	if err != nil || part < 0 {
		return 0, 0, false
	}
	return batch, ids.PartitionID(part), true
}

// WritePartition stages one state partition's output rows for a batch and
// returns descriptors of the staged files, sorted by key, for Commit. The
// keys and bytes are a function of (query, batch, partition, rows). On a
// store with objstore.Multipart each file is a multipart upload (hidden
// parts on a filesystem), recorded under _sink_pending/ before its bytes
// are sent (except on a store that lists its staged uploads), and
// invisible until Commit completes it; on a store without it
// the file is written with Put and the descriptor is its key. No rows
// write no file.
func (s *Sink) WritePartition(ctx context.Context, b sink.Batch, partition ids.PartitionID, rows []row.Row) ([]string, error) {
	if err := s.checkWrite(b, partition); err != nil {
		return nil, err
	}
	out, err := s.writeFiles(ctx, b, partition, rows)
	if err != nil {
		return nil, fmt.Errorf("write parquet batch %d partition %d: %w", b.ID, partition, err)
	}
	return out, nil
}

func (s *Sink) checkWrite(b sink.Batch, partition ids.PartitionID) error {
	if s.initErr != nil {
		return s.initErr
	}
	if err := checkQueryID(b.QueryID); err != nil {
		return err
	}
	if b.ID < 0 || partition < 0 {
		return fmt.Errorf("write parquet batch %d partition %d: batch and partition must not be negative", b.ID, partition)
	}
	return nil
}

// writeFiles stages rows (or, on a store without Multipart, writes them)
// as the files named for (batch, partition), one per directory.
func (s *Sink) writeFiles(ctx context.Context, b sink.Batch, partition ids.PartitionID, rows []row.Row) ([]string, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	groups, err := s.split(rows)
	if err != nil {
		return nil, err
	}
	name := FileName(b.QueryID, b.ID, partition)
	keys := make([]string, 0, len(groups))
	for _, g := range groups {
		keys = append(keys, g.dir+name)
	}
	encodeGroup := func(i int, w io.Writer) error {
		opts, cleanup, err := pageBuffers(groups[i].rows, s.spoolAbove, s.opts.SpoolDir)
		if err != nil {
			return err
		}
		defer cleanup()
		return encodeTo(w, s.schema, s.cols, groups[i].rows, opts...)
	}
	if mp, ok := s.store.(objstore.Multipart); ok {
		return s.stage(ctx, mp, b.QueryID, b.ID, partition, keys, encodeGroup)
	}
	for i, key := range keys {
		err := objstore.PutWriter(ctx, s.store, key, func(w io.Writer) error { return encodeGroup(i, w) })
		if err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// GatherBelow is the bound a batch over partitions state partitions
// gathers below: Options.GatherBelow, at most gatherBudget / partitions;
// 0 (never) on a store without Multipart, whose files are visible as
// soon as written (a re-run that gathered other partitions could leave
// two files with the same rows).
func (s *Sink) GatherBelow(partitions int) int64 {
	below := s.opts.GatherBelow
	if below == 0 {
		below = DefaultGatherBelow
	}
	if _, ok := s.store.(objstore.Multipart); !ok || below < 0 || s.initErr != nil {
		return 0
	}
	return min(below, gatherBudget/int64(max(1, partitions)))
}

// Gather reports whether rows are small enough to be gathered: their
// estimated size is at most below (> 0).
func (s *Sink) Gather(rows []row.Row, below int64) bool {
	return below > 0 && estimateSize(rows) <= below
}

// WriteGathered stages the rows of gathered partitions in few files:
// parts, ascending by partition, go into groups of consecutive parts of at
// most one upload part's size (8 MiB estimated; a group has at least one
// part), and each group's rows, part after part, are written as
// WritePartition would write the rows of the group's first partition
// (named for it, one file per directory). The names and bytes are a
// function of (batch, parts); a partition whose rows were gathered writes
// no file of its own, so no name is used twice.
func (s *Sink) WriteGathered(ctx context.Context, b sink.Batch, parts []sink.PartitionRows) ([]string, error) {
	var out []string
	var group []row.Row
	first, size := ids.PartitionID(-1), int64(0)
	flush := func() error {
		if first < 0 {
			return nil
		}
		files, err := s.writeFiles(ctx, b, first, group)
		if err != nil {
			return fmt.Errorf("write parquet batch %d gathered partitions from %d: %w", b.ID, first, err)
		}
		out = append(out, files...)
		group, first, size = nil, -1, 0
		return nil
	}
	prev := ids.PartitionID(-1)
	for _, p := range parts {
		if err := s.checkWrite(b, p.Partition); err != nil {
			return nil, err
		}
		if p.Partition <= prev {
			return nil, fmt.Errorf("write parquet batch %d: gathered partitions out of order (%d after %d)", b.ID, p.Partition, prev)
		}
		prev = p.Partition
		if len(p.Rows) == 0 {
			continue
		}
		n := estimateSize(p.Rows)
		if first >= 0 && size+n > int64(s.partSize) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		if first < 0 {
			first = p.Partition
		}
		group, size = append(group, p.Rows...), size+n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

type dirRows struct {
	dir  string // "" or "window_date=YYYY-MM-DD/"
	rows []row.Row
}

// split groups rows by directory, keeping their order within a directory;
// directories come out sorted.
func (s *Sink) split(rows []row.Row) ([]dirRows, error) {
	for i, r := range rows {
		if len(r) != len(s.cols) {
			return nil, fmt.Errorf("row %d has %d values, the output schema has %d columns", i, len(r), len(s.cols))
		}
	}
	if s.dateCol < 0 {
		return []dirRows{{rows: rows}}, nil
	}
	// By UTC day number (a day is 86,400,000,000 µs in UTC), in runs of
	// rows of one day: rows come sorted by window start, so each date is
	// one run, formatted once, and its rows are a sub-slice of rows (no
	// copy). A date met again after another is appended to its first run.
	const dayMicros = 86_400_000_000
	const nullDay = math.MinInt64
	byDay := map[int64]int{}
	var out []dirRows
	dayOf := func(r row.Row) int64 {
		v := r[s.dateCol]
		if v.IsNull() {
			return nullDay
		}
		day := v.I / dayMicros
		if v.I%dayMicros < 0 {
			day--
		}
		return day
	}
	for start := 0; start < len(rows); {
		day := dayOf(rows[start])
		end := start + 1
		for end < len(rows) && dayOf(rows[end]) == day {
			end++
		}
		run := rows[start:end:end]
		if idx, ok := byDay[day]; ok {
			out[idx].rows = append(out[idx].rows, run...)
		} else {
			date := nullPartition
			if day != nullDay {
				date = time.UnixMicro(day * dayMicros).UTC().Format("2006-01-02")
			}
			byDay[day] = len(out)
			out = append(out, dirRows{dir: PartitionByWindowDate + "=" + date + "/", rows: run})
		}
		start = end
	}
	slices.SortFunc(out, func(a, b dirRows) int {
		switch {
		case a.dir < b.dir:
			return -1
		case a.dir > b.dir:
			return 1
		}
		return 0
	})
	return out, nil
}

// encodeTo writes rows as one Parquet file to out: snappy pages, one row
// group, no timestamps or ids in the footer. The bytes do not depend on
// out (a buffer, a multipart upload, a pipe).
//
// It writes column by column, one value per call, straight to each
// column's writer: the bytes are those of writing row by row (a column
// flushes a page when its own buffer is full, whatever the others do),
// without assembling a parquet.Row per row or copying each string
// (TestColumnWiseEncodingIsTheRowWiseBytes). A value of the wrong kind is
// refused before anything is written, naming its row.
func encodeTo(out io.Writer, schema *pq.Schema, cols []query.Column, rows []row.Row, opts ...pq.WriterOption) error {
	for i, r := range rows {
		for c, v := range r {
			if err := checkKind(v, cols[c]); err != nil {
				return fmt.Errorf("encode row %d: %w", i, err)
			}
		}
	}
	w := pq.NewWriter(out, append([]pq.WriterOption{schema, pq.Compression(&pq.Snappy), &pq.WriterConfig{CreatedBy: createdBy}}, opts...)...)
	one := make([]pq.Value, 1)
	var scratch []byte
	for c, cw := range w.ColumnWriters() {
		for i, r := range rows {
			v := r[c]
			var pv pq.Value
			def := 1
			switch v.Kind {
			case row.Null:
				def = 0
			case row.String:
				// The column buffer copies the bytes: one scratch buffer
				// serves every value.
				scratch = append(scratch[:0], v.S...)
				pv = pq.ByteArrayValue(scratch)
			case row.Long, row.Timestamp:
				pv = pq.Int64Value(v.I)
			case row.Int, row.Date:
				pv = pq.Int32Value(int32(v.I))
			case row.Decimal:
				pv, scratch = decimalValue(v, cols[c], scratch)
			case row.Double:
				pv = pq.DoubleValue(v.F)
			case row.Bool:
				pv = pq.BooleanValue(v.I != 0)
			}
			one[0] = pv.Level(0, def, c)
			if _, err := cw.WriteRowValues(one); err != nil {
				return fmt.Errorf("encode row %d: %w", i, err)
			}
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encode parquet: %w", err)
	}
	return nil
}

// pageBuffers returns the writer option that keeps a large file's pages
// in temporary files, in a directory of their own under dir that
// cleanup removes: the Parquet writer holds a row group's encoded pages
// until the group is complete, and a file is one row group, so without it
// a file's bytes are in memory while it is encoded, whatever the upload
// streams. Rows estimated at no more than above bytes are encoded in
// memory (no temporary files for the usual small file). The bytes are the
// same either way. An empty dir is os.TempDir().
func pageBuffers(rows []row.Row, above int64, dir string) (opts []pq.WriterOption, cleanup func(), err error) {
	if estimateSize(rows) <= above {
		return nil, func() {}, nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	tmp, err := os.MkdirTemp(dir, "sluice-parquet-pages-")
	if err != nil {
		return nil, nil, fmt.Errorf("spool the pages of a large file: %w", err)
	}
	return []pq.WriterOption{pq.ColumnPageBuffers(pq.NewFileBufferPool(tmp, "column-*"))}, func() { os.RemoveAll(tmp) }, nil
}

// estimateSize is the rows' size before encoding: 8 bytes a value plus a
// string's bytes.
func estimateSize(rows []row.Row) int64 {
	var n int64
	for _, r := range rows {
		for _, v := range r {
			n += 8 + int64(len(v.S))
		}
	}
	return n
}

// checkKind refuses a value of the wrong kind for its column.
func checkKind(v row.Value, c query.Column) error {
	switch {
	case v.IsNull():
		return nil
	case v.Kind != c.Kind:
		return fmt.Errorf("column %s holds a %s value, want %s", c.Name, v.Kind, c.Kind)
	}
	switch v.Kind {
	case row.String, row.Long, row.Timestamp, row.Double, row.Bool, row.Int, row.Date:
		return nil
	case row.Decimal:
		if v.Scale != c.Scale {
			return fmt.Errorf("column %s holds a decimal of scale %d, want decimal(%d,%d)", c.Name, v.Scale, c.Precision, c.Scale)
		}
		return nil
	}
	return fmt.Errorf("column %s: kind %s has no parquet value", c.Name, v.Kind)
}

// decimalValue is a decimal's parquet value in its column's physical
// type (leafNode): the unscaled integer as INT32, INT64 or big-endian
// two's-complement bytes of the column's fixed length.
func decimalValue(v row.Value, c query.Column, scratch []byte) (pq.Value, []byte) {
	p := int(c.Precision)
	if p <= 18 && v.S == "" {
		if p <= 9 {
			return pq.Int32Value(int32(v.I)), scratch
		}
		return pq.Int64Value(v.I), scratch
	}
	u := big.NewInt(v.I)
	if v.S != "" {
		u.SetString(v.S, 10)
	}
	n := decimalBytes(p)
	scratch = append(scratch[:0], make([]byte, n)...)
	if u.Sign() >= 0 {
		u.FillBytes(scratch)
	} else {
		// two's complement: 2^(8n) + u
		t := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(8*n)), u)
		t.FillBytes(scratch)
	}
	return pq.FixedLenByteArrayValue(scratch), scratch
}
