/* tests/gpu/bench_adamw.c - is the fused AdamW (zero__k_opt) memory-bound? (And, for information, a
   misaligned AdamW and the gradient norm's sum of squares.)

   256M elements (ZERO_BENCH_N overrides): bf16 params, fp32 master / m / v, bf16 grads, in
   chunks of ZERO__KCHUNK: each step reads 14 bytes per element (g 2, master 4, m 4, v 4)
   and writes 14 (master, m, v, params). Against it, cudaMemcpy device to device of a
   1 GiB buffer (with ZERO_BENCH_N: 14 bytes per element, the traffic of one AdamW pass, at
   most 1 GiB), counted as 2 bytes moved per byte copied (read + write). Both are timed with
   events over 20 repetitions (ZERO_BENCH_REPS overrides) after a warm-up; the best
   repetition counts. Prints the AdamW bandwidth with other chunk sizes for information; then,
   also for information, AdamW with every array one element off its allocation (each chunk
   runs a 3-element scalar head, then the vector path: adamw_off1_GBps=) and the gradient
   norm's sum of squares (zero__k_sumsq over ZERO__NORM_BLOCK blocks, bytes read per second:
   sumsq_f32_GBps= over the master's memory, sumsq_bf16_GBps= over the grads); then with
   ZERO__KCHUNK both bandwidths, a PASS line when adamw / copy >= 0.8 (FAIL otherwise), and
   last `ratio=<x>`. A CUDA error (a launch, a copy, an event) is a FAIL line and exit 1.
   ZERO_BENCH_NO_VERDICT=1, for a run whose figures are not a GPU's (the CUDA test double:
   make build/mock/gpu_bench_adamw; ZERO_BENCH_N=300007 ZERO_BENCH_REPS=2 runs in well under
   a second there): no chunk-size sweep, the figures and `ratio=` with an INFO line instead
   of the bandwidth verdict, then "PASS bench_adamw_ran" (every kernel and copy ran without
   a CUDA error) and exit 0.
   Without a GPU it prints "SKIP gpu_bench_adamw: no GPU" and exits 0; a CUDA error other
   than "no device" is a FAIL (tests/gpu/gpu.h). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include <cuda_runtime_api.h>   // defines: cudaMalloc, cudaMemcpyAsync, cudaEvent*
#include "gpu.h"

#define REPS 20                         /* the default of ZERO_BENCH_REPS */

static int fail_cuda(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    printf("FAIL bench_adamw: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

/* fills a device array of n elements (dtype dt) with values in [lo, hi), through a host buffer */
static int fill_dev(void *d, int dt, int64_t n, float lo, float hi) {
    enum { CH = 1 << 22 };
    static float buf[CH];
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)n ^ (uint64_t)(uintptr_t)d;
    int64_t at, i;
    size_t es = dt == ZERO_F32 ? 4 : 2;
    for (at = 0; at < n; at += CH) {
        int64_t m = n - at < CH ? n - at : CH;
        for (i = 0; i < m; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            float u = (float)(s >> 40) / 16777216.0f;
            zero__st(buf, i, dt, lo + (hi - lo) * u);
        }
        if (fail_cuda(cudaMemcpy((char *)d + at * (int64_t)es, buf, (size_t)m * es, cudaMemcpyHostToDevice), "fill"))
            return 1;
    }
    return 0;
}

/* the best of reps timings (ms) of what run() enqueues (a CUDA error: -1, after a FAIL line) */
typedef int (*bench_fn)(void *arg);
static float best_ms(bench_fn run, void *arg, cudaEvent_t a, cudaEvent_t b, int reps, const char *what) {
    float best = 1e30f, ms = 0.0f;
    int r;
    if (fail_cuda((cudaError_t)run(arg), what) || fail_cuda((cudaError_t)run(arg), what) ||   /* warm-up */
        fail_cuda(cudaDeviceSynchronize(), what))
        return -1.0f;
    for (r = 0; r < reps; r++) {
        if (fail_cuda(cudaEventRecord(a, NULL), "cudaEventRecord") || fail_cuda((cudaError_t)run(arg), what) ||
            fail_cuda(cudaEventRecord(b, NULL), "cudaEventRecord") || fail_cuda(cudaEventSynchronize(b), what) ||
            fail_cuda(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime"))
            return -1.0f;
        if (ms < best) best = ms;
    }
    return best > 1e-6f ? best : 1e-6f;    /* a clock that saw no time: not a division by zero */
}

typedef struct opt_args {
    zero__optk k;
    zero__kchunk *chunks;
    int64_t nchunks;
    void *g, *p;
    float *w, *m, *v;
} opt_args;
static int run_opt(void *arg) {
    opt_args *o = (opt_args *)arg;
    return zero__k_opt(&o->k, o->chunks, o->nchunks, o->g, o->p, o->w, o->m, o->v, NULL);
}
typedef struct sumsq_args { const void *g; int adt; zero__knblk *blk; int64_t nblk; double *out; } sumsq_args;
static int run_sumsq(void *arg) {
    sumsq_args *a = (sumsq_args *)arg;
    return zero__k_sumsq(a->g, a->adt, a->blk, a->nblk, a->out, NULL);
}
typedef struct copy_args { void *dst, *src; size_t bytes; } copy_args;
/* hc[0..) = chunks of `chunk` elements over n elements (indices equal, decay on); the count */
static int64_t make_chunks(zero__kchunk *hc, int64_t n, int64_t chunk) {
    int64_t i, nc = (n + chunk - 1) / chunk;
    for (i = 0; i < nc; i++) {
        int64_t at = i * chunk;
        hc[i].grad_idx = hc[i].state_idx = hc[i].param_idx = at;
        hc[i].n = (int32_t)(n - at < chunk ? n - at : chunk);
        hc[i].decay = 1;
    }
    return nc;
}
static int run_copy(void *arg) {
    copy_args *c = (copy_args *)arg;
    return (int)cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, NULL);
}

int main(void) {
    const char *e = getenv("ZERO_BENCH_N"), *er = getenv("ZERO_BENCH_REPS"), *ev = getenv("ZERO_BENCH_NO_VERDICT");
    int64_t n = e ? strtoll(e, NULL, 10) : (int64_t)256 << 20, i, nchunks;
    const int reps = er && atoi(er) > 0 ? atoi(er) : REPS, verdict = !ev || !ev[0] || strcmp(ev, "0") == 0;
    int ndev = 0;
    opt_args o;
    copy_args c;
    zero__kchunk *hc;
    cudaEvent_t ea, eb;
    static const int64_t sizes[4] = { 4096, 8192, 32768, 65536 };
    int size;
    float ms_opt = 0, ms_copy, ms;
    double bw_opt = 0, bw_copy, ratio;
    const size_t copy_bytes = e && n > 0 && 14 * (uint64_t)n < ((uint64_t)1 << 30) ? 14 * (size_t)n : (size_t)1 << 30;
    if ((ndev = gpu_count("gpu_bench_adamw")) <= 0) return ndev < 0;
    if (n < 1) { printf("FAIL bench_adamw: ZERO_BENCH_N=%s is not a positive count\n", e); return 1; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&o, 0, sizeof o);
    o.k.opt = ZERO_OPTIM_ADAMW;
    o.k.adt = ZERO_BF16;
    o.k.pdt = ZERO_BF16;
    o.k.gscale = 1.0f / 1024.0f;
    o.k.ah.beta1 = 0.9f; o.k.ah.beta2 = 0.999f;
    o.k.ah.one_minus_beta1 = (float)(1 - 0.9); o.k.ah.one_minus_beta2 = (float)(1 - 0.999);
    o.k.ah.eps = 1e-8f; o.k.ah.decay_mul = (float)(1 - 3e-4 * 0.1);
    o.k.ah.neg_step_size = (float)(-3e-4 / (1 - 0.9 * 0.9)); o.k.ah.bc2_sqrt = (float)sqrt(1 - 0.999 * 0.999);
    nchunks = (n + 4095) / 4096;        /* room for the smallest chunk size tried */
    hc = (zero__kchunk *)malloc(sizeof *hc * (size_t)nchunks);
    if (fail_cuda(cudaMalloc((void **)&o.chunks, sizeof *hc * (size_t)nchunks), "cudaMalloc chunks") ||
        fail_cuda(cudaMalloc(&o.g, (size_t)n * 2), "cudaMalloc g") || fail_cuda(cudaMalloc(&o.p, (size_t)n * 2), "cudaMalloc p") ||
        fail_cuda(cudaMalloc((void **)&o.w, (size_t)n * 4), "cudaMalloc master") ||
        fail_cuda(cudaMalloc((void **)&o.m, (size_t)n * 4), "cudaMalloc m") ||
        fail_cuda(cudaMalloc((void **)&o.v, (size_t)n * 4), "cudaMalloc v") ||
        fail_cuda(cudaMalloc(&c.src, copy_bytes), "cudaMalloc copy src") ||
        fail_cuda(cudaMalloc(&c.dst, copy_bytes), "cudaMalloc copy dst"))
        return 1;
    c.bytes = copy_bytes;
    if (fill_dev(o.g, ZERO_BF16, n, -1.0f, 1.0f) || fill_dev(o.w, ZERO_F32, n, -0.05f, 0.05f) ||
        fill_dev(o.m, ZERO_F32, n, -1e-3f, 1e-3f) || fill_dev(o.v, ZERO_F32, n, 1e-8f, 1e-6f))
        return 1;
    if (fail_cuda(cudaMemset(c.src, 0x3c, copy_bytes), "cudaMemset") || fail_cuda(cudaEventCreate(&ea), "cudaEventCreate") ||
        fail_cuda(cudaEventCreate(&eb), "cudaEventCreate"))
        return 1;
    ms_copy = best_ms(run_copy, &c, ea, eb, reps, "cudaMemcpyAsync");
    if (ms_copy < 0) return 1;
    bw_copy = 2.0 * (double)copy_bytes / (ms_copy * 1e-3);
    /* other chunk sizes for information (the kernel takes any n; ZERO__KCHUNK is the contract), then
       ZERO__KCHUNK itself, last, for the verdict (without a verdict, ZERO__KCHUNK alone) */
    for (size = verdict ? 0 : 4; size < 5; size++) {
        int64_t chunk = size < 4 ? sizes[size] : ZERO__KCHUNK;
        if (size < 4 && chunk == ZERO__KCHUNK) continue;
        o.nchunks = make_chunks(hc, n, chunk);
        if (fail_cuda(cudaMemcpy(o.chunks, hc, sizeof *hc * (size_t)o.nchunks, cudaMemcpyHostToDevice), "chunks"))
            return 1;
        ms_opt = best_ms(run_opt, &o, ea, eb, reps, "zero__k_opt");
        if (ms_opt < 0 || fail_cuda(cudaDeviceSynchronize(), "sync") || fail_cuda(cudaGetLastError(), "launch"))
            return 1;
        bw_opt = 28.0 * (double)n / (ms_opt * 1e-3);
        if (size < 4) printf("adamw with %lld-element chunks: %.1f GB/s, %.3f of copy\n", (long long)chunk, bw_opt / 1e9,
                             bw_opt / bw_copy);
    }
    /* for information: every array one element off (each chunk runs a 3-element head, then
       the vector path), and the gradient norm's sum of squares over bf16 grads and f32 ones
       (the master's memory) in ZERO__NORM_BLOCK blocks, reading 2 or 4 bytes per element */
    if (n > 1) {
        opt_args oh = o;
        oh.g = (char *)o.g + 2; oh.p = (char *)o.p + 2; oh.w = o.w + 1; oh.m = o.m + 1; oh.v = o.v + 1;
        oh.nchunks = make_chunks(hc, n - 1, ZERO__KCHUNK);
        if (fail_cuda(cudaMemcpy(o.chunks, hc, sizeof *hc * (size_t)oh.nchunks, cudaMemcpyHostToDevice), "chunks"))
            return 1;
        ms = best_ms(run_opt, &oh, ea, eb, reps, "zero__k_opt (misaligned)");
        if (ms < 0) return 1;
        printf("adamw with every array one element off: %.1f GB/s, %.3f of copy\n", 28.0 * (double)(n - 1) / (ms * 1e-3) / 1e9,
               28.0 * (double)(n - 1) / (ms * 1e-3) / bw_copy);
        printf("adamw_off1_GBps=%.1f\n", 28.0 * (double)(n - 1) / (ms * 1e-3) / 1e9);
    }
    {
        sumsq_args sq;
        zero__knblk *hb;
        int dt;
        sq.nblk = (n + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK;
        hb = (zero__knblk *)malloc(sizeof *hb * (size_t)sq.nblk);
        if (!hb) { printf("FAIL bench_adamw: out of host memory\n"); return 1; }
        for (i = 0; i < sq.nblk; i++) {
            hb[i].idx = i * ZERO__NORM_BLOCK;
            hb[i].n = n - hb[i].idx < ZERO__NORM_BLOCK ? n - hb[i].idx : ZERO__NORM_BLOCK;
        }
        if (fail_cuda(cudaMalloc((void **)&sq.blk, sizeof *hb * (size_t)sq.nblk), "cudaMalloc norm blocks") ||
            fail_cuda(cudaMalloc((void **)&sq.out, sizeof(double) * (size_t)sq.nblk), "cudaMalloc norm sums") ||
            fail_cuda(cudaMemcpy(sq.blk, hb, sizeof *hb * (size_t)sq.nblk, cudaMemcpyHostToDevice), "norm blocks"))
            return 1;
        for (dt = ZERO_F32; dt <= ZERO_BF16; dt++) {
            const double bytes = (double)n * (dt == ZERO_F32 ? 4 : 2);
            sq.adt = dt;
            sq.g = dt == ZERO_F32 ? (const void *)o.w : o.g;
            ms = best_ms(run_sumsq, &sq, ea, eb, reps, "zero__k_sumsq");
            if (ms < 0) return 1;
            printf("sumsq over %s grads: %.1f GB/s read, %.3f of copy\n", dt == ZERO_F32 ? "f32" : "bf16",
                   bytes / (ms * 1e-3) / 1e9, bytes / (ms * 1e-3) / bw_copy);
            printf("sumsq_%s_GBps=%.1f\n", dt == ZERO_F32 ? "f32" : "bf16", bytes / (ms * 1e-3) / 1e9);
        }
        cudaFree(sq.blk); cudaFree(sq.out);
        free(hb);
    }
    if (fail_cuda(cudaDeviceSynchronize(), "sync") || fail_cuda(cudaGetLastError(), "launch")) return 1;
    ratio = bw_opt / bw_copy;
    printf("copy:  %.1f GB/s (cudaMemcpy D2D of %zu MiB, %.3f ms, read + write counted)\n", bw_copy / 1e9,
           copy_bytes >> 20, (double)ms_copy);
    printf("adamw: %.1f GB/s (%lld elements, bf16 params / grads, fp32 master / m / v, 28 B each, %.3f ms)\n",
           bw_opt / 1e9, (long long)n, (double)ms_opt);
    if (verdict)
        printf("%s bench_adamw_bandwidth: adamw / copy = %.3f (want >= 0.8)\n", ratio >= 0.8 ? "PASS" : "FAIL", ratio);
    else
        printf("INFO bench_adamw_bandwidth: adamw / copy = %.3f (no verdict: ZERO_BENCH_NO_VERDICT=%s)\n", ratio, ev);
    printf("ratio=%.3f\n", ratio);
    if (!verdict) printf("PASS bench_adamw_ran: every kernel and copy ran without a CUDA error\n");
    cudaEventDestroy(ea);
    cudaEventDestroy(eb);
    cudaFree(o.chunks); cudaFree(o.g); cudaFree(o.p); cudaFree(o.w); cudaFree(o.m); cudaFree(o.v);
    cudaFree(c.src); cudaFree(c.dst);
    free(hc);
    return !verdict || ratio >= 0.8 ? 0 : 1;
}
