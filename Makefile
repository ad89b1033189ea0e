# zero.h - build and tests (GNU make).
#
#   make              examples/*.c -> build/<name>, tests/test_*.c -> build/test_*
#   make test         the above + build/asan/test_* (ASan+UBSan) + build/tsan/test_* (TSan),
#                     then tests/run_tests.sh (last line: "N passed, N failed, N skipped"; a SKIP
#                     is a test that could not run here, not a pass; exit 1 on failures;
#                     VERBOSE=1 shows all test output, logs in build/logs/, ZERO_RUN_TIMEOUT=300)
#   make run          build/train_gpt $(RUN_ARGS): the tiny GPT at stage 3 on 4 ranks (1-2 min)
#   make bench        tests/bench/*.c -> build/bench_<name> (a leading "bench_" is not doubled)
#   make CUDA=1       also builds zero_kernels.cu and CUDA variants under build/cuda/
#                     (build/cuda/zero_kernels.o, build/cuda/<example>, build/cuda/gpu_*, the
#                     tests with CUDA cases: test_device, test_errors, test_comm_env, test_stash;
#                     make build/cuda/<test or bench_*> builds any other), so CPU and CUDA
#                     builds coexist
#   make test-gpu     tests/test_gpu.sh, the one command for a GPU machine, within ZERO_GPU_DEADLINE
#                     (540 s) by construction: a probe (GPUs, nvcc, compiler, cudart, cuBLAS, NCCL),
#                     builds what it runs with CUDA=1 WERROR= on every core, then the GPU checks first:
#                     build/cuda/test_device (CUDA vs CPU device), gpu_kernels (kernels vs CPU), gpu_nccl
#                     (NCCL, both reduce modes' bandwidth), compute-sanitizer's four tools, gpu_bench_adamw
#                     (AdamW bandwidth ratio=) and gpu_bench_staging, train_mlp --device cuda (reproducible,
#                     CUDA_LAUNCH_BLOCKING, --nonblocking-stream, vs emu; ZeRO++ --qwz --qgz --hpz 2 on 4
#                     ranks: reproducible, vs emu); last, optional, the CPU and disk benchmarks (bench_zpp,
#                     bench_comm, bench_step, bench_infinity, bench_nvme, bench_overlap) on the
#                     machine's cores and disk.
#                     A step that no longer fits the deadline is not run (a line says so; counted as
#                     skipped). No GPU: a FAIL line and exit 1 at once. ZERO_GPU_OUT=DIR gets two files,
#                     summary.txt (written as it goes) and logs.tgz (packed at each step's end)
#   make test-gpu-rehearsal  the same run without a GPU, on the CUDA and NCCL test doubles
#                     (build/mock/) with stand-ins for nvidia-smi and compute-sanitizer (tests/standin),
#                     small sizes; make test checks it through tests/test_gpu_rehearsal.sh
#   make (MPI)        when mpicc is on PATH (MPICC=...), also the ZERO_MPI builds under build/mpi/:
#                     train_mlp and tests/mpi/*.c (make bench: build/mpi/bench_comm); make test
#                     runs them through tests/test_mpi.sh under mpirun, which says so when they
#                     were not built
#   make test-kernels zero_kernels.cu's own kernels on the CPU grid emulator (tests/kemu) behind the
#                     CUDA double: tests/test_kernels.sh alone (make test runs it too; under 3 minutes)
#   make build/mock/NAME  tests/NAME.c or examples/NAME.c with ZERO_CUDA on the CUDA and NCCL test
#                     doubles (tests/cuda_mock/cuda_mock.c, nccl_mock.c: no GPU, no nvcc, no libnccl;
#                     the CUDA and NCCL headers); make test runs build/mock/test_device, test_nccl,
#                     gpu_nccl, train_mlp, ... through tests/test_cuda_mock.sh
#   make CBLAS=1      GEMMs through cblas_sgemm (-DZERO_CBLAS, CBLAS_LIBS ?= -lblas); make test
#                     also builds test_tiling that way (tests/test_cblas.sh) when cblas.h exists
#   make build/nolinux/NAME  tests/NAME.c with -DZERO_NO_LINUX (POSIX calls only: what macOS and
#                     the BSDs get); make test runs test_offload, test_ckpt and test_errors so
#                     through tests/test_nolinux.sh
#   make build/arm64/NAME  tests/NAME.c or examples/NAME.c cross-built for ARM64 (ARM64_CC, default
#                     aarch64-linux-gnu-gcc); make test runs test_cpuopt and train_mlp so under
#                     qemu-aarch64 through tests/test_arm64.sh (NEON and scalar paths, and the bits
#                     of the x86-64 build)
#   make build/win/NAME.exe  tests/NAME.c or examples/NAME.c cross-built for Windows x86-64 (WIN_CC,
#                     default x86_64-w64-mingw32-gcc-win32: MinGW-w64 without winpthreads, so
#                     zero.h's native Windows layer); make test runs test_platform, test_cpuopt,
#                     test_kmath, test_errors and train_mlp so under Wine through
#                     tests/test_windows.sh (the bits of the Linux build)
#   make clean        rm -rf build
#
# Every program is one C file that defines ZERO_IMPLEMENTATION itself; everything is
# rebuilt when zero.h (or a header beside the sources) changes. A target whose compile
# fails leaves no stale binary behind (rm -f first), so the runner sees it as missing.

CC  := $(if $(filter default,$(origin CC)),gcc,$(CC))
# tests/test_arm64.sh's cross compiler (build/arm64/)
ARM64_CC ?= aarch64-linux-gnu-gcc
# tests/test_windows.sh's cross compiler (build/win/), and its level: -O1 compiles in 60% of
# -O2's time, and the bits do not depend on it (what test_windows checks against -O2's)
WIN_CC ?= x86_64-w64-mingw32-gcc-win32
WIN_CFLAGS ?= -O1
CXX := $(if $(filter default,$(origin CXX)),g++,$(CXX))

BUILD    ?= build
# Required flags are kept apart from CFLAGS/CPPFLAGS/LDLIBS, which stay the user's to add to.
ZERO_CPPFLAGS := -I.
# WERROR= (empty) builds without -Werror: make test-gpu does, on a toolchain we never compiled with
WERROR        ?= -Werror
ZERO_CFLAGS   := -std=c99 -Wall -Wextra $(WERROR) -ffp-contract=off -pthread
ZERO_LDLIBS   := -lm
# -g1: line tables and functions, what a backtrace and a sanitizer's report need, at 70%
# of -g's compile time (zero.h's implementation: 14 s vs 20 s at -O2, 31 s vs 43 s under
# ASan); CFLAGS="-O2 -g" for a debugger's locals
CFLAGS        ?= -O2 -g1
# Sanitizer builds keep the warnings but not -Werror: GCC's sanitizer instrumentation
# produces false-positive warnings (-Wmaybe-uninitialized, -Wstringop-*) at -O1.
SAN_CFLAGS  := -std=c99 -O1 -g1 -Wall -Wextra -ffp-contract=off -pthread -fno-omit-frame-pointer
# build/asan/ and build/tsan/: the tests that run for seconds under a sanitizer are built at
# -O1 (SAN_CFLAGS), the others at -O0, which a sanitizer checks as well: a test compiles in
# 15 s instead of 26 under ASan+UBSan and in 5 s instead of 13 under TSan, and runs in a
# second or two either way
SAN_O1_TESTS ?= test_ckpt test_cpuopt test_equiv test_offload test_prefetch test_tiling test_tied test_zpp
# ... and with ZERO_NO_SIMD (the portable loops alone: zero.h's option, tested there) but for
# the tests of the vector kernels themselves (the optimizer, the norm, the sums, the SGEMM,
# ZeRO++'s payloads, kmath), whose sanitizer builds keep every path: a quarter less to compile,
# and the plain build runs every test on the best path
SAN_SIMD_TESTS ?= test_cpuopt test_kmath test_tiling test_zpp
san_cflags    = $(if $(filter $(SAN_O1_TESTS),$(notdir $@)),$(SAN_CFLAGS),$(filter-out -O1,$(SAN_CFLAGS)) -O0) \
                $(if $(filter $(SAN_SIMD_TESTS),$(notdir $@)),,-DZERO_NO_SIMD)
ASAN_CFLAGS ?= -fsanitize=address,undefined -fno-sanitize-recover=undefined
TSAN_CFLAGS ?= -fsanitize=thread
# make run = train_gpt's defaults, spelled out: it also writes gpt.svg and gpt_trace.json here
RUN_ARGS    ?= --stage 3 --ranks 4 --steps 600 --plot gpt.svg --trace gpt_trace.json

EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
TEST_SRC    := $(sort $(wildcard tests/test_*.c))
BENCH_SRC   := $(sort $(wildcard tests/bench/*.c))

EXAMPLES := $(patsubst examples/%.c,$(BUILD)/%,$(EXAMPLE_SRC))
TESTS    := $(patsubst tests/%.c,$(BUILD)/%,$(TEST_SRC))
ASAN     := $(patsubst tests/%.c,$(BUILD)/asan/%,$(TEST_SRC))
TSAN     := $(patsubst tests/%.c,$(BUILD)/tsan/%,$(TEST_SRC))
bench_name = bench_$(patsubst bench_%,%,$(basename $(notdir $(1))))
BENCHES  := $(foreach s,$(BENCH_SRC),$(BUILD)/$(call bench_name,$(s)))
# make test checks that the benchmarks compile and link (tests/test_bench_build.sh), at -O0
# in build/bench-check/ (4 s a program instead of 20); make bench builds them at CFLAGS
BENCH_CHECK := $(foreach s,$(BENCH_SRC),$(BUILD)/bench-check/$(call bench_name,$(s)))

DEPS         := zero.h Makefile
EXAMPLE_DEPS := $(DEPS) $(wildcard examples/*.h)
TEST_DEPS    := $(DEPS) $(wildcard tests/*.h)
BENCH_DEPS   := $(DEPS) $(wildcard tests/*.h tests/bench/*.h)

# ---- CBLAS (CBLAS=1): the tiled linear's GEMMs through cblas_sgemm -------------------
CBLAS ?= 0
CBLAS_LIBS ?= -lblas
ifeq ($(CBLAS),1)
  ZERO_CPPFLAGS += -DZERO_CBLAS
  ZERO_LDLIBS   += $(CBLAS_LIBS)
endif

# ---- io_uring (URING=1/0; default: when liburing.h compiles and links): the NVMe tier's
# block I/O through io_uring (-DZERO_IO_URING -luring) in every build variant
URING ?= $(shell printf '\043include <liburing.h>\nint main(void){struct io_uring r;return io_uring_queue_init(1,&r,0);}\n' | \
           $(CC) -x c - -o /dev/null -luring >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(URING),1)
  ZERO_CPPFLAGS += -DZERO_IO_URING
  ZERO_LDLIBS   += -luring
endif

# ---- MPI (when mpicc exists): one process per rank, -DZERO_MPI, under build/mpi/ -------
MPICC    ?= mpicc
HAVE_MPI := $(if $(shell command -v $(MPICC) 2>/dev/null),1,)
MPI_SRC  := $(sort $(wildcard tests/mpi/*.c))
MPI_BINS := $(BUILD)/mpi/train_mlp $(patsubst tests/mpi/%.c,$(BUILD)/mpi/%,$(MPI_SRC))
MPI_BENCH := $(BUILD)/mpi/bench_comm
ifeq ($(HAVE_MPI),1)
  ALL_MPI   := $(MPI_BINS)
  BENCH_MPI := $(MPI_BENCH)
endif

# ---- CUDA (CUDA=1) -------------------------------------------------------------------
comma := ,
CUDA ?= 0
# sm_80 and sm_90 machine code, and compute_90 PTX that the driver compiles for a newer GPU
# (without it a newer GPU gets "no kernel image is available for execution on the device")
GPU_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
            -gencode arch=compute_90,code=compute_90
# -fmad=false: the kernels must round exactly like the CPU path (-ffp-contract=off).
NVCCFLAGS ?= -std=c++17 -O3 -g -lineinfo -fmad=false $(GPU_ARCH) $(if $(WERROR),-Werror all-warnings) \
             -Xcompiler -Wall,-Wextra,$(if $(WERROR),-Werror$(comma))-ffp-contract=off
# CUDA_HOME and NCCL_LIBDIR are found whatever CUDA is: CUDA=1 needs them, and so do the
# build/mock/ programs (tests/cuda_mock), which use the CUDA headers and libnccl without a GPU.
# CUDA_HOME: /usr/local/cuda if it has nvcc, else the prefix of the nvcc on PATH.
ifeq ($(origin CUDA_HOME),undefined)
  CUDA_HOME := $(if $(wildcard /usr/local/cuda/bin/nvcc),/usr/local/cuda,$(or $(strip \
                 $(patsubst %/bin/,%,$(dir $(shell command -v nvcc 2>/dev/null)))),/usr/local/cuda))
endif
# Where libraries are looked for after CUDA_HOME (tests/test_cuda_libs.sh empties them):
# the system's directories, and ldconfig's cache
SYS_LIBDIRS ?= /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/local/lib
LDCONFIG    ?= ldconfig
# $(call lib_in,NAME,DIRS): the first libNAME.so or libNAME.so.<major> in DIRS
lib_in = $(firstword $(foreach d,$(2),$(wildcard $(d)/lib$(1).so $(d)/lib$(1).so.[0-9] $(d)/lib$(1).so.[0-9][0-9])))
# $(call lib_ldconfig,NAME): libNAME.so or libNAME.so.<major> from ldconfig -p
lib_ldconfig = $(shell $(LDCONFIG) -p 2>/dev/null | awk '$$1 ~ /^lib$(1)\.so(\.[0-9]+)?$$/ { print $$NF; exit }')
# $(call lib_link,FILE,NAME): -lNAME for an unversioned libNAME.so; -l:libNAME.so.N for a versioned
# one (what the nvidia-* Python packages ship): -lNAME would look for the unversioned name only
lib_link = $(if $(filter %/lib$(2).so,$(1)),-l$(2),-l:$(notdir $(1)))
# $(call py_pkg_dirs,MODULE...): the directories of those nvidia-* Python packages python3 finds
py_pkg_dirs = $(shell python3 -c 'import sys, importlib.util as u; p = u.find_spec("nvidia"); \
                [print(list(s.submodule_search_locations)[0]) for s in [p and u.find_spec(n) for n in sys.argv[1:]] if s]' \
                $(1) 2>/dev/null)
# NCCL (headers and library), first found of: NCCL_HOME, CUDA_HOME, the system's
# directories (and ldconfig), the nvidia-nccl-cu* Python package (site-packages/nvidia/nccl/
# {include,lib}, which has only the versioned libnccl.so.2: linked as -l:libnccl.so.2).
# Set NCCL_INCDIR and NCCL_LIBDIR to choose; NCCL_FOUND says where they came from.
ifeq ($(origin NCCL_LIBDIR)$(origin NCCL_INCDIR),undefinedundefined)
  NCCL_CAND := $(if $(NCCL_HOME),$(call lib_in,nccl,$(NCCL_HOME)/lib $(NCCL_HOME)/lib64))
  NCCL_FOUND := NCCL_HOME=$(NCCL_HOME)
  NCCL_INCDIR := $(if $(NCCL_CAND),$(NCCL_HOME)/include)
  ifeq ($(NCCL_CAND),)
    NCCL_CAND := $(if $(wildcard $(CUDA_HOME)/include/nccl.h),$(call lib_in,nccl,$(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
    NCCL_FOUND := CUDA_HOME=$(CUDA_HOME)
    NCCL_INCDIR := $(CUDA_HOME)/include
  endif
  ifeq ($(NCCL_CAND),)
    NCCL_CAND := $(if $(wildcard /usr/include/nccl.h),$(or $(call lib_in,nccl,$(SYS_LIBDIRS)),$(call lib_ldconfig,nccl)))
    NCCL_FOUND := the system
    NCCL_INCDIR := /usr/include
  endif
  ifeq ($(NCCL_CAND),)
    NCCL_PY := $(firstword $(call py_pkg_dirs,nvidia.nccl))
    NCCL_CAND := $(if $(NCCL_PY),$(call lib_in,nccl,$(NCCL_PY)/lib))
    NCCL_FOUND := the Python package nvidia-nccl ($(NCCL_PY))
    NCCL_INCDIR := $(NCCL_PY)/include
  endif
  NCCL_LIBDIR := $(patsubst %/,%,$(dir $(NCCL_CAND)))
  ifeq ($(NCCL_CAND),)
    NCCL_FOUND := nowhere
    NCCL_INCDIR :=
  endif
else
  NCCL_INCDIR ?= $(CUDA_HOME)/include
  NCCL_LIBDIR ?= $(CUDA_HOME)/lib64
  NCCL_CAND   := $(call lib_in,nccl,$(NCCL_LIBDIR))
  NCCL_FOUND  := NCCL_INCDIR/NCCL_LIBDIR
endif
NCCL_LINK := $(if $(NCCL_CAND),$(call lib_link,$(NCCL_CAND),nccl),-lnccl)
NCCL_SAYS := NCCL from $(NCCL_FOUND): $(or $(NCCL_CAND),libnccl not found) (headers: $(or $(NCCL_INCDIR),none))
# cudart and cuBLAS (CUDA=1 and gpu-probe), each the first found of: CUDART_LIB / CUBLAS_LIB
# (a file), CUDA_HOME's lib64 or lib, the system's directories (and ldconfig), the nvidia-*
# Python packages (CUDA 13's site-packages/nvidia/cu13/lib, where a pip nvcc's CUDA_HOME
# already points; CUDA 12's nvidia/cuda_runtime/lib and nvidia/cublas/lib). A pip CUDA has
# only the versioned libcudart.so.13 and libcublas.so.13: linked as -l:libcudart.so.13 with
# -L and an rpath to their directory. CUDA_LIBS_SAYS says which.
define find_cuda_lib
ifeq ($$(origin $(1)_LIB),undefined)
  $(1)_LIB := $$(call lib_in,$(2),$$(CUDA_HOME)/lib64 $$(CUDA_HOME)/lib)
  $(1)_FROM := CUDA_HOME=$$(CUDA_HOME)
  ifeq ($$($(1)_LIB),)
    $(1)_LIB := $$(or $$(call lib_in,$(2),$$(SYS_LIBDIRS)),$$(call lib_ldconfig,$(2)))
    $(1)_FROM := the system
  endif
  ifeq ($$($(1)_LIB),)
    $(1)_LIB := $$(call lib_in,$(2),$$(addsuffix /lib,$$(call py_pkg_dirs,nvidia.cu13 nvidia.$(3))))
    $(1)_FROM := the Python package at $$(patsubst %/lib/,%,$$(dir $$($(1)_LIB)))
  endif
  ifeq ($$($(1)_LIB),)
    $(1)_FROM := nowhere
  endif
else
  $(1)_FROM := $(1)_LIB
endif
endef
ifneq ($(or $(filter 1,$(CUDA)),$(filter gpu-probe,$(MAKECMDGOALS))),)
  $(eval $(call find_cuda_lib,CUDART,cudart,cuda_runtime))
  $(eval $(call find_cuda_lib,CUBLAS,cublas,cublas))
  CUDA_LIBS_SAYS := cudart from $(CUDART_FROM): $(or $(CUDART_LIB),libcudart not found); cuBLAS from \
                    $(CUBLAS_FROM): $(or $(CUBLAS_LIB),libcublas not found)
endif
ifeq ($(CUDA),1)
  ifeq ($(origin NVCC),undefined)
    NVCC := $(or $(wildcard $(CUDA_HOME)/bin/nvcc),$(shell command -v nvcc 2>/dev/null),nvcc)
  endif
  ifneq ($(filter-out clean gpu-probe gpu-sanitizer,$(or $(MAKECMDGOALS),all)),)
    ifeq ($(NCCL_LIBDIR),)
      $(error CUDA=1: libnccl not found (looked under NCCL_HOME, $(CUDA_HOME), the system's directories, ldconfig -p and the nvidia-nccl-cu* Python package); set NCCL_HOME= or NCCL_INCDIR= and NCCL_LIBDIR=)
    endif
    ifeq ($(CUDART_LIB),)
      $(error CUDA=1: libcudart not found (looked in $(CUDA_HOME)/lib64 and lib, the system's directories, ldconfig -p and the nvidia-cuda-runtime Python package); set CUDA_HOME= or CUDART_LIB=/path/to/libcudart.so.N)
    endif
    ifeq ($(CUBLAS_LIB),)
      $(error CUDA=1: libcublas not found (looked in $(CUDA_HOME)/lib64 and lib, the system's directories, ldconfig -p and the nvidia-cublas Python package); set CUDA_HOME= or CUBLAS_LIB=/path/to/libcublas.so.N)
    endif
    $(info make CUDA=1: nvcc $(NVCC); $(CUDA_LIBS_SAYS); $(NCCL_SAYS))
  endif
  CUDA_LIBDIRS  := $(sort $(patsubst %/,%,$(dir $(CUDART_LIB) $(CUBLAS_LIB))) $(NCCL_LIBDIR))
  CUDA_CPPFLAGS ?= -DZERO_CUDA -I$(CUDA_HOME)/include $(if $(filter-out $(CUDA_HOME)/include,$(NCCL_INCDIR)),-I$(NCCL_INCDIR))
  CUDA_LDLIBS   ?= $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath$(comma),$(CUDA_LIBDIRS)) \
                   $(call lib_link,$(CUDART_LIB),cudart) $(NCCL_LINK) $(call lib_link,$(CUBLAS_LIB),cublas) -lstdc++
endif

CUDA_OBJ      := $(BUILD)/cuda/zero_kernels.o
CUDA_EXAMPLES := $(patsubst examples/%.c,$(BUILD)/cuda/%,$(EXAMPLE_SRC))
CUDA_TESTS    := $(patsubst tests/%.c,$(BUILD)/cuda/%,$(TEST_SRC))
CUDA_BENCHES  := $(foreach s,$(BENCH_SRC),$(BUILD)/cuda/$(call bench_name,$(s)))
# tests/gpu/*.c: programs that need a GPU (kernel checks, NCCL, bandwidth), CUDA=1 only,
# run by make test-gpu (tests/test_gpu.sh), never by make test
GPU_SRC       := $(sort $(wildcard tests/gpu/*.c))
CUDA_GPU      := $(patsubst tests/gpu/%.c,$(BUILD)/cuda/gpu_%,$(GPU_SRC))

# ---- the CUDA test double (tests/cuda_mock): build/mock/<name> ----------------------------
# tests/<name>.c or examples/<name>.c built with ZERO_CUDA against tests/cuda_mock/cuda_mock.c
# (the CUDA runtime, cuBLAS and the zero__k_* launchers, on the CPU) and tests/cuda_mock/
# nccl_mock.c (NCCL: ranks as threads on the double's memory) instead of zero_kernels.o,
# cudart, cublas and libnccl, so the CUDA device's and the NCCL comm's host code run without a
# GPU. Needs only the CUDA and NCCL headers, not nvcc, a libnccl or CUDA=1; never part of
# `all`: tests/test_cuda_mock.sh builds what it runs.
MOCK_NCCL_H   := $(or $(wildcard $(NCCL_INCDIR)/nccl.h),$(wildcard $(CUDA_HOME)/include/nccl.h))
MOCK_OK       := $(if $(and $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),$(wildcard \
                   $(CUDA_HOME)/include/cublas_v2.h),$(MOCK_NCCL_H)),1,)
# The double's kernels are zero_kernels.cu's own, on the CPU grid emulator (tests/kemu):
# tests/kemu/rewrite.sh makes build/<dir>/zero_kernels.kemu.cc of it (the <<<...>>> launches
# and __shared__ declarations in C++ the host compiler takes), built by $(CXX) with
# tests/kemu/kemu.h and linked with tests/kemu/kemu.cc (the fibers, barriers, shuffles and
# checks). build/kemu-asan/: the double, the emulator and tests/gpu/*.c under ASan+UBSan.
MOCK_OK       := $(if $(and $(MOCK_OK),$(shell command -v $(CXX) 2>/dev/null)),1,)
MOCK_SRC      := tests/cuda_mock/cuda_mock.c tests/cuda_mock/nccl_mock.c
kemu_obj       = $(1)/zero_kernels_kemu.o $(1)/kemu.o
MOCK_OBJ      := $(BUILD)/mock/cuda_mock.o $(BUILD)/mock/nccl_mock.o $(call kemu_obj,$(BUILD)/mock)
MOCK_CPPFLAGS := -DZERO_CUDA -I$(CUDA_HOME)/include $(if $(MOCK_NCCL_H),-I$(dir $(MOCK_NCCL_H)))
MOCK_LDLIBS   := -lstdc++
# the double's programs (build/mock/<name>) build their host code at -O0: 6 s a program
# instead of 21 s at -O2, and no slower to run, since their time is spent in the double and
# the emulated kernels, which keep CFLAGS (the plain build checks zero.h at -O2)
MOCK_CFLAGS   ?= -O0 -g
# ... and with ZERO_NO_SIMD (theirs and build/mock-tsan/'s): what they test is the CUDA device's
# host code; the CPU device they compare with runs the portable loops, whose bits every vector
# path gives (test_cpuopt): 4.4 s a program instead of 6.9
MOCK_NO_SIMD  ?= -DZERO_NO_SIMD
KEMU_DEPS     := zero_kernels.cu zero.h Makefile tests/kemu/kemu.h tests/kemu/rewrite.sh
KEMU_CXXFLAGS := -std=c++17 -Wall -Wextra $(WERROR) -Wno-unknown-pragmas -Wno-maybe-uninitialized -ffp-contract=off -pthread

# `make CUDA=1 all` builds the tests that have CUDA cases (the others, built with ZERO_CUDA,
# would run only their CPU cases; make build/cuda/test_NAME builds any of them)
CUDA_TESTS_ALL := $(filter $(addprefix $(BUILD)/cuda/,test_device test_errors test_comm_env test_stash),$(CUDA_TESTS))
ifeq ($(CUDA),1)
  ALL_CUDA := $(CUDA_OBJ) $(CUDA_EXAMPLES) $(CUDA_TESTS_ALL) $(CUDA_GPU)
  BENCH_CUDA := $(CUDA_BENCHES)
endif

# ---- targets -------------------------------------------------------------------------
.PHONY: all test test-progs test-kernels sanitize run bench test-gpu test-gpu-rehearsal clean mock-available gpu-arch gpu-probe gpu-sanitizer
all: $(EXAMPLES) $(TESTS) $(ALL_CUDA) $(ALL_MPI)

sanitize: $(ASAN) $(TSAN)

# what the test scripts run, built here with everything else on every core (-j), so that the
# scripts' own makes find it done and the runner can run the scripts side by side
MOCK_TEST_PROGS := $(addprefix $(BUILD)/mock/,test_device train_mlp test_stash test_nccl gpu_kernels gpu_nccl \
                     gpu_bench_adamw gpu_bench_staging kemu_checks cuda_mock_selftest cuda_mock_streams \
                     cuda_mock_zpp cuda_mock_staging cuda_mock_costs) \
                   $(addprefix $(BUILD)/mock-tsan/,test_device cuda_mock_streams test_nccl train_mlp cuda_mock_zpp \
                     cuda_mock_staging) \
                   $(addprefix $(BUILD)/kemu-asan/,kemu_checks gpu_kernels)
NOLINUX_TEST_PROGS := $(addprefix $(BUILD)/nolinux/,test_offload test_ckpt test_errors)   # tests/test_nolinux.sh
ARM64_TEST_PROGS = $(if $(shell command -v $(ARM64_CC) 2>/dev/null),$(addprefix $(BUILD)/arm64/,test_cpuopt test_kmath test_zpp train_mlp))
WIN_TEST_PROGS = $(if $(shell command -v $(WIN_CC) 2>/dev/null),$(addprefix $(BUILD)/win/,$(addsuffix .exe,test_platform \
                   test_cpuopt test_kmath test_errors train_mlp flags)))
test-progs: $(if $(MOCK_OK),$(MOCK_TEST_PROGS)) $(BENCH_CHECK) $(NOLINUX_TEST_PROGS) $(ARM64_TEST_PROGS) $(WIN_TEST_PROGS)

# -k: a test that fails to compile must not hide the others; the runner counts every
# tests/test_*.c whose binary is missing as a failure, so the summary stays complete.
test:
	@$(MAKE) --no-print-directory -k all sanitize test-progs || \
	    echo "make test: some targets failed to build (counted as failures below)"
	@BUILD=$(BUILD) bash tests/run_tests.sh

run: $(BUILD)/train_gpt
	$(BUILD)/train_gpt $(RUN_ARGS)

bench: $(BENCHES) $(BENCH_CUDA) $(BENCH_MPI)

# prints 1 when build/mock/ can be built (tests/test_cuda_mock.sh asks)
mock-available:
	@echo $(MOCK_OK)
# prints GPU_ARCH (tests/test_cuda_mock.sh checks that it embeds PTX)
gpu-arch:
	@echo $(GPU_ARCH)

# make test-gpu's probe: the toolchain it builds with, one line each
gpu-probe:
	@echo "nvcc: $(NVCC): $$($(NVCC) --version 2>/dev/null | tail -n 2 | head -n 1 || echo not found)"
	@echo "host compiler: $(CC): $$($(CC) --version 2>/dev/null | head -n 1)"
	@echo "CUDA_HOME: $(CUDA_HOME); GPU_ARCH: $(GPU_ARCH)"
	@echo "$(CUDA_LIBS_SAYS)"
	@echo "$(NCCL_SAYS)"
# prints the compute-sanitizer make test-gpu runs (empty: none): CUDA_HOME's, PATH's, or the
# nvidia-cuda-sanitizer-api Python package's (site-packages/nvidia/cuda_sanitizer_api/compute-sanitizer/)
gpu-sanitizer:
	@echo $(firstword $(wildcard $(CUDA_HOME)/bin/compute-sanitizer $(CUDA_HOME)/compute-sanitizer/compute-sanitizer) \
	    $(shell command -v compute-sanitizer 2>/dev/null) $(wildcard $(shell python3 -c 'import importlib.util as u; \
	    s = u.find_spec("nvidia.cuda_sanitizer_api"); print(list(s.submodule_search_locations)[0] if s else "")' \
	    2>/dev/null)/compute-sanitizer/compute-sanitizer))

test-gpu:
	@BUILD=$(BUILD) bash tests/test_gpu.sh

# make test-gpu without a GPU: the same steps, deadline, summary and tarball on the CUDA and NCCL
# test doubles (build/mock/), with stand-ins for nvidia-smi and compute-sanitizer (tests/standin)
test-gpu-rehearsal:
	@BUILD=$(BUILD) ZERO_GPU_REHEARSAL=1 bash tests/test_gpu.sh

# zero_kernels.cu on the CPU grid emulator alone (make test runs it too): tests/test_kernels.sh
test-kernels:
	@BUILD=$(BUILD) bash tests/run_tests.sh tests/test_kernels.sh

clean:
	rm -rf $(BUILD)

# ---- rules ---------------------------------------------------------------------------
# The build variants, a line each: cc_V is the compile command (the compiler and its flags),
# link_V what follows the source on a program's command line (objects and libraries), dir_V
# the directory of its outputs.
cc_plain       = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(ZERO_CFLAGS) $(CFLAGS)
cc_asan        = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(san_cflags) $(ASAN_CFLAGS)
cc_tsan        = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(san_cflags) $(TSAN_CFLAGS)
cc_bench_check = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(ZERO_CFLAGS) -O0
link_bench_check = $(link_plain)
cc_mpi         = $(MPICC) $(ZERO_CPPFLAGS) -DZERO_MPI $(CPPFLAGS) $(ZERO_CFLAGS) $(CFLAGS)
cc_nvcc        = $(NVCC) $(ZERO_CPPFLAGS) $(NVCCFLAGS)
cc_cuda        = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(CUDA_CPPFLAGS) $(ZERO_CFLAGS) $(CFLAGS)
cc_mock        = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(MOCK_CPPFLAGS) $(MOCK_NO_SIMD) $(ZERO_CFLAGS) $(MOCK_CFLAGS)
cc_mock_obj    = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(MOCK_CPPFLAGS) $(ZERO_CFLAGS) $(CFLAGS)
cc_mock_tsan   = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(MOCK_CPPFLAGS) $(MOCK_NO_SIMD) $(SAN_CFLAGS) $(TSAN_CFLAGS)
link_plain     = $(LDLIBS) $(ZERO_LDLIBS)
link_asan      = $(link_plain)
# ZERO_NO_LINUX (tests/test_nolinux.sh): POSIX calls only, the fallbacks macOS and the BSDs get
cc_nolinux     = $(CC) $(filter-out -DZERO_IO_URING,$(ZERO_CPPFLAGS)) $(CPPFLAGS) -DZERO_NO_LINUX $(ZERO_CFLAGS) $(CFLAGS)
link_nolinux   = $(LDLIBS) $(filter-out -luring,$(ZERO_LDLIBS))
# ARM64 (tests/test_arm64.sh): a cross compiler, the programs run under qemu-aarch64
cc_arm64       = $(ARM64_CC) -I. $(CPPFLAGS) $(ZERO_CFLAGS) $(CFLAGS)
link_arm64     = $(LDLIBS) -lm
# Windows (tests/test_windows.sh): MinGW-w64, C99's printf in the tests (%zu), Winsock
cc_win         = $(WIN_CC) -I. $(CPPFLAGS) -D__USE_MINGW_ANSI_STDIO=1 $(filter-out -pthread,$(ZERO_CFLAGS)) $(WIN_CFLAGS)
link_win       = -lws2_32
link_tsan      = $(link_plain)
link_mpi       = $(link_plain)
link_cuda      = $(CUDA_OBJ) $(CUDA_LDLIBS) $(link_plain)
link_mock      = $(MOCK_OBJ) $(MOCK_LDLIBS) $(link_plain)
link_mock_tsan = $(MOCK_TSAN_OBJ) $(MOCK_LDLIBS) $(link_plain)
cc_kemu_asan   = $(CC) $(ZERO_CPPFLAGS) $(CPPFLAGS) $(MOCK_CPPFLAGS) $(SAN_CFLAGS) $(ASAN_CFLAGS)
link_kemu_asan = $(KEMU_ASAN_OBJ) $(MOCK_LDLIBS) $(link_plain)
dir_plain     := $(BUILD)
dir_asan      := $(BUILD)/asan
dir_nolinux   := $(BUILD)/nolinux
dir_arm64     := $(BUILD)/arm64
dir_win       := $(BUILD)/win
dir_tsan      := $(BUILD)/tsan
dir_mpi       := $(BUILD)/mpi
dir_bench_check := $(BUILD)/bench-check
dir_nvcc      := $(BUILD)/cuda
dir_cuda      := $(BUILD)/cuda
dir_mock      := $(BUILD)/mock
dir_mock_obj  := $(BUILD)/mock
dir_mock_tsan := $(BUILD)/mock-tsan
dir_kemu_asan := $(BUILD)/kemu-asan

$(sort $(foreach v,plain asan tsan bench_check nolinux arm64 win mpi cuda mock mock_tsan kemu_asan,$(dir_$(v)))):
	@mkdir -p $@

# $(eval $(call program,V,HEAD)): the rule HEAD ("targets: prerequisites", a static pattern
# or a pattern rule) builds programs in variant V from their first prerequisite;
# object: an object file. Both remove the target first, so that a failed compile leaves
# no stale binary behind.
define program
$(2) | $(dir_$(1))
	@rm -f $$@
	$$(cc_$(1)) -o $$@ $$< $$(link_$(1))
endef
define object
$(2) | $(dir_$(1))
	@rm -f $$@
	$$(cc_$(1)) -c -o $$@ $$<
endef

$(eval $(call program,plain,$(EXAMPLES): $(BUILD)/%: examples/%.c $(EXAMPLE_DEPS)))
$(eval $(call program,plain,$(TESTS): $(BUILD)/%: tests/%.c $(TEST_DEPS)))
$(eval $(call program,asan,$(ASAN): $(BUILD)/asan/%: tests/%.c $(TEST_DEPS)))
$(eval $(call program,tsan,$(TSAN): $(BUILD)/tsan/%: tests/%.c $(TEST_DEPS)))
$(eval $(call program,nolinux,$(BUILD)/nolinux/%: tests/%.c $(TEST_DEPS)))
$(eval $(call program,arm64,$(BUILD)/arm64/%: tests/%.c $(TEST_DEPS)))
$(eval $(call program,arm64,$(BUILD)/arm64/%: examples/%.c $(EXAMPLE_DEPS)))
$(eval $(call program,win,$(BUILD)/win/%.exe: tests/%.c $(TEST_DEPS)))
$(eval $(call program,win,$(BUILD)/win/%.exe: examples/%.c $(EXAMPLE_DEPS)))
$(eval $(call program,win,$(BUILD)/win/flags.exe: tests/flags/flags.c $(TEST_DEPS)))

$(eval $(call program,mpi,$(BUILD)/mpi/train_mlp: examples/train_mlp.c $(EXAMPLE_DEPS)))
$(eval $(call program,mpi,$(BUILD)/mpi/%: tests/mpi/%.c $(TEST_DEPS)))
$(eval $(call program,mpi,$(MPI_BENCH): tests/bench/bench_comm.c $(BENCH_DEPS)))

$(eval $(call object,nvcc,$(CUDA_OBJ): zero_kernels.cu $(DEPS)))
$(eval $(call program,cuda,$(CUDA_EXAMPLES): $(BUILD)/cuda/%: examples/%.c $(CUDA_OBJ) $(EXAMPLE_DEPS)))
$(eval $(call program,cuda,$(CUDA_TESTS): $(BUILD)/cuda/%: tests/%.c $(CUDA_OBJ) $(TEST_DEPS)))
$(eval $(call program,cuda,$(CUDA_GPU): $(BUILD)/cuda/gpu_%: tests/gpu/%.c $(CUDA_OBJ) $(TEST_DEPS) $(wildcard tests/gpu/*.h)))

ifeq ($(MOCK_OK),1)
$(eval $(call object,mock_obj,$(BUILD)/mock/cuda_mock.o $(BUILD)/mock/nccl_mock.o: $(BUILD)/mock/%.o: tests/cuda_mock/%.c $(DEPS)))
$(eval $(call program,mock,$(BUILD)/mock/%: tests/%.c $(MOCK_OBJ) $(TEST_DEPS)))
$(eval $(call program,mock,$(BUILD)/mock/%: examples/%.c $(MOCK_OBJ) $(EXAMPLE_DEPS)))
# the mock's own checks (tests/cuda_mock/selftest.c -> build/mock/cuda_mock_selftest)
$(eval $(call program,mock,$(BUILD)/mock/cuda_mock_%: tests/cuda_mock/%.c $(MOCK_OBJ) $(TEST_DEPS)))
# the NCCL comm on the NCCL double (tests/cuda_mock/test_nccl.c -> build/mock/test_nccl)
$(eval $(call program,mock,$(BUILD)/mock/test_nccl: tests/cuda_mock/test_nccl.c $(MOCK_OBJ) $(TEST_DEPS)))
# tests/gpu/kernels.c on the mock checks the mock's launchers against the CPU references
$(eval $(call program,mock,$(BUILD)/mock/gpu_%: tests/gpu/%.c $(MOCK_OBJ) $(TEST_DEPS) $(wildcard tests/gpu/*.h)))

# build/mock-tsan/<name>: the same programs and the double under ThreadSanitizer (with
# ZERO_CUDA_MOCK_ASYNC=1 the double's stream workers race with host reads that come
# before their producer finished); tests/test_cuda_mock.sh runs a few unless ZERO_MOCK_TSAN=0
MOCK_TSAN_OBJ := $(BUILD)/mock-tsan/cuda_mock.o $(BUILD)/mock-tsan/nccl_mock.o $(call kemu_obj,$(BUILD)/mock-tsan)
$(eval $(call object,mock_tsan,$(BUILD)/mock-tsan/cuda_mock.o $(BUILD)/mock-tsan/nccl_mock.o: $(BUILD)/mock-tsan/%.o: tests/cuda_mock/%.c $(DEPS)))
$(eval $(call program,mock_tsan,$(BUILD)/mock-tsan/%: tests/%.c $(MOCK_TSAN_OBJ) $(TEST_DEPS)))
$(eval $(call program,mock_tsan,$(BUILD)/mock-tsan/%: examples/%.c $(MOCK_TSAN_OBJ) $(EXAMPLE_DEPS)))
$(eval $(call program,mock_tsan,$(BUILD)/mock-tsan/test_nccl: tests/cuda_mock/test_nccl.c $(MOCK_TSAN_OBJ) $(TEST_DEPS)))
$(eval $(call program,mock_tsan,$(BUILD)/mock-tsan/cuda_mock_%: tests/cuda_mock/%.c $(MOCK_TSAN_OBJ) $(TEST_DEPS)))

# the emulated kernels, per variant V (mock, mock_tsan, kemu_asan): the rewritten source, then
# the kernels and the emulator's runtime built with V's sanitizer flags
KEMU_SAN_mock      :=
KEMU_SAN_mock_tsan := -O1 -g1 -fno-omit-frame-pointer $(TSAN_CFLAGS)
# build/mock-tsan/kemu.o is not instrumented: its bookkeeping is one OS thread's, and TSan
# checking each switch and shuffle would make the TSan runs minutes longer
KEMU_RT_mock_tsan  := -O1 -g1 -fno-omit-frame-pointer
KEMU_SAN_kemu_asan := -O1 -g1 -fno-omit-frame-pointer $(ASAN_CFLAGS)
define kemu_rules
$(dir_$(1))/zero_kernels.kemu.cc: zero_kernels.cu tests/kemu/rewrite.sh | $(dir_$(1))
	sh tests/kemu/rewrite.sh $$< $$@
$(dir_$(1))/zero_kernels_kemu.o: $(dir_$(1))/zero_kernels.kemu.cc $(KEMU_DEPS) | $(dir_$(1))
	@rm -f $$@
	$$(CXX) $$(ZERO_CPPFLAGS) $$(CPPFLAGS) $$(MOCK_CPPFLAGS) $$(KEMU_CXXFLAGS) $$(or $$(KEMU_SAN_$(1)),$$(CFLAGS)) \
	    -include tests/kemu/kemu.h -c -o $$@ $$<
$(dir_$(1))/kemu.o: tests/kemu/kemu.cc $(KEMU_DEPS) | $(dir_$(1))
	@rm -f $$@
	$$(CXX) $$(ZERO_CPPFLAGS) $$(CPPFLAGS) $$(MOCK_CPPFLAGS) $$(KEMU_CXXFLAGS) \
	    $$(or $$(KEMU_RT_$(1)),$$(KEMU_SAN_$(1)),$$(CFLAGS)) -c -o $$@ $$<
# tests/kemu/<name>.cu (CUDA C++ with its own main) -> <dir>/kemu_<name>, on the double
$(dir_$(1))/%.kemu.cc: tests/kemu/%.cu tests/kemu/rewrite.sh | $(dir_$(1))
	sh tests/kemu/rewrite.sh $$< $$@
$(dir_$(1))/kemu_%: $(dir_$(1))/%.kemu.cc $$(KEMU_OBJ_$(1)) $(KEMU_DEPS) $(TEST_DEPS)
	@rm -f $$@
	$$(CXX) $$(ZERO_CPPFLAGS) $$(CPPFLAGS) $$(MOCK_CPPFLAGS) $$(KEMU_CXXFLAGS) $$(or $$(KEMU_SAN_$(1)),$$(CFLAGS)) \
	    -include tests/kemu/kemu.h -o $$@ $$< $$(KEMU_OBJ_$(1)) $(link_plain)
endef

# build/kemu-asan/<name>: tests/gpu/<name>.c (and tests/kemu/*.c) with the double and the
# emulated kernels, all under ASan+UBSan: device memory is allocated exactly to size, so a
# kernel's out-of-bounds global access is ASan's report (tests/test_kernels.sh)
KEMU_ASAN_OBJ := $(BUILD)/kemu-asan/cuda_mock.o $(BUILD)/kemu-asan/nccl_mock.o $(call kemu_obj,$(BUILD)/kemu-asan)
KEMU_OBJ_mock      = $(MOCK_OBJ)
KEMU_OBJ_mock_tsan = $(MOCK_TSAN_OBJ)
KEMU_OBJ_kemu_asan = $(KEMU_ASAN_OBJ)
$(foreach v,mock mock_tsan kemu_asan,$(eval $(call kemu_rules,$(v))))
$(eval $(call object,kemu_asan,$(BUILD)/kemu-asan/cuda_mock.o $(BUILD)/kemu-asan/nccl_mock.o: $(BUILD)/kemu-asan/%.o: tests/cuda_mock/%.c $(DEPS)))
$(eval $(call program,kemu_asan,$(BUILD)/kemu-asan/gpu_%: tests/gpu/%.c $(KEMU_ASAN_OBJ) $(TEST_DEPS) $(wildcard tests/gpu/*.h)))
else
$(BUILD)/mock/% $(BUILD)/mock-tsan/% $(BUILD)/kemu-asan/%:
	@echo "$@: the CUDA mock needs $(CUDA_HOME)/include/{cuda_runtime.h,cublas_v2.h}, nccl.h ($(NCCL_SAYS)) and a C++ compiler ($(CXX))"; exit 1
endif

# Benchmarks: a rule per source, since tests/bench/x.c and tests/bench/bench_x.c both
# map to build/bench_x.
$(foreach s,$(BENCH_SRC),$(eval $(call program,plain,$(BUILD)/$(call bench_name,$(s)): $(s) $(BENCH_DEPS))) \
  $(eval $(call program,bench_check,$(BUILD)/bench-check/$(call bench_name,$(s)): $(s) $(BENCH_DEPS))) \
  $(eval $(call program,cuda,$(BUILD)/cuda/$(call bench_name,$(s)): $(s) $(CUDA_OBJ) $(BENCH_DEPS))))
