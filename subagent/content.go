package subagent

import "strings"

// ContentBlock is one block of a prompt, a steer message or an output.
type ContentBlock struct {
	Type string `json:"type"` // "text"
	Text string `json:"text,omitempty"`
	// Source attributes a follow-up to whoever sent it (the user, or a
	// coordinating agent and its session): stored with the message, never
	// shown to the model nor used to authorise anything (S8).
	Source string `json:"source,omitempty"`
}

// Text returns a text block.
func Text(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// TextOf joins the text of blocks with newlines.
func TextOf(blocks []ContentBlock) string {
	if len(blocks) == 1 {
		return blocks[0].Text // most messages are one block: no copy
	}
	var b strings.Builder
	for i, c := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text)
	}
	return b.String()
}
