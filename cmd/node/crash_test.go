package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/cmd/node/internal/crashhook"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// crashFolders is how many sub-folders the crash test's tree has: one
// child each, every child taking five model calls (eleven writes), so
// that a run makes about eighty acknowledged writes, most of them while
// children are mid-turn.
const crashFolders = 7

// writeCrashTree creates the crash test's tree: crashFolders sub-folders,
// each three deep with a file per level, and a file at the top.
func writeCrashTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"top.txt": "top\n"}
	for i := range crashFolders {
		d := fmt.Sprintf("f%d", i)
		files[d+"/a.txt"] = strings.Repeat("a\n", i+1)
		files[d+"/s/b.txt"] = "b\n"
		files[d+"/s/t/c.txt"] = "c"
	}
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readAcks reads the appends file a node wrote under crashhook.EnvAppendsFile and
// checks that its writes are numbered 1, 2, 3...
func readAcks(t *testing.T, path string) []crashhook.AckedWrite {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []crashhook.AckedWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var w crashhook.AckedWrite
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("appends file line %d: %v", len(out)+1, err)
		}
		if w.N != len(out)+1 {
			t.Fatalf("appends file line %d is write %d", len(out)+1, w.N)
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// killPoints picks k distinct points in 1..last from a fixed seed, the
// first and the last among them, in increasing order.
func killPoints(last, k int) []int {
	r := rand.New(rand.NewPCG(6, 2026))
	points := []int{1, last}
	for _, p := range r.Perm(last - 2)[:k-2] {
		points = append(points, p+2)
	}
	slices.Sort(points)
	return points
}

// Contract S6 with real processes: a node SIGKILLed right after its Nth
// acknowledged write (crashhook.EnvKillAfter, in a node built with the
// subactortest tag),
// for 50 seeded N spread over a whole run's writes, most of them while
// children are mid-turn, leaves a store that opens; every log loads; every
// acknowledged record is in its log exactly once, at the sequence number
// it was acknowledged under, with its kind and data, and nothing sits
// between acknowledged records (only the writes in flight at the kill may
// follow them); node sessions lists the killed session as it stood; and
// node run -continue resumes it in the same session, its earlier records
// untouched. Contract S9: the continued run then answers as a clean run
// does every time, with the same children making the same model calls
// (checkContinues): no completed child runs again, and none is left
// running or interrupted, and node sessions lists every one completed
// (checkListedContinued, on a few kills). The kills leave delegations without results of
// each kind S9 names (a child completed, running, never started), and
// the test fails if one kind never occurs.
func TestS6_S9_SIGKILLAtFiftyAppendPointsLosesNothingAndContinueFinishes(t *testing.T) {
	checkKills(t, nil)
}

// Contracts S6 and S9 as above, with the model behind an OpenAI-compatible
// server over loopback (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL) in
// place of the embedded one: the server answers each request as the
// scripted model does from the conversation the request carries
// (scriptedResponder), so that a killed run's continuation is answered
// from wherever the kill left it, through model/openai's real HTTP and
// server-sent events.
func TestS6_S9_SIGKILLAtFiftyAppendPointsWithAnOpenAIServerLosesNothingAndContinueFinishes(t *testing.T) {
	srv := openaitest.NewResponder(t, scriptedResponder(t))
	checkKills(t, []string{envBaseURL + "=" + srv.URL, envAPIKey + "=sk-crash", envModel + "=" + openaitest.DefaultModel})
	// Every model call went to the server, streamed.
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the server was never asked: the runs took another model")
	}
	cut := 0
	for i, r := range reqs {
		if r.Cancelled {
			cut++ // perhaps before its body was whole
			continue
		}
		if r.Model != openaitest.DefaultModel || r.Authorization != "Bearer sk-crash" || !r.Stream {
			t.Fatalf("request %d: model %q, authorization %q, stream %v; want %q, the key, streamed", i, r.Model, r.Authorization, r.Stream, openaitest.DefaultModel)
		}
	}
	t.Logf("%d chat requests, %d of them cut off by a kill", len(reqs), cut)
}

// checkKills is the S6 and S9 crash test with the model env selects (the
// embedded one when env is empty).
func checkKills(t *testing.T, env []string) {
	root := writeCrashTree(t)
	want, _ := expected(t, root, ".")

	// A whole run, counting its writes. The count varies a little from
	// run to run: tool results that arrive while an append is in flight
	// share the next one (group commit), so the kill points stop short of
	// the end by more than a turn's results can merge.
	data, acks := t.TempDir(), filepath.Join(t.TempDir(), "acks")
	stdout, stderr, code := nodeBin(t, hooksBin, root, append([]string{envDataDir + "=" + data, crashhook.EnvAppendsFile + "=" + acks}, env...), "run", "-quiet")
	if code != 0 {
		t.Fatalf("counting run: exit %d, stderr %s", code, stderr)
	}
	if _, answer := cutSession(t, stdout); answer != want+"\n" {
		t.Fatalf("counting run answered\n%s\nwant\n%s", answer, want)
	}
	top, _ := cutSession(t, stdout)
	clean := childCalls(t, openData(t, data), top)
	total := len(readAcks(t, acks))
	const points = 50
	if total < points+20 {
		t.Fatalf("a run makes %d writes, too few to spread %d kill points over: the fixture changed", total, points)
	}
	kills := killPoints(total-total/8, points)
	t.Logf("kill points, of %d acknowledged writes per run: %v", total, kills)

	var interrupted, tails, relisted int
	var cases [3]int // delegations without a result: child completed, running, never started
	for _, n := range kills {
		t.Run(fmt.Sprint("kill-after-", n), func(t *testing.T) {
			c := crashAt(t, root, env, n)
			c.checkListed(t, root)
			kinds := c.unstored(t)
			// A few continuations that resume or start children are
			// listed again (a node process each).
			if (kinds[1] > 0 || kinds[2] > 0) && relisted < 3 {
				relisted++
				c.relist = true
			}
			c.checkContinues(t, want, clean)
			if c.pending != nil {
				interrupted++
			}
			tails += c.unacked
			for i, k := range kinds {
				cases[i] += k
			}
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d kills left tool calls without results; %d records were stored but not yet acknowledged at a kill", interrupted, tails)
	t.Logf("delegations left without a result: %d of a completed child, %d of a running one, %d of one never started", cases[0], cases[1], cases[2])
	if !t.Failed() && relisted == 0 {
		t.Fatal("no continuation resumed or started a child: none was listed again")
	}
	if !t.Failed() && (cases[0] == 0 || cases[1] == 0 || cases[2] == 0) {
		t.Fatalf("the kills left no delegation of some kind without a result (%v): the three cases of S9 are not all tried", cases)
	}
}

// scriptedResponder answers a chat request as the embedded scripted model
// answers the same conversation. The system prompt is left out: the
// scripted model reads only the messages and tools. The chat API has no
// error flag on a tool result, so every result reads as a success.
func scriptedResponder(t *testing.T) func(openaitest.Request) openaitest.Step {
	model := scripted.New()
	return func(r openaitest.Request) openaitest.Step {
		req := agent.Request{MaxTokens: r.MaxTokens}
		for _, m := range r.Messages {
			msg := agent.Message{Role: agent.Role(m.Role), ToolCallID: m.ToolCallID}
			if text := m.Text(); text != "" {
				msg.Content = []subagent.ContentBlock{subagent.Text(text)}
			}
			for _, c := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Function.Name, Args: json.RawMessage(c.Function.Arguments)})
			}
			if m.Role != "system" {
				req.Messages = append(req.Messages, msg)
			}
		}
		for _, tl := range r.Tools {
			req.Tools = append(req.Tools, agent.ToolSpec{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
		}
		resp, err := model.Generate(context.Background(), req)
		if err != nil {
			t.Errorf("scripted model: %v", err)
			return openaitest.Status(http.StatusInternalServerError, "")
		}
		step := openaitest.Reply(subagent.TextOf(resp.Message.Content))
		for _, c := range resp.Message.ToolCalls {
			step.ToolCalls = append(step.ToolCalls, openaitest.ToolCall{ID: c.ID, Name: c.Name, Args: string(c.Args)})
		}
		if resp.StopReason == subagent.MaxTokens {
			step.Finish = "length"
		}
		step.Usage = &openaitest.Usage{PromptTokens: resp.Usage.InputTokens, CompletionTokens: resp.Usage.OutputTokens}
		return step
	}
}

// unstored counts the delegations the kill left without a result by what
// their children were at the kill: completed, running, never started.
func (c *crash) unstored(t *testing.T) (cases [3]int) {
	t.Helper()
	stored := map[string]bool{}
	for _, m := range messages(t, c.topLog) {
		var a struct {
			SessionID string `json:"sessionId"`
		}
		if m.Role == agent.ToolRole && json.Unmarshal([]byte(subagent.TextOf(m.Content)), &a) == nil {
			stored[a.SessionID] = true
		}
	}
	for id, log := range c.logs {
		switch {
		case stored[id]:
		case completed(t, log):
			cases[0]++
		default:
			cases[1]++
		}
	}
	cases[2] = len(slices.DeleteFunc(slices.Clone(c.pending), func(n string) bool { return n != "subagent" })) - cases[0] - cases[1]
	return cases
}

// crash is what a killed node left.
type crash struct {
	n    int
	data string
	// env selects the model, for the continuation as for the killed run.
	env []string
	top string
	// topLog is the top-level session's log after the kill.
	topLog []persistence.Entry
	// stopped says whether the top-level session's log ends with a stop
	// record after its last turn.
	stopped bool
	// pending are the names of the tool calls of the top-level agent's
	// last turn that have no results.
	pending []string
	// children is how many child sessions the top-level one has.
	children int
	// logs are the logs of every session but the top-level one.
	logs map[string][]persistence.Entry
	// unacked counts records stored but not acknowledged.
	unacked int
	// relist has checkContinues list the continued session again
	// (checkListedContinued).
	relist bool
}

// crashAt runs a node that kills itself after its nth acknowledged write
// and checks the store it leaves against the writes it acknowledged.
func crashAt(t *testing.T, root string, env []string, n int) *crash {
	t.Helper()
	c := &crash{n: n, data: t.TempDir(), env: env, logs: map[string][]persistence.Entry{}}
	acks := filepath.Join(t.TempDir(), "acks")
	cmd := exec.CommandContext(testkit.Ctx(t), hooksBin, "run")
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), envDataDir+"="+c.data, crashhook.EnvAppendsFile+"="+acks, fmt.Sprint(crashhook.EnvKillAfter, "=", n)), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // the exit status says how it ended
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the node was not killed after write %d: %v, stderr %s", n, cmd.ProcessState, stderr.String())
	}
	written := readAcks(t, acks)
	if len(written) != n {
		t.Fatalf("%d writes acknowledged before the kill, want %d", len(written), n)
	}
	// The first write is the top-level session's creation, with its
	// node/survey record.
	if rs := written[0].Records; len(rs) != 1 || rs[0].Kind != kindSurvey {
		t.Fatalf("the first write is %+v, want the top-level session's creation", written[0])
	}
	c.top = written[0].Session
	acked := map[string][]crashhook.AckedEntry{}
	for _, w := range written {
		acked[w.Session] = append(acked[w.Session], w.Records...)
	}

	b := openData(t, c.data)
	ctx := testkit.Ctx(t)
	infos, err := b.Sessions(ctx)
	if err != nil {
		t.Fatalf("list sessions after the kill: %v", err)
	}
	for _, info := range infos {
		id := info.Header.SessionID
		_, entries, err := b.LoadFrom(ctx, id, 0)
		if err != nil {
			t.Fatalf("load session %s after the kill: %v", id, err)
		}
		c.unacked += checkAcked(t, id, entries, acked[id])
		delete(acked, id)
		if id == c.top {
			c.topLog = entries
		} else {
			c.logs[id] = entries
		}
	}
	for id := range acked {
		t.Fatalf("session %s was acknowledged but is not in the store", id)
	}
	children, err := b.Children(ctx, c.top)
	if err != nil {
		t.Fatal(err)
	}
	c.children = len(children)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c.stopped, c.pending = state(t, c.topLog)
	return c
}

// checkAcked checks a session's log against the records acknowledged in
// it: each at its sequence number with its kind and data, none twice, and
// none unacknowledged before the last acknowledged one (a session has one
// writer, so only the write in flight at the kill may follow). It returns
// how many records follow.
func checkAcked(t *testing.T, id string, entries []persistence.Entry, acked []crashhook.AckedEntry) (unacked int) {
	t.Helper()
	bySeq := map[uint64]persistence.Entry{}
	seen := map[string]uint64{}
	for _, e := range entries {
		bySeq[e.Seq] = e
		key := e.Kind + " " + crashhook.Digest(e.Data)
		if first, dup := seen[key]; dup {
			t.Fatalf("session %s: records %d and %d are the same %s record", id, first, e.Seq, e.Kind)
		}
		seen[key] = e.Seq
	}
	var last uint64
	for _, a := range acked {
		e, ok := bySeq[a.Seq]
		switch {
		case !ok:
			t.Fatalf("session %s: acknowledged record %d (%s) is missing", id, a.Seq, a.Kind)
		case e.Kind != a.Kind || crashhook.Digest(e.Data) != a.SHA256:
			t.Fatalf("session %s: record %d is %s %s, acknowledged as %s %s", id, a.Seq, e.Kind, crashhook.Digest(e.Data), a.Kind, a.SHA256)
		}
		last = max(last, a.Seq)
	}
	for _, e := range entries {
		if e.Seq > last {
			unacked++
		}
	}
	if int(last) != len(acked) || len(entries) != len(acked)+unacked {
		t.Fatalf("session %s: %d records, %d acknowledged up to record %d: records in between were never acknowledged", id, len(entries), len(acked), last)
	}
	return unacked
}

// state reads how a log stands: whether a stop record follows its last
// turn, and the tool calls of its last assistant turn without results.
func state(t *testing.T, log []persistence.Entry) (stopped bool, pending []string) {
	t.Helper()
	answered := map[string]bool{}
	var calls []agent.ToolCall
	for _, m := range messages(t, log) {
		switch m.Role {
		case agent.Assistant:
			calls = m.ToolCalls
		case agent.ToolRole:
			answered[m.ToolCallID] = true
		}
	}
	for _, c := range calls {
		if !answered[c.ID] {
			pending = append(pending, c.Name)
		}
	}
	for _, e := range log {
		switch e.Kind {
		case persistence.KindMessage:
			stopped = false
		case agentlog.KindStop:
			stopped = true
		}
	}
	return stopped, pending
}

// checkListed checks that node sessions lists the killed session as its
// log stands, with every child it had.
func (c *crash) checkListed(t *testing.T, root string) {
	t.Helper()
	stdout, stderr, code := nodeEnv(t, root, withData(c.data), "sessions", c.top)
	if code != 0 {
		t.Fatalf("sessions after the kill: exit %d, stderr %s", code, stderr)
	}
	lines := parseListing(t, stdout)
	wantState := stateInterrupted
	if c.stopped {
		wantState = "completed"
	}
	top := listedLine{id: c.top, turns: len(messages(t, c.topLog)), state: wantState}
	if top.turns > 0 {
		top.prompt = "survey ."
	}
	if len(lines) == 0 || lines[0] != top {
		t.Fatalf("sessions lists %+v first, want %+v", lines, top)
	}
	if got := len(lines) - 1; got != c.children {
		t.Fatalf("sessions lists %d children, the store has %d:\n%s", got, c.children, stdout)
	}
}

// checkListedContinued checks that node sessions shows the continued
// session and every child it has as completed (issue 17: the children of
// a continued session show their true state; none stays
// running/interrupted).
func (c *crash) checkListedContinued(t *testing.T, root string) {
	t.Helper()
	stdout, stderr, code := nodeEnv(t, root, withData(c.data), "sessions", c.top)
	if code != 0 {
		t.Fatalf("sessions after the continue: exit %d, stderr %s", code, stderr)
	}
	lines := parseListing(t, stdout)
	if len(lines) < 2 || lines[0].id != c.top {
		t.Fatalf("sessions after the continue lists\n%s", stdout)
	}
	for _, l := range lines {
		if l.state != "completed" {
			t.Fatalf("sessions after the continue lists %s %s:\n%s", l.id, l.state, stdout)
		}
	}
}

// checkContinues continues the killed session and checks that it resumes
// in place (its earlier records stay as they were, it gains turns and a
// completed stop) and finishes the job as a clean run does (S9): the same
// answer, whatever the kill interrupted, and the same children making the
// same model calls. A child that had completed is not run again (its log
// is as the kill left it), one that was running goes on from its own log,
// and none is left running or interrupted.
func (c *crash) checkContinues(t *testing.T, want string, clean map[string]int) {
	t.Helper()
	stdout, stderr, code := nodeEnv(t, t.TempDir(), append(withData(c.data), c.env...), "run", "-quiet", "-continue", c.top)
	if c.stopped {
		// Killed after the run completed: there is nothing to go on
		// with, and nothing is appended.
		if code != 0 || stdout != "" || !strings.Contains(stderr, "the session is complete") {
			t.Fatalf("continue of a complete session: exit %d, stdout %q, stderr %s", code, stdout, stderr)
		}
		if after := logOf(t, c.data, c.top); len(after) != len(c.topLog) {
			t.Fatalf("continuing a complete session appended %d records", len(after)-len(c.topLog))
		}
		return
	}
	if code != 0 {
		t.Fatalf("continue after the kill: exit %d, stderr %s", code, stderr)
	}
	id, answer := cutSession(t, stdout)
	if id != c.top {
		t.Fatalf("continued session %s, want %s", id, c.top)
	}
	if answer = strings.TrimSuffix(answer, "\n"); answer != want {
		t.Fatalf("continued answer\n%s\nwant the clean run's\n%s", answer, want)
	}
	if c.relist {
		c.checkListedContinued(t, t.TempDir())
	}
	b := openData(t, c.data)
	_, after, err := b.LoadFrom(testkit.Ctx(t), c.top, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, c.topLog, after)
	if !completed(t, after) {
		t.Fatalf("the continued log ends with %s %s, want a completed stop", after[len(after)-1].Kind, after[len(after)-1].Data)
	}
	if got := childCalls(t, b, c.top); !maps.Equal(got, clean) {
		t.Fatalf("model calls per child after continuing: %v; a clean run's: %v", got, clean)
	}
	for id, before := range c.logs {
		_, now, err := b.LoadFrom(testkit.Ctx(t), id, 0)
		if err != nil {
			t.Fatalf("child %s: %v", id, err)
		}
		if completed(t, before) {
			if len(now) != len(before) {
				t.Fatalf("child %s had completed at the kill, yet its log grew from %d to %d records: it ran again", id, len(before), len(now))
			}
			continue
		}
		checkPrefix(t, before, now) // resumed from its log, not restarted
	}
}

// completed says whether a log's last activation ended with a completed
// stop after a final answer.
func completed(t *testing.T, log []persistence.Entry) bool {
	t.Helper()
	stopped, _ := state(t, log)
	if !stopped {
		return false
	}
	var stop agentlog.Stop
	return json.Unmarshal(log[len(log)-1].Data, &stop) == nil && stop.StopReason == subagent.Completed
}

// childCalls counts the model calls of each child of top, by its prompt,
// as their logs record them (an assistant turn each), and fails unless
// every child completed.
func childCalls(t *testing.T, b persistence.Backend, top string) map[string]int {
	t.Helper()
	ctx := testkit.Ctx(t)
	children, err := b.Children(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, ch := range children {
		id := ch.Header.SessionID
		_, log, err := b.LoadFrom(ctx, id, 0)
		if err != nil {
			t.Fatalf("child %s: %v", id, err)
		}
		if !completed(t, log) {
			t.Fatalf("child %s did not complete: its log ends with %s %s", id, log[len(log)-1].Kind, log[len(log)-1].Data)
		}
		msgs := messages(t, log)
		prompt := subagent.TextOf(msgs[0].Content)
		if _, dup := calls[prompt]; dup {
			t.Fatalf("two children were given %q", prompt)
		}
		for _, m := range msgs {
			if m.Role == agent.Assistant {
				calls[prompt]++
			}
		}
	}
	return calls
}

// Contract S6's hooks stay out of the product (issue 19): the node as
// users get it, built without the subactortest tag, ignores the hooks'
// variables (the run completes and no appends file appears) and holds
// neither their names nor the hook package, which the tests' build does.
func TestS6_TheProductBinaryHasNoCrashHooks(t *testing.T) {
	acks := filepath.Join(t.TempDir(), "acks")
	_, stderr, code := nodeEnv(t, writeCrashTree(t), []string{envDataDir + "=" + t.TempDir(),
		crashhook.EnvAppendsFile + "=" + acks, crashhook.EnvKillAfter + "=1"}, "run", "-quiet")
	if code != 0 {
		t.Fatalf("run with the hooks' variables set: exit %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(acks); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the product binary wrote an appends file: %v", err)
	}
	product, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	withHooks, err := os.ReadFile(hooksBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{crashhook.EnvAppendsFile, crashhook.EnvKillAfter, "cmd/node/internal/crashhook"} {
		if bytes.Contains(product, []byte(s)) {
			t.Errorf("the product binary holds %q", s)
		}
		if !bytes.Contains(withHooks, []byte(s)) {
			t.Errorf("the tests' binary does not hold %q: this test could not see it either", s)
		}
	}
}
