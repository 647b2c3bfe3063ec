package netguard_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/netguard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Contract K3 (and X2's -listen): an address beyond loopback is refused
// unless secured; every interface is never bound; the TLS files' faults
// are named.
func TestK3_X2_ListenAddressesAndTLSFiles(t *testing.T) {
	for _, c := range []struct {
		addr    string
		secured bool
		want    string // "" for accepted
	}{
		{"127.0.0.1:0", false, ""},
		{"localhost:8080", false, ""},
		{"[::1]:9", false, ""},
		{"10.1.2.3:9", true, ""},
		{"10.1.2.3:9", false, "beyond loopback needs TLS"},
		{"0.0.0.0:9", false, "beyond loopback needs TLS"},
		{":9", true, "name the host"},
		{"127.0.0.1:http", false, "bad port"},
		{"127.0.0.1", false, "missing port"},
	} {
		err := netguard.Check(c.addr, c.secured)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (secured %v): %v", c.addr, c.secured, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (secured %v): %v, want %q", c.addr, c.secured, err, c.want)
		}
	}
	if err := netguard.Check("10.1.2.3:9", false); !errors.Is(err, netguard.ErrInsecure) {
		t.Errorf("not ErrInsecure: %v", err)
	}
	if _, err := netguard.ServerTLS("/nonexistent/cert.pem", "/nonexistent/key.pem", ""); err == nil || !strings.Contains(err.Error(), "TLS certificate and key") {
		t.Errorf("missing certificate: %v", err)
	}
	if _, _, err := netguard.MutualTLS("/nonexistent/ca.pem", "c", "k"); err == nil || !strings.Contains(err.Error(), "TLS CA") {
		t.Errorf("missing CA: %v", err)
	}
}
