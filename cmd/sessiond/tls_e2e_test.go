//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// writeCert writes a new self-signed certificate for 127.0.0.1 with the given serial number, and
// its key, to certFile and keyFile (PEM), and returns the certificate.
func writeCert(t *testing.T, serial int64, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	c := testenv.SelfSignedCert(t, serial)
	// Written next to the target and renamed, as a certificate manager would: the server
	// never reads half a file.
	for _, f := range []struct {
		path string
		pem  []byte
	}{{certFile, c.CertPEM}, {keyFile, c.KeyPEM}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.pem, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	return c.X509
}

// TestServeTLSReloadsOnSIGHUP: serve --tls-cert/--tls-key answers over HTTPS; on SIGHUP it
// reads the files again and new connections get the new certificate, while the listener and a
// connection opened before keep working; a reload from broken files keeps the certificate
// served so far.
func TestServeTLSReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, 1, certFile, keyFile)
	u, cmd, stderr := startServe(t, "--data", filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("serve announced %s, want an https URL", u)
	}
	roots := x509.NewCertPool()
	roots.AddCert(first)
	// serial answers GET /healthz over tr and returns the serial number of the certificate
	// the server presented.
	serial := func(tr *http.Transport) int64 {
		t.Helper()
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get(u + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz over TLS: %v\n%s", err, stderr.String())
		}
		defer resp.Body.Close()
		io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Fatalf("GET /healthz over TLS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	kept := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer kept.CloseIdleConnections()
	if got := serial(kept); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}

	second := writeCert(t, 2, certFile, keyFile)
	roots.AddCert(second)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fresh := func() int64 {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}
		return serial(tr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for fresh() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get the first certificate after SIGHUP\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := serial(kept); got != 1 {
		t.Errorf("the connection opened before the reload now shows serial %d; it should have been kept", got)
	}

	// Broken files: the reload fails, the second certificate stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(stderr.String(), "not reloaded") {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("no log of the failed reload:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := fresh(); got != 2 {
		t.Errorf("after a failed reload new connections get serial %d, want 2", got)
	}
}

// TestServeTLSFlags: --tls-cert and --tls-key go together, and files that do not load are
// refused at start.
func TestServeTLSFlags(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("nope"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", bad}, "go together"},
		{[]string{"--tls-cert", bad, "--tls-key", bad}, "load TLS certificate"},
	} {
		_, stderr, code := runCLI(t, "", append([]string{"serve", "--data", filepath.Join(dir, "d"), "--addr", "127.0.0.1:0"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestServeTLSOffLoopback follows the non-loopback hint ("serve TLS (--tls-cert, --tls-key)"):
// with --auth and a certificate, serve listens on every interface, over HTTPS, and a request
// without a key is refused.
func TestServeTLSOffLoopback(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	cert := writeCert(t, 1, certFile, keyFile)
	u, _, stderr := startServe(t, "--data", filepath.Join(dir, "data"), "--addr", "0.0.0.0:0", "--auth", "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("serve announced %s, want an https URL", u)
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(u, "https://"))
	if err != nil {
		t.Fatalf("serve announced %s: %v", u, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/v1/sessions": http.StatusUnauthorized} {
		resp, err := cl.Get("https://127.0.0.1:" + port + path)
		if err != nil {
			t.Fatalf("GET %s over TLS: %v\n%s", path, err, stderr.String())
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
