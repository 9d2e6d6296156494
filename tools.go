//go:build tools

package main

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-logr/zapr"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "go.uber.org/zap"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/utils/clock"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)

func main() {}
