package userns

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// kubeletUser is the user whose subordinate IDs are the node's range for pods' user namespaces.
const kubeletUser = "kubelet"

// KubeletRange is the node's range for pods' user namespaces, as the kubelet reads it: the subordinate
// UIDs of the "kubelet" user (getsubids), which must equal its subordinate GIDs; without that user (or
// without getsubids), every ID from idsPerPod up.
func KubeletRange(idsPerPod uint32) (first, length uint32, err error) {
	return kubeletRange(idsPerPod, user.Lookup, exec.LookPath, func(args ...string) ([]byte, error) {
		return exec.Command("getsubids", args...).Output() //nolint:gosec // fixed program, the user name is ours
	})
}

func kubeletRange(idsPerPod uint32, lookup func(string) (*user.User, error), lookPath func(string) (string, error),
	getsubids func(args ...string) ([]byte, error)) (first, length uint32, err error) {
	defFirst, defLen := idsPerPod, uint32((uint64(1)<<32)-uint64(idsPerPod))
	if _, err := lookup(kubeletUser); err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return defFirst, defLen, nil
		}
		return 0, 0, err
	}
	if _, err := lookPath("getsubids"); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return defFirst, defLen, nil
		}
		return 0, 0, err
	}
	uids, err := getsubids(kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional uids for user %q: %w", kubeletUser, err)
	}
	gids, err := getsubids("-g", kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional gids for user %q", kubeletUser)
	}
	if string(uids) != string(gids) {
		return 0, 0, fmt.Errorf("mismatched subuids and subgids for user %q", kubeletUser)
	}
	return parseGetSubIDs(string(uids))
}

// parseGetSubIDs reads getsubids' one line: "0: kubelet 65536 2147483648".
func parseGetSubIDs(out string) (first, length uint32, err error) {
	lines := strings.Split(strings.Trim(out, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("error parsing line %q: it must contain only one line", out)
	}
	parts := strings.Fields(lines[0])
	if len(parts) != 4 {
		return 0, 0, fmt.Errorf("invalid line %q", lines[0])
	}
	f, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", lines[0], err)
	}
	l, err := strconv.ParseUint(parts[3], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", lines[0], err)
	}
	return uint32(f), uint32(l), nil
}
