/* tests/cuda_mock/nccl_mock.c - a test double of NCCL for the CUDA test double
   (tests/cuda_mock/cuda_mock.c): `make build/mock/<name>` links it instead of libnccl, so
   zero.h's NCCL communicator (>>comm, nccl) runs its own code without a GPU or a network.

   What it models:
   - ranks are threads of one process on the double's device memory (which is host memory);
     they meet through a process-wide registry keyed by the ncclUniqueId (ncclGetUniqueId
     makes a fresh one: pid, a counter, the clock);
   - init: ncclCommInitRankConfig with config->blocking = 0 returns ncclInProgress, and
     ncclCommGetAsyncError says ncclInProgress until every rank joined; blocking init waits.
     A join is also recorded in a small shared file ($TMPDIR/zero_nccl_mock_<id>, mmap'd,
     removed when this process's last rank of it is gone, or one left before all joined), so ranks in forked processes that
     got the same id (the TCP rendezvous) finish their init handshake too. Data moves only
     between ranks in one process: a collective on a communicator whose ranks are in other
     processes fails with ncclInvalidUsage and says so;
   - two ranks of one communicator on the same device (in this process) fail the init with
     ncclInvalidUsage, as NCCL does ("duplicate GPU");
   - every call (a collective, or a group of ncclSend/ncclRecv closed by ncclGroupEnd) is an
     op queued on the caller's stream with cudaLaunchHostFunc, so it runs when the stream
     gets to it (the asynchronous double's ordering rules apply; in its synchronous mode it
     runs at issue and blocks the caller until the peers called too, so a peer that never
     calls holds it until the hang limit: the failure tests run in the asynchronous mode,
     where the caller polls and aborts at its own timeout, as with NCCL). Op k of every rank of
     a communicator meets op k of the others: they are checked against each other first
     (kind, count, datatype, root, reduction; each ncclSend has its ncclRecv with the same
     bytes) and a mismatch sets ncclInvalidUsage on every rank with a message
     (ncclGetLastError) instead of hanging; then each rank reads its peers' send buffers
     into a private buffer, all wait until all have read, and each writes its receive
     buffer (so in-place calls are safe);
   - the reductions (ncclSum only) add in ring order, chunk j of the output ending at rank
     j, rounded to the datatype at every step (fp16/bf16 in fp32 then rounded), as NCCL's
     ring does: NOT bitwise the local comm's fp32 sum in rank order;
   - non-blocking communicators return ncclInProgress from each call (and ncclGroupEnd) and
     say ncclInProgress once more in ncclCommGetAsyncError before ncclSuccess;
   - ncclCommAbort: every op of that rank, queued or waiting, gives up, and no op of the
     communicator completes any more: its peers wait, as on NCCL, until they abort too. A
     rank that never arrives leaves its peers waiting the same way (zero.h's timeout); one
     that destroyed its communicator instead ends its peers' waits with ncclRemoteError.
     Nobody waits longer than ZERO_NCCL_MOCK_HANG_MS (default 60000): then ncclSystemError
     with a message naming the call: never a hang;
   - ncclCommSplit: a collective of the parent's ranks (see "ncclCommSplit" below: blocking or
     not, colors and keys as NCCL orders them, what it refuses);
   - ZERO_NCCL_MOCK_FAIL=NAME:N: the Nth call of NAME (ncclSend, ncclAllGather, ...) fails
     with ncclSystemError, for zero.h's error paths. */
#define _POSIX_C_SOURCE 200809L
#ifndef ZERO_CUDA
#define ZERO_CUDA
#endif
#define ZERO_KERNELS
#include "../../zero.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NM_MAX_RANKS 64
#define NM_MAGIC 0x4e434d4bU
#define NM_ID_MAGIC "zero-nccl-mock"

enum { NM_AG = 1, NM_RS, NM_AR, NM_BC, NM_SEND, NM_RECV };
static const char *nm_kind_name(int k) {
    static const char *n[] = { "?", "ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclBroadcast", "ncclSend",
                               "ncclRecv" };
    return k >= 1 && k <= 6 ? n[k] : n[0];
}

typedef struct nm_item {
    int kind, peer;                 /* peer: the root (broadcast), the peer (send/recv) */
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
} nm_item;

struct nm_clique;
struct ncclComm {
    unsigned magic;
    struct nm_clique *q;
    int rank, n, device, blocking;
    int aborted, gone;              /* gone: destroyed or aborted */
    int refs;                       /* the user's handle + ops queued */
    int pending;                    /* non-blocking: GetAsyncError says InProgress once more */
    ncclResult_t err;               /* sticky */
    uint64_t issued;                /* ops queued */
    int split_pending;              /* this rank's ncclCommSplit of this communicator has not completed */
    int ready;                      /* its init was reported complete (GetAsyncError or a blocking init) */
    char last[512];
};

typedef struct nm_op {
    struct ncclComm *c;
    uint64_t seq;
    int n;
    nm_item it[2 * NM_MAX_RANKS];
} nm_op;

typedef struct nm_shared {          /* the cross-process join record */
    int n;
    int joined;
    unsigned char who[NM_MAX_RANKS];
} nm_shared;

typedef struct nm_clique {
    struct nm_clique *next;
    ncclUniqueId id;
    int n, joined, refs;
    struct ncclComm *rank[NM_MAX_RANKS];   /* NULL once freed */
    unsigned char gone[NM_MAX_RANKS];      /* destroyed or aborted */
    int dev[NM_MAX_RANKS];
    int computing;                  /* ranks reading their peers' buffers now */
    uint64_t gen;                   /* the op number being exchanged (from 1) */
    int arrived, nread, left;
    nm_op *post[NM_MAX_RANKS];
    unsigned char read[NM_MAX_RANKS];
    ncclResult_t err;               /* a failure of the whole communicator (a mismatch, the hang limit) */
    int op_err;                     /* err came after every rank joined: from a call, not the init. A rank
                                       still polling its init then completes it (its init is done, as on
                                       NCCL) and meets the error at its next call or poll */
    int dead;                       /* a rank aborted: no op completes any more (its peers wait, as on
                                       NCCL, until they abort too or the hang limit) */
    char msg[512];
    nm_shared *sh;                  /* mmap'd join record (NULL: a split's clique, made whole in this process) */
    char shpath[256];
    /* ncclCommSplit: the round being gathered, every rank's color, key and new communicator
       (pending: the round holds a reference; NULL for NCCL_SPLIT_NOCOLOR) */
    int sarrived;
    unsigned char sposted[NM_MAX_RANKS];
    int scolor[NM_MAX_RANKS], skey[NM_MAX_RANKS];
    struct ncclComm *snew[NM_MAX_RANKS];
} nm_clique;

static pthread_mutex_t nm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nm_cv = PTHREAD_COND_INITIALIZER;
static nm_clique *nm_cliques;
static __thread char nm_last[512];

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static ncclResult_t nm_err(struct ncclComm *c, ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    snprintf(nm_last, sizeof nm_last, "%s", buf);
    if (c) snprintf(c->last, sizeof c->last, "%s", buf);
    return r;
}

static int nm_inject(const char *name) {
    static long calls;
    const char *e = getenv("ZERO_NCCL_MOCK_FAIL"), *colon;
    size_t len;
    if (!e || !(colon = strchr(e, ':'))) return 0;
    len = (size_t)(colon - e);
    if (strlen(name) != len || strncmp(e, name, len) != 0) return 0;
    if (__atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) != atol(colon + 1)) return 0;
    fprintf(stderr, "nccl_mock: ZERO_NCCL_MOCK_FAIL: %s fails (call %ld)\n", name, atol(colon + 1));
    return 1;
}
static double nm_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
static int nm_hang_ms(void) {
    const char *e = getenv("ZERO_NCCL_MOCK_HANG_MS");
    return e && atoi(e) > 0 ? atoi(e) : 60000;
}
/* waits on nm_cv (nm_mu held) for at most 50 ms */
static void nm_wait(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&nm_cv, &nm_mu, &ts);
}

static size_t nm_tsize(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

/* ---- ids, the registry and the join record ---- */
ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static uint64_t counter;
    uint64_t v[3];
    struct timespec ts;
    if (!id) return nm_err(NULL, ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
    if (nm_inject("ncclGetUniqueId")) return nm_err(NULL, ncclSystemError, "ncclGetUniqueId: injected failure");
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, NM_ID_MAGIC, sizeof NM_ID_MAGIC);
    v[0] = (uint64_t)getpid();
    v[1] = __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST);
    v[2] = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    memcpy(id->internal + 16, v, sizeof v);
    return ncclSuccess;
}
static void nm_shared_path(const ncclUniqueId *id, char *out, size_t len) {
    const char *dir = getenv("TMPDIR");
    uint64_t v[3];
    memcpy(v, id->internal + 16, sizeof v);
    snprintf(out, len, "%s/zero_nccl_mock_%llx_%llx_%llx", dir && *dir ? dir : "/tmp", (unsigned long long)v[0],
             (unsigned long long)v[1], (unsigned long long)v[2]);
}
/* maps the join record (created by whoever comes first) */
static nm_shared *nm_shared_open(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    void *p;
    if (fd < 0) return NULL;
    if (ftruncate(fd, (off_t)sizeof(nm_shared)) != 0) { close(fd); return NULL; }
    p = mmap(NULL, sizeof(nm_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : (nm_shared *)p;
}
/* under nm_mu */
static void nm_clique_unref(nm_clique *q) {
    nm_clique **pp;
    if (--q->refs > 0) return;
    for (pp = &nm_cliques; *pp; pp = &(*pp)->next)
        if (*pp == q) { *pp = q->next; break; }
    if (q->sh) {
        unlink(q->shpath);
        munmap(q->sh, sizeof *q->sh);
    }
    free(q);
}
static void nm_comm_unref(struct ncclComm *c) {
    if (--c->refs > 0) return;
    if (c->q) {
        if (c->q->rank[c->rank] == c) c->q->rank[c->rank] = NULL;
        nm_clique_unref(c->q);
    }
    c->magic = 0;
    free(c);
}
static int nm_comm_ok(ncclComm_t c) { return c && c->magic == NM_MAGIC && !c->gone; }

/* under nm_mu: joined in every process (the shared record) */
static int nm_all_joined(nm_clique *q) {
    return q->sh ? __atomic_load_n(&q->sh->joined, __ATOMIC_SEQ_CST) >= q->n : q->joined >= q->n;
}
/* under nm_mu: a failure of the communicator; every rank's waits end */
static void nm_clique_fail(nm_clique *q, ncclResult_t r, const char *msg) {
    if (q->err == ncclSuccess) {
        q->err = r;
        q->op_err = nm_all_joined(q);
        snprintf(q->msg, sizeof q->msg, "%s", msg);
    }
    pthread_cond_broadcast(&nm_cv);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    nm_clique *q;
    struct ncclComm *c;
    int dev = 0, i, blocking = config ? config->blocking != 0 : 1;
    double dl;
    if (!comm) return nm_err(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    *comm = NULL;
    if (nm_inject("ncclCommInitRankConfig")) return nm_err(NULL, ncclSystemError, "ncclCommInitRankConfig: injected failure");
    if (nranks < 1 || nranks > NM_MAX_RANKS || rank < 0 || rank >= nranks)
        return nm_err(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: rank %d of %d (the double takes 1..%d ranks)",
                      rank, nranks, NM_MAX_RANKS);
    if (memcmp(id.internal, NM_ID_MAGIC, sizeof NM_ID_MAGIC) != 0)
        return nm_err(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: rank %d: the unique id did not come from "
                      "ncclGetUniqueId (all zero bytes or garbled)", rank);
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return nm_err(NULL, ncclUnhandledCudaError, "ncclCommInitRankConfig: rank %d: cudaGetDevice failed", rank);
    }
    if (!(c = (struct ncclComm *)calloc(1, sizeof *c)))
        return nm_err(NULL, ncclSystemError, "ncclCommInitRankConfig: out of memory");
    c->magic = NM_MAGIC;
    c->rank = rank;
    c->n = nranks;
    c->device = dev;
    c->blocking = blocking;
    c->refs = 1;
    pthread_mutex_lock(&nm_mu);
    for (q = nm_cliques; q; q = q->next)
        if (!memcmp(&q->id, &id, sizeof id)) break;
    if (!q) {
        if (!(q = (nm_clique *)calloc(1, sizeof *q))) {
            pthread_mutex_unlock(&nm_mu);
            free(c);
            return nm_err(NULL, ncclSystemError, "ncclCommInitRankConfig: out of memory");
        }
        q->id = id;
        q->n = nranks;
        q->gen = 1;
        nm_shared_path(&id, q->shpath, sizeof q->shpath);
        if (!(q->sh = nm_shared_open(q->shpath))) {
            int e = errno;
            ncclResult_t r = nm_err(NULL, ncclSystemError, "ncclCommInitRankConfig: the join record %s: %s", q->shpath,
                                    strerror(e));
            pthread_mutex_unlock(&nm_mu);
            free(q);
            free(c);
            return r;
        }
        q->next = nm_cliques;
        nm_cliques = q;
    }
    if (q->n != nranks || q->rank[rank] || q->gone[rank] || q->sh->who[rank]) {
        ncclResult_t r = nm_err(NULL, ncclInvalidUsage, q->n != nranks
                                ? "ncclCommInitRankConfig: rank %d says the communicator has %d ranks, another rank said %d"
                                : "ncclCommInitRankConfig: rank %d joined twice (%d ranks; first said %d)",
                                rank, nranks, q->n);
        if (!q->joined) { q->refs = 1; nm_clique_unref(q); }
        pthread_mutex_unlock(&nm_mu);
        free(c);
        return r;
    }
    for (i = 0; i < q->n; i++)
        if (q->rank[i] && !q->gone[i] && q->dev[i] == dev) {
            char msg[256];
            snprintf(msg, sizeof msg, "ncclCommInitRankConfig: ranks %d and %d are both on device %d (duplicate GPU: "
                     "one rank per GPU)", i, rank, dev);
            nm_clique_fail(q, ncclInvalidUsage, msg);
            break;
        }
    q->rank[rank] = c;
    q->dev[rank] = dev;
    q->joined++;
    q->refs++;
    c->q = q;
    q->sh->n = nranks;
    q->sh->who[rank] = 1;
    __atomic_add_fetch(&q->sh->joined, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&nm_cv);
    *comm = c;
    if (!blocking) {
        pthread_mutex_unlock(&nm_mu);
        return ncclInProgress;
    }
    dl = nm_now_ms() + nm_hang_ms();
    while (!nm_all_joined(q) && q->err == ncclSuccess && nm_now_ms() < dl) nm_wait();
    if (q->err != ncclSuccess && !q->op_err) c->err = q->err;
    else if (!nm_all_joined(q)) c->err = ncclSystemError;
    c->ready = 1;
    pthread_mutex_unlock(&nm_mu);
    return c->err == ncclSuccess ? ncclSuccess : nm_err(c, c->err, "ncclCommInitRankConfig: rank %d: %s", rank,
                                                        q->msg[0] ? q->msg : "not every rank joined");
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
    if (!e || !c || c->magic != NM_MAGIC) return ncclInvalidArgument;
    pthread_mutex_lock(&nm_mu);
    if (!c->q) {                /* a split not complete yet */
        *e = c->err != ncclSuccess ? c->err : c->gone ? ncclInvalidUsage : ncclInProgress;
        pthread_mutex_unlock(&nm_mu);
        return ncclSuccess;
    }
    if (!c->ready && !c->gone && c->err == ncclSuccess && c->q->err != ncclSuccess && c->q->op_err) {
        c->ready = 1;           /* the init completed before a call failed: that failure shows next time */
        pthread_mutex_unlock(&nm_mu);
        *e = ncclSuccess;
        return ncclSuccess;
    }
    if (c->err == ncclSuccess && c->q->err != ncclSuccess) {
        c->err = c->q->err;     /* a failed init, or a failed op of the communicator */
        snprintf(c->last, sizeof c->last, "%s", c->q->msg[0] ? c->q->msg : "a peer failed");
    }
    if (c->err != ncclSuccess) *e = c->err;
    else if (!nm_all_joined(c->q)) *e = ncclInProgress;
    else if (c->pending) { c->pending = 0; *e = ncclInProgress; }
    else *e = ncclSuccess;
    if (*e != ncclInProgress) c->ready = 1;
    if (c->gone && *e == ncclSuccess) *e = ncclInvalidUsage;
    pthread_mutex_unlock(&nm_mu);
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t c, int *count) {
    if (!nm_comm_ok(c) || !count) return ncclInvalidArgument;
    *count = c->n;
    return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *device) {
    if (!nm_comm_ok(c) || !device) return ncclInvalidArgument;
    *device = c->device;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank) {
    if (!nm_comm_ok(c) || !rank) return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}

/* ---- ncclCommSplit ----
   A collective of the parent's ranks (all in this process): round k of every rank meets round
   k of the others. The last rank to arrive makes the new communicators: per color, the ranks
   ordered by (key, parent rank), a clique of their own on the parents' devices, complete at
   once (its ops meet as any communicator's). Blocking: the call waits for the round (until
   the hang limit); non-blocking: it returns ncclInProgress and the new communicator says
   ncclInProgress until the round is complete, then once more. A rank that never calls leaves
   the others' new communicators in progress (blocking: ncclSystemError at the hang limit), as
   NCCL's bootstrap would. Refused: a NULL newcomm, a color below 0 other than
   NCCL_SPLIT_NOCOLOR, a parent that is not live or failed, ranks in other processes, and a
   second split by a rank whose previous one has not completed. */
static void nm_split_complete(nm_clique *q) {
    int r, i, j;
    for (r = 0; r < q->n; r++) {
        struct ncclComm *c = q->snew[r];
        nm_clique *nq;
        int members[NM_MAX_RANKS], m = 0;
        if (!c || c->q) continue;
        for (j = 0; j < q->n; j++)             /* the color's ranks, by key then parent rank */
            if (q->snew[j] && q->scolor[j] == q->scolor[r]) {
                int at = m++;
                while (at > 0 && q->skey[members[at - 1]] > q->skey[j]) { members[at] = members[at - 1]; at--; }
                members[at] = j;
            }
        if (!(nq = (nm_clique *)calloc(1, sizeof *nq))) {
            for (i = 0; i < m; i++) q->snew[members[i]]->err = ncclSystemError;
            continue;
        }
        nq->n = m;
        nq->gen = 1;
        nq->joined = m;
        for (i = 0; i < m; i++) {
            struct ncclComm *x = q->snew[members[i]];
            x->q = nq;
            x->rank = i;
            x->n = m;
            if (!x->blocking) x->pending = 1;
            nq->rank[i] = x;
            nq->dev[i] = x->device;
            nq->refs++;
            if (x->gone) { nq->gone[i] = 1; if (x->aborted) nq->dead = 1; }
        }
    }
    for (r = 0; r < q->n; r++) {
        if (q->rank[r]) q->rank[r]->split_pending = 0;
        if (q->snew[r]) nm_comm_unref(q->snew[r]);          /* the round's reference */
    }
    q->sarrived = 0;
    memset(q->sposted, 0, sizeof q->sposted);
    memset(q->snew, 0, sizeof q->snew);
    pthread_cond_broadcast(&nm_cv);
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
    struct ncclComm *nc = NULL;
    nm_clique *q;
    int blocking;
    double dl;
    if (!newcomm) return nm_err(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    if (!nm_comm_ok(comm)) return nm_err(NULL, ncclInvalidArgument, "ncclCommSplit: the communicator is not a live one");
    if (nm_inject("ncclCommSplit")) return nm_err(comm, ncclSystemError, "ncclCommSplit: injected failure (ZERO_NCCL_MOCK_FAIL)");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return nm_err(comm, ncclInvalidArgument, "ncclCommSplit: color %d (>= 0, or NCCL_SPLIT_NOCOLOR)", color);
    blocking = config ? config->blocking != 0 : comm->blocking;
    pthread_mutex_lock(&nm_mu);
    q = comm->q;
    if (comm->err != ncclSuccess || q->err != ncclSuccess) {   /* (a peer that aborted leaves us waiting) */
        pthread_mutex_unlock(&nm_mu);
        return nm_err(comm, ncclInvalidUsage, "ncclCommSplit: rank %d's communicator failed earlier", comm->rank);
    }
    if (q->joined < q->n) {
        pthread_mutex_unlock(&nm_mu);
        return nm_err(comm, ncclInvalidUsage, "ncclCommSplit: %d of the %d ranks are in other processes; the NCCL test "
                      "double splits the ranks of one process only", q->n - q->joined, q->n);
    }
    if (comm->split_pending || q->sposted[comm->rank]) {
        pthread_mutex_unlock(&nm_mu);
        return nm_err(comm, ncclInvalidUsage, "ncclCommSplit: rank %d's previous split has not completed", comm->rank);
    }
    if (color != NCCL_SPLIT_NOCOLOR) {
        if (!(nc = (struct ncclComm *)calloc(1, sizeof *nc))) {
            pthread_mutex_unlock(&nm_mu);
            return nm_err(comm, ncclSystemError, "ncclCommSplit: out of memory");
        }
        nc->magic = NM_MAGIC;
        nc->device = comm->device;
        nc->blocking = blocking;
        nc->refs = 2;               /* the caller's handle and the round's */
    }
    q->scolor[comm->rank] = color;
    q->skey[comm->rank] = key;
    q->snew[comm->rank] = nc;
    q->sposted[comm->rank] = 1;
    comm->split_pending = 1;
    if (++q->sarrived == q->n) nm_split_complete(q);
    *newcomm = nc;
    if (!blocking) {
        pthread_mutex_unlock(&nm_mu);
        return nc ? ncclInProgress : ncclSuccess;
    }
    dl = nm_now_ms() + nm_hang_ms();
    while (comm->split_pending && nm_now_ms() < dl) nm_wait();
    if (comm->split_pending) {
        if (nc) nc->err = ncclSystemError;
        pthread_mutex_unlock(&nm_mu);
        return nm_err(comm, ncclSystemError, "ncclCommSplit: rank %d waited %d ms (ZERO_NCCL_MOCK_HANG_MS) for ranks "
                      "that never split", comm->rank, nm_hang_ms());
    }
    pthread_mutex_unlock(&nm_mu);
    return nc && nc->err != ncclSuccess ? nm_err(comm, nc->err, "ncclCommSplit: out of memory") : ncclSuccess;
}

/* a rank leaves: its peers' waits for it end */
static ncclResult_t nm_leave(ncclComm_t c, int abort) {
    nm_clique *q;
    if (!c || c->magic != NM_MAGIC) return nm_err(NULL, ncclInvalidArgument, "the communicator is not a live one");
    pthread_mutex_lock(&nm_mu);
    if (c->gone) {
        pthread_mutex_unlock(&nm_mu);
        return nm_err(NULL, ncclInvalidUsage, "rank %d's communicator was destroyed or aborted already", c->rank);
    }
    q = c->q;
    c->gone = 1;
    c->aborted = abort;
    if (q) {
        q->gone[c->rank] = 1;
        if (abort) q->dead = 1;
        if (!nm_all_joined(q)) unlink(q->shpath);      /* it will never complete */
    }
    pthread_cond_broadcast(&nm_cv);
    nm_comm_unref(c);
    pthread_mutex_unlock(&nm_mu);
    return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t c) {
    if (!nm_comm_ok(c)) return nm_err(NULL, ncclInvalidArgument, "ncclCommFinalize: not a live communicator");
    if (!c->blocking) {         /* in flight until GetAsyncError said so once */
        pthread_mutex_lock(&nm_mu);
        c->pending = 1;
        pthread_mutex_unlock(&nm_mu);
        return ncclInProgress;
    }
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { return nm_leave(c, 0); }
ncclResult_t ncclCommAbort(ncclComm_t c) { return c ? nm_leave(c, 1) : ncclSuccess; }

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (nccl_mock)";
    case ncclSystemError: return "unhandled system error (nccl_mock)";
    case ncclInternalError: return "internal error (nccl_mock)";
    case ncclInvalidArgument: return "invalid argument (nccl_mock)";
    case ncclInvalidUsage: return "invalid usage (nccl_mock)";
    case ncclRemoteError: return "remote process exited or there was a network error (nccl_mock)";
    case ncclInProgress: return "NCCL operation in progress (nccl_mock)";
    default: return "unknown result code (nccl_mock)";
    }
}
const char *ncclGetLastError(ncclComm_t c) {
    if (c && c->magic == NM_MAGIC && c->last[0]) return c->last;
    return nm_last;
}

/* ---- the ops ---- */
/* element i of a buffer of type t, as a double (exact for every type here but the 64-bit ints) */
static double nm_ld(const void *p, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return zero__f16_to_f32(((const uint16_t *)p)[i]);
    case ncclBfloat16: return zero__bf16_to_f32(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    default: return 0.0;
    }
}
/* a + b rounded to t (the floats: in fp32 for the halves, then rounded) */
static void nm_add(void *acc, const void *p, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclInt8: ((int8_t *)acc)[i] = (int8_t)(((int8_t *)acc)[i] + ((const int8_t *)p)[i]); break;
    case ncclUint8: ((uint8_t *)acc)[i] = (uint8_t)(((uint8_t *)acc)[i] + ((const uint8_t *)p)[i]); break;
    case ncclInt32: ((uint32_t *)acc)[i] += ((const uint32_t *)p)[i]; break;
    case ncclUint32: ((uint32_t *)acc)[i] += ((const uint32_t *)p)[i]; break;
    case ncclInt64: case ncclUint64: ((uint64_t *)acc)[i] += ((const uint64_t *)p)[i]; break;
    case ncclFloat16:
        ((uint16_t *)acc)[i] = zero__f32_to_f16((float)nm_ld(acc, t, i) + (float)nm_ld(p, t, i));
        break;
    case ncclBfloat16:
        ((uint16_t *)acc)[i] = zero__f32_to_bf16((float)nm_ld(acc, t, i) + (float)nm_ld(p, t, i));
        break;
    case ncclFloat32: ((float *)acc)[i] += ((const float *)p)[i]; break;
    case ncclFloat64: ((double *)acc)[i] += ((const double *)p)[i]; break;
    default: break;
    }
}
/* out[i] = the ring sum of in[0..n)[off + i], i in [0, count): chunk j of the whole (count
   total, split in n nearly equal chunks) starts at rank j+1 and ends at rank j */
static void nm_ring_sum(void *out, nm_op **post, int n, ncclDataType_t t, size_t off, size_t count, size_t total) {
    size_t es = nm_tsize(t), i;
    for (i = 0; i < count; i++) {
        size_t g = off + i, j = total ? g * (size_t)n / total : 0;
        int k, first = (int)((j + 1) % (size_t)n);
        memcpy((char *)out + i * es, (const char *)post[first]->it[0].send + g * es, es);
        for (k = 1; k < n; k++) {
            int src = (first + k) % n;
            /* acc[i] += send_src[g]: nm_add works on index i of both, so offset the source */
            nm_add((char *)out + i * es, (const char *)post[src]->it[0].send + g * es, t, 0);
        }
    }
}

/* under nm_mu: op k of every rank matches? Returns 0 and fills msg otherwise */
static int nm_match(nm_clique *q, char *msg, size_t len) {
    nm_op *a = q->post[0];
    int r, i, j;
    for (r = 0; r < q->n; r++) {
        nm_op *b = q->post[r];
        int coll_a = a->it[0].kind <= NM_BC, coll_b = b->it[0].kind <= NM_BC;
        if (coll_a != coll_b || (coll_a && (a->it[0].kind != b->it[0].kind || a->it[0].count != b->it[0].count ||
                                            a->it[0].type != b->it[0].type || a->it[0].op != b->it[0].op ||
                                            a->it[0].peer != b->it[0].peer))) {
            snprintf(msg, len, "call #%llu: rank %d called %s(count=%llu, type=%d, root=%d) but rank 0 called "
                     "%s(count=%llu, type=%d, root=%d)", (unsigned long long)q->gen, r, nm_kind_name(b->it[0].kind),
                     (unsigned long long)b->it[0].count, (int)b->it[0].type, b->it[0].peer,
                     nm_kind_name(a->it[0].kind), (unsigned long long)a->it[0].count, (int)a->it[0].type,
                     a->it[0].peer);
            return 0;
        }
        if (coll_b) continue;
        /* each recv of r from p has the send of p to r with the same bytes (in order) */
        for (i = 0; i < b->n; i++) {
            const nm_item *x = &b->it[i];
            int nth = 0, seen = 0, found = 0;
            nm_op *p;
            if (x->kind != NM_SEND && x->kind != NM_RECV) continue;
            for (j = 0; j < i; j++) nth += b->it[j].kind == x->kind && b->it[j].peer == x->peer;
            p = q->post[x->peer];
            for (j = 0; j < p->n && !found; j++)
                if (p->it[j].kind == (x->kind == NM_SEND ? NM_RECV : NM_SEND) && p->it[j].peer == r && seen++ == nth) {
                    found = 1;
                    if (p->it[j].count * nm_tsize(p->it[j].type) != x->count * nm_tsize(x->type)) {
                        snprintf(msg, len, "call #%llu: rank %d's %s of %llu bytes to/from rank %d meets a %s of %llu "
                                 "bytes", (unsigned long long)q->gen, r, nm_kind_name(x->kind),
                                 (unsigned long long)(x->count * nm_tsize(x->type)), x->peer,
                                 nm_kind_name(p->it[j].kind),
                                 (unsigned long long)(p->it[j].count * nm_tsize(p->it[j].type)));
                        return 0;
                    }
                }
            if (!found) {
                snprintf(msg, len, "call #%llu: rank %d's %s #%d with rank %d has no matching %s on rank %d",
                         (unsigned long long)q->gen, r, nm_kind_name(x->kind), nth + 1, x->peer,
                         x->kind == NM_SEND ? "ncclRecv" : "ncclSend", x->peer);
                return 0;
            }
        }
    }
    return 1;
}

/* the private results of rank r's op: the bytes of every receive buffer, in item order */
static size_t nm_out_bytes(const nm_op *op, int n) {
    size_t b = 0;
    int i;
    for (i = 0; i < op->n; i++) {
        const nm_item *x = &op->it[i];
        size_t es = nm_tsize(x->type);
        if (x->kind == NM_AG) b += x->count * es * (size_t)n;
        else if (x->kind == NM_RS || x->kind == NM_AR || x->kind == NM_BC || x->kind == NM_RECV) b += x->count * es;
    }
    return b;
}
/* reads the peers' buffers into tmp (nothing is written to a receive buffer here) */
static void nm_compute(nm_clique *q, int r, char *tmp) {
    nm_op *me = q->post[r];
    int i, n = q->n, k;
    for (i = 0; i < me->n; i++) {
        const nm_item *x = &me->it[i];
        size_t es = nm_tsize(x->type), bytes = x->count * es;
        switch (x->kind) {
        case NM_AG:
            for (k = 0; k < n; k++) memcpy(tmp + (size_t)k * bytes, q->post[k]->it[0].send, bytes);
            tmp += bytes * (size_t)n;
            break;
        case NM_RS:
            nm_ring_sum(tmp, q->post, n, x->type, (size_t)r * x->count, x->count, x->count * (size_t)n);
            tmp += bytes;
            break;
        case NM_AR:
            nm_ring_sum(tmp, q->post, n, x->type, 0, x->count, x->count);
            tmp += bytes;
            break;
        case NM_BC:
            memcpy(tmp, q->post[x->peer]->it[0].send, bytes);
            tmp += bytes;
            break;
        case NM_RECV: {
            nm_op *p = q->post[x->peer];
            int nth = 0, seen = 0, j;
            for (j = 0; j < i; j++) nth += me->it[j].kind == NM_RECV && me->it[j].peer == x->peer;
            for (j = 0; j < p->n; j++)
                if (p->it[j].kind == NM_SEND && p->it[j].peer == r && seen++ == nth) {
                    memcpy(tmp, p->it[j].send, bytes);
                    break;
                }
            tmp += bytes;
            break;
        }
        default: break;
        }
    }
}
static void nm_write(const nm_op *me, int n, const char *tmp) {
    int i;
    for (i = 0; i < me->n; i++) {
        const nm_item *x = &me->it[i];
        size_t bytes = x->count * nm_tsize(x->type);
        if (x->kind == NM_AG) bytes *= (size_t)n;
        if (x->kind == NM_SEND) continue;
        if (bytes) memmove(x->recv, tmp, bytes);
        tmp += bytes;
    }
}

/* the op, run by the stream: meet the peers' op of the same number, check, read, wait, write */
static void CUDART_CB nm_run(void *p) {
    nm_op *op = (nm_op *)p;
    struct ncclComm *c = op->c;
    nm_clique *q = c->q;
    int r = c->rank, n = c->n, i;
    double dl = nm_now_ms() + nm_hang_ms();
    char *tmp = NULL, msg[512];
    const char *why = NULL;
    size_t ob;
    pthread_mutex_lock(&nm_mu);
#define NM_STOP() (c->aborted || q->err != ncclSuccess || nm_now_ms() > dl)
    if (c->err != ncclSuccess || NM_STOP()) goto fail;
    if (q->joined < n) {
        nm_clique_fail(q, ncclInvalidUsage, "");
        snprintf(q->msg, sizeof q->msg, "%s: %d of the %d ranks are in other processes; the NCCL test double moves "
                 "data between the ranks of one process only", nm_kind_name(op->it[0].kind), n - q->joined, n);
        goto fail;
    }
    while ((q->gen != op->seq || q->dead) && !NM_STOP()) nm_wait();  /* the peers still finish the op before */
    if (NM_STOP()) goto fail;
    q->post[r] = op;
    q->arrived++;
    pthread_cond_broadcast(&nm_cv);
    for (;;) {
        int gone = -1;
        if ((q->arrived == n && !q->dead) || NM_STOP()) break;
        for (i = 0; i < n; i++)
            if (!q->post[i] && q->gone[i] && !q->dead) gone = i;
        if (gone >= 0) {
            snprintf(msg, sizeof msg, "call #%llu: rank %d destroyed its communicator before it", (unsigned long long)op->seq,
                     gone);
            nm_clique_fail(q, ncclRemoteError, msg);
            break;
        }
        nm_wait();
    }
    if (NM_STOP()) goto fail;
    if (!nm_match(q, msg, sizeof msg)) {
        nm_clique_fail(q, ncclInvalidUsage, msg);
        goto fail;
    }
    q->computing++;
    pthread_mutex_unlock(&nm_mu);
    ob = nm_out_bytes(op, n);
    tmp = (char *)malloc(ob ? ob : 1);
    if (tmp) nm_compute(q, r, tmp);
    pthread_mutex_lock(&nm_mu);
    q->computing--;
    pthread_cond_broadcast(&nm_cv);
    if (!tmp) {
        nm_clique_fail(q, ncclSystemError, "nccl_mock: out of memory");
        goto fail;
    }
    q->read[r] = 1;
    q->nread++;
    pthread_cond_broadcast(&nm_cv);
    while (q->nread < n && !NM_STOP()) nm_wait();
    if (NM_STOP()) goto fail;
    pthread_mutex_unlock(&nm_mu);
    nm_write(op, n, tmp);
    pthread_mutex_lock(&nm_mu);
    if (++q->left == n) {
        q->gen++;
        q->arrived = q->nread = q->left = 0;
        memset(q->post, 0, sizeof q->post);
        memset(q->read, 0, sizeof q->read);
    }
    pthread_cond_broadcast(&nm_cv);
    goto out;
fail:
    /* a peer may still be reading our buffers: they may be freed once we return */
    while (q->computing > 0) nm_wait();
    if (c->aborted) why = "its communicator was aborted";
    else if (q->err != ncclSuccess) why = q->msg;
    else {
        snprintf(msg, sizeof msg, "rank %d waited %d ms (ZERO_NCCL_MOCK_HANG_MS) at call #%llu for peers that never "
                 "called", r, nm_hang_ms(), (unsigned long long)op->seq);
        nm_clique_fail(q, ncclSystemError, msg);
        why = q->msg;
    }
    if (c->err == ncclSuccess && !c->aborted) {
        c->err = q->err != ncclSuccess ? q->err : ncclSystemError;
        snprintf(c->last, sizeof c->last, "%s", why);
    }
out:
    nm_comm_unref(c);
    pthread_mutex_unlock(&nm_mu);
#undef NM_STOP
    free(tmp);
    free(op);
}

/* queues the op on stream (the comm's ref is the op's until it ran) */
static long nm_calls[7];
static ncclResult_t nm_enqueue(struct ncclComm *c, const nm_item *it, int nit, cudaStream_t stream) {
    nm_op *op;
    int i;
    cudaError_t e;
    if (!(op = (nm_op *)calloc(1, sizeof *op))) return nm_err(c, ncclSystemError, "nccl_mock: out of memory");
    memcpy(op->it, it, sizeof *it * (size_t)nit);
    for (i = 0; i < nit; i++) __atomic_add_fetch(&nm_calls[it[i].kind], 1, __ATOMIC_SEQ_CST);
    op->n = nit;
    op->c = c;
    pthread_mutex_lock(&nm_mu);
    op->seq = ++c->issued;
    c->refs++;
    if (!c->blocking) c->pending = 1;
    pthread_mutex_unlock(&nm_mu);
    if ((e = cudaLaunchHostFunc(stream, nm_run, op)) != cudaSuccess) {
        (void)cudaGetLastError();
        pthread_mutex_lock(&nm_mu);
        c->issued--;
        nm_comm_unref(c);
        pthread_mutex_unlock(&nm_mu);
        free(op);
        return nm_err(c, ncclUnhandledCudaError, "nccl_mock: cudaLaunchHostFunc: %s", cudaGetErrorString(e));
    }
    return c->blocking ? ncclSuccess : ncclInProgress;
}

/* ---- groups: the items of each communicator, queued at the outermost ncclGroupEnd ---- */
typedef struct nm_gitem { struct ncclComm *c; cudaStream_t s; nm_item it; } nm_gitem;
static __thread int nm_depth;
static __thread nm_gitem nm_group[4 * NM_MAX_RANKS];
static __thread int nm_ngroup;
static __thread ncclResult_t nm_group_err;

ncclResult_t ncclGroupStart(void) {
    if (nm_depth++ == 0) { nm_ngroup = 0; nm_group_err = ncclSuccess; }
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    ncclResult_t r = ncclSuccess;
    int i, j;
    if (nm_depth <= 0) return nm_err(NULL, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--nm_depth > 0) return ncclSuccess;
    if (nm_group_err != ncclSuccess) { nm_ngroup = 0; return nm_group_err; }
    for (i = 0; i < nm_ngroup && r == ncclSuccess; i++) {
        nm_item its[2 * NM_MAX_RANKS];
        int nit = 0, colls = 0;
        struct ncclComm *c = nm_group[i].c;
        if (!c) continue;
        for (j = i; j < nm_ngroup; j++)
            if (nm_group[j].c == c) {
                if (nm_group[j].s != nm_group[i].s) {
                    r = nm_err(c, ncclInvalidUsage, "ncclGroupEnd: rank %d's calls in one group are on two streams", c->rank);
                    break;
                }
                if (nit == 2 * NM_MAX_RANKS) {
                    r = nm_err(c, ncclInvalidUsage, "ncclGroupEnd: more than %d calls in a group (the double's limit)",
                               2 * NM_MAX_RANKS);
                    break;
                }
                colls += nm_group[j].it.kind <= NM_BC;
                its[nit++] = nm_group[j].it;
                if (j > i) nm_group[j].c = NULL;
            }
        if (r == ncclSuccess && colls && nit > 1)
            r = nm_err(c, ncclInvalidUsage, "ncclGroupEnd: the double takes one collective per group, or only "
                       "ncclSend/ncclRecv");
        if (r == ncclSuccess) r = nm_enqueue(c, its, nit, nm_group[i].s);
        if (r == ncclInProgress) r = ncclSuccess;
        if (r == ncclSuccess && !c->blocking) r = ncclInProgress;
    }
    nm_ngroup = 0;
    return r;
}

/* a call: checked, then queued (or kept for the group) */
static ncclResult_t nm_call(const char *name, int kind, const void *send, void *recv, size_t count, ncclDataType_t t,
                            int peer, ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
    nm_item it;
    ncclResult_t r;
    if (!nm_comm_ok(c)) r = nm_err(NULL, ncclInvalidArgument, "%s: the communicator is not a live one", name);
    else if (nm_inject(name)) r = nm_err(c, ncclSystemError, "%s: injected failure (ZERO_NCCL_MOCK_FAIL)", name);
    else if (c->err != ncclSuccess) r = nm_err(c, ncclInvalidUsage, "%s: rank %d's communicator failed earlier", name, c->rank);
    else if (!nm_tsize(t) || ((kind == NM_RS || kind == NM_AR) && (t == ncclFloat8e4m3 || t == ncclFloat8e5m2)))
        r = nm_err(c, ncclInvalidArgument, "%s: datatype %d", name, (int)t);
    else if ((kind == NM_RS || kind == NM_AR) && op != ncclSum)
        r = nm_err(c, ncclInvalidArgument, "%s: the double sums only (op %d)", name, (int)op);
    else if ((kind == NM_BC || kind == NM_SEND || kind == NM_RECV) && (peer < 0 || peer >= c->n))
        r = nm_err(c, ncclInvalidArgument, "%s: rank %d of %d", name, peer, c->n);
    else if (count && ((kind != NM_RECV && !send) || (kind != NM_SEND && !recv)))
        r = nm_err(c, ncclInvalidArgument, "%s: a NULL buffer", name);
    else {
        memset(&it, 0, sizeof it);
        it.kind = kind; it.send = send; it.recv = recv; it.count = count; it.type = t; it.peer = peer; it.op = op;
        if (nm_depth > 0) {
            if (nm_ngroup == (int)(sizeof nm_group / sizeof nm_group[0]))
                return nm_group_err = nm_err(c, ncclInvalidUsage, "%s: too many calls in one group (the double's limit)",
                                             name);
            nm_group[nm_ngroup].c = c; nm_group[nm_ngroup].s = s; nm_group[nm_ngroup].it = it;
            nm_ngroup++;
            return ncclSuccess;
        }
        return nm_enqueue(c, &it, 1, s);
    }
    if (nm_depth > 0 && nm_group_err == ncclSuccess) nm_group_err = r;
    return r;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
    return nm_call("ncclAllGather", NM_AG, send, recv, count, t, 0, ncclSum, c, s);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
    return nm_call("ncclReduceScatter", NM_RS, send, recv, count, t, 0, op, c, s);
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    return nm_call("ncclAllReduce", NM_AR, send, recv, count, t, 0, op, c, s);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    /* only the root's send buffer is read; the others may pass anything */
    if (nm_comm_ok(c) && c->rank != root && !send) send = recv;
    return nm_call("ncclBroadcast", NM_BC, send, recv, count, t, root, ncclSum, c, s);
}
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return nm_call("ncclSend", NM_SEND, send, NULL, count, t, peer, ncclSum, c, s);
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return nm_call("ncclRecv", NM_RECV, NULL, recv, count, t, peer, ncclSum, c, s);
}

/* ---- for tests/cuda_mock/test_nccl.c: what the double saw ---- */
int nccl_mock_group_depth(void);
long nccl_mock_calls(const char *name);
int nccl_mock_group_depth(void) { return nm_depth; }
/* ops queued of a kind, by its NCCL name ("ncclReduceScatter", ...), over all communicators */
long nccl_mock_calls(const char *name) {
    int k;
    for (k = 1; k <= 6; k++)
        if (!strcmp(name, nm_kind_name(k))) return __atomic_load_n(&nm_calls[k], __ATOMIC_SEQ_CST);
    return -1;
}
