/* tests/cuda_mock/staging.c - the CUDA device's pipelined host <-> device copies on the test
   double (build/mock/cuda_mock_staging, run by tests/test_cuda_mock.sh in both of the
   double's modes; the asynchronous, adversarial one with several ZERO_CUDA_MOCK_SEEDs):
   - the pinned double buffer of zero_param_set_f32, zero_gather_params_f32 and the
     checkpoints (ZERO_STAGING_BYTES, here 256 bytes so that every transfer is many chunks):
     a buffer refilled before its copy ran, or read before its copy landed, gives the
     double's 0xff bytes or the next chunk's values;
   - the ZeRO-Offload step pipelined by sub-group (D2H of the next, the CPU pass of this,
     H2D of the last): a pass that ran before its gradients landed, or params read back
     before their copy, differ from the CPU device's bits;
   - segments out of order in the state (a module's params added around another's: the
     pipeline may not copy across their gaps);
   - the params read on the device right after each step (zero_param_data through zero_copy,
     on the compute stream): with ZeRO-Offload, a compute stream not ordered after the
     pipeline's copies to the device (its own stream, h2d) reads the old values (or the
     double's 0xff bytes); ZERO_CUDA_MOCK_ASYNC=2 holds those copies back so it always would.
   Each case: the values set then gathered, a few steps, the params gathered, zero_save,
   zero_load into a fresh context and gathered again; every result bitwise against the same
   run on the CPU device, and zero_stats_get's bytes equal to the plan's (which counts the
   staging: 2 x ZERO_STAGING_BYTES of host buffers more than the CPU device's plan). */
#define _XOPEN_SOURCE 700
#define ZERO_STAGE_BYTES 256          /* the old name of ZERO_STAGING_BYTES: the alias is tested here */
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include "../fixture.h"
#include <cuda_runtime.h>
#include <ftw.h>
#include <unistd.h>

#define NP 5
#define MAXN 20000
static const int64_t rows[NP] = { 1001, 64, 37, 513, 9 }, cols[NP] = { 7, 0, 11, 0, 0 };

typedef struct run_cfg {
    zero_device_type device;
    int stage, world, steps, interleave;
    zero_dtype dtype;
    zero_offload_tier offload;
    const char *dir;                /* zero_save here, then zero_load into a fresh context */
    int64_t numel;
    float set_back[MAXN], out[MAXN], loaded[MAXN];
    uint64_t after_step[8];         /* rank 0: a hash of every param's bytes on the device after each step */
    int plan_mismatch;
    int64_t host_buffers;           /* the plan's ZERO_TIER_HOST, ZERO_CAT_BUFFERS bytes (rank 0) */
    zero_result r;
    char msg[512];
} run_cfg;

/* every param's bytes as the compute stream sees them now (module by module, fetched), hashed */
static zero_result device_hash(zero_ctx *z, int rank, const zero_param *p, const zero_module *ms, int dt, uint64_t *out) {
    static unsigned char raw[2][MAXN * 4];
    uint64_t h = 1469598103934665603ull;
    zero_result r;
    int mi, i;
    int64_t k;
    unsigned char *b = raw[rank & 1];
    for (mi = 0; mi < 3; mi++)
        if ((r = zero_fetch(z, ms[mi])) != ZERO_OK) return r;
    for (i = 0; i < NP; i++) {
        int64_t bytes = rows[i] * (cols[i] ? cols[i] : 1) * (int64_t)zero_dtype_size((zero_dtype)dt);
        if ((r = zero_copy(z, b, zero_param_data(z, p[i]), bytes)) != ZERO_OK) return r;
        for (k = 0; k < bytes; k++) h = (h ^ b[k]) * 1099511628211ull;
    }
    for (mi = 0; mi < 3; mi++)
        if ((r = zero_release(z, ms[mi])) != ZERO_OK) return r;
    *out = h;
    return ZERO_OK;
}

static float val(int64_t i, int salt) { return (float)((i * 7919 + salt * 104729) % 2001 - 1000) * 1e-3f; }

/* the model: modules a, b (and c frozen); with interleave a's params are added around b's, so
   the segments' order is not the state's */
static zero_result model(zero_ctx *z, int interleave, zero_param *p, zero_module *ms) {
    zero_module a, b, c;
    zero_result r;
    int i;
    static const int mod_plain[NP] = { 0, 0, 1, 1, 2 }, mod_inter[NP] = { 0, 1, 0, 1, 2 };
    if ((r = fx_module(z, "a", 0, &a)) != ZERO_OK || (r = fx_module(z, "b", 0, &b)) != ZERO_OK ||
        (r = fx_module(z, "c", 1, &c)) != ZERO_OK)
        return r;
    ms[0] = a; ms[1] = b; ms[2] = c;
    for (i = 0; i < NP; i++) {
        int mi = interleave ? mod_inter[i] : mod_plain[i];
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        if ((r = fx_param(z, mi == 0 ? a : mi == 1 ? b : c, name, rows[i], cols[i], i == 1, &p[i])) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

static zero_result make(run_cfg *c, zero_comm *comm, zero_ctx **z, zero_param *p, zero_module *ms) {
    zero_desc d;
    zero_result r;
    fx_desc(&d, comm, c->stage, c->dtype, ZERO_OPTIM_ADAMW, 1e-2);
    d.device = c->device;
    d.offload_optimizer = c->offload;
    if ((r = zero_create(z, &d)) != ZERO_OK || (r = model(*z, c->interleave, p, ms)) != ZERO_OK) return r;
    return zero_build(*z);
}

static zero_result rank_fn(zero_comm *comm, int rank, void *user) {
    run_cfg *c = (run_cfg *)user;
    static float buf[2][MAXN];
    float *h = buf[rank];
    zero_ctx *z = NULL;
    zero_param p[NP];
    zero_module ms[3];
    zero_result r;
    int i, step;
    int64_t k;
    if ((r = make(c, comm, &z, p, ms)) != ZERO_OK) goto done;
    {
        zero_plan pl;
        zero_stats st;
        if ((r = zero_plan_get(z, &pl)) != ZERO_OK || (r = zero_stats_get(z, &st)) != ZERO_OK) goto done;
        if (memcmp(pl.bytes, st.bytes, sizeof pl.bytes) != 0) c->plan_mismatch = 1;
        if (rank == 0) c->host_buffers = pl.bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS];
    }
    for (i = 0; i < NP; i++) {
        int64_t n = rows[i] * (cols[i] ? cols[i] : 1);
        for (k = 0; k < n; k++) h[k] = val(k, i + 1);
        if ((r = zero_param_set_f32(z, p[i], h)) != ZERO_OK) goto done;
    }
    if ((r = zero_gather_params_f32(z, h)) != ZERO_OK) goto done;
    if (rank == 0) memcpy(c->set_back, h, sizeof(float) * (size_t)zero_num_params(z));
    for (step = 0; step < c->steps; step++) {
        int mi;
        for (mi = 0; mi < 3; mi++)
            if ((r = zero_fetch(z, ms[mi])) != ZERO_OK) goto done;
        for (mi = 1; mi >= 0; mi--) {      /* the backward: b's grads, then a's */
            for (i = 0; i < NP - 1; i++) {     /* grad = f(step, rank), written through zero_copy */
                unsigned char raw[MAXN * 4];
                int64_t n = rows[i] * (cols[i] ? cols[i] : 1), bytes = n * (int64_t)zero_dtype_size(c->dtype);
                void *g;
                if ((c->interleave ? i % 2 : i / 2) != mi) continue;
                if (!(g = zero_param_grad(z, p[i]))) { r = ZERO_ERR_STATE; goto done; }
                for (k = 0; k < n; k++) h[k] = val(k + step * 31 + rank * 17, i + 5) * 0.1f;
                if ((r = zero_copy(z, raw, g, bytes)) != ZERO_OK) goto done;
                zero_add_f32(raw, c->dtype, h, n);
                if ((r = zero_copy(z, g, raw, bytes)) != ZERO_OK) goto done;
            }
            if ((r = zero_grads_ready(z, ms[mi])) != ZERO_OK) goto done;
        }
        for (mi = 0; mi < 3; mi++)
            if ((r = zero_release(z, ms[mi])) != ZERO_OK) goto done;
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
        {
            uint64_t hv = 0;
            if ((r = device_hash(z, rank, p, ms, c->dtype, &hv)) != ZERO_OK) goto done;
            if (rank == 0 && step < 8) c->after_step[step] = hv;
        }
    }
    if ((r = zero_gather_params_f32(z, h)) != ZERO_OK) goto done;
    if (rank == 0) {
        c->numel = zero_num_params(z);
        memcpy(c->out, h, sizeof(float) * (size_t)c->numel);
    }
    if ((r = zero_save(z, c->dir)) != ZERO_OK) goto done;
    zero_destroy(z);
    z = NULL;
    if ((r = make(c, comm, &z, p, ms)) != ZERO_OK || (r = zero_load(z, c->dir)) != ZERO_OK ||
        (r = zero_gather_params_f32(z, h)) != ZERO_OK)
        goto done;
    if (rank == 0) memcpy(c->loaded, h, sizeof(float) * (size_t)c->numel);
done:
    if (r != ZERO_OK && rank == 0) snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    return r;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static int run(run_cfg *c, const char *tag) {
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/zero_staging_%s_%d_%ld", tmp && *tmp ? tmp : "/tmp", tag, (int)c->device,
             (long)getpid());
    c->dir = dir;
    c->msg[0] = 0;
    c->r = zero_run_local(c->world, rank_fn, c);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    c->dir = NULL;
    return CHECK(c->r == ZERO_OK, "%s device %d: %s (%s)", tag, (int)c->device, zero_result_str(c->r),
                 c->msg[0] ? c->msg : zero_last_error(NULL));
}

static int first_diff(const float *a, const float *b, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) return (int)i;
    return -1;
}

static run_cfg ref, got;

static void one(const char *tag, int stage, int world, zero_dtype dt, zero_offload_tier off, int interleave) {
    int bad;
    memset(&ref, 0, sizeof ref);
    ref.device = ZERO_DEVICE_CPU; ref.stage = stage; ref.world = world; ref.dtype = dt; ref.offload = off;
    ref.interleave = interleave; ref.steps = 3;
    got = ref;
    got.device = ZERO_DEVICE_CUDA;
    if (!run(&ref, tag) || !run(&got, tag)) return;
    CHECK(!got.plan_mismatch && !ref.plan_mismatch, "%s: zero_stats_get's bytes differ from the plan's", tag);
    CHECK(off != ZERO_OFFLOAD_NONE || got.host_buffers - ref.host_buffers == 2 * ZERO_STAGING_BYTES,
          "%s: the CUDA plan's host buffers %lld, the CPU's %lld: want 2 x ZERO_STAGING_BYTES more", tag,
          (long long)got.host_buffers, (long long)ref.host_buffers);
    CHECK(got.numel == ref.numel && got.numel > 0, "%s: numel %lld vs %lld", tag, (long long)got.numel,
          (long long)ref.numel);
    bad = first_diff(ref.set_back, got.set_back, ref.numel);
    CHECK(bad < 0, "%s: set then gathered: element %d is %g on the CUDA device, %g on the CPU", tag, bad,
          bad < 0 ? 0.0 : (double)got.set_back[bad], bad < 0 ? 0.0 : (double)ref.set_back[bad]);
    bad = first_diff(ref.out, got.out, ref.numel);
    CHECK(bad < 0, "%s: after %d steps element %d: cuda %g cpu %g", tag, ref.steps, bad,
          bad < 0 ? 0.0 : (double)got.out[bad], bad < 0 ? 0.0 : (double)ref.out[bad]);
    for (bad = 0; bad < ref.steps && bad < 8; bad++)
        if (!CHECK(got.after_step[bad] == ref.after_step[bad], "%s: the params read on the device right after step %d "
                   "differ from the CPU device's (a read not ordered after the step's copies?)", tag, bad))
            break;
    bad = first_diff(got.out, got.loaded, ref.numel);
    CHECK(bad < 0, "%s: zero_save then zero_load on the CUDA device: element %d is %g, saved %g", tag, bad,
          bad < 0 ? 0.0 : (double)got.loaded[bad], bad < 0 ? 0.0 : (double)got.out[bad]);
}

static void staged_copies(void) {
    one("s0_w1_f32", 0, 1, ZERO_F32, ZERO_OFFLOAD_NONE, 0);
    one("s2_w2_f16_inter", 2, 2, ZERO_F16, ZERO_OFFLOAD_NONE, 1);
    one("s3_w1_bf16", 3, 1, ZERO_BF16, ZERO_OFFLOAD_NONE, 0);
}
static void offload_pipeline(void) {
    one("off_s0_w1_f32_inter", 0, 1, ZERO_F32, ZERO_OFFLOAD_HOST, 1);
    one("off_s1_w2_bf16", 1, 2, ZERO_BF16, ZERO_OFFLOAD_HOST, 0);
    one("off_s2_w1_f16_inter", 2, 1, ZERO_F16, ZERO_OFFLOAD_HOST, 1);
    one("off_s3_w2_bf16_inter", 3, 2, ZERO_BF16, ZERO_OFFLOAD_HOST, 1);
}

int main(void) {
    int n = 0;
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("FAIL staging_device: cudaGetDeviceCount found no (mock) device\n");
        return 1;
    }
    TEST_RUN(staged_copies);
    TEST_RUN(offload_pipeline);
    return test_summary();
}
