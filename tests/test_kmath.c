/* tests/test_kmath.c - the ZERO_HD formulas that zero_kernels.cu's small kernels run
   (zero__gelu_th / zero__gelu / zero__gelu_grad, zero__xent_loss / zero__xent_grad) are,
   bit for bit on the CPU, the GELU and cross-entropy of examples/train_mlp.c (copied here
   operation for operation), so moving train_mlp onto them would not change its results.
   (The GPU's tanhf / expf / logf differ by an ulp or two: tests/gpu/kernels.c.) */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

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
        float th = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
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
        for (c = 0; c < C; c++) { d[c] = expf(l[c] - mx); sum += d[c]; }
        loss = logf(sum) - (l[label] - mx);
        inv = 1.0f / sum;
        for (c = 0; c < C; c++) d[c] = dscale * (d[c] * inv - (c == label ? 1.0f : 0.0f));
        if (!CHECK(same_bits(zero__xent_loss(sum, l[label], mx), loss), "loss row %d", r)) bad++;
        for (c = 0; c < C; c++)
            if (!CHECK(same_bits(zero__xent_grad(expf(l[c] - mx), inv, c == label, dscale), d[c]), "dlogit %d,%d", r, c)) {
                bad++;
                break;
            }
    }
}

int main(void) {
    test_init();
    TEST_RUN(test_gelu_is_train_mlp);
    TEST_RUN(test_xent_is_train_mlp);
    return test_summary();
}
