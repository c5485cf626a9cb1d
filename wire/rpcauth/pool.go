package rpcauth

import (
	"crypto/tls"
	"errors"
	"sync"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Pool keeps one client connection per peer address.
type Pool struct {
	opts   []grpc.DialOption
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewPool returns a pool whose connections present token and speak TLS
// with tlsCfg (nil: plaintext), with extra dial options after those.
func NewPool(token string, tlsCfg *tls.Config, extra ...grpc.DialOption) *Pool {
	return &Pool{opts: append(DialOptions(token, tlsCfg), extra...), conns: map[string]*grpc.ClientConn{}}
}

// peerDialOptions are the extra options of connections to executors: with
// a peer name (tlsconf.Config.PeerName) the TLS handshake verifies that
// name, not the dialed host, in the executor's certificate (gRPC takes the
// server name from the authority). Executors advertised by pod IP need it:
// their certificate cannot name every pod IP.
func PeerDialOptions(src *tlsconf.Source) []grpc.DialOption {
	if name := src.PeerName(); name != "" {
		return []grpc.DialOption{grpc.WithAuthority(name)}
	}
	return nil
}

// Conn returns the connection to addr, creating it (lazily connected).
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("connection pool closed")
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Drop closes the connection to addr, if any.
func (p *Pool) Drop(addr string) {
	p.mu.Lock()
	c := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Close closes every connection. It is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = map[string]*grpc.ClientConn{}, true
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
