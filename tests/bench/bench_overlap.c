/* tests/bench/bench_overlap.c - how much of a step the optimizer leaves exposed: the time from
   the step's last zero_grads_ready to the return of its zero_step (zero_stats'
   last_exposed_step_ms) against the whole step (forward, backward, step), on a model whose
   backward pass has real compute. The baseline issue #30 (the step speculated under the
   backward pass) is measured against.

   The CPU device, W ranks on the local comm (threads), stage S. The model: L layers, each a
   module of one D x D linear (bf16 params), a batch of B rows per rank: the forward runs
   y = x W^T per layer (zero_sgemm), the backward dW = dy^T x and dx = dy W per layer in
   reverse, each layer's zero_grads_ready as soon as its dW is in (its reduction starts
   while the layers before it compute). The GEMMs are zero.h's CPU SGEMM (zero__gemm_plain,
   one thread a rank). Per tier (the optimizer states in memory, then on
   NVMe in $TMPDIR), after 2 warm-up steps, K steps timed on rank 0 (a barrier before each):
     step     the whole step, from the forward's start to zero_step's return;
     exposed  last_exposed_step_ms of that step.
   One line per tier with the medians and exposed / step; the last line ratio=<exposed / step
   on NVMe>: the share of the step the optimizer leaves exposed (lower is better; a step
   whose optimizer hid entirely under the backward pass would be near 0). Both tiers run
   again with desc.speculative_step (each module's step on the comm thread as soon as its
   gradient is reduced; on NVMe each block once every piece in it has its gradient):
     speculative_exposed_ratio=       memory: exposed time with it over without;
     speculative_nvme_exposed_ratio=  NVMe: likewise (issue #30's target: at most 0.4);
     speculative_nvme_speedup=        NVMe: the step without it over with it (target: 1.2).
   With W ranks on as many cores the backward pass keeps every core busy, so the speculated
   passes take their CPU time from it: the exposed time falls, the step hardly. Then NVMe
   runs twice more at one rank (a core left to the optimizer, as on a GPU machine, where the
   backward pass runs on the GPU and the CPU cores wait): speculative_nvme_1rank_exposed_ratio=
   and speculative_nvme_1rank_speedup=.
   The NVMe tier's blocks are offload.buffer_bytes / 3 (--buffer-mb, 8 by default: blocks
   of about 600,000 elements, a layer's shard (524,288 at 2 ranks) or so, so the blocks of
   the last layers are ready while the first ones compute).

       build/bench_overlap [--d D] [--layers L] [--batch B] [--world W] [--stage S]
                           [--steps K] [--threads T] [--buffer-mb M]
       defaults: D 1024, 8 layers, B 64, W 2, stage 2, K 7, the online CPUs shared out
       among the ranks (at least 1 each), M 8. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#include <pthread.h>  // defines: pthread_barrier_t
#include <stdio.h>    // defines: printf, fprintf, snprintf
#include <stdlib.h>   // defines: strtoll, atoi, getenv, malloc, free
#include <string.h>   // defines: memset, strcmp
#include <unistd.h>   // defines: sysconf

#define MAXL 64
#define MAXK 64

typedef struct {
    int64_t d, batch;
    int layers, world, stage, steps, threads;
    int64_t buffer_bytes;           /* the NVMe tier's offload.buffer_bytes */
    zero_offload_tier tier;
    int spec;                       /* desc.speculative_step */
    const char *dir;
    pthread_barrier_t bar;
    double step_ms[MAXK], exposed_ms[MAXK];     /* rank 0's */
    zero_result err;
    char msg[512];
} ov_cfg;

static float val(int64_t i, int salt) { return (float)((i * 7919 + salt * 104729) % 2001 - 1000) * 1e-4f; }

static zero_result ov_rank(zero_comm *comm, int rank, void *user) {
    ov_cfg *c = (ov_cfg *)user;
    const int64_t D = c->d, B = c->batch;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[MAXL];
    zero_param W[MAXL];
    float *acts = NULL, *dy = NULL, *dx = NULL, *w32 = NULL, *g32 = NULL, *ws = NULL;
    zero_result r;
    int l, s;
    int64_t i;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = ZERO_BF16;
    d.cpu_threads = c->threads;
    d.optim.lr = 1e-4;
    d.offload_optimizer = c->tier;
    d.speculative_step = c->spec;
    d.offload.nvme_dirs[0] = c->dir;
    d.offload.buffer_bytes = c->buffer_bytes;
    d.timeout_ms = 600000;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (l = 0; l < c->layers; l++) {
        zero_module_desc md;
        zero_param_desc pd;
        char name[16];
        snprintf(name, sizeof name, "l%d", l);
        memset(&md, 0, sizeof md);
        md.name = name;
        memset(&pd, 0, sizeof pd);
        pd.name = "w"; pd.ndim = 2; pd.shape[0] = D; pd.shape[1] = D;
        if ((r = zero_add_module(z, &md, &mod[l])) != ZERO_OK || (r = zero_add_param(z, mod[l], &pd, &W[l])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    acts = (float *)malloc(sizeof(float) * (size_t)((c->layers + 1) * B * D));
    dy = (float *)malloc(sizeof(float) * (size_t)(B * D));
    dx = (float *)malloc(sizeof(float) * (size_t)(B * D));
    w32 = (float *)malloc(sizeof(float) * (size_t)(D * D));
    g32 = (float *)malloc(sizeof(float) * (size_t)(D * D));
    ws = (float *)malloc(sizeof(float) * (size_t)(ZERO__MC * ZERO__KC + ZERO__KC * ZERO__NC));
    if (!acts || !dy || !dx || !w32 || !g32 || !ws) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    for (l = 0; l < c->layers; l++) {
        for (i = 0; i < D * D; i++) w32[i] = val(i, l) * 0.05f;
        if ((r = zero_param_set_f32(z, W[l], w32)) != ZERO_OK) goto done;
    }
    for (s = 0; s < c->steps + 2; s++) {
        double t0;
        zero_stats st;
        pthread_barrier_wait(&c->bar);
        t0 = bench_now_ms();
        for (i = 0; i < B * D; i++) acts[i] = val(i + rank, s);
        for (l = 0; l < c->layers; l++) {      /* forward: y = x W^T (W widened to fp32) */
            if ((r = zero_fetch(z, mod[l])) != ZERO_OK) goto done;
            zero_to_f32(w32, zero_param_data(z, W[l]), ZERO_BF16, D * D);
            zero__gemm_plain(0, 1, B, D, D, acts + l * B * D, D, w32, D, acts + (l + 1) * B * D, D, ws, z->opt.simd);
            if ((r = zero_release(z, mod[l])) != ZERO_OK) goto done;
        }
        for (i = 0; i < B * D; i++) dy[i] = acts[c->layers * B * D + i] * (1.0f / (float)B);     /* d(0.5 |y|^2) / B */
        for (l = c->layers - 1; l >= 0; l--) {     /* backward: dW = dy^T x, dx = dy W */
            if ((r = zero_fetch(z, mod[l])) != ZERO_OK) goto done;
            zero_to_f32(w32, zero_param_data(z, W[l]), ZERO_BF16, D * D);
            zero__gemm_plain(1, 0, D, D, B, dy, D, acts + l * B * D, D, g32, D, ws, z->opt.simd);
            zero__gemm_plain(0, 0, B, D, D, dy, D, w32, D, dx, D, ws, z->opt.simd);
            zero_add_f32(zero_param_grad(z, W[l]), ZERO_BF16, g32, D * D);
            if ((r = zero_release(z, mod[l])) != ZERO_OK || (r = zero_grads_ready(z, mod[l])) != ZERO_OK) goto done;
            memcpy(dy, dx, sizeof(float) * (size_t)(B * D));
        }
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
        r = ZERO_OK;
        if (rank == 0 && s >= 2 && zero_stats_get(z, &st) == ZERO_OK) {
            c->step_ms[s - 2] = bench_now_ms() - t0;
            c->exposed_ms[s - 2] = st.last_exposed_step_ms;
        }
    }
done:
    if (r != ZERO_OK && rank == 0) {
        c->err = r;
        snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(z));
    }
    free(acts); free(dy); free(dx); free(w32); free(g32); free(ws);
    zero_destroy(z);
    return r;
}

int main(int argc, char **argv) {
    static ov_cfg c;
    static const char *tname[6] = { "memory", "nvme", "memory_speculative", "nvme_speculative", "nvme_1rank",
                                    "nvme_1rank_speculative" };
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double share = 0, exposed_mem = 0, exposed_nvme = 0, step_nvme = 0;
    int a, t, world;
    memset(&c, 0, sizeof c);
    c.d = 1024; c.layers = 8; c.batch = 64; c.world = 2; c.stage = 2; c.steps = 7; c.threads = 0;
    c.buffer_bytes = (int64_t)8 << 20;
    for (a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--d")) c.d = strtoll(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--layers")) c.layers = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--batch")) c.batch = strtoll(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--world")) c.world = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--stage")) c.stage = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--steps")) c.steps = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--threads")) c.threads = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--buffer-mb")) c.buffer_bytes = strtoll(argv[a + 1], NULL, 10) << 20;
        else { fprintf(stderr, "bench_overlap: unknown option %s\n", argv[a]); return 2; }
    }
    if (c.d < 1 || c.batch < 1 || c.layers < 1 || c.layers > MAXL || c.world < 1 || c.world > 16 || c.stage < 0 ||
        c.stage > 3 || c.steps < 1 || c.steps > MAXK || c.buffer_bytes < 1) {
        fprintf(stderr, "bench_overlap: --d, --batch, --buffer-mb >= 1, --layers 1..%d, --world 1..16, --stage 0..3, "
                "--steps 1..%d\n", MAXL, MAXK);
        return 2;
    }
    if (c.threads <= 0) c.threads = cpus > c.world ? (int)(cpus / c.world) : 1;
    snprintf(dir, sizeof dir, "%s/zero_bench_overlap_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) { perror("bench_overlap: mkdtemp"); return 1; }
    c.dir = dir;
    printf("bench_overlap: D %lld, %d layers, batch %lld a rank, %d ranks, stage %d, %d optimizer threads a rank, "
           "%d steps\n",
           (long long)c.d, c.layers, (long long)c.batch, c.world, c.stage, c.threads, c.steps);
    world = c.world;
    for (t = 0; t < 6; t++) {
        double step, exposed;
        zero_result r;
        c.tier = t == 0 || t == 2 ? ZERO_OFFLOAD_NONE : ZERO_OFFLOAD_NVME;
        c.spec = t == 2 || t == 3 || t == 5;
        if (t == 4) {
            if (world == 1) break;      /* (done above) */
            c.world = 1;
            c.threads = cpus > 1 ? (int)cpus : 1;
        }
        c.err = ZERO_OK;
        pthread_barrier_init(&c.bar, NULL, (unsigned)c.world);
        r = c.world == 1 ? ov_rank(NULL, 0, &c) : zero_run_local(c.world, ov_rank, &c);
        pthread_barrier_destroy(&c.bar);
        if (r != ZERO_OK) {
            fprintf(stderr, "bench_overlap: %s: %s: %s\n", tname[t], zero_result_str(r), c.msg);
            rmdir(dir);
            return 1;
        }
        step = bench_median(c.step_ms, c.steps);
        exposed = bench_median(c.exposed_ms, c.steps);
        printf("tier=%s step_ms=%.2f exposed_ms=%.2f exposed_share=%.3f\n", tname[t], step, exposed, exposed / step);
        if (t == 0) exposed_mem = exposed;
        if (t == 1) { share = exposed / step; exposed_nvme = exposed; step_nvme = step; }
        if (t == 2) printf("speculative_exposed_ratio=%.3f\n", exposed / exposed_mem);
        if (t == 3 || t == 5) {
            printf("speculative_nvme%s_exposed_ratio=%.3f\n", t == 5 ? "_1rank" : "", exposed / exposed_nvme);
            printf("speculative_nvme%s_speedup=%.3f\n", t == 5 ? "_1rank" : "", step_nvme / step);
        }
        if (t == 4) { exposed_nvme = exposed; step_nvme = step; }
    }
    rmdir(dir);
    printf("ratio=%.3f\n", share);
    return 0;
}
