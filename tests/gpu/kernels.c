/* tests/gpu/kernels.c - every launcher of zero_kernels.cu against its CPU reference, on a GPU
   (and on the CUDA test double: make build/mock/gpu_kernels).

   The sizes S that every kernel runs at hit each of its paths: 0 (the launcher returns at
   once, nothing is written), 1 and 3 (a scalar tail alone), 4 and 5 (one 4-element vector
   group, without and with a tail), 31, 32, 33 (a warp and around), 255, 256, 257 (a block
   of 256 threads, one 4-element group each = 1024 elements, and around), 16383, 16384,
   16385 (ZERO__KCHUNK and around: many blocks, per-thread loops of many steps); plus ONE
   large case per kernel of k * 2^20 + odd elements (hundreds of blocks). A case reads its
   inputs from a 256-byte aligned allocation (cudaMalloc's); "misaligned" moves ONE pointer
   one element off it (zero__k_opt and zero__k_sum_into: one, then two) while the others
   stay aligned: a kernel takes its vector path only when every pointer allows it, so each
   pointer's check is tested alone (zero__k_opt also moves them all by 1, 2, 3 elements
   together: its vector path after a head). Every output buffer is compared whole, one
   element past the end included (nothing may write outside).
   The grid-stride loops over blocks (beyond 2^20 blocks) are not reached: that takes 2^28
   threads, too slow for the test double's grid emulator; the cases stay small for it (in
   all about 7M elements through zero__k_opt, 1.6M through zero__k_sumsq).

   Bitwise (the same bits, or both NaN: the GPU does not keep NaN payloads):
     zero__k_opt       vs zero__opt_kernel(scalar) per chunk. For every variant (AdamW, SGD
                       without momentum, with momentum first step and later, Nesterov; Lion) and
                       every (grad dtype, param dtype), with an fp32 master and (f32 params)
                       without one: a chunk table with each chunk length 0, 1, 3, 4, 5, 31,
                       32, 33, 255, 256, 257, 1028, 2052, 16383, 16384 twice, once at indices
                       that are multiples of 8 (the vector path: two 4-element groups per
                       thread per step, the one-group step, the scalar tail) and once at odd
                       indices, different for grads, state and params (the scalar loop);
                       decay on and off per chunk. Heads: chunks of 0..8, 33, 1029, 2055
                       elements whose indices are all 1, 2, 3 past a multiple of 8, and at
                       1, 5, 1 (different, equal modulo 4): 3, 2, 1 scalar elements, then the
                       vector path. Misaligned (AdamW, SGD, SGD with momentum, every dtype
                       pair): grads, master (or the f32 params without one), m, v, the
                       16-bit params, each alone, chunks of 1, 5, 33, 257, 4099; and every
                       array by the same 1, 2, 3 elements (a head on every chunk). On the
                       grid emulator each case also counts the groups of 4 the vector path
                       ran (zero_kernels.cu's zk_kemu_opt_groups, in that build only): those
                       after the head of every chunk whose arrays are equally misaligned
                       modulo 4 elements, none elsewhere, so a chunk that could take the
                       vector path and ran scalar (the same bits, slower) fails. Large:
                       AdamW bf16 / bf16 with a master, 65 chunks, 2^20 + 3 elements, every
                       third chunk at odd indices; bf16 moments (k.sdt, ON OPTIMIZER
                       STATES) vs zero__opt_call's widen, update, narrow: every variant with
                       moments, f32 and bf16 grads, the vector path, its heads, f32 params as
                       the master, m one element off; no chunks returns 0; AdamW without m and
                       16-bit params without a master are refused;
     zero__k_sumsq     vs zero__sumsq_scalar, every dtype: blocks of every size S and 1023,
                       1024, 1025 (ZERO__NORM_BLOCK) at alternately even and odd starts, 17
                       blocks (4 per warp, 32 per CUDA block: partial ones), the gradient
                       base aligned and one element off; blocks of every length 0..72 (each
                       lane count, a lane group's 64-element step and around); lengths
                       around the multiples of 64 and 256 up to 1025; 1..9 and 31..33
                       blocks of lengths that differ within a warp (1025, short, empty);
                       random blocks (mostly ZERO__NORM_BLOCK, odd starts); large (bf16):
                       2^20 + 3 elements, one block of 2^18 + 5, then ZERO__NORM_BLOCK
                       blocks; values over 2^-30..2^30 so the lane sums round; the output
                       one past the last block left alone; no blocks returns 0;
     zero__k_sum_into  vs zero__sum_into, every (out dtype, in dtype): nin 1 (the cast, dst +=
                       src), 2 and 3 at every size S, accumulate and not, out aliasing an input
                       (same dtypes); nin 3 with out, then each input alone misaligned (33 and
                       16385: the scalar path); nin 8 and 64 (ZERO__K_MAXIN); large: f32 += the
                       sum of two bf16 inputs, 2^20 + 3; nin 65 refused;
     zero__k_quantize_i8 / zero__k_dequantize_i8 vs zero__quantize_i8 / zero__dequantize_i8,
                       every dtype: every size S with blocks 1, 5, 32, 256, 300, 2048 (those
                       giving at most 600 blocks: one CUDA block each), NaN / inf values
                       (poisoned blocks) and all-zero blocks; x, q, scales and the dequantized
                       x misaligned each alone; large: bf16, 2^20 + 3 values, blocks of 2048;
     zero__k_qp_encode / zero__k_qp_sum vs zero__qp_encode / zero__qp_sum (ZeRO++'s payloads):
                       int8 and int4, every dtype at every size S (blocks 1, 5, 7, 32, 256,
                       300, 2048 in turn), at 4101 values every block (blocks that do not
                       divide a 4-byte word of codes), NaN / inf / subnormal values, all-zero
                       blocks, sums of 3 and ZERO__K_MAXIN payloads, accumulate; encode's x
                       and the sum's out misaligned each alone, every dtype (a payload must
                       be 4-byte aligned: the contract); large: int4 from bf16 into f32,
                       2^20 + 3 values; 65 payloads and a misaligned payload refused;
     zero__k_bias_add, zero__k_bias_grad vs the CPU tiled linear's loops, every bias dtype:
                       3 rows of every size S columns with a row stride of cols + 3 (the gap
                       is left alone), 300 rows of 33, no rows; y and b (bias_add), gb and dy
                       (bias_grad) misaligned each alone; large: 7 rows of 149797 (2^20 + 3).
   Bitwise too (their tanh is zero__tanhf, IEEE double operations, not CUDA's tanhf):
   zero__k_gelu_fwd / _bwd at every size S, each pointer misaligned alone, large 2^20 + 3.
   Within a tolerance (the row sum is a tree): zero__k_xent (|d| <= 1e-5 (1 + |ref|)) vs
   examples/train_mlp.c's formulas: 64 x 32, 7 x 1000, 5 x 1, in place 9 x 1000, 3 rows of
   classes 3..16385 (the per-row block loop), large 7 x 149797; and a launch on a created
   stream gives what the default stream gives.
   Without a GPU it prints "SKIP gpu_kernels: no GPU" and exits 0; a CUDA error other than
   "no device" is a FAIL (tests/gpu/gpu.h). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include <cuda_runtime_api.h>   // defines: cudaMalloc, cudaMemcpy, cudaDeviceSynchronize
#include "gpu.h"

#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* the sizes S (above) and the large cases' */
static const int64_t sizes[] = { 0, 1, 3, 4, 5, 31, 32, 33, 255, 256, 257, 16383, 16384, 16385 };
#define LARGE (((int64_t)1 << 20) + 3)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void) { return (float)(rnd32() & 0xffffffu) / 16777216.0f; }   /* [0, 1) */
/* mostly ordinary values of varied magnitude; with `edge`, sometimes 0, subnormal, inf, NaN */
static float rnd_val(int edge) {
    uint32_t sign = (rnd32() & 1u) << 31, k = rnd32() % 64;
    if (edge && k == 0) return zero__bits_f32(sign | 0x7f800000u);
    if (edge && k == 1) return zero__bits_f32(0x7fc00000u | (rnd32() & 0x3fffffu));
    if (edge && k == 2) return zero__bits_f32(sign | (rnd32() & 0x7fffffu));
    if (edge && k == 3) return 0.0f;
    return zero__bits_f32(sign | ((110u + rnd32() % 24u) << 23) | (rnd32() & 0x7fffffu));
}
static size_t esz(int dt) { return dt == ZERO_F32 ? 4 : 2; }
static void fill(void *p, int dt, int64_t n, int edge) {
    int64_t i;
    for (i = 0; i < n; i++) zero__st(p, i, dt, rnd_val(edge));
}
static int64_t rup8(int64_t x) { return (x + 7) & ~(int64_t)7; }
/* p + i elements of dtype dt */
static void *at(const void *p, int64_t i, int dt) { return (char *)(uintptr_t)p + i * (int64_t)esz(dt); }
/* how far a "misaligned" pointer is moved, in elements: 1, then 2 (with the 256-byte aligned
   allocation, 1 and 2 reach both classes below 4 elements: 2 f32 are 8-byte but not 16-byte
   aligned, 2 bf16 4-byte but not 8-byte; a check of the vector path against too small an
   alignment is caught only by 2) */
static int64_t mis_off = 1;

/* ---- device memory ---- */
static void *dalloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) { fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes); exit(1); }
    return p;
}
static void *dup_to_dev(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    if (bytes) cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}
static void to_host(void *h, const void *d, size_t bytes) {
    if (bytes) cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
}
static int sync_ok(int launch_rc, const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    return CHECK(launch_rc == 0 && e == cudaSuccess, "%s: launch %d (%s), sync %s", what, launch_rc,
                 cudaGetErrorString((cudaError_t)launch_rc), cudaGetErrorString(e));
}

/* the same bits, or both NaN, element i of two arrays of dtype dt */
static int same(const void *a, const void *b, int64_t i, int dt) {
    float x, y;
    if (dt == ZERO_F32 ? ((const uint32_t *)a)[i] == ((const uint32_t *)b)[i]
                       : ((const uint16_t *)a)[i] == ((const uint16_t *)b)[i])
        return 1;
    x = zero__ld(a, i, dt);
    y = zero__ld(b, i, dt);
    return x != x && y != y;
}
/* counts the differing elements, reports the first few */
static int64_t compare(const char *what, const void *want, const void *got, int64_t n, int dt) {
    int64_t i, bad = 0;
    for (i = 0; i < n; i++)
        if (!same(want, got, i, dt)) {
            if (bad++ < 3)
                CHECK(0, "%s[%lld]: cpu %.9g gpu %.9g", what, (long long)i, (double)zero__ld(want, i, dt),
                      (double)zero__ld(got, i, dt));
        }
    if (bad > 3) CHECK(0, "%s: %lld elements differ", what, (long long)bad);
    return bad;
}
/* the same for bytes (int8 codes, payloads) */
static int64_t compare_bytes(const char *what, const void *want, const void *got, int64_t n) {
    const unsigned char *a = (const unsigned char *)want, *b = (const unsigned char *)got;
    int64_t i, bad = 0;
    for (i = 0; i < n; i++)
        if (a[i] != b[i] && bad++ < 3) CHECK(0, "%s: byte %lld: cpu 0x%02x gpu 0x%02x", what, (long long)i, a[i], b[i]);
    if (bad > 3) CHECK(0, "%s: %lld bytes differ", what, (long long)bad);
    return bad;
}

/* ---- the fused optimizer ---- */
enum { V_ADAMW, V_SGD_PLAIN, V_SGD_MOM_FIRST, V_SGD_MOM, V_SGD_NESTEROV, V_LION, V_NUM };
static const char *variant_name[V_NUM] = { "adamw", "sgd", "sgd_mom_first", "sgd_mom", "sgd_nesterov", "lion" };
/* zero__k_opt's arrays: bit i of a case's `mis` puts that array one element off */
enum { IN_G, IN_W, IN_M, IN_V, IN_P, IN_NUM };
static const char *in_name[IN_NUM] = { "grads", "master", "m", "v", "params" };

static void make_optk(zero__optk *k, int variant, int adt, int pdt) {
    double lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.999, step = 7;
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    memset(k, 0, sizeof *k);
    k->opt = variant == V_ADAMW ? ZERO_OPTIM_ADAMW : variant == V_LION ? ZERO_OPTIM_LION : ZERO_OPTIM_SGD;
    k->adt = adt;
    k->pdt = pdt;
    k->decay = 0;                        /* ignored by zero__k_opt: the chunks say */
    k->gscale = 0.37f;
    k->ah.beta1 = (float)b1; k->ah.beta2 = (float)b2;
    k->ah.one_minus_beta1 = (float)(1 - b1); k->ah.one_minus_beta2 = (float)(1 - b2);
    k->ah.eps = 1e-8f; k->ah.decay_mul = (float)(1 - lr * wd);
    k->ah.neg_step_size = (float)(-lr / bc1); k->ah.bc2_sqrt = (float)sqrt(bc2);
    k->sh.neg_lr = (float)-lr * 10; k->sh.weight_decay = (float)wd;
    k->sh.momentum = variant == V_SGD_PLAIN ? 0.0f : 0.9f;
    k->sh.one_minus_dampening = 0.75f;
    k->sh.nesterov = variant == V_SGD_NESTEROV;
    k->sh.first = variant == V_SGD_MOM_FIRST;
}

/* A chunk table, built chunk by chunk: grads, state (master, m, v) and params each have
   their own cursor, so the three indices of a chunk differ (and gaps differ). */
typedef struct chunk_table { zero__kchunk *c; int64_t n, g, s, p; } chunk_table;
/* a chunk of n elements whose grad, state and param indices are og, os, op past a multiple
   of 8 */
static void add_chunk_at(chunk_table *t, int32_t n, int og, int os, int op) {
    zero__kchunk *c = &t->c[t->n++];
    c->grad_idx = rup8(t->g) + og;
    c->state_idx = rup8(t->s) + os;
    c->param_idx = rup8(t->p) + op;
    c->n = n;
    c->decay = (int32_t)(rnd32() & 1u);
    t->g = c->grad_idx + n + 8 * (int64_t)(rnd32() % 3);      /* now and then a gap */
    t->s = c->state_idx + n;
    t->p = c->param_idx + n + 8 * (int64_t)(rnd32() % 2);
}
/* every index a multiple of 8 (with aligned bases, the vector path), or with `odd` the grad,
   state and param indices at 3, 1, 5 past one: misaligned in elements by 3, 1, 1 modulo 4,
   never aligned together (the scalar loop) */
static void add_chunk(chunk_table *t, int32_t n, int odd) {
    if (odd) add_chunk_at(t, n, 3, 1, 5);
    else add_chunk_at(t, n, 0, 0, 0);
}

/* How many 4-element groups zk_opt's vector loop must run on a chunk whose arrays start at
   a[0..na) (NULL: absent), with element sizes es[]: when every array is misaligned by the same
   number of elements modulo 4 (mis), the chunk's first (4 - mis) % 4 elements are its scalar
   head and every whole group after them is a vector group; otherwise there are none. */
static int64_t vec_groups(int64_t n, const void *const *a, const int *es, int na) {
    int64_t mis = -1, e, head;
    int i;
    for (i = 0; i < na; i++) {
        if (!a[i]) continue;
        if ((uintptr_t)a[i] % (uintptr_t)es[i]) return 0;
        e = (int64_t)((uintptr_t)a[i] / (uintptr_t)es[i] % 4);
        if (mis >= 0 && e != mis) return 0;
        mis = e;
    }
    head = (4 - mis) % 4;
    return n - head >= 4 ? (n - head) / 4 : 0;
}
/* zero_kernels.cu's count of the vector loop's groups, taken and reset: only its build for
   the CPU grid emulator (tests/kemu) has it; on a GPU the weak reference is NULL and the
   count is not checked */
extern long long zk_kemu_opt_groups(void) __attribute__((weak));

/* One zero__k_opt launch over the table vs the scalar kernel on each chunk. use_master 0:
   the f32 params are the master. mis: the arrays (IN_*) one element off their allocation.
   opt_sdt: the moments' dtype (bf16: the reference is zero__opt_call's widen, update, narrow). */
static int opt_sdt = ZERO_F32;
static void opt_case(int variant, int adt, int pdt, int use_master, int mis, const chunk_table *t, const char *what) {
    const zero__kchunk *ch = t->c;
    const int64_t nc = t->n;
    const int has_m = variant != V_SGD_PLAIN, has_v = variant == V_ADAMW;
    const int pd = use_master ? pdt : ZERO_F32;          /* the params' dtype */
    const int64_t og = (mis >> IN_G & 1) * mis_off, ow = (mis >> IN_W & 1) * mis_off;
    const int64_t om = (mis >> IN_M & 1) * mis_off, ov = (mis >> IN_V & 1) * mis_off;
    const int64_t op = use_master ? (mis >> IN_P & 1) * mis_off : ow;    /* without a master, w is the params */
    const int sdt = opt_sdt;
    const size_t ses = esz(sdt);
    zero__optk k;
    zero__opt_fn fn;
    zero__sconv sc = zero__sconv_for(ZERO__SIMD_SCALAR, sdt);
    int64_t ng = 0, ns = 0, np = 0, c, groups = 0;
    void *g, *p, *pg, *m, *v, *mg, *vg;
    float *w, *wg;
    void *dg, *dp, *dch, *dm = NULL, *dv = NULL;
    float *dw = NULL;
    char d[160];
    int rc;
    make_optk(&k, variant, adt, pdt);
    k.sdt = sdt;
    fn = zero__opt_kernel(ZERO__SIMD_SCALAR, k.opt, adt, pdt);
    for (c = 0; c < nc; c++) {
        if (ch[c].grad_idx + ch[c].n > ng) ng = ch[c].grad_idx + ch[c].n;
        if (ch[c].state_idx + ch[c].n > ns) ns = ch[c].state_idx + ch[c].n;
        if (ch[c].param_idx + ch[c].n > np) np = ch[c].param_idx + ch[c].n;
    }
    ng += 4; ns += 4; np += 4;           /* room for the offset (up to 3) and one element past the end */
    g = malloc((size_t)ng * esz(adt));
    p = malloc((size_t)np * esz(pd)); pg = malloc((size_t)np * esz(pd));
    w = (float *)malloc((size_t)ns * 4); m = malloc((size_t)ns * ses); v = malloc((size_t)ns * ses);
    wg = (float *)malloc((size_t)ns * 4); mg = malloc((size_t)ns * ses); vg = malloc((size_t)ns * ses);
    fill(g, adt, ng, 1);
    fill(p, pd, np, !use_master);
    fill(w, ZERO_F32, ns, 1);
    fill(m, sdt, ns, 0);
    for (c = 0; c < ns; c++) zero__st(v, c, sdt, fabsf(rnd_val(0)));
    dg = dup_to_dev(g, (size_t)ng * esz(adt));
    dp = dup_to_dev(p, (size_t)np * esz(pd));
    dch = dup_to_dev(ch, sizeof(zero__kchunk) * (size_t)nc);
    if (use_master) dw = (float *)dup_to_dev(w, (size_t)ns * 4);
    if (has_m) dm = dup_to_dev(m, (size_t)ns * ses);
    if (has_v) dv = dup_to_dev(v, (size_t)ns * ses);
    for (c = 0; c < nc; c++) {           /* the arrays as the kernel sees them */
        const void *a[5];
        const int es[5] = { (int)esz(adt), 4, (int)ses, (int)ses, (int)esz(pd) };
        a[0] = at(dg, og + ch[c].grad_idx, adt);
        a[1] = use_master ? (const void *)(dw + ow + ch[c].state_idx) : at(dp, op + ch[c].param_idx, pd);
        a[2] = has_m ? (const void *)at(dm, om + ch[c].state_idx, sdt) : NULL;
        a[3] = has_v ? (const void *)at(dv, ov + ch[c].state_idx, sdt) : NULL;
        a[4] = use_master && pd != ZERO_F32 ? at(dp, op + ch[c].param_idx, pd) : NULL;
        groups += vec_groups(ch[c].n, a, es, 5);
    }
    if (zk_kemu_opt_groups) (void)zk_kemu_opt_groups();
    rc = zero__k_opt(&k, (const zero__kchunk *)dch, nc, at(dg, og, adt), at(dp, op, pd), dw ? dw + ow : NULL,
                     dm ? at(dm, om, sdt) : NULL, dv ? at(dv, ov, sdt) : NULL, NULL);
    /* the CPU reference: the scalar kernel on each chunk, its decay in k */
    for (c = 0; c < nc; c++) {
        zero__optk kc = k;
        float *pw = (float *)at(p, op + ch[c].param_idx, pd);
        kc.decay = ch[c].decay;
        zero__opt_call(fn, &kc, &sc, at(g, og + ch[c].grad_idx, adt), pw, use_master ? w + ow + ch[c].state_idx : pw,
                       has_m ? at(m, om + ch[c].state_idx, sdt) : NULL, has_v ? at(v, ov + ch[c].state_idx, sdt) : NULL, 0,
                       ch[c].n);
    }
    snprintf(d, sizeof d, "zero__k_opt (%s, %s)", what, use_master ? "master" : "no master");
    if (!sync_ok(rc, d)) goto out;
    if (zk_kemu_opt_groups) {
        long long ran = zk_kemu_opt_groups();
        CHECK(ran == groups, "%s: the vector loop ran %lld groups of 4, %lld expected", d, ran, (long long)groups);
    }
    to_host(pg, dp, (size_t)np * esz(pd));
    if (use_master) {
        to_host(wg, dw, (size_t)ns * 4);
        snprintf(d, sizeof d, "master (%s)", what);
        compare(d, w, wg, ns, ZERO_F32);
    }
    snprintf(d, sizeof d, "params (%s, %s)", what, use_master ? "master" : "no master");
    compare(d, p, pg, np, pd);
    snprintf(d, sizeof d, "m (%s, %s)", what, use_master ? "master" : "no master");
    if (has_m) { to_host(mg, dm, (size_t)ns * ses); compare(d, m, mg, ns, sdt); }
    snprintf(d, sizeof d, "v (%s, %s)", what, use_master ? "master" : "no master");
    if (has_v) { to_host(vg, dv, (size_t)ns * ses); compare(d, v, vg, ns, sdt); }
out:
    cudaFree(dg); cudaFree(dp); cudaFree(dch); cudaFree(dw); cudaFree(dm); cudaFree(dv);
    free(g); free(p); free(pg); free(w); free(m); free(v); free(wg); free(mg); free(vg);
}

static void test_opt(void) {
    static const int32_t lens[] = { 0, 1, 3, 4, 5, 31, 32, 33, 255, 256, 257, 1028, 2052, ZERO__KCHUNK - 1, ZERO__KCHUNK };
    static const int32_t mis_lens[] = { 1, 5, 33, 257, 4099 };
    /* the chunks with a head: lengths around the head plus one group, a few steps, a tail */
    static const int32_t peel_lens[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 33, 1029, 2055 };
    zero__kchunk cs[2 * NELEMS(lens)], cm[NELEMS(mis_lens)], cp[4 * NELEMS(peel_lens)];
    int variant, adt, pdt, i, in, sh;
    char d[64];
    for (variant = 0; variant < V_NUM; variant++)
        for (adt = ZERO_F32; adt <= ZERO_F16; adt++)
            for (pdt = ZERO_F32; pdt <= ZERO_F16; pdt++) {
                chunk_table ts = { cs, 0, 0, 0, 0 }, tm = { cm, 0, 0, 0, 0 }, tp = { cp, 0, 0, 0, 0 };
                for (i = 0; i < NELEMS(lens); i++) { add_chunk(&ts, lens[i], 0); add_chunk(&ts, lens[i], 1); }
                for (i = 0; i < NELEMS(mis_lens); i++) add_chunk(&tm, mis_lens[i], 0);
                /* every index 1, 2 or 3 past a multiple of 8 (heads of 3, 2, 1 elements), and
                   indices that differ but agree modulo 4 (1, 5, 1: a head of 3) */
                for (sh = 1; sh <= 3; sh++)
                    for (i = 0; i < NELEMS(peel_lens); i++) add_chunk_at(&tp, peel_lens[i], sh, sh, sh);
                for (i = 0; i < NELEMS(peel_lens); i++) add_chunk_at(&tp, peel_lens[i], 1, 5, 1);
                test_begin("opt_%s_g%d_p%d", variant_name[variant], adt, pdt);
                opt_case(variant, adt, pdt, 1, 0, &ts, "sizes");
                if (pdt == ZERO_F32) opt_case(variant, adt, pdt, 0, 0, &ts, "sizes");   /* the params are the master */
                opt_case(variant, adt, pdt, 1, 0, &tp, "heads");
                if (pdt == ZERO_F32) opt_case(variant, adt, pdt, 0, 0, &tp, "heads");
                /* each array alone one element off: the variants differ in the arrays they use */
                if (variant == V_ADAMW || variant == V_SGD_PLAIN || variant == V_SGD_MOM || variant == V_LION) {
                    for (mis_off = 1; mis_off <= 2; mis_off++)
                    for (in = 0; in < IN_NUM; in++) {
                        if ((in == IN_M && variant == V_SGD_PLAIN) || (in == IN_V && variant != V_ADAMW)) continue;
                        snprintf(d, sizeof d, "misaligned %s by %d", in_name[in], (int)mis_off);
                        if (in != IN_P || pdt != ZERO_F32) opt_case(variant, adt, pdt, 1, 1 << in, &tm, d);
                        if (in != IN_P && pdt == ZERO_F32) {
                            snprintf(d, sizeof d, "misaligned %s by %d", in == IN_W ? "params" : in_name[in],
                                     (int)mis_off);
                            opt_case(variant, adt, pdt, 0, 1 << in, &tm, d);
                        }
                    }
                    /* every array off by the same 1, 2, 3 elements: a head on every chunk */
                    for (mis_off = 1; mis_off <= 3; mis_off++) {
                        snprintf(d, sizeof d, "every array misaligned by %d", (int)mis_off);
                        opt_case(variant, adt, pdt, 1, (1 << IN_NUM) - 1, &tm, d);
                        if (pdt == ZERO_F32) opt_case(variant, adt, pdt, 0, (1 << IN_NUM) - 1, &tm, d);
                    }
                }
                mis_off = 1;
                test_end();
            }
}

/* 2^20 + 3 elements: 64 full chunks, every third at odd indices, then 3 */
static void test_opt_large(void) {
    zero__kchunk cs[65];
    chunk_table t = { cs, 0, 0, 0, 0 };
    int i;
    for (i = 0; i < 64; i++) add_chunk(&t, ZERO__KCHUNK, i % 3 == 1);
    add_chunk(&t, 3, 1);
    opt_case(V_ADAMW, ZERO_BF16, ZERO_BF16, 1, 0, &t, "large");
}

/* bf16 moments (ON OPTIMIZER STATES): the same kernel with k.sdt = ZERO_BF16, against
   zero__opt_call's widen, update, narrow; every variant with moments, the vector path and
   its heads, and the moments one element off (the scalar path) */
static void test_opt_bf16_states(void) {
    static const int32_t lens[] = { 1, 3, 4, 5, 33, 257, 2052, ZERO__KCHUNK };
    static const int32_t peel_lens[] = { 1, 2, 3, 5, 8, 33, 1029 };
    zero__kchunk cs[2 * NELEMS(lens)], cp[3 * NELEMS(peel_lens)];
    int variant, adt, i, sh;
    opt_sdt = ZERO_BF16;
    for (variant = 0; variant < V_NUM; variant++)
        for (adt = ZERO_F32; adt <= ZERO_BF16; adt++) {
            chunk_table ts = { cs, 0, 0, 0, 0 }, tp = { cp, 0, 0, 0, 0 };
            if (variant == V_SGD_PLAIN) continue;       /* no moments */
            for (i = 0; i < NELEMS(lens); i++) { add_chunk(&ts, lens[i], 0); add_chunk(&ts, lens[i], 1); }
            for (sh = 1; sh <= 3; sh++)
                for (i = 0; i < NELEMS(peel_lens); i++) add_chunk_at(&tp, peel_lens[i], sh, sh, sh);
            test_begin("opt_bf16_states_%s_g%d", variant_name[variant], adt);
            opt_case(variant, adt, ZERO_BF16, 1, 0, &ts, "bf16 moments, sizes");
            opt_case(variant, adt, ZERO_F32, 0, 0, &ts, "bf16 moments, f32 params");
            opt_case(variant, adt, ZERO_BF16, 1, 0, &tp, "bf16 moments, heads");
            mis_off = 1;
            opt_case(variant, adt, ZERO_BF16, 1, 1 << IN_M, &ts, "bf16 moments, m misaligned by 1");
            test_end();
        }
    opt_sdt = ZERO_F32;
}

/* q8 moments (zero__k_opt_q8) against the CPU's definition, bitwise: per q8 block with
   chunks, decode (zero__q8dec_scalar), the element math of zero__k_opt, encode
   (zero__q8enc_scalar); a block without chunks untouched. The blocks: chunks that cover part
   of a block, two chunks in one block with a gap, a whole block, none (left alone), a tiny
   scale (below 2^-60), a NaN gradient (the block becomes NaN), a block whose moments are all
   0; grads, master and params at their own indices. */
#define OQ_NQ 7
static void opt_q8_case(int variant, int adt, int pdt) {
    static const int32_t cs[][2] = { { 3, 197 }, { 512, 100 }, { 642, 114 }, { 768, 256 }, { 1034, 6 }, { 1280, 6 }, { 1536, 256 } };
    const int nc = NELEMS(cs), nst = OQ_NQ * ZERO__QB, nk = variant == V_ADAMW ? 2 : variant == V_SGD_PLAIN ? 0 : 1;
    zero__kchunk ch[NELEMS(cs)];
    int64_t first[OQ_NQ + 1], ng = 0, np = 0, i, b;
    zero__optk k;
    size_t mb = (size_t)nst + 4 * OQ_NQ;
    unsigned char *q[2], *qr[2], *qg[2];
    float *w, *wr, *wg;
    void *g, *pr, *pg, *dg, *dw, *dp, *dq[2] = { NULL, NULL }, *dch, *dfirst;
    int c, kk, rc;
    make_optk(&k, variant, adt, pdt);
    for (c = 0; c < nc; c++) {         /* grads and params at their own places, 5 and 3 apart */
        ch[c].state_idx = cs[c][0];
        ch[c].n = cs[c][1];
        ch[c].grad_idx = ng + 5;
        ch[c].param_idx = np + 3;
        ch[c].decay = c & 1;
        ng += 5 + cs[c][1];
        np += 3 + cs[c][1];
    }
    for (b = 0, c = 0; b <= OQ_NQ; b++) {
        while (c < nc && ch[c].state_idx < b * ZERO__QB) c++;
        first[b] = c;
    }
    g = malloc((size_t)ng * esz(adt));
    fill(g, adt, ng, 0);
    zero__st(g, ch[6].grad_idx + 17, adt, zero__bits_f32(0x7fc00000u));    /* block 6: a NaN */
    for (i = 0; i < ch[4].n; i++) zero__st(g, ch[4].grad_idx + i, adt, 1e-25f * (float)(i + 1));   /* block 4 stays tiny */
    w = (float *)malloc(4 * (size_t)nst);
    fill(w, ZERO_F32, nst, 0);
    pr = calloc((size_t)np + 1, 4);
    for (kk = 0; kk < 2; kk++) {
        q[kk] = (unsigned char *)malloc(mb);
        for (i = 0; i < nst; i++) q[kk][i] = (unsigned char)rnd32();
        for (b = 0; b < OQ_NQ; b++) {
            float sc = b == 4 ? 3e-20f : 0.01f + unif();
            if (b == 5) { sc = 0.0f; memset(q[kk] + b * ZERO__QB, 0, ZERO__QB); }     /* all zero */
            memcpy(q[kk] + nst + 4 * b, &sc, 4);
        }
        qr[kk] = (unsigned char *)malloc(mb);
        memcpy(qr[kk], q[kk], mb);
        qg[kk] = (unsigned char *)malloc(mb);
    }
    /* the reference */
    wr = (float *)malloc(4 * (size_t)nst);
    memcpy(wr, w, 4 * (size_t)nst);
    for (b = 0; b < OQ_NQ; b++) {
        float mv[2][ZERO__QB];
        if (first[b] == first[b + 1]) continue;
        for (kk = 0; kk < nk; kk++) {
            float sc;
            memcpy(&sc, qr[kk] + nst + 4 * b, 4);
            zero__q8dec_scalar(mv[kk], qr[kk] + b * ZERO__QB, sc, kk);
        }
        for (c = (int)first[b]; c < first[b + 1]; c++)
            for (i = 0; i < ch[c].n; i++) {
                int l = (int)(ch[c].state_idx - b * ZERO__QB + i);
                float gg = zero__ld(g, ch[c].grad_idx + i, adt) * k.gscale, *ww = &wr[ch[c].state_idx + i];
                if (variant == V_ADAMW) zero__adamw_elem(ww, &mv[0][l], &mv[1][l], gg, &k.ah, ch[c].decay);
                else if (variant == V_LION) zero__lion_elem(ww, &mv[0][l], gg, &k.ah, ch[c].decay);
                else zero__sgd_elem(ww, nk ? &mv[0][l] : NULL, gg, &k.sh, ch[c].decay);
                if (pdt != ZERO_F32) zero__st(pr, ch[c].param_idx + i, pdt, *ww);
            }
        for (kk = 0; kk < nk; kk++) {
            float sc = zero__q8enc_scalar(qr[kk] + b * ZERO__QB, mv[kk], kk);
            memcpy(qr[kk] + nst + 4 * b, &sc, 4);
        }
    }
    /* the kernel: master in w when pdt is not f32, else the f32 params are the weights
       (indexed by param_idx: copy w's state values there) */
    pg = calloc((size_t)np + 1, 4);
    if (pdt == ZERO_F32) {
        for (c = 0; c < nc; c++) memcpy((float *)pg + ch[c].param_idx, w + ch[c].state_idx, 4 * (size_t)ch[c].n);
        for (c = 0; c < nc; c++) memcpy((float *)pr + ch[c].param_idx, wr + ch[c].state_idx, 4 * (size_t)ch[c].n);
    }
    dg = dup_to_dev(g, (size_t)ng * esz(adt));
    dw = dup_to_dev(w, 4 * (size_t)nst);
    dp = dup_to_dev(pg, 4 * (size_t)np + 4);
    for (kk = 0; kk < nk; kk++) dq[kk] = dup_to_dev(q[kk], mb);
    dch = dup_to_dev(ch, sizeof ch);
    dfirst = dup_to_dev(first, sizeof first);
    rc = zero__k_opt_q8(&k, (const zero__kchunk *)dch, (const int64_t *)dfirst, OQ_NQ, dg, dp,
                        pdt == ZERO_F32 ? NULL : (float *)dw, dq[0], dq[1], nst, NULL);
    if (sync_ok(rc, "zero__k_opt_q8")) {
        wg = (float *)malloc(4 * (size_t)nst);
        to_host(wg, dw, 4 * (size_t)nst);
        to_host(pg, dp, 4 * (size_t)np + 4);
        if (pdt != ZERO_F32) compare("q8: master", wr, wg, nst, ZERO_F32);
        compare("q8: params", pr, pg, np, pdt == ZERO_F32 ? ZERO_F32 : pdt);
        for (kk = 0; kk < nk; kk++) {
            to_host(qg[kk], dq[kk], mb);
            compare_bytes(kk ? "q8: v codes and scales" : "q8: m codes and scales", qr[kk], qg[kk], (int64_t)mb);
        }
        if (nk) {               /* block 6 went NaN, block 4 stayed below 2^-60; block 1 (no chunks) kept its bytes */
            float s6, s4;
            memcpy(&s6, qg[0] + nst + 4 * 6, 4);
            memcpy(&s4, qg[0] + nst + 4 * 4, 4);
            CHECK(s6 != s6 && s4 > 0 && s4 < 8.67361738e-19f && memcmp(qg[0] + ZERO__QB, q[0] + ZERO__QB, ZERO__QB) == 0,
                  "the NaN block's scale %g, the tiny block's %g; the block without chunks changed", (double)s6, (double)s4);
        }
        free(wg);
    }
    cudaFree(dg); cudaFree(dw); cudaFree(dp); cudaFree(dq[0]); cudaFree(dq[1]); cudaFree(dch); cudaFree(dfirst);
    for (kk = 0; kk < 2; kk++) { free(q[kk]); free(qr[kk]); free(qg[kk]); }
    free(g); free(w); free(wr); free(pr); free(pg);
}
static void test_opt_q8_states(void) {
    int variant, adt;
    zero__optk k;
    float x;
    for (variant = 0; variant < V_NUM; variant++)
        for (adt = ZERO_F32; adt <= ZERO_BF16; adt++) {
            test_begin("opt_q8_states_%s_g%d", variant_name[variant], adt);
            opt_q8_case(variant, adt, ZERO_BF16);
            opt_q8_case(variant, adt, ZERO_F32);
            test_end();
        }
    test_begin("opt_q8_refuses");
    make_optk(&k, V_ADAMW, ZERO_F32, ZERO_F32);
    CHECK(zero__k_opt_q8(&k, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL) == 0, "no blocks must return 0");
    CHECK(zero__k_opt_q8(&k, (const zero__kchunk *)&x, (const int64_t *)&x, 1, &x, &x, &x, &x, &x, 100, NULL) ==
          (int)cudaErrorInvalidValue, "nst not nq blocks must be refused");
    CHECK(zero__k_opt_q8(&k, (const zero__kchunk *)&x, (const int64_t *)&x, 1, &x, &x, &x, NULL, &x, 256, NULL) ==
          (int)cudaErrorInvalidValue, "AdamW without m must be refused");
    test_end();
}

static void test_opt_refuses(void) {
    zero__optk k;
    float x;
    make_optk(&k, V_ADAMW, ZERO_F32, ZERO_F32);
    CHECK(zero__k_opt(&k, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL) == 0, "zero chunks must return 0");
    CHECK(zero__k_opt(&k, (const zero__kchunk *)&x, 1, &x, &x, &x, NULL, &x, NULL) == (int)cudaErrorInvalidValue,
          "AdamW without m must be refused");
    k.pdt = ZERO_BF16;
    CHECK(zero__k_opt(&k, (const zero__kchunk *)&x, 1, &x, &x, NULL, &x, &x, NULL) == (int)cudaErrorInvalidValue,
          "bf16 params without a master must be refused");
    make_optk(&k, V_LION, ZERO_F32, ZERO_F32);
    CHECK(zero__k_opt(&k, (const zero__kchunk *)&x, 1, &x, &x, &x, NULL, NULL, NULL) == (int)cudaErrorInvalidValue,
          "Lion without m must be refused");
    k.opt = ZERO_OPTIM_NUM;
    CHECK(zero__k_opt(&k, (const zero__kchunk *)&x, 1, &x, &x, &x, &x, &x, NULL) == (int)cudaErrorInvalidValue,
          "an unknown optimizer must be refused");
}

/* ---- sum of squares ---- */
/* blocks of lens[0..nb) over one gradient array (contiguous; with odd, every other block
   starts one element later), the base passed mis elements off its allocation */
static void sumsq_case(int dt, const int64_t *lens, int64_t nb, int odd, int mis, const char *what) {
    zero__knblk *blk = (zero__knblk *)malloc(sizeof(zero__knblk) * (size_t)nb);
    double *want = (double *)malloc(sizeof(double) * (size_t)(nb + 1));
    double *got = (double *)malloc(sizeof(double) * (size_t)(nb + 1));
    double *dout;
    void *g, *dg, *dblk;
    int64_t b, i, n = 0;
    int rc;
    for (b = 0; b < nb; b++) {
        if (odd && (b & 1)) n++;
        blk[b].idx = n;
        blk[b].n = lens[b];
        n += lens[b];
    }
    n += 1;                              /* room for the offset */
    g = malloc((size_t)n * esz(dt));
    for (i = 0; i < n; i++) {            /* magnitudes over 2^-30..2^30, so the lane sums round */
        float x = zero__bits_f32(((rnd32() & 1u) << 31) | ((97u + rnd32() % 60u) << 23) | (rnd32() & 0x7fffffu));
        if (dt == ZERO_F16) x = x * 0x1p-18f;
        zero__st(g, i, dt, x);
    }
    for (b = 0; b < nb; b++) want[b] = zero__sumsq_scalar(at(g, mis + blk[b].idx, dt), blk[b].n, dt);
    dg = dup_to_dev(g, (size_t)n * esz(dt));
    dblk = dup_to_dev(blk, sizeof(zero__knblk) * (size_t)nb);
    want[nb] = -7.0;                     /* one past the end: left alone */
    dout = (double *)dalloc(sizeof(double) * (size_t)(nb + 1));
    cudaMemcpy(dout + nb, want + nb, sizeof(double), cudaMemcpyHostToDevice);
    rc = zero__k_sumsq(at(dg, mis, dt), dt, (const zero__knblk *)dblk, nb, dout, NULL);
    if (sync_ok(rc, "zero__k_sumsq")) {
        int bad = 0;
        to_host(got, dout, sizeof(double) * (size_t)(nb + 1));
        for (b = 0; b <= nb && bad < 3; b++)
            if (memcmp(&want[b], &got[b], 8) != 0)
                bad += !CHECK(0, "%s: dt %d block %lld of %lld (n %lld): cpu %.17g gpu %.17g", what, dt, (long long)b,
                              (long long)nb, b < nb ? (long long)blk[b].n : -1LL, want[b], got[b]);
    }
    cudaFree(dg); cudaFree(dblk); cudaFree(dout);
    free(g); free(blk); free(want); free(got);
}

static void test_sumsq(void) {
    /* around multiples of 64 (a lane group's step: 8 loads of 8 elements) and of 256 */
    static const int64_t around[] = { 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 319, 320, 321,
                                      511, 512, 513, 767, 768, 769, 1023, 1024, 1025 };
    /* block counts around 4 (norm blocks per warp) and 32 (per CUDA block) */
    static const int counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 31, 32, 33 };
    int64_t lens[NELEMS(sizes) + 3], rl[64], small[73], mixed[33];
    int dt, i, nr, c;
    for (i = 0; i < NELEMS(sizes); i++) lens[i] = sizes[i];
    for (i = 0; i < 3; i++) lens[NELEMS(sizes) + i] = ZERO__NORM_BLOCK - 1 + i;
    for (i = 0; i < NELEMS(small); i++) small[i] = i;
    for (dt = ZERO_F32; dt <= ZERO_F16; dt++) {
        int64_t tot = 0;
        test_begin("sumsq_dt%d", dt);
        sumsq_case(dt, lens, NELEMS(lens), 1, 0, "sizes");
        sumsq_case(dt, lens, NELEMS(lens), 1, 1, "sizes, misaligned");
        sumsq_case(dt, small, NELEMS(small), 1, 0, "every length 0..72");    /* every lane count, one step and more */
        sumsq_case(dt, around, NELEMS(around), 1, 1, "around multiples of 64");
        for (c = 0; c < NELEMS(counts); c++) {  /* lengths that differ within a warp: long, short, empty */
            for (i = 0; i < counts[c]; i++) mixed[i] = i % 4 == 1 ? ZERO__NORM_BLOCK + 1 : (int64_t)(rnd32() % 70);
            sumsq_case(dt, mixed, counts[c], 1, 0, "block counts");
        }
        for (nr = 0; nr < 64 && tot < 40000; nr++) {          /* as zero.h cuts a slice, mostly */
            rl[nr] = rnd32() % 3 ? ZERO__NORM_BLOCK : rnd32() % 1100;
            tot += rl[nr];
        }
        sumsq_case(dt, rl, nr, 1, 0, "random blocks");
        test_end();
    }
    test_begin("sumsq_large");
    {
        int64_t *ll = (int64_t *)malloc(sizeof(int64_t) * 1024), nb = 0, left = LARGE;
        ll[nb++] = ((int64_t)1 << 18) + 5;
        for (left -= ll[0]; left > 0; left -= ll[nb - 1]) ll[nb++] = left < ZERO__NORM_BLOCK ? left : ZERO__NORM_BLOCK;
        sumsq_case(ZERO_BF16, ll, nb, 0, 0, "large");
        free(ll);
    }
    CHECK(zero__k_sumsq(NULL, ZERO_F32, NULL, 0, NULL, NULL) == 0, "zero blocks must return 0");
    test_end();
}

/* ---- sum_into ---- */
/* out (rdt) = [out +] ins (sdt), count elements. The inputs are slices of one allocation,
   each starting at a multiple of 8 elements; mis: -1 none, 0 out, k + 1 input k one element
   off; alias: out is input nin / 2 (same dtypes). */
static void sum_case(int rdt, int sdt, int nin, int64_t count, int accumulate, int alias, int mis) {
    const int64_t stride = rup8(count + 3);              /* per input: count, the offset, one past */
    const int64_t oo = (mis == 0) * mis_off, no = count + 3;
    const void *ins[ZERO__K_MAXIN], *dins[ZERO__K_MAXIN];
    void *hin = malloc((size_t)(nin * stride) * esz(sdt)), *out = malloc((size_t)no * esz(rdt));
    void *got = malloc((size_t)no * esz(rdt)), *din, *dout;
    char d[96];
    int k, rc, a = alias && rdt == sdt ? nin / 2 : -1;
    fill(hin, sdt, nin * stride, 0);
    fill(out, rdt, no, 0);
    if (a >= 0) memcpy(at(out, oo, rdt), at(hin, a * stride, sdt), (size_t)count * esz(rdt));
    din = dup_to_dev(hin, (size_t)(nin * stride) * esz(sdt));
    dout = dup_to_dev(out, (size_t)no * esz(rdt));
    for (k = 0; k < nin; k++) {
        ins[k] = at(hin, k * stride + (mis == k + 1) * mis_off, sdt);
        dins[k] = at(din, k * stride + (mis == k + 1) * mis_off, sdt);
    }
    if (a >= 0) { ins[a] = at(out, oo, rdt); dins[a] = at(dout, oo, rdt); }
    rc = zero__k_sum_into(at(dout, oo, rdt), rdt, dins, nin, sdt, count, accumulate, NULL);
    zero__sum_into(at(out, oo, rdt), rdt, ins, nin, sdt, count, accumulate);
    snprintf(d, sizeof d, "sum_into out (nin %d, count %lld, acc %d, alias %d, misaligned %d by %d)", nin,
             (long long)count, accumulate, a >= 0, mis, (int)mis_off);
    if (sync_ok(rc, d)) {
        to_host(got, dout, (size_t)no * esz(rdt));
        compare(d, out, got, no, rdt);
    }
    cudaFree(din); cudaFree(dout);
    free(hin); free(out); free(got);
}

static void test_sum_into(void) {
    int rdt, sdt, i, nin, k;
    for (rdt = ZERO_F32; rdt <= ZERO_F16; rdt++)
        for (sdt = ZERO_F32; sdt <= ZERO_F16; sdt++) {
            test_begin("sum_into_out%d_in%d", rdt, sdt);
            for (nin = 1; nin <= 3; nin++)
                for (i = 0; i < NELEMS(sizes); i++)
                    sum_case(rdt, sdt, nin, sizes[i], (i + nin) & 1, (i + nin + rdt) % 3 == 0, -1);
            for (mis_off = 1; mis_off <= 2; mis_off++)
                for (k = 0; k <= 3; k++) {       /* out, then each input alone, one or two elements off */
                    sum_case(rdt, sdt, 3, 33, k & 1, 0, k);
                    sum_case(rdt, sdt, 3, 16385, !(k & 1), 0, k);
                }
            mis_off = 1;
            sum_case(rdt, sdt, 8, 1029, rdt & 1, 1, -1);
            sum_case(rdt, sdt, ZERO__K_MAXIN, 3, 1, 0, -1);
            sum_case(rdt, sdt, ZERO__K_MAXIN, 1029, 0, 1, -1);
            test_end();
        }
    test_begin("sum_into_large");
    sum_case(ZERO_F32, ZERO_BF16, 2, LARGE, 1, 0, -1);
    test_end();
    {
        const void *ins[65] = { 0 };
        float x;
        for (k = 0; k < 65; k++) ins[k] = &x;
        test_begin("sum_into_refuses");
        CHECK(zero__k_sum_into(&x, ZERO_F32, ins, 65, ZERO_F32, 1, 0, NULL) == (int)cudaErrorInvalidValue,
              "nin 65 must be refused");
        CHECK(zero__k_sum_into(&x, ZERO_F32, ins, 1, ZERO_F32, 0, 0, NULL) == 0, "count 0 must return 0");
        test_end();
    }
}

/* ---- int8 quantization ---- */
/* x (n + 2 elements of dt): ordinary values, n / 2500 NaN / inf (poisoned blocks), every
   block b with b % 7 == 3 all zero */
static void quant_values(void *x, int dt, int64_t n, int64_t off, int block, int edge) {
    int64_t i;
    fill(x, dt, n + 2, edge);
    for (i = 0; i < n / 2500; i++)
        zero__st(x, off + rnd32() % n, dt, zero__bits_f32(i & 1 ? 0xff800000u : 0x7fc00000u | (rnd32() & 0xffffu)));
    for (i = 0; i < n; i++) if (i / block % 7 == 3) zero__st(x, off + i, dt, 0.0f);
}

enum { Q_X, Q_Q, Q_S, Q_BACK };         /* a quant case's arrays: mis (one element off) */
/* quantize x (dt) into q, scales, then dequantize into back; mis: -1, or the Q_* one element off */
static void quant_case(int dt, int64_t n, int block, int mis) {
    const int64_t nb = (n + block - 1) / block, ox = mis == Q_X, oq = mis == Q_Q, os = mis == Q_S, ob = mis == Q_BACK;
    void *x = malloc((size_t)(n + 2) * 4), *back = malloc((size_t)(n + 2) * 4), *gback = malloc((size_t)(n + 2) * 4);
    int8_t *q = (int8_t *)malloc((size_t)n + 2), *gq = (int8_t *)malloc((size_t)n + 2);
    float *s = (float *)malloc((size_t)(nb + 2) * 4), *gs = (float *)malloc((size_t)(nb + 2) * 4);
    void *dx, *dq, *ds, *dback;
    char d[96];
    int64_t i;
    int rc;
    quant_values(x, dt, n, ox, block, 0);
    for (i = 0; i < n + 2; i++) q[i] = (int8_t)rnd32();
    fill(s, ZERO_F32, nb + 2, 0);
    fill(back, dt, n + 2, 0);
    dx = dup_to_dev(x, (size_t)(n + 2) * esz(dt));
    dq = dup_to_dev(q, (size_t)n + 2);
    ds = dup_to_dev(s, (size_t)(nb + 2) * 4);
    dback = dup_to_dev(back, (size_t)(n + 2) * esz(dt));
    zero__quantize_i8(q + oq, s + os, at(x, ox, dt), dt, n, block);
    zero__dequantize_i8(at(back, ob, dt), dt, q + oq, s + os, n, block);
    snprintf(d, sizeof d, "dt %d n %lld block %d misaligned %d", dt, (long long)n, block, mis);
    rc = zero__k_quantize_i8((int8_t *)dq + oq, (float *)ds + os, at(dx, ox, dt), dt, n, block, NULL);
    if (sync_ok(rc, "zero__k_quantize_i8")) {
        to_host(gq, dq, (size_t)n + 2);
        to_host(gs, ds, (size_t)(nb + 2) * 4);
        if (compare_bytes(d, q, gq, n + 2)) CHECK(0, "%s: q differs", d);
        if (compare(d, s, gs, nb + 2, ZERO_F32)) CHECK(0, "%s: scales differ", d);
    }
    rc = zero__k_dequantize_i8(at(dback, ob, dt), dt, (const int8_t *)dq + oq, (const float *)ds + os, n, block, NULL);
    if (sync_ok(rc, "zero__k_dequantize_i8")) {
        to_host(gback, dback, (size_t)(n + 2) * esz(dt));
        if (compare(d, back, gback, n + 2, dt)) CHECK(0, "%s: dequantized x differs", d);
    }
    cudaFree(dx); cudaFree(dq); cudaFree(ds); cudaFree(dback);
    free(x); free(back); free(gback); free(q); free(gq); free(s); free(gs);
}

static void test_quant(void) {
    static const int blocks[] = { 1, 5, 32, 256, 300, 2048 };
    int dt, i, b, mis;
    for (dt = ZERO_F32; dt <= ZERO_F16; dt++) {
        test_begin("quant_dt%d", dt);
        for (i = 0; i < NELEMS(sizes); i++)
            for (b = 0; b < NELEMS(blocks); b++)
                if ((sizes[i] + blocks[b] - 1) / blocks[b] <= 600 && (sizes[i] > 0 || b == 0))
                    quant_case(dt, sizes[i], blocks[b], -1);
        for (mis = Q_X; mis <= Q_BACK; mis++) quant_case(dt, 16385, 300, mis);
        test_end();
    }
    test_begin("quant_large");
    quant_case(ZERO_BF16, LARGE, 2048, -1);
    test_end();
}

/* ---- ZeRO++'s payloads ---- */
/* min(np, 3) payloads of n values of dt (the first with NaN / inf / subnormal values; all-zero
   blocks), encoded from x one element off its allocation with xmis, each checked bytewise with
   4 bytes past its end; then out (rdt) = [out +] the np payloads (payload k % 3), out one
   element off with omis, accumulate 0 and 1 */
static void qp_case(int bits, int dt, int rdt, int64_t n, int block, int np, int xmis, int omis) {
    const int64_t pb = zero__qp_bytes(n, bits, block), npay = np < 3 ? np : 3;
    void *x = malloc((size_t)(n + 2) * 4), *out = malloc((size_t)(n + 2) * 4), *ref = malloc((size_t)(n + 2) * 4);
    void *got = malloc((size_t)(n + 2) * 4 > (size_t)pb + 4 ? (size_t)(n + 2) * 4 : (size_t)pb + 4);
    char *hp = (char *)malloc((size_t)(pb + 4) * 3);
    const void *hps[ZERO__K_MAXIN];
    void *dps[ZERO__K_MAXIN], *dx, *dout;
    char d[128];
    int64_t k;
    int rc, acc;
    snprintf(d, sizeof d, "bits %d dt %d rdt %d n %lld block %d np %d x off %d out off %d", bits, dt, rdt, (long long)n,
             block, np, xmis, omis);
    for (k = 0; k < npay; k++) {
        char *h = hp + k * (pb + 4);
        quant_values(x, dt, n, xmis, block, k == 0);
        memset(h, 0xa5, (size_t)pb + 4);
        dps[k] = dup_to_dev(h, (size_t)pb + 4);
        zero__qp_encode(h, at(x, xmis, dt), dt, n, bits, block);
        dx = dup_to_dev(x, (size_t)(n + 2) * esz(dt));
        rc = zero__k_qp_encode(dps[k], at(dx, xmis, dt), dt, n, bits, block, NULL);
        if (sync_ok(rc, "zero__k_qp_encode")) {
            to_host(got, dps[k], (size_t)pb + 4);
            if (compare_bytes(d, h, got, pb + 4)) CHECK(0, "%s: payload %d differs", d, (int)k);
        }
        cudaFree(dx);
    }
    for (k = 0; k < np; k++) { hps[k] = hp + (k % 3) * (pb + 4); dps[k] = dps[k % 3]; }
    fill(out, rdt, n + 2, 0);
    dout = dalloc((size_t)(n + 2) * esz(rdt));
    for (acc = 0; acc < 2; acc++) {
        memcpy(ref, out, (size_t)(n + 2) * esz(rdt));
        zero__qp_sum(at(ref, omis, rdt), rdt, hps, np, n, bits, block, acc);
        cudaMemcpy(dout, out, (size_t)(n + 2) * esz(rdt), cudaMemcpyHostToDevice);
        rc = zero__k_qp_sum(at(dout, omis, rdt), rdt, (const void *const *)dps, np, n, bits, block, acc, NULL);
        if (sync_ok(rc, "zero__k_qp_sum")) {
            to_host(got, dout, (size_t)(n + 2) * esz(rdt));
            if (compare(d, ref, got, n + 2, rdt)) CHECK(0, "%s: qp_sum%s differs", d, acc ? " (accumulate)" : "");
        }
    }
    for (k = 0; k < npay; k++) cudaFree(dps[k]);
    cudaFree(dout);
    free(x); free(out); free(ref); free(got); free(hp);
}

static void test_qp(void) {
    static const int blocks[] = { 1, 5, 7, 32, 256, 300, 2048 };
    int dt, b, bits, i, k;
    for (bits = 4; bits <= 8; bits += 4)
        for (dt = ZERO_F32; dt <= ZERO_F16; dt++) {
            test_begin("qp_int%d_dt%d", bits, dt);
            for (i = 0; i < NELEMS(sizes); i++) {        /* every size, the blocks in turn (at most 600 of them) */
                int block = blocks[(i + dt) % NELEMS(blocks)];
                if ((sizes[i] + block - 1) / block > 600) block = 300;
                qp_case(bits, dt, (dt + i) % 3 + 1, sizes[i], block, 3, 0, 0);
            }
            qp_case(bits, dt, dt, 1029, 7, 3, 1, 0);        /* x alone one element off */
            qp_case(bits, dt, dt, 1029, 5, 1, 0, 1);        /* out alone one element off (out's dtype: dt) */
            test_end();
        }
    for (bits = 4; bits <= 8; bits += 4) {            /* every block at 4101 values; 64 payloads once */
        test_begin("qp_int%d_blocks", bits);
        for (b = 0; b < NELEMS(blocks); b++)
            qp_case(bits, (b + bits / 4) % 3 + 1, (b + bits / 4 + 1) % 3 + 1, 4101, blocks[b], b == 3 ? ZERO__K_MAXIN : 3,
                    0, 0);
        test_end();
    }
    test_begin("qp_large");
    qp_case(4, ZERO_BF16, ZERO_F32, LARGE, 2048, 1, 0, 0);
    test_end();
    test_begin("qp_refuses");
    {
        void *d = dalloc(4096), *p[ZERO__K_MAXIN + 1];
        for (k = 0; k <= ZERO__K_MAXIN; k++) p[k] = d;
        CHECK(zero__k_qp_sum(d, ZERO_F32, (const void *const *)p, ZERO__K_MAXIN + 1, 10, 8, 4, 0, NULL) ==
              (int)cudaErrorInvalidValue, "%d payloads were taken", ZERO__K_MAXIN + 1);
        CHECK(zero__k_qp_encode((char *)d + 2, d, ZERO_F32, 10, 8, 4, NULL) == (int)cudaErrorInvalidValue,
              "a misaligned payload was taken");
        cudaFree(d);
    }
    test_end();
}

/* ---- bias, GELU, cross-entropy ---- */
/* y[r * (cols + 3) + c] += b[c] (bdt), rows x cols; mis: 1 y, 2 b one element off */
static void bias_add_case(int bdt, int64_t rows, int64_t cols, int mis) {
    const int64_t ld = cols + 3, ny = rows * ld + 2, oy = mis == 1, ob = mis == 2;
    float *y = (float *)malloc((size_t)ny * 4), *yg = (float *)malloc((size_t)ny * 4), *dyy;
    void *b = malloc((size_t)(cols + 2) * 4), *db;
    int64_t r, c;
    char d[96];
    int rc;
    fill(y, ZERO_F32, ny, 0);
    fill(b, bdt, cols + 2, 0);
    dyy = (float *)dup_to_dev(y, (size_t)ny * 4);
    db = dup_to_dev(b, (size_t)(cols + 2) * esz(bdt));
    rc = zero__k_bias_add(dyy + oy, ld, at(db, ob, bdt), bdt, rows, cols, NULL);
    for (c = 0; c < cols; c++) {         /* as zero__cpu_bias_add */
        float bc = zero__ld(b, ob + c, bdt);
        for (r = 0; r < rows; r++) y[oy + r * ld + c] += bc;
    }
    snprintf(d, sizeof d, "bias_add (bdt %d, %lld x %lld, misaligned %d)", bdt, (long long)rows, (long long)cols, mis);
    if (sync_ok(rc, d)) { to_host(yg, dyy, (size_t)ny * 4); compare(d, y, yg, ny, ZERO_F32); }
    cudaFree(dyy); cudaFree(db);
    free(y); free(yg); free(b);
}
/* gb[c] (gdt) += sum_r dy[r * (cols + 3) + c]; mis: 1 gb, 2 dy one element off */
static void bias_grad_case(int gdt, int64_t rows, int64_t cols, int mis) {
    const int64_t ld = cols + 3, ny = rows * ld + 2, og = mis == 1, oy = mis == 2;
    float *dy = (float *)malloc((size_t)ny * 4), *s = (float *)malloc((size_t)(cols + 1) * 4), *ddy;
    void *gb = malloc((size_t)(cols + 2) * 4), *gg = malloc((size_t)(cols + 2) * 4), *dgb;
    int64_t r, c;
    char d[96];
    int rc;
    fill(dy, ZERO_F32, ny, 0);
    fill(gb, gdt, cols + 2, 0);
    ddy = (float *)dup_to_dev(dy, (size_t)ny * 4);
    dgb = dup_to_dev(gb, (size_t)(cols + 2) * esz(gdt));
    rc = zero__k_bias_grad(at(dgb, og, gdt), gdt, ddy + oy, ld, rows, cols, NULL);
    for (c = 0; c < cols; c++) {         /* as zero_tiled_linear_backward */
        float t = 0.0f;
        for (r = 0; r < rows; r++) t += dy[oy + r * ld + c];
        s[c] = t;
    }
    zero_add_f32(at(gb, og, gdt), (zero_dtype)gdt, s, cols);
    snprintf(d, sizeof d, "bias_grad (gdt %d, %lld x %lld, misaligned %d)", gdt, (long long)rows, (long long)cols, mis);
    if (sync_ok(rc, d)) { to_host(gg, dgb, (size_t)(cols + 2) * esz(gdt)); compare(d, gb, gg, cols + 2, gdt); }
    cudaFree(ddy); cudaFree(dgb);
    free(dy); free(s); free(gb); free(gg);
}

static void test_bias(void) {
    int dt, i, mis;
    for (dt = ZERO_F32; dt <= ZERO_F16; dt++) {
        test_begin("bias_dt%d", dt);
        for (i = 0; i < NELEMS(sizes); i++) {
            bias_add_case(dt, 3, sizes[i], 0);
            bias_grad_case(dt, 3, sizes[i], 0);
        }
        bias_add_case(dt, 300, 33, 0);
        bias_grad_case(dt, 300, 33, 0);
        bias_add_case(dt, 0, 5, 0);
        bias_grad_case(dt, 0, 5, 0);               /* gb += 0 */
        for (mis = 1; mis <= 2; mis++) {
            bias_add_case(dt, 5, 257, mis);
            bias_grad_case(dt, 5, 257, mis);
        }
        test_end();
    }
    test_begin("bias_large");
    bias_add_case(ZERO_BF16, 7, 149797, 0);        /* 2^20 + 3 elements */
    bias_grad_case(ZERO_BF16, 7, 149797, 0);
    test_end();
}

static int close_to(float want, float got, float tol) {
    return fabsf(want - got) <= tol * (1.0f + fabsf(want)) || (want != want && got != got);
}

/* y = gelu(x) and dx = dy * gelu'(x) over n; mis: the one pointer one element off (1 y,
   2 x of the forward; 3 dx, 4 x, 5 dy of the backward) */
static void gelu_case(int64_t n, int mis) {
    const int64_t nn = n + 2;
    float *x = (float *)malloc((size_t)nn * 4), *dy = (float *)malloc((size_t)nn * 4), *y = (float *)malloc((size_t)nn * 4);
    float *dx = (float *)malloc((size_t)nn * 4), *g = (float *)malloc((size_t)nn * 4);
    float *dxd, *dyd, *yd, *dxo;
    const int64_t oy = mis == 1, ox = mis == 2, odx = mis == 3, ox2 = mis == 4, ody = mis == 5;
    int64_t i, bad = 0;
    int rc;
    for (i = 0; i < nn; i++) { x[i] = (unif() - 0.5f) * 16.0f; dy[i] = unif() - 0.5f; y[i] = dx[i] = -7.0f; }
    dxd = (float *)dup_to_dev(x, (size_t)nn * 4);
    dyd = (float *)dup_to_dev(dy, (size_t)nn * 4);
    yd = (float *)dup_to_dev(y, (size_t)nn * 4);
    dxo = (float *)dup_to_dev(dx, (size_t)nn * 4);
    for (i = 0; i < n; i++) {            /* examples/train_mlp.c's gelu_forward / gelu_backward */
        float xi = x[ox + i], xj = x[ox2 + i], th = zero_tanhf(0.7978845608028654f * (xi + 0.044715f * xi * xi * xi));
        float tj = zero_tanhf(0.7978845608028654f * (xj + 0.044715f * xj * xj * xj));
        y[oy + i] = 0.5f * xi * (1.0f + th);
        dx[odx + i] = dy[ody + i] * (0.5f * (1.0f + tj) + 0.5f * xj * (1.0f - tj * tj) * 0.7978845608028654f *
                                                             (1.0f + 3.0f * 0.044715f * xj * xj));
        if (bad < 3)
            bad += !CHECK(y[oy + i] == zero__gelu(xi, zero__gelu_th(xi)), "zero__gelu is not train_mlp's GELU at %g", (double)xi);
    }
    rc = zero__k_gelu_fwd(yd + oy, dxd + ox, n, NULL);
    if (sync_ok(rc, "zero__k_gelu_fwd")) {
        to_host(g, yd, (size_t)nn * 4);
        for (i = 0; i < nn && bad < 3; i++)
            bad += !CHECK(zero__f32_bits(y[i]) == zero__f32_bits(g[i]), "gelu (n %lld, misaligned %d) [%lld]: cpu %.9g gpu %.9g",
                          (long long)n, mis, (long long)i, (double)y[i], (double)g[i]);
    }
    rc = zero__k_gelu_bwd(dxo + odx, dxd + ox2, dyd + ody, n, NULL);
    if (sync_ok(rc, "zero__k_gelu_bwd")) {
        to_host(g, dxo, (size_t)nn * 4);
        for (i = 0; i < nn && bad < 6; i++)
            bad += !CHECK(zero__f32_bits(dx[i]) == zero__f32_bits(g[i]), "gelu' (n %lld, misaligned %d) [%lld]: cpu %.9g gpu %.9g",
                          (long long)n, mis, (long long)i, (double)dx[i], (double)g[i]);
    }
    cudaFree(dxd); cudaFree(dyd); cudaFree(yd); cudaFree(dxo);
    free(x); free(dy); free(y); free(dx); free(g);
}

static void test_gelu(void) {
    int i, mis;
    for (i = 0; i < NELEMS(sizes); i++) gelu_case(sizes[i], 0);
    for (mis = 1; mis <= 5; mis++) gelu_case(1029, mis);
    gelu_case(LARGE, 0);
}

static void xent_case(int64_t rows, int64_t classes, int in_place) {
    float *l = (float *)malloc(rows * classes * 4), *d = (float *)malloc(rows * classes * 4);
    float *loss = (float *)malloc(rows * 4), *gd = (float *)malloc(rows * classes * 4), *gl = (float *)malloc(rows * 4);
    int32_t *lab = (int32_t *)malloc(rows * 4);
    float *dl, *dd, *dloss;
    int32_t *dlab;
    const float dscale = 0.125f;
    /* the reference sums a row in order, the kernel in a tree: they part by up to ~classes
       roundings of the sum (1.1e-5 relative at 149797 classes, seen on the emulator) */
    const float tol = 1e-5f + (float)classes * 1e-9f;
    int64_t r, c, bad = 0;
    int rc;
    for (r = 0; r < rows * classes; r++) l[r] = (unif() - 0.5f) * 20.0f;
    for (r = 0; r < rows; r++) lab[r] = (int32_t)(rnd32() % classes);
    for (r = 0; r < rows; r++) {         /* examples/train_mlp.c's crossentropy, per row */
        const float *lr = l + r * classes;
        float *dr = d + r * classes, mx = lr[0], sum = 0.0f, inv;
        for (c = 1; c < classes; c++) mx = lr[c] > mx ? lr[c] : mx;
        for (c = 0; c < classes; c++) { dr[c] = zero_expf(lr[c] - mx); sum += dr[c]; }
        loss[r] = zero_logf(sum) - (lr[lab[r]] - mx);
        inv = 1.0f / sum;
        for (c = 0; c < classes; c++) dr[c] = dscale * (dr[c] * inv - (c == lab[r] ? 1.0f : 0.0f));
    }
    dl = (float *)dup_to_dev(l, rows * classes * 4);
    dlab = (int32_t *)dup_to_dev(lab, rows * 4);
    dd = in_place ? dl : (float *)dalloc(rows * classes * 4);
    dloss = (float *)dalloc(rows * 4);
    rc = zero__k_xent(dloss, dd, dl, dlab, rows, classes, dscale, NULL);
    if (sync_ok(rc, "zero__k_xent")) {
        to_host(gl, dloss, rows * 4);
        to_host(gd, dd, rows * classes * 4);
        for (r = 0; r < rows && bad < 3; r++)
            bad += !CHECK(close_to(loss[r], gl[r], tol), "%lld x %lld: loss[%lld]: cpu %.9g gpu %.9g", (long long)rows,
                          (long long)classes, (long long)r, (double)loss[r], (double)gl[r]);
        for (r = 0; r < rows * classes && bad < 6; r++)
            bad += !CHECK(fabsf(d[r] - gd[r]) <= tol * (1.0f + fabsf(d[r])) * dscale,
                          "%lld x %lld: dlogits[%lld]: cpu %.9g gpu %.9g", (long long)rows, (long long)classes,
                          (long long)r, (double)d[r], (double)gd[r]);
    }
    cudaFree(dl); cudaFree(dlab); cudaFree(dloss);
    if (!in_place) cudaFree(dd);
    free(l); free(d); free(loss); free(gd); free(gl); free(lab);
}

static void test_xent(void) {
    int i;
    xent_case(64, 32, 0);
    xent_case(7, 1000, 0);
    xent_case(5, 1, 0);
    xent_case(9, 1000, 1);                 /* dlogits over the logits */
    for (i = 2; i < NELEMS(sizes); i++) xent_case(3, sizes[i], 0);   /* the per-row loop over classes */
    xent_case(7, 149797, 0);               /* 2^20 + 3 */
}

/* a launcher runs on the stream it is given: the same result on a created stream */
static void test_stream(void) {
    const int64_t n = 4101;
    float *x = (float *)malloc(n * 4), *a = (float *)malloc(n * 4), *b = (float *)malloc(n * 4);
    float *dx, *da, *db;
    cudaStream_t st;
    int64_t i;
    int rc;
    for (i = 0; i < n; i++) x[i] = (unif() - 0.5f) * 8.0f;
    dx = (float *)dup_to_dev(x, n * 4);
    da = (float *)dalloc(n * 4);
    db = (float *)dalloc(n * 4);
    if (!CHECK(cudaStreamCreate(&st) == cudaSuccess, "cudaStreamCreate")) return;
    rc = zero__k_gelu_fwd(da, dx, n, NULL);
    if (sync_ok(rc, "default stream")) {
        rc = zero__k_gelu_fwd(db, dx, n, (void *)st);
        CHECK(rc == 0 && cudaStreamSynchronize(st) == cudaSuccess, "launch on a stream: %d", rc);
        to_host(a, da, n * 4);
        to_host(b, db, n * 4);
        compare("gelu on a stream", a, b, n, ZERO_F32);
    }
    cudaStreamDestroy(st);
    cudaFree(dx); cudaFree(da); cudaFree(db);
    free(x); free(a); free(b);
}

/* ---- Muon (zero__k_muon_*) ----
   bitwise: muon_mom vs zero__muon_mom1 of the gradient (every dtype) times gscale, Nesterov
   and not, NaN / inf / subnormal values; muon_apply vs zero__muon_apply1, decay and not,
   narrowed into params of every dtype or not at all; muon_xpose, muon_comb and muon_axpy vs
   their loops; every size S and one past the end left alone. muon_norm vs a double sum in
   order: within 2^-22 of each element (its parts sum in another order), the floor eps for
   an all-zero x, NaN everywhere from one NaN; and the refusals. */
static void muon_elem_case(int adt, int pdt, int64_t n, int nesterov) {
    const int64_t nn = n + 1, h = n / 2;
    void *g = malloc((size_t)nn * esz(adt)), *p = malloc((size_t)nn * esz(pdt)), *pgot = malloc((size_t)nn * esz(pdt));
    float *m = (float *)malloc((size_t)nn * 4), *u = (float *)malloc((size_t)nn * 4), *w = (float *)malloc((size_t)nn * 4);
    float *o = (float *)malloc((size_t)nn * 4), *got = (float *)malloc((size_t)nn * 4);
    void *gd, *pd;
    float *md, *ud, *wd, *od;
    const float gscale = 0.375f, mu = 0.95f, omu = (float)(1.0 - 0.95), dm = 0.998f, nl = -0.0125f;
    char what[96];
    int64_t i;
    fill(g, adt, nn, 1);
    for (i = 0; i < nn; i++) { m[i] = rnd_val(1); u[i] = -7.0f; w[i] = rnd_val(0); o[i] = rnd_val(1); }
    fill(p, pdt, nn, 0);
    gd = dup_to_dev(g, (size_t)nn * esz(adt)); pd = dup_to_dev(p, (size_t)nn * esz(pdt));
    md = (float *)dup_to_dev(m, (size_t)nn * 4); ud = (float *)dup_to_dev(u, (size_t)nn * 4);
    wd = (float *)dup_to_dev(w, (size_t)nn * 4); od = (float *)dup_to_dev(o, (size_t)nn * 4);
    for (i = 0; i < n; i++) u[i] = zero__muon_mom1(m + i, zero__nf(zero__ld(g, i, adt) * gscale), mu, omu, nesterov);
    snprintf(what, sizeof what, "muon_mom %s n %lld%s", zero_dtype_str((zero_dtype)adt), (long long)n,
             nesterov ? " nesterov" : "");
    if (sync_ok(zero__k_muon_mom(gd, adt, gscale, md, ud, n, mu, omu, nesterov, NULL), what)) {
        to_host(got, ud, (size_t)nn * 4);
        compare(what, u, got, nn, ZERO_F32);
        to_host(got, md, (size_t)nn * 4);
        compare(what, m, got, nn, ZERO_F32);
    }
    /* the first half decayed, the second not, each narrowed into the params; then all again
       without params */
    for (i = 0; i < n; i++) {
        w[i] = zero__muon_apply1(w[i], o[i], dm, nl, i < h);
        zero__st(p, i, pdt, w[i]);
    }
    snprintf(what, sizeof what, "muon_apply %s n %lld", zero_dtype_str((zero_dtype)pdt), (long long)n);
    if (sync_ok(zero__k_muon_apply(wd, od, h, dm, nl, 1, pd, pdt, NULL), what) &&
        sync_ok(zero__k_muon_apply(wd + h, od + h, n - h, dm, nl, 0, at(pd, h, pdt), pdt, NULL), what)) {
        to_host(got, wd, (size_t)nn * 4);
        compare(what, w, got, nn, ZERO_F32);
        to_host(pgot, pd, (size_t)nn * esz(pdt));
        compare(what, p, pgot, nn, pdt);
    }
    for (i = 0; i < n; i++) w[i] = zero__muon_apply1(w[i], o[i], dm, nl, 1);
    if (sync_ok(zero__k_muon_apply(wd, od, n, dm, nl, 1, NULL, 0, NULL), what)) {
        to_host(got, wd, (size_t)nn * 4);
        compare(what, w, got, nn, ZERO_F32);
    }
    cudaFree(gd); cudaFree(pd); cudaFree(md); cudaFree(ud); cudaFree(wd); cudaFree(od);
    free(g); free(p); free(pgot); free(m); free(u); free(w); free(o); free(got);
}
static void muon_glue_case(int64_t rows, int64_t cols) {
    const int64_t n = rows * cols, nn = n + 1;
    float *x = (float *)malloc((size_t)nn * 4), *y = (float *)malloc((size_t)nn * 4), *want = (float *)malloc((size_t)nn * 4);
    float *got = (float *)malloc((size_t)nn * 4), *xd, *yd, *zd;
    double *part = (double *)dalloc(sizeof(double) * ZERO__K_MUON_PARTS), ss = 0.0;
    char what[96];
    int64_t i, j, bad = 0;
    int tr;
    float d;
    for (i = 0; i < nn; i++) { x[i] = (unif() - 0.5f) * 4.0f; y[i] = unif() - 0.5f; }
    xd = (float *)dup_to_dev(x, (size_t)nn * 4);
    yd = (float *)dup_to_dev(y, (size_t)nn * 4);
    for (tr = 0; tr < 2; tr++) {
        for (i = 0; i < nn; i++) want[i] = -3.0f;
        zd = (float *)dup_to_dev(want, (size_t)nn * 4);
        for (i = 0; i < rows; i++)
            for (j = 0; j < cols; j++) want[tr ? j * rows + i : i * cols + j] = x[i * cols + j];
        snprintf(what, sizeof what, "muon_xpose %lld x %lld%s", (long long)rows, (long long)cols, tr ? " transposed" : "");
        if (sync_ok(zero__k_muon_xpose(zd, xd, rows, cols, tr, NULL), what)) {
            to_host(got, zd, (size_t)nn * 4);
            compare(what, want, got, nn, ZERO_F32);
        }
        cudaFree(zd);
    }
    for (i = 0; i < n; i++) want[i] = zero__nf(0.5f * y[i]) + zero__nf(-1.25f * x[i]);
    want[n] = x[n];
    snprintf(what, sizeof what, "muon_comb n %lld", (long long)n);
    if (sync_ok(zero__k_muon_comb(xd, yd, n, 0.5f, -1.25f, NULL), what)) {
        to_host(got, xd, (size_t)nn * 4);
        compare(what, want, got, nn, ZERO_F32);
    }
    for (i = 0; i < n; i++) want[i] = zero__nf(3.4445f * want[i]) + y[i];
    snprintf(what, sizeof what, "muon_axpy n %lld", (long long)n);
    if (sync_ok(zero__k_muon_axpy(xd, yd, n, 3.4445f, NULL), what)) {
        to_host(got, xd, (size_t)nn * 4);
        compare(what, want, got, nn, ZERO_F32);
    }
    for (i = 0; i < n; i++) ss += (double)want[i] * (double)want[i];
    d = (float)sqrt(ss);
    if (d < 1e-7f) d = 1e-7f;
    snprintf(what, sizeof what, "muon_norm n %lld", (long long)n);
    if (sync_ok(zero__k_muon_norm(xd, n, 1e-7f, part, NULL), what)) {
        to_host(got, xd, (size_t)nn * 4);
        for (i = 0; i < n && bad < 3; i++)
            bad += !CHECK(fabs((double)got[i] - want[i] / d) <= 0x1p-22 * fabs((double)want[i] / d), "%s [%lld]: %.9g, want "
                          "%.9g", what, (long long)i, (double)got[i], (double)(want[i] / d));
        CHECK(zero__f32_bits(got[n]) == zero__f32_bits(want[n]), "%s: wrote one past the end", what);
    }
    cudaFree(xd); cudaFree(yd); cudaFree(part);
    free(x); free(y); free(want); free(got);
}
static void test_muon(void) {
    static const int dts[3] = { ZERO_F32, ZERO_BF16, ZERO_F16 };
    static const int64_t shapes[][2] = { { 1, 1 }, { 3, 5 }, { 5, 3 }, { 33, 257 }, { 257, 33 }, { 128, 128 } };
    double *part = (double *)dalloc(sizeof(double) * ZERO__K_MUON_PARTS);
    float *z = (float *)dalloc(64 * 4), h[64];
    int i, a, p;
    for (i = 0; i < NELEMS(sizes); i++)
        for (a = 0; a < 3; a++) muon_elem_case(dts[a], dts[(a + i) % 3], sizes[i], (i + a) & 1);
    muon_elem_case(ZERO_BF16, ZERO_BF16, LARGE, 1);
    for (i = 0; i < NELEMS(shapes); i++) muon_glue_case(shapes[i][0], shapes[i][1]);
    muon_glue_case(1, LARGE);
    for (p = 0; p < 2; p++) {       /* all zero: the floor eps (0 / eps = 0); one NaN: NaN everywhere */
        for (i = 0; i < 64; i++) h[i] = p && i == 17 ? zero__bits_f32(0x7fc00000u) : 0.0f;
        cudaMemcpy(z, h, sizeof h, cudaMemcpyHostToDevice);
        if (sync_ok(zero__k_muon_norm(z, 64, 1e-7f, part, NULL), "muon_norm edge")) {
            cudaMemcpy(h, z, sizeof h, cudaMemcpyDeviceToHost);
            for (i = 0; i < 64; i++)
                if (!CHECK(p ? h[i] != h[i] : zero__f32_bits(h[i]) == 0, "muon_norm %s: [%d] %g", p ? "NaN" : "zeros", i,
                           (double)h[i]))
                    break;
        }
    }
    CHECK(zero__k_muon_mom(z, 99, 1.0f, z, z, 4, 0.9f, 0.1f, 1, NULL) != 0, "muon_mom took dtype 99");
    CHECK(zero__k_muon_mom(NULL, ZERO_F32, 1.0f, z, z, 4, 0.9f, 0.1f, 1, NULL) != 0, "muon_mom took a NULL gradient");
    CHECK(zero__k_muon_norm(z, -1, 1e-7f, part, NULL) != 0 && zero__k_muon_norm(z, 4, 1e-7f, NULL, NULL) != 0,
          "muon_norm took n < 0 or no parts");
    CHECK(zero__k_muon_apply(z, z, 4, 1.0f, -1.0f, 1, z, 99, NULL) != 0, "muon_apply took params of dtype 99");
    CHECK(zero__k_muon_xpose(z, z, -1, 3, 0, NULL) != 0 && zero__k_muon_comb(NULL, z, 4, 1, 1, NULL) != 0 &&
          zero__k_muon_axpy(z, NULL, 4, 1, NULL) != 0, "a bad argument taken");
    CHECK(zero__k_muon_mom(NULL, ZERO_F32, 1.0f, NULL, NULL, 0, 0.9f, 0.1f, 1, NULL) == 0, "n 0 is not a no-op");
    cudaFree(part); cudaFree(z);
}

int main(void) {
    int ndev = gpu_count("gpu_kernels");
    if (ndev <= 0) return ndev < 0;
    test_init();
    test_opt();
    TEST_RUN(test_opt_large);
    TEST_RUN(test_opt_bf16_states);
    TEST_RUN(test_opt_refuses);
    test_opt_q8_states();
    test_sumsq();
    test_sum_into();
    test_quant();
    test_qp();
    test_bias();
    TEST_RUN(test_gelu);
    TEST_RUN(test_xent);
    TEST_RUN(test_muon);
    TEST_RUN(test_stream);
    return test_summary();
}
