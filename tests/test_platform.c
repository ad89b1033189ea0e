/* tests/test_platform.c - zero.h's operating-system layer (>>platform), through its own
   names, the same program on Linux (make test) and on Windows (tests/test_windows.sh,
   cross-built with MinGW-w64 and run under Wine):
     - threads, locks and condition variables: a count under the lock, a timed wait that
       times out (ETIMEDOUT, not early, not hanging) and one that is woken;
     - files with UTF-8 names (a directory named in Latin-1 letters and CJK): create,
       exclusive create refused (EEXIST), positional writes and reads past the end, size,
       truncate, fsync, rename over an existing file, the directory's listing, remove,
       and the errno values callers test for (ENOENT, EEXIST);
     - a checkpoint saved into and loaded from that directory (zero_save / zero_load);
     - the TCP rendezvous among three ranks (threads here) over loopback, and its timeout
       naming the rank that never came, and a port another program listens on refused;
     - an NVMe tier in a missing directory: ZERO_ERR_IO with the file's path in the message. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define TEST_SOCKETS
#include "test.h"
#define ZERO_IMPLEMENTATION
#include "../zero.h"
#include "fixture.h"

static char base[512];      /* this run's scratch directory */

/* ---- threads ---- */
typedef struct counter { zero__mutex mu; zero__cond cv; long n; int flag; } counter;
static void *count_main(void *p) {
    counter *c = (counter *)p;
    int i;
    for (i = 0; i < 20000; i++) { zero__mutex_lock(&c->mu); c->n++; zero__mutex_unlock(&c->mu); }
    return NULL;
}
static void platform_threads(void) {
    counter c;
    zero__thread t[6];
    int i, started = 0;
    memset(&c, 0, sizeof c);
    zero__mutex_init(&c.mu);
    for (i = 0; i < 6; i++) started += CHECK(zero__thread_start(&t[i], count_main, &c) == 0, "thread %d did not start", i);
    for (i = 0; i < started; i++) zero__thread_join(t[i]);
    CHECK(c.n == 20000L * started, "count %ld, want %ld: the lock let increments race", c.n, 20000L * started);
    zero__mutex_destroy(&c.mu);
}

/* waits on c->cv until c->flag is set or timeout_ms pass: the last wait's result */
static int wait_flag(counter *c, int timeout_ms) {
    struct timespec dl = zero__deadline(timeout_ms);
    int r = 0;
    zero__mutex_lock(&c->mu);
    while (!c->flag && (r = zero__cond_timedwait(&c->cv, &c->mu, &dl)) != ETIMEDOUT) {}
    zero__mutex_unlock(&c->mu);
    return r;
}

static void platform_cond_timeout(void) {
    counter c;
    double t0, ms;
    int r;
    memset(&c, 0, sizeof c);
    zero__mutex_init(&c.mu); zero__cond_init(&c.cv);
    t0 = test_now_ms();
    r = wait_flag(&c, 150);
    ms = test_now_ms() - t0;
    CHECK(r == ETIMEDOUT, "the wait ended with %d, not ETIMEDOUT", r);
    CHECK(ms >= 140.0 && ms < 5000.0, "a 150 ms timeout took %.1f ms", ms);
    zero__cond_destroy(&c.cv); zero__mutex_destroy(&c.mu);
}

static void *wake_main(void *p) {
    counter *c = (counter *)p;
    zero__sleep_us(30000.0);
    zero__mutex_lock(&c->mu);
    c->flag = 1;
    zero__cond_broadcast(&c->cv);
    zero__mutex_unlock(&c->mu);
    return NULL;
}
static void platform_cond_wake(void) {
    counter c;
    zero__thread t;
    double t0, ms;
    int r;
    memset(&c, 0, sizeof c);
    zero__mutex_init(&c.mu); zero__cond_init(&c.cv);
    t0 = test_now_ms();
    if (!CHECK(zero__thread_start(&t, wake_main, &c) == 0, "no thread")) return;
    r = wait_flag(&c, 20000);
    ms = test_now_ms() - t0;
    zero__thread_join(t);
    CHECK(c.flag && r != ETIMEDOUT, "the waiter was not woken (r %d)", r);
    CHECK(ms >= 25.0 && ms < 10000.0, "woken after %.1f ms (the waker slept 30)", ms);
    zero__cond_destroy(&c.cv); zero__mutex_destroy(&c.mu);
}

/* ---- files ---- */
#define UTF8_DIR "donn\xc3\xa9" "es_\xe7\x9b\xae\xe5\xbd\x95"     /* "données_目录" */

static int file_has(const char *path, const char *want) {
    char buf[64];
    int fd = zero__os_open(path, O_RDONLY, 0), ok;
    int64_t n;
    if (fd < 0) return 0;
    n = zero__os_pread(fd, buf, sizeof buf, 0);
    ok = n == (int64_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
    zero__os_close(fd);
    return ok;
}
static int write_file(const char *path, const char *text) {
    int fd = zero__os_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), ok;
    if (fd < 0) return 0;
    ok = zero__os_pwrite(fd, text, strlen(text), 0) == (int64_t)strlen(text);
    return zero__os_close(fd) == 0 && ok;
}

static void platform_files(void) {
    char dir[600], a[700], b[700], c[700], buf[8];
    const char *name;
    zero__os_dir d;
    int fd, e, seen_a = 0, seen_b = 0, other = 0;
    int64_t off = ((int64_t)1 << 20) + 3;
    snprintf(dir, sizeof dir, "%s/" UTF8_DIR, base);
    snprintf(a, sizeof a, "%s/a\xc3\xa9.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    snprintf(c, sizeof c, "%s/missing/c.bin", dir);
    if (!CHECK((e = zero__os_mkdir(dir)) == 0, "mkdir %s: %d", dir, e)) return;
    CHECK((e = zero__os_mkdir(dir)) == -EEXIST, "a second mkdir gave %d, not -EEXIST", e);
    fd = zero__os_open(a, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (!CHECK(fd >= 0, "create %s: %d", a, fd)) return;
    CHECK((e = zero__os_open(a, O_RDWR | O_CREAT | O_EXCL, 0600)) == -EEXIST, "exclusive create of an existing file: %d", e);
    CHECK(zero__os_pwrite(fd, "xyz", 3, off) == 3, "pwrite past the end");
    CHECK(zero__os_fsize(fd) == off + 3, "size %lld, want %lld", (long long)zero__os_fsize(fd), (long long)(off + 3));
    CHECK(zero__os_pread(fd, buf, 3, off) == 3 && memcmp(buf, "xyz", 3) == 0, "pread did not read back");
    CHECK(zero__os_pread(fd, buf, 2, 5) == 2 && buf[0] == 0 && buf[1] == 0, "the hole does not read as zeros");
    CHECK(zero__os_pread(fd, buf, 8, off + 3) == 0, "a read at the end is not 0 bytes");
    CHECK(zero__os_truncate(fd, 4096) == 0 && zero__os_fsize(fd) == 4096, "truncate to 4096");
    CHECK(zero__os_allocate(fd, 8192) == 0 && zero__os_fsize(fd) >= 8192, "allocate 8192");
    CHECK(zero__os_fsync(fd) == 0, "fsync");
    CHECK(zero__os_close(fd) == 0, "close");
    CHECK((e = zero__os_open(c, O_RDONLY, 0)) == -ENOENT, "open in a missing directory: %d, not -ENOENT", e);
    CHECK(write_file(a, "new") && write_file(b, "old"), "writing a and b");
    CHECK((e = zero__os_rename(a, b)) == 0, "rename over an existing file: %d", e);
    CHECK(file_has(b, "new"), "b does not hold a's bytes after the rename");
    CHECK(zero__os_open(a, O_RDONLY, 0) == -ENOENT, "a is still there after the rename");
    CHECK(write_file(a, "again"), "writing a again");
    if (CHECK(zero__os_opendir(&d, dir) == 0, "opendir %s", dir)) {
        while ((name = zero__os_readdir(&d)) != NULL) {
            if (!strcmp(name, "a\xc3\xa9.bin")) seen_a++;
            else if (!strcmp(name, "b.bin")) seen_b++;
            else if (strcmp(name, ".") && strcmp(name, "..")) other++;
        }
        zero__os_closedir(&d);
        CHECK(seen_a == 1 && seen_b == 1 && other == 0, "listing: a %d, b %d, others %d", seen_a, seen_b, other);
    }
    CHECK(zero__os_unlink(a) == 0 && zero__os_unlink(b) == 0, "unlink");
    CHECK((e = zero__os_unlink(a)) == -ENOENT, "a second unlink gave %d, not -ENOENT", e);
    /* the NVMe tier's unbuffered open (O_DIRECT, FILE_FLAG_NO_BUFFERING) at its alignment */
    fd = zero__os_open(a, O_RDWR | O_CREAT | O_EXCL | ZERO__O_DIRECT, 0600);
    if (fd == -EINVAL) {
        test_skip("this filesystem refuses unbuffered files");
    } else if (CHECK(fd >= 0, "unbuffered create: %d", fd)) {
        char *raw = (char *)malloc(2 * ZERO__IO_ALIGN), *p = (char *)(((uintptr_t)raw + ZERO__IO_ALIGN - 1) &
                                                                   ~(uintptr_t)(ZERO__IO_ALIGN - 1));
        memset(p, 0x5a, ZERO__IO_ALIGN);
        CHECK(zero__os_pwrite(fd, p, ZERO__IO_ALIGN, ZERO__IO_ALIGN) == ZERO__IO_ALIGN, "an aligned unbuffered write");
        memset(p, 0, ZERO__IO_ALIGN);
        CHECK(zero__os_pread(fd, p, ZERO__IO_ALIGN, ZERO__IO_ALIGN) == ZERO__IO_ALIGN && p[0] == 0x5a &&
              p[ZERO__IO_ALIGN - 1] == 0x5a, "an aligned unbuffered read");
        zero__os_close(fd);
        zero__os_unlink(a);
        free(raw);
    }
}

/* ---- a checkpoint in the UTF-8 directory ---- */
static zero_result ck_model(zero_ctx **z, zero_param *w) {
    zero_desc d;
    zero_module m;
    zero_result r;
    fx_desc(&d, NULL, 0, ZERO_F32, ZERO_OPTIM_ADAMW, 0.01);
    if ((r = zero_create(z, &d)) != ZERO_OK) return r;
    if ((r = fx_module(*z, "layer", 0, &m)) != ZERO_OK || (r = fx_param(*z, m, "w", 5, 3, 0, w)) != ZERO_OK ||
        (r = zero_build(*z)) != ZERO_OK)
        return r;
    return ZERO_OK;
}
static void platform_ckpt_utf8(void) {
    char dir[600];
    float v[15], got[15];
    zero_ctx *z = NULL, *y = NULL;
    zero_param w, w2;
    int i;
    snprintf(dir, sizeof dir, "%s/" UTF8_DIR "_ckpt", base);
    for (i = 0; i < 15; i++) v[i] = 0.25f * (float)i - 1.0f;
    if (CHECK(ck_model(&z, &w) == ZERO_OK, "model: %s", zero_last_error(z)) &&
        CHECK(zero_param_set_f32(z, w, v) == ZERO_OK, "set: %s", zero_last_error(z)) &&
        CHECK(zero_save(z, dir) == ZERO_OK, "save into %s: %s", dir, zero_last_error(z)) &&
        CHECK(zero_save(z, dir) == ZERO_OK, "a second save (the rename over the manifest): %s", zero_last_error(z)) &&
        CHECK(ck_model(&y, &w2) == ZERO_OK, "model: %s", zero_last_error(y)) &&
        CHECK(zero_load(y, dir) == ZERO_OK, "load from %s: %s", dir, zero_last_error(y)) &&
        CHECK(zero_gather_params_f32(y, got) == ZERO_OK, "gather: %s", zero_last_error(y)))
        CHECK(memcmp(v, got, sizeof v) == 0, "the loaded params are not the saved ones");
    zero_destroy(z);
    zero_destroy(y);
}

/* ---- the rendezvous ---- */
typedef struct rdv_job { int port, rank, world, timeout_ms; zero_result r; unsigned char mine[100], all[300]; char err[512]; } rdv_job;
static void *rdv_main(void *p) {
    rdv_job *j = (rdv_job *)p;
    j->r = zero__tcp_allgather("127.0.0.1", j->port, j->rank, j->world, j->mine, sizeof j->mine, j->all,
                               j->timeout_ms, j->err, sizeof j->err);
    return NULL;
}
static void platform_rendezvous(void) {
    rdv_job j[3];
    zero__thread t[3];
    int i, k, port = test_free_port(), bad = 0;
    if (!CHECK(port > 0, "no free port")) return;
    for (i = 0; i < 3; i++) {
        memset(&j[i], 0, sizeof j[i]);
        j[i].port = port; j[i].rank = i; j[i].world = 3; j[i].timeout_ms = 20000;
        for (k = 0; k < 100; k++) j[i].mine[k] = (unsigned char)(i * 100 + k);
    }
    for (i = 0; i < 3; i++) CHECK(zero__thread_start(&t[i], rdv_main, &j[i]) == 0, "thread");
    for (i = 0; i < 3; i++) zero__thread_join(t[i]);
    for (i = 0; i < 3; i++) {
        CHECK(j[i].r == ZERO_OK, "rank %d: %s: %s", i, zero_result_str(j[i].r), j[i].err);
        for (k = 0; k < 300; k++) bad += j[i].all[k] != (unsigned char)((k / 100) * 100 + k % 100);
    }
    CHECK(bad == 0, "%d bytes of the gathered blobs are wrong", bad);
}
static void platform_rendezvous_timeout(void) {
    rdv_job j;
    double t0 = test_now_ms(), ms;
    memset(&j, 0, sizeof j);
    j.port = test_free_port(); j.rank = 0; j.world = 2; j.timeout_ms = 300;
    rdv_main(&j);
    ms = test_now_ms() - t0;
    CHECK(j.r == ZERO_ERR_TIMEOUT, "rank 0 alone: %s (%s), not a timeout", zero_result_str(j.r), j.err);
    CHECK(strstr(j.err, "rank(s) 1 never connected") != NULL, "the message does not name rank 1: %s", j.err);
    CHECK(ms >= 250.0 && ms < 10000.0, "a 300 ms timeout took %.1f ms", ms);
}

/* another program listens on the port: rank 0 says so at once (on Windows, SO_REUSEADDR
   would have let it bind the same port and wait there for ranks that go elsewhere; Wine
   gives SO_REUSEADDR Linux's meaning, so under Wine this checks the refusal, not the
   option zero.h picks) */
static void platform_rendezvous_port_taken(void) {
    rdv_job j;
    struct sockaddr_in a;
    zero__sock s;
    double t0, ms;
    if (!CHECK(zero__net_begin() == 0, "no sockets")) return;
    s = zero__sock_open(AF_INET);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&j, 0, sizeof j);
    j.port = test_free_port(); j.rank = 0; j.world = 2; j.timeout_ms = 5000;
    a.sin_port = htons((unsigned short)j.port);
    if (CHECK(s != ZERO__SOCK_NONE && bind(s, (const struct sockaddr *)&a, sizeof a) == 0 && listen(s, 4) == 0,
              "the other listener on port %d", j.port)) {
        t0 = test_now_ms();
        rdv_main(&j);
        ms = test_now_ms() - t0;
        CHECK(j.r == ZERO_ERR_COMM && strstr(j.err, "cannot listen"), "rank 0 on a taken port: %s (%s)",
              zero_result_str(j.r), j.err);
        CHECK(ms < 2500.0, "it took %.0f ms to say so (the timeout is 5000)", ms);
    }
    if (s != ZERO__SOCK_NONE) zero__sock_close(s);
    zero__net_end();
}

/* ---- the NVMe tier in a missing directory ---- */
static void platform_nvme_missing(void) {
    char dir[600];
    zero_desc d;
    zero_module m;
    zero_param w;
    zero_ctx *z = NULL;
    zero_result r;
    snprintf(dir, sizeof dir, "%s/no/such/dir", base);
    fx_desc(&d, NULL, 3, ZERO_BF16, ZERO_OPTIM_ADAMW, 0.01);
    d.offload_optimizer = ZERO_OFFLOAD_NVME;
    d.offload.nvme_dirs[0] = dir;
    if (!CHECK(zero_create(&z, &d) == ZERO_OK, "create: %s", zero_last_error(z))) return;
    if (CHECK(fx_module(z, "layer", 0, &m) == ZERO_OK && fx_param(z, m, "w", 64, 64, 0, &w) == ZERO_OK, "model")) {
        r = zero_build(z);
        CHECK(r == ZERO_ERR_IO, "zero_build gave %s, not ZERO_ERR_IO", zero_result_str(r));
        CHECK(strstr(zero_last_error(z), "cannot create the offload file") && strstr(zero_last_error(z), dir),
              "the message does not name the file: %s", zero_last_error(z));
    }
    zero_destroy(z);
}

/* removes what the cases left in base (one level of directories) */
static void clean(const char *dir) {
    zero__os_dir d;
    const char *name;
    char p[1200];
    if (zero__os_opendir(&d, dir) != 0) return;
    while ((name = zero__os_readdir(&d)) != NULL) {
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (zero__os_unlink(p) != 0) clean(p);
    }
    zero__os_closedir(&d);
#ifdef _WIN32
    {
        wchar_t w[ZERO__WPATH];
        if (zero__os_wide(dir, w)) RemoveDirectoryW(w);
    }
#else
    rmdir(dir);
#endif
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    test_init();
    snprintf(base, sizeof base, "%s/zero_platform_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base)) { fprintf(stderr, "mkdtemp %s failed\n", base); return 1; }
    TEST_RUN(platform_threads);
    TEST_RUN(platform_cond_timeout);
    TEST_RUN(platform_cond_wake);
    TEST_RUN(platform_files);
    TEST_RUN(platform_ckpt_utf8);
    TEST_RUN(platform_rendezvous);
    TEST_RUN(platform_rendezvous_timeout);
    TEST_RUN(platform_rendezvous_port_taken);
    TEST_RUN(platform_nvme_missing);
    clean(base);
    return test_summary();
}
