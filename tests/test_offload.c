/* tests/test_offload.c - the offload engine: optimizer states on the host and NVMe
   tiers give parameters bitwise identical to the same run without offload (world
   1-3, stages 0-3, f32/bf16, AdamW/SGD), the plan puts bytes in the right tier, a
   host cap is enforced, checkpoints resume exactly, the resident memory of an NVMe
   run stays far below its model states, and faults (missing or read-only directory,
   disk full, a corrupted or truncated block) fail with a code naming the file and
   leave the params as they were. The NVMe cases run once per I/O engine (ZERO_IO=threads,
   then ZERO_IO=uring: io_uring when built with ZERO_IO_URING); faults reach the io_uring
   engine through zero__fops.io_result, the thread pool through zero__fops.pwrite/pread.

   The "model" is synthetic: NMOD modules of two params each; the gradient of element
   i on rank r at step s is a fixed function of its current value, i, r and s, so
   every stage and world size trains the same, cheaply. Files go under $TMPDIR. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <math.h>
#ifndef _WIN32
#include <sys/resource.h>
#include <unistd.h>
#endif

#define NMOD 4
#define MAXMOD 16
#define STEPS 4
#define CHUNK 4096

static char tmpdir[512];
static const char *engine = "threads";     /* ZERO_IO for this pass */
static int engine_uring(void) {             /* the engine the pass must get: 1 io_uring */
#ifdef ZERO_IO_URING
    return strcmp(engine, "uring") == 0;
#else
    return 0;
#endif
}

typedef struct cfg {
    int stage, world, steps, nmod;
    zero_dtype dtype;
    zero_optim_type optim;
    zero_state_dtype sdt;           /* the moments' format (ON OPTIMIZER STATES) */
    zero_offload_tier opt_tier, par_tier;
    int64_t buffer_bytes, host_cap, elems;
    const char *dirs[3];
    float *out;                     /* gathered params (rank 0) */
    int64_t numel;
    zero_plan plan;
    zero_stats stats;
    const char *save_dir, *load_dir; /* checkpoint after `steps` / before training */
    int fault_step;                 /* >= 0: run fault_fn before this step and expect a failure */
    void (*fault_fn)(struct cfg *c, zero_ctx *z);
    int no_gather;                  /* skip the final gather (the RSS test) */
    char err[512];                  /* rank 0's message when the run failed */
    zero_result fault_r;
    char fault_msg[512];
    int fault_unchanged;            /* params equal before and after the failed step */
    int uring;                      /* the NVMe tier's engine was io_uring (-1: no tier) */
    int64_t prefetch_bytes;         /* stage 3: desc.prefetch_bytes (0: the default) */
    int64_t peak_alloc;             /* the allocator's peak bytes (rank 0's context) */
    int engine_info;                /* OFFLOAD_ENGINE lines logged (io_uring wanted, not there) */
    unsigned frozen;                /* bit m: module m is frozen (no gradients) */
    double exposed_bound_ms;        /* rank 0: from before each step's last zero_grads_ready to
                                       zero_step's return, in all (bounds exposed_step_ms) */
} cfg;

static void engine_log(void *u, zero_log_level lvl, zero_log_item item, int rank, const char *msg) {
    (void)lvl; (void)msg;
    if (item == ZERO_LOGITEM_OFFLOAD_ENGINE && rank == 0) ((cfg *)u)->engine_info++;
}

/* an allocator that counts: the bound on what an NVMe-params run holds in memory */
typedef struct counting { int64_t now, peak; } counting;
static void *count_alloc(size_t n, void *u) {
    counting *c = (counting *)u;
    size_t *p = (size_t *)malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    c->now += (int64_t)n;
    if (c->now > c->peak) c->peak = c->now;
    return (char *)p + 16;
}
static void count_free(void *q, void *u) {
    counting *c = (counting *)u;
    size_t *p;
    if (!q) return;
    p = (size_t *)((char *)q - 16);
    c->now -= (int64_t)p[0];
    free(p);
}

static int64_t psize(const cfg *c, int m, int k) {
    int64_t base = c->elems ? c->elems : 700;
    return k == 0 ? base + 37 * m : 13 + m;
}

static float initv(int64_t i) { return sinf((float)i * 0.37f) * 0.5f; }
static float gradv(float w, int64_t i, int rank, int step) {
    return 0.3f * w + 0.1f * cosf((float)i * 0.11f + (float)step) + 0.01f * (float)rank;
}

static zero_result train(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[MAXMOD];
    zero_param P[MAXMOD][2];
    int nmod = c->nmod ? c->nmod : NMOD;
    zero_result r;
    float *buf = NULL, *before = NULL;
    int m, k, step;
    int64_t i, base = 0, maxn = 0, pbytes = 0, numel = 0;
    int slot = 0;
    double t_ready = 0;
    counting cnt = { 0, 0 };
    fx_desc(&d, comm, c->stage, c->dtype, c->optim, 0.01);
    d.allocator.alloc = count_alloc;
    d.allocator.free = count_free;
    d.allocator.user_data = &cnt;
    d.prefetch_bytes = c->prefetch_bytes;
    d.logger.func = engine_log;
    d.logger.user_data = c;
    d.logger.level = ZERO_LOG_INFO;
    d.clip_norm = 1.0f;
    d.cpu_threads = 2;
    d.optim.state_dtype = c->sdt;
    d.offload_optimizer = c->opt_tier;
    d.offload_params = c->par_tier;
    d.offload.buffer_bytes = c->buffer_bytes;
    d.offload.queue_depth = 4;
    d.host_bytes_cap = c->host_cap;
    for (k = 0; k < 3; k++) d.offload.nvme_dirs[k] = c->dirs[k];
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (m = 0; m < nmod; m++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", m);
        if ((r = fx_module(z, name, (int)((c->frozen >> m) & 1u), &mod[m])) != ZERO_OK) goto done;
        for (k = 0; k < 2; k++) {
            if (psize(c, m, k) > maxn) maxn = psize(c, m, k);
            if ((r = fx_param(z, mod[m], k ? "b" : "w", psize(c, m, k), 0, k, &P[m][k])) != ZERO_OK) goto done;
        }
    }
    if (rank == 0) zero_plan_get(z, &c->plan);
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    if (rank == 0) c->uring = z->tier.nvme ? z->tier.nvme->io.uring : -1;
    buf = (float *)malloc((size_t)CHUNK * 4);
    for (m = 0; m < nmod; m++)
        for (k = 0; k < 2; k++) {
            float *init = (float *)malloc((size_t)psize(c, m, k) * 4);    /* freed at once */
            for (i = 0; i < psize(c, m, k); i++) init[i] = initv(base + i);
            base += psize(c, m, k);
            r = zero_param_set_f32(z, P[m][k], init);
            free(init);
            if (r != ZERO_OK) goto done;
        }
    numel = zero_num_params(z);
    if (rank == 0) c->numel = numel;
    if (c->load_dir && (r = zero_load(z, c->load_dir)) != ZERO_OK) goto done;
    for (step = 0; step < c->steps; step++) {
        if (step == c->fault_step) {
            /* the params as they are in memory (a gather would read the damaged master) */
            if (c->par_tier == ZERO_OFFLOAD_NVME) {    /* no param arena: the gathered params */
                pbytes = numel * 4;
                before = (float *)malloc((size_t)pbytes);
                if ((r = zero_gather_params_f32(z, before)) != ZERO_OK) goto done;
            } else {
                pbytes = zero__pcat(z->lay.plan.bytes, ZERO_CAT_PARAMS);
                before = (float *)malloc((size_t)pbytes);
                memcpy(before, z->arena.param, (size_t)pbytes);
            }
            slot = z->tier.nvme->slot;
            if (rank == 0) c->fault_fn(c, z);
            if ((r = zero_allreduce_f64(z, NULL, 0)) != ZERO_OK) goto done;   /* the fault is in place */
        }
        base = 0;
        for (m = 0; m < nmod; m++) {
            if ((r = zero_fetch(z, mod[m])) != ZERO_OK) goto done;
            for (k = 0; k < 2; k++) {
                int64_t n = psize(c, m, k), o, q, es = (int64_t)zero_dtype_size(c->dtype);
                char *pd = (char *)zero_param_data(z, P[m][k]), *gd;
                if ((c->frozen >> m) & 1u) { base += n; continue; }
                gd = (char *)zero_param_grad(z, P[m][k]);
                for (o = 0; o < n; o += CHUNK) {       /* in chunks: the RSS test's memory is the plan's */
                    q = n - o < CHUNK ? n - o : CHUNK;
                    zero_to_f32(buf, pd + o * es, c->dtype, q);
                    for (i = 0; i < q; i++) buf[i] = gradv(buf[i], base + o + i, rank, step);
                    zero_add_f32(gd + o * es, c->dtype, buf, q);
                }
                base += n;
            }
            if ((r = zero_release(z, mod[m])) != ZERO_OK) goto done;
            t_ready = test_now_ms();
            if ((r = zero_grads_ready(z, mod[m])) != ZERO_OK) goto done;
        }
        r = zero_step(z);
        if (rank == 0) c->exposed_bound_ms += test_now_ms() - t_ready;
        if (step == c->fault_step) {
            if (rank == 0) {
                c->fault_r = r;
                snprintf(c->fault_msg, sizeof c->fault_msg, "%s", zero_last_error(z));
            }
            if (c->par_tier == ZERO_OFFLOAD_NVME) {
                float *after = (float *)malloc((size_t)pbytes);
                zero_result r2 = zero_gather_params_f32(z, after);
                /* a block still damaged (the corrupt case) cannot be gathered: then the slot
                   not flipped is what says the params (read from it) are as they were */
                if (rank == 0)
                    c->fault_unchanged = z->tier.nvme->slot == slot &&
                                         (r2 == ZERO_OK ? memcmp(before, after, (size_t)pbytes) == 0 : r2 == ZERO_ERR_CORRUPT);
                free(after);
            } else if (rank == 0)
                c->fault_unchanged = memcmp(before, z->arena.param, (size_t)pbytes) == 0 && z->tier.nvme->slot == slot;
            r = ZERO_OK;
            goto done;
        }
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    if (c->save_dir && (r = zero_save(z, c->save_dir)) != ZERO_OK) goto done;
    if (c->no_gather) goto done;
    if (rank == 0) c->out = (float *)malloc((size_t)c->numel * 4);
    if ((r = zero_gather_params_f32(z, rank == 0 ? c->out : (buf = (float *)realloc(buf, (size_t)numel * 4)))) != ZERO_OK)
        goto done;
    if (rank == 0) zero_stats_get(z, &c->stats);
done:
    if (rank == 0) c->peak_alloc = cnt.peak;
    if (r != ZERO_OK && rank == 0) snprintf(c->err, sizeof c->err, "%s", z ? zero_last_error(z) : zero_last_error(NULL));
    free(buf);
    free(before);
    zero_destroy(z);
    return r;
}

static cfg base_cfg(int stage, int world, zero_dtype dt, zero_optim_type opt) {
    cfg c;
    memset(&c, 0, sizeof c);
    c.stage = stage; c.world = world; c.dtype = dt; c.optim = opt; c.steps = STEPS;
    c.fault_step = -1;
    c.buffer_bytes = 48 << 10;      /* small: several sub-groups per rank */
    c.dirs[0] = tmpdir;
    return c;
}

static int count_files(const char *dir) {
    zero__os_dir dp;
    const char *e;
    int n = 0;
    if (zero__os_opendir(&dp, dir) != 0) return -1;
    while ((e = zero__os_readdir(&dp))) if (strncmp(e, "zero_optim", 10) == 0) n++;
    zero__os_closedir(&dp);
    return n;
}
/* (the files are zero.h's own calls: the program runs on Windows too) */
static void rm_dir(const char *dir) {
#ifdef _WIN32
    RemoveDirectoryA(dir);
#else
    rmdir(dir);
#endif
}

static zero_state_dtype equiv_sdt;  /* the moments' format of the equiv cases (main sets it) */
static void equiv_case2(int stage, int world, zero_dtype dt, zero_optim_type opt, zero_offload_tier ot, int ndirs, int nvme_params) {
    cfg ref = base_cfg(stage, world, dt, opt), off;
    zero_result r;
    char sub[2][600];
    int k;
    ref.sdt = equiv_sdt;
    off = ref;
    test_begin("equiv_%s%s_stage%d_world%d_%s_%s_dirs%d%s%s%s", ot == ZERO_OFFLOAD_NVME ? "nvme" : "host",
               nvme_params ? "_params" : "", stage, world,
               zero_dtype_str(dt), opt == ZERO_OPTIM_SGD ? "sgd" : opt == ZERO_OPTIM_LION ? "lion" : "adamw", ndirs, ot == ZERO_OFFLOAD_NVME ? "_" : "",
               ot == ZERO_OFFLOAD_NVME ? engine : "", equiv_sdt == ZERO_STATE_BF16 ? "_bf16_states" :
                                                    equiv_sdt == ZERO_STATE_Q8 ? "_q8_states" : "");
    off.opt_tier = ot;
    off.par_tier = ot == ZERO_OFFLOAD_HOST ? ZERO_OFFLOAD_HOST : nvme_params ? ZERO_OFFLOAD_NVME : ZERO_OFFLOAD_NONE;
    /* nvme_params: prefetch is on by default (one module ahead): gathers read NVMe ahead of the fetch */
    for (k = 1; k < ndirs; k++) {
        snprintf(sub[k - 1], sizeof sub[0], "%s/d%d", tmpdir, k);
        (void)zero__os_mkdir(sub[k - 1]);
        off.dirs[k] = sub[k - 1];
    }
    r = zero_run_local(world, train, &ref);
    CHECK(r == ZERO_OK, "reference run: %s", zero_result_str(r));
    r = zero_run_local(world, train, &off);
    CHECK(r == ZERO_OK, "offload run: %s (%s)", zero_result_str(r), zero_last_error(NULL));
    if (r == ZERO_OK && ref.out && off.out)
        CHECK(memcmp(ref.out, off.out, (size_t)ref.numel * 4) == 0, "params differ from the run without offload");
    if (r == ZERO_OK) {
        const int64_t (*p)[ZERO_CAT_NUM] = (const int64_t (*)[ZERO_CAT_NUM])off.plan.bytes;
        int t = ot == ZERO_OFFLOAD_NVME ? ZERO_TIER_NVME : ZERO_TIER_HOST;
        CHECK(p[ZERO_TIER_DEVICE][ZERO_CAT_OPTIM] == 0 && p[t][ZERO_CAT_OPTIM] > 0, "optimizer bytes not in tier %d", t);
        CHECK(p[ZERO_TIER_DEVICE][ZERO_CAT_GRADS] == 0 && p[ZERO_TIER_HOST][ZERO_CAT_GRADS] > 0, "grads not on the host");
        CHECK(off.plan.model_state_bytes == ref.plan.model_state_bytes, "model state bytes differ");
        CHECK(memcmp(off.stats.bytes, off.plan.bytes, sizeof off.plan.bytes) == 0, "stats differ from the plan");
        /* the exposed step time: each step's, from its last zero_grads_ready to zero_step's
           return, lies within what the test timed around them */
        CHECK(off.stats.last_exposed_step_ms > 0 && off.stats.last_exposed_step_ms <= off.stats.exposed_step_ms &&
              off.stats.exposed_step_ms <= off.exposed_bound_ms, "exposed step time %.3f ms (last %.3f), the test's "
              "bound %.3f ms", off.stats.exposed_step_ms, off.stats.last_exposed_step_ms, off.exposed_bound_ms);
        if (nvme_params) {
            CHECK(p[ZERO_TIER_NVME][ZERO_CAT_PARAMS] > 0 && p[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] == 0 &&
                  p[ZERO_TIER_HOST][ZERO_CAT_PARAMS] == 0, "param shard not under ZERO_TIER_NVME");
            CHECK(off.stats.prefetch_hits > 0, "no prefetch hits (%lld)", (long long)off.stats.prefetch_hits);
        }
        if (ot == ZERO_OFFLOAD_NVME) {
            CHECK(p[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] > 0, "no I/O buffers in the plan");
            CHECK(off.uring == engine_uring(), "engine: io_uring %d, want %d (ZERO_IO=%s)", off.uring, engine_uring(), engine);
            /* ZERO_IO=uring without io_uring (built without it): the fallback says so */
            CHECK(off.engine_info == (strcmp(engine, "uring") == 0 && !engine_uring()), "OFFLOAD_ENGINE lines: %d",
                  off.engine_info);
        }
    }
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
    for (k = 1; k < ndirs; k++) rm_dir(sub[k - 1]);
    free(ref.out);
    free(off.out);
    test_end();
}

static void equiv_case(int stage, int world, zero_dtype dt, zero_optim_type opt, zero_offload_tier ot, int ndirs) {
    equiv_case2(stage, world, dt, opt, ot, ndirs, 0);
}

static void test_host_cap(void) {
    cfg c = base_cfg(1, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    zero_result r;
    c.opt_tier = ZERO_OFFLOAD_HOST;
    c.host_cap = 1000;
    r = zero_run_local(1, train, &c);
    CHECK(r == ZERO_ERR_OVER_CAP, "host cap: %s", zero_result_str(r));
    CHECK(strstr(c.err, "host_bytes_cap") != NULL, "message: %s", c.err);
    c.opt_tier = ZERO_OFFLOAD_NONE;     /* nothing on the host: the cap does not bite */
    r = zero_run_local(1, train, &c);
    CHECK(r == ZERO_OK, "no offload under a host cap: %s", zero_result_str(r));
    free(c.out);
}

static void test_bad_options(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    memset(&d, 0, sizeof d);
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG, "nvme without a directory accepted");
    d.offload.nvme_dirs[0] = tmpdir;
    d.offload.queue_depth = -1;
    CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG, "negative queue depth accepted");
    d.offload.queue_depth = 0;
    d.offload_params = ZERO_OFFLOAD_NVME;
    CHECK(zero_create(&z, &d) == ZERO_ERR_UNSUPPORTED, "offload_params nvme accepted at stage 0");
    d.stage = 3;
    d.offload_optimizer = ZERO_OFFLOAD_HOST;
    CHECK(zero_create(&z, &d) == ZERO_ERR_UNSUPPORTED, "offload_params nvme accepted with the optimizer on the host");
    CHECK(strstr(zero_last_error(NULL), "offload_optimizer") != NULL, "message: %s", zero_last_error(NULL));
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    CHECK(zero_create(&z, &d) == ZERO_OK, "stage 3 nvme params rejected: %s", zero_last_error(NULL));
    zero_destroy(z);
    z = NULL;
    d.stage = 0;
    d.offload_params = ZERO_OFFLOAD_NONE;
    CHECK(zero_create(&z, &d) == ZERO_OK, "valid nvme desc rejected: %s", zero_last_error(NULL));
    zero_destroy(z);
}

/* exact resume: 2 + 2 steps with a checkpoint between equal 4 steps, states on NVMe */
static void test_ckpt_resume(void) {
    cfg full = base_cfg(2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW), a, b;
    char dir[600];
    zero_result r;
    snprintf(dir, sizeof dir, "%s/ckpt", tmpdir);
    full.opt_tier = ZERO_OFFLOAD_NVME;
    a = full; b = full;
    r = zero_run_local(2, train, &full);
    CHECK(r == ZERO_OK, "full: %s", zero_result_str(r));
    a.steps = 2; a.save_dir = dir;
    r = zero_run_local(2, train, &a);
    CHECK(r == ZERO_OK, "first half: %s (%s)", zero_result_str(r), zero_last_error(NULL));
    /* the second half trains steps 0..1 again from the loaded state: the gradient depends
       on the step index, so shift by making the loaded run's steps the same count */
    b.steps = 2; b.load_dir = dir;
    b.stage = 1;                    /* and load at another stage */
    r = zero_run_local(2, train, &b);
    CHECK(r == ZERO_OK, "second half: %s (%s)", zero_result_str(r), zero_last_error(NULL));
    {   /* the reference for b: 2 steps, then 2 more steps with step indices 0..1 */
        cfg ref = base_cfg(2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW), ref2;
        char dir2[600];
        snprintf(dir2, sizeof dir2, "%s/ckpt2", tmpdir);
        ref.steps = 2; ref.save_dir = dir2;
        r = zero_run_local(2, train, &ref);
        ref2 = base_cfg(1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
        ref2.steps = 2; ref2.load_dir = dir2;
        if (r == ZERO_OK) r = zero_run_local(2, train, &ref2);
        CHECK(r == ZERO_OK, "reference: %s", zero_result_str(r));
        if (r == ZERO_OK && b.out && ref2.out)
            CHECK(memcmp(b.out, ref2.out, (size_t)b.numel * 4) == 0, "resumed nvme run differs from the resumed in-memory run");
        if (a.out && ref.out) CHECK(memcmp(a.out, ref.out, (size_t)a.numel * 4) == 0, "saved states differ");
        free(ref.out); free(ref2.out);
    }
    free(full.out); free(a.out); free(b.out);
}

/* peak RSS of an NVMe run far below its model states: bf16 AdamW keeps params and grads
   (4 bytes per param) in memory and master + moments (12) on NVMe. Sanitizers inflate
   RSS (shadow memory, quarantine): there the run is small and the bound not checked. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define RSS_CHECKED 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define RSS_CHECKED 0
#  endif
#endif
#ifndef RSS_CHECKED
#  define RSS_CHECKED 1
#endif

/* ---- faults ---------------------------------------------------------------------- */
static void test_dir_missing(void) {
    cfg c = base_cfg(1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    char dir[600];
    zero_result r;
    snprintf(dir, sizeof dir, "%s/no/such/dir", tmpdir);
    c.opt_tier = ZERO_OFFLOAD_NVME;
    c.dirs[0] = dir;
    r = zero_run_local(2, train, &c);
    CHECK(r == ZERO_ERR_IO, "missing dir: %s", zero_result_str(r));
    CHECK(strstr(c.err, dir) != NULL, "message does not name the path: %s", c.err);
}

static void test_dir_readonly(void) {
    cfg c = base_cfg(1, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    char dir[600];
    zero_result r;
    snprintf(dir, sizeof dir, "%s/ro", tmpdir);
#ifdef _WIN32
    (void)c; (void)r;
    test_skip("no read-only directories on Windows (the attribute does not stop new files)");
    return;
#else
    mkdir(dir, 0500);
    if (access(dir, W_OK) == 0) { rmdir(dir); test_skip("a read-only directory is writable here (root)"); return; }
#endif
    c.opt_tier = ZERO_OFFLOAD_NVME;
    c.dirs[0] = dir;
    r = zero_run_local(1, train, &c);
    CHECK(r == ZERO_ERR_IO, "read-only dir: %s", zero_result_str(r));
    CHECK(strstr(c.err, dir) != NULL, "message does not name the path: %s", c.err);
    rm_dir(dir);
}

static int enospc_alloc(int fd, int64_t len) { (void)fd; (void)len; return -ENOSPC; }
static void test_disk_full_at_build(void) {
    cfg c = base_cfg(1, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    zero_result r;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    zero__fops.allocate = enospc_alloc;
    r = zero_run_local(1, train, &c);
    zero__fops.allocate = zero__os_allocate;
    CHECK(r == ZERO_ERR_IO, "disk full: %s", zero_result_str(r));
    CHECK(strstr(c.err, tmpdir) && strstr(c.err, "No space"), "message: %s", c.err);
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
}

static int erofs_open(const char *path, int flags, int mode) { (void)path; (void)flags; (void)mode; return -EROFS; }
static void test_readonly_hook(void) {     /* a read-only filesystem, through the file-ops hook */
    cfg c = base_cfg(2, 2, ZERO_F32, ZERO_OPTIM_ADAMW);
    zero_result r;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    zero__fops.open = erofs_open;
    r = zero_run_local(2, train, &c);
    zero__fops.open = zero__os_open;
    CHECK(r == ZERO_ERR_IO, "read-only: %s", zero_result_str(r));
    CHECK(strstr(c.err, tmpdir) && strstr(c.err, "Read-only"), "message: %s", c.err);
}

/* only rank 1 cannot create its files: every rank's zero_build fails, rank 0 saying why */
static int rank1_open(const char *path, int flags, int mode) {
    return strstr(path, ".r1.") ? -EACCES : zero__os_open(path, flags, mode);
}
static void test_one_rank_cannot_create(void) {
    cfg c = base_cfg(2, 2, ZERO_F32, ZERO_OPTIM_ADAMW);
    zero_result r;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    zero__fops.open = rank1_open;
    r = zero_run_local(2, train, &c);
    zero__fops.open = zero__os_open;
    CHECK(r == ZERO_ERR_IO, "rank 1 without files: %s", zero_result_str(r));
    CHECK(strstr(c.err, "another rank could not create its offload files") != NULL, "rank 0's message: %s", c.err);
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
}

static volatile int full_after;     /* writes allowed before ENOSPC (set before the ranks start) */
static int64_t enospc_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    if (__atomic_sub_fetch(&full_after, 1, __ATOMIC_RELAXED) < 0) return -ENOSPC;
    return zero__os_pwrite(fd, buf, n, off);
}
static int64_t enospc_result(int fd, int write, int64_t off, int64_t res) {     /* the io_uring engine's */
    (void)fd; (void)off;
    if (write && __atomic_sub_fetch(&full_after, 1, __ATOMIC_RELAXED) < 0) return -ENOSPC;
    return res;
}
static void arm_enospc(cfg *c, zero_ctx *z) {
    (void)c; (void)z;
    full_after = 3;
    zero__fops.pwrite = enospc_pwrite;
    __atomic_store_n(&zero__fops.io_result, enospc_result, __ATOMIC_RELAXED);   /* I/O threads of other ranks read it */
}
static volatile int reads_ok;       /* reads allowed before EIO */
static int64_t eio_pread(int fd, void *buf, size_t n, int64_t off) {
    if (__atomic_sub_fetch(&reads_ok, 1, __ATOMIC_RELAXED) < 0) return -EIO;
    return zero__os_pread(fd, buf, n, off);
}
static int64_t eio_result(int fd, int write, int64_t off, int64_t res) {
    (void)fd; (void)off;
    if (!write && __atomic_sub_fetch(&reads_ok, 1, __ATOMIC_RELAXED) < 0) return -EIO;
    return res;
}
static void arm_eio(cfg *c, zero_ctx *z) {
    (void)c; (void)z;
    reads_ok = 2;
    zero__fops.pread = eio_pread;
    __atomic_store_n(&zero__fops.io_result, eio_result, __ATOMIC_RELAXED);
}

/* block nblocks/2 of the slot the next step reads: one byte flipped, or the file cut there.
   flip_at: 0 byte 100; 1 the last byte of the last state array; 2 the last param byte;
   3 the last byte before the trailer (the padding). flip_np: the block's checksum pieces. */
static int flip_at, flip_np;
static void flip_byte(cfg *c, zero_ctx *z) {
    zero__nvme *o = z->tier.nvme;
    int64_t blk = o->nblocks / 2, pa = zero__nvme_parea(o);
    int64_t at = flip_at == 1 ? pa - 1 : flip_at == 2 ? pa + o->G * o->psz - 1 : flip_at == 3 ? o->bb - ZERO__OFF_TRAILER - 1 : 100;
    int64_t off = zero__nvme_pos(o, blk, o->slot) + at;
    int fd = zero__os_open(o->path[blk % o->ndirs], O_RDWR, 0);
    unsigned char b;
    (void)c;
    flip_np = o->np;
    if (fd < 0) return;
    if (zero__os_pread(fd, &b, 1, off) == 1) { b ^= 0x10; if (zero__os_pwrite(fd, &b, 1, off) != 1) { } }
    zero__os_close(fd);
}
static void truncate_file(cfg *c, zero_ctx *z) {
    zero__nvme *o = z->tier.nvme;
    int64_t blk = o->nblocks / 2;
    int fd = zero__os_open(o->path[blk % o->ndirs], O_RDWR, 0);
    (void)c;
    if (fd < 0) return;
    if (zero__os_truncate(fd, zero__nvme_pos(o, blk, o->slot)) != 0) { }
    zero__os_close(fd);
}
static void fault_case2(const char *name, void (*fn)(cfg *, zero_ctx *), zero_result want, const char *want_text, int stage,
                        int world, int nvme_params) {
    cfg c = base_cfg(stage, world, ZERO_BF16, ZERO_OPTIM_ADAMW);
    zero_result r;
    test_begin("fault_%s%s_stage%d_world%d_%s", name, nvme_params ? "_params" : "", stage, world, engine);
    c.opt_tier = ZERO_OFFLOAD_NVME;
    if (nvme_params) c.par_tier = ZERO_OFFLOAD_NVME;
    c.elems = 3000;
    if (flip_at) {      /* blocks of several checksum pieces */
        c.buffer_bytes = 3 << 20;
        c.elems = 200000;
    }
    c.fault_step = 2;
    c.fault_fn = fn;
    r = zero_run_local(world, train, &c);
    zero__fops.pwrite = zero__os_pwrite;
    zero__fops.pread = zero__os_pread;
    zero__fops.io_result = NULL;
    if (nvme_params && r != ZERO_OK && c.fault_r == ZERO_OK) {
        /* params on NVMe are read at the fetch: a read fault fails the fetch, before the
           step; nothing was changed yet */
        c.fault_r = r;
        snprintf(c.fault_msg, sizeof c.fault_msg, "%s", c.err);
        c.fault_unchanged = 1;
        r = ZERO_OK;
    }
    CHECK(c.uring == engine_uring(), "engine: io_uring %d, want %d", c.uring, engine_uring());
    CHECK(r == ZERO_OK, "run: %s (%s)", zero_result_str(r), zero_last_error(NULL));
    CHECK(c.fault_r == want, "step result %s, want %s (%s)", zero_result_str(c.fault_r), zero_result_str(want), c.fault_msg);
    CHECK(strstr(c.fault_msg, want_text) != NULL, "message lacks '%s': %s", want_text, c.fault_msg);
    CHECK(strstr(c.fault_msg, tmpdir) != NULL, "message does not name the file: %s", c.fault_msg);
    CHECK(c.fault_unchanged, "params changed by the failed step");
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
    free(c.out);
    test_end();
}
static void fault_case(const char *name, void (*fn)(cfg *, zero_ctx *), zero_result want, const char *want_text, int stage, int world) {
    fault_case2(name, fn, want, want_text, stage, world, 0);
}

/* params on NVMe: one byte of the param area of a block in the current slot flipped
   after a step; the next gather of it (or the step reading it) is ZERO_ERR_CORRUPT */
static void flip_param_byte(cfg *c, zero_ctx *z) {
    zero__nvme *o = z->tier.nvme;
    int64_t blk = 0, off = zero__nvme_pos(o, blk, o->slot) + zero__nvme_parea(o) + 10;    /* not the block cached in memory */
    int fd = zero__os_open(o->path[blk % o->ndirs], O_RDWR, 0);
    unsigned char b;
    (void)c;
    if (fd < 0) return;
    if (zero__os_pread(fd, &b, 1, off) == 1) { b ^= 0x01; if (zero__os_pwrite(fd, &b, 1, off) != 1) { } }
    zero__os_close(fd);
}
static void test_params_corrupt(void) {
    cfg c = base_cfg(3, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    zero_result r;
    const char *msg;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    c.par_tier = ZERO_OFFLOAD_NVME;
    c.elems = 3000;
    c.fault_step = 2;
    c.fault_fn = flip_param_byte;
    c.prefetch_bytes = -1;          /* gathers at the fetch: the flipped block is read after the flip */
    r = zero_run_local(1, train, &c);
    msg = r != ZERO_OK ? c.err : c.fault_msg;
    CHECK(r == ZERO_ERR_CORRUPT || c.fault_r == ZERO_ERR_CORRUPT, "run %s, step %s (%s)", zero_result_str(r),
          zero_result_str(c.fault_r), msg);
    CHECK(strstr(msg, "checksum") && strstr(msg, tmpdir), "message: %s", msg);
    CHECK(strstr(msg, "params") != NULL, "not the gather's check: %s", msg);
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
    free(c.out);
}

/* params on NVMe: what the run allocates stays far below its model states (params,
   grads, master, moments): the param shard is not in memory */
static void test_params_alloc(void) {
    cfg c = base_cfg(3, 2, ZERO_BF16, ZERO_OPTIM_ADAMW), ref;
    zero_result r;
    int64_t states;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    c.nmod = MAXMOD;
    c.elems = RSS_CHECKED ? 1 << 20 : 1 << 16;  /* 16 modules: 17M params, model states 134 MB a rank */
    c.steps = 2;
    c.buffer_bytes = 4 << 20;
    ref = c;
    ref.par_tier = ZERO_OFFLOAD_NONE;
    c.par_tier = ZERO_OFFLOAD_NVME;
    r = zero_run_local(2, train, &c);
    CHECK(r == ZERO_OK, "run: %s (%s)", zero_result_str(r), c.err);
    r = zero_run_local(2, train, &ref);
    CHECK(r == ZERO_OK, "reference: %s (%s)", zero_result_str(r), ref.err);
    states = c.plan.model_state_bytes;          /* one rank's: params, grads, master, moments */
    printf("# nvme params: peak allocation %lld KB (optimizer on NVMe only: %lld KB), rank's model states %lld KB\n",
           (long long)(c.peak_alloc >> 10), (long long)(ref.peak_alloc >> 10), (long long)(states >> 10));
    if (RSS_CHECKED)        /* a small run (sanitizers): the fixed buffers dominate */
        CHECK(c.peak_alloc < states / 2, "peak allocation %lld not below half the rank's states %lld",
              (long long)c.peak_alloc, (long long)states);
    CHECK(c.peak_alloc <= c.plan.total_bytes - c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] -
                          c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] - c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] +
                          4 * (c.elems + 37 * MAXMOD) + (1 << 20),     /* + the final gather's one-module buffer */
          "peak allocation %lld over the plan's memory tiers", (long long)c.peak_alloc);
    /* the param shard is what leaves memory (less the gathers' one-block buffer) */
    CHECK(c.peak_alloc + c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] <= ref.peak_alloc + (1 << 20),
          "peak allocation %lld vs %lld without the params on NVMe", (long long)c.peak_alloc, (long long)ref.peak_alloc);
    if (c.out && ref.out) CHECK(memcmp(c.out, ref.out, (size_t)c.numel * 4) == 0, "params differ");
    free(c.out); free(ref.out);
}

/* frozen modules with the params on NVMe: a frozen module has no optimizer state, so no
   block in the tier; its shard stays in memory (ZERO_TIER_DEVICE in the plan, which the
   stats equal). Bitwise the run without offload, the frozen values untouched. Also a
   model with every module frozen (no tier at all). */
static void params_frozen_case(int world, zero_dtype dt, unsigned frozen) {
    cfg ref = base_cfg(3, world, dt, ZERO_OPTIM_ADAMW), off;
    const int64_t (*p)[ZERO_CAT_NUM];
    zero_result r;
    int64_t base = 0, i, bad = -1, psz = (int64_t)zero_dtype_size(dt);
    int m, k;
    test_begin("params_frozen_stage3_world%d_%s_mask%x_%s", world, zero_dtype_str(dt), frozen, engine);
    ref.frozen = frozen;
    off = ref;
    off.opt_tier = ZERO_OFFLOAD_NVME;
    off.par_tier = ZERO_OFFLOAD_NVME;
    r = zero_run_local(world, train, &ref);
    CHECK(r == ZERO_OK, "reference: %s (%s)", zero_result_str(r), ref.err);
    r = zero_run_local(world, train, &off);
    CHECK(r == ZERO_OK, "params on NVMe: %s (%s)", zero_result_str(r), off.err);
    if (r == ZERO_OK && ref.out && off.out) {
        int64_t fspan = 0, pspan = 0, unit = 16 * (int64_t)world;
        CHECK(memcmp(ref.out, off.out, (size_t)ref.numel * 4) == 0, "params differ from the run without offload");
        for (m = 0; m < NMOD; m++)
            for (k = 0; k < 2; k++) {
                for (i = 0; i < psize(&off, m, k) && ((frozen >> m) & 1u) && bad < 0; i++) {
                    float v = initv(base + i), want;
                    uint16_t h;
                    if (dt == ZERO_F32) want = v;       /* the init, rounded to the param dtype */
                    else { zero_from_f32(&h, dt, &v, 1); zero_to_f32(&want, &h, dt, 1); }
                    if (memcmp(&off.out[base + i], &want, 4) != 0) bad = base + i;
                }
                base += psize(&off, m, k);
            }
        CHECK(bad < 0, "frozen value %lld changed by training", (long long)bad);
        for (m = 0; m < NMOD; m++) {
            /* params start 16-element aligned in their module (align_elems), the span is a multiple of 16 x world */
            int64_t span = ((psize(&off, m, 0) + 15) / 16 * 16 + psize(&off, m, 1) + unit - 1) / unit * unit;
            pspan += span;
            if ((frozen >> m) & 1u) fspan += span;
        }
        p = (const int64_t (*)[ZERO_CAT_NUM])off.plan.bytes;
        CHECK(p[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] == fspan / world * psz, "frozen shards: %lld bytes in memory, want %lld",
              (long long)p[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS], (long long)(fspan / world * psz));
        CHECK(p[ZERO_TIER_NVME][ZERO_CAT_PARAMS] == (pspan - fspan) / world * psz, "trainable shards: %lld bytes on NVMe, want %lld",
              (long long)p[ZERO_TIER_NVME][ZERO_CAT_PARAMS], (long long)((pspan - fspan) / world * psz));
        CHECK(p[ZERO_TIER_HOST][ZERO_CAT_PARAMS] == 0, "params on the host tier");
        CHECK(memcmp(off.stats.bytes, off.plan.bytes, sizeof off.plan.bytes) == 0, "stats differ from the plan");
        CHECK(off.plan.model_state_bytes == ref.plan.model_state_bytes, "model state bytes differ");
    }
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
    free(ref.out);
    free(off.out);
    test_end();
}

/* the process's peak resident set in KiB; -1 where it is not measured (Windows) */
static long long peak_rss_kb(void) {
#ifdef _WIN32
    return -1;
#else
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (long long)ru.ru_maxrss : -1;
#endif
}
static void test_rss(void) {
    cfg c = base_cfg(1, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    long long rss;
    zero_result r;
    int64_t states, inmem;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    c.nmod = MAXMOD;
    c.elems = RSS_CHECKED ? 2 << 20 : 1 << 14;   /* 16 modules: 34M params, model states 537 MB */
    c.steps = 2;
    c.no_gather = 1;
    c.buffer_bytes = 12 << 20;
    r = zero_run_local(1, train, &c);
    CHECK(r == ZERO_OK, "run: %s (%s)", zero_result_str(r), c.err);
    if ((rss = peak_rss_kb()) < 0) { test_skip("no peak RSS on this platform"); return; }
    states = c.plan.model_state_bytes;
    inmem = c.plan.total_bytes - c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] - c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM];
    printf("# rss: peak %lld MB, model states %lld MB, in memory per plan %lld MB\n", rss / 1024,
           (long long)(states >> 20), (long long)(inmem >> 20));
    if (RSS_CHECKED) {
        CHECK((int64_t)rss * 1024 < states / 3, "peak RSS %lld KB not below a third of the model states (%lld B)",
              rss, (long long)states);
        /* the plan, the init buffer of one param and 48 MB of process */
        CHECK((int64_t)rss * 1024 < inmem + c.elems * 4 + (48 << 20), "peak RSS %lld KB over the plan (%lld B)",
              rss, (long long)inmem);
    }
}

/* io_uring: every transfer comes back short (half, 4 KiB-aligned); the engine resubmits
   the rest, and the run is still bitwise the reference */
static int64_t halve_result(int fd, int write, int64_t off, int64_t res) {
    (void)fd; (void)write; (void)off;
    return res > 8192 ? (res / 2) & ~(int64_t)4095 : res;
}
static void test_uring_short(void) {
    cfg ref = base_cfg(2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW), off = ref;
    zero_result r;
    setenv("ZERO_IO", "uring", 1);
    off.opt_tier = ZERO_OFFLOAD_NVME;
    off.buffer_bytes = 3 << 20;     /* blocks of a few chunks */
    off.elems = 200000;
    ref.elems = off.elems;
    r = zero_run_local(2, train, &ref);
    CHECK(r == ZERO_OK, "reference: %s", zero_result_str(r));
    zero__fops.io_result = halve_result;
    r = zero_run_local(2, train, &off);
    zero__fops.io_result = NULL;
    CHECK(r == ZERO_OK, "short transfers: %s (%s)", zero_result_str(r), off.err);
    if (r == ZERO_OK && ref.out && off.out) CHECK(memcmp(ref.out, off.out, (size_t)ref.numel * 4) == 0, "params differ");
#ifdef ZERO_IO_URING
    CHECK(off.uring == 1, "not the io_uring engine");
#endif
    free(ref.out); free(off.out);
}

/* a byte flipped anywhere in a block of several checksum pieces fails the step (the sums
   are taken inside the pass) and the params stay as they were */
static void test_pieces_corrupt(void) {
    static const char *names[4] = { "", "corrupt_pieces_array_end", "corrupt_pieces_param_end", "corrupt_pieces_padding" };
    int w;
    for (flip_at = 1; flip_at <= 3; flip_at++)
        for (w = 0; w < 2; w++) {
            int par = w && flip_at == 1;
            flip_np = 0;
            /* with the params on NVMe a damaged param area fails the fetch's gather first
               (test_params_corrupt): there only the state arrays */
            fault_case2(names[flip_at], flip_byte, ZERO_ERR_CORRUPT, "checksum", par ? 3 : 1 + w, 1 + w, par);
            CHECK(flip_np >= 2, "blocks of %d checksum pieces, want several", flip_np);
        }
    flip_at = 0;
}

/* the I/O engine keeps at most lim[0] reads and lim[1] writes in flight, depth together
   (the thread engine: its transfers go through zero__fops, slowed down here) */
static int lim_fly[2], lim_max[2], lim_tot;
static zero__mutex lim_mu = ZERO__MUTEX_INITIALIZER;
static void lim_enter(int w, int d) {
    zero__mutex_lock(&lim_mu);
    lim_fly[w] += d;
    if (lim_fly[w] > lim_max[w]) lim_max[w] = lim_fly[w];
    if (lim_fly[0] + lim_fly[1] > lim_tot) lim_tot = lim_fly[0] + lim_fly[1];
    zero__mutex_unlock(&lim_mu);
    if (d > 0) zero__sleep_us(2000.0);    /* long enough for the others to pile up */
}
static int64_t lim_pread(int fd, void *buf, size_t n, int64_t off) {
    int64_t r;
    lim_enter(0, 1); r = zero__os_pread(fd, buf, n, off); lim_enter(0, -1);
    return r;
}
static int64_t lim_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    int64_t r;
    lim_enter(1, 1); r = zero__os_pwrite(fd, buf, n, off); lim_enter(1, -1);
    return r;
}
static void test_io_limits(void) {
    static const int lims[3][3] = { { 4, 1, 2 }, { 6, 3, 3 }, { 3, 8, 0 } };   /* depth, reads, writes (clamped) */
    zero__iopool io;
    zero__iobatch rb, wb;
    zero_allocator a;
    char path[600], *buf;
    int fd, why, k;
    memset(&a, 0, sizeof a);
    snprintf(path, sizeof path, "%s/limits", tmpdir);
    fd = zero__os_open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "open %s", path);
    buf = (char *)calloc(1, 64 << 12);
    if (fd < 0 || !buf) { free(buf); return; }
    CHECK(zero__os_pwrite(fd, buf, 64 << 12, 0) == 64 << 12, "prefill");
    zero__fops.pread = lim_pread;
    zero__fops.pwrite = lim_pwrite;
    for (k = 0; k < 3; k++) {
        int want_r = lims[k][1] > lims[k][0] ? lims[k][0] : lims[k][1], want_w = lims[k][2] < 1 ? 1 : lims[k][2];
        CHECK(zero__io_start(&io, lims[k][0], 0, &a, &why) == 0, "start");
        zero__io_limits(&io, lims[k][1], lims[k][2]);
        CHECK(io.lim[0] == want_r && io.lim[1] == want_w, "limits %d %d, want %d %d", io.lim[0], io.lim[1], want_r, want_w);
        memset(lim_max, 0, sizeof lim_max);
        lim_tot = 0;
        memset(&rb, 0, sizeof rb);
        memset(&wb, 0, sizeof wb);
        wb.write = 1;
        zero__io_submit(&io, &wb, fd, 1, buf + (32 << 12), 32 << 12, 32 << 12, 4096);
        zero__io_submit(&io, &rb, fd, 0, buf, 32 << 12, 0, 4096);
        zero__io_wait(&io, &rb);
        zero__io_wait(&io, &wb);
        zero__io_stop(&io, &a);
        CHECK(rb.err == 0 && wb.err == 0, "I/O errors %d %d", rb.err, wb.err);
        CHECK(lim_max[0] >= 1 && lim_max[0] <= want_r, "reads in flight at most %d, limit %d", lim_max[0], want_r);
        CHECK(lim_max[1] >= 1 && lim_max[1] <= want_w, "writes in flight at most %d, limit %d", lim_max[1], want_w);
        CHECK(lim_tot <= lims[k][0], "in flight together %d, depth %d", lim_tot, lims[k][0]);
        CHECK(k != 0 || (lim_max[0] == 1 && lim_max[1] == 2), "depth 4, 1 read and 2 writes: %d and %d in flight",
              lim_max[0], lim_max[1]);
    }
    zero__fops.pread = zero__os_pread;
    zero__fops.pwrite = zero__os_pwrite;
    free(buf);
    zero__os_close(fd);
    zero__os_unlink(path);
}

/* the tier's block sum: any one bit changed anywhere (lanes, the byte tail) changes it,
   and so do the seed and the length */
static void test_blk_sum8(void) {
    enum { N = 4096 + 61 };
    static unsigned char b[N];
    uint64_t s0, s;
    int i, bad = 0;
    for (i = 0; i < N; i++) b[i] = (unsigned char)(i * 131 + 7);
    s0 = zero__blk_sum8((const char *)b, N, 42);
    for (i = 0; i < N * 8; i += 7) {
        b[i / 8] ^= (unsigned char)(1u << (i % 8));
        s = zero__blk_sum8((const char *)b, N, 42);
        b[i / 8] ^= (unsigned char)(1u << (i % 8));
        bad += s == s0;
    }
    CHECK(bad == 0, "%d single-bit changes kept the sum", bad);
    CHECK(zero__blk_sum8((const char *)b, N, 42) == s0, "not a function of the bytes");
    CHECK(zero__blk_sum8((const char *)b, N, 43) != s0, "the seed does not count");
    CHECK(zero__blk_sum8((const char *)b, N - 1, 42) != s0, "the length does not count");
}

static void test_bad_engine(void) {
    cfg c = base_cfg(1, 1, ZERO_BF16, ZERO_OPTIM_ADAMW);
    zero_result r;
    c.opt_tier = ZERO_OFFLOAD_NVME;
    setenv("ZERO_IO", "aio", 1);
    r = zero_run_local(1, train, &c);
    CHECK(r == ZERO_ERR_INVALID_ARG, "ZERO_IO=aio: %s", zero_result_str(r));
    CHECK(strstr(c.err, "ZERO_IO=aio") != NULL, "message: %s", c.err);
    CHECK(count_files(tmpdir) == 0, "offload files left behind");
}

int main(void) {
    const char *t = getenv("TMPDIR");
    static const int worlds[] = { 1, 2, 3 };
    int s, w, dt, e;
    test_init();
    snprintf(tmpdir, sizeof tmpdir, "%s/zero_offload_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { printf("FAIL setup: mkdtemp: %s\n", strerror(errno)); return 1; }
    TEST_RUN(test_rss);
    for (e = 0; e < 2; e++) {
        engine = e ? "uring" : "threads";
        setenv("ZERO_IO", engine, 1);
        for (s = 0; s <= 3; s++)
            for (w = 0; w < 3; w++)
                for (dt = 0; dt < 2; dt++)
                    equiv_case(s, worlds[w], dt ? ZERO_BF16 : ZERO_F32, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1);
        equiv_case(2, 2, ZERO_BF16, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 1);
        equiv_case(3, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 3);
        equiv_case(1, 3, ZERO_F32, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 2);
        equiv_case(2, 2, ZERO_BF16, ZERO_OPTIM_LION, ZERO_OFFLOAD_NVME, 1);
        equiv_case(3, 3, ZERO_F32, ZERO_OPTIM_LION, ZERO_OFFLOAD_NVME, 2);
        fault_case("enospc", arm_enospc, ZERO_ERR_IO, "No space", 1, 2);
        fault_case("enospc", arm_enospc, ZERO_ERR_IO, "No space", 3, 1);
        fault_case("eio", arm_eio, ZERO_ERR_IO, "Input/output error", 2, 2);
        fault_case("corrupt", flip_byte, ZERO_ERR_CORRUPT, "checksum", 2, 1);
        fault_case("truncated", truncate_file, ZERO_ERR_CORRUPT, "offload block", 1, 1);   /* short read, or a hole: checksum */
        /* stage-3 params on NVMe */
        for (w = 0; w < 3; w++)
            for (dt = 0; dt < 2; dt++)
                equiv_case2(3, worlds[w], dt ? ZERO_BF16 : ZERO_F32, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1, 1);
        equiv_case2(3, 2, ZERO_F32, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 2, 1);
        equiv_case2(3, 2, ZERO_BF16, ZERO_OPTIM_LION, ZERO_OFFLOAD_NVME, 1, 1);
        fault_case2("enospc", arm_enospc, ZERO_ERR_IO, "No space", 3, 2, 1);
        fault_case2("eio", arm_eio, ZERO_ERR_IO, "Input/output error", 3, 1, 1);
        fault_case2("corrupt", flip_byte, ZERO_ERR_CORRUPT, "checksum", 3, 1, 1);
        for (w = 0; w < 3; w++)
            for (dt = 0; dt < 2; dt++)
                params_frozen_case(worlds[w], dt ? ZERO_BF16 : ZERO_F32, w == 2 ? 0x9u : 0x2u);
        params_frozen_case(2, ZERO_BF16, 0xfu);
        /* bf16 moments (ON OPTIMIZER STATES): the NVMe tier (2-byte arrays in its blocks)
           bitwise the run in memory, the states' and params' bytes as planned */
        equiv_sdt = ZERO_STATE_BF16;
        equiv_case(1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1);
        equiv_case(3, 3, ZERO_F32, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 2);
        equiv_case(2, 2, ZERO_BF16, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 1);
        equiv_case(1, 1, ZERO_F32, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 1);
        equiv_case2(3, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1, 1);
        /* q8 moments: codes and scales in the blocks (4 KiB-aligned areas), bitwise too */
        equiv_sdt = ZERO_STATE_Q8;
        equiv_case(1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1);
        equiv_case(3, 3, ZERO_F32, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 2);
        equiv_case(0, 2, ZERO_F32, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1);
        equiv_case(2, 2, ZERO_BF16, ZERO_OPTIM_SGD, ZERO_OFFLOAD_NVME, 1);
        equiv_case2(3, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_NVME, 1, 1);
        equiv_case(1, 3, ZERO_BF16, ZERO_OPTIM_LION, ZERO_OFFLOAD_NVME, 1);
        equiv_sdt = ZERO_STATE_F32;
    }
    TEST_RUN(test_params_corrupt);
    TEST_RUN(test_params_alloc);
    TEST_RUN(test_uring_short);
    TEST_RUN(test_io_limits);
    TEST_RUN(test_blk_sum8);
    setenv("ZERO_IO", "threads", 1);
    engine = "threads";
    TEST_RUN(test_pieces_corrupt);
    TEST_RUN(test_bad_engine);
    unsetenv("ZERO_IO");
    for (s = 0; s <= 3; s++) equiv_case(s, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_HOST, 1);
    equiv_sdt = ZERO_STATE_BF16;    /* bf16 moments in host memory */
    equiv_case(2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_HOST, 1);
    equiv_sdt = ZERO_STATE_Q8;      /* q8 moments in host memory: sub-groups cut at q8 blocks */
    for (s = 0; s <= 3; s++) equiv_case(s, s == 3 ? 3 : 2, s == 1 ? ZERO_F32 : ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_OFFLOAD_HOST, 1);
    equiv_case(2, 2, ZERO_F32, ZERO_OPTIM_SGD, ZERO_OFFLOAD_HOST, 1);
    equiv_case(3, 2, ZERO_BF16, ZERO_OPTIM_LION, ZERO_OFFLOAD_HOST, 1);
    equiv_sdt = ZERO_STATE_F32;
    equiv_case(1, 2, ZERO_BF16, ZERO_OPTIM_LION, ZERO_OFFLOAD_HOST, 1);
    TEST_RUN(test_host_cap);
    TEST_RUN(test_bad_options);
    TEST_RUN(test_ckpt_resume);
    TEST_RUN(test_dir_missing);
    TEST_RUN(test_dir_readonly);
    TEST_RUN(test_disk_full_at_build);
    TEST_RUN(test_readonly_hook);
    TEST_RUN(test_one_rank_cannot_create);
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) { }
    }
    return test_summary();
}
