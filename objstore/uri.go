package objstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// URI is a parsed store location.
//
//   - s3://bucket/prefix/ → {Scheme: "s3", Bucket: "bucket", Prefix: "prefix/"}
//   - file:///abs/path    → {Scheme: "file", Path: "/abs/path"}
//   - a plain path        → {Scheme: "file", Path: the path, cleaned}
type URI struct {
	Scheme string // "s3" or "file"
	Bucket string // s3 only
	Prefix string // s3 only: "" or ending in "/"
	Path   string // file only
}

// String renders the URI in canonical form.
func (u URI) String() string {
	if u.Scheme == "s3" {
		return "s3://" + u.Bucket + "/" + u.Prefix
	}
	return u.Path
}

// Options configures the stores Open can return.
type Options struct {
	S3 S3Options
}

// IsObjectStore reports whether uri names an object store (s3://) rather
// than a local path.
func IsObjectStore(uri string) bool {
	return strings.HasPrefix(uri, "s3://")
}

// ParseURI parses s3://bucket/prefix, file:///abs/path or a plain local
// path. Any other scheme is an error.
func ParseURI(uri string) (URI, error) {
	switch {
	case uri == "":
		return URI{}, fmt.Errorf("parse store uri %q: must not be empty", uri)
	case strings.HasPrefix(uri, "s3://"):
		rest := strings.TrimPrefix(uri, "s3://")
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return URI{}, fmt.Errorf("parse store uri %q: s3 uri needs a bucket: s3://bucket/prefix/", uri)
		}
		if err := checkBucket(bucket); err != nil {
			return URI{}, fmt.Errorf("parse store uri %q: %w", uri, err)
		}
		if strings.ContainsAny(prefix, "?#\\") {
			return URI{}, fmt.Errorf("parse store uri %q: s3 prefix must not contain '?', '#' or '\\'", uri)
		}
		if prefix != "" {
			for _, seg := range strings.Split(strings.TrimSuffix(prefix, "/"), "/") {
				if seg == "" || seg == "." || seg == ".." {
					return URI{}, fmt.Errorf("parse store uri %q: s3 prefix segments must not be empty, \".\" or \"..\"", uri)
				}
			}
		}
		return URI{Scheme: "s3", Bucket: bucket, Prefix: normalizePrefix(prefix)}, nil
	case strings.HasPrefix(uri, "file://"):
		rest := strings.TrimPrefix(uri, "file://")
		if strings.HasPrefix(rest, "localhost/") {
			rest = strings.TrimPrefix(rest, "localhost")
		}
		if !strings.HasPrefix(rest, "/") {
			return URI{}, fmt.Errorf("parse store uri %q: file uri must name an absolute path: file:///abs/path", uri)
		}
		return URI{Scheme: "file", Path: filepath.Clean(rest)}, nil
	default:
		if i := strings.Index(uri, "://"); i >= 0 {
			return URI{}, fmt.Errorf("parse store uri %q: scheme %q is not supported (use s3://, file:// or a local path)", uri, uri[:i])
		}
		return URI{Scheme: "file", Path: filepath.Clean(uri)}, nil
	}
}

// Open returns the store a URI names: an S3 store for s3://bucket/prefix/
// (configured by opts.S3) or a filesystem store for file:///abs/path and
// plain paths (created if missing).
func Open(ctx context.Context, uri string, opts Options) (Store, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "s3":
		return NewS3(ctx, u.Bucket, u.Prefix, opts.S3)
	default:
		return NewFS(u.Path)
	}
}
