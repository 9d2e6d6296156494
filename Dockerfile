# Multi-stage build of a static nodelet binary on a distroless-style base.
# Build: docker build --build-arg VERSION=$(git describe --always) -t nodelet .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG KUBE_VERSION=v1.37.1
RUN bash -c '. hack/lib.sh && go_build_nodelet /out/nodelet \
      -ldflags "-s -w -X main.version=${VERSION} -X main.kubeVersion=${KUBE_VERSION}"'

# The agent runs as root on the host (hostPID, the runtime's socket and /var/lib/kubelet mounted in):
# it needs nothing from the image but itself and CA certificates.
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/nodelet /usr/local/bin/nodelet
ENTRYPOINT ["/usr/local/bin/nodelet"]
