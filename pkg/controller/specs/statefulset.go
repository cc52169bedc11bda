package specs

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// StatefulSet is "<name>", from the engine's recipe (engine.Recipe): the catalog's image,
// credentials from the Secret, the engine's probes and data mount, the security context of
// the Pod Security Standards' "restricted" profile (engine.Recipe.PodSecurityContext and
// engine.ContainerSecurityContext, for every container), OrderedReady Pods behind the
// headless Service, and a volumeClaimTemplate engine.DataVolumeName of
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
//
// On an engine that replicates (engine.Recipe.Replicates), the Pod template also has what
// the engine's ReplicationPod adds (every Pod but the primary starts as a standby of it), and the update strategy is
// OnDelete: the controller picks the order in which Pods restart for a new revision.
//
// With spec.backup (d.Backup), the Pod template also has what the engine's BackupPod adds:
// continuous archiving and the server backup Jobs read the data through; with spec.restore
// too, what its RestorePod adds: the restore of the primary's empty data volume.
//
// A restart asked for through databases/restart (status.restart) is the Pod template's
// RestartedAtAnnotation: a new revision, rolled out as an image update is. So is a change of
// an engine's settings it keys by a Pod template annotation (its ReplicationPod's).
func StatefulSet(db *examplev1.Database, d Desired) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		ObjectMeta: objectMeta(db, names.StatefulSetName(db), workloadLabels(db)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(d.Replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: names.SelectorLabels(db)},
			ServiceName:         names.HeadlessServiceName(db),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: workloadLabels(db)},
				Spec: corev1.PodSpec{
					Containers:      []corev1.Container{d.Recipe.Container(d.Image, names.SecretName(db))},
					Volumes:         []corev1.Volume{engine.CredentialsVolume(names.SecretName(db), d.Recipe.PasswordKeys()...)},
					SecurityContext: d.Recipe.PodSecurityContext(),
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
	if stamp := RestartStamp(db); stamp != "" {
		sts.Spec.Template.Annotations = map[string]string{RestartedAtAnnotation: stamp}
	}
	if HasInitConfigMap(d) {
		initdbPod(db, &sts.Spec.Template.Spec)
	}
	if d.Recipe.Replicates() {
		d.Engine().ReplicationPod(db, d, &sts.Spec.Template)
		// The controller restarts the Pods for a new revision itself, the replicas first
		// and the primary last, wherever the primary is (a RollingUpdate goes by ordinal).
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	if b, ok := d.Engine().(engine.Backups); ok && d.Backup != nil {
		b.BackupPod(db, d, &sts.Spec.Template)
		if db.Spec.Restore != nil {
			b.RestorePod(db, d, &sts.Spec.Template)
		}
	}
	return sts
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
// replicas, the update strategy's type, the Pod template's labels and annotations
// (RestartedAtAnnotation and those of the engine's ReplicationPod, when want has them), its security context's
// user, group, fsGroup and seccomp fields, token and service-link settings, the volumes of
// want's names (removing the volumes of spec.backup, optionalVolumes, that want lacks), the
// database container's image, arguments, ports, environment, mounts, resources, probes,
// lifecycle and security context, and the same of want's other containers and init
// containers (removing those want lacks). Everything else (fields the API server defaults,
// other volumes,
// annotations such as kubectl's restartedAt) is kept, so a StatefulSet read back compares
// equal. The
// selector, serviceName, podManagementPolicy and volumeClaimTemplates are immutable.
func SyncStatefulSet(have, want *appsv1.StatefulSet) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Spec.Replicas = want.Spec.Replicas
	if have.Spec.UpdateStrategy.Type != want.Spec.UpdateStrategy.Type {
		// The type only: the API server defaults a RollingUpdate's partition.
		have.Spec.UpdateStrategy = want.Spec.UpdateStrategy
	}

	tmpl, wantTmpl := &have.Spec.Template, &want.Spec.Template
	tmpl.Labels = MergeLabels(tmpl.Labels, wantTmpl.Labels)
	for key, value := range wantTmpl.Annotations {
		metav1.SetMetaDataAnnotation(&tmpl.ObjectMeta, key, value)
	}
	pod, wantPod := &tmpl.Spec, &wantTmpl.Spec
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	sc, wantSC := pod.SecurityContext, wantPod.SecurityContext
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup = wantSC.RunAsNonRoot, wantSC.RunAsUser, wantSC.RunAsGroup
	sc.FSGroup, sc.FSGroupChangePolicy = wantSC.FSGroup, wantSC.FSGroupChangePolicy
	sc.SeccompProfile = wantSC.SeccompProfile
	pod.AutomountServiceAccountToken = wantPod.AutomountServiceAccountToken
	pod.EnableServiceLinks = wantPod.EnableServiceLinks

	for _, v := range wantPod.Volumes {
		if i := slices.IndexFunc(pod.Volumes, func(have corev1.Volume) bool { return have.Name == v.Name }); i >= 0 {
			pod.Volumes[i] = v
		} else {
			pod.Volumes = append(pod.Volumes, v)
		}
	}
	pod.Volumes = slices.DeleteFunc(pod.Volumes, func(v corev1.Volume) bool {
		return slices.Contains(optionalVolumes, v.Name) && !slices.ContainsFunc(wantPod.Volumes, func(w corev1.Volume) bool { return w.Name == v.Name })
	})
	pod.Containers = syncContainers(pod.Containers, wantPod.Containers)
	pod.InitContainers = syncContainers(pod.InitContainers, wantPod.InitContainers)
}

// optionalVolumes are the volumes of the Pod template the controller adds for spec.backup
// only (the engines' BackupPod), which SyncStatefulSet removes, with every container want
// lacks, once it is unset.
var optionalVolumes = []string{engine.BackupTLSVolumeName, engine.BackupStoreCAVolumeName, engine.BackupSocketVolumeName}

// syncContainers returns want's containers in want's order, each the container of its name
// in have with the fields we own copied from want (so the fields the API server defaults
// are kept), or want's own when have has none; the containers want lacks are dropped (the
// workloads admission policy admits the recipe's containers only).
func syncContainers(have, want []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, 0, len(want))
	for _, w := range want {
		i := containerIndex(have, w.Name)
		if i < 0 {
			out = append(out, w)
			continue
		}
		c := have[i]
		c.Image = w.Image
		c.Command = w.Command
		c.Args = w.Args
		c.Ports = w.Ports
		c.Env = w.Env
		c.VolumeMounts = w.VolumeMounts
		c.Resources = w.Resources
		c.StartupProbe = w.StartupProbe
		c.ReadinessProbe = w.ReadinessProbe
		c.LivenessProbe = w.LivenessProbe
		c.Lifecycle = w.Lifecycle
		c.SecurityContext = w.SecurityContext
		out = append(out, c)
	}
	return out
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

// RestartedAtAnnotation, on the Pod template, is the time of the last restart asked for
// through databases/restart (RestartStamp): changing it makes a new revision, so every Pod
// is recreated, as kubectl rollout restart's kubectl.kubernetes.io/restartedAt does.
const RestartedAtAnnotation = "database.example.com/restarted-at"

// RestartStamp is the value of RestartedAtAnnotation for db: status.restart.requestedAt in
// RFC 3339 with microseconds (metav1.RFC3339Micro, its serialized form), "" when no restart
// was asked for.
func RestartStamp(db *examplev1.Database) string {
	if db.Status.Restart == nil {
		return ""
	}
	return db.Status.Restart.RequestedAt.UTC().Format(metav1.RFC3339Micro)
}
