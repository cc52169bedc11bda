package localcluster

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
