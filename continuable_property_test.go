package subactor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// gatedChild is a child model whose every call waits for a token from the
// test (true: answer; false: call a tool, so that steers can join), or
// answers at once once open is closed; it counts the calls in flight, so
// that two live activations of one child would show.
type gatedChild struct {
	tokens   chan bool
	open     chan struct{}
	inFlight atomic.Int32
	overlap  atomic.Bool
}

func (g *gatedChild) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if g.inFlight.Add(1) > 1 {
		g.overlap.Store(true)
	}
	defer g.inFlight.Add(-1)
	final := true
	select {
	case final = <-g.tokens:
	case <-g.open:
	case <-ctx.Done():
		return agent.Response{}, context.Cause(ctx)
	}
	if !final {
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: fmt.Sprint(len(req.Messages)), Name: "noop", Args: json.RawMessage(`{}`)}}}}, nil
	}
	return agent.Response{Message: agent.Message{Content: text("ok")}}, nil
}

// TestS8_ContinuableChildProperties drives one continuable child with
// random interleavings of follow-ups (from its owner, some given up, and
// from an intruder), kills, model steps, the owner closing (issue 16:
// parent Close), and a closing Service or task manager, and checks: never two live activations of the child; in its
// log, no writer's records after another's (each activation's stop ends
// its block); every follow-up that was delivered is in the log exactly
// once, every one that failed is not; an intruder is always refused;
// every task is terminal at the end; every call returns.
func TestS8_ContinuableChildProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		model := &gatedChild{tokens: make(chan bool), open: make(chan struct{})}
		sys := actors.NewSystem()
		store := persistence.NewMemory()
		mgr := tasks.New(sys, store)
		r, err := subactor.New(subactor.Config{System: sys, Store: store, Model: model, Tools: []agent.Tool{noop{}},
			Options: []registry.Option{registry.WithTasks(mgr)}})
		if err != nil {
			rt.Fatal(err)
		}
		defer sys.Shutdown()
		defer r.Close()
		owner, err := r.NewAgent(context.Background(), "owner")
		if err != nil {
			rt.Fatal(err)
		}
		intruder, err := r.NewAgent(context.Background(), "intruder")
		if err != nil {
			rt.Fatal(err)
		}
		p, err := spawn.New(spawn.Config{Name: "gated", System: sys, Store: store, Model: model, Tools: []agent.Tool{noop{}}, MaxSteps: math.MaxInt})
		if err != nil {
			rt.Fatal(err)
		}
		release, err := r.Service.RegisterProvider(p)
		if err != nil {
			rt.Fatal(err)
		}
		defer release()
		c, err := r.Service.StartContinuable(context.Background(), "gated", subagent.StartRequest{Parent: owner, Prompt: text("m0")})
		if err != nil {
			rt.Fatal(err)
		}

		type outcome struct {
			msg string
			err error
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			outcomes []outcome
			cancels  []context.CancelFunc
		)
		defer func() {
			for _, cancel := range cancels {
				cancel()
			}
		}()
		for i := range rapid.IntRange(1, 12).Draw(rt, "actions") {
			switch rapid.IntRange(0, 5).Draw(rt, "action") {
			case 0, 1: // a follow-up from the owner, waiting in the background
				msg := fmt.Sprintf("m%d", i+1)
				ctx, cancel := context.WithCancel(context.Background())
				cancels = append(cancels, cancel)
				wg.Go(func() {
					_, err := r.Service.SendMessage(ctx, owner, c.ChildID, text(msg), "user")
					mu.Lock()
					outcomes = append(outcomes, outcome{msg, err})
					mu.Unlock()
				})
			case 2: // the owner gives up a waiting follow-up
				if n := len(cancels); n > 0 {
					cancels[rapid.IntRange(0, n-1).Draw(rt, "which")]()
				}
			case 3: // a model step, if a call waits for one
				select {
				case model.tokens <- rapid.Bool().Draw(rt, "final"):
				case <-time.After(time.Millisecond):
				}
			case 4: // kill the newest task
				list, err := mgr.List(context.Background(), "owner")
				if err == nil && len(list) > 0 {
					_, _ = mgr.Kill(context.Background(), "owner", list[len(list)-1].ID)
				}
			case 5: // the owner closes: its live activation is killed, its later follow-ups fail
				owner.Close()
			}
			if _, err := r.Service.SendMessage(context.Background(), intruder, c.ChildID, text("evil"), "intruder"); !errors.Is(err, registry.ErrNotContinuable) {
				rt.Fatalf("an intruder's follow-up: %v", err)
			}
		}
		// The end: the model answers at once, then the Service or the task
		// manager closes, killing what is still live.
		close(model.open)
		if rapid.Bool().Draw(rt, "close the Service") {
			r.Service.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			rt.Fatalf("closing the task manager: %v", err)
		}
		returned := make(chan struct{})
		go func() { wg.Wait(); close(returned) }()
		select {
		case <-returned:
		case <-ctx.Done():
			rt.Fatalf("a follow-up never returned")
		}

		if model.overlap.Load() {
			rt.Fatalf("two activations of the child called the model at once")
		}
		list, err := store.ListTasks(context.Background(), "owner")
		if err != nil {
			rt.Fatal(err)
		}
		for _, task := range list {
			if !tasks.State(task.State).Terminal() {
				rt.Fatalf("task %s is %s at the end", task.ID, task.State)
			}
		}
		_, recs, err := store.Load(context.Background(), c.ChildID)
		if err != nil {
			rt.Fatal(err)
		}
		var log []string
		stopped := false
		for _, rec := range recs {
			switch rec.Kind {
			case agentlog.KindActivation:
				stopped = false
			case agentlog.KindStop:
				if stopped {
					rt.Fatalf("two stops in one activation's block")
				}
				stopped = true
			case persistence.KindMessage:
				if stopped {
					rt.Fatalf("a record after its activation's stop: another writer's")
				}
				var m agent.Message
				if err := json.Unmarshal(rec.Data, &m); err != nil {
					rt.Fatal(err)
				}
				if m.Role == agent.User {
					log = append(log, subagent.TextOf(m.Content))
				}
			}
		}
		joined := "," + strings.Join(log, ",") + ","
		for _, o := range outcomes {
			n := strings.Count(joined, ","+o.msg+",")
			switch {
			case o.err == nil && n != 1:
				rt.Fatalf("delivered follow-up %s is in the log %d times: %q", o.msg, n, log)
			case o.err != nil && n != 0:
				rt.Fatalf("failed follow-up %s (%v) is in the log %d times: %q", o.msg, o.err, n, log)
			}
		}
		if strings.Contains(joined, "evil") {
			rt.Fatalf("an intruder's follow-up is in the log: %q", log)
		}
	})
}
