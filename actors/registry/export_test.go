package registry

// TaskOf exposes taskOf to the external tests.
var TaskOf = taskOf
