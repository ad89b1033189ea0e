/* tests/test_ckpt.c - sharded checkpoints: save / load round trips that continue
   training bitwise, resharding across stages and world sizes, every fault a loader
   must refuse without touching the trainer's state, and a save killed with SIGKILL.

   The "model" is three modules with odd sizes (padding and slices that cut through
   params at every world size); the gradient is a fixed function of the gathered
   params, the step and the rank, so every run is deterministic. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NMOD 3
#define MAXP 256

typedef struct cfg {
    int stage, world;
    zero_dtype dtype;
    zero_optim_type optim;
    int frozen1;                    /* module 1 frozen */
    zero_offload_tier offload;      /* desc.offload_optimizer (NVMe: files in tmpdir) */
    zero_offload_tier offload_params;
    int wide;                       /* a different model: module 2's w is wider */
    zero_state_dtype sdt;           /* desc.optim.state_dtype (0: the default, f32) */
    float gmul;                     /* the gradients times this (0: 1) */
    int init_steps;                 /* train this many steps before the load */
    int step0, steps;               /* steps [step0, step0 + steps) after the load */
    const char *load_dir, *save_dir;
    zero_result load_expect;        /* what zero_load must return */
    zero_result save_expect;        /* what zero_save must return */
    int after_steps;                /* steps trained after the save (whatever it returned) */
    void (*before_save)(void);      /* called by every rank just before zero_save */
    const char *export_path;        /* zero_export_safetensors after training */
    zero_dtype export_dtype;
    const char *st_load;            /* zero_load_safetensors instead of zero_load */
    /* results (rank 0, or per rank) */
    float before[MAXP], out[MAXP];
    int64_t numel, stats_steps;
    float loss_scale;
    zero_result load_got[4], save_got[4];
    char load_msg[4][ZERO__MSG], save_msg[4][ZERO__MSG];
    int failed;
} cfg;

static const int64_t shapes[][2] = { { 5, 7 }, { 3, 0 }, { 13, 0 }, { 4, 6 }, { 5, 0 } };
static const int pmod[] = { 0, 0, 1, 2, 2 };
static const char *pname[] = { "w", "b", "w", "w", "b" };

static int64_t pnumel(int i, int wide) { return (shapes[i][0] + (wide && i == 3)) * (shapes[i][1] ? shapes[i][1] : 1); }

static zero_result train_steps(zero_ctx *z, const cfg *c, zero_module *mod, zero_param *P, int rank, int step0, int n) {
    zero_result r;
    int step, i, p;
    float w[64], g[64];
    for (step = step0; step < step0 + n; step++) {
        float ls = zero_loss_scale(z);
        for (i = NMOD - 1; i >= 0; i--) {
            if ((r = zero_fetch(z, mod[i])) != ZERO_OK) return r;
            for (p = 0; p < 5; p++) {
                int64_t k, ne = pnumel(p, c->wide);
                if (pmod[p] != i || (c->frozen1 && i == 1)) continue;
                zero_to_f32(w, zero_param_data(z, P[p]), c->dtype, ne);
                for (k = 0; k < ne; k++)
                    g[k] = sinf(0.37f * w[k] + 0.011f * (float)step + 0.13f * (float)rank + 0.001f * (float)k) * ls *
                           (c->gmul != 0.0f ? c->gmul : 1.0f);
                zero_add_f32(zero_param_grad(z, P[p]), c->dtype, g, ne);
            }
            if ((r = zero_release(z, mod[i])) != ZERO_OK) return r;
            if ((r = zero_grads_ready(z, mod[i])) != ZERO_OK) return r;
        }
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) return r;
    }
    return ZERO_OK;
}

static char tmpdir[1024];

static zero_result make_ctx(zero_comm *comm, const cfg *c, zero_ctx **out, zero_module *mod, zero_param *P) {
    zero_desc d;
    zero_ctx *z;
    zero_result r;
    int i, p;
    float init[64];
    fx_desc(&d, comm, c->stage, c->dtype, c->optim, 0.01);
    d.loss_scale_window = 3;
    d.loss_scale_init = 1024;
    d.offload_optimizer = c->offload;
    d.offload_params = c->offload_params;
    d.optim.state_dtype = c->sdt;
    d.offload.nvme_dirs[0] = tmpdir;
    *out = NULL;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    *out = z;
    for (i = 0; i < NMOD; i++) {
        static const char *names[NMOD] = { "emb", "mid", "head" };
        if ((r = fx_module(z, names[i], i == 1 && c->frozen1, &mod[i])) != ZERO_OK) return r;
    }
    for (p = 0; p < 5; p++) {   /* 1-D params (biases) are not decayed; with Muon the 2-D ones are its */
        zero_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = pname[p];
        pd.ndim = shapes[p][1] ? 2 : 1;
        pd.shape[0] = shapes[p][0] + (c->wide && p == 3);
        pd.shape[1] = shapes[p][1];
        pd.no_decay = shapes[p][1] == 0;
        pd.muon = c->optim == ZERO_OPTIM_MUON && shapes[p][1] != 0;
        if ((r = zero_add_param(z, mod[pmod[p]], &pd, &P[p])) != ZERO_OK) return r;
    }
    if ((r = zero_build(z)) != ZERO_OK) return r;
    for (p = 0; p < 5; p++) {
        int64_t k;
        for (k = 0; k < pnumel(p, c->wide); k++) init[k] = 0.5f * sinf((float)(p * 100 + k) * 0.7f);
        if ((r = zero_param_set_f32(z, P[p], init)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    cfg *c = (cfg *)user;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[5];
    zero_result r;
    float all[MAXP];
    if ((r = make_ctx(comm, c, &z, mod, P)) != ZERO_OK) goto done;
    if ((r = train_steps(z, c, mod, P, rank, 0, c->init_steps)) != ZERO_OK) goto done;
    if (c->load_dir) {
        zero_result lr;
        if ((r = zero_gather_params_f32(z, all)) != ZERO_OK) goto done;
        if (rank == 0) memcpy(c->before, all, sizeof all);
        lr = c->st_load ? zero_load_safetensors(z, c->st_load) : zero_load(z, c->load_dir);
        c->load_got[rank] = lr;
        snprintf(c->load_msg[rank], sizeof c->load_msg[rank], "%s", zero_last_error(z));
        if (lr != c->load_expect) {
            fprintf(stderr, "rank %d: zero_load: %s: %s\n", rank, zero_result_str(lr), zero_last_error(z));
            r = lr == ZERO_OK ? ZERO_ERR_STATE : lr;
            goto done;
        }
    }
    if ((r = train_steps(z, c, mod, P, rank, c->step0, c->steps)) != ZERO_OK) goto done;
    if (c->save_dir) {
        zero_result sr;
        if (c->before_save) {   /* the comm stream done first (a stage-3 prefetch may read the NVMe tier) */
            double one = 1;
            if ((r = zero_allreduce_f64(z, &one, 1)) != ZERO_OK) goto done;
            c->before_save();
        }
        sr = zero_save(z, c->save_dir);
        c->save_got[rank] = sr;
        snprintf(c->save_msg[rank], sizeof c->save_msg[rank], "%s", zero_last_error(z));
        if (sr != c->save_expect) {
            fprintf(stderr, "rank %d: zero_save: %s: %s\n", rank, zero_result_str(sr), zero_last_error(z));
            r = sr == ZERO_OK ? ZERO_ERR_STATE : sr;
            goto done;
        }
        if ((r = train_steps(z, c, mod, P, rank, c->step0 + c->steps, c->after_steps)) != ZERO_OK) goto done;
    }
    if (c->export_path && (r = zero_export_safetensors(z, c->export_path, c->export_dtype)) != ZERO_OK) goto done;
    if ((r = zero_gather_params_f32(z, all)) != ZERO_OK) goto done;
    if (rank == 0) {
        zero_stats st;
        int64_t n = zero_num_params(z);
        memcpy(c->out, all, sizeof(float) * (size_t)n);
        c->numel = n;
        zero_stats_get(z, &st);
        c->stats_steps = st.steps;
        c->loss_scale = st.loss_scale;
    }
done:
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}

static int run(cfg *c) {
    zero_result r = zero_run_local(c->world, rank_main, c);
    return CHECK(r == ZERO_OK, "stage %d world %d: %s (%s)", c->stage, c->world, zero_result_str(r), zero_last_error(NULL));
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

static void base_cfg(cfg *c, int stage, int world, zero_dtype dt, zero_optim_type opt) {
    memset(c, 0, sizeof *c);
    c->stage = stage; c->world = world; c->dtype = dt; c->optim = opt;
}

/* 20 steps straight == 10 steps, save, load into a fresh context, 10 steps (bitwise) */
static void resume_offload(int stage, int world, zero_dtype dt, zero_optim_type opt, int frozen, zero_offload_tier tier,
                           zero_offload_tier ptier) {
    static cfg ref, a, b;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/resume", tmpdir);
    base_cfg(&ref, stage, world, dt, opt); ref.frozen1 = frozen; ref.steps = 20;
    ref.offload = tier; ref.offload_params = ptier;
    if (!run(&ref)) return;
    a = ref; a.steps = 10; a.save_dir = dir;
    if (!run(&a)) return;
    b = ref; b.load_dir = dir; b.step0 = 10; b.steps = 10;
    if (!run(&b)) return;
    CHECK(memcmp(ref.out, b.out, sizeof(float) * (size_t)ref.numel) == 0, "resumed params differ from 20 straight steps");
    CHECK(memcmp(a.out, ref.out, sizeof(float) * (size_t)ref.numel) != 0, "10 and 20 steps agree: nothing trained");
    CHECK(b.stats_steps == 20, "steps after resume %lld", (long long)b.stats_steps);
    CHECK(b.loss_scale == ref.loss_scale, "loss scale %g vs %g", (double)b.loss_scale, (double)ref.loss_scale);
    rm_rf(dir);
}

/* the same, but the context that loads has trained 3 steps first: at stage 3 its
   gathered modules (prefetched for the next step) must not survive the load */
static void resume_late(int stage, zero_offload_tier tier, zero_offload_tier ptier) {
    static cfg ref, a, b;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/late", tmpdir);
    base_cfg(&ref, stage, 2, ZERO_BF16, ZERO_OPTIM_ADAMW); ref.steps = 20;
    ref.offload = tier; ref.offload_params = ptier;
    if (!run(&ref)) return;
    a = ref; a.steps = 10; a.save_dir = dir;
    if (!run(&a)) return;
    b = ref; b.init_steps = 3; b.load_dir = dir; b.step0 = 10; b.steps = 10;
    if (!run(&b)) return;
    CHECK(memcmp(ref.out, b.out, sizeof(float) * (size_t)ref.numel) == 0, "a load after training differs");
    rm_rf(dir);
}

static void resume_bitwise(int stage, int world, zero_dtype dt, zero_optim_type opt, int frozen) {
    resume_offload(stage, world, dt, opt, frozen, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE);
}

/* a checkpoint of one optimizer does not load into a context of another: ZERO_ERR_MISMATCH
   with both named, and the context keeps its params */
static void optim_mismatch(void) {
    static cfg a, b;
    char dir[1100], msg[ZERO__MSG];
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[5];
    zero_result r;
    float before[MAXP], after[MAXP];
    snprintf(dir, sizeof dir, "%s/mismatch", tmpdir);
    base_cfg(&a, 1, 1, ZERO_BF16, ZERO_OPTIM_LION); a.steps = 2; a.save_dir = dir;
    if (!run(&a)) return;
    b = a; b.optim = ZERO_OPTIM_ADAMW; b.save_dir = NULL;
    r = make_ctx(NULL, &b, &z, mod, P);
    if (CHECK(r == ZERO_OK, "make_ctx: %s", zero_last_error(z)) &&
        CHECK(zero_gather_params_f32(z, before) == ZERO_OK, "gather: %s", zero_last_error(z))) {
        r = zero_load(z, dir);
        snprintf(msg, sizeof msg, "%s", zero_last_error(z));
        CHECK(r == ZERO_ERR_MISMATCH && strstr(msg, "optimizer lion with 1 moment(s); this context has adamw with 2"),
              "a Lion checkpoint into an AdamW context: %s: %s", zero_result_str(r), msg);
        CHECK(zero_gather_params_f32(z, after) == ZERO_OK && memcmp(before, after, sizeof(float) * (size_t)a.numel) == 0,
              "the refused load changed the params");
    }
    zero_destroy(z);
    rm_rf(dir);
}

/* (stage s, N ranks) -> (stage s2, M ranks) -> saved again -> back at (s, N): the
   state survives the trip through another sharding bitwise, moments included */
static void reshard_params(int s, int n, zero_offload_tier t, zero_offload_tier pt, int s2, int m, zero_offload_tier t2,
                           zero_offload_tier pt2, zero_dtype dt, zero_optim_type opt) {
    static cfg ref, a, b, c;
    char d1[1100], d2[1100];
    snprintf(d1, sizeof d1, "%s/rs1", tmpdir);
    snprintf(d2, sizeof d2, "%s/rs2", tmpdir);
    base_cfg(&ref, s, n, dt, opt); ref.steps = 20; ref.offload = t; ref.offload_params = pt;
    if (!run(&ref)) return;
    a = ref; a.steps = 10; a.save_dir = d1;
    if (!run(&a)) return;
    base_cfg(&b, s2, m, dt, opt); b.load_dir = d1; b.save_dir = d2; b.offload = t2; b.offload_params = pt2;
    if (!run(&b)) return;
    CHECK(memcmp(a.out, b.out, sizeof(float) * (size_t)a.numel) == 0, "params differ after loading at stage %d world %d", s2, m);
    c = ref; c.load_dir = d2; c.step0 = 10; c.steps = 10;
    if (!run(&c)) return;
    CHECK(memcmp(ref.out, c.out, sizeof(float) * (size_t)ref.numel) == 0, "resumed after resharding differs");
    rm_rf(d1);
    rm_rf(d2);
}

static void reshard_tier(int s, int n, zero_offload_tier t, int s2, int m, zero_offload_tier t2, zero_dtype dt,
                         zero_optim_type opt) {
    reshard_params(s, n, t, ZERO_OFFLOAD_NONE, s2, m, t2, ZERO_OFFLOAD_NONE, dt, opt);
}

static void reshard(int s, int n, int s2, int m, zero_dtype dt, zero_optim_type opt) {
    reshard_tier(s, n, ZERO_OFFLOAD_NONE, s2, m, ZERO_OFFLOAD_NONE, dt, opt);
}

/* ---- the moments' format (ON OPTIMIZER STATES) ------------------------------------ */
static void spit(const char *path, const char *b, long n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n > 0) fwrite(b, 1, (size_t)n, f);
    fclose(f);
}
/* 1 when both files exist and hold the same bytes */
static int same_file(const char *p, const char *q) {
    long np = -1, nq = -2;
    char *a = test_slurp(p, &np), *b = test_slurp(q, &nq);
    int same = a && b && np == nq && memcmp(a, b, (size_t)np) == 0;
    free(a);
    free(b);
    return same;
}
/* every moment a checkpoint holds, as fp32 (read through zero_load's own decoding,
   zero__ck_read_moment), at mom[k - 1][param's first element + e]; its format; its shards'
   bytes after their headers, and what ON OPTIMIZER STATES says a q8 save takes (a record's
   fp32 weights, then per moment the 260-byte blocks it touches). 0: unreadable */
static int read_moments(const char *dir, float mom[2][MAXP], zero_state_dtype *sdt, int64_t *data, int64_t *q8_bytes) {
    zero_allocator al;
    zero__ck_manifest m;
    char msg[ZERO__MSG];
    unsigned char *raw = (unsigned char *)malloc(ZERO__CK_RAW);
    int64_t base[5], e;
    int i, k, fd, ok = raw != NULL;
    memset(&al, 0, sizeof al);
    if (!ok || zero__ck_read_manifest(&al, dir, &m, msg, sizeof msg) != ZERO_OK) {
        fprintf(stderr, "read_moments: %s\n", msg);
        free(raw);
        return 0;
    }
    for (i = 0, e = 0; i < 5; i++) { base[i] = e; e += pnumel(i, 0); }
    memset(mom, 0, sizeof(float) * 2 * MAXP);
    *sdt = m.sdt;
    *data = 0;
    for (i = 0; i < m.nfile; i++) *data += m.files[i].bytes - ZERO__CK_HEADER;
    *q8_bytes = 0;
    for (i = 0; i < m.nrange && ok; i++) {
        const zero__ck_range *rg = &m.ranges[i];
        int64_t first = rg->mpos / 256, last = (rg->mpos + rg->end - rg->begin - 1) / 256;
        *q8_bytes += 4 * (rg->end - rg->begin) + 2 * 260 * (last - first + 1);
        if (zero__ck_open_shard(dir, &m, rg->rank, &fd, msg, sizeof msg) != ZERO_OK) { ok = 0; break; }
        for (k = 1; k <= m.moments && ok; k++)
            ok = zero__ck_read_moment(&m, rg, fd, k, 0, rg->end - rg->begin, &mom[k - 1][base[rg->param] + rg->begin],
                                      raw) == 1;
        zero__ck_close(fd);
    }
    zero__ck_manifest_free(&al, &m);
    free(raw);
    return ok;
}
static float root4(float x) { return x < 0 ? -sqrtf(sqrtf(-x)) : sqrtf(sqrtf(x)); }

/* A checkpoint holds the moments in the saving context's format (format 3: bf16 or q8
   bytes, not fp32 values): its own resume is bitwise; into fp32 moments (at another
   stage and world size) it loads the values its codes stand for, exactly, and those
   saved again load back into the format as the same codes and scales; fp32 moments
   loaded into it are converted within the format's error (bf16: 2^-8 relative; q8: a
   half code of the 4th-root map, m's 127 steps and v's 256 (a tiny v rounds up to the
   first code), of the largest magnitude, the blocks' scales being at most it). */
static void state_formats(zero_state_dtype sdt, int stage, int world, zero_offload_tier tier) {
    static cfg ref, a, b, c, d, f, g;
    static float ma[2][MAXP], mb[2][MAXP], mc[2][MAXP], mf[2][MAXP], mg[2][MAXP];
    char da[1100], db[1100], dc[1100], df[1100], dg[1100], pa[1200], pc[1200];
    zero_state_dtype ta, tb, tc, tf, tg;
    int64_t ba, bb, bc, bf, bg, n, i, qa, qx;
    int k, worse = 0, changed = 0;
    snprintf(da, sizeof da, "%s/sf_a", tmpdir);
    snprintf(db, sizeof db, "%s/sf_b", tmpdir);
    snprintf(dc, sizeof dc, "%s/sf_c", tmpdir);
    snprintf(df, sizeof df, "%s/sf_f", tmpdir);
    snprintf(dg, sizeof dg, "%s/sf_g", tmpdir);
    base_cfg(&ref, stage, world, ZERO_BF16, ZERO_OPTIM_ADAMW); ref.sdt = sdt; ref.offload = tier; ref.steps = 12;
    if (!run(&ref)) return;
    a = ref; a.steps = 6; a.save_dir = da;
    if (!run(&a)) return;
    b = ref; b.load_dir = da; b.step0 = 6; b.steps = 6;
    if (!run(&b)) return;
    CHECK(memcmp(ref.out, b.out, sizeof(float) * (size_t)ref.numel) == 0, "resumed params differ from 12 straight steps");
    /* into fp32 moments at another sharding, saved; that loaded back into the format */
    base_cfg(&c, stage == 3 ? 1 : 3, world == 2 ? 3 : 2, ZERO_BF16, ZERO_OPTIM_ADAMW); c.load_dir = da; c.save_dir = db;
    if (!run(&c)) return;
    d = ref; d.steps = 0; d.load_dir = db; d.save_dir = dc;
    if (!run(&d)) return;
    if (!CHECK(read_moments(da, ma, &ta, &ba, &qa) && read_moments(db, mb, &tb, &bb, &qx) &&
               read_moments(dc, mc, &tc, &bc, &qx),
               "cannot read the moments back")) return;
    n = ref.numel;
    CHECK(ta == sdt && tb == ZERO_STATE_F32 && tc == sdt, "the manifests say %s, %s, %s", zero_state_dtype_str(ta),
          zero_state_dtype_str(tb), zero_state_dtype_str(tc));
    CHECK(bb == 12 * n && (sdt == ZERO_STATE_BF16 ? ba == 8 * n : ba == qa),
          "%lld bytes of records in %s, %lld in f32 (%lld elements)", (long long)ba, zero_state_dtype_str(sdt),
          (long long)bb, (long long)n);
    CHECK(memcmp(ma, mb, sizeof ma) == 0, "the fp32 moments loaded from %s are not the values it holds",
          zero_state_dtype_str(sdt));
    CHECK(memcmp(ma, mc, sizeof ma) == 0 && bc == ba, "%s -> f32 -> %s changed the moments", zero_state_dtype_str(sdt),
          zero_state_dtype_str(sdt));
    for (k = 0; k < world; k++) {   /* the same sharding, the same steps: the same shard files */
        snprintf(pa, sizeof pa, "%s/rank%d.g1", da, k);
        snprintf(pc, sizeof pc, "%s/rank%d.g1", dc, k);
        CHECK(same_file(pa, pc), "%s and %s differ", pa, pc);
    }
    {   /* the last byte of rank 0's shard (a scale of v, or a bf16 v) flipped: refused, naming the moments */
        long len;
        char *sh;
        zero_ckpt *ck = NULL;
        zero_result r;
        snprintf(pa, sizeof pa, "%s/rank0.g1", da);
        if (CHECK((sh = test_slurp(pa, &len)) != NULL && len > 64, "no shard %s", pa)) {
            sh[len - 1] ^= 0x10;
            spit(pa, sh, len);
            r = zero_ckpt_open(da, NULL, &ck);
            if (CHECK(r == ZERO_OK, "open: %s", zero_last_error(NULL))) {
                r = zero_ckpt_verify(ck);
                CHECK(r == ZERO_ERR_CORRUPT && strstr(zero_last_error(NULL), "checksum mismatch in the moments"),
                      "a flipped moment byte: %s: %s", zero_result_str(r), zero_last_error(NULL));
                zero_ckpt_close(ck);
            }
            sh[len - 1] ^= 0x10;
            spit(pa, sh, len);
        }
        free(sh);
    }
    /* fp32 moments into the format */
    f = ref; f.sdt = ZERO_STATE_F32; f.steps = 6; f.save_dir = df;
    if (!run(&f)) return;
    g = ref; g.steps = 0; g.load_dir = df; g.save_dir = dg;
    if (!run(&g)) return;
    if (!CHECK(read_moments(df, mf, &tf, &bf, &qx) && read_moments(dg, mg, &tg, &bg, &qx), "cannot read the moments back"))
        return;
    for (k = 0; k < 2; k++) {
        float big = 0, tol;
        for (i = 0; i < n; i++) big = fabsf(mf[k][i]) > big ? fabsf(mf[k][i]) : big;
        tol = (k == 0 ? 0.5f / 127 : 1.0f / 256) * root4(big) * 1.0001f;
        for (i = 0; i < n; i++) {
            float x = mf[k][i], y = mg[k][i];
            int bad = sdt == ZERO_STATE_BF16 ? fabsf(y - x) > fabsf(x) * (1.0f / 256) : fabsf(root4(y) - root4(x)) > tol;
            changed += x != y;
            if (bad && worse++ < 3)
                fprintf(stderr, "moment %d element %lld: %.9g from f32 became %.9g in %s (largest %.9g)\n", k + 1,
                        (long long)i, (double)x, (double)y, zero_state_dtype_str(sdt), (double)big);
        }
    }
    CHECK(worse == 0 && changed > 0, "%d moments outside the %s conversion's error; %d changed", worse,
          zero_state_dtype_str(sdt), changed);
    rm_rf(da); rm_rf(db); rm_rf(dc); rm_rf(df); rm_rf(dg);
}

/* q8 moments whose blocks' scales are tiny (gradients of 1e-35: m near 2^-116, v 0), where
   decoding and encoding again would not give the blocks back (the decoding's factor s /
   127^4 is subnormal): a save copies them as stored and a load copies them back, so the
   resume is still bitwise, moments included */
static void state_q8_tiny(void) {
    static cfg ref, a, b;
    static float ma[2][MAXP], mr[2][MAXP], mb[2][MAXP];
    char da[1100], dr[1100], db[1100];
    zero_state_dtype ta;
    int64_t ba, qa, i;
    float big = 0;
    snprintf(da, sizeof da, "%s/sf_tiny", tmpdir);
    snprintf(dr, sizeof dr, "%s/sf_tiny_ref", tmpdir);
    snprintf(db, sizeof db, "%s/sf_tiny_b", tmpdir);
    base_cfg(&ref, 2, 2, ZERO_F32, ZERO_OPTIM_ADAMW); ref.sdt = ZERO_STATE_Q8; ref.gmul = 1e-35f; ref.steps = 12;
    ref.save_dir = dr;
    if (!run(&ref)) return;
    a = ref; a.steps = 6; a.save_dir = da;
    if (!run(&a)) return;
    if (CHECK(read_moments(da, ma, &ta, &ba, &qa), "cannot read the moments back")) {
        for (i = 0; i < ref.numel; i++) big = fabsf(ma[0][i]) > big ? fabsf(ma[0][i]) : big;
        CHECK(big > 0x1p-125f && big < 0x1p-105f, "the largest m is %g, not in (2^-125, 2^-105)", (double)big);
    }
    b = ref; b.load_dir = da; b.step0 = 6; b.steps = 6; b.save_dir = db;
    if (!run(&b)) return;
    CHECK(memcmp(ref.out, b.out, sizeof(float) * (size_t)ref.numel) == 0, "resumed params differ from 12 straight steps");
    if (CHECK(read_moments(dr, mr, &ta, &ba, &qa) && read_moments(db, mb, &ta, &ba, &qa), "cannot read the moments back"))
        CHECK(memcmp(mr, mb, sizeof mr) == 0, "resumed moments differ from 12 straight steps'");
    rm_rf(da); rm_rf(dr); rm_rf(db);
}

/* ---- faults ---------------------------------------------------------------------- */

static char fault_dir[1100];
static cfg victim, fault_src;

/* loads fault_dir into a trained world-2 stage-2 context; expects code on every rank,
   a message naming `file` on some rank, and the params unchanged */
static void expect_fault(zero_result code, const char *file, const char *what) {
    int k, named = 0;
    base_cfg(&victim, 2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    victim.init_steps = 3;
    victim.load_dir = fault_dir;
    victim.load_expect = code;
    if (!CHECK(zero_run_local(2, rank_main, &victim) == ZERO_OK, "%s: load did not give %s on every rank (%s, %s)", what,
               zero_result_str(code), zero_result_str(victim.load_got[0]), zero_result_str(victim.load_got[1])))
        return;
    for (k = 0; k < 2; k++) if (strstr(victim.load_msg[k], file)) named = 1;
    CHECK(named, "%s: no message names %s: '%s' / '%s'", what, file, victim.load_msg[0], victim.load_msg[1]);
    if (code == ZERO_OK)
        CHECK(memcmp(fault_src.out, victim.out, sizeof(float) * (size_t)victim.numel) == 0, "%s: loaded state differs", what);
    else
        CHECK(memcmp(victim.before, victim.out, sizeof(float) * (size_t)victim.numel) == 0, "%s: state changed", what);
}

static void make_fault_ckpt(void) {
    cfg *a = &fault_src;
    snprintf(fault_dir, sizeof fault_dir, "%s/fault", tmpdir);
    base_cfg(a, 3, 3, ZERO_BF16, ZERO_OPTIM_ADAMW);
    a->steps = 5; a->save_dir = fault_dir;
    run(a);
}

static void shard_path(char *out, size_t n, int rank) {
    DIR *d = opendir(fault_dir);
    struct dirent *e;
    char pre[32];
    snprintf(pre, sizeof pre, "rank%d.g", rank);
    out[0] = 0;
    if (!d) return;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, pre, strlen(pre)) == 0 && !strstr(e->d_name, ".tmp"))
            { size_t l = strlen(fault_dir); if (l + strlen(e->d_name) + 2 <= n) { memcpy(out, fault_dir, l); out[l] = '/'; strcpy(out + l + 1, e->d_name); } }
    closedir(d);
}

static void fault_truncated_shard(void) {
    char path[1200];
    long n, cuts[5], i;
    char *orig;
    shard_path(path, sizeof path, 1);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL, "no shard 1")) return;
    cuts[0] = 0; cuts[1] = 10; cuts[2] = 32; cuts[3] = n / 2; cuts[4] = n - 1;
    for (i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof what, "shard cut at %ld of %ld", cuts[i], n);
        spit(path, orig, cuts[i]);
        expect_fault(ZERO_ERR_CORRUPT, strrchr(path, '/') + 1, what);
    }
    spit(path, orig, n);
    free(orig);
}

static void fault_truncated_manifest(void) {
    char path[1200];
    long n, cuts[5], i;
    char *orig;
    snprintf(path, sizeof path, "%s/manifest", fault_dir);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL, "no manifest")) return;
    cuts[0] = 0; cuts[1] = 5; cuts[2] = 40; cuts[3] = n / 2; cuts[4] = n - 1;
    for (i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof what, "manifest cut at %ld of %ld", cuts[i], n);
        spit(path, orig, cuts[i]);
        expect_fault(ZERO_ERR_CORRUPT, "manifest", what);
    }
    spit(path, orig, n);
    free(orig);
}

static void fault_bit_flip(void) {
    char path[1200];
    long n;
    char *orig, *bad;
    shard_path(path, sizeof path, 2);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL && (bad = (char *)malloc((size_t)n)) != NULL, "no shard 2")) return;
    memcpy(bad, orig, (size_t)n);
    bad[n - 7] ^= 0x10;
    spit(path, bad, n);
    expect_fault(ZERO_ERR_CORRUPT, strrchr(path, '/') + 1, "bit flip in shard 2");
    spit(path, orig, n);
    free(orig);
    snprintf(path, sizeof path, "%s/manifest", fault_dir);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL, "no manifest")) { free(bad); return; }
    bad = (char *)realloc(bad, (size_t)n);
    memcpy(bad, orig, (size_t)n);
    bad[n / 2] ^= 0x01;
    spit(path, bad, n);
    expect_fault(ZERO_ERR_CORRUPT, "manifest", "bit flip in the manifest");
    spit(path, orig, n);
    free(orig);
    free(bad);
}

/* a refused load leaves an NVMe-offloaded state as it was: 3 steps, a load of a shard
   with a flipped moment bit (ZERO_ERR_CORRUPT), 3 steps == 6 steps without the load.
   stage 2: the optimizer state on NVMe; stage 3 with params: the param shard too */
static void fault_nvme_unchanged_at(int stage, zero_offload_tier ptier, zero_dtype dt) {
    static cfg v, ref;
    char path[1200];
    long n;
    char *orig, *bad;
    shard_path(path, sizeof path, 2);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL && (bad = (char *)malloc((size_t)n)) != NULL, "no shard 2")) return;
    memcpy(bad, orig, (size_t)n);
    bad[n - 7] ^= 0x10;
    spit(path, bad, n);
    base_cfg(&v, stage, 2, dt, ZERO_OPTIM_ADAMW);
    v.offload = ZERO_OFFLOAD_NVME; v.offload_params = ptier;
    v.init_steps = 3; v.load_dir = fault_dir; v.load_expect = ZERO_ERR_CORRUPT;
    v.step0 = 3; v.steps = 3;
    ref = v; ref.load_dir = NULL; ref.init_steps = 0; ref.step0 = 0; ref.steps = 6;
    if (run(&v) && run(&ref)) {
        CHECK(v.load_got[0] == ZERO_ERR_CORRUPT && v.load_got[1] == ZERO_ERR_CORRUPT, "codes %s %s",
              zero_result_str(v.load_got[0]), zero_result_str(v.load_got[1]));
        CHECK(memcmp(ref.out, v.out, sizeof(float) * (size_t)ref.numel) == 0, "a refused load changed the NVMe state");
    }
    spit(path, orig, n);
    free(orig);
    free(bad);
}
static void fault_nvme_unchanged(void) { fault_nvme_unchanged_at(2, ZERO_OFFLOAD_NONE, ZERO_BF16); }
static void fault_nvme_params_unchanged(void) {
    fault_nvme_unchanged_at(3, ZERO_OFFLOAD_NVME, ZERO_BF16);
    fault_nvme_unchanged_at(3, ZERO_OFFLOAD_NVME, ZERO_F32);
}

static void fault_missing_rank_file(void) {
    char path[1200], moved[1300];
    shard_path(path, sizeof path, 0);
    snprintf(moved, sizeof moved, "%s.away", path);
    if (!CHECK(rename(path, moved) == 0, "rename %s", path)) return;
    expect_fault(ZERO_ERR_IO, strrchr(path, '/') + 1, "missing shard 0");
    rename(moved, path);
}

static void fault_newer_version(void) {
    char path[1200];
    long n;
    char *orig, *bad;
    snprintf(path, sizeof path, "%s/manifest", fault_dir);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL && (bad = (char *)malloc((size_t)n + 1)) != NULL, "no manifest")) return;
    memcpy(bad, orig, (size_t)n);
    CHECK(memcmp(bad, "zero-checkpoint 3\n", 18) == 0, "manifest starts '%.18s'", bad);
    bad[16] = '4';
    spit(path, bad, n);
    expect_fault(ZERO_ERR_VERSION, "manifest", "format version 4");
    spit(path, orig, n);
    free(orig);
    free(bad);
}

static void fault_other_model(void) {
    int k, named = 0;
    base_cfg(&victim, 2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    victim.wide = 1; victim.init_steps = 2; victim.load_dir = fault_dir; victim.load_expect = ZERO_ERR_MISMATCH;
    if (!CHECK(zero_run_local(2, rank_main, &victim) == ZERO_OK, "a different model loaded (%s)",
               zero_result_str(victim.load_got[0])))
        return;
    /* the message gives both shapes (#27 item 8): head.w is [4, 6] saved, [5, 6] here */
    for (k = 0; k < 2; k++)
        if (strstr(victim.load_msg[k], "manifest") && strstr(victim.load_msg[k], "'head.w' [4, 6] in the checkpoint") &&
            strstr(victim.load_msg[k], "'head.w' [5, 6]"))
            named = 1;
    CHECK(named, "no message names the manifest and both shapes: '%s'", victim.load_msg[0]);
    CHECK(memcmp(victim.before, victim.out, sizeof(float) * (size_t)victim.numel) == 0, "state changed");
    base_cfg(&victim, 2, 2, ZERO_BF16, ZERO_OPTIM_SGD);
    victim.load_dir = fault_dir; victim.load_expect = ZERO_ERR_MISMATCH;
    CHECK(zero_run_local(2, rank_main, &victim) == ZERO_OK, "another optimizer loaded (%s)", zero_result_str(victim.load_got[0]));
}

/* the checkpoint is still good after all the faults were undone */
static void fault_restored_loads(void) {
    expect_fault(ZERO_OK, "", "restored checkpoint");
}

/* ---- crash safety ----------------------------------------------------------------- */
/* A child saves into the same directory over and over (one step between saves); the
   parent kills it with SIGKILL after a few milliseconds. The directory must still load,
   and hold exactly the state of some step count k (== k straight steps). */
static void crash_during_save(void) {
    static cfg first, child, load, ref;
    char dir[1100];
    int round;
    snprintf(dir, sizeof dir, "%s/crash", tmpdir);
    base_cfg(&first, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    first.steps = 2; first.save_dir = dir;
    if (!run(&first)) return;
    for (round = 0; round < 6; round++) {
        pid_t pid;
        int st;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (!CHECK(pid >= 0, "fork: %s", strerror(errno))) return;
        if (pid == 0) {
            int s;
            alarm(0);
            for (s = 0; s < 1000; s++) {
                base_cfg(&child, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
                child.load_dir = dir; child.step0 = 0; child.steps = 1; child.save_dir = dir;
                /* resume from whatever is there, one more step, save */
                child.step0 = 0;
                if (zero_run_local(2, rank_main, &child) != ZERO_OK) _exit(3);
            }
            _exit(0);
        }
        {
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = (long)(2 + 5 * round) * 1000000L + (long)(test_now_ms() * 1000.0) % 1000000L;
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(!WIFEXITED(st) || WEXITSTATUS(st) == 0, "the saving child failed (exit %d)", WEXITSTATUS(st));
        base_cfg(&load, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
        load.load_dir = dir;
        if (!CHECK(zero_run_local(2, rank_main, &load) == ZERO_OK, "round %d: the checkpoint does not load after SIGKILL: %s",
                   round, load.load_msg[0]))
            return;
        fprintf(stderr, "crash round %d: killed after ~%d ms, the checkpoint holds step %lld\n", round, 2 + 5 * round,
                (long long)load.stats_steps);
    }
    /* the last state is k steps of training with the gradient of step index 0 each time:
       rebuild it the same way (load/step/save chain) is what the child did; check that
       the stored step count matches a chain of that many runs */
    {
        int k, n = (int)load.stats_steps;
        char d2[1100];
        snprintf(d2, sizeof d2, "%s/crash_ref", tmpdir);
        base_cfg(&ref, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
        ref.steps = 2; ref.save_dir = d2;
        if (!run(&ref)) return;
        for (k = 2; k < n; k++) {
            base_cfg(&ref, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
            ref.load_dir = d2; ref.steps = 1; ref.save_dir = d2;
            if (!run(&ref)) return;
        }
        CHECK(n >= 2 && memcmp(ref.out, load.out, sizeof(float) * (size_t)load.numel) == 0,
              "the checkpoint after the kill (step %d) is not the state of %d steps", n, n);
        rm_rf(d2);
    }
    {   /* one clean save afterwards removes every stale generation and temporary */
        DIR *d;
        struct dirent *e;
        int files = 0;
        base_cfg(&load, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
        load.load_dir = dir; load.save_dir = dir;
        if (!run(&load)) return;
        if ((d = opendir(dir)) != NULL) {
            while ((e = readdir(d)) != NULL)
                if (e->d_name[0] != '.') {
                    files++;
                    CHECK(strcmp(e->d_name, "manifest") == 0 || !strstr(e->d_name, "tmp"), "stale file %s", e->d_name);
                }
            closedir(d);
        }
        CHECK(files == 3, "%d files after a clean save (manifest + 2 shards expected)", files);
    }
    rm_rf(dir);
}

/* ---- safetensors ------------------------------------------------------------------
   An independent reader: the header length, then each tensor's entry found by name
   with strstr/sscanf, not with zero.h's parser. */
static int st_check(const char *path, const cfg *c, zero_dtype dt) {
    long n;
    char *f = test_slurp(path, &n), *hdr;
    uint64_t hl = 0;
    int p, i, ok = 1;
    int64_t out_off = 0;
    if (!CHECK(f != NULL && n >= 8, "cannot read %s", path)) { free(f); return 0; }
    for (i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)f[i];
    if (!CHECK(hl % 8 == 0 && (long)hl <= n - 8, "header length %llu", (unsigned long long)hl)) { free(f); return 0; }
    hdr = (char *)malloc(hl + 1);
    memcpy(hdr, f + 8, hl);
    hdr[hl] = 0;
    ok &= CHECK(hdr[0] == '{', "header starts with '%c'", hdr[0]);
    for (p = 0; p < 5 && ok; p++) {
        static const char *mods[3] = { "emb", "mid", "head" };
        char key[64], dts[16], *e, *q;
        long long b = -1, en = -1, d0 = -1, d1 = -1;
        int nd;
        int64_t k, ne = pnumel(p, 0), base;
        snprintf(key, sizeof key, "\"%s.%s\"", mods[pmod[p]], pname[p]);
        if (!CHECK((e = strstr(hdr, key)) != NULL, "no tensor %s", key)) { ok = 0; break; }
        q = strstr(e, "\"dtype\"");
        ok &= CHECK(q && sscanf(q, "\"dtype\":\"%15[A-Z0-9]\"", dts) == 1 &&
                    strcmp(dts, dt == ZERO_F32 ? "F32" : "BF16") == 0, "%s: dtype", key);
        q = strstr(e, "\"shape\"");
        nd = q ? sscanf(q, "\"shape\":[%lld,%lld]", &d0, &d1) : 0;
        ok &= CHECK(nd == (shapes[p][1] ? 2 : 1) && d0 == shapes[p][0] && (nd == 1 || d1 == shapes[p][1]), "%s: shape", key);
        q = strstr(e, "\"data_offsets\"");
        ok &= CHECK(q && sscanf(q, "\"data_offsets\":[%lld,%lld]", &b, &en) == 2 &&
                    en - b == ne * (dt == ZERO_F32 ? 4 : 2) && 8 + (long)hl + en <= n, "%s: data_offsets", key);
        if (!ok) break;
        base = 8 + (int64_t)hl + b;
        for (k = 0; k < ne; k++) {
            float want = c->out[out_off + k];
            if (dt == ZERO_F32) {
                float got;
                memcpy(&got, f + base + 4 * k, 4);
                if (!CHECK(memcmp(&got, &want, 4) == 0, "%s[%lld]: %g vs %g", key, (long long)k, (double)got, (double)want)) { ok = 0; break; }
            } else {
                uint16_t got, exp;
                uint32_t u;
                memcpy(&got, f + base + 2 * k, 2);
                memcpy(&u, &want, 4);
                exp = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
                if (!CHECK(got == exp, "%s[%lld]: bf16 %04x vs %04x", key, (long long)k, got, exp)) { ok = 0; break; }
            }
        }
        out_off += ne;
    }
    free(hdr);
    free(f);
    return ok;
}

static cfg st_src;
static char st_path[1100];

static void safetensors_export_f32(void) {
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", tmpdir);
    base_cfg(&st_src, 3, 3, ZERO_BF16, ZERO_OPTIM_ADAMW);
    st_src.steps = 5; st_src.export_path = st_path; st_src.export_dtype = ZERO_F32;
    if (run(&st_src)) st_check(st_path, &st_src, ZERO_F32);
}
static void safetensors_export_bf16_stage1(void) {
    static cfg c;
    char path[1200];
    snprintf(path, sizeof path, "%s/model_bf16.safetensors", tmpdir);
    base_cfg(&c, 1, 2, ZERO_F32, ZERO_OPTIM_ADAMW);
    c.steps = 4; c.export_path = path; c.export_dtype = ZERO_BF16;
    if (run(&c)) st_check(path, &c, ZERO_BF16);
    unlink(path);
}
static void safetensors_load(void) {
    static cfg c;
    int s, w;
    for (s = 1; s <= 3; s += 2)
        for (w = 1; w <= 2; w++) {
            base_cfg(&c, s, w, ZERO_BF16, ZERO_OPTIM_ADAMW);
            c.load_dir = st_path; c.st_load = st_path;
            if (!run(&c)) return;
            CHECK(memcmp(c.out, st_src.out, sizeof(float) * (size_t)c.numel) == 0, "stage %d world %d: loaded params differ", s, w);
        }
    base_cfg(&c, 2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    c.wide = 1; c.init_steps = 1; c.load_dir = st_path; c.st_load = st_path; c.load_expect = ZERO_ERR_MISMATCH;
    if (!run(&c)) return;
    CHECK(memcmp(c.before, c.out, sizeof(float) * (size_t)c.numel) == 0, "a refused load changed the params");
}

/* a safetensors file exported from a run without offload, loaded into contexts whose
   master is on the NVMe tier: params equal, and the master (exported again as F32,
   which reads it from the tier) is the file's bytes */
static void safetensors_load_nvme(void) {
    static cfg c;
    char again[1200];
    int s;
    snprintf(again, sizeof again, "%s/again.safetensors", tmpdir);
    for (s = 0; s <= 3; s++) {
        base_cfg(&c, s, s == 0 ? 1 : 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
        c.offload = ZERO_OFFLOAD_NVME;
        c.load_dir = st_path; c.st_load = st_path;
        c.export_path = again; c.export_dtype = ZERO_F32;
        if (!run(&c)) return;
        CHECK(memcmp(c.out, st_src.out, sizeof(float) * (size_t)c.numel) == 0, "stage %d: loaded params differ", s);
        CHECK(same_file(st_path, again), "stage %d: the master read back differs from the file", s);
        unlink(again);
    }
}

/* params on NVMe (stage 3): the export equals, byte for byte, the export of the same run
   without offload (F32 and BF16, f32 and bf16 params, a frozen module whose shard stays in
   memory); an import into such a context sets params and master (exported again, the
   file's bytes) and training goes on as in a context without offload */
static void safetensors_nvme_params(void) {
    static cfg ref, off;
    char pa[1200], pb[1200];
    int k;
    snprintf(pa, sizeof pa, "%s/plain.safetensors", tmpdir);
    snprintf(pb, sizeof pb, "%s/offp.safetensors", tmpdir);
    for (k = 0; k < 4; k++) {
        zero_dtype dt = k & 1 ? ZERO_F32 : ZERO_BF16, xt = k & 2 ? ZERO_BF16 : ZERO_F32;
        base_cfg(&ref, 3, 2 + (k & 1), dt, ZERO_OPTIM_ADAMW);
        ref.steps = 4; ref.frozen1 = k == 3; ref.export_path = pa; ref.export_dtype = xt;
        off = ref; off.export_path = pb;
        off.offload = ZERO_OFFLOAD_NVME; off.offload_params = ZERO_OFFLOAD_NVME;
        if (!run(&ref) || !run(&off)) return;
        CHECK(same_file(pa, pb), "case %d: the export with params on NVMe differs", k);
        CHECK(memcmp(ref.out, off.out, sizeof(float) * (size_t)ref.numel) == 0, "case %d: params differ", k);
        st_check(pb, &off, xt);
        unlink(pa);
        unlink(pb);
    }
    /* import: st_path (exported from a bf16 stage-3 run), then 3 steps; the same without offload */
    for (k = 0; k < 2; k++) {
        base_cfg(&ref, 3, 2 + k, k ? ZERO_F32 : ZERO_BF16, ZERO_OPTIM_ADAMW);
        ref.load_dir = st_path; ref.st_load = st_path; ref.frozen1 = k;
        off = ref;
        off.offload = ZERO_OFFLOAD_NVME; off.offload_params = ZERO_OFFLOAD_NVME;
        off.export_path = pb; off.export_dtype = ZERO_F32;
        if (!run(&off)) return;
        CHECK(memcmp(off.out, st_src.out, sizeof(float) * (size_t)off.numel) == 0, "import %d: loaded params differ", k);
        CHECK(same_file(st_path, pb), "import %d: read back differs from the file", k);
        unlink(pb);
        ref.steps = off.steps = 3;
        ref.export_path = off.export_path = NULL;
        if (!run(&ref) || !run(&off)) return;
        CHECK(memcmp(ref.out, off.out, sizeof(float) * (size_t)ref.numel) == 0, "import %d: training after it differs", k);
    }
}

/* a truncated or missing safetensors file, and a save that cannot write: every rank
   gets the same code, nothing hangs, a failed load changes nothing */
static void safetensors_and_save_faults(void) {
    static cfg c;
    char path[1200], file[1200], bad_dir[1300];
    long n;
    char *orig = test_slurp(st_path, &n);
    zero_result r;
    if (!CHECK(orig != NULL, "no %s", st_path)) return;
    snprintf(path, sizeof path, "%s/cut.safetensors", tmpdir);
    spit(path, orig, n - 5);
    base_cfg(&c, 3, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    c.init_steps = 1; c.load_dir = path; c.st_load = path; c.load_expect = ZERO_ERR_CORRUPT;
    if (run(&c)) {
        CHECK(memcmp(c.before, c.out, sizeof(float) * (size_t)c.numel) == 0, "a refused load changed the params");
        CHECK(strstr(c.load_msg[0], "cut.safetensors") || strstr(c.load_msg[1], "cut.safetensors"), "message: %s", c.load_msg[0]);
    }
    spit(path, orig, 4);
    c.load_expect = ZERO_ERR_CORRUPT;
    run(&c);
    unlink(path);
    c.load_expect = ZERO_ERR_IO;
    run(&c);
    free(orig);
    /* a save under a regular file: mkdir fails on every rank */
    snprintf(file, sizeof file, "%s/plainfile", tmpdir);
    spit(file, "x", 1);
    snprintf(bad_dir, sizeof bad_dir, "%s/sub", file);
    base_cfg(&c, 2, 3, ZERO_BF16, ZERO_OPTIM_ADAMW);
    c.steps = 1; c.save_dir = bad_dir;
    r = zero_run_local(3, rank_main, &c);
    CHECK(r == ZERO_ERR_IO, "save under a file: %s", zero_result_str(r));
    unlink(file);
}

/* ---- a full disk and a read-only directory during zero_save -------------------------
   The hooks wrap zero__fops (the checkpoint's file I/O goes through it): files opened
   under ro_dir / full_dir are marked (1: a shard, 2: the manifest; 3: the NVMe tier's
   files), and the write number full_after of the marked kind full_kind fails with
   ENOSPC (kind 3: the read number full_after, once armed, fails with EIO). */
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static char full_dir[1100], ro_dir[1100];
static int fd_kind[4096], full_kind, full_after, full_hits, tier_armed;

static int hook_open(const char *path, int flags, int mode) {
    int fd, kind = 0;
    if (ro_dir[0] && strncmp(path, ro_dir, strlen(ro_dir)) == 0 && (flags & O_CREAT)) return -EROFS;
    fd = zero__os_open(path, flags, mode);
    if (full_dir[0] && strncmp(path, full_dir, strlen(full_dir)) == 0)
        kind = strstr(path, "/manifest") ? 2 : strstr(path, "/rank") ? 1 : 0;
    if (strstr(path, "/zero_optim.")) kind = 3;
    pthread_mutex_lock(&hook_mu);
    if (fd >= 0 && fd < 4096) fd_kind[fd] = kind;
    pthread_mutex_unlock(&hook_mu);
    return fd;
}
static int64_t hook_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    int fail = 0;
    pthread_mutex_lock(&hook_mu);
    if (fd >= 0 && fd < 4096 && fd_kind[fd] == full_kind && (full_kind == 1 || full_kind == 2) && full_hits++ == full_after)
        fail = 1;
    pthread_mutex_unlock(&hook_mu);
    return fail ? -ENOSPC : zero__os_pwrite(fd, buf, n, off);
}
static int64_t hook_pread(int fd, void *buf, size_t n, int64_t off) {
    int fail = 0;
    pthread_mutex_lock(&hook_mu);
    if (fd >= 0 && fd < 4096 && fd_kind[fd] == 3 && full_kind == 3 && tier_armed && full_hits++ == full_after) fail = 1;
    pthread_mutex_unlock(&hook_mu);
    return fail ? -EIO : zero__os_pread(fd, buf, n, off);
}
static void arm_tier(void) { pthread_mutex_lock(&hook_mu); tier_armed = 1; pthread_mutex_unlock(&hook_mu); }
static int hook_close(int fd) {
    pthread_mutex_lock(&hook_mu);
    if (fd >= 0 && fd < 4096) fd_kind[fd] = 0;
    pthread_mutex_unlock(&hook_mu);
    return zero__os_close(fd);
}

/* dir holds only the manifest and one shard per rank of one generation */
static int only_committed_files(const char *dir, int world) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0, bad = 0;
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        if (strstr(e->d_name, ".tmp") || (strcmp(e->d_name, "manifest") != 0 && strncmp(e->d_name, "rank", 4) != 0)) bad = 1;
        if (bad) fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
    }
    closedir(d);
    return !bad && n == world + 1;
}

/* A save at step 4 (the checkpoint), then 3 steps and a save that fails at `kind`,
   write number `after`, then 3 more steps: every rank gets ZERO_ERR_IO, every rank's
   message names the failing file and the cause, the directory holds the step-4 checkpoint alone, it loads
   bitwise, and training went on as if no save had been tried. */
static zero_offload_tier fault_ptier;   /* offload_params of save_fault's runs */
static void save_fault(int stage, int world, zero_offload_tier tier, int kind, int after, const char *file, const char *why,
                       int readonly) {
    static cfg good, bad, ref, back;
    int k, named = 0;
    snprintf(full_dir, sizeof full_dir, "%s/full", tmpdir);
    rm_rf(full_dir);
    base_cfg(&good, stage, world, ZERO_BF16, ZERO_OPTIM_ADAMW);
    good.offload = tier; good.offload_params = fault_ptier; good.steps = 4; good.save_dir = full_dir;
    if (!run(&good)) return;
    ref = good; ref.save_dir = NULL; ref.steps = 10;
    if (!run(&ref)) return;
    bad = good; bad.steps = 7; bad.after_steps = 3; bad.save_expect = ZERO_ERR_IO;
    zero__fops.open = hook_open;
    zero__fops.pwrite = hook_pwrite;
    zero__fops.pread = hook_pread;
    zero__fops.close = hook_close;
    if (readonly) snprintf(ro_dir, sizeof ro_dir, "%s", full_dir);
    full_kind = kind; full_after = after; full_hits = 0; tier_armed = 0;
    if (kind == 3) bad.before_save = arm_tier;     /* the steps before the save read the tier too */
    /* the hook is on pread: the tier's thread engine (io_uring faults: tests/test_offload.c) */
    if (kind == 3) setenv("ZERO_IO", "threads", 1);
    k = run(&bad);
    if (kind == 3) unsetenv("ZERO_IO");
    zero__fops.open = zero__os_open;
    zero__fops.pwrite = zero__os_pwrite;
    zero__fops.pread = zero__os_pread;
    zero__fops.close = zero__os_close;
    ro_dir[0] = 0;
    full_kind = 0;
    if (!CHECK(k, "the failed save broke the run")) return;
    for (k = 0; k < world; k++) {
        CHECK(bad.save_got[k] == ZERO_ERR_IO, "rank %d: zero_save gave %s", k, zero_result_str(bad.save_got[k]));
        if (strstr(bad.save_msg[k], file) && strstr(bad.save_msg[k], why)) named++;
    }
    if (getenv("CKPT_VERBOSE")) for (k = 0; k < world; k++) fprintf(stderr, "rank %d: %s\n", k, bad.save_msg[k]);
    CHECK(named == world, "not every rank's message names %s and '%s': '%s' / '%s'", file, why, bad.save_msg[0],
          bad.save_msg[1]);
    CHECK(memcmp(ref.out, bad.out, sizeof(float) * (size_t)ref.numel) == 0, "training after the failed save differs");
    CHECK(only_committed_files(full_dir, world), "%s: temporary or stale files left behind", full_dir);
    base_cfg(&back, stage, world, ZERO_BF16, ZERO_OPTIM_ADAMW);
    back.offload = tier; back.offload_params = fault_ptier; back.load_dir = full_dir;
    if (!run(&back)) return;
    CHECK(memcmp(back.out, good.out, sizeof(float) * (size_t)good.numel) == 0, "the previous checkpoint no longer loads bitwise");
    CHECK(back.stats_steps == 4, "the previous checkpoint's step count is %lld", (long long)back.stats_steps);
    rm_rf(full_dir);
}
static void disk_full_shard_header(void) { save_fault(2, 2, ZERO_OFFLOAD_NONE, 1, 0, "/rank", "No space left", 0); }
static void disk_full_shard_records(void) { save_fault(3, 3, ZERO_OFFLOAD_NONE, 1, 4, "/rank", "No space left", 0); }
static void disk_full_shard_nvme(void) { save_fault(3, 2, ZERO_OFFLOAD_NVME, 1, 2, "/rank", "No space left", 0); }
static void disk_full_manifest(void) { save_fault(1, 3, ZERO_OFFLOAD_NONE, 2, 0, "/manifest", "No space left", 0); }
static void tier_eio_during_save(void) { save_fault(2, 2, ZERO_OFFLOAD_NVME, 3, 1, "/zero_optim.", "Input/output error", 0); }
/* the stage-3 param shard on NVMe: a full disk under a shard, EIO reading the tier */
static void save_faults_nvme_params(void) {
    fault_ptier = ZERO_OFFLOAD_NVME;
    save_fault(3, 2, ZERO_OFFLOAD_NVME, 1, 2, "/rank", "No space left", 0);
    save_fault(3, 3, ZERO_OFFLOAD_NVME, 3, 1, "/zero_optim.", "Input/output error", 0);
    fault_ptier = ZERO_OFFLOAD_NONE;
}
static void readonly_dir_hook(void) { save_fault(2, 2, ZERO_OFFLOAD_NONE, 0, 0, "/rank", "Read-only", 1); }

/* a directory without write permission (meaningless as root, who may write anyway) */
static void readonly_dir_chmod(void) {
    static cfg c;
    char dir[1100];
    zero_result r;
    if (geteuid() == 0) { test_skip("running as root"); return; }
    snprintf(dir, sizeof dir, "%s/ro", tmpdir);
    if (!CHECK(mkdir(dir, 0555) == 0, "mkdir %s: %s", dir, strerror(errno))) return;
    base_cfg(&c, 2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW);
    c.steps = 2; c.save_dir = dir; c.save_expect = ZERO_ERR_IO; c.after_steps = 1;
    r = zero_run_local(2, rank_main, &c);
    CHECK(r == ZERO_OK, "read-only directory: %s", zero_result_str(r));
    CHECK(c.save_got[0] == ZERO_ERR_IO && c.save_got[1] == ZERO_ERR_IO, "codes %s %s", zero_result_str(c.save_got[0]),
          zero_result_str(c.save_got[1]));
    CHECK(strstr(c.save_msg[0], dir) || strstr(c.save_msg[1], dir), "message: %s", c.save_msg[0]);
    chmod(dir, 0755);
    rm_rf(dir);
}

/* ---- bounded memory: NVMe-offloaded state far larger than a save or load may take ---
   Every host allocation of the contexts goes through a counting allocator; between
   barriers (zero_allreduce_f64) around zero_save and zero_load, the peak of the bytes
   live above what was live before is what the checkpoint took. The bound: two ranks x
   (two streaming chunks of ZERO__CK_CHUNK floats + 64 KiB for the manifest, the record
   lists and the like); the state is ~30x that per rank and a record ~15x. */
#ifndef BIG_ROWS                    /* -DBIG_ROWS=16384 to measure a larger state */
#define BIG_ROWS 2048
#endif
#define BIG_COLS 640
#define BIG_B 333
#define BIG_BOUND (2 * (2 * ZERO__CK_CHUNK * 4 + 65536))
static pthread_mutex_t cnt_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t cnt_live, cnt_peak;
static void *cnt_alloc(size_t n, void *u) {
    char *p = (char *)malloc(n + 16);
    (void)u;
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    pthread_mutex_lock(&cnt_mu);
    cnt_live += (int64_t)n;
    if (cnt_live > cnt_peak) cnt_peak = cnt_live;
    pthread_mutex_unlock(&cnt_mu);
    return p + 16;
}
static void cnt_free(void *q, void *u) {
    size_t n;
    (void)u;
    if (!q) return;
    memcpy(&n, (char *)q - 16, sizeof n);
    pthread_mutex_lock(&cnt_mu);
    cnt_live -= (int64_t)n;
    pthread_mutex_unlock(&cnt_mu);
    free((char *)q - 16);
}

typedef struct big {
    const char *dir;
    int load;                       /* 0: 3 steps, save, 3 steps; 1: load, 3 steps */
    int params;                     /* the param shard on NVMe too (offload_params) */
    zero_dtype dt;                  /* param dtype; 0: bf16 */
    int64_t peak, state_bytes;      /* rank 0: bytes the save / load took; the rank's state bytes */
    int64_t tier_bytes, tier_block, tier_read, tier_written;  /* rank 0: the tier; what the save / load moved */
    double secs;
    float *out;                     /* BIG_ROWS * BIG_COLS + BIG_B */
} big;

static int64_t big_mark;
static void big_window(zero_ctx *z, int rank, int open) {
    double v = 0;
    zero_allreduce_f64(z, &v, 1);
    if (rank == 0) {
        pthread_mutex_lock(&cnt_mu);
        if (open) { big_mark = cnt_live; cnt_peak = cnt_live; } else big_mark = cnt_peak - big_mark;
        pthread_mutex_unlock(&cnt_mu);
    }
    if (open) zero_allreduce_f64(z, &v, 1);
}

static zero_result big_steps(zero_ctx *z, zero_module *m, zero_param *P, int rank, int step0, int n, zero_dtype dt) {
    static const int64_t numel[2] = { (int64_t)BIG_ROWS * BIG_COLS, BIG_B };
    zero_result r;
    int step, i;
    float *w = (float *)malloc(sizeof(float) * (size_t)numel[0]), *g = (float *)malloc(sizeof(float) * (size_t)numel[0]);
    if (!w || !g) { free(w); free(g); return ZERO_ERR_OUT_OF_MEMORY; }
    for (step = step0, r = ZERO_OK; step < step0 + n && r == ZERO_OK; step++) {
        float ls = zero_loss_scale(z);
        for (i = 1; i >= 0 && r == ZERO_OK; i--) {
            int64_t k;
            if ((r = zero_fetch(z, m[i])) != ZERO_OK) break;
            zero_to_f32(w, zero_param_data(z, P[i]), dt, numel[i]);
            for (k = 0; k < numel[i]; k++)
                g[k] = (0.25f * w[k] + 0.001f * (float)(k % 97) - 0.01f * (float)step + 0.003f * (float)rank) * ls;
            zero_add_f32(zero_param_grad(z, P[i]), dt, g, numel[i]);
            if ((r = zero_release(z, m[i])) != ZERO_OK) break;
            r = zero_grads_ready(z, m[i]);
        }
        if (r == ZERO_OK && (r = zero_step(z)) == ZERO_STEP_SKIPPED) r = ZERO_OK;
    }
    free(w);
    free(g);
    return r;
}

static zero_result big_main(zero_comm *comm, int rank, void *user) {
    big *b = (big *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m[2];
    zero_param P[2];
    zero_result r;
    zero_plan plan;
    struct timespec t0, t1;
    int i;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = 3;
    d.param_dtype = b->dt ? b->dt : ZERO_BF16;
    d.optim.type = ZERO_OPTIM_ADAMW;
    d.optim.lr = 0.001;
    d.loss_scale_init = 1;
    d.offload_params = b->params ? ZERO_OFFLOAD_NVME : ZERO_OFFLOAD_NONE;
    d.timeout_ms = 60000;
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    d.offload.nvme_dirs[0] = tmpdir;
    d.offload.buffer_bytes = 256 << 10;
    d.allocator.alloc = cnt_alloc;
    d.allocator.free = cnt_free;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (i = 0; i < 2; i++) {
        zero_module_desc md;
        zero_param_desc pd;
        memset(&md, 0, sizeof md);
        memset(&pd, 0, sizeof pd);
        md.name = i ? "b" : "a";
        pd.name = "w";
        pd.ndim = i ? 1 : 2;
        pd.shape[0] = i ? BIG_B : BIG_ROWS;
        pd.shape[1] = BIG_COLS;
        if ((r = zero_add_module(z, &md, &m[i])) != ZERO_OK || (r = zero_add_param(z, m[i], &pd, &P[i])) != ZERO_OK) goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    zero_plan_get(z, &plan);
    if (rank == 0)
        b->state_bytes = plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] + plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] +
                         plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM];
    {   /* the same init on every rank */
        float *init = (float *)malloc(sizeof(float) * (size_t)BIG_ROWS * BIG_COLS);
        int64_t k;
        if (!init) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
        for (k = 0; k < (int64_t)BIG_ROWS * BIG_COLS; k++) init[k] = 0.02f * sinf(0.001f * (float)k);
        if ((r = zero_param_set_f32(z, P[0], init)) == ZERO_OK) r = zero_param_set_f32(z, P[1], init);
        free(init);
        if (r != ZERO_OK) goto done;
    }
    if (!b->load && (r = big_steps(z, m, P, rank, 0, 3, d.param_dtype)) != ZERO_OK) goto done;
    big_window(z, rank, 1);
    if (rank == 0) {    /* the tier's own counters (internal: this test includes the implementation) */
        b->tier_bytes = z->tier.nvme->nblocks * z->tier.nvme->bb;
        b->tier_block = z->tier.nvme->bb;
        b->tier_read = -z->tier.nvme->bytes_read;
        b->tier_written = -z->tier.nvme->bytes_written;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = b->load ? zero_load(z, b->dir) : zero_save(z, b->dir);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    big_window(z, rank, 0);
    if (rank == 0) {
        b->peak = big_mark;
        b->secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        b->tier_read += z->tier.nvme->bytes_read;
        b->tier_written += z->tier.nvme->bytes_written;
    }
    if (r != ZERO_OK) goto done;
    if ((r = big_steps(z, m, P, rank, 3, 3, d.param_dtype)) != ZERO_OK) goto done;
    {
        size_t n = (size_t)BIG_ROWS * BIG_COLS + BIG_B;
        float *all = zero_num_params(z) == (int64_t)n ? (float *)malloc(sizeof(float) * n) : NULL;
        if (!all) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
        if ((r = zero_gather_params_f32(z, all)) == ZERO_OK && rank == 0) memcpy(b->out, all, sizeof(float) * n);
        free(all);
    }
done:
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}

/* params: 0 the optimizer state on NVMe; 1 the bf16 param shard too; 2 f32 params on NVMe
   (no master: the weights a save reads are the blocks' param areas) */
static void nvme_bounded_memory_at(int params) {
    static big a, b;
    char dir[1100];
    size_t n = (size_t)BIG_ROWS * BIG_COLS + BIG_B;
    zero_result r;
    snprintf(dir, sizeof dir, "%s/big", tmpdir);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.dir = b.dir = dir;
    a.params = b.params = params > 0;
    a.dt = b.dt = params == 2 ? ZERO_F32 : ZERO_BF16;
    b.load = 1;
    a.out = (float *)calloc(n, sizeof(float));
    b.out = (float *)calloc(n, sizeof(float));
    if (!CHECK(a.out && b.out, "out of memory")) goto out;
    r = zero_run_local(2, big_main, &a);
    if (!CHECK(r == ZERO_OK, "train + save: %s", zero_result_str(r))) goto out;
    r = zero_run_local(2, big_main, &b);
    if (!CHECK(r == ZERO_OK, "load + train: %s", zero_result_str(r))) goto out;
    fprintf(stderr, "nvme_bounded_memory (%s): state %lld bytes per rank; zero_save took %lld bytes (%.3f s), "
            "zero_load %lld bytes (%.3f s), both ranks; bound %d\n", params == 0 ? "optimizer" : params == 1 ? "bf16 params" :
            "f32 params", (long long)a.state_bytes, (long long)a.peak, a.secs, (long long)b.peak, b.secs, BIG_BOUND);
    fprintf(stderr, "nvme_bounded_memory: rank 0's tier: %lld bytes of blocks; zero_save read %lld, wrote %lld; "
            "zero_load read %lld, wrote %lld\n", (long long)a.tier_bytes, (long long)a.tier_read, (long long)a.tier_written,
            (long long)b.tier_read, (long long)b.tier_written);
    /* each block once (plus the one cached before), not once per part of a record */
    CHECK(a.tier_read <= a.tier_bytes + a.tier_block, "zero_save read %lld bytes of a %lld-byte tier",
          (long long)a.tier_read, (long long)a.tier_bytes);
    CHECK(b.tier_read <= b.tier_bytes + b.tier_block && b.tier_written <= b.tier_bytes + 2 * b.tier_block,
          "zero_load read %lld and wrote %lld bytes of a %lld-byte tier", (long long)b.tier_read, (long long)b.tier_written,
          (long long)b.tier_bytes);
    CHECK(a.state_bytes > 20 * BIG_BOUND / 2, "the state (%lld bytes) is not much larger than the bound", (long long)a.state_bytes);
    CHECK(a.peak > 0 && a.peak <= BIG_BOUND, "zero_save took %lld bytes, over the bound %d", (long long)a.peak, BIG_BOUND);
    CHECK(b.peak > 0 && b.peak <= BIG_BOUND, "zero_load took %lld bytes, over the bound %d", (long long)b.peak, BIG_BOUND);
    CHECK(memcmp(a.out, b.out, sizeof(float) * n) == 0, "resumed from the NVMe checkpoint differs");
out:
    free(a.out);
    free(b.out);
    rm_rf(dir);
}
static void nvme_bounded_memory(void) { nvme_bounded_memory_at(0); }
static void nvme_bounded_memory_params(void) {
    nvme_bounded_memory_at(1);
    nvme_bounded_memory_at(2);
}

/* ---- the CLI (build/zero_ckpt, built by `make` from examples/zero_ckpt.c) ---------- */
static int have_cli(char *cli, size_t n) {
    const char *b = getenv("BUILD");
    snprintf(cli, n, "%s/zero_ckpt", b && *b ? b : "build");
    return access(cli, X_OK) == 0;
}
static void cli(void) {
    static cfg a;
    char dir[1100], cmd[4000], out[1200], bin[256], path[1200];
    long n;
    char *orig;
    have_cli(bin, sizeof bin);
    snprintf(dir, sizeof dir, "%s/cli", tmpdir);
    snprintf(out, sizeof out, "%s/cli.safetensors", tmpdir);
    base_cfg(&a, 2, 3, ZERO_BF16, ZERO_OPTIM_ADAMW);
    a.steps = 3; a.save_dir = dir;
    if (!run(&a)) return;
    snprintf(cmd, sizeof cmd, "%s info %s >/dev/null", bin, dir);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    snprintf(cmd, sizeof cmd, "%s verify %s >/dev/null", bin, dir);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    snprintf(cmd, sizeof cmd, "%s export %s %s >/dev/null", bin, dir, out);
    if (CHECK(system(cmd) == 0, "%s failed", cmd)) st_check(out, &a, ZERO_F32);
    unlink(out);
    snprintf(fault_dir, sizeof fault_dir, "%s", dir);
    shard_path(path, sizeof path, 1);
    if (!CHECK((orig = test_slurp(path, &n)) != NULL, "no shard")) return;
    orig[n - 3] ^= 4;
    spit(path, orig, n);
    snprintf(cmd, sizeof cmd, "%s verify %s 2>/dev/null >/dev/null", bin, dir);
    CHECK(system(cmd) != 0, "verify passed a flipped bit");
    free(orig);
    rm_rf(dir);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    test_init();
    snprintf(tmpdir, sizeof tmpdir, "%s/zero_ckpt_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { printf("FAIL setup: mkdtemp: %s\n", strerror(errno)); return 1; }

    test_begin("resume_bf16_adamw_world2_stage0"); resume_bitwise(0, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_bf16_adamw_world2_stage1"); resume_bitwise(1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_bf16_adamw_world2_stage2"); resume_bitwise(2, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_bf16_adamw_world3_stage3"); resume_bitwise(3, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_f32_adamw_world1_stage0"); resume_bitwise(0, 1, ZERO_F32, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_f32_adamw_world3_stage3"); resume_bitwise(3, 3, ZERO_F32, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_bf16_sgd_world2_stage2"); resume_bitwise(2, 2, ZERO_BF16, ZERO_OPTIM_SGD, 0); test_end();
    test_begin("resume_bf16_lion_world3_stage3"); resume_bitwise(3, 3, ZERO_BF16, ZERO_OPTIM_LION, 0); test_end();
    test_begin("resume_f32_lion_world2_stage1"); resume_bitwise(1, 2, ZERO_F32, ZERO_OPTIM_LION, 0); test_end();
    TEST_RUN(optim_mismatch);
    test_begin("resume_bf16_muon_world2_stage2"); resume_bitwise(2, 2, ZERO_BF16, ZERO_OPTIM_MUON, 0); test_end();
    test_begin("resume_f32_muon_world3_stage3"); resume_bitwise(3, 3, ZERO_F32, ZERO_OPTIM_MUON, 0); test_end();
    test_begin("resume_frozen_muon_world2_stage1"); resume_bitwise(1, 2, ZERO_BF16, ZERO_OPTIM_MUON, 1); test_end();
    test_begin("resume_f16_dynamic_scale_world2_stage3"); resume_bitwise(3, 2, ZERO_F16, ZERO_OPTIM_ADAMW, 0); test_end();
    test_begin("resume_frozen_world3_stage1"); resume_bitwise(1, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 1); test_end();
    test_begin("state_formats_bf16_world2_stage1"); state_formats(ZERO_STATE_BF16, 1, 2, ZERO_OFFLOAD_NONE); test_end();
    test_begin("state_formats_q8_world3_stage2"); state_formats(ZERO_STATE_Q8, 2, 3, ZERO_OFFLOAD_NONE); test_end();
    test_begin("state_formats_q8_world2_stage3_nvme"); state_formats(ZERO_STATE_Q8, 3, 2, ZERO_OFFLOAD_NVME); test_end();
    TEST_RUN(state_q8_tiny);
    test_begin("state_formats_q8_world1_stage0_host"); state_formats(ZERO_STATE_Q8, 0, 1, ZERO_OFFLOAD_HOST); test_end();
    {   /* every stage with the optimizer state offloaded to host memory and to NVMe files */
        static const char *tn[] = { "", "host", "nvme" };
        int s, t;
        for (t = ZERO_OFFLOAD_HOST; t <= ZERO_OFFLOAD_NVME; t++)
            for (s = 1; s <= 3; s++) {
                test_begin("resume_offload_%s_bf16_adamw_world%d_stage%d", tn[t], s == 2 ? 3 : 2, s);
                resume_offload(s, s == 2 ? 3 : 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0, (zero_offload_tier)t, ZERO_OFFLOAD_NONE);
                test_end();
            }
        test_begin("resume_offload_nvme_bf16_lion_world2_stage2");
        resume_offload(2, 2, ZERO_BF16, ZERO_OPTIM_LION, 0, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE); test_end();
        test_begin("resume_offload_nvme_bf16_muon_world2_stage2");
        resume_offload(2, 2, ZERO_BF16, ZERO_OPTIM_MUON, 0, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE); test_end();
        test_begin("resume_offload_nvme_params_nvme_f32_muon_world2_stage3");
        resume_offload(3, 2, ZERO_F32, ZERO_OPTIM_MUON, 0, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME); test_end();
        test_begin("resume_offload_nvme_f32_sgd_world2_stage0");
        resume_offload(0, 2, ZERO_F32, ZERO_OPTIM_SGD, 0, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE); test_end();
        test_begin("resume_offload_nvme_frozen_world3_stage2");
        resume_offload(2, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 1, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE); test_end();
        test_begin("resume_offload_host_params_host_world2_stage3");
        resume_offload(3, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_HOST, ZERO_OFFLOAD_HOST); test_end();
        for (s = 1; s <= 3; s++)        /* stage-3 params on NVMe: s is the world size here */
            for (t = 0; t < 2; t++) {
                test_begin("resume_offload_nvme_params_nvme_%s_adamw_world%d_stage3", t ? "f32" : "bf16", s);
                resume_offload(3, s, t ? ZERO_F32 : ZERO_BF16, ZERO_OPTIM_ADAMW, 0, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME);
                test_end();
            }
        test_begin("resume_offload_nvme_params_nvme_frozen_bf16_world3_stage3");
        resume_offload(3, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 1, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME); test_end();
        test_begin("resume_offload_nvme_params_nvme_frozen_f32_sgd_world2_stage3");
        resume_offload(3, 2, ZERO_F32, ZERO_OPTIM_SGD, 1, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME); test_end();
    }
    test_begin("resume_late_stage2"); resume_late(2, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE); test_end();
    test_begin("resume_late_stage3"); resume_late(3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE); test_end();
    test_begin("resume_late_stage3_nvme_params"); resume_late(3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME); test_end();
    test_begin("reshard_stage3_world3_to_stage1_world2"); reshard(3, 3, 1, 2, ZERO_BF16, ZERO_OPTIM_ADAMW); test_end();
    test_begin("reshard_stage0_world1_to_stage2_world4"); reshard(0, 1, 2, 4, ZERO_F32, ZERO_OPTIM_ADAMW); test_end();
    test_begin("reshard_stage3_world2_nvme_to_stage1_world3"); reshard_tier(3, 2, ZERO_OFFLOAD_NVME, 1, 3, ZERO_OFFLOAD_NONE, ZERO_BF16, ZERO_OPTIM_ADAMW); test_end();
    test_begin("reshard_stage0_world1_to_stage2_world3_nvme"); reshard_tier(0, 1, ZERO_OFFLOAD_NONE, 2, 3, ZERO_OFFLOAD_NVME, ZERO_BF16, ZERO_OPTIM_ADAMW); test_end();
    test_begin("reshard_stage2_world2_to_stage3_world3_sgd"); reshard(2, 2, 3, 3, ZERO_BF16, ZERO_OPTIM_SGD); test_end();
    test_begin("reshard_stage3_world3_to_stage1_world2_lion"); reshard(3, 3, 1, 2, ZERO_BF16, ZERO_OPTIM_LION); test_end();
    test_begin("reshard_stage0_world1_to_stage3_world3_muon"); reshard(0, 1, 3, 3, ZERO_F32, ZERO_OPTIM_MUON); test_end();
    test_begin("reshard_stage3_world2_nvme_to_stage1_world3_muon"); reshard_tier(3, 2, ZERO_OFFLOAD_NVME, 1, 3, ZERO_OFFLOAD_NONE, ZERO_BF16, ZERO_OPTIM_MUON); test_end();
    test_begin("reshard_stage3_world2_nvme_params_to_stage1_world3");
    reshard_params(3, 2, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME, 1, 3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, ZERO_BF16,
                   ZERO_OPTIM_ADAMW);
    test_end();
    test_begin("reshard_stage0_world1_to_stage3_world3_nvme_params_f32");
    reshard_params(0, 1, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 3, 3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME, ZERO_F32,
                   ZERO_OPTIM_ADAMW);
    test_end();
    test_begin("reshard_stage3_world3_nvme_params_to_stage2_world1_sgd");
    reshard_params(3, 3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME, 2, 1, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, ZERO_BF16,
                   ZERO_OPTIM_SGD);
    test_end();

    TEST_RUN(make_fault_ckpt);
    TEST_RUN(fault_truncated_shard);
    TEST_RUN(fault_truncated_manifest);
    TEST_RUN(fault_bit_flip);
    TEST_RUN(fault_nvme_unchanged);
    TEST_RUN(fault_nvme_params_unchanged);
    TEST_RUN(fault_missing_rank_file);
    TEST_RUN(fault_newer_version);
    TEST_RUN(fault_other_model);
    TEST_RUN(fault_restored_loads);
    rm_rf(fault_dir);
    TEST_RUN(crash_during_save);
    TEST_RUN(safetensors_export_f32);
    TEST_RUN(safetensors_export_bf16_stage1);
    TEST_RUN(safetensors_load);
    TEST_RUN(safetensors_load_nvme);
    TEST_RUN(safetensors_nvme_params);
    TEST_RUN(safetensors_and_save_faults);
    TEST_RUN(disk_full_shard_header);
    TEST_RUN(disk_full_shard_records);
    TEST_RUN(disk_full_shard_nvme);
    TEST_RUN(disk_full_manifest);
    TEST_RUN(tier_eio_during_save);
    TEST_RUN(save_faults_nvme_params);
    TEST_RUN(readonly_dir_hook);
    TEST_RUN(readonly_dir_chmod);
    TEST_RUN(nvme_bounded_memory);
    TEST_RUN(nvme_bounded_memory_params);
    unlink(st_path);
    {
        char bin[256];
        if (have_cli(bin, sizeof bin)) TEST_RUN(cli);
        else { test_begin("cli"); test_skip("%s not built", bin); test_end(); }
    }
    rm_rf(tmpdir);
    return test_summary();
}
