/* tests/test_device.c - the device layer: the engine reaches device memory only through
   the device's operations, and a device gives the CPU device's results.

   ZERO_DEVICE_EMU keeps the arenas in memory the host cannot touch (mapped PROT_NONE;
   the ops use a second mapping), so any place where zero.h dereferences device memory
   itself would crash here, as it would on a GPU. These tests train the same small model
   (two dense layers of odd sizes + a tiled linear) on the CPU device and on EMU at every
   stage, world size and dtype and require bitwise-equal parameters. The trainer keeps
   its activations on the host and moves params and gradients with zero_copy, as a CUDA
   program moves them with its own kernels.

   Built with ZERO_CUDA (make CUDA=1 -> build/cuda/test_device), the same comparisons
   run against ZERO_DEVICE_CUDA when a GPU is present (make test-gpu); without a GPU,
   the CUDA device must refuse with ZERO_ERR_NO_DEVICE and a clear message. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <math.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#define D0 7
#define D1 13
#define D2 11                       /* the tiled linear: D1 -> D2 in 3 tiles */
#define D3 5
#define BATCH 12
#define STEPS 8
#define MAXP 1024

typedef struct cfg {
    zero_device_type device;
    int stage, world, accum;
    zero_dtype dtype;
    zero_optim_type optim;
    int tiled;                      /* 1: the middle layer is a tiled linear */
    int flat;                       /* desc.flat_layout */
    zero_state_dtype sdt;           /* desc.optim.state_dtype (ON OPTIMIZER STATES) */
    zero_offload_tier offload;      /* offload_optimizer */
    int plan_mismatch;              /* zero_stats_get's bytes differ from zero_plan_get's */
    int steps, step0;               /* steps to train (0: STEPS), the data position of the first */
    const char *load_dir, *save_dir;/* zero_load before training, zero_save after */
    int64_t host_bytes;             /* the plan's host tier */
    float out[MAXP];
    int64_t numel;
    double loss, first_loss;
    zero_result fail_r;
    char fail_msg[512];
} cfg;

/* reads a param (device memory) as fp32 on the host */
static zero_result get_param(zero_ctx *z, zero_param p, zero_dtype dt, float *out, int64_t n) {
    unsigned char raw[MAXP * 4];
    zero_result r = zero_copy(z, raw, zero_param_data(z, p), n * (int64_t)zero_dtype_size(dt));
    if (r == ZERO_OK) zero_to_f32(out, raw, dt, n);
    return r;
}
/* adds host fp32 gradients into a param's gradient buffer (device memory) */
static zero_result add_grad(zero_ctx *z, zero_param p, zero_dtype dt, const float *g, int64_t n) {
    unsigned char raw[MAXP * 4];
    void *dev = zero_param_grad(z, p);
    int64_t bytes = n * (int64_t)zero_dtype_size(dt);
    zero_result r;
    if (!dev) return ZERO_ERR_STATE;
    if ((r = zero_copy(z, raw, dev, bytes)) != ZERO_OK) return r;
    zero_add_f32(raw, dt, g, n);
    return zero_copy(z, dev, raw, bytes);
}

static void dense_fwd(const float *w, const float *b, const float *x, float *y, int rows, int in, int out) {
    int i, j, k;
    for (i = 0; i < rows; i++)
        for (j = 0; j < out; j++) {
            float s = b[j];
            for (k = 0; k < in; k++) s += w[j * in + k] * x[i * in + k];
            y[i * out + j] = s;
        }
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m0, m2;
    zero_param w0, b0, w2, b2, wm = { 0 }, bm = { 0 };
    zero_module mm = { 0 };
    zero_tiled_linear tl = { 0 };
    zero_result r;
    uint64_t seed = 7;
    int per = BATCH / (c->world * c->accum), step, a, i, j, k;
    static const int dims[4] = { D0, D1, D2, D3 };
    float W0[D1 * D0], B0[D1], WM[D2 * D1], BM[D2], W2[D3 * D2], B2[D3];
    float *dv_h1 = NULL, *dv_h2 = NULL, *dv_dh2 = NULL, *dv_dh1 = NULL;   /* the tiled layer's tensors, on the device */

    fx_desc(&d, comm, c->stage, c->dtype, c->optim, 0.02);
    d.device = c->device;
    d.accum_steps = c->accum;
    d.clip_norm = 1.0f;
    d.bucket_bytes = 256;           /* several buckets */
    d.offload_optimizer = c->offload;
    d.flat_layout = c->flat;
    d.optim.state_dtype = c->sdt;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    if ((r = fx_module(z, "l0", 0, &m0)) != ZERO_OK || (r = fx_param(z, m0, "w", D1, D0, 0, &w0)) != ZERO_OK ||
        (r = fx_param(z, m0, "b", D1, 0, 1, &b0)) != ZERO_OK)
        goto done;
    if (c->tiled) {
        zero_tiled_linear_desc td;
        memset(&td, 0, sizeof td);
        td.name = "mid"; td.in_features = D1; td.out_features = D2; td.bias = 1; td.tiles = 3;
        if ((r = zero_tiled_linear_add(z, &td, &tl)) != ZERO_OK) goto done;
    } else if ((r = fx_module(z, "mid", 0, &mm)) != ZERO_OK || (r = fx_param(z, mm, "w", D2, D1, 0, &wm)) != ZERO_OK ||
               (r = fx_param(z, mm, "b", D2, 0, 1, &bm)) != ZERO_OK)
        goto done;
    if ((r = fx_module(z, "l2", 0, &m2)) != ZERO_OK || (r = fx_param(z, m2, "w", D3, D2, 0, &w2)) != ZERO_OK ||
        (r = fx_param(z, m2, "b", D3, 0, 1, &b2)) != ZERO_OK)
        goto done;
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    {
        zero_plan pl;
        zero_stats st;
        int t, k2;
        if ((r = zero_plan_get(z, &pl)) != ZERO_OK || (r = zero_stats_get(z, &st)) != ZERO_OK) goto done;
        if (memcmp(pl.bytes, st.bytes, sizeof pl.bytes) != 0) c->plan_mismatch = 1;
        if (rank == 0)
            for (t = 0, c->host_bytes = 0; t < 1; t++)
                for (k2 = 0; k2 < ZERO_CAT_NUM; k2++) c->host_bytes += pl.bytes[ZERO_TIER_HOST][k2];
    }
    for (i = 0; i < D1 * D0; i++) W0[i] = fx_frand(&seed) * 0.4f;
    for (i = 0; i < D1; i++) B0[i] = fx_frand(&seed) * 0.1f;
    for (i = 0; i < D2 * D1; i++) WM[i] = fx_frand(&seed) * 0.3f;
    for (i = 0; i < D2; i++) BM[i] = fx_frand(&seed) * 0.1f;
    for (i = 0; i < D3 * D2; i++) W2[i] = fx_frand(&seed) * 0.3f;
    for (i = 0; i < D3; i++) B2[i] = fx_frand(&seed) * 0.1f;
    if ((r = zero_param_set_f32(z, w0, W0)) != ZERO_OK || (r = zero_param_set_f32(z, b0, B0)) != ZERO_OK ||
        (r = zero_param_set_f32(z, w2, W2)) != ZERO_OK || (r = zero_param_set_f32(z, b2, B2)) != ZERO_OK)
        goto done;
    if (c->tiled) r = zero_tiled_linear_set_f32(z, tl, WM, BM);
    else if ((r = zero_param_set_f32(z, wm, WM)) == ZERO_OK) r = zero_param_set_f32(z, bm, BM);
    if (r != ZERO_OK) goto done;
    if (c->load_dir && (r = zero_load(z, c->load_dir)) != ZERO_OK) goto done;
    if (c->tiled && (!(dv_h1 = (float *)zero_device_alloc(z, BATCH * D1 * 4)) ||
                     !(dv_h2 = (float *)zero_device_alloc(z, BATCH * D2 * 4)) ||
                     !(dv_dh2 = (float *)zero_device_alloc(z, BATCH * D2 * 4)) ||
                     !(dv_dh1 = (float *)zero_device_alloc(z, BATCH * D1 * 4)))) {
        r = ZERO_ERR_OUT_OF_MEMORY;
        goto done;
    }

    for (step = c->step0; step < c->step0 + (c->steps ? c->steps : STEPS); step++) {
        double loss = 0;
        for (a = 0; a < c->accum; a++) {
            float x[BATCH * D0], h1[BATCH * D1], h2[BATCH * D2], y[BATCH * D3], t[BATCH * D3];
            float dy[BATCH * D3], dh2[BATCH * D2], dh1[BATCH * D1], gw[D2 * D1], gb[D2];
            int first = (a * c->world + rank) * per;
            float ls = zero_loss_scale(z);
            for (i = 0; i < per; i++) {
                uint64_t s = 1000003u * (uint64_t)(step + 1) + (uint64_t)(first + i) * 7919u;
                for (k = 0; k < D0; k++) x[i * D0 + k] = fx_frand(&s);
                for (j = 0; j < D3; j++) t[i * D3 + j] = sinf(x[i * D0 + j] + x[i * D0 + j + 1]);
            }
            /* forward */
            if ((r = zero_fetch(z, m0)) != ZERO_OK || (r = get_param(z, w0, c->dtype, W0, D1 * D0)) != ZERO_OK ||
                (r = get_param(z, b0, c->dtype, B0, D1)) != ZERO_OK || (r = zero_release(z, m0)) != ZERO_OK)
                goto done;
            dense_fwd(W0, B0, x, h1, per, D0, D1);
            for (i = 0; i < per * D1; i++) h1[i] = tanhf(h1[i]);
            if (c->tiled) {
                if ((r = zero_copy(z, dv_h1, h1, (int64_t)per * D1 * 4)) != ZERO_OK ||
                    (r = zero_tiled_linear_forward(z, tl, dv_h1, per, dv_h2)) != ZERO_OK ||
                    (r = zero_copy(z, h2, dv_h2, (int64_t)per * D2 * 4)) != ZERO_OK)
                    goto done;
            } else {
                if ((r = zero_fetch(z, mm)) != ZERO_OK || (r = get_param(z, wm, c->dtype, WM, D2 * D1)) != ZERO_OK ||
                    (r = get_param(z, bm, c->dtype, BM, D2)) != ZERO_OK || (r = zero_release(z, mm)) != ZERO_OK)
                    goto done;
                dense_fwd(WM, BM, h1, h2, per, D1, D2);
            }
            for (i = 0; i < per * D2; i++) h2[i] = tanhf(h2[i]);
            if ((r = zero_fetch(z, m2)) != ZERO_OK || (r = get_param(z, w2, c->dtype, W2, D3 * D2)) != ZERO_OK ||
                (r = get_param(z, b2, c->dtype, B2, D3)) != ZERO_OK || (r = zero_release(z, m2)) != ZERO_OK)
                goto done;
            dense_fwd(W2, B2, h2, y, per, D2, D3);
            for (i = 0; i < per * D3; i++) {
                float e = y[i] - t[i];
                loss += 0.5 * e * e / per;
                dy[i] = e / (float)per * ls;
            }
            /* backward: l2, mid, l0 */
            {
                float g2w[D3 * D2], g2b[D3];
                memset(g2w, 0, sizeof g2w); memset(g2b, 0, sizeof g2b);
                for (i = 0; i < per; i++)
                    for (j = 0; j < D3; j++) {
                        g2b[j] += dy[i * D3 + j];
                        for (k = 0; k < D2; k++) g2w[j * D2 + k] += dy[i * D3 + j] * h2[i * D2 + k];
                    }
                for (i = 0; i < per; i++)
                    for (k = 0; k < D2; k++) {
                        float s = 0;
                        for (j = 0; j < D3; j++) s += W2[j * D2 + k] * dy[i * D3 + j];
                        dh2[i * D2 + k] = s * (1.0f - h2[i * D2 + k] * h2[i * D2 + k]);
                    }
                if ((r = zero_fetch(z, m2)) != ZERO_OK || (r = add_grad(z, w2, c->dtype, g2w, D3 * D2)) != ZERO_OK ||
                    (r = add_grad(z, b2, c->dtype, g2b, D3)) != ZERO_OK || (r = zero_release(z, m2)) != ZERO_OK ||
                    (r = zero_grads_ready(z, m2)) != ZERO_OK)
                    goto done;
            }
            if (c->tiled) {
                if ((r = zero_copy(z, dv_dh2, dh2, (int64_t)per * D2 * 4)) != ZERO_OK ||
                    (r = zero_tiled_linear_backward(z, tl, dv_h1, dv_dh2, per, dv_dh1)) != ZERO_OK ||
                    (r = zero_copy(z, dh1, dv_dh1, (int64_t)per * D1 * 4)) != ZERO_OK)
                    goto done;
                /* dh1 is d(loss)/d(h1); the tiled layer did not see WM on the host */
            } else {
                memset(gw, 0, sizeof gw); memset(gb, 0, sizeof gb);
                for (i = 0; i < per; i++)
                    for (j = 0; j < D2; j++) {
                        gb[j] += dh2[i * D2 + j];
                        for (k = 0; k < D1; k++) gw[j * D1 + k] += dh2[i * D2 + j] * h1[i * D1 + k];
                    }
                for (i = 0; i < per; i++)
                    for (k = 0; k < D1; k++) {
                        float s = 0;
                        for (j = 0; j < D2; j++) s += WM[j * D1 + k] * dh2[i * D2 + j];
                        dh1[i * D1 + k] = s;
                    }
                if ((r = zero_fetch(z, mm)) != ZERO_OK || (r = add_grad(z, wm, c->dtype, gw, D2 * D1)) != ZERO_OK ||
                    (r = add_grad(z, bm, c->dtype, gb, D2)) != ZERO_OK || (r = zero_release(z, mm)) != ZERO_OK ||
                    (r = zero_grads_ready(z, mm)) != ZERO_OK)
                    goto done;
            }
            {
                float g0w[D1 * D0], g0b[D1];
                memset(g0w, 0, sizeof g0w); memset(g0b, 0, sizeof g0b);
                for (i = 0; i < per; i++)
                    for (j = 0; j < D1; j++) {
                        float dj = dh1[i * D1 + j] * (1.0f - h1[i * D1 + j] * h1[i * D1 + j]);
                        g0b[j] += dj;
                        for (k = 0; k < D0; k++) g0w[j * D0 + k] += dj * x[i * D0 + k];
                    }
                if ((r = zero_fetch(z, m0)) != ZERO_OK || (r = add_grad(z, w0, c->dtype, g0w, D1 * D0)) != ZERO_OK ||
                    (r = add_grad(z, b0, c->dtype, g0b, D1)) != ZERO_OK || (r = zero_release(z, m0)) != ZERO_OK ||
                    (r = zero_grads_ready(z, m0)) != ZERO_OK)
                    goto done;
            }
        }
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
        if ((r = zero_allreduce_f64(z, &loss, 1)) != ZERO_OK) goto done;
        if (rank == 0) c->loss = loss / (c->world * c->accum);
        if (rank == 0 && step == 0) c->first_loss = c->loss;
    }
    if (c->save_dir && (r = zero_save(z, c->save_dir)) != ZERO_OK) goto done;
    {
        int64_t n = zero_num_params(z);
        float all[MAXP];
        r = n <= MAXP ? zero_gather_params_f32(z, all) : ZERO_ERR_INVALID_SIZE;
        if (r == ZERO_OK && rank == 0) { memcpy(c->out, all, (size_t)n * sizeof(float)); c->numel = n; }
    }
done:
    if (r != ZERO_OK && rank == 0) {
        c->fail_r = r;
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", zero_last_error(z));
    }
    zero_device_free(z, dv_h1); zero_device_free(z, dv_h2); zero_device_free(z, dv_dh2); zero_device_free(z, dv_dh1);
    zero_destroy(z);
    (void)dims;
    return r;
}

static int train(cfg *c) {
    zero_result r;
    c->fail_r = ZERO_OK;
    c->fail_msg[0] = 0;
    r = zero_run_local(c->world, rank_main, c);
    return CHECK(r == ZERO_OK, "device %d stage %d world %d: %s (%s)", (int)c->device, c->stage, c->world,
                 zero_result_str(r), c->fail_msg[0] ? c->fail_msg : zero_last_error(NULL));
}

/* device (optimizer states on the tier `off`; flat: desc.flat_layout, stages 0-2) vs the
   CPU device's module-major layout, bitwise, for every stage at one world size and dtype */
static zero_state_dtype vs_sdt;     /* the moments' format of the vs_cpu runs (default f32) */
static void vs_cpu_any(zero_device_type dev, zero_dtype dt, int world, int accum, zero_optim_type opt, int tiled,
                       zero_offload_tier off, int flat) {
    static cfg ref, got;
    int s;
    for (s = 0; s <= (flat ? 2 : 3); s++) {
        memset(&ref, 0, sizeof ref);
        ref.device = ZERO_DEVICE_CPU; ref.stage = s; ref.world = world; ref.accum = accum; ref.dtype = dt;
        ref.optim = opt; ref.tiled = tiled; ref.sdt = vs_sdt;
        got = ref;
        got.device = dev;
        got.offload = off;
        got.flat = flat;
        if (!train(&ref) || !train(&got)) return;
        CHECK(!ref.plan_mismatch && !got.plan_mismatch, "stage %d: zero_stats_get differs from the plan", s);
        CHECK(off == ZERO_OFFLOAD_NONE || got.host_bytes > 0, "stage %d: nothing planned on the host tier", s);
        CHECK(ref.numel > 0 && ref.numel == got.numel, "numel %lld vs %lld", (long long)ref.numel, (long long)got.numel);
        CHECK(ref.loss < 0.9 * ref.first_loss, "stage %d: the model did not learn (loss %g -> %g)", s, ref.first_loss,
              ref.loss);
        CHECK(memcmp(ref.out, got.out, sizeof(float) * (size_t)ref.numel) == 0,
              "%s world %d stage %d accum %d tiled %d flat %d: device %d differs from the CPU device", zero_dtype_str(dt),
              world, s, accum, tiled, flat, (int)dev);
        CHECK(ref.loss == got.loss, "stage %d: loss %.9g vs %.9g", s, ref.loss, got.loss);
    }
}

static void vs_cpu_off(zero_device_type dev, zero_dtype dt, int world, int accum, zero_optim_type opt, int tiled,
                       zero_offload_tier off) {
    vs_cpu_any(dev, dt, world, accum, opt, tiled, off, 0);
}
static void vs_cpu(zero_device_type dev, zero_dtype dt, int world, int accum, zero_optim_type opt, int tiled) {
    vs_cpu_any(dev, dt, world, accum, opt, tiled, ZERO_OFFLOAD_NONE, 0);
}
/* desc.flat_layout on a device: the views' copies in device memory, on the compute stream */
static void vs_cpu_flat(zero_device_type dev, zero_dtype dt, int world, int accum, int tiled, zero_offload_tier off) {
    vs_cpu_any(dev, dt, world, accum, ZERO_OPTIM_ADAMW, tiled, off, 1);
}
/* bf16 moments on the EMU device (the CPU's pass over its arenas' aliases) and in its host
   tier (ZeRO-Offload's path): bitwise the CPU device's run with bf16 moments */
/* Muon on the EMU device: its ops only (no host access to device memory), the CPU's bits */
static void emu_muon(void) {
    fx_muon = 1;
    vs_cpu(ZERO_DEVICE_EMU, ZERO_BF16, 2, 1, ZERO_OPTIM_MUON, 0);
    vs_cpu(ZERO_DEVICE_EMU, ZERO_F32, 3, 2, ZERO_OPTIM_MUON, 0);
    fx_muon = 0;
}
static void emu_bf16_states(void) {
    vs_sdt = ZERO_STATE_BF16;
    vs_cpu(ZERO_DEVICE_EMU, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_F32, 3, 1, ZERO_OPTIM_SGD, 0, ZERO_OFFLOAD_HOST);
    vs_sdt = ZERO_STATE_F32;
}
/* q8 moments the same way: the EMU device's pass, and its host tier's sub-groups cut at
   q8 blocks (zero__host_cut) */
static void emu_q8_states(void) {
    vs_sdt = ZERO_STATE_Q8;
    vs_cpu(ZERO_DEVICE_EMU, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_F32, 3, 1, ZERO_OPTIM_SGD, 0, ZERO_OFFLOAD_HOST);
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_BF16, 2, 2, ZERO_OPTIM_ADAMW, 1, ZERO_OFFLOAD_HOST);
    vs_sdt = ZERO_STATE_F32;
}
static void emu_flat_layout(void) {
    vs_cpu_flat(ZERO_DEVICE_EMU, ZERO_BF16, 2, 2, 1, ZERO_OFFLOAD_NONE);
    vs_cpu_flat(ZERO_DEVICE_EMU, ZERO_F32, 3, 1, 0, ZERO_OFFLOAD_HOST);
}

/* ZeRO-Offload on a device: master and moments in host memory, the CPU optimizer */
static void emu_offload_host(void) {
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_HOST);
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_F32, 3, 2, ZERO_OPTIM_ADAMW, 1, ZERO_OFFLOAD_HOST);
    vs_cpu_off(ZERO_DEVICE_EMU, ZERO_F16, 1, 1, ZERO_OPTIM_SGD, 0, ZERO_OFFLOAD_HOST);
}

/* checkpoints move between devices: 8 steps on the CPU == 4 on one device, zero_save,
   zero_load on another (other stage, offload), 4 more; bitwise (at one world size: the
   sums of another world size round differently, see tests/test_equiv.c) */
typedef struct ckpt_case {
    zero_device_type da, db;
    int sa, wa, sb, wb;
    zero_offload_tier ob;
    zero_state_dtype sdt;       /* the moments' format (0: f32); q8 checkpoints copy the blocks as stored */
} ckpt_case;
static void ckpt_cases(const ckpt_case *cases, int n) {
    static cfg ref, a, b;
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    int k;
    for (k = 0; k < n; k++) {
        memset(&ref, 0, sizeof ref);
        ref.device = ZERO_DEVICE_CPU; ref.stage = 0; ref.world = cases[k].wa; ref.accum = 1; ref.dtype = ZERO_BF16;
        ref.optim = ZERO_OPTIM_ADAMW; ref.sdt = cases[k].sdt;
        if (!train(&ref)) return;
        snprintf(dir, sizeof dir, "%s/zero_dev_ck%d_%d_%ld", tmp && *tmp ? tmp : "/tmp", k, (int)cases[k].da, (long)getpid());
        a = ref; a.device = cases[k].da; a.stage = cases[k].sa; a.world = cases[k].wa; a.steps = 4; a.save_dir = dir;
        b = ref; b.device = cases[k].db; b.stage = cases[k].sb; b.world = cases[k].wb; b.steps = 4; b.step0 = 4;
        b.load_dir = dir; b.offload = cases[k].ob;
        if (!train(&a) || !train(&b)) return;
        CHECK(memcmp(ref.out, b.out, sizeof(float) * (size_t)ref.numel) == 0,
              "case %d: device %d stage %d x%d -> device %d stage %d x%d: resumed params differ from 8 steps straight", k,
              (int)cases[k].da, cases[k].sa, cases[k].wa, (int)cases[k].db, cases[k].sb, cases[k].wb);
    }
}
static void checkpoint_across_devices(void) {
    static const ckpt_case cases[] = {
        { ZERO_DEVICE_EMU, ZERO_DEVICE_CPU, 3, 2, 1, 2, ZERO_OFFLOAD_NONE, ZERO_STATE_F32 },
        { ZERO_DEVICE_CPU, ZERO_DEVICE_EMU, 2, 3, 3, 3, ZERO_OFFLOAD_NONE, ZERO_STATE_F32 },
        { ZERO_DEVICE_EMU, ZERO_DEVICE_EMU, 1, 2, 2, 2, ZERO_OFFLOAD_HOST, ZERO_STATE_F32 },
        { ZERO_DEVICE_EMU, ZERO_DEVICE_CPU, 3, 2, 1, 2, ZERO_OFFLOAD_NONE, ZERO_STATE_Q8 },
        { ZERO_DEVICE_CPU, ZERO_DEVICE_EMU, 2, 3, 3, 3, ZERO_OFFLOAD_NONE, ZERO_STATE_Q8 },
    };
    ckpt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
}

#define EMU_CASE(name, dt, world, accum, opt, tiled) \
    static void name(void) { vs_cpu(ZERO_DEVICE_EMU, dt, world, accum, opt, tiled); }
EMU_CASE(emu_f32_world1, ZERO_F32, 1, 1, ZERO_OPTIM_ADAMW, 0)
EMU_CASE(emu_bf16_world2, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0)
EMU_CASE(emu_f16_world3, ZERO_F16, 3, 1, ZERO_OPTIM_ADAMW, 0)
EMU_CASE(emu_bf16_world2_accum2, ZERO_BF16, 2, 2, ZERO_OPTIM_ADAMW, 0)
EMU_CASE(emu_f32_world3_sgd, ZERO_F32, 3, 1, ZERO_OPTIM_SGD, 0)
EMU_CASE(emu_bf16_world2_lion, ZERO_BF16, 2, 1, ZERO_OPTIM_LION, 0)
EMU_CASE(emu_bf16_world2_tiled, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 1)
EMU_CASE(emu_f32_world4_tiled, ZERO_F32, 4, 1, ZERO_OPTIM_ADAMW, 1)

/* The EMU device is strict: reading device memory from the host faults. A child
   process builds a context and reads a param directly; it must die. */
static void emu_is_strict(void) {
    pid_t pid;
    int status = 0;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        zero_desc d;
        zero_ctx *z;
        zero_module m;
        zero_param p;
        volatile float v;
        memset(&d, 0, sizeof d);
        d.device = ZERO_DEVICE_EMU;
        d.param_dtype = ZERO_F32;
        if (zero_create(&z, &d) != ZERO_OK || fx_module(z, "m", 0, &m) != ZERO_OK ||
            fx_param(z, m, "p", 16, 0, 0, &p) != ZERO_OK || zero_build(z) != ZERO_OK)
            _exit(3);
        {   /* the fault's report (from a sanitizer, if any) is expected: keep it out of the log */
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, 2);
        }
        v = *(volatile float *)zero_param_data(z, p);      /* must fault */
        (void)v;
        _exit(0);
    }
    if (!CHECK(pid > 0, "fork failed")) return;
    waitpid(pid, &status, 0);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "the child read EMU device memory from the host and survived");
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 3), "the child could not build an EMU context");
}

/* zero_copy: round trip through device memory, and its argument checks */
static void copy_checks(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_param p;
    float in[40], out[40];
    int i;
    memset(&d, 0, sizeof d);
    d.device = ZERO_DEVICE_EMU;
    d.param_dtype = ZERO_F32;
    if (!CHECK(zero_create(&z, &d) == ZERO_OK && fx_module(z, "m", 0, &m) == ZERO_OK &&
               fx_param(z, m, "p", 40, 0, 0, &p) == ZERO_OK && zero_build(z) == ZERO_OK, "%s", zero_last_error(z))) {
        zero_destroy(z);
        return;
    }
    for (i = 0; i < 40; i++) in[i] = (float)i * 0.5f - 3.0f;
    CHECK(zero_copy(z, zero_param_data(z, p), in, sizeof in) == ZERO_OK, "%s", zero_last_error(z));
    CHECK(zero_copy(z, out, zero_param_data(z, p), sizeof out) == ZERO_OK, "%s", zero_last_error(z));
    CHECK(memcmp(in, out, sizeof in) == 0, "round trip through device memory changed the data");
    CHECK(zero_copy(z, NULL, in, 4) == ZERO_ERR_INVALID_ARG, "NULL dst accepted");
    CHECK(zero_copy(z, out, in, -1) == ZERO_ERR_INVALID_ARG, "negative size accepted");
    CHECK(zero_copy(NULL, out, in, 4) == ZERO_ERR_INVALID_ARG, "NULL ctx accepted");
    CHECK(zero_copy(z, out, in, 0) == ZERO_OK, "an empty copy failed");
    CHECK(strcmp(zero_result_str(ZERO_ERR_DEVICE), "ZERO_ERR_DEVICE") == 0, "ZERO_ERR_DEVICE has no name");
    zero_destroy(z);
}

/* the trainer helpers on EMU equal the CPU device's, and reject bad input */
static void helpers(void) {
    zero_ctx *zc = NULL, *ze = NULL;
    zero_desc d;
    float x[40], yc[40], ye[40], dyc[40], dye[40], lossc[4], losse[4], *dx, *dy, *dl, *dloss;
    int32_t lab[4] = { 0, 3, 9, 2 }, *dlab;
    int i;
    memset(&d, 0, sizeof d);
    if (!CHECK(zero_create(&zc, &d) == ZERO_OK, "cpu: %s", zero_last_error(NULL))) return;
    d.device = ZERO_DEVICE_EMU;
    if (!CHECK(zero_create(&ze, &d) == ZERO_OK, "emu: %s", zero_last_error(NULL))) { zero_destroy(zc); return; }
    for (i = 0; i < 40; i++) x[i] = (float)(i - 20) * 0.17f;
    dx = (float *)zero_device_alloc(ze, sizeof x);
    dy = (float *)zero_device_alloc(ze, sizeof x);
    dl = (float *)zero_device_alloc(ze, sizeof x);
    dloss = (float *)zero_device_alloc(ze, sizeof lossc);
    dlab = (int32_t *)zero_device_alloc(ze, sizeof lab);
    if (CHECK(dx && dy && dl && dloss && dlab, "zero_device_alloc failed")) {
        CHECK(zero_gelu(zc, yc, x, 40) == ZERO_OK && zero_gelu_backward(zc, dyc, x, yc, 40) == ZERO_OK, "cpu gelu");
        zero_copy(ze, dx, x, sizeof x);
        CHECK(zero_gelu(ze, dy, dx, 40) == ZERO_OK && zero_gelu_backward(ze, dl, dx, dy, 40) == ZERO_OK, "emu gelu");
        zero_copy(ze, ye, dy, sizeof ye);
        zero_copy(ze, dye, dl, sizeof dye);
        CHECK(memcmp(yc, ye, sizeof yc) == 0 && memcmp(dyc, dye, sizeof dyc) == 0, "gelu: emu differs from cpu");
        CHECK(yc[39] > 3.0f && fabsf(yc[0]) < 0.01f, "gelu values: %g %g", yc[39], yc[0]);
        /* 4 rows of 10 classes */
        CHECK(zero_softmax_xent(zc, lossc, yc, x, lab, 4, 10, 0.5f) == ZERO_OK, "cpu xent: %s", zero_last_error(zc));
        zero_copy(ze, dlab, lab, sizeof lab);
        CHECK(zero_softmax_xent(ze, dloss, dy, dx, dlab, 4, 10, 0.5f) == ZERO_OK, "emu xent: %s", zero_last_error(ze));
        zero_copy(ze, losse, dloss, sizeof losse);
        zero_copy(ze, ye, dy, sizeof ye);
        CHECK(memcmp(lossc, losse, sizeof lossc) == 0 && memcmp(yc, ye, sizeof yc) == 0, "xent: emu differs from cpu");
        {   /* row 0: ln(sum exp(l)) - l[0], dlogits sum to 0 */
            double se = 0, sd = 0;
            int c;
            for (c = 0; c < 10; c++) { se += exp((double)x[c]); sd += yc[c]; }
            CHECK(fabs((log(se) - x[0]) - lossc[0]) < 1e-5, "loss %g, want %g", lossc[0], log(se) - x[0]);
            CHECK(fabs(sd) < 1e-6, "dlogits of a row sum to %g", sd);
        }
        lab[1] = 10;
        CHECK(zero_softmax_xent(zc, lossc, yc, x, lab, 4, 10, 1.0f) == ZERO_ERR_INVALID_ARG, "label 10 of 10 accepted");
        CHECK(strstr(zero_last_error(zc), "label 10") != NULL, "message: %s", zero_last_error(zc));
        /* as on a GPU, a kernel does not take host memory (copies do) */
        CHECK(zero_gelu(ze, ye, x, 40) == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(ze), "not device memory"),
              "EMU accepted host memory in a kernel: %s", zero_last_error(ze));
        CHECK(zero_gelu(ze, NULL, dx, 4) == ZERO_ERR_INVALID_ARG, "NULL output accepted");
        CHECK(zero_gelu(ze, dy, dx, -1) == ZERO_ERR_INVALID_ARG, "negative size accepted");
        CHECK(zero_softmax_xent(ze, dloss, dy, dx, NULL, 4, 10, 1.0f) == ZERO_ERR_INVALID_ARG, "NULL labels accepted");
    }
    CHECK(zero_device_alloc(ze, 0) == NULL && zero_device_alloc(ze, -5) == NULL, "zero_device_alloc of <= 0 bytes");
    zero_device_free(ze, dx); zero_device_free(ze, dy); zero_device_free(ze, dl);
    zero_device_free(ze, dloss); zero_device_free(ze, dlab);
    zero_destroy(ze);
    zero_destroy(zc);
}

/* desc.device out of range; EMU with offload (not yet) */
static void bad_device(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    memset(&d, 0, sizeof d);
    d.device = (zero_device_type)99;
    CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG && !z, "device 99 accepted");
    CHECK(strstr(zero_last_error(NULL), "device") != NULL, "message: %s", zero_last_error(NULL));
    d.device = ZERO_DEVICE_EMU;
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    d.offload.nvme_dirs[0] = "/tmp";
    CHECK(zero_create(&z, &d) == ZERO_ERR_UNSUPPORTED && !z, "EMU with NVMe offload accepted");
    d.offload_optimizer = ZERO_OFFLOAD_NONE;
    d.offload_params = ZERO_OFFLOAD_HOST;
    CHECK(zero_create(&z, &d) == ZERO_ERR_UNSUPPORTED && !z, "EMU with offload_params accepted");
    d.offload_params = ZERO_OFFLOAD_NONE;
    CHECK(zero_create(&z, &d) == ZERO_OK && z, "EMU refused: %s", zero_last_error(NULL));
    CHECK(zero_query_desc(z).device == ZERO_DEVICE_EMU, "query_desc lost the device");
    zero_destroy(z);
    z = NULL;
    d.device = ZERO_DEVICE_DEFAULT;
    CHECK(zero_create(&z, &d) == ZERO_OK && zero_query_desc(z).device == ZERO_DEVICE_CPU, "the default is not the CPU");
    zero_destroy(z);
}

/* ZERO_DEVICE_CUDA: without ZERO_CUDA, UNSUPPORTED; in a CUDA build without a GPU,
   NO_DEVICE; both with a sentence, never a crash. */
static void cuda_refused(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_result r;
    memset(&d, 0, sizeof d);
    d.device = ZERO_DEVICE_CUDA;
    r = zero_create(&z, &d);
#ifdef ZERO_CUDA
    {
        int n = 0;
        if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {     /* a GPU: it must work */
            CHECK(r == ZERO_OK && z, "a GPU is present but zero_create failed: %s", zero_last_error(NULL));
            zero_destroy(z);
            return;
        }
    }
    CHECK(r == ZERO_ERR_NO_DEVICE && !z, "without a GPU: %s (%s)", zero_result_str(r), zero_last_error(NULL));
    CHECK(strstr(zero_last_error(NULL), "no CUDA device") != NULL, "message: %s", zero_last_error(NULL));
#else
    CHECK(r == ZERO_ERR_UNSUPPORTED && !z, "a CPU build accepted ZERO_DEVICE_CUDA: %s", zero_result_str(r));
    CHECK(strstr(zero_last_error(NULL), "ZERO_CUDA") != NULL, "message: %s", zero_last_error(NULL));
#endif
    zero_destroy(z);
}


#ifdef ZERO_CUDA
static int have_gpu(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
/* |got - ref| / |ref| over the params (the 2-norms) */
static double rel_diff(const cfg *got, const cfg *ref) {
    double num = 0, den = 0;
    int64_t i;
    for (i = 0; i < ref->numel; i++) {
        num += ((double)got->out[i] - ref->out[i]) * ((double)got->out[i] - ref->out[i]);
        den += (double)ref->out[i] * ref->out[i];
    }
    return sqrt(num / den);
}
/* Muon on CUDA: its element-wise kernels are the CPU's bits, its iteration's GEMMs cuBLAS's
   (another summation order), so the params agree with the CPU device's to rounding (|diff|
   <= 1e-4 |p|, 8 steps) and are the same bits at every stage (f32 at 2 ranks, bf16 at 3;
   without accumulation, which sums in another order at stages 2-3, Muon or not) */
static void cuda_muon(void) {
    static cfg ref, got, first;
    zero_dtype dts[2] = { ZERO_F32, ZERO_BF16 };
    int s, k;
    fx_muon = 1;
    for (k = 0; k < 2; k++)
        for (s = 0; s <= 3; s++) {
            memset(&ref, 0, sizeof ref);
            ref.device = ZERO_DEVICE_CPU; ref.stage = s; ref.world = k ? 3 : 2; ref.accum = 1; ref.dtype = dts[k];
            ref.optim = ZERO_OPTIM_MUON;
            got = ref;
            got.device = ZERO_DEVICE_CUDA;
            if (!train(&ref) || !train(&got)) break;
            CHECK(!got.plan_mismatch, "stage %d: zero_stats_get differs from the plan", s);
            CHECK(ref.numel == got.numel && rel_diff(&got, &ref) <= 1e-4, "%s stage %d: |diff|/|p| = %g",
                  zero_dtype_str(dts[k]), s, rel_diff(&got, &ref));
            if (s == 0) first = got;
            else CHECK(memcmp(first.out, got.out, sizeof(float) * (size_t)got.numel) == 0, "%s: stage %d differs from stage 0 "
                       "on CUDA", zero_dtype_str(dts[k]), s);
        }
    fx_muon = 0;
}
static void cuda_vs_cpu(void) {
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F32, 1, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F16, 3, 2, ZERO_OPTIM_ADAMW, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F32, 4, 1, ZERO_OPTIM_SGD, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F16, 2, 1, ZERO_OPTIM_LION, 0);
    vs_cpu_off(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_HOST);   /* ZeRO-Offload */
    vs_cpu_flat(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 2, 1, ZERO_OFFLOAD_NONE);
    vs_cpu_flat(ZERO_DEVICE_CUDA, ZERO_F32, 3, 1, 0, ZERO_OFFLOAD_HOST);
    vs_sdt = ZERO_STATE_BF16;   /* bf16 moments in zk_opt; and in the host tier's CPU pass */
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F32, 3, 2, ZERO_OPTIM_SGD, 0);
    vs_cpu_off(ZERO_DEVICE_CUDA, ZERO_F16, 2, 1, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_HOST);
    vs_sdt = ZERO_STATE_Q8;     /* q8 moments in device memory (zk_opt_q8), and ZeRO-Offload's CPU pass */
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F32, 3, 2, ZERO_OPTIM_SGD, 0);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_F16, 1, 1, ZERO_OPTIM_ADAMW, 1);
    vs_cpu(ZERO_DEVICE_CUDA, ZERO_BF16, 3, 1, ZERO_OPTIM_LION, 0);
    vs_cpu_off(ZERO_DEVICE_CUDA, ZERO_BF16, 2, 1, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_HOST);
    vs_sdt = ZERO_STATE_F32;
}
/* The tiled linear on CUDA: its GEMMs are cuBLAS's, which sum in another order than the
   CPU's SGEMM, so the params agree to rounding: |diff| <= 1e-5 |p| (f32, 8 steps), every stage. */
static void cuda_tiled_close(void) {
    static cfg ref, got;
    int s;
    for (s = 0; s <= 3; s++) {
        memset(&ref, 0, sizeof ref);
        ref.device = ZERO_DEVICE_CPU; ref.stage = s; ref.world = 2; ref.accum = 1; ref.dtype = ZERO_F32;
        ref.optim = ZERO_OPTIM_ADAMW; ref.tiled = 1;
        got = ref;
        got.device = ZERO_DEVICE_CUDA;
        if (!train(&ref) || !train(&got)) return;
        CHECK(ref.numel == got.numel && rel_diff(&got, &ref) <= 1e-5, "stage %d: |diff|/|p| = %g", s, rel_diff(&got, &ref));
    }
}

/* checkpoints saved and loaded by the CUDA device (its results are the CPU device's bits) */
static void cuda_checkpoint(void) {
    static const ckpt_case cases[] = {
        { ZERO_DEVICE_CUDA, ZERO_DEVICE_CPU, 3, 2, 1, 2, ZERO_OFFLOAD_NONE, ZERO_STATE_F32 },
        { ZERO_DEVICE_CPU, ZERO_DEVICE_CUDA, 2, 3, 3, 3, ZERO_OFFLOAD_NONE, ZERO_STATE_F32 },
        { ZERO_DEVICE_CUDA, ZERO_DEVICE_CUDA, 0, 2, 2, 2, ZERO_OFFLOAD_HOST, ZERO_STATE_F32 },
        { ZERO_DEVICE_CUDA, ZERO_DEVICE_CPU, 3, 2, 1, 2, ZERO_OFFLOAD_NONE, ZERO_STATE_Q8 },   /* q8 in device memory */
        { ZERO_DEVICE_CPU, ZERO_DEVICE_CUDA, 2, 3, 3, 3, ZERO_OFFLOAD_NONE, ZERO_STATE_Q8 },
        { ZERO_DEVICE_CUDA, ZERO_DEVICE_CUDA, 1, 2, 2, 2, ZERO_OFFLOAD_HOST, ZERO_STATE_Q8 },
    };
    ckpt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
}
#endif

int main(void) {
    test_init();
    TEST_RUN(bad_device);
    TEST_RUN(cuda_refused);
    TEST_RUN(copy_checks);
    TEST_RUN(helpers);
    TEST_RUN(emu_is_strict);
    TEST_RUN(emu_f32_world1);
    TEST_RUN(emu_bf16_world2_lion);
    TEST_RUN(emu_bf16_world2);
    TEST_RUN(emu_f16_world3);
    TEST_RUN(emu_bf16_world2_accum2);
    TEST_RUN(emu_f32_world3_sgd);
    TEST_RUN(emu_bf16_world2_tiled);
    TEST_RUN(emu_f32_world4_tiled);
    TEST_RUN(emu_offload_host);
    TEST_RUN(emu_flat_layout);
    TEST_RUN(emu_bf16_states);
    TEST_RUN(emu_muon);
    TEST_RUN(emu_q8_states);
    TEST_RUN(checkpoint_across_devices);
#ifdef ZERO_CUDA
    if (have_gpu()) {                           /* without one, cuda_refused checked NO_DEVICE */
        TEST_RUN(cuda_vs_cpu);
        TEST_RUN(cuda_tiled_close);
        TEST_RUN(cuda_checkpoint);
        TEST_RUN(cuda_muon);
    } else {
        static const char *const cases[] = { "cuda_vs_cpu", "cuda_tiled_close", "cuda_checkpoint", "cuda_muon" };
        int i;
        for (i = 0; i < 4; i++) { test_begin("%s", cases[i]); test_skip("no GPU"); test_end(); }
    }
#endif
    return test_summary();
}
