// Tying a delegating parent's lifetime (subagent.Closable) to the contexts
// its children start under.

package rules

import (
	"context"
	"fmt"

	"github.com/subactor/subactor/subagent"
)

type key struct{}

// Within marks ctx as one that ends when c closes (an agent's own loop
// context), so that the Service need not tie a start under it to c's
// lifetime again.
func Within(ctx context.Context, c subagent.Closable) context.Context {
	return context.WithValue(ctx, key{}, c)
}

// IsWithin reports whether ctx was marked by Within for c.
func IsWithin(ctx context.Context, c subagent.Closable) bool {
	v, _ := ctx.Value(key{}).(subagent.Closable)
	return v != nil && v == c
}

// ParentClosed returns an error wrapping subagent.ErrParentClosed if p is
// a Closable that has closed, nil otherwise.
func ParentClosed(p subagent.Agent) error {
	c, ok := p.(subagent.Closable)
	if !ok {
		return nil
	}
	if life := c.Lifetime(); life.Err() != nil {
		return fmt.Errorf("%w: %w", subagent.ErrParentClosed, context.Cause(life))
	}
	return nil
}
