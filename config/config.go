package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Config is nodelet's complete configuration.
type Config struct {
	// Kubelet is the --config file (or an empty one), kubelet-defaulted, with
	// explicitly given flags applied over it.
	Kubelet kubeletconfigv1beta1.KubeletConfiguration

	ConfigFile       string // --config
	Kubeconfig       string // --kubeconfig; "" means standalone mode
	HostnameOverride string // --hostname-override

	// Hostname is HostnameOverride or os.Hostname(), trimmed and lower-cased.
	Hostname string
	// NodeName is the Node object's name; equal to Hostname.
	NodeName string

	NodeIPs    []net.IP          // --node-ip
	NodeLabels map[string]string // --node-labels
	RootDir    string            // --root-dir
	Verbosity  int               // -v / --v

	// MetricsBindAddress is nodelet's own metrics listener; "0" disables it.
	MetricsBindAddress string
}

// newConfig returns a Config holding every default, before any file or flag.
func newConfig() *Config {
	c := &Config{
		NodeLabels:         map[string]string{},
		RootDir:            DefaultRootDir,
		MetricsBindAddress: DefaultMetricsBindAddress,
	}
	SetDefaults(&c.Kubelet)
	return c
}

// Load parses args (without the program name), reads --config if given,
// applies the explicitly given flags over the file, resolves the hostname
// and validates. The kubelet's defaults are applied to the file before the
// flags, as the kubelet does. On --help it prints usage to stdout and returns
// pflag.ErrHelp.
func Load(args []string) (*Config, error) {
	return load(args, os.Stdout, os.Hostname)
}

func load(args []string, stdout io.Writer, hostname func() (string, error)) (*Config, error) {
	// First pass: learn --config and reject bad flags, on a throwaway Config.
	probe := newConfig()
	if err := parseFlags(NewFlagSet(probe), args, stdout); err != nil {
		return nil, err
	}
	c := newConfig()
	if probe.ConfigFile != "" {
		kc, err := LoadFile(probe.ConfigFile)
		if err != nil {
			return nil, err
		}
		c.Kubelet = *kc
	}
	// Second pass: only flags that are given write into the loaded config.
	if err := parseFlags(NewFlagSet(c), args, stdout); err != nil {
		return nil, err
	}
	if err := c.resolveNodeName(hostname); err != nil {
		return nil, err
	}
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return c, nil
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

// normalizeEndpoint turns a bare absolute socket path (which the kubelet
// accepts with a warning) into a unix:// URL.
func normalizeEndpoint(ep string) string {
	if strings.HasPrefix(ep, "/") {
		return "unix://" + ep
	}
	return ep
}
