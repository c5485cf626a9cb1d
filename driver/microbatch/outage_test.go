package microbatch_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
)

// outage is how long the object store is down in
// TestObjectStoreOutageAtALogWriteIsWaitedOut: SLUICE_OUTAGE (e.g. 60s),
// else 6s. Either way it outlasts the S3 client's own retries (cut to one
// retry here), so only the scheduler's retry budget can wait it out.
func outage(t *testing.T) time.Duration {
	if v := os.Getenv("SLUICE_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLUICE_OUTAGE=%q: %v", v, err)
		}
		return d
	}
	return 6 * time.Second
}

// The object store goes down exactly when the driver writes offsets/2, or
// commits/2 (that write lands but its response is lost, so the retry after
// the outage finds its own entry): the query waits within
// --source-retry-for and resumes, and the output equals the oracle.
func TestObjectStoreOutageAtALogWriteIsWaitedOut(t *testing.T) {
	srv := s3test.Start(t)
	base := t.TempDir()
	in := filepath.Join(base, "in")
	events := tiletest.Events(95, 2000, 400*time.Millisecond, 2*time.Minute, 3)
	if err := tiletest.WriteFiles(in, events, 400); err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	down := outage(t)
	for _, tc := range []struct {
		name, object string
		first        faultproxy.Fault // what the write that starts the outage gets
	}{
		{"offsets", "offsets/2", faultproxy.ServiceUnavailable},
		{"commits", "commits/2", faultproxy.LostResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, err := faultproxy.NewHTTP(srv.Endpoint, faultproxy.Config{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			bucket := "outage-" + tc.name
			srv.CreateBucket(t, bucket)
			s3opts := srv.Options(bucket)
			s3opts.Endpoint = proxy.URL()
			s3opts.MaxRetries = 1
			s3opts.RetryBaseDelay = 20 * time.Millisecond
			out := filepath.Join(base, tc.name, "out")
			spec := tiletest.Spec(in, out, "s3://"+bucket+"/cp/")
			spec.Source.File.MaxFilesPerTrigger = 2

			hold := proxy.Hold(faultproxy.Match{Method: "PUT", Suffix: "/cp/" + tc.object})
			ended := make(chan time.Time, 1)
			go func() {
				<-hold.Arrived()
				if err := proxy.Set(faultproxy.Config{Fraction: 1, Faults: []faultproxy.Fault{faultproxy.ServiceUnavailable}}); err != nil {
					panic(err)
				}
				hold.Release(tc.first)
				time.Sleep(down)
				if err := proxy.Set(faultproxy.Config{}); err != nil {
					panic(err)
				}
				ended <- time.Now()
			}()
			start := time.Now()
			run(t, spec, microbatch.Options{
				Store:          objstore.Options{S3: s3opts},
				SourceRetryFor: down + 2*time.Minute,
			})
			select {
			case <-ended:
			default:
				t.Fatalf("the query finished in %v without waiting out the %v outage at %s", time.Since(start), down, tc.object)
			}
			if faulted := proxy.Stats().TotalFaulted(); faulted == 0 {
				t.Fatal("no request was refused during the outage")
			}
			if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
				t.Fatalf("output after the outage differs from the oracle:\n%s", d)
			}
			if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
				t.Fatalf("committed output after the outage differs from the oracle:\n%s", d)
			}
		})
	}
}
