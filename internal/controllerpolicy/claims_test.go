package controllerpolicy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
)

var (
	claims = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	claim  = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
)

// The data claim the controller creates, and its updates once bound (a larger request, an
// annotation), are admitted; a claim that would bind, fill or pick a volume of its own choice
// is refused, created or updated.
func TestDataClaimsAskForANewVolume(t *testing.T) {
	policies := loadPolicies(t)
	built, err := specs.NewChildren(database(examplev1.EnginePostgreSQL, "16", 3), "password", "database-system")
	require.NoError(t, err)
	created := specs.DataClaim(built.StatefulSet, 1)
	require.Empty(t, denials(t, policies, write(controllerUser, claim, claims, created, nil)))

	// As kube-apiserver stores it once the default StorageClass is set and the claim bound.
	bound := created.DeepCopy()
	bound.Spec.StorageClassName = ptr.To("standard")
	bound.Spec.VolumeName = "pvc-1"
	grown := bound.DeepCopy()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("200Gi")
	grown.Annotations = map[string]string{"database.example.com/retained-from": "production/my-database"}
	require.Empty(t, denials(t, policies, write(controllerUser, claim, claims, grown, bound)))

	const policy = "database-controller-claims"
	for _, tc := range []struct {
		name   string
		change func(*corev1.PersistentVolumeClaim)
		want   string
	}{
		{"binding an existing volume", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "someone-elses" }, "it names the volume someone-elses"},
		{"filled from another claim", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "theirs"}
		}, "it has a dataSource or dataSourceRef"},
		{"of the empty StorageClass", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }, `its storageClassName "" would bind any Available volume`},
	} {
		t.Run("created "+tc.name, func(t *testing.T) {
			c := created.DeepCopy()
			tc.change(c)
			requireDenied(t, policies, write(controllerUser, claim, claims, c, nil), policy, tc.want)
		})
	}

	// A claim not bound yet may be given a volumeName once: not by the controller.
	pending := created.DeepCopy()
	pending.Spec.StorageClassName = ptr.To("standard")
	for _, tc := range []struct {
		name   string
		change func(*corev1.PersistentVolumeClaim)
		want   string
	}{
		{"given a volume while pending", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "someone-elses" }, "it names the volume someone-elses"},
		{"moved to another StorageClass", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }, "it changes storageClassName"},
		{"given a data source", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "theirs"}
		}, "it has a dataSource or dataSourceRef"},
	} {
		t.Run("updated "+tc.name, func(t *testing.T) {
			c := pending.DeepCopy()
			tc.change(c)
			requireDenied(t, policies, write(controllerUser, claim, claims, c, pending), policy, tc.want)
		})
	}
}
