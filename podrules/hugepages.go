package podrules

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// hugePageUnits are the units of a page size's name, as runc and the hugetlb controller's files spell them.
var hugePageUnits = []string{"B", "KB", "MB", "GB", "TB", "PB"}

// HugePageSizeName names a page size in bytes as the CRI's HugepageLimit and the hugetlb controller's files do
// (the kubelet's HugePageUnitSizeFromByteSize): 2097152 is "2MB", 1073741824 "1GB". false for a size that does
// not divide into its largest unit.
func HugePageSizeName(size int64) (string, bool) {
	i := 0
	for size != 0 && size%1024 == 0 && i < len(hugePageUnits)-1 {
		size /= 1024
		i++
	}
	if size > 1024 && i < len(hugePageUnits)-1 {
		return "", false
	}
	return strconv.FormatInt(size, 10) + hugePageUnits[i], true
}

// HugePageLimits adds up a resource list's hugepages-<size> quantities by page size in bytes (the kubelet's
// HugePageLimits); a name whose size does not parse is left out.
func HugePageLimits(l corev1.ResourceList) map[int64]int64 {
	out := map[int64]int64{}
	for name, q := range l {
		size, ok := hugePageSize(name)
		if !ok {
			continue
		}
		out[size] += q.Value()
	}
	return out
}

// hugePageSize is the page size in bytes of a hugepages-<size> resource name.
func hugePageSize(name corev1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, false
	}
	return q.Value(), true
}
