package agentproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/subactor/subactor/internal/ids"
)

// Journal records, in a directory, each agent process that the providers
// using it start, from just before it starts until its ladder has ended
// it and what it left behind, so that a later process opening the same
// directory ends what an earlier one left running when it died without
// stopping its agents (SIGKILL, a crash). On Linux the agent itself dies
// with the node (a parent-death signal); what it started does not, and is
// what OpenJournal ends.
//
// The directory is untrusted input (K4): any process of the user, an
// agent among them, can write it. So a record is only a hint. OpenJournal
// signals a process only if its own environment (/proc/PID/environ)
// carries the tag (SUBACTOR_AGENT_TAG) of a record whose node is gone,
// and it started after that agent could have, in the same boot of the
// machine; a process group only through such a member (see leftovers);
// never pid or group 1 or below, this process, its group, its session or
// its ancestors. A forged record can at most end processes that carry a
// dead node's tag. What cannot be found: a process that both left the
// agent's group (setsid) and cleared its environment, one that made
// itself non-dumpable or changed its user (its environment cannot be
// read), and one whose group's every tagged member is gone.
//
// It reads and removes only regular files named as it names them (a tag,
// then recordExt, or recordExt and ".tmp"), opened without following
// links or waiting on FIFOs, and reads at most maxRecord bytes of each;
// anything else in the directory is left alone with a warning.
//
// Only Linux offers what this needs (/proc and its start times); elsewhere
// a Journal records nothing and OpenJournal ends nothing.
//
// A Journal is safe for concurrent use. A record whose node is still
// alive is left alone, so nodes may share a directory.
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
// stopped them gracefully is gone. It logs what it ended, and what it
// could not do, to log at Warn level, and removes those records: nothing
// in dir makes it fail. A nil log discards.
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
	j.sweep()
	return j, nil
}

// sweep ends what the records of dead nodes name and removes those
// records. What it cannot do it logs as a warning: nothing in the
// directory stops the node (K4); a record it could not act on stays for
// the next.
func (j *Journal) sweep() {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			j.log.Warn("acp: journal: cannot read its directory", "dir", j.dir, "err", err)
		}
		return
	}
	recs := map[string]groupRecord{}
	var files []string
	for _, e := range entries {
		path := filepath.Join(j.dir, e.Name())
		tag, tmp := recordName(e.Name())
		if tag == "" || e.Type()&fs.ModeType != 0 {
			j.log.Warn("acp: journal: leaving alone a file it did not write", "file", path)
			continue
		}
		if tmp {
			files = append(files, path) // a write its node did not finish
			continue
		}
		rec, err := readRecord(path, tag)
		switch {
		case errors.Is(err, errNotRegular):
			j.log.Warn("acp: journal: leaving alone a file it did not write", "file", path)
			continue
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
		if err := j.endLeftovers(recs); err != nil {
			j.log.Warn("acp: journal: cannot end what an earlier node left", "dir", j.dir, "err", err)
			return
		}
	}
	for _, f := range files {
		if err := removeRegular(f); err != nil {
			j.log.Warn("acp: journal: removing a record", "file", f, "err", err)
		}
	}
}

// endLeftovers sends SIGKILL to what recs leave running (see
// leftovers): the process that could have stopped them gracefully is
// gone.
func (j *Journal) endLeftovers(recs map[string]groupRecord) error {
	since := uint64(math.MaxUint64)
	for _, r := range recs {
		since = min(since, r.since())
	}
	snap, err := takeSnapshot(since)
	if err != nil {
		return err
	}
	found, groups := leftovers(recs, snap)
	if len(found) == 0 && len(groups) == 0 {
		return nil
	}
	signalStrays(found, kill)
	signalGroups(groups, kill)
	commands := make([]string, 0, len(recs))
	for _, r := range recs {
		commands = append(commands, strings.Join(r.Command, " "))
	}
	j.log.Warn("acp: ended the processes that agents of an earlier node left running", "processes", len(found), "groups", len(groups), "agents", commands, "journal", j.dir)
	return nil
}

// recordName returns the tag a journal file's name holds and whether it
// is a write in progress; tag is "" for a name the journal does not
// write.
func recordName(name string) (tag string, tmp bool) {
	base, tmp := strings.CutSuffix(name, recordExt+".tmp")
	if !tmp {
		var ok bool
		if base, ok = strings.CutSuffix(name, recordExt); !ok {
			return "", false
		}
	}
	if !ids.Valid(base) {
		return "", false
	}
	return base, tmp
}

// maxRecord bounds the bytes read of a record: one is a few hundred
// bytes, and its command, clipped to maxCommand, at most six times that
// once escaped.
const maxRecord = 16 << 10

// errNotRegular is a journal file that is not a regular file (a link, a
// FIFO, a directory, a device): the journal did not write it.
var errNotRegular = errors.New("not a regular file")

// readRecord reads the record of tag in path, at most maxRecord bytes.
func readRecord(path, tag string) (groupRecord, error) {
	var rec groupRecord
	f, err := openRecord(path)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	switch {
	case err != nil:
		return rec, err
	case len(data) > maxRecord:
		return rec, fmt.Errorf("over %d bytes", maxRecord)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, err
	}
	if rec.Tag != tag {
		return rec, errors.New("its tag does not match its name")
	}
	return rec, nil
}

// removeRegular removes path if it is a regular file; anything else in
// its place is not the journal's.
func removeRegular(path string) error {
	fi, err := os.Lstat(path)
	if err == nil {
		if !fi.Mode().IsRegular() {
			return nil
		}
		err = os.Remove(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil // gone meanwhile
	}
	return err
}

func (j *Journal) path(tag string) string { return filepath.Join(j.dir, tag+recordExt) }

// maxCommand bounds the bytes of an agent's command kept in its record,
// which only says in a log what was ended.
const maxCommand = 1 << 10

// clip shortens command to at most maxCommand bytes of arguments.
func clip(command []string) []string {
	n := 0
	for i, arg := range command {
		if n+len(arg) > maxCommand {
			return append(command[:i:i], arg[:maxCommand-n]+"...")
		}
		n += len(arg)
	}
	return command
}

// write replaces rec's file whole.
func (j *Journal) write(rec groupRecord) error {
	rec.Command = clip(rec.Command)
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
