/* tests/gpu/kernels.c - every launcher of zero_kernels.cu against its CPU reference, on a GPU.

   Bitwise (a NaN only has to stay a NaN: the GPU does not keep NaN payloads):
     zero__k_opt       vs zero__opt_kernel(scalar) per chunk: AdamW, SGD without momentum, with
                       momentum (first step and later), Nesterov, decay on and off per chunk,
                       every (grad dtype, param dtype), with and without an fp32 master, chunk
                       tables with lengths 1..ZERO__KCHUNK (not multiples of 4 or 8) and odd
                       offsets (the scalar path) next to aligned ones (the vector path);
     zero__k_sumsq     vs zero__sumsq_scalar, every dtype, n 0..3000, odd starts;
     zero__k_sum_into  vs zero__sum_into: nin 1..8 and 64, every (out dtype, in dtype),
                       accumulate, out aliasing an input, misaligned pointers; nin 65 refused;
     zero__k_quantize_i8 / zero__k_dequantize_i8 vs zero__quantize_i8 / zero__dequantize_i8;
     zero__k_qp_encode / zero__k_qp_sum vs zero__qp_encode / zero__qp_sum (ZeRO++'s payloads):
                       int8 and int4, blocks 1..2048 (odd ones too), NaN / inf / subnormal values,
                       sums of 3 and ZERO__K_MAXIN payloads, accumulate; 65 payloads refused;
     zero__k_bias_add, zero__k_bias_grad vs the CPU tiled linear's loops.
   Within a tolerance (CUDA's tanhf / expf / logf differ from glibc's by an ulp or two, and the
   row sum is a tree): zero__k_gelu_fwd / _bwd (|d| <= 1e-5 (1 + |ref|)), zero__k_xent
   (|d| <= 1e-5 (1 + |ref|)) vs examples/train_mlp.c's formulas.
   Without a GPU it prints "SKIP gpu_kernels: no GPU" and exits 0; a CUDA error other than
   "no device" is a FAIL (tests/gpu/gpu.h). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include <cuda_runtime_api.h>   // defines: cudaMalloc, cudaMemcpy, cudaDeviceSynchronize
#include "gpu.h"

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

/* ---- the fused optimizer ---- */
enum { V_ADAMW, V_SGD_PLAIN, V_SGD_MOM_FIRST, V_SGD_MOM, V_SGD_NESTEROV, V_NUM };
static const char *variant_name[V_NUM] = { "adamw", "sgd", "sgd_mom_first", "sgd_mom", "sgd_nesterov" };

static void make_optk(zero__optk *k, int variant, int adt, int pdt) {
    double lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.999, step = 7;
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    memset(k, 0, sizeof *k);
    k->opt = variant == V_ADAMW ? ZERO_OPTIM_ADAMW : ZERO_OPTIM_SGD;
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

/* A chunk table over state arrays of `ns` elements: chunks back to back in the state
   arrays (a random gap sometimes), grads and params at their own offsets; `odd` puts most
   chunks at unaligned offsets. Returns the chunk count; *ng, *np: the extents needed. */
static int64_t make_chunks(zero__kchunk *c, int64_t maxc, int64_t ns, int odd, int64_t *ng, int64_t *np) {
    int64_t nc = 0, s = 0, goff = odd ? 3 : 0, poff = odd ? 5 : 8;
    static const int32_t lens[] = { 1, 2, 3, 5, 7, 8, 9, 15, 17, 31, 64, 1000, 1023, 4093, ZERO__KCHUNK - 1,
                                    ZERO__KCHUNK };
    *ng = *np = 0;
    while (nc < maxc) {
        int32_t n = rnd32() % 3 ? lens[rnd32() % 16] : (int32_t)(1 + rnd32() % ZERO__KCHUNK);
        if (!odd && rnd32() % 4) n = (n + 7) & ~7;
        if (n > ZERO__KCHUNK) n = ZERO__KCHUNK;
        if (s + n > ns) break;
        c[nc].state_idx = s;
        c[nc].grad_idx = s + goff;
        c[nc].param_idx = s + poff;
        c[nc].n = n;
        c[nc].decay = (int32_t)(rnd32() & 1u);
        if (s + goff + n > *ng) *ng = s + goff + n;
        if (s + poff + n > *np) *np = s + poff + n;
        nc++;
        s += n;
        if (odd && rnd32() % 2) s += 1 + rnd32() % 3;          /* a gap: the next chunk starts odd */
        else if (!odd) s = (s + 7) & ~(int64_t)7;              /* keep the next one aligned */
    }
    return nc;
}

static void opt_case(int variant, int adt, int pdt, int use_master, int odd) {
    const int64_t ns = 300000;
    zero__optk k;
    zero__kchunk *ch = (zero__kchunk *)malloc(sizeof(zero__kchunk) * 4096);
    int64_t nc, ng, np, c;
    int has_m = variant != V_SGD_PLAIN, has_v = variant == V_ADAMW;
    void *g, *p;
    float *w, *m, *v, *pg, *wg, *mg, *vg;
    void *dg, *dp, *dch;
    float *dw = NULL, *dm = NULL, *dv = NULL;
    int rc;
    zero__opt_fn fn;
    make_optk(&k, variant, adt, pdt);
    fn = zero__opt_kernel(ZERO__SIMD_SCALAR, k.opt, adt, pdt);
    nc = make_chunks(ch, 4096, ns, odd, &ng, &np);
    g = malloc((size_t)ng * esz(adt));
    p = malloc((size_t)np * 4);
    w = (float *)malloc((size_t)ns * 4); m = (float *)malloc((size_t)ns * 4); v = (float *)malloc((size_t)ns * 4);
    pg = (float *)malloc((size_t)np * 4); wg = (float *)malloc((size_t)ns * 4);
    mg = (float *)malloc((size_t)ns * 4); vg = (float *)malloc((size_t)ns * 4);
    fill(g, adt, ng, 1);
    fill(p, use_master ? pdt : ZERO_F32, np, 0);
    fill(w, ZERO_F32, ns, 1);
    fill(m, ZERO_F32, ns, 0);
    for (c = 0; c < ns; c++) v[c] = fabsf(rnd_val(0));
    dg = dup_to_dev(g, (size_t)ng * esz(adt));
    dp = dup_to_dev(p, (size_t)np * 4);
    dch = dup_to_dev(ch, sizeof(zero__kchunk) * (size_t)nc);
    if (use_master) dw = (float *)dup_to_dev(w, (size_t)ns * 4);
    if (has_m) dm = (float *)dup_to_dev(m, (size_t)ns * 4);
    if (has_v) dv = (float *)dup_to_dev(v, (size_t)ns * 4);
    rc = zero__k_opt(&k, (const zero__kchunk *)dch, nc, dg, dp, dw, dm, dv, NULL);
    /* the CPU reference: the scalar kernel on each chunk, its decay in k */
    for (c = 0; c < nc; c++) {
        zero__optk kc = k;
        float *wc = use_master ? w + ch[c].state_idx : (float *)p + ch[c].param_idx;
        kc.decay = ch[c].decay;
        fn(&kc, (const char *)g + ch[c].grad_idx * (int64_t)esz(adt), (char *)p + ch[c].param_idx * (int64_t)esz(pdt),
           wc, has_m ? m + ch[c].state_idx : NULL, has_v ? v + ch[c].state_idx : NULL, 0, ch[c].n);
    }
    if (!sync_ok(rc, "zero__k_opt")) goto out;
    to_host(pg, dp, (size_t)np * (use_master ? esz(pdt) : 4));
    if (use_master) { to_host(wg, dw, (size_t)ns * 4); compare("master", w, wg, ns, ZERO_F32); }
    compare("params", p, pg, np, use_master ? pdt : ZERO_F32);
    if (has_m) { to_host(mg, dm, (size_t)ns * 4); compare("m", m, mg, ns, ZERO_F32); }
    if (has_v) { to_host(vg, dv, (size_t)ns * 4); compare("v", v, vg, ns, ZERO_F32); }
out:
    cudaFree(dg); cudaFree(dp); cudaFree(dch); cudaFree(dw); cudaFree(dm); cudaFree(dv);
    free(ch); free(g); free(p); free(w); free(m); free(v); free(pg); free(wg); free(mg); free(vg);
}

static void test_opt(void) {
    int variant, adt, pdt, odd;
    for (variant = 0; variant < V_NUM; variant++)
        for (adt = ZERO_F32; adt <= ZERO_F16; adt++)
            for (pdt = ZERO_F32; pdt <= ZERO_F16; pdt++)
                for (odd = 0; odd < 2; odd++) {
                    test_begin("opt_%s_g%d_p%d_%s", variant_name[variant], adt, pdt, odd ? "odd" : "aligned");
                    opt_case(variant, adt, pdt, 1, odd);
                    if (pdt == ZERO_F32) opt_case(variant, adt, pdt, 0, odd);   /* the params are the master */
                    test_end();
                }
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
}

/* ---- sum of squares ---- */
static void test_sumsq(void) {
    const int64_t n = 200000;
    int dt;
    for (dt = ZERO_F32; dt <= ZERO_F16; dt++) {
        void *g = malloc((size_t)n * esz(dt)), *dg;
        zero__knblk blk[600];
        double want[600], got[600], *dout;
        void *dblk;
        int64_t b, nb = 0, at = 0;
        int rc;
        int64_t i;
        for (i = 0; i < n; i++) {     /* magnitudes over 2^-30..2^30, so the lane sums round */
            float x = zero__bits_f32(((rnd32() & 1u) << 31) | ((97u + rnd32() % 60u) << 23) | (rnd32() & 0x7fffffu));
            if (dt == ZERO_F16) x = x * 0x1p-18f;
            zero__st(g, i, dt, x);
        }
        while (nb < 600) {
            int64_t len = nb < 3 ? (int64_t[]){ 0, 1, 3000 }[nb] : rnd32() % 3 ? ZERO__NORM_BLOCK : rnd32() % 1100;
            if (at + len > n) break;
            blk[nb].idx = at;
            blk[nb].n = len;
            at += len + (rnd32() % 2);   /* odd starts */
            nb++;
        }
        for (b = 0; b < nb; b++) want[b] = zero__sumsq_scalar((const char *)g + blk[b].idx * (int64_t)esz(dt), blk[b].n, dt);
        dg = dup_to_dev(g, (size_t)n * esz(dt));
        dblk = dup_to_dev(blk, sizeof(zero__knblk) * (size_t)nb);
        dout = (double *)dalloc(sizeof(double) * (size_t)nb);
        rc = zero__k_sumsq(dg, dt, (const zero__knblk *)dblk, nb, dout, NULL);
        if (sync_ok(rc, "zero__k_sumsq")) {
            int bad = 0;
            to_host(got, dout, sizeof(double) * (size_t)nb);
            for (b = 0; b < nb && bad < 3; b++)
                if (memcmp(&want[b], &got[b], 8) != 0)
                    bad += !CHECK(0, "dt %d block %lld (n %lld): cpu %.17g gpu %.17g", dt, (long long)b,
                                  (long long)blk[b].n, want[b], got[b]);
        }
        cudaFree(dg); cudaFree(dblk); cudaFree(dout);
        free(g);
    }
    CHECK(zero__k_sumsq(NULL, ZERO_F32, NULL, 0, NULL, NULL) == 0, "zero blocks must return 0");
}

/* ---- sum_into ---- */
static void sum_case(int rdt, int sdt, int nin, int64_t count, int accumulate, int alias, int misalign) {
    const void *ins[ZERO__K_MAXIN], *dins[ZERO__K_MAXIN];
    void *hin[ZERO__K_MAXIN], *din[ZERO__K_MAXIN];
    size_t off = misalign ? 1 : 0;       /* elements */
    void *out = malloc((size_t)(count + 1) * 4), *got = malloc((size_t)(count + 1) * 4), *dout;
    int k, rc;
    for (k = 0; k < nin; k++) {
        hin[k] = malloc((size_t)(count + 1) * esz(sdt));
        fill(hin[k], sdt, count + 1, 0);
        din[k] = dup_to_dev(hin[k], (size_t)(count + 1) * esz(sdt));
        ins[k] = (const char *)hin[k] + off * esz(sdt);
        dins[k] = (const char *)din[k] + off * esz(sdt);
    }
    fill(out, rdt, count + 1, 0);
    dout = dup_to_dev(out, (size_t)(count + 1) * esz(rdt));
    if (alias && rdt == sdt) {           /* out is input nin / 2 */
        int a = nin / 2;
        memcpy(out, hin[a], (size_t)(count + 1) * esz(rdt));
        cudaMemcpy(dout, din[a], (size_t)(count + 1) * esz(rdt), cudaMemcpyDeviceToDevice);
        ins[a] = (const char *)out + off * esz(rdt);
        dins[a] = (const char *)dout + off * esz(rdt);
    }
    rc = zero__k_sum_into((char *)dout + off * esz(rdt), rdt, dins, nin, sdt, count, accumulate, NULL);
    zero__sum_into((char *)out + off * esz(rdt), rdt, ins, nin, sdt, count, accumulate);
    if (sync_ok(rc, "zero__k_sum_into")) {
        to_host(got, dout, (size_t)(count + 1) * esz(rdt));
        compare("sum_into out", out, got, count + 1, rdt);
    }
    for (k = 0; k < nin; k++) { cudaFree(din[k]); free(hin[k]); }
    cudaFree(dout);
    free(out); free(got);
}

static void test_sum_into(void) {
    static const int nins[] = { 1, 2, 3, 4, 5, 7, 8, 64 };
    static const int64_t counts[] = { 1, 3, 4, 1001, 65536 + 3 };
    int rdt, sdt, i, c;
    for (rdt = ZERO_F32; rdt <= ZERO_F16; rdt++)
        for (sdt = ZERO_F32; sdt <= ZERO_F16; sdt++) {
            test_begin("sum_into_out%d_in%d", rdt, sdt);
            for (i = 0; i < 8; i++)
                for (c = 0; c < 5; c++) {
                    int64_t count = nins[i] == 64 ? counts[c] / 16 + 1 : counts[c];
                    sum_case(rdt, sdt, nins[i], count, (i + c) & 1, 0, c == 2);
                    sum_case(rdt, sdt, nins[i], count, !((i + c) & 1), 1, (i & 1) && c == 4);
                }
            test_end();
        }
    {
        const void *ins[65] = { 0 };
        float x;
        int k;
        for (k = 0; k < 65; k++) ins[k] = &x;
        test_begin("sum_into_refuses");
        CHECK(zero__k_sum_into(&x, ZERO_F32, ins, 65, ZERO_F32, 1, 0, NULL) == (int)cudaErrorInvalidValue,
              "nin 65 must be refused");
        CHECK(zero__k_sum_into(&x, ZERO_F32, ins, 1, ZERO_F32, 0, 0, NULL) == 0, "count 0 must return 0");
        test_end();
    }
}

/* ---- int8 quantization ---- */
static void test_quant(void) {
    static const int blocks[] = { 1, 5, 32, 256, 300, 2048 };
    const int64_t n = 100003;
    int dt, b;
    for (dt = ZERO_F32; dt <= ZERO_F16; dt++)
        for (b = 0; b < 6; b++) {
            int block = blocks[b];
            int64_t nb = (n + block - 1) / block, i;
            void *x = malloc((size_t)n * 4), *back = malloc((size_t)n * 4), *gback = malloc((size_t)n * 4);
            int8_t *q = (int8_t *)malloc((size_t)n), *gq = (int8_t *)malloc((size_t)n);
            float *s = (float *)malloc((size_t)nb * 4), *gs = (float *)malloc((size_t)nb * 4);
            void *dx, *dq, *ds, *dback;
            int rc;
            fill(x, dt, n, 0);
            for (i = 0; i < 40; i++)                     /* a few NaN / inf: poisoned blocks */
                zero__st(x, rnd32() % n, dt, zero__bits_f32(i & 1 ? 0xff800000u : 0x7fc00000u | (rnd32() & 0xffffu)));
            for (i = 0; i < n; i++) if (i / block % 7 == 3) zero__st(x, i, dt, 0.0f);   /* all-zero blocks */
            dx = dup_to_dev(x, (size_t)n * esz(dt));
            dq = dalloc((size_t)n);
            ds = dalloc((size_t)nb * 4);
            dback = dalloc((size_t)n * esz(dt));
            zero__quantize_i8(q, s, x, dt, n, block);
            zero__dequantize_i8(back, dt, q, s, n, block);
            rc = zero__k_quantize_i8((int8_t *)dq, (float *)ds, dx, dt, n, block, NULL);
            if (sync_ok(rc, "zero__k_quantize_i8")) {
                to_host(gq, dq, (size_t)n);
                to_host(gs, ds, (size_t)nb * 4);
                CHECK(memcmp(q, gq, (size_t)n) == 0, "dt %d block %d: q differs", dt, block);
                compare("scales", s, gs, nb, ZERO_F32);
            }
            rc = zero__k_dequantize_i8(dback, dt, (const int8_t *)dq, (const float *)ds, n, block, NULL);
            if (sync_ok(rc, "zero__k_dequantize_i8")) {
                to_host(gback, dback, (size_t)n * esz(dt));
                compare("dequantized", back, gback, n, dt);
            }
            cudaFree(dx); cudaFree(dq); cudaFree(ds); cudaFree(dback);
            free(x); free(back); free(gback); free(q); free(gq); free(s); free(gs);
        }
}

/* ---- ZeRO++'s payloads ---- */
/* the payload of n values and their decoded sums, int8 and int4, blocks that do not divide a
   4-byte word of codes, NaN / inf / subnormal values among ordinary ones, all-zero blocks */
static void test_qp(void) {
    static const int blocks[] = { 1, 5, 7, 32, 256, 300, 2048 };
    const int64_t n = 100003;
    int dt, b, bits, k;
    for (bits = 4; bits <= 8; bits += 4)
        for (dt = ZERO_F32; dt <= ZERO_F16; dt++)
            for (b = 0; b < 7; b++) {
                const int block = blocks[b], np = b == 3 ? ZERO__K_MAXIN : 3, rdt = (dt + b) % 3 + 1;
                const int64_t pb = zero__qp_bytes(n, bits, block);
                void *x = malloc((size_t)n * 4), *out = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4);
                void *got = malloc((size_t)(pb > n * 4 ? pb : n * 4));
                char *hp = (char *)malloc((size_t)(pb * 3));
                const void *hps[ZERO__K_MAXIN];
                void *dps[ZERO__K_MAXIN], *dx, *dout;
                int64_t i;
                int rc, acc;
                for (k = 0; k < 3; k++) {           /* 3 payloads (np 64: each used 21 or 22 times) */
                    fill(x, dt, n, k == 0);
                    for (i = 0; i < n; i++) if (i / block % 7 == 3) zero__st(x, i, dt, 0.0f);
                    zero__qp_encode(hp + k * pb, x, dt, n, bits, block);
                    dx = dup_to_dev(x, (size_t)n * esz(dt));
                    dps[k] = dalloc((size_t)pb);
                    rc = zero__k_qp_encode(dps[k], dx, dt, n, bits, block, NULL);
                    if (sync_ok(rc, "zero__k_qp_encode")) {
                        to_host(got, dps[k], (size_t)pb);
                        CHECK(memcmp(got, hp + k * pb, (size_t)pb) == 0, "bits %d dt %d block %d: payload %d differs",
                              bits, dt, block, k);
                    }
                    cudaFree(dx);
                }
                for (k = 0; k < np; k++) { hps[k] = hp + (k % 3) * pb; dps[k] = dps[k % 3]; }
                fill(out, rdt, n, 0);
                dout = dalloc((size_t)n * esz(rdt));
                for (acc = 0; acc < 2; acc++) {
                    memcpy(ref, out, (size_t)n * esz(rdt));
                    zero__qp_sum(ref, rdt, hps, np, n, bits, block, acc);
                    cudaMemcpy(dout, out, (size_t)n * esz(rdt), cudaMemcpyHostToDevice);
                    rc = zero__k_qp_sum(dout, rdt, (const void *const *)dps, np, n, bits, block, acc, NULL);
                    if (sync_ok(rc, "zero__k_qp_sum")) {
                        to_host(got, dout, (size_t)n * esz(rdt));
                        compare(acc ? "qp_sum (accumulate)" : "qp_sum", ref, got, n, rdt);
                    }
                }
                for (k = 0; k < 3; k++) cudaFree(dps[k]);
                cudaFree(dout);
                free(x); free(out); free(ref); free(got); free(hp);
            }
    {
        void *d = dalloc(4096), *p[ZERO__K_MAXIN + 1];
        for (k = 0; k <= ZERO__K_MAXIN; k++) p[k] = d;
        CHECK(zero__k_qp_sum(d, ZERO_F32, (const void *const *)p, ZERO__K_MAXIN + 1, 10, 8, 4, 0, NULL) ==
              (int)cudaErrorInvalidValue, "%d payloads were taken", ZERO__K_MAXIN + 1);
        CHECK(zero__k_qp_encode((char *)d + 2, d, ZERO_F32, 10, 8, 4, NULL) == (int)cudaErrorInvalidValue,
              "a misaligned payload was taken");
        cudaFree(d);
    }
}

/* ---- bias, GELU, cross-entropy ---- */
static void test_bias(void) {
    const int64_t rows = 37, cols = 1003;
    float *y = (float *)malloc(rows * cols * 4), *b = (float *)malloc(cols * 4), *yg = (float *)malloc(rows * cols * 4);
    float *dy, *dyy, *db;
    int64_t r, c;
    int gdt, rc;
    fill(y, ZERO_F32, rows * cols, 0);
    fill(b, ZERO_F32, cols, 0);
    dyy = (float *)dup_to_dev(y, rows * cols * 4);
    db = (float *)dup_to_dev(b, cols * 4);
    rc = zero__k_bias_add(dyy, cols, db, ZERO_F32, rows, cols, NULL);
    for (r = 0; r < rows; r++) for (c = 0; c < cols; c++) y[r * cols + c] += b[c];
    if (sync_ok(rc, "zero__k_bias_add")) { to_host(yg, dyy, rows * cols * 4); compare("bias_add", y, yg, rows * cols, ZERO_F32); }
    cudaFree(db);
    /* bias grad: y is dy now; gb += column sums, in each grad dtype */
    dy = dyy;
    for (gdt = ZERO_F32; gdt <= ZERO_F16; gdt++) {
        void *gb = malloc(cols * 4), *gg = malloc(cols * 4), *dgb;
        float *s = (float *)malloc(cols * 4);
        fill(gb, gdt, cols, 0);
        dgb = dup_to_dev(gb, cols * esz(gdt));
        rc = zero__k_bias_grad(dgb, gdt, dy, cols, rows, cols, NULL);
        for (c = 0; c < cols; c++) {     /* as zero_tiled_linear_backward */
            float t = 0.0f;
            for (r = 0; r < rows; r++) t += y[r * cols + c];
            s[c] = t;
        }
        zero_add_f32(gb, (zero_dtype)gdt, s, cols);
        if (sync_ok(rc, "zero__k_bias_grad")) { to_host(gg, dgb, cols * esz(gdt)); compare("bias_grad", gb, gg, cols, gdt); }
        cudaFree(dgb);
        free(gb); free(gg); free(s);
    }
    CHECK(zero__k_bias_add(NULL, 5, NULL, ZERO_F32, 0, 5, NULL) == 0 && zero__k_bias_grad(NULL, ZERO_F32, NULL, 3, 3, 0, NULL) == 0,
          "empty shapes must return 0");
    cudaFree(dyy);
    free(y); free(b); free(yg);
}

static int close_to(float want, float got, float tol) {
    return fabsf(want - got) <= tol * (1.0f + fabsf(want)) || (want != want && got != got);
}

static void test_gelu(void) {
    const int64_t n = 100000;
    float *x = (float *)malloc(n * 4), *dy = (float *)malloc(n * 4), *y = (float *)malloc(n * 4);
    float *dx = (float *)malloc(n * 4), *g = (float *)malloc(n * 4);
    float *dxd, *dyd, *yd, *dxo;
    int64_t i, bad = 0;
    int rc;
    for (i = 0; i < n; i++) { x[i] = (unif() - 0.5f) * 16.0f; dy[i] = unif() - 0.5f; }
    for (i = 0; i < n; i++) {            /* examples/train_mlp.c's gelu_forward / gelu_backward */
        float th = tanhf(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i]));
        y[i] = 0.5f * x[i] * (1.0f + th);
        dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * x[i] * (1.0f - th * th) * 0.7978845608028654f *
                                                 (1.0f + 3.0f * 0.044715f * x[i] * x[i]));
        CHECK(y[i] == zero__gelu(x[i], zero__gelu_th(x[i])), "zero__gelu is not train_mlp's GELU at %g", (double)x[i]);
    }
    dxd = (float *)dup_to_dev(x, n * 4);
    dyd = (float *)dup_to_dev(dy, n * 4);
    yd = (float *)dalloc(n * 4);
    dxo = (float *)dalloc(n * 4);
    rc = zero__k_gelu_fwd(yd, dxd, n, NULL);
    if (sync_ok(rc, "zero__k_gelu_fwd")) {
        to_host(g, yd, n * 4);
        for (i = 0; i < n && bad < 3; i++)
            bad += !CHECK(close_to(y[i], g[i], 1e-5f), "gelu(%g): cpu %.9g gpu %.9g", (double)x[i], (double)y[i], (double)g[i]);
    }
    rc = zero__k_gelu_bwd(dxo, dxd, dyd, n, NULL);
    if (sync_ok(rc, "zero__k_gelu_bwd")) {
        to_host(g, dxo, n * 4);
        for (i = 0; i < n && bad < 6; i++)
            bad += !CHECK(close_to(dx[i], g[i], 1e-5f), "gelu'(%g): cpu %.9g gpu %.9g", (double)x[i], (double)dx[i], (double)g[i]);
    }
    cudaFree(dxd); cudaFree(dyd); cudaFree(yd); cudaFree(dxo);
    free(x); free(dy); free(y); free(dx); free(g);
}

static void xent_case(int64_t rows, int64_t classes, int in_place) {
    float *l = (float *)malloc(rows * classes * 4), *d = (float *)malloc(rows * classes * 4);
    float *loss = (float *)malloc(rows * 4), *gd = (float *)malloc(rows * classes * 4), *gl = (float *)malloc(rows * 4);
    int32_t *lab = (int32_t *)malloc(rows * 4);
    float *dl, *dd, *dloss;
    int32_t *dlab;
    const float dscale = 0.125f;
    int64_t r, c, bad = 0;
    int rc;
    for (r = 0; r < rows * classes; r++) l[r] = (unif() - 0.5f) * 20.0f;
    for (r = 0; r < rows; r++) lab[r] = (int32_t)(rnd32() % classes);
    for (r = 0; r < rows; r++) {         /* examples/train_mlp.c's crossentropy, per row */
        const float *lr = l + r * classes;
        float *dr = d + r * classes, mx = lr[0], sum = 0.0f, inv;
        for (c = 1; c < classes; c++) mx = lr[c] > mx ? lr[c] : mx;
        for (c = 0; c < classes; c++) { dr[c] = expf(lr[c] - mx); sum += dr[c]; }
        loss[r] = logf(sum) - (lr[lab[r]] - mx);
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
            bad += !CHECK(close_to(loss[r], gl[r], 1e-5f), "loss[%lld]: cpu %.9g gpu %.9g", (long long)r,
                          (double)loss[r], (double)gl[r]);
        for (r = 0; r < rows * classes && bad < 6; r++)
            bad += !CHECK(fabsf(d[r] - gd[r]) <= 1e-5f * (1.0f + fabsf(d[r])) * dscale, "dlogits[%lld]: cpu %.9g gpu %.9g",
                          (long long)r, (double)d[r], (double)gd[r]);
    }
    cudaFree(dl); cudaFree(dlab); cudaFree(dloss);
    if (!in_place) cudaFree(dd);
    free(l); free(d); free(loss); free(gd); free(gl); free(lab);
}

static void test_xent(void) {
    xent_case(64, 32, 0);
    xent_case(7, 1000, 0);
    xent_case(3, 50257, 0);
    xent_case(5, 1, 0);
    xent_case(9, 1000, 1);                 /* dlogits over the logits */
}

/* a launcher runs on the stream it is given: the same result on a created stream */
static void test_stream(void) {
    const int64_t n = 100001;
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

int main(void) {
    int ndev = gpu_count("gpu_kernels");
    if (ndev <= 0) return ndev < 0;
    test_init();
    test_opt();
    TEST_RUN(test_opt_refuses);
    TEST_RUN(test_sumsq);
    test_sum_into();
    TEST_RUN(test_quant);
    TEST_RUN(test_qp);
    TEST_RUN(test_bias);
    TEST_RUN(test_gelu);
    TEST_RUN(test_xent);
    TEST_RUN(test_stream);
    return test_summary();
}
