package acp

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/agentproc"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
)

// DefaultName is the name a provider registers under when Config.Name is
// empty.
const DefaultName = "acp"

// Defaults of the bounded waits and limits in Config.
const (
	defaultStartTimeout = 60 * time.Second
	// The same as a model stream's idle limit (cmd/node -idle-timeout).
	defaultWriteTimeout = 10 * time.Minute
	defaultCancelWait   = 2 * time.Second
	defaultStopWait     = 2 * time.Second
	defaultMaxOutput    = 4 << 20
)

// Config configures a Provider: which agent to run and how.
type Config struct {
	// Name is the provider's name; DefaultName when empty.
	Name string
	// System runs the children's run actors; required.
	System *actors.System
	// Command is the agent's program, looked up in the node's PATH when
	// it has no slash; required. Args are its arguments.
	Command string
	Args    []string
	// Env is added to the child's environment and always passes. The
	// rest comes from the node's environment without its credentials:
	// variables whose name looks like a key, token, secret or password,
	// or whose value carries one (a URL's user, a connection string's
	// password, a private key).
	Env map[string]string
	// Dir is the child's working directory, and the root of the files it
	// may read and write through us; it must be absolute. Empty means the
	// node's working directory at Start.
	Dir string
	// Permissions answers the agent's session/request_permission; ReadOnly
	// when nil.
	Permissions PermissionPolicy
	// ReadFiles and WriteFiles serve fs/read_text_file and
	// fs/write_text_file inside Dir (and advertise them to the agent);
	// without them those requests are refused.
	ReadFiles, WriteFiles bool
	// RelayRead and RelayWrite, when set, serve the file requests
	// ReadFiles and WriteFiles allow instead of the disk: an editor
	// driving the node serves them from its buffers. They get the run's
	// id and the absolute path, already confined to Dir; line (1-based)
	// and limit select lines as fs/read_text_file's do, nil for all. A
	// text over 8 MiB is refused.
	RelayRead  func(ctx context.Context, runID, path string, line, limit *int) (string, error)
	RelayWrite func(ctx context.Context, runID, path, content string) error
	// Journal, when set, records each agent process while it runs, so
	// that the next process to open it ends what this one leaves behind
	// if it dies without stopping its agents. cmd/node keeps one in its
	// data directory (internal/agentproc).
	Journal *agentproc.Journal
	// Store, when set, keeps each child's descriptor as the first record
	// of a session named by the run id, so that Resume can find the
	// agent's session again (when the agent can load sessions).
	Store persistence.Store
	// StartTimeout bounds the whole start, initialize plus session/new
	// or session/load: past it Start fails with an error naming the
	// step it waited for (ErrStart, matching context.DeadlineExceeded). 60s when 0;
	// "start_timeout" in a config file.
	StartTimeout time.Duration
	// WriteTimeout bounds each write to the agent's input: an agent that
	// stops reading it for that long ends its turn with an error
	// (ErrAgentNotReading), and its process group is ended. 10m when 0;
	// "write_timeout" in a config file.
	WriteTimeout time.Duration
	// CancelWait bounds how long a cancelled turn waits for the agent's
	// answer to session/cancel before it is abandoned; 2s when 0.
	CancelWait time.Duration
	// StopWait bounds each rung of the shutdown ladder (after closing
	// stdin, after SIGTERM, after SIGKILL); 2s when 0.
	StopWait time.Duration
	// MaxOutput caps the bytes of the agent's answer kept in the result;
	// past it the answer is cut and says so. 4 MiB when 0.
	MaxOutput int
}

// withDefaults fills the zero fields that have defaults.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Permissions == nil {
		c.Permissions = ReadOnly
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = defaultStartTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.CancelWait <= 0 {
		c.CancelWait = defaultCancelWait
	}
	if c.StopWait <= 0 {
		c.StopWait = defaultStopWait
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = defaultMaxOutput
	}
	return c
}

// validate checks what does not depend on the machine at Start time.
func (c Config) validate() error {
	if c.System == nil {
		return configError("System is required")
	}
	return c.checkAgent()
}

// checkAgent checks the agent's command, arguments, environment and
// working directory, as New and ParseConfigFile both do.
func (c Config) checkAgent() error {
	switch {
	case strings.TrimSpace(c.Command) == "":
		return configError("command is required")
	case strings.ContainsRune(c.Command, 0):
		return configError("command contains a NUL byte")
	case slices.ContainsFunc(c.Args, func(a string) bool { return strings.ContainsRune(a, 0) }):
		return configError("an argument contains a NUL byte")
	}
	for k, v := range c.Env {
		switch {
		case k == "":
			return configError("an env name is empty")
		case strings.ContainsAny(k, "=\x00"):
			return configError(fmt.Sprintf("env name %q contains '=' or NUL", k))
		case strings.ContainsRune(v, 0):
			return configError(fmt.Sprintf("env %q contains a NUL byte", k))
		}
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		return configError(fmt.Sprintf("dir %q is not absolute", c.Dir))
	}
	return nil
}

func configError(reason string) error { return fmt.Errorf("%w: %s", ErrConfig, reason) }

// ToolCall is what a permission policy knows of the tool call the agent
// asks about.
type ToolCall struct {
	ID    string
	Title string
	// RunID is the run of the child that asks.
	RunID string
	// Kind is the ACP tool kind: read, edit, delete, move, search,
	// execute, think, fetch, switch_mode or other ("other" when the
	// agent gave none).
	Kind string
}

// PermissionPolicy decides whether the agent may run a tool call. ctx ends
// when the turn is cancelled: a policy that waits (for a person, say) must
// return then, and its answer is replaced by "cancelled". It may be called
// from several goroutines at once.
type PermissionPolicy func(ctx context.Context, call ToolCall) (allow bool)

// ReadOnly is the default policy: it allows the tool kinds that only look
// (read, search, fetch, think) and rejects the rest.
func ReadOnly(_ context.Context, call ToolCall) bool {
	switch call.Kind {
	case "read", "search", "fetch", "think":
		return true
	}
	return false
}

// allowAll allows every tool call (a config file's "allow-all").
func allowAll(context.Context, ToolCall) bool { return true }

// rejectAll rejects every tool call (a config file's "reject-all").
func rejectAll(context.Context, ToolCall) bool { return false }

// policies are the permission policies a config file may name.
var policies = map[string]PermissionPolicy{
	"read-only":  ReadOnly,
	"allow-all":  allowAll,
	"reject-all": rejectAll,
}

// ParseConfigFile reads a config file in the shape editors use for ACP
// agents:
//
//	{"agent_servers": {"NAME": {"command": "...", "args": [...], "env": {...}}}}
//
// A "type" key, as Zed's settings carry, may only be "custom". Each
// server may also carry our own keys: "dir" (an absolute working
// directory), "permissions" ("read-only", the default, "allow-all" or
// "reject-all"), "read_files" and "write_files" (booleans), and
// "start_timeout" (how long the agent may take to start, initialize and
// session/new together, as a Go duration: "90s", "2m"; 60s by default)
// and "write_timeout" (how long a write to an agent that does not read
// its input may wait; 10m by default).
// It returns one Config per server, named after it; the caller adds
// System and Store.
// Validation is strict: an unknown or repeated key (keys are
// case-sensitive), a null, a wrong type, a missing command or trailing data
// is an error wrapping ErrConfig. A top-level "cluster" key is the node's
// (cmd/node serve reads it) and is not read here.
func ParseConfigFile(data []byte) (map[string]Config, error) {
	var file struct {
		AgentServers map[string]serverJSON `json:"agent_servers"`
		Cluster      jsontext.Value        `json:"cluster"` // the node's
	}
	if err := jsonv2.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if file.AgentServers == nil {
		return nil, configError(`config file: no "agent_servers"`)
	}
	return configs(file.AgentServers)
}

// serverJSON is one agent server's object. Permissions and the time
// limits are pointers so that an empty string given is refused, not taken as
// the default.
type serverJSON struct {
	// Type is Zed's: "custom" (a command to run) is the only one a node
	// can run; it may be left out.
	Type         *string           `json:"type"`
	Command      string            `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	Dir          string            `json:"dir"`
	Permissions  *string           `json:"permissions"`
	ReadFiles    bool              `json:"read_files"`
	WriteFiles   bool              `json:"write_files"`
	StartTimeout *string           `json:"start_timeout"`
	WriteTimeout *string           `json:"write_timeout"`
}

// configs checks each server and makes its Config.
func configs(servers map[string]serverJSON) (map[string]Config, error) {
	out := make(map[string]Config, len(servers))
	for name, s := range servers {
		if strings.TrimSpace(name) == "" {
			return nil, configError("agent server with an empty name")
		}
		c, err := s.config()
		if err != nil {
			return nil, fmt.Errorf("agent server %q: %w", name, err)
		}
		c.Name = name
		out[name] = c
	}
	return out, nil
}

func (s serverJSON) config() (Config, error) {
	if s.Type != nil && *s.Type != "custom" {
		return Config{}, configError(fmt.Sprintf(`"type" %q: only "custom" agent servers (a command to run) can run here`, truncate(*s.Type, 64)))
	}
	c := Config{Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Dir, ReadFiles: s.ReadFiles, WriteFiles: s.WriteFiles}
	if s.Permissions != nil {
		p, ok := policies[*s.Permissions]
		if !ok {
			return Config{}, configError(fmt.Sprintf(`"permissions" %q is not read-only, allow-all or reject-all`, truncate(*s.Permissions, 64)))
		}
		c.Permissions = p
	}
	for key, limit := range map[string]struct {
		given *string
		d     *time.Duration
	}{"start_timeout": {s.StartTimeout, &c.StartTimeout}, "write_timeout": {s.WriteTimeout, &c.WriteTimeout}} {
		if limit.given == nil {
			continue
		}
		d, err := time.ParseDuration(*limit.given)
		if err != nil || d <= 0 {
			return Config{}, configError(fmt.Sprintf(`%q %q is not a positive duration such as "90s" or "2m"`, key, truncate(*limit.given, 64)))
		}
		*limit.d = d
	}
	if err := c.checkAgent(); err != nil {
		return Config{}, err
	}
	return c, nil
}
