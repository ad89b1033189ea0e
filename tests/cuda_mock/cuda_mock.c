/* tests/cuda_mock/cuda_mock.c - a test double of the CUDA runtime, cuBLAS and zero.h's kernel
   launchers (zero__k_*), so that zero.h's CUDA device (>>device: ops under ZERO_CUDA) runs on a
   machine without a GPU. `make build/mock/<name>` links it, instead of zero_kernels.o, libcudart
   and libcublas, into a ZERO_CUDA build of tests/<name>.c or examples/<name>.c (run by
   tests/test_cuda_mock.sh). It is never linked into anything outside build/mock/.

   What it models:
   - one device (ZERO_CUDA_MOCK_DEVICES=0 in the environment: none, for the NO_DEVICE path);
   - device memory is host memory (aligned, filled with 0xff bytes on cudaMalloc, so code that
     reads memory it never wrote sees NaNs), kept in a registry: cudaPointerGetAttributes tells
     device from pinned host from plain host memory; a free of an unknown pointer, a double free,
     cudaFree of pinned memory (or cudaFreeHost of device memory), a copy whose direction does not
     match its pointers or that runs past a device allocation, and a kernel or GEMM given memory
     that is not device (or pinned) memory are reported on stderr ("cuda_mock: ...") and fail
     with the error a GPU would give (cudaErrorInvalidValue / cudaErrorIllegalAddress);
   - streams and events are small objects checked on every use; everything executes at issue,
     so every stream is always idle (synchronous execution is one legal schedule);
   - cublasSgemm is a plain column-major loop, each dot product summed in order of k;
   - the zero__k_* launchers compute exactly what zero.h's kernel ABI documents, element by
     element through the shared ZERO_HD math (zero__ld / zero__st, zero__adamw_elem,
     zero__sgd_elem, zero__lanes_sum, zero__q8*, the GELU and cross-entropy formulas), so the
     CUDA device's results are bitwise the CPU device's; the cross-entropy sums a row in order,
     like the CPU (the real kernel sums in a tree, within a few ulps). */
#define _POSIX_C_SOURCE 200809L
#ifndef ZERO_CUDA
#define ZERO_CUDA
#endif
#define ZERO_KERNELS
#include "../../zero.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */
static __thread cudaError_t mock_last = cudaSuccess;

static cudaError_t mock_ret(cudaError_t e) {
    if (e != cudaSuccess) mock_last = e;
    return e;
}
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void mock_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda_mock: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    va_end(ap);
}

/* ZERO_CUDA_MOCK_FAIL=NAME:N (N >= 1): the Nth call of NAME (a CUDA, cuBLAS or zero__k_*
   function of this file) fails with the error it would give for that fault (out of memory,
   a launch or execution failure), for testing zero.h's error paths; N counts all threads */
static int mock_inject(const char *name) {
    static long calls;
    const char *e = getenv("ZERO_CUDA_MOCK_FAIL"), *colon;
    size_t len;
    if (!e || !(colon = strchr(e, ':'))) return 0;
    len = (size_t)(colon - e);
    if (strlen(name) != len || strncmp(e, name, len) != 0) return 0;
    if (__atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) != atol(colon + 1)) return 0;
    fprintf(stderr, "cuda_mock: ZERO_CUDA_MOCK_FAIL: %s fails (call %ld)\n", name, atol(colon + 1));
    return 1;
}

/* ---- the memory registry ---- */
enum { MOCK_DEV = 1, MOCK_PINNED = 2 };
typedef struct mock_alloc { char *p; size_t n; int kind; } mock_alloc;
static mock_alloc *mock_allocs;
static size_t mock_nallocs, mock_cap;
static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;

static int mock_register(void *p, size_t n, int kind) {
    int ok = 1;
    pthread_mutex_lock(&mock_mu);
    if (mock_nallocs == mock_cap) {
        size_t cap = mock_cap ? 2 * mock_cap : 256;
        mock_alloc *a = (mock_alloc *)realloc(mock_allocs, cap * sizeof *a);
        if (!a) ok = 0;
        else { mock_allocs = a; mock_cap = cap; }
    }
    if (ok) {
        mock_allocs[mock_nallocs].p = (char *)p;
        mock_allocs[mock_nallocs].n = n;
        mock_allocs[mock_nallocs].kind = kind;
        mock_nallocs++;
    }
    pthread_mutex_unlock(&mock_mu);
    return ok;
}
/* the kind of the allocation holding p (0: none); *start, *len: that allocation */
static int mock_find(const void *p, char **start, size_t *len) {
    size_t i;
    int kind = 0;
    pthread_mutex_lock(&mock_mu);
    for (i = 0; i < mock_nallocs; i++) {
        const mock_alloc *a = &mock_allocs[i];
        if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) {
            kind = a->kind;
            if (start) *start = a->p;
            if (len) *len = a->n;
            break;
        }
    }
    pthread_mutex_unlock(&mock_mu);
    return kind;
}
/* removes the allocation starting exactly at p if it has this kind; returns the kind found
   there (0: no allocation starts at p) */
static int mock_unregister(void *p, int kind) {
    size_t i;
    int found = 0;
    pthread_mutex_lock(&mock_mu);
    for (i = 0; i < mock_nallocs; i++)
        if (mock_allocs[i].p == (char *)p) {
            found = mock_allocs[i].kind;
            if (found == kind) mock_allocs[i] = mock_allocs[--mock_nallocs];
            break;
        }
    pthread_mutex_unlock(&mock_mu);
    return found;
}
static void *mock_memalign(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 256, n ? n : 1) != 0) return NULL;
    return p;
}
/* [p, p + n) must lie in one device allocation (pinned host memory too when pinned_ok; a
   kernel reads mapped pinned memory on a UVA system) */
static int mock_in_dev(const void *p, size_t n, int pinned_ok, const char *what) {
    char *s = NULL;
    size_t len = 0;
    int kind;
    if (n == 0) return 1;
    kind = mock_find(p, &s, &len);
    if (kind == 0 || (kind == MOCK_PINNED && !pinned_ok)) {
        mock_say("%s: %p (%llu bytes) is not device memory", what, p, (unsigned long long)n);
        return 0;
    }
    if ((size_t)((const char *)p - s) + n > len) {
        mock_say("%s: %p + %llu bytes runs past the end of its allocation", what, p, (unsigned long long)n);
        return 0;
    }
    return 1;
}

/* ---- devices ---- */
static int mock_devices(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_DEVICES");
    return e && e[0] ? atoi(e) : 1;
}
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return mock_ret(cudaErrorInvalidValue);
    *count = mock_devices();
    if (*count <= 0) { *count = 0; return mock_ret(cudaErrorNoDevice); }
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    if (!device) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    if (device != 0) return mock_ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

/* ---- streams and events ---- */
#define MOCK_STREAM_MAGIC 0x5354524dU
#define MOCK_EVENT_MAGIC 0x4556544dU
struct CUstream_st { unsigned magic; unsigned flags; };
struct CUevent_st { unsigned magic; unsigned flags; int recorded; };

/* NULL (the legacy default stream) and cudaStreamPerThread are always valid */
static int mock_stream_ok(cudaStream_t s, const char *what) {
    if (!s || s == cudaStreamPerThread || s == cudaStreamLegacy) return 1;
    if (s->magic != MOCK_STREAM_MAGIC) {
        mock_say("%s: %p is not a live stream", what, (const void *)s);
        return 0;
    }
    return 1;
}
static int mock_event_ok(cudaEvent_t e, const char *what) {
    if (!e || e->magic != MOCK_EVENT_MAGIC) {
        mock_say("%s: %p is not a live event", what, (const void *)e);
        return 0;
    }
    return 1;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    cudaStream_t s;
    if (mock_inject("cudaStreamCreateWithFlags")) return mock_ret(cudaErrorMemoryAllocation);
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    if (!(s = (cudaStream_t)malloc(sizeof *s))) return mock_ret(cudaErrorMemoryAllocation);
    s->magic = MOCK_STREAM_MAGIC;
    s->flags = flags;
    *pStream = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (!stream || !mock_stream_ok(stream, "cudaStreamDestroy")) return mock_ret(cudaErrorInvalidResourceHandle);
    stream->magic = 0;
    free(stream);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (mock_inject("cudaStreamSynchronize")) return mock_ret(cudaErrorLaunchFailure);
    return mock_stream_ok(stream, "cudaStreamSynchronize") ? cudaSuccess : mock_ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
    return mock_stream_ok(stream, "cudaStreamQuery") ? cudaSuccess : mock_ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaDeviceSynchronize(void) {
    return mock_devices() > 0 ? cudaSuccess : mock_ret(cudaErrorNoDevice);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    cudaEvent_t e;
    if (mock_inject("cudaEventCreateWithFlags")) return mock_ret(cudaErrorMemoryAllocation);
    if (!event) return mock_ret(cudaErrorInvalidValue);
    if (!(e = (cudaEvent_t)malloc(sizeof *e))) return mock_ret(cudaErrorMemoryAllocation);
    e->magic = MOCK_EVENT_MAGIC;
    e->flags = flags;
    e->recorded = 0;
    *event = e;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (!mock_event_ok(event, "cudaEventDestroy")) return mock_ret(cudaErrorInvalidResourceHandle);
    event->magic = 0;
    free(event);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (mock_inject("cudaEventRecord")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_event_ok(event, "cudaEventRecord") || !mock_stream_ok(stream, "cudaEventRecord"))
        return mock_ret(cudaErrorInvalidResourceHandle);
    event->recorded = 1;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (mock_inject("cudaEventSynchronize")) return mock_ret(cudaErrorLaunchFailure);
    return mock_event_ok(event, "cudaEventSynchronize") ? cudaSuccess : mock_ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    (void)flags;
    if (!mock_stream_ok(stream, "cudaStreamWaitEvent") || !mock_event_ok(event, "cudaStreamWaitEvent"))
        return mock_ret(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

/* ---- memory ---- */
cudaError_t cudaMalloc(void **devPtr, size_t size) {
    void *p;
    if (mock_inject("cudaMalloc")) return mock_ret(cudaErrorMemoryAllocation);
    if (!devPtr) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    if (!(p = mock_memalign(size))) return mock_ret(cudaErrorMemoryAllocation);
    memset(p, 0xff, size);              /* never-written device memory reads as NaN */
    if (!mock_register(p, size, MOCK_DEV)) { free(p); return mock_ret(cudaErrorMemoryAllocation); }
    *devPtr = p;
    return cudaSuccess;
}
static cudaError_t mock_free(void *p, int kind, const char *what) {
    int found;
    if (!p) return cudaSuccess;
    found = mock_unregister(p, kind);
    if (found == kind) { free(p); return cudaSuccess; }
    if (found == MOCK_DEV) mock_say("%s: %p is device memory (cudaFree frees it)", what, p);
    else if (found == MOCK_PINNED) mock_say("%s: %p is pinned host memory (cudaFreeHost frees it)", what, p);
    else mock_say("%s: %p was never allocated here or is already freed", what, p);
    return mock_ret(cudaErrorInvalidValue);
}
cudaError_t cudaFree(void *devPtr) { return mock_free(devPtr, MOCK_DEV, "cudaFree"); }
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    void *p;
    (void)flags;
    if (mock_inject("cudaHostAlloc")) return mock_ret(cudaErrorMemoryAllocation);
    if (!pHost) return mock_ret(cudaErrorInvalidValue);
    if (!(p = mock_memalign(size))) return mock_ret(cudaErrorMemoryAllocation);
    memset(p, 0xff, size);
    if (!mock_register(p, size, MOCK_PINNED)) { free(p); return mock_ret(cudaErrorMemoryAllocation); }
    *pHost = p;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void *ptr) { return mock_free(ptr, MOCK_PINNED, "cudaFreeHost"); }

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    if (mock_inject("cudaMemset")) return mock_ret(cudaErrorLaunchFailure);
    if (count == 0) return cudaSuccess;
    if (!mock_in_dev(devPtr, count, 0, "cudaMemset")) return mock_ret(cudaErrorInvalidValue);
    memset(devPtr, value, count);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    if (mock_inject("cudaMemsetAsync")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_stream_ok(stream, "cudaMemsetAsync")) return mock_ret(cudaErrorInvalidResourceHandle);
    return cudaMemset(devPtr, value, count);
}
/* a pointer's side: 1 device, 0 host (pinned or not); a device pointer's range is checked */
static int mock_side(const void *p, size_t n, const char *what, int *bad) {
    char *s = NULL;
    size_t len = 0;
    int kind = mock_find(p, &s, &len);
    if (kind == MOCK_DEV && (size_t)((const char *)p - s) + n > len) {
        mock_say("%s: %p + %llu bytes runs past the end of its device allocation", what, p, (unsigned long long)n);
        *bad = 1;
    }
    return kind == MOCK_DEV;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    int bad = 0, dd, sd;
    if (mock_inject("cudaMemcpy")) return mock_ret(cudaErrorLaunchFailure);
    if (count == 0) return cudaSuccess;
    if (!dst || !src) return mock_ret(cudaErrorInvalidValue);
    dd = mock_side(dst, count, "cudaMemcpy (dst)", &bad);
    sd = mock_side(src, count, "cudaMemcpy (src)", &bad);
    if (!bad && kind != cudaMemcpyDefault) {
        int want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        int want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
            kind != cudaMemcpyDeviceToDevice) bad = 1;
        else if (dd != want_d || sd != want_s) {
            fprintf(stderr, "cuda_mock: cudaMemcpy kind %d but dst %p is %s memory and src %p is %s memory\n", (int)kind,
                    dst, dd ? "device" : "host", src, sd ? "device" : "host");
            bad = 1;
        }
    }
    if (bad) return mock_ret(cudaErrorInvalidValue);
    memmove(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    if (mock_inject("cudaMemcpyAsync")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_stream_ok(stream, "cudaMemcpyAsync")) return mock_ret(cudaErrorInvalidResourceHandle);
    return cudaMemcpy(dst, src, count, kind);
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
    int kind;
    if (!attributes) return mock_ret(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    kind = ptr ? mock_find(ptr, NULL, NULL) : 0;
    attributes->type = kind == MOCK_DEV ? cudaMemoryTypeDevice : kind == MOCK_PINNED ? cudaMemoryTypeHost
                                                                                     : cudaMemoryTypeUnregistered;
    attributes->device = kind ? 0 : -2;
    attributes->devicePointer = kind ? (void *)(uintptr_t)ptr : NULL;
    attributes->hostPointer = kind != MOCK_DEV ? (void *)(uintptr_t)ptr : NULL;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { cudaError_t e = mock_last; mock_last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return mock_last; }
const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (cuda_mock)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error (cuda_mock)";
    }
}

/* ---- cuBLAS ---- */
#define MOCK_BLAS_MAGIC 0x424c414dU
struct cublasContext { unsigned magic; cudaStream_t stream; };

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    cublasHandle_t h;
    if (mock_inject("cublasCreate")) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    if (mock_devices() <= 0) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!(h = (cublasHandle_t)malloc(sizeof *h))) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = MOCK_BLAS_MAGIC;
    h->stream = NULL;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}
static int mock_blas_ok(cublasHandle_t h, const char *what) {
    if (!h || h->magic != MOCK_BLAS_MAGIC) {
        mock_say("%s: %p is not a live cuBLAS handle", what, (const void *)h);
        return 0;
    }
    return 1;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (!mock_blas_ok(handle, "cublasDestroy")) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    if (!mock_blas_ok(handle, "cublasSetStream")) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mock_stream_ok(streamId, "cublasSetStream")) return CUBLAS_STATUS_INVALID_VALUE;
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}
/* C = alpha op(A) op(B) + beta C, column-major; beta == 0: C is not read */
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc) {
    int i, j, l, ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    int arows = ta ? k : m, brows = tb ? n : k, acols = ta ? m : k, bcols = tb ? k : n;
    float al, be;
    if (!mock_blas_ok(handle, "cublasSgemm")) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mock_inject("cublasSgemm")) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!mock_stream_ok(handle->stream, "cublasSgemm")) return CUBLAS_STATUS_EXECUTION_FAILED;
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T) ||
        m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    /* the default pointer mode: alpha and beta on the host */
    al = *alpha;
    be = *beta;
    if ((k > 0 && (!mock_in_dev(A, ((size_t)(acols - 1) * (size_t)lda + (size_t)arows) * sizeof(float), 1, "cublasSgemm (A)") ||
                   !mock_in_dev(B, ((size_t)(bcols - 1) * (size_t)ldb + (size_t)brows) * sizeof(float), 1, "cublasSgemm (B)"))) ||
        !mock_in_dev(C, ((size_t)(n - 1) * (size_t)ldc + (size_t)m) * sizeof(float), 1, "cublasSgemm (C)"))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    for (j = 0; j < n; j++)
        for (i = 0; i < m; i++) {
            float s = 0.0f;
            for (l = 0; l < k; l++) {
                float a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
                float b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
                s += a * b;
            }
            C[i + (size_t)j * ldc] = be == 0.0f ? al * s : al * s + be * C[i + (size_t)j * ldc];
        }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the kernel launchers (zero.h: "the CUDA kernels' C ABI") ---- */
static int mock_dtype_ok(int dt) { return dt == ZERO_F32 || dt == ZERO_BF16 || dt == ZERO_F16; }
static size_t mock_es(int dt) { return dt == ZERO_F32 ? 4 : 2; }
/* a launch: the stream must be live; the kernel's memory must be device memory */
static int mock_launch(void *stream, const char *what) {
    return mock_stream_ok((cudaStream_t)stream, what);
}
#define MOCK_MEM(p, bytes, what) do { if (!mock_in_dev((p), (bytes), 1, (what))) return (int)mock_ret(cudaErrorIllegalAddress); } while (0)
#define MOCK_STREAM(s, what) do {                                                    \
        if (!mock_launch((s), (what))) return (int)mock_ret(cudaErrorInvalidResourceHandle); \
        if (mock_inject(what)) return (int)mock_ret(cudaErrorLaunchFailure);               \
    } while (0)

int zero__k_opt(const zero__optk *k, const zero__kchunk *chunks, int64_t nchunks, const void *grad_base,
                void *param_base, float *master, float *opt_m, float *opt_v, void *stream) {
    int64_t c, i;
    if (!k || nchunks < 0 || (k->opt != ZERO_OPTIM_ADAMW && k->opt != ZERO_OPTIM_SGD) || !mock_dtype_ok(k->adt) ||
        !mock_dtype_ok(k->pdt))
        return (int)mock_ret(cudaErrorInvalidValue);
    if (nchunks == 0) return 0;
    if (!chunks || !grad_base || !param_base || (k->pdt != ZERO_F32 && !master) ||
        (k->opt == ZERO_OPTIM_ADAMW && (!opt_m || !opt_v)))
        return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_opt");
    MOCK_MEM(chunks, (size_t)nchunks * sizeof *chunks, "zero__k_opt (chunks)");
    for (c = 0; c < nchunks; c++) {
        const zero__kchunk ch = chunks[c];
        const void *g = (const char *)grad_base + ch.grad_idx * (int64_t)mock_es(k->adt);
        float *w = master ? master + ch.state_idx : (float *)param_base + ch.param_idx;
        void *p = (char *)param_base + ch.param_idx * (int64_t)mock_es(k->pdt);
        float *m = opt_m ? opt_m + ch.state_idx : NULL;
        float *v = k->opt == ZERO_OPTIM_ADAMW ? opt_v + ch.state_idx : NULL;
        if (ch.n < 0 || ch.n > ZERO__KCHUNK) return (int)mock_ret(cudaErrorIllegalAddress);
        if (ch.n == 0) continue;
        MOCK_MEM(g, (size_t)ch.n * mock_es(k->adt), "zero__k_opt (gradients)");
        MOCK_MEM(w, (size_t)ch.n * 4, master ? "zero__k_opt (master)" : "zero__k_opt (params)");
        if (k->pdt != ZERO_F32) MOCK_MEM(p, (size_t)ch.n * mock_es(k->pdt), "zero__k_opt (params)");
        if (m) MOCK_MEM(m, (size_t)ch.n * 4, "zero__k_opt (m)");
        if (v) MOCK_MEM(v, (size_t)ch.n * 4, "zero__k_opt (v)");
        for (i = 0; i < ch.n; i++) {        /* zero__opt_scalar_t with decay = ch.decay */
            float gg = zero__ld(g, i, k->adt) * k->gscale;
            if (k->opt == ZERO_OPTIM_SGD) zero__sgd_elem(&w[i], m ? &m[i] : NULL, gg, &k->sh, ch.decay);
            else zero__adamw_elem(&w[i], &m[i], &v[i], gg, &k->ah, ch.decay);
            if (k->pdt != ZERO_F32) zero__st(p, i, k->pdt, w[i]);
        }
    }
    return 0;
}

int zero__k_sumsq(const void *g, int adt, const zero__knblk *blk, int64_t nblk, double *out, void *stream) {
    int64_t b, j;
    if (!mock_dtype_ok(adt) || nblk < 0) return (int)mock_ret(cudaErrorInvalidValue);
    if (nblk == 0) return 0;
    if (!g || !blk || !out) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_sumsq");
    MOCK_MEM(blk, (size_t)nblk * sizeof *blk, "zero__k_sumsq (blocks)");
    MOCK_MEM(out, (size_t)nblk * sizeof *out, "zero__k_sumsq (out)");
    for (b = 0; b < nblk; b++) {
        const zero__knblk bk = blk[b];
        double lanes[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        if (bk.n > 0) MOCK_MEM((const char *)g + bk.idx * (int64_t)mock_es(adt), (size_t)bk.n * mock_es(adt),
                               "zero__k_sumsq (gradients)");
        for (j = 0; j < bk.n; j++) {        /* element j into lane j % 8, in order */
            double x = (double)zero__ld(g, bk.idx + j, adt);
            lanes[j & 7] += x * x;
        }
        out[b] = zero__lanes_sum(lanes);
    }
    return 0;
}

int zero__k_sum_into(void *out, int rdt, const void *const *ins, int nin, int sdt, int64_t count, int accumulate,
                     void *stream) {
    int64_t i;
    int k;
    if (!mock_dtype_ok(rdt) || !mock_dtype_ok(sdt) || nin < 1 || nin > ZERO__K_MAXIN || count < 0 || !ins)
        return (int)mock_ret(cudaErrorInvalidValue);
    if (count == 0) return 0;
    if (!out) return (int)mock_ret(cudaErrorInvalidValue);
    for (k = 0; k < nin; k++) if (!ins[k]) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_sum_into");
    MOCK_MEM(out, (size_t)count * mock_es(rdt), "zero__k_sum_into (out)");
    for (k = 0; k < nin; k++) MOCK_MEM(ins[k], (size_t)count * mock_es(sdt), "zero__k_sum_into (an input)");
    for (i = 0; i < count; i++) {           /* element-wise: every input read before out is written */
        float acc = zero__ld(ins[0], i, sdt);
        for (k = 1; k < nin; k++) acc += zero__ld(ins[k], i, sdt);
        if (accumulate) acc = zero__ld(out, i, rdt) + acc;
        zero__st(out, i, rdt, acc);
    }
    return 0;
}

int zero__k_quantize_i8(int8_t *q, float *scales, const void *x, int xdt, int64_t n, int block, void *stream) {
    int64_t b, i, nb;
    if (!mock_dtype_ok(xdt) || n < 0 || block < 1) return (int)mock_ret(cudaErrorInvalidValue);
    if (n == 0) return 0;
    if (!q || !scales || !x) return (int)mock_ret(cudaErrorInvalidValue);
    nb = (n + block - 1) / block;
    MOCK_STREAM(stream, "zero__k_quantize_i8");
    MOCK_MEM(q, (size_t)n, "zero__k_quantize_i8 (q)");
    MOCK_MEM(scales, (size_t)nb * 4, "zero__k_quantize_i8 (scales)");
    MOCK_MEM(x, (size_t)n * mock_es(xdt), "zero__k_quantize_i8 (x)");
    for (b = 0; b < nb; b++) {
        int64_t lo = b * block, hi = n - lo < block ? n : lo + block;
        float m = 0.0f, s;
        for (i = lo; i < hi; i++) m = zero__q8_absmax(m, zero__ld(x, i, xdt));
        scales[b] = s = zero__q8_scale(m);
        for (i = lo; i < hi; i++) q[i] = zero__q8(zero__ld(x, i, xdt), s);
    }
    return 0;
}

int zero__k_dequantize_i8(void *x, int xdt, const int8_t *q, const float *scales, int64_t n, int block, void *stream) {
    int64_t i;
    if (!mock_dtype_ok(xdt) || n < 0 || block < 1) return (int)mock_ret(cudaErrorInvalidValue);
    if (n == 0) return 0;
    if (!q || !scales || !x) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_dequantize_i8");
    MOCK_MEM(q, (size_t)n, "zero__k_dequantize_i8 (q)");
    MOCK_MEM(scales, (size_t)((n + block - 1) / block) * 4, "zero__k_dequantize_i8 (scales)");
    MOCK_MEM(x, (size_t)n * mock_es(xdt), "zero__k_dequantize_i8 (x)");
    for (i = 0; i < n; i++) zero__st(x, i, xdt, zero__dq8(q[i], scales[i / block]));
    return 0;
}

int zero__k_bias_add(float *y, int64_t ldy, const void *b, int bdt, int64_t rows, int64_t cols, void *stream) {
    int64_t r, c;
    if (!mock_dtype_ok(bdt) || rows < 0 || cols < 0 || ldy < cols) return (int)mock_ret(cudaErrorInvalidValue);
    if (rows == 0 || cols == 0) return 0;
    if (!y || !b) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_bias_add");
    MOCK_MEM(y, (size_t)((rows - 1) * ldy + cols) * 4, "zero__k_bias_add (y)");
    MOCK_MEM(b, (size_t)cols * mock_es(bdt), "zero__k_bias_add (b)");
    for (r = 0; r < rows; r++)
        for (c = 0; c < cols; c++) y[r * ldy + c] += zero__ld(b, c, bdt);
    return 0;
}

int zero__k_bias_grad(void *gb, int gdt, const float *dy, int64_t ld, int64_t rows, int64_t cols, void *stream) {
    int64_t r, c;
    if (!mock_dtype_ok(gdt) || rows < 0 || cols < 0 || ld < cols) return (int)mock_ret(cudaErrorInvalidValue);
    if (cols == 0) return 0;
    if (!gb || (rows > 0 && !dy)) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_bias_grad");
    MOCK_MEM(gb, (size_t)cols * mock_es(gdt), "zero__k_bias_grad (gb)");
    if (rows > 0) MOCK_MEM(dy, (size_t)((rows - 1) * ld + cols) * 4, "zero__k_bias_grad (dy)");
    for (c = 0; c < cols; c++) {
        float s = 0.0f;
        for (r = 0; r < rows; r++) s += dy[r * ld + c];
        zero__st(gb, c, gdt, zero__ld(gb, c, gdt) + s);
    }
    return 0;
}

int zero__k_gelu_fwd(float *y, const float *x, int64_t n, void *stream) {
    int64_t i;
    if (n < 0) return (int)mock_ret(cudaErrorInvalidValue);
    if (n == 0) return 0;
    if (!y || !x) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_gelu_fwd");
    MOCK_MEM(y, (size_t)n * 4, "zero__k_gelu_fwd (y)");
    MOCK_MEM(x, (size_t)n * 4, "zero__k_gelu_fwd (x)");
    for (i = 0; i < n; i++) {
        float xi = x[i];
        y[i] = zero__gelu(xi, zero__gelu_th(xi));
    }
    return 0;
}

int zero__k_gelu_bwd(float *dx, const float *x, const float *dy, int64_t n, void *stream) {
    int64_t i;
    if (n < 0) return (int)mock_ret(cudaErrorInvalidValue);
    if (n == 0) return 0;
    if (!dx || !x || !dy) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_gelu_bwd");
    MOCK_MEM(dx, (size_t)n * 4, "zero__k_gelu_bwd (dx)");
    MOCK_MEM(x, (size_t)n * 4, "zero__k_gelu_bwd (x)");
    MOCK_MEM(dy, (size_t)n * 4, "zero__k_gelu_bwd (dy)");
    for (i = 0; i < n; i++) {
        float xi = x[i];
        dx[i] = dy[i] * zero__gelu_grad(xi, zero__gelu_th(xi));
    }
    return 0;
}

int zero__k_xent(float *loss, float *dlogits, const float *logits, const int32_t *labels, int64_t rows,
                 int64_t classes, float dscale, void *stream) {
    int64_t r, c;
    if (rows < 0 || classes < 0) return (int)mock_ret(cudaErrorInvalidValue);
    if (rows == 0) return 0;
    if (classes == 0 || !loss || !dlogits || !logits || !labels) return (int)mock_ret(cudaErrorInvalidValue);
    MOCK_STREAM(stream, "zero__k_xent");
    MOCK_MEM(loss, (size_t)rows * 4, "zero__k_xent (loss)");
    MOCK_MEM(dlogits, (size_t)(rows * classes) * 4, "zero__k_xent (dlogits)");
    MOCK_MEM(logits, (size_t)(rows * classes) * 4, "zero__k_xent (logits)");
    MOCK_MEM(labels, (size_t)rows * 4, "zero__k_xent (labels)");
    for (r = 0; r < rows; r++) {
        const float *l = logits + r * classes;
        float *d = dlogits + r * classes, mx = l[0], sum = 0.0f, inv, l_label;
        const int32_t label = labels[r];
        const int ok = label >= 0 && label < classes;
        l_label = ok ? l[label] : 0.0f;     /* read before d (which may be l) is written */
        for (c = 1; c < classes; c++) mx = l[c] > mx ? l[c] : mx;
        for (c = 0; c < classes; c++) sum += expf(l[c] - mx);
        inv = 1.0f / sum;
        loss[r] = ok ? zero__xent_loss(sum, l_label, mx) : zero__bits_f32(0x7fc00000u);
        for (c = 0; c < classes; c++) d[c] = zero__xent_grad(expf(l[c] - mx), inv, c == label, dscale);
    }
    return 0;
}

/* ZERO_CUDA_MOCK_LEAKS=1: at exit, device or pinned memory never freed (zero_destroy frees
   everything a context allocated) is a failure: a FAIL line and exit status 1 */
#if defined(__GNUC__)
__attribute__((destructor))
#endif
static void mock_leak_check(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_LEAKS");
    size_t i, bytes = 0;
    if (!e || strcmp(e, "1") != 0 || mock_nallocs == 0) return;
    for (i = 0; i < mock_nallocs; i++) bytes += mock_allocs[i].n;
    for (i = 0; i < mock_nallocs && i < 8; i++)
        mock_say("leak: %s memory %p, %llu bytes", mock_allocs[i].kind == MOCK_DEV ? "device" : "pinned host",
                 (void *)mock_allocs[i].p, (unsigned long long)mock_allocs[i].n);
    printf("FAIL cuda_mock_leaks: %llu allocations (%llu bytes) of device / pinned memory never freed\n",
           (unsigned long long)mock_nallocs, (unsigned long long)bytes);
    fflush(stdout);
    _exit(1);
}
