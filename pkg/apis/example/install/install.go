// Package install registers the example.com API group, internal and v1, in a
// scheme, together with the autoscaling Scale types its scale subresource serves.
package install

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	scalescheme "k8s.io/client-go/scale/scheme"
	scaleautoscalingv1 "k8s.io/client-go/scale/scheme/autoscalingv1"

	"example.com/database-apiserver/pkg/apis/example"
	v1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Install adds to scheme: the internal and v1 Database types with their
// defaulters, conversions and field label conversions (v1 preferred), and the
// internal autoscaling Scale with its autoscaling/v1 form and conversions,
// which databases/scale reads and writes.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1.SchemeGroupVersion))

	utilruntime.Must(scalescheme.AddToScheme(scheme))
	utilruntime.Must(autoscalingv1.AddToScheme(scheme))
	utilruntime.Must(scaleautoscalingv1.AddToScheme(scheme))
}
