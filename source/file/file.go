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
// name order. Version 2 keeps the set of files taken. Version 3 adds the
// sizes of a batch's files and the byte size its splits are cut to
// (sizes, splitBytes), so a re-run cuts the same read tasks whatever the
// options or the files say by then.
const offsetVersion = 3

// Offset is the file source's position: the files taken so far (Seen, name
// -> modification time in ms, pruned by maxFileAge), the newest
// modification time taken (NewestMs), and the files of the batch that ends
// here (Files, in the order they were taken). A Latest offset has only
// Files: every file available and not yet taken.
type Offset struct {
	Version int `json:"version,omitempty"`
	// LastFile is the version-1 position: every name at or before it was
	// taken. Read, never written.
	LastFile string   `json:"lastFile,omitempty"`
	Files    []string `json:"files"`
	// Sizes are the sizes of Files in bytes as the listing gave them (nil
	// when the store lists no sizes, and in Latest offsets).
	Sizes []int64 `json:"sizes,omitempty"`
	// SplitBytes is the size a file of the batch is cut into byte-range
	// splits by (see splitBytes); 0: one split per file.
	SplitBytes int64            `json:"splitBytes,omitempty"`
	Seen       map[string]int64 `json:"seen,omitempty"`
	NewestMs   int64            `json:"newestMs,omitempty"`
	// Unread is Spark's cache of unread files: after a capped batch, the
	// files its listing found beyond the batch, when there are enough of
	// them (see Next). The next batches take only from them. Nil: none.
	Unread *UnreadMark `json:"unread,omitempty"`
}

// UnreadMark names the cached files by the last of them in the order
// files are taken: every file not taken whose (modification time, name)
// is at or before (Ms, Name). A file that lands later with an older
// modification time than the mark therefore joins the cache, where Spark's
// in-memory list would not have it.
type UnreadMark struct {
	Ms   int64  `json:"ms"`
	Name string `json:"name"`
}

// Spark's FileStreamSource defaults for its cache of unread files.
const (
	maxCachedFiles          = 10000 // maxCachedFiles
	discardCachedInputRatio = 0.2   // discardCachedInputRatio
)

// unread reports whether f is in o's cache of unread files.
func (o Offset) unread(f fileInfo) bool {
	u := o.Unread
	return u != nil && (f.mtimeMs < u.Ms || f.mtimeMs == u.Ms && f.name <= u.Name)
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

// splitDesc is a Split's Desc: a whole file ({"file":name}, as version 2
// wrote it), or a byte range of one ({"range":{...}}, which a build that
// knows only whole files refuses, having no file to read, rather than read
// the whole file for each range).
type splitDesc struct {
	File  string     `json:"file,omitempty"`
	Range *byteRange `json:"range,omitempty"`
}

// byteRange is a split of one file: the lines that start in (From, To]
// (from the file's first byte when From is 0), To 0 meaning the end of
// the file. A range starts after the first newline at or past From and
// reads through the line that crosses To, so every line of a file cut into
// ranges is read exactly once.
type byteRange struct {
	File string `json:"file"`
	From int64  `json:"from"`
	To   int64  `json:"to,omitempty"`
}

// Split sizing. A batch's files are cut into byte ranges of splitBytes:
// min(MaxSplitBytes, max(MinSplitBytes, batch bytes / minPartitions)),
// Spark's maxSplitBytes rule with minPartitions in place of the core count
// (docs/spark-differences.md#file-task-splitting). A file of at most
// splitBytes is one split; a larger one is cut into ceil(size/splitBytes)
// ranges of equal size.
const (
	// DefaultMinPartitions is minPartitions when the spec leaves it 0:
	// enough tasks to keep 2 to 16 cores busy to the end of a batch.
	DefaultMinPartitions = 16
	// MinSplitBytes is the smallest split a file is cut into (Spark's
	// openCostInBytes): below it a task's fixed costs would show.
	MinSplitBytes = 4 << 20
	// MaxSplitBytes is the largest (Spark's maxPartitionBytes).
	MaxSplitBytes = 128 << 20
)

// splitBytes is the split size of a batch of total bytes.
func splitBytes(total int64, minPartitions int) int64 {
	if minPartitions <= 0 {
		minPartitions = DefaultMinPartitions
	}
	per := (total + int64(minPartitions) - 1) / int64(minPartitions)
	return min(MaxSplitBytes, max(MinSplitBytes, per))
}

// fileSplits cuts a file of size bytes by split: nil for one split of the
// whole file, else the ranges' starts (the first is 0), each range ending
// where the next starts and the last at the end of the file.
func fileSplits(size, split int64) []int64 {
	if split <= 0 || size <= split {
		return nil
	}
	k := (size + split - 1) / split
	starts := make([]int64, k)
	for j := range k {
		starts[j] = j * size / k
	}
	return starts
}

// Source reads JSON-lines files. Planning methods are meant for one driver
// goroutine; Read may run concurrently with anything.
type Source struct {
	store   objstore.Store
	archive objstore.Store
	opts    query.FileSource
	logger  *slog.Logger
	once    sync.Once
	// availableNow: the run drains one snapshot; Spark keeps no cache of
	// unread files then.
	availableNow bool
	// cache is what the last listing found (planning goroutine only).
	cache listCache
	// parsed holds the last offsets parsed or made (a large taken set
	// is parsed once, not at every call).
	mu     sync.Mutex
	parsed [2]parsedOffset
}

type parsedOffset struct {
	raw source.Offset
	off Offset
}

// parse is ParseOffset through s.parsed. The result's Seen must not be
// changed.
func (s *Source) parse(b source.Offset) (Offset, error) { return s.parseKeep(b, true) }

// parseKeep is parse; keep says whether a new offset joins s.parsed.
func (s *Source) parseKeep(b source.Offset, keep bool) (Offset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.parsed {
		if p.raw != nil && bytes.Equal(p.raw, b) {
			return p.off, nil
		}
	}
	o, err := ParseOffset(b)
	if err != nil {
		return Offset{}, err
	}
	if keep {
		s.remember(b, o)
	}
	return o, nil
}

// remember adds an offset to s.parsed (s.mu held).
func (s *Source) remember(b source.Offset, o Offset) {
	s.parsed[1] = s.parsed[0]
	s.parsed[0] = parsedOffset{raw: clone(b), off: o}
}

// listCache is the driver's memory of the last listing: the data files not
// taken then and young enough to be taken (name -> modification time in
// ms), and when the whole directory was last listed. It is not in the
// checkpoint: a new process lists the whole directory first.
type listCache struct {
	valid   bool
	fullAt  time.Time
	pending map[string]fileStat
}

var (
	_ source.Source         = (*Source)(nil)
	_ source.Committer      = (*Source)(nil)
	_ source.OffsetResolver = (*Source)(nil)
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

// SetAvailableNow tells the source that the query's trigger is
// availableNow: batches then never use the cache of unread files, as in
// Spark (which reads the prefetched listing instead).
func (s *Source) SetAvailableNow() { s.availableNow = true }

// caches reports whether a capped batch keeps the rest of its listing for
// the next batches: Spark's FileStreamSource does with maxFilesPerTrigger,
// unless latestFirst or availableNow.
func (s *Source) caches() bool {
	return s.opts.MaxFilesPerTrigger > 0 && !s.opts.LatestFirst && !s.availableNow
}

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
	size    int64 // -1: the store does not list sizes
}

// fileStat is what a listing found of a file not yet taken.
type fileStat struct {
	mtimeMs int64
	size    int64
}

// list returns the data files named after startAfter ("": all) with
// their modification times. A store that cannot list times gives every
// file time 0 (name order).
func (s *Source) list(ctx context.Context, startAfter string) ([]fileInfo, error) {
	var out []fileInfo
	_, al := s.store.(objstore.AfterLister)
	if _, il := s.store.(objstore.InfoLister); il || al {
		infos, err := objstore.ListInfoAfter(ctx, s.store, "", startAfter)
		if err != nil {
			return nil, fmt.Errorf("list file source %s: %w", s.opts.Path, err)
		}
		for _, o := range infos {
			if isData(o.Key) {
				out = append(out, fileInfo{name: o.Key, mtimeMs: o.ModTime.UnixMilli(), size: o.Size})
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
		if isData(k) && k > startAfter {
			out = append(out, fileInfo{name: k, size: -1})
		}
	}
	return out, nil
}

// threshold is the oldest modification time a file may have to be taken
// after st: newestMs - maxFileAge once something was taken, unless
// maxFileAge is ignored.
func (s *Source) threshold(st Offset) int64 {
	if len(st.Seen) > 0 && !s.ageIgnored() {
		return st.NewestMs - s.opts.FileAge().Milliseconds()
	}
	return math.MinInt64
}

// listStart is where a partial listing starts after st: the directory
// (with its trailing slash) of the newest file taken (ties: the greatest
// name), or that file's own name when it is at the top level. "" when
// nothing was taken.
func listStart(st Offset) string {
	var name string
	var at int64
	for n, t := range st.Seen {
		if name == "" || t > at || t == at && n > name {
			name, at = n, t
		}
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return name
}

// available returns the data files not taken at st that are young enough
// to be taken. Without fullListingInterval it lists the whole directory.
// With it, the whole directory is listed at the first call and then once
// the interval has passed since the last full listing; a call between
// lists only the keys after listStart(st) and keeps what earlier listings
// found before that key (files not yet taken: a backlog capped by
// maxFilesPerTrigger). A file that lands under a key before listStart is
// therefore found at the next full listing. Either way the result is
// remembered for Next.
func (s *Source) available(ctx context.Context, st Offset, now time.Time) ([]fileInfo, error) {
	interval := s.opts.FullListingInterval.D()
	start := ""
	// A clock that went back counts as the interval having passed.
	if since := now.Sub(s.cache.fullAt); interval > 0 && s.cache.valid && since >= 0 && since < interval && st.Version >= 2 {
		start = listStart(st)
	}
	files, err := s.list(ctx, start)
	if err != nil {
		return nil, err
	}
	if start == "" {
		s.cache = listCache{valid: true, fullAt: now, pending: make(map[string]fileStat, len(files))}
	} else {
		for n := range s.cache.pending {
			if n > start {
				delete(s.cache.pending, n) // listed again just now
			}
		}
	}
	threshold := s.threshold(st)
	for _, f := range files {
		if (f.mtimeMs >= threshold || st.unread(f)) && !st.taken(f.name) {
			s.cache.pending[f.name] = fileStat{mtimeMs: f.mtimeMs, size: f.size}
		}
	}
	out := make([]fileInfo, 0, len(s.cache.pending))
	for n, fs := range s.cache.pending {
		f := fileInfo{name: n, mtimeMs: fs.mtimeMs, size: fs.size}
		if st.taken(n) || f.mtimeMs < threshold && !st.unread(f) {
			delete(s.cache.pending, n)
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// ageIgnored reports whether maxFileAge is off: latestFirst with a cap,
// as in Spark (old files still due would be dropped otherwise).
func (s *Source) ageIgnored() bool { return s.opts.LatestFirst && s.opts.MaxFilesPerTrigger > 0 }

// candidates returns the files not yet taken after st and young enough, in
// the order they are taken: oldest modification time first (newest first
// with latestFirst), as Spark's FileStreamSource sorts them, then by name
// (Spark keeps the listing's order: docs/spark-differences.md#file-order-ties).
func (s *Source) candidates(st Offset, files []fileInfo) []fileInfo {
	threshold := s.threshold(st)
	var out []fileInfo
	for _, f := range files {
		// Cached unread files stay due whatever their age, as Spark reads
		// its cache without checking it again.
		if st.taken(f.name) || f.mtimeMs < threshold && !st.unread(f) {
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
	st, err := s.parse(start)
	if err != nil {
		return nil, err
	}
	files, err := s.available(ctx, st, now)
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
// maxFilesPerTrigger of them (0: all), only files limit lists, as Spark's
// FileStreamSource.fetchMaxOffset: when start holds a cache of unread
// files, the batch takes only from them (even fewer than the cap); a
// capped batch caches the rest of its files, up to maxCachedFiles, when
// they are at least discardCachedInputRatio of the cap. Spark keeps that
// cache in memory only, so its batches after a restart differ; Sluice's
// is in the offset (docs/spark-differences.md#file-unread-cache). It returns
// start when there is none. The end offset's Seen adds the batch's files
// and drops files older than maxFileAge relative to the newest taken.
func (s *Source) Next(ctx context.Context, start, limit source.Offset) (source.Offset, error) {
	st, err := s.parse(start)
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
	files, err := s.nextFiles(ctx, st, allowed)
	if err != nil {
		return nil, err
	}
	var pool, cached []fileInfo
	for _, f := range s.candidates(st, files) {
		if !allowed[f.name] {
			continue
		}
		pool = append(pool, f)
		if s.caches() && st.unread(f) {
			cached = append(cached, f)
		}
	}
	if len(cached) > 0 {
		pool = cached
	}
	batch := pool
	if m := s.opts.MaxFilesPerTrigger; m > 0 && len(batch) > m {
		batch = pool[:m]
	}
	if len(batch) == 0 {
		return clone(start), nil
	}
	end := Offset{Version: offsetVersion, Seen: make(map[string]int64, len(st.Seen)+len(batch)), NewestMs: st.NewestMs}
	if rest := pool[len(batch):]; s.caches() && len(rest) > 0 && float64(len(rest)) >= float64(s.opts.MaxFilesPerTrigger)*discardCachedInputRatio {
		last := rest[min(len(rest), maxCachedFiles)-1]
		end.Unread = &UnreadMark{Ms: last.mtimeMs, Name: last.name}
	}
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
	var total int64
	sized := true
	for _, f := range batch {
		end.Files = append(end.Files, f.name)
		end.Sizes = append(end.Sizes, f.size)
		end.Seen[f.name] = f.mtimeMs
		end.NewestMs = max(end.NewestMs, f.mtimeMs)
		total += max(f.size, 0)
		sized = sized && f.size >= 0
	}
	if sized {
		end.SplitBytes = splitBytes(total, s.opts.MinPartitions)
	} else {
		end.Sizes = nil // the store lists no sizes: one split per file
	}
	if !s.ageIgnored() {
		threshold := end.NewestMs - s.opts.FileAge().Milliseconds()
		for n, t := range end.Seen {
			if t < threshold {
				delete(end.Seen, n)
			}
		}
	}
	b := end.Marshal()
	s.mu.Lock()
	s.remember(b, end)
	s.mu.Unlock()
	return b, nil
}

// nextFiles returns the files Next chooses from: what the last listing
// found, when it holds every file allowed that st has not taken (Latest
// listed just before, or an availableNow run's one listing), else a new
// listing of the whole directory (also for a version-1 start, which needs
// every name).
func (s *Source) nextFiles(ctx context.Context, st Offset, allowed map[string]bool) ([]fileInfo, error) {
	if s.cache.valid && st.Version >= 2 {
		hit := true
		for n := range allowed {
			if _, ok := s.cache.pending[n]; !ok && !st.taken(n) {
				hit = false
				break
			}
		}
		if hit {
			out := make([]fileInfo, 0, len(allowed))
			for n := range allowed {
				if fs, ok := s.cache.pending[n]; ok {
					out = append(out, fileInfo{name: n, mtimeMs: fs.mtimeMs, size: fs.size})
				}
			}
			return out, nil
		}
	}
	return s.list(ctx, "")
}

// Splits returns the splits of end's batch, or none when end is start: a
// file of at most end's splitBytes (every file of an offset without sizes)
// is one split, a larger one is cut into byte ranges (fileSplits). They
// depend only on end, so a re-run of a logged batch has the same tasks.
func (s *Source) Splits(ctx context.Context, start, end source.Offset) ([]source.Split, error) {
	if bytes.Equal(start, end) {
		return nil, nil
	}
	st, err := s.parse(start)
	if err != nil {
		return nil, err
	}
	en, err := s.parse(end)
	if err != nil {
		return nil, err
	}
	if en.Sizes != nil && len(en.Sizes) != len(en.Files) {
		return nil, fmt.Errorf("plan file source splits: the end offset has %d sizes for %d files", len(en.Sizes), len(en.Files))
	}
	splits := make([]source.Split, 0, len(en.Files))
	add := func(id string, d splitDesc) error {
		desc, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("plan file source splits: %w", err)
		}
		splits = append(splits, source.Split{ID: id, Desc: desc})
		return nil
	}
	for i, f := range en.Files {
		if st.taken(f) {
			return nil, fmt.Errorf("plan file source splits: file %s of the end offset was already taken at the start offset", f)
		}
		var starts []int64
		if en.Sizes != nil {
			starts = fileSplits(en.Sizes[i], en.SplitBytes)
		}
		if starts == nil {
			if err := add(f, splitDesc{File: f}); err != nil {
				return nil, err
			}
			continue
		}
		for j, from := range starts {
			r := &byteRange{File: f, From: from}
			if j+1 < len(starts) {
				r.To = starts[j+1]
			}
			if err := add(fmt.Sprintf("%s@%d", f, from), splitDesc{Range: r}); err != nil {
				return nil, err
			}
		}
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
			rc, err := objstore.GetReader(ctx, s.store, f)
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("archive %s: %w", f, err)
			}
			// Streamed: a file is never held whole.
			err = objstore.PutReader(ctx, s.archive, f, rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("archive %s to %s: %w", f, s.opts.SourceArchiveDir, err)
			}
		}
		if err := s.store.Delete(ctx, f); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("clean file source: delete %s: %w", f, err)
		}
	}
	return nil
}

// Close does nothing: the store belongs to the caller.
func (s *Source) Close() error { return nil }

func clone(b source.Offset) source.Offset { return append(source.Offset(nil), b...) }

// progressFiles is how many names of a batch a compact progress offset
// shows.
const progressFiles = 100

// ProgressOffsetMaxBytes is the largest offset progress shows as it is;
// a larger one is shown compact (ProgressOffset).
const ProgressOffsetMaxBytes = 64 << 10

// progressOffset is an offset as progress shows it.
type progressOffset struct {
	Version int `json:"version"`
	// Files: the first progressFiles of the offset's files; NumFiles all.
	Files    []string `json:"files"`
	NumFiles int      `json:"numFiles"`
	// NumSeen counts the taken names the offset keeps.
	NumSeen  int   `json:"numSeen"`
	NewestMs int64 `json:"newestMs,omitempty"`
}

// ProgressOffset is the offset as progress shows it: itself up to
// ProgressOffsetMaxBytes, else a compact form of bounded size: the first
// 100 files, the counts of files and taken names kept, and newestMs (the
// names themselves are in offsets/N). An offset that does not parse is
// shown as it is.
func (s *Source) ProgressOffset(off source.Offset) source.Offset {
	if len(off) <= ProgressOffsetMaxBytes {
		return off
	}
	o, err := s.parseKeep(off, false)
	if err != nil {
		return off
	}
	p := progressOffset{Version: max(o.Version, 1), Files: o.Files[:min(len(o.Files), progressFiles)], NumFiles: len(o.Files), NumSeen: len(o.Seen), NewestMs: o.NewestMs}
	if p.Files == nil {
		p.Files = []string{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return off
	}
	return b
}

var _ source.ProgressOffsetter = (*Source)(nil)
