/* tests/bench/bench_infinity.c - ZeRO-Infinity on this machine: trains, for a couple
   of steps, a model whose optimizer states stream from the NVMe tier, and prints the
   step time, the bytes moved and the fraction of the disk-bandwidth bound achieved
   (the bound: the longer of bytes read / read bandwidth and bytes written / write
   bandwidth, as the step overlaps them; the serial sum is printed too; both bandwidths
   measured first on the same directory with bench_nvme's baseline, DeepSpeed's async
   I/O at its defaults: one io_uring ring, O_DIRECT 1 MiB blocks, the better of queue
   depths 8 and 32, best of three, from buffers in huge pages as the tier's are, so the
   bound is what the disk can do, not what 4 KiB pages let it do. The disk is also measured reading and writing at
   once, and the step printed against that bound too, which is what a disk that cannot
   serve both at full speed allows). Not part of make test.

       build/bench_infinity [--params N] [--steps K] [--threads T] [--nvme-params]
                            [--optim-state-dtype f32|bf16|q8] [--compare-state-dtypes]
       (N in millions; default 64. T: the optimizer pass's cpu_threads; default the
       cores: with q8 moments the pass decodes and encodes, and on 2 cores one thread
       leaves it compute-bound, slower than the disk. Model states are 16 bytes per param with bf16 and
       AdamW, so --params 1700 needs 27 GB of model states, more than 24 GiB of RAM,
       of which 4 bytes per param stay in memory; the files take 28 bytes per param;
       --nvme-params: stage 3 with the param shard on NVMe too, 2 bytes per param less
       in memory; the step line then also gives the time of the forward fetches, which
       read the params from the tier)
   --optim-state-dtype bf16: the moments in bf16 (ON OPTIMIZER STATES): 4 bytes less per
   param on NVMe, read and written at every step; q8: 8-bit blocks, about 6 bytes less.
   --compare-state-dtypes trains the model with fp32 moments, then with the format of
   --optim-state-dtype (bf16 when it is not given, or f32), on the same disk, and its ratio=
   is the f32 step time over the other one (the optimizer phase, the fastest step after the first of each).
   Env: ZERO_BENCH_DIR (default /tmp). Ends with ratio=<fraction of the bound, that step's>, or with
   --compare-state-dtypes ratio=<f32 step / bf16 or q8 step>. */
#define _GNU_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#define QD_MAX 32
#define BLK ((int64_t)1 << 20)
#define PARAM_ELEMS ((int64_t)16 << 20)    /* one param of at most 16M elements per module */

/* the disk: DeepSpeed's async I/O at its defaults, as in bench_nvme: O_DIRECT, 1 MiB
   blocks, qd in flight, each completion refilled at once (one io_uring ring; without
   ZERO_IO_URING qd threads) */
typedef struct bj { int fd, write, qd; int64_t bytes; double ms; } bj;
/* the probe's qd 1 MiB buffers, in one block allocated as the tier allocates its own
   (zero__io_alloc: huge pages advised): the bound is the disk at its best, and from 4 KiB
   pages a virtio disk splits every 1 MiB request (see zero__io_alloc), so a probe from
   plain pages measured a disk slower than the tier's own I/O on it */
static char *probe_alloc(int qd, char **raw) {
    char *b = zero__io_alloc(NULL, qd * BLK, raw);
    if (!b) exit(1);
    memset(b, 7, (size_t)(qd * BLK));
    return b;
}
#ifdef ZERO_IO_URING
static void *bmain(void *arg) {
    bj *j = (bj *)arg;
    struct io_uring ring;
    char *buf[QD_MAX], *raw, *base = probe_alloc(j->qd, &raw);
    int64_t next = 0;
    int i, inflight = 0;
    double t0;
    if (io_uring_queue_init((unsigned)j->qd, &ring, 0) < 0) { fprintf(stderr, "io_uring_queue_init failed\n"); exit(1); }
    for (i = 0; i < j->qd; i++) buf[i] = base + i * BLK;
    t0 = bench_now_ms();
    for (i = 0; i < j->qd && next < j->bytes; i++, next += BLK, inflight++) {
        struct io_uring_sqe *e = io_uring_get_sqe(&ring);
        if (j->write) io_uring_prep_write(e, j->fd, buf[i], BLK, (uint64_t)next);
        else io_uring_prep_read(e, j->fd, buf[i], BLK, (uint64_t)next);
        io_uring_sqe_set_data(e, buf[i]);
    }
    io_uring_submit(&ring);
    while (inflight > 0) {
        struct io_uring_cqe *c;
        int refill = 0;
        if (io_uring_wait_cqe(&ring, &c) < 0) { fprintf(stderr, "io_uring_wait_cqe failed\n"); exit(1); }
        do {
            char *b = (char *)io_uring_cqe_get_data(c);
            if (c->res != BLK) { fprintf(stderr, "disk I/O: %d\n", c->res); exit(1); }
            io_uring_cqe_seen(&ring, c);
            inflight--;
            if (next < j->bytes) {
                struct io_uring_sqe *e = io_uring_get_sqe(&ring);
                if (j->write) io_uring_prep_write(e, j->fd, b, BLK, (uint64_t)next);
                else io_uring_prep_read(e, j->fd, b, BLK, (uint64_t)next);
                io_uring_sqe_set_data(e, b);
                next += BLK; inflight++; refill = 1;
            }
        } while (io_uring_peek_cqe(&ring, &c) == 0);
        if (refill) io_uring_submit(&ring);
    }
    if (j->write) fdatasync(j->fd);
    j->ms = bench_now_ms() - t0;
    io_uring_queue_exit(&ring);
    zero__raw_free(NULL, raw);
    return NULL;
}
#else
typedef struct bt { bj *j; int t; char *buf; } bt;
static void *bthread(void *arg) {
    bt *x = (bt *)arg;
    int64_t off;
    for (off = (int64_t)x->t * BLK; off < x->j->bytes; off += x->j->qd * BLK)
        if ((x->j->write ? pwrite(x->j->fd, x->buf, BLK, off) : pread(x->j->fd, x->buf, BLK, off)) != BLK) { perror("io"); exit(1); }
    return NULL;
}
static void *bmain(void *arg) {
    bj *j = (bj *)arg;
    pthread_t th[QD_MAX];
    bt xs[QD_MAX];
    int t;
    char *raw, *base = probe_alloc(j->qd, &raw);
    double t0 = bench_now_ms();
    for (t = 0; t < j->qd; t++) {
        xs[t].j = j; xs[t].t = t;
        xs[t].buf = base + t * BLK;
        pthread_create(&th[t], NULL, bthread, &xs[t]);
    }
    for (t = 0; t < j->qd; t++) pthread_join(th[t], NULL);
    zero__raw_free(NULL, raw);
    if (j->write) fdatasync(j->fd);
    j->ms = bench_now_ms() - t0;
    return NULL;
}
#endif
static int disk_open(const char *path, int64_t bytes) {
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0) fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { perror(path); exit(1); }
    if (posix_fallocate(fd, 0, bytes) != 0) exit(1);
    return fd;
}
/* GB/s of one direction at queue depth qd */
static double disk_gbs(const char *path, int64_t bytes, int write, int qd) {
    bj j;
    j.fd = disk_open(path, bytes); j.write = write; j.qd = qd; j.bytes = bytes;
    bmain(&j);
    close(j.fd);
    return (double)bytes / j.ms / 1e6;
}
/* ms to read `bytes` of one file while writing as many to another, both at once */
static double disk_mixed_ms(const char *rpath, const char *wpath, int64_t bytes, int rqd, int wqd) {
    bj r, w;
    pthread_t tr, tw;
    double t0 = bench_now_ms();
    r.fd = disk_open(rpath, bytes); r.write = 0; r.qd = rqd; r.bytes = bytes;
    w.fd = disk_open(wpath, bytes); w.write = 1; w.qd = wqd; w.bytes = bytes;
    t0 = bench_now_ms();
    pthread_create(&tr, NULL, bmain, &r);
    pthread_create(&tw, NULL, bmain, &w);
    pthread_join(tr, NULL);
    pthread_join(tw, NULL);
    t0 = bench_now_ms() - t0;
    close(r.fd); close(w.fd);
    return t0;
}

/* trains the model for `steps` steps with the moments in format sdt; returns the fastest
   optimizer phase (ms) after the first step (which creates the files; the only one when
   steps is 1), and its fraction of the overlapped disk bound in *fb_last: a shared disk's
   noise slows single steps, never speeds one up */
static double run_model(const char *dir, int64_t nparams, int steps, int threads, int nvme_params, zero_state_dtype sdt,
                        double rgbs, double wgbs, double mixed_ms, double *fb_last) {
    int64_t left, i, o, c;
    int step, m, nmod;
    zero_desc d;
    zero_ctx *z;
    zero_module *mods;
    zero_param *ps;
    float *buf;
    double t0, ms, last_ms = 1e300;
    zero_result r;
    memset(&d, 0, sizeof d);
    d.stage = nvme_params ? 3 : 1;
    if (nvme_params) d.offload_params = ZERO_OFFLOAD_NVME;
    d.param_dtype = ZERO_BF16;
    d.optim.lr = 1e-4;
    d.cpu_threads = threads;
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    d.offload.nvme_dirs[0] = dir;
    d.offload.queue_depth = 16;
    d.optim.state_dtype = sdt;
    if ((r = zero_create(&z, &d)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(NULL)); exit(1); }
    nmod = (int)((nparams + PARAM_ELEMS - 1) / PARAM_ELEMS);
    mods = (zero_module *)calloc((size_t)nmod, sizeof *mods);
    ps = (zero_param *)calloc((size_t)nmod, sizeof *ps);
    for (m = 0, left = nparams; m < nmod; m++, left -= PARAM_ELEMS) {
        zero_module_desc md;
        zero_param_desc pd;
        char name[32];
        memset(&md, 0, sizeof md);
        memset(&pd, 0, sizeof pd);
        snprintf(name, sizeof name, "m%d", m);
        md.name = name;
        zero_add_module(z, &md, &mods[m]);
        pd.name = "w"; pd.ndim = 1; pd.shape[0] = left < PARAM_ELEMS ? left : PARAM_ELEMS;
        zero_add_param(z, mods[m], &pd, &ps[m]);
    }
    t0 = bench_now_ms();
    if ((r = zero_build(z)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); exit(1); }
    printf("bench_infinity: %lld M params, %s moments, model states %.2f GB (%.2f GB in memory, %.2f GB on NVMe in %s), "
           "block %.1f MiB, %d optimizer threads, built in %.0f ms\n", (long long)(nparams / 1000000), zero_state_dtype_str(sdt), z->lay.plan.model_state_bytes / 1e9,
           (z->lay.plan.total_bytes - z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] - z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] -
            z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS]) / 1e9,
           (z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] + z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] +
            z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS]) / 1e9, dir,
           z->tier.nvme->bb / 1048576.0, threads, bench_now_ms() - t0);
    /* no zero_param_set_f32: the master and moments start at zero, the params too */
    buf = (float *)malloc((size_t)(1 << 20) * 4);
    for (step = 0; step < steps; step++) {
        int64_t rd0 = z->tier.nvme->bytes_read, wr0 = z->tier.nvme->bytes_written;
        double bound, serial, mixed, fb, rd, wr, tf = bench_now_ms();
        for (m = 0; m < nmod; m++) {
            int64_t n = zero_param_numel(z, ps[m]);
            char *g;
            if ((r = zero_fetch(z, mods[m])) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); exit(1); }
            g = (char *)zero_param_grad(z, ps[m]);
            for (o = 0; o < n; o += 1 << 20) {
                c = n - o < (1 << 20) ? n - o : (1 << 20);
                for (i = 0; i < c; i++) buf[i] = (float)((o + i) % 97) * 1e-3f - 0.05f;
                zero_add_f32(g + o * 2, ZERO_BF16, buf, c);
            }
            zero_release(z, mods[m]);
            zero_grads_ready(z, mods[m]);
        }
        if (nvme_params)
            printf("step %d: fetches and gradients %.0f ms (read %.2f GB of params)\n", step, bench_now_ms() - tf,
                   (z->tier.nvme->bytes_read - rd0) / 1e9);
        rd0 = z->tier.nvme->bytes_read;   /* the optimizer phase's own traffic */
        wr0 = z->tier.nvme->bytes_written;
        t0 = bench_now_ms();
        if ((r = zero_step(z)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); exit(1); }
        ms = bench_now_ms() - t0;
        rd = (double)(z->tier.nvme->bytes_read - rd0) / rgbs / 1e6;
        wr = (double)(z->tier.nvme->bytes_written - wr0) / wgbs / 1e6;
        bound = rd > wr ? rd : wr;          /* reads and writes overlap: the longer of the two */
        serial = rd + wr;                   /* one after the other */
        mixed = mixed_ms * (double)(z->tier.nvme->bytes_read - rd0);   /* the disk measured doing both at once */
        fb = bound / ms;
        printf("step %d: %.0f ms (optimizer phase), read %.2f GB, wrote %.2f GB (read %.2f GB/s, write %.2f GB/s): "
               "%.2f of the overlapped bound (%.0f ms), %.2f of the serial one (%.0f ms), %.2f of the measured "
               "read-and-write-at-once one (%.0f ms)\n", step, ms,
               (z->tier.nvme->bytes_read - rd0) / 1e9, (z->tier.nvme->bytes_written - wr0) / 1e9, rgbs, wgbs, fb, bound,
               serial / ms, serial, mixed / ms, mixed);
        if ((step > 0 || steps == 1) && ms < last_ms) { *fb_last = fb; last_ms = ms; }
    }
    free(buf);
    free(mods);
    free(ps);
    zero_destroy(z);
    return last_ms;
}

int main(int argc, char **argv) {
    const char *dir = getenv("ZERO_BENCH_DIR") ? getenv("ZERO_BENCH_DIR") : "/tmp";
    int64_t nparams = (int64_t)64 << 20;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int steps = 2, threads = cores > 1 ? (int)cores : 1, a, nvme_params = 0, compare = 0;
    zero_state_dtype sdt = ZERO_STATE_F32;
    char probe[600], probe2[600];
    double rgbs, wgbs, mixed_ms;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--params") && a + 1 < argc) nparams = (int64_t)(atof(argv[++a]) * 1e6);
        else if (!strcmp(argv[a], "--steps") && a + 1 < argc) steps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--nvme-params")) nvme_params = 1;
        else if (!strcmp(argv[a], "--optim-state-dtype") && a + 1 < argc && !strcmp(argv[a + 1], "bf16")) { sdt = ZERO_STATE_BF16; a++; }
        else if (!strcmp(argv[a], "--optim-state-dtype") && a + 1 < argc && !strcmp(argv[a + 1], "q8")) { sdt = ZERO_STATE_Q8; a++; }
        else if (!strcmp(argv[a], "--optim-state-dtype") && a + 1 < argc && !strcmp(argv[a + 1], "f32")) a++;
        else if (!strcmp(argv[a], "--compare-state-dtypes")) compare = 1;
        else {
            fprintf(stderr, "usage: bench_infinity [--params MILLIONS] [--steps K] [--threads T] [--nvme-params]\n"
                            "                      [--optim-state-dtype f32|bf16|q8] [--compare-state-dtypes]\n");
            return 2;
        }
    }
    snprintf(probe, sizeof probe, "%s/bench_infinity_probe.%ld", dir, (long)getpid());
    snprintf(probe2, sizeof probe2, "%s/bench_infinity_probe2.%ld", dir, (long)getpid());
    {   /* the disk: best of three at QD 8 and at QD 32, each direction; then both at once */
        int64_t pb = (int64_t)512 << 20;
        (void)bench_median;     /* best of three here */
        int rq = 8, wq = 8;
        double v;
        rgbs = wgbs = 0;
        mixed_ms = 1e30;
        for (a = 0; a < 3; a++) {
            if ((v = disk_gbs(probe, pb, 1, 8)) > wgbs) { wgbs = v; wq = 8; }
            if ((v = disk_gbs(probe, pb, 1, 32)) > wgbs) { wgbs = v; wq = 32; }
            if ((v = disk_gbs(probe, pb, 0, 8)) > rgbs) { rgbs = v; rq = 8; }
            if ((v = disk_gbs(probe, pb, 0, 32)) > rgbs) { rgbs = v; rq = 32; }
        }
        for (a = 0; a < 3; a++)
            if ((v = disk_mixed_ms(probe, probe2, pb, rq, wq)) < mixed_ms) mixed_ms = v;
        mixed_ms /= (double)pb;     /* ms per byte read with as many written at once */
        printf("disk (%s): read %.2f GB/s (QD %d), write %.2f GB/s (QD %d), both at once %.2f GB/s each\n", dir, rgbs, rq,
               wgbs, wq, 1.0 / mixed_ms / 1e6);
        unlink(probe);
        unlink(probe2);
    }

    if (compare) {     /* the same model with fp32 and with bf16 (or q8) moments, on the same disk */
        zero_state_dtype other = sdt == ZERO_STATE_Q8 ? ZERO_STATE_Q8 : ZERO_STATE_BF16;
        const char *on = zero_state_dtype_str(other);
        double fb32, fbo, t32 = run_model(dir, nparams, steps, threads, nvme_params, ZERO_STATE_F32, rgbs, wgbs, mixed_ms, &fb32);
        double to = run_model(dir, nparams, steps, threads, nvme_params, other, rgbs, wgbs, mixed_ms, &fbo);
        printf("optimizer phase: %.0f ms with f32 moments (%.2f of its bound), %.0f ms with %s moments (%.2f of its "
               "bound): %s is %.2fx faster\n", t32, fb32, to, on, fbo, on, t32 / to);
        printf("ratio=%.3f\n", t32 / to);
    } else {
        double fb;
        run_model(dir, nparams, steps, threads, nvme_params, sdt, rgbs, wgbs, mixed_ms, &fb);
        printf("ratio=%.3f\n", fb);
    }
    return 0;
}
