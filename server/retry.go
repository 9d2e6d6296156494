package server

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// reviewBackoff is the kubelet's retry policy for TokenReview and SubjectAccessReview calls (the API server
// webhooks' default: 500 ms, growing 1.5 times, 5 attempts).
func reviewBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// retryReview calls create until it succeeds, fails for good, or the attempts are spent.
func retryReview(ctx context.Context, backoff wait.Backoff, create func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		last = create()
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			return false, nil
		}
		return false, last
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// retriable errors are the API server's transient ones and broken connections.
func retriable(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || errors.Is(err, context.DeadlineExceeded)
}
