/* tests/test_quant.c - int8 block quantization on the CPU (zero__quantize_i8 /
   zero__dequantize_i8, the reference of zero_kernels.cu's zero__k_quantize_i8 /
   zero__k_dequantize_i8; the rules are the zero__q8_* functions in zero.h's shared math).

   Known values (scale 1: round half to even, clamping), the round-trip bound
   |x - deq| <= scale * (1/2 + 2^-15) on random data for every dtype and several block sizes
   (the 2^-15 covers the two float roundings of x / scale and q * scale), an all-zero block,
   NaN and inf (the block's scale is NaN, its q are 0, it dequantizes to NaN, the other
   blocks are untouched), a scale that underflows, and a short last block. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
/* a float of varied magnitude, |x| in [2^-20, 2^20), either sign */
static float rnd_float(void) {
    uint32_t sign = (rnd32() & 1u) << 31;
    return zero__bits_f32(sign | ((107u + rnd32() % 40u) << 23) | (rnd32() & 0x7fffffu));
}
static int is_nan(float f) { return f != f; }

static void test_known_values(void) {
    /* absmax 127: scale exactly 1, so q is x rounded half to even, then clamped */
    static const float x[] = { 0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 2.5f, -2.5f, 63.5f, 64.5f, 126.5f, -127.0f, 2.4f, -0.49f, 3.51f };
    static const int8_t want[] = { 0, 1, -1, 0, 2, 2, -2, 64, 64, 126, -127, 2, 0, 4 };
    int8_t q[14];
    float s[1], back[14];
    int i;
    zero__quantize_i8(q, s, x, ZERO_F32, 14, 14);
    CHECK(s[0] == 1.0f, "scale %g, want 1", (double)s[0]);
    for (i = 0; i < 14; i++) CHECK(q[i] == want[i], "q[%d] = %d for %g, want %d", i, q[i], (double)x[i], want[i]);
    zero__dequantize_i8(back, ZERO_F32, q, s, 14, 14);
    for (i = 0; i < 14; i++) CHECK(back[i] == (float)want[i], "deq[%d] = %g", i, (double)back[i]);
    /* scale 2: 3 -> 1.5 -> 2, 5 -> 2.5 -> 2, -7 -> -3.5 -> -4; absmax 254 -> 127 */
    {
        static const float y[] = { 254.0f, 3.0f, 5.0f, -7.0f, 1.0f };
        static const int8_t wy[] = { 127, 2, 2, -4, 0 };
        int8_t qy[5];
        zero__quantize_i8(qy, s, y, ZERO_F32, 5, 5);
        CHECK(s[0] == 2.0f, "scale %g, want 2", (double)s[0]);
        for (i = 0; i < 5; i++) CHECK(qy[i] == wy[i], "qy[%d] = %d, want %d", i, qy[i], wy[i]);
    }
    /* the element at the absmax is always +-127, never 128 or 126 */
    for (i = 0; i < 2000; i++) {
        float z[3] = { rnd_float(), rnd_float(), rnd_float() }, sz;
        int8_t qz[3];
        int a = fabsf(z[0]) >= fabsf(z[1]) ? (fabsf(z[0]) >= fabsf(z[2]) ? 0 : 2) : (fabsf(z[1]) >= fabsf(z[2]) ? 1 : 2);
        zero__quantize_i8(qz, &sz, z, ZERO_F32, 3, 3);
        if (!CHECK(qz[a] == (z[a] < 0 ? -127 : 127), "absmax element %g -> %d", (double)z[a], qz[a])) break;
    }
}

/* quantize + dequantize random data: q in range, the bound, and the stored dtype */
static void round_trip(int dt, int64_t n, int block) {
    float *xf = (float *)malloc((size_t)n * 4), *scales = (float *)malloc((size_t)(n / block + 1) * 4);
    void *x = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    int8_t *q = (int8_t *)malloc((size_t)n);
    int64_t i, bad = 0;
    /* the error bound of a value stored in dt, relative: half an ulp of bf16 / f16 */
    double rel = dt == ZERO_F32 ? 0.0 : dt == ZERO_BF16 ? 1.0 / 256 : 1.0 / 2048;
    for (i = 0; i < n; i++) {
        float v = rnd_float();
        if (dt == ZERO_F16) v = v * 0x1p-8f;      /* keep f16 inputs finite (|x| < 2^12) */
        if (i % 17 == 0) v = 0.0f;
        zero__st(x, i, dt, v);
        xf[i] = zero__ld(x, i, dt);                /* the value as the dtype holds it */
    }
    zero__quantize_i8(q, scales, x, dt, n, block);
    zero__dequantize_i8(back, dt, q, scales, n, block);
    for (i = 0; i < n && bad < 5; i++) {
        float s = scales[i / block];
        double d = zero__ld(back, i, dt), err = fabs((double)xf[i] - d);
        double bound = (double)s * (0.5 + 0x1p-15) + fabs(d) * rel + (dt == ZERO_F16 ? 0x1p-25 : 0.0);
        if (!CHECK(q[i] >= -127 && q[i] <= 127, "q[%lld] = %d", (long long)i, q[i])) bad++;
        if (!CHECK(err <= bound, "dt %d block %d: x[%lld] = %.9g deq %.9g scale %g err %g > %g", dt, block,
                   (long long)i, (double)xf[i], d, (double)s, err, bound))
            bad++;
        if (dt != ZERO_F32) continue;
        if (!CHECK(d == (double)zero__dq8(q[i], s), "deq[%lld] is not q * scale", (long long)i)) bad++;
    }
    free(xf); free(scales); free(x); free(back); free(q);
}

static void test_round_trip(void) {
    static const int blocks[] = { 1, 3, 32, 256, 1000, 2048 };
    int d, b;
    for (d = ZERO_F32; d <= ZERO_F16; d++)
        for (b = 0; b < 6; b++) round_trip(d, 10007, blocks[b]);
}

static void test_zero_block(void) {
    float x[8] = { 1.0f, -2.0f, 3.0f, 4.0f, 0.0f, -0.0f, 0.0f, 0.0f }, s[2], back[8];
    int8_t q[8];
    int i;
    zero__quantize_i8(q, s, x, ZERO_F32, 8, 4);
    CHECK(s[0] == 4.0f / 127.0f, "scale[0] %g", (double)s[0]);
    CHECK(s[1] == 0.0f && !signbit(s[1]), "an all-zero block's scale is +0, got %g", (double)s[1]);
    for (i = 4; i < 8; i++) CHECK(q[i] == 0, "q[%d] = %d", i, q[i]);
    zero__dequantize_i8(back, ZERO_F32, q, s, 8, 4);
    for (i = 4; i < 8; i++) CHECK(back[i] == 0.0f, "deq[%d] = %g", i, (double)back[i]);
}

/* a NaN or an inf poisons its block (scale NaN, q 0, dequantized NaN) and only its block */
static void test_nonfinite(void) {
    const float nan = zero__bits_f32(0x7fc00001u), inf = zero__bits_f32(0x7f800000u);
    float x[12] = { 1.0f, nan, 2.0f, 3.0f,   -inf, 5.0f, 6.0f, 7.0f,   8.0f, 9.0f, 10.0f, -11.0f };
    float s[3], back[12];
    int8_t q[12];
    uint16_t xb[12], bb[12];
    int i, d;
    zero__quantize_i8(q, s, x, ZERO_F32, 12, 4);
    CHECK(is_nan(s[0]) && is_nan(s[1]), "scales %g %g: want NaN for the NaN and the inf block", (double)s[0], (double)s[1]);
    CHECK(s[2] == 11.0f / 127.0f, "the finite block's scale %g", (double)s[2]);
    for (i = 0; i < 8; i++) CHECK(q[i] == 0, "q[%d] = %d in a poisoned block", i, q[i]);
    CHECK(q[11] == -127, "q[11] = %d", q[11]);
    zero__dequantize_i8(back, ZERO_F32, q, s, 12, 4);
    for (i = 0; i < 8; i++) CHECK(is_nan(back[i]), "deq[%d] = %g, want NaN", i, (double)back[i]);
    for (i = 8; i < 12; i++) CHECK(!is_nan(back[i]), "deq[%d] is NaN", i);
    /* the same in the 16-bit dtypes (NaN and inf survive the narrowing) */
    for (d = ZERO_BF16; d <= ZERO_F16; d++) {
        for (i = 0; i < 12; i++) zero__st(xb, i, d, x[i]);
        zero__quantize_i8(q, s, xb, d, 12, 4);
        CHECK(is_nan(s[0]) && is_nan(s[1]) && !is_nan(s[2]), "dt %d: scales %g %g %g", d, (double)s[0],
              (double)s[1], (double)s[2]);
        zero__dequantize_i8(bb, d, q, s, 12, 4);
        for (i = 0; i < 8; i++) CHECK(is_nan(zero__ld(bb, i, d)), "dt %d: deq[%d] not NaN", d, i);
    }
    /* a block of only inf: still poisoned (the scale is not inf / 127) */
    {
        float y[2] = { inf, -inf };
        zero__quantize_i8(q, s, y, ZERO_F32, 2, 2);
        CHECK(is_nan(s[0]) && q[0] == 0 && q[1] == 0, "all-inf block: scale %g q %d %d", (double)s[0], q[0], q[1]);
    }
}

/* a block whose absmax / 127 underflows quantizes to zeros (the error is below 2^-142) */
static void test_underflow(void) {
    float x[2] = { zero__bits_f32(1u), -zero__bits_f32(3u) }, s[1], back[2];
    int8_t q[2];
    zero__quantize_i8(q, s, x, ZERO_F32, 2, 2);
    CHECK(s[0] == 0.0f && q[0] == 0 && q[1] == 0, "scale %g q %d %d", (double)s[0], q[0], q[1]);
    zero__dequantize_i8(back, ZERO_F32, q, s, 2, 2);
    CHECK(back[0] == 0.0f && back[1] == 0.0f, "deq %g %g", (double)back[0], (double)back[1]);
}

/* n = 10 in blocks of 4: the last block holds 2 elements and its own scale */
static void test_short_last_block(void) {
    float x[10] = { 100.0f, 1, 2, 3,   4, 5, 6, -50.0f,   0.25f, -0.5f }, s[3], back[10];
    int8_t q[10];
    int i;
    s[2] = -1.0f;
    zero__quantize_i8(q, s, x, ZERO_F32, 10, 4);
    CHECK(s[0] == 100.0f / 127.0f && s[1] == 50.0f / 127.0f && s[2] == 0.5f / 127.0f, "scales %g %g %g",
          (double)s[0], (double)s[1], (double)s[2]);
    CHECK(q[8] == 64 && q[9] == -127, "last block q %d %d (0.25 / (0.5/127) = 63.5 -> 64)", q[8], q[9]);
    zero__dequantize_i8(back, ZERO_F32, q, s, 10, 4);
    for (i = 0; i < 10; i++)
        CHECK(fabsf(back[i] - x[i]) <= s[i / 4] * 0.5f * (1.0f + 0x1p-14f), "deq[%d] = %g for %g", i,
              (double)back[i], (double)x[i]);
    /* a block larger than n: one short block */
    zero__quantize_i8(q, s, x, ZERO_F32, 3, 1000);
    CHECK(s[0] == 100.0f / 127.0f && q[0] == 127 && q[1] == 1 && q[2] == 3, "n < block: scale %g q %d %d %d",
          (double)s[0], q[0], q[1], q[2]);
}

int main(void) {
    test_init();
    TEST_RUN(test_known_values);
    TEST_RUN(test_round_trip);
    TEST_RUN(test_zero_block);
    TEST_RUN(test_nonfinite);
    TEST_RUN(test_underflow);
    TEST_RUN(test_short_last_block);
    return test_summary();
}
