/* test_desc_json.c - zero_desc_from_json: DeepSpeed configs into a zero_desc.

   Groups:
     config_*      each file of tests/data/deepspeed/: every desc field it sets, the exact report, and a
                   run of the desc (zero_create, a tiny model, zero_build, two steps) on the
                   CPU device: a world of one, or of hpz ranks for ZeRO++'s secondary partition
     map_*         single mappings and lines: static loss scale, zeros zero.h reads as its
                   default, torch_adam, the old forms, NVMe paths decoded in place, nulls
     bad_*         malformed JSON and values DeepSpeed refuses: ZERO_ERR_INVALID_ARG, the exact
                   "line L, column C" sentence (zero_last_error(NULL) and report), *out and the
                   text untouched, *unhonoured 0
     report_*      the report's contract: whole lines while they fit, the count, NULL
     robust_*      every prefix of every config, and seeded mutations: OK or INVALID_ARG, never
                   a crash (run it under -fsanitize=address,undefined)

   The configs are the .json files of tests/data/deepspeed (CONFIG_DIR; run from the repository root),
   written from DeepSpeed's documented schema and examples: ZeRO-2 with CPU offload and fp16,
   ZeRO-3 with NVMe offload and bf16, ZeRO-1 with Adam's L2 decay, ZeRO-0 with SGD, ZeRO++,
   the HF Trainer's "auto" values, and the old forms (cpu_offload, stage true). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"

#include <locale.h>
#include <sys/stat.h>

#ifndef CONFIG_DIR
#define CONFIG_DIR "tests/data/deepspeed"
#endif

static char text[1 << 17];      /* the JSON handed over: zero_desc_from_json may write into it */
static char saved[1 << 17];     /* a copy, to see that it did not */
static char rep[16384];
static int lines;

/* ---- helpers ---------------------------------------------------------------------------- */
static int load(const char *name) {
    char path[512];
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", CONFIG_DIR, name);
    f = fopen(path, "rb");
    if (!CHECK(f != NULL, "cannot open %s", path)) return 0;
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    return 1;
}
static zero_result parse_text(zero_desc *d) {
    memset(d, 0x5A, sizeof *d);
    memset(rep, 0x7E, sizeof rep);
    lines = -1;
    return zero_desc_from_json(text, d, rep, sizeof rep, &lines);
}
static zero_result parse(const char *json, zero_desc *d) {
    snprintf(text, sizeof text, "%s", json);
    return parse_text(d);
}
static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}
/* the report is exactly these lines, in this order */
static void check_report(const char *const *want, int n) {
    char all[16384];
    size_t len = 0;
    int i;
    all[0] = 0;
    for (i = 0; i < n; i++) len += (size_t)snprintf(all + len, sizeof all - len, "%s\n", want[i]);
    CHECK(lines == n, "%d report lines, expected %d:\n%s", lines, n, rep);
    if (strcmp(rep, all) != 0) {
        const char *a = rep, *b = all;
        while (*a && *a == *b) { a++; b++; }
        CHECK(0, "report differs at byte %d:\n  got:  %.200s\n  want: %.200s", (int)(a - rep), a, b);
    }
}
/* the desc has exactly these values: every field compared (pointers by their strings) */
static void check_desc(const zero_desc *g, const zero_desc *w) {
    int i;
#define F(f, fmt, cast) CHECK(g->f == w->f, #f " is " fmt ", expected " fmt, (cast)g->f, (cast)w->f)
#define FP(f) CHECK(g->f == w->f, #f " is %s, expected %s", g->f ? "set" : "NULL", w->f ? "set" : "NULL")
    F(comm, "%p", const void *); F(device, "%d", int); F(cuda_stream, "%p", const void *); F(stage, "%d", int);
    F(param_dtype, "%d", int); F(grad_dtype, "%d", int); F(grad_accum_dtype, "%d", int); F(accum_steps, "%d", int);
    F(bucket_bytes, "%lld", long long); F(align_elems, "%lld", long long); F(max_live_bytes, "%lld", long long);
    F(prefetch_bytes, "%lld", long long); F(persist_bytes, "%lld", long long); F(reuse_distance, "%d", int);
    F(optim.type, "%d", int); F(optim.lr, "%.17g", double); F(optim.beta1, "%.17g", double);
    F(optim.beta2, "%.17g", double); F(optim.eps, "%.17g", double); F(optim.weight_decay, "%.17g", double);
    F(optim.momentum, "%.17g", double); F(optim.dampening, "%.17g", double); F(optim.nesterov, "%d", int);
    F(clip_norm, "%.9g", double); F(loss_scale, "%.9g", double); F(loss_scale_init, "%.9g", double);
    F(loss_scale_window, "%d", int); F(loss_scale_min, "%.9g", double); F(timeout_ms, "%d", int);
    F(cpu_threads, "%d", int); F(device_bytes_cap, "%lld", long long); F(host_bytes_cap, "%lld", long long);
    F(offload_optimizer, "%d", int); F(offload_params, "%d", int); F(offload_activations, "%d", int);
    F(act_live_bytes, "%lld", long long); F(offload.buffer_bytes, "%lld", long long);
    F(offload.queue_depth, "%d", int); FP(allocator.alloc); FP(allocator.free);
    F(allocator.user_data, "%p", const void *); FP(logger.func);
    F(logger.user_data, "%p", const void *); F(logger.level, "%d", int); F(reduce_mode, "%d", int);
    F(qwz, "%d", int); F(qgz, "%d", int); F(hpz, "%d", int); F(quant_block, "%d", int);
#undef F
#undef FP
    for (i = 0; i < ZERO_MAX_NVME_DIRS; i++) {
        const char *a = g->offload.nvme_dirs[i], *b = w->offload.nvme_dirs[i];
        CHECK((!a && !b) || (a && b && !strcmp(a, b)), "offload.nvme_dirs[%d] is %s, expected %s", i, a ? a : "NULL",
              b ? b : "NULL");
    }
}
static zero_desc zeroed(void) {
    zero_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

/* ---- a run of the desc: zero_create, a tiny model, zero_build, two steps ------------------ */
static zero_result tiny_train(zero_comm *comm, int rank, void *user) {
    zero_desc d = *(const zero_desc *)user;
    zero_ctx *z = NULL;
    zero_module m[2];
    zero_param p[2];
    zero_result r;
    zero_desc q;
    float init[40], g[40];
    int i, k, s, mb;
    (void)rank;
    d.comm = comm;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (i = 0; i < 2; i++) {
        zero_module_desc md;
        zero_param_desc pd;
        memset(&md, 0, sizeof md);
        memset(&pd, 0, sizeof pd);
        md.name = i ? "m1" : "m0";
        pd.name = "w";
        pd.ndim = 1;
        pd.shape[0] = 40;
        if ((r = zero_add_module(z, &md, &m[i])) != ZERO_OK || (r = zero_add_param(z, m[i], &pd, &p[i])) != ZERO_OK)
            goto done;
    }
    if ((r = zero_build(z)) != ZERO_OK) goto done;
    q = zero_query_desc(z);
    for (k = 0; k < 40; k++) init[k] = 0.01f * (float)k - 0.2f;
    for (i = 0; i < 2; i++)
        if ((r = zero_param_set_f32(z, p[i], init)) != ZERO_OK) goto done;
    for (s = 0; s < 2; s++) {
        for (mb = 0; mb < q.accum_steps; mb++) {
            for (i = 0; i < 2; i++)
                if ((r = zero_fetch(z, m[i])) != ZERO_OK || (r = zero_release(z, m[i])) != ZERO_OK) goto done;
            for (i = 1; i >= 0; i--) {
                void *grad;
                if ((r = zero_fetch(z, m[i])) != ZERO_OK) goto done;
                grad = zero_param_grad(z, p[i]);
                if (!grad) { r = ZERO_ERR_STATE; goto done; }
                for (k = 0; k < 40; k++) g[k] = 0.001f * (float)(k + 1) * zero_loss_scale(z);
                zero_add_f32(grad, q.grad_dtype, g, 40);
                if ((r = zero_release(z, m[i])) != ZERO_OK || (r = zero_grads_ready(z, m[i])) != ZERO_OK) goto done;
            }
        }
        if ((r = zero_step(z)) != ZERO_OK) goto done;      /* a skipped step fails the run too */
    }
done:
    zero_destroy(z);
    return r;
}
/* the desc runs: NVMe paths point at a fresh directory for the run (the config's is a
   machine's), hpz runs on hpz ranks of a local group */
static void check_runs(const zero_desc *d0) {
    zero_desc d = *d0;
    char dir[64];
    zero_result r;
    int world = d.hpz > 1 ? d.hpz : 1;
    snprintf(dir, sizeof dir, "/tmp/dsjson_nvme_XXXXXX");
    if (d.offload_optimizer == ZERO_OFFLOAD_NVME) {
        if (!CHECK(mkdtemp(dir) != NULL, "mkdtemp failed")) return;
        d.offload.nvme_dirs[0] = dir;
    }
    r = world == 1 ? tiny_train(NULL, 0, &d) : zero_run_local(world, tiny_train, &d);
    CHECK(r == ZERO_OK, "the desc does not run (world %d): %s: %s", world, zero_result_str(r), zero_last_error(NULL));
    if (d.offload_optimizer == ZERO_OFFLOAD_NVME) CHECK(rmdir(dir) == 0, "the NVMe directory is not empty after the run");
}

/* ---- the config files -------------------------------------------------------------------- */
static void config_zero2_cpu_offload_fp16(void) {
    static const char *const want[] = {
        "train_batch_size=64: not honoured: the batch is your loop's: DeepSpeed's is micro-batch x "
        "gradient_accumulation_steps x world size (here with a world size of 4)",
        "train_micro_batch_size_per_gpu=8: not honoured: the micro-batch is your loop's: zero.h sees only the gradients "
        "you add",
        "steps_per_print=100: not honoured: zero.h prints nothing: print from your loop",
        "scheduler={\"type\":\"WarmupDecayLR\",\"params\":{\"warmup_min_lr...: not honoured: zero.h has no learning-rate "
        "schedule: optim.lr stays what it is at zero_create",
        "fp16.hysteresis=2: not honoured: zero.h lowers the loss scale at the first overflow (hysteresis 1)",
        "zero_optimization.allgather_bucket_size=2e8: not honoured: zero.h gathers the updated params module by module, "
        "with no bucket",
        "zero_optimization.round_robin_gradients=true: not honoured: zero.h copies no gradients to the host round robin"};
    zero_desc d, w = zeroed();
    if (!load("zero2_cpu_offload_fp16.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 2;
    w.param_dtype = ZERO_F16;
    w.accum_steps = 2;
    w.clip_norm = 1.0f;
    w.optim.type = ZERO_OPTIM_ADAMW;
    w.optim.lr = 3e-4;
    w.optim.beta1 = 0.9;
    w.optim.beta2 = 0.95;
    w.optim.eps = 1e-8;
    w.optim.weight_decay = 0.1;
    w.loss_scale_init = 4096.0f;            /* 2^12 */
    w.loss_scale_window = 500;
    w.loss_scale_min = 1.0f;
    w.offload_optimizer = ZERO_OFFLOAD_HOST;
    w.bucket_bytes = 400000000;             /* 2e8 fp16 elements */
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}
static void config_zero3_nvme_bf16(void) {
    static const char *const want[] = {
        "train_micro_batch_size_per_gpu=4: not honoured: the micro-batch is your loop's: zero.h sees only the gradients "
        "you add",
        "zero_optimization.stage3_max_live_parameters=1e9: not honoured: zero.h allocates max_live_bytes as its gather "
        "arena at zero_build, where DeepSpeed's is a limit: left at zero.h's default (the largest module)",
        "zero_optimization.stage3_max_reuse_distance=1e9: not honoured: zero.h's reuse_distance counts fetches, not "
        "elements: left at 0",
        "zero_optimization.sub_group_size=1e9: not honoured: zero.h steps the rank's whole shard in one pass (NVMe: "
        "through offload.buffer_bytes of buffers)",
        "zero_optimization.offload_optimizer.buffer_count=4: not honoured: zero.h streams the NVMe tier through three "
        "host buffers sharing offload.buffer_bytes (default 64 MiB)",
        "zero_optimization.offload_param.buffer_count=5: not honoured: zero.h streams the NVMe tier through three host "
        "buffers sharing offload.buffer_bytes (default 64 MiB)",
        "zero_optimization.offload_param.buffer_size=1e8: not honoured: zero.h streams the NVMe tier through three host "
        "buffers sharing offload.buffer_bytes (default 64 MiB)",
        "zero_optimization.offload_param.max_in_cpu=1e9: not honoured: zero.h keeps no params in host memory but one "
        "block of the NVMe tier's buffers",
        "aio.thread_count=1: not honoured: zero.h's NVMe I/O runs on io_uring or on offload.queue_depth threads"};
    zero_desc d, w = zeroed();
    if (!load("zero3_nvme_bf16.json")) return;
    memcpy(saved, text, sizeof text);
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 3;
    w.param_dtype = ZERO_BF16;
    w.accum_steps = 8;
    w.clip_norm = 1.0f;                     /* absent: DeepSpeed's default */
    w.optim.type = ZERO_OPTIM_ADAMW;        /* "Adam": AdamW unless adam_w_mode is false */
    w.optim.lr = 1e-4;
    w.optim.beta1 = 0.9;
    w.optim.beta2 = 0.999;
    w.optim.eps = 1e-8;
    w.optim.weight_decay = 0.01;
    w.bucket_bytes = 20000000;              /* 1e7 bf16 elements */
    w.prefetch_bytes = 20000000;
    w.persist_bytes = 200000;
    w.offload_optimizer = ZERO_OFFLOAD_NVME;
    w.offload_params = ZERO_OFFLOAD_NVME;
    w.offload.nvme_dirs[0] = "/local_nvme";
    w.offload.queue_depth = 8;
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    /* the path points into the text, decoded in place: the text changed there and only there */
    {
        const char *p = d.offload.nvme_dirs[0];
        size_t at = (size_t)(p - text), i, diff = 0;
        CHECK(p >= text && p < text + sizeof text, "nvme_dirs[0] does not point into the text");
        for (i = 0; i < sizeof text; i++)
            if (text[i] != saved[i] && (i < at || i > at + strlen("/local_nvme"))) diff++;
        CHECK(diff == 0, "the text changed in %d bytes outside the path", (int)diff);
    }
    check_runs(&d);
}
static void config_zero1_fp16_adam_l2(void) {
    static const char *const want[] = {
        "train_batch_size=32: not honoured: the batch is your loop's: DeepSpeed's is micro-batch x "
        "gradient_accumulation_steps x world size",
        "optimizer.params.weight_decay=3e-7: not honoured: with adam_w_mode false DeepSpeed's Adam adds weight_decay x "
        "param to the gradient (L2); zero.h's AdamW decays decoupled",
        "optimizer.params.adam_w_mode=false: not honoured: zero.h has only decoupled weight decay (AdamW): weight_decay "
        "is not applied"};
    zero_desc d, w = zeroed();
    if (!load("zero1_fp16_adam_l2.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 1;
    w.param_dtype = ZERO_F16;
    w.accum_steps = 4;
    w.clip_norm = 0.5f;
    w.optim.type = ZERO_OPTIM_ADAMW;
    w.optim.lr = 0.001;
    w.optim.beta1 = 0.8;
    w.optim.beta2 = 0.999;
    w.optim.eps = 1e-8;                     /* weight_decay: L2, not applied */
    w.loss_scale_init = 65536.0f;
    w.loss_scale_window = 1000;
    w.loss_scale_min = 1.0f;
    w.bucket_bytes = 1000000000;            /* 5e8 fp16 elements */
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}
static void config_zero0_bf16_sgd(void) {
    static const char *const want[] = {
        "train_micro_batch_size_per_gpu=16: not honoured: the micro-batch is your loop's: zero.h sees only the gradients "
        "you add",
        "tensorboard={\"enabled\":true,\"output_path\":\"runs/\",\"job_name\"...: not honoured: zero.h writes no monitor "
        "logs",
        "wall_clock_breakdown=true: not honoured: zero.h's timeline is zero_trace_enable (ON TRACING)"};
    zero_desc d, w = zeroed();
    if (!load("zero0_bf16_sgd.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.param_dtype = ZERO_BF16;
    w.grad_accum_dtype = ZERO_F32;
    w.clip_norm = 1.0f;
    w.optim.type = ZERO_OPTIM_SGD;
    w.optim.lr = 0.05;
    w.optim.momentum = 0.9;
    w.optim.weight_decay = 1e-4;
    w.optim.nesterov = 1;
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}
static void config_zeropp_stage3(void) {
    static const char *const want[] = {
        "train_batch_size=256: not honoured: the batch is your loop's: DeepSpeed's is micro-batch x "
        "gradient_accumulation_steps x world size (here with a world size of 16)",
        "train_micro_batch_size_per_gpu=2: not honoured: the micro-batch is your loop's: zero.h sees only the gradients "
        "you add"};
    zero_desc d, w = zeroed();
    if (!load("zeropp_stage3.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 3;
    w.param_dtype = ZERO_BF16;
    w.accum_steps = 8;
    w.clip_norm = 1.0f;
    w.optim.type = ZERO_OPTIM_ADAMW;
    w.optim.lr = 2e-4;
    w.optim.beta1 = 0.9;
    w.optim.beta2 = 0.95;
    w.optim.weight_decay = 0.1;
    w.bucket_bytes = 20000000;
    w.qwz = 1;
    w.qgz = 4;                              /* DeepSpeed's qgZ is int4 */
    w.hpz = 8;
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);                         /* on 8 ranks: hpz must divide the world */
}
static void config_hf_trainer_auto_zero3(void) {
    static const char *const want[] = {
        "fp16.enabled=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: param_dtype left at zero.h's "
        "default (bf16)",
        "bf16.enabled=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: param_dtype left at zero.h's "
        "default (bf16)",
        "optimizer.params.lr=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at zero.h's default "
        "(1e-3)",
        "optimizer.params.betas=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at zero.h's "
        "default (0.9, 0.999)",
        "optimizer.params.eps=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at zero.h's default "
        "(1e-8)",
        "optimizer.params.weight_decay=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at "
        "zero.h's default (0)",
        "scheduler={\"type\":\"WarmupLR\",\"params\":{\"warmup_min_lr\":\"au...: not honoured: zero.h has no "
        "learning-rate schedule: optim.lr stays what it is at zero_create",
        "zero_optimization.sub_group_size=1e9: not honoured: zero.h steps the rank's whole shard in one pass (NVMe: "
        "through offload.buffer_bytes of buffers)",
        "zero_optimization.reduce_bucket_size=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at "
        "zero.h's default (bucket_bytes: min(16 MiB, the gradient bytes / 8))",
        "zero_optimization.stage3_prefetch_bucket_size=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill "
        "in: left at zero.h's default (prefetch_bytes: max_live_bytes)",
        "zero_optimization.stage3_param_persistence_threshold=\"auto\": not honoured: \"auto\" is for the HF Trainer to "
        "fill in: left at zero.h's default (persist_bytes 0: none)",
        "zero_optimization.stage3_max_live_parameters=1e9: not honoured: zero.h allocates max_live_bytes as its gather "
        "arena at zero_build, where DeepSpeed's is a limit: left at zero.h's default (the largest module)",
        "zero_optimization.stage3_max_reuse_distance=1e9: not honoured: zero.h's reuse_distance counts fetches, not "
        "elements: left at 0",
        "zero_optimization.stage3_gather_16bit_weights_on_model_save=true: not honoured: the desc has no say in saving: "
        "zero_export_safetensors(z, path, ZERO_BF16) writes the 16-bit weights",
        "gradient_accumulation_steps=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at zero.h's "
        "default (accum_steps 1)",
        "gradient_clipping=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in: left at zero.h's default "
        "(clip_norm 0: no clipping)",
        "steps_per_print=2000: not honoured: zero.h prints nothing: print from your loop",
        "train_batch_size=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in",
        "train_micro_batch_size_per_gpu=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in"};
    zero_desc d, w = zeroed();
    if (!load("hf_trainer_auto_zero3.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 3;                            /* param_dtype 0: zero.h's default, bf16 */
    w.optim.type = ZERO_OPTIM_ADAMW;
    w.offload_optimizer = ZERO_OFFLOAD_HOST;
    w.offload_params = ZERO_OFFLOAD_HOST;
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}
static void config_legacy_misc(void) {
    static const char *const want[] = {
        "train_batch_size=48: not honoured: the batch is your loop's: DeepSpeed's is micro-batch x "
        "gradient_accumulation_steps x world size",
        "optimizer.type=\"Lamb\": not honoured: zero.h runs AdamW, SGD or Lion: optim is left at its default (AdamW, lr 1e-3)",
        "optimizer.params={\"lr\":1e-3,\"weight_decay\":0.01,\"max_coeff\":0.3,\"...: not honoured: the params of an "
        "optimizer zero.h does not run",
        "gradient_allreduce_op=\"sum\": not honoured: zero.h averages the gradients over the ranks (\"mean\")",
        "communication_data_type=\"fp32\": not honoured: zero.h reduces gradients in grad_dtype, the dtype you add them "
        "in (here bf16): set desc.grad_dtype to change both",
        "activation_checkpointing={\"partition_activations\":true,\"cpu_checkpointing...: not honoured: zero.h keeps "
        "checkpointed activations through zero_act_* and desc.offload_activations (ON ACTIVATIONS)",
        "my_project_notes=\"tuned on 8xA100\": not honoured: zero.h does not know this key"};
    zero_desc d, w = zeroed();
    if (!load("legacy_misc.json")) return;
    if (!CHECK(parse_text(&d) == ZERO_OK, "%s", rep)) return;
    w.stage = 2;
    w.param_dtype = ZERO_BF16;              /* "bfloat16", bf16's old name */
    w.clip_norm = 1.0f;
    w.offload_optimizer = ZERO_OFFLOAD_HOST;    /* cpu_offload: true, the old form */
    /* offload_param and zero_hpz_partition_size at stage 2: DeepSpeed ignores them, and so does the desc */
    check_desc(&d, &w);
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}

/* ---- single mappings ----------------------------------------------------------------------- */
/* the root object after whitespace reads as without it (a review found every root key
   dropped), and an "auto" nvme_path is no path: the NVMe tier is not used */
static void map_leading_whitespace_and_auto_path(void) {
    zero_desc d;
    if (CHECK(parse(" \n\t{\"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": "
                    "{\"device\": \"cpu\"}}, \"gradient_clipping\": 0.5, \"optimizer\": {\"type\": \"AdamW\", "
                    "\"params\": {\"lr\": 0.1}}}", &d) == ZERO_OK, "%s", rep))
        CHECK(d.param_dtype == ZERO_BF16 && d.stage == 3 && d.offload_optimizer == ZERO_OFFLOAD_HOST &&
              d.clip_norm == 0.5f && d.optim.lr == 0.1 && lines == 0, "after whitespace: dtype %d stage %d offload %d clip "
              "%g lr %g, %d lines:\n%s", d.param_dtype, d.stage, d.offload_optimizer, (double)d.clip_norm, d.optim.lr,
              lines, rep);
    if (CHECK(parse("{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"nvme\", "
                    "\"nvme_path\": \"auto\"}}, \"optimizer\": {\"type\": \"AdamW\"}}", &d) == ZERO_OK, "%s", rep))
        CHECK(d.offload_optimizer == ZERO_OFFLOAD_NONE && !d.offload.nvme_dirs[0] &&
              strstr(rep, "nvme_path=\"auto\": not honoured") && strstr(rep, "no nvme_path"),
              "an \"auto\" path: offload %d dir %s:\n%s", d.offload_optimizer,
              d.offload.nvme_dirs[0] ? d.offload.nvme_dirs[0] : "(none)", rep);
}
static void map_fp16_static_scale(void) {
    zero_desc d;
    if (!CHECK(parse("{\"fp16\": {\"enabled\": true, \"loss_scale\": 128, \"hysteresis\": 4, \"loss_scale_window\": 0,"
                     " \"initial_scale_power\": 99}}", &d) == ZERO_OK, "%s", rep))
        return;
    /* a static scale: the dynamic keys do nothing in DeepSpeed either (no lines, no DeepSpeed error for window 0) */
    CHECK(d.param_dtype == ZERO_F16 && d.loss_scale == 128.0f && d.loss_scale_init == 0.0f && d.loss_scale_window == 0,
          "static fp16 scale: dtype %d scale %g init %g window %d", d.param_dtype, (double)d.loss_scale,
          (double)d.loss_scale_init, d.loss_scale_window);
    CHECK(lines == 1 && strstr(rep, "optimizer (absent): not honoured: DeepSpeed runs the optimizer your program "
                                    "passes it"), "%d lines:\n%s", lines, rep);
    check_runs(&d);
}
static void map_fp16_dynamic_lines(void) {
    static const char *const want[] = {
        "fp16.initial_scale_power=200: not honoured: 2^200 is outside a float's range",
        "fp16.consecutive_hysteresis=true: not honoured: zero.h has no hysteresis to refill: it lowers the loss scale at "
        "every overflow",
        "fp16.auto_cast=true: not honoured: zero.h does not cast your forward pass's inputs",
        "fp16.hysteresis (absent, DeepSpeed's default 2): not honoured: zero.h lowers the loss scale at the first "
        "overflow (hysteresis 1)",
        "optimizer (absent): not honoured: DeepSpeed runs the optimizer your program passes it; zero.h runs its own "
        "(AdamW, lr 1e-3, unless you set desc.optim)"};
    zero_desc d;
    if (!CHECK(parse("{\"fp16\": {\"enabled\": true, \"initial_scale_power\": 200, \"consecutive_hysteresis\": true,"
                     " \"auto_cast\": true, \"min_loss_scale\": 4}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.loss_scale == 0.0f && d.loss_scale_init == 0.0f && d.loss_scale_min == 4.0f, "scale %g init %g min %g",
          (double)d.loss_scale, (double)d.loss_scale_init, (double)d.loss_scale_min);
    check_report(want, (int)(sizeof want / sizeof want[0]));
}
static void map_zeros_are_defaults(void) {
    static const char *const want[] = {
        "optimizer.params.lr=0: not honoured: 0 is zero.h's \"default\" (1e-3), not 0",
        "optimizer.params.betas=[0,0.999]: not honoured: a beta of 0 is zero.h's \"default\" (0.9, 0.999), not 0",
        "optimizer.params.eps=0.0: not honoured: 0 is zero.h's \"default\" (1e-8), not 0",
        ("zero_optimization.reduce_bucket_size=0: not honoured: 0 is zero.h's \"default\" (min(16 MiB, the gradient "
         "bytes / 8)), not an empty bucket")};
    zero_desc d, w = zeroed();
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0, \"betas\": [0, 0.999], \"eps\": 0.0,"
                     " \"weight_decay\": 0}}, \"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": 0,"
                     " \"reduce_bucket_size\": 0}, \"gradient_clipping\": 0}", &d) == ZERO_OK, "%s", rep))
        return;
    w.stage = 3;
    w.param_dtype = ZERO_F32;               /* neither fp16 nor bf16: fp32, as in DeepSpeed */
    w.optim.type = ZERO_OPTIM_ADAMW;
    w.prefetch_bytes = -1;                  /* DeepSpeed's 0: no prefetch */
    check_desc(&d, &w);                     /* gradient_clipping 0: off (written, so not DeepSpeed's 1.0) */
    check_report(want, (int)(sizeof want / sizeof want[0]));
    check_runs(&d);
}
static void map_torch_adam_and_sgd(void) {
    zero_desc d;
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"ADAM\", \"params\": {\"torch_adam\": true, \"lr\": 2e-5}}}", &d) == ZERO_OK,
               "%s", rep))
        return;
    CHECK(d.optim.type == ZERO_OPTIM_ADAMW && d.optim.weight_decay == 0.01 && d.optim.lr == 2e-5 && lines == 0,
          "torch_adam: torch.optim.AdamW's default weight_decay 0.01 (type %d wd %g lr %g, %d lines)", d.optim.type,
          d.optim.weight_decay, d.optim.lr, lines);
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"adam\", \"params\": {\"torch_adam\": true, \"adam_w_mode\": false}}}",
                     &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.optim.weight_decay == 0 && lines == 0, "torch.optim.Adam's default weight_decay is 0 (wd %g, %d lines)",
          d.optim.weight_decay, lines);
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"sgd\", \"params\": {\"lr\": 0.1, \"nesterov\": true, \"foreach\": null,"
                     " \"fused\": false}}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.optim.type == ZERO_OPTIM_SGD && d.optim.nesterov == 0 && lines == 1 &&
          !strcmp(rep, "optimizer.params.nesterov=true: not honoured: torch.optim.SGD refuses Nesterov without momentum or "
                       "with dampening\n"), "SGD Nesterov without momentum:\n%s", rep);
    check_runs(&d);
    /* Lion: DeepSpeed's defaults (FusedLion, DeepSpeedCPULion: lr 1e-3, betas 0.9, 0.999), not zero.h's own */
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"Lion\", \"params\": {\"weight_decay\": 0.1}}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.optim.type == ZERO_OPTIM_LION && d.optim.lr == 1e-3 && d.optim.beta1 == 0.9 && d.optim.beta2 == 0.999 &&
          d.optim.weight_decay == 0.1 && lines == 0, "Lion: type %d lr %g betas %g %g wd %g, %d lines:\n%s", d.optim.type,
          d.optim.lr, d.optim.beta1, d.optim.beta2, d.optim.weight_decay, lines, rep);
    check_runs(&d);
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"lion\", \"params\": {\"lr\": 3e-4, \"betas\": [0.95, 0.98], "
                     "\"eps\": 1e-8}}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.optim.type == ZERO_OPTIM_LION && d.optim.lr == 3e-4 && d.optim.beta1 == 0.95 && d.optim.beta2 == 0.98 &&
          lines == 1 && strstr(rep, "optimizer.params.eps=1e-8: not honoured"), "Lion's params: lr %g betas %g %g, %d lines:\n%s",
          d.optim.lr, d.optim.beta1, d.optim.beta2, lines, rep);
}
static void map_old_forms_and_nulls(void) {
    zero_desc d;
    if (!CHECK(parse("{\"zero_optimization\": true, \"optimizer\": null, \"gradient_clipping\": null, \"fp16\": null,"
                     " \"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": false}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.stage == 1 && d.clip_norm == 1.0f && d.param_dtype == ZERO_BF16, "stage %d clip %g dtype %d", d.stage,
          (double)d.clip_norm, d.param_dtype);
    CHECK(lines == 2 && !strcmp(rep, "bfloat16={\"enabled\":false}: not honoured: DeepSpeed reads bf16, not its old name, "
                                     "when both are given\noptimizer (absent): not honoured: DeepSpeed runs the optimizer "
                                     "your program passes it; zero.h runs its own (AdamW, lr 1e-3, unless you set "
                                     "desc.optim)\n"), "%d lines:\n%s", lines, rep);
    check_runs(&d);
}
static void map_offload_cases(void) {
    zero_desc d;
    /* nvme without a path; params on NVMe without the optimizer there; pin_memory false */
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 3,"
                     " \"offload_optimizer\": {\"device\": \"nvme\", \"pin_memory\": false},"
                     " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/p\"}}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.offload_optimizer == ZERO_OFFLOAD_NONE && d.offload_params == ZERO_OFFLOAD_NONE && !d.offload.nvme_dirs[0],
          "offload %d %d", d.offload_optimizer, d.offload_params);
    CHECK(!strcmp(rep, "zero_optimization.offload_optimizer.device=\"nvme\": not honoured: no nvme_path: the optimizer "
                       "states stay on the device\n"
                       "zero_optimization.offload_param.device=\"nvme\": not honoured: zero.h keeps params on NVMe only "
                       "together with the optimizer states (offload_optimizer.device \"nvme\" with its nvme_path): the "
                       "params stay on the device\n"), "%s", rep);
    /* both on NVMe, different paths, escapes in the path (decoded in place); pin_memory false is a line */
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 3,"
                     " \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp/a\\u00e9\\/b\\\"c\", \"pin_memory\": false},"
                     " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/other\"}}}", &d) == ZERO_OK, "%s", rep))
        return;
    CHECK(d.offload_optimizer == ZERO_OFFLOAD_NVME && d.offload_params == ZERO_OFFLOAD_NVME && d.offload.nvme_dirs[0] &&
          !strcmp(d.offload.nvme_dirs[0], "/tmp/a\xc3\xa9/b\"c") && !d.offload.nvme_dirs[1], "path %s",
          d.offload.nvme_dirs[0] ? d.offload.nvme_dirs[0] : "NULL");
    CHECK(!strcmp(rep, "zero_optimization.offload_optimizer.pin_memory=false: not honoured: zero.h always pins its host "
                       "copies on a GPU (on the CPU device there is nothing to pin)\n"
                       "zero_optimization.offload_param.nvme_path=\"/other\": not honoured: zero.h keeps the params in the "
                       "optimizer states' files (offload_optimizer.nvme_path)\n"), "%s", rep);
    check_runs(&d);
    /* ZeRO++ with offload_param: the ZeRO++ keys are the lines */
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 3, \"offload_param\":"
                     " {\"device\": \"cpu\"}, \"zero_quantized_weights\": true, \"zero_hpz_partition_size\": 1}}", &d) == ZERO_OK,
               "%s", rep))
        return;
    CHECK(d.offload_params == ZERO_OFFLOAD_HOST && d.qwz == 0 && d.hpz == 0 &&
          !strcmp(rep, "zero_optimization.zero_quantized_weights=true: not honoured: zero.h's ZeRO++ does not work with "
                       "offload_param yet\n"), "%s", rep);
    check_runs(&d);
}
static void map_unknown_and_auto(void) {
    zero_desc d;
    if (!CHECK(parse("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"foo\": [1, {\"x\": null}]}},"
                     " \"zero_optimization\": {\"stage\": 2, \"overlap_comm\": \"auto\", \"enable_sanity_checks\": \"auto\","
                     " \"wibble\": 1}, \"aio\": {\"queue_depth\": 1000}, \"flops_profiler\": {\"enabled\": false}}", &d) == ZERO_OK,
               "%s", rep))
        return;
    CHECK(!strcmp(rep, "optimizer.params.foo=[1,{\"x\":null}]: not honoured: zero.h does not know this key\n"
                       "zero_optimization.overlap_comm=\"auto\": not honoured: \"auto\" is for the HF Trainer to fill in; "
                       "zero.h always overlaps the gradient reduction with your backward pass\n"
                       "zero_optimization.wibble=1: not honoured: zero.h does not know this key\n"), "%s", rep);
    CHECK(d.offload.queue_depth == 0, "aio.queue_depth 1000 without NVMe: left alone (it does nothing there)");
    check_runs(&d);
}
static void map_numbers_exact(void) {
    static const struct { const char *text; double value; } cases[] = {
        {"3e-5", 3e-5}, {"0.0003", 0.0003}, {"1E-4", 1E-4}, {"6.25e-05", 6.25e-05}, {"0.1", 0.1},
        {"0.30000000000000004", 0.30000000000000004}, {"123456789012345678e-20", 123456789012345678e-20},
        {"2.2250738585072014e-308", 2.2250738585072014e-308}, {"4.9e-324", 4.9e-324}, {"1.7976931348623157e308", 1.7976931348623157e308},
        {"0.00000000000000000000000000000000000000000000000001", 1e-50}};
    char json[256];
    zero_desc d;
    int i;
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        snprintf(json, sizeof json, "{\"optimizer\": {\"type\": \"sgd\", \"params\": {\"lr\": %s}}}", cases[i].text);
        if (!CHECK(parse(json, &d) == ZERO_OK, "%s: %s", cases[i].text, rep)) continue;
        CHECK(d.optim.lr == cases[i].value, "%s read as %.17g, expected %.17g", cases[i].text, d.optim.lr, cases[i].value);
    }
}
static void map_numbers_locale(void) {
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8"};
    zero_desc d;
    const char *got = NULL;
    int i;
    for (i = 0; i < 5 && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
    if (!got) { test_skip("no locale with a decimal comma is installed"); return; }
    CHECK(parse("{\"optimizer\": {\"type\": \"sgd\", \"params\": {\"lr\": 0.0025}}}", &d) == ZERO_OK && d.optim.lr == 0.0025,
          "in %s, lr read as %.17g", got, d.optim.lr);
    setlocale(LC_NUMERIC, "C");
}

/* ---- errors -------------------------------------------------------------------------------- */
/* json fails with exactly the sentence want; *out, the text and *unhonoured as the contract says */
static void expect_error(const char *json, const char *want) {
    zero_desc d, before;
    zero_result r;
    char line[1024];
    snprintf(text, sizeof text, "%s", json);
    memcpy(saved, text, sizeof text);
    memset(&d, 0x5A, sizeof d);
    memcpy(&before, &d, sizeof d);
    lines = -1;
    r = zero_desc_from_json(text, &d, rep, sizeof rep, &lines);
    CHECK(r == ZERO_ERR_INVALID_ARG, "%.60s: %s, expected ZERO_ERR_INVALID_ARG", json, zero_result_str(r));
    CHECK(!strcmp(zero_last_error(NULL), want), "%.60s:\n  got:  %s\n  want: %s", json, zero_last_error(NULL), want);
    snprintf(line, sizeof line, "%s\n", want);
    CHECK(!strcmp(rep, line), "%.60s: the report is not the error's sentence: %s", json, rep);
    CHECK(lines == 0, "%.60s: *unhonoured %d on an error", json, lines);
    CHECK(!memcmp(&d, &before, sizeof d), "%.60s: *out changed on an error", json);
    CHECK(!memcmp(text, saved, sizeof text), "%.60s: the text changed on an error", json);
}
static void bad_syntax(void) {
    expect_error("{\"zero_optimization\": {\"stage\": 2",
                 "zero_desc_from_json: line 1, column 34: the text ends inside an object (a '}' is missing)");
    expect_error("{\"zero_optimization\": {\"stage\": 2,}}",
                 "zero_desc_from_json: line 1, column 34: a comma before '}' (JSON has no trailing commas)");
    expect_error("{\"a\": [1, 2,]}", "zero_desc_from_json: line 1, column 12: a comma before ']' (JSON has no trailing commas)");
    expect_error("{\"a\": \"x\\q\"}",
                 "zero_desc_from_json: line 1, column 9: an invalid escape \\q (JSON's are \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                 "and \\uXXXX)");
    expect_error("{\"a\": \"\\u00\"}", "zero_desc_from_json: line 1, column 8: \\u must be followed by four hex digits");
    expect_error("{\"a\": \"\\ud800\"}",
                 "zero_desc_from_json: line 1, column 8: \\uD800 is the high half of a surrogate pair, without its low half");
    expect_error("{\"a\": \"\\udc00x\"}",
                 "zero_desc_from_json: line 1, column 8: \\uDC00 is the low half of a surrogate pair, without its high half");
    expect_error("{\"a\": \"x\ty\"}",
                 "zero_desc_from_json: line 1, column 9: a control character (U+0009) inside a string; write it as an escape "
                 "(\\n, \\t, \\u0009)");
    expect_error("{\"a\": \"\xc3\"}", "zero_desc_from_json: line 1, column 8: invalid UTF-8 (byte 0xC3)");
    expect_error("{\"a\": \"\xc0\xaf\"}", "zero_desc_from_json: line 1, column 8: invalid UTF-8 (byte 0xC0)");
    expect_error("{\"a\": \"\xed\xa0\x80\"}",
                 "zero_desc_from_json: line 1, column 8: invalid UTF-8 (an overlong form, a surrogate or a code point past "
                 "U+10FFFF)");
    expect_error("{\"a\": \"abc", "zero_desc_from_json: line 1, column 11: the text ends inside a string (a '\"' is missing)");
    expect_error("{\"a\": NaN}", "zero_desc_from_json: line 1, column 7: NaN is not JSON (JSON numbers are finite)");
    expect_error("{\"a\": -Infinity}", "zero_desc_from_json: line 1, column 8: expected a digit after '-', found 'I'");
    expect_error("{\"a\": True}", "zero_desc_from_json: line 1, column 7: Python's True is not JSON (write true, false or null)");
    expect_error("{\"a\": tru}", "zero_desc_from_json: line 1, column 7: an unknown word 'tru' (JSON's are true, false and null)");
    expect_error("{'a': 1}", "zero_desc_from_json: line 1, column 2: expected a key (a string in double quotes), found a "
                             "single quote (JSON strings take double quotes)");
    expect_error("{\"a\": 1 // no comments\n}",
                 "zero_desc_from_json: line 1, column 9: expected ',' or '}' after an object's member, found '/' (JSON has "
                 "no comments)");
    expect_error("{\"a\" 1}", "zero_desc_from_json: line 1, column 6: expected ':' after the key, found '1'");
    expect_error("{\"a\": 1} x", "zero_desc_from_json: line 1, column 10: more text after the JSON value");
    expect_error("\xef\xbb\xbf{}", "zero_desc_from_json: line 1, column 1: a UTF-8 byte-order mark (JSON text starts without one)");
    expect_error("", "zero_desc_from_json: line 1, column 1: no JSON value: the text is empty");
    expect_error(" \n\t ", "zero_desc_from_json: line 2, column 3: no JSON value: the text is empty");
    /* line and column: lines counted at '\n', columns in characters (é is one) */
    expect_error("{\"\xc3\xa9\": \"\xc3\xbc\", \"a\": x}",
                 "zero_desc_from_json: line 1, column 17: an unknown word 'x' (JSON's are true, false and null)");
    expect_error("{\n  \"zero_optimization\": {\n    \"stage\": \"3\"\n  }\n}",
                 "zero_desc_from_json: line 3, column 14: zero_optimization.stage: expected an integer 0-3, found \"3\"");
}
static void bad_numbers(void) {
    char big[300];
    int i;
    expect_error("{\"gradient_clipping\": 1e999}",
                 "zero_desc_from_json: line 1, column 23: the number 1e999 is out of the range of a double");
    expect_error("{\"gradient_clipping\": -1e400}",
                 "zero_desc_from_json: line 1, column 23: the number -1e400 is out of the range of a double");
    expect_error("{\"gradient_clipping\": 1e-400}",
                 "zero_desc_from_json: line 1, column 23: the number 1e-400 is out of the range of a double");
    expect_error("{\"gradient_clipping\": 1e99999999999999999999}",
                 "zero_desc_from_json: line 1, column 23: the number 1e99999999999999999999 is out of the range of a double");
    expect_error("{\"zero_optimization\": {\"stage\": 123456789012345678901234567890}}",
                 "zero_desc_from_json: line 1, column 33: zero_optimization.stage: expected an integer 0-3, found "
                 "123456789012345678901234567890");
    snprintf(big, sizeof big, "{\"steps_per_print\": 1");
    for (i = 0; i < 150; i++) strcat(big, "0");
    strcat(big, "}");
    expect_error(big, "zero_desc_from_json: line 1, column 21: a number of more than 100 characters");
    expect_error("{\"a\": 01}", "zero_desc_from_json: line 1, column 7: a number with a leading zero");
    expect_error("{\"a\": 1.}", "zero_desc_from_json: line 1, column 9: expected a digit after the decimal point, found '}'");
    expect_error("{\"a\": 1e}", "zero_desc_from_json: line 1, column 9: expected a digit in the exponent, found '}'");
    expect_error("{\"a\": +1}", "zero_desc_from_json: line 1, column 7: expected a value, found '+'");
    expect_error("{\"a\": .5}", "zero_desc_from_json: line 1, column 7: expected a value, found '.'");
}
static void bad_nesting(void) {
    static char deep[60000];
    size_t n = 0;
    int i;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"a\":");
    for (i = 0; i < 10000; i++) deep[n++] = '[';
    deep[n] = 0;
    expect_error(deep, "zero_desc_from_json: line 1, column 69: more than 64 levels of nesting");
    for (i = 0; i < 10000; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = 0;
    expect_error(deep, "zero_desc_from_json: line 1, column 69: more than 64 levels of nesting");
    n = 0;
    for (i = 0; i < 10000; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"a\":");
    expect_error(deep, "zero_desc_from_json: line 1, column 321: more than 64 levels of nesting");
    n = 0;                                  /* 64 levels: the limit itself is fine */
    deep[n++] = '{';
    n += (size_t)snprintf(deep + n, sizeof deep - n, "\"a\":");
    for (i = 0; i < 63; i++) deep[n++] = '[';
    for (i = 0; i < 63; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = 0;
    {
        zero_desc d;
        CHECK(parse(deep, &d) == ZERO_OK, "64 levels: %s", rep);
    }
}
static void bad_root_and_keys(void) {
    char many[8192];
    size_t n = 0;
    int i;
    expect_error("[1, 2]", "zero_desc_from_json: line 1, column 1: the root is an array; a DeepSpeed config is an object ({...})");
    expect_error("  \"zero\"", "zero_desc_from_json: line 1, column 3: the root is a string; a DeepSpeed config is an object ({...})");
    expect_error("42", "zero_desc_from_json: line 1, column 1: the root is a number; a DeepSpeed config is an object ({...})");
    expect_error("null", "zero_desc_from_json: line 1, column 1: the root is null; a DeepSpeed config is an object ({...})");
    expect_error("{\"fp16\": {\"enabled\": true, \"enabled\": false}}",
                 "zero_desc_from_json: line 1, column 28: the key \"enabled\" is in this object twice (first at line 1, "
                 "column 11)");
    expect_error("{\"a\": 1,\n \"\\u0061\": 2}",
                 "zero_desc_from_json: line 2, column 2: the key \"\\u0061\" is in this object twice (first at line 1, "
                 "column 2)");
    /* the same key in sibling objects is fine; 257 keys open at once is not */
    {
        zero_desc d;
        CHECK(parse("{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}, \"c\": [{\"x\": 1}, {\"x\": 2}]}", &d) == ZERO_OK, "%s", rep);
    }
    n += (size_t)snprintf(many + n, sizeof many - n, "{");
    for (i = 0; i < 257; i++) n += (size_t)snprintf(many + n, sizeof many - n, "%s\"k%d\": %d", i ? ", " : "", i, i);
    snprintf(many + n, sizeof many - n, "}");
    expect_error(many, "zero_desc_from_json: line 1, column 3110: more than 256 keys in the objects open here");
}
static void bad_values(void) {
    expect_error("{\"zero_optimization\": {\"stage\": \"3\"}}",
                 "zero_desc_from_json: line 1, column 33: zero_optimization.stage: expected an integer 0-3, found \"3\"");
    expect_error("{\"zero_optimization\": {\"stage\": 4}}",
                 "zero_desc_from_json: line 1, column 33: zero_optimization.stage: expected an integer 0-3, found 4");
    expect_error("{\"zero_optimization\": {\"stage\": 2.5}}",
                 "zero_desc_from_json: line 1, column 33: zero_optimization.stage: expected an integer 0-3, found 2.5");
    expect_error("{\"zero_optimization\": 3}",
                 "zero_desc_from_json: line 1, column 23: zero_optimization: expected an object, found 3");
    expect_error("{\"zero_optimization\": {\"reduce_bucket_size\": -1}}",
                 "zero_desc_from_json: line 1, column 46: zero_optimization.reduce_bucket_size: expected an integer >= 0 "
                 "(elements), found -1");
    expect_error("{\"zero_optimization\": {\"overlap_comm\": 1}}",
                 "zero_desc_from_json: line 1, column 40: zero_optimization.overlap_comm: expected true or false, found 1");
    expect_error("{\"fp16\": {\"enabled\": \"true\"}}",
                 "zero_desc_from_json: line 1, column 22: fp16.enabled: expected true or false, found \"true\"");
    expect_error("{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
                 "zero_desc_from_json: line 1, column 49: fp16.enabled and bf16.enabled are both true: DeepSpeed refuses it");
    expect_error("{\"fp16\": {\"enabled\": true, \"loss_scale_window\": 0}}",
                 "zero_desc_from_json: line 1, column 49: fp16.loss_scale_window: expected an integer > 0 (DeepSpeed refuses "
                 "others with a dynamic loss scale), found 0");
    expect_error("{\"fp16\": {\"enabled\": true, \"loss_scale\": -1}}",
                 "zero_desc_from_json: line 1, column 42: fp16.loss_scale: expected a loss scale >= 0 (0: dynamic), found -1");
    expect_error("{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"gpu\"}}}",
                 "zero_desc_from_json: line 1, column 68: zero_optimization.offload_optimizer.device: expected \"none\", "
                 "\"cpu\" or \"nvme\", found \"gpu\"");
    expect_error("{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"ratio\": 0.5}}}",
                 "zero_desc_from_json: line 1, column 67: zero_optimization.offload_optimizer.ratio: expected 1 (DeepSpeed "
                 "offloads part of the states at stage 3 only), found 0.5");
    expect_error("{\"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
                 "zero_desc_from_json: line 1, column 51: zero_optimization.cpu_offload: deprecated, and DeepSpeed refuses it "
                 "together with offload_optimizer");
    expect_error("{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"a\\u0000b\"}}}",
                 "zero_desc_from_json: line 1, column 89: zero_optimization.offload_optimizer.nvme_path: a path with a NUL "
                 "character (\\u0000)");
    expect_error("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"max_grad_norm\": 1.0}}}",
                 "zero_desc_from_json: line 1, column 61: optimizer.params.max_grad_norm: DeepSpeed refuses it as an optimizer "
                 "parameter (use gradient_clipping)");
    expect_error("{\"optimizer\": {\"type\": \"adam\", \"params\": {\"betas\": [0.9]}}}",
                 "zero_desc_from_json: line 1, column 52: optimizer.params.betas: expected [beta1, beta2], two numbers, found "
                 "[0.9]");
    expect_error("{\"optimizer\": {\"type\": 3}}", "zero_desc_from_json: line 1, column 24: optimizer.type: expected a string, found 3");
    expect_error("{\"train_batch_size\": 30, \"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 2}",
                 "zero_desc_from_json: line 1, column 22: train_batch_size 30 is not train_micro_batch_size_per_gpu 4 x "
                 "gradient_accumulation_steps 2 x a world size: DeepSpeed refuses it");
    expect_error("{\"gradient_accumulation_steps\": 0}",
                 "zero_desc_from_json: line 1, column 33: gradient_accumulation_steps: expected an integer > 0, found 0");
    expect_error("{\"gradient_allreduce_op\": \"max\"}",
                 "zero_desc_from_json: line 1, column 27: gradient_allreduce_op: expected \"mean\" or \"sum\", found \"max\"");
    expect_error("{\"data_types\": {\"grad_accum_dtype\": \"fp8\"}}",
                 "zero_desc_from_json: line 1, column 37: data_types.grad_accum_dtype: expected \"fp32\", \"bf16\" or \"fp16\", "
                 "found \"fp8\"");
}
static void bad_null_args(void) {
    zero_desc d;
    char small[8];
    int n = 5;
    snprintf(text, sizeof text, "{}");
    CHECK(zero_desc_from_json(NULL, &d, rep, sizeof rep, &n) == ZERO_ERR_INVALID_ARG && n == 0 &&
          !strcmp(zero_last_error(NULL), "zero_desc_from_json: json is NULL"), "NULL json: %s", zero_last_error(NULL));
    CHECK(zero_desc_from_json(text, NULL, small, sizeof small, NULL) == ZERO_ERR_INVALID_ARG &&
          !strcmp(zero_last_error(NULL), "zero_desc_from_json: out is NULL") && !strcmp(small, "zero_de"),
          "NULL out: %s / report %s", zero_last_error(NULL), small);
}

/* ---- the report's contract ------------------------------------------------------------------ */
static void report_truncation(void) {
    char full[16384], part[16384];
    size_t a, b;
    zero_desc d;
    int n = -1, k;
    if (!load("zero2_cpu_offload_fp16.json")) return;
    memcpy(saved, text, sizeof text);
    CHECK(zero_desc_from_json(text, &d, full, sizeof full, &n) == ZERO_OK && n == 7 && count_lines(full) == 7, "%d", n);
    a = strcspn(full, "\n") + 1;
    b = strcspn(full + a, "\n") + 1;
    for (k = 0; k < 3; k++) {               /* room for 2 lines (a + b + NUL), one byte less, and NULL */
        size_t cap = a + b + 1 - (size_t)k;
        memcpy(text, saved, sizeof text);
        n = -1;
        memset(part, 0x7E, sizeof part);
        CHECK(zero_desc_from_json(text, &d, k == 2 ? NULL : part, cap, &n) == ZERO_OK && n == 7, "cap %d: %d lines", (int)cap, n);
        if (k == 0) CHECK(!strncmp(part, full, a + b) && part[a + b] == 0, "two whole lines: %s", part);
        if (k == 1) CHECK(!strncmp(part, full, a) && part[a] == 0 && part[cap] == 0x7E, "one whole line: %s", part);
    }
    memcpy(text, saved, sizeof text);
    CHECK(zero_desc_from_json(text, &d, part, 0, NULL) == ZERO_OK && part[0] == 0x7E, "report_size 0 writes nothing");
}

/* ---- robustness ----------------------------------------------------------------------------- */
static const char *const config_files[] = {
    "zero2_cpu_offload_fp16.json", "zero3_nvme_bf16.json", "zero1_fp16_adam_l2.json", "zero0_bf16_sgd.json",
    "zeropp_stage3.json", "hf_trainer_auto_zero3.json", "legacy_misc.json"};
static void robust_prefixes(void) {
    static char whole[1 << 17];
    zero_desc d;
    size_t len, cut;
    int f, fails = 0, checked = 0;
    for (f = 0; f < (int)(sizeof config_files / sizeof config_files[0]); f++) {
        if (!load(config_files[f])) return;
        memcpy(whole, text, sizeof text);
        len = strlen(whole);
        while (len && zero__js_isws(whole[len - 1])) len--;
        for (cut = 0; cut < len; cut++) {       /* every proper prefix is incomplete */
            memcpy(text, whole, cut);
            text[cut] = 0;
            if (zero_desc_from_json(text, &d, rep, sizeof rep, NULL) != ZERO_ERR_INVALID_ARG ||
                !strstr(zero_last_error(NULL), "zero_desc_from_json: line "))
                fails++;
            checked++;
        }
    }
    CHECK(fails == 0, "%d of %d prefixes were not ZERO_ERR_INVALID_ARG with a position", fails, checked);
}
static void robust_mutations(void) {
    static char whole[1 << 17];
    static const char alphabet[] = "{}[]\":,\\ \n0123456789.eE+-tfnul\"auto\xc3\xa9\x80\xff";
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    zero_desc d;
    int f, m, i, ok = 0, bad = 0, other = 0;
    for (f = 0; f < (int)(sizeof config_files / sizeof config_files[0]); f++) {
        size_t len;
        if (!load(config_files[f])) return;
        memcpy(whole, text, sizeof text);
        len = strlen(whole);
        for (m = 0; m < 400; m++) {
            int edits = 1 + (int)(rng % 4);
            size_t n = len;
            memcpy(text, whole, len + 1);
            for (i = 0; i < edits; i++) {
                size_t at;
                rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
                at = (size_t)(rng % (n ? n : 1));
                switch ((rng >> 32) % 3) {
                case 0: text[at] = alphabet[(rng >> 40) % (sizeof alphabet - 1)]; break;              /* replace */
                case 1: memmove(text + at, text + at + 1, n - at); n--; break;                         /* delete */
                default:                                                                               /* insert */
                    if (n + 2 < sizeof text) { memmove(text + at + 1, text + at, n - at + 1); n++;
                                               text[at] = alphabet[(rng >> 40) % (sizeof alphabet - 1)]; }
                }
            }
            text[n] = 0;
            switch (zero_desc_from_json(text, &d, rep, sizeof rep, NULL)) {
            case ZERO_OK: ok++; break;
            case ZERO_ERR_INVALID_ARG: bad++; break;
            default: other++; break;
            }
        }
    }
    CHECK(other == 0, "%d mutations gave neither ZERO_OK nor ZERO_ERR_INVALID_ARG", other);
    fprintf(stderr, "  robust_mutations: %d ok, %d invalid\n", ok, bad);
}

int main(void) {
    test_init();
    TEST_RUN(config_zero2_cpu_offload_fp16);
    TEST_RUN(config_zero3_nvme_bf16);
    TEST_RUN(config_zero1_fp16_adam_l2);
    TEST_RUN(config_zero0_bf16_sgd);
    TEST_RUN(config_zeropp_stage3);
    TEST_RUN(config_hf_trainer_auto_zero3);
    TEST_RUN(config_legacy_misc);
    TEST_RUN(map_leading_whitespace_and_auto_path);
    TEST_RUN(map_fp16_static_scale);
    TEST_RUN(map_fp16_dynamic_lines);
    TEST_RUN(map_zeros_are_defaults);
    TEST_RUN(map_torch_adam_and_sgd);
    TEST_RUN(map_old_forms_and_nulls);
    TEST_RUN(map_offload_cases);
    TEST_RUN(map_unknown_and_auto);
    TEST_RUN(map_numbers_exact);
    TEST_RUN(map_numbers_locale);
    TEST_RUN(bad_syntax);
    TEST_RUN(bad_numbers);
    TEST_RUN(bad_nesting);
    TEST_RUN(bad_root_and_keys);
    TEST_RUN(bad_values);
    TEST_RUN(bad_null_args);
    TEST_RUN(report_truncation);
    TEST_RUN(robust_prefixes);
    TEST_RUN(robust_mutations);
    return test_summary();
}
