package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// kwokVolumeRoot is where kwok's volume stage puts the hostPath of each PersistentVolume it
// provisions (its pvc-provision Stage).
const kwokVolumeRoot = "/tmp/kwok-local-path-provisioner/"

// localizeVolumes points the hostPath PersistentVolumes kwok's stages provision at dir (the
// cluster's <Dir>/volumes) instead of kwokVolumeRoot, so the real node's data lives, and
// stays, with the rest of the cluster's state. The kubelet creates each directory on first use
// (hostPath type DirectoryOrCreate).
func localizeVolumes(stages []*unstructured.Unstructured, dir string) {
	for _, s := range stages {
		steps, _, _ := unstructured.NestedSlice(s.Object, "spec", "steps")
		changed := false
		for _, step := range steps {
			m, _ := step.(map[string]any)
			for _, kind := range []string{"apply", "patch"} {
				action, _ := m[kind].(map[string]any)
				tmpl, ok := action["template"].(string)
				if ok && strings.Contains(tmpl, kwokVolumeRoot) {
					action["template"] = strings.ReplaceAll(tmpl, kwokVolumeRoot, strings.TrimSuffix(dir, "/")+"/")
					changed = true
				}
			}
		}
		if changed {
			_ = unstructured.SetNestedSlice(s.Object, steps, "spec", "steps")
		}
	}
}

// prepareVolumeDir makes the directory of pv, a hostPath PersistentVolume under root, one any
// user may write, as the local-path provisioner's directories are (mode 0777): the kubelet
// applies no fsGroup to a hostPath volume, and the database Pods run as their image's
// non-root server user, which must create its data directory in the volume's root (it keeps
// that one private itself, PostgreSQL's at 0700). A directory that exists, from kwok's
// DirectoryOrCreate or an earlier run's data, only has its mode set. It returns the
// directory it prepared, "" for a PersistentVolume that is not under root.
func prepareVolumeDir(root string, pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.HostPath == nil {
		return "", nil
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(dir) != filepath.Clean(root) {
		return "", nil
	}
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	// Mkdir's mode passes through the umask; Chmod's does not.
	return dir, os.Chmod(dir, 0o777)
}

// volumeDirs runs prepareVolumeDir on every PersistentVolume the cluster has and gets, until
// stop is called.
type volumeDirs struct {
	stop context.CancelFunc
}

// startVolumeDirs starts volumeDirs for <Dir>/volumes and returns once it has seen the
// PersistentVolumes that exist.
func (c *Cluster) startVolumeDirs(ctx context.Context) (*volumeDirs, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(c.cfg.Dir, "volumes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	prepare := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok {
			return
		}
		if _, err := prepareVolumeDir(root, pv); err != nil {
			c.cfg.Logf("volume %s: %v", pv.Name, err)
		}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().PersistentVolumes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    prepare,
		UpdateFunc: func(_, obj any) { prepare(obj) },
	}); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		stop()
		factory.Shutdown()
		return nil, fmt.Errorf("listing PersistentVolumes: %w", ctx.Err())
	}
	return &volumeDirs{stop: func() { stop(); factory.Shutdown() }}, nil
}
