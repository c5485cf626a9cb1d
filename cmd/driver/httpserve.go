package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/web"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// httpConfig is the driver's HTTP port: address and metrics options.
type httpConfig struct {
	Addr string
	// HealthAddr, if set, serves /healthz and /readyz alone in plaintext
	// (web.NewHealth), for probes without a client certificate.
	HealthAddr string
	// PartitionLag adds one lag series per source partition.
	PartitionLag bool
	// TLS, if it holds a certificate, serves HTTPS (a client certificate
	// is required when it has a CA).
	TLS *tlsconf.Source
	// Health tunes the query health verdict (and the watermark stall the
	// page and metrics use).
	Health monitor.HealthOptions
	// Auth, if set with role credentials, requires a viewer or operator
	// credential for everything but /healthz and /readyz.
	Auth *rpcauth.Authenticator
	// OnListen, if set, is told the address the HTTP port bound (port 0
	// picks a free one) before it serves.
	OnListen func(addr string)
}

// healthAddrUsage is --health-addr's help, the driver's and the
// executor's.
const healthAddrUsage = "serve only /healthz and /readyz on this address, in plaintext even with TLS on (no metrics, no page, no query data): for probes that cannot present a client certificate, such as the kubelet's under mutual TLS (e.g. 0.0.0.0:8082)"

// addHTTPFlags registers --http-addr, its deprecated alias --metrics-addr,
// --health-addr and --metrics-partition-lag.
func addHTTPFlags(f *pflag.FlagSet, c *httpConfig, def string) {
	f.StringVar(&c.Addr, "http-addr", def, "serve HTTP on this address: /metrics (Prometheus), /healthz, /readyz and the status page at / (e.g. 127.0.0.1:8080)")
	f.StringVar(&c.Addr, "metrics-addr", def, "deprecated alias of --http-addr")
	_ = f.MarkDeprecated("metrics-addr", "use --http-addr (it serves the same /metrics, and the status page)")
	f.StringVar(&c.HealthAddr, "health-addr", "", healthAddrUsage)
	f.BoolVar(&c.PartitionLag, "metrics-partition-lag", false, "export sluice_source_partition_lag_offsets, one series per source partition")
	f.DurationVar(&c.Health.Stall, "health-stall", 5*time.Minute, "a watermark, or commits, unchanged this long count as stalled: idle when nothing waits, an incident when lag grows; also the longest a batch may stay in flight; e.g. 5m or 90s")
	f.IntVar(&c.Health.SlowBatches, "health-slow-batches", 3, "this many batches in a row slower than the processingTime trigger, or each with more lag than the one before, are an incident")
}

// serveHTTP serves the driver's HTTP port on addr: /metrics, /healthz,
// /readyz (ready's answer) and the status page, all read from tr. It
// returns when the port listens; stop (or the end of ctx) shuts it down.
func serveHTTP(ctx context.Context, addr string, tr *monitor.Tracker, ready func() error, log *slog.Logger) (stop func(), err error) {
	return serveHTTPWith(ctx, httpConfig{Addr: addr}, tr, ready, log)
}

// serveHTTPWith serves c.Addr (when set) and the health port c.HealthAddr
// (when set).
func serveHTTPWith(ctx context.Context, c httpConfig, tr *monitor.Tracker, ready func() error, log *slog.Logger) (stop func(), err error) {
	stopHealth := func() {}
	if c.HealthAddr != "" {
		if stopHealth, err = web.ServeHealth(ctx, c.HealthAddr, "driver", ready, log); err != nil {
			return nil, err
		}
	}
	if c.Addr == "" {
		return stopHealth, nil
	}
	stopHTTP, err := serveMainHTTP(ctx, c, tr, ready, log)
	if err != nil {
		stopHealth()
		return nil, err
	}
	return func() { stopHTTP(); stopHealth() }, nil
}

func serveMainHTTP(ctx context.Context, c httpConfig, tr *monitor.Tracker, ready func() error, log *slog.Logger) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewBuildInfo(),
		metrics.NewTrackerCollector(tr, metrics.TrackerOptions{PartitionLag: c.PartitionLag, Stall: c.Health.Stall}),
	)
	m := metrics.New(reg)
	ln, err := web.Listen(c.Addr, c.TLS)
	if err != nil {
		return nil, err
	}
	unlisten := tr.Listen(m.Observe)
	h := web.New(web.Options{Role: "driver", Stall: c.Health.Stall, Tracker: tr, Ready: ready, Gatherer: reg, Logger: log})
	log.Info("serving HTTP: /metrics, /healthz, /readyz and the status page", "address", ln.Addr().String())
	if c.OnListen != nil {
		c.OnListen(ln.Addr().String())
	}
	var handler http.Handler = h
	if c.Auth != nil {
		handler = c.Auth.HTTPHandler(h)
	}
	stopServe := web.Serve(ctx, ln, handler, log)
	return func() { stopServe(); unlisten() }, nil
}

// countStores wraps every store a query opens so that its requests are
// counted in tr (sluice_objstore_requests_total and _errors_total).
func countStores(tr *monitor.Tracker) func(role string, s objstore.Store) objstore.Store {
	return func(role string, s objstore.Store) objstore.Store {
		c := objstore.NewCounting(s)
		tr.CountStore(role, c)
		return c
	}
}

// trackExecutors keeps tr's count of registered executors current until
// ctx ends.
func trackExecutors(ctx context.Context, tr *monitor.Tracker, drv *dispatch.Driver) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		tr.SetExecutors(len(drv.Members.Live()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
