package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// fieldManager owns what the local cluster applies, so re-applying on restart is a no-op.
const fieldManager = "localcluster"

// writeKubeconfig writes a self-contained kubeconfig (certificates inline) for server,
// trusting caPEM and authenticating with kp.
func writeKubeconfig(path, server string, caPEM []byte, kp *keyPair, user string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM(), ClientKeyData: keyPEM}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// readObjects decodes every object of the YAML (or JSON) files given; directories contribute
// their *.yaml, *.yml and *.json files in name order.
func readObjects(paths ...string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() && e.Name() != "kustomization.yaml" {
					names = append(names, filepath.Join(p, e.Name()))
				}
			}
		}
		sort.Strings(names)
		files = append(files, names...)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		o, err := decodeObjects(f, b)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// decodeObjects decodes the YAML documents (or JSON objects) of data, read from name.
func decodeObjects(name string, data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// applier server-side applies objects through discovery, so it handles any kind the cluster
// serves, including example.com once the APIService is available.
type applier struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// apply server-side applies each object with force, in order.
func (a *applier) apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	return a.each(objs, func(ri dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), describe(obj), err)
		}
		return nil
	})
}

// create creates each object that does not exist yet, in order, and leaves
// existing ones exactly as they are.
func (a *applier) create(ctx context.Context, objs ...*unstructured.Unstructured) error {
	return a.each(objs, func(ri dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		// A GET first, so that an existing object is not sent again: its create would be
		// refused, but only after admission had printed its warnings for it.
		_, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %s %s: %w", obj.GetKind(), describe(obj), err)
		}
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), describe(obj), err)
		}
		return nil
	})
}

// each calls write for every object with the resource client of its kind and
// namespace (default when unset), in order, stopping at the first error.
func (a *applier) each(objs []*unstructured.Unstructured, write func(dynamic.ResourceInterface, *unstructured.Unstructured) error) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			a.mapper.Reset() // discovery may predate a group that just became available
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = a.dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = a.dynamic.Resource(mapping.Resource).Namespace(ns)
		}
		if err := write(ri, obj); err != nil {
			return err
		}
	}
	return nil
}

// CreateMissing creates the objects in the YAML files at paths (files, or
// directories of *.yaml read in name order) that do not exist yet, and leaves
// the existing ones as they are: `make run` uses it for the examples, so a
// restart keeps what the user changed. It returns the first error other than
// AlreadyExists.
func (c *Cluster) CreateMissing(ctx context.Context, paths ...string) error {
	objs, err := readObjects(paths...)
	if err != nil {
		return err
	}
	a, err := newApplier(c.AdminConfig)
	if err != nil {
		return err
	}
	return a.create(ctx, objs...)
}

func describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// splitByKind separates objects whose kind is one of kinds from the rest.
func splitByKind(objs []*unstructured.Unstructured, kinds ...string) (match, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		matched := false
		for _, k := range kinds {
			if strings.EqualFold(o.GetKind(), k) {
				matched = true
			}
		}
		if matched {
			match = append(match, o)
		} else {
			rest = append(rest, o)
		}
	}
	return match, rest
}
