package specs

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// Children are the objects the controller creates for a Database that has none yet, but for
// the data claims (DataClaim).
type Children struct {
	Secret          *corev1.Secret
	HeadlessService *corev1.Service
	ClientService   *corev1.Service
	StatefulSet     *appsv1.StatefulSet
	// ReplicationConfigMap is nil for an engine that does not replicate (engine.Recipe.Replicates), and
	// ReadService also while replicas is 1.
	ReplicationConfigMap *corev1.ConfigMap
	ReadService          *corev1.Service
	// InitConfigMap is nil for an engine without initialisation scripts (HasInitConfigMap).
	InitConfigMap *corev1.ConfigMap
	// PodDisruptionBudget is nil when replicas is 1.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
	// NetworkPolicy is nil while spec.networkPolicy is unset.
	NetworkPolicy *networkingv1.NetworkPolicy
}

// NewChildren builds the children of db exactly as a controller running in the namespace
// controllerNamespace builds them on its first passes, with password as every password of
// the credentials Secret. It fails as Resolve does.
func NewChildren(db *examplev1.Database, password, controllerNamespace string) (Children, error) {
	d, err := Resolve(db)
	if err != nil {
		return Children{}, err
	}
	c := Children{
		Secret:          Secret(db, d, Passwords{Application: password, Superuser: password, Replication: password}),
		HeadlessService: HeadlessService(db, d),
		ClientService:   ClientService(db, d),
		StatefulSet:     StatefulSet(db, d),
		InitConfigMap:   InitConfigMap(db, d),
	}
	if db.Spec.NetworkPolicy != nil {
		c.NetworkPolicy = NetworkPolicy(db, d, controllerNamespace)
	}
	if d.Recipe.Replicates() {
		c.ReplicationConfigMap = ReplicationConfigMap(db, d, PodName(db, 0))
		if d.Replicas > 1 {
			c.ReadService = ReadService(db, d)
		}
	}
	if d.Replicas > 1 {
		c.PodDisruptionBudget = PodDisruptionBudget(db)
	}
	return c, nil
}

// Passwords are the passwords of a new credentials Secret.
type Passwords struct {
	// Application is the application user's, Superuser the superuser's, Replication the
	// replication role's.
	Application, Superuser, Replication string
}

// Secret is the credentials Secret "<name>-credentials" for a new Database: the application
// user and the superuser with their passwords, and a replication role on an engine that
// replicates: every key of the engine package's SecretKey* that applies to the engine.
func Secret(db *examplev1.Database, d Desired, passwords Passwords) *corev1.Secret {
	data := map[string][]byte{
		names.SecretKeyUsername:          []byte(d.Recipe.Username),
		names.SecretKeyPassword:          []byte(passwords.Application),
		names.SecretKeySuperuserUsername: []byte(d.Recipe.SuperuserUsername),
		names.SecretKeySuperuserPassword: []byte(passwords.Superuser),
	}
	SetReplicationCredentials(d, data, passwords.Replication)
	FillCredentials(db, d, data)
	return &corev1.Secret{
		ObjectMeta: objectMeta(db, names.SecretName(db), ChildLabels(db)),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// FillCredentials sets the keys of the credentials that follow from the Database and the
// user and password already in data (host, port, database, uri; read-host and read-uri while
// replicas > 1 on an engine that replicates, removed otherwise), so a password edited by hand
// is reflected in the URIs; it never changes the usernames or the passwords.
func FillCredentials(db *examplev1.Database, d Desired, data map[string][]byte) {
	host := names.ServiceHost(db, d.ClusterDomain, names.ClientServiceName(db))
	database := d.Recipe.DatabaseName(db.Name)
	user, password := string(data[names.SecretKeyUsername]), string(data[names.SecretKeyPassword])
	uriDatabase := database
	if d.Recipe.UsersPerDatabase && user == string(data[names.SecretKeySuperuserUsername]) {
		// The superuser belongs to admin: the URI names no database, as it did before the
		// application user.
		uriDatabase = ""
	}
	derived := map[string]string{
		names.SecretKeyHost: host,
		names.SecretKeyPort: strconv.Itoa(int(d.Recipe.Port)),
		names.SecretKeyURI:  d.Recipe.URI(user, password, host, uriDatabase),
	}
	if database != "" {
		derived[names.SecretKeyDatabase] = database
	}
	delete(data, names.SecretKeyReadHost)
	delete(data, names.SecretKeyReadURI)
	if d.Recipe.Replicates() && d.Replicas > 1 {
		readHost := names.ServiceHost(db, d.ClusterDomain, names.ReadServiceName(db))
		derived[names.SecretKeyReadHost] = readHost
		derived[names.SecretKeyReadURI] = d.Recipe.ReadURI(user, password, readHost, uriDatabase)
	}
	for k, v := range derived {
		data[k] = []byte(v)
	}
}

// MigrateCredentials gives data, a Secret written before the superuser keys (it has neither
// SecretKeySuperuserUsername nor SecretKeySuperuserPassword), the keys the engine's data directory needs, and reports
// whether it changed anything. The superuser is the one the data directory holds: the old
// username and password where they were the superuser's (SuperuserWasUsername), else
// SuperuserUsername with the old password (the application user's, where the old username
// was not the superuser's). The application user becomes Recipe.Username with
// applicationPassword only where the controller creates it over SQL (not
// ApplicationUserAtInit: the role is created with it as soon as the primary answers);
// elsewhere the old user stays, since the image initialises users once, on an empty data
// directory: it already is the one the image made, with the superuser's password, or the
// superuser itself (whose URI keeps the superuser's authSource where users belong to a
// database).
func MigrateCredentials(d Desired, data map[string][]byte, applicationPassword string) bool {
	if len(data[names.SecretKeySuperuserPassword]) > 0 || len(data[names.SecretKeySuperuserUsername]) > 0 {
		return false
	}
	superuser := d.Recipe.SuperuserUsername
	if d.Recipe.SuperuserWasUsername && len(data[names.SecretKeyUsername]) > 0 {
		superuser = string(data[names.SecretKeyUsername])
	}
	data[names.SecretKeySuperuserUsername] = []byte(superuser)
	data[names.SecretKeySuperuserPassword] = data[names.SecretKeyPassword]
	if !d.Recipe.ApplicationUserAtInit {
		data[names.SecretKeyUsername] = []byte(d.Recipe.Username)
		data[names.SecretKeyPassword] = []byte(applicationPassword)
	}
	return true
}

// SetReplicationCredentials sets, for an engine with a replication role, the role's username
// and, when data has none, password (a new one: the primary's role is created with the
// password the Secret holds when it is first seen, and never changed); for a replica set
// (engine.Recipe.ReplicaSet), the members' shared key names.SecretKeyKeyFile when data has
// none, password (crypto/rand's Text: base32 characters, all of base64's alphabet, as a
// keyfile must be). It leaves data alone otherwise.
func SetReplicationCredentials(d Desired, data map[string][]byte, password string) {
	switch {
	case d.Recipe.ReplicationUsername != "":
		data[names.SecretKeyReplicationUsername] = []byte(d.Recipe.ReplicationUsername)
		if len(data[names.SecretKeyReplicationPassword]) == 0 {
			data[names.SecretKeyReplicationPassword] = []byte(password)
		}
	case d.Recipe.ReplicaSet:
		if len(data[names.SecretKeyKeyFile]) == 0 {
			data[names.SecretKeyKeyFile] = []byte(password)
		}
	}
}

func servicePorts(d Desired) []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name:       d.Recipe.PortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       d.Recipe.Port,
		TargetPort: intstr.FromString(d.Recipe.PortName),
	}}
}

// HeadlessService is "<name>-headless", the StatefulSet's governing Service: stable DNS
// names for every Pod, ready or not (peers must find each other during startup).
func HeadlessService(db *examplev1.Database, d Desired) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(db, names.HeadlessServiceName(db), ChildLabels(db)),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 names.SelectorLabels(db),
			Ports:                    servicePorts(d),
		},
	}
}

// ClientService is "<name>", the ClusterIP Service clients connect to (the Secret's host).
// On an engine that replicates it routes to the primary only, the Pod the controller labels
// RoleLabel RolePrimary. On another it routes to the first Pod only: those replicas do not
// replicate data between them, so spreading connections over them would split one
// database's writes across several.
func ClientService(db *examplev1.Database, d Desired) *corev1.Service {
	selector := names.SelectorLabels(db)
	if d.Recipe.Replicates() {
		selector[RoleLabel] = RolePrimary
	} else {
		selector[appsv1.StatefulSetPodNameLabel] = PodName(db, 0)
	}
	return clusterIPService(db, d, names.ClientServiceName(db), selector)
}

// clusterIPService is db's ClusterIP Service named name, on the engine port, routing to the
// Pods selector selects.
func clusterIPService(db *examplev1.Database, d Desired, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(db, name, ChildLabels(db)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    servicePorts(d),
		},
	}
}

// SyncService copies the fields the controller owns from want into have: our labels, type,
// ports, selector and publishNotReadyAddresses. The cluster IP is immutable and kept.
func SyncService(have, want *corev1.Service) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Spec.Type = want.Spec.Type
	have.Spec.Ports = want.Spec.Ports
	have.Spec.Selector = want.Spec.Selector
	have.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
}

// PodDisruptionBudget is "<name>", allowing one Pod down at a time (for replicas > 1).
func PodDisruptionBudget(db *examplev1.Database) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(db, PodDisruptionBudgetName(db), ChildLabels(db)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: names.SelectorLabels(db)},
		},
	}
}

// SyncPodDisruptionBudget copies our labels, maxUnavailable and selector from want into have.
func SyncPodDisruptionBudget(have, want *policyv1.PodDisruptionBudget) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Spec.MinAvailable = nil
	have.Spec.MaxUnavailable = want.Spec.MaxUnavailable
	have.Spec.Selector = want.Spec.Selector
}
