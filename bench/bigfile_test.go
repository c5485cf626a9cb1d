package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/source/generator"
)

// The listing measurement takes every file once per trigger and counts
// what the listings returned: partial listings stay at the newest hour
// directory, a full listing returns every file.
func TestListingCostsCountWhatEachListingReturned(t *testing.T) {
	costs, err := listingCosts(context.Background(), filepath.Join(t.TempDir(), "l"), []int{10, 350}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range costs {
		if c.FullObjects < float64(c.Taken) {
			t.Errorf("%d taken: a full listing returned %.0f objects", c.Taken, c.FullObjects)
		}
		if c.PartialObjects > bigFileFilesPerDir+1 {
			t.Errorf("%d taken: a partial listing returned %.0f objects, more than one hour directory", c.Taken, c.PartialObjects)
		}
	}
}

// The big file holds the generator's lines, one per row, from row 0.
func TestBigFileHoldsTheGeneratorsLines(t *testing.T) {
	name := filepath.Join(t.TempDir(), "big.jsonl")
	n, size, err := writeBigFile(name, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := generator.New(generatorOptions(0, 0))
	sc := bufio.NewScanner(f)
	var i, bytes int64
	for sc.Scan() {
		if want := string(g.AppendLine(nil, i)); sc.Text() != want {
			t.Fatalf("line %d = %s, want %s", i, sc.Text(), want)
		}
		bytes += int64(len(sc.Bytes())) + 1
		i++
	}
	if i != n || bytes != size || size < 1<<20 {
		t.Fatalf("%d lines, %d bytes; writeBigFile said %d, %d", i, bytes, n, size)
	}
}

// One object on the S3 test server, read by driver run and by driver
// serve with two executors: both read every event (each process's
// progress is checked against the events written), and the round's ratio
// is recorded.
func TestBigObjectOnS3ReadByOneProcessAndByACluster(t *testing.T) {
	needVersityGW(t)
	driver, executor := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := config{bigS3Events: 20_000, bigS3Runs: 1, bigS3MinPartitions: 4}
	e := &ModeEnv{Config: &c, Dir: t.TempDir(), Out: io.Discard,
		Driver:   func(context.Context) (string, error) { return driver, nil },
		Executor: func(context.Context) (string, error) { return executor, nil }}
	sec, err := runBigFileS3Mode(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	r := sec.Data.(*BigFileS3Result)
	if r.Bytes < 20_000*80 || len(r.Ratio) != 1 || r.Ratio[0] <= 0 {
		t.Fatalf("%+v", r)
	}
	if len(sec.Targets) != 1 || sec.Targets[0].Name != bigFileS3TargetName || sec.Targets[0].Status == "not measured" {
		t.Errorf("targets %+v", sec.Targets)
	}
}
