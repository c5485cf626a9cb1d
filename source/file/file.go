package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// offsetVersion is the format version of offsets this build writes.
// Version 1 (no "version" field) was {"lastFile","files"}: files taken in
// name order. Version 2 keeps the set of files taken.
const offsetVersion = 2

// Offset is the file source's position: the files taken so far (Seen, name
// -> modification time in ms, pruned by maxFileAge), the newest
// modification time taken (NewestMs), and the files of the batch that ends
// here (Files, in the order they were taken). A Latest offset has only
// Files: every file available and not yet taken.
type Offset struct {
	Version int `json:"version,omitempty"`
	// LastFile is the version-1 position: every name at or before it was
	// taken. Read, never written.
	LastFile string           `json:"lastFile,omitempty"`
	Files    []string         `json:"files"`
	Seen     map[string]int64 `json:"seen,omitempty"`
	NewestMs int64            `json:"newestMs,omitempty"`
}

// Marshal returns the canonical JSON form of o (map keys sorted).
func (o Offset) Marshal() source.Offset {
	if o.Files == nil {
		o.Files = []string{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // strings, ints and a string map always marshal
	}
	return b
}

// ParseOffset reads an offset written by Marshal (or by version 1).
func ParseOffset(b source.Offset) (Offset, error) {
	var o Offset
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Offset{}, fmt.Errorf("parse file source offset %s: %w", b, err)
	}
	if o.Version > offsetVersion {
		return Offset{}, fmt.Errorf("parse file source offset: format version %d is newer than this build's %d", o.Version, offsetVersion)
	}
	return o, nil
}

// taken reports whether name was taken before this offset.
func (o Offset) taken(name string) bool {
	if _, ok := o.Seen[name]; ok {
		return true
	}
	return o.Version < 2 && o.LastFile != "" && name <= o.LastFile
}

// splitDesc is a Split's Desc.
type splitDesc struct {
	File string `json:"file"`
}

// Source reads JSON-lines files. Planning methods are meant for one driver
// goroutine; Read may run concurrently with anything.
type Source struct {
	store   objstore.Store
	archive objstore.Store
	opts    query.FileSource
	logger  *slog.Logger
	once    sync.Once
}

var (
	_ source.Source    = (*Source)(nil)
	_ source.Committer = (*Source)(nil)
)

// New returns a file source over store, whose root is the source
// directory. A nil logger discards.
func New(store objstore.Store, opts query.FileSource, logger *slog.Logger) *Source {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Source{store: store, opts: opts, logger: logger}
}

// SetArchive gives the store rooted at sourceArchiveDir (cleanSource:
// archive).
func (s *Source) SetArchive(st objstore.Store) { s.archive = st }

// Initial returns {"version":2,"files":[]}: every file is new.
func (s *Source) Initial(ctx context.Context) (source.Offset, error) {
	return Offset{Version: offsetVersion}.Marshal(), nil
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

type fileInfo struct {
	name    string
	mtimeMs int64
}

// list returns the data files with their modification times. A store that
// cannot list times gives every file time 0 (name order).
func (s *Source) list(ctx context.Context) ([]fileInfo, error) {
	var out []fileInfo
	if il, ok := s.store.(objstore.InfoLister); ok {
		infos, err := il.ListInfo(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list file source %s: %w", s.opts.Path, err)
		}
		for _, o := range infos {
			if isData(o.Key) {
				out = append(out, fileInfo{name: o.Key, mtimeMs: o.ModTime.UnixMilli()})
			}
		}
		return out, nil
	}
	s.once.Do(func() {
		s.logger.Warn("file source store cannot list modification times; files are taken in name order", "path", s.opts.Path)
	})
	keys, err := s.store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list file source %s: %w", s.opts.Path, err)
	}
	for _, k := range keys {
		if isData(k) {
			out = append(out, fileInfo{name: k})
		}
	}
	return out, nil
}

// ageIgnored reports whether maxFileAge is off: latestFirst with a cap,
// as in Spark (old files still due would be dropped otherwise).
func (s *Source) ageIgnored() bool { return s.opts.LatestFirst && s.opts.MaxFilesPerTrigger > 0 }

// candidates returns the files not yet taken after st and young enough, in
// the order they are taken: oldest modification time first (newest first
// with latestFirst), then by name.
func (s *Source) candidates(st Offset, files []fileInfo) []fileInfo {
	threshold := int64(math.MinInt64)
	if len(st.Seen) > 0 && !s.ageIgnored() {
		threshold = st.NewestMs - s.opts.FileAge().Milliseconds()
	}
	var out []fileInfo
	for _, f := range files {
		if st.taken(f.name) || f.mtimeMs < threshold {
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.mtimeMs != b.mtimeMs {
			return (a.mtimeMs < b.mtimeMs) != s.opts.LatestFirst
		}
		return a.name < b.name
	})
	return out
}

// Latest returns {"version":2,"files":[...]}: every file not taken at start
// (start itself when there is none).
func (s *Source) Latest(ctx context.Context, start source.Offset, now time.Time) (source.Offset, error) {
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	files, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	cands := s.candidates(st, files)
	if len(cands) == 0 {
		return clone(start), nil
	}
	names := make([]string, len(cands))
	for i, f := range cands {
		names[i] = f.name
	}
	return Offset{Version: offsetVersion, Files: names}.Marshal(), nil
}

// Next takes the files not yet taken at start, in order, at most
// maxFilesPerTrigger of them (0: all), only files limit lists. It returns
// start when there is none. The end offset's Seen adds the batch's files
// and drops files older than maxFileAge relative to the newest taken.
func (s *Source) Next(ctx context.Context, start, limit source.Offset) (source.Offset, error) {
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	var allowed map[string]bool
	if !bytes.Equal(start, limit) {
		lim, err := ParseOffset(limit)
		if err != nil {
			return nil, err
		}
		allowed = make(map[string]bool, len(lim.Files))
		for _, f := range lim.Files {
			allowed[f] = true
		}
	}
	if allowed == nil {
		return clone(start), nil
	}
	files, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	var batch []fileInfo
	for _, f := range s.candidates(st, files) {
		if !allowed[f.name] {
			continue
		}
		batch = append(batch, f)
		if s.opts.MaxFilesPerTrigger > 0 && len(batch) == s.opts.MaxFilesPerTrigger {
			break
		}
	}
	if len(batch) == 0 {
		return clone(start), nil
	}
	end := Offset{Version: offsetVersion, Seen: make(map[string]int64, len(st.Seen)+len(batch)), NewestMs: st.NewestMs}
	for n, t := range st.Seen {
		end.Seen[n] = t
	}
	if st.Version < 2 && st.LastFile != "" {
		// Converting a version-1 position: what it took is every data
		// file named at or before lastFile.
		for _, f := range files {
			if f.name <= st.LastFile {
				end.Seen[f.name] = f.mtimeMs
			}
		}
	}
	for _, f := range batch {
		end.Files = append(end.Files, f.name)
		end.Seen[f.name] = f.mtimeMs
		end.NewestMs = max(end.NewestMs, f.mtimeMs)
	}
	if !s.ageIgnored() {
		threshold := end.NewestMs - s.opts.FileAge().Milliseconds()
		for n, t := range end.Seen {
			if t < threshold {
				delete(end.Seen, n)
			}
		}
	}
	return end.Marshal(), nil
}

// Splits returns one split per file of end's batch, or none when end is
// start.
func (s *Source) Splits(ctx context.Context, start, end source.Offset) ([]source.Split, error) {
	if bytes.Equal(start, end) {
		return nil, nil
	}
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	en, err := ParseOffset(end)
	if err != nil {
		return nil, err
	}
	splits := make([]source.Split, 0, len(en.Files))
	for _, f := range en.Files {
		if st.taken(f) {
			return nil, fmt.Errorf("plan file source splits: file %s of the end offset was already taken at the start offset", f)
		}
		desc, err := json.Marshal(splitDesc{File: f})
		if err != nil {
			return nil, fmt.Errorf("plan file source splits: %w", err)
		}
		splits = append(splits, source.Split{ID: f, Desc: desc})
	}
	return splits, nil
}

// Commit applies cleanSource to the files of a committed batch (the end
// offset's Files): delete removes them, archive moves them under
// sourceArchiveDir at the same relative path. A file already gone is
// skipped. It runs on the driver after commits/N.
func (s *Source) Commit(ctx context.Context, end source.Offset) error {
	mode := s.opts.CleanSource
	if mode == "" || mode == query.CleanSourceOff {
		return nil
	}
	en, err := ParseOffset(end)
	if err != nil {
		return err
	}
	for _, f := range en.Files {
		if mode == query.CleanSourceArchive {
			if s.archive == nil {
				return fmt.Errorf("clean file source: cleanSource archive without a sourceArchiveDir store")
			}
			data, err := s.store.Get(ctx, f)
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("archive %s: %w", f, err)
			}
			if err := s.archive.Put(ctx, f, data); err != nil {
				return fmt.Errorf("archive %s to %s: %w", f, s.opts.SourceArchiveDir, err)
			}
		}
		if err := s.store.Delete(ctx, f); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("clean file source: delete %s: %w", f, err)
		}
	}
	return nil
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
