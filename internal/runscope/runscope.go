// Package runscope carries the Service's per-run scope on the context it
// hands a provider's Start or Resume. Only the Service (and tests standing
// in for it) put one there; providers read it with subagent.ScopeOf.
package runscope

import "context"

type key struct{}

// With returns ctx carrying scope (a subagent.Scope).
func With(ctx context.Context, scope any) context.Context {
	return context.WithValue(ctx, key{}, scope)
}

// Of returns the scope ctx carries, or nil.
func Of(ctx context.Context) any { return ctx.Value(key{}) }
