package main

import (
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

func testOptions(t *testing.T) options {
	return options{
		Dir:           t.TempDir(),
		Namespace:     "database-system",
		ClusterDomain: "cluster.local",
		Validity:      365 * 24 * time.Hour,
		CAValidity:    10 * 365 * 24 * time.Hour,
		RenewBefore:   30 * 24 * time.Hour,
		now:           time.Now,
	}
}

// readDir returns every file of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = data
	}
	return files
}

func parseCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	certs, err := certutil.CertsFromFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return certs[0]
}

// verify checks that the leaf <name>.crt chains to the bundle now, for host if not empty.
func verify(t *testing.T, dir, name, bundle, host string, usage x509.ExtKeyUsage) error {
	return verifyAt(t, time.Now(), dir, name, bundle, host, usage)
}

func verifyAt(t *testing.T, now time.Time, dir, name, bundle, host string, usage x509.ExtKeyUsage) error {
	t.Helper()
	pool, err := certutil.NewPool(filepath.Join(dir, bundle))
	require.NoError(t, err)
	_, err = parseCert(t, dir, name+".crt").Verify(x509.VerifyOptions{
		Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now})
	return err
}

func TestRunIssuesCertificatesForTheNamesTheManifestsUse(t *testing.T) {
	o := testOptions(t)
	require.NoError(t, run(o, io.Discard))

	for _, c := range []struct {
		leaf, bundle, host string
		usage              x509.ExtKeyUsage
	}{
		// The aggregator dials the Service by this name.
		{"apiserver", "serving-ca-bundle.crt", "database-apiserver.database-system.svc", x509.ExtKeyUsageServerAuth},
		// The API server dials each member; etcdctl through a port-forward dials localhost.
		{"etcd-server", "etcd-ca-bundle.crt", "database-etcd-2.database-etcd.database-system.svc", x509.ExtKeyUsageServerAuth},
		{"etcd-server", "etcd-ca-bundle.crt", "localhost", x509.ExtKeyUsageServerAuth},
		{"etcd-peer", "etcd-ca-bundle.crt", "database-etcd-0.database-etcd.database-system.svc", x509.ExtKeyUsageServerAuth},
		{"etcd-peer", "etcd-ca-bundle.crt", "", x509.ExtKeyUsageClientAuth},
		{"etcd-client", "etcd-ca-bundle.crt", "", x509.ExtKeyUsageClientAuth},
	} {
		require.NoError(t, verify(t, o.Dir, c.leaf, c.bundle, c.host, c.usage), "%s for %q", c.leaf, c.host)
	}
	require.Error(t, verify(t, o.Dir, "apiserver", "etcd-ca-bundle.crt", "", x509.ExtKeyUsageServerAuth),
		"the serving and etcd CAs are distinct")
	require.Error(t, verify(t, o.Dir, "etcd-client", "etcd-ca-bundle.crt", "", x509.ExtKeyUsageServerAuth),
		"the etcd client certificate cannot serve")
	require.Equal(t, etcdPeerCN, parseCert(t, o.Dir, "etcd-peer.crt").Subject.CommonName)
	require.Empty(t, parseCert(t, o.Dir, "etcd-client.crt").DNSNames)

	info, err := os.Stat(filepath.Join(o.Dir, "serving-ca.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestRunAgainChangesNothing(t *testing.T) {
	o := testOptions(t)
	require.NoError(t, run(o, io.Discard))
	before := readDir(t, o.Dir)
	require.NoError(t, run(o, io.Discard))
	require.Equal(t, before, readDir(t, o.Dir))
}

func TestRunReissuesLeavesThatNoLongerFitAndKeepsTheCAs(t *testing.T) {
	for name, change := range map[string]func(*options){
		"another namespace":      func(o *options) { o.Namespace = "databases" },
		"about to expire":        func(o *options) { o.now = func() time.Time { return time.Now().Add(340 * 24 * time.Hour) } },
		"renewal asked for":      func(o *options) { o.Renew = true },
		"another cluster domain": func(o *options) { o.ClusterDomain = "example.internal" },
	} {
		t.Run(name, func(t *testing.T) {
			o := testOptions(t)
			require.NoError(t, run(o, io.Discard))
			before := readDir(t, o.Dir)
			change(&o)
			require.NoError(t, run(o, io.Discard))
			after := readDir(t, o.Dir)
			for _, f := range []string{"serving-ca.crt", "serving-ca.key", "etcd-ca.crt", "etcd-ca.key", "serving-ca-bundle.crt"} {
				require.Equal(t, before[f], after[f], f)
			}
			for _, f := range []string{"apiserver.crt", "apiserver.key", "etcd-server.crt", "etcd-peer.crt"} {
				require.NotEqual(t, before[f], after[f], f)
			}
			require.NoError(t, verifyAt(t, o.now(), o.Dir, "apiserver", "serving-ca-bundle.crt",
				"database-apiserver."+o.Namespace+".svc", x509.ExtKeyUsageServerAuth))
		})
	}
}

// TestRotateCAInThreeStepsNeverBreaksTrust walks stage, promote and finish and checks at each
// step that what runs before the step trusts what runs after it, and the other way round.
func TestRotateCAInThreeStepsNeverBreaksTrust(t *testing.T) {
	o := testOptions(t)
	require.NoError(t, run(o, io.Discard))
	oldDir := t.TempDir()
	snapshot := func(dst string) {
		for name, data := range readDir(t, o.Dir) {
			require.NoError(t, os.WriteFile(filepath.Join(dst, name), data, 0o600))
		}
	}
	snapshot(oldDir)
	host := "database-apiserver.database-system.svc"

	o.RotateCA = rotatePromote
	require.ErrorContains(t, run(o, io.Discard), "nothing staged")

	o.RotateCA = rotateStage
	require.NoError(t, run(o, io.Discard))
	staged := readDir(t, o.Dir)
	require.Equal(t, readDir(t, oldDir)["apiserver.crt"], staged["apiserver.crt"], "staging keeps the leaves")
	bundle, err := certutil.ParseCertsPEM(staged["serving-ca-bundle.crt"])
	require.NoError(t, err)
	require.Len(t, bundle, 2)

	o.RotateCA = rotatePromote
	require.NoError(t, run(o, io.Discard))
	promotedDir := t.TempDir()
	snapshot(promotedDir)
	// New leaves chain to the new CA, which the staged bundle (still deployed) trusts ...
	stagedDir := t.TempDir()
	for name, data := range staged {
		require.NoError(t, os.WriteFile(filepath.Join(stagedDir, name), data, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(stagedDir, "apiserver.crt"), readDir(t, promotedDir)["apiserver.crt"], 0o600))
	require.NoError(t, verify(t, stagedDir, "apiserver", "serving-ca-bundle.crt", host, x509.ExtKeyUsageServerAuth))
	// ... and the old leaves, still served until the Pods restart, chain to the new bundle.
	require.NoError(t, os.WriteFile(filepath.Join(promotedDir, "old-apiserver.crt"), readDir(t, oldDir)["apiserver.crt"], 0o600))
	require.NoError(t, verify(t, promotedDir, "old-apiserver", "serving-ca-bundle.crt", host, x509.ExtKeyUsageServerAuth))

	o.RotateCA = rotateStage
	require.ErrorContains(t, run(o, io.Discard), "still finishing")

	o.RotateCA = rotateFinish
	require.NoError(t, run(o, io.Discard))
	finished := readDir(t, o.Dir)
	bundle, err = certutil.ParseCertsPEM(finished["serving-ca-bundle.crt"])
	require.NoError(t, err)
	require.Len(t, bundle, 1)
	require.NotEqual(t, readDir(t, oldDir)["serving-ca.crt"], finished["serving-ca.crt"])
	require.NoError(t, verify(t, o.Dir, "apiserver", "serving-ca-bundle.crt", host, x509.ExtKeyUsageServerAuth))
	require.NoError(t, os.WriteFile(filepath.Join(o.Dir, "old-apiserver.crt"), readDir(t, oldDir)["apiserver.crt"], 0o600))
	require.Error(t, verify(t, o.Dir, "old-apiserver", "serving-ca-bundle.crt", host, x509.ExtKeyUsageServerAuth))
	require.NoError(t, os.Remove(filepath.Join(o.Dir, "old-apiserver.crt")))

	o.RotateCA = ""
	require.NoError(t, run(o, io.Discard))
	require.Equal(t, finished, readDir(t, o.Dir), "a plain run after a rotation changes nothing")
}
