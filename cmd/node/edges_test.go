package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Contract K3 (item 9 of issue 18): an agent server whose command is a
// directory (absolute, or relative to the -config file) is a config
// error that says so, not exec's "permission denied".
func TestK3_CommandThatIsADirectoryIsNamed(t *testing.T) {
	dir := t.TempDir()
	for _, command := range []string{dir, "./agents"} {
		config := writeConfig(t, fmt.Sprintf(`{"agent_servers": {"a": {"command": %q}}}`, command))
		if err := os.Mkdir(filepath.Join(filepath.Dir(config), "agents"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"delegate", "-config", config, "hi"}, {"run", "-config", config}} {
			_, stderr, code := node(t, writeTree(t), args...)
			if code != exitUsage || !strings.Contains(stderr, `agent server "a": command `) || !strings.Contains(stderr, " is a directory, not a program") || strings.Contains(stderr, "permission denied") {
				t.Errorf("%v with command %s: exit %d, stderr %q", args, command, code, stderr)
			}
		}
	}
}
