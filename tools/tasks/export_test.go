package tasks

// Answer lets the tests decode what the tools return.
type Answer = taskAnswer
