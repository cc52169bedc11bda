package specs_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

var backupNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// backedUp is the example Database of replicas Pods with spec.backup, and its Desired with the
// store resolved (its Secret holding a CA when ca).
func backedUp(t *testing.T, replicas int32, ca bool) (*examplev1.Database, specs.Desired) {
	t.Helper()
	db := database(replicas)
	db.Generation = 3
	db.Spec.Backup = &examplev1.DatabaseBackupPolicy{
		Schedule: "0 3 * * *",
		S3:       examplev1.DatabaseBackupS3{Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store-keys"},
	}
	d := resolve(t, db)
	var ok bool
	d.Backup, ok = engine.ResolveBackupStore(db, ca)
	require.True(t, ok)
	return db, d
}

func backupTLSSecret(t *testing.T, db *examplev1.Database, d specs.Desired) *corev1.Secret {
	t.Helper()
	s, err := specs.BackupTLSSecret(db, d, backupNow)
	require.NoError(t, err)
	return s
}

func parseCert(t *testing.T, pem []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(pem)
	require.NoError(t, err)
	require.Len(t, certs, 1)
	return certs[0]
}

// The backup Secret's server certificate is valid for the stable name of every Pod the
// Database may ever have (scaling needs no new certificate), short and under the cluster
// domain, as a server; the client certificate is "backup"'s, as a client; both are signed by
// the Secret's CA and match their keys.
func TestBackupTLSSecretServesEveryPodAndAuthenticatesTheJobs(t *testing.T) {
	db, d := backedUp(t, 3, false)
	s := backupTLSSecret(t, db, d)
	require.Equal(t, "my-database-backup-tls", s.Name)
	require.Equal(t, "production", s.Namespace)
	require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, s.OwnerReferences)
	require.Equal(t, specs.ChildLabels(db), s.Labels)
	require.ElementsMatch(t, []string{"ca.crt", "tls.crt", "tls.key", "client.crt", "client.key"}, mapsKeys(s.Data))

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(s.Data["ca.crt"]))
	ca := parseCert(t, s.Data["ca.crt"])
	require.True(t, ca.IsCA)
	server, client := parseCert(t, s.Data["tls.crt"]), parseCert(t, s.Data["client.crt"])
	verify := func(cert *x509.Certificate, host string, usage x509.ExtKeyUsage) error {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: backupNow, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	for i := range 10 {
		for _, host := range []string{
			fmt.Sprintf("my-database-%d.my-database-headless.production.svc", i),
			fmt.Sprintf("my-database-%d.my-database-headless.production.svc.cluster.local", i),
		} {
			require.NoError(t, verify(server, host, x509.ExtKeyUsageServerAuth), host)
		}
	}
	for _, host := range []string{
		"my-database-0.my-database-headless.staging.svc.cluster.local",
		"other-0.other-headless.production.svc.cluster.local",
		"my-database.production.svc.cluster.local",
	} {
		require.Error(t, verify(server, host, x509.ExtKeyUsageServerAuth), "not %s", host)
	}
	require.Error(t, verify(server, "", x509.ExtKeyUsageClientAuth), "the server certificate is no client's")

	require.Equal(t, "backup", client.Subject.CommonName)
	require.NoError(t, verify(client, "", x509.ExtKeyUsageClientAuth))
	require.Error(t, verify(client, "", x509.ExtKeyUsageServerAuth), "the client certificate serves nothing")

	for _, pair := range [][2]string{{"tls.crt", "tls.key"}, {"client.crt", "client.key"}} {
		_, err := tls.X509KeyPair(s.Data[pair[0]], s.Data[pair[1]])
		require.NoError(t, err, pair[0])
	}
	_, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["client.key"])
	require.Error(t, err, "each certificate has its own key")

	for _, c := range []*x509.Certificate{ca, server, client} {
		require.Equal(t, backupNow.Add(specs.BackupCertificateValidity), c.NotAfter, c.Subject.CommonName)
	}

	// Another Database's Secret has another CA: its Jobs are not this one's clients.
	other := backupTLSSecret(t, db, d)
	require.Error(t, verify(parseCert(t, other.Data["client.crt"]), "", x509.ExtKeyUsageClientAuth))
}

// The server certificate names the Pods under the cluster domain the controller is given.
func TestBackupTLSSecretFollowsTheClusterDomain(t *testing.T) {
	db, d := backedUp(t, 1, false)
	d.ClusterDomain = "corp.example"
	s := backupTLSSecret(t, db, d)
	server := parseCert(t, s.Data["tls.crt"])
	require.Contains(t, server.DNSNames, "my-database-9.my-database-headless.production.svc.corp.example")
	require.Contains(t, server.DNSNames, "my-database-9.my-database-headless.production.svc")
	require.NotContains(t, server.DNSNames, "my-database-0.my-database-headless.production.svc.cluster.local")
}

func mapsKeys(m map[string][]byte) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func TestBackupTLSSecretCurrentSaysWhyASecretCannotServe(t *testing.T) {
	db, d := backedUp(t, 3, false)
	data := backupTLSSecret(t, db, d).Data
	require.Empty(t, specs.BackupTLSSecretCurrent(data, backupNow), "a fresh Secret serves")

	expiry := backupNow.Add(specs.BackupCertificateValidity)
	require.Empty(t, specs.BackupTLSSecretCurrent(data, expiry.Add(-31*24*time.Hour)), "more than 30 days before expiry")
	why := specs.BackupTLSSecretCurrent(data, expiry.Add(-29*24*time.Hour))
	require.Contains(t, why, "expires at "+expiry.Format(time.RFC3339))

	for _, key := range []string{"ca.crt", "tls.crt", "tls.key", "client.crt", "client.key"} {
		missing := copyData(data)
		delete(missing, key)
		require.Equal(t, fmt.Sprintf("it has no %q", key), specs.BackupTLSSecretCurrent(missing, backupNow))
		missing[key] = nil
		require.Equal(t, fmt.Sprintf("it has no %q", key), specs.BackupTLSSecretCurrent(missing, backupNow), "an empty value")
	}

	garbled := copyData(data)
	garbled["client.crt"] = []byte("not a certificate")
	require.Contains(t, specs.BackupTLSSecretCurrent(garbled, backupNow), `"client.crt" does not parse`)

	// Each certificate's expiry counts: a client certificate expiring alone is renewed.
	mixed := copyData(data)
	early, err := specs.BackupTLSSecret(db, d, backupNow.Add(-specs.BackupCertificateValidity+10*24*time.Hour))
	require.NoError(t, err)
	mixed["client.crt"], mixed["client.key"] = early.Data["client.crt"], early.Data["client.key"]
	require.Contains(t, specs.BackupTLSSecretCurrent(mixed, backupNow), `"client.crt" expires at`)
}

func copyData(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestBackupStoreSecretNeedsTheKeysAndReportsItsCA(t *testing.T) {
	db, d := backedUp(t, 1, false)
	caPEM := backupTLSSecret(t, db, d).Data["ca.crt"]
	keys := func(extra map[string][]byte) *corev1.Secret {
		data := map[string][]byte{"accessKeyId": []byte("AKIA"), "secretAccessKey": []byte("s3cr3t")}
		for k, v := range extra {
			if v == nil {
				delete(data, k)
			} else {
				data[k] = v
			}
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "store-keys", Namespace: "production"}, Data: data}
	}

	ca, err := specs.BackupStoreSecret(keys(nil))
	require.NoError(t, err)
	require.False(t, ca, "no ca.crt: the system's CAs")

	ca, err = specs.BackupStoreSecret(keys(map[string][]byte{"ca.crt": caPEM}))
	require.NoError(t, err)
	require.True(t, ca)

	for _, tc := range []struct {
		name   string
		change map[string][]byte
		msg    string
	}{
		{"no access key", map[string][]byte{"accessKeyId": nil}, `Secret store-keys has no "accessKeyId"`},
		{"empty access key", map[string][]byte{"accessKeyId": {}}, `Secret store-keys has no "accessKeyId"`},
		{"no secret key", map[string][]byte{"secretAccessKey": nil}, `Secret store-keys has no "secretAccessKey"`},
		{"a ca.crt that is not PEM", map[string][]byte{"ca.crt": []byte("-----BEGIN nonsense")}, `Secret store-keys: "ca.crt" holds no PEM certificate`},
		{"an empty ca.crt", map[string][]byte{"ca.crt": {}}, `Secret store-keys: "ca.crt" holds no PEM certificate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := specs.BackupStoreSecret(keys(tc.change))
			require.ErrorContains(t, err, tc.msg)
			require.False(t, ca)
		})
	}
}

func TestBackupJobNameIsALabelValueUniquePerSecond(t *testing.T) {
	db := database(1)
	// 1772366400 seconds, base 36.
	require.Equal(t, "my-database-backup-tb7yo0", specs.BackupJobName(db, backupNow))

	db.Name = strings.Repeat("a", 40) + "-" + strings.Repeat("b", 11) // 52 characters, the most a Database's name has
	require.Len(t, db.Name, 52)
	seen := map[string]bool{}
	for i := range 100 {
		at := backupNow.Add(time.Duration(i) * time.Second)
		n := specs.BackupJobName(db, at)
		require.LessOrEqual(t, len(n), 63, n)
		require.Empty(t, validation.IsDNS1123Label(n), n)
		require.Empty(t, validation.IsValidLabelValue(n), n)
		require.True(t, strings.HasPrefix(n, db.Name[:40]), n)
		require.False(t, seen[n], "a second later, another name: %s", n)
		seen[n] = true
		require.Equal(t, n, specs.BackupJobName(db, at.Add(999*time.Millisecond)), "the same second, the same name")
	}
}

// A backup Job is the Database's child, found again by BackupJobLabels, which no Service of
// the Database selects (they select names.SelectorLabels, the engine's name among them);
// its Pods pass the restricted Pod Security Standard.
func TestBackupJobIsTheDatabasesAndItsPodsNoServices(t *testing.T) {
	db, d := backedUp(t, 3, true)
	job, err := specs.BackupJob(db, d, "my-database-backup-x")
	require.NoError(t, err)
	require.Equal(t, "my-database-backup-x", job.Name)
	require.Equal(t, "production", job.Namespace)
	require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, job.OwnerReferences)
	require.True(t, *job.OwnerReferences[0].Controller)
	require.Equal(t, "3", job.Annotations[specs.BackupGenerationAnnotation], "the Database's generation")

	want := map[string]string{
		"app.kubernetes.io/instance": "my-database", "app.kubernetes.io/managed-by": "database-controller",
		"app.kubernetes.io/component": "backup", "app.kubernetes.io/part-of": "database-apiserver",
	}
	require.Equal(t, want, job.Labels)
	require.Equal(t, want, specs.BackupJobLabels(db))
	require.Equal(t, want, job.Spec.Template.Labels)
	require.NotContains(t, job.Spec.Template.Labels, names.NameLabel)
	for _, svc := range []*corev1.Service{specs.HeadlessService(db, d), specs.ClientService(db, d)} {
		require.False(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(job.Spec.Template.Labels)), svc.Name)
	}
	require.False(t, labels.SelectorFromSet(specs.StatefulSet(db, d).Spec.Selector.MatchLabels).Matches(labels.Set(job.Spec.Template.Labels)))
	name, ok := names.DatabaseOfPod(&metav1.ObjectMeta{Labels: job.Spec.Template.Labels})
	require.True(t, ok)
	require.Equal(t, "my-database", name, "a Job Pod's events reach its Database")

	require.Equal(t, ptr.To[int32](1), job.Spec.BackoffLimit)
	require.Equal(t, ptr.To[int32](86400), job.Spec.TTLSecondsAfterFinished)
	require.Equal(t, "backup", job.Spec.Template.Spec.Containers[0].Name)
	require.Empty(t, restricted(t, &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: job.Spec.Template}}))

	d.Backup = nil
	_, err = specs.BackupJob(db, d, "my-database-backup-x")
	require.Error(t, err, "no store, no Job")
}

// With a store, the Pods run the backup server beside the server, archive, and pass the
// restricted Pod Security Standard.
func TestStatefulSetOfABackedUpDatabaseHasTheBackupServer(t *testing.T) {
	db, d := backedUp(t, 3, true)
	sts := specs.StatefulSet(db, d)
	pod := sts.Spec.Template.Spec
	require.Equal(t, []string{"database", "backup"}, containerNames(pod.Containers))
	require.Contains(t, pod.Containers[0].Args, "archive_mode=on")
	require.Subset(t, volumeNames(pod.Volumes), []string{"run", "backup-tls", "backup-store-ca"})
	require.Empty(t, restricted(t, sts))

	d.Backup = nil
	plain := specs.StatefulSet(db, d).Spec.Template.Spec
	require.Equal(t, []string{"database"}, containerNames(plain.Containers), "spec.backup without a usable store: no backup server")
	require.NotContains(t, plain.Containers[0].Args, "archive_mode=on")
	require.NotContains(t, volumeNames(plain.Volumes), "backup-tls")
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// spec.backup removed: SyncStatefulSet takes the backup server, the archiving and the backup
// volumes out of the template, and keeps the volumes of others it does not know.
func TestSyncStatefulSetRemovesTheBackupServerOnceUnset(t *testing.T) {
	db, d := backedUp(t, 3, true)
	have := specs.StatefulSet(db, d)
	apiServerDefaults(have)
	foreign := corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	have.Spec.Template.Spec.Volumes = append(have.Spec.Template.Spec.Volumes, foreign)

	d.Backup = nil
	want := specs.StatefulSet(db, d)
	specs.SyncStatefulSet(have, want)
	pod := have.Spec.Template.Spec
	require.Equal(t, []string{"database"}, containerNames(pod.Containers))
	require.Equal(t, append(volumeNames(want.Spec.Template.Spec.Volumes), "extra"), volumeNames(pod.Volumes))
	require.Equal(t, want.Spec.Template.Spec.Containers[0].Args, pod.Containers[0].Args)
	require.Equal(t, want.Spec.Template.Spec.Containers[0].Env, pod.Containers[0].Env)
	require.Equal(t, want.Spec.Template.Spec.Containers[0].VolumeMounts, pod.Containers[0].VolumeMounts)
	require.Equal(t, corev1.PullIfNotPresent, pod.Containers[0].ImagePullPolicy, "the server's defaults are kept")

	// And set again: the backup server and its volumes come back, in the recipe's order.
	db, d = backedUp(t, 3, false)
	want = specs.StatefulSet(db, d)
	specs.SyncStatefulSet(have, want)
	pod = have.Spec.Template.Spec
	require.Equal(t, []string{"database", "backup"}, containerNames(pod.Containers), "the database container stays first, the default of kubectl logs and exec")
	require.Equal(t, append(volumeNames(want.Spec.Template.Spec.Volumes[:2]), "extra", "run", "backup-tls"), volumeNames(pod.Volumes))
	require.NotContains(t, volumeNames(pod.Volumes), "backup-store-ca", "the store's Secret lost its CA")
}

// With spec.backup, the NetworkPolicy also admits the Database's backup Jobs' Pods, on the
// backup port only; without, it has no such rule.
func TestNetworkPolicyAdmitsTheBackupJobsOnTheBackupPortOnly(t *testing.T) {
	db, d := backedUp(t, 3, false)
	np := specs.NetworkPolicy(db, d, "database-system")
	require.Len(t, np.Spec.Ingress, 2, "the members' and controller's rule, and the backup Jobs'")
	rule := np.Spec.Ingress[1]
	require.Equal(t, []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: specs.BackupJobLabels(db)}}}, rule.From)
	require.Equal(t, []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8432))}}, rule.Ports)
	for _, r := range np.Spec.Ingress[:1] {
		for _, p := range r.Ports {
			require.NotEqual(t, int32(8432), p.Port.IntVal, "no one else reaches the backup port")
		}
	}

	d.Backup = nil
	require.Len(t, specs.NetworkPolicy(db, d, "database-system").Spec.Ingress, 1)
}
