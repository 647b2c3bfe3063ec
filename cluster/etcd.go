package cluster

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
)

// etcdMembers is the cluster's membership kept in etcd, in place of
// protoactor's etcd provider, which dissolves the cluster when etcd comes
// back from an outage: a member whose lease ran out before its client
// reconnected has its key deleted, and protoactor never lets a member
// that left back in (it blocks its id, and gossips the block to every
// member, that one included); the provider also drops itself when its
// own key is deleted and skips its own key when it is put again.
//
// Here a key in etcd admits a member (once it answers a probe under the
// node's transport security, so a node without a valid certificate is
// never one), and a member whose key went stays one while it answers
// probes: an etcd outage, or a lease lost to one, drops nobody alive.
// This node is always a member.
type etcdMembers struct {
	n      *Node
	client *clientv3.Client
	prefix string // <base>/<cluster name>/, followed by a member's id
	self   *cluster.Member
	cl     *cluster.Cluster
	ctx    context.Context // ends at Shutdown
	cancel context.CancelFunc
}

// probeInterval is how often a member without a key in etcd, or not yet
// admitted, is probed.
const probeInterval = 500 * time.Millisecond

func newEtcdMembers(n *Node, base string) (*etcdMembers, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: n.cfg.Etcd, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdMembers{n: n, client: client, prefix: base + "/" + n.cfg.Name + "/", ctx: ctx, cancel: cancel}, nil
}

// StartMember registers this member and reads the others, within the
// join timeout, then follows etcd until Shutdown.
func (e *etcdMembers) StartMember(c *cluster.Cluster) error {
	self, err := selfMember(c)
	if err != nil {
		return err
	}
	e.self, e.cl = self, c
	ctx, cancel := context.WithTimeout(e.ctx, e.n.cfg.JoinTimeout)
	defer cancel()
	lease, err := e.register(ctx)
	if err != nil {
		return err
	}
	resp, err := e.client.Get(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	publish(c, e.self, nil)
	keys := make(chan map[string]*cluster.Member)
	go e.keepAlive(lease)
	go e.watch(resp, keys)
	go e.run(keys)
	return nil
}

// StartClient is not used: every node is a member.
func (e *etcdMembers) StartClient(*cluster.Cluster) error {
	return errors.New("cluster: etcd membership has no client mode")
}

// Shutdown deletes this member's key (bounded, since etcd may be down:
// then its lease ends it) and stops following etcd.
func (e *etcdMembers) Shutdown(bool) error {
	e.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), providerStopWait)
	defer cancel()
	var err error
	if e.self != nil {
		_, err = e.client.Delete(ctx, e.prefix+e.self.Id)
	}
	e.client.Close()
	return err
}

// register puts this member's key under a new lease.
func (e *etcdMembers) register(ctx context.Context) (clientv3.LeaseID, error) {
	value, err := protojson.Marshal(e.self)
	if err != nil {
		return 0, err
	}
	lease, err := e.client.Grant(ctx, int64(etcdLeaseTTL/time.Second))
	if err != nil {
		return 0, err
	}
	_, err = e.client.Put(ctx, e.prefix+e.self.Id, string(value), clientv3.WithLease(lease.ID))
	return lease.ID, err
}

// keepAlive refreshes the lease a third of its TTL at a time, and
// registers again when etcd no longer knows it (it ran out while etcd,
// or the way to it, was down).
func (e *etcdMembers) keepAlive(lease clientv3.LeaseID) {
	tick := time.NewTicker(etcdLeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(e.ctx, etcdLeaseTTL/3)
		_, err := e.client.KeepAliveOnce(ctx, lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			if l, err := e.register(ctx); err == nil {
				lease = l
				e.n.logger().Info("cluster: registered in etcd again, its lease had run out")
			}
		}
		cancel()
	}
}

// watch sends the members with a key in etcd on keys at each change,
// reading them again when the watch ends (etcd compacted its history).
func (e *etcdMembers) watch(resp *clientv3.GetResponse, keys chan<- map[string]*cluster.Member) {
	ks := map[string]*cluster.Member{}
	for e.ctx.Err() == nil {
		if resp == nil {
			ctx, cancel := context.WithTimeout(e.ctx, etcdLeaseTTL)
			resp, _ = e.client.Get(ctx, e.prefix, clientv3.WithPrefix())
			cancel()
			if resp == nil {
				select {
				case <-e.ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
		}
		clear(ks)
		for _, kv := range resp.Kvs {
			e.apply(ks, kv, false)
		}
		rev := resp.Header.Revision
		resp = nil
		e.send(keys, ks)
		wctx, wcancel := context.WithCancel(e.ctx)
		for wr := range e.client.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				e.apply(ks, ev.Kv, ev.Type == clientv3.EventTypeDelete)
			}
			e.send(keys, ks)
		}
		wcancel()
	}
}

func (e *etcdMembers) send(keys chan<- map[string]*cluster.Member, ks map[string]*cluster.Member) {
	select {
	case keys <- maps.Clone(ks):
	case <-e.ctx.Done():
	}
}

// apply records one key of etcd in ks; a value that is not a member
// under its own id is logged and left out.
func (e *etcdMembers) apply(ks map[string]*cluster.Member, kv *mvccpb.KeyValue, deleted bool) {
	id := strings.TrimPrefix(string(kv.Key), e.prefix)
	if deleted {
		delete(ks, id)
		return
	}
	m := decodeMember(kv.Value, id)
	if m == nil || id == "" {
		e.n.logger().Warn("cluster: not a member's key in etcd", "key", string(kv.Key))
		return
	}
	ks[id] = m
}

// follower is another member as this one follows it.
type follower struct {
	m        *cluster.Member
	keyed    bool // its key is in etcd
	admitted bool // it answered a probe: it is a member
	probing  bool
	now      bool // the next probe goes at once, not after probeInterval
}

type probed struct {
	id, address string
	ok          bool
}

// run keeps the topology: members with a key, once admitted, and
// members without one while they answer probes.
func (e *etcdMembers) run(keys <-chan map[string]*cluster.Member) {
	peers := map[string]*follower{}
	results := make(chan probed)
	for {
		select {
		case <-e.ctx.Done():
			return
		case ks := <-keys:
			for id, m := range ks {
				if id == e.self.Id {
					continue
				}
				p := peers[id]
				if p == nil || p.m.Address() != m.Address() {
					p = &follower{now: true} // an address not probed yet
					peers[id] = p
				}
				p.m, p.keyed = m, true
			}
			for id, p := range peers {
				if _, ok := ks[id]; !ok && p.keyed {
					p.keyed, p.now = false, true
				}
			}
		case r := <-results:
			p := peers[r.id]
			if p == nil || p.m.Address() != r.address {
				continue
			}
			p.probing = false
			switch {
			case r.ok:
				p.admitted = true
			case !p.keyed:
				delete(peers, r.id)
			}
		}
		for id, p := range peers {
			if p.probing || (p.keyed && p.admitted) {
				continue
			}
			if !p.keyed && !p.admitted {
				delete(peers, id)
				continue
			}
			delay := probeInterval
			if p.now {
				delay = 0
			}
			p.probing, p.now = true, false
			go e.probe(id, p.m.Address(), delay, results)
		}
		e.publish(peers)
	}
}

func (e *etcdMembers) probe(id, address string, delay time.Duration, results chan<- probed) {
	select {
	case <-e.ctx.Done():
		return
	case <-time.After(delay):
	}
	r := probed{id: id, address: address, ok: e.n.answers(e.ctx, id, address)}
	select {
	case results <- r:
	case <-e.ctx.Done():
	}
}

// publish hands the admitted members and this one to protoactor.
func (e *etcdMembers) publish(followed map[string]*follower) {
	var ms []*cluster.Member
	for _, f := range followed {
		if f.admitted {
			ms = append(ms, f.m)
		}
	}
	publish(e.cl, e.self, ms)
}

// answers reports whether the member id answers at address, under this
// node's transport security, within probeTimeout: protoactor's remoting
// handshake names the member that answers, so a member that died, froze
// or holds no certificate of the CA does not, nor does another process
// restarted on its address.
func (n *Node) answers(ctx context.Context, id, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, address, grpc.WithTransportCredentials(n.creds))
	if err != nil {
		return false
	}
	defer conn.Close()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return false
	}
	hello := &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
		ServerConnection: &remote.ServerConnection{SystemId: n.ID(), Address: n.Address()}}}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: hello}}); err != nil {
		return false
	}
	answer, err := stream.Recv()
	return err == nil && answer.GetConnectResponse().GetMemberId() == id
}
