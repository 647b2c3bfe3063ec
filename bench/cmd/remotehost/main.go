// Command remotehost is a cluster node for bench.Remote: it joins the
// static member list given, offers the in-process echo provider (no agent
// process, so the wire and the run machinery are what is measured),
// prints "ready" and runs until its stdin closes. A line "heap" on stdin
// is answered on stdout with the Go heap in use after a collection and the
// goroutines running, and "free" by returning freed memory to the system
// first (bench.RemoteMemory reads what holds a host's memory this way).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/subagent"
)

func main() {
	listen := flag.String("listen", "", "HOST:PORT")
	peers := flag.String("peers", "", "membership addresses, HOST:PORT,...")
	capacity := flag.Int("capacity", 1<<20, "runs hosted at once")
	flag.Parse()
	// The echo's children are run actors, as real providers' are.
	sys := actors.NewSystem()
	n, err := cluster.Start(context.Background(), cluster.Config{
		Listen: *listen, Peers: strings.Split(*peers, ","), Capacity: *capacity, System: sys,
		Providers: []subagent.Provider{clustertest.Echo{System: sys}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "remotehost:", err)
		os.Exit(1)
	}
	fmt.Println("ready", n.ID())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "heap":
			runtime.GC() // twice: a sync.Pool keeps its items one collection longer
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Println("heap", m.HeapInuse, runtime.NumGoroutine())
		case "free":
			debug.FreeOSMemory()
			fmt.Println("freed")
		}
	}
	n.Stop()
}
