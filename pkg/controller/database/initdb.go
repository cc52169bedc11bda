package database

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"example.com/database-apiserver/pkg/controller/specs"
)

// ensureInitConfigMap makes the initialisation ConfigMap (specs.InitConfigMap) exist with
// our scripts, before the StatefulSet whose Pods mount it: the image runs them once, when it
// initialises an empty data directory, so a Pod started without them would never get the
// application user.
func (p *pass) ensureInitConfigMap(ctx context.Context) (*halt, error) {
	db := p.db
	want := specs.InitConfigMap(db, p.desired)
	_, h, err := ensureChild(ctx, p, childOps[*corev1.ConfigMap]{
		kind:   "ConfigMap",
		name:   want.Name,
		client: p.r.kube.CoreV1().ConfigMaps(db.Namespace),
		cached: p.r.listers.ConfigMaps.ConfigMaps(db.Namespace).Get,
		build:  func() *corev1.ConfigMap { return want },
		sync:   func(have *corev1.ConfigMap) *halt { specs.SyncInitConfigMap(have, want); return nil },
	})
	return h, err
}
