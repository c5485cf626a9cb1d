package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Clients is a process's cache of Kafka clients, keyed by the connection
// settings (bootstrap servers, security protocol, SASL and TLS settings,
// client.id). Sources built with the same Clients and the same settings
// share one client, so a process keeps one set of broker connections per
// Kafka cluster whatever the number of queries reading it, across their
// batches; a client is closed when the last source using it is closed
// (its query ended). Fetch settings (sizes, isolation, wait) are per
// request and do not split the cache.
//
// The zero value is not usable; call NewClients. It is safe for
// concurrent use. A client's franz-go log lines go to the logger of the
// source that created it.
type Clients struct {
	mu sync.Mutex
	m  map[string]*sharedClient
}

type sharedClient struct {
	cl   *kgo.Client
	refs int
}

// NewClients returns an empty cache.
func NewClients() *Clients { return &Clients{m: map[string]*sharedClient{}} }

// Open reports how many clients are open.
func (c *Clients) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// acquire returns the client for key, making it with mk when there is
// none, and the function that releases it.
func (c *Clients) acquire(key string, mk func() (*kgo.Client, error)) (*kgo.Client, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.m[key]
	if sc == nil {
		cl, err := mk()
		if err != nil {
			return nil, nil, err
		}
		sc = &sharedClient{cl: cl}
		c.m[key] = sc
	}
	sc.refs++
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.mu.Lock()
			sc.refs--
			last := sc.refs == 0
			if last {
				delete(c.m, key)
			}
			c.mu.Unlock()
			if last {
				sc.cl.Close()
			}
		})
	}
	return sc.cl, release, nil
}

// connectionKey identifies the settings a client's connections depend on.
// It is a hash, so that credentials do not sit in map keys.
func connectionKey(seeds []string, c clientSettings) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%v\x00%q",
		strings.Join(seeds, ","), c.protocol, c.mechanism, c.user, c.pass, c.trustFile, c.trustPEM,
		c.keystoreFile, c.certChainPEM, c.keyPEM, c.verifyHostname, c.clientID)
	return hex.EncodeToString(h.Sum(nil))
}
