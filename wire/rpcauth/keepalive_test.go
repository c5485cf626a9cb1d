package rpcauth

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// silencer forwards TCP connections to a backend until silence is called:
// from then on the connections it holds stop forwarding in either
// direction but stay open (a peer gone without a RST), while new
// connections are forwarded as before.
type silencer struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	gen     int
	conns   []net.Conn
}

func newSilencer(t *testing.T, backend string) *silencer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln, backend: backend}
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	go s.accept()
	return s
}

func (s *silencer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", s.backend)
		if err != nil {
			c.Close()
			continue
		}
		s.mu.Lock()
		gen := s.gen
		s.conns = append(s.conns, c, b)
		s.mu.Unlock()
		go s.pipe(c, b, gen)
		go s.pipe(b, c, gen)
	}
}

// pipe copies from src to dst while the silencer is at generation gen;
// after that it reads and drops (the sender sees its writes accepted).
func (s *silencer) pipe(src, dst net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		s.mu.Lock()
		live := s.gen == gen
		s.mu.Unlock()
		if live {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		} else {
			_, _ = io.Discard.Write(buf[:n])
		}
	}
}

func (s *silencer) silence() {
	s.mu.Lock()
	s.gen++
	s.mu.Unlock()
}

// A client built with DialOptions finds a connection whose peer went
// silent (still open, nothing comes back) dead by keepalive pings and
// redials, so calls succeed again within KeepaliveTime + KeepaliveTimeout
// instead of timing out until TCP gives up. This is an executor whose
// Register kept timing out on a connection that looked ready.
func TestDialOptionsRedialAConnectionThatWentSilent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits out gRPC keepalive timeouts against a server on loopback")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions("", nil, nil)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	proxy := newSilencer(t, lis.Addr().String())

	conn, err := grpc.NewClient(proxy.ln.Addr().String(), DialOptions("", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	check := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(5 * time.Second); err != nil {
		t.Fatalf("before the silence: %v", err)
	}
	proxy.silence()
	if err := check(time.Second); err == nil {
		t.Fatal("a call on the silenced connection succeeded: the proxy does not silence")
	}
	start := time.Now()
	limit := KeepaliveTime + KeepaliveTimeout + 10*time.Second
	for {
		err := check(time.Second)
		if err == nil {
			t.Logf("calls succeed again %v after the silence (keepalive %v + %v)", time.Since(start).Round(100*time.Millisecond), KeepaliveTime, KeepaliveTimeout)
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("calls still fail %v after the peer went silent (last: %v): the connection was never found dead", limit, err)
		}
	}
}
