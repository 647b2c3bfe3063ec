package crashhook

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/subactor/subactor/persistence"
)

// Contract S6: the crash test's store wrapper is not there unless its
// variable is set, and a kill point without an appends file, or one that
// is not a positive number, is refused rather than ignored.
func TestS6_CrashHooksAreInertWithoutTheirVariables(t *testing.T) {
	store := persistence.NewMemory()
	t.Setenv(EnvAppendsFile, "")
	t.Setenv(EnvKillAfter, "")
	got, closeHooks, err := Wrap(store)
	if err != nil || got != persistence.Store(store) {
		t.Fatalf("without the variables: %T, %v; want the store itself", got, err)
	}
	closeHooks()
	t.Setenv(EnvKillAfter, "3")
	if _, _, err := Wrap(store); err == nil || !strings.Contains(err.Error(), EnvAppendsFile) {
		t.Fatalf("a kill point without an appends file: %v", err)
	}
	t.Setenv(EnvAppendsFile, filepath.Join(t.TempDir(), "acks"))
	for _, bad := range []string{"0", "-1", "many"} {
		t.Setenv(EnvKillAfter, bad)
		if _, _, err := Wrap(store); err == nil || !strings.Contains(err.Error(), EnvKillAfter) {
			t.Fatalf("%s=%s: %v", EnvKillAfter, bad, err)
		}
	}
}
