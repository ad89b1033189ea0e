/* tests/bench/bench_activations.c - the activation stash on NVMe against keeping the
   activations in memory: the step time of the same loop with offload_activations =
   ZERO_OFFLOAD_NVME and = ZERO_OFFLOAD_NONE (the stash's memory arena), one rank.

   The loop is a model's shape: L layers; in the forward pass each layer computes on its
   activation (a few passes of float math over it) and puts it in the stash; in the
   backward pass each layer, last first, gets its activation back and computes twice as
   long on it (a backward pass and the recomputation). With NVMe the puts write in the
   background and, from the second step on, each get reads the next layers ahead in the
   recorded order while the current layer computes, so the step time stays near the
   in-memory one when the compute covers the I/O. The first step (which records the
   order) is not timed; the median of the others is. Prints each median, the stash's
   hit rate and wait time, and ends with ratio=<nvme / memory step time> (1.0: the I/O is
   hidden). ZERO_BENCH_TRACE=FILE.json writes the NVMe run's trace: the layers on the
   compute track, "act write" / "act read" on the activations track beside them.
   Env: ZERO_BENCH_DIR (default $TMPDIR or /tmp), ZERO_BENCH_LAYERS (default 12),
   ZERO_BENCH_SLOT_MB (default 4), ZERO_BENCH_STEPS (default 5), ZERO_BENCH_PASSES
   (forward compute passes per layer, default 8). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "bench.h"

static int env_int(const char *name, int dflt) {
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

/* passes of float math over x (a layer's compute); the result depends on every element */
static float compute(float *x, int64_t n, int passes) {
    float acc = 0.0f;
    for (int p = 0; p < passes; p++)
        for (int64_t i = 0; i < n; i++) { x[i] = x[i] * 0.999f + 0.001f * (float)(i & 7); acc += x[i]; }
    return acc;
}

typedef struct { double step_ms; zero_stats st; double check; } result;

static int run(zero_offload_tier tier, const char *dir, int L, int64_t slot, int steps, int passes, const char *trace,
               result *out) {
    zero_desc d = {0};
    zero_ctx *z;
    zero_module m;
    zero_param w;
    zero_act *acts = (zero_act *)calloc((size_t)L, sizeof(zero_act));
    double *times = (double *)calloc((size_t)steps, sizeof(double));
    float *x = (float *)malloc((size_t)slot);
    int64_t n = slot / 4;
    zero_result r;
    d.stage = 0;
    d.param_dtype = ZERO_F32;
    d.optim.type = ZERO_OPTIM_SGD;
    d.optim.lr = 0.01;
    d.offload_activations = tier;
    d.offload.nvme_dirs[0] = dir;
    if (!acts || !times || !x) { fprintf(stderr, "bench_activations: out of memory\n"); return 0; }
    if ((r = zero_create(&z, &d)) != ZERO_OK) { fprintf(stderr, "zero_create: %s\n", zero_last_error(NULL)); return 0; }
    zero_module_desc md = {0};
    md.name = "m";
    zero_param_desc pd = {0};
    pd.name = "w"; pd.ndim = 1; pd.shape[0] = 64;
    r = zero_add_module(z, &md, &m);
    if (r == ZERO_OK) r = zero_add_param(z, m, &pd, &w);
    for (int l = 0; l < L && r == ZERO_OK; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d.in", l);
        r = zero_act_add(z, name, slot, &acts[l]);
    }
    if (r == ZERO_OK && trace) r = zero_trace_enable(z, (int64_t)steps * L * 8 + 1024);
    if (r == ZERO_OK) r = zero_build(z);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 1e-3f;
    out->check = 0.0;
    for (int s = 0; s < steps && r == ZERO_OK; s++) {
        double t0 = bench_now_ms();
        for (int l = 0; l < L && r == ZERO_OK; l++) {
            zero_trace_begin(z, "forward");
            out->check += compute(x, n, passes);
            r = zero_act_put(z, acts[l], x);
            zero_trace_end(z);
        }
        for (int l = L - 1; l >= 0 && r == ZERO_OK; l--) {
            zero_trace_begin(z, "backward");
            r = zero_act_get(z, acts[l], x);
            if (r == ZERO_OK) out->check += compute(x, n, 2 * passes);
            zero_trace_end(z);
        }
        if (r == ZERO_OK) {
            float g[64] = {0};
            memcpy(zero_param_grad(z, w), g, sizeof g);
            r = zero_grads_ready(z, m);
        }
        if (r == ZERO_OK) r = zero_step(z);
        times[s] = bench_now_ms() - t0;
    }
    if (r == ZERO_OK && trace) r = zero_trace_save(z, trace);
    if (r != ZERO_OK) { fprintf(stderr, "bench_activations: %s: %s\n", zero_result_str(r), zero_last_error(z)); zero_destroy(z); return 0; }
    zero_stats_get(z, &out->st);
    out->step_ms = bench_median(times + 1, steps - 1);
    zero_destroy(z);
    free(acts); free(times); free(x);
    return 1;
}

int main(void) {
    const char *t = getenv("TMPDIR"), *dir = getenv("ZERO_BENCH_DIR"), *trace = getenv("ZERO_BENCH_TRACE");
    int L = env_int("ZERO_BENCH_LAYERS", 12), steps = env_int("ZERO_BENCH_STEPS", 5), passes = env_int("ZERO_BENCH_PASSES", 8);
    int64_t slot = (int64_t)env_int("ZERO_BENCH_SLOT_MB", 4) << 20;
    result mem, nvme;
    if (!dir || !*dir) dir = t && *t ? t : "/tmp";
    if (L < 1 || steps < 2 || slot <= 0 || passes < 1) { fprintf(stderr, "bench_activations: bad ZERO_BENCH_* values\n"); return 2; }
    printf("bench_activations: %d layers x %lld MiB activations, %d steps, %d compute passes, files in %s\n", L,
           (long long)(slot >> 20), steps, passes, dir);
    if (!run(ZERO_OFFLOAD_NONE, dir, L, slot, steps, passes, NULL, &mem)) return 1;
    if (!run(ZERO_OFFLOAD_NVME, dir, L, slot, steps, passes, trace, &nvme)) return 1;
    if (mem.check != nvme.check) { fprintf(stderr, "bench_activations: the runs computed different values\n"); return 1; }
    int64_t gets = nvme.st.act_hits + nvme.st.act_misses;
    printf("memory: step %.1f ms (activations in the stash's arena, %lld bytes)\n", mem.step_ms,
           (long long)mem.st.bytes[ZERO_TIER_DEVICE][ZERO_CAT_ACTIVATIONS]);
    printf("nvme:   step %.1f ms (%lld bytes in files, %lld of staging buffers), hit rate %.3f, waited %.1f ms in %d steps\n",
           nvme.step_ms, (long long)nvme.st.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS],
           (long long)nvme.st.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS],
           gets ? (double)nvme.st.act_hits / (double)gets : 0.0, nvme.st.act_wait_ms, steps);
    if (trace) printf("wrote %s\n", trace);
    printf("ratio=%.3f\n", nvme.step_ms / mem.step_ms);
    return 0;
}
