// Package pgtest runs throwaway PostgreSQL servers for tests: initdb and
// pg_ctl from the machine's PostgreSQL (Debian's postgresql package, which
// .ci/run installs) on a free loopback port in a temporary directory, as
// the postgres user when the tests run as root. Never the system service.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Install is how .ci/run installs the server.
const Install = "apt-get install -y postgresql"

// Server is one throwaway server; its Close (registered with the test
// that started it) stops it and removes its directory.
type Server struct {
	bin, dir string
	port     int
	// runAs prefixes the server's commands (runuser as root).
	runAs   []string
	schemas atomic.Int64
}

// Start initialises and starts a server for t and stops it when t ends.
// Where PostgreSQL is not installed it skips t, or fails it when CI=true,
// so that a missing install never passes as a skip.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is not installed: %s", Install)
		}
		t.Skipf("PostgreSQL is not installed (%s)", Install)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: dir}
	t.Cleanup(func() {
		s.run("pg_ctl", "stop", "-D", s.data(), "-m", "immediate", "-w")
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		// initdb refuses root: the server runs as postgres, which must
		// own the directory (in /tmp, whose other parents it can enter).
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	// -N: the tests do not outlive a crash of the machine.
	s.mustRun(t, "initdb", "-N", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "-D", s.data())
	s.port = freePort(t)
	s.Restart(t)
	return s
}

// binDir finds the newest installed server's binaries, or initdb on
// PATH, or "".
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Stop stops the server the way a crash would (immediate: no checkpoint,
// every connection cut); Restart brings it back with what it committed.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.mustRun(t, "pg_ctl", "stop", "-D", s.data(), "-m", "immediate", "-w")
}

// Restart starts a stopped server on its port and returns once it
// accepts connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", s.port, s.dir)
	s.mustRun(t, "pg_ctl", "start", "-D", s.data(), "-w", "-l", filepath.Join(s.dir, "log"), "-o", opts)
}

// URL is the server's postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Fresh returns a URL whose tables live in a new, empty schema, so that
// each store a test opens starts empty on one server.
func (s *Server) Fresh(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", s.schemas.Add(1))
	conn, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return s.URL() + "&search_path=" + name
}

func (s *Server) run(tool string, args ...string) ([]byte, error) {
	argv := append(append(slices.Clone(s.runAs), filepath.Join(s.bin, tool)), args...)
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

func (s *Server) mustRun(t testing.TB, tool string, args ...string) {
	t.Helper()
	if out, err := s.run(tool, args...); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		t.Fatalf("%s %v: %v\n%s\nserver log:\n%s", tool, args, err, out, log)
	}
}
