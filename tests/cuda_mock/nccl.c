/* tests/cuda_mock/nccl.c - zero.h's NCCL communicator (>>comm, nccl) over the CUDA test
   double (build/mock/cuda_mock_nccl, run by tests/test_cuda_mock.sh in the double's
   asynchronous mode: ZERO_CUDA_MOCK_ASYNC=1). NCCL itself does not run here: this file
   defines the few NCCL calls zero.h makes, as a stand-in for one process (they take the
   place of libnccl's, which the program still links): a communicator of any size whose
   all-gather copies this rank's piece into every rank's place (every rank "called the
   same"), a broadcast that keeps the buffer, ncclSend / ncclRecv that copy this rank's
   slice, and group depth counted. Enough to drive zero.h's host side of the NCCL comm
   (enter, wait, the reduce-scatter's sum) on a stream that is really asynchronous:
   - world1_collectives: at world 1 each collective polls cudaStreamQuery
     (zero__nccl_wait) while the stream is busy; the not-ready result must not be left as
     the thread's last error, or the next collective's zero__k_sum_into reports it
     ("device not ready", issue #14 finding 1); sums checked;
   - world1_engine: zero_run_nccl(1): a context on the NCCL comm, stage 2, some steps,
     bitwise equal to the CPU device on the local comm;
   - group_end_after_failed_send: an ncclSend that fails inside ncclGroupStart/End must
     still close the group (finding 3);
   - device_mismatch: a communicator on GPU 1 and a context on GPU 0 is refused with a
     message naming both (finding 3). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include "../fixture.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

/* ---- the NCCL stand-in ---- */
struct ncclComm { int rank, size, aborted; };
static int st_depth;                /* ncclGroupStart - ncclGroupEnd */
static int st_fail_send;            /* ncclSend fails while set */

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) { memset(id, 7, sizeof *id); return ncclSuccess; }
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    (void)id; (void)config;
    if (!(*comm = (ncclComm_t)calloc(1, sizeof **comm))) return ncclSystemError;
    (*comm)->rank = rank;
    (*comm)->size = nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e) {
    *e = comm && !comm->aborted ? ncclSuccess : ncclInvalidArgument;
    return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) { (void)comm; return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { free(comm); return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t comm) { free(comm); return ncclSuccess; }
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "an error (NCCL stand-in)"; }
const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return ""; }
static size_t st_size(ncclDataType_t t) { return t == ncclInt64 || t == ncclUint64 || t == ncclFloat64 ? 8 : t == ncclUint8 || t == ncclInt8 ? 1 : 4; }
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
    size_t bytes = count * st_size(t);
    int k;
    for (k = 0; k < comm->size; k++)
        if ((char *)recv + k * bytes != (const char *)send &&
            cudaMemcpyAsync((char *)recv + k * bytes, send, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
            return ncclUnhandledCudaError;
    return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    (void)root; (void)comm;
    if (send != recv && cudaMemcpyAsync(recv, send, count * st_size(t), cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return ncclUnhandledCudaError;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { st_depth++; return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { st_depth--; return ncclSuccess; }
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream) {
    (void)send; (void)count; (void)t; (void)peer; (void)comm; (void)stream;
    return st_fail_send ? ncclSystemError : ncclSuccess;
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream) {
    (void)recv; (void)count; (void)t; (void)peer; (void)comm; (void)stream;
    return ncclSuccess;
}

/* keeps a stream busy for a while, so that cudaStreamQuery says not ready */
static void CUDART_CB st_sleep(void *user) {
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    (void)user;
    nanosleep(&ts, NULL);
}

#define COUNT 4096
static zero_result collectives(zero_comm *c, int rank, void *user) {
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
        /* the comm's stream is busy when the collective waits for it: not ready, polled */
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
        if (r == ZERO_OK) {
            r = c->vt->all_reduce(c, send, ZERO_F32, COUNT, 20000);
            CHECK(r == ZERO_OK, "all_reduce f32 after an f64 one: %s: %s", zero_result_str(r), c->err);
        }
    }
done:
    cudaFree(send);
    cudaFree(recv);
    return r;
}
static void world1_collectives(void) {
    zero_result r = zero_run_nccl(1, collectives, NULL);
    CHECK(r == ZERO_OK, "zero_run_nccl(1): %s: %s", zero_result_str(r), zero_last_error(NULL));
}

/* a small model trained for a few steps; the params after, gathered */
#define NPAR 2
static const int64_t psz[NPAR] = { 20000, 300 };
typedef struct eng { zero_device_type device; float out[20300]; int64_t n; char msg[512]; } eng;
static zero_result train(zero_comm *c, int rank, void *user) {
    eng *e = (eng *)user;
    static float h[20000];
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod;
    zero_param p[NPAR];
    zero_result r;
    int i, step;
    int64_t k;
    (void)rank;
    fx_desc(&d, c, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 1e-2);
    d.device = e->device;
    if ((r = zero_create(&z, &d)) != ZERO_OK || (r = fx_module(z, "m", 0, &mod)) != ZERO_OK ||
        (r = fx_param(z, mod, "a", psz[0], 0, 0, &p[0])) != ZERO_OK || (r = fx_param(z, mod, "b", psz[1], 0, 1, &p[1])) != ZERO_OK ||
        (r = zero_build(z)) != ZERO_OK)
        goto done;
    for (i = 0; i < NPAR; i++) {
        for (k = 0; k < psz[i]; k++) h[k] = (float)((k * 31 + i * 7) % 101 - 50) * 0.01f;
        if ((r = zero_param_set_f32(z, p[i], h)) != ZERO_OK) goto done;
    }
    for (step = 0; step < 3; step++) {
        if ((r = zero_fetch(z, mod)) != ZERO_OK) goto done;
        for (i = 0; i < NPAR; i++) {
            static unsigned char raw[20000 * 2];
            for (k = 0; k < psz[i]; k++) h[k] = (float)((k * 13 + step * 5 + i) % 37 - 18) * 0.003f;
            if ((r = zero_copy(z, raw, zero_param_grad(z, p[i]), psz[i] * 2)) != ZERO_OK) goto done;
            zero_add_f32(raw, ZERO_BF16, h, psz[i]);
            if ((r = zero_copy(z, zero_param_grad(z, p[i]), raw, psz[i] * 2)) != ZERO_OK) goto done;
        }
        if ((r = zero_release(z, mod)) != ZERO_OK || (r = zero_grads_ready(z, mod)) != ZERO_OK) goto done;
        if ((r = zero_step(z)) != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    e->n = zero_num_params(z);
    r = zero_gather_params_f32(z, e->out);
done:
    if (r != ZERO_OK) snprintf(e->msg, sizeof e->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    return r;
}
static void world1_engine(void) {
    static eng ref, got;
    zero_result r;
    memset(&ref, 0, sizeof ref);
    memset(&got, 0, sizeof got);
    ref.device = ZERO_DEVICE_CPU;
    got.device = ZERO_DEVICE_CUDA;
    r = zero_run_local(1, train, &ref);
    if (!CHECK(r == ZERO_OK, "cpu: %s %s", zero_result_str(r), ref.msg)) return;
    r = zero_run_nccl(1, train, &got);
    if (!CHECK(r == ZERO_OK, "cuda over nccl: %s %s (%s)", zero_result_str(r), got.msg, zero_last_error(NULL))) return;
    CHECK(got.n == ref.n && memcmp(got.out, ref.out, sizeof(float) * (size_t)ref.n) == 0,
          "3 steps at stage 2 over the NCCL comm differ from the CPU device");
}

/* a rank-0 endpoint of a world of 2 (the other rank is the stand-in's) */
static void group_end_after_failed_send(void) {
    zero_comm *c = NULL;
    ncclUniqueId id;
    float *send = NULL, *recv = NULL;
    zero_result r;
    ncclGetUniqueId(&id);
    if (!CHECK(zero__nccl_create(&c, 0, 2, 0, &id, 20000) == ZERO_OK, "create: %s", zero_last_error(NULL))) return;
    c->tag = -1;
    CHECK(cudaMalloc((void **)&send, 2 * 64 * 4) == cudaSuccess && cudaMalloc((void **)&recv, 64 * 4) == cudaSuccess &&
          cudaMemset(send, 0, 2 * 64 * 4) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "buffers");
    st_depth = 0;
    st_fail_send = 1;
    r = c->vt->reduce_scatter(c, send, ZERO_F32, recv, ZERO_F32, 64, 0, 20000);
    st_fail_send = 0;
    CHECK(r == ZERO_ERR_COMM && strstr(c->err, "ncclSend"), "a failed ncclSend: %s: %s", zero_result_str(r), c->err);
    CHECK(st_depth == 0, "ncclGroupStart was not matched by ncclGroupEnd after a failed ncclSend (depth %d)", st_depth);
    zero_comm_destroy(c);
    cudaFree(send);
    cudaFree(recv);
    (void)cudaGetLastError();
}

/* the communicator's GPU must be the context's */
static void device_mismatch(void) {
    zero_comm *c = NULL;
    zero_ctx *z = NULL;
    zero_desc d;
    zero_module mod;
    zero_param p;
    ncclUniqueId id;
    zero_result r;
    const char *msg;
    setenv("ZERO_CUDA_MOCK_DEVICES", "2", 1);
    ncclGetUniqueId(&id);
    if (!CHECK(zero__nccl_create(&c, 0, 1, 1, &id, 20000) == ZERO_OK, "create on GPU 1: %s", zero_last_error(NULL)))
        goto out;
    cudaSetDevice(0);
    fx_desc(&d, c, 1, ZERO_F32, ZERO_OPTIM_ADAMW, 1e-2);
    d.device = ZERO_DEVICE_CUDA;
    r = zero_create(&z, &d);
    if (r == ZERO_OK && (r = fx_module(z, "m", 0, &mod)) == ZERO_OK && (r = fx_param(z, mod, "p", 64, 0, 0, &p)) == ZERO_OK)
        r = zero_build(z);
    msg = zero_last_error(z);
    CHECK(r != ZERO_OK, "a context on GPU 0 with an NCCL communicator on GPU 1 was accepted");
    CHECK(z == NULL && r == ZERO_ERR_INVALID_ARG, "zero_create itself should refuse it: %s", zero_result_str(r));
    CHECK(r == ZERO_OK || (strstr(msg, "GPU 1") && strstr(msg, "GPU 0")), "message: %s", msg);
    zero_destroy(z);
    zero_comm_destroy(c);
out:
    setenv("ZERO_CUDA_MOCK_DEVICES", "1", 1);
    cudaSetDevice(0);
    (void)cudaGetLastError();
}

int main(void) {
    int n = 0;
    setenv("ZERO_CUDA_MOCK_ASYNC", "1", 0);     /* streams that are busy for real (unless set to 0) */
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("FAIL nccl_device: cudaGetDeviceCount found no (mock) device\n");
        return 1;
    }
    TEST_RUN(world1_collectives);
    TEST_RUN(world1_engine);
    TEST_RUN(group_end_after_failed_send);
    TEST_RUN(device_mismatch);
    return test_summary();
}
