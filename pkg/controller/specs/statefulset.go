package specs

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/engine"
)

// StatefulSet is "<name>", from the engine's recipe (engine.Recipe): the catalog's image,
// credentials from the Secret, the engine's probes and data mount, fsGroup, OrderedReady
// Pods behind the headless Service, and a volumeClaimTemplate engine.DataVolumeName of
// spec.storage.
//
// The claim template carries db as controller (ClaimOwnerReference) so that every
// PersistentVolumeClaim made from it is owned by the Database (the StatefulSet controller
// copies the template's metadata): the deletion policy decides their fate, not the
// StatefulSet's.
//
// The controller creates the claims of the ordinals the StatefulSet is about to mount
// itself, from this template (DataClaim), so that the StatefulSet controller never creates
// one: it mounts whatever claim has the name, and a foreign one could take it in between.
func StatefulSet(db *examplev1.Database, d Desired) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: objectMeta(db, StatefulSetName(db), workloadLabels(db)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(d.Replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
			ServiceName:         HeadlessServiceName(db),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: workloadLabels(db)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{d.Recipe.Container(d.Image, SecretName(db))},
					SecurityContext: &corev1.PodSecurityContext{
						FSGroup: ptr.To(d.Recipe.FSGroup),
						// Large volumes: chown only a fresh one, not every start.
						FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
					},
					// The database needs no API access, nor every Service as variables.
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{
					Name:            engine.DataVolumeName,
					Labels:          ChildLabels(db),
					OwnerReferences: []metav1.OwnerReference{ClaimOwnerReference(db)},
				},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: d.Storage},
					},
				},
			}},
		},
	}
}

// DataClaim is the data claim of ordinal of the StatefulSet sts (StatefulSet) exactly as the
// StatefulSet controller makes it (getPersistentVolumeClaims in
// k8s.io/kubernetes/pkg/controller/statefulset): the volumeClaimTemplate
// engine.DataVolumeName named "<template>-<statefulset>-<ordinal>" in the StatefulSet's
// namespace, with the StatefulSet's selector labels added to the template's; metadata (owner
// reference, annotations) and spec otherwise the template's. It panics when sts has no such
// template, which StatefulSet always has.
func DataClaim(sts *appsv1.StatefulSet, ordinal int32) *corev1.PersistentVolumeClaim {
	var claim *corev1.PersistentVolumeClaim
	for i := range sts.Spec.VolumeClaimTemplates {
		if sts.Spec.VolumeClaimTemplates[i].Name == engine.DataVolumeName {
			claim = sts.Spec.VolumeClaimTemplates[i].DeepCopy()
		}
	}
	if claim == nil {
		panic("DataClaim: the StatefulSet has no volumeClaimTemplate " + engine.DataVolumeName)
	}
	claim.Name = claimName(claim.Name, sts.Name, ordinal)
	claim.Namespace = sts.Namespace
	claim.Labels = MergeLabels(claim.Labels, sts.Spec.Selector.MatchLabels)
	return claim
}

// SyncStatefulSet copies the fields the controller owns from want into have: labels,
// replicas, the Pod template's labels, security context fields, token and service-link
// settings, and the database container's image, ports, environment, mounts, resources and
// probes. Everything else (fields the API server defaults, other containers, annotations
// such as kubectl's restartedAt) is kept, so a StatefulSet read back compares equal. The
// selector, serviceName, podManagementPolicy and volumeClaimTemplates are immutable.
func SyncStatefulSet(have, want *appsv1.StatefulSet) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Spec.Replicas = want.Spec.Replicas

	tmpl, wantTmpl := &have.Spec.Template, &want.Spec.Template
	tmpl.Labels = MergeLabels(tmpl.Labels, wantTmpl.Labels)
	pod, wantPod := &tmpl.Spec, &wantTmpl.Spec
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod.SecurityContext.FSGroup = wantPod.SecurityContext.FSGroup
	pod.SecurityContext.FSGroupChangePolicy = wantPod.SecurityContext.FSGroupChangePolicy
	pod.AutomountServiceAccountToken = wantPod.AutomountServiceAccountToken
	pod.EnableServiceLinks = wantPod.EnableServiceLinks

	wantC := wantPod.Containers[0]
	i := containerIndex(pod.Containers, wantC.Name)
	if i < 0 {
		pod.Containers = append([]corev1.Container{wantC}, pod.Containers...)
		return
	}
	c := &pod.Containers[i]
	c.Image = wantC.Image
	c.Ports = wantC.Ports
	c.Env = wantC.Env
	c.VolumeMounts = wantC.VolumeMounts
	c.Resources = wantC.Resources
	c.StartupProbe = wantC.StartupProbe
	c.ReadinessProbe = wantC.ReadinessProbe
	c.LivenessProbe = wantC.LivenessProbe
}

func containerIndex(containers []corev1.Container, name string) int {
	for i := range containers {
		if containers[i].Name == name {
			return i
		}
	}
	return -1
}

// ContainerImage is the image of sts's database container, "" if there is none.
func ContainerImage(sts *appsv1.StatefulSet) string {
	if i := containerIndex(sts.Spec.Template.Spec.Containers, engine.ContainerName); i >= 0 {
		return sts.Spec.Template.Spec.Containers[i].Image
	}
	return ""
}

// ClaimTemplateStorage is the storage request of sts's data volumeClaimTemplate, and false
// when it has none.
func ClaimTemplateStorage(sts *appsv1.StatefulSet) (resource.Quantity, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == engine.DataVolumeName {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}
