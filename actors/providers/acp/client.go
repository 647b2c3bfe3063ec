package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/rootfile"
	"github.com/subactor/subactor/subagent"
)

// maxReadFile caps a file served by fs/read_text_file: the answer must fit
// in one line of the agent's reader, which the SDK caps at 10 MiB (see
// maxAnswer).
const maxReadFile = 8 << 20

// client is what we do for the agent: frames hands it every session
// update, server every request. Updates are folded into the turn under
// mu; permission and file requests run concurrently on the server's
// goroutines.
type client struct {
	policy PermissionPolicy
	root   *os.Root // the working directory, when files are served
	dir    string
	read   bool
	write  bool
	events subagent.EventSink // nil-safe: see emit
	// relayRead and relayWrite serve the file requests instead of root
	// (Config.RelayRead, Config.RelayWrite).
	relayRead  func(ctx context.Context, runID, path string, line, limit *int) (string, error)
	relayWrite func(ctx context.Context, runID, path, content string) error
	runID      string

	mu        sync.Mutex
	session   sdk.SessionId
	accepting bool // updates count: not during a load's replay, not after release
	turn      *turnState
	limited   bool // acpdata.LimitReached was emitted

	// cancelled ends when the turn is being cancelled (or the run
	// released): permission requests pending then, or arriving later,
	// are answered "cancelled".
	cancelled context.Context
	cancel    context.CancelFunc
}

func newClient(cfg Config, dir string, runID string, events subagent.EventSink) (*client, error) {
	c := &client{
		policy: cfg.Permissions, dir: dir, read: cfg.ReadFiles, write: cfg.WriteFiles,
		events: events, turn: newTurnState(runID, cfg.MaxOutput),
		relayRead: cfg.RelayRead, relayWrite: cfg.RelayWrite, runID: runID,
	}
	c.cancelled, c.cancel = context.WithCancel(context.Background())
	if (c.read && c.relayRead == nil) || (c.write && c.relayWrite == nil) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			c.cancel()
			return nil, &dirError{Dir: dir, Reason: "cannot be opened", Err: err}
		}
		c.root = root
	}
	return c, nil
}

// listen starts counting updates for session; replay is true while a
// session/load replays history, whose updates are not this turn's.
func (c *client) listen(session sdk.SessionId, replay bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session, c.accepting = session, !replay
}

// close stops counting updates, answers every permission request with
// "cancelled" and releases the working directory.
func (c *client) close() {
	c.cancel()
	c.mu.Lock()
	c.accepting = false
	c.mu.Unlock()
	if c.root != nil {
		_ = c.root.Close()
	}
}

// answer returns the turn's output so far.
func (c *client) answer() []subagent.ContentBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turn.answer()
}

// finalText emits the answer as the turn's final text, once.
func (c *client) finalText() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn.finalSent || c.turn.out.Len() == 0 {
		return
	}
	c.turn.finalSent = true
	c.emit(c.turn.event(subagent.MessageText, c.turn.out.String(), false))
}

// emit sends progress to the Service's sink, which never blocks; a
// provider called without the Service has none. Called under mu, so a
// run's events keep the order of its updates.
func (c *client) emit(evs []subagent.RunProgress) {
	if c.events == nil {
		return
	}
	for _, ev := range evs {
		c.events.Emit(ev)
	}
}

// update folds one session/update in; frames calls it for every one, in
// order. Updates of other sessions, of a replay, or after release are
// ignored.
func (c *client) update(n sdk.SessionNotification) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.accepting || n.SessionId != c.session {
		return
	}
	c.emit(c.turn.apply(n.Update))
}

// limit tells the parent's listeners that a bound refused what the agent
// asked (acpdata.LimitReached), once a run: the log counts the rest (see
// server.close).
func (c *client) limit(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limited || !c.accepting {
		return
	}
	c.limited = true
	c.emit(c.turn.event(acpdata.LimitReached, text, true))
}

// permission answers session/request_permission: the policy decides, and
// the answer is the first option of the matching kind (once before
// always). A request after the turn's cancel, or one offering no option
// for the decision, is answered "cancelled".
func (c *client) permission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	session := c.session
	call := c.turn.known(req.ToolCall)
	c.mu.Unlock()
	if req.SessionId != session {
		return sdk.RequestPermissionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "unknown session"})
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(c.cancelled, stop)
	defer unhook()

	verdict, choice := "cancelled", sdk.PermissionOptionId("")
	if pctx.Err() == nil {
		allow := c.policy(pctx, call)
		if pctx.Err() == nil {
			if id, ok := pick(req.Options, allow); ok {
				choice, verdict = id, map[bool]string{true: "allowed", false: "rejected"}[allow]
			}
		}
	}
	c.mu.Lock()
	if c.accepting {
		c.emit(c.turn.event(acpdata.PermissionAnswered, verdict+": "+orID(call.Title, req.ToolCall.ToolCallId), false))
	}
	c.mu.Unlock()
	out := sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}
	if choice != "" {
		out = sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{Outcome: "selected", OptionId: choice}}
	}
	return sdk.RequestPermissionResponse{Outcome: out}, nil
}

// pick returns the option answering allow: a one-time choice before a
// standing one, so a decision never outlives the request.
func pick(opts []sdk.PermissionOption, allow bool) (sdk.PermissionOptionId, bool) {
	kinds := []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}
	if allow {
		kinds = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k && o.OptionId != "" {
				return o.OptionId, true
			}
		}
	}
	return "", false
}

// errOutside refuses a path outside the working directory.
var errOutside = errors.New("path is outside the agent's working directory")

// inside returns path relative to the working directory, refusing a
// relative path, any ".." element and anything outside it. Symlinks are
// left to os.Root, which refuses to follow one out of the directory.
func (c *client) inside(path string) (string, error) {
	if !filepath.IsAbs(path) || slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "..") {
		return "", errOutside
	}
	rel, err := filepath.Rel(c.dir, filepath.Clean(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", errOutside
	}
	return rel, nil
}

func refused(path string, err error) error {
	return sdk.NewInvalidParams(map[string]any{"path": path, "error": err.Error()})
}

// readFile answers fs/read_text_file with the file's text, inside the
// working directory when Config.ReadFiles is set: a regular file of at
// most maxReadFile bytes. Before it is read, reserve claims twice its
// size, for its text and the answer made of it, in one step: claimed one
// after the other, several reads could each get the first and none the
// second (see maxHeldBytes). Line (1-based) and Limit select lines.
func (c *client) readFile(ctx context.Context, req sdk.ReadTextFileRequest, reserve func(int) error) (string, error) {
	if !c.read {
		return "", sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
	}
	rel, err := c.inside(req.Path)
	if err != nil {
		return "", refused(req.Path, err)
	}
	if c.relayRead != nil {
		text, err := c.relayRead(ctx, c.runID, filepath.Join(c.dir, rel), req.Line, req.Limit)
		switch {
		case err != nil:
			return "", refused(req.Path, err)
		case len(text) > maxReadFile:
			return "", refused(req.Path, fmt.Errorf("file is larger than %d bytes", maxReadFile))
		}
		return text, reserve(2 * len(text))
	}
	f, err := rootfile.Open(c.root, rel)
	if err != nil {
		return "", refused(req.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return "", refused(req.Path, err)
	case info.Size() > maxReadFile:
		return "", refused(req.Path, fmt.Errorf("file is larger than %d bytes", maxReadFile))
	}
	size := int(info.Size())
	if err := reserve(2 * size); err != nil {
		return "", err
	}
	// Read into the string itself, and no further than what was reserved
	// (a file that grew since is cut there).
	var text strings.Builder
	text.Grow(size)
	if _, err := io.Copy(&text, io.LimitReader(f, int64(size))); err != nil {
		return "", refused(req.Path, err)
	}
	return lines(text.String(), req.Line, req.Limit), nil
}

// lines selects limit lines from line (1-based) on; nil selects all.
func lines(text string, line, limit *int) string {
	i := 0
	if line != nil {
		for n := 1; n < *line; n++ {
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				return ""
			}
			i += j + 1
		}
	}
	end := len(text)
	if limit != nil && *limit >= 0 {
		end = i
		for n := 0; n < *limit && end < len(text); n++ {
			j := strings.IndexByte(text[end:], '\n')
			if j < 0 {
				end = len(text)
				break
			}
			end += j + 1
		}
	}
	return text[i:end]
}

// writeFile answers fs/write_text_file, inside the working directory when
// Config.WriteFiles is set: a regular file, created with missing parent
// directories, or replaced.
func (c *client) writeFile(ctx context.Context, req sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	if !c.write {
		return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
	}
	rel, err := c.inside(req.Path)
	if err != nil {
		return sdk.WriteTextFileResponse{}, refused(req.Path, err)
	}
	if c.relayWrite != nil {
		if err := c.relayWrite(ctx, c.runID, filepath.Join(c.dir, rel), req.Content); err != nil {
			return sdk.WriteTextFileResponse{}, refused(req.Path, err)
		}
		return sdk.WriteTextFileResponse{}, nil
	}
	if d := filepath.Dir(rel); d != "." {
		if err := c.root.MkdirAll(d, 0o755); err != nil {
			return sdk.WriteTextFileResponse{}, refused(req.Path, err)
		}
	}
	f, err := rootfile.Create(c.root, rel, 0o644)
	if err != nil {
		return sdk.WriteTextFileResponse{}, refused(req.Path, err)
	}
	_, err = f.WriteString(req.Content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sdk.WriteTextFileResponse{}, refused(req.Path, err)
	}
	return sdk.WriteTextFileResponse{}, nil
}
