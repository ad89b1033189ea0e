/* tests/test_tiling.c - memory-centric tiling: the SGEMM, the tiled linear against
   one tile (bitwise, for any tile count and world size), and a layer whose weight
   exceeds the gather budget training with at most two tiles resident. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <math.h>

#define IN 37
#define OUT 53
#define BATCH 12
#define STEPS 8

/* a context that only serves zero_sgemm: one tiled linear, built */
static zero_ctx *gemm_ctx(void) {
    zero_desc d;
    zero_tiled_linear_desc td;
    zero_tiled_linear tl;
    zero_ctx *z = NULL;
    memset(&d, 0, sizeof d);
    d.param_dtype = ZERO_F32;
    memset(&td, 0, sizeof td);
    td.name = "l"; td.in_features = 4; td.out_features = 4;
    if (zero_create(&z, &d) != ZERO_OK || zero_tiled_linear_add(z, &td, &tl) != ZERO_OK || zero_build(z) != ZERO_OK) {
        zero_destroy(z);
        return NULL;
    }
    return z;
}

/* the SGEMM against a double-precision reference, every transpose, odd sizes and
   leading dimensions, both overwriting C and accumulating onto it */
static void sgemm_matches_reference(void) {
    static const int64_t sizes[][3] = { { 1, 1, 1 }, { 5, 17, 3 }, { 70, 530, 300 }, { 129, 33, 513 }, { 4, 16, 256 } };
    zero_ctx *z = gemm_ctx();
    uint64_t seed = 7;
    int si, ta, tb, acc;
    if (!CHECK(z != NULL, "no context: %s", zero_last_error(NULL))) return;
    for (si = 0; si < 5; si++)
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++)
                for (acc = 0; acc < 2; acc++) {
                    int64_t M = sizes[si][0], N = sizes[si][1], K = sizes[si][2], i, j, k;
                    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 5;
                    float *A = (float *)malloc(sizeof(float) * (size_t)((ta ? K : M) * lda));
                    float *B = (float *)malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb));
                    float *C = (float *)malloc(sizeof(float) * (size_t)(M * ldc));
                    float *C0 = (float *)malloc(sizeof(float) * (size_t)(M * ldc));
                    double worst = 0;
                    for (i = 0; i < (ta ? K : M) * lda; i++) A[i] = fx_frand(&seed);
                    for (i = 0; i < (tb ? N : K) * ldb; i++) B[i] = fx_frand(&seed);
                    for (i = 0; i < M * ldc; i++) C[i] = C0[i] = fx_frand(&seed);
                    zero_sgemm(z, ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
                    for (i = 0; i < M; i++)
                        for (j = 0; j < N; j++) {
                            double ref = acc ? C0[i * ldc + j] : 0.0;
                            for (k = 0; k < K; k++)
                                ref += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                                       (tb ? B[j * ldb + k] : B[k * ldb + j]);
                            if (fabs(C[i * ldc + j] - ref) > worst) worst = fabs(C[i * ldc + j] - ref);
                        }
                    for (i = 0; i < M; i++)          /* the padding between rows is untouched */
                        for (j = N; j < ldc; j++) CHECK(C[i * ldc + j] == C0[i * ldc + j], "wrote past N");
                    /* fp32 sums of K products of values in [-1, 1): at most about K * 2^-24 each */
                    CHECK(worst <= (double)(K + 1) * 0x1p-23, "M%lld N%lld K%lld ta%d tb%d acc%d: error %g",
                          (long long)M, (long long)N, (long long)K, ta, tb, acc, worst);
                    free(A); free(B); free(C); free(C0);
                }
    zero_destroy(z);
}

/* Splitting K across calls (accumulate) gives the same bits as one call: a property
   of zero.h's own SGEMM, not promised under ZERO_CBLAS. */
#ifndef ZERO_CBLAS
static void sgemm_k_split_bitwise(void) {
    zero_ctx *z = gemm_ctx();
    enum { M = 23, N = 41, K = 700 };
    static float A[M * K], B[K * N], C1[M * N], C2[M * N];
    uint64_t seed = 3;
    int i;
    if (!CHECK(z != NULL, "no context")) return;
    for (i = 0; i < M * K; i++) A[i] = fx_frand(&seed);
    for (i = 0; i < K * N; i++) B[i] = fx_frand(&seed);
    zero_sgemm(z, 0, 0, M, N, K, A, K, B, N, 0, C1, N);
    zero_sgemm(z, 0, 0, M, N, 300, A, K, B, N, 0, C2, N);
    zero_sgemm(z, 0, 0, M, N, 257, A + 300, K, B + 300 * N, N, 1, C2, N);
    zero_sgemm(z, 0, 0, M, N, K - 557, A + 557, K, B + 557 * N, N, 1, C2, N);
    CHECK(memcmp(C1, C2, sizeof C1) == 0, "K split changed the result");
    zero_destroy(z);
}
#endif

/* Every SIMD path of the micro-kernel gives the portable path's bits (ZERO_SIMD caps
   the path a context picks at zero_create). */
#ifndef ZERO_CBLAS
static void sgemm_paths_bitwise(void) {
    enum { M = 37, N = 45, K = 300 };
    static float A[K * M], B[N * K], C[3][M * N];
    static const char *paths[3] = { "scalar", "avx2", "avx512" };
    uint64_t seed = 11;
    int i, p;
    for (i = 0; i < K * M; i++) A[i] = fx_frand(&seed);
    for (i = 0; i < N * K; i++) B[i] = fx_frand(&seed);
    for (p = 0; p < 3; p++) {
        zero_ctx *z;
        setenv("ZERO_SIMD", paths[p], 1);
        z = gemm_ctx();
        unsetenv("ZERO_SIMD");
        if (!CHECK(z != NULL, "no context")) return;
        zero_sgemm(z, 1, 1, M, N, K, A, M, B, K, 0, C[p], N);
        zero_destroy(z);
        if (p) CHECK(memcmp(C[0], C[p], sizeof C[0]) == 0, "path %s differs from scalar", paths[p]);
    }
}
#endif

typedef struct job {
    int stage, world, tiles, steps;
    zero_dtype dtype;
    int64_t max_live_bytes, bucket_bytes, tile_bytes, in, out;
    float W[64 * 1024], b[64];      /* trained, gathered (rank 0); out <= 64, in <= 1024 */
    zero_stats st;
    int tiles_used;
} job;

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    job *j = (job *)user;
    zero_desc d;
    zero_tiled_linear_desc td;
    zero_tiled_linear tl;
    zero_ctx *z = NULL;
    zero_result r;
    int64_t in = j->in, out = j->out, per = BATCH / j->world, i, k;
    float *w0 = (float *)malloc(sizeof(float) * (size_t)(in * out)), b0[64];
    float *x = (float *)malloc(sizeof(float) * (size_t)(per * in)), *y = (float *)malloc(sizeof(float) * (size_t)(per * out));
    float *dx = (float *)malloc(sizeof(float) * (size_t)(per * in)), *all = NULL;
    uint64_t seed = 99;
    int step;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = j->stage;
    d.param_dtype = j->dtype;
    d.optim.lr = 0.01;
    d.optim.weight_decay = 0.1;
    d.max_live_bytes = j->max_live_bytes;
    d.bucket_bytes = j->bucket_bytes;
    d.timeout_ms = 10000;
    memset(&td, 0, sizeof td);
    td.name = "proj"; td.in_features = in; td.out_features = out; td.bias = 1;
    td.tiles = j->tiles; td.tile_bytes = j->tile_bytes;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    if ((r = zero_tiled_linear_add(z, &td, &tl)) != ZERO_OK) goto done;
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    if (rank == 0) j->tiles_used = zero_tiled_linear_tiles(z, tl);
    for (i = 0; i < in * out; i++) w0[i] = fx_frand(&seed) / sqrtf((float)in);
    for (i = 0; i < out; i++) b0[i] = fx_frand(&seed) * 0.1f;
    if ((r = zero_tiled_linear_set_f32(z, tl, w0, b0)) != ZERO_OK) goto done;
    for (step = 0; step < j->steps; step++) {
        uint64_t ds = 1000 + (uint64_t)step * 7919 + (uint64_t)rank * 104729;
        for (i = 0; i < per * in; i++) x[i] = fx_frand(&ds);
        if ((r = zero_tiled_linear_forward(z, tl, x, per, y)) != ZERO_OK) goto done;
        for (i = 0; i < per; i++)                        /* d(mean 0.5 (y - sin(i+k))^2) */
            for (k = 0; k < out; k++)
                y[i * out + k] = (y[i * out + k] - sinf((float)(i + k))) / (float)per * zero_loss_scale(z);
        if ((r = zero_tiled_linear_backward(z, tl, x, y, per, dx)) != ZERO_OK) goto done;
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    all = (float *)malloc(sizeof(float) * (size_t)(in * out + out));
    if ((r = zero_gather_params_f32(z, all)) != ZERO_OK) goto done;
    if (rank == 0) {                                     /* tiles' (w, b) pairs back into W and b */
        int64_t off = 0;
        int t, T = j->tiles_used;
        for (t = 0; t < T; t++) {
            int64_t r0 = (int64_t)t * out / T, n = (int64_t)(t + 1) * out / T - r0;
            memcpy(j->W + r0 * in, all + off, sizeof(float) * (size_t)(n * in));
            memcpy(j->b + r0, all + off + n * in, sizeof(float) * (size_t)n);
            off += n * in + n;
        }
        zero_stats_get(z, &j->st);
    }
done:
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    free(w0); free(x); free(y); free(dx); free(all);
    return r;
}

static job ref, got;

static int train(job *j) {
    zero_result r = zero_run_local(j->world, rank_main, j);
    return CHECK(r == ZERO_OK, "stage %d world %d tiles %d: %s", j->stage, j->world, j->tiles, zero_result_str(r));
}

/* any tile count, including ones that do not divide out_features: the bits of one tile */
static void tiles_bitwise(int stage, int world, zero_dtype dt) {
    static const int counts[] = { 2, 3, 7, OUT };
    int c;
    memset(&ref, 0, sizeof ref);
    ref.stage = stage; ref.world = world; ref.tiles = 1; ref.steps = STEPS; ref.dtype = dt; ref.in = IN; ref.out = OUT;
    if (!train(&ref)) return;
    for (c = 0; c < 4; c++) {
        got = ref;
        got.tiles = counts[c];
        memset(got.W, 0, sizeof got.W);
        if (!train(&got)) return;
        CHECK(got.tiles_used == counts[c], "tiles %d used %d", counts[c], got.tiles_used);
#ifndef ZERO_CBLAS
        CHECK(memcmp(ref.W, got.W, sizeof(float) * IN * OUT) == 0 && memcmp(ref.b, got.b, sizeof ref.b) == 0,
              "%d tiles differ from one tile", counts[c]);
#else
        {   /* a CBLAS may block K differently per call: equal to fp32 rounding over 8 steps */
            double num = 0, den = 0;
            int i;
            for (i = 0; i < IN * OUT; i++) {
                num += ((double)ref.W[i] - got.W[i]) * ((double)ref.W[i] - got.W[i]);
                den += (double)ref.W[i] * ref.W[i];
            }
            CHECK(sqrt(num) <= 1e-5 * sqrt(den), "%d tiles vs one tile: rel %g", counts[c], sqrt(num / den));
        }
#endif
    }
    {   /* and it trained: the weights moved */
        uint64_t seed = 99;
        double moved = 0;
        int i;
        for (i = 0; i < IN * OUT; i++) moved += fabs(ref.W[i] - fx_frand(&seed) / sqrtf((float)IN));
        CHECK(moved > 1e-3, "weights did not move");
    }
}

/* A weight 4x the gather budget trains with at most two tiles gathered and at most
   two tiles of gradient staged (stage 3, bucket of one tile). */
static void weight_over_budget(void) {
    int64_t tile_w = 16 * 1024 * 2;                      /* bf16 bytes of a tile of 16 rows x 1024 */
    memset(&got, 0, sizeof got);
    got.stage = 3; got.world = 2; got.steps = 4; got.dtype = ZERO_BF16; got.in = 1024; got.out = 64;
    got.tile_bytes = tile_w;                             /* -> 4 tiles */
    got.max_live_bytes = tile_w + 256;                   /* one prefetched tile; the weight is 4 tiles */
    got.bucket_bytes = tile_w;
    if (!train(&got)) return;
    CHECK(got.tiles_used == 4, "tile_bytes gave %d tiles, want 4", got.tiles_used);
    CHECK(got.st.peak_gathered_bytes <= 2 * (tile_w + 256), "peak gathered %lld > two tiles (%lld)",
          (long long)got.st.peak_gathered_bytes, (long long)(2 * (tile_w + 256)));
    CHECK(got.st.peak_gathered_bytes > tile_w, "never had a tile gathered?");
    CHECK(got.st.peak_staging_bytes <= 2 * (tile_w + 256), "peak gradient staging %lld > two tiles",
          (long long)got.st.peak_staging_bytes);
    CHECK(got.st.steps == 4, "%lld steps", (long long)got.st.steps);
}

static void bad_tiled_input(void) {
    zero_desc d;
    zero_tiled_linear_desc td;
    zero_tiled_linear tl, bogus, good;
    zero_ctx *z = NULL;
    float x[4] = { 0 }, y[4];
    memset(&d, 0, sizeof d);
    memset(&td, 0, sizeof td);
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "create")) return;
    td.name = "t"; td.in_features = 0; td.out_features = 4;
    CHECK(zero_tiled_linear_add(z, &td, &tl) == ZERO_ERR_INVALID_SIZE, "in_features 0 accepted");
    td.in_features = 4; td.tiles = -1;
    CHECK(zero_tiled_linear_add(z, &td, &tl) == ZERO_ERR_INVALID_SIZE, "tiles -1 accepted");
    td.tiles = 2;
    CHECK(zero_tiled_linear_forward(z, tl, x, 1, y) == ZERO_ERR_NOT_BUILT, "forward before build");
    CHECK(zero_tiled_linear_add(z, &td, &tl) == ZERO_OK, "add: %s", zero_last_error(z));
    CHECK(zero_build(z) == ZERO_OK, "build: %s", zero_last_error(z));
    good = tl;
    bogus.id = tl.id + 1;
    CHECK(zero_tiled_linear_forward(z, bogus, x, 1, y) == ZERO_ERR_INVALID_HANDLE, "bogus handle accepted");
    CHECK(zero_tiled_linear_add(z, &td, &tl) == ZERO_ERR_ALREADY_BUILT, "add after build accepted");
    CHECK(zero_tiled_linear_set_f32(z, good, NULL, x) == ZERO_ERR_INVALID_ARG, "set_f32 took w = NULL");
    CHECK(strstr(zero_last_error(z), "w is NULL") != NULL, "set_f32(w = NULL): %s", zero_last_error(z));
    CHECK(zero_tiled_linear_forward(z, good, NULL, 1, y) == ZERO_ERR_INVALID_ARG, "forward took x = NULL");
    CHECK(zero_tiled_linear_backward(z, good, x, NULL, 1, y) == ZERO_ERR_INVALID_ARG, "backward took dy = NULL");
    zero_destroy(z);
}

int main(void) {
    test_init();
    TEST_RUN(sgemm_matches_reference);
#ifndef ZERO_CBLAS
    TEST_RUN(sgemm_k_split_bitwise);
    TEST_RUN(sgemm_paths_bitwise);
#endif
    test_begin("tiles_bitwise_stage3_world1_f32"); tiles_bitwise(3, 1, ZERO_F32); test_end();
    test_begin("tiles_bitwise_stage3_world2_bf16"); tiles_bitwise(3, 2, ZERO_BF16); test_end();
    test_begin("tiles_bitwise_stage3_world3_f32"); tiles_bitwise(3, 3, ZERO_F32); test_end();
    test_begin("tiles_bitwise_stage0_world2_f32"); tiles_bitwise(0, 2, ZERO_F32); test_end();
    TEST_RUN(weight_over_budget);
    TEST_RUN(bad_tiled_input);
    return test_summary();
}
