// Package target starts the Eventide under test for --spawn: it builds
// cmd/ingest into a temporary directory, runs it on free loopback ports
// with a temporary data directory, waits until /readyz answers 200, reads
// its RSS and CPU time from /proc while it runs, and stops it with
// SIGTERM (SIGKILL after a timeout).
package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// eventideModule is the module path ModuleRoot looks for.
const eventideModule = "github.com/eventide/eventide"

// ModuleRoot returns the directory of the Eventide module the harness
// runs in (where go.mod is), asking the go command; it fails in another
// module (loadtest/peers has its own) or outside any.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("cannot run go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("cannot find the Eventide module: run from inside the repository")
	}
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", gomod, err)
	}
	if !bytes.HasPrefix(b, []byte("module "+eventideModule+"\n")) {
		return "", fmt.Errorf("the module at %s is not %s: run from inside the Eventide repository", filepath.Dir(gomod), eventideModule)
	}
	return filepath.Dir(gomod), nil
}

// BuildIngest builds moduleDir's cmd/ingest into dir and returns the
// binary's path.
func BuildIngest(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "eventide-ingest")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ingest")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cannot build cmd/ingest in %s: %w\n%s", moduleDir, err, out)
	}
	return bin, nil
}

// Server is a spawned all-in-one Eventide.
type Server struct {
	NATSURL string
	HTTPURL string
	DataDir string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// PID returns the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// freePort returns a loopback port nothing listens on now. Another
// process may take it before the server does; Spawn then fails with the
// server's own error, and a retry picks other ports.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Spawn starts bin with its data in dataDir and its log in logPath, and
// waits until it is ready (at most readyTimeout). extraArgs are added to
// its flags, extraEnv (KEY=VALUE) to its environment, overriding what
// it would inherit.
func Spawn(ctx context.Context, bin, dataDir, logPath string, extraArgs, extraEnv []string, readyTimeout time.Duration) (*Server, error) {
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	natsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("cannot create the server log: %w", err)
	}
	args := append([]string{
		"--data", dataDir,
		"--http", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--log-level", "warn",
	}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = serverEnv(os.Environ(), extraEnv)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	s := &Server{
		NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		HTTPURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		DataDir: dataDir, LogPath: logPath, cmd: cmd, exited: make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, readyTimeout); err != nil {
		s.Stop(5 * time.Second)
		return nil, fmt.Errorf("spawned server did not become ready: %w\n%s", err, tail(logPath))
	}
	return s, nil
}

// serverEnv is the spawned server's environment: the harness's without
// EVENTIDE_* variables, then extra, whose keys override inherited ones
// (os/exec keeps the last value of a key).
func serverEnv(env, extra []string) []string {
	return append(withoutEventideEnv(env), extra...)
}

// withoutEventideEnv drops EVENTIDE_* variables so that the caller's
// environment cannot change the spawned server's configuration behind the
// harness's back.
func withoutEventideEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "EVENTIDE_") {
			out = append(out, kv)
		}
	}
	return out
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("it exited: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := client.Get(s.HTTPURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 within %s (last: %v)", timeout, err)
		}
		select {
		case <-s.exited:
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills
// the process. It returns the exit error of an unclean exit.
func (s *Server) Stop(timeout time.Duration) error {
	select {
	case <-s.exited:
		return s.exitError()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitError()
	case <-time.After(timeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("server did not stop within %s of SIGTERM and was killed", timeout)
	}
}

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

func (s *Server) exitError() error {
	if s.waitErr != nil {
		return fmt.Errorf("server exited: %w\n%s", s.waitErr, tail(s.LogPath))
	}
	return nil
}

// tail returns the end of the log at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "server log (end): " + string(bytes.TrimSpace(b))
}
