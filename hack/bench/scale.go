package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaleResult is the large data set part (-scale-large): what holding Objects objects costs
// each server, a paginated LIST of all of them, and our server's start on them.
type scaleResult struct {
	Objects int           `json:"objects"`
	Memory  *memoryResult `json:"memory"`
	// Our server stopped and started again on the data set: ReadySeconds until /readyz
	// answered ok, CacheSeconds until a LIST from its watch cache (resourceVersion=0) did.
	ReadySeconds float64 `json:"readySeconds"`
	CacheSeconds float64 `json:"watchCacheSeconds"`
}

// pageLimit is the page size of the paginated LIST rows, as kubectl's --chunk-size default.
const pageLimit = 500

// runScaleLarge fills a namespace with Objects Databases on our server and Objects objects of
// the CRD, records both servers' memory, lists every object in pages of pageLimit through
// each target, then records the memory settled and lists again, and restarts our server on the
// data set.
func (b *bench) runScaleLarge(ctx context.Context, res *results) error {
	n := b.sc.ScaleObjects
	nsOurs, nsCRD := "bench-scale-ours", "bench-scale-crd"
	for _, ns := range []string{nsOurs, nsCRD} {
		if err := b.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	sr := &scaleResult{Objects: n}
	res.Scale = sr
	var err error
	if sr.Memory, err = b.memoryHolding(ctx, n, nsOurs, nsCRD); err != nil {
		return err
	}
	// Right after the creates, every page of a LIST comes from the watch cache: a continued
	// page from its snapshot at the first page's resourceVersion. Once etcd is compacted past
	// the last write, that snapshot is gone, and continued pages come from etcd until the
	// next write makes a new one.
	if err := b.listPaginated(ctx, res, verbListPaginated, nsOurs, nsCRD); err != nil {
		return err
	}
	if err := b.memorySettle(ctx, sr.Memory); err != nil {
		return err
	}
	if err := b.listPaginated(ctx, res, verbListPaginatedEtcd, nsOurs, nsCRD); err != nil {
		return err
	}

	logf("scale: restarting our server on %d Databases", n)
	if err := b.cluster.StopComponent(procOurs); err != nil {
		return err
	}
	start := time.Now()
	if err := b.cluster.StartComponent(ctx, procOurs); err != nil {
		return err
	}
	sr.ReadySeconds = round3(time.Since(start).Seconds())
	b.cpu[procOurs] = b.cluster.PID(procOurs)
	for {
		if _, err := b.direct.client.List(ctx, nsOurs, metav1.ListOptions{ResourceVersion: "0", Limit: 1}); err == nil {
			break
		}
		if ctx.Err() != nil || time.Since(start) > 10*time.Minute {
			return fmt.Errorf("our server's watch cache not filled %v after its start", time.Since(start).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	sr.CacheSeconds = round3(time.Since(start).Seconds())
	logf("scale: our server ready in %.1f s, its watch cache filled in %.1f s", sr.ReadySeconds, sr.CacheSeconds)

	if b.o.skipAPI && b.o.skipController {
		return nil // nothing runs on this cluster after this part
	}
	logf("scale: deleting the objects")
	if err := deleteAll(ctx, b.direct, nsOurs); err != nil {
		return err
	}
	return deleteAll(ctx, b.crd, nsCRD)
}

// The paginated LIST rows: from the watch cache, and after a compaction (continued pages
// from etcd).
const (
	verbListPaginated     = "list-paginated"
	verbListPaginatedEtcd = "list-paginated-etcd"
)

// listPaginated lists the nsOurs or nsCRD objects in pages of pageLimit through each target,
// rotated, half the rounds of a row, and adds a row of verb per target with its throughput in
// objects per second; with -profile, it then records both servers' CPU while one client lists
// through kube-apiserver, ours and the CRD's (<server>-<verb>-via-kube.pprof, -crd.pprof).
func (b *bench) listPaginated(ctx context.Context, res *results, verb, nsOurs, nsCRD string) error {
	n := b.sc.ScaleObjects
	logf("scale: %s of %d objects, %d per page", verb, n, pageLimit)
	nsOf := func(t *target) string {
		if t.ours {
			return nsOurs
		}
		return nsCRD
	}
	parts := map[*target][]part{}
	for k := range max(1, b.sc.Rounds/2) {
		for _, t := range rotate(b.targets, k) {
			parts[t] = append(parts[t], b.measurePart(ctx, 1, 1, func(ctx context.Context, _ int) error {
				got, err := listAll(ctx, t, nsOf(t))
				if err == nil && got != n {
					err = fmt.Errorf("listed %d objects in pages, want %d", got, n)
				}
				return err
			}))
		}
	}
	for _, t := range b.targets {
		r := finishRow(t, verb, n, 1, parts[t])
		// Throughput in objects listed per second, not LIST passes.
		r.Throughput = round3(r.Throughput * float64(n))
		res.Rows = append(res.Rows, r)
		logf("  %-11s %s of %d: %.0f objects/s (a pass p50 %.1f s)%s", t.Name, verb, n, r.Throughput, r.Latency.P50/1000, errSuffix(r.FirstError))
	}
	if b.o.profileDir == "" {
		return nil
	}
	for _, t := range []*target{b.targets[1], b.crd} {
		file := verb + "-via-kube"
		if t == b.crd {
			file = verb + "-crd"
		}
		if err := b.profileUnder(ctx, file, 15, 1, func(ctx context.Context) error {
			_, err := listAll(ctx, t, nsOf(t))
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes every Database of ns through t. A DeleteCollection of many objects
// outlasts the request timeout (a 504, or over HTTP/2 a reset stream, while the deletion goes
// on in the server): it is sent again, whatever its error, until a LIST finds the namespace
// empty or 30 minutes have passed.
func deleteAll(ctx context.Context, t *target, ns string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for {
		err := t.client.DeleteCollection(ctx, ns)
		if err != nil {
			logf("  deleting the Databases of %s: %v (sent again)", ns, err)
		}
		l, lerr := t.client.List(ctx, ns, metav1.ListOptions{Limit: 1})
		if lerr == nil && len(l.Items) == 0 {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("the Databases of %s are not all deleted: %v", ns, errors.Join(err, lerr, ctx.Err()))
		}
		time.Sleep(time.Second)
	}
}

// listAll lists every Database of ns through t in pages of pageLimit and returns how many
// there were.
func listAll(ctx context.Context, t *target, ns string) (int, error) {
	total, cont := 0, ""
	for {
		l, err := t.client.List(ctx, ns, metav1.ListOptions{Limit: pageLimit, Continue: cont})
		if err != nil {
			return total, err
		}
		total += len(l.Items)
		if cont = l.Continue; cont == "" {
			return total, nil
		}
	}
}
