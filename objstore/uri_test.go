package objstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

func TestParseURI(t *testing.T) {
	cases := []struct {
		in      string
		want    objstore.URI
		wantErr string // substring; "" means no error
	}{
		{in: "s3://bucket/prefix/", want: objstore.URI{Scheme: "s3", Bucket: "bucket", Prefix: "prefix/"}},
		{in: "s3://bucket/a/b", want: objstore.URI{Scheme: "s3", Bucket: "bucket", Prefix: "a/b/"}},
		{in: "s3://bucket", want: objstore.URI{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/", want: objstore.URI{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://my.bucket-1/checkpoints/prod/q/", want: objstore.URI{Scheme: "s3", Bucket: "my.bucket-1", Prefix: "checkpoints/prod/q/"}},
		{in: "file:///abs/path", want: objstore.URI{Scheme: "file", Path: "/abs/path"}},
		{in: "file:///abs/path/", want: objstore.URI{Scheme: "file", Path: "/abs/path"}},
		{in: "file://localhost/abs", want: objstore.URI{Scheme: "file", Path: "/abs"}},
		{in: "/plain/abs", want: objstore.URI{Scheme: "file", Path: "/plain/abs"}},
		{in: "relative/dir/", want: objstore.URI{Scheme: "file", Path: "relative/dir"}},
		{in: "./here", want: objstore.URI{Scheme: "file", Path: "here"}},
		{in: "", wantErr: "must not be empty"},
		{in: "s3://", wantErr: "needs a bucket"},
		{in: "s3:///prefix", wantErr: "needs a bucket"},
		{in: "s3://Bucket/x", wantErr: "lower-case"},
		{in: "s3://ab/x", wantErr: "3 to 63"},
		{in: "s3://bucket/a//b", wantErr: "segments"},
		{in: "s3://bucket/../x", wantErr: "segments"},
		{in: "s3://bucket/x?versionId=1", wantErr: "'?'"},
		{in: "file://relative/path", wantErr: "absolute path"},
		{in: "gs://bucket/x", wantErr: `scheme "gs" is not supported`},
		{in: "http://host/x", wantErr: `scheme "http" is not supported`},
	}
	for _, c := range cases {
		got, err := objstore.ParseURI(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseURI(%q) error = %v, want one containing %q", c.in, err, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), c.in) {
				t.Errorf("ParseURI(%q) error %q does not name the uri", c.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURI(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseURI(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestIsObjectStoreOnlyForS3(t *testing.T) {
	for uri, want := range map[string]bool{
		"s3://b/p":    true,
		"file:///x":   false,
		"/tmp/x":      false,
		"s3:/b/p":     false,
		"data/s3://x": false,
	} {
		if got := objstore.IsObjectStore(uri); got != want {
			t.Errorf("IsObjectStore(%q) = %v, want %v", uri, got, want)
		}
	}
}

func TestOpenReturnsBackendNamedByURI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, uri := range []string{"file://" + dir + "/a", dir + "/b"} {
		st, err := objstore.Open(ctx, uri, objstore.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", uri, err)
		}
		fs, ok := st.(*objstore.FS)
		if !ok {
			t.Fatalf("Open(%q) = %T, want *objstore.FS", uri, st)
		}
		if want := filepath.Join(dir, filepath.Base(uri)); fs.Root() != want {
			t.Errorf("Open(%q) root = %q, want %q", uri, fs.Root(), want)
		}
	}
	// No request is sent when opening, so no server is needed here.
	st, err := objstore.Open(ctx, "s3://bucket/ckpt/q1", objstore.Options{S3: objstore.S3Options{
		Region: "eu-west-1", Endpoint: "http://127.0.0.1:1", AccessKeyID: "a", SecretAccessKey: "b",
	}})
	if err != nil {
		t.Fatalf("Open(s3://...): %v", err)
	}
	s3, ok := st.(*objstore.S3)
	if !ok {
		t.Fatalf("Open(s3://...) = %T, want *objstore.S3", st)
	}
	if s3.Bucket() != "bucket" || s3.Prefix() != "ckpt/q1/" || s3.String() != "s3://bucket/ckpt/q1/" {
		t.Errorf("S3 store = bucket %q prefix %q string %q", s3.Bucket(), s3.Prefix(), s3.String())
	}
	if _, err := objstore.Open(ctx, "gs://bucket/x", objstore.Options{}); err == nil {
		t.Error("Open(gs://...) succeeded")
	}
}

func TestS3OptionsValidateReportsEveryProblem(t *testing.T) {
	err := objstore.S3Options{
		Endpoint:          "127.0.0.1:7070",
		AccessKeyID:       "only-id",
		RequestsPerSecond: -1,
		RetryBaseDelay:    -1,
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted invalid options")
	}
	for _, want := range []string{`endpoint "127.0.0.1:7070"`, "secretAccessKey must be set together", "requestsPerSecond -1", "retryBaseDelay -1ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not mention %q", err, want)
		}
	}
	if err := (objstore.S3Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}
