package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natsembed"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDiskFullPipeline runs the whole pipeline with its data directory on
// a small real filesystem (a tmpfs) and fills it while events keep
// arriving: /readyz names the storage error (not NATS), /livez stays up
// because space can come back, and once it does the pipeline resumes by
// itself and every event JetStream acknowledged is stored exactly once.
// NATS keeps its store elsewhere, as an external cluster would.
func TestDiskFullPipeline(t *testing.T) {
	mnt := mountTmpfs(t, "16m")

	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer natsembed.Stop(ns)
	httpAddr := freeAddr(t)
	node := startOnTmpfs(t, []string{"--data", filepath.Join(mnt, "data"), "--http", httpAddr},
		map[string]string{"EVENTIDE_NATS_URL": ns.ClientURL()})
	stderr := &node.stderr
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, node.done, stderr)

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	payload := strings.Repeat("x", 2000)
	published := 0
	publish := func(n int) {
		t.Helper()
		for range n {
			body := fmt.Sprintf(`{"time":%d,"data":{"n":%d,"pad":%q}}`, time.Now().UnixMilli(), published, payload)
			if _, err := js.Publish(t.Context(), "events.fill", []byte(body)); err != nil {
				t.Fatalf("publish %d: %v", published, err)
			}
			published++
		}
	}
	stored := func() int {
		var page struct {
			Events []struct{ Data struct{ N int } }
		}
		getJSON(t, client, base+"/v1/events?type=fill&limit=1000", 200, &page)
		seen := map[int]bool{}
		for _, e := range page.Events {
			if seen[e.Data.N] {
				t.Fatalf("event %d returned twice", e.Data.N)
			}
			seen[e.Data.N] = true
		}
		return len(page.Events)
	}
	waitStored := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); stored() != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d events stored; log:\n%s", stored(), want, stderr.String())
			}
		}
	}
	publish(100)
	waitStored(100)

	// Fill what is left of the filesystem.
	filler := fillFilesystem(t, mnt)

	publish(300)
	var ready struct {
		Checks []struct {
			Name, Detail string
			OK           bool
		}
	}
	failing := func(name string) (string, bool) {
		for _, c := range ready.Checks {
			if c.Name == name && !c.OK {
				return c.Detail, true
			}
		}
		return "", false
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never named the full disk: %+v; log:\n%s", ready, stderr.String())
		}
		ready.Checks = nil
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/readyz body: %v", err)
		}
		if detail, ok := failing("storage"); ok && resp.StatusCode == 503 && strings.Contains(detail, "no space left") {
			break
		}
	}
	if _, ok := failing("nats"); ok {
		t.Errorf("/readyz blames NATS for a full disk: %+v", ready)
	}
	if resp, err := client.Get(base + "/livez"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/livez with a full disk: %v %v; want 200, the store recovers once space is back", resp, err)
	} else {
		resp.Body.Close()
	}

	// Space comes back: no restart, every acknowledged event is stored
	// once, and the process is ready again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitStored(published)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after space came back", resp.StatusCode)
		}
	}
	if err := node.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestDiskFullEmbeddedNATS fills the data directory of the default layout,
// where the embedded NATS server's store shares the disk with storage.
// nats-server keeps a stream's write error until it restarts, so once
// space is back the pipeline must either take events again or fail
// /livez, naming the stream, so that an orchestrator restarts it; it must
// never stay live while refusing every event.
func TestDiskFullEmbeddedNATS(t *testing.T) {
	mnt := mountTmpfs(t, "16m")

	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	node := startOnTmpfs(t, []string{"--data", filepath.Join(mnt, "data"), "--http", httpAddr, "--nats-listen", natsAddr}, nil)
	stderr := &node.stderr
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, node.done, stderr)

	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	payload := strings.Repeat("x", 2000)
	publish := func() error {
		pctx, pcancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer pcancel()
		body := fmt.Sprintf(`{"time":%d,"data":{"pad":%q}}`, time.Now().UnixMilli(), payload)
		_, err := js.Publish(pctx, "events.fill", []byte(body))
		return err
	}
	for i := range 20 {
		if err := publish(); err != nil {
			t.Fatalf("publish %d before the disk is full: %v", i, err)
		}
	}

	filler := fillFilesystem(t, mnt)
	refused := false
	for range 100 {
		if publish() != nil {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("the embedded NATS server stored every event on a full disk")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if publish() == nil {
			break // the pipeline takes events again
		}
		resp, err := client.Get(base + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		var live struct {
			Live   bool
			Checks []struct {
				Name, Detail string
				OK           bool
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&live)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/livez body: %v", err)
		}
		if resp.StatusCode == 503 && slices.ContainsFunc(live.Checks, func(c struct {
			Name, Detail string
			OK           bool
		}) bool {
			return c.Name == "nats-store" && !c.OK && strings.Contains(c.Detail, "EVENTS")
		}) {
			break // an orchestrator restarts it
		}
		if time.Now().After(deadline) {
			t.Fatalf("space is back, the embedded NATS server refuses events and /livez answers %d %+v; want the events taken or /livez 503 naming the stream", resp.StatusCode, live)
		}
	}
	if err := node.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of size (as mount's size=) on a new temporary
// directory, unmounted when the test ends. It skips the test where it
// cannot (not root, no mount): storage's TestDiskFull covers the engine
// with a byte-quota filesystem that always runs.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs; storage's TestDiskFull covers the engine with a byte quota")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); storage's TestDiskFull covers the engine with a byte quota", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// fillFilesystem writes a file in dir until the filesystem is full and
// returns its path; removing it gives the space back.
func fillFilesystem(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := []byte(strings.Repeat("f", 4096))
	for {
		if _, err := f.Write(chunk); err != nil {
			return filler
		}
	}
}

// tmpfsNode is an in-process ingest whose data directory is on a tmpfs.
type tmpfsNode struct {
	stdout, stderr syncBuffer
	done           chan error // run's result, for waitReady
	exited         chan struct{}
	err            error
	cancel         context.CancelFunc
}

// startOnTmpfs runs ingest with args and env in this process. Call it after
// mountTmpfs: its cleanup stops the process first, also when the test
// fails (even after waitReady took run's result from done), so the tmpfs
// is never unmounted under it.
func startOnTmpfs(t *testing.T, args []string, env map[string]string) *tmpfsNode {
	ctx, cancel := context.WithCancel(context.Background())
	n := &tmpfsNode{done: make(chan error, 1), exited: make(chan struct{}), cancel: cancel}
	go func() {
		n.err = run(ctx, args, envFrom(env), &n.stdout, &n.stderr)
		n.done <- n.err
		close(n.exited)
	}()
	t.Cleanup(func() { n.stop() })
	return n
}

// stop cancels the process and returns run's error once it has returned.
func (n *tmpfsNode) stop() error {
	n.cancel()
	<-n.exited
	return n.err
}
