// Package podconfig translates a Pod into what the CRI runtime is given for it, as the kubelet does: the
// sandbox config (metadata, the kubelet's labels and annotations, DNS, hostname, log directory, port
// mappings, cgroup parent, sysctls, security context, resources and overhead) and each container's config
// (command and args, environment with service links and $(VAR) expansion, mounts, the container hash and
// annotations, log path, OOM score, huge pages, swap, seccomp and AppArmor, runAsNonRoot against the image's
// user). It also owns the pod's files on the host that those configs name: the pod and log directories,
// /etc/hosts, termination message files and reading them back.
//
// It builds values and writes pod files; it makes no CRI call beyond reading an image's user through the
// small interface LookupImageUser takes. It imports runtime for the label keys and container kinds only, and
// must not import runtime/pleg, podlifecycle/ or controllers/.
package podconfig
