package imagepull

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Secret is one of a pod's pull secrets whose credentials match the image's registry: its coordinates and
// the hash of those credentials (CredentialHash).
type Secret = kubeletconfigv1beta1.ImagePullSecret

// writeWhileMatchingLimit stops a record growing from look-ups once it lists this many secrets (the
// kubelet's bound against namespace churn).
const writeWhileMatchingLimit = 100

// Records is the store of pull intents and pulled records; FileRecords is the real one.
type Records interface {
	WriteIntent(image string) error
	DeleteIntent(image string) error
	IntentExists(image string) (bool, error)
	ListIntents() ([]string, error)
	GetRecord(imageRef string) (*kubeletconfigv1beta1.ImagePulledRecord, bool, error)
	WriteRecord(rec *kubeletconfigv1beta1.ImagePulledRecord) error
}

// Image is what the runtime says of one image on the node, for Initialize.
type Image struct {
	ID   string
	Tags []string // RepoTags and RepoDigests
}

// Manager records the images nodelet pulls and with which credentials, and decides whether a pod may use
// an image already on the node (the kubelet's PullManager). Its methods are safe for concurrent use.
type Manager struct {
	records Records
	policy  Policy
	clock   clock.PassiveClock

	mu      sync.Mutex
	intents map[string]int // in-flight pulls by image
}

// NewManager returns a manager over records with policy.
func NewManager(records Records, policy Policy, clk clock.PassiveClock) *Manager {
	return &Manager{records: records, policy: policy, clock: clk, intents: map[string]int{}}
}

// Initialize turns the pull intents left by an earlier run into pulled records without credentials for
// the images the runtime now has (so the next use of them is verified), and drops those intents.
func (m *Manager) Initialize(ctx context.Context, images []Image) {
	log := ctrl.LoggerFrom(ctx)
	intents, err := m.records.ListIntents()
	if err != nil {
		log.Error(err, "Unable to list every image pull intent, continuing with those read")
	}
	if len(intents) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, img := range images {
		for _, name := range img.Tags {
			if !slices.Contains(intents, name) {
				continue
			}
			if err := m.mergeRecord(name, img.ID, nil); err != nil {
				log.Error(err, "Unable to write an image pulled record", "image", name, "imageRef", img.ID)
				continue
			}
			if err := m.records.DeleteIntent(name); err != nil {
				log.V(2).Info("Unable to remove an image pull intent", "image", name, "err", err.Error())
			}
		}
	}
}

// RecordPullIntent is called before each pull of image (the container's image field as written); each
// call is matched by one RecordPulled or RecordPullFailed.
func (m *Manager) RecordPullIntent(image string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.records.WriteIntent(image); err != nil {
		return fmt.Errorf("record image pull intent: %w", err)
	}
	m.intents[image]++
	return nil
}

// RecordPulled records a successful pull of image as imageRef with creds: one secret, or NodePodsAccessible
// for a pull that needed none of the pod's secrets.
func (m *Manager) RecordPulled(ctx context.Context, image, imageRef string, creds *kubeletconfigv1beta1.ImagePullCredentials) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mergeRecord(image, imageRef, creds); err != nil {
		// The intent stays, so the image still counts as pulled by nodelet (and is verified).
		ctrl.LoggerFrom(ctx).Error(err, "Unable to write an image pulled record", "imageRef", imageRef)
		return
	}
	m.dropIntentLocked(ctx, image)
}

// RecordPullFailed ends a pull of image that failed.
func (m *Manager) RecordPullFailed(ctx context.Context, image string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropIntentLocked(ctx, image)
}

func (m *Manager) dropIntentLocked(ctx context.Context, image string) {
	if m.intents[image] > 1 {
		m.intents[image]--
		return
	}
	if err := m.records.DeleteIntent(image); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Unable to remove an image pull intent", "image", image)
		return
	}
	delete(m.intents, image)
}

// MustPull decides whether a pod must pull image (present on the node as imageRef) with its own
// credentials before using it: true when the policy asks for verification and no record shows the image
// was pulled with credentials the pod holds (one of its secrets, by coordinates or by credential hash) or
// with none at all. podSecrets is called only when the decision needs them; its error is returned with
// true. An unreadable record store means true (verify).
func (m *Manager) MustPull(ctx context.Context, image, imageRef string, podSecrets func() ([]Secret, error)) (bool, error) {
	if imageRef == "" {
		return true, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, pulledByNodelet, err := m.lookupLocked(image, imageRef)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Unable to read the records of image pulls", "image", image)
		return true, nil
	}
	if !m.policy.RequireVerification(image, pulledByNodelet) {
		return false, nil
	}
	if rec == nil {
		return true, nil
	}
	name, err := TrimTagAndDigest(image)
	if err != nil {
		return true, nil
	}
	creds, ok := rec.CredentialMapping[name]
	switch {
	case !ok:
		return true, nil
	case creds.NodePodsAccessible:
		return false, nil
	case len(creds.KubernetesSecrets) == 0:
		return true, nil
	}
	secrets, err := podSecrets()
	if err != nil {
		return true, err
	}
	return !m.matchSecretLocked(ctx, image, imageRef, creds.KubernetesSecrets, secrets), nil
}

// lookupLocked returns imageRef's record and whether nodelet (or the kubelet) pulled the image: a record,
// an in-flight pull or a pull intent left on disk.
func (m *Manager) lookupLocked(image, imageRef string) (*kubeletconfigv1beta1.ImagePulledRecord, bool, error) {
	rec, found, err := m.records.GetRecord(imageRef)
	if err != nil || found {
		return rec, found, err
	}
	if m.intents[image] > 0 {
		return nil, true, nil
	}
	exists, err := m.records.IntentExists(image)
	if err != nil {
		return nil, false, fmt.Errorf("check image pull intent: %w", err)
	}
	return nil, exists, nil
}

// matchSecretLocked reports whether one of the pod's secrets is a recorded one, by credential hash or by
// coordinates; a match by only one of them is written to the record so it matches by both next time.
func (m *Manager) matchSecretLocked(ctx context.Context, image, imageRef string, recorded, pod []Secret) bool {
	for _, ps := range pod {
		for _, rs := range recorded {
			hashes := rs.CredentialHash != "" && ps.CredentialHash == rs.CredentialHash
			coords := ps.UID == rs.UID && ps.Namespace == rs.Namespace && ps.Name == rs.Name
			if !hashes && !coords {
				continue
			}
			if (!hashes || !coords) && len(recorded) < writeWhileMatchingLimit {
				creds := &kubeletconfigv1beta1.ImagePullCredentials{KubernetesSecrets: []Secret{ps}}
				if err := m.mergeRecord(image, imageRef, creds); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "Unable to write an image pulled record", "image", image, "imageRef", imageRef)
				}
			}
			return true
		}
	}
	return false
}

// mergeRecord adds creds for image to imageRef's record (creating it), writing only on change. nil creds
// create a record without credentials: the image counts as pulled by nodelet and is always verified.
func (m *Manager) mergeRecord(image, imageRef string, creds *kubeletconfigv1beta1.ImagePullCredentials) error {
	name, err := TrimTagAndDigest(image)
	if err != nil {
		return fmt.Errorf("invalid image name %q: %w", image, err)
	}
	rec, _, err := m.records.GetRecord(imageRef)
	if err != nil || rec == nil {
		rec = &kubeletconfigv1beta1.ImagePulledRecord{ImageRef: imageRef}
		if creds == nil {
			creds = &kubeletconfigv1beta1.ImagePullCredentials{}
		}
		rec.CredentialMapping = map[string]kubeletconfigv1beta1.ImagePullCredentials{}
		if creds.NodePodsAccessible || len(creds.KubernetesSecrets) > 0 || len(creds.KubernetesServiceAccounts) > 0 {
			rec.CredentialMapping[name] = *creds
		}
	} else if !mergeCredentials(rec, name, creds) {
		return nil
	}
	rec.LastUpdatedTime = metav1.NewTime(m.clock.Now())
	return m.records.WriteRecord(rec)
}

// mergeCredentials merges creds into rec's entry for name and reports whether it changed.
func mergeCredentials(rec *kubeletconfigv1beta1.ImagePulledRecord, name string, creds *kubeletconfigv1beta1.ImagePullCredentials) bool {
	if creds == nil || !creds.NodePodsAccessible && len(creds.KubernetesSecrets) == 0 && len(creds.KubernetesServiceAccounts) == 0 {
		return false
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]kubeletconfigv1beta1.ImagePullCredentials{}
	}
	cur, found := rec.CredentialMapping[name]
	switch {
	case !found:
		cur = *creds
	case cur.NodePodsAccessible:
		return false
	case creds.NodePodsAccessible:
		cur = kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
	case len(creds.KubernetesSecrets) > 0:
		var changed bool
		if cur.KubernetesSecrets, changed = mergeSecrets(cur.KubernetesSecrets, creds.KubernetesSecrets); !changed {
			return false
		}
	default:
		var changed bool
		if cur.KubernetesServiceAccounts, changed = mergeServiceAccounts(cur.KubernetesServiceAccounts, creds.KubernetesServiceAccounts); !changed {
			return false
		}
	}
	rec.CredentialMapping[name] = cur
	return true
}

// mergeSecrets adds add to orig, one entry per (namespace, name, UID), the newer hash winning; sorted.
func mergeSecrets(orig, add []Secret) ([]Secret, bool) {
	type coords struct{ uid, ns, name string }
	hashes := map[coords]string{}
	for _, s := range orig {
		hashes[coords{s.UID, s.Namespace, s.Name}] = s.CredentialHash
	}
	changed := false
	for _, s := range add {
		k := coords{s.UID, s.Namespace, s.Name}
		if h, ok := hashes[k]; !ok || h != s.CredentialHash {
			hashes[k], changed = s.CredentialHash, true
		}
	}
	if !changed {
		return orig, false
	}
	out := make([]Secret, 0, len(hashes))
	for k, h := range hashes {
		out = append(out, Secret{UID: k.uid, Namespace: k.ns, Name: k.name, CredentialHash: h})
	}
	slices.SortFunc(out, func(a, b Secret) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	return out, true
}

func mergeServiceAccounts(orig, add []kubeletconfigv1beta1.ImagePullServiceAccount) ([]kubeletconfigv1beta1.ImagePullServiceAccount, bool) {
	out := slices.Clone(orig)
	for _, s := range add {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == len(orig) {
		return orig, false
	}
	slices.SortFunc(out, func(a, b kubeletconfigv1beta1.ImagePullServiceAccount) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	return out, true
}
