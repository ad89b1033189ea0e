/* tests/test_ckpt_inspect.c - the checkpoint inspection API (zero_ckpt_open, _info,
   _module, _param, _file, _verify, _export) on real checkpoints written by zero_save,
   and the damaged ones that it and zero_load must both refuse.

   Good checkpoints: info and param agree with the model that was saved; verify passes;
   export is byte for byte what zero_export_safetensors wrote from the same state (f32
   and bf16); every allocation goes through the caller's allocator and is freed.
   Damaged ones (bad_* below), each a copy of the good one changed one way, with the
   manifest's own checksum recomputed ("resealed") so that only the new checks can
   catch it: a record pointing at another param's bytes (its checksums made to match),
   a param declared 2147483648 x 64, a moment checksum that does not match (a flipped
   moment byte; a changed checksum in the manifest), a param's records overlapping, a
   record outside its file, moments that do not fit the optimizer, a module named
   twice, and an empty path. Each must be refused with the right code by zero_ckpt_open
   (or by verify and export, where the manifest is fine), with a message naming the
   param and the element range, and by zero_load in a context of the same model, which
   keeps its params; a refused export leaves no file (and an older file at that path as
   it was).

       build/test_ckpt_inspect                   the tests (PASS/FAIL lines)
       build/test_ckpt_inspect --fixtures DIR    writes DIR/good, DIR/ref_f32.safetensors,
                                                 DIR/ref_bf16.safetensors and DIR/bad_* for
                                                 tests/test_zero_ckpt.sh, and prints one line
                                                 per bad checkpoint: "NAME CODE PARAM RANGE"
                                                 (CODE: what zero_ckpt_open returns; OK when
                                                 only verify and export refuse it) */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

#include <math.h>
#include <errno.h>
#include <dirent.h>
#include <sys/stat.h>

/* ---- the model: 3 modules, odd sizes (stage 3 at 3 ranks cuts params), one frozen ---- */
#define NMOD 3
#define NPAR 5
static const char *mod_names[NMOD] = { "emb", "mid", "head" };
static const int par_mod[NPAR] = { 0, 0, 1, 2, 2 };
static const char *par_names[NPAR] = { "w", "b", "w", "w", "b" };
static const int64_t par_shape[NPAR][2] = { { 5, 7 }, { 3, 0 }, { 13, 0 }, { 4, 6 }, { 5, 0 } };
#define NUMEL 80                /* 35 + 3 + 13 + 24 + 5 */
#define TRAINABLE 67            /* without mid.w (frozen) */

static int64_t par_numel(int p) { return par_shape[p][0] * (par_shape[p][1] ? par_shape[p][1] : 1); }

typedef struct model_cfg {
    int stage, world, steps;
    zero_optim_type optim;
    double momentum;
    const char *save_dir, *ref_f32, *ref_bf16;  /* zero_save, zero_export_safetensors after training */
    int64_t steps_done;
    float loss_scale;
} model_cfg;

static zero_result make_model(zero_comm *comm, const model_cfg *c, zero_ctx **out, zero_module *mod, zero_param *P) {
    zero_desc d;
    zero_result r;
    int i, p;
    float init[64];
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = c->stage;
    d.param_dtype = ZERO_BF16;
    d.optim.type = c->optim;
    d.optim.lr = 0.01;
    d.optim.momentum = c->momentum;
    d.timeout_ms = 20000;
    if ((r = zero_create(out, &d)) != ZERO_OK) return r;
    for (i = 0; i < NMOD; i++) {
        zero_module_desc md;
        memset(&md, 0, sizeof md);
        md.name = mod_names[i];
        md.frozen = i == 1;
        if ((r = zero_add_module(*out, &md, &mod[i])) != ZERO_OK) return r;
    }
    for (p = 0; p < NPAR; p++) {
        zero_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = par_names[p];
        pd.ndim = par_shape[p][1] ? 2 : 1;
        pd.shape[0] = par_shape[p][0];
        pd.shape[1] = par_shape[p][1];
        if ((r = zero_add_param(*out, mod[par_mod[p]], &pd, &P[p])) != ZERO_OK) return r;
    }
    if ((r = zero_build(*out)) != ZERO_OK) return r;
    for (p = 0; p < NPAR; p++) {
        int64_t k;
        for (k = 0; k < par_numel(p); k++) init[k] = 0.5f * sinf((float)(p * 100 + k) * 0.7f);
        if ((r = zero_param_set_f32(*out, P[p], init)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

/* the trainer's records every save carries: a data position that differs by rank (rank
   0's is saved), a text, an empty value and one of the largest size */
#define POS0 1234
static unsigned char big_rec[ZERO_CKPT_RECORD_MAX];
static const char cfg_rec[] = "stage=3 world=3 seed=7";
static zero_result put_records(zero_ctx *z, int rank) {      /* (big_rec filled by make_good) */
    int64_t pos = POS0 + rank;
    zero_result r;
    if ((r = zero_ckpt_put(z, "data_pos", &pos, sizeof pos)) != ZERO_OK ||
        (r = zero_ckpt_put(z, "trainer.cfg", "placeholder", 11)) != ZERO_OK ||
        (r = zero_ckpt_put(z, "empty", NULL, 0)) != ZERO_OK || (r = zero_ckpt_put(z, "big-1.x_y", big_rec, sizeof big_rec)) != ZERO_OK)
        return r;
    return zero_ckpt_put(z, "trainer.cfg", cfg_rec, sizeof cfg_rec);     /* replaces, keeps its place */
}

/* trains c->steps steps on a gradient that is a fixed function of the params, then saves and exports */
static zero_result train_save(zero_comm *comm, int rank, void *user) {
    model_cfg *c = (model_cfg *)user;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NPAR];
    zero_result r;
    int step, i, p;
    float w[64], g[64];
    if ((r = make_model(comm, c, &z, mod, P)) != ZERO_OK) goto done;
    for (step = 0; step < c->steps; step++) {
        for (i = NMOD - 1; i >= 0; i--) {
            if ((r = zero_fetch(z, mod[i])) != ZERO_OK) goto done;
            for (p = 0; p < NPAR && i != 1; p++) {
                int64_t k, n = par_numel(p);
                if (par_mod[p] != i) continue;
                zero_to_f32(w, zero_param_data(z, P[p]), ZERO_BF16, n);
                for (k = 0; k < n; k++) g[k] = sinf(0.37f * w[k] + 0.011f * (float)step + 0.13f * (float)rank + 0.001f * (float)k);
                zero_add_f32(zero_param_grad(z, P[p]), ZERO_BF16, g, n);
            }
            if ((r = zero_release(z, mod[i])) != ZERO_OK) goto done;
            if ((r = zero_grads_ready(z, mod[i])) != ZERO_OK) goto done;
        }
        if ((r = zero_step(z)) != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    if ((r = put_records(z, rank)) != ZERO_OK) goto done;
    if ((r = zero_save(z, c->save_dir)) != ZERO_OK) goto done;
    if (c->ref_f32 && (r = zero_export_safetensors(z, c->ref_f32, ZERO_F32)) != ZERO_OK) goto done;
    if (c->ref_bf16 && (r = zero_export_safetensors(z, c->ref_bf16, ZERO_BF16)) != ZERO_OK) goto done;
    if (rank == 0) {
        zero_stats st;
        zero_stats_get(z, &st);
        c->steps_done = st.steps;
        c->loss_scale = st.loss_scale;
    }
done:
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}

/* ---- files ------------------------------------------------------------------------- */
static char tmpdir[1024];

static int spit(const char *path, const char *b, long n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = n <= 0 || fwrite(b, 1, (size_t)n, f) == (size_t)n;
    return fclose(f) == 0 && ok;
}
static int same_file(const char *p, const char *q) {
    long np = -1, nq = -2;
    char *a = test_slurp(p, &np), *b = test_slurp(q, &nq);
    int same = a && b && np == nq && memcmp(a, b, (size_t)np) == 0;
    free(a);
    free(b);
    return same;
}
static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[2048];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}
/* a fresh copy of the files in src (no subdirectories in a checkpoint) */
static int copy_dir(const char *src, const char *dst) {
    DIR *d = opendir(src);
    struct dirent *e;
    int ok = d != NULL;
    rm_rf(dst);
    if (mkdir(dst, 0755) != 0) ok = 0;
    while (ok && (e = readdir(d)) != NULL) {
        char a[2048], b[2048], *buf;
        long n;
        if (e->d_name[0] == '.') continue;
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        ok = (buf = test_slurp(a, &n)) != NULL && spit(b, buf, n);
        free(buf);
    }
    if (d) closedir(d);
    return ok;
}

/* ---- the manifest, as a test reads it: its lines, and the "end" line recomputed ---- */
typedef struct rec { int param, rank; long long begin, end, offset; char sum[24], msum[24]; } rec;
typedef struct manifest {
    char *body;                     /* every line but the "end" line */
    int moments, nfile, nrec;
    char files[8][64];
    long long fbytes[8];
    rec r[64];
} manifest;

static int read_manifest(const char *dir, manifest *m) {
    char path[1200], *line, *save = NULL, *copy;
    long n;
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest", dir);
    if (!(m->body = test_slurp(path, &n)) || n < 2) return 0;
    m->body[n - 1] = 0;                             /* cut the "end" line */
    if (!(line = strrchr(m->body, '\n')) || strncmp(line + 1, "end ", 4) != 0) return 0;
    line[1] = 0;
    copy = (char *)malloc(strlen(m->body) + 1);
    strcpy(copy, m->body);
    for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int k;
        long long b;
        char name[64];
        if (sscanf(line, "moments %d", &m->moments) == 1) continue;
        if (m->nfile < 8 && sscanf(line, "file %d %lld %63s", &k, &b, name) == 3) {
            m->fbytes[m->nfile] = b;
            snprintf(m->files[m->nfile++], sizeof m->files[0], "%s", name);
            continue;
        }
        if (m->nrec < 64) {
            rec *r = &m->r[m->nrec];
            if (sscanf(line, "range %d %d %lld %lld %lld %23s %23s", &r->param, &r->rank, &r->begin, &r->end, &r->offset,
                       r->sum, r->msum) == 7)
                m->nrec++;
        }
    }
    free(copy);
    return m->nfile > 0 && m->nrec > 0;
}
static void rec_line(char *out, size_t n, const rec *r) {
    snprintf(out, n, "range %d %d %lld %lld %lld %s %s\n", r->param, r->rank, r->begin, r->end, r->offset, r->sum, r->msum);
}
/* replaces the first `old` in the body by `repl`; 0 if it is not there */
static int edit(manifest *m, const char *old, const char *repl) {
    char *at = strstr(m->body, old), *nb;
    size_t lo = strlen(old), lr = strlen(repl), lb = strlen(m->body);
    if (!at) return 0;
    nb = (char *)malloc(lb - lo + lr + 1);
    memcpy(nb, m->body, (size_t)(at - m->body));
    memcpy(nb + (at - m->body), repl, lr);
    strcpy(nb + (at - m->body) + lr, at + lo);
    free(m->body);
    m->body = nb;
    return 1;
}
static int edit_rec(manifest *m, const rec *old, const rec *now) {
    char a[256], b[256];
    rec_line(a, sizeof a, old);
    rec_line(b, sizeof b, now);
    return edit(m, a, b);
}
/* writes the body and its "end" line, the checksum zero_save computes */
static int reseal(const char *dir, const manifest *m) {
    char path[1200], *t;
    size_t n = strlen(m->body);
    int ok;
    snprintf(path, sizeof path, "%s/manifest", dir);
    t = (char *)malloc(n + 32);
    memcpy(t, m->body, n);
    n += (size_t)snprintf(t + n, 32, "end %016llx\n", (unsigned long long)zero__ck_sum(m->body, strlen(m->body)));
    ok = spit(path, t, (long)n);
    free(t);
    return ok;
}
static int64_t rec_bytes(const manifest *m, const rec *r) {
    return (r->end - r->begin) * 4 * (1 + (par_mod[r->param] == 1 ? 0 : m->moments));
}
static void full_name(char *out, size_t n, int p) { snprintf(out, n, "'%s.%s'", mod_names[par_mod[p]], par_names[p]); }
static void range_str(char *out, size_t n, const rec *r) { snprintf(out, n, "[%lld, %lld)", r->begin, r->end); }

/* ---- the damaged checkpoints: each changes the copy in dir, and says what the refusal
   must name: the param ('module.param', quoted as zero.h quotes it) and the element
   range ("[b, e)"), or two other words where no param is at fault ----------------- */
typedef int (*make_fn)(const char *dir, char *param, char *range);

/* A record of rank k made to point at the first record of its file (another param's),
   its checksums those of the bytes now under it, so checksums alone would pass it. */
static int bad_other_param_range(const char *dir, char *param, char *range) {
    manifest m;
    int i, ok = 0;
    if (!read_manifest(dir, &m)) return 0;
    for (i = m.nrec - 1; i > 0 && !ok; i--) {
        rec *v = &m.r[i], nv = *v;
        char path[1200], *shard;
        long n;
        int64_t nw = v->end - v->begin, bytes = rec_bytes(&m, v);
        const rec *first = NULL;
        int j;
        for (j = 0; j < m.nrec; j++) if (m.r[j].rank == v->rank && m.r[j].offset == 64) first = &m.r[j];
        if (!first || first == v || first->param == v->param) continue;
        snprintf(path, sizeof path, "%s/%s", dir, m.files[v->rank]);
        if (!(shard = test_slurp(path, &n)) || 64 + bytes > n) { free(shard); continue; }
        nv.offset = 64;
        snprintf(nv.sum, sizeof nv.sum, "%016llx", (unsigned long long)zero__ck_sum(shard + 64, (size_t)nw * 4));
        if (bytes > nw * 4)
            snprintf(nv.msum, sizeof nv.msum, "%016llx",
                     (unsigned long long)zero__ck_sum(shard + 64 + nw * 4, (size_t)(bytes - nw * 4)));
        free(shard);
        ok = edit_rec(&m, v, &nv) && reseal(dir, &m);
        full_name(param, 64, v->param);
        range_str(range, 64, v);
    }
    free(m.body);
    return ok;
}
/* emb.w [5, 7] declared [2147483648, 64]; its records as they were */
static int bad_huge_shape(const char *dir, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m) && edit(&m, "param 0 2 5 7 w\n", "param 0 2 2147483648 64 w\n") && reseal(dir, &m);
    free(m.body);
    full_name(param, 64, 0);
    snprintf(range, 64, "[0, %lld)", 2147483648LL * 64);
    return ok;
}
/* the last record of head.w: one byte of its second moment flipped in the shard */
static const rec *head_w_rec(const manifest *m) {
    int i;
    for (i = m->nrec - 1; i >= 0; i--) if (m->r[i].param == 3) return &m->r[i];
    return NULL;
}
static int bad_moment_byte(const char *dir, char *param, char *range) {
    manifest m;
    const rec *r;
    char path[1200], *shard = NULL;
    long n;
    int ok = read_manifest(dir, &m) && (r = head_w_rec(&m)) != NULL;
    if (ok) {
        snprintf(path, sizeof path, "%s/%s", dir, m.files[r->rank]);
        ok = (shard = test_slurp(path, &n)) != NULL && r->offset + rec_bytes(&m, r) <= n;
    }
    if (ok) {
        shard[r->offset + rec_bytes(&m, r) - 3] ^= 0x20;
        ok = spit(path, shard, n);
        full_name(param, 64, r->param);
        range_str(range, 64, r);
    }
    free(shard);
    free(m.body);
    return ok;
}
/* the same record's moment checksum changed in the manifest, resealed */
static int bad_moment_sum(const char *dir, char *param, char *range) {
    manifest m;
    const rec *r;
    rec nr;
    int ok = read_manifest(dir, &m) && (r = head_w_rec(&m)) != NULL;
    if (ok) {
        nr = *r;
        nr.msum[15] = nr.msum[15] == '0' ? '1' : '0';
        ok = edit_rec(&m, r, &nr) && reseal(dir, &m);
        full_name(param, 64, r->param);
        range_str(range, 64, r);
    }
    free(m.body);
    return ok;
}
/* a record that does not start a param moved down one element: the same bytes (its
   checksums still match), the param's elements no longer covered once */
static int bad_param_overlap(const char *dir, char *param, char *range) {
    manifest m;
    int i, ok = read_manifest(dir, &m);
    for (i = 0; ok && i < m.nrec && m.r[i].begin == 0; i++) continue;
    if (ok && i < m.nrec) {
        rec nr = m.r[i];
        nr.begin--;
        nr.end--;
        ok = edit_rec(&m, &m.r[i], &nr) && reseal(dir, &m);
        full_name(param, 64, nr.param);
        range_str(range, 64, &nr);
    } else {
        ok = 0;
    }
    free(m.body);
    return ok;
}
/* the last record of a file pointed past its end */
static int bad_outside_file(const char *dir, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m);
    if (ok) {
        rec nr = m.r[m.nrec - 1];
        nr.offset = m.fbytes[nr.rank];
        ok = edit_rec(&m, &m.r[m.nrec - 1], &nr) && reseal(dir, &m);
        full_name(param, 64, nr.param);
        range_str(range, 64, &nr);
    }
    free(m.body);
    return ok;
}
/* the last record of a file at offset INT64_MAX: refused without overflowing its end */
static int bad_offset_max(const char *dir, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m);
    if (ok) {
        rec nr = m.r[m.nrec - 1];
        nr.offset = INT64_MAX;
        ok = edit_rec(&m, &m.r[m.nrec - 1], &nr) && reseal(dir, &m);
        full_name(param, 64, nr.param);
        range_str(range, 64, &nr);
    }
    free(m.body);
    return ok;
}
/* AdamW with one moment (zero_load said "another optimizer"; now the manifest itself is refused) */
static int bad_moments(const char *dir, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m) && edit(&m, "\nmoments 2\n", "\nmoments 1\n") && reseal(dir, &m);
    free(m.body);
    snprintf(param, 64, "adamw");
    snprintf(range, 64, "1 moment");
    return ok;
}
/* two modules named emb (safetensors would get two "emb.b") */
static int bad_two_modules(const char *dir, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m) && edit(&m, "module 0 head\n", "module 0 emb\n") && reseal(dir, &m);
    free(m.body);
    snprintf(param, 64, "'emb'");
    snprintf(range, 64, "two modules");
    return ok;
}

typedef struct bad_case {
    const char *name;
    make_fn make;
    zero_result open;               /* what zero_ckpt_open returns; ZERO_OK: verify and export refuse */
    zero_result code;               /* what the refusing calls and zero_load return */
} bad_case;
/* the trainer's records, damaged: a value that is not hex, a key twice, a size its value
   does not have (format 2's lines; the malformed line is named) */
static int bad_record(const char *dir, const char *old, const char *repl, char *param, char *range) {
    manifest m;
    int ok = read_manifest(dir, &m) && edit(&m, old, repl) && reseal(dir, &m);
    free(m.body);
    strcpy(param, "malformed");
    strcpy(range, "line");
    return ok;
}
static int bad_record_hex(const char *dir, char *param, char *range) {
    return bad_record(dir, "record 8 d204000000000000 data_pos\n", "record 8 d20400000000000g data_pos\n", param, range);
}
static int bad_record_twice(const char *dir, char *param, char *range) {
    return bad_record(dir, "record 0 - empty\n", "record 0 - data_pos\n", param, range);
}
static int bad_record_size(const char *dir, char *param, char *range) {
    return bad_record(dir, "record 8 d204000000000000 data_pos\n", "record 9 d204000000000000 data_pos\n", param, range);
}

static const bad_case bad_cases[] = {
    { "bad_other_param_range", bad_other_param_range, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_huge_shape", bad_huge_shape, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_moment_byte", bad_moment_byte, ZERO_OK, ZERO_ERR_CORRUPT },
    { "bad_moment_sum", bad_moment_sum, ZERO_OK, ZERO_ERR_CORRUPT },
    { "bad_param_overlap", bad_param_overlap, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_outside_file", bad_outside_file, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_offset_max", bad_offset_max, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_moments", bad_moments, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_two_modules", bad_two_modules, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_record_hex", bad_record_hex, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_record_twice", bad_record_twice, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
    { "bad_record_size", bad_record_size, ZERO_ERR_CORRUPT, ZERO_ERR_CORRUPT },
};
#define NBAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

/* ---- the good checkpoints ---------------------------------------------------------- */
static model_cfg good;                  /* AdamW, stage 3, 3 ranks, 3 steps */
static model_cfg sgd;                   /* SGD without momentum (0 moments), stage 1, 2 ranks */
static char good_dir[1100], ref_f32[1100], ref_bf16[1100], sgd_dir[1100], sgd_ref[1100];

static int make_good(const char *root) {
    zero_result r;
    int k;
    snprintf(good_dir, sizeof good_dir, "%s/good", root);
    snprintf(ref_f32, sizeof ref_f32, "%s/ref_f32.safetensors", root);
    snprintf(ref_bf16, sizeof ref_bf16, "%s/ref_bf16.safetensors", root);
    for (k = 0; k < ZERO_CKPT_RECORD_MAX; k++) big_rec[k] = (unsigned char)(k * 7 + 3);   /* before the rank threads */
    memset(&good, 0, sizeof good);
    good.stage = 3; good.world = 3; good.steps = 3; good.optim = ZERO_OPTIM_ADAMW;
    good.save_dir = good_dir; good.ref_f32 = ref_f32; good.ref_bf16 = ref_bf16;
    r = zero_run_local(good.world, train_save, &good);
    return CHECK(r == ZERO_OK, "train and save: %s: %s", zero_result_str(r), zero_last_error(NULL));
}

/* zero_load into a fresh world-1, stage-0 context of the same model (it needs every
   record, moments included): its result and message; the params must stay as they were */
static zero_result load_into_fresh(const char *dir, char *msg, size_t n) {
    model_cfg c;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NPAR];
    float before[NUMEL], after[NUMEL];
    zero_result r;
    memset(&c, 0, sizeof c);
    c.optim = ZERO_OPTIM_ADAMW;
    msg[0] = 0;
    if ((r = make_model(NULL, &c, &z, mod, P)) != ZERO_OK || (r = zero_gather_params_f32(z, before)) != ZERO_OK) {
        CHECK(0, "setting up the loading context: %s: %s", zero_result_str(r), zero_last_error(z));
        zero_destroy(z);
        return ZERO_ERR_STATE;
    }
    r = zero_load(z, dir);
    snprintf(msg, n, "%s", zero_last_error(z));
    if (r != ZERO_OK && CHECK(zero_gather_params_f32(z, after) == ZERO_OK, "gather after the load"))
        CHECK(memcmp(before, after, sizeof before) == 0, "a refused zero_load changed the params");
    zero_destroy(z);
    return r;
}

/* ---- tests ------------------------------------------------------------------------- */
static void info_matches_saved(void) {
    zero_ckpt *ck = NULL;
    struct zero_ckpt_info in;
    zero_ckpt_param_info pi;
    zero_ckpt_module_info mi;
    zero_ckpt_file_info fi;
    manifest m;
    int i, k, nr = 0;
    int64_t bytes = 0;
    zero_result r = zero_ckpt_open(good_dir, NULL, &ck);
    if (!CHECK(r == ZERO_OK && ck, "zero_ckpt_open: %s: %s", zero_result_str(r), zero_last_error(NULL))) return;
    if (!CHECK(read_manifest(good_dir, &m), "cannot read the manifest")) { zero_ckpt_close(ck); return; }
    CHECK(zero_ckpt_info(ck, &in) == ZERO_OK, "zero_ckpt_info: %s", zero_last_error(NULL));
    CHECK(in.format_version == 3 && in.generation >= 1, "format %d generation %llu", in.format_version,
          (unsigned long long)in.generation);
    CHECK(in.state_dtype == ZERO_STATE_F32, "state_dtype %d", (int)in.state_dtype);
    CHECK(in.stage == 3 && in.world_size == 3, "stage %d world %d", in.stage, in.world_size);
    CHECK(in.param_dtype == ZERO_BF16 && in.grad_dtype == ZERO_BF16 && in.grad_accum_dtype == ZERO_BF16, "dtypes %d %d %d",
          in.param_dtype, in.grad_dtype, in.grad_accum_dtype);
    CHECK(in.optimizer == ZERO_OPTIM_ADAMW && in.moments == 2, "optimizer %d, %d moments", in.optimizer, in.moments);
    CHECK(in.steps == good.steps_done && in.steps == 3 && in.skipped_steps == 0, "steps %lld skipped %lld (saved %lld)",
          (long long)in.steps, (long long)in.skipped_steps, (long long)good.steps_done);
    CHECK(in.loss_scale == good.loss_scale, "loss scale %g, saved %g", (double)in.loss_scale, (double)good.loss_scale);
    CHECK(in.num_modules == NMOD && in.num_params == NPAR && in.num_files == 3 && in.num_ranges == m.nrec,
          "%d modules, %d params, %d files, %d ranges (manifest: %d)", in.num_modules, in.num_params, in.num_files,
          in.num_ranges, m.nrec);
    CHECK(in.numel == NUMEL && in.trainable_numel == TRAINABLE, "numel %lld, trainable %lld", (long long)in.numel,
          (long long)in.trainable_numel);
    for (i = 0; i < NMOD; i++) {
        int np = 0;
        for (k = 0; k < NPAR; k++) np += par_mod[k] == i;
        if (!CHECK(zero_ckpt_module(ck, i, &mi) == ZERO_OK, "zero_ckpt_module(%d): %s", i, zero_last_error(NULL))) continue;
        CHECK(strcmp(mi.name, mod_names[i]) == 0 && mi.frozen == (i == 1) && mi.num_params == np,
              "module %d: '%s' frozen %d, %d params", i, mi.name, mi.frozen, mi.num_params);
    }
    for (i = 0; i < NPAR; i++) {
        if (!CHECK(zero_ckpt_param(ck, i, &pi) == ZERO_OK, "zero_ckpt_param(%d): %s", i, zero_last_error(NULL))) continue;
        CHECK(strcmp(pi.name, par_names[i]) == 0 && strcmp(pi.module, mod_names[par_mod[i]]) == 0 &&
              pi.module_index == par_mod[i] && pi.frozen == (par_mod[i] == 1), "param %d: '%s.%s' (module %d, frozen %d)",
              i, pi.module, pi.name, pi.module_index, pi.frozen);
        CHECK(pi.dtype == ZERO_BF16 && pi.ndim == (par_shape[i][1] ? 2 : 1) && pi.shape[0] == par_shape[i][0] &&
              (pi.ndim == 1 || pi.shape[1] == par_shape[i][1]) && pi.numel == par_numel(i),
              "param %d: dtype %d, ndim %d, shape [%lld, %lld], numel %lld", i, pi.dtype, pi.ndim, (long long)pi.shape[0],
              (long long)pi.shape[1], (long long)pi.numel);
    }
    for (i = 0; i < in.num_files; i++) {
        char path[1200], want[64];
        struct stat st;
        if (!CHECK(zero_ckpt_file(ck, i, &fi) == ZERO_OK, "zero_ckpt_file(%d): %s", i, zero_last_error(NULL))) continue;
        snprintf(path, sizeof path, "%s/%s", good_dir, fi.name);
        snprintf(want, sizeof want, "rank%d.g%llu", i, (unsigned long long)in.generation);
        CHECK(strcmp(fi.name, want) == 0 && fi.rank == i, "file %d: '%s' rank %d", i, fi.name, fi.rank);
        CHECK(stat(path, &st) == 0 && (int64_t)st.st_size == fi.bytes, "file %s: %lld bytes, on disk %lld", fi.name,
              (long long)fi.bytes, (long long)st.st_size);
        bytes += fi.bytes;
        nr += fi.num_ranges;
    }
    CHECK(in.total_bytes == bytes && nr == in.num_ranges, "total_bytes %lld (files %lld), ranges %d of %d",
          (long long)in.total_bytes, (long long)bytes, nr, in.num_ranges);
    /* out of range and NULL: ZERO_ERR_INVALID_ARG with a message */
    CHECK(zero_ckpt_param(ck, NPAR, &pi) == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "param 5 of 5"),
          "param 5: %s", zero_last_error(NULL));
    CHECK(zero_ckpt_param(ck, -1, &pi) == ZERO_ERR_INVALID_ARG, "param -1");
    CHECK(zero_ckpt_module(ck, NMOD, &mi) == ZERO_ERR_INVALID_ARG, "module 3");
    CHECK(zero_ckpt_file(ck, 3, &fi) == ZERO_ERR_INVALID_ARG, "file 3");
    CHECK(zero_ckpt_info(ck, NULL) == ZERO_ERR_INVALID_ARG && zero_ckpt_info(NULL, &in) == ZERO_ERR_INVALID_ARG, "NULL info");
    CHECK(zero_ckpt_param(NULL, 0, &pi) == ZERO_ERR_INVALID_ARG && zero_ckpt_param(ck, 0, NULL) == ZERO_ERR_INVALID_ARG,
          "NULL param");
    free(m.body);
    zero_ckpt_close(ck);
    zero_ckpt_close(NULL);
}

static void verify_good(void) {
    zero_ckpt *ck = NULL;
    zero_result r = zero_ckpt_open(good_dir, NULL, &ck);
    if (!CHECK(r == ZERO_OK, "zero_ckpt_open: %s", zero_last_error(NULL))) return;
    r = zero_ckpt_verify(ck);
    CHECK(r == ZERO_OK, "zero_ckpt_verify: %s: %s", zero_result_str(r), zero_last_error(NULL));
    CHECK(zero_ckpt_verify(NULL) == ZERO_ERR_INVALID_ARG, "verify(NULL)");
    zero_ckpt_close(ck);
}

/* zero_ckpt_export == zero_export_safetensors of the state that was saved, byte for byte */
static void export_equals_zero_export_safetensors(void) {
    zero_ckpt *ck = NULL;
    char out[1200], tmp[1300];
    zero_result r = zero_ckpt_open(good_dir, NULL, &ck);
    if (!CHECK(r == ZERO_OK, "zero_ckpt_open: %s", zero_last_error(NULL))) return;
    snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    r = zero_ckpt_export(ck, out);
    CHECK(r == ZERO_OK, "zero_ckpt_export: %s: %s", zero_result_str(r), zero_last_error(NULL));
    CHECK(same_file(out, ref_f32), "f32: %s differs from zero_export_safetensors's %s", out, ref_f32);
    r = zero_ckpt_export_as(ck, out, ZERO_BF16);
    CHECK(r == ZERO_OK, "zero_ckpt_export_as bf16: %s: %s", zero_result_str(r), zero_last_error(NULL));
    CHECK(same_file(out, ref_bf16), "bf16: %s differs from zero_export_safetensors's %s", out, ref_bf16);
    CHECK(!exists(tmp), "%s left behind", tmp);
    CHECK(zero_ckpt_export_as(ck, out, ZERO_F16) == ZERO_ERR_INVALID_DTYPE, "f16 export accepted");
    unlink(out);
    zero_ckpt_close(ck);
}

/* SGD without momentum: records without moments; resharded from stage 1 at 2 ranks */
static void sgd_no_moments(void) {
    zero_ckpt *ck = NULL;
    struct zero_ckpt_info in;
    char out[1200], msg[ZERO__MSG];
    zero_result r;
    snprintf(sgd_dir, sizeof sgd_dir, "%s/sgd", tmpdir);
    snprintf(sgd_ref, sizeof sgd_ref, "%s/sgd_ref.safetensors", tmpdir);
    snprintf(out, sizeof out, "%s/sgd_out.safetensors", tmpdir);
    memset(&sgd, 0, sizeof sgd);
    sgd.stage = 1; sgd.world = 2; sgd.steps = 2; sgd.optim = ZERO_OPTIM_SGD;
    sgd.save_dir = sgd_dir; sgd.ref_f32 = sgd_ref;
    r = zero_run_local(sgd.world, train_save, &sgd);
    if (!CHECK(r == ZERO_OK, "train and save: %s: %s", zero_result_str(r), zero_last_error(NULL))) return;
    r = zero_ckpt_open(sgd_dir, NULL, &ck);
    if (!CHECK(r == ZERO_OK, "zero_ckpt_open: %s", zero_last_error(NULL))) return;
    CHECK(zero_ckpt_info(ck, &in) == ZERO_OK && in.optimizer == ZERO_OPTIM_SGD && in.moments == 0 && in.stage == 1 &&
          in.world_size == 2, "optimizer %d, %d moments, stage %d, world %d", in.optimizer, in.moments, in.stage, in.world_size);
    CHECK(zero_ckpt_verify(ck) == ZERO_OK, "verify: %s", zero_last_error(NULL));
    CHECK(zero_ckpt_export(ck, out) == ZERO_OK && same_file(out, sgd_ref), "export: %s", zero_last_error(NULL));
    zero_ckpt_close(ck);
    unlink(out);
    {   /* zero_load still takes a good checkpoint (validation refuses nothing zero_save writes) */
        model_cfg c;
        zero_ctx *z = NULL;
        zero_module mod[NMOD];
        zero_param P[NPAR];
        memset(&c, 0, sizeof c);
        c.optim = ZERO_OPTIM_SGD;
        r = make_model(NULL, &c, &z, mod, P);
        if (r == ZERO_OK) r = zero_load(z, sgd_dir);
        snprintf(msg, sizeof msg, "%s", zero_last_error(z));
        zero_destroy(z);
        CHECK(r == ZERO_OK, "zero_load of the sgd checkpoint: %s: %s", zero_result_str(r), msg);
    }
    CHECK(load_into_fresh(good_dir, msg, sizeof msg) == ZERO_OK, "zero_load of the good checkpoint: %s", msg);
}

/* counting allocator: every byte the inspection takes goes through it and comes back */
static int64_t cnt_live, cnt_calls;
static void *cnt_alloc(size_t n, void *u) {
    char *p = (char *)malloc(n + 16);
    (void)u;
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    cnt_live += (int64_t)n;
    cnt_calls++;
    return p + 16;
}
static void cnt_free(void *q, void *u) {
    size_t n;
    (void)u;
    memcpy(&n, (char *)q - 16, sizeof n);
    cnt_live -= (int64_t)n;
    free((char *)q - 16);
}
static void custom_allocator(void) {
    zero_allocator a;
    zero_ckpt *ck = NULL;
    char out[1200];
    zero_result r;
    memset(&a, 0, sizeof a);
    a.alloc = cnt_alloc;
    a.free = cnt_free;
    snprintf(out, sizeof out, "%s/alloc.safetensors", tmpdir);
    r = zero_ckpt_open(good_dir, &a, &ck);
    if (!CHECK(r == ZERO_OK, "zero_ckpt_open: %s", zero_last_error(NULL))) return;
    CHECK(zero_ckpt_verify(ck) == ZERO_OK && zero_ckpt_export(ck, out) == ZERO_OK, "%s", zero_last_error(NULL));
    zero_ckpt_close(ck);
    CHECK(cnt_calls > 0 && cnt_live == 0, "%lld allocations, %lld bytes not freed", (long long)cnt_calls, (long long)cnt_live);
    a.free = NULL;
    CHECK(zero_ckpt_open(good_dir, &a, &ck) == ZERO_ERR_INVALID_ARG && ck == NULL, "alloc without free accepted");
    unlink(out);
}

/* the message names the param and the element range */
static int names(const char *msg, const char *param, const char *range) {
    return strstr(msg, param) && strstr(msg, range);
}

static void bad_case_run(const bad_case *bc) {
    char dir[1100], out[1200], tmp[1300], param[64] = "", range[64] = "", msg[ZERO__MSG];
    zero_ckpt *ck = (zero_ckpt *)tmpdir;    /* not NULL: a refusing open must set it to NULL */
    zero_result r;
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, bc->name);
    snprintf(out, sizeof out, "%s/%s.safetensors", tmpdir, bc->name);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (!CHECK(copy_dir(good_dir, dir) && bc->make(dir, param, range), "cannot make %s", bc->name)) return;
    r = zero_ckpt_open(dir, NULL, &ck);
    if (bc->open != ZERO_OK) {
        CHECK(r == bc->open && ck == NULL, "zero_ckpt_open: %s, want %s (%s)", zero_result_str(r), zero_result_str(bc->open),
              zero_last_error(NULL));
        CHECK(names(zero_last_error(NULL), param, range) && strstr(zero_last_error(NULL), "manifest"),
              "zero_ckpt_open's message does not name %s %s and the manifest: %s", param, range, zero_last_error(NULL));
    } else if (CHECK(r == ZERO_OK, "zero_ckpt_open: %s: %s", zero_result_str(r), zero_last_error(NULL))) {
        /* an older file at the output path stays as it was */
        CHECK(spit(out, "older", 5), "cannot write %s", out);
        r = zero_ckpt_verify(ck);
        CHECK(r == bc->code, "zero_ckpt_verify: %s, want %s", zero_result_str(r), zero_result_str(bc->code));
        CHECK(names(zero_last_error(NULL), param, range), "zero_ckpt_verify's message does not name %s %s: %s", param,
              range, zero_last_error(NULL));
        r = zero_ckpt_export(ck, out);
        CHECK(r == bc->code, "zero_ckpt_export: %s, want %s", zero_result_str(r), zero_result_str(bc->code));
        CHECK(names(zero_last_error(NULL), param, range), "zero_ckpt_export's message does not name %s %s: %s", param,
              range, zero_last_error(NULL));
        {
            long n = 0;
            char *b = test_slurp(out, &n);
            CHECK(b && n == 5 && memcmp(b, "older", 5) == 0, "a refused export changed %s (%ld bytes)", out, n);
            free(b);
        }
        CHECK(!exists(tmp), "a refused export left %s", tmp);
        unlink(out);
        r = zero_ckpt_export(ck, out);
        CHECK(r == bc->code && !exists(out) && !exists(tmp), "a refused export left a file (%s)", zero_result_str(r));
        zero_ckpt_close(ck);
    }
    r = load_into_fresh(dir, msg, sizeof msg);
    CHECK(r == bc->code, "zero_load: %s, want %s (%s)", zero_result_str(r), zero_result_str(bc->code), msg);
    CHECK(names(msg, param, range), "zero_load's message does not name %s %s: %s", param, range, msg);
    rm_rf(dir);
}

/* ---- the trainer's records (zero_ckpt_put / _get / zero_ckpt_record) ------------------- */
/* the records of good (rank 0's at the save), as a context or the inspection API gives them */
static void check_records(const zero_ctx *z) {
    unsigned char buf[ZERO_CKPT_RECORD_MAX];
    int64_t pos = 0, n = -1;
    zero_result r;
    r = zero_ckpt_get(z, "data_pos", &pos, sizeof pos, &n);
    CHECK(r == ZERO_OK && n == 8 && pos == POS0, "data_pos: %s, %lld bytes, %lld (rank 0's is %d)", zero_result_str(r),
          (long long)n, (long long)pos, POS0);
    r = zero_ckpt_get(z, "trainer.cfg", buf, sizeof buf, &n);
    CHECK(r == ZERO_OK && n == (int64_t)sizeof cfg_rec && memcmp(buf, cfg_rec, sizeof cfg_rec) == 0, "trainer.cfg: %s, %lld bytes",
          zero_result_str(r), (long long)n);
    r = zero_ckpt_get(z, "empty", NULL, 0, &n);
    CHECK(r == ZERO_OK && n == 0, "empty: %s, %lld bytes", zero_result_str(r), (long long)n);
    memset(buf, 0xee, 16);
    r = zero_ckpt_get(z, "big-1.x_y", buf, 16, &n);
    CHECK(r == ZERO_ERR_INVALID_SIZE && n == ZERO_CKPT_RECORD_MAX && buf[0] == 0xee && strstr(zero_last_error(z), "65536"),
          "big into 16 bytes: %s, %lld bytes (%s)", zero_result_str(r), (long long)n, zero_last_error(z));
    r = zero_ckpt_get(z, "big-1.x_y", buf, sizeof buf, &n);
    CHECK(r == ZERO_OK && n == ZERO_CKPT_RECORD_MAX && memcmp(buf, big_rec, sizeof buf) == 0, "big: %s", zero_result_str(r));
}

static void records_inspect(void) {
    zero_ckpt *ck = NULL;
    struct zero_ckpt_info in;
    zero_ckpt_record_info ri;
    static const char *keys[4] = { "data_pos", "trainer.cfg", "empty", "big-1.x_y" };
    static const int64_t sizes[4] = { 8, (int64_t)sizeof cfg_rec, 0, ZERO_CKPT_RECORD_MAX };
    int i;
    if (!CHECK(zero_ckpt_open(good_dir, NULL, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) return;
    zero_ckpt_info(ck, &in);
    /* 3 steps of 3 ranks, one micro-batch each */
    CHECK(in.num_records == 4 && in.micro_batches == 9, "%d records, micro_batches %lld", in.num_records,
          (long long)in.micro_batches);
    for (i = 0; i < 4 && i < in.num_records; i++) {
        zero_result r = zero_ckpt_record(ck, i, &ri);
        CHECK(r == ZERO_OK && strcmp(ri.key, keys[i]) == 0 && ri.bytes == sizes[i], "record %d: %s '%s' %lld bytes", i,
              zero_result_str(r), r == ZERO_OK ? ri.key : "", (long long)ri.bytes);
    }
    if (CHECK(zero_ckpt_record(ck, 0, &ri) == ZERO_OK, "record 0"))
        CHECK(*(const int64_t *)ri.data == POS0, "data_pos is %lld, rank 0's was %d", *(const long long *)ri.data, POS0);
    if (CHECK(zero_ckpt_record(ck, 3, &ri) == ZERO_OK, "record 3"))
        CHECK(memcmp(ri.data, big_rec, sizeof big_rec) == 0, "the big record's bytes differ");
    CHECK(zero_ckpt_record(ck, 4, &ri) == ZERO_ERR_INVALID_ARG && zero_ckpt_record(ck, -1, &ri) == ZERO_ERR_INVALID_ARG &&
          zero_ckpt_record(ck, 0, NULL) == ZERO_ERR_INVALID_ARG, "records out of range or NULL out are refused");
    zero_ckpt_close(ck);
}

/* zero_load at another world size and stage: every rank gets rank 0's records (its own,
   put before the load, are replaced: "stale" is gone) and the data position */
static zero_result rl_rank(zero_comm *comm, int rank, void *user) {
    model_cfg c;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NPAR];
    zero_stats st;
    int64_t v = 99;
    zero_result r;
    (void)user;
    memset(&c, 0, sizeof c);
    c.stage = 1; c.world = 2; c.optim = ZERO_OPTIM_ADAMW;
    if ((r = make_model(comm, &c, &z, mod, P)) != ZERO_OK || (r = zero_ckpt_put(z, "stale", &v, sizeof v)) != ZERO_OK ||
        (r = zero_ckpt_put(z, "data_pos", &v, sizeof v)) != ZERO_OK || (r = zero_load(z, good_dir)) != ZERO_OK) {
        CHECK(0, "rank %d: %s: %s", rank, zero_result_str(r), zero_last_error(z));
        zero_destroy(z);
        return r;
    }
    check_records(z);
    r = zero_ckpt_get(z, "stale", &v, sizeof v, NULL);
    CHECK(r == ZERO_ERR_NOT_FOUND && strstr(zero_last_error(z), "'stale'"), "rank %d: a record put before the load: %s (%s)",
          rank, zero_result_str(r), zero_last_error(z));
    zero_stats_get(z, &st);
    CHECK(st.micro_batches == 9 && st.steps == 3, "rank %d: micro_batches %lld, steps %lld after the load", rank,
          (long long)st.micro_batches, (long long)st.steps);
    zero_destroy(z);
    return ZERO_OK;
}
static void records_load(void) {
    zero_result r = zero_run_local(2, rl_rank, NULL);
    CHECK(r == ZERO_OK, "%s: %s", zero_result_str(r), zero_last_error(NULL));
}

/* zero_ckpt_put's and zero_ckpt_get's refusals, each leaving the records as they were */
static void records_put_get_errors(void) {
    model_cfg c;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NPAR];
    char key[80];
    int64_t v = 5, n = 0;
    int i;
    memset(&c, 0, sizeof c);
    c.optim = ZERO_OPTIM_ADAMW;
    if (!CHECK(make_model(NULL, &c, &z, mod, P) == ZERO_OK, "model: %s", zero_last_error(z))) { zero_destroy(z); return; }
    CHECK(zero_ckpt_get(z, "x", &v, sizeof v, &n) == ZERO_ERR_NOT_FOUND && strstr(zero_last_error(z), "has none"),
          "get from a context without records: %s", zero_last_error(z));
    CHECK(zero_ckpt_put(z, "keep", &v, sizeof v) == ZERO_OK, "put keep");
    CHECK(zero_ckpt_put(NULL, "k", &v, 8) == ZERO_ERR_INVALID_ARG && zero_ckpt_put(z, NULL, &v, 8) == ZERO_ERR_INVALID_ARG &&
          zero_ckpt_put(z, "k", NULL, 8) == ZERO_ERR_INVALID_ARG, "NULL ctx, key or data");
    CHECK(zero_ckpt_put(z, "", &v, 8) == ZERO_ERR_INVALID_ARG && zero_ckpt_put(z, "a b", &v, 8) == ZERO_ERR_INVALID_ARG &&
          zero_ckpt_put(z, "a/b", &v, 8) == ZERO_ERR_INVALID_ARG && zero_ckpt_put(z, "\xc3\xa9", &v, 8) == ZERO_ERR_INVALID_ARG,
          "keys outside A-Z a-z 0-9 _ . -");
    memset(key, 'k', sizeof key);
    key[65] = 0;
    CHECK(zero_ckpt_put(z, key, &v, 8) == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(z), "1-64"), "a 65-character key: %s",
          zero_last_error(z));
    key[64] = 0;
    CHECK(zero_ckpt_put(z, key, &v, 8) == ZERO_OK, "a 64-character key: %s", zero_last_error(z));
    CHECK(zero_ckpt_put(z, "keep", big_rec, -1) == ZERO_ERR_INVALID_SIZE &&
          zero_ckpt_put(z, "keep", big_rec, ZERO_CKPT_RECORD_MAX + 1) == ZERO_ERR_INVALID_SIZE &&
          strstr(zero_last_error(z), "ZERO_CKPT_RECORD_MAX"), "sizes: %s", zero_last_error(z));
    v = 0;
    CHECK(zero_ckpt_get(z, "keep", &v, sizeof v, &n) == ZERO_OK && v == 5 && n == 8, "a refused put changed 'keep': %lld",
          (long long)v);
    for (i = 2; i < ZERO_CKPT_MAX_RECORDS; i++) {
        snprintf(key, sizeof key, "r%d", i);
        if (!CHECK(zero_ckpt_put(z, key, &i, sizeof i) == ZERO_OK, "record %d: %s", i, zero_last_error(z))) break;
    }
    CHECK(zero_ckpt_put(z, "one_more", &v, 8) == ZERO_ERR_INVALID_SIZE && strstr(zero_last_error(z), "ZERO_CKPT_MAX_RECORDS"),
          "record %d: %s", ZERO_CKPT_MAX_RECORDS + 1, zero_last_error(z));
    v = 6;
    CHECK(zero_ckpt_put(z, "keep", &v, sizeof v) == ZERO_OK, "replacing a value when full: %s", zero_last_error(z));
    v = 0;
    CHECK(zero_ckpt_get(z, "keep", &v, sizeof v, NULL) == ZERO_OK && v == 6, "replaced value %lld", (long long)v);
    CHECK(zero_ckpt_get(z, NULL, &v, 8, NULL) == ZERO_ERR_INVALID_ARG && zero_ckpt_get(z, "keep", NULL, 8, NULL) ==
          ZERO_ERR_INVALID_ARG && zero_ckpt_get(NULL, "keep", &v, 8, NULL) == ZERO_ERR_INVALID_ARG, "get with NULL");
    CHECK(zero_ckpt_get(z, "nope", &v, 8, &n) == ZERO_ERR_NOT_FOUND && n == 0 && strstr(zero_last_error(z), "'nope'"),
          "an unknown key: %s", zero_last_error(z));
    zero_destroy(z);
}

/* a format-1 checkpoint (the lines format 2 added taken out): still opened and loaded;
   its data position is then steps + skipped of the loader's world and accum_steps, and
   it has no records (the context's are dropped, as any load replaces them) */
static void records_format1(void) {
    char dir[1100];
    manifest m;
    struct zero_ckpt_info in;
    zero_ckpt *ck = NULL;
    model_cfg c;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NPAR];
    zero_stats st;
    int64_t v = 1;
    char *p;
    int ok;
    snprintf(dir, sizeof dir, "%s/format1", tmpdir);
    if (!CHECK(copy_dir(good_dir, dir) && read_manifest(dir, &m), "copy")) return;
    ok = edit(&m, "zero-checkpoint 3\n", "zero-checkpoint 1\n") && edit(&m, "state_dtype f32\n", "");
    while (ok && (p = strstr(m.body, "\nmicro_batches ")) != NULL) {       /* through the last record line */
        char *q = strstr(p, "\nmodules ");
        if (!q) { ok = 0; break; }
        memmove(p, q, strlen(q) + 1);
    }
    ok = ok && reseal(dir, &m);
    free(m.body);
    if (!CHECK(ok, "cannot rewrite the manifest as format 1")) return;
    if (CHECK(zero_ckpt_open(dir, NULL, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) {
        zero_ckpt_info(ck, &in);
        CHECK(in.format_version == 1 && in.micro_batches == -1 && in.num_records == 0, "format %d, micro %lld, %d records",
              in.format_version, (long long)in.micro_batches, in.num_records);
        zero_ckpt_close(ck);
    }
    memset(&c, 0, sizeof c);
    c.optim = ZERO_OPTIM_ADAMW;
    if (CHECK(make_model(NULL, &c, &z, mod, P) == ZERO_OK && zero_ckpt_put(z, "mine", &v, 8) == ZERO_OK, "model") &&
        CHECK(zero_load(z, dir) == ZERO_OK, "load: %s", zero_last_error(z))) {
        zero_stats_get(z, &st);
        CHECK(st.micro_batches == 3 && zero_ckpt_get(z, "mine", &v, 8, NULL) == ZERO_ERR_NOT_FOUND,
              "micro_batches %lld (want 3 steps x 1 rank x 1), 'mine' after the load: %s", (long long)st.micro_batches,
              zero_last_error(z));
    }
    zero_destroy(z);
    rm_rf(dir);
}

/* A format-2 manifest (fp32 moments, no state_dtype line) opens and loads; format 3
   without its state_dtype line, or with one zero.h does not know, is refused. */
static void format2_reads(void) {
    static const char *bad[2][2] = {{"state_dtype f32\n", ""}, {"state_dtype f32\n", "state_dtype q7\n"}};
    char dir[1200], msg[ZERO__MSG];
    manifest m;
    struct zero_ckpt_info in;
    zero_ckpt *ck = NULL;
    zero_result r;
    int ok, i;
    snprintf(dir, sizeof dir, "%s/format2", tmpdir);
    if (!CHECK(copy_dir(good_dir, dir) && read_manifest(dir, &m), "copy")) return;
    ok = edit(&m, "zero-checkpoint 3\n", "zero-checkpoint 2\n") && edit(&m, "state_dtype f32\n", "") && reseal(dir, &m);
    free(m.body);
    if (!CHECK(ok, "cannot rewrite the manifest as format 2")) return;
    if (CHECK(zero_ckpt_open(dir, NULL, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) {
        zero_ckpt_info(ck, &in);
        CHECK(in.format_version == 2 && in.state_dtype == ZERO_STATE_F32 && in.moments == 2, "format %d, state_dtype %d",
              in.format_version, (int)in.state_dtype);
        CHECK(zero_ckpt_verify(ck) == ZERO_OK, "verify: %s", zero_last_error(NULL));
        zero_ckpt_close(ck);
    }
    r = load_into_fresh(dir, msg, sizeof msg);
    CHECK(r == ZERO_OK, "load of format 2: %s: %s", zero_result_str(r), msg);
    for (i = 0; i < 2; i++) {
        if (!CHECK(copy_dir(good_dir, dir) && read_manifest(dir, &m), "copy")) break;
        ok = edit(&m, bad[i][0], bad[i][1]) && reseal(dir, &m);
        free(m.body);
        if (!CHECK(ok, "cannot edit the manifest")) break;
        r = zero_ckpt_open(dir, NULL, &ck);
        CHECK(r == ZERO_ERR_CORRUPT && ck == NULL && strstr(zero_last_error(NULL), "malformed"),
              "state_dtype line '%s': %s: %s", bad[i][1], zero_result_str(r), zero_last_error(NULL));
    }
    rm_rf(dir);
}

static void empty_path(void) {
    zero_ckpt *ck = NULL;
    char out[1200], msg[ZERO__MSG];
    zero_result r = zero_ckpt_open("", NULL, &ck);
    CHECK(r == ZERO_ERR_INVALID_ARG && ck == NULL && strstr(zero_last_error(NULL), "empty"), "open(\"\"): %s: %s",
          zero_result_str(r), zero_last_error(NULL));
    CHECK(zero_ckpt_open(NULL, NULL, &ck) == ZERO_ERR_INVALID_ARG, "open(NULL)");
    CHECK(zero_ckpt_open(good_dir, NULL, NULL) == ZERO_ERR_INVALID_ARG, "open(out NULL)");
    r = load_into_fresh("", msg, sizeof msg);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(msg, "empty"), "zero_load(\"\"): %s: %s", zero_result_str(r), msg);
    if (!CHECK(zero_ckpt_open(good_dir, NULL, &ck) == ZERO_OK, "open: %s", zero_last_error(NULL))) return;
    r = zero_ckpt_export(ck, "");
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "empty"), "export(\"\"): %s: %s", zero_result_str(r),
          zero_last_error(NULL));
    CHECK(!exists(".tmp"), "export(\"\") wrote .tmp");
    CHECK(zero_ckpt_export(ck, NULL) == ZERO_ERR_INVALID_ARG && zero_ckpt_export(NULL, "x") == ZERO_ERR_INVALID_ARG,
          "export with NULL");
    snprintf(out, sizeof out, "%s/no/such/dir/x.safetensors", tmpdir);
    r = zero_ckpt_export(ck, out);
    CHECK(r == ZERO_ERR_IO && strstr(zero_last_error(NULL), "no/such/dir"), "export into a missing directory: %s: %s",
          zero_result_str(r), zero_last_error(NULL));
    zero_ckpt_close(ck);
    snprintf(out, sizeof out, "%s/missing", tmpdir);
    r = zero_ckpt_open(out, NULL, &ck);
    CHECK(r == ZERO_ERR_IO && strstr(zero_last_error(NULL), "missing/manifest"), "open of a missing directory: %s: %s",
          zero_result_str(r), zero_last_error(NULL));
}

/* --fixtures DIR: the checkpoints tests/test_zero_ckpt.sh runs build/zero_ckpt on */
static int fixtures(const char *root) {
    int i;
    if (mkdir(root, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "mkdir %s: %s\n", root, strerror(errno)); return 1; }
    if (!make_good(root)) return 1;
    for (i = 0; i < NBAD; i++) {
        char dir[1100], param[64] = "", range[64] = "";
        snprintf(dir, sizeof dir, "%s/%s", root, bad_cases[i].name);
        if (!copy_dir(good_dir, dir) || !bad_cases[i].make(dir, param, range)) {
            fprintf(stderr, "cannot make %s\n", dir);
            return 1;
        }
        printf("%s %s %s %s\n", bad_cases[i].name, bad_cases[i].open == ZERO_OK ? "OK" : zero_result_str(bad_cases[i].open),
               param, range);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *t = getenv("TMPDIR");
    int i;
    if (argc == 3 && strcmp(argv[1], "--fixtures") == 0) return fixtures(argv[2]);
    test_init();
    snprintf(tmpdir, sizeof tmpdir, "%s/zero_inspect_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { printf("FAIL setup: mkdtemp: %s\n", strerror(errno)); return 1; }
    test_begin("make_good_checkpoint");
    i = make_good(tmpdir);
    test_end();
    if (i) {
        TEST_RUN(info_matches_saved);
        TEST_RUN(verify_good);
        TEST_RUN(export_equals_zero_export_safetensors);
        TEST_RUN(sgd_no_moments);
        TEST_RUN(custom_allocator);
        TEST_RUN(empty_path);
        TEST_RUN(records_inspect);
        TEST_RUN(records_load);
        TEST_RUN(records_put_get_errors);
        TEST_RUN(records_format1);
        TEST_RUN(format2_reads);
        for (i = 0; i < NBAD; i++) { test_begin("%s", bad_cases[i].name); bad_case_run(&bad_cases[i]); test_end(); }
    }
    rm_rf(good_dir);
    rm_rf(sgd_dir);
    unlink(ref_f32);
    unlink(ref_bf16);
    unlink(sgd_ref);
    rm_rf(tmpdir);
    return test_summary();
}
