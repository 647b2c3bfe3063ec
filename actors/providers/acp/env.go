package acp

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/subactor/subactor/internal/agentproc"
)

// credentialMarkers are the parts of a variable name that make it
// credential-like wherever they appear in it. Matching is by substring,
// so a few harmless names (KEYBOARD_LAYOUT) are held back too: a child
// that needs one gets it through Config.Env.
var credentialMarkers = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE", "COOKIE", "SSH_AUTH_SOCK"}

// credentialWords are the words of a name (split at anything but a letter
// or digit) that make it credential-like: too short to match inside other
// words (AUTH is in GIT_AUTHOR_NAME, PWD in OLDPWD, PASS in PASSENGER).
var credentialWords = []string{"AUTH", "OAUTH", "AUTHORIZATION", "PWD", "PASS", "PW", "DSN", "PAT"}

// isCredentialName reports whether the node's environment variable name
// looks like it holds a credential (an API key, a token, a secret, a
// password, an auth string, a DSN…), compared without regard to case:
// it contains KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
// CREDENTIAL, PRIVATE, COOKIE or SSH_AUTH_SOCK, or has AUTH, OAUTH,
// AUTHORIZATION, PWD, PASS, PW, DSN or PAT as a word (MYSQL_PWD,
// NPM_CONFIG__AUTH, GH_AUTH, DOCKER_AUTH_CONFIG, SENTRY_DSN). PWD alone is
// the working directory and passes.
func isCredentialName(name string) bool {
	up := strings.ToUpper(name)
	if slices.ContainsFunc(credentialMarkers, func(m string) bool { return strings.Contains(up, m) }) {
		return true
	}
	if up == "PWD" {
		return false
	}
	words := strings.FieldsFunc(up, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
	return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(credentialWords, w) })
}

// isCredential reports whether a variable of the node's environment holds
// a credential: its name is credential-like (isCredentialName), or its
// value carries one: a URL with a user in it (scheme://user:password@host,
// or a token in the user's place, as a DATABASE_URL or a proxy URL may
// have), a connection string's password (Password=… or Pwd=…), or a
// private key. Such variables are not passed on to an agent unless its
// Config.Env sets them.
func isCredential(name, value string) bool {
	return isCredentialName(name) || valueCarriesCredential(value)
}

func valueCarriesCredential(v string) bool {
	for rest := v; ; {
		_, after, ok := strings.Cut(rest, "://")
		if !ok {
			break
		}
		// The authority ends at the path, query, fragment or a space; a
		// user in it ends with '@'.
		end := strings.IndexAny(after, "/?# \t\n")
		if end < 0 {
			end = len(after)
		}
		if strings.Contains(after[:end], "@") {
			return true
		}
		rest = after
	}
	low := strings.ToLower(v)
	for _, key := range []string{"password=", "pwd="} {
		for i := strings.Index(low, key); i >= 0; {
			// A key of its own (at the start or after a separator), not
			// the end of a longer one.
			if i == 0 || strings.ContainsRune("; &?,\t\n", rune(low[i-1])) {
				return true
			}
			next := strings.Index(low[i+1:], key)
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	return strings.Contains(v, "PRIVATE KEY-----")
}

// childEnv is the node's environment without credentials (see
// isCredential), with extra added over it (sorted, so the child's
// environment does not depend on map order).
func childEnv(node []string, extra map[string]string) []string {
	env := make([]string, 0, len(node)+len(extra))
	for _, kv := range node {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || isCredential(name, value) {
			continue
		}
		if _, over := extra[name]; over {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
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
			return "", &dirError{Dir: dir, Reason: "(the node's working directory) cannot be determined", Err: err}
		}
		dir = wd
	}
	if !filepath.IsAbs(dir) {
		return "", &dirError{Dir: dir, Reason: "is not absolute"}
	}
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return "", &dirError{Dir: dir, Reason: "does not exist", Err: err}
	case !info.IsDir():
		return "", &dirError{Dir: dir, Reason: "is not a directory"}
	}
	if err := agentproc.CanEnter(dir); err != nil {
		return "", &dirError{Dir: dir, Reason: "cannot be entered", Err: err}
	}
	return filepath.Clean(dir), nil
}
