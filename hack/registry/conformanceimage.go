package main

import (
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// conformanceSources are the files of the conformance image (registry.k8s.io/conformance, what hydrophone and
// sonobuoy run in a cluster): e2e.test, ginkgo and go-runner from a folder, kubectl, on the Debian tree of
// kindSources.proxyBase, laid out as upstream's test/conformance/image/Dockerfile lays them out.
type conformanceSources struct {
	// bin holds e2e.test, ginkgo and go-runner (k8s.io/kubernetes/test/conformance/image/go-runner).
	bin string
	// kubectl is the kubectl binary.
	kubectl string
	// tag is the image's tag, the Kubernetes version of e2e.test.
	tag string
}

// conformanceEnv is upstream's image environment: the suite's defaults, which the pod's environment overrides.
var conformanceEnv = []string{
	defaultPath,
	`E2E_FOCUS=\[Conformance\]`,
	"E2E_SKIP=",
	"E2E_PROVIDER=local",
	"E2E_PARALLEL=1",
	"E2E_VERBOSITY=4",
	"RESULTS_DIR=/tmp/results",
	"KUBECONFIG=",
}

// conformanceFiles are where upstream's Dockerfile puts each binary: go-runner is the entrypoint
// (kubeconformance) and is kept under its older names too.
func (c conformanceSources) conformanceFiles() map[string]string {
	runner := filepath.Join(c.bin, "go-runner")
	return map[string]string{
		"usr/local/bin/e2e.test":        filepath.Join(c.bin, "e2e.test"),
		"usr/local/bin/ginkgo":          filepath.Join(c.bin, "ginkgo"),
		"usr/local/bin/kubectl":         c.kubectl,
		"usr/local/bin/kubeconformance": runner,
		"run_e2e.sh":                    runner,
		"gorunner":                      runner,
	}
}

// addConformanceImage builds the conformance image and serves it as conformance:<tag>.
func addConformanceImage(images map[string]*ociImage, c conformanceSources, base string) error {
	if c.bin == "" {
		return nil
	}
	switch {
	case c.kubectl == "":
		return errors.New("--conformance-bin needs --kubectl")
	case c.tag == "":
		return errors.New("--conformance-bin needs --kube-version, the tag of the image")
	case base == "":
		return errors.New("--conformance-bin needs --kube-proxy-base, the tree it runs on")
	}
	tree, err := tarTree(base)
	if err != nil {
		return err
	}
	for at, bin := range c.conformanceFiles() {
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		tree = merge(tree, append(parents(at), file(at, 0o755, b)))
	}
	cfg := v1.Config{Entrypoint: []string{"kubeconformance"}, Env: conformanceEnv}
	img, err := imageLevel(tree, cfg, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("conformance image: %w", err)
	}
	images["conformance"] = img
	served["conformance"] = []string{"conformance:" + c.tag}
	return nil
}
