package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki writes every key and certificate one instance needs into dir (ECDSA P-256: fast to
// generate, accepted by kube-apiserver for serving, client auth and service-account tokens).
type pki struct {
	dir string
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func (p pki) writeKey(name string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(p.path(name), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func (p pki) writeCert(name string, der []byte) error {
	return os.WriteFile(p.path(name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func (p pki) ca(base, cn string) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := p.writeCert(base+".crt", der); err != nil {
		return nil, err
	}
	if err := p.writeKey(base+".key", key); err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func (p pki) leaf(ca *keyPair, base, cn string, orgs []string, server bool, dns []string, ips []net.IP) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return err
	}
	if err := p.writeCert(base+".crt", der); err != nil {
		return err
	}
	return p.writeKey(base+".key", key)
}

// generate creates: ca, apiserver (serving), admin (system:masters), controller-manager, scheduler,
// front-proxy-ca + front-proxy-client (aggregator), packageserver (serving), sa key pair.
func (p pki) generate() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	ca, err := p.ca("ca", "kcp-ca")
	if err != nil {
		return err
	}
	loop := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	if err := p.leaf(ca, "apiserver", "kube-apiserver", nil, true,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"}, loop); err != nil {
		return err
	}
	if err := p.leaf(ca, "admin", "kubernetes-admin", []string{"system:masters"}, false, nil, nil); err != nil {
		return err
	}
	// The controller manager runs with one identity for all controllers
	// (--use-service-account-credentials=false), so it needs rights over every resource.
	if err := p.leaf(ca, "controller-manager", "system:kube-controller-manager",
		[]string{"system:masters"}, false, nil, nil); err != nil {
		return err
	}
	// kube-scheduler runs as itself: the API server's bootstrap RBAC binds system:kube-scheduler
	// (and system:volume-scheduler, extension-apiserver-authentication-reader) to this user.
	if err := p.leaf(ca, "scheduler", "system:kube-scheduler", nil, false, nil, nil); err != nil {
		return err
	}
	// The aggregator dials the APIService's service as <name>.<namespace>.svc.
	if err := p.leaf(ca, "packageserver", "packageserver", nil, true,
		[]string{"localhost", "packageserver-service.openshift-operator-lifecycle-manager.svc"}, loop); err != nil {
		return err
	}
	fp, err := p.ca("front-proxy-ca", "kcp-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := p.leaf(fp, "front-proxy-client", "front-proxy-client", nil, false, nil, nil); err != nil {
		return err
	}
	sa, err := newKey()
	if err != nil {
		return err
	}
	if err := p.writeKey("sa.key", sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}
