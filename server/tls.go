package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Names of the self-signed serving certificate in CertDir, as the kubelet names them.
const (
	selfSignedCertName = "kubelet.crt"
	selfSignedKeyName  = "kubelet.key"
)

// buildTLS returns the serving configuration: the configured or self-signed certificate, tlsMinVersion
// (TLS 1.2 by default), tlsCipherSuites and tlsCurvePreferences, and client certificates requested (not
// required: tokens and anonymous requests have none) and verified by the x509 authenticator against the
// client CA, which is also advertised to clients.
func (s *Server) buildTLS() (*tls.Config, error) {
	var certs []tls.Certificate
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if current := s.opts.ServingCertificate; current != nil {
		getCert = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate available for the kubelet")
		}
	} else {
		certFile, keyFile, err := s.servingCertFiles()
		if err != nil {
			return nil, err
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("node server: load serving certificate %s: %w", certFile, err)
		}
		certs = []tls.Certificate{cert}
	}
	minVersion := s.opts.TLSMinVersion
	if minVersion == 0 {
		minVersion = tls.VersionTLS12
	}
	cfg := &tls.Config{
		MinVersion:       minVersion,
		CipherSuites:     s.opts.TLSCipherSuites,
		CurvePreferences: s.opts.TLSCurvePreferences,
		Certificates:     certs,
		GetCertificate:   getCert,
		ClientAuth:       tls.RequestClientCert,
		NextProtos:       []string{"http/1.1"},
	}
	if s.clientCA != nil {
		cfg.GetConfigForClient = s.withClientCAs(cfg)
	}
	return cfg, nil
}

// withClientCAs advertises the current client CA bundle in each handshake (it may be reloaded).
func (s *Server) withClientCAs(base *tls.Config) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(*tls.ClientHelloInfo) (*tls.Config, error) {
		opts, ok := s.clientCA.VerifyOptions()
		if !ok {
			return nil, nil
		}
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientCAs = opts.Roots
		return cfg, nil
	}
}

// servingCertFiles returns the configured pair, or the self-signed pair in CertDir, generated if missing.
func (s *Server) servingCertFiles() (certFile, keyFile string, err error) {
	if s.opts.TLSCertFile != "" || s.opts.TLSPrivateKeyFile != "" {
		if s.opts.TLSCertFile == "" || s.opts.TLSPrivateKeyFile == "" {
			return "", "", fmt.Errorf("node server: tlsCertFile and tlsPrivateKeyFile must be set together")
		}
		return s.opts.TLSCertFile, s.opts.TLSPrivateKeyFile, nil
	}
	if s.opts.CertDir == "" {
		return "", "", fmt.Errorf("node server: no serving certificate and no cert dir to keep a self-signed one")
	}
	certFile = filepath.Join(s.opts.CertDir, selfSignedCertName)
	keyFile = filepath.Join(s.opts.CertDir, selfSignedKeyName)
	if ok, _ := certutil.CanReadCertAndKey(certFile, keyFile); ok {
		return certFile, keyFile, nil
	}
	return certFile, keyFile, writeSelfSigned(s.opts.NodeName, certFile, keyFile)
}

func writeSelfSigned(host, certFile, keyFile string) error {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		return fmt.Errorf("node server: generate self-signed certificate: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o750); err != nil {
		return fmt.Errorf("node server: create cert dir: %w", err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return fmt.Errorf("node server: write %s: %w", keyFile, err)
	}
	if err := certutil.WriteCert(certFile, certPEM); err != nil {
		return fmt.Errorf("node server: write %s: %w", certFile, err)
	}
	return nil
}
