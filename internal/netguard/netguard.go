// Package netguard holds the checks every listening part of the node
// shares (the cluster's members, node mcp -listen): a listen address names
// its host, and reaches beyond loopback only with TLS; TLS configurations
// are loaded from PEM files the same way.
package netguard

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

// ErrInsecure refuses a listen address beyond loopback without TLS.
var ErrInsecure = errors.New("listening beyond loopback needs TLS")

// Split splits a listen address into its host and port: the host must be
// named (every interface is never bound), the port a number (0 picks
// one).
func Split(addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, errors.New("bad port")
	}
	if h == "" {
		return "", 0, errors.New("name the host to bind to; every interface is never bound")
	}
	return h, port, nil
}

// Loopback reports whether host is "localhost" or a loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Check checks a listen address: split as Split does, and beyond
// loopback only when secured (ErrInsecure otherwise).
func Check(addr string, secured bool) error {
	host, _, err := Split(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !secured && !Loopback(host) {
		return fmt.Errorf("listen address %q: %w", addr, ErrInsecure)
	}
	return nil
}

// MutualTLS loads the server's and the client's configurations of mutual
// TLS: each side presents the certificate in cert and key, and requires
// the other's to chain to the CA in ca (TLS 1.3 only).
func MutualTLS(ca, cert, key string) (server, client *tls.Config, err error) {
	pool, err := certPool(ca)
	if err != nil {
		return nil, nil, err
	}
	server, err = ServerTLS(cert, key, "")
	if err != nil {
		return nil, nil, err
	}
	server.ClientCAs, server.ClientAuth = pool, tls.RequireAndVerifyClientCert
	client = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: server.Certificates, RootCAs: pool}
	return server, client, nil
}

// ServerTLS loads a server's TLS configuration (TLS 1.3 only) presenting
// the certificate in cert and key; with ca, a client must present a
// certificate that chains to it.
func ServerTLS(cert, key, ca string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate and key: %w", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}}
	if ca != "" {
		pool, err := certPool(ca)
		if err != nil {
			return nil, err
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// certPool reads the PEM certificates of file.
func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", file)
	}
	return pool, nil
}
