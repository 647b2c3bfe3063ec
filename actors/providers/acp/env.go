package acp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// credentialMarkers are the parts of a variable name that make it
// credential-like. Matching is by substring, so a few harmless names
// (KEYBOARD_LAYOUT) are held back too: a child that needs one gets it
// through Config.Env.
var credentialMarkers = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE", "SSH_AUTH_SOCK"}

// IsCredentialName reports whether the node's environment variable name
// looks like it holds a credential (an API key, a token, a secret, a
// password…), compared without regard to case. Such variables are not
// passed on to an agent unless its Config.Env sets them.
func IsCredentialName(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range credentialMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

// childEnv is the node's environment without credential-like variables,
// with extra added over it (sorted, so the child's environment does not
// depend on map order).
func childEnv(node []string, extra map[string]string) []string {
	env := make([]string, 0, len(node)+len(extra))
	for _, kv := range node {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || IsCredentialName(name) {
			continue
		}
		if _, over := extra[name]; over {
			continue
		}
		env = append(env, kv)
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// workingDir checks dir (the node's working directory when empty) before
// any process starts: absolute, existing, a directory, enterable.
func workingDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", &DirError{Dir: dir, Reason: "(the node's working directory) cannot be determined", Err: err}
		}
		dir = wd
	}
	if !filepath.IsAbs(dir) {
		return "", &DirError{Dir: dir, Reason: "is not absolute"}
	}
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return "", &DirError{Dir: dir, Reason: "does not exist", Err: err}
	case !info.IsDir():
		return "", &DirError{Dir: dir, Reason: "is not a directory"}
	}
	// Search permission is what entering a directory needs.
	if err := syscall.Access(dir, 1 /* X_OK */); err != nil {
		return "", &DirError{Dir: dir, Reason: "cannot be entered", Err: err}
	}
	return filepath.Clean(dir), nil
}
