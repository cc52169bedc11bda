package database

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"example.com/database-apiserver/pkg/controller/postgres"
	"example.com/database-apiserver/pkg/names"
)

// syncApplicationRole gives the primary s the application role of the Secret's username and
// password (Instances.SetApplicationRole: LOGIN, no superuser rights, owner of the
// Database's database) when they are not the ones it was last given (the credentials record,
// CredentialsKeyApplication), then records them. The first time (nothing recorded yet: a
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
	recorded, had, err := p.recordedCredential(ctx, secret, CredentialsKeyApplication)
	if err != nil {
		return err
	}
	if had && recorded == digest {
		return nil
	}
	if err := p.r.options.Instances.SetApplicationRole(ctx, s, string(user), string(password), !had); err != nil {
		return err
	}
	p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Gave the primary the application role %s with the Secret's password", user)
	return p.recordCredential(ctx, secret, CredentialsKeyApplication, digest)
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

// applicationDigest is the credentials record's CredentialsKeyApplication for user and
// password.
func applicationDigest(user, password []byte) string {
	return digest([]byte(string(user) + "\n" + string(password)))
}
