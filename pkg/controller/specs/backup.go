package specs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/pki"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// BackupCertificateValidity is how long the certificates of a Database's backup Secret are
// valid. BackupTLSSecret makes them anew once they are within BackupCertificateRenewal of
// expiring (SyncBackupTLSSecret), and the Pods are restarted to read them.
const (
	BackupCertificateValidity = 5 * 365 * 24 * time.Hour
	BackupCertificateRenewal  = 30 * 24 * time.Hour
)

// BackupTLSSecret is the Secret names.BackupTLSSecretName of a Database with spec.backup: a CA
// made for it alone (engine.BackupTLSKeyCA), the backup server's certificate and key for the
// stable names of every Pod the Database may have (engine.BackupTLSKeyServerCert, ...Key:
// "<name>-<ordinal>.<name>-headless.<namespace>.svc" and the same under the cluster domain,
// for each ordinal up to the most replicas, so scaling needs no new certificate), and the
// backup Jobs' client certificate of common name engine.BackupClientCommonName. Both sides
// verify the other by the CA. The CA's key is not kept: nothing else is ever signed by it,
// and new certificates come with a new CA.
func BackupTLSSecret(db *examplev1.Database, d Desired, now time.Time) (*corev1.Secret, error) {
	ca, err := pki.NewCA(pki.Template{CommonName: db.Namespace + "/" + db.Name + " backup CA", Validity: BackupCertificateValidity, Now: now})
	if err != nil {
		return nil, err
	}
	var hosts []string
	for ordinal := range int32(engine.MaxReplicas) {
		pod := PodName(db, ordinal)
		hosts = append(hosts, pod+"."+names.HeadlessServiceName(db)+"."+db.Namespace+".svc", names.PodHost(db, d.ClusterDomain, pod))
	}
	server, err := ca.Sign(pki.Template{CommonName: db.Name, DNSNames: hosts, Validity: BackupCertificateValidity, Now: now,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, err
	}
	client, err := ca.Sign(pki.Template{CommonName: engine.BackupClientCommonName, Validity: BackupCertificateValidity, Now: now,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	serverKey, err := server.KeyPEM()
	if err != nil {
		return nil, err
	}
	clientKey, err := client.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: objectMeta(db, names.BackupTLSSecretName(db), ChildLabels(db)),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			engine.BackupTLSKeyCA:         ca.CertPEM(),
			engine.BackupTLSKeyServerCert: server.CertPEM(),
			engine.BackupTLSKeyServerKey:  serverKey,
			engine.BackupTLSKeyClientCert: client.CertPEM(),
			engine.BackupTLSKeyClientKey:  clientKey,
		},
	}, nil
}

// BackupTLSSecretCurrent says why the Secret's data cannot serve db's backups any longer
// ("" when it can): a key missing, a certificate that does not parse, or one within
// BackupCertificateRenewal of expiring at now.
func BackupTLSSecretCurrent(data map[string][]byte, now time.Time) string {
	for _, key := range []string{engine.BackupTLSKeyCA, engine.BackupTLSKeyServerCert, engine.BackupTLSKeyServerKey,
		engine.BackupTLSKeyClientCert, engine.BackupTLSKeyClientKey} {
		if len(data[key]) == 0 {
			return fmt.Sprintf("it has no %q", key)
		}
	}
	for _, key := range []string{engine.BackupTLSKeyCA, engine.BackupTLSKeyServerCert, engine.BackupTLSKeyClientCert} {
		certs, err := certutil.ParseCertsPEM(data[key])
		if err != nil {
			return fmt.Sprintf("%q does not parse: %v", key, err)
		}
		if expiry := certs[0].NotAfter; now.Add(BackupCertificateRenewal).After(expiry) {
			return fmt.Sprintf("%q expires at %s", key, expiry.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

// BackupStoreSecret checks the store's Secret of spec.backup.s3.secretName: it must hold
// examplev1.BackupSecretKeyAccessKeyID and examplev1.BackupSecretKeySecretAccessKey, and may
// hold examplev1.BackupSecretKeyCA (PEM certificates), which it reports.
func BackupStoreSecret(secret *corev1.Secret) (ca bool, err error) {
	for _, key := range []string{examplev1.BackupSecretKeyAccessKeyID, examplev1.BackupSecretKeySecretAccessKey} {
		if len(secret.Data[key]) == 0 {
			return false, fmt.Errorf("Secret %s has no %q", secret.Name, key)
		}
	}
	pem, ok := secret.Data[examplev1.BackupSecretKeyCA]
	if !ok {
		return false, nil
	}
	if _, err := certutil.ParseCertsPEM(pem); err != nil {
		return false, fmt.Errorf("Secret %s: %q holds no PEM certificate: %w", secret.Name, examplev1.BackupSecretKeyCA, err)
	}
	return true, nil
}

// Labels of a backup Job and its Pods: the Database's instance, component BackupComponent,
// part-of and managed-by, but not the engine's name label, so no Service of the Database
// selects its Pods.
const BackupComponent = "backup"

// BackupJobLabels are the labels of db's backup Jobs and their Pods.
func BackupJobLabels(db *examplev1.Database) map[string]string {
	l := ChildLabels(db)
	delete(l, names.NameLabel)
	l[componentLabel] = BackupComponent
	return l
}

// BackupJobName is the name of db's backup Job started at t: "<name>-backup-<t in Unix
// seconds, base 36>", the name shortened to keep it within 63 characters (the Job
// controller labels its Pods with it).
func BackupJobName(db *examplev1.Database, t time.Time) string {
	suffix := "-backup-" + strconv.FormatInt(t.Unix(), 36)
	name := db.Name
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// BackupGenerationAnnotation, on a backup Job, is the Database's metadata.generation when
// the Job was made: a failed backup is tried again at once for a newer spec.
const BackupGenerationAnnotation = "database.example.com/generation"

// BackupJobTTL is how long a finished backup Job is kept (ttlSecondsAfterFinished) for its
// logs; status.backup records what it did.
const BackupJobTTL = 24 * time.Hour

// BackupJob is db's backup Job named name: the engine's BackupJob Pod, labelled
// BackupJobLabels, tried twice (backoffLimit 1), kept BackupJobTTL once finished, and
// controlled by db.
func BackupJob(db *examplev1.Database, d Desired, name string) (*batchv1.Job, error) {
	b, ok := d.Engine().(engine.Backups)
	if !ok || d.Backup == nil {
		return nil, errors.New("the Database is not backed up")
	}
	meta := objectMeta(db, name, BackupJobLabels(db))
	meta.Annotations = map[string]string{BackupGenerationAnnotation: strconv.FormatInt(db.Generation, 10)}
	return &batchv1.Job{
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](1),
			TTLSecondsAfterFinished: ptr.To(int32(BackupJobTTL / time.Second)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: BackupJobLabels(db)},
				Spec:       b.BackupJob(db, d),
			},
		},
	}, nil
}
