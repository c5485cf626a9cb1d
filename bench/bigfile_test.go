package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

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
