package controllerpolicy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/controllerpolicy"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	controllerdb "example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/names"
)

// update is an update of db, or of its subresource, by user.
func update(user string, db, old *examplev1.Database, subresource string) controllerpolicy.Request {
	r := write(user, databaseK, databases, db, old)
	r.Subresource = subresource
	return r
}

// The controller adds and removes its finalizer and writes status; nothing else of a Database.
func TestDatabasesGetOnlyTheControllersFinalizerAndStatus(t *testing.T) {
	policies := loadPolicies(t)
	stored := database(examplev1.EnginePostgreSQL, "16", 3)
	stored.Finalizers = []string{"example.com/backup"}
	withFinalizer := stored.DeepCopy()
	withFinalizer.Finalizers = append(withFinalizer.Finalizers, "database.example.com/finalizer")
	status := withFinalizer.DeepCopy()
	status.Status.Phase = examplev1.DatabasePhaseReady
	for name, r := range map[string]controllerpolicy.Request{
		"the finalizer added":   update(controllerUser, withFinalizer, stored, ""),
		"the finalizer removed": update(namespacedUser, stored, withFinalizer, ""),
		"status":                update(controllerUser, status, withFinalizer, "status"),
	} {
		require.Empty(t, denials(t, policies, r), name)
	}
	const policy = "database-controller-databases"
	for _, tc := range []struct {
		name        string
		subresource string
		change      func(*examplev1.Database)
		want        string
	}{
		{"a spec change", "", func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](0) },
			"it may not change its spec, labels, annotations or ownerReferences"},
		{"a label", "", func(db *examplev1.Database) { db.Labels = map[string]string{"team": "other"} },
			"it may not change its spec, labels, annotations or ownerReferences"},
		{"an owner", "", func(db *examplev1.Database) {
			db.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "5c1e6a1e-9a53-4b8c-8f44-6a0a4e0b1a11"}}
		}, "it may not change its spec, labels, annotations or ownerReferences"},
		{"another finalizer removed", "", func(db *examplev1.Database) { db.Finalizers = db.Finalizers[1:] },
			"it may add or remove only the finalizer database.example.com/finalizer"},
		{"an annotation through status", "status", func(db *examplev1.Database) {
			db.Annotations = map[string]string{"note": "x"}
		}, "it may not change its spec, labels, annotations or ownerReferences"},
		{"its finalizer removed through status", "status", func(db *examplev1.Database) { db.Finalizers = db.Finalizers[:1] },
			"it may add or remove only the finalizer database.example.com/finalizer, and that not through status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := withFinalizer.DeepCopy()
			tc.change(db)
			requireDenied(t, policies, update(controllerUser, db, withFinalizer, tc.subresource), policy, tc.want)
		})
	}
	requireDenied(t, policies, write(controllerUser, databaseK, databases, stored, nil), policy, "database-controller may not create Database")
	deletion := controllerpolicy.Request{Operation: admission.Delete, OldObject: stored, Kind: databaseK, Resource: databases,
		Namespace: stored.Namespace, Name: stored.Name, User: controllerUser}
	requireDenied(t, policies, deletion, policy, "database-controller may not delete Database")
}

// releaseRecord is the release record the controller writes for db (released.go): entries
// maps UIDs to "<Kind> <name>".
func releaseRecord(db *examplev1.Database, entries map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "released." + db.Namespace + "." + db.Name, Namespace: "database-system",
			Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
			Annotations: map[string]string{"database.example.com/retained-from": db.Namespace + "/" + db.Name},
		},
		Data: entries,
	}
}

// Release records hold the Database's own children by UID, and nothing else.
func TestReleaseRecordsHoldOnlyTheirDatabasesChildren(t *testing.T) {
	policies := loadPolicies(t)
	db := database(examplev1.EnginePostgreSQL, "16", 3)
	const (
		secretUID = "0d4b5f1e-3c2a-4f6b-9e8d-7a6b5c4d3e2f"
		claimUID  = "1e5c6a2f-4d3b-4a7c-8f9e-8b7c6d5e4f3a"
	)
	first := releaseRecord(db, map[string]string{secretUID: "Secret my-database-credentials"})
	second := releaseRecord(db, map[string]string{secretUID: "Secret my-database-credentials", claimUID: "PersistentVolumeClaim data-my-database-12"})
	for name, r := range map[string]controllerpolicy.Request{
		"created":                 write(controllerUser, configMap, configMaps, first, nil),
		"an entry added":          write(controllerUser, configMap, configMaps, second, first),
		"an entry removed":        write(controllerUser, configMap, configMaps, first, second),
		"by its namespace's user": write(namespacedUser, configMap, configMaps, first, nil),
	} {
		require.Empty(t, denials(t, policies, r), name)
	}
	const policy = "database-controller-releases"
	for _, tc := range []struct {
		name   string
		user   string
		change func(*corev1.ConfigMap)
		want   string
	}{
		{"a name of three parts", controllerUser, func(cm *corev1.ConfigMap) { cm.Name = "released.production.my.database" },
			"a release record is named released.<namespace>.<database>"},
		{"an entry that is not a UID", controllerUser, func(cm *corev1.ConfigMap) { cm.Data["anything"] = "Secret my-database-credentials" },
			"the entries anything are not a UID mapped to Secret my-database-credentials or PersistentVolumeClaim data-my-database-<ordinal>"},
		{"another Database's Secret", controllerUser, func(cm *corev1.ConfigMap) { cm.Data[claimUID] = "Secret other-credentials" },
			"the entries " + claimUID + " are not"},
		{"a claim of another name", controllerUser, func(cm *corev1.ConfigMap) { cm.Data[claimUID] = "PersistentVolumeClaim data-my-database-01" },
			"the entries " + claimUID + " are not"},
		{"another kind", controllerUser, func(cm *corev1.ConfigMap) { cm.Data[claimUID] = "ServiceAccount default" },
			"the entries " + claimUID + " are not"},
		{"another label", controllerUser, func(cm *corev1.ConfigMap) { cm.Labels["app"] = "frontend" },
			"its only label must be app.kubernetes.io/managed-by=database-controller, its only annotation database.example.com/retained-from=production/my-database"},
		{"another Database's annotation", controllerUser, func(cm *corev1.ConfigMap) {
			cm.Annotations["database.example.com/retained-from"] = "production/other"
		}, "its only annotation database.example.com/retained-from=production/my-database"},
		{"binaryData", controllerUser, func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": {0}} },
			"and it has no binaryData"},
		{"another namespace's record", "system:serviceaccount:database-system:database-controller-staging", func(*corev1.ConfigMap) {},
			"system:serviceaccount:database-system:database-controller-staging may write only the release records of its own namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := first.DeepCopy()
			tc.change(cm)
			for _, old := range []k8sruntime.Object{nil, first} {
				requireDenied(t, policies, write(tc.user, configMap, configMaps, cm, old), policy, tc.want)
			}
		})
	}
}

// credentialsRecord is the credentials record the controller writes for db
// (credentialsrecord.go).
func credentialsRecord(db *examplev1.Database, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: controllerdb.CredentialsRecordName(db.Namespace, db.Name), Namespace: "database-system",
			Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
		},
		Data: data,
	}
}

// Credentials records hold the Secret's UID and the digests of the passwords given, nothing
// else; the controller may delete them, and no other ConfigMap of its namespace.
func TestCredentialsRecordsHoldOnlyTheSecretsUIDAndDigests(t *testing.T) {
	policies := loadPolicies(t)
	db := database(examplev1.EnginePostgreSQL, "16", 3)
	const (
		secretUID = "0d4b5f1e-3c2a-4f6b-9e8d-7a6b5c4d3e2f"
		digest    = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	)
	first := credentialsRecord(db, map[string]string{controllerdb.CredentialsKeySecretUID: secretUID, controllerdb.CredentialsKeyReplication: digest})
	second := credentialsRecord(db, map[string]string{controllerdb.CredentialsKeySecretUID: secretUID,
		controllerdb.CredentialsKeyReplication: digest, controllerdb.CredentialsKeyApplication: digest})
	for name, r := range map[string]controllerpolicy.Request{
		"created":                 write(controllerUser, configMap, configMaps, first, nil),
		"an entry added":          write(controllerUser, configMap, configMaps, second, first),
		"by its namespace's user": write(namespacedUser, configMap, configMaps, first, nil),
		"deleted": {Operation: admission.Delete, OldObject: second, Kind: configMap, Resource: configMaps,
			Namespace: "database-system", Name: second.Name, User: controllerUser},
	} {
		require.Empty(t, denials(t, policies, r), name)
	}
	const policy = "database-controller-credentials"
	for _, tc := range []struct {
		name   string
		user   string
		change func(*corev1.ConfigMap)
		want   string
	}{
		{"a name of three parts", controllerUser, func(cm *corev1.ConfigMap) { cm.Name = "credentials.production.my.database" },
			"a credentials record is named credentials.<namespace>.<database>"},
		{"another key", controllerUser, func(cm *corev1.ConfigMap) { cm.Data["password"] = "hunter2" },
			"nothing else; not so: password"},
		{"a password, not its digest", controllerUser, func(cm *corev1.ConfigMap) { cm.Data[controllerdb.CredentialsKeyApplication] = "hunter2" },
			"not so: application-password-sha256"},
		{"a secret-uid that is not a UID", controllerUser, func(cm *corev1.ConfigMap) { cm.Data[controllerdb.CredentialsKeySecretUID] = "my-database-credentials" },
			"not so: secret-uid"},
		{"no secret-uid", controllerUser, func(cm *corev1.ConfigMap) { delete(cm.Data, controllerdb.CredentialsKeySecretUID) },
			"it must hold secret-uid (a UID)"},
		{"another label", controllerUser, func(cm *corev1.ConfigMap) { cm.Labels["app"] = "frontend" },
			"its only label must be app.kubernetes.io/managed-by=database-controller"},
		{"an annotation", controllerUser, func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"note": "x"} },
			"and it has no annotations and no binaryData"},
		{"binaryData", controllerUser, func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": {0}} },
			"and it has no annotations and no binaryData"},
		{"another namespace's record", "system:serviceaccount:database-system:database-controller-staging", func(*corev1.ConfigMap) {},
			"system:serviceaccount:database-system:database-controller-staging may write only the credentials records of its own namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := first.DeepCopy()
			tc.change(cm)
			for _, old := range []k8sruntime.Object{nil, first} {
				requireDenied(t, policies, write(tc.user, configMap, configMaps, cm, old), policy, tc.want)
			}
		})
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "database-system",
		Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}}}
	requireDenied(t, policies, controllerpolicy.Request{Operation: admission.Delete, OldObject: other, Kind: configMap, Resource: configMaps,
		Namespace: "database-system", Name: other.Name, User: controllerUser}, "database-controller-deletes", "database-system is a system namespace")
}

// recorded is the Event the controller's recorder (client-go's record package, Source
// component database-controller) makes about the object ref.
func recorded(ref corev1.ObjectReference) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: ref.Name + ".18a2b3c4d5e6f708", Namespace: ref.Namespace},
		InvolvedObject:      ref,
		Reason:              "Created",
		Message:             "Created Secret my-database-credentials",
		Source:              corev1.EventSource{Component: "database-controller"},
		ReportingController: "database-controller",
		FirstTimestamp:      now, LastTimestamp: now, Count: 1, Type: corev1.EventTypeNormal,
	}
}

// The controller's Events are about its Databases, in their namespaces, or its Lease.
func TestEventsAreAboutDatabasesOrTheControllersLease(t *testing.T) {
	policies := loadPolicies(t)
	onDatabase := recorded(corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "Database", Namespace: "production",
		Name: "my-database", UID: "0b6b3a4e-7d3c-4a8e-9f00-5d2a1c3b4e5f"})
	onLease := recorded(corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: "database-system",
		Name: "database-controller"})
	onNamespacedLease := recorded(corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: "database-system",
		Name: "database-controller-production"})
	counted := onDatabase.DeepCopy()
	counted.Count = 2
	for name, r := range map[string]controllerpolicy.Request{
		"on a Database":                write(controllerUser, event, events, onDatabase, nil),
		"counted again":                write(controllerUser, event, events, counted, onDatabase),
		"on its Lease":                 write(controllerUser, event, events, onLease, nil),
		"on a namespaced controller's": write(namespacedUser, event, events, onNamespacedLease, nil),
	} {
		require.Empty(t, denials(t, policies, r), name)
	}
	const about = "not an example.com/v1 Database of its namespace outside the system namespaces, nor its Lease in database-system"
	for _, tc := range []struct {
		name   string
		event  *corev1.Event
		change func(*corev1.Event)
		want   string
	}{
		{"on a Pod", onDatabase, func(e *corev1.Event) { e.InvolvedObject.APIVersion, e.InvolvedObject.Kind = "v1", "Pod" }, about},
		{"in kube-system", onDatabase, func(e *corev1.Event) { e.Namespace, e.InvolvedObject.Namespace = "kube-system", "kube-system" }, about},
		{"in another namespace than the Database's", onDatabase, func(e *corev1.Event) { e.Namespace = "staging" }, about},
		{"on another Lease", onLease, func(e *corev1.Event) { e.InvolvedObject.Name = "kube-scheduler" }, about},
		{"on a Lease elsewhere", onLease, func(e *corev1.Event) { e.Namespace, e.InvolvedObject.Namespace = "production", "production" }, about},
		{"as the kubelet", onDatabase, func(e *corev1.Event) { e.Source.Component = "kubelet" },
			"its source.component and reportingComponent must be database-controller"},
		{"reported by another controller", onDatabase, func(e *corev1.Event) { e.ReportingController = "kubelet" },
			"its source.component and reportingComponent must be database-controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.event.DeepCopy()
			tc.change(e)
			requireDenied(t, policies, write(controllerUser, event, events, e, nil), "database-controller-events", tc.want)
		})
	}
}
