/* examples/cli.h - the examples' command line: numbers written in decimal and in range, the
   choices several examples share, and one way to refuse an argument ("PROG: --opt what it
   expects (got 'value')", the usage on stderr, exit 2).

   Include it after zero.h, with CLI_PROG defined as the program's name (messages begin
   "CLI_PROG: "); the program defines static void usage(FILE *f), which a refusal prints.
   The functions are static inline: a program that uses only some of them gets no
   unused-function warning for the others. */
#ifndef CLI_H_INCLUDED
#define CLI_H_INCLUDED

#ifndef CLI_PROG
#error "define CLI_PROG (the program's name, a string) before including cli.h"
#endif

#include <errno.h>    // defines: errno, ERANGE
#include <stdint.h>   // defines: uint64_t, UINT64_MAX
#include <stdio.h>    // defines: FILE, fprintf, snprintf, stderr
#include <stdlib.h>   // defines: strtoll, strtod, strtoull, exit
#include <string.h>   // defines: strcmp, strncmp
#include <time.h>     // defines: clock_gettime, CLOCK_MONOTONIC, struct timespec
#ifdef _WIN32
#include <windows.h>  // defines: QueryPerformanceCounter, QueryPerformanceFrequency
#endif

static void usage(FILE *f);

// seconds on a monotonic clock (for the examples' timings)
static inline double now_s(void) {
#ifdef _WIN32
    LARGE_INTEGER t, f;
    QueryPerformanceCounter(&t);
    QueryPerformanceFrequency(&f);
    return (double)t.QuadPart / (double)f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}

// the refusal: "PROG: OPT MSG", " (got 'VAL')" when there is a value, then the usage; exit 2
static inline void bad_arg(const char *msg, const char *opt, const char *val) {
    fprintf(stderr, CLI_PROG ": %s %s%s%s%s\n", opt, msg, val ? " (got '" : "", val ? val : "", val ? "')" : "");
    usage(stderr);
    exit(2);
}

// argv[*i] is an option that takes a value: the value (and *i moves onto it); a word that
// is not an option, or a value missing at the end, is refused
static inline const char *option_value(int argc, char **argv, int *i) {
    const char *o = argv[*i];
    if (strncmp(o, "--", 2) != 0) bad_arg("is not an option", o, NULL);
    if (*i + 1 >= argc) bad_arg("needs a value", o, NULL);
    return argv[++*i];
}

// s is written in decimal: [+-]digits, and with frac also [.digits][e[+-]digits] (3e-3,
// .003); nothing else (strtod alone would take 0x10, 0x1p-8, inf, nan and leading
// blanks; strtoull a blank and a minus sign)
static inline int is_decimal(const char *s, int sign, int frac) {
    const char *p = s;
    if (sign && (*p == '+' || *p == '-')) p++;
    const char *digits = p;
    while (*p >= '0' && *p <= '9') p++;
    if (frac && *p == '.') p++;
    while (*p >= '0' && *p <= '9') p++;
    if (p == digits || (p == digits + 1 && *digits == '.')) return 0;   // no digit at all
    if (frac && (*p == 'e' || *p == 'E')) {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == '\0';
}

// an integer in [lo, hi], in decimal (010 is ten); 64-bit everywhere (Windows's long is 32)
static inline long long parse_long(const char *opt, const char *s, long long lo, long long hi) {
    int ok = is_decimal(s, 1, 0);
    long long v = ok ? strtoll(s, NULL, 10) : 0;
    if (!ok || v < lo || v > hi) {   // (an overflow saturates, out of range)
        char msg[96];
        snprintf(msg, sizeof msg, "expects a decimal integer in [%lld, %lld]", lo, hi);
        bad_arg(msg, opt, s);
    }
    return v;
}

// a number in [lo, hi], in decimal (3e-3, 0.003)
static inline float parse_float(const char *opt, const char *s, double lo, double hi) {
    int ok = is_decimal(s, 1, 1);
    double v = ok ? strtod(s, NULL) : 0.0;
    if (!ok || !(v >= lo && v <= hi)) {
        char msg[96];
        snprintf(msg, sizeof msg, "expects a decimal number in [%g, %g]", lo, hi);
        bad_arg(msg, opt, s);
    }
    return (float)v;
}

// a non-negative integer below 2^64, in decimal
static inline uint64_t parse_seed(const char *opt, const char *s) {
    int ok = is_decimal(s, 0, 0);
    errno = 0;
    unsigned long long v = ok ? strtoull(s, NULL, 10) : 0;
    if (!ok || errno == ERANGE || v > UINT64_MAX)
        bad_arg("expects a non-negative decimal integer below 2^64", opt, s);
    return (uint64_t)v;
}

// --dtype: f32, bf16 or f16
static inline zero_dtype parse_dtype(const char *opt, const char *v) {
    if (!strcmp(v, "f32")) return ZERO_F32;
    if (!strcmp(v, "bf16")) return ZERO_BF16;
    if (!strcmp(v, "f16")) return ZERO_F16;
    bad_arg("expects f32, bf16 or f16", opt, v);
    return ZERO_F32;   // (not reached)
}

// --optim-state-dtype: f32, bf16 or q8 (the optimizer moments' format; zero_state_dtype_str's names)
static inline zero_state_dtype parse_state_dtype(const char *opt, const char *v) {
    if (!strcmp(v, "f32")) return ZERO_STATE_F32;
    if (!strcmp(v, "bf16")) return ZERO_STATE_BF16;
    if (!strcmp(v, "q8")) return ZERO_STATE_Q8;
    bad_arg("expects f32, bf16 or q8", opt, v);
    return ZERO_STATE_F32;   // (not reached)
}

// --optim: adamw, lion or sgd, and muon where the program marks its matrices (with_muon)
static inline zero_optim_type parse_optim(const char *opt, const char *v, int with_muon) {
    if (!strcmp(v, "adamw")) return ZERO_OPTIM_ADAMW;
    if (!strcmp(v, "lion")) return ZERO_OPTIM_LION;
    if (!strcmp(v, "sgd")) return ZERO_OPTIM_SGD;
    if (!strcmp(v, "muon") && with_muon) return ZERO_OPTIM_MUON;
    if (!strcmp(v, "muon")) bad_arg("muon: this program has no matrices marked for Muon; expects adamw, lion or sgd", opt, v);
    bad_arg(with_muon ? "expects adamw, lion, sgd or muon" : "expects adamw, lion or sgd", opt, v);
    return ZERO_OPTIM_ADAMW;   // (not reached)
}

// --offload-optimizer, --offload-params: none, cpu (host memory) or nvme
static inline zero_offload_tier parse_offload(const char *opt, const char *v) {
    if (!strcmp(v, "none")) return ZERO_OFFLOAD_NONE;
    if (!strcmp(v, "cpu")) return ZERO_OFFLOAD_HOST;
    if (!strcmp(v, "nvme")) return ZERO_OFFLOAD_NVME;
    bad_arg("expects none, cpu or nvme", opt, v);
    return ZERO_OFFLOAD_NONE;
}

// --offload-activations: none, host (cpu is taken too) or nvme
static inline zero_offload_tier parse_act_offload(const char *opt, const char *v) {
    if (!strcmp(v, "none")) return ZERO_OFFLOAD_NONE;
    if (!strcmp(v, "host") || !strcmp(v, "cpu")) return ZERO_OFFLOAD_HOST;
    if (!strcmp(v, "nvme")) return ZERO_OFFLOAD_NVME;
    bad_arg("expects none, host or nvme", opt, v);
    return ZERO_OFFLOAD_NONE;
}

// --qgz-bits: 8 or 4
static inline int parse_qgz_bits(const char *opt, const char *v) {
    int bits = (int)parse_long(opt, v, 4, 8);
    if (bits != 4 && bits != 8) bad_arg("expects 4 or 8", opt, v);
    return bits;
}

#endif // CLI_H_INCLUDED
