/* tests/cuda_mock/costs.c - what a training step costs the host on the CUDA device
   (build/mock/cuda_mock_costs, run by tests/test_cuda_mock.sh in both of the double's modes).
   zero_stats counts the host's waits on the device (host_syncs), device allocations
   (device_allocs) and collective headers (comm_headers); here:
   - counted_all: on one rank, every cudaStreamSynchronize, cudaEventSynchronize,
     cudaDeviceSynchronize, cudaFree and cudaMalloc the double saw during a steady-state
     step is in zero_stats (so no host wait can hide from the counters), and so is every
     one of the whole run up to zero_destroy;
   - steady_local / steady_nccl: stage 3, world 2, 8 modules, clipping on, bf16: the
     norm's blocks are taken by each module's last reduction (zero_step launches none); a
     steady-state step's host_syncs, device_allocs and comm_headers per rank, over the local
     comm and over the NCCL double (printed as "costs ..." lines), checked against what
     the step is documented to cost (report, below). A change that adds a host wait to the
     step fails here until the figure is changed on purpose. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include "../fixture.h"
#include <cuda_runtime.h>

void cuda_mock_counts(long long *syncs, long long *mallocs);   /* tests/cuda_mock/cuda_mock.c */
long long zk_kemu_sumsq_blocks(void);   /* zero_kernels.cu on the emulator: this thread's norm blocks launched */

#define NM 8          /* modules */
#define STEPS 6       /* steps 1..STEPS-1 are the steady state measured */
#define MAXW 2

typedef struct cost_run {
    int world, nccl;
    zero_stats st[MAXW][STEPS + 1];   /* [rank][k]: before step 0 (k = 0), after step k - 1 */
    long long mock_syncs[2], mock_mallocs[2];   /* the double's, around the last step (world 1) */
    zero_result r;
    char msg[512];
    long long step_blocks[MAXW][STEPS];   /* the norm's blocks zero_step itself launched */
} cost_run;

static zero_result rank_fn(zero_comm *comm, int rank, void *user) {
    cost_run *c = (cost_run *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m[NM];
    zero_param w[NM], b[NM];
    zero_result r;
    uint64_t seed = 77 + (uint64_t)rank;
    static unsigned char raw[MAXW][64 * 32 * 4];
    static float h[MAXW][64 * 32];
    int i, step;
    int64_t k;
    fx_desc(&d, comm, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 1e-3);
    d.device = ZERO_DEVICE_CUDA;
    d.clip_norm = 1.0f;
    /* counted_all: nothing gathered ahead, so nothing is in flight when zero_step returns
       and both counts hold still while they are read */
    if (c->world == 1) d.prefetch_bytes = 1;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (i = 0; i < NM; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i);
        if ((r = fx_module(z, name, 0, &m[i])) != ZERO_OK || (r = fx_param(z, m[i], "w", 64, 32, 0, &w[i])) != ZERO_OK ||
            (r = fx_param(z, m[i], "b", 64, 0, 1, &b[i])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i < NM; i++) {
        for (k = 0; k < 64 * 32; k++) h[rank][k] = 0.1f * fx_frand(&seed);
        if ((r = zero_param_set_f32(z, w[i], h[rank])) != ZERO_OK || (r = zero_param_set_f32(z, b[i], h[rank])) != ZERO_OK)
            goto done;
    }
    zero_stats_get(z, &c->st[rank][0]);
    for (step = 0; step < STEPS; step++) {
        if (step == STEPS - 1 && c->world == 1) cuda_mock_counts(&c->mock_syncs[0], &c->mock_mallocs[0]);
        for (i = 0; i < NM; i++)                                   /* forward */
            if ((r = zero_fetch(z, m[i])) != ZERO_OK || (r = zero_release(z, m[i])) != ZERO_OK) goto done;
        for (i = NM - 1; i >= 0; i--) {                            /* backward */
            zero_param ps[2];
            int j;
            ps[0] = w[i]; ps[1] = b[i];
            if ((r = zero_fetch(z, m[i])) != ZERO_OK) goto done;
            for (j = 0; j < 2; j++) {
                int64_t n = j == 0 ? 64 * 32 : 64, bytes = n * 2;
                for (k = 0; k < n; k++) h[rank][k] = 0.01f * fx_frand(&seed);
                zero_from_f32(raw[rank], ZERO_BF16, h[rank], n);
                if ((r = zero_copy(z, zero_param_grad(z, ps[j]), raw[rank], bytes)) != ZERO_OK) goto done;
            }
            if ((r = zero_release(z, m[i])) != ZERO_OK || (r = zero_grads_ready(z, m[i])) != ZERO_OK) goto done;
        }
        (void)zk_kemu_sumsq_blocks();
        r = zero_step(z);
        c->step_blocks[rank][step] = zk_kemu_sumsq_blocks();
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
        zero_stats_get(z, &c->st[rank][step + 1]);
        if (step == STEPS - 1 && c->world == 1) cuda_mock_counts(&c->mock_syncs[1], &c->mock_mallocs[1]);
    }
    r = ZERO_OK;
done:
    if (r != ZERO_OK && rank == 0) snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    return r;
}

static int run(cost_run *c) {
    c->msg[0] = 0;
    c->r = c->nccl ? zero_run_nccl(c->world, rank_fn, c) : zero_run_local(c->world, rank_fn, c);
    return CHECK(c->r == ZERO_OK, "world %d over %s: %s (%s)", c->world, c->nccl ? "nccl" : "local",
                 zero_result_str(c->r), c->msg[0] ? c->msg : zero_last_error(NULL));
}

static cost_run cr;

/* the last step's share of a counter, per rank (counted_all) */
#define DELTA(c, rank, field) ((c)->st[rank][STEPS].field - (c)->st[rank][STEPS - 1].field)
/* a steady-state step's share, per rank, rounded: the mean of steps 1..STEPS-1 (the gather
   zero_step leaves in flight for the next step may or may not have been counted when a
   step's figures are read, so one step's share wavers by a comm task's few) */
#define MEAN(c, rank, field) \
    (((c)->st[rank][STEPS].field - (c)->st[rank][1].field + (STEPS - 1) / 2) / (STEPS - 1))

static void counted_all(void) {
    long long ds, dm;
    memset(&cr, 0, sizeof cr);
    cr.world = 1;
    if (!run(&cr)) return;
    CHECK(cr.step_blocks[0][STEPS - 1] == 3 * NM, "world 1: zero_step launched the norm for %lld blocks, not the "
          "model's %d (3 a module)", cr.step_blocks[0][STEPS - 1], 3 * NM);
    ds = cr.mock_syncs[1] - cr.mock_syncs[0];
    dm = cr.mock_mallocs[1] - cr.mock_mallocs[0];
    CHECK(DELTA(&cr, 0, host_syncs) == ds, "a steady-state step: zero_stats.host_syncs counted %lld, the double saw %lld "
          "host waits (a wait zero.h does not count?)", (long long)DELTA(&cr, 0, host_syncs), ds);
    CHECK(DELTA(&cr, 0, device_allocs) == dm, "a steady-state step: zero_stats.device_allocs counted %lld, the double "
          "saw %lld cudaMalloc calls", (long long)DELTA(&cr, 0, device_allocs), dm);
}

/* What a steady-state step costs each rank (stage 3, world 2, 8 modules, clipping), the
   documented host waits (zero_stats.host_syncs), per step:
   - the test's own zero_copy calls, 2 per module (zero_copy returns once the copy is done:
     its source is the caller's memory) and the norm's one scalar (zero_step's clip);
   - NCCL: one per collective, its bounded wait for completion on the comm thread
     (zero__nccl_wait: done, an NCCL error or the timeout). The header exchange is checked
     in that same wait and the comm task waits for the compute stream on the device;
   - local comm: at most two per collective: the comm task's wait for the compute stream
     (the other ranks read this rank's buffers from their threads) and the wait for its own
     comm-stream work before it leaves the collective (they then read what it wrote).
   Before issue #26 the same step cost 107 (local) and 133 (NCCL) host waits: every
   comm-stream op and every comm task's end waited, and every NCCL collective also waited
   for its header. A change that adds a host wait to the step fails here. */
#define COST_FIXED (2 * NM + 1)
static void report(const char *name, cost_run *c) {
    int rk;
    for (rk = 0; rk < c->world; rk++) {
        int64_t calls = 0, syncs = MEAN(c, rk, host_syncs);
        int k;
        for (k = 0; k < ZERO_COLL_NUM; k++) calls += MEAN(c, rk, comm_calls[k]);
        printf("costs %s rank %d: per step host_syncs=%lld device_allocs=%lld comm_headers=%lld collectives=%lld\n", name,
               rk, (long long)syncs, (long long)MEAN(c, rk, device_allocs), (long long)MEAN(c, rk, comm_headers),
               (long long)calls);
        CHECK(c->st[rk][STEPS].device_allocs == c->st[rk][1].device_allocs,
              "%s rank %d: %lld device allocations in steps 1-%d", name, rk,
              (long long)(c->st[rk][STEPS].device_allocs - c->st[rk][1].device_allocs), STEPS - 1);
        /* the norm: each module's blocks taken by its last reduction on the comm stream, so
           the step itself launches none (one rank: the step takes them all) */
        for (k = 1; k < STEPS; k++)
            CHECK(c->step_blocks[rk][k] == 0, "%s rank %d step %d: zero_step launched the norm for %lld blocks; its "
                  "reductions should have taken them", name, rk, k, c->step_blocks[rk][k]);
        if (c->nccl)
            CHECK(syncs == calls + COST_FIXED, "nccl rank %d: %lld host waits per step; documented: one per collective "
                  "(%lld) + %d", rk, (long long)syncs, (long long)calls, COST_FIXED);
        else
            CHECK(syncs <= 2 * calls + COST_FIXED, "local rank %d: %lld host waits per step; documented: at most two "
                  "per collective (%lld) + %d", rk, (long long)syncs, (long long)calls, COST_FIXED);
    }
}

static void steady_local(void) {
    memset(&cr, 0, sizeof cr);
    cr.world = 2;
    if (!run(&cr)) return;
    report("local", &cr);
    CHECK(cr.st[0][STEPS].comm_headers == 0, "the local comm exchanges no headers: %lld",
          (long long)cr.st[0][STEPS].comm_headers);
}

static void steady_nccl(void) {
    int64_t calls = 0;
    int k;
    memset(&cr, 0, sizeof cr);
    cr.world = 2;
    cr.nccl = 1;
    if (!run(&cr)) return;
    report("nccl", &cr);
    for (k = 0; k < ZERO_COLL_NUM; k++) calls += MEAN(&cr, 0, comm_calls[k]);
    CHECK(MEAN(&cr, 0, comm_headers) <= calls, "%lld headers for %lld collectives",
          (long long)MEAN(&cr, 0, comm_headers), (long long)calls);
}

int main(void) {
    int n = 0;
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("FAIL costs_device: cudaGetDeviceCount found no (mock) device\n");
        return 1;
    }
    TEST_RUN(counted_all);
    TEST_RUN(steady_local);
    if (n >= 2) TEST_RUN(steady_nccl);
    else printf("SKIP steady_nccl: %d mock device (ZERO_CUDA_MOCK_DEVICES=2 runs it)\n", n);
    return test_summary();
}
