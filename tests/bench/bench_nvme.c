/* tests/bench/bench_nvme.c - the NVMe tier's sequential write and read throughput
   against a DeepSpeed-style async I/O baseline on the same directory, in the same run,
   idle and under a concurrent CPU load.

   Ours: the tier's own machinery (>>io, >>offload) as zero_step drives it: blocks of the
   size the plan gives the default 64 MiB buffer budget, three of them in flight, reads
   queued two blocks ahead; the I/O engine's queue depths and request sizes are the
   library's defaults (zero__nvme_tune; io_uring when built with ZERO_IO_URING and the
   kernel allows it, else the thread pool; ZERO_IO=uring|threads forces one); the blocks'
   buffers allocated as zero_build allocates them (zero__io_alloc: huge pages advised). zero_step
   takes the block checksums inside its optimizer pass, piece by piece while the data is
   in cache (bench_infinity measures that), so the I/O path moves bytes only and that is
   what "ours" times. "ours + checksums" (printed, not in the ratio) also seals each block
   before its write and verifies it after its read, on a thread pool of one thread per
   core, from memory (cold): what a caller that checksums outside the pass would pay.
   Baseline (DeepSpeed's async I/O at its defaults: one io_uring ring, 1 MiB blocks):
   O_DIRECT, each completion refilled at once with the next block, no checksums, its
   buffers page-aligned from posix_memalign as DeepSpeed's aio allocates them; run at
   queue depth 8 and at 32, the better of the two kept for each direction. Without
   ZERO_IO_URING the same depths are threads issuing pread/pwrite.
   Both read what they wrote (O_DIRECT: not the page cache). CPU load: one spinning thread
   per core (sysconf), running while both sides are measured under load. Every rep runs
   ours and the baselines interleaved, in an order that turns from rep to rep, 0.3 s
   apart; best of REPS per measurement, and the spread (worst/best) is printed. Ends with ratio=<ours/baseline>, the smallest of the four
   ratios (write, read, write under load, read under load).
   Env: ZERO_BENCH_DIR (default /tmp), ZERO_BENCH_BYTES (default 1 GiB), ZERO_BENCH_REPS
   (default 3), ZERO_BENCH_LOAD=0 skips the loaded runs, ZERO_BENCH_BUFFER (ours: the
   offload.buffer_bytes the blocks are cut for; default the library's, 64 MiB). */
#define _GNU_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#define BASE_QD_MAX 32
#define BASE_BLOCK ((int64_t)1 << 20)
#define MAX_REPS 32

#ifdef ZERO_IO_URING
/* the baseline on io_uring: qd blocks in flight, refilled as each completes */
static void base_uring(int fd, int64_t bytes, int write, int qd, char **buf) {
    struct io_uring ring;
    int64_t next = 0;
    int i, inflight = 0, rc;
    if ((rc = io_uring_queue_init((unsigned)qd, &ring, 0)) < 0) { fprintf(stderr, "io_uring: %s\n", strerror(-rc)); exit(1); }
    for (i = 0; i < qd && next < bytes; i++, next += BASE_BLOCK, inflight++) {
        struct io_uring_sqe *e = io_uring_get_sqe(&ring);
        if (write) io_uring_prep_write(e, fd, buf[i], BASE_BLOCK, (uint64_t)next);
        else io_uring_prep_read(e, fd, buf[i], BASE_BLOCK, (uint64_t)next);
        io_uring_sqe_set_data(e, buf[i]);
    }
    io_uring_submit(&ring);
    while (inflight > 0) {      /* reap every completion there is, refill, one submit */
        struct io_uring_cqe *c;
        int refill = 0;
        if ((rc = io_uring_wait_cqe(&ring, &c)) < 0) { fprintf(stderr, "io_uring wait: %s\n", strerror(-rc)); exit(1); }
        do {
            char *b = (char *)io_uring_cqe_get_data(c);
            if (c->res != BASE_BLOCK) { fprintf(stderr, "baseline I/O: %d\n", c->res); exit(1); }
            io_uring_cqe_seen(&ring, c);
            inflight--;
            if (next < bytes) {
                struct io_uring_sqe *e = io_uring_get_sqe(&ring);
                if (write) io_uring_prep_write(e, fd, b, BASE_BLOCK, (uint64_t)next);
                else io_uring_prep_read(e, fd, b, BASE_BLOCK, (uint64_t)next);
                io_uring_sqe_set_data(e, b);
                next += BASE_BLOCK;
                inflight++;
                refill = 1;
            }
        } while (io_uring_peek_cqe(&ring, &c) == 0);
        if (refill) io_uring_submit(&ring);
    }
    io_uring_queue_exit(&ring);
}
#else
typedef struct base_job { int fd, write, t, qd; int64_t bytes; char *buf; } base_job;

static void *base_main(void *arg) {
    base_job *j = (base_job *)arg;
    int64_t off;
    for (off = (int64_t)j->t * BASE_BLOCK; off < j->bytes; off += j->qd * BASE_BLOCK) {
        ssize_t r = j->write ? pwrite(j->fd, j->buf, BASE_BLOCK, off) : pread(j->fd, j->buf, BASE_BLOCK, off);
        if (r != BASE_BLOCK) { perror("baseline I/O"); exit(1); }
    }
    return NULL;
}
#endif

static char *base_buf[BASE_QD_MAX];

static double baseline(const char *path, int64_t bytes, int write, int qd) {
#ifndef ZERO_IO_URING
    pthread_t th[BASE_QD_MAX];
    base_job jobs[BASE_QD_MAX];
    int t;
#endif
    int fd = open(path, O_RDWR | O_CREAT | ZERO__O_DIRECT, 0600);
    double t0, ms;
    if (fd < 0) fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { perror(path); exit(1); }
    if (write && posix_fallocate(fd, 0, bytes) != 0) { fprintf(stderr, "fallocate failed\n"); exit(1); }
    t0 = bench_now_ms();
#ifdef ZERO_IO_URING
    base_uring(fd, bytes, write, qd, base_buf);
#else
    for (t = 0; t < qd; t++) {
        jobs[t].fd = fd; jobs[t].write = write; jobs[t].t = t; jobs[t].bytes = bytes; jobs[t].qd = qd;
        jobs[t].buf = base_buf[t];
        pthread_create(&th[t], NULL, base_main, &jobs[t]);
    }
    for (t = 0; t < qd; t++) pthread_join(th[t], NULL);
#endif
    if (write) fdatasync(fd);
    ms = bench_now_ms() - t0;
    close(fd);
    return (double)bytes / ms / 1e6;
}

static int ours_uring, ours_rqd, ours_wqd;     /* what ours got */
static char *ours_buf[3], *ours_raw[3];         /* its buffers, like the baseline's allocated once */
static int64_t ours_rchunk, ours_wchunk, ours_bb;
static double ours(const char *path, int64_t bytes, int write, zero__pool *pl, int sums) {
    zero__nvme o;
    zero_desc d;
    zero_allocator a;
    int K, i, fd, why, want;
    const char *e = getenv("ZERO_IO");
    int64_t G, bb, nb, blk, tstate;
    double t0, ms;
    memset(&o, 0, sizeof o);
    memset(&d, 0, sizeof d);
    memset(&a, 0, sizeof a);
    d.param_dtype = ZERO_BF16;
    if (getenv("ZERO_BENCH_BUFFER")) d.offload.buffer_bytes = atoll(getenv("ZERO_BENCH_BUFFER"));
    tstate = bytes / 14;            /* master + two moments + old params: 14 bytes per element */
    zero__nvme_geom(&d, tstate, &K, &G, &bb, &nb);
    o.ndirs = 1;
    o.nblocks = nb;
    o.bb = bb;
    o.K = K; o.G = G; o.psz = 2;
    snprintf(o.path[0], sizeof o.path[0], "%s", path);
    fd = zero__fops.open(path, O_RDWR | O_CREAT | ZERO__O_DIRECT, 0600);
    if (fd == -EINVAL) fd = zero__fops.open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { fprintf(stderr, "%s: %s\n", path, strerror(-fd)); exit(1); }
    o.fd[0] = fd;
    if (write && zero__fops.allocate(fd, nb * 2 * bb) != 0) { fprintf(stderr, "fallocate failed\n"); exit(1); }
    for (i = 0; i < 3; i++) {   /* allocated once and kept, as zero_build's are for every step, the same way */
        if (!ours_buf[i]) {
            if (!(ours_buf[i] = zero__io_alloc(&a, bb, &ours_raw[i]))) exit(1);
            memset(ours_buf[i], i + 1, (size_t)bb);
        }
        o.buf[i] = ours_buf[i];
    }
#ifdef ZERO_IO_URING
    want = !(e && strcmp(e, "threads") == 0);
#else
    want = 0; (void)e;
#endif
    zero__nvme_tune(&o, 0);
    if (zero__io_start(&o.io, o.depth, want, &a, &why) != 0) exit(1);
    zero__io_limits(&o.io, o.rdepth, o.wdepth);
    ours_uring = o.io.uring; ours_rqd = o.rdepth; ours_wqd = o.wdepth;
    ours_rchunk = o.rchunk; ours_wchunk = o.wchunk; ours_bb = bb;
    t0 = bench_now_ms();
    if (write) {
        for (blk = 0; blk < nb; blk++) {        /* three blocks in flight */
            int b = (int)(blk % 3);
            if (blk >= 3) {
                zero__io_wait(&o.io, &o.wb[b]);
                if (o.wb[b].err) { fprintf(stderr, "I/O error %d\n", o.wb[b].err); exit(1); }
            }
            if (sums) zero__nvme_seal(&o, pl, o.buf[b], blk, 0);
            zero__nvme_issue(&o, &o.wb[b], blk, 0, o.buf[b], 1);
        }
    } else {
        for (blk = 0; blk < nb && blk < 2; blk++) zero__nvme_issue(&o, &o.rb[blk], blk, 0, o.buf[blk], 0);
        for (blk = 0; blk < nb; blk++) {        /* two reads queued while one block is verified */
            int b = (int)(blk % 3);
            zero__io_wait(&o.io, &o.rb[b]);
            if (o.rb[b].err) { fprintf(stderr, "I/O error %d\n", o.rb[b].err); exit(1); }
            if (blk + 2 < nb) zero__nvme_issue(&o, &o.rb[(blk + 2) % 3], blk + 2, 0, o.buf[(blk + 2) % 3], 0);
            if (sums && zero__nvme_verify(NULL, &o, pl, o.buf[b], blk, 0, "bench_nvme") != ZERO_OK) { fprintf(stderr, "checksum\n"); exit(1); }
        }
    }
    for (i = 0; i < 3; i++) { zero__io_wait(&o.io, &o.wb[i]); zero__io_wait(&o.io, &o.rb[i]); }
    if (write) fdatasync(fd);
    ms = bench_now_ms() - t0;
    zero__io_stop(&o.io, &a);
    close(fd);
    /* slot 0 of every block: nb * bb bytes moved */
    return (double)(nb * bb) / ms / 1e6;
}

/* the CPU load: one spinning thread per core */
static volatile int load_stop;
static void *load_main(void *arg) {
    volatile double x = 1.0;
    (void)arg;
    while (!load_stop) { int i; for (i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9; }
    return NULL;
}

typedef struct meas { double v[MAX_REPS]; } meas;
static double med(const meas *m, int n) {
    meas c = *m;
    return bench_median(c.v, n);
}
static double best(const meas *m, int n, double *spread) {
    double b = m->v[0], w = m->v[0];
    int k;
    for (k = 1; k < n; k++) { if (m->v[k] > b) b = m->v[k]; if (m->v[k] < w) w = m->v[k]; }
    *spread = w / b;
    return b;
}

int main(void) {
    const char *dir = getenv("ZERO_BENCH_DIR") ? getenv("ZERO_BENCH_DIR") : "/tmp";
    int64_t bytes = getenv("ZERO_BENCH_BYTES") ? atoll(getenv("ZERO_BENCH_BYTES")) : ((int64_t)1 << 30);
    int reps = getenv("ZERO_BENCH_REPS") ? atoi(getenv("ZERO_BENCH_REPS")) : 3;
    int doload = !(getenv("ZERO_BENCH_LOAD") && atoi(getenv("ZERO_BENCH_LOAD")) == 0);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), k, l, w, i;
    static const char *names[2][2] = { { "read: ", "write:" }, { "read under CPU load: ", "write under CPU load:" } };
    char p1[480], p2[480], p3[480];
    meas b8[2][2], b32[2][2], us[2][2], cs[2][2];
    double ratio = 1e9;
    pthread_t *lt;
    zero__pool *pl;
    zero_allocator al;
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;
    if (ncpu < 1) ncpu = 1;
    lt = (pthread_t *)malloc(sizeof *lt * (size_t)ncpu);
    memset(&al, 0, sizeof al);
    if (!(pl = zero__pool_create(ncpu, &al))) exit(1);    /* the optimizer's pool at cpu_threads = cores */
    bytes = bytes / BASE_BLOCK / BASE_QD_MAX * BASE_QD_MAX * BASE_BLOCK;
    if (bytes <= 0) bytes = BASE_QD_MAX * BASE_BLOCK;
    for (i = 0; i < BASE_QD_MAX; i++) {
        if (posix_memalign((void **)&base_buf[i], 4096, BASE_BLOCK) != 0) exit(1);
        memset(base_buf[i], i, BASE_BLOCK);
    }
    snprintf(p1, sizeof p1, "%s/bench_nvme_base.%ld", dir, (long)getpid());
    snprintf(p2, sizeof p2, "%s/bench_nvme_ours.%ld", dir, (long)getpid());
    snprintf(p3, sizeof p3, "%s/bench_nvme_sums.%ld", dir, (long)getpid());
    for (k = 0; k < reps; k++)      /* interleaved: every rep runs each side once */
        for (l = 0; l < 1 + doload; l++) {
            if (l) { load_stop = 0; for (i = 0; i < ncpu; i++) pthread_create(&lt[i], NULL, load_main, NULL); }
            for (w = 1; w >= 0; w--)        /* write first: the reads read what was written */
                for (i = 0; i < 4; i++) {   /* the order turns with k: none always follows the same one */
                    struct timespec settle = { 0, 300000000 };
                    nanosleep(&settle, NULL);   /* what the disk still flushes from the run before */
                    switch ((i + k) % 4) {
                    case 0: b8[l][w].v[k] = baseline(p1, bytes, w, 8); break;
                    case 1: us[l][w].v[k] = ours(p2, bytes, w, pl, 0); break;
                    case 2: b32[l][w].v[k] = baseline(p1, bytes, w, 32); break;
                    default: cs[l][w].v[k] = ours(p3, bytes, w, pl, 1); break;
                    }
                }
            if (l) { load_stop = 1; for (i = 0; i < ncpu; i++) pthread_join(lt[i], NULL); }
        }
    unlink(p1);
    unlink(p2);
    unlink(p3);
    printf("bench_nvme: dir %s, %lld MiB, best of %d; baseline: O_DIRECT 1 MiB blocks, QD 8 and QD 32 (%s), the better; "
           "ours: %s, block %.1f MiB, read QD %d x %lld KiB, write QD %d x %lld KiB; CPU load: %d spinning threads\n",
           dir, (long long)(bytes >> 20), reps,
#ifdef ZERO_IO_URING
           "one io_uring ring",
#else
           "threads",
#endif
           ours_uring ? "io_uring" : "threads", ours_bb / 1048576.0, ours_rqd, (long long)(ours_rchunk >> 10), ours_wqd,
           (long long)(ours_wchunk >> 10), ncpu);
    for (l = 0; l < 1 + doload; l++)
        for (w = 1; w >= 0; w--) {
            double s8, s32, so, sc, v8 = best(&b8[l][w], reps, &s8), v32 = best(&b32[l][w], reps, &s32), vo = best(&us[l][w], reps, &so);
            double vc = best(&cs[l][w], reps, &sc), bb = v8 > v32 ? v8 : v32, r = vo / bb;
            printf("%s baseline %.2f GB/s (QD 8 %.2f, QD 32 %.2f), ours %.2f GB/s (%.2f), ours + checksums %.2f GB/s (%.2f); "
                   "spread (worst/best) QD 8 %.2f, QD 32 %.2f, ours %.2f, ours + checksums %.2f; medians QD 8 %.2f, QD 32 %.2f, "
                   "ours %.2f\n", names[l][w], bb, v8, v32, vo, r, vc, vc / bb, s8, s32, so, sc, med(&b8[l][w], reps),
                   med(&b32[l][w], reps), med(&us[l][w], reps));
            if (r < ratio) ratio = r;
        }
    for (i = 0; i < BASE_QD_MAX; i++) free(base_buf[i]);
    for (i = 0; i < 3; i++) zero__raw_free(&al, ours_raw[i]);
    free(lt);
    zero__pool_free(pl, &al);
    printf("ratio=%.3f\n", ratio);
    return 0;
}
