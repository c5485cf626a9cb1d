package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// Object-store requests per batch (-only s3-requests, in -report): the
// tile in this process with its checkpoint and sink on the S3-compatible
// test server (versitygw), every request going through a counting HTTP
// proxy on loopback. The proxy sees what goes over the wire (retries,
// the HEAD a delete sends first, multipart calls), classifies each request
// by S3 operation and by area (the first key segment: checkpoint or sink)
// and counts the request bodies' bytes. A batch's requests are those
// between the progress report of the batch before and its own.

// S3 operations as the proxy names them.
const (
	opPut             = "PUT"
	opPutIfAbsent     = "PUT if-absent"
	opGet             = "GET"
	opHead            = "HEAD"
	opList            = "LIST"
	opDelete          = "DELETE"
	opDeleteMany      = "DELETE (multi-object)"
	opMultipartCreate = "multipart create"
	opUploadPart      = "multipart upload-part"
	opMultipartDone   = "multipart complete"
	opMultipartAbort  = "multipart abort"
	opListUploads     = "list multipart uploads"
	opOther           = "other"
)

// s3Ops is the order the report lists operations in.
var s3Ops = []string{opPut, opPutIfAbsent, opGet, opHead, opList, opDelete, opDeleteMany, opMultipartCreate, opUploadPart, opMultipartDone, opMultipartAbort, opListUploads, opOther}

// s3Op classifies a path-style S3 request.
func s3Op(r *http.Request) string {
	q := r.URL.Query()
	_, uploads := q["uploads"]
	_, uploadID := q["uploadId"]
	_, del := q["delete"]
	key := s3Key(r.URL.Path)
	switch r.Method {
	case http.MethodPut:
		switch {
		case uploadID:
			return opUploadPart
		case r.Header.Get("If-None-Match") != "":
			return opPutIfAbsent
		case key != "":
			return opPut
		}
	case http.MethodPost:
		switch {
		case uploads:
			return opMultipartCreate
		case uploadID:
			return opMultipartDone
		case del:
			return opDeleteMany
		}
	case http.MethodDelete:
		if uploadID {
			return opMultipartAbort
		}
		if key != "" {
			return opDelete
		}
	case http.MethodHead:
		return opHead
	case http.MethodGet:
		switch {
		case uploads:
			return opListUploads
		case key == "":
			return opList
		default:
			return opGet
		}
	}
	return opOther
}

// s3Key is the object key of a path-style path (/bucket/key).
func s3Key(path string) string {
	_, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return key
}

// s3Area is the first segment of a request's key, or of its list prefix.
func s3Area(r *http.Request) string {
	k := s3Key(r.URL.Path)
	if k == "" {
		k = r.URL.Query().Get("prefix")
	}
	if a, _, ok := strings.Cut(k, "/"); ok {
		return a
	}
	if k == "" {
		return "bucket"
	}
	return k
}

// S3Counts are requests and request-body bytes by area and operation.
type S3Counts struct {
	Requests map[string]map[string]int64 // area → op → requests
	Bytes    map[string]int64            // area → bytes of request bodies (PUT, upload-part, POST)
}

func (c S3Counts) clone() S3Counts {
	out := S3Counts{Requests: map[string]map[string]int64{}, Bytes: map[string]int64{}}
	for a, m := range c.Requests {
		out.Requests[a] = map[string]int64{}
		for op, n := range m {
			out.Requests[a][op] = n
		}
	}
	for a, n := range c.Bytes {
		out.Bytes[a] = n
	}
	return out
}

// minus is c − o.
func (c S3Counts) minus(o S3Counts) S3Counts {
	out := c.clone()
	for a, m := range o.Requests {
		for op, n := range m {
			out.Requests[a][op] -= n
		}
	}
	for a, n := range o.Bytes {
		out.Bytes[a] -= n
	}
	return out
}

// countingProxy forwards to an S3 endpoint and counts.
type countingProxy struct {
	URL string // http://127.0.0.1:PORT
	srv *http.Server
	mu  sync.Mutex
	c   S3Counts
}

type countingBody struct {
	io.ReadCloser
	n *int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	*b.n += int64(n)
	return n, err
}

func startCountingProxy(target string) (*countingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{URL: "http://" + l.Addr().String(), c: S3Counts{Requests: map[string]map[string]int64{}, Bytes: map[string]int64{}}}
	// The Director keeps the Host header the client signed (the proxy's).
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, area := s3Op(r), s3Area(r)
		var n int64
		if r.Body != nil {
			r.Body = countingBody{r.Body, &n}
		}
		rp.ServeHTTP(w, r)
		p.mu.Lock()
		if p.c.Requests[area] == nil {
			p.c.Requests[area] = map[string]int64{}
		}
		p.c.Requests[area][op]++
		p.c.Bytes[area] += n
		p.mu.Unlock()
	})}
	go p.srv.Serve(l)
	return p, nil
}

func (p *countingProxy) counts() S3Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c.clone()
}

func (p *countingProxy) close() { p.srv.Close() }

// versityGW is an S3-compatible test server process.
type versityGW struct {
	Endpoint, AccessKey, SecretKey string
	cmd                            *exec.Cmd
	exited                         chan struct{}
	log                            *syncbuf.Buffer
}

// startVersityGW runs versitygw (s3test.Binary: $SLUICE_VERSITYGW or the
// cache) on loopback over dataDir and creates bucket.
func startVersityGW(ctx context.Context, dataDir, bucket string) (*versityGW, error) {
	bin, err := s3test.Binary()
	if err != nil {
		return nil, fmt.Errorf("%w (set SLUICE_VERSITYGW or run ./scripts/test.sh, which installs it)", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	g := &versityGW{Endpoint: "http://" + addr, AccessKey: "SLUICEBENCHACCESSKEY", SecretKey: "sluicebenchsecretkeysluicebenchsecretkey", exited: make(chan struct{}), log: &syncbuf.Buffer{}}
	g.cmd = exec.Command(bin, "--port", addr, "-a", g.AccessKey, "-s", g.SecretKey, "posix", dataDir)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VGW_") && !strings.HasPrefix(kv, "ROOT_") {
			g.cmd.Env = append(g.cmd.Env, kv)
		}
	}
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	client := s3.New(s3.Options{Region: s3test.Region, BaseEndpoint: aws.String(g.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(g.AccessKey, g.SecretKey, "")})
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = client.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		cancel()
		if err == nil {
			return g, nil
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("versitygw exited: %s", tail(g.log.String(), 1500))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.close()
			return nil, fmt.Errorf("versitygw on %s: create bucket %s: %w; log:\n%s", addr, bucket, err, tail(g.log.String(), 1500))
		}
	}
}

func (g *versityGW) close() {
	g.cmd.Process.Kill()
	<-g.exited
}

// storeOptions reach endpoint (the proxy) with the server's credentials.
func (g *versityGW) storeOptions(endpoint string) objstore.Options {
	pathStyle := true
	return objstore.Options{S3: objstore.S3Options{Region: s3test.Region, Endpoint: endpoint, AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey, PathStyle: &pathStyle}}
}

// S3Batch is one batch's requests.
type S3Batch struct {
	BatchID ids.BatchID
	NoData  bool
	Rows    int64
	Counts  S3Counts
}

// S3Requests is the measurement.
type S3Requests struct {
	Rows, Batches int
	Courses       int
	PerBatch      []S3Batch
}

func runS3Requests(ctx context.Context, dir string, rows, batches, courses, parallelism int, out io.Writer) (*S3Requests, error) {
	const bucket = "sluicebench"
	g, err := startVersityGW(ctx, filepath.Join(dir, "s3-data"), bucket)
	if err != nil {
		return nil, err
	}
	defer g.close()
	defer os.RemoveAll(dir)
	px, err := startCountingProxy(g.Endpoint)
	if err != nil {
		return nil, err
	}
	defer px.close()
	gopts := generatorOptions(int64(rows), int64(max(rows/batches, 1)))
	gopts.Courses = courses
	spec := tileSpec(query.Source{Generator: &gopts}, dir, query.Trigger{AvailableNow: true})
	spec.CheckpointLocation = "s3://" + bucket + "/checkpoint"
	spec.Sink.Parquet.Path = "s3://" + bucket + "/sink"
	res := &S3Requests{Rows: rows, Batches: batches, Courses: courses}
	prev := px.counts()
	onReport := func(p *progress.Report) {
		now := px.counts()
		res.PerBatch = append(res.PerBatch, S3Batch{BatchID: p.BatchID, NoData: p.NoData, Rows: p.NumInputRows, Counts: now.minus(prev)})
		prev = now
	}
	job, err := microbatch.Build(ctx, spec, microbatch.Options{Parallelism: parallelism, Observer: progress.Committed(onReport), Store: g.storeOptions(px.URL), StateDir: filepath.Join(dir, "state")})
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	err = errors.Join(job.Run(ctx, nil), job.Close())
	if err != nil {
		return res, fmt.Errorf("run the tile on S3: %w", err)
	}
	var got int64
	for _, b := range res.PerBatch {
		got += b.Rows
	}
	if got != int64(rows) {
		return res, fmt.Errorf("the tile on S3 read %d rows, want %d", got, rows)
	}
	fmt.Fprintf(out, "s3-requests: %d rows in %d batches on versitygw\n", rows, len(res.PerBatch))
	return res, nil
}

func runS3RequestsMode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config
	batches := max(c.s3Batches, 1)
	rows := batches * int(min(c.maxRowsPerTrigger, 100_000))
	sec := &Section{Title: "Object-store requests per batch on the S3-compatible server"}
	r, err := runS3Requests(ctx, filepath.Join(e.Dir, "s3-requests"), rows, batches, processCourses, c.parallelism, e.Out)
	if r == nil {
		return sec, err
	}
	sec.Data = r
	sec.Text = fmt.Sprintf("The tile in this process (generator, %d rows in %d data batches of %d rows, %d courses, availableNow, in-memory state), checkpoint at s3://…/checkpoint and Parquet sink at s3://…/sink on versitygw over loopback. Every request goes through a counting HTTP proxy, so these are the requests on the wire (retries included; a delete is a HEAD then a DELETE; a conditional PUT is `PUT if-absent`). Bytes are request bodies (what the engine writes; signed chunked uploads include their chunk signatures). Batch 0 includes start-up (metadata, the first listing); the figures below are medians over the data batches after it [min–max], then the final no-data batch.",
		rows, batches, rows/batches, processCourses)
	var data []S3Batch
	var first, final *S3Batch
	for i := range r.PerBatch {
		b := &r.PerBatch[i]
		switch {
		case i == 0:
			first = b
		case b.NoData:
			final = b
		default:
			data = append(data, *b)
		}
	}
	areas := map[string]bool{}
	for _, b := range r.PerBatch {
		for a := range b.Counts.Requests {
			areas[a] = true
		}
	}
	var as []string
	for a := range areas {
		as = append(as, a)
	}
	slices.Sort(as)
	one := func(b *S3Batch, area, op string) string {
		if b == nil {
			return "–"
		}
		return fmt.Sprint(b.Counts.Requests[area][op])
	}
	sec.Table = &Table{Header: []string{"area", "operation", "per data batch, median [min–max]", "batch 0 (with start-up)", "final no-data batch"}}
	for _, a := range as {
		for _, op := range s3Ops {
			var xs []float64
			seen := false
			for _, b := range r.PerBatch {
				if b.Counts.Requests[a][op] > 0 {
					seen = true
				}
			}
			if !seen {
				continue
			}
			for _, b := range data {
				xs = append(xs, float64(b.Counts.Requests[a][op]))
			}
			sec.Table.Rows = append(sec.Table.Rows, []string{a, op, rangeOf(xs, "%.0f"), one(first, a, op), one(final, a, op)})
		}
		var bs []float64
		for _, b := range data {
			bs = append(bs, float64(b.Counts.Bytes[a])/1024)
		}
		fb, nb := "–", "–"
		if first != nil {
			fb = fmt.Sprintf("%.1f", float64(first.Counts.Bytes[a])/1024)
		}
		if final != nil {
			nb = fmt.Sprintf("%.1f", float64(final.Counts.Bytes[a])/1024)
		}
		sec.Table.Rows = append(sec.Table.Rows, []string{a, "KiB written", rangeOf(bs, "%.1f"), fb, nb})
	}
	var total, written []float64
	for _, b := range data {
		var n, w int64
		for a, m := range b.Counts.Requests {
			for _, v := range m {
				n += v
			}
			w += b.Counts.Bytes[a]
		}
		total, written = append(total, float64(n)), append(written, float64(w)/1024)
	}
	sec.Rows = []Row{{Name: fmt.Sprintf("S3 requests per data batch (versitygw, %d rows a batch), all operations; KiB written", rows/batches), Value: rangeOf(total, "%.0f") + "; " + rangeOf(written, "%.1f")}}
	return sec, err
}
