package staticpods

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// Store holds the static pods of all sources, merged; changes are announced as controller-runtime
// generic events (see Source and Subscribe).
//
// Sources are merged in the order of their names ("file:<path>" sorted by path, then "http"): the first
// pod with a namespace/name wins and the others are reported as duplicates.
type Store struct {
	nodeName string
	report   Reporter
	clock    clock.PassiveClock

	mu         sync.RWMutex
	sources    map[string][]*corev1.Pod
	merged     map[types.NamespacedName]*corev1.Pod
	byUID      map[types.UID]*corev1.Pod
	duplicates sets.Set[string]
	subs       map[*subscriber]struct{}
	seen       sets.Set[string]
}

// NewStore returns an empty store for the node; rec (may be nil) receives duplicate and invalid pods.
func NewStore(nodeName string, rec Reporter) *Store {
	return &Store{
		nodeName:   nodeName,
		report:     rec,
		clock:      clock.RealClock{},
		sources:    map[string][]*corev1.Pod{},
		merged:     map[types.NamespacedName]*corev1.Pod{},
		byUID:      map[types.UID]*corev1.Pod{},
		duplicates: sets.New[string](),
		subs:       map[*subscriber]struct{}{},
		seen:       sets.New[string](),
	}
}

// SeenSources reports whether every given source kind (SourceFile, SourceHTTP) has delivered its first
// snapshot, as the kubelet's SeenAllSources: the file source after its first read of staticPodPath (even
// when the path is missing), the HTTP source after its first 200 response. Until then, pods missing from
// the store may only not be read yet: do not clean up containers of static pods that seem orphaned.
func (s *Store) SeenSources(kinds ...string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seen.HasAll(kinds...)
}

func (s *Store) markSeen(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.Insert(kind)
}

// NodeName is the node the store's pods are bound to.
func (s *Store) NodeName() string { return s.nodeName }

// Update replaces the snapshot of one source ("file:<path>" per file, or "http"); an empty snapshot
// removes the source. A pod whose UID and content (config.seen aside) are unchanged keeps its previous
// object, config.seen included, so an unchanged snapshot changes nothing and emits nothing. A new pod
// gets config.seen = now (RFC3339Nano). The Store keeps its own copies of pods.
func (s *Store) Update(source string, pods []*corev1.Pod) {
	s.mu.Lock()
	reports := s.update(source, pods)
	s.mu.Unlock()
	for _, r := range reports {
		if s.report != nil {
			s.report(r.reason, r.message)
		}
	}
}

func (s *Store) update(source string, pods []*corev1.Pod) []report {
	next, reports := s.accept(source, pods)
	if len(next) == 0 {
		delete(s.sources, source)
	} else {
		s.sources[source] = next
	}
	merged, dupReports := s.merge()
	changed := changedKeys(s.merged, merged)
	s.merged = merged
	s.byUID = make(map[types.UID]*corev1.Pod, len(merged))
	for _, pod := range merged {
		s.byUID[pod.UID] = pod
	}
	s.notify(changed)
	return append(reports, dupReports...)
}

// accept builds a source's new snapshot, reusing the previous objects of unchanged pods.
func (s *Store) accept(source string, pods []*corev1.Pod) ([]*corev1.Pod, []report) {
	prev := map[types.UID]*corev1.Pod{}
	for _, pod := range s.sources[source] {
		prev[pod.UID] = pod
	}
	var next []*corev1.Pod
	var reports []report
	for _, pod := range pods {
		if pod == nil || pod.Name == "" || pod.UID == "" {
			reports = append(reports, report{ReasonInvalid, "static pod from " + source + " has no name or UID, ignoring it"})
			continue
		}
		next = append(next, s.carryOver(prev[pod.UID], pod))
	}
	return next, reports
}

// carryOver returns old when pod is the same version, else a copy of pod with config.seen set.
func (s *Store) carryOver(old, pod *corev1.Pod) *corev1.Pod {
	if old != nil && sameIgnoringSeen(old, pod) {
		return old
	}
	cp := pod.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	if old != nil {
		cp.Annotations[AnnotationConfigSeen] = old.Annotations[AnnotationConfigSeen]
	} else {
		cp.Annotations[AnnotationConfigSeen] = s.clock.Now().UTC().Format(time.RFC3339Nano)
	}
	return cp
}

func sameIgnoringSeen(a, b *corev1.Pod) bool {
	ac, bc := *a, *b
	ac.Annotations, bc.Annotations = withoutSeen(a.Annotations), withoutSeen(b.Annotations)
	return equality.Semantic.DeepEqual(&ac, &bc)
}

func withoutSeen(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != AnnotationConfigSeen {
			out[k] = v
		}
	}
	return out
}

// merge computes the merged view: the first source (by name), and the first pod in it, wins a name or
// a UID; the others are reported once.
func (s *Store) merge() (map[types.NamespacedName]*corev1.Pod, []report) {
	m := merger{merged: map[types.NamespacedName]*corev1.Pod{}, owners: map[types.NamespacedName]string{},
		uids: map[types.UID]string{}}
	dups := sets.New[string]()
	var reports []report
	for _, source := range sortedKeys(s.sources) {
		for _, pod := range s.sources[source] {
			c := m.claim(source, pod)
			if c == nil {
				continue
			}
			id := source + "|" + c.what + "|" + c.value
			dups.Insert(id)
			if !s.duplicates.Has(id) {
				reports = append(reports, report{ReasonDuplicate, fmt.Sprintf(
					"static pod %s/%s from %s ignored: %s already defines a pod with %s %s",
					pod.Namespace, pod.Name, source, c.owner, c.what, c.value)})
			}
		}
	}
	s.duplicates = dups
	return m.merged, reports
}

type merger struct {
	merged map[types.NamespacedName]*corev1.Pod
	owners map[types.NamespacedName]string
	uids   map[types.UID]string
}

type clash struct{ what, value, owner string }

// claim adds pod unless its name or its UID is taken; then it says which, and by which source.
func (m *merger) claim(source string, pod *corev1.Pod) *clash {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if owner, taken := m.owners[key]; taken {
		return &clash{"name", key.String(), owner}
	}
	if owner, taken := m.uids[pod.UID]; taken {
		return &clash{"UID", string(pod.UID), owner}
	}
	m.merged[key], m.owners[key], m.uids[pod.UID] = pod, source, source
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// changedKeys lists, sorted, the names whose pod appeared, changed (another object) or disappeared.
func changedKeys(old, cur map[types.NamespacedName]*corev1.Pod) []types.NamespacedName {
	var keys []types.NamespacedName
	for k, pod := range cur {
		if old[k] != pod {
			keys = append(keys, k)
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok {
			keys = append(keys, k)
		}
	}
	sortNames(keys)
	return keys
}

func sortNames(keys []types.NamespacedName) {
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return strings.Compare(a.String(), b.String())
	})
}

// Get returns a copy of the static pod under namespace/name.
func (s *Store) Get(key types.NamespacedName) (*corev1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	pod, ok := s.merged[key]
	return pod.DeepCopy(), ok
}

// GetByUID returns a copy of the static pod with that UID.
func (s *Store) GetByUID(uid types.UID) (*corev1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	pod, ok := s.byUID[uid]
	return pod.DeepCopy(), ok
}

// List returns copies of all static pods, sorted by namespace/name.
func (s *Store) List() []*corev1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]types.NamespacedName, 0, len(s.merged))
	for k := range s.merged {
		keys = append(keys, k)
	}
	sortNames(keys)
	pods := make([]*corev1.Pod, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, s.merged[k].DeepCopy())
	}
	return pods
}
