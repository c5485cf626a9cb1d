package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tlstest"
)

// handshake connects a client using clientCfg to a server using serverCfg
// and returns the server's and the client's handshake errors and the
// certificate the client saw.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (serverErr, clientErr error, serial string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, serverCfg)
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3: the client's certificate is checked after the
			// client's handshake returns; read to see the result.
			_, err = tc.Write([]byte("x"))
		}
		done <- err
	}()
	cfg := clientCfg.Clone()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", lis.Addr().String(), cfg)
	if err == nil {
		serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
		buf := make([]byte, 1)
		_, err = c.Read(buf)
		c.Close()
	}
	return <-done, err, serial
}

func load(t *testing.T, c Config) *Source {
	t.Helper()
	s, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMutualTLSAndRefusals(t *testing.T) {
	ca, other := tlstest.NewCA(t, "sluice-ca"), tlstest.NewCA(t, "other-ca")
	dir := t.TempDir()
	tlstest.WriteDir(t, filepath.Join(dir, "server"), ca.Issue(t, "server", time.Time{}, time.Time{}), ca)
	tlstest.WriteDir(t, filepath.Join(dir, "client"), ca.Issue(t, "client", time.Time{}, time.Time{}), ca)
	tlstest.WriteDir(t, filepath.Join(dir, "foreign"), other.Issue(t, "foreign", time.Time{}, time.Time{}), ca)
	tlstest.WriteDir(t, filepath.Join(dir, "expired"), ca.Issue(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)), ca)
	srv, err := load(t, Config{Dir: filepath.Join(dir, "server")}).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if sErr, cErr, _ := handshake(t, srv, load(t, Config{Dir: filepath.Join(dir, "client")}).ClientConfig()); sErr != nil || cErr != nil {
		t.Fatalf("mutual TLS with certificates of the CA: server %v, client %v", sErr, cErr)
	}
	noCert := load(t, Config{CAFile: filepath.Join(dir, "client", DirCA)})
	for _, tc := range []struct {
		name   string
		client *tls.Config
		want   string
	}{
		{"certificate of another CA", load(t, Config{Dir: filepath.Join(dir, "foreign")}).ClientConfig(), "unknown authority"},
		{"expired certificate", load(t, Config{Dir: filepath.Join(dir, "expired")}).ClientConfig(), "expired"},
		{"no client certificate", noCert.ClientConfig(), "didn't provide a certificate"},
	} {
		sErr, _, _ := handshake(t, srv, tc.client)
		if sErr == nil || !strings.Contains(sErr.Error(), tc.want) {
			t.Errorf("%s: server handshake error %v, want one containing %q", tc.name, sErr, tc.want)
		}
	}
	// A client trusting another CA refuses the server.
	tlstest.WriteDir(t, filepath.Join(dir, "distrust"), other.Issue(t, "c", time.Time{}, time.Time{}), other)
	if _, cErr, _ := handshake(t, srv, load(t, Config{Dir: filepath.Join(dir, "distrust")}).ClientConfig()); cErr == nil || !strings.Contains(cErr.Error(), "unknown authority") {
		t.Errorf("client trusting another CA: client error %v, want unknown authority", cErr)
	}
}

func TestRotationWithoutRestart(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	dir := t.TempDir()
	first := ca.Issue(t, "server", time.Time{}, time.Time{})
	tlstest.WriteDir(t, dir, first, ca)
	srv, err := load(t, Config{Dir: dir}).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := load(t, Config{Dir: dir}).ClientConfig()
	_, cErr, serial := handshake(t, srv, client)
	if cErr != nil || serial != first.Cert.SerialNumber.String() {
		t.Fatalf("first handshake: %v, serial %s want %s", cErr, serial, first.Cert.SerialNumber)
	}
	// Rotate to a new CA too: both sides re-read ca.crt.
	ca2 := tlstest.NewCA(t, "ca2")
	second := ca2.Issue(t, "server", time.Time{}, time.Time{})
	tlstest.WriteDir(t, dir, second, ca2)
	_, cErr, serial = handshake(t, srv, client)
	if cErr != nil || serial != second.Cert.SerialNumber.String() {
		t.Fatalf("after rotation: %v, serial %s want %s", cErr, serial, second.Cert.SerialNumber)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := Load(Config{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("no flags: %v, want ErrNotConfigured", err)
	}
	if _, err := Load(Config{CertFile: "a"}); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("cert without key: %v", err)
	}
	if _, err := Load(Config{Dir: "d", CAFile: "c"}); err == nil || !strings.Contains(err.Error(), "--tls-dir") {
		t.Errorf("dir and file: %v", err)
	}
	if _, err := Load(Config{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("empty dir: %v", err)
	}
	s := load(t, Config{CAFile: writeCA(t)})
	if _, err := s.ServerConfig(); err == nil {
		t.Error("a server without a certificate was accepted")
	}
}

func writeCA(t *testing.T) string {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	tlstest.WriteDir(t, dir, ca.Issue(t, "x", time.Time{}, time.Time{}), ca)
	return filepath.Join(dir, DirCA)
}
