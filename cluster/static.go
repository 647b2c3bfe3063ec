package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/encoding/protojson"
)

// staticMembers is the membership of a static list, in place of
// protoactor's automanaged provider, whose health endpoint is plain HTTP
// (it answered anyone with every member's id, address and providers, and
// listed a node without a certificate as a member of an mTLS cluster).
// Each node answers its member on its membership address, under the
// node's mutual TLS when it has TLS; every staticRefresh a node asks each
// listed address, and those that answered within staticProbeTimeout, and
// this node, are the members.
type staticMembers struct {
	n      *Node
	hosts  []string // the others' membership addresses
	url    string   // the member endpoint's path
	scheme string
	client *http.Client
	lis    net.Listener
	self   *cluster.Member
	cl     *cluster.Cluster
	ctx    context.Context // ends at Shutdown
	cancel context.CancelFunc
}

// maxMemberAnswer bounds the body of a member's answer.
const maxMemberAnswer = 64 << 10

func newStaticMembers(n *Node, server, client *tls.Config) (*staticMembers, error) {
	lis, err := net.Listen("tcp", n.cfg.MemberListen)
	if err != nil {
		return nil, fmt.Errorf("cluster: membership address: %w", err)
	}
	s := &staticMembers{n: n, url: "/subactor/" + url.PathEscape(n.cfg.Name), scheme: "http", lis: lis,
		client: &http.Client{Timeout: staticProbeTimeout, Transport: &http.Transport{TLSClientConfig: client}}}
	if server != nil {
		s.scheme, s.lis = "https", tls.NewListener(lis, server)
	}
	for _, h := range n.cfg.Peers {
		if h != n.cfg.MemberListen {
			s.hosts = append(s.hosts, h)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// StartMember answers this member on the membership address and asks
// the listed ones until Shutdown.
func (s *staticMembers) StartMember(c *cluster.Cluster) error {
	self, err := selfMember(c)
	if err != nil {
		return err
	}
	s.self, s.cl = self, c
	answer, err := protojson.Marshal(self)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+s.url, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	// A peer without a certificate of the CA fails its handshake: logged
	// at debug, since a misconfigured peer asks every second.
	s.n.health = &http.Server{Handler: mux, ReadHeaderTimeout: staticProbeTimeout,
		ErrorLog: slog.NewLogLogger(s.n.logger().Handler(), slog.LevelDebug)}
	go func() { _ = s.n.health.Serve(s.lis) }()
	publish(c, self, nil)
	go s.run()
	return nil
}

// StartClient is not used: every node is a member.
func (s *staticMembers) StartClient(*cluster.Cluster) error {
	return fmt.Errorf("cluster: a static list has no client mode")
}

// Shutdown stops asking; the node closes the membership endpoint.
func (s *staticMembers) Shutdown(bool) error {
	s.cancel()
	s.client.CloseIdleConnections()
	return nil
}

func (s *staticMembers) run() {
	for {
		found := make([]*cluster.Member, len(s.hosts))
		var wg sync.WaitGroup
		for i, h := range s.hosts {
			wg.Go(func() { found[i] = s.ask(h) })
		}
		wg.Wait()
		var others []*cluster.Member
		for _, m := range found {
			if m != nil && m.Id != s.self.Id {
				others = append(others, m)
			}
		}
		select {
		case <-s.ctx.Done():
			return
		default:
		}
		publish(s.cl, s.self, others)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(staticRefresh):
		}
	}
}

// ask asks the membership address host for its member: nil unless it
// answered one of this cluster.
func (s *staticMembers) ask(host string) *cluster.Member {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.scheme+"://"+host+s.url, nil)
	if err != nil {
		return nil
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMemberAnswer))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return decodeMember(body, "")
}

// selfMember is this node as a member: its id, actors' address and
// kinds.
func selfMember(c *cluster.Cluster) (*cluster.Member, error) {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return nil, err
	}
	return &cluster.Member{Id: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()}, nil
}

// decodeMember reads a member's answer or etcd key; nil unless it is a
// member, under id when id is not empty.
func decodeMember(b []byte, id string) *cluster.Member {
	var m cluster.Member
	if err := protojson.Unmarshal(b, &m); err != nil || m.Id == "" || (id != "" && m.Id != id) || m.Port <= 0 || m.Port > 65535 {
		return nil
	}
	return &m
}

// publish hands this member and the others to protoactor, which does
// nothing when they did not change.
func publish(c *cluster.Cluster, self *cluster.Member, others []*cluster.Member) {
	c.MemberList.UpdateClusterTopology(append([]*cluster.Member{self}, others...))
}
