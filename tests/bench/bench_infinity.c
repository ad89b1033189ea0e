/* tests/bench/bench_infinity.c - ZeRO-Infinity on this machine: trains, for a couple
   of steps, a model whose optimizer states stream from the NVMe tier, and prints the
   step time, the bytes moved and the fraction of the disk-bandwidth bound achieved
   (the bound: the longer of bytes read / read bandwidth and bytes written / write
   bandwidth, as the step overlaps them; the serial sum is printed too; both bandwidths
   measured first on the same directory with an O_DIRECT baseline of 1 MiB blocks at
   queue depth 32). Not part of make test.

       build/bench_infinity [--params N] [--steps K] [--threads T] [--nvme-params]
       (N in millions; default 64. Model states are 16 bytes per param with bf16 and
       AdamW, so --params 1700 needs 27 GB of model states, more than 24 GiB of RAM,
       of which 4 bytes per param stay in memory; the files take 28 bytes per param;
       --nvme-params: stage 3 with the param shard on NVMe too, 2 bytes per param less
       in memory; the step line then also gives the time of the forward fetches, which
       read the params from the tier)
   Env: ZERO_BENCH_DIR (default /tmp). Ends with ratio=<fraction of the bound>. */
#define _GNU_SOURCE
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

#define QD 32
#define BLK ((int64_t)1 << 20)
#define PARAM_ELEMS ((int64_t)16 << 20)    /* one param of at most 16M elements per module */

typedef struct bj { int fd, write, t; int64_t bytes; char *buf; } bj;
static void *bmain(void *arg) {
    bj *j = (bj *)arg;
    int64_t off;
    for (off = (int64_t)j->t * BLK; off < j->bytes; off += QD * BLK)
        if ((j->write ? pwrite(j->fd, j->buf, BLK, off) : pread(j->fd, j->buf, BLK, off)) != BLK) { perror("io"); exit(1); }
    return NULL;
}
static double disk_gbs(const char *path, int64_t bytes, int write) {
    pthread_t th[QD];
    bj jobs[QD];
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600), t;
    double t0;
    if (fd < 0) fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { perror(path); exit(1); }
    if (write && posix_fallocate(fd, 0, bytes) != 0) exit(1);
    t0 = bench_now_ms();
    for (t = 0; t < QD; t++) {
        jobs[t].fd = fd; jobs[t].write = write; jobs[t].t = t; jobs[t].bytes = bytes;
        if (posix_memalign((void **)&jobs[t].buf, 4096, BLK) != 0) exit(1);
        memset(jobs[t].buf, 7, BLK);
        pthread_create(&th[t], NULL, bmain, &jobs[t]);
    }
    for (t = 0; t < QD; t++) { pthread_join(th[t], NULL); free(jobs[t].buf); }
    if (write) fdatasync(fd);
    close(fd);
    return (double)bytes / (bench_now_ms() - t0) / 1e6;
}

int main(int argc, char **argv) {
    const char *dir = getenv("ZERO_BENCH_DIR") ? getenv("ZERO_BENCH_DIR") : "/tmp";
    int64_t nparams = (int64_t)64 << 20, left, i, o, c;
    int steps = 2, threads = 2, step, m, nmod, a, nvme_params = 0;
    zero_desc d;
    zero_ctx *z;
    zero_module *mods;
    zero_param *ps;
    float *buf;
    char probe[600];
    double rgbs, wgbs, t0, ms, tot_ms = 0;
    zero_result r;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--params") && a + 1 < argc) nparams = (int64_t)(atof(argv[++a]) * 1e6);
        else if (!strcmp(argv[a], "--steps") && a + 1 < argc) steps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--nvme-params")) nvme_params = 1;
        else { fprintf(stderr, "usage: bench_infinity [--params MILLIONS] [--steps K] [--threads T] [--nvme-params]\n"); return 2; }
    }
    snprintf(probe, sizeof probe, "%s/bench_infinity_probe.%ld", dir, (long)getpid());
    {   /* the disk: median of three */
        double w[3], rd[3];
        for (a = 0; a < 3; a++) { w[a] = disk_gbs(probe, (int64_t)512 << 20, 1); rd[a] = disk_gbs(probe, (int64_t)512 << 20, 0); }
        wgbs = bench_median(w, 3);
        rgbs = bench_median(rd, 3);
        unlink(probe);
    }

    memset(&d, 0, sizeof d);
    d.stage = nvme_params ? 3 : 1;
    if (nvme_params) d.offload_params = ZERO_OFFLOAD_NVME;
    d.param_dtype = ZERO_BF16;
    d.optim.lr = 1e-4;
    d.cpu_threads = threads;
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    d.offload.nvme_dirs[0] = dir;
    d.offload.queue_depth = 16;
    if ((r = zero_create(&z, &d)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(NULL)); return 1; }
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
    if ((r = zero_build(z)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); return 1; }
    printf("bench_infinity: %lld M params, model states %.2f GB (%.2f GB in memory, %.2f GB on NVMe in %s), "
           "block %.1f MiB, built in %.0f ms\n", (long long)(nparams / 1000000), z->lay.plan.model_state_bytes / 1e9,
           (z->lay.plan.total_bytes - z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] - z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] -
            z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS]) / 1e9,
           (z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] + z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] +
            z->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS]) / 1e9, dir,
           z->tier.off->bb / 1048576.0, bench_now_ms() - t0);
    /* no zero_param_set_f32: the master and moments start at zero, the params too */
    buf = (float *)malloc((size_t)(1 << 20) * 4);
    for (step = 0; step < steps; step++) {
        int64_t rd0 = z->tier.off->bytes_read, wr0 = z->tier.off->bytes_written;
        double bound, serial, fb, rd, wr, tf = bench_now_ms();
        for (m = 0; m < nmod; m++) {
            int64_t n = zero_param_numel(z, ps[m]);
            char *g;
            if ((r = zero_fetch(z, mods[m])) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); return 1; }
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
                   (z->tier.off->bytes_read - rd0) / 1e9);
        rd0 = z->tier.off->bytes_read;   /* the optimizer phase's own traffic */
        wr0 = z->tier.off->bytes_written;
        t0 = bench_now_ms();
        if ((r = zero_step(z)) != ZERO_OK) { fprintf(stderr, "%s\n", zero_last_error(z)); return 1; }
        ms = bench_now_ms() - t0;
        tot_ms += ms;
        rd = (double)(z->tier.off->bytes_read - rd0) / rgbs / 1e6;
        wr = (double)(z->tier.off->bytes_written - wr0) / wgbs / 1e6;
        bound = rd > wr ? rd : wr;          /* reads and writes overlap: the longer of the two */
        serial = rd + wr;                   /* one after the other */
        fb = bound / ms;
        printf("step %d: %.0f ms (optimizer phase), read %.2f GB, wrote %.2f GB (read %.2f GB/s, write %.2f GB/s): "
               "%.2f of the overlapped bound (%.0f ms), %.2f of the serial one (%.0f ms)\n", step, ms,
               (z->tier.off->bytes_read - rd0) / 1e9, (z->tier.off->bytes_written - wr0) / 1e9, rgbs, wgbs, fb, bound,
               serial / ms, serial);
        if (step == steps - 1) printf("ratio=%.3f\n", fb);
    }
    free(buf);
    free(mods);
    free(ps);
    zero_destroy(z);
    return 0;
}
