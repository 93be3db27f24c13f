package main

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"testing"

	eventideapi "github.com/eventide/eventide/api"
)

// TestBannerListsEveryAPIPath: the start-up banner names every path of
// api/openapi.yaml, so a person reading it learns every route the server
// has (it once left out the followers and following routes).
func TestBannerListsEveryAPIPath(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n := &node{httpLn: ln, cfg: &config{DataDir: t.TempDir(), NATSURL: "nats://127.0.0.1:4222"}}
	var out bytes.Buffer
	printBanner(&out, n)
	banner := out.String()

	paths := regexp.MustCompile(`(?m)^  (/[^:\s]*):\s*$`).FindAllStringSubmatch(string(eventideapi.OpenAPIYAML()), -1)
	if len(paths) < 10 {
		t.Fatalf("found %d paths in the spec; the pattern no longer matches its layout", len(paths))
	}
	for _, m := range paths {
		p := m[1]
		if p == "/" || strings.HasPrefix(p, "/ui/") {
			continue // the dashboard has its own line
		}
		if !strings.Contains(banner, p+",") && !strings.Contains(banner, p+")") {
			t.Errorf("the banner does not name %s:\n%s", p, banner)
		}
	}
}
