package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const imageMountpoint = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"

type image struct {
	id      string // "sha256:<64 hex>"
	seq     uint64
	tags    []string
	digests []string
	size    uint64
	user    string // the image config's User ("", "1234", "app", "1234:5678")
}

func (i *image) proto() *runtimeapi.Image {
	img := &runtimeapi.Image{
		Id:          i.id,
		RepoTags:    slices.Clone(i.tags),
		RepoDigests: slices.Clone(i.digests),
		Size:        i.size,
	}
	uid, name := imageUser(i.user)
	if uid != nil {
		img.Uid = &runtimeapi.Int64Value{Value: *uid}
	}
	img.Username = name
	return img
}

// imageUser splits an image config's User the way containerd reports it: the part before ":" is a
// numeric UID or else a user name; an empty User reports neither.
func imageUser(user string) (*int64, string) {
	if user == "" {
		return nil, ""
	}
	user, _, _ = strings.Cut(user, ":")
	if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
		return &uid, ""
	}
	return nil, user
}

// name is the image name reported for containers: the first tag, else the
// requested reference.
func (i *image) name(requested string) string {
	if len(i.tags) > 0 {
		return i.tags[0]
	}
	return requested
}

// ref is the image reference reported in container statuses: the first repo
// digest, else the id.
func (i *image) ref() string {
	if len(i.digests) > 0 {
		return i.digests[0]
	}
	return i.id
}

func (i *image) matches(ref string) bool {
	if ref == i.id || "sha256:"+ref == i.id {
		return true
	}
	n := normalizeRef(ref)
	return slices.Contains(i.tags, n) || slices.Contains(i.digests, n)
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// normalizeRef turns a docker-style reference into its fully qualified form,
// e.g. "nginx" → "docker.io/library/nginx:latest".
func normalizeRef(ref string) string {
	ref = strings.TrimSpace(ref)
	name, digest, hasDigest := strings.Cut(ref, "@")
	domain, rest, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case domain == "docker.io" && !strings.Contains(rest, "/"):
		name = "docker.io/library/" + rest
	case !strings.ContainsAny(domain, ".:") && domain != "localhost":
		name = "docker.io/" + name
	}
	if hasDigest {
		return name + "@" + digest
	}
	if !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		name += ":latest"
	}
	return name
}

// repository strips the tag or digest from a normalised reference.
func repository(norm string) string {
	if name, _, ok := strings.Cut(norm, "@"); ok {
		return name
	}
	slash := strings.LastIndex(norm, "/")
	if colon := strings.LastIndex(norm, ":"); colon > slash {
		return norm[:colon]
	}
	return norm
}

// addImageLocked stores (or resizes) the image for a normalised reference.
func (r *state) addImageLocked(norm string, size uint64) *image {
	if img := r.findImageLocked(norm); img != nil {
		img.size = size
		return img
	}
	img := &image{id: digestOf("image:" + norm), seq: r.nextSeq(), size: size, user: r.imageUsers[norm]}
	if strings.Contains(norm, "@") {
		img.digests = []string{norm}
	} else {
		img.tags = []string{norm}
		img.digests = []string{repository(norm) + "@" + digestOf("manifest:"+norm)}
	}
	r.images[img.id] = img
	return img
}

func (r *state) findImageLocked(ref string) *image {
	for _, img := range r.sortedImagesLocked() {
		if img.matches(ref) {
			return img
		}
	}
	return nil
}

func (r *state) sortedImagesLocked() []*image {
	out := make([]*image, 0, len(r.images))
	for _, img := range r.images {
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b *image) int { return compareSeq(a.seq, b.seq) })
	return out
}

func (r *imageService) listImagesLocked(f *runtimeapi.ImageFilter) []*runtimeapi.Image {
	out := []*runtimeapi.Image{}
	want := f.GetImage().GetImage()
	for _, img := range r.sortedImagesLocked() {
		if want == "" || img.matches(want) {
			out = append(out, img.proto())
		}
	}
	return out
}

// ListImages lists the stored images, optionally only the one matching the
// filter's image.
func (r *imageService) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if err := r.begin("ListImages"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ListImagesResponse{Images: r.listImagesLocked(req.GetFilter())}, nil
}

// StreamImages sends the ListImages result as one message.
func (r *imageService) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	if err := r.begin("StreamImages"); err != nil {
		return err
	}
	r.mu.Lock()
	items := r.listImagesLocked(req.GetFilter())
	r.mu.Unlock()
	return stream.Send(&runtimeapi.StreamImagesResponse{Images: items})
}

// ImageStatus returns the image, or a nil image when it is absent.
func (r *imageService) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.begin("ImageStatus"); err != nil {
		return nil, err
	}
	if req.GetImage().GetImage() == "" {
		return nil, invalidArg("image spec must include an image")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.findImageLocked(req.GetImage().GetImage())
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: img.proto()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": `{"fake":true}`}
	}
	return resp, nil
}

// PullImage records the credentials and adds the image when the reference was
// made pullable with SetPullable; otherwise it fails with NotFound, even when
// the image is already present (like a pull from an unreachable registry).
func (r *imageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	if err := r.begin("PullImage"); err != nil {
		return nil, err
	}
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, invalidArg("image spec must include an image")
	}
	norm := normalizeRef(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pullAuths[norm] = append(r.pullAuths[norm], proto.CloneOf(req.GetAuth()))
	if size, ok := r.pullable[norm]; ok {
		return &runtimeapi.PullImageResponse{ImageRef: r.addImageLocked(norm, size).id}, nil
	}
	if r.pullAny {
		return &runtimeapi.PullImageResponse{ImageRef: r.addImageLocked(norm, 1<<20).id}, nil
	}
	return nil, status.Errorf(codes.NotFound,
		"failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", norm, norm, norm)
}

// RemoveImage deletes the image; removing a missing image succeeds.
func (r *imageService) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := r.begin("RemoveImage"); err != nil {
		return nil, err
	}
	if req.GetImage().GetImage() == "" {
		return nil, invalidArg("image spec must include an image")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if img := r.findImageLocked(req.GetImage().GetImage()); img != nil {
		delete(r.images, img.id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the image filesystem usage of the stored images.
func (r *imageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := r.begin("ImageFsInfo"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.size
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp:  r.now(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: imageMountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images)) * 100},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
