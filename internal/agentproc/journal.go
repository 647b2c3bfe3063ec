package agentproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Journal records, in a directory, each agent process that the providers
// using it start, from just before it starts until its ladder has ended
// it and what it left behind, so that a later process opening the same
// directory ends what an earlier one left running when it died without
// stopping its agents (SIGKILL, a crash). On Linux the agent itself dies
// with the node (a parent-death signal); what it started does not, and is
// what OpenJournal ends.
//
// OpenJournal finds an earlier node's processes by the agent's tag
// (SUBACTOR_AGENT_TAG) in their environment (/proc/PID/environ): a process is
// ended only if it carries the tag of a record whose node is gone and
// started after that agent did, in the same boot of the machine; the
// agent's process group is ended when its leader is alive with the start
// time recorded at launch, or when a member carries the tag. So a pid that
// was reused since is never signalled. What cannot be found: a process
// that both left the agent's group (setsid) and cleared its environment,
// one that made itself non-dumpable or changed its user (its environment
// cannot be read), and one whose group's every tagged member is gone.
//
// Only Linux offers what this needs (/proc and its start times); elsewhere
// a Journal records nothing and OpenJournal ends nothing.
//
// A Journal is safe for concurrent use. One process at a time may use a
// directory (the node keeps its journal in its data directory, whose
// store lock it holds); a record whose node is still alive is left alone
// regardless.
type Journal struct {
	dir  string
	boot string  // the kernel's boot id
	node procRef // this process
	log  *slog.Logger
}

// procRef names a process across pid reuse: its pid and its start time
// (clock ticks after boot, /proc/PID/stat).
type procRef struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// groupRecord is one agent's record, a JSON file named after its tag.
type groupRecord struct {
	Tag  string  `json:"tag"`
	Boot string  `json:"boot"`
	Node procRef `json:"node"`
	// Leader is the agent process; zero in the record written before it
	// started.
	Leader  procRef  `json:"leader"`
	Command []string `json:"command"`
}

// since is the earliest start time a process of the record's agent can
// have.
func (r groupRecord) since() uint64 {
	if r.Leader.PID != 0 {
		return r.Leader.Start
	}
	return r.Node.Start
}

// recordExt ends the name of a record file; a write in progress has
// ".tmp" after it.
const recordExt = ".json"

// OpenJournal opens the journal in dir (created, 0700, with its first
// record), and first ends what the records an earlier process left there
// name (see Journal), sending SIGKILL: the process that could have
// stopped them gracefully is gone. It logs what it ended to log at Warn
// level, and removes those records. A nil log discards.
func OpenJournal(dir string, log *slog.Logger) (*Journal, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{dir: dir, log: log}
	if !tracked {
		return j, nil
	}
	var err error
	if j.boot, err = bootID(); err != nil {
		return nil, fmt.Errorf("acp: journal: %w", err)
	}
	j.node = identify(os.Getpid())
	if err := j.sweep(); err != nil {
		return nil, fmt.Errorf("acp: journal %s: %w", dir, err)
	}
	return j, nil
}

// sweep ends what the records of dead nodes name and removes those
// records.
func (j *Journal) sweep() error {
	entries, err := os.ReadDir(j.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	recs := map[string]groupRecord{}
	var files []string
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(j.dir, name)
		if strings.HasSuffix(name, recordExt+".tmp") {
			_ = os.Remove(path) // a write its node did not finish
			continue
		}
		if !strings.HasSuffix(name, recordExt) {
			continue
		}
		rec, err := readRecord(path)
		switch {
		case err != nil:
			j.log.Warn("acp: journal: removing a record that cannot be read", "file", path, "err", err)
		case rec.Boot != j.boot:
			// The machine restarted since: nothing of it runs.
		case alive(rec.Node):
			continue // its node runs: its agents are its own business
		default:
			recs[rec.Tag] = rec
		}
		files = append(files, path)
	}
	if len(recs) > 0 {
		found, groups := leftovers(recs)
		if len(found) > 0 || len(groups) > 0 {
			signalStrays(found, kill)
			signalGroups(groups, kill)
			commands := make([]string, 0, len(recs))
			for _, r := range recs {
				commands = append(commands, strings.Join(r.Command, " "))
			}
			j.log.Warn("acp: ended the processes that agents of an earlier node left running", "processes", len(found), "groups", len(groups), "agents", commands, "journal", j.dir)
		}
	}
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readRecord(path string) (groupRecord, error) {
	var rec groupRecord
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err == nil && (rec.Tag == "" || rec.Tag+recordExt != filepath.Base(path)) {
		err = errors.New("its tag does not match its name")
	}
	return rec, err
}

func (j *Journal) path(tag string) string { return filepath.Join(j.dir, tag+recordExt) }

// write replaces rec's file whole.
func (j *Journal) write(rec groupRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	tmp := j.path(rec.Tag) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, j.path(rec.Tag))
}

// begin records an agent about to start. A nil Journal records nothing.
func (j *Journal) begin(tag string, command []string) error {
	if j == nil || !tracked {
		return nil
	}
	if err := j.write(groupRecord{Tag: tag, Boot: j.boot, Node: j.node, Command: command}); err != nil {
		return fmt.Errorf("acp: recording the agent process in %s: %w", j.dir, err)
	}
	return nil
}

// started adds the agent's process to its record. A failure is only
// logged: the record begin wrote already finds what carries the tag.
func (j *Journal) started(tag string, command []string, leader procRef) {
	if j == nil || !tracked {
		return
	}
	if err := j.write(groupRecord{Tag: tag, Boot: j.boot, Node: j.node, Leader: leader, Command: command}); err != nil {
		j.log.Warn("acp: journal: recording the agent's process", "pid", leader.PID, "err", err)
	}
}

// end removes an agent's record once nothing of it is left.
func (j *Journal) end(tag string) {
	if j == nil || !tracked {
		return
	}
	if err := os.Remove(j.path(tag)); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.log.Warn("acp: journal: removing an agent's record", "file", j.path(tag), "err", err)
	}
}
