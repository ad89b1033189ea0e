/* tests/bench/bench_nvme.c - the NVMe tier's sequential write and read throughput
   against a strong O_DIRECT baseline on the same directory, in the same run.

   Ours: the tier's own machinery (>>io, >>offload): blocks of the size the plan gives
   the default 64 MiB buffer budget, three of them in flight (as in zero_step), each
   split into chunks for the I/O engine (io_uring when built with ZERO_IO_URING and the
   kernel allows it, else the thread pool; ZERO_IO=uring|threads forces one) with
   queue_depth requests in flight (default 16, the library's default).
   Baseline: O_DIRECT, 1 MiB blocks, 32 in flight: with ZERO_IO_URING one io_uring ring
   of depth 32, each completion refilled at once with the next block; without it 32
   threads each issuing its share of the blocks with pread/pwrite. Both read what they
   wrote (O_DIRECT: not the page cache). Each is measured 3 times, alternating; medians.
   Prints GB/s for each and ends with ratio=<ours/baseline> (the smaller of the read
   and write ratios). Env: ZERO_BENCH_DIR (default /tmp), ZERO_BENCH_BYTES (default
   1 GiB), ZERO_BENCH_QD (ours; default 16). */
#define _GNU_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#define BASE_QD 32
#define REPS 3
#define BASE_BLOCK ((int64_t)1 << 20)

#ifdef ZERO_IO_URING
/* the baseline on io_uring: BASE_QD blocks in flight, refilled as each completes */
static void base_uring(int fd, int64_t bytes, int write) {
    struct io_uring ring;
    char *buf[BASE_QD];
    int64_t next = 0;
    int i, inflight = 0, rc;
    if ((rc = io_uring_queue_init(BASE_QD, &ring, 0)) < 0) { fprintf(stderr, "io_uring: %s\n", strerror(-rc)); exit(1); }
    for (i = 0; i < BASE_QD; i++) {
        if (posix_memalign((void **)&buf[i], 4096, BASE_BLOCK) != 0) exit(1);
        memset(buf[i], i, BASE_BLOCK);
    }
    for (i = 0; i < BASE_QD && next < bytes; i++, next += BASE_BLOCK, inflight++) {
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
    for (i = 0; i < BASE_QD; i++) free(buf[i]);
}
#else

typedef struct base_job { int fd, write, t; int64_t bytes; char *buf; } base_job;

static void *base_main(void *arg) {
    base_job *j = (base_job *)arg;
    int64_t off;
    for (off = (int64_t)j->t * BASE_BLOCK; off < j->bytes; off += BASE_QD * BASE_BLOCK) {
        ssize_t r = j->write ? pwrite(j->fd, j->buf, BASE_BLOCK, off) : pread(j->fd, j->buf, BASE_BLOCK, off);
        if (r != BASE_BLOCK) { perror("baseline I/O"); exit(1); }
    }
    return NULL;
}
#endif

static double baseline(const char *path, int64_t bytes, int write) {
#ifndef ZERO_IO_URING
    pthread_t th[BASE_QD];
    base_job jobs[BASE_QD];
    int t;
#endif
    int fd = open(path, O_RDWR | O_CREAT | ZERO__O_DIRECT, 0600);
    double t0, ms;
    if (fd < 0) fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { perror(path); exit(1); }
    if (write && posix_fallocate(fd, 0, bytes) != 0) { fprintf(stderr, "fallocate failed\n"); exit(1); }
    t0 = bench_now_ms();
#ifdef ZERO_IO_URING
    base_uring(fd, bytes, write);
#else
    for (t = 0; t < BASE_QD; t++) {
        jobs[t].fd = fd; jobs[t].write = write; jobs[t].t = t; jobs[t].bytes = bytes;
        if (posix_memalign((void **)&jobs[t].buf, 4096, BASE_BLOCK) != 0) exit(1);
        memset(jobs[t].buf, t, BASE_BLOCK);
        pthread_create(&th[t], NULL, base_main, &jobs[t]);
    }
    for (t = 0; t < BASE_QD; t++) { pthread_join(th[t], NULL); free(jobs[t].buf); }
#endif
    if (write) fdatasync(fd);
    ms = bench_now_ms() - t0;
    close(fd);
    return (double)bytes / ms / 1e6;
}

static int ours_uring;      /* the engine ours got */
static double ours(const char *path, int64_t bytes, int write, int qd) {
    zero__off o;
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
    tstate = bytes / 14;            /* master + two moments + old params: 14 bytes per element */
    zero__off_geom(&d, tstate, &K, &G, &bb, &nb);
    o.ndirs = 1;
    o.nblocks = nb;
    o.bb = bb;
    o.chunk = zero__align_up(bb / 16 > ((int64_t)1 << 20) ? bb / 16 : ((int64_t)1 << 20), ZERO__IO_ALIGN);
    fd = zero__fops.open(path, O_RDWR | O_CREAT | ZERO__O_DIRECT, 0600);
    if (fd == -EINVAL) fd = zero__fops.open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { fprintf(stderr, "%s: %s\n", path, strerror(-fd)); exit(1); }
    o.fd[0] = fd;
    if (write && zero__fops.allocate(fd, nb * 2 * bb) != 0) { fprintf(stderr, "fallocate failed\n"); exit(1); }
    for (i = 0; i < 3; i++) {
        if (posix_memalign((void **)&o.buf[i], 4096, (size_t)bb) != 0) exit(1);
        memset(o.buf[i], i + 1, (size_t)bb);
    }
#ifdef ZERO_IO_URING
    want = !(e && strcmp(e, "threads") == 0);
#else
    want = 0; (void)e;
#endif
    if (zero__io_start(&o.io, qd, want, &a, &why) != 0) exit(1);
    ours_uring = o.io.uring;
    t0 = bench_now_ms();
    for (blk = 0; blk < nb; blk++) {            /* three blocks in flight */
        int b = (int)(blk % 3);
        zero__iobatch *bt = write ? &o.wb[b] : &o.rb[b];
        if (blk >= 3) {
            zero__io_wait(&o.io, bt);
            if (bt->err) { fprintf(stderr, "I/O error %d\n", bt->err); exit(1); }
        }
        if (write) zero__off_seal(&o, o.buf[b], blk, 0);
        zero__off_issue(&o, bt, blk, 0, o.buf[b], write);
    }
    for (i = 0; i < 3; i++) { zero__io_wait(&o.io, &o.wb[i]); zero__io_wait(&o.io, &o.rb[i]); }
    if (write) fdatasync(fd);
    ms = bench_now_ms() - t0;
    zero__io_stop(&o.io, &a);
    for (i = 0; i < 3; i++) free(o.buf[i]);
    close(fd);
    /* slot 0 of every block: nb * bb bytes moved */
    return (double)(nb * bb) / ms / 1e6;
}

int main(void) {
    const char *dir = getenv("ZERO_BENCH_DIR") ? getenv("ZERO_BENCH_DIR") : "/tmp";
    int64_t bytes = getenv("ZERO_BENCH_BYTES") ? atoll(getenv("ZERO_BENCH_BYTES")) : ((int64_t)1 << 30);
    int qd = getenv("ZERO_BENCH_QD") ? atoi(getenv("ZERO_BENCH_QD")) : 16;
    char p1[600], p2[600];
    double bw, br, ow, orr, rw, rr, ratio, vbw[REPS], vow[REPS], vbr[REPS], vor[REPS];
    int k;
    bytes = bytes / BASE_BLOCK / BASE_QD * BASE_QD * BASE_BLOCK;
    if (bytes <= 0) bytes = BASE_QD * BASE_BLOCK;
    snprintf(p1, sizeof p1, "%s/bench_nvme_base.%ld", dir, (long)getpid());
    snprintf(p2, sizeof p2, "%s/bench_nvme_ours.%ld", dir, (long)getpid());
    for (k = 0; k < REPS; k++) {    /* alternating, median of REPS */
        vbw[k] = baseline(p1, bytes, 1);
        vow[k] = ours(p2, bytes, 1, qd);
        vbr[k] = baseline(p1, bytes, 0);
        vor[k] = ours(p2, bytes, 0, qd);
    }
    bw = bench_median(vbw, REPS); ow = bench_median(vow, REPS);
    br = bench_median(vbr, REPS); orr = bench_median(vor, REPS);
    unlink(p1);
    unlink(p2);
    rw = ow / bw;
    rr = orr / br;
    ratio = rw < rr ? rw : rr;
    printf("bench_nvme: dir %s, %lld MiB, baseline O_DIRECT 1 MiB x QD %d (%s); ours: %s, queue_depth %d\n", dir,
           (long long)(bytes >> 20), BASE_QD,
#ifdef ZERO_IO_URING
           "io_uring",
#else
           "threads",
#endif
           ours_uring ? "io_uring" : "threads", qd);
    printf("write: baseline %.2f GB/s, ours %.2f GB/s (%.2f)\n", bw, ow, rw);
    printf("read:  baseline %.2f GB/s, ours %.2f GB/s (%.2f)\n", br, orr, rr);
    printf("ratio=%.3f\n", ratio);
    return 0;
}
