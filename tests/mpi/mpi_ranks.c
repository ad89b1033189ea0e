/* tests/mpi/mpi_ranks.c - one rank of an MPI job, for tests/test_mpi.sh (built with mpicc
   -DZERO_MPI into build/mpi/mpi_ranks and run under mpirun). Modes:

     mpi_ranks ops                the MPI comm's collectives, checked bit for bit against
                                  the local comm (threads in this process) on the same
                                  inputs: prints "PASS ops_<name>" / "FAIL ..." on rank 0
     mpi_ranks kill R MS          train a small stage-3 model with timeout_ms MS; rank R
                                  kills itself (SIGKILL) at step 3
     mpi_ranks stall R MS         same, but rank R sleeps 2*MS at step 3
     mpi_ranks mismatch           rank 1 all-reduces 2 doubles where the others reduce 1

   In the failure modes each rank prints "rank <r>: <result>: <message> (<ms> ms)" on
   stderr for the call that failed and exits 3; the script checks the survivors name the
   missing rank within the timeout. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>   // defines: raise, SIGKILL
#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: atoi, exit
#include <string.h>   // defines: strcmp, memcmp
#include <time.h>     // defines: nanosleep, clock_gettime
#include <unistd.h>   // defines: _exit
#define ZERO_IMPLEMENTATION
#include "../../zero.h"

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// ---------------------------------------------------------------------------- ops
#define OPS_COUNT 1000     // elements per rank slice; odd-ish sizes catch stride bugs
typedef struct {
    int n;
    unsigned char *out[64];   // [rank]: the local comm's results, in call order
} ops_ref;

// fills the inputs of rank r (deterministic), runs every collective, writes results into out
static zero_result run_ops(zero_comm *c, int r, unsigned char *out) {
    const zero__comm_vt *vt = c->vt;
    int n = c->size, to = 10000;
    size_t off = 0;
    zero_result e;
    float f[OPS_COUNT * 64];
    uint16_t h[OPS_COUNT * 64];
    double dd[5];
    for (int i = 0; i < OPS_COUNT * n; i++) f[i] = (float)((i * 7919 + r * 104729) % 1000) * 1e-3f - 0.37f * (float)r;
    zero_from_f32(h, ZERO_BF16, f, (int64_t)OPS_COUNT * n);
    // reduce-scatter f32 -> f32, bf16 -> f32 (accumulate), bf16 -> bf16 in place (as stage 0-1 do)
    float rs[OPS_COUNT];
    if ((e = vt->reduce_scatter(c, f, ZERO_F32, rs, ZERO_F32, OPS_COUNT, 0, to))) return e;
    memcpy(out + off, rs, sizeof rs); off += sizeof rs;
    if ((e = vt->reduce_scatter(c, h, ZERO_BF16, rs, ZERO_F32, OPS_COUNT, 1, to))) return e;
    memcpy(out + off, rs, sizeof rs); off += sizeof rs;
    uint16_t hh[OPS_COUNT * 64];
    memcpy(hh, h, sizeof(uint16_t) * OPS_COUNT * n);
    if ((e = vt->reduce_scatter(c, hh, ZERO_BF16, hh + (size_t)r * OPS_COUNT, ZERO_BF16, OPS_COUNT, 0, to))) return e;
    memcpy(out + off, hh + (size_t)r * OPS_COUNT, 2 * OPS_COUNT); off += 2 * OPS_COUNT;
    // f16 all-reduce (rs + ag in place)
    zero_from_f32(hh, ZERO_F16, f, (int64_t)OPS_COUNT * n);
    if ((e = vt->all_reduce(c, hh, ZERO_F16, (int64_t)OPS_COUNT * n, to))) return e;
    memcpy(out + off, hh, 2 * (size_t)OPS_COUNT * n); off += 2 * (size_t)OPS_COUNT * n;
    // f32 all-reduce
    float fa[OPS_COUNT * 64];
    memcpy(fa, f, sizeof(float) * OPS_COUNT * n);
    if ((e = vt->all_reduce(c, fa, ZERO_F32, (int64_t)OPS_COUNT * n, to))) return e;
    memcpy(out + off, fa, sizeof(float) * OPS_COUNT * n); off += sizeof(float) * OPS_COUNT * n;
    // f64 all-reduce
    for (int i = 0; i < 5; i++) dd[i] = 0.1 * (i + 1) * (r + 1) + 1e-17 * r;
    if ((e = vt->all_reduce(c, dd, ZERO__F64, 5, to))) return e;
    memcpy(out + off, dd, sizeof dd); off += sizeof dd;
    // all-gather, in place and from a separate buffer
    float ag[OPS_COUNT * 64];
    for (int i = 0; i < OPS_COUNT; i++) ag[(size_t)r * OPS_COUNT + i] = f[i];
    if ((e = vt->all_gather(c, ag + (size_t)r * OPS_COUNT, ag, sizeof(float) * OPS_COUNT, to))) return e;
    memcpy(out + off, ag, sizeof(float) * OPS_COUNT * n); off += sizeof(float) * OPS_COUNT * n;
    if ((e = vt->all_gather(c, f + 3, ag, sizeof(float) * 7, to))) return e;
    memcpy(out + off, ag, sizeof(float) * 7 * n); off += sizeof(float) * 7 * n;
    // broadcast from the last rank, barrier
    float b[33];
    for (int i = 0; i < 33; i++) b[i] = (float)(r * 100 + i);
    if ((e = vt->broadcast(c, b, sizeof b, n - 1, to))) return e;
    memcpy(out + off, b, sizeof b); off += sizeof b;
    if ((e = vt->barrier(c, to))) return e;
    return ZERO_OK;
}
#define OPS_BYTES (sizeof(float) * OPS_COUNT * 4 + (size_t)64 * OPS_COUNT * 16 + 1024)

static zero_result ops_local(zero_comm *c, int r, void *user) {
    return run_ops(c, r, ((ops_ref *)user)->out[r]);
}

static int mode_ops(zero_comm *c) {
    int r = c->rank, n = c->size, failed = 0;
    ops_ref ref;
    unsigned char *mine = (unsigned char *)calloc(1, OPS_BYTES);
    ref.n = n;
    for (int k = 0; k < n; k++) ref.out[k] = (unsigned char *)calloc(1, OPS_BYTES);
    zero_result e = zero_run_local(n, ops_local, &ref);          // the reference: threads
    zero_result m = run_ops(c, r, mine);                          // the same on MPI
    int same = e == ZERO_OK && m == ZERO_OK && memcmp(mine, ref.out[r], OPS_BYTES) == 0;
    // rank 0 reports for everyone: gather the verdicts over the comm under test
    int64_t v = same, all[64];
    zero_result g = c->vt->all_gather(c, &v, all, sizeof v, 10000);
    if (r == 0) {
        for (int k = 0; k < n; k++) if (g != ZERO_OK || !all[k]) failed = 1;
        if (failed) printf("FAIL ops_bitwise_vs_local_n%d: local %s, mpi %s (%s), results differ on some rank\n", n,
                           zero_result_str(e), zero_result_str(m), c->err);
        else printf("PASS ops_bitwise_vs_local_n%d\n", n);
        fflush(stdout);
    }
    for (int k = 0; k < n; k++) free(ref.out[k]);
    free(mine);
    return failed;
}

// ---------------------------------------------------------------------------- training with a failure
#define FAIL_IF(call) do { zero_result e_ = (call); if (e_ < 0) { \
    fprintf(stderr, "rank %d: %s: %s (%.0f ms)\n", rank, zero_result_str(e_), zero_last_error(z), ms_now() - t0); \
    fflush(stderr); return 3; } } while (0)

static int mode_fail(zero_comm *c, int kill, int victim, int timeout_ms) {
    int rank = c->rank;
    zero_ctx *z = NULL;
    zero_desc d = {0};
    d.comm = c; d.stage = 3; d.param_dtype = ZERO_F32; d.timeout_ms = timeout_ms; d.optim.lr = 0.01;
    double t0 = ms_now();
    FAIL_IF(zero_create(&z, &d));
    zero_module mods[4];
    zero_param ps[4];
    for (int l = 0; l < 4; l++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", l);
        zero_module_desc md = {0}; md.name = name;
        zero_param_desc pd = {0}; pd.name = "w"; pd.ndim = 1; pd.shape[0] = 4096;
        FAIL_IF(zero_add_module(z, &md, &mods[l]));
        FAIL_IF(zero_add_param(z, mods[l], &pd, &ps[l]));
    }
    FAIL_IF(zero_build(z));
    for (int step = 0; step < 8; step++) {
        if (step == 3 && rank == victim) {
            if (kill) raise(SIGKILL);
            struct timespec ts = { (2 * timeout_ms) / 1000, (long)((2 * timeout_ms) % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        t0 = ms_now();   // the time that counts: from the step where the rank went missing
        for (int l = 3; l >= 0; l--) {
            FAIL_IF(zero_fetch(z, mods[l]));
            float *g = (float *)zero_param_grad(z, ps[l]);
            for (int i = 0; i < 4096; i++) g[i] += 0.001f * (float)(i % 7 - rank);
            FAIL_IF(zero_release(z, mods[l]));
            FAIL_IF(zero_grads_ready(z, mods[l]));
        }
        FAIL_IF(zero_step(z));
    }
    zero_destroy(z);
    printf("rank %d: finished 8 steps\n", rank);
    return 0;
}

static int mode_mismatch(zero_comm *c) {
    int rank = c->rank;
    zero_ctx *z = NULL;
    zero_desc d = {0};
    double t0 = ms_now(), v[2] = { 1.0, 2.0 };
    d.comm = c; d.timeout_ms = 5000;
    FAIL_IF(zero_create(&z, &d));
    zero_module_desc md = {0}; md.name = "m";
    zero_param_desc pd = {0}; pd.name = "w"; pd.ndim = 1; pd.shape[0] = 16;
    zero_module m; zero_param p;
    FAIL_IF(zero_add_module(z, &md, &m));
    FAIL_IF(zero_add_param(z, m, &pd, &p));
    FAIL_IF(zero_build(z));
    FAIL_IF(zero_allreduce_f64(z, v, rank == 1 ? 2 : 1));
    zero_destroy(z);
    printf("rank %d: no mismatch reported\n", rank);
    return 0;
}

int main(int argc, char **argv) {
    zero_comm *c = NULL;
    if (argc < 2) { fprintf(stderr, "usage: mpi_ranks ops | kill R MS | stall R MS | mismatch\n"); return 2; }
    zero_result r = zero_comm_from_env(&c, "mpi");
    if (r != ZERO_OK) { fprintf(stderr, "mpi_ranks: %s\n", zero_last_error(NULL)); return 2; }
    int rc;
    if (!strcmp(argv[1], "ops")) rc = mode_ops(c);
    else if (!strcmp(argv[1], "mismatch")) rc = mode_mismatch(c);
    else if (argc >= 4 && (!strcmp(argv[1], "kill") || !strcmp(argv[1], "stall")))
        rc = mode_fail(c, !strcmp(argv[1], "kill"), atoi(argv[2]), atoi(argv[3]));
    else { fprintf(stderr, "mpi_ranks: unknown mode '%s'\n", argv[1]); rc = 2; }
    zero_comm_destroy(c);   // after a failure: no MPI_Finalize (it would wait for the missing rank)
    return rc;
}
