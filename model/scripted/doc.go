// Package scripted is the embedded default model: deterministic, offline and
// keyless. It stands in for an LLM so that the whole runtime (delegation,
// steering, cancellation, resume) can run without a network.
//
// The model is a pure function of the request: it rereads the conversation
// on every call to find the task (the first user message), the tool calls it
// already made and their results, and decides the next step from that alone.
// So it keeps no state and continues a resumed history as if it had never
// stopped.
//
// Tasks:
//
//	survey <dir>   list dir, delegate "tally <dir>/<d>" for each sub-directory
//	               to the "subagent" tool (or walk it itself when that tool is
//	               not offered), count the files directly in dir (one count
//	               of dir itself), then report the totals and how many
//	               folders the whole tree holds
//	tally <dir>    walk dir breadth-first with list and a count of each
//	               folder, answer JSON matching TallySchema (files, lines,
//	               bytes and folders)
//	echo <text>    answer text
//	delegate <task>
//	               delegate task to the "subagent" tool, then answer what
//	               the child answered
//	fanout <task> | <task> ...
//	               delegate each task to a child of its own, all in one
//	               turn, then answer what each child answered, in order
//
// Later user messages (steers) are acknowledged in the answer as "noted".
package scripted
