/* tests/bench/bench_optim.c - the fused CPU optimizer pass against the memory roofline.

   Builds a context with one big module at world size 1 (stage 0, bf16 params, bf16
   gradients, AdamW: fp32 master, m, v), then times the fused optimizer phase
   (zero__apply_optimizer: what zero_step runs after the gradient norm) against a
   trivial kernel that streams exactly the same arrays the same way: reads g (bf16)
   and master/m/v (fp32), writes master/m/v and the bf16 params, 28 bytes per
   element, with the same threads and the same chunking. That kernel is the memory
   roofline for this access pattern; the last line is ratio=<ours/roofline>. It also
   times the gradient norm's blocked sum of squares (zero__sumsq_slice) on the shard.

       build/bench_optim [--n ELEMENTS] [--threads T] [--reps R] [--optim adamw|lion]
                         [--optim-state-dtype f32|bf16|q8]
       defaults: 64M elements (about 1.9 GB), all online CPUs, 11 repetitions, best
       taken (a shared or virtual machine is noisy: compare the best, run it twice)
       ZERO_SIMD=scalar|avx2|avx512 caps the kernel path, as in the library.
   --optim-state-dtype bf16: m and v in bf16 (ON OPTIMIZER STATES): 20 bytes an element,
   and the roofline streams m and v as bf16 too (widened, and narrowed to nearest even as
   the library does: its own bytes, not the fp32 pass's). q8: a byte for each of m and v
   and a 4-byte scale per 256 elements, about 16.06 bytes an element; the roofline reads and
   writes the codes (an add of 1) and touches each scale once. --optim lion: Lion's pass, one
   moment (ON THE OPTIMIZER): 20 bytes an element with fp32 moments, and the roofline streams
   m alone. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct roof_job { uint16_t *g, *p; float *w; void *m, *v; int sdt; int64_t n, nst; int simd; } roof_job;

/* q8: the scale of the block at element i of a code array of n elements */
static void roof_scale(void *a, int64_t n, int64_t i) { ((float *)((char *)a + n))[i / ZERO__QB] += 1.0f; }
/* the roofline: one add per stream, a truncating narrow of the params; same loads, stores
   and software prefetches as ours (m and v of type sdt) */
static void roof_scalar(const roof_job *j, int64_t lo, int64_t hi) {
    int64_t i;
    for (i = lo; i < hi; i++) {
        float g = zero__bf16_to_f32(j->g[i]), w = j->w[i] + g;
        j->w[i] = w;
        if (j->sdt == ZERO__SDT_Q8) {
            ((uint8_t *)j->m)[i]++;
            if (j->v) ((uint8_t *)j->v)[i]++;
            if (i % ZERO__QB == 0) { roof_scale(j->m, j->nst, i); if (j->v) roof_scale(j->v, j->nst, i); }
        } else {
            zero__st(j->m, i, j->sdt, zero__ld(j->m, i, j->sdt) + g);
            if (j->v) zero__st(j->v, i, j->sdt, zero__ld(j->v, i, j->sdt) + g);
        }
        j->p[i] = (uint16_t)(zero__f32_bits(w) >> 16);
    }
}
#if defined(ZERO__X86)
ZERO__AVX512_ATTR static void roof_avx512(const roof_job *j, int64_t lo, int64_t hi) {
    int64_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        __m512 g;
        ZERO__PREFETCH(j->w, i, 4); ZERO__PREFETCH(j->m, i, 4); if (j->v) ZERO__PREFETCH(j->v, i, 4);
        ZERO__PREFETCH(j->g, i, 2); ZERO__PREFETCH(j->p, i, 2);
        g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(j->g + i))), 16));
        __m512 w = _mm512_add_ps(_mm512_loadu_ps(j->w + i), g);
        _mm512_storeu_ps(j->w + i, w);
        if (j->sdt == ZERO__SDT_Q8) {
            const __m128i one = _mm_set1_epi8(1);
            uint8_t *m = (uint8_t *)j->m + i, *v = j->v ? (uint8_t *)j->v + i : NULL;
            _mm_storeu_si128((__m128i *)m, _mm_add_epi8(_mm_loadu_si128((const __m128i *)m), one));
            if (j->v) _mm_storeu_si128((__m128i *)v, _mm_add_epi8(_mm_loadu_si128((const __m128i *)v), one));
            if (i % ZERO__QB == 0) { roof_scale(j->m, j->nst, i); if (j->v) roof_scale(j->v, j->nst, i); }
        } else if (j->sdt == ZERO_F32) {
            _mm512_storeu_ps((float *)j->m + i, _mm512_add_ps(_mm512_loadu_ps((float *)j->m + i), g));
            if (j->v) _mm512_storeu_ps((float *)j->v + i, _mm512_add_ps(_mm512_loadu_ps((float *)j->v + i), g));
        } else {
            zero__avx512_st(j->m, i, j->sdt, _mm512_add_ps(zero__avx512_ld(j->m, i, j->sdt), g));
            if (j->v) zero__avx512_st(j->v, i, j->sdt, _mm512_add_ps(zero__avx512_ld(j->v, i, j->sdt), g));
        }
        _mm256_storeu_si256((__m256i *)(j->p + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(w), 16)));
    }
    roof_scalar(j, i, hi);
}
ZERO__AVX2_ATTR static void roof_avx2(const roof_job *j, int64_t lo, int64_t hi) {
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 g;
        ZERO__PREFETCH(j->w, i, 4); ZERO__PREFETCH(j->m, i, 4); if (j->v) ZERO__PREFETCH(j->v, i, 4);
        ZERO__PREFETCH(j->g, i, 2); ZERO__PREFETCH(j->p, i, 2);
        g = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(j->g + i))), 16));
        __m256 w = _mm256_add_ps(_mm256_loadu_ps(j->w + i), g);
        __m256i h = _mm256_srli_epi32(_mm256_castps_si256(w), 16);
        _mm256_storeu_ps(j->w + i, w);
        if (j->sdt == ZERO__SDT_Q8) {
            const __m128i one = _mm_set1_epi8(1);
            uint8_t *m = (uint8_t *)j->m + i, *v = j->v ? (uint8_t *)j->v + i : NULL;
            _mm_storel_epi64((__m128i *)m, _mm_add_epi8(_mm_loadl_epi64((const __m128i *)m), one));
            if (j->v) _mm_storel_epi64((__m128i *)v, _mm_add_epi8(_mm_loadl_epi64((const __m128i *)v), one));
            if (i % ZERO__QB == 0) { roof_scale(j->m, j->nst, i); if (j->v) roof_scale(j->v, j->nst, i); }
        } else if (j->sdt == ZERO_F32) {
            _mm256_storeu_ps((float *)j->m + i, _mm256_add_ps(_mm256_loadu_ps((float *)j->m + i), g));
            if (j->v) _mm256_storeu_ps((float *)j->v + i, _mm256_add_ps(_mm256_loadu_ps((float *)j->v + i), g));
        } else {
            zero__avx2_st(j->m, i, j->sdt, _mm256_add_ps(zero__avx2_ld(j->m, i, j->sdt), g));
            if (j->v) zero__avx2_st(j->v, i, j->sdt, _mm256_add_ps(zero__avx2_ld(j->v, i, j->sdt), g));
        }
        _mm_storeu_si128((__m128i *)(j->p + i), _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
    roof_scalar(j, i, hi);
}
#endif
static void roof_part(void *arg, int part, int nparts) {
    const roof_job *j = (const roof_job *)arg;
    int64_t lo, hi;
    zero__chunk(j->n, part, nparts, &lo, &hi);
#if defined(ZERO__X86)
    if (j->simd == ZERO__SIMD_AVX512) { roof_avx512(j, lo, hi); return; }
    if (j->simd == ZERO__SIMD_AVX2) { roof_avx2(j, lo, hi); return; }
#endif
    roof_scalar(j, lo, hi);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int64_t n = (int64_t)64 << 20, i;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 11, a, r, lion = 0;
    zero_state_dtype sdt = ZERO_STATE_F32;
    double t_ours[64], t_roof[64], t_norm[64], bytes, best_o, best_r;
    zero_desc d;
    zero_ctx *z;
    zero_module mod;
    zero_param w;
    zero_module_desc md;
    zero_param_desc pd;
    roof_job rj;
    volatile double sink = 0;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--n") && a + 1 < argc) n = strtoll(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--optim") && a + 1 < argc && (!strcmp(argv[a + 1], "adamw") || !strcmp(argv[a + 1], "lion")))
            lion = !strcmp(argv[++a], "lion");
        else if (!strcmp(argv[a], "--optim-state-dtype") && a + 1 < argc && (!strcmp(argv[a + 1], "f32") ||
                                                                             !strcmp(argv[a + 1], "bf16") ||
                                                                             !strcmp(argv[a + 1], "q8"))) {
            a++;
            sdt = !strcmp(argv[a], "bf16") ? ZERO_STATE_BF16 : !strcmp(argv[a], "q8") ? ZERO_STATE_Q8 : ZERO_STATE_F32;
        }
        else {
            fprintf(stderr, "usage: %s [--n ELEMENTS] [--threads T] [--reps R] [--optim adamw|lion]\n"
                            "       [--optim-state-dtype f32|bf16|q8]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    memset(&d, 0, sizeof d);
    d.stage = 0;
    d.param_dtype = ZERO_BF16;
    d.grad_dtype = ZERO_BF16;
    d.cpu_threads = threads;
    d.optim.type = lion ? ZERO_OPTIM_LION : ZERO_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.optim.state_dtype = sdt;
    if (zero_create(&z, &d) != ZERO_OK) { fprintf(stderr, "zero_create: %s\n", zero_last_error(NULL)); return 1; }
    memset(&md, 0, sizeof md); md.name = "big";
    memset(&pd, 0, sizeof pd); pd.name = "w"; pd.ndim = 1; pd.shape[0] = n;
    if (zero_add_module(z, &md, &mod) != ZERO_OK || zero_add_param(z, mod, &pd, &w) != ZERO_OK ||
        zero_build(z) != ZERO_OK) {
        fprintf(stderr, "build: %s\n", zero_last_error(z));
        return 1;
    }
    {   /* small non-trivial values everywhere (the arenas were zeroed, so every page is touched) */
        uint16_t *g = (uint16_t *)z->arena.grad;
        for (i = 0; i < n; i++) {
            g[i] = zero__f32_to_bf16((float)((i * 7919) % 1001 - 500) * 1e-4f);
            z->arena.master[i] = (float)(i % 977) * 1e-3f;
        }
    }
    rj.g = (uint16_t *)z->arena.grad; rj.p = (uint16_t *)z->arena.param;
    rj.w = z->arena.master; rj.m = z->arena.m; rj.v = z->arena.v; rj.n = n; rj.simd = z->opt.simd;
    rj.sdt = zero__sdt(&z->desc);
    rj.nst = zero__tstate(z);
    {   /* g and p 2 bytes, the master 4 read and written, each moment read and written */
        double mom = rj.sdt == ZERO_F32 ? 8.0 : rj.sdt == ZERO_BF16 ? 4.0 : 2.0 + 8.0 / ZERO__QB;
        bytes = (12.0 + (lion ? 1 : 2) * mom) * (double)n;
    }
    printf("bench_optim: %lld elements (%.2f GB moved per pass), %d threads, path %s, %s, %s moments, best of %d\n",
           (long long)n, bytes * 1e-9, threads, zero__simd_name[z->opt.simd], lion ? "Lion" : "AdamW",
           zero_state_dtype_str(sdt), reps);
    z->dev->optimizer(z, 1.0f);                  /* warm up both */
    zero__pool_run(z->opt.pool, roof_part, &rj, 0);
    for (r = 0; r < reps; r++) {
        double t0 = now_s(), t1, t2, t3;
        z->dev->optimizer(z, 1.0f);
        t1 = now_s();
        zero__pool_run(z->opt.pool, roof_part, &rj, 0);
        t2 = now_s();
        { double v; z->dev->grad_sumsq(z, 0, &v); sink += v; }
        t3 = now_s();
        t_ours[r] = t1 - t0; t_roof[r] = t2 - t1; t_norm[r] = t3 - t2;
    }
    qsort(t_ours, (size_t)reps, sizeof(double), cmp_d);
    qsort(t_roof, (size_t)reps, sizeof(double), cmp_d);
    qsort(t_norm, (size_t)reps, sizeof(double), cmp_d);
    best_o = t_ours[0]; best_r = t_roof[0];
    printf("fused %-5s (bf16 p, bf16 g):  best %8.2f ms  %7.2f GB/s   median %8.2f ms  %7.2f GB/s\n",
           lion ? "Lion" : "AdamW", best_o * 1e3, bytes / best_o * 1e-9, t_ours[reps / 2] * 1e3, bytes / t_ours[reps / 2] * 1e-9);
    printf("roofline (same streams):       best %8.2f ms  %7.2f GB/s   median %8.2f ms  %7.2f GB/s\n",
           best_r * 1e3, bytes / best_r * 1e-9, t_roof[reps / 2] * 1e3, bytes / t_roof[reps / 2] * 1e-9);
    printf("grad sum of squares (blocked):  best %8.2f ms  %7.2f GB/s of gradients\n",
           t_norm[0] * 1e3, 2.0 * (double)n / t_norm[0] * 1e-9);
    zero_destroy(z);
    printf("ratio=%.3f\n", best_r / best_o);
    return 0;
}
