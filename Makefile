# nodelet — a Kubernetes node agent built as a controller-runtime operator.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

# Built binaries of the test bed (kube-apiserver, etcd, ...) and pinned tools are cached here by version.
BIN_CACHE ?= $(CURDIR)/.cache
export BIN_CACHE
KUBE_VERSION ?= v1.37.1
ETCD_VERSION ?= v3.6.16
ENVTEST_ASSETS := $(BIN_CACHE)/envtest-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(BIN_CACHE)/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Build tags: hack/lib.sh says why.
NODELET_BUILD_TAGS ?= $(shell bash -c '. hack/lib.sh && echo $$NODELET_BUILD_TAGS')
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.kubeVersion=$(KUBE_VERSION)
IMG ?= nodelet:$(VERSION)

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build
.PHONY: build
build: ## Build bin/nodelet (static).
	CGO_ENABLED=0 go build -tags "$(NODELET_BUILD_TAGS)" -trimpath -ldflags "$(LDFLAGS)" -o bin/nodelet .

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

##@ Test
.PHONY: test
test: unit e2e ## The README's test command: unit + envtest (-race), then e2e on the containerd bed.

.PHONY: unit
unit: testbins ## Unit and envtest suites with -race (everything but test/e2e and test/bench), and the outside operator module on testnode.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -race -count=1 $$(go list ./... | grep -v -e /test/e2e -e /test/bench)
	cd test/operator && KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -race -count=1 ./...

.PHONY: e2e
e2e: build ## End-to-end suite on a real bed: etcd, kube-apiserver, scheduler, controller-manager, containerd, runc, CNI.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/e2e.sh

.PHONY: e2e-systemd
e2e-systemd: build ## The systemd cgroup driver: its test against a real systemd, then the cgroup e2e specs on a bed whose containerd and agent use systemd (hack/systemd.sh runs one where PID 1 is not systemd), with logind for graceful node shutdown's specs.
	go test -c -o bin/podcgroups.test ./podcgroups/
	bash hack/systemd.sh run env NODELET_SYSTEMD_SOCKET=/run/systemd/private bin/podcgroups.test -test.run 'Systemd' -test.v
	CGROUP_DRIVER=systemd LOGIND=1 E2E_LABELS='!storage-bed' NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/e2e.sh -ginkgo.focus='cgroup|pids|Graceful node shutdown'

.PHONY: e2e-storage
e2e-storage: build ## Persistent storage on the storage bed (containerd 2.x, the CSI hostpath driver and kind's local-path provisioner from upstream's manifests, /var/lib/kubelet as the agent's root): the e2e specs labelled storage-bed (AGENT=kubelet: the real kubelet).
	bash hack/build-testbins.sh containerd2
	bash hack/build-testbins.sh csi
	BED_DIR=$(STORAGE_BED_DIR) bash hack/bed.sh clean >/dev/null 2>&1 || true
	BED_DIR=$(STORAGE_BED_DIR) CONTAINERD=2 AGENT_ROOT=/var/lib/kubelet E2E_LABELS=storage-bed NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/e2e.sh

STORAGE_BED_DIR ?= /var/lib/nodelet-bed-storage

.PHONY: conformance
conformance: ## Upstream e2e [NodeConformance] specs on a bed of their own (AGENT=kubelet: the real kubelet; FOCUS=, SKIP=, PROCS=).
	bash hack/conformance.sh

# The fixed subset CI runs on every submission: the [Conformance] specs among the [NodeConformance] ones (141).
CONFORMANCE_CI_FOCUS := \[NodeConformance\].*\[Conformance\]|\[Conformance\].*\[NodeConformance\]

.PHONY: conformance-ci
conformance-ci: build ## The conformance subset CI runs: [Conformance] specs of [NodeConformance] with nodelet.
	FOCUS='$(CONFORMANCE_CI_FOCUS)' NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/conformance.sh

.PHONY: conformance-node
conformance-node: build ## Every non-alpha upstream [sig-node] spec (in-place resize, security contexts, runtime classes, ...) on a bed of its own (AGENT=kubelet for the real kubelet; SERIAL=1: the [Serial] ones).
	SUITE=sig-node NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/conformance.sh

.PHONY: conformance-storage
conformance-storage: build ## Upstream e2e [sig-storage] specs that need no cloud (in-tree local/hostPath/emptydir drivers, PersistentVolumes-local, CSI hostpath and mock) on the systemd bed (AGENT=kubelet, CSI=0: in-tree only, SERIAL=1: the [Serial] ones).
	SUITE=storage NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/conformance.sh

# The storage subset CI runs (35 specs): CSI mock attach, workload information, service account tokens and fsGroup
# as a mount option; the CSINode allocatable count refresh and the attachment-limit rejection; the csi-hostpath
# driver's data, ReadWriteOncePod, inline ephemeral and online expansion specs (filesystem and block); the local and
# emptydir drivers' unused-volume and exec specs.
CONFORMANCE_STORAGE_CI_FOCUS := \[sig-storage\].*(CSI Mock (volume attach|workload info|volume service account token|fsgroup as mount option)|MutableCSINodeAllocatableCount|\[Driver: csi-hostpath\].*(volumes should store data|read-write-once-pod|\[Testpattern: CSI Ephemeral-volume \(default fs\)\] ephemeral should create read/write inline ephemeral volume|volume-expand should resize volume when PVC is edited while pod is using it)|\[Driver: (local|emptydir)\].*(should not mount / map unused volumes|should allow exec of files on the volume))

.PHONY: conformance-storage-ci
conformance-storage-ci: build ## The storage subset CI runs, with nodelet (the full set is conformance-storage).
	SUITE=storage FOCUS='$(CONFORMANCE_STORAGE_CI_FOCUS)' NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/conformance.sh

.PHONY: conformance-storage-serial
conformance-storage-serial: build ## The [Serial] specs of conformance-storage, one at a time.
	SUITE=storage SERIAL=1 NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/conformance.sh

.PHONY: testbins
testbins: ## Build (once) the test bed binaries from the Go module proxy.
	bash hack/build-testbins.sh all

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned).
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	mkdir -p $(BIN_CACHE)/tools/gobin
	GOBIN=$(BIN_CACHE)/tools/gobin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN_CACHE)/tools/gobin/golangci-lint $@

.PHONY: bench
bench: build ## Pod start/stop latency on a real containerd bed vs the raw CRI floor (prints figures; never fails on them).
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/bench.sh

.PHONY: chaos
chaos: build ## Faults on the bed with each node agent (containerd or the agent SIGKILLed during a burst or deletion of N pods; the API server and etcd down DOWN s; the agent cut off from the API server CUT s; the clock stepped 10 min ahead STEP s): prints CHAOS lines (convergence time, stuck, restarted, duplicated, left behind). AGENTS, FAULTS, ROUNDS, N, DOWN, CUT, STEP.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/chaos.sh

.PHONY: soak
soak: build ## Steady pod churn with probes, logs and exec for DURATION (default 1h) on a bed of its own (AGENT=kubelet: the kubelet): samples RSS, goroutines, open files and CPU every minute, prints their growth per hour, fails on anything left behind.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/soak.sh

.PHONY: handover
handover: build testbins ## Kubelet → nodelet → kubelet on a bed of its own through deploy/ (MODE=process: by hand); fails on any restarted container.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/handover.sh

.PHONY: join
join: build testbins ## A node joins with a bootstrap token only (TLS bootstrap), then rotates its client certificate; on a bed of its own.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/join.sh

IMAGE_ARCHS ?= $(shell go env GOARCH)
IMAGE_TAG ?= nodelet:$(VERSION)

.PHONY: kind-image
kind-image: build ## kind node images without Docker (podman, mmdebstrap): the kubelet's and nodelet's, cluster images preloaded.
	bash hack/install-deps.sh kind
	NODE_AGENT=kubelet NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/kind.sh image
	NODE_AGENT=nodelet NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/kind.sh image

.PHONY: kind
kind: ## A kind cluster (podman) of one control plane and WORKERS (2) workers, every node nodelet (NODE_AGENT=kubelet: the kubelet; CONTROL_PLANE_AGENT=, WORKER_AGENT= for a mixed one); make kind-image first.
	bash hack/kind.sh up

.PHONY: kind-down
kind-down: ## Delete the kind cluster `make kind` made.
	bash hack/kind.sh down

.PHONY: kind-multinode
kind-multinode: ## On the cluster `make kind` made: a DaemonSet on every node, topology spread, a worker's agent stopped (NotReady, tainted, pods evicted and replaced, back), kubectl drain; prints each step's time.
	bash hack/kind.sh multinode

.PHONY: kind-takeover
kind-takeover: build ## A kind cluster of kubelet nodes whose workers are handed to nodelet through deploy/kind (no container restarted), then the smoke check; the cluster is left up.
	bash hack/install-deps.sh kind
	NODE_AGENT=kubelet NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/kind.sh image
	bash hack/kind.sh takeover

.PHONY: kind-conformance
kind-conformance: kind-image ## The CNCF conformance suite through hydrophone on a kind cluster of nodelet nodes, then on one of kubelet nodes (KIND_AGENTS), the passed lists compared; reports under /var/lib/nodelet-kind/logs.
	bash hack/kind.sh judge

.PHONY: kind-smoke
kind-smoke: build ## CI's kind run: nodelet's node image, a nodelet cluster up, a Deployment over both workers reached through a Service from a pod, cluster down.
	bash hack/install-deps.sh kind
	NODE_AGENT=nodelet NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/kind.sh image
	bash hack/kind.sh down >/dev/null 2>&1 || true
	bash hack/kind.sh up
	bash hack/kind.sh smoke; rc=$$?; bash hack/kind.sh down; exit $$rc

.PHONY: image
image: ## Build the image without Docker (go-containerregistry) into bin/nodelet-image.tar (IMAGE_ARCHS=amd64,arm64: an OCI layout bin/nodelet-image-oci); prints its digest.
	@set -e; bins=; for a in $$(echo $(IMAGE_ARCHS) | tr , ' '); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a go build -tags "$(NODELET_BUILD_TAGS)" -trimpath -ldflags "$(LDFLAGS)" -o bin/linux-$$a/nodelet . ; \
	  bins="$$bins$${bins:+,}linux/$$a=bin/linux-$$a/nodelet"; done; \
	case "$(IMAGE_ARCHS)" in *,*) out="-oci bin/nodelet-image-oci" ;; *) out="-tar bin/nodelet-image.tar" ;; esac; \
	go run ./hack/image -bin "$$bins" -tag $(IMAGE_TAG) -version $(VERSION) $$out

.PHONY: image-push
PIN ?= deploy/kustomization.yaml

image-push: ## Build and push the image to REGISTRY (e.g. make image-push REGISTRY=127.0.0.1:5050/nodelet), no Docker; pins deploy/ (PIN=) to the pushed digest.
	@test -n "$(REGISTRY)" || { echo "REGISTRY is required, e.g. REGISTRY=127.0.0.1:5050/nodelet"; exit 1; }
	@set -e; bins=; for a in $$(echo $(IMAGE_ARCHS) | tr , ' '); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a go build -tags "$(NODELET_BUILD_TAGS)" -trimpath -ldflags "$(LDFLAGS)" -o bin/linux-$$a/nodelet . ; \
	  bins="$$bins$${bins:+,}linux/$$a=bin/linux-$$a/nodelet"; done; \
	go run ./hack/image -bin "$$bins" -version $(VERSION) -push $(REGISTRY):$(VERSION) $(if $(PIN),-pin $(PIN))

.PHONY: bench-hollow
bench-hollow: build testbins ## Hollow nodes on a real etcd + kube-apiserver: 100, 500, 1000 nodes × 10 pods (NODES=, prints figures).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/benchhollow -nodelet $(CURDIR)/bin/nodelet -nodes $(or $(NODES),100,500,1000)

##@ Run
.PHONY: up
up: build ## Bring up a local single-node cluster with nodelet as the node.
	NODELET_BIN=$(CURDIR)/bin/nodelet bash hack/bed.sh up

.PHONY: down
down: ## Stop everything `make up` started.
	bash hack/bed.sh down
