package bench

import (
	"context"
	"testing"
)

func BenchmarkEinoAgentTool(b *testing.B) { EinoAgentTool(b) }

// TestEinoAgentToolAnswers runs the benchmark's parent once, untimed, and
// checks that the child's answer comes back as the parent's final answer.
func TestEinoAgentToolAnswers(t *testing.T) {
	if err := checkEinoAnswer(einoRunOnce(context.Background())); err != nil {
		t.Fatal(err)
	}
}
