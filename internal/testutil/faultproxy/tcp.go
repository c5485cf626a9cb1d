package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
)

// Cut is how TCP.Cut breaks the link.
type Cut int

const (
	// Partition stops every byte in both directions, on open connections
	// and new ones (which are accepted but go nowhere), as a network
	// partition does: nothing is refused, nothing arrives. Bytes read
	// during the cut are held and delivered after Restore, as TCP
	// retransmission would.
	Partition Cut = iota
	// Reject resets every open connection and every new one until Restore.
	Reject
)

// TCP forwards connections to a target address, and can cut them.
type TCP struct {
	target string
	ln     net.Listener
	logger *slog.Logger
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cut    bool
	mode   Cut
	open   chan struct{} // closed while bytes may flow
	conns  map[net.Conn]struct{}
	nconns int64
	// recording makes serve keep a copy of each stream (one direction of
	// one connection) in streams.
	recording bool
	streams   []*stream
}

// stream is the bytes of one direction of one connection.
type stream struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *stream) write(b []byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.b.Write(b)
	s.mu.Unlock()
}

// NewTCP starts a proxy on 127.0.0.1 (a port chosen by the kernel) that
// forwards to target (host:port). Close stops it.
func NewTCP(target string, logger *slog.Logger) (*TCP, error) {
	return NewTCPOn("127.0.0.1:0", target, logger)
}

// NewTCPOn is NewTCP listening on listen (a 127.0.0.1 address).
func NewTCPOn(listen, target string, logger *slog.Logger) (*TCP, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("start tcp proxy to %s: %w", target, err)
	}
	p := &TCP{target: target, ln: ln, logger: logger, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, 127.0.0.1:PORT.
func (p *TCP) Addr() string { return p.ln.Addr().String() }

// Connections returns how many connections the proxy accepted.
func (p *TCP) Connections() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nconns
}

// Record makes the proxy keep a copy of every byte it forwards on
// connections accepted from now on, as a wiretap would see them.
func (p *TCP) Record() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recording = true
}

// Recorded returns the recorded streams: one per direction of each
// connection, in the order they were opened.
func (p *TCP) Recorded() [][]byte {
	p.mu.Lock()
	streams := p.streams
	p.mu.Unlock()
	out := make([][]byte, len(streams))
	for i, s := range streams {
		s.mu.Lock()
		out[i] = bytes.Clone(s.b.Bytes())
		s.mu.Unlock()
	}
	return out
}

// Cut breaks the link until Restore.
func (p *TCP) Cut(mode Cut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut = true
		p.open = make(chan struct{})
	}
	p.mode = mode
	if mode == Reject {
		for c := range p.conns {
			resetConn(c)
		}
	}
	p.logger.Info("tcp proxy cut", "target", p.target, "mode", mode)
}

// Restore lets bytes flow again.
func (p *TCP) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.open)
	}
	p.logger.Info("tcp proxy restored", "target", p.target)
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines; idempotent.
func (p *TCP) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.cut {
		p.cut = false
		close(p.open) // wake held copies; their connections are closed below
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// gate returns nil when bytes may flow, or a channel closed when they may.
func (p *TCP) gate() (<-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.closed
}

func (p *TCP) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCP) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *TCP) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.nconns++
		rejecting := p.cut && p.mode == Reject
		p.mu.Unlock()
		if rejecting {
			resetConn(c)
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *TCP) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	defer client.Close()
	// A partition holds a new connection before it reaches the target.
	if open, closed := p.gate(); closed {
		return
	} else {
		<-open
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.logger.Debug("tcp proxy dial", "target", p.target, "err", err)
		resetConn(client)
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	defer server.Close()
	var up, down *stream
	p.mu.Lock()
	if p.recording {
		up, down = &stream{}, &stream{}
		p.streams = append(p.streams, up, down)
	}
	p.mu.Unlock()
	done := make(chan bool, 2)
	go func() { done <- p.pipe(server, client, up) }()
	go func() { done <- p.pipe(client, server, down) }()
	if clean := <-done; !clean {
		client.Close()
		server.Close()
	}
	<-done
}

// pipe copies src to dst, holding bytes while the link is cut, and a copy
// to rec when recording. It reports whether src ended cleanly (EOF, passed
// on as a half close).
func (p *TCP) pipe(dst, src net.Conn, rec *stream) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			open, closed := p.gate()
			if closed {
				return false
			}
			<-open
			rec.write(buf[:n])
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
				return true
			}
			return false
		}
		if err != nil {
			p.logger.Debug("tcp proxy read", "err", err)
			return false
		}
	}
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
