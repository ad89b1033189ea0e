/* tests/test_tied.c - shared (tied) parameters: a weight used in two places of the model
   (GPT-2's output layer is its token embedding), whose gradient arrives in two windows of
   the backward pass.

   The model: module "embed" {wte [V, C], pos [4, C]}, L blocks {w [C, C]}, module "final"
   {g [C]} whose output layer is wte. Three ways to write the same trainer:
     TIE_API     "final" holds a tied param "head" -> embed.wte (zero_add_tied_param):
                 the head's gradient goes into zero_param_grad(head) in final's window
     TIE_REFETCH "embed" is registered shared; the head's window fetches embed again and
                 adds into zero_param_grad(wte), embed's window adds the rest later
     REF         no tie: the trainer keeps the head's gradient in its own buffer and adds
                 it by hand into wte's gradient in embed's window, before the embedding's
   Each must give bitwise the params of REF at every stage, world size, dtype, with
   gradient accumulation and with the optimizer state offloaded; REF itself is bitwise
   the same at every stage (accum 1). Plus: a tied weight whose gradient alone exceeds the
   default staging ring trains at stages 2 and 3; the registration errors; the fetch of a
   module with ties fetches the owner; the plan equals what is allocated. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

enum { TIE_API, TIE_REFETCH, REF };

/* under a sanitizer (slower by 5-20x) fewer world sizes and one large stage */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#  define SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#    define SANITIZED 1
#  endif
#endif
#ifndef SANITIZED
#  define SANITIZED 0
#endif
static const char *mode_name[] = { "api", "refetch", "ref" };

typedef struct cfg {
    int mode, stage, world, accum, steps, L;
    int64_t V, C;
    zero_dtype dtype, accum_dtype;
    zero_offload_tier off_opt, off_par;
    const char *nvme_dir;
    int shared_flag;                /* TIE_REFETCH: register embed shared (0: provoke the full ring) */
    int head_last;                  /* TIE_API, REF: the head's backward window after the embedding's
                                       (the owner is ready before its user) */
    float *out;                     /* rank 0: the params after training, zero_num_params floats */
    zero_result fail;               /* rank 0's first failure */
    char msg[512];
    zero_plan plan;                 /* rank 0, after zero_build */
    zero_stats stats;
    int owner_fetched_ok;           /* stage 3, TIE_API: fetching final made wte readable, releasing let it go */
} cfg;

/* the gradient contributions: functions of the values the rank saw, the rank, the position */
static float g_embed(float w, int rank, int64_t i, int micro) { return 0.5f * sinf(0.37f * w + 0.11f * (float)rank + 0.013f * (float)i + (float)micro); }
static float g_head(float w, int rank, int64_t i, int micro) { return cosf(0.29f * w - 0.07f * (float)rank + 0.017f * (float)i - 0.5f * (float)micro); }
static float g_other(float w, int rank, int64_t i, int micro) { return 0.25f * sinf(w + 0.3f * (float)rank + 0.05f * (float)i + 0.2f * (float)micro); }

typedef struct model {
    zero_ctx *z;
    zero_module embed, final, *blk;
    zero_param wte, pos, g, head, *bw;
    float *wte_seen, *gbuf;         /* wte's values seen in forward (f32), a gradient scratch */
} model;

/* values of p (n elements) as f32 into dst */
static zero_result read_f32(model *m, zero_param p, float *dst, int64_t n, zero_dtype dt) {
    const void *src = zero_param_data(m->z, p);
    if (!src) return ZERO_ERR_STATE;
    zero_to_f32(dst, src, dt, n);
    return ZERO_OK;
}

/* grad(p) += f(values) */
static zero_result add_grad(model *m, zero_param p, const float *vals, int64_t n, zero_dtype gdt,
                            float (*f)(float, int, int64_t, int), int rank, int micro) {
    void *g = zero_param_grad(m->z, p);
    int64_t i;
    if (!g) return ZERO_ERR_STATE;
    for (i = 0; i < n; i++) m->gbuf[i] = f(vals[i], rank, i, micro);
    zero_add_f32(g, gdt, m->gbuf, n);
    return ZERO_OK;
}

static int64_t model_numel(const cfg *c) { return c->V * c->C + 4 * c->C + c->L * c->C * c->C + c->C; }

#define TRY(x) do { if ((r = (x)) != ZERO_OK) goto done; } while (0)

/* final's backward window: its own gradient, and the head's (TIE_API: through the tie) */
static zero_result final_window(model *m, const cfg *c, int rank, int mb) {
    float *vals = (float *)malloc(sizeof(float) * (size_t)c->C);
    zero_result r;
    if (!vals) return ZERO_ERR_OUT_OF_MEMORY;
    TRY(zero_fetch(m->z, m->final));
    TRY(read_f32(m, m->g, vals, c->C, c->dtype));
    TRY(add_grad(m, m->g, vals, c->C, c->dtype, g_other, rank, mb));
    if (c->mode == TIE_API) TRY(add_grad(m, m->head, m->wte_seen, c->V * c->C, c->dtype, g_head, rank, mb));
    TRY(zero_release(m->z, m->final));
    TRY(zero_grads_ready(m->z, m->final));
done:
    free(vals);
    return r;
}

static zero_result add_hgrad(model *m, const float *hgrad, int64_t n, zero_dtype dt) {
    void *g = zero_param_grad(m->z, m->wte);
    if (!g) return ZERO_ERR_STATE;
    zero_add_f32(g, dt, hgrad, n);
    return ZERO_OK;
}

static zero_result rank_fn(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    model m;
    zero_desc d;
    zero_module_desc md;
    zero_result r = ZERO_OK;
    int64_t V = c->V, C = c->C, nwte = V * C, i;
    float *vals = NULL, *hgrad = NULL, *init = NULL;
    int l, step, micro;
    char name[32];
    memset(&m, 0, sizeof m);
    fx_desc(&d, comm, c->stage, c->dtype, ZERO_OPTIM_ADAMW, 0.01);
    d.accum_steps = c->accum;
    d.grad_accum_dtype = c->accum_dtype;
    d.offload_optimizer = c->off_opt;
    d.offload_params = c->off_par;
    if (c->nvme_dir) d.offload.nvme_dirs[0] = c->nvme_dir;
    m.blk = (zero_module *)calloc((size_t)c->L, sizeof *m.blk);
    m.bw = (zero_param *)calloc((size_t)c->L, sizeof *m.bw);
    vals = (float *)malloc(sizeof(float) * (size_t)(nwte > C * C ? nwte : C * C));
    hgrad = (float *)malloc(sizeof(float) * (size_t)nwte);
    m.wte_seen = (float *)malloc(sizeof(float) * (size_t)nwte);
    m.gbuf = (float *)malloc(sizeof(float) * (size_t)(nwte > C * C ? nwte : C * C));
    if (!m.blk || !m.bw || !vals || !hgrad || !m.wte_seen || !m.gbuf) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    TRY(zero_create(&m.z, &d));
    memset(&md, 0, sizeof md);
    md.name = "embed";
    md.shared = c->mode == TIE_REFETCH && c->shared_flag;
    TRY(zero_add_module(m.z, &md, &m.embed));
    TRY(fx_param(m.z, m.embed, "wte", V, C, 0, &m.wte));
    TRY(fx_param(m.z, m.embed, "pos", 4, C, 0, &m.pos));
    for (l = 0; l < c->L; l++) {
        snprintf(name, sizeof name, "block%d", l);
        TRY(fx_module(m.z, name, 0, &m.blk[l]));
        TRY(fx_param(m.z, m.blk[l], "w", C, C, 0, &m.bw[l]));
    }
    TRY(fx_module(m.z, "final", 0, &m.final));
    TRY(fx_param(m.z, m.final, "g", C, 0, 1, &m.g));
    if (c->mode == TIE_API) TRY(zero_add_tied_param(m.z, m.final, "head", m.wte, &m.head));
    TRY(zero_build(m.z));
    if (rank == 0) TRY(zero_plan_get(m.z, &c->plan));
    /* the same initial values on every rank, by position in the flat order */
    if (zero_num_params(m.z) != model_numel(c)) { r = ZERO_ERR_STATE; goto done; }
    init = (float *)malloc(sizeof(float) * (size_t)model_numel(c));
    if (!init) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    {
        uint64_t s = 0x9e3779b97f4a7c15ull;
        int64_t off = 0;
        for (i = 0; i < model_numel(c); i++) init[i] = 0.5f * fx_frand(&s);
        TRY(zero_param_set_f32(m.z, m.wte, init + off)); off += nwte;
        TRY(zero_param_set_f32(m.z, m.pos, init + off)); off += 4 * C;
        for (l = 0; l < c->L; l++) { TRY(zero_param_set_f32(m.z, m.bw[l], init + off)); off += C * C; }
        TRY(zero_param_set_f32(m.z, m.g, init + off));
    }
    for (step = 0; step < c->steps; step++) {
        for (micro = 0; micro < c->accum; micro++) {
            int mb = step * c->accum + micro;
            /* forward: embed, blocks, final (+ the head: wte) */
            TRY(zero_fetch(m.z, m.embed));
            TRY(read_f32(&m, m.pos, vals, 4 * C, c->dtype));
            if (c->mode == REF) TRY(read_f32(&m, m.wte, m.wte_seen, nwte, c->dtype));
            TRY(zero_release(m.z, m.embed));
            for (l = 0; l < c->L; l++) {
                TRY(zero_fetch(m.z, m.blk[l]));
                TRY(zero_release(m.z, m.blk[l]));
            }
            TRY(zero_fetch(m.z, m.final));
            if (c->mode == TIE_API) {
                TRY(read_f32(&m, m.head, m.wte_seen, nwte, c->dtype));
                if (c->stage == 3 && rank == 0 && mb == 0) c->owner_fetched_ok = zero_param_data(m.z, m.wte) != NULL;
            }
            TRY(zero_release(m.z, m.final));
            if (c->mode == TIE_API && c->stage == 3 && rank == 0 && mb == 0 && zero_param_data(m.z, m.wte) != NULL)
                c->owner_fetched_ok = 0;        /* released with final: not readable any more */
            if (c->mode == TIE_REFETCH) {
                TRY(zero_fetch(m.z, m.embed));
                TRY(read_f32(&m, m.wte, m.wte_seen, nwte, c->dtype));
                TRY(zero_release(m.z, m.embed));
            }
            /* backward: final and the head first (or last) */
            if (!c->head_last) TRY(final_window(&m, c, rank, mb));
            if (c->mode == TIE_REFETCH) {
                TRY(zero_fetch(m.z, m.embed));
                TRY(add_grad(&m, m.wte, m.wte_seen, nwte, c->dtype, g_head, rank, mb));
                TRY(zero_release(m.z, m.embed));
            }
            if (c->mode == REF)     /* by hand: the head's gradient waits in the trainer's buffer */
                for (i = 0; i < nwte; i++) hgrad[i] = g_head(m.wte_seen[i], rank, i, mb);
            for (l = c->L - 1; l >= 0; l--) {
                TRY(zero_fetch(m.z, m.blk[l]));
                TRY(read_f32(&m, m.bw[l], vals, C * C, c->dtype));
                TRY(add_grad(&m, m.bw[l], vals, C * C, c->dtype, g_other, rank, mb));
                TRY(zero_release(m.z, m.blk[l]));
                TRY(zero_grads_ready(m.z, m.blk[l]));
            }
            TRY(zero_fetch(m.z, m.embed));
            if (c->mode == REF && !c->head_last) TRY(add_hgrad(&m, hgrad, nwte, c->dtype));
            TRY(read_f32(&m, m.wte, vals, nwte, c->dtype));
            TRY(add_grad(&m, m.wte, vals, nwte, c->dtype, g_embed, rank, mb));
            if (c->mode == REF && c->head_last) TRY(add_hgrad(&m, hgrad, nwte, c->dtype));
            TRY(read_f32(&m, m.pos, vals, 4 * C, c->dtype));
            TRY(add_grad(&m, m.pos, vals, 4 * C, c->dtype, g_other, rank, mb));
            TRY(zero_release(m.z, m.embed));
            TRY(zero_grads_ready(m.z, m.embed));
            if (c->head_last) TRY(final_window(&m, c, rank, mb));
        }
        r = zero_step(m.z);
        if (r != ZERO_OK) goto done;
    }
    if (rank == 0) TRY(zero_stats_get(m.z, &c->stats));
    TRY(zero_gather_params_f32(m.z, rank == 0 ? c->out : init));
done:
    if (r != ZERO_OK && rank == 0 && c->fail == ZERO_OK) {
        c->fail = r;
        snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(m.z));
    }
    zero_destroy(m.z);
    free(m.blk); free(m.bw); free(vals); free(hgrad); free(m.wte_seen); free(m.gbuf); free(init);
    return r;
}


/* runs c; rank 0's params land in c->out (allocated here) */
static zero_result run(cfg *c) {
    zero_result r;
    c->out = (float *)calloc((size_t)model_numel(c), sizeof(float));
    c->fail = ZERO_OK;
    c->msg[0] = 0;
    if (!c->out) return ZERO_ERR_OUT_OF_MEMORY;
    r = zero_run_local(c->world, rank_fn, c);
    if (r != ZERO_OK && c->fail == ZERO_OK) { c->fail = r; snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(NULL)); }
    return r;
}

static int same_bits(const float *a, const float *b, int64_t n, int64_t *first) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) { *first = i; return 0; }
    return 1;
}

static cfg base_cfg(int mode, int stage, int world, zero_dtype dt, int accum) {
    cfg c;
    memset(&c, 0, sizeof c);
    c.mode = mode; c.stage = stage; c.world = world; c.dtype = dt; c.accum = accum;
    c.steps = 3; c.L = 3; c.V = 37; c.C = 24; c.shared_flag = 1;
    return c;
}

/* runs ref and c; c's params must be bitwise ref's */
static void run_same(cfg *ref, cfg *c) {
    int64_t at = -1;
    run(ref);
    run(c);
    if (CHECK(ref->fail == ZERO_OK, "REF failed: %s", ref->msg) &&
        CHECK(c->fail == ZERO_OK, "failed: %s (%s)", zero_result_str(c->fail), c->msg))
        CHECK(same_bits(c->out, ref->out, model_numel(c), &at), "params differ at element %lld", (long long)at);
    free(ref->out);
    free(c->out);
}

/* every mode equals REF at the same config; accum 1: equals REF at stage 0 too */
static void test_equivalence(void) {
    static const zero_dtype dts[] = { ZERO_F32, ZERO_BF16 };
    static const int worlds[] = { 1, 2, 3 };
    int di, wi, stage, accum, mode;
    for (di = SANITIZED; di < 2; di++)         /* sanitized: bf16 only */
        for (wi = 0; wi < 3; wi += SANITIZED ? 2 : 1)
            for (accum = 1; accum <= 2; accum++) {
                cfg ref0 = base_cfg(REF, 0, worlds[wi], dts[di], accum);
                run(&ref0);
                for (stage = 0; stage <= 3; stage++) {
                    cfg ref = base_cfg(REF, stage, worlds[wi], dts[di], accum);
                    run(&ref);
                    for (mode = TIE_API; mode <= TIE_REFETCH; mode++) {
                        cfg c = base_cfg(mode, stage, worlds[wi], dts[di], accum);
                        int64_t at = -1;
                        test_begin("tied_%s_stage%d_world%d_%s_accum%d", mode_name[mode], stage, worlds[wi],
                                   zero_dtype_str(dts[di]), accum);
                        run(&c);
                        if (CHECK(ref.fail == ZERO_OK, "REF failed: %s", ref.msg) &&
                            CHECK(c.fail == ZERO_OK, "failed: %s (%s)", zero_result_str(c.fail), c.msg)) {
                            CHECK(same_bits(c.out, ref.out, model_numel(&c), &at),
                                  "params differ from the by-hand sum at element %lld: %.9g vs %.9g", (long long)at,
                                  (double)c.out[at], (double)ref.out[at]);
                            if (accum == 1 && ref0.fail == ZERO_OK)
                                CHECK(same_bits(c.out, ref0.out, model_numel(&c), &at),
                                      "params differ from stage 0 at element %lld", (long long)at);
                            if (stage == 3 && mode == TIE_API)
                                CHECK(c.owner_fetched_ok, "fetching 'final' did not fetch 'embed' (or releasing kept it)");
                            if (stage == 3)     /* the owner fetched with its user is gathered ahead too */
                                CHECK(c.stats.prefetch_misses == 0 && c.stats.prefetch_hits > 0,
                                      "prefetch: %lld hits, %lld misses after the first step",
                                      (long long)c.stats.prefetch_hits, (long long)c.stats.prefetch_misses);
                            CHECK(memcmp(c.plan.bytes, c.stats.bytes, sizeof c.plan.bytes) == 0 &&
                                  c.plan.total_bytes == c.stats.total_bytes,
                                  "allocated %lld bytes, planned %lld", (long long)c.stats.total_bytes,
                                  (long long)c.plan.total_bytes);
                        }
                        test_end();
                        free(c.out);
                    }
                    free(ref.out);
                }
                free(ref0.out);
            }
}

/* stage 3, blocks larger than embed + final (train_gpt's shape): the user and the owner
   released together at the end of the forward pass are gathered again ahead of the
   backward pass's first fetch (no miss after the first step) */
static void test_prefetch_tied(void) {
    int mode;
    for (mode = TIE_API; mode <= TIE_REFETCH; mode++) {
        cfg c = base_cfg(mode, 3, 2, ZERO_BF16, 1);
        c.V = 8; c.steps = 4;
        test_begin("tied_prefetch_%s", mode_name[mode]);
        run(&c);
        if (CHECK(c.fail == ZERO_OK, "failed: %s (%s)", zero_result_str(c.fail), c.msg))
            CHECK(c.stats.prefetch_misses == 0 && c.stats.prefetch_hits > 0, "prefetch: %lld hits, %lld misses",
                  (long long)c.stats.prefetch_hits, (long long)c.stats.prefetch_misses);
        test_end();
        free(c.out);
    }
}

/* the owner's zero_grads_ready before its user's window: its reduction waits for the user */
static void test_head_last(void) {
    int stage, accum, di;
    for (di = SANITIZED; di < 2; di++)
        for (accum = 1; accum <= 2; accum++)
            for (stage = 0; stage <= 3; stage++) {
                zero_dtype dt = di ? ZERO_BF16 : ZERO_F32;
                cfg ref = base_cfg(REF, stage, 2, dt, accum), c = base_cfg(TIE_API, stage, 2, dt, accum);
                ref.head_last = c.head_last = 1;
                test_begin("tied_head_last_stage%d_%s_accum%d", stage, zero_dtype_str(dt), accum);
                run_same(&ref, &c);
                test_end();
            }
}

/* staging mode at stages 0-1 (fp32 accumulation of bf16 gradients), and the offload tiers */
static void test_tiers(void) {
    char dir[] = "/tmp/zero_tied_XXXXXX";
    int have_dir = mkdtemp(dir) != NULL, k, mode;
    for (k = 0; k < 4; k++)
        for (mode = TIE_API; mode <= TIE_REFETCH; mode++) {
            cfg ref, c;
            static const char *what[] = { "accumf32_stage1", "offload_host_stage2", "offload_nvme_stage3",
                                          "params_nvme_stage3" };
            ref = base_cfg(REF, k == 0 ? 1 : k == 1 ? 2 : 3, 2, ZERO_BF16, 2);
            if (k == 0) ref.accum_dtype = ZERO_F32;
            if (k == 1) ref.off_opt = ZERO_OFFLOAD_HOST;
            if (k >= 2) { ref.off_opt = ZERO_OFFLOAD_NVME; ref.nvme_dir = dir; }
            if (k == 3) ref.off_par = ZERO_OFFLOAD_NVME;
            c = ref;
            c.mode = mode;
            test_begin("tied_%s_%s", mode_name[mode], what[k]);
            if (k >= 2 && !have_dir) { test_skip("mkdtemp: %s", strerror(errno)); test_end(); continue; }
            run_same(&ref, &c);
            test_end();
        }
    if (have_dir) rmdir(dir);
}

/* the tied weight's gradient alone is larger than the default staging ring (2 x 16 MiB):
   with a tie it trains at stages 2 and 3 with the defaults; registered without one, the
   ring fills and the message names the module and the cure */
static void test_large(void) {
    int stage, mode;
#if defined(__SANITIZE_THREAD__)
    /* 8.7M params: 48 s of TSan's time alone, for a staging ring the plain and ASan builds
       check the same way (its threads are test_prefetch's and test_equiv's under TSan too) */
    test_begin("tied_large");
    test_skip("the ThreadSanitizer build leaves it to the plain and ASan builds");
    test_end();
    return;
#endif
    for (stage = SANITIZED ? 3 : 2; stage <= 3; stage++)
        for (mode = TIE_API; mode <= TIE_REFETCH + 1; mode++) {
            cfg c = base_cfg(mode > TIE_REFETCH ? TIE_REFETCH : mode, stage, 2, ZERO_F32, 1);
            c.V = 8500; c.C = 1024; c.L = 2; c.steps = 2;
            c.shared_flag = mode <= TIE_REFETCH;
            test_begin("tied_large_%s_stage%d", mode > TIE_REFETCH ? "unshared_fails" : mode_name[mode], stage);
            CHECK(c.V * c.C * 4 > ((int64_t)32 << 20), "the tied gradient must exceed 32 MiB");
            run(&c);
            if (mode <= TIE_REFETCH) {
                CHECK(c.fail == ZERO_OK, "failed: %s (%s)", zero_result_str(c.fail), c.msg);
                CHECK(c.fail != ZERO_OK || c.stats.steps == 2, "steps %lld", (long long)c.stats.steps);
                CHECK(c.fail != ZERO_OK || (memcmp(c.plan.bytes, c.stats.bytes, sizeof c.plan.bytes) == 0),
                      "allocated %lld bytes, planned %lld", (long long)c.stats.total_bytes, (long long)c.plan.total_bytes);
            } else {
                /* zero_param_grad returned NULL (the trainer's ZERO_ERR_STATE) with the message */
                CHECK(c.fail == ZERO_ERR_STATE && strstr(c.msg, "gradient staging"), "got %s (%s)",
                      zero_result_str(c.fail), c.msg);
                CHECK(strstr(c.msg, "'embed'") && strstr(c.msg, "shared"), "message: %s", c.msg);
            }
            test_end();
            free(c.out);
        }
}

/* registration errors, and misuse that the step catches */
typedef struct errcase { int which; zero_result got, got2; char msg[512]; } errcase;
static zero_result err_fn(zero_comm *comm, int rank, void *user) {
    errcase *e = (errcase *)user;
    zero_ctx *z = NULL;
    zero_desc d;
    zero_module a, b, c2;
    zero_param wa, wb, t, t2;
    zero_result r;
    (void)rank;
    fx_desc(&d, comm, 3, ZERO_F32, ZERO_OPTIM_ADAMW, 0.01);
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    fx_module(z, "a", 0, &a); fx_module(z, "b", 0, &b); fx_module(z, "c", 0, &c2);
    fx_param(z, a, "w", 8, 4, 0, &wa); fx_param(z, b, "w", 8, 4, 0, &wb);
    switch (e->which) {
    case 0: e->got = zero_add_tied_param(z, b, "w", wa, &t); break;               /* name taken in b */
    case 1: { zero_param bad; bad.id = 12345; e->got = zero_add_tied_param(z, b, "t", bad, &t); break; }
    case 2: e->got = zero_add_tied_param(NULL, b, "t", wa, &t); break;
    case 3: e->got = zero_add_tied_param(z, b, NULL, wa, &t); break;
    case 4:     /* a chain: b uses a's w, then c would tie to b's w */
        zero_add_tied_param(z, b, "t", wa, &t);
        e->got = zero_add_tied_param(z, c2, "t", wb, &t2);
        break;
    case 5: {   /* a's params are tied to: a may not use ties itself */
        zero_param wc;
        fx_param(z, c2, "w", 4, 0, 0, &wc);
        zero_add_tied_param(z, b, "t", wa, &t);
        e->got = zero_add_tied_param(z, a, "t", wc, &t2);
        break;
    }
    case 6:     /* after zero_build */
        fx_param(z, c2, "w", 4, 0, 0, &t2);
        zero_build(z);
        e->got = zero_add_tied_param(z, c2, "t", wa, &t);
        break;
    case 7:     /* a module with only a tied param has no params of its own */
        zero_add_tied_param(z, c2, "t", wa, &t);
        e->got = zero_build(z);
        break;
    case 8:     /* the user module never calls zero_grads_ready: the owner's gradient is incomplete */
        fx_param(z, c2, "w", 4, 0, 0, &t2);
        zero_add_tied_param(z, b, "t", wa, &t);
        if ((r = zero_build(z)) != ZERO_OK) { e->got = r; break; }
        zero_fetch(z, b); zero_release(z, b);
        zero_fetch(z, a); zero_release(z, a); zero_grads_ready(z, a);
        zero_grads_ready(z, c2);
        e->got = zero_step(z);
        break;
    case 9:     /* the tied handle is a param handle: numel, set, data; a foreign module is refused */
        fx_param(z, c2, "w", 4, 0, 0, &t2);
        zero_add_tied_param(z, b, "t", wa, &t);
        e->got = zero_param_numel(z, t) == 32 ? ZERO_OK : ZERO_ERR_STATE;
        { zero_module bad; bad.id = 777; e->got2 = zero_add_tied_param(z, bad, "u", wa, &t2); }
        break;
    case 10:    /* a tie within one module (an alias): refused */
        e->got = zero_add_tied_param(z, a, "w2", wa, &t);
        break;
    case 11:    /* a tie of a tied handle (a chain): refused, naming the param to tie to */
        zero_add_tied_param(z, b, "t", wa, &t);
        e->got = zero_add_tied_param(z, c2, "t", t, &t2);
        break;
    case 12: {  /* a tie's safetensors key ("c.x.h") taken by a param of module "c.x" (name "h"): refused */
        zero_module cx;
        fx_module(z, "c.x", 0, &cx);
        zero_add_tied_param(z, c2, "x.h", wa, &t);
        e->got = fx_param(z, cx, "h", 4, 0, 0, &t2);
        break;
    }
    case 13:    /* ',' or '=' in a tie's name: the metadata's separators */
        e->got = zero_add_tied_param(z, b, "t=1", wa, &t);
        break;
    }
    snprintf(e->msg, sizeof e->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    return ZERO_OK;
}

/* safetensors export of a tied model (#27 item 6): "__metadata__" names the tie; with
   tied_copies the tied param is also a tensor under its user's name, equal to its owner;
   zero_load_safetensors reads either file back */
typedef struct stjob { char dir[256]; int ok_meta, ok_copy, ok_plain, loaded; char msg[512]; } stjob;
/* the data of tensor `name` in a safetensors file b (header json at b + 8): its bytes */
static const char *st_data(const char *b, const char *name, long *bytes) {
    char key[128];
    const char *at, *o;
    long long lo, hi, hlen = 0;
    int k;
    for (k = 0; k < 8; k++) hlen |= (long long)(unsigned char)b[k] << (8 * k);
    snprintf(key, sizeof key, "\"%s\":{", name);
    if (!(at = strstr(b + 8, key)) || at > b + 8 + hlen || !(o = strstr(at, "\"data_offsets\":[")) ||
        sscanf(o + 16, "%lld,%lld", &lo, &hi) != 2)
        return NULL;
    *bytes = (long)(hi - lo);
    return b + 8 + hlen + lo;
}
static zero_result st_fn(zero_comm *comm, int rank, void *user) {
    stjob *j = (stjob *)user;
    zero_ctx *z = NULL;
    zero_desc d;
    zero_module a, b;
    zero_param wa, wb, t;
    zero_export_desc ed;
    char plain[300], copies[300];
    float v[32];
    long n = 0, na = 0, nt = 0;
    char *f;
    const char *da, *dt;
    zero_result r;
    int k;
    (void)rank;
    snprintf(plain, sizeof plain, "%s/plain.safetensors", j->dir);
    snprintf(copies, sizeof copies, "%s/copies.safetensors", j->dir);
    fx_desc(&d, comm, 3, ZERO_F32, ZERO_OPTIM_ADAMW, 0.01);
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    fx_module(z, "a", 0, &a); fx_module(z, "b", 0, &b);
    fx_param(z, a, "w", 8, 4, 0, &wa); fx_param(z, b, "w", 8, 4, 0, &wb);
    TRY(zero_add_tied_param(z, b, "head", wa, &t));
    TRY(zero_build(z));
    for (k = 0; k < 32; k++) v[k] = (float)k * 0.25f - 1.0f;
    TRY(zero_param_set_f32(z, wa, v));
    for (k = 0; k < 32; k++) v[k] = (float)k;
    TRY(zero_param_set_f32(z, wb, v));
    TRY(zero_export_safetensors(z, plain, ZERO_F32));
    memset(&ed, 0, sizeof ed);
    ed.tied_copies = 1;
    TRY(zero_export_safetensors_ex(z, copies, &ed));
    if ((f = test_slurp(plain, &n)) != NULL) {
        j->ok_meta = strstr(f + 8, "\"__metadata__\":{\"tied\":\"b.head=a.w\"}") != NULL;
        j->ok_plain = st_data(f, "b.head", &nt) == NULL && st_data(f, "a.w", &na) != NULL;
        free(f);
    }
    if ((f = test_slurp(copies, &n)) != NULL) {
        da = st_data(f, "a.w", &na);
        dt = st_data(f, "b.head", &nt);
        j->ok_copy = da && dt && na == 128 && nt == 128 && memcmp(da, dt, 128) == 0 &&
                     strstr(f + 8, "\"tied\":\"b.head=a.w\"") != NULL;
        free(f);
    }
    for (k = 0; k < 32; k++) v[k] = 0.0f;
    TRY(zero_param_set_f32(z, wa, v));
    TRY(zero_load_safetensors(z, copies));
    TRY(zero_fetch(z, b));
    j->loaded = ((const float *)zero_param_data(z, t))[5] == 0.25f;
    TRY(zero_release(z, b));
done:
    snprintf(j->msg, sizeof j->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    return r;
}
static void test_export_ties(void) {
    static stjob j;
    const char *tmp = getenv("TMPDIR");
    zero_result r;
    memset(&j, 0, sizeof j);
    snprintf(j.dir, sizeof j.dir, "%s/zero_tied_st_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    test_begin("tied_export_safetensors");
    if (CHECK(mkdtemp(j.dir) != NULL, "mkdtemp")) {
        char p[300];
        r = zero_run_local(1, st_fn, &j);
        CHECK(r == ZERO_OK, "%s: %s", zero_result_str(r), j.msg);
        CHECK(j.ok_meta && j.ok_plain, "plain export: metadata %d, no copy and a.w present %d", j.ok_meta, j.ok_plain);
        CHECK(j.ok_copy, "tied_copies: b.head is not a.w's bytes (or the tie is not in the metadata)");
        CHECK(j.loaded, "zero_load_safetensors of the file with copies did not set a.w");
        snprintf(p, sizeof p, "%s/plain.safetensors", j.dir); unlink(p);
        snprintf(p, sizeof p, "%s/copies.safetensors", j.dir); unlink(p);
        rmdir(j.dir);
    }
    test_end();
}

static void test_errors(void) {
    static const zero_result want[] = { ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_HANDLE, ZERO_ERR_INVALID_ARG,
                                        ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_ARG,
                                        ZERO_ERR_ALREADY_BUILT, ZERO_ERR_INVALID_SIZE, ZERO_ERR_GRADS_NOT_READY,
                                        ZERO_OK, ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_ARG,
                                        ZERO_ERR_INVALID_ARG };
    static const char *names[] = { "name_taken", "bad_target", "null_ctx", "null_name", "chain", "owner_uses_ties",
                                   "after_build", "only_tied", "user_not_ready", "handle", "same_module",
                                   "tie_of_a_tie", "key_clash", "metadata_separator" };
    static const char *words[] = { "already has", "not a param", "", "NULL", "uses tied params itself",
                                   "owns params", "after zero_build", "of its own", "tied params whose users", "",
                                   "same module", "tie to the param it uses, 'a.w'", "same safetensors key as the tied",
                                   "',' or '='" };
    int k;
    for (k = 0; k < 14; k++) {
        errcase e;
        memset(&e, 0, sizeof e);
        e.which = k;
        test_begin("tied_error_%s", names[k]);
        zero_run_local(1, err_fn, &e);
        CHECK(e.got == want[k], "got %s, want %s (%s)", zero_result_str(e.got), zero_result_str(want[k]), e.msg);
        if (words[k][0] && k != 2) CHECK(strstr(e.msg, words[k]) != NULL, "message lacks '%s': %s", words[k], e.msg);
        if (k == 9) CHECK(e.got2 == ZERO_ERR_INVALID_HANDLE, "foreign module: %s", zero_result_str(e.got2));
        test_end();
    }
}

int main(void) {
    test_init();
    test_errors();
    test_export_ties();
    test_equivalence();
    test_head_last();
    test_prefetch_tied();
    test_tiers();
    test_large();
    return test_summary();
}
