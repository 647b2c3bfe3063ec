//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/subactor/subactor/model/openai"
)

// Contract K3: a -models file is decoded as strictly as -config: a key
// given twice (a second baseURL would silently change where the key is
// sent), a key in another case, a null and a value of the wrong type are
// refused with exit 2 and a message saying what and where; so are time
// limits that are not durations above 0.
func TestK3_ModelsFileIsDecodedStrictly(t *testing.T) {
	for _, c := range []struct{ name, file, msg string }{
		{"repeated baseURL", `{"endpoints": {"a": {"baseURL": "http://127.0.0.1:1/v1", "model": "m", "baseURL": "http://attacker.example/v1"}}}`,
			`key "baseURL" is given twice at /endpoints/a: give each key once`},
		{"repeated endpoint", `{"endpoints": {"a": {"model": "m"}, "a": {"model": "n"}}}`, `key "a" is given twice at /endpoints: give each key once`},
		{"repeated top-level key", `{"endpoints": {"a": {"model": "m"}}, "default": "a", "default": "b"}`, `key "default" is given twice at the top level`},
		{"key in another case", `{"endpoints": {"a": {"BASEURL": "http://127.0.0.1:1/v1", "model": "m"}}}`,
			`unknown key "BASEURL" at /endpoints/a (keys are case-sensitive;`},
		{"null default", `{"endpoints": {"a": {"model": "m"}}, "default": null}`, `null at /default: give a value or leave the key out`},
		{"null endpoint", `{"endpoints": {"a": null}}`, `null at /endpoints/a:`},
		{"null in models", `{"endpoints": {"a": {"model": "m", "models": ["m", null]}}}`, `null at /endpoints/a/models/1:`},
		{"null file", `null`, `null at the top level:`},
		{"wrong type", `{"endpoints": {"a": {"model": 5}}}`, `a JSON number at /endpoints/a/model, where a string belongs`},
		{"not UTF-8", "{\"endpoints\": {\"a\": {\"model\": \"\xff\"}}}", `not valid JSON at byte 31: invalid UTF-8`},
		{"header timeout not a duration", `{"endpoints": {"a": {"model": "m", "headerTimeout": "5 minutes"}}}`,
			`endpoint "a": headerTimeout "5 minutes" is not a duration above 0 such as "90s" or "10m"`},
		{"idle timeout as a number", `{"endpoints": {"a": {"model": "m", "idleTimeout": 300}}}`, `a JSON number at /endpoints/a/idleTimeout, where a string belongs`},
		{"negative call timeout", `{"endpoints": {"a": {"model": "m", "callTimeout": "-1h"}}}`, `endpoint "a": callTimeout "-1h" is not a duration above 0`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeModels(t, c.file)
			stdout, stderr, code := nodeEnv(t, t.TempDir(), append(withData(t.TempDir()), noModelEnv...), "run", "-models", file)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, "node run: -models "+file+": "+c.msg) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, c.msg)
			}
		})
	}
}

// mkfifo makes a FIFO in a temporary directory.
func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo.json")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Contract K3: -models and -config take regular files only, and at most
// maxConfigFile bytes: a FIFO nobody writes to is refused at once instead
// of hanging the node, /dev/zero and a directory are refused before any
// read, a larger file after maxConfigFile+1 bytes; each exits 2 with the
// reason. nodeEnv's deadline fails a node that hangs.
func TestK3_ConfigFilesAreRegularFilesOfBoundedSize(t *testing.T) {
	big := writeModels(t, `{"endpoints": {"a": {"model": "m"}}}`+strings.Repeat(" ", maxConfigFile))
	for _, flag := range []string{"-models", "-config"} {
		for _, c := range []struct{ name, path, msg string }{
			{"FIFO", mkfifo(t), "a FIFO, not a regular file"},
			{"/dev/zero", "/dev/zero", "a device, not a regular file"},
			{"directory", t.TempDir(), "a directory, not a regular file"},
			{"over 1 MiB", big, "larger than 1024 KiB, too large for a configuration file"},
		} {
			t.Run(flag+" "+c.name, func(t *testing.T) {
				stdout, stderr, code := nodeEnv(t, writeTree(t), append(withData(t.TempDir()), noModelEnv...), "run", flag, c.path)
				if want := "node run: " + flag + " " + c.path + ": " + c.msg; code != exitUsage || stdout != "" || !strings.Contains(stderr, want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, want)
				}
			})
		}
	}
}

// Contracts K3, M1: an endpoint that never answers ends the run, after
// the retries, with the header time limit in the message: the limit comes
// from -header-timeout, and a -models endpoint's headerTimeout wins over
// the flag. Negative limits are refused.
func TestK3_SilentEndpointEndsTheRunAtTheHeaderTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end, so that the server ends r's context when the
		// node hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	file := writeModels(t, fmt.Sprintf(`{"endpoints": {"silent": {"baseURL": %q, "model": "m", "headerTimeout": "40ms"}}}`, srv.URL+"/v1"))
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		limit string
	}{
		{"flag", []string{envBaseURL + "=" + srv.URL + "/v1", envModel + "=m"}, []string{"-header-timeout", "30ms"}, "30ms"},
		{"models file", nil, []string{"-models", file, "-header-timeout", "1h"}, "40ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(append(withData(t.TempDir()), noModelEnv...), c.env...)
			_, stderr, code := nodeEnv(t, writeTree(t), env, append([]string{"run", "-quiet"}, c.args...)...)
			want := "openai: the endpoint sent no response headers within " + c.limit + " (after 4 attempts)"
			if code != exitFailed || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
			}
		})
	}
	_, stderr, code := nodeEnv(t, t.TempDir(), withData(t.TempDir()), "run", "-idle-timeout", "-1s")
	if code != exitUsage || !strings.Contains(stderr, "must not be negative") {
		t.Errorf("negative -idle-timeout: exit %d, stderr %q", code, stderr)
	}
}

// Contract K3: whatever the bytes of a -models file, decoding ends with
// models or an openai.ErrChoice error, never a panic; what it accepts is one valid
// JSON object without repeated keys or nulls, and every endpoint it makes
// has a model and time limits above 0.
func FuzzModelsFile(f *testing.F) {
	for _, s := range []string{
		`{"endpoints": {"a": {"baseURL": "http://127.0.0.1:1/v1", "model": "m", "models": ["m", "n"], "apiKeyEnv": "K", "schemaMode": "json_object", "headerTimeout": "90s", "idleTimeout": "10m", "callTimeout": "1h"}}, "default": "a"}`,
		`{"endpoints": {"a": {"model": "m"}, "b": {"model": "n"}}}`,
		`{"endpoints": {"a": {"baseURL": "x", "baseURL": "y", "model": "m"}}}`,
		`{"endpoints": {"a": {"BASEURL": "x", "model": "m"}}}`,
		`{"endpoints": {"a": {"model": "m"}}, "default": null}`,
		`{"endpoints": {"a": {"model": "m", "idleTimeout": "0s"}}}`,
		`{} {}`, `[]`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	getenv := func(string) string { return "sk-fuzz" }
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseModels("fuzz.json", data, "", timeLimits{}, getenv)
		if err != nil {
			if !errors.Is(err, openai.ErrChoice) {
				t.Fatalf("error %v (%T), want an openai.ErrChoice error", err, err)
			}
			return
		}
		if !jsontext.Value(data).IsValid() {
			t.Fatalf("accepted %q: not one valid JSON value without repeated keys", data)
		}
		dec := jsontext.NewDecoder(strings.NewReader(string(data)))
		for {
			tok, err := dec.ReadToken()
			if err == io.EOF {
				break
			}
			if err != nil || tok.Kind() == 'n' {
				t.Fatalf("accepted %q with a null (or %v)", data, err)
			}
		}
		for name, cfg := range m.endpoints {
			if cfg.Model == "" || cfg.HeaderTimeout < 0 || cfg.IdleTimeout < 0 || cfg.CallTimeout < 0 {
				t.Fatalf("endpoint %q: %+v", name, cfg)
			}
		}
		if _, ok := m.endpoints[m.endpoint]; !ok || m.top == nil {
			t.Fatalf("default endpoint %q not among %v", m.endpoint, m.endpoints)
		}
	})
}

// Contracts K3, M1: the limits a -models endpoint gives reach its
// openai.Config, over the flags'; those it leaves out come from the flags.
func TestK3_ModelsFileTimeLimitsReachTheEndpoint(t *testing.T) {
	data := []byte(`{"endpoints": {"a": {"model": "m", "headerTimeout": "90s", "callTimeout": "2h"}}}`)
	m, err := parseModels("models.json", data, "", timeLimits{header: time.Second, idle: 2 * time.Minute, call: time.Minute}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.endpoints["a"]
	if cfg.HeaderTimeout != 90*time.Second || cfg.IdleTimeout != 2*time.Minute || cfg.CallTimeout != 2*time.Hour {
		t.Errorf("limits %v %v %v, want 90s (file), 2m (flag), 2h (file)", cfg.HeaderTimeout, cfg.IdleTimeout, cfg.CallTimeout)
	}
}
