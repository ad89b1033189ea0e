/* tests/gpu/nccl.c - the NCCL communicator (>>comm: nccl) against the local one: every
   collective, on the same inputs, must give the same bits through zero_run_nccl (device
   memory, one thread per GPU) as through zero_run_local (host memory), for f32, bf16
   and f16, with and without accumulation, mixed send/recv dtypes, and the engine's host
   pointer collectives (f64 all-reduce, byte all-gather, broadcast). A world of one comes
   from zero_comm_from_env(&c, "nccl") with torchrun's variables. With two or more GPUs:
   a mismatch (different tags; another count; a barrier against an all-gather, which
   leaves the others' data collective hanging: ZERO_ERR_MISMATCH named on every rank all
   the same) and a timeout (one rank skips a collective: the others must return
   ZERO_ERR_TIMEOUT within timeout_ms). bandwidth_n<N>: desc.reduce_mode's two
   ways of summing (ZERO_REDUCE_EXACT: send/recv + zero.h's kernel; ZERO_REDUCE_NCCL:
   ncclReduceScatter / ncclAllReduce), their all-reduce of all-ones exact in both, and
   their speed (lines <collective>_<mode>_GBps=: NCCL's bus bandwidth, the bytes a rank
   moves over the links per second; at world 1, the algorithm bandwidth). Built by make CUDA=1 as
   build/cuda/gpu_nccl; "SKIP gpu_nccl: no GPU" and exit 0 without a GPU (a CUDA error other
   than "no device" is a FAIL: tests/gpu/gpu.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>   // defines: setenv
#define TEST_SOCKETS
#include "../test.h"
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "gpu.h"

#define COUNT 1000            /* elements per rank's slice (not a multiple of anything nice) */
#define F64N 5
#define AGH 40                /* bytes per rank in the host all-gather */
#define TO 20000              /* timeout of the collectives that must succeed */

/* what one rank ends up with; the bytes compared between the two comms */
typedef struct result {
    unsigned char rs[COUNT * 4], rs_acc[COUNT * 4], ar[8 * COUNT * 4], ag[8 * COUNT * 4], bc[COUNT * 4];
    double f64[F64N];
    unsigned char agh[8 * AGH], bch[AGH];
    zero_result r;
    char err[2 * ZERO__MSG];
} result;

typedef struct job {
    int n, dt, gpu;
    result res[8];
} job;

static size_t esize(int dt) { return dt == ZERO_F32 ? 4 : 2; }

/* inputs with varied magnitudes, so a different summation order shows in the bits */
static float value(int rank, int64_t i, int salt) {
    uint32_t h = (uint32_t)(rank * 2654435761u) ^ (uint32_t)(i * 40503u) ^ (uint32_t)(salt * 97u);
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    return ((float)(h & 0xffff) / 65536.0f - 0.5f) * (float)(1 << (h >> 28));
}
static void fill(void *p, int dt, int64_t n, int rank, int salt) {
    for (int64_t i = 0; i < n; i++) zero__st(p, i, dt, value(rank, i, salt));
}

/* device or host buffer of bytes, filled from host src (may be NULL); waited for: the
   fill runs on the legacy default stream, which the communicator's non-blocking stream
   does not wait for (a pageable cudaMemcpy may return before its copy lands) */
static void *buf(int gpu, size_t bytes, const void *src) {
    void *p = NULL;
    if (gpu) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
        if ((src ? cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice) : cudaMemset(p, 0, bytes)) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess) {
            cudaFree(p);
            return NULL;
        }
    } else {
        p = calloc(1, bytes);
        if (p && src) memcpy(p, src, bytes);
    }
    return p;
}
static void back(int gpu, void *dst, const void *p, size_t bytes) {
    if (gpu) cudaMemcpy(dst, p, bytes, cudaMemcpyDeviceToHost);
    else memcpy(dst, p, bytes);
}
static void drop(int gpu, void *p) {
    if (gpu) cudaFree(p);
    else free(p);
}

#define STEP(call, what)                                                                         \
    do {                                                                                         \
        zero_result r_ = (call);                                                                 \
        if (r_ != ZERO_OK) {                                                                     \
            out->r = r_;                                                                         \
            snprintf(out->err, sizeof out->err, "%s: %s: %s", what, zero_result_str(r_), c->err); \
            goto done;                                                                           \
        }                                                                                        \
    } while (0)

static zero_result ops(zero_comm *c, int rank, void *user) {
    job *j = (job *)user;
    result *out = &j->res[rank];
    int n = j->n, dt = j->dt, gpu = j->gpu;
    size_t es = esize(dt), slice = COUNT * es;
    unsigned char *h = (unsigned char *)malloc(8 * COUNT * 4);
    void *send = NULL, *recv = NULL, *acc = NULL, *ar = NULL, *ag = NULL, *bc = NULL;
    memset(out, 0, sizeof *out);
    if (!h) return ZERO_ERR_OUT_OF_MEMORY;
    c->tag = -1;
    /* reduce-scatter, sdt = rdt = dt */
    fill(h, dt, (int64_t)n * COUNT, rank, 1);
    send = buf(gpu, slice * n, h);
    recv = buf(gpu, slice, NULL);
    STEP(c->vt->reduce_scatter(c, send, dt, recv, dt, COUNT, 0, TO), "reduce_scatter");
    back(gpu, out->rs, recv, slice);
    /* accumulating into f32 (the grad_accum_dtype case) */
    fill(h, ZERO_F32, COUNT, rank, 2);
    acc = buf(gpu, COUNT * 4, h);
    c->tag = 7;
    STEP(c->vt->reduce_scatter(c, send, dt, acc, ZERO_F32, COUNT, 1, TO), "reduce_scatter accumulate");
    back(gpu, out->rs_acc, acc, COUNT * 4);
    /* all-reduce in place of n * COUNT */
    fill(h, dt, (int64_t)n * COUNT, rank, 3);
    ar = buf(gpu, slice * n, h);
    STEP(c->vt->all_reduce(c, ar, dt, (int64_t)n * COUNT, TO), "all_reduce");
    back(gpu, out->ar, ar, slice * n);
    /* all-gather, in place (our slice of the output is the input) */
    fill(h, dt, (int64_t)n * COUNT, rank, 4);
    ag = buf(gpu, slice * n, h);
    STEP(c->vt->all_gather(c, (char *)ag + rank * slice, ag, (int64_t)slice, TO), "all_gather");
    back(gpu, out->ag, ag, slice * n);
    /* broadcast from the last rank */
    fill(h, dt, COUNT, rank, 5);
    bc = buf(gpu, slice, h);
    STEP(c->vt->broadcast(c, bc, (int64_t)slice, n - 1, TO), "broadcast");
    back(gpu, out->bc, bc, slice);
    /* the engine's host-memory collectives */
    for (int i = 0; i < F64N; i++) out->f64[i] = (double)value(rank, i, 6) * 1e-3 + (double)rank / 3.0;
    STEP(c->vt->all_reduce(c, out->f64, ZERO__F64, F64N, TO), "all_reduce f64 (host)");
    for (int i = 0; i < AGH; i++) out->agh[rank * AGH + i] = (unsigned char)(rank * 31 + i);
    STEP(c->vt->all_gather(c, out->agh + rank * AGH, out->agh, AGH, TO), "all_gather (host)");
    for (int i = 0; i < AGH; i++) out->bch[i] = (unsigned char)(rank * 7 + i);
    STEP(c->vt->broadcast(c, out->bch, AGH, 0, TO), "broadcast (host)");
    STEP(c->vt->barrier(c, TO), "barrier");
done:
    drop(gpu, send); drop(gpu, recv); drop(gpu, acc); drop(gpu, ar); drop(gpu, ag); drop(gpu, bc);
    free(h);
    return out->r;
}

static void compare(const job *a, const job *b) {
    for (int r = 0; r < a->n; r++) {
        const result *x = &a->res[r], *y = &b->res[r];
        size_t es = esize(a->dt), slice = COUNT * es;
        CHECK(x->r == ZERO_OK, "local rank %d: %s", r, x->err);
        CHECK(y->r == ZERO_OK, "nccl rank %d: %s", r, y->err);
        if (x->r != ZERO_OK || y->r != ZERO_OK) continue;
        CHECK(!memcmp(x->rs, y->rs, slice), "rank %d: reduce_scatter differs from the local comm", r);
        CHECK(!memcmp(x->rs_acc, y->rs_acc, COUNT * 4), "rank %d: accumulating reduce_scatter differs", r);
        CHECK(!memcmp(x->ar, y->ar, slice * a->n), "rank %d: all_reduce differs", r);
        CHECK(!memcmp(x->ag, y->ag, slice * a->n), "rank %d: all_gather differs", r);
        CHECK(!memcmp(x->bc, y->bc, slice), "rank %d: broadcast differs", r);
        CHECK(!memcmp(x->f64, y->f64, sizeof x->f64), "rank %d: f64 all_reduce (host) differs", r);
        CHECK(!memcmp(x->agh, y->agh, (size_t)AGH * a->n), "rank %d: host all_gather differs", r);
        CHECK(!memcmp(x->bch, y->bch, AGH), "rank %d: host broadcast differs", r);
    }
}

static const char *dt_name(int dt) { return dt == ZERO_F32 ? "f32" : dt == ZERO_BF16 ? "bf16" : "f16"; }

static job jl, jn;   /* big: not on the stack */

static void equal_to_local(int n, int dt) {
    test_begin("nccl_equals_local_n%d_%s", n, dt_name(dt));
    memset(&jl, 0, sizeof jl);
    memset(&jn, 0, sizeof jn);
    jl.n = jn.n = n; jl.dt = jn.dt = dt; jn.gpu = 1;
    zero_result rl = zero_run_local(n, ops, &jl);
    zero_result rn = zero_run_nccl(n, ops, &jn);
    CHECK(rl == ZERO_OK, "zero_run_local: %s", zero_result_str(rl));
    CHECK(rn == ZERO_OK, "zero_run_nccl: %s: %s", zero_result_str(rn), zero_last_error(NULL));
    compare(&jl, &jn);
    test_end();
}


static void from_env_world_of_one(void) {
    char port[16];
    zero_comm *c = NULL;
    snprintf(port, sizeof port, "%d", test_free_port());
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "1", 1); setenv("LOCAL_RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", port, 1);
    zero_result r = zero_comm_from_env(&c, "nccl");
    if (!CHECK(r == ZERO_OK, "zero_comm_from_env nccl: %s: %s", zero_result_str(r), zero_last_error(NULL))) return;
    CHECK(zero_comm_rank(c) == 0 && zero_comm_size(c) == 1, "rank %d of %d", zero_comm_rank(c), zero_comm_size(c));
    for (int dt = ZERO_F32; dt <= ZERO_F16; dt++) {
        memset(&jl, 0, sizeof jl);
        memset(&jn, 0, sizeof jn);
        jl.n = jn.n = 1; jl.dt = jn.dt = dt; jn.gpu = 1;
        CHECK(zero_run_local(1, ops, &jl) == ZERO_OK, "local");
        ops(c, 0, &jn);
        compare(&jl, &jn);
    }
    CHECK(c->scratch_bytes > 0, "scratch_bytes %lld", (long long)c->scratch_bytes);
    zero_comm_destroy(c);
    unsetenv("RANK"); unsetenv("WORLD_SIZE"); unsetenv("LOCAL_RANK");
    unsetenv("MASTER_ADDR"); unsetenv("MASTER_PORT");
}

typedef struct fault {
    zero_result r[8];
    char err[8][ZERO__MSG];
    int bad_rank[8];
    int64_t bad_tag[8][2];
    zero_result after[8];
    double ms[8];
    volatile int done0;
} fault;

static zero_result mismatch_fn(zero_comm *c, int rank, void *user) {
    fault *f = (fault *)user;
    float *d = NULL;
    cudaMalloc((void **)&d, 64 * sizeof(float) * (size_t)c->size);
    c->tag = rank == 1 ? 2 : 1;
    f->r[rank] = c->vt->all_gather(c, d, d, 64 * sizeof(float), TO);
    snprintf(f->err[rank], ZERO__MSG, "%s", c->err);
    f->bad_rank[rank] = c->bad_rank;
    f->bad_tag[rank][0] = c->bad_tag[0];
    f->bad_tag[rank][1] = c->bad_tag[1];
    f->after[rank] = c->vt->barrier(c, TO);
    cudaFree(d);
    return ZERO_OK;
}

static void mismatch(int n) {
    static fault f;
    memset(&f, 0, sizeof f);
    zero_result r = zero_run_nccl(n, mismatch_fn, &f);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s: %s", zero_result_str(r), zero_last_error(NULL));
    for (int k = 0; k < n; k++) {
        CHECK(f.r[k] == ZERO_ERR_MISMATCH && strstr(f.err[k], "rank 1 called all_gather"), "rank %d: %s '%s'", k,
              zero_result_str(f.r[k]), f.err[k]);
        CHECK(f.bad_rank[k] == 1 && f.bad_tag[k][0] == 1 && f.bad_tag[k][1] == 2, "rank %d: bad_rank %d tags %lld %lld",
              k, f.bad_rank[k], (long long)f.bad_tag[k][0], (long long)f.bad_tag[k][1]);
        CHECK(f.after[k] == ZERO_ERR_COMM, "rank %d: a call after the mismatch gave %s", k, zero_result_str(f.after[k]));
    }
}

/* the header is checked with the data's wait, not before the data moves: a mismatch that
   makes the data collective fail (another count: NCCL may fail or hang) or hang (rank 1
   calls a barrier, which has no data, while the others all-gather) must still be named as
   the mismatch on every rank, within the timeout */
static int mismatch_bykind;
static zero_result mismatch_data_fn(zero_comm *c, int rank, void *user) {
    fault *f = (fault *)user;
    float *d = NULL;
    int bykind = mismatch_bykind;
    double t0 = test_now_ms();
    cudaMalloc((void **)&d, 128 * sizeof(float) * (size_t)c->size);
    c->tag = 1;
    if (rank == 1 && bykind) f->r[rank] = c->vt->barrier(c, 1500);
    else f->r[rank] = c->vt->all_gather(c, d, d, (rank == 1 ? 128 : 64) * sizeof(float), 1500);
    f->ms[rank] = test_now_ms() - t0;
    snprintf(f->err[rank], ZERO__MSG, "%s", c->err);
    f->bad_rank[rank] = c->bad_rank;
    cudaFree(d);
    return ZERO_OK;
}
static void mismatch_data(int n, int bykind) {
    static fault f;
    memset(&f, 0, sizeof f);
    mismatch_bykind = bykind;
    zero_result r = zero_run_nccl(n, mismatch_data_fn, &f);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s: %s", zero_result_str(r), zero_last_error(NULL));
    for (int k = 0; k < n; k++) {
        CHECK(f.r[k] == ZERO_ERR_MISMATCH && strstr(f.err[k], bykind ? "rank 1 called barrier" : "rank 1 called all_gather(count=512"),
              "rank %d: %s '%s'", k, zero_result_str(f.r[k]), f.err[k]);
        CHECK(f.bad_rank[k] == 1, "rank %d: bad_rank %d", k, f.bad_rank[k]);
        CHECK(f.ms[k] < 6000, "rank %d returned after %.0f ms for a 1500 ms timeout", k, f.ms[k]);
    }
}

/* the last rank skips the collective; the others must time out, not hang */
static zero_result timeout_fn(zero_comm *c, int rank, void *user) {
    fault *f = (fault *)user;
    float *d = NULL;
    if (rank == c->size - 1) {
        while (!__atomic_load_n(&f->done0, __ATOMIC_ACQUIRE)) zero__sleep_ms(10);
        return ZERO_OK;
    }
    cudaMalloc((void **)&d, 1024 * sizeof(float) * (size_t)c->size);
    double t0 = test_now_ms();
    zero_result r = c->vt->all_gather(c, d, d, 1024 * sizeof(float), 1500);
    f->ms[rank] = test_now_ms() - t0;
    snprintf(f->err[rank], ZERO__MSG, "%s", c->err);
    __atomic_store_n(&f->r[rank], r, __ATOMIC_RELEASE);
    f->after[rank] = c->vt->barrier(c, TO);
    cudaFree(d);
    if (rank == 0) {
        /* wait for the others to fail too before letting the last rank go */
        for (int k = 1; k < c->size - 1; k++)
            while (!__atomic_load_n(&f->r[k], __ATOMIC_ACQUIRE)) zero__sleep_ms(10);
        __atomic_store_n(&f->done0, 1, __ATOMIC_RELEASE);
    }
    return ZERO_OK;
}

static void timeout(int n) {
    static fault f;
    memset(&f, 0, sizeof f);
    double t0 = test_now_ms();
    zero_result r = zero_run_nccl(n, timeout_fn, &f);
    CHECK(r == ZERO_OK, "zero_run_nccl: %s: %s", zero_result_str(r), zero_last_error(NULL));
    for (int k = 0; k < n - 1; k++) {
        CHECK(f.r[k] == ZERO_ERR_TIMEOUT && strstr(f.err[k], "all_gather") && strstr(f.err[k], "1500 ms"),
              "rank %d: %s '%s'", k, zero_result_str(f.r[k]), f.err[k]);
        CHECK(f.ms[k] >= 1400 && f.ms[k] < 6000, "rank %d returned after %.0f ms for a 1500 ms timeout", k, f.ms[k]);
        CHECK(f.after[k] == ZERO_ERR_COMM, "rank %d: a call after the timeout gave %s", k, zero_result_str(f.after[k]));
    }
    CHECK(test_now_ms() - t0 < 60000, "the whole run took %.0f ms", test_now_ms() - t0);
}

/* both reduce modes: all-ones sums exactly; then the timing (bus bandwidth) */
#define BW_ELEMS (4 << 20)    /* 16 MiB of f32 per all-reduce */
#define BW_ITERS 10
typedef struct bwjob { int mode; double ar_ms, rs_ms; zero_result r[8]; char err[8][ZERO__MSG]; int bad[8]; } bwjob;
static zero_result bw_fn(zero_comm *c, int rank, void *user) {
    bwjob *j = (bwjob *)user;
    int64_t n = BW_ELEMS - BW_ELEMS % c->size, i;
    float *d = NULL, *h = (float *)malloc((size_t)n * 4), *out = NULL;
    zero_result r = ZERO_ERR_OUT_OF_MEMORY;
    ((zero__nccl_comm *)c)->reduce_mode = j->mode;
    c->tag = -1;
    if (!h || cudaMalloc((void **)&d, (size_t)n * 4) != cudaSuccess ||
        cudaMalloc((void **)&out, (size_t)n * 4 / (size_t)c->size) != cudaSuccess)
        goto done;
    for (i = 0; i < n; i++) h[i] = 1.0f;
    cudaMemcpy(d, h, (size_t)n * 4, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    if ((r = c->vt->all_reduce(c, d, ZERO_F32, n, TO)) != ZERO_OK) goto done;
    cudaMemcpy(h, d, (size_t)n * 4, cudaMemcpyDeviceToHost);
    for (i = 0; i < n; i++)
        if (h[i] != (float)c->size) { j->bad[rank] = 1; break; }
    /* timed: the collective returns once its stream work is done */
    if ((r = c->vt->barrier(c, TO)) != ZERO_OK) goto done;
    double t0 = test_now_ms();
    for (int k = 0; k < BW_ITERS && r == ZERO_OK; k++) r = c->vt->all_reduce(c, d, ZERO_F32, n, TO);
    if (rank == 0) j->ar_ms = (test_now_ms() - t0) / BW_ITERS;
    if (r == ZERO_OK) r = c->vt->barrier(c, TO);
    t0 = test_now_ms();
    for (int k = 0; k < BW_ITERS && r == ZERO_OK; k++)
        r = c->vt->reduce_scatter(c, d, ZERO_F32, out, ZERO_F32, n / c->size, 0, TO);
    if (rank == 0) j->rs_ms = (test_now_ms() - t0) / BW_ITERS;
done:
    if (r != ZERO_OK) snprintf(j->err[rank], ZERO__MSG, "%s", c->err);
    j->r[rank] = r;
    cudaFree(d);
    cudaFree(out);
    free(h);
    return r;
}
static void bandwidth(int n) {
    static bwjob j[2];
    static const char *names[2] = { "exact", "nccl" };
    double bytes = (double)(BW_ELEMS - BW_ELEMS % n) * 4.0;
    /* NCCL's bus bandwidth: all-reduce 2(n-1)/n, reduce-scatter (n-1)/n of the bytes */
    double far = n > 1 ? 2.0 * (n - 1) / n : 1.0, frs = n > 1 ? (double)(n - 1) / n : 1.0;
    test_begin("bandwidth_n%d", n);
    for (int m = 0; m < 2; m++) {
        memset(&j[m], 0, sizeof j[m]);
        j[m].mode = m == 0 ? ZERO_REDUCE_EXACT : ZERO_REDUCE_NCCL;
        zero_result r = zero_run_nccl(n, bw_fn, &j[m]);
        if (!CHECK(r == ZERO_OK, "reduce_mode %s: %s: %s", names[m], zero_result_str(r), j[m].err[0])) continue;
        for (int k = 0; k < n; k++)
            CHECK(!j[m].bad[k], "reduce_mode %s: rank %d: an all-reduce of ones is not %d everywhere", names[m], k, n);
        printf("all_reduce_%s_GBps=%.1f\n", names[m], bytes * far / (j[m].ar_ms * 1e6));
        printf("reduce_scatter_%s_GBps=%.1f\n", names[m], bytes * frs / (j[m].rs_ms * 1e6));
        printf("  (world %d, %.0f MiB f32, %s bandwidth, reduce_mode %s: all_reduce %.3f ms, reduce_scatter %.3f ms)\n",
               n, bytes / (1 << 20), n > 1 ? "bus" : "algorithm", names[m], j[m].ar_ms, j[m].rs_ms);
    }
    test_end();
}

static void bad_world(int ngpu) {
    zero_result r = zero_run_nccl(ngpu + 1, ops, &jn);
    CHECK(r == ZERO_ERR_INVALID_SIZE && strstr(zero_last_error(NULL), "one rank per GPU"), "%s '%s'",
          zero_result_str(r), zero_last_error(NULL));
    r = zero_run_nccl(1, NULL, NULL);
    CHECK(r == ZERO_ERR_INVALID_ARG, "NULL fn: %s", zero_result_str(r));
}

int main(void) {
    int ngpu = 0, all = 0;
    if ((all = gpu_count("gpu_nccl")) <= 0) return all < 0;
    ngpu = all > 8 ? 8 : all;
    test_init();
    TEST_RUN(from_env_world_of_one);
    for (int dt = ZERO_F32; dt <= ZERO_F16; dt++)
        for (int n = 1; n <= ngpu; n++)
            if (n <= 4 || n == ngpu) equal_to_local(n, dt);
    bandwidth(ngpu);
    test_begin("bad_world");
    bad_world(all);
    test_end();
    if (ngpu >= 2) {
        test_begin("mismatch_n%d", ngpu);
        mismatch(ngpu);
        test_end();
        test_begin("mismatch_count_n%d", ngpu);
        mismatch_data(ngpu, 0);
        test_end();
        test_begin("mismatch_kind_n%d", ngpu);
        mismatch_data(ngpu, 1);
        test_end();
        test_begin("timeout_n%d", ngpu);
        timeout(ngpu);
        test_end();
    } else {
        fprintf(stderr, "(mismatch and timeout need 2 GPUs; this machine has 1)\n");
    }
    return test_summary();
}
