package fstools

// DefaultMaxBytes exposes the read limit to the external tests.
const DefaultMaxBytes = defaultMaxBytes

// MaxListEntries exposes the list page to the external tests.
const MaxListEntries = maxListEntries
