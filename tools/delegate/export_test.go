package delegate

// ChildID exposes childID to the external tests.
var ChildID = childID

// LimitError is the argument-limit error, for the external tests.
type LimitError = limitError
