package deploy

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsconn"
)

// localClusterPorts picks a base port for local-cluster.sh whose every
// port (base+61..+62, +80..+82, +222..+224, +622..+624, +822..+824) is
// free now, all of them below the kernel's ephemeral port range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default): a
// port in that range, free when checked, can be taken by any outgoing
// connection on the machine (a test of another package, a curl) before
// the script's process listens on it.
func localClusterPorts(t *testing.T) int {
	t.Helper()
	offsets := []int{61, 62, 80, 81, 82, 222, 223, 224, 622, 623, 624, 822, 823, 824}
	const lowest = 20000
	ephemeral := ephemeralPortsStart()
	if ephemeral-offsets[len(offsets)-1]-100 < lowest {
		t.Fatalf("no room for local-cluster.sh's ports between %d and the ephemeral ports (from %d)", lowest, ephemeral)
	}
	bases := (ephemeral - offsets[len(offsets)-1] - lowest) / 100
	for range 50 {
		base := lowest + rand.IntN(bases)*100
		free := true
		for _, o := range offsets {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+o))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port range for local-cluster.sh")
	return 0
}

// ephemeralPortsStart is the first port the kernel hands out to outgoing
// connections, 32768 when /proc does not say.
func ephemeralPortsStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

// TestLocalClusterPorts: every port local-cluster.sh will listen on for
// the base localClusterPorts picks, admin ports included, is below the
// ephemeral port range, where no outgoing connection can take it, and
// free when picked.
func TestLocalClusterPorts(t *testing.T) {
	ephemeral := ephemeralPortsStart()
	for range 200 {
		base := localClusterPorts(t)
		for _, o := range []int{61, 62, 80, 81, 82, 222, 223, 224, 622, 623, 624, 822, 823, 824} {
			if base+o >= ephemeral {
				t.Fatalf("base %d: port %d is in the ephemeral range (from %d)", base, base+o, ephemeral)
			}
		}
	}
	// A base whose admin port is taken is not picked.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for base := 20000; base+824 < ephemeral; base += 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+62))
		if err != nil {
			continue // taken already
		}
		held = append(held, ln)
		if len(held) == 60 {
			break
		}
	}
	for range 200 {
		base := localClusterPorts(t)
		for _, ln := range held {
			if ln.Addr().(*net.TCPAddr).Port == base+62 {
				t.Fatalf("base %d picked while its admin port %d is taken", base, base+62)
			}
		}
	}
}

// TestLocalClusterScript runs deploy/local-cluster.sh start in a
// temporary directory: three nats-servers from deploy/nats's configs,
// storage node(s), the API; a producer's event is served; stop ends every
// process it started.
func TestLocalClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the local cluster")
	}
	for _, tool := range []string{"bash", "curl", "od"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	base := localClusterPorts(t)
	script := func(arg string) (string, error) {
		cmd := exec.Command("bash", "local-cluster.sh", arg)
		cmd.Env = append(os.Environ(), "EVENTIDE_LOCAL_DIR="+dir, fmt.Sprintf("EVENTIDE_LOCAL_PORT=%d", base))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			out, err := script("stop")
			t.Logf("stop: %v\n%s", err, out)
		}
	})
	out, err := script("start")
	if err != nil {
		// The logs are in the test's temporary directory, gone once it
		// ends: show their ends here.
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			t.Logf("%s, last lines:\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
		t.Fatalf("start: %v\n%s", err, out)
	}

	secrets := map[string]string{}
	f, err := os.Open(filepath.Join(dir, "secrets.env"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			secrets[k] = v
		}
	}
	f.Close()
	if info, err := os.Stat(filepath.Join(dir, "secrets.env")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("secrets.env: %v, mode %v; want 0600", err, info.Mode())
	}
	nc, err := natsconn.Connect(t.Context(), natsconn.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", base+223), User: "producer", Password: secrets["PRODUCER_NATS_PASSWORD"]})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(t.Context(), "events.click", []byte(fmt.Sprintf(`{"time":%d,"user":"local"}`, time.Now().UnixMilli()))); err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("http://127.0.0.1:%d", base+80) // cmd/query
	if strings.Contains(out, "cmd/query has no --owners yet") {
		api = fmt.Sprintf("http://127.0.0.1:%d", base+81) // the storage node, until cmd/query lands
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(api + "/v1/events?type=click")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"local"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event never showed up on %s\n%s", api, out)
		}
	}

	// cmd/query runs as the least-privileged query user: the routes that
	// use JetStream (the dead-letter stream's ephemeral consumers) and the
	// nodes' live tails work under its permissions, and the server never
	// refused it anything.
	for _, path := range []string{"/v1/dlq", "/v1/stats", "/v1/events/stream?type=click"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, api+path, nil)
		if path != "/v1/events/stream?type=click" {
			req.Method = http.MethodGet
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	if log, err := os.ReadFile(filepath.Join(dir, "logs", "query.log")); err != nil {
		t.Error(err)
	} else if strings.Contains(strings.ToLower(string(log)), "permissions violation") {
		t.Errorf("the NATS server refused cmd/query something:\n%s", log)
	}

	stopped = true
	if out, err := script("stop"); err != nil || strings.Count(out, "stopped ") < 4 {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if pids, _ := filepath.Glob(filepath.Join(dir, "*.pid")); len(pids) != 0 {
		t.Errorf("pid files left after stop: %v", pids)
	}
}
