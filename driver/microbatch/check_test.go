package microbatch_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// tree lists every path under dir (directories included), so that an
// empty directory created by a refused start is seen.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, strings.TrimPrefix(p, dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// A spec refused by Check, for any reason, leaves the filesystem as it
// was: no checkpoint, sink or bad-records directory is created.
func TestRefusedSpecCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *query.Spec, dir string)
		want   string
		is     error
	}{
		{"source directory missing", func(s *query.Spec, dir string) { s.Source.File.Path = filepath.Join(dir, "typo") },
			`source.file.path: "` + "DIR" + `/typo" is not a readable directory: it does not exist`, nil},
		{"invalid spec", func(s *query.Spec, _ string) { s.OutputMode = "upsert" },
			`outputMode: "upsert" is not an output mode`, nil},
		{"checkpoint is a file", func(s *query.Spec, dir string) {
			os.WriteFile(filepath.Join(dir, "afile"), []byte("x"), 0o644)
			s.CheckpointLocation = filepath.Join(dir, "afile")
		}, `checkpointLocation: "DIR/afile" is not a directory: it is a file`, nil},
		{"unknown scheme", func(s *query.Spec, _ string) { s.BadRecordsPath = "gs://bucket/bad" },
			`badRecordsPath: "gs://bucket/bad" is not a location: scheme "gs" is not supported`, nil},
		{"unsupported Kafka option", func(s *query.Spec, _ string) {
			s.Source.File = nil
			s.Source.Kafka = &query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "t", Options: map[string]string{"foo.bar": "x"}}
		}, "unsupported Kafka client option(s) kafka.foo.bar", nil},
		{"Kafka truststore missing", func(s *query.Spec, dir string) {
			s.Source.File = nil
			s.Source.Kafka = &query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "t",
				Options: map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": filepath.Join(dir, "ca.pem")}}
		}, `source.kafka.kafka.ssl.truststore.location: "DIR/ca.pem" is not a readable file: no such file or directory`, nil},
		{"dedup before an aggregate (YAML)", func(s *query.Spec, _ string) { s.Dedup = &query.Dedup{Keys: []string{"event_id"}} },
			`dedup: "event_id" with an aggregate is not run by this build: Spark aggregates the deduplicated rows through a second shuffle`, nil},
		{"dedup before an aggregate (SQL)", func(s *query.Spec, _ string) {
			s.Aggregate = nil
			s.SQL = "SELECT window.start AS window_start, count(*) AS n FROM drop_duplicates_within_watermark(TABLE(events), event_id) GROUP BY window(event_time, '5 minutes')"
		}, `and aggregate its output in a second query whose file source reads that sink's path`, nil},
		{"production on a local checkpoint", func(s *query.Spec, _ string) { s.Environment = query.Production },
			"environment production needs checkpointLocation on an object store", microbatch.ErrProductionGuard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in")
			writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			tc.mutate(&spec, dir)
			before := tree(t, dir)
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if err := microbatch.Check(spec); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Check: got %v, want an error containing %q", err, want)
			}
			_, err := microbatch.Build(context.Background(), spec, microbatch.Options{AllowFirstStart: true})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Build: got %v, want an error containing %q", err, want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("Build: %v does not match %v", err, tc.is)
			}
			if after := tree(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("a refused start changed the filesystem:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
