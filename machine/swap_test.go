package machine

import (
	"os"
	"path/filepath"
	"testing"
)

// The kubelet's isSwapOnAccordingToProcSwaps cases: swap is on when /proc/swaps lists a device below its header.
func TestSwapOn(t *testing.T) {
	const header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	for _, tc := range []struct {
		name, swaps string
		missing     bool
		want        bool
	}{
		{name: "no /proc/swaps", missing: true},
		{name: "empty", swaps: ""},
		{name: "empty lines", swaps: "\n\n"},
		{name: "header only", swaps: header},
		{name: "one partition", swaps: header + "/dev/dm-1               partition\t33554428\t0\t\t-2\n", want: true},
		{name: "two", swaps: header + "/dev/dm-1 partition 33554428 0 -2\n/dev/zram0 partition 8388604 0 100\n", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if !tc.missing {
				if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "proc/swaps"), []byte(tc.swaps), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			on, _, err := Reader{HostRoot: root}.SwapOn()
			if err != nil || on != tc.want {
				t.Errorf("SwapOn = %v, %v; want %v", on, err, tc.want)
			}
		})
	}
}
