package microbatch

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
)

// Check is everything that can be known about spec before anything is
// opened or created: CheckSpec, then every location the spec names (each
// must parse; a local directory the source reads must exist and be
// readable; a local checkpoint, sink, bad-records or archive path that
// exists must be a directory; a local file a source option names, such as
// a Kafka *.location, must be a readable file: source.Kind.Locations says
// which are which), then the
// production guard on the checkpoint's store. It
// reads the filesystem and writes nothing, so a refused query leaves no
// trace. Build calls it first; the CLI calls it before it opens its own
// files. It returns a *query.ValidationError for spec and path problems,
// or an error matching ErrProductionGuard.
func Check(spec query.Spec) error {
	if err := CheckSpec(spec); err != nil {
		return err
	}
	s := spec.WithDefaults()
	var problems []query.Problem
	add := func(field, value, rule string) {
		problems = append(problems, query.Problem{Field: field, Value: value, Rule: rule})
	}
	type loc struct {
		field, uri string
		mustExist  bool
	}
	locs := []loc{{"checkpointLocation", s.CheckpointLocation, false}}
	var files []source.Location
	for _, l := range catalog.Locations(&s.Source) {
		switch l.Use {
		case source.ReadsDir:
			locs = append(locs, loc{l.Field, l.Value, true})
		case source.WritesDir:
			locs = append(locs, loc{l.Field, l.Value, false})
		case source.ReadsFile:
			files = append(files, l)
		}
	}
	if p := s.Sink.Parquet; p != nil {
		locs = append(locs, loc{"sink.parquet.path", p.Path, false})
	}
	if j := s.Sink.JSONBatches; j != nil {
		locs = append(locs, loc{"sink.jsonBatches.path", j.Path, false})
	}
	if s.BadRecordsPath != "" {
		locs = append(locs, loc{"badRecordsPath", s.BadRecordsPath, false})
	}
	if j := s.Join; j != nil {
		locs = append(locs, loc{"join.path", j.Path, true})
	}
	for _, l := range locs {
		u, err := objstore.ParseURI(l.uri)
		if err != nil {
			add(l.field, l.uri, "is not a location: "+unwrapURIError(err))
			continue
		}
		if u.Scheme != "file" {
			continue // an object store is reached only when the query opens it
		}
		fi, err := os.Stat(u.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && l.mustExist:
			add(l.field, l.uri, "is not a readable directory: it does not exist (create it, or fix the path)")
		case errors.Is(err, fs.ErrNotExist):
			// created on start
		case err != nil:
			add(l.field, l.uri, "is not a readable directory: "+err.Error())
		case !fi.IsDir():
			add(l.field, l.uri, "is not a directory: it is a file")
		case l.mustExist:
			if d, err := os.Open(u.Path); err != nil {
				add(l.field, l.uri, "is not a readable directory: "+err.Error())
			} else {
				d.Close()
			}
		}
	}
	for _, f := range files {
		fi, err := os.Stat(f.Value)
		switch {
		case err != nil:
			add(f.Field, f.Value, "is not a readable file: "+strings.TrimPrefix(err.Error(), "stat "+f.Value+": "))
		case fi.IsDir():
			add(f.Field, f.Value, "is a directory: give the PEM file")
		}
	}
	if len(problems) > 0 {
		return &query.ValidationError{Problems: problems}
	}
	return CheckProductionCheckpoint(&s, objstore.IsObjectStore(s.CheckpointLocation))
}

// CheckSpec is the part of Check that reads nothing: the one validation
// of the spec, its source's options included (catalog.Validate). driver
// explain refuses a spec on exactly these errors.
func CheckSpec(spec query.Spec) error {
	return catalog.Validate(spec)
}

// unwrapURIError drops ParseURI's `parse store uri "x": ` prefix, which
// would repeat the value.
func unwrapURIError(err error) string {
	if _, rest, ok := strings.Cut(err.Error(), "\": "); ok {
		return rest
	}
	return err.Error()
}
