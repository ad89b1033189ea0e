/* zero_kernels.cu - the CUDA kernels of zero.h. `make CUDA=1` compiles it with nvcc
   (-fmad=false, IEEE division and sqrt) into build/cuda/zero_kernels.o and links it into every
   CUDA program. It defines ZERO_KERNELS and includes zero.h, which gives it the element-wise
   ZERO_HD functions (zero__ld / zero__st, zero__adamw_elem, zero__sgd_elem, zero__lion_elem, zero__q8*, the
   GELU and cross-entropy formulas) and the C ABI it implements (declared in zero.h's shared
   math section, "the CUDA kernels' C ABI"). Every element goes through those functions, so the
   CPU tests check the formulas the GPU runs and results are bitwise those of the CPU path.

   What is here, each with its host launcher (zero__k_*):
   - zk_opt:      the fused AdamW / SGD / Lion pass over a table of chunks of a rank's segments
                  (moments in fp32 or bf16: ON OPTIMIZER STATES); one block per chunk, 4 elements per thread per step with 16-byte (f32) or 8-byte
                  (bf16 / f16) loads when the chunk's addresses allow (after a scalar head of up
                  to 3 elements when they are equally misaligned), two steps in flight per
                  thread, streaming cache hints. Memory-bound by design (tests/gpu/bench_adamw.c).
   - zk_opt_q8:   the same pass with q8 moments: one block per q8 block, decoded into shared
                  memory, updated, its new scale from a block-wide maximum, encoded again.
   - zk_sumsq:    the gradient norm's blockwise sum of squares, 8 threads per norm block,
                  each running one of the CPU's 8 lanes in its order (bitwise equal to
                  zero__sumsq_scalar), 4 norm blocks per warp.
   - zk_sum_into: out = [out +] sum_k ins[k] in fp32, input order kept (zero__sum_into); also
                  the dtype cast and dst += src.
   - zk_quant / zk_dequant: int8 block quantization (one block per quantization block).
   - zk_qp_scales / zk_qp_codes / zk_qp_sum: ZeRO++'s payloads (zero__qp_* on the CPU): the
                  scales, then the int8 / int4 codes a word at a time; the decoded sum of payloads.
   - zk_bias_add, zk_bias_grad, zk_gelu_fwd, zk_gelu_bwd, zk_xent: the tiled linear's and the
                  example trainers' small fp32 kernels.
   - zk_muon_*:   Muon's momentum and update (zero__muon_mom1 / zero__muon_apply1, bitwise the
                  CPU's) and its Newton-Schulz iteration's glue between cuBLAS's GEMMs: the
                  transpose, the Frobenius norm (fixed parts in double, then every block adds
                  them in order) and its division, b A + c A A and a X + B X.
   tests/gpu/kernels.c checks every launcher against the CPU reference on a GPU, and on the
   CPU grid emulator (tests/kemu), whose build alone has zk_kemu_opt_groups (below). */
#define ZERO_KERNELS
#include "zero.h"

#include <cuda_runtime.h>

#define ZK_THREADS 256
#define ZK_MAX_GRID (1 << 20)          /* grid-stride loops beyond this many blocks */

static inline cudaStream_t zk_stream(void *s) { return (cudaStream_t)s; }
static inline unsigned zk_grid(int64_t blocks) {
    return (unsigned)(blocks < 1 ? 1 : blocks > ZK_MAX_GRID ? ZK_MAX_GRID : blocks);
}
static inline int zk_dtype_ok(int dt) { return dt == ZERO_F32 || dt == ZERO_BF16 || dt == ZERO_F16; }
static inline int zk_opt_ok(int opt) { return opt == ZERO_OPTIM_ADAMW || opt == ZERO_OPTIM_SGD || opt == ZERO_OPTIM_LION; }
static inline __host__ __device__ int zk_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
static inline int zk_done(void) { return (int)cudaGetLastError(); }

/* Under tests/kemu only (its kemu.h defines KEMU_H; nvcc's build has none of this): the
   number of 4-element groups zk_opt's vector loop has run, taken and reset by
   zk_kemu_opt_groups(), so tests/gpu/kernels.c can show that a chunk with a head took it
   (a chunk run all scalar gives the same bits, only slower) */
#ifdef KEMU_H
static long long zk_kemu_groups;
extern "C" long long zk_kemu_opt_groups(void) { return __atomic_exchange_n(&zk_kemu_groups, 0, __ATOMIC_SEQ_CST); }
#  define ZK_KEMU_GROUPS(k) ((void)__atomic_fetch_add(&zk_kemu_groups, (k), __ATOMIC_RELAXED))
/* and the norm blocks zero__k_sumsq launches were asked for by the calling thread, taken and
   reset by zk_kemu_sumsq_blocks() (tests/cuda_mock/costs.c: a step whose reductions took the
   norm's blocks launches none) */
static __thread long long zk_kemu_sumsq_tl;
extern "C" long long zk_kemu_sumsq_blocks(void) { long long v = zk_kemu_sumsq_tl; zk_kemu_sumsq_tl = 0; return v; }
#  define ZK_KEMU_SUMSQ(n) ((void)(zk_kemu_sumsq_tl += (n)))
#else
#  define ZK_KEMU_GROUPS(k) ((void)0)
#  define ZK_KEMU_SUMSQ(n) ((void)0)
#endif

/* ---- 4-element vector loads and stores ----
   The bytes of 4 consecutive elements move in one 16-byte (f32) or 8-byte (16-bit) access;
   the conversions are zero__ld / zero__st on an array of 4 elements that memcpy fills from
   the register copy (or the register from): reading a uint2 through a uint16_t pointer would
   break C++'s aliasing rules, and g++ -O2 miscompiled exactly that when tests/kemu first ran
   these kernels (bf16 / f16 gradients on the vector path). The cache-streaming hints
   (__ldcs / __stcs) keep data that is touched once from evicting what is reused. */
template <int DT> struct zk_raw4;
template <> struct zk_raw4<ZERO_F32> { typedef float4 t; typedef float e; };
template <> struct zk_raw4<ZERO_BF16> { typedef uint2 t; typedef uint16_t e; };
template <> struct zk_raw4<ZERO_F16> { typedef uint2 t; typedef uint16_t e; };
#define ZK_ES(DT) ((DT) == ZERO_F32 ? 4 : 2)

template <int DT> __device__ __forceinline__ void zk_ld4(const void *p, int64_t i, float v[4]) {
    typedef typename zk_raw4<DT>::t R;
    typename zk_raw4<DT>::e e[4];
    R r = __ldcs((const R *)((const char *)p + i * ZK_ES(DT)));
    memcpy(e, &r, sizeof r);
    #pragma unroll
    for (int j = 0; j < 4; j++) v[j] = zero__ld(e, j, DT);
}
template <int DT> __device__ __forceinline__ void zk_st4(void *p, int64_t i, const float v[4]) {
    typedef typename zk_raw4<DT>::t R;
    typename zk_raw4<DT>::e e[4];
    R r;
    #pragma unroll
    for (int j = 0; j < 4; j++) zero__st(e, j, DT, v[j]);
    memcpy(&r, e, sizeof r);
    __stcs((R *)((char *)p + i * ZK_ES(DT)), r);
}
__device__ __forceinline__ void zk_ldf4(const float *p, int64_t i, float v[4]) { zk_ld4<ZERO_F32>(p, i, v); }
__device__ __forceinline__ void zk_stf4(float *p, int64_t i, const float v[4]) { zk_st4<ZERO_F32>(p, i, v); }

/* ---- the fused optimizer ----
   One block per chunk (grid-stride beyond ZK_MAX_GRID chunks). The vector loop (two groups
   of 4 elements per thread per step, all loads issued before the math, then one group) runs
   over the chunk's elements from its head on: the head is the 0 to 3 elements that bring the
   gradient to a 4-element boundary, and it is taken when the same head brings every other
   array there too (master / moments 16 bytes, 16-bit params 8 bytes), i.e. when all five
   addresses are equally misaligned in elements modulo 4 (an aligned chunk has no head). The
   head and the tail after the last whole group (together at most 6 elements) go through the
   scalar loop, as does a whole chunk whose addresses can never reach alignment together.
   Both loops compute per element exactly the CPU's zero__opt_scalar_t, so which elements go
   where changes no bit; each element is written by one thread only. */
/* 4 blocks of 256 per SM (64 registers; no spills on sm_90): 50% occupancy, about
   100 KB of loads in flight per SM, well above what hides DRAM latency at full bandwidth */
#define ZK_OPT_MIN_BLOCKS 4

template <int OPT, int ADT, int PDT, int SDT> struct zk_optimizer {
    /* elements [0, 4) of the register groups g, w, m, v (m, v unused when absent) */
    static __device__ __forceinline__ void group(const zero__optk &k, const zero__adamw_hp *ah, const zero__sgd_hp *sh,
                                                 float g[4], float w[4], float m[4], float v[4], int has_m, int decay) {
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            if (OPT == ZERO_OPTIM_SGD) zero__sgd_elem(&w[j], has_m ? &m[j] : NULL, g[j] * k.gscale, sh, decay);
            else if (OPT == ZERO_OPTIM_LION) zero__lion_elem(&w[j], &m[j], g[j] * k.gscale, ah, decay);
            else zero__adamw_elem(&w[j], &m[j], &v[j], g[j] * k.gscale, ah, decay);
        }
    }
    /* the moments are of dtype SDT: bf16 ones widen exactly on load and narrow to nearest
       even on store (zero__ld / zero__st), as the CPU's zero__opt_call */
    static __device__ __forceinline__ void load(const void *g, const float *w, const void *m, const void *v, int64_t i,
                                                float gg[4], float ww[4], float mm[4], float vv[4]) {
        zk_ld4<ADT>(g, i, gg);
        zk_ldf4(w, i, ww);
        if (OPT == ZERO_OPTIM_ADAMW || m) zk_ld4<SDT>(m, i, mm);
        if (OPT == ZERO_OPTIM_ADAMW) zk_ld4<SDT>(v, i, vv);
    }
    static __device__ __forceinline__ void store(void *p, float *w, void *m, void *v, int64_t i,
                                                 const float ww[4], const float mm[4], const float vv[4]) {
        zk_stf4(w, i, ww);
        if (OPT == ZERO_OPTIM_ADAMW || m) zk_st4<SDT>(m, i, mm);
        if (OPT == ZERO_OPTIM_ADAMW) zk_st4<SDT>(v, i, vv);
        if (PDT != ZERO_F32) zk_st4<PDT>(p, i, ww);
    }
    static __device__ __forceinline__ void scalar(const zero__optk &k, const zero__adamw_hp *ah, const zero__sgd_hp *sh,
                                                  const void *g, void *p, float *w, void *m, void *v, int64_t i, int decay) {
        float gg = zero__ld(g, i, ADT) * k.gscale, mm = m ? zero__ld(m, i, SDT) : 0.0f, vv = v ? zero__ld(v, i, SDT) : 0.0f;
        if (OPT == ZERO_OPTIM_SGD) zero__sgd_elem(&w[i], m ? &mm : NULL, gg, sh, decay);
        else if (OPT == ZERO_OPTIM_LION) zero__lion_elem(&w[i], &mm, gg, ah, decay);
        else zero__adamw_elem(&w[i], &mm, &vv, gg, ah, decay);
        if (m) zero__st(m, i, SDT, mm);
        if (v) zero__st(v, i, SDT, vv);
        if (PDT != ZERO_F32) zero__st(p, i, PDT, w[i]);
    }
};

template <int OPT, int ADT, int PDT, int SDT>
__global__ void __launch_bounds__(ZK_THREADS, ZK_OPT_MIN_BLOCKS)
zk_opt(const zero__optk k, const zero__kchunk *__restrict__ chunks, int64_t nchunks, const void *grad_base,
       void *param_base, float *master, void *opt_m, void *opt_v) {
    typedef zk_optimizer<OPT, ADT, PDT, SDT> O;
    const zero__adamw_hp ah = k.ah;
    const zero__sgd_hp sh = k.sh;
    for (int64_t ci = blockIdx.x; ci < nchunks; ci += gridDim.x) {
        const zero__kchunk c = chunks[ci];
        const void *g = (const char *)grad_base + c.grad_idx * ZK_ES(ADT);
        float *w = master ? master + c.state_idx : (float *)param_base + c.param_idx;
        void *p = PDT != ZERO_F32 ? (void *)((char *)param_base + c.param_idx * ZK_ES(PDT)) : NULL;
        void *m = opt_m ? (void *)((char *)opt_m + c.state_idx * ZK_ES(SDT)) : NULL;
        void *v = OPT == ZERO_OPTIM_ADAMW ? (void *)((char *)opt_v + c.state_idx * ZK_ES(SDT)) : NULL;
        const int64_t n = c.n;
        const int decay = c.decay, has_m = m != NULL;
        /* the vector range [lo, hi): whole groups of 4 from the head on, when the head aligns
           every array (NULL counts as aligned); the scalar loop takes [0, lo) and [hi, n) */
        const int64_t head = (int64_t)((-(uintptr_t)g & (4 * ZK_ES(ADT) - 1)) / ZK_ES(ADT));
        const int vec = n - head >= 4 && zk_aligned((const char *)g + head * ZK_ES(ADT), 4 * ZK_ES(ADT)) &&
                        zk_aligned(w + head, 16) && (!m || zk_aligned((char *)m + head * ZK_ES(SDT), 4 * ZK_ES(SDT))) &&
                        (!v || zk_aligned((char *)v + head * ZK_ES(SDT), 4 * ZK_ES(SDT))) &&
                        (!p || zk_aligned((char *)p + head * ZK_ES(PDT), 4 * ZK_ES(PDT)));
        const int64_t lo = vec ? head : 0, hi = vec ? lo + ((n - lo) & ~(int64_t)3) : 0;
        if (vec) {
            const int64_t step = 4 * (int64_t)blockDim.x;
            int64_t i;
            for (i = lo + 4 * (int64_t)threadIdx.x; i + step < hi; i += 2 * step) {
                float g0[4], w0[4], m0[4], v0[4], g1[4], w1[4], m1[4], v1[4];
                O::load(g, w, m, v, i, g0, w0, m0, v0);
                O::load(g, w, m, v, i + step, g1, w1, m1, v1);
                O::group(k, &ah, &sh, g0, w0, m0, v0, has_m, decay);
                O::group(k, &ah, &sh, g1, w1, m1, v1, has_m, decay);
                O::store(p, w, m, v, i, w0, m0, v0);
                O::store(p, w, m, v, i + step, w1, m1, v1);
                ZK_KEMU_GROUPS(2);
            }
            if (i < hi) {
                float g0[4], w0[4], m0[4], v0[4];
                O::load(g, w, m, v, i, g0, w0, m0, v0);
                O::group(k, &ah, &sh, g0, w0, m0, v0, has_m, decay);
                O::store(p, w, m, v, i, w0, m0, v0);
                ZK_KEMU_GROUPS(1);
            }
        }
        /* the head and the tail (everything without a vector range), s-th of them at i */
        for (int64_t s = threadIdx.x; s < n - (hi - lo); s += blockDim.x) {
            const int64_t i = s < lo ? s : s - lo + hi;
            O::scalar(k, &ah, &sh, g, p, w, m, v, i, decay);
        }
    }
}

typedef void (*zk_opt_fn)(const zero__optk, const zero__kchunk *, int64_t, const void *, void *, float *, void *, void *);
#define ZK_OPT_ROW(OPT, ADT, SDT) { zk_opt<OPT, ADT, ZERO_F32, SDT>, zk_opt<OPT, ADT, ZERO_BF16, SDT>, zk_opt<OPT, ADT, ZERO_F16, SDT> }
#define ZK_OPT_TABLE(OPT, SDT) { ZK_OPT_ROW(OPT, ZERO_F32, SDT), ZK_OPT_ROW(OPT, ZERO_BF16, SDT), ZK_OPT_ROW(OPT, ZERO_F16, SDT) }

extern "C" int zero__k_opt(const zero__optk *k, const zero__kchunk *chunks, int64_t nchunks, const void *grad_base,
                           void *param_base, float *master, void *opt_m, void *opt_v, void *stream) {
    static const zk_opt_fn table[2][3][3][3] = {
        { ZK_OPT_TABLE(ZERO_OPTIM_ADAMW, ZERO_F32), ZK_OPT_TABLE(ZERO_OPTIM_SGD, ZERO_F32),
          ZK_OPT_TABLE(ZERO_OPTIM_LION, ZERO_F32) },
        { ZK_OPT_TABLE(ZERO_OPTIM_ADAMW, ZERO_BF16), ZK_OPT_TABLE(ZERO_OPTIM_SGD, ZERO_BF16),
          ZK_OPT_TABLE(ZERO_OPTIM_LION, ZERO_BF16) } };
    if (!k || nchunks < 0 || !zk_opt_ok(k->opt) || !zk_dtype_ok(k->adt) ||
        !zk_dtype_ok(k->pdt) || (k->sdt != 0 && k->sdt != ZERO_F32 && k->sdt != ZERO_BF16))     /* 0: fp32 */
        return (int)cudaErrorInvalidValue;
    if (nchunks == 0) return 0;
    if (!chunks || !grad_base || !param_base || (k->pdt != ZERO_F32 && !master) ||
        (k->opt == ZERO_OPTIM_ADAMW && (!opt_m || !opt_v)) || (k->opt == ZERO_OPTIM_LION && !opt_m))
        return (int)cudaErrorInvalidValue;
    table[k->sdt == ZERO_BF16][zero__opt_row(k->opt)][k->adt - 1][k->pdt - 1]<<<zk_grid(nchunks), ZK_THREADS, 0,
                                                                                 zk_stream(stream)>>>(
        *k, chunks, nchunks, grad_base, param_base, master, opt_m, opt_v);
    return zk_done();
}

/* ---- the fused optimizer with q8 moments ----
   One CUDA block per q8 block of ZERO__QB (= ZK_THREADS) state elements, thread t its element
   t (grid-stride over the rank's blocks; one without chunks is skipped, as the CPU's pass
   leaves it alone). The block's moments are decoded into shared memory; the chunks of the
   block (each inside it: zero__cuda_prepare cuts them at blocks) are updated there by the
   element math of zk_optimizer's scalar path, one thread per element; then the largest
   magnitude's bits of each moment (a tree of shared-memory maxima, NaN's bits above all)
   give the new scale, and every element of the block, untouched ones included, is encoded
   at it (zero__q8_code), as zero__opt_part_q8 does on the CPU, so the bits are the CPU's. */
template <int OPT, int ADT, int PDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_opt_q8(const zero__optk k, const zero__kchunk *__restrict__ chunks, const int64_t *__restrict__ first, int64_t nq,
          const void *grad_base, void *param_base, float *master, uint8_t *qm, uint8_t *qv, int64_t nst) {
    __shared__ float mom[2 * ZERO__QB];
    __shared__ uint32_t red[2 * ZK_THREADS];
    const zero__adamw_hp ah = k.ah;
    const zero__sgd_hp sh = k.sh;
    const int t = threadIdx.x, nk = OPT == ZERO_OPTIM_ADAMW ? 2 : qm ? 1 : 0;
    for (int64_t b = blockIdx.x; b < nq; b += gridDim.x) {
        const int64_t c0 = first[b], c1 = first[b + 1], base = b * ZERO__QB;
        if (c0 == c1) continue;                     /* the same for every thread of the block */
        for (int q = 0; q < nk; q++) {
            const uint8_t *c = q ? qv : qm;
            const float s = ((const float *)(c + nst))[b];
            mom[q * ZERO__QB + t] = zero__q8_dec1(c[base + t], s, zero__q8_k(s, q), q);
        }
        __syncthreads();
        for (int64_t ci = c0; ci < c1; ci++) {
            const zero__kchunk ch = chunks[ci];
            const int l = (int)(ch.state_idx - base) + t;
            if (t >= ch.n) continue;
            float *w = master ? master + ch.state_idx : (float *)param_base + ch.param_idx;
            const float g = zero__ld((const char *)grad_base + ch.grad_idx * ZK_ES(ADT), t, ADT) * k.gscale;
            float mm = nk ? (float)mom[l] : 0.0f, vv = nk > 1 ? (float)mom[ZERO__QB + l] : 0.0f;
            if (OPT == ZERO_OPTIM_SGD) zero__sgd_elem(&w[t], nk ? &mm : NULL, g, &sh, ch.decay);
            else if (OPT == ZERO_OPTIM_LION) zero__lion_elem(&w[t], &mm, g, &ah, ch.decay);
            else zero__adamw_elem(&w[t], &mm, &vv, g, &ah, ch.decay);
            if (nk) mom[l] = mm;
            if (nk > 1) mom[ZERO__QB + l] = vv;
            if (PDT != ZERO_F32) zero__st((char *)param_base + ch.param_idx * ZK_ES(PDT), t, PDT, w[t]);
        }
        __syncthreads();
        for (int q = 0; q < nk; q++) red[q * ZK_THREADS + t] = zero__f32_bits(mom[q * ZERO__QB + t]) & 0x7fffffffu;
        __syncthreads();
        for (int o = ZK_THREADS / 2; o > 0; o /= 2) {
            if (t < o)
                for (int q = 0; q < nk; q++) {
                    const uint32_t x = red[q * ZK_THREADS + t], y = red[q * ZK_THREADS + t + o];
                    red[q * ZK_THREADS + t] = x > y ? x : y;
                }
            __syncthreads();
        }
        for (int q = 0; q < nk; q++) {
            uint8_t *c = q ? qv : qm;
            const uint32_t mb = red[q * ZK_THREADS];
            const float s = zero__q8m_scale(mb);
            uint8_t code = 0;
            if (mb != 0u && mb < 0x7f800000u) {
                const zero__q8_enc e = zero__q8_enc_init(s, q);
                code = zero__q8_code(mom[q * ZERO__QB + t], &e, q);
            }
            c[base + t] = code;
            if (t == 0) ((float *)(c + nst))[b] = s;
        }
        __syncthreads();                            /* mom and red are reused by the next block */
    }
}

typedef void (*zk_opt_q8_fn)(const zero__optk, const zero__kchunk *, const int64_t *, int64_t, const void *, void *,
                             float *, uint8_t *, uint8_t *, int64_t);
#define ZK_OPTQ_ROW(OPT, ADT) { zk_opt_q8<OPT, ADT, ZERO_F32>, zk_opt_q8<OPT, ADT, ZERO_BF16>, zk_opt_q8<OPT, ADT, ZERO_F16> }
#define ZK_OPTQ_TABLE(OPT) { ZK_OPTQ_ROW(OPT, ZERO_F32), ZK_OPTQ_ROW(OPT, ZERO_BF16), ZK_OPTQ_ROW(OPT, ZERO_F16) }

extern "C" int zero__k_opt_q8(const zero__optk *k, const zero__kchunk *chunks, const int64_t *first, int64_t nq,
                              const void *grad_base, void *param_base, float *master, void *opt_m, void *opt_v,
                              int64_t nst, void *stream) {
    static const zk_opt_q8_fn table[3][3][3] = { ZK_OPTQ_TABLE(ZERO_OPTIM_ADAMW), ZK_OPTQ_TABLE(ZERO_OPTIM_SGD),
                                                 ZK_OPTQ_TABLE(ZERO_OPTIM_LION) };
    if (!k || nq < 0 || nst < 0 || nst != nq * ZERO__QB || !zk_opt_ok(k->opt) ||
        !zk_dtype_ok(k->adt) || !zk_dtype_ok(k->pdt))
        return (int)cudaErrorInvalidValue;
    if (nq == 0) return 0;
    if (!chunks || !first || !grad_base || !param_base || (k->pdt != ZERO_F32 && !master) ||
        (k->opt == ZERO_OPTIM_ADAMW && (!opt_m || !opt_v)) || (k->opt == ZERO_OPTIM_LION && !opt_m) ||
        !zk_aligned(opt_m, 4) || !zk_aligned(opt_v, 4))
        return (int)cudaErrorInvalidValue;
    table[zero__opt_row(k->opt)][k->adt - 1][k->pdt - 1]<<<zk_grid(nq), ZK_THREADS, 0, zk_stream(stream)>>>(
        *k, chunks, first, nq, grad_base, param_base, master, (uint8_t *)opt_m, (uint8_t *)opt_v, nst);
    return zk_done();
}

/* ---- the gradient norm's sum of squares ----
   The CPU order (zero__sumsq_tail): element j's square, exact in double, is added into lane
   j % 8 in increasing j, one by one; zero__lanes_sum combines the 8 lanes. A lane is one
   chain of dependent additions, so it must be one thread's: here each thread runs one lane,
   8 consecutive threads (a group) one norm block, a warp 4 norm blocks, a CUDA block
   ZK_NORM_WARPS warps (grid-stride beyond). Thread l of a group adds elements l, l+8, l+16,
   ... itself, so no value crosses threads until the block is done: then 8 shuffles within
   the group give its threads the 8 lanes, and the first combines them with zero__lanes_sum.
   Per 256 elements a warp runs, per thread, 8 loads, 8 conversions to double, 8 multiplies
   and 8 adds, and no shuffle or shared-memory access (the kernel this replaced ran a warp per
   norm block and formed each lane through 32 double shuffles, 64 SHFL instructions, per 256
   elements, with every thread running a lane's chain, 3 of 4 of them for nothing: the
   shuffles bound it near half the bandwidth for 16-bit gradients). The price is in the
   loads: one warp-wide load reads 4 runs of 8 consecutive elements, one per norm block,
   instead of 32 consecutive ones: 4 whole 32-byte sectors in f32, 4 half sectors in bf16 /
   f16, whose other halves the same threads load next (ZK_NORM_LOADS in flight per thread).
   Any n works (n > ZERO__NORM_BLOCK only makes longer chains). */
#define ZK_NORM_WARPS 8
#define ZK_NORM_LANES 8                 /* the CPU's lanes: a norm block's threads */
#define ZK_NORM_PER_WARP (32 / ZK_NORM_LANES)
#define ZK_NORM_LOADS 8                 /* loads in flight per thread */
template <int ADT>
__global__ void __launch_bounds__(ZK_NORM_WARPS * 32)
zk_sumsq(const void *g, const zero__knblk *__restrict__ blk, int64_t nblk, double *out) {
    const int l = threadIdx.x % ZK_NORM_LANES, q = (threadIdx.x & 31) / ZK_NORM_LANES;
    const int64_t stride = (int64_t)gridDim.x * ZK_NORM_WARPS * ZK_NORM_PER_WARP;
    /* w: the warp's first norm block; every thread of the warp runs the same iterations, so
       the shuffles below see the whole warp */
    for (int64_t w = ((int64_t)blockIdx.x * ZK_NORM_WARPS + threadIdx.x / 32) * ZK_NORM_PER_WARP; w < nblk;
         w += stride) {
        const int64_t b = w + q;
        double acc = 0.0, lanes[ZK_NORM_LANES];
        if (b < nblk) {
            const zero__knblk bk = blk[b];
            for (int64_t j = l; j < bk.n; j += ZK_NORM_LOADS * ZK_NORM_LANES) {
                float x[ZK_NORM_LOADS];
                #pragma unroll
                for (int r = 0; r < ZK_NORM_LOADS; r++) {
                    const int64_t e = j + r * ZK_NORM_LANES;
                    x[r] = e < bk.n ? zero__ld(g, bk.idx + e, ADT) : 0.0f;
                }
                #pragma unroll
                for (int r = 0; r < ZK_NORM_LOADS; r++)
                    if (j + r * ZK_NORM_LANES < bk.n) {
                        const double d = (double)x[r];
                        acc = acc + zero__nfd(d * d);
                    }
            }
        }
        #pragma unroll
        for (int k = 0; k < ZK_NORM_LANES; k++) lanes[k] = __shfl_sync(0xffffffffu, acc, k, ZK_NORM_LANES);
        if (l == 0 && b < nblk) out[b] = zero__lanes_sum(lanes);
    }
}

extern "C" int zero__k_sumsq(const void *g, int adt, const zero__knblk *blk, int64_t nblk, double *out, void *stream) {
    unsigned grid;
    if (!zk_dtype_ok(adt) || nblk < 0) return (int)cudaErrorInvalidValue;
    if (nblk == 0) return 0;
    if (!g || !blk || !out) return (int)cudaErrorInvalidValue;
    ZK_KEMU_SUMSQ(nblk);
    grid = zk_grid((nblk + ZK_NORM_WARPS * ZK_NORM_PER_WARP - 1) / (ZK_NORM_WARPS * ZK_NORM_PER_WARP));
    if (adt == ZERO_F32) zk_sumsq<ZERO_F32><<<grid, ZK_NORM_WARPS * 32, 0, zk_stream(stream)>>>(g, blk, nblk, out);
    else if (adt == ZERO_BF16) zk_sumsq<ZERO_BF16><<<grid, ZK_NORM_WARPS * 32, 0, zk_stream(stream)>>>(g, blk, nblk, out);
    else zk_sumsq<ZERO_F16><<<grid, ZK_NORM_WARPS * 32, 0, zk_stream(stream)>>>(g, blk, nblk, out);
    return zk_done();
}

/* ---- sum_into: out = [out +] sum_k ins[k], fp32, inputs in order ----
   Element-wise, so out may alias an input at the same index (a thread reads all its inputs
   before it writes). 4 elements per thread with vector accesses when every pointer allows. */
struct zk_ins { const void *p[ZERO__K_MAXIN]; };

template <int RDT, int SDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_sum_into(void *out, const zk_ins ins, int nin, int64_t count, int accumulate, int vec) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        const int64_t n4 = count / 4;
        for (; i < n4; i += stride) {
            float acc[4], x[4];
            zk_ld4<SDT>(ins.p[0], 4 * i, acc);
            for (int k = 1; k < nin; k++) {
                zk_ld4<SDT>(ins.p[k], 4 * i, x);
                #pragma unroll
                for (int j = 0; j < 4; j++) acc[j] += x[j];
            }
            if (accumulate) {
                zk_ld4<RDT>(out, 4 * i, x);
                #pragma unroll
                for (int j = 0; j < 4; j++) acc[j] = x[j] + acc[j];
            }
            zk_st4<RDT>(out, 4 * i, acc);
        }
        i = 4 * n4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    }
    for (; i < count; i += stride) {
        float acc = zero__ld(ins.p[0], i, SDT);
        for (int k = 1; k < nin; k++) acc += zero__ld(ins.p[k], i, SDT);
        if (accumulate) acc = zero__ld(out, i, RDT) + acc;
        zero__st(out, i, RDT, acc);
    }
}

typedef void (*zk_sum_fn)(void *, const zk_ins, int, int64_t, int, int);
#define ZK_SUM_ROW(RDT) { zk_sum_into<RDT, ZERO_F32>, zk_sum_into<RDT, ZERO_BF16>, zk_sum_into<RDT, ZERO_F16> }

extern "C" int zero__k_sum_into(void *out, int rdt, const void *const *ins, int nin, int sdt, int64_t count,
                                int accumulate, void *stream) {
    static const zk_sum_fn table[3][3] = { ZK_SUM_ROW(ZERO_F32), ZK_SUM_ROW(ZERO_BF16), ZK_SUM_ROW(ZERO_F16) };
    zk_ins in;
    int k, vec;
    if (!zk_dtype_ok(rdt) || !zk_dtype_ok(sdt) || nin < 1 || nin > ZERO__K_MAXIN || count < 0 || !ins)
        return (int)cudaErrorInvalidValue;
    if (count == 0) return 0;
    if (!out) return (int)cudaErrorInvalidValue;
    memset(&in, 0, sizeof in);
    vec = zk_aligned(out, 4 * (size_t)ZK_ES(rdt));
    for (k = 0; k < nin; k++) {
        if (!ins[k]) return (int)cudaErrorInvalidValue;
        in.p[k] = ins[k];
        vec = vec && zk_aligned(ins[k], 4 * (size_t)ZK_ES(sdt));
    }
    table[rdt - 1][sdt - 1]<<<zk_grid((count / (vec ? 4 : 1) + ZK_THREADS - 1) / ZK_THREADS), ZK_THREADS, 0,
                              zk_stream(stream)>>>(out, in, nin, count, accumulate != 0, vec);
    return zk_done();
}

/* ---- int8 block quantization ----
   One CUDA block per quantization block (grid-stride): the absmax is a max (NaN wins), so
   the tree reduction gives the CPU's value whatever the order; then every element is
   zero__q8 of it. */
template <int XDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_quant(int8_t *q, float *scales, const void *x, int64_t n, int block) {
    __shared__ float part[ZK_THREADS / 32];
    __shared__ float scale_sh;
    const int64_t nb = (n + block - 1) / block;
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const int64_t lo = b * block, hi = n - lo < block ? n : lo + block;
        float m = 0.0f;
        for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) m = zero__q8_absmax(m, zero__ld(x, i, XDT));
        for (int o = 16; o > 0; o /= 2) m = zero__q8_absmax(m, __shfl_xor_sync(0xffffffffu, m, o));
        if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            float s;
            m = part[0];
            for (unsigned w = 1; w < blockDim.x / 32; w++) m = zero__q8_absmax(m, part[w]);
            scale_sh = s = zero__q8_scale(m);
            scales[b] = s;
        }
        __syncthreads();
        const float s = scale_sh;
        for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) q[i] = zero__q8(zero__ld(x, i, XDT), s);
        __syncthreads();                  /* part / scale_sh are rewritten by the next block */
    }
}

template <int XDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_dequant(void *x, const int8_t *q, const float *scales, int64_t n, int block) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        zero__st(x, i, XDT, zero__dq8(q[i], scales[i / block]));
}

extern "C" int zero__k_quantize_i8(int8_t *q, float *scales, const void *x, int xdt, int64_t n, int block,
                                   void *stream) {
    unsigned grid;
    if (!zk_dtype_ok(xdt) || n < 0 || block < 1) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!q || !scales || !x) return (int)cudaErrorInvalidValue;
    grid = zk_grid((n + block - 1) / block);
    if (xdt == ZERO_F32) zk_quant<ZERO_F32><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(q, scales, x, n, block);
    else if (xdt == ZERO_BF16) zk_quant<ZERO_BF16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(q, scales, x, n, block);
    else zk_quant<ZERO_F16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(q, scales, x, n, block);
    return zk_done();
}

extern "C" int zero__k_dequantize_i8(void *x, int xdt, const int8_t *q, const float *scales, int64_t n, int block,
                                     void *stream) {
    unsigned grid;
    if (!zk_dtype_ok(xdt) || n < 0 || block < 1) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!q || !scales || !x) return (int)cudaErrorInvalidValue;
    grid = zk_grid((n + ZK_THREADS - 1) / ZK_THREADS);
    if (xdt == ZERO_F32) zk_dequant<ZERO_F32><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(x, q, scales, n, block);
    else if (xdt == ZERO_BF16) zk_dequant<ZERO_BF16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(x, q, scales, n, block);
    else zk_dequant<ZERO_F16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(x, q, scales, n, block);
    return zk_done();
}

/* ---- ZeRO++'s payloads (qwz, qgz) ----
   Encoding is two kernels: the scales (one CUDA block per quantization block, grid-stride:
   the absmax is the max of the magnitudes' bits, an unsigned max, so the tree gives the
   CPU's value whatever the order), then the codes, one thread per 4-byte word of the codes
   (4 int8 or 8 int4 codes). A word may hold codes of two quantization blocks (int4 with an
   odd block, or any block not a multiple of 4), which is why the codes wait for every
   scale rather than each block writing its own bytes. The padding bytes are written 0. */
template <int XDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_qp_scales(float *scales, const void *x, int64_t n, int block, float qmax) {
    __shared__ uint32_t part[ZK_THREADS / 32];
    const int64_t nb = (n + block - 1) / block;
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const int64_t lo = b * block, hi = n - lo < block ? n : lo + block;
        uint32_t m = 0;
        for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            uint32_t u = zero__f32_bits(zero__ld(x, i, XDT)) & 0x7fffffffu;
            m = u > m ? u : m;
        }
        for (int o = 16; o > 0; o /= 2) {
            uint32_t u = __shfl_xor_sync(0xffffffffu, m, o);
            m = u > m ? u : m;
        }
        if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            m = part[0];
            for (unsigned w = 1; w < blockDim.x / 32; w++) m = part[w] > m ? part[w] : m;
            scales[b] = zero__qp_scale(m, qmax);
        }
        __syncthreads();                  /* part is rewritten by the next block */
    }
}

template <int XDT, int BITS>
__global__ void __launch_bounds__(ZK_THREADS)
zk_qp_codes(uint32_t *words, const float *__restrict__ scales, const void *x, int64_t n, int64_t nwords, int block) {
    const int per = 32 / BITS;            /* codes per word */
    const float qmax = BITS == 8 ? 127.0f : 7.0f;
    for (int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; w < nwords; w += (int64_t)gridDim.x * blockDim.x) {
        uint32_t out = 0;
        int64_t b = w * per / block, next = (b + 1) * block;    /* one division per word */
        #pragma unroll
        for (int j = 0; j < per; j++) {
            const int64_t e = w * per + j;
            while (e >= next) { b++; next += block; }
            if (e < n) {
                int q = zero__qp_code(zero__ld(x, e, XDT), scales[b], qmax);
                out |= ((uint32_t)q & ((1u << BITS) - 1u)) << (j * BITS);
            }
        }
        words[w] = out;
    }
}

extern "C" int zero__k_qp_encode(void *dst, const void *x, int xdt, int64_t n, int bits, int block, void *stream) {
    int64_t cb, nb, nw;
    unsigned g1, g2;
    int e;
    if (!zk_dtype_ok(xdt) || n < 0 || block < 1 || (bits != 8 && bits != 4)) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!dst || !x || !zk_aligned(dst, 4)) return (int)cudaErrorInvalidValue;
    cb = zero__qp_codes(n, bits);
    nb = (n + block - 1) / block;
    nw = cb / 4;
    float *scales = (float *)((char *)dst + cb);
    uint32_t *words = (uint32_t *)dst;
    const float qmax = bits == 8 ? 127.0f : 7.0f;
    g1 = zk_grid(nb);
    g2 = zk_grid((nw + ZK_THREADS - 1) / ZK_THREADS);
    cudaStream_t s = zk_stream(stream);
    if (xdt == ZERO_F32) zk_qp_scales<ZERO_F32><<<g1, ZK_THREADS, 0, s>>>(scales, x, n, block, qmax);
    else if (xdt == ZERO_BF16) zk_qp_scales<ZERO_BF16><<<g1, ZK_THREADS, 0, s>>>(scales, x, n, block, qmax);
    else zk_qp_scales<ZERO_F16><<<g1, ZK_THREADS, 0, s>>>(scales, x, n, block, qmax);
    if ((e = zk_done()) != 0) return e;
    if (bits == 8) {
        if (xdt == ZERO_F32) zk_qp_codes<ZERO_F32, 8><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
        else if (xdt == ZERO_BF16) zk_qp_codes<ZERO_BF16, 8><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
        else zk_qp_codes<ZERO_F16, 8><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
    } else {
        if (xdt == ZERO_F32) zk_qp_codes<ZERO_F32, 4><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
        else if (xdt == ZERO_BF16) zk_qp_codes<ZERO_BF16, 4><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
        else zk_qp_codes<ZERO_F16, 4><<<g2, ZK_THREADS, 0, s>>>(words, scales, x, n, nw, block);
    }
    return zk_done();
}

/* out = [out +] the payloads' values in order, element-wise in fp32 (the stored value first
   when accumulating), then narrowed once; the payload pointers travel by value, as
   zk_sum_into's inputs do */
template <int RDT, int BITS>
__global__ void __launch_bounds__(ZK_THREADS)
zk_qp_sum(void *out, const zk_ins ps, int np, int64_t n, int64_t codes_bytes, int block, int accumulate) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = i / block;
        int k = 0;
        float acc;
        if (accumulate) acc = zero__ld(out, i, RDT);
        else acc = zero__qp_value(ps.p[k++], codes_bytes, i, BITS, b);
        for (; k < np; k++) acc = acc + zero__qp_value(ps.p[k], codes_bytes, i, BITS, b);
        zero__st(out, i, RDT, acc);
    }
}

typedef void (*zk_qp_sum_fn)(void *, const zk_ins, int, int64_t, int64_t, int, int);
#define ZK_QP_ROW(RDT) { zk_qp_sum<RDT, 8>, zk_qp_sum<RDT, 4> }

extern "C" int zero__k_qp_sum(void *out, int rdt, const void *const *ps, int np, int64_t n, int bits, int block,
                              int accumulate, void *stream) {
    static const zk_qp_sum_fn table[3][2] = { ZK_QP_ROW(ZERO_F32), ZK_QP_ROW(ZERO_BF16), ZK_QP_ROW(ZERO_F16) };
    zk_ins in;
    int k;
    if (!zk_dtype_ok(rdt) || np < 1 || np > ZERO__K_MAXIN || n < 0 || block < 1 || (bits != 8 && bits != 4) || !ps)
        return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!out) return (int)cudaErrorInvalidValue;
    memset(&in, 0, sizeof in);
    for (k = 0; k < np; k++) {
        if (!ps[k] || !zk_aligned(ps[k], 4)) return (int)cudaErrorInvalidValue;
        in.p[k] = ps[k];
    }
    table[rdt - 1][bits == 4]<<<zk_grid((n + ZK_THREADS - 1) / ZK_THREADS), ZK_THREADS, 0, zk_stream(stream)>>>(
        out, in, np, n, zero__qp_codes(n, bits), block, accumulate != 0);
    return zk_done();
}

/* ---- small fp32 kernels: bias, GELU, cross-entropy ---- */
/* y[r*ldy + c] += b[c] (b in dtype BDT) */
template <int BDT>
__global__ void __launch_bounds__(ZK_THREADS) zk_bias_add(float *y, int64_t ldy, const void *b, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[(i / cols) * ldy + i % cols] += zero__ld(b, i % cols, BDT);
}

/* one thread per column: the sum runs over the rows in order, as the CPU's does */
template <int GDT>
__global__ void __launch_bounds__(ZK_THREADS) zk_bias_grad(void *gb, const float *dy, int64_t ld, int64_t rows,
                                                           int64_t cols) {
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int64_t r = 0; r < rows; r++) s += dy[r * ld + c];
        zero__st(gb, c, GDT, zero__ld(gb, c, GDT) + s);
    }
}

__global__ void __launch_bounds__(ZK_THREADS) zk_gelu_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float xi = x[i];
        y[i] = zero__gelu(xi, zero__gelu_th(xi));
    }
}
__global__ void __launch_bounds__(ZK_THREADS) zk_gelu_bwd(float *dx, const float *x, const float *dy, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float xi = x[i];
        dx[i] = dy[i] * zero__gelu_grad(xi, zero__gelu_th(xi));
    }
}

/* a block-wide reduction of one float per thread (max or sum), every thread gets the result;
   sh: a __shared__ float[ZK_THREADS / 32], by reference (the CPU grid emulator, tests/kemu,
   checks every access to it) */
template <int MAX, class SH> __device__ float zk_block_reduce(float v, SH &sh) {
    for (int o = 16; o > 0; o /= 2) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? (u > v ? u : v) : v + u;
    }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = sh[0];
    for (unsigned w = 1; w < blockDim.x / 32; w++) v = MAX ? (sh[w] > v ? sh[w] : v) : v + sh[w];
    __syncthreads();                      /* sh is reused by the next reduction */
    return v;
}

/* one block per row (grid-stride): the max, the sum of exp, then loss and dlogits */
__global__ void __launch_bounds__(ZK_THREADS)
zk_xent(float *loss, float *dlogits, const float *logits, const int32_t *labels, int64_t rows, int64_t classes,
        float dscale) {
    __shared__ float sh[ZK_THREADS / 32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *l = logits + r * classes;
        float *d = dlogits + r * classes;
        const int32_t label = labels[r];
        const int ok = label >= 0 && label < classes;
        /* l[label] is read before the last barrier, so dlogits may be logits itself */
        const float l_label = ok ? l[label] : 0.0f;
        float mx = l[0], sum = 0.0f, inv;
        for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) mx = l[c] > mx ? l[c] : mx;
        mx = zk_block_reduce<1>(mx, sh);
        for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += zero__expf(l[c] - mx);
        sum = zk_block_reduce<0>(sum, sh);
        inv = 1.0f / sum;
        if (threadIdx.x == 0) loss[r] = ok ? zero__xent_loss(sum, l_label, mx) : zero__bits_f32(0x7fc00000u);
        for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
            d[c] = zero__xent_grad(zero__expf(l[c] - mx), inv, c == label, dscale);
    }
}

extern "C" int zero__k_bias_add(float *y, int64_t ldy, const void *b, int bdt, int64_t rows, int64_t cols,
                                void *stream) {
    unsigned grid;
    if (!zk_dtype_ok(bdt) || rows < 0 || cols < 0 || ldy < cols) return (int)cudaErrorInvalidValue;
    if (rows == 0 || cols == 0) return 0;
    if (!y || !b) return (int)cudaErrorInvalidValue;
    grid = zk_grid((rows * cols + ZK_THREADS - 1) / ZK_THREADS);
    if (bdt == ZERO_F32) zk_bias_add<ZERO_F32><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(y, ldy, b, rows, cols);
    else if (bdt == ZERO_BF16) zk_bias_add<ZERO_BF16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(y, ldy, b, rows, cols);
    else zk_bias_add<ZERO_F16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(y, ldy, b, rows, cols);
    return zk_done();
}

extern "C" int zero__k_bias_grad(void *gb, int gdt, const float *dy, int64_t ld, int64_t rows, int64_t cols,
                                 void *stream) {
    unsigned grid;
    if (!zk_dtype_ok(gdt) || rows < 0 || cols < 0 || ld < cols) return (int)cudaErrorInvalidValue;
    if (cols == 0) return 0;
    if (!gb || (rows > 0 && !dy)) return (int)cudaErrorInvalidValue;
    grid = zk_grid((cols + ZK_THREADS - 1) / ZK_THREADS);
    if (gdt == ZERO_F32) zk_bias_grad<ZERO_F32><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(gb, dy, ld, rows, cols);
    else if (gdt == ZERO_BF16) zk_bias_grad<ZERO_BF16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(gb, dy, ld, rows, cols);
    else zk_bias_grad<ZERO_F16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(gb, dy, ld, rows, cols);
    return zk_done();
}

extern "C" int zero__k_gelu_fwd(float *y, const float *x, int64_t n, void *stream) {
    if (n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!y || !x) return (int)cudaErrorInvalidValue;
    zk_gelu_fwd<<<zk_grid((n + ZK_THREADS - 1) / ZK_THREADS), ZK_THREADS, 0, zk_stream(stream)>>>(y, x, n);
    return zk_done();
}

extern "C" int zero__k_gelu_bwd(float *dx, const float *x, const float *dy, int64_t n, void *stream) {
    if (n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!dx || !x || !dy) return (int)cudaErrorInvalidValue;
    zk_gelu_bwd<<<zk_grid((n + ZK_THREADS - 1) / ZK_THREADS), ZK_THREADS, 0, zk_stream(stream)>>>(dx, x, dy, n);
    return zk_done();
}

extern "C" int zero__k_xent(float *loss, float *dlogits, const float *logits, const int32_t *labels, int64_t rows,
                            int64_t classes, float dscale, void *stream) {
    if (rows < 0 || classes < 0) return (int)cudaErrorInvalidValue;
    if (rows == 0) return 0;
    if (classes == 0 || !loss || !dlogits || !logits || !labels) return (int)cudaErrorInvalidValue;
    zk_xent<<<zk_grid(rows), ZK_THREADS, 0, zk_stream(stream)>>>(loss, dlogits, logits, labels, rows, classes, dscale);
    return zk_done();
}

/* ---- Muon (zero__muon_step on a device): the element-wise parts through zero.h's ZERO_HD
   functions (bitwise the CPU's), the Newton-Schulz iteration's glue between cuBLAS's GEMMs */
template <int ADT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_muon_mom(const void *g, float gscale, float *m, float *u, int64_t n, float mu, float omu, int nesterov) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        u[i] = zero__muon_mom1(m + i, zero__nf(zero__ld(g, i, ADT) * gscale), mu, omu, nesterov);
}
__global__ void __launch_bounds__(ZK_THREADS) zk_muon_xpose(float *dst, const float *src, int64_t rows, int64_t cols, int tr) {
    const int64_t n = rows * cols;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / cols, j = k % cols;
        dst[tr ? j * rows + i : k] = src[k];
    }
}
/* part p of P: the sum of squares of x[p*n/P, (p+1)*n/P) in double, in a fixed order: thread t
   takes elements t, t + 256, ..., then thread 0 adds the 256 in order (a block per part,
   grid-stride over the parts) */
__global__ void __launch_bounds__(ZK_THREADS) zk_muon_sumsq(const float *x, int64_t n, double *part, int nparts) {
    __shared__ double sh[ZK_THREADS];
    const unsigned t = threadIdx.x;
    for (int p = blockIdx.x; p < nparts; p += gridDim.x) {
        const int64_t lo = n * p / nparts, hi = n * (p + 1) / nparts;
        double s = 0.0;
        for (int64_t i = lo + t; i < hi; i += blockDim.x) s += (double)x[i] * (double)x[i];
        sh[t] = s;
        __syncthreads();
        if (t == 0) {
            double t = 0.0;
            for (unsigned k = 0; k < blockDim.x; k++) t += sh[k];
            part[p] = t;
        }
        __syncthreads();                  /* sh is reused by the next part */
    }
}
/* every block adds the parts in order (the same double everywhere), then divides its elements */
__global__ void __launch_bounds__(ZK_THREADS) zk_muon_scale(float *x, int64_t n, float eps, const double *part, int nparts) {
    double ss = 0.0;
    float d;
    for (int k = 0; k < nparts; k++) ss += part[k];
    d = (float)sqrt(ss);
    if (d < eps) d = eps;               /* a NaN norm stays NaN, as on the CPU */
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = x[i] / d;
}
__global__ void __launch_bounds__(ZK_THREADS) zk_muon_comb(float *gb, const float *ga, int64_t n, float b, float c) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gb[i] = zero__nf(b * ga[i]) + zero__nf(c * gb[i]);
}
__global__ void __launch_bounds__(ZK_THREADS) zk_muon_axpy(float *x, const float *y, int64_t n, float a) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = zero__nf(a * x[i]) + y[i];
}
template <int PDT>
__global__ void __launch_bounds__(ZK_THREADS)
zk_muon_apply(float *w, const float *o, int64_t n, float decay_mul, float neg_lr, int decay, void *p) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = zero__muon_apply1(w[i], o[i], decay_mul, neg_lr, decay);
        w[i] = v;
        if (PDT >= 0) zero__st(p, i, PDT, v);
    }
}

static inline unsigned zk_elems_grid(int64_t n) { return zk_grid((n + ZK_THREADS - 1) / ZK_THREADS); }

extern "C" int zero__k_muon_mom(const void *g, int adt, float gscale, float *m, float *u, int64_t n, float mu,
                                float one_minus_mu, int nesterov, void *stream) {
    if (!zk_dtype_ok(adt) || n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!g || !m || !u) return (int)cudaErrorInvalidValue;
    if (adt == ZERO_F32)
        zk_muon_mom<ZERO_F32><<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(g, gscale, m, u, n, mu, one_minus_mu, nesterov);
    else if (adt == ZERO_BF16)
        zk_muon_mom<ZERO_BF16><<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(g, gscale, m, u, n, mu, one_minus_mu, nesterov);
    else
        zk_muon_mom<ZERO_F16><<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(g, gscale, m, u, n, mu, one_minus_mu, nesterov);
    return zk_done();
}
extern "C" int zero__k_muon_xpose(float *dst, const float *src, int64_t rows, int64_t cols, int tr, void *stream) {
    if (rows < 0 || cols < 0) return (int)cudaErrorInvalidValue;
    if (rows == 0 || cols == 0) return 0;
    if (!dst || !src) return (int)cudaErrorInvalidValue;
    zk_muon_xpose<<<zk_elems_grid(rows * cols), ZK_THREADS, 0, zk_stream(stream)>>>(dst, src, rows, cols, tr);
    return zk_done();
}
extern "C" int zero__k_muon_norm(float *x, int64_t n, float eps, double *part, void *stream) {
    int parts;
    if (n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!x || !part) return (int)cudaErrorInvalidValue;
    parts = n < (int64_t)ZERO__K_MUON_PARTS * ZK_THREADS ? (int)((n + ZK_THREADS - 1) / ZK_THREADS) : ZERO__K_MUON_PARTS;
    zk_muon_sumsq<<<(unsigned)parts, ZK_THREADS, 0, zk_stream(stream)>>>(x, n, part, parts);
    zk_muon_scale<<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(x, n, eps, part, parts);
    return zk_done();
}
extern "C" int zero__k_muon_comb(float *gb, const float *ga, int64_t n, float b, float c, void *stream) {
    if (n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!gb || !ga) return (int)cudaErrorInvalidValue;
    zk_muon_comb<<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(gb, ga, n, b, c);
    return zk_done();
}
extern "C" int zero__k_muon_axpy(float *x, const float *y, int64_t n, float a, void *stream) {
    if (n < 0) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!x || !y) return (int)cudaErrorInvalidValue;
    zk_muon_axpy<<<zk_elems_grid(n), ZK_THREADS, 0, zk_stream(stream)>>>(x, y, n, a);
    return zk_done();
}
extern "C" int zero__k_muon_apply(float *w, const float *o, int64_t n, float decay_mul, float neg_lr, int decay, void *p,
                                  int pdt, void *stream) {
    const unsigned grid = zk_elems_grid(n);
    if (n < 0 || (p && !zk_dtype_ok(pdt))) return (int)cudaErrorInvalidValue;
    if (n == 0) return 0;
    if (!w || !o) return (int)cudaErrorInvalidValue;
    if (!p) zk_muon_apply<-1><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(w, o, n, decay_mul, neg_lr, decay, p);
    else if (pdt == ZERO_F32) zk_muon_apply<ZERO_F32><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(w, o, n, decay_mul, neg_lr, decay, p);
    else if (pdt == ZERO_BF16) zk_muon_apply<ZERO_BF16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(w, o, n, decay_mul, neg_lr, decay, p);
    else zk_muon_apply<ZERO_F16><<<grid, ZK_THREADS, 0, zk_stream(stream)>>>(w, o, n, decay_mul, neg_lr, decay, p);
    return zk_done();
}
