package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/persistence"
)

// DefaultName is the name a provider registers under when Config.Name is
// empty.
const DefaultName = "acp"

// Defaults of the bounded waits and limits in Config.
const (
	DefaultStartTimeout = 60 * time.Second
	DefaultCancelWait   = 2 * time.Second
	DefaultStopWait     = 2 * time.Second
	DefaultMaxOutput    = 4 << 20
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
	// rest comes from the node's environment without its credentials
	// (see IsCredential).
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
	// Journal, when set, records each agent process while it runs, so
	// that the next process to open it ends what this one leaves behind
	// if it dies without stopping its agents (see Journal).
	Journal *Journal
	// Store, when set, keeps each child's descriptor as the first record
	// of a session named by the run id, so that Resume can find the
	// agent's session again (when the agent can load sessions).
	Store persistence.Store
	// StartTimeout bounds the whole start, initialize plus session/new
	// or session/load: past it Start fails with a *StartError naming the
	// step it waited for (ErrStartTimeout). DefaultStartTimeout when 0;
	// "start_timeout" in a config file.
	StartTimeout time.Duration
	// CancelWait bounds how long a cancelled turn waits for the agent's
	// answer to session/cancel before it is abandoned; DefaultCancelWait
	// when 0.
	CancelWait time.Duration
	// StopWait bounds each rung of the shutdown ladder (after closing
	// stdin, after SIGTERM, after SIGKILL); DefaultStopWait when 0.
	StopWait time.Duration
	// MaxOutput caps the bytes of the agent's answer kept in the result;
	// past it the answer is cut and says so. DefaultMaxOutput when 0.
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
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CancelWait <= 0 {
		c.CancelWait = DefaultCancelWait
	}
	if c.StopWait <= 0 {
		c.StopWait = DefaultStopWait
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	return c
}

// validate checks what does not depend on the machine at Start time.
func (c Config) validate() error {
	if c.System == nil {
		return configError("System is required")
	}
	if err := checkCommand(c.Command, c.Args, c.Env); err != nil {
		return err
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		return configError(fmt.Sprintf("dir %q is not absolute", c.Dir))
	}
	return nil
}

func checkCommand(command string, args []string, env map[string]string) error {
	switch {
	case strings.TrimSpace(command) == "":
		return configError("command is required")
	case strings.ContainsRune(command, 0):
		return configError("command contains a NUL byte")
	}
	for _, a := range args {
		if strings.ContainsRune(a, 0) {
			return configError("an argument contains a NUL byte")
		}
	}
	for k, v := range env {
		switch {
		case k == "":
			return configError("an env name is empty")
		case strings.ContainsAny(k, "=\x00"):
			return configError(fmt.Sprintf("env name %q contains '=' or NUL", k))
		case strings.ContainsRune(v, 0):
			return configError(fmt.Sprintf("env %q contains a NUL byte", k))
		}
	}
	return nil
}

func configError(reason string) error { return fmt.Errorf("%w: %s", ErrConfig, reason) }

// ToolCall is what a permission policy knows of the tool call the agent
// asks about.
type ToolCall struct {
	ID    string
	Title string
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

// AllowAll allows every tool call.
func AllowAll(context.Context, ToolCall) bool { return true }

// RejectAll rejects every tool call.
func RejectAll(context.Context, ToolCall) bool { return false }

// policies are the permission policies a config file may name.
var policies = map[string]PermissionPolicy{
	"read-only":  ReadOnly,
	"allow-all":  AllowAll,
	"reject-all": RejectAll,
}

// ParseConfigFile reads a config file in the shape editors use for ACP
// agents:
//
//	{"agent_servers": {"NAME": {"command": "...", "args": [...], "env": {...}}}}
//
// Each server may also carry our own keys: "dir" (an absolute working
// directory), "permissions" ("read-only", the default, "allow-all" or
// "reject-all"), "read_files" and "write_files" (booleans), and
// "start_timeout" (how long the agent may take to start, initialize and
// session/new together, as a Go duration: "90s", "2m"; 60s by default). It returns one
// Config per server, named after it; the caller adds System and Store.
// Validation is strict: an unknown or repeated key (keys are
// case-sensitive), a null, a wrong type, a missing command or trailing data
// is an error wrapping ErrConfig. A top-level "cluster" key is the node's
// (cmd/node serve reads it) and is not read here.
func ParseConfigFile(data []byte) (map[string]Config, error) {
	top, err := objectFields(data, "config file")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if k, ok := unknownKey(top, "agent_servers", "cluster"); ok {
		return nil, configError(fmt.Sprintf("config file: unknown key %q", k))
	}
	raw, ok := top["agent_servers"]
	if !ok {
		return nil, configError(`config file: no "agent_servers"`)
	}
	return ParseAgentServers(raw)
}

// ParseAgentServers reads the value of "agent_servers" alone, for a
// program whose config file has keys of its own around it. Its rules are
// ParseConfigFile's.
func ParseAgentServers(data []byte) (map[string]Config, error) {
	servers, err := objectFields(data, `"agent_servers"`)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	out := make(map[string]Config, len(servers))
	for name, raw := range servers {
		if strings.TrimSpace(name) == "" {
			return nil, configError("agent server with an empty name")
		}
		c, err := parseServer(raw)
		if err != nil {
			return nil, fmt.Errorf("agent server %q: %w", name, err)
		}
		c.Name = name
		out[name] = c
	}
	return out, nil
}

// parseServer reads one agent server's object.
func parseServer(data []byte) (Config, error) {
	f, err := objectFields(data, "agent server")
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if k, ok := unknownKey(f, "command", "args", "env", "dir", "permissions", "read_files", "write_files", "start_timeout"); ok {
		return Config{}, configError(fmt.Sprintf("unknown key %q", k))
	}
	var c Config
	fields := []struct {
		key string
		dst any
	}{
		{"command", &c.Command}, {"args", &c.Args}, {"env", &c.Env}, {"dir", &c.Dir},
		{"read_files", &c.ReadFiles}, {"write_files", &c.WriteFiles},
	}
	for _, fd := range fields {
		if v, ok := f[fd.key]; ok {
			if err := decodeValue(v, fd.dst); err != nil {
				return Config{}, configError(fmt.Sprintf("%q: %v", fd.key, err))
			}
		}
	}
	if v, ok := f["permissions"]; ok {
		var name string
		if err := decodeValue(v, &name); err != nil {
			return Config{}, configError(fmt.Sprintf(`"permissions": %v`, err))
		}
		p, ok := policies[name]
		if !ok {
			return Config{}, configError(fmt.Sprintf(`"permissions" %q is not read-only, allow-all or reject-all`, name))
		}
		c.Permissions = p
	}
	if v, ok := f["start_timeout"]; ok {
		var text string
		if err := decodeValue(v, &text); err != nil {
			return Config{}, configError(fmt.Sprintf(`"start_timeout": %v`, err))
		}
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return Config{}, configError(fmt.Sprintf(`"start_timeout" %q is not a positive duration such as "90s" or "2m"`, truncate(text, 64)))
		}
		c.StartTimeout = d
	}
	if err := checkCommand(c.Command, c.Args, c.Env); err != nil {
		return Config{}, err
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		return Config{}, configError(fmt.Sprintf("dir %q is not absolute", c.Dir))
	}
	return c, nil
}

// objectFields splits data, which must be exactly one JSON object of
// valid UTF-8, into its members: no key twice and no trailing data. what
// names the object in errors.
func objectFields(data []byte, what string) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errors.New(what + " is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New(what + " is not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s is not JSON: %w", what, err)
		}
		key, _ := tok.(string)
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("%s repeats key %q", what, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s is not JSON: %w", what, err)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New(what + " has trailing data")
	}
	return fields, nil
}

// unknownKey returns a key of fields not among known, the smallest one so
// that the error is the same every time.
func unknownKey(fields map[string]json.RawMessage, known ...string) (string, bool) {
	var first string
	found := false
	for k := range fields {
		isKnown := false
		for _, n := range known {
			isKnown = isKnown || k == n
		}
		if !isKnown && (!found || k < first) {
			first, found = k, true
		}
	}
	return first, found
}

// decodeValue decodes one JSON value strictly: no null (encoding/json
// would leave v as it was), and for objects no unknown or repeated keys.
func decodeValue(raw json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null")
	}
	if m, ok := v.(*map[string]string); ok {
		fields, err := objectFields(raw, "env")
		if err != nil {
			return err
		}
		out := make(map[string]string, len(fields))
		for k, fv := range fields {
			var s string
			if err := decodeValue(fv, &s); err != nil {
				return fmt.Errorf("env %q: %w", k, err)
			}
			out[k] = s
		}
		*m = out
		return nil
	}
	if l, ok := v.(*[]string); ok {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		out := make([]string, len(items))
		for i, it := range items {
			if err := decodeValue(it, &out[i]); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		*l = out
		return nil
	}
	return json.Unmarshal(raw, v)
}
