package cluster

import (
	"fmt"
	"strings"

	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// A member advertises the providers it offers as its cluster kinds
// ("subactor.provider:<name>", the kind its continuable children are
// grains of, grain.go) and gossips the rest about itself as a
// messages.MemberState (gossip.go): each provider's capabilities (S4's
// start-time features) and its load. A peer's advertisement is untrusted
// input (K3): parseAdvertisement bounds it and checks the state against
// the kinds, and a member whose advertisement fails is listed offering
// nothing.

// Bounds of a member's advertisement.
const (
	maxAdvertised   = 64  // provider kinds a member may advertise
	maxProviderName = 128 // bytes of a provider's name
)

// advertisementError says why a member's advertisement was refused.
type advertisementError struct {
	Kind   string // the kind or state at fault, cut to a bounded length
	Reason string
}

func (e *advertisementError) Error() string {
	return fmt.Sprintf("cluster: member advertisement %q refused: %s", e.Kind, e.Reason)
}

// parseAdvertisement reads the providers a member offers from its kinds
// (kinds not of subactor are ignored) and their capabilities from its
// gossiped state; a provider the state leaves out declares none.
func parseAdvertisement(kinds []string, st *messages.MemberState) ([]string, map[string]subagent.Capabilities, error) {
	bad := func(what, reason string) ([]string, map[string]subagent.Capabilities, error) {
		if len(what) > 80 {
			what = what[:80] + "…"
		}
		return nil, nil, &advertisementError{Kind: what, Reason: reason}
	}
	var provs []string
	caps := map[string]subagent.Capabilities{}
	for _, k := range kinds {
		name, ok := strings.CutPrefix(k, kindPrefix)
		if !ok {
			continue
		}
		if len(provs) == maxAdvertised {
			return bad(k, fmt.Sprintf("more than %d providers", maxAdvertised))
		}
		if err := checkProviderName(name); err != nil {
			return bad(k, err.Error())
		}
		if _, dup := caps[name]; dup {
			return bad(k, fmt.Sprintf("provider %q advertised twice", name))
		}
		provs = append(provs, name)
		caps[name] = subagent.Capabilities{}
	}
	if st.GetCapacity() < 0 || st.GetRuns() < 0 {
		return bad(stateKey, fmt.Sprintf("capacity %d, runs %d", st.GetCapacity(), st.GetRuns()))
	}
	declared := map[string]bool{}
	for _, o := range st.GetProviders() {
		name := o.GetName()
		if _, ok := caps[name]; !ok {
			return bad(kindPrefix+name, fmt.Sprintf("capabilities of provider %q, which the member does not offer", name))
		}
		if declared[name] {
			return bad(kindPrefix+name, fmt.Sprintf("capabilities of provider %q advertised twice", name))
		}
		declared[name] = true
		caps[name] = subagent.Capabilities{OutputSchema: o.GetOutputSchema(), DepthLimit: o.GetDepthLimit(), ToolFilter: o.GetToolFilter(), Persona: o.GetPersona()}
	}
	return provs, caps, nil
}

// checkProviderName bounds a provider's name as advertised: not empty,
// at most maxProviderName bytes, printable ASCII without '#' or '/' (a
// grain's key is its kind, a '/' and its identity).
func checkProviderName(name string) error {
	if name == "" || len(name) > maxProviderName {
		return fmt.Errorf("a provider name of %d bytes (1 to %d)", len(name), maxProviderName)
	}
	for _, r := range name {
		if r <= ' ' || r > '~' || r == '#' || r == '/' {
			return fmt.Errorf("provider name %q holds %q", name, r)
		}
	}
	return nil
}
