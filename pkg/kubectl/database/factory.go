package database

import (
	"fmt"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// factory makes the clients of one invocation from kubectl's flags, as kubectl's
// cmdutil.Factory does.
type factory struct {
	flags *genericclioptions.ConfigFlags
	// now is the clock ages are computed on.
	now func() time.Time
}

// restConfig is the kubeconfig's client configuration with the flags applied. Requests and
// answers are JSON: the Database API's subresource kinds have no protobuf encoding to rely on.
func (f *factory) restConfig() (*rest.Config, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	return cfg, nil
}

// namespace is --namespace, else the kubeconfig context's namespace, else "default".
func (f *factory) namespace() (string, error) {
	ns, _, err := f.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// clients are the Database clientset (example.com/v1) and the core clientset (the children).
func (f *factory) clients() (versioned.Interface, kubernetes.Interface, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, nil, err
	}
	db, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the Database client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the Kubernetes client: %w", err)
	}
	return db, kube, nil
}
