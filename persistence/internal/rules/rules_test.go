package rules

import "testing"

// TestD4_OnlyMessagesAreModelVisible pins the rule Compact keeps records
// by: every kind but KindMessage, including kinds added later, is
// log-only.
func TestD4_OnlyMessagesAreModelVisible(t *testing.T) {
	if LogOnly(KindMessage) {
		t.Error("LogOnly(KindMessage) = true")
	}
	for _, kind := range []string{"subagent/descriptor", "descriptor", "custom/future-kind"} {
		if !LogOnly(kind) {
			t.Errorf("LogOnly(%q) = false", kind)
		}
	}
}
