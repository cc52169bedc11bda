//go:build e2e

package e2e

import (
	"fmt"
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

// TestControllerReportsEachDatabase: the controller's /metrics reports each Database as its
// status says, here the README's example on the real node: Ready, three ready servers, the
// primary taking writes, each standby streaming from it.
func TestControllerReportsEachDatabase(t *testing.T) {
	applyExamples(t)
	// Ready with every standby streaming (its first start on the real node pulls the image).
	db := waitReplicating(t, "production", "my-database", "my-database-0", 3)
	kubectl(t, "create", "clusterrolebinding", "e2e-metrics-databases",
		"--clusterrole=database-metrics-reader", "--user=e2e-metrics-databases")
	t.Cleanup(func() { kubectlAs(cluster.KubeconfigPath, "", "delete", "clusterrolebinding", "e2e-metrics-databases") })
	scraper := controllerClient(t, "e2e-metrics-databases")
	labels := `database="my-database",namespace="production"`
	want := []string{
		`database_info{database="my-database",engine="postgresql",namespace="production",version="14.5"} 1`,
		`database_status_phase{` + labels + `,phase="Ready"} 1`,
		`database_status_phase{` + labels + `,phase="Degraded"} 0`,
		`database_status_condition{condition="Ready",` + labels + `,status="True"} 1`,
		`database_spec_replicas{` + labels + `} 3`,
		`database_status_ready_replicas{` + labels + `} 3`,
		`database_primary_writable{` + labels + `} 1`,
		// The exposition format sorts labels by name.
		`database_member_role{database="my-database",member="` + db.Status.Primary + `",namespace="production",role="primary"} 1`,
	}
	// Each standby's lag, whatever it is (PostgreSQL's replay_lag in seconds, 0 once replayed).
	var lags []string
	for _, m := range db.Status.Members {
		if m.Name != db.Status.Primary {
			want = append(want, `database_member_streaming{database="my-database",member="`+m.Name+`",namespace="production"} 1`)
			lags = append(lags, `database_member_replication_lag_seconds{database="my-database",member="`+m.Name+`",namespace="production"} `)
		}
	}
	// The scrape reads the controller's cache, which a status write reaches within moments.
	eventually(t, 30*time.Second, func() error {
		code, body := getStatus(t, scraper, cluster.ControllerURL+"/metrics", "")
		if code != http.StatusOK {
			return fmt.Errorf("/metrics answered %d: %s", code, body)
		}
		for _, line := range want {
			if !strings.Contains(body, "\n"+line+"\n") {
				return fmt.Errorf("no line %q in /metrics", line)
			}
		}
		for _, prefix := range lags {
			if !strings.Contains(body, "\n"+prefix) {
				return fmt.Errorf("no series %q in /metrics", prefix)
			}
		}
		return nil
	})
}
