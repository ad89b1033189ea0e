/* tests/cuda_mock/selftest.c - the CUDA test double's own checks (build/mock/cuda_mock_selftest,
   run by tests/test_cuda_mock.sh): the misuse it must refuse (and report on stderr) the way a
   GPU would, and the semantics zero.h relies on (pointer attributes, cuBLAS's beta == 0);
   cudaEventElapsedTime's rules in both modes; with ZERO_CUDA_MOCK_ASYNC=1 the asynchronous
   mode's: not-ready queries and the last error, events, the legacy stream's ordering,
   staged pageable copies. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_KERNELS
#include "../../zero.h"
#include "../test.h"
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void memory(void) {
    void *d = NULL, *h = NULL;
    char host[64];
    struct cudaPointerAttributes a;
    CHECK(cudaMalloc(&d, 64) == cudaSuccess && d, "cudaMalloc");
    CHECK(cudaHostAlloc(&h, 64, cudaHostAllocDefault) == cudaSuccess && h, "cudaHostAlloc");
    CHECK(cudaPointerGetAttributes(&a, (char *)d + 10) == cudaSuccess && a.type == cudaMemoryTypeDevice, "device attr");
    CHECK(cudaPointerGetAttributes(&a, h) == cudaSuccess && a.type == cudaMemoryTypeHost, "pinned attr");
    CHECK(cudaPointerGetAttributes(&a, host) == cudaSuccess && a.type == cudaMemoryTypeUnregistered, "host attr");
    CHECK(cudaMemcpy(d, host, 64, cudaMemcpyHostToDevice) == cudaSuccess, "H2D");
    CHECK(cudaMemcpy(host, d, 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "H2D into host memory accepted");
    CHECK(cudaMemcpy(d, host, 65, cudaMemcpyDefault) == cudaErrorInvalidValue, "a copy past the allocation accepted");
    CHECK(cudaMemset((char *)d + 60, 0, 8) == cudaErrorInvalidValue, "a memset past the allocation accepted");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess, "cudaGetLastError");
    CHECK(cudaFree(h) == cudaErrorInvalidValue, "cudaFree of pinned memory accepted");
    CHECK(cudaFreeHost(d) == cudaErrorInvalidValue, "cudaFreeHost of device memory accepted");
    CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree of a stack address accepted");
    CHECK(cudaFree(d) == cudaSuccess && cudaFreeHost(h) == cudaSuccess, "frees");
    CHECK(cudaFree(d) == cudaErrorInvalidValue, "a double cudaFree accepted");
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)");
    (void)cudaGetLastError();
}

static void streams(void) {
    cudaStream_t s;
    cudaEvent_t e;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess, "event");
    CHECK(cudaEventRecord(e, s) == cudaSuccess && cudaEventSynchronize(e) == cudaSuccess, "record");
    CHECK(cudaEventDestroy(e) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess, "destroy");
    (void)cudaGetLastError();
}

/* cudaEventElapsedTime: the host time between the two records' markers; a bad event, one
   never recorded or created with cudaEventDisableTiming is cudaErrorInvalidResourceHandle;
   NULL ms is cudaErrorInvalidValue; a record not run yet is cudaErrorNotReady (async mode:
   a record queued behind held work) */
static void CUDART_CB hold(void *user);
static int async_on(void);
static void elapsed(void) {
    cudaEvent_t a = NULL, b = NULL, never = NULL, untimed = NULL, dead = NULL;
    cudaStream_t s = NULL;
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    float ms = -1.0f;
    int i;
    CHECK(cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess && cudaEventCreate(&never) == cudaSuccess &&
          cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess && cudaEventCreate(&dead) == cudaSuccess &&
          cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "create");
    CHECK(cudaEventRecord(a, NULL) == cudaSuccess && cudaEventSynchronize(a) == cudaSuccess, "record a");
    nanosleep(&ts, NULL);                       /* at least 20 ms between the two records' markers */
    CHECK(cudaEventRecord(b, NULL) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess, "record b");
    CHECK(cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms >= 19.0f && ms < 5000.0f, "elapsed a -> b: %g ms", (double)ms);
    CHECK(cudaEventElapsedTime(&ms, b, a) == cudaSuccess && ms <= -19.0f, "elapsed b -> a: %g ms (negative)", (double)ms);
    CHECK(cudaEventElapsedTime(NULL, a, b) == cudaErrorInvalidValue, "NULL ms accepted");
    CHECK(cudaEventRecord(untimed, NULL) == cudaSuccess && cudaEventSynchronize(untimed) == cudaSuccess, "record untimed");
    CHECK(cudaEventElapsedTime(&ms, a, untimed) == cudaErrorInvalidResourceHandle &&
          cudaEventElapsedTime(&ms, untimed, b) == cudaErrorInvalidResourceHandle, "a cudaEventDisableTiming event timed");
    CHECK(cudaEventElapsedTime(&ms, a, never) == cudaErrorInvalidResourceHandle &&
          cudaEventElapsedTime(&ms, never, b) == cudaErrorInvalidResourceHandle, "an event never recorded timed");
    CHECK(cudaEventRecord(dead, NULL) == cudaSuccess && cudaEventSynchronize(dead) == cudaSuccess &&
          cudaEventDestroy(dead) == cudaSuccess, "a destroyed event");
    CHECK(cudaEventElapsedTime(&ms, a, NULL) == cudaErrorInvalidResourceHandle, "a NULL event timed");
    CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle && cudaGetLastError() == cudaSuccess,
          "an error is the last error");
    /* recorded again many times, destroyed with its last record queued: no leak or crash (ASan, TSan) */
    for (i = 0; i < 100; i++) CHECK(cudaEventRecord(never, s) == cudaSuccess, "record %d", i);
    if (async_on()) {                           /* not ready: b's record queued behind 30 ms of work */
        CHECK(cudaLaunchHostFunc(s, hold, NULL) == cudaSuccess && cudaEventRecord(b, s) == cudaSuccess, "queue");
        CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorNotReady && cudaEventElapsedTime(&ms, b, a) == cudaErrorNotReady,
              "an event whose record has not run timed");
        CHECK(cudaGetLastError() == cudaErrorNotReady, "not-ready is the last error, as cudaEventQuery's");
        CHECK(cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms >= 49.0f,
              "after cudaEventSynchronize: %g ms", (double)ms);
        CHECK(cudaLaunchHostFunc(s, hold, NULL) == cudaSuccess && cudaEventRecord(never, s) == cudaSuccess, "queue");
    }
    CHECK(cudaEventDestroy(never) == cudaSuccess, "destroy an event with records queued");
    cudaStreamSynchronize(s);
    cudaEventDestroy(a); cudaEventDestroy(b); cudaEventDestroy(untimed);
    cudaStreamDestroy(s);
    (void)cudaGetLastError();
}

/* a kernel's fault is the launch's error (synchronous mode) or the next sync's, sticky
   (asynchronous mode, as on a GPU: so this runs last, and there the second fault finds the
   first one's error; the synchronous mode checks each) */
static int faults(int launch_rc, cudaError_t want) {
    cudaError_t se = cudaDeviceSynchronize();
    return launch_rc == (int)want || se == want;
}
static void kernels(void) {
    float host[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, *d = NULL;
    CHECK(cudaMalloc((void **)&d, sizeof host) == cudaSuccess, "cudaMalloc");
    CHECK(zero__k_gelu_fwd(d, d, -1, NULL) == (int)cudaErrorInvalidValue, "n < 0 accepted");
    CHECK(zero__k_gelu_fwd(NULL, NULL, 0, NULL) == 0, "n == 0 is a no-op");
    CHECK(faults(zero__k_gelu_fwd(d, host, 8, NULL), cudaErrorIllegalAddress), "a kernel read host memory");
    (void)cudaGetLastError();
    CHECK(faults(zero__k_gelu_fwd(d, d, 9, NULL), cudaErrorIllegalAddress), "a kernel wrote past an allocation");
    cudaFree(d);
    (void)cudaGetLastError();
}

/* C = A B (2x2, column-major) with beta 0 over a C of NaNs: cuBLAS does not read C */
static void gemm(void) {
    float hA[4] = { 1, 2, 3, 4 }, hB[4] = { 5, 6, 7, 8 }, hC[4], nan = zero__bits_f32(0x7fc00000u);
    float *A, *B, *C, one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    int i;
    cudaMalloc((void **)&A, 16); cudaMalloc((void **)&B, 16); cudaMalloc((void **)&C, 16);
    cudaMemcpy(A, hA, 16, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hB, 16, cudaMemcpyHostToDevice);
    for (i = 0; i < 4; i++) hC[i] = nan;
    cudaMemcpy(C, hC, 16, cudaMemcpyHostToDevice);
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, 2, B, 2, &zero, C, 2) == CUBLAS_STATUS_SUCCESS, "sgemm");
    cudaMemcpy(hC, C, 16, cudaMemcpyDeviceToHost);
    /* [1 3; 2 4] [5 7; 6 8] = [23 31; 34 46] */
    CHECK(hC[0] == 23 && hC[1] == 34 && hC[2] == 31 && hC[3] == 46, "sgemm: %g %g %g %g", hC[0], hC[1], hC[2], hC[3]);
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, 1, B, 2, &zero, C, 2) == CUBLAS_STATUS_INVALID_VALUE,
          "lda < m accepted");
    CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &one, hA, 2, B, 2, &zero, C, 2) == CUBLAS_STATUS_EXECUTION_FAILED,
          "a host A accepted");
    cublasDestroy(h);
    cudaFree(A); cudaFree(B); cudaFree(C);
    (void)cudaGetLastError();
}

/* ---- the asynchronous mode (ZERO_CUDA_MOCK_ASYNC=1) ---- */
static int async_on(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_ASYNC");
    return e && e[0] && strcmp(e, "0") != 0;
}
static void CUDART_CB hold(void *user) {         /* keeps a stream busy for 30 ms */
    struct timespec ts = { 0, 30 * 1000 * 1000 };
    (void)user;
    nanosleep(&ts, NULL);
}
static int all_ff(const void *p, size_t n) {
    const unsigned char *c = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) if (c[i] != 0xff) return 0;
    return 1;
}

/* cudaStreamQuery / cudaEventQuery: not ready while work is queued, left as the last error */
static void async_query(void) {
    cudaStream_t s = NULL;
    cudaEvent_t e = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess && cudaEventCreate(&e) == cudaSuccess, "create");
    CHECK(cudaLaunchHostFunc(s, hold, NULL) == cudaSuccess && cudaEventRecord(e, s) == cudaSuccess, "queue");
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "cudaStreamQuery of a busy stream is not cudaErrorNotReady");
    CHECK(cudaPeekAtLastError() == cudaErrorNotReady && cudaGetLastError() == cudaErrorNotReady &&
          cudaGetLastError() == cudaSuccess, "not-ready is left as the last error, and cleared by cudaGetLastError");
    CHECK(cudaEventQuery(e) == cudaErrorNotReady && cudaGetLastError() == cudaErrorNotReady, "cudaEventQuery");
    CHECK(cudaEventSynchronize(e) == cudaSuccess && cudaEventQuery(e) == cudaSuccess && cudaStreamQuery(s) == cudaSuccess,
          "done after cudaEventSynchronize");
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    (void)cudaGetLastError();
}

/* a stream waits for an event of another; without the wait it does not */
static void async_events(void) {
    float h[256], back[256], *a = NULL, *b = NULL;
    cudaStream_t s1 = NULL, s2 = NULL;
    cudaEvent_t e = NULL;
    int i;
    for (i = 0; i < 256; i++) h[i] = (float)i;
    CHECK(cudaMalloc((void **)&a, sizeof h) == cudaSuccess && cudaMalloc((void **)&b, sizeof h) == cudaSuccess, "malloc");
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess &&
          cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess && cudaEventCreate(&e) == cudaSuccess, "create");
    /* a <- h on s1 (held first), then b <- a on s2 after the event: b must be h */
    CHECK(cudaLaunchHostFunc(s1, hold, NULL) == cudaSuccess, "hold");
    CHECK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s1) == cudaSuccess, "H2D");
    CHECK(cudaEventRecord(e, s1) == cudaSuccess && cudaStreamWaitEvent(s2, e, 0) == cudaSuccess, "record, wait");
    CHECK(cudaMemcpyAsync(b, a, sizeof h, cudaMemcpyDeviceToDevice, s2) == cudaSuccess, "D2D");
    CHECK(cudaMemcpy(back, b, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
    CHECK(cudaStreamSynchronize(s2) == cudaSuccess, "sync");
    CHECK(cudaMemcpyAsync(back, b, sizeof back, cudaMemcpyDeviceToHost, s2) == cudaSuccess, "D2H into pageable");
    CHECK(memcmp(back, h, sizeof h) == 0, "cudaStreamWaitEvent was not honoured (or a D2H into pageable memory "
          "returned before it finished): %g %g", back[0], back[255]);
    /* without the wait: s2 runs at once and reads what a held before (all 0xff here) */
    CHECK(cudaMemset(a, 0xff, sizeof h) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "reset");
    CHECK(cudaLaunchHostFunc(s1, hold, NULL) == cudaSuccess, "hold");
    CHECK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s1) == cudaSuccess, "H2D");
    CHECK(cudaMemcpyAsync(back, a, sizeof h, cudaMemcpyDeviceToHost, s2) == cudaSuccess, "D2H");
    CHECK(all_ff(back, sizeof back), "an unordered stream saw another stream's later copy");
    cudaDeviceSynchronize();
    cudaEventDestroy(e);
    cudaStreamDestroy(s1); cudaStreamDestroy(s2);
    cudaFree(a); cudaFree(b);
    (void)cudaGetLastError();
}

/* the legacy default stream waits for blocking streams (and they for it), not for non-blocking ones */
static void async_legacy(void) {
    float h[64], back[64], *a = NULL;
    cudaStream_t blk = NULL, nb = NULL;
    int i;
    for (i = 0; i < 64; i++) h[i] = 1.0f + (float)i;
    CHECK(cudaMalloc((void **)&a, sizeof h) == cudaSuccess, "malloc");
    CHECK(cudaStreamCreate(&blk) == cudaSuccess && cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) == cudaSuccess,
          "streams");
    /* blocking: a memset on the legacy stream after a held copy on blk runs after it */
    CHECK(cudaLaunchHostFunc(blk, hold, NULL) == cudaSuccess, "hold");
    CHECK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, blk) == cudaSuccess, "H2D on blk");
    CHECK(cudaMemset(a, 0, sizeof h) == cudaSuccess, "memset on the legacy stream");
    CHECK(cudaMemcpy(back, a, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
    CHECK(back[0] == 0.0f && back[63] == 0.0f, "the legacy stream did not wait for a blocking stream: %g", back[0]);
    /* non-blocking: the same on nb lands after the legacy memset */
    CHECK(cudaLaunchHostFunc(nb, hold, NULL) == cudaSuccess, "hold");
    CHECK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, nb) == cudaSuccess, "H2D on nb");
    CHECK(cudaMemset(a, 0, sizeof h) == cudaSuccess, "memset on the legacy stream");
    CHECK(cudaStreamSynchronize(NULL) == cudaSuccess && cudaStreamSynchronize(nb) == cudaSuccess, "syncs");
    CHECK(cudaMemcpy(back, a, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
    CHECK(back[0] == 1.0f && back[63] == 64.0f, "the legacy stream waited for a non-blocking stream: %g", back[0]);
    cudaStreamDestroy(blk); cudaStreamDestroy(nb);
    cudaFree(a);
    (void)cudaGetLastError();
}

/* pageable sources are staged (reusable at return); pinned destinations are garbage until
   the copy ran */
static void async_copies(void) {
    float h[64], *pin = NULL, *a = NULL;
    cudaStream_t s = NULL;
    int i;
    for (i = 0; i < 64; i++) h[i] = 2.0f * (float)i;
    CHECK(cudaMalloc((void **)&a, sizeof h) == cudaSuccess && cudaMallocHost((void **)&pin, sizeof h) == cudaSuccess, "alloc");
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaLaunchHostFunc(s, hold, NULL) == cudaSuccess, "hold");
    CHECK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s) == cudaSuccess, "H2D from pageable");
    for (i = 0; i < 64; i++) h[i] = -1.0f;      /* reused at once: the copy took its snapshot */
    for (i = 0; i < 64; i++) pin[i] = 5.0f;
    CHECK(cudaMemcpyAsync(pin, a, sizeof h, cudaMemcpyDeviceToHost, s) == cudaSuccess, "D2H into pinned");
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "the D2H into pinned memory did not return before it ran");
    (void)cudaGetLastError();
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    CHECK(pin[0] == 0.0f && pin[63] == 126.0f, "a pageable source was not staged at issue: %g %g", pin[0], pin[63]);
    cudaStreamDestroy(s);
    cudaFree(a); cudaFreeHost(pin);
    (void)cudaGetLastError();
}

int main(void) {
    int n = -1;
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n != 1) {
        printf("FAIL selftest_device_count: %d devices\n", n);
        return 1;
    }
    TEST_RUN(memory);
    TEST_RUN(streams);
    TEST_RUN(elapsed);
    TEST_RUN(gemm);
    if (async_on()) {
        TEST_RUN(async_query);
        TEST_RUN(async_events);
        TEST_RUN(async_legacy);
        TEST_RUN(async_copies);
    }
    TEST_RUN(kernels);                   /* last: a fault is sticky in the asynchronous mode */
    if (!async_on()) {
        printf("SKIP async: the asynchronous mode's checks need ZERO_CUDA_MOCK_ASYNC=1\n");
    }
    return test_summary();
}
