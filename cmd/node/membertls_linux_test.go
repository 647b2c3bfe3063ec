package main

// Contract K3: membership is under the same mutual TLS as remoting.

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Contract K3: a node without TLS next to an mTLS cluster, offering the
// same agent server with more room, is neither listed by the members'
// status nor chosen for a run, with a static list and with etcd; the
// static list's membership endpoint answers no client without a
// certificate of the CA.
func TestK3_ANodeWithoutTLSNextToAnMTLSClusterIsNeitherListedNorChosen(t *testing.T) {
	for _, c := range []struct {
		name string
		how  func(ms ...member) membership
	}{
		{"static", static},
		{"etcd", func(...member) membership { return etcdServer(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			good := newCA(t, "cluster-ca")
			a, b, rogue, s := newMember(t), newMember(t), newMember(t), newMember(t)
			how := c.how(a, b, rogue, s)
			nodeB, idB := serve(t, b, how, append(good.issue(t, "b"), "-capacity", "1")...)
			nodeR, _ := serve(t, rogue, how, "-capacity", "8")

			status := startNode(t, append(append([]string{"status"}, how(s)...), good.issue(t, "s")...)...)
			if code := status.rest(t); code != 0 || len(status.all) != 1 || !strings.HasPrefix(status.all[0], idB+" ") {
				t.Fatalf("status exit %d, stdout %q, want B (%s) alone; stderr %s", code, status.all, idB, status.stderr.String())
			}
			caller := startNode(t, delegateArgs(a, how, append(good.issue(t, "a"), "-json", "wait for it")...)...)
			caller.line(t, textDelta, "the child's first text")
			if onB, onR := len(agents(nodeB.cmd.Process.Pid)), len(agents(nodeR.cmd.Process.Pid)); onB != 1 || onR != 0 {
				t.Fatalf("agents on B %d, on the node without TLS %d: want 1 and 0", onB, onR)
			}
			_ = caller.cmd.Process.Signal(os.Interrupt)
			caller.rest(t)

			if c.name == "static" {
				for _, client := range []*http.Client{
					http.DefaultClient,
					{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
				} {
					for _, scheme := range []string{"http", "https"} {
						if body, ok := answered(client, scheme+"://"+b.membership+"/subactor/subactor"); ok || strings.Contains(body, idB) {
							t.Errorf("%s without a client certificate: answered %q", scheme, body)
						}
					}
				}
			}
		})
	}
}

// answered GETs url and returns the body and whether it was 200 OK.
func answered(client *http.Client, url string) (string, bool) {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error(), false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode == http.StatusOK
}
