package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Listen creates the HTTP listener of a driver or an executor: HTTPS with
// src's certificate (mutual TLS when it has a CA), plain HTTP when src is
// nil or holds no certificate. It is the one place that does, for every
// HTTP port at once.
func Listen(addr string, src *tlsconf.Source) (net.Listener, error) {
	if src != nil && !src.HasCertificate() {
		src = nil
	}
	ln, err := tlsconf.Listen(addr, src)
	if err != nil {
		return nil, fmt.Errorf("listen for HTTP on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends or stop is called (stop waits up to
// 5 s for requests in flight, then closes; it is idempotent).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, ErrorLog: tlsconf.HTTPErrorLog(log)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve HTTP", "address", ln.Addr().String(), "err", err)
		}
	}()
	stopped := make(chan struct{})
	var once sync.Once
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
		<-done
	}
	go func() {
		select {
		case <-ctx.Done():
			shutdown()
		case <-stopped:
		}
	}()
	return func() {
		once.Do(func() {
			close(stopped)
			shutdown()
		})
	}
}

// ServeHealth listens on addr in plaintext and serves NewHealth there (role
// "driver" or "executor", ready its readiness) until ctx ends or stop is
// called. It returns when the port listens.
func ServeHealth(ctx context.Context, addr, role string, ready func() error, log *slog.Logger) (stop func(), err error) {
	ln, err := Listen(addr, nil)
	if err != nil {
		return nil, fmt.Errorf("health port: %w", err)
	}
	log.Info("serving the health port: /healthz and /readyz only, plaintext", "address", ln.Addr().String())
	return Serve(ctx, ln, NewHealth(Options{Role: role, Ready: ready, Logger: log}), log), nil
}
