// Package actors hosts the actor runtime the seam runs on. A System wraps one
// protoactor actor system with our logger; the registry, parent and run
// actors live in the subpackages, and the providers in actors/providers.
//
// Callers embedding subactor create one System, build a registry.Service on
// it, register providers and never need to import protoactor themselves.
package actors
