package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sample = `goos: linux
BenchmarkRawProtoactor-2   	   75787	     10000 ns/op	    2000 B/op	      40 allocs/op
BenchmarkSubactorSpawn-2   	   22039	     30000 ns/op	    8000 B/op	     100 allocs/op
BenchmarkRawProtoactor-2   	   75787	     14000 ns/op	    2000 B/op	      40 allocs/op
BenchmarkSubactorSpawn-2   	   22039	     40000 ns/op	    8000 B/op	     100 allocs/op
BenchmarkRawProtoactor-2   	   75787	     12000 ns/op	    2000 B/op	      40 allocs/op
PASS
`

func TestReportMediansAndRatios(t *testing.T) {
	results, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := render(&out, results, "RawProtoactor"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"RawProtoactor (floor)", "12000", "2000", "40", "1.00", "1.00", "1.00"},
		{"SubactorSpawn", "35000", "8000", "100", "2.92", "4.00", "2.50"},
	} {
		got := strings.Join(strings.Fields(lines[i+1]), " ")
		if got != strings.Join(want, " ") {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}
}

func TestReportErrors(t *testing.T) {
	if _, err := parse(strings.NewReader("PASS\n")); err == nil {
		t.Error("no results: want an error")
	}
	results, err := parse(strings.NewReader("BenchmarkX-2 10 5 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := render(&strings.Builder{}, results, "Floor"); err == nil {
		t.Error("missing floor: want an error")
	}
	if err := render(&strings.Builder{}, results, "X"); err == nil {
		t.Error("no -benchmem figures: want an error")
	}
}
