package database

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// The StatefulSet controller (kube-controller-manager) reports each Pod or claim it fails to
// create as a Warning Event on the StatefulSet, reason FailedCreate, and each Pod it creates
// as a Normal Event, reason SuccessfulCreate; it sets no condition on the StatefulSet. These
// Events are the only record of an admission refusal of a Database's Pods (Pod Security, a
// ResourceQuota, a LimitRange, a webhook).
const (
	// StatefulSetControllerName is the source component of the StatefulSet controller's Events.
	StatefulSetControllerName = "statefulset-controller"
	// eventReasonSuccessfulCreate is the reason of its Event for a Pod it created.
	eventReasonSuccessfulCreate = "SuccessfulCreate"
)

// EventsByObjectUIDIndex names the index of the Event cache (NewEventInformer,
// Listers.Events) that finds the Events of an object by its UID (involvedObject.uid), so
// those of a StatefulSet deleted and created again under the same name are not counted.
const EventsByObjectUIDIndex = "involvedObject.uid"

// EventsByObjectUID is the index function of EventsByObjectUIDIndex: an Event's one value is
// its involvedObject.uid. It fails for an object that is not a core/v1 Event.
func EventsByObjectUID(obj any) ([]string, error) {
	event, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("index %s: %T is not a core/v1 Event", EventsByObjectUIDIndex, obj)
	}
	return []string{string(event.InvolvedObject.UID)}, nil
}

// eventFieldSelector selects the Events NewEventInformer caches: those the StatefulSet
// controller records on StatefulSets. Both are field selectors core/v1 Events support
// (involvedObject.kind, and source: source.component, or reportingController when that is
// empty).
func eventFieldSelector() fields.Selector {
	return fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "StatefulSet"),
		fields.OneTermEqualSelector("source", StatefulSetControllerName),
	)
}

// NewEventInformer returns an informer of the core/v1 Events of every namespace that the
// StatefulSet controller records on StatefulSets (eventFieldSelector), with the indexes
// cache.NamespaceIndex and EventsByObjectUIDIndex. It is not scoped by ManagedBySelector:
// Events carry no labels; the field selector keeps every other Event of the cluster out of
// the cache, and those of StatefulSets that are not ours cost their memory. resync is the
// resync period (0: none); its signature is that of a factory's InformerFor.
func NewEventInformer(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return newEventInformer(kube, metav1.NamespaceAll, resync)
}

// newEventInformer is NewEventInformer's informer in namespace (metav1.NamespaceAll: every
// namespace).
func newEventInformer(kube kubernetes.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	selector := eventFieldSelector().String()
	return coreinformers.NewFilteredEventInformer(kube, namespace, resync, cache.Indexers{
		cache.NamespaceIndex:   cache.MetaNamespaceIndexFunc,
		EventsByObjectUIDIndex: EventsByObjectUID,
	}, func(o *metav1.ListOptions) { o.FieldSelector = selector })
}

// maxConditionMessage is the longest message a metav1.Condition may have, in bytes (32 KiB:
// the API's condition validation).
const maxConditionMessage = 32 * 1024

// conditionMessage is msg cut to maxConditionMessage bytes, at a UTF-8 character boundary.
func conditionMessage(msg string) string {
	return cutUTF8(msg, maxConditionMessage)
}

// cutUTF8 is msg cut to at most n bytes, at a UTF-8 character boundary.
func cutUTF8(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// lastOccurrence is when event last happened: series.lastObservedTime for an Event series,
// else lastTimestamp (the core/v1 recorder's), else eventTime (the events.k8s.io/v1 one's),
// else its creation.
func lastOccurrence(event *corev1.Event) time.Time {
	switch {
	case event.Series != nil && !event.Series.LastObservedTime.IsZero():
		return event.Series.LastObservedTime.Time
	case !event.LastTimestamp.IsZero():
		return event.LastTimestamp.Time
	case !event.EventTime.IsZero():
		return event.EventTime.Time
	default:
		return event.CreationTimestamp.Time
	}
}

// podRefusal returns the StatefulSet controller's refusal to create sts's Pods, or nil:
// while sts has fewer Pods than its spec asks (status.replicas < spec.replicas) and the
// latest of its FailedCreate Events (by lastOccurrence, from the Event cache by sts's UID) is
// newer than the latest of its SuccessfulCreate ones, the failure with reason FailedCreate
// and that Event's message (as a condition allows it). The StatefulSet controller retries
// the creation with backoff; once the Pods exist, there is no refusal.
func (r *Reconciler) podRefusal(sts *appsv1.StatefulSet) (*failure, error) {
	if sts == nil || sts.Status.Replicas >= ptr.Deref(sts.Spec.Replicas, 1) {
		return nil, nil
	}
	objs, err := r.listers.Events.ByIndex(EventsByObjectUIDIndex, string(sts.UID))
	if err != nil {
		return nil, fmt.Errorf("list the Events of StatefulSet %q from the cache: %w", sts.Name, err)
	}
	var (
		refused             *corev1.Event
		refusedAt, creation time.Time
	)
	for _, obj := range objs {
		event, ok := obj.(*corev1.Event)
		if !ok {
			continue
		}
		at := lastOccurrence(event)
		switch event.Reason {
		case examplev1.ReasonFailedCreate:
			if refused == nil || at.After(refusedAt) {
				refused, refusedAt = event, at
			}
		case eventReasonSuccessfulCreate:
			if at.After(creation) {
				creation = at
			}
		}
	}
	if refused == nil || !refusedAt.After(creation) {
		return nil, nil
	}
	return &failure{reason: examplev1.ReasonFailedCreate, message: conditionMessage(refused.Message)}, nil
}

// refusalReported reports whether status already reports a refusal of the Pods of reason
// (FailedCreate or Unschedulable): its Degraded condition has that reason.
func refusalReported(status examplev1.DatabaseStatus, reason string) bool {
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
	return c != nil && c.Reason == reason
}

// The kube-scheduler reports a Pod it cannot place (resources, node selector and affinity,
// taints, topology spread, unbound claims) on the Pod itself: its PodScheduled condition False
// with reason Unschedulable (corev1.PodReasonUnschedulable) and the scheduler's message, e.g.
// "0/2 nodes are available: 1 Insufficient cpu, ...". The condition's lastTransitionTime is
// when it became False; a later attempt of the scheduler may change the message, not that time.
const (
	// UnschedulableAfter is how long a Pod has been unschedulable before its Database reports
	// it. The scheduler also marks a Pod so while the claims of an Immediate StorageClass are
	// provisioned and bound ("pod has unbound immediate PersistentVolumeClaims"), which takes
	// seconds; a Pod still waiting after this long waits for something else.
	UnschedulableAfter = 30 * time.Second
	// maxUnschedulablePods is how many unschedulable Pods the condition's message names; it
	// counts the others.
	maxUnschedulablePods = 3
	// maxSchedulerMessage is the longest scheduler message, in bytes, the condition's message
	// repeats for one Pod: with maxUnschedulablePods, the message stays under 4 KiB.
	maxSchedulerMessage = 1024
)

// unschedulable returns the scheduler's refusal to place sts's Pods, or nil, and how long
// until a Pod the scheduler refuses now has been refused for UnschedulableAfter (0 when none
// is waiting for that). The Pods are db's in the Pod cache (its selector labels) that sts
// controls (isPodOf), not being deleted and bound to no node, whose PodScheduled condition is
// False with reason Unschedulable; those that have been so for UnschedulableAfter are the
// failure, reason Unschedulable, with unschedulableMessage.
func (r *Reconciler) unschedulable(db *examplev1.Database, sts *appsv1.StatefulSet, now time.Time) (*failure, time.Duration, error) {
	if sts == nil {
		return nil, 0, nil
	}
	pods, err := r.listers.Pods.Pods(db.Namespace).List(labels.SelectorFromSet(names.SelectorLabels(db)))
	if err != nil {
		return nil, 0, fmt.Errorf("list the Pods of StatefulSet %q from the cache: %w", sts.Name, err)
	}
	var (
		refused []*corev1.Pod
		wait    time.Duration
	)
	for _, pod := range pods {
		if !isPodOf(pod, db) || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" {
			continue
		}
		c := podScheduled(pod)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		if left := c.LastTransitionTime.Add(UnschedulableAfter).Sub(now); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		refused = append(refused, pod)
	}
	if len(refused) == 0 {
		return nil, wait, nil
	}
	return &failure{reason: examplev1.ReasonUnschedulable, message: unschedulableMessage(refused)}, wait, nil
}

// podScheduled is pod's PodScheduled condition, or nil.
func podScheduled(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// unschedulableMessage names the Pods the scheduler cannot place, by ordinal, with its
// message for each: "Pod NAME cannot be scheduled: MESSAGE"; for several Pods, "Pods A, B
// cannot be scheduled: " and the message when it is the same for every Pod named, else each
// distinct message after the Pods it is for ("A, B: MESSAGE; C: MESSAGE"). At most
// maxUnschedulablePods are named ("and N more" counts the others), and each message is cut
// to maxSchedulerMessage bytes.
func unschedulableMessage(pods []*corev1.Pod) string {
	// The names "<statefulset>-<ordinal>" of one StatefulSet sort by ordinal by length, then
	// bytes.
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), strings.Compare(a.Name, b.Name))
	})
	shown := pods[:min(len(pods), maxUnschedulablePods)]
	type group struct {
		message string
		pods    []string
	}
	var (
		names  []string
		groups []group
	)
	for _, pod := range shown {
		names = append(names, pod.Name)
		msg := cutUTF8(podScheduled(pod).Message, maxSchedulerMessage)
		if i := slices.IndexFunc(groups, func(g group) bool { return g.message == msg }); i >= 0 {
			groups[i].pods = append(groups[i].pods, pod.Name)
		} else {
			groups = append(groups, group{msg, []string{pod.Name}})
		}
	}
	var b strings.Builder
	if len(pods) == 1 {
		b.WriteString("Pod ")
	} else {
		b.WriteString("Pods ")
	}
	b.WriteString(strings.Join(names, ", "))
	if more := len(pods) - len(shown); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	b.WriteString(" cannot be scheduled: ")
	if len(groups) == 1 {
		b.WriteString(groups[0].message)
		return b.String()
	}
	for i, g := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", strings.Join(g.pods, ", "), g.message)
	}
	return b.String()
}
