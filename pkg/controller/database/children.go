package database

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/engine"
)

// The Kubernetes recommended labels
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
const (
	nameLabel      = "app.kubernetes.io/name"
	instanceLabel  = "app.kubernetes.io/instance"
	versionLabel   = "app.kubernetes.io/version"
	componentLabel = "app.kubernetes.io/component"
	partOfLabel    = "app.kubernetes.io/part-of"

	componentValue = "database"
	partOfValue    = "database-apiserver"
)

// Fallbacks for a Database stored without the DatabaseDefaults admission plugin's defaults:
// the seed's Default() webhook values (replicas 1, storage "10Gi").
const (
	fallbackReplicas int32 = 1
	fallbackStorage        = "10Gi"
)

// databaseGVK is the group, version and kind our owner references name.
var databaseGVK = examplev1.SchemeGroupVersion.WithKind("Database")

// Child names, from the Database's name (issue #4).
func secretName(db *examplev1.Database) string          { return db.Name + "-credentials" }
func headlessServiceName(db *examplev1.Database) string { return db.Name + "-headless" }
func clientServiceName(db *examplev1.Database) string   { return db.Name }
func statefulSetName(db *examplev1.Database) string     { return db.Name }
func pdbName(db *examplev1.Database) string             { return db.Name }

// claimOrdinal is the ordinal of the data claim named claimName of db, and false when the
// name is not "data-<name>-<ordinal>", as the StatefulSet controller names the claims of the
// volumeClaimTemplate engine.DataVolumeName.
func claimOrdinal(db *examplev1.Database, claimName string) (int32, bool) {
	database, ordinal, ok := parseDataClaimName(claimName)
	if !ok || database != statefulSetName(db) {
		return 0, false
	}
	return ordinal, true
}

// dataClaimName is the name of db's data claim of ordinal: "data-<name>-<ordinal>".
func dataClaimName(db *examplev1.Database, ordinal int32) string {
	return claimName(engine.DataVolumeName, statefulSetName(db), ordinal)
}

// claimName is the name the StatefulSet controller gives the claim of ordinal made from the
// volumeClaimTemplate template of the StatefulSet statefulSet: "<template>-<statefulSet>-<ordinal>".
func claimName(template, statefulSet string, ordinal int32) string {
	return template + "-" + statefulSet + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// parseDataClaimName splits a data claim name "data-<database>-<ordinal>": the database is
// what lies between "data-" and the last "-", so "data-a-b-0" is ordinal 0 of "a-b" (an
// ordinal has no "-", so no other split is possible). ok is false for any other name, an
// empty database, or an ordinal that is not a decimal int32 written without leading zeros
// (the StatefulSet controller's form).
func parseDataClaimName(claimName string) (database string, ordinal int32, ok bool) {
	rest, ok := strings.CutPrefix(claimName, engine.DataVolumeName+"-")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", 0, false
	}
	digits := rest[i+1:]
	n, err := strconv.ParseUint(digits, 10, 31)
	if err != nil || (digits != "0" && digits[0] == '0') {
		return "", 0, false
	}
	return rest[:i], int32(n), true
}

// ProtectFinalizer is on db's data claims and credentials Secret while spec.deletionPolicy
// is DoNotTerminate, so that nothing (a namespace deletion, a kubectl delete) removes them
// until the policy changes.
const ProtectFinalizer = "database.example.com/protect"

// RetainedFromAnnotation marks a claim or Secret that deletionPolicy Retain released from a
// Database, with its "<namespace>/<name>": a new Database of that name adopts it.
const RetainedFromAnnotation = "database.example.com/retained-from"

// retainedKey is the value of RetainedFromAnnotation for db's children.
func retainedKey(db *examplev1.Database) string { return db.Namespace + "/" + db.Name }

// isRetainedFor reports whether obj was released by a Retain of a Database named as db, of
// the same engine (its data would not start another), and nothing controls it since: db may
// adopt it.
func isRetainedFor(obj metav1.Object, db *examplev1.Database) bool {
	engine, labelled := obj.GetLabels()[nameLabel]
	return metav1.GetControllerOf(obj) == nil && obj.GetAnnotations()[RetainedFromAnnotation] == retainedKey(db) &&
		(!labelled || engine == string(db.Spec.Engine))
}

// adopt makes db the controller of obj, a child retained for it (isRetainedFor), and
// removes the mark.
func adopt(obj metav1.Object, db *examplev1.Database, ref metav1.OwnerReference) {
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), ref))
	annotations := obj.GetAnnotations()
	delete(annotations, RetainedFromAnnotation)
	obj.SetAnnotations(annotations)
}

// protected reports whether db's data must carry ProtectFinalizer.
func protected(db *examplev1.Database) bool {
	return db.Spec.DeletionPolicy == examplev1.DeletionPolicyDoNotTerminate
}

// setProtection adds ProtectFinalizer to obj or removes it, and reports whether it changed.
func setProtection(obj metav1.Object, present bool) bool {
	finalizers := obj.GetFinalizers()
	if slices.Contains(finalizers, ProtectFinalizer) == present {
		return false
	}
	if present {
		obj.SetFinalizers(append(finalizers, ProtectFinalizer))
	} else {
		obj.SetFinalizers(slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == ProtectFinalizer }))
	}
	return true
}

// selectorLabels select db's Pods: only labels that never change (the engine is immutable),
// and managed-by, so a chart using the same recommended name and instance labels never
// shares our Pods (nor our Services' endpoints).
func selectorLabels(db *examplev1.Database) map[string]string {
	return map[string]string{nameLabel: string(db.Spec.Engine), instanceLabel: db.Name, ManagedByLabel: ManagedByValue}
}

// childLabels are on every child: the selector labels, component, part-of and managed-by.
func childLabels(db *examplev1.Database) map[string]string {
	l := selectorLabels(db)
	l[componentLabel] = componentValue
	l[partOfLabel] = partOfValue
	return l
}

// workloadLabels are on the StatefulSet and its Pods: childLabels and the version they run.
// Only there, so a version change rewrites no other child.
func workloadLabels(db *examplev1.Database) map[string]string {
	l := childLabels(db)
	l[versionLabel] = db.Spec.Version
	return l
}

// podSelector is status.selector: the Pods' label selector in string form.
func podSelector(db *examplev1.Database) string {
	return labels.SelectorFromSet(selectorLabels(db)).String()
}

// isControlledBy reports whether obj's controller reference is db (by UID).
func isControlledBy(obj metav1.Object, db *examplev1.Database) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == db.UID
}

// objectMeta is the metadata of a child named name: db's namespace, labels, and db as
// controller (controller and blockOwnerDeletion true).
func objectMeta(db *examplev1.Database, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       db.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(db, databaseGVK)},
	}
}

// desiredState is what a Database's spec resolves to.
type desiredState struct {
	recipe engine.Recipe
	// image is the catalog's image for spec.version.
	image string
	// replicas is spec.replicas.
	replicas int32
	// storage is spec.storage as a quantity of bytes.
	storage resource.Quantity
}

// resolve checks db's spec against the catalog and the engine recipes. A spec the controller
// cannot run is a failure (the API server's validation should have refused it; the catalog
// may have changed since).
func resolve(db *examplev1.Database) (desiredState, error) {
	release, err := catalog.Lookup(example.Engine(db.Spec.Engine), db.Spec.Version)
	if errors.Is(err, catalog.ErrUnknownEngine) {
		return desiredState{}, &failure{reason: ReasonInvalidSpec, message: "spec.engine: " + err.Error()}
	}
	if err != nil {
		return desiredState{}, &failure{reason: ReasonUnsupportedVersion, message: "spec.version: " + err.Error()}
	}
	recipe, ok := engine.For(db.Spec.Engine)
	if !ok {
		return desiredState{}, &failure{reason: ReasonInvalidSpec, message: fmt.Sprintf("spec.engine: the controller has no recipe for engine %q", db.Spec.Engine)}
	}
	storage := db.Spec.Storage
	if storage == "" {
		storage = fallbackStorage
	}
	gi, err := example.ParseStorage(storage)
	if err == nil && gi == 0 {
		err = fmt.Errorf("storage %q must be at least 1Gi", storage)
	}
	if err != nil {
		return desiredState{}, &failure{reason: ReasonInvalidSpec, message: "spec.storage: " + err.Error()}
	}
	return desiredState{
		recipe:   recipe,
		image:    release.Image,
		replicas: ptr.Deref(db.Spec.Replicas, fallbackReplicas),
		storage:  *resource.NewQuantity(gi<<30, resource.BinarySI),
	}, nil
}

// newCredentials returns the Secret data for a new user with password: every key of the
// engine package's SecretKey* that applies to the engine.
func newCredentials(db *examplev1.Database, d desiredState, password string) map[string][]byte {
	data := map[string][]byte{
		engine.SecretKeyUsername: []byte(d.recipe.Username),
		engine.SecretKeyPassword: []byte(password),
	}
	fillCredentials(db, d, data)
	return data
}

// fillCredentials sets the keys that follow from the Database and the user and password
// already in data (host, port, database, uri), so a password edited by hand is reflected in
// the uri; it never changes the username or the password.
func fillCredentials(db *examplev1.Database, d desiredState, data map[string][]byte) {
	host := clientServiceName(db) + "." + db.Namespace + ".svc"
	database := d.recipe.DatabaseName(db.Name)
	derived := map[string]string{
		engine.SecretKeyHost: host,
		engine.SecretKeyPort: strconv.Itoa(int(d.recipe.Port)),
		engine.SecretKeyURI:  d.recipe.URI(string(data[engine.SecretKeyUsername]), string(data[engine.SecretKeyPassword]), host, database),
	}
	if database != "" {
		derived[engine.SecretKeyDatabase] = database
	}
	for k, v := range derived {
		data[k] = []byte(v)
	}
}

// newSecret is the credentials Secret "<name>-credentials".
func newSecret(db *examplev1.Database, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objectMeta(db, secretName(db), childLabels(db)),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

func servicePorts(d desiredState) []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name:       d.recipe.PortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       d.recipe.Port,
		TargetPort: intstr.FromString(d.recipe.PortName),
	}}
}

// newHeadlessService is "<name>-headless", the StatefulSet's governing Service: stable DNS
// names for every Pod, ready or not (peers must find each other during startup).
func newHeadlessService(db *examplev1.Database, d desiredState) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(db, headlessServiceName(db), childLabels(db)),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 selectorLabels(db),
			Ports:                    servicePorts(d),
		},
	}
}

// newClientService is "<name>", the ClusterIP Service clients connect to (the Secret's host).
// It routes to the first Pod only: the replicas do not replicate data between them yet, so
// spreading connections over them would split one database's writes across several.
func newClientService(db *examplev1.Database, d desiredState) *corev1.Service {
	selector := selectorLabels(db)
	selector[appsv1.StatefulSetPodNameLabel] = statefulSetName(db) + "-0"
	return &corev1.Service{
		ObjectMeta: objectMeta(db, clientServiceName(db), childLabels(db)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    servicePorts(d),
		},
	}
}

// syncService copies the fields the Reconciler owns from want into have: our labels, type,
// ports, selector and publishNotReadyAddresses. The cluster IP is immutable and kept.
func syncService(have, want *corev1.Service) {
	have.Labels = mergeLabels(have.Labels, want.Labels)
	have.Spec.Type = want.Spec.Type
	have.Spec.Ports = want.Spec.Ports
	have.Spec.Selector = want.Spec.Selector
	have.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
}

// newPodDisruptionBudget is "<name>", allowing one Pod down at a time (for replicas > 1).
func newPodDisruptionBudget(db *examplev1.Database) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(db, pdbName(db), childLabels(db)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(db)},
		},
	}
}

// syncPodDisruptionBudget copies our labels, maxUnavailable and selector from want into have.
func syncPodDisruptionBudget(have, want *policyv1.PodDisruptionBudget) {
	have.Labels = mergeLabels(have.Labels, want.Labels)
	have.Spec.MinAvailable = nil
	have.Spec.MaxUnavailable = want.Spec.MaxUnavailable
	have.Spec.Selector = want.Spec.Selector
}

// newStatefulSet is "<name>", per DESIGN.md's engine table: the catalog's image, credentials
// from the Secret, the engine's probes and data mount, fsGroup, OrderedReady Pods behind the
// headless Service, and a volumeClaimTemplate engine.DataVolumeName of spec.storage.
//
// The claim template carries db as controller so the StatefulSet controller creates each
// PersistentVolumeClaim owned by the Database (it copies the template's metadata): the
// deletion policy decides their fate, not the StatefulSet's. blockOwnerDeletion is false
// there because the StatefulSet controller, not us, creates the claims, and may not set it
// on an example.com owner where OwnerReferencesPermissionEnforcement is on.
//
// The Reconciler creates the claims of the ordinals the StatefulSet is about to mount itself,
// from this template (newDataClaim), so that the StatefulSet controller never creates one:
// it mounts whatever claim has the name, and a foreign one could take it in between.
func newStatefulSet(db *examplev1.Database, d desiredState) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: objectMeta(db, statefulSetName(db), workloadLabels(db)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(d.replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: selectorLabels(db)},
			ServiceName:         headlessServiceName(db),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: workloadLabels(db)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{d.recipe.Container(d.image, secretName(db))},
					SecurityContext: &corev1.PodSecurityContext{
						FSGroup: ptr.To(d.recipe.FSGroup),
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
					Labels:          childLabels(db),
					OwnerReferences: []metav1.OwnerReference{claimOwner(db)},
				},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: d.storage},
					},
				},
			}},
		},
	}
}

// newDataClaim is the data claim of ordinal of the StatefulSet sts (newStatefulSet) exactly as
// the StatefulSet controller makes it (getPersistentVolumeClaims in
// k8s.io/kubernetes/pkg/controller/statefulset): the volumeClaimTemplate engine.DataVolumeName
// named "<template>-<statefulset>-<ordinal>" in the StatefulSet's namespace, with the
// StatefulSet's selector labels added to the template's; metadata (owner reference,
// annotations) and spec otherwise the template's.
func newDataClaim(sts *appsv1.StatefulSet, ordinal int32) *corev1.PersistentVolumeClaim {
	var claim *corev1.PersistentVolumeClaim
	for i := range sts.Spec.VolumeClaimTemplates {
		if sts.Spec.VolumeClaimTemplates[i].Name == engine.DataVolumeName {
			claim = sts.Spec.VolumeClaimTemplates[i].DeepCopy()
		}
	}
	if claim == nil {
		panic("newDataClaim: the StatefulSet has no volumeClaimTemplate " + engine.DataVolumeName)
	}
	claim.Name = claimName(claim.Name, sts.Name, ordinal)
	claim.Namespace = sts.Namespace
	claim.Labels = mergeLabels(claim.Labels, sts.Spec.Selector.MatchLabels)
	return claim
}

// syncStatefulSet copies the fields the Reconciler owns from want into have: labels,
// replicas, the Pod template's labels, security context fields, token and service-link
// settings, and the database container's image, ports, environment, mounts, resources and
// probes. Everything else (fields the API server defaults, other containers, annotations
// such as kubectl's restartedAt) is kept, so a StatefulSet read back compares equal. The
// selector, serviceName, podManagementPolicy and volumeClaimTemplates are immutable.
func syncStatefulSet(have, want *appsv1.StatefulSet) {
	have.Labels = mergeLabels(have.Labels, want.Labels)
	have.Spec.Replicas = want.Spec.Replicas

	tmpl, wantTmpl := &have.Spec.Template, &want.Spec.Template
	tmpl.Labels = mergeLabels(tmpl.Labels, wantTmpl.Labels)
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

// containerImage is the image of the database container, "" if there is none.
func containerImage(sts *appsv1.StatefulSet) string {
	if i := containerIndex(sts.Spec.Template.Spec.Containers, engine.ContainerName); i >= 0 {
		return sts.Spec.Template.Spec.Containers[i].Image
	}
	return ""
}

// claimTemplateStorage is the storage request of the data volumeClaimTemplate.
func claimTemplateStorage(sts *appsv1.StatefulSet) (resource.Quantity, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == engine.DataVolumeName {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}

// mergeLabels returns have with every label of want set to want's value.
func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = make(map[string]string, len(want))
	}
	maps.Copy(have, want)
	return have
}
