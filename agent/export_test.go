package agent

// EchoLimit exposes echoLimit to the external tests.
const EchoLimit = echoLimit
