package machine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSysctls(t *testing.T, root string, values map[string]string) {
	t.Helper()
	for name, v := range values {
		p := filepath.Join(root, "proc/sys", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func kubeletValues() map[string]string {
	return map[string]string{
		"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10", "kernel/panic_on_oops": "1",
		"kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000",
	}
}

func TestCheckKernelDefaults(t *testing.T) {
	tests := []struct {
		name   string
		change map[string]string
		drop   string
		want   []string // substrings of the error; nil means no error
	}{
		{name: "the kubelet's values", want: nil},
		{name: "a distribution's defaults", change: map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "0", "kernel/panic_on_oops": "0"},
			want: []string{"invalid kernel flag: kernel/panic, expected value: 10, actual value: 0",
				"invalid kernel flag: kernel/panic_on_oops, expected value: 1, actual value: 0",
				"invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0"}},
		{name: "panic on OOM", change: map[string]string{"vm/panic_on_oom": "1"},
			want: []string{"vm/panic_on_oom, expected value: 0, actual value: 1"}},
		{name: "keys", change: map[string]string{"kernel/keys/root_maxkeys": "200"},
			want: []string{"kernel/keys/root_maxkeys, expected value: 1000000, actual value: 200"}},
		{name: "unreadable", drop: "kernel/keys/root_maxbytes", want: []string{"read kernel flag kernel/keys/root_maxbytes"}},
		{name: "not a number", change: map[string]string{"kernel/panic": "ten"}, want: []string{"read kernel flag kernel/panic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			values := kubeletValues()
			for k, v := range tt.change {
				values[k] = v
			}
			delete(values, tt.drop)
			writeSysctls(t, root, values)
			err := Reader{HostRoot: root}.CheckKernelDefaults()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckKernelDefaults = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckKernelDefaults = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tt.want) {
				t.Errorf("error lists %d problems, want %d: %q", n, len(tt.want), err)
			}
		})
	}
}

func TestSetKernelDefaults(t *testing.T) {
	root := t.TempDir()
	values := kubeletValues()
	values["kernel/panic"], values["vm/overcommit_memory"] = "0", "0"
	writeSysctls(t, root, values)
	r := Reader{HostRoot: root}
	changed, err := r.SetKernelDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kernel/panic=10 (was 0)", "vm/overcommit_memory=1 (was 0)"}; strings.Join(changed, ",") != strings.Join(want, ",") {
		t.Errorf("changed %v, want %v", changed, want)
	}
	if err := r.CheckKernelDefaults(); err != nil {
		t.Errorf("after SetKernelDefaults: %v", err)
	}
	if changed, err := r.SetKernelDefaults(); err != nil || len(changed) != 0 {
		t.Errorf("second SetKernelDefaults: %v %v, want nothing to change", changed, err)
	}
	if err := os.Remove(filepath.Join(root, "proc/sys/kernel/panic")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetKernelDefaults(); err == nil || !strings.Contains(err.Error(), "read kernel flag kernel/panic") {
		t.Errorf("missing tunable: %v", err)
	}
}
