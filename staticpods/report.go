package staticpods

import "errors"

// Reporter receives bad-input reports, one per problem: the caller logs them and records a Warning event
// on the Node. It must not call back into the Store.
type Reporter func(reason, message string)

// Reasons passed to a Reporter.
const (
	// ReasonFailedToRead: a manifest file could not be read (permissions, a FIFO, a dangling symlink, a loop).
	ReasonFailedToRead = "FailedToReadStaticPod"
	// ReasonFailedToDecode: a manifest is not a v1 Pod or PodList (syntax, kind, apiVersion, unknown field).
	ReasonFailedToDecode = "FailedToDecodeStaticPod"
	// ReasonInvalid: a manifest decoded but its pod is invalid.
	ReasonInvalid = "InvalidStaticPod"
	// ReasonTooLarge: a manifest file or response is over the size limit.
	ReasonTooLarge = "StaticPodManifestTooLarge"
	// ReasonDuplicate: a static pod has the namespace/name of one defined before it; it is ignored.
	ReasonDuplicate = "DuplicateStaticPod"
	// ReasonPathNotFound: staticPodPath does not exist (yet).
	ReasonPathNotFound = "StaticPodPathNotFound"
	// ReasonUnreachable: staticPodURL failed (transport error, timeout, a status other than 200).
	ReasonUnreachable = "StaticPodSourceUnreachable"
)

type report struct{ reason, message string }

// faultLog reports each key's problems once: a report identical to the last one for the same key is
// dropped until the key reads fine again (clear). It is used by one goroutine.
type faultLog struct {
	report Reporter
	last   map[string]report
}

func newFaultLog(r Reporter) *faultLog {
	return &faultLog{report: r, last: map[string]report{}}
}

func (f *faultLog) fault(key, reason, message string) {
	r := report{reason: reason, message: message}
	if last, ok := f.last[key]; ok && last == r {
		return
	}
	f.last[key] = r
	if f.report != nil {
		f.report(reason, message)
	}
}

func (f *faultLog) clear(key string) {
	delete(f.last, key)
}

// reasonFor maps a Decode or read error to its report reason.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrInvalidPod):
		return ReasonInvalid
	case errors.Is(err, ErrMalformed):
		return ReasonFailedToDecode
	}
	return ReasonFailedToRead
}
