/* tests/test_stash.c - the activation stash (zero_act_*, ON ACTIVATIONS): every tier (in
   memory, host, NVMe files; the CPU device and the EMU device, whose memory the host cannot
   touch) gives back the bytes put, over steps of several micro-batches and ranks; the plan,
   zero_estimate_activations and zero_stats_get agree on its bytes; a steady-state step
   allocates nothing; from the second step on the NVMe stash reads ahead in the recorded
   order (hit rate >= 0.95); a changed order is a warning and the bytes are still right;
   misuse (a handle used twice, after the step, or never asked for) is a result code naming
   the tag; a full disk is ZERO_ERR_IO at zero_build or at a put, and nothing put is lost;
   a corrupted file is ZERO_ERR_CORRUPT. The NVMe cases run once per I/O engine
   (ZERO_IO=threads, then uring). Files go under $TMPDIR. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <dirent.h>
#include <fcntl.h>

#define NS 6
static const int64_t slot_bytes[NS] = { 1000, 5000, 300, 8192, 1, 20000 };
static char tmpdir[512];
static const char *engine = "threads";

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) if (strncmp(e->d_name, "zero_", 5) == 0) n++;
    closedir(d);
    return n;
}

/* the byte j of slot s at (step, micro-batch, rank) */
static unsigned char pat(int step, int mb, int rank, int s, int64_t j) {
    return (unsigned char)(j * 131 + s * 17 + step * 7 + mb * 3 + rank * 101 + (j >> 8));
}

/* counts the context's host allocations (the stash's, on the CPU device) */
typedef struct { int64_t n; } acount;
static void *count_alloc(size_t n, void *u) { __atomic_add_fetch(&((acount *)u)->n, 1, __ATOMIC_RELAXED); return malloc(n); }
static void count_free(void *p, void *u) { (void)u; free(p); }

typedef struct {                      /* one run */
    zero_offload_tier tier;
    zero_device_type device;
    int world, steps, accum;
    int64_t live;                     /* act_live_bytes */
    int reorder_step;                 /* >= 1: that step gets in forward order (a changed order) */
    /* results (rank 0) */
    int bad_bytes, warned;
    zero_stats st;
    zero_plan plan;
    int64_t allocs_step1, allocs_end;
    zero_desc eff;
    char err[512];
} run_cfg;

static void logger(void *u, zero_log_level lvl, zero_log_item item, int rank, const char *msg) {
    (void)lvl; (void)rank; (void)msg;
    if (item == ZERO_LOGITEM_ACT_ORDER_CHANGED) __atomic_add_fetch(&((run_cfg *)u)->warned, 1, __ATOMIC_RELAXED);
}

static void desc_for(zero_desc *d, zero_comm *comm, const run_cfg *c) {
    fx_desc(d, comm, 0, ZERO_F32, ZERO_OPTIM_SGD, 0.1);
    d->device = c->device;
    d->accum_steps = c->accum;
    d->offload_activations = c->tier;
    d->act_live_bytes = c->live;
    d->offload.nvme_dirs[0] = tmpdir;
}

static zero_result run_rank(zero_comm *comm, int rank, void *user) {
    run_cfg *c = (run_cfg *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_param w;
    zero_act a[NS];
    acount cnt = { 0 };
    zero_result r;
    unsigned char *host = (unsigned char *)malloc(32768), *back = (unsigned char *)malloc(32768);
    void *dev = NULL;
    desc_for(&d, comm, c);
    d.allocator.alloc = count_alloc; d.allocator.free = count_free; d.allocator.user_data = &cnt;
    d.logger.func = logger; d.logger.user_data = c; d.logger.level = ZERO_LOG_WARN;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    if ((r = fx_module(z, "m", 0, &m)) != ZERO_OK || (r = fx_param(z, m, "w", 64, 0, 0, &w)) != ZERO_OK) goto done;
    for (int s = 0; s < NS; s++) {
        char name[32];
        snprintf(name, sizeof name, "block%d.in", s);
        if ((r = zero_act_add(z, name, slot_bytes[s], &a[s])) != ZERO_OK) goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    if (!(dev = zero_device_alloc(z, 32768))) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    for (int step = 0; step < c->steps; step++) {
        if (step == 1 && rank == 0) c->allocs_step1 = __atomic_load_n(&cnt.n, __ATOMIC_RELAXED);
        for (int mb = 0; mb < c->accum; mb++) {
            for (int s = 0; s < NS; s++) {          /* forward: each block's input */
                for (int64_t j = 0; j < slot_bytes[s]; j++) host[j] = pat(step, mb, rank, s, j);
                if ((r = zero_copy(z, dev, host, slot_bytes[s])) != ZERO_OK) goto done;
                if ((r = zero_act_put(z, a[s], dev)) != ZERO_OK) goto done;
            }
            for (int k = 0; k < NS; k++) {          /* backward: in reverse (or, once, forward) order */
                int s = step == c->reorder_step ? k : NS - 1 - k;
                struct timespec ts = { 0, 2000000 };    /* the backward pass computes between gets */
                if (c->tier == ZERO_OFFLOAD_NVME) nanosleep(&ts, NULL);
                if ((r = zero_copy(z, dev, host, 32768)) != ZERO_OK) goto done;   /* scribble first */
                if ((r = zero_act_get(z, a[s], dev)) != ZERO_OK) goto done;
                if ((r = zero_copy(z, back, dev, slot_bytes[s])) != ZERO_OK) goto done;
                for (int64_t j = 0; j < slot_bytes[s]; j++)
                    if (back[j] != pat(step, mb, rank, s, j)) { __atomic_add_fetch(&c->bad_bytes, 1, __ATOMIC_RELAXED); break; }
            }
            float g[64];
            for (int i = 0; i < 64; i++) g[i] = 0.01f * (float)(i - 32);
            if ((r = zero_copy(z, zero_param_grad(z, w), g, sizeof g)) != ZERO_OK) goto done;
            if ((r = zero_grads_ready(z, m)) != ZERO_OK) goto done;
        }
        if ((r = zero_step(z)) != ZERO_OK) goto done;
    }
    if (rank == 0) {
        c->allocs_end = __atomic_load_n(&cnt.n, __ATOMIC_RELAXED);
        zero_stats_get(z, &c->st);
        zero_plan_get(z, &c->plan);
        c->eff = zero_query_desc(z);
    }
done:
    if (r != ZERO_OK && rank == 0) snprintf(c->err, sizeof c->err, "%s", zero_last_error(z));
    if (dev) zero_device_free(z, dev);
    zero_destroy(z);
    free(host); free(back);
    return r;
}

static run_cfg base(zero_offload_tier tier, int world) {
    run_cfg c;
    memset(&c, 0, sizeof c);
    c.tier = tier; c.world = world; c.steps = 4; c.accum = 2; c.reorder_step = -1; c.device = ZERO_DEVICE_CPU;
    return c;
}

static int64_t area(int64_t b) { return (b + 64 + 4095) / 4096 * 4096; }

static void roundtrip(zero_offload_tier tier, zero_device_type dev, int world) {
    static const char *tn[] = { "none", "host", "nvme" };
    run_cfg c = base(tier, world);
    zero_result r;
    int64_t mem = 0, file = 0, maxa = 0;
    test_begin("roundtrip_%s_%s_world%d%s%s", tn[tier], dev == ZERO_DEVICE_EMU ? "emu" : dev == ZERO_DEVICE_CUDA ? "cuda" : "cpu", world,
               tier == ZERO_OFFLOAD_NVME ? "_" : "", tier == ZERO_OFFLOAD_NVME ? engine : "");
    c.device = dev;
    r = zero_run_local(world, run_rank, &c);
    if (!CHECK(r == ZERO_OK, "run: %s: %s", zero_result_str(r), c.err)) { test_end(); return; }
    CHECK(c.bad_bytes == 0, "%d gets gave wrong bytes", c.bad_bytes);
    for (int s = 0; s < NS; s++) {
        mem += (slot_bytes[s] + 63) / 64 * 64;
        file += area(slot_bytes[s]);
        if (area(slot_bytes[s]) > maxa) maxa = area(slot_bytes[s]);
    }
    for (int t = 0; t < ZERO_TIER_NUM; t++)
        for (int k = 0; k < ZERO_CAT_NUM; k++)
            CHECK(c.st.bytes[t][k] == c.plan.bytes[t][k], "stats [%d][%d] %lld != plan %lld", t, k,
                  (long long)c.st.bytes[t][k], (long long)c.plan.bytes[t][k]);
    CHECK(c.st.total_bytes == c.plan.total_bytes && c.st.model_state_bytes == c.plan.model_state_bytes,
          "totals: stats %lld/%lld plan %lld/%lld", (long long)c.st.total_bytes, (long long)c.st.model_state_bytes,
          (long long)c.plan.total_bytes, (long long)c.plan.model_state_bytes);
    if (tier == ZERO_OFFLOAD_NVME) {
        CHECK(c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS] == file, "nvme bytes %lld, want %lld",
              (long long)c.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS], (long long)file);
        CHECK(c.plan.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS] == 2 * maxa, "staging bytes %lld, want 2 x %lld",
              (long long)c.plan.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS], (long long)maxa);
        CHECK(c.eff.act_live_bytes == 2 * maxa, "act_live_bytes in effect %lld", (long long)c.eff.act_live_bytes);
        CHECK(c.st.act_bytes_written > 0 && c.st.act_bytes_read > 0, "no file traffic: %lld written, %lld read",
              (long long)c.st.act_bytes_written, (long long)c.st.act_bytes_read);
    } else {
        int t = tier == ZERO_OFFLOAD_HOST ? ZERO_TIER_HOST : ZERO_TIER_DEVICE;
        CHECK(c.plan.bytes[t][ZERO_CAT_ACTIVATIONS] == mem, "memory bytes %lld, want %lld",
              (long long)c.plan.bytes[t][ZERO_CAT_ACTIVATIONS], (long long)mem);
    }
    {   /* zero_estimate_activations adds exactly what the context planned */
        zero_desc d;
        zero_plan p;
        run_cfg cc = c;
        memset(&p, 0, sizeof p);
        desc_for(&d, NULL, &cc);
        r = zero_estimate_activations(&d, NS, slot_bytes, &p);
        CHECK(r == ZERO_OK, "estimate: %s", zero_last_error(NULL));
        for (int t = 0; t < ZERO_TIER_NUM; t++)
            CHECK(p.bytes[t][ZERO_CAT_ACTIVATIONS] == c.plan.bytes[t][ZERO_CAT_ACTIVATIONS], "estimate tier %d: %lld vs %lld",
                  t, (long long)p.bytes[t][ZERO_CAT_ACTIVATIONS], (long long)c.plan.bytes[t][ZERO_CAT_ACTIVATIONS]);
    }
    {
        int64_t gets = (int64_t)(c.steps - 1) * c.accum * NS, hm = c.st.act_hits + c.st.act_misses;
        CHECK(hm == gets, "hits %lld + misses %lld, want %lld gets after the first step", (long long)c.st.act_hits,
              (long long)c.st.act_misses, (long long)gets);
        CHECK(hm > 0 && (double)c.st.act_hits / (double)hm >= 0.95, "hit rate %lld/%lld", (long long)c.st.act_hits,
              (long long)hm);
    }
    CHECK(c.allocs_end == c.allocs_step1, "steps 2..%d allocated %lld times", c.steps,
          (long long)(c.allocs_end - c.allocs_step1));
    CHECK(count_files(tmpdir) == 0, "files left behind");
    test_end();
}

static void test_order_changed(void) {
    run_cfg c = base(ZERO_OFFLOAD_NVME, 1);
    zero_result r;
    c.reorder_step = 2;
    r = zero_run_local(1, run_rank, &c);
    CHECK(r == ZERO_OK, "run: %s: %s", zero_result_str(r), c.err);
    CHECK(c.bad_bytes == 0, "%d gets gave wrong bytes", c.bad_bytes);
    CHECK(c.warned >= 1, "no ACT_ORDER_CHANGED warning");
    CHECK(c.st.act_misses > 0, "the changed step had no misses");
}

/* a built one-rank context with NS slots, for the misuse and fault cases */
static zero_result small_ctx(zero_ctx **z, zero_offload_tier tier, int64_t live, zero_module *m, zero_param *w, zero_act *a) {
    zero_desc d;
    run_cfg c = base(tier, 1);
    zero_result r;
    c.accum = 1; c.live = live;
    desc_for(&d, NULL, &c);
    if ((r = zero_create(z, &d)) != ZERO_OK) return r;
    if ((r = fx_module(*z, "m", 0, m)) != ZERO_OK || (r = fx_param(*z, *m, "w", 16, 0, 0, w)) != ZERO_OK) return r;
    for (int s = 0; s < NS; s++) {
        char name[32];
        snprintf(name, sizeof name, "block%d.in", s);
        if ((r = zero_act_add(*z, name, slot_bytes[s], &a[s])) != ZERO_OK) return r;
    }
    return zero_build(*z);
}
static zero_result grads_and_step(zero_ctx *z, zero_module m, zero_param w) {
    float g[16] = { 0 };
    zero_result r;
    if ((r = zero_copy(z, zero_param_grad(z, w), g, sizeof g)) != ZERO_OK) return r;
    if ((r = zero_grads_ready(z, m)) != ZERO_OK) return r;
    return zero_step(z);
}

static void test_misuse(void) {
    zero_ctx *z = NULL;
    zero_module m;
    zero_param w;
    zero_act a[NS], x;
    unsigned char buf[20000];
    zero_result r;
    memset(buf, 7, sizeof buf);
    r = small_ctx(&z, ZERO_OFFLOAD_NVME, 0, &m, &w, a);
    if (!CHECK(r == ZERO_OK, "build: %s", zero_last_error(z))) { zero_destroy(z); return; }
    r = zero_act_add(z, "late", 10, &x);
    CHECK(r == ZERO_ERR_ALREADY_BUILT && strstr(zero_last_error(z), "late"), "add after build: %s", zero_result_str(r));
    r = zero_act_get(z, a[1], buf);
    CHECK(r == ZERO_ERR_STATE && strstr(zero_last_error(z), "block1.in"), "get before put: %s %s", zero_result_str(r),
          zero_last_error(z));
    CHECK(zero_act_put(z, a[1], buf) == ZERO_OK, "put: %s", zero_last_error(z));
    r = zero_act_put(z, a[1], buf);
    CHECK(r == ZERO_ERR_STATE && strstr(zero_last_error(z), "block1.in"), "put twice: %s", zero_result_str(r));
    CHECK(zero_act_get(z, a[1], buf) == ZERO_OK, "get: %s", zero_last_error(z));
    r = zero_act_get(z, a[1], buf);
    CHECK(r == ZERO_ERR_STATE && strstr(zero_last_error(z), "block1.in") && strstr(zero_last_error(z), "already taken"),
          "get twice: %s %s", zero_result_str(r), zero_last_error(z));
    x.id = a[0].id + 100;
    CHECK(zero_act_get(z, x, buf) == ZERO_ERR_INVALID_HANDLE, "a bad handle");
    CHECK(zero_act_put(z, a[0], NULL) == ZERO_ERR_INVALID_ARG, "NULL src");
    /* never asked for: zero_step names it, and drops it */
    CHECK(zero_act_put(z, a[4], buf) == ZERO_OK, "put: %s", zero_last_error(z));
    r = grads_and_step(z, m, w);
    CHECK(r == ZERO_ERR_STATE && strstr(zero_last_error(z), "block4.in") && strstr(zero_last_error(z), "never asked"),
          "never asked for: %s %s", zero_result_str(r), zero_last_error(z));
    r = zero_act_get(z, a[4], buf);
    CHECK(r == ZERO_ERR_STATE && strstr(zero_last_error(z), "block4.in") && strstr(zero_last_error(z), "after the step"),
          "used after the step: %s %s", zero_result_str(r), zero_last_error(z));
    r = zero_step(z);      /* the gradients are still ready: the step goes through now */
    CHECK(r == ZERO_OK, "the step after: %s", zero_last_error(z));
    CHECK(zero_act_put(z, a[4], buf) == ZERO_OK && zero_act_get(z, a[4], buf) == ZERO_OK, "the slot works again: %s",
          zero_last_error(z));
    zero_destroy(z);
    {   /* registration errors */
        zero_desc d;
        run_cfg c = base(ZERO_OFFLOAD_NVME, 1);
        desc_for(&d, NULL, &c);
        z = NULL;
        if (CHECK(zero_create(&z, &d) == ZERO_OK, "create")) {
            CHECK(zero_act_add(z, "a", 0, &x) == ZERO_ERR_INVALID_SIZE, "0 bytes");
            CHECK(zero_act_add(z, "a", 10, &x) == ZERO_OK, "add");
            CHECK(zero_act_add(z, "a", 10, &x) == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(z), "'a'"), "a duplicate name");
            CHECK(zero_act_add(z, NULL, 10, &x) == ZERO_ERR_INVALID_ARG, "NULL name");
        }
        zero_destroy(z);
        c.live = 100;       /* below one slot */
        desc_for(&d, NULL, &c);
        z = NULL;
        r = small_ctx(&z, ZERO_OFFLOAD_NVME, 100, &m, &w, a);
        CHECK(r == ZERO_ERR_OVER_CAP && strstr(zero_last_error(z), "act_live_bytes"), "act_live_bytes too small: %s",
              zero_result_str(r));
        zero_destroy(z);
        memset(&d, 0, sizeof d);
        d.offload_activations = ZERO_OFFLOAD_NVME;
        z = NULL;
        CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG, "nvme without a directory");
        d.offload_activations = (zero_offload_tier)9;
        CHECK(zero_create(&z, &d) == ZERO_ERR_INVALID_ARG, "a bad tier");
        {   /* the estimate refuses what zero_build refuses */
            zero_plan p;
            memset(&p, 0, sizeof p);
            desc_for(&d, NULL, &c);
            CHECK(zero_estimate_activations(&d, NS, slot_bytes, &p) == ZERO_ERR_OVER_CAP, "estimate: act_live_bytes too small");
            CHECK(zero_estimate_activations(&d, NS, NULL, &p) == ZERO_ERR_INVALID_ARG, "estimate: NULL sizes");
            c.live = 0;
            desc_for(&d, NULL, &c);
            CHECK(zero_estimate_activations(&d, 1, &slot_bytes[4], &p) == ZERO_OK &&
                  p.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS] == 4096 && p.total_bytes == 8192,
                  "estimate of one 1-byte slot: nvme %lld, total %lld", (long long)p.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS],
                  (long long)p.total_bytes);
        }
    }
    CHECK(count_files(tmpdir) == 0, "files left behind");
}

static int enospc_alloc(int fd, int64_t len) { (void)fd; (void)len; return -ENOSPC; }
static void test_disk_full_at_build(void) {
    zero_ctx *z = NULL;
    zero_module m;
    zero_param w;
    zero_act a[NS];
    zero_result r;
    zero__fops.allocate = enospc_alloc;
    r = small_ctx(&z, ZERO_OFFLOAD_NVME, 0, &m, &w, a);
    zero__fops.allocate = zero__os_allocate;
    CHECK(r == ZERO_ERR_IO && strstr(zero_last_error(z), tmpdir) && strstr(zero_last_error(z), "No space"),
          "disk full at build: %s %s", zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    CHECK(count_files(tmpdir) == 0, "files left behind");
}

static volatile int writes_ok;
static int64_t enospc_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    if (__atomic_sub_fetch(&writes_ok, 1, __ATOMIC_RELAXED) < 0) return -ENOSPC;
    return zero__os_pwrite(fd, buf, n, off);
}
static int64_t enospc_result(int fd, int write, int64_t off, int64_t res) {
    (void)fd; (void)off;
    if (write && __atomic_sub_fetch(&writes_ok, 1, __ATOMIC_RELAXED) < 0) return -ENOSPC;
    return res;
}
static void test_disk_full_at_put(void) {
    zero_ctx *z = NULL;
    zero_module m;
    zero_param w;
    zero_act a[NS];
    static unsigned char buf[NS][20000], back[20000];
    zero_result r;
    int io_errors = 0, other = 0, bad = 0, refused[NS] = { 0 }, nrefused = 0;
    char msg[512] = "", refusal[512] = "";
    r = small_ctx(&z, ZERO_OFFLOAD_NVME, 0, &m, &w, a);
    if (!CHECK(r == ZERO_OK, "build: %s", zero_last_error(z))) { zero_destroy(z); return; }
    writes_ok = 2;
    zero__fops.pwrite = enospc_pwrite;
    __atomic_store_n(&zero__fops.io_result, enospc_result, __ATOMIC_RELAXED);
    for (int s = 0; s < NS; s++) {
        for (int64_t j = 0; j < slot_bytes[s]; j++) buf[s][j] = pat(0, 0, 0, s, j);
        r = zero_act_put(z, a[s], buf[s]);
        if (r == ZERO_ERR_IO && strstr(zero_last_error(z), "not stashed")) {    /* refused: the caller keeps its bytes */
            refused[s] = 1; nrefused++;
            snprintf(refusal, sizeof refusal, "%s", zero_last_error(z));
        } else if (r == ZERO_ERR_IO) { io_errors++; snprintf(msg, sizeof msg, "%s", zero_last_error(z)); }
        else if (r != ZERO_OK) other++;
    }
    for (int s = NS - 1; s >= 0; s--) {     /* nothing lost: every get gives its bytes (an I/O error is reported once) */
        memset(back, 0, sizeof back);
        if (refused[s]) {
            CHECK(zero_act_get(z, a[s], back) == ZERO_ERR_STATE, "a refused put was stashed: block%d.in", s);
            continue;
        }
        r = zero_act_get(z, a[s], back);
        if (r == ZERO_ERR_IO) { io_errors++; snprintf(msg, sizeof msg, "%s", zero_last_error(z)); }
        else if (r != ZERO_OK) { other++; snprintf(msg, sizeof msg, "%s", zero_last_error(z)); }
        if (memcmp(back, buf[s], (size_t)slot_bytes[s]) != 0) bad++;
    }
    zero__fops.pwrite = zero__os_pwrite;
    __atomic_store_n(&zero__fops.io_result, NULL, __ATOMIC_RELAXED);
    CHECK(other == 0, "other failures: %s", msg);
    CHECK(io_errors + nrefused >= 1, "the full disk was never reported");
    CHECK(io_errors == 0 || (strstr(msg, "No space") && strstr(msg, "block") && strstr(msg, tmpdir)),
          "%d ZERO_ERR_IO, last: %s", io_errors, msg);
    CHECK(bad == 0, "%d slots lost their bytes", bad);
    CHECK(nrefused == 0 || (strstr(refusal, "No space") && strstr(refusal, "block") && strstr(refusal, tmpdir)),
          "refusal: %s", refusal);
    CHECK(nrefused < NS - 1, "%d of %d puts refused", nrefused, NS);
    CHECK(grads_and_step(z, m, w) == ZERO_OK, "the step after: %s", zero_last_error(z));
    zero_destroy(z);
    CHECK(count_files(tmpdir) == 0, "files left behind");
}

static void test_corrupt(void) {
    zero_ctx *z = NULL;
    zero_module m;
    zero_param w;
    zero_act a[NS];
    static unsigned char buf[20000];
    zero_result r;
    char path[1024] = "";
    DIR *dir;
    struct dirent *e;
    r = small_ctx(&z, ZERO_OFFLOAD_NVME, 24576, &m, &w, a);     /* one staging buffer */
    if (!CHECK(r == ZERO_OK, "build: %s", zero_last_error(z))) { zero_destroy(z); return; }
    memset(buf, 5, sizeof buf);
    CHECK(zero_act_put(z, a[0], buf) == ZERO_OK && zero_act_put(z, a[1], buf) == ZERO_OK, "puts: %s", zero_last_error(z));
    if ((dir = opendir(tmpdir)) != NULL) {      /* slot 0 is only in its file now: flip its first byte */
        while ((e = readdir(dir)) != NULL)
            if (strncmp(e->d_name, "zero_acts", 9) == 0) snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        closedir(dir);
    }
    if (CHECK(path[0], "no activation file")) {
        int fd = open(path, O_RDWR);
        unsigned char x = 0xa5;
        CHECK(fd >= 0 && pwrite(fd, &x, 1, 0) == 1 && fsync(fd) == 0, "corrupting %s", path);
        if (fd >= 0) close(fd);
    }
    CHECK(zero_act_get(z, a[1], buf) == ZERO_OK, "get 1: %s", zero_last_error(z));
    r = zero_act_get(z, a[0], buf);
    CHECK(r == ZERO_ERR_CORRUPT && strstr(zero_last_error(z), "block0.in") && strstr(zero_last_error(z), "checksum"),
          "corrupt: %s %s", zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    test_init();
    snprintf(tmpdir, sizeof tmpdir, "%s/zero_stash_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { printf("FAIL setup: mkdtemp: %s\n", strerror(errno)); return 1; }
    roundtrip(ZERO_OFFLOAD_NONE, ZERO_DEVICE_CPU, 1);
    roundtrip(ZERO_OFFLOAD_HOST, ZERO_DEVICE_CPU, 2);
    roundtrip(ZERO_OFFLOAD_NONE, ZERO_DEVICE_EMU, 1);
#ifdef ZERO_CUDA        /* make build/mock/test_stash: the CUDA device on the CUDA test double */
    roundtrip(ZERO_OFFLOAD_NONE, ZERO_DEVICE_CUDA, 1);
    roundtrip(ZERO_OFFLOAD_HOST, ZERO_DEVICE_CUDA, 1);
    roundtrip(ZERO_OFFLOAD_NVME, ZERO_DEVICE_CUDA, 1);
#endif
    TEST_RUN(test_misuse);
    for (int k = 0; k < 2; k++) {
        engine = k ? "uring" : "threads";
        setenv("ZERO_IO", engine, 1);
        roundtrip(ZERO_OFFLOAD_NVME, ZERO_DEVICE_CPU, 1);
        roundtrip(ZERO_OFFLOAD_NVME, ZERO_DEVICE_CPU, 2);
        roundtrip(ZERO_OFFLOAD_NVME, ZERO_DEVICE_EMU, 1);
        test_begin("order_changed_%s", engine); test_order_changed(); test_end();
        test_begin("disk_full_at_put_%s", engine); test_disk_full_at_put(); test_end();
    }
    TEST_RUN(test_disk_full_at_build);
    TEST_RUN(test_corrupt);
    rmdir(tmpdir);
    return test_summary();
}
