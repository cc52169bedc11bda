package specs

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
	"example.com/database-apiserver/pkg/storagesize"
)

// Errors Resolve wraps, for errors.Is; the messages name the field and say what is wrong.
var (
	// ErrUnsupportedVersion: spec.version names no release of the engine's catalog.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrInvalidSpec: another field cannot be run: an engine without catalog or recipe,
	// spec.replicas unset, or spec.storage unset or not a size of at least 1Gi.
	ErrInvalidSpec = errors.New("invalid spec")
)

// fieldError is an error of Resolve about one field of the spec: "<field>: <err>". It wraps
// both kind, the sentinel, and err, the cause (a catalog error, say).
type fieldError struct {
	field string
	kind  error
	err   error
}

func (e *fieldError) Error() string   { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() []error { return []error{e.kind, e.err} }

// Desired is what a Database's spec resolves to (engine.Desired).
type Desired = engine.Desired

// Resolve checks db's spec against the catalog and the engine recipes. A spec the
// controller cannot run (the API server's validation should have refused it, but the
// catalog may have changed since) is an error wrapping ErrUnsupportedVersion or
// ErrInvalidSpec.
func Resolve(db *examplev1.Database) (Desired, error) {
	release, err := catalog.Lookup(db.Spec.Engine, db.Spec.Version)
	if errors.Is(err, catalog.ErrUnknownEngine) {
		return Desired{}, &fieldError{"spec.engine", ErrInvalidSpec, err}
	}
	if err != nil {
		return Desired{}, &fieldError{"spec.version", ErrUnsupportedVersion, err}
	}
	recipe, ok := engine.For(db.Spec.Engine)
	if !ok {
		return Desired{}, &fieldError{"spec.engine", ErrInvalidSpec, fmt.Errorf("the controller has no recipe for engine %q", db.Spec.Engine)}
	}
	if db.Spec.Replicas == nil {
		return Desired{}, &fieldError{"spec.replicas", ErrInvalidSpec, errNotSet}
	}
	if db.Spec.Storage == "" {
		return Desired{}, &fieldError{"spec.storage", ErrInvalidSpec, errNotSet}
	}
	gi, err := storagesize.Parse(db.Spec.Storage)
	if err == nil && gi == 0 {
		err = fmt.Errorf("storage %q must be at least 1Gi", db.Spec.Storage)
	}
	if err != nil {
		return Desired{}, &fieldError{"spec.storage", ErrInvalidSpec, err}
	}
	return Desired{
		Recipe:        recipe,
		Image:         release.Image,
		Replicas:      *db.Spec.Replicas,
		Storage:       *resource.NewQuantity(gi<<30, resource.BinarySI),
		ClusterDomain: names.DefaultClusterDomain,
	}, nil
}

// ImageFrom is image pulled from registry ("registry.example:5000/mirror"): "<registry>/<image>",
// so "server:15" is "registry.example:5000/mirror/server:15"; image itself when registry
// is empty. A trailing "/" of registry is ignored.
func ImageFrom(registry, image string) string {
	if registry = strings.TrimSuffix(registry, "/"); registry == "" {
		return image
	}
	return registry + "/" + image
}

// errNotSet is the cause of a field the API server should have defaulted.
var errNotSet = errors.New("not set; the API server's DatabaseDefaults admission plugin sets it")
