/* lab/yield_poll.c — an LD_PRELOAD shim for lab/bench: an empty ibv_poll_cq gives the CPU
 * away (sched_yield) before it returns.
 *
 * Why: lab/bench measures on qemu's instruction clock, which needs ONE vCPU. A busy-polling
 * ping-pong has two busy-pollers, server and client; on one CPU, the one that waits spins
 * until the scheduler preempts it (a tick, 4 ms here), so every iteration costs about two
 * ticks whatever the program does. Yielding on an empty poll hands the CPU to the peer at
 * once, which is what a second CPU would have done.
 *
 * How: ibv_poll_cq is `static inline` in <infiniband/verbs.h>; it calls the provider through
 * the context's ops table, `cq->context->ops.poll_cq`, and so do our steps. The shim wraps
 * ibv_open_device and puts its own poll_cq in that table, so it applies to every program
 * that reaches the provider the documented way — ibv_rc_pingpong, perftest and ours alike.
 * Nothing else changes: a poll that finds completions returns them exactly as before.
 *
 * Built by lab/bench (gcc -shared -fPIC); nothing prebuilt is committed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

typedef int (*poll_cq_fn)(struct ibv_cq *, int, struct ibv_wc *);
typedef struct ibv_context *(*open_device_fn)(struct ibv_device *);

/* One provider per process is all the benchmark's programs open. */
static poll_cq_fn real_poll_cq;

static int yield_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	int ne = real_poll_cq(cq, num_entries, wc);

	if (ne == 0)
		sched_yield();
	return ne;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	static open_device_fn real_open;
	struct ibv_context *ctx;

	if (!real_open)
		real_open = (open_device_fn)dlsym(RTLD_NEXT, "ibv_open_device");
	if (!real_open) {
		fprintf(stderr, "yield_poll: no ibv_open_device after the shim: %s\n", dlerror());
		abort();
	}
	ctx = real_open(device);
	if (ctx && ctx->ops.poll_cq != yield_poll_cq) {
		if (real_poll_cq && real_poll_cq != ctx->ops.poll_cq) {
			fprintf(stderr, "yield_poll: a second provider in one process is not supported\n");
			abort();
		}
		real_poll_cq = ctx->ops.poll_cq;
		ctx->ops.poll_cq = yield_poll_cq;
	}
	return ctx;
}
