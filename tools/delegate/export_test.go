package delegate

// ChildID exposes childID to the external tests.
var ChildID = childID
