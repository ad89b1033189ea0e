/* tests/test_comm_env.c - zero_comm_from_env in this build (no ZERO_MPI here): which
   endpoint each launcher's variables give, and the sentence for every environment that
   does not fit. The MPI side runs under mpirun in tests/test_mpi.sh. Built plain it
   checks that NCCL asks for a CUDA build; built with CUDA=1 (build/cuda/test_comm_env)
   it checks ZERO_ERR_NO_DEVICE without a GPU, and the NCCL paths with one. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>   // defines: setenv, unsetenv
#include "test.h"
#define ZERO_IMPLEMENTATION
#include "../zero.h"

static const char *vars[] = { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                              "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                              "MASTER_ADDR", "MASTER_PORT", "ZERO_RENDEZVOUS_TIMEOUT_MS",
                              "ZERO_RENDEZVOUS_PORT", "TORCHELASTIC_USE_AGENT_STORE",
                              "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE",
                              "LOCAL_WORLD_SIZE" };
static void clear_env(void) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* from_env(backend) must give `want`; on an error its message must contain `needle` */
static void expect(const char *backend, zero_result want, const char *needle) {
    zero_comm *c = (zero_comm *)&c;   /* must be set to NULL on error */
    zero_result r = zero_comm_from_env(&c, backend);
    CHECK(r == want, "backend %s: got %s, want %s (%s)", backend ? backend : "NULL", zero_result_str(r),
          zero_result_str(want), zero_last_error(NULL));
    if (r == ZERO_OK) {
        CHECK(c && zero_comm_rank(c) == 0 && zero_comm_size(c) == 1, "a world of one expected");
        zero_comm_destroy(c);
    } else {
        CHECK(c == NULL, "out not NULLed on error");
        if (needle) CHECK(strstr(zero_last_error(NULL), needle) != NULL, "message '%s' lacks '%s'",
                          zero_last_error(NULL), needle);
    }
}

static void env_none_is_world_of_one(void) {
    clear_env();
    expect(NULL, ZERO_OK, NULL);
    expect("auto", ZERO_OK, NULL);
    expect("local", ZERO_OK, NULL);
    /* ... and a context trains on it */
    zero_comm *c = NULL;
    zero_ctx *z = NULL;
    zero_desc d = {0};
    if (!CHECK(zero_comm_from_env(&c, NULL) == ZERO_OK, "%s", zero_last_error(NULL))) return;
    d.comm = c;
    CHECK(zero_create(&z, &d) == ZERO_OK && zero_world_size(z) == 1, "%s", zero_last_error(NULL));
    zero_destroy(z);
    zero_comm_destroy(c);
}
static void env_none_mpi_lists_variables(void) {
    clear_env();
    expect("mpi", ZERO_ERR_INVALID_ARG, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
    expect("mpi", ZERO_ERR_INVALID_ARG, "SLURM_PROCID/SLURM_NTASKS");
    expect("mpi", ZERO_ERR_INVALID_ARG, "RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT");
}
#ifdef ZERO_CUDA
static int gpus(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
    return n;
}
#endif

/* backend nccl without a launcher: a world of one on GPU 0, or why not */
static void env_nccl_world_of_one(void) {
    clear_env();
#ifdef ZERO_CUDA
    if (gpus() == 0) {
        expect("nccl", ZERO_ERR_NO_DEVICE, "no CUDA device: cudaGetDeviceCount");
    } else {
        expect("nccl", ZERO_OK, NULL);
        setenv("RANK", "0", 1); setenv("WORLD_SIZE", "1", 1);
        expect("nccl", ZERO_OK, NULL);
    }
#else
    expect("nccl", ZERO_ERR_UNSUPPORTED, "NCCL needs a CUDA build");
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "1", 1);
    expect("nccl", ZERO_ERR_UNSUPPORTED, "NCCL needs a CUDA build");
#endif
    /* auto with a world of one stays local, GPU or not */
    expect(NULL, ZERO_OK, NULL);
}
static void env_bad_backend(void) {
    clear_env();
    expect("gloo", ZERO_ERR_INVALID_ARG, "not one of auto, local, mpi, nccl");
    CHECK(zero_comm_from_env(NULL, NULL) == ZERO_ERR_INVALID_ARG, "NULL out accepted");
}
static void env_mpi_launcher_without_zero_mpi(void) {
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1); setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    expect(NULL, ZERO_ERR_UNSUPPORTED, "without ZERO_MPI");
    expect("local", ZERO_ERR_INVALID_ARG, "started 4");
    clear_env();
    setenv("PMI_RANK", "0", 1); setenv("PMI_SIZE", "2", 1);
    expect(NULL, ZERO_ERR_UNSUPPORTED, "PMI_RANK");
    clear_env();
    setenv("SLURM_PROCID", "3", 1); setenv("SLURM_NTASKS", "8", 1);
    expect("mpi", ZERO_ERR_UNSUPPORTED, "srun");
    /* a launcher that started one process: a world of one, MPI or not */
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "1", 1);
    expect(NULL, ZERO_OK, NULL);
}
static void env_half_set_or_malformed(void) {
    clear_env();
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "OMPI_COMM_WORLD_RANK is not");
    clear_env();
    setenv("SLURM_PROCID", "x", 1); setenv("SLURM_NTASKS", "2", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "SLURM_PROCID='x'");
    setenv("SLURM_PROCID", "2", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "0 <= rank < size");
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "0", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "SLURM_NTASKS='0'");
}
static void env_torchrun(void) {
    clear_env();
    setenv("RANK", "1", 1); setenv("WORLD_SIZE", "2", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not");
    setenv("LOCAL_RANK", "1", 1); setenv("MASTER_ADDR", "127.0.0.1", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "MASTER_PORT is not");
    setenv("MASTER_PORT", "29500", 1);
#ifdef ZERO_CUDA
    /* NCCL: without a GPU that is the error; with one, rank 1 finds no rank 0 */
    setenv("ZERO_RENDEZVOUS_TIMEOUT_MS", "300", 1);
    if (gpus() == 0) expect(NULL, ZERO_ERR_NO_DEVICE, "no CUDA device: cudaGetDeviceCount");
    else expect(NULL, ZERO_ERR_TIMEOUT, "could not reach rank 0 at 127.0.0.1:29500");
    expect("mpi", ZERO_ERR_UNSUPPORTED, "use backend nccl");
    /* the environment is checked before the GPU */
    setenv("MASTER_PORT", "http", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "MASTER_PORT=http");
    setenv("MASTER_PORT", "29500", 1);
    setenv("ZERO_RENDEZVOUS_PORT", "70000", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "ZERO_RENDEZVOUS_PORT=70000");
    unsetenv("ZERO_RENDEZVOUS_PORT");
    setenv("ZERO_RENDEZVOUS_TIMEOUT_MS", "-5", 1);
    expect(NULL, ZERO_ERR_INVALID_ARG, "ZERO_RENDEZVOUS_TIMEOUT_MS='-5'");
    setenv("ZERO_RENDEZVOUS_TIMEOUT_MS", "300", 1);
    setenv("LOCAL_RANK", "x", 1);
    expect("nccl", ZERO_ERR_INVALID_ARG, "LOCAL_RANK='x'");
    setenv("LOCAL_RANK", "1", 1);
#else
    expect(NULL, ZERO_ERR_UNSUPPORTED, "torchrun-style");
    expect(NULL, ZERO_ERR_UNSUPPORTED, "NCCL needs a CUDA build");
    expect("nccl", ZERO_ERR_UNSUPPORTED, "NCCL needs a CUDA build");
#endif
    /* an MPI launcher's variables win over torchrun's */
    setenv("OMPI_COMM_WORLD_RANK", "0", 1); setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    expect(NULL, ZERO_OK, NULL);
    clear_env();
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "1", 1);
    expect(NULL, ZERO_OK, NULL);
}

/* from_env(NULL) must give a world of one whose ranks per node is `want` */
static void expect_nodes(int want) {
    zero_comm *c = NULL;
    zero_result r = zero_comm_from_env(&c, NULL);
    if (!CHECK(r == ZERO_OK, "got %s (%s)", zero_result_str(r), zero_last_error(NULL))) return;
    CHECK(zero_comm_ranks_per_node(c) == want, "ranks per node %d, want %d", zero_comm_ranks_per_node(c), want);
    zero_comm_destroy(c);
}
/* the launcher's ranks per node: its own variable only; a value that is not one (or not
   consecutive runs) leaves no topology and the reason on the endpoint, never an error:
   only ZeRO++ needs nodes, and zero_create then says why there are none */
static void expect_no_nodes_why(const char *words) {
    zero_comm *c = NULL;
    zero_result r = zero_comm_from_env(&c, NULL);
    if (!CHECK(r == ZERO_OK, "got %s (%s)", zero_result_str(r), zero_last_error(NULL))) return;
    CHECK(zero_comm_ranks_per_node(c) == 0, "ranks per node %d, want none", zero_comm_ranks_per_node(c));
    CHECK(strstr(c->node_why, words) != NULL, "the reason '%s' does not say '%s'", c->node_why, words);
    zero_comm_destroy(c);
}
static void env_node_size(void) {
    static const char *bad[] = { "", "x", "0", "-2", "2 ", " 2", "2x", "2(x)", "2(x4", "2(x4)3", "2(x4),1", "2(4)" };
    clear_env();
    expect_nodes(0);                                   /* no launcher */
    setenv("LOCAL_WORLD_SIZE", "x", 1);
    expect_nodes(0);                                   /* ... and no launcher reads it */
    setenv("OMPI_COMM_WORLD_RANK", "0", 1); setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    expect_nodes(0);                                   /* Open MPI's launcher: torchrun's variable is not its */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
    expect_nodes(1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    expect_no_nodes_why("OMPI_COMM_WORLD_LOCAL_SIZE='2' ranks per node does not divide the world size "
                        "OMPI_COMM_WORLD_SIZE=1");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "99999999999", 1);
    expect_no_nodes_why("OMPI_COMM_WORLD_LOCAL_SIZE='99999999999' ranks per node does not divide");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[96];
#ifdef _WIN32
        if (!bad[i][0]) continue;       /* (Windows has no empty variables: setting '' removes it) */
#endif
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", bad[i], 1);
        snprintf(want, sizeof want, "OMPI_COMM_WORLD_LOCAL_SIZE='%s' is not a number of ranks per node", bad[i]);
        expect_no_nodes_why(want);
    }
    /* a bigger world: a bad value does not stop the rest ("without ZERO_MPI") */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1); setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    expect(NULL, ZERO_ERR_UNSUPPORTED, "without ZERO_MPI");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    expect("local", ZERO_ERR_INVALID_ARG, "started 4");
    /* Slurm: "N" or "N(xM)" */
    clear_env();
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "1(x1)", 1);
    expect_nodes(1);
    setenv("SLURM_NTASKS_PER_NODE", "1", 1);
    expect_nodes(1);
    setenv("SLURM_PROCID", "3", 1); setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_NTASKS_PER_NODE", "2(x4)", 1);
    expect(NULL, ZERO_ERR_UNSUPPORTED, "srun");
    setenv("SLURM_NTASKS_PER_NODE", "3(x2)", 1);
    expect(NULL, ZERO_ERR_UNSUPPORTED, "srun");
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "2(x3),2", 1);
    expect_no_nodes_why("SLURM_NTASKS_PER_NODE='2(x3),2' is not a number of ranks per node");
    /* MPICH's Hydra, torchrun */
    clear_env();
    setenv("PMI_RANK", "0", 1); setenv("PMI_SIZE", "1", 1);
    setenv("MPI_LOCALNRANKS", "1", 1);
    expect_nodes(1);
    setenv("MPI_LOCALNRANKS", "one", 1);
    expect_no_nodes_why("MPI_LOCALNRANKS='one'");
    clear_env();
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "1", 1);
    expect_nodes(1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    expect_no_nodes_why("LOCAL_WORLD_SIZE='2' ranks per node does not divide the world size WORLD_SIZE=1");
    /* not consecutive: the local rank is not rank % ranks per node */
    setenv("LOCAL_WORLD_SIZE", "1", 1);
    setenv("LOCAL_RANK", "3", 1);
    expect_no_nodes_why("did not place ranks in consecutive runs");
}

int main(void) {
    test_init();
    TEST_RUN(env_none_is_world_of_one);
    TEST_RUN(env_none_mpi_lists_variables);
    TEST_RUN(env_bad_backend);
    TEST_RUN(env_mpi_launcher_without_zero_mpi);
    TEST_RUN(env_half_set_or_malformed);
    TEST_RUN(env_torchrun);
    TEST_RUN(env_nccl_world_of_one);
    TEST_RUN(env_node_size);
    clear_env();
    return test_summary();
}
