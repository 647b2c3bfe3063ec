package agentproc

import "strings"

// WithTag sets EnvAgentTag in env to tag, after the tags env carries
// already (a node that runs as an agent passes its own on).
func WithTag(env []string, tag string) []string {
	out := make([]string, 0, len(env)+1)
	value := tag
	for _, kv := range env {
		if old, ok := strings.CutPrefix(kv, EnvAgentTag+"="); ok {
			if old != "" {
				value = old + "," + tag
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, EnvAgentTag+"="+value)
}
