package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v4"

	"github.com/eventide/eventide/internal/natsconn/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// natsSecrets are the variables the NATS configs read; nats-server
// refuses a config whose variable is unset.
var natsSecrets = []string{"EVENTIDE_NATS_PASSWORD", "PRODUCER_NATS_PASSWORD", "NATS_SYS_PASSWORD", "QUERY_NATS_PASSWORD"}

func setNATSSecrets(t *testing.T) {
	for _, v := range natsSecrets {
		t.Setenv(v, strings.ToLower(v)+"-test")
	}
}

// TestNATSConfigsParse: each node's config passes nats-server's own parser
// with the settings deploy/README.md describes; an unset secret is refused.
func TestNATSConfigsParse(t *testing.T) {
	setNATSSecrets(t)
	names := map[string]bool{}
	for _, node := range []string{"n1", "n2", "n3"} {
		o, err := natsserver.ProcessConfigFile(filepath.Join("nats", node+".conf"))
		if err != nil {
			t.Fatalf("%s.conf: %v", node, err)
		}
		checkNATSOptions(t, node+".conf", o)
		if names[o.ServerName] {
			t.Errorf("%s.conf: server_name %q is not unique", node, o.ServerName)
		}
		names[o.ServerName] = true
		var routes []string
		for _, r := range o.Routes {
			routes = append(routes, r.Host)
		}
		if want := []string{"n1:6222", "n2:6222", "n3:6222"}; !slices.Equal(routes, want) {
			t.Errorf("%s.conf: routes %v, want %v", node, routes, want)
		}
	}

	os.Unsetenv("NATS_SYS_PASSWORD") // t.Setenv restores it
	if _, err := natsserver.ProcessConfigFile(filepath.Join("nats", "n1.conf")); err == nil || !strings.Contains(err.Error(), "NATS_SYS_PASSWORD") {
		t.Errorf("n1.conf with NATS_SYS_PASSWORD unset: %v, want an error naming it", err)
	}
}

// checkNATSOptions checks what every node config must set.
func checkNATSOptions(t *testing.T, name string, o *natsserver.Options) {
	t.Helper()
	switch {
	case o.Cluster.Name != "eventide" || o.Cluster.Port != 6222:
		t.Errorf("%s: cluster %q port %d, want eventide on 6222", name, o.Cluster.Name, o.Cluster.Port)
	case !o.JetStream || o.StoreDir != "/data/nats":
		t.Errorf("%s: jetstream %v store_dir %q", name, o.JetStream, o.StoreDir)
	case o.JetStreamMaxStore <= 0 || o.JetStreamMaxMemory <= 0:
		t.Errorf("%s: store limits file %d memory %d, want both set", name, o.JetStreamMaxStore, o.JetStreamMaxMemory)
	case o.LameDuckDuration <= 0 || o.LameDuckGracePeriod <= 0:
		t.Errorf("%s: lame duck %s grace %s, want both set", name, o.LameDuckDuration, o.LameDuckGracePeriod)
	case !o.SyncAlways:
		t.Errorf("%s: sync_interval is not always, the setting deploy/README.md chose", name)
	case o.SystemAccount != "SYS":
		t.Errorf("%s: system account %q", name, o.SystemAccount)
	}
	users := map[string]bool{}
	for _, u := range o.Users {
		users[u.Username] = true
		if u.Password == "" || !strings.HasSuffix(u.Password, "-test") {
			t.Errorf("%s: user %s's password %q does not come from the environment", name, u.Username, u.Password)
		}
	}
	for _, u := range []string{"eventide", "producer", "sys"} {
		if !users[u] {
			t.Errorf("%s: no user %s", name, u)
		}
	}
}

// TestNATSTLSExample: tls.conf.example, with its files made by a test CA,
// is a valid TLS block.
func TestNATSTLSExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("nats", "tls.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	ca := natstest.NewCA(t, "deploy")
	cert, key, _ := ca.Issue(t, "nats-server", "n1")
	conf := strings.NewReplacer("/etc/nats/tls/server.pem", cert, "/etc/nats/tls/server-key.pem", key, "/etc/nats/tls/ca.pem", ca.File).Replace(string(b))
	if conf == string(b) {
		t.Fatal("tls.conf.example does not name the files the test replaces")
	}
	f := filepath.Join(t.TempDir(), "tls.conf")
	os.WriteFile(f, []byte("listen: 127.0.0.1:-1\n"+conf), 0o600)
	o, err := natsserver.ProcessConfigFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil || o.TLSTimeout != 5 {
		t.Error("tls.conf.example does not turn TLS on")
	}
}

// TestNATSK8sConfig: the ConfigMap's nats.conf parses, with the pod's
// name as the server name, and matches the compose configs' settings.
func TestNATSK8sConfig(t *testing.T) {
	setNATSSecrets(t)
	t.Setenv("POD_NAME", "eventide-nats-1")
	docs := readYAMLDocs(t, filepath.Join("k8s", "nats.yaml"))
	var conf string
	for _, d := range docs {
		if d["kind"] == "ConfigMap" {
			conf, _ = d["data"].(map[string]any)["nats.conf"].(string)
		}
	}
	if conf == "" {
		t.Fatal("k8s/nats.yaml has no ConfigMap with nats.conf")
	}
	common, err := os.ReadFile(filepath.Join("nats", "common.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conf, string(common)) {
		t.Error("the ConfigMap's nats.conf does not hold deploy/nats/common.conf as it is: copy it again")
	}
	f := filepath.Join(t.TempDir(), "nats.conf")
	os.WriteFile(f, []byte(conf), 0o600)
	o, err := natsserver.ProcessConfigFile(f)
	if err != nil {
		t.Fatal(err)
	}
	checkNATSOptions(t, "k8s nats.conf", o)
	if o.ServerName != "eventide-nats-1" || len(o.Routes) != 3 {
		t.Errorf("k8s nats.conf: server name %q, %d routes", o.ServerName, len(o.Routes))
	}
}

// readYAMLDocs decodes every document of a YAML file.
func readYAMLDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// TestFilesParse: every YAML and JSON file under deploy/ parses.
func TestFilesParse(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
			if len(readYAMLDocs(t, path)) == 0 {
				t.Errorf("%s: no YAML document", path)
			}
			n++
		case ".json":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("only %d YAML/JSON files found", n)
	}
}

// binDir holds the binaries the tests build, once per run.
var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
	flagSet = map[string]map[string]bool{}
)

// buildBinary builds the command in pkg (relative to the module root)
// once and returns its path.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, "../"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// binaryFlags returns the flags the command's -h lists (cmd/ingest and
// cmd/query print them as "  --name ...").
func binaryFlags(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	bin := buildBinary(t, pkg)
	buildMu.Lock()
	defer buildMu.Unlock()
	if fs, ok := flagSet[pkg]; ok {
		return fs
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput() // exit code 0 or 2, by command
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	flagSet[pkg] = flags
	return flags
}

// pendingFlags are flags the deploy files use that a branch not yet
// merged adds to the binaries. A pending flag missing from the binary is
// logged; one present is an error, so the list stays empty once they
// land (it is: every flag the files use exists).
var pendingFlags = map[string][]string{}

// checkFlags checks that every --flag in args and every EVENTIDE_*
// variable in env is a flag of the command built from pkg.
func checkFlags(t *testing.T, where, pkg string, args []string, env []string) { // env: NAME=value
	t.Helper()
	flags := binaryFlags(t, pkg)
	var used []string
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			used = append(used, strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0])
		}
	}
	for _, e := range env {
		if name, ok := strings.CutPrefix(strings.SplitN(e, "=", 2)[0], "EVENTIDE_"); ok {
			used = append(used, strings.ReplaceAll(strings.ToLower(name), "_", "-"))
		}
	}
	checkShardValues(t, where, args, env)
	for _, f := range used {
		pending := slices.Contains(pendingFlags[pkg], f)
		switch {
		case flags[f] && pending:
			t.Errorf("%s: --%s now exists in %s: drop it from pendingFlags", where, f, pkg)
		case !flags[f] && pending:
			t.Logf("%s: --%s is not in %s yet (pending, branch s6-rpc)", where, f, pkg)
		case !flags[f]:
			t.Errorf("%s: --%s (or its EVENTIDE_ variable) is not a flag of %s", where, f, pkg)
		}
	}
}

// checkShardValues parses the values of --own-shards and --owners (flags
// or EVENTIDE_* variables) as the binaries do, for the --shards given
// (default 1), so a deploy file never carries a value the binary refuses
// at start.
func checkShardValues(t *testing.T, where string, args, env []string) {
	t.Helper()
	values := map[string]string{}
	for _, e := range env {
		if name, v, ok := strings.Cut(e, "="); ok {
			if name, ok := strings.CutPrefix(name, "EVENTIDE_"); ok {
				values[strings.ReplaceAll(strings.ToLower(name), "_", "-")] = v
			}
		}
	}
	for i, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		if n, v, ok := strings.Cut(name, "="); ok {
			values[n] = v
		} else if i+1 < len(args) {
			values[name] = args[i+1]
		}
	}
	shards := 1
	if v, ok := values["shards"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Errorf("%s: --shards %q is not a positive whole number", where, v)
			return
		}
		shards = n
	}
	if v, ok := values["own-shards"]; ok && v != "all" {
		if _, err := queryrpc.ParseShardSet(v, shards); err != nil {
			t.Errorf("%s: --own-shards %q of %d shards: %v", where, v, shards, err)
		}
	}
	if v, ok := values["owners"]; ok {
		if _, err := queryrpc.ParseOwners(v, shards); err != nil {
			t.Errorf("%s: --owners %q of %d shards: %v", where, v, shards, err)
		}
	}
}

// packageOf maps a container entrypoint to the command it runs.
// TestKubernetesSnapshots: the k8s/snapshots overlay patches every
// storage StatefulSet of the base (its target selects them by label), its
// container name and variables match the base's ingest container and
// cmd/ingest's flags, and the volume it mounts is a ReadWriteMany claim
// it defines, mounted where the snapshot variables point.
func TestKubernetesSnapshots(t *testing.T) {
	dir := filepath.Join("k8s", "snapshots")
	kust := readYAMLDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	base := readYAMLDocs(t, filepath.Join("k8s", "kustomization.yaml"))[0]
	if kust["namespace"] != base["namespace"] {
		t.Errorf("overlay namespace %v, base %v", kust["namespace"], base["namespace"])
	}
	for _, r := range strs(kust["resources"]) {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("overlay resource: %v", err)
		}
	}
	claims := map[string]bool{}
	for _, d := range readYAMLDocs(t, filepath.Join(dir, "pvc.yaml")) {
		if d["kind"] != "PersistentVolumeClaim" {
			continue
		}
		spec := d["spec"].(map[string]any)
		if !slices.Contains(strs(spec["accessModes"]), "ReadWriteMany") {
			t.Errorf("pvc.yaml: claim %v is not ReadWriteMany: the node that imports a snapshot is not the one that wrote it", d["metadata"])
		}
		claims[fmt.Sprint(d["metadata"].(map[string]any)["name"])] = true
	}
	// The storage StatefulSets of the base, by their labels.
	var storage []map[string]any
	for _, d := range readYAMLDocs(t, filepath.Join("k8s", "storage.yaml")) {
		if d["kind"] == "StatefulSet" {
			storage = append(storage, d)
		}
	}
	patches, _ := kust["patches"].([]any)
	if len(patches) != 1 {
		t.Fatalf("overlay has %d patches, want the one of the storage StatefulSets", len(patches))
	}
	patch := patches[0].(map[string]any)
	target := patch["target"].(map[string]any)
	label, value, _ := strings.Cut(fmt.Sprint(target["labelSelector"]), "=")
	matched := 0
	for _, d := range storage {
		labels, _ := d["metadata"].(map[string]any)["labels"].(map[string]any)
		if target["kind"] == "StatefulSet" && fmt.Sprint(labels[label]) == value {
			matched++
		}
	}
	if matched != len(storage) || matched < 2 {
		t.Errorf("the patch's target %v selects %d of the %d storage StatefulSets", target, matched, len(storage))
	}
	p := readYAMLDocs(t, filepath.Join(dir, fmt.Sprint(patch["path"])))[0]
	pod := p["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	volumes := map[string]string{} // volume name -> claim
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		pvc, _ := v["persistentVolumeClaim"].(map[string]any)
		volumes[fmt.Sprint(v["name"])] = fmt.Sprint(pvc["claimName"])
	}
	baseContainers := storage[0]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	for _, c := range pod["containers"].([]any) {
		c := c.(map[string]any)
		if name := fmt.Sprint(c["name"]); !slices.ContainsFunc(baseContainers, func(b any) bool { return b.(map[string]any)["name"] == name }) {
			t.Errorf("the patch's container %q is not in the storage StatefulSets: it would add a container, not patch one", name)
		}
		mounts := map[string]string{} // mount path -> claim
		for _, m := range c["volumeMounts"].([]any) {
			m := m.(map[string]any)
			claim := volumes[fmt.Sprint(m["name"])]
			if !claims[claim] {
				t.Errorf("mount %v: volume %v is not a claim of pvc.yaml", m["mountPath"], m["name"])
			}
			mounts[fmt.Sprint(m["mountPath"])] = claim
		}
		var env []string
		for _, e := range c["env"].([]any) {
			e := e.(map[string]any)
			env = append(env, fmt.Sprint(e["name"])+"="+fmt.Sprint(e["value"]))
			switch e["name"] {
			case "EVENTIDE_SNAPSHOT_DIR", "EVENTIDE_RESTORE_SHARDS_FROM":
				if mounts[fmt.Sprint(e["value"])] == "" {
					t.Errorf("%s=%v is not where the snapshot volume is mounted (%v)", e["name"], e["value"], mounts)
				}
			}
		}
		checkFlags(t, "k8s/snapshots patch", "cmd/ingest", nil, env)
	}
}

func packageOf(entrypoint string) string {
	switch filepath.Base(entrypoint) {
	case "ingest":
		return "cmd/ingest"
	case "query":
		return "cmd/query"
	}
	return ""
}

func strs(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
	case string:
		out = strings.Fields(v)
	}
	return out
}

// TestCompose: compose.yaml's services reference files that exist, the
// image's entrypoints, and flags and variables the binaries have.
func TestCompose(t *testing.T) {
	docs := readYAMLDocs(t, "compose.yaml")
	services, _ := docs[0]["services"].(map[string]any)
	for _, want := range []string{"n1", "n2", "n3", "storage-1", "storage-2", "query", "prometheus", "grafana"} {
		if services[want] == nil {
			t.Errorf("compose.yaml: no service %s", want)
		}
	}
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range services {
		s := v.(map[string]any)
		if b, ok := s["build"].(map[string]any); ok {
			if _, err := os.Stat(filepath.Join(fmt.Sprint(b["context"]), fmt.Sprint(b["dockerfile"]))); err != nil {
				t.Errorf("%s: build: %v", name, err)
			}
		}
		for _, vol := range strs(s["volumes"]) {
			host := strings.SplitN(vol, ":", 2)[0]
			if strings.HasPrefix(host, ".") {
				if _, err := os.Stat(host); err != nil {
					t.Errorf("%s: volume %s: %v", name, vol, err)
				}
			}
		}
		if s["image"] != "eventide:dev" {
			continue
		}
		entry := "/usr/local/bin/ingest"
		if e := strs(s["entrypoint"]); len(e) > 0 {
			entry = e[0]
		}
		if !strings.Contains(string(dockerfile), filepath.Base(entry)) {
			t.Errorf("%s: entrypoint %s is not built by the Dockerfile", name, entry)
		}
		var env []string
		if m, ok := s["environment"].(map[string]any); ok {
			for k, v := range m {
				env = append(env, k+"="+fmt.Sprint(v))
			}
		}
		switch pkg := packageOf(entry); pkg {
		case "":
			if filepath.Base(entry) != "nats-server" {
				t.Errorf("%s: unknown entrypoint %s", name, entry)
			}
			for _, a := range strs(s["command"]) {
				if strings.HasSuffix(a, ".conf") {
					if _, err := os.Stat(filepath.Join("nats", filepath.Base(a))); err != nil {
						t.Errorf("%s: config %s is not in deploy/nats", name, a)
					}
				}
			}
		default:
			checkFlags(t, "compose "+name, pkg, strs(s["command"]), env)
		}
	}
}

// TestKubernetes: the manifests have what deploy/README.md promises, and
// their flags exist.
func TestKubernetes(t *testing.T) {
	kinds := map[string]int{}
	var pdbs int
	for _, file := range []string{"nats.yaml", "storage.yaml", "query.yaml", "namespace.yaml", "kustomization.yaml"} {
		for _, d := range readYAMLDocs(t, filepath.Join("k8s", file)) {
			kind := fmt.Sprint(d["kind"])
			kinds[kind]++
			if d["apiVersion"] == nil {
				t.Errorf("%s: a %s without apiVersion", file, kind)
			}
			if kind == "PodDisruptionBudget" {
				pdbs++
			}
			if kind == "Kustomization" {
				for _, r := range strs(d["resources"]) {
					if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
						t.Errorf("kustomization: %v", err)
					}
				}
			}
			if kind != "StatefulSet" && kind != "Deployment" {
				continue
			}
			spec := d["spec"].(map[string]any)
			if kind == "StatefulSet" && spec["volumeClaimTemplates"] == nil {
				t.Errorf("%s: StatefulSet %v has no PVC template", file, d["metadata"])
			}
			pod := spec["template"].(map[string]any)["spec"].(map[string]any)
			for _, c := range pod["containers"].([]any) {
				c := c.(map[string]any)
				cmd := strs(c["command"])
				pkg := packageOf(cmd[0])
				if pkg == "" {
					continue // nats-server
				}
				probe := func(name string) string {
					p, _ := c[name].(map[string]any)
					h, _ := p["httpGet"].(map[string]any)
					return fmt.Sprint(h["path"])
				}
				if probe("livenessProbe") != "/livez" || probe("readinessProbe") != "/readyz" {
					t.Errorf("%s: %s probes %s, %s; want /livez and /readyz", file, c["name"], probe("livenessProbe"), probe("readinessProbe"))
				}
				var env []string
				for _, e := range c["env"].([]any) {
					e := e.(map[string]any)
					env = append(env, fmt.Sprint(e["name"])+"="+fmt.Sprint(e["value"]))
				}
				checkFlags(t, file+" "+fmt.Sprint(c["name"]), pkg, strs(c["args"]), env)
			}
		}
	}
	if kinds["StatefulSet"] < 2 || kinds["Deployment"] < 1 || kinds["Service"] < 3 || pdbs < 3 {
		t.Errorf("manifests hold %v; want StatefulSets for NATS and storage, a Deployment for query, Services, a PDB each", kinds)
	}
}

// TestSystemdUnits: the units' flags exist, and systemd-analyze (where
// installed) accepts every key.
func TestSystemdUnits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("systemd", "eventide-ingest.service"))
	if err != nil {
		t.Fatal(err)
	}
	var args, env []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			args = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "#   EVENTIDE_"); ok {
			env = append(env, "EVENTIDE_"+v)
		}
	}
	if len(args) == 0 || len(env) == 0 {
		t.Fatalf("eventide-ingest.service: ExecStart %q, documented variables %q", args, env)
	}
	checkFlags(t, "eventide-ingest.service", "cmd/ingest", args, env)

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the units' keys are not checked")
	}
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"eventide-ingest.service", "nats-server@.service"} {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		// verify wants the binaries and files to exist: point them at ones
		// that do; the keys are what it checks.
		text := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAllString(string(b), "ExecStart=/bin/true")
		text = strings.ReplaceAll(text, "EnvironmentFile=", "EnvironmentFile=-")
		name = strings.Replace(name, "@.", "@n1.", 1)
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
		units = append(units, filepath.Join(dir, name))
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

var metricRE = regexp.MustCompile(`\beventide_[a-z0-9_]+`)

// alertExprs returns the alert rules' names and expressions.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("alerts.yml: rule %q with expr %q", r.Alert, r.Expr)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns every target expression of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "dashboards", "eventide.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			Type, Title string
			Datasource  struct{ UID string }
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Datasources []struct{ UID string }
	}
	dsb, err := os.ReadFile(filepath.Join("grafana", "provisioning", "datasources", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(dsb, &ds); err != nil || len(ds.Datasources) != 1 {
		t.Fatalf("datasource provisioning: %v %+v", err, ds)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != ds.Datasources[0].UID || len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q: datasource %q (want the provisioned %q), %d targets", p.Title, p.Datasource.UID, ds.Datasources[0].UID, len(p.Targets))
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// TestAlertCoverage: the alerts cover what the issue asks of them.
func TestAlertCoverage(t *testing.T) {
	alerts := alertExprs(t)
	for what, metric := range map[string]string{
		"consumer lag":       "eventide_writer_consumer_pending_messages",
		"write stalls":       "eventide_storage_write_stall_seconds_total",
		"DLQ rate":           "eventide_writer_events_rejected_total",
		"tombstone warnings": "eventide_reader_tombstones_scanned",
		"disk":               "eventide_data_disk_free_bytes",
		"readiness":          "eventide_ready",
		"rebuild progress":   "eventide_shard_pending_messages",
		"rebuild finished":   "eventide_shard_caught_up",
	} {
		found := false
		for _, expr := range alerts {
			found = found || strings.Contains(expr, metric)
		}
		if !found {
			t.Errorf("no alert on %s (%s)", what, metric)
		}
	}
}
