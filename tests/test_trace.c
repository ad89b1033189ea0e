/* tests/test_trace.c - the tracing facility: zero_trace_enable / begin / end / count /
   save. A small stage-0..3 model trains with tracing on at world sizes 1-3; the saved
   file must hold, for every rank, the user's spans, the comm stream's collectives and
   the optimizer pass, in Trace Event Format. Bad input gives the documented codes:
   save before enable (ZERO_ERR_STATE), NULL arguments (ZERO_ERR_INVALID_ARG), an
   unwritable path (ZERO_ERR_IO on every rank), a full buffer (events dropped, counted). */
#define _POSIX_C_SOURCE 200809L
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "test.h"
#include "fixture.h"

#define NL 3
#define NE 100

typedef struct job {
    int world, stage, steps;
    int64_t max_events;
    const char *path;               /* NULL: do not enable */
    zero_result save_result[4];
    int64_t counts[4];
} job;

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    char *buf;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}
static int count_sub(const char *s, const char *sub) {
    int n = 0;
    size_t k = strlen(sub);
    for (; (s = strstr(s, sub)) != NULL; s += k) n++;
    return n;
}

static zero_result train_rank(zero_comm *comm, int rank, void *user) {
    job *j = (job *)user;
    zero_desc d = {0};
    zero_ctx *z = NULL;
    zero_module m[NL];
    zero_param p[NL];
    float v[NE];
    zero_result r;
    int l, s, i;
    d.comm = comm; d.stage = j->stage; d.param_dtype = ZERO_F32; d.optim.lr = 0.01;
    if ((r = zero_create(&z, &d)) != ZERO_OK) return r;
    for (l = 0; l < NL; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        if ((r = fx_module(z, name, 0, &m[l])) != ZERO_OK || (r = fx_param(z, m[l], "w", NE, 0, 0, &p[l])) != ZERO_OK)
            goto out;
    }
    if (j->path && (r = zero_trace_enable(z, j->max_events)) != ZERO_OK) goto out;
    if ((r = zero_build(z)) != ZERO_OK) goto out;
    for (i = 0; i < NE; i++) v[i] = 0.01f * (float)i;
    for (l = 0; l < NL; l++) if ((r = zero_param_set_f32(z, p[l], v)) != ZERO_OK) goto out;
    for (s = 0; s < j->steps; s++) {
        zero_trace_begin(z, "step");
        zero_trace_begin(z, "forward");
        for (l = 0; l < NL; l++) {
            if ((r = zero_fetch(z, m[l])) != ZERO_OK) goto out;
            if ((r = zero_release(z, m[l])) != ZERO_OK) goto out;
        }
        zero_trace_end(z);
        zero_trace_begin(z, "backward");
        for (l = NL - 1; l >= 0; l--) {
            float *w, *g;
            if ((r = zero_fetch(z, m[l])) != ZERO_OK) goto out;
            w = (float *)zero_param_data(z, p[l]);
            g = (float *)zero_param_grad(z, p[l]);
            for (i = 0; i < NE; i++) g[i] += w[i] - (float)rank;
            if ((r = zero_release(z, m[l])) != ZERO_OK) goto out;
            if ((r = zero_grads_ready(z, m[l])) != ZERO_OK) goto out;
        }
        zero_trace_end(z);
        if ((r = zero_step(z)) != ZERO_OK) goto out;
        zero_trace_end(z);
    }
    if (j->path) {
        j->counts[rank] = zero_trace_count(z);
        j->save_result[rank] = zero_trace_save(z, j->path);
    }
out:
    zero_destroy(z);
    return r;
}

static void trace_file_every_rank(int world, int stage) {
    job j;
    char path[256], want[64];
    char *txt;
    int r;
    memset(&j, 0, sizeof j);
    snprintf(path, sizeof path, "%s/trace_%d_%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", world, stage);
    j.world = world; j.stage = stage; j.steps = 3; j.max_events = 4096; j.path = path;
    CHECK(zero_run_local(world, train_rank, &j) == ZERO_OK, "training failed: %s", zero_last_error(NULL));
    for (r = 0; r < world; r++) CHECK(j.save_result[r] == ZERO_OK, "rank %d: zero_trace_save gave %d", r, j.save_result[r]);
    txt = read_all(path);
    if (!CHECK(txt != NULL, "no file %s", path)) return;
    CHECK(strncmp(txt, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 38) == 0, "bad start");
    CHECK(strstr(txt, "\n]}\n") != NULL, "bad end");
    for (r = 0; r < world; r++) {
        snprintf(want, sizeof want, "\"pid\":%d,", r);
        CHECK(count_sub(txt, want) >= 3 * 4 + 5, "rank %d has %d events", r, count_sub(txt, want));
    }
    CHECK(count_sub(txt, "\"name\":\"step\"") == 3 * world, "%d step spans", count_sub(txt, "\"name\":\"step\""));
    CHECK(count_sub(txt, "\"name\":\"forward\"") == 3 * world, "forward spans");
    CHECK(count_sub(txt, "\"name\":\"optimizer\",\"cat\":\"optimizer\"") == 3 * world, "optimizer spans: %d",
          count_sub(txt, "\"name\":\"optimizer\",\"cat\":\"optimizer\""));
    CHECK(count_sub(txt, "\"name\":\"reduce layer0\"") >= world, "reduce spans");
    if (stage == 3) CHECK(count_sub(txt, "\"name\":\"all-gather layer1\"") >= world, "stage 3 all-gathers");
    CHECK(strstr(txt, "\"thread_name\"") && strstr(txt, "\"comm\""), "track names");
    CHECK(strstr(txt, "nan") == NULL && strstr(txt, "inf") == NULL, "non-finite numbers");
    for (r = 0; r < world; r++) CHECK(j.counts[r] > 0, "rank %d counted nothing", r);
    free(txt);
}

static void trace_off_is_free(void) {
    zero_ctx *z = NULL;
    zero_desc d = {0};
    CHECK(zero_create(&z, &d) == ZERO_OK, "create");
    CHECK(zero_trace_begin(z, "x") == ZERO_OK && zero_trace_end(z) == ZERO_OK, "begin/end while off");
    CHECK(zero_trace_count(z) == 0, "count while off");
    CHECK(zero_trace_save(z, "/tmp/never.json") == ZERO_ERR_STATE, "save before enable must be ZERO_ERR_STATE");
    CHECK(strstr(zero_last_error(z), "zero_trace_enable") != NULL, "message: %s", zero_last_error(z));
    zero_destroy(z);
}

static void trace_bad_args(void) {
    zero_ctx *z = NULL;
    zero_desc d = {0};
    CHECK(zero_trace_enable(NULL, 10) == ZERO_ERR_INVALID_ARG, "enable(NULL)");
    CHECK(zero_trace_begin(NULL, "x") == ZERO_ERR_INVALID_ARG, "begin(NULL)");
    CHECK(zero_trace_end(NULL) == ZERO_ERR_INVALID_ARG, "end(NULL)");
    CHECK(zero_trace_save(NULL, "x") == ZERO_ERR_INVALID_ARG, "save(NULL)");
    CHECK(zero_trace_count(NULL) == 0, "count(NULL)");
    CHECK(zero_create(&z, &d) == ZERO_OK, "create");
    CHECK(zero_trace_enable(z, 0) == ZERO_ERR_INVALID_SIZE, "max_events 0");
    CHECK(zero_trace_enable(z, -5) == ZERO_ERR_INVALID_SIZE, "max_events < 0");
    CHECK(zero_trace_enable(z, INT64_MAX / 2) == ZERO_ERR_INVALID_SIZE || zero_last_error(z) != NULL, "huge");
    CHECK(zero_trace_enable(z, 16) == ZERO_OK, "enable");
    CHECK(zero_trace_enable(z, 16) == ZERO_ERR_STATE, "enable twice");
    CHECK(zero_trace_begin(z, NULL) == ZERO_ERR_INVALID_ARG, "begin NULL name");
    CHECK(zero_trace_end(z) == ZERO_ERR_STATE, "end without begin");
    CHECK(zero_trace_save(z, NULL) == ZERO_ERR_INVALID_ARG, "NULL path");
    zero_destroy(z);
}

static void trace_unwritable_path(void) {
    job j;
    int r;
    memset(&j, 0, sizeof j);
    j.world = 2; j.stage = 2; j.steps = 1; j.max_events = 64; j.path = "/nonexistent-dir/sub/trace.json";
    CHECK(zero_run_local(2, train_rank, &j) == ZERO_OK, "training failed: %s", zero_last_error(NULL));
    for (r = 0; r < 2; r++) CHECK(j.save_result[r] == ZERO_ERR_IO, "rank %d: got %d, want ZERO_ERR_IO", r, j.save_result[r]);
}

static void trace_full_buffer_drops(void) {
    job j;
    char path[256], *txt;
    memset(&j, 0, sizeof j);
    snprintf(path, sizeof path, "%s/trace_small.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    j.world = 2; j.stage = 3; j.steps = 2; j.max_events = 5; j.path = path;
    CHECK(zero_run_local(2, train_rank, &j) == ZERO_OK, "training failed: %s", zero_last_error(NULL));
    CHECK(j.save_result[0] == ZERO_OK && j.save_result[1] == ZERO_OK, "save");
    CHECK(j.counts[0] > 5, "count %lld should pass max_events", (long long)j.counts[0]);
    txt = read_all(path);
    if (!CHECK(txt != NULL, "no file")) return;
    CHECK(count_sub(txt, "\"ph\":\"X\"") == 10, "%d X events, want 2 ranks x 5", count_sub(txt, "\"ph\":\"X\""));
    free(txt);
}

int main(void) {
    int w, s;
    test_init();
    TEST_RUN(trace_off_is_free);
    TEST_RUN(trace_bad_args);
    TEST_RUN(trace_unwritable_path);
    TEST_RUN(trace_full_buffer_drops);
    for (w = 1; w <= 3; w++)
        for (s = 0; s <= 3; s++) {
            test_begin("trace_file_every_rank_world%d_stage%d", w, s);
            trace_file_every_rank(w, s);
            test_end();
        }
    return test_summary();
}
