/*
train_mlp.c - a tiny data-parallel MLP trainer on zero.h, llm.c style.

The model is a stack of Linear layers (GELU between them; by default
64 -> 576 -> 576 -> 576 -> 576 -> 32, 1.05M params) that learns a synthetic 32-class
task: x ~ N(0, I) in 64 dimensions, label = argmax of a fixed random "teacher" net
C tanh(A x / 8), A: 8 x 64, C: 32 x 8. The cross-entropy starts near ln(32) = 3.47
and falls to ~1.2 in 100 steps, ~1.0 in 200 (the labels' own entropy is ~2.9: seen
through 8 teacher units some classes are rarer). Every sample is generated from
(seed, its index), so the data needs no files and the global batch of a step is the
same whatever the number of ranks or micro-batches.

zero.h owns the parameters, gradients and AdamW/SGD states (sharded by --stage);
this file owns the forward and backward math (plain f32 loops) and the data.

Build and run:
    gcc -std=c99 -O2 -Wall -Wextra -Werror -ffp-contract=off -pthread -I. \
        examples/train_mlp.c -o build/train_mlp -lm
    build/train_mlp --stage 3 --ranks 4 --dtype bf16

One rank per process instead (make builds it with mpicc when mpicc exists; rank 0 prints):
    mpicc -DZERO_MPI -std=c99 -O2 -ffp-contract=off -pthread -I. examples/train_mlp.c -o build/mpi/train_mlp -lm
    mpirun -np 4 build/mpi/train_mlp --comm mpi --stage 3
*/
#define _POSIX_C_SOURCE 200809L
#include <math.h>     // defines: sqrt, log, cos, sin (exp, log and tanh in float: zero_expf, ...,
                      // the same bits on every platform)
#include <stdint.h>   // defines: uint64_t, int64_t
#include <stdio.h>    // defines: printf, fprintf, fopen, fwrite, fclose
#include <stdlib.h>   // defines: malloc, calloc, free, getenv
#include <string.h>   // defines: strcmp, memcpy, memset
#define ZERO_IMPLEMENTATION
#include "../zero.h"  // defines: zero_create, zero_build, zero_fetch, zero_step, zero_run_local, ...
#define CLI_PROG "train_mlp"
#include "cli.h"     // defines: bad_arg, option_value, parse_long, parse_float, parse_seed, parse_dtype, ...

#define IN_DIM 64
#define NUM_CLASSES 32
#define TEACHER_HIDDEN 8   // the teacher sees x through 8 tanh units: a task 1M params learn in ~100 steps

// ----------------------------------------------------------------------------
// configuration

typedef struct {
    int stage, ranks, steps, accum, batch, hidden, layers, quiet;
    zero_dtype dtype, accum_dtype;
    zero_optim_type optim;
    float lr, clip, wd;
    uint64_t seed;
    const char *save_path;
    long long prefetch_bytes, max_live_bytes;   // stage 3 schedule (0: the library's default)
    int timeout_ms;                             // --timeout-ms: every collective's (0: the library's 120 s)
    const char *save_ckpt, *load_ckpt;          // checkpoint directories
    int comm_mpi, ranks_set;                    // --comm mpi: one rank per process (mpirun -np N)
    int batch_set;                              // --batch given (else the default rounds up to fit the ranks)
    zero_offload_tier offload_optimizer, offload_params;
    zero_state_dtype state_dtype;               // --optim-state-dtype: the moments' format
    const char *nvme_dir;                       // the NVMe tier's directory
    zero_device_type device;                    // --device: cpu (the f32 loops below) or cuda/emu (device path)
    int nonblocking_stream;                     // --nonblocking-stream: desc.cuda_stream (ZERO_CUDA builds)
    int qwz, qgz, hpz, quant_block;             // ZeRO++ (desc.qwz, desc.qgz bits, desc.hpz, desc.quant_block)
    int speculative;                  // --speculative-step: desc.speculative_step
    int ranks_per_node;                         // nodes of the local group (or zero_comm_set_nodes); 0: --hpz's
    float link_gbps, cross_gbps;                // the local group's modelled links (0: none)
} config;

typedef struct {
    float a[TEACHER_HIDDEN * IN_DIM];        // teacher layer 1, [TEACHER_HIDDEN][IN_DIM]
    float c[NUM_CLASSES * TEACHER_HIDDEN];   // teacher layer 2, [NUM_CLASSES][TEACHER_HIDDEN]
} teacher;

typedef struct {
    config cfg;
    teacher teach;
} shared_state;   // read-only once the ranks start

static const char *dtype_name(zero_dtype t) {
    return t == ZERO_F32 ? "f32" : t == ZERO_F16 ? "f16" : "bf16";
}

// ----------------------------------------------------------------------------
// deterministic random numbers (splitmix64): each sample and each layer init has its
// own stream, derived from (seed, index) by hashing, so nothing depends on the order
// in which ranks or threads draw them.

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t stream_seed(uint64_t seed, uint64_t kind, uint64_t index) {
    return mix64(mix64(seed * 0x9E3779B97F4A7C15ull + kind) ^ (index + 0x632BE59BD9B4E019ull));
}
static uint64_t next_u64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }
static double next_uniform(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); } // (0,1)
static void fill_normal(float *out, int n, uint64_t *s) {
    for (int i = 0; i < n; i += 2) {   // Box-Muller
        double r = sqrt(-2.0 * log(next_uniform(s))), t = 6.283185307179586 * next_uniform(s);
        out[i] = (float)(r * cos(t));
        if (i + 1 < n) out[i + 1] = (float)(r * sin(t));
    }
}
static void fill_uniform(float *out, int64_t n, float bound, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)((2.0 * next_uniform(s) - 1.0) * bound);
}

// ----------------------------------------------------------------------------
// the task

enum { STREAM_TEACHER = 1, STREAM_SAMPLE = 2, STREAM_INIT = 3 };

static void teacher_init(teacher *t, uint64_t seed) {
    uint64_t s = stream_seed(seed, STREAM_TEACHER, 0);
    fill_normal(t->a, TEACHER_HIDDEN * IN_DIM, &s);
    fill_normal(t->c, NUM_CLASSES * TEACHER_HIDDEN, &s);
}

// sample g of the whole run (g = step * batch + position in the global batch)
static int make_sample(float *x, const teacher *t, uint64_t seed, uint64_t g) {
    uint64_t s = stream_seed(seed, STREAM_SAMPLE, g);
    fill_normal(x, IN_DIM, &s);
    float h[TEACHER_HIDDEN];
    for (int j = 0; j < TEACHER_HIDDEN; j++) {
        float acc = 0.0f;
        for (int i = 0; i < IN_DIM; i++) acc += t->a[j * IN_DIM + i] * x[i];
        h[j] = zero_tanhf(acc * 0.125f);   // 0.125 = 1/sqrt(IN_DIM): pre-activations ~ N(0,1)
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < NUM_CLASSES; c++) {
        float acc = 0.0f;
        for (int j = 0; j < TEACHER_HIDDEN; j++) acc += t->c[c * TEACHER_HIDDEN + j] * h[j];
        if (acc > best_v) { best_v = acc; best = c; }
    }
    return best;
}

// ----------------------------------------------------------------------------
// f32 kernels. Every matmul is written as rows of axpy (y += a * x over a contiguous
// row), never as dot products: an axpy's lanes are independent, so the compiler can
// vectorize it without reassociating a sum (we build with -ffp-contract=off and no
// -ffast-math, and the results must not depend on the vector width). The fixed
// 8-wide inner loop lets gcc -O2 (whose cheap cost model skips loops that need a
// scalar epilogue) vectorize it too; four output rows share each load of x.

static void axpy4(float *restrict y0, float *restrict y1, float *restrict y2, float *restrict y3,
                  const float *restrict x, float a0, float a1, float a2, float a3, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++) {
            float v = x[i + k];
            y0[i + k] += a0 * v; y1[i + k] += a1 * v; y2[i + k] += a2 * v; y3[i + k] += a3 * v;
        }
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

// Y[r][:] += sum_k A[r][k] * X[k][:]   (Y: R x N, A: R x K (row stride lda), X: K x N)
// Each Y element sums over k in increasing order whatever R is, so a sample's result
// does not depend on how the batch was split across ranks.
static void gemm_acc(float *Y, const float *A, int lda, const float *X, int R, int K, int N) {
    int r = 0;
    for (; r + 4 <= R; r += 4) {
        const float *a = A + (int64_t)r * lda;
        float *y = Y + (int64_t)r * N;
        for (int k = 0; k < K; k++)
            axpy4(y, y + N, y + 2 * N, y + 3 * N, X + (int64_t)k * N,
                  a[k], a[lda + k], a[2 * lda + k], a[3 * lda + k], N);
    }
    for (; r < R; r++)
        for (int k = 0; k < K; k++) axpy1(Y + (int64_t)r * N, X + (int64_t)k * N, A[(int64_t)r * lda + k], N);
}

// out[b][o] = bias[o] + sum_i inp[b][i] * w[o][i], with wt = w transposed ([I][O])
static void linear_forward(float *out, const float *inp, const float *wt, const float *bias, int B, int I, int O) {
    for (int b = 0; b < B; b++) memcpy(out + (int64_t)b * O, bias, (size_t)O * sizeof(float));
    gemm_acc(out, inp, I, wt, B, I, O);
}

// dinp = dout . w (if dinp), dw = dout^T . inp, db = column sums of dout; all overwritten.
// dout^T is read with stride O: gemm_acc takes A's row stride, so we pass a transposed copy.
static void linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *doutT,
                            const float *inp, const float *w, int B, int I, int O) {
    if (dinp) {
        memset(dinp, 0, (size_t)B * I * sizeof(float));
        gemm_acc(dinp, dout, O, w, B, O, I);
    }
    memset(dw, 0, (size_t)O * I * sizeof(float));
    gemm_acc(dw, doutT, B, inp, O, B, I);
    for (int o = 0; o < O; o++) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++) acc += doutT[(int64_t)o * B + b];
        db[o] = acc;
    }
}

static void transpose(float *restrict dst, const float *restrict src, int rows, int cols) {
    enum { T = 16 };
    for (int r0 = 0; r0 < rows; r0 += T)
        for (int c0 = 0; c0 < cols; c0 += T)
            for (int r = r0; r < r0 + T && r < rows; r++)
                for (int c = c0; c < c0 + T && c < cols; c++)
                    dst[(int64_t)c * rows + r] = src[(int64_t)r * cols + c];
}

#define GELU_SCALE 0.7978845608028654f   // sqrt(2/pi)
// tanh is most of GELU's cost: the forward pass keeps it (th) for the backward pass
static void gelu_forward(float *out, float *th, const float *inp, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        th[i] = zero_tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        out[i] = 0.5f * x * (1.0f + th[i]);
    }
}
static void gelu_backward(float *dinp, const float *inp, const float *th, int64_t n) {   // dinp *= gelu'(inp)
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i], t = th[i], sech2 = 1.0f - t * t;
        dinp[i] *= 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    }
}

// Softmax cross-entropy over B rows; returns the summed loss and writes
// dlogits = grad_scale * (softmax - onehot).
static double crossentropy(float *dlogits, const float *logits, const int *labels, int B, int C, float grad_scale) {
    double loss = 0.0;
    for (int b = 0; b < B; b++) {
        const float *l = logits + (int64_t)b * C;
        float *d = dlogits + (int64_t)b * C;
        float mx = l[0];
        for (int c = 1; c < C; c++) mx = l[c] > mx ? l[c] : mx;
        float sum = 0.0f;
        for (int c = 0; c < C; c++) { d[c] = zero_expf(l[c] - mx); sum += d[c]; }
        loss += (double)(zero_logf(sum) - (l[labels[b]] - mx));
        float inv = 1.0f / sum;
        for (int c = 0; c < C; c++) d[c] = grad_scale * (d[c] * inv - (c == labels[b] ? 1.0f : 0.0f));
    }
    return loss;
}

// ----------------------------------------------------------------------------
// one rank

typedef struct {
    int in, out;
    zero_module mod;
    zero_param w, b;
    zero_tiled_linear tl;         // the device path: the layer as a one-tile linear
} linear;

typedef struct {
    const config *cfg;
    const teacher *teach;
    zero_ctx *z;
    void *stream;       // --nonblocking-stream: this rank's cudaStream_t (desc.cuda_stream)
    int rank, per;      // per: samples per micro-batch on this rank
    linear *lin;
    float *wf, *wt, *bf;          // f32 copies of the fetched layer: weight [O][I], its transpose, bias
    float *dw, *db;               // f32 gradients of the current layer
    float **act;                  // act[l]: input of layer l [per][in_l] (act[0]: the samples)
    float **pre;                  // pre[l]: layer l's output before GELU [per][out_l]; the last: logits
    float **th;                   // th[l]: the tanh inside GELU(pre[l])
    float *dcur, *dnext, *dcurT;  // gradient wrt the current layer's output, its input, transposed
    int *labels;
    // the device path (--device cuda|emu): the same tensors in the context's device memory
    float **dact, **dpre, *ddcur, *ddnext, *dloss, *hloss;
    int32_t *dlabels, *hlabels;
} trainer;

#define ZCHECK(call) do { zero_result r_ = (call); \
    if (r_ < 0) { fprintf(stderr, "train_mlp: rank %d: %s failed: %s\n", rank, #call, zero_last_error(t->z)); return r_; } } while (0)

static zero_result build_model(trainer *t) {
    const config *c = t->cfg;
    int rank = t->rank;
    char name[32];
    for (int l = 0; l < c->layers; l++) {
        linear *L = &t->lin[l];
        L->in = l == 0 ? IN_DIM : c->hidden;
        L->out = l == c->layers - 1 ? NUM_CLASSES : c->hidden;
        snprintf(name, sizeof name, "fc%d", l);
        if (c->device != ZERO_DEVICE_CPU) {   // modules "fcL.tile0", params "w", "b"
            zero_tiled_linear_desc td = {0};
            td.name = name; td.in_features = L->in; td.out_features = L->out; td.bias = 1; td.tiles = 1;
            ZCHECK(zero_tiled_linear_add(t->z, &td, &L->tl));
            continue;
        }
        zero_module_desc md = {0};
        md.name = name;
        ZCHECK(zero_add_module(t->z, &md, &L->mod));
        zero_param_desc wdesc = {0};
        wdesc.name = "weight"; wdesc.ndim = 2; wdesc.shape[0] = L->out; wdesc.shape[1] = L->in;
        ZCHECK(zero_add_param(t->z, L->mod, &wdesc, &L->w));
        zero_param_desc bd = {0};
        bd.name = "bias"; bd.ndim = 1; bd.shape[0] = L->out; bd.no_decay = 1;
        ZCHECK(zero_add_param(t->z, L->mod, &bd, &L->b));
    }
    ZCHECK(zero_build(t->z));
    // Kaiming-uniform from (seed, layer): U(-b, b), b = sqrt(6/fan_in) before a GELU (keeps
    // the activations' scale through the stack), 1/sqrt(fan_in) for the output layer and
    // all biases (so the first logits are small and the loss starts near ln(32)).
    // Every rank sets the same full values and keeps its own part.
    for (int l = 0; l < c->layers; l++) {
        linear *L = &t->lin[l];
        uint64_t s = stream_seed(c->seed, STREAM_INIT, (uint64_t)l);
        float bound = 1.0f / sqrtf((float)L->in);
        fill_uniform(t->wf, (int64_t)L->out * L->in, l < c->layers - 1 ? sqrtf(6.0f) * bound : bound, &s);
        fill_uniform(t->bf, L->out, bound, &s);
        if (c->device != ZERO_DEVICE_CPU) { ZCHECK(zero_tiled_linear_set_f32(t->z, L->tl, t->wf, t->bf)); continue; }
        ZCHECK(zero_param_set_f32(t->z, L->w, t->wf));
        ZCHECK(zero_param_set_f32(t->z, L->b, t->bf));
    }
    return ZERO_OK;
}

// Copies the fetched layer's params to f32 (wt transposed for the forward pass).
static zero_result load_layer(trainer *t, const linear *L, int transposed) {
    int rank = t->rank;
    const void *w = zero_param_data(t->z, L->w), *b = zero_param_data(t->z, L->b);
    if (!w || !b) {
        fprintf(stderr, "train_mlp: rank %d: zero_param_data failed: %s\n", rank, zero_last_error(t->z));
        return ZERO_ERR_STATE;
    }
    zero_to_f32(t->wf, w, t->cfg->dtype, (int64_t)L->out * L->in);
    zero_to_f32(t->bf, b, t->cfg->dtype, L->out);
    if (transposed) transpose(t->wt, t->wf, L->out, L->in);
    return ZERO_OK;
}

// One micro-batch: forward, loss, backward. Adds this rank's loss sum to *loss_sum.
static zero_result micro_step(trainer *t, int64_t first_sample, double *loss_sum) {
    const config *c = t->cfg;
    int rank = t->rank, per = t->per, nl = c->layers;
    for (int b = 0; b < per; b++)
        t->labels[b] = make_sample(t->act[0] + (int64_t)b * IN_DIM, t->teach, c->seed, (uint64_t)(first_sample + b));

    for (int l = 0; l < nl; l++) {
        const linear *L = &t->lin[l];
        ZCHECK(zero_fetch(t->z, L->mod));
        ZCHECK(load_layer(t, L, 1));
        linear_forward(t->pre[l], t->act[l], t->wt, t->bf, per, L->in, L->out);
        ZCHECK(zero_release(t->z, L->mod));
        if (l < nl - 1) gelu_forward(t->act[l + 1], t->th[l], t->pre[l], (int64_t)per * L->out);
    }

    // gradient of this rank's MEAN loss over its micro-batch, times the loss scale
    // (f16's dynamic scale keeps small gradients representable); zero_step divides
    // it out and averages over ranks and micro-batches.
    float grad_scale = zero_loss_scale(t->z) / (float)per;
    *loss_sum += crossentropy(t->dcur, t->pre[nl - 1], t->labels, per, NUM_CLASSES, grad_scale);

    for (int l = nl - 1; l >= 0; l--) {
        const linear *L = &t->lin[l];
        ZCHECK(zero_fetch(t->z, L->mod));
        ZCHECK(load_layer(t, L, 0));
        transpose(t->dcurT, t->dcur, per, L->out);
        linear_backward(l > 0 ? t->dnext : NULL, t->dw, t->db, t->dcur, t->dcurT, t->act[l], t->wf, per, L->in, L->out);
        void *gw = zero_param_grad(t->z, L->w), *gb = zero_param_grad(t->z, L->b);
        if (!gw || !gb) {
            fprintf(stderr, "train_mlp: rank %d: zero_param_grad failed: %s\n", rank, zero_last_error(t->z));
            return ZERO_ERR_STATE;
        }
        zero_add_f32(gw, c->dtype, t->dw, (int64_t)L->out * L->in);
        zero_add_f32(gb, c->dtype, t->db, L->out);
        ZCHECK(zero_release(t->z, L->mod));
        ZCHECK(zero_grads_ready(t->z, L->mod));
        if (l > 0) {
            gelu_backward(t->dnext, t->pre[l - 1], t->th[l - 1], (int64_t)per * L->in);
            float *tmp = t->dcur; t->dcur = t->dnext; t->dnext = tmp;
        }
    }
    return ZERO_OK;
}

// The device path (--device cuda, or emu to run it on the CPU): activations live in the
// context's device memory; each layer is a one-tile zero_tiled_linear (its GEMMs are
// cuBLAS on CUDA), GELU and the loss are zero.h's small device helpers; only the samples
// go up and the per-row losses come down.
static zero_result micro_step_device(trainer *t, int64_t first_sample, double *loss_sum) {
    const config *c = t->cfg;
    int rank = t->rank, per = t->per, nl = c->layers;
    for (int b = 0; b < per; b++)
        t->hlabels[b] = make_sample(t->act[0] + (int64_t)b * IN_DIM, t->teach, c->seed, (uint64_t)(first_sample + b));
    ZCHECK(zero_copy(t->z, t->dact[0], t->act[0], (int64_t)per * IN_DIM * (int64_t)sizeof(float)));
    ZCHECK(zero_copy(t->z, t->dlabels, t->hlabels, (int64_t)per * (int64_t)sizeof(int32_t)));
    for (int l = 0; l < nl; l++) {
        const linear *L = &t->lin[l];
        ZCHECK(zero_tiled_linear_forward(t->z, L->tl, t->dact[l], per, t->dpre[l]));
        if (l < nl - 1) ZCHECK(zero_gelu(t->z, t->dact[l + 1], t->dpre[l], (int64_t)per * L->out));
    }
    float grad_scale = zero_loss_scale(t->z) / (float)per;
    ZCHECK(zero_softmax_xent(t->z, t->dloss, t->ddcur, t->dpre[nl - 1], t->dlabels, per, NUM_CLASSES, grad_scale));
    ZCHECK(zero_copy(t->z, t->hloss, t->dloss, (int64_t)per * (int64_t)sizeof(float)));
    for (int b = 0; b < per; b++) *loss_sum += (double)t->hloss[b];
    for (int l = nl - 1; l >= 0; l--) {
        const linear *L = &t->lin[l];
        // adds dW, db into the layer's gradients and marks it ready; dx into ddnext
        ZCHECK(zero_tiled_linear_backward(t->z, L->tl, t->dact[l], t->ddcur, per, l > 0 ? t->ddnext : NULL));
        if (l > 0) {
            ZCHECK(zero_gelu_backward(t->z, t->ddnext, t->dpre[l - 1], t->ddnext, (int64_t)per * L->in));
            float *tmp = t->ddcur; t->ddcur = t->ddnext; t->ddnext = tmp;
        }
    }
    return ZERO_OK;
}

static zero_result save_params(trainer *t) {
    int rank = t->rank;
    int64_t n = zero_num_params(t->z);
    float *buf = (float *)malloc((size_t)n * sizeof(float));
    if (!buf) { fprintf(stderr, "train_mlp: rank %d: out of memory\n", rank); return ZERO_ERR_OUT_OF_MEMORY; }
    zero_result r = zero_gather_params_f32(t->z, buf);   // collective: every rank calls it
    if (r < 0) {
        fprintf(stderr, "train_mlp: rank %d: zero_gather_params_f32 failed: %s\n", rank, zero_last_error(t->z));
        free(buf);
        return r;
    }
    if (rank == 0) {
        FILE *f = fopen(t->cfg->save_path, "wb");
        int ok = f != NULL;
        for (int64_t i = 0; ok && i < n; i++) {   // raw little-endian float32 on any host
            uint32_t u;
            memcpy(&u, &buf[i], 4);
            unsigned char le[4] = { (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24) };
            ok = fwrite(le, 1, 4, f) == 4;
        }
        if (f && fclose(f) != 0) ok = 0;
        if (!ok) { fprintf(stderr, "train_mlp: cannot write %s\n", t->cfg->save_path); r = ZERO_ERR_IO; }
    }
    free(buf);
    return r;
}

static zero_result train(trainer *t) {
    const config *c = t->cfg;
    int rank = t->rank, skipped = 0, last_printed = 0;
    double t0 = now_s(), t_last = t0, loss = 0.0;
    // the data position is the number of steps taken before (applied or skipped), which a
    // checkpoint carries: a resumed run sees the batches the uninterrupted one would have
    zero_stats st0;
    ZCHECK(zero_stats_get(t->z, &st0));
    int64_t base = st0.steps + st0.skipped_steps;
    for (int step = 0; step < c->steps; step++) {
        double loss_sum = 0.0;
        for (int a = 0; a < c->accum; a++) {
            // this rank's slice of the step's global batch: the union over ranks and
            // micro-batches is samples [step*batch, (step+1)*batch) whatever ranks/accum are
            int64_t first = (base + step) * c->batch + (int64_t)(rank * c->accum + a) * t->per;
            zero_result r = t->cfg->device == ZERO_DEVICE_CPU ? micro_step(t, first, &loss_sum)
                                                              : micro_step_device(t, first, &loss_sum);
            if (r < 0) return r;
        }
        zero_result r = zero_step(t->z);
        if (r == ZERO_STEP_SKIPPED) skipped++;
        else ZCHECK(r);
        ZCHECK(zero_allreduce_f64(t->z, &loss_sum, 1));
        loss = loss_sum / c->batch;
        int print = step == 0 || (step + 1) % 10 == 0 || step == c->steps - 1;
        if (rank == 0 && !c->quiet && print) {
            zero_stats st;
            ZCHECK(zero_stats_get(t->z, &st));
            double tn = now_s();
            printf("step %d/%d loss %.4f grad_norm %.4f loss_scale %g skipped %d ms_per_step %.1f\n",
                   step + 1, c->steps, loss, st.grad_norm, st.loss_scale, skipped,
                   1e3 * (tn - t_last) / (step + 1 - last_printed));
            fflush(stdout);
            t_last = tn;
            last_printed = step + 1;
        }
    }
    double ms = 1e3 * (now_s() - t0) / c->steps;
    if (c->save_ckpt) {
        zero_result r = zero_save(t->z, c->save_ckpt);
        if (r < 0) { fprintf(stderr, "train_mlp: --save-ckpt: %s\n", zero_last_error(t->z)); return r; }
    }
    if (c->save_path) { zero_result r = save_params(t); if (r < 0) return r; }
    if (rank == 0) {
        zero_stats st;
        ZCHECK(zero_stats_get(t->z, &st));
        // hit rate: stage-3 fetches after the first step whose gather was issued ahead
        int64_t fetches = st.prefetch_hits + st.prefetch_misses;
        printf("final loss=%.6f model_state_bytes_per_rank=%lld params=%lld prefetch_hit_rate=%.4f "
               "peak_gathered_bytes=%lld stage=%d ranks=%d dtype=%s optim=%s accum=%d batch=%d steps=%d skipped=%d "
               "ms_per_step=%.1f fetch_wait_ms=%.1f bytes_within=%lld bytes_across=%lld\n",
               loss, (long long)st.model_state_bytes, (long long)zero_num_params(t->z),
               fetches ? (double)st.prefetch_hits / (double)fetches : 0.0, (long long)st.peak_gathered_bytes,
               c->stage, c->ranks, dtype_name(c->dtype), zero_optim_type_str(c->optim), c->accum,
               c->batch, c->steps, skipped, ms, st.fetch_wait_ms, (long long)st.comm_bytes_within,
               (long long)st.comm_bytes_across);
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
    int nl = t->cfg->layers;
    if (t->dact) for (int l = 0; l < nl; l++) zero_device_free(t->z, t->dact[l]);
    if (t->dpre) for (int l = 0; l < nl; l++) zero_device_free(t->z, t->dpre[l]);
    zero_device_free(t->z, t->ddcur); zero_device_free(t->z, t->ddnext);
    zero_device_free(t->z, t->dloss); zero_device_free(t->z, t->dlabels);
    free(t->dact); free(t->dpre); free(t->hloss); free(t->hlabels);
    if (t->act) for (int l = 0; l < nl; l++) free(t->act[l]);
    if (t->pre) for (int l = 0; l < nl; l++) free(t->pre[l]);
    if (t->th) for (int l = 0; l < nl; l++) free(t->th[l]);
    free(t->act); free(t->pre); free(t->th); free(t->lin);
    free(t->wf); free(t->wt); free(t->bf); free(t->dw); free(t->db);
    free(t->dcur); free(t->dnext); free(t->dcurT); free(t->labels);
    zero_destroy(t->z);
#ifdef ZERO_CUDA
    if (t->stream) cudaStreamDestroy((cudaStream_t)t->stream);
#endif
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    const shared_state *sh = (const shared_state *)user;
    const config *c = &sh->cfg;
    trainer tr;
    memset(&tr, 0, sizeof tr);
    trainer *t = &tr;
    t->cfg = c; t->teach = &sh->teach; t->rank = rank;
    t->per = c->batch / (c->ranks * c->accum);

    zero_desc d = {0};
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = c->dtype;
    d.accum_steps = c->accum;
    d.grad_accum_dtype = c->accum_dtype;
    d.clip_norm = c->clip;
    d.prefetch_bytes = c->prefetch_bytes;
    d.max_live_bytes = c->max_live_bytes;
    d.timeout_ms = c->timeout_ms;
    d.optim.type = c->optim;
    d.optim.lr = c->lr;
    d.optim.weight_decay = c->wd;
    if (c->optim == ZERO_OPTIM_SGD) d.optim.momentum = 0.9f;
    d.optim.state_dtype = c->state_dtype;
    d.offload_optimizer = c->offload_optimizer;
    d.offload_params = c->offload_params;
    d.offload.nvme_dirs[0] = c->nvme_dir;
    d.device = c->device;
    d.qwz = c->qwz;
    d.speculative_step = c->speculative;
    d.qgz = c->qgz;
    d.hpz = c->hpz;
    d.quant_block = c->quant_block;
#ifdef ZERO_CUDA
    // the caller's stream: one that does not wait for the legacy default stream, so the
    // context must order its work on it by itself
    if (c->nonblocking_stream) {
        cudaStream_t s = NULL;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
            fprintf(stderr, "train_mlp: rank %d: cudaStreamCreateWithFlags: %s\n", rank,
                    cudaGetErrorString(cudaGetLastError()));
            return ZERO_ERR_DEVICE;
        }
        t->stream = s;
        d.cuda_stream = s;
    }
#endif
    zero_result r = zero_create(&t->z, &d);
    if (r < 0) {
        fprintf(stderr, "train_mlp: rank %d: zero_create failed: %s\n", rank, zero_last_error(NULL));
        return r;
    }

    int nl = c->layers, ok = 1;
    int64_t maxd = c->hidden > IN_DIM ? c->hidden : IN_DIM;
    if (NUM_CLASSES > maxd) maxd = NUM_CLASSES;
    t->lin = (linear *)calloc((size_t)nl, sizeof(linear));
    t->act = (float **)calloc((size_t)nl, sizeof(float *));
    t->pre = (float **)calloc((size_t)nl, sizeof(float *));
    t->th = (float **)calloc((size_t)nl, sizeof(float *));
    t->labels = (int *)calloc((size_t)t->per, sizeof(int));
    if (!t->lin || !t->act || !t->pre || !t->th || !t->labels) ok = 0;
    for (int l = 0; ok && l < nl; l++) {
        int64_t in = l == 0 ? IN_DIM : c->hidden, out = l == nl - 1 ? NUM_CLASSES : c->hidden;
        t->act[l] = (float *)alloc_f32(t->per * in, &ok);
        t->pre[l] = (float *)alloc_f32(t->per * out, &ok);
        t->th[l] = (float *)alloc_f32(t->per * out, &ok);
    }
    t->wf = (float *)alloc_f32(maxd * maxd, &ok);
    t->wt = (float *)alloc_f32(maxd * maxd, &ok);
    t->dw = (float *)alloc_f32(maxd * maxd, &ok);
    t->bf = (float *)alloc_f32(maxd, &ok);
    t->db = (float *)alloc_f32(maxd, &ok);
    t->dcur = (float *)alloc_f32(t->per * maxd, &ok);
    t->dnext = (float *)alloc_f32(t->per * maxd, &ok);
    t->dcurT = (float *)alloc_f32(t->per * maxd, &ok);
    if (ok && c->device != ZERO_DEVICE_CPU) {   // device memory for the device path
        t->dact = (float **)calloc((size_t)nl, sizeof(float *));
        t->dpre = (float **)calloc((size_t)nl, sizeof(float *));
        t->hloss = (float *)alloc_f32(t->per, &ok);
        t->hlabels = (int32_t *)calloc((size_t)t->per, sizeof(int32_t));
        if (!t->dact || !t->dpre || !t->hlabels) ok = 0;
        for (int l = 0; ok && l < nl; l++) {
            int64_t in = l == 0 ? IN_DIM : c->hidden, out = l == nl - 1 ? NUM_CLASSES : c->hidden;
            if (!(t->dact[l] = (float *)zero_device_alloc(t->z, t->per * in * 4))) ok = 0;
            if (!(t->dpre[l] = (float *)zero_device_alloc(t->z, t->per * out * 4))) ok = 0;
        }
        if (ok && (!(t->ddcur = (float *)zero_device_alloc(t->z, t->per * maxd * 4)) ||
                   !(t->ddnext = (float *)zero_device_alloc(t->z, t->per * maxd * 4)) ||
                   !(t->dloss = (float *)zero_device_alloc(t->z, t->per * 4)) ||
                   !(t->dlabels = (int32_t *)zero_device_alloc(t->z, t->per * 4))))
            ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "train_mlp: rank %d: out of memory\n", rank);
        trainer_free(t);
        return ZERO_ERR_OUT_OF_MEMORY;
    }

    r = build_model(t);
    if (r >= 0 && c->load_ckpt && (r = zero_load(t->z, c->load_ckpt)) < 0)
        fprintf(stderr, "train_mlp: rank %d: --load-ckpt: %s\n", rank, zero_last_error(t->z));
    if (r >= 0) r = train(t);
    trainer_free(t);
    return r < 0 ? r : ZERO_OK;
}

// ----------------------------------------------------------------------------
// command line

static void usage(FILE *f) {
    fprintf(f,
        "usage: train_mlp [options]\n"
        "  --stage S          ZeRO stage 0..3 (default 0)\n"
        "  --ranks N          data-parallel ranks, as threads (default 1)\n"
        "  --steps K          optimizer steps (default 100)\n"
        "  --dtype T          parameter dtype: f32, bf16 or f16 (default bf16)\n"
        "  --accum A          micro-batches per step (default 1)\n"
        "  --accum-dtype T    dtype the gradients accumulate in: f32 or grad (the param dtype; default)\n"
        "  --optim-state-dtype f32|bf16|q8    the optimizer moments' format (default f32; ON OPTIMIZER STATES)\n"
        "  --offload-optimizer none|cpu|nvme  master weights and moments: in place, host memory or files (default none)\n"
        "  --offload-params none|cpu|nvme     params likewise (nvme: stage 3 with --offload-optimizer nvme) (default none)\n"
        "  --nvme-dir DIR     directory of the nvme tier's files (default $TMPDIR or /tmp)\n"
        "  --save-ckpt DIR    after training, save a sharded checkpoint (zero_save) into DIR\n"
        "  --load-ckpt DIR    before training, load DIR (any stage/ranks); --steps K then means K more\n"
        "  --prefetch-bytes B stage 3: gather up to B bytes ahead of use; -1 = off (default: max-live-bytes)\n"
        "  --max-live-bytes B stage 3: bytes of prefetched/kept modules (default: the largest module)\n"
        "  --timeout-ms T     every collective's timeout: a rank that has not arrived after T ms is\n"
        "                     named and the call fails (default 120000)\n"
        "  --batch B          global batch per step; a multiple of ranks*accum (default 64,\n"
        "                     rounded up to one)\n"
        "  --hidden H         hidden width (default 576)\n"
        "  --layers L         Linear layers, L >= 1 (default 5: 64 -> H -> H -> H -> H -> 32)\n"
        "  --optim O          adamw, lion or sgd (sgd: momentum 0.9) (default adamw)\n"
        "  --device D         cpu: the f32 loops of this file (default); cuda: the GPU (a CUDA build,\n"
        "                     make CUDA=1: build/cuda/train_mlp), activations in device memory, each\n"
        "                     layer a one-tile zero_tiled_linear (cuBLAS), zero.h's GELU/loss kernels;\n"
        "                     emu: that device path on the CPU (checkpoints differ from --device cpu's:\n"
        "                     modules fcL.tile0 with params w, b)\n"
        "  --nonblocking-stream  --device cuda: each rank's work on its own cudaStreamNonBlocking\n"
        "                     stream (desc.cuda_stream) instead of the legacy default stream\n"
        "  --comm C           local: --ranks threads in this process (default); mpi: one rank per\n"
        "                     process, started by mpirun -np N (a ZERO_MPI build: build/mpi/train_mlp)\n"
        "  --speculative-step each module's optimizer step as soon as its gradient is reduced, undone\n"
        "                     exactly when the step clips or skips (CPU device, any tier)\n"
        "  --qwz              ZeRO++ (stage 3): gather int8 block-quantized params\n"
        "  --qgz              ZeRO++ (stages 1-3): reduce gradients in int8 payloads, within each node\n"
        "                     first, then across nodes (--qgz-bits 4: int4)\n"
        "  --hpz N            ZeRO++ (stage 3): N ranks per node keep a secondary partition of the\n"
        "                     params; gathers stay in the node (the local group's nodes are N ranks)\n"
        "  --ranks-per-node N the node topology without hpz (default: --hpz's N, else one node)\n"
        "  --quant-block B    elements per quantization block (default 256)\n"
        "  --link-gbps G      local comm: a modelled link of G GB/s within a node (default none)\n"
        "  --cross-gbps G     local comm: a modelled link of G GB/s across nodes (default: --link-gbps)\n"
        "  --lr LR            learning rate (default 1e-3 adamw, 1e-4 lion, 2e-2 sgd)\n"
        "  --wd WD            weight decay on weights, not biases (default 0)\n"
        "  --clip C           global gradient-norm clip, 0 = off (default 0)\n"
        "  --seed S           seed for data, teacher and init (default 1)\n"
        "  --save-params FILE after training, write all params as raw little-endian f32\n"
        "  --quiet            print only the final line\n");
}

int main(int argc, char **argv) {
    static shared_state sh;   // static: the teacher lives as long as the ranks
    config *c = &sh.cfg;
    c->stage = 0; c->ranks = 1; c->steps = 100; c->accum = 1; c->batch = 64;
    c->hidden = 576; c->layers = 5; c->quiet = 0;
    c->dtype = ZERO_BF16; c->accum_dtype = ZERO_DTYPE_DEFAULT; c->optim = ZERO_OPTIM_ADAMW;
    c->lr = -1.0f; c->clip = 0.0f; c->wd = 0.0f; c->seed = 1; c->save_path = NULL; c->device = ZERO_DEVICE_CPU;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); return 0; }
        if (!strcmp(o, "--quiet")) { c->quiet = 1; continue; }
        if (!strcmp(o, "--speculative-step")) { c->speculative = 1; continue; }
        if (!strcmp(o, "--qwz")) { c->qwz = 1; continue; }
        if (!strcmp(o, "--qgz")) { if (!c->qgz) c->qgz = 8; continue; }
        if (!strcmp(o, "--nonblocking-stream")) {
#ifdef ZERO_CUDA
            c->nonblocking_stream = 1;
            continue;
#else
            bad_arg("needs a CUDA build (make CUDA=1: build/cuda/train_mlp)", o, NULL);
#endif
        }
        const char *v = option_value(argc, argv, &i);
        if (!strcmp(o, "--stage")) c->stage = (int)parse_long(o, v, 0, 3);
        else if (!strcmp(o, "--ranks")) { c->ranks = (int)parse_long(o, v, 1, 256); c->ranks_set = 1; }
        else if (!strcmp(o, "--steps")) c->steps = (int)parse_long(o, v, 1, 100000000);
        else if (!strcmp(o, "--accum")) c->accum = (int)parse_long(o, v, 1, 65536);
        else if (!strcmp(o, "--batch")) { c->batch = (int)parse_long(o, v, 1, 1 << 20); c->batch_set = 1; }
        else if (!strcmp(o, "--hidden")) c->hidden = (int)parse_long(o, v, 1, 16384);
        else if (!strcmp(o, "--layers")) c->layers = (int)parse_long(o, v, 1, 1000);
        else if (!strcmp(o, "--lr")) c->lr = parse_float(o, v, 1e-12, 1e3);
        else if (!strcmp(o, "--clip")) c->clip = parse_float(o, v, 0.0, 1e30);
        else if (!strcmp(o, "--wd")) c->wd = parse_float(o, v, 0.0, 1e3);
        else if (!strcmp(o, "--save-params")) c->save_path = v;
        else if (!strcmp(o, "--save-ckpt")) c->save_ckpt = v;
        else if (!strcmp(o, "--load-ckpt")) c->load_ckpt = v;
        else if (!strcmp(o, "--prefetch-bytes")) c->prefetch_bytes = parse_long(o, v, -1, (long long)1 << 50);
        else if (!strcmp(o, "--timeout-ms")) c->timeout_ms = (int)parse_long(o, v, 1, 86400000);
        else if (!strcmp(o, "--max-live-bytes")) c->max_live_bytes = parse_long(o, v, 0, (long long)1 << 50);
        else if (!strcmp(o, "--seed")) c->seed = parse_seed(o, v);
        else if (!strcmp(o, "--qgz-bits")) c->qgz = parse_qgz_bits(o, v);
        else if (!strcmp(o, "--hpz")) c->hpz = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--ranks-per-node")) c->ranks_per_node = (int)parse_long(o, v, 1, 256);
        else if (!strcmp(o, "--quant-block")) c->quant_block = (int)parse_long(o, v, 1, 1 << 20);
        else if (!strcmp(o, "--link-gbps")) c->link_gbps = parse_float(o, v, 0.0, 1e6);
        else if (!strcmp(o, "--cross-gbps")) c->cross_gbps = parse_float(o, v, 0.0, 1e6);
        else if (!strcmp(o, "--dtype")) c->dtype = parse_dtype(o, v);
        else if (!strcmp(o, "--accum-dtype")) {
            if (!strcmp(v, "f32")) c->accum_dtype = ZERO_F32;
            else if (!strcmp(v, "grad")) c->accum_dtype = ZERO_DTYPE_DEFAULT;
            else bad_arg("expects f32 or grad", o, v);
        } else if (!strcmp(o, "--offload-optimizer")) c->offload_optimizer = parse_offload(o, v);
        else if (!strcmp(o, "--optim-state-dtype")) c->state_dtype = parse_state_dtype(o, v);
        else if (!strcmp(o, "--offload-params")) c->offload_params = parse_offload(o, v);
        else if (!strcmp(o, "--nvme-dir")) {
            c->nvme_dir = v;
        } else if (!strcmp(o, "--optim")) {
            c->optim = parse_optim(o, v, 0);
        } else if (!strcmp(o, "--device")) {
            if (!strcmp(v, "cpu")) c->device = ZERO_DEVICE_CPU;
            else if (!strcmp(v, "cuda")) c->device = ZERO_DEVICE_CUDA;
            else if (!strcmp(v, "emu")) c->device = ZERO_DEVICE_EMU;
            else bad_arg("expects cpu, cuda or emu", o, v);
        } else if (!strcmp(o, "--comm")) {
            if (!strcmp(v, "local")) c->comm_mpi = 0;
            else if (!strcmp(v, "mpi")) c->comm_mpi = 1;
            else bad_arg("expects local or mpi", o, v);
        } else bad_arg("is not an option", o, NULL);
    }
    // --comm mpi: this process is one rank of the world the launcher started
    zero_comm *comm = NULL;
    if (c->comm_mpi) {
        zero_result r = zero_comm_from_env(&comm, "mpi");
        if (r != ZERO_OK) {
            fprintf(stderr, "train_mlp: --comm mpi: %s\n", zero_last_error(NULL));
            return 1;
        }
        if (c->ranks_set && c->ranks != zero_comm_size(comm)) {
            fprintf(stderr, "train_mlp: --ranks %d but mpirun started %d processes (leave --ranks out with --comm mpi)\n",
                    c->ranks, zero_comm_size(comm));
            zero_comm_destroy(comm);
            return 2;
        }
        c->ranks = zero_comm_size(comm);
    }
    if (!c->batch_set && c->batch % (c->ranks * c->accum) != 0) {     /* the default fits any --ranks */
        int k = c->ranks * c->accum, b = (c->batch + k - 1) / k * k;
        fprintf(stderr, "train_mlp: batch %d (the default %d rounded up to a multiple of --ranks * --accum = %d)\n", b,
                c->batch, k);
        c->batch = b;
    }
    if (c->batch % (c->ranks * c->accum) != 0) {
        fprintf(stderr, "train_mlp: --batch %d must be a multiple of --ranks * --accum = %d\n",
                c->batch, c->ranks * c->accum);
        usage(stderr);
        zero_comm_destroy(comm);
        return 2;
    }
    if (c->nonblocking_stream && c->device != ZERO_DEVICE_CUDA) {
        fprintf(stderr, "train_mlp: --nonblocking-stream needs --device cuda\n");
        zero_comm_destroy(comm);
        return 2;
    }
    if (!c->ranks_per_node) c->ranks_per_node = c->hpz;
    if (c->ranks_per_node && c->ranks % c->ranks_per_node) {
        fprintf(stderr, "train_mlp: --%s %d must divide --ranks %d\n", c->hpz ? "hpz" : "ranks-per-node",
                c->ranks_per_node, c->ranks);
        zero_comm_destroy(comm);
        return 2;
    }
    if (comm && c->ranks_per_node && zero_comm_set_nodes(comm, c->ranks_per_node) != ZERO_OK) {
        fprintf(stderr, "train_mlp: %s\n", zero_last_error(NULL));
        zero_comm_destroy(comm);
        return 2;
    }
    if (c->lr < 0.0f) c->lr = c->optim == ZERO_OPTIM_SGD ? 2e-2f : c->optim == ZERO_OPTIM_LION ? 1e-4f : 1e-3f;
    if (!c->nvme_dir) c->nvme_dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    teacher_init(&sh.teach, c->seed);
    zero_result r;
    if (comm) {
        // every process trains its own rank; a failed rank says which and why (rank_main
        // printed it), and the endpoint is not finalized after a failed collective
        int rank = zero_comm_rank(comm);
        r = rank_main(comm, rank, &sh);
        zero_comm_destroy(comm);
        if (r != ZERO_OK) {
            fprintf(stderr, "train_mlp: rank %d failed: %s\n", rank, zero_result_str(r));
            return 1;
        }
        return 0;
    }
    // the local group: ranks as threads, grouped into nodes, over modelled links if asked
    zero_group *g = NULL;
    r = zero_group_create(&g, c->ranks);
    if (r == ZERO_OK && c->ranks_per_node) r = zero_group_set_nodes(g, c->ranks_per_node);
    if (r == ZERO_OK && c->link_gbps > 0) r = zero_group_set_link(g, 0, c->link_gbps);
    if (r == ZERO_OK && c->cross_gbps > 0) r = zero_group_set_cross_link(g, 0, c->cross_gbps);
    if (r == ZERO_OK) r = zero_run_group(g, rank_main, &sh);
    zero_group_destroy(g);
    if (r != ZERO_OK) {
        const char *msg = zero_last_error(NULL);
        fprintf(stderr, "train_mlp: failed: %s%s%s\n", zero_result_str(r), msg && *msg ? ": " : "", msg ? msg : "");
        return 1;
    }
    return 0;
}
