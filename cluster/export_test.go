package cluster

// ValidateStart is validateStart for the external tests.
var ValidateStart = validateStart
