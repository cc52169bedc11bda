package engine

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/apis/example/validation"
	"example.com/database-apiserver/pkg/catalog"
)

// Engine is everything the controller and the API server know of one engine but how its
// servers are reached, which is its Observer; the generic controller reaches an engine only
// through them. An engine package implements Engine and registers it (Register) from its
// init function, so a binary runs the engines whose packages it imports
// (pkg/engine/engines imports every one). Its driver package, beside it, registers its
// Observer (RegisterObserver): only the controller links the drivers.
type Engine interface {
	// Catalog is the engine's image, release lines and upgrade rules, which Register
	// registers in pkg/catalog.
	Catalog() catalog.Catalog
	// Recipe is how the engine runs in a StatefulSet: ports, users, probes, environment.
	Recipe() Recipe
	// ReplicationFiles are the files of the replication ConfigMap besides
	// ConfigMapKeyPrimary (setup scripts, client authentication rules), for an engine whose
	// Recipe replicates.
	ReplicationFiles(db *examplev1.Database, d Desired) map[string]string
	// ReplicationPod adds to tmpl, the Pod template of a Database whose engine replicates,
	// what replication needs: the setup init container, volumes, server arguments, settings,
	// and Pod template annotations for settings the server reads only when it starts (a
	// change makes a new revision, which the controller rolls out).
	ReplicationPod(db *examplev1.Database, d Desired, tmpl *corev1.PodTemplateSpec)
	// InitFiles are the scripts the image's entrypoint runs once, when it initialises an
	// empty data directory, as the files of the initialisation ConfigMap; nil for none.
	InitFiles(d Desired) map[string]string
}

// Validating is an Engine with rules of its own on a Database's spec, which Register
// registers with the API's validation (validation.RegisterEngineRules).
type Validating interface {
	ValidationRules() validation.EngineRules
}

var (
	registryMu sync.RWMutex
	registry   = map[examplev1.Engine]Engine{}
)

// Register makes e the engine of spec.engine e.Recipe().Engine, its Catalog that
// engine's catalog (catalog.Register), and its rules, if it is Validating, those the API's
// validation applies to it, with EngineRules.ElectsPrimary its recipe's ReplicaSet and
// EngineRules.Backups whether it implements Backups. It panics when that engine
// is registered already: two packages would claim the same Databases.
func Register(e Engine) {
	registryMu.Lock()
	defer registryMu.Unlock()
	name := e.Recipe().Engine
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("engine %q registered twice", name))
	}
	if c := e.Catalog(); c.Engine != name {
		panic(fmt.Sprintf("engine %q registers the catalog of %q", name, c.Engine))
	}
	catalog.Register(e.Catalog())
	var rules validation.EngineRules
	if v, ok := e.(Validating); ok {
		rules = v.ValidationRules()
	}
	rules.ElectsPrimary = e.Recipe().ReplicaSet
	_, rules.Backups = e.(Backups)
	validation.RegisterEngineRules(example.Engine(name), rules)
	registry[name] = e
}

// Unregister removes the engine of spec.engine name and its catalog; for tests that
// register an engine of their own.
func Unregister(name examplev1.Engine) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, ok := registry[name]; ok {
		catalog.Unregister(name)
		validation.UnregisterEngineRules(example.Engine(name))
	}
	delete(registry, name)
}

// Lookup returns the registered engine of spec.engine name, and false for none.
func Lookup(name examplev1.Engine) (Engine, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	e, ok := registry[name]
	return e, ok
}

// Registered lists the spec.engine values of the registered engines, sorted.
func Registered() []examplev1.Engine {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]examplev1.Engine, 0, len(registry))
	for name := range registry {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// For returns the recipe of the registered engine name, and false for an engine none
// registered.
func For(name examplev1.Engine) (Recipe, bool) {
	e, ok := Lookup(name)
	if !ok {
		return Recipe{}, false
	}
	return e.Recipe(), true
}

var (
	observersMu sync.RWMutex
	observers   = map[examplev1.Engine]Observer{}
)

// RegisterObserver makes o how the controller reaches the servers of spec.engine name: a
// Replicator for an engine whose primary the controller picks, a ReplicaSet for one whose
// members elect it. It panics when name has one: two drivers would answer for the same
// servers.
func RegisterObserver(name examplev1.Engine, o Observer) {
	observersMu.Lock()
	defer observersMu.Unlock()
	if _, dup := observers[name]; dup {
		panic(fmt.Sprintf("observer of engine %q registered twice", name))
	}
	observers[name] = o
}

// Observers are the registered Observers, by spec.engine.
func Observers() map[examplev1.Engine]Observer {
	observersMu.RLock()
	defer observersMu.RUnlock()
	return maps.Clone(observers)
}
