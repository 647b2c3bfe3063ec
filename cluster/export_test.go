package cluster

// ValidateStart is validateStart for the external tests.
var ValidateStart = validateStart

// ParseAdvertisement is parseAdvertisement for the external tests.
var ParseAdvertisement = parseAdvertisement

// AdvertisementError is advertisementError for the external tests.
type AdvertisementError = advertisementError
