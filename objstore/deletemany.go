package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// BatchDeleter is the optional capability of deleting many keys in few
// requests (S3's DeleteObjects, up to 1,000 keys each), found by type
// assertion. Absent keys are not an error.
type BatchDeleter interface {
	DeleteMany(ctx context.Context, keys []string) error
}

// deleteManyBatch is S3's limit of keys per DeleteObjects request.
const deleteManyBatch = 1000

// DeleteMany deletes keys with one DeleteObjects request per 1,000 keys.
// Unlike Delete it does not check that each key exists.
func (s *S3) DeleteMany(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += deleteManyBatch {
		chunk := keys[start:min(len(keys), start+deleteManyBatch)]
		objs := make([]types.ObjectIdentifier, len(chunk))
		for i, k := range chunk {
			if err := checkKey(k); err != nil {
				return s.fail("delete", k, err)
			}
			objs[i] = types.ObjectIdentifier{Key: aws.String(s.prefix + k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return s.fail("delete", chunk[0], fmt.Errorf("DeleteObjects of %d keys: %w", len(chunk), err))
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return s.fail("delete", strings.TrimPrefix(aws.ToString(e.Key), s.prefix), fmt.Errorf("DeleteObjects: %s: %s (and %d more errors)", aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1))
		}
	}
	return nil
}

// DeleteMany deletes keys from s in few requests when s is a BatchDeleter,
// else one Delete each; absent keys are not an error either way.
func DeleteMany(ctx context.Context, s Store, keys []string) error {
	if bd, ok := s.(BatchDeleter); ok {
		return bd.DeleteMany(ctx, keys)
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil && !errors.Is(err, ErrNotExist) {
			return err
		}
	}
	return nil
}

// DeleteMany forwards to the inner store's batch delete, under the prefix.
func (p *prefixed) DeleteMany(ctx context.Context, keys []string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
		full[i] = p.prefix + k
	}
	return DeleteMany(ctx, p.inner, full)
}

// DeleteMany counts one delete per key.
func (c *Counting) DeleteMany(ctx context.Context, keys []string) error {
	err := DeleteMany(ctx, c.inner, keys)
	for _, k := range keys {
		c.record(OpDelete, k, 0, err)
	}
	return err
}

// DeleteMany runs each key through the rules as a Delete: the first rule
// that fires fails the whole call, before anything is deleted.
func (f *Faulty) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := f.do(OpDelete, k, func() error { return nil }); err != nil {
			return err
		}
	}
	return DeleteMany(ctx, f.inner, keys)
}
