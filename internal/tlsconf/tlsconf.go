package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// File names inside Config.Dir, as cert-manager writes a Secret.
const (
	DirCert = "tls.crt"
	DirKey  = "tls.key"
	DirCA   = "ca.crt"
)

// ErrNotConfigured is returned by Load when no TLS flag is set.
var ErrNotConfigured = errors.New("tls: not configured")

// Config is what the TLS flags say. The zero value means no TLS.
type Config struct {
	// CertFile and KeyFile are this process's certificate chain and
	// private key (PEM). A server needs both; a client presents them.
	CertFile, KeyFile string
	// CAFile holds the CA certificates (PEM) peers' certificates must
	// chain to. When set, TLS is mutual.
	CAFile string
	// Dir holds tls.crt, tls.key and, when present, ca.crt; it is an
	// alternative to the three file flags.
	Dir string
	// Insecure accepts listening beyond loopback with neither TLS nor a
	// token (the process warns at every start).
	Insecure bool
	// PeerName is the DNS name verified in an executor's certificate when
	// the driver or another executor dials it at its advertised address
	// ("" verifies that address's host). Executors advertised by pod IP
	// (the Helm chart) share one name their certificates carry, e.g. the
	// executors' Service name.
	PeerName string
}

// Register adds the TLS flags and --insecure to fs (commands that listen
// for peers).
func (c *Config) Register(fs *pflag.FlagSet) {
	c.RegisterCerts(fs)
	fs.StringVar(&c.PeerName, "tls-peer-name", "", "DNS name every executor's certificate carries, verified when dialing an executor at its advertised address instead of that address's host (for executors advertised by pod IP)")
	fs.BoolVar(&c.Insecure, "insecure", false, "allow listening beyond loopback with neither a cluster token nor mutual TLS (an open cluster; logs a warning)")
}

// RegisterCerts adds the certificate flags only (clients, and commands
// whose only port is HTTP).
func (c *Config) RegisterCerts(fs *pflag.FlagSet) {
	fs.StringVar(&c.CertFile, "tls-cert", "", "certificate chain (PEM) this process presents; needs --tls-key")
	fs.StringVar(&c.KeyFile, "tls-key", "", "private key (PEM) of --tls-cert")
	fs.StringVar(&c.CAFile, "tls-ca", "", "CA certificates (PEM) peers must chain to; with it TLS is mutual (every client presents a certificate)")
	fs.StringVar(&c.Dir, "tls-dir", "", "directory holding "+DirCert+", "+DirKey+" and "+DirCA+" (a cert-manager Secret); instead of --tls-cert/--tls-key/--tls-ca")
}

// Enabled reports whether any certificate flag is set.
func (c Config) Enabled() bool {
	return c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" || c.Dir != ""
}

// files resolves the three paths.
func (c Config) files() (cert, key, ca string, err error) {
	if c.Dir != "" {
		if c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" {
			return "", "", "", errors.New("--tls-dir: give either --tls-dir or --tls-cert/--tls-key/--tls-ca, not both")
		}
		cert, key, ca = filepath.Join(c.Dir, DirCert), filepath.Join(c.Dir, DirKey), filepath.Join(c.Dir, DirCA)
		if _, err := os.Stat(ca); errors.Is(err, os.ErrNotExist) {
			ca = ""
		}
		return cert, key, ca, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return "", "", "", errors.New("--tls-cert and --tls-key: give both or neither")
	}
	return c.CertFile, c.KeyFile, c.CAFile, nil
}

// Source serves the current certificate and CA pool, re-reading the files
// when they change.
type Source struct {
	certFile, keyFile, caFile string
	peerName                  string

	mu      sync.Mutex
	certKey fileStamp
	caKey   fileStamp
	cert    *tls.Certificate
	pool    *x509.CertPool
	// now is the clock (tests).
	now func() time.Time
}

// fileStamp identifies a version of a set of files.
type fileStamp string

func stamp(files ...string) (fileStamp, error) {
	var s string
	for _, f := range files {
		if f == "" {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
	}
	return fileStamp(s), nil
}

// Open is Load for commands: nil (plaintext) when no certificate flag is
// set.
func Open(c Config) (*Source, error) {
	s, err := Load(c)
	if errors.Is(err, ErrNotConfigured) {
		return nil, nil
	}
	return s, err
}

// Load reads the files c names and checks them. It returns
// ErrNotConfigured when c sets no certificate flag.
func Load(c Config) (*Source, error) {
	if !c.Enabled() {
		if c.PeerName != "" {
			return nil, errors.New("--tls-peer-name: it names the certificate executors present, so it needs TLS: add --tls-dir (or --tls-cert and --tls-key)")
		}
		return nil, ErrNotConfigured
	}
	if strings.ContainsAny(c.PeerName, ":/ ") {
		return nil, fmt.Errorf("--tls-peer-name %q: a DNS name only (no port, scheme or path)", c.PeerName)
	}
	cert, key, ca, err := c.files()
	if err != nil {
		return nil, err
	}
	s := &Source{certFile: cert, keyFile: key, caFile: ca, peerName: c.PeerName, now: time.Now}
	if cert != "" {
		if _, err := s.Certificate(); err != nil {
			return nil, err
		}
	}
	if ca != "" {
		if _, err := s.Pool(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// PeerName returns Config.PeerName: the name verified in executors'
// certificates ("" for the dialed host). A nil Source gives "".
func (s *Source) PeerName() string {
	if s == nil {
		return ""
	}
	return s.peerName
}

// Mutual reports whether a CA is configured (mutual TLS).
func (s *Source) Mutual() bool { return s.caFile != "" }

// HasCertificate reports whether this process has a certificate to serve
// or present.
func (s *Source) HasCertificate() bool { return s.certFile != "" }

// Certificate returns the current certificate, re-reading the files when
// they changed. A rotation caught half-written (the key does not match the
// certificate) keeps the previous certificate until both are consistent.
func (s *Source) Certificate() (*tls.Certificate, error) {
	if s.certFile == "" {
		return nil, errors.New("tls: no certificate configured (--tls-cert/--tls-key or --tls-dir)")
	}
	st, err := stamp(s.certFile, s.keyFile)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && st == s.certKey && s.cert != nil {
		return s.cert, nil
	}
	c, lerr := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil || lerr != nil {
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("tls: load certificate %s and key %s: %w", s.certFile, s.keyFile, errors.Join(err, lerr))
	}
	s.cert, s.certKey = &c, st
	return s.cert, nil
}

// Pool returns the current CA pool ("nil" when no CA is configured),
// re-reading the file when it changed.
func (s *Source) Pool() (*x509.CertPool, error) {
	if s.caFile == "" {
		return nil, nil
	}
	st, err := stamp(s.caFile)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && st == s.caKey && s.pool != nil {
		return s.pool, nil
	}
	var pool *x509.CertPool
	b, rerr := os.ReadFile(s.caFile)
	if rerr == nil {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			rerr = fmt.Errorf("no PEM certificate in it")
		}
	}
	if err != nil || rerr != nil {
		if s.pool != nil {
			return s.pool, nil
		}
		return nil, fmt.Errorf("tls: load CA %s: %w", s.caFile, errors.Join(err, rerr))
	}
	s.pool, s.caKey = pool, st
	return s.pool, nil
}

// ServerConfig returns the config of a server: the current certificate on
// every handshake and, with a CA, a required client certificate verified
// against the current CA pool.
func (s *Source) ServerConfig() (*tls.Config, error) {
	if !s.HasCertificate() {
		return nil, errors.New("tls: a server needs a certificate: set --tls-cert and --tls-key, or --tls-dir")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, err := s.Certificate()
			if err != nil {
				return nil, err
			}
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}}
			if s.Mutual() {
				pool, err := s.Pool()
				if err != nil {
					return nil, err
				}
				cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pool
			}
			return cfg, nil
		},
	}, nil
}

// ClientConfig returns the config of a client: it verifies the server
// against the current CA pool (the system roots without a CA) and
// presents the current certificate when one is configured. A nil Source
// gives nil (plaintext).
func (s *Source) ClientConfig() *tls.Config {
	if s == nil {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.HasCertificate() {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return s.Certificate() }
	}
	if s.Mutual() {
		// The CA pool may rotate: verify by hand against the current one
		// (with the host name check the standard verification does).
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			pool, err := s.Pool()
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool(), CurrentTime: s.now()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("tls: verify the server's certificate: %w", err)
			}
			return nil
		}
	}
	return cfg
}
