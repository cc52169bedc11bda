package database

import (
	corev1 "k8s.io/api/core/v1"

	"example.com/database-apiserver/pkg/names"
)

// superuser returns the superuser's name and password from secret: its superuser keys or, in
// a Secret the cache still has as written before them, its username and password where
// those were the superuser's (Recipe.SuperuserWasUsername).
func (p *pass) superuser(secret *corev1.Secret) (user, password string) {
	if len(secret.Data[names.SecretKeySuperuserPassword]) == 0 && p.desired.Recipe.SuperuserWasUsername {
		return string(secret.Data[names.SecretKeyUsername]), string(secret.Data[names.SecretKeyPassword])
	}
	return string(secret.Data[names.SecretKeySuperuserUsername]), string(secret.Data[names.SecretKeySuperuserPassword])
}
