package cluster

import "time"

// ValidateStart is validateStart for the external tests.
var ValidateStart = validateStart

// ParseAdvertisement is parseAdvertisement for the external tests.
var ParseAdvertisement = parseAdvertisement

// AdvertisementError is advertisementError for the external tests.
type AdvertisementError = advertisementError

// SetGrainIdle shortens how long n's child grains stay idle; before any
// lookup.
func SetGrainIdle(n *Node, d time.Duration) { n.grainIdle = d }
