/* tests/fixture.h - the setups that the zero.h tests repeat, in one place: the desc they
   train with, modules and params added by name and shape, and the xorshift generator
   their data and initial values come from. Static functions over zero.h's public API;
   include it after zero.h (and test.h).

       zero_desc d;
       zero_module m;
       zero_param w, b;
       fx_desc(&d, comm, 2, ZERO_BF16, ZERO_OPTIM_ADAMW, 0.01);   // then set what differs
       if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
       if ((r = fx_module(z, "layer0", 0, &m)) != ZERO_OK ||
           (r = fx_param(z, m, "w", 13, 7, 0, &w)) != ZERO_OK ||     // shape {13, 7}
           (r = fx_param(z, m, "b", 13, 0, 1, &b)) != ZERO_OK)       // shape {13}, no decay
           goto done;

   Every helper returns what the zero_* call it wraps returned, so a test keeps its own
   error handling (goto done, CHECK with its own message). */
#ifndef ZERO_TEST_FIXTURE_H
#define ZERO_TEST_FIXTURE_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#  define FX__UNUSED __attribute__((unused))
#else
#  define FX__UNUSED
#endif

/* A zeroed desc on `comm` at `stage` with `dtype` params, and the optimizer the tests
   train with: `optim` at learning rate `lr`, weight decay 0.01, momentum 0.9 (SGD's),
   and a 20 s collective timeout (a broken rank fails its test instead of hanging it).
   Every other field is 0, the library's default; the caller sets what differs. */
FX__UNUSED static void fx_desc(zero_desc *d, zero_comm *comm, int stage, zero_dtype dtype, zero_optim_type optim,
                               double lr) {
    memset(d, 0, sizeof *d);
    d->comm = comm;
    d->stage = stage;
    d->param_dtype = dtype;
    d->optim.type = optim;
    d->optim.lr = lr;
    d->optim.weight_decay = 0.01;
    d->optim.momentum = 0.9;
    d->timeout_ms = 20000;
}

/* zero_add_module with a name and a frozen flag (the rest of the desc 0) */
FX__UNUSED static zero_result fx_module(zero_ctx *z, const char *name, int frozen, zero_module *out) {
    zero_module_desc md;
    memset(&md, 0, sizeof md);
    md.name = name;
    md.frozen = frozen;
    return zero_add_module(z, &md, out);
}

/* zero_add_param of shape {rows} (cols 0) or {rows, cols}, excluded from weight decay
   when no_decay (the rest of the desc 0) */
/* fx_muon: fx_param marks its matrices (cols > 0) for ZERO_OPTIM_MUON (set it before the ranks
   start; they only read it) */
static int fx_muon;
FX__UNUSED static zero_result fx_param(zero_ctx *z, zero_module m, const char *name, int64_t rows, int64_t cols,
                                       int no_decay, zero_param *out) {
    zero_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = name;
    pd.ndim = cols ? 2 : 1;
    pd.shape[0] = rows;
    pd.shape[1] = cols;
    pd.no_decay = no_decay;
    pd.muon = fx_muon && cols > 0;
    return zero_add_param(z, m, &pd, out);
}

/* xorshift64: the next value of the stream *s, uniform in [-1, 1) (deterministic data
   and initial values; each caller owns its state, so ranks can draw at the same time) */
FX__UNUSED static float fx_frand(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

#endif /* ZERO_TEST_FIXTURE_H */
