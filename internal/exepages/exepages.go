package exepages

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// marker is a string constant: its bytes lie in the executable's read-only data.
const marker = "nodelet exepages marker"

// Mapping is one mapping of the executable that Release advised.
type Mapping struct {
	// Start and End are the mapping's addresses; Perms its permissions as /proc/self/maps prints them.
	Start, End uintptr
	Perms      string
	// ReadOnlyData is the mapping of the read-only data (else the code).
	ReadOnlyData bool
}

// Size is the mapping's length in bytes.
func (m Mapping) Size() uintptr { return m.End - m.Start }

// Resident is the process's resident memory in bytes, all of it and the file-backed part (/proc/self/statm).
type Resident struct{ Total, File uint64 }

// ReadResident reads the process's resident memory.
func ReadResident() (Resident, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return Resident{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return Resident{}, fmt.Errorf("/proc/self/statm: %q: too few fields", b)
	}
	page := uint64(os.Getpagesize())
	total, err1 := strconv.ParseUint(f[1], 10, 64)
	shared, err2 := strconv.ParseUint(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Resident{}, fmt.Errorf("/proc/self/statm: %w", err)
	}
	return Resident{Total: total * page, File: shared * page}, nil
}

// Mappings finds the executable's code and read-only data mappings: those holding a function of this
// package and a string constant of it.
func Mappings() ([]Mapping, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return findMappings(f, reflect.ValueOf(Mappings).Pointer(), uintptr(unsafe.Pointer(unsafe.StringData(marker))))
}

// findMappings reads a maps file for the file-backed, not writable mappings holding the code address and
// the read-only data address.
func findMappings(r io.Reader, code, data uintptr) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue // an anonymous mapping
		}
		bounds := strings.SplitN(f[0], "-", 2)
		if len(bounds) != 2 {
			return nil, fmt.Errorf("maps: malformed line %q", sc.Text())
		}
		start, err1 := strconv.ParseUint(bounds[0], 16, 64)
		end, err2 := strconv.ParseUint(bounds[1], 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("maps: malformed line %q: %w", sc.Text(), err)
		}
		m := Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1]}
		holds := func(a uintptr) bool { return m.Start <= a && a < m.End }
		if f[4] == "0" || strings.Contains(m.Perms, "w") || (!holds(code) && !holds(data)) {
			continue
		}
		m.ReadOnlyData = holds(data) && !strings.Contains(m.Perms, "x")
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("maps: no file-backed mapping holds the executable's code or read-only data")
	}
	return out, nil
}

// Release pages out the executable's code and read-only data and marks the read-only data random-access.
// It returns the mappings it advised. A kernel without MADV_PAGEOUT (before Linux 5.4) gives an error and
// leaves the pages where they are.
func Release() ([]Mapping, error) {
	maps, err := Mappings()
	if err != nil {
		return nil, err
	}
	for _, m := range maps {
		if m.ReadOnlyData {
			if err := madvise(m, unix.MADV_RANDOM); err != nil {
				return nil, fmt.Errorf("madvise(MADV_RANDOM) %#x-%#x: %w", m.Start, m.End, err)
			}
		}
		if err := madvise(m, unix.MADV_PAGEOUT); err != nil {
			return nil, fmt.Errorf("madvise(MADV_PAGEOUT) %#x-%#x: %w", m.Start, m.End, err)
		}
	}
	return maps, nil
}

func madvise(m Mapping, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.Size(), uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// ReleaseAfter waits delay on clk, then releases the executable's pages and logs what the process's
// resident memory was before and after. It returns early, releasing nothing, when ctx ends.
func ReleaseAfter(ctx context.Context, clk clock.Clock, delay time.Duration, log logr.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-clk.After(delay):
	}
	before, err := ReadResident()
	if err != nil {
		log.V(2).Info("Reading resident memory", "err", err)
	}
	maps, err := Release()
	if err != nil {
		log.Info("Could not release the executable's start-up pages", "err", err)
		return
	}
	after, _ := ReadResident()
	var size uintptr
	for _, m := range maps {
		size += m.Size()
	}
	log.V(1).Info("Released the executable's start-up pages", "mapped", size, "residentBefore", before.Total,
		"residentAfter", after.Total, "fileBefore", before.File, "fileAfter", after.File)
}
