package source

import "sync"

// Shared is a process's cache of source clients, keyed by the source's own
// key for the connection settings (a hash, so credentials do not sit in
// map keys). Sources opened with the same Shared and the same settings
// share one client, so a process keeps one set of connections per cluster
// whatever the number of queries reading it, across their batches; a
// client is closed when the last source using it is closed (its query
// ended).
//
// The zero value is not usable; call NewShared. It is safe for concurrent
// use.
type Shared struct {
	mu sync.Mutex
	m  map[string]*sharedClient
}

type sharedClient struct {
	client any
	close  func()
	refs   int
}

// NewShared returns an empty cache.
func NewShared() *Shared { return &Shared{m: map[string]*sharedClient{}} }

// Open reports how many clients are open.
func (c *Shared) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Acquire returns the client for key, making it with mk (which returns the
// client and how to close it) when there is none, and the function that
// gives it back. Keys of different source kinds must not collide: prefix
// them with the kind's name.
func (c *Shared) Acquire(key string, mk func() (client any, close func(), err error)) (any, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.m[key]
	if sc == nil {
		cl, closeFn, err := mk()
		if err != nil {
			return nil, nil, err
		}
		sc = &sharedClient{client: cl, close: closeFn}
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
				sc.close()
			}
		})
	}
	return sc.client, release, nil
}
