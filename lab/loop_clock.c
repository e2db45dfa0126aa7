/* lab/loop_clock.c — an LD_PRELOAD shim for lab/bench: times a client's loop from outside,
 * the same way for the C tool and for our step, when the C tool prints no timing of its own
 * (rping, for --rping) or prints it on a clock of its own (ib_atomic_lat, for the atomic
 * cases: perftest reads the CPU's cycle counter and converts it with a MHz figure, where
 * our steps read CLOCK_MONOTONIC).
 *
 * Two ways, chosen by LOOP_CLOCK_BY; with LOOP_CLOCK_OUT set, the result goes to that file,
 * without it the shim does nothing but pass the calls on.
 *
 * LOOP_CLOCK_BY unset, rping's ping loop: CLOCK_MONOTONIC from the process's first
 * ibv_post_send — a client posts nothing before its first ping's SEND, receives are
 * ibv_post_recv — to its call of rdma_disconnect, which both programs make right after their
 * last ping; the time in nanoseconds, written when rdma_disconnect is called. Why not the
 * whole run: connecting and tearing down took 17-90 ms of guest time a run, and how long
 * moves from run to run by far more than the 0.5 % lab/bench must resolve (the connection
 * manager waits on the kernel's work queues and timers). The loop is what both programs do
 * ping by ping.
 *
 * LOOP_CLOCK_BY=completions, a loop of one work request at a time (post, poll until it
 * completes, post the next) in a program that calls no rdma_disconnect (ib_atomic_lat, 13):
 * CLOCK_MONOTONIC from the first ibv_poll_cq that returns a completion to the last one, and
 * the number of completions between them, "NS INTERVALS", written when the process exits.
 * Each interval is one whole iteration, posting included; the first post and the last
 * completion, which a run's start and end blur, are left out.
 *
 * How: ibv_post_send and ibv_poll_cq are `static inline` in <infiniband/verbs.h> and call
 * the provider through the context's ops table (`qp->context->ops.post_send`,
 * `cq->context->ops.poll_cq`), as our steps do; the shim wraps ibv_open_device (which
 * librdmacm also calls to open the device it resolves an address to) and puts its own
 * functions in that table, as lab/yield_poll.c does for poll_cq (the two can be preloaded
 * together: each wraps what the other left in the table). rdma_disconnect is librdmacm's,
 * called through the dynamic linker by both programs.
 *
 * Built by lab/bench (gcc -shared -fPIC); nothing prebuilt is committed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

typedef int (*post_send_fn)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
typedef int (*poll_cq_fn)(struct ibv_cq *, int, struct ibv_wc *);
typedef struct ibv_context *(*open_device_fn)(struct ibv_device *);
typedef int (*disconnect_fn)(struct rdma_cm_id *);

/* One provider per process is all the benchmark's programs open. */
static post_send_fn real_post_send;
static poll_cq_fn real_poll_cq;
static struct timespec first_post;
static int posted;
static struct timespec first_completion, last_completion;
static long long completions;

static long long ns_between(struct timespec a, struct timespec b)
{
	return (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

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

static int clock_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	int ne = real_poll_cq(cq, num_entries, wc);

	if (ne > 0) {
		clock_gettime(CLOCK_MONOTONIC, &last_completion);
		if (!completions)
			first_completion = last_completion;
		completions += ne;
	}
	return ne;
}

static int by_completions(void)
{
	const char *by = getenv("LOOP_CLOCK_BY");

	return by && !strcmp(by, "completions");
}

static void one_provider(void *seen, void *now)
{
	if (seen && seen != now) {
		fprintf(stderr, "loop_clock: a second provider in one process is not supported\n");
		abort();
	}
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	static open_device_fn real_open;
	struct ibv_context *ctx;

	if (!real_open)
		real_open = (open_device_fn)next("ibv_open_device");
	ctx = real_open(device);
	if (!ctx)
		return ctx;
	if (by_completions()) {
		if (ctx->ops.poll_cq != clock_poll_cq) {
			one_provider((void *)real_poll_cq, (void *)ctx->ops.poll_cq);
			real_poll_cq = ctx->ops.poll_cq;
			ctx->ops.poll_cq = clock_poll_cq;
		}
	} else if (ctx->ops.post_send != clock_post_send) {
		one_provider((void *)real_post_send, (void *)ctx->ops.post_send);
		real_post_send = ctx->ops.post_send;
		ctx->ops.post_send = clock_post_send;
	}
	return ctx;
}

static FILE *out_file(const char *out)
{
	FILE *f = fopen(out, "w");

	if (!f) {
		perror("loop_clock: LOOP_CLOCK_OUT");
		abort();
	}
	return f;
}

/* At exit: the completions' clock, once there were two to time between. */
__attribute__((destructor)) static void write_completions(void)
{
	const char *out = getenv("LOOP_CLOCK_OUT");
	FILE *f;

	if (!out || !by_completions() || completions < 2)
		return;
	f = out_file(out);
	fprintf(f, "%lld %lld\n", ns_between(first_completion, last_completion), completions - 1);
	fclose(f);
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
		f = out_file(out);
		fprintf(f, "%lld\n", ns_between(first_post, now));
		fclose(f);
		posted = 0;
	}
	return real_disconnect(id);
}
