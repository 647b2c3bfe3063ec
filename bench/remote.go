package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// RemoteResult compares a run placed on another node (P4, K1) with the
// raw protoactor remote request it is built from, between the same two
// processes on loopback, and measures delegations per second on one node
// (the caller hosting its own runs), through one hosting node and through
// two (three nodes in all, with the caller).
type RemoteResult struct {
	// Samples of each kind are taken beside each of Clusters one-host
	// clusters (a process pair of their own each), and pooled.
	Samples  int `json:"samples"`
	Clusters int `json:"clusters"`
	// Raw is one protoactor remote request and its response (a load
	// query to the hosting node's host actor).
	Raw Distribution `json:"raw"`
	// Run is remote start→result→dispose through a Service on the remote
	// provider, the child an in-process echo on the other node.
	Run Distribution `json:"run"`
	// Ratio is Run's median over Raw's (the goal: within 1.3).
	Ratio float64 `json:"ratio"`
	// Callers delegated concurrently for the throughput figures.
	Callers int `json:"callers"`
	// OneNode, OneHost and TwoHosts are delegations (start→result→
	// dispose) per second: on one node that places the runs on itself,
	// and with one and with two hosting nodes beside the caller's (the
	// medians of remoteRepeats clusters each).
	OneNode  float64 `json:"oneNodePerSecond"`
	OneHost  float64 `json:"oneHostPerSecond"`
	TwoHosts float64 `json:"twoHostsPerSecond"`
	// OneNodeCPU, OneHostCPU and TwoHostsCPU are the CPU time (user +
	// system) of the same delegations, per delegation in nanoseconds,
	// summed over every node process: the caller's and each host's.
	OneNodeCPU  float64 `json:"oneNodeCPUNs"`
	OneHostCPU  float64 `json:"oneHostCPUNs"`
	TwoHostsCPU float64 `json:"twoHostsCPUNs"`
	// Memory is a hosting node's memory under remote runs in flight and
	// after them (cmd/bench fills it; Remote does not).
	Memory *RemoteMemoryResult `json:"memory,omitempty"`
}

// throughput is what the concurrent delegations of one host count cost:
// delegations per second, and CPU per delegation over all node processes.
type throughput struct {
	perSecond float64
	cpuNs     float64
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
// by callers at once, per host count. The one- and two-host clusters are
// measured in turn remoteRepeats times and their medians reported, so
// that both see the same machine; the round trips are pooled over the
// one-host clusters, so that no one process pair's luck decides them.
func Remote(ctx context.Context, hostBin string, samples, callers, rounds int) (RemoteResult, error) {
	res := RemoteResult{Samples: samples, Clusters: remoteRepeats, Callers: callers}
	one, _, _, err := remoteOnce(ctx, hostBin, 0, 0, callers, rounds)
	if err != nil {
		return res, err
	}
	res.OneNode, res.OneNodeCPU = one.perSecond, one.cpuNs
	var perSecond, cpu [3][]float64 // by host count
	var raws, runs []time.Duration
	for range remoteRepeats {
		for hosts := 1; hosts <= 2; hosts++ {
			n := 0 // the round trips beside each one-host cluster
			if hosts == 1 {
				n = samples
			}
			t, raw, run, err := remoteOnce(ctx, hostBin, hosts, n, callers, rounds)
			if err != nil {
				return res, err
			}
			raws, runs = append(raws, raw...), append(runs, run...)
			perSecond[hosts], cpu[hosts] = append(perSecond[hosts], t.perSecond), append(cpu[hosts], t.cpuNs)
		}
	}
	if samples > 0 {
		res.Raw, res.Run = distribution(raws), distribution(runs)
		res.Ratio = res.Run.P50 / res.Raw.P50
	}
	res.OneHost, res.OneHostCPU = Median(perSecond[1]), Median(cpu[1])
	res.TwoHosts, res.TwoHostsCPU = Median(perSecond[2]), Median(cpu[2])
	return res, nil
}

// remoteRepeats is how often the one- and two-host clusters are measured.
const remoteRepeats = 5

// remoteCluster is hosts remotehost processes and a caller's node in
// this process, whose Service places "echo" runs on them (on itself when
// there is no host).
type remoteCluster struct {
	n       *cluster.Node
	svc     *registry.Service
	members []cluster.Member
	pids    []int // the hosts'
	asks    []func(line string) (string, error)
	stops   []func()
}

func startRemoteCluster(ctx context.Context, hostBin string, hosts int) (c *remoteCluster, err error) {
	c = &remoteCluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	var members []string // listen addresses; membership on port+1
	for range hosts + 1 {
		p, err := clustertest.PortPair()
		if err != nil {
			return nil, err
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
		pid, ask, stop, err := startHost(hostBin, listen, strings.Join(peers, ","))
		if err != nil {
			return nil, err
		}
		c.stops, c.asks = append(c.stops, stop), append(c.asks, ask)
		c.pids = append(c.pids, pid)
	}
	cfg := cluster.Config{Listen: members[0], Peers: peers, System: actors.NewSystem()}
	if hosts == 0 {
		// One node: the caller hosts its runs itself, the same work
		// through the same client without another process. The echo's
		// children are run actors, as real providers' are.
		cfg.Providers, cfg.Capacity = []subagent.Provider{clustertest.Echo{System: cfg.System}}, 1<<20
	}
	if c.n, err = cluster.Start(context.Background(), cfg); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if c.members, err = c.n.WaitMembers(wait, func(ms []cluster.Member) bool { return len(ms) == hosts+1 }); err != nil {
		return nil, fmt.Errorf("waiting for %d members: %w", hosts+1, err)
	}
	p, err := remote.New(remote.Config{Name: "echo", Node: c.n})
	if err != nil {
		return nil, err
	}
	c.svc = registry.New(c.n.System())
	if _, err := c.svc.RegisterProvider(p); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *remoteCluster) close() {
	if c.svc != nil {
		c.svc.Close()
	}
	if c.n != nil {
		c.n.Stop()
	}
	for _, stop := range c.stops {
		stop()
	}
}

// remoteOnce measures with hosts hosting processes beside the caller's
// node; with none, the caller's node hosts the runs.
func remoteOnce(ctx context.Context, hostBin string, hosts, samples, callers, rounds int) (throughput, []time.Duration, []time.Duration, error) {
	c, err := startRemoteCluster(ctx, hostBin, hosts)
	if err != nil {
		return throughput{}, nil, nil, err
	}
	defer c.close()
	n, svc, ms, pids := c.n, c.svc, c.members, c.pids
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
		_, err := n.System().ActorSystem().Root.RequestFuture(hostPID, &messages.HostStatus{}, 10*time.Second).Result()
		return err
	}
	var rs, ds []time.Duration
	if samples > 0 {
		// Warm both paths, then alternate them so that both see the
		// same machine.
		for range 50 {
			if err := errors.Join(raw(), delegate()); err != nil {
				return throughput{}, nil, nil, err
			}
		}
		for range samples {
			t := time.Now()
			if err := raw(); err != nil {
				return throughput{}, nil, nil, err
			}
			rs = append(rs, time.Since(t))
			t = time.Now()
			if err := delegate(); err != nil {
				return throughput{}, nil, nil, err
			}
			ds = append(ds, time.Since(t))
		}
	}
	cpu0, err := clusterCPU(pids)
	if err != nil {
		return throughput{}, nil, nil, err
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
	cpu1, err := clusterCPU(pids)
	if err == nil {
		err, _ = failed.Load().(error)
	}
	if err != nil {
		return throughput{}, nil, nil, err
	}
	count := float64(callers * rounds)
	return throughput{perSecond: count / took.Seconds(), cpuNs: float64(cpu1-cpu0) / count}, rs, ds, nil
}

// clusterCPU is the CPU time (user + system) this process and the host
// processes pids have used so far.
func clusterCPU(pids []int) (time.Duration, error) {
	t := CPUTime(syscall.RUSAGE_SELF)
	for _, pid := range pids {
		c, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		t += c
	}
	return t, nil
}

// procCPU is the user + system time of process pid so far, from
// /proc/PID/stat (fields 14 and 15, in the clock ticks of 1/100 s Linux
// reports them in).
func procCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * (time.Second / 100), nil
}

// startHost starts a remotehost on listen and returns its pid once it
// joined; stop ends it (its stdin closes) and waits.
// startHost starts a remotehost; ask writes it a line and returns the
// line it answers (see cmd/remotehost).
func startHost(bin, listen, peers string) (pid int, ask func(string) (string, error), stop func(), err error) {
	cmd := exec.Command(bin, "-listen", listen, "-peers", peers)
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, nil, err
	}
	stop = func() {
		in.Close()
		_ = cmd.Wait()
	}
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		stop()
		return 0, nil, nil, fmt.Errorf("remotehost on %s did not start: %q %v", listen, line, err)
	}
	ask = func(q string) (string, error) {
		if _, err := fmt.Fprintln(in, q); err != nil {
			return "", err
		}
		a, err := lines.ReadString('\n')
		return strings.TrimSpace(a), err
	}
	return cmd.Process.Pid, ask, stop, nil
}
