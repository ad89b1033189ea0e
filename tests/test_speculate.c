/* test_speculate.c - desc.speculative_step: each module's optimizer step runs on the comm
   thread as soon as its gradient is reduced, and zero_step keeps it or undoes it exactly.

   A model of three modules (a matrix and a no-decay bias each) trains 6 steps with the same
   gradients, once without speculation and once with it; the params must be the same bits:
     - step 3 has a NaN in rank 0's gradient: ZERO_STEP_SKIPPED on every rank, the
       speculated updates undone (speculative_undone_skip);
     - step 4's gradients are 50 times larger, above clip_norm: the step clips, the
       speculated updates are undone and redone clipped (speculative_undone_clip);
     - step 5's lr is changed between the backward pass and zero_step (through the context's
       desc, as a scheduler inside the library would): undone (speculative_undone_changed);
     - steps 1, 2 and 6 stand (speculative_steps 3);
   at stages 0-3, 1-3 ranks, accumulation 1 and 2, for AdamW with bf16 params, SGD with
   momentum and f32 params, Lion with bf16 moments, a window that holds one module
   (speculative_bytes: the others step in zero_step), and the host tier. The undo area is
   planned (the plan equals the bytes allocated) and the refusals name what is missing.
   On the NVMe tier the model's rows are 8 times more (5248 elements) and a block holds 1024
   elements, so blocks become ready one by one during the backward pass (a block with pieces
   of two modules when the second's gradient is final), q8 moments, params on NVMe too (stage 3); a
   failed write in a speculated pass on one rank fails that step with ZERO_ERR_IO on every
   rank, the params as before it. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#define NMOD 3
#define STEPS 6
static const int shape[NMOD][2] = { { 24, 16 }, { 16, 8 }, { 8, 12 } };
#define NVME_ROWS 8     /* the NVMe runs' rows: shape[m][0] x this */
#define NP ((24 * 16 + 24 + 16 * 8 + 16 + 8 * 12 + 8) * NVME_ROWS)
static char nvme_dir[512];

typedef struct run {
    int stage, world, accum, spec, window;
    zero_dtype dt;
    zero_optim_type opt;
    zero_state_dtype sdt;
    zero_offload_tier tier;
    int nvme_params;                /* stage 3: offload_params NVMe too */
    int fault_step;                 /* > 0: rank 0's writes fail from this step's backward pass on */
    zero_result fault_r[4];         /* each rank's zero_step at fault_step */
    int fault_unchanged[4];         /* each rank's params the same bits after it */
    char fault_msg[4][512];
    float out[NP];
    zero_stats st;
    int plan_ok;
    int64_t plan_spec;              /* rank 0's plan.speculative_bytes */
    zero_result step_r[STEPS + 1];
    int trace, traced;              /* trace: enable the trace; traced: rank 0's "speculative update" spans */
} run;

static float gval(int m, int k, int64_t i, int rank, int step, int micro) {
    uint64_t h = (uint64_t)(m * 131 + k * 17 + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i * 7919 + rank * 104729 + step * 31 + micro);
    h ^= h >> 29; h *= 0xbf58476d1ce4e5b9ull; h ^= h >> 32;
    return ((float)(h % 2001) - 1000.0f) * 1e-5f * (step == 4 ? 50.0f : 1.0f);
}

static volatile int fail_writes;   /* rank 0's offload writes (to fail_fd) fail (EIO) while set */
static int fail_fd = -1;
static int64_t fault_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    if (__atomic_load_n(&fail_writes, __ATOMIC_RELAXED) && fd == __atomic_load_n(&fail_fd, __ATOMIC_RELAXED)) return -EIO;
    return zero__os_pwrite(fd, buf, n, off);
}
static int64_t fault_result(int fd, int write, int64_t off, int64_t res) {     /* the io_uring engine's */
    (void)off;
    return write && __atomic_load_n(&fail_writes, __ATOMIC_RELAXED) && fd == __atomic_load_n(&fail_fd, __ATOMIC_RELAXED) ? -EIO : res;
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    run *R = (run *)user;
    const int rows = R->tier == ZERO_OFFLOAD_NVME ? NVME_ROWS : 1;
    zero_desc d;
    zero_ctx *z = NULL;
    zero_module mod[NMOD];
    zero_param P[NMOD][2];
    zero_result r;
    static float bufs[4][24 * 16 * NVME_ROWS];
    float *buf = bufs[rank % 4];
    int m, k, t, a;
    int64_t i;
    fx_desc(&d, comm, R->stage, R->dt, R->opt, 0.01);
    d.accum_steps = R->accum;
    d.clip_norm = 1.0f;
    d.optim.state_dtype = R->sdt;
    d.offload_optimizer = R->tier;
    if (R->tier == ZERO_OFFLOAD_NVME) {
        d.offload.nvme_dirs[0] = nvme_dir;
        d.offload.buffer_bytes = 1;     /* the smallest blocks: 1024 elements */
        if (R->nvme_params) d.offload_params = ZERO_OFFLOAD_NVME;
    }
    d.speculative_step = R->spec;
    /* one module's undo bytes: 24 x 16 + 24 elements, slices of at most that many per rank */
    d.speculative_bytes = R->window ? (int64_t)(24 * 16 + 24) * zero__spec_elem_bytes(&d) : 0;
    if ((r = zero_create(&z, &d)) != ZERO_OK) goto done;
    for (m = 0; m < NMOD; m++) {
        char name[8];
        snprintf(name, sizeof name, "m%d", m);
        if ((r = fx_module(z, name, 0, &mod[m])) != ZERO_OK ||
            (r = fx_param(z, mod[m], "w", shape[m][0] * rows, shape[m][1], 0, &P[m][0])) != ZERO_OK ||
            (r = fx_param(z, mod[m], "b", shape[m][0] * rows, 0, 1, &P[m][1])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    if (R->trace && (r = zero_trace_enable(z, 4096)) != ZERO_OK) goto done;
    {
        zero_plan pl;
        zero_stats st;
        if (zero_plan_get(z, &pl) == ZERO_OK && zero_stats_get(z, &st) == ZERO_OK && rank == 0)
        {
            R->plan_ok = memcmp(pl.bytes, st.bytes, sizeof pl.bytes) == 0;
            R->plan_spec = pl.speculative_bytes;
        }
    }
    for (m = 0; m < NMOD; m++)
        for (k = 0; k < 2; k++) {
            int64_t n = k ? shape[m][0] * rows : (int64_t)shape[m][0] * rows * shape[m][1];
            for (i = 0; i < n; i++) buf[i] = gval(m, k, i, 99, 0, 0) * 100.0f;
            if ((r = zero_param_set_f32(z, P[m][k], buf)) != ZERO_OK) goto done;
        }
    for (t = 1; t <= STEPS; t++) {
        static char before[4][(size_t)NP * 4];
        int64_t pbytes = z->desc.offload_params == ZERO_OFFLOAD_NVME ? 0 : zero__pcat(z->lay.plan.bytes, ZERO_CAT_PARAMS);
        if (t == R->fault_step) {       /* this rank's params now; rank 0's writes fail from here */
            if (pbytes > (int64_t)sizeof before[0]) { r = ZERO_ERR_INVALID_ARG; goto done; }
            memcpy(before[rank % 4], z->arena.param, (size_t)pbytes);
            if ((r = zero_allreduce_f64(z, NULL, 0)) != ZERO_OK) goto done;
            if (rank == 0) {
                __atomic_store_n(&fail_fd, z->tier.nvme->fd[0], __ATOMIC_RELAXED);
                __atomic_store_n(&fail_writes, 1, __ATOMIC_RELAXED);
            }
        }
        for (a = 0; a < R->accum; a++)
            for (m = NMOD - 1; m >= 0; m--) {      /* the backward pass: the last module first */
                if ((r = zero_fetch(z, mod[m])) != ZERO_OK) goto done;
                for (k = 0; k < 2; k++) {
                    int64_t n = k ? shape[m][0] * rows : (int64_t)shape[m][0] * rows * shape[m][1];
                    for (i = 0; i < n; i++) buf[i] = gval(m, k, i, rank, t, a);
                    if (t == 3 && rank == 0 && m == 1 && k == 0 && a == R->accum - 1) buf[5] = NAN;
                    zero_add_f32(zero_param_grad(z, P[m][k]), R->dt, buf, n);
                }
                if ((r = zero_release(z, mod[m])) != ZERO_OK || (r = zero_grads_ready(z, mod[m])) != ZERO_OK) goto done;
            }
        if (t == 5) {       /* a new lr after the backward pass, once the speculated steps ran */
            if ((r = zero__drain(z)) != ZERO_OK) goto done;
            z->desc.optim.lr = 0.005;
        }
        r = zero_step(z);
        if (rank == 0) R->step_r[t] = r;
        if (t == R->fault_step) {       /* failed on every rank, nothing changed: stop here */
            R->fault_r[rank % 4] = r;
            snprintf(R->fault_msg[rank % 4], sizeof R->fault_msg[0], "%s", zero_last_error(z));
            R->fault_unchanged[rank % 4] = memcmp(before[rank % 4], z->arena.param, (size_t)pbytes) == 0;
            if (rank == 0) __atomic_store_n(&fail_writes, 0, __ATOMIC_RELAXED);
            r = ZERO_OK;
            goto done;
        }
        if (r != ZERO_OK && r != ZERO_STEP_SKIPPED) goto done;
    }
    {
        static float other[4][NP];      /* the other ranks' copies (one each) */
        r = zero_gather_params_f32(z, rank == 0 ? R->out : other[rank % 4]);
    }
    if (rank == 0) zero_stats_get(z, &R->st);
    if (R->trace && rank == 0) {        /* the updates on the optimizer track, one per module a kept step */
        struct zero__trace *tr = zero__trace_get(z);
        int64_t e;
        for (e = 0; tr && e < tr->count && e < tr->cap; e++)
            R->traced += tr->ev[e].track == ZERO__TRACK_OPTIM && !strncmp(tr->ev[e].name, "speculative update m", 20);
    }
done:
    if (r != ZERO_OK && rank == 0) fprintf(stderr, "  rank %d: %s: %s\n", rank, zero_result_str(r), zero_last_error(z));
    zero_destroy(z);
    return r;
}

static int train(run *R) {
    zero_result r = R->world == 1 ? rank_main(NULL, 0, R) : zero_run_local(R->world, rank_main, R);
    return CHECK(r == ZERO_OK, "stage %d world %d accum %d spec %d: %s", R->stage, R->world, R->accum, R->spec,
                 zero_result_str(r));
}

static void compare(zero_dtype dt, zero_optim_type opt, zero_state_dtype sdt, zero_offload_tier tier, int window,
                    int stage, int world, int accum) {
    static run off, on;
    memset(&off, 0, sizeof off);
    off.stage = stage; off.world = world; off.accum = accum; off.dt = dt; off.opt = opt; off.sdt = sdt; off.tier = tier;
    on = off;
    on.spec = 1;
    on.window = window;
    if (!train(&off) || !train(&on)) return;
    CHECK(on.plan_ok, "the plan differs from the bytes allocated");
    CHECK(on.plan_spec > 0 && off.plan_spec == 0 && on.plan_spec <= (window ? (int64_t)(24 * 16 + 24) * 14 : on.plan_spec),
          "plan.speculative_bytes %lld (without: %lld)", (long long)on.plan_spec, (long long)off.plan_spec);
    CHECK(on.step_r[3] == ZERO_STEP_SKIPPED && off.step_r[3] == ZERO_STEP_SKIPPED, "step 3 not skipped (%s, %s)",
          zero_result_str(on.step_r[3]), zero_result_str(off.step_r[3]));
    CHECK(memcmp(on.out, off.out, sizeof on.out) == 0, "stage %d world %d accum %d: speculation changed the params", stage,
          world, accum);
    CHECK(on.st.speculative_steps == 3 && on.st.speculative_undone_skip == 1 && on.st.speculative_undone_clip == 1 &&
          on.st.speculative_undone_changed == 1, "stage %d world %d accum %d: speculated %lld, undone: clip %lld skip %lld "
          "changed %lld (want 3, 1, 1, 1)", stage, world, accum, (long long)on.st.speculative_steps,
          (long long)on.st.speculative_undone_clip, (long long)on.st.speculative_undone_skip,
          (long long)on.st.speculative_undone_changed);
    CHECK(on.st.speculative_saved_bytes > 0 && off.st.speculative_steps == 0, "saved %lld bytes; without: %lld steps",
          (long long)on.st.speculative_saved_bytes, (long long)off.st.speculative_steps);
}

/* NVMe: as compare, the params on NVMe too at stage 3 (nvme_params) */
static void compare_nvme(zero_dtype dt, zero_state_dtype sdt, int stage, int world, int accum, int nvme_params) {
    static run off, on;
    memset(&off, 0, sizeof off);
    off.stage = stage; off.world = world; off.accum = accum; off.dt = dt; off.opt = ZERO_OPTIM_ADAMW; off.sdt = sdt;
    off.tier = ZERO_OFFLOAD_NVME; off.nvme_params = nvme_params;
    on = off;
    on.spec = 1;
    if (!train(&off) || !train(&on)) return;
    CHECK(on.plan_ok, "the plan differs from the bytes allocated");
    CHECK(on.plan_spec == 0, "NVMe: plan.speculative_bytes %lld (the other slot is the undo)", (long long)on.plan_spec);
    CHECK(on.step_r[3] == ZERO_STEP_SKIPPED && off.step_r[3] == ZERO_STEP_SKIPPED, "step 3 not skipped (%s, %s)",
          zero_result_str(on.step_r[3]), zero_result_str(off.step_r[3]));
    CHECK(memcmp(on.out, off.out, sizeof on.out) == 0, "nvme stage %d world %d accum %d: speculation changed the params",
          stage, world, accum);
    CHECK(on.st.speculative_steps == 3 && on.st.speculative_undone_skip == 1 && on.st.speculative_undone_clip == 1 &&
          on.st.speculative_undone_changed == 1, "nvme stage %d world %d accum %d: speculated %lld, undone: clip %lld skip "
          "%lld changed %lld (want 3, 1, 1, 1)", stage, world, accum, (long long)on.st.speculative_steps,
          (long long)on.st.speculative_undone_clip, (long long)on.st.speculative_undone_skip,
          (long long)on.st.speculative_undone_changed);
    CHECK(on.st.speculative_saved_bytes > 0 && on.st.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] ==
          off.st.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM], "saved %lld bytes (the blocks written); the tier's bytes %lld vs %lld",
          (long long)on.st.speculative_saved_bytes, (long long)on.st.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM],
          (long long)off.st.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM]);
}

/* rank 0's offload writes fail from step 2's backward pass: its speculated passes fail, and
   zero_step fails on both ranks (ZERO_ERR_IO), each rank's params as before the step */
static void nvme_fault(void) {
    static run R;
    int k;
    memset(&R, 0, sizeof R);
    R.stage = 2; R.world = 2; R.accum = 1; R.dt = ZERO_BF16; R.opt = ZERO_OPTIM_ADAMW; R.tier = ZERO_OFFLOAD_NVME;
    R.spec = 1; R.fault_step = 2;
    zero__fops.pwrite = fault_pwrite;
    zero__fops.io_result = fault_result;
    (void)train(&R);
    zero__fops.pwrite = zero__os_pwrite;
    zero__fops.io_result = NULL;
    for (k = 0; k < 2; k++) {
        CHECK(R.fault_r[k] == ZERO_ERR_IO, "rank %d: zero_step gave %s (want ZERO_ERR_IO): %s", k,
              zero_result_str(R.fault_r[k]), R.fault_msg[k]);
        CHECK(R.fault_unchanged[k], "rank %d: the params changed in the failed step", k);
    }
    CHECK(strstr(R.fault_msg[0], "speculative step") && strstr(R.fault_msg[0], "write"), "rank 0: %s", R.fault_msg[0]);
    CHECK(strstr(R.fault_msg[1], "another rank"), "rank 1: %s", R.fault_msg[1]);
}

static void refusals(void) {
    static const struct { int what; const char *msg; } cases[] = {
        { 0, "speculative_step runs, for now, with the CPU device" },
        { 2, "speculative_step runs, for now, with fp32 or bf16 moments (q8: on the NVMe tier alone" },
        { 3, "speculative_step runs, for now, with AdamW, SGD or Lion" },
        { 4, "speculative_step is 2 (0 or 1)" },
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zero_desc d;
        zero_ctx *z = NULL;
        zero_result r;
        memset(&d, 0, sizeof d);
        d.speculative_step = 1;
        switch (cases[i].what) {
        case 0: d.device = ZERO_DEVICE_EMU; break;
        case 2: d.optim.state_dtype = ZERO_STATE_Q8; break;
        case 3: d.optim.type = ZERO_OPTIM_MUON; break;
        default: d.speculative_step = 2; break;
        }
        r = zero_create(&z, &d);
        CHECK(r != ZERO_OK && strstr(zero_last_error(NULL), cases[i].msg), "case %d: %s: %s", cases[i].what,
              zero_result_str(r), zero_last_error(NULL));
        zero_destroy(z);
    }
}

int main(void) {
    int stage, world, accum;
    test_init();
    TEST_RUN(refusals);
    for (stage = 0; stage <= 3; stage++)
        for (world = 1; world <= 3; world++)
            for (accum = 1; accum <= 2; accum++) {
                test_begin("adamw_bf16_stage%d_world%d_accum%d", stage, world, accum);
                compare(ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_STATE_DEFAULT, ZERO_OFFLOAD_NONE, 0, stage, world, accum);
                test_end();
            }
    test_begin("sgd_f32_stage2_world3"); compare(ZERO_F32, ZERO_OPTIM_SGD, ZERO_STATE_DEFAULT, ZERO_OFFLOAD_NONE, 0, 2, 3, 1); test_end();
    test_begin("lion_bf16_moments_stage1_world2");
    compare(ZERO_BF16, ZERO_OPTIM_LION, ZERO_STATE_BF16, ZERO_OFFLOAD_NONE, 0, 1, 2, 1); test_end();
    test_begin("window_one_module_stage3_world2");
    compare(ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_STATE_DEFAULT, ZERO_OFFLOAD_NONE, 1, 3, 2, 1); test_end();
    {   /* the trace: a "speculative update <module>" span on the optimizer track per module and
           step, the undone steps' (skipped, clipped, changed) too: 3 modules x 6 steps */
        static run tr;
        memset(&tr, 0, sizeof tr);
        tr.stage = 1; tr.world = 2; tr.accum = 1; tr.dt = ZERO_BF16; tr.opt = ZERO_OPTIM_ADAMW; tr.spec = 1; tr.trace = 1;
        test_begin("trace_spans");
        if (train(&tr)) CHECK(tr.traced == 3 * STEPS, "%d speculative update spans, want %d", tr.traced, 3 * STEPS);
        test_end();
    }
    test_begin("host_tier_stage2_world2");
    compare(ZERO_BF16, ZERO_OPTIM_ADAMW, ZERO_STATE_DEFAULT, ZERO_OFFLOAD_HOST, 0, 2, 2, 2); test_end();
    {
        const char *tmp = getenv("TMPDIR");
        snprintf(nvme_dir, sizeof nvme_dir, "%s/zero_spec_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(nvme_dir)) {
            for (stage = 1; stage <= 3; stage++)
                for (world = 1; world <= 3; world++)
                    for (accum = 1; accum <= 2; accum++) {
                        test_begin("nvme_bf16_stage%d_world%d_accum%d", stage, world, accum);
                        compare_nvme(ZERO_BF16, ZERO_STATE_DEFAULT, stage, world, accum, 0);
                        test_end();
                    }
            test_begin("nvme_f32_stage2_world2"); compare_nvme(ZERO_F32, ZERO_STATE_DEFAULT, 2, 2, 1, 0); test_end();
            /* q8 blocks are 4096 elements: two at one rank, one at two */
            test_begin("nvme_q8_stage2_world2"); compare_nvme(ZERO_BF16, ZERO_STATE_Q8, 2, 2, 1, 0); test_end();
            test_begin("nvme_q8_stage1_world1_accum2"); compare_nvme(ZERO_F32, ZERO_STATE_Q8, 1, 1, 2, 0); test_end();
            test_begin("nvme_params_stage3_world2"); compare_nvme(ZERO_BF16, ZERO_STATE_DEFAULT, 3, 2, 1, 1); test_end();
            test_begin("nvme_params_stage3_world3_accum2"); compare_nvme(ZERO_F32, ZERO_STATE_DEFAULT, 3, 3, 2, 1); test_end();
            TEST_RUN(nvme_fault);
            rmdir(nvme_dir);
        } else {
            test_begin("nvme"); CHECK(0, "mkdtemp %s failed", nvme_dir); test_end();
        }
    }
    return test_summary();
}
