package database

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/engine"
	"example.com/database-apiserver/pkg/controller/specs"
)

// pass is one reconcile of a Database that is not being deleted: its steps, in dependency
// order, are the methods run calls (Secret, Services, data claims, StatefulSet,
// PodDisruptionBudget). A pass is sequential and used once.
type pass struct {
	r  *Reconciler
	db *examplev1.Database
	// desired is what db's spec resolves to, and wantStatefulSet the StatefulSet it makes,
	// whose volumeClaimTemplate the data claims are made from.
	desired         specs.Desired
	wantStatefulSet *appsv1.StatefulSet
	// statefulSet is the StatefulSet of db's name as the cache had it when the pass began,
	// whoever controls it, or nil. It is read once for every step: the claims about to be
	// mounted are those past its replicas, and it is that copy (its resourceVersion) that is
	// scaled, so a stale one fails with a conflict rather than scale past the claims checked.
	statefulSet *appsv1.StatefulSet
	// created names the children the pass created ("Service NAME"), for recordCreated.
	created []string
	// expanding names the mounted claims whose capacity is below spec.storage, with their
	// sizes ("data-a-0 1Gi of 2Gi"), for the status.
	expanding []string
}

// sync brings db's children to its spec in one pass and returns what status needs. The
// error is transient, for the workqueue's backoff; a spec the controller cannot run, a
// child it may not write and a child being deleted halt the pass and are in the observation.
func (r *Reconciler) sync(ctx context.Context, db *examplev1.Database) (observation, error) {
	sts, err := r.listers.StatefulSets.StatefulSets(db.Namespace).Get(specs.StatefulSetName(db))
	switch {
	case apierrors.IsNotFound(err):
		sts = nil
	case err != nil:
		return observation{}, fmt.Errorf("get StatefulSet %q from the cache: %w", specs.StatefulSetName(db), err)
	}
	p := &pass{r: r, db: db, statefulSet: sts}
	desired, err := specs.Resolve(db)
	if err != nil {
		return p.halted(observation{}, specFailure(err)), nil
	}
	p.desired, p.wantStatefulSet = desired, specs.StatefulSet(db, desired)
	return p.run(ctx)
}

// run takes the steps in order and stops at the first halt or error. A halt before the data
// claims are done, while a namespace deletion is under way, still releases the claims of a
// Database whose policy no longer protects them.
func (p *pass) run(ctx context.Context) (observation, error) {
	defer p.recordCreated(ctx)
	h, err := p.ensureSecret(ctx)
	if h == nil && err == nil {
		h, err = p.ensureServices(ctx)
	}
	var expansion *failure
	if h == nil && err == nil {
		expansion, h, err = p.reconcileClaims(ctx)
	}
	obs := observation{replicas: p.desired.Replicas, expansion: expansion}
	if h != nil && h.releasesClaims() && !protected(p.db) {
		if err := p.r.unprotectClaims(ctx, p.db); err != nil {
			return p.halted(observation{}, nil), err
		}
	}
	if h != nil || err != nil {
		return p.halted(obs, h), err
	}

	sts, h, err := p.ensureStatefulSet(ctx, expansion == nil)
	if h == nil && err == nil {
		h, err = p.ensurePodDisruptionBudget(ctx)
	}
	if h != nil || err != nil {
		return p.halted(obs, h), err
	}
	obs.statefulSet = sts
	obs.expanding = p.expanding
	return obs, nil
}

// halted completes obs for a pass stopped by h (nil: by an error): spec.replicas, db's
// StatefulSet as the pass read it (nil when it is not db's), and the halt's failure or wait.
func (p *pass) halted(obs observation, h *halt) observation {
	obs.replicas = ptr.Deref(p.db.Spec.Replicas, 0)
	if p.statefulSet != nil && isControlledBy(p.statefulSet, p.db) {
		obs.statefulSet = p.statefulSet
	}
	if h != nil {
		obs.failure, obs.waiting = h.failure, h.waiting
	}
	return obs
}

// ensureSecret creates the credentials Secret with a new random password (crypto/rand)
// when there is none, and otherwise only adds the keys that follow from the ones present: the
// username and password are never regenerated while the Secret exists, since the engine keeps
// them in its data directory. A Secret of ours without them is an InvalidCredentials halt.
func (p *pass) ensureSecret(ctx context.Context) (*halt, error) {
	db, r := p.db, p.r
	if err := p.unprotectDeletedSecret(ctx); err != nil {
		return nil, err
	}
	_, h, err := ensureChild(ctx, p, childOps[*corev1.Secret]{
		kind:   "Secret",
		name:   specs.SecretName(db),
		client: r.kube.CoreV1().Secrets(db.Namespace),
		cached: r.listers.Secrets.Secrets(db.Namespace).Get,
		build: func() *corev1.Secret {
			s := specs.Secret(db, p.desired, rand.Text())
			setProtection(s, protected(db))
			return s
		},
		created: func() {
			r.event(ctx, db, corev1.EventTypeNormal, ReasonSecretGenerated, "Generated credentials in Secret %s", specs.SecretName(db))
			if p.statefulSet != nil && isControlledBy(p.statefulSet, db) {
				r.event(ctx, db, corev1.EventTypeWarning, ReasonCredentialsRegenerated,
					"Secret %s was deleted and has been generated again; an initialised data directory keeps the old credentials", specs.SecretName(db))
			}
		},
		sync: func(have *corev1.Secret) *halt {
			for _, key := range []string{engine.SecretKeyUsername, engine.SecretKeyPassword} {
				if len(have.Data[key]) == 0 {
					return fail(ReasonInvalidCredentials,
						"Secret %s has no %q; restore it, or delete the Secret to generate new credentials (an initialised data directory keeps the old ones)",
						have.Name, key)
				}
			}
			have.Labels = specs.MergeLabels(have.Labels, specs.ChildLabels(db))
			setProtection(have, protected(db))
			specs.FillCredentials(db, p.desired, have.Data)
			return nil
		},
		describe: func(old, updated *corev1.Secret) string {
			var changed []string
			for k, v := range updated.Data {
				if o, ok := old.Data[k]; !ok || string(o) != string(v) {
					changed = append(changed, k)
				}
			}
			slices.Sort(changed)
			if slices.Contains(updated.Finalizers, ProtectFinalizer) != slices.Contains(old.Finalizers, ProtectFinalizer) {
				changed = append(changed, "finalizer "+ProtectFinalizer)
			}
			if len(changed) == 0 {
				return "labels"
			}
			return "set " + strings.Join(changed, ", ")
		},
	})
	return h, err
}

// unprotectDeletedSecret removes ProtectFinalizer from the credentials Secret when it is
// being deleted (a namespace deletion) and the deletion policy no longer asks for
// protection: ensureChild only waits for a child being deleted.
func (p *pass) unprotectDeletedSecret(ctx context.Context) error {
	db := p.db
	have, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(specs.SecretName(db))
	if err != nil || !isControlledBy(have, db) || have.DeletionTimestamp == nil || protected(db) {
		return nil
	}
	update := have.DeepCopy()
	if !setProtection(update, false) {
		return nil
	}
	if _, err := p.r.kube.CoreV1().Secrets(db.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update Secret %q: %w", have.Name, err)
	}
	return nil
}

// ensureServices makes the headless and the client Service exist with the fields we own.
func (p *pass) ensureServices(ctx context.Context) (*halt, error) {
	db := p.db
	for _, want := range []*corev1.Service{specs.HeadlessService(db, p.desired), specs.ClientService(db, p.desired)} {
		_, h, err := ensureChild(ctx, p, childOps[*corev1.Service]{
			kind:   "Service",
			name:   want.Name,
			client: p.r.kube.CoreV1().Services(db.Namespace),
			cached: p.r.listers.Services.Services(db.Namespace).Get,
			build:  func() *corev1.Service { return want },
			sync:   func(have *corev1.Service) *halt { specs.SyncService(have, want); return nil },
		})
		if h != nil || err != nil {
			return h, err
		}
	}
	return nil, nil
}
