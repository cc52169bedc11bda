package localcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/names"
)

// A real node that joins a running cluster. When this machine can run the real node but its
// binaries or images are not built yet and Config.RealNodeBuild says how to build them, Start
// returns once the control plane, the simulated node and the controller are up; the build
// runs in the background, and the real node starts when it succeeds. Until then, and for good
// when the build or the start fails, every Pod runs on the simulated node.

const (
	// realNodeBuildName names the background build's process and its log,
	// <Dir>/logs/real-node-build.log.
	realNodeBuildName = "real-node-build"
	// buildStopGrace is how long a stopped build has between SIGTERM and SIGKILL: enough for
	// hack/build-node-images.sh to unmount what debootstrap mounted and remove its work
	// directory.
	buildStopGrace = 10 * time.Second
)

// laterJoin builds the real node, then starts it, in the background.
type laterJoin struct {
	// build builds what the node lacks; join starts the node. Both return promptly once
	// their context ends.
	build, join func(ctx context.Context) error
	// giveUp is called with the reason when build or join failed (not when stopped): the
	// cluster goes on without the real node.
	giveUp func(why string)
	logf   func(format string, args ...any)

	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
}

// startLaterJoin runs j in the background until it joined, gave up, or stop.
func startLaterJoin(j *laterJoin) *laterJoin {
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel, j.done = cancel, make(chan struct{})
	go j.run(ctx)
	return j
}

func (j *laterJoin) run(ctx context.Context) {
	defer close(j.done)
	t := time.Now()
	if err := j.build(ctx); err != nil {
		if ctx.Err() == nil {
			j.giveUp(err.Error())
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	j.logf("real node: built in %v; starting %s", time.Since(t).Round(time.Second), RealNodeName)
	t = time.Now()
	if err := j.join(ctx); err != nil {
		if ctx.Err() == nil {
			j.giveUp(fmt.Sprintf("it did not start: %v", err))
		}
		return
	}
	j.logf("real node: %s ready in %v", RealNodeName, time.Since(t).Round(100*time.Millisecond))
}

// stop ends the build (or the start) and waits until the background work has returned. It
// reports whether that work was still running.
func (j *laterJoin) stop() bool {
	select {
	case <-j.done:
		return false
	default:
	}
	j.cancel()
	<-j.done
	return true
}

// runBuild runs argv in a process group of its own, its output appended to
// <logDir>/real-node-build.log, and returns its exit error. When ctx ends it stops the whole
// group as Stop stops a child (SIGTERM, SIGKILL after buildStopGrace, then SIGKILL to whatever
// is left in the group), so no compiler or debootstrap outlives it.
func runBuild(ctx context.Context, argv []string, logDir string) error {
	if len(argv) == 0 {
		return errors.New("no build command")
	}
	p, err := startProcess(realNodeBuildName, argv[0], argv[1:], logDir)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w", strings.Join(argv, " "), p.err)
		}
		return nil
	case <-ctx.Done():
		p.stop(buildStopGrace)
		return ctx.Err()
	}
}

// buildRealNodeLater starts the background build and the real node after it. missing says
// what the node lacks (realNodeNotBuilt).
func (c *Cluster) buildRealNodeLater(missing string) {
	logPath := c.RealNodeBuildLog()
	c.cfg.Logf("real node: building %s in the background (log: %s); until it joins every Pod runs on the simulated node",
		missing, logPath)
	j := startLaterJoin(&laterJoin{
		build: func(ctx context.Context) error {
			if err := runBuild(ctx, c.cfg.RealNodeBuild, c.LogDir()); err != nil {
				return fmt.Errorf("the build failed: %v (log: %s)", err, logPath)
			}
			if why := realNodeUnavailable(c.cfg.RealNode); why != "" {
				return fmt.Errorf("still after the build: %s (log: %s)", why, logPath)
			}
			return nil
		},
		join: func(ctx context.Context) error {
			if err := c.startRealNode(ctx); err != nil {
				return err
			}
			c.mu.Lock()
			c.nodePending = false
			c.mu.Unlock()
			return nil
		},
		giveUp: c.giveUpRealNode,
		logf:   c.cfg.Logf,
	})
	c.mu.Lock()
	c.later = j
	c.mu.Unlock()
}

// giveUpRealNode takes down what a failed start of the real node started, removes its node
// selection policy, and records why there is no real node.
func (c *Cluster) giveUpRealNode(why string) {
	c.stopRealNode()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	if err := c.removeRealNodePolicy(ctx); err != nil {
		c.cfg.Logf("removing the real node's policy: %v", err)
	}
	c.mu.Lock()
	c.nodePending = false
	c.noRealNode = why
	c.mu.Unlock()
	c.cfg.Logf("no real node: %s; every Pod stays on the simulated node", why)
}

// WaitRealNode waits until the real node Start left to join later has joined or has been
// given up, or ctx ends, and then reports as RealNode does. It returns at once for a cluster
// whose real node was settled in Start.
func (c *Cluster) WaitRealNode(ctx context.Context) (bool, string) {
	c.mu.Lock()
	j := c.later
	c.mu.Unlock()
	if j != nil {
		select {
		case <-j.done:
		case <-ctx.Done():
		}
	}
	return c.RealNode()
}

// RealNodePending reports whether the real node is still being built or started in the
// background.
func (c *Cluster) RealNodePending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodePending
}

// MoveToRealNode deletes, once, the Pods of the Databases named in the manifests at paths
// that are neither on the real node nor sent to it, although a container of theirs runs an
// image the real node has: the Pods created before it joined. Their StatefulSet creates them
// again, and the node selection policy sends those to the real node: it waits until each is
// made again and bound there (for at most Config.Timeout). Every other Pod is left alone. It
// returns the deleted Pods as namespace/name, and does nothing without a running real node.
func (c *Cluster) MoveToRealNode(ctx context.Context, paths ...string) ([]string, error) {
	c.mu.Lock()
	var images []string
	if c.node != nil && !c.nodePending {
		images = c.node.images
	}
	c.mu.Unlock()
	if images == nil {
		return nil, nil
	}
	objs, err := readObjects(paths...)
	if err != nil {
		return nil, err
	}
	dbs, _ := splitByKind(objs, "Database")
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return nil, err
	}
	var moved []string
	deleted := map[string]*corev1.Pod{}
	for _, db := range dbs {
		pods, err := cs.CoreV1().Pods(db.GetNamespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return moved, err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if name, ok := names.DatabaseOfPod(pod); !ok || name != db.GetName() || !belongsOnRealNode(pod, images) {
				continue
			}
			err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: ptr.To(pod.UID)}})
			if err != nil && !isGone(err) {
				return moved, err
			}
			moved = append(moved, pod.Namespace+"/"+pod.Name)
			deleted[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	for _, name := range moved {
		old := deleted[name]
		for {
			pod, err := cs.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
			if err == nil && pod.UID != old.UID && pod.Spec.NodeName == RealNodeName {
				break
			}
			select {
			case <-ctx.Done():
				return moved, fmt.Errorf("%s was deleted, but no new Pod of that name is bound to %s: %w", name, RealNodeName, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return moved, nil
}

// RealNodeBuildLog is the log of the real node's background build (Config.RealNodeBuild).
func (c *Cluster) RealNodeBuildLog() string {
	return filepath.Join(c.LogDir(), realNodeBuildName+".log")
}

// belongsOnRealNode reports whether pod, not being deleted, runs an image the real node has
// (images, the node selection policy's list) but is neither on the real node nor selects it.
func belongsOnRealNode(pod *corev1.Pod, images []string) bool {
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == RealNodeName || pod.Spec.NodeSelector[RealNodeLabel] == "true" {
		return false
	}
	return slices.ContainsFunc(pod.Spec.Containers, func(ctr corev1.Container) bool {
		return slices.Contains(images, ctr.Image)
	})
}

// isGone reports whether a delete found the object gone, or replaced by another of the same
// name (a failed UID precondition is a 409 Conflict).
func isGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
