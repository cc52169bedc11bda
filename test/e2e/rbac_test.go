//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
)

// TestRBACOnExampleCom pins the aggregated ClusterRoles of artifacts/rbac: view reads,
// edit writes, and a user without a binding is forbidden, checked by kube-apiserver and by
// our server's delegated authorization.
func TestRBACOnExampleCom(t *testing.T) {
	applyExamples(t)
	viewer, err := cluster.UserKubeconfig("e2e-viewer")
	require.NoError(t, err)
	editor, err := cluster.UserKubeconfig("e2e-editor")
	require.NoError(t, err)
	nobody, err := cluster.UserKubeconfig("e2e-nobody", "e2e-group-without-bindings")
	require.NoError(t, err)
	kubectl(t, "create", "rolebinding", "e2e-viewer", "-n", "production", "--clusterrole=view", "--user=e2e-viewer")
	kubectl(t, "create", "rolebinding", "e2e-editor", "-n", "production", "--clusterrole=edit", "--user=e2e-editor")
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "rolebinding", "-n", "production", "e2e-viewer", "e2e-editor")
	})

	t.Run("view can get, list and watch", func(t *testing.T) {
		// The aggregation controller may need a moment to merge our rules into view.
		eventually(t, 30*time.Second, func() error {
			_, _, err := kubectlAs(viewer, "", "get", "db", "my-database", "-n", "production")
			return err
		})
		out, errOut, err := kubectlAs(viewer, "", "get", "db", "-n", "production")
		require.NoError(t, err, errOut)
		require.Contains(t, out, "my-database")

		cs := clientsetFor(t, restConfig(t, viewer))
		w, err := cs.ExampleV1().Databases("production").Watch(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		select {
		case ev := <-w.ResultChan():
			require.NotEmpty(t, ev.Type)
		case <-time.After(30 * time.Second):
			t.Fatal("no event on the viewer's watch")
		}
		w.Stop()
	})

	t.Run("view cannot create, patch or delete", func(t *testing.T) {
		for _, args := range [][]string{
			{"create", "-f", "-"},
			{"patch", "db", "my-database", "-n", "production", "--type=merge", "-p", `{"spec":{"replicas":2}}`},
			{"scale", "db/my-database", "-n", "production", "--replicas=2"},
			{"delete", "db", "my-database", "-n", "production"},
		} {
			stdin := ""
			if args[0] == "create" {
				stdin = database("e2e-viewer-db", "mysql", "8.0", 1)
			}
			errOut := kubectlFails(t, viewer, stdin, args...)
			require.Contains(t, errOut, "Forbidden", args)
			require.Contains(t, errOut, `User "e2e-viewer" cannot`, args)
		}
	})

	t.Run("edit can create and delete", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			_, _, err := kubectlAs(editor, database("e2e-editor-db", "mysql", "8.0", 1), "apply", "-f", "-")
			return err
		})
		_, errOut, err := kubectlAs(editor, "", "delete", "db", "e2e-editor-db", "-n", "production")
		require.NoError(t, err, errOut)
	})

	t.Run("a user without bindings gets 403", func(t *testing.T) {
		errOut := kubectlFails(t, nobody, "", "get", "db", "-n", "production")
		require.Contains(t, errOut, "Forbidden")
		cs := clientsetFor(t, restConfig(t, nobody))
		_, err := cs.ExampleV1().Databases("production").Get(context.Background(), "my-database", metav1.GetOptions{})
		require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	})
}

// TestDirectRequestWithoutFrontProxyCertIsRefused talks to our server's port directly. Only
// kube-apiserver's front-proxy client certificate makes it trust X-Remote-User/Group; without
// it those headers are ignored and the request is not authorized.
func TestDirectRequestWithoutFrontProxyCertIsRefused(t *testing.T) {
	pool, err := certutil.NewPoolFromBytes(cluster.ServingCAPEM())
	require.NoError(t, err)
	url := cluster.APIServerURL + "/apis/example.com/v1/namespaces/production/databases"

	// A client certificate from the client CA (not the front-proxy CA), of a user with no
	// bindings, claiming to be a cluster admin through the headers.
	nobody, err := cluster.UserKubeconfig("e2e-direct")
	require.NoError(t, err)
	kc, err := clientcmd.LoadFromFile(nobody)
	require.NoError(t, err)
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	userCert, err := tls.X509KeyPair(auth.ClientCertificateData, auth.ClientKeyData)
	require.NoError(t, err)

	for name, certs := range map[string][]tls.Certificate{
		"no client certificate":                 nil,
		"a client certificate of the client CA": {userCert},
	} {
		t.Run(name, func(t *testing.T) {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs},
			}}
			req, err := http.NewRequest(http.MethodGet, url, nil)
			require.NoError(t, err)
			req.Header.Set("X-Remote-User", "admin")
			req.Header.Set("X-Remote-Group", "system:masters")
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode)
		})
	}
}
