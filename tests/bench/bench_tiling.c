/* bench_tiling - throughput of the tiled linear at tiles of 1024 output columns
   against the same op untiled (one tile), in the same run, stage 3 on one rank.

   Both variants run forward + backward of y = x W^T + b (W: 4096 x 1024, batch
   256) through the library: fetch, GEMMs, gradient staging and reduce-scatter per
   tile. Rounds alternate between the variants; the median round time of each is
   compared. Prints ratio = tiled throughput / untiled throughput (target >= 0.9). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"   // defines: the library, zero_tiled_linear_*

#include <stdio.h>        // defines: printf
#include <stdlib.h>       // defines: malloc, qsort, atoi
#include "bench.h"        // defines: bench_now_ms, bench_median

#define IN 1024
#define OUT 4096
#define ROWS 256
#define ROUNDS 7

typedef struct variant { zero_ctx *z; zero_tiled_linear tl; double ms[ROUNDS]; } variant;


static int setup(variant *v, int tiles) {
    zero_desc d = { 0 };
    zero_tiled_linear_desc td = { 0 };
    float *w = (float *)calloc((size_t)IN * OUT, sizeof(float));
    int i;
    d.stage = 3;
    d.param_dtype = ZERO_F32;
    d.accum_steps = ROUNDS + 1;                     /* backward rounds accumulate; no optimizer in the timing */
    d.bucket_bytes = (int64_t)IN * OUT * 4 / (tiles > 1 ? tiles : 1);
    td.name = "proj"; td.in_features = IN; td.out_features = OUT; td.bias = 1; td.tiles = tiles;
    if (zero_create(&v->z, &d) != ZERO_OK || zero_tiled_linear_add(v->z, &td, &v->tl) != ZERO_OK ||
        zero_build(v->z) != ZERO_OK) {
        fprintf(stderr, "setup: %s\n", zero_last_error(v->z));
        return 0;
    }
    for (i = 0; i < IN * OUT; i++) w[i] = (float)((i * 37) % 101 - 50) * 1e-3f;
    zero_tiled_linear_set_f32(v->z, v->tl, w, NULL);
    free(w);
    return 1;
}

static double round_ms(variant *v, const float *x, float *y, float *dx) {
    double t0 = bench_now_ms();
    if (zero_tiled_linear_forward(v->z, v->tl, x, ROWS, y) != ZERO_OK ||
        zero_tiled_linear_backward(v->z, v->tl, x, y, ROWS, dx) != ZERO_OK) {
        fprintf(stderr, "round: %s\n", zero_last_error(v->z));
        exit(1);
    }
    return bench_now_ms() - t0;
}

int main(void) {
    variant tiled, untiled;
    float *x = (float *)malloc(sizeof(float) * ROWS * IN), *y = (float *)malloc(sizeof(float) * ROWS * OUT);
    float *dx = (float *)malloc(sizeof(float) * ROWS * IN);
    double gflop = 3.0 * 2.0 * ROWS * IN * OUT / 1e9, mt, mu;
    int i;
    for (i = 0; i < ROWS * IN; i++) x[i] = (float)((i * 13) % 29 - 14) * 0.01f;
    if (!setup(&tiled, OUT / 1024) || !setup(&untiled, 1)) return 1;
    round_ms(&tiled, x, y, dx);                     /* warm-up (and schedule recording) */
    round_ms(&untiled, x, y, dx);
    for (i = 0; i < ROUNDS; i++) {
        tiled.ms[i] = round_ms(&tiled, x, y, dx);
        untiled.ms[i] = round_ms(&untiled, x, y, dx);
    }
    mt = bench_median(tiled.ms, ROUNDS);
    mu = bench_median(untiled.ms, ROUNDS);
    printf("tiled linear %dx%d, batch %d, forward+backward, stage 3, one rank\n", OUT, IN, ROWS);
    printf("untiled (1 tile):      %8.1f ms  %6.2f GFLOP/s\n", mu, gflop / (mu / 1e3));
    printf("tiled (%d x 1024 cols): %8.1f ms  %6.2f GFLOP/s\n", OUT / 1024, mt, gflop / (mt / 1e3));
    printf("ratio=%.3f\n", mu / mt);
    zero_destroy(tiled.z);
    zero_destroy(untiled.z);
    free(x); free(y); free(dx);
    return 0;
}
