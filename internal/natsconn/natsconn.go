// Package natsconn owns how an Eventide process connects to an external
// NATS server or cluster: the URL, authentication (user and password, a
// token, an nkey seed file or a credentials file) and TLS (a CA to trust,
// a client certificate and key for mutual TLS, the server name to
// verify). Every NATS connection Eventide opens to a server it does not
// embed goes through Connect, so every command offers the same flags and
// refuses the same mistakes with the same messages.
//
// The flags, registered on a command's flag set by Options.RegisterFlags
// (each command maps flag --some-name to its variable EVENTIDE_SOME_NAME,
// as cmd/ingest does for all its flags):
//
//	--nats-user            user name (with --nats-password)
//	--nats-password        password; secret (see SecretFlags)
//	--nats-password-file   file holding the password (instead of --nats-password)
//	--nats-token           authentication token; secret
//	--nats-token-file      file holding the token (instead of --nats-token)
//	--nats-nkey            file holding an nkey seed (SU...)
//	--nats-creds           credentials file (user JWT and nkey seed), decentralized auth
//	--nats-tls-ca          PEM file of the CA(s) that signed the server certificate
//	--nats-tls-cert        PEM client certificate (mutual TLS, with --nats-tls-key)
//	--nats-tls-key         PEM key of --nats-tls-cert
//	--nats-tls-server-name name the server certificate must carry (default: the URL's host)
//
// The URL is not among them: its default and meaning differ by command (in
// cmd/ingest an empty --nats-url runs the embedded server), so each
// command defines --nats-url itself and sets Options.URL.
//
// At most one of user/password, token, nkey and credentials may be set
// (Check). Any TLS flag turns TLS on: the connection then refuses a
// server that does not offer TLS or whose certificate does not verify.
// Credentials in the URL (nats://user:pass@host) still work; Redact hides
// them in logs.
//
// Use (cmd/query, after merging, does the same as cmd/ingest):
//
//	var nopts natsconn.Options
//	fs.StringVar(&nopts.URL, "nats-url", "nats://127.0.0.1:4222", "...")
//	nopts.RegisterFlags(fs)
//	... parse flags and EVENTIDE_* variables ...
//	if err := nopts.Check(); err != nil { /* usage error, exit 2 */ }
//	nc, err := natsconn.Connect(ctx, nopts, nats.Name("eventide-query"), nats.MaxReconnects(-1))
//	// errors.Is(err, natsconn.ErrRefused): the server refused the credentials.
//
// In logs, show flags named in SecretFlags as REDACTED and pass URLs
// through Redact.
package natsconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Options says where and how to connect. The zero value connects to
// nothing (URL is required by Connect) without authentication or TLS.
type Options struct {
	// URL is one server URL or a comma-separated list of a cluster's.
	URL string

	User, Password string
	PasswordFile   string // read by Connect; excludes Password
	Token          string
	TokenFile      string // read by Connect; excludes Token
	NKeySeedFile   string
	CredsFile      string

	TLSCAFile      string
	TLSCertFile    string
	TLSKeyFile     string
	TLSServerName  string
	connectTimeout time.Duration // tests; default nats.go's (2s)
}

// SecretFlags are the flags RegisterFlags defines whose values are
// secrets: a command's log line must not show them.
var SecretFlags = []string{"nats-password", "nats-token"}

// ErrRefused is returned (wrapped) by Connect when the server refused
// the connection's credentials (wrong, missing or expired), as opposed to
// a server that could not be reached.
var ErrRefused = errors.New("NATS server refused the credentials")

// RegisterFlags defines the authentication and TLS flags on fs, writing
// into o. Defaults are the current values of o's fields.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.User, "nats-user", o.User, "NATS user `name` (with --nats-password)")
	fs.StringVar(&o.Password, "nats-password", o.Password, "NATS `password` of --nats-user; prefer the environment variable: a flag shows in ps")
	fs.StringVar(&o.PasswordFile, "nats-password-file", o.PasswordFile, "`file` holding the password of --nats-user (surrounding whitespace dropped); excludes --nats-password")
	fs.StringVar(&o.Token, "nats-token", o.Token, "NATS authentication `token`; prefer the environment variable: a flag shows in ps")
	fs.StringVar(&o.TokenFile, "nats-token-file", o.TokenFile, "`file` holding the NATS token (surrounding whitespace dropped); excludes --nats-token")
	fs.StringVar(&o.NKeySeedFile, "nats-nkey", o.NKeySeedFile, "`file` holding the NATS nkey seed (SU...) to authenticate with")
	fs.StringVar(&o.CredsFile, "nats-creds", o.CredsFile, "NATS credentials `file` (user JWT and nkey seed, decentralized auth)")
	fs.StringVar(&o.TLSCAFile, "nats-tls-ca", o.TLSCAFile, "PEM `file` of the CA(s) to verify the NATS server certificate with; any --nats-tls-* flag requires TLS")
	fs.StringVar(&o.TLSCertFile, "nats-tls-cert", o.TLSCertFile, "PEM client certificate `file` for mutual TLS (with --nats-tls-key)")
	fs.StringVar(&o.TLSKeyFile, "nats-tls-key", o.TLSKeyFile, "PEM private key `file` of --nats-tls-cert")
	fs.StringVar(&o.TLSServerName, "nats-tls-server-name", o.TLSServerName, "`name` the NATS server certificate must carry; empty: the URL's host")
}

// FlagNames lists the flags RegisterFlags defines, in its order.
var FlagNames = []string{"nats-user", "nats-password", "nats-password-file", "nats-token", "nats-token-file", "nats-nkey", "nats-creds",
	"nats-tls-ca", "nats-tls-cert", "nats-tls-key", "nats-tls-server-name"}

// Secured reports whether any authentication or TLS option is set.
func (o Options) Secured() bool { return o.authMethods() != nil || o.tlsWanted() }

func (o Options) tlsWanted() bool {
	return o.TLSCAFile != "" || o.TLSCertFile != "" || o.TLSKeyFile != "" || o.TLSServerName != ""
}

// authMethods names the authentication methods set, by their flags.
func (o Options) authMethods() []string {
	var m []string
	if o.User != "" || o.Password != "" || o.PasswordFile != "" {
		m = append(m, "--nats-user/--nats-password")
	}
	if o.Token != "" || o.TokenFile != "" {
		m = append(m, "--nats-token")
	}
	if o.NKeySeedFile != "" {
		m = append(m, "--nats-nkey")
	}
	if o.CredsFile != "" {
		m = append(m, "--nats-creds")
	}
	return m
}

// Check refuses combinations that cannot work and files that cannot be
// read, naming the flag. It does not need the server.
func (o Options) Check() error {
	if m := o.authMethods(); len(m) > 1 {
		return fmt.Errorf("%s are all set: give one NATS authentication method", strings.Join(m, ", "))
	}
	switch {
	case o.Password != "" && o.PasswordFile != "":
		return errors.New("--nats-password and --nats-password-file are both set: give one")
	case o.Token != "" && o.TokenFile != "":
		return errors.New("--nats-token and --nats-token-file are both set: give one")
	case o.User != "" && o.Password == "" && o.PasswordFile == "":
		return errors.New("--nats-user is set without --nats-password or --nats-password-file")
	case (o.Password != "" || o.PasswordFile != "") && o.User == "":
		return errors.New("a NATS password is set without --nats-user")
	case (o.TLSCertFile == "") != (o.TLSKeyFile == ""):
		return errors.New("--nats-tls-cert and --nats-tls-key go together: give both for mutual TLS, or neither")
	}
	if o.URL != "" {
		for _, u := range strings.Split(o.URL, ",") {
			if _, err := url.Parse(strings.TrimSpace(u)); err != nil {
				return fmt.Errorf("--nats-url: %q is not a URL: %w", Redact(u), err)
			}
		}
	}
	if _, err := o.withSecretFiles(); err != nil {
		return err
	}
	for _, f := range []struct{ flag, path string }{
		{"--nats-nkey", o.NKeySeedFile}, {"--nats-creds", o.CredsFile},
		{"--nats-tls-ca", o.TLSCAFile}, {"--nats-tls-cert", o.TLSCertFile}, {"--nats-tls-key", o.TLSKeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return fmt.Errorf("%s: cannot read %s: %w", f.flag, f.path, err)
		}
	}
	if _, err := o.tlsConfig(); err != nil {
		return err
	}
	return nil
}

// withSecretFiles returns o with Password and Token read from their files.
func (o Options) withSecretFiles() (Options, error) {
	for _, f := range []struct {
		flag, path string
		dst        *string
	}{{"--nats-password-file", o.PasswordFile, &o.Password}, {"--nats-token-file", o.TokenFile, &o.Token}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return o, fmt.Errorf("%s: cannot read %s: %w", f.flag, f.path, err)
		}
		if *f.dst = strings.TrimSpace(string(b)); *f.dst == "" {
			return o, fmt.Errorf("%s %s is empty", f.flag, f.path)
		}
	}
	return o, nil
}

// tlsConfig builds the client TLS configuration, nil when no TLS flag is
// set.
func (o Options) tlsConfig() (*tls.Config, error) {
	if !o.tlsWanted() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.TLSServerName}
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-tls-ca: cannot read %s: %w", o.TLSCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--nats-tls-ca: %s holds no PEM certificate", o.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-tls-cert %s, --nats-tls-key %s: cannot load the client certificate: %w", o.TLSCertFile, o.TLSKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// natsOptions turns o into nats.go options.
func (o Options) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", o.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	case o.CredsFile != "":
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	tlsCfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, nats.Secure(tlsCfg))
	}
	if o.connectTimeout > 0 {
		opts = append(opts, nats.Timeout(o.connectTimeout))
	}
	return opts, nil
}

// Connect checks o and connects to o.URL with its authentication and
// TLS, then with extra (the caller's name, handlers, reconnect policy;
// they come after o's, so they win where both set something). A deadline
// on ctx bounds the connect. The error names the URL (redacted) and wraps
// ErrRefused when the server refused the credentials, nats.go's error
// otherwise.
func Connect(ctx context.Context, o Options, extra ...nats.Option) (*nats.Conn, error) {
	if o.URL == "" {
		return nil, errors.New("cannot connect to NATS: no URL (--nats-url)")
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	o, err := o.withSecretFiles()
	if err != nil {
		return nil, err
	}
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return nil, fmt.Errorf("cannot connect to NATS at %s: %w", Redact(o.URL), context.DeadlineExceeded)
		}
		opts = append(opts, nats.Timeout(left))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", Redact(o.URL), err)
	}
	nc, err := nats.Connect(o.URL, append(opts, extra...)...)
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("cannot connect to NATS at %s: %w (check %s): %w", Redact(o.URL), ErrRefused, o.authHint(), err)
		}
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", Redact(o.URL), err)
	}
	return nc, nil
}

func refused(err error) bool {
	// nats.go's error for the server's -ERR line matches these with errors.Is.
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked)
}

func (o Options) authHint() string {
	if m := o.authMethods(); len(m) > 0 {
		return m[0]
	}
	return "the server requires authentication: give --nats-user/--nats-password, --nats-token, --nats-nkey or --nats-creds"
}

// Redact hides passwords in a comma-separated list of URLs, for logs.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
