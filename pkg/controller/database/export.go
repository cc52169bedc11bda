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
	// PodDisruptionBudget is nil when replicas is 1.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
}

// NewChildren builds the children of db exactly as the Reconciler builds them on its first
// pass (labels, owner references to db, the engine's StatefulSet), with password in the
// credentials Secret, but for the data claims, which a plain client leaves to the
// StatefulSet controller. hack/bench creates them with a plain client: the floor the
// controller's time to Ready is compared with. It fails, as Reconcile does, for a spec the catalog or the
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
	if d.replicas > 1 {
		c.PodDisruptionBudget = newPodDisruptionBudget(db)
	}
	return c, nil
}
