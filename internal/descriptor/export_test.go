package descriptor

// UnsupportedVersionError lets the tests read the version refused.
type UnsupportedVersionError = unsupportedVersionError

// DescriptorError lets the tests match a malformed descriptor's error.
type DescriptorError = descriptorError
