/* bench_zpp - ZeRO++ against plain stage 3 on a modelled two-level network: 8 ranks (threads
   of the local comm) in 4 nodes of 2, links of 25 GB/s within a node and 2 GB/s across
   nodes (zero_group_set_link / zero_group_set_cross_link: a collective sleeps for the
   longer of its within-node bytes / 25 GB/s and its cross-node bytes / 2 GB/s, as a
   transfer takes time without taking CPU). Plain stage 3 against qwz + qgz + hpz 2, the
   same model, steps alternating between the two; the median step time of each.

   The model: LAYERS modules of DIM x DIM bf16 params (AdamW). The compute is light on
   purpose, as a GPU's is beside these links: forward reads a few params of each fetched
   module, backward writes the module's whole gradient (a copy) after fetching it again.
   So the step is the gathers, the reductions, the optimizer and the quantization work.
   On a small machine the ranks' real copies (and ZeRO++'s encoding) share the cores, which
   a real cluster would not: run it on as many cores as ranks for a like-for-like number.

   Prints each configuration's ms/step and cross-node bytes per step (zero_stats), then
   ratio = plain stage 3 step time / ZeRO++ step time (the target: >= 1.3). Each
   configuration also runs without the links, in the same rounds: that time is the ranks'
   CPU work (copies, sums, encoding, the optimizer) as this machine does it. With fewer
   cores than ranks that work is time-shared, which a cluster's GPUs would not do; the line
   ratio_est_core_per_rank= estimates the ratio with a core per rank: the CPU part divided
   by ranks / cores, plus rank 0's modelled link time per step (what its comm stream
   slept, zero_comm.link_ns; no overlap with compute assumed, for both). It is a model,
   printed before ratio=, which stays the measurement.
   Options: --gbps-within G, --gbps-across G (0: no link), --layers L, --dim D. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../../zero.h"   // defines: the library

#include <stdio.h>        // defines: printf
#include <string.h>       // defines: strcmp, memcpy
#include <stdlib.h>       // defines: malloc, atof
#include <unistd.h>       // defines: sysconf
#include "bench.h"        // defines: bench_now_ms, bench_median

#define RANKS 8
#define PER_NODE 2
#define ROUNDS 7
#define CONFIGS 4            /* plain, ZeRO++, and both again without the links */

static int layers = 8, dim = 1024, opt_qwz = 1, opt_qgz = 8, opt_hpz = PER_NODE;
static double gbps_within = 25, gbps_across = 2;
static double times[CONFIGS][ROUNDS];
static int64_t across[CONFIGS], within[CONFIGS], link_ns[CONFIGS];
static zero_group *groups[CONFIGS];
static const char *names[CONFIGS] = { "stage 3", "ZeRO++", "stage 3, no links", "ZeRO++, no links" };

typedef struct rank_state {
    zero_ctx *z;
    zero_module *mod;
    zero_param *w;
} rank_state;

/* what an endpoint and its node and cross-node ones have slept on the modelled links */
static int64_t slept_ns(const zero_comm *c) {
    int64_t t = __atomic_load_n(&c->link_ns, __ATOMIC_RELAXED);
    if (c->intra) t += __atomic_load_n(&c->intra->link_ns, __ATOMIC_RELAXED) + __atomic_load_n(&c->inter->link_ns, __ATOMIC_RELAXED);
    return t;
}

static zero_result one_step(rank_state *s, const uint16_t *gpat, float *sink) {
    zero_result r;
    int l;
    for (l = 0; l < layers; l++) {
        const uint16_t *p;
        if ((r = zero_fetch(s->z, s->mod[l])) != ZERO_OK) return r;
        p = (const uint16_t *)zero_param_data(s->z, s->w[l]);
        *sink += (float)(p[0] + p[dim * dim / 2]);
        if ((r = zero_release(s->z, s->mod[l])) != ZERO_OK) return r;
    }
    for (l = layers - 1; l >= 0; l--) {
        if ((r = zero_fetch(s->z, s->mod[l])) != ZERO_OK) return r;
        memcpy(zero_param_grad(s->z, s->w[l]), gpat, (size_t)dim * dim * 2);
        if ((r = zero_release(s->z, s->mod[l])) != ZERO_OK) return r;
        if ((r = zero_grads_ready(s->z, s->mod[l])) != ZERO_OK) return r;
    }
    r = zero_step(s->z);
    return r == ZERO_STEP_SKIPPED ? ZERO_OK : r;
}

static zero_result rank_main(zero_comm *comm, int rank, void *user) {
    rank_state s[CONFIGS];
    zero_comm *comms[CONFIGS] = { 0 };
    uint16_t *gpat = (uint16_t *)malloc((size_t)dim * dim * 2);
    float *w0 = (float *)malloc(sizeof(float) * (size_t)dim * dim), sink = 0;
    zero_result r = ZERO_OK;
    int c, l, k, round;
    (void)user;
    memset(s, 0, sizeof s);
    if (!gpat || !w0) return ZERO_ERR_OUT_OF_MEMORY;
    for (k = 0; k < dim * dim; k++) w0[k] = (float)((k * 31 + rank * 0) % 97 - 48) * (1.0f / 480);
    zero_from_f32(gpat, ZERO_BF16, w0, dim * dim);      /* the gradient pattern: small values */
    for (c = 0; c < CONFIGS && r == ZERO_OK; c++) {
        zero_desc d;
        memset(&d, 0, sizeof d);
        if (c == 0) comms[c] = comm;
        else if ((r = zero_comm_local(&comms[c], groups[c], rank)) != ZERO_OK) break;
        d.comm = comms[c];
        d.stage = 3;
        d.param_dtype = ZERO_BF16;
        d.optim.lr = 1e-4;
        if (c & 1) { d.qwz = opt_qwz; d.qgz = opt_qgz; d.hpz = opt_hpz; }
        s[c].mod = (zero_module *)calloc((size_t)layers, sizeof(zero_module));
        s[c].w = (zero_param *)calloc((size_t)layers, sizeof(zero_param));
        if ((r = zero_create(&s[c].z, &d)) != ZERO_OK) break;
        for (l = 0; l < layers && r == ZERO_OK; l++) {
            zero_module_desc md;
            zero_param_desc pd;
            char name[16];
            memset(&md, 0, sizeof md);
            memset(&pd, 0, sizeof pd);
            snprintf(name, sizeof name, "l%d", l);
            md.name = name;
            pd.name = "w"; pd.ndim = 2; pd.shape[0] = dim; pd.shape[1] = dim;
            if ((r = zero_add_module(s[c].z, &md, &s[c].mod[l])) == ZERO_OK)
                r = zero_add_param(s[c].z, s[c].mod[l], &pd, &s[c].w[l]);
        }
        if (r == ZERO_OK) r = zero_build(s[c].z);
        for (l = 0; l < layers && r == ZERO_OK; l++) r = zero_param_set_f32(s[c].z, s[c].w[l], w0);
        if (r == ZERO_OK) r = one_step(&s[c], gpat, &sink);     /* warm-up: records the schedule */
    }
    for (round = 0; round < ROUNDS && r == ZERO_OK; round++)
        for (c = 0; c < CONFIGS && r == ZERO_OK; c++) {
            zero_stats a, b;
            double t0 = bench_now_ms();
            int64_t l0 = slept_ns(comms[c]);
            zero_stats_get(s[c].z, &a);
            r = one_step(&s[c], gpat, &sink);
            zero_stats_get(s[c].z, &b);
            if (rank == 0)
                link_ns[c] = slept_ns(comms[c]) - l0;
            if (rank == 0) {
                times[c][round] = bench_now_ms() - t0;
                across[c] = b.comm_bytes_across - a.comm_bytes_across;
                within[c] = b.comm_bytes_within - a.comm_bytes_within;
            }
        }
    if (r != ZERO_OK) fprintf(stderr, "rank %d: %s\n", rank, zero_last_error(NULL));
    for (c = 0; c < CONFIGS; c++) {
        zero_destroy(s[c].z);
        if (c) zero_comm_destroy(comms[c]);
        free(s[c].mod);
        free(s[c].w);
    }
    free(gpat);
    free(w0);
    return sink == 12345.0f ? ZERO_ERR_STATE : r;    /* keeps the reads */
}

int main(int argc, char **argv) {
    double med[CONFIGS];
    zero_result r;
    int c, i;
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gbps-within")) gbps_within = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--gbps-across")) gbps_across = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) dim = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--zpp")) {      /* which of them: e.g. qwz,hpz */
            opt_qwz = strstr(argv[i + 1], "qwz") != NULL;
            opt_qgz = strstr(argv[i + 1], "qgz4") ? 4 : strstr(argv[i + 1], "qgz") ? 8 : 0;
            opt_hpz = strstr(argv[i + 1], "hpz") ? PER_NODE : 0;
        }
        else break;
    }
    if (i < argc || layers < 1 || dim < 16) {
        fprintf(stderr, "usage: bench_zpp [--gbps-within G] [--gbps-across G] [--layers L] [--dim D] "
                        "[--zpp qwz,qgz|qgz4,hpz]\n");
        return 2;
    }
    for (c = 0; c < CONFIGS; c++) {
        zero_group_create(&groups[c], RANKS);
        zero_group_set_nodes(groups[c], PER_NODE);
        if (c < 2) {
            zero_group_set_link(groups[c], 0, gbps_within);
            zero_group_set_cross_link(groups[c], 0, gbps_across);
        }
    }
    printf("%d ranks in nodes of %d, %d modules of %dx%d bf16 (%.1fM params), links %.1f GB/s within, "
           "%.1f GB/s across nodes\n", RANKS, PER_NODE, layers, dim, dim, layers * (double)dim * dim / 1e6,
           gbps_within, gbps_across);
    printf("ZeRO++: qwz %d, qgz %d bits, hpz %d\n", opt_qwz, opt_qgz, opt_hpz);
    if ((r = zero_run_group(groups[0], rank_main, NULL)) != ZERO_OK) {
        fprintf(stderr, "%s: %s\n", zero_result_str(r), zero_last_error(NULL));
        return 1;
    }
    for (c = 0; c < CONFIGS; c++) zero_group_destroy(groups[c]);
    for (c = 0; c < CONFIGS; c++) {
        med[c] = bench_median(times[c], ROUNDS);
        printf("%-28s %8.1f ms/step (median of %d)  bytes/step from rank 0: %lld within, %lld across\n", names[c],
               med[c], ROUNDS, (long long)within[c], (long long)across[c]);
    }
    printf("cross_bytes_ratio=%.3f\n", (double)across[1] / (double)across[0]);
    {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        double k = cores > 0 && cores < RANKS ? (double)RANKS / (double)cores : 1.0;
        double lp = (double)link_ns[0] / 1e6, lz = (double)link_ns[1] / 1e6;
        printf("modelled link time per step (rank 0): %.1f ms (stage 3), %.1f ms (ZeRO++); %ld cores for %d ranks\n",
               lp, lz, cores, RANKS);
        printf("ratio_est_core_per_rank=%.3f\n", (med[2] / k + lp) / (med[3] / k + lz));
    }
    printf("ratio=%.3f\n", med[0] / med[1]);
    return 0;
}
