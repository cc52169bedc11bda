package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The manager of a write is its fieldManager, else the User-Agent before its first "/",
// printable characters only, at most 128 bytes (k8s.io/apiserver's rule).
func TestManagerOrUserAgent(t *testing.T) {
	for _, tc := range []struct{ manager, userAgent, want string }{
		{"gitops", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "gitops"},
		{"", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "kubectl-database", "kubectl-database"},
		{"", "ops\x1b[2Jconsole\n/1.0", "ops[2Jconsole"},
		{"", strings.Repeat("é", 100) + "/1", strings.Repeat("é", 64)},
		{"", "", ""},
	} {
		require.Equal(t, tc.want, managerOrUserAgent(tc.manager, tc.userAgent), "%q %q", tc.manager, tc.userAgent)
	}
	require.Equal(t, "ops-console", userAgentFrom(WithUserAgent(context.Background(), "ops-console")))
	require.Empty(t, userAgentFrom(context.Background()))
}
