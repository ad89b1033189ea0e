/* tests/mpi/mpi_nodes.c - the MPI communicator's node topology (ZeRO++), for tests/test_mpi.sh
   (built with mpicc -DZERO_MPI into build/mpi/mpi_nodes and run under mpirun). Modes:

     mpi_nodes nodes          for every ranks_per_node that divides the world (1, 2, 4, 8):
                              split, check the node and cross-node endpoints' sizes and ranks,
                              an all_gather, a reduce_scatter and an all_to_all on each (and an
                              all_to_all on the world) against the values they must give, and
                              the bytes counted within and across nodes; the last split stays
                              on the world endpoint, which destroys it. Rank 0 prints
                              "PASS nodes_np<N>" or "FAIL nodes_np<N>"; a rank prints what failed.
     mpi_nodes mismatch       nodes of 2: in each node rank 1 passes all_to_all one byte more,
                              then world rank 1 does the same on the world: every rank prints
                              "rank <r>: <result>: <message>" for both
     mpi_nodes split_mismatch world rank 1 splits into nodes of 1, the others of 2: the same
     mpi_nodes timeout R MS   nodes of 2: world rank R sleeps 2*MS before an all_to_all across
                              nodes with timeout MS; every rank prints what it got, whether
                              the world endpoint was marked broken when the cross-node one was
                              destroyed, meets the others in a world barrier and exits 3
                              (without MPI_Finalize: the lost rank's requests would hold it up)
     mpi_nodes split_timeout R MS  world rank R comes 2*MS late to a split whose timeout is MS:
                              the others name it; every rank prints what it got, exits 3

   The failure modes print one line per rank and case, which the script checks, and exit 3
   (with --mca orte_abort_on_non_zero_status 0 mpirun then lets every rank finish). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>    // defines: printf, fprintf
#include <stdlib.h>   // defines: atoi, getenv
#include <string.h>   // defines: strcmp, memcmp
#include <time.h>     // defines: nanosleep, clock_gettime
#include <unistd.h>   // defines: _exit
#define ZERO_IMPLEMENTATION
#include "../../zero.h"

#define TO 10000           // ms: the timeout of the collectives that must succeed
static int nfail;
static int me;             // world rank

#define EXPECT(cond, ...) do { if (!(cond)) { nfail++; printf("rank %d: FAIL %s:%d: ", me, __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } } while (0)

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// the world rank of member k of an endpoint: the world's, a node's, or a cross-node one
typedef struct { int ns, kind; } view;     // kind 0 world, 1 node, 2 cross
static int world_of(view v, int k) {
    return v.kind == 0 ? k : v.kind == 1 ? me / v.ns * v.ns + k : k * v.ns + me % v.ns;
}

static unsigned char a2a_byte(int from, int to, int i) { return (unsigned char)((from * 31 + to * 7 + i) & 0xff); }

// all_to_all of `bytes` per chunk on e: chunk k carries (me -> world k) bytes
static void check_all_to_all(zero_comm *e, view v, int64_t bytes, const char *what) {
    int m = e->size;
    unsigned char *s = (unsigned char *)calloc(1, (size_t)(bytes * m) + 1);
    unsigned char *r = (unsigned char *)malloc((size_t)(bytes * m) + 1);
    for (int k = 0; k < m; k++)
        for (int64_t i = 0; i < bytes; i++) s[k * bytes + i] = a2a_byte(me, world_of(v, k), (int)i);
    memset(r, 0xee, (size_t)(bytes * m) + 1);
    zero_result x = e->vt->all_to_all(e, s, r, bytes, TO);
    EXPECT(x == ZERO_OK, "%s all_to_all(%lld): %s %s", what, (long long)bytes, zero_result_str(x), e->err);
    if (x == ZERO_OK) {
        int bad = -1;
        for (int k = 0; k < m && bad < 0; k++)
            for (int64_t i = 0; i < bytes; i++)
                if (r[k * bytes + i] != a2a_byte(world_of(v, k), me, (int)i)) { bad = k; break; }
        EXPECT(bad < 0, "%s all_to_all(%lld): chunk from member %d (world rank %d) is wrong", what, (long long)bytes,
               bad, bad < 0 ? -1 : world_of(v, bad));
        EXPECT(r[bytes * m] == 0xee, "%s all_to_all wrote past the end", what);
    }
    free(s);
    free(r);
}

// all_gather and an f32 reduce_scatter on e, with values that say where they came from
static void check_gather_scatter(zero_comm *e, view v, const char *what) {
    enum { C = 7 };
    int m = e->size, j = e->rank;
    int32_t mine[5], all[5 * 64];
    float in[C * 64], out[C];
    for (int i = 0; i < 5; i++) mine[i] = me * 100 + i;
    zero_result x = e->vt->all_gather(e, mine, all, sizeof mine, TO);
    EXPECT(x == ZERO_OK, "%s all_gather: %s %s", what, zero_result_str(x), e->err);
    for (int k = 0; k < m && x == ZERO_OK; k++)
        for (int i = 0; i < 5; i++)
            if (all[k * 5 + i] != world_of(v, k) * 100 + i) {
                EXPECT(0, "%s all_gather: slot %d holds %d, not world rank %d's %d", what, k, all[k * 5 + i],
                       world_of(v, k), world_of(v, k) * 100 + i);
                k = m;
                break;
            }
    for (int k = 0; k < m; k++)
        for (int i = 0; i < C; i++) in[k * C + i] = (float)(me * 3 + k * 5 + i);   // small integers: exact sums
    x = e->vt->reduce_scatter(e, in, ZERO_F32, out, ZERO_F32, C, 0, TO);
    EXPECT(x == ZERO_OK, "%s reduce_scatter: %s %s", what, zero_result_str(x), e->err);
    for (int i = 0; i < C && x == ZERO_OK; i++) {
        float want = 0;
        for (int k = 0; k < m; k++) want += (float)(world_of(v, k) * 3 + j * 5 + i);
        if (out[i] != want) {
            EXPECT(0, "%s reduce_scatter: element %d is %g, want %g", what, i, (double)out[i], (double)want);
            break;
        }
    }
}

static void zero_counts(zero_comm *c) {
    zero_comm *e[3] = { c, c->intra, c->inter };
    for (int i = 0; i < 3; i++) if (e[i]) e[i]->sent_within = e[i]->sent_across = 0;
}

// the bytes the library's collective wrappers count, per endpoint and summed by zero_comm_bytes
static void check_counts(zero_comm *c, int ns) {
    static zero_ctx zc;                   // the wrappers read only its desc.timeout_ms
    int n = c->size, nn = n / ns;
    int64_t B = 40, C = 6, w, a, want_w, want_a;
    char s[40 * 64], r[40 * 64];
    float f[6 * 64], g[6];
    zc.desc.timeout_ms = TO;
    memset(s, 1, sizeof s);
    for (int i = 0; i < 6 * 64; i++) f[i] = 1.0f;
    zero_counts(c);
    EXPECT(zero__c_all_gather(&zc, c, s, r, B) == ZERO_OK, "counted all_gather: %s", c->err);
    EXPECT(c->sent_within == B * (ns - 1) && c->sent_across == B * (n - ns),
           "world all_gather of %lld bytes, nodes of %d: counted %lld within, %lld across; want %lld, %lld",
           (long long)B, ns, (long long)c->sent_within, (long long)c->sent_across, (long long)(B * (ns - 1)),
           (long long)(B * (n - ns)));
    EXPECT(zero__c_all_to_all(&zc, c->intra, s, r, B) == ZERO_OK, "counted node all_to_all: %s", c->intra->err);
    EXPECT(zero__c_all_to_all(&zc, c->inter, s, r, B) == ZERO_OK, "counted cross all_to_all: %s", c->inter->err);
    EXPECT(zero__c_reduce_scatter(&zc, c->inter, f, ZERO_F32, g, ZERO_F32, C, 0) == ZERO_OK, "counted cross "
           "reduce_scatter: %s", c->inter->err);
    EXPECT(c->intra->sent_across == 0 && c->inter->sent_within == 0, "a node endpoint counted bytes across nodes "
           "(%lld) or a cross-node one within (%lld)", (long long)c->intra->sent_across, (long long)c->inter->sent_within);
    want_w = B * (ns - 1) * 2;
    want_a = B * (n - ns) + B * (nn - 1) + C * 4 * (nn - 1);
    zero_comm_bytes(c, &w, &a);
    EXPECT(w == want_w && a == want_a, "zero_comm_bytes with nodes of %d: %lld within, %lld across; want %lld, %lld",
           ns, (long long)w, (long long)a, (long long)want_w, (long long)want_a);
}

static int mode_nodes(zero_comm *c) {
    int n = c->size, last = 0;
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int want_env = env && n % atoi(env) == 0 ? atoi(env) : 0;
    EXPECT(zero_comm_ranks_per_node(c) == want_env, "from_env: ranks per node %d; OMPI_COMM_WORLD_LOCAL_SIZE=%s",
           zero_comm_ranks_per_node(c), env ? env : "(unset)");
    for (int ns = 1; ns <= n; ns *= 2) if (n % ns == 0) last = ns;
    check_all_to_all(c, (view){ 0, 0 }, 12, "world");
    check_all_to_all(c, (view){ 0, 0 }, 3, "world");
    check_all_to_all(c, (view){ 0, 0 }, 0, "world");
    for (int ns = 1; ns <= n; ns *= 2) {
        char what[2][32];
        zero_comm *in = NULL, *x = NULL;
        if (n % ns) continue;
        zero_result r = c->vt->split(c, ns, &in, &x);
        EXPECT(r == ZERO_OK, "split(%d): %s %s", ns, zero_result_str(r), c->err);
        if (r != ZERO_OK) return 1;
        EXPECT(in->size == ns && in->rank == me % ns && in->scope == ZERO__SCOPE_NODE,
               "nodes of %d: node endpoint is rank %d of %d (scope %d)", ns, in->rank, in->size, in->scope);
        EXPECT(x->size == n / ns && x->rank == me / ns && x->scope == ZERO__SCOPE_CROSS,
               "nodes of %d: cross-node endpoint is rank %d of %d (scope %d)", ns, x->rank, x->size, x->scope);
        snprintf(what[0], sizeof what[0], "node(ns=%d)", ns);
        snprintf(what[1], sizeof what[1], "cross(ns=%d)", ns);
        for (int k = 0; k < 2; k++) {
            zero_comm *e = k ? x : in;
            view v = { ns, k + 1 };
            check_gather_scatter(e, v, what[k]);
            check_all_to_all(e, v, 20, what[k]);
            check_all_to_all(e, v, 1, what[k]);
        }
        c->intra = in;
        c->inter = x;
        EXPECT(zero_comm_set_nodes(c, ns) == ZERO_OK, "zero_comm_set_nodes(%d): %s", ns, zero_last_error(NULL));
        check_counts(c, ns);
        if (ns != last) {           // the last split stays: zero_comm_destroy(c) frees it first
            zero_comm_destroy(c->intra);
            zero_comm_destroy(c->inter);
            c->intra = c->inter = NULL;
        }
    }
    // rank 0 reports for everyone
    int64_t v = nfail, all[64];
    zero_result g = c->vt->all_gather(c, &v, all, sizeof v, TO);
    int bad = g != ZERO_OK;
    for (int k = 0; k < n && !bad; k++) bad = all[k] != 0;
    if (me == 0) {
        if (bad) printf("FAIL nodes_np%d: %s (see the ranks' lines above)\n", n, g != ZERO_OK ? c->err : "checks failed");
        else printf("PASS nodes_np%d\n", n);
        fflush(stdout);
    }
    return bad;
}

static void report(const char *what, zero_result r, const zero_comm *e) {
    printf("rank %d: %s: %s: %s\n", me, what, zero_result_str(r), r == ZERO_OK ? "ok" : e->err);
    fflush(stdout);
}

static int mode_mismatch(zero_comm *c) {
    char s[9 * 64], r[9 * 64];
    zero_comm *in = NULL, *x = NULL;
    zero_result e = c->vt->split(c, 2, &in, &x);
    if (e != ZERO_OK) { report("split", e, c); return 3; }
    c->intra = in;
    c->inter = x;
    memset(s, 7, sizeof s);
    report("node", in->vt->all_to_all(in, s, r, in->rank == 1 ? 9 : 8, TO), in);
    report("world", c->vt->all_to_all(c, s, r, me == 1 ? 9 : 8, TO), c);
    return 3;     // non-zero: mpirun (--mca orte_abort_on_non_zero_status 0) lets the others finish
}

static int mode_split_mismatch(zero_comm *c) {
    zero_comm *in = NULL, *x = NULL;
    zero_result e = c->vt->split(c, me == 1 ? 1 : 2, &in, &x);
    report("split", e, c);
    EXPECT(e != ZERO_OK || (in && x), "split succeeded without endpoints");
    c->intra = in;
    c->inter = x;
    return 3;
}

static void sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int mode_timeout(zero_comm *c, int victim, int ms) {
    char s[16 * 64], r[16 * 64];
    zero_comm *in = NULL, *x = NULL;
    zero_result e = c->vt->split(c, 2, &in, &x);
    if (e != ZERO_OK) { report("split", e, c); return 3; }
    c->intra = in;
    c->inter = x;
    if (me == victim) sleep_ms(2 * ms);
    double t0 = ms_now();
    memset(s, 3, sizeof s);
    e = x->vt->all_to_all(x, s, r, 16, ms);
    printf("rank %d: cross: %s: %s (%.0f ms)\n", me, zero_result_str(e), e == ZERO_OK ? "ok" : x->err, ms_now() - t0);
    // a broken node or cross-node endpoint marks the world's broken as it goes: no MPI_Finalize then
    zero_comm_destroy(c->inter);
    c->inter = NULL;
    printf("rank %d: world broken after destroying the cross endpoint: %d\n", me, ((zero__mpi_comm *)c)->broken);
    fflush(stdout);
    // every rank waits for the lost one to give up too, then all leave without MPI_Finalize (the
    // lost rank's abandoned requests would hold it up) and non-zero, so mpirun lets the others finish
    ((zero__mpi_comm *)c)->broken = 0;
    e = c->vt->barrier(c, 4 * ms + TO);
    printf("rank %d: world barrier after: %s\n", me, zero_result_str(e));
    fflush(stdout);
    _exit(3);
}

// world rank R comes to the split 2*MS late; the others' split (timeout MS) names it
static int mode_split_timeout(zero_comm *c, int victim, int ms) {
    static zero_ctx zc;          // the MPI split reads only c->ctx->desc.timeout_ms
    zero_comm *in = NULL, *x = NULL;
    zc.desc.timeout_ms = ms;
    c->ctx = &zc;
    if (me == victim) sleep_ms(2 * ms);
    double t0 = ms_now();
    zero_result e = c->vt->split(c, 2, &in, &x);
    printf("rank %d: %s: %s (%.0f ms)\n", me, zero_result_str(e), e == ZERO_OK ? "ok" : c->err, ms_now() - t0);
    fflush(stdout);
    _exit(3);    // no MPI_Finalize: the late rank may have found every header and think the split went well
}

int main(int argc, char **argv) {
    zero_comm *c = NULL;
    int rc = 2;
    if (argc < 2) { fprintf(stderr, "usage: mpi_nodes nodes | mismatch | split_mismatch | timeout R MS | split_timeout R MS\n"); return 2; }
    zero_result r = zero_comm_from_env(&c, "mpi");
    if (r != ZERO_OK) { fprintf(stderr, "mpi_nodes: %s\n", zero_last_error(NULL)); return 2; }
    me = c->rank;
    if (c->size > 64) { fprintf(stderr, "mpi_nodes: at most 64 ranks\n"); return 2; }
    if (!strcmp(argv[1], "nodes")) rc = mode_nodes(c);
    else if (c->size % 2) { fprintf(stderr, "mpi_nodes %s: an even number of ranks, please\n", argv[1]); rc = 2; }
    else if (!strcmp(argv[1], "mismatch")) rc = mode_mismatch(c);
    else if (!strcmp(argv[1], "split_mismatch")) rc = mode_split_mismatch(c);
    else if (argc >= 4 && !strcmp(argv[1], "timeout")) rc = mode_timeout(c, atoi(argv[2]), atoi(argv[3]));
    else if (argc >= 4 && !strcmp(argv[1], "split_timeout")) rc = mode_split_timeout(c, atoi(argv[2]), atoi(argv[3]));
    else fprintf(stderr, "mpi_nodes: unknown mode '%s'\n", argv[1]);
    zero_comm_destroy(c);   // its node and cross-node endpoints first, then MPI_Finalize (unless broken)
    if (!strcmp(argv[1], "nodes")) {
        int fin = 0;
        MPI_Finalized(&fin);
        EXPECT(fin, "MPI not finalized by zero_comm_destroy");
        if (!fin) rc = 1;
    }
    return rc;
}
