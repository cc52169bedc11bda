package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const countDatabases = corev1.ResourceName("count/databases.example.com")

// newQuotaPlugin builds the ResourceQuota plugin as our chain does: the generic initializer's
// client, informer factory and drained notification, then ExtraAdmissionInitializers. The
// fake kube-apiserver holds quotas.
func newQuotaPlugin(t *testing.T, quotas ...*corev1.ResourceQuota) (*resourcequota.QuotaAdmission, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, q := range quotas {
		_, err := client.CoreV1().ResourceQuotas(q.Namespace).Create(context.Background(), q, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	plugin, err := resourcequota.NewResourceQuota(nil, 1)
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	plugin.SetDrainedNotification(stop)
	plugin.SetExternalKubeClientSet(client)
	plugin.SetExternalKubeInformerFactory(factory)

	initializers, err := ExtraAdmissionInitializers(nil)
	require.NoError(t, err)
	admission.PluginInitializers(initializers).Initialize(plugin)
	require.NoError(t, plugin.ValidateInitialization())

	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return plugin, client
}

func databaseQuota(hard, used int64) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "databases", Namespace: "tenant"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{countDatabases: *resource.NewQuantity(hard, resource.DecimalSI)}},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{countDatabases: *resource.NewQuantity(hard, resource.DecimalSI)},
			Used: corev1.ResourceList{countDatabases: *resource.NewQuantity(used, resource.DecimalSI)},
		},
	}
}

// createAttributes are the attributes of creating Database name in namespace tenant (or of
// its subresource), with the internal object our server's admission sees.
func createAttributes(name, subresource string) admission.Attributes {
	db := &example.Database{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}}
	return admission.NewAttributesRecord(db, nil, examplev1.SchemeGroupVersion.WithKind("Database"), "tenant", name,
		examplev1.SchemeGroupVersion.WithResource("databases"), subresource, admission.Create, &metav1.CreateOptions{},
		false, &user.DefaultInfo{Name: "tenant-user"})
}

func TestQuotaConfigurationCountsDatabases(t *testing.T) {
	c := QuotaConfiguration()
	require.Empty(t, c.IgnoredResources())
	require.Len(t, c.Evaluators(), 1)
	e := c.Evaluators()[0]
	require.Equal(t, example.Resource("databases"), e.GroupResource())
	require.Equal(t, []corev1.ResourceName{countDatabases},
		e.MatchingResources([]corev1.ResourceName{countDatabases, "count/secrets", "requests.storage"}))
	usage, err := e.Usage(&example.Database{})
	require.NoError(t, err)
	require.Equal(t, corev1.ResourceList{countDatabases: *resource.NewQuantity(1, resource.DecimalSI)}, usage)
}

func TestResourceQuotaWithoutOurInitializerDoesNotInitialize(t *testing.T) {
	plugin, err := resourcequota.NewResourceQuota(nil, 1)
	require.NoError(t, err)
	plugin.SetDrainedNotification(make(chan struct{}))
	client := fake.NewClientset()
	plugin.SetExternalKubeClientSet(client)
	plugin.SetExternalKubeInformerFactory(informers.NewSharedInformerFactory(client, 0))
	require.ErrorContains(t, plugin.ValidateInitialization(), "missing quotaConfiguration")
}

func TestResourceQuotaRefusesADatabaseOverQuota(t *testing.T) {
	plugin, _ := newQuotaPlugin(t, databaseQuota(1, 1))
	err := plugin.Validate(context.Background(), createAttributes("second", ""), nil)
	require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	require.EqualError(t, err, `databases.example.com "second" is forbidden: exceeded quota: databases, `+
		`requested: count/databases.example.com=1, used: count/databases.example.com=1, limited: count/databases.example.com=1`)
}

func TestResourceQuotaChargesADatabaseUnderQuota(t *testing.T) {
	plugin, client := newQuotaPlugin(t, databaseQuota(2, 1))
	require.NoError(t, plugin.Validate(context.Background(), createAttributes("second", ""), nil))

	// The plugin writes the new usage to the quota's status before admitting the request.
	q, err := client.CoreV1().ResourceQuotas("tenant").Get(context.Background(), "databases", metav1.GetOptions{})
	require.NoError(t, err)
	used := q.Status.Used[countDatabases]
	require.Equal(t, int64(2), used.Value())
}

func TestResourceQuotaDoesNotChargeSubresources(t *testing.T) {
	plugin, _ := newQuotaPlugin(t, databaseQuota(1, 1))
	// Only a create of the resource itself is a new Database (the object count evaluator's rule).
	require.NoError(t, plugin.Validate(context.Background(), createAttributes("first", "status"), nil))
}
