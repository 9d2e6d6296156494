package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Config is nodelet's complete configuration.
type Config struct {
	// Kubelet is the --config file (or an empty one), kubelet-defaulted, with the --config-dir drop-ins
	// merged over it and explicitly given flags applied over both.
	Kubelet kubeletconfigv1beta1.KubeletConfiguration

	ConfigFile       string // --config
	ConfigDir        string // --config-dir
	Kubeconfig       string // --kubeconfig; "" means standalone mode
	HostnameOverride string // --hostname-override

	// Hostname is HostnameOverride or os.Hostname(), trimmed and lower-cased.
	Hostname string
	// NodeName is the Node object's name; equal to Hostname.
	NodeName string

	NodeIPs    []net.IP          // --node-ip
	NodeLabels map[string]string // --node-labels
	RootDir    string            // --root-dir
	// Verbosity is logging.verbosity (-v / --v, or the config file).
	Verbosity int

	// CloudProvider is --cloud-provider: "" or "external".
	CloudProvider string
	// Node credentials: TLS bootstrap (nodecreds) and the lock file (lockfile). CertDir also holds
	// the self-signed serving certificate; "" means <root-dir>/pki.
	BootstrapKubeconfig  string // --bootstrap-kubeconfig
	CertDir              string // --cert-dir
	LockFile             string // --lock-file
	ExitOnLockContention bool   // --exit-on-lock-contention
	// LockContentionIgnoresKubelet (--lock-contention-ignores-kubelet, nodelet's own, set by `nodelet
	// takeover`): a kubelet that opens the lock file (restarted by its supervisor, it waits for the lock)
	// is no contention; another nodelet is. The node goes back to the kubelet when nodelet exits.
	LockContentionIgnoresKubelet bool

	// The container garbage collection policy: the kubelet's deprecated flags, which it still honours
	// (KubeletFlags, not KubeletConfiguration fields).
	MinimumGCAge            time.Duration // --minimum-container-ttl-duration (default 0)
	MaxPerPodContainerCount int32         // --maximum-dead-containers-per-container (default 1)
	MaxContainerCount       int32         // --maximum-dead-containers (default -1: no limit)

	// MetricsBindAddress is an unauthenticated listener serving the node's metrics (what the node API's
	// authorized /metrics serves); "0", the default, runs none. Metrics are read through the node API.
	MetricsBindAddress string

	// PrintVersion is --version: print the version and exit (Load returns ErrVersion).
	PrintVersion bool

	// Notices are what start-up reports once (LogNotices): settings and flags nodelet accepts but does
	// not act on, and files decoded leniently.
	Notices []Notice

	// flags is the parsed command line (nil for a Config built in code), for Flagz.
	flags *pflag.FlagSet
}

// ErrVersion is returned by Load when --version asks for the version only.
var ErrVersion = errors.New("version requested")

const (
	cloudProviderExternal = "external"
	cgroupDriverSystemd   = "systemd"
)

// newConfig returns a Config holding every default, before any file or flag.
func newConfig() *Config {
	c := &Config{
		NodeLabels:              map[string]string{},
		RootDir:                 DefaultRootDir,
		MetricsBindAddress:      DefaultMetricsBindAddress,
		MaxPerPodContainerCount: 1,
		MaxContainerCount:       -1,
	}
	SetDefaults(&c.Kubelet)
	return c
}

// Default returns the configuration the kubelet's defaults give a node called nodeName, as if started
// with no config file and no flags but --hostname-override: for agents built in code (testnode, hollow
// nodes), which then set what they need and call Validate.
func Default(nodeName string) *Config {
	c := newConfig()
	c.HostnameOverride = nodeName
	c.Hostname, c.NodeName = nodeName, nodeName
	return c
}

// Load parses args (without the program name), reads --config and the --config-dir drop-ins if given,
// applies the explicitly given flags over them, resolves the hostname and validates, as the kubelet
// does: defaults, then the file, then drop-ins in lexical order, then flags. Unknown fields in the files
// are ignored with a notice; flags and fields nodelet does not act on are accepted with a notice. On
// --help it prints usage to stdout and returns pflag.ErrHelp; on --version it returns ErrVersion.
func Load(args []string) (*Config, error) {
	return load(args, os.Stdout, os.Hostname)
}

func load(args []string, stdout io.Writer, hostname func() (string, error)) (*Config, error) {
	// First pass: learn --config and --config-dir and reject bad flags, on a throwaway Config.
	probe := newConfig()
	if err := parseFlags(NewFlagSet(probe), args, stdout); err != nil {
		return nil, err
	}
	if probe.PrintVersion {
		return nil, ErrVersion
	}
	c := newConfig()
	docs, err := c.loadFiles(probe.ConfigFile, probe.ConfigDir)
	if err != nil {
		return nil, err
	}
	// Second pass: only flags that are given write into the loaded config.
	fs := NewFlagSet(c)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	c.Verbosity = int(c.Kubelet.Logging.Verbosity)
	if err := c.resolveNodeName(hostname); err != nil {
		return nil, err
	}
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if err := c.collectNotices(fs, docs); err != nil {
		return nil, err
	}
	c.flags = fs
	return c, nil
}

// Flagz is the command line as the kubelet's /flagz lists its own: every flag nodelet accepts (the flags
// the kubelet removed left out) with its value, given or not. It is nil for a Config not loaded from a
// command line (Default), as the kubelet serves no /flagz without a flag set.
func (c *Config) Flagz() map[string]string {
	if c.flags == nil {
		return nil
	}
	out := map[string]string{}
	c.flags.VisitAll(func(f *pflag.Flag) {
		if _, removed := f.Value.(removedValue); !removed {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// loadFiles reads the config file and merges the drop-ins over it (or over the defaults).
func (c *Config) loadFiles(file, dropInDir string) ([]configDoc, error) {
	var docs []configDoc
	if file != "" {
		kc, doc, err := loadConfigFile(file)
		if err != nil {
			return nil, err
		}
		c.Kubelet, docs = *kc, append(docs, doc)
	}
	if dropInDir == "" {
		return docs, nil
	}
	kc, dropIns, err := mergeDropIns(&c.Kubelet, dropInDir)
	if err != nil {
		return nil, err
	}
	c.Kubelet = *kc
	return append(docs, dropIns...), nil
}

func (c *Config) collectNotices(fs *pflag.FlagSet, docs []configDoc) error {
	c.Notices = docNotices(docs)
	flags, reported := flagNotices(fs, c)
	c.Notices = append(c.Notices, flags...)
	fields, err := fieldNotices(&c.Kubelet, docs, reported)
	if err != nil {
		return err
	}
	c.Notices = append(c.Notices, fields...)
	return nil
}

// CertDirectory is where the node's certificates live: --cert-dir, or <root-dir>/pki.
func (c *Config) CertDirectory() string {
	if c.CertDir != "" {
		return c.CertDir
	}
	return filepath.Join(c.RootDir, "pki")
}

func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return err
	}
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected positional arguments: %q", fs.Args())
	}
	return nil
}

func (c *Config) resolveNodeName(hostname func() (string, error)) error {
	h, err := resolveHostname(c.HostnameOverride, hostname)
	if err != nil {
		return err
	}
	c.Hostname = h
	c.NodeName = h
	return nil
}

// resolveHostname follows the kubelet's nodeutil.GetHostname.
func resolveHostname(override string, hostname func() (string, error)) (string, error) {
	h := override
	if h == "" {
		var err error
		if h, err = hostname(); err != nil {
			return "", fmt.Errorf("couldn't determine hostname: %w", err)
		}
	}
	h = strings.TrimSpace(h)
	if h == "" {
		return "", errors.New("empty hostname is invalid (check --hostname-override)")
	}
	return strings.ToLower(h), nil
}

// RuntimeEndpoint returns the CRI runtime endpoint as a unix:// URL.
func (c *Config) RuntimeEndpoint() string {
	return normalizeEndpoint(c.Kubelet.ContainerRuntimeEndpoint)
}

// ImageEndpoint returns the CRI image endpoint, falling back to the runtime
// endpoint when imageServiceEndpoint is unset.
func (c *Config) ImageEndpoint() string {
	if c.Kubelet.ImageServiceEndpoint == "" {
		return c.RuntimeEndpoint()
	}
	return normalizeEndpoint(c.Kubelet.ImageServiceEndpoint)
}

// ImagePullParallelism is how many image pulls may run at once, as the kubelet's image manager decides it: one
// with serializeImagePulls (the default), else maxParallelImagePulls, and no bound in practice when that is unset.
func (c *Config) ImagePullParallelism() int {
	k := &c.Kubelet
	switch {
	case k.SerializeImagePulls == nil || *k.SerializeImagePulls:
		return 1
	case k.MaxParallelImagePulls != nil && *k.MaxParallelImagePulls > 0:
		return int(*k.MaxParallelImagePulls)
	}
	return unboundedImagePulls
}

// unboundedImagePulls stands for the kubelet's parallel puller without maxParallelImagePulls.
const unboundedImagePulls = 1 << 15

// normalizeEndpoint turns a bare absolute socket path (which the kubelet
// accepts with a warning) into a unix:// URL.
func normalizeEndpoint(ep string) string {
	if strings.HasPrefix(ep, "/") {
		return "unix://" + ep
	}
	return ep
}
