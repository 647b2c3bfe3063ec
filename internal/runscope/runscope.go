// Package runscope carries the Service's per-run scope on the context it
// hands a provider's Start or Resume. Only the Service (and tests standing
// in for it) put one there; providers read it with subagent.ScopeOf.
package runscope

import "context"

type key struct{}

// value is what a context carries: the scope and the cancel of the
// context it was put on, when the Service hands that over.
type value struct {
	scope  any
	cancel context.CancelCauseFunc
}

// With returns ctx carrying scope (a subagent.Scope).
func With(ctx context.Context, scope any) context.Context {
	return WithCancel(ctx, scope, nil)
}

// WithCancel is With where cancel is ctx's own: a run that ends once its
// one child has may run that child under ctx itself and cancel it with
// cancel, rather than derive a context (and its registration) of its own.
func WithCancel(ctx context.Context, scope any, cancel context.CancelCauseFunc) context.Context {
	return context.WithValue(ctx, key{}, value{scope, cancel})
}

// Of returns the scope ctx carries, or nil.
func Of(ctx context.Context) any {
	v, _ := ctx.Value(key{}).(value)
	return v.scope
}

// Cancel returns the cancel WithCancel put on ctx, or nil.
func Cancel(ctx context.Context) context.CancelCauseFunc {
	v, _ := ctx.Value(key{}).(value)
	return v.cancel
}
