package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// NodeInfoSyncer writes what the registry says of a driver into the CSINode object and the Node
// (NodeInfo).
type NodeInfoSyncer interface {
	// Sync writes the driver's state now; an error that writing again cannot fix is returned, any other
	// is retried with a back-off.
	Sync(ctx context.Context, driver string) error
	// Enqueue has the driver's state written soon.
	Enqueue(driver string)
}

// RegistrationHandler is the Handler of CSI plugins, as the kubelet's CSI RegistrationHandler: a plugin
// supporting a CSI 1.x version, with a valid driver name, is asked NodeGetInfo at its endpoint and
// registered in Registry, and the CSINode object and the Node are told. A driver name registered already
// is taken over only by a plugin supporting a higher version.
type RegistrationHandler struct {
	Registry *Registry
	// NodeInfo writes the CSINode object and the Node; nil: nothing is written (no API server).
	NodeInfo NodeInfoSyncer
}

// ValidatePlugin checks the driver's name and versions.
func (h *RegistrationHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	logr.FromContextOrDiscard(ctx).Info("Validating a new CSI driver", "driver", name, "endpoint", endpoint, "versions", versions)
	if _, err := h.validate("ValidatePlugin", name, versions); err != nil {
		return fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %w", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin asks the driver for this node's information and registers it.
func (h *RegistrationHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	highest, err := h.validate("RegisterPlugin", name, versions)
	if err != nil {
		return err
	}
	d := Driver{Name: name, Endpoint: endpoint, Versions: versions, HighestVersion: highest.String(), client: NewClient(name, endpoint)}
	info, err := d.client.NodeGetInfo(ctx)
	if err != nil {
		return fmt.Errorf("NodeGetInfo of CSI driver %s at %s failed: %w", name, endpoint, err)
	}
	if info.GetNodeId() == "" {
		return errors.New("error adding CSI driver node info: driverNodeID must not be empty")
	}
	d.NodeID, d.MaxVolumes = info.GetNodeId(), info.GetMaxVolumesPerNode()
	d.Topology = info.GetAccessibleTopology().GetSegments()
	prev, had := h.Registry.set(d)
	if h.NodeInfo == nil {
		return nil
	}
	if err := h.NodeInfo.Sync(ctx, name); err != nil {
		h.Registry.restore(name, endpoint, prev, had)
		h.NodeInfo.Enqueue(name)
		return err
	}
	return nil
}

// DeRegisterPlugin forgets the driver registered at endpoint (a registration of the name at another
// endpoint, which replaced it, stays).
func (h *RegistrationHandler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	if !h.Registry.remove(name, endpoint) {
		logr.FromContextOrDiscard(ctx).Info("CSI driver de-registered at an endpoint it no longer uses", "driver", name, "endpoint", endpoint)
		return
	}
	if h.NodeInfo != nil {
		h.NodeInfo.Enqueue(name)
	}
}

// validate checks the driver name (as the API validates a CSI driver name) and returns the highest CSI
// 1.x version among versions, which must be higher than that of a driver registered under the name.
func (h *RegistrationHandler) validate(caller, name string, versions []string) (*utilversion.Version, error) {
	if err := validateDriverName(name); err != nil {
		return nil, fmt.Errorf("%s for CSI driver %q failed: %w", caller, name, err)
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name)
	}
	highest, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("%s for CSI driver %q failed. None of the versions specified %q are supported. err=%w", caller, name, versions, err)
	}
	if cur, ok := h.Registry.Get(name); ok {
		if v, err := utilversion.ParseGeneric(cur.HighestVersion); err == nil && !v.LessThan(highest) {
			return nil, fmt.Errorf("%s for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q",
				caller, name, cur.HighestVersion)
		}
	}
	return highest, nil
}

// validateDriverName is the API's rule for a CSI driver name: at most 63 characters, a DNS-1123
// subdomain once lower-cased.
func validateDriverName(name string) error {
	if name == "" {
		return errors.New("the driver name is empty")
	}
	if len(name) > 63 {
		return fmt.Errorf("the driver name is longer than 63 characters")
	}
	if msgs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(msgs) > 0 {
		return fmt.Errorf("invalid driver name: %s", strings.Join(msgs, "; "))
	}
	return nil
}
