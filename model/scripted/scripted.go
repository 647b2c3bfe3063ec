package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/dustin/go-humanize/english"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// TallySchema is the output schema of a tally answer.
var TallySchema = json.RawMessage(`{"type":"object","properties":{` +
	`"path":{"type":"string"},` +
	`"files":{"type":"integer","minimum":0},` +
	`"lines":{"type":"integer","minimum":0},` +
	`"bytes":{"type":"integer","minimum":0},` +
	`"folders":{"type":"integer","minimum":1},` +
	`"noted":{"type":"array","items":{"type":"string"}},` +
	`"cut":{"type":"array","items":{"type":"string"}}},` +
	`"required":["path","files","lines","bytes","folders"]}`)

// delegateTool is the name of the tool survey delegates through.
const delegateTool = "subagent"

type model struct{}

// New returns the scripted model.
func New() agent.Model { return model{} }

// Model and GenAIProvider name the scripted model in traces (its chat
// spans' gen_ai.request.model and gen_ai.provider.name).
func (model) Model() string         { return "scripted" }
func (model) GenAIProvider() string { return "subactor.scripted" }

// Generate answers the next step from req.Messages, req.Tools and
// req.MaxTokens alone; a final answer over MaxTokens (at a rough four bytes
// a token) is cut and stops with MaxTokens.
func (model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return agent.Response{}, err
	}
	msg := respond(&req)
	resp := agent.Response{Message: msg, StopReason: subagent.Completed}
	if req.MaxTokens > 0 && len(msg.ToolCalls) == 0 {
		if limit, text := req.MaxTokens*4, subagent.TextOf(msg.Content); len(text) > limit {
			resp.Message.Content = []subagent.ContentBlock{subagent.Text(truncate(text, limit))}
			resp.StopReason = subagent.MaxTokens
		}
	}
	resp.Usage = subagent.Usage{InputTokens: size(req.Messages...) / 4, OutputTokens: size(resp.Message) / 4}
	return resp, nil
}

// size is the byte size of msgs' text and tool arguments: the rough token
// count is a quarter of it.
func size(msgs ...agent.Message) int {
	n := 0
	for _, m := range msgs {
		for _, c := range m.Content {
			n += len(c.Text)
		}
		for _, c := range m.ToolCalls {
			n += len(c.Args)
		}
	}
	return n
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func respond(req *agent.Request) agent.Message {
	c := read(req.Messages)
	line := firstLine(c.task)
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "survey":
		return c.survey(dirArg(arg), req.Tools)
	case "tally":
		return c.tally(dirArg(arg))
	case "echo":
		return text(strings.TrimPrefix(strings.TrimPrefix(c.task, "echo"), " "))
	case "delegate":
		return c.delegate(strings.TrimSpace(strings.TrimPrefix(c.task, "delegate")), req.Tools)
	case "fanout":
		return c.fanout(strings.TrimPrefix(c.task, "fanout"), req.Tools)
	}
	return text(fmt.Sprintf("scripted model: unknown task %q", line))
}

func dirArg(arg string) string {
	if arg = strings.TrimSpace(arg); arg == "" {
		return "."
	}
	return path.Clean(arg)
}

// conversation is what the model reads back from a request.
type conversation struct {
	task   string   // the first user message
	steers []string // later user messages
	step   int      // 1-based number of the step to answer
	// Outcomes of earlier calls, by the path they were about.
	lists, counts, tallies map[string]outcome
	// delegated is the outcome of a delegate task's call, by its prompt.
	delegated map[string]outcome
}

// outcome is a tool call's result; a call still without one is a failure.
type outcome struct {
	text  string
	isErr bool
}

func read(msgs []agent.Message) conversation {
	c := conversation{step: 1} // its maps made on first use: most tasks need none
	var results map[string]*agent.Message
	var calls []agent.ToolCall
	first := true
	for i := range msgs {
		switch m := &msgs[i]; m.Role {
		case agent.User:
			if first {
				c.task, first = subagent.TextOf(m.Content), false
			} else {
				c.steers = append(c.steers, subagent.TextOf(m.Content))
			}
		case agent.Assistant:
			c.step++
			calls = append(calls, m.ToolCalls...)
		case agent.ToolRole:
			if results == nil {
				results = map[string]*agent.Message{}
			}
			results[m.ToolCallID] = m
		}
	}
	if len(calls) > 0 {
		c.outcomes(calls, results)
	}
	return c
}

// outcomes files the outcome of each call by what it was about. It is a
// function of its own to keep read's frame small: a child's stack is
// deepest under its model call.
func (c *conversation) outcomes(calls []agent.ToolCall, results map[string]*agent.Message) {
	for _, call := range calls {
		o := outcome{text: "no result", isErr: true}
		if r, ok := results[call.ID]; ok {
			o = outcome{text: subagent.TextOf(r.Content), isErr: r.IsError}
		}
		var args struct {
			Path   string `json:"path"`
			Prompt string `json:"prompt"`
		}
		if json.Unmarshal(call.Args, &args) != nil {
			continue // not a call this model made
		}
		switch call.Name {
		case "list":
			put(&c.lists, path.Clean(args.Path), o)
		case "count":
			put(&c.counts, path.Clean(args.Path), o)
		case delegateTool:
			if dir, ok := strings.CutPrefix(args.Prompt, "tally "); ok {
				put(&c.tallies, dirArg(dir), o)
			} else {
				put(&c.delegated, args.Prompt, o)
			}
		}
	}
}

// put sets m[k] = o, making m first if need be.
func put(m *map[string]outcome, k string, o outcome) {
	if *m == nil {
		*m = map[string]outcome{}
	}
	(*m)[k] = o
}

// plan collects the tool calls of one step.
type plan struct {
	step  int
	calls []agent.ToolCall
}

func (p *plan) add(name string, args any) {
	data, _ := json.Marshal(args) // plain structs always marshal
	p.calls = append(p.calls, agent.ToolCall{ID: fmt.Sprintf("call-%d-%d", p.step, len(p.calls)), Name: name, Args: data})
}

func (p *plan) list(dir string)   { p.add("list", map[string]string{"path": dir}) }
func (p *plan) count(path string) { p.add("count", map[string]string{"path": path}) }

func (p *plan) delegate(dir string, withSchema bool) {
	args := struct {
		Description  string          `json:"description"`
		Prompt       string          `json:"prompt"`
		OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	}{
		// The description stays short whatever the path: the delegate
		// tool bounds it.
		Description: "tally " + path.Base(dir),
		Prompt:      "tally " + dir,
	}
	if withSchema {
		args.OutputSchema = TallySchema
	}
	p.add(delegateTool, args)
}

func (p *plan) message() agent.Message {
	return agent.Message{Role: agent.Assistant, ToolCalls: p.calls}
}

type figures struct {
	Files int64 `json:"files"`
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// Folders counts the folders listed, the walked one included; a
	// file's figures have none.
	Folders int64 `json:"folders"`
	// Cut says which listings and counts the tools cut short, and how:
	// the figures leave out what they did not show.
	Cut []string `json:"cut,omitempty"`
}

func (f *figures) add(g figures) {
	f.Files += g.Files
	f.Lines += g.Lines
	f.Bytes += g.Bytes
	f.Folders += g.Folders
	f.Cut = append(f.Cut, g.Cut...)
}

// String is f as a person reads it: "1 file, 12 lines, 3.4 KiB".
func (f figures) String() string {
	return fmt.Sprintf("%s, %s, %s", english.Plural(int(f.Files), "file", ""), english.Plural(int(f.Lines), "line", ""), humanSize(f.Bytes))
}

// humanSize is n bytes in binary units, as du -h and the tools' limits say
// them ("1 GiB").
func humanSize(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// entries reads the list result of dir; cut says how it was cut short,
// when it was (the survey takes the first page only, so that a huge
// directory costs it no more than a page).
func (o outcome) entries(dir string) (es []entry, cut string, err error) {
	if o.isErr {
		return nil, "", errors.New(o.text)
	}
	var l struct {
		Entries   []entry `json:"entries"`
		Truncated bool    `json:"truncated"`
		Total     int     `json:"total"`
	}
	into := any(&l)
	if strings.HasPrefix(o.text, "[") {
		// A session stored before list had pages: its bare array.
		into = &l.Entries
	}
	if err := json.Unmarshal([]byte(o.text), into); err != nil {
		return nil, "", fmt.Errorf("unreadable list result: %w", err)
	}
	slices.SortFunc(l.Entries, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	if l.Truncated {
		cut = fmt.Sprintf("%s: listed %d of %d entries", dir, len(l.Entries), l.Total)
	}
	return l.Entries, cut, nil
}

// file reads a count result: the figures of one file, or of the files
// directly in a directory (a count of a directory has "files").
func (o outcome) file() (figures, error) {
	if o.isErr {
		return figures{}, errors.New(o.text)
	}
	var c struct {
		Path       string `json:"path"`
		Files      *int64 `json:"files"`
		Lines      int64  `json:"lines"`
		Bytes      int64  `json:"bytes"`
		Truncated  bool   `json:"truncated"`
		Counted    int64  `json:"counted"`
		Unreadable int64  `json:"unreadable"`
	}
	if err := json.Unmarshal([]byte(o.text), &c); err != nil {
		return figures{}, fmt.Errorf("unreadable count result: %w", err)
	}
	f := figures{Files: 1, Lines: c.Lines, Bytes: c.Bytes}
	if c.Files != nil {
		f.Files = *c.Files
	}
	if c.Truncated {
		f.Cut = []string{fmt.Sprintf("%s: lines counted in the first %s of %s", c.Path, humanSize(c.Counted), humanSize(c.Bytes))}
	}
	if c.Unreadable > 0 {
		f.Cut = append(f.Cut, fmt.Sprintf("%s: %s unreadable", c.Path, english.Plural(int(c.Unreadable), "file", "")))
	}
	return f, nil
}

// files returns the figures of the files directly in dir, whose entries
// are es, or adds to p the count they need: one count of dir itself. (A
// session stored before count took directories has a count of each file
// instead; those still add up.) A failed count leaves the files out.
func (c *conversation) files(dir string, es []entry, p *plan) figures {
	var fig figures
	if o, ok := c.counts[dir]; ok {
		if f, err := o.file(); err == nil {
			fig.add(f)
		}
		return fig
	}
	for _, e := range es {
		if e.Type != "file" {
			continue
		}
		o, ok := c.counts[path.Join(dir, e.Name)]
		if !ok {
			p.count(dir)
			return figures{}
		}
		if f, err := o.file(); err == nil {
			fig.add(f)
		}
	}
	return fig
}

func hasFiles(es []entry) bool {
	return slices.ContainsFunc(es, func(e entry) bool { return e.Type == "file" })
}

// tally reads a delegate result: the child's structured answer, or its
// output text parsed as JSON.
func (o outcome) tally() (figures, error) {
	if o.isErr {
		return figures{}, errors.New(o.text)
	}
	var res struct {
		Output     string          `json:"output"`
		Structured json.RawMessage `json:"structured"`
	}
	if err := json.Unmarshal([]byte(o.text), &res); err != nil {
		return figures{}, fmt.Errorf("unreadable subagent result: %w", err)
	}
	src := res.Structured
	if len(src) == 0 || string(src) == "null" {
		src = json.RawMessage(res.Output)
	}
	var f figures
	if err := json.Unmarshal(src, &f); err != nil {
		return figures{}, fmt.Errorf("unreadable tally %q: %w", firstLine(res.Output), err)
	}
	return f, nil
}

// walk visits root breadth-first through the listings so far. It adds the
// lists and counts still missing to p and returns the figures of the files
// counted under root. Symbolic links are skipped, and so are entries whose
// list or count failed below root; a failure to list root itself is the
// error.
func (c *conversation) walk(root string, p *plan) (figures, error) {
	var fig figures
	queue := []string{root}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		o, ok := c.lists[dir]
		if !ok {
			p.list(dir)
			continue
		}
		es, cut, err := o.entries(dir)
		if err != nil {
			if dir == root {
				return figures{}, err
			}
			continue
		}
		fig.Folders++
		if cut != "" {
			fig.Cut = append(fig.Cut, cut)
		}
		for _, e := range es {
			if e.Type == "dir" {
				queue = append(queue, path.Join(dir, e.Name))
			}
		}
		if hasFiles(es) {
			fig.add(c.files(dir, es, p))
		}
	}
	return fig, nil
}

func (c *conversation) tally(dir string) agent.Message {
	p := &plan{step: c.step}
	fig, err := c.walk(dir, p)
	switch {
	case err != nil:
		// Plain text: under TallySchema the child fails, and so does the
		// folder in its parent's survey.
		return text(fmt.Sprintf("tally %s: failed: %s", dir, firstLine(err.Error())))
	case len(p.calls) > 0:
		return p.message()
	}
	out, _ := json.Marshal(struct {
		Path    string   `json:"path"`
		Files   int64    `json:"files"`
		Lines   int64    `json:"lines"`
		Bytes   int64    `json:"bytes"`
		Folders int64    `json:"folders"`
		Noted   []string `json:"noted,omitempty"`
		Cut     []string `json:"cut,omitempty"`
	}{dir, fig.Files, fig.Lines, fig.Bytes, fig.Folders, c.steers, fig.Cut})
	return text(string(out))
}

// folder is one sub-directory in a survey.
type folder struct {
	path      string
	delegated bool
	fig       figures
	failed    string
}

func (c *conversation) survey(dir string, tools []agent.ToolSpec) agent.Message {
	p := &plan{step: c.step}
	top, ok := c.lists[dir]
	if !ok {
		p.list(dir)
		return p.message()
	}
	es, cut, err := top.entries(dir)
	if err != nil {
		return text(c.noted(fmt.Sprintf("survey %s: failed: %s", dir, firstLine(err.Error()))))
	}
	delegate, withSchema := offered(tools)
	var folders []folder
	var files figures
	if cut != "" {
		files.Cut = []string{cut}
	}
	for _, e := range es {
		if e.Type == "dir" {
			if f, ok := c.folder(path.Join(dir, e.Name), delegate, withSchema, p); ok {
				folders = append(folders, f)
			}
		}
	}
	withFiles := hasFiles(es)
	if withFiles {
		files.add(c.files(dir, es, p))
	}
	if len(p.calls) > 0 {
		return p.message()
	}
	return text(c.report(dir, folders, files, withFiles))
}

// folder reports on the sub-directory q of a survey, or only adds the
// delegation it needs to p (ok is false). While a walk is incomplete the
// figures are partial, but then p holds calls and no report is written.
func (c *conversation) folder(q string, delegate, withSchema bool, p *plan) (f folder, ok bool) {
	f.path = q
	var err error
	switch o, done := c.tallies[q]; {
	case done:
		f.delegated = true
		f.fig, err = o.tally()
	case delegate:
		p.delegate(q, withSchema)
		return f, false
	default:
		// No delegate tool (say, at the depth cap): walk it here.
		f.fig, err = c.walk(q, p)
	}
	if err != nil {
		f.failed = firstLine(err.Error())
	}
	return f, true
}

// delegate hands task to a child through the delegate tool, then answers
// with what the child answered.
func (c *conversation) delegate(task string, tools []agent.ToolSpec) agent.Message {
	if o, ok := c.delegated[task]; ok {
		if o.isErr {
			return text("the subagent failed: " + firstLine(o.text))
		}
		var res struct {
			Output string `json:"output"`
		}
		if err := json.Unmarshal([]byte(o.text), &res); err != nil {
			return text("unreadable subagent result: " + err.Error())
		}
		return text("the subagent says: " + res.Output)
	}
	if ok, _ := offered(tools); !ok {
		return text("scripted model: no " + delegateTool + " tool to delegate with")
	}
	p := plan{step: c.step}
	p.add(delegateTool, struct {
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
	}{Description: "delegate", Prompt: task})
	return p.message()
}

// fanout hands each " | "-separated task of tasks to a child of its own
// through the delegate tool, all in one turn (so they run concurrently,
// F1), then answers with what each child answered, in task order.
func (c *conversation) fanout(tasks string, tools []agent.ToolSpec) agent.Message {
	var each []string
	for t := range strings.SplitSeq(tasks, "|") {
		if t = strings.TrimSpace(t); t != "" {
			each = append(each, t)
		}
	}
	if len(each) == 0 {
		return text("scripted model: fanout needs tasks")
	}
	if _, ok := c.delegated[each[0]]; !ok {
		if ok, _ := offered(tools); !ok {
			return text("scripted model: no " + delegateTool + " tool to delegate with")
		}
		p := plan{step: c.step}
		for _, t := range each {
			p.add(delegateTool, struct {
				Description string `json:"description"`
				Prompt      string `json:"prompt"`
			}{Description: "delegate", Prompt: t})
		}
		return p.message()
	}
	var b strings.Builder
	for i, t := range each {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(firstLine(c.delegate(t, tools).Content[0].Text))
	}
	return text(b.String())
}

// offered reports whether the delegate tool is offered and whether it takes
// an output schema (only providers that support one expose the parameter).
func offered(tools []agent.ToolSpec) (delegate, withSchema bool) {
	for _, t := range tools {
		if t.Name != delegateTool {
			continue
		}
		var params struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(t.Parameters, &params) // unreadable: no schema
		_, withSchema = params.Properties["output_schema"]
		return true, withSchema
	}
	return false, false
}

// report is the survey's final answer. The folders surveyed are every
// folder of the tree that was listed, dir and the nested ones included.
// Failed folders count neither in the totals nor in the folders surveyed.
func (c *conversation) report(dir string, folders []folder, files figures, hasFiles bool) string {
	total := files
	surveyed, delegated := int64(1), 0
	var lines, failed []string
	for _, f := range folders {
		if f.failed != "" {
			failed = append(failed, fmt.Sprintf("- %s: failed: %s", f.path, f.failed))
			continue
		}
		total.add(f.fig)
		// A child's answer without a count (a tally that predates it)
		// still stands for its own folder.
		surveyed += max(f.fig.Folders, 1)
		if f.delegated {
			delegated++
		}
		lines = append(lines, fmt.Sprintf("- %s: %s", f.path, f.fig))
	}
	if hasFiles {
		lines = append(lines, "- (top level): "+files.String())
	}
	head := fmt.Sprintf("survey %s: %s in %s (%d delegated)", dir, total, english.Plural(int(surveyed), "folder", ""), delegated)
	var cuts []string
	for _, cut := range total.Cut {
		cuts = append(cuts, "- cut: "+cut)
	}
	return c.noted(strings.Join(slices.Concat([]string{head}, lines, failed, cuts), "\n"))
}

// noted appends one line per steer message to s.
func (c *conversation) noted(s string) string {
	for _, m := range c.steers {
		s += "\nnoted: " + strings.ReplaceAll(m, "\n", " ")
	}
	return s
}

func text(s string) agent.Message {
	return agent.Message{Role: agent.Assistant, Content: []subagent.ContentBlock{subagent.Text(s)}}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
