package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/persistence"
)

// checkOptions are the flags of check.
type checkOptions struct {
	data   dataPlace
	repair bool
}

func checkFlags(o *checkOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" check", flag.ContinueOnError)
	dataFlag(fs, &o.data)
	fs.BoolVar(&o.repair, "repair", false, "copy every session and task that reads back whole into a fresh "+storeFile+" and keep the damaged one beside it")
	return fs
}

// checkCommand runs the check subcommand: it verifies the store of the
// data directory (persistence.CheckBolt: both meta pages, bbolt's pages,
// then every session and task) and prints what is damaged, one
// "damaged: ..." line each, on stdout; with -repair it swaps in a fresh
// file holding everything that reads back whole (persistence.RepairBolt).
// A file that never held a commit has nothing to check. Exit 0 when
// nothing is damaged, or when -repair kept every session it found; 1
// otherwise.
func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o checkOptions
	fs := checkFlags(&o)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s check: unexpected argument %q\n", prog, fs.Arg(0))
		return exitUsage
	}
	data, err := dataDir(o.data)
	if err != nil {
		fmt.Fprintf(stderr, "%s check: %v\n", prog, err)
		return exitCode(err)
	}
	dir := data.dir
	switch {
	case data.store != "":
		fmt.Fprintf(stderr, "%s check: the sessions are in PostgreSQL (-store or $%s), which check does not check: it checks a data directory's %s\n", prog, envStore, storeFile)
		return exitUsage
	case dir == memoryData:
		fmt.Fprintf(stderr, "%s check: -data %s keeps nothing on disk: nothing to check\n", prog, memoryData)
		return exitUsage
	}
	path := filepath.Join(dir, storeFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no %s in %s: nothing to check\n", storeFile, dir)
		return exitOK
	}
	var (
		report persistence.BoltReport
		backup string
	)
	if o.repair {
		report, backup, err = persistence.RepairBolt(ctx, path)
	} else {
		report, err = persistence.CheckBolt(ctx, path)
	}
	if errors.Is(err, persistence.ErrEmpty) {
		fmt.Fprintf(stdout, "%s never held a commit (a node was killed while it created it): no sessions, nothing to check\n", path)
		return exitOK
	}
	if errors.Is(err, berrors.ErrTimeout) {
		err = storeError(dir, err) // says which node holds it
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s check: %v\n", prog, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: %d of the %d sessions found and %d tasks read back whole\n", path, report.Sessions, report.Found, report.Tasks)
	for _, p := range report.Pages {
		fmt.Fprintf(stdout, "damaged: bbolt's pages: %v\n", p)
	}
	for _, d := range report.Damaged {
		fmt.Fprintf(stdout, "damaged: %v\n", d)
	}
	switch {
	case report.OK():
		fmt.Fprintln(stdout, "no damage found")
		return exitOK
	case !o.repair:
		fmt.Fprintf(stdout, "run \"%s check -repair -data %s\" to copy every session and task that reads back whole into a fresh file\n", prog, dir)
		return exitFailed
	}
	fmt.Fprintf(stdout, "repaired: %s holds the %d sessions and %d tasks above; the damaged file is kept as %s\n", path, report.Sessions, report.Tasks, backup)
	if report.Sessions < report.Found || len(report.Damaged) > 0 {
		fmt.Fprintf(stdout, "could not be read, and stays only in %s: the %d damaged above\n", backup, len(report.Damaged))
		return exitFailed
	}
	return exitOK
}
