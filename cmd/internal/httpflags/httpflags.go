// Package httpflags holds the command-line flags of the HTTP API's guards
// (bearer token, CORS origins, query timeout cap), so that cmd/ingest and
// cmd/query parse and check them the same way: --http-token,
// --http-token-file, --cors-origins and --max-query-timeout.
//
// Use:
//
//	var g httpflags.Guards
//	g.Register(fs)            // before fs.Parse
//	...                       // parse flags and EVENTIDE_* variables
//	if err := g.Finish(); err != nil { ... } // checks, reads the token file
//	httpapi.Config{Token: g.Token, CORSOrigins: g.CORSOrigins, MaxQueryTimeout: g.MaxQueryTimeout}
package httpflags

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/cmd/internal/httpapi"
)

// SecretFlag is the flag whose value a configuration log must redact.
const SecretFlag = "http-token"

// Guards is what the guard flags set.
type Guards struct {
	// Token is the bearer token, from --http-token or the content of
	// --http-token-file; empty: no authentication. Never logged.
	Token           string
	tokenFile       string
	CORSOrigins     []string
	MaxQueryTimeout time.Duration
}

// Register defines the guard flags on fs, with their defaults.
func (g *Guards) Register(fs *flag.FlagSet) {
	g.MaxQueryTimeout = httpapi.DefaultMaxQueryTimeout
	fs.StringVar(&g.Token, SecretFlag, "",
		"bearer `token` every HTTP request needs but /livez, /readyz, /openapi.yaml and the dashboard's page / and files /ui/; empty: no authentication. Prefer --http-token-file: a flag shows in ps")
	fs.StringVar(&g.tokenFile, "http-token-file", "",
		"`file` holding the bearer token (surrounding whitespace dropped); excludes --http-token")
	fs.Var(&cli.List{List: &g.CORSOrigins, EmptyOK: true}, "cors-origins",
		"comma-separated `origins` (scheme://host[:port]) whose browser pages may read the API; empty: no CORS headers")
	fs.Var(cli.Duration{D: &g.MaxQueryTimeout, Min: time.Millisecond}, "max-query-timeout",
		"longest a data request may run (`duration`): the cap of its timeout parameter and its timeout without one")
}

// Finish checks the flags together and reads the token file.
func (g *Guards) Finish() error {
	if g.Token != "" && g.tokenFile != "" {
		return errors.New("--http-token and --http-token-file are both set: give one")
	}
	for _, o := range g.CORSOrigins {
		if err := CheckOrigin(o); err != nil {
			return err
		}
	}
	if g.tokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(g.tokenFile)
	if err != nil {
		return fmt.Errorf("--http-token-file: cannot read the token: %w", err)
	}
	g.Token = strings.TrimSpace(string(b))
	if g.Token == "" {
		return fmt.Errorf("--http-token-file %s is empty: write the token in it, or drop the flag to run without authentication", g.tokenFile)
	}
	return nil
}

// CheckOrigin refuses a --cors-origins item that is not an origin a
// browser would send: scheme://host[:port], nothing else.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || o != u.Scheme+"://"+u.Host {
		return fmt.Errorf("--cors-origins: %q is not an origin such as https://dash.example.com or http://localhost:3000 (scheme, host and port only, no path or trailing slash; * is not supported)", o)
	}
	return nil
}
