/* examples/train_tiny.c - the program to copy: a two-layer MLP trained with zero.h, every
   stage, ranks as threads, a checkpoint that resumes the data, offload by a flag, the loss
   averaged over the ranks. About 200 lines; examples/train_mlp.c and train_gpt.c do more.

       build/train_tiny                                  stage 3, 2 ranks, 100 steps
       build/train_tiny --stage 1 --ranks 4 --offload cpu
       build/train_tiny --steps 50 --save ck && build/train_tiny --steps 50 --load ck

   The task: y = teacher(x) for a fixed random linear teacher, x drawn from (seed, sample
   index), so sample i is the same whatever the ranks. Each step takes BATCH samples; rank r
   of N takes its contiguous share. The last line is "final loss=... params_hash=..."
   (equal hashes: the same bits; every stage gives the same at one rank count). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 16, HID = 64, OUT = 8, BATCH = 32 };

typedef struct {
    int stage, ranks, steps;
    zero_offload_tier offload;
    const char *save, *load;
} options;

/* sample i: its input (values in [-1, 1) from a hash of i) and the teacher's output */
static void sample(int64_t i, float *x, float *y) {
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    for (int k = 0; k < IN; k++) {
        s ^= s >> 31; s *= 0xbf58476d1ce4e5b9ull; s ^= s >> 29;
        x[k] = (float)(s >> 40) / (float)(1 << 23) - 1.0f;
    }
    for (int o = 0; o < OUT; o++) {
        y[o] = 0.0f;
        for (int k = 0; k < IN; k++) y[o] += x[k] * (float)(((o * 7 + k * 3) % 11) - 5) * 0.1f;
    }
}

typedef struct {
    zero_ctx *z;
    zero_module l1, l2;
    zero_param w1, b1, w2, b2;
} model;

static zero_result build(model *m, zero_comm *comm, const options *o) {
    zero_desc d = {0};
    d.comm = comm;
    d.stage = o->stage;
    d.param_dtype = ZERO_F32;
    d.optim.lr = 1e-2;
    d.offload_optimizer = o->offload;
    zero_result r = zero_create(&m->z, &d);
    if (r != ZERO_OK) return r;
    zero_module_desc md = {0};
    zero_param_desc pd = {0};
    md.name = "l1"; if ((r = zero_add_module(m->z, &md, &m->l1)) != ZERO_OK) return r;
    md.name = "l2"; if ((r = zero_add_module(m->z, &md, &m->l2)) != ZERO_OK) return r;
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = HID; pd.shape[1] = IN;
    if ((r = zero_add_param(m->z, m->l1, &pd, &m->w1)) != ZERO_OK) return r;
    pd.name = "b"; pd.ndim = 1; pd.shape[0] = HID;
    if ((r = zero_add_param(m->z, m->l1, &pd, &m->b1)) != ZERO_OK) return r;
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = OUT; pd.shape[1] = HID;
    if ((r = zero_add_param(m->z, m->l2, &pd, &m->w2)) != ZERO_OK) return r;
    pd.name = "b"; pd.ndim = 1; pd.shape[0] = OUT;
    if ((r = zero_add_param(m->z, m->l2, &pd, &m->b2)) != ZERO_OK) return r;
    if ((r = zero_build(m->z)) != ZERO_OK) return r;
    float init[HID * IN];                   /* the same small values on every rank */
    for (int i = 0; i < HID * IN; i++) init[i] = 0.2f * sinf(0.37f * (float)i);
    if ((r = zero_param_set_f32(m->z, m->w1, init)) != ZERO_OK) return r;
    if ((r = zero_param_set_f32(m->z, m->w2, init)) != ZERO_OK) return r;
    memset(init, 0, sizeof init);
    if ((r = zero_param_set_f32(m->z, m->b1, init)) != ZERO_OK) return r;
    return zero_param_set_f32(m->z, m->b2, init);
}

/* one micro-batch of n samples (x[n][IN], y[n][OUT]): the forward pass module by module,
   then the backward pass in reverse, each module's gradients ADDED while it is fetched and
   handed over (zero_grads_ready) before the next module's; adds the squared errors to *loss */
static zero_result micro_batch(model *m, int n, const float *x, const float *y, float *h, double *loss) {
    float dout[OUT], dh[HID];
    zero_result r;
    if ((r = zero_fetch(m->z, m->l1)) != ZERO_OK) return r;        /* stage 3: all-gathered */
    const float *w1 = (const float *)zero_param_data(m->z, m->w1), *b1 = (const float *)zero_param_data(m->z, m->b1);
    for (int s = 0; s < n; s++)
        for (int j = 0; j < HID; j++) {
            float a = b1[j];
            for (int k = 0; k < IN; k++) a += w1[j * IN + k] * x[s * IN + k];
            h[s * HID + j] = zero_tanhf(a);
        }
    if ((r = zero_release(m->z, m->l1)) != ZERO_OK) return r;
    if ((r = zero_fetch(m->z, m->l2)) != ZERO_OK) return r;       /* layer 2: forward and backward */
    const float *w2 = (const float *)zero_param_data(m->z, m->w2), *b2 = (const float *)zero_param_data(m->z, m->b2);
    float *gw2 = (float *)zero_param_grad(m->z, m->w2), *gb2 = (float *)zero_param_grad(m->z, m->b2);
    float *dhs = h + (size_t)n * HID;                               /* dL/dh of every sample, after h */
    for (int s = 0; s < n; s++) {
        const float *hs = h + s * HID;
        for (int o = 0; o < OUT; o++) {
            float out = b2[o];
            for (int j = 0; j < HID; j++) out += w2[o * HID + j] * hs[j];
            dout[o] = (out - y[s * OUT + o]) * 2.0f / (float)n;   /* this rank's mean (zero.h averages the ranks) */
            *loss += (double)((out - y[s * OUT + o]) * (out - y[s * OUT + o]));
            gb2[o] += dout[o];
            for (int j = 0; j < HID; j++) gw2[o * HID + j] += dout[o] * hs[j];
        }
        for (int j = 0; j < HID; j++) {
            dh[j] = 0.0f;
            for (int o = 0; o < OUT; o++) dh[j] += w2[o * HID + j] * dout[o];
            dhs[s * HID + j] = dh[j] * (1.0f - hs[j] * hs[j]);
        }
    }
    if ((r = zero_release(m->z, m->l2)) != ZERO_OK) return r;
    if ((r = zero_grads_ready(m->z, m->l2)) != ZERO_OK) return r;  /* its reduction starts now */
    if ((r = zero_fetch(m->z, m->l1)) != ZERO_OK) return r;
    float *gw1 = (float *)zero_param_grad(m->z, m->w1), *gb1 = (float *)zero_param_grad(m->z, m->b1);
    for (int s = 0; s < n; s++)
        for (int j = 0; j < HID; j++) {
            gb1[j] += dhs[s * HID + j];
            for (int k = 0; k < IN; k++) gw1[j * IN + k] += dhs[s * HID + j] * x[s * IN + k];
        }
    if ((r = zero_release(m->z, m->l1)) != ZERO_OK) return r;
    return zero_grads_ready(m->z, m->l1);
}

static zero_result train(zero_comm *comm, int rank, void *user) {
    const options *o = (const options *)user;
    model m = {0};
    int64_t next = 0;                        /* the data position: the next step's first sample */
    zero_result r = build(&m, comm, o);
    if (r == ZERO_OK && o->load && (r = zero_load(m.z, o->load)) == ZERO_OK)
        r = zero_ckpt_get(m.z, "tiny.next_sample", &next, sizeof next, NULL);   /* saved by --save below */
    int per = BATCH / o->ranks;
    double loss = 0.0;
    float x[BATCH * IN], y[BATCH * OUT], h[2 * BATCH * HID];
    for (int step = 0; r == ZERO_OK && step < o->steps; step++, next += BATCH) {
        double sum = 0.0;
        for (int i = 0; i < per; i++) sample(next + (int64_t)rank * per + i, x + i * IN, y + i * OUT);
        r = micro_batch(&m, per, x, y, h, &sum);
        if (r == ZERO_OK) r = zero_step(m.z);                  /* reductions done, AdamW, gathers */
        if (r == ZERO_STEP_SKIPPED) r = ZERO_OK;
        if (r == ZERO_OK) r = zero_allreduce_f64(m.z, &sum, 1);  /* every rank's loss summed */
        loss = sum / BATCH;
        if (r == ZERO_OK && rank == 0 && (step + 1) % 20 == 0) printf("step %d loss %.5f\n", step + 1, loss);
    }
    if (r == ZERO_OK && o->save && (r = zero_ckpt_put(m.z, "tiny.next_sample", &next, sizeof next)) == ZERO_OK)
        r = zero_save(m.z, o->save);
    float all[HID * IN + HID + OUT * HID + OUT];
    if (r == ZERO_OK) r = zero_gather_params_f32_root(m.z, 0, rank == 0 ? all : NULL);
    if (r == ZERO_OK && rank == 0) {
        zero_stats st;
        uint64_t hash = 14695981039346656037ull;
        const unsigned char *b = (const unsigned char *)all;
        for (size_t i = 0; i < sizeof all; i++) hash = (hash ^ b[i]) * 1099511628211ull;
        zero_stats_get(m.z, &st);
        printf("final loss=%.6f stage=%d ranks=%d steps=%lld model_state_bytes_per_rank=%lld params_hash=%016llx\n", loss,
               o->stage, o->ranks, (long long)st.steps, (long long)st.model_state_bytes, (unsigned long long)hash);
    }
    zero_destroy(m.z);
    return r;
}

int main(int argc, char **argv) {
    options o = { 3, 2, 100, ZERO_OFFLOAD_NONE, NULL, NULL };
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--stage")) o.stage = atoi(v);
        else if (!strcmp(k, "--ranks")) o.ranks = atoi(v);
        else if (!strcmp(k, "--steps")) o.steps = atoi(v);
        else if (!strcmp(k, "--offload")) o.offload = !strcmp(v, "cpu") ? ZERO_OFFLOAD_HOST : ZERO_OFFLOAD_NONE;
        else if (!strcmp(k, "--save")) o.save = v;
        else if (!strcmp(k, "--load")) o.load = v;
        else { fprintf(stderr, "train_tiny: unknown option %s\n", k); return 2; }
    }
    if (argc % 2 == 0 || o.ranks < 1 || o.ranks > 32 || BATCH % o.ranks) {
        fprintf(stderr, "usage: train_tiny [--stage 0-3] [--ranks N, dividing %d] [--steps K] [--offload none|cpu] "
                        "[--save DIR] [--load DIR]\n", BATCH);
        return 2;
    }
    zero_result r = zero_run_local(o.ranks, train, &o);
    if (r != ZERO_OK) {                      /* the failing rank and why (zero_run_local keeps it) */
        fprintf(stderr, "train_tiny: %s: %s\n", zero_result_str(r), zero_last_error(NULL));
        return 1;
    }
    return 0;
}
