package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	genericadmissioninitializer "k8s.io/apiserver/pkg/admission/initializer"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"example.com/database-apiserver/pkg/apis/example"
)

// QuotaConfiguration is what the standard ResourceQuota admission plugin evaluates on our
// server: the object count of databases, quota resource name count/databases.example.com
// (generic.ObjectCountQuotaResourceNameFor), one per Database created. No resource is
// ignored.
//
// Admission only adds the request's usage to the quota's status.used; the usage itself
// (status.used after deletes, and when a quota is new) is counted by kube-controller-manager's
// resource quota controller, which lists Databases through kube-apiserver. So, as
// kube-apiserver's own admission configuration does, the evaluator is given no lister of its
// own: listing through it returns an error.
func QuotaConfiguration() quota.Configuration {
	databases := example.Resource("databases")
	return generic.NewConfiguration([]quota.Evaluator{
		generic.NewObjectCountEvaluator(databases, func(string) ([]runtime.Object, error) {
			return nil, fmt.Errorf("usage of %s is counted by kube-controller-manager's resource quota controller, not by admission", databases)
		}, ""),
	}, nil)
}

// quotaConfigurationInitializer gives the plugins that want one (WantsQuotaConfiguration: the
// ResourceQuota plugin) the quota configuration.
type quotaConfigurationInitializer struct {
	configuration quota.Configuration
}

// Initialize implements admission.PluginInitializer.
func (i quotaConfigurationInitializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(genericadmissioninitializer.WantsQuotaConfiguration); ok {
		wants.SetQuotaConfiguration(i.configuration)
	}
}

// ExtraAdmissionInitializers returns the initializers our chain needs beyond the generic
// server's (RecommendedOptions.ExtraAdmissionInitializers): the one that hands
// QuotaConfiguration to the ResourceQuota plugin. The generic initializer, which gives the
// plugin the kube-apiserver client, the ResourceQuota informer and the drained notification,
// runs before these.
func ExtraAdmissionInitializers(*genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
	return []admission.PluginInitializer{quotaConfigurationInitializer{configuration: QuotaConfiguration()}}, nil
}
