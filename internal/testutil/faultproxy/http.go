package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Fault is what the proxy does to one request instead of forwarding it.
type Fault string

// Faults.
const (
	// InternalError answers 500 InternalError without forwarding.
	InternalError Fault = "500"
	// ServiceUnavailable answers 503 ServiceUnavailable without forwarding.
	ServiceUnavailable Fault = "503"
	// SlowDown answers 503 SlowDown (S3's throttling) without forwarding.
	SlowDown Fault = "slowdown"
	// Reset reads the request and resets the connection (TCP RST) without
	// forwarding: the request never reached the server.
	Reset Fault = "reset"
	// LostResponse forwards the request, then resets the connection
	// instead of answering: the request took effect, the client does not
	// know it.
	LostResponse Fault = "lost-response"
	// Delay forwards the request after a random delay up to MaxDelay.
	Delay Fault = "delay"
)

// AllFaults lists every fault, the default mix of Config.Faults.
var AllFaults = []Fault{InternalError, ServiceUnavailable, SlowDown, Reset, LostResponse, Delay}

// Config is the random part of an HTTP proxy's behaviour.
type Config struct {
	// Seed seeds the choice of faulted requests and of their fault. The
	// choice is a function of the seed and the order requests arrive in.
	Seed uint64
	// Fraction of requests faulted, in [0, 1].
	Fraction float64
	// Faults to choose from, uniformly; empty means AllFaults.
	Faults []Fault
	// MaxDelay bounds Delay (default 200ms).
	MaxDelay time.Duration
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if !(c.Fraction >= 0 && c.Fraction <= 1) {
		errs = append(errs, fmt.Errorf("faultproxy fraction %v: must be in [0, 1]", c.Fraction))
	}
	for _, f := range c.Faults {
		if !known(f) {
			errs = append(errs, fmt.Errorf("faultproxy fault %q: must be one of %v", f, AllFaults))
		}
	}
	if c.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("faultproxy maxDelay %v: must be >= 0", c.MaxDelay))
	}
	return errors.Join(errs...)
}

func known(f Fault) bool {
	for _, k := range AllFaults {
		if k == f {
			return true
		}
	}
	return false
}

// Stats counts what the proxy did.
type Stats struct {
	Requests int64
	// Faulted counts randomly faulted requests by fault.
	Faulted map[Fault]int64
	// RuleFaults counts requests faulted by a FailWrites rule.
	RuleFaults int64
}

// TotalFaulted is the number of randomly faulted requests.
func (s Stats) TotalFaulted() int64 {
	var n int64
	for _, v := range s.Faulted {
		n += v
	}
	return n
}

func (s Stats) String() string {
	var parts []string
	for _, f := range AllFaults {
		if n := s.Faulted[f]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f, n))
		}
	}
	return fmt.Sprintf("requests=%d faulted=%d [%s] ruleFaults=%d", s.Requests, s.TotalFaulted(), strings.Join(parts, " "), s.RuleFaults)
}

// Match selects requests: by method ("" for any), and by the URL path
// ending with Suffix and containing Contains (each "" for any). With
// path-style S3 the path is /bucket/key.
type Match struct {
	Method, Suffix, Contains string
}

func (m Match) matches(r *http.Request) bool {
	return (m.Method == "" || m.Method == r.Method) && strings.HasSuffix(r.URL.Path, m.Suffix) && strings.Contains(r.URL.Path, m.Contains)
}

type rule struct {
	match Match
	fault Fault
}

// Hold is a request parked by HTTP.Hold.
type Hold struct {
	match   Match
	arrived chan struct{}
	release chan Fault
	req     string
}

// Arrived is closed when the matching request arrives (and is parked).
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Request returns "METHOD path" of the parked request, once it arrived.
func (h *Hold) Request() string { return h.req }

// Release lets the parked request go: forwarded when f is "", else given
// fault f. It must be called at most once; Close releases every hold with
// Reset.
func (h *Hold) Release(f Fault) { h.release <- f }

// HTTP is a fault-injecting reverse proxy in front of one HTTP server.
type HTTP struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener
	logger *slog.Logger
	closed chan struct{}

	mu    sync.Mutex
	cfg   Config
	rng   *rand.Rand
	rules []rule
	holds []*Hold
	stats Stats
	log   []string
}

// maxLog bounds the request log.
const maxLog = 100_000

// NewHTTP starts a proxy on 127.0.0.1 (a port chosen by the kernel) in
// front of target (http://host:port). Close stops it.
func NewHTTP(target string, cfg Config, logger *slog.Logger) (*HTTP, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("start fault proxy: target %q: must be an http:// URL with a host", target)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &HTTP{target: u, logger: logger, closed: make(chan struct{})}
	if err := p.Set(cfg); err != nil {
		return nil, fmt.Errorf("start fault proxy: %w", err)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // SigV4 signs the Host header the client sent
		},
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	p.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start fault proxy: %w", err)
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	go p.srv.Serve(p.ln)
	return p, nil
}

// URL returns the proxy's base URL, http://127.0.0.1:PORT.
func (p *HTTP) URL() string { return "http://" + p.ln.Addr().String() }

// Set replaces the random configuration and reseeds.
func (p *HTTP) Set(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = AllFaults
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 200 * time.Millisecond
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	p.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d))
	return nil
}

// FailWrites gives fault f to every write (PUT, POST, DELETE) that m
// matches, e.g. Match{Suffix: "/checkpoints/tile/commits/3"}, until
// ClearRules.
func (p *HTTP) FailWrites(m Match, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, rule{match: m, fault: f})
}

// ClearRules removes every FailWrites rule.
func (p *HTTP) ClearRules() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Hold parks the next request m matches until Release. Rules and random
// faults do not apply to it.
func (p *HTTP) Hold(m Match) *Hold {
	h := &Hold{match: m, arrived: make(chan struct{}), release: make(chan Fault, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = append(p.holds, h)
	return h
}

// Stats returns the counts so far.
func (p *HTTP) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Faulted = make(map[Fault]int64, len(p.stats.Faulted))
	for k, v := range p.stats.Faulted {
		s.Faulted[k] = v
	}
	return s
}

// Requests returns "METHOD path" of every request so far (the first
// 100,000), in arrival order.
func (p *HTTP) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// Close stops the proxy, resetting parked requests; idempotent.
func (p *HTTP) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	return p.srv.Close()
}

func isWrite(method string) bool {
	return method == http.MethodPut || method == http.MethodPost || method == http.MethodDelete
}

// decide picks what happens to r: a hold, a rule's fault, a random fault,
// or nothing.
func (p *HTTP) decide(r *http.Request) (*Hold, Fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	if len(p.log) < maxLog {
		p.log = append(p.log, r.Method+" "+r.URL.Path)
	}
	for i, h := range p.holds {
		if h.match.matches(r) {
			p.holds = append(p.holds[:i:i], p.holds[i+1:]...)
			h.req = r.Method + " " + r.URL.Path
			return h, "", 0
		}
	}
	if isWrite(r.Method) {
		for _, ru := range p.rules {
			if ru.match.matches(r) {
				p.stats.RuleFaults++
				return nil, ru.fault, p.delay()
			}
		}
	}
	if p.cfg.Fraction == 0 || p.rng.Float64() >= p.cfg.Fraction {
		return nil, "", 0
	}
	f := p.cfg.Faults[p.rng.IntN(len(p.cfg.Faults))]
	if p.stats.Faulted == nil {
		p.stats.Faulted = map[Fault]int64{}
	}
	p.stats.Faulted[f]++
	return nil, f, p.delay()
}

func (p *HTTP) delay() time.Duration {
	return time.Duration(1 + p.rng.Int64N(int64(p.cfg.MaxDelay)))
}

func (p *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hold, f, d := p.decide(r)
	if hold != nil {
		close(hold.arrived)
		select {
		case f = <-hold.release:
		case <-p.closed:
			f = Reset
		case <-r.Context().Done():
			return
		}
	}
	if f != "" {
		p.logger.Debug("fault", "fault", f, "method", r.Method, "path", r.URL.Path)
	}
	switch f {
	case "":
		p.rp.ServeHTTP(w, r)
	case Delay:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		p.rp.ServeHTTP(w, r)
	case InternalError:
		writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case ServiceUnavailable:
		writeError(w, r, http.StatusServiceUnavailable, "ServiceUnavailable", "Service is unable to handle request.")
	case SlowDown:
		writeError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case Reset:
		_, _ = io.Copy(io.Discard, r.Body)
		reset(w)
	case LostResponse:
		p.rp.ServeHTTP(&discard{h: http.Header{}}, r.WithContext(context.WithoutCancel(r.Context())))
		reset(w)
	}
}

// writeError answers like S3 does, after reading the request body (so the
// client is not cut off mid-upload).
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "faultproxy")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>faultproxy</RequestId></Error>`,
		code, msg, r.URL.Path)
}

// reset closes the client's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discard is a ResponseWriter that drops the response.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
