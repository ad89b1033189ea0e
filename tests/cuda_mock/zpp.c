/* tests/cuda_mock/zpp.c - ZeRO++ (ON ZERO++) on the CUDA device and over the NCCL communicator,
   on the CUDA and NCCL test doubles (build/mock/cuda_mock_zpp, run by tests/test_cuda_mock.sh in
   the double's synchronous and asynchronous modes, with 4 mock devices):
   - kernels: zero__k_qp_encode / zero__k_qp_sum (the double's launchers here, zero_kernels.cu's
     on a GPU) against zero.h's CPU zero__qp_encode / zero__qp_sum, bit for bit (a NaN against
     any NaN): int8 and int4, every dtype, odd sizes and blocks, blocks holding NaN, +-inf,
     zeros, subnormals and exact ties, sums of 1, 3 and ZERO__K_MAXIN payloads with and without
     accumulation; and the arguments the launchers refuse;
   - train_cuda_*: stage 3 with qwz, qgz and hpz 2 (and stage 2 with int4 qgz), 4 local ranks in
     nodes of 2 on the CUDA device: the params gathered at the end are bitwise those of the same
     run on the CPU device (the small MLP of tests/test_zpp.c; params and gradients through
     zero_copy, as its EMU run does);
   - train_nccl_*: the same runs over NCCL (zero_run_nccl, world 4, zero_comm_set_nodes 2):
     bitwise the local comm's;
   - nccl_all_to_all_split: the NCCL comm's all_to_all (device and host memory) and split
     (ranks, sizes, scopes; the endpoints' collectives; the parent still works after they are
     destroyed; a split endpoint is not split again);
   - nccl_double_split_refuses: the NCCL double's ncclCommSplit refuses a NULL newcomm or
     communicator and a negative color (not NCCL_SPLIT_NOCOLOR), as NCCL does;
   - nccl_fail_*: an all_to_all or a split that the ranks disagree on is ZERO_ERR_MISMATCH with
     a message on every rank; a failed ncclCommSplit is ZERO_ERR_COMM on its rank and
     ZERO_ERR_TIMEOUT within the timeout on the others; a rank that never comes to a split or an
     all_to_all times the others out (these two need the asynchronous double: in the
     synchronous one a collective blocks its caller until its peers come). */
#define _POSIX_C_SOURCE 200809L
#include "../test.h"
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../fixture.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <math.h>

/* ---- the kernels against the CPU ----------------------------------------------------- */

static int async_mode(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_ASYNC");
    return e && atoi(e) != 0;
}
static int is_nan_bits(const void *p, int64_t i, int dt) { return isnan(zero__ld(p, i, dt)); }

/* element i of a and b (dtype dt) are the same bits, or both NaN */
static int64_t first_diff(const void *a, const void *b, int64_t n, int dt) {
    int64_t i, es = (int64_t)zero_dtype_size((zero_dtype)dt);
    for (i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, (size_t)es) != 0 &&
            !(is_nan_bits(a, i, dt) && is_nan_bits(b, i, dt)))
            return i;
    return -1;
}

/* n values of kind k: 0 random, 1 a NaN in one block, 2 +inf and -inf, 3 zeros / -0 /
   subnormals / huge, 4 exact ties (absmax qmax: scale 1, values k + 0.5) */
static void fill(float *x, int64_t n, int kind, int block, int bits, uint64_t *s) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = fx_frand(s) * (float)(1 + i % 7);
    if (kind == 1) x[n / 2] = NAN;
    if (kind == 2) { x[n - 1] = INFINITY; x[0] = -INFINITY; }
    if (kind == 3)
        for (i = 0; i < n; i++) {
            int64_t b = i / block;
            x[i] = b % 3 == 0 ? (i & 1 ? -0.0f : 0.0f) : b % 3 == 1 ? x[i] * 1e-40f : x[i] * 3e37f;
        }
    if (kind == 4)
        for (i = 0; i < n; i++)
            x[i] = i % block == 0 ? (bits == 8 ? 127.0f : 7.0f) : (float)((int)(i % 13) - 6) + 0.5f;
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) { cudaFree(d); return NULL; }
    return d;
}

static void kernels(void) {
    static const int64_t ns[] = { 1, 3, 16, 17, 100, 1031 };
    static const int blocks[] = { 1, 7, 16, 256 };
    cudaStream_t st;
    int a, b, bt, dt, kind, cases = 0;
    uint64_t s = 12345;
    /* a blocking stream: its kernels come after the cudaMemcpy calls (legacy stream) before them */
    if (!CHECK(cudaStreamCreate(&st) == cudaSuccess, "cudaStreamCreate")) return;
    for (a = 0; a < 6; a++)
        for (b = 0; b < 4; b++)
            for (bt = 4; bt <= 8; bt += 4)
                for (dt = ZERO_F32; dt <= ZERO_F16; dt++)
                    for (kind = 0; kind < 5; kind++) {
                        const int64_t n = ns[a];
                        const int blk = blocks[b], np = kind == 0 && a == 4 ? ZERO__K_MAXIN : 3;
                        const int rdt = (dt + kind) % 3 + 1, acc = (a + kind) & 1;
                        const int64_t pb = zero__qp_bytes(n, bt, blk), es = (int64_t)zero_dtype_size((zero_dtype)dt);
                        const int64_t rs = (int64_t)zero_dtype_size((zero_dtype)rdt);
                        float *x = (float *)malloc((size_t)n * 4), *o = (float *)malloc((size_t)n * 4);
                        char *xs = (char *)malloc((size_t)(n * es)), *hp = (char *)malloc((size_t)(pb * np));
                        char *got = (char *)malloc((size_t)(pb > n * 4 ? pb : n * 4));
                        char *ho = (char *)malloc((size_t)(n * rs)), *ref = (char *)malloc((size_t)(n * rs));
                        const void *hps[ZERO__K_MAXIN];
                        void *dps[ZERO__K_MAXIN];
                        void *dx = NULL, *dout = NULL;
                        int k, e;
                        int64_t at;
                        memset(dps, 0, sizeof dps);
                        /* encode: payload k of the sum is the encoding of its own values */
                        for (k = 0; k < np; k++) {
                            fill(x, n, k == 0 ? kind : (kind + k) % 5, blk, bt, &s);
                            zero_from_f32(xs, (zero_dtype)dt, x, n);
                            zero__qp_encode(hp + k * pb, xs, dt, n, bt, blk);
                            hps[k] = hp + k * pb;
                            if (k == 0 || k == np - 1) {        /* through the kernel too */
                                dx = dev_copy(xs, (size_t)(n * es));
                                if (cudaMalloc(&dps[k], (size_t)pb) != cudaSuccess) dps[k] = NULL;
                                e = dx && dps[k] ? zero__k_qp_encode(dps[k], dx, dt, n, bt, blk, st) : -1;
                                if (e == 0) e = (int)cudaStreamSynchronize(st);
                                if (e == 0) e = (int)cudaMemcpy(got, dps[k], (size_t)pb, cudaMemcpyDeviceToHost);
                                CHECK(e == 0, "n %lld block %d bits %d %s kind %d: encode: error %d", (long long)n, blk, bt,
                                      zero_dtype_str((zero_dtype)dt), kind, e);
                                if (e == 0)
                                    CHECK(memcmp(got, hp + k * pb, (size_t)pb) == 0,
                                          "n %lld block %d bits %d %s kind %d payload %d: the kernel's payload differs from "
                                          "zero__qp_encode's", (long long)n, blk, bt, zero_dtype_str((zero_dtype)dt),
                                          (k == 0 ? kind : (kind + k) % 5), k);
                                cudaFree(dx);
                                dx = NULL;
                            } else {
                                dps[k] = dev_copy(hp + k * pb, (size_t)pb);
                            }
                        }
                        /* sum */
                        for (k = 0; k < n; k++) o[k] = fx_frand(&s) * 4.0f;
                        zero_from_f32(ho, (zero_dtype)rdt, o, n);
                        memcpy(ref, ho, (size_t)(n * rs));
                        zero__qp_sum(ref, rdt, hps, np, n, bt, blk, acc);
                        dout = dev_copy(ho, (size_t)(n * rs));
                        for (k = 0, e = dout ? 0 : -1; k < np; k++) if (!dps[k]) e = -1;
                        if (e == 0) e = zero__k_qp_sum(dout, rdt, (const void *const *)dps, np, n, bt, blk, acc, st);
                        if (e == 0) e = (int)cudaStreamSynchronize(st);
                        if (e == 0) e = (int)cudaMemcpy(got, dout, (size_t)(n * rs), cudaMemcpyDeviceToHost);
                        CHECK(e == 0, "n %lld block %d bits %d: sum: error %d", (long long)n, blk, bt, e);
                        if (e == 0 && (at = first_diff(got, ref, n, rdt)) >= 0)
                            CHECK(0, "n %lld block %d bits %d %s np %d accumulate %d kind %d: the kernel's sum differs "
                                  "from zero__qp_sum's at %lld: %.9g vs %.9g", (long long)n, blk, bt,
                                  zero_dtype_str((zero_dtype)rdt), np, acc, kind, (long long)at,
                                  (double)zero__ld(got, at, rdt), (double)zero__ld(ref, at, rdt));
                        cases++;
                        for (k = 0; k < np; k++) cudaFree(dps[k]);
                        cudaFree(dout);
                        free(x); free(o); free(xs); free(hp); free(got); free(ho); free(ref);
                    }
    {   /* what the launchers refuse (before any launch, as on a GPU) */
        void *d = NULL, *p[ZERO__K_MAXIN + 1];
        int k;
        if (CHECK(cudaMalloc(&d, 4096) == cudaSuccess, "cudaMalloc")) {
            for (k = 0; k <= ZERO__K_MAXIN; k++) p[k] = d;
            CHECK(zero__k_qp_encode((char *)d + 2, d, ZERO_F32, 10, 8, 4, st) == (int)cudaErrorInvalidValue,
                  "a misaligned payload was taken");
            CHECK(zero__k_qp_encode(d, d, ZERO_F32, 10, 5, 4, st) == (int)cudaErrorInvalidValue, "bits 5 was taken");
            CHECK(zero__k_qp_encode(d, d, ZERO_F32, 10, 8, 0, st) == (int)cudaErrorInvalidValue, "block 0 was taken");
            CHECK(zero__k_qp_encode(d, d, 7, 10, 8, 4, st) == (int)cudaErrorInvalidValue, "dtype 7 was taken");
            CHECK(zero__k_qp_sum(d, ZERO_F32, (const void *const *)p, ZERO__K_MAXIN + 1, 10, 8, 4, 0, st) ==
                  (int)cudaErrorInvalidValue, "%d payloads were taken", ZERO__K_MAXIN + 1);
            CHECK(zero__k_qp_sum(d, ZERO_F32, (const void *const *)p, 0, 10, 8, 4, 0, st) == (int)cudaErrorInvalidValue,
                  "0 payloads were taken");
            p[1] = (char *)d + 1;
            CHECK(zero__k_qp_sum(d, ZERO_F32, (const void *const *)p, 2, 10, 8, 4, 0, st) == (int)cudaErrorInvalidValue,
                  "a misaligned payload was summed");
            CHECK(zero__k_qp_encode(d, d, ZERO_F32, 0, 8, 4, st) == 0, "n 0 is no error");
            cudaFree(d);
        }
    }
    cudaStreamDestroy(st);
    CHECK(cases == 6 * 4 * 2 * 3 * 5, "%d cases ran", cases);
}

/* ---- training: the MLP of tests/test_zpp.c ------------------------------------------- */

#define NLAYERS 3
#define D_IN 24
#define D_OUT 6
#define BATCH 48
#define MAXP 4096
static const int dims[NLAYERS + 1] = { D_IN, 40, 36, D_OUT };

typedef struct run_cfg {
    int stage, world, ns, steps, qwz, qgz, hpz, block, nccl;
    zero_device_type device;
    float out[MAXP];
    int64_t numel;
    double last_loss;
    zero_result r;
    char msg[ZERO__MSG];
} run_cfg;

static void sample(int step, int i, float *x, float *y) {
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)step * 1000003u + (uint64_t)i * 7919u + 1u);
    int k, j;
    for (k = 0; k < D_IN; k++) x[k] = fx_frand(&s);
    for (j = 0; j < D_OUT; j++) {
        float a = 0;
        for (k = 0; k < D_IN; k++) a += x[k] * (float)((j + 1) * (k % 5 + 1)) * 0.05f;
        y[j] = sinf(a);
    }
}
/* bf16 values of a param as f32, and a gradient written: through zero_copy off the CPU */
static void get_f32(zero_ctx *z, const run_cfg *c, float *dst, const void *src, int64_t n) {
    uint16_t tmp[40 * 40];
    if (c->device == ZERO_DEVICE_CPU) { zero_to_f32(dst, src, ZERO_BF16, n); return; }
    zero_copy(z, tmp, src, n * 2);
    zero_to_f32(dst, tmp, ZERO_BF16, n);
}
static void add_grad(zero_ctx *z, const run_cfg *c, void *dst, const float *g, int64_t n) {
    uint16_t tmp[40 * 40];
    if (c->device == ZERO_DEVICE_CPU) { zero_add_f32(dst, ZERO_BF16, g, n); return; }
    zero_from_f32(tmp, ZERO_BF16, g, n);        /* the staging hands out zeroed buffers */
    zero_copy(z, dst, tmp, n * 2);
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    run_cfg *cfg = (run_cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[NLAYERS];
    zero_param W[NLAYERS], B[NLAYERS];
    zero_result r;
    static __thread float w[NLAYERS][40 * 40], b[NLAYERS][40], gw[NLAYERS][40 * 40], gb[NLAYERS][40];
    static __thread float act[NLAYERS + 1][BATCH][40], delta[BATCH][40], dprev[BATCH][40];
    int per = BATCH / cfg->world, l, step, i, j, k;
    uint64_t seed = 42;
    if (cfg->nccl && (r = zero_comm_set_nodes(comm, cfg->ns)) != ZERO_OK) goto done;
    fx_desc(&d, comm, cfg->stage, ZERO_BF16, ZERO_OPTIM_ADAMW, 0.01);
    d.qwz = cfg->qwz; d.qgz = cfg->qgz; d.hpz = cfg->hpz; d.quant_block = cfg->block;
    d.device = cfg->device;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (l = 0; l < NLAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        if ((r = fx_module(z, name, 0, &mod[l])) != ZERO_OK ||
            (r = fx_param(z, mod[l], "w", dims[l + 1], dims[l], 0, &W[l])) != ZERO_OK ||
            (r = fx_param(z, mod[l], "b", dims[l + 1], 0, 1, &B[l])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (l = 0; l < NLAYERS; l++) {
        float scale = 1.0f / sqrtf((float)dims[l]);
        for (i = 0; i < dims[l + 1] * dims[l]; i++) w[l][i] = fx_frand(&seed) * scale;
        for (i = 0; i < dims[l + 1]; i++) b[l][i] = fx_frand(&seed) * 0.1f;
        if ((r = zero_param_set_f32(z, W[l], w[l])) != ZERO_OK || (r = zero_param_set_f32(z, B[l], b[l])) != ZERO_OK)
            goto done;
    }
    for (step = 0; step < cfg->steps; step++) {
        double loss = 0;
        int first = rank * per;
        for (i = 0; i < per; i++) sample(step, first + i, act[0][i], delta[i]);
        for (l = 0; l < NLAYERS; l++) {
            if ((r = zero_fetch(z, mod[l])) != ZERO_OK) goto done;
            get_f32(z, cfg, w[l], zero_param_data(z, W[l]), dims[l + 1] * dims[l]);
            get_f32(z, cfg, b[l], zero_param_data(z, B[l]), dims[l + 1]);
            if ((r = zero_release(z, mod[l])) != ZERO_OK) goto done;
            for (i = 0; i < per; i++)
                for (j = 0; j < dims[l + 1]; j++) {
                    float sum = b[l][j];
                    for (k = 0; k < dims[l]; k++) sum += w[l][j * dims[l] + k] * act[l][i][k];
                    act[l + 1][i][j] = l < NLAYERS - 1 ? tanhf(sum) : sum;
                }
        }
        for (i = 0; i < per; i++)
            for (j = 0; j < D_OUT; j++) {
                float e = act[NLAYERS][i][j] - delta[i][j];
                loss += 0.5 * e * e / (double)per;
                delta[i][j] = e / (float)per;
            }
        for (l = NLAYERS - 1; l >= 0; l--) {
            if ((r = zero_fetch(z, mod[l])) != ZERO_OK) goto done;
            get_f32(z, cfg, w[l], zero_param_data(z, W[l]), dims[l + 1] * dims[l]);
            memset(gw[l], 0, sizeof gw[l]);
            memset(gb[l], 0, sizeof gb[l]);
            for (i = 0; i < per; i++)
                for (j = 0; j < dims[l + 1]; j++) {
                    gb[l][j] += delta[i][j];
                    for (k = 0; k < dims[l]; k++) gw[l][j * dims[l] + k] += delta[i][j] * act[l][i][k];
                }
            for (i = 0; i < per; i++)
                for (k = 0; k < dims[l]; k++) {
                    float sum = 0;
                    for (j = 0; j < dims[l + 1]; j++) sum += w[l][j * dims[l] + k] * delta[i][j];
                    dprev[i][k] = sum * (1.0f - act[l][i][k] * act[l][i][k]);
                }
            add_grad(z, cfg, zero_param_grad(z, W[l]), gw[l], dims[l + 1] * dims[l]);
            add_grad(z, cfg, zero_param_grad(z, B[l]), gb[l], dims[l + 1]);
            if ((r = zero_release(z, mod[l])) != ZERO_OK) goto done;
            if ((r = zero_grads_ready(z, mod[l])) != ZERO_OK) goto done;
            if (l > 0) memcpy(delta, dprev, sizeof delta);
        }
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
        if ((r = zero_allreduce_f64(z, &loss, 1)) != ZERO_OK) goto done;
        if (rank == 0) cfg->last_loss = loss / cfg->world;
    }
    {
        int64_t n = zero_num_params(z);
        float *all = n > 0 && n <= MAXP ? (float *)malloc((size_t)n * sizeof(float)) : NULL;
        r = all ? zero_gather_params_f32(z, all) : ZERO_ERR_OUT_OF_MEMORY;
        if (r == ZERO_OK && rank == 0) { memcpy(cfg->out, all, (size_t)n * sizeof(float)); cfg->numel = n; }
        free(all);
    }
done:
    if (r != ZERO_OK && rank == 0) snprintf(cfg->msg, sizeof cfg->msg, "%s", zero_last_error(z));
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}

static int train(run_cfg *c) {
    zero_result r;
    if (c->nccl) {
        r = zero_run_nccl(c->world, rank_main, c);
    } else {
        zero_group *g = NULL;
        r = zero_group_create(&g, c->world);
        if (r == ZERO_OK) r = zero_group_set_nodes(g, c->ns);
        if (r == ZERO_OK) r = zero_run_group(g, rank_main, c);
        zero_group_destroy(g);
    }
    return CHECK(r == ZERO_OK && c->numel > 0, "%s device %d stage %d qwz %d qgz %d hpz %d: %s (%s)",
                 c->nccl ? "nccl" : "local", (int)c->device, c->stage, c->qwz, c->qgz, c->hpz, zero_result_str(r),
                 c->msg[0] ? c->msg : zero_last_error(NULL));
}
static int same_params(const run_cfg *a, const run_cfg *b, const char *what) {
    int64_t i;
    if (!CHECK(a->numel == b->numel, "%s: %lld vs %lld params", what, (long long)a->numel, (long long)b->numel)) return 0;
    for (i = 0; i < a->numel; i++)
        if (memcmp(&a->out[i], &b->out[i], 4) != 0)
            return CHECK(0, "%s: param %lld is %.9g, not %.9g", what, (long long)i, (double)b->out[i], (double)a->out[i]);
    return 1;
}

static run_cfg *cfg_new(int stage, int qwz, int qgz, int hpz) {
    run_cfg *c = (run_cfg *)calloc(1, sizeof *c);
    c->stage = stage; c->world = 4; c->ns = 2; c->steps = 6; c->block = 16;
    c->qwz = qwz; c->qgz = qgz; c->hpz = hpz;
    return c;
}

/* CPU local, CUDA local, CUDA over NCCL: each equal to the one before, bit for bit */
static void train_three(int stage, int qwz, int qgz, int hpz, const char *name) {
    run_cfg *cpu = cfg_new(stage, qwz, qgz, hpz), *cu = cfg_new(stage, qwz, qgz, hpz), *nc = cfg_new(stage, qwz, qgz, hpz);
    cpu->device = ZERO_DEVICE_CPU;
    cu->device = nc->device = ZERO_DEVICE_CUDA;
    nc->nccl = 1;
    test_begin("train_cuda_%s", name);
    if (train(cpu) && train(cu)) {
        same_params(cpu, cu, "the CUDA device against the CPU device");
        CHECK(isfinite(cu->last_loss) && cu->last_loss > 0, "loss %g", cu->last_loss);
    }
    test_end();
    test_begin("train_nccl_%s", name);
    if (cu->numel && train(nc)) same_params(cu, nc, "NCCL against the local comm");
    test_end();
    free(cpu); free(cu); free(nc);
}

/* ---- the NCCL comm's all_to_all and split ------------------------------------------- */

#define A2A 37                  /* bytes per chunk: odd */
#define TO 20000
#define ERRN (2 * ZERO__MSG)    /* a message with a comm's err in it */
typedef struct nccl_job {
    int bad[8];
    char err[8][ERRN];
    zero_result r[8];
    zero_result after[8];
    double ms[8];
    volatile int done;
    int ndone;                  /* ranks through their split */
} nccl_job;

static unsigned char pat(int from, int to, int i) { return (unsigned char)(from * 64 + to * 16 + i * 7 + 1); }

/* all_to_all on c (device memory when dev) checked against the pattern; ranks of `world`
   (the parent's) numbered by map */
static int a2a_check(zero_comm *c, int dev, const char *what, char *err) {
    int n = c->size, me = c->rank, k, i;
    unsigned char *hs = (unsigned char *)malloc((size_t)(A2A * n)), *hr = (unsigned char *)malloc((size_t)(A2A * n));
    void *ds = NULL, *dr = NULL;
    zero_result r;
    int ok = 1;
    for (k = 0; k < n; k++)
        for (i = 0; i < A2A; i++) hs[k * A2A + i] = pat(me, k, i);
    memset(hr, 0, (size_t)(A2A * n));
    if (dev) {
        ds = dev_copy(hs, (size_t)(A2A * n));
        dr = dev_copy(hr, (size_t)(A2A * n));
        cudaDeviceSynchronize();    /* the copies have landed before the comm's own stream reads */
    }
    c->tag = -1;
    r = c->vt->all_to_all(c, dev ? ds : hs, dev ? dr : hr, A2A, TO);
    if (r == ZERO_OK && dev) cudaMemcpy(hr, dr, (size_t)(A2A * n), cudaMemcpyDeviceToHost);
    if (r != ZERO_OK) { snprintf(err, ERRN, "%s: all_to_all: %s: %s", what, zero_result_str(r), c->err); ok = 0; }
    for (k = 0; ok && k < n; k++)
        for (i = 0; i < A2A; i++)
            if (hr[k * A2A + i] != pat(k, me, i)) {
                snprintf(err, ERRN, "%s: rank %d's chunk from %d, byte %d: %d, not %d", what, me, k, i, hr[k * A2A + i],
                         pat(k, me, i));
                ok = 0;
                break;
            }
    cudaFree(ds); cudaFree(dr);
    free(hs); free(hr);
    return ok;
}

static zero_result split_fn(zero_comm *c, int rank, void *user) {
    nccl_job *j = (nccl_job *)user;
    zero_comm *in = NULL, *out = NULL, *x = NULL, *y = NULL;
    zero_result r;
    char *err = j->err[rank];
    float v = (float)rank, got[4];
    int ok = a2a_check(c, 1, "device", err) && a2a_check(c, 0, "host", err);
    if (ok && (r = c->vt->split(c, 2, &in, &out)) != ZERO_OK) {
        snprintf(err, ERRN, "split: %s: %s", zero_result_str(r), c->err);
        ok = 0;
    }
    if (ok && !(in->rank == rank % 2 && in->size == 2 && in->scope == ZERO__SCOPE_NODE && out->rank == rank / 2 &&
                out->size == 2 && out->scope == ZERO__SCOPE_CROSS)) {
        snprintf(err, ERRN, "split: node endpoint rank %d of %d (scope %d), cross-node rank %d of %d (scope %d)",
                 in->rank, in->size, in->scope, out->rank, out->size, out->scope);
        ok = 0;
    }
    if (ok) {   /* the node's ranks are this node's, in rank order; the cross-node ones in node order */
        float *d = (float *)dev_copy(&v, 4), *dall = (float *)dev_copy(got, 8);
        cudaDeviceSynchronize();
        in->tag = out->tag = -1;
        r = in->vt->all_gather(in, d, dall, 4, TO);
        if (r == ZERO_OK) cudaMemcpy(got, dall, 8, cudaMemcpyDeviceToHost);
        if (r != ZERO_OK || got[0] != (float)(rank / 2 * 2) || got[1] != (float)(rank / 2 * 2 + 1)) {
            snprintf(err, ERRN, "node all_gather: %s: %g %g", zero_result_str(r), (double)got[0], (double)got[1]);
            ok = 0;
        }
        r = ok ? out->vt->all_gather(out, d, dall, 4, TO) : r;
        if (ok && r == ZERO_OK) cudaMemcpy(got, dall, 8, cudaMemcpyDeviceToHost);
        if (ok && (r != ZERO_OK || got[0] != (float)(rank % 2) || got[1] != (float)(rank % 2 + 2))) {
            snprintf(err, ERRN, "cross all_gather: %s: %g %g", zero_result_str(r), (double)got[0], (double)got[1]);
            ok = 0;
        }
        cudaFree(d); cudaFree(dall);
    }
    ok = ok && a2a_check(out, 1, "cross-node", err) && a2a_check(in, 0, "node (host)", err);
    if (ok && (r = in->vt->split(in, 1, &x, &y)) != ZERO_ERR_UNSUPPORTED) {
        snprintf(err, ERRN, "a split endpoint split again: %s", zero_result_str(r));
        ok = 0;
    }
    zero_comm_destroy(x); zero_comm_destroy(y);
    zero_comm_destroy(in); zero_comm_destroy(out);
    in = out = NULL;
    /* the parent still works, and splits again (nodes of 1: the cross-node endpoint is the world) */
    ok = ok && a2a_check(c, 1, "the parent after its split endpoints were destroyed", err);
    if (ok && (r = c->vt->split(c, 1, &in, &out)) != ZERO_OK) {
        snprintf(err, ERRN, "split(1): %s: %s", zero_result_str(r), c->err);
        ok = 0;
    }
    ok = ok && in->size == 1 && out->size == 4 && out->rank == rank && a2a_check(out, 1, "nodes of 1, cross", err);
    zero_comm_destroy(in); zero_comm_destroy(out);
    j->bad[rank] = !ok;
    return ZERO_OK;
}
static void nccl_all_to_all_split(void) {
    static nccl_job j;
    int k;
    memset(&j, 0, sizeof j);
    zero_result r = zero_run_nccl(4, split_fn, &j);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s: %s", zero_result_str(r), zero_last_error(NULL));
    for (k = 0; k < 4; k++) CHECK(!j.bad[k], "rank %d: %s", k, j.err[k]);
}

/* the double's ncclCommSplit refuses what NCCL refuses (before the round: the peers are not
   left waiting) */
static zero_result refuse_fn(zero_comm *c, int rank, void *user) {
    nccl_job *j = (nccl_job *)user;
    ncclComm_t nc = ((zero__nccl_comm *)c)->comm, out = (ncclComm_t)&out;
    ncclResult_t a = ncclCommSplit(nc, 0, 0, NULL, NULL), b = ncclCommSplit(nc, -5, 0, &out, NULL);
    ncclResult_t d = ncclCommSplit(NULL, 0, 0, &out, NULL);
    j->bad[rank] = !(a == ncclInvalidArgument && b == ncclInvalidArgument && d == ncclInvalidArgument && out == NULL);
    snprintf(j->err[rank], ERRN, "NULL newcomm %d, color -5 %d, NULL comm %d, newcomm %p", (int)a, (int)b, (int)d,
             (void *)out);
    /* and the communicator still splits and works (the refused calls joined no round) */
    {
        zero_comm *in = NULL, *x = NULL;
        zero_result r = c->vt->split(c, 2, &in, &x);
        if (r != ZERO_OK || !a2a_check(x, 1, "after the refused splits", j->err[rank])) j->bad[rank] = 1;
        zero_comm_destroy(in); zero_comm_destroy(x);
    }
    return ZERO_OK;
}
static void nccl_double_split_refuses(void) {
    static nccl_job j;
    int k;
    memset(&j, 0, sizeof j);
    zero_result r = zero_run_nccl(4, refuse_fn, &j);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s", zero_result_str(r));
    for (k = 0; k < 4; k++) CHECK(!j.bad[k], "rank %d: %s", k, j.err[k]);
}

/* mismatches: rank 1 passes other bytes to all_to_all; rank 2 another ranks_per_node to split */
static zero_result mismatch_fn(zero_comm *c, int rank, void *user) {
    nccl_job *j = (nccl_job *)user;
    void *d = NULL;
    zero_comm *in = NULL, *out = NULL;
    cudaMalloc(&d, 4096);
    c->tag = 5;
    if (j->done == 0) j->r[rank] = c->vt->all_to_all(c, d, (char *)d + 2048, rank == 1 ? 8 : 16, TO);
    else j->r[rank] = c->vt->split(c, rank == 2 ? 1 : 2, &in, &out);
    snprintf(j->err[rank], ERRN, "%s", c->err);
    j->after[rank] = c->vt->barrier(c, TO);
    zero_comm_destroy(in); zero_comm_destroy(out);
    cudaFree(d);
    return ZERO_OK;
}
static void nccl_fail_mismatch(void) {
    static nccl_job j;
    int k, what;
    for (what = 0; what < 2; what++) {
        memset(&j, 0, sizeof j);
        j.done = what;
        zero_result r = zero_run_nccl(4, mismatch_fn, &j);
        CHECK(r == ZERO_OK, "zero_run_nccl: %s", zero_result_str(r));
        for (k = 0; k < 4; k++) {
            CHECK(j.r[k] == ZERO_ERR_MISMATCH && strstr(j.err[k], what ? "rank 2 called split(ranks_per_node=1"
                                                                       : "rank 1 called all_to_all(count=8"),
                  "%s, rank %d: %s '%s'", what ? "split" : "all_to_all", k, zero_result_str(j.r[k]), j.err[k]);
            CHECK(j.after[k] == ZERO_ERR_COMM, "rank %d: a call after the mismatch gave %s", k, zero_result_str(j.after[k]));
        }
    }
}

/* ncclCommSplit fails on one rank (ZERO_NCCL_MOCK_FAIL): that rank says why, the others time
   out in their split within the timeout; nothing hangs. Through contexts, whose timeout the
   split takes (desc.timeout_ms). */
static zero_result splitfail_fn(zero_comm *c, int rank, void *user) {
    nccl_job *j = (nccl_job *)user;
    zero_ctx *z = NULL;
    zero_desc d;
    zero_comm *in = NULL, *out = NULL;
    double t0;
    fx_desc(&d, c, 0, ZERO_F32, ZERO_OPTIM_SGD, 0.1);
    d.device = ZERO_DEVICE_CUDA;
    d.timeout_ms = 1500;
    if ((j->r[rank] = zero_create(&z, &d)) != ZERO_OK) {
        snprintf(j->err[rank], ERRN, "zero_create: %s", zero_last_error(NULL));
        return ZERO_OK;
    }
    t0 = test_now_ms();
    if (j->done == 0 || rank != 3) {            /* done 1: rank 3 never comes */
        j->r[rank] = c->vt->split(c, 2, &in, &out);
        j->ms[rank] = test_now_ms() - t0;
        snprintf(j->err[rank], ERRN, "%s", c->err);
        j->after[rank] = c->vt->barrier(c, TO);
        __atomic_add_fetch(&j->ndone, 1, __ATOMIC_ACQ_REL);
    } else {                                    /* gone only once the others gave up */
        while (__atomic_load_n(&j->ndone, __ATOMIC_ACQUIRE) < 3) zero__sleep_ms(10);
    }
    zero_comm_destroy(in); zero_comm_destroy(out);
    zero_destroy(z);
    return ZERO_OK;
}
static void nccl_fail_split(int late) {
    static nccl_job j;
    int k, failed = -1, n = late ? 3 : 4;
    double t0 = test_now_ms();
    memset(&j, 0, sizeof j);
    j.done = late;
    if (!late) setenv("ZERO_NCCL_MOCK_FAIL", "ncclCommSplit:2", 1);
    zero_result r = zero_run_nccl(4, splitfail_fn, &j);
    unsetenv("ZERO_NCCL_MOCK_FAIL");
    CHECK(r == ZERO_OK, "zero_run_nccl: %s", zero_result_str(r));
    for (k = 0; k < n; k++) {
        if (!late && j.r[k] == ZERO_ERR_COMM) {
            CHECK(failed < 0 && strstr(j.err[k], "ncclCommSplit (the node's endpoint) failed") &&
                  strstr(j.err[k], "injected"), "rank %d: '%s' (rank %d failed too)", k, j.err[k], failed);
            failed = k;
            continue;
        }
        CHECK(j.r[k] == ZERO_ERR_TIMEOUT && strstr(j.err[k], "split") && strstr(j.err[k], "1500 ms"), "rank %d: %s '%s'",
              k, zero_result_str(j.r[k]), j.err[k]);
        CHECK(j.ms[k] >= 1400 && j.ms[k] < 6000, "rank %d returned after %.0f ms for a 1500 ms timeout", k, j.ms[k]);
        CHECK(j.after[k] == ZERO_ERR_COMM, "rank %d: a call after the failed split gave %s", k, zero_result_str(j.after[k]));
    }
    if (!late) CHECK(failed >= 0, "no rank saw the injected ncclCommSplit failure");
    CHECK(test_now_ms() - t0 < 60000, "the whole run took %.0f ms", test_now_ms() - t0);
}

/* the last rank never comes to an all_to_all */
static zero_result a2a_late_fn(zero_comm *c, int rank, void *user) {
    nccl_job *j = (nccl_job *)user;
    void *d = NULL;
    double t0;
    if (rank == c->size - 1) {
        while (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE)) zero__sleep_ms(10);
        return ZERO_OK;
    }
    cudaMalloc(&d, 4096);
    c->tag = -1;
    t0 = test_now_ms();
    j->r[rank] = c->vt->all_to_all(c, d, (char *)d + 2048, 64, 1500);
    j->ms[rank] = test_now_ms() - t0;
    snprintf(j->err[rank], ERRN, "%s", c->err);
    __atomic_store_n(&j->bad[rank], 1, __ATOMIC_RELEASE);
    if (rank == 0) {
        int k;
        for (k = 1; k < c->size - 1; k++) while (!__atomic_load_n(&j->bad[k], __ATOMIC_ACQUIRE)) zero__sleep_ms(10);
        __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    }
    cudaFree(d);
    return ZERO_OK;
}
static void nccl_fail_all_to_all_late(void) {
    static nccl_job j;
    int k;
    memset(&j, 0, sizeof j);
    zero_result r = zero_run_nccl(4, a2a_late_fn, &j);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s", zero_result_str(r));
    for (k = 0; k < 3; k++) {
        CHECK(j.r[k] == ZERO_ERR_TIMEOUT && strstr(j.err[k], "all_to_all") && strstr(j.err[k], "1500 ms"),
              "rank %d: %s '%s'", k, zero_result_str(j.r[k]), j.err[k]);
        CHECK(j.ms[k] >= 1400 && j.ms[k] < 6000, "rank %d returned after %.0f ms for a 1500 ms timeout", k, j.ms[k]);
    }
}

int main(void) {
    int n = 0;
    test_init();
    setenv("ZERO_CUDA_MOCK_DEVICES", "4", 0);   /* zero_run_nccl(4, ...) */
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 4) {
        printf("FAIL zpp_devices: the CUDA double has %d devices; NCCL at world 4 needs ZERO_CUDA_MOCK_DEVICES >= 4\n", n);
        return 1;
    }
    TEST_RUN(kernels);
    train_three(3, 1, 8, 2, "stage3_qwz_qgz_hpz");
    train_three(2, 0, 4, 0, "stage2_qgz_int4");
    TEST_RUN(nccl_all_to_all_split);
    TEST_RUN(nccl_double_split_refuses);
    TEST_RUN(nccl_fail_mismatch);
    test_begin("nccl_fail_split_injected");
    nccl_fail_split(0);
    test_end();
    test_begin("nccl_fail_split_late");
    if (async_mode()) nccl_fail_split(1);
    else test_skip("a rank that never comes blocks the synchronous double's collective (ZERO_CUDA_MOCK_ASYNC=1 runs it)");
    test_end();
    test_begin("nccl_fail_all_to_all_late");
    if (async_mode()) nccl_fail_all_to_all_late();
    else test_skip("a rank that never comes blocks the synchronous double's collective (ZERO_CUDA_MOCK_ASYNC=1 runs it)");
    test_end();
    return test_summary();
}
