/* tests/bench/bench_step.c - the whole zero_step against the fused optimizer pass alone,
   on the same state.

   The CPU device. Each configuration (world size 1 and 4 on the local comm, f32 and
   bf16 params and gradients, AdamW, stage 0 by default) builds one context per rank
   with M modules holding N elements in all, then, best of R repetitions (at most 64),
   times on every rank at once (a barrier before and after, rank 0's clock):
     pass  the fused optimizer pass alone (what zero_step runs after the norm, without
           the gradients' clearing it may fold in), on gradients just written;
     step  from the gradients just written to zero_step's return: zero_grads_ready for
           every module (the reductions start), then zero_step (it waits for them, takes
           the norm, runs the same pass, clears the gradients).
   Writing the gradients is not timed. ratio = best pass / best step: 1.0 is a step that
   costs no more than its optimizer pass. One line per configuration (with, for a noisy
   machine, the median over repetitions of that repetition's pass / step), then the last
   line ratio=<the smallest ratio>.

       build/bench_step [--n ELEMENTS] [--modules M] [--threads T] [--reps R] [--stage S]
                        [--world W] [--dtype f32|bf16]
       defaults: 16M elements, 8 modules, the online CPUs shared out among the ranks (at
       least 1 thread each), 7 repetitions, stage 0, worlds 1 and 4, both dtypes
       (--world / --dtype pick one). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#include <pthread.h>  // defines: pthread_barrier_t
#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: strtoll, atoi
#include <string.h>   // defines: memset, strcmp
#include <unistd.h>   // defines: sysconf

#define MAXMOD 64

typedef struct {
    int64_t n;
    int modules, threads, reps, stage, dtype, threads_set;
    pthread_barrier_t bar;
    double pass_ms, step_ms;        /* best, written by rank 0 */
    double paired[64];              /* each repetition's pass / step, rank 0 */
    zero_result err;
} step_cfg;

/* the gradient every rank adds, varied per repetition so no two steps see the same */
static void write_grads(zero_ctx *z, const zero_param *p, const int64_t *len, int nm, int dt, int rank, int rep) {
    int mi;
    for (mi = 0; mi < nm; mi++) {
        void *g = zero_param_grad(z, p[mi]);
        int64_t i;
        for (i = 0; i < len[mi]; i++) {
            float x = (float)((i * 7919 + rank * 31 + rep * 131 + mi) % 1001 - 500) * 1e-4f;
            if (dt == ZERO_F32) ((float *)g)[i] = x;
            else ((uint16_t *)g)[i] = zero__f32_to_bf16(x);
        }
    }
}

static zero_result step_rank(zero_comm *comm, int rank, void *user) {
    step_cfg *c = (step_cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[MAXMOD];
    zero_param par[MAXMOD];
    int64_t len[MAXMOD];
    zero_result r = ZERO_OK;
    double best_pass = 1e30, best_step = 1e30;
    int mi, rep, world = comm ? comm->size : 1;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = (zero_dtype)c->dtype;
    d.grad_dtype = (zero_dtype)c->dtype;
    d.cpu_threads = c->threads_set ? c->threads : c->threads / world > 1 ? c->threads / world : 1;
    d.optim.type = ZERO_OPTIM_ADAMW;
    d.optim.lr = 1e-3;
    d.optim.weight_decay = 0.01;
    d.timeout_ms = 600000;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (mi = 0; mi < c->modules; mi++) {
        zero_module_desc md;
        zero_param_desc pd;
        char name[32];
        snprintf(name, sizeof name, "m%d", mi);
        memset(&md, 0, sizeof md); md.name = name;
        memset(&pd, 0, sizeof pd); pd.name = "w"; pd.ndim = 1;
        pd.shape[0] = len[mi] = c->n * (mi + 1) / c->modules - c->n * mi / c->modules;
        if ((r = zero_add_module(z, &md, &mod[mi])) != ZERO_OK || (r = zero_add_param(z, mod[mi], &pd, &par[mi])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (rep = 0; rep <= c->reps; rep++) {             /* rep 0 warms up */
        double t0, t1, t2;
        write_grads(z, par, len, c->modules, c->dtype, rank, rep);
        pthread_barrier_wait(&c->bar);
        t0 = bench_now_ms();
        zero__apply_optimizer(z, 1.0f / (float)world, z->arena.param, z->arena.grad, z->arena.master, z->arena.m,
                              z->arena.v, 0);     /* the pass alone: not the gradients' clearing either */
        pthread_barrier_wait(&c->bar);
        t1 = bench_now_ms();
        /* the pass left the gradients as they were: clear them as a step would, then write */
        zero__end_step(z);
        write_grads(z, par, len, c->modules, c->dtype, rank, rep + 1000);
        pthread_barrier_wait(&c->bar);
        t2 = bench_now_ms();
        for (mi = 0; mi < c->modules; mi++)
            if ((r = zero_grads_ready(z, mod[mi])) != ZERO_OK) goto done;
        if ((r = zero_step(z)) != ZERO_OK) goto done;
        pthread_barrier_wait(&c->bar);
        if (rep > 0) {
            double st = bench_now_ms() - t2;
            if (t1 - t0 < best_pass) best_pass = t1 - t0;
            if (st < best_step) best_step = st;
            if (rank == 0) c->paired[rep - 1] = (t1 - t0) / st;
        }
    }
done:
    if (r != ZERO_OK) fprintf(stderr, "bench_step rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    if (rank == 0) { c->pass_ms = best_pass; c->step_ms = best_step; c->err = r; }
    zero_destroy(z);
    return r;
}

int main(int argc, char **argv) {
    step_cfg c;
    int worlds[2] = { 1, 4 }, dts[2] = { ZERO_F32, ZERO_BF16 }, nw = 2, nd = 2, a, wi, di;
    double worst = 1e30;
    memset(&c, 0, sizeof c);
    c.n = (int64_t)16 << 20;
    c.modules = 8;
    c.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    c.reps = 7;
    for (a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!v) { fprintf(stderr, "bench_step: %s needs a value\n", argv[a]); return 2; }
        if (!strcmp(argv[a], "--n")) c.n = strtoll(v, NULL, 10);
        else if (!strcmp(argv[a], "--modules")) c.modules = atoi(v);
        else if (!strcmp(argv[a], "--threads")) { c.threads = atoi(v); c.threads_set = 1; }
        else if (!strcmp(argv[a], "--reps")) c.reps = atoi(v);
        else if (!strcmp(argv[a], "--stage")) c.stage = atoi(v);
        else if (!strcmp(argv[a], "--world")) { worlds[0] = atoi(v); nw = 1; }
        else if (!strcmp(argv[a], "--dtype")) { dts[0] = !strcmp(v, "bf16") ? ZERO_BF16 : ZERO_F32; nd = 1; }
        else {
            fprintf(stderr, "usage: %s [--n ELEMENTS] [--modules M] [--threads T] [--reps R] [--stage S] "
                            "[--world W] [--dtype f32|bf16]\n", argv[0]);
            return 2;
        }
        a++;
    }
    if (c.modules < 1 || c.modules > MAXMOD || c.n < c.modules || c.threads < 1 || c.reps < 1 || c.reps > 64 || c.stage < 0 ||
        c.stage > 3 || worlds[0] < 1) {
        fprintf(stderr, "bench_step: bad options\n");
        return 2;
    }
    printf("bench_step: %lld elements in %d modules, stage %d, AdamW, %d thread(s)%s, best of %d\n",
           (long long)c.n, c.modules, c.stage, c.threads, c.threads_set ? " per rank" : " shared out among the ranks",
           c.reps);
    for (wi = 0; wi < nw; wi++)
        for (di = 0; di < nd; di++) {
            zero_result r;
            double ratio;
            c.dtype = dts[di];
            pthread_barrier_init(&c.bar, NULL, (unsigned)worlds[wi]);
            r = zero_run_local(worlds[wi], step_rank, &c);
            pthread_barrier_destroy(&c.bar);
            if (r != ZERO_OK || c.err != ZERO_OK) { fprintf(stderr, "bench_step: %s\n", zero_result_str(r)); return 1; }
            ratio = c.pass_ms / c.step_ms;
            if (ratio < worst) worst = ratio;
            printf("world=%d dtype=%-4s pass %9.2f ms   step %9.2f ms   ratio %.3f   (paired median %.3f)\n",
                   worlds[wi], dts[di] == ZERO_F32 ? "f32" : "bf16", c.pass_ms, c.step_ms, ratio,
                   bench_median(c.paired, c.reps));
            fflush(stdout);
        }
    printf("ratio=%.3f\n", worst);
    return 0;
}
