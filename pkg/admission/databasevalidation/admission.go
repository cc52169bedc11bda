// Package databasevalidation is the DatabaseValidation validating admission
// plugin: it holds spec.version to the version catalog (pkg/catalog), refusing
// versions the catalog does not know, releases never published and upgrades
// that are not safe in place, and warns about releases past end of life. Its
// configuration (a DatabaseValidationConfiguration) adds releases published
// after the catalog was built.
//
// The catalog is policy, which an operator may turn off by disabling the
// plugin. Field invariants (engine enum, replicas range, storage format,
// engine immutability, no storage shrink) are not checked here: the registry
// strategy checks them on every write, before this plugin runs.
package databasevalidation

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/utils/clock"

	"example.com/database-apiserver/pkg/admission/internal/attributes"
	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

// PluginName is the name of the plugin in --enable-admission-plugins and in
// an AdmissionConfiguration.
const PluginName = "DatabaseValidation"

// Register registers the plugin, on the real clock. Its configuration, when
// given, is a DatabaseValidationConfiguration (see Configuration); a bad one
// makes the server refuse to start.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(config io.Reader) (admission.Interface, error) {
		cfg, err := LoadConfiguration(config)
		if err != nil {
			return nil, err
		}
		return New(clock.RealClock{}, cfg.published()), nil
	})
}

// Plugin validates spec.version of Databases on create and update against the
// catalog. It acts only on the databases resource itself, never on its status
// or scale subresources.
type Plugin struct {
	*admission.Handler
	clock clock.PassiveClock
	// published are the releases accepted besides the catalog's own.
	published catalog.Published
}

var _ admission.ValidationInterface = &Plugin{}

// New returns the plugin; clock says when "now" is for end-of-life warnings
// (clock.RealClock{} in the server, a fake one in tests), and published, which
// may be nil, are releases to accept besides the catalog's.
func New(clock clock.PassiveClock, published catalog.Published) *Plugin {
	return &Plugin{
		Handler:   admission.NewHandler(admission.Create, admission.Update),
		clock:     clock,
		published: published,
	}
}

// versionPath is the field every error and warning of this plugin is about.
var versionPath = field.NewPath("spec", "version")

// Validate judges spec.version when it is new: on create, and on an update
// that changes it. An update that keeps the version is not judged again, so a
// release later dropped from the catalog does not block metadata, finalizer or
// scaling updates of existing Databases.
//
// It returns a 422 Invalid on spec.version:
//   - field.NotSupported, listing the engine's release lines and the newest
//     release of each, for a version outside the engine's catalog ("12",
//     "latest");
//   - field.Invalid, listing the published releases of the line, for a
//     release of a known line that was never published ("16.99",
//     catalog.CheckRelease with the configured releases);
//   - field.Forbidden, with the catalog's reason, for an upgrade
//     catalog.CheckUpgrade refuses.
//
// A release past end of life is admitted with a warning (the response's
// Warning header). An empty or unknown engine is left to the strategy's
// validation, as is an engine change, for which no upgrade is judged.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	db, old, err := attributes.Databases(a)
	if err != nil || db == nil {
		return err
	}
	engine, version := db.Spec.Engine, db.Spec.Version
	if !slices.Contains(example.SupportedEngines, engine) || version == "" {
		return nil
	}
	if old != nil && old.Spec.Version == version {
		return nil
	}

	release, err := catalog.Lookup(examplev1.Engine(engine), version)
	if err != nil {
		// The release lines: each is itself a valid version, so everything the
		// list holds is accepted; the detail adds the newest release of each.
		notSupported := field.NotSupported(versionPath, version, catalog.Lines(examplev1.Engine(engine)))
		notSupported.Detail += fmt.Sprintf("; or a published release of one of them, the newest being %s",
			strings.Join(catalog.NewestReleases(examplev1.Engine(engine)), ", "))
		return invalid(db, notSupported)
	}
	if err := catalog.CheckRelease(examplev1.Engine(engine), version, p.published); err != nil {
		return invalid(db, field.Invalid(versionPath, version, err.Error()))
	}
	if old != nil && old.Spec.Engine == engine {
		if err := catalog.CheckUpgrade(examplev1.Engine(engine), old.Spec.Version, version); err != nil {
			return invalid(db, field.Forbidden(versionPath, err.Error()))
		}
	}
	if now := p.clock.Now(); release.PastEndOfLife(now) {
		warning.AddWarning(ctx, "", endOfLifeWarning(release, old, now))
	}
	return nil
}

// endOfLifeWarning says which version is past end of life, since when, and
// what to move to. On create that is the newest supported line. On update it
// is the newest supported line reachable in place (catalog.CheckUpgrade), or
// else the newest supported line, in a new Database.
func endOfLifeWarning(release catalog.Release, old *example.Database, now time.Time) string {
	msg := fmt.Sprintf("%s: %s %q is past end of life: the %s line reached end of life on %s",
		versionPath, release.Engine, release.Version, release.Line, release.EndOfLife.Format(time.DateOnly))

	var newest, inPlace string
	for _, line := range catalog.Lines(release.Engine) {
		candidate, err := catalog.Lookup(release.Engine, line)
		if err != nil || candidate.PastEndOfLife(now) {
			continue
		}
		newest = line
		if catalog.CheckUpgrade(release.Engine, release.Version, line) == nil {
			inPlace = line
		}
	}
	switch {
	case newest == "":
		return msg + fmt.Sprintf("; the catalog has no %s release that is still supported", release.Engine)
	case old == nil:
		return msg + fmt.Sprintf("; use a supported release instead, such as %q", newest)
	case inPlace != "":
		return msg + fmt.Sprintf("; upgrade in place to %q", inPlace)
	default:
		return msg + fmt.Sprintf("; no supported release is reachable in place: create a new Database at version %q and move the data into it", newest)
	}
}

// invalid is the 422 of a Database refused for one field error.
func invalid(db *example.Database, err *field.Error) error {
	return apierrors.NewInvalid(example.Kind("Database"), db.Name, field.ErrorList{err})
}
