package bench

import (
	"context"
	"testing"
)

// TestEinoAgentToolAnswers runs the ADK parent once, untimed, and checks
// that the child's answer comes back as the parent's final answer.
func TestEinoAgentToolAnswers(t *testing.T) {
	if err := checkEinoAnswer(einoRunOnce(context.Background())); err != nil {
		t.Fatal(err)
	}
}

// The compiled peer answers with the child's answer, and with callbacks
// its handler sees every node's output.
func TestEinoCompiledAnswers(t *testing.T) {
	ctx := context.Background()
	for _, withCallbacks := range []bool{false, true} {
		e, err := newEinoCompiled(ctx, withCallbacks)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkEinoAnswer(e.run(ctx)); err != nil {
			t.Fatal(err)
		}
		if withCallbacks != (e.events > 0) {
			t.Fatalf("callbacks %v: %d events", withCallbacks, e.events)
		}
	}
}
