package specs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine/postgresql"
)

// A restart in status.restart stamps the Pod template with its time to the microsecond;
// syncing a StatefulSet sets the stamp and keeps other annotations (kubectl's).
func TestARestartStampsThePodTemplate(t *testing.T) {
	db := database(3)
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	require.NotContains(t, specs.StatefulSet(db, d).Spec.Template.Annotations, specs.RestartedAtAnnotation, "no restart asked for")
	hba := specs.StatefulSet(db, d).Spec.Template.Annotations[postgresql.HBAAnnotation]

	have := specs.StatefulSet(db, d)
	have.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-03-01T12:00:00Z"}
	db.Status.Restart = &examplev1.DatabaseRestartStatus{
		RequestedBy: "alice",
		RequestedAt: metav1.NewMicroTime(time.Date(2026, time.March, 2, 8, 30, 0, 5000, time.UTC).Truncate(time.Microsecond)),
	}
	want := specs.StatefulSet(db, d)
	require.Equal(t, map[string]string{specs.RestartedAtAnnotation: "2026-03-02T08:30:00.000005Z", postgresql.HBAAnnotation: hba},
		want.Spec.Template.Annotations)

	specs.SyncStatefulSet(have, want)
	require.Equal(t, map[string]string{
		"kubectl.kubernetes.io/restartedAt": "2026-03-01T12:00:00Z",
		specs.RestartedAtAnnotation:         "2026-03-02T08:30:00.000005Z",
		postgresql.HBAAnnotation:            hba,
	}, have.Spec.Template.Annotations)
}
