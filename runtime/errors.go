package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors that CRI failures map to. Check them with errors.Is; the wrapped error keeps the
// runtime's own message.
var (
	// ErrNotFound: the sandbox, container or image does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a sandbox or container with that name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrUnavailable: the runtime cannot be reached (socket missing, runtime down or restarting).
	ErrUnavailable = errors.New("runtime unavailable")
	// ErrDeadlineExceeded: the call did not finish within its timeout.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrUnimplemented: the runtime does not offer this RPC.
	ErrUnimplemented = errors.New("unimplemented")
	// ErrInvalidArgument: the runtime refused the request as malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidResponse: the runtime answered with a response that breaks the CRI contract.
	ErrInvalidResponse = errors.New("invalid response from runtime")
	// ErrRuntime: any other failure reported by the runtime.
	ErrRuntime = errors.New("runtime error")
)

// codeErrors maps gRPC codes to sentinels; codes not listed map to ErrRuntime.
var codeErrors = map[codes.Code]error{
	codes.NotFound:         ErrNotFound,
	codes.AlreadyExists:    ErrAlreadyExists,
	codes.Unavailable:      ErrUnavailable,
	codes.DeadlineExceeded: ErrDeadlineExceeded,
	codes.Unimplemented:    ErrUnimplemented,
	codes.InvalidArgument:  ErrInvalidArgument,
}

// MapError turns an error from a CRI call (an RPC or a stream's Recv) into "<op>: <sentinel>: <runtime
// message>", so that errors.Is matches the sentinel.
func MapError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", op, ErrDeadlineExceeded, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w: %w", op, ErrRuntime, err)
	}
	sentinel, known := codeErrors[st.Code()]
	if !known {
		sentinel = ErrRuntime
	}
	return &Error{Op: op, Code: st.Code(), Message: st.Message(), sentinel: sentinel}
}

// Error is a failed CRI call.
type Error struct {
	Op       string     // the RPC, e.g. "RunPodSandbox"
	Code     codes.Code // the gRPC status code
	Message  string     // the runtime's message
	sentinel error
}

func (e *Error) Error() string { return e.Op + ": " + e.sentinel.Error() + ": " + e.Message }

// Unwrap lets errors.Is match the sentinel.
func (e *Error) Unwrap() error { return e.sentinel }

// invalidResponse reports a response that breaks the CRI contract.
func invalidResponse(op, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", op, ErrInvalidResponse, fmt.Sprintf(format, args...))
}
