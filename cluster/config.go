package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/netguard"
	"github.com/subactor/subactor/subagent"
)

// Defaults for a Config's zero values.
const (
	defaultName        = "subactor"
	defaultCapacity    = 4
	defaultJoinTimeout = 10 * time.Second
	defaultMaxPrompt   = 1 << 20 // bytes of prompt text a remote start may carry
	// staticRefresh is how often a static-list member asks every listed
	// member for its member; one that does not answer within
	// staticProbeTimeout is dropped from the topology.
	staticRefresh      = time.Second
	staticProbeTimeout = 2 * time.Second
	// etcdLeaseTTL is the lease protoactor's etcd provider keeps a member's
	// key under: a member that stops refreshing it is dropped when it
	// expires.
	etcdLeaseTTL = 3 * time.Second
	// probeTimeout bounds a probe of a member whose etcd key went: one
	// that does not answer within it is dropped.
	probeTimeout = time.Second
)

// lossBound is how long, at most, a member that died or froze stays in
// the others' topology, plus a margin for scheduling on a loaded machine:
// the bound within which a caller's run on that member settles error (K2).
// Static list: a probe that times out plus two refresh rounds; etcd: the
// lease TTL, etcd's one-second lease granularity, a watch round and the
// probe that confirms the loss.
func lossBound(etcd bool) time.Duration {
	if etcd {
		return etcdLeaseTTL + 2*time.Second + probeTimeout + margin
	}
	return staticProbeTimeout + 2*staticRefresh + margin
}

const margin = 2 * time.Second

// Config configures a Node.
type Config struct {
	// Name is the cluster's name; members of different names ignore each
	// other. "subactor" when empty.
	Name string
	// Listen is the host:port the node's actors are reached at (gRPC).
	// A host other than a loopback address needs TLS or Insecure.
	Listen string
	// Peers is the static member list: the membership address (host:port)
	// of every member, this one's included or not. Used when Etcd is empty.
	Peers []string
	// MemberListen is this node's membership address for a static list;
	// Listen's host with its port plus one when empty.
	MemberListen string
	// Etcd lists etcd endpoints (host:port); when set, membership lives
	// in etcd under /subactor/<Name>.
	Etcd []string
	// Providers are the providers this node runs for its peers.
	Providers []subagent.Provider
	// Capacity is how many runs this node hosts at once for its peers;
	// 4 when 0.
	Capacity int
	// MaxPrompt bounds the prompt text of a start a peer asks for;
	// 1 MiB when 0.
	MaxPrompt int
	// TLS, when set, makes node-to-node traffic mutual TLS: a peer must
	// present a certificate from CA, and this node presents Cert.
	TLS *TLSFiles
	// Insecure allows a non-loopback Listen without TLS.
	Insecure bool
	// JoinTimeout bounds Start: past it, Start fails naming what it could
	// not reach. 10s when 0.
	JoinTimeout time.Duration
	// System is the actor runtime the node runs on (its providers' runs
	// live there too); the node makes one when nil. Its remote must not
	// have started: the node starts it. The caller shuts a System it
	// passed down after Leave.
	System *actors.System
	// Logger receives the node's and protoactor's logs; as in
	// actors.NewSystem when nil.
	Logger *slog.Logger
}

// TLSFiles names the PEM files of mutual TLS.
type TLSFiles struct {
	CA, Cert, Key string
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("cluster: bad configuration")

// errInsecureListen refuses a non-loopback listen address without TLS.
var errInsecureListen = fmt.Errorf("%w: listening beyond loopback needs mutual TLS (-tls-ca, -tls-cert, -tls-key) or an explicit -insecure, since peers start processes on this node", ErrConfig)

func configError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
}

// hostPort splits a listen address (netguard.Split).
func hostPort(addr, what string) (string, int, error) {
	h, port, err := netguard.Split(addr)
	if err != nil {
		return "", 0, configError("%s %q: %v", what, addr, err)
	}
	return h, port, nil
}

// withDefaults checks c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.Capacity == 0 {
		c.Capacity = defaultCapacity
	}
	if c.Capacity < 0 {
		return c, configError("capacity %d is negative", c.Capacity)
	}
	if c.JoinTimeout <= 0 {
		c.JoinTimeout = defaultJoinTimeout
	}
	if c.MaxPrompt == 0 {
		c.MaxPrompt = defaultMaxPrompt
	}
	host, port, err := hostPort(c.Listen, "listen address")
	if err != nil {
		return c, err
	}
	if c.TLS == nil && !c.Insecure && !netguard.Loopback(host) {
		return c, errInsecureListen
	}
	if len(c.Etcd) == 0 {
		if c.MemberListen == "" {
			if port == 0 {
				return c, configError("a static member list needs a fixed listen port (or -member-listen)")
			}
			c.MemberListen = net.JoinHostPort(host, strconv.Itoa(port+1))
		}
		mh, _, err := hostPort(c.MemberListen, "membership address")
		if err != nil {
			return c, err
		}
		if c.TLS == nil && !c.Insecure && !netguard.Loopback(mh) {
			return c, errInsecureListen
		}
	}
	seen := map[string]bool{}
	for _, p := range c.Providers {
		if p == nil || p.Name() == "" {
			return c, configError("a provider without a name")
		}
		if err := checkProviderName(p.Name()); err != nil {
			return c, configError("%v", err)
		}
		if seen[p.Name()] {
			return c, configError("provider %q offered twice", p.Name())
		}
		seen[p.Name()] = true
	}
	return c, nil
}

// tlsConfigs loads the files into the server's and the client's TLS
// configurations: each side requires the other's certificate to chain to
// the CA (TLS 1.3 only).
func (f *TLSFiles) tlsConfigs() (server, client *tls.Config, err error) {
	server, client, err = netguard.MutualTLS(f.CA, f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return server, client, nil
}
