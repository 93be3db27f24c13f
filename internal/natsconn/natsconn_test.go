package natsconn

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/eventide/eventide/internal/natsconn/natstest"
)

// roundTrip proves the connection works: a JetStream publish and its ack
// when the server runs JetStream, a request/reply otherwise.
func roundTrip(t *testing.T, nc *nats.Conn, jetStream bool) {
	t.Helper()
	if jetStream {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(t.Context(), "t.x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		return
	}
	sub, err := nc.Subscribe("echo", func(m *nats.Msg) { m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if m, err := nc.Request("echo", []byte("hi"), 5*time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("request/reply: %v, %v", m, err)
	}
}

func TestConnectUserPassword(t *testing.T) {
	ns := natstest.Start(t, func(o *natsserver.Options) { o.Username, o.Password = "eventide", "s3cret" })
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), User: "eventide", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	roundTrip(t, nc, true)

	for _, o := range []Options{
		{URL: ns.ClientURL(), User: "eventide", Password: "wrong"},
		{URL: ns.ClientURL()}, // none given
	} {
		_, err := Connect(t.Context(), o)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("user %q password %q: err %v, want ErrRefused wrapping nats.ErrAuthorization", o.User, o.Password, err)
		}
		if err != nil && strings.Contains(err.Error(), "wrong") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// TestConnectSecretFiles: the password and the token can come from files
// (a mounted secret), surrounding whitespace dropped.
func TestConnectSecretFiles(t *testing.T) {
	dir := t.TempDir()
	pw, tok := filepath.Join(dir, "password"), filepath.Join(dir, "token")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	os.WriteFile(tok, []byte("  t0ken\n"), 0o600)
	ns := natstest.Start(t, func(o *natsserver.Options) { o.Username, o.Password = "eventide", "s3cret" })
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), User: "eventide", PasswordFile: pw})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	ns = natstest.Start(t, func(o *natsserver.Options) { o.Authorization = "t0ken" })
	nc, err = Connect(t.Context(), Options{URL: ns.ClientURL(), TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestConnectToken(t *testing.T) {
	ns := natstest.Start(t, func(o *natsserver.Options) { o.Authorization = "t0ken" })
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), Token: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	roundTrip(t, nc, true)
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), Token: "other"}); !errors.Is(err, ErrRefused) {
		t.Errorf("wrong token: %v, want ErrRefused", err)
	}
}

func TestConnectNKey(t *testing.T) {
	seedFile, pub := natstest.NKeyUser(t)
	ns := natstest.Start(t, func(o *natsserver.Options) { o.Nkeys = []*natsserver.NkeyUser{{Nkey: pub}} })
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), NKeySeedFile: seedFile})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	roundTrip(t, nc, true)

	otherSeed, _ := natstest.NKeyUser(t) // a valid nkey the server does not know
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), NKeySeedFile: otherSeed}); !errors.Is(err, ErrRefused) {
		t.Errorf("unknown nkey: %v, want ErrRefused", err)
	}
	garbage := filepath.Join(t.TempDir(), "bad.nk")
	os.WriteFile(garbage, []byte("not a seed"), 0o600)
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), NKeySeedFile: garbage}); err == nil || !strings.Contains(err.Error(), "--nats-nkey") {
		t.Errorf("seed file without a seed: %v, want an error naming --nats-nkey", err)
	}
}

// TestConnectCreds runs the server in operator mode (decentralized JWT
// auth) and connects with a credentials file made for the test.
func TestConnectCreds(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "test-operator"
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "eventide"
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(name string, signer nkeys.KeyPair) string {
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name
		uc.IssuerAccount = apub
		ujwt, err := uc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := ukp.Seed()
		b, err := jwt.FormatUserConfig(ujwt, seed)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), name+".creds")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	resolver := &natsserver.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t, func(o *natsserver.Options) {
		o.JetStream = false // an account needs JetStream limits in its JWT for it; not the point here
		o.TrustedOperators = []*jwt.OperatorClaims{operator}
		o.AccountResolver = resolver
	})
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), CredsFile: creds("writer", akp)})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	roundTrip(t, nc, false)

	// A user signed by an account the operator never signed.
	strangerKP, _ := nkeys.CreateAccount()
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), CredsFile: creds("stranger", strangerKP)}); !errors.Is(err, ErrRefused) {
		t.Errorf("credentials of an unknown account: %v, want ErrRefused", err)
	}
}

// TestConnectTLS: a server with a certificate from a CA made here, with
// and without client certificates required (mutual TLS).
func TestConnectTLS(t *testing.T) {
	ca := natstest.NewCA(t, "test")
	ns := natstest.Start(t, func(o *natsserver.Options) { ca.ServerTLS(t, o, false, "nats.test") })
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)

	nc, err := Connect(t.Context(), Options{URL: url, TLSCAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	if !nc.TLSRequired() {
		t.Error("connected without TLS")
	}
	roundTrip(t, nc, true)
	nc.Close()

	// The server name to verify can differ from the URL's host.
	nc, err = Connect(t.Context(), Options{URL: url, TLSCAFile: ca.File, TLSServerName: "nats.test"})
	if err != nil {
		t.Fatalf("--nats-tls-server-name nats.test: %v", err)
	}
	nc.Close()
	_, err = Connect(t.Context(), Options{URL: url, TLSCAFile: ca.File, TLSServerName: "elsewhere.test"})
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) {
		t.Errorf("server name the certificate lacks: %v, want an x509.HostnameError", err)
	}

	// A CA that did not sign the server's certificate.
	other := natstest.NewCA(t, "other")
	_, err = Connect(t.Context(), Options{URL: url, TLSCAFile: other.File})
	var unknownAuth x509.UnknownAuthorityError
	if !errors.As(err, &unknownAuth) {
		t.Errorf("untrusted server certificate: %v, want an x509.UnknownAuthorityError", err)
	}
	// No TLS options: the server requires TLS, the system roots do not
	// know the test CA.
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL()}); err == nil {
		t.Error("connected to a TLS server without trusting its CA")
	}
}

func TestConnectMutualTLS(t *testing.T) {
	ca := natstest.NewCA(t, "test")
	ns := natstest.Start(t, func(o *natsserver.Options) { ca.ServerTLS(t, o, true) })
	certFile, keyFile, _ := ca.Issue(t, "eventide-ingest")
	nc, err := Connect(t.Context(), Options{URL: ns.ClientURL(), TLSCAFile: ca.File, TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, nc, true)
	nc.Close()

	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), TLSCAFile: ca.File}); err == nil {
		t.Error("connected without the client certificate the server requires")
	}
	other := natstest.NewCA(t, "other")
	certFile, keyFile, _ = other.Issue(t, "stranger")
	if _, err := Connect(t.Context(), Options{URL: ns.ClientURL(), TLSCAFile: ca.File, TLSCertFile: certFile, TLSKeyFile: keyFile}); err == nil {
		t.Error("connected with a client certificate from a CA the server does not trust")
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	tests := []struct {
		o    Options
		want string // in the error; "" for none
	}{
		{Options{}, ""},
		{Options{User: "u", Password: "p"}, ""},
		{Options{User: "u"}, "--nats-user is set without --nats-password"},
		{Options{Password: "p"}, "a NATS password is set without --nats-user"},
		{Options{PasswordFile: notPEM}, "a NATS password is set without --nats-user"},
		{Options{User: "u", Password: "p", PasswordFile: notPEM}, "--nats-password and --nats-password-file are both set"},
		{Options{Token: "t", TokenFile: notPEM}, "--nats-token and --nats-token-file are both set"},
		{Options{User: "u", PasswordFile: missing}, "--nats-password-file: cannot read"},
		{Options{TokenFile: empty}, "--nats-token-file " + empty + " is empty"},
		{Options{TokenFile: notPEM, NKeySeedFile: notPEM}, "--nats-token, --nats-nkey are all set"},
		{Options{User: "u", Password: "p", Token: "t"}, "give one NATS authentication method"},
		{Options{Token: "t", NKeySeedFile: notPEM}, "--nats-token, --nats-nkey are all set"},
		{Options{CredsFile: missing}, "--nats-creds: cannot read " + missing},
		{Options{NKeySeedFile: missing}, "--nats-nkey: cannot read"},
		{Options{TLSCertFile: notPEM}, "--nats-tls-cert and --nats-tls-key go together"},
		{Options{TLSCAFile: notPEM}, "holds no PEM certificate"},
		{Options{TLSCAFile: missing}, "--nats-tls-ca: cannot read"},
		{Options{TLSCertFile: notPEM, TLSKeyFile: notPEM}, "cannot load the client certificate"},
		{Options{URL: "nats://h:4222,nats://%zz"}, "--nats-url"},
	}
	for _, tt := range tests {
		err := tt.o.Check()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tt.o, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error with %q", tt.o, err, tt.want)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.RegisterFlags(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for _, n := range FlagNames {
		if fs.Lookup(n) == nil {
			t.Errorf("FlagNames lists --%s, which RegisterFlags does not define", n)
		}
	}
	if len(names) != len(FlagNames) {
		t.Errorf("RegisterFlags defines %v, FlagNames lists %v", names, FlagNames)
	}
	if err := fs.Parse([]string{"--nats-user", "u", "--nats-password", "p", "--nats-tls-ca", "/ca.pem", "--nats-tls-server-name", "n"}); err != nil {
		t.Fatal(err)
	}
	if o.User != "u" || o.Password != "p" || o.TLSCAFile != "/ca.pem" || o.TLSServerName != "n" || !o.Secured() {
		t.Errorf("parsed into %+v", o)
	}
	for _, s := range SecretFlags {
		if fs.Lookup(s) == nil {
			t.Errorf("SecretFlags lists --%s, which RegisterFlags does not define", s)
		}
	}
}

func TestConnectNeedsURLAndHonoursDeadline(t *testing.T) {
	if _, err := Connect(t.Context(), Options{}); err == nil || !strings.Contains(err.Error(), "--nats-url") {
		t.Errorf("no URL: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Connect(ctx, Options{URL: "nats://127.0.0.1:1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
}

func TestRedact(t *testing.T) {
	got := Redact("nats://u:secret@h1:4222, nats://h2:4222")
	if strings.Contains(got, "secret") || !strings.Contains(got, "h2:4222") {
		t.Errorf("Redact: %q", got)
	}
}

// FuzzRedact: Redact never panics, keeps the list's length, and replaces
// the password of every URL that has one.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"nats://u:p@h:4222", "nats://h1:4222, tls://u:secret@h2:4222", "", ",", "nats://u@h", "%zz", "nats://:@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		got := Redact(list)
		parts, gotParts := strings.Split(list, ","), strings.Split(got, ",")
		if len(parts) != len(gotParts) {
			t.Fatalf("Redact(%q) = %q: %d items, want %d", list, got, len(gotParts), len(parts))
		}
		for i, p := range parts {
			u, err := url.Parse(strings.TrimSpace(p))
			if err != nil || u.User == nil {
				continue
			}
			if pw, ok := u.User.Password(); ok && pw != "" && !strings.Contains(gotParts[i], "xxxxx") {
				t.Errorf("Redact(%q): item %q keeps its password", list, gotParts[i])
			}
		}
	})
}
