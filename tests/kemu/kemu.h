/* tests/kemu/kemu.h - the device side of CUDA C++ for the host compiler: a CPU grid emulator
   that runs zero_kernels.cu's real kernels (the ones nvcc compiles) where no GPU is.

   How it is used. tests/kemu/rewrite.sh turns zero_kernels.cu into build/<variant>/kemu/
   zero_kernels.cc, changing only two constructs the host compiler cannot parse (the file
   keeps its line numbers: a `#line` directive, so every report names zero_kernels.cu:LINE):
     kernel<<<grid, block, shmem, stream>>>(args)  ->  kernel << kemu::cfg(...) << kemu::args(args)
     __shared__ T name[N];  /  __shared__ T name;  ->  a kemu::sarr<T> / kemu::svar<T> proxy
   and the C++ compiler builds it with `-include tests/kemu/kemu.h`. tests/kemu/kemu.cc is
   the runtime: every CUDA thread of a block is a fiber (its own stack; x86-64: a 6-register
   switch, elsewhere or with -DKEMU_UCONTEXT: ucontext), warps are 32 consecutive threads, and
   a thread leaves its fiber only at a __syncthreads, a warp operation (shuffle, vote,
   __syncwarp) or its end. Test code only: nothing here is part of zero.h or its builds.

   What a first GPU run would catch, caught here (each reported on stderr as "kemu: FILE:LINE
   ...", counted by kemu_reports(), and failing the launch with the error a GPU would give,
   sticky through the CUDA double: tests/cuda_mock/cuda_mock.c):
   - a vector load or store through __ldcs/__stcs/__ldg/... at an address not aligned to its
     type (cudaErrorMisalignedAddress);
   - a __syncthreads that part of the block never reaches (a thread exited, or waits at a
     different __syncthreads or warp operation), threads at different __syncthreads;
   - a warp operation whose mask leaves out the calling lane, names a lane that exited, is
     waiting elsewhere, or does not exist, lanes of one mask at different operations or with
     different masks, a shuffle that reads a lane outside the mask, a width that is not a
     power of two up to 32;
   - shared memory: an index outside the array, a read of an element no thread of the block
     wrote, and a race: two threads touching one element between the same two barriers
     with at least one write (for threads of one warp, a __syncwarp also separates);
   - a deadlock (no thread can move) and a kernel launched with a bad configuration.
   Out-of-bounds global memory is ASan's (build/kemu-asan: the double allocates device
   memory exactly to size). Blocks run in a seeded random order (ZERO_KEMU_SEED), and
   ZERO_KEMU_MAX_GRID=N caps gridDim.x at N, so every grid-stride loop wraps many times
   (zero_kernels.cu's kernels are all grid-stride: their results must not change).

   Under ThreadSanitizer (build/mock-tsan) the fibers are one thread to TSan: it checks the
   kernels' accesses against the host's and other streams', not one kernel's threads against
   each other (the shared-memory log does that for shared memory; for global memory, nothing).

   Not modelled: timing, memory ordering between blocks (blocks run one after another),
   __threadfence, atomics, textures, cooperative groups, __restrict__ promises; fast-math
   intrinsics are not provided (zero_kernels.cu uses none). */
#ifndef KEMU_H
#define KEMU_H
#ifndef __cplusplus
#error "tests/kemu/kemu.h is C++: the emulated kernels are built by the C++ compiler"
#endif

#include <cuda_runtime.h>      /* the host API's types: cudaStream_t, cudaError_t, dim3, float4 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers: host functions here ---- */
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __noinline__
#define __noinline__ __attribute__((noinline))
/* tests/kemu/rewrite.sh replaces every __shared__ declaration; one it missed does not compile */
#undef __shared__
#define __shared__ kemu_shared_declaration_not_rewritten_by_tests_kemu_rewrite_sh

extern "C" {
/* the number of problems reported so far (every kemu: line on stderr) */
long kemu_reports(void);
/* the text of the last report ("" if none) */
const char *kemu_last_report(void);
/* provided by the CUDA double (tests/cuda_mock/cuda_mock.c): queue run(arg) on stream as a
   kernel launched by `launcher` (stream checks, ZERO_CUDA_MOCK_FAIL=launcher:N, the
   asynchronous mode); returns the launch's cudaError_t and leaves it as the last error. drop
   frees arg when run will not run. */
int kemu_host_submit(cudaStream_t stream, const char *launcher, int (*run)(void *), void *arg, void (*drop)(void *));
/* provided by the double: 0 when p may be given to a kernel (NULL, device or pinned memory),
   else the cudaError_t a kernel touching it would fault with, after saying why on stderr */
int kemu_host_check_ptr(const void *p, const char *launcher, int arg_index);
/* provided by the double: a launch refused for its configuration leaves err as the last error */
void kemu_host_launch_failed(int err);
}

namespace kemu {

/* ---- the built-in variables (per CUDA thread: the scheduler sets them on every switch) ---- */
struct tls_t { uint3 tid, bid, bdim, gdim; };   /* blockDim, gridDim: dim3 on a GPU (same fields) */
extern __thread tls_t tls;
#define threadIdx (static_cast<const uint3 &>(kemu::tls.tid))
#define blockIdx (static_cast<const uint3 &>(kemu::tls.bid))
#define blockDim (static_cast<const uint3 &>(kemu::tls.bdim))
#define gridDim (static_cast<const uint3 &>(kemu::tls.gdim))
static const int warpSize_ = 32;
#define warpSize kemu::warpSize_

/* ---- warp operations, barriers, checked loads: kemu.cc ---- */
enum { OP_IDX, OP_XOR, OP_UP, OP_DOWN, OP_BALLOT, OP_ANY, OP_ALL, OP_SYNCWARP };
uint64_t warp_op(int kind, unsigned mask, uint64_t bits, int param, int width, const char *file, int line);
void syncthreads(const char *file, int line);
void check_align(const void *p, size_t align, size_t bytes, const char *what, const char *file, int line);
unsigned activemask(void);

/* a call site of a device intrinsic: the macros below build one, so reports say FILE:LINE */
struct site {
    const char *file;
    int line;
    template <class T> T shfl(int kind, unsigned mask, T v, int param, int width) const {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a shuffle moves a 4- or 8-byte value");
        static_assert(std::is_trivially_copyable<T>::value, "a shuffle moves a trivially copyable value");
        uint64_t u = 0;
        memcpy(&u, &v, sizeof(T));
        u = warp_op(kind, mask, u, param, width, file, line);
        memcpy(&v, &u, sizeof(T));
        return v;
    }
    template <class T> T idx(unsigned m, T v, int src, int w = 32) const { return shfl(OP_IDX, m, v, src, w); }
    template <class T> T bxor(unsigned m, T v, int lm, int w = 32) const { return shfl(OP_XOR, m, v, lm, w); }
    template <class T> T up(unsigned m, T v, unsigned d, int w = 32) const { return shfl(OP_UP, m, v, (int)d, w); }
    template <class T> T down(unsigned m, T v, unsigned d, int w = 32) const { return shfl(OP_DOWN, m, v, (int)d, w); }
    unsigned ballot(unsigned m, int p) const { return (unsigned)warp_op(OP_BALLOT, m, p != 0, 0, 32, file, line); }
    int any(unsigned m, int p) const { return (int)warp_op(OP_ANY, m, p != 0, 0, 32, file, line); }
    int all(unsigned m, int p) const { return (int)warp_op(OP_ALL, m, p != 0, 0, 32, file, line); }
    void syncwarp(unsigned m = 0xffffffffu) const { (void)warp_op(OP_SYNCWARP, m, 0, 0, 32, file, line); }
    void syncthreads() const { kemu::syncthreads(file, line); }
    template <class T> T ld(const T *p, const char *what) const {
        check_align(p, alignof(T), sizeof(T), what, file, line);
        return *p;
    }
    template <class T> void st(T *p, const T &v, const char *what) const {
        check_align(p, alignof(T), sizeof(T), what, file, line);
        *p = v;
    }
};
#define KEMU_SITE (kemu::site{ __FILE__, __LINE__ })
#define __shfl_sync(...) KEMU_SITE.idx(__VA_ARGS__)
#define __shfl_xor_sync(...) KEMU_SITE.bxor(__VA_ARGS__)
#define __shfl_up_sync(...) KEMU_SITE.up(__VA_ARGS__)
#define __shfl_down_sync(...) KEMU_SITE.down(__VA_ARGS__)
#define __ballot_sync(m, p) KEMU_SITE.ballot((m), (p))
#define __any_sync(m, p) KEMU_SITE.any((m), (p))
#define __all_sync(m, p) KEMU_SITE.all((m), (p))
#define __syncwarp(...) KEMU_SITE.syncwarp(__VA_ARGS__)
#define __syncthreads() KEMU_SITE.syncthreads()
#define __activemask() kemu::activemask()
/* the cache-hint loads and stores: a plain access, checked for the alignment of its type */
#define __ldg(p) KEMU_SITE.ld((p), "__ldg")
#define __ldcg(p) KEMU_SITE.ld((p), "__ldcg")
#define __ldca(p) KEMU_SITE.ld((p), "__ldca")
#define __ldcs(p) KEMU_SITE.ld((p), "__ldcs")
#define __ldlu(p) KEMU_SITE.ld((p), "__ldlu")
#define __ldcv(p) KEMU_SITE.ld((p), "__ldcv")
#define __stwb(p, v) KEMU_SITE.st((p), (v), "__stwb")
#define __stcg(p, v) KEMU_SITE.st((p), (v), "__stcg")
#define __stcs(p, v) KEMU_SITE.st((p), (v), "__stcs")
#define __stwt(p, v) KEMU_SITE.st((p), (v), "__stwt")

/* ---- bit casts and bit counts ---- */
template <class To, class From> inline To bitcast(From f) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
    To t;
    memcpy(&t, &f, sizeof t);
    return t;
}
inline unsigned __float_as_uint(float x) { return bitcast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return bitcast<float>(x); }
inline int __float_as_int(float x) { return bitcast<int>(x); }
inline float __int_as_float(int x) { return bitcast<float>(x); }
inline long long __double_as_longlong(double x) { return bitcast<long long>(x); }
inline double __longlong_as_double(long long x) { return bitcast<double>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }

/* ---- shared memory ----
   A __shared__ declaration becomes a proxy that each thread builds when it reaches the
   declaration; all threads of a block get the block's one instance (found by `key`, a static
   of the declaring function: one per declaration and template instance). Every access goes
   through kemu.cc, which checks the index, whether the element was written in this block,
   and the race rule (above). */
struct shvar;
shvar *shared_get(const void *key, size_t elem, size_t align, size_t n, const char *name, const char *file, int line);
shvar *shared_dynamic(size_t elem, size_t align, size_t *n, const char *name, const char *file, int line);
void *shared_at(shvar *v, int64_t i);       /* checks the index */
void shared_read(shvar *v, int64_t i);
void shared_write(shvar *v, int64_t i);

template <class T> class sref {
    shvar *v_;
    int64_t i_;
    T *p_;
public:
    sref(shvar *v, int64_t i) : v_(v), i_(i), p_((T *)shared_at(v, i)) {}
    operator T() const { shared_read(v_, i_); return *p_; }
    sref &operator=(const T &x) { shared_write(v_, i_); *p_ = x; return *this; }
    sref &operator=(const sref &o) { T x = o; return *this = x; }
    template <class U> sref &operator+=(const U &x) { T t = *this; t += x; return *this = t; }
    template <class U> sref &operator-=(const U &x) { T t = *this; t -= x; return *this = t; }
    template <class U> sref &operator*=(const U &x) { T t = *this; t *= x; return *this = t; }
    template <class U> sref &operator|=(const U &x) { T t = *this; t |= x; return *this = t; }
    template <class U> sref &operator&=(const U &x) { T t = *this; t &= x; return *this = t; }
    template <class U> sref &operator^=(const U &x) { T t = *this; t ^= x; return *this = t; }
};
template <class T> class sarr {
    shvar *v_;
public:
    sarr(void *key, size_t n, const char *name, const char *file, int line)
        : v_(shared_get(key, sizeof(T), alignof(T), n, name, file, line)) {}
    struct dynamic_tag {};
    sarr(dynamic_tag, const char *name, const char *file, int line) {
        size_t n;
        v_ = shared_dynamic(sizeof(T), alignof(T), &n, name, file, line);
    }
    sref<T> operator[](int64_t i) const { return sref<T>(v_, i); }
    /* no conversion to T *: a raw pointer would escape the checks (pass the proxy by
       reference instead: template <class SH> f(SH &sh) takes T[N] under nvcc and this here) */
};
template <class T> class svar : public sref<T> {
public:
    svar(void *key, const char *name, const char *file, int line)
        : sref<T>(shared_get(key, sizeof(T), alignof(T), 1, name, file, line), 0) {}
    using sref<T>::operator=;
    svar &operator=(const svar &o) { T x = o; sref<T>::operator=(x); return *this; }
};

/* ---- launches: kernel << cfg(...) << args(...) ---- */
struct cfg {
    const char *launcher, *file;
    int line;
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    cfg(const char *fn, const char *f, int l, dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0)
        : launcher(fn), file(f), line(l), grid(g), block(b), shmem(s), stream(st) {}
};
/* runs body(arg) for every thread of the grid; returns a cudaError_t */
int run_grid(const cfg &c, void (*body)(void *), void *arg);
/* the cudaError_t a GPU refuses this configuration with at launch (0: none), said on stderr */
int config_error(const cfg &c);

template <class... P> struct bound {
    void (*f)(P...);
    cfg c;
};
template <class... P> bound<P...> operator<<(void (*f)(P...), const cfg &c) { return bound<P...>{ f, c }; }
template <class... A> std::tuple<typename std::decay<A>::type...> args(A &&...a) {
    return std::tuple<typename std::decay<A>::type...>(std::forward<A>(a)...);
}

/* a launch: the kernel, its configuration and its parameters, copied at launch (by value, as
   CUDA copies them) */
template <class... P> struct closure {
    void (*f)(P...);
    cfg c;
    std::tuple<typename std::decay<P>::type...> a;
    template <size_t... I> void call(std::index_sequence<I...>) { f(std::get<I>(a)...); }
    static void body(void *p) {
        closure *k = (closure *)p;
        k->call(std::index_sequence_for<P...>{});
    }
    template <size_t... I> int check(std::index_sequence<I...>) {
        int e = 0;
        int r[] = { 0, (e = e ? e : check_ptr(std::get<I>(a), (int)I))... };
        (void)r;
        return e;
    }
    template <class X> int check_ptr(const X &x, int i) {
        return check_ptr_impl(x, i, std::is_pointer<X>{});
    }
    template <class X> int check_ptr_impl(const X &x, int i, std::true_type) {
        return kemu_host_check_ptr((const void *)x, c.launcher, i);
    }
    template <class X> int check_ptr_impl(const X &, int, std::false_type) { return 0; }
    static int run(void *p) {
        closure *k = (closure *)p;
        int e = k->check(std::index_sequence_for<P...>{});
        if (!e) e = run_grid(k->c, body, k);
        delete k;
        return e;
    }
    static void drop(void *p) { delete (closure *)p; }
};
template <class... P, class... A> void operator<<(const bound<P...> &b, std::tuple<A...> &&t) {
    int e = config_error(b.c);
    if (e) { kemu_host_launch_failed(e); return; }
    closure<P...> *k = new closure<P...>{ b.f, b.c, std::tuple<typename std::decay<P>::type...>(std::move(t)) };
    (void)kemu_host_submit(b.c.stream, b.c.launcher, closure<P...>::run, k, closure<P...>::drop);
}

} /* namespace kemu */

using kemu::__float_as_uint;
using kemu::__uint_as_float;
using kemu::__float_as_int;
using kemu::__int_as_float;
using kemu::__double_as_longlong;
using kemu::__longlong_as_double;
using kemu::__popc;
using kemu::__clz;
using kemu::__ffs;

#endif /* KEMU_H */
