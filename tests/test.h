/* tests/test.h - the smallest test harness that the zero.h tests share.

   Protocol (a runner counts lines): every test case prints exactly one line on
   stdout, "PASS <name>", "FAIL <name>: <file:line: detail>" or "SKIP <name>: <reason>",
   and test_summary() returns the exit code (non-zero if any case failed). Details of
   every failed CHECK also go to stderr.

       static void my_test(void) { CHECK(1 + 1 == 2, "arithmetic broke: %d", 1 + 1); }
       int main(void) {
           test_init();
           TEST_RUN(my_test);                           // named after the function
           test_begin("case%d_stage%d", 3, 1); ...; test_end();   // named at run time
           return test_summary();
       }

   CHECK is an expression (1 if it held, 0 if not), so "if (!CHECK(...)) return;"
   stops a test at its first broken precondition. CHECK may be called from any
   thread (rank threads of zero_run_local): the state is guarded by a mutex.

   A case that cannot run here (no GPU, running as root) calls test_skip("reason")
   and returns: its line is "SKIP <name>: <reason>", never PASS. A case that is not
   started at all is reported the same way: test_begin(...); test_skip(...); test_end().

   A watchdog (alarm) turns a hang into "FAIL <name>: watchdog ..." and exit 1;
   its limit is ZERO_TEST_TIMEOUT seconds (default 600, 0 = off).

   Test programs define _POSIX_C_SOURCE before any include (clock_gettime, alarm). On
   Windows (tests/test_windows.sh) the same harness runs on the native API: SRW lock,
   a watchdog thread, QueryPerformanceCounter, Winsock. */
#ifndef ZERO_TEST_H
#define ZERO_TEST_H

#if defined(__MINGW32__)   /* (built with __USE_MINGW_ANSI_STDIO=1: C99's printf, %zu and all) */
#  define TEST__PRINTF(a, b) __attribute__((format(gnu_printf, a, b)))
#  define TEST__UNUSED __attribute__((unused))
#elif defined(__GNUC__) || defined(__clang__)
#  define TEST__PRINTF(a, b) __attribute__((format(printf, a, b)))
#  define TEST__UNUSED __attribute__((unused))
#else
#  define TEST__PRINTF(a, b)
#  define TEST__UNUSED
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <stdint.h>
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <io.h>
typedef SRWLOCK test__mutex;
#define TEST__MUTEX_INIT SRWLOCK_INIT
#define test__lock(m) AcquireSRWLockExclusive(m)
#define test__unlock(m) ReleaseSRWLockExclusive(m)
/* POSIX's environment setters, on the CRT's environment (the one getenv reads) */
TEST__UNUSED static int setenv(const char *name, const char *value, int overwrite) {
    if (!overwrite && getenv(name)) return 0;
    return _putenv_s(name, value) == 0 ? 0 : -1;
}
TEST__UNUSED static int unsetenv(const char *name) { return _putenv_s(name, "") == 0 ? 0 : -1; }
/* POSIX's mkdtemp: tmpl ends in XXXXXX, made unique, created */
TEST__UNUSED static char *mkdtemp(char *tmpl) {
    if (_mktemp_s(tmpl, strlen(tmpl) + 1) != 0) return NULL;
    return CreateDirectoryA(tmpl, NULL) ? tmpl : NULL;
}
#else
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
typedef pthread_mutex_t test__mutex;
#define TEST__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define test__lock(m) pthread_mutex_lock(m)
#define test__unlock(m) pthread_mutex_unlock(m)
#endif


#define TEST__MAX_DETAIL_LINES 20   /* per case, on stderr: a broken loop prints 20, not 10000 */

typedef struct test__state {
    test__mutex mu;
    char name[192];                 /* the running case ("" between cases) */
    char first[768];                /* its first failure, for the FAIL line */
    char skip[256];                 /* why it did not run ("" when it ran), for the SKIP line */
    int case_failures;
    int passed, failed, skipped;
} test__state;

static test__state test__s = { TEST__MUTEX_INIT, "", "", "", 0, 0, 0, 0 };

TEST__UNUSED TEST__PRINTF(3, 4)
static int test__fail(const char *file, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    test__lock(&test__s.mu);
    if (test__s.case_failures == 0)
        snprintf(test__s.first, sizeof test__s.first, "%s:%d: %s", file, line, msg);
    if (test__s.case_failures < TEST__MAX_DETAIL_LINES)
        fprintf(stderr, "  %s: %s:%d: %s\n", test__s.name[0] ? test__s.name : "(no case)", file, line, msg);
    test__s.case_failures++;
    test__unlock(&test__s.mu);
    return 0;
}

/* CHECK(cond, fmt, ...): records a failure with file:line when cond is false. */
#define CHECK(cond, ...) ((cond) ? 1 : test__fail(__FILE__, __LINE__, __VA_ARGS__))

/* A watchdog: a hung library must not hang the runner. Only async-signal-safe calls. */
#ifdef _WIN32
static DWORD WINAPI test__watchdog(LPVOID secs) {     /* a thread that wakes once */
    Sleep((DWORD)(uintptr_t)secs * 1000u);
    printf("FAIL %s: watchdog: the test program hung (ZERO_TEST_TIMEOUT)\n", test__s.name);
    fflush(stdout);
    ExitProcess(1);
    return 0;
}
static void test__watchdog_start(unsigned secs) {
    HANDLE h = CreateThread(NULL, 0, test__watchdog, (LPVOID)(uintptr_t)secs, 0, NULL);
    if (h) CloseHandle(h);
}
static void test__watchdog_stop(void) {}
#else
static void test__on_alarm(int sig) {
    static const char pre[] = "FAIL ";
    static const char post[] = ": watchdog: the test program hung (ZERO_TEST_TIMEOUT)\n";
    (void)sig;
    if (write(1, pre, sizeof pre - 1) < 0) { /* nothing to do */ }
    if (write(1, test__s.name, strlen(test__s.name)) < 0) { /* nothing to do */ }
    if (write(1, post, sizeof post - 1) < 0) { /* nothing to do */ }
    _exit(1);
}
static void test__watchdog_start(unsigned secs) { signal(SIGALRM, test__on_alarm); alarm(secs); }
static void test__watchdog_stop(void) { alarm(0); }
#endif

TEST__UNUSED static void test_init(void) {
    const char *e = getenv("ZERO_TEST_TIMEOUT");
    unsigned secs = e ? (unsigned)strtoul(e, NULL, 10) : 600u;
#ifdef _WIN32
    setvbuf(stdout, NULL, _IONBF, 0);    /* (the CRT's _IOLBF is full buffering) */
#else
    setvbuf(stdout, NULL, _IOLBF, 0);
#endif
    snprintf(test__s.name, sizeof test__s.name, "(startup)");
    if (secs) test__watchdog_start(secs);
}

TEST__UNUSED TEST__PRINTF(1, 2)
static void test_begin(const char *fmt, ...) {
    va_list ap;
    test__lock(&test__s.mu);
    va_start(ap, fmt);
    vsnprintf(test__s.name, sizeof test__s.name, fmt, ap);
    va_end(ap);
    test__s.case_failures = 0;
    test__s.first[0] = 0;
    test__s.skip[0] = 0;
    test__unlock(&test__s.mu);
}

/* test_skip(fmt, ...): the running case did not run here; test_end prints
   "SKIP <name>: <reason>" (FAIL still wins if a CHECK failed before). */
TEST__UNUSED TEST__PRINTF(1, 2)
static void test_skip(const char *fmt, ...) {
    va_list ap;
    test__lock(&test__s.mu);
    va_start(ap, fmt);
    vsnprintf(test__s.skip, sizeof test__s.skip, fmt, ap);
    va_end(ap);
    if (!test__s.skip[0]) snprintf(test__s.skip, sizeof test__s.skip, "skipped");
    test__unlock(&test__s.mu);
}

/* Prints the case's line; returns 1 if it passed or was skipped. */
TEST__UNUSED static int test_end(void) {
    int ok;
    test__lock(&test__s.mu);
    ok = test__s.case_failures == 0;
    if (ok && test__s.skip[0]) {
        printf("SKIP %s: %s\n", test__s.name, test__s.skip);
        test__s.skipped++;
    } else if (ok) {
        printf("PASS %s\n", test__s.name);
        test__s.passed++;
    } else {
        if (test__s.case_failures > 1)
            printf("FAIL %s: %s (+%d more)\n", test__s.name, test__s.first, test__s.case_failures - 1);
        else
            printf("FAIL %s: %s\n", test__s.name, test__s.first);
        test__s.failed++;
    }
    fflush(stdout);
    snprintf(test__s.name, sizeof test__s.name, "(between cases)");
    test__unlock(&test__s.mu);
    return ok;
}

/* ZERO_TEST_ONLY=a,b: run only the TEST_RUN cases whose names start with a or b (the others
   are neither run nor counted), for a slow machine or emulator (tests/test_arm64.sh) */
TEST__UNUSED static int test_selected(const char *name) {
    const char *e = getenv("ZERO_TEST_ONLY"), *p;
    if (!e || !*e) return 1;
    for (p = e; *p;) {
        size_t n = strcspn(p, ",");
        if (n && strncmp(name, p, n) == 0) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}
#define TEST_RUN(fn) (test_selected(#fn) ? (test_begin("%s", #fn), fn(), (void)test_end()) : (void)0)

#ifdef TEST_SOCKETS    /* define before including test.h: a loopback port that was free a moment ago */
#ifdef _WIN32
TEST__UNUSED static int test_free_port(void) {
    struct sockaddr_in a;
    int len = (int)sizeof a, port = 0;
    WSADATA w;
    SOCKET fd;
    if (WSAStartup(MAKEWORD(2, 2), &w) != 0) return 0;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd != INVALID_SOCKET && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd != INVALID_SOCKET) closesocket(fd);
    WSACleanup();
    return port;
}
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
TEST__UNUSED static int test_free_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}
#endif
#endif

/* Summary on stderr (stdout carries only PASS/FAIL/SKIP lines); the program's exit code. */
TEST__UNUSED static int test_summary(void) {
    int failed;
    test__lock(&test__s.mu);
    failed = test__s.failed;
    fprintf(stderr, "%d passed, %d failed, %d skipped\n", test__s.passed, test__s.failed, test__s.skipped);
    test__unlock(&test__s.mu);
    test__watchdog_stop();
    return failed ? 1 : 0;
}

/* Monotonic milliseconds, for "returned quickly" assertions. */
/* a whole file in a malloc'd buffer with a NUL after it (the caller frees); *n its bytes;
   NULL when it cannot be read */
TEST__UNUSED static char *test_slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    char *b;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (char *)malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) { free(b); b = NULL; }
    if (b) b[*n] = 0;
    fclose(f);
    return b;
}
TEST__UNUSED static double test_now_ms(void) {
#ifdef _WIN32
    LARGE_INTEGER t, f;
    QueryPerformanceCounter(&t);
    QueryPerformanceFrequency(&f);
    return (double)t.QuadPart * 1e3 / (double)f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
#endif
}

#endif /* ZERO_TEST_H */
