// Package acp is the provider of out-of-process children speaking the
// Agent Client Protocol over stdio (P3): any ACP agent (a coding agent, the
// SDK's example agent, our own) becomes a child a parent delegates to
// exactly as to an in-process one.
//
// Each Start launches the configured command as the leader of its own
// process group, in the configured (or the node's) working directory,
// with the node's environment minus its credentials (see Config.Env) plus
// the configured ones and a tag of its own (SUBACTOR_AGENT_TAG). It runs
// initialize (protocol version 1) and session/new, and returns once the
// agent's session exists; the prompt turn then runs on a run actor like
// every child's. The agent's message chunks become the output; its tool
// calls, plans, thoughts and other updates become progress events for the
// parent's listeners (E6), besides subagent's kinds with kinds of their
// own that a listener may ignore: "acp-thought" (streamed reasoning),
// "acp-plan" (the whole plan, one "[status] content" entry a line),
// "acp-permission" (how a permission request was answered), "acp-update"
// (any other update, by name) and "acp-limit" (a bound refused the
// agent's request). Its stop reason maps end_turn→completed,
// cancelled→aborted, max_tokens→max-tokens, refusal→refusal, anything
// else→error with the agent's words in the result's Detail.
//
// Cancelling (the start context ending, or Dispose mid-turn) sends
// session/cancel while the prompt stays open, waits a bounded time for the
// agent's answer and answers pending permission requests "cancelled"; the
// result settles aborted. The run's release ends the process on a ladder
// (close stdin, SIGTERM to the group, SIGKILL to the group, each with a
// bounded wait), reaps it and ends whatever else is left in its group and,
// on Linux, the processes it started that left the group: those carrying
// its tag, and, in a program that adopts orphans (cmd/node does), those
// that became its children. cmd/node kills every agent as its last resort
// (a second Ctrl-C). On Linux an agent also gets SIGKILL when the node
// dies, and a journal in the node's data directory (Config.Journal) lets
// the next node end what the dead one's agents left. The process layer is
// internal/agentproc. Where there are no Unix process groups
// (Windows), Start fails with an ErrStart error matching errors.ErrUnsupported.
//
// The agent's requests are answered by us: session/request_permission by
// a PermissionPolicy (ReadOnly by default), fs/read_text_file and
// fs/write_text_file inside the working directory when enabled (regular
// files only, opened without waiting, so a FIFO or a device is refused at
// once; reads of at most 8 MiB), anything else "method not found". Its
// output is hostile input (K3), and what it costs is bounded:
//
//   - a line past 8 MiB closes the connection; unknown update kinds are
//     ignored; the kept answer is capped at Config.MaxOutput;
//   - of a tool call left open the turn keeps its id, title and kind cut
//     to 512 bytes each, for at most 256 calls (about 400 KB); a progress
//     event's text is cut to 4 KiB, a plan's included;
//   - at most 32 requests of the agent are in flight at once, holding
//     at most 32 MiB (their lines, a file read's text and
//     answer until the agent has read it); past either the request is
//     answered at once with an error whose data says "retry", the
//     parent's listeners get one "acp-limit" progress event a run and
//     the log a count. While the agent does not read those answers
//     either, its output is not read: it waits on its pipe, and the
//     node's memory stays where it is;
//   - progress goes straight to the Service's sink, which never blocks.
//
// With a Store, each child's descriptor (D1) keeps the agent's session id
// and whether the agent can load sessions in its provider data. Resume
// then continues the child through session/load, keeping the replayed
// history out of the new output, when the agent advertised loadSession;
// otherwise it fails before any process starts with
// subagent.ErrNotResumable.
//
// ACP has no way to add a message to a turn in flight, so an ACP run is
// not a subagent.Steerer. Each activation is one prompt turn: the process
// ends with it, and a later turn is a Resume. The request's agent options
// (model provider, model) are not passed on: the agent's own configuration
// chooses its model.
//
// ParseConfigFile reads the agent_servers config file editors use, into
// one Config per agent.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package acp
