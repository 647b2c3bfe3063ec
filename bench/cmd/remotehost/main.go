// Command remotehost is a cluster node for bench.Remote: it joins the
// static member list given, offers the in-process echo provider (no agent
// process, so the wire and the run machinery are what is measured),
// prints "ready" and runs until its stdin closes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/subagent"
)

func main() {
	listen := flag.String("listen", "", "HOST:PORT")
	peers := flag.String("peers", "", "membership addresses, HOST:PORT,...")
	capacity := flag.Int("capacity", 1<<20, "runs hosted at once")
	flag.Parse()
	n, err := cluster.Start(context.Background(), cluster.Config{
		Listen: *listen, Peers: strings.Split(*peers, ","), Capacity: *capacity,
		Providers: []subagent.Provider{clustertest.Echo{}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "remotehost:", err)
		os.Exit(1)
	}
	fmt.Println("ready", n.ID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	n.Stop()
}
