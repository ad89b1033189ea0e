/* tests/test_kmath.c - the ZERO_HD formulas that zero_kernels.cu's small kernels run
   (zero__gelu_th / zero__gelu / zero__gelu_grad, zero__xent_loss / zero__xent_grad) are,
   bit for bit on the CPU, the GELU and cross-entropy of examples/train_mlp.c (copied here
   operation for operation), so moving train_mlp onto them would not change its results.
   zero_expf / zero_logf / zero_tanhf (no libm: the same bits on every platform and the
   GPU) against libm's double exp / log / tanh rounded to float, within 1 ulp, over a sweep
   of the floats and at every edge (NaN, infinities, zeros, subnormals, the overflow and
   underflow thresholds); "digest" lines (their bits over the sweep) are what
   tests/test_arm64.sh compares with another platform's. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include <math.h>

static uint64_t rng = 0xd1b54a32d192ed03ull;
static uint32_t rnd32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void) { return (float)(rnd32() & 0xffffffu) / 16777216.0f; }
static int same_bits(float a, float b) { return zero__f32_bits(a) == zero__f32_bits(b); }

#define GELU_SCALE 0.7978845608028654f   /* examples/train_mlp.c */

static void test_gelu_is_train_mlp(void) {
    int i, bad = 0;
    for (i = 0; i < 200000 && bad < 5; i++) {
        float x = i < 100000 ? (unif() - 0.5f) * 20.0f : zero__bits_f32(rnd32() % 0x7f800000u | (rnd32() & 1u) << 31);
        float dy = unif() - 0.5f;
        /* train_mlp.c's gelu_forward and gelu_backward */
        float th = zero_tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        float out = 0.5f * x * (1.0f + th);
        float t = th, sech2 = 1.0f - t * t, dinp = dy;
        dinp *= 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        if (!CHECK(same_bits(zero__gelu_th(x), th), "th(%g)", (double)x)) bad++;
        if (!CHECK(same_bits(zero__gelu(x, zero__gelu_th(x)), out), "gelu(%g)", (double)x)) bad++;
        if (!CHECK(same_bits(dy * zero__gelu_grad(x, zero__gelu_th(x)), dinp), "gelu'(%g)", (double)x)) bad++;
    }
}

static void test_xent_is_train_mlp(void) {
    enum { C = 37 };
    int r, c, bad = 0;
    for (r = 0; r < 2000 && bad < 5; r++) {
        float l[C], d[C], mx, sum = 0.0f, inv, loss, dscale = 1.0f / (1 + (float)(rnd32() % 64));
        int label = (int)(rnd32() % C);
        for (c = 0; c < C; c++) l[c] = (unif() - 0.5f) * 30.0f;
        /* train_mlp.c's crossentropy, one row */
        mx = l[0];
        for (c = 1; c < C; c++) mx = l[c] > mx ? l[c] : mx;
        for (c = 0; c < C; c++) { d[c] = zero_expf(l[c] - mx); sum += d[c]; }
        loss = zero_logf(sum) - (l[label] - mx);
        inv = 1.0f / sum;
        for (c = 0; c < C; c++) d[c] = dscale * (d[c] * inv - (c == label ? 1.0f : 0.0f));
        if (!CHECK(same_bits(zero__xent_loss(sum, l[label], mx), loss), "loss row %d", r)) bad++;
        for (c = 0; c < C; c++)
            if (!CHECK(same_bits(zero__xent_grad(zero_expf(l[c] - mx), inv, c == label, dscale), d[c]), "dlogit %d,%d", r, c)) {
                bad++;
                break;
            }
    }
}

/* |got - want| in float ulps of want (want the double result); NaN vs NaN is 0 */
static double ulps(float got, double want) {
    float w = (float)want;
    double u;
    if (want != want) return got != got ? 0.0 : 1e9;
    if (got != got) return 1e9;
    if (isinf(w) || isinf(got)) return (double)got == (double)w ? 0.0 : 1e9;
    u = (double)nextafterf(fabsf(w), INFINITY) - (double)fabsf(w);
    return fabs((double)got - want) / u;
}
typedef float (*fn1)(float);
/* every 499th float of both signs (and each one's libm double value) */
static void sweep(const char *name, fn1 f, double (*ref)(double), double lo, double hi) {
    uint64_t h = 1469598103934665603ull;
    double worst = 0.0, wx = 0.0;
    uint32_t u;
    int k;
    for (u = 0; u < 0x7f800000u; u += 499)
        for (k = 0; k < 2; k++) {
            float x = zero__bits_f32(u | (uint32_t)k << 31), y = f(x);
            double e;
            h = (h ^ zero__f32_bits(y)) * 1099511628211ull;
            if ((double)x < lo || (double)x > hi) continue;
            e = ulps(y, ref((double)x));
            if (e > worst) { worst = e; wx = x; }
        }
    CHECK(worst <= 1.0, "%s: %.3f ulp at %a", name, worst, wx);
    printf("digest %s %016llx\n", name, (unsigned long long)h);
    printf("# %s: at most %.3f ulp from libm's double result\n", name, worst);
}
static float lib_expf(float x) { return zero_expf(x); }
static float lib_logf(float x) { return zero_logf(x); }
static float lib_tanhf(float x) { return zero_tanhf(x); }
static void test_portable_math(void) {
    const float inf = zero__bits_f32(0x7f800000u), nan = zero__bits_f32(0x7fc00000u), tiny = zero__bits_f32(1);
    sweep("expf", lib_expf, exp, -104.0, 88.72283935546875);
    sweep("logf", lib_logf, log, 0.0, 3.5e38);
    sweep("tanhf", lib_tanhf, tanh, -1e38, 1e38);
    CHECK(zero_expf(nan) != zero_expf(nan) && zero_expf(inf) == inf && zero_expf(-inf) == 0.0f, "expf at NaN / inf");
    CHECK(zero_expf(88.7228317f) < inf && zero_expf(88.72283935546875f) == inf && zero_expf(1e30f) == inf &&
          zero_expf(-104.0f) == 0.0f &&
          zero_expf(-103.9f) > 0.0f && zero_expf(0.0f) == 1.0f && zero_expf(-0.0f) == 1.0f, "expf at its thresholds");
    CHECK(zero_logf(nan) != zero_logf(nan) && zero_logf(-1.0f) != zero_logf(-1.0f) && zero_logf(inf) == inf &&
          zero_logf(0.0f) == -inf && zero_logf(-0.0f) == -inf && zero_logf(1.0f) == 0.0f, "logf at NaN, < 0, inf, 0, 1");
    CHECK(ulps(zero_logf(tiny), log((double)tiny)) <= 1.0, "logf of the least subnormal: %.9g", (double)zero_logf(tiny));
    CHECK(zero_tanhf(nan) != zero_tanhf(nan) && zero_tanhf(inf) == 1.0f && zero_tanhf(-inf) == -1.0f &&
          zero_tanhf(10.0f) == 1.0f && zero_tanhf(-10.0f) == -1.0f, "tanhf at NaN, inf, +-10");
    CHECK(zero__f32_bits(zero_tanhf(-0.0f)) == 0x80000000u && zero_tanhf(tiny) == tiny && zero_tanhf(1e-30f) == 1e-30f,
          "tanhf near 0 keeps its argument (and -0)");
}

int main(void) {
    test_init();
    TEST_RUN(test_portable_math);
    TEST_RUN(test_gelu_is_train_mlp);
    TEST_RUN(test_xent_is_train_mlp);
    return test_summary();
}
