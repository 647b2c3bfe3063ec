package agentproc

import (
	"maps"
	"slices"
)

// procInfo is one live process (not a zombie) as /proc shows it.
type procInfo struct {
	PID, PPID, PGID, SID int
	Start                uint64 // clock ticks after boot
	// Tags are the agent tags its environment carries (EnvAgentTag); nil
	// when it carries none, when its environment cannot be read, or when
	// it started before every record's agent (see takeSnapshot).
	Tags []string
}

// snapshot is the machine's live processes at one moment, and which of
// them is this one.
type snapshot struct {
	self  int
	procs map[int]procInfo
}

// spared are the processes and groups the journal never signals,
// whatever the records say (K4): pid and group ids up to 1 (init, and
// kill(-1)'s "everyone"), this process, its group and session, and its
// ancestors with their groups and sessions (a node run by a shell, a
// service manager or another node's agent).
type spared struct {
	pids, groups map[int]bool
}

func (s snapshot) spared() spared {
	sp := spared{pids: map[int]bool{}, groups: map[int]bool{}}
	// Walk up from this process; a parent that cannot be read ends the
	// walk (it is spared by the pid ≤ 1 rule or by not carrying a tag).
	for pid := s.self; pid > 1 && !sp.pids[pid]; {
		p, ok := s.procs[pid]
		if !ok {
			break
		}
		sp.pids[pid] = true
		sp.groups[p.PGID], sp.groups[p.SID] = true, true
		pid = p.PPID
	}
	return sp
}

func (sp spared) pid(pid int) bool    { return pid <= 1 || sp.pids[pid] }
func (sp spared) group(pgid int) bool { return pgid <= 1 || sp.groups[pgid] }

// leftovers decides what the records of dead nodes, by tag, let the
// journal end in snap (K4). The licence to signal is a process's own
// environment, never a record: a process is signalled only if it carries
// the tag of one of recs and started no earlier than that record's agent
// could have (so the record's leader, when it still runs, is found by
// its tag like any other). A process group is signalled only through
// such a member, and only one a tagged process made: the member's own
// (it called setsid or setpgid), or the group of the record's leader
// (the agent's, kept alive by the member after the leader died). The
// spared processes and groups are never signalled. The result is sorted
// by pid.
func leftovers(recs map[string]groupRecord, snap snapshot) (found []stray, groups []int) {
	sp := snap.spared()
	confirmed := map[int]bool{}
	for _, pid := range slices.Sorted(maps.Keys(snap.procs)) {
		p := snap.procs[pid]
		rec, ok := carried(recs, p)
		if !ok || sp.pid(pid) {
			continue
		}
		ownGroup := p.PGID == pid && !sp.group(pid)
		found = append(found, stray{pid: pid, ownGroup: ownGroup})
		if !ownGroup && p.PGID == rec.Leader.PID && !sp.group(p.PGID) {
			confirmed[p.PGID] = true
		}
	}
	return found, slices.Sorted(maps.Keys(confirmed))
}

// carried returns the record of recs whose tag p carries, if p started
// no earlier than that record's agent could have.
func carried(recs map[string]groupRecord, p procInfo) (groupRecord, bool) {
	for _, t := range p.Tags {
		if r, ok := recs[t]; ok && p.Start >= r.since() {
			return r, true
		}
	}
	return groupRecord{}, false
}
