package storage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/pkg/apis/example"
)

// A restart reason is printable UTF-8 of at most MaxRestartReasonLength bytes; the error
// names the first character refused and where, without echoing the reason.
func TestValidateRestartReason(t *testing.T) {
	for _, ok := range []string{"", "new kernel", `pick up "the" ConfigMap \ 100%`, "Größe ändern: 日本語 ✓", "\uFFFD as text", strings.Repeat("x", MaxRestartReasonLength)} {
		require.Empty(t, validateRestart(&example.DatabaseRestart{Reason: ok}), "%q", ok)
	}
	for _, tc := range []struct{ reason, msg string }{
		{"line one\n  Completed At: now", "U+000A at byte 8"},
		{"\x1b[2Jcleared", "U+001B at byte 0"},
		{"tab\there", "U+0009 at byte 3"},
		{"bad \xff byte", "invalid UTF-8 (byte 0xff) at byte 4"},
		{"ab\u202Edc", "U+202E at byte 2"},
		{"C1 \u009b2J", "U+009B at byte 3"},
		{"nbsp\u00a0", "U+00A0 at byte 4"},
	} {
		errs := validateRestart(&example.DatabaseRestart{Reason: tc.reason})
		require.Len(t, errs, 1, "%q", tc.reason)
		require.Equal(t, "reason: Invalid value: must be printable UTF-8 without control characters (newlines, tabs, escape sequences): "+tc.msg, errs[0].Error())
	}
	errs := validateRestart(&example.DatabaseRestart{Reason: strings.Repeat("x", MaxRestartReasonLength+1)})
	require.Len(t, errs, 1)
	require.Equal(t, "reason: Too long: may not be more than 32768 bytes", errs[0].Error())
}

// TestConnectionNamesHostsUnderTheClusterDomain: databases/connection shows the client and
// read Services by their fully qualified names under the server's cluster domain, as the
// controller writes them into the credentials Secret.
func TestConnectionNamesHostsUnderTheClusterDomain(t *testing.T) {
	s := newStorage(t)
	create(t, s, validDatabase("shop"))
	for domain, want := range map[string]string{
		"cluster.local":     "shop.test.svc.cluster.local",
		"corp.example.test": "shop.test.svc.corp.example.test",
	} {
		connection := &ConnectionREST{store: s.Connection.store, scheme: s.Connection.scheme, clusterDomain: domain}
		obj, err := connection.Get(testContext(s, "connection"), "shop", &metav1.GetOptions{})
		require.NoError(t, err)
		conn := obj.(*example.DatabaseConnection)
		require.Equal(t, want, conn.Host, domain)
		require.Equal(t, strings.Replace(want, "shop.", "shop-read.", 1), conn.ReadHost, domain)
	}
	obj, err := s.Connection.Get(testContext(s, "connection"), "shop", &metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop.test.svc.cluster.local", obj.(*example.DatabaseConnection).Host, "NewStorage's domain")
}
