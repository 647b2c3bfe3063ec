package agentproc

import (
	"slices"
	"testing"
)

// Contract K4: what the journal signals is decided from a snapshot of the
// processes and the records alone, and only processes carrying a dead
// node's tag are in it. Every process below carries the tag, and the
// record names some as its leader: init (pid 1), a process in group 1,
// the node, its parent, its session's leader and a member of its own
// group are spared; a group is signalled only through a tagged member
// that made it or that lives in the recorded leader's group, never group
// 1, the node's, its session's or its ancestors'.
func TestK4_LeftoversAreTaggedProcessesOutsideTheSpared(t *testing.T) {
	const tag = "0190a6c8-7b5e-7cc0-9a53-3c5b6a0f1e21"
	tagged := []string{tag}
	const (
		session  = 10  // the session leader: a login shell
		shell    = 50  // the node's parent, leading the node's group
		node     = 100 // this process
		sibling  = 101 // in the node's group
		inGroup1 = 200 // a member of group 1
		leader   = 300 // the recorded leader, untagged now (it exec'd with a clean environment)
		member   = 301 // tagged, in the leader's group
		own      = 400 // tagged, leading a group of its own
		foreign  = 600 // tagged, in a group it did not make
		older    = 800 // tagged, but started before the agent could have
		plain    = 900 // no tag, leading its own group
	)
	snap := snapshot{self: node, procs: map[int]procInfo{
		1:        {PID: 1, PPID: 0, PGID: 1, SID: 1, Start: 1, Tags: tagged},
		session:  {PID: session, PPID: 1, PGID: session, SID: session, Start: 200, Tags: tagged},
		shell:    {PID: shell, PPID: session, PGID: shell, SID: session, Start: 200, Tags: tagged},
		node:     {PID: node, PPID: shell, PGID: shell, SID: session, Start: 200, Tags: tagged},
		sibling:  {PID: sibling, PPID: shell, PGID: shell, SID: session, Start: 200, Tags: tagged},
		inGroup1: {PID: inGroup1, PPID: 1, PGID: 1, SID: 1, Start: 200, Tags: tagged},
		leader:   {PID: leader, PPID: 1, PGID: leader, SID: session, Start: 200},
		member:   {PID: member, PPID: 1, PGID: leader, SID: session, Start: 200, Tags: tagged},
		own:      {PID: own, PPID: 1, PGID: own, SID: own, Start: 200, Tags: tagged},
		foreign:  {PID: foreign, PPID: 1, PGID: 700, SID: session, Start: 200, Tags: tagged},
		older:    {PID: older, PPID: 1, PGID: older, SID: session, Start: 50, Tags: tagged},
		plain:    {PID: plain, PPID: 1, PGID: plain, SID: plain, Start: 200},
	}}
	recs := map[string]groupRecord{tag: {Tag: tag, Node: procRef{PID: 99, Start: 90}, Leader: procRef{PID: leader, Start: 100}}}
	found, groups := leftovers(recs, snap)
	want := []stray{{pid: sibling}, {pid: inGroup1}, {pid: member}, {pid: own, ownGroup: true}, {pid: foreign}}
	if !slices.Equal(found, want) || !slices.Equal(groups, []int{leader}) {
		t.Fatalf("signalled %+v and groups %v, want %+v and [%d]", found, groups, want, leader)
	}

	// A record whose leader is pid 1, this node or its parent changes
	// nothing: a record is never a licence.
	for _, l := range []int{1, node, shell, session} {
		recs[tag] = groupRecord{Tag: tag, Node: procRef{PID: 99, Start: 90}, Leader: procRef{PID: l, Start: 1}}
		found, groups = leftovers(recs, snap)
		for _, s := range found {
			if s.pid <= 1 || s.pid == node || s.pid == shell || s.pid == session {
				t.Errorf("leader %d: signalled %+v", l, s)
			}
		}
		for _, g := range groups {
			if g <= 1 || g == shell || g == session {
				t.Errorf("leader %d: signalled group %d", l, g)
			}
		}
	}
}
