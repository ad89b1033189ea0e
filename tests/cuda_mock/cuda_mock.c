/* tests/cuda_mock/cuda_mock.c - a test double of the CUDA runtime, cuBLAS and zero.h's kernel
   launchers (zero__k_*), so that zero.h's CUDA device (>>device: ops under ZERO_CUDA) runs on a
   machine without a GPU. `make build/mock/<name>` links it, instead of zero_kernels.o, libcudart
   and libcublas, into a ZERO_CUDA build of tests/<name>.c or examples/<name>.c (run by
   tests/test_cuda_mock.sh; build/mock-tsan/ under TSan). It is never linked into anything
   outside those.

   What it models:
   - device memory is host memory (aligned, filled with 0xff bytes on cudaMalloc, so code that
     reads memory it never wrote sees NaNs), kept in a registry: cudaPointerGetAttributes tells
     device from pinned host from plain host memory; a free of an unknown pointer, a double free,
     cudaFree of pinned memory (or cudaFreeHost of device memory), a copy whose direction does not
     match its pointers or that runs past a device allocation, and a kernel or GEMM given memory
     that is not device (or pinned) memory are reported on stderr ("cuda_mock: ...") and fail
     with the error a GPU would give (cudaErrorInvalidValue / cudaErrorIllegalAddress);
   - streams and events are small objects checked on every use. Two modes: synchronous
     (the default: everything executes at issue, so every stream is always idle, one legal
     schedule) and asynchronous, adversarial (ZERO_CUDA_MOCK_ASYNC=1: a worker thread per
     stream runs its queue later, after random seeded delays, with the runtime's ordering
     between streams, events and the legacy default stream, not-ready queries, and memory
     that reads as NaN bytes until its producer ran: see "streams, events and the
     asynchronous mode" below);
   - ZERO_CUDA_MOCK_DEVICES: how many devices (0: none; -1: a driver/runtime mismatch);
   - cublasSgemm is a plain column-major loop, each dot product summed in order of k;
   - the zero__k_* launchers and their kernels are zero_kernels.cu's own, run on the CPU grid
     emulator (tests/kemu: a fiber per CUDA thread, real barriers and shuffles, checks of
     shared memory and alignment); a launch is an op of its stream like any other ("the
     kernels" below), so the CUDA device's results are the real kernels' (bitwise the CPU
     device's; the cross-entropy sums a row in a tree, within a few ulps of the CPU). */
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
#include <stdint.h>
#include <time.h>
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
/* Device allocations end in a red zone of MOCK_RED bytes of 0xa5 that no kernel may write:
   after every kernel, mock_red_check finds a write past the end of an allocation (in a
   build without ASan; under ASan there is no red zone, allocations are exactly their size
   and ASan itself reports any access past them, reads too) */
#if defined(__SANITIZE_ADDRESS__)
#define MOCK_RED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOCK_RED 0
#endif
#endif
#ifndef MOCK_RED
#define MOCK_RED 64
#endif
static void mock_red_fill(char *p, size_t n) { memset(p + n, 0xa5, MOCK_RED); }
/* 1 when every device allocation's red zone is intact; else says which and restores it */
static int mock_red_check(const char *launcher) {
    size_t i, j;
    int ok = 1;
    pthread_mutex_lock(&mock_mu);
    for (i = 0; i < mock_nallocs; i++) {
        const mock_alloc *a = &mock_allocs[i];
        if (a->kind != MOCK_DEV) continue;
        for (j = 0; j < MOCK_RED; j++)
            if ((unsigned char)a->p[a->n + j] != 0xa5) {
                mock_say("%s: a kernel wrote past the end of device allocation %p (%llu bytes), at byte %llu", launcher,
                         (void *)a->p, (unsigned long long)a->n, (unsigned long long)(a->n + j));
                mock_red_fill(a->p, a->n);
                ok = 0;
                break;
            }
    }
    pthread_mutex_unlock(&mock_mu);
    return ok;
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

/* ---- devices ----
   ZERO_CUDA_MOCK_DEVICES=N: N devices (default 1, at most 8; their memory is all one, the current
   device is per thread, for the checks that compare devices); 0: none (cudaErrorNoDevice);
   -1: a GPU whose driver does not match the runtime (cudaErrorSystemDriverMismatch, which is
   not "no GPU") */
static __thread int mock_cur_dev;
static int mock_devices(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_DEVICES");
    int n = e && e[0] ? atoi(e) : 1;
    return n > 8 ? 8 : n;       /* MOCK_MAX_DEV: the legacy streams below */
}
static cudaError_t mock_no_device(void) {
    return mock_devices() < 0 ? cudaErrorSystemDriverMismatch : cudaErrorNoDevice;
}
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return mock_ret(cudaErrorInvalidValue);
    *count = mock_devices();
    if (*count <= 0) { *count = 0; return mock_ret(mock_no_device()); }
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    if (!device) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(mock_no_device());
    *device = mock_cur_dev;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (mock_devices() <= 0) return mock_ret(mock_no_device());
    if (device < 0 || device >= mock_devices()) return mock_ret(cudaErrorInvalidDevice);
    mock_cur_dev = device;
    return cudaSuccess;
}

/* ---- the two modes ----
   Synchronous (the default): every op runs at issue, on the calling thread, so every
   stream is always idle (one legal schedule). Asynchronous (ZERO_CUDA_MOCK_ASYNC=1): each
   stream is a worker thread that runs its queue in order, each op after a random delay
   (ZERO_CUDA_MOCK_SEED, default 1; ZERO_CUDA_MOCK_DELAY_US, the most, default 200), as a
   GPU may: see "the asynchronous mode" below. ZERO_CUDA_MOCK_ASYNC=2 also holds every copy
   on a non-blocking stream back a while (a side stream's copies that a reader on another
   stream forgot to wait for then land after it, every time). */
static int mock_async_on, mock_delay_us = 200, mock_hold_us;
static unsigned long mock_seed = 1;
static pthread_once_t mock_once = PTHREAD_ONCE_INIT;
static void mock_read_env(void) {
    const char *e = getenv("ZERO_CUDA_MOCK_ASYNC");
    mock_async_on = e && e[0] && strcmp(e, "0") != 0;
    /* 2: also hold every copy or memset on a non-blocking stream back (ZERO_CUDA_MOCK_HOLD_US,
       default 3000) before it starts, so work on other streams that does not wait for it
       (an event) runs first and reads what was there before */
    if (e && strcmp(e, "2") == 0) mock_hold_us = 3000;
    if ((e = getenv("ZERO_CUDA_MOCK_HOLD_US")) && e[0] && mock_hold_us) mock_hold_us = atoi(e) < 0 ? 0 : atoi(e);
    if ((e = getenv("ZERO_CUDA_MOCK_SEED")) && e[0]) mock_seed = strtoul(e, NULL, 10);
    if ((e = getenv("ZERO_CUDA_MOCK_DELAY_US")) && e[0]) mock_delay_us = atoi(e) < 0 ? 0 : atoi(e);
}
static int mock_async(void) {
    pthread_once(&mock_once, mock_read_env);
    return mock_async_on;
}

/* ---- streams, events and the asynchronous mode ----
   An op (a kernel, a copy, a memset, an event record, a wait) is queued on its stream with
   a sequence number (s->issued); the stream's worker runs its ops in order, each once the
   ops it depends on (by (stream, seq)) are done, and counts them (s->done). The
   dependencies are the runtime's:
   - the legacy default stream (NULL, cudaStreamLegacy; cudaStreamPerThread is taken as it)
     waits for the work queued before on every blocking stream (cudaStreamCreate, or flags
     cudaStreamDefault), and every blocking stream's op waits for the legacy stream's work
     queued before it; a cudaStreamNonBlocking stream does neither;
   - cudaEventRecord queues a marker: the event completes when the marker has run, and its
     time (cudaEventElapsedTime) is the host's monotonic clock when the marker ran (at the
     call in synchronous mode, on the stream's worker in asynchronous mode);
     cudaStreamWaitEvent queues a marker that waits for the event's (its last record at
     the time of the call; never recorded: no wait);
   - cudaStreamQuery / cudaEventQuery: cudaErrorNotReady while work is queued, left as the
     thread's last error (cudaGetLastError returns and clears it) as the runtime does;
   - memory (the CUDA docs, "API synchronization behavior"): cudaMemcpy from pageable host
     memory to the device first waits for the legacy stream, snapshots the source into a
     staging buffer and returns before the copy runs; cudaMemcpy from pinned memory, to the
     host (pageable or pinned) and host to host returns once the copy ran; device to device
     returns at once; cudaMemcpyAsync from pageable memory snapshots the source and returns,
     into pageable memory it returns once the copy ran, with pinned memory on both ends or
     device to device it returns at once; cudaMemset (device memory) is queued on the legacy
     stream; cudaFree / cudaFreeHost first wait for every stream (cudaDeviceSynchronize),
     then fill the memory with 0xff bytes (NaNs) before freeing it;
   - a copy or memset fills its destination with 0xff bytes when it starts and writes the
     data after a second random delay, so reading device or pinned memory before its
     producer finished gives NaN bits (never-written device or pinned memory is 0xff too);
   - a kernel whose arguments are bad is refused at launch (its launcher's return value);
     a fault found while it runs (a chunk table that points outside the arenas) is sticky,
     like a GPU's: every later synchronizing call returns it.
   The host thread and the workers share one mutex and condition variable. */
#define MOCK_STREAM_MAGIC 0x5354524dU
#define MOCK_EVENT_MAGIC 0x4556544dU
typedef int (*mock_run_fn)(void *args);
typedef struct mock_dep { struct CUstream_st *s; uint64_t seq; } mock_dep;
typedef struct mock_op {
    struct mock_op *next;
    uint64_t seq;
    mock_run_fn run;                /* NULL: a marker */
    void *args;                     /* malloc'd, freed when it has run */
    int ndeps;
    mock_dep *deps;                 /* malloc'd */
} mock_op;
struct CUstream_st {
    unsigned magic, flags;
    int legacy;
    int dev;                        /* the device current when it was created (the legacy ones: theirs) */
    uint64_t issued, done;          /* ops queued, ops run (both count from 1) */
    mock_op *head, *tail;
    pthread_t worker;
    int started, quit;
    unsigned long long rng;
    struct CUstream_st *next_live;  /* the list of live streams (the legacy one is not in it) */
};
/* an event's time, shared by the event and the marker of its last record (which may run
   after the event is recorded again or destroyed): freed, under mock_qmu, by whichever of
   the two lets go last */
typedef struct mock_stamp { int refs, done; double ms; } mock_stamp;
struct CUevent_st {
    unsigned magic;
    unsigned flags;
    struct CUstream_st *s;
    uint64_t seq;
    mock_stamp *stamp;              /* NULL: never recorded */
};

static pthread_mutex_t mock_qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mock_qcv = PTHREAD_COND_INITIALIZER;
/* one legacy default stream per device, as the runtime has: a device's work never waits for
   another's (the NCCL double's ranks, one per device, block in each other's collectives) */
#define MOCK_MAX_DEV 8
#define MOCK_LEGACY(d) { MOCK_STREAM_MAGIC, 0, 1, d, 0, 0, NULL, NULL, 0, 0, 0, 0, NULL }
static struct CUstream_st mock_legacys[MOCK_MAX_DEV] = { MOCK_LEGACY(0), MOCK_LEGACY(1), MOCK_LEGACY(2), MOCK_LEGACY(3),
                                                         MOCK_LEGACY(4), MOCK_LEGACY(5), MOCK_LEGACY(6), MOCK_LEGACY(7) };
#define mock_legacy (mock_legacys[mock_cur_dev])
static struct CUstream_st *mock_live;       /* live streams, under mock_qmu */
static struct CUstream_st *mock_dead;       /* destroyed streams: kept, ops may name them in deps */
static unsigned mock_nstreams;
static cudaError_t mock_sticky;             /* a fault while an op ran: every later sync returns it */

static struct CUstream_st *mock_st(cudaStream_t s) {
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread ? &mock_legacy : s;
}
/* NULL (the legacy default stream), cudaStreamLegacy and cudaStreamPerThread are always valid */
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
static cudaError_t mock_sticky_get(void) {
    cudaError_t e;
    pthread_mutex_lock(&mock_qmu);
    e = mock_sticky;
    pthread_mutex_unlock(&mock_qmu);
    return e;
}

static unsigned mock_rand(struct CUstream_st *s) {     /* xorshift64*, the worker's own */
    s->rng ^= s->rng >> 12; s->rng ^= s->rng << 25; s->rng ^= s->rng >> 27;
    return (unsigned)((s->rng * 2685821657736338717ULL) >> 33);
}
static void mock_delay(struct CUstream_st *s) {
    unsigned r = mock_rand(s), us;
    struct timespec ts;
    if (mock_delay_us == 0 || (r & 3) == 0) return;                /* a quarter: none */
    us = (r >> 2) % (unsigned)mock_delay_us;
    if ((r & 0xf0) == 0) us *= 4;                                    /* now and then: longer */
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (long)(us % 1000000) * 1000L;
    nanosleep(&ts, NULL);
}
/* the worker's delay is also used inside copies (between the poison and the data) */
static __thread struct CUstream_st *mock_cur_worker;
static void mock_mid_delay(void) { if (mock_cur_worker) mock_delay(mock_cur_worker); }

static int mock_deps_done(const mock_op *op) {
    int i;
    for (i = 0; i < op->ndeps; i++)
        if (op->deps[i].s->done < op->deps[i].seq) return 0;
    return 1;
}
static int mock_run_mem(void *p);
static void *mock_worker(void *p) {
    struct CUstream_st *s = (struct CUstream_st *)p;
    mock_cur_worker = s;
    pthread_mutex_lock(&mock_qmu);
    for (;;) {
        mock_op *op;
        int e = 0;
        while (!s->head && !s->quit) pthread_cond_wait(&mock_qcv, &mock_qmu);
        if (!s->head) break;
        op = s->head;
        while (!mock_deps_done(op)) pthread_cond_wait(&mock_qcv, &mock_qmu);
        pthread_mutex_unlock(&mock_qmu);
        mock_delay(s);
        if (mock_hold_us && op->run == mock_run_mem && !s->legacy && (s->flags & cudaStreamNonBlocking)) {
            struct timespec ts;
            ts.tv_sec = mock_hold_us / 1000000;
            ts.tv_nsec = (long)(mock_hold_us % 1000000) * 1000L;
            nanosleep(&ts, NULL);
        }
        if (op->run) e = op->run(op->args);
        pthread_mutex_lock(&mock_qmu);
        if (e && !mock_sticky) mock_sticky = (cudaError_t)e;
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        s->done = op->seq;
        pthread_cond_broadcast(&mock_qcv);
        free(op->args);
        free(op->deps);
        free(op);
    }
    pthread_mutex_unlock(&mock_qmu);
    return NULL;
}
/* under mock_qmu: the stream's worker, started on its first op */
static int mock_start(struct CUstream_st *s) {
    if (s->started) return 1;
    s->rng = (unsigned long long)mock_seed * 0x9E3779B97F4A7C15ULL + (unsigned long long)(++mock_nstreams) * 7919ULL + 1;
    if (pthread_create(&s->worker, NULL, mock_worker, s) != 0) return 0;
    s->started = 1;
    return 1;
}
/* queues run(args) on s (args: n bytes, copied); extra: one more dependency or NULL.
   Returns the op's seq (0: out of memory). Synchronous mode: runs it now; *err its result. */
static uint64_t mock_submit(cudaStream_t stream, mock_run_fn run, const void *args, size_t n, const mock_dep *extra,
                            int *err) {
    struct CUstream_st *s = mock_st(stream), *o;
    mock_op *op;
    uint64_t seq;
    int nd = 0;
    *err = 0;
    if (!mock_async()) {
        if (run) *err = run((void *)(uintptr_t)args);
        return 1;
    }
    if (!(op = (mock_op *)calloc(1, sizeof *op))) return 0;
    if (n && !(op->args = malloc(n))) { free(op); return 0; }
    if (n) memcpy(op->args, args, n);
    op->run = run;
    pthread_mutex_lock(&mock_qmu);
    op->deps = (mock_dep *)malloc(sizeof *op->deps * (mock_nstreams + 2));
    if (!op->deps || !mock_start(s)) {
        pthread_mutex_unlock(&mock_qmu);
        free(op->deps); free(op->args); free(op);
        return 0;
    }
    if (s->legacy) {                    /* the legacy stream waits for every blocking stream of its device */
        for (o = mock_live; o; o = o->next_live)
            if (o->dev == s->dev && !(o->flags & cudaStreamNonBlocking) && o->issued > o->done) {
                op->deps[nd].s = o; op->deps[nd].seq = o->issued; nd++;
            }
    } else if (!(s->flags & cudaStreamNonBlocking) && mock_legacys[s->dev].issued > mock_legacys[s->dev].done) {
        op->deps[nd].s = &mock_legacys[s->dev]; op->deps[nd].seq = mock_legacys[s->dev].issued; nd++;
    }
    if (extra && extra->s && extra->s->done < extra->seq) op->deps[nd++] = *extra;
    op->ndeps = nd;
    seq = op->seq = ++s->issued;        /* op is the worker's once the lock is let go */
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&mock_qcv);
    pthread_mutex_unlock(&mock_qmu);
    return seq;
}
/* waits until s has run op seq (async mode) */
static void mock_wait(struct CUstream_st *s, uint64_t seq) {
    pthread_mutex_lock(&mock_qmu);
    while (s->done < seq) pthread_cond_wait(&mock_qcv, &mock_qmu);
    pthread_mutex_unlock(&mock_qmu);
}
/* waits for everything queued so far on every stream of the current device */
static void mock_drain_all(void) {
    struct CUstream_st *o;
    if (!mock_async()) return;
    pthread_mutex_lock(&mock_qmu);
    for (;;) {
        int busy = mock_legacy.done < mock_legacy.issued;
        for (o = mock_live; o && !busy; o = o->next_live) busy = o->dev == mock_cur_dev && o->done < o->issued;
        if (!busy) break;
        pthread_cond_wait(&mock_qcv, &mock_qmu);
    }
    pthread_mutex_unlock(&mock_qmu);
}
/* queues a marker on s and waits for it: everything s (and, for the legacy stream, every
   blocking stream) had queued is done */
static cudaError_t mock_sync_stream(cudaStream_t stream) {
    int e;
    uint64_t seq;
    if (!mock_async()) return mock_sticky_get();
    if (!(seq = mock_submit(stream, NULL, NULL, 0, NULL, &e))) return cudaErrorMemoryAllocation;
    mock_wait(mock_st(stream), seq);
    return mock_sticky_get();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    cudaStream_t s;
    if (mock_inject("cudaStreamCreateWithFlags")) return mock_ret(cudaErrorMemoryAllocation);
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    if (!(s = (cudaStream_t)calloc(1, sizeof *s))) return mock_ret(cudaErrorMemoryAllocation);
    s->magic = MOCK_STREAM_MAGIC;
    s->flags = flags;
    s->dev = mock_cur_dev;
    pthread_mutex_lock(&mock_qmu);
    s->next_live = mock_live;
    mock_live = s;
    pthread_mutex_unlock(&mock_qmu);
    *pStream = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }
/* the runtime returns at once and releases the stream when its work is done; here the
   work is waited for, the worker stopped, and the stream kept (dead) for other ops' deps */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    struct CUstream_st **pp;
    int started;
    if (!stream || !mock_stream_ok(stream, "cudaStreamDestroy")) return mock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&mock_qmu);
    while (stream->done < stream->issued) pthread_cond_wait(&mock_qcv, &mock_qmu);
    for (pp = &mock_live; *pp; pp = &(*pp)->next_live)
        if (*pp == stream) { *pp = stream->next_live; break; }
    stream->quit = 1;
    stream->magic = 0;
    started = stream->started;
    stream->next_live = mock_dead;
    mock_dead = stream;
    pthread_cond_broadcast(&mock_qcv);
    pthread_mutex_unlock(&mock_qmu);
    if (started) pthread_join(stream->worker, NULL);
    return cudaSuccess;
}
/* every host wait and device allocation, counted for tests/cuda_mock/costs.c, which checks
   zero_stats' host_syncs and device_allocs against them */
static long long mock_n_syncs, mock_n_mallocs;
void cuda_mock_counts(long long *syncs, long long *mallocs) {
    *syncs = __atomic_load_n(&mock_n_syncs, __ATOMIC_SEQ_CST);
    *mallocs = __atomic_load_n(&mock_n_mallocs, __ATOMIC_SEQ_CST);
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    __atomic_add_fetch(&mock_n_syncs, 1, __ATOMIC_SEQ_CST);
    if (mock_inject("cudaStreamSynchronize")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_stream_ok(stream, "cudaStreamSynchronize")) return mock_ret(cudaErrorInvalidResourceHandle);
    return mock_ret(mock_sync_stream(stream));
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
    struct CUstream_st *s = mock_st(stream);
    cudaError_t e;
    if (!mock_stream_ok(stream, "cudaStreamQuery")) return mock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&mock_qmu);
    e = mock_sticky ? mock_sticky : s->done < s->issued ? cudaErrorNotReady : cudaSuccess;
    pthread_mutex_unlock(&mock_qmu);
    return mock_ret(e);         /* not-ready too is left as the last error, as the runtime does */
}
cudaError_t cudaDeviceSynchronize(void) {
    __atomic_add_fetch(&mock_n_syncs, 1, __ATOMIC_SEQ_CST);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    mock_drain_all();
    return mock_ret(mock_sticky_get());
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    cudaEvent_t e;
    if (mock_inject("cudaEventCreateWithFlags")) return mock_ret(cudaErrorMemoryAllocation);
    if (!event) return mock_ret(cudaErrorInvalidValue);
    if (!(e = (cudaEvent_t)calloc(1, sizeof *e))) return mock_ret(cudaErrorMemoryAllocation);
    e->magic = MOCK_EVENT_MAGIC;
    e->flags = flags;
    *event = e;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
/* under mock_qmu */
static void mock_stamp_put(mock_stamp *st) {
    if (st && --st->refs == 0) free(st);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (!mock_event_ok(event, "cudaEventDestroy")) return mock_ret(cudaErrorInvalidResourceHandle);
    event->magic = 0;
    pthread_mutex_lock(&mock_qmu);
    mock_stamp_put(event->stamp);
    pthread_mutex_unlock(&mock_qmu);
    free(event);
    return cudaSuccess;
}
/* the marker of a record: the time it ran */
static int mock_run_stamp(void *p) {
    mock_stamp *st = *(mock_stamp **)p;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&mock_qmu);
    st->ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    st->done = 1;
    mock_stamp_put(st);
    pthread_mutex_unlock(&mock_qmu);
    return 0;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    int e;
    uint64_t seq;
    mock_stamp *st;
    if (mock_inject("cudaEventRecord")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_event_ok(event, "cudaEventRecord") || !mock_stream_ok(stream, "cudaEventRecord"))
        return mock_ret(cudaErrorInvalidResourceHandle);
    if (!(st = (mock_stamp *)calloc(1, sizeof *st))) return mock_ret(cudaErrorMemoryAllocation);
    st->refs = 2;                       /* the event's and the marker's */
    if (!(seq = mock_submit(stream, mock_run_stamp, &st, sizeof st, NULL, &e))) {
        free(st);
        return mock_ret(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&mock_qmu);
    event->s = mock_async() ? mock_st(stream) : NULL;
    event->seq = seq;
    mock_stamp_put(event->stamp);       /* the previous record's (its marker may still hold it) */
    event->stamp = st;
    pthread_mutex_unlock(&mock_qmu);
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    struct CUstream_st *s;
    uint64_t seq;
    __atomic_add_fetch(&mock_n_syncs, 1, __ATOMIC_SEQ_CST);
    if (mock_inject("cudaEventSynchronize")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_event_ok(event, "cudaEventSynchronize")) return mock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&mock_qmu);
    s = event->s; seq = event->seq;
    pthread_mutex_unlock(&mock_qmu);
    if (s) mock_wait(s, seq);
    return mock_ret(mock_sticky_get());
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
    cudaError_t e;
    if (!mock_event_ok(event, "cudaEventQuery")) return mock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&mock_qmu);
    e = mock_sticky ? mock_sticky : event->s && event->s->done < event->seq ? cudaErrorNotReady : cudaSuccess;
    pthread_mutex_unlock(&mock_qmu);
    return mock_ret(e);
}
/* the runtime's rules: a bad event, one never recorded or one created with
   cudaEventDisableTiming is cudaErrorInvalidResourceHandle; either record not run yet is
   cudaErrorNotReady (as cudaEventQuery, left as the last error); NULL ms is
   cudaErrorInvalidValue; a fault of earlier work is returned, as the runtime may */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    cudaError_t e = cudaSuccess;
    if (!ms) return mock_ret(cudaErrorInvalidValue);
    if (!mock_event_ok(start, "cudaEventElapsedTime (start)") || !mock_event_ok(end, "cudaEventElapsedTime (end)"))
        return mock_ret(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) {
        mock_say("cudaEventElapsedTime: an event created with cudaEventDisableTiming");
        return mock_ret(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&mock_qmu);
    if (!start->stamp || !end->stamp) e = cudaErrorInvalidResourceHandle;
    else if ((start->s && start->s->done < start->seq) || (end->s && end->s->done < end->seq) || !start->stamp->done ||
             !end->stamp->done)
        e = cudaErrorNotReady;
    else if (mock_sticky) e = mock_sticky;
    else *ms = (float)(end->stamp->ms - start->stamp->ms);
    pthread_mutex_unlock(&mock_qmu);
    if (e == cudaErrorInvalidResourceHandle) mock_say("cudaEventElapsedTime: an event that was never recorded");
    return mock_ret(e);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    mock_dep d;
    int e;
    (void)flags;
    if (!mock_stream_ok(stream, "cudaStreamWaitEvent") || !mock_event_ok(event, "cudaStreamWaitEvent"))
        return mock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&mock_qmu);
    d.s = event->s; d.seq = event->seq;
    pthread_mutex_unlock(&mock_qmu);
    if (!mock_submit(stream, NULL, NULL, 0, &d, &e)) return mock_ret(cudaErrorMemoryAllocation);
    return cudaSuccess;
}
typedef struct mock_hostfn_args { cudaHostFn_t fn; void *user; } mock_hostfn_args;
static int mock_run_hostfn(void *p) {
    mock_hostfn_args *a = (mock_hostfn_args *)p;
    a->fn(a->user);
    return 0;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
    mock_hostfn_args a;
    int e;
    if (!fn) return mock_ret(cudaErrorInvalidValue);
    if (!mock_stream_ok(stream, "cudaLaunchHostFunc")) return mock_ret(cudaErrorInvalidResourceHandle);
    a.fn = fn; a.user = userData;
    if (!mock_submit(stream, mock_run_hostfn, &a, sizeof a, NULL, &e)) return mock_ret(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

/* ---- memory ---- */
cudaError_t cudaMalloc(void **devPtr, size_t size) {
    void *p;
    __atomic_add_fetch(&mock_n_mallocs, 1, __ATOMIC_SEQ_CST);
    if (mock_inject("cudaMalloc")) return mock_ret(cudaErrorMemoryAllocation);
    if (!devPtr) return mock_ret(cudaErrorInvalidValue);
    if (mock_devices() <= 0) return mock_ret(cudaErrorNoDevice);
    if (!(p = mock_memalign(size + MOCK_RED))) return mock_ret(cudaErrorMemoryAllocation);
    memset(p, 0xff, size);              /* never-written device memory reads as NaN */
    mock_red_fill((char *)p, size);
    if (!mock_register(p, size, MOCK_DEV)) { free(p); return mock_ret(cudaErrorMemoryAllocation); }
    *devPtr = p;
    return cudaSuccess;
}
static cudaError_t mock_free(void *p, int kind, const char *what) {
    int found;
    char *s = NULL;
    size_t len = 0;
    if (!p) return cudaSuccess;
    mock_drain_all();                   /* cudaFree synchronizes: nothing queued may still use p */
    if (mock_find(p, &s, &len) == kind && s == (char *)p) memset(p, 0xff, len);     /* poisoned */
    found = mock_unregister(p, kind);
    if (found == kind) { free(p); return cudaSuccess; }
    if (found == MOCK_DEV) mock_say("%s: %p is device memory (cudaFree frees it)", what, p);
    else if (found == MOCK_PINNED) mock_say("%s: %p is pinned host memory (cudaFreeHost frees it)", what, p);
    else mock_say("%s: %p was never allocated here or is already freed", what, p);
    return mock_ret(cudaErrorInvalidValue);
}
cudaError_t cudaFree(void *devPtr) {
    if (devPtr) __atomic_add_fetch(&mock_n_syncs, 1, __ATOMIC_SEQ_CST);     /* it synchronizes the device */
    return mock_free(devPtr, MOCK_DEV, "cudaFree");
}
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

/* a copy or memset, run by a stream's worker (or at issue in synchronous mode): in async
   mode the destination reads as 0xff bytes for a while before the data lands */
typedef struct mock_mem_args {
    char *dst;
    const char *src;                /* NULL: a memset of value */
    void *staged;                   /* owned snapshot of a pageable source, or NULL */
    size_t n;
    int value;
} mock_mem_args;
static int mock_run_mem(void *p) {
    mock_mem_args *a = (mock_mem_args *)p;
    const char *src = a->staged ? (const char *)a->staged : a->src;
    if (mock_cur_worker && (!src || src + a->n <= a->dst || a->dst + a->n <= src)) {
        memset(a->dst, 0xff, a->n);
        mock_mid_delay();
    }
    if (src) memmove(a->dst, src, a->n);
    else memset(a->dst, a->value, a->n);
    free(a->staged);
    a->staged = NULL;
    return 0;
}
/* queues a memory op on stream; wait: return only once it ran */
static cudaError_t mock_mem_op(cudaStream_t stream, mock_mem_args *a, int wait) {
    int e;
    uint64_t seq = mock_submit(stream, mock_run_mem, a, sizeof *a, NULL, &e);
    if (!seq) { free(a->staged); return cudaErrorMemoryAllocation; }
    if (wait && mock_async()) mock_wait(mock_st(stream), seq);
    return (cudaError_t)e;
}

static cudaError_t mock_memset(void *devPtr, int value, size_t count, cudaStream_t stream, const char *what) {
    mock_mem_args a;
    if (count == 0) return cudaSuccess;
    if (!mock_in_dev(devPtr, count, 0, what)) return mock_ret(cudaErrorInvalidValue);
    memset(&a, 0, sizeof a);
    a.dst = (char *)devPtr; a.n = count; a.value = value;
    return mock_ret(mock_mem_op(stream, &a, 0));
}
cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    if (mock_inject("cudaMemset")) return mock_ret(cudaErrorLaunchFailure);
    return mock_memset(devPtr, value, count, NULL, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    if (mock_inject("cudaMemsetAsync")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_stream_ok(stream, "cudaMemsetAsync")) return mock_ret(cudaErrorInvalidResourceHandle);
    return mock_memset(devPtr, value, count, stream, "cudaMemsetAsync");
}
/* a pointer's kind (MOCK_DEV, MOCK_PINNED, 0: pageable host); a device pointer's range is checked */
static int mock_side(const void *p, size_t n, const char *what, int *bad) {
    char *s = NULL;
    size_t len = 0;
    int kind = mock_find(p, &s, &len);
    if (kind == MOCK_DEV && (size_t)((const char *)p - s) + n > len) {
        mock_say("%s: %p + %llu bytes runs past the end of its device allocation", what, p, (unsigned long long)n);
        *bad = 1;
    }
    return kind;
}
/* cudaMemcpy (sync = 1) and cudaMemcpyAsync: checks, then the host synchronization the
   runtime documents (see above) */
static cudaError_t mock_memcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream,
                               int sync, const char *what) {
    int bad = 0, dk, sk, dd, sd, wait;
    char wd[64], ws[64];
    mock_mem_args a;
    if (count == 0) return cudaSuccess;
    if (!dst || !src) return mock_ret(cudaErrorInvalidValue);
    snprintf(wd, sizeof wd, "%s (dst)", what);
    snprintf(ws, sizeof ws, "%s (src)", what);
    dk = mock_side(dst, count, wd, &bad);
    sk = mock_side(src, count, ws, &bad);
    dd = dk == MOCK_DEV;
    sd = sk == MOCK_DEV;
    if (!bad && kind != cudaMemcpyDefault) {
        int want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        int want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
            kind != cudaMemcpyDeviceToDevice) bad = 1;
        else if (dd != want_d || sd != want_s) {
            fprintf(stderr, "cuda_mock: %s kind %d but dst %p is %s memory and src %p is %s memory\n", what, (int)kind,
                    dst, dd ? "device" : "host", src, sd ? "device" : "host");
            bad = 1;
        }
    }
    if (bad) return mock_ret(cudaErrorInvalidValue);
    memset(&a, 0, sizeof a);
    a.dst = (char *)dst; a.src = (const char *)src; a.n = count;
    if (!mock_async()) return mock_ret(mock_mem_op(stream, &a, 0));
    if (sk == 0 && dd) {                        /* pageable -> device: staged */
        if (sync) mock_sync_stream(stream);     /* cudaMemcpy: "a stream sync is performed before" */
        if (!(a.staged = malloc(count))) return mock_ret(cudaErrorMemoryAllocation);
        memcpy(a.staged, src, count);
        wait = 0;
    } else if (!dd && !sd) {
        wait = 1;                               /* host to host: fully synchronous */
    } else if (dk == 0) {
        wait = 1;                               /* into pageable memory: returns once it is there */
    } else if (sync) {
        wait = !(dd && sd);                     /* cudaMemcpy: only device to device returns at once */
    } else {
        wait = 0;                               /* pinned or device on both ends: asynchronous */
    }
    return mock_ret(mock_mem_op(stream, &a, wait));
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    if (mock_inject("cudaMemcpy")) return mock_ret(cudaErrorLaunchFailure);
    return mock_memcpy(dst, src, count, kind, NULL, 1, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    if (mock_inject("cudaMemcpyAsync")) return mock_ret(cudaErrorLaunchFailure);
    if (!mock_stream_ok(stream, "cudaMemcpyAsync")) return mock_ret(cudaErrorInvalidResourceHandle);
    return mock_memcpy(dst, src, count, kind, stream, 0, "cudaMemcpyAsync");
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
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorSystemDriverMismatch: return "cudaErrorSystemDriverMismatch";
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
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorSystemDriverMismatch: return "system has unsupported display driver / cuda driver combination";
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
typedef struct mock_gemm_args {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float al, be;
    const float *A, *B;
    float *C;
} mock_gemm_args;
static int mock_run_gemm(void *p) {
    const mock_gemm_args *a = (const mock_gemm_args *)p;
    int i, j, l;
    for (j = 0; j < a->n; j++)
        for (i = 0; i < a->m; i++) {
            float s = 0.0f;
            for (l = 0; l < a->k; l++) {
                float x = a->ta ? a->A[l + (size_t)i * a->lda] : a->A[i + (size_t)l * a->lda];
                float y = a->tb ? a->B[j + (size_t)l * a->ldb] : a->B[l + (size_t)j * a->ldb];
                s += x * y;
            }
            a->C[i + (size_t)j * a->ldc] = a->be == 0.0f ? a->al * s : a->al * s + a->be * a->C[i + (size_t)j * a->ldc];
        }
    return 0;
}
/* C = alpha op(A) op(B) + beta C, column-major; beta == 0: C is not read */
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc) {
    int ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N, e;
    int arows = ta ? k : m, brows = tb ? n : k, acols = ta ? m : k, bcols = tb ? k : n;
    mock_gemm_args a;
    if (!mock_blas_ok(handle, "cublasSgemm")) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mock_inject("cublasSgemm")) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!mock_stream_ok(handle->stream, "cublasSgemm")) return CUBLAS_STATUS_EXECUTION_FAILED;
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T) ||
        m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if ((k > 0 && (!mock_in_dev(A, ((size_t)(acols - 1) * (size_t)lda + (size_t)arows) * sizeof(float), 1, "cublasSgemm (A)") ||
                   !mock_in_dev(B, ((size_t)(bcols - 1) * (size_t)ldb + (size_t)brows) * sizeof(float), 1, "cublasSgemm (B)"))) ||
        !mock_in_dev(C, ((size_t)(n - 1) * (size_t)ldc + (size_t)m) * sizeof(float), 1, "cublasSgemm (C)"))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    memset(&a, 0, sizeof a);
    a.ta = ta; a.tb = tb; a.m = m; a.n = n; a.k = k; a.lda = lda; a.ldb = ldb; a.ldc = ldc;
    a.al = *alpha;                      /* the default pointer mode: alpha and beta on the host, read now */
    a.be = *beta;
    a.A = A; a.B = B; a.C = C;
    if (!mock_submit(handle->stream, mock_run_gemm, &a, sizeof a, NULL, &e)) return CUBLAS_STATUS_ALLOC_FAILED;
    return e ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* ---- the kernels: zero_kernels.cu itself, on the CPU grid emulator (tests/kemu) ----
   build/mock/ programs link zero_kernels.cu's real launchers and kernels, rewritten for the
   host compiler by tests/kemu/rewrite.sh and run by tests/kemu/kemu.cc (a fiber per CUDA
   thread, real barriers and warp shuffles, checks of shared memory and alignment). A
   launcher checks its arguments, launches (kernel<<<...>>>, which comes here as one call of
   kemu_host_submit) and returns cudaGetLastError(), as on a GPU. Here a launch is an op of
   its stream: it runs at issue in the synchronous mode, on the stream's worker later in the
   asynchronous one, where a fault it finds is sticky. */
typedef struct mock_kemu_op { int (*run)(void *); void *arg; const char *launcher; } mock_kemu_op;
static int mock_run_kemu(void *p) {
    const mock_kemu_op *o = (const mock_kemu_op *)p;
    int e = o->run(o->arg);
    if (!mock_red_check(o->launcher) && !e) e = (int)cudaErrorIllegalAddress;
    return e;
}
int kemu_host_submit(cudaStream_t stream, const char *launcher, int (*run)(void *), void *arg, void (*drop)(void *)) {
    mock_kemu_op o;
    int e;
    if (!mock_stream_ok(stream, launcher)) { drop(arg); return mock_ret(cudaErrorInvalidResourceHandle); }
    if (mock_inject(launcher)) { drop(arg); return mock_ret(cudaErrorLaunchFailure); }
    o.run = run; o.arg = arg; o.launcher = launcher;
    if (!mock_submit(stream, mock_run_kemu, &o, sizeof o, NULL, &e)) { drop(arg); return mock_ret(cudaErrorMemoryAllocation); }
    return e ? mock_ret((cudaError_t)e) : cudaSuccess;
}
/* a kernel's pointer arguments: NULL, device memory or (mapped) pinned memory */
int kemu_host_check_ptr(const void *p, const char *launcher, int arg_index) {
    if (!p || mock_find(p, NULL, NULL)) return 0;
    mock_say("%s: the kernel's argument %d, %p, is not device memory", launcher, arg_index, p);
    return (int)cudaErrorIllegalAddress;
}
void kemu_host_launch_failed(int err) { (void)mock_ret((cudaError_t)err); }

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
