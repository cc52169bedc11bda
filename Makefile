# database-apiserver: see README.md. Every target builds what it needs.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin

.PHONY: all build test test-unit test-integration test-e2e test-faults verify generate run clean tools tools-control-plane node node-deps prometheus

all: build

# -trimpath, as hack/build-tools.sh builds the pinned Kubernetes binaries: with the same flags and
# the same module versions (hack/verify-shared-deps.sh), the packages both compile come from one
# build-cache entry, so a cold `make run` compiles k8s.io/apiserver and client-go once, not twice.
BUILD_FLAGS ?= -trimpath

## build: the API server, the controller and the kubectl plugin (kubectl-database: put bin/ on
## PATH and kubectl runs it as `kubectl database`) binaries into bin/.
build:
	$(call build-cmds,$(CMDS))

# CMDS are our commands as <package>:<binary name> pairs.
CMDS := ./cmd/apiserver:database-apiserver ./cmd/controller:database-controller ./cmd/kubectl-database:kubectl-database

# build-cmds builds <package>:<name> pairs in one `go build`, so the go command compiles what
# they share once and links them in parallel. go build names a command after its directory:
# each goes to $(BIN)/cmd/ and is hard-linked to $(BIN)/<name>. go build leaves one already
# up to date as it is.
define build-cmds
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/cmd/ $(foreach c,$(1),$(word 1,$(subst :, ,$(c))))
	$(foreach c,$(1),ln -f $(BIN)/cmd/$(notdir $(word 1,$(subst :, ,$(c)))) $(BIN)/$(word 2,$(subst :, ,$(c)));)
endef

## generate: regenerate deepcopy, defaulters, conversions, protobuf, OpenAPI, clientset, listers,
## informers. Needs protoc (Debian's protobuf-compiler): installed with apt-get when missing if
## run as root, else the script says what to install.
generate:
	./hack/update-codegen.sh

## verify: generated code is current (regenerated in a copy, so it needs protoc too) and the
## module cache untouched, go vet (also of the files built with the e2e and faults tags) and
## gofmt are clean.
verify:
	./hack/verify-codegen.sh
	./hack/verify-shared-deps.sh
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags faults ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

## test: unit, integration (our server on a real embedded etcd) and e2e tests (the whole local
## control plane driven by kubectl).
test: test-unit test-integration test-e2e

# Every go test has a -timeout, well past what it takes on two idle cores (integration about
# 70 s against 10 minutes, e2e 22 to 35 minutes against 60), so that a hung test fails with its
# goroutines' stacks.
# test/alerts runs Prometheus's promtool on the alert rules (artifacts/monitoring): Debian's,
# unpacked into bin/prometheus by hack/fetch-prometheus.sh.
test-unit: prometheus
	PROMTOOL=$(CURDIR)/$(BIN)/prometheus/promtool $(GO) test -timeout 10m ./pkg/... ./cmd/... ./internal/... ./hack/... ./test/alerts/...

## prometheus: Debian's prometheus and promtool in bin/prometheus (hack/fetch-prometheus.sh).
prometheus:
	./hack/fetch-prometheus.sh

test-integration:
	$(GO) test -count=1 -timeout 10m ./test/integration/...

# --- local control plane ----------------------------------------------------
LOCAL_DIR ?= .local

## tools: the pinned kube-apiserver, kube-controller-manager, kube-scheduler (bin/k8s-<version>/)
## and kwok (bin/kwok-<version>/), built from hack/tools; skips what is already built. As root
## also the real node's crane, kubelet, kube-proxy, CNI plugins and CoreDNS.
tools:
	./hack/build-tools.sh

## tools-control-plane: only what the control plane and its simulated node run (kube-apiserver,
## kube-controller-manager, kube-scheduler, kwok): what `make run` waits for.
tools-control-plane:
	./hack/build-tools.sh control-plane

## node: what the local cluster runs: the tools and, as root, its real node's Debian packages
## (containerd, runc, iptables, debootstrap and psql: hack/install-node-deps.sh) and images
## (hack/build-node-images.sh, kept in bin/images and rebuilt only when their inputs change),
## the binaries and the images built side by side (hack/build-real-node.sh). Not root: the
## tools only, and the simulated node runs alone.
node: node-deps
	./hack/build-real-node.sh

## node-deps: as root, the Debian packages the real node runs (hack/install-node-deps.sh).
node-deps:
	./hack/install-node-deps.sh

## run: the local control plane in the foreground, with the examples applied; state in
## $(LOCAL_DIR) (kept across runs). Ctrl-C stops it. APISERVER_ARGS go to our server,
## CONTROLLER_ARGS to the controller. It waits for the control plane's tools only: as root, what
## the real node still lacks (its binaries and images, REAL_NODE_BUILD) is built while the
## cluster already serves on its simulated node, and the real node joins when it is ready.
REAL_NODE_BUILD ?= ./hack/build-real-node.sh
run: tools-control-plane node-deps
	$(call build-cmds,$(CMDS) ./hack/local-up:local-up)
	LOCAL_DIR=$(LOCAL_DIR) CONTROLLER_ARGS="$(CONTROLLER_ARGS)" REAL_NODE_BUILD="$(REAL_NODE_BUILD)" \
	  ./$(BIN)/local-up $(APISERVER_ARGS)

## clean: remove the local control plane's state ($(LOCAL_DIR)), not bin/.
clean:
	@test -n "$(LOCAL_DIR)" && test "$(LOCAL_DIR)" != "/"
	rm -rf -- "$(LOCAL_DIR)"

## test-e2e: kubectl and the clientset against the whole local control plane (temporary state,
## free ports). One package after the other: both start the machine's one real node.
test-e2e: build node prometheus
	$(GO) test -tags e2e -count=1 -timeout 60m ./test/e2e/...
	$(GO) test -tags e2e -count=1 -timeout 20m ./internal/localcluster/...

# The e2e tests that are fault scenarios: our API server restarted under load through
# kube-apiserver, kube-apiserver down, components SIGKILLed and restarted, the control plane
# restarted on its state, the controller SIGKILLed mid-reconcile, an idle Ready Database, and
# the failovers of a real PostgreSQL and MySQL primary frozen, isolated and crash-looping, and
# a Synchronous scale-down while the replica kept lags.
E2E_FAULTS := TestAPIServerRestartsThroughKubeAPIServer|TestControllerRidesOutAKubeAPIServerOutage|TestKilledComponentsAreRestarted|TestRestartOnSameStateKeepsObjects|TestControllerKilledWhileCreatingDatabasesConverges|TestReadyDatabaseLeftAloneCausesNoWrites|TestRealFailover|TestRealSynchronousScaleDownKeepsAcknowledgedCommits

## test-faults: the fault suite: etcd SIGKILLed under writes, etcd out of space, one of 3 etcd
## members and one of 2 API servers killed under load (test/faults, etcd and our server as
## processes), then the e2e fault scenarios (an idle Ready Database watched for 5 minutes);
## each prints its figures as "measured:" lines.
test-faults: build node
	$(GO) test -tags faults -count=1 -timeout 10m -v ./test/faults/...
	E2E_IDLE_WINDOW=5m $(GO) test -tags e2e -count=1 -timeout 30m -run '^($(E2E_FAULTS))$$' -v ./test/e2e/...

# --- images -----------------------------------------------------------------
# No container runtime runs on the development machines of this project: build the images where
# one does (docs/install.md). IMAGE_REGISTRY, if set, ends with a slash: registry.example/team/
IMAGE_REGISTRY ?=
IMAGE_TAG ?= v0.1.0
DOCKER ?= docker

.PHONY: images

## images: $(IMAGE_REGISTRY)database-apiserver:$(IMAGE_TAG) and
## $(IMAGE_REGISTRY)database-controller:$(IMAGE_TAG) from the Dockerfile (static, non-root).
images:
	$(DOCKER) build --target apiserver -t $(IMAGE_REGISTRY)database-apiserver:$(IMAGE_TAG) .
	$(DOCKER) build --target controller -t $(IMAGE_REGISTRY)database-controller:$(IMAGE_TAG) .

# --- benchmarks -------------------------------------------------------------
.PHONY: bench bench-durability

## bench: our API server against a CRD of the same type (hack/bench/crd.yaml, the group
## crd.example.com) on one local control plane, and the controller against a plain client;
## prints the table and writes docs/benchmarks/ (results.json, results.md, PNG plots). About
## 15 minutes on two cores; BENCH_ARGS=-quick is a smoke run of 2 to 4 minutes (see
## `go run ./hack/bench -h`).
bench: tools build
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/bench ./hack/bench
	./$(BIN)/bench $(BENCH_ARGS)

## bench-durability: what durability costs, on the real node (as root): PostgreSQL (pgbench -N)
## and MySQL (the same transaction through the mysql client), each on a single server, on
## replicas: 2 Asynchronous and on replicas: 2 Synchronous, loaded back to back through the
## client Service by 4 connections; logs TPS, average and p95 latency and the ratios
## (docs/failover.md). About 15 minutes on two cores. DURABILITY_SECONDS (default 20) is each
## load's measured time, DURABILITY_ROUNDS (default 4) the rounds. Build tag bench: make test
## does not run it.
bench-durability: build node
	$(GO) test -tags 'e2e bench' -count=1 -timeout 60m -run '^TestDurabilityCost$$' -v ./test/e2e/
