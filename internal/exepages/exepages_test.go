package exepages

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/logtest"
)

func TestFindMappingsPicksTheExecutablesCodeAndReadOnlyData(t *testing.T) {
	maps := `00400000-0198d000 r-xp 00000000 fd:00 1234 /usr/bin/nodelet
0198d000-03088000 r--p 0158d000 fd:00 1234 /usr/bin/nodelet
03088000-03126000 rw-p 02c88000 fd:00 1234 /usr/bin/nodelet
03126000-05174000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fd:00 99 /etc/hosts
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`
	got, err := findMappings(strings.NewReader(maps), 0x493c20, 0x1a00010)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0x198d000, Perms: "r-xp"},
		{Start: 0x198d000, End: 0x3088000, Perms: "r--p", ReadOnlyData: true},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Addresses in no file-backed, read-only mapping: an error, nothing to advise.
	if got, err := findMappings(strings.NewReader(maps), 0xc000000010, 0x3100000); err == nil {
		t.Fatalf("got %+v and no error for addresses in anonymous and writable mappings", got)
	}
	if _, err := findMappings(strings.NewReader("zz-yy r--p 0 fd:00 1 /x\n"), 1, 2); err == nil {
		t.Fatal("a malformed line gave no error")
	}
}

// smapsEntry returns a mapping's resident bytes and VmFlags from /proc/self/smaps.
func smapsEntry(t *testing.T, m Mapping) (rss uint64, flags []string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			start, _ := strconv.ParseUint(strings.SplitN(f[0], "-", 2)[0], 16, 64)
			in = uintptr(start) == m.Start
			continue
		}
		switch {
		case in && f[0] == "Rss:":
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		case in && f[0] == "VmFlags:":
			return rss, f[1:]
		}
	}
	t.Fatalf("mapping %+v not in /proc/self/smaps", m)
	return 0, nil
}

func TestReleasePagesOutTheTestBinarysPages(t *testing.T) {
	maps, err := Mappings()
	if err != nil {
		t.Fatal(err)
	}
	var data *Mapping
	for i := range maps {
		if maps[i].ReadOnlyData {
			data = &maps[i]
		}
	}
	if len(maps) != 2 || data == nil {
		t.Fatalf("want the code and the read-only data mappings, got %+v", maps)
	}
	before, _ := smapsEntry(t, *data)
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 2 {
		t.Fatalf("released %+v", released)
	}
	after, flags := smapsEntry(t, *data)
	if after >= before {
		t.Errorf("read-only data resident %d bytes before the release, %d after", before, after)
	}
	if !strings.Contains(" "+strings.Join(flags, " ")+" ", " rr ") {
		t.Errorf("read-only data not advised random-access: VmFlags %v", flags)
	}
	r, err := ReadResident()
	if err != nil || r.Total == 0 || r.File > r.Total {
		t.Fatalf("resident %+v, %v", r, err)
	}
}

func TestReleaseAfterWaitsForTheClockAndStopsWithTheContext(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var sink logtest.Sink
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ReleaseAfter(ctx, clk, time.Minute, sink.Logger()); close(done) }()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	clk.Step(time.Minute)
	<-done
	if !sink.Has("Released the executable's start-up pages") {
		t.Fatal("no release logged after the delay")
	}
	cancel()

	var quiet logtest.Sink
	done = make(chan struct{})
	go func() { ReleaseAfter(ctx, clk, time.Minute, quiet.Logger()); close(done) }()
	<-done
	if quiet.Has("Released the executable's start-up pages") {
		t.Fatal("released after the context ended")
	}
}
