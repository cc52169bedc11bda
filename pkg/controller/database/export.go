package database

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Children are the objects the Reconciler creates for a Database that has none yet.
type Children struct {
	Secret          *corev1.Secret
	HeadlessService *corev1.Service
	ClientService   *corev1.Service
	StatefulSet     *appsv1.StatefulSet
	// DataClaims are the StatefulSet's data claims, ordinals 0 to replicas-1, which the
	// Reconciler creates before the StatefulSet (with ProtectFinalizer under DoNotTerminate).
	DataClaims []*corev1.PersistentVolumeClaim
	// PodDisruptionBudget is nil when replicas is 1.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
}

// NewChildren builds the children of db exactly as the Reconciler builds them on its first
// pass (labels, owner references to db, the engine's StatefulSet), with password in the
// credentials Secret. hack/bench creates them with a plain client: the floor the controller's
// time to Ready is compared with. It fails, as Reconcile does, for a spec the catalog or the
// engine recipes cannot run.
func NewChildren(db *examplev1.Database, password string) (Children, error) {
	d, err := resolve(db)
	if err != nil {
		return Children{}, err
	}
	c := Children{
		Secret:          newSecret(db, newCredentials(db, d, password)),
		HeadlessService: newHeadlessService(db, d),
		ClientService:   newClientService(db, d),
		StatefulSet:     newStatefulSet(db, d),
	}
	for ordinal := range d.replicas {
		claim := newDataClaim(c.StatefulSet, ordinal)
		setProtection(claim, protected(db))
		c.DataClaims = append(c.DataClaims, claim)
	}
	if d.replicas > 1 {
		c.PodDisruptionBudget = newPodDisruptionBudget(db)
	}
	return c, nil
}
