package tlsconf

import (
	"crypto/tls"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
)

// Listen listens on addr: TLS with src's server config (mutual with a CA),
// plain TCP when src is nil. It is for HTTP servers; give the server
// HTTPErrorLog so failed handshakes are logged with their cause.
func Listen(addr string, src *Source) (net.Listener, error) {
	var cfg *tls.Config
	if src != nil {
		var err error
		if cfg, err = src.ServerConfig(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return ln, nil
	}
	return tls.NewListener(ln, cfg), nil
}

// HTTPErrorLog returns an http.Server ErrorLog writing to logger at warn
// level: "http: TLS handshake error from ADDR: CAUSE" lines name why a
// connection was refused.
func HTTPErrorLog(logger *slog.Logger) *log.Logger {
	return log.New(logWriter{logger}, "", 0)
}

type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.l.Warn("refused a connection: TLS handshake failed", "server", "http", "detail", msg)
	} else {
		w.l.Warn(fmt.Sprintf("http server: %s", msg))
	}
	return len(p), nil
}
