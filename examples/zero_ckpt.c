/* examples/zero_ckpt.c - inspect, verify and convert zero.h checkpoints without a trainer.

       zero_ckpt info DIR                     the manifest: config, the data position, the
                                              trainer's records, modules, params, files
       zero_ckpt verify DIR                   every shard's header, size and record checksum;
                                              exit 0 if all good, 1 otherwise
       zero_ckpt export DIR OUT.safetensors [--bf16]
                                              the fp32 weights as safetensors ("module.param")

   Everything goes through zero.h's public checkpoint API (zero_ckpt_open, _info, _param,
   _verify, _export), which makes zero_load's checks: a checkpoint that zero_load would
   refuse is refused here too, with the same message, and exit status 1. Bad arguments:
   exit 2. */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"     // defines: zero_ckpt_open, zero_ckpt_info, zero_ckpt_verify, zero_ckpt_export_as

#include <stdio.h>       // defines: printf, fprintf
#include <string.h>      // defines: strcmp

static int usage(void) {
    fprintf(stderr, "usage: zero_ckpt info DIR | verify DIR | export DIR OUT.safetensors [--bf16]\n");
    return 2;
}

/* 1 after printing why r failed */
static int failed(zero_result r) {
    fprintf(stderr, "zero_ckpt: %s: %s\n", zero_result_str(r), zero_last_error(NULL));
    return 1;
}

static int info(zero_ckpt *ck) {
    struct zero_ckpt_info in;
    zero_ckpt_module_info mi;
    zero_ckpt_param_info pi;
    zero_ckpt_file_info fi;
    zero_result r;
    int i, k;
    if ((r = zero_ckpt_info(ck, &in)) != ZERO_OK) return failed(r);
    printf("format %d, generation %llu\nstage %d, world %d, param_dtype %s, optimizer %s (%d moments)\n",
           in.format_version, (unsigned long long)in.generation, in.stage, in.world_size, zero_dtype_str(in.param_dtype),
           zero_optim_type_str(in.optimizer), in.moments);
    printf("state_dtype %s\n", zero_state_dtype_str(in.state_dtype));    // the moments' format in the shards
    printf("steps %lld, skipped %lld, loss_scale %g, good_steps %lld\n", (long long)in.steps, (long long)in.skipped_steps,
           (double)in.loss_scale, (long long)in.good_steps);
    if (in.micro_batches >= 0) printf("micro_batches %lld\n", (long long)in.micro_batches);
    else printf("micro_batches not recorded (format 1)\n");
    for (i = 0; i < in.num_records; i++) {     // the trainer's records: key, size, the first bytes
        zero_ckpt_record_info ri;
        const unsigned char *b;
        if ((r = zero_ckpt_record(ck, i, &ri)) != ZERO_OK) return failed(r);
        b = (const unsigned char *)ri.data;
        printf("record %s %lld bytes", ri.key, (long long)ri.bytes);
        for (k = 0; k < ri.bytes && k < 16; k++) printf("%s%02x", k ? "" : " ", b[k]);
        printf("%s\n", ri.bytes > 16 ? "..." : "");
    }
    for (i = 0; i < in.num_modules; i++) {
        if ((r = zero_ckpt_module(ck, i, &mi)) != ZERO_OK) return failed(r);
        printf("module %s%s\n", mi.name, mi.frozen ? " (frozen)" : "");
    }
    for (i = 0; i < in.num_params; i++) {
        if ((r = zero_ckpt_param(ck, i, &pi)) != ZERO_OK) return failed(r);
        printf("param %s.%s [", pi.module, pi.name);
        for (k = 0; k < pi.ndim; k++) printf("%s%lld", k ? ", " : "", (long long)pi.shape[k]);
        printf("] %lld elements\n", (long long)pi.numel);
    }
    for (i = 0; i < in.num_files; i++) {
        if ((r = zero_ckpt_file(ck, i, &fi)) != ZERO_OK) return failed(r);
        printf("file %s %lld bytes\n", fi.name, (long long)fi.bytes);
    }
    printf("%d ranges\n", in.num_ranges);
    return 0;
}

static int verify(zero_ckpt *ck, const char *dir) {
    struct zero_ckpt_info in;
    zero_result r;
    if ((r = zero_ckpt_verify(ck)) != ZERO_OK || (r = zero_ckpt_info(ck, &in)) != ZERO_OK) return failed(r);
    printf("OK: %s: %d ranges in %d files, every checksum matches\n", dir, in.num_ranges, in.num_files);
    return 0;
}

static int export_st(zero_ckpt *ck, const char *out, zero_dtype dt) {
    struct zero_ckpt_info in;
    zero_result r;
    if ((r = zero_ckpt_export_as(ck, out, dt)) != ZERO_OK || (r = zero_ckpt_info(ck, &in)) != ZERO_OK) return failed(r);
    printf("wrote %s: %d tensors, %s\n", out, in.num_params, dt == ZERO_F32 ? "F32" : "BF16");
    return 0;
}

int main(int argc, char **argv) {
    zero_ckpt *ck = NULL;
    zero_result r;
    int rc, cmd;
    if (argc == 3 && strcmp(argv[1], "info") == 0) cmd = 0;
    else if (argc == 3 && strcmp(argv[1], "verify") == 0) cmd = 1;
    else if ((argc == 4 || (argc == 5 && strcmp(argv[4], "--bf16") == 0)) && strcmp(argv[1], "export") == 0) cmd = 2;
    else return usage();
    if ((r = zero_ckpt_open(argv[2], NULL, &ck)) != ZERO_OK) return failed(r);
    rc = cmd == 0 ? info(ck) : cmd == 1 ? verify(ck, argv[2]) : export_st(ck, argv[3], argc == 5 ? ZERO_BF16 : ZERO_F32);
    zero_ckpt_close(ck);
    return rc;
}
