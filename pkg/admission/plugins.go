// Package admission registers database-apiserver's admission plugins and
// says where they go in the chain.
package admission

import (
	"slices"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"

	"example.com/database-apiserver/pkg/admission/databasedefaults"
	"example.com/database-apiserver/pkg/admission/databasevalidation"
)

// AllOrderedPlugins returns our plugins in chain order: DatabaseDefaults
// (mutating) before DatabaseValidation, so validation sees defaulted objects.
func AllOrderedPlugins() []string {
	return []string{databasedefaults.PluginName, databasevalidation.PluginName}
}

// RegisterAllAdmissionPlugins registers every plugin of AllOrderedPlugins, and
// the standard ResourceQuota plugin (which the generic server does not
// register), so that --enable-admission-plugins, --disable-admission-plugins
// and an AdmissionConfiguration can name them. kube-apiserver does not run its
// own ResourceQuota admission on the requests it proxies to us, so ours is the
// one that enforces count/databases.example.com.
func RegisterAllAdmissionPlugins(plugins *admission.Plugins) {
	databasedefaults.Register(plugins)
	databasevalidation.Register(plugins)
	resourcequota.Register(plugins)
}

// RecommendedPluginOrder returns upstream (the generic server's order, i.e.
// options.NewAdmissionOptions().RecommendedPluginOrder) with AllOrderedPlugins
// inserted right after NamespaceLifecycle, or first if upstream lacks it, and
// ResourceQuota last:
//
//	NamespaceLifecycle, DatabaseDefaults, DatabaseValidation,
//	MutatingAdmissionPolicy, MutatingAdmissionWebhook,
//	ValidatingAdmissionPolicy, ValidatingAdmissionWebhook, ResourceQuota
//
// Writes into a terminating namespace are refused before any work, and
// policies and webhooks see Databases already defaulted. ResourceQuota is last,
// as in kube-apiserver's order, so that only a request every other plugin
// admitted is charged to a quota. (The server runs every
// mutating plugin before any validating one whatever the list says; the order
// matters among plugins of one kind.) Entries of ours already in upstream are
// moved, not repeated; upstream is not modified.
func RecommendedPluginOrder(upstream []string) []string {
	ours := AllOrderedPlugins()
	order := make([]string, 0, len(upstream)+len(ours)+1)
	for _, name := range upstream {
		if !slices.Contains(ours, name) && name != resourcequota.PluginName {
			order = append(order, name)
		}
	}
	at := slices.Index(order, lifecycle.PluginName) + 1 // 0 when absent: ours go first
	return append(slices.Insert(order, at, ours...), resourcequota.PluginName)
}
