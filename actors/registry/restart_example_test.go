package registry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/subagent"
)

// flaky is a provider of continuable children whose first activation
// crashes; a relaunch continues from the child's checkpoint (here, it
// simply answers).
type flaky struct {
	sys        *actors.System
	relaunches atomic.Int32
}

func (*flaky) Name() string                        { return "flaky" }
func (*flaky) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (*flaky) InheritsParentContext() bool         { return false }

func (p *flaky) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	h := run.Start(p.sys, run.Spec{
		Scope: scope, // the run id and the Service's restart policy
		Ctx:   ctx,
		Body:  func(context.Context, run.Gate) (subagent.Result, error) { panic("lost the connection") },
		Relaunch: func(context.Context, run.Gate) (subagent.Result, error) {
			p.relaunches.Add(1)
			return subagent.Result{Output: []subagent.ContentBlock{subagent.Text("recovered")}, StopReason: subagent.Completed}, nil
		},
	})
	return h, nil
}

// The embedder chooses how often a crashed continuable child is relaunched
// from its last checkpoint (A2): here at most three times a minute.
func ExampleWithRunRestarts() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys, registry.WithRunRestarts(subagent.RestartPolicy{Max: 3, Window: time.Minute}))
	defer svc.Close()
	p := &flaky{sys: sys}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()

	r, err := svc.Start(ctx, "flaky", subagent.StartRequest{Parent: top, Prompt: []subagent.ContentBlock{subagent.Text("work")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := r.Wait(ctx)
	if derr := r.Dispose(ctx); err == nil {
		err = derr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, subagent.TextOf(res.Output), "after", p.relaunches.Load(), "relaunch")
	// Output: completed recovered after 1 relaunch
}
