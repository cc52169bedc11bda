package specs

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// readyCondition is the status condition that says a Database takes connections.
const readyCondition = "Ready"

// Connection is what databases/{name}/connection serves for db: the facts of the
// credentials Secret (Secret, FillCredentials) a client needs, but for the password and the
// URIs, which it names the keys of: the client Service's host, the engine port, the read
// Service's host and the read URI's key while d replicates and has more than one replica,
// the database, and from db's status the user (status.username, the Secret's as the
// controller wrote it; Recipe.Username until then), the primary and whether its Ready
// condition is True. Only d.Recipe, d.Replicas and d.ClusterDomain are read.
func Connection(db *examplev1.Database, d Desired) *examplev1.DatabaseConnection {
	c := &examplev1.DatabaseConnection{
		TypeMeta:    metav1.TypeMeta{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "DatabaseConnection"},
		ObjectMeta:  metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace},
		Engine:      db.Spec.Engine,
		Host:        ServiceHost(db, d.ClusterDomain, ClientServiceName(db)),
		Port:        d.Recipe.Port,
		Database:    d.Recipe.DatabaseName(db.Name),
		Username:    d.Recipe.Username,
		SecretName:  SecretName(db),
		PasswordKey: engine.SecretKeyPassword,
		URIKey:      engine.SecretKeyURI,
		Primary:     db.Status.Primary,
		Ready:       meta.IsStatusConditionTrue(db.Status.Conditions, readyCondition),
	}
	if db.Status.Username != "" {
		c.Username = db.Status.Username
	}
	if d.Recipe.Replicates() && d.Replicas > 1 {
		c.ReadHost = ServiceHost(db, d.ClusterDomain, ReadServiceName(db))
		c.ReadURIKey = engine.SecretKeyReadURI
	}
	return c
}
