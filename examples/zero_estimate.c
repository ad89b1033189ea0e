/*
zero_estimate.c - the memory planner on the command line: per-rank bytes of a model
of P parameters trained on N ranks at ZeRO stage S, from sizes alone (zero_estimate).

    build/zero_estimate --params 7.5e9 --ranks 64 --stage 1
    model_state_bytes_per_rank=31406250000
    total_bytes_per_rank=31406250000
    ...

The model is a stack of modules, as a real one is (a module is what stage 3
gathers and stage 2 stages whole, so the largest module sizes those buffers). By
default P is cut into at most 32 modules: equal ones of a multiple of N * align
elements and a last one that takes the rest, so the padding is that of one module.
--modules M splits P into M modules as evenly as possible instead (one module:
the buffers hold the whole model, and stages 2-3 need more than stage 1).
--align defaults to 1 here (the library's default is 16), so that the only padding
is modules rounded up to a multiple of N: then P = 7.5e9, N = 64, bf16 reproduces
the ZeRO paper's Table 1 (120 GB, 31.4 GB, 16.6 GB, 1.9 GB for stages 0..3).
total_bytes_per_rank adds the buffers at the library's defaults (ON BUCKETS,
ON PREFETCH, ON MEMORY in zero.h): with the default split and N >= 2 it falls
from stage 0 to 3.
--acts K --act-bytes B adds an activation stash of K slots of B bytes (a layer's input
checkpoint each, ON ACTIVATIONS) kept in memory, on the host or on NVMe
(--offload-activations): zero_estimate_activations; its bytes print as activation_*.

    build/zero_estimate --params 1.3e9 --ranks 8 --stage 3 --acts 24 --act-bytes 8388608 --offload-activations nvme

ZeRO++ (ON ZERO++ in zero.h): --qwz (stage 3), --qgz [--qgz-bits 4|8] (stages 1-3) and
--hpz N (stage 3; N divides --ranks) add their memory: hpz_bytes= (the secondary partition,
counted in params_bytes) and zpp_buffer_bytes= (the quantized payloads, in buffer_bytes)
print after the other lines. The nodes are --hpz's N ranks, else one node of all ranks.

    build/zero_estimate --params 1e6 --ranks 8 --stage 3 --qwz --qgz --hpz 2

--optim muon --matrix RxC (ON THE OPTIMIZER in zero.h): each module's params are as many
R x C matrices as fit, stepped by Muon, and one 1-D param of the rest, stepped by AdamW
(zero_estimate_muon); buffer_bytes counts Muon's buffers (the module's span of updates,
the iteration's work area, the matrices a rank iterates on sent and received). With the
default split a module is P / 32 elements: give --modules the model's layers.

    build/zero_estimate --params 7e9 --ranks 8 --stage 3 --modules 32 --optim muon --matrix 4096x4096

--speculative-step [--speculative-bytes B] (desc.speculative_step, ON THE OPTIMIZER): the undo
area of the speculated steps (every module's old master, moments and params, or at most B
bytes), in buffer_bytes; speculative_bytes= prints it after the other lines. (On the NVMe
tier the undo is the tier's other slot: no area.)

    build/zero_estimate --params 1e9 --ranks 8 --stage 2 --speculative-step
*/
#include <math.h>     // defines: floor
#include <stdint.h>   // defines: int64_t
#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: strtod, malloc, free, exit
#include <string.h>   // defines: strcmp
#define ZERO_IMPLEMENTATION
#include "../zero.h"  // defines: zero_estimate, zero_plan, zero_desc, zero_last_error, ZERO__MAX_RANKS
#define CLI_PROG "zero_estimate"
#include "cli.h"     // defines: bad_arg, option_value, is_decimal, parse_act_offload, parse_state_dtype, parse_optim

static void usage(FILE *f) {
    fprintf(f,
        "usage: zero_estimate --params P --ranks N --stage S [--dtype bf16|f16|f32] [--align A] [--modules M]\n"
        "                     [--optim adamw|lion|sgd|muon] [--matrix RxC] [--optim-state-dtype f32|bf16|q8]\n"
        "                     [--qwz] [--qgz]\n"
        "                     [--qgz-bits 4|8] [--hpz N]\n"
        "                     [--quant-block B] [--speculative-step] [--speculative-bytes B]\n"
        "  --params P    parameter count, a whole number; 7.5e9 is accepted\n"
        "  --ranks N     data-parallel ranks, 1..%d\n"
        "  --stage S     ZeRO stage 0..3\n"
        "  --dtype T     parameter (and gradient) dtype (default bf16); the optimizer's master is fp32\n"
        "  --optim O     adamw (default: two moments), lion (one), sgd (with momentum 0.9: one) or\n"
        "                muon (with --matrix: the modules' R x C matrices Muon's, the rest AdamW's)\n"
        "  --matrix RxC  with --optim muon: the shape of the matrices each module holds\n"
        "  --optim-state-dtype T  the moments' format: f32 (default), bf16 or q8 (8-bit blocks)\n"
        "  --align A     parameter alignment in elements (default 1: pad modules to N only)\n"
        "  --modules M   modules splitting P as evenly as possible (default: at most 32 modules\n"
        "                of a multiple of N*A elements, the last one the rest; stage 2-3 buffers\n"
        "                hold whole modules, so one module makes buffer_bytes look large)\n"
        "  --acts K      activation stash slots per rank (default 0: none), each --act-bytes B bytes\n"
        "  --offload-activations T  none (in device memory, the default), host or nvme\n"
        "  --act-live B  with nvme: bytes of the stash's staging buffers (default 2 slots)\n"
        "  --qwz         ZeRO++ (stage 3): int8 block-quantized param gathers\n"
        "  --qgz         ZeRO++ (stages 1-3): quantized gradient reduce-scatter (int8; --qgz-bits 4: int4)\n"
        "  --qgz-bits B  8 or 4 (implies --qgz)\n"
        "  --hpz N       ZeRO++ (stage 3): a secondary partition over nodes of N ranks; N divides --ranks\n"
        "                (the nodes: N ranks, else one node of all ranks)\n"
        "  --quant-block B  elements per quantization block (default 256)\n"
        "  --speculative-step  the undo area of desc.speculative_step (every module's old states and params)\n"
        "  --speculative-bytes B  that area, at most B bytes\n"
        "numbers are decimal (0x10 is refused, 010 is ten)\n"
        "prints model_state_bytes_per_rank= first, total_bytes_per_rank= (with the buffers)\n"
        "second, then the bytes per category, one key=value a line (activation_*: with --acts;\n"
        "hpz_bytes= and zpp_buffer_bytes=: with --qwz, --qgz or --hpz; speculative_bytes=: with\n"
        "--speculative-step)\n",
        ZERO__MAX_RANKS);
}

// a whole number in [lo, hi], written in decimal; accepts 7.5e9 and 010 (ten) but not
// 7.5, 1e30 or 0x10. what names the unit in the "at most" message ("" for none).
static int64_t parse_count(const char *opt, const char *s, int64_t lo, int64_t hi, const char *what) {
    if (!is_decimal(s, 1, 1)) bad_arg("expects a decimal whole number such as 64 or 7.5e9", opt, s);
    double v = strtod(s, NULL);
    if (v != floor(v)) bad_arg("expects a whole number", opt, s);
    if (!(v >= (double)lo && v <= (double)hi)) {
        if (v < (double)lo) fprintf(stderr, "zero_estimate: %s %s: must be at least %lld\n", opt, s, (long long)lo);
        else fprintf(stderr, "zero_estimate: %s %s: at most %lld%s\n", opt, s, (long long)hi, what);
        usage(stderr);
        exit(2);
    }
    return (int64_t)v;
}

int main(int argc, char **argv) {
    int64_t params = -1, ranks = -1, stage = -1, align = 1, modules = 0;   // 0: the default split
    int64_t acts = 0, act_bytes = 0, act_live = 0;
    zero_offload_tier act_tier = ZERO_OFFLOAD_NONE;
    zero_state_dtype state_dtype = ZERO_STATE_DEFAULT;
    zero_optim_type optim = ZERO_OPTIM_ADAMW;
    zero_dtype dtype = ZERO_BF16;
    int qwz = 0, qgz = 0, hpz = 0, quant_block = 0;     // ZeRO++ (desc.qwz, .qgz bits, .hpz, .quant_block)
    int spec = 0;                                       // desc.speculative_step
    int64_t spec_bytes = 0;                             // desc.speculative_bytes (0: every module's)
    int64_t rows = 0, cols = 0;                         // --matrix (Muon's)
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); return 0; }
        if (!strcmp(o, "--qwz")) { qwz = 1; continue; }
        if (!strcmp(o, "--speculative-step")) { spec = 1; continue; }
        if (!strcmp(o, "--qgz")) { if (!qgz) qgz = 8; continue; }
        const char *v = option_value(argc, argv, &i);
        // 2^53: every larger double is a whole number, and the planner's byte counts
        // (16 per parameter) must stay far from int64 overflow
        if (!strcmp(o, "--params")) params = parse_count(o, v, 1, (int64_t)1 << 53, " parameters");
        else if (!strcmp(o, "--ranks")) ranks = parse_count(o, v, 1, ZERO__MAX_RANKS, " ranks (zero.h's limit)");
        else if (!strcmp(o, "--stage")) stage = parse_count(o, v, 0, 3, "");
        else if (!strcmp(o, "--align")) align = parse_count(o, v, 1, 1 << 20, " elements");
        else if (!strcmp(o, "--modules")) modules = parse_count(o, v, 1, 1 << 24, " modules");
        else if (!strcmp(o, "--acts")) acts = parse_count(o, v, 0, 1 << 20, " slots");
        else if (!strcmp(o, "--act-bytes")) act_bytes = parse_count(o, v, 1, (int64_t)1 << 48, " bytes");
        else if (!strcmp(o, "--act-live")) act_live = parse_count(o, v, 1, (int64_t)1 << 52, " bytes");
        else if (!strcmp(o, "--qgz-bits")) {
            qgz = (int)parse_count(o, v, 4, 8, "");
            if (qgz != 4 && qgz != 8) bad_arg("expects 4 or 8", o, v);
        }
        else if (!strcmp(o, "--hpz")) hpz = (int)parse_count(o, v, 1, ZERO__MAX_RANKS, " ranks per node");
        else if (!strcmp(o, "--quant-block")) quant_block = (int)parse_count(o, v, 1, 1 << 20, " elements");
        else if (!strcmp(o, "--speculative-bytes")) spec_bytes = parse_count(o, v, 1, (int64_t)1 << 60, " bytes");
        else if (!strcmp(o, "--offload-activations")) act_tier = parse_act_offload(o, v);
        else if (!strcmp(o, "--optim-state-dtype")) state_dtype = parse_state_dtype(o, v);
        else if (!strcmp(o, "--optim")) optim = parse_optim(o, v, 1);
        else if (!strcmp(o, "--matrix")) {
            const char *x = strchr(v, 'x');
            char rs[32];
            if (!x || x == v || (size_t)(x - v) >= sizeof rs) bad_arg("expects ROWSxCOLS such as 4096x4096", o, v);
            memcpy(rs, v, (size_t)(x - v));
            rs[x - v] = 0;
            rows = parse_count(o, rs, 1, (int64_t)1 << 26, " rows");
            cols = parse_count(o, x + 1, 1, (int64_t)1 << 26, " columns");
        }
        else if (!strcmp(o, "--dtype")) {
            if (!strcmp(v, "bf16")) dtype = ZERO_BF16;
            else if (!strcmp(v, "f16")) dtype = ZERO_F16;
            else if (!strcmp(v, "f32")) dtype = ZERO_F32;
            else bad_arg("expects bf16, f16 or f32", o, v);
        } else bad_arg("is not an option", o, NULL);
    }
    if (params < 0) bad_arg("is required", "--params", NULL);
    if (ranks < 0) bad_arg("is required", "--ranks", NULL);
    if (stage < 0) bad_arg("is required", "--stage", NULL);
    if (acts > 0 && act_bytes == 0) bad_arg("is required with --acts", "--act-bytes", NULL);
    if (optim == ZERO_OPTIM_MUON && rows == 0) bad_arg("is required with --optim muon (the matrices' shape)", "--matrix", NULL);
    if (optim != ZERO_OPTIM_MUON && rows > 0) bad_arg("is for --optim muon", "--matrix", NULL);
    if (spec_bytes > 0 && !spec) bad_arg("is for --speculative-step", "--speculative-bytes", NULL);
    if (hpz && ranks % hpz) {
        fprintf(stderr, "zero_estimate: --hpz %d must divide --ranks %lld (it is the ranks per node)\n", hpz,
                (long long)ranks);
        usage(stderr);
        return 2;
    }
    int64_t chunk = 0;          // the default split: modules of chunk elements, the last the rest
    if (modules == 0) {
        int64_t unit = ranks * align, per = (params + 31) / 32;
        chunk = (per + unit - 1) / unit * unit;
        modules = (params + chunk - 1) / chunk;
    }
    if (modules > params) {
        fprintf(stderr, "zero_estimate: --modules %lld is more than --params %lld (a module needs a parameter)\n",
                (long long)modules, (long long)params);
        usage(stderr);
        return 2;
    }

    int64_t *numels = (int64_t *)malloc((size_t)modules * sizeof(int64_t));
    if (!numels) { fprintf(stderr, "zero_estimate: out of memory\n"); return 1; }
    for (int64_t m = 0; m < modules; m++)   // --modules: as evenly as possible, the first P % M get one more
        numels[m] = chunk ? (m < modules - 1 ? chunk : params - chunk * (modules - 1))
                          : params / modules + (m < params % modules ? 1 : 0);

    zero_desc d = {0};
    d.stage = (int)stage;
    d.param_dtype = dtype;
    d.align_elems = align;
    d.optim.type = optim;
    if (optim == ZERO_OPTIM_SGD) d.optim.momentum = 0.9;
    d.optim.state_dtype = state_dtype;
    d.offload_activations = act_tier;
    d.act_live_bytes = act_live;
    d.offload.nvme_dirs[0] = ".";      // the planner needs a directory for nvme; nothing is created
    d.qwz = qwz;                       // (the planner refuses qwz and hpz below stage 3, qgz at stage 0)
    d.qgz = qgz;
    d.hpz = hpz;                       // the nodes: hpz ranks each, else one node of every rank
    d.quant_block = quant_block;
    d.speculative_step = spec;
    d.speculative_bytes = spec_bytes;
    zero_plan plan;
    zero_result r = optim == ZERO_OPTIM_MUON ? zero_estimate_muon(&d, (int)ranks, (int)modules, numels, rows, cols, &plan)
                                             : zero_estimate(&d, (int)ranks, (int)modules, numels, &plan);
    free(numels);
    if (r == ZERO_OK && acts > 0) {     // the stash: acts slots of act_bytes each
        int64_t *ab = (int64_t *)malloc((size_t)acts * sizeof(int64_t));
        if (!ab) { fprintf(stderr, "zero_estimate: out of memory\n"); return 1; }
        for (int64_t k = 0; k < acts; k++) ab[k] = act_bytes;
        r = zero_estimate_activations(&d, (int)acts, ab, &plan);
        free(ab);
    }
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
    printf("total_bytes_per_rank=%lld\n", (long long)plan.total_bytes);
    printf("params_bytes=%lld\n", (long long)cat[ZERO_CAT_PARAMS]);
    printf("grads_bytes=%lld\n", (long long)cat[ZERO_CAT_GRADS]);
    printf("master_bytes=%lld\n", (long long)cat[ZERO_CAT_MASTER]);
    printf("optim_bytes=%lld\n", (long long)cat[ZERO_CAT_OPTIM]);
    printf("buffer_bytes=%lld\n", (long long)cat[ZERO_CAT_BUFFERS]);
    printf("total_bytes=%lld\n", (long long)plan.total_bytes);
    printf("params=%lld\n", (long long)plan.numel);
    printf("params_padded=%lld\n", (long long)plan.numel_padded);
    if (acts > 0) {
        printf("activation_bytes=%lld\n", (long long)cat[ZERO_CAT_ACTIVATIONS]);
        printf("activation_device_bytes=%lld\n", (long long)plan.bytes[ZERO_TIER_DEVICE][ZERO_CAT_ACTIVATIONS]);
        printf("activation_host_bytes=%lld\n", (long long)plan.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS]);
        printf("activation_nvme_bytes=%lld\n", (long long)plan.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS]);
    }
    if (qwz || qgz || hpz) {
        printf("hpz_bytes=%lld\n", (long long)plan.hpz_bytes);
        printf("zpp_buffer_bytes=%lld\n", (long long)plan.zpp_buffer_bytes);
    }
    if (spec) printf("speculative_bytes=%lld\n", (long long)plan.speculative_bytes);
    return 0;
}
