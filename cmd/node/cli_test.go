package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/ids"
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

// Contract N1: the ids progress shows tell children apart: ids minted in
// the same millisecond (the same time-ordered head) have distinct short
// forms.
func TestN1_ShortIDsAreUnique(t *testing.T) {
	seen := map[string]string{}
	for range 1000 {
		id := ids.New()
		s := short(id)
		if len(s) != shortID || !strings.HasSuffix(id, s) {
			t.Fatalf("short(%s) = %q", id, s)
		}
		if other, ok := seen[s]; ok {
			t.Fatalf("%s and %s both show as %s", other, id, s)
		}
		seen[s] = id
	}
}

// Contract N1: sessions and tasks print one JSON object a line with
// -json, and an unknown session id fails the same way in both: exit 1,
// the same error on stderr, nothing on stdout.
func TestN1_ListCommandsTakeJSONAndRefuseUnknownSessions(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	t.Setenv(envDataDir, data)
	stdout, stderr, code := cliRun(t, "run", "-quiet", "-dir", root)
	if code != exitOK {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	top, _ := cutSession(t, stdout)

	stdout, stderr, code = cliRun(t, "sessions", "-json", top)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != exitOK || stderr != "" || len(lines) < 3 {
		t.Fatalf("sessions -json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for i, line := range lines {
		var s jsonSession
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.State != "completed" || s.Turns == 0 || (i == 0) != (s.Depth == 0) || i == 0 && (s.ID != top || s.Prompt != "survey "+root) {
			t.Fatalf("sessions -json line %d %q (%v)", i, line, err)
		}
	}
	if stdout, stderr, code = cliRun(t, "tasks", "-json", top); code != exitOK || stderr != "" {
		t.Fatalf("tasks -json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, cmd := range []string{"sessions", "tasks"} {
		stdout, stderr, code := cliRun(t, cmd, "nope")
		want := fmt.Sprintf("node %s: no such session %q in data directory %q\n", cmd, "nope", data)
		if code != exitFailed || stdout != "" || stderr != want {
			t.Errorf("%s nope: exit %d, stdout %q, stderr %q; want exit 1 and %q", cmd, code, stdout, stderr, want)
		}
	}
}
