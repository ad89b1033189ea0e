/* tests/cuda_mock/selftest.c - the CUDA test double's own checks (build/mock/cuda_mock_selftest,
   run by tests/test_cuda_mock.sh): the misuse it must refuse (and report on stderr) the way a
   GPU would, and the semantics zero.h relies on (pointer attributes, cuBLAS's beta == 0). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_KERNELS
#include "../../zero.h"
#include "../test.h"
#include <cuda_runtime.h>
#include <cublas_v2.h>

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

static void kernels(void) {
    float host[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, *d = NULL;
    CHECK(cudaMalloc((void **)&d, sizeof host) == cudaSuccess, "cudaMalloc");
    CHECK(zero__k_gelu_fwd(d, host, 8, NULL) == (int)cudaErrorIllegalAddress, "a kernel read host memory");
    CHECK(zero__k_gelu_fwd(d, d, 9, NULL) == (int)cudaErrorIllegalAddress, "a kernel ran past an allocation");
    CHECK(zero__k_gelu_fwd(d, d, -1, NULL) == (int)cudaErrorInvalidValue, "n < 0 accepted");
    CHECK(zero__k_gelu_fwd(NULL, NULL, 0, NULL) == 0, "n == 0 is a no-op");
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

int main(void) {
    int n = -1;
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n != 1) {
        printf("FAIL selftest_device_count: %d devices\n", n);
        return 1;
    }
    TEST_RUN(memory);
    TEST_RUN(streams);
    TEST_RUN(kernels);
    TEST_RUN(gemm);
    return test_summary();
}
