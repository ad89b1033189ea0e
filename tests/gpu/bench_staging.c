/* tests/gpu/bench_staging.c - how fast the CUDA device moves fp32 host values in and out
   (zero_param_set_f32, zero_gather_params_f32: converted on the host, through the pinned
   double buffer of ZERO_STAGING_BYTES) and how long the ZeRO-Offload step takes (gradients
   down, the CPU's pass, params up, pipelined by sub-group), on one GPU, world of one.

   One param of N elements (16M; ZERO_BENCH_N overrides), f32 and bf16 params. Against them
   a cudaMemcpyAsync of the same fp32 bytes from and to pinned memory (the link's ceiling:
   pinned_h2d_GBps / pinned_d2h_GBps). Each figure is the best of REPS after a warm-up, in
   GB/s of fp32 host bytes (4 N / time). Prints one `<name>_GBps=<x>` line per figure (make
   test-gpu shows them), `offload_step_bf16_ms=<x>`, and a PASS line per case when the values
   set came back bit for bit (as set, or as their conversion to the dtype); FAIL otherwise. Without a GPU a
   SKIP line, exit 0 (tests/gpu/gpu.h). On the test double (build/mock/gpu_bench_staging,
   small N) the figures mean nothing: tests/test_cuda_mock.sh runs it as a smoke check. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include <cuda_runtime_api.h>   // defines: cudaMalloc, cudaHostAlloc, cudaMemcpyAsync
#include <stdio.h>              // defines: printf
#include <stdlib.h>             // defines: getenv, strtoll, malloc
#include <string.h>             // defines: memcmp
#include "gpu.h"
#include "../bench/bench.h"

#define REPS 5

static double gbps(int64_t bytes, double ms) { return ms > 0 ? (double)bytes / (ms * 1e6) : 0.0; }

static int link_ceiling(int64_t n) {
    void *d = NULL, *h = NULL;
    double t[REPS];
    int i, dir, bad = 0;
    if (cudaMalloc(&d, (size_t)n * 4) != cudaSuccess || cudaHostAlloc(&h, (size_t)n * 4, cudaHostAllocDefault) != cudaSuccess) {
        printf("FAIL bench_staging: could not allocate %lld bytes for the pinned baseline\n", (long long)n * 4);
        bad = 1;
    }
    for (dir = 0; dir < 2 && !bad; dir++) {
        for (i = -1; i < REPS; i++) {
            double t0 = bench_now_ms();
            if ((dir ? cudaMemcpyAsync(h, d, (size_t)n * 4, cudaMemcpyDeviceToHost, 0)
                     : cudaMemcpyAsync(d, h, (size_t)n * 4, cudaMemcpyHostToDevice, 0)) != cudaSuccess ||
                cudaStreamSynchronize(0) != cudaSuccess) {
                printf("FAIL bench_staging: the pinned baseline copy failed\n");
                bad = 1;
                break;
            }
            if (i >= 0) t[i] = bench_now_ms() - t0;
        }
        if (!bad) {
            double best = t[0];
            for (i = 1; i < REPS; i++) best = t[i] < best ? t[i] : best;
            printf("%s_GBps=%.2f\n", dir ? "pinned_d2h" : "pinned_h2d", gbps(n * 4, best));
        }
    }
    if (d) cudaFree(d);
    if (h) cudaFreeHost(h);
    return bad;
}

/* set / gather of one param of n elements in dtype dt; the offload step when offload */
static int one(int64_t n, zero_dtype dt, int offload, float *src, float *back) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_module_desc md;
    zero_param_desc pd;
    zero_param p;
    zero_result r;
    double ts[REPS], tg[REPS], bs = 1e30, bg = 1e30;
    int i, bad = 0;
    const char *dn = dt == ZERO_F32 ? "f32" : "bf16";
    int64_t k;
    memset(&d, 0, sizeof d);
    d.device = ZERO_DEVICE_CUDA;
    d.param_dtype = dt;
    d.optim.type = ZERO_OPTIM_ADAMW;
    d.optim.lr = 1e-3;
    d.offload_optimizer = offload ? ZERO_OFFLOAD_HOST : ZERO_OFFLOAD_NONE;
    memset(&md, 0, sizeof md);
    md.name = "m";
    memset(&pd, 0, sizeof pd);
    pd.name = "w";
    pd.ndim = 1;
    pd.shape[0] = n;
    if ((r = zero_create(&z, &d)) != ZERO_OK || (r = zero_add_module(z, &md, &m)) != ZERO_OK ||
        (r = zero_add_param(z, m, &pd, &p)) != ZERO_OK || (r = zero_build(z)) != ZERO_OK)
        goto done;
    for (i = -1; i < REPS; i++) {
        double t0 = bench_now_ms(), t1;
        if ((r = zero_param_set_f32(z, p, src)) != ZERO_OK) goto done;
        t1 = bench_now_ms();
        if ((r = zero_gather_params_f32(z, back)) != ZERO_OK) goto done;
        if (i >= 0) { ts[i] = t1 - t0; tg[i] = bench_now_ms() - t1; }
    }
    for (i = 0; i < REPS; i++) { bs = ts[i] < bs ? ts[i] : bs; bg = tg[i] < bg ? tg[i] : bg; }
    if (!offload) {
        printf("set_%s_GBps=%.2f\n", dn, gbps(n * 4, bs));
        printf("gather_%s_GBps=%.2f\n", dn, gbps(n * 4, bg));
    }
    /* the values set come back: as set (the fp32 master holds them) or as the host's conversion
       to dt gives them */
    for (k = 0; k < n && !bad; k += 4096) {
        int64_t c = n - k < 4096 ? n - k : 4096;
        static unsigned char raw[4096 * 4];
        static float want[4096];
        zero_from_f32(raw, dt, src + k, c);
        zero_to_f32(want, raw, dt, c);
        if (memcmp(want, back + k, (size_t)c * 4) != 0 && memcmp(src + k, back + k, (size_t)c * 4) != 0) {
            printf("FAIL bench_staging_%s%s: the values set differ after the gather near element %lld\n", dn,
                   offload ? "_offload" : "", (long long)k);
            bad = 1;
        }
    }
    if (offload) {
        double t[REPS], best = 1e30;
        for (i = -1; i < REPS; i++) {
            double t0;
            if ((r = zero_fetch(z, m)) != ZERO_OK || (r = zero_release(z, m)) != ZERO_OK ||
                (r = zero_grads_ready(z, m)) != ZERO_OK)
                goto done;
            t0 = bench_now_ms();
            if ((r = zero_step(z)) != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
            if (i >= 0) t[i] = bench_now_ms() - t0;
        }
        for (i = 0; i < REPS; i++) best = t[i] < best ? t[i] : best;
        printf("offload_step_%s_ms=%.3f\n", dn, best);
        r = ZERO_OK;
    }
    if (!bad) printf("PASS bench_staging_%s%s\n", dn, offload ? "_offload" : "");
done:
    if (r != ZERO_OK) {
        printf("FAIL bench_staging_%s%s: %s (%s)\n", dn, offload ? "_offload" : "", zero_result_str(r), zero_last_error(z));
        bad = 1;
    }
    zero_destroy(z);
    return bad;
}

int main(void) {
    const char *e = getenv("ZERO_BENCH_N");
    int64_t n = e && *e ? strtoll(e, NULL, 10) : (int64_t)1 << 24, k;
    float *src, *back;
    int ndev, bad = 0;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    if ((ndev = gpu_count("gpu_bench_staging")) <= 0) return ndev < 0;
    if (n < 1) n = 1;
    src = (float *)malloc((size_t)n * 4);
    back = (float *)malloc((size_t)n * 4);
    if (!src || !back) {
        printf("FAIL bench_staging: out of host memory for %lld elements\n", (long long)n);
        return 1;
    }
    for (k = 0; k < n; k++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        src[k] = (float)(s >> 40) / 16777216.0f - 0.5f;
    }
    printf("n=%lld stage_bytes=%lld\n", (long long)n, (long long)ZERO_STAGING_BYTES);
    bad |= link_ceiling(n);
    bad |= one(n, ZERO_F32, 0, src, back);
    bad |= one(n, ZERO_BF16, 0, src, back);
    bad |= one(n, ZERO_BF16, 1, src, back);
    free(src);
    free(back);
    return bad;
}
