package cluster

import (
	"fmt"
	"strings"

	"github.com/subactor/subactor/subagent"
)

// A member advertises, beside each provider's kind, that provider's
// capabilities (S4's start-time features) as one more kind:
// "subactor.provider/<name>#caps=<feature>,...", the features named as
// subagent.Capabilities's JSON names. A peer's advertisement is untrusted
// input (K3): parseAdvertisement bounds it and refuses a name it does not
// know, and a member whose advertisement fails is listed offering nothing.
const capsMark = "#caps="

// Bounds of a member's advertisement.
const (
	maxAdvertised    = 64  // provider kinds a member may advertise
	maxProviderName  = 128 // bytes of a provider's name
	maxCapsAdvertise = 256 // bytes of one capabilities kind
)

// capabilityNames are the features a member may advertise, in
// subagent.Capabilities's order, with their setters and getters.
var capabilityNames = []struct {
	name string
	get  func(subagent.Capabilities) bool
	set  func(*subagent.Capabilities)
}{
	{"outputSchema", func(c subagent.Capabilities) bool { return c.OutputSchema }, func(c *subagent.Capabilities) { c.OutputSchema = true }},
	{"depthLimit", func(c subagent.Capabilities) bool { return c.DepthLimit }, func(c *subagent.Capabilities) { c.DepthLimit = true }},
	{"toolFilter", func(c subagent.Capabilities) bool { return c.ToolFilter }, func(c *subagent.Capabilities) { c.ToolFilter = true }},
	{"persona", func(c subagent.Capabilities) bool { return c.Persona }, func(c *subagent.Capabilities) { c.Persona = true }},
}

// capsKind is the kind advertising provider's capabilities.
func capsKind(provider string, caps subagent.Capabilities) string {
	var names []string
	for _, c := range capabilityNames {
		if c.get(caps) {
			names = append(names, c.name)
		}
	}
	return kindPrefix + provider + capsMark + strings.Join(names, ",")
}

// advertisementError says why a member's advertisement was refused.
type advertisementError struct {
	Kind   string // the kind at fault, cut to a bounded length
	Reason string
}

func (e *advertisementError) Error() string {
	return fmt.Sprintf("cluster: member advertisement %q refused: %s", e.Kind, e.Reason)
}

// parseAdvertisement reads the providers and their capabilities from a
// member's kinds; kinds not of subactor are ignored. A provider without
// a capabilities kind declares none.
func parseAdvertisement(kinds []string) ([]string, map[string]subagent.Capabilities, error) {
	bad := func(kind, reason string) ([]string, map[string]subagent.Capabilities, error) {
		if len(kind) > 80 {
			kind = kind[:80] + "…"
		}
		return nil, nil, &advertisementError{Kind: kind, Reason: reason}
	}
	var provs []string
	caps := map[string]subagent.Capabilities{}
	declared := map[string]bool{}
	type capsOf struct{ provider, list, kind string }
	var pending []capsOf
	n := 0
	for _, k := range kinds {
		rest, ok := strings.CutPrefix(k, kindPrefix)
		if !ok {
			continue
		}
		if n++; n > 2*maxAdvertised {
			return bad(k, fmt.Sprintf("more than %d providers", maxAdvertised))
		}
		if len(k) > maxCapsAdvertise {
			return bad(k, fmt.Sprintf("longer than %d bytes", maxCapsAdvertise))
		}
		name, list, isCaps := strings.Cut(rest, capsMark)
		if err := checkProviderName(name); err != nil {
			return bad(k, err.Error())
		}
		if isCaps {
			pending = append(pending, capsOf{name, list, k})
			continue
		}
		if _, dup := caps[name]; dup {
			return bad(k, fmt.Sprintf("provider %q advertised twice", name))
		}
		provs = append(provs, name)
		caps[name] = subagent.Capabilities{}
	}
	if len(provs) > maxAdvertised {
		return bad(kindPrefix+provs[maxAdvertised], fmt.Sprintf("more than %d providers", maxAdvertised))
	}
	for _, p := range pending {
		if _, ok := caps[p.provider]; !ok {
			return bad(p.kind, fmt.Sprintf("capabilities of provider %q, which the member does not offer", p.provider))
		}
		if declared[p.provider] {
			return bad(p.kind, fmt.Sprintf("capabilities of provider %q advertised twice", p.provider))
		}
		declared[p.provider] = true
		var c subagent.Capabilities
		if p.list != "" {
			for _, f := range strings.Split(p.list, ",") {
				i := -1
				for j, known := range capabilityNames {
					if known.name == f {
						i = j
					}
				}
				if i < 0 {
					return bad(p.kind, fmt.Sprintf("unknown capability %q", f))
				}
				capabilityNames[i].set(&c)
			}
		}
		caps[p.provider] = c
	}
	return provs, caps, nil
}

// checkProviderName bounds a provider's name as advertised: not empty,
// at most maxProviderName bytes, printable ASCII without '#'.
func checkProviderName(name string) error {
	if name == "" || len(name) > maxProviderName {
		return fmt.Errorf("a provider name of %d bytes (1 to %d)", len(name), maxProviderName)
	}
	for _, r := range name {
		if r <= ' ' || r > '~' || r == '#' {
			return fmt.Errorf("provider name %q holds %q", name, r)
		}
	}
	return nil
}
