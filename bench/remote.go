package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/actorsraw"
	"github.com/subactor/subactor/internal/clustertest"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// RemoteResult compares a run placed on another node (P4, K1) with the
// raw protoactor remote request it is built from, between the same two
// processes on loopback, and measures delegations per second on one node
// (the caller hosting its own runs), through one hosting node and through
// two (three nodes in all, with the caller).
type RemoteResult struct {
	Samples int `json:"samples"`
	// Raw is one protoactor remote request and its response (a load
	// query to the hosting node's host actor).
	Raw Distribution `json:"raw"`
	// Run is remote start→result→dispose through a Service on the remote
	// provider, the child an in-process echo on the other node.
	Run Distribution `json:"run"`
	// Ratio is Run's median over Raw's (the goal: within 3).
	Ratio float64 `json:"ratio"`
	// Callers delegated concurrently for the throughput figures.
	Callers int `json:"callers"`
	// OneNode, OneHost and TwoHosts are delegations (start→result→
	// dispose) per second: on one node that places the runs on itself,
	// and with one and with two hosting nodes beside the caller's.
	OneNode  float64 `json:"oneNodePerSecond"`
	OneHost  float64 `json:"oneHostPerSecond"`
	TwoHosts float64 `json:"twoHostsPerSecond"`
}

// parent is the delegating parent of the measured runs.
type benchParent struct{}

func (benchParent) ID() string        { return "bench-parent" }
func (benchParent) SessionID() string { return "bench-parent" }
func (benchParent) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: "bench-parent"}
}
func (benchParent) Options() subagent.AgentOptions { return subagent.AgentOptions{} }

// Remote measures RemoteResult: hostBin is bench/cmd/remotehost built;
// samples sequential round trips of each kind, then rounds delegations
// by callers at once, per host count.
func Remote(ctx context.Context, hostBin string, samples, callers, rounds int) (RemoteResult, error) {
	res := RemoteResult{Samples: samples, Callers: callers}
	for hosts := 0; hosts <= 2; hosts++ {
		perSecond, raw, run, err := remoteOnce(ctx, hostBin, hosts, samples, callers, rounds)
		if err != nil {
			return res, err
		}
		switch hosts {
		case 0:
			res.OneNode = perSecond
		case 1:
			res.Raw, res.Run, res.OneHost = raw, run, perSecond
			res.Ratio = run.P50 / raw.P50
		default:
			res.TwoHosts = perSecond
		}
	}
	return res, nil
}

// remoteOnce measures with hosts hosting processes beside the caller's
// node; with none, the caller's node hosts the runs.
func remoteOnce(ctx context.Context, hostBin string, hosts, samples, callers, rounds int) (float64, Distribution, Distribution, error) {
	var members []string // listen addresses; membership on port+1
	for range hosts + 1 {
		p, err := clustertest.PortPair()
		if err != nil {
			return 0, Distribution{}, Distribution{}, err
		}
		members = append(members, "127.0.0.1:"+strconv.Itoa(p))
	}
	var peers []string
	for _, m := range members {
		host, port, _ := net.SplitHostPort(m)
		p, _ := strconv.Atoi(port)
		peers = append(peers, net.JoinHostPort(host, strconv.Itoa(p+1)))
	}
	for _, listen := range members[1:] {
		stop, err := startHost(hostBin, listen, strings.Join(peers, ","))
		if err != nil {
			return 0, Distribution{}, Distribution{}, err
		}
		defer stop()
	}
	cfg := cluster.Config{Listen: members[0], Peers: peers}
	if hosts == 0 {
		// One node: the caller hosts its runs itself, the same work
		// through the same client without another process.
		cfg.Providers, cfg.Capacity = []subagent.Provider{clustertest.Echo{}}, 1<<20
	}
	n, err := cluster.Start(cfg)
	if err != nil {
		return 0, Distribution{}, Distribution{}, err
	}
	defer n.Stop()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ms, err := n.WaitMembers(wait, func(ms []cluster.Member) bool { return len(ms) == hosts+1 })
	if err != nil {
		return 0, Distribution{}, Distribution{}, fmt.Errorf("waiting for %d members: %w", hosts+1, err)
	}
	p, err := remote.New(remote.Config{Name: "echo", Node: n})
	if err != nil {
		return 0, Distribution{}, Distribution{}, err
	}
	svc := registry.New(n.System())
	defer svc.Close()
	if _, err := svc.RegisterProvider(p); err != nil {
		return 0, Distribution{}, Distribution{}, err
	}
	delegate := func() error {
		r, err := svc.Start(ctx, "echo", subagent.StartRequest{Parent: benchParent{}, Prompt: []subagent.ContentBlock{subagent.Text("hi")}})
		if err != nil {
			return err
		}
		out, err := r.Wait(ctx)
		if derr := r.Dispose(ctx); err == nil {
			err = derr
		}
		if err == nil && out.StopReason != subagent.Completed {
			err = fmt.Errorf("a remote echo ended %s: %s", out.StopReason, out.Detail)
		}
		return err
	}
	var hostPID *actor.PID
	for _, m := range ms {
		if m.ID != n.ID() {
			hostPID = clusterwire.Host(m.Address)
		}
	}
	raw := func() error {
		_, err := actorsraw.Of(n.System()).Root.RequestFuture(hostPID, &messages.HostStatus{}, 10*time.Second).Result()
		return err
	}
	var rawD, runD Distribution
	if hosts == 1 {
		// Warm both paths, then alternate them so that both see the
		// same machine.
		for range 50 {
			if err := errors.Join(raw(), delegate()); err != nil {
				return 0, Distribution{}, Distribution{}, err
			}
		}
		var rs, ds []time.Duration
		for range samples {
			t := time.Now()
			if err := raw(); err != nil {
				return 0, Distribution{}, Distribution{}, err
			}
			rs = append(rs, time.Since(t))
			t = time.Now()
			if err := delegate(); err != nil {
				return 0, Distribution{}, Distribution{}, err
			}
			ds = append(ds, time.Since(t))
		}
		rawD, runD = distribution(rs), distribution(ds)
	}
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for range rounds {
				if err := delegate(); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return 0, Distribution{}, Distribution{}, err
	}
	return float64(callers*rounds) / took.Seconds(), rawD, runD, nil
}

// startHost starts a remotehost on listen and returns once it joined;
// stop ends it (its stdin closes) and waits.
func startHost(bin, listen, peers string) (stop func(), err error) {
	cmd := exec.Command(bin, "-listen", listen, "-peers", peers)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		in.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		stop()
		return nil, fmt.Errorf("remotehost on %s did not start: %q %v", listen, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return stop, nil
}
