/* tests/bench/bench.h - what the benchmarks share: a monotonic clock and a median. */
#ifndef ZERO_BENCH_H
#define ZERO_BENCH_H
#include <stdlib.h>       // defines: qsort
#include <time.h>         // defines: clock_gettime

static double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static int bench__cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* sorts v in place; the middle value */
static double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), bench__cmp);
    return v[n / 2];
}
#endif
