//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"example.com/database-apiserver/internal/localcluster"
)

// matrixVerbs are the verbs of the matrix: every verb the API server serves on databases.
var matrixVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// matrixResources are databases and its subresources, and databasebackups.
var matrixResources = []string{"databases", "databases/status", "databases/scale",
	"databases/connection", "databases/restart", "databases/switchover", "databases/backup",
	"databasebackups"}

// matrixRoles are the users of the matrix: one per aggregated ClusterRole, bound in the
// test's namespace with a RoleBinding, and one without any binding.
var matrixRoles = []string{"admin", "edit", "view", "no binding"}

// authorizationMatrix is what artifacts/rbac grants: for each role and resource, the verbs
// allowed (in matrixVerbs' order); every other verb is forbidden. docs/security.md shows this table.
var authorizationMatrix = map[string]map[string][]string{
	"admin": {
		"databases":            matrixVerbs,
		"databases/status":     {"get"},
		"databases/scale":      {"get", "update", "patch"},
		"databases/connection": {"get"},
		"databases/restart":    {"create"},
		"databases/switchover": {"create"},
		"databases/backup":     {"create"},
		"databasebackups":      {"get", "list", "delete"},
	},
	"edit": {
		"databases":            matrixVerbs,
		"databases/status":     {"get"},
		"databases/scale":      {"get", "update", "patch"},
		"databases/connection": {"get"},
		"databases/restart":    {"create"},
		"databases/switchover": {"create"},
		"databases/backup":     {"create"},
		"databasebackups":      {"get", "list", "delete"},
	},
	"view": {
		"databases":            {"get", "list", "watch"},
		"databases/status":     {"get"},
		"databases/scale":      {"get"},
		"databases/connection": {"get"},
		"databases/restart":    {},
		"databases/switchover": {},
		"databases/backup":     {},
		"databasebackups":      {"get", "list"},
	},
	"no binding": {
		"databases":            {},
		"databases/status":     {},
		"databases/scale":      {},
		"databases/connection": {},
		"databases/restart":    {},
		"databases/switchover": {},
		"databases/backup":     {},
		"databasebackups":      {},
	},
}

// matrixUser is the user name standing for role.
func matrixUser(role string) string {
	return "e2e-matrix-" + strings.ReplaceAll(role, " ", "-")
}

// TestAuthorizationMatrix checks every verb on databases and each of its subresources for admin, edit, view and a user without bindings, as kube-apiserver
// decides it for that user (a SelfSubjectAccessReview sent impersonating them, what
// `kubectl auth can-i --as` sends), and then real requests straight to our server as each
// user, through the front-proxy headers kube-apiserver sends, so that our server's delegated
// authorization is shown to agree.
func TestAuthorizationMatrix(t *testing.T) {
	const ns = "e2e-rbac-matrix"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "namespace", ns, "--wait=false")
	})
	for _, role := range matrixRoles {
		if role == "no binding" {
			continue
		}
		kubectl(t, "create", "rolebinding", matrixUser(role), "-n", ns, "--clusterrole="+role, "--user="+matrixUser(role))
	}

	// The aggregation controller may need a moment to merge our rules into the roles.
	var got map[string]map[string][]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = accessMatrix(t, ns)
		if matrixEqual(got, authorizationMatrix) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	require.Equal(t, authorizationMatrix, got, "allowed verbs per role and resource")

	t.Run("our server agrees", func(t *testing.T) {
		// One create, one status read and one restart per role, straight to our server as
		// that user.
		for _, role := range matrixRoles {
			create := slices.Contains(authorizationMatrix[role]["databases"], "create")
			getStatus := slices.Contains(authorizationMatrix[role]["databases/status"], "get")
			name := "matrix-" + strings.ReplaceAll(role, " ", "-")
			body := strings.Replace(database(name, "mysql", "8.0", 1), "namespace: production", "namespace: "+ns, 1)

			code, out := ourServerAs(t, matrixUser(role), http.MethodPost,
				"/apis/example.com/v1/namespaces/"+ns+"/databases", body)
			require.Equal(t, map[bool]int{true: http.StatusCreated, false: http.StatusForbidden}[create], code,
				"create as %s: %s", role, out)
			if !create {
				require.Contains(t, out, fmt.Sprintf(`User \"%s\" cannot create resource \"databases\" in API group \"example.com\"`, matrixUser(role)))
				// Created as admin, so that the status read below has an object.
				kubectlIn(t, body, "create", "-n", ns, "-f", "-")
			}

			code, out = ourServerAs(t, matrixUser(role), http.MethodGet,
				"/apis/example.com/v1/namespaces/"+ns+"/databases/"+name+"/status", "")
			require.Equal(t, map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[getStatus], code,
				"get status as %s: %s", role, out)

			restart := slices.Contains(authorizationMatrix[role]["databases/restart"], "create")
			code, out = ourServerAs(t, matrixUser(role), http.MethodPost,
				"/apis/example.com/v1/namespaces/"+ns+"/databases/"+name+"/restart",
				`{"apiVersion":"example.com/v1","kind":"DatabaseRestart"}`)
			require.Equal(t, map[bool]int{true: http.StatusCreated, false: http.StatusForbidden}[restart], code,
				"restart as %s: %s", role, out)

			listBackups := slices.Contains(authorizationMatrix[role]["databasebackups"], "list")
			code, out = ourServerAs(t, matrixUser(role), http.MethodGet,
				"/apis/example.com/v1/namespaces/"+ns+"/databasebackups", "")
			require.Equal(t, map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[listBackups], code,
				"list databasebackups as %s: %s", role, out)
		}
	})

	// Our server reads a backup store's Secret by name, as it serves databasebackups, and
	// may do nothing else with Secrets: not list or watch them, nor write them.
	t.Run("our server's Secrets", func(t *testing.T) {
		cfg := rest.CopyConfig(cluster.AdminConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: localcluster.APIServerUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + localcluster.APIServerNamespace, "system:authenticated"}}
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
				&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"},
				}}, metav1.CreateOptions{})
			require.NoError(t, err)
			require.Equal(t, verb == "get", review.Status.Allowed, "%s secrets as our server: %+v", verb, review.Status)
		}
		_, err = cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
	})
}

// accessMatrix asks kube-apiserver, for each role's user, which verbs of matrixVerbs it
// allows on each of matrixResources in ns.
func accessMatrix(t *testing.T, ns string) map[string]map[string][]string {
	t.Helper()
	m := map[string]map[string][]string{}
	for _, role := range matrixRoles {
		cfg := rest.CopyConfig(cluster.AdminConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: matrixUser(role)}
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		m[role] = map[string][]string{}
		for _, res := range matrixResources {
			resource, subresource, _ := strings.Cut(res, "/")
			allowed := []string{}
			for _, verb := range matrixVerbs {
				review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
					&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: ns, Verb: verb, Group: "example.com",
							Resource: resource, Subresource: subresource,
						},
					}}, metav1.CreateOptions{})
				require.NoError(t, err)
				if review.Status.Allowed {
					allowed = append(allowed, verb)
				}
			}
			m[role][res] = allowed
		}
	}
	return m
}

func matrixEqual(a, b map[string]map[string][]string) bool {
	for role, resources := range b {
		for res, verbs := range resources {
			if !slices.Equal(a[role][res], verbs) {
				return false
			}
		}
	}
	return true
}

// ourServerAs sends a request straight to our server as user (in group system:authenticated),
// the way kube-apiserver's proxy does: with its front-proxy client certificate and the
// X-Remote-User and X-Remote-Group headers. It returns the status code and body.
func ourServerAs(t *testing.T, user, method, path, body string) (int, string) {
	t.Helper()
	pool, err := certutil.NewPoolFromBytes(cluster.ServingCAPEM())
	require.NoError(t, err)
	pkiDir := filepath.Join(cluster.Dir(), "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "front-proxy-client.crt"), filepath.Join(pkiDir, "front-proxy-client.key"))
	require.NoError(t, err)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}
	req, err := http.NewRequest(method, cluster.APIServerURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Remote-User", user)
	req.Header.Set("X-Remote-Group", "system:authenticated")
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}
