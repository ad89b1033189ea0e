/* tests/kemu/kemu.cc - the runtime of the CPU grid emulator (tests/kemu/kemu.h says what it
   models and checks).

   A launch runs its blocks one after another on the calling thread (the CUDA double's stream
   worker in its asynchronous mode), in a seeded random order. A block's threads are fibers,
   one per CUDA thread, kept per OS thread and reused from block to block. A thread runs
   until it waits (a __syncthreads, a warp operation whose lanes have not all arrived) or
   ends, then switches straight to the next ready thread of the block in the block's order
   (forward or reverse, by the seed); only when none is ready does it switch back to the
   scheduler, which finds the block done, or deadlocked. The last thread to arrive at a
   barrier or a warp operation completes it and goes on without a switch. Nothing runs in
   parallel, so the emulator itself needs no locks; what it checks is what a GPU would leave
   undefined (kemu.h). */
#include "kemu.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KEMU_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(KEMU_ASAN)
#define KEMU_ASAN 1
#endif
#endif

extern "C" {
#ifdef KEMU_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif
}
/* Under ThreadSanitizer the fibers are invisible to it: every CUDA thread of a launch is the
   OS thread that runs the launch (the double's stream worker), as a kernel was when the
   double ran scalar copies. TSan checks the kernels' accesses against the host's and other
   streams' (what the double's asynchronous mode is for), at no cost per switch; races
   between the threads of one kernel are the shared-memory log's (below). TSan's shadow call
   stack interleaves across fibers, but each fiber pops only what it pushed, so it stays
   balanced (its reports' stacks may mix fibers). */

/* ---- the context switch ----
   x86-64 (System V): save the callee-saved registers on the old stack, swap stack pointers,
   restore from the new one. A new fiber's stack holds a frame whose return address is
   kemu_ctx_start, which calls r13(r12): the fiber's entry with its argument. Elsewhere:
   ucontext (slower: swapcontext also saves the signal mask). */
#if defined(__x86_64__) && !defined(KEMU_UCONTEXT)
#define KEMU_ASM_SWITCH 1
extern "C" void kemu_ctx_switch(void **save_sp, void *to_sp);
extern "C" void kemu_ctx_start(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl kemu_ctx_switch\n"
        ".hidden kemu_ctx_switch\n"
        ".type kemu_ctx_switch, @function\n"
        "kemu_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size kemu_ctx_switch, .-kemu_ctx_switch\n"
        ".p2align 4\n"
        ".globl kemu_ctx_start\n"
        ".hidden kemu_ctx_start\n"
        ".type kemu_ctx_start, @function\n"
        "kemu_ctx_start:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size kemu_ctx_start, .-kemu_ctx_start\n");
#else
#include <ucontext.h>
#endif

/* ---- reports ---- */
static long kemu_nreports;
static char kemu_last[1024];
static pthread_mutex_t kemu_report_mu = PTHREAD_MUTEX_INITIALIZER;

extern "C" long kemu_reports(void) { return __atomic_load_n(&kemu_nreports, __ATOMIC_SEQ_CST); }
extern "C" const char *kemu_last_report(void) { return kemu_last; }

namespace kemu {

__thread tls_t tls;

enum { L_READY, L_WARP, L_BAR, L_DONE, L_DEAD };
enum { MAX_THREADS = 1024, MAX_SHARED = 48 * 1024 };
static const size_t STACK_BYTES = 256 * 1024;

struct lane_rec {
    uint3 tid;
    int state, started;
    /* the warp operation or barrier it waits at */
    int kind, param, width;
    unsigned mask;
    uint64_t bits, res;
    const char *file;
    int line;
};
struct context {                /* a stack switched away from: the asm switch's sp, or ucontext */
#ifdef KEMU_ASM_SWITCH
    void *sp;
#else
    ucontext_t uc;
#endif
};
/* save the running context in from, resume to */
static inline void ctx_swap(context *from, context *to) {
#ifdef KEMU_ASM_SWITCH
    kemu_ctx_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
}
struct fiber {
    context ctx;
    char *map, *stack;          /* the mapping (a guard page, then the stack) */
    size_t map_bytes, stack_bytes;
    void *fake;                 /* ASan's fake stack while switched away */
    int fresh;                  /* its context must be (re)made before it runs */
};
struct shadow {                 /* one element of a shared variable, in this block */
    int32_t w_tid, r_tid;       /* the last writer; the reader of r_ep (-2: several) */
    uint32_t w_ep, w_wep, r_ep, r_wep;
    uint8_t written;
};
struct shvar {
    const void *key;
    char *data;
    shadow *sh;
    size_t elem, n;
    const char *name, *file;
    int line;
};
struct exec {                   /* one per OS thread that runs grids */
    fiber *fib[MAX_THREADS];
    int nfib;
    context sched;
    const void *sched_bottom;
    size_t sched_size;
    void *sched_fake;
    int from_sched;             /* ASan: the fiber being entered comes from the scheduler's stack */
    int reverse;                /* this block's order of threads */
    /* the launch */
    const cfg *c;
    void (*body)(void *);
    void *arg;
    int err;                    /* the cudaError_t of its first report */
    /* the block */
    lane_rec lanes[MAX_THREADS];
    int n, cur, in_lane, exited, at_bar;
    const char *bar_file;
    int bar_line;
    uint32_t epoch, wep[MAX_THREADS / 32];
    /* per warp, a bit per lane: exited (or dead), waiting at __syncthreads, at a warp operation */
    unsigned w_done[MAX_THREADS / 32], w_bar[MAX_THREADS / 32], w_wait[MAX_THREADS / 32];
    shvar vars[16];
    int nvars;
    size_t shared_bytes;
};
static __thread exec *kemu_ex;
static pthread_key_t kemu_key;
static pthread_once_t kemu_once = PTHREAD_ONCE_INIT;

static const char *base_name(const char *f) {
    const char *s = f ? strrchr(f, '/') : NULL;
    return s ? s + 1 : f ? f : "?";
}

static void vsay(exec *x, int code, const char *file, int line, const char *fmt, va_list ap) {
    char msg[640], where[320] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (x && x->c)
        snprintf(where, sizeof where, " [kernel launched by %s at %s:%d, grid (%u,%u,%u) x block (%u,%u,%u); block (%u,%u,%u)%s",
                 x->c->launcher, base_name(x->c->file), x->c->line, tls.gdim.x, tls.gdim.y, tls.gdim.z, tls.bdim.x,
                 tls.bdim.y, tls.bdim.z, tls.bid.x, tls.bid.y, tls.bid.z, x->in_lane ? "" : "]");
    pthread_mutex_lock(&kemu_report_mu);
    if (x && x->c && x->in_lane)
        snprintf(kemu_last, sizeof kemu_last, "%s:%d: %s%s, thread (%u,%u,%u)]", base_name(file), line, msg, where,
                 tls.tid.x, tls.tid.y, tls.tid.z);
    else
        snprintf(kemu_last, sizeof kemu_last, "%s:%d: %s%s", base_name(file), line, msg, where);
    fprintf(stderr, "kemu: %s\n", kemu_last);
    fflush(stderr);
    kemu_nreports++;
    pthread_mutex_unlock(&kemu_report_mu);
    if (x && !x->err) x->err = code;
}
static void say(exec *x, int code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(x, code, file, line, fmt, ap);
    va_end(ap);
}

static void to_sched(exec *x);
/* a finding inside a kernel: report it and leave the thread for good (the block and the
   launch stop; the fibers left mid-kernel are remade before their next use) */
[[noreturn]] static void fail(int code, const char *file, int line, const char *fmt, ...) {
    exec *x = kemu_ex;
    va_list ap;
    va_start(ap, fmt);
    vsay(x, code, file, line, fmt, ap);
    va_end(ap);
    if (!x || !x->in_lane) abort();      /* a device intrinsic called outside a kernel */
    x->lanes[x->cur].state = L_DEAD;
    x->w_done[x->cur / 32] |= 1u << (x->cur & 31);
    to_sched(x);
    abort();                             /* never resumed */
}
static exec *in_kernel(const char *what, const char *file, int line) {
    exec *x = kemu_ex;
    if (!x || !x->in_lane) {
        fprintf(stderr, "kemu: %s:%d: %s called outside a kernel\n", base_name(file), line, what);
        abort();
    }
    return x;
}

/* ---- fibers ---- */
static void fiber_main(fiber *f);
#ifndef KEMU_ASM_SWITCH
static void fiber_entry_uc(unsigned lo, unsigned hi) {
    fiber_main((fiber *)(((uintptr_t)hi << 32) | lo));
}
#endif

static void fiber_make(fiber *f) {
#ifdef KEMU_ASAN
    __asan_unpoison_memory_region(f->stack, f->stack_bytes);
#endif
#ifdef KEMU_ASM_SWITCH
    uintptr_t top = ((uintptr_t)(f->stack + f->stack_bytes)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = (void *)kemu_ctx_start;      /* ret pops it: rsp is then 16-aligned, as a call needs */
    *--sp = NULL;                        /* rbp */
    *--sp = NULL;                        /* rbx */
    *--sp = (void *)f;                   /* r12: the argument */
    *--sp = (void *)fiber_main;          /* r13: the entry */
    *--sp = NULL;                        /* r14 */
    *--sp = NULL;                        /* r15 */
    f->ctx.sp = sp;
#else
    uintptr_t u = (uintptr_t)f;
    getcontext(&f->ctx.uc);
    f->ctx.uc.uc_stack.ss_sp = f->stack;
    f->ctx.uc.uc_stack.ss_size = f->stack_bytes;
    f->ctx.uc.uc_link = NULL;
    makecontext(&f->ctx.uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)(u & 0xffffffffu), (unsigned)(u >> 32));
#endif
    f->fresh = 0;
}
static fiber *fiber_new(void) {
    fiber *f = (fiber *)calloc(1, sizeof *f);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!f) return NULL;
    f->map_bytes = STACK_BYTES + page;
    f->map = (char *)mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->map == MAP_FAILED) { free(f); return NULL; }
    mprotect(f->map, page, PROT_NONE);   /* a stack overflow faults instead of corrupting */
    f->stack = f->map + page;
    f->stack_bytes = STACK_BYTES;
    f->fresh = 1;
    return f;
}
static void fiber_free(fiber *f) {
    munmap(f->map, f->map_bytes);
    free(f);
}

#ifdef KEMU_ASAN
/* ASan: fiber f runs again (or for the first time: fake NULL); the scheduler's stack bounds
   are learnt only when it is the scheduler that switched to it */
static void kemu_asan_entered(exec *x, fiber *f) {
    const void *bottom = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(f ? f->fake : NULL, &bottom, &size);
    if (x->from_sched) { x->sched_bottom = bottom; x->sched_size = size; }
}
#endif
/* thread t is the current one now: its fiber, ready to be switched to */
static fiber *lane_take(exec *x, int t) {
    fiber *f = x->fib[t];
    x->cur = t;
    tls.tid = x->lanes[t].tid;
    x->lanes[t].started = 1;
    if (f->fresh) fiber_make(f);
    return f;
}
static void to_lane(exec *x, int t) {
    fiber *f = lane_take(x, t);
    x->in_lane = 1;
#ifdef KEMU_ASAN
    x->from_sched = 1;
    __sanitizer_start_switch_fiber(&x->sched_fake, f->stack, f->stack_bytes);
#endif
    ctx_swap(&x->sched, &f->ctx);
#ifdef KEMU_ASAN
    __sanitizer_finish_switch_fiber(x->sched_fake, NULL, NULL);
#endif
    x->in_lane = 0;
}
static void to_sched(exec *x) {
    fiber *f = x->fib[x->cur];
#ifdef KEMU_ASAN
    __sanitizer_start_switch_fiber(&f->fake, x->sched_bottom, x->sched_size);
#endif
    ctx_swap(&f->ctx, &x->sched);
#ifdef KEMU_ASAN
    kemu_asan_entered(x, f);
#endif
}
/* the next ready thread after the current one in the block's order, -1: none */
static int next_ready(const exec *x) {
    const int n = x->n, cur = x->cur;
    int t;
    if (x->err) return -1;
    if (x->reverse) {
        for (t = cur - 1; t >= 0; t--) if (x->lanes[t].state == L_READY) return t;
        for (t = n - 1; t > cur; t--) if (x->lanes[t].state == L_READY) return t;
    } else {
        for (t = cur + 1; t < n; t++) if (x->lanes[t].state == L_READY) return t;
        for (t = 0; t < cur; t++) if (x->lanes[t].state == L_READY) return t;
    }
    return -1;
}
/* the current thread waits or has ended: on to the next ready one, or the scheduler */
static void yield_lane(exec *x) {
    const int from = x->cur, to = next_ready(x);
    fiber *f, *g;
    if (to < 0) { to_sched(x); return; }
    f = x->fib[from];
    g = lane_take(x, to);
#ifdef KEMU_ASAN
    x->from_sched = 0;
    __sanitizer_start_switch_fiber(&f->fake, g->stack, g->stack_bytes);
#endif
    ctx_swap(&f->ctx, &g->ctx);
#ifdef KEMU_ASAN
    kemu_asan_entered(x, f);
#endif
}

static void lane_exit(exec *x);
/* a fiber runs the kernel for whichever thread it is switched to, again and again */
static void fiber_main(fiber *f) {
    exec *x = kemu_ex;
    (void)f;
#ifdef KEMU_ASAN
    kemu_asan_entered(x, NULL);
#endif
    for (;;) {
        x->body(x->arg);
        lane_exit(x);
        yield_lane(x);
    }
}

static void exec_free(void *p) {
    exec *x = (exec *)p;
    int i;
    if (!x) return;
    for (i = 0; i < x->nfib; i++) fiber_free(x->fib[i]);
    free(x);
}
static void key_make(void) { pthread_key_create(&kemu_key, exec_free); }
static exec *exec_get(void) {
    if (!kemu_ex) {
        pthread_once(&kemu_once, key_make);
        kemu_ex = (exec *)calloc(1, sizeof *kemu_ex);
        if (!kemu_ex) return NULL;
        pthread_setspecific(kemu_key, kemu_ex);
    }
    return kemu_ex;
}

/* ---- barriers and warp operations ---- */
static const char *op_name(int kind) {
    static const char *const names[] = { "__shfl_sync", "__shfl_xor_sync", "__shfl_up_sync", "__shfl_down_sync",
                                         "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp" };
    return kind >= 0 && kind <= OP_SYNCWARP ? names[kind] : "?";
}
static int same_site(const char *f1, int l1, const char *f2, int l2) {
    return l1 == l2 && (f1 == f2 || (f1 && f2 && strcmp(f1, f2) == 0));
}

/* a thread ended: nobody may be waiting for it */
static void lane_exit(exec *x) {
    const int t = x->cur, base = t & ~31;
    unsigned waiting = x->w_wait[t / 32];
    x->lanes[t].state = L_DONE;
    x->w_done[t / 32] |= 1u << (t & 31);
    x->exited++;
    for (; waiting; waiting &= waiting - 1) {
        const int j = base + __builtin_ctz(waiting);
        const lane_rec *J = &x->lanes[j];
        if (J->mask >> (t - base) & 1u)
            fail(cudaErrorLaunchFailure, J->file, J->line,
                 "%s with mask 0x%08x: lane %d waits for lane %d, which exited without reaching it", op_name(J->kind),
                 J->mask, j - base, t - base);
    }
    if (x->at_bar > 0)
        fail(cudaErrorLaunchFailure, x->bar_file, x->bar_line,
             "__syncthreads reached by part of the block: thread %d exited while %d threads wait there", t, x->at_bar);
}

void syncthreads(const char *file, int line) {
    exec *x = in_kernel("__syncthreads", file, line);
    const int t = x->cur, base = t & ~31;
    lane_rec *L = &x->lanes[t];
    unsigned waiting = x->w_wait[t / 32];
    int j;
    if (x->exited > 0)
        fail(cudaErrorLaunchFailure, file, line,
             "__syncthreads reached by part of the block: %d of its %d threads exited before it", x->exited, x->n);
    for (; waiting; waiting &= waiting - 1) {
        j = base + __builtin_ctz(waiting);
        const lane_rec *J = &x->lanes[j];
        if (J->mask >> (t - base) & 1u)
            fail(cudaErrorLaunchFailure, file, line,
                 "thread %d reaches __syncthreads while lane %d of its warp waits for it at %s (%s:%d, mask 0x%08x)", t,
                 j - base, op_name(J->kind), base_name(J->file), J->line, J->mask);
    }
    if (x->at_bar > 0 && !same_site(file, line, x->bar_file, x->bar_line))
        fail(cudaErrorLaunchFailure, file, line, "threads wait at different __syncthreads: this one and %s:%d",
             base_name(x->bar_file), x->bar_line);
    if (x->at_bar == 0) { x->bar_file = file; x->bar_line = line; }
    L->state = L_BAR;
    L->file = file;
    L->line = line;
    x->w_bar[t / 32] |= 1u << (t & 31);
    if (++x->at_bar == x->n) {            /* the last one: release the block */
        x->at_bar = 0;
        x->epoch++;
        for (j = 0; j < x->n; j++) x->lanes[j].state = L_READY;
        memset(x->w_bar, 0, sizeof x->w_bar);
    } else {
        yield_lane(x);
    }
}

unsigned activemask(void) {
    exec *x = in_kernel("__activemask", __FILE__, __LINE__);
    const int base = x->cur & ~31;
    unsigned m = 0;
    int j;
    for (j = base; j < base + 32 && j < x->n; j++)
        if (x->lanes[j].state != L_DONE && x->lanes[j].state != L_DEAD) m |= 1u << (j - base);
    return m;
}

uint64_t warp_op(int kind, unsigned mask, uint64_t bits, int param, int width, const char *file, int line) {
    /* param (srcLane, laneMask, delta) is each lane's own */
    exec *x = in_kernel(op_name(kind), file, line);
    const int t = x->cur, base = t & ~31, l = t - base, w = t / 32;
    const int nw = x->n - base < 32 ? x->n - base : 32;
    const unsigned valid = nw == 32 ? 0xffffffffu : (1u << nw) - 1u;
    lane_rec *L = &x->lanes[t];
    int j;
    if (!(mask >> l & 1u))
        fail(cudaErrorLaunchFailure, file, line, "lane %d calls %s with mask 0x%08x, which leaves it out", l,
             op_name(kind), mask);
    if (mask & ~valid)
        fail(cudaErrorLaunchFailure, file, line,
             "%s with mask 0x%08x names lanes that do not exist (this warp has %d threads)", op_name(kind), mask, nw);
    if (kind <= OP_DOWN && (width < 1 || width > 32 || (width & (width - 1))))
        fail(cudaErrorLaunchFailure, file, line, "%s with width %d: the width must be a power of two from 1 to 32",
             op_name(kind), width);
    L->kind = kind; L->mask = mask; L->bits = bits; L->param = param; L->width = width;
    L->file = file; L->line = line;
    L->state = L_WARP;
    if (mask & x->w_done[w]) {
        j = __builtin_ctz(mask & x->w_done[w]);
        fail(cudaErrorLaunchFailure, file, line, "%s with mask 0x%08x names lane %d, which has exited", op_name(kind),
             mask, j);
    }
    if (mask & x->w_bar[w]) {
        const lane_rec *J = &x->lanes[base + __builtin_ctz(mask & x->w_bar[w])];
        fail(cudaErrorLaunchFailure, file, line, "%s with mask 0x%08x names lane %d, which waits at __syncthreads (%s:%d)",
             op_name(kind), mask, (int)(J - &x->lanes[base]), base_name(J->file), J->line);
    }
    x->w_wait[w] |= 1u << l;
    if ((x->w_wait[w] & mask) != mask) {  /* not all there yet */
        yield_lane(x);
        return L->res;
    }
    /* all there: they must all be at this operation, with this mask */
    for (j = 0; j < 32; j++) {
        const lane_rec *J = &x->lanes[base + j];
        if (!(mask >> j & 1u) || j == l) continue;
        if (J->kind != kind || J->mask != mask || J->width != width || !same_site(J->file, J->line, file, line))
            fail(cudaErrorLaunchFailure, file, line,
                 "lanes of one mask at different warp operations: lane %d at %s (mask 0x%08x, width %d), lane %d "
                 "at %s (%s:%d, mask 0x%08x, width %d)",
                 l, op_name(kind), mask, width, j, op_name(J->kind), base_name(J->file), J->line, J->mask, J->width);
    }
    /* every lane of the mask is here: complete the operation for all of them */
    uint64_t vote = 0;
    int any = 0, all = 1;
    for (j = 0; j < 32; j++)
        if (mask >> j & 1u) {
            const int p = x->lanes[base + j].bits != 0;
            vote |= (uint64_t)p << j;
            any |= p;
            all &= p;
        }
    if (kind == OP_SYNCWARP) x->wep[w]++;
    for (j = 0; j < 32; j++) {
        lane_rec *J = &x->lanes[base + j];
        int src = j;
        const int seg = j & ~(width - 1);
        if (!(mask >> j & 1u)) continue;
        switch (kind) {
        case OP_IDX: src = seg + (int)((unsigned)J->param % (unsigned)width); break;
        case OP_XOR: src = j ^ J->param; if (src < 0 || src >= seg + width || src > 31) src = j; break;
        case OP_UP: src = j - J->param; if (src < seg) src = j; break;
        case OP_DOWN: src = j + J->param; if (src >= seg + width) src = j; break;
        default: break;
        }
        if (kind <= OP_DOWN) {
            if (!(mask >> src & 1u))
                fail(cudaErrorLaunchFailure, file, line,
                     "%s with mask 0x%08x: lane %d reads lane %d, which is not in the mask (an undefined value)",
                     op_name(kind), mask, j, src);
            J->res = x->lanes[base + src].bits;
        } else {
            J->res = kind == OP_BALLOT ? vote : kind == OP_ANY ? (uint64_t)any : kind == OP_ALL ? (uint64_t)all : 0;
        }
        J->state = L_READY;
    }
    x->w_wait[w] &= ~mask;
    return L->res;
}

void check_align(const void *p, size_t align, size_t bytes, const char *what, const char *file, int line) {
    if (((uintptr_t)p & (align - 1)) != 0)
        fail(cudaErrorMisalignedAddress, file, line,
             "misaligned address: %s of %zu bytes at %p, which is not %zu-byte aligned", what, bytes, p, align);
}

/* ---- shared memory ---- */
shvar *shared_get(const void *key, size_t elem, size_t align, size_t n, const char *name, const char *file,
                  int line) {
    exec *x = in_kernel("a __shared__ declaration", file, line);
    shvar *v;
    int i;
    void *data = NULL;
    const size_t bytes = elem * n;
    for (i = 0; i < x->nvars; i++)
        if (x->vars[i].key == key) return &x->vars[i];
    if (x->nvars == (int)(sizeof x->vars / sizeof x->vars[0]))
        fail(cudaErrorLaunchFailure, file, line, "more than %d __shared__ declarations in one kernel (kemu's limit)",
             (int)(sizeof x->vars / sizeof x->vars[0]));
    if (bytes > MAX_SHARED - x->shared_bytes)
        fail(cudaErrorInvalidValue, file, line,
             "__shared__ %s: %zu bytes, over the %d bytes of static shared memory a block may have", name,
             x->shared_bytes + bytes, (int)MAX_SHARED);
    if (posix_memalign(&data, align < sizeof(void *) ? sizeof(void *) : align, bytes > 0 ? bytes : 1) != 0)
        fail(cudaErrorMemoryAllocation, file, line, "out of host memory for __shared__ %s", name);
    v = &x->vars[x->nvars++];
    v->key = key;
    v->data = (char *)data;
    memset(v->data, 0xff, bytes);      /* never-written shared memory reads as NaN bytes */
    v->sh = (shadow *)calloc(n ? n : 1, sizeof *v->sh);
    if (!v->sh) fail(cudaErrorMemoryAllocation, file, line, "out of host memory for __shared__ %s", name);
    v->elem = elem; v->n = n; v->name = name; v->file = file; v->line = line;
    x->shared_bytes += bytes;
    return v;
}
shvar *shared_dynamic(size_t elem, size_t align, size_t *n, const char *name, const char *file, int line) {
    static char dyn_key;                 /* every extern __shared__ array is the same memory */
    exec *x = in_kernel("an extern __shared__ declaration", file, line);
    *n = x->c->shmem / elem;
    return shared_get(&dyn_key, elem, align, *n, name, file, line);
}
static void shared_free(exec *x) {
    int i;
    for (i = 0; i < x->nvars; i++) { free(x->vars[i].data); free(x->vars[i].sh); }
    x->nvars = 0;
    x->shared_bytes = 0;
}
void *shared_at(shvar *v, int64_t i) {
    if (i < 0 || (uint64_t)i >= v->n)
        fail(cudaErrorIllegalAddress, v->file, v->line, "__shared__ %s[%lld]: out of bounds (it has %zu elements)",
             v->name, (long long)i, v->n);
    return v->data + (size_t)i * v->elem;
}
/* whether an access by thread a (epoch ep, its warp's __syncwarp count wep) and one by thread
   b now are unordered: the same barrier interval, and for one warp, the same __syncwarp one */
static int unordered(const exec *x, int a, uint32_t ep, uint32_t wep, int b) {
    return ep == x->epoch && (a / 32 != b / 32 || wep == x->wep[b / 32]);
}
void shared_read(shvar *v, int64_t i) {
    exec *x = kemu_ex;
    shadow *s = &v->sh[i];
    const int t = x->cur;
    if (!s->written)
        fail(cudaErrorLaunchFailure, v->file, v->line,
             "thread %d reads __shared__ %s[%lld], which no thread of this block has written", t, v->name,
             (long long)i);
    if (s->w_tid != t && unordered(x, s->w_tid, s->w_ep, s->w_wep, t))
        fail(cudaErrorLaunchFailure, v->file, v->line,
             "race on __shared__ %s[%lld]: thread %d reads it, thread %d wrote it, no barrier between", v->name,
             (long long)i, t, s->w_tid);
    if (s->r_ep != x->epoch) {
        s->r_tid = t; s->r_ep = x->epoch; s->r_wep = x->wep[t / 32];
    } else if (s->r_tid != t) {
        s->r_tid = -2;
    }
}
void shared_write(shvar *v, int64_t i) {
    exec *x = kemu_ex;
    shadow *s = &v->sh[i];
    const int t = x->cur;
    if (s->written && s->w_tid != t && unordered(x, s->w_tid, s->w_ep, s->w_wep, t))
        fail(cudaErrorLaunchFailure, v->file, v->line,
             "race on __shared__ %s[%lld]: threads %d and %d both write it, no barrier between", v->name,
             (long long)i, s->w_tid, t);
    if (s->r_ep == x->epoch && s->r_tid != t && (s->r_tid == -2 || unordered(x, s->r_tid, s->r_ep, s->r_wep, t)))
        fail(cudaErrorLaunchFailure, v->file, v->line,
             "race on __shared__ %s[%lld]: thread %d writes it, %s read it, no barrier between", v->name,
             (long long)i, t, s->r_tid == -2 ? "other threads" : "another thread");
    s->w_tid = t; s->w_ep = x->epoch; s->w_wep = x->wep[t / 32]; s->written = 1;
}

/* ---- blocks and grids ---- */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) { uint64_t r = a % b; a = b; b = r; }
    return a;
}
static long env_long(const char *name, long dflt) {
    const char *e = getenv(name);
    return e && e[0] ? strtol(e, NULL, 0) : dflt;
}

/* why no thread can move: each waiting thread's operation, the first few */
static void deadlock(exec *x) {
    int j, shown = 0;
    for (j = 0; j < x->n && shown < 4; j++) {
        const lane_rec *J = &x->lanes[j];
        if (J->state != L_WARP && J->state != L_BAR) continue;
        say(x, cudaErrorLaunchFailure, J->file, J->line, "deadlock: thread %d waits at %s%s", j,
            J->state == L_BAR ? "__syncthreads" : op_name(J->kind), J->state == L_BAR ? "" : " for lanes that never come");
        shown++;
    }
}

static int run_block(exec *x, int reverse) {
    const int n = x->n;
    x->reverse = reverse;
    const unsigned bx = tls.bdim.x, by = tls.bdim.y;
    int t, k;
    for (t = 0; t < n; t++) {
        lane_rec *L = &x->lanes[t];
        L->started = 0;
        L->tid.x = (unsigned)t % bx;
        L->tid.y = ((unsigned)t / bx) % by;
        L->tid.z = (unsigned)t / (bx * by);
        L->state = L_READY;
    }
    x->exited = 0; x->at_bar = 0; x->epoch = 1;
    memset(x->wep, 0, sizeof x->wep);
    memset(x->w_done, 0, sizeof x->w_done);
    memset(x->w_bar, 0, sizeof x->w_bar);
    memset(x->w_wait, 0, sizeof x->w_wait);
    for (;;) {
        int ran = 0;
        for (k = 0; k < n && !x->err; k++) {
            t = reverse ? n - 1 - k : k;
            if (x->lanes[t].state == L_READY) { to_lane(x, t); ran = 1; }
        }
        if (x->err || x->exited == n) break;
        if (!ran) { deadlock(x); break; }
    }
    if (x->err)                         /* threads left mid-kernel: remake their fibers */
        for (t = 0; t < n; t++)
            if (x->lanes[t].started && x->lanes[t].state != L_DONE) x->fib[t]->fresh = 1;
    shared_free(x);
    return x->err;
}

int config_error(const cfg &c) {
    const uint64_t threads = (uint64_t)c.block.x * c.block.y * c.block.z;
    if (threads == 0 || threads > MAX_THREADS || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64 ||
        c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 ||
        c.grid.z > 65535) {
        say(NULL, 0, c.file, c.line, "invalid launch configuration by %s: grid (%u,%u,%u), block (%u,%u,%u)",
            c.launcher, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z);
        return cudaErrorInvalidConfiguration;
    }
    if (c.shmem > MAX_SHARED) {
        say(NULL, 0, c.file, c.line, "launch by %s asks for %zu bytes of dynamic shared memory (at most %d)",
            c.launcher, c.shmem, (int)MAX_SHARED);
        return cudaErrorInvalidValue;
    }
    return 0;
}

int run_grid(const cfg &c, void (*body)(void *), void *arg) {
    static uint64_t launches;
    exec *x;
    int e;
    uint64_t nb, i, a, b, seed;
    long cap = env_long("ZERO_KEMU_MAX_GRID", 0);
    if ((e = config_error(c)) != 0) return e;
    if (!(x = exec_get())) return cudaErrorMemoryAllocation;
    if (x->c) {
        say(NULL, 0, c.file, c.line, "a kernel launched from inside a kernel (not supported)");
        return cudaErrorLaunchFailure;
    }
    x->n = (int)(c.block.x * c.block.y * c.block.z);
    while (x->nfib < x->n) {
        fiber *f = fiber_new();
        if (!f) return cudaErrorMemoryAllocation;
        x->fib[x->nfib++] = f;
    }
    tls.bdim = make_uint3(c.block.x, c.block.y, c.block.z);
    tls.gdim = make_uint3(c.grid.x, c.grid.y, c.grid.z);
    if (cap > 0 && tls.gdim.x > (unsigned)cap) tls.gdim.x = (unsigned)cap;
    x->c = &c; x->body = body; x->arg = arg; x->err = 0;
    nb = (uint64_t)tls.gdim.x * tls.gdim.y * tls.gdim.z;
    /* a seeded order of the blocks: i -> (a i + b) mod nb with a coprime to nb */
    seed = mix((uint64_t)env_long("ZERO_KEMU_SEED", 1) ^ mix(__atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST)));
    a = nb > 1 ? 1 + mix(seed) % (nb - 1) : 1;
    while (gcd(a, nb) != 1) a++;
    b = nb ? mix(seed + 1) % nb : 0;
    for (i = 0; i < nb && !x->err; i++) {
        const uint64_t k = (uint64_t)(((unsigned __int128)a * i + b) % nb);
        tls.bid.x = (unsigned)(k % tls.gdim.x);
        tls.bid.y = (unsigned)(k / tls.gdim.x % tls.gdim.y);
        tls.bid.z = (unsigned)(k / ((uint64_t)tls.gdim.x * tls.gdim.y));
        (void)run_block(x, (int)(mix(seed + i) & 1));
    }
    e = x->err;
    x->c = NULL;
    return e;
}

} /* namespace kemu */
