package realnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the node's certificates, made for one run: a CA, a serving
// certificate for 127.0.0.1 (the API server's and the kubelet's), client
// certificates for an administrator (system:masters) and for the kubelet
// (system:node:<name>), and the service-account signing key.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

// Files of the pki folder.
const (
	caFile          = "ca.crt"
	servingCert     = "serving.crt"
	servingKey      = "serving.key"
	adminCert       = "admin.crt"
	adminKey        = "admin.key"
	kubeletCert     = "kubelet-client.crt"
	kubeletKey      = "kubelet-client.key"
	serviceAcctKey  = "sa.key"
	serviceAcctPub  = "sa.pub"
	adminUser       = "captf-realnode-admin"
	mastersGroup    = "system:masters"
	nodesGroup      = "system:nodes"
	certificateLife = 24 * time.Hour
)

func newPKI(dir, node string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "captf-realnode-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certificateLife),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
	if err := os.WriteFile(filepath.Join(dir, caFile), p.caPEM, 0o644); err != nil {
		return nil, err
	}
	if err := p.issue(servingCert, servingKey, pkix.Name{CommonName: "captf-realnode"},
		[]string{"localhost", node, "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		hostIPs(), x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if err := p.issue(adminCert, adminKey, pkix.Name{CommonName: adminUser, Organization: []string{mastersGroup}}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if err := p.issue(kubeletCert, kubeletKey, pkix.Name{CommonName: "system:node:" + node, Organization: []string{nodesGroup}}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	priv, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, serviceAcctKey), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		return nil, err
	}
	return p, os.WriteFile(filepath.Join(dir, serviceAcctPub), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// hostIPs are 127.0.0.1 and the addresses of this host's interfaces: the
// kubelet registers the node with the host's own address when it finds
// one, and the API server checks the kubelet's certificate against it.
func hostIPs() []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

// issue writes a certificate signed by the CA and its key.
func (p *pki) issue(certName, keyName string, subject pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	p.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: subject, DNSNames: dns, IPAddresses: ips,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certificateLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", certName, err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), 0o600)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// kubeconfig is a kubeconfig for the API server at url that authenticates
// with the client certificate cert and key of the pki folder.
func (p *pki) kubeconfig(url, cert, key string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: realnode
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: realnode
  context: {cluster: realnode, user: user, namespace: default}
current-context: realnode
`, url, p.path(caFile), p.path(cert), p.path(key)))
}
