//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServicesTakeNoExternalIP: a tenant with edit in its namespace cannot give a Service an
// external IP, here the ClusterIP of a Database's client Service in another namespace: kube-proxy
// would send that address's traffic, the Database's clients' and standbys' connections and
// passwords included, to the tenant's Pods. kube-apiserver's DenyServiceExternalIPs admission
// plugin refuses it, which the local cluster enables and docs/install.md requires.
func TestServicesTakeNoExternalIP(t *testing.T) {
	applyExamples(t)
	victim := kubectl(t, "get", "service", "my-database", "-n", "production", "-o", "jsonpath={.spec.clusterIP}")
	require.NotEmpty(t, victim)
	ns := restrictedNamespace(t, "e2e-external-ips")
	tenant, err := cluster.UserKubeconfig("e2e-external-ips-tenant")
	require.NoError(t, err)
	kubectl(t, "create", "rolebinding", "tenant", "-n", ns, "--clusterrole=edit", "--user=e2e-external-ips-tenant")
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hijack, namespace: %s}
spec:
  selector: {app: fake-postgres}
  ports: [{port: 5432}]
  externalIPs: [%s]
`, ns, victim)
	eventually(t, 30*time.Second, func() error {
		out, errOut, err := kubectlAs(tenant, "", "auth", "can-i", "create", "services", "-n", ns)
		if err != nil {
			return fmt.Errorf("the binding is not in effect yet: %q %v %s", out, err, errOut)
		}
		return nil
	})
	_, errOut, err := kubectlAs(tenant, manifest, "create", "-f", "-")
	require.Error(t, err, "a Service with the external IP %s was created", victim)
	require.Contains(t, errOut, "Use of external IPs is denied by admission control")
	// Without it, the same Service is created: the refusal is of the external IP alone.
	_, errOut, err = kubectlAs(tenant, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: plain, namespace: %s}
spec:
  selector: {app: fake-postgres}
  ports: [{port: 5432}]
`, ns), "create", "-f", "-")
	require.NoError(t, err, errOut)
}
