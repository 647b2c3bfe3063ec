// Package pgtest runs throwaway PostgreSQL servers for tests: initdb and
// pg_ctl from the machine's PostgreSQL (Debian's postgresql package, which
// .ci/run installs) on a free loopback port in a temporary directory, as
// the postgres user when the tests run as root. Never the system service.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// ErrNotInstalled means the machine has no PostgreSQL server to run.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (" + Install + ")")

// Start initialises and starts a server for t and stops it when t ends.
// Where PostgreSQL is not installed it skips t, or fails it when CI=true,
// so that a missing install never passes as a skip.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch()
	switch {
	case errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Launch initialises and starts a server, for a program (the bench)
// rather than a test; Close stops it. It fails with ErrNotInstalled where
// PostgreSQL is not installed.
func Launch() (*Server, error) {
	bin := binDir()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.launch(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) launch() error {
	if os.Geteuid() == 0 {
		// initdb refuses root: the server runs as postgres, which must
		// own the directory (in /tmp, whose other parents it can enter).
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
		s.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	// -N: the server's data does not outlive a crash of the machine.
	if err := s.run("initdb", "-N", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "-D", s.data()); err != nil {
		return err
	}
	// A port below the kernel's ephemeral range (32768 and up), and
	// below the cluster tests' picks: no outgoing connection can take it
	// between this check and the server's bind.
	for range 200 {
		p := 10000 + rand.IntN(10000)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			l.Close()
			s.port = p
			return s.start()
		}
	}
	return errors.New("pgtest: no free loopback port")
}

// Close stops the server, if it runs, and removes its directory.
func (s *Server) Close() {
	s.run("pg_ctl", "stop", "-D", s.data(), "-m", "immediate", "-w")
	os.RemoveAll(s.dir)
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

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Stop stops the server the way a crash would (immediate: no checkpoint,
// every connection cut); Restart brings it back with what it committed.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.run("pg_ctl", "stop", "-D", s.data(), "-m", "immediate", "-w"); err != nil {
		t.Fatal(err)
	}
}

// Restart starts a stopped server on its port and returns once it
// accepts connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) start() error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", s.port, s.dir)
	return s.run("pg_ctl", "start", "-D", s.data(), "-w", "-l", filepath.Join(s.dir, "log"), "-o", opts)
}

// URL is the server's postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Fresh returns a URL whose tables live in a new, empty schema, so that
// each store a test opens starts empty on one server.
func (s *Server) Fresh(t testing.TB) string {
	t.Helper()
	url, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// Schema is Fresh for a program.
func (s *Server) Schema() (string, error) {
	name := fmt.Sprintf("t%d", s.schemas.Add(1))
	conn, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		return "", err
	}
	return s.URL() + "&search_path=" + name, nil
}

// run runs one of the server's programs, failing with its output and
// the server's log.
func (s *Server) run(tool string, args ...string) error {
	argv := append(append(slices.Clone(s.runAs), filepath.Join(s.bin, tool)), args...)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pgtest: %s %v: %w\n%s\nserver log:\n%s", tool, args, err, out, log)
	}
	return nil
}
