/*
zero_estimate.c - the memory planner on the command line: per-rank bytes of a model
of P parameters trained on N ranks at ZeRO stage S, from sizes alone (zero_estimate).

    build/zero_estimate --params 7.5e9 --ranks 64 --stage 1
    model_state_bytes_per_rank=31406250000
    ...

The model is M modules (default 1) splitting P as evenly as possible. --align
defaults to 1 here (the library's default is 16), so that the only padding is each
module rounded up to a multiple of N: then P = 7.5e9, N = 64, bf16 reproduces the
ZeRO paper's Table 1 (120 GB, 31.4 GB, 16.6 GB, 1.9 GB for stages 0..3).
*/
#include <math.h>     // defines: floor
#include <stdint.h>   // defines: int64_t
#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: strtod, strtol, malloc, free, exit
#include <string.h>   // defines: strcmp
#define ZERO_IMPLEMENTATION
#include "../zero.h"  // defines: zero_estimate, zero_plan, zero_desc, zero_last_error

static void usage(FILE *f) {
    fprintf(f,
        "usage: zero_estimate --params P --ranks N --stage S [--dtype bf16|f16|f32] [--align A] [--modules M]\n"
        "  --params P    parameter count, a whole number; 7.5e9 is accepted\n"
        "  --ranks N     data-parallel ranks (>= 1)\n"
        "  --stage S     ZeRO stage 0..3\n"
        "  --dtype T     parameter (and gradient) dtype (default bf16); AdamW states are fp32\n"
        "  --align A     parameter alignment in elements (default 1: pad modules to N only)\n"
        "  --modules M   modules splitting P as evenly as possible (default 1; stage 2-3 buffers\n"
        "                hold whole modules, so one module makes buffer_bytes look large)\n"
        "prints model_state_bytes_per_rank= first, then the bytes per category, one key=value a line\n");
}

static void bad_arg(const char *opt, const char *msg, const char *val) {
    fprintf(stderr, "zero_estimate: %s %s%s%s%s\n", opt, msg, val ? " (got '" : "", val ? val : "", val ? "')" : "");
    usage(stderr);
    exit(2);
}

// a whole number in [lo, hi]; accepts 7.5e9 (strtod) but not 7.5 or 1e30
static int64_t parse_count(const char *opt, const char *s, int64_t lo, int64_t hi) {
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
        char msg[96];
        snprintf(msg, sizeof msg, "expects a whole number in [%lld, %lld]", (long long)lo, (long long)hi);
        bad_arg(opt, msg, s);
    }
    return (int64_t)v;
}

int main(int argc, char **argv) {
    int64_t params = -1, ranks = -1, stage = -1, align = 1, modules = 1;
    zero_dtype dtype = ZERO_BF16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); return 0; }
        if (strncmp(o, "--", 2) != 0) bad_arg(o, "is not an option", NULL);
        if (i + 1 >= argc) bad_arg(o, "needs a value", NULL);
        const char *v = argv[++i];
        // 2^53: every larger double is a whole number, and the planner's byte counts
        // (16 per parameter) must stay far from int64 overflow
        if (!strcmp(o, "--params")) params = parse_count(o, v, 1, (int64_t)1 << 53);
        else if (!strcmp(o, "--ranks")) ranks = parse_count(o, v, 1, 1 << 20);
        else if (!strcmp(o, "--stage")) stage = parse_count(o, v, 0, 3);
        else if (!strcmp(o, "--align")) align = parse_count(o, v, 1, 1 << 20);
        else if (!strcmp(o, "--modules")) modules = parse_count(o, v, 1, 1 << 24);
        else if (!strcmp(o, "--dtype")) {
            if (!strcmp(v, "bf16")) dtype = ZERO_BF16;
            else if (!strcmp(v, "f16")) dtype = ZERO_F16;
            else if (!strcmp(v, "f32")) dtype = ZERO_F32;
            else bad_arg(o, "expects bf16, f16 or f32", v);
        } else bad_arg(o, "is not an option", NULL);
    }
    if (params < 0) bad_arg("--params", "is required", NULL);
    if (ranks < 0) bad_arg("--ranks", "is required", NULL);
    if (stage < 0) bad_arg("--stage", "is required", NULL);
    if (modules > params) {
        fprintf(stderr, "zero_estimate: --modules %lld is more than --params %lld (a module needs a parameter)\n",
                (long long)modules, (long long)params);
        usage(stderr);
        return 2;
    }

    int64_t *numels = (int64_t *)malloc((size_t)modules * sizeof(int64_t));
    if (!numels) { fprintf(stderr, "zero_estimate: out of memory\n"); return 1; }
    for (int64_t m = 0; m < modules; m++)   // P split as evenly as possible: the first P % M get one more
        numels[m] = params / modules + (m < params % modules ? 1 : 0);

    zero_desc d = {0};
    d.stage = (int)stage;
    d.param_dtype = dtype;
    d.align_elems = align;
    zero_plan plan;
    zero_result r = zero_estimate(&d, (int)ranks, (int)modules, numels, &plan);
    free(numels);
    if (r != ZERO_OK) {
        // the arguments were well-formed, so what the planner refuses (a size it
        // cannot represent, say) is still bad input
        fprintf(stderr, "zero_estimate: %s: %s\n", zero_result_str(r), zero_last_error(NULL));
        return r == ZERO_ERR_OUT_OF_MEMORY ? 1 : 2;
    }

    int64_t cat[ZERO_CAT_NUM] = {0};
    for (int t = 0; t < ZERO_TIER_NUM; t++)
        for (int c = 0; c < ZERO_CAT_NUM; c++) cat[c] += plan.bytes[t][c];
    printf("model_state_bytes_per_rank=%lld\n", (long long)plan.model_state_bytes);
    printf("params_bytes=%lld\n", (long long)cat[ZERO_CAT_PARAMS]);
    printf("grads_bytes=%lld\n", (long long)cat[ZERO_CAT_GRADS]);
    printf("master_bytes=%lld\n", (long long)cat[ZERO_CAT_MASTER]);
    printf("optim_bytes=%lld\n", (long long)cat[ZERO_CAT_OPTIM]);
    printf("buffer_bytes=%lld\n", (long long)cat[ZERO_CAT_BUFFERS]);
    printf("total_bytes=%lld\n", (long long)plan.total_bytes);
    printf("params=%lld\n", (long long)plan.numel);
    printf("params_padded=%lld\n", (long long)plan.numel_padded);
    return 0;
}
