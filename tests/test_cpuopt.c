/* tests/test_cpuopt.c - the CPU optimizer kernels and the optimizer thread pool.

   Every kernel path this machine supports (scalar, AVX2+F16C, AVX-512F) is checked bit
   for bit against the scalar ZERO_HD formulas (zero__adamw_elem / zero__sgd_elem / zero__lion_elem with
   zero__ld / zero__st, exactly what the optimizer ran before it had SIMD paths), for
   every (optimizer, grad dtype, param dtype) combination, over random data and edge
   cases: NaN, inf, subnormals, values at bf16/f16 rounding ties, f16 overflow, every
   16-bit gradient pattern, lengths that are not a multiple of the vector width, and
   unaligned starts. Then the public API: results do not depend on cpu_threads or on
   the path, and the ZERO_SIMD knob and the cpu_threads option behave. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float bits(uint32_t u) { return zero__bits_f32(u); }

/* an interesting float: ordinary values of several magnitudes, and edge cases */
static float edge_float(int kind_mask) {
    uint32_t r = rnd32(), k = r % 24;
    uint32_t sign = (rnd32() & 1u) << 31;
    if (!(kind_mask & 1) && k >= 12) k %= 12;        /* kind_mask bit 0: allow non-finite */
    switch (k) {
    case 0: case 1: case 2: case 3:                  /* ordinary, |x| in [2^-8, 2^8) */
        return bits(sign | ((119u + rnd32() % 16u) << 23) | (rnd32() & 0x7fffffu));
    case 4: return bits(sign | (rnd32() & 0x7fffffu)); /* f32 subnormal */
    case 5: return bits(sign | ((103u + rnd32() % 10u) << 23) | (rnd32() & 0x7fffffu)); /* f16 subnormal range */
    case 6: return bits(sign | ((rnd32() & 0x7fffu) << 16) | 0x8000u);        /* bf16 tie */
    case 7: return bits(sign | ((rnd32() & 0x7fffu) << 16) | 0x7fffu | (rnd32() & 2u ? 0x8001u : 0u));
    case 8: return bits(sign | ((113u + rnd32() % 30u) << 23) | ((rnd32() & 0x3ffu) << 13) | 0x1000u); /* f16 tie */
    case 9: return bits(sign | (0x477fe000u + (rnd32() % 0x2000u)));          /* around 65504..65520 */
    case 10: return sign ? -0.0f : 0.0f;
    case 11: return bits(sign | rnd32() % 0x7f800000u);                       /* any finite */
    case 12: case 13: return bits(sign | 0x7f800000u);                        /* inf */
    case 14: case 15: return bits(sign | 0x7f800000u | (1u + rnd32() % 0x7fffffu)); /* NaN, any payload */
    default: return bits(sign | ((100u + rnd32() % 50u) << 23) | (rnd32() & 0x7fffffu));
    }
}

typedef struct bufs {
    void *g, *p;
    float *w, *m, *v;
} bufs;

static void fill(bufs *b, int64_t n, const zero__optk *k, int nonfinite, int gpat) {
    int64_t i;
    for (i = 0; i < n; i++) {
        float gv = edge_float(nonfinite);
        if (k->adt == ZERO_F32) ((float *)b->g)[i] = gv;
        else ((uint16_t *)b->g)[i] = gpat ? (uint16_t)i : (uint16_t)(rnd32() % 3 ? zero__f32_bits(gv) >> 16 : rnd32());
        b->w[i] = edge_float(nonfinite);
        b->m[i] = edge_float(nonfinite);
        b->v[i] = rnd32() % 8 ? fabsf(edge_float(nonfinite)) : edge_float(nonfinite);
        if (k->pdt != ZERO_F32) ((uint16_t *)b->p)[i] = (uint16_t)rnd32();
    }
}

/* the reference: the pre-SIMD optimizer loop, element by element */
static void reference(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v, int64_t lo, int64_t hi) {
    int64_t i;
    for (i = lo; i < hi; i++) {
        float gg = zero__ld(g, i, k->adt) * k->gscale;
        if (k->opt == ZERO_OPTIM_SGD) zero__sgd_elem(&w[i], m ? &m[i] : NULL, gg, &k->sh, k->decay);
        else if (k->opt == ZERO_OPTIM_LION) zero__lion_elem(&w[i], &m[i], gg, &k->ah, k->decay);
        else zero__adamw_elem(&w[i], &m[i], &v[i], gg, &k->ah, k->decay);
        if (k->pdt != ZERO_F32) zero__st(p, i, k->pdt, w[i]);
    }
}

static size_t esz(int dt) { return dt == ZERO_F32 ? 4 : 2; }
static const char *oname(int opt) { return opt == ZERO_OPTIM_SGD ? "sgd" : opt == ZERO_OPTIM_LION ? "lion" : "adamw"; }

/* Bitwise equal, except that a NaN may carry another NaN's payload: when two operands
   are NaN, x86 returns the first one's, and a compiler may swap the operands of a
   commutative operation, so even two scalar builds disagree on payloads. Only the
   payload is free: a NaN must stay a NaN and a number the same number. (zero_step
   never runs the optimizer on non-finite gradients: it skips the step.) */
static int same32(uint32_t a, uint32_t b) {
    return a == b || ((a & 0x7fffffffu) > 0x7f800000u && (b & 0x7fffffffu) > 0x7f800000u);
}
static int same16(uint16_t a, uint16_t b, int dt) {
    uint16_t inf = dt == ZERO_BF16 ? 0x7f80u : 0x7c00u;
    return a == b || ((a & 0x7fffu) > inf && (b & 0x7fffu) > inf);
}

/* runs path `level` and the reference on copies of the same data, compares all outputs */
static int compare_once(int level, const zero__optk *k, int64_t n, int64_t off, int64_t lo, int nonfinite,
                        int gpat, int with_m, const char *what) {
    bufs a, r;
    int64_t tot = n + off + 16, i;
    int ok = 1, nb;
    zero__opt_fn fn = zero__opt_kernel(level, k->opt, k->adt, k->pdt);
    void *blk[10];
    size_t sz[5];
    sz[0] = (size_t)tot * esz(k->adt); sz[1] = (size_t)tot * esz(k->pdt); sz[2] = sz[3] = sz[4] = (size_t)tot * 4;
    for (nb = 0; nb < 10; nb++) blk[nb] = malloc(sz[nb % 5]);
    /* unaligned starts: every array is offset by `off` elements from its allocation */
    a.g = (char *)blk[0] + off * (int64_t)esz(k->adt); a.p = (char *)blk[1] + off * (int64_t)esz(k->pdt);
    a.w = (float *)blk[2] + off; a.m = (float *)blk[3] + off; a.v = (float *)blk[4] + off;
    r.g = (char *)blk[5] + off * (int64_t)esz(k->adt); r.p = (char *)blk[6] + off * (int64_t)esz(k->pdt);
    r.w = (float *)blk[7] + off; r.m = (float *)blk[8] + off; r.v = (float *)blk[9] + off;
    fill(&a, n, k, nonfinite, gpat);
    memcpy(r.g, a.g, (size_t)n * esz(k->adt)); memcpy(r.p, a.p, (size_t)n * esz(k->pdt));
    memcpy(r.w, a.w, (size_t)n * 4); memcpy(r.m, a.m, (size_t)n * 4); memcpy(r.v, a.v, (size_t)n * 4);
    if (k->pdt == ZERO_F32) { a.w = (float *)a.p; r.w = (float *)r.p;   /* the params are the master */
        for (i = 0; i < n; i++) a.w[i] = r.w[i] = edge_float(nonfinite); }
    fn(k, a.g, a.p, a.w, with_m ? a.m : NULL, a.v, lo, n);
    reference(k, r.g, r.p, r.w, with_m ? r.m : NULL, r.v, lo, n);
    for (i = 0; i < n && ok; i++) {
        uint32_t aw = zero__f32_bits(a.w[i]), rw = zero__f32_bits(r.w[i]);
        uint32_t am = zero__f32_bits(a.m[i]), rm = zero__f32_bits(r.m[i]);
        uint32_t av = zero__f32_bits(a.v[i]), rv = zero__f32_bits(r.v[i]);
        ok &= CHECK(same32(aw, rw), "%s %s n=%lld off=%lld: master[%lld] %08x, reference %08x", zero__simd_name[level],
                    what, (long long)n, (long long)off, (long long)i, aw, rw);
        ok &= CHECK(same32(am, rm) && same32(av, rv), "%s %s: m/v[%lld] %08x/%08x, reference %08x/%08x",
                    zero__simd_name[level], what, (long long)i, am, av, rm, rv);
        if (k->pdt != ZERO_F32) {
            uint16_t ap = ((uint16_t *)a.p)[i], rp = ((uint16_t *)r.p)[i];
            ok &= CHECK(same16(ap, rp, k->pdt), "%s %s: param[%lld] %04x, reference %04x (master %08x)", zero__simd_name[level],
                        what, (long long)i, ap, rp, rw);
        }
    }
    for (nb = 0; nb < 10; nb++) free(blk[nb]);
    return ok;
}

static void make_k(zero__optk *k, int opt, int adt, int pdt, int variant) {
    memset(k, 0, sizeof *k);
    k->opt = opt; k->adt = adt; k->pdt = pdt;
    k->decay = variant & 1;
    k->gscale = variant & 2 ? 1.0f : 0.37f / 3.0f;
    k->ah.beta1 = 0.9f; k->ah.beta2 = 0.999f;
    k->ah.one_minus_beta1 = (float)(1.0 - 0.9); k->ah.one_minus_beta2 = (float)(1.0 - 0.999);
    k->ah.eps = 1e-8f; k->ah.decay_mul = (float)(1.0 - 1e-3 * 0.01);
    k->ah.neg_step_size = (float)(-(1e-3 / (1.0 - pow(0.9, 3.0))));
    k->ah.bc2_sqrt = (float)sqrt(1.0 - pow(0.999, 3.0));
    k->sh.neg_lr = -0.05f; k->sh.weight_decay = variant & 4 ? 0.0f : 0.01f; k->sh.momentum = 0.9f;
    k->sh.one_minus_dampening = variant & 8 ? 0.75f : 1.0f;
    k->sh.nesterov = (variant >> 4) & 1; k->sh.first = (variant >> 5) & 1;
}

static const int64_t lens[] = { 0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 100, 257, 4099 };

static void test_paths(int level) {
    int opt, adt, pdt, li, variant;
    char what[96];
    for (opt = ZERO_OPTIM_ADAMW; opt <= ZERO_OPTIM_LION; opt++)
        for (adt = ZERO_F32; adt <= ZERO_F16; adt++)
            for (pdt = ZERO_F32; pdt <= ZERO_F16; pdt++) {
                int ok = 1;
                test_begin("cpuopt_%s_%s_g%s_p%s", zero__simd_name[level], oname(opt),
                           zero_dtype_str((zero_dtype)adt), zero_dtype_str((zero_dtype)pdt));
                for (variant = 0; variant < (opt == ZERO_OPTIM_SGD ? 64 : 4) && ok; variant++) {
                    zero__optk k;
                    make_k(&k, opt, adt, pdt, variant);
                    snprintf(what, sizeof what, "%s g%s p%s variant %d", oname(opt),
                             zero_dtype_str((zero_dtype)adt), zero_dtype_str((zero_dtype)pdt), variant);
                    for (li = 0; li < (int)(sizeof lens / sizeof lens[0]) && ok; li++) {
                        int64_t n = lens[li];
                        ok &= compare_once(level, &k, n, li % 4, 0, 0, 0, opt != ZERO_OPTIM_SGD || (variant & 1), what);
                        ok &= compare_once(level, &k, n, 3 - li % 4, n / 3, 1, 0, opt != ZERO_OPTIM_SGD || !(variant & 1), what);
                    }
                }
                if (ok && adt != ZERO_F32) {         /* every 16-bit gradient pattern */
                    zero__optk k;
                    make_k(&k, opt, adt, pdt, 3);
                    ok &= compare_once(level, &k, 65536 + 5, 1, 0, 1, 1, 1, "all gradient patterns");
                }
                test_end();
            }
}

/* narrowing alone, over every upper half and a set of lower halves (ties, near-ties):
   SGD with lr = -0 passes the master through unchanged (NaNs quieted), so the params
   must equal zero__f32_to_bf16 / zero__f32_to_f16 of it. */
static void test_narrowing(int level) {
    static const uint32_t lows[] = { 0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001,
                                     0xefff, 0xf000, 0xf001, 0xffff };
    int nl = (int)(sizeof lows / sizeof lows[0]), pdt;
    int64_t n = (int64_t)65536 * (nl + 1), i;
    float *w = (float *)malloc((size_t)n * 4), *g = (float *)malloc((size_t)n * 4);
    uint16_t *p = (uint16_t *)malloc((size_t)n * 2);
    for (pdt = ZERO_BF16; pdt <= ZERO_F16; pdt++) {
        zero__optk k;
        int ok = 1;
        test_begin("cpuopt_%s_narrow_%s", zero__simd_name[level], zero_dtype_str((zero_dtype)pdt));
        make_k(&k, ZERO_OPTIM_SGD, ZERO_F32, pdt, 4);
        k.sh.neg_lr = -0.0f;
        k.gscale = 1.0f;
        for (i = 0; i < n; i++) {
            uint32_t hi = (uint32_t)(i % 65536), lo = i / 65536 < nl ? lows[i / 65536] : rnd32() & 0xffffu;
            w[i] = bits(hi << 16 | lo);
            g[i] = 1.0f;
        }
        zero__opt_kernel(level, k.opt, k.adt, k.pdt)(&k, g, p, w, NULL, NULL, 0, n);
        for (i = 0; i < n && ok; i++) {
            uint16_t want = pdt == ZERO_BF16 ? zero__f32_to_bf16(w[i]) : zero__f32_to_f16(w[i]);
            ok &= CHECK(p[i] == want, "%s: %08x -> %04x, zero.h's scalar rounding gives %04x", zero__simd_name[level],
                        zero__f32_bits(w[i]), p[i], want);
        }
        test_end();
    }
    free(w); free(g); free(p);
}

/* bf16 moments (ON OPTIMIZER STATES). The conversions: every bf16 pattern widened, and
   every upper half with a set of lower halves narrowed, as zero__ld / zero__st; then the
   fused pass with bf16 moments (zero__opt_call: pieces widened, updated, narrowed) on this
   path against the scalar path, bit for bit: moments, master and params, AdamW, Lion and SGD
   with momentum, over lengths that cut the pieces and the vectors anywhere (a NaN's payload
   is free, as in compare_once: the data holds NaNs and infinities). */
static void test_states(int level) {
    static const uint32_t lows[] = { 0, 1, 0x7fff, 0x8000, 0x8001, 0xffff };
    static const int64_t slens[] = { 1, 15, 17, 511, 512, 513, 1500 };
    int nl = (int)(sizeof lows / sizeof lows[0]), ok = 1, opt, li, a;
    int64_t n = (int64_t)65536 * nl, i;
    zero__cvt_fn cvt = zero__cvt_kernel(level);
    float *f = (float *)malloc((size_t)n * 4);
    uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
    test_begin("cpuopt_%s_states_bf16_convert", zero__simd_name[level]);
    for (i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    cvt(f, h, ZERO_BF16, 65536, 1);
    for (i = 0; i < 65536 && ok; i++)
        ok &= CHECK(zero__f32_bits(f[i]) == (uint32_t)i << 16, "widen %04x: %08x", (unsigned)i, zero__f32_bits(f[i]));
    for (i = 0; i < n; i++) f[i] = bits((uint32_t)(i % 65536) << 16 | lows[i / 65536]);
    cvt(h, f, ZERO_BF16, n, 0);
    for (i = 0; i < n && ok; i++)
        ok &= CHECK(h[i] == zero__f32_to_bf16(f[i]), "narrow %08x: %04x, zero__st gives %04x", zero__f32_bits(f[i]),
                    h[i], zero__f32_to_bf16(f[i]));
    test_end();
    free(f); free(h);
    for (opt = ZERO_OPTIM_ADAMW; opt <= ZERO_OPTIM_LION; opt++) {
        zero__sconv mine = zero__sconv_for(level, ZERO_BF16), ref = zero__sconv_for(ZERO__SIMD_SCALAR, ZERO_BF16);
        test_begin("cpuopt_%s_states_bf16_%s", zero__simd_name[level], oname(opt));
        for (li = 0; li < (int)(sizeof slens / sizeof slens[0]); li++) {
            int64_t len = slens[li];
            zero__optk k;
            uint16_t *g = (uint16_t *)malloc((size_t)len * 2), *p[2], *m[2], *v[2];
            float *w[2];
            make_k(&k, opt, ZERO_BF16, ZERO_BF16, 1);
            for (a = 0; a < 2; a++) {
                p[a] = (uint16_t *)malloc((size_t)len * 2); m[a] = (uint16_t *)malloc((size_t)len * 2);
                v[a] = (uint16_t *)malloc((size_t)len * 2); w[a] = (float *)malloc((size_t)len * 4);
            }
            for (i = 0; i < len; i++) {
                g[i] = zero__f32_to_bf16(edge_float(1));
                w[0][i] = w[1][i] = edge_float(0);
                m[0][i] = m[1][i] = zero__f32_to_bf16(edge_float(0));
                v[0][i] = v[1][i] = zero__f32_to_bf16(fabsf(edge_float(0)));
            }
            for (a = 0; a < 2; a++)     /* two steps: the second reads what the first narrowed */
                for (i = 0; i < 2; i++)
                    zero__opt_call(zero__opt_kernel(i ? level : ZERO__SIMD_SCALAR, opt, ZERO_BF16, ZERO_BF16), &k,
                                   i ? &mine : &ref, g, p[i], w[i], m[i], opt == ZERO_OPTIM_ADAMW ? v[i] : NULL, 0, len);
            for (i = 0; i < len && ok; i++)     /* a NaN's payload is free (same32's comment) */
                ok &= CHECK(same16(m[0][i], m[1][i], ZERO_BF16) && same16(v[0][i], v[1][i], ZERO_BF16) &&
                            same32(zero__f32_bits(w[0][i]), zero__f32_bits(w[1][i])) &&
                            same16(p[0][i], p[1][i], ZERO_BF16),
                            "%s: %lld elements: [%lld] m %04x v %04x w %08x p %04x, the scalar path's %04x %04x %08x %04x",
                            zero__simd_name[level], (long long)len, (long long)i, m[1][i], v[1][i],
                            zero__f32_bits(w[1][i]), p[1][i], m[0][i], v[0][i], zero__f32_bits(w[0][i]), p[0][i]);
            free(g);
            for (a = 0; a < 2; a++) { free(p[a]); free(m[a]); free(v[a]); free(w[a]); }
        }
        test_end();
    }
}

/* q8 moments (ON OPTIMIZER STATES): the path's block decode and encode bit for bit the
   scalar loops', on every code and edge scales, and on blocks of edge values (zeros,
   subnormals, NaN, infinities, ties); encode(decode(block)) gives the block back; the
   error of a round trip is within half a code step of the 4th-root map; and the fused q8
   pass (zero__opt_part_q8, segments straddling blocks and a padding gap) gives the scalar
   path's bits over two steps. */
static void test_q8(int level) {
    static const uint32_t scales[] = { 0, 1, 0x00400000u, 0x00800000u, 0x3f800000u, 0x3a83126fu, 0x7f7fffffu,
                                       0x7fc00000u, 0x2f000000u };
    zero__q8dec_fn dec, rdec;
    zero__q8enc_fn enc, renc;
    float a[ZERO__QB], b[ZERO__QB], x[ZERO__QB];
    uint8_t c[ZERO__QB], rc[ZERO__QB];
    int kind, si, i, rep, ok = 1;
    unsigned env = zero__fpenv_enter();
    zero__q8_kernels(level, &dec, &enc);
    zero__q8_kernels(ZERO__SIMD_SCALAR, &rdec, &renc);
    test_begin("cpuopt_%s_q8_decode", zero__simd_name[level]);
    for (kind = 0; kind < 2; kind++)
        for (si = 0; si < (int)(sizeof scales / sizeof scales[0]); si++)
            for (rep = 0; rep < 2 && ok; rep++) {
                for (i = 0; i < ZERO__QB; i++) c[i] = (uint8_t)(rep ? i : (i * 7 + 3) % 256);
                dec(a, c, bits(scales[si]), kind);
                rdec(b, c, bits(scales[si]), kind);
                for (i = 0; i < ZERO__QB && ok; i++)
                    ok &= CHECK(same32(zero__f32_bits(a[i]), zero__f32_bits(b[i])),
                                "kind %d scale %08x code %d: %08x, scalar %08x", kind, scales[si], c[i],
                                zero__f32_bits(a[i]), zero__f32_bits(b[i]));
                if (scales[si] != 0x7fc00000u)  /* the top code gives the scale itself */
                    for (i = 0; i < ZERO__QB && ok; i++)
                        if (c[i] == (kind ? 255 : 127)) ok &= CHECK(a[i] == bits(scales[si]), "top code: %g", a[i]);
            }
    test_end();
    test_begin("cpuopt_%s_q8_encode", zero__simd_name[level]);
    for (kind = 0; kind < 2 && ok; kind++)
        for (rep = 0; rep < 400 && ok; rep++) {
            float s, rs;
            int mode = rep % 5;     /* 0 edge values, 1 finite edge, 2 one magnitude, 3 wide range, 4 one nonzero */
            for (i = 0; i < ZERO__QB; i++) {
                float e = edge_float(mode == 0);
                if (mode == 2) e = bits((rnd32() & 0x80000000u) | ((120u + rnd32() % 8u) << 23) | (rnd32() & 0x7fffffu));
                if (mode == 3) e = bits((rnd32() & 0x80000000u) | ((90u + rnd32() % 40u) << 23) | (rnd32() & 0x7fffffu));
                if (mode == 4) e = i == rep % ZERO__QB ? 3.0f : 0.0f;
                x[i] = kind && rnd32() % 4 ? fabsf(e) : e;
            }
            s = enc(c, x, kind);
            rs = renc(rc, x, kind);
            ok &= CHECK(same32(zero__f32_bits(s), zero__f32_bits(rs)) && memcmp(c, rc, ZERO__QB) == 0,
                        "kind %d rep %d: scale %08x codes vs the scalar path's %08x (first code %d vs %d)", kind, rep,
                        zero__f32_bits(s), zero__f32_bits(rs), c[0], rc[0]);
            if (!ok || s != s || s == 0.0f) continue;
            /* the round trip: decode, encode again: the same block */
            dec(a, c, s, kind);
            rs = enc(rc, a, kind);
            ok &= CHECK(zero__f32_bits(rs) == zero__f32_bits(s) && memcmp(c, rc, ZERO__QB) == 0,
                        "kind %d rep %d: encode(decode(block)) is not the block", kind, rep);
            for (i = 0; i < ZERO__QB && ok; i++) {     /* within half a step of the map, in the 4th-root domain */
                double y = fabs((double)x[i]) / s, r = sqrt(sqrt(y)), got = sqrt(sqrt(fabs((double)a[i]) / s));
                double step = kind ? 1.0 / 256 : 1.0 / 127;
                if (kind && r < 0.5 / 256) continue;    /* v below the smallest code: rounded up to it */
                ok &= CHECK(fabs(got - r) <= 0.5 * step + 1e-6, "kind %d: x %g decodes to %g (4th roots %g vs %g)", kind,
                            x[i], a[i], r, got);
                if (!kind) ok &= CHECK(a[i] == 0.0f || (a[i] < 0) == (x[i] < 0), "sign of %g: %g", x[i], a[i]);
            }
        }
    test_end();
    zero__fpenv_leave(env);
    {   /* the q8 pass: 5 blocks, segments [10, 300) [300, 700) [800, 1000), blocks 3 (part) and 4 (none) */
        enum { NST = 5 * ZERO__QB };
        static zero_ctx ctx;
        zero__segment segs[3];
        zero__opt_job j[2];
        int opt, st, r;
        int64_t st_at[3] = { 10, 300, 800 }, sn[3] = { 290, 400, 200 };
        test_begin("cpuopt_%s_q8_pass", zero__simd_name[level]);
        for (opt = ZERO_OPTIM_ADAMW; opt <= ZERO_OPTIM_LION && ok; opt++) {
            float *g = (float *)calloc(NST, 4), *w[2];
            char *m[2], *v[2];
            uint16_t *pp[2];
            memset(&ctx, 0, sizeof ctx);
            for (i = 0; i < 3; i++) {
                segs[i].n = sn[i]; segs[i].state_idx = segs[i].grad_idx = segs[i].param_idx = st_at[i];
                segs[i].decay = i != 1;
            }
            ctx.lay.segs = segs;
            ctx.lay.num_segs = 3;
            for (i = 0; i < NST; i++) g[i] = (float)((int)(rnd32() % 2001u) - 1000) * 1e-4f;
            for (r = 0; r < 2; r++) {
                w[r] = (float *)calloc(NST, 4);
                pp[r] = (uint16_t *)calloc(NST, 2);
                m[r] = (char *)calloc(NST + NST / ZERO__QB * 4, 1);
                v[r] = (char *)calloc(NST + NST / ZERO__QB * 4, 1);
                memset(&j[r], 0, sizeof j[r]);
                j[r].ctx = &ctx;
                make_k(&j[r].k, opt, ZERO_F32, ZERO_BF16, 1);
                j[r].fn = zero__opt_kernel(r ? level : ZERO__SIMD_SCALAR, opt, ZERO_F32, ZERO_BF16);
                j[r].params = pp[r]; j[r].grads = g; j[r].master = w[r];
                j[r].m = m[r]; j[r].v = opt == ZERO_OPTIM_ADAMW ? v[r] : NULL;
                j[r].nst = NST; j[r].qhi = NST / ZERO__QB;
                j[r].sc = zero__sconv_for(r ? level : ZERO__SIMD_SCALAR, ZERO__SDT_Q8);
            }
            for (i = 0; i < NST; i++) w[0][i] = w[1][i] = (float)((i % 17) - 8) * 0.0625f;
            for (st = 0; st < 3; st++)
                for (r = 0; r < 2; r++) zero__opt_part_q8(&j[r], 0, 1);
            ok &= CHECK(memcmp(w[0], w[1], NST * 4) == 0 && memcmp(pp[0], pp[1], NST * 2) == 0 &&
                        memcmp(m[0], m[1], NST + NST / ZERO__QB * 4) == 0 && memcmp(v[0], v[1], NST + NST / ZERO__QB * 4) == 0,
                        "%s: the q8 pass differs from the scalar path's", oname(opt));
            ok &= CHECK(((float *)(m[1] + NST))[4] == 0.0f && ((float *)(m[1] + NST))[0] > 0.0f,
                        "the padding block was touched, or block 0 was not");
            ok &= CHECK(w[1][5] == w[0][5] && w[1][5] == (float)((5 % 17) - 8) * 0.0625f && w[1][20] != (float)((20 % 17) - 8) * 0.0625f,
                        "the pass updated padding or missed a segment");
            free(g);
            for (r = 0; r < 2; r++) { free(w[r]); free(pp[r]); free(m[r]); free(v[r]); }
        }
        test_end();
    }
}

/* the gradient norm's block sum of squares: every path against the definition
   (lane j % 8, in order, then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))), bit for bit
   (a NaN, which makes zero_step skip the step, may differ in payload) */
static void test_sumsq(int level) {
    static const int64_t ns[] = { 0, 1, 7, 8, 9, 15, 16, 17, 31, 100, 1000, 1023, 1024 };
    zero__sumsq_fn fn = zero__sumsq_kernel(level);
    int adt, ni, rep;
    for (adt = ZERO_F32; adt <= ZERO_F16; adt++) {
        char *buf = (char *)malloc(1024 * 4 + 8);
        int ok = 1;
        test_begin("cpuopt_%s_sumsq_g%s", zero__simd_name[level], zero_dtype_str((zero_dtype)adt));
        for (ni = 0; ni < (int)(sizeof ns / sizeof ns[0]) && ok; ni++)
            for (rep = 0; rep < 8 && ok; rep++) {
                int64_t n = ns[ni], j, off = rep % 3;
                void *g = buf + off * (int64_t)esz(adt);
                double lanes[8] = { 0, 0, 0, 0, 0, 0, 0, 0 }, want, got;
                for (j = 0; j < n; j++) {
                    float x = edge_float(0);
                    if (rep == 7 && j == n / 2) x = bits(0x7f800000u);   /* one inf */
                    if (adt == ZERO_F32) ((float *)g)[j] = x;
                    else if (adt == ZERO_BF16) ((uint16_t *)g)[j] = zero__f32_to_bf16(x);
                    else ((uint16_t *)g)[j] = zero__f32_to_f16(x);
                }
                for (j = 0; j < n; j++) { double x = (double)zero__ld(g, j, adt); lanes[j % 8] += x * x; }
                want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
                got = fn(g, n, adt);
                ok &= CHECK(memcmp(&want, &got, sizeof want) == 0 || (want != want && got != got), "%s n=%lld off=%lld: %.17g, definition gives %.17g",
                            zero__simd_name[level], (long long)n, (long long)off, got, want);
            }
        free(buf);
        test_end();
    }
}

/* four whole blocks at once (what the norm runs where a slice has them): each block's
   sum is bitwise the single-block kernel's */
static void test_sumsq4(int level) {
    zero__sumsq_fn fn = zero__sumsq_kernel(level);
    zero__sumsq4_fn fn4 = zero__sumsq4_kernel(level);
    int adt, rep, q;
    for (adt = ZERO_F32; adt <= ZERO_F16; adt++) {
        char *buf = (char *)malloc(4 * ZERO__NORM_BLOCK * 4 + 8);
        int ok = 1;
        test_begin("cpuopt_%s_sumsq4_g%s", zero__simd_name[level], zero_dtype_str((zero_dtype)adt));
        for (rep = 0; rep < 6 && ok; rep++) {
            int64_t j, off = rep % 3;
            void *g = buf + off * (int64_t)esz(adt);
            double got[4];
            for (j = 0; j < 4 * ZERO__NORM_BLOCK; j++) {
                float x = edge_float(0);
                if (rep == 5 && j == 1500) x = bits(0x7f800000u);
                if (adt == ZERO_F32) ((float *)g)[j] = x;
                else if (adt == ZERO_BF16) ((uint16_t *)g)[j] = zero__f32_to_bf16(x);
                else ((uint16_t *)g)[j] = zero__f32_to_f16(x);
            }
            fn4(g, adt, got);
            for (q = 0; q < 4 && ok; q++) {
                double want = fn((char *)g + (int64_t)q * ZERO__NORM_BLOCK * (int64_t)esz(adt), ZERO__NORM_BLOCK, adt);
                ok &= CHECK(memcmp(&want, &got[q], sizeof want) == 0 || (want != want && got[q] != got[q]),
                            "%s off=%lld block %d: %.17g, one block at a time gives %.17g", zero__simd_name[level],
                            (long long)off, q, got[q], want);
            }
        }
        free(buf);
        test_end();
    }
}

/* a reduction that takes the norm's blocks on the way (zero__sum_norm_k): its output is
   bitwise zero__sum_into_k's, each block's sum is bitwise the norm kernel's on that block
   of the output, and each copy is the output, no byte more (one, two or more tiles of
   four blocks and short tails, 1-4 inputs, accumulating or not, the one-input in-place
   case that moves no data, 0-2 copies, without blocks), alone and cut across a 3-thread
   pool */
static void test_sum_sq(int level) {
    enum { QN = 4 * 4 * ZERO__NORM_BLOCK + 700 };
    zero__pool *pool = zero__pool_create(3, NULL);
    zero__sumsq_fn fn = zero__sumsq_kernel(level);
    int sdt, rdt;
    for (sdt = ZERO_F32; sdt <= ZERO_F16; sdt++)
        for (rdt = ZERO_F32; rdt <= ZERO_F16; rdt++) {
            int ok = 1, rep;
            test_begin("cpuopt_%s_sum_sq_s%s_r%s", zero__simd_name[level], zero_dtype_str((zero_dtype)sdt),
                       zero_dtype_str((zero_dtype)rdt));
            for (rep = 0; rep < 24 && ok; rep++) {
                static const int64_t ns[6] = { 1, 1000, 4 * ZERO__NORM_BLOCK, 4 * ZERO__NORM_BLOCK + 1,
                                               3 * 4 * ZERO__NORM_BLOCK + 2 * ZERO__NORM_BLOCK + 77, QN };
                int nin = 1 + rep % 4, acc = rep / 4 % 3 == 1, inplace = nin == 1 && sdt == rdt && rep / 4 % 3 == 2, k;
                int64_t n = ns[(rep + rep / 4) % 6], nb = (n + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK, i, b;
                char *in = (char *)malloc((size_t)QN * 4 * 4), *out = (char *)malloc((size_t)QN * 4);
                char *want = (char *)malloc((size_t)QN * 4);
                double *blk = (double *)malloc(sizeof(double) * (size_t)(nb + 1));
                const void *ins[4], *wins[4];
                void *copies[2];
                copies[0] = malloc((size_t)QN * 4 + 1); copies[1] = malloc((size_t)QN * 4 + 1);
                memset(copies[0], 0x5a, (size_t)QN * 4 + 1); memset(copies[1], 0x5a, (size_t)QN * 4 + 1);
                for (k = 0; k < nin; k++) {
                    ins[k] = wins[k] = in + (int64_t)k * QN * 4;
                    for (i = 0; i < n; i++) zero__st((void *)ins[k], i, sdt, edge_float(rep % 5 == 4));
                }
                for (i = 0; i < n; i++) zero__st(out, i, rdt, edge_float(0));
                if (inplace) { memcpy(out, ins[0], (size_t)n * esz(sdt)); ins[0] = out; }
                memcpy(want, out, (size_t)n * esz(rdt));
                if (inplace) wins[0] = want;
                zero__sum_into_k(NULL, level, want, rdt, wins, nin, sdt, n, acc);
                for (b = 0; b <= nb; b++) blk[b] = -1.0;
                zero__sum_norm_k(rep % 3 ? pool : NULL, level, out, rdt, ins, nin, sdt, n, acc, rep % 7 == 6 ? NULL : blk,
                               copies, rep % 3);
                for (i = 0; i < n && ok; i++) {
                    float x = zero__ld(out, i, rdt), y = zero__ld(want, i, rdt);
                    ok &= CHECK(zero__f32_bits(x) == zero__f32_bits(y) || (x != x && y != y),
                                "%s n=%lld nin=%d acc=%d inplace=%d: element %lld is %a, zero__sum_into_k gives %a",
                                zero__simd_name[level], (long long)n, nin, acc, inplace, (long long)i, (double)x, (double)y);
                }
                for (b = 0; b < nb && ok && rep % 7 != 6; b++) {
                    int64_t len = n - b * ZERO__NORM_BLOCK < ZERO__NORM_BLOCK ? n - b * ZERO__NORM_BLOCK : ZERO__NORM_BLOCK;
                    double w = fn(zero__at(out, b * ZERO__NORM_BLOCK, rdt), len, rdt);
                    ok &= CHECK(memcmp(&w, &blk[b], sizeof w) == 0 || (w != w && blk[b] != blk[b]),
                                "%s n=%lld nin=%d acc=%d inplace=%d: block %lld's sum %.17g, the norm kernel gives %.17g",
                                zero__simd_name[level], (long long)n, nin, acc, inplace, (long long)b, blk[b], w);
                }
                ok &= CHECK(blk[nb] == -1.0, "n=%lld: a block past the end was written", (long long)n);
                for (k = 0; k < rep % 3 && ok; k++)
                    ok &= CHECK(memcmp(copies[k], out, (size_t)n * esz(rdt)) == 0 && ((char *)copies[k])[n * esz(rdt)] == 0x5a,
                                "n=%lld: copy %d differs from the output or ran past it", (long long)n, k);
                free(in); free(out); free(want); free(blk); free(copies[0]); free(copies[1]);
            }
            test_end();
        }
    zero__pool_free(pool, NULL);
}

/* the reductions' sum: every (input dtype, output dtype), 1-5 inputs, with and without
   accumulating, the output aliasing an input or not, odd lengths and starts, on the
   path alone and cut across a 3-thread pool: bitwise the definition (fp32, inputs in
   order, the stored value added first, one narrowing; NaN payloads may differ) */
static void test_sum(int level) {
    enum { SN = 1000 };
    zero__pool *pool = zero__pool_create(3, NULL);
    int sdt, rdt;
    for (sdt = ZERO_F32; sdt <= ZERO_F16; sdt++)
        for (rdt = ZERO_F32; rdt <= ZERO_F16; rdt++) {
            int ok = 1, rep;
            test_begin("cpuopt_%s_sum_s%s_r%s", zero__simd_name[level], zero_dtype_str((zero_dtype)sdt),
                       zero_dtype_str((zero_dtype)rdt));
            ok &= CHECK(zero__sum_kernel(level, sdt, rdt) != NULL, "no kernel");
            for (rep = 0; rep < 40 && ok; rep++) {
                int nin = 1 + rep % 5, acc = rep / 5 % 2, alias = rep / 10 % 2 && sdt == rdt, k;
                int64_t n = rep < 20 ? 1 + rnd32() % 300 : SN - rnd32() % 40, off = rnd32() % 3, i;
                char *in = (char *)malloc((size_t)(SN + 4) * 4 * 5), *out = (char *)malloc((size_t)(SN + 4) * 4);
                char *want = (char *)malloc((size_t)(SN + 4) * 4);
                const void *ins[5];
                for (k = 0; k < nin; k++) {
                    ins[k] = in + (int64_t)k * (SN + 4) * 4 + off * (int64_t)esz(sdt);
                    for (i = 0; i < n; i++) zero__st((void *)ins[k], i, sdt, edge_float(rep % 4 == 3));
                }
                for (i = 0; i < n; i++) zero__st(out + off * (int64_t)esz(rdt), i, rdt, edge_float(rep % 4 == 3));
                if (alias) memcpy(out + off * (int64_t)esz(rdt), ins[nin - 1], (size_t)n * esz(sdt));
                for (i = 0; i < n; i++) {       /* the definition */
                    float a = zero__ld(ins[0], i, sdt);
                    for (k = 1; k < nin; k++) a += zero__ld(ins[k], i, sdt);
                    if (acc) a = zero__ld(out + off * (int64_t)esz(rdt), i, rdt) + a;
                    zero__st(want, i, rdt, a);
                }
                if (alias) ins[nin - 1] = out + off * (int64_t)esz(rdt);
                zero__sum_into_k(rep % 2 ? pool : NULL, level, out + off * (int64_t)esz(rdt), rdt, ins, nin, sdt, n, acc);
                for (i = 0; i < n && ok; i++) {
                    float x = zero__ld(out + off * (int64_t)esz(rdt), i, rdt), y = zero__ld(want, i, rdt);
                    ok &= CHECK(zero__f32_bits(x) == zero__f32_bits(y) || (x != x && y != y),
                                "%s n=%lld nin=%d acc=%d alias=%d: element %lld is %a, the definition gives %a",
                                zero__simd_name[level], (long long)n, nin, acc, alias, (long long)i, (double)x, (double)y);
                }
                free(in); free(out); free(want);
            }
            test_end();
        }
    zero__pool_free(pool, NULL);
}

/* the comm stream borrows the caller's pool: two threads running jobs on one pool at
   once (the one that finds it busy works alone) both get every element right */
typedef struct pool_race { zero__pool *pool; float *in, *out; int64_t n; int rounds; } pool_race;
static void *pool_race_main(void *arg) {
    pool_race *p = (pool_race *)arg;
    const void *ins[2];
    int r;
    ins[0] = p->in; ins[1] = p->in;
    for (r = 0; r < p->rounds; r++) zero__sum_into_k(p->pool, zero__simd_pick(), p->out, ZERO_F32, ins, 2, ZERO_F32, p->n, 0);
    return NULL;
}
static void test_pool_shared(void) {
    enum { PN = 300000 };
    zero__pool *pool = zero__pool_create(3, NULL);
    pool_race a, b;
    zero__thread t;   /* zero.h's thread API (the test runs on Windows too) */
    int64_t i, bad = -1;
    a.pool = b.pool = pool; a.n = b.n = PN; a.rounds = b.rounds = 50;
    a.in = (float *)malloc(PN * 4); a.out = (float *)malloc(PN * 4);
    b.in = (float *)malloc(PN * 4); b.out = (float *)malloc(PN * 4);
    for (i = 0; i < PN; i++) { a.in[i] = (float)i; b.in[i] = (float)-i * 0.5f; }
    memset(a.out, 0, PN * 4); memset(b.out, 0, PN * 4);
    zero__thread_start(&t, pool_race_main, &a);
    pool_race_main(&b);
    zero__thread_join(t);
    for (i = 0; i < PN && bad < 0; i++)
        if (a.out[i] != (float)i * 2.0f || b.out[i] != (float)-i) bad = i;
    CHECK(bad < 0, "element %lld: %g and %g, want %g and %g", (long long)bad, bad < 0 ? 0.0 : (double)a.out[bad],
          bad < 0 ? 0.0 : (double)b.out[bad], (double)bad * 2.0, (double)-bad);
    free(a.in); free(a.out); free(b.in); free(b.out);
    zero__pool_free(pool, NULL);
}

static void test_simd_knob(void) {
    int best = zero__simd_pick(), l;
    CHECK(zero__simd_supported(ZERO__SIMD_SCALAR), "the scalar path is always there");
    setenv("ZERO_SIMD", "scalar", 1);
    CHECK(zero__simd_pick() == ZERO__SIMD_SCALAR, "ZERO_SIMD=scalar picked %d", zero__simd_pick());
    for (l = 1; l < ZERO__SIMD_NUM; l++) {
        setenv("ZERO_SIMD", zero__simd_name[l], 1);
        CHECK(zero__simd_pick() <= l && zero__simd_supported(zero__simd_pick()), "ZERO_SIMD=%s picked %d",
              zero__simd_name[l], zero__simd_pick());
    }
    setenv("ZERO_SIMD", "nonsense", 1);
    CHECK(zero__simd_pick() == best, "an unknown ZERO_SIMD value is ignored");
    unsetenv("ZERO_SIMD");
    printf("# best optimizer path on this machine: %s\n", zero__simd_name[best]);
}

/* one big module trained through the public API; returns the gathered fp32 params */
#define E2E_N 300001
static zero_result train(int stage, zero_comm *comm, int cpu_threads, int simd, zero_dtype pdt,
                         zero_dtype adt, zero_optim_type opt, float *out, double *norm_out) {
    zero_desc d;
    zero_ctx *z;
    zero_module mod;
    zero_param w, b;
    zero_module_desc md;
    zero_param_desc pd;
    zero_result r;
    float *init = (float *)malloc(E2E_N * 4), *gr = (float *)malloc(E2E_N * 4);
    zero_stats st;
    int i, step;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = stage; d.param_dtype = pdt; d.grad_accum_dtype = adt; d.cpu_threads = cpu_threads;
    d.optim.type = opt; d.optim.lr = 0.01; d.optim.weight_decay = 0.1; d.optim.momentum = 0.9;
    d.clip_norm = 50.0f; d.loss_scale = 4.0f;
    if ((r = zero_create(&z, &d)) != ZERO_OK) { free(init); free(gr); return r; }
    z->opt.simd = simd;                                   /* the internal knob */
    memset(&md, 0, sizeof md); md.name = "big";
    zero_add_module(z, &md, &mod);
    memset(&pd, 0, sizeof pd); pd.name = "w"; pd.ndim = 1; pd.shape[0] = E2E_N - 1001;
    zero_add_param(z, mod, &pd, &w);
    pd.name = "b"; pd.shape[0] = 1001; pd.no_decay = 1;
    zero_add_param(z, mod, &pd, &b);
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i < E2E_N; i++)   /* no shared generator: ranks run this at the same time */
        init[i] = (float)((uint32_t)i * 2654435761u % 20001u) * 1e-6f - 0.01f + (float)(i % 7) * 0.1f;
    zero_param_set_f32(z, w, init);
    zero_param_set_f32(z, b, init + E2E_N - 1001);
    for (step = 0; step < 3; step++) {
        for (i = 0; i < E2E_N; i++) gr[i] = (float)((i * 31 + step * 17) % 101 - 50) * 0.01f * 4.0f;
        zero_add_f32(zero_param_grad(z, w), d.grad_dtype ? d.grad_dtype : pdt, gr, E2E_N - 1001);
        zero_add_f32(zero_param_grad(z, b), d.grad_dtype ? d.grad_dtype : pdt, gr + E2E_N - 1001, 1001);
        if ((r = zero_grads_ready(z, mod)) != ZERO_OK) goto done;
        if ((r = zero_step(z)) != ZERO_OK) goto done;
        if (stage < 2 && !z->lay.staging_mode) {    /* the next step adds into zeros (stage 0: the pass cleared them) */
            const unsigned char *g = (const unsigned char *)z->arena.grad;
            int64_t nb = zero__pcat(z->lay.plan.bytes, ZERO_CAT_GRADS), bi;
            for (bi = 0; bi < nb && !g[bi]; bi++) {}
            if (!CHECK(bi == nb, "stage %d step %d: gradient byte %lld of %lld is not cleared", stage, step,
                       (long long)bi, (long long)nb)) { r = ZERO_ERR_STATE; goto done; }
        }
    }
    r = zero_gather_params_f32(z, out);     /* collective; every rank writes the same */
    zero_stats_get(z, &st);
    *norm_out = st.grad_norm;
done:
    zero_destroy(z);
    free(init); free(gr);
    return r;
}

static void test_threads_and_paths(void) {
    static const zero_dtype pd[] = { ZERO_BF16, ZERO_F16, ZERO_F32 };
    float *ref = (float *)malloc(E2E_N * 4), *got = (float *)malloc(E2E_N * 4);
    double nr = 0, ng = 0;
    int di, opt, l, th;
    for (di = 0; di < 3; di++)
        for (opt = ZERO_OPTIM_ADAMW; opt <= ZERO_OPTIM_LION; opt++) {
            zero_dtype adt = di == 0 ? ZERO_F32 : pd[di];
            int ok = 1;
            test_begin("cpuopt_e2e_p%s_g%s_%s", zero_dtype_str(pd[di]), zero_dtype_str(adt),
                       oname(opt));
            ok &= CHECK(train(0, NULL, 1, ZERO__SIMD_SCALAR, pd[di], adt, (zero_optim_type)opt, ref, &nr) == ZERO_OK,
                        "scalar run: %s", zero_last_error(NULL));
            for (l = 0; l < ZERO__SIMD_NUM && ok; l++) {
                if (!zero__simd_supported(l)) continue;
                for (th = 1; th <= 4 && ok; th += 3) {
                    int64_t i, bad = -1;
                    ok &= CHECK(train(th == 1 ? 1 : 3, NULL, th, l, pd[di], adt, (zero_optim_type)opt, got, &ng) == ZERO_OK,
                                "run: %s", zero_last_error(NULL));
                    for (i = 0; i < E2E_N && ok; i++)
                        if (zero__f32_bits(got[i]) != zero__f32_bits(ref[i])) { bad = i; break; }
                    ok &= CHECK(bad < 0, "path %s, %d threads: param %lld is %.9g, scalar 1-thread run gives %.9g",
                                zero__simd_name[l], th, (long long)bad, bad < 0 ? 0.0 : (double)got[bad],
                                bad < 0 ? 0.0 : (double)ref[bad]);
                    ok &= CHECK(memcmp(&ng, &nr, sizeof ng) == 0, "grad norm %.17g, scalar 1-thread run gives %.17g", ng, nr);
                }
            }
            test_end();
        }
    free(ref); free(got);
}

/* two ranks, each with a 3-thread pool (two pools run at once), every stage: the same
   bits as one rank on one thread (the gradients are the same on both ranks, so the
   mean over ranks is exact) */
typedef struct world_cfg { int stage; float *out[2]; double norm[2]; } world_cfg;
static zero_result world_rank(zero_comm *comm, int rank, void *user) {
    world_cfg *c = (world_cfg *)user;
    return train(c->stage, comm, 3, zero__simd_pick(), ZERO_BF16, ZERO_BF16, ZERO_OPTIM_ADAMW, c->out[rank], &c->norm[rank]);
}
static void test_two_ranks(void) {
    float *ref = (float *)malloc(E2E_N * 4);
    double nr = 0;
    world_cfg c;
    int stage, k;
    c.out[0] = (float *)malloc(E2E_N * 4);
    c.out[1] = (float *)malloc(E2E_N * 4);
    if (CHECK(train(0, NULL, 1, ZERO__SIMD_SCALAR, ZERO_BF16, ZERO_BF16, ZERO_OPTIM_ADAMW, ref, &nr) == ZERO_OK,
              "reference: %s", zero_last_error(NULL)))
        for (stage = 0; stage <= 3; stage++) {
            c.stage = stage;
            if (!CHECK(zero_run_local(2, world_rank, &c) == ZERO_OK, "stage %d, 2 ranks: %s", stage, zero_last_error(NULL)))
                break;
            for (k = 0; k < 2; k++) {
                CHECK(memcmp(c.out[k], ref, E2E_N * 4) == 0, "stage %d rank %d: params differ from 1 rank, 1 thread", stage, k);
                CHECK(memcmp(&c.norm[k], &nr, sizeof nr) == 0, "stage %d rank %d: grad norm %.17g vs %.17g", stage, k,
                      c.norm[k], nr);
            }
        }
    free(ref); free(c.out[0]); free(c.out[1]);
}

/* The norm taken by the reductions (zero__task_reduce: each module's last reduction of
   the step takes its blocks; zero_step's sumsq skips it) against the norm taken by sumsq
   alone (the device's sum_norm switched off): the same grad norm and params, bit for bit,
   at 1-3 ranks, every stage, with and without micro-batches and a wider accumulator; and
   with more than one rank the reductions did take the blocks (else this compares the old
   path with itself; one rank's norm is taken in zero_step). */
typedef struct taken_cfg {
    int stage, accum, wide, fused, world;
    float *out[3];
    double norm[3][3];              /* [rank][step] */
    int taken[3];
    int64_t np;
} taken_cfg;
#define TK_N 20000
static zero_result taken_rank(zero_comm *comm, int rank, void *user) {
    taken_cfg *c = (taken_cfg *)user;
    zero__dev_vt nofuse;
    zero_desc d;
    zero_ctx *z;
    zero_module mod[3];
    zero_param p[3];
    zero_stats st;
    zero_result r;
    float *gr = (float *)malloc(TK_N * 4);
    int i, m, step, micro;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = c->stage; d.param_dtype = ZERO_BF16; d.grad_accum_dtype = c->wide ? ZERO_F32 : ZERO_BF16;
    d.accum_steps = c->accum; d.cpu_threads = 2; d.clip_norm = 0.5f;
    d.optim.type = ZERO_OPTIM_ADAMW; d.optim.lr = 0.01;
    if ((r = zero_create(&z, &d)) != ZERO_OK) { free(gr); return r; }
    if (!c->fused) { nofuse = *z->dev; nofuse.sum_norm = NULL; z->dev = &nofuse; }
    for (m = 0; m < 3; m++) {
        zero_module_desc md;
        zero_param_desc pd;
        char name[8];
        snprintf(name, sizeof name, "m%d", m);
        memset(&md, 0, sizeof md); md.name = name;
        memset(&pd, 0, sizeof pd); pd.name = "w"; pd.ndim = 1; pd.shape[0] = TK_N / (m + 1) + m;
        zero_add_module(z, &md, &mod[m]);
        zero_add_param(z, mod[m], &pd, &p[m]);
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    c->taken[rank] = 1;
    for (step = 0; step < 3; step++) {
        for (micro = 0; micro < c->accum; micro++)
            for (m = 2; m >= 0; m--) {
                int64_t n = TK_N / (m + 1) + m;
                for (i = 0; i < n; i++)
                    gr[i] = (float)((i * 37 + step * 11 + micro * 5 + m + rank * 3) % 97 - 48) * 0.02f;
                zero_add_f32(zero_param_grad(z, p[m]), ZERO_BF16, gr, n);
                if ((r = zero_grads_ready(z, mod[m])) != ZERO_OK) goto done;
            }
        if ((r = zero__drain(z)) != ZERO_OK) goto done;
        for (m = 0; m < 3; m++)
            if (!z->modules[m].norm.taken) c->taken[rank] = 0;
        if ((r = zero_step(z)) != ZERO_OK) goto done;
        zero_stats_get(z, &st);
        c->norm[rank][step] = st.grad_norm;
    }
    if (rank == 0) c->np = zero_num_params(z);
    r = zero_gather_params_f32(z, c->out[rank]);
done:
    zero_destroy(z);
    free(gr);
    return r;
}
static void test_norm_taken(void) {
    taken_cfg a, b;
    int k;
    memset(&a, 0, sizeof a);
    for (k = 0; k < 3; k++) a.out[k] = (float *)malloc(sizeof(float) * 2 * TK_N);
    b = a;
    for (k = 0; k < 3; k++) b.out[k] = (float *)malloc(sizeof(float) * 2 * TK_N);
    for (a.world = 1; a.world <= 3; a.world++)
        for (a.stage = 0; a.stage <= 3; a.stage++)
            for (a.accum = 1; a.accum <= 2; a.accum++)
                for (a.wide = 0; a.wide <= 1; a.wide++) {
                    int ok = 1;
                    if (a.wide && a.accum == 1 && a.stage < 2) continue;    /* covered by accum 2 */
                    test_begin("cpuopt_norm_taken_w%d_s%d_acc%d%s", a.world, a.stage, a.accum, a.wide ? "_wide" : "");
                    a.fused = 1;
                    b.world = a.world; b.stage = a.stage; b.accum = a.accum; b.wide = a.wide; b.fused = 0;
                    ok &= CHECK(zero_run_local(a.world, taken_rank, &a) == ZERO_OK, "fused: %s", zero_last_error(NULL));
                    ok &= CHECK(zero_run_local(b.world, taken_rank, &b) == ZERO_OK, "unfused: %s", zero_last_error(NULL));
                    for (k = 0; k < a.world && ok; k++) {
                        ok &= CHECK(a.taken[k] == (a.world > 1), "rank %d: the reductions %s every module's norm blocks", k,
                                    a.world > 1 ? "did not take" : "took (one rank's stay in zero_step)");
                        int st;
                        for (st = 0; st < 3; st++)
                            ok &= CHECK(memcmp(&a.norm[k][st], &b.norm[k][st], sizeof(double)) == 0,
                                        "rank %d step %d: grad norm %.17g, taken by sumsq alone %.17g", k, st,
                                        a.norm[k][st], b.norm[k][st]);
                        ok &= CHECK(memcmp(a.out[k], b.out[k], sizeof(float) * (size_t)a.np) == 0,
                                    "rank %d: params differ", k);
                    }
                    test_end();
                }
    for (k = 0; k < 3; k++) { free(a.out[k]); free(b.out[k]); }
}

static void test_cpu_threads_option(void) {
    zero_desc d, q;
    zero_ctx *z = NULL;
    memset(&d, 0, sizeof d);
    d.cpu_threads = -1;
    CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG, "cpu_threads = -1 must be rejected");
    d.cpu_threads = 0;
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "create: %s", zero_last_error(NULL))) return;
    q = zero_query_desc(z);
    CHECK(q.cpu_threads == 1, "cpu_threads 0 means 1, got %d", q.cpu_threads);
    zero_destroy(z);
}

/* the TSan build: the kernels' bits on every path are the plain and ASan builds' to check
   (TSan adds nothing to a comparison of bits, and took a third of this program's time
   there); it runs the scalar path's sections, whose sums run on the thread pool, and
   every case with threads */
#if defined(__SANITIZE_THREAD__)
#  define CPUOPT_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define CPUOPT_TSAN 1
#  endif
#endif

int main(void) {
    int l;
    test_init();
    TEST_RUN(test_simd_knob);
    for (l = 0; l < ZERO__SIMD_NUM && test_selected("test_paths"); l++) {    /* every kernel on every path */
        if (!zero__simd_supported(l)) {     /* one SKIP line for the path's cases */
            test_begin("cpuopt_%s", zero__simd_name[l]);
            test_skip("this CPU does not support the %s path", zero__simd_name[l]);
            test_end();
            continue;
        }
#ifdef CPUOPT_TSAN
        if (l != ZERO__SIMD_SCALAR) {
            test_begin("cpuopt_%s", zero__simd_name[l]);
            test_skip("TSan build: the %s path's bits are checked by the plain and ASan builds", zero__simd_name[l]);
            test_end();
            continue;
        }
#endif
        test_paths(l);
        test_narrowing(l);
        test_states(l);
        test_q8(l);
        test_sumsq(l);
        test_sumsq4(l);
        test_sum(l);
        test_sum_sq(l);
    }
    TEST_RUN(test_cpu_threads_option);
    TEST_RUN(test_pool_shared);
    if (test_selected("test_threads_and_paths")) test_threads_and_paths();
    TEST_RUN(test_two_ranks);
    if (test_selected("test_norm_taken")) test_norm_taken();
    return test_summary();
}
