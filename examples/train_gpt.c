/*
train_gpt.c - a tiny GPT trained byte by byte on zero.h, llm.c style. The main demo.

The model is GPT-2 shaped, at toy size: token and position embeddings, L transformer
blocks (pre-norm: layer norm, causal multi-head self-attention, residual; layer norm,
MLP with GELU, residual), a final layer norm and an output layer over the 256 byte
values. Each block is one zero.h module (its 12 params are fetched, released and
reduced together); the embeddings and the final norm are modules of their own. The
output layer is the token embedding, as in GPT-2: the final norm's module holds a tied
param "head" that is embed.wte (zero_add_tied_param), so fetching it fetches the
embedding too, and wte's gradient comes in two windows of the backward pass (the
output layer first, the embedding last), reduced once both are in. --untie gives the
output layer weights of its own, a tiled linear (zero_tiled_linear_*, whose GEMMs are
zero_sgemm). The blocks' matmuls are axpy loops here. Forward and backward are written
by hand (the math of llm.c's CPU reference train_gpt2.c, in our own code).

It trains on --data FILE, by default on this library's own source, zero.h, so it
runs anywhere: every step each rank reads its share of the global batch, sequences
of --seq bytes from positions drawn from (seed, step, sample index). The loss starts
at ln 256 = 5.55 nats per byte; `make run` (stage 3, 4 ranks as threads) brings it
under 2.5 in a minute or two on two cores. At the end it samples text, prints a
table of the per-rank memory this run planned beside what stages 0-3 need (from the
planner), and the line `final loss=... tokens_per_s=... model_state_bytes_per_rank=...`
(loss: the mean over the last 10 steps, in nats per byte).
--plot FILE.svg draws the loss curve and the per-stage memory; --trace FILE.json
writes a Chrome / Perfetto timeline (zero_trace_*: compute, comm, optimizer tracks
for every rank).

ZeRO++ (zero.h's ON ZERO++): --qwz gathers int8 block-quantized params (stage 3), --qgz
reduces the gradients in int8 (--qgz-bits 4: int4) payloads within each node, then across
nodes (stages 1-3), --hpz N keeps a secondary partition on each node of N ranks so that
stage 3's gathers stay in the node. The ranks, threads of one local group, form nodes of
--ranks-per-node ranks (default: --hpz's N, else one node), over modelled links if
--link-gbps / --cross-gbps are given; the final line ends with the bytes rank 0 sent to its
node and to other nodes (bytes_within=, bytes_across=), and the memory table adds a line
with the secondary partition's and the quantized payloads' bytes.

Checkpoints: --save-ckpt DIR saves after the last step (and after every --ckpt-every N
steps); --load-ckpt DIR resumes at any stage and rank count. Besides zero.h's state, a
checkpoint carries this trainer's records (zero_ckpt_put): "train_gpt.data" (the next
step's data position, the batch and the seed of the data and sampling streams) and
"train_gpt.args" (the model's options, for `zero_ckpt info`), so a resumed run sees the
batches the uninterrupted one would have and, at the same rank count, ends with the same
bits (params_hash) — skipped steps included (--skip-step K makes one, for tests).

Build and run:
    make build/train_gpt && build/train_gpt          # = make run
    build/train_gpt --stage 2 --ranks 2 --steps 50 --plot gpt.svg --trace gpt.json
    build/train_gpt --ranks 8 --ranks-per-node 2 --qwz --qgz --hpz 2 --steps 50
*/
#define _POSIX_C_SOURCE 200809L
#include <math.h>     // defines: sqrtf, sqrt, log, cos, sin (exp, log and tanh in float: zero_expf, ...,
                      // the same bits on every platform)
#include <stdint.h>   // defines: uint64_t, int64_t
#include <stdio.h>    // defines: printf, fprintf, fopen, fread, fclose, snprintf
#include <stdlib.h>   // defines: malloc, calloc, realloc, free, getenv
#include <string.h>   // defines: strcmp, memcpy, memset, strrchr
#include <unistd.h>   // defines: isatty, fileno
#define ZERO_IMPLEMENTATION
#include "../zero.h"  // defines: zero_create, zero_build, zero_fetch, zero_step, zero_trace_*, zero_sgemm, ...
#define CLI_PROG "train_gpt"
#include "cli.h"     // defines: bad_arg, option_value, parse_long, parse_float, parse_seed, parse_dtype, ...

#define VOCAB 256          // bytes
#define NPARAM 12          // params of a block
#define SAMPLE_BYTES 200
#define MAX_STEPS_KEPT 1000000

// ----------------------------------------------------------------------------
// configuration

typedef struct {
    int stage, ranks, steps, accum, layers, dim, heads, seq, batch, quiet;
    int batch_set;               // --batch given (else the default rounds up to fit --ranks * --accum)
    int untie;                   // the output layer has weights of its own (a tiled linear)
    int flat_layout;             // --flat-layout: desc.flat_layout (stages 0-2; the same bits)
    zero_dtype dtype;
    zero_optim_type optim;       // --optim: adamw (default), lion or sgd
    float clip;                  // --clip: desc.clip_norm (default 1; 0: no clipping)
    float lr;                    // --lr; 0: the optimizer's default (adamw 3e-3, lion 1e-3, sgd 0.1; muon: its AdamW's)
    float muon_lr;               // --muon-lr: Muon's on the blocks' matrices (default 0.02)
    uint64_t seed;
    const char *data, *plot, *trace;
    zero_offload_tier offload_optimizer, offload_params;   // ZeRO-Offload / -Infinity tiers
    zero_state_dtype state_dtype;                          // --optim-state-dtype: the moments' format
    const char *nvme_dir;
    long long offload_buffer_mb;      // --offload-buffer-mb: desc.offload.buffer_bytes in MiB (0: the default, 64)
    int ckpt;                    // --checkpoint-activations: keep each block's input only, recompute the rest
    zero_offload_tier offload_acts;   // where those inputs wait for the backward pass (zero_act_*)
    int qwz, qgz, hpz, quant_block;   // ZeRO++: desc.qwz, desc.qgz (bits), desc.hpz, desc.quant_block
    int speculative;                  // --speculative-step: desc.speculative_step
    int ranks_per_node;          // the local group's nodes (zero_group_set_nodes); 0: --hpz's, else one node
    float link_gbps, cross_gbps; // the local group's modelled links within / across nodes (0: none)
    const char *save_ckpt, *load_ckpt;   // checkpoint directories (zero_save / zero_load)
    int ckpt_every;              // --ckpt-every N: also save after every N-th step (counted from the run's start)
    long long skip_step;         // --skip-step K: poison step K's gradients (a skipped step, for tests); -1: none
    const char *deepspeed;       // --deepspeed FILE: the desc from a DeepSpeed config (zero_desc_from_json)
    zero_desc ds;                // ... which it filled
    char *ds_text;               // its text (the desc's NVMe path points into it)
} config;

typedef struct {
    config cfg;
    const unsigned char *text;   // the training bytes
    int64_t text_len;
    float *losses;               // per step, written by rank 0
    double seconds;
    int64_t plan_bytes[4][ZERO_TIER_NUM][ZERO_CAT_NUM];   // per-rank plans of stages 0-3 (rank 0)
    int have_plans;
    int64_t own_act_bytes;       // activations train_gpt allocates itself (outside the plan), per rank
    int64_t hpz_bytes, zpp_buffer_bytes;   // this run's plan: ZeRO++'s secondary partition and payload buffers
} shared_state;

static const char *dtype_name(zero_dtype t) { return t == ZERO_F32 ? "f32" : t == ZERO_F16 ? "f16" : "bf16"; }

// ----------------------------------------------------------------------------
// deterministic random numbers (splitmix64), one stream per (seed, kind, index)

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t stream_seed(uint64_t seed, uint64_t kind, uint64_t index) {
    return mix64(mix64(seed * 0x9E3779B97F4A7C15ull + kind) ^ (index + 0x632BE59BD9B4E019ull));
}
static uint64_t next_u64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }
static double next_uniform(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static void fill_normal(float *out, int64_t n, float std, uint64_t *s) {
    for (int64_t i = 0; i < n; i += 2) {   // Box-Muller
        double r = sqrt(-2.0 * log(next_uniform(s))), t = 6.283185307179586 * next_uniform(s);
        out[i] = (float)(std * r * cos(t));
        if (i + 1 < n) out[i + 1] = (float)(std * r * sin(t));
    }
}

enum { STREAM_DATA = 1, STREAM_INIT = 2, STREAM_SAMPLE = 3 };

// ----------------------------------------------------------------------------
// the model's math on f32 arrays (B sequences of T positions, C channels, NH heads)

// Matmuls as rows of axpy (y += a * x over a contiguous row), four output rows sharing
// each load of x: the fixed 8-wide inner loop vectorizes at -O2 without reassociating
// a sum. On this model's shapes that runs ~3x faster than zero_sgemm's portable packed
// kernel (which the tiled output layer uses).
static void axpy4(float *restrict y0, float *restrict y1, float *restrict y2, float *restrict y3,
                  const float *restrict x, float a0, float a1, float a2, float a3, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = x[i + k];
            y0[i + k] += a0 * v; y1[i + k] += a1 * v; y2[i + k] += a2 * v; y3[i + k] += a3 * v;
        }
    for (; i < n; i++) {
        float v = x[i];
        y0[i] += a0 * v; y1[i] += a1 * v; y2[i] += a2 * v; y3[i] += a3 * v;
    }
}
static void axpy1(float *restrict y, const float *restrict x, float a, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) y[i + k] += a * x[i + k];
    for (; i < n; i++) y[i] += a * x[i];
}
// Y[r][:] += sum_k A[r][k] X[k][:]   (Y: R x N, A: R x K with row stride lda, X: K x N)
static void gemm_acc(float *Y, const float *A, int lda, const float *X, int R, int K, int N) {
    int r = 0;
    for (; r + 4 <= R; r += 4) {
        const float *a = A + (int64_t)r * lda;
        float *y = Y + (int64_t)r * N;
        for (int k = 0; k < K; k++)
            axpy4(y, y + N, y + 2 * N, y + 3 * N, X + (int64_t)k * N, a[k], a[lda + k], a[2 * lda + k], a[3 * lda + k], N);
    }
    for (; r < R; r++)
        for (int k = 0; k < K; k++) axpy1(Y + (int64_t)r * N, X + (int64_t)k * N, A[(int64_t)r * lda + k], N);
}
static void transpose(float *restrict dst, const float *restrict src, int rows, int cols) {
    enum { TB = 16 };
    for (int r0 = 0; r0 < rows; r0 += TB)
        for (int c0 = 0; c0 < cols; c0 += TB)
            for (int r = r0; r < r0 + TB && r < rows; r++)
                for (int c = c0; c < c0 + TB && c < cols; c++)
                    dst[(int64_t)c * rows + r] = src[(int64_t)r * cols + c];
}

// out[BT, OC] = inp[BT, IC] W^T + bias, W [OC, IC]; scratch: OC * IC floats
static void matmul_forward(float *out, float *scratch, const float *inp, const float *w, const float *bias,
                           int BT, int IC, int OC) {
    transpose(scratch, w, OC, IC);
    for (int i = 0; i < BT; i++) memcpy(out + (int64_t)i * OC, bias, (size_t)OC * sizeof(float));
    gemm_acc(out, inp, IC, scratch, BT, IC, OC);
}
// dinp += dout W; dw = dout^T inp; db = column sums of dout (dw, db overwritten); scratch: BT * OC
static void matmul_backward(float *dinp, float *dw, float *db, float *scratch, const float *dout, const float *inp,
                            const float *w, int BT, int IC, int OC) {
    gemm_acc(dinp, dout, OC, w, BT, OC, IC);
    transpose(scratch, dout, BT, OC);
    memset(dw, 0, (size_t)OC * IC * sizeof(float));
    gemm_acc(dw, scratch, BT, inp, OC, BT, IC);
    for (int o = 0; o < OC; o++) {
        float acc = 0.0f;
        for (int i = 0; i < BT; i++) acc += scratch[(int64_t)o * BT + i];
        db[o] = acc;
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                              int BT, int C) {
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (int64_t)i * C;
        float m = 0.0f, v = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= (float)C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
        float *o = out + (int64_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}
// dinp += ..., dw += ..., db += ...
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        const float *d = dout + (int64_t)i * C, *x = inp + (int64_t)i * C;
        float *dx = dinp + (int64_t)i * C, m = mean[i], s = rstd[i], dmean = 0.0f, dnx = 0.0f;
        for (int c = 0; c < C; c++) {
            float dn = w[c] * d[c];
            dmean += dn;
            dnx += dn * (x[c] - m) * s;
        }
        dmean /= (float)C;
        dnx /= (float)C;
        for (int c = 0; c < C; c++) {
            float nx = (x[c] - m) * s, dn = w[c] * d[c];
            db[c] += d[c];
            dw[c] += nx * d[c];
            dx[c] += (dn - dmean - nx * dnx) * s;
        }
    }
}

// qkv [B, T, 3C] -> out [B, T, C]; att [B, NH, T, T] keeps the softmax for the backward pass
static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *q = qkv + ((int64_t)b * T + t) * 3 * C + h * hs;
                float *a = att + (((int64_t)b * NH + h) * T + t) * T, mx = -1e30f, sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    a[t2] = dot * scale;
                    if (a[t2] > mx) mx = a[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) { a[t2] = zero_expf(a[t2] - mx); sum += a[t2]; }
                float inv = 1.0f / sum;
                float *o = out + ((int64_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    a[t2] *= inv;
                    for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
                }
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}
// dqkv (overwritten) from dout; datt_row: scratch of T floats
static void attention_backward(float *dqkv, float *datt_row, const float *dout, const float *qkv, const float *att,
                               int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *a = att + (((int64_t)b * NH + h) * T + t) * T;
                const float *d = dout + ((int64_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((int64_t)b * T + t) * 3 * C + h * hs;
                float *dq = dqkv + ((int64_t)b * T + t) * 3 * C + h * hs, dsum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    float *dv = dqkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * hs, dot = 0.0f;
                    for (int i = 0; i < hs; i++) { dot += v[i] * d[i]; dv[i] += a[t2] * d[i]; }
                    datt_row[t2] = dot;
                    dsum += a[t2] * dot;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    float dpre = a[t2] * (datt_row[t2] - dsum) * scale;
                    const float *k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * hs;
                    float *dk = dqkv + ((int64_t)b * T + t2) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) { dq[i] += k[i] * dpre; dk[i] += q[i] * dpre; }
                }
            }
}

#define GELU_SCALE 0.7978845608028654f   // sqrt(2/pi)
static void gelu_forward(float *out, float *th, const float *inp, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        th[i] = zero_tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        out[i] = 0.5f * x * (1.0f + th[i]);
    }
}
static void gelu_backward(float *d, const float *inp, const float *th, int64_t n) {   // d *= gelu'(inp)
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i], t = th[i];
        d[i] *= 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    }
}

// ----------------------------------------------------------------------------
// one rank

enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };
static const char *block_param_names[NPARAM] = { "ln1.w", "ln1.b", "qkv.w", "qkv.b", "attproj.w", "attproj.b",
                                                 "ln2.w", "ln2.b", "fc.w", "fc.b", "fcproj.w", "fcproj.b" };

typedef struct {   // activations of one block, kept for the backward pass
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_th, *fch_gelu;
} block_acts;

typedef struct {
    const config *cfg;
    shared_state *sh;
    zero_ctx *z;
    int rank, per, L, C, NH, T;
    zero_module embed_mod, lnf_mod, *block_mod;
    zero_param wte, wpe, lnfw, lnfb, *bp;         // bp[l * NPARAM + k]
    zero_param headw;                            // tied: lnf's "head", which is wte
    zero_tiled_linear head;                      // --untie: the output layer's own weights
    int64_t pn[NPARAM];                          // numel of each block param
    int64_t block_numel;
    float *w, *g;                                // f32 copy of the fetched module's params, its grads
    float *resid;                                // [L + 1][BT * C]: the input of each block, then lnf's
                                                 // (--checkpoint-activations: [2][BT * C], ping-pong)
    block_acts *acts;                            // [L] (--checkpoint-activations: [1], recomputed per block)
    zero_act *act_in;                            // --checkpoint-activations: block l's input in the stash
    float *xin;                                  // a block input brought back from the stash
    float *lnf, *lnf_mean, *lnf_rstd, *logits;
    float *dres, *dtmp, *dqkv, *d4c, *datt_row, *wt, *doutT, *dbias;   // wt, doutT, dbias: matmul scratch
    int *tokens, *targets;
    uint64_t seed;                               // data positions and sampling (a checkpoint's, after --load-ckpt)
    int64_t step0;                               // steps (applied or skipped) before this run: the data position
} trainer;

#define ZCHECK(call) do { zero_result r_ = (call); \
    if (r_ < 0) { fprintf(stderr, "train_gpt: rank %d: %s failed: %s\n", t->rank, #call, zero_last_error(t->z)); return r_; } } while (0)

// muon: a matrix --optim muon steps with Muon (the blocks' matrices, as its authors train;
// the embeddings, norms and biases stay AdamW's)
static zero_result add_param(trainer *t, zero_module m, const char *name, int ndim, int64_t d0, int64_t d1,
                             int no_decay, int muon, zero_param *out) {
    zero_param_desc pd = {0};
    pd.name = name; pd.ndim = ndim; pd.shape[0] = d0; pd.shape[1] = d1; pd.no_decay = no_decay;
    pd.muon = muon && t->cfg->optim == ZERO_OPTIM_MUON;
    ZCHECK(zero_add_param(t->z, m, &pd, out));
    return ZERO_OK;
}

// Registers the model: embed, block0..L-1, lnf with the output layer tied to wte (or,
// --untie, the tiled head: a module per tile).
static zero_result register_model(trainer *t) {
    int C = t->C, L = t->L;
    char name[32];
    zero_module_desc md = {0};
    md.name = "embed";
    ZCHECK(zero_add_module(t->z, &md, &t->embed_mod));
    ZCHECK(add_param(t, t->embed_mod, "wte", 2, VOCAB, C, 0, 0, &t->wte));
    ZCHECK(add_param(t, t->embed_mod, "wpe", 2, t->T, C, 0, 0, &t->wpe));
    int64_t shapes[NPARAM][2] = { {C, 0}, {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C}, {C, 0},
                                  {C, 0}, {C, 0}, {4 * C, C}, {4 * C, 0}, {C, 4 * C}, {C, 0} };
    t->block_numel = 0;
    for (int k = 0; k < NPARAM; k++) {
        t->pn[k] = shapes[k][0] * (shapes[k][1] ? shapes[k][1] : 1);
        t->block_numel += t->pn[k];
    }
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "block%d", l);
        md.name = name;
        ZCHECK(zero_add_module(t->z, &md, &t->block_mod[l]));
        for (int k = 0; k < NPARAM; k++)
            ZCHECK(add_param(t, t->block_mod[l], block_param_names[k], shapes[k][1] ? 2 : 1, shapes[k][0],
                             shapes[k][1], shapes[k][1] == 0, shapes[k][1] != 0, &t->bp[l * NPARAM + k]));
    }
    if (t->cfg->ckpt)   // block l's input, put in the forward pass and asked for in the backward pass
        for (int l = 0; l < L; l++) {
            snprintf(name, sizeof name, "block%d.in", l);
            ZCHECK(zero_act_add(t->z, name, (int64_t)t->per * t->T * C * (int64_t)sizeof(float), &t->act_in[l]));
        }
    md.name = "lnf";
    ZCHECK(zero_add_module(t->z, &md, &t->lnf_mod));
    ZCHECK(add_param(t, t->lnf_mod, "w", 1, C, 0, 1, 0, &t->lnfw));
    ZCHECK(add_param(t, t->lnf_mod, "b", 1, C, 0, 1, 0, &t->lnfb));
    if (!t->cfg->untie) {
        ZCHECK(zero_add_tied_param(t->z, t->lnf_mod, "head", t->wte, &t->headw));
        return ZERO_OK;
    }
    zero_tiled_linear_desc hd = {0};
    hd.name = "head"; hd.in_features = C; hd.out_features = VOCAB; hd.tiles = 2;
    ZCHECK(zero_tiled_linear_add(t->z, &hd, &t->head));
    return ZERO_OK;
}

static zero_result build_model(trainer *t) {
    int C = t->C, L = t->L;
    ZCHECK(register_model(t));
    if (t->cfg->trace) ZCHECK(zero_trace_enable(t->z, (int64_t)8 * (t->cfg->steps + 4) * (3 * t->L + 6) + 4096));
    ZCHECK(zero_build(t->z));

    // GPT-2's init: N(0, 0.02), the residual projections scaled by 1/sqrt(2L), norms 1 and 0.
    // Every rank sets the same full values (from the seed) and keeps its own part.
    uint64_t s = stream_seed(t->cfg->seed, STREAM_INIT, 0);
    float *buf = t->w;
    fill_normal(buf, (int64_t)VOCAB * C, 0.02f, &s);
    ZCHECK(zero_param_set_f32(t->z, t->wte, buf));
    fill_normal(buf, (int64_t)t->T * C, 0.01f, &s);
    ZCHECK(zero_param_set_f32(t->z, t->wpe, buf));
    for (int l = 0; l < L; l++)
        for (int k = 0; k < NPARAM; k++) {
            int is_w = k == QKVW || k == ATTPROJW || k == FCW || k == FCPROJW;
            if (is_w) fill_normal(buf, t->pn[k], k == ATTPROJW || k == FCPROJW ? 0.02f / sqrtf(2.0f * L) : 0.02f, &s);
            else for (int64_t i = 0; i < t->pn[k]; i++) buf[i] = k == LN1W || k == LN2W ? 1.0f : 0.0f;
            ZCHECK(zero_param_set_f32(t->z, t->bp[l * NPARAM + k], buf));
        }
    for (int i = 0; i < C; i++) buf[i] = 1.0f;
    ZCHECK(zero_param_set_f32(t->z, t->lnfw, buf));
    memset(buf, 0, (size_t)C * sizeof(float));
    ZCHECK(zero_param_set_f32(t->z, t->lnfb, buf));
    if (t->cfg->untie) {
        fill_normal(buf, (int64_t)VOCAB * C, 0.02f, &s);
        ZCHECK(zero_tiled_linear_set_f32(t->z, t->head, buf, NULL));
    }
    return ZERO_OK;
}

// Copies a fetched module's params to f32 (t->w, back to back); ptrs[k] point into it.
static zero_result load_params(trainer *t, const zero_param *ps, int n, float **ptrs) {
    float *dst = t->w;
    for (int k = 0; k < n; k++) {
        const void *src = zero_param_data(t->z, ps[k]);
        int64_t numel = zero_param_numel(t->z, ps[k]);
        if (!src) { fprintf(stderr, "train_gpt: rank %d: zero_param_data: %s\n", t->rank, zero_last_error(t->z)); return ZERO_ERR_STATE; }
        zero_to_f32(dst, src, t->cfg->dtype, numel);
        ptrs[k] = dst;
        dst += numel;
    }
    return ZERO_OK;
}
// Zeroes t->g laid out like load_params; gptrs[k] point into it.
static void zero_grads_f32(trainer *t, const zero_param *ps, int n, float **gptrs) {
    float *dst = t->g;
    for (int k = 0; k < n; k++) {
        int64_t numel = zero_param_numel(t->z, ps[k]);
        memset(dst, 0, (size_t)numel * sizeof(float));
        gptrs[k] = dst;
        dst += numel;
    }
}
static zero_result store_grads(trainer *t, const zero_param *ps, int n, float **gptrs) {
    for (int k = 0; k < n; k++) {
        void *g = zero_param_grad(t->z, ps[k]);
        if (!g) { fprintf(stderr, "train_gpt: rank %d: zero_param_grad: %s\n", t->rank, zero_last_error(t->z)); return ZERO_ERR_STATE; }
        zero_add_f32(g, t->cfg->dtype, gptrs[k], zero_param_numel(t->z, ps[k]));
    }
    return ZERO_OK;
}

static void span(trainer *t, const char *what, const char *mod) {
    char name[48];
    snprintf(name, sizeof name, "%s %s", what, mod);
    zero_trace_begin(t->z, name);
}

// block l's input x [B*T, C] (resid_at), in the plain layout or ping-pong (--checkpoint-activations)
static float *resid_at(trainer *t, int l) {
    return t->resid + (int64_t)(t->cfg->ckpt ? l % 2 : l) * t->per * t->T * t->C;
}

// One block's forward from its input x with params p, keeping its activations in a; y =
// NULL stops before the output (the recomputation in the backward pass needs only a).
static void block_forward(trainer *t, block_acts *a, float **p, const float *x, float *y, int B, int T) {
    int C = t->C, BT = B * T;
    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, p[LN1W], p[LN1B], BT, C);
    matmul_forward(a->qkv, t->wt, a->ln1, p[QKVW], p[QKVB], BT, C, 3 * C);
    attention_forward(a->atty, a->att, a->qkv, B, T, C, t->NH);
    matmul_forward(a->res2, t->wt, a->atty, p[ATTPROJW], p[ATTPROJB], BT, C, C);
    for (int64_t i = 0; i < (int64_t)BT * C; i++) a->res2[i] += x[i];
    layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p[LN2W], p[LN2B], BT, C);
    matmul_forward(a->fch, t->wt, a->ln2, p[FCW], p[FCB], BT, C, 4 * C);
    gelu_forward(a->fch_gelu, a->fch_th, a->fch, (int64_t)BT * 4 * C);
    if (!y) return;
    matmul_forward(y, t->wt, a->fch_gelu, p[FCPROJW], p[FCPROJB], BT, 4 * C, C);
    for (int64_t i = 0; i < (int64_t)BT * C; i++) y[i] += a->res2[i];
}

// Forward over B sequences of T tokens. With targets: returns the summed loss and leaves
// dlogits (times grad_scale) in t->logits. head_rows_last: only the last position's logits.
static zero_result forward(trainer *t, int B, int T, const int *targets, float grad_scale, int last_only,
                           double *loss_sum) {
    int C = t->C, L = t->L, BT = B * T;
    float *p[NPARAM];
    zero_param ep[2] = { t->wte, t->wpe };
    span(t, "forward", "embed");
    ZCHECK(zero_fetch(t->z, t->embed_mod));
    ZCHECK(load_params(t, ep, 2, p));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            float *o = t->resid + ((int64_t)b * T + i) * C;
            const float *we = p[0] + (int64_t)t->tokens[b * T + i] * C, *pe = p[1] + (int64_t)i * C;
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        }
    ZCHECK(zero_release(t->z, t->embed_mod));
    zero_trace_end(t->z);

    for (int l = 0; l < L; l++) {
        block_acts *a = &t->acts[t->cfg->ckpt ? 0 : l];
        const float *x = resid_at(t, l);
        float *y = resid_at(t, l + 1);
        char mname[32];
        snprintf(mname, sizeof mname, "block%d", l);
        span(t, "forward", mname);
        // a training pass stashes the block's input: the backward pass recomputes the block from it
        if (t->cfg->ckpt && targets) ZCHECK(zero_act_put(t->z, t->act_in[l], x));
        ZCHECK(zero_fetch(t->z, t->block_mod[l]));
        ZCHECK(load_params(t, t->bp + l * NPARAM, NPARAM, p));
        ZCHECK(zero_release(t->z, t->block_mod[l]));   // everything needed is in t->w now
        block_forward(t, a, p, x, y, B, T);
        zero_trace_end(t->z);
    }

    const float *xf = resid_at(t, L);
    zero_param fp[3] = { t->lnfw, t->lnfb, t->headw };
    int tied = !t->cfg->untie;
    span(t, "forward", "lnf+head");
    ZCHECK(zero_fetch(t->z, t->lnf_mod));           // tied: embed (wte) is fetched with it
    ZCHECK(load_params(t, fp, 2 + tied, p));
    layernorm_forward(t->lnf, t->lnf_mean, t->lnf_rstd, xf, p[0], p[1], BT, C);
    ZCHECK(zero_release(t->z, t->lnf_mod));
    const float *hin = last_only ? t->lnf + (int64_t)(BT - 1) * C : t->lnf;
    if (tied) {                                     // logits = lnf wte^T
        memset(t->logits, 0, (size_t)(last_only ? 1 : BT) * VOCAB * sizeof(float));
        transpose(t->wt, p[2], VOCAB, C);
        gemm_acc(t->logits, hin, C, t->wt, last_only ? 1 : BT, C, VOCAB);
    } else {
        ZCHECK(zero_tiled_linear_forward(t->z, t->head, hin, last_only ? 1 : BT, t->logits));
    }
    zero_trace_end(t->z);
    if (!targets) return ZERO_OK;

    // softmax cross-entropy; the logits become dlogits = grad_scale * (softmax - onehot)
    double loss = 0.0;
    for (int i = 0; i < BT; i++) {
        float *l = t->logits + (int64_t)i * VOCAB, mx = l[0], sum = 0.0f;
        for (int v = 1; v < VOCAB; v++) mx = l[v] > mx ? l[v] : mx;
        float lt = l[targets[i]] - mx;
        for (int v = 0; v < VOCAB; v++) { l[v] = zero_expf(l[v] - mx); sum += l[v]; }
        loss += (double)(zero_logf(sum) - lt);
        float inv = grad_scale / sum;
        for (int v = 0; v < VOCAB; v++) l[v] *= inv;
        l[targets[i]] -= grad_scale;
    }
    *loss_sum += loss;
    return ZERO_OK;
}

static zero_result backward(trainer *t, int B, int T) {
    int C = t->C, L = t->L, BT = B * T;
    float *p[NPARAM], *gp[NPARAM];
    size_t actb = (size_t)BT * C * sizeof(float);

    // the output layer, then lnf. Tied: its gradient goes into wte's (the "head" param),
    // whose other half the embedding adds at the end; untied: the tiled linear adds its
    // gradients and marks its tiles ready
    span(t, "backward", "lnf+head");
    zero_param fp[3] = { t->lnfw, t->lnfb, t->headw };
    int tied = !t->cfg->untie;
    memset(t->dtmp, 0, actb);
    if (!tied) ZCHECK(zero_tiled_linear_backward(t->z, t->head, t->lnf, t->logits, BT, t->dtmp));
    ZCHECK(zero_fetch(t->z, t->lnf_mod));
    ZCHECK(load_params(t, fp, 2 + tied, p));
    zero_grads_f32(t, fp, 2 + tied, gp);
    if (tied)   // dlnf += dlogits wte; dwte_head = dlogits^T lnf (db: scratch, unused)
        matmul_backward(t->dtmp, gp[2], t->dbias, t->doutT, t->logits, t->lnf, p[2], BT, C, VOCAB);
    memset(t->dres, 0, actb);
    layernorm_backward(t->dres, gp[0], gp[1], t->dtmp, resid_at(t, L), p[0], t->lnf_mean, t->lnf_rstd, BT, C);
    ZCHECK(store_grads(t, fp, 2 + tied, gp));
    ZCHECK(zero_release(t->z, t->lnf_mod));
    ZCHECK(zero_grads_ready(t->z, t->lnf_mod));
    zero_trace_end(t->z);

    // t->dres: the gradient wrt the current block's output, becomes that wrt its input
    for (int l = L - 1; l >= 0; l--) {
        block_acts *a = &t->acts[t->cfg->ckpt ? 0 : l];
        const float *x = resid_at(t, l);
        char mname[32];
        snprintf(mname, sizeof mname, "block%d", l);
        span(t, "backward", mname);
        if (t->cfg->ckpt) {     // the block's input back from the stash (read ahead while block l+1 ran)
            ZCHECK(zero_act_get(t->z, t->act_in[l], t->xin));
            x = t->xin;
        }
        ZCHECK(zero_fetch(t->z, t->block_mod[l]));
        ZCHECK(load_params(t, t->bp + l * NPARAM, NPARAM, p));
        if (t->cfg->ckpt) {     // recompute its activations: the same code on the same bits
            span(t, "recompute", mname);
            block_forward(t, a, p, x, NULL, B, T);
            zero_trace_end(t->z);
        }
        zero_grads_f32(t, t->bp + l * NPARAM, NPARAM, gp);
        // MLP: y = res2 + fcproj(gelu(fc(ln2(res2))))
        memset(t->d4c, 0, (size_t)BT * 4 * C * sizeof(float));
        matmul_backward(t->d4c, gp[FCPROJW], gp[FCPROJB], t->doutT, t->dres, a->fch_gelu, p[FCPROJW], BT, 4 * C, C);
        gelu_backward(t->d4c, a->fch, a->fch_th, (int64_t)BT * 4 * C);
        memset(t->dtmp, 0, actb);
        matmul_backward(t->dtmp, gp[FCW], gp[FCB], t->doutT, t->d4c, a->ln2, p[FCW], BT, C, 4 * C);
        layernorm_backward(t->dres, gp[LN2W], gp[LN2B], t->dtmp, a->res2, p[LN2W], a->ln2_mean, a->ln2_rstd, BT, C);
        // attention: res2 = x + attproj(attn(qkv(ln1(x))))
        memset(t->dtmp, 0, actb);
        matmul_backward(t->dtmp, gp[ATTPROJW], gp[ATTPROJB], t->doutT, t->dres, a->atty, p[ATTPROJW], BT, C, C);
        attention_backward(t->dqkv, t->datt_row, t->dtmp, a->qkv, a->att, B, T, C, t->NH);
        memset(t->dtmp, 0, actb);
        matmul_backward(t->dtmp, gp[QKVW], gp[QKVB], t->doutT, t->dqkv, a->ln1, p[QKVW], BT, C, 3 * C);
        layernorm_backward(t->dres, gp[LN1W], gp[LN1B], t->dtmp, x, p[LN1W], a->ln1_mean, a->ln1_rstd, BT, C);
        ZCHECK(store_grads(t, t->bp + l * NPARAM, NPARAM, gp));
        ZCHECK(zero_release(t->z, t->block_mod[l]));
        ZCHECK(zero_grads_ready(t->z, t->block_mod[l]));
        zero_trace_end(t->z);
    }

    zero_param ep[2] = { t->wte, t->wpe };
    span(t, "backward", "embed");
    ZCHECK(zero_fetch(t->z, t->embed_mod));
    zero_grads_f32(t, ep, 2, gp);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const float *d = t->dres + ((int64_t)b * T + i) * C;
            float *gw = gp[0] + (int64_t)t->tokens[b * T + i] * C, *gpe = gp[1] + (int64_t)i * C;
            for (int c = 0; c < C; c++) { gw[c] += d[c]; gpe[c] += d[c]; }
        }
    ZCHECK(store_grads(t, ep, 2, gp));
    ZCHECK(zero_release(t->z, t->embed_mod));
    ZCHECK(zero_grads_ready(t->z, t->embed_mod));
    zero_trace_end(t->z);
    return ZERO_OK;
}

// this rank's sequences of micro-batch a of step `step` (counted from the first run's start):
// positions drawn from (seed, global index)
static void load_batch(trainer *t, int64_t step, int a) {
    const config *c = t->cfg;
    int T = t->T;
    for (int i = 0; i < t->per; i++) {
        int64_t g = step * c->batch + (int64_t)(t->rank * c->accum + a) * t->per + i;
        uint64_t s = stream_seed(t->seed, STREAM_DATA, (uint64_t)g);
        int64_t off = (int64_t)(next_u64(&s) % (uint64_t)(t->sh->text_len - T));
        for (int j = 0; j < T; j++) {
            t->tokens[i * T + j] = t->sh->text[off + j];
            t->targets[i * T + j] = t->sh->text[off + j + 1];
        }
    }
}

static void fmt_bytes(char *out, size_t n, double b) {
    if (b >= 1048576.0) snprintf(out, n, "%.2fMB", b / 1048576.0);
    else if (b >= 1024.0) snprintf(out, n, "%.1fKB", b / 1024.0);
    else snprintf(out, n, "%.0fB", b);
}

static zero_result sample_text(trainer *t) {
    // every rank runs the same forward passes in lockstep (stage 3 fetches are collective);
    // rank 0 prints. The stream of draws is the same on every rank.
    uint64_t s = stream_seed(t->seed, STREAM_SAMPLE, 0);
    unsigned char out[SAMPLE_BYTES + 1];
    int n = 0;
    out[n++] = '\n';
    while (n < SAMPLE_BYTES + 1) {
        int T = n < t->T ? n : t->T;
        for (int j = 0; j < T; j++) t->tokens[j] = out[n - T + j];
        ZCHECK(forward(t, 1, T, NULL, 0.0f, 1, NULL));
        float mx = t->logits[0], sum = 0.0f;
        for (int v = 1; v < VOCAB; v++) mx = t->logits[v] > mx ? t->logits[v] : mx;
        for (int v = 0; v < VOCAB; v++) sum += (t->logits[v] = zero_expf(t->logits[v] - mx));
        float u = (float)next_uniform(&s) * sum, acc = 0.0f;
        int pick = VOCAB - 1;
        for (int v = 0; v < VOCAB; v++) { acc += t->logits[v]; if (u < acc) { pick = v; break; } }
        out[n++] = (unsigned char)pick;
    }
    if (t->rank == 0 && !t->cfg->quiet) {
        printf("sample (%d bytes, printable-escaped):\n", SAMPLE_BYTES);
        for (int i = 1; i < n; i++) {
            unsigned char ch = out[i];
            if (ch == '\n') fputs("\n", stdout);
            else if (ch == '\t') fputs("    ", stdout);
            else if (ch == '\\') fputs("\\\\", stdout);
            else if (ch < 32 || ch >= 127) printf("\\x%02x", ch);
            else putchar(ch);
        }
        printf("\n---\n");
    }
    return ZERO_OK;
}

static void sum_tiers(const int64_t bytes[ZERO_TIER_NUM][ZERO_CAT_NUM], int64_t out[ZERO_TIER_NUM]) {
    for (int tr = 0; tr < ZERO_TIER_NUM; tr++) {
        out[tr] = 0;
        for (int k = 0; k < ZERO_CAT_NUM; k++) out[tr] += bytes[tr][k];
    }
}

// Per-rank plans of stages 0-3 for this model: this run's from zero_plan_get on its own
// context; the other stages' from zero_plan_get on a context that registers the same
// model (tiled head included) on rank 0 of a fresh local group and is never built.
static zero_result stage_plans(trainer *t) {
    const config *c = t->cfg;
    for (int s = 0; s <= 3; s++) {
        zero_plan p;
        if (s == c->stage) {
            ZCHECK(zero_plan_get(t->z, &p));
            t->sh->hpz_bytes = p.hpz_bytes;
            t->sh->zpp_buffer_bytes = p.zpp_buffer_bytes;
        } else {
            trainer tmp = *t;
            zero_group *g = NULL;
            zero_comm *comm = NULL;
            zero_desc d = zero_query_desc(t->z);
            zero_result r = zero_group_create(&g, c->ranks);
            // the same nodes as this run's group (ZeRO++ sizes its buffers by them)
            if (r >= 0 && c->ranks_per_node) r = zero_group_set_nodes(g, c->ranks_per_node);
            if (r >= 0) r = zero_comm_local(&comm, g, 0);
            d.comm = comm; d.stage = s; d.max_live_bytes = d.prefetch_bytes = 0;
            // params on NVMe are stage 3's only: the other stages' bars show them on the host
            if (s != 3 && d.offload_params == ZERO_OFFLOAD_NVME) d.offload_params = ZERO_OFFLOAD_HOST;
            // ZeRO++ as each stage allows it: qwz and hpz change stage 3's gathers, qgz the
            // reduce-scatter of stages 1-3 (zero_create refuses them elsewhere)
            if (s != 3) d.qwz = d.hpz = 0;
            if (s == 0) d.qgz = 0;
            if (s == 3) d.flat_layout = 0;      // (stage 3 has no flat views: refused there)
            tmp.z = NULL;
            tmp.block_mod = (zero_module *)calloc((size_t)t->L, sizeof(zero_module));
            tmp.bp = (zero_param *)calloc((size_t)t->L * NPARAM, sizeof(zero_param));
            tmp.act_in = (zero_act *)calloc((size_t)t->L, sizeof(zero_act));
            if (r >= 0 && (!tmp.block_mod || !tmp.bp || !tmp.act_in)) r = ZERO_ERR_OUT_OF_MEMORY;
            if (r >= 0) r = zero_create(&tmp.z, &d);
            if (r >= 0) r = register_model(&tmp);
            if (r >= 0) r = zero_plan_get(tmp.z, &p);
            if (r < 0) fprintf(stderr, "train_gpt: planning stage %d: %s\n", s, zero_last_error(tmp.z));
            zero_destroy(tmp.z);
            zero_comm_destroy(comm);
            zero_group_destroy(g);
            free(tmp.block_mod);
            free(tmp.bp);
            free(tmp.act_in);
            if (r < 0) return r;
        }
        memcpy(t->sh->plan_bytes[s], p.bytes, sizeof p.bytes);
    }
    t->sh->have_plans = 1;
    return ZERO_OK;
}

static void print_memory_table(const shared_state *sh, const config *c) {
    static const char *cat[ZERO_CAT_NUM] = { "params", "grads", "master", "optim", "buffers", "activations" };
    char b[32];
    printf("per-rank memory, %d ranks, %s params (the planner, zero_plan_get; * = this run, stage %d)\n",
           c->ranks, dtype_name(c->dtype), c->stage);
    printf("  stage ");
    for (int k = 0; k < ZERO_CAT_NUM; k++) printf("%12s", cat[k]);
    printf("%13s%12s%10s%10s\n", "model_state", "device", "host", "nvme");
    for (int s = 0; s <= 3; s++) {
        int64_t tiers[ZERO_TIER_NUM];
        sum_tiers(sh->plan_bytes[s], tiers);
        printf("  %s%d   ", s == c->stage ? "*" : " ", s);
        for (int k = 0; k < ZERO_CAT_NUM; k++) {
            int64_t v = 0;
            for (int tr = 0; tr < ZERO_TIER_NUM; tr++) v += sh->plan_bytes[s][tr][k];
            fmt_bytes(b, sizeof b, (double)v);
            printf("%12s", b);
        }
        int64_t ms = 0;
        for (int tr = 0; tr < ZERO_TIER_NUM; tr++)
            for (int k = 0; k < ZERO_CAT_BUFFERS; k++) ms += sh->plan_bytes[s][tr][k];
        fmt_bytes(b, sizeof b, (double)ms); printf("%13s", b);
        fmt_bytes(b, sizeof b, (double)tiers[ZERO_TIER_DEVICE]); printf("%12s", b);
        fmt_bytes(b, sizeof b, (double)tiers[ZERO_TIER_HOST]); printf("%10s", b);
        fmt_bytes(b, sizeof b, (double)tiers[ZERO_TIER_NVME]); printf("%10s\n", b);
    }
    fmt_bytes(b, sizeof b, (double)sh->own_act_bytes);
    printf("  activations: the stash (zero_act_*) above%s; train_gpt's own buffers for them, outside the plan: %s\n",
           c->ckpt ? "" : " (none: run with --checkpoint-activations)", b);
    if (c->qwz || c->qgz || c->hpz) {   // this run's ZeRO++ share of the params and buffers columns
        char q[32];
        fmt_bytes(b, sizeof b, (double)sh->hpz_bytes);
        fmt_bytes(q, sizeof q, (double)sh->zpp_buffer_bytes);
        printf("  ZeRO++: hpz secondary partition %s (in params), quantized payload buffers %s (in buffers)\n", b, q);
    }
}

static int write_svg(const char *path, const shared_state *sh);

// ----------------------------------------------------------------------------
// checkpoints: zero.h's state plus this trainer's own, in the checkpoint's records

typedef struct {                 // the record "train_gpt.data": where the data and sampling streams are
    int64_t next_step;           // steps taken (applied or skipped): the next step's data position
    int64_t batch;               // sequences per step (a resumed run must keep it: the positions depend on it)
    uint64_t seed;               // the data, init and sampling streams' seed
} data_record;

static zero_result save_checkpoint(trainer *t, int64_t next_step) {
    const config *c = t->cfg;
    data_record dr = { next_step, c->batch, t->seed };
    char args[256];
    int n = snprintf(args, sizeof args, "layers=%d dim=%d heads=%d seq=%d batch=%d accum=%d dtype=%s untie=%d",
                     c->layers, c->dim, c->heads, c->seq, c->batch, c->accum, dtype_name(c->dtype), c->untie);
    ZCHECK(zero_ckpt_put(t->z, "train_gpt.data", &dr, sizeof dr));
    ZCHECK(zero_ckpt_put(t->z, "train_gpt.args", args, n));      // for people: zero_ckpt info shows it
    zero_result r = zero_save(t->z, c->save_ckpt);
    if (r < 0) {
        fprintf(stderr, "train_gpt: rank %d: --save-ckpt %s: %s\n", t->rank, c->save_ckpt, zero_last_error(t->z));
        return r;
    }
    if (t->rank == 0 && !c->quiet) printf("saved %s after step %lld\n", c->save_ckpt, (long long)next_step);
    return ZERO_OK;
}

// --load-ckpt: the params, optimizer and step count, then the data position and seed
static zero_result load_checkpoint(trainer *t) {
    const config *c = t->cfg;
    data_record dr;
    zero_stats st;
    zero_result r = zero_load(t->z, c->load_ckpt);
    if (r < 0) {
        fprintf(stderr, "train_gpt: rank %d: --load-ckpt %s: %s\n", t->rank, c->load_ckpt, zero_last_error(t->z));
        return r;
    }
    ZCHECK(zero_stats_get(t->z, &st));
    t->step0 = st.steps + st.skipped_steps;     // zero.h's data position, for a checkpoint of another trainer
    if ((r = zero_ckpt_get(t->z, "train_gpt.data", &dr, sizeof dr, NULL)) == ZERO_OK) {
        if (dr.batch != c->batch) {
            fprintf(stderr, "train_gpt: --load-ckpt %s was saved with --batch %lld; resume with the same batch\n",
                    c->load_ckpt, (long long)dr.batch);
            return ZERO_ERR_MISMATCH;
        }
        t->step0 = dr.next_step;
        t->seed = dr.seed;
    } else if (r != ZERO_ERR_NOT_FOUND) {
        return r;
    }
    if (t->rank == 0 && !c->quiet)
        printf("loaded %s: resuming at step %lld (seed %llu)\n", c->load_ckpt, (long long)t->step0,
               (unsigned long long)t->seed);
    return ZERO_OK;
}

static zero_result train(trainer *t) {
    const config *c = t->cfg;
    int rank = t->rank, tty = rank == 0 && isatty(fileno(stdout));
    int BT = t->per * t->T;
    double t0 = now_s(), loss = 0.0;
    float grad_scale = zero_loss_scale(t->z) / (float)BT;
    for (int step = 0; step < c->steps; step++) {
        double loss_sum = 0.0;
        int64_t gstep = t->step0 + step;        // the data position: the same in a resumed run
        zero_trace_begin(t->z, "step");
        for (int a = 0; a < c->accum; a++) {
            load_batch(t, gstep, a);
            grad_scale = zero_loss_scale(t->z) / (float)BT;
            if (gstep == c->skip_step && a == 0 && rank == 0) grad_scale = NAN;   // every gradient NaN: skipped
            zero_result r = forward(t, t->per, t->T, t->targets, grad_scale, 0, &loss_sum);
            if (r >= 0) r = backward(t, t->per, t->T);
            if (r < 0) return r;
        }
        zero_trace_begin(t->z, "zero_step");
        zero_result r = zero_step(t->z);
        zero_trace_end(t->z);
        if (r != ZERO_STEP_SKIPPED) ZCHECK(r);
        ZCHECK(zero_allreduce_f64(t->z, &loss_sum, 1));
        zero_trace_end(t->z);
        loss = loss_sum / ((double)c->batch * t->T);
        if (c->save_ckpt && ((c->ckpt_every && (step + 1) % c->ckpt_every == 0) || step == c->steps - 1))
            ZCHECK(save_checkpoint(t, gstep + 1));
        if (rank == 0) {
            t->sh->losses[step] = (float)loss;
            if (!c->quiet) {
                zero_stats st;
                int64_t tiers[ZERO_TIER_NUM];
                char dv[16], hs[16], nv[16], gb[16];
                ZCHECK(zero_stats_get(t->z, &st));
                sum_tiers((const int64_t (*)[ZERO_CAT_NUM])st.bytes, tiers);
                fmt_bytes(dv, sizeof dv, (double)tiers[ZERO_TIER_DEVICE]);
                fmt_bytes(hs, sizeof hs, (double)tiers[ZERO_TIER_HOST]);
                fmt_bytes(nv, sizeof nv, (double)tiers[ZERO_TIER_NVME]);
                fmt_bytes(gb, sizeof gb, (double)st.peak_gathered_bytes);
                double el = now_s() - t0;
                printf("%sstep %4d/%d  loss %.4f  tok/s %7.0f  %5.1fs  mem/rank device %s host %s nvme %s (peak gathered %s)%s",
                       tty ? "\r" : "", step + 1, c->steps, loss, (double)(step + 1) * c->batch * t->T / el, el,
                       dv, hs, nv, gb, tty ? "   " : "\n");
                fflush(stdout);
            }
        }
    }
    double secs = now_s() - t0;
    // the training's prefetch figures, before sampling (whose forward-only passes fetch in
    // another order than the recorded schedule, on demand, and would count as misses)
    zero_stats st_train;
    ZCHECK(zero_stats_get(t->z, &st_train));
    if (rank == 0 && tty && !c->quiet) printf("\n");
    if (rank == 0) t->sh->seconds = secs;
    if (c->trace) {
        zero_result r = zero_trace_save(t->z, c->trace);
        if (r < 0) { fprintf(stderr, "train_gpt: --trace %s: %s\n", c->trace, zero_last_error(t->z)); return r; }
    }
    // a digest of the trained params' bits (zero_gather_params_f32 is collective): equal
    // digests are bitwise-equal models, whatever the stage or the offload tier
    uint64_t phash = 14695981039346656037ull;
    {
        int64_t n = zero_num_params(t->z);
        float *all = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        zero_result r = all && n > 0 ? zero_gather_params_f32(t->z, all) : ZERO_ERR_OUT_OF_MEMORY;
        if (r < 0) { fprintf(stderr, "train_gpt: rank %d: zero_gather_params_f32: %s\n", rank, zero_last_error(t->z)); free(all); return r; }
        const unsigned char *b = (const unsigned char *)all;
        for (int64_t i = 0; i < n * 4; i++) phash = (phash ^ b[i]) * 1099511628211ull;
        free(all);
    }
    ZCHECK(sample_text(t));
    if (rank == 0) {
        zero_stats st;
        ZCHECK(stage_plans(t));
        if (!c->quiet) print_memory_table(t->sh, c);
        if (c->plot) {
            if (!write_svg(c->plot, t->sh)) { fprintf(stderr, "train_gpt: cannot write --plot %s\n", c->plot); return ZERO_ERR_IO; }
            if (!c->quiet) printf("wrote %s\n", c->plot);
        }
        if (c->trace && !c->quiet) printf("wrote %s (open it at https://ui.perfetto.dev or chrome://tracing)\n", c->trace);
        ZCHECK(zero_stats_get(t->z, &st));
        int64_t fetches = st_train.prefetch_hits + st_train.prefetch_misses;
        // the final loss: the mean of the last (up to) 10 steps' losses, each over only 2048
        // bytes by default, so one lucky or unlucky batch does not decide it
        int nlast = c->steps < 10 ? c->steps : 10;
        double smooth = 0.0;
        for (int i = c->steps - nlast; i < c->steps; i++) smooth += t->sh->losses[i];
        smooth /= nlast;
        if (c->ckpt) {   // the stash's planned bytes by tier, and how well its read-ahead did after the first step
            static const char *tn[] = { "none", "host", "nvme" };
            int64_t ah = st_train.act_hits + st_train.act_misses;
            printf("activations checkpoint=1 offload=%s stash_device_bytes=%lld stash_host_bytes=%lld "
                   "stash_nvme_bytes=%lld own_bytes=%lld act_hit_rate=%.4f act_hits=%lld act_misses=%lld "
                   "act_wait_ms=%.1f act_bytes_written=%lld act_bytes_read=%lld\n", tn[c->offload_acts],
                   (long long)st.bytes[ZERO_TIER_DEVICE][ZERO_CAT_ACTIVATIONS],
                   (long long)st.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS],
                   (long long)st.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS], (long long)t->sh->own_act_bytes,
                   ah ? (double)st_train.act_hits / (double)ah : 0.0, (long long)st_train.act_hits,
                   (long long)st_train.act_misses, st_train.act_wait_ms, (long long)st_train.act_bytes_written,
                   (long long)st_train.act_bytes_read);
        }
        if (c->speculative && !c->quiet)    // how many speculated steps stood, and the time the step left exposed
            printf("speculative steps_kept=%lld undone_clip=%lld undone_skip=%lld undone_changed=%lld saved_bytes=%lld "
                   "exposed_step_ms=%.1f\n", (long long)st.speculative_steps, (long long)st.speculative_undone_clip,
                   (long long)st.speculative_undone_skip, (long long)st.speculative_undone_changed,
                   (long long)st.speculative_saved_bytes, st.exposed_step_ms);
        printf("final loss=%.6f tokens_per_s=%.1f model_state_bytes_per_rank=%lld params=%lld first_loss=%.4f "
               "last_step_loss=%.4f stage=%d ranks=%d dtype=%s steps=%d seconds=%.1f prefetch_hit_rate=%.4f "
               "peak_gathered_bytes=%lld params_hash=%016llx tied=%d bytes_within=%lld bytes_across=%lld\n",
               smooth, (double)c->steps * c->batch * t->T / secs, (long long)st.model_state_bytes,
               (long long)zero_num_params(t->z), (double)t->sh->losses[0], loss, c->stage, c->ranks, dtype_name(c->dtype),
               c->steps, secs, fetches ? (double)st_train.prefetch_hits / (double)fetches : 0.0,
               (long long)st_train.peak_gathered_bytes, (unsigned long long)phash, !c->untie,
               (long long)st_train.comm_bytes_within, (long long)st_train.comm_bytes_across);
        fflush(stdout);
    }
    return ZERO_OK;
}

static void *alloc_f32(int64_t n, int *ok) {
    void *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!p) *ok = 0;
    return p;
}

static void trainer_free(trainer *t) {
    if (t->acts)
        for (int l = 0; l < (t->cfg->ckpt ? 1 : t->L); l++) {
            block_acts *a = &t->acts[l];
            float *ps[] = { a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->att, a->atty, a->res2, a->ln2,
                            a->ln2_mean, a->ln2_rstd, a->fch, a->fch_th, a->fch_gelu };
            for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
        }
    free(t->acts); free(t->block_mod); free(t->bp); free(t->w); free(t->g); free(t->resid); free(t->act_in); free(t->xin);
    free(t->lnf); free(t->lnf_mean); free(t->lnf_rstd); free(t->logits);
    free(t->dres); free(t->dtmp); free(t->dqkv); free(t->d4c); free(t->datt_row); free(t->wt); free(t->doutT); free(t->dbias);
    free(t->tokens); free(t->targets);
    zero_destroy(t->z);
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    shared_state *sh = (shared_state *)user;
    const config *c = &sh->cfg;
    trainer tr;
    memset(&tr, 0, sizeof tr);
    trainer *t = &tr;
    t->cfg = c; t->sh = sh; t->rank = rank;
    t->per = c->batch / (c->ranks * c->accum);
    t->L = c->layers; t->C = c->dim; t->NH = c->heads; t->T = c->seq;

    zero_desc d = {0};
    if (c->deepspeed) {
        d = c->ds;                  // the config's optimizer, clipping, loss scaling, buckets, prefetch...
    } else {
        d.optim.type = c->optim;
        d.optim.lr = c->lr;
        d.optim.weight_decay = 0.0;
        d.optim.muon.lr = c->muon_lr;
        if (c->optim == ZERO_OPTIM_SGD) d.optim.momentum = 0.9;
        d.clip_norm = c->clip;
        d.qwz = c->qwz;
        d.speculative_step = c->speculative;
        d.qgz = c->qgz;
        d.hpz = c->hpz;
    }
    d.comm = comm;
    d.stage = c->stage;             // (with --deepspeed: the config's, copied into c by read_deepspeed)
    d.param_dtype = c->dtype;
    d.accum_steps = c->accum;
    d.flat_layout = c->flat_layout;
    d.optim.state_dtype = c->state_dtype;
    d.offload_optimizer = c->offload_optimizer;
    d.offload_params = c->offload_params;
    d.offload.nvme_dirs[0] = c->nvme_dir ? c->nvme_dir : getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    d.offload.buffer_bytes = c->offload_buffer_mb << 20;
    d.offload_activations = c->offload_acts;
    d.quant_block = c->quant_block;
    zero_result r = zero_create(&t->z, &d);
    if (r < 0) {
        fprintf(stderr, "train_gpt: rank %d: zero_create failed: %s\n", rank, zero_last_error(NULL));
        return r;
    }
    int ok = 1, C = t->C, L = t->L;
    int64_t BT = (int64_t)t->per * t->T, maxw = (int64_t)12 * C * C + 13 * C;
    if ((int64_t)(VOCAB + t->T) * C > maxw) maxw = (int64_t)(VOCAB + t->T) * C;
    if ((int64_t)(VOCAB + 2) * C > maxw) maxw = (int64_t)(VOCAB + 2) * C;     // lnf and the tied head
    int64_t wide = 4 * C > VOCAB ? 4 * C : VOCAB;                          // matmul scratch width
    t->block_mod = (zero_module *)calloc((size_t)L, sizeof(zero_module));
    t->bp = (zero_param *)calloc((size_t)L * NPARAM, sizeof(zero_param));
    int nacts = c->ckpt ? 1 : L;     // sets of block activations: one, recomputed, when checkpointing
    t->acts = (block_acts *)calloc((size_t)nacts, sizeof(block_acts));
    t->act_in = (zero_act *)calloc((size_t)L, sizeof(zero_act));
    t->tokens = (int *)calloc((size_t)BT, sizeof(int));
    t->targets = (int *)calloc((size_t)BT, sizeof(int));
    if (!t->block_mod || !t->bp || !t->acts || !t->act_in || !t->tokens || !t->targets) ok = 0;
    t->w = (float *)alloc_f32(maxw, &ok);
    t->g = (float *)alloc_f32(maxw, &ok);
    t->resid = (float *)alloc_f32((c->ckpt ? 2 : L + 1) * BT * C, &ok);
    if (c->ckpt) t->xin = (float *)alloc_f32(BT * C, &ok);
    for (int l = 0; ok && l < nacts; l++) {
        block_acts *a = &t->acts[l];
        a->ln1 = (float *)alloc_f32(BT * C, &ok); a->ln1_mean = (float *)alloc_f32(BT, &ok);
        a->ln1_rstd = (float *)alloc_f32(BT, &ok); a->qkv = (float *)alloc_f32(BT * 3 * C, &ok);
        a->att = (float *)alloc_f32((int64_t)t->per * t->NH * t->T * t->T, &ok);
        a->atty = (float *)alloc_f32(BT * C, &ok); a->res2 = (float *)alloc_f32(BT * C, &ok);
        a->ln2 = (float *)alloc_f32(BT * C, &ok); a->ln2_mean = (float *)alloc_f32(BT, &ok);
        a->ln2_rstd = (float *)alloc_f32(BT, &ok); a->fch = (float *)alloc_f32(BT * 4 * C, &ok);
        a->fch_th = (float *)alloc_f32(BT * 4 * C, &ok); a->fch_gelu = (float *)alloc_f32(BT * 4 * C, &ok);
    }
    t->lnf = (float *)alloc_f32(BT * C, &ok);
    t->lnf_mean = (float *)alloc_f32(BT, &ok);
    t->lnf_rstd = (float *)alloc_f32(BT, &ok);
    t->logits = (float *)alloc_f32(BT * VOCAB, &ok);
    t->dres = (float *)alloc_f32(BT * C, &ok);
    t->dtmp = (float *)alloc_f32(BT * C, &ok);
    t->dqkv = (float *)alloc_f32(BT * 3 * C, &ok);
    t->d4c = (float *)alloc_f32(BT * 4 * C, &ok);
    t->datt_row = (float *)alloc_f32(t->T, &ok);
    t->wt = (float *)alloc_f32(wide * C, &ok);
    t->doutT = (float *)alloc_f32(BT * wide, &ok);
    t->dbias = (float *)alloc_f32(VOCAB, &ok);
    // the activations this file keeps for the backward pass (outside zero.h's plan)
    int64_t per_block = BT * (7 * C + 3 * 4 * C + 4) + (int64_t)t->per * t->NH * t->T * t->T;
    if (rank == 0) sh->own_act_bytes = 4 * (nacts * per_block + (c->ckpt ? 3 : L + 1) * BT * C);
    if (!ok) {
        fprintf(stderr, "train_gpt: rank %d: out of memory\n", rank);
        trainer_free(t);
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    t->seed = c->seed;
    r = build_model(t);
    if (r >= 0 && c->load_ckpt) r = load_checkpoint(t);
    if (r >= 0) r = train(t);
    trainer_free(t);
    return r < 0 ? r : ZERO_OK;
}

// ----------------------------------------------------------------------------
// pictures: an SVG with the loss curve and the per-rank memory of stages 0-3

static int write_svg(const char *path, const shared_state *sh) {
    static const char *cat[ZERO_CAT_NUM] = { "params", "grads", "master", "optimizer", "buffers", "activations" };
    static const char *color[ZERO_CAT_NUM] = { "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#9c755f", "#b07aa1" };
    static const char *tier[ZERO_TIER_NUM] = { "device", "host", "nvme" };
    static const double opacity[ZERO_TIER_NUM] = { 1.0, 0.55, 0.25 };
    const config *c = &sh->cfg;
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    const int W = 960, H = 420;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    fprintf(f, "<text x=\"20\" y=\"24\" font-size=\"15\">train_gpt: stage %d, %d ranks, %s, %d layers, dim %d, "
               "seq %d, batch %d</text>\n", c->stage, c->ranks, dtype_name(c->dtype), c->layers, c->dim, c->seq, c->batch);

    // loss curve: x = step, y = nats per byte from 0 to max(ln 256, max loss)
    double x0 = 60, y0 = 50, pw = 420, ph = 300, ymax = 5.6;
    for (int i = 0; i < c->steps; i++) if (sh->losses[i] > ymax && sh->losses[i] < 1e6) ymax = sh->losses[i];
    fprintf(f, "<text x=\"%g\" y=\"%g\">training loss (nats per byte)</text>\n", x0, y0 - 8);
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n", x0, y0, pw, ph);
    for (int k = 0; k <= (int)ymax; k++) {
        double y = y0 + ph - ph * k / ymax;
        fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#eee\"/>"
                   "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", x0, y, x0 + pw, y, x0 - 6, y + 4, k);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step (1..%d)</text>\n", x0 + pw / 2, y0 + ph + 20, c->steps);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < c->steps; i++) {
        double v = sh->losses[i] < ymax ? sh->losses[i] : ymax;
        fprintf(f, "%.1f,%.1f ", x0 + (c->steps > 1 ? pw * i / (c->steps - 1) : 0), y0 + ph - ph * v / ymax);
    }
    fprintf(f, "\"/>\n");
    double y25 = y0 + ph - ph * 2.5 / ymax;
    fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#e15759\" stroke-dasharray=\"4 3\"/>"
               "<text x=\"%g\" y=\"%.1f\" fill=\"#e15759\" text-anchor=\"end\">2.5</text>\n",
            x0, y25, x0 + pw, y25, x0 + pw - 4, y25 - 4);

    // stacked bars: per-rank bytes of stages 0-3, by category (color) and tier (opacity)
    double bx = 560, bw = 60, gap = 24, by = y0, bh = ph, maxb = 1;
    for (int s = 0; s <= 3; s++) {
        double tot = 0;
        for (int tr = 0; tr < ZERO_TIER_NUM; tr++)
            for (int k = 0; k < ZERO_CAT_NUM; k++) tot += (double)sh->plan_bytes[s][tr][k];
        if (tot > maxb) maxb = tot;
    }
    maxb *= 1.08;   // room above the tallest bar for its label, below the title
    fprintf(f, "<text x=\"%g\" y=\"%g\">per-rank memory by stage (%d ranks, planner), MB</text>\n", bx, by - 8, c->ranks);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#888\"/>\n", bx - 10, by + bh, bx + 4 * (bw + gap), by + bh);
    for (int s = 0; s <= 3; s++) {
        double x = bx + s * (bw + gap), y = by + bh, tot = 0;
        for (int tr = 0; tr < ZERO_TIER_NUM; tr++)
            for (int k = 0; k < ZERO_CAT_NUM; k++) {
                double v = (double)sh->plan_bytes[s][tr][k];
                if (v <= 0) continue;
                double hgt = bh * v / maxb;
                y -= hgt;
                tot += v;
                fprintf(f, "<rect x=\"%g\" y=\"%.2f\" width=\"%g\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"%.2f\" "
                           "stroke=\"white\" stroke-width=\"0.5\"><title>stage %d %s %s: %.0f bytes</title></rect>\n",
                        x, y, bw, hgt, color[k], opacity[tr], s, tier[tr], cat[k], v);
            }
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"middle\">%.2f</text>\n", x + bw / 2, y - 4, tot / 1048576.0);
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\"%s>stage %d</text>\n", x + bw / 2, by + bh + 16,
                s == c->stage ? " font-weight=\"bold\"" : "", s);
    }
    for (int k = 0; k < ZERO_CAT_NUM; k++) {
        double lx = bx + (k % 3) * 110, ly = by + bh + 40 + (k / 3) * 18;
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                lx, ly - 10, color[k], lx + 16, ly, cat[k]);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"#555\">tiers: device solid, host lighter, nvme lightest</text>\n",
            bx, by + bh + 80);
    fprintf(f, "</svg>\n");
    int okw = !ferror(f);
    if (fclose(f) != 0) okw = 0;
    return okw;
}

// ----------------------------------------------------------------------------
// command line and data

static void usage(FILE *f) {
    fprintf(f,
        "usage: train_gpt [options]        (the defaults are what `make run` does)\n"
        "  --data FILE        train on FILE's bytes (default: zero.h, next to the executable's ../ or in .)\n"
        "  --stage S          ZeRO stage 0..3 (default 3)\n"
        "  --ranks N          data-parallel ranks, as threads (default 4)\n"
        "  --steps K          optimizer steps (default 600)\n"
        "  --dtype T          parameter dtype: f32, bf16 or f16 (default bf16)\n"
        "  --accum A          micro-batches per step (default 1)\n"
        "  --layers L         transformer blocks (default 4)\n"
        "  --dim C            channels (default 48)\n"
        "  --heads H          attention heads; divides --dim (default 4)\n"
        "  --seq T            sequence length in bytes (default 64)\n"
        "  --batch B          sequences per step, all ranks; a multiple of ranks*accum (default 32,\n"
        "                     rounded up to one)\n"
        "  --optim O          adamw, lion, sgd (with momentum 0.9) or muon (Muon on the blocks' matrices,\n"
        "                     AdamW on the rest) (default adamw)\n"
        "  --lr LR            learning rate (default: adamw 3e-3, lion 1e-3, sgd 0.1; muon: the AdamW part's 3e-3)\n"
        "  --clip C           clip the global gradient norm to C (default 1; 0: no clipping)\n"
        "  --muon-lr LR       --optim muon: Muon's learning rate (default 0.02)\n"
        "  --seed S           seed for data positions, init and sampling (default 1)\n"
        "  --plot FILE.svg    write the loss curve and per-stage memory bars as SVG; none: off (default gpt.svg)\n"
        "  --trace FILE.json  write a Chrome/Perfetto trace (ui.perfetto.dev, chrome://tracing); none: off\n"
        "                     (default gpt_trace.json)\n"
        "  --untie            give the output layer its own weights (default: tied to the token embedding)\n"
        "  --quiet            print only the final line\n"
        "  --optim-state-dtype T  f32, bf16 or q8: the optimizer moments' format (default f32; ON OPTIMIZER STATES)\n"
        "  --offload-optimizer T  none, cpu or nvme: where the fp32 master and moments live (default none)\n"
        "  --offload-params T     none, cpu or nvme (nvme: stage 3 with --offload-optimizer nvme)\n"
        "  --nvme-dir DIR         the NVMe tier's directory (default $TMPDIR or /tmp)\n"
        "  --offload-buffer-mb M  the NVMe tier's three block buffers together, MiB (default 64): a block\n"
        "                         is a third; smaller blocks let --speculative-step start sooner\n"
        "  --checkpoint-activations  keep only each block's input for the backward pass (in zero.h's stash),\n"
        "                         and recompute the block there (the same bits)\n"
        "  --offload-activations T   none, host or nvme: where the stash keeps those inputs (implies\n"
        "                         --checkpoint-activations; default none: in memory)\n"
        "  --speculative-step each module's optimizer step as soon as its gradient is reduced, undone\n"
        "                     exactly when the step clips or skips (CPU device, any tier)\n"
        "  --qwz              ZeRO++ (stage 3): gather int8 block-quantized params\n"
        "  --qgz              ZeRO++ (stages 1-3): reduce gradients in int8 payloads, within each node\n"
        "                     first, then across nodes (--qgz-bits 4: int4)\n"
        "  --qgz-bits B       8 or 4: qgz's payload bits (implies --qgz; default 8)\n"
        "  --hpz N            ZeRO++ (stage 3): N ranks per node keep a secondary partition of the\n"
        "                     params; gathers stay in the node (the local group's nodes are N ranks)\n"
        "  --ranks-per-node N the node topology without hpz (default: --hpz's N, else one node)\n"
        "  --quant-block B    elements per quantization block (default 256)\n"
        "  --link-gbps G      a modelled link of G GB/s within a node (default none)\n"
        "  --cross-gbps G     a modelled link of G GB/s across nodes (default: --link-gbps)\n"
        "  --save-ckpt DIR    save a checkpoint (zero_save, any stage and rank count) after the last step\n"
        "  --ckpt-every N     and after every N-th step of this run (with --save-ckpt)\n"
        "  --load-ckpt DIR    start from DIR: params, optimizer, step count, the data position and seed;\n"
        "                     --steps more steps then continue the saved run bit for bit\n"
        "  --flat-layout      the params (stages 0-1: and gradients) in one buffer in the flat order\n"
        "                     (desc.flat_layout; stages 0-2): the same bits, one more copy of each\n"
        "  --skip-step K      make step K (counted from the first run's start) overflow: zero_step\n"
        "                     skips it (to test that a resume keeps skipped steps' data)\n"
        "  --deepspeed FILE   take the zero_desc from a DeepSpeed config (ds_config.json): its stage,\n"
        "                     precision, optimizer, clipping, accumulation, offload and ZeRO++ keys\n"
        "                     replace the options above; each key not honoured is a line on stderr\n");
}

static unsigned char *read_file(const char *path, int64_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    int64_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *nb = (unsigned char *)realloc(buf, (size_t)cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, (size_t)(cap - n), f);
        n += (int64_t)got;
        if (got == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

// --deepspeed FILE: a DeepSpeed config (ds_config.json) read by zero_desc_from_json; its stage,
// dtype, accumulation, offload tiers and ZeRO++ options replace the command line's, and each
// key zero.h does not honour is one line on stderr. 0: the run cannot start (said why)
static int read_deepspeed(config *c) {
    int64_t len = 0;
    unsigned char *raw = read_file(c->deepspeed, &len);
    char report[8192];
    int n = 0;
    if (!raw) { fprintf(stderr, "train_gpt: --deepspeed %s: cannot read it\n", c->deepspeed); return 0; }
    c->ds_text = (char *)malloc((size_t)len + 1);
    if (!c->ds_text) { free(raw); return 0; }
    memcpy(c->ds_text, raw, (size_t)len);
    c->ds_text[len] = 0;
    free(raw);
    if (zero_desc_from_json(c->ds_text, &c->ds, report, sizeof report, &n) != ZERO_OK) {
        fprintf(stderr, "train_gpt: --deepspeed %s: %s\n", c->deepspeed, zero_last_error(NULL));
        return 0;
    }
    if (n) fprintf(stderr, "train_gpt: --deepspeed %s: %d key%s not honoured:\n%s", c->deepspeed, n, n == 1 ? "" : "s",
                   report);
    c->stage = c->ds.stage;
    c->dtype = c->ds.param_dtype ? c->ds.param_dtype : ZERO_BF16;     // (0: zero.h's default, bf16)
    if (c->ds.accum_steps) c->accum = c->ds.accum_steps;
    c->offload_optimizer = c->ds.offload_optimizer;
    c->offload_params = c->ds.offload_params;
    if (c->ds.offload_optimizer == ZERO_OFFLOAD_NVME) c->nvme_dir = c->ds.offload.nvme_dirs[0];
    c->qwz = c->ds.qwz;
    c->qgz = c->ds.qgz;
    c->hpz = c->ds.hpz;
    return 1;
}

int main(int argc, char **argv) {
    static shared_state sh;
    config *c = &sh.cfg;
    c->clip = 1.0f;
    c->stage = 3; c->ranks = 4; c->steps = 600; c->accum = 1; c->layers = 4; c->dim = 48; c->heads = 4;
    c->seq = 64; c->batch = 32; c->dtype = ZERO_BF16; c->optim = ZERO_OPTIM_ADAMW; c->seed = 1;
    c->plot = "gpt.svg"; c->trace = "gpt_trace.json"; c->skip_step = -1;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); return 0; }
        if (!strcmp(o, "--quiet")) { c->quiet = 1; continue; }
        if (!strcmp(o, "--untie")) { c->untie = 1; continue; }
        if (!strcmp(o, "--flat-layout")) { c->flat_layout = 1; continue; }
        if (!strcmp(o, "--checkpoint-activations")) { c->ckpt = 1; continue; }
        if (!strcmp(o, "--speculative-step")) { c->speculative = 1; continue; }
        if (!strcmp(o, "--qwz")) { c->qwz = 1; continue; }
        if (!strcmp(o, "--qgz")) { if (!c->qgz) c->qgz = 8; continue; }
        const char *v = option_value(argc, argv, &i);
        if (!strcmp(o, "--offload-optimizer")) c->offload_optimizer = parse_offload(o, v);
        else if (!strcmp(o, "--optim-state-dtype")) c->state_dtype = parse_state_dtype(o, v);
        else if (!strcmp(o, "--optim")) c->optim = parse_optim(o, v, 1);
        else if (!strcmp(o, "--offload-params")) c->offload_params = parse_offload(o, v);
        else if (!strcmp(o, "--offload-activations")) {
            c->offload_acts = parse_act_offload(o, v);
            c->ckpt = 1;    // the stash holds the checkpoints
        } else if (!strcmp(o, "--nvme-dir")) c->nvme_dir = v;
        else if (!strcmp(o, "--offload-buffer-mb")) c->offload_buffer_mb = parse_long(o, v, 1, 1 << 20);
        else if (!strcmp(o, "--stage")) c->stage = (int)parse_long(o, v, 0, 3);
        else if (!strcmp(o, "--ranks")) c->ranks = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--steps")) c->steps = (int)parse_long(o, v, 1, MAX_STEPS_KEPT);
        else if (!strcmp(o, "--accum")) c->accum = (int)parse_long(o, v, 1, 65536);
        else if (!strcmp(o, "--layers")) c->layers = (int)parse_long(o, v, 1, 64);
        else if (!strcmp(o, "--dim")) c->dim = (int)parse_long(o, v, 1, 4096);
        else if (!strcmp(o, "--heads")) c->heads = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--seq")) c->seq = (int)parse_long(o, v, 1, 4096);
        else if (!strcmp(o, "--batch")) { c->batch = (int)parse_long(o, v, 1, 1 << 20); c->batch_set = 1; }
        else if (!strcmp(o, "--lr")) c->lr = parse_float(o, v, 1e-12, 1e3);
        else if (!strcmp(o, "--clip")) c->clip = parse_float(o, v, 0.0, 1e30);
        else if (!strcmp(o, "--muon-lr")) c->muon_lr = parse_float(o, v, 1e-12, 1e3);
        else if (!strcmp(o, "--data")) c->data = v;
        else if (!strcmp(o, "--plot")) c->plot = strcmp(v, "none") ? v : NULL;
        else if (!strcmp(o, "--trace")) c->trace = strcmp(v, "none") ? v : NULL;
        else if (!strcmp(o, "--seed")) c->seed = parse_seed(o, v);
        else if (!strcmp(o, "--qgz-bits")) c->qgz = parse_qgz_bits(o, v);
        else if (!strcmp(o, "--hpz")) c->hpz = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--ranks-per-node")) c->ranks_per_node = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--quant-block")) c->quant_block = (int)parse_long(o, v, 1, 1 << 20);
        else if (!strcmp(o, "--link-gbps")) c->link_gbps = parse_float(o, v, 0.0, 1e6);
        else if (!strcmp(o, "--cross-gbps")) c->cross_gbps = parse_float(o, v, 0.0, 1e6);
        else if (!strcmp(o, "--dtype")) c->dtype = parse_dtype(o, v);
        else if (!strcmp(o, "--save-ckpt")) c->save_ckpt = v;
        else if (!strcmp(o, "--load-ckpt")) c->load_ckpt = v;
        else if (!strcmp(o, "--ckpt-every")) c->ckpt_every = (int)parse_long(o, v, 1, 1 << 30);
        else if (!strcmp(o, "--skip-step")) c->skip_step = parse_long(o, v, 0, (long long)1 << 40);
        else if (!strcmp(o, "--deepspeed")) c->deepspeed = v;
        else bad_arg("is not an option", o, NULL);
    }
    if (!c->batch_set && c->batch % (c->ranks * c->accum) != 0) {
        int k = c->ranks * c->accum, b = (c->batch + k - 1) / k * k;
        fprintf(stderr, "train_gpt: batch %d (the default %d rounded up to a multiple of --ranks * --accum = %d)\n", b,
                c->batch, k);
        c->batch = b;
    }
    if (c->batch % (c->ranks * c->accum) != 0) {
        fprintf(stderr, "train_gpt: --batch %d must be a multiple of --ranks * --accum = %d\n", c->batch, c->ranks * c->accum);
        return 2;
    }
    if (c->deepspeed && !read_deepspeed(c)) return 2;
    if (c->lr == 0.0f) c->lr = c->optim == ZERO_OPTIM_LION ? 1e-3f : c->optim == ZERO_OPTIM_SGD ? 0.1f : 3e-3f;
    if (c->muon_lr == 0.0f) c->muon_lr = 0.02f;
    if (c->ckpt_every && !c->save_ckpt) {
        fprintf(stderr, "train_gpt: --ckpt-every needs --save-ckpt DIR\n");
        return 2;
    }
    if (c->dim % c->heads != 0) {
        fprintf(stderr, "train_gpt: --dim %d must be a multiple of --heads %d\n", c->dim, c->heads);
        return 2;
    }
    if (c->hpz && c->ranks_per_node && c->hpz != c->ranks_per_node) {
        fprintf(stderr, "train_gpt: --hpz %d is the ranks per node, but --ranks-per-node is %d\n", c->hpz,
                c->ranks_per_node);
        return 2;
    }
    if (!c->ranks_per_node) c->ranks_per_node = c->hpz;
    if (c->ranks_per_node && c->ranks % c->ranks_per_node) {
        fprintf(stderr, "train_gpt: --%s %d must divide --ranks %d\n", c->hpz ? "hpz" : "ranks-per-node",
                c->ranks_per_node, c->ranks);
        return 2;
    }

    // the data: --data, else zero.h beside the executable (build/train_gpt -> ./zero.h) or in .
    unsigned char *text = NULL;
    const char *used = c->data;
    if (c->data) text = read_file(c->data, &sh.text_len);
    else {
        char path[4096];
        const char *slash = strrchr(argv[0], '/');
        int dn = slash ? (int)(slash - argv[0]) : 0;
        const char *cands[3] = { "../zero.h", "zero.h", NULL };
        for (int k = 0; k < 2 && !text; k++) {
            if (dn > 0) snprintf(path, sizeof path, "%.*s/%s", dn, argv[0], cands[k]);
            else snprintf(path, sizeof path, "%s", cands[k]);
            if ((text = read_file(path, &sh.text_len)) != NULL) used = k == 0 && dn > 0 ? "zero.h (beside the executable)" : "zero.h";
        }
        if (!text && (text = read_file("zero.h", &sh.text_len)) != NULL) used = "zero.h";
    }
    if (!text) {
        if (c->data) fprintf(stderr, "train_gpt: cannot read --data %s\n", c->data);
        else fprintf(stderr, "train_gpt: no --data given and zero.h was found neither beside the executable (../zero.h) "
                             "nor in the current directory; pass --data FILE\n");
        return 1;
    }
    if (sh.text_len < (int64_t)c->seq + 2) {
        fprintf(stderr, "train_gpt: the data (%lld bytes) must be longer than --seq %d + 1\n", (long long)sh.text_len, c->seq);
        free(text);
        return 1;
    }
    sh.text = text;
    sh.losses = (float *)calloc((size_t)c->steps, sizeof(float));
    if (!sh.losses) { fprintf(stderr, "train_gpt: out of memory\n"); free(text); return 1; }
    if (!c->quiet)
        printf("train_gpt: %s (%lld bytes), stage %d, %d ranks, %s, %d layers, dim %d, %d heads, seq %d, batch %d, "
               "%d steps, %s, lr %g\n", used, (long long)sh.text_len, c->stage, c->ranks, dtype_name(c->dtype), c->layers,
               c->dim, c->heads, c->seq, c->batch, c->steps, zero_optim_type_str(c->deepspeed ? c->ds.optim.type : c->optim),
               c->deepspeed ? (c->ds.optim.lr ? c->ds.optim.lr : 1e-3) : (double)c->lr);

    // the local group: ranks as threads, in nodes of --ranks-per-node, over modelled links if asked
    zero_group *g = NULL;
    zero_result r = zero_group_create(&g, c->ranks);
    if (r == ZERO_OK && c->ranks_per_node) r = zero_group_set_nodes(g, c->ranks_per_node);
    if (r == ZERO_OK && c->link_gbps > 0) r = zero_group_set_link(g, 0, c->link_gbps);
    if (r == ZERO_OK && c->cross_gbps > 0) r = zero_group_set_cross_link(g, 0, c->cross_gbps);
    if (r == ZERO_OK) r = zero_run_group(g, rank_main, &sh);
    zero_group_destroy(g);
    int rc = 0;
    if (r != ZERO_OK) {
        const char *msg = zero_last_error(NULL);
        fprintf(stderr, "train_gpt: failed: %s%s%s\n", zero_result_str(r), msg && *msg ? ": " : "", msg ? msg : "");
        rc = 1;
    }
    free(sh.losses);
    free(text);
    return rc;
}
