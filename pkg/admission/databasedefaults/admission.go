// Package databasedefaults is the DatabaseDefaults mutating admission plugin:
// it fills in spec.replicas, spec.storage and spec.deletionPolicy when a
// Database omits them (1, "10Gi", Delete), with defaults an operator may
// override.
package databasedefaults

import (
	"context"
	"io"

	"k8s.io/apiserver/pkg/admission"

	"example.com/database-apiserver/pkg/admission/internal/attributes"
	"example.com/database-apiserver/pkg/apis/example"
)

// PluginName is the name of the plugin in --enable-admission-plugins and in
// an AdmissionConfiguration.
const PluginName = "DatabaseDefaults"

// Register registers the plugin. Its configuration, when given, is a
// DatabaseDefaultsConfiguration (see Configuration); a bad one makes the
// server refuse to start.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(config io.Reader) (admission.Interface, error) {
		return New(config)
	})
}

// Plugin defaults the spec of Databases on create and update. It acts only on
// the databases resource itself, never on its status or scale subresources.
type Plugin struct {
	*admission.Handler
	replicas       int32
	storage        string
	deletionPolicy example.DeletionPolicy
}

var _ admission.MutationInterface = &Plugin{}

// New returns the plugin configured by a DatabaseDefaultsConfiguration read
// from config (nil: DefaultReplicas, DefaultStorage, DefaultDeletionPolicy). It returns LoadConfiguration's
// error when the configuration is malformed or invalid.
func New(config io.Reader) (*Plugin, error) {
	cfg, err := LoadConfiguration(config)
	if err != nil {
		return nil, err
	}
	return &Plugin{
		Handler:        admission.NewHandler(admission.Create, admission.Update),
		replicas:       *cfg.Replicas,
		storage:        cfg.Storage,
		deletionPolicy: cfg.DeletionPolicy,
	}, nil
}

// Admit sets spec.replicas when it is nil, and spec.storage and
// spec.deletionPolicy when they are empty.
// Explicit values are kept, including replicas 0, which validation then
// refuses: only an omitted field is defaulted. It returns a 400 BadRequest
// when a databases request carries an object of another type.
func (p *Plugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	db, _, err := attributes.Databases(a)
	if err != nil || db == nil {
		return err
	}
	if db.Spec.Replicas == nil {
		replicas := p.replicas
		db.Spec.Replicas = &replicas
	}
	if db.Spec.Storage == "" {
		db.Spec.Storage = p.storage
	}
	if db.Spec.DeletionPolicy == "" {
		db.Spec.DeletionPolicy = p.deletionPolicy
	}
	return nil
}
