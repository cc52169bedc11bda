//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/internal/pki"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// objectStore is a real S3-compatible object store on the real node: SeaweedFS's `weed mini`
// (the seaweedfs image hack/build-node-images.sh builds) in the Pod "s3" of a namespace,
// behind the Service "s3" on port 443. It serves HTTPS only, with a certificate for the
// Service's names signed by a CA of its own, and knows one identity, allowed to read, list,
// write and tag its one bucket.
type objectStore struct {
	// Host is the Service's fully qualified name, s3.<namespace>.svc.cluster.local: a name the
	// certificate covers (S3 clients such as pgBackRest verify a name, never an address).
	Host                         string
	Port                         int
	Bucket, AccessKey, SecretKey string
	// CA is the PEM of the CA that signed the store's certificate.
	CA []byte
}

// objectStoreImage is the seaweedfs image's tag (bin/images/seaweedfs.tags).
func objectStoreImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "bin", "images", "seaweedfs.tags"))
	require.NoError(t, err, "no seaweedfs image: run hack/build-node-images.sh (make node)")
	return strings.TrimSpace(string(b))
}

// startObjectStore runs an objectStore in ns and waits until its S3 port accepts connections.
func startObjectStore(t *testing.T, ns string) objectStore {
	t.Helper()
	requireRealNode(t)
	s := objectStore{
		Host: "s3." + ns + ".svc.cluster.local", Port: 443,
		Bucket: "backups", AccessKey: "e2e-backups", SecretKey: "e2e-backups-" + ns,
	}
	ca, err := pki.NewCA(pki.Template{CommonName: "e2e object store CA", Validity: 24 * time.Hour})
	require.NoError(t, err)
	serving, err := ca.Sign(pki.Template{
		CommonName: s.Host, DNSNames: []string{"s3", "s3." + ns, "s3." + ns + ".svc", s.Host},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Validity: 24 * time.Hour,
	})
	require.NoError(t, err)
	key, err := serving.KeyPEM()
	require.NoError(t, err)
	s.CA = ca.CertPEM()
	// SeaweedFS's S3 identities (its -s3.config): the actions are per bucket.
	identities := fmt.Sprintf(`{"identities": [{"name": %q, "credentials": [{"accessKey": %q, "secretKey": %q}],
  "actions": ["Read:%[4]s", "List:%[4]s", "Write:%[4]s", "Tagging:%[4]s"]}]}`, s.AccessKey, s.AccessKey, s.SecretKey, s.Bucket)
	_, err = kube(t).CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3"},
		Data:       map[string][]byte{"tls.crt": serving.CertPEM(), "tls.key": key, "s3.json": []byte(identities)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubectlIn(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: s3
  namespace: %[1]s
  labels: {app: s3}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    fsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: weed
    image: %[2]s
    args: [mini, -dir=/data, -ip=127.0.0.1, -ip.bind=0.0.0.0, -master.telemetry=false,
      -s3.port=8333, -s3.port.iceberg=0, -s3.port.lance=0, -s3.cert.file=/etc/s3/tls.crt,
      -s3.key.file=/etc/s3/tls.key, -s3.config=/etc/s3/s3.json, -bucket=%[3]s, -webdav=false,
      -admin.ui=false, -admin.port.legacy=0]
    ports: [{name: s3, containerPort: 8333}]
    readinessProbe: {tcpSocket: {port: 8333}, periodSeconds: 1}
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
    volumeMounts:
    - {name: config, mountPath: /etc/s3, readOnly: true}
    - {name: data, mountPath: /data}
    - {name: tmp, mountPath: /tmp}
  volumes:
  - {name: config, secret: {secretName: s3}}
  - {name: data, emptyDir: {}}
  - {name: tmp, emptyDir: {}}
---
apiVersion: v1
kind: Service
metadata:
  name: s3
  namespace: %[1]s
spec:
  selector: {app: s3}
  ports: [{name: https, port: 443, targetPort: s3}]
`, ns, objectStoreImage(t), s.Bucket), "apply", "-f", "-")
	eventually(t, realPodTimeout, func() error {
		pod, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), "s3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("the object store's Pod is %s: %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	return s
}

// pgbackrestEnv is the environment (flow-style entries) that points pgBackRest's first
// repository at the store, verifying its certificate against the CA in the file caFile.
func (s objectStore) pgbackrestEnv(caFile string) []string {
	env := map[string]string{
		"PGBACKREST_REPO1_TYPE":            "s3",
		"PGBACKREST_REPO1_S3_ENDPOINT":     s.Host,
		"PGBACKREST_REPO1_STORAGE_PORT":    fmt.Sprint(s.Port),
		"PGBACKREST_REPO1_S3_BUCKET":       s.Bucket,
		"PGBACKREST_REPO1_S3_REGION":       "us-east-1",
		"PGBACKREST_REPO1_S3_URI_STYLE":    "path",
		"PGBACKREST_REPO1_S3_KEY":          s.AccessKey,
		"PGBACKREST_REPO1_S3_KEY_SECRET":   s.SecretKey,
		"PGBACKREST_REPO1_STORAGE_CA_FILE": caFile,
		"PGBACKREST_LOCK_PATH":             "/tmp/pgbackrest",
		"PGBACKREST_LOG_LEVEL_FILE":        "off",
	}
	var out []string
	for k, v := range env {
		out = append(out, fmt.Sprintf("{name: %s, value: %q}", k, v))
	}
	return out
}

// TestRealObjectStoreServesPgBackRest starts the object store the backup tests use and
// proves the parts they build on: pgBackRest, in the PostgreSQL images, reaches the store
// through its Service's name, verifies its certificate, writes and lists its bucket; with
// another CA it refuses the store.
func TestRealObjectStoreServesPgBackRest(t *testing.T) {
	requireRealNode(t)
	ns := restrictedNamespace(t, "e2e-object-store")
	store := startObjectStore(t, ns)
	for _, img := range []string{clientImage(examplev1.EnginePostgreSQL), "postgres:14.5"} {
		// repo-put is pgBackRest's own way to store a file in a repository (its backups and
		// archive-push write through the same storage layer).
		name := "pgbackrest-" + strings.NewReplacer(":", "-", ".", "-").Replace(img)
		script := `set -e; printf '%s' "$CA" >/tmp/ca.crt; pgbackrest version;
echo "written by $HOSTNAME" | pgbackrest repo-put probe/` + name + `; pgbackrest repo-ls --recurse probe`
		var phase corev1.PodPhase
		var out string
		// The gateway listens before the filer behind it has made the bucket: a few retries.
		for i := 0; ; i++ {
			pod := clientPod(ns, fmt.Sprintf("%s-%d", name, i), img, script,
				append(store.pgbackrestEnv("/tmp/ca.crt"), fmt.Sprintf("{name: CA, value: %q}", store.CA))...)
			phase, out = runPod(t, ns, fmt.Sprintf("%s-%d", name, i), pod)
			if phase == corev1.PodSucceeded || i == 5 {
				break
			}
			time.Sleep(2 * time.Second)
		}
		require.Equal(t, corev1.PodSucceeded, phase, out)
		require.Contains(t, out, "pgBackRest 2.", out)
		require.Contains(t, out, name, out)
	}

	// A client that trusts another CA refuses the store's certificate.
	other, err := pki.NewCA(pki.Template{CommonName: "another CA", Validity: time.Hour})
	require.NoError(t, err)
	pod := clientPod(ns, "pgbackrest-other-ca", clientImage(examplev1.EnginePostgreSQL),
		`printf '%s' "$CA" >/tmp/ca.crt; exec pgbackrest --io-timeout=5 repo-ls`,
		append(store.pgbackrestEnv("/tmp/ca.crt"), fmt.Sprintf("{name: CA, value: %q}", other.CertPEM()))...)
	phase, out := runPod(t, ns, "pgbackrest-other-ca", pod)
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "unable to verify certificate presented by '"+store.Host+":443'", out)
}
