package storage

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// Connection is what databases/{name}/connection serves for db: the facts of the
// credentials Secret (the controller's specs.Secret, specs.FillCredentials) a client needs,
// but for the password and the URIs, which it names the keys of: the client Service's host
// under the cluster DNS domain clusterDomain, the engine port, the read Service's host and
// the read URI's key while recipe replicates and replicas is more than one, the database,
// and from db's status the user (status.username, the Secret's as the controller wrote it;
// recipe.Username until then), the primary and whether its Ready condition is True.
func Connection(db *examplev1.Database, recipe engine.Recipe, replicas int32, clusterDomain string) *examplev1.DatabaseConnection {
	c := &examplev1.DatabaseConnection{
		TypeMeta:    metav1.TypeMeta{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "DatabaseConnection"},
		ObjectMeta:  metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace},
		Engine:      db.Spec.Engine,
		Host:        names.ServiceHost(db, clusterDomain, names.ClientServiceName(db)),
		Port:        recipe.Port,
		Database:    recipe.DatabaseName(db.Name),
		Username:    recipe.Username,
		SecretName:  names.SecretName(db),
		PasswordKey: names.SecretKeyPassword,
		URIKey:      names.SecretKeyURI,
		Primary:     db.Status.Primary,
		Ready:       meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionReady),
	}
	if db.Status.Username != "" {
		c.Username = db.Status.Username
	}
	if recipe.Replicates() && replicas > 1 {
		c.ReadHost = names.ServiceHost(db, clusterDomain, names.ReadServiceName(db))
		c.ReadURIKey = names.SecretKeyReadURI
	}
	return c
}
