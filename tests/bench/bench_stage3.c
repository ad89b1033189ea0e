/* bench_stage3 - with 4 local ranks on the CPU device, the step time of stage 3 with
   prefetch against stage 0 for the same model, and against stage 3 without prefetch,
   all in one run, on the CPU device as it is (ranks are threads, collectives are
   copies). Options --gbps G and --latency-us U put a modelled link under the
   collectives (zero_group_set_link: each all-gather and reduce-scatter then sleeps
   for latency + bytes / bandwidth on the comm stream, as a network transfer takes
   time without taking CPU), to see how overlap fares on a slower interconnect.
   Stage 3 moves 1.5x stage 0's bytes, so on a slow enough link it falls behind.

   The model: 8 layers of 768 -> 768 (bf16 params, AdamW), each a one-tile linear,
   ReLU between them, a global batch of 128 split over the ranks. Steps alternate
   between the three configurations (a step of each per round); the median step time
   of each is compared. Prints ratio = stage 3 with prefetch / stage 0 (target <= 1.15)
   and, before it, prefetch_speedup = stage 3 without prefetch / with (target > 1). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"   // defines: the library

#include <stdio.h>        // defines: printf
#include <string.h>       // defines: strcmp
#include <stdlib.h>       // defines: malloc, qsort
#include "bench.h"        // defines: bench_now_ms, bench_median

#define RANKS 4
#define LAYERS 8
#define DIM 768
#define BATCH 128
#define ROUNDS 6
#define CONFIGS 3

typedef struct rank_state {
    zero_ctx *z[CONFIGS];
    zero_tiled_linear l[CONFIGS][LAYERS];
} rank_state;

static double times[CONFIGS][ROUNDS];
static zero_group *groups[CONFIGS];  /* a group per config (one context per endpoint) */
static const char *names[CONFIGS] = { "stage 0", "stage 3, prefetch", "stage 3, no prefetch" };


static zero_result one_step(zero_ctx *z, zero_tiled_linear *l, float **act, float *g, int per) {
    zero_result r;
    int i, k;
    for (i = 0; i < LAYERS; i++) {
        if ((r = zero_tiled_linear_forward(z, l[i], act[i], per, act[i + 1])) != ZERO_OK) return r;
        for (k = 0; k < per * DIM; k++) if (act[i + 1][k] < 0) act[i + 1][k] = 0;
    }
    for (k = 0; k < per * DIM; k++) g[k] = act[LAYERS][k] * (1.0f / BATCH);
    for (i = LAYERS - 1; i >= 0; i--) {
        for (k = 0; k < per * DIM; k++) if (act[i + 1][k] <= 0) g[k] = 0;
        if ((r = zero_tiled_linear_backward(z, l[i], act[i], g, per, i ? g : NULL)) != ZERO_OK) return r;
    }
    r = zero_step(z);
    return r == ZERO_STEP_SKIPPED ? ZERO_OK : r;
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    rank_state s = { { 0 }, { { { 0 } } } };
    zero_comm *comms[CONFIGS] = { 0 };
    int per = BATCH / RANKS, c, i, k, round;
    float *act[LAYERS + 1], *g = (float *)malloc(sizeof(float) * per * DIM);
    float *w = (float *)malloc(sizeof(float) * DIM * DIM);
    zero_result r = ZERO_OK;
    (void)user;
    for (i = 0; i <= LAYERS; i++) act[i] = (float *)malloc(sizeof(float) * per * DIM);
    for (k = 0; k < per * DIM; k++) act[0][k] = (float)((k * 7 + rank) % 23 - 11) * 0.05f;
    for (k = 0; k < DIM * DIM; k++) w[k] = (float)((k * 31) % 97 - 48) * (1.0f / 48 / 28);
    for (c = 0; c < CONFIGS && r == ZERO_OK; c++) {
        zero_desc d = { 0 };
        if (c == 0) comms[c] = comm;       /* groups[0]'s endpoint, from zero_run_group */
        else if ((r = zero_comm_local(&comms[c], groups[c], rank)) != ZERO_OK) break;
        d.comm = comms[c];
        d.stage = c == 0 ? 0 : 3;
        d.prefetch_bytes = c == 2 ? -1 : 0;
        d.bucket_bytes = (int64_t)DIM * DIM * 2;
        if ((r = zero_create(&s.z[c], &d)) != ZERO_OK) break;
        for (i = 0; i < LAYERS && r == ZERO_OK; i++) {
            zero_tiled_linear_desc td = { 0 };
            char name[16];
            snprintf(name, sizeof name, "l%d", i);
            td.name = name; td.in_features = DIM; td.out_features = DIM; td.bias = 1;
            r = zero_tiled_linear_add(s.z[c], &td, &s.l[c][i]);
        }
        if (r == ZERO_OK) r = zero_build(s.z[c]);
        for (i = 0; i < LAYERS && r == ZERO_OK; i++) r = zero_tiled_linear_set_f32(s.z[c], s.l[c][i], w, NULL);
        if (r == ZERO_OK) r = one_step(s.z[c], s.l[c], act, g, per);       /* warm-up: records the schedule */
    }
    for (round = 0; round < ROUNDS && r == ZERO_OK; round++)
        for (c = 0; c < CONFIGS && r == ZERO_OK; c++) {
            double t0 = bench_now_ms();
            r = one_step(s.z[c], s.l[c], act, g, per);
            if (rank == 0) times[c][round] = bench_now_ms() - t0;
        }
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s\n", rank, zero_last_error(NULL));
    if (rank == 0 && r == ZERO_OK) {
        zero_stats st;
        zero_stats_get(s.z[1], &st);
        printf("stage 3 prefetch: %lld hits, %lld misses, waited %.1f ms in fetches over %d steps\n",
               (long long)st.prefetch_hits, (long long)st.prefetch_misses, st.fetch_wait_ms, ROUNDS);
        zero_stats_get(s.z[2], &st);
        printf("stage 3 on demand: waited %.1f ms in fetches over %d steps\n", st.fetch_wait_ms, ROUNDS);
    }
    for (c = 0; c < CONFIGS; c++) {
        zero_destroy(s.z[c]);
        if (c) zero_comm_destroy(comms[c]);
    }
    for (i = 0; i <= LAYERS; i++) free(act[i]);
    free(g); free(w);
    return r;
}

static double link_us = 0, link_gbps = 0;     /* 0, 0: no modelled link */

int main(int argc, char **argv) {
    double med[CONFIGS];
    zero_result r;
    int c, i;
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gbps")) link_gbps = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--latency-us")) link_us = atof(argv[i + 1]);
        else { fprintf(stderr, "usage: bench_stage3 [--gbps G] [--latency-us U]\n"); return 2; }
    }
    for (c = 0; c < CONFIGS; c++) {
        zero_group_create(&groups[c], RANKS);
        zero_group_set_link(groups[c], link_us, link_gbps);
    }
    if (link_us > 0 || link_gbps > 0)
        printf("4 ranks, %d layers of %dx%d, batch %d, modelled link: %.0f us + bytes / %.2f GB/s\n",
               LAYERS, DIM, DIM, BATCH, link_us, link_gbps);
    else
        printf("4 ranks, %d layers of %dx%d, batch %d, threads on the CPU device (no modelled link)\n",
               LAYERS, DIM, DIM, BATCH);
    if ((r = zero_run_group(groups[0], rank_main, NULL)) != ZERO_OK) {
        fprintf(stderr, "%s: %s\n", zero_result_str(r), zero_last_error(NULL));
        return 1;
    }
    for (c = 0; c < CONFIGS; c++) zero_group_destroy(groups[c]);
    for (c = 0; c < CONFIGS; c++) {
        med[c] = bench_median(times[c], ROUNDS);
        printf("%-22s %8.1f ms/step (median of %d)\n", names[c], med[c], ROUNDS);
    }
    printf("prefetch_speedup=%.3f\n", med[2] / med[1]);
    printf("ratio=%.3f\n", med[1] / med[0]);
    return 0;
}
