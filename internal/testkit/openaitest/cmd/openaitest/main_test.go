package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServesScriptOnLoopbackAndRecords(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	record := filepath.Join(dir, "record.jsonl")
	if err := os.WriteFile(script, []byte(`{"models":["qwen3-coder"],"steps":[{"text":"hello","chunkSize":2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	defer cancel()
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-script", script, "-record", record}, stdout)
		stdout.Close()
		done <- err
	}()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	base := testkit.Recv(t, lines, "the printed URL")
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Fatalf("printed %q", base)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"qwen3-coder"`) {
		t.Errorf("models %s", body)
	}

	resp, err = client.Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"qwen3-coder","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(body), "data: "); n < 5 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream of %d events: %s", n, body)
	}
	client.CloseIdleConnections()

	cancel()
	if err := testkit.Recv(t, done, "run to return"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var r openaitest.Request
	if err := json.Unmarshal(data, &r); err != nil || r.Model != "qwen3-coder" || !r.Stream || r.Messages[0].Text() != "hi" {
		t.Errorf("record %s: %v", data, err)
	}
}

func TestRequiresScript(t *testing.T) {
	if err := run(t.Context(), nil, io.Discard); err == nil {
		t.Error("ran without a script")
	}
}
