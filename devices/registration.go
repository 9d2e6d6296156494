package devices

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/devices/checkpoint"
	"github.com/nodelet/nodelet/podrules"
)

// registration is the kubelet's Registration service on the device plugin directory's kubelet.sock.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m   *Manager
	ctx context.Context // the manager's run: registered plugins are followed until it ends
}

// Register validates a plugin's registration, dials it back and asks for its options; an error in any of
// these is the plugin's answer. Its device list is then followed in the background.
func (r *registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	log := r.m.log.WithValues("resourceName", req.ResourceName, "endpoint", req.Endpoint)
	var err error
	switch {
	case !slices.Contains(pluginapi.SupportedVersions[:], req.Version):
		err = fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
	case !podrules.IsExtendedResourceName(corev1.ResourceName(req.ResourceName)):
		err = fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
	case filepath.Base(req.Endpoint) != req.Endpoint || req.Endpoint == KubeletSocket || req.Endpoint == checkpoint.File:
		err = fmt.Errorf("invalid endpoint %q: a socket name in %s", req.Endpoint, r.m.dir)
	}
	if err != nil {
		log.Error(err, "Bad device plugin registration")
		return &pluginapi.Empty{}, err
	}
	ep, err := connect(ctx, r.m.dir, req)
	if err != nil {
		log.Error(err, "Cannot connect to the device plugin")
		return &pluginapi.Empty{}, err
	}
	if err := r.m.addEndpoint(ep); err != nil {
		_ = ep.conn.Close()
		log.Error(err, "Bad device plugin registration")
		return &pluginapi.Empty{}, err
	}
	log.Info("Device plugin registered", "preStartRequired", ep.opts.GetPreStartRequired(),
		"getPreferredAllocationAvailable", ep.opts.GetGetPreferredAllocationAvailable())
	go r.m.follow(r.ctx, ep)
	return &pluginapi.Empty{}, nil
}

// Start serves the registration socket until ctx ends (Listen, then Serve).
func (m *Manager) Start(ctx context.Context) error {
	lis, err := m.Listen(ctx)
	if err != nil {
		return err
	}
	return m.Serve(ctx, lis)
}

// Listen makes the registration socket. It first removes the sockets left in the device plugin directory
// (the registration socket and the plugins' from before), as the kubelet does: plugins watching the
// directory see the new socket and register again.
func (m *Manager) Listen(ctx context.Context) (net.Listener, error) {
	if err := m.cleanDir(); err != nil {
		return nil, err
	}
	socket := filepath.Join(m.dir, KubeletSocket)
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("device plugin registration socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		_ = lis.Close()
		return nil, err
	}
	return lis, nil
}

// Serve answers registrations on lis until ctx ends; the plugins' streams end with it.
func (m *Manager) Serve(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, &registration{m: m, ctx: ctx})
	m.log.Info("Serving device plugin registration", "socket", lis.Addr().String())
	return serveGRPC(ctx, srv, lis)
}

// cleanDir removes the sockets in the device plugin directory.
func (m *Manager) cleanDir() error {
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
