package database

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"example.com/database-apiserver/pkg/engine"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// CredentialsRecordPrefix begins the name of every credentials record.
const CredentialsRecordPrefix = "credentials."

// CredentialsRecordName is the name of the ConfigMap, in the controller's namespace, that
// records which credentials the servers of the Database namespace/name were given:
// "credentials.<namespace>.<name>" (both DNS labels, so the name is unambiguous). Its data:
//   - CredentialsKeySecretUID: the UID of the credentials Secret the entries below are of; a
//     record of another UID (a Secret made again, a Database of the same name before) holds
//     nothing for the Secret there is now;
//   - CredentialsKeyApplication: the SHA-256 (hex) of "<username>\n<password>", the
//     application role the primary was last given;
//   - CredentialsKeyReplication: the SHA-256 (hex) of the replication password the primary's
//     replication user was last given.
//
// The record is the controller's memory of what the servers hold, so it lives where only the
// controller writes (and only it and cluster administrators, who may read the Secret itself,
// read): not on the Secret, whose annotations a tenant who may edit Secrets can add, change or
// remove, and not in the Database's status, which every user who may view the Database reads
// (a digest there could be brute-forced offline against a weak password of the user's
// choosing). A deletionPolicy Delete removes it with the Database; Retain keeps it with the
// Secret it is of, which a new Database of the same name may adopt, UID and all.
func CredentialsRecordName(namespace, name string) string {
	return CredentialsRecordPrefix + namespace + "." + name
}

// The keys of a credentials record's data (CredentialsRecordName).
const (
	CredentialsKeySecretUID   = "secret-uid"
	CredentialsKeyApplication = engine.CredentialsKeyApplication
	CredentialsKeyReplication = engine.CredentialsKeyReplication
)

// Annotations a controller that kept the record on the credentials Secret wrote there. They
// are imported into the record the first time the record holds nothing of that Secret
// (recordedCredential), so that an upgrade neither gives the servers again what they hold nor
// takes over the superuser's objects a second time; once the record holds anything of the
// Secret, they are never read again. Before that first pass, a user who may edit the Secret
// could plant them on a new Database's Secret: the controller would then take the servers to
// hold the passwords the annotations name, which only keeps that user's own clients out.
const (
	legacyApplicationAnnotation = "database.example.com/application-password-sha256"
	legacyReplicationAnnotation = "database.example.com/replication-password-sha256"
)

// legacyCredentialsAnnotations maps each record key to the annotation it was kept in.
var legacyCredentialsAnnotations = map[string]string{
	CredentialsKeyApplication: legacyApplicationAnnotation,
	CredentialsKeyReplication: legacyReplicationAnnotation,
}

// digest is the SHA-256 (hex) of value.
func digest(value []byte) string { return engine.Digest(value) }

// credentialsRecords holds the credentials records this process read or wrote, by
// "<namespace>/<name>" of their Database: the controller is their only writer (one process,
// by leader election; a namespaced controller writes only its namespace's), so what it wrote
// last is what the record holds, and a steady pass asks the API server nothing. A process
// that starts with nothing in memory reads each record once.
type credentialsRecords struct {
	mu         sync.Mutex
	byDatabase map[string]map[string]string
}

func (c *credentialsRecords) get(key string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.byDatabase[key]
	return data, ok
}

// set remembers data (nil: forgets it) as the record of key.
func (c *credentialsRecords) set(key string, data map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if data == nil {
		delete(c.byDatabase, key)
		return
	}
	if c.byDatabase == nil {
		c.byDatabase = map[string]map[string]string{}
	}
	c.byDatabase[key] = maps.Clone(data)
}

// recordedCredential returns what the credentials record holds under key for secret, and
// whether it holds anything: as this process last read or wrote it, else read from the API
// server. A record that holds nothing of secret's UID while secret carries legacy annotations
// (legacyCredentialsAnnotations) is first written with them.
func (p *pass) recordedCredential(ctx context.Context, secret *corev1.Secret, key string) (string, bool, error) {
	cacheKey := p.db.Namespace + "/" + p.db.Name
	record, ok := p.r.credentials.get(cacheKey)
	if !ok {
		cm, err := p.r.kube.CoreV1().ConfigMaps(p.r.controllerNamespace()).Get(ctx, CredentialsRecordName(p.db.Namespace, p.db.Name), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			record = map[string]string{}
		case err != nil:
			return "", false, fmt.Errorf("get the credentials record ConfigMap %s/%s: %w", p.r.controllerNamespace(), CredentialsRecordName(p.db.Namespace, p.db.Name), err)
		default:
			record = cm.Data
		}
		p.r.credentials.set(cacheKey, record)
	}
	if uid, ok := record[CredentialsKeySecretUID]; !ok || uid != string(secret.UID) {
		legacy := map[string]string{}
		importLegacy(legacy, secret)
		if len(legacy) == 0 {
			return "", false, nil
		}
		// The record holds nothing of the Secret, which a controller that kept the record on
		// it annotated: the annotations are imported, once, and never read again.
		for k, v := range legacy {
			if err := p.recordCredential(ctx, secret, k, v); err != nil {
				return "", false, err
			}
		}
		record, _ = p.r.credentials.get(cacheKey)
	}
	value, ok := record[key]
	return value, ok, nil
}

// recordCredential sets key to value in db's credentials record, of the Secret of uid,
// creating the ConfigMap (labelled managed-by, owned by nothing) when there is none. A record
// of another Secret is replaced: it holds nothing of this one. Anything else the record holds
// of the Secret is kept. A conflict is retried on a fresh copy.
func (p *pass) recordCredential(ctx context.Context, secret *corev1.Secret, key, value string) error {
	db, uid := p.db, secret.UID
	client := p.r.kube.CoreV1().ConfigMaps(p.r.controllerNamespace())
	name := CredentialsRecordName(db.Namespace, db.Name)
	entries := map[string]string{CredentialsKeySecretUID: string(uid), key: value}
	var written map[string]string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// A new record of the Secret imports its legacy annotations, then the new entry.
			data := map[string]string{}
			importLegacy(data, secret)
			maps.Copy(data, entries)
			written = data
			_, err = client.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:      name,
					Namespace: p.r.controllerNamespace(),
					Labels:    map[string]string{names.ManagedByLabel: names.ManagedByValue},
				},
				Data: data,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		update := have.DeepCopy()
		if recorded, ok := update.Data[CredentialsKeySecretUID]; !ok || recorded != string(uid) {
			update.Data = map[string]string{}
			importLegacy(update.Data, secret)
		}
		maps.Copy(update.Data, entries)
		written = update.Data
		if maps.Equal(have.Data, update.Data) {
			return nil
		}
		_, err = client.Update(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		// What the record holds now is not known: it is read again.
		p.r.credentials.set(db.Namespace+"/"+db.Name, nil)
		return fmt.Errorf("record what the primary was given in ConfigMap %s/%s: %w", p.r.controllerNamespace(), name, err)
	}
	p.r.credentials.set(db.Namespace+"/"+db.Name, written)
	return nil
}

// importLegacy adds to data, a new record of secret, what secret's legacy annotations hold
// (legacyCredentialsAnnotations): the one time they are read into the record. A value that is
// not a SHA-256 in lowercase hex, as the controller wrote them, is no digest, and is left out.
func importLegacy(data map[string]string, secret *corev1.Secret) {
	for key, annotation := range legacyCredentialsAnnotations {
		if value, ok := secret.Annotations[annotation]; ok && isDigest(value) {
			data[key] = value
		}
	}
}

// isDigest reports whether value is a SHA-256 in 64 lowercase hex digits, as digest writes it
// (and as the admission policy database-controller-credentials requires of a record).
func isDigest(value string) bool {
	if len(value) != 2*sha256.Size {
		return false
	}
	for _, c := range value {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// forgetCredentials deletes db's credentials record, once its Secret is deleted with it
// (deletionPolicy Delete). A record already gone is fine.
func (r *Reconciler) forgetCredentials(ctx context.Context, db *examplev1.Database) error {
	name := CredentialsRecordName(db.Namespace, db.Name)
	err := r.kube.CoreV1().ConfigMaps(r.controllerNamespace()).Delete(ctx, name, metav1.DeleteOptions{})
	r.credentials.set(db.Namespace+"/"+db.Name, nil)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the credentials record ConfigMap %s/%s: %w", r.controllerNamespace(), name, err)
	}
	return nil
}
