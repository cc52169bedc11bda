package controllerpolicy

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// StatefulSetChange turns a StatefulSet the controller builds (specs.StatefulSet, for a
// Database of more than one replica: a database container, a setup init container, the
// credentials Secret volume first, the replication ConfigMap volume) into one the policies refuse, for the
// reason of one validation of Policy, whose message holds Want. Each change fails that one
// validation first, so kube-apiserver (which reports the first failed validation of the first
// refusing policy) reports it; API validation passes each, but an update of an immutable field
// (CreateOnly) is refused by validation before admission.
type StatefulSetChange struct {
	Name       string
	Change     func(sts *appsv1.StatefulSet)
	Policy     string
	Want       string
	CreateOnly bool
}

// workloads is the policy that bounds StatefulSets (controller-workloads.yaml).
const workloads = "database-controller-workloads"

func database(sts *appsv1.StatefulSet) *corev1.Container {
	return &sts.Spec.Template.Spec.Containers[0]
}

func containerContext(c *corev1.Container) *corev1.SecurityContext {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	return c.SecurityContext
}

func podContext(sts *appsv1.StatefulSet) *corev1.PodSecurityContext {
	if sts.Spec.Template.Spec.SecurityContext == nil {
		sts.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return sts.Spec.Template.Spec.SecurityContext
}

// otherEngineImage is a catalog repository of an engine other than sts's, with the tag or
// digest ref: mysql's for a PostgreSQL StatefulSet, postgres's for the others.
func otherEngineImage(sts *appsv1.StatefulSet, ref string) string {
	if strings.HasPrefix(database(sts).Image, "postgres") {
		return "mysql" + ref
	}
	return "postgres" + ref
}

func addVolume(sts *appsv1.StatefulSet, name string, source corev1.VolumeSource) {
	sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: source})
}

// StatefulSetChanges are the shapes of StatefulSet database-controller-workloads refuses: an
// image outside the catalog, the host's namespaces, ports and paths, another ServiceAccount or
// an API token, what the restricted Pod Security profile forbids, other commands, probes,
// environment or volumes than the recipe's, the Pod fields the recipe leaves unset, and
// another selector, labels, Service or claims than the Database's own.
func StatefulSetChanges() []StatefulSetChange {
	return []StatefulSetChange{
		{Name: "privileged", Change: func(sts *appsv1.StatefulSet) {
			sc := containerContext(database(sts))
			sc.Privileged = ptr.To(true)
			sc.AllowPrivilegeEscalation = nil // false with privileged is invalid
		}, Policy: workloads, Want: "container database is privileged"},
		{Name: "allowing privilege escalation", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).AllowPrivilegeEscalation = ptr.To(true)
		}, Policy: workloads, Want: "container database does not set allowPrivilegeEscalation false"},
		{Name: "adding SYS_ADMIN", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, Policy: workloads, Want: "container database adds capabilities other than NET_BIND_SERVICE"},
		{Name: "with a hostPath volume", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}})
		}, Policy: workloads, Want: "volume host is a hostPath"},
		{Name: "on the host network", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.HostNetwork = true },
			Policy: workloads, Want: "the Pod template sets hostNetwork"},
		{Name: "in the host PID namespace", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.HostPID = true },
			Policy: workloads, Want: "the Pod template sets hostPID"},
		{Name: "with a hostPort", Change: func(sts *appsv1.StatefulSet) { database(sts).Ports[0].HostPort = 5432 },
			Policy: workloads, Want: "container database uses a hostPort"},
		{Name: "with an image not in the catalog", Change: func(sts *appsv1.StatefulSet) { database(sts).Image = "busybox:1.36" },
			Policy: workloads, Want: "image busybox:1.36 is not from the catalog repositories"},
		{Name: "with a catalog name on another registry", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Image = "postgres:5000/evil:16"
		}, Policy: workloads, Want: "image postgres:5000/evil:16 is not from the catalog repositories"},
		{Name: "with another engine's image", Change: func(sts *appsv1.StatefulSet) { database(sts).Image = otherEngineImage(sts, ":8.4") },
			Policy: workloads, Want: ":8.4 is not of the "},
		{Name: "with another engine's image by digest", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Image = "docker.io/library/" + otherEngineImage(sts, "@sha256:"+strings.Repeat("0", 64))
		}, Policy: workloads, Want: "@sha256:" + strings.Repeat("0", 64) + " is not of the "},
		{Name: "with a foreign init container", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.InitContainers = append(sts.Spec.Template.Spec.InitContainers,
				corev1.Container{Name: "fetch", Image: "quay.io/evil/tool:1"})
		}, Policy: workloads, Want: "image quay.io/evil/tool:1 is not from the catalog repositories"},
		{Name: "as another ServiceAccount", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.ServiceAccountName = "admin" },
			Policy: workloads, Want: "runs as ServiceAccount admin, not the namespace default"},
		{Name: "mounting an API token", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.AutomountServiceAccountToken = nil },
			Policy: workloads, Want: "must set automountServiceAccountToken false"},
		{Name: "running as user 0", Change: func(sts *appsv1.StatefulSet) { podContext(sts).RunAsUser = ptr.To[int64](0) },
			Policy: workloads, Want: "container database, setup may run as root"},
		{Name: "with runAsNonRoot false", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).RunAsNonRoot = ptr.To(false)
		}, Policy: workloads, Want: "container database may run as root"},
		{Name: "with an Unconfined seccomp profile", Change: func(sts *appsv1.StatefulSet) {
			podContext(sts).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, Policy: workloads, Want: "container database, setup has a seccomp profile other than RuntimeDefault"},
		{Name: "with a container's Unconfined seccomp profile", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, Policy: workloads, Want: "container database has a seccomp profile other than RuntimeDefault"},
		{Name: "with an Unconfined AppArmor profile", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, Policy: workloads, Want: "container database has an AppArmor profile other than the runtime default"},
		{Name: "with an unconfined AppArmor annotation", Change: func(sts *appsv1.StatefulSet) {
			metav1.SetMetaDataAnnotation(&sts.Spec.Template.ObjectMeta, "container.apparmor.security.beta.kubernetes.io/setup", "unconfined")
		}, Policy: workloads, Want: "container setup has an AppArmor profile other than the runtime default"},
		{Name: "with a Localhost seccomp profile", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/allow-all.json")}
		}, Policy: workloads, Want: "container database has a seccomp profile other than RuntimeDefault"},
		{Name: "with a Localhost AppArmor profile", Change: func(sts *appsv1.StatefulSet) {
			podContext(sts).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("allow-all")}
		}, Policy: workloads, Want: "container database, setup has an AppArmor profile other than the runtime default"},
		{Name: "running in group 0", Change: func(sts *appsv1.StatefulSet) { containerContext(database(sts)).RunAsGroup = ptr.To[int64](0) },
			Policy: workloads, Want: "database runs as or adds group 0"},
		{Name: "with fsGroup 0", Change: func(sts *appsv1.StatefulSet) { podContext(sts).FSGroup = ptr.To[int64](0) },
			Policy: workloads, Want: "fsGroup runs as or adds group 0"},
		{Name: "adding group 0", Change: func(sts *appsv1.StatefulSet) { podContext(sts).SupplementalGroups = []int64{0} },
			Policy: workloads, Want: "supplementalGroups runs as or adds group 0"},
		{Name: "with an SELinux type beyond the restricted ones", Change: func(sts *appsv1.StatefulSet) {
			podContext(sts).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, Policy: workloads, Want: "container database, setup has seLinuxOptions with a user, a role, or a type other than container_t"},
		{Name: "with an SELinux user", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).SELinuxOptions = &corev1.SELinuxOptions{User: "system_u"}
		}, Policy: workloads, Want: "container database has seLinuxOptions with a user"},
		{Name: "with sysctls", Change: func(sts *appsv1.StatefulSet) {
			podContext(sts).Sysctls = []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "0"}}
		}, Policy: workloads, Want: "the Pod template sets securityContext.sysctls, which the recipe leaves unset"},
		{Name: "keeping capabilities", Change: func(sts *appsv1.StatefulSet) {
			containerContext(&sts.Spec.Template.Spec.InitContainers[0]).Capabilities.Drop = []corev1.Capability{"NET_RAW"}
		}, Policy: workloads, Want: "container setup does not drop ALL capabilities"},
		{Name: "without allowPrivilegeEscalation false", Change: func(sts *appsv1.StatefulSet) {
			containerContext(database(sts)).AllowPrivilegeEscalation = nil
		}, Policy: workloads, Want: "container database does not set allowPrivilegeEscalation false"},
		{Name: "with an unmasked /proc", Change: func(sts *appsv1.StatefulSet) {
			// Unmasked needs a user namespace (API validation).
			sts.Spec.Template.Spec.HostUsers = ptr.To(false)
			containerContext(database(sts)).ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}, Policy: workloads, Want: "container database sets a procMount other than Default"},
		{Name: "with a command", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Command = []string{"sh", "-c", "cat /etc/database-credentials/*"}
		}, Policy: workloads, Want: "container database has a command or args other than the"},
		{Name: "with other args", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Args = append(database(sts).Args, "--skip-grant-tables")
		}, Policy: workloads, Want: "container database has a command or args other than the"},
		{Name: "with another setup command", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.InitContainers[0].Command = []string{"bash", "-c", "id"}
		}, Policy: workloads, Want: "container setup has a command or args other than the"},
		{Name: "with a sidecar", Change: func(sts *appsv1.StatefulSet) {
			sidecar := *database(sts).DeepCopy()
			sidecar.Name, sidecar.Ports = "sidecar", nil
			sts.Spec.Template.Spec.Containers = append(sts.Spec.Template.Spec.Containers, sidecar)
		}, Policy: workloads, Want: "container sidecar is not one the recipe builds"},
		{Name: "with a probe running another command", Change: func(sts *appsv1.StatefulSet) {
			database(sts).ReadinessProbe.Exec.Command = []string{"sh", "-c", "true"}
		}, Policy: workloads, Want: "container database has a probe or lifecycle hook other than an exec of the"},
		{Name: "with an httpGet probe", Change: func(sts *appsv1.StatefulSet) {
			database(sts).LivenessProbe.Exec = nil
			database(sts).LivenessProbe.HTTPGet = &corev1.HTTPGetAction{Host: "169.254.169.254", Path: "/", Port: intstr.FromInt32(80)}
		}, Policy: workloads, Want: "container database has a probe or lifecycle hook other than an exec of the"},
		{Name: "with a postStart hook", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "id"}}}}
		}, Policy: workloads, Want: "container database has a probe or lifecycle hook other than an exec of the"},
		{Name: "reading another Secret into its environment", Change: func(sts *appsv1.StatefulSet) {
			database(sts).Env = append(database(sts).Env, corev1.EnvVar{Name: "STOLEN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other-credentials"}, Key: "password"}}})
		}, Policy: workloads, Want: "container database reads its environment from a Secret other than"},
		{Name: "reading another Secret whole into its environment", Change: func(sts *appsv1.StatefulSet) {
			database(sts).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "other-credentials"}}}}
		}, Policy: workloads, Want: "container database reads its environment from a Secret other than"},
		{Name: "mounting another Secret", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.Volumes[0].Secret.SecretName = "other-credentials"
		}, Policy: workloads, Want: "volume credentials is not one the recipe mounts"},
		{Name: "mounting another ConfigMap", Change: func(sts *appsv1.StatefulSet) {
			for i, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == "replication" {
					sts.Spec.Template.Spec.Volumes[i].ConfigMap.Name = "other-replication"
				}
			}
		}, Policy: workloads, Want: "volume replication is not one the recipe mounts"},
		{Name: "mounting a ServiceAccount token", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "token", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}})
		}, Policy: workloads, Want: "volume token is not one the recipe mounts"},
		{Name: "mounting an NFS export", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "nfs", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "192.0.2.10", Path: "/export"}})
		}, Policy: workloads, Want: "volume nfs is not one the recipe mounts"},
		{Name: "mounting an iSCSI volume", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "iscsi", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{
				TargetPortal: "192.0.2.10:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 0}})
		}, Policy: workloads, Want: "volume iscsi is not one the recipe mounts"},
		{Name: "mounting a CSI volume", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}})
		}, Policy: workloads, Want: "volume csi is not one the recipe mounts"},
		{Name: "mounting another claim", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "theirs", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-other-0"}})
		}, Policy: workloads, Want: "volume theirs is not one the recipe mounts"},
		{Name: "with an ephemeral volume", Change: func(sts *appsv1.StatefulSet) {
			addVolume(sts, "scratch", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}}})
		}, Policy: workloads, Want: "volume scratch is not one the recipe mounts"},
		{Name: "with a nodeName", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.NodeName = "control-plane" },
			Policy: workloads, Want: "the Pod template sets nodeName, which the recipe leaves unset"},
		{Name: "tolerating every taint", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, Policy: workloads, Want: "the Pod template sets tolerations, which the recipe leaves unset"},
		{Name: "of priority class system-node-critical", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.PriorityClassName = "system-node-critical"
		}, Policy: workloads, Want: "the Pod template sets priorityClassName, which the recipe leaves unset"},
		{Name: "with a runtime class", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.RuntimeClassName = ptr.To("unsandboxed")
		}, Policy: workloads, Want: "the Pod template sets runtimeClassName, which the recipe leaves unset"},
		{Name: "with a node selector", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "control-plane"}
		},
			Policy: workloads, Want: "the Pod template sets nodeSelector, which the recipe leaves unset"},
		{Name: "with an affinity", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}}}}}}
		},
			Policy: workloads, Want: "the Pod template sets affinity, which the recipe leaves unset"},
		{Name: "with topology spread constraints", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule}}
		},
			Policy: workloads, Want: "the Pod template sets topologySpreadConstraints, which the recipe leaves unset"},
		{Name: "with scheduling gates", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/never"}}
		},
			Policy: workloads, Want: "the Pod template sets schedulingGates, which the recipe leaves unset"},
		{Name: "with readiness gates", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/never"}}
		},
			Policy: workloads, Want: "the Pod template sets readinessGates, which the recipe leaves unset"},
		{Name: "with a host alias of the primary", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.HostAliases = []corev1.HostAlias{{IP: "192.0.2.1", Hostnames: []string{"db-0.db-headless.ns.svc.cluster.local"}}}
		},
			Policy: workloads, Want: "the Pod template sets hostAliases, which the recipe leaves unset"},
		{Name: "with a resolver of its own", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.53"}}
		},
			Policy: workloads, Want: "the Pod template sets dnsConfig, which the recipe leaves unset"},
		{Name: "with the node's resolver", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.DNSPolicy = corev1.DNSDefault },
			Policy: workloads, Want: "the Pod template sets dnsPolicy, which the recipe leaves unset"},
		{Name: "with a hostname", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.Hostname = "other" },
			Policy: workloads, Want: "the Pod template sets hostname, which the recipe leaves unset"},
		{Name: "with a subdomain", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.Subdomain = "other-headless" },
			Policy: workloads, Want: "the Pod template sets subdomain, which the recipe leaves unset"},
		{Name: "sharing its process namespace", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.ShareProcessNamespace = ptr.To(true) },
			Policy: workloads, Want: "the Pod template sets shareProcessNamespace, which the recipe leaves unset"},
		{Name: "in the host's user namespace", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.HostUsers = ptr.To(true) },
			Policy: workloads, Want: "the Pod template sets hostUsers, which the recipe leaves unset"},
		{Name: "with another scheduler", Change: func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.SchedulerName = "my-scheduler" },
			Policy: workloads, Want: "the Pod template sets schedulerName, which the recipe leaves unset"},
		{Name: "giving its Pods another label", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Labels["app"] = "frontend"
		}, Policy: workloads, Want: "the Pod template has the labels app, which are not its Database's"},
		{Name: "controlled by another Database", Change: func(sts *appsv1.StatefulSet) {
			sts.OwnerReferences[0].Name = "other"
		}, Policy: workloads, Want: "its name must be its controller Database's"},
		{Name: "selecting another Database's Pods", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] = "other"
			sts.Spec.Template.Labels["app.kubernetes.io/instance"] = "other"
		}, Policy: workloads, Want: "its selector exactly the matchLabels", CreateOnly: true},
		{Name: "governed by another Service", Change: func(sts *appsv1.StatefulSet) { sts.Spec.ServiceName = "other-headless" },
			Policy: workloads, Want: "its serviceName must be", CreateOnly: true},
		{Name: "claiming an existing volume", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.VolumeClaimTemplates[0].Spec.VolumeName = "someone-elses"
		}, Policy: workloads, Want: "a volumeClaimTemplate is not named data, or sets volumeName, dataSource, dataSourceRef, selector or storageClassName", CreateOnly: true},
		{Name: "claiming from a data source", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.VolumeClaimTemplates[0].Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "theirs"}
		}, Policy: workloads, Want: "a volumeClaimTemplate is not named data, or sets volumeName, dataSource, dataSourceRef, selector or storageClassName", CreateOnly: true},
		{Name: "with Pods that never finish terminating", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Finalizers = []string{"example.com/never"}
		}, Policy: workloads, Want: "the Pod template sets finalizers or ownerReferences"},
		{Name: "claiming from a storage class of its choosing", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName = ptr.To("")
		}, Policy: workloads, Want: "a volumeClaimTemplate is not named data, or sets volumeName, dataSource, dataSourceRef, selector or storageClassName", CreateOnly: true},
		{Name: "claiming by a selector", Change: func(sts *appsv1.StatefulSet) {
			sts.Spec.VolumeClaimTemplates[0].Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "someone-else"}}
		}, Policy: workloads, Want: "a volumeClaimTemplate is not named data, or sets volumeName, dataSource, dataSourceRef, selector or storageClassName", CreateOnly: true},
	}
}
