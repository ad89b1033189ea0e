/* tests/flags/flags.c - the same bits whatever the includer's flags (tests/test_flags.sh).

   Built by tests/test_flags.sh the way an includer builds: -std=gnu11 -O3, -Ofast,
   -ffast-math, gcc and clang, C and C++ (this file compiles as both), and run once per
   SIMD path (ZERO_SIMD=scalar|avx2|avx512 in the environment). It trains a small model on
   2 local ranks at stages 0-3 with bf16, f16 and f32 params (AdamW, and SGD with Nesterov
   momentum), clips, and prints one digest line per run: an FNV-1a hash of every step's
   gradient norm, loss scale and result, then of the gathered fp32 master params and of the
   params in their own dtype, bit for bit; then three ZeRO++ runs (stage 3, qwz and qgz at
   8 bits (bf16, f32) and 4 (f16), 2 nodes of 1 rank: the quantized gathers and reductions;
   align_elems 9 in the int8 runs, so the vector kernels' scalar tails run too). The script compares
   the lines with those of the reference build (the Makefile's -std=c99 -O2
   -ffp-contract=off, scalar path).

   Nothing here computes in floating point: the gradients and initial values are small
   integers times powers of two (exact in bf16 and f16), handed to zero.h through
   zero_add_f32 and zero_param_set_f32, so the includer-side flags cannot change them and
   every difference comes from zero.h itself.

   The last param's first SUBN weights start subnormal and get no gradient, so they only
   decay: -Ofast and -ffast-math link crtfastmath, which turns on flush-to-zero for the
   process, and zero.h's kernels must still keep them (and the digest sees it).

   It also checks, in every build, that a NaN and an infinite gradient are caught
   (ZERO_STEP_SKIPPED, params bitwise untouched: -ffinite-math-only must not fold the
   check away), and in GNU mode that the includer's M_PI is still declared after the
   implementation (zero.h defines no feature-test macro). A failed check prints a line
   starting "FAIL " and the exit status is 1. */
#define ZERO_IMPLEMENTATION
#include "../../zero.h"

#include <stdio.h>
#include <string.h>
#include <math.h>

#if !defined(__STRICT_ANSI__) || defined(__cplusplus)
static const double flags_pi = M_PI;   /* "'M_PI' undeclared" when zero.h forced _POSIX_C_SOURCE */
#define FLAGS_HAVE_PI 1
#endif

#define WORLD 2
#define STEPS 6
#define NAN_STEP 2                     /* a NaN gradient at this step, an inf at the next */
#define NP 4
#define SUBN 8                         /* p3's first elements: subnormal, no gradient */

/* the model: module 0 = {w 37x29, b 37 (no decay)}, module 1 = {w 4099}, module 2 = {e 70} */
static const int64_t p_numel[NP] = { 37 * 29, 37, 4099, 70 };
static const int p_module[NP] = { 0, 0, 1, 2 };
static const int p_nodecay[NP] = { 0, 1, 0, 0 };
#define TOTAL (37 * 29 + 37 + 4099 + 70)

typedef struct cfg {
    int stage;
    zero_dtype dt;
    zero_optim_type opt;
    int qwz, qgz, align;               /* ZeRO++ (stage 3, 2 nodes of 1 rank); align_elems */
    uint64_t digest;                   /* written by rank 0 */
    int failed;
    char why[256];
} cfg;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* a small integer in [-range, range] from the position: no floating point */
static int ival(uint64_t a, uint64_t b, uint64_t c, int range) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (a * 0x100000001b3ull + b * 0xc2b2ae3d27d4eb4full + c * 0x165667b19e3779f9ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return (int)(h % (uint64_t)(2 * range + 1)) - range;
}

/* k * 2^-7 with |k| <= 127: exact in f32, bf16 and f16 */
static float small(int k) { return (float)k * 0.0078125f; }

static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void fail(cfg *c, const char *what) {
    if (!c->failed) snprintf(c->why, sizeof c->why, "%s", what);
    c->failed = 1;
}

static zero_result run_rank(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    zero_desc d;
    zero_module_desc md;
    zero_param_desc pd;
    zero_ctx *z = NULL;
    zero_module mod[3];
    zero_param par[NP];
    static float buf[WORLD][TOTAL], before[WORLD][TOTAL], after[WORLD][TOTAL];
    float *g = buf[rank];
    uint64_t h = 14695981039346656037ull;
    zero_result r;
    int i, step;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = c->dt;
    d.optim.type = c->opt;
    d.optim.lr = 0.01;
    d.optim.weight_decay = 0.1;
    if (c->opt == ZERO_OPTIM_SGD) { d.optim.momentum = 0.9; d.optim.nesterov = 1; }
    d.clip_norm = 2.0;                 /* the norms here are ~5-40: every step clips */
    d.cpu_threads = 1;
    d.qwz = c->qwz;
    d.qgz = c->qgz;
    d.align_elems = c->align;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (i = 0; i < 3; i++) {
        char name[16];
        memset(&md, 0, sizeof md);
        snprintf(name, sizeof name, "m%d", i);
        md.name = name;
        if ((r = zero_add_module(z, &md, &mod[i])) != ZERO_OK) goto out;
    }
    for (i = 0; i < NP; i++) {
        char name[16];
        memset(&pd, 0, sizeof pd);
        snprintf(name, sizeof name, "p%d", i);
        pd.name = name;
        pd.ndim = 1;
        pd.shape[0] = p_numel[i];
        pd.no_decay = p_nodecay[i];
        if ((r = zero_add_param(z, mod[p_module[i]], &pd, &par[i])) != ZERO_OK) goto out;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto out;
    {
        int64_t off = 0, j;
        for (i = 0; i < NP; i++) {
            for (j = 0; j < p_numel[i]; j++) g[off + j] = small(ival(99, (uint64_t)i, (uint64_t)j, 120));
            if (i == NP - 1)           /* subnormal weights that only decay (zero gradient below) */
                for (j = 0; j < SUBN; j++) g[off + j] = bits_f32(0x00400000u + (uint32_t)j * 0x1234u);
            if ((r = zero_param_set_f32(z, par[i], g + off)) != ZERO_OK) goto out;
            off += p_numel[i];
        }
    }
    for (step = 0; step < STEPS; step++) {
        zero_stats st;
        int64_t off = 0, j;
        float scale;
        int m;
        for (off = 0, i = 0; i < NP; off += p_numel[i], i++)
            for (j = 0; j < p_numel[i]; j++) g[off + j] = small(ival((uint64_t)step, (uint64_t)(rank * NP + i), (uint64_t)j, 127));
        for (j = 0; j < SUBN; j++) g[TOTAL - p_numel[NP - 1] + j] = 0.0f;
        if (step == NAN_STEP && rank == 1) g[1100] = bits_f32(0x7fc00000u);       /* NaN in p1 (b) */
        if (step == NAN_STEP + 1 && rank == 0) g[3000] = bits_f32(0xff800000u);   /* -inf in p2 */
        if (step == NAN_STEP || step == NAN_STEP + 1)
            if ((r = zero_gather_params_f32(z, before[rank])) != ZERO_OK) goto out;
        for (m = 0; m < 3; m++) {
            if ((r = zero_fetch(z, mod[m])) != ZERO_OK) goto out;
            for (off = 0, i = 0; i < NP; off += p_numel[i], i++)
                if (p_module[i] == m) zero_add_f32(zero_param_grad(z, par[i]), c->dt, g + off, p_numel[i]);
            if ((r = zero_release(z, mod[m])) != ZERO_OK) goto out;
            if ((r = zero_grads_ready(z, mod[m])) != ZERO_OK) goto out;
        }
        r = zero_step(z);
        if (step == NAN_STEP || step == NAN_STEP + 1) {
            if (r != ZERO_STEP_SKIPPED) {
                fail(c, step == NAN_STEP ? "a NaN gradient was not caught (zero_step did not return ZERO_STEP_SKIPPED)"
                                         : "an infinite gradient was not caught (zero_step did not return ZERO_STEP_SKIPPED)");
                if (r == ZERO_OK) continue;
                goto out;
            }
            if ((r = zero_gather_params_f32(z, after[rank])) != ZERO_OK) goto out;
            if (memcmp(before[rank], after[rank], sizeof before[rank]) != 0)
                fail(c, "a skipped step changed the params");
        } else if (r != ZERO_OK) {
            goto out;
        }
        if ((r = zero_stats_get(z, &st)) != ZERO_OK) goto out;
        scale = zero_loss_scale(z);
        h = fnv(h, &st.grad_norm, sizeof st.grad_norm);
        h = fnv(h, &scale, sizeof scale);
        h = fnv(h, &r, sizeof r);
    }
    if ((r = zero_gather_params_f32(z, after[rank])) != ZERO_OK) goto out;   /* the fp32 master */
    h = fnv(h, after[rank], sizeof after[rank]);
    for (i = 0; i < NP; i++) {         /* and the params in their dtype (the kernels' narrowing) */
        if ((r = zero_fetch(z, mod[p_module[i]])) != ZERO_OK) goto out;
        h = fnv(h, zero_param_data(z, par[i]), (size_t)p_numel[i] * zero_dtype_size(c->dt));
        if ((r = zero_release(z, mod[p_module[i]])) != ZERO_OK) goto out;
    }
    if (rank == 0) c->digest = h;
out:
    zero_destroy(z);
    return r;
}

int main(void) {
    static const zero_dtype dts[3] = { ZERO_BF16, ZERO_F16, ZERO_F32 };
    static const char *dtn[3] = { "bf16", "f16", "f32" };
    int failed = 0, s, t, o;
    uint64_t all = 14695981039346656037ull, first = 0;
#if defined(ZERO__X86)
    const char *path = zero__simd_name[zero__simd_pick()];
#else
    const char *path = "scalar";
#endif
    printf("path %s\n", path);
#if defined(FLAGS_HAVE_PI)
    if (!(flags_pi > 3.14 && flags_pi < 3.15)) { printf("FAIL M_PI: %.17g\n", flags_pi); failed = 1; }
#endif
    for (o = 0; o < 2; o++)
        for (t = 0; t < 3; t++)
            for (s = 0; s <= 3; s++) {
                cfg c;
                zero_result r;
                if (o == 1 && !((s == 1 && t == 0) || (s == 3 && t == 2))) continue;   /* SGD: two runs */
                memset(&c, 0, sizeof c);
                c.stage = s;
                c.dt = dts[t];
                c.opt = o ? ZERO_OPTIM_SGD : ZERO_OPTIM_ADAMW;
                r = zero_run_local(WORLD, run_rank, &c);
                if (r != ZERO_OK) {
                    printf("FAIL stage=%d dtype=%s opt=%s: %s (%s)\n", s, dtn[t], o ? "sgd" : "adamw", zero_result_str(r),
                           zero_last_error(NULL));
                    failed = 1;
                    continue;
                }
                if (c.failed) {
                    printf("FAIL stage=%d dtype=%s opt=%s: %s\n", s, dtn[t], o ? "sgd" : "adamw", c.why);
                    failed = 1;
                }
                printf("digest stage=%d dtype=%s opt=%s %016llx\n", s, dtn[t], o ? "sgd" : "adamw",
                       (unsigned long long)c.digest);
                if (o == 0 && s == 0) first = c.digest;
                if (o == 0 && s > 0 && c.digest != first) {   /* every stage gives stage 0's bits */
                    printf("FAIL stage=%d dtype=%s: not stage 0's bits\n", s, dtn[t]);
                    failed = 1;
                }
                all = fnv(all, &c.digest, sizeof c.digest);
            }
    for (t = 0; t < 3; t++) {      /* ZeRO++: int8 codes and sums (bf16, f32), int4 ones (f16) */
        cfg c;
        zero_group *g = NULL;
        zero_result r;
        memset(&c, 0, sizeof c);
        c.stage = 3;
        c.dt = dts[t];
        c.opt = ZERO_OPTIM_ADAMW;
        c.qwz = 1;
        c.qgz = t == 1 ? 4 : 8;
        c.align = t == 1 ? 0 : 9;  /* slices of 9k elements: the vector sums' tails run too */
        if ((r = zero_group_create(&g, WORLD)) == ZERO_OK && (r = zero_group_set_nodes(g, 1)) == ZERO_OK)
            r = zero_run_group(g, run_rank, &c);
        zero_group_destroy(g);
        if (r != ZERO_OK || c.failed) {
            printf("FAIL zpp qgz=%d dtype=%s: %s\n", c.qgz, dtn[t], r != ZERO_OK ? zero_last_error(NULL) : c.why);
            failed = 1;
            continue;
        }
        printf("digest zpp qgz=%d dtype=%s %016llx\n", c.qgz, dtn[t], (unsigned long long)c.digest);
        all = fnv(all, &c.digest, sizeof c.digest);
    }
    printf("digest all %016llx\n", (unsigned long long)all);
    return failed;
}
