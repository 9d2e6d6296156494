package podconfig

import (
	"context"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageStatuser is what LookupImageUser asks of the image service.
type imageStatuser interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
}

// LookupImageUser asks the runtime for the image's status and returns the user it runs as (ImageUser).
func LookupImageUser(ctx context.Context, images imageStatuser, image *runtimeapi.ImageSpec) (*int64, string, error) {
	img, err := images.ImageStatus(ctx, image)
	if err != nil {
		return nil, "", fmt.Errorf("image user of %q: %w", image.GetImage(), err)
	}
	uid, name := ImageUser(img)
	return uid, name, nil
}

// ImageUser is the user an image runs as, as the kubelet reads it from ImageStatus: its numeric UID, or
// else its user name; an image that names no user (or no image at all) runs as root, UID 0.
func ImageUser(img *runtimeapi.Image) (uid *int64, username string) {
	if u := img.GetUid(); u != nil {
		v := u.GetValue()
		return &v, ""
	}
	if name := img.GetUsername(); name != "" {
		return nil, name
	}
	return new(int64), ""
}

// verifyRunAsNonRoot enforces runAsNonRoot like the kubelet (Linux): an effective runAsUser decides
// alone; without one, the image's user must be a numeric, valid, non-zero UID. An unknown image user
// (imageUID nil and imageUsername "") is not checked. Windows-only options play no part.
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, imageUID *int64, imageUsername string) error {
	eff := effectiveSecurityContext(pod, c)
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	desc := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", desc, c.Name)
		}
		return nil
	}
	switch {
	case imageUID == nil && imageUsername != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			imageUsername, desc, c.Name)
	case imageUID == nil:
		return nil
	case *imageUID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", desc, c.Name)
	}
	if errs := validation.IsValidUserID(*imageUID); len(errs) > 0 {
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*imageUID, math.MaxInt32, strings.Join(errs, "; "), desc, c.Name)
	}
	return nil
}
