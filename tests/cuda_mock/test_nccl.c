/* tests/cuda_mock/test_nccl.c - zero.h's NCCL communicator (>>comm, nccl) on the NCCL test
   double (tests/cuda_mock/nccl_mock.c) and the CUDA test double (build/mock/test_nccl, run by
   tests/test_cuda_mock.sh with ZERO_CUDA_MOCK_ASYNC=1 and 4 mock devices). The collectives
   against the local comm are tests/gpu/nccl.c's (build/mock/gpu_nccl, run beside it); here:
   - forked_rendezvous: zero_comm_from_env(&c, "nccl") in 3 forked processes with torchrun's
     variables: the TCP rendezvous hands rank 0's ncclUniqueId to the others and each one's
     non-blocking init completes only once all 3 joined that id (the double's join record
     is shared between processes); its data moves only between threads, so a collective
     there must fail with a message that says so (not hang, not pass);
   - stages_n<N>: stages 0-3 at worlds 1-4 through zero_run_nccl on the CUDA device, a few
     AdamW steps (bf16, clipping), bitwise equal to the CPU device on the local comm;
     with desc.reduce_mode = ZERO_REDUCE_NCCL (and SGD): equal to rounding, and NCCL's own
     ncclReduceScatter/ncclAllReduce ran;
   - reduce_mode_collectives: reduce-scatter and all-reduce, ZERO_REDUCE_NCCL against
     ZERO_REDUCE_EXACT, worlds 2-4, f32 and bf16: within the rounding of n additions;
   - bad_reduce_mode: zero_create refuses an out-of-range reduce_mode;
   - world1_busy_stream: at world 1 each collective polls cudaStreamQuery while the stream
     is busy; the not-ready result must not stay the thread's last error (issue #14 #1);
   - group_end_after_failed_send: an ncclSend that fails inside ncclGroupStart/End still
     closes the group (finding 3), and the peer is not left hanging;
   - device_mismatch: a communicator on GPU 1 and a context on GPU 0 are refused;
   - init_timeout: a rank whose peer never comes: ZERO_ERR_TIMEOUT within the timeout;
   - duplicate_gpu: two ranks on one GPU fail the init (ZERO_ERR_COMM, the double says why);
   - double_mismatch: the double itself reports mismatched calls (another count) with
     ncclInvalidUsage and a message on every rank instead of hanging;
   - peer_destroyed: a rank waiting for a peer that destroyed its communicator gets an error;
   - slow_init_peer_failed: a rank that polls its init only after its peers' call failed still
     completes its init, and meets the failure at its first call. */
#define _POSIX_C_SOURCE 200809L
#define TEST_SOCKETS
#include "../test.h"
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../fixture.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int nccl_mock_group_depth(void);
long nccl_mock_calls(const char *name);

/* ---- the TCP rendezvous across forked processes ---- */
static int fork_child(int rank, int size, int port) {
    char v[16];
    zero_comm *c = NULL;
    zero_result r;
    snprintf(v, sizeof v, "%d", rank); setenv("RANK", v, 1); setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", size); setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", port); setenv("MASTER_PORT", v, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("ZERO_RENDEZVOUS_TIMEOUT_MS", "20000", 1);
    r = zero_comm_from_env(&c, "nccl");
    if (r != ZERO_OK) {
        fprintf(stderr, "rank %d: zero_comm_from_env: %s: %s\n", rank, zero_result_str(r), zero_last_error(NULL));
        return 10;
    }
    if (zero_comm_rank(c) != rank || zero_comm_size(c) != size) {
        fprintf(stderr, "rank %d: the comm says rank %d of %d\n", rank, zero_comm_rank(c), zero_comm_size(c));
        return 11;
    }
    c->tag = -1;
    r = c->vt->barrier(c, 5000);
    if (r != ZERO_ERR_COMM || !strstr(c->err, "other processes")) {
        fprintf(stderr, "rank %d: a barrier across processes gave %s: %s\n", rank, zero_result_str(r), c->err);
        return 12;
    }
    zero_comm_destroy(c);
    return 0;
}
static void forked_rendezvous(void) {
    enum { N = 3 };
    pid_t pid[N];
    int i, port = test_free_port(), st;
    double t0 = test_now_ms();
    if (!CHECK(port > 0, "no free port")) return;
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < N; i++) {
        pid[i] = fork();
        if (pid[i] == 0) _exit(fork_child(i, N, port));
        CHECK(pid[i] > 0, "fork");
    }
    for (i = 0; i < N; i++) {
        if (pid[i] <= 0) continue;
        while (waitpid(pid[i], &st, WNOHANG) == 0) {
            if (test_now_ms() - t0 > 60000) {
                kill(pid[i], SIGKILL);
                waitpid(pid[i], &st, 0);
                CHECK(0, "rank %d hung", i);
                break;
            }
            zero__sleep_ms(10);
        }
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d exited %d (10: no comm, 11: wrong rank/size, 12: the "
              "cross-process collective did not fail clearly)", i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

/* ---- stages 0-3 at worlds 1-4 ---- */
#define NPAR 2
static const int64_t psz[NPAR] = { 9000, 300 };
typedef struct eng {
    zero_device_type device;
    int stage;
    zero_reduce_mode mode;
    zero_optim_type optim;
    float out[4][9300];
    int64_t n;
    char msg[512];
} eng;
static zero_result train(zero_comm *c, int rank, void *user) {
    eng *e = (eng *)user;
    float h[9000];
    unsigned char raw[9000 * 2];
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod;
    zero_param p[NPAR];
    zero_result r;
    int i, step;
    int64_t k;
    unsigned char *pins[NPAR] = { NULL, NULL }, **pin = NULL;   /* CUDA: pinned sources of the gradients */
    fx_desc(&d, c, e->stage, ZERO_BF16, e->optim, 1e-2);
    d.device = e->device;
    d.clip_norm = 0.5f;
    d.reduce_mode = e->mode;
    if ((r = zero_create(&z, &d)) != ZERO_OK || (r = fx_module(z, "m", 0, &mod)) != ZERO_OK ||
        (r = fx_param(z, mod, "a", psz[0], 0, 0, &p[0])) != ZERO_OK || (r = fx_param(z, mod, "b", psz[1], 0, 1, &p[1])) != ZERO_OK ||
        (r = zero_build(z)) != ZERO_OK)
        goto done;
    for (i = 0; i < NPAR; i++) {
        for (k = 0; k < psz[i]; k++) h[k] = (float)((k * 31 + i * 7) % 101 - 50) * 0.01f;
        if ((r = zero_param_set_f32(z, p[i], h)) != ZERO_OK) goto done;
    }
    if (e->device == ZERO_DEVICE_CUDA)
        for (i = 0, pin = pins; i < NPAR; i++)
            if (cudaMallocHost((void **)&pins[i], (size_t)psz[i] * 2) != cudaSuccess) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    for (step = 0; step < 3; step++) {
        /* (the last step's copies out of pin are done before pin is written again) */
        if (pin && cudaStreamSynchronize((cudaStream_t)d.cuda_stream) != cudaSuccess) { r = ZERO_ERR_DEVICE; goto done; }
        if ((r = zero_fetch(z, mod)) != ZERO_OK) goto done;
        for (i = 0; i < NPAR; i++) {
            /* each rank its own gradient, so that the sum matters */
            for (k = 0; k < psz[i]; k++) h[k] = (float)((k * 13 + step * 5 + i + rank * 11) % 37 - 18) * 0.003f;
            if ((r = zero_copy(z, raw, zero_param_grad(z, p[i]), psz[i] * 2)) != ZERO_OK) goto done;
            zero_add_f32(raw, ZERO_BF16, h, psz[i]);
            if (e->device == ZERO_DEVICE_CUDA && pin) {
                /* on the compute stream, not waited for, as a backward kernel would write it:
                   the reduction (comm stream) must be ordered after it (task_begin) */
                memcpy(pin[i], raw, (size_t)psz[i] * 2);
                if (cudaMemcpyAsync(zero_param_grad(z, p[i]), pin[i], (size_t)psz[i] * 2, cudaMemcpyHostToDevice,
                                    (cudaStream_t)d.cuda_stream) != cudaSuccess) { r = ZERO_ERR_DEVICE; goto done; }
            } else if ((r = zero_copy(z, zero_param_grad(z, p[i]), raw, psz[i] * 2)) != ZERO_OK) goto done;
        }
        if ((r = zero_release(z, mod)) != ZERO_OK || (r = zero_grads_ready(z, mod)) != ZERO_OK) goto done;
        if ((r = zero_step(z)) != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    if (rank == 0) e->n = zero_num_params(z);
    r = zero_gather_params_f32(z, e->out[rank]);
done:
    if (r != ZERO_OK) snprintf(e->msg, sizeof e->msg, "rank %d: %s", rank, zero_last_error(z));
    zero_destroy(z);
    for (i = 0; i < NPAR; i++) if (pins[i]) cudaFreeHost(pins[i]);
    return r;
}
static eng ref, got;
static void stages(int n) {
    int stage;
    test_begin("stages_n%d", n);
    for (stage = 0; stage <= 3; stage++) {
        zero_result r;
        long rs0 = nccl_mock_calls("ncclReduceScatter"), ar0 = nccl_mock_calls("ncclAllReduce");
        int64_t k, differ = 0;
        double worst = 0;
        memset(&ref, 0, sizeof ref);
        memset(&got, 0, sizeof got);
        ref.device = ZERO_DEVICE_CPU;
        got.device = ZERO_DEVICE_CUDA;
        ref.stage = got.stage = stage;
        ref.optim = got.optim = ZERO_OPTIM_ADAMW;
        r = zero_run_local(n, train, &ref);
        if (!CHECK(r == ZERO_OK, "stage %d: cpu: %s %s", stage, zero_result_str(r), ref.msg)) return;
        r = zero_run_nccl(n, train, &got);
        if (!CHECK(r == ZERO_OK, "stage %d: cuda over nccl: %s %s (%s)", stage, zero_result_str(r), got.msg,
                   zero_last_error(NULL)))
            return;
        CHECK(got.n == ref.n && ref.n == 9300 && memcmp(got.out, ref.out, sizeof(float) * 9300 * (size_t)n) == 0,
              "stage %d: 3 steps over the NCCL comm differ from the CPU device on the local comm", stage);
        CHECK(nccl_mock_calls("ncclReduceScatter") == rs0 && nccl_mock_calls("ncclAllReduce") == ar0,
              "stage %d: ZERO_REDUCE_EXACT called NCCL's reductions", stage);
        /* NCCL's own sums: the same to rounding (with SGD: AdamW turns a gradient that
           cancels to 0 in one order and not in the other into a step of lr) */
        memset(&ref, 0, sizeof ref);
        memset(&got, 0, sizeof got);
        ref.device = ZERO_DEVICE_CPU;
        got.device = ZERO_DEVICE_CUDA;
        ref.stage = got.stage = stage;
        ref.optim = got.optim = ZERO_OPTIM_SGD;
        got.mode = ZERO_REDUCE_NCCL;
        r = zero_run_local(n, train, &ref);
        if (!CHECK(r == ZERO_OK, "stage %d: cpu sgd: %s %s", stage, zero_result_str(r), ref.msg)) return;
        r = zero_run_nccl(n, train, &got);
        if (!CHECK(r == ZERO_OK, "stage %d: reduce_mode NCCL: %s %s", stage, zero_result_str(r), got.msg)) return;
        for (k = 0; k < ref.n; k++) {
            double dd = fabs((double)got.out[0][k] - (double)ref.out[0][k]);
            differ += dd != 0;
            if (dd > worst) worst = dd;
        }
        CHECK(worst <= 1e-4, "stage %d: reduce_mode NCCL: %lld params differ, by up to %g", stage, (long long)differ, worst);
        CHECK(n == 1 || nccl_mock_calls("ncclReduceScatter") + nccl_mock_calls("ncclAllReduce") > rs0 + ar0,
              "stage %d: ZERO_REDUCE_NCCL never called ncclReduceScatter or ncclAllReduce", stage);
        if (differ) fprintf(stderr, "  stages_n%d: stage %d, reduce_mode NCCL: %lld of %lld params differ (by <= %g)\n", n,
                            stage, (long long)differ, (long long)ref.n, worst);
    }
    test_end();
}

/* ---- the two reduce modes on one collective ---- */
#define RC 3000
typedef struct rjob { int dt, mode; float rs[4][RC], ar[4][4 * RC]; zero_result r[4]; char err[4][ZERO__MSG]; } rjob;
static float rval(int rank, int64_t i) { return (float)(((i * 7919 + rank * 104729) % 2001) - 1000) * 1e-3f * (float)(1 + i % 5); }
static zero_result rfn(zero_comm *c, int rank, void *user) {
    rjob *j = (rjob *)user;
    int n = c->size;
    size_t es = j->dt == ZERO_F32 ? 4 : 2;
    unsigned char *h = (unsigned char *)malloc((size_t)n * RC * 4);
    void *send = NULL, *recv = NULL;
    int64_t i;
    zero_result r = ZERO_ERR_OUT_OF_MEMORY;
    ((zero__nccl_comm *)c)->reduce_mode = j->mode;
    c->tag = -1;
    if (!h || cudaMalloc(&send, (size_t)n * RC * es) != cudaSuccess || cudaMalloc(&recv, RC * es) != cudaSuccess) goto done;
    for (i = 0; i < (int64_t)n * RC; i++) zero__st(h, i, j->dt, rval(rank, i));
    cudaMemcpy(send, h, (size_t)n * RC * es, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    if ((r = c->vt->reduce_scatter(c, send, j->dt, recv, j->dt, RC, 0, 20000)) != ZERO_OK) goto done;
    cudaMemcpy(h, recv, RC * es, cudaMemcpyDeviceToHost);
    for (i = 0; i < RC; i++) j->rs[rank][i] = zero__ld(h, i, j->dt);
    for (i = 0; i < (int64_t)n * RC; i++) zero__st(h, i, j->dt, rval(rank + 1, i));
    cudaMemcpy(send, h, (size_t)n * RC * es, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    if ((r = c->vt->all_reduce(c, send, j->dt, (int64_t)n * RC, 20000)) != ZERO_OK) goto done;
    cudaMemcpy(h, send, (size_t)n * RC * es, cudaMemcpyDeviceToHost);
    for (i = 0; i < (int64_t)n * RC; i++) j->ar[rank][i] = zero__ld(h, i, j->dt);
done:
    if (r != ZERO_OK) snprintf(j->err[rank], ZERO__MSG, "%s", c->err);
    j->r[rank] = r;
    cudaFree(send);
    cudaFree(recv);
    free(h);
    return r;
}
static rjob ja, jb;
static void reduce_mode_collectives(void) {
    int n, dt, k;
    for (n = 2; n <= 4; n++)
        for (dt = ZERO_F32; dt <= ZERO_BF16; dt++) {
            long rs0 = nccl_mock_calls("ncclReduceScatter"), ar0 = nccl_mock_calls("ncclAllReduce");
            double ulp = dt == ZERO_F32 ? 1.0 / (1 << 23) : 1.0 / (1 << 7);
            int64_t i, differ = 0;
            memset(&ja, 0, sizeof ja);
            memset(&jb, 0, sizeof jb);
            ja.dt = jb.dt = dt;
            jb.mode = ZERO_REDUCE_NCCL;
            if (!CHECK(zero_run_nccl(n, rfn, &ja) == ZERO_OK && zero_run_nccl(n, rfn, &jb) == ZERO_OK, "n %d dt %d: %s %s",
                       n, dt, ja.err[0], jb.err[0]))
                return;
            CHECK(nccl_mock_calls("ncclReduceScatter") == rs0 + n && nccl_mock_calls("ncclAllReduce") == ar0 + n,
                  "n %d: ZERO_REDUCE_NCCL: %ld ncclReduceScatter and %ld ncclAllReduce calls, want %d each", n,
                  nccl_mock_calls("ncclReduceScatter") - rs0, nccl_mock_calls("ncclAllReduce") - ar0, n);
            for (k = 0; k < n; k++) {
                for (i = 0; i < RC; i++) {
                    double a = ja.rs[k][i], b = jb.rs[k][i], mag = 0;
                    int q;
                    for (q = 0; q < n; q++) mag += fabs(rval(q, (int64_t)k * RC + i));
                    differ += a != b;
                    if (!CHECK(fabs(a - b) <= 2.0 * n * ulp * mag + 1e-30, "n %d dt %d rank %d: reduce_scatter[%lld] %g "
                               "exact vs %g NCCL", n, dt, k, (long long)i, a, b))
                        return;
                }
                for (i = 0; i < (int64_t)n * RC; i++) {
                    double a = ja.ar[k][i], b = jb.ar[k][i], mag = 0;
                    int q;
                    for (q = 0; q < n; q++) mag += fabs(rval(q + 1, i));
                    differ += a != b;
                    if (!CHECK(fabs(a - b) <= 2.0 * n * ulp * mag + 1e-30, "n %d dt %d rank %d: all_reduce[%lld] %g "
                               "exact vs %g NCCL", n, dt, k, (long long)i, a, b))
                        return;
                    CHECK(k == 0 || jb.ar[k][i] == jb.ar[0][i], "n %d: NCCL's all_reduce differs between ranks", n);
                }
            }
            if (dt == ZERO_BF16 && n >= 3)
                CHECK(differ > 0, "n %d bf16: NCCL's ring order never rounded differently (the double sums like zero.h?)", n);
        }
}

static void bad_reduce_mode(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_result r;
    fx_desc(&d, NULL, 0, ZERO_F32, ZERO_OPTIM_ADAMW, 1e-2);
    d.reduce_mode = (zero_reduce_mode)7;
    r = zero_create(&z, &d);
    CHECK(r == ZERO_ERR_INVALID_ARG && z == NULL && strstr(zero_last_error(NULL), "reduce_mode"), "%s: %s",
          zero_result_str(r), zero_last_error(NULL));
}

/* ---- from issue #14's findings ---- */
static void CUDART_CB st_sleep(void *user) {
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    (void)user;
    nanosleep(&ts, NULL);
}
#define COUNT 4096
static zero_result busy(zero_comm *c, int rank, void *user) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    float h[COUNT], back[COUNT];
    float *send = NULL, *recv = NULL;
    zero_result r = ZERO_OK;
    int i, k;
    (void)rank; (void)user;
    c->tag = -1;
    for (i = 0; i < COUNT; i++) h[i] = (float)(i % 97) * 0.25f - 3.0f;
    if (!CHECK(cudaMalloc((void **)&send, sizeof h) == cudaSuccess && cudaMalloc((void **)&recv, sizeof h) == cudaSuccess &&
               cudaMemcpy(send, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
               "device buffers")) {
        r = ZERO_ERR_DEVICE;
        goto done;
    }
    for (k = 0; k < 3 && r == ZERO_OK; k++) {
        if (!CHECK(cudaLaunchHostFunc(zero__nccl_stream(m), st_sleep, NULL) == cudaSuccess, "cudaLaunchHostFunc")) break;
        r = c->vt->reduce_scatter(c, send, ZERO_F32, recv, ZERO_F32, COUNT, k > 0, 20000);
        if (!CHECK(r == ZERO_OK, "reduce_scatter #%d at world 1: %s: %s", k + 1, zero_result_str(r), c->err)) break;
        CHECK(cudaGetLastError() == cudaSuccess, "reduce_scatter #%d left an error as the last one", k + 1);
        CHECK(cudaMemcpy(back, recv, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
        for (i = 0; i < COUNT; i++)
            if (back[i] != h[i] * (float)(k + 1)) {
                CHECK(0, "reduce_scatter #%d: element %d is %g, want %g", k + 1, i, back[i], h[i] * (float)(k + 1));
                break;
            }
    }
    if (r == ZERO_OK) {
        double d[3] = { 1.5, -2.0, 3.25 };
        if (!CHECK(cudaLaunchHostFunc(zero__nccl_stream(m), st_sleep, NULL) == cudaSuccess, "cudaLaunchHostFunc")) goto done;
        r = c->vt->all_reduce(c, d, ZERO__F64, 3, 20000);
        CHECK(r == ZERO_OK && d[0] == 1.5 && d[1] == -2.0 && d[2] == 3.25, "all_reduce f64: %s: %s", zero_result_str(r), c->err);
    }
done:
    cudaFree(send);
    cudaFree(recv);
    return r;
}
static void world1_busy_stream(void) {
    zero_result r = zero_run_nccl(1, busy, NULL);
    CHECK(r == ZERO_OK, "zero_run_nccl(1): %s: %s", zero_result_str(r), zero_last_error(NULL));
}

typedef struct gjob { zero_result r[2]; char err[2][ZERO__MSG]; int depth[2]; } gjob;
static zero_result gfn(zero_comm *c, int rank, void *user) {
    gjob *g = (gjob *)user;
    float *send = NULL, *recv = NULL;
    c->tag = -1;
    cudaMalloc((void **)&send, 2 * 64 * 4);
    cudaMalloc((void **)&recv, 64 * 4);
    cudaMemset(send, 0, 2 * 64 * 4);
    cudaDeviceSynchronize();
    c->vt->barrier(c, 20000);
    g->r[rank] = c->vt->reduce_scatter(c, send, ZERO_F32, recv, ZERO_F32, 64, 0, 2000);
    snprintf(g->err[rank], ZERO__MSG, "%s", c->err);
    g->depth[rank] = nccl_mock_group_depth();
    cudaFree(send);
    cudaFree(recv);
    (void)cudaGetLastError();
    return ZERO_OK;
}
static void group_end_after_failed_send(void) {
    static gjob g;
    zero_result r;
    memset(&g, 0, sizeof g);
    /* armed before the ranks start: setenv in one rank's thread raced with the double's
       getenv in the other's (TSan); the header exchanges before the reduce-scatter are
       all-gathers, so its grouped sends are still the first ncclSend calls */
    setenv("ZERO_NCCL_MOCK_FAIL", "ncclSend:1", 1);
    r = zero_run_nccl(2, gfn, &g);
    unsetenv("ZERO_NCCL_MOCK_FAIL");
    CHECK(r == ZERO_OK, "zero_run_nccl: %s", zero_result_str(r));
    /* one of the two ranks' sends failed (the first to call): that rank reports ncclSend */
    CHECK((g.r[0] == ZERO_ERR_COMM && strstr(g.err[0], "ncclSend")) || (g.r[1] == ZERO_ERR_COMM && strstr(g.err[1], "ncclSend")),
          "a failed ncclSend: rank 0 %s: %s; rank 1 %s: %s", zero_result_str(g.r[0]), g.err[0], zero_result_str(g.r[1]),
          g.err[1]);
    CHECK(g.r[0] != ZERO_OK && g.r[1] != ZERO_OK, "the other rank's reduce_scatter passed: %s %s", zero_result_str(g.r[0]),
          zero_result_str(g.r[1]));
    CHECK(g.depth[0] == 0 && g.depth[1] == 0, "ncclGroupStart was not matched by ncclGroupEnd after a failed ncclSend "
          "(depth %d %d)", g.depth[0], g.depth[1]);
}

static void device_mismatch(void) {
    zero_comm *c = NULL;
    zero_ctx *z = NULL;
    zero_desc d;
    zero_module mod;
    zero_param p;
    ncclUniqueId id;
    zero_result r;
    const char *msg;
    ncclGetUniqueId(&id);
    if (!CHECK(zero__nccl_create(&c, 0, 1, 1, &id, 20000) == ZERO_OK, "create on GPU 1: %s", zero_last_error(NULL))) return;
    cudaSetDevice(0);
    fx_desc(&d, c, 1, ZERO_F32, ZERO_OPTIM_ADAMW, 1e-2);
    d.device = ZERO_DEVICE_CUDA;
    r = zero_create(&z, &d);
    if (r == ZERO_OK && (r = fx_module(z, "m", 0, &mod)) == ZERO_OK && (r = fx_param(z, mod, "p", 64, 0, 0, &p)) == ZERO_OK)
        r = zero_build(z);
    msg = zero_last_error(z);
    CHECK(z == NULL && r == ZERO_ERR_INVALID_ARG, "zero_create should refuse it: %s", zero_result_str(r));
    CHECK(r == ZERO_OK || (strstr(msg, "GPU 1") && strstr(msg, "GPU 0")), "message: %s", msg);
    zero_destroy(z);
    zero_comm_destroy(c);
    cudaSetDevice(0);
    (void)cudaGetLastError();
}

static void init_timeout(void) {
    zero_comm *c = NULL;
    ncclUniqueId id;
    double t0 = test_now_ms();
    zero_result r;
    ncclGetUniqueId(&id);
    r = zero__nccl_create(&c, 0, 2, 0, &id, 400);
    CHECK(r == ZERO_ERR_TIMEOUT && c == NULL && strstr(zero_last_error(NULL), "not every rank joined"), "%s: %s",
          zero_result_str(r), zero_last_error(NULL));
    CHECK(test_now_ms() - t0 < 3000, "took %.0f ms for a 400 ms timeout", test_now_ms() - t0);
}

typedef struct djob { ncclUniqueId id; zero_result r[2]; char err[2][ZERO__MSG]; } djob;
typedef struct darg { djob *j; int rank; } darg;
static void *dup_rank(void *p) {
    darg *a = (darg *)p;
    zero_comm *c = NULL;
    a->j->r[a->rank] = zero__nccl_create(&c, a->rank, 2, 0, &a->j->id, 5000);
    snprintf(a->j->err[a->rank], ZERO__MSG, "%s", zero_last_error(NULL));
    zero_comm_destroy(c);
    return NULL;
}
/* two ranks on GPU 0 */
static void duplicate_gpu(void) {
    static djob j;
    darg a[2] = { { &j, 0 }, { &j, 1 } };
    pthread_t t;
    memset(&j, 0, sizeof j);
    ncclGetUniqueId(&j.id);
    if (!CHECK(pthread_create(&t, NULL, dup_rank, &a[1]) == 0, "pthread_create")) return;
    dup_rank(&a[0]);
    pthread_join(t, NULL);
    CHECK(j.r[0] == ZERO_ERR_COMM && j.r[1] == ZERO_ERR_COMM && strstr(j.err[0], "duplicate GPU") &&
          strstr(j.err[1], "duplicate GPU"), "rank 0 %s '%s', rank 1 %s '%s'", zero_result_str(j.r[0]), j.err[0],
          zero_result_str(j.r[1]), j.err[1]);
}

/* A rank still polling its init when its peers' first call already failed (a peer destroyed
   its communicator): every rank had joined, so its init is done, and the failure meets it
   at its first call, as on NCCL. (Once a CI flake under TSan: the slow rank's init took the
   peers' error, so its call never ran.) One thread, three non-blocking inits. */
static ncclResult_t poll_nccl(ncclComm_t c, cudaStream_t s, ncclResult_t e) {
    double t0 = test_now_ms();
    while ((e == ncclSuccess || e == ncclInProgress) && test_now_ms() - t0 < 20000) {
        cudaError_t se = s ? cudaStreamQuery(s) : cudaSuccess;
        if (ncclCommGetAsyncError(c, &e) != ncclSuccess) return ncclInternalError;
        if (e == ncclSuccess && se == cudaSuccess) break;
        (void)cudaGetLastError();
        zero__sleep_ms(1);
    }
    return e;
}
static void slow_init_peer_failed(void) {
    ncclUniqueId id;
    ncclComm_t c[3] = { NULL, NULL, NULL };
    cudaStream_t s[2] = { NULL, NULL };
    float *b[2] = { NULL, NULL };
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t e1, e0, i0;
    int k;
    cfg.blocking = 0;
    ncclGetUniqueId(&id);
    for (k = 0; k < 3; k++) {
        cudaSetDevice(k);
        if (!CHECK(ncclCommInitRankConfig(&c[k], 3, id, k, &cfg) == ncclInProgress, "rank %d's init", k)) return;
        if (k < 2) {
            cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking);
            cudaMalloc((void **)&b[k], 3 * 16 * 4);
        }
    }
    CHECK(poll_nccl(c[1], NULL, ncclInProgress) == ncclSuccess && poll_nccl(c[2], NULL, ncclInProgress) == ncclSuccess,
          "ranks 1 and 2 initialized");
    ncclCommDestroy(c[2]);
    cudaSetDevice(1);
    e1 = poll_nccl(c[1], s[1], ncclAllGather(b[1], b[1], 16, ncclFloat32, c[1], s[1]));
    CHECK(e1 == ncclRemoteError, "rank 1's call after rank 2 left: %s", ncclGetErrorString(e1));
    i0 = poll_nccl(c[0], NULL, ncclInProgress);         /* rank 0 polls its init only now */
    CHECK(i0 == ncclSuccess, "rank 0's init: %s (%s)", ncclGetErrorString(i0), ncclGetLastError(c[0]));
    cudaSetDevice(0);
    e0 = poll_nccl(c[0], s[0], ncclAllGather(b[0], b[0], 16, ncclFloat32, c[0], s[0]));
    CHECK(e0 == ncclRemoteError && strstr(ncclGetLastError(c[0]), "rank 2 destroyed"), "rank 0's first call: %s (%s)",
          ncclGetErrorString(e0), ncclGetLastError(c[0]));
    for (k = 0; k < 2; k++) {
        cudaSetDevice(k);
        ncclCommAbort(c[k]);
        cudaStreamDestroy(s[k]);
        cudaFree(b[k]);
    }
    cudaSetDevice(0);
}

/* raw NCCL calls on the communicator: the double itself checks them */
typedef struct mjob { ncclResult_t e[3]; char msg[3][256]; double ms[3]; int destroy; } mjob;
static zero_result mfn(zero_comm *c, int rank, void *user) {
    mjob *j = (mjob *)user;
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    float *b = NULL;
    double t0;
    ncclResult_t e = ncclSuccess;
    cudaMalloc((void **)&b, 64 * 4 * 4);
    if (j->destroy && rank == 2) {
        /* leaves without calling: the others must not wait for it */
        ncclCommDestroy(m->comm);
        m->comm = NULL;
        m->broken = 1;
        cudaFree(b);
        return ZERO_ERR_COMM;
    }
    t0 = test_now_ms();
    /* (a call that fails at once, a peer gone already, is the error itself) */
    e = ncclAllGather(b, b, rank == 1 && !j->destroy ? 32 : 64, ncclFloat32, m->comm, zero__nccl_stream(m));
    while (e == ncclSuccess || e == ncclInProgress) {
        cudaError_t se;
        ncclResult_t ge;
        if (test_now_ms() - t0 > 20000) break;
        /* the stream first, then the error (as zero__nccl_wait does): an op that fails
           between the two reads still shows its error */
        se = cudaStreamQuery(zero__nccl_stream(m));
        if ((ge = ncclCommGetAsyncError(m->comm, &e)) != ncclSuccess) { e = ge; break; }
        if (e == ncclSuccess && se == cudaSuccess) break;
        (void)cudaGetLastError();
        zero__sleep_ms(1);
    }
    j->ms[rank] = test_now_ms() - t0;
    j->e[rank] = e;
    snprintf(j->msg[rank], sizeof j->msg[rank], "%s", ncclGetLastError(m->comm));
    m->broken = 1;      /* zero_comm_destroy aborts it */
    cudaFree(b);
    return ZERO_OK;
}
static void double_mismatch(void) {
    static mjob j;
    int k;
    memset(&j, 0, sizeof j);
    zero_run_nccl(3, mfn, &j);
    for (k = 0; k < 3; k++)
        CHECK(j.e[k] == ncclInvalidUsage && strstr(j.msg[k], "rank 1 called ncclAllGather(count=32") && j.ms[k] < 10000,
              "rank %d: %s after %.0f ms: %s", k, ncclGetErrorString(j.e[k]), j.ms[k], j.msg[k]);
}
static void peer_destroyed(void) {
    static mjob j;
    zero_result r;
    int k;
    memset(&j, 0, sizeof j);
    j.destroy = 1;
    r = zero_run_nccl(3, mfn, &j);
    CHECK(r == ZERO_ERR_COMM, "rank 2's result: %s", zero_result_str(r));
    for (k = 0; k < 2; k++)
        CHECK(j.e[k] == ncclRemoteError && strstr(j.msg[k], "rank 2 destroyed") && j.ms[k] < 10000, "rank %d: %s after "
              "%.0f ms: %s", k, ncclGetErrorString(j.e[k]), j.ms[k], j.msg[k]);
}

int main(void) {
    int n = 0;
    setenv("ZERO_CUDA_MOCK_ASYNC", "1", 0);     /* streams that are busy for real (unless set to 0) */
    setenv("ZERO_CUDA_MOCK_DEVICES", "4", 0);   /* worlds 1-4 through zero_run_nccl */
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 4) {
        printf("FAIL nccl_devices: the CUDA double has %d devices; worlds 1-4 need ZERO_CUDA_MOCK_DEVICES >= 4\n", n);
        return 1;
    }
    TEST_RUN(forked_rendezvous);      /* first: no threads yet to fork over */
    stages(1);
    stages(2);
    stages(3);
    stages(4);
    TEST_RUN(reduce_mode_collectives);
    TEST_RUN(bad_reduce_mode);
    TEST_RUN(world1_busy_stream);
    TEST_RUN(group_end_after_failed_send);
    TEST_RUN(device_mismatch);
    TEST_RUN(init_timeout);
    TEST_RUN(duplicate_gpu);
    TEST_RUN(double_mismatch);
    TEST_RUN(peer_destroyed);
    TEST_RUN(slow_init_peer_failed);
    return test_summary();
}
