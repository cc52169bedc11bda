package database

import (
	"fmt"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
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
	if len(msg) <= maxConditionMessage {
		return msg
	}
	cut := maxConditionMessage
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
		case ReasonFailedCreate:
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
	return &failure{reason: ReasonFailedCreate, message: conditionMessage(refused.Message)}, nil
}

// refusalReported reports whether status already reports a refusal of the Pods: its Degraded
// condition has reason FailedCreate.
func refusalReported(status examplev1.DatabaseStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, ConditionDegraded)
	return c != nil && c.Reason == ReasonFailedCreate
}
