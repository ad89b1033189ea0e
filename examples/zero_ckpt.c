/* examples/zero_ckpt.c - inspect, verify and convert zero.h checkpoints without a trainer.

       zero_ckpt info DIR                     the manifest: config, modules, params, files
       zero_ckpt verify DIR                   every shard's header, size and record checksum;
                                              exit 0 if all good, 1 otherwise
       zero_ckpt export DIR OUT.safetensors [--bf16]
                                              the fp32 weights as safetensors ("module.param")

   It reads the checkpoint files directly through the manifest reader inside zero.h's
   implementation (this program defines ZERO_IMPLEMENTATION, so the zero__ck_* helpers
   are in scope), one record at a time. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"     // defines: the manifest reader, shard reader, safetensors header writer

#include <stdio.h>       // defines: printf, fprintf
#include <stdlib.h>      // defines: malloc, free
#include <string.h>      // defines: strcmp

static int usage(void) {
    fprintf(stderr, "usage: zero_ckpt info DIR | verify DIR | export DIR OUT.safetensors [--bf16]\n");
    return 2;
}

static int info(const char *dir) {
    zero__ck_manifest m;
    char msg[ZERO__MSG];
    int i, k;
    zero_result r = zero__ck_read_manifest(NULL, dir, &m, msg, sizeof msg);
    if (r != ZERO_OK) { fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), msg); return 1; }
    printf("format %d, generation %llu\nstage %d, world %d, param_dtype %s, optimizer %s (%d moments)\n",
           m.version, (unsigned long long)m.gen, m.stage, m.world, zero_dtype_str(m.pdt),
           m.optim == ZERO_OPTIM_SGD ? "sgd" : "adamw", m.moments);
    printf("steps %lld, skipped %lld, loss_scale %g, good_steps %lld\n", (long long)m.steps, (long long)m.skipped,
           (double)m.loss_scale, (long long)m.good_steps);
    for (i = 0; i < m.nmod; i++) printf("module %s%s\n", m.mods[i].name, m.mods[i].frozen ? " (frozen)" : "");
    for (i = 0; i < m.nparam; i++) {
        printf("param %s.%s [", m.mods[m.params[i].module].name, m.params[i].name);
        for (k = 0; k < m.params[i].ndim; k++) printf("%s%lld", k ? ", " : "", (long long)m.params[i].shape[k]);
        printf("] %lld elements\n", (long long)m.params[i].numel);
    }
    for (i = 0; i < m.nfile; i++) printf("file %s %lld bytes\n", m.files[i].name, (long long)m.files[i].bytes);
    printf("%d ranges\n", m.nrange);
    zero__ck_manifest_free(NULL, &m);
    return 0;
}

/* calls fn(range, weights) for every record, in manifest order, after its checksums
   (the weights', and the moments' too if fn is NULL: verify reads everything) */
typedef int (*range_fn)(const zero__ck_manifest *m, const zero__ck_range *rg, const float *w, void *user);

static int each_range(const char *dir, const zero__ck_manifest *m, range_fn fn, void *user) {
    char msg[ZERO__MSG];
    int *fds = (int *)malloc(sizeof(int) * (size_t)m->world), i, bad = 0;
    int64_t maxb = 0;
    float *buf;
    for (i = 0; i < m->nrange; i++)
        if (zero__ck_range_bytes(m, &m->ranges[i]) > maxb) maxb = zero__ck_range_bytes(m, &m->ranges[i]);
    if (maxb < ZERO__CK_CHUNK * 4) maxb = ZERO__CK_CHUNK * 4;     /* zero__ck_verify_range's chunk */
    buf = (float *)malloc((size_t)maxb + 8);
    if (!fds || !buf) { fprintf(stderr, "zero_ckpt: out of memory\n"); free(fds); free(buf); return 1; }
    for (i = 0; i < m->world; i++) {
        zero_result r = zero__ck_open_shard(dir, m, i, &fds[i], msg, sizeof msg);
        if (r != ZERO_OK) { fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), msg); bad = 1; }
    }
    for (i = 0; i < m->nrange; i++) {
        const zero__ck_range *rg = &m->ranges[i];
        zero_result r;
        if (fds[rg->rank] < 0) continue;
        /* verify: weights and moments; export: the weights, checked, then read whole */
        r = zero__ck_verify_range(dir, m, rg, fds[rg->rank], fn == NULL, buf, msg, sizeof msg);
        if (r == ZERO_OK && fn && zero__ck_pread(fds[rg->rank], buf, (size_t)(rg->end - rg->begin) * 4, rg->offset) != 1) {
            r = ZERO_ERR_IO;
            snprintf(msg, sizeof msg, "%s/%s: read failed", dir, m->files[rg->rank].name);
        }
        if (r != ZERO_OK) { fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), msg); bad = 1; continue; }
        if (fn && fn(m, rg, buf, user)) bad = 1;
    }
    for (i = 0; i < m->world; i++) if (fds[i] >= 0) close(fds[i]);
    free(fds);
    free(buf);
    return bad;
}

static int verify(const char *dir) {
    zero__ck_manifest m;
    char msg[ZERO__MSG];
    int bad;
    zero_result r = zero__ck_read_manifest(NULL, dir, &m, msg, sizeof msg);
    if (r != ZERO_OK) { fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), msg); return 1; }
    bad = each_range(dir, &m, NULL, NULL);
    if (!bad) printf("OK: %s: %d ranges in %d files, every checksum matches\n", dir, m.nrange, m.nfile);
    zero__ck_manifest_free(NULL, &m);
    return bad;
}

typedef struct export_state { int fd; int64_t *data_off; zero_dtype dt; } export_state;

static int export_range(const zero__ck_manifest *m, const zero__ck_range *rg, const float *w, void *user) {
    export_state *s = (export_state *)user;
    int64_t es = (int64_t)zero_dtype_size(s->dt);
    (void)m;
    if (!zero__st_write_values(s->fd, w, rg->end - rg->begin, s->dt, s->data_off[rg->param] + rg->begin * es)) {
        fprintf(stderr, "zero_ckpt: write failed\n");
        return 1;
    }
    return 0;
}

static int export_st(const char *dir, const char *out, zero_dtype dt) {
    zero__ck_manifest m;
    char msg[ZERO__MSG], tmp[4096];
    zero__st_tensor *ts;
    export_state s;
    char *hdr;
    int64_t hlen, off;
    unsigned char lenb[8];
    int i, bad;
    zero_result r = zero__ck_read_manifest(NULL, dir, &m, msg, sizeof msg);
    if (r != ZERO_OK) { fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), msg); return 1; }
    ts = (zero__st_tensor *)malloc(sizeof *ts * (size_t)m.nparam);
    s.data_off = (int64_t *)malloc(sizeof(int64_t) * (size_t)m.nparam);
    if (!ts || !s.data_off) return 1;
    for (i = 0; i < m.nparam; i++) {
        ts[i].module = m.mods[m.params[i].module].name;
        ts[i].name = m.params[i].name;
        ts[i].ndim = m.params[i].ndim;
        ts[i].shape = m.params[i].shape;
        ts[i].numel = m.params[i].numel;
    }
    hdr = zero__st_header(NULL, ts, m.nparam, dt, &hlen);
    off = 8 + hlen;
    for (i = 0; i < m.nparam; i++) { s.data_off[i] = off; off += m.params[i].numel * (int64_t)zero_dtype_size(dt); }
    snprintf(tmp, sizeof tmp, "%.4000s.tmp", out);
    s.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    s.dt = dt;
    for (i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    bad = !hdr || s.fd < 0 || !zero__ck_pwrite(s.fd, lenb, 8, 0) || !zero__ck_pwrite(s.fd, hdr, (size_t)hlen, 8);
    if (bad) fprintf(stderr, "zero_ckpt: cannot write %s\n", tmp);
    else bad = each_range(dir, &m, export_range, &s);
    if (s.fd >= 0) {
        if (!bad && fsync(s.fd) != 0) bad = 1;
        close(s.fd);
        if (!bad && rename(tmp, out) != 0) bad = 1;
        if (bad) unlink(tmp);
    }
    if (!bad) printf("wrote %s: %d tensors, %s\n", out, m.nparam, dt == ZERO_F32 ? "F32" : "BF16");
    zero__raw_free(NULL, hdr);
    free(ts);
    free(s.data_off);
    zero__ck_manifest_free(NULL, &m);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "info") == 0) return info(argv[2]);
    if (argc == 3 && strcmp(argv[1], "verify") == 0) return verify(argv[2]);
    if ((argc == 4 || (argc == 5 && strcmp(argv[4], "--bf16") == 0)) && strcmp(argv[1], "export") == 0)
        return export_st(argv[2], argv[3], argc == 5 ? ZERO_BF16 : ZERO_F32);
    return usage();
}
