package agent

// EchoLimit exposes echoLimit to the external tests.
const EchoLimit = echoLimit

// ConfigError lets the tests read the field New rejected.
type ConfigError = configError
