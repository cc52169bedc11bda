//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// getStatus sends GET url with client, with the bearer token when not empty, and returns the
// status code and body.
func getStatus(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestControllerMetricsNeedAuthorization: the controller's /metrics answers only callers that
// kube-apiserver authenticates (a client certificate of the cluster's client CA, or a
// ServiceAccount token it reviews) and authorizes for get on the non-resource URL /metrics,
// which the ClusterRole database-metrics-reader grants. Everyone else is refused: 401 for a
// token kube-apiserver does not know, 403 for an anonymous request and for a user without the
// role. The probes stay open, and plain HTTP is not served. Every request verifies the
// controller's serving certificate against the local cluster's serving CA.
func TestControllerMetricsNeedAuthorization(t *testing.T) {
	metrics := cluster.ControllerURL + "/metrics"
	anonymous := controllerClient(t, "")

	t.Run("anonymous", func(t *testing.T) {
		code, body := getStatus(t, anonymous, metrics, "")
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, `User \"system:anonymous\" cannot get path \"/metrics\"`)
		for _, path := range []string{"/healthz", "/readyz"} {
			code, body := getStatus(t, anonymous, cluster.ControllerURL+path, "")
			require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		}
	})

	t.Run("unknown token", func(t *testing.T) {
		code, body := getStatus(t, anonymous, metrics, "not-a-token")
		require.Equal(t, http.StatusUnauthorized, code, body)
	})

	t.Run("plain HTTP", func(t *testing.T) {
		code, _ := getStatus(t, &http.Client{Timeout: 10 * time.Second},
			"http://"+strings.TrimPrefix(cluster.ControllerURL, "https://")+"/metrics", "")
		require.Equal(t, http.StatusBadRequest, code)
	})

	t.Run("certificate without the role", func(t *testing.T) {
		code, body := getStatus(t, controllerClient(t, "e2e-metrics-nobody"), metrics, "")
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, `User \"e2e-metrics-nobody\" cannot get path \"/metrics\"`)
	})

	t.Run("certificate bound to database-metrics-reader", func(t *testing.T) {
		kubectl(t, "create", "clusterrolebinding", "e2e-metrics-scraper",
			"--clusterrole=database-metrics-reader", "--user=e2e-metrics-scraper")
		t.Cleanup(func() { kubectlAs(cluster.KubeconfigPath, "", "delete", "clusterrolebinding", "e2e-metrics-scraper") })
		scraper := controllerClient(t, "e2e-metrics-scraper")
		code, body := getStatus(t, scraper, metrics, "")
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `workqueue_adds_total{name="database-controller"}`)
		// The role is /metrics only: profiles and other paths stay forbidden.
		code, body = getStatus(t, scraper, cluster.ControllerURL+"/debug/pprof/", "")
		require.Equal(t, http.StatusForbidden, code, body)
	})

	t.Run("ServiceAccount token", func(t *testing.T) {
		ns := testNamespace(t, "e2e-metrics")
		kubectl(t, "create", "serviceaccount", "scraper", "-n", ns)
		kubectl(t, "create", "serviceaccount", "bystander", "-n", ns)
		kubectl(t, "create", "clusterrolebinding", "e2e-metrics-sa-scraper",
			"--clusterrole=database-metrics-reader", "--serviceaccount="+ns+":scraper")
		t.Cleanup(func() {
			kubectlAs(cluster.KubeconfigPath, "", "delete", "clusterrolebinding", "e2e-metrics-sa-scraper")
		})
		token := func(sa string) string { return strings.TrimSpace(kubectl(t, "create", "token", sa, "-n", ns)) }

		code, body := getStatus(t, anonymous, metrics, token("scraper"))
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "rest_client_requests_total")
		code, body = getStatus(t, anonymous, metrics, token("bystander"))
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, `User \"system:serviceaccount:`+ns+`:bystander\" cannot get path \"/metrics\"`)
	})
}
