package periodic

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Observer receives what each pass of a loop cost: the CPU time its thread spent (the pass's own work, not
// that of goroutines it hands work to) and its wall time.
type Observer interface {
	ObservePass(loop string, cpu, wall time.Duration)
}

type observerKey struct{}

// WithObserver has the passes of loops run under ctx (Measured) reported to o.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// Measured is pass, reporting each call's cost under the loop's name to the Observer ctx carries; pass
// itself when there is none. The pass runs locked to its OS thread, whose CPU time (getrusage
// RUSAGE_THREAD) is read before and after.
func Measured(ctx context.Context, loop string, pass func(context.Context)) func(context.Context) {
	o, ok := ctx.Value(observerKey{}).(Observer)
	if !ok || o == nil {
		return pass
	}
	return func(ctx context.Context) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start, cpu0 := time.Now(), threadCPU()
		pass(ctx)
		o.ObservePass(loop, threadCPU()-cpu0, time.Since(start))
	}
}

// threadCPU is the calling thread's user and system CPU time so far (0 where it cannot be read).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
