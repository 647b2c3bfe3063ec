package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// cliRun runs the command line args in this process.
func cliRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// Contract N1: every command has its own help: asked for with -h, -help
// or help CMD, it goes to stdout with exit 0, starts with the command's
// usage and lists its flags, and is not the whole help.
func TestN1_HelpPerCommand(t *testing.T) {
	for _, c := range commands() {
		want := "usage: node " + c.uses[0] + "\n"
		var first string
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "-help"}, {"help", c.name}} {
			stdout, stderr, code := cliRun(t, args...)
			if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, want) || strings.Contains(stdout, "commands:") {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0 and %q first", args, code, stdout, stderr, want)
			}
			if hasFlags(c.flags()) && !strings.Contains(stdout, "\nflags:\n  -") {
				t.Errorf("%q lists no flags: %q", args, stdout)
			}
			if first == "" {
				first = stdout
			} else if stdout != first {
				t.Errorf("%q differs from %s -h", args, c.name)
			}
		}
	}
	stdout, stderr, code := cliRun(t, "help")
	if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "usage: node <command>") || !strings.Contains(stdout, "  tasks [-data DIR] [-json] SESSION\n") {
		t.Errorf("help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Contract N1: a flag error prints the error, the nearest flag and the
// command's short usage on stderr, nothing on stdout, exit 2.
func TestN1_FlagErrorPrintsTheCommandsShortUsage(t *testing.T) {
	stdout, stderr, code := cliRun(t, "run", "-dri", ".")
	want := "node run: flag provided but not defined: -dri\ndid you mean -dir?\nusage: node run [-dir DIR] [flags]\n"
	if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") > 8 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q first, short", code, stdout, stderr, want)
	}
	if _, stderr, _ := cliRun(t, "tasks", "-jsn", "x"); !strings.Contains(stderr, "did you mean -json?") {
		t.Errorf("tasks -jsn: stderr %q", stderr)
	}
	if _, stderr, code := cliRun(t, "run", "-max-depth", "x"); code != exitUsage || !strings.Contains(stderr, `invalid value "x" for flag -max-depth`) || strings.Contains(stderr, "did you mean") {
		t.Errorf("run -max-depth x: exit %d, stderr %q", code, stderr)
	}
}

// Contract N1: an unknown command or help topic suggests the nearest,
// exit 2, with the short usage on stderr; no command at all is exit 2.
func TestN1_UnknownCommandSuggestsTheNearest(t *testing.T) {
	for _, args := range [][]string{{"rn"}, {"help", "rn"}} {
		stdout, stderr, code := cliRun(t, args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, `node: unknown command "rn"`) || !strings.Contains(stderr, "Did you mean this?\n\trun\n") || !strings.Contains(stderr, "usage: node <command>") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if stdout, stderr, code := cliRun(t); code != exitUsage || stdout != "" || !strings.Contains(stderr, "usage: node <command>") {
		t.Errorf("no command: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Contract N1: version prints the module's path and version, and the
// commit or why there is none.
func TestN1_Version(t *testing.T) {
	stdout, stderr, code := cliRun(t, "version")
	if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "github.com/subactor/subactor ") || !strings.Contains(stdout, "\ncommit ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
