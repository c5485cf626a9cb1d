package objstore

import (
	"context"
	"fmt"
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

func (p *prefixed) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	mp, err := multipartOf(p.inner, OpCreateMultipart, key)
	if err != nil {
		return "", err
	}
	return mp.CreateMultipart(ctx, p.prefix+key)
}

func (p *prefixed) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	if err := checkKey(key); err != nil {
		return Part{}, err
	}
	mp, err := multipartOf(p.inner, OpUploadPart, key)
	if err != nil {
		return Part{}, err
	}
	return mp.UploadPart(ctx, p.prefix+key, uploadID, number, data)
}

func (p *prefixed) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	if err := checkKey(key); err != nil {
		return err
	}
	mp, err := multipartOf(p.inner, OpCompleteMultipart, key)
	if err != nil {
		return err
	}
	return mp.CompleteMultipart(ctx, p.prefix+key, uploadID, parts)
}

func (p *prefixed) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	mp, err := multipartOf(p.inner, OpAbortMultipart, key)
	if err != nil {
		return err
	}
	return mp.AbortMultipart(ctx, p.prefix+key, uploadID)
}

func (p *prefixed) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	il, ok := p.inner.(InfoLister)
	if !ok {
		return nil, fmt.Errorf("list %s: the store cannot list modification times", prefix)
	}
	infos, err := il.ListInfo(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	out := infos[:0]
	for _, o := range infos {
		if rel, ok := strings.CutPrefix(o.Key, p.prefix); ok {
			o.Key = rel
			out = append(out, o)
		}
	}
	return out, nil
}

// ListsStaged answers for the wrapped store.
func (p *prefixed) ListsStaged() bool {
	_, ok := StagedListerOf(p.inner)
	return ok
}

func (p *prefixed) ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error) {
	l, err := stagedListerOf(p.inner, prefix)
	if err != nil {
		return nil, err
	}
	ups, err := l.ListStaged(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	out := ups[:0]
	for _, u := range ups {
		if rel, ok := strings.CutPrefix(u.Key, p.prefix); ok {
			u.Key = rel
			out = append(out, u)
		}
	}
	return out, nil
}
