package objstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is a Store in memory, for logic tests. It satisfies the whole Store
// contract within one process. Values are copied on the way in and out.
type Mem struct {
	mu      sync.Mutex
	objects map[string][]byte
	uploads map[string]*memUpload // upload id -> staged parts
	mtimes  map[string]time.Time
}

type memUpload struct {
	key   string
	parts map[int][]byte
}

// NewMem returns an empty in-memory Store.
func NewMem() *Mem {
	return &Mem{objects: make(map[string][]byte), uploads: make(map[string]*memUpload), mtimes: make(map[string]time.Time)}
}

func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	return append([]byte{}, b...), nil
}

func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = append([]byte{}, data...)
	m.mtimes[key] = time.Now()
	return nil
}

func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok {
		return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
	}
	m.objects[key] = append([]byte{}, data...)
	m.mtimes[key] = time.Now()
	return nil
}

func (m *Mem) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; !ok {
		return fmt.Errorf("delete %s: %w", key, ErrNotExist)
	}
	delete(m.objects, key)
	return nil
}

func (m *Mem) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("create multipart %s: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	id := newUploadID()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.uploads[id] = &memUpload{key: key, parts: make(map[int][]byte)}
	return id, nil
}

func (m *Mem) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	if err := ctx.Err(); err != nil {
		return Part{}, fmt.Errorf("upload part %d of %s: %w", number, key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.uploads[uploadID]
	if !ok || u.key != key {
		return Part{}, fmt.Errorf("upload part %d of %s upload %s: %w", number, key, uploadID, ErrNoSuchUpload)
	}
	if number < 1 {
		return Part{}, fmt.Errorf("upload part %d of %s: part numbers start at 1", number, key)
	}
	u.parts[number] = append([]byte{}, data...)
	return Part{Number: number, ETag: PartETag(data), Size: int64(len(data))}, nil
}

func (m *Mem) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("complete multipart %s: %w", key, err)
	}
	if err := checkParts(key, parts); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.uploads[uploadID]
	if !ok || u.key != key {
		if b, ok := m.objects[key]; ok && matchesParts(b, parts) {
			return nil
		}
		return fmt.Errorf("complete multipart %s upload %s: %w", key, uploadID, ErrNoSuchUpload)
	}
	var all []byte
	for _, p := range parts {
		b, ok := u.parts[p.Number]
		if !ok || PartETag(b) != p.ETag {
			return fmt.Errorf("complete multipart %s upload %s: part %d was not uploaded with etag %s", key, uploadID, p.Number, p.ETag)
		}
		all = append(all, b...)
	}
	m.objects[key] = all
	m.mtimes[key] = time.Now()
	delete(m.uploads, uploadID)
	return nil
}

func (m *Mem) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("abort multipart %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.uploads[uploadID]; ok && u.key == key {
		delete(m.uploads, uploadID)
	}
	return nil
}

// PendingUploads returns how many multipart uploads are neither completed
// nor aborted (tests check nothing is left behind).
func (m *Mem) PendingUploads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.uploads)
}

// ListInfo is List with sizes and the time of each object's last write.
func (m *Mem) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	keys, err := m.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ObjectInfo, 0, len(keys))
	for _, k := range keys {
		if b, ok := m.objects[k]; ok {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(b)), ModTime: m.mtimes[k]})
		}
	}
	return out, nil
}

// SetModTime sets an object's modification time (tests of sources that
// order by it).
func (m *Mem) SetModTime(key string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok {
		m.mtimes[key] = t
	}
}
