/* test_muon.c - Muon's whole-matrix math in zero.h (zero__muon_*: torch.optim.Muon's momentum,
   Newton-Schulz iteration, learning-rate adjustment and update) against PyTorch.

   tests/data/muon_reference.txt (written by tests/gen_muon_reference.py with torch 2.15) holds,
   per case, a weight W [rows, cols] trained by torch.optim.Muon and a bias b [rows] trained by
   torch.optim.AdamW in the same steps: W after the steps with torch's Newton-Schulz in
   bfloat16 (as shipped, W_torch) and in float64 (W_f64ns), and b. The initial values and the
   gradients are not stored: both sides compute them from the same 64-bit hash (see
   gen_muon_reference.py), exactly in fp32. Each case is replayed here through zero.h's
   functions on every SIMD path this machine has:
     - W against W_f64ns: zero.h's fp32 iteration against float64, within 1e-6 of the
       element's magnitude plus 2^-14 of its walk (the sum of its steps' |delta p|);
     - W against W_torch: within 1e-6 of its magnitude plus 1/16 of its walk: torch's
       bfloat16 iteration rounds every product to 8 bits, a relative 2^-9 an operation
       (measured: at most 0.49 of this bound; the float64 run at most 0.17 of its own, which
       is 1/1000 as wide);
     - b against torch.optim.AdamW: within 1e-6 of its magnitude or 4 ulps;
     - every path's W bitwise equal to the scalar path's.
   The data file is looked up as $ZERO_TESTDATA (a directory or the file itself),
   tests/data/muon_reference.txt, ../tests/data/muon_reference.txt. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

#define MAX_CASES 8
/* Sanitizer builds (-O0, no SIMD) run the library's cases for the last, smallest matrix at 1
   and 3 ranks only: under TSan the whole set takes minutes (each step iterates on a matrix) */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#  define MUON_SAN 1
#else
#  define MUON_SAN 0
#endif

typedef struct muon_case {
    int rows, cols, steps, nesterov, adjust, ns_steps;
    double lr, wd, mu, eps, alr, b1, b2, aeps, awd;
    float *w_torch, *w_f64ns, *b;
} muon_case;

static muon_case C[MAX_CASES];
static int ncases;
static char data_path[512];

/* the values gen_muon_reference.py computes: (h % 20001 - 10000) / 2^shift of splitmix64's
   finalizer h of (case, array, step, index) */
static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static void values(int ci, int arr, int step, int64_t n, int shift, float *out) {
    int64_t i;
    for (i = 0; i < n; i++) {
        uint64_t h = mix(((uint64_t)ci << 48) ^ ((uint64_t)arr << 40) ^ ((uint64_t)step << 24) ^ (uint64_t)i);
        out[i] = (float)((double)((int64_t)(h % 20001u) - 10000) / (double)(1 << shift));
    }
}

static FILE *data_open(void) {
    const char *env = getenv("ZERO_TESTDATA");
    char cand[4][512];
    int nc = 0, i;
    if (env && env[0]) {
        snprintf(cand[nc++], sizeof cand[0], "%s/muon_reference.txt", env);
        snprintf(cand[nc++], sizeof cand[0], "%s", env);
    }
    snprintf(cand[nc++], sizeof cand[0], "tests/data/muon_reference.txt");
    snprintf(cand[nc++], sizeof cand[0], "../tests/data/muon_reference.txt");
    for (i = 0; i < nc; i++) {
        FILE *f = fopen(cand[i], "r");
        if (f && fgetc(f) != EOF) {
            rewind(f);
            memcpy(data_path, cand[i], sizeof data_path);
            return f;
        }
        if (f) fclose(f);
    }
    return NULL;
}

/* n floats after the key on one line; NULL (and a message) if the line holds another count */
static float *read_floats(char *s, int64_t n, char *err, size_t errsz) {
    float *v = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    int64_t k = 0;
    char *end;
    if (!v) { snprintf(err, errsz, "out of memory"); return NULL; }
    while (*s && *s != ' ') s++;
    for (;;) {
        float x = strtof(s, &end);
        if (end == s) break;
        if (k == n) { k++; break; }
        v[k++] = x;
        s = end;
    }
    if (k != n) { snprintf(err, errsz, "%lld values, want %lld", (long long)k, (long long)n); free(v); return NULL; }
    return v;
}

static int parse_case(muon_case *c, char *line, char *err, size_t errsz) {
    char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
    while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        const char *k, *v;
        if (!eq) { snprintf(err, errsz, "token '%s' is not key=value", tok); return 0; }
        *eq = 0; k = tok; v = eq + 1;
        if (!strcmp(k, "rows")) c->rows = atoi(v);
        else if (!strcmp(k, "cols")) c->cols = atoi(v);
        else if (!strcmp(k, "steps")) c->steps = atoi(v);
        else if (!strcmp(k, "lr")) c->lr = strtod(v, NULL);
        else if (!strcmp(k, "weight_decay")) c->wd = strtod(v, NULL);
        else if (!strcmp(k, "momentum")) c->mu = strtod(v, NULL);
        else if (!strcmp(k, "nesterov")) c->nesterov = atoi(v);
        else if (!strcmp(k, "adjust")) {
            if (!strcmp(v, "original")) c->adjust = 0;
            else if (!strcmp(v, "match_rms_adamw")) c->adjust = 1;
            else { snprintf(err, errsz, "unknown adjust '%s'", v); return 0; }
        } else if (!strcmp(k, "ns_steps")) c->ns_steps = atoi(v);
        else if (!strcmp(k, "eps")) c->eps = strtod(v, NULL);
        else if (!strcmp(k, "adamw_lr")) c->alr = strtod(v, NULL);
        else if (!strcmp(k, "adamw_beta1")) c->b1 = strtod(v, NULL);
        else if (!strcmp(k, "adamw_beta2")) c->b2 = strtod(v, NULL);
        else if (!strcmp(k, "adamw_eps")) c->aeps = strtod(v, NULL);
        else if (!strcmp(k, "adamw_weight_decay")) c->awd = strtod(v, NULL);
        else { snprintf(err, errsz, "unknown key '%s'", k); return 0; }
    }
    if (c->rows < 1 || c->cols < 1 || c->rows > 4096 || c->cols > 4096 || c->steps < 1 || c->steps > 1000 ||
        c->ns_steps < 1 || c->ns_steps > 99) {
        snprintf(err, errsz, "rows %d cols %d steps %d ns_steps %d out of range", c->rows, c->cols, c->steps, c->ns_steps);
        return 0;
    }
    return 1;
}

static int load(char *err, size_t errsz) {
    FILE *f = data_open();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    muon_case *c = NULL;
    int ok = 1, lineno = 0;
    if (!f) {
        snprintf(err, errsz, "cannot find muon_reference.txt; run from the repo root or set ZERO_TESTDATA");
        return 0;
    }
    while (ok && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "case ", 5)) {
            if (ncases == MAX_CASES) { snprintf(err, errsz, "more than %d cases", MAX_CASES); ok = 0; break; }
            c = &C[ncases++];
            ok = parse_case(c, line, err, errsz);
        } else if (!c) {
            snprintf(err, errsz, "data before the first case");
            ok = 0;
        } else if (!strncmp(line, "W_torch ", 8)) {
            ok = (c->w_torch = read_floats(line, (int64_t)c->rows * c->cols, err, errsz)) != NULL;
        } else if (!strncmp(line, "W_f64ns ", 8)) {
            ok = (c->w_f64ns = read_floats(line, (int64_t)c->rows * c->cols, err, errsz)) != NULL;
        } else if (!strncmp(line, "b ", 2)) {
            ok = (c->b = read_floats(line, c->rows, err, errsz)) != NULL;
        } else {
            snprintf(err, errsz, "unknown line");
            ok = 0;
        }
        if (!ok) {
            size_t l = strlen(err);
            snprintf(err + l, errsz - l, " (%s line %d)", data_path, lineno);
        }
    }
    free(line);
    fclose(f);
    for (int i = 0; ok && i < ncases; i++)
        if (!C[i].w_torch || !C[i].w_f64ns || !C[i].b) {
            snprintf(err, errsz, "case %d lacks a line", i);
            ok = 0;
        }
    if (ok && ncases == 0) { snprintf(err, errsz, "no case"); ok = 0; }
    return ok;
}

/* one case's replay on SIMD path simd: W (Muon) into w, its walk into walk; b (AdamW) into b */
static int replay(int ci, int simd, float *w, float *walk, float *b) {
    const muon_case *c = &C[ci];
    const int64_t n = (int64_t)c->rows * c->cols;
    float *buf = (float *)calloc((size_t)n, sizeof(float)), *g = (float *)malloc(sizeof(float) * (size_t)n);
    float *work = (float *)malloc(sizeof(float) * (size_t)zero__muon_ws(c->rows, c->cols));
    float *gws = (float *)malloc(sizeof(float) * (size_t)(ZERO__MC * ZERO__KC + ZERO__KC * ZERO__NC));
    float *bm = (float *)calloc((size_t)c->rows, sizeof(float)), *bv = (float *)calloc((size_t)c->rows, sizeof(float));
    float *bg = (float *)malloc(sizeof(float) * (size_t)c->rows), *old = (float *)malloc(sizeof(float) * (size_t)n);
    zero__muon_hp h;
    int t, ok = buf && g && work && gws && bm && bv && bg && old;
    int64_t i;
    if (!CHECK(ok, "out of memory")) goto done;
    memset(&h, 0, sizeof h);
    h.mu = (float)c->mu;
    h.one_minus_mu = (float)(1.0 - c->mu);
    h.a = 3.4445f; h.b = -4.7750f; h.c = 2.0315f;
    h.eps = (float)c->eps;
    h.nesterov = c->nesterov;
    h.steps = c->ns_steps;
    h.decay_mul = (float)(1.0 - c->lr * c->wd);
    h.neg_lr = (float)-zero__muon_lr(c->lr, c->adjust, c->rows, c->cols);
    values(ci, 0, 0, n, 14, w);
    values(ci, 1, 0, c->rows, 14, b);
    for (i = 0; i < n; i++) walk[i] = 0.0f;
    for (t = 1; t <= c->steps; t++) {
        zero__adamw_hp ah;
        values(ci, 0, t, n, 16, g);
        zero__muon_mom(&h, buf, g, g, n);
        zero__muon_ns(&h, g, c->rows, c->cols, work, gws, simd);
        memcpy(old, w, sizeof(float) * (size_t)n);
        zero__muon_apply(&h, w, g, n, 1);
        for (i = 0; i < n; i++) walk[i] += fabsf(w[i] - old[i]);
        /* the bias: torch.optim.AdamW, its scalars as zero__opt_setup computes them */
        ah.beta1 = (float)c->b1; ah.beta2 = (float)c->b2;
        ah.one_minus_beta1 = (float)(1.0 - c->b1); ah.one_minus_beta2 = (float)(1.0 - c->b2);
        ah.eps = (float)c->aeps;
        ah.decay_mul = (float)(1.0 - c->alr * c->awd);
        ah.neg_step_size = (float)(-(c->alr / (1.0 - pow(c->b1, t))));
        ah.bc2_sqrt = (float)sqrt(1.0 - pow(c->b2, t));
        values(ci, 1, t, c->rows, 16, bg);
        for (i = 0; i < c->rows; i++) zero__adamw_elem(&b[i], &bm[i], &bv[i], bg[i], &ah, 1);
    }
done:
    free(buf); free(g); free(work); free(gws); free(bm); free(bv); free(bg); free(old);
    return ok;
}

/* the largest |got - want| / (rel * max(|want|, |p0|, 1e-3) + walk * frac) */
static double worst(const float *got, const float *want, const float *p0, const float *walk, int64_t n, double rel,
                    double frac, int64_t *at) {
    double m = 0;
    int64_t i;
    *at = -1;
    for (i = 0; i < n; i++) {
        double scale = fmax(fmax(fabs((double)want[i]), fabs((double)p0[i])), 1e-3);
        double e = fabs((double)got[i] - want[i]) / (rel * scale + frac * walk[i]);
        if (!(e <= m)) { m = e; *at = i; }
    }
    return m;
}

static void check_case(int ci) {
    const muon_case *c = &C[ci];
    const int64_t n = (int64_t)c->rows * c->cols;
    float *w = (float *)malloc(sizeof(float) * (size_t)n), *walk = (float *)malloc(sizeof(float) * (size_t)n);
    float *w2 = (float *)malloc(sizeof(float) * (size_t)n), *walk2 = (float *)malloc(sizeof(float) * (size_t)n);
    float *p0 = (float *)malloc(sizeof(float) * (size_t)n), *b = (float *)malloc(sizeof(float) * (size_t)c->rows);
    float *b2 = (float *)malloc(sizeof(float) * (size_t)c->rows);
    double e64, etorch;
    int64_t at, i;
    int l;
    if (!CHECK(w && walk && w2 && walk2 && p0 && b && b2, "out of memory")) goto done;
    values(ci, 0, 0, n, 14, p0);
    if (!replay(ci, ZERO__SIMD_SCALAR, w, walk, b)) goto done;
    e64 = worst(w, c->w_f64ns, p0, walk, n, 1e-6, 1.0 / 16384, &at);
    CHECK(e64 <= 1.0, "W vs torch with a float64 iteration: [%lld] got %.9g want %.9g (walk %.3g): %.3g of the bound",
          (long long)at, at >= 0 ? w[at] : 0.0, at >= 0 ? c->w_f64ns[at] : 0.0, at >= 0 ? walk[at] : 0.0, e64);
    etorch = worst(w, c->w_torch, p0, walk, n, 1e-6, 1.0 / 16, &at);
    CHECK(etorch <= 1.0, "W vs torch.optim.Muon: [%lld] got %.9g want %.9g (walk %.3g): %.3g of the bound",
          (long long)at, at >= 0 ? w[at] : 0.0, at >= 0 ? c->w_torch[at] : 0.0, at >= 0 ? walk[at] : 0.0, etorch);
    printf("  %dx%d: worst element at %.3g of the float64-iteration bound, %.3g of torch.optim.Muon's\n", c->rows,
           c->cols, e64, etorch);
    {
        int bad = -1;
        for (i = 0; i < c->rows && bad < 0; i++) {
            double scale = fmax(fmax(fabs((double)c->b[i]), 1e-3), 0.0), e = fabs((double)b[i] - c->b[i]);
            float x = b[i], y = c->b[i];
            int32_t ix, iy;
            memcpy(&ix, &x, 4); memcpy(&iy, &y, 4);
            if (!(e <= 1e-6 * scale) && !(ix - iy <= 4 && iy - ix <= 4)) bad = (int)i;
        }
        CHECK(bad < 0, "b vs torch.optim.AdamW: [%d] got %.9g want %.9g", bad, bad >= 0 ? b[bad] : 0.0,
              bad >= 0 ? c->b[bad] : 0.0);
    }
    for (l = ZERO__SIMD_SCALAR + 1; l < ZERO__SIMD_NUM; l++) {
        if (!zero__simd_supported(l)) continue;
        if (!replay(ci, l, w2, walk2, b2)) break;
        CHECK(memcmp(w, w2, sizeof(float) * (size_t)n) == 0, "path %s: W differs from the scalar path's",
              zero__simd_name[l]);
    }
done:
    free(w); free(walk); free(w2); free(walk2); free(p0); free(b); free(b2);
}

/* the optimizer types' names (zero_optim_type_str: zero_ckpt info, the examples' lines) */
static void type_names(void) {
    CHECK(!strcmp(zero_optim_type_str(ZERO_OPTIM_MUON), "muon") && !strcmp(zero_optim_type_str(ZERO_OPTIM_LION), "lion") &&
          !strcmp(zero_optim_type_str(ZERO_OPTIM_SGD), "sgd") && !strcmp(zero_optim_type_str(ZERO_OPTIM_ADAMW), "adamw") &&
          !strcmp(zero_optim_type_str(ZERO_OPTIM_DEFAULT), "adamw"), "a type's name");
    CHECK(!strcmp(zero_optim_type_str(ZERO_OPTIM_NUM), "(unknown optimizer)") &&
          !strcmp(zero_optim_type_str((zero_optim_type)-1), "(unknown optimizer)"), "an unknown type: '%s'",
          zero_optim_type_str(ZERO_OPTIM_NUM));
}

/* the learning-rate adjustments of torch.optim._muon._adjust_lr */
static void adjust_lr(void) {
    CHECK(zero__muon_lr(0.02, 0, 48, 192) == 0.02 && zero__muon_lr(0.02, 0, 192, 48) == 0.02 * 2.0,
          "original: lr * sqrt(max(1, rows / cols))");
    CHECK(zero__muon_lr(0.01, 1, 192, 48) == 0.01 * (0.2 * sqrt(192.0)) &&
          zero__muon_lr(0.01, 1, 37, 53) == 0.01 * (0.2 * sqrt(53.0)),
          "match_rms_adamw: lr * (0.2 * sqrt(max(rows, cols)))");
}

/* the iteration makes a matrix near-orthogonal: X X^T's diagonal in (0.5, 1.5)-ish squared,
   whatever the input's scale; a zero matrix stays zero (the eps floor, no NaN) */
static void ns_properties(void) {
    enum { R = 16, K = 40 };
    static float u[R * K], work[2 * R * K + 2 * R * R], gws[ZERO__MC * ZERO__KC + ZERO__KC * ZERO__NC];
    zero__muon_hp h;
    int i, j, k, ok = 1;
    memset(&h, 0, sizeof h);
    h.a = 3.4445f; h.b = -4.7750f; h.c = 2.0315f; h.eps = 1e-7f; h.steps = 5;
    values(7, 0, 0, R * K, 4, u);                       /* large values: the norm scales them down */
    zero__muon_ns(&h, u, R, K, work, gws, zero__simd_pick());
    for (i = 0; i < R && ok; i++) {
        double d = 0;
        for (k = 0; k < K; k++) d += (double)u[i * K + k] * u[i * K + k];
        ok &= CHECK(d > 0.2 && d < 2.5, "row %d of NS(U): |row|^2 = %g", i, d);
    }
    memset(u, 0, sizeof u);
    zero__muon_ns(&h, u, R, K, work, gws, zero__simd_pick());
    for (j = 0; j < R * K; j++)
        if (u[j] != 0.0f) { CHECK(0, "NS(0)[%d] = %g", j, u[j]); break; }
}

/* ---- through the library: ZERO_OPTIM_MUON in zero_step -------------------------------------
   The same cases through zero_create .. zero_step: W (marked muon) and b in one module, f32
   params, every rank adding the case's gradient; held to the reference as above, and every
   stage bitwise equal to stage 0 at the same world size. */
/* a built context's W (rows x cols, marked muon unless plain) and b [rows] in one module */
static zero_result small_ctx(zero_desc *d, int rows, int cols, int mark, zero_ctx **out, zero_module *mod, zero_param *W,
                             zero_param *B) {
    zero_module_desc md;
    zero_param_desc pd;
    zero_result r;
    *out = NULL;
    if ((r = zero_create(out, d)) != ZERO_OK) return r;
    memset(&md, 0, sizeof md);
    md.name = "layer";
    if ((r = zero_add_module(*out, &md, mod)) != ZERO_OK) return r;
    memset(&pd, 0, sizeof pd);
    pd.name = "w"; pd.ndim = 2; pd.shape[0] = rows; pd.shape[1] = cols; pd.muon = mark;
    if ((r = zero_add_param(*out, *mod, &pd, W)) != ZERO_OK) return r;
    memset(&pd, 0, sizeof pd);
    pd.name = "b"; pd.ndim = 1; pd.shape[0] = rows;
    if ((r = zero_add_param(*out, *mod, &pd, B)) != ZERO_OK) return r;
    return zero_build(*out);
}

typedef struct lib_run { int ci, stage, world; float *w[4], *b[4]; } lib_run;

static zero_result lib_rank(zero_comm *comm, int rank, void *user) {
    lib_run *L = (lib_run *)user;
    const muon_case *c = &C[L->ci];
    const int64_t n = (int64_t)c->rows * c->cols;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod;
    zero_param W, B;
    zero_result r;
    float *g = (float *)malloc(sizeof(float) * (size_t)(n + c->rows)), *all = NULL;
    int t;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.stage = L->stage;
    d.param_dtype = ZERO_F32;
    d.timeout_ms = 20000;
    d.optim.type = ZERO_OPTIM_MUON;
    d.optim.lr = c->alr; d.optim.beta1 = c->b1; d.optim.beta2 = c->b2; d.optim.eps = c->aeps;
    d.optim.weight_decay = c->awd;
    d.optim.muon.lr = c->lr; d.optim.muon.weight_decay = c->wd; d.optim.muon.momentum = c->mu;
    d.optim.muon.no_nesterov = !c->nesterov;
    d.optim.muon.adjust_lr = c->adjust ? ZERO_MUON_ADJUST_MATCH_RMS_ADAMW : ZERO_MUON_ADJUST_ORIGINAL;
    if (!g) return ZERO_ERR_OUT_OF_MEMORY;
    if ((r = small_ctx(&d, c->rows, c->cols, 1, &z, &mod, &W, &B)) != ZERO_OK) goto done;
    values(L->ci, 0, 0, n, 14, g);
    values(L->ci, 1, 0, c->rows, 14, g + n);
    if ((r = zero_param_set_f32(z, W, g)) != ZERO_OK || (r = zero_param_set_f32(z, B, g + n)) != ZERO_OK) goto done;
    for (t = 1; t <= c->steps; t++) {
        values(L->ci, 0, t, n, 16, g);
        values(L->ci, 1, t, c->rows, 16, g + n);
        if ((r = zero_fetch(z, mod)) != ZERO_OK) goto done;
        zero_add_f32(zero_param_grad(z, W), ZERO_F32, g, n);
        zero_add_f32(zero_param_grad(z, B), ZERO_F32, g + n, c->rows);
        if ((r = zero_release(z, mod)) != ZERO_OK || (r = zero_grads_ready(z, mod)) != ZERO_OK ||
            (r = zero_step(z)) != ZERO_OK)
            goto done;
    }
    all = (float *)malloc(sizeof(float) * (size_t)(n + c->rows));
    if (!all) { r = ZERO_ERR_OUT_OF_MEMORY; goto done; }
    if ((r = zero_gather_params_f32(z, all)) != ZERO_OK) goto done;
    memcpy(L->w[rank], all, sizeof(float) * (size_t)n);
    memcpy(L->b[rank], all + n, sizeof(float) * (size_t)c->rows);
done:
    if (r != ZERO_OK) fprintf(stderr, "  rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    free(g); free(all);
    zero_destroy(z);
    return r;
}

static void lib_case(int ci, int world) {
    const muon_case *c = &C[ci];
    const int64_t n = (int64_t)c->rows * c->cols;
    float *ref = (float *)malloc(sizeof(float) * (size_t)n), *walk = (float *)malloc(sizeof(float) * (size_t)n);
    float *b = (float *)malloc(sizeof(float) * (size_t)c->rows), *p0 = (float *)malloc(sizeof(float) * (size_t)n);
    float *w0 = (float *)malloc(sizeof(float) * (size_t)n);
    lib_run L;
    int stage, k, ok = 1;
    int64_t at;
    memset(&L, 0, sizeof L);
    for (k = 0; k < world; k++) {
        L.w[k] = (float *)malloc(sizeof(float) * (size_t)n);
        L.b[k] = (float *)malloc(sizeof(float) * (size_t)c->rows);
        ok &= L.w[k] && L.b[k];
    }
    if (!CHECK(ok && ref && walk && b && p0 && w0, "out of memory")) goto done;
    values(ci, 0, 0, n, 14, p0);
    if (!replay(ci, ZERO__SIMD_SCALAR, ref, walk, b)) goto done;
    L.ci = ci;
    L.world = world;
    for (stage = 0; stage <= 3; stage++) {
        zero_result r;
        double e;
        L.stage = stage;
        r = world == 1 ? lib_rank(NULL, 0, &L) : zero_run_local(world, lib_rank, &L);
        if (!CHECK(r == ZERO_OK, "stage %d world %d: %s", stage, world, zero_result_str(r))) break;
        for (k = 1; k < world; k++)
            CHECK(memcmp(L.w[k], L.w[0], sizeof(float) * (size_t)n) == 0, "stage %d: rank %d's W differs from rank 0's",
                  stage, k);
        e = worst(L.w[0], c->w_f64ns, p0, walk, n, 1e-6, 1.0 / 16384, &at);
        CHECK(e <= 1.0, "stage %d world %d: W vs torch with a float64 iteration: [%lld] got %.9g want %.9g: %.3g of the "
              "bound", stage, world, (long long)at, at >= 0 ? L.w[0][at] : 0.0, at >= 0 ? c->w_f64ns[at] : 0.0, e);
        for (k = 0; k < c->rows; k++) {
            float x = L.b[0][k], y = c->b[k];
            int32_t ix, iy;
            memcpy(&ix, &x, 4); memcpy(&iy, &y, 4);
            if (!(fabs((double)x - y) <= 1e-6 * fmax(fabs((double)y), 1e-3)) && !(ix - iy <= 4 && iy - ix <= 4)) {
                CHECK(0, "stage %d world %d: b[%d] %.9g, torch.optim.AdamW's %.9g", stage, world, k, x, y);
                break;
            }
        }
        if (stage == 0) memcpy(w0, L.w[0], sizeof(float) * (size_t)n);
        else CHECK(memcmp(w0, L.w[0], sizeof(float) * (size_t)n) == 0, "world %d: stage %d's W differs from stage 0's",
                   world, stage);
    }
done:
    for (k = 0; k < world; k++) { free(L.w[k]); free(L.b[k]); }
    free(ref); free(walk); free(b); free(p0); free(w0);
}

/* ---- several matrices in a module: dealt to the ranks in turn ----------------------------
   Three matrices of three shapes and a bias in one module, 6 steps: at 2 ranks (whose mean of
   two equal gradients is exact) every stage gives the bits of one rank; at 3 ranks (rank 0
   iterates on two matrices, rank 1 on one, rank 2 on none) every stage gives the bits of
   stage 0. */
#define DEAL_N 3
static const int deal_shape[DEAL_N][2] = { { 24, 40 }, { 40, 24 }, { 16, 16 } };
typedef struct deal_run { int stage; float *out[4]; } deal_run;
static zero_result deal_rank(zero_comm *comm, int rank, void *user) {
    deal_run *R = (deal_run *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod;
    zero_module_desc md;
    zero_param_desc pd;
    zero_param P[DEAL_N + 1];
    zero_result r;
    float buf[40 * 24];
    int i, t;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = R->stage; d.param_dtype = ZERO_BF16; d.timeout_ms = 20000;
    d.optim.type = ZERO_OPTIM_MUON;
    d.optim.muon.lr = 0.02; d.optim.muon.weight_decay = 0.1;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    memset(&md, 0, sizeof md);
    md.name = "blk";
    if ((r = zero_add_module(z, &md, &mod)) != ZERO_OK) goto done;
    for (i = 0; i <= DEAL_N; i++) {
        static const char *names[DEAL_N + 1] = { "a", "b", "c", "bias" };
        memset(&pd, 0, sizeof pd);
        pd.name = names[i];
        pd.ndim = i < DEAL_N ? 2 : 1;
        pd.shape[0] = i < DEAL_N ? deal_shape[i][0] : 16;
        pd.shape[1] = i < DEAL_N ? deal_shape[i][1] : 0;
        pd.muon = i < DEAL_N;
        pd.no_decay = i == DEAL_N;
        if ((r = zero_add_param(z, mod, &pd, &P[i])) != ZERO_OK) goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i <= DEAL_N; i++) {
        int64_t n = i < DEAL_N ? (int64_t)deal_shape[i][0] * deal_shape[i][1] : 16;
        values(9, i, 0, n, 14, buf);
        if ((r = zero_param_set_f32(z, P[i], buf)) != ZERO_OK) goto done;
    }
    for (t = 1; t <= 6; t++) {
        if ((r = zero_fetch(z, mod)) != ZERO_OK) goto done;
        for (i = 0; i <= DEAL_N; i++) {
            int64_t n = i < DEAL_N ? (int64_t)deal_shape[i][0] * deal_shape[i][1] : 16;
            values(9, i, t, n, 12, buf);
            zero_add_f32(zero_param_grad(z, P[i]), ZERO_BF16, buf, n);
        }
        if ((r = zero_release(z, mod)) != ZERO_OK || (r = zero_grads_ready(z, mod)) != ZERO_OK || (r = zero_step(z)) != ZERO_OK)
            goto done;
    }
    r = zero_gather_params_f32(z, R->out[rank]);
done:
    if (r != ZERO_OK) fprintf(stderr, "  rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}
static void dealt_matrices(void) {
    enum { NP = 24 * 40 + 40 * 24 + 16 * 16 + 16 };
    static float one[NP], ref3[NP], outs[4][NP];
    deal_run R;
    int w, stage, k;
    for (k = 0; k < 4; k++) R.out[k] = outs[k];
    R.stage = 0;
    if (!CHECK(deal_rank(NULL, 0, &R) == ZERO_OK, "one rank")) return;
    memcpy(one, outs[0], sizeof one);
    for (w = 2; w <= 3; w++)
        for (stage = 0; stage <= 3; stage++) {
            R.stage = stage;
            if (!CHECK(zero_run_local(w, deal_rank, &R) == ZERO_OK, "world %d stage %d", w, stage)) return;
            for (k = 1; k < w; k++)
                CHECK(memcmp(outs[k], outs[0], sizeof one) == 0, "world %d stage %d: rank %d differs from rank 0", w, stage, k);
            if (w == 2) CHECK(memcmp(outs[0], one, sizeof one) == 0, "world 2 stage %d: not one rank's bits", stage);
            else if (stage == 0) memcpy(ref3, outs[0], sizeof one);
            else CHECK(memcmp(outs[0], ref3, sizeof one) == 0, "world 3: stage %d differs from stage 0", stage);
        }
}

/* ---- the tiers: host and NVMe equal to memory ------------------------------------------------
   Two modules (two matrices and a bias; a 37 x 53 matrix and a no-decay bias), 5 steps, bf16
   and f32 params, with the optimizer states in memory, on the host, on NVMe (blocks of 1024
   elements: the matrices span blocks and a block holds two modules' states) and, at stage 3,
   the params on NVMe too: every tier gives the memory run's bits at every stage and world */
enum { TIER_MEM, TIER_HOST, TIER_NVME, TIER_NVME_PARAMS, TIER_NUM };
static char tier_dir[512];
static const int tier_shape[5][2] = { { 24, 40 }, { 40, 24 }, { 16, 0 }, { 37, 53 }, { 37, 0 } };
#define TIER_NP (24 * 40 + 40 * 24 + 16 + 37 * 53 + 37)
typedef struct tier_run {
    int stage, tier; zero_dtype pdt; float *out[4]; int nblocks;
    /* guards: clip_norm; f16 loss scale (0: static 1, else dynamic from it, window 2); a NaN
       in rank 0's w3 gradient at step nan_step; step omit_step left out; the gradients of
       step t multiplied by coef[t] (0: not); the steps each rank saw skipped */
    float clip, scale; int nan_step, omit_step; double coef[6]; int skipped[4];
    /* fault_step > 0: rank 0's offload writes fail once zero_step of that step has written its
       blocks + fault_delta (0: the Muon pass's writes; -1: the element pass's last block's);
       each rank's result, message and whether its params stayed the bits they were; the run
       stops there */
    int fault_step, fault_delta; zero_result fault_r[4]; char fault_msg[4][256]; int fault_same[4];
} tier_run;
static volatile int fault_fd = -1;
static int64_t fault_writes, fault_after;      /* rank 0's writes since armed; the first that fails */
static int fault_hit(int fd, int write) {
    return write && fd == __atomic_load_n(&fault_fd, __ATOMIC_RELAXED) &&
           __atomic_fetch_add(&fault_writes, 1, __ATOMIC_RELAXED) >= __atomic_load_n(&fault_after, __ATOMIC_RELAXED);
}
static int64_t fault_pwrite(int fd, const void *b, size_t n, int64_t off) {
    return fault_hit(fd, 1) ? -EIO : zero__os_pwrite(fd, b, n, off);
}
static int64_t fault_result(int fd, int write, int64_t off, int64_t res) { (void)off; return fault_hit(fd, write) ? -EIO : res; }
static zero_result tier_rank(zero_comm *comm, int rank, void *user) {
    tier_run *R = (tier_run *)user;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[2];
    zero_module_desc md;
    zero_param_desc pd;
    zero_param P[5];
    zero_result r;
    float buf[37 * 53];
    int i, t;
    memset(&d, 0, sizeof d);
    d.comm = comm; d.stage = R->stage; d.param_dtype = R->pdt; d.timeout_ms = 20000;
    d.optim.type = ZERO_OPTIM_MUON;
    d.optim.muon.lr = 0.02; d.optim.muon.weight_decay = 0.1;
    d.optim.weight_decay = 0.01;
    d.offload_optimizer = R->tier == TIER_HOST ? ZERO_OFFLOAD_HOST : R->tier >= TIER_NVME ? ZERO_OFFLOAD_NVME : ZERO_OFFLOAD_NONE;
    d.offload_params = R->tier == TIER_NVME_PARAMS ? ZERO_OFFLOAD_NVME : ZERO_OFFLOAD_NONE;
    d.offload.nvme_dirs[0] = tier_dir;
    d.offload.buffer_bytes = 1;     /* the smallest blocks: 1024 elements */
    d.clip_norm = R->clip;
    if (R->pdt == ZERO_F16) {
        d.loss_scale = R->scale > 0 ? 0.0f : 1.0f;
        d.loss_scale_init = R->scale;
        d.loss_scale_window = 2;
    }
    R->skipped[rank] = 0;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (i = 0; i < 2; i++) {
        memset(&md, 0, sizeof md);
        md.name = i ? "b" : "a";
        if ((r = zero_add_module(z, &md, &mod[i])) != ZERO_OK) goto done;
    }
    for (i = 0; i < 5; i++) {
        static const char *names[5] = { "w1", "w2", "bias", "w3", "bias" };
        memset(&pd, 0, sizeof pd);
        pd.name = names[i];
        pd.ndim = tier_shape[i][1] ? 2 : 1;
        pd.shape[0] = tier_shape[i][0];
        pd.shape[1] = tier_shape[i][1];
        pd.muon = tier_shape[i][1] != 0;
        pd.no_decay = i == 4;
        if ((r = zero_add_param(z, mod[i < 3 ? 0 : 1], &pd, &P[i])) != ZERO_OK) goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    if (rank == 0) R->nblocks = z->tier.nvme ? (int)z->tier.nvme->nblocks : -1;
    for (i = 0; i < 5; i++) {
        values(11, i, 0, (int64_t)tier_shape[i][0] * (tier_shape[i][1] ? tier_shape[i][1] : 1), 14, buf);
        if ((r = zero_param_set_f32(z, P[i], buf)) != ZERO_OK) goto done;
    }
    for (t = 1; t <= 5; t++) {
        int m;
        const float S = zero_loss_scale(z);
        if (t == R->omit_step) continue;
        for (m = 0; m < 2; m++) {
            if ((r = zero_fetch(z, mod[m])) != ZERO_OK) goto done;
            for (i = m ? 3 : 0; i < (m ? 5 : 3); i++) {
                int64_t n = (int64_t)tier_shape[i][0] * (tier_shape[i][1] ? tier_shape[i][1] : 1), e;
                values(11, i, t + 7 * rank, n, 12, buf);
                for (e = 0; e < n; e++) buf[e] = R->coef[t] ? (float)(buf[e] * R->coef[t]) : buf[e] * S;
                if (t == R->nan_step && rank == 0 && i == 3) buf[n / 2] = NAN;
                zero_add_f32(zero_param_grad(z, P[i]), R->pdt, buf, n);
            }
            if ((r = zero_release(z, mod[m])) != ZERO_OK || (r = zero_grads_ready(z, mod[m])) != ZERO_OK) goto done;
        }
        if (t == R->fault_step) {       /* rank 0's writes fail past its element pass's */
            static char before[4][TIER_NP * 4];
            int64_t pb = zero__pcat(z->lay.plan.bytes, ZERO_CAT_PARAMS);
            if (pb > (int64_t)sizeof before[0]) { r = ZERO_ERR_INVALID_ARG; goto done; }
            memcpy(before[rank], z->arena.param, (size_t)pb);
            if ((r = zero_allreduce_f64(z, NULL, 0)) != ZERO_OK) goto done;
            if (rank == 0) {
                __atomic_store_n(&fault_writes, 0, __ATOMIC_RELAXED);
                __atomic_store_n(&fault_after, z->tier.nvme->nblocks + R->fault_delta, __ATOMIC_RELAXED);
                __atomic_store_n(&fault_fd, z->tier.nvme->fd[0], __ATOMIC_RELAXED);
            }
            if ((r = zero_allreduce_f64(z, NULL, 0)) != ZERO_OK) goto done;
            R->fault_r[rank] = zero_step(z);
            snprintf(R->fault_msg[rank], sizeof R->fault_msg[0], "%s", zero_last_error(z));
            R->fault_same[rank] = memcmp(before[rank], z->arena.param, (size_t)pb) == 0;
            if (rank == 0) __atomic_store_n(&fault_fd, -1, __ATOMIC_RELAXED);
            goto done;
        }
        r = zero_step(z);
        if (r == ZERO_STEP_SKIPPED) { R->skipped[rank] |= 1 << t; r = ZERO_OK; }
        if (r != ZERO_OK) goto done;
    }
    r = zero_gather_params_f32(z, R->out[rank]);
done:
    if (r != ZERO_OK) fprintf(stderr, "  rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}
static void tiers(void) {
    static const char *tname[TIER_NUM] = { "memory", "host", "nvme", "nvme+params" };
    static float ref[TIER_NP], outs[4][TIER_NP];
    const char *tmp = getenv("TMPDIR");
    tier_run R;
    int w, stage, tier, k, p;
    snprintf(tier_dir, sizeof tier_dir, "%s/zero_muon_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!CHECK(mkdtemp(tier_dir) != NULL, "mkdtemp %s", tier_dir)) return;
    memset(&R, 0, sizeof R);
    for (k = 0; k < 4; k++) R.out[k] = outs[k];
    for (p = 0; p < 2; p++)
        for (w = 1; w <= 3; w++)
            for (stage = 0; stage <= 3; stage++)
                for (tier = 0; tier < TIER_NUM; tier++) {
                    zero_result r;
                    if (tier == TIER_NVME_PARAMS && stage != 3) continue;
                    if (MUON_SAN && (w == 2 || p == 1 || stage == 2 || (stage == 0 && tier != TIER_MEM))) continue;   /* TSan: minutes */
                    R.stage = stage; R.tier = tier; R.pdt = p ? ZERO_F32 : ZERO_BF16;
                    r = w == 1 ? tier_rank(NULL, 0, &R) : zero_run_local(w, tier_rank, &R);
                    if (!CHECK(r == ZERO_OK, "%s params, world %d stage %d %s: %s", p ? "f32" : "bf16", w, stage,
                               tname[tier], zero_result_str(r)))
                        goto out;
                    if (tier >= TIER_NVME)
                        CHECK(R.nblocks >= 2, "world %d stage %d %s: %d NVMe blocks, want several", w, stage, tname[tier],
                              R.nblocks);
                    for (k = 1; k < w; k++)
                        CHECK(memcmp(outs[k], outs[0], sizeof ref) == 0, "world %d stage %d %s: rank %d differs", w, stage,
                              tname[tier], k);
                    if (tier == TIER_MEM && stage == 0) memcpy(ref, outs[0], sizeof ref);
                    else CHECK(memcmp(outs[0], ref, sizeof ref) == 0, "%s params, world %d: stage %d %s differs from "
                               "stage 0 in memory", p ? "f32" : "bf16", w, stage, tname[tier]);
                }
    for (k = 0; k < 2; k++) {   /* a write that fails on rank 0 in the NVMe Muon pass (past its element
                                   pass's), then one in the element pass's last block (the Muon pass's
                                   collectives must still run there): the step fails on both ranks,
                                   each rank's params the bits they were */
        const char *where = k ? "element pass" : "muon pass";
        int q;
        memset(&R, 0, sizeof R);
        for (q = 0; q < 4; q++) R.out[q] = outs[q];
        R.stage = 2; R.tier = TIER_NVME; R.pdt = ZERO_BF16; R.fault_step = 3; R.fault_delta = k ? -1 : 0;
        zero__fops.pwrite = fault_pwrite;
        zero__fops.io_result = fault_result;
        (void)zero_run_local(2, tier_rank, &R);
        zero__fops.pwrite = zero__os_pwrite;
        zero__fops.io_result = NULL;
        for (q = 0; q < 2; q++) {
            CHECK(R.fault_r[q] == ZERO_ERR_IO, "%s fault: rank %d's zero_step gave %s (want ZERO_ERR_IO): %s", where, q,
                  zero_result_str(R.fault_r[q]), R.fault_msg[q]);
            CHECK(R.fault_same[q], "%s fault: rank %d's params changed in the failed step", where, q);
        }
        CHECK(strstr(R.fault_msg[0], "write") != NULL && strstr(R.fault_msg[1], "another rank") != NULL,
              "%s fault: the messages: rank 0 '%s', rank 1 '%s'", where, R.fault_msg[0], R.fault_msg[1]);
        if (k == 0)
            CHECK(__atomic_load_n(&fault_writes, __ATOMIC_RELAXED) > R.nblocks, "muon pass fault: %lld writes of rank 0 "
                  "in the step, its element pass has %d: the fault missed the Muon pass", (long long)fault_writes, R.nblocks);
    }
out:
    rmdir(tier_dir);
}

/* Muon's moments and buffers are planned and allocated exactly: plan == stats after zero_build,
   the matrix's elements have one moment, and the buffers exceed AdamW's by the module's span
   of fp32 updates, the rank's slice of it to gather (stages 1-3 with 2 ranks), the
   iteration's work area (2 rows cols + 2 min^2 floats), the SGEMM's packing buffers and (2
   ranks) the matrices a rank iterates on, once to send and once per rank to receive */
typedef struct mem_job { int stage; int64_t buf[2], optim[2], want, tables_ok; } mem_job;
static zero_result mem_rank(zero_comm *comm, int rank, void *user) {
    mem_job *j = (mem_job *)user;
    int muon;
    for (muon = 0; muon < 2; muon++) {
        zero_desc d;
        zero_ctx *z = NULL;
        zero_module mod;
        zero_param W, B;
        zero_plan pl;
        zero_stats st;
        zero_result r;
        int t, c;
        memset(&d, 0, sizeof d);
        d.comm = comm; d.stage = j->stage; d.param_dtype = ZERO_BF16; d.timeout_ms = 20000;
        d.optim.type = muon ? ZERO_OPTIM_MUON : ZERO_OPTIM_ADAMW;
        r = small_ctx(&d, 40, 24, muon, &z, &mod, &W, &B);
        if (r == ZERO_OK && (r = zero_plan_get(z, &pl)) == ZERO_OK && (r = zero_stats_get(z, &st)) == ZERO_OK && rank == 0) {
            int64_t span = pl.numel_padded, per = j->stage > 0 && comm ? span / 2 : 0;
            j->buf[muon] = j->optim[muon] = 0;
            for (t = 0; t < ZERO_TIER_NUM; t++) {
                j->buf[muon] += pl.bytes[t][ZERO_CAT_BUFFERS];
                j->optim[muon] += pl.bytes[t][ZERO_CAT_OPTIM];
                for (c = 0; c < ZERO_CAT_NUM; c++) j->tables_ok &= pl.bytes[t][c] == st.bytes[t][c];
            }
            j->want = 4 * (span + per + 2 * 40 * 24 + 2 * 24 * 24 + ZERO__MC * ZERO__KC + ZERO__KC * ZERO__NC +
                           (comm ? 40 * 24 * 3 : 0));     /* 2 ranks: the one matrix rank 0 iterates on, sent and received */
        }
        zero_destroy(z);
        if (r != ZERO_OK) return r;
    }
    return ZERO_OK;
}
static void memory_planned(void) {
    int stage, w;
    for (w = 1; w <= 2; w++)
        for (stage = 0; stage <= 3; stage++) {
            mem_job j;
            zero_result r;
            memset(&j, 0, sizeof j);
            j.stage = stage;
            j.tables_ok = 1;
            r = w == 1 ? mem_rank(NULL, 0, &j) : zero_run_local(2, mem_rank, &j);
            if (!CHECK(r == ZERO_OK, "stage %d world %d: %s: %s", stage, w, zero_result_str(r), zero_last_error(NULL))) continue;
            CHECK(j.tables_ok, "stage %d world %d: the plan differs from the bytes allocated", stage, w);
            CHECK(j.buf[1] - j.buf[0] == j.want, "stage %d world %d: Muon's buffers %lld bytes, want %lld", stage, w,
                  (long long)(j.buf[1] - j.buf[0]), (long long)j.want);
            /* rank 0's matrix elements have no second moment: all 960 at one rank or stage 0,
               else its half of the 1024-element span, 512 */
            CHECK(j.optim[0] - j.optim[1] == 4 * (w == 1 || stage == 0 ? 960 : 512), "stage %d world %d: Muon's moments "
                  "%lld bytes, AdamW's %lld", stage, w, (long long)j.optim[1], (long long)j.optim[0]);
        }
}

/* ---- the step's guards with Muon -----------------------------------------------------------
   - a NaN in one rank's gradient: ZERO_STEP_SKIPPED on every rank, and the params and states
     as if that step had not been taken (the run without it: bitwise), stages 1 and 3, 1-3 ranks;
   - f16 params with a dynamic loss scale (from 4, doubling every 2 clean steps: the gradients
     scaled by a power of two, exactly) give the bits of a static scale of 1;
   - clipping (clip_norm below every step's norm) gives, within 1e-6 of each param plus 2^-14
     of its walk, the run whose gradients the test scales by torch's clip_grad_norm_
     coefficient itself (clip_norm / (norm + 1e-6), the norm in float64): the momentum sees
     clipped gradients (Newton-Schulz normalizes each update, so the momentum's mix of
     steps is what clipping changes) */
static void guards(void) {
    static float ref[TIER_NP], outs[4][TIER_NP], p0[TIER_NP];
    tier_run R;
    int w, stage, k, t, i;
    memset(&R, 0, sizeof R);
    for (k = 0; k < 4; k++) R.out[k] = outs[k];
    for (w = 1; w <= 3; w += 2)
        for (stage = 1; stage <= 3; stage += 2) {
            R.stage = stage; R.pdt = ZERO_BF16; R.nan_step = 0; R.omit_step = 3;
            if (!CHECK((w == 1 ? tier_rank(NULL, 0, &R) : zero_run_local(w, tier_rank, &R)) == ZERO_OK, "omitted")) return;
            memcpy(ref, outs[0], sizeof ref);
            R.nan_step = 3; R.omit_step = 0;
            if (!CHECK((w == 1 ? tier_rank(NULL, 0, &R) : zero_run_local(w, tier_rank, &R)) == ZERO_OK, "nan")) return;
            for (k = 0; k < w; k++)
                CHECK(R.skipped[k] == 1 << 3, "world %d stage %d rank %d: skipped steps mask %#x, want step 3 alone", w,
                      stage, k, (unsigned)R.skipped[k]);
            CHECK(memcmp(outs[0], ref, sizeof ref) == 0, "world %d stage %d: the skipped step changed the params or states",
                  w, stage);
        }
    memset(&R, 0, sizeof R);
    for (k = 0; k < 4; k++) R.out[k] = outs[k];
    R.stage = 2; R.pdt = ZERO_F16;
    if (!CHECK(zero_run_local(2, tier_rank, &R) == ZERO_OK, "f16, static scale 1")) return;
    memcpy(ref, outs[0], sizeof ref);
    R.scale = 4.0f;
    if (!CHECK(zero_run_local(2, tier_rank, &R) == ZERO_OK, "f16, dynamic scale")) return;
    CHECK(R.skipped[0] == 0, "f16: steps skipped (%#x)", (unsigned)R.skipped[0]);
    CHECK(memcmp(outs[0], ref, sizeof ref) == 0, "f16: the dynamic loss scale changed the bits");
    /* clipping at one rank: each step's norm from the test's own gradients */
    memset(&R, 0, sizeof R);
    for (k = 0; k < 4; k++) R.out[k] = outs[k];
    R.stage = 0; R.pdt = ZERO_F32;
    for (t = 1; t <= 5; t++) {
        float g[37 * 53];
        double ss = 0;
        for (i = 0; i < 5; i++) {
            int64_t n = (int64_t)tier_shape[i][0] * (tier_shape[i][1] ? tier_shape[i][1] : 1), e;
            values(11, i, t, n, 12, g);
            for (e = 0; e < n; e++) ss += (double)g[e] * g[e];
        }
        R.coef[t] = 0.5 / (sqrt(ss) + 1e-6);
    }
    if (!CHECK(tier_rank(NULL, 0, &R) == ZERO_OK, "pre-clipped")) return;
    memcpy(ref, outs[0], sizeof ref);
    for (t = 1; t <= 5; t++) R.coef[t] = 0;
    R.clip = 0.5f;
    if (!CHECK(tier_rank(NULL, 0, &R) == ZERO_OK, "clipped")) return;
    {
        int64_t at = 0;
        for (i = 0; i < 5; i++) {
            int64_t n = (int64_t)tier_shape[i][0] * (tier_shape[i][1] ? tier_shape[i][1] : 1);
            values(11, i, 0, n, 14, p0 + at);
            at += n;
        }
        for (k = 0, at = -1; k < TIER_NP; k++) {
            double bound = 1e-6 * fabs((double)ref[k]) + fabs((double)ref[k] - p0[k]) / 16384;
            if (fabs((double)outs[0][k] - ref[k]) > bound) { at = k; break; }
        }
        CHECK(at < 0, "clipped [%lld]: %.9g, the test's clipped gradients give %.9g (from %.9g)", (long long)at,
              at >= 0 ? outs[0][at] : 0.0, at >= 0 ? ref[at] : 0.0, at >= 0 ? p0[at] : 0.0);
    }
}

/* zero_estimate_muon from sizes equals rank 0's zero_plan_get of the model it describes (align 1):
   modules of 3, 1 and 0 matrices of 24 x 40 and a 1-D rest each, bf16 params, every stage
   at 1-3 ranks; and its refusals */
static const int64_t est_numel[3] = { 3 * 24 * 40 + 17, 24 * 40 + 5, 300 };
static zero_result est_rank(zero_comm *comm, int rank, void *user) {
    int stage, i, *ok = (int *)user;
    const int N = comm ? zero_comm_size(comm) : 1;
    for (stage = 0; stage <= 3; stage++) {
        zero_desc d;
        zero_ctx *z = NULL;
        zero_plan pl, est;
        zero_result r;
        int t, c, k;
        memset(&d, 0, sizeof d);
        d.comm = comm; d.stage = stage; d.align_elems = 1; d.timeout_ms = 20000;
        d.optim.type = ZERO_OPTIM_MUON;
        if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
        for (i = 0; i < 3 && r == ZERO_OK; i++) {
            zero_module mod;
            zero_module_desc md;
            zero_param_desc pd;
            zero_param P;
            static const char *names[3] = { "a", "b", "c" };
            memset(&md, 0, sizeof md);
            md.name = names[i];
            r = zero_add_module(z, &md, &mod);
            for (k = 0; k < est_numel[i] / (24 * 40) && r == ZERO_OK; k++) {
                char nm[16];
                snprintf(nm, sizeof nm, "w%d", k);
                memset(&pd, 0, sizeof pd);
                pd.name = nm; pd.ndim = 2; pd.shape[0] = 24; pd.shape[1] = 40; pd.muon = 1;
                r = zero_add_param(z, mod, &pd, &P);
            }
            memset(&pd, 0, sizeof pd);
            pd.name = "rest"; pd.ndim = 1; pd.shape[0] = est_numel[i] % (24 * 40);
            if (r == ZERO_OK) r = zero_add_param(z, mod, &pd, &P);
        }
        if (r == ZERO_OK) r = zero_plan_get(z, &pl);
        zero_destroy(z);
        if (r != ZERO_OK) return r;
        if ((r = zero_estimate_muon(&d, N, 3, est_numel, 24, 40, &est)) != ZERO_OK) return r;
        if (rank != 0) continue;    /* the estimate is rank 0's plan */
        for (t = 0; t < ZERO_TIER_NUM; t++)
            for (c = 0; c < ZERO_CAT_NUM; c++)
                if (pl.bytes[t][c] != est.bytes[t][c]) {
                    if (rank == 0)
                        printf("  world %d stage %d: bytes[%d][%d] planned %lld, estimated %lld\n", N, stage, t, c,
                               (long long)pl.bytes[t][c], (long long)est.bytes[t][c]);
                    *ok = 0;
                }
        if (pl.total_bytes != est.total_bytes || pl.model_state_bytes != est.model_state_bytes) *ok = 0;
    }
    return ZERO_OK;
}
static void estimate(void) {
    zero_desc d;
    zero_plan pl, adamw;
    zero_result r;
    int w;
    for (w = 1; w <= 3; w++) {
        int ok = 1;
        r = w == 1 ? est_rank(NULL, 0, &ok) : zero_run_local(w, est_rank, &ok);
        CHECK(r == ZERO_OK && ok, "world %d: %s: %s", w, zero_result_str(r), ok ? zero_last_error(NULL) : "the estimate "
              "differs from the plan");
    }
    memset(&d, 0, sizeof d);
    d.stage = 1;
    d.optim.type = ZERO_OPTIM_MUON;
    CHECK(zero_estimate(&d, 2, 3, est_numel, &adamw) == ZERO_OK && zero_estimate_muon(&d, 2, 3, est_numel, 24, 40, &pl) ==
          ZERO_OK && adamw.model_state_bytes - pl.model_state_bytes == 4 * (1456 + 496) &&
          pl.bytes[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] > adamw.bytes[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS],
          "zero_estimate_muon: the model states (rank 0's slices hold 1456 and 496 matrix elements, without a "
          "second moment) or buffers against zero_estimate's");
    r = zero_estimate_muon(&d, 2, 3, est_numel, 0, 40, &pl);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "the matrices 0 x 40"), "0 rows: %s: %s",
          zero_result_str(r), zero_last_error(NULL));
    d.optim.type = ZERO_OPTIM_ADAMW;
    r = zero_estimate_muon(&d, 2, 3, est_numel, 24, 40, &pl);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(NULL), "desc.optim.type is adamw"), "adamw: %s: %s",
          zero_result_str(r), zero_last_error(NULL));
    r = zero_estimate_muon(NULL, 2, 3, est_numel, 24, 40, &pl);
    CHECK(r == ZERO_ERR_INVALID_ARG, "a NULL desc: %s", zero_result_str(r));
}

/* what zero.h refuses, each with its result and a message naming it */
static void refusals(void) {
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod;
    zero_module_desc md;
    zero_param_desc pd;
    zero_param P, B;
    zero_result r;
    static const struct { int what; zero_result want; const char *msg; } cases[] = {
        { 1, ZERO_ERR_UNSUPPORTED, "ZERO_OPTIM_MUON runs, for now, with fp32 moments" },
        { 2, ZERO_ERR_UNSUPPORTED, "ZERO_OPTIM_MUON runs, for now, with the optimizer states in the GPU's memory" },
        { 3, ZERO_ERR_UNSUPPORTED, "ZERO_OPTIM_MUON runs, for now, with no ZeRO++" },
        { 4, ZERO_ERR_INVALID_ARG, "a Muon option is out of range" },
        { 5, ZERO_ERR_INVALID_ARG, "a Muon option is out of range" },
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&d, 0, sizeof d);
        d.optim.type = ZERO_OPTIM_MUON;
        switch (cases[i].what) {
        case 1: d.optim.state_dtype = ZERO_STATE_Q8; break;
        case 2: d.device = ZERO_DEVICE_EMU; d.offload_optimizer = ZERO_OFFLOAD_HOST; break;
        case 3: d.stage = 3; d.qwz = 1; break;
        case 4: d.optim.muon.momentum = 1.0; break;
        default: d.optim.muon.ns_steps = 100; break;
        }
        r = zero_create(&z, &d);
        CHECK(r == cases[i].want && strstr(zero_last_error(NULL), cases[i].msg), "case %d: %s: %s", cases[i].what,
              zero_result_str(r), zero_last_error(NULL));
        zero_destroy(z);
        z = NULL;
    }
    /* a 1-D param marked muon; a marked param under another optimizer */
    memset(&d, 0, sizeof d);
    d.optim.type = ZERO_OPTIM_MUON;
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "%s", zero_last_error(NULL))) return;
    memset(&md, 0, sizeof md);
    md.name = "m";
    CHECK(zero_add_module(z, &md, &mod) == ZERO_OK, "%s", zero_last_error(z));
    memset(&pd, 0, sizeof pd);
    pd.name = "bias"; pd.ndim = 1; pd.shape[0] = 8; pd.muon = 1;
    r = zero_add_param(z, mod, &pd, &P);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(z), "muon marks a matrix, and this param has 1 dimension"),
          "a 1-D muon param: %s: %s", zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    z = NULL;
    memset(&d, 0, sizeof d);
    d.optim.type = ZERO_OPTIM_ADAMW;
    r = small_ctx(&d, 8, 4, 1, &z, &mod, &P, &B);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(zero_last_error(z), "param 'layer.w' is marked muon, but optim.type is adamw"),
          "a muon param under AdamW: %s: %s", zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
}

int main(void) {
    char err[600];
    int ok, i;
    test_init();
    test_begin("muon_reference_load");
    ok = load(err, sizeof err);
    CHECK(ok, "%s", err);
    test_end();
    TEST_RUN(type_names);
    TEST_RUN(adjust_lr);
    TEST_RUN(ns_properties);
    TEST_RUN(memory_planned);
    TEST_RUN(estimate);
    TEST_RUN(refusals);
    TEST_RUN(dealt_matrices);
    TEST_RUN(tiers);
    TEST_RUN(guards);
    for (i = 0; ok && i < ncases; i++) {
        test_begin("muon_vs_torch_%dx%d%s", C[i].rows, C[i].cols, C[i].nesterov ? "_nesterov" : "");
        check_case(i);
        test_end();
    }
    for (i = 0; ok && i < ncases; i++) {
        int world;
        for (world = 1; world <= 4; world++) {
            test_begin("muon_zero_step_%dx%d_world%d", C[i].rows, C[i].cols, world);
            if (MUON_SAN && (i != ncases - 1 || (world != 1 && world != 3))) test_skip("sanitizer build: a few cases");
            else lib_case(i, world);
            test_end();
        }
    }
    for (i = 0; i < ncases; i++) { free(C[i].w_torch); free(C[i].w_f64ns); free(C[i].b); }
    return test_summary();
}
