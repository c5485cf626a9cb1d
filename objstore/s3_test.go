package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/objstore/storetest"
)

func TestS3SatisfiesStoreContract(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) objstore.Store {
		// A fresh prefix per test: the store must only see its own keys.
		return srv.Store(t, "contract", fmt.Sprintf("run-%d/", n.Add(1)))
	})
}

func TestS3SatisfiesMultipartContract(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	storetest.RunMultipart(t, func(t *testing.T) objstore.Store {
		return srv.Store(t, "multipart", fmt.Sprintf("run-%d/", n.Add(1)))
	})
}

func TestS3StoreAtBucketRootSatisfiesStoreContract(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return srv.Store(t, fmt.Sprintf("root-%d", n.Add(1)), "")
	})
}

func TestS3StoreKeepsKeysUnderItsPrefix(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	a := srv.Store(t, "shared", "tenant/a")
	root := srv.Store(t, "shared", "")
	if err := a.Put(ctx, "offsets/0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, err := root.Get(ctx, "tenant/a/offsets/0"); err != nil || string(got) != "x" {
		t.Fatalf("root Get(tenant/a/offsets/0) = %q, %v", got, err)
	}
	keys, err := root.List(ctx, "")
	if err != nil || fmt.Sprint(keys) != "[tenant/a/offsets/0]" {
		t.Fatalf("root List = %q, %v", keys, err)
	}
}

func TestS3OpensFromURIAndStandardAWSEnvironment(t *testing.T) {
	srv := s3test.Start(t)
	uri := srv.URI("envbucket", "q1/")
	// Isolate from the machine's AWS files, then configure only by env.
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AWS_REGION":
			continue // the region must default to us-east-1
		case "AWS_ENDPOINT_URL_S3":
			// The SDK falls back to path style by itself for an IP address
			// endpoint; with a host name only our default makes it so.
			v = strings.Replace(v, "127.0.0.1", "localhost", 1)
		}
		t.Setenv(k, v)
	}
	ctx := context.Background()
	st, err := objstore.Open(ctx, uri, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Path-style addressing must be chosen because an endpoint is set: a
	// virtual-host request would go to envbucket.localhost and fail.
	if err := st.Put(ctx, "k", []byte("from env")); err != nil {
		t.Fatalf("Put with settings from the environment: %v", err)
	}
	check := srv.Store(t, "envbucket", "")
	if got, err := check.Get(ctx, "q1/k"); err != nil || string(got) != "from env" {
		t.Fatalf("Get(q1/k) = %q, %v", got, err)
	}
}

func TestS3ErrorsNameOperationBucketAndKey(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	st := srv.Store(t, "names", "pre")
	_, err := st.Get(ctx, "missing/key")
	if !errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), "s3 get s3://names/pre/missing/key") {
		t.Fatalf("Get error = %v", err)
	}
	err = st.Delete(ctx, "missing/key")
	if !errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), "s3 delete s3://names/pre/missing/key") {
		t.Fatalf("Delete error = %v", err)
	}
	st.PutIfAbsent(ctx, "k", []byte("1"))
	err = st.PutIfAbsent(ctx, "k", []byte("2"))
	if !errors.Is(err, objstore.ErrExists) || !strings.Contains(err.Error(), "s3 put-if-absent s3://names/pre/k") {
		t.Fatalf("PutIfAbsent error = %v", err)
	}
	// A bucket that does not exist is an error, not ErrNotExist.
	opts := srv.Options("names")
	nobucket, err := objstore.NewS3(ctx, "no-such-bucket", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	err = nobucket.Put(ctx, "k", []byte("x"))
	if err == nil || errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), "s3 put s3://no-such-bucket/k") {
		t.Fatalf("Put into a missing bucket = %v", err)
	}
}

// faultProxy is a reverse proxy in front of the S3 server whose handler
// decides per request whether to forward it, fail it, or forward it and
// then drop the real response.
type faultProxy struct {
	*httptest.Server
	mu   sync.Mutex
	log  []string // "METHOD path -> status"
	next http.Handler
}

// verdict for one request: forward (status 0), or reply with status and
// S3 error code, optionally after forwarding it (a lost response).
type verdict struct {
	status  int
	code    string
	forward bool
}

func newFaultProxy(t *testing.T, target string, decide func(r *http.Request, n int) verdict) *faultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Host = pr.In.Host // the signature covers the Host header
	}}
	p := &faultProxy{next: rp}
	var n atomic.Int64
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := decide(r, int(n.Add(1)))
		status := v.status
		if v.status == 0 || v.forward {
			rec := httptest.NewRecorder()
			p.next.ServeHTTP(rec, r)
			if v.status == 0 {
				for k, vs := range rec.Header() {
					w.Header()[k] = vs
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				status = rec.Code
			}
		}
		p.mu.Lock()
		p.log = append(p.log, fmt.Sprintf("%s %s -> %d", r.Method, r.URL.Path, status))
		p.mu.Unlock()
		if v.status != 0 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(v.status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by test proxy</Message></Error>`, v.code)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// proxiedStore returns a store on bucket that talks to srv through p.
func proxiedStore(t *testing.T, srv *s3test.Server, p *faultProxy, bucket string, maxRetries int) *objstore.S3 {
	opts := srv.Options(bucket)
	opts.Endpoint = p.URL
	opts.MaxRetries = maxRetries
	opts.RetryBaseDelay = time.Millisecond
	opts.RetryMaxDelay = 5 * time.Millisecond
	st, err := objstore.NewS3(context.Background(), bucket, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestS3RetriesThrottlingUntilItSucceeds(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		status int
		code   string
	}{
		{"SlowDown503", http.StatusServiceUnavailable, "SlowDown"},
		{"TooManyRequests429", http.StatusTooManyRequests, "TooManyRequests"},
		{"InternalError500", http.StatusInternalServerError, "InternalError"},
		{"ConditionalRequestConflict409", http.StatusConflict, "ConditionalRequestConflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k = 3
			p := newFaultProxy(t, srv.Endpoint, func(r *http.Request, n int) verdict {
				if n <= k {
					return verdict{status: tc.status, code: tc.code}
				}
				return verdict{}
			})
			st := proxiedStore(t, srv, p, "retry", 5)
			key := "throttled/" + tc.name
			if err := st.PutIfAbsent(ctx, key, []byte("payload")); err != nil {
				t.Fatalf("PutIfAbsent through %d x %d: %v", k, tc.status, err)
			}
			got := p.requests()
			if len(got) != k+1 {
				t.Fatalf("proxy saw %d requests, want %d: %q", len(got), k+1, got)
			}
			direct := srv.Store(t, "retry", "")
			if b, err := direct.Get(ctx, key); err != nil || string(b) != "payload" {
				t.Fatalf("Get(%s) = %q, %v", key, b, err)
			}
		})
	}
}

func TestS3PersistentServerErrorFailsNamingBucketAndKey(t *testing.T) {
	srv := s3test.Start(t)
	p := newFaultProxy(t, srv.Endpoint, func(*http.Request, int) verdict {
		return verdict{status: http.StatusInternalServerError, code: "InternalError"}
	})
	st := proxiedStore(t, srv, p, "broken", 2)
	err := st.Put(context.Background(), "offsets/9", []byte("x"))
	if err == nil {
		t.Fatal("Put succeeded against a server that always fails")
	}
	if !strings.Contains(err.Error(), "s3 put s3://broken/offsets/9") {
		t.Errorf("error %q does not name the operation, bucket and key", err)
	}
	if errors.Is(err, objstore.ErrNotExist) || errors.Is(err, objstore.ErrExists) {
		t.Errorf("error %v matches a contract sentinel", err)
	}
	if got := p.requests(); len(got) != 3 {
		t.Errorf("proxy saw %d requests, want 3 (1 + 2 retries): %q", len(got), got)
	}
}

func TestS3PutIfAbsentRecognisesItsOwnWriteAfterALostResponse(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	// The first PUT reaches the server, but the client sees a 500.
	p := newFaultProxy(t, srv.Endpoint, func(r *http.Request, n int) verdict {
		if n == 1 && r.Method == http.MethodPut {
			return verdict{status: http.StatusInternalServerError, code: "InternalError", forward: true}
		}
		return verdict{}
	})
	st := proxiedStore(t, srv, p, "lost", 3)
	if err := st.PutIfAbsent(ctx, "commits/1", []byte("ours")); err != nil {
		t.Fatalf("PutIfAbsent after a lost response: %v", err)
	}
	got := p.requests()
	want := []string{"PUT /lost/commits/1 -> 500", "PUT /lost/commits/1 -> 412", "HEAD /lost/commits/1 -> 200"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests = %q, want %q", got, want)
	}
	if b, err := srv.Store(t, "lost", "").Get(ctx, "commits/1"); err != nil || string(b) != "ours" {
		t.Fatalf("Get = %q, %v", b, err)
	}
}

func TestS3PutIfAbsentRetryThatFindsAnotherWritersObjectIsErrExists(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	other := srv.Store(t, "fence", "")
	if err := other.PutIfAbsent(ctx, "commits/1", []byte("theirs")); err != nil {
		t.Fatal(err)
	}
	// Our first attempt fails without reaching the server; the retry finds
	// the other writer's object, even with the same bytes.
	p := newFaultProxy(t, srv.Endpoint, func(r *http.Request, n int) verdict {
		if n == 1 {
			return verdict{status: http.StatusServiceUnavailable, code: "SlowDown"}
		}
		return verdict{}
	})
	st := proxiedStore(t, srv, p, "fence", 3)
	err := st.PutIfAbsent(ctx, "commits/1", []byte("theirs"))
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent = %v, want ErrExists", err)
	}
	if got := p.requests(); len(got) != 3 || !strings.HasPrefix(got[2], "HEAD") {
		t.Fatalf("requests = %q, want PUT 503, PUT 412, HEAD", got)
	}
}

func TestS3ConcurrentPutIfAbsentThroughRetriesHasOneWinner(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	// Every third request is answered 503 after being forwarded or not,
	// alternately: lost responses and plain throttling under a race.
	p := newFaultProxy(t, srv.Endpoint, func(r *http.Request, n int) verdict {
		if r.Method == http.MethodPut && n%3 == 0 {
			return verdict{status: http.StatusServiceUnavailable, code: "SlowDown", forward: n%2 == 0}
		}
		return verdict{}
	})
	const writers = 16
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		st := proxiedStore(t, srv, p, "race", 8)
		wg.Go(func() { errs[i] = st.PutIfAbsent(ctx, "offsets/3", []byte(fmt.Sprintf("w%02d", i))) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, i)
			}
			winner = i
		} else if !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no winner: %v", errs)
	}
	b, err := srv.Store(t, "race", "").Get(ctx, "offsets/3")
	if err != nil || string(b) != fmt.Sprintf("w%02d", winner) {
		t.Fatalf("object = %q, %v; winner was %d", b, err, winner)
	}
}

func TestS3GetRetriesABodyCutShort(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("abcdefgh"), 4096)
	if err := srv.Store(t, "cut", "").Put(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.Endpoint)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host }}
	var gets atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && gets.Add(1) == 1 {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes()[:rec.Body.Len()/2]) // the server then closes the connection
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	opts := srv.Options("cut")
	opts.Endpoint = proxy.URL
	opts.RetryBaseDelay = time.Millisecond
	st, err := objstore.NewS3(ctx, "cut", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "obj")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("Get returned %d bytes, want %d", len(got), len(data))
	}
	if n := gets.Load(); n != 2 {
		t.Fatalf("proxy saw %d GETs, want 2", n)
	}
}

func TestS3RequestRateLimitDelaysRequests(t *testing.T) {
	srv := s3test.Start(t)
	opts := srv.Options("limited")
	opts.RequestsPerSecond = 0.5 // one request, then one every 2 s
	st, err := objstore.NewS3(context.Background(), "limited", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := st.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatalf("first Put (within the burst): %v", err)
	}
	// The next token is 2 s away, beyond the deadline: the limiter refuses
	// at once instead of sending.
	err = st.Put(ctx, "b", []byte("2"))
	if err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("second Put = %v, want a rate limit error", err)
	}
	if _, err := srv.Store(t, "limited", "").Get(context.Background(), "b"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("the refused Put reached the server: %v", err)
	}
}

func TestS3ListFollowsPagesAndStripsPrefix(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	srv.CreateBucket(t, "paged")
	p := newFaultProxy(t, srv.Endpoint, func(*http.Request, int) verdict { return verdict{} })
	opts := srv.Options("paged")
	opts.Endpoint = p.URL
	st, err := objstore.NewS3(ctx, "paged", "q/", opts)
	if err != nil {
		t.Fatal(err)
	}
	objstore.SetListPageSize(st, 7)
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("offsets/%03d", 24-i) // written out of order
		if err := st.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		want = append([]string{k}, want...)
	}
	if err := st.Put(ctx, "commits/000", nil); err != nil {
		t.Fatal(err)
	}
	before := len(p.requests())
	got, err := st.List(ctx, "offsets/")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List = %q\nwant %q", got, want)
	}
	if pages := len(p.requests()) - before; pages != 4 {
		t.Fatalf("List took %d requests, want 4 pages of at most 7 keys", pages)
	}
}

func TestS3BackoffGrowsWithJitterAndIsCapped(t *testing.T) {
	base, maxDelay := 100*time.Millisecond, 2*time.Second
	for attempt := 1; attempt <= 70; attempt++ {
		d := base << (attempt - 1)
		if attempt > 20 || d > maxDelay {
			d = maxDelay
		}
		for range 50 {
			got := objstore.JitteredBackoff(base, maxDelay, attempt)
			if got < d/2 || got > d {
				t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

// A streamed read whose body is cut short resumes where it broke (a
// ranged GET of the same version) rather than from the start; if the
// object was replaced meanwhile the read fails instead of mixing versions.
func TestS3GetStreamResumesWhereABodyWasCutShort(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("abcdefgh"), 64<<10) // 512 KiB
	direct := srv.Store(t, "resume", "")
	for _, k := range []string{"obj", "replaced"} {
		if err := direct.Put(ctx, k, data); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(srv.Endpoint)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host }}
	var mu sync.Mutex
	var ranges []string
	gets := map[string]int{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Query().Has("list-type") {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		gets[r.URL.Path]++
		n := gets[r.URL.Path]
		ranges = append(ranges, r.URL.Path+" "+r.Header.Get("Range"))
		mu.Unlock()
		if n == 2 && strings.HasSuffix(r.URL.Path, "/replaced") {
			if err := direct.Put(ctx, "replaced", []byte("a new version")); err != nil {
				t.Error(err)
			}
		}
		if n == 1 {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes()[:100_000]) // then the connection closes
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	opts := srv.Options("resume")
	opts.Endpoint = proxy.URL
	opts.RetryBaseDelay = time.Millisecond
	st, err := objstore.NewS3(ctx, "resume", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	read := func(key string) ([]byte, error) {
		rc, err := st.GetStream(ctx, key)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	got, err := read("obj")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(data))
	}
	mu.Lock()
	want := []string{"/resume/obj ", "/resume/obj bytes=100000-"}
	if !slices.Equal(ranges, want) {
		t.Errorf("GETs = %q, want %q", ranges, want)
	}
	mu.Unlock()
	got, err = read("replaced")
	if err == nil {
		t.Fatalf("a read across a replacement returned %d bytes and no error", len(got))
	}
	t.Logf("replaced meanwhile: %v", err)
}
