package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists the images the runtime holds.
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, MapError("ListImages", err)
	}
	for _, img := range resp.Images {
		if img.Id == "" {
			return nil, invalidResponse("ListImages", "image without ID: %v", img)
		}
	}
	return resp.Images, nil
}

// ImageStatus returns the image, or nil (and no error) when the runtime does not have it.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	if err != nil {
		return nil, MapError("ImageStatus", err)
	}
	if resp.Image != nil && resp.Image.Id == "" {
		return nil, invalidResponse("ImageStatus", "image %q without ID", image.GetImage())
	}
	return resp.Image, nil
}

// PullImage pulls an image and returns its reference (the image ID or digest). Pulls are bounded by ctx
// only: a large image may legitimately take longer than the RPC timeout.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandbox})
	if err != nil {
		return "", MapError("PullImage", err)
	}
	if resp.ImageRef == "" {
		return "", invalidResponse("PullImage", "no image reference for %q", image.GetImage())
	}
	return resp.ImageRef, nil
}

// RemoveImage removes an image.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return MapError("RemoveImage", err)
}

// ImageFsInfo returns the usage of the filesystems that hold images and container layers.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, MapError("ImageFsInfo", err)
	}
	return resp, nil
}
