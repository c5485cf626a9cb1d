package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
)

// backend counts the requests that reach it and remembers their Host.
type backend struct {
	*httptest.Server
	n     atomic.Int64
	mu    sync.Mutex
	hosts []string
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		b.n.Add(1)
		b.mu.Lock()
		b.hosts = append(b.hosts, r.Host)
		b.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(b.Close)
	return b
}

func newProxy(t *testing.T, target string, cfg faultproxy.Config) *faultproxy.HTTP {
	t.Helper()
	p, err := faultproxy.NewHTTP(target, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client never reuses connections, so a reset affects one request only.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func do(t *testing.T, c *http.Client, method, url string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("body"))
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestHTTPFaultsAboutTheConfiguredFractionAndReplaysFromTheSeed(t *testing.T) {
	b := newBackend(t)
	run := func() []int {
		p := newProxy(t, b.URL, faultproxy.Config{Seed: 7, Fraction: 0.2, Faults: []faultproxy.Fault{faultproxy.InternalError, faultproxy.SlowDown}})
		c := client()
		var codes []int
		for i := 0; i < 500; i++ {
			code, _, err := do(t, c, "GET", p.URL()+"/bucket/k")
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, code)
		}
		st := p.Stats()
		var failed int64
		for _, c := range codes {
			if c != 200 {
				failed++
			}
		}
		if st.Requests != 500 || st.TotalFaulted() != failed {
			t.Fatalf("stats %v disagree with %d failed responses", st, failed)
		}
		if failed < 60 || failed > 140 {
			t.Fatalf("%d of 500 requests faulted, want about 100 (fraction 0.2)", failed)
		}
		return codes
	}
	first, second := run(), run()
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatal("the same seed and request order faulted different requests")
	}
}

func TestHTTPErrorsCarryS3XMLBodies(t *testing.T) {
	b := newBackend(t)
	for _, tc := range []struct {
		fault  faultproxy.Fault
		status int
		code   string
	}{
		{faultproxy.InternalError, 500, "<Code>InternalError</Code>"},
		{faultproxy.ServiceUnavailable, 503, "<Code>ServiceUnavailable</Code>"},
		{faultproxy.SlowDown, 503, "<Code>SlowDown</Code>"},
	} {
		p := newProxy(t, b.URL, faultproxy.Config{Fraction: 1, Faults: []faultproxy.Fault{tc.fault}})
		code, body, err := do(t, client(), "PUT", p.URL()+"/bucket/key")
		if err != nil || code != tc.status || !strings.Contains(body, tc.code) || !strings.Contains(body, "<Resource>/bucket/key</Resource>") {
			t.Errorf("%s: got %d %q %v, want %d with %s", tc.fault, code, body, err, tc.status, tc.code)
		}
	}
	if n := b.n.Load(); n != 0 {
		t.Fatalf("%d faulted requests reached the server", n)
	}
}

func TestHTTPResetNeverReachesTheServerAndLostResponseDoes(t *testing.T) {
	for _, tc := range []struct {
		fault   faultproxy.Fault
		reached int64
	}{{faultproxy.Reset, 0}, {faultproxy.LostResponse, 1}} {
		b := newBackend(t)
		p := newProxy(t, b.URL, faultproxy.Config{Fraction: 1, Faults: []faultproxy.Fault{tc.fault}})
		_, _, err := do(t, client(), "PUT", p.URL()+"/bucket/key")
		if err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Errorf("%s: client error %v, want a connection reset", tc.fault, err)
		}
		if n := b.n.Load(); n != tc.reached {
			t.Errorf("%s: %d requests reached the server, want %d", tc.fault, n, tc.reached)
		}
	}
}

func TestHTTPDelayForwardsLate(t *testing.T) {
	b := newBackend(t)
	p := newProxy(t, b.URL, faultproxy.Config{Fraction: 1, Faults: []faultproxy.Fault{faultproxy.Delay}, MaxDelay: 50 * time.Millisecond})
	code, body, err := do(t, client(), "GET", p.URL()+"/bucket/key")
	if err != nil || code != 200 || body != "ok" || b.n.Load() != 1 {
		t.Fatalf("delayed request: %d %q %v", code, body, err)
	}
}

func TestHTTPFailWritesFailsOnlyThatObjectsWritesAndKeepsTheHost(t *testing.T) {
	b := newBackend(t)
	p := newProxy(t, b.URL, faultproxy.Config{})
	p.FailWrites(faultproxy.Match{Suffix: "/cp/commits/3"}, faultproxy.InternalError)
	c := client()
	if code, _, _ := do(t, c, "PUT", p.URL()+"/bucket/cp/commits/3"); code != 500 {
		t.Errorf("PUT commits/3 = %d, want 500", code)
	}
	if code, _, _ := do(t, c, "PUT", p.URL()+"/bucket/cp/commits/13"); code != 200 {
		t.Errorf("PUT commits/13 = %d, want 200", code)
	}
	if code, _, _ := do(t, c, "GET", p.URL()+"/bucket/cp/commits/3"); code != 200 {
		t.Errorf("GET commits/3 = %d, want 200 (only writes fail)", code)
	}
	if st := p.Stats(); st.RuleFaults != 1 {
		t.Errorf("rule faults = %d, want 1", st.RuleFaults)
	}
	if got, want := fmt.Sprint(p.Requests()), "[PUT /bucket/cp/commits/3 PUT /bucket/cp/commits/13 GET /bucket/cp/commits/3]"; got != want {
		t.Errorf("request log %s, want %s", got, want)
	}
	p.ClearRules()
	if code, _, _ := do(t, c, "PUT", p.URL()+"/bucket/cp/commits/3"); code != 200 {
		t.Errorf("PUT commits/3 after ClearRules = %d, want 200", code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.hosts {
		if h != strings.TrimPrefix(p.URL(), "http://") {
			t.Errorf("server saw Host %q, want the proxy's %q as the client signed it", h, p.URL())
		}
	}
}

func TestHTTPHoldParksARequestUntilReleased(t *testing.T) {
	b := newBackend(t)
	p := newProxy(t, b.URL, faultproxy.Config{})
	h := p.Hold(faultproxy.Match{Method: "PUT", Suffix: "/commits/1"})
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, _, err := do(t, client(), "PUT", p.URL()+"/bucket/commits/1")
		done <- result{code, err}
	}()
	select {
	case <-h.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("held request never arrived")
	}
	if h.Request() != "PUT /bucket/commits/1" {
		t.Errorf("held %q", h.Request())
	}
	if n := b.n.Load(); n != 0 {
		t.Fatalf("a held request reached the server")
	}
	// Other requests pass meanwhile.
	if code, _, _ := do(t, client(), "PUT", p.URL()+"/bucket/commits/2"); code != 200 {
		t.Fatalf("unrelated request = %d", code)
	}
	h.Release("")
	if r := <-done; r.err != nil || r.code != 200 || b.n.Load() != 2 {
		t.Fatalf("released request: %d %v", r.code, r.err)
	}
}

// The real S3 client through 30% of every fault still stores and reads
// everything: its retries absorb them, and a lost response to a
// create-if-absent is recognised as its own write.
func TestS3ClientThroughFaultsStoresEverything(t *testing.T) {
	srv := s3test.Start(t)
	p := newProxy(t, srv.Endpoint, faultproxy.Config{Seed: 3, Fraction: 0.3, MaxDelay: 20 * time.Millisecond})
	opts := srv.Options("faulty")
	opts.Endpoint = p.URL()
	opts.RetryBaseDelay = time.Millisecond
	opts.RetryMaxDelay = 10 * time.Millisecond
	opts.MaxRetries = 20
	ctx := context.Background()
	st, err := objstore.NewS3(ctx, "faulty", "p/", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("k/%02d", i)
		put := st.Put
		if i%2 == 0 {
			put = st.PutIfAbsent
		}
		if err := put(ctx, key, []byte(key)); err != nil {
			t.Fatalf("write %s through faults: %v", key, err)
		}
	}
	keys, err := st.List(ctx, "k/")
	if err != nil || len(keys) != 40 {
		t.Fatalf("List = %d keys, %v", len(keys), err)
	}
	for _, k := range keys {
		b, err := st.Get(ctx, k)
		if err != nil || string(b) != k {
			t.Fatalf("Get %s = %q, %v", k, b, err)
		}
	}
	if err := st.PutIfAbsent(ctx, "k/00", []byte("again")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second create of k/00 = %v, want ErrExists", err)
	}
	st2 := p.Stats()
	if st2.Faulted[faultproxy.LostResponse] == 0 || st2.Faulted[faultproxy.Reset] == 0 || st2.Faulted[faultproxy.SlowDown] == 0 {
		t.Fatalf("the mix did not exercise every fault: %v", st2)
	}
	t.Logf("proxy: %v", st2)
}

func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestTCPPartitionHoldsBytesUntilRestored(t *testing.T) {
	p, err := faultproxy.NewTCP(echoServer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	fmt.Fprintln(c, "one")
	if l, err := r.ReadString('\n'); err != nil || l != "one\n" {
		t.Fatalf("echo through the proxy: %q %v", l, err)
	}
	p.Cut(faultproxy.Partition)
	fmt.Fprintln(c, "two")
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var ne net.Error
	if _, err := r.ReadString('\n'); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a byte crossed a partition: %v", err)
	}
	p.Restore()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || l != "two\n" {
		t.Fatalf("after restore: %q %v, want the held line", l, err)
	}
}

func TestTCPRejectResetsConnectionsUntilRestored(t *testing.T) {
	p, err := faultproxy.NewTCP(echoServer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Cut(faultproxy.Reject)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("an open connection survived Reject")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c2.SetReadDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintln(c2, "x")
		if _, err := c2.Read(make([]byte, 1)); err == nil {
			t.Fatal("a new connection worked during Reject")
		}
		c2.Close()
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	fmt.Fprintln(c3, "back")
	c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	if l, err := bufio.NewReader(c3).ReadString('\n'); err != nil || l != "back\n" {
		t.Fatalf("after restore: %q %v", l, err)
	}
}
