package file

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Offset is the file source's position.
type Offset struct {
	// LastFile is the greatest name taken so far ("" before the first
	// file).
	LastFile string `json:"lastFile"`
	// Files are the files of the batch that ends at this offset, in name
	// order; empty for the initial offset.
	Files []string `json:"files"`
}

// Marshal returns the canonical JSON form of o.
func (o Offset) Marshal() source.Offset {
	if o.Files == nil {
		o.Files = []string{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // strings and a string slice always marshal
	}
	return b
}

// ParseOffset reads an offset written by Marshal.
func ParseOffset(b source.Offset) (Offset, error) {
	var o Offset
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Offset{}, fmt.Errorf("parse file source offset %s: %w", b, err)
	}
	return o, nil
}

// splitDesc is a Split's Desc.
type splitDesc struct {
	File string `json:"file"`
}

// Source reads JSON-lines files. Planning methods are meant for one driver
// goroutine; Read may run concurrently with anything.
type Source struct {
	store  objstore.Store
	opts   query.FileSource
	logger *slog.Logger

	mu sync.Mutex
	// primed is set by the first Next: names at or before its start that
	// were present then are assumed taken by earlier batches.
	primed bool
	// seen holds names known to be accounted for: present at priming or
	// taken by a batch this process planned.
	seen map[string]bool
	// ignored holds names that appeared at or before lastFile after they
	// could still be taken.
	ignored map[string]bool
}

var _ source.Source = (*Source)(nil)

// New returns a file source over store, whose root is the source
// directory. A nil logger discards.
func New(store objstore.Store, opts query.FileSource, logger *slog.Logger) *Source {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Source{
		store:   store,
		opts:    opts,
		logger:  logger,
		seen:    make(map[string]bool),
		ignored: make(map[string]bool),
	}
}

// Initial returns {"lastFile":"","files":[]}: every file is new.
func (s *Source) Initial(ctx context.Context) (source.Offset, error) {
	return Offset{}.Marshal(), nil
}

// isData reports whether a key names a data file: no path segment starts
// with '.' or '_' (temporary files, _SUCCESS markers, sink logs).
func isData(key string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' || seg[0] == '_' {
			return false
		}
	}
	return true
}

// list returns the data files in name order.
func (s *Source) list(ctx context.Context) ([]string, error) {
	keys, err := s.store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list file source %s: %w", s.opts.Path, err)
	}
	names := keys[:0:0]
	for _, k := range keys {
		if isData(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names) // List promises lexical order; do not depend on it
	return names, nil
}

// after returns the names greater than last, in order.
func after(names []string, last string) []string {
	i := sort.SearchStrings(names, last)
	for i < len(names) && names[i] <= last {
		i++
	}
	return names[i:]
}

// Latest returns the offset that takes every file present after start
// (start itself when there is none).
func (s *Source) Latest(ctx context.Context, start source.Offset, now time.Time) (source.Offset, error) {
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	names, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	newer := after(names, st.LastFile)
	if len(newer) == 0 {
		return clone(start), nil
	}
	return Offset{LastFile: newer[len(newer)-1], Files: newer}.Marshal(), nil
}

// Next takes the files after start in name order, at most
// maxFilesPerTrigger of them (0: all), none past limit's lastFile. It
// returns start when there is none. It logs a warning naming every file
// that sorts at or before start's lastFile but was not there when that
// position was passed: such files are never read.
func (s *Source) Next(ctx context.Context, start, limit source.Offset) (source.Offset, error) {
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	lim, err := ParseOffset(limit)
	if err != nil {
		return nil, err
	}
	names, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	s.checkIgnored(names, st.LastFile)

	var batch []string
	for _, n := range after(names, st.LastFile) {
		if n > lim.LastFile {
			break
		}
		batch = append(batch, n)
		if s.opts.MaxFilesPerTrigger > 0 && len(batch) == s.opts.MaxFilesPerTrigger {
			break
		}
	}
	if len(batch) == 0 {
		return clone(start), nil
	}
	s.mu.Lock()
	for _, n := range batch {
		s.seen[n] = true
	}
	s.mu.Unlock()
	return Offset{LastFile: batch[len(batch)-1], Files: batch}.Marshal(), nil
}

// checkIgnored records and logs the files at or before last that were not
// accounted for.
func (s *Source) checkIgnored(names []string, last string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var late []string
	for _, n := range names {
		if n > last {
			break
		}
		switch {
		case !s.primed:
			s.seen[n] = true
		case s.ignored[n]:
			late = append(late, n)
		case !s.seen[n]:
			s.ignored[n] = true
			late = append(late, n)
		}
	}
	s.primed = true
	if len(late) > 0 {
		s.logger.Warn("file source ignores files whose names sort at or before files already taken; "+
			"name new files so they sort after the last one taken, or write them to a new directory",
			"path", s.opts.Path, "lastFile", last, "ignored", late)
	}
}

// IgnoredFiles returns, in name order, the files this process found with
// names at or before the last file already taken. They are never read.
func (s *Source) IgnoredFiles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.ignored))
	for n := range s.ignored {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Splits returns one split per file of end's batch, or none when end is
// start.
func (s *Source) Splits(ctx context.Context, start, end source.Offset) ([]source.Split, error) {
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	en, err := ParseOffset(end)
	if err != nil {
		return nil, err
	}
	if en.LastFile == st.LastFile {
		return nil, nil
	}
	splits := make([]source.Split, 0, len(en.Files))
	for _, f := range en.Files {
		if f <= st.LastFile || f > en.LastFile {
			return nil, fmt.Errorf("plan file source splits: file %s of end offset %s is not after start's lastFile %q", f, end, st.LastFile)
		}
		desc, err := json.Marshal(splitDesc{File: f})
		if err != nil {
			return nil, fmt.Errorf("plan file source splits: %w", err)
		}
		splits = append(splits, source.Split{ID: f, Desc: desc})
	}
	return splits, nil
}

// Read calls fn for every non-empty line of the split's file, with Part the
// file name and Offset the 1-based line number. Lines end with "\n" or
// "\r\n"; the last line needs no newline; blank lines are skipped.
func (s *Source) Read(ctx context.Context, split source.Split, fn func(*source.Record) error) error {
	var d splitDesc
	if err := json.Unmarshal(split.Desc, &d); err != nil || d.File == "" {
		return fmt.Errorf("read file source split %s: bad description %s", split.ID, split.Desc)
	}
	data, err := s.store.Get(ctx, d.File)
	if err != nil {
		return fmt.Errorf("read file source file %s in %s: %w", d.File, s.opts.Path, err)
	}
	rec := source.Record{Part: d.File}
	var line int64
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		l = bytes.TrimRight(l, "\r")
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("read file source file %s: %w", d.File, err)
			}
		}
		rec.Value = l
		rec.Offset = line
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return nil
}

// Close does nothing: the store belongs to the caller.
func (s *Source) Close() error { return nil }

func clone(b source.Offset) source.Offset { return append(source.Offset(nil), b...) }
