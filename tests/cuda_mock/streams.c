/* tests/cuda_mock/streams.c - zero.h's CUDA device with a non-blocking desc.cuda_stream
   (build/mock/cuda_mock_streams, run by tests/test_cuda_mock.sh, in the double's
   asynchronous mode too: ZERO_CUDA_MOCK_ASYNC=1). PyTorch's side streams are created
   cudaStreamNonBlocking: such a stream does not wait for the legacy default stream, so
   every write zero.h makes to an arena (zeroing it, its optimizer tables) must be ordered
   with desc.cuda_stream, not left on the legacy stream.
   - set_get: zero_param_set_f32 then zero_gather_params_f32 give back the values set
     (on the mock's async mode a cudaMemset left on the legacy stream zeroes them after);
   - train_vs_cpu: a few steps at stages 0-3, worlds 1 and 2, each rank on its own
     non-blocking stream, bitwise equal to the CPU device. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"
#include "../test.h"
#include "../fixture.h"
#include <cuda_runtime.h>

#define NP 3      /* params */
#define MAXN 40000
static const int64_t sizes[NP] = { 33000, 700, 5 };

typedef struct run_cfg {
    zero_device_type device;
    int stage, world, steps, nonblocking;
    zero_dtype dtype;
    float out[MAXN];
    int64_t numel;
    float set_back[MAXN];           /* zero_gather_params_f32 right after the set */
    zero_result r;
    char msg[512];
} run_cfg;

static float val(int64_t i, int salt) { return (float)((i * 7919 + salt * 104729) % 2001 - 1000) * 1e-3f; }

static zero_result rank_fn(zero_comm *comm, int rank, void *user) {
    run_cfg *c = (run_cfg *)user;
    static float buf[2][MAXN];          /* per rank, host */
    float *h = buf[rank];
    cudaStream_t st = NULL;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module m;
    zero_param p[NP];
    zero_result r;
    int i, step;
    int64_t k;
    if (c->device == ZERO_DEVICE_CUDA && c->nonblocking &&
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
        return ZERO_ERR_DEVICE;
    fx_desc(&d, comm, c->stage, c->dtype, ZERO_OPTIM_ADAMW, 1e-2);
    d.device = c->device;
    d.cuda_stream = (void *)st;
    if ((r = zero_create(&z, &d)) != ZERO_OK || (r = fx_module(z, "m", 0, &m)) != ZERO_OK) goto done;
    for (i = 0; i < NP; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        if ((r = fx_param(z, m, name, sizes[i], 0, i == 2, &p[i])) != ZERO_OK) goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    for (i = 0; i < NP; i++) {
        for (k = 0; k < sizes[i]; k++) h[k] = val(k, i + 1);
        if ((r = zero_param_set_f32(z, p[i], h)) != ZERO_OK) goto done;
    }
    if ((r = zero_gather_params_f32(z, h)) != ZERO_OK) goto done;
    if (rank == 0) memcpy(c->set_back, h, sizeof(float) * (size_t)zero_num_params(z));
    for (step = 0; step < c->steps; step++) {
        if ((r = zero_fetch(z, m)) != ZERO_OK) goto done;
        for (i = 0; i < NP; i++) {     /* grad = f(step, rank): written through zero_copy */
            unsigned char raw[MAXN * 4];
            int64_t bytes = sizes[i] * (int64_t)zero_dtype_size(c->dtype);
            for (k = 0; k < sizes[i]; k++) h[k] = val(k + step * 31 + rank * 17, i + 5) * 0.1f;
            if ((r = zero_copy(z, raw, zero_param_grad(z, p[i]), bytes)) != ZERO_OK) goto done;
            zero_add_f32(raw, c->dtype, h, sizes[i]);
            if ((r = zero_copy(z, zero_param_grad(z, p[i]), raw, bytes)) != ZERO_OK) goto done;
        }
        if ((r = zero_release(z, m)) != ZERO_OK || (r = zero_grads_ready(z, m)) != ZERO_OK) goto done;
        r = zero_step(z);
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    if ((r = zero_gather_params_f32(z, h)) != ZERO_OK) goto done;
    if (rank == 0) {
        c->numel = zero_num_params(z);
        memcpy(c->out, h, sizeof(float) * (size_t)c->numel);
    }
done:
    if (r != ZERO_OK && rank == 0) snprintf(c->msg, sizeof c->msg, "%s", zero_last_error(z));
    zero_destroy(z);
    if (st) cudaStreamDestroy(st);
    return r;
}

static int run(run_cfg *c) {
    c->msg[0] = 0;
    c->r = zero_run_local(c->world, rank_fn, c);
    return CHECK(c->r == ZERO_OK, "device %d stage %d world %d: %s (%s)", (int)c->device, c->stage, c->world,
                 zero_result_str(c->r), c->msg[0] ? c->msg : zero_last_error(NULL));
}

static int first_diff(const float *a, const float *b, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) return (int)i;
    return -1;
}

static run_cfg ref, got;

static void set_get(void) {
    int64_t i, n = 0;
    int bad, s;
    for (i = 0; i < NP; i++) n += sizes[i];
    for (s = 0; s <= 3; s++) {
        memset(&got, 0, sizeof got);
        got.device = ZERO_DEVICE_CUDA; got.stage = s; got.world = 1; got.dtype = ZERO_F32; got.nonblocking = 1;
        if (!run(&got)) return;
        CHECK(got.numel == n, "numel %lld, want %lld", (long long)got.numel, (long long)n);
        ref = got;
        ref.device = ZERO_DEVICE_CPU;
        if (!run(&ref)) return;
        bad = first_diff(ref.set_back, got.set_back, n);
        CHECK(bad < 0, "stage %d: zero_param_set_f32 then zero_gather_params_f32 on a non-blocking stream: element %d "
              "is %g, set %g (an arena zeroed after it was written?)", s, bad,
              bad < 0 ? 0.0 : (double)got.set_back[bad], bad < 0 ? 0.0 : (double)ref.set_back[bad]);
    }
}

static void train_vs_cpu(void) {
    static const int worlds[2] = { 1, 2 };
    int s, w, bad;
    for (w = 0; w < 2; w++)
        for (s = 0; s <= 3; s++) {
            memset(&ref, 0, sizeof ref);
            ref.device = ZERO_DEVICE_CPU; ref.stage = s; ref.world = worlds[w]; ref.steps = 3;
            ref.dtype = s == 1 ? ZERO_F16 : ZERO_BF16;
            got = ref;
            got.device = ZERO_DEVICE_CUDA;
            got.nonblocking = 1;
            if (!run(&ref) || !run(&got)) return;
            bad = first_diff(ref.set_back, got.set_back, ref.numel);
            CHECK(bad < 0, "stage %d world %d: the values set differ at %d: cpu %g cuda %g", s, worlds[w], bad,
                  bad < 0 ? 0.0 : (double)ref.set_back[bad], bad < 0 ? 0.0 : (double)got.set_back[bad]);
            bad = first_diff(ref.out, got.out, ref.numel);
            CHECK(ref.numel == got.numel && bad < 0, "stage %d world %d: after %d steps element %d: cpu %g cuda %g", s,
                  worlds[w], ref.steps, bad, bad < 0 ? 0.0 : (double)ref.out[bad], bad < 0 ? 0.0 : (double)got.out[bad]);
        }
}

int main(void) {
    int n = 0;
    test_init();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("FAIL streams_device: cudaGetDeviceCount found no (mock) device\n");
        return 1;
    }
    TEST_RUN(set_get);
    TEST_RUN(train_vs_cpu);
    return test_summary();
}
