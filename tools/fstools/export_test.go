package fstools

// DefaultMaxBytes exposes the read limit to the external tests.
const DefaultMaxBytes = defaultMaxBytes
