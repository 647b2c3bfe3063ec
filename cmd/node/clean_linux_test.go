package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/subactor/subactor/internal/testkit"
)

// openPTY opens a pseudo-terminal: the side the test reads and the one the
// node writes to, whose stat says character device (so that the node
// draws its live view there).
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("no pseudo-terminal: unlock: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("no pseudo-terminal: number: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	return ptm, pts
}

// Contract K3 (item 5 of issue 18): on a terminal (a real pseudo-terminal
// as stdout and stderr: the node draws its live view on stderr) delegate
// shows a hostile agent's plan,
// tool call and answer without their escapes. The screen fails on any
// sequence but the live view's own and on any control character, so what
// it shows is what the user's terminal would.
func TestK3_DelegateOnATerminalPrintsNoEscape(t *testing.T) {
	ptm, pts := openPTY(t)
	cmd := exec.CommandContext(testkit.Ctx(t), bin, "delegate", "-config", fakeConfig(t), "hostile")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), envDataDir+"="+t.TempDir(), "TERM=xterm")
	cmd.Stdout, cmd.Stderr = pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close() // the node holds it now; its exit ends the reads
	read := make(chan []byte, 1)
	go func() {
		// Linux answers EIO once no one holds the terminal's other side.
		out, _ := io.ReadAll(ptm)
		read <- out
	}()
	err := cmd.Wait()
	out := testkit.Recv(t, read, "the node's terminal output")
	if err != nil {
		t.Fatalf("%v, output %q", err, out)
	}
	if !bytes.Contains(out, []byte(noWrap)) {
		t.Fatalf("the node did not draw its live view on the terminal: %q", out)
	}
	scr := &screen{t: t}
	// A tab is the answer's own; the screen knows no tab stops.
	scr.Write(bytes.ReplaceAll(out, []byte("\t"), []byte("    ")))
	shown := strings.Join(scr.lines(), "\n")
	hasMarks(t, "the terminal", shown)
	if !strings.Contains(shown, "\nsecond line    after a tab") {
		t.Errorf("the answer's second line is missing:\n%s", shown)
	}
}
