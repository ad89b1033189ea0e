/* test_errors.c - every bad-input path of zero.h, one test each.

   Each test asserts the exact zero_result, that zero_last_error (of the context, or
   NULL for the calling thread when there is no context) is a non-empty sentence,
   and, where the library logs, that a recording logger saw the expected
   zero_log_item. Groups:
     create_*        invalid stage, sizes, dtypes in the desc
     param_* total_* invalid shapes and overflowing sizes
     null_*          NULL out / desc / ctx pointers
     built_*         registering after zero_build
     handle_*        unknown, zero and foreign handles
     grads_not_ready_stage*   zero_step before every module's grads are ready (and
                              nothing is lost once they are)
     not_built_*     training calls before zero_build
     not_fetched_*   stage-3 param data of an unfetched module
     mismatch_*      ranks registering different models: ZERO_ERR_MISMATCH, quickly
     timeout_*       a rank that never arrives: ZERO_ERR_TIMEOUT (or COMM), quickly; a rank slow
                     inside an all-reduce that writes into the others' buffers
     f16_overflow_* bf16_nan_*   non-finite gradients: ZERO_STEP_SKIPPED, params untouched
     over_cap, oom_*             memory caps and allocation failures (no leaks) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <math.h>

/* ---- a recording logger ---------------------------------------------------------- */
typedef struct rec_log {
    zero__mutex mu;
    int count[ZERO_LOGITEM_NUM];
    zero_log_level level[ZERO_LOGITEM_NUM];    /* the level an item was last logged at */
    int bad_items;                  /* items outside the enum */
    int empty_messages;
    int calls;
} rec_log;

static void rec_func(void *ud, zero_log_level level, zero_log_item item, int rank, const char *message) {
    rec_log *r = (rec_log *)ud;
    (void)rank;
    zero__mutex_lock(&r->mu);
    r->calls++;
    if ((int)item >= 0 && item < ZERO_LOGITEM_NUM) { r->count[item]++; r->level[item] = level; }
    else r->bad_items++;
    if (!message || !message[0]) r->empty_messages++;
    zero__mutex_unlock(&r->mu);
}

static void rec_init(rec_log *r) {
    memset(r, 0, sizeof *r);
    zero__mutex_init(&r->mu);
}

static void rec_fini(rec_log *r) { zero__mutex_destroy(&r->mu); }

static int rec_count(rec_log *r, zero_log_item item) {
    int n;
    zero__mutex_lock(&r->mu);
    n = r->count[item];
    zero__mutex_unlock(&r->mu);
    return n;
}

static zero_log_level rec_level(rec_log *r, zero_log_item item) {
    zero_log_level l;
    zero__mutex_lock(&r->mu);
    l = r->level[item];
    zero__mutex_unlock(&r->mu);
    return l;
}

static void rec_attach(zero_desc *d, rec_log *r) {
    d->logger.func = rec_func;
    d->logger.user_data = r;
}

#define CHECK_LOGGED(rec, item) \
    CHECK(rec_count((rec), (item)) > 0, "the logger did not see item %s", zero_log_item_str(item))

/* ---- expectations ---------------------------------------------------------------- */
static int msg_ok(const char *m) { return m != NULL && strlen(m) >= 8; }

/* EXPECT(call, want, ctx): call returns exactly want, and zero_last_error(ctx) says why. */
#define EXPECT(call, want, ctx) do { \
        zero_result got__ = (call); \
        const char *m__; \
        CHECK(got__ == (want), "%s returned %s (%d), want %s (%d); last error: %s", #call, \
              zero_result_str(got__), (int)got__, zero_result_str(want), (int)(want), \
              zero_last_error(ctx) ? zero_last_error(ctx) : "(null)"); \
        m__ = zero_last_error(ctx); \
        CHECK(msg_ok(m__), "zero_last_error(%s) after %s is not a sentence: '%s'", #ctx, #call, \
              m__ ? m__ : "(null)"); \
    } while (0)

#define OK(call, ctx) do { \
        zero_result got__ = (call); \
        CHECK(got__ == ZERO_OK, "%s returned %s: %s", #call, zero_result_str(got__), \
              zero_last_error(ctx) ? zero_last_error(ctx) : "(null)"); \
    } while (0)

/* ---- a small model --------------------------------------------------------------- */
typedef struct model {
    zero_ctx *z;
    int nm;
    zero_module m[4];
    zero_param p[4];                /* one param per module */
    int64_t n[4];
} model;

static void base_desc(zero_desc *d) {
    memset(d, 0, sizeof *d);
    d->timeout_ms = 10000;
}

/* create + one 1-D param per module; does not build. 0 on failure (CHECKed). */
static int model_make(model *mo, const zero_desc *d, int nm, const int64_t *sizes) {
    static const char *mnames[4] = { "m0", "m1", "m2", "m3" };
    zero_result r;
    memset(mo, 0, sizeof *mo);
    r = zero_create(&mo->z, d);
    if (!CHECK(r == ZERO_OK, "zero_create: %s: %s", zero_result_str(r), zero_last_error(NULL))) return 0;
    mo->nm = nm;
    for (int i = 0; i < nm; i++) {
        mo->n[i] = sizes[i];
        r = fx_module(mo->z, mnames[i], 0, &mo->m[i]);
        if (!CHECK(r == ZERO_OK, "zero_add_module: %s: %s", zero_result_str(r), zero_last_error(mo->z))) return 0;
        r = fx_param(mo->z, mo->m[i], "w", sizes[i], 0, 0, &mo->p[i]);
        if (!CHECK(r == ZERO_OK, "zero_add_param: %s: %s", zero_result_str(r), zero_last_error(mo->z))) return 0;
    }
    return 1;
}

static int model_build(model *mo, const zero_desc *d, int nm, const int64_t *sizes) {
    zero_result r;
    if (!model_make(mo, d, nm, sizes)) return 0;
    r = zero_build(mo->z);
    return CHECK(r == ZERO_OK, "zero_build: %s: %s", zero_result_str(r), zero_last_error(mo->z));
}

static void model_free(model *mo) {
    zero_destroy(mo->z);
    mo->z = NULL;
}

/* ==== invalid config at zero_create =============================================== */
static void create_expect(zero_desc *d, zero_result want, zero_log_item item) {
    rec_log rec;
    zero_ctx *z = (zero_ctx *)&rec;    /* not NULL: zero_create must set *out = NULL on failure */
    rec_init(&rec);
    rec_attach(d, &rec);
    EXPECT(zero_create(&z, d), want, NULL);
    CHECK(z == NULL, "zero_create failed but left *out non-NULL");
    if (z && z != (zero_ctx *)&rec) zero_destroy(z);
    if ((int)item != ZERO_LOGITEM_OK) CHECK_LOGGED(&rec, item);
    rec_fini(&rec);
}

static void create_stage_4(void) {
    zero_desc d; base_desc(&d); d.stage = 4;
    create_expect(&d, ZERO_ERR_INVALID_STAGE, ZERO_LOGITEM_INVALID_STAGE);
}
static void create_stage_neg1(void) {
    zero_desc d; base_desc(&d); d.stage = -1;
    create_expect(&d, ZERO_ERR_INVALID_STAGE, ZERO_LOGITEM_INVALID_STAGE);
}
static void create_negative_bucket_bytes(void) {
    zero_desc d; base_desc(&d); d.bucket_bytes = -1;
    create_expect(&d, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void create_negative_accum_steps(void) {
    zero_desc d; base_desc(&d); d.accum_steps = -2;
    create_expect(&d, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void create_negative_align_elems(void) {
    zero_desc d; base_desc(&d); d.align_elems = -16;
    create_expect(&d, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void create_param_dtype_99(void) {
    zero_desc d; base_desc(&d); d.param_dtype = (zero_dtype)99;
    create_expect(&d, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE);
}
static void create_grad_dtype_99(void) {
    zero_desc d; base_desc(&d); d.grad_dtype = (zero_dtype)99;
    create_expect(&d, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE);
}
static void create_grad_accum_dtype_99(void) {
    zero_desc d; base_desc(&d); d.grad_accum_dtype = (zero_dtype)99;
    create_expect(&d, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE);
}

/* the moments' format (ON OPTIMIZER STATES): an unknown one; bf16 and q8 with the CUDA
   device: tests/test_device.c */
static void create_state_dtype_99(void) {
    zero_desc d; base_desc(&d); d.optim.state_dtype = (zero_state_dtype)99;
    create_expect(&d, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE);
}
static void create_state_dtype_neg(void) {
    zero_desc d; base_desc(&d); d.optim.state_dtype = (zero_state_dtype)-2;
    create_expect(&d, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE);
    CHECK(strstr(zero_last_error(NULL), "state_dtype is -2") != NULL, "message: %s", zero_last_error(NULL));
}

/* ==== invalid sizes at zero_add_param ============================================== */
/* Adds pd to a fresh module; expects `want`; then checks the context still works:
   a valid param can be added and the model built (a failed call changes nothing). */
static void param_expect(const zero_param_desc *bad, zero_result want, zero_log_item item) {
    zero_desc d;
    rec_log rec;
    zero_ctx *z = NULL;
    zero_module m;
    zero_module_desc md;
    zero_param p;
    zero_param_desc good;
    zero_result r;
    rec_init(&rec);
    base_desc(&d);
    rec_attach(&d, &rec);
    memset(&md, 0, sizeof md);
    md.name = "layer";
    r = zero_create(&z, &d);
    if (!CHECK(r == ZERO_OK, "zero_create: %s", zero_result_str(r))) goto done;
    OK(zero_add_module(z, &md, &m), z);
    EXPECT(zero_add_param(z, m, bad, &p), want, z);
    CHECK_LOGGED(&rec, item);
    memset(&good, 0, sizeof good);
    good.name = "ok";
    good.ndim = 1;
    good.shape[0] = 5;
    OK(zero_add_param(z, m, &good, &p), z);
    OK(zero_build(z), z);
    CHECK(zero_num_params(z) == 5, "after a rejected param, zero_num_params = %lld, want 5",
          (long long)zero_num_params(z));
done:
    zero_destroy(z);
    rec_fini(&rec);
}

static void pdesc(zero_param_desc *pd, int ndim, int64_t s0, int64_t s1) {
    memset(pd, 0, sizeof *pd);
    pd->name = "bad";
    pd->ndim = ndim;
    for (int i = 0; i < ZERO_MAX_DIMS; i++) pd->shape[i] = 1;
    pd->shape[0] = s0;
    pd->shape[1] = s1;
}

static void param_shape_zero(void) {
    zero_param_desc pd; pdesc(&pd, 1, 0, 1);
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_shape_negative(void) {
    zero_param_desc pd; pdesc(&pd, 1, -3, 1);
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_shape_negative_2d(void) {
    zero_param_desc pd; pdesc(&pd, 2, 4, -3);       /* -3 * -x must not sneak through */
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_shape_two_negatives(void) {
    zero_param_desc pd; pdesc(&pd, 2, -4, -3);      /* the product is positive */
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_ndim_zero(void) {
    zero_param_desc pd; pdesc(&pd, 0, 5, 1);
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_ndim_negative(void) {
    zero_param_desc pd; pdesc(&pd, -1, 5, 1);
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_ndim_too_many(void) {
    zero_param_desc pd; pdesc(&pd, ZERO_MAX_DIMS + 1, 5, 1);
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_numel_overflow(void) {
    zero_param_desc pd; pdesc(&pd, 2, (int64_t)1 << 40, (int64_t)1 << 40);   /* 2^80 */
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}
static void param_numel_overflow_odd(void) {
    zero_param_desc pd; pdesc(&pd, 3, 3, INT64_MAX / 2);                     /* ~1.5 * 2^63 */
    pd.shape[2] = 1;
    param_expect(&pd, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE);
}

/* The model's total overflows int64 (each param alone fits): rejected at zero_add_param
   or at zero_build, as INVALID_SIZE (never an allocation attempt). */
static void total_numel_overflow(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_module_desc md;
    zero_param p;
    zero_param_desc pd;
    zero_result r1, r2, rb = ZERO_OK;
    base_desc(&d);
    memset(&md, 0, sizeof md);
    md.name = "huge";
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "zero_create")) return;
    OK(zero_add_module(z, &md, &m), z);
    pdesc(&pd, 1, (int64_t)1 << 62, 1);
    pd.name = "a";
    r1 = zero_add_param(z, m, &pd, &p);
    pd.name = "b";
    r2 = zero_add_param(z, m, &pd, &p);
    if (r1 == ZERO_OK && r2 == ZERO_OK) {
        rb = zero_build(z);
        CHECK(rb == ZERO_ERR_INVALID_SIZE, "two params of 2^62: zero_build returned %s, want %s",
              zero_result_str(rb), zero_result_str(ZERO_ERR_INVALID_SIZE));
    } else {
        CHECK((r1 == ZERO_OK || r1 == ZERO_ERR_INVALID_SIZE) && (r2 == ZERO_OK || r2 == ZERO_ERR_INVALID_SIZE),
              "two params of 2^62: zero_add_param returned %s, %s", zero_result_str(r1), zero_result_str(r2));
    }
    CHECK(msg_ok(zero_last_error(z)), "no message");
    zero_destroy(z);
}

/* bytes overflow although the element count fits: 2^61 elements * 16 bytes of model state */
static void total_bytes_overflow(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_module_desc md;
    zero_param p;
    zero_param_desc pd;
    zero_result r, rb;
    base_desc(&d);
    memset(&md, 0, sizeof md);
    md.name = "huge";
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "zero_create")) return;
    OK(zero_add_module(z, &md, &m), z);
    pdesc(&pd, 1, (int64_t)1 << 61, 1);
    r = zero_add_param(z, m, &pd, &p);
    if (r == ZERO_OK) {
        rb = zero_build(z);
        CHECK(rb == ZERO_ERR_INVALID_SIZE, "a param of 2^61 elements: zero_build returned %s, want %s",
              zero_result_str(rb), zero_result_str(ZERO_ERR_INVALID_SIZE));
    } else {
        CHECK(r == ZERO_ERR_INVALID_SIZE, "zero_add_param(2^61) returned %s", zero_result_str(r));
    }
    CHECK(msg_ok(zero_last_error(z)), "no message");
    zero_destroy(z);
}

/* ==== NULL pointers ================================================================ */
static void null_create_out(void) {
    zero_desc d; base_desc(&d);
    EXPECT(zero_create(NULL, &d), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_create_desc(void) {
    zero_ctx *z = (zero_ctx *)&z;
    EXPECT(zero_create(&z, NULL), ZERO_ERR_INVALID_ARG, NULL);
    CHECK(z == NULL, "*out not NULL after a failed zero_create");
}

/* A context with one module "m0" of 8 elements, built or not, for the ctx-level NULLs. */
static int small(model *mo, int build) {
    zero_desc d;
    int64_t n = 8;
    base_desc(&d);
    return build ? model_build(mo, &d, 1, &n) : model_make(mo, &d, 1, &n);
}

static void null_add_module_desc(void) {
    model mo; zero_module m;
    if (small(&mo, 0)) EXPECT(zero_add_module(mo.z, NULL, &m), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_add_module_out(void) {
    model mo; zero_module_desc md; memset(&md, 0, sizeof md); md.name = "x";
    if (small(&mo, 0)) EXPECT(zero_add_module(mo.z, &md, NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_add_module_ctx(void) {
    zero_module m; zero_module_desc md; memset(&md, 0, sizeof md); md.name = "x";
    EXPECT(zero_add_module(NULL, &md, &m), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_add_module_name(void) {
    model mo; zero_module m; zero_module_desc md; memset(&md, 0, sizeof md);
    if (small(&mo, 0)) EXPECT(zero_add_module(mo.z, &md, &m), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_add_param_desc(void) {
    model mo; zero_param p;
    if (small(&mo, 0)) EXPECT(zero_add_param(mo.z, mo.m[0], NULL, &p), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_add_param_out(void) {
    model mo; zero_param_desc pd; pdesc(&pd, 1, 4, 1);
    if (small(&mo, 0)) EXPECT(zero_add_param(mo.z, mo.m[0], &pd, NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_add_param_name(void) {
    model mo; zero_param p; zero_param_desc pd; pdesc(&pd, 1, 4, 1); pd.name = NULL;
    if (small(&mo, 0)) EXPECT(zero_add_param(mo.z, mo.m[0], &pd, &p), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
/* names are manifest lines and safetensors keys: refused at registration, not at the save */
static void bad_names(void) {
    static const char *bad[] = { "", "a\nb", "tab\there", "q\"uote", "back\\slash", "del\x7f" };
    char longname[300];
    model mo;
    zero_module m;
    zero_param p;
    zero_module_desc md;
    zero_param_desc pd;
    size_t k;
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    if (!small(&mo, 0)) { model_free(&mo); return; }
    for (k = 0; k <= sizeof bad / sizeof bad[0]; k++) {
        const char *name = k < sizeof bad / sizeof bad[0] ? bad[k] : longname;
        memset(&md, 0, sizeof md); md.name = name;
        EXPECT(zero_add_module(mo.z, &md, &m), ZERO_ERR_INVALID_ARG, mo.z);
        pdesc(&pd, 1, 4, 1); pd.name = name;
        EXPECT(zero_add_param(mo.z, mo.m[0], &pd, &p), ZERO_ERR_INVALID_ARG, mo.z);
        CHECK(strstr(zero_last_error(mo.z), "name") != NULL, "message: %s", zero_last_error(mo.z));
        EXPECT(zero_add_tied_param(mo.z, mo.m[0], name, mo.p[0], &p), ZERO_ERR_INVALID_ARG, mo.z);
    }
    CHECK(zero_num_params(mo.z) == 8, "a refused name registered something: %lld elements", (long long)zero_num_params(mo.z));
    model_free(&mo);
}
/* module "a.b" param "c" and module "a" param "b.c" are both the key "a.b.c" */
static void safetensors_key_clash(void) {
    model mo;
    zero_module a, ab;
    zero_param p;
    zero_param_desc pd;
    int order;
    for (order = 0; order < 2; order++) {
        if (!small(&mo, 0)) { model_free(&mo); return; }
        if (CHECK(fx_module(mo.z, "a", 0, &a) == ZERO_OK && fx_module(mo.z, "a.b", 0, &ab) == ZERO_OK, "modules")) {
            pdesc(&pd, 1, 4, 1);
            pd.name = order ? "c" : "b.c";
            CHECK(zero_add_param(mo.z, order ? ab : a, &pd, &p) == ZERO_OK, "%s", zero_last_error(mo.z));
            pd.name = order ? "b.c" : "c";
            EXPECT(zero_add_param(mo.z, order ? a : ab, &pd, &p), ZERO_ERR_INVALID_ARG, mo.z);
            CHECK(strstr(zero_last_error(mo.z), "same safetensors key") != NULL, "message: %s", zero_last_error(mo.z));
            pd.name = "b.d";                    /* a.b.d: no clash */
            CHECK(zero_add_param(mo.z, a, &pd, &p) == ZERO_OK, "a.b.d: %s", zero_last_error(mo.z));
        }
        model_free(&mo);
    }
}
static void null_plan_get_out(void) {
    model mo;
    if (small(&mo, 0)) EXPECT(zero_plan_get(mo.z, NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
/* zero_run_nccl exists in every build; without ZERO_CUDA it says so */
static zero_result never_rank(zero_comm *c, int rank, void *user) { (void)c; (void)rank; (void)user; return ZERO_ERR_STATE; }
static void run_nccl_without_cuda(void) {
#ifndef ZERO_CUDA
    EXPECT(zero_run_nccl(2, never_rank, NULL), ZERO_ERR_UNSUPPORTED, NULL);
    CHECK(strstr(zero_last_error(NULL), "ZERO_CUDA") != NULL, "message: %s", zero_last_error(NULL));
#endif
}
/* zero_build logs its memory plan (PLAN) and that it is built (BUILT), at INFO level */
static void log_plan_at_build(void) {
    zero_desc d;
    model mo;
    rec_log rec;
    const int64_t sizes[2] = { 100, 37 };
    rec_init(&rec);
    base_desc(&d);
    d.stage = 3;
    rec_attach(&d, &rec);
    d.logger.level = ZERO_LOG_INFO;
    if (model_make(&mo, &d, 2, sizes)) {
        CHECK(rec_count(&rec, ZERO_LOGITEM_PLAN) == 0, "PLAN logged before zero_build");
        OK(zero_build(mo.z), mo.z);
        CHECK(rec_count(&rec, ZERO_LOGITEM_PLAN) == 1, "PLAN logged %d times at zero_build, want once",
              rec_count(&rec, ZERO_LOGITEM_PLAN));
        CHECK(rec_level(&rec, ZERO_LOGITEM_PLAN) == ZERO_LOG_INFO, "PLAN at level %d, want ZERO_LOG_INFO",
              (int)rec_level(&rec, ZERO_LOGITEM_PLAN));
        CHECK_LOGGED(&rec, ZERO_LOGITEM_BUILT);
        CHECK(rec.empty_messages == 0, "%d empty log messages", rec.empty_messages);
        zero_destroy(mo.z);
    }
    rec_fini(&rec);
}
static void null_stats_get_out(void) {
    model mo;
    if (small(&mo, 1)) EXPECT(zero_stats_get(mo.z, NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_estimate_desc(void) {
    int64_t n = 8; zero_plan pl;
    EXPECT(zero_estimate(NULL, 1, 1, &n, &pl), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_estimate_numels(void) {
    zero_desc d; zero_plan pl; base_desc(&d);
    EXPECT(zero_estimate(&d, 1, 1, NULL, &pl), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_estimate_out(void) {
    zero_desc d; int64_t n = 8; base_desc(&d);
    EXPECT(zero_estimate(&d, 1, 1, &n, NULL), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_build_ctx(void) { EXPECT(zero_build(NULL), ZERO_ERR_INVALID_ARG, NULL); }
static void null_step_ctx(void) { EXPECT(zero_step(NULL), ZERO_ERR_INVALID_ARG, NULL); }
static void null_fetch_ctx(void) {
    zero_module m; m.id = 1;
    EXPECT(zero_fetch(NULL, m), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_param_set_values(void) {
    model mo;
    if (small(&mo, 1)) EXPECT(zero_param_set_f32(mo.z, mo.p[0], NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_gather_out(void) {
    model mo;
    if (small(&mo, 1)) EXPECT(zero_gather_params_f32(mo.z, NULL), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_allreduce_values(void) {
    model mo;
    if (small(&mo, 1)) EXPECT(zero_allreduce_f64(mo.z, NULL, 1), ZERO_ERR_INVALID_ARG, mo.z);
    model_free(&mo);
}
static void null_group_create_out(void) {
    EXPECT(zero_group_create(NULL, 2), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_comm_local_out(void) {
    zero_group *g = NULL;
    if (!CHECK(zero_group_create(&g, 2) == ZERO_OK, "zero_group_create")) return;
    EXPECT(zero_comm_local(NULL, g, 0), ZERO_ERR_INVALID_ARG, NULL);
    zero_group_destroy(g);
}
static void null_comm_local_group(void) {
    zero_comm *c = NULL;
    EXPECT(zero_comm_local(&c, NULL, 0), ZERO_ERR_INVALID_ARG, NULL);
}
static void null_run_local_fn(void) {
    EXPECT(zero_run_local(2, NULL, NULL), ZERO_ERR_INVALID_ARG, NULL);
}

/* names must be unique (zero_module_desc.name, zero_param_desc.name); the code is not
   documented, so any error with a message will do */
static void duplicate_module_name(void) {
    model mo; zero_module m; zero_module_desc md; zero_result r;
    memset(&md, 0, sizeof md); md.name = "m0";
    if (!small(&mo, 0)) { model_free(&mo); return; }
    r = zero_add_module(mo.z, &md, &m);
    CHECK(r < 0, "a second module named m0: %s, want an error", zero_result_str(r));
    CHECK(msg_ok(zero_last_error(mo.z)), "no message");
    model_free(&mo);
}
static void duplicate_param_name(void) {
    model mo; zero_param p; zero_param_desc pd; zero_result r;
    pdesc(&pd, 1, 4, 1); pd.name = "w";
    if (!small(&mo, 0)) { model_free(&mo); return; }
    r = zero_add_param(mo.z, mo.m[0], &pd, &p);
    CHECK(r < 0, "a second param w in m0: %s, want an error", zero_result_str(r));
    CHECK(msg_ok(zero_last_error(mo.z)), "no message");
    model_free(&mo);
}

/* ==== registering after zero_build ================================================= */
static void built_add_module(void) {
    model mo; zero_module m; zero_module_desc md; rec_log rec; zero_desc d; int64_t n = 8;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    memset(&md, 0, sizeof md); md.name = "late";
    if (model_build(&mo, &d, 1, &n)) {
        EXPECT(zero_add_module(mo.z, &md, &m), ZERO_ERR_ALREADY_BUILT, mo.z);
        CHECK_LOGGED(&rec, ZERO_LOGITEM_ALREADY_BUILT);
    }
    model_free(&mo);
    rec_fini(&rec);
}
static void built_add_param(void) {
    model mo; zero_param p; zero_param_desc pd; rec_log rec; zero_desc d; int64_t n = 8;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    pdesc(&pd, 1, 4, 1); pd.name = "late";
    if (model_build(&mo, &d, 1, &n)) {
        EXPECT(zero_add_param(mo.z, mo.m[0], &pd, &p), ZERO_ERR_ALREADY_BUILT, mo.z);
        CHECK_LOGGED(&rec, ZERO_LOGITEM_ALREADY_BUILT);
        CHECK(zero_num_params(mo.z) == 8, "zero_num_params %lld after a rejected late param",
              (long long)zero_num_params(mo.z));
    }
    model_free(&mo);
    rec_fini(&rec);
}

/* ==== bad handles ================================================================== */
static void fetch_bad_handle(int stage, zero_module bad) {
    model mo; rec_log rec; zero_desc d; int64_t n = 8;
    rec_init(&rec); base_desc(&d); d.stage = stage; rec_attach(&d, &rec);
    if (model_build(&mo, &d, 1, &n)) {
        EXPECT(zero_fetch(mo.z, bad), ZERO_ERR_INVALID_HANDLE, mo.z);
        CHECK_LOGGED(&rec, ZERO_LOGITEM_INVALID_HANDLE);
        /* handle 0 says where such a handle comes from (#27 item 7) */
        if (bad.id == 0)
            CHECK(strstr(zero_last_error(mo.z), "left by a zero_add_* that failed") != NULL, "handle 0's message: %s",
                  zero_last_error(mo.z));
        /* the context still works */
        OK(zero_fetch(mo.z, mo.m[0]), mo.z);
        OK(zero_release(mo.z, mo.m[0]), mo.z);
    }
    model_free(&mo);
    rec_fini(&rec);
}
static void handle_fetch_12345_stage3(void) { zero_module m; m.id = 12345; fetch_bad_handle(3, m); }
static void handle_fetch_12345_stage0(void) { zero_module m; m.id = 12345; fetch_bad_handle(0, m); }
static void handle_fetch_zero_stage3(void) { zero_module m; m.id = 0; fetch_bad_handle(3, m); }
static void handle_fetch_zero_stage0(void) { zero_module m; m.id = 0; fetch_bad_handle(0, m); }

/* Two contexts with the same model: each one's handles are valid-looking in the other. */
static void handle_foreign(void) {
    model a, b; zero_desc d; int64_t n = 8; rec_log rec;
    float vals[8] = { 0 };
    rec_init(&rec); base_desc(&d); d.stage = 3; rec_attach(&d, &rec);
    if (model_build(&a, &d, 1, &n)) {
        d.logger.func = NULL;
        if (model_build(&b, &d, 1, &n)) {
            EXPECT(zero_fetch(a.z, b.m[0]), ZERO_ERR_INVALID_HANDLE, a.z);
            CHECK_LOGGED(&rec, ZERO_LOGITEM_INVALID_HANDLE);
            EXPECT(zero_grads_ready(a.z, b.m[0]), ZERO_ERR_INVALID_HANDLE, a.z);
            EXPECT(zero_release(a.z, b.m[0]), ZERO_ERR_INVALID_HANDLE, a.z);
            EXPECT(zero_param_set_f32(a.z, b.p[0], vals), ZERO_ERR_INVALID_HANDLE, a.z);
            CHECK(zero_param_numel(a.z, b.p[0]) == -1, "zero_param_numel(foreign) = %lld, want -1",
                  (long long)zero_param_numel(a.z, b.p[0]));
            OK(zero_fetch(a.z, a.m[0]), a.z);
            CHECK(zero_param_data(a.z, b.p[0]) == NULL, "zero_param_data(foreign param) is not NULL");
            CHECK(msg_ok(zero_last_error(a.z)), "no message after zero_param_data(foreign)");
            CHECK(zero_param_grad(a.z, b.p[0]) == NULL, "zero_param_grad(foreign param) is not NULL");
            OK(zero_release(a.z, a.m[0]), a.z);
        }
        model_free(&b);
    }
    model_free(&a);
    rec_fini(&rec);
}

static void handle_param_unknown(void) {
    model mo; zero_param bad; float v[8] = { 0 };
    bad.id = 12345;
    if (small(&mo, 1)) {
        EXPECT(zero_param_set_f32(mo.z, bad, v), ZERO_ERR_INVALID_HANDLE, mo.z);
        CHECK(zero_param_numel(mo.z, bad) == -1, "zero_param_numel(12345) = %lld, want -1",
              (long long)zero_param_numel(mo.z, bad));
        CHECK(zero_param_data(mo.z, bad) == NULL, "zero_param_data(12345) is not NULL");
        CHECK(msg_ok(zero_last_error(mo.z)), "no message after zero_param_data(12345)");
    }
    model_free(&mo);
}

/* zero_fetch nests (#27 item 7): fetched twice, a module stays fetched until released twice */
static void fetch_nests_stage3(void) {
    model mo; zero_desc d; int64_t n = 8;
    base_desc(&d); d.stage = 3;
    if (model_build(&mo, &d, 1, &n)) {
        OK(zero_fetch(mo.z, mo.m[0]), mo.z);
        OK(zero_fetch(mo.z, mo.m[0]), mo.z);
        OK(zero_release(mo.z, mo.m[0]), mo.z);
        CHECK(zero_param_data(mo.z, mo.p[0]) != NULL, "fetched twice, released once: the data is gone (%s)",
              zero_last_error(mo.z));
        OK(zero_release(mo.z, mo.m[0]), mo.z);
        CHECK(zero_param_data(mo.z, mo.p[0]) == NULL, "released twice: the data is still there");
    }
    model_free(&mo);
}

static void handle_add_param_unknown_module(void) {
    model mo; zero_module bad; zero_param p; zero_param_desc pd;
    bad.id = 12345;
    pdesc(&pd, 1, 4, 1);
    if (small(&mo, 0)) EXPECT(zero_add_param(mo.z, bad, &pd, &p), ZERO_ERR_INVALID_HANDLE, mo.z);
    model_free(&mo);
}

/* ==== zero_step before every module's grads are ready ============================== */
/* f32 params, SGD lr 1 (no momentum): p1 = p0 - g exactly. Two modules; the first
   zero_step comes with grads_ready only on module 0 and must fail; after module 1's
   grads_ready, zero_step succeeds and applies BOTH modules' gradients. */
static void grads_not_ready(int stage) {
    model mo; zero_desc d; rec_log rec;
    int64_t sizes[2] = { 10, 7 };
    float out[17], init[10] = { 0 };
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    d.stage = stage;
    d.param_dtype = ZERO_F32;
    d.optim.type = ZERO_OPTIM_SGD;
    d.optim.lr = 1.0f;
    if (!model_build(&mo, &d, 2, sizes)) goto done;
    OK(zero_param_set_f32(mo.z, mo.p[0], init), mo.z);
    OK(zero_param_set_f32(mo.z, mo.p[1], init), mo.z);
    for (int i = 0; i < 2; i++) {                   /* forward */
        OK(zero_fetch(mo.z, mo.m[i]), mo.z);
        OK(zero_release(mo.z, mo.m[i]), mo.z);
    }
    for (int i = 1; i >= 0; i--) {                  /* backward */
        float *g;
        OK(zero_fetch(mo.z, mo.m[i]), mo.z);
        g = (float *)zero_param_grad(mo.z, mo.p[i]);
        if (!CHECK(g != NULL, "zero_param_grad(m%d): %s", i, zero_last_error(mo.z))) goto done;
        for (int k = 0; k < mo.n[i]; k++) g[k] += (float)(i + 1);
        OK(zero_release(mo.z, mo.m[i]), mo.z);
        if (i == 1) continue;                       /* module 1's grads_ready comes late */
        OK(zero_grads_ready(mo.z, mo.m[i]), mo.z);
    }
    EXPECT(zero_step(mo.z), ZERO_ERR_GRADS_NOT_READY, mo.z);
    CHECK_LOGGED(&rec, ZERO_LOGITEM_GRADS_NOT_READY);
    OK(zero_grads_ready(mo.z, mo.m[1]), mo.z);
    OK(zero_step(mo.z), mo.z);
    OK(zero_gather_params_f32(mo.z, out), mo.z);
    for (int k = 0; k < 17; k++) {
        float want = k < 10 ? -1.0f : -2.0f;
        if (!CHECK(out[k] == want, "param[%d] = %g after the step, want %g (a gradient was lost)",
                   k, out[k], want)) break;
    }
done:
    model_free(&mo);
    rec_fini(&rec);
}
static void grads_not_ready_stage0(void) { grads_not_ready(0); }
static void grads_not_ready_stage1(void) { grads_not_ready(1); }
static void grads_not_ready_stage2(void) { grads_not_ready(2); }
static void grads_not_ready_stage3(void) { grads_not_ready(3); }

/* ==== training calls before zero_build ============================================= */
typedef enum { NB_STEP, NB_FETCH, NB_RELEASE, NB_GRADS_READY, NB_GATHER } nb_call;
static void not_built(nb_call c) {
    model mo; zero_desc d; rec_log rec; int64_t n = 8; float out[8];
    rec_init(&rec); base_desc(&d); d.stage = 3; rec_attach(&d, &rec);
    if (model_make(&mo, &d, 1, &n)) {
        switch (c) {
        case NB_STEP: EXPECT(zero_step(mo.z), ZERO_ERR_NOT_BUILT, mo.z); break;
        case NB_FETCH: EXPECT(zero_fetch(mo.z, mo.m[0]), ZERO_ERR_NOT_BUILT, mo.z); break;
        case NB_RELEASE: EXPECT(zero_release(mo.z, mo.m[0]), ZERO_ERR_NOT_BUILT, mo.z); break;
        case NB_GRADS_READY: EXPECT(zero_grads_ready(mo.z, mo.m[0]), ZERO_ERR_NOT_BUILT, mo.z); break;
        case NB_GATHER: EXPECT(zero_gather_params_f32(mo.z, out), ZERO_ERR_NOT_BUILT, mo.z); break;
        }
        CHECK_LOGGED(&rec, ZERO_LOGITEM_NOT_BUILT);
        CHECK(zero_param_data(mo.z, mo.p[0]) == NULL, "zero_param_data before zero_build is not NULL");
        /* and the context can still be built */
        OK(zero_build(mo.z), mo.z);
    }
    model_free(&mo);
    rec_fini(&rec);
}
static void not_built_step(void) { not_built(NB_STEP); }
static void not_built_fetch(void) { not_built(NB_FETCH); }
static void not_built_release(void) { not_built(NB_RELEASE); }
static void not_built_grads_ready(void) { not_built(NB_GRADS_READY); }
static void not_built_gather(void) { not_built(NB_GATHER); }

/* ==== stage 3: data of an unfetched module ======================================== */
static void not_fetched_param_data(void) {
    model mo; zero_desc d; rec_log rec; int64_t sizes[2] = { 8, 5 };
    rec_init(&rec); base_desc(&d); d.stage = 3; rec_attach(&d, &rec);
    if (model_build(&mo, &d, 2, sizes)) {
        CHECK(zero_param_data(mo.z, mo.p[0]) == NULL, "zero_param_data of an unfetched module is not NULL");
        CHECK(msg_ok(zero_last_error(mo.z)), "no message after zero_param_data(unfetched)");
        CHECK_LOGGED(&rec, ZERO_LOGITEM_NOT_FETCHED);
        OK(zero_fetch(mo.z, mo.m[0]), mo.z);
        CHECK(zero_param_data(mo.z, mo.p[0]) != NULL, "zero_param_data of a fetched module is NULL: %s",
              zero_last_error(mo.z));
        CHECK(zero_param_data(mo.z, mo.p[1]) == NULL, "zero_param_data of the other, unfetched module is not NULL");
        OK(zero_release(mo.z, mo.m[0]), mo.z);
        CHECK(zero_param_data(mo.z, mo.p[0]) == NULL, "zero_param_data after zero_release is not NULL");
    }
    model_free(&mo);
    rec_fini(&rec);
}
/* ==== ranks that registered different models ======================================= */
typedef enum { MM_SHAPE, MM_EXTRA_PARAM, MM_EXTRA_MODULE, MM_STAGE } mm_kind;
typedef struct mm_job {
    mm_kind kind;
    int world;                      /* the last rank is the odd one out */
    zero_result build[3];
    double build_ms[3];
    int saw_item[3];
    int msg[3];
} mm_job;

static zero_result mm_rank(zero_comm *comm, int rank, void *user) {
    mm_job *j = (mm_job *)user;
    zero_desc d; rec_log rec; zero_ctx *z = NULL; zero_module m; zero_param p;
    zero_module_desc md; zero_param_desc pd; zero_result r; double t0;
    int odd = rank == j->world - 1;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    d.comm = comm;
    d.stage = 2;
    d.timeout_ms = 2000;
    if (j->kind == MM_STAGE && odd) d.stage = 3;
    memset(&md, 0, sizeof md);
    md.name = "layer";
    r = zero_create(&z, &d);
    if (r != ZERO_OK) { j->build[rank] = r; goto done; }
    zero_add_module(z, &md, &m);
    pdesc(&pd, 2, 6, (j->kind == MM_SHAPE && odd) ? 5 : 4);
    pd.name = "w";
    zero_add_param(z, m, &pd, &p);
    if (j->kind == MM_EXTRA_PARAM && odd) {
        pdesc(&pd, 1, 3, 1); pd.name = "b";
        zero_add_param(z, m, &pd, &p);
    }
    if (j->kind == MM_EXTRA_MODULE && odd) {
        md.name = "extra";
        zero_add_module(z, &md, &m);
        pdesc(&pd, 1, 3, 1); pd.name = "b";
        zero_add_param(z, m, &pd, &p);
    }
    t0 = test_now_ms();
    r = zero_build(z);
    j->build_ms[rank] = test_now_ms() - t0;
    j->build[rank] = r;
    j->msg[rank] = msg_ok(zero_last_error(z));
    j->saw_item[rank] = rec_count(&rec, ZERO_LOGITEM_MODEL_MISMATCH) > 0;
done:
    zero_destroy(z);
    rec_fini(&rec);
    return r;
}

static void mismatch(mm_kind kind, int world) {
    mm_job j;
    double t0, total;
    memset(&j, 0, sizeof j);
    j.kind = kind;
    j.world = world;
    t0 = test_now_ms();
    zero_run_local(world, mm_rank, &j);
    total = test_now_ms() - t0;
    for (int r = 0; r < world; r++) {
        CHECK(j.build[r] == ZERO_ERR_MISMATCH, "rank %d: zero_build returned %s, want %s", r,
              zero_result_str(j.build[r]), zero_result_str(ZERO_ERR_MISMATCH));
        CHECK(j.msg[r], "rank %d: no zero_last_error message", r);
        CHECK(j.saw_item[r], "rank %d: the logger did not see MODEL_MISMATCH", r);
        CHECK(j.build_ms[r] < 1000.0, "rank %d: zero_build took %.0f ms (timeout_ms 2000): the mismatch "
              "must be detected, not waited out", r, j.build_ms[r]);
    }
    CHECK(total < 3000.0, "the whole run took %.0f ms", total);
}
static void mismatch_shape(void) { mismatch(MM_SHAPE, 2); }
static void mismatch_extra_param(void) { mismatch(MM_EXTRA_PARAM, 2); }
static void mismatch_extra_module(void) { mismatch(MM_EXTRA_MODULE, 2); }
static void mismatch_stage(void) { mismatch(MM_STAGE, 2); }
static void mismatch_shape_world3(void) { mismatch(MM_SHAPE, 3); }

/* ==== a rank that never arrives ==================================================== */
/* Two ranks, timeout_ms 300. Rank 1 builds and then leaves (returns from its rank
   function) or, with `stall`, stays alive without calling anything until rank 0 is
   done; rank 0 trains on:
   TO_STEP   stage 2: rank 0's zero_step (its reduce-scatter waits for rank 1)
   TO_FETCH  stage 3: rank 0's zero_fetch (its all-gather waits for rank 1)
   Accepted results: ZERO_ERR_TIMEOUT, or, when rank 1 left, ZERO_ERR_COMM (the library
   saw the rank leave). Either within timeout + 2 s. */
typedef enum { TO_STEP, TO_FETCH } to_kind;
typedef struct to_job {
    to_kind kind;
    int stall;
    zero__mutex mu;
    int rank0_done;
    zero_result got;
    double ms, destroy_ms;
    int msg, saw_item, saw_timeout, saw_left;
    char last[512];
    zero_result build[2];
} to_job;

#define TO_TIMEOUT_MS 300

static zero_result to_rank(zero_comm *comm, int rank, void *user) {
    to_job *j = (to_job *)user;
    zero_desc d; rec_log rec; zero_ctx *z = NULL; zero_module m; zero_param p;
    zero_module_desc md; zero_param_desc pd; zero_result r; double t0;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    d.comm = comm;
    d.stage = j->kind == TO_STEP ? 2 : 3;
    d.timeout_ms = TO_TIMEOUT_MS;
    d.param_dtype = ZERO_F32;
    memset(&md, 0, sizeof md);
    md.name = "layer";
    r = zero_create(&z, &d);
    if (r != ZERO_OK) { j->build[rank] = r; goto done; }
    zero_add_module(z, &md, &m);
    pdesc(&pd, 1, 64, 1);
    pd.name = "w";
    zero_add_param(z, m, &pd, &p);
    r = j->build[rank] = zero_build(z);
    if (r != ZERO_OK) goto done;
    if (rank == 1) {                                /* rank 1 leaves here, or stalls */
        for (int waited = 0; j->stall && waited < 10000; waited += 5) {
            int done0;
            zero__mutex_lock(&j->mu);
            done0 = j->rank0_done;
            zero__mutex_unlock(&j->mu);
            if (done0) break;
            zero__sleep_us(5000.0);
        }
        goto done;
    }
    t0 = test_now_ms();
    if (j->kind == TO_FETCH) {
        r = zero_fetch(z, m);
    } else {
        float *g;
        r = zero_fetch(z, m);
        if (r == ZERO_OK && (g = (float *)zero_param_grad(z, p)) != NULL) {
            for (int i = 0; i < 64; i++) g[i] += 0.5f;
        }
        if (r == ZERO_OK) r = zero_release(z, m);
        if (r == ZERO_OK) r = zero_grads_ready(z, m);  /* may already see the failure */
        if (r == ZERO_OK) r = zero_step(z);
    }
    j->ms = test_now_ms() - t0;
    j->got = r;
    zero__mutex_lock(&j->mu);
    j->rank0_done = 1;
    zero__mutex_unlock(&j->mu);
    j->msg = msg_ok(zero_last_error(z));
    snprintf(j->last, sizeof j->last, "%s", zero_last_error(z));
    j->saw_item = rec_count(&rec, ZERO_LOGITEM_COLL_TIMEOUT) + rec_count(&rec, ZERO_LOGITEM_RANK_LEFT) +
                  rec_count(&rec, ZERO_LOGITEM_COMM_BROKEN) > 0;
    j->saw_timeout = rec_count(&rec, ZERO_LOGITEM_COLL_TIMEOUT) > 0;
    j->saw_left = rec_count(&rec, ZERO_LOGITEM_RANK_LEFT) > 0;
    t0 = test_now_ms();
    zero_destroy(z);
    z = NULL;
    j->destroy_ms = test_now_ms() - t0;
done:
    if (rank == 0) {                                /* also on early failures: free rank 1 */
        zero__mutex_lock(&j->mu);
        j->rank0_done = 1;
        zero__mutex_unlock(&j->mu);
    }
    zero_destroy(z);
    rec_fini(&rec);
    return r;
}

/* The local comm's all-reduce on the CPU device writes each rank's sums into the other
   ranks' buffers (zero__local_all_reduce). Rank 1 is made slow inside that write (its
   device's sum_norm sleeps 1.5x the timeout first), so rank 0's wait for it to leave times
   out: rank 0 must get ZERO_ERR_TIMEOUT with a message, but only once rank 1 has finished
   writing into rank 0's buffer (its caller may free it on return; the library waits up
   to another timeout for that), and rank 1's sums must have landed there. Rank 1, the
   last to leave, may see its op complete. */
#define XW_TIMEOUT_MS 400
#define XW_N 4096
typedef struct xw_job {
    double rank1_wrote_ms, rank0_back_ms;
    zero_result got[2];
    int msg0, landed;
    zero__dev_vt slow;
} xw_job;
static xw_job *xw_cur;
static zero_result xw_slow_sum_sq(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                  int64_t count, int accumulate, double *blk, void *const *copies, int ncopies) {
    zero_result r;
    if (ctx->rank == 1) zero__sleep_us(3 * XW_TIMEOUT_MS / 2 * 1000.0);
    r = zero__cpu_dev.sum_norm(ctx, s, out, rdt, ins, nin, sdt, count, accumulate, blk, copies, ncopies);
    if (ctx->rank == 1) xw_cur->rank1_wrote_ms = test_now_ms();
    return r;
}
static zero_result xw_rank(zero_comm *comm, int rank, void *user) {
    xw_job *j = (xw_job *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    float *buf = (float *)malloc(sizeof(float) * XW_N);
    zero_result r;
    int i;
    base_desc(&d);
    d.comm = comm;
    d.timeout_ms = XW_TIMEOUT_MS;
    if ((r = zero_create(&z, &d)) != ZERO_OK || !buf) { j->got[rank] = r; free(buf); zero_destroy(z); return r; }
    z->dev = &j->slow;
    for (i = 0; i < XW_N; i++) buf[i] = (float)(rank + 1);
    r = j->got[rank] = comm->vt->all_reduce(comm, buf, ZERO_F32, XW_N, XW_TIMEOUT_MS);
    if (rank == 0) {
        j->rank0_back_ms = test_now_ms();
        j->msg0 = msg_ok(comm->err);
        j->landed = buf[XW_N - 1] == 3.0f;      /* rank 1's slice: 1 + 2, written by rank 1 */
    }
    z->dev = &zero__cpu_dev;
    zero_destroy(z);
    free(buf);
    return r;
}
static void timeout_allreduce_writer_finishes(void) {
    xw_job j;
    memset(&j, 0, sizeof j);
    j.slow = zero__cpu_dev;
    j.slow.sum_norm = xw_slow_sum_sq;
    xw_cur = &j;
    zero_run_local(2, xw_rank, &j);
    CHECK(j.got[0] == ZERO_ERR_TIMEOUT, "rank 0: %s, want ZERO_ERR_TIMEOUT", zero_result_str(j.got[0]));
    CHECK(j.msg0, "rank 0's comm has no message");
    CHECK(j.rank1_wrote_ms > 0 && j.rank0_back_ms >= j.rank1_wrote_ms,
          "rank 0 returned %.1f ms before rank 1 finished writing into its buffer", j.rank1_wrote_ms - j.rank0_back_ms);
    CHECK(j.landed, "rank 1's sums are not in rank 0's buffer");
}

/* zero_run_local's result comes with its message on the calling thread (#27 item 3): the
   failing rank's own last error, or a sentence when its function returned a code without one */
static zero_result rm_rank(zero_comm *comm, int rank, void *user) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_result r;
    (void)comm;
    if (*(int *)user == 1) return rank == 1 ? ZERO_ERR_INVALID_ARG : ZERO_OK;     /* no message */
    if (rank == 0) return ZERO_OK;
    memset(&d, 0, sizeof d);
    d.stage = 7;                        /* a world of one of its own: fails at once, with a message */
    r = zero_create(&z, &d);
    zero_destroy(z);
    return r;
}
static void run_local_message(void) {
    int kind = 0;
    zero_result r;
    zero_create(NULL, NULL);            /* a stale error on this thread, to be replaced */
    r = zero_run_local(3, rm_rank, &kind);
    CHECK(r == ZERO_ERR_INVALID_STAGE && strstr(zero_last_error(NULL), "zero_run_local: rank 1: ") &&
          strstr(zero_last_error(NULL), "stage"), "%s: '%s'", zero_result_str(r), zero_last_error(NULL));
    kind = 1;
    r = zero_run_local(2, rm_rank, &kind);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "zero_run_local: rank 1: its function returned"),
          "%s: '%s'", zero_result_str(r), zero_last_error(NULL));
}

static void timeout_case(to_kind kind, int stall) {
    to_job j;
    memset(&j, 0, sizeof j);
    j.kind = kind;
    j.stall = stall;
    j.got = ZERO_OK;
    zero__mutex_init(&j.mu);
    zero_run_local(2, to_rank, &j);
    zero__mutex_destroy(&j.mu);
    if (!CHECK(j.build[0] == ZERO_OK && j.build[1] == ZERO_OK, "zero_build: %s / %s",
               zero_result_str(j.build[0]), zero_result_str(j.build[1]))) return;
    if (stall)
        CHECK(j.got == ZERO_ERR_TIMEOUT, "rank 0 got %s, want %s (rank 1 is alive but never arrives)",
              zero_result_str(j.got), zero_result_str(ZERO_ERR_TIMEOUT));
    else
        CHECK(j.got == ZERO_ERR_TIMEOUT || j.got == ZERO_ERR_COMM, "rank 0 got %s, want %s or %s",
              zero_result_str(j.got), zero_result_str(ZERO_ERR_TIMEOUT), zero_result_str(ZERO_ERR_COMM));
    if (stall)
        CHECK(j.ms >= TO_TIMEOUT_MS * 0.9, "rank 0 gave up after %.0f ms, before timeout_ms %d", j.ms, TO_TIMEOUT_MS);
    CHECK(j.ms < TO_TIMEOUT_MS + 2000.0, "rank 0 waited %.0f ms (timeout_ms %d)", j.ms, TO_TIMEOUT_MS);
    CHECK(j.destroy_ms < TO_TIMEOUT_MS + 2000.0, "zero_destroy after the failure took %.0f ms", j.destroy_ms);
    CHECK(j.msg, "rank 0: no zero_last_error message");
    CHECK(j.saw_item, "rank 0: the logger saw none of COLL_TIMEOUT, RANK_LEFT, COMM_BROKEN");
    if (stall) CHECK(j.saw_timeout, "rank 0: the logger did not see COLL_TIMEOUT");
    if (!stall && j.got == ZERO_ERR_COMM && strstr(j.last, "left the group"))
        CHECK(j.saw_left, "rank 0: '%s' but the logger did not see RANK_LEFT", j.last);
    /* the message says what was waiting (#27 item 8), not only the comm's collective number */
    if (!stall && kind == TO_FETCH && j.got == ZERO_ERR_COMM)
        CHECK(strstr(j.last, "all-gather of module '") != NULL, "rank 0: '%s' does not name the module's all-gather", j.last);
    if (stall) CHECK(!j.saw_left, "rank 0: RANK_LEFT logged, but rank 1 is alive");
}
static void timeout_step_stage2_rank_left(void) { timeout_case(TO_STEP, 0); }
static void timeout_fetch_stage3_rank_left(void) { timeout_case(TO_FETCH, 0); }
static void timeout_step_stage2_rank_stalls(void) { timeout_case(TO_STEP, 1); }
static void timeout_fetch_stage3_rank_stalls(void) { timeout_case(TO_FETCH, 1); }

/* ==== non-finite gradients ========================================================= */
/* Two modules (9 and 6 elements). One element of module 1's gradient is `bad` (given
   as raw bits in the grad dtype). zero_step must return ZERO_STEP_SKIPPED on every
   rank, count it, leave the params bitwise unchanged, and (f16, dynamic scale) halve
   the loss scale; bf16 keeps the static scale 1. A clean step afterwards applies. */
typedef struct nf_job {
    zero_dtype dtype;
    int stage;
    int bad_rank;                   /* the rank that writes the bad element */
    float bad_value;                /* written with zero_add_f32 ... */
    uint16_t bad_bits;              /* ... or, if nonzero, as raw bits */
} nf_job;

static zero_result nf_rank(zero_comm *comm, int rank, void *user) {
    const nf_job *j = (const nf_job *)user;
    model mo; zero_desc d; rec_log rec;
    int64_t sizes[2] = { 9, 6 };
    float init0[9], init1[6], before[15], after[15], after2[15], s0, s1, half;
    zero_stats st;
    zero_result r = ZERO_ERR_STATE;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    d.comm = comm;
    d.stage = j->stage;
    d.param_dtype = j->dtype;
    d.optim.type = ZERO_OPTIM_SGD;
    d.optim.lr = 0.5f;
    for (int i = 0; i < 9; i++) init0[i] = 0.25f * (float)(i + 1);   /* exact in f16 and bf16 */
    for (int i = 0; i < 6; i++) init1[i] = -0.5f * (float)(i + 1);
    if (!model_build(&mo, &d, 2, sizes)) goto done;
    OK(zero_param_set_f32(mo.z, mo.p[0], init0), mo.z);
    OK(zero_param_set_f32(mo.z, mo.p[1], init1), mo.z);
    OK(zero_gather_params_f32(mo.z, before), mo.z);
    s0 = zero_loss_scale(mo.z);
    if (j->dtype == ZERO_F16)
        CHECK(s0 == 65536.0f, "rank %d: f16 initial loss scale %g, want the default 65536", rank, s0);
    else
        CHECK(s0 == 1.0f, "rank %d: %s loss scale %g, want 1 (static)", rank, zero_dtype_str(j->dtype), s0);

    for (int step = 0; step < 2; step++) {          /* step 0: the bad one; step 1: clean */
        char err_before[512];
        for (int i = 0; i < 2; i++) { OK(zero_fetch(mo.z, mo.m[i]), mo.z); OK(zero_release(mo.z, mo.m[i]), mo.z); }
        for (int i = 1; i >= 0; i--) {
            void *g;
            OK(zero_fetch(mo.z, mo.m[i]), mo.z);
            g = zero_param_grad(mo.z, mo.p[i]);
            if (!CHECK(g != NULL, "rank %d: zero_param_grad: %s", rank, zero_last_error(mo.z))) goto done;
            /* 0.5 after unscaling: representable at every scale (f16: 0.5 * 65536 < 65504) */
            half = 0.5f * zero_loss_scale(mo.z);
            for (int k = 0; k < mo.n[i]; k++) zero_add_f32((char *)g + 2 * k, j->dtype, &half, 1);
            if (step == 0 && i == 1 && rank == j->bad_rank) {
                char *e = (char *)g + 2 * 3;
                if (j->bad_bits) memcpy(e, &j->bad_bits, 2);
                else zero_add_f32(e, j->dtype, &j->bad_value, 1);
            }
            OK(zero_release(mo.z, mo.m[i]), mo.z);
            OK(zero_grads_ready(mo.z, mo.m[i]), mo.z);
        }
        snprintf(err_before, sizeof err_before, "%s", zero_last_error(mo.z));
        r = zero_step(mo.z);
        if (step == 0) {
            /* not an error: a warning, and the last error is left as it was */
            CHECK(rec_level(&rec, ZERO_LOGITEM_STEP_SKIPPED) == ZERO_LOG_WARN, "rank %d: STEP_SKIPPED logged at level "
                  "%d, want ZERO_LOG_WARN", rank, (int)rec_level(&rec, ZERO_LOGITEM_STEP_SKIPPED));
            CHECK(!strcmp(err_before, zero_last_error(mo.z)), "rank %d: a skipped step changed the last error to '%s'",
                  rank, zero_last_error(mo.z));
            CHECK(r == ZERO_STEP_SKIPPED, "rank %d: zero_step returned %s, want %s", rank,
                  zero_result_str(r), zero_result_str(ZERO_STEP_SKIPPED));
            CHECK_LOGGED(&rec, ZERO_LOGITEM_STEP_SKIPPED);
            OK(zero_stats_get(mo.z, &st), mo.z);
            CHECK(st.skipped_steps == 1 && st.steps == 0, "rank %d: stats skipped_steps %lld steps %lld, want 1 and 0",
                  rank, (long long)st.skipped_steps, (long long)st.steps);
            /* a skipped step consumed its micro-batches all the same (the data position) */
            CHECK(st.micro_batches == zero_world_size(mo.z), "rank %d: micro_batches %lld after a skipped step, want %d",
                  rank, (long long)st.micro_batches, zero_world_size(mo.z));
            s1 = zero_loss_scale(mo.z);
            if (j->dtype == ZERO_F16)
                CHECK(s1 == s0 / 2, "rank %d: loss scale %g after an overflow, want %g", rank, s1, s0 / 2);
            else
                CHECK(s1 == s0, "rank %d: loss scale %g after a skipped step, want %g (static)", rank, s1, s0);
            CHECK(st.loss_scale == s1, "rank %d: stats.loss_scale %g, zero_loss_scale %g", rank, st.loss_scale, s1);
            OK(zero_gather_params_f32(mo.z, after), mo.z);
            CHECK(memcmp(before, after, sizeof before) == 0, "rank %d: params changed by a skipped step", rank);
        } else {
            CHECK(r == ZERO_OK, "rank %d: the clean step after a skipped one returned %s: %s", rank,
                  zero_result_str(r), zero_last_error(mo.z));
            OK(zero_stats_get(mo.z, &st), mo.z);
            CHECK(st.skipped_steps == 1 && st.steps == 1, "rank %d: stats skipped_steps %lld steps %lld, want 1 and 1",
                  rank, (long long)st.skipped_steps, (long long)st.steps);
            CHECK(st.micro_batches == 2 * zero_world_size(mo.z), "rank %d: micro_batches %lld after two steps, want %d",
                  rank, (long long)st.micro_batches, 2 * zero_world_size(mo.z));
            OK(zero_gather_params_f32(mo.z, after2), mo.z);
            for (int k = 0; k < 15; k++) {
                if (!CHECK(isfinite(after2[k]) && after2[k] != after[k],
                           "rank %d: param[%d] = %g after the clean step (was %g): not updated", rank, k,
                           after2[k], after[k])) break;
            }
        }
    }
done:
    model_free(&mo);
    rec_fini(&rec);
    return r < 0 ? r : ZERO_OK;
}

static void nonfinite(zero_dtype dt, int stage, int world, float v, uint16_t bits) {
    nf_job j;
    memset(&j, 0, sizeof j);
    j.dtype = dt; j.stage = stage; j.bad_rank = world - 1; j.bad_value = v; j.bad_bits = bits;
    if (world == 1) nf_rank(NULL, 0, &j);
    else zero_run_local(world, nf_rank, &j);
}
static void f16_overflow_stage0(void) { nonfinite(ZERO_F16, 0, 1, 70000.0f, 0); }
static void f16_overflow_stage1(void) { nonfinite(ZERO_F16, 1, 1, 70000.0f, 0); }
static void f16_overflow_stage2(void) { nonfinite(ZERO_F16, 2, 1, 70000.0f, 0); }
static void f16_overflow_stage3(void) { nonfinite(ZERO_F16, 3, 1, 70000.0f, 0); }
static void f16_inf_bits_stage2(void) { nonfinite(ZERO_F16, 2, 1, 0.0f, 0x7C00); }
static void f16_overflow_one_rank_stage1_world2(void) { nonfinite(ZERO_F16, 1, 2, 70000.0f, 0); }
static void f16_overflow_one_rank_stage3_world2(void) { nonfinite(ZERO_F16, 3, 2, 70000.0f, 0); }
static void bf16_nan_stage0(void) { nonfinite(ZERO_BF16, 0, 1, NAN, 0); }
static void bf16_nan_stage1(void) { nonfinite(ZERO_BF16, 1, 1, NAN, 0); }
static void bf16_nan_stage2(void) { nonfinite(ZERO_BF16, 2, 1, NAN, 0); }
static void bf16_nan_stage3(void) { nonfinite(ZERO_BF16, 3, 1, NAN, 0); }
static void bf16_nan_one_rank_stage2_world2(void) { nonfinite(ZERO_BF16, 2, 2, NAN, 0); }

/* ==== memory caps and allocation failures ========================================= */
static void over_cap(void) {
    model mo; zero_desc d; rec_log rec; int64_t n = 1000; zero_plan pl;
    rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
    d.device_bytes_cap = 1000;
    if (model_make(&mo, &d, 1, &n)) {
        OK(zero_plan_get(mo.z, &pl), mo.z);
        CHECK(pl.bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] > 1000, "the plan has %lld param bytes for 1000 bf16 elements",
              (long long)pl.bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS]);
        EXPECT(zero_build(mo.z), ZERO_ERR_OVER_CAP, mo.z);
        CHECK_LOGGED(&rec, ZERO_LOGITEM_OVER_CAP);
    }
    model_free(&mo);
    rec_fini(&rec);
}

/* An allocator that fails every call after `left` more successes once armed, and
   counts what is live: after zero_destroy nothing may be left. */
typedef struct fail_alloc {
    zero__mutex mu;
    int armed;
    long left;
    long calls, live, failed;
} fail_alloc;

static void *fa_alloc(size_t size, void *ud) {
    fail_alloc *a = (fail_alloc *)ud;
    void *p = NULL;
    zero__mutex_lock(&a->mu);
    a->calls++;
    if (a->armed && a->left <= 0) {
        a->failed++;
    } else {
        if (a->armed) a->left--;
        p = malloc(size ? size : 1);
        if (p) a->live++;
    }
    zero__mutex_unlock(&a->mu);
    return p;
}

static void fa_free(void *ptr, void *ud) {
    fail_alloc *a = (fail_alloc *)ud;
    if (!ptr) return;
    zero__mutex_lock(&a->mu);
    a->live--;
    zero__mutex_unlock(&a->mu);
    free(ptr);
}

static void fa_init(fail_alloc *a) { memset(a, 0, sizeof *a); zero__mutex_init(&a->mu); }
static void fa_arm(fail_alloc *a, long left) {
    zero__mutex_lock(&a->mu); a->armed = 1; a->left = left; zero__mutex_unlock(&a->mu);
}
static long fa_get(fail_alloc *a, long *failed) {
    long live;
    zero__mutex_lock(&a->mu); live = a->live; if (failed) *failed = a->failed; zero__mutex_unlock(&a->mu);
    return live;
}

#define OOM_MAX_K 400

/* zero_build with the k-th allocation from the start of zero_build failing, for every
   k until zero_build succeeds: each failure is ZERO_ERR_OUT_OF_MEMORY with a message,
   zero_destroy cleans up, nothing leaks. */
static void oom_build(int stage) {
    int64_t sizes[3] = { 33, 70, 9 };
    int k, saw_failure = 0, succeeded = 0;
    for (k = 0; k < OOM_MAX_K && !succeeded; k++) {
        fail_alloc a; model mo; zero_desc d; rec_log rec; zero_result r; long failed = 0, live;
        fa_init(&a); rec_init(&rec); base_desc(&d); rec_attach(&d, &rec);
        d.stage = stage;
        d.allocator.alloc = fa_alloc;
        d.allocator.free = fa_free;
        d.allocator.user_data = &a;
        if (!model_make(&mo, &d, 3, sizes)) { model_free(&mo); rec_fini(&rec); zero__mutex_destroy(&a.mu); break; }
        fa_arm(&a, k);
        r = zero_build(mo.z);
        fa_get(&a, &failed);
        if (r == ZERO_OK) {
            succeeded = 1;
        } else {
            saw_failure = 1;
            CHECK(r == ZERO_ERR_OUT_OF_MEMORY, "allocation %d of zero_build failed: got %s, want %s", k,
                  zero_result_str(r), zero_result_str(ZERO_ERR_OUT_OF_MEMORY));
            CHECK(failed > 0, "zero_build failed with %s but no allocation had failed", zero_result_str(r));
            CHECK(msg_ok(zero_last_error(mo.z)), "k=%d: no message", k);
            CHECK_LOGGED(&rec, ZERO_LOGITEM_OUT_OF_MEMORY);
        }
        model_free(&mo);
        live = fa_get(&a, NULL);
        CHECK(live == 0, "k=%d: %ld allocations still live after zero_destroy", k, live);
        rec_fini(&rec);
        zero__mutex_destroy(&a.mu);
        if (live != 0 || (r != ZERO_OK && r != ZERO_ERR_OUT_OF_MEMORY)) break;    /* one report is enough */
    }
    CHECK(saw_failure, "zero_build never used the allocator (first allocation failing did not fail it)");
    CHECK(succeeded || k < OOM_MAX_K, "zero_build still failing after %d allocations", OOM_MAX_K);
}
static void oom_build_stage0(void) { oom_build(0); }
static void oom_build_stage3(void) { oom_build(3); }

/* Every allocation of the whole sequence create / add / add / build failing in turn:
   each call either succeeds or returns ZERO_ERR_OUT_OF_MEMORY, and nothing leaks. */
static void oom_sweep(void) {
    int k, done_ok = 0;
    for (k = 0; k < OOM_MAX_K && !done_ok; k++) {
        fail_alloc a; zero_desc d; zero_ctx *z = NULL; zero_result r; long live;
        zero_module m; zero_param p; zero_module_desc md; zero_param_desc pd;
        fa_init(&a); base_desc(&d);
        d.stage = 2;
        d.allocator.alloc = fa_alloc;
        d.allocator.free = fa_free;
        d.allocator.user_data = &a;
        fa_arm(&a, k);
        memset(&md, 0, sizeof md);
        r = zero_create(&z, &d);
        if (r == ZERO_OK) {
            for (int i = 0; i < 3 && r == ZERO_OK; i++) {
                char name[16];
                snprintf(name, sizeof name, "m%d", i);
                md.name = name;
                r = zero_add_module(z, &md, &m);
                if (r == ZERO_OK) {
                    pdesc(&pd, 1, 17 + i, 1); pd.name = "w";
                    r = zero_add_param(z, m, &pd, &p);
                }
            }
            if (r == ZERO_OK) r = zero_build(z);
            if (r == ZERO_OK) done_ok = 1;
        } else {
            CHECK(z == NULL, "k=%d: zero_create failed but *out is not NULL", k);
        }
        CHECK(r == ZERO_OK || r == ZERO_ERR_OUT_OF_MEMORY, "k=%d: got %s, want OK or %s", k, zero_result_str(r),
              zero_result_str(ZERO_ERR_OUT_OF_MEMORY));
        if (r != ZERO_OK) CHECK(msg_ok(zero_last_error(z)), "k=%d: no message", k);
        zero_destroy(z);
        live = fa_get(&a, NULL);
        CHECK(live == 0, "k=%d: %ld allocations still live after zero_destroy", k, live);
        zero__mutex_destroy(&a.mu);
        if (live != 0 || (r != ZERO_OK && r != ZERO_ERR_OUT_OF_MEMORY)) break;
    }
    CHECK(done_ok || k < OOM_MAX_K, "still failing after %d allocations", OOM_MAX_K);
}

/* ==== names of codes and items ===================================================== */
static void strings_nonempty(void) {
    static const zero_result codes[] = {
        ZERO_OK, ZERO_STEP_SKIPPED, ZERO_ERR_INVALID_ARG, ZERO_ERR_INVALID_STAGE, ZERO_ERR_INVALID_SIZE,
        ZERO_ERR_INVALID_DTYPE, ZERO_ERR_INVALID_HANDLE, ZERO_ERR_ALREADY_BUILT, ZERO_ERR_NOT_BUILT,
        ZERO_ERR_GRADS_NOT_READY, ZERO_ERR_NOT_FETCHED, ZERO_ERR_STATE, ZERO_ERR_MISMATCH, ZERO_ERR_TIMEOUT,
        ZERO_ERR_COMM, ZERO_ERR_OUT_OF_MEMORY, ZERO_ERR_OVER_CAP, ZERO_ERR_IO, ZERO_ERR_NO_DEVICE,
        ZERO_ERR_UNSUPPORTED, ZERO_ERR_CORRUPT, ZERO_ERR_VERSION, ZERO_ERR_DEVICE, ZERO_ERR_NOT_FOUND };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = zero_result_str(codes[i]);
        CHECK(s && s[0], "zero_result_str(%d) is empty", (int)codes[i]);
        for (size_t k = 0; k < i && s; k++) {
            const char *t = zero_result_str(codes[k]);
            CHECK(!t || strcmp(s, t) != 0, "zero_result_str(%d) == zero_result_str(%d) == %s", (int)codes[i],
                  (int)codes[k], s);
        }
    }
    CHECK(zero_result_str((zero_result)-999) != NULL, "zero_result_str(-999) is NULL");
    for (int i = 0; i < ZERO_LOGITEM_NUM; i++) {
        const char *s = zero_log_item_str((zero_log_item)i);
        CHECK(s && s[0], "zero_log_item_str(%d) is empty", i);
    }
    CHECK(zero_dtype_size((zero_dtype)99) == 0, "zero_dtype_size(99) = %zu, want 0", zero_dtype_size((zero_dtype)99));
    CHECK(zero_dtype_str((zero_dtype)99) != NULL, "zero_dtype_str(99) is NULL");
    CHECK(zero_dtype_size(ZERO_F32) == 4 && zero_dtype_size(ZERO_BF16) == 2 && zero_dtype_size(ZERO_F16) == 2,
          "dtype sizes");
}

/* Two contexts on one comm endpoint would interleave their collectives differently
   on different ranks: the second zero_create is refused; after the first context is
   destroyed the endpoint can be used again. */
static void two_contexts_one_endpoint(void) {
    zero_group *g = NULL;
    zero_comm *c = NULL;
    zero_ctx *a = NULL, *b = NULL;
    zero_desc d;
    rec_log rec;
    zero_result r;
    rec_init(&rec);
    memset(&d, 0, sizeof d);
    if (!CHECK(zero_group_create(&g, 1) == ZERO_OK && zero_comm_local(&c, g, 0) == ZERO_OK, "group")) return;
    d.comm = c;
    rec_attach(&d, &rec);
    CHECK(zero_create(&a, &d) == ZERO_OK, "first context: %s", zero_last_error(NULL));
    r = zero_create(&b, &d);
    CHECK(r == ZERO_ERR_STATE && b == NULL, "second context on the endpoint: %s", zero_result_str(r));
    CHECK(strstr(zero_last_error(NULL), "already used") != NULL, "message: %s", zero_last_error(NULL));
    CHECK(rec_count(&rec, ZERO_LOGITEM_BAD_SEQUENCE) == 1, "logger did not see BAD_SEQUENCE");
    zero_destroy(a);
    CHECK(zero_create(&b, &d) == ZERO_OK, "endpoint not reusable after destroy: %s", zero_last_error(NULL));
    zero_destroy(b);
    zero_comm_destroy(c);
    zero_group_destroy(g);
    rec_fini(&rec);
}

int main(void) {
    test_init();
    TEST_RUN(two_contexts_one_endpoint);
    TEST_RUN(create_stage_4);
    TEST_RUN(create_stage_neg1);
    TEST_RUN(create_negative_bucket_bytes);
    TEST_RUN(create_negative_accum_steps);
    TEST_RUN(create_negative_align_elems);
    TEST_RUN(create_param_dtype_99);
    TEST_RUN(create_grad_dtype_99);
    TEST_RUN(create_grad_accum_dtype_99);
    TEST_RUN(create_state_dtype_99);
    TEST_RUN(create_state_dtype_neg);
    TEST_RUN(param_shape_zero);
    TEST_RUN(param_shape_negative);
    TEST_RUN(param_shape_negative_2d);
    TEST_RUN(param_shape_two_negatives);
    TEST_RUN(param_ndim_zero);
    TEST_RUN(param_ndim_negative);
    TEST_RUN(param_ndim_too_many);
    TEST_RUN(param_numel_overflow);
    TEST_RUN(param_numel_overflow_odd);
    TEST_RUN(total_numel_overflow);
    TEST_RUN(total_bytes_overflow);
    TEST_RUN(null_create_out);
    TEST_RUN(null_create_desc);
    TEST_RUN(null_add_module_desc);
    TEST_RUN(null_add_module_out);
    TEST_RUN(null_add_module_ctx);
    TEST_RUN(null_add_module_name);
    TEST_RUN(null_add_param_desc);
    TEST_RUN(null_add_param_out);
    TEST_RUN(null_add_param_name);
    TEST_RUN(bad_names);
    TEST_RUN(safetensors_key_clash);
    TEST_RUN(null_plan_get_out);
    TEST_RUN(null_stats_get_out);
    TEST_RUN(log_plan_at_build);
    TEST_RUN(run_nccl_without_cuda);
    TEST_RUN(null_estimate_desc);
    TEST_RUN(null_estimate_numels);
    TEST_RUN(null_estimate_out);
    TEST_RUN(null_build_ctx);
    TEST_RUN(null_step_ctx);
    TEST_RUN(null_fetch_ctx);
    TEST_RUN(null_param_set_values);
    TEST_RUN(null_gather_out);
    TEST_RUN(null_allreduce_values);
    TEST_RUN(null_group_create_out);
    TEST_RUN(null_comm_local_out);
    TEST_RUN(null_comm_local_group);
    TEST_RUN(null_run_local_fn);
    TEST_RUN(duplicate_module_name);
    TEST_RUN(duplicate_param_name);
    TEST_RUN(built_add_module);
    TEST_RUN(built_add_param);
    TEST_RUN(handle_fetch_12345_stage3);
    TEST_RUN(handle_fetch_12345_stage0);
    TEST_RUN(handle_fetch_zero_stage3);
    TEST_RUN(handle_fetch_zero_stage0);
    TEST_RUN(handle_foreign);
    TEST_RUN(handle_param_unknown);
    TEST_RUN(handle_add_param_unknown_module);
    TEST_RUN(grads_not_ready_stage0);
    TEST_RUN(grads_not_ready_stage1);
    TEST_RUN(grads_not_ready_stage2);
    TEST_RUN(grads_not_ready_stage3);
    TEST_RUN(not_built_step);
    TEST_RUN(not_built_fetch);
    TEST_RUN(not_built_release);
    TEST_RUN(not_built_grads_ready);
    TEST_RUN(not_built_gather);
    TEST_RUN(not_fetched_param_data);
    TEST_RUN(mismatch_shape);
    TEST_RUN(mismatch_extra_param);
    TEST_RUN(mismatch_extra_module);
    TEST_RUN(mismatch_stage);
    TEST_RUN(mismatch_shape_world3);
    TEST_RUN(timeout_step_stage2_rank_left);
    TEST_RUN(timeout_fetch_stage3_rank_left);
    TEST_RUN(timeout_step_stage2_rank_stalls);
    TEST_RUN(timeout_fetch_stage3_rank_stalls);
    TEST_RUN(timeout_allreduce_writer_finishes);
    TEST_RUN(f16_overflow_stage0);
    TEST_RUN(f16_overflow_stage1);
    TEST_RUN(f16_overflow_stage2);
    TEST_RUN(f16_overflow_stage3);
    TEST_RUN(f16_inf_bits_stage2);
    TEST_RUN(f16_overflow_one_rank_stage1_world2);
    TEST_RUN(f16_overflow_one_rank_stage3_world2);
    TEST_RUN(bf16_nan_stage0);
    TEST_RUN(bf16_nan_stage1);
    TEST_RUN(bf16_nan_stage2);
    TEST_RUN(bf16_nan_stage3);
    TEST_RUN(bf16_nan_one_rank_stage2_world2);
    TEST_RUN(over_cap);
    TEST_RUN(oom_build_stage0);
    TEST_RUN(oom_build_stage3);
    TEST_RUN(oom_sweep);
    TEST_RUN(strings_nonempty);
    TEST_RUN(run_local_message);
    TEST_RUN(fetch_nests_stage3);
    return test_summary();
}
