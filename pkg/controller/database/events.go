package database

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// event records an Event on db and logs it.
func (r *Reconciler) event(ctx context.Context, db *examplev1.Database, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	klog.FromContext(ctx).V(2).Info(msg, "reason", reason)
	r.recorder.Event(db, eventType, reason, msg)
}

// recordCreated records one Created Event naming the children the pass created ("Created
// Secret a, Service b"), if any, rather than one each: a new Database has four or five, and
// every Event is a write kube-apiserver and etcd pay for.
func (p *pass) recordCreated(ctx context.Context) {
	if len(p.created) > 0 {
		p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonCreated, "Created %s", strings.Join(p.created, ", "))
	}
}
