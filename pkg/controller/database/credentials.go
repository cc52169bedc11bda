package database

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"example.com/database-apiserver/pkg/controller/postgres"
	"example.com/database-apiserver/pkg/names"
)

// ApplicationPasswordAnnotation is on the credentials Secret: the SHA-256 (hex) of the
// application user's name and password ("<username>\n<password>") the primary's role was last
// given, so a password (or name) changed in the Secret is given to the role too.
const ApplicationPasswordAnnotation = "database.example.com/application-password-sha256"

// syncApplicationRole gives the primary s the application role of the Secret's username and
// password (Instances.SetApplicationRole: LOGIN, no superuser rights, owner of the
// Database's database) when they are not the ones it was last given
// (ApplicationPasswordAnnotation), then records them. The first time (no annotation yet: a
// new Database, or a Secret whose username was the superuser) the role also takes over the
// superuser's objects in the database, which the clients made while they connected as the
// superuser. An engine whose image makes the application user (ApplicationUserAtInit) has
// nothing to do.
func (p *pass) syncApplicationRole(ctx context.Context, s postgres.Server) error {
	db := p.db
	if p.desired.Recipe.ApplicationUserAtInit {
		return nil
	}
	secret, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(names.SecretName(db))
	if err != nil {
		return err
	}
	user, password := secret.Data[names.SecretKeyUsername], secret.Data[names.SecretKeyPassword]
	if len(user) == 0 || len(password) == 0 || len(secret.Data[names.SecretKeySuperuserPassword]) == 0 {
		// Not migrated yet as the cache has it (ensureSecret just did): the next pass.
		return nil
	}
	if string(user) == string(secret.Data[names.SecretKeySuperuserUsername]) {
		// Edited by hand to name the superuser: its password is the superuser's own.
		return nil
	}
	digest := applicationDigest(user, password)
	recorded, had := secret.Annotations[ApplicationPasswordAnnotation]
	if recorded == digest {
		return nil
	}
	if err := p.r.options.Instances.SetApplicationRole(ctx, s, string(user), string(password), !had); err != nil {
		return err
	}
	p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Gave the primary the application role %s with the Secret's password", user)
	return recordDigest(ctx, p, secret.Name, secret.UID, ApplicationPasswordAnnotation, digest)
}

// superuser returns the superuser's name and password from secret: its superuser keys or, in
// a Secret the cache still has as written before them, its username and password where
// those were the superuser's (Recipe.SuperuserWasUsername).
func (p *pass) superuser(secret *corev1.Secret) (user, password string) {
	if len(secret.Data[names.SecretKeySuperuserPassword]) == 0 && p.desired.Recipe.SuperuserWasUsername {
		return string(secret.Data[names.SecretKeyUsername]), string(secret.Data[names.SecretKeyPassword])
	}
	return string(secret.Data[names.SecretKeySuperuserUsername]), string(secret.Data[names.SecretKeySuperuserPassword])
}

// applicationDigest is the value of ApplicationPasswordAnnotation for user and password.
func applicationDigest(user, password []byte) string {
	sum := sha256.Sum256([]byte(string(user) + "\n" + string(password)))
	return hex.EncodeToString(sum[:])
}

// recordDigest sets annotation to digest on the credentials Secret of uid named name, with a
// merge patch that carries the uid (a Secret replaced meanwhile is not annotated).
func recordDigest(ctx context.Context, p *pass, name string, uid types.UID, annotation, digest string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": uid, "annotations": map[string]string{annotation: digest},
	}})
	if err != nil {
		return err
	}
	if _, err := p.r.kube.CoreV1().Secrets(p.db.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("record on Secret %q what the primary was given: %w", name, err)
	}
	return nil
}
