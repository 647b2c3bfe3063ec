package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/subagent"
)

// hostile is text a child or an endpoint could send to take over the
// user's terminal: a clipboard write (OSC 52), a window title (OSC 0, ST
// terminated), clear-screen and cursor-home, a bell, colours, a full
// reset, a C1 CSI and a C1 DCS string, a backspace and a lone CR. Its
// words ("mark one" ... "mark five") must stay readable.
const hostile = "mark one\x1b]52;c;ZXZpbA==\x07 mark two\x1b]0;pwned\x1b\\ \x1b[2J\x1b[Hmark three\x07 " +
	"\x1b[31mmark four\x1b[0m\x1bc \u009b2J\u0090qdcs\u009c\bmark five\r"

// marks are hostile's words.
var marks = []string{"mark one", "mark two", "mark three", "mark four", "mark five"}

// hostileTurn is the fake agent's turn for a prompt starting "hostile":
// the hostile text as a plan entry, a tool call's title (the call fails),
// and the answer. With "hostile exit" it writes the text to its stderr
// and dies during the turn instead.
func hostileTurn(prompt string, update func(sdk.SessionUpdate)) (sdk.PromptResponse, error) {
	update(sdk.UpdatePlan(sdk.PlanEntry{Content: hostile, Status: sdk.PlanEntryStatusInProgress, Priority: sdk.PlanEntryPriorityHigh}))
	update(sdk.StartToolCall("evil-1", hostile, sdk.WithStartKind(sdk.ToolKindRead)))
	update(sdk.UpdateToolCall("evil-1", sdk.WithUpdateStatus(sdk.ToolCallStatusFailed)))
	if prompt == "hostile exit" {
		fmt.Fprint(os.Stderr, hostile)
		os.Exit(3)
	}
	update(sdk.UpdateAgentMessageText(hostile + "\nsecond line\tafter a tab"))
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

// noEscapes fails t when out holds a control character other than newline
// and tab (C1 controls and DEL included) or is not UTF-8.
func noEscapes(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not UTF-8: %q", what, out)
	}
	for i, r := range out {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f || isC1(r) {
			t.Errorf("%s has control character %U at %d: %q", what, r, i, out)
			return
		}
	}
}

// hasMarks fails t unless out shows every word of hostile.
func hasMarks(t *testing.T, what, out string) {
	t.Helper()
	for _, m := range marks {
		if !strings.Contains(out, m) {
			t.Errorf("%s lost %q: %q", what, m, out)
		}
	}
}

// Contract K3 (item 5 of issue 18): clean removes terminal escapes whole
// and keeps the text around them, newlines and tabs.
func TestK3_CleanRemovesTerminalEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\twith a tab":                   "plain text\n\twith a tab",
		"copy\x1b]52;c;ZXZpbA==\x07 done":            "copy done",
		"title\x1b]2;pwned\x1b\\ done":               "title done",
		"title\u009d0;pwned\u009c done":              "title done",
		"\x1b[2J\x1b[Hcleared":                       "cleared",
		"\x1b[38;2;255;0;0mred\x1b[0m":               "red",
		"\u009b31mred":                               "red",
		"bell\x07":                                   "bell ",
		"crlf\r\nnext\rover":                         "crlf\nnext over",
		"reset\x1bc and save\x1b7":                   "reset and save",
		"charset\x1b(B ok":                           "charset ok",
		"dcs\x1bP1$r0m\x1b\\ ok":                     "dcs ok",
		"apc\x1b_payload\x07 ok":                     "apc ok",
		"open\x1b]52;c;never terminated":             "open52;c;never terminated",
		"broken csi\x1b[12\nnext":                    "broken csi\nnext",
		"lone esc\x1b":                               "lone esc",
		"bad utf8 \xff\xfe and \x9b2J":               "bad utf8 \ufffd\ufffd and \ufffd2J",
		"del\x7f nul\x00":                            "del  nul ",
		"ünïcödé ✓ 日本":                               "ünïcödé ✓ 日本",
		"next line \u0085 and index \x1bD":           "next line  and index ",
		"st alone \u009c and \x1b\\":                 "st alone  and ",
		"osc in csi \x1b[1;\x1b]0;t\x07 after":       "osc in csi  after",
		"esc then newline \x1b\nline":                "esc then newline \nline",
		"unterminated dcs \u0090q text \x1b[1m bold": "unterminated dcs q text  bold",
	} {
		got := clean(in)
		if got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
		noEscapes(t, fmt.Sprintf("clean(%q)", in), got)
	}
	if got := clean(hostile); got != "mark one mark two mark three  mark four  mark five " {
		t.Errorf("clean(hostile) = %q", got)
	}
}

// FuzzClean checks clean on any input (K3): no control character but
// newline and tab is left, the result is UTF-8, cleaning it again changes
// nothing, and text that needs no cleaning comes back as it was.
func FuzzClean(f *testing.F) {
	for _, s := range []string{hostile, "plain", "\x1b[", "\x1b]", "\u009b", "\xc2", "a\r\n", "\x1b\x1b[1m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := clean(in)
		noEscapes(t, "clean's output", out)
		if again := clean(out); again != out {
			t.Fatalf("clean is not idempotent on %q: %q, then %q", in, out, again)
		}
		if !needsCleaning(in) && out != in {
			t.Fatalf("clean changed clean text %q into %q", in, out)
		}
	})
}

// Contract K3: the live view shows a child's title, plan, streamed text,
// failed call and last words without any of their escapes: the screen
// (which fails on any sequence the view does not use itself) sees only
// text.
func TestK3_LiveViewPrintsNoEscapeFromAChild(t *testing.T) {
	scr := &screen{t: t}
	l := newLive(scr)
	l.every = 0
	const id = "evil0000-1"
	for _, ev := range []subagent.Event{
		subagent.RunStarted{RunID: id},
		subagent.RunProgress{RunID: id, Kind: subagent.ToolCallStarted, Step: 1, Text: hostile},
		subagent.RunProgress{RunID: id, Kind: subagent.ToolCallFinished, Step: 1, Text: hostile, IsError: true},
		subagent.RunProgress{RunID: id, Kind: "acp-plan", Step: 1, Text: hostile},
		subagent.RunProgress{RunID: id, Kind: subagent.ModelCallStarted, Step: 2},
		subagent.RunProgress{RunID: id, Kind: subagent.TextDelta, Step: 2, Text: hostile[:20]},
		subagent.RunProgress{RunID: id, Kind: subagent.TextDelta, Step: 2, Text: hostile[20:]},
		subagent.RunEnded{RunID: id, StopReason: subagent.Completed, LastAssistantMessage: hostile},
	} {
		if err := l.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	scr.want(t, "a hostile child", `child evil0000-1 ended: completed in \S+: mark one mark two mark three  mark four  mark five `)
}

// Contract K3 (item 5 of issue 18): delegate's output, piped, carries none
// of the escapes an agent puts in its plan, a tool call's title and its
// answer, and none of those it writes to its stderr before it dies; the
// words around them stay, and the answer keeps its newline and tab.
func TestK3_DelegatePrintsNoEscapeFromTheAgent(t *testing.T) {
	stdout, stderr, code := node(t, t.TempDir(), "delegate", "-config", fakeConfig(t), "hostile")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	noEscapes(t, "stdout", stdout)
	noEscapes(t, "stderr", stderr)
	_, answer, _ := strings.Cut(stdout, "\n\n")
	hasMarks(t, "the answer", answer)
	if !strings.HasSuffix(answer, "\nsecond line\tafter a tab\n") {
		t.Errorf("the answer lost its newline or tab: %q", answer)
	}
	for _, line := range []string{"step 1 plan", "step 1 tool", "step 1 failed"} {
		if !strings.Contains(stderr, line+" ") {
			t.Errorf("no %q line in the progress\n%s", line, stderr)
		}
	}

	stdout, stderr, code = node(t, t.TempDir(), "delegate", "-config", fakeConfig(t), "hostile exit")
	if code != exitFailed || !strings.Contains(stderr, "stderr: ") {
		t.Fatalf("an agent that died: exit %d, stderr:\n%s", code, stderr)
	}
	noEscapes(t, "stdout", stdout)
	noEscapes(t, "stderr", stderr)
	hasMarks(t, "the agent's stderr tail", stderr)
}

// Contract K3 (item 5 of issue 18): an endpoint's error text and its
// answer reach the user's output without their escapes.
func TestK3_EndpointTextIsPrintedWithoutEscapes(t *testing.T) {
	msg, err := json.Marshal(map[string]any{"error": map[string]string{"message": "refused: " + hostile}})
	if err != nil {
		t.Fatal(err)
	}
	for name, step := range map[string]openaitest.Step{
		"error":      {Status: 400, Body: string(msg)},
		"plain body": {Status: 400, Body: "refused: " + hostile},
		"reply":      openaitest.Reply(hostile),
	} {
		srv := openaitest.NewServer(t, step)
		stdout, stderr, code := nodeEnv(t, t.TempDir(), []string{envDataDir + "=" + t.TempDir(), "OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=x", "OPENAI_MODEL=" + openaitest.DefaultModel}, "run", "-max-depth", "0")
		noEscapes(t, name+": stdout", stdout)
		noEscapes(t, name+": stderr", stderr)
		switch name {
		case "error", "plain body":
			if code != exitFailed || !strings.Contains(stderr, "refused: mark one") {
				t.Errorf("an endpoint's error: exit %d, stderr %q", code, stderr)
			}
			hasMarks(t, "the endpoint's error", stderr)
		case "reply":
			if code != 0 {
				t.Errorf("an endpoint's answer: exit %d, stderr %q", code, stderr)
			}
			hasMarks(t, "the endpoint's answer", stdout)
		}
	}
}

// Contract K3 (item 5 of issue 18): -json output carries no raw control
// character either, DEL and the C1 controls included, yet every line is
// JSON that decodes to the agent's text exactly as it came.
func TestK3_JSONOutputEscapesEveryControlCharacter(t *testing.T) {
	stdout, stderr, code := node(t, t.TempDir(), "delegate", "-json", "-config", fakeConfig(t), "hostile")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	noEscapes(t, "stdout", stdout)
	want := hostile + "\nsecond line\tafter a tab"
	var found bool
	for line := range strings.Lines(stdout) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		found = found || strings.Contains(line, `\u009b`) && containsValue(v, want)
	}
	if !found {
		t.Errorf("no line carries the answer, escaped, as the agent sent it:\n%s", stdout)
	}

	var b strings.Builder
	if err := newEncoder(&b).Encode("del\x7f c1\u0085\u009f nbsp\u00a0"); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != `"del\u007f c1\u0085\u009f nbsp`+"\u00a0\"\n" {
		t.Errorf("encoded %q", got)
	}
}

// containsValue says whether s is one of v's values, at any depth.
func containsValue(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return v == s
	case map[string]any:
		for _, e := range v {
			if containsValue(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsValue(e, s) {
				return true
			}
		}
	}
	return false
}
