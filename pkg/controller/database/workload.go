package database

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
)

// ensureStatefulSet makes the StatefulSet match the Database, from the copy the pass read.
// When spec.storage grew past the size of its volumeClaimTemplate, which is immutable, it
// replaces the StatefulSet (replaceStatefulSet). grow is false when a volume expansion was
// refused: the StatefulSet is then kept with its volumeClaimTemplates (and every other change
// still applied). It returns the StatefulSet as last read or written.
func (p *pass) ensureStatefulSet(ctx context.Context, grow bool) (*appsv1.StatefulSet, *halt, error) {
	want, have := p.wantStatefulSet, p.statefulSet
	if have != nil && isControlledBy(have, p.db) && have.DeletionTimestamp == nil && grow {
		if size, ok := specs.ClaimTemplateStorage(have); ok && size.Cmp(p.desired.Storage) < 0 {
			return p.replaceStatefulSet(ctx, size)
		}
	}
	return ensureChild(ctx, p, childOps[*appsv1.StatefulSet]{
		kind:   "StatefulSet",
		name:   want.Name,
		client: p.r.kube.AppsV1().StatefulSets(p.db.Namespace),
		cached: func(name string) (*appsv1.StatefulSet, error) {
			if have == nil {
				return nil, apierrors.NewNotFound(appsv1.Resource("statefulsets"), name)
			}
			return have, nil
		},
		build: func() *appsv1.StatefulSet { return want },
		sync:  func(have *appsv1.StatefulSet) *halt { specs.SyncStatefulSet(have, want); return nil },
		describe: func(old, updated *appsv1.StatefulSet) string {
			var changes []string
			if o, n := ptr.Deref(old.Spec.Replicas, 1), ptr.Deref(updated.Spec.Replicas, 1); o != n {
				changes = append(changes, fmt.Sprintf("replicas %d → %d", o, n))
			}
			if o, n := specs.ContainerImage(old), specs.ContainerImage(updated); o != n {
				changes = append(changes, fmt.Sprintf("image %s → %s", o, n))
			}
			if r := p.db.Status.Restart; r != nil && old.Spec.Template.Annotations[specs.RestartedAtAnnotation] != updated.Spec.Template.Annotations[specs.RestartedAtAnnotation] {
				changes = append(changes, restartRequested(r))
			}
			if len(changes) == 0 {
				return "pod template"
			}
			return strings.Join(changes, ", ")
		},
	})
}

// MaxEventRestartReasonBytes is how much of a restart's reason, in bytes, the Event of the
// restart quotes: status.restart.reason keeps all of it (up to 32768 bytes), and the Event
// stays within the 1 KiB events.k8s.io/v1 allows its note.
const MaxEventRestartReasonBytes = 512

// restartRequested says who asked for the restart r and when, and why when r has a reason:
// `rolling restart requested by alice at 2026-03-01T12:00:30Z, reason "new kernel"`, the
// reason Go-quoted (any non-printable character escaped) and cut, on a character boundary,
// to MaxEventRestartReasonBytes with "…".
func restartRequested(r *examplev1.DatabaseRestartStatus) string {
	msg := fmt.Sprintf("rolling restart requested by %s at %s", r.RequestedBy, r.RequestedAt.UTC().Format(time.RFC3339))
	if r.Reason == "" {
		return msg
	}
	reason := r.Reason
	if len(reason) > MaxEventRestartReasonBytes {
		cut := MaxEventRestartReasonBytes
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "…"
	}
	return fmt.Sprintf("%s, reason %q", msg, reason)
}

// replaceStatefulSet replaces the cached StatefulSet, whose volumeClaimTemplate asks for
// from, with the desired one: it deletes it with propagationPolicy Orphan, so the Pods keep
// running, and creates it again; the new one adopts the Pods, which match its selector.
// Until the old one is gone (the garbage collector orphans its Pods first), the create
// reports AlreadyExists and the pass waits.
func (p *pass) replaceStatefulSet(ctx context.Context, from resource.Quantity) (*appsv1.StatefulSet, *halt, error) {
	have, want := p.statefulSet, p.wantStatefulSet
	client := p.r.kube.AppsV1().StatefulSets(p.db.Namespace)
	err := client.Delete(ctx, have.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan),
		Preconditions:     metav1.NewUIDPreconditions(string(have.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("delete StatefulSet %q to replace it: %w", have.Name, err)
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonReplacing,
		"Deleted StatefulSet %s, keeping its Pods, to grow its volumeClaimTemplates from %s to %s", have.Name, from.String(), p.desired.Storage.String())
	created, err := client.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, waitFor("StatefulSet %s is being replaced", have.Name), nil
	}
	if err != nil {
		h, err := writeError(err, "create", "StatefulSet", want.Name)
		return nil, h, err
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonCreated, "Created StatefulSet %s", want.Name)
	return created, nil, nil
}

// ensurePodDisruptionBudget keeps a PodDisruptionBudget while replicas > 1 and deletes ours
// when replicas is 1 (a budget of one unavailable Pod out of one would block every voluntary
// eviction's drain check for no benefit).
func (p *pass) ensurePodDisruptionBudget(ctx context.Context) (*halt, error) {
	db := p.db
	client := p.r.kube.PolicyV1().PodDisruptionBudgets(db.Namespace)
	cached := p.r.listers.PodDisruptionBudgets.PodDisruptionBudgets(db.Namespace).Get
	if p.desired.Replicas > 1 {
		want := specs.PodDisruptionBudget(db)
		_, h, err := ensureChild(ctx, p, childOps[*policyv1.PodDisruptionBudget]{
			kind:   "PodDisruptionBudget",
			name:   want.Name,
			client: client,
			cached: cached,
			build:  func() *policyv1.PodDisruptionBudget { return want },
			sync:   func(have *policyv1.PodDisruptionBudget) *halt { specs.SyncPodDisruptionBudget(have, want); return nil },
		})
		return h, err
	}
	return nil, deleteUnwanted(ctx, p, "PodDisruptionBudget", specs.PodDisruptionBudgetName(db), cached, client, "replicas is 1")
}

// ensureNetworkPolicy keeps the NetworkPolicy of specs.NetworkPolicy while spec.networkPolicy
// is set, admitting the controller from its own namespace, and deletes ours once it is unset.
func (p *pass) ensureNetworkPolicy(ctx context.Context) (*halt, error) {
	db := p.db
	client := p.r.kube.NetworkingV1().NetworkPolicies(db.Namespace)
	cached := p.r.listers.NetworkPolicies.NetworkPolicies(db.Namespace).Get
	if db.Spec.NetworkPolicy != nil {
		want := specs.NetworkPolicy(db, p.desired, p.r.controllerNamespace())
		_, h, err := ensureChild(ctx, p, childOps[*networkingv1.NetworkPolicy]{
			kind:   "NetworkPolicy",
			name:   want.Name,
			client: client,
			cached: cached,
			build:  func() *networkingv1.NetworkPolicy { return want },
			sync:   func(have *networkingv1.NetworkPolicy) *halt { specs.SyncNetworkPolicy(have, want); return nil },
		})
		return h, err
	}
	return nil, deleteUnwanted(ctx, p, "NetworkPolicy", specs.NetworkPolicyName(db), cached, client, "spec.networkPolicy is unset")
}
