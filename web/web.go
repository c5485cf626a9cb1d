package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
)

//go:embed assets
var assets embed.FS

// Options configure the handler.
type Options struct {
	// Role names the process on the page and in /healthz ("driver",
	// "executor").
	Role string
	// Tracker, if set, enables the status page and the JSON API.
	Tracker *monitor.Tracker
	// Ready reports whether the process is ready (nil error) or why not;
	// nil means always ready.
	Ready func() error
	// Gatherer serves /metrics (nil: no /metrics).
	Gatherer prometheus.Gatherer
	// Logger logs each request at debug level (nil: none).
	Logger *slog.Logger
	// Stall is how long a watermark may stay put before the page calls it
	// stalled (default 5m).
	Stall time.Duration
	// Batches is how many recent batches the page lists (default 20); the
	// charts use every progress the Tracker keeps.
	Batches int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrNotReady may wrap a readiness reason; any error means not ready.
var ErrNotReady = errors.New("not ready")

type server struct {
	opts Options
	page *template.Template
}

// New returns the handler.
func New(opts Options) http.Handler {
	if opts.Role == "" {
		opts.Role = "driver"
	}
	if opts.Stall <= 0 {
		opts.Stall = 5 * time.Minute
	}
	if opts.Batches <= 0 {
		opts.Batches = 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{opts: opts, page: template.Must(template.New("index.html").Funcs(funcs).ParseFS(assets, "assets/index.html"))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{opts.Logger}}))
	}
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	if opts.Tracker != nil {
		mux.HandleFunc("GET /{$}", s.index)
		mux.HandleFunc("GET /api/queries", s.apiQueries)
		mux.HandleFunc("GET /api/queries/{name}/progress", s.apiProgress)
	} else {
		mux.HandleFunc("GET /{$}", s.plain)
	}
	return s.logged(mux)
}

// NewHealth returns the handler of a health port: /healthz and /readyz
// only (opts.Ready, opts.Logger; the rest of opts is ignored), nothing
// else answers. It is meant for a plaintext port beside a mutual-TLS HTTP
// port, for probes that cannot present a client certificate (the
// kubelet's): it serves no metrics, no page and no query data, only
// whether the process is alive and ready, and the reason when it is not.
func NewHealth(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	return s.logged(mux)
}

func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// logged sets the security headers and logs the request.
func (s *server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The page and its assets come from this server only: the browser
		// refuses anything else (no CDN, no external font, no beacon).
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		s.opts.Logger.Debug("http request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		next.ServeHTTP(w, r)
	})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

func (s *server) plain(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "sluice %s\n\n/metrics  Prometheus metrics\n/healthz  the process is alive\n/readyz   ready to work (503 and the reason when not)\n", s.opts.Role)
}

// queryJSON is one query in /api/queries.
type queryJSON struct {
	monitor.View
	Watermark monitor.WatermarkStatus `json:"watermark"`
	Verdict   string                  `json:"verdictText"`
}

func (s *server) apiQueries(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Now()
	var out []queryJSON
	for _, v := range s.opts.Tracker.List() {
		ws := monitor.ClassifyWatermark(s.opts.Tracker.Progress(v.Name, 0), now, s.opts.Stall)
		out = append(out, queryJSON{View: v, Watermark: ws, Verdict: ws.Verdict.Describe()})
	}
	n, known := s.opts.Tracker.Executors()
	body := map[string]any{"queries": out}
	if known {
		body["executors"] = n
	}
	writeJSON(w, body)
}

func (s *server) apiProgress(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.opts.Tracker.Get(name); !ok {
		http.Error(w, fmt.Sprintf("no query named %q", name), http.StatusNotFound)
		return
	}
	n := 0
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("n=%q: want a count of batches, 0 or more", v), http.StatusBadRequest)
			return
		}
	}
	ps := s.opts.Tracker.Progress(name, n)
	if ps == nil {
		ps = []*progress.Report{}
	}
	writeJSON(w, ps)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	data := s.pageData()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.page.Execute(w, data); err != nil {
		s.opts.Logger.Warn("render status page", "err", err)
	}
}

// slogPrinter adapts a logger to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("serve metrics", "err", fmt.Sprint(v...)) }
