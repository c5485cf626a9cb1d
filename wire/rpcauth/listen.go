package rpcauth

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// checkListen refuses to serve beyond loopback when no peer has to
// authenticate: neither a cluster token nor mutual TLS (a CA). insecure is
// the explicit way out; it is logged at every start.
func CheckListen(addr, token string, src *tlsconf.Source, insecure bool, log *slog.Logger) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	loopback := IsLoopback(addr)
	mutual := src != nil && src.Mutual()
	if insecure {
		log.Warn("--insecure: serving without requiring authentication where none is configured; any process that can reach this address may join the cluster, receive query specs with their secrets and run tasks",
			"listen", addr, "token", token != "", "tls", src != nil, "mutualTLS", mutual)
		return nil
	}
	if loopback || token != "" || mutual {
		if !loopback && src == nil {
			log.Warn("serving beyond loopback without TLS: the cluster token and the secrets in query specs cross the network in clear; add --tls-dir (or --tls-cert, --tls-key, --tls-ca)", "listen", addr)
		}
		return nil
	}
	what := "no TLS and no cluster token"
	if src != nil {
		what = "TLS without a CA (clients are not authenticated) and no cluster token"
	}
	return fmt.Errorf("listen address %s is not loopback and %s is set: any peer could join, receive secrets and run tasks; add --tls-ca (mutual TLS, with --tls-cert/--tls-key or --tls-dir) or --token-file (or %s), listen on 127.0.0.1, or pass --insecure to accept an open cluster", addr, what, TokenEnv)
}

// isLoopback reports whether the host of addr is a loopback address.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// transport returns the server and client TLS configs of src (nil, nil
// when src is nil).
func Transport(src *tlsconf.Source) (server, client *tls.Config, err error) {
	if src == nil {
		return nil, nil, nil
	}
	server, err = src.ServerConfig()
	if err != nil {
		return nil, nil, err
	}
	return server, src.ClientConfig(), nil
}
