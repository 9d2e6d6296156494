package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/periodic"
)

// LeaseBatch renews the Leases of many nodes of one process (hollow nodes) from one goroutine per
// interval instead of one timer per node: every Interval it renews each member once, Workers at a time.
// A member renews exactly as its LeaseController would on its own.
type LeaseBatch struct {
	Clock    clock.WithTicker
	Interval time.Duration // default 10 s, the kubelet's renew interval for a 40 s lease
	Workers  int           // default 16

	mu      sync.Mutex
	members map[*LeaseController]context.Context
}

// Join makes c a member until leave is called; its renewals run with ctx (and its logger). The first
// renewal happens at once, as LeaseController.Start's.
func (b *LeaseBatch) Join(ctx context.Context, c *LeaseController) (leave func()) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithName("lease").WithValues("node", c.NodeName))
	// The first renewal before c is a member: a batch renewal running meanwhile must not sync c at the same time.
	c.sync(ctx, b.interval())
	b.mu.Lock()
	if b.members == nil {
		b.members = map[*LeaseController]context.Context{}
	}
	b.members[c] = ctx
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.members, c)
		b.mu.Unlock()
	}
}

// Member is c as a manager Runnable: a member of the batch while the manager runs.
func (b *LeaseBatch) Member(c *LeaseController) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		leave := b.Join(ctx, c)
		<-ctx.Done()
		leave()
		return nil
	}
}

func (b *LeaseBatch) interval() time.Duration {
	if b.Interval <= 0 {
		return 10 * time.Second
	}
	return b.Interval
}

// Start renews the members every interval, the first time one interval after Start (a member renews at once
// when it joins), until ctx ends.
func (b *LeaseBatch) Start(ctx context.Context) error {
	return periodic.Every(ctx, b.Clock, b.interval(), periodic.Measured(ctx, "lease", func(context.Context) { b.renewAll() }))
}

// renewAll renews every current member once, Workers at a time, and returns when all are done.
func (b *LeaseBatch) renewAll() {
	b.mu.Lock()
	type member struct {
		c   *LeaseController
		ctx context.Context
	}
	all := make([]member, 0, len(b.members))
	for c, ctx := range b.members {
		all = append(all, member{c, ctx})
	}
	b.mu.Unlock()
	workers := b.Workers
	if workers <= 0 {
		workers = 16
	}
	jobs := make(chan member)
	var wg sync.WaitGroup
	for range min(workers, len(all)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range jobs {
				if m.ctx.Err() == nil {
					m.c.sync(m.ctx, b.interval())
				}
			}
		}()
	}
	for _, m := range all {
		jobs <- m
	}
	close(jobs)
	wg.Wait()
}
