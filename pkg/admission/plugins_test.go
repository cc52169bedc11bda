package admission

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/server/options"
)

func TestRecommendedPluginOrderPutsOursAfterNamespaceLifecycleAndResourceQuotaLast(t *testing.T) {
	tests := []struct {
		name     string
		upstream []string
		want     []string
	}{
		{
			name:     "the generic server's order",
			upstream: options.NewAdmissionOptions().RecommendedPluginOrder,
			want: []string{
				"NamespaceLifecycle", "DatabaseDefaults", "DatabaseValidation",
				"MutatingAdmissionPolicy", "MutatingAdmissionWebhook",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
			},
		},
		{
			name:     "NamespaceLifecycle not first",
			upstream: []string{"A", "NamespaceLifecycle", "B"},
			want:     []string{"A", "NamespaceLifecycle", "DatabaseDefaults", "DatabaseValidation", "B", "ResourceQuota"},
		},
		{
			name:     "without NamespaceLifecycle ours go first",
			upstream: []string{"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"},
			want:     []string{"DatabaseDefaults", "DatabaseValidation", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota"},
		},
		{
			name:     "ours already listed elsewhere are moved, not repeated",
			upstream: []string{"DatabaseValidation", "ResourceQuota", "NamespaceLifecycle", "DatabaseDefaults", "ValidatingAdmissionWebhook"},
			want:     []string{"NamespaceLifecycle", "DatabaseDefaults", "DatabaseValidation", "ValidatingAdmissionWebhook", "ResourceQuota"},
		},
		{
			name:     "empty upstream",
			upstream: nil,
			want:     []string{"DatabaseDefaults", "DatabaseValidation", "ResourceQuota"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upstream := append([]string(nil), tc.upstream...)
			require.Equal(t, tc.want, RecommendedPluginOrder(tc.upstream))
			require.Equal(t, upstream, tc.upstream, "upstream must not be modified")
		})
	}
}

func TestRegisterAllAdmissionPluginsRegistersEveryOrderedPlugin(t *testing.T) {
	plugins := admission.NewPlugins()
	RegisterAllAdmissionPlugins(plugins)
	require.ElementsMatch(t, append(AllOrderedPlugins(), "ResourceQuota"), plugins.Registered())
}

// With the generic server's plugins registered beside ours, every name of the
// recommended order resolves, so the default chain builds.
func TestRecommendedPluginOrderNamesOnlyRegisteredPlugins(t *testing.T) {
	opts := options.NewAdmissionOptions()
	RegisterAllAdmissionPlugins(opts.Plugins)
	registered := opts.Plugins.Registered()
	for _, name := range RecommendedPluginOrder(opts.RecommendedPluginOrder) {
		require.Contains(t, registered, name)
	}
}
