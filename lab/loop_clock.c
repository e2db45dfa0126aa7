/* lab/loop_clock.c — an LD_PRELOAD shim for lab/bench --rping: times a client's ping loop
 * from outside, the same way for Debian's rping and for 10_rdma_cm.
 *
 * Why: rping prints no timing, and the client's whole run time is not only its loop:
 * connecting and tearing down took 17-90 ms of guest time a run, and how long moves from
 * run to run by far more than the 0.5 % lab/bench must resolve (the connection manager
 * waits on the kernel's work queues and timers). The loop is what both programs do ping
 * by ping.
 *
 * What it measures: CLOCK_MONOTONIC from the process's first ibv_post_send — a client posts
 * nothing before its first ping's SEND, receives are ibv_post_recv — to its call of
 * rdma_disconnect, which both programs make right after their last ping. With
 * LOOP_CLOCK_OUT set, it writes that time in nanoseconds to that file when rdma_disconnect
 * is called; without it, it does nothing but pass the calls on.
 *
 * How: ibv_post_send is `static inline` in <infiniband/verbs.h> and calls the provider
 * through `qp->context->ops.post_send`, as our steps do; the shim wraps ibv_open_device
 * (which librdmacm calls to open the device it resolves an address to) and puts its own
 * post_send in that table, as lab/yield_poll.c does for poll_cq. rdma_disconnect is
 * librdmacm's, called through the dynamic linker by both programs.
 *
 * Built by lab/bench (gcc -shared -fPIC); nothing prebuilt is committed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

typedef int (*post_send_fn)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
typedef struct ibv_context *(*open_device_fn)(struct ibv_device *);
typedef int (*disconnect_fn)(struct rdma_cm_id *);

/* One provider per process is all rping and step 10 open. */
static post_send_fn real_post_send;
static struct timespec first_post;
static int posted;

static void *next(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f) {
		fprintf(stderr, "loop_clock: no %s after the shim: %s\n", name, dlerror());
		abort();
	}
	return f;
}

static int clock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	if (!posted) {
		clock_gettime(CLOCK_MONOTONIC, &first_post);
		posted = 1;
	}
	return real_post_send(qp, wr, bad_wr);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	static open_device_fn real_open;
	struct ibv_context *ctx;

	if (!real_open)
		real_open = (open_device_fn)next("ibv_open_device");
	ctx = real_open(device);
	if (ctx && ctx->ops.post_send != clock_post_send) {
		if (real_post_send && real_post_send != ctx->ops.post_send) {
			fprintf(stderr, "loop_clock: a second provider in one process is not supported\n");
			abort();
		}
		real_post_send = ctx->ops.post_send;
		ctx->ops.post_send = clock_post_send;
	}
	return ctx;
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	static disconnect_fn real_disconnect;
	const char *out = getenv("LOOP_CLOCK_OUT");
	struct timespec now;
	FILE *f;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!real_disconnect)
		real_disconnect = (disconnect_fn)next("rdma_disconnect");
	if (out && posted) {
		f = fopen(out, "w");
		if (!f) {
			perror("loop_clock: LOOP_CLOCK_OUT");
			abort();
		}
		fprintf(f, "%lld\n", (long long)(now.tv_sec - first_post.tv_sec) * 1000000000LL +
					  (now.tv_nsec - first_post.tv_nsec));
		fclose(f);
		posted = 0;
	}
	return real_disconnect(id);
}
