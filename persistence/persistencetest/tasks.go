package persistencetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/subactor/subactor/persistence"
)

// RunTasks runs every TaskStore conformance case against a fresh store
// from newStore.
func RunTasks(t *testing.T, newStore func(t *testing.T) persistence.TaskStore) {
	runCases(t, newStore, []testCase[persistence.TaskStore]{
		{"PutThenGet", testPutThenGet},
		{"PutReplaces", testPutReplaces},
		{"UnknownTask", testUnknownTask},
		{"ListByParentInIDOrder", testListByParentInIDOrder},
		{"DeleteTask", testDeleteTask},
		{"PutInvalidChangesNothing", testPutInvalidChangesNothing},
		{"TaskCopies", testTaskCopies},
		{"TaskEndedContext", testTaskEndedContext},
	})
}

// updatedAt is a time with a zone other than UTC and a monotonic reading,
// neither of which a store that encodes times keeps.
var updatedAt = time.Now().In(time.FixedZone("UTC+2", 2*3600))

func task(id, parent, state string) persistence.TaskRecord {
	return persistence.TaskRecord{
		ID: id, ParentSessionID: parent, ChildSessionID: "child-of-" + id,
		Provider: "spawn", State: state, UpdatedAt: updatedAt,
	}
}

func mustPut(t *testing.T, s persistence.TaskStore, tr persistence.TaskRecord) {
	t.Helper()
	if err := s.PutTask(t.Context(), tr); err != nil {
		t.Fatalf("PutTask(%q): %v", tr.ID, err)
	}
}

// wantTask compares every field: Result as compact JSON, UpdatedAt as an
// instant that comes back in UTC.
func wantTask(t *testing.T, got, want persistence.TaskRecord) {
	t.Helper()
	same := got.ID == want.ID && got.ParentSessionID == want.ParentSessionID &&
		got.ChildSessionID == want.ChildSessionID && got.Provider == want.Provider &&
		got.State == want.State && got.UpdatedAt.Equal(want.UpdatedAt) && got.UpdatedAt.Location() == time.UTC &&
		(len(got.Result) == 0) == (len(want.Result) == 0)
	if same && len(want.Result) > 0 {
		same = compact(t, got.Result) == compact(t, want.Result)
	}
	if !same {
		t.Fatalf("got task %+v (result %s), want %+v (result %s, time in UTC)", got, got.Result, want, want.Result)
	}
}

func mustGet(t *testing.T, s persistence.TaskStore, id string) persistence.TaskRecord {
	t.Helper()
	got, err := s.GetTask(t.Context(), id)
	if err != nil {
		t.Fatalf("GetTask(%q): %v", id, err)
	}
	return got
}

func wantList(t *testing.T, s persistence.TaskStore, parent string, want ...persistence.TaskRecord) {
	t.Helper()
	got, err := s.ListTasks(t.Context(), parent)
	if err != nil {
		t.Fatalf("ListTasks(%q): %v", parent, err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListTasks(%q): got %d tasks %+v, want %d", parent, len(got), got, len(want))
	}
	for i := range want {
		wantTask(t, got[i], want[i])
	}
}

func testPutThenGet(t *testing.T, s persistence.TaskStore) {
	withResult := task("t1", "p", "completed")
	withResult.Result = json.RawMessage(`{"output": [ "done" ], "stopReason": "completed"}`)
	mustPut(t, s, withResult)
	wantTask(t, mustGet(t, s, "t1"), withResult)
	// Result and the optional strings may be left out.
	bare := persistence.TaskRecord{ID: "t2", ParentSessionID: "p", State: "running"}
	mustPut(t, s, bare)
	wantTask(t, mustGet(t, s, "t2"), bare)
}

func testPutReplaces(t *testing.T, s persistence.TaskStore) {
	mustPut(t, s, task("t1", "p", "running"))
	done := task("t1", "p", "completed")
	done.Result = json.RawMessage(`"ok"`)
	done.UpdatedAt = updatedAt.Add(time.Second)
	mustPut(t, s, done)
	wantTask(t, mustGet(t, s, "t1"), done)
	wantList(t, s, "p", done)
	// A replacement may move a task to another parent.
	moved := task("t1", "q", "completed")
	mustPut(t, s, moved)
	wantList(t, s, "p")
	wantList(t, s, "q", moved)
}

func testUnknownTask(t *testing.T, s persistence.TaskStore) {
	_, err := s.GetTask(t.Context(), "nope")
	if !errors.Is(err, persistence.ErrTaskNotFound) || !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("GetTask(unknown): got %v, want ErrTaskNotFound (and ErrNotFound)", err)
	}
	wantErr(t, "DeleteTask(unknown)", s.DeleteTask(t.Context(), "nope"), persistence.ErrTaskNotFound)
}

func testListByParentInIDOrder(t *testing.T, s persistence.TaskStore) {
	for _, tr := range []persistence.TaskRecord{task("t3", "p", "a"), task("t1", "p", "b"), task("t2", "q", "c"), task("t0", "p", "d"), task("t4", "p1", "e")} {
		mustPut(t, s, tr)
	}
	wantList(t, s, "p", task("t0", "p", "d"), task("t1", "p", "b"), task("t3", "p", "a"))
	wantList(t, s, "q", task("t2", "q", "c"))
	wantList(t, s, "nobody")
	_, err := s.ListTasks(t.Context(), "")
	wantErr(t, `ListTasks("")`, err, persistence.ErrInvalid)
}

func testDeleteTask(t *testing.T, s persistence.TaskStore) {
	mustPut(t, s, task("t1", "p", "running"))
	mustPut(t, s, task("t2", "p", "running"))
	if err := s.DeleteTask(t.Context(), "t1"); err != nil {
		t.Fatalf("DeleteTask: %v", err)
	}
	_, err := s.GetTask(t.Context(), "t1")
	wantErr(t, "GetTask after DeleteTask", err, persistence.ErrTaskNotFound)
	wantErr(t, "second DeleteTask", s.DeleteTask(t.Context(), "t1"), persistence.ErrTaskNotFound)
	wantList(t, s, "p", task("t2", "p", "running"))
	mustPut(t, s, task("t1", "p", "again"))
	wantTask(t, mustGet(t, s, "t1"), task("t1", "p", "again"))
}

func testPutInvalidChangesNothing(t *testing.T, s persistence.TaskStore) {
	kept := task("t1", "p", "running")
	mustPut(t, s, kept)
	noParent, noState, badResult, farFuture := task("t1", "", "x"), task("t1", "p", ""), task("t1", "p", "x"), task("t1", "p", "x")
	badResult.Result = json.RawMessage(`{"torn":`)
	farFuture.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, bad := range map[string]persistence.TaskRecord{
		"NoID": task("", "p", "x"), "NoParent": noParent, "NoState": noState,
		"ResultNotJSON": badResult, "YearPast9999": farFuture,
	} {
		wantErr(t, name+": PutTask", s.PutTask(t.Context(), bad), persistence.ErrInvalid)
	}
	wantTask(t, mustGet(t, s, "t1"), kept)
	wantList(t, s, "p", kept)
}

func testTaskCopies(t *testing.T, s persistence.TaskStore) {
	in := task("t1", "p", "completed")
	in.Result = json.RawMessage(`{"x":1}`)
	mustPut(t, s, in)
	copy(in.Result, `{"x":2}`)
	got := mustGet(t, s, "t1")
	if compact(t, got.Result) != `{"x":1}` {
		t.Fatalf("the store shares the result it was given: %s", got.Result)
	}
	copy(got.Result, `{"x":3}`)
	listed, err := s.ListTasks(t.Context(), "p")
	if err != nil || len(listed) != 1 || compact(t, listed[0].Result) != `{"x":1}` {
		t.Fatalf("the store shares the result it returned: %+v, %v", listed, err)
	}
	copy(listed[0].Result, `{"x":4}`)
	if again := mustGet(t, s, "t1"); compact(t, again.Result) != `{"x":1}` {
		t.Fatalf("the store shares the result ListTasks returned: %s", again.Result)
	}
}

func testTaskEndedContext(t *testing.T, s persistence.TaskStore) {
	mustPut(t, s, task("t1", "p", "running"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, errGet := s.GetTask(ctx, "t1")
	_, errList := s.ListTasks(ctx, "p")
	for name, err := range map[string]error{
		"PutTask": s.PutTask(ctx, task("t2", "p", "running")), "GetTask": errGet,
		"ListTasks": errList, "DeleteTask": s.DeleteTask(ctx, "t1"),
	} {
		wantErr(t, name, err, context.Canceled)
	}
	wantList(t, s, "p", task("t1", "p", "running"))
}
