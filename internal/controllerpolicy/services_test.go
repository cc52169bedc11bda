package controllerpolicy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"
)

var (
	services   = corev1.SchemeGroupVersion.WithResource("services")
	serviceKnd = corev1.SchemeGroupVersion.WithKind("Service")
)

// The controller's Services are admitted; one of another type, or claiming an external IP
// (which kube-proxy would route to the Service's Pods whoever else has the address), is
// refused, on create and update. Clusters that run kube-apiserver's DenyServiceExternalIPs
// plugin, as the local cluster does, refuse the latter before this policy, for everyone.
func TestServicesAreClusterIPWithoutExternalIPs(t *testing.T) {
	policies := loadPolicies(t)
	for _, e := range engines {
		built, err := specs.NewChildren(database(e, catalog.Lines(e)[0], 3), "password", "database-system")
		require.NoError(t, err)
		for _, svc := range []*corev1.Service{built.ClientService, built.HeadlessService, built.ReadService} {
			require.NotNil(t, svc, e)
			require.Empty(t, denials(t, policies, write(controllerUser, serviceKnd, services, svc, nil)), "%s %s", e, svc.Name)
			require.Empty(t, denials(t, policies, write(controllerUser, serviceKnd, services, svc, svc)), "%s %s", e, svc.Name)
		}
	}
	built, err := specs.NewChildren(database(examplev1.EnginePostgreSQL, "16", 3), "password", "database-system")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		change func(*corev1.Service)
		want   string
	}{
		{"of type NodePort", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, "type NodePort is not ClusterIP"},
		{"of type LoadBalancer", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, "type LoadBalancer is not ClusterIP"},
		{"with an external IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.0.0.209"} }, "it sets externalIPs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := built.ClientService.DeepCopy()
			tc.change(svc)
			for _, old := range []k8sruntime.Object{nil, built.ClientService} {
				requireDenied(t, policies, write(controllerUser, serviceKnd, services, svc, old), "database-controller-services", tc.want)
			}
		})
	}
}
