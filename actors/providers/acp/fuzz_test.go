package acp

// Fuzz targets for the agent's output, the hostile input this provider
// reads (K3). Their seeds run in every `go test`; `go test -fuzz=FuzzX`
// explores further. Seed corpora: the f.Add calls and testdata/fuzz.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// seedLines are frames a real agent sends, and some it should not.
var seedLines = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"Read","kind":"read","status":"pending"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"a","status":"pending","priority":"low"}]}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"hologram","content":{"type":"text","text":"x"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":"nope"}`,
	`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","kind":"edit"},"options":[{"kind":"allow_once","name":"ok","optionId":"a"}]}}`,
	`{"jsonrpc":"2.0","id":8,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/etc/passwd"}}`,
	`{"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{"sessionId":"s","path":"../x","content":"y"}}`,
	`{"jsonrpc":"2.0","id":10,"method":"terminal/create","params":{"sessionId":"s","command":"sh"}}`,
	`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`,
	`{"jsonrpc":"2.0","id":"x","result":null}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no"}}`,
	`{"jsonrpc":"2.0","method":"_ext/notice","params":{}}`,
	`not json at all`,
	`[1,2,3]`,
	`{"jsonrpc":"2.0"}`,
	"\x00\xff{",
}

// counting is an inbound that counts what it is handed, and passes it on
// to next when there is one.
type counting struct {
	updates, requests, cancels int
	next                       inbound
}

func (c *counting) update(n sdk.SessionNotification) {
	c.updates++
	if c.next != nil {
		c.next.update(n)
	}
}

func (c *counting) request(id json.RawMessage, method string, params json.RawMessage, line int) {
	c.requests++
	if c.next != nil {
		c.next.request(id, method, params, line)
	}
}

func (c *counting) cancelRequest(params json.RawMessage) {
	c.cancels++
	if c.next != nil {
		c.next.cancelRequest(params)
	}
}

// FuzzFrames drives the frame reader: whatever the agent writes, what
// reaches the SDK is only whole JSON-RPC responses, one a line; updates,
// requests and $/cancel_request are handed over (at most one per line),
// and nothing panics.
func FuzzFrames(f *testing.F) {
	f.Add([]byte(strings.Join(seedLines, "\n") + "\n"))
	for _, l := range seedLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &counting{}
		fr := newFrames(bytes.NewReader(data), in, slog.New(slog.DiscardHandler))
		fr.open()
		out, err := io.ReadAll(iotestOneByte(fr))
		if err != nil {
			t.Fatalf("error from a short stream: %v", err)
		}
		if len(out) > len(data)+1 {
			t.Fatalf("passed %d bytes of %d", len(out), len(data))
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			t.Fatalf("passed a line without its newline: %q", out)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			if len(out) == 0 {
				break
			}
			var env envelope
			if err := json.Unmarshal(line, &env); err != nil {
				t.Fatalf("passed a line that is not a JSON object: %q", line)
			}
			if len(env.ID) == 0 || env.Method != "" {
				t.Fatalf("passed a notification or a request: %q", line)
			}
		}
		if n, lines := in.updates+in.requests+in.cancels, bytes.Count(data, []byte("\n"))+1; n > lines {
			t.Fatalf("%d messages handed over from %d lines", n, lines)
		}
	})
}

// iotestOneByte reads r a byte at a time at first, then normally, so
// that both the SDK's small and large reads are exercised.
func iotestOneByte(r io.Reader) io.Reader { return &smallReads{r: r, left: 64} }

type smallReads struct {
	r    io.Reader
	left int
}

func (s *smallReads) Read(p []byte) (int, error) {
	if s.left > 0 && len(p) > 1 {
		s.left--
		p = p[:1]
	}
	return s.r.Read(p)
}

// TestK3_FramesRefuseAnOverlongLine checks the limit itself, which a
// fuzzer's small inputs never reach.
func TestK3_FramesRefuseAnOverlongLine(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	long := strings.Repeat("x", MaxLine+1) + "\n"
	fr := newFrames(strings.NewReader(line+long+line), &counting{}, slog.New(slog.DiscardHandler))
	fr.open()
	out, err := io.ReadAll(fr)
	if !errors.Is(err, ErrLineTooLong) || !errors.Is(fr.failure(), ErrLineTooLong) || string(out) != line {
		t.Fatalf("passed %d bytes, err %v", len(out), err)
	}
	exact := strings.Repeat(" ", MaxLine-len(line)) + line // MaxLine bytes and its newline
	fr = newFrames(strings.NewReader(exact), &counting{}, slog.New(slog.DiscardHandler))
	fr.open()
	if out, err := io.ReadAll(fr); err != nil || string(out) != exact {
		t.Fatalf("a line of exactly MaxLine bytes: %d bytes, err %v", len(out), err)
	}
}

// FuzzSessionUpdate drives the update fold: whatever update the agent
// sends, the kept answer stays within its cap, event texts within theirs,
// remembered tool calls within theirs, and every event names the run.
func FuzzSessionUpdate(f *testing.F) {
	for _, l := range seedLines {
		var env envelope
		if json.Unmarshal([]byte(l), &env) == nil && env.Method == "session/update" {
			f.Add([]byte(env.Params))
		}
	}
	f.Add([]byte(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("é", 100) + `"}}}`))
	f.Add([]byte(`{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}}`))
	f.Add([]byte(`{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":1,"size":2}}`))
	f.Add([]byte(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"","mimeType":"x"}}}`))
	const max = 64
	ts := newTurnState("run", max)
	f.Fuzz(func(t *testing.T, data []byte) {
		var n sdk.SessionNotification
		if json.Unmarshal(data, &n) != nil {
			return
		}
		for i := 0; i < 3; i++ { // repeated, so caps are reached
			for _, ev := range ts.apply(n.Update) {
				if ev.RunID != "run" || ev.Kind == "" || len(ev.Text) > maxEventText+len("…") {
					t.Fatalf("event %+v", ev)
				}
			}
		}
		if ts.out.Len() > max || !utf8.ValidString(ts.out.String()) && utf8.Valid(data) {
			t.Fatalf("answer of %d bytes (cap %d)", ts.out.Len(), max)
		}
		if len(ts.calls) > maxTracked {
			t.Fatalf("%d tool calls remembered", len(ts.calls))
		}
		if a := ts.answer(); ts.dropped > 0 && (len(a) != 2 || !strings.Contains(a[1].Text, "truncated")) {
			t.Fatalf("a cut answer that does not say so: %+v", a)
		}
	})
}

// FuzzAgentOutput feeds arbitrary output through the frames into a real
// SDK connection and our server and client, with files enabled in a
// scratch directory: every request gets one answer, nothing panics, the
// connection ends.
func FuzzAgentOutput(f *testing.F) {
	f.Add([]byte(strings.Join(seedLines, "\n")))
	f.Add([]byte(seedLines[7] + "\n" + seedLines[8] + "\n" + seedLines[9] + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		cl, err := newClient(Config{Permissions: ReadOnly, ReadFiles: true, WriteFiles: true, MaxOutput: 64}, dir, "run", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.close()
		cl.listen("s", false)
		var answers testkit.Buffer
		srv := newServer(cl, &answers, time.Minute, slog.New(slog.DiscardHandler))
		in := &counting{next: srv}
		fr := newFrames(bytes.NewReader(data), in, slog.New(slog.DiscardHandler))
		conn := sdk.NewClientSideConnection(unserved{}, srv.out, fr)
		conn.SetLogger(slog.New(slog.DiscardHandler))
		fr.open()
		select {
		case <-conn.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the connection did not end with its input")
		}
		srv.close()
		out := answers.String()
		if n := strings.Count(out, "\n"); n != in.requests {
			t.Fatalf("%d answers to %d requests:\n%s", n, in.requests, out)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("an answer that is not JSON: %q", line)
			}
		}
		if got := subagent.TextOf(cl.answer()); len(got) > 64+200 {
			t.Fatalf("answer of %d bytes", len(got))
		}
	})
}

// FuzzConfigFile feeds the -config decoder hostile bytes (K3): it never
// panics, every refusal wraps ErrConfig, and what it accepts holds what
// Start relies on: a command, an absolute directory when one is given, a
// positive start limit.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		`{"agent_servers": {"a": {"command": "agent", "args": ["--acp"], "env": {"K": "v"}}}}`,
		`{"agent_servers": {"a": {"command": "agent", "dir": "/tmp", "permissions": "allow-all", "read_files": true, "start_timeout": "90s"}}}`,
		`{"agent_servers": {"a": {"command": "agent", "COMMAND": "other"}}}`,
		`{"agent_servers": {"a": {"command": "x", "command": "y"}}}`,
		`{"agent_servers": {"a": null}}`,
		`{"agent_servers": {"a": {"command": "x", "start_timeout": "-1s"}}}`,
		`{"agent_servers": {}} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, err := ParseConfigFile(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("refusal %v does not wrap ErrConfig", err)
			}
			return
		}
		for name, c := range cfgs {
			switch {
			case c.Command == "":
				t.Fatalf("server %q accepted without a command", name)
			case c.Dir != "" && !filepath.IsAbs(c.Dir):
				t.Fatalf("server %q accepted with a relative dir %q", name, c.Dir)
			case c.StartTimeout < 0:
				t.Fatalf("server %q accepted with start limit %v", name, c.StartTimeout)
			}
		}
	})
}
