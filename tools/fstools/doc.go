// Package fstools gives a model read-only access to one directory tree
// through three tools: list, read and count.
//
// Every path a model sends is relative and slash-separated ("." is the
// root). The tools open files through os.Root, so neither "..", an absolute
// path nor a symbolic link can reach outside the root. Arguments are
// hostile input: unknown fields, wrong types and missing paths are refused
// with an error the model can read.
package fstools
