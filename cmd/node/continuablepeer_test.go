package main

// The test peer of the failover tests (failover_linux_test.go): an
// embedder's process on the cluster, its Service keeping its tasks in a
// PostgreSQL database the serving members share.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/persistence/postgres"
	"github.com/subactor/subactor/subagent"
)

// peerParent is the delegating parent of the peer's children.
type peerParent struct{}

func (peerParent) ID() string                     { return "peer" }
func (peerParent) SessionID() string              { return "peer" }
func (peerParent) Header() subagent.SessionHeader { return subagent.SessionHeader{SessionID: "peer"} }
func (peerParent) Options() subagent.AgentOptions { return subagent.AgentOptions{} }

// peerLine is one JSON line a continuable peer prints.
type peerLine struct {
	Event   string `json:"event"` // "child", "routes" or "task"
	Child   string `json:"child,omitempty"`
	Task    string `json:"task,omitempty"`
	Started int    `json:"started,omitempty"`
	Steered int    `json:"steered,omitempty"`
	Failed  string `json:"failed,omitempty"` // the first follow-up's error
	State   string `json:"state,omitempty"`
	Output  string `json:"output,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Member  string `json:"member,omitempty"` // the member that hosted the task's run
}

// continuablePeer joins as a member at listen (membership at membership,
// the static list peers, comma-separated) with a Service whose tasks are
// kept in the database at url, delegating continuable children to the
// members' provider "model", each restarted after a crash (its node
// lost) at most restarts times a minute. It takes commands on stdin, one
// a line:
//
//	start PROMPT: a continuable child: a "child" line, then its task's "task" line
//	send CHILD N PREFIX: N follow-ups at once (PREFIX0, PREFIX1, ...): a
//	"routes" line, then the started activation's "task" line
func continuablePeer(listen, membership, peers, url, restarts string) error {
	ctx := context.Background()
	max, err := strconv.Atoi(restarts)
	if err != nil {
		return err
	}
	store, err := postgres.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	n, err := cluster.Start(ctx, cluster.Config{Listen: listen, MemberListen: membership,
		Peers: strings.Split(peers, ","), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer n.Stop()
	p, err := remote.New(remote.Config{Name: "model", Node: n})
	if err != nil {
		return err
	}
	mgr := tasks.New(n.System(), store)
	svc := registry.New(n.System(), registry.WithTasks(mgr), registry.WithRunRestarts(subagent.RestartPolicy{Max: max, Window: time.Minute}))
	defer svc.Close()
	if _, err := svc.RegisterProvider(p); err != nil {
		return err
	}
	// The member hosting each run, as its first progress says.
	var hosts sync.Map
	events := svc.ListenParent(peerParent{}.SessionID(), func(ev subagent.Event) error {
		if p, ok := ev.(subagent.RunProgress); ok && p.Kind == clusterwire.HostedBy {
			hosts.Store(p.RunID, p.Text)
		}
		return nil
	})
	defer events.Release()
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	print := func(l peerLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(l)
	}
	ended := func(id string) {
		t, err := mgr.Await(ctx, "peer", id)
		l := peerLine{Event: "task", Task: id, State: string(t.State), Detail: t.Err}
		if m, ok := hosts.Load(t.RunID); ok {
			l.Member = m.(string)
		}
		if err != nil {
			l.Detail = err.Error()
		}
		if t.Result != nil {
			l.Output, l.Detail = subagent.TextOf(t.Result.Output), l.Detail+t.Result.Detail
		}
		print(l)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, rest, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "start":
			c, err := svc.StartContinuable(ctx, "model", subagent.StartRequest{Parent: peerParent{}, Prompt: []subagent.ContentBlock{subagent.Text(rest)}})
			if err != nil {
				return err
			}
			print(peerLine{Event: "child", Child: c.ChildID, Task: c.Task.ID})
			go ended(c.Task.ID)
		case "send":
			f := strings.Fields(rest)
			if len(f) != 3 {
				return fmt.Errorf("send CHILD N PREFIX, not %q", rest)
			}
			count, err := strconv.Atoi(f[1])
			if err != nil {
				return err
			}
			go func() {
				var l peerLine
				var lmu sync.Mutex
				var wg sync.WaitGroup
				for i := range count {
					wg.Go(func() {
						d, err := svc.SendMessage(ctx, peerParent{}, f[0], []subagent.ContentBlock{subagent.Text(f[2] + strconv.Itoa(i))}, "peer")
						lmu.Lock()
						defer lmu.Unlock()
						switch {
						case err != nil && l.Failed == "":
							l.Failed = err.Error()
						case d.Route == registry.Started:
							l.Started++
							l.Task = d.Task.ID
						case d.Route == registry.Steered:
							l.Steered++
						}
					})
				}
				wg.Wait()
				l.Event = "routes"
				print(l)
				if l.Task != "" {
					ended(l.Task)
				}
			}()
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return in.Err()
}
