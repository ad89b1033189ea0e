/* tests/fuzz_ckpt.c - libFuzzer harness for the checkpoint readers (tests/test_fuzz.sh
   builds it with clang -fsanitize=fuzzer,address and runs it briefly).

   LLVMFuzzerInitialize saves a real checkpoint (one rank, stage 3, two modules) into a
   temporary directory and keeps a context of the same model. Each input is then:
     byte 0 bit 0 clear: the whole manifest, as is (checksum, truncation paths);
     byte 0 bit 0 set:   the manifest body, and the harness appends a valid "end" checksum
                         line so mutations reach the parser and zero_load's range reads;
     byte 0 bit 1 set:   (instead) a safetensors header for zero__st_parse;
     byte 0 bit 2 set:   the load goes into a second context of the same model whose
                         bf16 param shards, fp32 master and moments are on the NVMe tier
                         (offload_params and offload_optimizer; files in a subdirectory),
                         through zero_load's streaming passes;
     byte 0 bit 3 set:   (instead of bit 2) the manifest of a second checkpoint, of the
                         same model with q8 moments (format 3: the state_dtype line, each
                         range line's block phase, records of codes and scales), loaded
                         into a context with q8 moments.
   If ZERO_FUZZ_CORPUS names a directory, the real manifest is written there as a seed.
   The saved checkpoint carries three of the trainer's records (zero_ckpt_put), so the
   record lines' parser is fuzzed too. The contract under test: no crash, no sanitizer
   report, and a failed load leaves the params as they were. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[512], nvme[600], dirq[600];
static zero_ctx *z, *zn, *zq;           /* zn: the NVMe-offloaded twin; zq: the q8 one */
static float before[256], after[256], nbefore[256], qbefore[256];

static void die(const char *what) {
    fprintf(stderr, "fuzz_ckpt setup: %s: %s\n", what, zero_last_error(z));
    abort();
}

/* the fuzzed model in c: modules a (w 3x5, b 7) and b (w 20), built, params set */
static void make_model(zero_ctx *c, zero_module m[2], zero_param p[3]) {
    zero_module_desc md;
    zero_param_desc pd;
    float init[64];
    int i;
    memset(&md, 0, sizeof md);
    memset(&pd, 0, sizeof pd);
    md.name = "a"; if (zero_add_module(c, &md, &m[0]) != ZERO_OK) die("module");
    md.name = "b"; if (zero_add_module(c, &md, &m[1]) != ZERO_OK) die("module");
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = 3; pd.shape[1] = 5;
    if (zero_add_param(c, m[0], &pd, &p[0]) != ZERO_OK) die("param");
    pd.name = "b"; pd.ndim = 1; pd.shape[0] = 7; pd.shape[1] = 0;
    if (zero_add_param(c, m[0], &pd, &p[1]) != ZERO_OK) die("param");
    pd.name = "w"; pd.shape[0] = 20;
    if (zero_add_param(c, m[1], &pd, &p[2]) != ZERO_OK) die("param");
    if (zero_build(c) != ZERO_OK) die("build");
    for (i = 0; i < 64; i++) init[i] = (float)i * 0.25f - 3.0f;
    for (i = 0; i < 3; i++) if (zero_param_set_f32(c, p[i], init) != ZERO_OK) die("set");
}


/* d's manifest after a byte for the mode (buf[0]): *n bytes in all, *body those before
   its end line (mode byte included); malloc'd */
static char *manifest_bytes(const char *d, long *n, long *body) {
    char src[700], *buf, *e;
    FILE *f;
    snprintf(src, sizeof src, "%s/manifest", d);
    if (!(f = fopen(src, "rb"))) die("manifest");
    fseek(f, 0, SEEK_END); *n = ftell(f); fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)*n + 1);
    if (!buf || fread(buf + 1, 1, (size_t)*n, f) != (size_t)*n) die("read manifest");
    fclose(f);
    for (e = buf + *n + 1; e > buf + 1 && e[-1] == '\n'; e--) continue;
    while (e > buf + 1 && e[-1] != '\n') e--;
    *n += 1;
    *body = (long)(e - buf);
    return buf;
}
/* corpus/name: the first len bytes of buf, its first byte the mode */
static void put_seed(const char *corpus, const char *name, char *buf, int mode, long len) {
    char dst[600];
    FILE *f;
    buf[0] = (char)mode;
    snprintf(dst, sizeof dst, "%s/%s", corpus, name);
    if ((f = fopen(dst, "wb")) != NULL) { fwrite(buf, 1, (size_t)len, f); fclose(f); }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    zero_desc d;
    zero_module m[2];
    zero_param p[3];
    float init[64];
    const char *t = getenv("TMPDIR"), *corpus = getenv("ZERO_FUZZ_CORPUS");
    int i;
    (void)argc; (void)argv;
    snprintf(dir, sizeof dir, "%s/zero_fuzz_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) die("mkdtemp");
    memset(&d, 0, sizeof d);
    d.stage = 3;
    if (zero_create(&z, &d) != ZERO_OK) die("create");
    make_model(z, m, p);
    for (i = 0; i < 64; i++) init[i] = (float)i;
    /* the trainer's records (format 2): the seed manifest has record lines to mutate */
    if (zero_ckpt_put(z, "data_pos", init, 8) != ZERO_OK || zero_ckpt_put(z, "empty", NULL, 0) != ZERO_OK ||
        zero_ckpt_put(z, "cfg.text", "seq=64 batch=32", 15) != ZERO_OK)
        die("put records");
    if (zero_save(z, dir) != ZERO_OK) die("save");
    {   /* the twin: the same model, bf16 param shards, master and moments on the NVMe tier */
        zero_module mn[2];
        zero_param pn[3];
        snprintf(nvme, sizeof nvme, "%s/nvme", dir);
        if (mkdir(nvme, 0700) != 0) die("mkdir nvme");
        d.param_dtype = ZERO_BF16;
        d.offload_optimizer = ZERO_OFFLOAD_NVME;
        d.offload_params = ZERO_OFFLOAD_NVME;
        d.offload.nvme_dirs[0] = nvme;
        if (zero_create(&zn, &d) != ZERO_OK) die("create nvme");
        make_model(zn, mn, pn);
        if (zero_gather_params_f32(zn, nbefore) != ZERO_OK) die("gather nvme");
    }
    if (corpus) {
        char dst[600];
        long n, body;
        char *buf = manifest_bytes(dir, &n, &body);
        FILE *f;
        put_seed(corpus, "seed_manifest", buf, 0, n);    /* mode 0: as is */
        put_seed(corpus, "seed_body", buf, 1, body);     /* mode 1: the body without its end line */
        put_seed(corpus, "seed_body_nvme", buf, 5, body);    /* the same, into the NVMe twin */
        {   /* mode 2: a safetensors header */
            static const char st[] = "\x02{\"__metadata__\":{\"k\":\"v\"},\"a.w\":{\"dtype\":\"F32\",\"shape\":[3,5],"
                                     "\"data_offsets\":[0,60]}}";
            snprintf(dst, sizeof dst, "%s/seed_st", corpus);
            if ((f = fopen(dst, "wb")) != NULL) { fwrite(st, 1, sizeof st - 1, f); fclose(f); }
        }
        free(buf);
    }
    {   /* the q8 twin: trained a step (moments not all zero), saved in dirq */
        static const int64_t ne[3] = { 15, 7, 20 };
        zero_module mq[2];
        zero_param pq[3];
        float g[32];
        int k;
        d.param_dtype = ZERO_F32;
        d.offload_optimizer = ZERO_OFFLOAD_NONE;
        d.offload_params = ZERO_OFFLOAD_NONE;
        d.optim.state_dtype = ZERO_STATE_Q8;
        if (zero_create(&zq, &d) != ZERO_OK) die("create q8");
        make_model(zq, mq, pq);
        for (k = 1; k >= 0; k--) {
            if (zero_fetch(zq, mq[k]) != ZERO_OK) die("fetch q8");
            for (i = 0; i < 3; i++) {
                int64_t e;
                if ((i == 2) != (k == 1)) continue;
                for (e = 0; e < ne[i]; e++) g[e] = 0.1f * (float)(e + 1) * (i == 1 ? -1.0f : 1.0f);
                zero_add_f32(zero_param_grad(zq, pq[i]), ZERO_F32, g, ne[i]);
            }
            if (zero_release(zq, mq[k]) != ZERO_OK || zero_grads_ready(zq, mq[k]) != ZERO_OK) die("grads q8");
        }
        if (zero_step(zq) != ZERO_OK) die("step q8");
        snprintf(dirq, sizeof dirq, "%s/q8", dir);
        if (mkdir(dirq, 0700) != 0 || zero_save(zq, dirq) != ZERO_OK) die("save q8");
        if (zero_gather_params_f32(zq, qbefore) != ZERO_OK) die("gather q8");
        if (corpus) {       /* mode 9: its body, into the q8 twin */
            long n, body;
            char *buf = manifest_bytes(dirq, &n, &body);
            put_seed(corpus, "seed_body_q8", buf, 9, body);
            free(buf);
        }
    }
    if (zero_gather_params_f32(z, before) != ZERO_OK) die("gather");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[700];
    FILE *f;
    zero_result r;
    if (size < 1 || size > 65536) return 0;
    if (data[0] & 2) {
        char *h = (char *)malloc(size - 1 + 1);
        zero__st_entry e[64];
        int n;
        memcpy(h, data + 1, size - 1);
        (void)zero__st_parse(h, h + size - 1, e, 64, &n);
        free(h);
        return 0;
    }
    snprintf(path, sizeof path, "%s/manifest", data[0] & 8 ? dirq : dir);
    if (!(f = fopen(path, "wb"))) return 0;
    fwrite(data + 1, 1, size - 1, f);
    if (data[0] & 1)
        fprintf(f, "end %016llx\n", (unsigned long long)zero__ck_sum(data + 1, size - 1));
    fclose(f);
    {
        zero_ctx *c = data[0] & 8 ? zq : data[0] & 4 ? zn : z;
        float *b = data[0] & 8 ? qbefore : data[0] & 4 ? nbefore : before;
        r = zero_load(c, data[0] & 8 ? dirq : dir);
        if (r != ZERO_OK) {
            if (zero_gather_params_f32(c, after) != ZERO_OK || memcmp(b, after, sizeof before) != 0) {
                fprintf(stderr, "a failed zero_load (%s) changed the params\n", zero_result_str(r));
                abort();
            }
        } else if (zero_gather_params_f32(c, b) != ZERO_OK) {
            abort();
        }
    }
    return 0;
}

#ifdef ZERO_FUZZ_MAIN
/* Without libFuzzer (tests/test_fuzz.sh builds this with gcc -DZERO_FUZZ_MAIN): the
   seeds, then fixed-seed mutations of them (byte flips, truncations, insertions). */
#include <dirent.h>
int main(int argc, char **argv) {
    static unsigned char seeds[5][8192], buf[8300];
    size_t len[5] = { 0, 0, 0, 0, 0 };
    int ns = 0, i, k;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    DIR *d;
    struct dirent *e;
    const char *corpus = getenv("ZERO_FUZZ_CORPUS");
    long runs = argc > 1 ? atol(argv[1]) : 2000;
    LLVMFuzzerInitialize(&argc, &argv);
    if (!corpus || !(d = opendir(corpus))) { fprintf(stderr, "ZERO_FUZZ_CORPUS unset or unreadable\n"); return 1; }
    while ((e = readdir(d)) != NULL && ns < 5) {
        char p[1024];
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", corpus, e->d_name);
        if ((f = fopen(p, "rb")) != NULL) { len[ns] = fread(seeds[ns], 1, sizeof seeds[ns], f); fclose(f); ns++; }
    }
    closedir(d);
    for (i = 0; i < ns; i++) LLVMFuzzerTestOneInput(seeds[i], len[i]);
    for (k = 0; ns > 0 && k < runs; k++) {
        int which = k % ns, op, j, nmut;
        size_t n = len[which];
        memcpy(buf, seeds[which], n);
        nmut = 1 + (int)(s % 3);
        for (j = 0; j < nmut && n > 1; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            op = (int)(s % 4);
            if (op == 0) buf[1 + (s >> 8) % (n - 1)] ^= (unsigned char)(1u << ((s >> 40) % 8));
            else if (op == 1) n = 1 + (size_t)((s >> 8) % n);
            else if (op == 2) buf[1 + (s >> 8) % (n - 1)] = (unsigned char)"0123456789 \n-x{}[]\",:"[(s >> 32) % 22];
            else if (n < sizeof buf - 1) {
                size_t at = 1 + (size_t)((s >> 8) % (n - 1));
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = (unsigned char)((s >> 32) & 0xff);
                n++;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%ld mutated inputs, no crash\n", runs);
    return 0;
}
#endif
