package main

// Cluster tests (K1, K2, K3, P4, R1–R3): one node per OS process on
// loopback, as deployed (protoactor's remote code races when several
// nodes share a process). `node serve` hosts the fake ACP agent; `node
// delegate -cluster` on another process delegates to it.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
)

// portPair returns a loopback port p such that p and p+1 were free.
func portPair(t *testing.T) int {
	t.Helper()
	p, err := clustertest.PortPair()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// member is a planned node: its listen and membership addresses.
type member struct{ listen, membership string }

func newMember(t *testing.T) member {
	p := portPair(t)
	return member{listen: fmt.Sprintf("127.0.0.1:%d", p), membership: fmt.Sprintf("127.0.0.1:%d", p+1)}
}

// membership is how the nodes of a test find each other: the flags that
// say so, given the node's own addresses.
type membership func(m member) []string

// static is a static member list of every planned node.
func static(ms ...member) membership {
	var peers []string
	for _, m := range ms {
		peers = append(peers, m.membership)
	}
	return func(m member) []string {
		return []string{"-listen", m.listen, "-peers", strings.Join(peers, ",")}
	}
}

// etcdServer starts a throwaway etcd on loopback ports it picks and
// returns the membership of nodes that use it. Without the etcd binary
// the test skips, except in CI (.ci/run installs etcd-server).
func etcdServer(t *testing.T) membership {
	t.Helper()
	return newEtcd(t).membership
}

// etcdProcess is a throwaway etcd that a test can kill and start again
// on the same data directory and ports.
type etcdProcess struct {
	exe, endpoint string
	args          []string
	cmd           *exec.Cmd
}

func newEtcd(t *testing.T) *etcdProcess {
	t.Helper()
	exe := etcdBinary(t)
	client, peer := portPair(t), portPair(t)
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	e := &etcdProcess{exe: exe, endpoint: fmt.Sprintf("127.0.0.1:%d", client), args: []string{"--name", "test", "--data-dir", t.TempDir(),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test=" + peerURL}}
	t.Cleanup(e.kill)
	e.start(t)
	return e
}

// start starts etcd and returns once it serves clients.
func (e *etcdProcess) start(t *testing.T) {
	t.Helper()
	e.cmd = exec.Command(e.exe, e.args...)
	logs, err := e.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready to serve client requests") {
				close(ready)
				break
			}
		}
		for sc.Scan() { // drain, so that etcd never blocks on its log
		}
	}()
	testkit.Recv(t, ready, "etcd to serve clients")
}

// kill ends etcd at once (SIGKILL: nothing flushed beyond its WAL).
func (e *etcdProcess) kill() {
	if e.cmd.ProcessState == nil {
		_ = e.cmd.Process.Kill()
		_ = e.cmd.Wait()
	}
}

func (e *etcdProcess) membership(m member) []string {
	return []string{"-listen", m.listen, "-etcd", e.endpoint}
}

// etcdBinary locates etcd: a test needing it skips without it, and
// fails in CI.
func etcdBinary(t *testing.T) string {
	t.Helper()
	exe, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("etcd is not installed (apt-get install etcd-server)")
		}
		t.Skip("etcd is not installed (apt-get install etcd-server)")
	}
	return exe
}

// process is a running node process.
type process struct {
	cmd    *exec.Cmd
	lines  <-chan string
	stderr *testkit.Buffer
	stdin  io.WriteCloser // see startNodeWith
	all    []string       // lines read so far
}

// startNode starts the binary with args and reads its stdout lines; it is
// killed when the test ends if still running.
func startNode(t *testing.T, args ...string) *process {
	t.Helper()
	return startNodeWith(t, nil, false, args...)
}

// startNodeWith is startNode with env added to the node's environment
// and, withStdin, a pipe to its standard input (process.stdin).
func startNodeWith(t *testing.T, env []string, withStdin bool, args ...string) *process {
	t.Helper()
	p := &process{stderr: new(testkit.Buffer)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = slices.Concat(os.Environ(), withData(t.TempDir()), env)
	if withStdin {
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd.Stderr = p.stderr
	p.lines = startLines(t, p.cmd)
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// line waits for a line matching re and returns it.
func (p *process) line(t *testing.T, re *regexp.Regexp, what string) string {
	t.Helper()
	// Generous, and named: a line that never comes fails this test, not
	// the package's timeout.
	bound := testkit.Scale(2 * time.Minute)
	deadline := time.After(bound)
	for {
		var l string
		var ok bool
		select {
		case l, ok = <-p.lines: // closed when the process ends
		case <-deadline:
			t.Fatalf("waited %s for %s from %v; stdout %q, stderr %q", bound, what, p.cmd.Args, p.all, p.stderr.String())
		}
		if !ok {
			t.Fatalf("node %v ended before %s; stdout %q, stderr %q", p.cmd.Args[1:], what, p.all, p.stderr.String())
		}
		p.all = append(p.all, l)
		if re.MatchString(l) {
			return l
		}
	}
}

// rest reads the remaining lines and waits for the process to end; it
// returns the exit code.
func (p *process) rest(t *testing.T) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		for l := range p.lines {
			p.all = append(p.all, l)
		}
		close(done)
	}()
	// A node leaving a cluster waits for its hosted runs' callers: a
	// deadline of its own.
	select {
	case <-done:
	case <-time.After(testkit.Scale(time.Minute)):
		t.Fatalf("waited %s for node %v to end; stderr:\n%s", testkit.Scale(time.Minute), p.cmd.Args[1:], p.stderr.String())
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

var memberLine = regexp.MustCompile(`^member (\S+) at (\S+) offering`)

// serve starts `node serve` offering the fake agent as "fake" and returns
// it with its member id once it joined.
func serve(t *testing.T, m member, how membership, extra ...string) (*process, string) {
	t.Helper()
	args := append([]string{"serve", "-config", fakeConfig(t)}, how(m)...)
	p := startNode(t, append(args, extra...)...)
	l := p.line(t, memberLine, "serve to join")
	return p, memberLine.FindStringSubmatch(l)[1]
}

// agents are the running fake agents a node process started.
func agents(pid int) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil || st.PPID != pid || st.State == "Z" {
			continue
		}
		out = append(out, p.PID)
	}
	return out
}

// noAgentsLeft waits until no process the node started runs; a killed
// node's agents are found by their fake-agent environment instead.
func noAgentsLeft(t *testing.T, pid int, what string) {
	t.Helper()
	eventually(t, what, func() bool { return len(agents(pid)) == 0 })
}

// runningAgents are those of pids that still run (a dead node's agents
// are reparented, so they are followed by pid).
func runningAgents(pids []int) []int {
	var live []int
	for _, pid := range pids {
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue
		}
		if st, err := p.Stat(); err == nil && st.State != "Z" {
			live = append(live, pid)
		}
	}
	return live
}

// delegateArgs are the flags of a delegate -cluster on m.
func delegateArgs(m member, how membership, args ...string) []string {
	return append(append([]string{"delegate", "-cluster", "-provider", "fake"}, how(m)...), args...)
}

var (
	textDelta  = regexp.MustCompile(`"kind":"text-delta"`)
	startEvent = regexp.MustCompile(`"type":"subagent/start"`)
	endEvent   = regexp.MustCompile(`"type":"subagent/end"`)
)

// Contracts K1, P4, R1, R3: a parent on node A delegates to the ACP agent
// offered only by node B: the child runs on B (B's agent process), A
// gets its start (local=false: no local agent), progress and result, and
// once A disposed it B's agent process is gone. Static member list.
func TestK1_P4_DelegatesToAnACPChildOnAnotherNodeStatic(t *testing.T) {
	a, b := newMember(t), newMember(t)
	testDelegatesRemotely(t, a, b, static(a, b))
}

// Contracts K1, P4, R1, R3: the same with the membership in a real etcd.
func TestK1_P4_DelegatesToAnACPChildOnAnotherNodeEtcd(t *testing.T) {
	testDelegatesRemotely(t, newMember(t), newMember(t), etcdServer(t))
}

func testDelegatesRemotely(t *testing.T, a, b member, how membership) {
	nodeB, idB := serve(t, b, how)
	caller := startNode(t, delegateArgs(a, how, "-json", "hello there")...)
	start := caller.line(t, startEvent, "the child's start event")
	if strings.Contains(start, `"local":true`) || strings.Contains(start, `"sessionId"`) {
		t.Fatalf("start event %s: want local false and no session here", start)
	}
	// The run's first progress names the member hosting it.
	if hosted := caller.line(t, regexp.MustCompile(`"type":"subagent/progress"`), "the child's first progress"); !strings.Contains(hosted, `"kind":"remote-hosted-by","text":"`+idB+`"`) {
		t.Fatalf("first progress %s, want it hosted by %s", hosted, idB)
	}
	caller.line(t, regexp.MustCompile(`"kind":"tool-call-started"`), "the child's progress")
	if code := caller.rest(t); code != 0 {
		t.Fatalf("delegate exit %d; stdout %q; stderr %s", code, caller.all, caller.stderr.String())
	}
	last := caller.all[len(caller.all)-1]
	if !strings.Contains(last, `"type":"node/result"`) || !strings.Contains(last, `"stopReason":"completed"`) || !strings.Contains(last, `echo: hello there`) {
		t.Fatalf("result line %s", last)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent process to be gone after the dispose")

	// Without -json, stderr names the hosting member once the run is
	// placed; -log-level debug shows the node's debug logs too.
	_, stderr, code := node(t, t.TempDir(), delegateArgs(a, how, "-log-level", "debug", "hello again")...)
	if want := regexp.MustCompile(`(?m)^child \S{12} \[hello again\] hosted by member ` + regexp.QuoteMeta(idB) + `$`); code != 0 || !want.MatchString(stderr) {
		t.Fatalf("delegate exit %d, stderr %q; want a line matching %s", code, stderr, want)
	}
	if want := `level=DEBUG msg="remote: run placed"`; !strings.Contains(stderr, want) || !strings.Contains(stderr, "member="+idB) {
		t.Fatalf("delegate -log-level debug: stderr %q, want %q naming %s", stderr, want, idB)
	}
}

// Contracts K1, R3, S5: Ctrl-C on A mid-turn cancels the child on B
// (session/cancel reaches the agent): it ends aborted, and B's agent
// process is gone once A disposed the run.
func TestK1_CancelAndDisposeReachTheHostingNode(t *testing.T) {
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	nodeB, _ := serve(t, b, how)
	caller := startNode(t, delegateArgs(a, how, "-json", "wait for it")...)
	caller.line(t, textDelta, "the child's first text")
	if n := len(agents(nodeB.cmd.Process.Pid)); n != 1 {
		t.Fatalf("B runs %d agents, want 1", n)
	}
	if err := caller.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := caller.rest(t); code != 130 || !strings.Contains(caller.stderr.String(), "the child ended aborted") {
		t.Fatalf("delegate exit %d, stderr %s", code, caller.stderr.String())
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent process to be gone after the cancel")
}

// Contract P4: of two nodes offering the provider, a run goes to the one
// with more room; when every one is full, a start is refused with an
// error saying so.
func TestP4_PlacementPrefersTheLessLoadedAndRefusesWhenFull(t *testing.T) {
	a1, a2, a3, b1, b2 := newMember(t), newMember(t), newMember(t), newMember(t), newMember(t)
	how := static(a1, a2, a3, b1, b2)
	node1, _ := serve(t, b1, how, "-capacity", "1")
	node2, _ := serve(t, b2, how, "-capacity", "1")
	first := startNode(t, delegateArgs(a1, how, "-json", "wait one")...)
	first.line(t, textDelta, "the first child's text")
	second := startNode(t, delegateArgs(a2, how, "-json", "wait two")...)
	second.line(t, textDelta, "the second child's text")
	n1, n2 := len(agents(node1.cmd.Process.Pid)), len(agents(node2.cmd.Process.Pid))
	if n1 != 1 || n2 != 1 {
		t.Fatalf("agents on the two nodes: %d and %d, want one each (the second run on the less loaded)", n1, n2)
	}
	third := startNode(t, delegateArgs(a3, how, "wait three")...)
	if code := third.rest(t); code != exitFailed || !strings.Contains(third.stderr.String(), "no member took a run of provider \"fake\"") ||
		!strings.Contains(third.stderr.String(), "full") {
		t.Fatalf("third delegate exit %d, stderr %s", code, third.stderr.String())
	}
	for _, p := range []*process{first, second} {
		_ = p.cmd.Process.Signal(os.Interrupt)
		p.rest(t)
	}
}

// Contract K2: SIGKILL of the hosting node mid-run settles the caller's
// run error, naming the node, within the static list's loss bound.
func TestK2_KilledHostSettlesTheRunErrorNamingTheNode(t *testing.T) {
	a, b := newMember(t), newMember(t)
	testHostLoss(t, a, b, static(a, b), false, syscall.SIGKILL)
}

// Contract K2: a frozen hosting node (SIGSTOP keeps its sockets open, so
// only membership notices) settles the caller's run error, naming the
// node, within the loss bound; once thawed (SIGCONT) it finds its run's
// caller gone and disposes the run: its agent process ends.
func TestK2_FrozenHostSettlesTheRunAndDisposesItWhenThawed(t *testing.T) {
	a, b := newMember(t), newMember(t)
	testHostLoss(t, a, b, static(a, b), false, syscall.SIGSTOP)
}

// Contract K2: the same with the membership in etcd, whose lease TTL
// bounds how long a frozen member stays.
func TestK2_FrozenHostSettlesTheRunAndDisposesItWhenThawedEtcd(t *testing.T) {
	testHostLoss(t, newMember(t), newMember(t), etcdServer(t), true, syscall.SIGSTOP)
}

func testHostLoss(t *testing.T, a, b member, how membership, etcd bool, sig syscall.Signal) {
	nodeB, idB := serve(t, b, how)
	caller := startNode(t, delegateArgs(a, how, "-json", "wait for it")...)
	caller.line(t, textDelta, "the child's first text")
	onB := agents(nodeB.cmd.Process.Pid)
	if len(onB) != 1 {
		t.Fatalf("B runs %d agents, want 1", len(onB))
	}
	if err := nodeB.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	end := caller.line(t, endEvent, "the run's end")
	took := time.Since(lost)
	code := caller.rest(t)
	if !strings.Contains(end, `"stopReason":"error"`) || code != exitFailed || !strings.Contains(caller.stderr.String(), "the child ended error") || !strings.Contains(caller.stderr.String(), idB) {
		t.Fatalf("delegate exit %d, stderr %s", code, caller.stderr.String())
	}
	// The README's bound: a probe's timeout and two refreshes (static) or
	// the lease with its granularity and the probe that confirms the
	// loss (etcd), plus a 2 s margin.
	bound := 6 * time.Second
	if etcd {
		bound = 8 * time.Second
	}
	if bound := testkit.Scale(bound); took > bound {
		t.Fatalf("the run settled %s after the node was lost, past the bound %s", took, bound)
	}
	if sig == syscall.SIGSTOP {
		if err := nodeB.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "B's agent process to end", func() bool { return len(runningAgents(onB)) == 0 })
}

// midRun starts a node B serving the fake agent and a caller whose child
// on B is mid-turn (it waits to be cancelled).
func midRun(t *testing.T) (nodeB, caller *process) {
	t.Helper()
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	nodeB, _ = serve(t, b, how)
	caller = startNode(t, delegateArgs(a, how, "-json", "wait for it")...)
	caller.line(t, textDelta, "the child's first text")
	return nodeB, caller
}

// Contract K2: when the caller's node is killed, the hosting node
// cancels and disposes the run it held for it: no orphaned agent.
func TestK2_KilledCallerHasItsRunsDisposed(t *testing.T) {
	nodeB, caller := midRun(t)
	if err := caller.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	caller.rest(t)
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B to dispose the dead caller's run")
	// B stays a working member.
	if nodeB.cmd.ProcessState != nil {
		t.Fatalf("B ended: %s", nodeB.stderr.String())
	}
}

// Contract K3: serve on a non-loopback address without TLS exits 2 with
// a message saying why.
func TestK3_ServeBeyondLoopbackWithoutTLSExitsTwo(t *testing.T) {
	_, stderr, code := node(t, t.TempDir(), "serve", "-listen", "0.0.0.0:7399", "-peers", "127.0.0.1:7400")
	if code != exitUsage || !strings.Contains(stderr, "listening beyond loopback needs mutual TLS") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

func newCA(t *testing.T, name string) ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c := ca{cert: cert, key: key, file: filepath.Join(t.TempDir(), name+".pem")}
	writePEM(t, c.file, "CERTIFICATE", der)
	return c
}

// issue makes a node certificate for 127.0.0.1 and returns the -tls-*
// flags that use it.
func (c ca) issue(t *testing.T, name string) []string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return []string{"-tls-ca", c.file, "-tls-cert", certFile, "-tls-key", keyFile}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Contract K3: node-to-node traffic is mutual TLS. A caller with a
// certificate from the cluster's CA delegates to B; one with a
// certificate from another CA, and one without TLS, do not even see B
// as a member (membership is under the same TLS) and cannot start a run
// there (nothing starts on B).
func TestK3_MutualTLSRefusesPeersWithoutACertificateFromTheCA(t *testing.T) {
	good, other := newCA(t, "cluster-ca"), newCA(t, "other-ca")
	a1, a2, a3, b := newMember(t), newMember(t), newMember(t), newMember(t)
	how := static(a1, a2, a3, b)
	nodeB, _ := serve(t, b, how, good.issue(t, "b")...)

	trusted := startNode(t, delegateArgs(a1, how, append(good.issue(t, "a1"), "hello over TLS")...)...)
	if code := trusted.rest(t); code != 0 || !slices.ContainsFunc(trusted.all, func(l string) bool { return strings.Contains(l, "echo: hello over TLS") }) {
		t.Fatalf("trusted caller: exit %d, stdout %q, stderr %s", code, trusted.all, trusted.stderr.String())
	}
	for _, c := range []struct {
		name  string
		flags []string
		m     member
	}{
		{"a certificate from another CA", other.issue(t, "a2"), a2},
		{"no TLS", nil, a3},
	} {
		caller := startNode(t, delegateArgs(c.m, how, append(c.flags, "wait for it")...)...)
		if code := caller.rest(t); code != exitFailed || !strings.Contains(caller.stderr.String(), `no live member offers provider "fake"`) {
			t.Fatalf("caller with %s: exit %d, stderr %s", c.name, code, caller.stderr.String())
		}
		if n := len(agents(nodeB.cmd.Process.Pid)); n != 0 {
			t.Fatalf("caller with %s started %d agents on B", c.name, n)
		}
	}
}

// Contracts K1, K2: SIGTERM makes serve leave gracefully: the run it
// hosts is cancelled and its caller told (the child ends aborted, not
// lost), its agent process ends, and serve exits 0.
func TestK2_ServeLeavesGracefullyOnSIGTERM(t *testing.T) {
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	nodeB, _ := serve(t, b, how)
	caller := startNode(t, delegateArgs(a, how, "-json", "wait for it")...)
	caller.line(t, textDelta, "the child's first text")
	onB := agents(nodeB.cmd.Process.Pid)
	if err := nodeB.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	end := caller.line(t, endEvent, "the run's end")
	if !strings.Contains(end, `"stopReason":"aborted"`) {
		caller.rest(t)
		t.Fatalf("end event %s, stdout %q, stderr %s, B stderr %s", end, caller.all, caller.stderr.String(), nodeB.stderr.String())
	}
	caller.rest(t)
	if code := nodeB.rest(t); code != 0 {
		t.Fatalf("serve exit %d, stderr %s", code, nodeB.stderr.String())
	}
	if live := runningAgents(onB); len(live) != 0 {
		t.Fatalf("agents %v outlived serve", live)
	}
}

// Contract K1: status prints every member with its providers, capacity
// and runs.
func TestK1_StatusPrintsMembersProvidersCapacityAndRuns(t *testing.T) {
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	_, idB := serve(t, b, how, "-capacity", "2")
	status := startNode(t, append([]string{"status"}, how(a)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	want := fmt.Sprintf("%s %s providers=[fake] capacity=2 runs=0", idB, b.listen)
	if !slices.Equal(status.all, []string{want}) {
		t.Fatalf("status printed %q, want the one member's line %q (not status's own client)", status.all, want)
	}
	status = startNode(t, append([]string{"status", "-json"}, how(a)...)...)
	if code := status.rest(t); code != 0 || len(status.all) != 1 {
		t.Fatalf("status -json exit %d, stdout %q, stderr %s", code, status.all, status.stderr.String())
	}
	var m jsonMember
	if err := json.Unmarshal([]byte(status.all[0]), &m); err != nil || m.ID != idB || m.Address != b.listen || m.Capacity != 2 || !slices.Equal(m.Providers, []string{"fake"}) {
		t.Fatalf("status -json line %q (%v)", status.all[0], err)
	}
}

// Contract K1: members gossip their load as runs come and go: a status
// that joins while a caller's child runs on B reads runs=1 for B from
// B's gossiped state, without asking B, and runs=0 once the caller ended.
func TestK1_MembersGossipTheirLoad(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	_, idB := serve(t, b, how, "-capacity", "2")
	caller := startNode(t, delegateArgs(a, how, "-json", "wait for it")...)
	caller.line(t, textDelta, "the child's first text")
	statusLine := func(runs int) string {
		return fmt.Sprintf("%s %s providers=[fake] capacity=2 runs=%d", idB, b.listen, runs)
	}
	status := startNode(t, append([]string{"status"}, how(c)...)...)
	if code := status.rest(t); code != 0 || !slices.Contains(status.all, statusLine(1)) {
		t.Fatalf("status mid-run: exit %d, printed %q, want %q; stderr %s", code, status.all, statusLine(1), status.stderr.String())
	}
	terminate(t, caller)
	eventually(t, "B to gossip that it hosts no run", func() bool {
		status := startNode(t, append([]string{"status"}, how(c)...)...)
		return status.rest(t) == 0 && slices.Contains(status.all, statusLine(0))
	})
}

// Contracts K1, K3: serve takes its cluster keys from the -config file
// beside agent_servers (the flags win); an unknown key there is a usage
// error, exit 2, naming it.
func TestK1_ServeReadsTheClusterKeysOfTheConfigFile(t *testing.T) {
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	config := writeConfig(t, fmt.Sprintf(`{"agent_servers": {"fake": %s}, "cluster": {"listen": %q, "peers": [%q, %q], "capacity": 3}}`,
		fakeServer(t), b.listen, a.membership, b.membership))
	p := startNode(t, "serve", "-config", config)
	idB := memberLine.FindStringSubmatch(p.line(t, memberLine, "serve to join"))[1]
	status := startNode(t, append([]string{"status"}, how(a)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	if want := fmt.Sprintf("%s %s providers=[fake] capacity=3 runs=0", idB, b.listen); !slices.Contains(status.all, want) {
		t.Fatalf("status printed %q, want %q", status.all, want)
	}

	bad := writeConfig(t, `{"agent_servers": {"fake": `+fakeServer(t)+`}, "cluster": {"Listen": "127.0.0.1:1"}}`)
	_, stderr, code := node(t, t.TempDir(), "serve", "-config", bad)
	if code != exitUsage || !strings.Contains(stderr, `unknown key "Listen" in "cluster"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// Contract K2: a caller's node that ends is told apart from a new one on
// the same address: a delegate right after another node left that
// address keeps its run (the host disposes runs of a member that left,
// not of an address that once lost its connection), and its start is
// answered (the host admits it once membership names it, its answers no
// longer going to the earlier member's connection), several times in a
// row.
func TestK2_ANewCallerOnAReusedAddressKeepsItsRun(t *testing.T) {
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	serve(t, b, how)
	status := startNode(t, append([]string{"status"}, how(a)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	for i := range 4 {
		caller := startNode(t, delegateArgs(a, how, "-quiet", "hello again")...)
		if code := caller.rest(t); code != 0 {
			t.Fatalf("delegate %d on the reused address: exit %d, stderr %s", i+1, code, caller.stderr.String())
		}
	}
}

// Contract K2: a frozen caller (SIGSTOP: its connections stay open) is
// dropped by membership, and the hosting node then disposes the run it
// held for it: its agent process ends.
func TestK2_FrozenCallerHasItsRunsDisposed(t *testing.T) {
	nodeB, caller := midRun(t)
	if err := caller.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B to dispose the frozen caller's run")
}

// Contracts K1, K3: status and delegate -cluster take the cluster flags
// they are not given from the "cluster" object of -config, as serve does,
// and a flag given wins (here -listen over a listen address the node
// would refuse); an unknown key there is a usage error, exit 2.
func TestK1_StatusAndDelegateReadTheClusterKeysOfTheConfigFile(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	_, idB := serve(t, b, how, "-capacity", "2")
	peers := fmt.Sprintf(`[%q, %q, %q]`, a.membership, b.membership, c.membership)

	statusConfig := writeConfig(t, fmt.Sprintf(`{"cluster": {"listen": "0.0.0.0:7399", "peers": %s}}`, peers))
	status := startNode(t, "status", "-config", statusConfig, "-listen", a.listen)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	if want := fmt.Sprintf("%s %s providers=[fake] capacity=2 runs=0", idB, b.listen); !slices.Contains(status.all, want) {
		t.Fatalf("status printed %q, want %q", status.all, want)
	}

	delegateConfig := writeConfig(t, fmt.Sprintf(`{"agent_servers": {"other": %s}, "cluster": {"listen": %q, "peers": %s}}`, fakeServer(t), c.listen, peers))
	caller := startNode(t, "delegate", "-cluster", "-provider", "fake", "-config", delegateConfig, "hello from the file")
	if code := caller.rest(t); code != 0 || !slices.ContainsFunc(caller.all, func(l string) bool { return strings.Contains(l, "echo: hello from the file") }) {
		t.Fatalf("delegate exit %d, stdout %q, stderr %s", code, caller.all, caller.stderr.String())
	}

	bad := writeConfig(t, `{"cluster": {"peer": ["127.0.0.1:1"]}}`)
	for _, args := range [][]string{{"status", "-config", bad}, {"delegate", "-cluster", "-provider", "fake", "-config", bad, "hi"}} {
		_, stderr, code := node(t, t.TempDir(), args...)
		if code != exitUsage || !strings.Contains(stderr, `unknown key "peer" in "cluster"`) {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// Contract K1: serve offers its model with -offer-model (or the config's
// "offer_model") beside its agent servers, and refuses a name an agent
// server has, with exit 2. Its children have run's file tools over serve's
// -dir: a peer's "survey DIR" surveys it (the README's steer example).
func TestK1_ServeOffersItsModel(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	root := writeTree(t)
	config := writeConfig(t, `{"agent_servers": {"fake": `+fakeServer(t)+`}, "cluster": {"offer_model": "model"}}`)
	p := startNode(t, append([]string{"serve", "-config", config, "-dir", root}, how(b)...)...)
	if l := p.line(t, memberLine, "serve to join"); !strings.Contains(l, "offering [fake model]") {
		t.Fatalf("serve says %q, want it offering fake and model", l)
	}
	args := append([]string{"delegate", "-cluster", "-provider", "model"}, how(c)...)
	stdout, stderr, code := node(t, t.TempDir(), append(args, "survey "+root)...)
	head := fmt.Sprintf("survey %s: ", root)
	folders := fmt.Sprintf(" in %d folders (0 delegated)", countFolders(t, root)) // more than one
	if _, rest := cutSession(t, stdout); code != 0 || !strings.HasPrefix(strings.TrimSpace(rest), head) || !strings.Contains(rest, folders) {
		t.Fatalf("the model child's survey: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = node(t, t.TempDir(), append([]string{"serve", "-config", config, "-offer-model", "fake"}, how(a)...)...)
	if code != exitUsage || !strings.Contains(stderr, `-offer-model "fake" is also an agent server`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// Logs (issue 27): a client's normal leave logs nothing on a member at
// the default level: the member's "member left" is info and protoactor's
// routine warnings (a gossip timeout to the leaver) are below its error
// level. A member at -log-level info, the control, shows the leave.
func TestK1_ClientLeaveLogsNothingByDefault(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	control := exec.Command(bin, append([]string{"serve", "-offer-model", "m", "-log-level", "info"}, how(b)...)...)
	control.Env = slices.Concat(os.Environ(), withData(t.TempDir()))
	controlLogs := startErrLines(t, control)
	t.Cleanup(func() {
		_ = control.Process.Kill()
		_ = control.Wait()
	})
	quiet, _ := serve(t, c, how)
	status := startNode(t, append([]string{"status"}, how(a)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	ctx := testkit.Ctx(t)
	for left := false; !left; {
		select {
		case l, ok := <-controlLogs:
			if !ok {
				t.Fatal("the control member ended before it logged the client's leave")
			}
			left = strings.Contains(l, `msg="cluster: member left"`)
		case <-ctx.Done():
			t.Fatal("waited for the control member to log the client's leave")
		}
	}
	go func() {
		for range controlLogs { // until it is killed
		}
	}()
	_ = quiet.cmd.Process.Signal(syscall.SIGTERM)
	if code := quiet.rest(t); code != 0 || strings.Contains(quiet.stderr.String(), "level=") {
		t.Fatalf("serve exit %d, logs at the default level after a client's leave:\n%s", code, quiet.stderr.String())
	}
}
