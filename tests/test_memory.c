/* test_memory.c - zero.h's memory plan and communication volume against the ZeRO formulas.

   For world sizes N = 1..4 (zero_run_local) and stages 0..3:
     bytes_bf16_*      per-rank model-state bytes after zero_build, bf16 params/grads
                       + AdamW (defaults): 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N, category by
                       category; Ψ = zero_plan.numel_padded, checked against the
                       documented padding (module spans padded to a multiple of
                       N*align_elems, every param start aligned to align_elems);
                       zero_plan_get before zero_build == zero_stats_get after, for
                       the whole tier x category table.
     bytes_accum_f32_* grad_accum_dtype = ZERO_F32: grads 4Ψ (stages 0-1), 4Ψ/N (2-3).
     bytes_f32_*       f32 params: no master copy.
     estimate_*        zero_estimate for one module of Ψ elements follows the formulas,
                       and equals the plan of a context with the same modules.
     fall_*            zero_estimate's total_bytes (states + buffers) per rank falls, not
                       strictly, from stage 0 to 3 with the default buffers, for models
                       of 1e3..1e11 params of many modules (32 equal, GPT-like, uneven)
                       at N = 2..64 and four dtype setups, wherever ON MEMORY says it
                       does (the test checks that it says so for these shapes); one or
                       two big modules: stage 3 needs more than stage 2, as documented.
     bucket_default    the defaults that scale with the model (ON BUCKETS): bucket_bytes
                       = min(16 MiB, G/8) in the plan and in zero_query_desc after
                       zero_build (0 before), max_live_bytes / prefetch_bytes = the
                       largest module; explicit values kept; 16 MiB buckets (a 32 MiB
                       ring) for a 1e9-param model.
     comm_*            comm_elems per step (fetch/forward/backward/grads_ready/step):
                       stage 0: 2Ψ(N-1)/N of gradient traffic (all-reduce, or the
                       reduce-scatter + all-gather it is built from); stages 1-2:
                       RS = AG = Ψ(N-1)/N; stage 3: AG = 2Ψ(N-1)/N (forward and
                       backward fetch), RS = Ψ(N-1)/N; ALL_REDUCE beyond the gradient
                       traffic at most a handful of elements (the norm scalars). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

/* ---- the model: odd sizes and several params per module, so padding shows ---------- */
#define MAX_P 4
typedef struct mod_spec {
    const char *name;
    int np;
    int ndim[MAX_P];
    int64_t shape[MAX_P][3];
} mod_spec;

static const mod_spec MODEL[] = {
    { "embed", 2, { 1, 2 },    { { 37 }, { 5, 3 } } },
    { "block", 3, { 1, 3, 1 }, { { 101 }, { 2, 7, 3 }, { 1 } } },
    { "head",  1, { 1 },       { { 9 } } },
    { "tiny",  1, { 1 },       { { 3 } } },
};
#define NUM_MODS ((int)(sizeof MODEL / sizeof MODEL[0]))

#define AR_HANDFUL 64       /* elements: the norm / non-finite scalars of one all-reduce */

static int64_t roundup(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static int64_t param_numel(const mod_spec *m, int i) {
    int64_t n = 1;
    for (int d = 0; d < m->ndim[i]; d++) n *= m->shape[i][d];
    return n;
}

/* The documented layout: each param starts at a multiple of A, each module's span is
   a multiple of N*A. */
/* params at multiples of A, the span at a multiple of N * U (U: A, or with q8 moments 256,
   the least common multiple of 16 and the q8 block: zero__span_unit) */
static int64_t module_padded_u(const mod_spec *m, int64_t N, int64_t A, int64_t U) {
    int64_t off = 0;
    for (int i = 0; i < m->np; i++) off = roundup(off, A) + param_numel(m, i);
    return roundup(off, N * U);
}
static int64_t module_padded(const mod_spec *m, int64_t N, int64_t A) { return module_padded_u(m, N, A, A); }

typedef struct model {
    zero_ctx *z;
    zero_module m[NUM_MODS];
    zero_param p[NUM_MODS][MAX_P];
} model;

static int model_make(model *mo, const zero_desc *d, int rank) {
    zero_result r;
    memset(mo, 0, sizeof *mo);
    r = zero_create(&mo->z, d);
    if (!CHECK(r == ZERO_OK, "rank %d: zero_create: %s: %s", rank, zero_result_str(r), zero_last_error(NULL)))
        return 0;
    for (int k = 0; k < NUM_MODS; k++) {
        zero_module_desc md;
        memset(&md, 0, sizeof md);
        md.name = MODEL[k].name;
        r = zero_add_module(mo->z, &md, &mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_add_module: %s", rank, zero_result_str(r))) return 0;
        for (int i = 0; i < MODEL[k].np; i++) {
            static const char *pnames[MAX_P] = { "p0", "p1", "p2", "p3" };
            zero_param_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.name = pnames[i];
            pd.ndim = MODEL[k].ndim[i];
            for (int dd = 0; dd < pd.ndim; dd++) pd.shape[dd] = MODEL[k].shape[i][dd];
            r = zero_add_param(mo->z, mo->m[k], &pd, &mo->p[k][i]);
            if (!CHECK(r == ZERO_OK, "rank %d: zero_add_param: %s", rank, zero_result_str(r))) return 0;
        }
    }
    return 1;
}

/* ---- expectations ------------------------------------------------------------------- */
/* V_BF16_STATES: bf16 params with bf16 moments (optim.state_dtype, ON OPTIMIZER STATES);
   V_Q8_STATES: with q8 moments (a byte each, a 4-byte scale per 256, spans padded to N * 256) */
typedef enum { V_BF16, V_ACCUM_F32, V_F32, V_BF16_STATES, V_Q8_STATES } variant;
static int64_t variant_unit(variant v) { return v == V_Q8_STATES ? 256 : 16; }

static const char *variant_name(variant v) {
    return v == V_BF16 ? "bf16" : v == V_ACCUM_F32 ? "accum_f32" : v == V_F32 ? "f32" : v == V_BF16_STATES ? "bf16_states"
                                                                                            : "q8_states";
}

static void variant_desc(zero_desc *d, variant v, int stage, zero_comm *comm) {
    memset(d, 0, sizeof *d);
    d->comm = comm;
    d->stage = stage;
    d->timeout_ms = 20000;
    if (v == V_ACCUM_F32) d->grad_accum_dtype = ZERO_F32;
    if (v == V_F32) d->param_dtype = ZERO_F32;
    if (v == V_BF16_STATES) d->optim.state_dtype = ZERO_STATE_BF16;
    if (v == V_Q8_STATES) d->optim.state_dtype = ZERO_STATE_Q8;
}

/* Per-rank bytes by category, for psi padded elements (divisible by N). */
static void expected_bytes(variant v, int stage, int64_t N, int64_t psi, int64_t out[ZERO_CAT_NUM]) {
    int64_t pbytes = v == V_F32 ? 4 : 2;
    int64_t gbytes = v == V_BF16 || v == V_BF16_STATES || v == V_Q8_STATES ? 2 : 4;
    int64_t shard = psi / N, held = stage >= 1 ? shard : psi;
    out[ZERO_CAT_PARAMS] = pbytes * (stage >= 3 ? shard : psi);
    out[ZERO_CAT_GRADS] = gbytes * (stage >= 2 ? shard : psi);
    out[ZERO_CAT_MASTER] = v == V_F32 ? 0 : 4 * (stage >= 1 ? shard : psi);
    out[ZERO_CAT_OPTIM] = v == V_Q8_STATES ? 2 * (held + held / 256 * 4) : (v == V_BF16_STATES ? 4 : 8) * held;   /* AdamW's m and v */
    out[ZERO_CAT_BUFFERS] = -1;                                 /* not a formula */
    out[ZERO_CAT_ACTIVATIONS] = 0;                              /* no activation stash here */
}

static int64_t formula_total(int stage, int64_t N, int64_t psi) {      /* the ZeRO table */
    switch (stage) {
    case 0: return 16 * psi;
    case 1: return 4 * psi + 12 * psi / N;
    case 2: return 2 * psi + 14 * psi / N;
    default: return 16 * psi / N;
    }
}

static int64_t cat_sum(const int64_t b[ZERO_TIER_NUM][ZERO_CAT_NUM], int c) {
    int64_t s = 0;
    for (int t = 0; t < ZERO_TIER_NUM; t++) s += b[t][c];
    return s;
}

/* model_state_bytes and total_bytes are the sums they say they are. */
static void check_sums(const char *what, int rank, const int64_t b[ZERO_TIER_NUM][ZERO_CAT_NUM],
                       int64_t model_state, int64_t total) {
    int64_t ms = 0, all = 0;
    for (int t = 0; t < ZERO_TIER_NUM; t++) {
        for (int c = 0; c < ZERO_CAT_NUM; c++) {
            CHECK(b[t][c] >= 0, "rank %d: %s bytes[%d][%d] = %lld < 0", rank, what, t, c, (long long)b[t][c]);
            all += b[t][c];
            if (c != ZERO_CAT_BUFFERS && c != ZERO_CAT_ACTIVATIONS) ms += b[t][c];
        }
    }
    CHECK(model_state == ms, "rank %d: %s model_state_bytes %lld, the table sums to %lld", rank, what,
          (long long)model_state, (long long)ms);
    CHECK(total == all, "rank %d: %s total_bytes %lld, the table sums to %lld", rank, what,
          (long long)total, (long long)all);
}

static void check_bytes(const char *what, int rank, variant v, int stage, int64_t N, int64_t psi,
                        const int64_t b[ZERO_TIER_NUM][ZERO_CAT_NUM], int64_t model_state) {
    static const char *cname[ZERO_CAT_NUM] = { "params", "grads", "master", "optim", "buffers", "activations" };
    int64_t want[ZERO_CAT_NUM];
    expected_bytes(v, stage, N, psi, want);
    for (int c = 0; c < ZERO_CAT_NUM; c++) {
        if (want[c] < 0) continue;
        CHECK(cat_sum(b, c) == want[c], "rank %d: %s %s bytes %lld, want %lld (stage %d, N %lld, psi %lld)",
              rank, what, cname[c], (long long)cat_sum(b, c), (long long)want[c], stage, (long long)N,
              (long long)psi);
    }
    if (v == V_BF16)
        CHECK(model_state == formula_total(stage, N, psi), "rank %d: %s model_state_bytes %lld, want %lld "
              "(the ZeRO formula at stage %d, N %lld, psi %lld)", rank, what, (long long)model_state,
              (long long)formula_total(stage, N, psi), stage, (long long)N, (long long)psi);
}

static int tables_equal(const int64_t a[ZERO_TIER_NUM][ZERO_CAT_NUM], const int64_t b[ZERO_TIER_NUM][ZERO_CAT_NUM],
                        int *t_out, int *c_out) {
    for (int t = 0; t < ZERO_TIER_NUM; t++)
        for (int c = 0; c < ZERO_CAT_NUM; c++)
            if (a[t][c] != b[t][c]) { *t_out = t; *c_out = c; return 0; }
    return 1;
}

/* ---- bytes: plan, stats and the formulas -------------------------------------------- */
typedef struct job {
    variant v;
    int stage;
} job;

static zero_result bytes_rank(zero_comm *comm, int rank, void *user) {
    const job *j = (const job *)user;
    zero_desc d, eff;
    model mo;
    zero_plan pl;
    zero_stats st;
    zero_result r;
    int64_t N, A, numel = 0, padded = 0, bound = 0;
    int t, c;

    variant_desc(&d, j->v, j->stage, comm);
    if (!model_make(&mo, &d, rank)) goto done;
    N = zero_world_size(mo.z);
    eff = zero_query_desc(mo.z);
    A = eff.align_elems;
    CHECK(A == 16, "rank %d: effective align_elems %lld, want the default 16", rank, (long long)A);
    if (A <= 0) goto done;
    for (int k = 0; k < NUM_MODS; k++) {
        padded += module_padded_u(&MODEL[k], N, A, variant_unit(j->v));
        bound += (int64_t)(MODEL[k].np - 1) * (A - 1) + (N * variant_unit(j->v) - 1);
        for (int i = 0; i < MODEL[k].np; i++) numel += param_numel(&MODEL[k], i);
    }

    r = zero_plan_get(mo.z, &pl);
    if (!CHECK(r == ZERO_OK, "rank %d: zero_plan_get before build: %s: %s", rank, zero_result_str(r),
               zero_last_error(mo.z))) goto done;
    CHECK(pl.stage == j->stage && pl.world_size == N, "rank %d: plan stage %d world %d", rank, pl.stage,
          pl.world_size);
    CHECK(pl.numel == numel, "rank %d: plan numel %lld, want %lld", rank, (long long)pl.numel, (long long)numel);
    CHECK(zero_num_params(mo.z) == numel, "rank %d: zero_num_params %lld, want %lld", rank,
          (long long)zero_num_params(mo.z), (long long)numel);
    CHECK(pl.numel_padded == padded, "rank %d: numel_padded %lld, want %lld (modules padded to a multiple of "
          "N*align = %lld, params aligned to %lld)", rank, (long long)pl.numel_padded, (long long)padded,
          (long long)(N * A), (long long)A);
    CHECK(pl.numel_padded >= pl.numel && pl.numel_padded - pl.numel <= bound,
          "rank %d: padding %lld outside [0, %lld]", rank, (long long)(pl.numel_padded - pl.numel), (long long)bound);
    CHECK(pl.numel_padded % N == 0, "rank %d: numel_padded %lld not a multiple of N", rank,
          (long long)pl.numel_padded);
    CHECK(pl.trainable_padded == pl.numel_padded, "rank %d: trainable_padded %lld, numel_padded %lld (nothing "
          "is frozen)", rank, (long long)pl.trainable_padded, (long long)pl.numel_padded);
    check_sums("plan", rank, pl.bytes, pl.model_state_bytes, pl.total_bytes);
    check_bytes("plan", rank, j->v, j->stage, N, pl.numel_padded, pl.bytes, pl.model_state_bytes);

    r = zero_build(mo.z);
    if (!CHECK(r == ZERO_OK, "rank %d: zero_build: %s: %s", rank, zero_result_str(r), zero_last_error(mo.z)))
        goto done;
    r = zero_stats_get(mo.z, &st);
    if (!CHECK(r == ZERO_OK, "rank %d: zero_stats_get: %s", rank, zero_result_str(r))) goto done;
    check_sums("stats", rank, st.bytes, st.model_state_bytes, st.total_bytes);
    check_bytes("stats", rank, j->v, j->stage, N, pl.numel_padded, st.bytes, st.model_state_bytes);
    CHECK(tables_equal(pl.bytes, st.bytes, &t, &c), "rank %d: plan bytes[%d][%d] = %lld but stats after build "
          "= %lld", rank, t, c, (long long)pl.bytes[t][c], (long long)st.bytes[t][c]);
    CHECK(pl.model_state_bytes == st.model_state_bytes && pl.total_bytes == st.total_bytes,
          "rank %d: plan model_state/total %lld/%lld, stats %lld/%lld", rank, (long long)pl.model_state_bytes,
          (long long)pl.total_bytes, (long long)st.model_state_bytes, (long long)st.total_bytes);
    {
        zero_plan after;        /* the plan does not change by building */
        r = zero_plan_get(mo.z, &after);
        CHECK(r == ZERO_OK, "rank %d: zero_plan_get after build: %s", rank, zero_result_str(r));
        if (r == ZERO_OK)
            CHECK(memcmp(&after, &pl, sizeof pl) == 0, "rank %d: zero_plan_get after build differs", rank);
    }
done:
    zero_destroy(mo.z);
    return ZERO_OK;
}

/* ---- zero_estimate ------------------------------------------------------------------ */
static int plans_equal(const zero_plan *a, const zero_plan *b, char *why, size_t n) {
    int t, c;
    if (a->stage != b->stage || a->world_size != b->world_size) { snprintf(why, n, "stage/world"); return 0; }
    if (a->numel != b->numel) { snprintf(why, n, "numel %lld vs %lld", (long long)a->numel, (long long)b->numel); return 0; }
    if (a->numel_padded != b->numel_padded) {
        snprintf(why, n, "numel_padded %lld vs %lld", (long long)a->numel_padded, (long long)b->numel_padded);
        return 0;
    }
    if (a->trainable_padded != b->trainable_padded) { snprintf(why, n, "trainable_padded"); return 0; }
    if (!tables_equal(a->bytes, b->bytes, &t, &c)) {
        snprintf(why, n, "bytes[%d][%d] %lld vs %lld", t, c, (long long)a->bytes[t][c], (long long)b->bytes[t][c]);
        return 0;
    }
    if (a->model_state_bytes != b->model_state_bytes || a->total_bytes != b->total_bytes) {
        snprintf(why, n, "model_state/total %lld/%lld vs %lld/%lld", (long long)a->model_state_bytes,
                 (long long)a->total_bytes, (long long)b->model_state_bytes, (long long)b->total_bytes);
        return 0;
    }
    return 1;
}

static const int64_t EST_SIZES[3] = { 1001, 77, 5 };

static zero_result estimate_rank(zero_comm *comm, int rank, void *user) {
    const job *j = (const job *)user;
    int64_t N = comm ? zero_comm_size(comm) : 1;
    zero_desc d;
    zero_plan est, est3, pl;
    zero_result r;
    zero_ctx *z = NULL;
    char why[256];
    int64_t psi = EST_SIZES[0];

    variant_desc(&d, j->v, j->stage, NULL);
    /* one module of psi elements: the formulas */
    r = zero_estimate(&d, (int)N, 1, &psi, &est);
    if (!CHECK(r == ZERO_OK, "zero_estimate: %s: %s", zero_result_str(r), zero_last_error(NULL))) goto done;
    CHECK(est.numel == psi && est.numel_padded == roundup(psi, N * variant_unit(j->v)), "estimate numel %lld padded "
          "%lld, want %lld and %lld", (long long)est.numel, (long long)est.numel_padded, (long long)psi,
          (long long)roundup(psi, N * variant_unit(j->v)));
    CHECK(est.stage == j->stage && est.world_size == N, "estimate stage %d world %d", est.stage, est.world_size);
    check_sums("estimate", rank, est.bytes, est.model_state_bytes, est.total_bytes);
    check_bytes("estimate", rank, j->v, j->stage, N, est.numel_padded, est.bytes, est.model_state_bytes);

    /* three single-param modules: the estimate equals the real plan, and the built stats */
    r = zero_estimate(&d, (int)N, 3, EST_SIZES, &est3);
    if (!CHECK(r == ZERO_OK, "zero_estimate(3 modules): %s", zero_result_str(r))) goto done;
    d.comm = comm;
    r = zero_create(&z, &d);
    if (!CHECK(r == ZERO_OK, "zero_create: %s", zero_result_str(r))) goto done;
    for (int k = 0; k < 3; k++) {
        static const char *names[3] = { "a", "b", "c" };
        zero_module m; zero_param p; zero_module_desc md; zero_param_desc pd;
        memset(&md, 0, sizeof md); memset(&pd, 0, sizeof pd);
        md.name = names[k]; pd.name = "w"; pd.ndim = 1; pd.shape[0] = EST_SIZES[k];
        if (!CHECK(zero_add_module(z, &md, &m) == ZERO_OK && zero_add_param(z, m, &pd, &p) == ZERO_OK,
                   "registration failed")) goto done;
    }
    r = zero_plan_get(z, &pl);
    if (!CHECK(r == ZERO_OK, "zero_plan_get: %s", zero_result_str(r))) goto done;
    CHECK(plans_equal(&est3, &pl, why, sizeof why), "rank %d: zero_estimate != zero_plan_get: %s", rank, why);
    r = zero_build(z);
    if (CHECK(r == ZERO_OK, "zero_build: %s", zero_result_str(r))) {
        zero_stats st;
        int t, c;
        if (CHECK(zero_stats_get(z, &st) == ZERO_OK, "zero_stats_get"))
            CHECK(tables_equal(est3.bytes, st.bytes, &t, &c), "rank %d: estimate bytes[%d][%d] %lld, stats %lld",
                  rank, t, c, (long long)est3.bytes[t][c], (long long)st.bytes[t][c]);
    }
done:
    zero_destroy(z);
    return ZERO_OK;
}

/* ---- communication volume ----------------------------------------------------------- */
static int cycle(model *mo, int rank) {
    zero_result r;
    float g[128];
    for (int i = 0; i < 128; i++) g[i] = 0.01f * (float)((i % 7) - 3);
    for (int k = 0; k < NUM_MODS; k++) {                    /* forward */
        r = zero_fetch(mo->z, mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_fetch: %s: %s", rank, zero_result_str(r), zero_last_error(mo->z)))
            return 0;
        CHECK(zero_param_data(mo->z, mo->p[k][0]) != NULL, "rank %d: zero_param_data NULL", rank);
        r = zero_release(mo->z, mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_release: %s", rank, zero_result_str(r))) return 0;
    }
    for (int k = NUM_MODS - 1; k >= 0; k--) {               /* backward */
        r = zero_fetch(mo->z, mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_fetch (backward): %s", rank, zero_result_str(r))) return 0;
        for (int i = 0; i < MODEL[k].np; i++) {
            void *gp = zero_param_grad(mo->z, mo->p[k][i]);
            if (!CHECK(gp != NULL, "rank %d: zero_param_grad NULL: %s", rank, zero_last_error(mo->z))) return 0;
            zero_add_f32(gp, zero_query_desc(mo->z).grad_dtype, g, param_numel(&MODEL[k], i));
        }
        r = zero_release(mo->z, mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_release (backward): %s", rank, zero_result_str(r))) return 0;
        r = zero_grads_ready(mo->z, mo->m[k]);
        if (!CHECK(r == ZERO_OK, "rank %d: zero_grads_ready: %s", rank, zero_result_str(r))) return 0;
    }
    r = zero_step(mo->z);
    return CHECK(r == ZERO_OK, "rank %d: zero_step: %s: %s", rank, zero_result_str(r), zero_last_error(mo->z));
}

static zero_result comm_rank(zero_comm *comm, int rank, void *user) {
    const job *j = (const job *)user;
    zero_desc d;
    model mo;
    zero_plan pl;
    zero_stats s0, s1;
    int64_t N, V, rs, ag, ar;

    variant_desc(&d, V_BF16, j->stage, comm);
    if (!model_make(&mo, &d, rank)) goto done;
    if (!CHECK(zero_build(mo.z) == ZERO_OK, "rank %d: zero_build: %s", rank, zero_last_error(mo.z))) goto done;
    if (!CHECK(zero_plan_get(mo.z, &pl) == ZERO_OK, "zero_plan_get")) goto done;
    N = zero_world_size(mo.z);
    V = pl.trainable_padded * (N - 1) / N;      /* exact: every span is a multiple of N */

    /* step 1 warms up (it may check the schedule across ranks); step 2 is measured: a
       window of one steady-state step holds one step's collectives wherever the
       library issues them */
    if (!cycle(&mo, rank)) goto done;
    zero_stats_get(mo.z, &s0);
    if (!cycle(&mo, rank)) goto done;
    zero_stats_get(mo.z, &s1);
    rs = s1.comm_elems[ZERO_COLL_REDUCE_SCATTER] - s0.comm_elems[ZERO_COLL_REDUCE_SCATTER];
    ag = s1.comm_elems[ZERO_COLL_ALL_GATHER] - s0.comm_elems[ZERO_COLL_ALL_GATHER];
    ar = s1.comm_elems[ZERO_COLL_ALL_REDUCE] - s0.comm_elems[ZERO_COLL_ALL_REDUCE];
    CHECK(s1.steps - s0.steps == 1, "rank %d: %lld steps in the window", rank, (long long)(s1.steps - s0.steps));

    switch (j->stage) {
    case 0:
        /* the doc: stage 0 all-reduces gradients "as reduce-scatter + all-gather";
           counted as either, the gradient traffic is 2 psi (N-1)/N */
        if (rs == 0 && ag == 0)
            CHECK(ar >= 2 * V && ar <= 2 * V + AR_HANDFUL, "rank %d: stage 0 all-reduce %lld elems, want 2V = %lld "
                  "(+ <= %d)", rank, (long long)ar, (long long)(2 * V), AR_HANDFUL);
        else
            CHECK(rs == V && ag == V && ar <= AR_HANDFUL, "rank %d: stage 0 RS %lld AG %lld AR %lld elems, want RS = "
                  "AG = %lld (2 psi (N-1)/N in all), AR <= %d", rank, (long long)rs, (long long)ag, (long long)ar,
                  (long long)V, AR_HANDFUL);
        break;
    case 1:
    case 2:
        CHECK(rs == V, "rank %d: stage %d reduce-scatter %lld elems, want psi (N-1)/N = %lld", rank, j->stage,
              (long long)rs, (long long)V);
        CHECK(ag == V, "rank %d: stage %d all-gather %lld elems, want psi (N-1)/N = %lld", rank, j->stage,
              (long long)ag, (long long)V);
        CHECK(ar <= AR_HANDFUL, "rank %d: stage %d all-reduce %lld elems, want <= %d", rank, j->stage,
              (long long)ar, AR_HANDFUL);
        break;
    default:
        CHECK(ag + rs == 3 * V, "rank %d: stage 3 AG + RS = %lld + %lld elems, want 3 psi (N-1)/N = %lld", rank,
              (long long)ag, (long long)rs, (long long)(3 * V));
        CHECK(ag == 2 * V && rs == V, "rank %d: stage 3 AG %lld (want 2V = %lld: forward + backward fetch), "
              "RS %lld (want V = %lld)", rank, (long long)ag, (long long)(2 * V), (long long)rs, (long long)V);
        CHECK(ar <= AR_HANDFUL, "rank %d: stage 3 all-reduce %lld elems, want <= %d", rank, (long long)ar,
              AR_HANDFUL);
        break;
    }
    if (N == 1)
        CHECK(rs == 0 && ag == 0 && ar == 0, "rank %d: a world of one sent %lld/%lld/%lld elems", rank,
              (long long)rs, (long long)ag, (long long)ar);
done:
    zero_destroy(mo.z);
    return ZERO_OK;
}

/* ---- the fall from stage 0 to 3 (ON MEMORY) ------------------------------------------- */
static int64_t align64(int64_t x) { return roundup(x, 64); }

enum { SH_BLOCKS32, SH_GPT, SH_UNEVEN, SH_ONE, SH_TWO, SH_NUM };
static const char *SHAPE_NAME[SH_NUM] = { "blocks32", "gpt", "uneven", "one", "two" };

/* P elements cut into modules of a shape; returns the count (at most 40) */
static int shape_numels(int sh, int64_t P, int64_t *n) {
    int k, m = 0;
    switch (sh) {
    case SH_BLOCKS32:                   /* 32 equal blocks */
        for (k = 0; k < 32; k++) n[m++] = P / 32 + (k < P % 32);
        return m;
    case SH_GPT: {                      /* an embedding of P/5, 8 blocks, a final norm, a tied head */
        int64_t norm = P / 1000 + 1, rest = P - P / 5 - norm;
        n[m++] = P / 5;
        for (k = 0; k < 8; k++) n[m++] = rest / 8 + (k < rest % 8);
        n[m++] = norm;
        return m;
    }
    case SH_UNEVEN: {                   /* 12 modules of 1, 2, ..., 12 parts (the largest 12/78) */
        int64_t used = 0;
        for (k = 1; k <= 12; k++) { n[m] = k < 12 ? P * k / 78 : P - used; used += n[m++]; }
        return m;
    }
    case SH_ONE: n[m++] = P; return m;
    default: n[m++] = P / 2; n[m++] = P - P / 2; return m;
    }
}

static void fall_case(variant v, zero_dtype pdt, int sh, int64_t P, int N) {
    int64_t n[40], tot[4], largest = 0, psz, gsz, T, Pp;
    zero_plan pl[4];
    zero_desc d;
    int m = shape_numels(sh, P, n), s, c12, c23;
    for (s = 0; s < 4; s++) {
        zero_result r;
        variant_desc(&d, v, s, NULL);
        if (pdt) d.param_dtype = pdt;
        r = zero_estimate(&d, N, m, n, &pl[s]);
        if (!CHECK(r == ZERO_OK, "zero_estimate(P %lld, N %d, stage %d): %s: %s", (long long)P, N, s,
                   zero_result_str(r), zero_last_error(NULL))) return;
        tot[s] = pl[s].total_bytes;
    }
    /* the conditions ON MEMORY states, from the sizes (align_elems 16: spans of N*16) */
    for (s = 0; s < m; s++) if (roundup(n[s], 16 * N) > largest) largest = roundup(n[s], 16 * N);
    psz = pdt == ZERO_F16 ? 2 : v == V_F32 ? 4 : 2;
    gsz = v == V_F32 ? 4 : 2;                       /* grad_dtype follows param_dtype */
    T = pl[0].trainable_padded; Pp = pl[0].numel_padded;
    c12 = align64(largest * gsz) <= (T - T / N) * gsz;
    c23 = 2 * align64(largest * psz) <= (Pp - Pp / N) * psz;
    CHECK(tot[0] >= tot[1], "P %lld N %d: stage 0 %lld < stage 1 %lld", (long long)P, N, (long long)tot[0],
          (long long)tot[1]);
    if (c12)
        CHECK(tot[1] >= tot[2], "P %lld N %d: stage 1 %lld < stage 2 %lld (largest module %lld of %lld)",
              (long long)P, N, (long long)tot[1], (long long)tot[2], (long long)largest, (long long)T);
    if (c12 && c23)
        CHECK(tot[2] >= tot[3], "P %lld N %d: stage 2 %lld < stage 3 %lld (largest module %lld of %lld)",
              (long long)P, N, (long long)tot[2], (long long)tot[3], (long long)largest, (long long)Pp);
    if (sh == SH_ONE || sh == SH_TWO) {             /* ON MEMORY: one or two big modules cannot */
        CHECK(!c23 && tot[3] > tot[2], "P %lld N %d %s: stage 3 %lld <= stage 2 %lld", (long long)P, N,
              SHAPE_NAME[sh], (long long)tot[3], (long long)tot[2]);
    } else {                                        /* many modules: the conditions hold */
        CHECK(c12 && c23, "P %lld N %d %s: the ON MEMORY conditions do not hold (largest %lld, model %lld)",
              (long long)P, N, SHAPE_NAME[sh], (long long)largest, (long long)Pp);
    }
}

static void test_fall(int sh) {
    static const double sizes[] = { 1e3, 1e4, 1e5, 834000, 1e6, 1e7, 1e8, 1e9, 1e11 };
    static const int worlds[] = { 2, 3, 4, 8, 64 };
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
        for (int w = 0; w < (int)(sizeof worlds / sizeof worlds[0]); w++) {
            if ((sh == SH_BLOCKS32 || sh == SH_GPT || sh == SH_UNEVEN) && sizes[i] < 32.0 * 16 * worlds[w])
                continue;                           /* a toy: modules below one padding unit */
            fall_case(V_BF16, (zero_dtype)0, sh, (int64_t)sizes[i], worlds[w]);
            fall_case(V_F32, (zero_dtype)0, sh, (int64_t)sizes[i], worlds[w]);
            fall_case(V_ACCUM_F32, (zero_dtype)0, sh, (int64_t)sizes[i], worlds[w]);
            fall_case(V_BF16, ZERO_F16, sh, (int64_t)sizes[i], worlds[w]);
        }
}

static int64_t bucket_formula(int64_t T, int64_t gsz) {
    int64_t b = T * gsz / 8 / 64 * 64;
    return b < 64 ? 64 : b > ((int64_t)16 << 20) ? (int64_t)16 << 20 : b;
}

static void test_bucket_default(void) {
    zero_desc d, q;
    zero_plan pl, est;
    zero_stats st;
    model mo;
    int64_t T, max_span = 0, all, ring, n[1000];
    int stage;
    for (stage = 2; stage <= 3; stage++) {
        variant_desc(&d, V_BF16, stage, NULL);
        if (!model_make(&mo, &d, 0)) { zero_destroy(mo.z); return; }
        q = zero_query_desc(mo.z);
        CHECK(q.bucket_bytes == 0 && q.max_live_bytes == 0 && q.prefetch_bytes == 0, "before zero_build: bucket %lld "
              "max_live %lld prefetch %lld, want 0 (set at zero_build)", (long long)q.bucket_bytes,
              (long long)q.max_live_bytes, (long long)q.prefetch_bytes);
        if (!CHECK(zero_plan_get(mo.z, &pl) == ZERO_OK && zero_build(mo.z) == ZERO_OK, "plan/build: %s",
                   zero_last_error(mo.z))) { zero_destroy(mo.z); return; }
        T = pl.trainable_padded;
        max_span = 0;
        for (int k = 0; k < NUM_MODS; k++)
            if (module_padded(&MODEL[k], 1, 16) > max_span) max_span = module_padded(&MODEL[k], 1, 16);
        q = zero_query_desc(mo.z);
        CHECK(q.bucket_bytes == bucket_formula(T, 2), "stage %d: bucket_bytes %lld, want min(16 MiB, G/8) = %lld",
              stage, (long long)q.bucket_bytes, (long long)bucket_formula(T, 2));
        ring = align64(2 * bucket_formula(T, 2)) > align64(max_span * 2) ? align64(2 * bucket_formula(T, 2))
                                                                      : align64(max_span * 2);
        CHECK(cat_sum(pl.bytes, ZERO_CAT_BUFFERS) == ring + (stage == 3 ? 2 * align64(max_span * 2) : 0),
              "stage %d: buffers %lld, want the ring %lld%s", stage, (long long)cat_sum(pl.bytes, ZERO_CAT_BUFFERS),
              (long long)ring, stage == 3 ? " + 2 x the largest module" : "");
        if (stage == 3)
            CHECK(q.max_live_bytes == align64(max_span * 2) && q.prefetch_bytes == q.max_live_bytes,
                  "max_live %lld prefetch %lld, want the largest module %lld", (long long)q.max_live_bytes,
                  (long long)q.prefetch_bytes, (long long)align64(max_span * 2));
        else
            CHECK(q.max_live_bytes == 0 && q.prefetch_bytes == 0, "stage 2 set max_live/prefetch");
        CHECK(zero_stats_get(mo.z, &st) == ZERO_OK && tables_equal(pl.bytes, st.bytes, &(int){0}, &(int){0}),
              "stage %d: stats after zero_build differ from the plan", stage);
        zero_destroy(mo.z);
    }
    /* explicit values are kept, as before: a 32 MiB ring capped at all the gradients */
    variant_desc(&d, V_BF16, 3, NULL);
    d.bucket_bytes = (int64_t)16 << 20; d.max_live_bytes = 100;
    if (!model_make(&mo, &d, 0)) { zero_destroy(mo.z); return; }
    if (CHECK(zero_build(mo.z) == ZERO_OK && zero_plan_get(mo.z, &pl) == ZERO_OK, "build: %s", zero_last_error(mo.z))) {
        all = pl.trainable_padded * 2 + NUM_MODS * 64;
        ring = align64(all) > align64(max_span * 2) ? align64(all) : align64(max_span * 2);
        CHECK(cat_sum(pl.bytes, ZERO_CAT_BUFFERS) == ring + 128 + align64(max_span * 2),
              "explicit: buffers %lld, want %lld", (long long)cat_sum(pl.bytes, ZERO_CAT_BUFFERS),
              (long long)(ring + 128 + align64(max_span * 2)));
        q = zero_query_desc(mo.z);
        CHECK(q.bucket_bytes == (int64_t)16 << 20 && q.max_live_bytes == 100 && q.prefetch_bytes == 128,
              "explicit: bucket %lld max_live %lld prefetch %lld", (long long)q.bucket_bytes,
              (long long)q.max_live_bytes, (long long)q.prefetch_bytes);
    }
    zero_destroy(mo.z);
    /* a large model keeps 16 MiB buckets: 1000 modules of 1e6, stage 2, 4 ranks */
    for (int k = 0; k < 1000; k++) n[k] = 1000000;
    variant_desc(&d, V_BF16, 2, NULL);
    if (CHECK(zero_estimate(&d, 4, 1000, n, &est) == ZERO_OK, "estimate 1e9"))
        CHECK(cat_sum(est.bytes, ZERO_CAT_BUFFERS) == (int64_t)32 << 20, "1e9 params: staging %lld, want 2 x 16 MiB",
              (long long)cat_sum(est.bytes, ZERO_CAT_BUFFERS));
    /* below 64M params the bucket is G/8: 100 modules of 1e5 */
    for (int k = 0; k < 100; k++) n[k] = 100000;
    if (CHECK(zero_estimate(&d, 4, 100, n, &est) == ZERO_OK, "estimate 1e7"))
        CHECK(cat_sum(est.bytes, ZERO_CAT_BUFFERS) == 2 * bucket_formula(est.trainable_padded, 2) &&
              bucket_formula(est.trainable_padded, 2) < (int64_t)16 << 20,
              "1e7 params: staging %lld, want 2 x G/8 = %lld", (long long)cat_sum(est.bytes, ZERO_CAT_BUFFERS),
              (long long)(2 * bucket_formula(est.trainable_padded, 2)));
}

/* ---- driver --------------------------------------------------------------------------- */
static void run_world(int world, zero_rank_fn fn, job *j) {
    zero_result r = zero_run_local(world, fn, j);
    CHECK(r == ZERO_OK, "zero_run_local(%d): %s", world, zero_result_str(r));
}

int main(void) {
    test_init();
    for (int v = V_BF16; v <= V_Q8_STATES; v++) {
        for (int stage = 0; stage <= 3; stage++) {
            for (int world = 1; world <= 4; world++) {
                job j;
                j.v = (variant)v;
                j.stage = stage;
                test_begin("bytes_%s_stage%d_world%d", variant_name((variant)v), stage, world);
                run_world(world, bytes_rank, &j);
                test_end();
            }
        }
    }
    for (int v = V_BF16; v <= V_Q8_STATES; v++) {
        for (int stage = 0; stage <= 3; stage++) {
            for (int world = 1; world <= 4; world++) {
                job j;
                j.v = (variant)v;
                j.stage = stage;
                test_begin("estimate_%s_stage%d_world%d", variant_name((variant)v), stage, world);
                run_world(world, estimate_rank, &j);
                test_end();
            }
        }
    }
    for (int sh = 0; sh < SH_NUM; sh++) {
        test_begin("fall_%s", SHAPE_NAME[sh]);
        test_fall(sh);
        test_end();
    }
    TEST_RUN(test_bucket_default);
    for (int stage = 0; stage <= 3; stage++) {
        for (int world = 1; world <= 4; world++) {
            job j;
            j.v = V_BF16;
            j.stage = stage;
            test_begin("comm_stage%d_world%d", stage, world);
            run_world(world, comm_rank, &j);
            test_end();
        }
    }
    return test_summary();
}
