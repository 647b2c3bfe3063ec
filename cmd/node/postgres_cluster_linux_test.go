package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/testkit/pgtest"
)

// Contracts K2, S9 (issue 28: the node end to end on PostgreSQL): three
// node processes share one database: two serve the node's model, the
// third delegates to it with delegate -cluster. The caller's session and
// the child's session, written by whichever member hosted it, are both in
// the database: sessions, from a fourth data directory, lists the
// caller's session with its child, completed.
func TestK2_S9_ThreeNodesServeAndDelegateOnOnePostgresDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	root := writeTree(t)
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	store := []string{envStore + "=" + url}
	for _, m := range []member{b, c} {
		p := startNodeWith(t, store, false, append([]string{"serve", "-offer-model", "model", "-dir", root}, how(m)...)...)
		p.line(t, memberLine, "serve to join")
	}

	caller := startNodeWith(t, store, false, append(append([]string{"delegate", "-cluster", "-provider", "model", "-json"}, how(a)...), "survey", ".")...)
	if code := caller.rest(t); code != 0 {
		t.Fatalf("delegate -cluster on PostgreSQL: exit %d, stdout %q, stderr %s", code, caller.all, caller.stderr.String())
	}
	session := jsonField(t, caller.all, "node/session", "sessionId")
	child := jsonField(t, caller.all, "subagent/start", "runId")
	if answer := jsonField(t, caller.all, "node/result", "answer"); !strings.HasPrefix(answer, "survey .: 11 files") {
		t.Fatalf("delegate answered %q, want the survey of the tree", answer)
	}
	if session == "" {
		t.Fatalf("delegate printed no session: %q", caller.all)
	}
	tree := sessionLines(t, url, session)
	if len(tree) != 2 || !strings.HasPrefix(tree[0], session) || !strings.Contains(tree[1], child) || !strings.Contains(tree[1], "state=completed") {
		t.Fatalf("sessions %s on the shared database lists\n%s\nwant the caller's session and its child", session, strings.Join(tree, "\n"))
	}
}

// jsonField is field of the first JSON line of type typ in lines.
func jsonField(t *testing.T, lines []string, typ, field string) string {
	t.Helper()
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["type"] == typ {
			if v, ok := m[field].(string); ok {
				return v
			}
		}
	}
	t.Fatalf("no %s line with a %s in %q", typ, field, lines)
	return ""
}
