package objstore

import "time"

// SetListPageSize makes List fetch n keys per page, to exercise paging.
func SetListPageSize(s *S3, n int32) { s.pageSize = n }

// JitteredBackoff exposes the backoff for tests.
func JitteredBackoff(base, maxDelay time.Duration, attempt int) time.Duration {
	return jitteredBackoff(base, maxDelay, attempt)
}
