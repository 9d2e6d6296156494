package staticpods

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

const testNode = "Node-1"

// podYAML is a valid static pod manifest; image varies the content.
func podYAML(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: kube-system
  labels:
    tier: control-plane
spec:
  containers:
  - name: main
    image: %s
`, name, image)
}

// garbage is the deterministic content of testdata/bad/garbage.bin.
func garbage() []byte {
	r := rand.New(rand.NewPCG(4, 2)) //nolint:gosec // deterministic test data
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// recorder collects reports.
type recorder struct {
	mu      sync.Mutex
	reports []report
}

func (r *recorder) Report(reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, report{reason, message})
}

func (r *recorder) all() []report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]report(nil), r.reports...)
}

// count returns how many reports have the reason and mention every fragment.
func (r *recorder) count(reason string, fragments ...string) int {
	n := 0
	for _, rep := range r.all() {
		if rep.reason == reason && containsAll(rep.message, fragments...) {
			n++
		}
	}
	return n
}

func containsAll(s string, fragments ...string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

// writeAtomic writes a file the way config management does (temp dotfile, then rename), so a watcher
// never sees it half written.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newG(t *testing.T) gomega.Gomega {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(10 * time.Second)
	g.SetDefaultEventuallyPollingInterval(5 * time.Millisecond)
	g.SetDefaultConsistentlyDuration(50 * time.Millisecond)
	return g
}
