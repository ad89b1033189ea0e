/* tests/test_prefetch.c - the stage-3 schedule: prefetch, the gather arena's budget,
   persistent and kept modules, order changes, rank divergence, and a steady-state
   step that allocates nothing.

   The model is a chain of L modules of different sizes. The gradient of module i
   depends on the values fetched in the forward pass (their sum) and in the backward
   pass (element-wise), so a gather that delivered stale or wrong data would change
   the trained parameters: every configuration must give the same bits as stage 3
   with prefetch off. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#define MAXL 32
#define MAXN 400

typedef struct cfg {
    int layers, world, stage, steps;
    int64_t prefetch_bytes, max_live_bytes, persist_bytes;
    int reuse_distance;
    int swap_step;                  /* >0: in this step, forward visits modules 1 and 2 swapped */
    int diverge;                    /* rank 1 fetches modules 1 and 2 swapped in the first step */
    int count_allocs;               /* count allocations during steps 3.. */
    /* results (rank 0) */
    float out[MAXL * MAXN];
    int64_t numel, largest_bytes;
    zero_stats st;
    zero_result result[4];
    int changed_warnings;
    long allocs_steady;             /* summed over ranks */
    zero__mutex mu;
} cfg;

typedef struct rank_allocs {        /* each rank counts its own context's allocations */
    int counting;
    long allocs;
} rank_allocs;

static int64_t layer_numel(int i) { return 40 + (37 * i + 11) % 300; }

static void *counting_alloc(size_t n, void *user) {
    rank_allocs *a = (rank_allocs *)user;   /* only this rank's threads allocate through it */
    a->allocs += a->counting;
    return malloc(n);
}
static void counting_free(void *p, void *user) { (void)user; free(p); }

static void on_log(void *user, zero_log_level level, zero_log_item item, int rank, const char *msg) {
    cfg *c = (cfg *)user;
    (void)level; (void)msg;
    if (item == ZERO_LOGITEM_SCHEDULE_CHANGED && rank == 0) {
        zero__mutex_lock(&c->mu);
        c->changed_warnings++;
        zero__mutex_unlock(&c->mu);
    }
}

static zero_result fetch_sum(zero_ctx *z, zero_module m, zero_param p, int64_t n, float *buf, double *sum) {
    zero_result r = zero_fetch(z, m);
    int64_t k;
    if (r != ZERO_OK) return r;
    zero_to_f32(buf, zero_param_data(z, p), ZERO_BF16, n);
    *sum = 0;
    for (k = 0; k < n; k++) *sum += buf[k];
    return zero_release(z, m);
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[MAXL];
    zero_param par[MAXL];
    zero_result r;
    float buf[MAXN], g[MAXN];
    double fsum[MAXL];
    rank_allocs ra = { 0, 0 };
    int i, step, k;

    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = ZERO_BF16;
    d.optim.lr = 0.01;
    d.prefetch_bytes = c->prefetch_bytes;
    d.max_live_bytes = c->max_live_bytes;
    d.persist_bytes = c->persist_bytes;
    d.reuse_distance = c->reuse_distance;
    d.timeout_ms = 10000;
    d.logger.func = on_log;
    d.logger.user_data = c;
    if (c->count_allocs) { d.allocator.alloc = counting_alloc; d.allocator.free = counting_free; d.allocator.user_data = &ra; }
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (i = 0; i < c->layers; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%d", i);
        if ((r = fx_module(z, name, 0, &mod[i])) != ZERO_OK ||
            (r = fx_param(z, mod[i], "w", layer_numel(i), 0, 0, &par[i])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i < c->layers; i++) {
        for (k = 0; k < layer_numel(i); k++) buf[k] = 0.01f * (float)((k * 7 + i * 3) % 41 - 20);
        if ((r = zero_param_set_f32(z, par[i], buf)) != ZERO_OK) goto done;
    }
    for (step = 0; step < c->steps; step++) {
        /* the comm stream never allocates, so the plain int is touched by this thread only */
        if (step == 2) ra.counting = 1;
        for (i = 0; i < c->layers; i++) {               /* forward */
            int mi = i;
            if ((c->swap_step == step + 1 || (c->diverge && rank == 1 && step == 0)) && (i == 1 || i == 2))
                mi = 3 - i;
            if ((r = fetch_sum(z, mod[mi], par[mi], layer_numel(mi), buf, &fsum[mi])) != ZERO_OK) goto done;
        }
        for (i = c->layers - 1; i >= 0; i--) {          /* backward */
            int64_t n = layer_numel(i);
            if ((r = zero_fetch(z, mod[i])) != ZERO_OK) goto done;
            zero_to_f32(buf, zero_param_data(z, par[i]), ZERO_BF16, n);
            for (k = 0; k < n; k++)
                g[k] = 0.5f * buf[k] + 0.01f * (float)fsum[i] + 0.001f * (float)((rank + 1) * (k % 5) - step);
            zero_add_f32(zero_param_grad(z, par[i]), ZERO_BF16, g, n);
            if ((r = zero_release(z, mod[i])) != ZERO_OK) goto done;
            if ((r = zero_grads_ready(z, mod[i])) != ZERO_OK) goto done;
        }
        if ((r = zero_step(z)) != ZERO_OK) goto done;
    }
    ra.counting = 0;
    if (c->count_allocs) {
        zero__mutex_lock(&c->mu);
        c->allocs_steady += ra.allocs;
        zero__mutex_unlock(&c->mu);
    }
    {
        static float all[4][MAXL * MAXN];
        if ((r = zero_gather_params_f32(z, all[rank])) != ZERO_OK) goto done;
        if (rank == 0) {
            c->numel = zero_num_params(z);
            memcpy(c->out, all[0], sizeof(float) * (size_t)c->numel);
            zero_stats_get(z, &c->st);
        }
    }
done:
    c->result[rank] = r;
    zero_destroy(z);
    return r;
}

static void base(cfg *c, int layers, int world) {
    memset(c, 0, sizeof *c);
    c->layers = layers; c->world = world; c->stage = 3; c->steps = 6;
    c->largest_bytes = 0;
    for (int i = 0; i < layers; i++)
        if (layer_numel(i) * 2 > c->largest_bytes) c->largest_bytes = layer_numel(i) * 2;
    zero__mutex_init(&c->mu);
}

static int run(cfg *c) {
    zero_result r = zero_run_local(c->world, rank_main, c);
    zero__mutex_destroy(&c->mu);
    return CHECK(r == ZERO_OK, "world %d: %s: %s", c->world, zero_result_str(r), zero_last_error(NULL));
}

static cfg ref_cfg, got_cfg;

/* Every prefetch configuration gives stage 3's bits without prefetch, and the
   schedule keeps the budget: peak gathered <= max_live_bytes + the module in use. */
static void prefetch_bitwise(int layers, int world, int64_t pf, int64_t live, int64_t persist, int reuse) {
    int64_t live_eff, module_in_use;
    double rate;
    base(&ref_cfg, layers, world);
    ref_cfg.prefetch_bytes = -1;
    if (!run(&ref_cfg)) return;
    base(&got_cfg, layers, world);
    got_cfg.prefetch_bytes = pf; got_cfg.max_live_bytes = live;
    got_cfg.persist_bytes = persist; got_cfg.reuse_distance = reuse;
    if (!run(&got_cfg)) return;
    CHECK(memcmp(ref_cfg.out, got_cfg.out, sizeof(float) * (size_t)ref_cfg.numel) == 0,
          "params differ from stage 3 without prefetch");
    CHECK(ref_cfg.st.prefetch_hits == 0, "prefetch off still had %lld hits", (long long)ref_cfg.st.prefetch_hits);
    /* module bytes are rounded up to 64 in the arena; the bound allows for that */
    module_in_use = ((got_cfg.largest_bytes / world + 63) / 64 * 64) * world + 64 * world;
    live_eff = live ? (live + 63) / 64 * 64 : module_in_use;
    CHECK(got_cfg.st.peak_gathered_bytes <= live_eff + module_in_use,
          "peak gathered %lld > max_live_bytes %lld + module in use %lld", (long long)got_cfg.st.peak_gathered_bytes,
          (long long)live_eff, (long long)module_in_use);
    rate = (double)got_cfg.st.prefetch_hits / (double)(got_cfg.st.prefetch_hits + got_cfg.st.prefetch_misses);
    /* the hit rate is promised for the default budget and any that holds two modules */
    if ((pf == 0 || pf >= 2 * got_cfg.largest_bytes) && (live == 0 || live >= 2 * got_cfg.largest_bytes) && persist == 0)
        CHECK(rate >= 0.95, "hit rate %.3f < 0.95 (%lld hits, %lld misses)", rate,
              (long long)got_cfg.st.prefetch_hits, (long long)got_cfg.st.prefetch_misses);
    CHECK(got_cfg.st.prefetch_hits + got_cfg.st.prefetch_misses > 0 || persist > 0, "no fetch was counted");
}

/* A staging ring that fills while a bucket is queued (bucket_bytes of about 1.3 modules,
   the ring two buckets) and gathers issued ahead: every rank queues its reductions at
   the same place among the gathers, whichever of them are done when its ring is full
   (a rank that flushed early would call a reduce-scatter where the others call an
   all-gather: ZERO_ERR_MISMATCH). Timing decides, so six runs; the params equal those
   of the same run without prefetch. */
#define TIGHT_L 12
#define TIGHT_N 37056
typedef struct tight_job { int64_t prefetch; float *out; } tight_job;
static zero_result tight_rank(zero_comm *comm, int rank, void *user) {
    tight_job *j = (tight_job *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m[TIGHT_L];
    zero_param p[TIGHT_L];
    zero_result r;
    float *g = (float *)malloc(sizeof(float) * TIGHT_N);
    int i, k, step;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = 3; d.param_dtype = ZERO_BF16; d.optim.lr = 0.01; d.timeout_ms = 20000;
    d.bucket_bytes = 97280; d.max_live_bytes = 300000; d.prefetch_bytes = j->prefetch;
    if (!g) return ZERO_ERR_OUT_OF_MEMORY;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (i = 0; i < TIGHT_L; i++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", i);
        if ((r = fx_module(z, name, 0, &m[i])) != ZERO_OK || (r = fx_param(z, m[i], "w", TIGHT_N, 0, 0, &p[i])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (step = 0; step < 8; step++) {
        for (i = 0; i < TIGHT_L; i++)
            if ((r = zero_fetch(z, m[i])) != ZERO_OK || (r = zero_release(z, m[i])) != ZERO_OK) goto done;
        for (i = TIGHT_L - 1; i >= 0; i--) {
            void *gp;
            if ((r = zero_fetch(z, m[i])) != ZERO_OK) goto done;
            if (!(gp = zero_param_grad(z, p[i]))) { r = ZERO_ERR_STATE; goto done; }
            for (k = 0; k < TIGHT_N; k++) g[k] = 0.001f * (float)((k + i + rank + step) % 7 - 3);
            zero_add_f32(gp, ZERO_BF16, g, TIGHT_N);
            if ((r = zero_release(z, m[i])) != ZERO_OK || (r = zero_grads_ready(z, m[i])) != ZERO_OK) goto done;
        }
        if ((r = zero_step(z)) != ZERO_OK) goto done;
    }
    {
        static float others[3][TIGHT_L * TIGHT_N];     /* every rank gathers (collective) */
        r = zero_gather_params_f32(z, rank == 0 ? j->out : others[rank - 1]);
    }
done:
    if (r != ZERO_OK) CHECK(0, "rank %d: %s: %s", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    free(g);
    return r;
}

static void tight_staging(void) {
    static float ref[TIGHT_L * TIGHT_N], got[TIGHT_L * TIGHT_N];
    tight_job j = { -1, ref };
    if (!CHECK(zero_run_local(4, tight_rank, &j) == ZERO_OK, "without prefetch")) return;
    for (int run_i = 0; run_i < 6; run_i++) {
        j.prefetch = 300000; j.out = got;
        if (!CHECK(zero_run_local(4, tight_rank, &j) == ZERO_OK, "run %d", run_i)) return;
        if (!CHECK(memcmp(ref, got, sizeof ref) == 0, "run %d: params differ from the run without prefetch", run_i))
            return;
    }
}

/* zero_param_set_f32 between steps at stage 3 replaces a module already gathered ahead
   of its next fetch (and waits for a gather still reading the shard): the next fetch
   sees the new values, with and without a persistent copy. */
typedef struct set_job { int64_t persist; int ok; } set_job;
static zero_result set_rank(zero_comm *comm, int rank, void *user) {
    set_job *j = (set_job *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m[3];
    zero_param w[3];
    float v[96], got[96];
    zero_result r;
    int i, k, step;
    (void)rank;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = 3; d.param_dtype = ZERO_BF16; d.optim.lr = 0.01; d.persist_bytes = j->persist;
    d.timeout_ms = 20000;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", k);
        if ((r = fx_module(z, name, 0, &m[k])) != ZERO_OK || (r = fx_param(z, m[k], "w", 96, 0, 0, &w[k])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i < 96; i++) v[i] = 0.25f * (float)(i % 8);
    for (k = 0; k < 3; k++) if ((r = zero_param_set_f32(z, w[k], v)) != ZERO_OK) goto done;
    for (step = 0; step < 3; step++) {           /* the schedule is recorded, then prefetched */
        for (k = 0; k < 3; k++) {
            if ((r = zero_fetch(z, m[k])) != ZERO_OK) goto done;
            zero_add_f32(zero_param_grad(z, w[k]), ZERO_BF16, v, 96);
            if ((r = zero_release(z, m[k])) != ZERO_OK || (r = zero_grads_ready(z, m[k])) != ZERO_OK) goto done;
        }
        if ((r = zero_step(z)) != ZERO_OK) goto done;
    }
    /* a collective queued behind the step's first gathers: once it is back they are done */
    if ((r = zero_allreduce_f64(z, NULL, 0)) != ZERO_OK) goto done;
    for (i = 0; i < 96; i++) v[i] = 7.0f;
    if ((r = zero_param_set_f32(z, w[0], v)) != ZERO_OK || (r = zero_fetch(z, m[0])) != ZERO_OK) goto done;
    zero_to_f32(got, zero_param_data(z, w[0]), ZERO_BF16, 96);
    r = zero_release(z, m[0]);
    if (memcmp(got, v, sizeof v) != 0) j->ok = 0;
done:
    zero_destroy(z);
    return r;
}
static void set_after_steps(void) {
    set_job j;
    zero_result r;
    int p;
    for (p = 0; p < 2; p++) {
        j.persist = p ? 1 << 20 : 0; j.ok = 1;
        r = zero_run_local(2, set_rank, &j);
        CHECK(r == ZERO_OK, "persist %d: %s: %s", p, zero_result_str(r), zero_last_error(NULL));
        CHECK(j.ok, "persist %d: the fetch after zero_param_set_f32 returned the old values", p);
    }
}

/* A step that fetches in another order (dynamic control flow): a warning, fetches on
   demand for that step, and the same result as without prefetch. */
static void order_change_falls_back(void) {
    base(&ref_cfg, 8, 2);
    ref_cfg.prefetch_bytes = -1; ref_cfg.swap_step = 4;
    if (!run(&ref_cfg)) return;
    base(&got_cfg, 8, 2);
    got_cfg.swap_step = 4;
    if (!run(&got_cfg)) return;
    CHECK(memcmp(ref_cfg.out, got_cfg.out, sizeof(float) * (size_t)ref_cfg.numel) == 0, "params differ");
    CHECK(got_cfg.changed_warnings == 1, "%d SCHEDULE_CHANGED warnings, want 1", got_cfg.changed_warnings);
}

/* Ranks that fetch in different orders fail with ZERO_ERR_MISMATCH naming the module. */
static void divergent_ranks_mismatch(void) {
    zero_result r;
    double t0 = test_now_ms();
    base(&got_cfg, 6, 2);
    got_cfg.diverge = 1;
    r = zero_run_local(2, rank_main, &got_cfg);
    zero__mutex_destroy(&got_cfg.mu);
    CHECK(r == ZERO_ERR_MISMATCH, "got %s, want ZERO_ERR_MISMATCH", zero_result_str(r));
    CHECK(got_cfg.result[0] == ZERO_ERR_MISMATCH && got_cfg.result[1] == ZERO_ERR_MISMATCH,
          "ranks got %s / %s", zero_result_str(got_cfg.result[0]), zero_result_str(got_cfg.result[1]));
    CHECK(test_now_ms() - t0 < 5000, "took %.0f ms", test_now_ms() - t0);
}

/* After the first steps, a step allocates nothing (counted through the allocator hook). */
static void steady_state_allocates_nothing(int stage) {
    base(&got_cfg, 10, 3);
    got_cfg.stage = stage; got_cfg.count_allocs = 1; got_cfg.steps = 6; got_cfg.reuse_distance = stage == 3 ? 2 : 0;
    if (!run(&got_cfg)) return;
    CHECK(got_cfg.allocs_steady == 0, "stage %d: %ld allocations in steps 3-6 (all ranks)", stage, got_cfg.allocs_steady);
}

/* The modelled link makes every all-gather take at least its latency (a lower bound:
   sleeping can only take longer), and rejects negative figures. */
typedef struct link_job { zero_result r[2]; double build_ms[2]; } link_job;
static zero_result link_rank(zero_comm *comm, int rank, void *user) {
    link_job *j = (link_job *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_param p;
    double t0;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    if ((j->r[rank] = zero_create(&z, &d)) != ZERO_OK) return j->r[rank];
    fx_module(z, "m", 0, &m);
    fx_param(z, m, "w", 10, 0, 0, &p);
    t0 = test_now_ms();
    j->r[rank] = zero_build(z);                 /* one all-gather of the model check */
    j->build_ms[rank] = test_now_ms() - t0;
    zero_destroy(z);
    return j->r[rank];
}
static void link_model(void) {
    zero_group *g = NULL;
    link_job j;
    int i;
    memset(&j, 0, sizeof j);
    if (!CHECK(zero_group_create(&g, 2) == ZERO_OK, "group")) return;
    CHECK(zero_group_set_link(g, -1, 0) == ZERO_ERR_INVALID_ARG, "negative latency accepted");
    CHECK(zero_group_set_link(NULL, 1, 1) == ZERO_ERR_INVALID_ARG, "NULL group accepted");
    CHECK(zero_group_set_link(g, 60000, 0) == ZERO_OK, "set_link: %s", zero_last_error(NULL));
    CHECK(zero_run_group(g, link_rank, &j) == ZERO_OK, "run_group: %s", zero_last_error(NULL));
    for (i = 0; i < 2; i++) {
        CHECK(j.r[i] == ZERO_OK, "rank %d: %s", i, zero_result_str(j.r[i]));
        CHECK(j.build_ms[i] >= 60.0, "rank %d: zero_build took %.1f ms on a 60 ms link", i, j.build_ms[i]);
    }
    zero_group_destroy(g);
}

int main(void) {
    static const int64_t budgets[] = { 0, 1, 700, 4000, 1 << 20 };
    int b, w;
    test_init();
    for (w = 1; w <= 4; w++)
        for (b = 0; b < 5; b++) {
            test_begin("prefetch_bitwise_world%d_budget%lld", w, (long long)budgets[b]);
            prefetch_bitwise(8, w, budgets[b], budgets[b] >= 4000 ? budgets[b] : 0, 0, 0);
            test_end();
        }
    test_begin("prefetch_deep_world4");
    prefetch_bitwise(MAXL, 4, 0, 0, 0, 0);
    test_end();
    test_begin("prefetch_persist_world2");
    prefetch_bitwise(8, 2, 0, 0, 200, 0);
    test_end();
    test_begin("prefetch_reuse_world3");
    prefetch_bitwise(8, 3, 0, 0, 0, 2);
    test_end();
    test_begin("prefetch_small_live_world2");
    prefetch_bitwise(12, 2, 1 << 20, 64, 0, 0);
    test_end();
    TEST_RUN(tight_staging);
    TEST_RUN(order_change_falls_back);
    TEST_RUN(set_after_steps);
    TEST_RUN(link_model);
    TEST_RUN(divergent_ranks_mismatch);
    for (w = 2; w <= 3; w++) {
        test_begin("steady_state_allocates_nothing_stage%d", w);
        steady_state_allocates_nothing(w);
        test_end();
    }
    return test_summary();
}
