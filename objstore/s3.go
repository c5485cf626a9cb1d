package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// Defaults for S3Options fields left zero.
const (
	DefaultS3Region         = "us-east-1"
	DefaultS3MaxRetries     = 6
	DefaultS3RetryBaseDelay = 200 * time.Millisecond
	DefaultS3RetryMaxDelay  = 10 * time.Second
)

// writeIDMeta is the user-metadata key (x-amz-meta-sluice-write-id) that
// PutIfAbsent stamps on the object it creates, to recognise its own write
// when a retry after a lost response finds the key taken.
const writeIDMeta = "sluice-write-id"

// S3Options configures an S3 store. Every empty field comes from the
// standard AWS settings through config.LoadDefaultConfig: AWS_REGION,
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, the shared config and
// credentials files (AWS_PROFILE), web identity tokens and instance roles.
type S3Options struct {
	// Region; if neither this nor the AWS settings name one, us-east-1.
	Region string
	// Endpoint is a custom endpoint URL such as http://127.0.0.1:7070 for
	// an S3-compatible server.
	Endpoint string
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials;
	// when AccessKeyID is empty the default credential chain is used.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PathStyle forces path-style (true) or virtual-host (false) bucket
	// addressing. Nil means path style whenever a custom endpoint is set
	// (here or in the AWS settings), virtual host otherwise.
	PathStyle *bool
	// MaxRetries is how many times one request is retried after its first
	// attempt on throttling (SlowDown, 503, 429), other 5xx responses,
	// conflicting concurrent conditional writes (409) and connection
	// errors. 0 means DefaultS3MaxRetries; negative means no retries.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay shape the backoff: before retry n
	// the store waits a random duration in [d/2, d] where
	// d = min(RetryMaxDelay, RetryBaseDelay * 2^(n-1)).
	// Zero means DefaultS3RetryBaseDelay and DefaultS3RetryMaxDelay.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// RequestsPerSecond caps the rate of HTTP requests this store sends,
	// retries included (burst: one second's worth). 0 means no limit.
	RequestsPerSecond float64
	// Logger receives retries (debug) and resolved lost responses (info).
	// Nil discards.
	Logger *slog.Logger
}

// Validate reports every invalid field.
func (o S3Options) Validate() error {
	var errs []error
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("s3 endpoint %q: must be an http:// or https:// URL with a host", o.Endpoint))
		}
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		errs = append(errs, fmt.Errorf("s3 credentials: accessKeyID and secretAccessKey must be set together (accessKeyID set: %v, secretAccessKey set: %v)", o.AccessKeyID != "", o.SecretAccessKey != ""))
	}
	if o.SessionToken != "" && o.AccessKeyID == "" {
		errs = append(errs, errors.New("s3 credentials: sessionToken needs accessKeyID and secretAccessKey"))
	}
	if o.RequestsPerSecond < 0 || math.IsNaN(o.RequestsPerSecond) || math.IsInf(o.RequestsPerSecond, 0) {
		errs = append(errs, fmt.Errorf("s3 requestsPerSecond %v: must be a finite number >= 0", o.RequestsPerSecond))
	}
	if o.RetryBaseDelay < 0 {
		errs = append(errs, fmt.Errorf("s3 retryBaseDelay %v: must be >= 0", o.RetryBaseDelay))
	}
	if o.RetryMaxDelay < 0 {
		errs = append(errs, fmt.Errorf("s3 retryMaxDelay %v: must be >= 0", o.RetryMaxDelay))
	}
	return errors.Join(errs...)
}

// S3 is a Store on an S3 bucket under a key prefix, on aws-sdk-go-v2.
//
// Atomicity comes from S3 itself: PutObject replaces an object atomically
// and PutObject with If-None-Match: * creates it only if absent (HTTP 412
// otherwise), which S3 and compatible servers honour across clients.
//
// Retries are the SDK's standard retryer with our backoff and retryable
// set; they are safe for Get, Put, List and Delete, which are idempotent.
// PutIfAbsent is not: if the response to an attempt that created the
// object is lost, the retry sees 412. To tell that apart from losing to
// another writer, PutIfAbsent stamps a random write id into the object's
// user metadata (x-amz-meta-sluice-write-id); on a 412 after more than one
// attempt it reads the object's metadata and reports success only if the
// id is its own. Comparing bytes instead would let two writers of equal
// bytes both win, which would break fencing. On a server that drops user
// metadata the check fails closed: a lost response then shows as ErrExists;
// so does a 412 after a retry when the metadata cannot be read.
//
// Any other error from PutIfAbsent (for example retries exhausted) leaves
// the outcome unknown: the object may or may not have been created.
type S3 struct {
	client     *s3.Client
	bucket     string
	pageSize   int32 // ListObjectsV2 MaxKeys; 0 = server default (1000)
	prefix     string
	logger     *slog.Logger
	maxAttempt int
	backoff    func(attempt int) time.Duration
	// partSize is a streamed put's part buffer (0: DefaultPartSize).
	partSize int
}

// NewS3 returns a Store on bucket under prefix ("" or "a/b/"; a missing
// trailing slash is added). It sends no request: a missing bucket or bad
// credentials show on first use.
func NewS3(ctx context.Context, bucket, prefix string, opts S3Options) (*S3, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, fmt.Errorf("open s3 store: %w", err)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("open s3 store s3://%s/%s: %w", bucket, prefix, err)
	}
	prefix = normalizePrefix(prefix)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.AccessKeyID != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("open s3 store s3://%s/%s: load aws config: %w", bucket, prefix, err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultS3Region
	}

	maxRetries := opts.MaxRetries
	if maxRetries == 0 {
		maxRetries = DefaultS3MaxRetries
	}
	if maxRetries < 0 {
		maxRetries = 0
	}
	base, maxDelay := opts.RetryBaseDelay, opts.RetryMaxDelay
	if base == 0 {
		base = DefaultS3RetryBaseDelay
	}
	if maxDelay == 0 {
		maxDelay = DefaultS3RetryMaxDelay
	}
	backoff := func(attempt int) time.Duration { return jitteredBackoff(base, maxDelay, attempt) }

	retryer := retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = maxRetries + 1
		so.MaxBackoff = maxDelay
		so.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			d := backoff(attempt)
			logger.Debug("s3 retry", "bucket", bucket, "attempt", attempt, "delay", d, "err", err)
			return d, nil
		})
		// Attempts are bounded per request and paced by RequestsPerSecond;
		// a client-wide retry quota would turn a burst of throttling into
		// immediate failures of unrelated requests.
		so.RateLimiter = ratelimit.None
		so.Retryables = append(so.Retryables,
			retry.RetryableErrorCode{Codes: map[string]struct{}{"ConditionalRequestConflict": {}}},
			retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{http.StatusTooManyRequests: {}}},
		)
	})

	var apiOptions []func(*middleware.Stack) error
	if opts.RequestsPerSecond > 0 {
		burst := max(1, int(math.Ceil(opts.RequestsPerSecond)))
		limiter := rate.NewLimiter(rate.Limit(opts.RequestsPerSecond), burst)
		apiOptions = append(apiOptions, func(st *middleware.Stack) error {
			// After "Retry" so that every attempt waits its turn.
			return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("SluiceRateLimit",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if err := limiter.Wait(ctx); err != nil {
						return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("wait for request rate limit: %w", err)
					}
					return next.HandleFinalize(ctx, in)
				}), "Retry", middleware.After)
		})
	}

	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Logger = sdkLogger(logger)
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		customEndpoint := o.BaseEndpoint != nil && *o.BaseEndpoint != ""
		if opts.PathStyle != nil {
			o.UsePathStyle = *opts.PathStyle
		} else if customEndpoint {
			o.UsePathStyle = true
		}
		o.Retryer = retryer
		if opts.MaxRetries != 0 {
			o.RetryMaxAttempts = 0 // ours, not AWS_MAX_ATTEMPTS
		}
		o.APIOptions = append(o.APIOptions, apiOptions...)
	})
	return &S3{
		client:     client,
		bucket:     bucket,
		prefix:     prefix,
		logger:     logger,
		maxAttempt: maxRetries + 1,
		backoff:    backoff,
	}, nil
}

// sdkLogger sends the SDK's own log lines (such as checksum warnings) to
// logger instead of stderr.
func sdkLogger(logger *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		msg := "s3 sdk: " + fmt.Sprintf(format, v...)
		if c == logging.Warn {
			logger.Warn(msg)
		} else {
			logger.Debug(msg)
		}
	})
}

// jitteredBackoff returns a random duration in [d/2, d] with
// d = min(maxDelay, base * 2^(attempt-1)).
func jitteredBackoff(base, maxDelay time.Duration, attempt int) time.Duration {
	d := maxDelay
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 40 {
		if e := base << (attempt - 1); e > 0 && e < maxDelay {
			d = e
		}
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(mrand.Int64N(int64(d-half)+1))
}

// checkBucket applies the S3 bucket naming rules that matter for URIs.
func checkBucket(bucket string) error {
	if len(bucket) < 3 || len(bucket) > 63 {
		return fmt.Errorf("bucket %q: must be 3 to 63 characters long", bucket)
	}
	for _, r := range bucket {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("bucket %q: may contain only lower-case letters, digits, '-' and '.'", bucket)
		}
	}
	return nil
}

// normalizePrefix makes a non-empty prefix end in exactly one slash.
func normalizePrefix(prefix string) string {
	prefix = strings.TrimLeft(prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

// Bucket returns the bucket the store is on.
func (s *S3) Bucket() string { return s.bucket }

// Prefix returns the key prefix the store is rooted at ("" or ending in "/").
func (s *S3) Prefix() string { return s.prefix }

// String returns the store's URI, s3://bucket/prefix.
func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

func (s *S3) fail(op, key string, err error) error {
	return fmt.Errorf("s3 %s s3://%s/%s%s: %w", op, s.bucket, s.prefix, key, err)
}

// httpStatus returns the HTTP status of an SDK error, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || apiCode(err) == "NoSuchKey" || httpStatus(err) == http.StatusNotFound
}

func isPreconditionFailed(err error) bool {
	return apiCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed
}

func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, s.fail("get", key, err)
	}
	// The SDK retries the request; a connection lost while reading the
	// body is retried here.
	for attempt := 1; ; attempt++ {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(s.bucket),
			Key:    aws.String(s.prefix + key),
		})
		if err != nil {
			if isNotFound(err) {
				return nil, s.fail("get", key, ErrNotExist)
			}
			return nil, s.fail("get", key, err)
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err == nil {
			return b, nil
		}
		if attempt >= s.maxAttempt || ctx.Err() != nil {
			return nil, s.fail("get", key, fmt.Errorf("read body: %w", err))
		}
		d := s.backoff(attempt)
		s.logger.Debug("s3 retry body read", "bucket", s.bucket, "key", s.prefix+key, "attempt", attempt, "delay", d, "err", err)
		if err := sleepCtx(ctx, d); err != nil {
			return nil, s.fail("get", key, err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return s.fail("put", key, err)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// countAttempts returns a per-call option that counts HTTP attempts.
func countAttempts(n *int) func(*s3.Options) {
	return s3.WithAPIOptions(func(st *middleware.Stack) error {
		return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("SluiceCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				*n++ // attempts of one call are sequential
				return next.HandleFinalize(ctx, in)
			}), "Retry", middleware.After)
	})
}

func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return s.fail("put-if-absent", key, err)
	}
	var idBytes [16]byte
	rand.Read(idBytes[:])
	writeID := hex.EncodeToString(idBytes[:])
	attempts := 0
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
		Metadata:      map[string]string{writeIDMeta: writeID},
	}, countAttempts(&attempts))
	if err == nil {
		return nil
	}
	if !isPreconditionFailed(err) {
		return s.fail("put-if-absent", key, err)
	}
	if attempts <= 1 {
		return s.fail("put-if-absent", key, ErrExists)
	}
	// 412 on a retry: was the earlier attempt ours?
	head, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if herr != nil {
		return s.fail("put-if-absent", key, fmt.Errorf("%w (a retry found the key taken and checking whose write it is failed: %v)", ErrExists, herr))
	}
	for k, v := range head.Metadata {
		if strings.EqualFold(k, writeIDMeta) && v == writeID {
			s.logger.Info("s3 put-if-absent: retry after a lost response found our own write",
				"bucket", s.bucket, "key", s.prefix+key, "attempts", attempts)
			return nil
		}
	}
	return s.fail("put-if-absent", key, ErrExists)
}

func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := s.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	return keys, nil
}

// Delete checks with HeadObject that the key exists (S3's DeleteObject
// succeeds on absent keys), then deletes it. Two concurrent Deletes of one
// key may both succeed.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return s.fail("delete", key, err)
	}
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		if isNotFound(err) {
			return s.fail("delete", key, ErrNotExist)
		}
		return s.fail("delete", key, err)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return s.fail("delete", key, err)
	}
	return nil
}

func isNoSuchUpload(err error) bool {
	var nsu *types.NoSuchUpload
	return errors.As(err, &nsu) || apiCode(err) == "NoSuchUpload"
}

// CreateMultipart starts a multipart upload. Its object stays invisible to
// GET and LIST until CompleteMultipart. An upload never completed nor
// aborted costs storage until a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) removes it.
func (s *S3) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", s.fail("create-multipart", key, err)
	}
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return "", s.fail("create-multipart", key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// UploadPart uploads one part; any process may upload parts of an upload.
func (s *S3) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	if err := checkKey(key); err != nil {
		return Part{}, s.fail("upload-part", key, err)
	}
	if number < 1 || number > 10000 {
		return Part{}, s.fail("upload-part", key, fmt.Errorf("part number %d: must be 1..10000", number))
	}
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		UploadId:      aws.String(uploadID),
		PartNumber:    aws.Int32(int32(number)),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		if isNoSuchUpload(err) {
			return Part{}, s.fail("upload-part", key, fmt.Errorf("upload %s: %w", uploadID, ErrNoSuchUpload))
		}
		return Part{}, s.fail("upload-part", key, err)
	}
	etag := aws.ToString(out.ETag)
	if want := PartETag(data); etag != want {
		return Part{}, s.fail("upload-part", key, fmt.Errorf("part %d: server answered etag %s, the bytes sent have %s", number, etag, want))
	}
	return Part{Number: number, ETag: etag, Size: int64(len(data))}, nil
}

// CompleteMultipart completes the upload. A second call (after a lost
// response, or by a restarted driver) gets NoSuchUpload from some servers
// (MinIO, AWS after a while) and 200 from others (versitygw); on
// NoSuchUpload a HeadObject whose ETag is MultipartETag(parts) means done.
func (s *S3) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	if err := checkKey(key); err != nil {
		return s.fail("complete-multipart", key, err)
	}
	if err := checkParts(key, parts); err != nil {
		return s.fail("complete-multipart", key, err)
	}
	want, err := MultipartETag(parts)
	if err != nil {
		return s.fail("complete-multipart", key, err)
	}
	completed := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		completed[i] = types.CompletedPart{ETag: aws.String(p.ETag), PartNumber: aws.Int32(int32(p.Number))}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(s.prefix + key),
		UploadId:        aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	})
	if err == nil {
		return nil
	}
	if !isNoSuchUpload(err) && !isNotFound(err) {
		return s.fail("complete-multipart", key, err)
	}
	head, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if herr == nil && aws.ToString(head.ETag) == want {
		return nil
	}
	if herr != nil && !isNotFound(herr) {
		return s.fail("complete-multipart", key, fmt.Errorf("upload %s is gone and reading the object failed: %w", uploadID, herr))
	}
	return s.fail("complete-multipart", key, fmt.Errorf("upload %s: %w", uploadID, ErrNoSuchUpload))
}

// AbortMultipart aborts the upload; an unknown upload is not an error, and
// a completed object is left alone.
func (s *S3) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := checkKey(key); err != nil {
		return s.fail("abort-multipart", key, err)
	}
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(s.prefix + key),
		UploadId: aws.String(uploadID),
	})
	if err != nil && !isNoSuchUpload(err) && !isNotFound(err) {
		return s.fail("abort-multipart", key, err)
	}
	return nil
}

// ListInfo is List with each object's size and LastModified.
func (s *S3) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return s.listInfo(ctx, prefix, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + prefix),
	})
}

// listInfo pages through the listing in asks for.
func (s *S3) listInfo(ctx context.Context, prefix string, in *s3.ListObjectsV2Input) ([]ObjectInfo, error) {
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, in, func(o *s3.ListObjectsV2PaginatorOptions) {
		if s.pageSize > 0 {
			o.Limit = s.pageSize
		}
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3 list s3://%s/%s%s: %w", s.bucket, s.prefix, prefix, err)
		}
		for _, obj := range page.Contents {
			k := aws.ToString(obj.Key)
			if rel, ok := strings.CutPrefix(k, s.prefix); ok && rel != "" && strings.HasPrefix(rel, prefix) {
				out = append(out, ObjectInfo{Key: rel, Size: aws.ToInt64(obj.Size), ModTime: aws.ToTime(obj.LastModified)})
			}
		}
	}
	// S3 lists in UTF-8 binary order already; compatible servers may not.
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
