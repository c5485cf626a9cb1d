package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Kind is the file source as the catalog lists it (source.file).
type Kind struct{}

var _ source.Kind = Kind{}

func (Kind) Name() string                      { return "file" }
func (Kind) Configured(src *query.Source) bool { return src.File != nil }
func (Kind) MetaColumns() []source.MetaColumn  { return nil }
func (Kind) FixedSchema() []query.Field        { return nil }

// Validate checks source.file's options.
func (Kind) Validate(s *query.Spec) []query.Problem {
	const p = "source.file."
	f := s.Source.File
	var problems []query.Problem
	add := func(field, value, rule string, args ...any) {
		problems = append(problems, query.Problem{Field: field, Value: value, Rule: fmt.Sprintf(rule, args...)})
	}
	if f.Path == "" {
		add(p+"path", "", "required: the directory (or URI) the JSON-lines files land in")
	}
	if f.MaxFilesPerTrigger < 0 {
		add(p+"maxFilesPerTrigger", strconv.Itoa(f.MaxFilesPerTrigger), "must be >= 0 (0 means no cap)")
	}
	if f.MinPartitions < 0 {
		add(p+"minPartitions", strconv.Itoa(f.MinPartitions), "must be >= 0 (0 means %d)", DefaultMinPartitions)
	}
	if f.MaxFileAge < 0 {
		add(p+"maxFileAge", f.MaxFileAge.D().String(), "must be positive (default 7d): files older than this, relative to the newest file, are ignored")
	}
	switch {
	case f.FullListingInterval < 0:
		add(p+"fullListingInterval", f.FullListingInterval.D().String(), "must be positive (0, the default, lists the whole directory at every trigger)")
	case f.FullListingInterval > 0 && !(f.LatestFirst && f.MaxFilesPerTrigger > 0) && f.FullListingInterval.D() >= f.FileAge():
		add(p+"fullListingInterval", f.FullListingInterval.D().String(), "must be less than maxFileAge (%s): a late file in an older directory is found only at the next full listing, and must still be within maxFileAge then", f.FileAge())
	}
	switch f.CleanSource {
	case "", query.CleanSourceOff, query.CleanSourceDelete:
		if f.SourceArchiveDir != "" {
			add(p+"sourceArchiveDir", f.SourceArchiveDir, "is only used with cleanSource: archive")
		}
	case query.CleanSourceArchive:
		switch {
		case f.SourceArchiveDir == "":
			add(p+"sourceArchiveDir", "", "required with cleanSource: archive: the directory consumed files are moved to")
		case f.Path != "" && underDir(f.SourceArchiveDir, f.Path):
			add(p+"sourceArchiveDir", f.SourceArchiveDir, "must not be inside source.file.path %q: archived files would be read again", f.Path)
		}
	default:
		add(p+"cleanSource", f.CleanSource, "must be off, delete or archive")
	}
	return problems
}

// underDir reports whether path is dir or inside it, comparing cleaned
// local paths, or URIs as written.
func underDir(path, dir string) bool {
	p := strings.TrimSuffix(strings.TrimPrefix(path, "file://"), "/") + "/"
	d := strings.TrimSuffix(strings.TrimPrefix(dir, "file://"), "/") + "/"
	if !strings.Contains(p, "://") {
		p = filepath.ToSlash(filepath.Clean(p)) + "/"
		d = filepath.ToSlash(filepath.Clean(d)) + "/"
	}
	return strings.HasPrefix(p, d)
}

// Open opens the source's directory (a local one must exist) and, with
// cleanSource archive, the archive directory.
func (Kind) Open(ctx context.Context, s *query.Spec, env source.Env) (source.Source, error) {
	opts := *s.Source.File
	if !objstore.IsObjectStore(opts.Path) {
		u, err := objstore.ParseURI(opts.Path)
		if err != nil {
			return nil, fmt.Errorf("source.file.path: %w", err)
		}
		if fi, err := os.Stat(u.Path); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("source.file.path %q: not a readable directory", opts.Path)
		}
	}
	st, err := env.OpenStore(ctx, opts.Path)
	if err != nil {
		return nil, fmt.Errorf("open source.file.path: %w", err)
	}
	src := New(st, opts, env.Logger)
	if s.Trigger.AvailableNow {
		src.SetAvailableNow()
	}
	if dir := opts.SourceArchiveDir; dir != "" && opts.CleanSource == query.CleanSourceArchive {
		ast, err := env.OpenStore(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("open source.file.sourceArchiveDir: %w", err)
		}
		src.SetArchive(ast)
	}
	return src, nil
}

// Locations are the directory the source reads and, with cleanSource
// archive, the one it moves files into.
func (Kind) Locations(src *query.Source) []source.Location {
	f := src.File
	out := []source.Location{{Field: "source.file.path", Value: f.Path, Use: source.ReadsDir}}
	if f.SourceArchiveDir != "" {
		out = append(out, source.Location{Field: "source.file.sourceArchiveDir", Value: f.SourceArchiveDir, Use: source.WritesDir})
	}
	return out
}

// Explain says how the source plans, caps and splits batches.
func (Kind) Explain(src *query.Source) source.Explanation {
	f := src.File
	title := fmt.Sprintf("FileSource %s (JSON lines)", f.Path)
	detail := []string{
		"plan: list the directory, take the files not taken yet; each batch's files are recorded in offsets/N so a re-run reads the same files",
		"names starting with . or _ are not data",
	}
	if f.MaxFilesPerTrigger > 0 {
		detail = append(detail, fmt.Sprintf("cap: maxFilesPerTrigger %d files per batch", f.MaxFilesPerTrigger))
	} else {
		detail = append(detail, "cap: none (maxFilesPerTrigger unset): a batch takes every new file")
	}
	if f.FullListingInterval > 0 {
		detail = append(detail, fmt.Sprintf("listing: the whole directory every %v (fullListingInterval); triggers between list from the directory of the newest file taken, so a file landing in an older directory waits for the next full listing", f.FullListingInterval.D()))
	}
	parts := f.MinPartitions
	if parts <= 0 {
		parts = DefaultMinPartitions
	}
	detail = append(detail, fmt.Sprintf("tasks: one per file; a file over max(%d MiB, the batch's bytes / %d (minPartitions)), at most %d MiB, is cut into byte ranges of that size", MinSplitBytes>>20, parts, MaxSplitBytes>>20))
	cap := ""
	if f.MaxFilesPerTrigger > 0 {
		cap = fmt.Sprintf("%d files (maxFilesPerTrigger)", f.MaxFilesPerTrigger)
	}
	return source.Explanation{Title: title, Detail: detail, Cap: cap}
}

// Description is progress's sources[].description.
func (s *Source) Description() string { return "FileStreamSource[" + s.opts.Path + "]" }
