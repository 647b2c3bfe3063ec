package control

// Answer lets the tests decode what the tool returns.
type Answer = answer
