package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

func TestSelfSignedCertificateIsPersisted(t *testing.T) {
	o := validOptions(t)
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(o.CertDir, "kubelet.crt"))
	if err != nil {
		t.Fatalf("self-signed certificate not kept in the cert dir: %v", err)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(filepath.Join(o.CertDir, "kubelet.crt"))
	if !bytes.Equal(first, second) {
		t.Error("a restart generated a new self-signed certificate")
	}
	leaf, _ := certutil.ParseCertsPEM(second)
	if err := leaf[0].VerifyHostname(testNode); err != nil {
		t.Errorf("self-signed certificate does not name the node: %v", err)
	}
	if s.tlsConfig.MinVersion != tls.VersionTLS12 || s.tlsConfig.ClientAuth != tls.RequestClientCert {
		t.Errorf("TLS config %+v", s.tlsConfig)
	}
}

func TestConfiguredServingCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("serving.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	e := newEnv(t, func(o *Options) { o.TLSCertFile, o.TLSPrivateKeyFile, o.CertDir = certFile, keyFile, "" })
	conn, err := tls.Dial("tcp", e.ts.Listener.Addr().String(), &tls.Config{RootCAs: e.serving, ServerName: "serving.example", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("handshake with the configured certificate: %v", err)
	}
	_ = conn.Close()
	if _, err := os.Stat(filepath.Join(dir, "kubelet.crt")); err == nil {
		t.Error("a self-signed certificate was generated although one is configured")
	}
}

func TestClientCAIsAdvertised(t *testing.T) {
	e := newEnv(t)
	var advertised [][]byte
	cfg := &tls.Config{RootCAs: e.serving, ServerName: testNode, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			advertised = cri.AcceptableCAs
			return &tls.Certificate{}, nil
		}}
	conn, err := tls.Dial("tcp", e.ts.Listener.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if len(advertised) != 1 || !bytes.Equal(advertised[0], e.ca.cert.RawSubject) {
		t.Errorf("acceptable CAs %q, want the client CA", advertised)
	}
}

func TestStartServesUntilTheContextEnds(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Port = 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Start(ctx) }()
	var addr net.Addr
	select {
	case addr = <-e.s.listening:
	case err := <-done:
		t.Fatalf("Start: %v", err)
	}
	e.addUser("erin-token", "erin", "get healthz")
	req, _ := http.NewRequest("GET", "https://"+addr.String()+"/healthz", nil)
	req.Header.Set("Authorization", "Bearer erin-token")
	resp, err := e.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/1.1" {
		t.Errorf("GET /healthz on the started server = %s %s, want 200 over HTTP/1.1", resp.Proto, resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v after its context ended, want nil", err)
	}
}

// With serverTLSBootstrap the certificate comes from a getter (a certificate manager): none yet fails the
// handshake, and a renewed one is served at the next handshake, without a restart; no self-signed
// certificate is made.
func TestServingCertificateFromAGetterIsRenewedWithoutARestart(t *testing.T) {
	var current atomic.Pointer[tls.Certificate]
	o := validOptions(t)
	o.ServingCertificate = current.Load
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.handler)
	ts.TLS = s.tlsConfig.Clone()
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	issue := func(host string) {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		certs, _ := certutil.ParseCertsPEM(certPEM)
		for _, c := range certs {
			pool.AddCert(c)
		}
		current.Store(&cert)
	}
	served := func(host string) error {
		conn, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
		}
		return err
	}
	if err := served(testNode); err == nil {
		t.Error("a handshake succeeded before the manager had a certificate")
	}
	issue("first.example")
	if err := served("first.example"); err != nil {
		t.Errorf("the manager's certificate: %v", err)
	}
	issue("renewed.example")
	if err := served("renewed.example"); err != nil {
		t.Errorf("the renewed certificate, without a restart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(o.CertDir, "kubelet.crt")); err == nil {
		t.Error("a self-signed certificate was generated although a manager serves one")
	}
}
