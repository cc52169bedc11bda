package database

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
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
	// credentials, when set, reports the credentials Secret being deleted, kept by
	// CredentialsFinalizer: the Database runs on with it, Degraded.
	credentials *failure
	// expanding names the mounted claims whose capacity is below spec.storage, with their
	// sizes ("data-a-0 1Gi of 2Gi"), for the status.
	expanding []string
	// released is db's release record (UID to "<Kind> <name>") once judgeAdoption read it.
	released map[string]string
	// username is the credentials Secret's username key once ensureSecret wrote or read it.
	username string
	// deletedPods names the Pods the pass deleted: not ready, whatever the cache says.
	deletedPods []string
	// statisticsReported is true once a server gave the pass its statistics (recordMembers).
	statisticsReported bool
	// backupStore, when set, says why spec.backup's store cannot be used (resolveBackupStore).
	backupStore string
}

// sync brings db's children to its spec in one pass and returns what status needs, with the
// StatefulSet controller's refusal to create the Pods, if any (podRefusal), else the
// scheduler's refusal to place them (unschedulable). The error is
// transient, for the workqueue's backoff; a spec the controller cannot run, a child it may
// not write and a child being deleted halt the pass and are in the observation.
func (r *Reconciler) sync(ctx context.Context, db *examplev1.Database) (observation, error) {
	sts, err := r.listers.StatefulSets.StatefulSets(db.Namespace).Get(names.StatefulSetName(db))
	switch {
	case apierrors.IsNotFound(err):
		sts = nil
	case err != nil:
		return observation{}, fmt.Errorf("get StatefulSet %q from the cache: %w", names.StatefulSetName(db), err)
	}
	p := &pass{r: r, db: db, statefulSet: sts}
	desired, err := specs.Resolve(db)
	if err != nil {
		return p.halted(observation{}, specFailure(err)), nil
	}
	desired.Image = specs.ImageFrom(r.options.ImageRegistry, desired.Image)
	desired.ClusterDomain, desired.SuperuserSources = r.clusterDomain(), r.options.SuperuserSources
	p.desired = desired
	if err := p.resolveBackupStore(ctx); err != nil {
		return p.halted(observation{}, nil), err
	}
	if db.Spec.Restore != nil && p.desired.Backup == nil && sts == nil && !meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionRestored) {
		// Without its store, the first Pod would initialise an empty database in place of
		// the restored one.
		why := p.backupStore
		if db.Spec.Backup == nil {
			why = "spec.backup, the store to restore from, is unset"
		}
		return p.halted(observation{}, fail(examplev1.ReasonRestoreFailed, "cannot restore: %s", why)), nil
	}
	p.wantStatefulSet = specs.StatefulSet(db, p.desired)
	obs, err := p.run(ctx)
	if obs.failure == nil {
		refusal, rerr := r.podRefusal(obs.statefulSet)
		if refusal == nil && rerr == nil {
			refusal, obs.unschedulableIn, rerr = r.unschedulable(db, obs.statefulSet, r.clock.Now())
		}
		obs.refusal = refusal
		err = errors.Join(err, rerr)
	}
	return obs, err
}

// run takes the steps in order and stops at the first halt or error. A halt before the data
// claims are done, while a namespace deletion is under way, still releases the claims of a
// Database whose policy no longer protects them. The NetworkPolicy comes first: no other
// child's failure leaves the Pods without the one spec.networkPolicy asks for (or with clients
// it no longer names), and a new Database's Pods never run before it exists.
func (p *pass) run(ctx context.Context) (observation, error) {
	defer p.recordCreated(ctx)
	replicates, designated := p.desired.Recipe.Replicates(), ""
	children := []step{p.ensureNetworkPolicy, p.ensureSecret, p.ensureServices}
	if p.desired.Backup != nil {
		children = append(children, p.ensureBackupTLSSecret)
	}
	if specs.HasInitConfigMap(p.desired) {
		children = append(children, p.ensureInitConfigMap)
	}
	if replicates {
		children = append(children, func(ctx context.Context) (h *halt, err error) {
			designated, h, err = p.ensureReplicationConfigMap(ctx)
			return h, err
		})
	}
	h, err := runSteps(ctx, children...)
	replicas := p.desired.Replicas
	var configured []string
	if replicates && p.desired.Recipe.ReplicaSet {
		cm, _ := p.r.listers.ConfigMaps.ConfigMaps(p.db.Namespace).Get(specs.ReplicationConfigMapName(p.db))
		configured = replicaSetMembers(p.db, cm, statefulSetReplicas(p.statefulSet))
	}
	drained := p.r.isDrained(p.db.UID, replicas)
	if held := heldReplicas(p.db, replicas, statefulSetReplicas(p.statefulSet), designated, configured, drained); replicates && held != replicas {
		// The workload keeps the Pods of the primary until a switchover moves it.
		p.desired.Replicas, p.wantStatefulSet.Spec.Replicas = held, ptr.To(held)
	}
	var expansion *failure
	if h == nil && err == nil {
		expansion, h, err = p.reconcileClaims(ctx)
	}
	obs := observation{replicas: replicas, expansion: expansion, credentials: p.credentials, expanding: p.expanding, username: p.username}
	if h != nil && h.releasesClaims() && !protected(p.db) {
		if err := p.r.unprotectClaims(ctx, p.db); err != nil {
			return p.halted(observation{}, nil), err
		}
	}
	if h != nil || err != nil {
		return p.halted(obs, h), err
	}

	var sts *appsv1.StatefulSet
	h, err = runSteps(ctx, func(ctx context.Context) (h *halt, err error) {
		sts, h, err = p.ensureStatefulSet(ctx, expansion == nil)
		return h, err
	}, p.ensurePodDisruptionBudget)
	if h != nil || err != nil {
		return p.halted(obs, h), err
	}
	obs.statefulSet = sts
	obs.restore = p.observeRestore()
	if obs.backup, err = p.reconcileBackups(ctx, sts); err != nil {
		return obs, err
	}
	if replicates {
		reconcile := p.reconcileReplication
		if p.desired.Recipe.ReplicaSet {
			reconcile = p.reconcileReplicaSet
		}
		stepCtx, cancel := context.WithTimeout(ctx, replicationStepTimeout)
		rep, err := reconcile(stepCtx, sts, designated, replicas, p.desired.Replicas)
		cancel()
		if err != nil {
			// Status keeps what the last pass that completed the step reported (primary,
			// members, Replicating, and a switchover's record, status.switchoverProgress):
			// this one stopped part-way, before it knew.
			return obs, err
		}
		obs.replication, obs.statistics = &rep, p.statisticsReported
		if obs.backup != nil && rep.archiving != nil {
			obs.backup.archived(rep.primary, *rep.archiving)
		}
	}
	return obs, nil
}

// step is one step of a pass: it makes one part of the Database true, or says why the pass
// stops there (a halt: a failure to report, or something to wait for), or fails.
type step func(context.Context) (*halt, error)

// runSteps runs steps in order and stops at the first halt or error.
func runSteps(ctx context.Context, steps ...step) (*halt, error) {
	for _, s := range steps {
		if h, err := s(ctx); h != nil || err != nil {
			return h, err
		}
	}
	return nil, nil
}

// replicationStepTimeout bounds the replication step of a pass: a server that stops
// answering in the middle of a statement fails the pass, which the workqueue retries, rather
// than hold the worker. It is above the longest wait of a step's calls (a PostgreSQL
// promotion waits up to a minute, a standby's WAL receiver 10 s for each replica fenced).
const replicationStepTimeout = 3 * time.Minute

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

// ensureSecret creates the credentials Secret with new random passwords (crypto/rand)
// when there is none and the Database has no data yet, and otherwise only adds the keys that
// follow from the ones present: the passwords the engine keeps in its data directory are
// never regenerated. A Secret written before the superuser keys is given them
// (specs.MigrateCredentials: the old superuser moves to them, and where the controller
// creates the application user over SQL, username and password become that user's). The Secret carries CredentialsFinalizer. A Secret
// of ours without them is an InvalidCredentials halt; one gone while the data exists is a
// CredentialsLost halt (lostCredentials); one being deleted, which the finalizer keeps, is
// reported (p.credentials) and the pass goes on with it.
func (p *pass) ensureSecret(ctx context.Context) (*halt, error) {
	db, r := p.db, p.r
	if err := p.unprotectDeletedSecret(ctx); err != nil {
		return nil, err
	}
	live, h, err := p.lostCredentials(ctx)
	if h != nil || err != nil {
		return h, err
	}
	if have, err := r.listers.Secrets.Secrets(db.Namespace).Get(names.SecretName(db)); err == nil && isControlledBy(have, db) &&
		have.DeletionTimestamp != nil && slices.Contains(have.Finalizers, CredentialsFinalizer) {
		p.credentials = &failure{reason: examplev1.ReasonCredentialsDeleting, message: fmt.Sprintf(
			"Secret %s is being deleted; it is kept (finalizer %s) while the Database exists, since its password is the one the data directory holds; deleting the Database releases it",
			have.Name, CredentialsFinalizer)}
		p.username = string(have.Data[names.SecretKeyUsername])
		return nil, nil
	}
	secret, h, err := ensureChild(ctx, p, childOps[*corev1.Secret]{
		kind:   "Secret",
		name:   names.SecretName(db),
		client: r.kube.CoreV1().Secrets(db.Namespace),
		cached: func(name string) (*corev1.Secret, error) {
			if live != nil {
				return live, nil
			}
			return r.listers.Secrets.Secrets(db.Namespace).Get(name)
		},
		build: func() *corev1.Secret {
			s := specs.Secret(db, p.desired, specs.Passwords{Application: rand.Text(), Superuser: rand.Text(), Replication: rand.Text()})
			setCredentialsFinalizer(s)
			setProtection(s, protected(db))
			return s
		},
		created: func() {
			r.event(ctx, db, corev1.EventTypeNormal, ReasonSecretGenerated, "Generated credentials in Secret %s", names.SecretName(db))
		},
		sync: func(have *corev1.Secret) *halt {
			for _, key := range []string{names.SecretKeyUsername, names.SecretKeyPassword} {
				if len(have.Data[key]) == 0 {
					return fail(examplev1.ReasonInvalidCredentials,
						"Secret %s has no %q; restore it with the credentials the data directory holds (checked again every minute)",
						have.Name, key)
				}
			}
			su, sp := names.SecretKeySuperuserUsername, names.SecretKeySuperuserPassword
			if (len(have.Data[su]) == 0) != (len(have.Data[sp]) == 0) {
				// One superuser key without the other is a Secret edited by hand, not one
				// written before the superuser keys: nothing is moved or generated.
				present, missing := su, sp
				if len(have.Data[su]) == 0 {
					present, missing = sp, su
				}
				return fail(examplev1.ReasonInvalidCredentials,
					"Secret %s has %q but no %q; restore it with the superuser's credentials the data directory holds (checked again every minute)",
					have.Name, present, missing)
			}
			if specs.MigrateCredentials(p.desired, have.Data, rand.Text()) {
				r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated,
					"Secret %s: the superuser's credentials moved to %s and %s; %s is the application user %s",
					have.Name, names.SecretKeySuperuserUsername, names.SecretKeySuperuserPassword, names.SecretKeyUsername, have.Data[names.SecretKeyUsername])
			}
			if h := p.checkKeyFile(have); h != nil {
				return h
			}
			have.Labels = specs.MergeLabels(have.Labels, specs.ChildLabels(db))
			setCredentialsFinalizer(have)
			setProtection(have, protected(db))
			specs.SetReplicationCredentials(p.desired, have.Data, rand.Text())
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
			var removed []string
			for k := range old.Data {
				if _, ok := updated.Data[k]; !ok {
					removed = append(removed, k)
				}
			}
			slices.Sort(changed)
			slices.Sort(removed)
			for _, f := range ourFinalizers {
				if slices.Contains(updated.Finalizers, f) != slices.Contains(old.Finalizers, f) {
					changed = append(changed, "finalizer "+f)
				}
			}
			var parts []string
			if len(changed) > 0 {
				parts = append(parts, "set "+strings.Join(changed, ", "))
			}
			if len(removed) > 0 {
				parts = append(parts, "removed "+strings.Join(removed, ", "))
			}
			if len(parts) == 0 {
				return "labels"
			}
			return strings.Join(parts, "; ")
		},
	})
	if h == nil && err == nil && secret != nil {
		p.username = string(secret.Data[names.SecretKeyUsername])
	}
	return h, err
}

// lostCredentials halts with CredentialsLost when the credentials Secret is gone (the cache
// has none, nor has the API server) while the Database's data exists: its StatefulSet was
// created, or a data claim of it (or retained for it) is in the claim cache. A new password
// would not be the one the data directory holds, so none is generated: the Secret is to be
// restored with the old credentials. A new Database (no data) gets a generated Secret. A
// Secret the API server has and the cache misses (unlabelled: a retained or restored one)
// is returned, for ensureChild to judge.
func (p *pass) lostCredentials(ctx context.Context) (*corev1.Secret, *halt, error) {
	db := p.db
	name := names.SecretName(db)
	_, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(name)
	if !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	if has, err := p.hasData(ctx); !has || err != nil {
		return nil, nil, err
	}
	live, err := p.r.kube.CoreV1().Secrets(db.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		keys := "username, password, superuser-username and superuser-password"
		switch {
		case p.desired.Recipe.ReplicationUsername != "":
			keys = "username, password, superuser-username, superuser-password and replication-password"
		case p.desired.Recipe.ReplicaSet:
			// The running members authenticate to each other with the old keyfile.
			keys = "username, password, superuser-username, superuser-password and keyfile"
		}
		return nil, fail(examplev1.ReasonCredentialsLost,
			"Secret %s is gone while the data directory keeps its credentials: no new password is generated, the database would not accept it. Restore it: create Secret %s with the old %s and the annotation %s=%s, this Database's uid (checked again every minute)",
			name, name, keys, RestoreForAnnotation, db.UID), nil
	case err != nil:
		return nil, nil, fmt.Errorf("get Secret %q: %w", name, err)
	}
	return live, nil, nil
}

// hasData reports whether the Database's engine may have initialised a data directory: its
// StatefulSet exists, or one of its data claims (of ours, or released for it and recorded:
// judgeAdoption) is in the claim cache.
func (p *pass) hasData(ctx context.Context) (bool, error) {
	if p.statefulSet != nil && isControlledBy(p.statefulSet, p.db) {
		return true, nil
	}
	claims, err := p.r.listDataClaims(ctx, p.db, 0, 0, false)
	if err != nil {
		return false, err
	}
	for _, c := range claims {
		if isControlledBy(c, p.db) {
			return true, nil
		}
		if judged, err := p.judgeAdoption(ctx, "PersistentVolumeClaim", c); err != nil || judged == adoptable {
			return judged == adoptable, err
		}
	}
	return false, nil
}

// unprotectDeletedSecret removes ProtectFinalizer from the credentials Secret when it is
// being deleted (a namespace deletion) and the deletion policy no longer asks for
// protection: ensureChild only waits for a child being deleted.
func (p *pass) unprotectDeletedSecret(ctx context.Context) error {
	db := p.db
	have, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(names.SecretName(db))
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

// ensureServices makes the headless and the client Service exist with the fields we own, and
// the read Service while replicas > 1 on an engine that replicates; it deletes ours
// otherwise.
func (p *pass) ensureServices(ctx context.Context) (*halt, error) {
	db := p.db
	services := []*corev1.Service{specs.HeadlessService(db, p.desired), specs.ClientService(db, p.desired)}
	if p.desired.Recipe.Replicates() && p.desired.Replicas > 1 {
		services = append(services, specs.ReadService(db, p.desired))
	} else {
		if err := deleteUnwanted(ctx, p, "Service", names.ReadServiceName(db), p.r.listers.Services.Services(db.Namespace).Get,
			p.r.kube.CoreV1().Services(db.Namespace), "replicas is 1"); err != nil {
			return nil, err
		}
	}
	for _, want := range services {
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

// checkKeyFile halts the pass, for a replica set (engine.Recipe.ReplicaSet), when the Secret's
// keyfile is not one the members take (engine.Recipe.CheckKeyFile), or is gone while the StatefulSet's
// Pods already read one: its members authenticate to each other with the key they started
// with, so a new one would keep every Pod that starts from joining them. A Secret without a
// keyfile whose StatefulSet reads none (made before the Database was a replica set) gets a
// new one.
func (p *pass) checkKeyFile(secret *corev1.Secret) *halt {
	if !p.desired.Recipe.ReplicaSet {
		return nil
	}
	key := secret.Data[names.SecretKeyKeyFile]
	var invalid error
	if len(key) > 0 && p.desired.Recipe.CheckKeyFile != nil {
		invalid = p.desired.Recipe.CheckKeyFile(key)
	}
	switch {
	case invalid != nil:
		return fail(examplev1.ReasonInvalidCredentials,
			"Secret %s's %q %v; restore the key the replica set's members run with (checked again every minute)",
			secret.Name, names.SecretKeyKeyFile, invalid)
	case len(key) == 0 && p.statefulSet != nil && isControlledBy(p.statefulSet, p.db) && readsKeyFile(p.statefulSet):
		return fail(examplev1.ReasonInvalidCredentials,
			"Secret %s has no %q while the replica set's members run with one: a new key would keep every Pod that starts from joining them; restore it (checked again every minute)",
			secret.Name, names.SecretKeyKeyFile)
	}
	return nil
}

// readsKeyFile reports whether sts's Pods mount the credentials Secret's keyfile.
func readsKeyFile(sts *appsv1.StatefulSet) bool {
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == engine.CredentialsVolumeName && v.Secret != nil {
			for _, item := range v.Secret.Items {
				if item.Key == names.SecretKeyKeyFile {
					return true
				}
			}
		}
	}
	return false
}
