// Package nodeenv is the test environment the envtest suites share: envtest's API server run as a real
// cluster runs it (Node and RBAC authorization, NodeRestriction), node credentials, and an in-memory CRI
// runtime with a real client. Test code only.
package nodeenv

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// Start starts etcd and kube-apiserver (KUBEBUILDER_ASSETS) with --authorization-mode=Node,RBAC and the
// NodeRestriction admission plugin, so an agent under test has exactly a node's rights, and returns the
// admin's configuration.
func Start() (*envtest.Environment, *rest.Config, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, fmt.Errorf("KUBEBUILDER_ASSETS must point at etcd, kube-apiserver and kubectl (run the tests with `make test`)")
	}
	env := &envtest.Environment{}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("authorization-mode", "Node", "RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, err
	}
	return env, cfg, nil
}

// NodeConfig is a configuration that authenticates as the kubelet of nodeName (system:node:<name> in
// system:nodes).
func NodeConfig(env *envtest.Environment, nodeName string) (*rest.Config, error) {
	u, err := env.AddUser(envtest.User{Name: "system:node:" + nodeName, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// FakeRuntime serves an in-memory CRI runtime on a socket in a new temporary directory and returns it
// with a real client connected to it, and the function that stops both and removes the directory.
func FakeRuntime(opts ...fake.Option) (*fake.Runtime, *runtime.Client, func(), error) {
	dir, err := os.MkdirTemp("", "nodelet-cri")
	if err != nil {
		return nil, nil, nil, err
	}
	rt := fake.New(opts...)
	endpoint, err := rt.Start(filepath.Join(dir, "cri.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	c, err := runtime.Dial(endpoint, runtime.Options{})
	if err != nil {
		rt.Stop()
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return rt, c, func() {
		_ = c.Close()
		rt.Stop()
		_ = os.RemoveAll(dir)
	}, nil
}
