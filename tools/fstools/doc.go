// Package fstools gives a model read-only access to one directory tree
// through three tools: list, read and count.
//
// Every path a model sends is slash-separated: relative to the root ("."
// being the root), or, when New is given Options.Name, also the root's
// name as a user gave it and paths below it. The tools open
// files through os.Root, so neither "..", another absolute path nor a
// symbolic link can reach outside the root. Arguments are hostile input:
// unknown fields, wrong types and missing paths are refused with an error
// the model can read.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package fstools
