/* tests/test_layout.c - the client's layout: a stacked [L, ...] tensor registered across L
   modules in one call (zero_add_param_stack), every param set from one buffer in the flat
   order (zero_set_params_f32, the inverse of zero_gather_params_f32), where a param starts
   in it (zero_param_offset), and a checkpoint's weights read into such a buffer without a
   trainer (zero_ckpt_read_f32).

   The model is a small llm.c-style GPT's parameter buffer, tensor-major:
       wte [V, C], wpe [T, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C], qkvb [L, 3C],
       alpha [L], lnfw [C], lnfb [C]
   in modules "embed" (wte, wpe), "h0".."h<L-1>" (one slice of each stack) and "lnf",
   plus a frozen module "frozen" with a param "f" [7] at the end of the flat order. The
   gradients are a fixed function of the values, so every run trains the same. Cases: the
   registration and each of its failures (atomic, also when memory runs out half-way),
   set-all then gather-all at stages 0-3 and worlds 1 and 3 (f32, bf16; stage 3 with the
   optimizer and the params on NVMe), set-all against per-param sets after training
   (bitwise), a stack's slices against the client's [L, ...] tensor at stage 3, and a
   checkpoint read back into one buffer against the gather at the save.
   desc.flat_layout (stages 0-2): the client's buffer is zero.h's: every param's
   zero_param_data (stages 0-1: zero_param_grad too) is one base pointer plus its flat
   offset, so a trainer indexes llm.c's way (base + off(qkvw) + l*3C*C), and trains
   bitwise as the module-major layout does (f32, bf16; worlds 1 and 3; accumulation 1 and
   2); the view follows zero_param_set_f32, the step and zero_load; the plan counts the
   views and the build allocates them; stage 3 is refused. Files under $TMPDIR. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>

#define L 3
#define C 8
#define V 20
#define T 6
#define NT 9                        /* client tensors */
#define NP (2 + 5 * L + 2 + 1)      /* params: wte, wpe, 5 stacks, lnfw, lnfb, f */
#define NFROZEN 7
#define MAXN 256                    /* the largest param (qkvw's slice: 3C*C) and more */

static char tmpdir[512];

/* the client's tensors, in its buffer's order */
typedef struct tensor { const char *name; int ndim; int64_t shape[3]; int stacked, no_decay; } tensor;
static const tensor tensors[NT] = {
    { "wte", 2, { V, C, 0 }, 0, 0 },
    { "wpe", 2, { T, C, 0 }, 0, 0 },
    { "ln1w", 2, { L, C, 0 }, 1, 1 },
    { "ln1b", 2, { L, C, 0 }, 1, 1 },
    { "qkvw", 3, { L, 3 * C, C }, 1, 0 },
    { "qkvb", 2, { L, 3 * C, 0 }, 1, 1 },
    { "alpha", 1, { L, 0, 0 }, 1, 1 },
    { "lnfw", 1, { C, 0, 0 }, 0, 1 },
    { "lnfb", 1, { C, 0, 0 }, 0, 1 },
};

static int64_t tensor_numel(const tensor *t) {
    int64_t n = 1;
    int k;
    for (k = 0; k < t->ndim; k++) n *= t->shape[k];
    return n;
}
/* where tensor i starts in the client's buffer */
static int64_t client_off(int i) {
    int64_t o = 0;
    int k;
    for (k = 0; k < i; k++) o += tensor_numel(&tensors[k]);
    return o;
}
static int64_t client_numel(void) { return client_off(NT); }
static int64_t total_numel(void) { return client_numel() + NFROZEN; }

/* the registered model: params in flat order, each with its module */
typedef struct model {
    zero_module mods[L + 3];        /* embed, h0..h<L-1>, lnf, frozen */
    int nmod;
    zero_param p[NP];
    int pmod[NP];                   /* index into mods */
    int ptensor[NP], player[NP];    /* the client's tensor (NT: the frozen f) and layer */
    int np;
} model;

static zero_result add_model(zero_ctx *z, model *M) {
    zero_param_desc pd;
    zero_result r;
    char name[16];
    int i, l;
    memset(M, 0, sizeof *M);
    if ((r = fx_module(z, "embed", 0, &M->mods[0])) != ZERO_OK) return r;
    for (l = 0; l < L; l++) {
        snprintf(name, sizeof name, "h%d", l);
        if ((r = fx_module(z, name, 0, &M->mods[1 + l])) != ZERO_OK) return r;
    }
    if ((r = fx_module(z, "lnf", 0, &M->mods[L + 1])) != ZERO_OK) return r;
    if ((r = fx_module(z, "frozen", 1, &M->mods[L + 2])) != ZERO_OK) return r;
    M->nmod = L + 3;
    for (i = 0; i < NT; i++) {
        const tensor *t = &tensors[i];
        memset(&pd, 0, sizeof pd);
        pd.name = t->name;
        pd.ndim = t->ndim;
        memcpy(pd.shape, t->shape, sizeof t->shape);
        pd.no_decay = t->no_decay;
        if (t->stacked) {
            if ((r = zero_add_param_stack(z, &M->mods[1], L, &pd, &M->p[M->np])) != ZERO_OK) return r;
            for (l = 0; l < L; l++) {
                M->ptensor[M->np] = i;
                M->player[M->np] = l;
                M->pmod[M->np++] = 1 + l;
            }
        } else {
            int m = i < 2 ? 0 : L + 1;
            if ((r = zero_add_param(z, M->mods[m], &pd, &M->p[M->np])) != ZERO_OK) return r;
            M->ptensor[M->np] = i;
            M->player[M->np] = 0;
            M->pmod[M->np++] = m;
        }
    }
    if ((r = fx_param(z, M->mods[L + 2], "f", NFROZEN, 0, 0, &M->p[M->np])) != ZERO_OK) return r;
    M->ptensor[M->np] = NT;
    M->player[M->np] = 0;
    M->pmod[M->np++] = L + 2;
    return ZERO_OK;
}

/* distinct values; bf16-exact when exact (so any dtype keeps them) */
static void fill(float *x, int64_t n, uint64_t seed, int exact) {
    uint64_t s = seed * 2654435761u + 88172645463325252ull;
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = fx_frand(&s) * 0.5f;
        if (exact) v = zero__bf16_to_f32(zero__f32_to_bf16(v));
        x[i] = v;
    }
}

static int64_t slice_numel(const tensor *t);
/* where param k starts in the client's buffer, as llm.c finds it: its tensor's start plus
   l slices */
static int64_t client_param_off(const model *M, int k) {
    const tensor *t = M->ptensor[k] < NT ? &tensors[M->ptensor[k]] : NULL;
    if (!t) return client_numel();
    return client_off(M->ptensor[k]) + (t->stacked ? M->player[k] * slice_numel(t) : 0);
}

/* `steps` optimizer steps of accum_steps micro-batches; the gradient of element i is a
   function of its value, i, the rank, the step and the micro-batch. Trainable modules only
   (the frozen one is never fetched). With `base` (desc.flat_layout), param k is read at
   base + its place in the client's buffer, llm.c's way, and, with `gbase` (stages 0-1),
   its gradient added there too; else through zero_param_data / zero_param_grad. */
static zero_result train_at(zero_ctx *z, const model *M, int rank, int steps, char *base, char *gbase) {
    zero_desc d = zero_query_desc(z);
    size_t psz = d.param_dtype == ZERO_F32 ? 4 : 2, gsz = d.grad_dtype == ZERO_F32 ? 4 : 2;
    float w[MAXN], g[MAXN];
    zero_result r;
    int s, mb, m, k;
    int64_t i, n;
    for (s = 0; s < steps; s++) {
        for (mb = 0; mb < d.accum_steps; mb++)
            for (m = 0; m < M->nmod - 1; m++) {
                if ((r = zero_fetch(z, M->mods[m])) != ZERO_OK) return r;
                for (k = 0; k < M->np; k++) {
                    void *data, *grad;
                    if (M->pmod[k] != m) continue;
                    n = zero_param_numel(z, M->p[k]);
                    data = base ? base + (size_t)client_param_off(M, k) * psz : zero_param_data(z, M->p[k]);
                    grad = gbase ? gbase + (size_t)client_param_off(M, k) * gsz : zero_param_grad(z, M->p[k]);
                    if (!data || !grad) return ZERO_ERR_STATE;
                    zero_to_f32(w, data, d.param_dtype, n);
                    for (i = 0; i < n; i++)
                        g[i] = 0.3f * w[i] + 0.05f * (float)((i + 3 * k + rank + s + 2 * mb) % 7) - 0.15f;
                    zero_add_f32(grad, d.grad_dtype, g, n);
                }
                if ((r = zero_release(z, M->mods[m])) != ZERO_OK) return r;
                if ((r = zero_grads_ready(z, M->mods[m])) != ZERO_OK) return r;
            }
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) return r;
    }
    return ZERO_OK;
}
static zero_result train(zero_ctx *z, const model *M, int rank, int steps) { return train_at(z, M, rank, steps, NULL, NULL); }

/* ---- one run: a context on each rank, then what `mode` asks ---------------------------- */
enum { MODE_ROUNDTRIP, MODE_SET_ALL, MODE_SET_EACH, MODE_LAYOUT, MODE_CKPT, MODE_FLAT };

typedef struct run {
    int mode, stage, world, nvme, accum;
    zero_dtype dt;
    const float *a, *b;             /* values to set (b: the second set, after training) */
    float *out[3];                  /* each rank's gather at the end */
    const char *ckpt;
    char err[512];
} run;

static void set_each(zero_ctx *z, const model *M, const float *all, zero_result *r) {
    int k;
    for (k = 0; *r == ZERO_OK && k < M->np; k++) *r = zero_param_set_f32(z, M->p[k], all + zero_param_offset(z, M->p[k]));
}

static int64_t slice_numel(const tensor *t) { return tensor_numel(t) / t->shape[0]; }

/* the flat view, as fp32, against the params (the gather, in the param dtype) */
static void flat_check(zero_ctx *z, const char *base, const float *gathered, float *tmp, int rank, const char *when) {
    zero_dtype pdt = zero_query_desc(z).param_dtype;
    int64_t N = total_numel(), i;
    float *want = (float *)malloc((size_t)N * 4);
    if (!CHECK(want != NULL, "out of memory")) return;
    if (pdt == ZERO_F32) memcpy(want, gathered, (size_t)N * 4);
    else
        for (i = 0; i < N; i++) want[i] = zero__bf16_to_f32(zero__f32_to_bf16(gathered[i]));
    zero_to_f32(tmp, base, pdt, N);     /* (tmp may be gathered) */
    for (i = 0; i < N && tmp[i] == want[i]; i++) { }
    CHECK(i == N, "rank %d: %s: the flat view's element %lld is %g, the params' %g", rank, when, (long long)i,
          i < N ? (double)tmp[i] : 0.0, i < N ? (double)want[i] : 0.0);
    free(want);
}

/* MODE_FLAT: the MODE_SET_EACH run, trained through one base pointer; then the view after a
   step, a set and a load */
static zero_result flat_rank(zero_ctx *z, const model *M, run *c, int rank, float *tmp) {
    zero_desc d = zero_query_desc(z);
    size_t psz = d.param_dtype == ZERO_F32 ? 4 : 2, gsz = d.grad_dtype == ZERO_F32 ? 4 : 2;
    char *base = (char *)zero_param_data(z, M->p[0]), *gbase = NULL;
    float *saved = NULL;
    zero_result r = ZERO_OK;
    int k, flat_grads = c->stage < 2;
    if (flat_grads) gbase = (char *)zero_param_grad(z, M->p[0]);
    if (!CHECK(base && (gbase || !flat_grads), "rank %d: no base pointer: %s", rank, zero_last_error(z)))
        return ZERO_ERR_STATE;
    for (k = 0; k < M->np; k++) {
        size_t off = (size_t)client_param_off(M, k);
        CHECK((char *)zero_param_data(z, M->p[k]) == base + off * psz, "rank %d: zero_param_data(param %d) is not base + %zu",
              rank, k, off);
        if (flat_grads && M->ptensor[k] < NT)
            CHECK((char *)zero_param_grad(z, M->p[k]) == gbase + off * gsz, "rank %d: zero_param_grad(param %d) is not "
                  "gbase + %zu", rank, k, off);
    }
    set_each(z, M, c->a, &r);
    if (r == ZERO_OK && (r = zero_gather_params_f32(z, tmp)) == ZERO_OK) flat_check(z, base, tmp, tmp, rank, "after sets");
    if (r != ZERO_OK || (r = train_at(z, M, rank, 2, base, gbase)) != ZERO_OK) return r;
    if ((r = zero_set_params_f32(z, c->b)) != ZERO_OK || (r = train_at(z, M, rank, 2, base, gbase)) != ZERO_OK ||
        (r = zero_gather_params_f32(z, c->out[rank])) != ZERO_OK)
        return r;
    if (!(saved = (float *)malloc((size_t)total_numel() * 4))) return ZERO_ERR_OUT_OF_MEMORY;
    flat_check(z, base, c->out[rank], saved, rank, "after steps");
    /* a checkpoint, a step away from it, and back: the view is the checkpoint's */
    if ((r = zero_save(z, c->ckpt)) == ZERO_OK && (r = train_at(z, M, rank, 1, base, gbase)) == ZERO_OK &&
        (r = zero_load(z, c->ckpt)) == ZERO_OK)
        flat_check(z, base, c->out[rank], saved, rank, "after zero_load");
    free(saved);
    return r;
}

static zero_result run_rank(zero_comm *comm, int rank, void *user) {
    run *c = (run *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    model M;
    zero_result r;
    int64_t N = total_numel();
    float *tmp = NULL;
    int k, l;
    fx_desc(&d, comm, c->stage, c->dt, ZERO_OPTIM_ADAMW, 0.01);
    d.cpu_threads = 1;
    d.flat_layout = c->mode == MODE_FLAT;
    d.accum_steps = c->accum;
    if (c->nvme) {
        d.offload_optimizer = ZERO_OFFLOAD_NVME;
        d.offload_params = ZERO_OFFLOAD_NVME;
        d.offload.nvme_dirs[0] = tmpdir;
        d.offload.buffer_bytes = 48 << 10;
        d.offload.queue_depth = 2;
    }
    if ((r = zero_create(&z, &d)) != ZERO_OK) {
        if (rank == 0) snprintf(c->err, sizeof c->err, "zero_create: %.400s", zero_last_error(NULL));
        return r;
    }
    if ((r = add_model(z, &M)) != ZERO_OK || (r = zero_build(z)) != ZERO_OK) goto done;
    CHECK(zero_num_params(z) == N, "zero_num_params %lld, expected %lld", (long long)zero_num_params(z), (long long)N);
    if (!(tmp = (float *)malloc((size_t)N * 4))) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    switch (c->mode) {
    case MODE_ROUNDTRIP:
        /* set, gather: the values (bf16-exact for bf16 params); set what came out, gather:
           the same again */
        if ((r = zero_set_params_f32(z, c->a)) != ZERO_OK || (r = zero_gather_params_f32(z, c->out[rank])) != ZERO_OK)
            break;
        CHECK(memcmp(c->out[rank], c->a, (size_t)N * 4) == 0, "rank %d: gather after zero_set_params_f32 differs", rank);
        if ((r = train(z, &M, rank, 1)) != ZERO_OK || (r = zero_gather_params_f32(z, tmp)) != ZERO_OK ||
            (r = zero_set_params_f32(z, c->b)) != ZERO_OK || (r = zero_gather_params_f32(z, tmp)) != ZERO_OK)
            break;
        CHECK(memcmp(tmp, c->b, (size_t)N * 4) == 0, "rank %d: gather after a step and a second set differs", rank);
        if ((r = zero_set_params_f32(z, tmp)) != ZERO_OK || (r = zero_gather_params_f32(z, c->out[rank])) != ZERO_OK)
            break;
        CHECK(memcmp(c->out[rank], tmp, (size_t)N * 4) == 0, "rank %d: gather, set, gather is not the identity", rank);
        break;
    case MODE_SET_ALL:
    case MODE_SET_EACH:
        /* the same start, training, then the second values by one call or param by param */
        set_each(z, &M, c->a, &r);
        if (r != ZERO_OK || (r = train(z, &M, rank, 2)) != ZERO_OK) break;
        if (c->mode == MODE_SET_ALL) r = zero_set_params_f32(z, c->b);
        else set_each(z, &M, c->b, &r);
        if (r != ZERO_OK || (r = train(z, &M, rank, 2)) != ZERO_OK) break;
        r = zero_gather_params_f32(z, c->out[rank]);
        break;
    case MODE_LAYOUT:
        /* each stack's slice l, gathered with module h<l>, is the client's tensor [l] */
        if ((r = zero_set_params_f32(z, c->a)) != ZERO_OK) break;
        for (l = 0; r == ZERO_OK && l < L; l++) {
            if ((r = zero_fetch(z, M.mods[1 + l])) != ZERO_OK) break;
            for (k = 0; k < NT; k++) {
                const tensor *t = &tensors[k];
                int64_t n = slice_numel(t);
                const float *want = c->a + client_off(k) + l * n, *got;
                int pk;
                if (!t->stacked) continue;
                for (pk = 0; pk < M.np; pk++)
                    if (M.pmod[pk] == 1 + l && zero_param_offset(z, M.p[pk]) == client_off(k) + l * n) break;
                if (!CHECK(pk < M.np, "rank %d: no param of h%d starts at %s[%d]", rank, l, t->name, l)) continue;
                CHECK(zero_param_numel(z, M.p[pk]) == n, "rank %d: %s[%d] has %lld elements, expected %lld", rank,
                      t->name, l, (long long)zero_param_numel(z, M.p[pk]), (long long)n);
                got = (const float *)zero_param_data(z, M.p[pk]);
                if (!CHECK(got != NULL, "rank %d: h%d.%s not readable", rank, l, t->name)) continue;
                CHECK(memcmp(got, want, (size_t)n * 4) == 0, "rank %d: h%d.%s is not the client's %s[%d]", rank, l,
                      t->name, t->name, l);
            }
            if ((r = zero_release(z, M.mods[1 + l])) != ZERO_OK) break;
        }
        if (r == ZERO_OK) r = zero_gather_params_f32(z, c->out[rank]);
        break;
    case MODE_CKPT:
        if ((r = zero_set_params_f32(z, c->a)) != ZERO_OK || (r = train(z, &M, rank, 3)) != ZERO_OK ||
            (r = zero_save(z, c->ckpt)) != ZERO_OK || (r = zero_gather_params_f32(z, c->out[rank])) != ZERO_OK)
            break;
        break;
    case MODE_FLAT:
        r = flat_rank(z, &M, c, rank, tmp);
        break;
    }
done:
    if (r != ZERO_OK && rank == 0) snprintf(c->err, sizeof c->err, "%s", zero_last_error(z));
    free(tmp);
    zero_destroy(z);
    return r;
}

static int start(run *c, int mode, int stage, int world, zero_dtype dt, int nvme, const float *a, const float *b) {
    int64_t N = total_numel();
    int k;
    memset(c, 0, sizeof *c);
    c->mode = mode;
    c->stage = stage;
    c->world = world;
    c->dt = dt;
    c->nvme = nvme;
    c->accum = 1;
    c->a = a;
    c->b = b;
    for (k = 0; k < world; k++)
        if (!(c->out[k] = (float *)calloc((size_t)N, 4))) return 0;
    return 1;
}
static void finish(run *c) {
    int k;
    for (k = 0; k < 3; k++) free(c->out[k]);
}
static zero_result go(run *c) {
    zero_result r = zero_run_local(c->world, run_rank, c);
    CHECK(r == ZERO_OK, "run failed: %s: %s", zero_result_str(r), c->err);
    return r;
}
/* every rank gathered the same */
static void same_on_ranks(const run *c) {
    int k;
    for (k = 1; k < c->world; k++)
        CHECK(memcmp(c->out[k], c->out[0], (size_t)total_numel() * 4) == 0, "rank %d gathered other values than rank 0", k);
}

/* ---- cases -------------------------------------------------------------------------- */
static zero_ctx *new_ctx(zero_allocator *a) {
    zero_desc d;
    zero_ctx *z = NULL;
    fx_desc(&d, NULL, 3, ZERO_F32, ZERO_OPTIM_ADAMW, 0.01);
    if (a) d.allocator = *a;
    if (zero_create(&z, &d) != ZERO_OK) return NULL;
    return z;
}

/* shapes, handles, the flat order, no_decay; before and after zero_build */
static void test_stack_register(void) {
    zero_ctx *z = new_ctx(NULL);
    model M;
    int64_t o = 0;
    int k, i, l, pk;
    if (!CHECK(z != NULL, "zero_create failed")) return;
    if (!CHECK(add_model(z, &M) == ZERO_OK, "registration failed: %s", zero_last_error(z))) goto done;
    CHECK(M.np == NP && zero_num_params(z) == total_numel(), "%d params, %lld elements", M.np,
          (long long)zero_num_params(z));
    /* the flat order is the client's buffer: each tensor where the client keeps it, a
       stack's slices one after the other */
    for (i = 0, pk = 0; i < NT; i++) {
        const tensor *t = &tensors[i];
        int nslices = t->stacked ? L : 1;
        for (l = 0; l < nslices; l++, pk++) {
            int64_t n = t->stacked ? slice_numel(t) : tensor_numel(t);
            CHECK(zero_param_offset(z, M.p[pk]) == client_off(i) + l * n, "%s[%d] starts at %lld, the client's at %lld",
                  t->name, l, (long long)zero_param_offset(z, M.p[pk]), (long long)(client_off(i) + l * n));
            CHECK(zero_param_offset(z, M.p[pk]) == o, "param %d is not right after the one before", pk);
            CHECK(zero_param_numel(z, M.p[pk]) == n, "%s[%d] has %lld elements, expected %lld", t->name, l,
                  (long long)zero_param_numel(z, M.p[pk]), (long long)n);
            o += n;
        }
    }
    CHECK(zero_param_offset(z, M.p[NP - 1]) == client_numel(), "the frozen param does not follow the client's tensors");
    /* the names are taken in the modules: a second stack of one is refused */
    {
        zero_param_desc pd;
        zero_param h[L];
        memset(&pd, 0, sizeof pd);
        pd.name = "alpha"; pd.ndim = 1; pd.shape[0] = L;
        CHECK(zero_add_param_stack(z, &M.mods[1], L, &pd, h) == ZERO_ERR_INVALID_ARG, "duplicate stack accepted");
    }
    if (!CHECK(zero_build(z) == ZERO_OK, "zero_build: %s", zero_last_error(z))) goto done;
    for (k = 0; k < NP; k++)
        CHECK(zero_param_offset(z, M.p[k]) >= 0, "param %d has no offset after zero_build", k);
    /* 1-D stack: a [1] slice per module */
    for (l = 0; l < L; l++) CHECK(zero_param_numel(z, M.p[2 + 4 * L + l]) == 1, "alpha[%d] is not one element", l);
    {
        zero_param bad;
        bad.id = 0;
        CHECK(zero_param_offset(z, bad) == -1, "a bad handle has an offset");
        CHECK(zero_param_offset(NULL, M.p[0]) == -1, "a NULL context has an offset");
    }
done:
    zero_destroy(z);
}

/* no_decay is copied to every slice: one AdamW step with zero gradients only decays */
static zero_result decay_rank(zero_comm *comm, int rank, void *user) {
    float *vals = (float *)user, *out = NULL;
    zero_desc d;
    zero_ctx *z = NULL;
    model M;
    zero_result r;
    int64_t N = total_numel(), i;
    int k, m;
    (void)rank;
    fx_desc(&d, comm, 1, ZERO_F32, ZERO_OPTIM_ADAMW, 0.5);
    d.optim.weight_decay = 0.5;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    if ((r = add_model(z, &M)) != ZERO_OK || (r = zero_build(z)) != ZERO_OK || (r = zero_set_params_f32(z, vals)) != ZERO_OK)
        goto done;
    for (m = 0; m < M.nmod - 1; m++) {
        if ((r = zero_fetch(z, M.mods[m])) != ZERO_OK || (r = zero_release(z, M.mods[m])) != ZERO_OK ||
            (r = zero_grads_ready(z, M.mods[m])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_step(z)) != ZERO_OK) goto done;
    if (!(out = (float *)malloc((size_t)N * 4))) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    if ((r = zero_gather_params_f32(z, out)) != ZERO_OK) goto done;
    for (k = 0; k < NT; k++) {
        const tensor *t = &tensors[k];
        for (i = client_off(k); i < client_off(k + 1); i++) {
            int changed = out[i] != vals[i];
            if (!CHECK(changed == !t->no_decay, "%s element %lld: %s (no_decay %d)", t->name, (long long)(i - client_off(k)),
                       changed ? "decayed" : "not decayed", t->no_decay))
                break;
        }
    }
done:
    free(out);
    zero_destroy(z);
    return r;
}
static void test_stack_no_decay(void) {
    float *vals = (float *)malloc((size_t)total_numel() * 4);
    zero_result r;
    if (!CHECK(vals != NULL, "out of memory")) return;
    fill(vals, total_numel(), 7, 0);
    r = zero_run_local(2, decay_rank, vals);
    CHECK(r == ZERO_OK, "run failed: %s: %s", zero_result_str(r), zero_last_error(NULL));
    free(vals);
}

/* an allocator that fails once `left` reaches 0 (armed), for out of memory half-way */
typedef struct failing { int armed; int left; } failing;
static void *fail_alloc(size_t n, void *u) {
    failing *f = (failing *)u;
    if (f->armed && f->left-- <= 0) return NULL;
    return malloc(n);
}
static void fail_free(void *p, void *u) { (void)u; free(p); }

/* every failure of zero_add_param_stack, each leaving the model as it was */
static void test_stack_errors(void) {
    zero_ctx *z = new_ctx(NULL), *z2 = new_ctx(NULL);
    zero_module mods[L], other, big, dup[2];
    zero_param h[L], q;
    zero_param_desc pd;
    int l, k;
    if (!CHECK(z && z2, "zero_create failed")) goto done;
    for (l = 0; l < L; l++) {
        char name[16];
        snprintf(name, sizeof name, "h%d", l);
        CHECK(fx_module(z, name, 0, &mods[l]) == ZERO_OK, "module");
    }
    CHECK(fx_module(z2, "x", 0, &other) == ZERO_OK, "module");
    CHECK(fx_module(z, "big", 0, &big) == ZERO_OK, "module");
    CHECK(fx_param(z, mods[1], "taken", 4, 0, 0, &q) == ZERO_OK, "param");
    memset(&pd, 0, sizeof pd);
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = L; pd.shape[1] = 5;
#define EXPECT(call, code, what)                                                                          \
    do {                                                                                                  \
        zero_result r_ = (call);                                                                          \
        CHECK(r_ == (code), "%s: %s, expected %s", what, zero_result_str(r_), zero_result_str(code));     \
        CHECK(zero_num_params(z) == 4, "%s: the model changed", what);                                   \
    } while (0)
    /* NULL arguments */
    CHECK(zero_add_param_stack(NULL, mods, L, &pd, h) == ZERO_ERR_INVALID_ARG, "NULL ctx accepted");
    EXPECT(zero_add_param_stack(z, NULL, L, &pd, h), ZERO_ERR_INVALID_ARG, "NULL modules");
    EXPECT(zero_add_param_stack(z, mods, L, NULL, h), ZERO_ERR_INVALID_ARG, "NULL desc");
    EXPECT(zero_add_param_stack(z, mods, L, &pd, NULL), ZERO_ERR_INVALID_ARG, "NULL out");
    pd.name = NULL;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_ARG, "NULL name");
    pd.name = "w";
    /* sizes */
    pd.shape[0] = 0;
    EXPECT(zero_add_param_stack(z, mods, 0, &pd, h), ZERO_ERR_INVALID_SIZE, "n 0");
    pd.shape[0] = -1;
    EXPECT(zero_add_param_stack(z, mods, -1, &pd, h), ZERO_ERR_INVALID_SIZE, "n -1");
    pd.shape[0] = L;
    EXPECT(zero_add_param_stack(z, mods, L - 1, &pd, h), ZERO_ERR_INVALID_SIZE, "shape[0] != n");
    CHECK(strstr(zero_last_error(z), "shape[0] is 3 but 2 modules") != NULL, "message: %s", zero_last_error(z));
    pd.ndim = 0;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_SIZE, "ndim 0");
    pd.ndim = ZERO_MAX_DIMS + 1;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_SIZE, "ndim too large");
    pd.ndim = 2;
    pd.shape[1] = 0;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_SIZE, "a zero slice dimension");
    pd.shape[1] = -5;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_SIZE, "a negative slice dimension");
    pd.ndim = 3; pd.shape[1] = (int64_t)1 << 40; pd.shape[2] = (int64_t)1 << 10;
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_SIZE, "a slice over 2^48 elements");
    {
        /* slices of 2^48 elements, 2^15 + 1 of them: the whole overflows int64 (checked
           before the handles, so these need not be modules) */
        int n = (1 << 15) + 1;
        zero_module *many = (zero_module *)calloc((size_t)n, sizeof *many);
        zero_param *hs = (zero_param *)calloc((size_t)n, sizeof *hs);
        if (CHECK(many && hs, "out of memory")) {
            zero_param_desc big_pd = pd;
            big_pd.ndim = 2; big_pd.shape[0] = n; big_pd.shape[1] = (int64_t)1 << 48;
            EXPECT(zero_add_param_stack(z, many, n, &big_pd, hs), ZERO_ERR_INVALID_SIZE, "the whole overflows");
            CHECK(strstr(zero_last_error(z), "overflows") != NULL, "message: %s", zero_last_error(z));
        }
        free(many);
        free(hs);
    }
    pd.ndim = 2; pd.shape[1] = 5; pd.shape[2] = 0;
    /* handles */
    {
        zero_module bad[L];
        memcpy(bad, mods, sizeof bad);
        bad[2].id = 0;
        EXPECT(zero_add_param_stack(z, bad, L, &pd, h), ZERO_ERR_INVALID_HANDLE, "a zero handle");
        bad[2] = other;
        EXPECT(zero_add_param_stack(z, bad, L, &pd, h), ZERO_ERR_INVALID_HANDLE, "another context's module");
        bad[2] = bad[0];
        EXPECT(zero_add_param_stack(z, bad, L, &pd, h), ZERO_ERR_INVALID_ARG, "a module twice");
        CHECK(strstr(zero_last_error(z), "both module 'h0'") != NULL, "message: %s", zero_last_error(z));
    }
    /* a name one module already has: no slice registered in the others */
    pd.name = "taken";
    EXPECT(zero_add_param_stack(z, mods, L, &pd, h), ZERO_ERR_INVALID_ARG, "a name taken in modules[1]");
    CHECK(strstr(zero_last_error(z), "'h1'") != NULL, "message: %s", zero_last_error(z));
    for (l = 0; l < L; l++) CHECK(h[l].id == 0, "out[%d] set on a failure", l);
    /* a module that cannot take another element: 16 params of 2^48 fill its 2^52 */
    for (k = 0; k < 16; k++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", k);
        CHECK(fx_param(z, big, name, (int64_t)1 << 48, 0, 0, &q) == ZERO_OK, "filling 'big': %s", zero_last_error(z));
    }
    pd.name = "w";
    dup[0] = mods[0];
    dup[1] = big;
    pd.shape[0] = 2;
    {
        zero_result r = zero_add_param_stack(z, dup, 2, &pd, h);
        CHECK(r == ZERO_ERR_INVALID_SIZE, "a full module: %s", zero_result_str(r));
        CHECK(strstr(zero_last_error(z), "too large") != NULL, "message: %s", zero_last_error(z));
        CHECK(zero_num_params(z) == 4 + ((int64_t)16 << 48), "the model changed");
    }
    /* still free: the same stack registers once everything is right */
    pd.shape[0] = L;
    CHECK(zero_add_param_stack(z, mods, L, &pd, h) == ZERO_OK, "a good stack refused: %s", zero_last_error(z));
    for (l = 0; l < L; l++) CHECK(zero_param_numel(z, h[l]) == 5, "slice %d", l);
#undef EXPECT
done:
    zero_destroy(z);
    zero_destroy(z2);
}

/* out of memory in the middle of a stack takes back the slices already added */
static void test_stack_oom(void) {
    failing f = { 0, 0 };
    zero_allocator a = { fail_alloc, fail_free, &f };
    zero_ctx *z = new_ctx(&a);
    zero_module mods[4], extra;
    zero_param h[4], q;
    zero_param_desc pd;
    zero_plan before, after;
    int l, k, fails = 0, ok = 0;
    if (!CHECK(z != NULL, "zero_create failed")) return;
    for (l = 0; l < 4; l++) {
        char name[16];
        snprintf(name, sizeof name, "h%d", l);
        CHECK(fx_module(z, name, 0, &mods[l]) == ZERO_OK, "module");
        CHECK(fx_param(z, mods[l], "b", 3, 0, 1, &q) == ZERO_OK, "param");
    }
    memset(&pd, 0, sizeof pd);
    pd.name = "w"; pd.ndim = 3; pd.shape[0] = 4; pd.shape[1] = 3; pd.shape[2] = 5;
    CHECK(zero_plan_get(z, &before) == ZERO_OK, "zero_plan_get");
    for (k = 0; k < 16 && !ok; k++) {
        zero_result r;
        f.left = k;
        f.armed = 1;
        r = zero_add_param_stack(z, mods, 4, &pd, h);
        f.armed = 0;
        if (r == ZERO_OK) { ok = 1; break; }
        fails++;
        CHECK(r == ZERO_ERR_OUT_OF_MEMORY, "allocation %d failing: %s", k, zero_result_str(r));
        CHECK(zero_num_params(z) == 12, "allocation %d failing: %lld elements registered", k, (long long)zero_num_params(z));
        for (l = 0; l < 4; l++) CHECK(h[l].id == 0, "allocation %d failing: out[%d] set", k, l);
        /* the modules' extents are back too: the plan is the one before */
        CHECK(zero_plan_get(z, &after) == ZERO_OK && after.numel_padded == before.numel_padded &&
              after.numel == before.numel, "allocation %d failing: the plan changed", k);
    }
    CHECK(ok && fails >= 2, "the stack never failed half-way (%d failures, ok %d)", fails, ok);
    /* the model registered afterwards lays out as if the failures never were */
    CHECK(fx_module(z, "extra", 0, &extra) == ZERO_OK && fx_param(z, extra, "e", 2, 0, 0, &q) == ZERO_OK, "module");
    CHECK(zero_param_offset(z, h[0]) == 12 && zero_param_offset(z, h[3]) == 12 + 45 && zero_param_offset(z, q) == 72,
          "offsets %lld..%lld",
          (long long)zero_param_offset(z, h[0]), (long long)zero_param_offset(z, h[3]));
    CHECK(zero_build(z) == ZERO_OK, "zero_build: %s", zero_last_error(z));
    {
        float all[74], got[74];
        fill(all, 74, 3, 0);
        CHECK(zero_set_params_f32(z, all) == ZERO_OK && zero_gather_params_f32(z, got) == ZERO_OK &&
              memcmp(all, got, sizeof all) == 0, "set / gather after the failures: %s", zero_last_error(z));
    }
    zero_destroy(z);
}

/* the edges: a stack of one, a stack of ZERO_MAX_DIMS dimensions, a 1-D stack, each slice
   set and read back through its own module */
static void test_stack_edges(void) {
    zero_ctx *z = new_ctx(NULL);
    zero_module a, b[2], c3[3];
    zero_param one, deep[2], flat[3];
    zero_param_desc pd;
    float all[2 * 6 + 2 * 256 + 3], got[2 * 6 + 2 * 256 + 3];
    int k, n = 0;
    if (!CHECK(z != NULL, "zero_create failed")) return;
    CHECK(fx_module(z, "a", 0, &a) == ZERO_OK && fx_module(z, "b0", 0, &b[0]) == ZERO_OK &&
          fx_module(z, "b1", 0, &b[1]) == ZERO_OK, "modules");
    for (k = 0; k < 3; k++) c3[k] = k == 0 ? a : k == 1 ? b[0] : b[1];
    memset(&pd, 0, sizeof pd);
    pd.name = "one"; pd.ndim = 3; pd.shape[0] = 1; pd.shape[1] = 2; pd.shape[2] = 6;
    CHECK(zero_add_param_stack(z, &a, 1, &pd, &one) == ZERO_OK, "a stack of one: %s", zero_last_error(z));
    CHECK(zero_param_numel(z, one) == 12 && zero_param_offset(z, one) == 0, "the stack of one");
    pd.name = "deep"; pd.ndim = ZERO_MAX_DIMS; pd.shape[0] = 2;
    for (k = 1; k < ZERO_MAX_DIMS; k++) pd.shape[k] = k == 1 ? 4 : 2;      /* slices [4, 2, ..., 2]: 256 */
    CHECK(zero_add_param_stack(z, b, 2, &pd, deep) == ZERO_OK, "a %d-D stack: %s", ZERO_MAX_DIMS, zero_last_error(z));
    CHECK(zero_param_numel(z, deep[0]) == 256 && zero_param_offset(z, deep[1]) == 12 + 256, "the %d-D stack",
          ZERO_MAX_DIMS);
    memset(&pd, 0, sizeof pd);
    pd.name = "flat"; pd.ndim = 1; pd.shape[0] = 3; pd.shape[1] = 99;   /* ignored past ndim */
    CHECK(zero_add_param_stack(z, c3, 3, &pd, flat) == ZERO_OK, "a 1-D stack: %s", zero_last_error(z));
    for (k = 0; k < 3; k++)
        CHECK(zero_param_numel(z, flat[k]) == 1 && zero_param_offset(z, flat[k]) == 12 + 512 + k, "flat[%d]", k);
    if (!CHECK(zero_build(z) == ZERO_OK, "zero_build: %s", zero_last_error(z))) goto done;
    n = (int)zero_num_params(z);
    CHECK(n == (int)(sizeof all / sizeof all[0]), "%d elements", n);
    for (k = 0; k < n; k++) all[k] = (float)k;
    CHECK(zero_set_params_f32(z, all) == ZERO_OK, "set: %s", zero_last_error(z));
    /* module b1 holds deep[1] and flat[2]: the buffer's [12 + 256, 12 + 512) and [12 + 514] */
    if (CHECK(zero_fetch(z, b[1]) == ZERO_OK, "fetch")) {
        const float *d1 = (const float *)zero_param_data(z, deep[1]), *f2 = (const float *)zero_param_data(z, flat[2]);
        CHECK(d1 && f2 && memcmp(d1, all + 12 + 256, 256 * 4) == 0 && f2[0] == all[12 + 514], "b1's slices");
        CHECK(zero_release(z, b[1]) == ZERO_OK, "release");
    }
    CHECK(zero_gather_params_f32(z, got) == ZERO_OK && memcmp(got, all, sizeof all) == 0, "gather");
done:
    zero_destroy(z);
}

/* the calls on a built context: after zero_build, NULL, not built */
static void test_call_errors(void) {
    zero_ctx *z = new_ctx(NULL);
    zero_module mods[L];
    zero_param h[L];
    zero_param_desc pd;
    float buf[L * 2] = { 0 };
    int l;
    if (!CHECK(z != NULL, "zero_create failed")) return;
    for (l = 0; l < L; l++) {
        char name[16];
        snprintf(name, sizeof name, "h%d", l);
        CHECK(fx_module(z, name, 0, &mods[l]) == ZERO_OK, "module");
    }
    memset(&pd, 0, sizeof pd);
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = L; pd.shape[1] = 2;
    CHECK(zero_set_params_f32(z, buf) == ZERO_ERR_NOT_BUILT, "zero_set_params_f32 before zero_build");
    CHECK(zero_add_param_stack(z, mods, L, &pd, h) == ZERO_OK, "stack: %s", zero_last_error(z));
    CHECK(zero_param_offset(z, h[2]) == 4, "offset before zero_build");
    CHECK(zero_build(z) == ZERO_OK, "zero_build: %s", zero_last_error(z));
    pd.name = "v";
    CHECK(zero_add_param_stack(z, mods, L, &pd, h) == ZERO_ERR_ALREADY_BUILT, "a stack after zero_build");
    CHECK(strstr(zero_last_error(z), "zero_add_param_stack") != NULL, "message: %s", zero_last_error(z));
    CHECK(zero_num_params(z) == L * 2, "the model changed after zero_build");
    CHECK(zero_set_params_f32(NULL, buf) == ZERO_ERR_INVALID_ARG, "NULL ctx");
    CHECK(zero_set_params_f32(z, NULL) == ZERO_ERR_INVALID_ARG, "NULL values");
    CHECK(strstr(zero_last_error(z), "zero_set_params_f32") != NULL, "message: %s", zero_last_error(z));
    zero_destroy(z);
}

/* set-all then gather-all, and back, at every stage */
static void roundtrip_case(int stage, int world, zero_dtype dt, int nvme) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4), *b = (float *)malloc((size_t)N * 4);
    run c;
    test_begin("roundtrip_stage%d_world%d_%s%s", stage, world, zero_dtype_str(dt), nvme ? "_nvme" : "");
    if (CHECK(a && b && start(&c, MODE_ROUNDTRIP, stage, world, dt, nvme, a, b), "out of memory")) {
        fill(a, N, 11 + (uint64_t)stage, dt != ZERO_F32);
        fill(b, N, 23 + (uint64_t)world, dt != ZERO_F32);
        if (go(&c) == ZERO_OK) same_on_ranks(&c);
        finish(&c);
    }
    free(a);
    free(b);
    test_end();
}

/* zero_set_params_f32 is zero_param_set_f32 on each param: the same bits after training */
static void equal_case(int stage, int world, zero_dtype dt, int nvme) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4), *b = (float *)malloc((size_t)N * 4);
    run all, each;
    test_begin("set_all_equals_each_stage%d_world%d_%s%s", stage, world, zero_dtype_str(dt), nvme ? "_nvme" : "");
    if (CHECK(a && b && start(&all, MODE_SET_ALL, stage, world, dt, nvme, a, b) &&
              start(&each, MODE_SET_EACH, stage, world, dt, nvme, a, b), "out of memory")) {
        fill(a, N, 5, 0);
        fill(b, N, 6, 0);
        if (go(&all) == ZERO_OK && go(&each) == ZERO_OK) {
            same_on_ranks(&all);
            CHECK(memcmp(all.out[0], each.out[0], (size_t)N * 4) == 0, "zero_set_params_f32 and per-param sets differ");
            CHECK(memcmp(all.out[0], b, (size_t)N * 4) != 0, "the run did not train");
        }
        finish(&all);
        finish(&each);
    }
    free(a);
    free(b);
    test_end();
}

/* desc.flat_layout: trained llm.c's way through one pointer, bitwise the module-major run */
static void flat_case(int stage, int world, zero_dtype dt, int accum) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4), *b = (float *)malloc((size_t)N * 4);
    char dir[700];
    run flat, each;
    test_begin("flat_layout_stage%d_world%d_%s_accum%d", stage, world, zero_dtype_str(dt), accum);
    snprintf(dir, sizeof dir, "%s/ckpt_flat_s%d_w%d_%d_a%d", tmpdir, stage, world, (int)dt, accum);
    if (CHECK(a && b && start(&flat, MODE_FLAT, stage, world, dt, 0, a, b) &&
              start(&each, MODE_SET_EACH, stage, world, dt, 0, a, b), "out of memory")) {
        fill(a, N, 5, 0);
        fill(b, N, 6, 0);
        flat.accum = each.accum = accum;
        flat.ckpt = dir;
        if (go(&flat) == ZERO_OK && go(&each) == ZERO_OK) {
            same_on_ranks(&flat);
            CHECK(memcmp(flat.out[0], each.out[0], (size_t)N * 4) == 0, "the flat layout trained other values");
            CHECK(memcmp(flat.out[0], b, (size_t)N * 4) != 0, "the run did not train");
        }
        finish(&flat);
        finish(&each);
    }
    free(a);
    free(b);
    test_end();
}

/* desc.flat_layout's bytes: planned (the views' elements, unpadded), allocated as planned;
   out of range and stage 3 refused with a message */
static void test_flat_plan(void) {
    int s, f;
    for (s = 0; s <= 3; s++) {
        zero_plan pl[2];
        zero_stats st;
        for (f = 0; f < 2; f++) {
            zero_desc d;
            zero_ctx *z = NULL;
            model M;
            zero_result r;
            fx_desc(&d, NULL, s, ZERO_BF16, ZERO_OPTIM_ADAMW, 0.01);
            d.flat_layout = f;
            r = zero_create(&z, &d);
            if (s == 3 && f) {
                CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "flat_layout") &&
                      strstr(zero_last_error(NULL), "stage 3"), "stage 3 with flat_layout: %s: %s", zero_result_str(r),
                      zero_last_error(NULL));
                zero_destroy(z);
                continue;
            }
            if (!CHECK(r == ZERO_OK, "zero_create: %s", zero_last_error(NULL))) return;
            if (CHECK(add_model(z, &M) == ZERO_OK && zero_build(z) == ZERO_OK && zero_plan_get(z, &pl[f]) == ZERO_OK &&
                      zero_stats_get(z, &st) == ZERO_OK, "stage %d: %s", s, zero_last_error(z))) {
                int t, c;
                for (t = 0; t < ZERO_TIER_NUM; t++)
                    for (c = 0; c < ZERO_CAT_NUM; c++)
                        CHECK(st.bytes[t][c] == pl[f].bytes[t][c], "stage %d flat %d: tier %d cat %d: allocated %lld, "
                              "planned %lld", s, f, t, c, (long long)st.bytes[t][c], (long long)pl[f].bytes[t][c]);
            }
            zero_destroy(z);
        }
        if (s < 3) {
            int64_t N = total_numel(), g = s < 2 ? 2 * N : 0;
            CHECK(pl[1].flat_bytes == 2 * N + g && pl[0].flat_bytes == 0, "stage %d: flat_bytes %lld, expected %lld", s,
                  (long long)pl[1].flat_bytes, (long long)(2 * N + g));
            CHECK(pl[1].bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] - pl[0].bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] == 2 * N &&
                  pl[1].bytes[ZERO_TIER_DEVICE][ZERO_CAT_GRADS] - pl[0].bytes[ZERO_TIER_DEVICE][ZERO_CAT_GRADS] == g,
                  "stage %d: the views are not the params' and grads' difference", s);
        }
    }
    {
        zero_desc d;
        zero_ctx *z = NULL;
        fx_desc(&d, NULL, 0, ZERO_F32, ZERO_OPTIM_ADAMW, 0.01);
        d.flat_layout = 2;
        CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "flat_layout is 2"),
              "flat_layout 2: %s", zero_last_error(NULL));
        zero_destroy(z);
    }
}

/* a stack's slices, at stage 3 gathered per layer, are the client's [L, ...] tensor's */
static void layout_case(int stage, int world) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4);
    run c;
    test_begin("client_layout_stage%d_world%d", stage, world);
    if (CHECK(a && start(&c, MODE_LAYOUT, stage, world, ZERO_F32, 0, a, NULL), "out of memory")) {
        int64_t i;
        for (i = 0; i < N; i++) a[i] = (float)i;      /* an element's value is its place in the buffer */
        if (go(&c) == ZERO_OK) {
            same_on_ranks(&c);
            CHECK(memcmp(c.out[0], a, (size_t)N * 4) == 0, "the gather is not the client's buffer");
        }
        finish(&c);
    }
    free(a);
    test_end();
}

/* zero_ckpt_read_f32 is zero_gather_params_f32 at the save; a flipped byte is refused */
static void ckpt_case(int stage, int world, zero_dtype dt) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4), *got = (float *)malloc((size_t)N * 4);
    char dir[700];
    run c;
    test_begin("ckpt_read_stage%d_world%d_%s", stage, world, zero_dtype_str(dt));
    snprintf(dir, sizeof dir, "%s/ckpt_s%d_w%d_%d", tmpdir, stage, world, (int)dt);
    if (CHECK(a && got && start(&c, MODE_CKPT, stage, world, dt, 0, a, NULL), "out of memory")) {
        zero_ckpt *ck = NULL;
        struct zero_ckpt_info info;
        fill(a, N, 31, 0);
        c.ckpt = dir;
        if (go(&c) == ZERO_OK && CHECK(zero_ckpt_open(dir, NULL, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) {
            int i;
            same_on_ranks(&c);
            CHECK(zero_ckpt_info(ck, &info) == ZERO_OK && info.numel == N && info.num_params == NP, "info: %lld, %d",
                  (long long)info.numel, info.num_params);
            /* the manifest's params are the registration order */
            for (i = 0; i < NP; i++) {
                zero_ckpt_param_info pi;
                const tensor *t = i < 2 ? &tensors[i] : i < 2 + 5 * L ? &tensors[2 + (i - 2) / L]
                                : i < NP - 1 ? &tensors[7 + (i - 2 - 5 * L)] : NULL;
                if (!CHECK(zero_ckpt_param(ck, i, &pi) == ZERO_OK, "param %d", i)) break;
                CHECK(strcmp(pi.name, t ? t->name : "f") == 0, "manifest param %d is '%s'", i, pi.name);
            }
            memset(got, 0xff, (size_t)N * 4);
            CHECK(zero_ckpt_read_f32(ck, got) == ZERO_OK, "read: %s", zero_last_error(NULL));
            CHECK(memcmp(got, c.out[0], (size_t)N * 4) == 0, "zero_ckpt_read_f32 differs from the gather at the save");
            zero_ckpt_close(ck);
        }
        finish(&c);
    }
    free(a);
    free(got);
    test_end();
}

/* the reader's failures: NULL, out of memory, a flipped weight byte */
static void test_ckpt_read_errors(void) {
    int64_t N = total_numel();
    float *a = (float *)malloc((size_t)N * 4), *got = (float *)malloc((size_t)N * 4);
    char dir[700], path[1400];
    failing f = { 0, 0 };
    zero_allocator al = { fail_alloc, fail_free, &f };
    run c;
    snprintf(dir, sizeof dir, "%s/ckpt_bad", tmpdir);
    if (!CHECK(a && got && start(&c, MODE_CKPT, 2, 2, ZERO_BF16, 0, a, NULL), "out of memory")) goto out;
    fill(a, N, 41, 0);
    c.ckpt = dir;
    if (go(&c) == ZERO_OK) {
        zero_ckpt *ck = NULL;
        zero_ckpt_file_info fi;
        CHECK(zero_ckpt_read_f32(NULL, got) == ZERO_ERR_INVALID_ARG, "NULL ck");
        if (CHECK(zero_ckpt_open(dir, &al, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) {
            CHECK(zero_ckpt_read_f32(ck, NULL) == ZERO_ERR_INVALID_ARG, "NULL out");
            f.left = 0;
            f.armed = 1;
            CHECK(zero_ckpt_read_f32(ck, got) == ZERO_ERR_OUT_OF_MEMORY, "no memory");
            f.armed = 0;
            CHECK(strstr(zero_last_error(NULL), "zero_ckpt_read_f32") != NULL, "message: %s", zero_last_error(NULL));
            /* the first record's first weight (records start at byte 64 of a shard) */
            if (CHECK(zero_ckpt_file(ck, 0, &fi) == ZERO_OK, "file 0")) {
                int fd;
                unsigned char byte;
                snprintf(path, sizeof path, "%s/%s", dir, fi.name);
                fd = open(path, O_RDWR);
                if (CHECK(fd >= 0 && pread(fd, &byte, 1, 66) == 1, "%s: %s", path, strerror(errno))) {
                    byte ^= 0x10;
                    CHECK(pwrite(fd, &byte, 1, 66) == 1, "write");
                }
                if (fd >= 0) close(fd);
                CHECK(zero_ckpt_read_f32(ck, got) == ZERO_ERR_CORRUPT, "a flipped weight byte was read");
                CHECK(strstr(zero_last_error(NULL), "zero_ckpt_read_f32") && strstr(zero_last_error(NULL), "checksum"),
                      "message: %s", zero_last_error(NULL));
            }
            zero_ckpt_close(ck);
        }
    }
    finish(&c);
out:
    free(a);
    free(got);
}

static int count_files(const char *dir) {
    char cmd[700];
    FILE *p;
    int n = -1;
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -v '^ckpt' | wc -l", dir);
    if ((p = popen(cmd, "r"))) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

int main(void) {
    const char *t = getenv("TMPDIR");
    static const int worlds[2] = { 1, 3 };
    int s, w, dt;
    test_init();
    snprintf(tmpdir, sizeof tmpdir, "%s/zero_layout_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { printf("FAIL setup: mkdtemp: %s\n", strerror(errno)); return 1; }
    TEST_RUN(test_stack_register);
    TEST_RUN(test_stack_no_decay);
    TEST_RUN(test_stack_errors);
    TEST_RUN(test_stack_oom);
    TEST_RUN(test_stack_edges);
    TEST_RUN(test_call_errors);
    for (s = 0; s <= 3; s++)
        for (w = 0; w < 2; w++)
            for (dt = 0; dt < 2; dt++) roundtrip_case(s, worlds[w], dt ? ZERO_BF16 : ZERO_F32, 0);
    for (w = 0; w < 2; w++)
        for (dt = 0; dt < 2; dt++) roundtrip_case(3, worlds[w], dt ? ZERO_BF16 : ZERO_F32, 1);
    equal_case(0, 1, ZERO_F32, 0);
    equal_case(1, 3, ZERO_BF16, 0);
    equal_case(2, 3, ZERO_F32, 0);
    equal_case(3, 3, ZERO_BF16, 0);
    equal_case(3, 3, ZERO_BF16, 1);
    equal_case(3, 1, ZERO_F32, 1);
    layout_case(3, 3);
    layout_case(0, 1);
    TEST_RUN(test_flat_plan);
    flat_case(0, 1, ZERO_F32, 1);
    flat_case(0, 3, ZERO_BF16, 2);
    flat_case(1, 3, ZERO_F32, 2);
    flat_case(1, 1, ZERO_BF16, 1);
    flat_case(2, 3, ZERO_BF16, 1);
    flat_case(2, 1, ZERO_F32, 2);
    ckpt_case(0, 1, ZERO_F32);
    ckpt_case(3, 3, ZERO_BF16);
    ckpt_case(1, 3, ZERO_F32);
    TEST_RUN(test_ckpt_read_errors);
    test_begin("nvme_files_removed");
    CHECK(count_files(tmpdir) == 0, "offload files left behind in %s", tmpdir);
    test_end();
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) { }
    }
    return test_summary();
}
