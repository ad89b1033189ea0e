/* tests/test_rendezvous.c - the TCP rendezvous (>>comm: rendezvous) that the NCCL
   communicator uses to share its unique id: every rank a forked process on 127.0.0.1,
   rank 0 listening at a free port. All-gathers at 1, 2 and 4 processes; a rank that
   never comes (named, within the timeout); disagreeing headers; bad addresses and
   ports; strangers on the port. Timeouts are short (1-4 s): nothing here may hang. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>      // defines: _exit
#include <sys/wait.h>    // defines: waitpid
#define TEST_SOCKETS
#include "test.h"
#define ZERO_IMPLEMENTATION
#include "../zero.h"

#define MAXP 8

typedef struct proc {
    int rank, world, timeout_ms, delay_ms;
    int64_t bytes;
    int role;                       /* 0: a rank; 1: a stray that sends garbage; 2: a stray that sends nothing */
} proc;

typedef struct outcome {
    zero_result r;
    int blobs_ok;
    double ms;                      /* how long the call took */
    char err[ZERO__MSG];
} outcome;


static unsigned char pattern(int rank, int64_t i) { return (unsigned char)(rank * 37 + i * 11 + 5); }

static void stray(int port, int role) {
    struct sockaddr_in a;
    double dl = test_now_ms() + 3000;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (test_now_ms() < dl) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            static const char junk[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
            char buf[64];
            if (role == 1 && send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL) < 0) { /* fine: dropped */ }
            if (role == 2) zero__sleep_ms(1500);   /* connected, silent, then gone */
            else while (recv(fd, buf, sizeof buf, 0) > 0) {}
            close(fd);
            return;
        }
        if (fd >= 0) close(fd);
        zero__sleep_ms(20);
    }
}

static void child(const proc *p, int port, int wfd) {
    outcome o;
    unsigned char mine[256], all[MAXP * 256];
    double t0;
    int64_t i;
    int k;
    alarm(30);
    memset(&o, 0, sizeof o);
    if (p->delay_ms) zero__sleep_ms(p->delay_ms);
    if (p->role) {
        stray(port, p->role);
    } else {
        for (i = 0; i < p->bytes; i++) mine[i] = pattern(p->rank, i);
        memset(all, 0xee, sizeof all);
        t0 = test_now_ms();
        o.r = zero__tcp_allgather("127.0.0.1", port, p->rank, p->world, mine, p->bytes, all, p->timeout_ms, o.err,
                                  sizeof o.err);
        o.ms = test_now_ms() - t0;
        o.blobs_ok = 1;
        for (k = 0; k < p->world && o.r == ZERO_OK; k++)
            for (i = 0; i < p->bytes; i++)
                if (all[k * p->bytes + i] != pattern(k, i)) o.blobs_ok = 0;
    }
    if (write(wfd, &o, sizeof o) != (ssize_t)sizeof o) _exit(2);
    _exit(0);
}

/* runs the processes at once on a fresh port; out[i] is process i's outcome */
static int run(const proc *ps, int n, outcome *out, int *port_out) {
    pid_t pid[MAXP];
    int fds[MAXP][2], port = test_free_port(), i;
    if (!CHECK(port > 0, "no free port")) return 0;
    if (port_out) *port_out = port;
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < n; i++) {
        if (!CHECK(pipe(fds[i]) == 0, "pipe")) return 0;
        pid[i] = fork();
        if (pid[i] == 0) {
            close(fds[i][0]);
            child(&ps[i], port, fds[i][1]);
        }
        close(fds[i][1]);
    }
    for (i = 0; i < n; i++) {
        int st = 0;
        memset(&out[i], 0, sizeof out[i]);
        out[i].r = (zero_result)1;
        if (read(fds[i][0], &out[i], sizeof out[i]) != (ssize_t)sizeof out[i])
            CHECK(0, "process %d reported nothing", i);
        close(fds[i][0]);
        waitpid(pid[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d ended badly (status %d)", i, st);
    }
    return 1;
}

static void gather_world(int world, int64_t bytes, int rank0_delay_ms) {
    proc ps[MAXP];
    outcome o[MAXP];
    int i;
    test_begin("allgather_world%d_bytes%lld%s", world, (long long)bytes, rank0_delay_ms ? "_rank0_late" : "");
    for (i = 0; i < world; i++) {
        memset(&ps[i], 0, sizeof ps[i]);
        ps[i].rank = i; ps[i].world = world; ps[i].bytes = bytes; ps[i].timeout_ms = 4000;
        ps[i].delay_ms = i == 0 ? rank0_delay_ms : 0;
    }
    if (run(ps, world, o, NULL))
        for (i = 0; i < world; i++)
            CHECK(o[i].r == ZERO_OK && o[i].blobs_ok, "rank %d: %s %s (blobs %s)", i, zero_result_str(o[i].r),
                  o[i].err, o[i].blobs_ok ? "ok" : "wrong");
    test_end();
}

static void missing_ranks(void) {
    /* world 4, ranks 2 and 3 never come: rank 0 names them at its timeout, and tells
       rank 1, which would otherwise wait out its own longer timeout */
    proc ps[2];
    outcome o[2];
    char want[128];
    int port = 0;
    memset(ps, 0, sizeof ps);
    ps[0].rank = 0; ps[0].world = 4; ps[0].bytes = 16; ps[0].timeout_ms = 1200;
    ps[1].rank = 1; ps[1].world = 4; ps[1].bytes = 16; ps[1].timeout_ms = 8000;
    if (!run(ps, 2, o, &port)) return;
    snprintf(want, sizeof want, "rank(s) 2, 3 never connected to 127.0.0.1:%d within 1200 ms", port);
    CHECK(o[0].r == ZERO_ERR_TIMEOUT && strstr(o[0].err, want), "rank 0: %s '%s', want '%s'",
          zero_result_str(o[0].r), o[0].err, want);
    CHECK(o[0].ms >= 1100 && o[0].ms < 3000, "rank 0 took %.0f ms for a 1200 ms timeout", o[0].ms);
    CHECK(o[1].r == ZERO_ERR_TIMEOUT && strstr(o[1].err, "gave up") && strstr(o[1].err, "2, 3 never connected"),
          "rank 1: %s '%s'", zero_result_str(o[1].r), o[1].err);
    CHECK(o[1].ms < 4000, "rank 1 took %.0f ms: it should hear from rank 0", o[1].ms);
}

static void no_rank0(void) {
    proc ps[1];
    outcome o[1];
    memset(ps, 0, sizeof ps);
    ps[0].rank = 1; ps[0].world = 2; ps[0].bytes = 8; ps[0].timeout_ms = 1000;
    if (!run(ps, 1, o, NULL)) return;
    CHECK(o[0].r == ZERO_ERR_TIMEOUT && strstr(o[0].err, "could not reach rank 0"), "%s '%s'",
          zero_result_str(o[0].r), o[0].err);
    CHECK(o[0].ms >= 900 && o[0].ms < 3000, "took %.0f ms for a 1000 ms timeout", o[0].ms);
}

static void mismatched_world(void) {
    proc ps[2];
    outcome o[2];
    memset(ps, 0, sizeof ps);
    ps[0].rank = 0; ps[0].world = 2; ps[0].bytes = 8; ps[0].timeout_ms = 4000;
    ps[1].rank = 1; ps[1].world = 3; ps[1].bytes = 8; ps[1].timeout_ms = 4000;
    if (!run(ps, 2, o, NULL)) return;
    CHECK(o[0].r == ZERO_ERR_MISMATCH && strstr(o[0].err, "says the world has 3 ranks, rank 0 says 2"),
          "rank 0: %s '%s'", zero_result_str(o[0].r), o[0].err);
    CHECK(o[1].r == ZERO_ERR_MISMATCH && strstr(o[1].err, "WORLD_SIZE"), "rank 1: %s '%s'",
          zero_result_str(o[1].r), o[1].err);
    CHECK(o[0].ms < 3000 && o[1].ms < 3000, "a mismatch must fail fast (%.0f, %.0f ms)", o[0].ms, o[1].ms);
}

static void mismatched_bytes(void) {
    proc ps[2];
    outcome o[2];
    memset(ps, 0, sizeof ps);
    ps[0].rank = 0; ps[0].world = 2; ps[0].bytes = 16; ps[0].timeout_ms = 4000;
    ps[1].rank = 1; ps[1].world = 2; ps[1].bytes = 8; ps[1].timeout_ms = 4000;
    if (!run(ps, 2, o, NULL)) return;
    CHECK(o[0].r == ZERO_ERR_MISMATCH && strstr(o[0].err, "rank 1 sends 8 bytes, rank 0 sends 16"),
          "rank 0: %s '%s'", zero_result_str(o[0].r), o[0].err);
    CHECK(o[1].r == ZERO_ERR_MISMATCH, "rank 1: %s '%s'", zero_result_str(o[1].r), o[1].err);
}

static void duplicate_rank(void) {
    proc ps[3];
    outcome o[3];
    int i;
    memset(ps, 0, sizeof ps);
    for (i = 0; i < 3; i++) { ps[i].world = 3; ps[i].bytes = 8; ps[i].timeout_ms = 4000; }
    ps[0].rank = 0; ps[1].rank = 1; ps[2].rank = 1;
    if (!run(ps, 3, o, NULL)) return;
    CHECK(o[0].r == ZERO_ERR_MISMATCH && strstr(o[0].err, "two processes claim rank 1 of 3"), "rank 0: %s '%s'",
          zero_result_str(o[0].r), o[0].err);
    for (i = 1; i < 3; i++)
        CHECK(o[i].r == ZERO_ERR_MISMATCH && o[i].ms < 3000, "process %d (rank 1): %s after %.0f ms '%s'", i,
              zero_result_str(o[i].r), o[i].ms, o[i].err);
}

static void strays_are_dropped(void) {
    /* a client sending HTTP and one sending nothing arrive before rank 1: rank 0 drops
       the first and ignores the second, and the rendezvous completes */
    proc ps[4];
    outcome o[4];
    int i;
    memset(ps, 0, sizeof ps);
    ps[0].rank = 0; ps[0].world = 2; ps[0].bytes = 32; ps[0].timeout_ms = 4000;
    ps[1].role = 1;
    ps[2].role = 2;
    ps[3].rank = 1; ps[3].world = 2; ps[3].bytes = 32; ps[3].timeout_ms = 4000; ps[3].delay_ms = 300;
    if (!run(ps, 4, o, NULL)) return;
    for (i = 0; i < 4; i += 3)
        CHECK(o[i].r == ZERO_OK && o[i].blobs_ok, "rank %d: %s '%s'", ps[i].rank, zero_result_str(o[i].r), o[i].err);
}

static void strays_named_on_timeout(void) {
    proc ps[2];
    outcome o[2];
    memset(ps, 0, sizeof ps);
    ps[0].rank = 0; ps[0].world = 2; ps[0].bytes = 8; ps[0].timeout_ms = 1000;
    ps[1].role = 1;
    if (!run(ps, 2, o, NULL)) return;
    CHECK(o[0].r == ZERO_ERR_TIMEOUT && strstr(o[0].err, "rank(s) 1 never connected") &&
              strstr(o[0].err, "1 connection(s) that were not zero.h ranks"),
          "%s '%s'", zero_result_str(o[0].r), o[0].err);
}

static void foreign_server(void) {
    /* rank 1 reaches something that is not a zero.h rank 0 */
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), port, fd, st = 0;
    char err[ZERO__MSG];
    unsigned char mine[8] = { 0 }, all[16];
    pid_t pid;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0 &&
                   getsockname(lfd, (struct sockaddr *)&a, &len) == 0, "listener"))
        return;
    port = ntohs(a.sin_port);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        /* the server: accept one connection, say something else, close */
        static const char junk[] = "SSH-2.0-OpenSSH_9.6 hello there, this is not zero.h\r\n";
        alarm(10);
        fd = accept(lfd, NULL, NULL);
        if (fd >= 0) {
            if (send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL) < 0) { /* the test notices */ }
            zero__sleep_ms(200);
            close(fd);
        }
        _exit(0);
    }
    close(lfd);
    {
        zero_result r = zero__tcp_allgather("127.0.0.1", port, 1, 2, mine, 8, all, 2000, err, sizeof err);
        CHECK(r == ZERO_ERR_COMM && strstr(err, "not a zero.h rank 0"), "%s '%s'", zero_result_str(r), err);
    }
    waitpid(pid, &st, 0);
}

static void bad_arguments(void) {
    char err[ZERO__MSG];
    unsigned char mine[8] = { 0 }, all[16];
    zero_result r;
    int busy, port;
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    r = zero__tcp_allgather("127.0.0.1", 0, 0, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(err, "1..65535"), "port 0: %s '%s'", zero_result_str(r), err);
    r = zero__tcp_allgather("127.0.0.1", 70000, 1, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(err, "port 70000"), "port 70000: %s '%s'", zero_result_str(r), err);
    r = zero__tcp_allgather("", 29500, 1, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_INVALID_ARG, "empty address: %s '%s'", zero_result_str(r), err);
    r = zero__tcp_allgather("no-such-host.invalid", 29500, 1, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_INVALID_ARG && strstr(err, "cannot resolve MASTER_ADDR 'no-such-host.invalid'"),
          "unresolvable: %s '%s'", zero_result_str(r), err);
    r = zero__tcp_allgather("127.0.0.1", 29500, 2, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_INVALID_ARG, "rank 2 of 2: %s '%s'", zero_result_str(r), err);
    /* a world of one needs no socket */
    r = zero__tcp_allgather("127.0.0.1", 29500, 0, 1, mine, 8, all, 0, err, sizeof err);
    CHECK(r == ZERO_OK && !memcmp(all, mine, 8), "world of one: %s '%s'", zero_result_str(r), err);
    /* rank 0 cannot listen where someone else does */
    busy = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (!CHECK(busy >= 0 && bind(busy, (struct sockaddr *)&a, sizeof a) == 0 && listen(busy, 1) == 0 &&
                   getsockname(busy, (struct sockaddr *)&a, &len) == 0, "listener"))
        return;
    port = ntohs(a.sin_port);
    r = zero__tcp_allgather("127.0.0.1", port, 0, 2, mine, 8, all, 1000, err, sizeof err);
    CHECK(r == ZERO_ERR_COMM && strstr(err, "cannot listen"), "busy port: %s '%s'", zero_result_str(r), err);
    close(busy);
}

int main(void) {
    test_init();
    gather_world(1, 24, 0);
    gather_world(2, 24, 0);
    gather_world(4, 128, 0);
    gather_world(4, 0, 0);
    gather_world(4, 100, 400);
    TEST_RUN(missing_ranks);
    TEST_RUN(no_rank0);
    TEST_RUN(mismatched_world);
    TEST_RUN(mismatched_bytes);
    TEST_RUN(duplicate_rank);
    TEST_RUN(strays_are_dropped);
    TEST_RUN(strays_named_on_timeout);
    TEST_RUN(foreign_server);
    TEST_RUN(bad_arguments);
    return test_summary();
}
