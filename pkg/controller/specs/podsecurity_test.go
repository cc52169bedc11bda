package specs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"
)

// restricted evaluates the Pod template of sts against the latest "restricted" level of the
// Pod Security Standards with the checks kube-apiserver's PodSecurity admission runs, and
// returns what it forbids ("" when the Pods would be admitted).
func restricted(t *testing.T, sts *appsv1.StatefulSet) string {
	t.Helper()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	tmpl := sts.Spec.Template
	result := policy.AggregateCheckResults(evaluator.EvaluatePod(
		api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
	if result.Allowed {
		return ""
	}
	return result.ForbiddenReason() + ": " + result.ForbiddenDetail()
}

// catalogVersions is every version spec.version may name for engine: each line, and each of
// its published releases.
func catalogVersions(engine examplev1.Engine) []string {
	var out []string
	for _, line := range catalog.Lines(engine) {
		out = append(out, line)
		out = append(out, catalog.Releases(engine, line)...)
	}
	return out
}

func TestPodsPassTheRestrictedPodSecurityStandardForEveryCatalogVersion(t *testing.T) {
	for _, e := range []examplev1.Engine{examplev1.EnginePostgreSQL, examplev1.EngineMySQL, examplev1.EngineMongoDB} {
		versions := catalogVersions(e)
		require.NotEmpty(t, versions, e)
		for _, version := range versions {
			// One replica, and three: a replicating engine's Pods have an init container.
			for _, replicas := range []int32{1, 3} {
				db := database(replicas)
				db.Spec.Engine, db.Spec.Version = e, version
				c, err := specs.NewChildren(db, "secret", "database-system")
				require.NoError(t, err, "%s %s", e, version)
				require.Empty(t, restricted(t, c.StatefulSet), "%s %s, %d replicas", e, version, replicas)
			}
		}
	}
}

// A StatefulSet written without the restricted settings (as an older controller wrote it) is
// brought to them by SyncStatefulSet, and a version update keeps them.
func TestSyncStatefulSetBringsAndKeepsTheRestrictedSecurityContext(t *testing.T) {
	for _, replicas := range []int32{1, 3} {
		t.Run(fmt.Sprint(replicas, " replicas"), func(t *testing.T) {
			db := database(replicas)
			old, err := specs.NewChildren(db, "secret", "database-system")
			require.NoError(t, err)
			have := old.StatefulSet.DeepCopy()
			pod := &have.Spec.Template.Spec
			pod.SecurityContext.RunAsNonRoot, pod.SecurityContext.RunAsUser, pod.SecurityContext.SeccompProfile = nil, nil, nil
			for i := range pod.Containers {
				pod.Containers[i].SecurityContext = nil
			}
			for i := range pod.InitContainers {
				pod.InitContainers[i].SecurityContext = nil
			}
			require.NotEmpty(t, restricted(t, have), "the checker refuses a template without the settings")

			db.Spec.Version = "14"
			want, err := specs.NewChildren(db, "secret", "database-system")
			require.NoError(t, err)
			specs.SyncStatefulSet(have, want.StatefulSet)
			require.Empty(t, restricted(t, have))
			require.Equal(t, want.StatefulSet.Spec.Template.Spec.SecurityContext, have.Spec.Template.Spec.SecurityContext)
			require.Equal(t, ptr.To(int64(999)), have.Spec.Template.Spec.SecurityContext.RunAsUser)
		})
	}
}
