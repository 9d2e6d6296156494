package machine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SwapOn tells whether swap is enabled, as the kubelet decides it: /proc/swaps has more than its header line.
// A missing /proc/swaps is no swap. contents is the file, for the log.
func (r Reader) SwapOn() (on bool, contents string, err error) {
	b, err := os.ReadFile(r.path("/proc/swaps"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read /proc/swaps: %w", err)
	}
	b = bytes.TrimSpace(b)
	return bytes.Count(b, []byte("\n")) > 0, string(b), nil
}
