package engine

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Desired is what a Database's spec resolves to, as stored by the API server: its
// DatabaseDefaults admission plugin sets spec.replicas and spec.storage when a user omits
// them, and nothing here substitutes a default of its own.
type Desired struct {
	// Recipe is the engine's.
	Recipe Recipe
	// Image is the catalog's image for spec.version.
	Image string
	// Replicas is spec.replicas.
	Replicas int32
	// Storage is spec.storage as a quantity of bytes.
	Storage resource.Quantity
	// ClusterDomain is the cluster's DNS domain, which the names clients, standbys and
	// replica set members reach Services and Pods by end with (names.ServiceHost, names.PodHost):
	// names.DefaultClusterDomain from Resolve, the controller's --cluster-domain in a pass.
	ClusterDomain string
	// SuperuserSources are the address ranges the controller connects to the servers from,
	// its --superuser-sources: the engine's superuser logs in over the network from these
	// only. None: from any address.
	SuperuserSources []netip.Prefix
	// Backup is the store the Database is backed up to (spec.backup); nil when it is not.
	Backup *BackupStore
}

// Engine is the registered engine of d's recipe. It panics when none is: Desired comes from
// a recipe the registry gave.
func (d Desired) Engine() Engine {
	e, ok := Lookup(d.Recipe.Engine)
	if !ok {
		panic("no engine registered for " + string(d.Recipe.Engine))
	}
	return e
}
