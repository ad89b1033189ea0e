/* tests/bench/bench_comm.c - reduce-scatter and all-gather bus bandwidth of a zero.h
   communicator against memcpy bandwidth, measured in the same run.

   Bus bandwidth as nccl-tests defines it: S = the bytes of one rank's full buffer (the
   reduce-scatter's input, the all-gather's output), algbw = S / time, busbw = algbw *
   (N-1)/N, the traffic each rank's link carries in a ring. memcpy bandwidth = bytes
   copied per second by one thread (a copy of S bytes, same buffers size). The last line
   is ratio=<best busbw / memcpy bandwidth>.

       build/bench_comm [--bytes S] [--ranks N] [--iters I]       local comm: N threads
       mpirun -np N build/mpi/bench_comm [--bytes S] [--iters I]  MPI comm (mpicc build)
   defaults: S = 32 MiB, N = 4, I = 10; each figure is the best of 3 timed rounds
   (a shared or virtual machine is noisy). Rank 0 prints. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#define bench_now_ms zero__now_ms     /* the library's monotonic clock, in ms */

#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: malloc, free, strtoll
#include <string.h>   // defines: memcpy, memset, strcmp

typedef struct {
    int64_t bytes;            /* S */
    int iters;
    double rs_ms, ag_ms;      /* best per-op time, written by rank 0 */
    zero_result err;
} bench_cfg;

static double time_op(zero_comm *c, int op, float *in, float *out, int64_t count, int iters, zero_result *e) {
    int to = 600000, it, N = c->size;
    double t0, best = 1e30;
    for (int round = 0; round < 4; round++) {       /* round 0 warms up */
        if ((*e = c->vt->barrier(c, to)) != ZERO_OK) return 0;
        t0 = bench_now_ms();
        for (it = 0; it < iters; it++) {
            if (op == 0) *e = c->vt->reduce_scatter(c, in, ZERO_F32, out, ZERO_F32, count / N, 0, to);
            else *e = c->vt->all_gather(c, in + (int64_t)c->rank * (count / N), in, (count / N) * 4, to);
            if (*e != ZERO_OK) return 0;
        }
        if ((*e = c->vt->barrier(c, to)) != ZERO_OK) return 0;
        if (round > 0 && (bench_now_ms() - t0) / iters < best) best = (bench_now_ms() - t0) / iters;
    }
    (void)out;
    return best;
}

static zero_result bench_rank(zero_comm *c, int rank, void *user) {
    bench_cfg *b = (bench_cfg *)user;
    int64_t count = b->bytes / 4;
    zero_result e = ZERO_OK;
    float *in = (float *)malloc((size_t)b->bytes), *out = (float *)malloc((size_t)b->bytes / (size_t)c->size + 64);
    if (!in || !out) { free(in); free(out); return ZERO_ERR_OUT_OF_MEMORY; }
    for (int64_t i = 0; i < count; i++) in[i] = (float)(i % 1000) * 1e-3f + (float)rank;
    double rs = time_op(c, 0, in, out, count, b->iters, &e);
    double ag = e == ZERO_OK ? time_op(c, 1, in, out, count, b->iters, &e) : 0;
    if (rank == 0) { b->rs_ms = rs; b->ag_ms = ag; b->err = e; }
    free(in); free(out);
    return e;
}

static double memcpy_gbps(int64_t bytes) {
    char *a = (char *)malloc((size_t)bytes), *b = (char *)malloc((size_t)bytes);
    double best = 1e30;
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, (size_t)bytes); memset(b, 2, (size_t)bytes);
    for (int r = 0; r < 6; r++) {
        double t0 = bench_now_ms();
        memcpy(r & 1 ? a : b, r & 1 ? b : a, (size_t)bytes);
        double t = bench_now_ms() - t0;
        if (r > 0 && t < best) best = t;
    }
    free(a); free(b);
    return (double)bytes / (best * 1e6);
}

int main(int argc, char **argv) {
    bench_cfg b;
    int N = 4;
    zero_comm *mpi = NULL;
    memset(&b, 0, sizeof b);
    b.bytes = 32ll << 20; b.iters = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes")) b.bytes = strtoll(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--ranks")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) b.iters = atoi(argv[i + 1]);
        else { fprintf(stderr, "bench_comm: unknown option %s\n", argv[i]); return 2; }
    }
    const char *kind = "local";
#ifdef ZERO_MPI
    if (zero_comm_from_env(&mpi, "mpi") != ZERO_OK) {
        fprintf(stderr, "bench_comm: %s (run it under mpirun)\n", zero_last_error(NULL));
        return 2;
    }
    N = zero_comm_size(mpi);
    kind = "mpi";
#endif
    if (N < 1 || b.iters < 1 || b.bytes < 4 * N) { fprintf(stderr, "bench_comm: bad options\n"); return 2; }
    b.bytes = b.bytes / (4 * N) * (4 * N);
    int rank = mpi ? zero_comm_rank(mpi) : 0;
    double mc = rank == 0 ? memcpy_gbps(b.bytes) : 0;
    zero_result r = mpi ? bench_rank(mpi, rank, &b) : zero_run_local(N, bench_rank, &b);
    if (r != ZERO_OK) {
        fprintf(stderr, "bench_comm: %s: %s\n", zero_result_str(r), mpi ? mpi->err : zero_last_error(NULL));
        zero_comm_destroy(mpi);
        return 1;
    }
    if (rank == 0) {
        double f = N > 1 ? (double)(N - 1) / N : 1.0;
        double rs_alg = (double)b.bytes / (b.rs_ms * 1e6), ag_alg = (double)b.bytes / (b.ag_ms * 1e6);
        double rs_bus = rs_alg * f, ag_bus = ag_alg * f, best = rs_bus > ag_bus ? rs_bus : ag_bus;
        printf("comm=%s ranks=%d bytes=%lld iters=%d\n", kind, N, (long long)b.bytes, b.iters);
        printf("memcpy          %8.2f GB/s\n", mc);
        printf("reduce_scatter  %8.3f ms  algbw %8.2f GB/s  busbw %8.2f GB/s\n", b.rs_ms, rs_alg, rs_bus);
        printf("all_gather      %8.3f ms  algbw %8.2f GB/s  busbw %8.2f GB/s\n", b.ag_ms, ag_alg, ag_bus);
        printf("ratio=%.3f\n", mc > 0 ? best / mc : 0.0);
    }
    zero_comm_destroy(mpi);
    return 0;
}
