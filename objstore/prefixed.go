package objstore

import (
	"context"
	"strings"
)

// Prefixed returns a Store that scopes inner under a key prefix: key k is
// stored as prefix+k, and List returns keys relative to the prefix. A
// non-empty prefix without a trailing slash gets one ("a/b" → "a/b/"). An
// empty prefix returns inner itself.
func Prefixed(inner Store, prefix string) Store {
	prefix = normalizePrefix(prefix)
	if prefix == "" {
		return inner
	}
	if p, ok := inner.(*prefixed); ok {
		return &prefixed{inner: p.inner, prefix: p.prefix + prefix}
	}
	return &prefixed{inner: inner, prefix: prefix}
}

type prefixed struct {
	inner  Store
	prefix string
}

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return p.inner.Get(ctx, p.prefix+key)
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return p.inner.Put(ctx, p.prefix+key, data)
}

func (p *prefixed) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return p.inner.PutIfAbsent(ctx, p.prefix+key, data)
}

func (p *prefixed) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := p.inner.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	out := keys[:0]
	for _, k := range keys {
		if rel, ok := strings.CutPrefix(k, p.prefix); ok {
			out = append(out, rel)
		}
	}
	return out, nil
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return p.inner.Delete(ctx, p.prefix+key)
}
