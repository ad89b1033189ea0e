/* zero.h - v0.1.0 - ZeRO (Zero Redundancy Optimizer) training engine in one C header. MIT licence.

   zero.h trains models whose weights, gradients and optimizer states do not fit on one
   device by partitioning them across N data-parallel ranks (ZeRO stages 1-3), reducing
   gradients in buckets while the backward pass continues, and gathering stage-3
   parameters on demand. It can keep the optimizer states and parameters in host memory or
   on NVMe (ZeRO-Offload, ZeRO-Infinity) and store one huge layer as tiles. Your program
   keeps its own forward and backward code (llm.c style); zero.h owns the memory of the
   model states, the collectives and the optimizer, and tells you before you start how
   many bytes each rank will use.

   TABLE OF CONTENTS
     DO THIS
     THE SHORTEST COMPLETE PROGRAM
     ERRORS
     STEP BY STEP        1 a communicator   2 the zero_desc   3 modules and params
                         4 build            5 the training loop
                         6 save and load    7 clean up
     CONFIGURATION MACROS
     ENVIRONMENT VARIABLES
     ON STAGES
     ON GRADIENTS
     ON BUCKETS
     ON PREFETCH
     ON THE OPTIMIZER
     ON MEMORY
     ON OFFLOAD
     ON TILING
     ON ACTIVATIONS
     ON COMMUNICATORS
     ON ZERO++
     ON DEVICES
     ON CHECKPOINTS
     ON TRACING
     MEMORY OVERRIDES
     LOGGING
     WHAT IT DOES NOT DO
     LICENCE             at the end of the file

   DO THIS
     in exactly one C or C++ file, before the #include:

         #define ZERO_IMPLEMENTATION
         #include "zero.h"

     and include zero.h without the define everywhere else. Compile and link with -pthread,
     link with -lm. Nothing else is needed for the CPU device; the other backends are
     switched on by the CONFIGURATION MACROS.

     Your flags are yours: -O2, -O3, -Ofast, -ffast-math, GNU or ISO mode, gcc or clang,
     C or C++ give the same bits on every SIMD path.
     The implementation pins its own floating-point rules: IEEE operations in source
     order, no contraction into FMAs, no reassociation or reciprocals, NaN and infinity
     honoured (gcc: #pragma GCC optimize; clang: #pragma float_control, with its vector
     kernels written so its back end cannot fuse them); it tests non-finite gradients on
     their bit patterns; its kernels clear the flush-to-zero / denormals-are-zero bits that
     -Ofast's startup code sets, while they run. It defines no feature-test macro in your
     file, so M_PI and the rest of your mode's names stay as your flags make them; in strict
     ISO mode (-std=c99/c11) on glibc it needs POSIX.1b, which -pthread gives. clang
     -Ofast -march=native (FMA everywhere) is fine too: there zero.h compiles its functions
     without FMA. Where it cannot pin the rules it refuses to compile (#error): clang before
     11; clang with -ffast-math or -Ofast on a target other than x86-64; another compiler
     under __FAST_MATH__. The way out is stb's: the implementation in a file of its own,
     built without those flags (README.md, porting). Not detectable, so avoid it: clang
     with -ffp-contract=fast given on its own together with -mfma (the optimizer and the
     norm stay exact; the CPU device's GEMM and GELU may fuse).

   THE SHORTEST COMPLETE PROGRAM (one rank on the CPU, one linear layer y = w.x)

       zero_desc d = {0};
       d.stage = 3; d.param_dtype = ZERO_F32; d.optim.lr = 0.1;
       zero_ctx *z; zero_create(&z, &d);
       zero_module_desc md = {0}; md.name = "linear";
       zero_module lin; zero_add_module(z, &md, &lin);
       zero_param_desc pd = {0}; pd.name = "w"; pd.ndim = 1; pd.shape[0] = 4;
       zero_param w; zero_add_param(z, lin, &pd, &w);
       zero_build(z);                                  // plans and allocates everything
       float init[4] = {0}; zero_param_set_f32(z, w, init);
       for (int step = 0; step < 100; step++) {
           zero_fetch(z, lin);                         // stage 3: all-gather the layer
           float *W = (float*)zero_param_data(z, w), *G = (float*)zero_param_grad(z, w);
           float x[4] = {1, 2, 3, 4}, y = 0, target = 5;
           for (int i = 0; i < 4; i++) y += W[i] * x[i];
           for (int i = 0; i < 4; i++) G[i] += (y - target) * x[i];   // grads accumulate
           zero_release(z, lin);
           zero_grads_ready(z, lin);                   // reduce-scatter starts now
           zero_step(z);                               // fused clip + AdamW on the shard
       }
       zero_destroy(z);

     Every fallible call above returns a zero_result (or NULL); a real program checks each
     one (ERRORS, next).

   ERRORS
     Every fallible call returns a zero_result: ZERO_OK (0), ZERO_STEP_SKIPPED (1), or a
     negative ZERO_ERR_* (the list, each with its meaning, is the zero_result enum below).
     zero_result_str names a code, zero_last_error(z) gives the full sentence
     (zero_last_error(NULL): the calling thread's last one, also for zero_create and the
     communicator calls). Functions returning pointers return NULL on error and set the
     message. Nothing calls exit or abort on bad input.
     ZERO_STEP_SKIPPED is not an error: zero_step found non-finite gradients and skipped the
     step on every rank (ON THE OPTIMIZER). It is logged as a warning (ZERO_LOG_WARN, item
     STEP_SKIPPED; LOGGING) and leaves zero_last_error as it was.
     A rank that never arrives at a collective gives ZERO_ERR_TIMEOUT, never a hang. A
     collective that fails (a timeout, ranks calling different collectives, a communicator
     error, a failed NVMe read at a fetch) leaves the context's comm stream failed: every
     later call that waits for it returns that error, so print the message and destroy the
     context. Failed saves, loads rejected by their check and failed NVMe steps are not of
     this kind: they leave the state as it was (ON CHECKPOINTS, ON OFFLOAD).

   STEP BY STEP
     --- 1. Make one communicator endpoint per rank (or none: a world of one).
         Ranks as threads of one process (one machine, no launcher):

             zero_result train(zero_comm *comm, int rank, void *user) { ... steps 2-7 ... }
             zero_run_local(4, train, user);   // 4 threads; the lowest failing rank's result

         zero_last_error(NULL) then says which rank failed and why. zero_run_local makes and
         destroys the endpoints; zero_run_group(g, train, user) does
         the same on a group you made (to call zero_group_set_link or zero_group_set_nodes
         first). With threads of your own: zero_group_create(&g, N), then zero_comm_local(&c,
         g, rank) on each thread. One rank per process under mpirun, srun or torchrun:
         zero_comm_from_env(&c, NULL). See ON COMMUNICATORS. zero_comm_rank(c) and
         zero_comm_size(c) say where you are.

     --- 2. Describe the trainer in a zero_desc and create a context. A field left 0 takes its
         default, so name only what you change:

             zero_desc d = {0};
             d.comm = comm;                    // NULL: a world of one
             d.stage = 3;                      // 0..3, default 0 (ON STAGES)
             d.optim.lr = 3e-4;                // AdamW unless d.optim.type = ZERO_OPTIM_SGD
             zero_ctx *z;
             if (zero_create(&z, &d) != ZERO_OK) fprintf(stderr, "%s\n", zero_last_error(NULL));

         The fields, by concern (each one's default is beside it in zero_desc below):
             what       stage (ON STAGES)
             where      comm, device, cuda_stream (ON DEVICES)
             precision  param_dtype (default ZERO_BF16), grad_dtype, grad_accum_dtype
                        (ON GRADIENTS)
             the step   accum_steps (micro-batches per step), optim, clip_norm, loss_scale,
                        loss_scale_init, loss_scale_window, loss_scale_min, cpu_threads
                        (ON THE OPTIMIZER)
             comms      bucket_bytes (ON BUCKETS), timeout_ms (every collective; 120 s),
                        reduce_mode (NCCL: exact or NCCL's own sums; ON COMMUNICATORS)
             stage 3    max_live_bytes, prefetch_bytes, persist_bytes, reuse_distance
                        (ON PREFETCH); align_elems (ON STAGES)
             memory     device_bytes_cap, host_bytes_cap (ON MEMORY); offload_optimizer,
                        offload_params, offload (ON OFFLOAD); offload_activations,
                        act_live_bytes (ON ACTIVATIONS)
             hooks      allocator (MEMORY OVERRIDES), logger (LOGGING)
         From a DeepSpeed config file instead: zero_desc_from_json(text, &d, report, size,
         &n) fills d from its zero_optimization, fp16/bf16, optimizer, gradient_clipping and
         gradient_accumulation_steps, and writes one line into report for each of the n keys
         it does not honour (its declaration below says which, and why); then set d.comm.
         zero_query_desc(z) returns the values in effect; zero_rank(z) and zero_world_size(z)
         give the context's rank and world size. One context per endpoint at a time: for two
         models, make two groups.

     --- 3. Register the model, in the same order on every rank. A module is the unit that
         is gathered, released and reduced together (a layer); a param is a named tensor of
         a module:

             zero_module_desc md = {0}; md.name = "block0";   // unique; .frozen = 1: not trained
             zero_module blk; zero_add_module(z, &md, &blk);
             zero_param_desc pd = {0}; pd.name = "w";          // unique within its module
             pd.ndim = 2; pd.shape[0] = 256; pd.shape[1] = 64; // up to ZERO_MAX_DIMS dims
             zero_param w; zero_add_param(z, blk, &pd, &w);    // .no_decay = 1: biases, norms

         A weight used in two places (GPT-2's output layer is its token embedding) is
         registered once and tied where else it is used:

             zero_add_tied_param(z, lnf, "head", wte, &head);  // lnf uses embed's wte as "head"

         (ON GRADIENTS: tied weights). Names are 1-255 bytes without control characters,
         quotes or backslashes (they go into checkpoints and safetensors keys, where
         "module.param" must be unique too). Handles are small ids; a stale or another
         context's handle is ZERO_ERR_INVALID_HANDLE. A linear layer too big to gather at
         once is registered as tiles instead (ON TILING). zero_plan_get(z, &plan) already
         gives the bytes every rank will use (ON MEMORY).

         A tensor you keep stacked, [L, ...] with slice l belonging to layer l, is one call:

             zero_module layer[L];                            // added with zero_add_module
             zero_param_desc qd = {0}; qd.name = "qkvw";
             qd.ndim = 3; qd.shape[0] = L; qd.shape[1] = 3*C; qd.shape[2] = C;
             zero_param qkvw[L]; zero_add_param_stack(z, layer, L, &qd, qkvw);

         registers param "qkvw" of shape [3C, C] (shape[1..]; [1] for a 1-D [L] tensor) in
         each module layer[l], handle qkvw[l]. shape[0] must be L and the modules distinct;
         all or nothing: a failure registers no slice.

         The flat order: every param in the order of the zero_add_param calls (not of the
         modules), back to back and unpadded, a stack's L slices one after the other, so
         that the stack lies in it as [L, ...]. zero_param_offset(z, p) says where p starts
         and zero_param_numel(z, p) how many elements it has; zero_num_params(z) is the
         length of the whole. Register your tensors in the order your program keeps them in
         one contiguous buffer (llm.c's GPT-2: wte, wpe, then ln1w [L, C], ln1b [L, C], qkvw
         [L, 3C, C], ..., each a stack over the L layers, then lnfw, lnfb) and the flat order
         is that buffer's layout: zero_set_params_f32 loads the model from it (step 4),
         zero_gather_params_f32 saves it into it (step 6), and zero_ckpt_read_f32 fills it
         from a checkpoint (ON CHECKPOINTS). With desc.flat_layout = 1 (stages 0-2) that
         buffer is zero.h's own: the params live in it in the flat order (stages 0-1 without
         a grad_accum_dtype of its own: the gradients too, in a second one), so
         zero_param_data of the first param is the whole model's base and a stack is one
         pointer (slice l at l times a slice's elements), for the run. zero.h copies a module's gradients out of it for their reduction (the
         step's last micro-batch) and the params in after each step, zero_param_set_f32 and
         zero_load: one more copy of each per rank (plan.flat_bytes, inside the params and
         grads rows) and one pass over each per step. Stage 3 refuses it (its params exist a
         module at a time); at stage 2 zero_param_grad stays per param (the staging area).

     --- 4. Build and initialize. zero_build(z) is collective: it checks that every rank
         registered the same model (else ZERO_ERR_MISMATCH on every rank), plans every
         buffer, checks the caps and allocates everything at once. Nothing can be registered
         after it (ZERO_ERR_ALREADY_BUILT), and a training call before it is
         ZERO_ERR_NOT_BUILT. Then set the params on every rank: zero_param_set_f32(z, p,
         values) takes the param's full fp32 values in a host array, the same on every rank
         (each rank keeps its part; not collective); zero_set_params_f32(z, all) does that
         for every param from one array in the flat order (step 3). Or load them (step 6).

     --- 5. Train. A step is accum_steps micro-batches, then zero_step:

             for each micro-batch:
               forward:  for m in modules:
                           zero_fetch(z, m); ... read zero_param_data(z, p) ...; zero_release(z, m);
               backward: for m in reversed(modules):
                           zero_fetch(z, m); ... add into zero_param_grad(z, p) ...;
                           zero_release(z, m); zero_grads_ready(z, m);
             r = zero_step(z);                 // collective: ZERO_OK or ZERO_STEP_SKIPPED

         zero_fetch makes a module's params readable (stage 3: waits for its all-gather;
         stages 0-2: nothing to do) and zero_release lets them go. They nest: a module
         fetched twice stays fetched until it is released twice. zero_param_data points at a
         param's values in param_dtype (stage 3: between fetch and release only; else NULL,
         ZERO_ERR_NOT_FETCHED). zero_param_grad points at the buffer you ADD the param's
         gradient into (ON GRADIENTS). zero_grads_ready(z, m) says module m's gradients of
         this micro-batch are complete: once per trainable module and micro-batch (a no-op for
         a frozen one); its reduction starts in the background (ON BUCKETS). zero_step waits
         for the reductions and updates the params (ON THE OPTIMIZER); every module must be
         released (else ZERO_ERR_STATE) and ready (else ZERO_ERR_GRADS_NOT_READY). With f16,
         multiply your loss by zero_loss_scale(z). zero_stats_get(z, &s) gives steps taken and
         skipped, the last gradient norm, bytes sent per collective, the prefetch counters and
         what the steps cost the host (CUDA: host_syncs, device_allocs, comm_headers).
         zero_allreduce_f64(z, v, n) (collective) sums n doubles of a host array over the
         ranks, in place, in rank order, so every rank gets the same bits (a loss to print).
         Between the step's last zero_grads_ready and zero_step, zero_grad_shard_f32(z, p,
         out, &begin, &end) reads this rank's slice of p's reduced gradient, averaged as the
         optimizer takes it, and zero_grad_gather_f32(z, p, out) (collective) all of it on
         every rank: for a gradient check, or a print (their declarations give the cost).

         Your own math on param_dtype values, in host memory (zero_param_data and
         zero_param_grad on the CPU device; elsewhere zero_copy them first):
         zero_to_f32(dst, src, dtype, n) widens n values to fp32 (exactly), zero_from_f32(dst,
         dtype, src, n) narrows fp32 to dtype and zero_add_f32(dst, dtype, src, n) adds fp32
         values into a dtype array (dst += src, summed in fp32: an fp32 gradient into a bf16
         zero_param_grad); what narrows rounds to nearest even (a NaN stays a NaN; in f16, a
         value past the range becomes infinity). zero_expf, zero_logf and zero_tanhf are exp,
         log and tanh with the same bits on every platform, compiler and GPU (libm's differ:
         glibc's tanhf between x86-64 and ARM64, say), within 1 ulp: use them where your
         loss or activations should train bit for bit the same everywhere (the examples do).
         zero_dtype_size(dtype) is the bytes of one element (0: unknown), zero_dtype_str its
         name ("f32", "bf16", "f16").

     --- 6. Save and load, between steps (collective; ON CHECKPOINTS):

             zero_save(z, "ckpt");             // sharded, atomic, checksummed
             zero_load(z, "ckpt");             // at any stage and world size; exact resume
             zero_export_safetensors(z, "model.safetensors", ZERO_BF16);   // or ZERO_F32
             zero_load_safetensors(z, "model.safetensors");                // weights only

         zero_gather_params_f32(z, out) (collective) fills a host array of zero_num_params(z)
         floats with every param in fp32, in the flat order (step 3): the inverse of
         zero_set_params_f32. To need that array on one rank only: zero_gather_params_f32_root
         (z, root, out); to need none, zero_gather_params_each(z, root, fn, user) hands each
         param's values to fn, a module at a time.

     --- 7. Clean up: zero_device_free what you took with zero_device_alloc, zero_destroy(z),
         then the communicator: zero_comm_destroy(c) for an endpoint you made (after the last
         context that used it) and zero_group_destroy(g) for a group. zero_run_local cleans up
         its own endpoints and group.

   CONFIGURATION MACROS (define before the implementation include)

       ZERO_IMPLEMENTATION   compile the implementation into this file
       ZERO_STATIC           give every public function static linkage
       ZERO_API              override the linkage of public functions
       ZERO_MALLOC(sz,u) / ZERO_FREE(p,u)   replace malloc/free (define both or none)
       ZERO_CUDA             the CUDA device and NCCL: compile zero_kernels.cu with nvcc and
                             -fmad=false (which keeps the CPU's bits), link it with cudart,
                             cuBLAS and NCCL (make CUDA=1 does all of this)
       ZERO_MPI              the MPI communicator (build with mpicc; Open MPI or MPICH)
       ZERO_CBLAS            the tiled linear's GEMMs through cblas_sgemm (link a CBLAS)
       ZERO_IO_URING         the NVMe tier's I/O through io_uring (link -luring; the Makefile
                             adds both when liburing is installed)
       ZERO_NO_SIMD          leave out the AVX2/AVX-512 optimizer paths (portable C only)
       ZERO_NO_LINUX         POSIX calls only, none of Linux's (defined by zero.h off Linux):
                             no io_uring, O_DIRECT (F_NOCACHE where it exists), madvise,
                             pthread_condattr_setclock (timeouts on CLOCK_REALTIME) or
                             posix_fallocate (ftruncate); tests/test_nolinux.sh runs it here
       ZERO_STAGING_BYTES    the CUDA device's two pinned staging buffers, bytes each (default
                             4 MiB; a multiple of 64): zero_param_set_f32, zero_gather_params_f32
                             and checkpoints move values through them. ZERO_STAGE_BYTES, its
                             old name, is still accepted
     No feature-test macro (_POSIX_C_SOURCE, _GNU_SOURCE) is needed or defined by zero.h;
     define one yourself if your own code wants it. Compiler flags: any (DO THIS).
     Warnings: none from zero.h, gcc or clang, C or C++, under -Wall -Wextra -Wpedantic
     -Wshadow -Wundef -Wcast-qual -Wconversion -Wsign-conversion -Wdouble-promotion, plus
     -Wstrict-prototypes -Wmissing-prototypes in C and -Wold-style-cast
     -Wzero-as-null-pointer-constant -Wmissing-declarations in C++ (the implementation, which
     is C, turns those two cast and null warnings off inside itself).

   ENVIRONMENT VARIABLES (all optional)

       ZERO_IO=uring|threads          the NVMe tier's I/O engine, read at zero_build (ON OFFLOAD)
       ZERO_SIMD=scalar|avx2|avx512|neon   caps the CPU kernels' SIMD path, read at zero_create
       ZERO_RENDEZVOUS_PORT           NCCL: the port of the rendezvous (ON COMMUNICATORS)
       ZERO_RENDEZVOUS_TIMEOUT_MS     NCCL: how long ranks wait for each other; default 300000
       the launchers' variables       read by zero_comm_from_env (ON COMMUNICATORS)

   ON STAGES
       stage 0   plain data parallel: every rank holds everything; gradients are
                 all-reduced (as reduce-scatter + all-gather, in the same order as
                 the other stages, so that with accum_steps 1 all stages give
                 bitwise-equal results; with accumulation, stages 0-1 add micro-
                 batches before reducing and stages 2-3 after, equal to rounding).
       stage 1   fp32 master weights and optimizer moments are partitioned.
       stage 2   + gradients: each module's gradient is reduce-scattered straight
                 into the rank's gradient shard.
       stage 3   + parameters: zero_fetch all-gathers a module, zero_release lets it
                 go (ON PREFETCH).
     Per-rank model-state bytes, bf16 params and grads with AdamW (Psi params, N ranks):
     16 Psi, 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N, 16 Psi/N. With f32 params the fp32
     master copy is the parameter itself and takes no extra bytes.
     Every module's flat span is padded to a multiple of N * align_elems elements (default
     16) and every parameter inside it starts at a multiple of align_elems; rank r owns the
     slice [r*S/N, (r+1)*S/N) of every module.

   ON GRADIENTS
     zero_param_grad returns a buffer in grad_dtype that holds zeros at the start of
     each micro-batch (stages 2-3) or of each step (stages 0-1, which accumulate
     micro-batches in place): ADD your gradient into it. Write the gradient of your
     rank's mean loss for that micro-batch; zero_step averages over ranks and
     micro-batches (the sum is taken in fp32 and divided by N * accum_steps *
     loss_scale inside the fused optimizer pass). grad_accum_dtype = ZERO_F32 keeps
     the accumulated gradients (full buffers in stages 0-1, shards in stages 2-3)
     in fp32 instead of grad_dtype. A frozen module has no gradient buffer (NULL,
     ZERO_ERR_STATE).

     --- Tied weights. A weight whose gradient comes in several windows of one micro-batch
     (the output layer's part first, the embedding's last) is a shared module's. Two ways
     to say so, both planned at zero_build:
       zero_add_tied_param(z, user, "head", wte, &head)   module `user` uses wte as "head":
            zero_fetch(user) fetches wte's module too, zero_param_grad(head) is wte's
            gradient, and wte's module is reduced once it and every module tied to it have
            called zero_grads_ready (in either order). The tie has no storage: zero_num_params,
            gathers, checkpoints and safetensors hold wte once. One level: an owner uses no
            ties, a user owns nothing tied to, and a module needs a param of its own.
       md.shared = 1                                       the module itself is fetched
            again later in the backward pass and adds more to its gradient; call
            zero_grads_ready once, after its last window.
     A shared module's gradient has a staging slot of its own (its span in grad_dtype,
     ZERO_CAT_BUFFERS) instead of a place in the staging area (ON BUCKETS), so it stays
     open across the backward pass without holding up the others. The results are bitwise
     those of adding both parts by hand in one window, in the same order.

   ON BUCKETS
     zero_grads_ready(z, m) queues module m for reduction. Queued modules are reduced
     together once they hold bucket_bytes of gradients or the micro-batch's last module
     is ready; the reductions run on the context's comm stream (on the CPU device, a
     thread of its own) while your backward pass continues. Stages 0-1 reduce on the
     last micro-batch of a step only; stages 2-3 on every micro-batch. On the CPU device
     a reduction's sum uses the vector units and borrows the cpu_threads pool (ON THE
     OPTIMIZER), which sleeps during your backward pass, so with cpu_threads > 1 a
     reduction may briefly run on more cores than the comm thread; one rank reducing in
     place moves no data at all.
     The default bucket_bytes scales with the model: with G the gradient bytes of the
     trainable modules (their padded elements x the size of grad_dtype),

         bucket_bytes = min(16 MiB, G / 8), rounded down to a multiple of 64 (at least 64)

     so a small model's backward pass is about 8 buckets and a model of more than 64M
     trainable bf16 params keeps 16 MiB buckets. zero_build sets it (zero_query_desc
     says 0 before, the value after); zero_plan_get and zero_estimate use it before. A
     value you set is used as it is.
     In stages 2-3 (and whenever grad_accum_dtype differs from grad_dtype) a module's
     gradient buffer is taken from a staging area of 2 x bucket_bytes (at most all the
     trainable gradients, and at least the largest trainable module, whose gradient is
     staged whole; by default G / 4 or that module) at its first zero_param_grad of the
     micro-batch and given back once it is reduced: call zero_grads_ready for a module
     before opening many others, or a full staging area is ZERO_ERR_OVER_CAP (raise
     bucket_bytes; a module released with its gradient open is named: tie it, ON
     GRADIENTS). A shared module's gradient has a slot of its own instead. zero_stats_get's
     peak_staging_bytes tells the most it held.

   ON PREFETCH (stage 3)
     The first step records the order of zero_fetch calls; at its zero_step every rank
     checks that the others recorded the same order (a divergence is ZERO_ERR_MISMATCH
     naming the first differing module, never a hang). From the second step on, each
     zero_fetch and zero_release issues the all-gathers of the next modules in that order,
     up to prefetch_bytes ahead (default max_live_bytes; < 0: off), so the gather of a
     module usually runs while you compute the one before. Gathered modules live in one
     arena sized at zero_build: max_live_bytes (default: the largest module) for
     prefetched and kept modules plus room for the largest module in use, so a
     steady-state step allocates nothing. Modules of at most persist_bytes stay gathered
     between fetches (re-gathered once after each step). A released module whose next
     fetch is within reuse_distance fetches is kept instead of freed. If a step fetches
     in another order (dynamic control flow), that step fetches on demand, with a
     warning; the result is the same. zero_stats_get counts hits (the gather was issued
     before the fetch), misses, bytes fetched ahead, peak gathered bytes and time waited.
     zero_param_set_f32 at stage 3: the next zero_fetch of the module sees the new values;
     a module fetched right now keeps the values it was gathered with until released.
     zero_query_desc gives the max_live_bytes and prefetch_bytes in effect after
     zero_build. A lower max_live_bytes trades prefetch for memory (ON MEMORY says when
     stage 3 needs less than stage 2).

   ON THE OPTIMIZER
     zero_step waits for the reductions, computes the global gradient norm from the
     shards (one small all-reduce that also carries the non-finite flag), and runs
     one fused pass: unscale, clip (clip_norm; 0: off), AdamW or SGD with momentum,
     dampening and Nesterov (PyTorch's semantics; desc.optim), narrow to the param dtype.
     Non-finite gradients skip the step on every rank and zero_step returns
     ZERO_STEP_SKIPPED (not an error). With f16 the loss scale is dynamic by default
     (loss_scale = 0): multiply your loss by zero_loss_scale(); an overflow halves it
     (not below loss_scale_min), and it doubles after loss_scale_window clean steps;
     loss_scale > 0 is a static scale.
     On the CPU the pass runs on cpu_threads threads (0 means 1: the calling thread
     alone; the others start at zero_build, sleep between steps and stop at
     zero_destroy). It uses AVX-512 or AVX2 when the CPU has them (GCC/clang on x86-64),
     NEON on ARM64 (GCC/clang on AArch64: the optimizer, the norm, the sums, ZeRO++'s int8
     payloads), a portable C loop elsewhere (ZERO_SIMD caps the path), and gives
     bitwise-identical results on every path and thread count, and on x86-64 and ARM64
     alike. The norm (each rank reads its own slice of the gradients; the ranks' sums are
     added in rank order), the reductions' sums and
     the clearing of the gradients for the next step use the same threads and vector
     units (at stage 0 the pass clears each gradient right after reading it). With more
     than one rank on the local or MPI comm, a module's last reduction of the step takes
     its slice's share of the norm while the sum is in cache, so zero_step reads only what
     no reduction covered; on the local comm a stage-0 all-reduce writes each sum straight
     into every rank's gradients (no separate gather). The norm too is the same double at
     every stage, world size, path and thread count.

   ON MEMORY
     zero_build plans every buffer before allocating any. zero_plan_get returns the plan
     (also before zero_build) and zero_estimate(desc, world_size, num_modules,
     module_numels, &plan) computes it from sizes alone: bytes per rank by tier
     (ZERO_TIER_DEVICE, _HOST, _NVME) and category (ZERO_CAT_PARAMS, _GRADS, _MASTER,
     _OPTIM, _BUFFERS, _ACTIVATIONS: the activation stash, ON ACTIVATIONS; model_state_bytes
     counts neither buffers nor activations). After zero_build, zero_stats_get reports
     exactly the planned bytes. A plan over device_bytes_cap or host_bytes_cap fails
     zero_build with ZERO_ERR_OVER_CAP. A steady-state step allocates nothing.
     build/zero_estimate (examples/zero_estimate.c) prints the plan from the command line.
     The buffers scale with the model (ON BUCKETS, ON PREFETCH), so with N >= 2 ranks
     and the defaults the per-rank total (states + buffers, plan.total_bytes) falls, not
     strictly, from stage 0 to 3 when the modules are small beside the model:
       0 -> 1  always: the buffers are the same and stage 1 shards master and moments
       1 -> 2  when the largest trainable module's gradient bytes (rounded up to 64)
               are at most (1 - 1/N) G, the gradients stage 2 shards away: the staging
               area (G / 4, or that module) then fits in them
       2 -> 3  when 2 x the largest module's param bytes (each rounded up to 64), plus
               the modules kept by persist_bytes, are at most the params stage 3 shards
               away, (1 - 1/N) x the param bytes: the largest module at most about 3/8
               of the model at N = 4, 1/4 at N = 2, 1/2 at large N
     A model of many similar modules (a transformer's blocks) falls at any size. One or
     two big modules cannot (for 2 -> 3, a max_live_bytes below the largest module
     helps if you never hold two big modules fetched at once), nor can anything at
     N = 1, where nothing is sharded and stages 2-3 only add buffers, nor a toy of a few
     hundred params, where the 64-byte rounding of each buffer outweighs what sharding
     saves. A tiled linear's buffers are the same at every stage. build/zero_estimate
     cuts --params into at most 32 modules (equal but the last) by default, so its
     total_bytes_per_rank falls from stage 0 to 3 at N >= 2.

   ON OFFLOAD
     Two fields say which tier the model states live in, each a zero_offload_tier:
     ZERO_OFFLOAD_NONE (the default: the compute device), _HOST or _NVME; the plan and
     zero_stats_get count the bytes by the same tiers (zero_tier: ZERO_TIER_DEVICE, _HOST,
     _NVME). desc.offload configures the NVMe tier.
       offload_optimizer = ZERO_OFFLOAD_HOST  fp32 master weights and optimizer moments in
                                              host memory (on a GPU: see ON DEVICES)
       offload_optimizer = ZERO_OFFLOAD_NVME  the same in files (ZeRO-Infinity); needs
                                              offload.nvme_dirs[0]
       offload_params = ZERO_OFFLOAD_HOST     the params in host memory
       offload_params = ZERO_OFFLOAD_NVME     the stage-3 param shard in the same files;
                                              needs stage 3 and offload_optimizer NVMe
     On CUDA and EMU only offload_optimizer = ZERO_OFFLOAD_HOST is there yet. What is not
     supported is ZERO_ERR_UNSUPPORTED at zero_create, with a sentence. Every mode gives
     bitwise the same params as the same run without offload. On the CPU device host and
     device memory are the same RAM: the host tier changes only where zero_plan_get and
     zero_stats_get count the bytes (ZERO_TIER_HOST) and which cap applies
     (host_bytes_cap instead of device_bytes_cap).

     --- The NVMe tier. At zero_build each rank creates one preallocated file in each
     directory of offload.nvme_dirs (NULL-terminated, at most ZERO_MAX_NVME_DIRS; the state
     is striped across them; the strings must stay valid until zero_build), and removes
     them at zero_destroy. They take about 2 x (master + moments + params) bytes per rank.
     A missing, read-only or full directory fails zero_build with ZERO_ERR_IO naming the
     path. Files are opened with O_DIRECT; a filesystem that refuses it (tmpfs) gets
     buffered I/O and an INFO log line (OFFLOAD_BUFFERED).
     zero_step streams the rank's state through three host buffers that share
     offload.buffer_bytes (default 64 MiB; pieces of at least 1024 elements): while the
     fused CPU pass updates one piece, the next is read and the one before written. The
     plan counts the buffers under ZERO_TIER_HOST, ZERO_CAT_BUFFERS and master and moments
     under ZERO_TIER_NVME. Each block moves as 1 MiB requests; offload.queue_depth of them
     (default 16, at most 256) are in flight, at most half of them reads and half writes
     (at least one each), reads served first: 8 reads and 8 writes of 1 MiB by default.
     The buffers ask the kernel for huge pages (madvise, honoured when transparent huge
     pages are "madvise" or "always"): a request then spans a few physically contiguous
     pieces of memory rather than 256 pages; no memory is added, and without huge pages
     the buffers work as before. They go through io_uring
     in a ZERO_IO_URING build, else (or when the kernel refuses io_uring, as a container's
     seccomp filter may: an INFO log line, OFFLOAD_ENGINE) through queue_depth I/O
     threads. ZERO_IO=uring or ZERO_IO=threads in the environment at zero_build forces
     one (another value: ZERO_ERR_INVALID_ARG). The blocks' checksums (see Failures) are
     taken by the pass itself on the cpu_threads optimizer threads, piece by piece while
     each piece is in cache, so zero_step reads a block from memory once and the I/O
     thread only moves bytes.
     Failures: everything read is checked against its checksum; a mismatch or a short file
     is ZERO_ERR_CORRUPT naming the file and offset, an OS error (ENOSPC, EIO, ...)
     ZERO_ERR_IO naming the file. A step that fails on any rank returns the error on every
     rank and leaves the params, optimizer state, gradients and step count as they were.

     --- Params on NVMe. The stage-3 gather of a module first reads the rank's slice from
     the files, so a prefetched module's read overlaps your compute like its gather; a
     failed read fails that zero_fetch like a failed collective (ERRORS). The shard counts
     under ZERO_TIER_NVME, ZERO_CAT_PARAMS, plus one block of it buffered under
     ZERO_TIER_HOST, ZERO_CAT_BUFFERS. Frozen modules have no optimizer state: their shards
     stay in memory (ZERO_TIER_DEVICE, ZERO_CAT_PARAMS).

     --- Everything else works as without offload: zero_save, zero_load, the safetensors
     calls, zero_param_set_f32 and zero_gather_params_f32 stream between the files and
     the tier block by block, never holding the state in memory.

   ON TILING
     zero_tiled_linear_add(z, &desc, &tl) registers y = x W^T + b (W [out_features,
     in_features]) as T modules "<name>.tile<t>", each a block of consecutive output rows
     with params "w" [rows, in_features] and "b" (desc.bias). T is desc.tiles, or derived
     from desc.tile_bytes (the largest tile of W in bytes); it need not divide
     out_features; zero_tiled_linear_tiles(z, tl) tells it. zero_tiled_linear_set_f32 sets
     W and b from full host arrays. zero_tiled_linear_forward (x [rows, in] -> y [rows,
     out]) and zero_tiled_linear_backward (adds dW and db into the tiles' gradients, calls
     zero_grads_ready for each tile itself, and writes dx unless it is NULL) fetch,
     compute and release one tile at a time, so at stage 3 at most the tile in use and the
     prefetched next one are gathered, and with bucket_bytes at most a tile each of
     gradient staging is resident. The CPU's SGEMM accumulates every output in order over
     k, so any tile count gives the same bits as one tile (with ZERO_CBLAS: equal to
     rounding). zero_sgemm(z, ...) is that GEMM for your own layers (a built context with a
     tiled linear; cuBLAS on the CUDA device).

   ON ACTIVATIONS
     Once the model states are partitioned, the activations kept for the backward pass fill
     memory. The usual remedy is checkpointing: keep only each layer's input and recompute
     the layer in the backward pass. zero.h keeps those inputs for you, in planned memory, in
     host memory or on NVMe (ZeRO-R), and brings them back ahead of the backward pass:
       1 before zero_build register a slot per checkpoint:
             zero_act a; zero_act_add(z, "block3.in", bytes, &a);    // unique names
       2 in the forward pass, per micro-batch: zero_act_put(z, a, x) copies the bytes in
         (x: device memory, as zero_copy's; it returns at once, the write continues);
       3 in the backward pass: zero_act_get(z, a, x) gives them back, once per put.
     Where the slots live is desc.offload_activations:
       ZERO_OFFLOAD_NONE  (default) one arena in device memory holds every slot
       ZERO_OFFLOAD_HOST  the same arena in host memory (pinned on CUDA)
       ZERO_OFFLOAD_NVME  a file per directory of offload.nvme_dirs (slots striped across
                          them, created at zero_build, removed at zero_destroy): each slot
                          its bytes and a 64-byte trailer with a checksum, in a 4 KiB-aligned
                          area, written and read through act_live_bytes of staging buffers in
                          host memory (default 2 x the largest area; at least one area, else
                          zero_build fails with ZERO_ERR_OVER_CAP), by the NVMe tier's I/O
                          engine (ON OFFLOAD: io_uring or threads, O_DIRECT or buffered)
     The plan counts them under ZERO_CAT_ACTIVATIONS (none: device tier; host: host; nvme:
     the files under ZERO_TIER_NVME and the staging buffers under ZERO_TIER_HOST);
     zero_estimate_activations(desc, n, bytes, &plan) adds the same to a zero_estimate plan.
     A steady-state step allocates nothing. On NVMe a put copies into a free staging buffer
     (waiting for an older write when all are busy) and queues the write; a buffer keeps its
     bytes after the write until it is needed, so the last layers' inputs are usually still
     there when the backward pass starts. The first step records the order of the gets;
     from the second step on, each zero_act_get queues reads of the next slots in that
     order into the free buffers while you compute, as stage 3 prefetches (ON PREFETCH).
     Another order is a warning (ACT_ORDER_CHANGED) and on-demand reads for that step,
     never wrong bytes. zero_stats_get counts act_hits (the bytes were in memory or being
     read ahead), act_misses (read on demand), bytes written and read, and the time waited;
     the trace shows the transfers on the "activations" track.
     Misuse is a result code naming the slot: a second put before the get, a second get, a
     get with nothing put (ZERO_ERR_STATE); zero_step fails with ZERO_ERR_STATE naming a slot
     put and never asked for, dropping it (a get of it then says "used after the step"). A
     slot's bytes live from its put to its get within one step. A write that fails (ENOSPC,
     EIO) keeps the bytes in their staging buffer until zero_act_get takes them, and the
     next zero_act_put or zero_act_get returns ZERO_ERR_IO naming the file and slot, once
     (its own work done); a put that finds every buffer so kept is refused (ZERO_ERR_IO,
     "not stashed": your bytes are still yours). A read that fails its checksum is
     ZERO_ERR_CORRUPT. A full disk at zero_build is ZERO_ERR_IO naming the path.
     Recomputation is yours: recompute with the same code and the results are bitwise those
     of keeping the activations (examples/train_gpt.c --checkpoint-activations
     --offload-activations nvme). On the CUDA device the copies into and out of the staging
     buffers are synchronous on your stream (desc.cuda_stream) for now.

   ON COMMUNICATORS
     A zero_comm is one rank's endpoint; desc.comm takes it (NULL: a world of one). Every
     collective has a timeout (desc.timeout_ms): a rank that never arrives is named in a
     ZERO_ERR_TIMEOUT and ranks that call different collectives get ZERO_ERR_MISMATCH,
     never a hang. The three kinds all add in fp32 in rank order, so they give bitwise the
     same results:
       local  N ranks as threads of one process (STEP BY STEP 1), on host or device memory
              (ranks sharing one GPU); zero_group_set_link(g, latency_us, gbytes_per_s)
              models a slower link, for overlap experiments (call it before the ranks start)
       mpi    (ZERO_MPI) one rank per process; host memory only (the CPU device)
       nccl   (ZERO_CUDA) one GPU per rank, with desc.device = ZERO_DEVICE_CUDA: a process
              per GPU, or zero_run_nccl(N, fn, user), thread r on GPU r; at most 64 ranks

     --- A process per rank, from a launcher:

         zero_comm *c; zero_comm_from_env(&c, NULL);   // before zero_create
         ... desc.comm = c; train; zero_destroy ...
         zero_comm_destroy(c);                          // finalizes MPI if it initialized it
         $ mpicc -DZERO_MPI ... -o train && mpirun -np 4 ./train

     The backend: NULL or "auto" (MPI under an MPI launcher, NCCL under torchrun in a
     ZERO_CUDA build, else a world of one), "mpi" (a launcher is required), "nccl" or
     "local". The variables, in this order: OMPI_COMM_WORLD_RANK/SIZE (Open MPI's mpirun),
     PMI_RANK/PMI_SIZE (MPICH, Intel MPI), SLURM_PROCID/SLURM_NTASKS (srun),
     RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (torchrun). None set, or a launcher
     that started one process: a world of one ("mpi" makes the first an error whose
     sentence lists the variables). An MPI launcher without ZERO_MPI, or torchrun's
     variables without ZERO_CUDA (they mean NCCL), is ZERO_ERR_UNSUPPORTED; half-set or
     malformed variables are ZERO_ERR_INVALID_ARG naming the variable. The nodes (ZeRO++'s
     topology: runs of consecutive ranks) come from the launcher's ranks per node:
     OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE ("2" or "2(x4)") or
     LOCAL_WORLD_SIZE. One that is malformed, does not divide the world size, or disagrees
     with the launcher's local rank (ranks placed round robin, not in runs) leaves no
     nodes: only ZeRO++ needs them, and its zero_create then fails saying why.

     --- MPI. zero.h calls MPI from a thread of its own, so it initializes MPI with
     MPI_THREAD_MULTIPLE (if you initialize MPI yourself, ask for MULTIPLE; SERIALIZED
     works if you make no MPI calls of your own while a context lives). It works on a dup
     of MPI_COMM_WORLD, so your own traffic does not mix with it, and moves at most INT_MAX
     bytes per rank and call (ZERO_ERR_UNSUPPORTED). A lost rank is named ("rank(s) 2
     never arrived", ZERO_ERR_TIMEOUT); an MPI error is ZERO_ERR_COMM. After either the
     endpoint is broken (later calls fail fast) and zero_comm_destroy skips MPI_Finalize,
     which would wait for the lost rank: print the message and exit non-zero. Open MPI's
     mpirun ends the whole job as soon as one process dies or exits non-zero; with
     --mca orte_abort_on_non_zero_status 0 the survivors live on, time out and report.

     --- NCCL. The GPU is LOCAL_RANK (or the MPI launcher's local rank). Rank 0 hands
     NCCL's id to the others through a small TCP rendezvous: it listens on the port (every
     interface), the others connect to MASTER_ADDR and retry until it does; a ZERO_MPI
     build under an MPI launcher passes the id through MPI instead. The port is
     MASTER_PORT, or MASTER_PORT + 1 under a torchrun whose agent serves its own store
     there (it exports TORCHELASTIC_USE_AGENT_STORE=True, as recent torchruns do);
     ZERO_RENDEZVOUS_PORT, the same on every rank, overrides it. The rendezvous and NCCL's
     setup wait ZERO_RENDEZVOUS_TIMEOUT_MS (default 300000), then name the missing ranks
     ("rank(s) 2, 3 never connected to 10.0.0.1:29500 within 300000 ms",
     ZERO_ERR_TIMEOUT); another WORLD_SIZE, a rank claimed twice or another zero.h version
     is ZERO_ERR_MISMATCH on every rank that connected; a bad MASTER_ADDR or MASTER_PORT
     is ZERO_ERR_INVALID_ARG; no GPU is ZERO_ERR_NO_DEVICE. A collective past timeout_ms
     aborts the communicator (ZERO_ERR_TIMEOUT naming the collective; the endpoint is then
     broken). Memory: each endpoint keeps a device scratch buffer that grows in the first
     step to the largest reduce-scatter's input (N x its element count) and never shrinks,
     plus as much pinned host memory. The communicator's GPU must be the context's (the
     device current at zero_create): another is ZERO_ERR_INVALID_ARG at zero_create,
     naming both GPUs. How it sums: desc.reduce_mode = ZERO_REDUCE_EXACT (the default)
     moves the slices with grouped ncclSend/ncclRecv and adds them in fp32 in rank order
     with zero.h's kernel, bitwise the local comm at any world size; ZERO_REDUCE_NCCL
     calls ncclReduceScatter / ncclAllReduce (f32, bf16, f16 on device memory): less
     scratch and traffic, but NCCL's order and precision (a bf16 ring adds in bf16), so
     results differ from the local comm's and between world sizes in the last bits;
     training stays the same to rounding. Host-memory and f64 collectives stay exact.

   ON ZERO++
     Three options cut the bytes that cross nodes (DeepSpeed's ZeRO++), at the price of
     quantization error (qwz, qgz) or memory (hpz). They need a node topology: ranks_per_node
     consecutive ranks form a node (zero_group_set_nodes on a local group, zero_comm_set_nodes
     on any endpoint, the launcher's variables in zero_comm_from_env, or desc.hpz; when two
     are set they must agree). With any of them on, every collective runs in two levels, on
     a node's ranks and across nodes, and rank r (node n, place l in its node, nn nodes)
     owns slice l * nn + n of each module instead of slice r, so that the slices its
     cross-node peers own are one contiguous chunk (zero_save records the ranges: a
     checkpoint loads across this ownership and any other, ON CHECKPOINTS).
       qwz   stage 3: gathers move int8 payloads instead of the params: blocks of
             quant_block elements (default 256), each with an fp32 scale absmax / 127,
             codes rounded half to even, decoded on arrival; a value comes back within
             half a scale of itself, absmax / 254 of its block's largest magnitude. A block
             holding NaN or infinity decodes to NaN (a bad value is never made finite). The
             fp32 master, the optimizer and checkpoints never see quantized values; the
             forward and backward passes see the same ones.
       qgz   stages 1-3: a gradient's reduce-scatter sums the node exactly first (fp32, in
             rank order: a node's link is fast; the sums kept in bf16 when the gradients
             are bf16, whose rounding is far below int8's), then each node's sums cross
             nodes as int8 payloads (qgz = 8; 4: int4 codes in [-7, 7], scale absmax / 7,
             two to a byte) by one all-to-all, decoded and added in fp32 in node order. In
             one node it is exactly the plain reduction.
       hpz   stage 3, hpz = ranks per node: every rank also keeps its place's chunk of each
             module (span / ranks_per_node, the param dtype: plan.hpz_bytes, counted in
             ZERO_CAT_PARAMS), the secondary partition. The first gather of a module after
             the params change (zero_step, zero_param_set_f32, zero_load) refreshes it with
             a cross-node all-gather (of int8 payloads with qwz); every gather is then one
             all-gather within the node. Within one node it is exactly plain stage 3.
     Cross-node bytes per rank and step at stage 3 (P params, bf16, N ranks, nn nodes;
     counted as point-to-point: zero_stats_get's comm_bytes_across):
         plain          2P * 3 (N - N/nn) / N   (two gathers and a reduce-scatter)
         all three on   about (nn - 1) / N * 2P (1 + 4 / quant_block)
     so all three send 0.17 of plain's bytes across nodes at 4 nodes of 2. The payload
     buffers (plan.zpp_buffer_bytes, ZERO_CAT_BUFFERS) are sized by the largest module:
     with qwz (1 + nn) + N payloads of its slice, with qgz 2 nn payloads, and an fp32 chunk
     for a node's sums. Quantization is deterministic (the same bits run to run) but not
     bitwise plain: the final loss moves a little from the unquantized one, int4 more than
     int8 (examples/train_mlp and train_gpt take --qwz --qgz --hpz N to compare). The
     trace's comm track shows each level as "node ..." or "cross ..." spans.
     build/bench_zpp times plain stage 3 against all three on a modelled network
     (zero_group_set_link within nodes, zero_group_set_cross_link across). With hpz the
     param setters (zero_param_set_f32, zero_set_params_f32, zero_tiled_linear_set_f32)
     are collective, like zero_load: every rank calls them for the same params, since a
     chunk holds other ranks' slices; a rank that does not makes the next zero_step fail
     on every rank (ZERO_ERR_MISMATCH, counted in its all-reduce), or a gather in between
     time out. zero_estimate takes the nodes from desc.hpz (else one node of all ranks).
     zero_comm_ranks_per_node(c) says an endpoint's topology (0: none set, one node);
     zero_comm_bytes(c, &within, &across) reads the bytes its collectives have sent to
     ranks of its node and of other nodes, as they run (every context on it;
     zero_stats_get's comm_bytes_within / _across). It runs on the CPU, EMU and CUDA
     devices (CUDA gives the CPU's bits; with qgz at most 64 nodes, the decoding kernel's
     inputs; on the CPU device the payloads are encoded and summed with the vector units
     on the cpu_threads pool, as a reduction's sum is, the same bits on every path and
     thread count) and over the local, MPI and NCCL communicators (NCCL 2.18+:
     ncclCommSplit; its node and cross-node communicators hold NCCL resources of their own
     and share the parent's stream and scratch). offload_params, or NCCL headers older
     than 2.18, is ZERO_ERR_UNSUPPORTED at zero_create.

   ON DEVICES
     desc.device says where the arenas (params, grads, master, moments, gradient staging,
     the stage-3 gather arena) live and where the optimizer runs:
       ZERO_DEVICE_CPU   (the default) host memory; the CPU computes.
       ZERO_DEVICE_CUDA  (a ZERO_CUDA build) the memory of the GPU that is current on the
                         calling thread at zero_create (cudaSetDevice first). Without a GPU
                         zero_create returns ZERO_ERR_NO_DEVICE; in a build without
                         ZERO_CUDA, ZERO_ERR_UNSUPPORTED.
       ZERO_DEVICE_EMU   a test device (POSIX): the CPU, with device memory mapped so that
                         the host cannot touch it. A program that runs on it reaches device
                         memory only the way a GPU allows, and it gives the CPU device's
                         results bit for bit.
     On CUDA and EMU, zero_param_data, zero_param_grad, the tiled linear's x, y, dy, dx and
     zero_sgemm's matrices are device pointers: compute on them with your kernels, move
     data with zero_copy(z, dst, src, bytes) (any direction; done when it returns), take
     memory for activations with zero_device_alloc, and use zero_gelu, zero_gelu_backward
     and zero_softmax_xent, small fp32 helpers that run on the context's device.
     zero_param_set_f32, zero_tiled_linear_set_f32 and zero_gather_params_f32 take host
     arrays. Every arena is allocated at zero_build (the plan counts the device's own
     tables under device buffers). The optimizer, the gradient norm and the reductions
     give the CPU's bits; GEMMs (cuBLAS) are equal to rounding.

     --- CUDA streams. zero.h orders its compute-side work (zeroing gradient buffers, the
     optimizer, casts, cuBLAS GEMMs) on desc.cuda_stream, the stream your kernels run on
     (NULL: the legacy default stream). Its collectives run on a stream of its own, each
     after the work you queued on your stream before the call that issued it: a reduction
     never reads gradients your kernels are still writing, and a prefetch never
     overwrites a module they still read. zero_fetch returns once the module's gather is
     complete on the device; zero_step synchronizes your stream once (the gradient norm
     comes to the host). No call synchronizes the whole device. desc.cuda_stream may be
     a cudaStreamNonBlocking stream (PyTorch's side streams are): zero.h never leaves work
     on the legacy default stream that yours would have to wait for (zero_build zeroes the
     arenas and copies its tables on your stream, and waits for them).

     --- Ranks on GPUs: the local comm (threads sharing one GPU: how stages 1-3 run at 2-4
     ranks on a single GPU) or NCCL across GPUs (ON COMMUNICATORS). MPI moves host memory
     only and is refused with a device (ZERO_ERR_UNSUPPORTED).

     --- ZeRO-Offload on a GPU: offload_optimizer = ZERO_OFFLOAD_HOST keeps the fp32 master
     (also for f32 params) and the moments in pinned host memory. At zero_step the gradient
     shard comes to a pinned host copy, the CPU's fused pass (cpu_threads, SIMD; the same
     bits) updates master and moments, and the new params go back to the device, pipelined
     by sub-group (an eighth of the shard, at most 4M elements each): while the CPU updates
     one, the next one's gradients come down and the last one's params go up, at once (two
     streams of their own, ordered after your work and before the next). The plan
     counts both host copies under ZERO_TIER_HOST, ZERO_CAT_BUFFERS; the gradients stay on
     the device.
     The NVMe tier and offload_params are not there yet on CUDA or EMU. Every CUDA context
     also holds two pinned staging buffers of ZERO_STAGING_BYTES (ZERO_TIER_HOST,
     ZERO_CAT_BUFFERS) through which zero_param_set_f32, zero_gather_params_f32 and the
     checkpoints move values: the copy of one chunk runs while the host converts the next.

   ON CHECKPOINTS
     zero_save(z, dir) and zero_load(z, dir) are collective and run after zero_build,
     between steps (nothing fetched, no gradients pending; else ZERO_ERR_STATE). A
     checkpoint is a directory: a text manifest from rank 0 and one shard file per rank
     (rank<R>.g<G>, G the save's generation) that holds every param's fp32 weights (the
     master copy, or the params widened when there is none) and the optimizer moments,
     keyed by param and element range and checksummed. So a checkpoint saved at (stage s,
     N ranks) loads at any (stage s', M ranks), and a load restores master weights, params,
     moments, step count, loss scale, the data position and the trainer's records: training
     continues bit for bit, at every stage and offload mode (at stage 3 the modules kept
     gathered between steps are gathered again).
     Both stream: a save takes about 64 KiB and a load about 128 KiB of host memory per
     rank, plus the manifest, also with the states (and params) on the NVMe tier.

     --- The trainer's state. The data position: zero_stats' steps + skipped_steps is the
     number of global batches consumed (a skipped step consumed its batch too), and
     micro_batches the micro-batches of all ranks together (each step adds world size x
     accum_steps); both come back with a load, so resuming the data is one line:
             zero_stats s; zero_stats_get(z, &s);
             int64_t next_batch = s.steps + s.skipped_steps;   // or s.micro_batches
     The rest of the trainer's state (its config, an RNG, a data loader's cursor) goes in
     named records: zero_ckpt_put(z, "rng", &rng, sizeof rng) before zero_save keeps a
     copy in the context, zero_save writes rank 0's into the manifest (checksummed with it),
     and after zero_load, on every rank, zero_ckpt_get(z, "rng", &rng, sizeof rng, NULL)
     gives it back (ZERO_ERR_NOT_FOUND for a key the checkpoint does not have). Keys are
     1-64 characters of A-Z a-z 0-9 _ . - ; at most 64 records of up to 64 KiB.
     A checkpoint of format 1 (before records) still loads: no records, and micro_batches
     taken as (steps + skipped) x the loader's world size x accum_steps.

     --- Atomicity. Files are written under temporary names, fsynced and renamed; the
     manifest goes last, once every rank's shard is durable, and its rename is the commit
     point. A save killed half-way leaves the previous checkpoint loadable; older
     generations are removed after the commit. A directory belongs to one saver at a time;
     shards are little-endian.

     --- Failures. A save that fails (ENOSPC, EIO, a read-only directory; on any rank, in a
     shard or the manifest) returns ZERO_ERR_IO on every rank, each message naming the
     failing rank, file and cause (in worlds up to 32; above, how many ranks failed); its
     files are removed, the checkpoint already in the directory stays loadable, and the
     trainer's state is untouched (training may go on).
     zero_load is all-or-nothing: it reads and checks everything it needs before changing
     anything, and the ranks agree, so a bad checkpoint fails every rank with the same code:
     ZERO_ERR_CORRUPT (checksum, truncation, parse), ZERO_ERR_VERSION (a newer format),
     ZERO_ERR_IO (a missing file, an OS error), ZERO_ERR_MISMATCH (another model or
     optimizer); the message names the file. Only an OS error after the check (a file
     changed or removed meanwhile, a failing NVMe tier) leaves the state partly loaded,
     with the error on every rank: load again.

     --- Safetensors. zero_export_safetensors(z, path, ZERO_F32 or ZERO_BF16) writes every
     param as a "module.param" tensor, from rank 0 (memory: one module); a tie is recorded
     in the file's metadata ("tied": "lnf.head=embed.wte"), and zero_export_safetensors_ex
     with tied_copies also writes the tied param under its user's name ("lnf.head");
     zero_load_safetensors(z, path) sets the params (and master weights) from such a file,
     each rank reading its ranges; optimizer state and step count are left alone.

     --- Inspecting a checkpoint without a trainer (no context, no communicator):
         zero_ckpt *ck;
         zero_ckpt_open(dir, NULL, &ck);            reads and checks dir's manifest and the
                                                    size and header of every shard file
         struct zero_ckpt_info info;
         zero_ckpt_info(ck, &info);                 what was saved: stage, world size, dtypes,
                                                    optimizer, step count, counts, bytes
         zero_ckpt_module(ck, i, &module_info);     the i-th module (name, frozen)
         zero_ckpt_param(ck, i, &param_info);       the i-th param (name, module, shape)
         zero_ckpt_file(ck, i, &file_info);         the i-th shard file
         zero_ckpt_record(ck, i, &record_info);     the i-th of the trainer's records (key,
                                                    bytes, data; info.num_records of them)
         zero_ckpt_verify(ck);                      reads every record, checks every checksum
         zero_ckpt_export(ck, path);                the consolidated weights as one
                                                    safetensors file (zero_ckpt_export_as
                                                    for ZERO_BF16); every checksum is checked
                                                    as it goes, and a failure leaves no file
         zero_ckpt_read_f32(ck, buf);               the same weights, fp32, into your
                                                    buf[info.numel] in the flat order
                                                    (STEP BY STEP 3), checksums checked
         zero_ckpt_close(ck);
     zero_ckpt_open refuses what zero_load refuses (the same check of the manifest: every
     param's ranges inside their files, back to back, each element once), with
     ZERO_ERR_CORRUPT and a message naming the param and the range. examples/zero_ckpt.c
     (build/zero_ckpt info | verify | export) is a tool made of these calls alone.
     A checkpoint lists the params in the saver's registration order: zero_ckpt_param(ck,
     i, ...) is the i-th param of the flat order, so zero_ckpt_read_f32 gives the buffer
     zero_gather_params_f32 gave at the save.

   ON TRACING
     zero_trace_enable(z, max_events) turns on a per-rank timeline: it allocates
     max_events * 72 bytes at once (outside the plan; any time after zero_create), and from
     then on zero.h records spans on tracks:
       compute    zero_trace_begin(z, name) / zero_trace_end(z) around your own work (they
                  nest; no-ops while tracing is off), and "fetch wait <module>" where
                  zero_fetch waits for a stage-3 gather
       comm       every collective: "all-gather <module>", "reduce <module>", "all-reduce"...
       optimizer  the fused optimizer pass of zero_step
       nvme       the NVMe tier's block reads and writes
       activations  the activation stash's file writes and reads ("act write", "act read"),
                  and "act wait <slot>" on the compute track where a get or put waits
     Recording is lock-free and thread-safe; with tracing off each hook is one NULL test.
     Events past max_events are dropped (zero_trace_count tells how many were asked for).
     zero_trace_save(z, path) is collective: rank 0 writes every rank's events as one
     Trace Event Format JSON file (pid: the rank, tid: the track, microseconds of
     CLOCK_MONOTONIC); every rank returns rank 0's result (ZERO_ERR_IO when the file cannot
     be written); while it runs each rank holds (world_size + 1) x the largest rank's event
     count of events, 72 bytes each. Events stay recorded, so it can be called again;
     before zero_trace_enable it is ZERO_ERR_STATE. Open the file at https://ui.perfetto.dev
     or chrome://tracing. Call zero_trace_begin / _end from the rank's own thread (the one
     that calls zero_fetch). examples/train_gpt.c --trace FILE.json shows all of it.

   MEMORY OVERRIDES
     A context's host memory comes from desc.allocator {alloc, free, user_data} when set,
     else ZERO_MALLOC/ZERO_FREE, else malloc/free; zero.h aligns inside what it gets.
     Groups and endpoints (made before any zero_desc) use ZERO_MALLOC/ZERO_FREE or
     malloc/free. On the CUDA device, device and pinned host memory come from the CUDA
     runtime. Allocation failure is ZERO_ERR_OUT_OF_MEMORY.

   LOGGING
     zero.h is silent unless desc.logger.func is set. It is called as
         func(user_data, level, item, rank, message)
     for every message up to desc.logger.level (ZERO_LOG_ERROR, _WARN, _INFO, _DEBUG;
     default ZERO_LOG_WARN). item is a zero_log_item, ZERO_LOGITEM_<NAME> from the
     ZERO_LOG_ITEMS list below, so a program (or a test) can tell which message fired;
     zero_log_item_str(item) names it. The failures of a context and of zero_create are
     logged at ZERO_LOG_ERROR as well as returned; WARN gives a skipped step
     (STEP_SKIPPED: not an error, ERRORS) and a fetch or activation order that changed
     (SCHEDULE_CHANGED, ACT_ORDER_CHANGED); INFO gives the plan per tier and the totals
     at zero_build (PLAN, BUILT), a grown loss scale (LOSS_SCALE_GROWN) and the NVMe
     tier's fallbacks (OFFLOAD_BUFFERED, OFFLOAD_ENGINE). A collective that fails
     because a rank left its group is logged as RANK_LEFT, one whose rank never came as
     COLL_TIMEOUT.
     Debug items come from the comm-stream thread: make func thread-safe.

   WHAT IT DOES NOT DO (yet)
     No autograd: you write forward and backward. Data parallelism only (no tensor or
     pipeline parallelism); AdamW and SGD only. The CUDA device and the NCCL
     communicator have not yet run on a GPU in our CI (they are built there, and the
     engine's device path is tested through the EMU device and a CUDA test double); with
     the CUDA device only the host tier of offload_optimizer is there (no NVMe tier, no
     offload_params). torchrun-style launches need a CUDA build (NCCL); the CPU build
     takes mpirun or srun with ZERO_MPI. The activation stash copies on the CUDA device
     synchronously (into and out of its own pinned staging buffers; the file I/O
     overlaps), and it has not yet run on a GPU either, nor have ZeRO++'s CUDA kernels and
     NCCL split (tested on CPU test doubles of CUDA and NCCL; make test-gpu checks the
     kernels where a GPU is at hand). Params on NVMe only at stage 3 (ZERO_OFFLOAD_HOST at
     stages 0-2); the io_uring engine does not register its buffers. POSIX threads only
     (Linux, macOS); no Windows yet.
*/
#ifndef ZERO_H_INCLUDED
#define ZERO_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define ZERO_VERSION_MAJOR 0
#define ZERO_VERSION_MINOR 1
#define ZERO_VERSION_PATCH 0

#ifndef ZERO_API
#  if defined(ZERO_STATIC) && (defined(__GNUC__) || defined(__clang__))
#    define ZERO_API static __attribute__((unused))
#  elif defined(ZERO_STATIC)
#    define ZERO_API static
#  else
#    define ZERO_API extern
#  endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- results ---------------------------------------------------------------------- */
typedef enum zero_result {
    ZERO_OK = 0,
    ZERO_STEP_SKIPPED = 1,          /* not an error: non-finite gradients, step skipped */
    ZERO_ERR_INVALID_ARG = -1,      /* NULL pointer or out-of-range option */
    ZERO_ERR_INVALID_STAGE = -2,    /* stage outside 0..3 */
    ZERO_ERR_INVALID_SIZE = -3,     /* zero, negative or overflowing sizes */
    ZERO_ERR_INVALID_DTYPE = -4,    /* unknown dtype */
    ZERO_ERR_INVALID_HANDLE = -5,   /* unknown or foreign module / param handle */
    ZERO_ERR_ALREADY_BUILT = -6,    /* registering after zero_build */
    ZERO_ERR_NOT_BUILT = -7,        /* training call before zero_build */
    ZERO_ERR_GRADS_NOT_READY = -8,  /* zero_step before every module's zero_grads_ready */
    ZERO_ERR_NOT_FETCHED = -9,      /* stage-3 param data of a module not fetched */
    ZERO_ERR_STATE = -10,           /* other misuse of the call sequence */
    ZERO_ERR_MISMATCH = -11,        /* ranks disagree (different model, different calls) */
    ZERO_ERR_TIMEOUT = -12,         /* a rank never arrived at a collective */
    ZERO_ERR_COMM = -13,            /* the communicator failed or was aborted */
    ZERO_ERR_OUT_OF_MEMORY = -14,
    ZERO_ERR_OVER_CAP = -15,        /* the plan exceeds a memory cap or a buffer budget */
    ZERO_ERR_IO = -16,
    ZERO_ERR_NO_DEVICE = -17,
    ZERO_ERR_UNSUPPORTED = -18,
    ZERO_ERR_CORRUPT = -19,         /* a checkpoint file fails its checksum, is truncated or malformed */
    ZERO_ERR_VERSION = -20,         /* a checkpoint in a newer format than this zero.h reads */
    ZERO_ERR_DEVICE = -21,          /* a device call (CUDA runtime, cuBLAS, a kernel) failed */
    ZERO_ERR_NOT_FOUND = -22        /* no checkpoint record of that key (zero_ckpt_get) */
} zero_result;

/* ---- enums (0 always means "the default") --------------------------------------- */
typedef enum zero_dtype {
    ZERO_DTYPE_DEFAULT = 0,
    ZERO_F32,
    ZERO_BF16,
    ZERO_F16,
    ZERO_DTYPE_NUM
} zero_dtype;

typedef enum zero_optim_type {
    ZERO_OPTIM_DEFAULT = 0,         /* AdamW */
    ZERO_OPTIM_ADAMW,
    ZERO_OPTIM_SGD,
    ZERO_OPTIM_NUM
} zero_optim_type;

typedef enum zero_tier {            /* an index into byte tables */
    ZERO_TIER_DEVICE = 0,           /* the compute device's memory (host RAM on the CPU device) */
    ZERO_TIER_HOST,
    ZERO_TIER_NVME,
    ZERO_TIER_NUM
} zero_tier;

typedef enum zero_category {        /* an index into byte tables */
    ZERO_CAT_PARAMS = 0,            /* low-precision parameters (full or shard) */
    ZERO_CAT_GRADS,                 /* accumulated gradients (full or shard) */
    ZERO_CAT_MASTER,                /* fp32 master weights (0 when params are f32) */
    ZERO_CAT_OPTIM,                 /* optimizer moments */
    ZERO_CAT_BUFFERS,               /* gradient staging, stage-3 gather arena */
    ZERO_CAT_ACTIVATIONS,           /* the activation stash (zero_act_*: ON ACTIVATIONS) */
    ZERO_CAT_NUM
} zero_category;

typedef enum zero_coll {            /* collective kinds, an index into stats tables */
    ZERO_COLL_ALL_GATHER = 0,
    ZERO_COLL_REDUCE_SCATTER,
    ZERO_COLL_ALL_REDUCE,
    ZERO_COLL_BROADCAST,
    ZERO_COLL_BARRIER,
    ZERO_COLL_ALL_TO_ALL,           /* ZeRO++'s quantized gradient exchange (qgz) */
    ZERO_COLL_NUM
} zero_coll;

typedef enum zero_log_level {
    ZERO_LOG_ERROR = 1,
    ZERO_LOG_WARN,
    ZERO_LOG_INFO,
    ZERO_LOG_DEBUG
} zero_log_level;

/* Every message zero.h can log has an item, so tests can ask which one fired. */
#define ZERO_LOG_ITEMS(X) \
    X(OK,                   "no message") \
    X(NULL_ARG,             "a required pointer argument is NULL") \
    X(BAD_OPTION,           "an option is out of range") \
    X(INVALID_STAGE,        "stage must be 0, 1, 2 or 3") \
    X(INVALID_SIZE,         "a size is zero, negative or too large") \
    X(INVALID_DTYPE,        "unknown dtype") \
    X(INVALID_HANDLE,       "unknown or foreign module/param handle") \
    X(ALREADY_BUILT,        "the model can no longer change after zero_build") \
    X(NOT_BUILT,            "call zero_build first") \
    X(GRADS_NOT_READY,      "zero_step before every module's gradients were ready") \
    X(NOT_FETCHED,          "stage-3 module used without zero_fetch") \
    X(STILL_FETCHED,        "a module is still fetched") \
    X(FROZEN_GRAD,          "a frozen module has no gradients") \
    X(BAD_SEQUENCE,         "call out of sequence") \
    X(MODEL_MISMATCH,       "ranks registered different models") \
    X(COLL_MISMATCH,        "ranks called different collectives") \
    X(COLL_TIMEOUT,         "a rank never arrived at a collective") \
    X(COMM_BROKEN,          "the communicator was aborted") \
    X(RANK_LEFT,            "a rank left the group") \
    X(NO_LAUNCHER,          "zero_comm_from_env: no launcher's variables fit") \
    X(MPI_ERROR,            "an MPI call failed") \
    X(OUT_OF_MEMORY,        "allocation failed") \
    X(TRACE,                "trace recording or export") \
    X(OVER_CAP,             "the plan exceeds a memory cap") \
    X(BUFFER_FULL,          "a buffer budget is exhausted") \
    X(NO_DEVICE,            "no device") \
    X(DEVICE_ERROR,         "a device call (CUDA runtime, cuBLAS, a kernel) failed") \
    X(OFFLOAD_IO,           "an offload file could not be created, read or written") \
    X(OFFLOAD_CORRUPT,      "an offload block failed its checksum") \
    X(OFFLOAD_BUFFERED,     "the filesystem refused O_DIRECT: buffered I/O") \
    X(OFFLOAD_ENGINE,       "io_uring is not available: the NVMe tier uses I/O threads") \
    X(CKPT,                 "checkpoint save or load failed") \
    X(PLAN,                 "memory plan") \
    X(STEP_SKIPPED,         "non-finite gradients: step skipped") \
    X(LOSS_SCALE_GROWN,     "loss scale grown") \
    X(BUILT,                "built") \
    X(SCHEDULE_MISMATCH,    "ranks fetched modules in different orders") \
    X(SCHEDULE_CHANGED,     "the fetch order changed: fetching on demand this step") \
    X(REDUCED,              "a module's gradients were reduced (debug; logged from the comm stream)") \
    X(ACT_MISUSE,           "an activation handle used out of sequence") \
    X(ACT_ORDER_CHANGED,    "the activation order changed: reading on demand this step")

typedef enum zero_log_item {
#define ZERO__X(name, text) ZERO_LOGITEM_##name,
    ZERO_LOG_ITEMS(ZERO__X)
#undef ZERO__X
    ZERO_LOGITEM_NUM
} zero_log_item;

/* ---- opaque objects and handles -------------------------------------------------- */
typedef struct zero_ctx zero_ctx;       /* one rank's trainer state */
typedef struct zero_group zero_group;   /* a local world: N ranks as threads of one process */
typedef struct zero_comm zero_comm;     /* one rank's endpoint of a communicator */
typedef struct zero_module { uint32_t id; } zero_module;
typedef struct zero_param { uint32_t id; } zero_param;
typedef struct zero_act { uint32_t id; } zero_act;      /* a slot of the activation stash */

#define ZERO_MAX_DIMS 8

/* ---- descriptors ------------------------------------------------------------------ */
typedef struct zero_allocator {
    void *(*alloc)(size_t size, void *user_data);
    void (*free)(void *ptr, void *user_data);
    void *user_data;
} zero_allocator;

typedef struct zero_logger {
    void (*func)(void *user_data, zero_log_level level, zero_log_item item, int rank, const char *message);
    void *user_data;
    zero_log_level level;           /* most verbose level passed on; default ZERO_LOG_WARN */
    /* func may be called from zero.h's comm-stream thread (debug items): make it thread-safe */
} zero_logger;

typedef struct zero_optim_desc {
    zero_optim_type type;           /* default AdamW */
    double lr;                      /* default 1e-3 */
    double beta1, beta2;            /* AdamW; default 0.9, 0.999 */
    double eps;                     /* AdamW; default 1e-8 */
    double weight_decay;            /* default 0 (AdamW: decoupled; SGD: L2 added to the gradient) */
    double momentum;                /* SGD; default 0 */
    double dampening;               /* SGD; default 0 */
    int nesterov;                   /* SGD; default off */
} zero_optim_desc;

typedef enum zero_offload_tier {    /* where offloaded states live (see ON OFFLOAD) */
    ZERO_OFFLOAD_NONE = 0,          /* the default: on the compute device */
    ZERO_OFFLOAD_HOST,              /* host memory (the same RAM on the CPU device) */
    ZERO_OFFLOAD_NVME,              /* files in offload.nvme_dirs, streamed through host buffers */
    ZERO_OFFLOAD_NUM
} zero_offload_tier;

#define ZERO_MAX_NVME_DIRS 8
typedef struct zero_offload_desc {  /* shared by offload_optimizer and offload_params */
    const char *nvme_dirs[ZERO_MAX_NVME_DIRS];  /* NVMe tier: files striped across these; NULL ends */
    int64_t buffer_bytes;           /* NVMe tier: host I/O buffers (three sub-groups); default 64 MiB */
    int queue_depth;                /* NVMe tier: 1 MiB requests in flight, half reads, half writes; default 16 */
} zero_offload_desc;

typedef enum zero_device_type {     /* where the arenas live and the math runs (see ON DEVICES) */
    ZERO_DEVICE_DEFAULT = 0,        /* the CPU */
    ZERO_DEVICE_CPU,
    ZERO_DEVICE_CUDA,               /* a ZERO_CUDA build and a GPU: the thread's current device */
    ZERO_DEVICE_EMU,                /* the CPU, with device memory the host cannot touch (tests; POSIX) */
    ZERO_DEVICE_NUM
} zero_device_type;

typedef enum zero_reduce_mode {     /* how the NCCL communicator sums (ON COMMUNICATORS) */
    ZERO_REDUCE_EXACT = 0,          /* the default: slices moved by NCCL, summed in fp32 in rank order by
                                       zero.h's kernel: bitwise the local comm's, at any world size */
    ZERO_REDUCE_NCCL,               /* ncclReduceScatter / ncclAllReduce: NCCL's order and precision (a
                                       bf16 ring sums in bf16); faster, not bitwise across world sizes */
    ZERO_REDUCE_NUM
} zero_reduce_mode;

typedef struct zero_desc {
    zero_comm *comm;                /* this rank's endpoint; NULL: a world of one */
    zero_device_type device;        /* default: the CPU */
    void *cuda_stream;              /* CUDA: the cudaStream_t your kernels run on; NULL: the legacy default stream */
    int stage;                      /* 0..3; default 0 */
    zero_dtype param_dtype;         /* default ZERO_BF16 */
    zero_dtype grad_dtype;          /* default: param_dtype */
    zero_dtype grad_accum_dtype;    /* default: grad_dtype; ZERO_F32 keeps gradients in fp32 */
    int accum_steps;                /* micro-batches per step; default 1 */
    int64_t bucket_bytes;           /* gradient bytes reduced together; default min(16 MiB, the trainable
                                       gradient bytes / 8), set at zero_build (ON BUCKETS) */
    int64_t align_elems;            /* param alignment inside a module; default 16 */
    int64_t max_live_bytes;         /* stage 3: bytes of prefetched and kept modules; default: the largest
                                       module, set at zero_build */
    int64_t prefetch_bytes;         /* stage 3: gather ahead up to this; default max_live_bytes (set at
                                       zero_build); <0: off */
    int64_t persist_bytes;          /* stage 3: modules this small stay gathered; default 0: none */
    int reuse_distance;             /* stage 3: keep a module fetched again within this many fetches; default 0 */
    zero_optim_desc optim;
    float clip_norm;                /* global-norm clipping; 0: off */
    float loss_scale;               /* >0: static scale; 0: dynamic for f16, 1 otherwise */
    float loss_scale_init;          /* dynamic; default 65536 */
    int loss_scale_window;          /* dynamic: clean steps before growing; default 1000 */
    float loss_scale_min;           /* dynamic; default 1 */
    int timeout_ms;                 /* every collective; default 120000 */
    int cpu_threads;                /* threads of the CPU optimizer pass, the caller included;
                                       0: 1 (the caller only). Started at zero_build. */
    int64_t device_bytes_cap;       /* 0: no cap */
    int64_t host_bytes_cap;         /* 0: no cap */
    zero_offload_tier offload_optimizer;    /* master + moments (+ grads' host copy); default none */
    zero_offload_tier offload_params;       /* params; default none (nvme: stage 3, with offload_optimizer nvme) */
    zero_offload_tier offload_activations;  /* the activation stash (ON ACTIVATIONS); default none: in memory */
    int64_t act_live_bytes;         /* nvme stash: bytes of its staging buffers; default 2 x the largest slot
                                       (rounded up to 4 KiB with its 64-byte trailer), set at zero_build */
    zero_offload_desc offload;
    zero_allocator allocator;
    zero_logger logger;
    zero_reduce_mode reduce_mode;   /* NCCL: ZERO_REDUCE_EXACT (default) or ZERO_REDUCE_NCCL; the
                                       other communicators always sum exactly */
    /* ZeRO++ (ON ZERO++): less traffic across nodes, at the price of quantization error */
    int qwz;                        /* stage 3: gathers move int8 block-quantized params; default 0: off */
    int qgz;                        /* stages 1-3: gradients reduced within the node, then across nodes,
                                       with quantized payloads: 8 (int8; 1 means 8) or 4 (int4); 0: off */
    int hpz;                        /* stage 3: ranks per node of a secondary partition (each node holds
                                       the params, split over its ranks, refreshed at every step; gathers
                                       then stay in the node); 0: off */
    int quant_block;                /* qwz / qgz: elements per block (one fp32 scale each); default 256 */
    int flat_layout;                /* stages 0-2: zero_param_data (and at stages 0-1 zero_param_grad)
                                       point into one buffer in the flat order, so a stacked [L, ...]
                                       tensor, or the whole model, is one pointer; 0: off (step 3) */
} zero_desc;

typedef struct zero_module_desc {
    const char *name;               /* required; unique */
    int frozen;                     /* 1: no gradients, no optimizer state */
    int shared;                     /* 1: used in several places of the model (a tied weight): its
                                       gradient may be added in several windows of a micro-batch */
} zero_module_desc;

typedef struct zero_param_desc {
    const char *name;               /* required; unique within the module */
    int ndim;                       /* 1..ZERO_MAX_DIMS */
    int64_t shape[ZERO_MAX_DIMS];
    int no_decay;                   /* 1: no weight decay (biases, norms) */
} zero_param_desc;

/* ---- plans and stats -------------------------------------------------------------- */
typedef struct zero_plan {
    int stage, world_size;
    int64_t numel;                  /* registered elements, unpadded */
    int64_t numel_padded;           /* all module spans, padded */
    int64_t trainable_padded;       /* spans of trainable modules */
    int64_t bytes[ZERO_TIER_NUM][ZERO_CAT_NUM];   /* per rank */
    int64_t model_state_bytes;      /* params + grads + master + optimizer, all tiers */
    int64_t total_bytes;            /* everything, all tiers */
    int64_t hpz_bytes;              /* of bytes[..][ZERO_CAT_PARAMS]: ZeRO++'s secondary partition */
    int64_t zpp_buffer_bytes;       /* of bytes[..][ZERO_CAT_BUFFERS]: ZeRO++'s quantized payloads */
    int64_t flat_bytes;             /* of bytes[..][ZERO_CAT_PARAMS] and [..][ZERO_CAT_GRADS]: the flat
                                       views of desc.flat_layout (0: off) */
} zero_plan;

typedef struct zero_stats {
    int64_t bytes[ZERO_TIER_NUM][ZERO_CAT_NUM];   /* allocated now, this rank */
    int64_t model_state_bytes;
    int64_t total_bytes;
    int64_t comm_calls[ZERO_COLL_NUM];
    int64_t comm_elems[ZERO_COLL_NUM];  /* elements this rank sent (ring volume) */
    int64_t comm_bytes[ZERO_COLL_NUM];  /* bytes this rank sent (ring volume) */
    int64_t steps;                  /* optimizer steps applied */
    int64_t skipped_steps;          /* steps skipped for non-finite gradients */
    int64_t micro_batches;          /* micro-batches the steps so far consumed, all ranks together:
                                       each step, applied or skipped, adds world size * accum_steps;
                                       a checkpoint carries it (ON CHECKPOINTS: the data position) */
    float loss_scale;
    double grad_norm;               /* last step's global norm (unscaled, before clipping) */
    /* stage 3, from the second step on */
    int64_t prefetch_hits;          /* fetches whose gather was issued before the fetch */
    int64_t prefetch_misses;        /* fetches that had to gather on demand */
    int64_t prefetched_bytes;       /* bytes gathered ahead of use */
    int64_t gathered_bytes;         /* bytes in the gather arena now */
    int64_t peak_gathered_bytes;    /* most bytes ever in the gather arena */
    int64_t peak_staging_bytes;     /* most bytes of gradient staging in use (stages 2-3) */
    double fetch_wait_ms;           /* time zero_fetch spent waiting for gathers */
    /* the activation stash (ON ACTIVATIONS); hits and misses from the second step on */
    int64_t act_hits;               /* zero_act_get calls whose bytes were in memory or being read ahead */
    int64_t act_misses;             /* zero_act_get calls that read their slot on demand */
    int64_t act_bytes_written;      /* bytes written to the stash's files */
    int64_t act_bytes_read;         /* bytes read back from them */
    double act_wait_ms;             /* time zero_act_get / zero_act_put waited for the stash's I/O */
    /* bytes this rank's collectives sent, counted by the communicator: to ranks of its own node
       and to ranks of other nodes (zero_comm_bytes; one node when no topology is set) */
    int64_t comm_bytes_within, comm_bytes_across;
    /* what the step costs the host, in all since zero_create (a step's share: the change
       from one zero_step to the next). host_syncs: waits of the host on the device (CUDA:
       a stream or event synchronized, a stream polled until done by the NCCL comm);
       device_allocs: allocations of device memory (the context's and its communicator's);
       comm_headers: collective headers exchanged (NCCL: the mismatch check, issued ahead
       of a collective's data and checked in the same wait). 0 on the CPU device and the
       local and MPI comms. A steady step on CUDA over NCCL waits once per collective (its
       bounded wait on the comm thread), plus once for the norm's scalar when clipping and
       once per zero_copy; over the local comm at most twice per collective. */
    int64_t host_syncs, device_allocs, comm_headers;
} zero_stats;

/* ---- functions -------------------------------------------------------------------- */
ZERO_API const char *zero_result_str(zero_result r);
ZERO_API const char *zero_dtype_str(zero_dtype t);
ZERO_API const char *zero_log_item_str(zero_log_item item);
ZERO_API size_t zero_dtype_size(zero_dtype t);       /* 0 for an unknown dtype */
ZERO_API const char *zero_last_error(const zero_ctx *ctx);   /* NULL ctx: this thread's */

/* communicators */
ZERO_API zero_result zero_group_create(zero_group **out, int world_size);
ZERO_API void zero_group_destroy(zero_group *g);
/* Models a link for the local group: each rank's all-gather and reduce-scatter takes
   latency_us plus the bytes it sends / gbytes_per_s longer, sleeping (not computing)
   on the comm stream, as a real network would. For benchmarks and tests of overlap
   on one machine; 0, 0 (the default) is no model. Call before the ranks start. */
ZERO_API zero_result zero_group_set_link(zero_group *g, double latency_us, double gbytes_per_s);
/* Groups the ranks into nodes of ranks_per_node consecutive ranks (it must divide the
   world size): the communicator then counts bytes within and across nodes, and ZeRO++
   (ON ZERO++) runs its collectives within a node and across nodes. Call before the ranks
   start. zero_group_set_cross_link models the link between nodes (zero_group_set_link's
   is then the link within a node): a collective takes the longer of its within-node
   bytes / the first bandwidth and its across-node bytes / the second. */
ZERO_API zero_result zero_group_set_nodes(zero_group *g, int ranks_per_node);
ZERO_API zero_result zero_group_set_cross_link(zero_group *g, double latency_us, double gbytes_per_s);
ZERO_API zero_result zero_comm_local(zero_comm **out, zero_group *g, int rank);
ZERO_API void zero_comm_destroy(zero_comm *c);
ZERO_API int zero_comm_rank(const zero_comm *c);
ZERO_API int zero_comm_size(const zero_comm *c);
/* The node topology of any communicator: ranks_per_node consecutive ranks form a node
   (zero_comm_from_env sets it from LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE,
   MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE; a local endpoint takes its group's). Set it the same on every
   rank, before zero_create. zero_comm_ranks_per_node: 0 when unknown (one node). */
ZERO_API zero_result zero_comm_set_nodes(zero_comm *c, int ranks_per_node);
ZERO_API int zero_comm_ranks_per_node(const zero_comm *c);
/* Bytes this endpoint's collectives (and its node and cross-node sub-communicators') have
   sent to ranks of its node and to ranks of other nodes, each peer's bytes counted once
   (as point-to-point exchanges move them). Either pointer may be NULL. */
ZERO_API void zero_comm_bytes(const zero_comm *c, int64_t *within, int64_t *across);
/* Runs fn(comm, rank, user) on world_size threads, each with its own endpoint of one
   local group. Returns ZERO_OK if every fn did, else the lowest failing rank's result,
   which zero_last_error(NULL) then describes on the calling thread: "zero_run_local: rank
   1: " and that rank's last error (so a trainer need not print inside each rank). */
typedef zero_result (*zero_rank_fn)(zero_comm *comm, int rank, void *user);
ZERO_API zero_result zero_run_local(int world_size, zero_rank_fn fn, void *user);
/* The same on a group you made (for zero_group_set_link, or several groups at once). */
ZERO_API zero_result zero_run_group(zero_group *g, zero_rank_fn fn, void *user);
/* One endpoint for this process, picked from what the launcher set (see ON COMMUNICATORS).
   backend: NULL or "auto" (MPI under an MPI launcher, NCCL under torchrun in a ZERO_CUDA
   build, else a world of one), "mpi" (an MPI launcher is required), "nccl" (ZERO_CUDA:
   one GPU per process; without a launcher a world of one) or "local" (a world of one).
   Destroy it with zero_comm_destroy after the last context that uses it. */
ZERO_API zero_result zero_comm_from_env(zero_comm **out, const char *backend);
/* One process driving world_size GPUs over NCCL: fn(comm, rank, user) on a thread per
   GPU, thread r on GPU r. ZERO_ERR_NO_DEVICE without a GPU, ZERO_ERR_INVALID_SIZE when
   world_size is more than the GPUs visible, ZERO_ERR_UNSUPPORTED in a build without
   ZERO_CUDA. Returns ZERO_OK if every fn did, else the lowest failing rank's result, which
   zero_last_error(NULL) then describes. */
ZERO_API zero_result zero_run_nccl(int world_size, zero_rank_fn fn, void *user);

/* context */
ZERO_API zero_result zero_create(zero_ctx **out, const zero_desc *desc);
ZERO_API void zero_destroy(zero_ctx *ctx);
ZERO_API zero_desc zero_query_desc(const zero_ctx *ctx);   /* effective values */
/* A zero_desc from a DeepSpeed config: json is the whole text of a ds_config.json.

       zero_desc d; char report[4096]; int n;
       if (zero_desc_from_json(text, &d, report, sizeof report, &n) != ZERO_OK) {
           fprintf(stderr, "%s\n", zero_last_error(NULL)); return 1;    // line and column
       }
       if (n) fprintf(stderr, "%d DeepSpeed keys not honoured:\n%s", n, report);
       d.comm = comm; d.device = ...;            // what a config cannot say
       zero_create(&z, &d);

   *out is set to all zeros (every default), then filled from the keys that have a zero_desc
   field of the same meaning:
       zero_optimization   stage; reduce_bucket_size, stage3_prefetch_bucket_size and
                           stage3_param_persistence_threshold, which DeepSpeed counts in
                           elements, as bytes of param_dtype (x2 for fp16 and bf16, x4 for
                           fp32; a prefetch of 0 is prefetch_bytes -1, off); offload_optimizer
                           and offload_param devices (cpu: ZERO_OFFLOAD_HOST, nvme:
                           ZERO_OFFLOAD_NVME, nvme_path in offload.nvme_dirs[0]);
                           zero_quantized_weights (qwz), zero_quantized_gradients (qgz = 4:
                           DeepSpeed's qgZ sends int4), zero_hpz_partition_size (hpz)
       fp16, bf16          param_dtype (neither enabled: ZERO_F32, as DeepSpeed trains in
                           fp32); fp16's loss_scale (0: dynamic), initial_scale_power,
                           loss_scale_window, min_loss_scale
       optimizer           Adam and AdamW: ZERO_OPTIM_ADAMW, decoupled decay, which is what
                           DeepSpeed runs for both unless adam_w_mode is false; SGD:
                           ZERO_OPTIM_SGD (type case-insensitive); lr, betas, eps,
                           weight_decay, momentum, dampening, nesterov
       the rest            gradient_clipping (clip_norm; absent: 1.0, DeepSpeed's default
                           since mid-2026, so write 0 for none), gradient_accumulation_steps
                           (accum_steps), data_types.grad_accum_dtype, aio.queue_depth

   The report lists every way the desc differs from what DeepSpeed would do with the config,
   one line per key, "<path>=<value>: not honoured: <why>":
       zero_optimization.sub_group_size=1e9: not honoured: zero.h steps the rank's whole ...
   A key is not honoured when zero.h has nothing like it (scheduler, steps_per_print, the
   monitors), when it means something else here or asks for what zero.h cannot do (Adam's
   L2 decay with adam_w_mode false, hysteresis other than 1, stage3_max_live_parameters,
   which zero.h would allocate rather than cap), when its value is outside zero.h's range
   or is a 0 that zero.h reads as "the default" (an lr of 0), when it is "auto" (left for
   the HF Trainer to fill in), or when zero.h does not know it. Its field keeps its default:
   a value is never clamped. A section zero.h does not have (tensorboard, flops_profiler,
   ...) is one line, unless it says "enabled": false. No line for a key set to what zero.h
   does anyway (overlap_comm true, contiguous_gradients true), nor for one that does nothing
   in DeepSpeed either (nvme_path without device nvme, fp16's keys while fp16 is off,
   offload_param and the ZeRO++ keys below stage 3): the run is the same. Two absent keys
   have lines, since zero.h cannot follow DeepSpeed's default: "optimizer (absent)"
   (DeepSpeed would run your program's optimizer) and, with a dynamic fp16 scale,
   "fp16.hysteresis (absent, DeepSpeed's default 2)". A null is an absent key.
   train_batch_size and train_micro_batch_size_per_gpu are your loop's: their lines say
   what they mean for desc.accum_steps.

   report (NULL: none) receives the lines, each ending in '\n', NUL-terminated: as many whole
   lines as fit in report_size bytes. *unhonoured (NULL: not wanted) is the number of lines,
   those that did not fit included. zero_create accepts the desc, unless the run disagrees
   with it (hpz must divide the world size; a GPU cannot offload to NVMe yet); comm and
   device are yours to set.

   json must be NUL-terminated and writable: on success, and only where offload_optimizer's
   nvme_path is, it is decoded in place and NUL-terminated; offload.nvme_dirs[0] points
   there, so keep json until zero_build.

   Errors return ZERO_ERR_INVALID_ARG and leave *out and json untouched; report holds one
   line, the sentence zero_last_error(NULL) gives, with the line and column (from 1; a
   column counts UTF-8 characters), and *unhonoured is 0:
       zero_desc_from_json: line 3, column 14: zero_optimization.stage: expected an integer 0-3, found "3"
   The text must be strict JSON (RFC 8259: no comments, trailing commas, NaN, single quotes
   or byte-order mark; valid UTF-8), an object at the root with no key twice in an object,
   at most 64 levels deep, at most 256 keys in the objects open at once, numbers of at most
   100 characters within a double's range. A known key of the wrong type is an error, and
   so is a value DeepSpeed's own config checks refuse (stage 4, a negative bucket size, fp16
   and bf16 both enabled, offload device "gpu", optimizer.params.max_grad_norm). A NULL
   json or out is ZERO_ERR_INVALID_ARG too. It allocates nothing and is thread-safe. */
ZERO_API zero_result zero_desc_from_json(char *json, zero_desc *out, char *report, size_t report_size,
                                         int *unhonoured);
ZERO_API int zero_rank(const zero_ctx *ctx);
ZERO_API int zero_world_size(const zero_ctx *ctx);

/* registration (before zero_build). On failure *out is the handle 0, which every later
   call refuses as "handle 0x00000000 ... (never set, or left by a zero_add_* that failed)":
   check each result (or zero_last_error) where the registration is, not at the first use. */
ZERO_API zero_result zero_add_module(zero_ctx *ctx, const zero_module_desc *desc, zero_module *out);
ZERO_API zero_result zero_add_param(zero_ctx *ctx, zero_module m, const zero_param_desc *desc, zero_param *out);
/* A tied param (a weight used in two places: GPT-2's output layer is its token embedding):
   module m uses `target`, a param of another module, under `name`. No storage of its own:
   its handle reads, writes and adds into target's values and gradient, so zero_param_data,
   zero_param_grad and zero_param_set_f32 on either handle reach the same tensor; it is not
   in zero_num_params, gathers or checkpoints. zero_fetch(m) also fetches target's module
   (zero_release lets it go), and target's gradient is reduced once its own module and every
   module that ties to it have called zero_grads_ready. (ON GRADIENTS: shared modules.)
   The rule, in the GPT-2 terms (embed owns wte; lnf ties "head" to it): a module either
   owns tied-to params or uses ties, never both, and a tie joins two modules. Refused, with
   ZERO_ERR_INVALID_ARG and a message naming both params:
     - a target in the tying module itself (lnf ties to lnf.w: use lnf.w's own handle);
     - a target that is a tied handle (x ties to lnf.head: tie x to embed.wte directly);
     - a user's params as targets (x ties to lnf.w, where lnf uses a tie);
     - an owner using ties (embed ties to anything, where lnf ties to embed.wte).
   And zero_build refuses a module whose params are all tied ("a param of its own"). */
ZERO_API zero_result zero_add_tied_param(zero_ctx *ctx, zero_module m, const char *name, zero_param target,
                                         zero_param *out);
/* A stacked tensor [n, ...] split along its first axis: slice i becomes param desc->name of
   modules[i] with shape desc->shape[1..] ([1] for a 1-D [n] tensor), handle out[i]. The n
   params are consecutive in the flat order; desc->shape[0] must be n. All or nothing. */
ZERO_API zero_result zero_add_param_stack(zero_ctx *ctx, const zero_module *modules, int n,
                                          const zero_param_desc *desc, zero_param *out);

/* planning and building */
ZERO_API zero_result zero_plan_get(zero_ctx *ctx, zero_plan *out);
ZERO_API zero_result zero_estimate(const zero_desc *desc, int world_size, int num_modules,
                                   const int64_t *module_numels, zero_plan *out);
ZERO_API zero_result zero_build(zero_ctx *ctx);     /* collective: checks every rank's model */

/* the activation stash (ON ACTIVATIONS): slots registered before zero_build, filled in the
   forward pass, read back in the backward pass; src and dst are device memory (zero_copy's) */
ZERO_API zero_result zero_act_add(zero_ctx *ctx, const char *name, int64_t bytes, zero_act *out);
ZERO_API zero_result zero_act_put(zero_ctx *ctx, zero_act a, const void *src);   /* copies bytes in; returns at once */
ZERO_API zero_result zero_act_get(zero_ctx *ctx, zero_act a, void *dst);         /* the bytes back, once per put */
/* adds the stash of num_acts slots of act_bytes[i] bytes to a plan from zero_estimate (same desc) */
ZERO_API zero_result zero_estimate_activations(const zero_desc *desc, int num_acts, const int64_t *act_bytes,
                                               zero_plan *plan);

/* parameters */
ZERO_API int64_t zero_param_numel(const zero_ctx *ctx, zero_param p);   /* -1 for a bad handle */
ZERO_API int64_t zero_num_params(const zero_ctx *ctx);                  /* total elements, unpadded */
ZERO_API zero_result zero_param_set_f32(zero_ctx *ctx, zero_param p, const float *values);
/* (stage 3: the next zero_fetch of the module sees the new values; a module fetched right
   now keeps the values it was gathered with until it is released) */
ZERO_API zero_result zero_gather_params_f32(zero_ctx *ctx, float *out);  /* collective */
/* The same without a whole-model buffer on every rank (collective, like it; host memory: one
   module's span, plus as much device memory where a module's values are sharded).
   zero_gather_params_f32_root fills out on rank root only (elsewhere out may be NULL; root
   -1: every rank, as zero_gather_params_f32). zero_gather_params_each calls fn on rank root
   (-1: every rank) for each param, module by module (the flat order when params are
   registered module by module), with its fp32 values, valid during the call: evaluate or
   export a model one module at a time. */
typedef void (*zero_param_fn)(void *user, zero_param p, const char *module, const char *name, const float *values,
                              int64_t numel);
ZERO_API zero_result zero_gather_params_f32_root(zero_ctx *ctx, int root, float *out);
ZERO_API zero_result zero_gather_params_each(zero_ctx *ctx, int root, zero_param_fn fn, void *user);
/* The flat order (zero_gather_params_f32's, zero_set_params_f32's): every param in
   registration order, back to back, unpadded (STEP BY STEP 3). zero_param_offset: where p
   starts in it (-1: bad handle). */
ZERO_API int64_t zero_param_offset(const zero_ctx *ctx, zero_param p);
/* Every param from one host array of zero_num_params floats in the flat order, the inverse
   of zero_gather_params_f32: zero_param_set_f32 on each param in turn, up to the first
   failure (not collective; the same array on every rank) */
ZERO_API zero_result zero_set_params_f32(zero_ctx *ctx, const float *all);

/* training */
ZERO_API zero_result zero_fetch(zero_ctx *ctx, zero_module m);
ZERO_API zero_result zero_release(zero_ctx *ctx, zero_module m);
ZERO_API void *zero_param_data(zero_ctx *ctx, zero_param p);   /* param_dtype */
ZERO_API void *zero_param_grad(zero_ctx *ctx, zero_param p);   /* grad_dtype; add into it */
ZERO_API zero_result zero_grads_ready(zero_ctx *ctx, zero_module m);
ZERO_API float zero_loss_scale(const zero_ctx *ctx);
ZERO_API zero_result zero_step(zero_ctx *ctx);                  /* collective */
ZERO_API zero_result zero_allreduce_f64(zero_ctx *ctx, double *values, int n);  /* sum, rank order */
/* Copies bytes between host memory and the context's device memory (zero_param_data,
   zero_param_grad), in any direction; done when it returns. On the CPU device a memcpy. */
ZERO_API zero_result zero_copy(zero_ctx *ctx, void *dst, const void *src, int64_t bytes);
/* Memory of the context's device for your own tensors (activations), outside the plan;
   zero-filled; NULL on failure. Free it with zero_device_free before zero_destroy. */
ZERO_API void *zero_device_alloc(zero_ctx *ctx, int64_t bytes);
ZERO_API void zero_device_free(zero_ctx *ctx, void *ptr);
/* Small fp32 helpers for example trainers, on the context's device (see ON DEVICES):
   y = GELU(x) (tanh form); dx = dy * GELU'(x) (dx may be dy); per row r of logits
   [rows, classes]: loss[r] = logsumexp - logit[label], dlogits = dscale * (softmax - onehot).
   Labels must lie in [0, classes) (the CPU checks; a kernel writes a NaN loss). */
ZERO_API zero_result zero_gelu(zero_ctx *ctx, float *y, const float *x, int64_t n);
ZERO_API zero_result zero_gelu_backward(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n);
ZERO_API zero_result zero_softmax_xent(zero_ctx *ctx, float *loss, float *dlogits, const float *logits,
                                       const int32_t *labels, int64_t rows, int64_t classes, float dscale);
/* checkpoints (collective, between steps, after zero_build; see ON CHECKPOINTS) */
ZERO_API zero_result zero_save(zero_ctx *ctx, const char *dir);
ZERO_API zero_result zero_load(zero_ctx *ctx, const char *dir);
/* The trainer's own state in the checkpoint: named byte records (its data position, its
   config, an RNG). The context keeps them; zero_save writes rank 0's, checksummed with the
   manifest; zero_load replaces every rank's with the checkpoint's (all of them: a key put
   before the load and absent from the checkpoint is gone). Not collective; any time after
   zero_create. A key is 1-64 characters of A-Z a-z 0-9 _ . - ; a value 0 to
   ZERO_CKPT_RECORD_MAX bytes; at most ZERO_CKPT_MAX_RECORDS keys; a put of a key the
   context has replaces its value. zero_ckpt_get copies the value into out (cap bytes) and
   sets *bytes (may be NULL) to its size: ZERO_ERR_NOT_FOUND when no record has the key,
   ZERO_ERR_INVALID_SIZE (nothing copied, *bytes set) when cap is smaller. The records'
   host memory is outside the plan (at most 4 MiB). */
#define ZERO_CKPT_RECORD_MAX 65536
#define ZERO_CKPT_MAX_RECORDS 64
ZERO_API zero_result zero_ckpt_put(zero_ctx *ctx, const char *key, const void *data, int64_t bytes);
ZERO_API zero_result zero_ckpt_get(const zero_ctx *ctx, const char *key, void *out, int64_t cap, int64_t *bytes);
/* safetensors: "module.param" tensors; export writes from rank 0 (dtype ZERO_F32 or
   ZERO_BF16), load sets the params (and fp32 master) only; both collective */
ZERO_API zero_result zero_export_safetensors(zero_ctx *ctx, const char *path, zero_dtype dtype);
/* Ties in the file: "__metadata__" has "tied": "lnf.head=embed.wte" (user=owner, comma-
   separated) whenever the model has tied params. With tied_copies, each tied param is also
   written under its user's name (a copy of its owner's values), so a consumer that looks
   for "lnf.head" finds it without knowing the tie (zero_load_safetensors ignores those). */
typedef struct zero_export_desc {
    zero_dtype dtype;                           /* ZERO_F32 (default) or ZERO_BF16 */
    int tied_copies;
} zero_export_desc;
ZERO_API zero_result zero_export_safetensors_ex(zero_ctx *ctx, const char *path, const zero_export_desc *desc);
ZERO_API zero_result zero_load_safetensors(zero_ctx *ctx, const char *path);
ZERO_API zero_result zero_stats_get(const zero_ctx *ctx, zero_stats *out);
/* The reduced gradient of param p, read only (a gradient check, a debugging print): after
   the step's last zero_grads_ready of every trainable module (the state zero_step wants)
   and before zero_step; it waits for the reductions, and posts none. The values are what zero_step's optimizer takes, before
   clipping: the sum over ranks and micro-batches divided by world size x accum_steps x the
   loss scale, in fp32. A tied handle reads its owner's gradient (the sum of every use).
   zero_grad_shard_f32: this rank's slice, param elements [*begin, *end) (stage 0: all of
   them; a slice may be empty), into out[0 .. *end - *begin). Not collective; it costs a
   copy of the slice. zero_grad_gather_f32: all of p into out[zero_param_numel(ctx, p)] on
   every rank. Collective (every rank, the same p); it costs one all-gather of a module's
   slice per rank, 4 bytes an element, and a buffer of the module's span on the host. */
ZERO_API zero_result zero_grad_shard_f32(zero_ctx *ctx, zero_param p, float *out, int64_t *begin, int64_t *end);
ZERO_API zero_result zero_grad_gather_f32(zero_ctx *ctx, zero_param p, float *out);
/* checkpoint inspection, without a context: zero_ckpt_open reads dir/manifest through the
   checks zero_load makes (a checkpoint it opens, zero_load reads; one it refuses,
   zero_load refuses) and each shard file's size and header; the others read it. Failures
   return a code, and zero_last_error(NULL) names the file and, for a bad record or
   range, the param ('module.param') and its element range. */
typedef struct zero_ckpt zero_ckpt;             /* an opened checkpoint directory */
struct zero_ckpt_info {                         /* a struct tag, like struct stat: zero_ckpt_info is the function */
    int format_version;
    uint64_t generation;
    int stage, world_size;                      /* of the save */
    zero_dtype param_dtype, grad_dtype, grad_accum_dtype;
    zero_optim_type optimizer;                  /* ZERO_OPTIM_ADAMW or ZERO_OPTIM_SGD */
    int moments;                                /* fp32 moment arrays a trainable element has: AdamW 2, SGD 0 or 1 */
    int64_t steps, skipped_steps, good_steps;   /* optimizer steps applied, skipped; loss-scale clean steps */
    int64_t micro_batches;                      /* zero_stats' at the save; -1: not recorded (format 1) */
    float loss_scale;
    int num_modules, num_params, num_files, num_ranges;
    int num_records;                            /* the trainer's records (zero_ckpt_put) */
    int64_t numel;                              /* elements of all params */
    int64_t trainable_numel;                    /* elements of the params of trainable modules */
    int64_t total_bytes;                        /* the shard files' bytes, all together */
};
typedef struct zero_ckpt_module_info {
    const char *name;                           /* valid until zero_ckpt_close */
    int frozen;
    int num_params;
} zero_ckpt_module_info;
typedef struct zero_ckpt_param_info {
    const char *name, *module;                  /* valid until zero_ckpt_close */
    int module_index;
    int frozen;                                 /* its module is frozen: weights only, no moments */
    zero_dtype dtype;                           /* the param dtype it trained in (the checkpoint holds fp32) */
    int ndim;
    int64_t shape[ZERO_MAX_DIMS];
    int64_t numel;
} zero_ckpt_param_info;
typedef struct zero_ckpt_file_info {
    const char *name;                           /* in the directory ("rank<R>.g<G>"); valid until zero_ckpt_close */
    int rank;
    int64_t bytes;
    int num_ranges;                             /* records: one per param slice the rank held */
} zero_ckpt_file_info;
/* alloc: host memory for the manifest and buffers; NULL: ZERO_MALLOC / malloc */
ZERO_API zero_result zero_ckpt_open(const char *dir, const zero_allocator *alloc, zero_ckpt **out);
ZERO_API void zero_ckpt_close(zero_ckpt *ck);
/* (g++ -Wshadow says the function hides the struct's constructor: both names are meant, as
   with POSIX's stat, and C++ code names the struct `struct zero_ckpt_info`) */
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
ZERO_API zero_result zero_ckpt_info(const zero_ckpt *ck, struct zero_ckpt_info *out);
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ZERO_API zero_result zero_ckpt_module(const zero_ckpt *ck, int i, zero_ckpt_module_info *out);   /* 0 <= i < num_modules */
ZERO_API zero_result zero_ckpt_param(const zero_ckpt *ck, int i, zero_ckpt_param_info *out);     /* 0 <= i < num_params */
ZERO_API zero_result zero_ckpt_file(const zero_ckpt *ck, int i, zero_ckpt_file_info *out);       /* 0 <= i < num_files */
typedef struct zero_ckpt_record_info {
    const char *key;                            /* valid until zero_ckpt_close */
    const void *data;                           /* its bytes, likewise */
    int64_t bytes;
} zero_ckpt_record_info;
ZERO_API zero_result zero_ckpt_record(const zero_ckpt *ck, int i, zero_ckpt_record_info *out);   /* 0 <= i < num_records */
/* Reads every shard whole, streamed (64 KiB of buffer), and checks every record's
   checksums (weights: the fp32 master or the params; moments). ZERO_ERR_CORRUPT names the
   first bad record and counts the others. */
ZERO_API zero_result zero_ckpt_verify(zero_ckpt *ck);
/* The weights as safetensors ("module.param", fp32), like zero_export_safetensors of the
   saved state, byte for byte. It checks every checksum of the checkpoint (moments too) as
   it streams, into path.tmp renamed to path at the end: a failure leaves no file. */
ZERO_API zero_result zero_ckpt_export(zero_ckpt *ck, const char *safetensors_path);
ZERO_API zero_result zero_ckpt_export_as(zero_ckpt *ck, const char *safetensors_path, zero_dtype dtype); /* F32, BF16 */
/* The weights into out[info.numel], fp32, in the saver's flat order (zero_ckpt_param's
   order, the registration order): what zero_gather_params_f32 gave at the save. Every
   checksum is checked; on a failure out's contents are unspecified. */
ZERO_API zero_result zero_ckpt_read_f32(zero_ckpt *ck, float *out);

/* memory-centric tiling: y = x W^T + b with W [out, in] registered as `tiles`
   modules of consecutive rows ("<name>.tile<t>", params "w" [rows, in] and "b");
   forward and backward fetch, compute and release one tile at a time */
typedef struct zero_tiled_linear { uint32_t id; } zero_tiled_linear;
typedef struct zero_tiled_linear_desc {
    const char *name;
    int64_t in_features, out_features;
    int bias;                       /* 1: with a bias (no weight decay on it) */
    int tiles;                      /* tile count; 0: from tile_bytes */
    int64_t tile_bytes;             /* with tiles 0: largest tile of W in param_dtype bytes; 0: one tile */
} zero_tiled_linear_desc;
ZERO_API zero_result zero_tiled_linear_add(zero_ctx *ctx, const zero_tiled_linear_desc *desc, zero_tiled_linear *out);
ZERO_API int zero_tiled_linear_tiles(const zero_ctx *ctx, zero_tiled_linear tl);        /* -1: bad handle */
ZERO_API zero_result zero_tiled_linear_set_f32(zero_ctx *ctx, zero_tiled_linear tl, const float *w, const float *b);
/* x [rows, in] -> y [rows, out] */
ZERO_API zero_result zero_tiled_linear_forward(zero_ctx *ctx, zero_tiled_linear tl, const float *x, int64_t rows, float *y);
/* adds dW, db into the tiles' gradients (and marks each tile ready); dx [rows, in] may be NULL */
ZERO_API zero_result zero_tiled_linear_backward(zero_ctx *ctx, zero_tiled_linear tl, const float *x, const float *dy,
                                                int64_t rows, float *dx);
/* C [M, N] = (accumulate ? C : 0) + op(A) op(B), row-major, fp32; op transposes when ta/tb.
   The CPU device's cache-blocked SGEMM (CBLAS under ZERO_CBLAS), which uses the context's
   planned GEMM workspace, so it needs a built context with a tiled linear; on the CUDA
   device cublasSgemm on desc.cuda_stream with device pointers. */
ZERO_API zero_result zero_sgemm(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                                int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc);

/* tracing (see ON TRACING): a per-rank timeline written as Chrome / Perfetto JSON */
ZERO_API zero_result zero_trace_enable(zero_ctx *ctx, int64_t max_events);  /* allocates max_events * 72 bytes */
ZERO_API zero_result zero_trace_begin(zero_ctx *ctx, const char *name);     /* a user span on the "compute" track */
ZERO_API zero_result zero_trace_end(zero_ctx *ctx);                         /* closes the innermost open span */
ZERO_API int64_t zero_trace_count(const zero_ctx *ctx);       /* events recorded (may exceed max_events: dropped) */
ZERO_API zero_result zero_trace_save(zero_ctx *ctx, const char *path);     /* collective; rank 0 writes path */

/* dtype helpers for user code */
ZERO_API void zero_to_f32(float *dst, const void *src, zero_dtype t, int64_t n);
ZERO_API void zero_from_f32(void *dst, zero_dtype t, const float *src, int64_t n);
ZERO_API void zero_add_f32(void *dst, zero_dtype t, const float *src, int64_t n);  /* dst += src */
/* exp, log and tanh with the same bits on every platform, compiler and the GPU (libm's do
   not agree across them); within 1 ulp; what zero_gelu and zero_softmax_xent use */
ZERO_API float zero_expf(float x);
ZERO_API float zero_logf(float x);
ZERO_API float zero_tanhf(float x);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_H_INCLUDED */

/* ==================================================================================
   Element-wise math shared by the CPU and the GPU. zero_kernels.cu defines
   ZERO_KERNELS and includes zero.h to get exactly these functions, so the CPU
   tests check the formulas the GPU runs.
   ================================================================================== */
#if (defined(ZERO_IMPLEMENTATION) || defined(ZERO_KERNELS)) && !defined(ZERO__MATH_DEFINED)
#define ZERO__MATH_DEFINED
/* Compiled as C++, this block and the implementation are still C: C casts and NULL, which
   -Wold-style-cast and -Wzero-as-null-pointer-constant report at every one. Those two are off
   inside ZERO__C_IN_CXX_BEGIN / _END; the declarations are clean under them (tests/test_compile.sh). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  define ZERO__C_IN_CXX_BEGIN _Pragma("GCC diagnostic push") \
       _Pragma("GCC diagnostic ignored \"-Wold-style-cast\"") \
       _Pragma("GCC diagnostic ignored \"-Wzero-as-null-pointer-constant\"")
#  define ZERO__C_IN_CXX_END _Pragma("GCC diagnostic pop")
#else
#  define ZERO__C_IN_CXX_BEGIN
#  define ZERO__C_IN_CXX_END
#endif
ZERO__C_IN_CXX_BEGIN
#include <math.h>
#include <string.h>
#ifdef __CUDACC__
#  define ZERO_HD __host__ __device__
#else
#  define ZERO_HD
#endif

/* The floating-point rules of everything below (this block and the implementation) do not
   follow the includer's flags: ZERO__FP_PIN_BEGIN / ZERO__FP_PIN_END bracket the code and
   restore the includer's rules after it. Inside: IEEE operations in source order, no
   contraction into FMAs (gcc's -ffp-contract=fast is the GNU-mode default), no
   reassociation or reciprocals, NaN, infinity and signed zeros honoured (-ffast-math and
   -Ofast turn all of these off). GCC: push_options + optimize, which it applies to each
   function defined in the bracket, intrinsics inlined into them included (checked by
   disassembly: no vfmadd, x != x kept, x / 3 kept a division). Clang: float_control +
   fp contract; its intrinsics, though, are functions of its headers that keep the
   includer's flags when inlined, so the vector kernels use operators (>>kernels).
   nvcc builds zero_kernels.cu with -fmad=false and the host's -ffp-contract=off. */
#if defined(__CUDACC__)
#  define ZERO__FP_PIN_BEGIN
#  define ZERO__FP_PIN_END
#elif defined(__clang__)
#  if (defined(__apple_build_version__) && __clang_major__ < 13) || __clang_major__ < 11
#    error "zero.h: this clang has no #pragma float_control (clang 11+ has), so zero.h cannot pin its floating-point rules; use a newer clang or gcc"
#  endif
#  if defined(__FAST_MATH__) && !defined(__x86_64__)
#    error "zero.h: clang's -ffast-math (or -Ofast) fuses multiply-adds into FMAs in its back end whatever zero.h's pragmas say, and on this target FMA cannot be turned off per function; compile the file that defines ZERO_IMPLEMENTATION without -ffast-math / -Ofast (your other files may keep them): see the porting section of README.md"
#  endif
#  if defined(__FAST_MATH__) && defined(__FMA__)
     /* -Ofast with FMA everywhere (-march=native, -mfma): clang's back end fuses a multiply
        and an add whatever the pragmas say, so every function of zero.h is also compiled
        without FMA (target "no-fma"; the AVX2 kernels' own targets say it too, and the
        AVX-512 kernels, whose target implies FMA, keep their products apart with
        ZERO__NF_ASM, as under -ffp-contract=fast) */
#    define ZERO__NO_FMA ",no-fma"
#    define ZERO__FP_PIN_BEGIN _Pragma("float_control(precise, on, push)") _Pragma("clang fp contract(off)") \
         _Pragma("clang attribute push (__attribute__((target(\"no-fma\"))), apply_to = function)")
#    define ZERO__FP_PIN_END _Pragma("clang attribute pop") _Pragma("float_control(pop)")
#  elif defined(__x86_64__) || defined(__i386__)
#    define ZERO__FP_PIN_BEGIN _Pragma("float_control(precise, on, push)") _Pragma("clang fp contract(off)")
#    define ZERO__FP_PIN_END _Pragma("float_control(pop)")
#  else
     /* float_control is x86's only in the clangs we know (elsewhere: "not supported on this
        target"); there fast math was refused above, so the rule left to pin is contraction
        (clang's default fuses within a statement), set back to that default after */
#    define ZERO__FP_PIN_BEGIN _Pragma("clang fp contract(off)")
#    define ZERO__FP_PIN_END _Pragma("clang fp contract(on)")
#  endif
#elif defined(__GNUC__) && !defined(__INTEL_COMPILER)
#  define ZERO__FP_PIN_BEGIN _Pragma("GCC push_options") \
       _Pragma("GCC optimize(\"no-fast-math\", \"no-unsafe-math-optimizations\", \"no-associative-math\", \"no-reciprocal-math\", \"no-finite-math-only\", \"signed-zeros\", \"trapping-math\", \"no-cx-limited-range\", \"fp-contract=off\")")
#  define ZERO__FP_PIN_END _Pragma("GCC pop_options")
#else
#  if defined(__FAST_MATH__)
#    error "zero.h: this compiler cannot be told to keep IEEE rules in zero.h's code under fast math; build the file that defines ZERO_IMPLEMENTATION without it"
#  endif
#  define ZERO__FP_PIN_BEGIN
#  define ZERO__FP_PIN_END
#endif
ZERO__FP_PIN_BEGIN

/* Clang (14 at least) marks every square root it emits "fast" even inside
   float_control(precise), and under -ffast-math x86 then computes a float square root
   from an rsqrt estimate (not correctly rounded); there the instruction is spelt out. */
#if defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) && \
    (defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__))
#  define ZERO__SQRT_ASM 1
#endif
/* zero__nf / zero__nfd: a product kept apart from the add it feeds. Clang's
   -ffp-contract=fast (which -ffast-math and -Ofast set) fuses a multiply and an add into an
   FMA in its back end whatever the pragmas say, in every function compiled for FMA: the
   AVX-512 kernels (and the scalar tails inlined into them) always. An empty asm makes the
   product a value of its own. GCC obeys its optimize pragma; elsewhere the identity. */
#if defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
ZERO_HD static inline float zero__nf(float x) { __asm__("" : "+x"(x)); return x; }
ZERO_HD static inline double zero__nfd(double x) { __asm__("" : "+x"(x)); return x; }
#else
#  define zero__nf(x) (x)
#  define zero__nfd(x) (x)
#endif

ZERO_HD static inline float zero__sqrtf(float x) {
#if defined(ZERO__SQRT_ASM)
    float r;
    __asm__("sqrtss %1, %0" : "=x"(r) : "x"(x));
    return r;
#else
    return sqrtf(x);
#endif
}

ZERO_HD static inline uint32_t zero__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
ZERO_HD static inline float zero__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN */
ZERO_HD static inline uint16_t zero__f32_to_bf16(float f) {
    uint32_t u = zero__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
ZERO_HD static inline float zero__bf16_to_f32(uint16_t h) { return zero__bits_f32((uint32_t)h << 16); }

/* f32 -> f16, round to nearest even, with subnormals, overflow to inf */
ZERO_HD static inline uint16_t zero__f32_to_f16(float f) {
    uint32_t x = zero__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);      /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                       /* normal in f16 */
        ax += 0xc8000fffu + ((ax >> 13) & 1u);                     /* rebias (-112 << 23), round */
        return (uint16_t)(sign | (ax >> 13));
    }
    /* subnormal or zero: in [0.5, 1) the f32 ulp is 2^-24, the f16 subnormal step,
       so adding 0.5 lets the FPU do the round-to-nearest-even for us */
    return (uint16_t)(sign | (zero__f32_bits(zero__bits_f32(ax) + 0.5f) - 0x3f000000u));
}
ZERO_HD static inline float zero__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return zero__bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) return zero__bits_f32(sign | zero__f32_bits((float)m * 5.9604644775390625e-8f));
    return zero__bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* load / store one element of a tensor of dtype dt (ZERO_F32, ZERO_BF16, ZERO_F16) */
ZERO_HD static inline float zero__ld(const void *p, int64_t i, int dt) {
    if (dt == ZERO_F32) return ((const float *)p)[i];
    if (dt == ZERO_BF16) return zero__bf16_to_f32(((const uint16_t *)p)[i]);
    return zero__f16_to_f32(((const uint16_t *)p)[i]);
}
ZERO_HD static inline void zero__st(void *p, int64_t i, int dt, float v) {
    if (dt == ZERO_F32) ((float *)p)[i] = v;
    else if (dt == ZERO_BF16) ((uint16_t *)p)[i] = zero__f32_to_bf16(v);
    else ((uint16_t *)p)[i] = zero__f32_to_f16(v);
}

/* AdamW exactly as torch.optim.AdamW (foreach=False) computes it in float32:
   p *= 1 - lr*wd; m = m*b1 + (1-b1)*g; v = v*b2 + (1-b2)*g*g;
   p += (-lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps). Host code computes the
   scalars in double, as Python does, and rounds them to float once. */
typedef struct zero__adamw_hp {
    float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, decay_mul, neg_step_size, bc2_sqrt;
} zero__adamw_hp;

ZERO_HD static inline void zero__adamw_elem(float *p, float *m, float *v, float g,
                                            const zero__adamw_hp *h, int decay) {
    float pp = decay ? zero__nf(*p * h->decay_mul) : *p;
    float mm = zero__nf(*m * h->beta1) + zero__nf(h->one_minus_beta1 * g);
    float vv = zero__nf(*v * h->beta2) + zero__nf(zero__nf(h->one_minus_beta2 * g) * g);
    float denom = zero__sqrtf(vv) / h->bc2_sqrt + h->eps;
    *p = pp + zero__nf(h->neg_step_size * mm) / denom;
    *m = mm;
    *v = vv;
}

/* SGD exactly as torch.optim.SGD: d = g + wd*p; buf = first ? d : buf*mu + (1-dampening)*d;
   d = nesterov ? d + mu*buf : buf; p += -lr * d */
typedef struct zero__sgd_hp {
    float neg_lr, weight_decay, momentum, one_minus_dampening;
    int nesterov, first;
} zero__sgd_hp;

ZERO_HD static inline void zero__sgd_elem(float *p, float *buf, float g, const zero__sgd_hp *h, int decay) {
    float pp = *p, d = g;
    if (decay && h->weight_decay != 0.0f) d = d + zero__nf(h->weight_decay * pp);
    if (buf) {
        float b = h->first ? d : zero__nf(*buf * h->momentum) + zero__nf(h->one_minus_dampening * d);
        *buf = b;
        d = h->nesterov ? d + zero__nf(h->momentum * b) : b;
    }
    *p = pp + zero__nf(h->neg_lr * d);
}

/* What one optimizer step needs besides the pointers: dtypes, hyperparameters, and the
   factor the widened gradient is multiplied by (1/(N*accum*loss_scale) * clip). The CPU
   kernels (>>kernels) and the CUDA ones (zero__k_opt) take this same struct. */
typedef struct zero__optk {
    int opt, adt, pdt, decay;
    float gscale;
    zero__adamw_hp ah;
    zero__sgd_hp sh;
} zero__optk;

/* a gradient-norm block's 8 lane sums, combined (the definition is in >>kernels above
   zero__sumsq_scalar; zero__k_sumsq computes the same lanes) */
ZERO_HD static inline double zero__lanes_sum(const double *l) {
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* int8 block quantization (zero__k_quantize_i8 on the GPU, zero__quantize_i8 on the CPU):
   a block's scale is absmax / 127, an element is round-half-even(x / scale) clamped to
   [-127, 127], and it dequantizes to q * scale, so |x - q * scale| <= scale / 2 (plus two
   float roundings). An all-zero block has scale 0 and q 0. A block holding a NaN or an
   infinity gets scale NaN and q 0 everywhere, so it dequantizes to all NaN: a non-finite
   value is never silently turned into finite ones. A nonzero block whose absmax is below
   127 * 2^-149 (the scale underflows to 0) quantizes to zeros. The absmax is a max (NaN
   wins), so it does not depend on the order its elements are visited in. */
/* (NaN and infinity are told from the bits, which no -ffinite-math-only can fold away) */
ZERO_HD static inline float zero__q8_absmax(float m, float x) {   /* the running absmax, m >= 0 or NaN */
    float a = fabsf(x);
    if ((zero__f32_bits(m) & 0x7fffffffu) > 0x7f800000u) return m;
    return (a > m || (zero__f32_bits(a) & 0x7fffffffu) > 0x7f800000u) ? a : m;
}
ZERO_HD static inline float zero__q8_scale(float absmax) {
    if ((zero__f32_bits(absmax) & 0x7fffffffu) >= 0x7f800000u) return zero__bits_f32(0x7fc00000u);   /* NaN or inf */
    return absmax / 127.0f;
}
ZERO_HD static inline int8_t zero__q8(float x, float scale) {
    float r;
    uint32_t sb = zero__f32_bits(scale);
    if (sb == 0u || sb > 0x7f800000u) return 0;                            /* 0 or NaN (or negative) */
    r = rintf(x / scale);                                                  /* the default rounding: half to even */
    if (r > 127.0f) r = 127.0f;
    if (r < -127.0f) r = -127.0f;
    return (int8_t)r;
}
ZERO_HD static inline float zero__dq8(int8_t q, float scale) { return (float)q * scale; }

/* ZeRO++'s payloads (zero__qp_* in >>kernels on the CPU, zero__k_qp_* on the GPU): the codes
   of n values (int8, or int4 two to a byte, the even element in the low nibble), padded to 4
   bytes, then one fp32 scale per block. Per element, the rules both follow: a block's scale
   from the largest magnitude's bits (NaN or infinity: scale NaN), then a division, rintf and
   the clamp to [-qmax, qmax] (qmax 127 or 7); a scale of 0 or NaN gives code 0. A value
   decodes to (float)code * scale. */
ZERO_HD static inline int64_t zero__qp_codes(int64_t n, int bits) { return ((bits == 4 ? (n + 1) / 2 : n) + 3) / 4 * 4; }
ZERO_HD static inline float zero__qp_scale(uint32_t absmax_bits, float qmax) {
    return absmax_bits >= 0x7f800000u ? zero__bits_f32(0x7fc00000u) : zero__bits_f32(absmax_bits) / qmax;
}
ZERO_HD static inline int zero__qp_code(float x, float scale, float qmax) {
    uint32_t sb = zero__f32_bits(scale);
    float r;
    if (sb == 0u || sb >= 0x7f800000u) return 0;
    r = rintf(x / scale);
    return (int)(r > qmax ? qmax : r < -qmax ? -qmax : r);
}
/* element i, in block b (i / block), of a payload whose codes take codes_bytes (zero__qp_codes) */
ZERO_HD static inline float zero__qp_value(const void *p, int64_t codes_bytes, int64_t i, int bits, int64_t b) {
    const uint8_t *c = (const uint8_t *)p;
    int q = bits == 8 ? (int)(int8_t)c[i] : (i & 1) ? (int)((int8_t)c[i >> 1] >> 4)
                                                    : (int)((int8_t)(uint8_t)(c[i >> 1] << 4) >> 4);
    return (float)q * ((const float *)(c + codes_bytes))[b];
}

/* exp, log and tanh from IEEE double operations alone, no libm (whose expf, logf and tanhf
   give other bits on other platforms: glibc's tanhf differs between x86-64 and AArch64,
   and the GPU's and Windows' differ again), so the trainer helpers and the examples give
   the same bits everywhere: computed in double, rounded to float once (within 1 ulp of the
   exact value; tests/test_kmath.c checks against libm). */
ZERO_HD static inline double zero__bits_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
/* e^y for -745 < y < 710: y = k ln2 + r (Cody-Waite, |r| <= ln2 / 2), e^r by Taylor to
   degree 13 (remainder < 1e-17), times 2^k built from its bits (twice below 2^-1022) */
ZERO_HD static inline double zero__exp_d(double y) {
    double kd = y * 1.4426950408889634, r, p;
    int k = (int)(kd < 0 ? kd - 0.5 : kd + 0.5);
    r = (y - (double)k * 6.93147180369123816490e-01) - (double)k * 1.90821492927058770002e-10;
    p = 1.0 / 6227020800.0;                                              /* 1/13! */
    p = p * r + 1.0 / 479001600.0;  p = p * r + 1.0 / 39916800.0;  p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;     p = p * r + 1.0 / 40320.0;     p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;        p = p * r + 1.0 / 120.0;       p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;          p = p * r + 0.5;               p = p * r + 1.0;
    p = p * r + 1.0;
    if (k < -1000) return p * zero__bits_f64((uint64_t)(k + 600 + 1023) << 52) * zero__bits_f64((uint64_t)(1023 - 600) << 52);
    return p * zero__bits_f64((uint64_t)(k + 1023) << 52);
}
ZERO_HD static inline float zero__expf(float x) {
    if (x != x) return x;
    if (x > 88.72283935546875f) return zero__bits_f32(0x7f800000u);    /* (inf from 88.7228317 up) */
    if (x < -104.0f) return 0.0f;                                       /* below half the least subnormal */
    return (float)zero__exp_d((double)x);
}
/* log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1),
   |s| < 0.172, by its series to s^21 */
ZERO_HD static inline float zero__logf(float x) {
    uint32_t u = zero__f32_bits(x);
    int e = 0;
    double m, s, s2, q;
    if (x != x || x == zero__bits_f32(0x7f800000u)) return x;
    if (x == 0.0f) return -zero__bits_f32(0x7f800000u);
    if (u >> 31) return zero__bits_f32(0x7fc00000u);                   /* negative: NaN */
    if (u < 0x00800000u) { x *= 8388608.0f; u = zero__f32_bits(x); e = -23; }   /* subnormal: times 2^23 */
    e += (int)(u >> 23) - 127;
    m = (double)zero__bits_f32((u & 0x007fffffu) | 0x3f800000u);      /* [1, 2) */
    if (m > 1.4142135623730951) { m *= 0.5; e++; }
    s = (m - 1.0) / (m + 1.0);
    s2 = s * s;
    q = 1.0 / 21;
    q = q * s2 + 1.0 / 19; q = q * s2 + 1.0 / 17; q = q * s2 + 1.0 / 15; q = q * s2 + 1.0 / 13;
    q = q * s2 + 1.0 / 11; q = q * s2 + 1.0 / 9;  q = q * s2 + 1.0 / 7;  q = q * s2 + 1.0 / 5;
    q = q * s2 + 1.0 / 3;  q = q * s2 + 1.0;
    return (float)((double)e * 0.6931471805599453 + 2.0 * s * q);
}
/* tanh x: x - x^3/3 + ... to x^9 below 1/8 (remainder < 1e-11 relative), 1 - 2/(e^2|x| + 1)
   up to 10, and +-1 beyond (tanh(10) rounds to 1 in float) */
ZERO_HD static inline float zero__tanhf(float x) {
    double d = (double)x, a = d < 0 ? -d : d, t;
    if (x != x || x == 0.0f) return x;                                 /* (-0 stays -0) */
    if (a >= 10.0) return x < 0 ? -1.0f : 1.0f;
    if (a < 0.125) {
        double d2 = d * d;
        t = 62.0 / 2835.0;
        t = t * d2 - 17.0 / 315.0; t = t * d2 + 2.0 / 15.0; t = t * d2 - 1.0 / 3.0;
        return (float)(d + d * (d2 * t));
    }
    t = 1.0 - 2.0 / (zero__exp_d(2.0 * a) + 1.0);
    return (float)(d < 0 ? -t : t);
}

/* The tanh GELU of examples/train_mlp.c, operation for operation:
   th = tanh(sqrt(2/pi) (x + 0.044715 x^3)), y = 0.5 x (1 + th),
   dy/dx = 0.5 (1 + th) + 0.5 x (1 - th^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
#define ZERO__GELU_SCALE 0.7978845608028654f
ZERO_HD static inline float zero__gelu_th(float x) { return zero__tanhf(ZERO__GELU_SCALE * (x + 0.044715f * x * x * x)); }
ZERO_HD static inline float zero__gelu(float x, float th) { return 0.5f * x * (1.0f + th); }
ZERO_HD static inline float zero__gelu_grad(float x, float th) {
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * ZERO__GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}
/* softmax cross-entropy, as examples/train_mlp.c: with mx the row's max, e = exp(l - mx) and
   sum their sum, loss = log(sum) - (l[label] - mx) and dlogit = dscale * (e / sum - onehot) */
ZERO_HD static inline float zero__xent_loss(float sum, float l_label, float mx) { return zero__logf(sum) - (l_label - mx); }
ZERO_HD static inline float zero__xent_grad(float e, float inv_sum, int is_label, float dscale) {
    return dscale * (e * inv_sum - (is_label ? 1.0f : 0.0f));
}

/* ---- the CUDA kernels' C ABI (zero_kernels.cu) ----
   Every launcher is asynchronous on `stream` (a cudaStream_t passed as void *; NULL: the
   legacy default stream) and returns 0 or the cudaError_t of the launch (cudaErrorInvalidValue
   for arguments it refuses). Zero-length inputs return 0 without launching. Pointers are
   device pointers unless said otherwise. The element math is the ZERO_HD functions above,
   so results are bitwise those of the CPU path (NaN payloads aside: a NaN stays a NaN). */
#if defined(ZERO_CUDA) || defined(__CUDACC__)
#ifdef __cplusplus
extern "C" {
#endif
#define ZERO__KCHUNK 16384             /* most elements in one zero__kchunk (one CUDA block each) */
#define ZERO__K_MAXIN 64               /* most inputs of one zero__k_sum_into */

/* One piece of a rank's segment: n (<= ZERO__KCHUNK) elements whose gradient starts at
   grad_base[grad_idx], master / moments at [state_idx], params at param_base[param_idx]. */
typedef struct zero__kchunk { int64_t grad_idx, state_idx, param_idx; int32_t n, decay; } zero__kchunk;
/* The fused optimizer over a chunk table (device memory): for each chunk c and i < c.n,
   exactly zero__opt_scalar_t: g = grad_base[c.grad_idx + i] (k->adt) * k->gscale; w = master ?
   master[c.state_idx + i] : ((float *)param_base)[c.param_idx + i]; m = opt_m + c.state_idx (NULL:
   SGD without momentum), v = opt_v + c.state_idx; AdamW or SGD with decay = c.decay (k->decay is
   ignored); if k->pdt != ZERO_F32 the new w narrowed into param_base[c.param_idx + i]. k is a
   host pointer, read at the call. AdamW needs opt_m and opt_v; pdt != f32 needs master. */
int zero__k_opt(const zero__optk *k, const zero__kchunk *chunks, int64_t nchunks, const void *grad_base,
                void *param_base, float *master, float *opt_m, float *opt_v, void *stream);
/* out[b] = zero__sumsq_scalar(g + blk[b].idx, blk[b].n, adt), bitwise (blk, out: device memory) */
typedef struct zero__knblk { int64_t idx, n; } zero__knblk;
int zero__k_sumsq(const void *g, int adt, const zero__knblk *blk, int64_t nblk, double *out, void *stream);
/* out (rdt) = [out +] sum_k ins[k] (sdt), in fp32, bitwise as zero__sum_into; `ins` is a HOST
   array of nin (1..ZERO__K_MAXIN) device pointers; out may alias an input element-wise. nin 1
   is the dtype cast (accumulate 0) or dst += src (accumulate 1). */
int zero__k_sum_into(void *out, int rdt, const void *const *ins, int nin, int sdt, int64_t count, int accumulate,
                     void *stream);
/* int8 block quantization of x (xdt), blocks of `block` elements (the last may be short):
   scales[b] = zero__q8_scale(absmax), q[i] = zero__q8(x[i], scales[i / block]); and back:
   x[i] = zero__dq8(q[i], scales[i / block]) stored as xdt. Bitwise as zero__quantize_i8 /
   zero__dequantize_i8 (>>kernels). */
int zero__k_quantize_i8(int8_t *q, float *scales, const void *x, int xdt, int64_t n, int block, void *stream);
int zero__k_dequantize_i8(void *x, int xdt, const int8_t *q, const float *scales, int64_t n, int block, void *stream);
/* ZeRO++'s payloads (bits 8 or 4; dst and every payload 4-byte aligned): dst = the payload of
   x (n values of xdt) in blocks of `block`; out (n values of rdt) = [out +] the values of the
   np (1..ZERO__K_MAXIN) payloads of n values in `ps`, a HOST array of device pointers, added
   in fp32 in order (the stored value first), rounded once to rdt. Bitwise as zero__qp_encode
   / zero__qp_sum (>>kernels). */
int zero__k_qp_encode(void *dst, const void *x, int xdt, int64_t n, int bits, int block, void *stream);
int zero__k_qp_sum(void *out, int rdt, const void *const *ps, int np, int64_t n, int bits, int block, int accumulate,
                   void *stream);
/* small fp32 row-major kernels for the tiled linear and the example trainers */
/* y[r*ldy + c] += b[c] (b in dtype bdt), c < cols */
int zero__k_bias_add(float *y, int64_t ldy, const void *b, int bdt, int64_t rows, int64_t cols, void *stream);
/* gb[c] += sum_r dy[r*ld + c]: the sum in fp32 in order of r, then added to gb in its dtype
   gdt like zero_add_f32 (bitwise as the CPU tiled linear) */
int zero__k_bias_grad(void *gb, int gdt, const float *dy, int64_t ld, int64_t rows, int64_t cols, void *stream);
int zero__k_gelu_fwd(float *y, const float *x, int64_t n, void *stream);                    /* y = gelu(x) */
int zero__k_gelu_bwd(float *dx, const float *x, const float *dy, int64_t n, void *stream);  /* dx = dy * gelu'(x) */
/* per row r: loss[r] = the softmax cross-entropy, dlogits[r] = (softmax - onehot(labels[r])) *
   dscale (zero__xent_loss / zero__xent_grad; the row sum in a tree, so within a few ulps of
   train_mlp.c). A label outside [0, classes) gives loss NaN and dlogits = softmax * dscale.
   dlogits may be logits itself (in place). */
int zero__k_xent(float *loss, float *dlogits, const float *logits, const int32_t *labels, int64_t rows,
                 int64_t classes, float dscale, void *stream);
#ifdef __cplusplus
}
#endif
#endif /* ZERO_CUDA || __CUDACC__ */
ZERO__FP_PIN_END
ZERO__C_IN_CXX_END
#endif /* ZERO__MATH_DEFINED */

/* ==================================================================================
   IMPLEMENTATION
   ================================================================================== */
#if defined(ZERO_IMPLEMENTATION) && !defined(ZERO__IMPL_DEFINED)
#define ZERO__IMPL_DEFINED

/* Table of contents. Regions in the order the data flows, each tag once and contiguous; a
   region calls only the regions above it, and the backends are reached only through their
   tables (tests/test_house.sh checks both). One forward declaration crosses regions:
   zero__run_task, the comm stream's task runner (>>schedule), called from >>trace.
     >>platform   system headers and shims, in one place
     >>structs    the shared types: tasks, streams, the device and comm tables, the layout
                  records, zero_ctx (grouped by concern)
     >>base       allocation, the last error and logging, sizes, clocks
     >>trace      the timeline every region records into
     >>stream     the comm stream: a FIFO worker thread, tickets, waits
     >>kernels    the CPU's math: fused optimizer loops, norm blocks, SGEMM, the thread pool
     >>device     the cpu, emu and cuda devices behind zero__dev_vt
     >>comm       local (threads), mpi, the TCP rendezvous, nccl, the launcher bootstrap
     >>io         the NVMe tier's files: io_uring engine, thread fallback
     >>zpp        ZeRO++: its option checks, buffers' plan, nodes, endpoints and collectives
     >>plan       sizes, tiers, the memory planner, desc defaults, handles
     >>offload    the tiers behind zero__tier_vt: mem, host (ZeRO-Offload), nvme (-Infinity)
     >>build      zero_build: the ranks agree on the model, the plan is allocated
     >>schedule   the comm stream's tasks; stage 3's fetch, prefetch, release, recorded order
     >>grads      the staging area and buckets
     >>optim      zero_step: norm, loss scale, the tier's fused pass, the gather back
     >>tiling     tiled linear layers
     >>stash      the activation stash: slots in memory or in files, read ahead for the backward pass
     >>ckpt       sharded checkpoints, safetensors, checkpoint inspection
     >>context    the context's life: zero_create, zero_destroy, and its stats
     >>dsjson     a DeepSpeed config file's JSON read into a zero_desc
     >>public     the public functions */
ZERO__C_IN_CXX_BEGIN     /* C++: see the element-wise math block */

/* >>platform ---------------------------------------------------------------------------
   Every system header and shim the implementation uses, in one place. */
#include <stdlib.h>
#include <stdio.h>
#include <stdarg.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netdb.h>
#include <poll.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <dirent.h>
#include <sys/mman.h>
#else
#error "zero.h: the implementation needs a POSIX system (Linux or macOS): threads, sockets, files and mmap"
#endif
#if defined(__cplusplus)
#  define ZERO__TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#  define ZERO__TLS _Thread_local
#else
#  define ZERO__TLS __thread
#endif

/* The backend tables (device, comm, tier) are filled by field name in every language:
   designated initializers in C, and in C++ a small constructor function per table that
   sets the same fields by name (C++ before C++20 has no designated initializers, and C++20's
   must follow the declaration order and warn about the fields left out). A table reads
       ZERO__VT_BEGIN(zero__comm_vt, zero__local_vt)
           ZERO__VT_SET(all_gather, zero__local_all_gather) ...
       ZERO__VT_END(zero__comm_vt, zero__local_vt)
   and a field it does not set is NULL / 0. */
#if defined(__cplusplus)
#  define ZERO__VT_BEGIN(type, name) static type name##_make() { type v = type();
#  define ZERO__VT_SET(field, val) v.field = val;
#  define ZERO__VT_END(type, name) return v; } static const type name = name##_make();
#else
#  define ZERO__VT_BEGIN(type, name) static const type name = {
#  define ZERO__VT_SET(field, val) .field = val,
#  define ZERO__VT_END(type, name) };
#endif
#if defined(__GNUC__) || defined(__clang__)
#  define ZERO__MAYBE_UNUSED __attribute__((unused))
#else
#  define ZERO__MAYBE_UNUSED
#endif
#ifndef MSG_NOSIGNAL
#  define MSG_NOSIGNAL 0            /* no SIGPIPE where the platform has no flag for it */
#endif
#ifdef ZERO_MPI
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#  define OMPI_SKIP_MPICXX 1        /* the C API only: the deprecated C++ bindings warn */
#endif
#if defined(__cplusplus) && !defined(MPICH_SKIP_MPICXX)
#  define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#endif
#ifdef ZERO_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#include <cublas_v2.h>
#  if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
#    define ZERO__NCCL_HAS_SPLIT 1     /* ncclCommSplit: ZeRO++'s node endpoints (older NCCL: refused) */
#  endif
#endif
#ifdef ZERO_CBLAS
#include <cblas.h>
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(ZERO_NO_SIMD)
#  define ZERO__X86 1
#  if !defined(__clang__)
     /* GCC's AVX-512 intrinsics fill unused result lanes from a self-initialized
        variable, which g++ -O2 reports as maybe-uninitialized once inlined */
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif
#  include <immintrin.h>
#  include <cpuid.h>
#  if !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif
#endif
/* AArch64's Advanced SIMD (NEON): in every AArch64 CPU, so its path needs no run-time check */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__) && !defined(ZERO_NO_SIMD)
#  define ZERO__NEON 1
#  include <arm_neon.h>
#endif
#if defined(__GNUC__) || defined(__clang__)
#  define ZERO__INLINE static inline __attribute__((always_inline))
#else
#  define ZERO__INLINE static inline
#endif
/* Strict -std=c99/c11 with a system header (or zero.h itself) included before the
   implementation: glibc then hides the POSIX 2001-2008 names below (zero.h only asks for them
   when it comes first). They are declared here as POSIX specifies them; struct addrinfo is
   the one system struct spelled out, as glibc lays it out, since nothing else resolves a
   host name in that mode. C++ compilers on POSIX systems see all of them always. */
#if defined(__GLIBC__) && !defined(__USE_XOPEN2K) && !defined(__cplusplus)
struct addrinfo {
    int ai_flags, ai_family, ai_socktype, ai_protocol;
    socklen_t ai_addrlen;
    struct sockaddr *ai_addr;
    char *ai_canonname;
    struct addrinfo *ai_next;
};
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res);
void freeaddrinfo(struct addrinfo *res);
const char *gai_strerror(int errcode);
int pthread_condattr_setclock(pthread_condattr_t *attr, clockid_t clock_id);
#endif
#if !defined(__cplusplus)
ssize_t pread(int fd, void *buf, size_t n, off_t off);
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off);
int posix_fallocate(int fd, off_t off, off_t len);
int ftruncate(int fd, off_t len);
#endif
#ifndef AI_NUMERICSERV
#  define AI_NUMERICSERV 0x0400     /* glibc's value (hidden with getaddrinfo) */
#endif
#if defined(__linux__) && !defined(AT_FDCWD)
#  define AT_FDCWD -100             /* liburing.h's inline helpers use it; hidden likewise */
#endif
/* ZERO_NO_LINUX: POSIX calls only, none of Linux's (defined here off Linux; define it on
   Linux to run the fallbacks): no io_uring, no O_DIRECT (F_NOCACHE where the platform has
   it, macOS; else the page cache), no madvise, no pthread_condattr_setclock (timeouts on
   CLOCK_REALTIME, as macOS needs), no posix_fallocate (ftruncate) */
#if !defined(__linux__) && !defined(ZERO_NO_LINUX)
#  define ZERO_NO_LINUX 1
#endif
#if defined(ZERO_NO_LINUX) && defined(ZERO_IO_URING)
#  error "zero.h: ZERO_IO_URING is Linux's; a ZERO_NO_LINUX build uses the threads I/O engine"
#endif
/* O_DIRECT for the NVMe tier's blocks: glibc names it only under _GNU_SOURCE, but always
   defines its value as __O_DIRECT; with neither, the tier goes through the page cache */
#if defined(ZERO_NO_LINUX)
#  define ZERO__O_DIRECT 0
#elif defined(O_DIRECT)
#  define ZERO__O_DIRECT O_DIRECT
#elif defined(__O_DIRECT)
#  define ZERO__O_DIRECT __O_DIRECT
#else
#  define ZERO__O_DIRECT 0
#endif
/* huge pages for the NVMe tier's I/O buffers (>>io): glibc hides madvise and MADV_HUGEPAGE
   in strict ISO mode; the value is Linux's (14 on every architecture but old parisc) */
#if defined(__linux__) && !defined(__cplusplus) && !defined(ZERO_NO_LINUX)
int madvise(void *addr, size_t len, int advice);
#endif
#if defined(ZERO_NO_LINUX)
   /* (no huge-page advice) */
#elif defined(MADV_HUGEPAGE)
#  define ZERO__MADV_HUGEPAGE MADV_HUGEPAGE
#elif defined(__linux__) && !defined(__hppa__)
#  define ZERO__MADV_HUGEPAGE 14
#endif
#ifdef ZERO_IO_URING
#  include <liburing.h>
#endif
/* no feature-test macro is defined for the includer (-pthread gives glibc's POSIX.1c and 1b
   in strict ISO mode; the shims above cover the later names) */
#if defined(__GLIBC__) && !defined(__USE_POSIX199309)
#  error "zero.h: the implementation needs POSIX.1b (clock_gettime): compile with -pthread, or define _POSIX_C_SOURCE 200809L before your first #include"
#endif
/* Threads, locks and condition variables, by zero.h's own names: POSIX threads here (a
   port to another thread API puts it behind these names, and nothing outside this block
   names pthreads). Condition variables wait on CLOCK_MONOTONIC where the platform allows
   it, so a clock change cannot stretch a collective's timeout; zero__cond_timedwait
   returns ETIMEDOUT once the deadline (zero__deadline) has passed. */
typedef pthread_mutex_t zero__mutex;
typedef pthread_cond_t zero__cond;
typedef pthread_t zero__thread;
#define ZERO__MUTEX_INITIALIZER PTHREAD_MUTEX_INITIALIZER
#if defined(__APPLE__) || defined(ZERO_NO_LINUX)
#  define ZERO__COND_REALTIME 1     /* no pthread_condattr_setclock (macOS) */
#endif
static void zero__mutex_init(zero__mutex *m) { pthread_mutex_init(m, NULL); }
static void zero__mutex_destroy(zero__mutex *m) { pthread_mutex_destroy(m); }
static void zero__mutex_lock(zero__mutex *m) { pthread_mutex_lock(m); }
static void zero__mutex_unlock(zero__mutex *m) { pthread_mutex_unlock(m); }
static void zero__cond_init(zero__cond *cv) {
#if defined(ZERO__COND_REALTIME)
    pthread_cond_init(cv, NULL);
#else
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
#endif
}
static void zero__cond_destroy(zero__cond *cv) { pthread_cond_destroy(cv); }
static void zero__cond_wait(zero__cond *cv, zero__mutex *m) { pthread_cond_wait(cv, m); }
static int zero__cond_timedwait(zero__cond *cv, zero__mutex *m, const struct timespec *deadline) {
    return pthread_cond_timedwait(cv, m, deadline);
}
static void zero__cond_signal(zero__cond *cv) { pthread_cond_signal(cv); }
static void zero__cond_broadcast(zero__cond *cv) { pthread_cond_broadcast(cv); }
static struct timespec zero__deadline(int timeout_ms) {
    struct timespec ts;
#if defined(ZERO__COND_REALTIME)
    clock_gettime(CLOCK_REALTIME, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    return ts;
}
/* 0: the thread runs fn(arg) */
static int zero__thread_start(zero__thread *t, void *(*fn)(void *), void *arg) { return pthread_create(t, NULL, fn, arg); }
static void zero__thread_join(zero__thread t) { (void)pthread_join(t, NULL); }

/* the implementation's floating-point rules are its own, whatever the flags (see the
   element-wise math block); ZERO__FP_PIN_END at the end of the implementation */
ZERO__FP_PIN_BEGIN

/* >>structs ----------------------------------------------------------------------------
   The engine's shared types: the tasks and streams, the device and comm tables, the
   layout records and the context. A backend's private state (MPI, NCCL, CUDA, EMU,
   the NVMe tier, the thread pool, the trace) is declared with its implementation and
   reached through an opaque pointer. */
#define ZERO__DEF(v, d) ((v) != 0 ? (v) : (d))
/* a const pointer made writable where the callee's type needs it (it does not write): without
   a cast that -Wcast-qual reports */
#define ZERO__UNCONST(T, p) ((T)(uintptr_t)(p))
#define ZERO__ALIGN 64                 /* every arena starts on a cache line */
#define ZERO__MSG 512
#define ZERO__STREAM_CAP 1024          /* tasks in flight per stream */
#define ZERO__MAX_RANKS 4096
#define ZERO__F64 100                  /* internal dtype code for double scalars */
#define ZERO__NORM_BLOCK 1024          /* gradient-norm block, elements (>>kernels) */

/* a failure found by code that must not report it itself (its caller reports it, once it
   has undone its work): the result, the log item and the message (zero__why_set) */
typedef struct zero__why { zero_result r; zero_log_item item; char msg[ZERO__MSG]; } zero__why;

/* The comm stream's task kinds, described once: X(KIND, runner, trace label, module task).
   Each kind's runner is zero__do_<runner> (>>schedule), run through one table; a module task
   names its module (the collective's tag and the trace's label); the traffic each kind
   sends is counted when it is issued (zero__count_task, >>stream). */
#define ZERO__TASK_KINDS(X) \
    X(REDUCE,          reduce,          "reduce",           1) \
    X(GATHER_MODULE,   gather_module,   "all-gather",       1) \
    X(GATHER_PARAMS,   gather_params,   "gather params",    1) \
    X(GATHER_MASTER,   gather_master,   "gather master",    1) \
    X(ALLREDUCE_F64,   allreduce_f64,   "all-reduce",       0) \
    X(ALLGATHER_BYTES, allgather_bytes, "all-gather bytes", 0) \
    X(SPLIT,           split,           "split into nodes", 0) \
    X(STOP,            stop,            "stop",             0)
typedef enum zero__task_kind {
#define ZERO__X(kind, runner, label, module_task) ZERO__TASK_##kind,
    ZERO__TASK_KINDS(ZERO__X)
#undef ZERO__X
    ZERO__TASK_NUM
} zero__task_kind;

/* a task: its kind, its module (module tasks; -1 otherwise), and the kind's own fields */
typedef struct zero__task {
    int kind;
    int mod;
    union {
        struct { int micro; int64_t staging_off; } reduce;      /* micro-batch (1-based); its record's offset */
        struct { int refresh; void *dst; } gather;              /* GATHER_MODULE: hpz's chunk is stale; the span */
        struct { float *buf; } master;                          /* GATHER_MASTER: the span, fp32 */
        struct { double *v; int n; } f64;                       /* ALLREDUCE_F64: n doubles, summed in place */
        struct { const void *send; void *recv; int64_t bytes; } all;  /* ALLGATHER_BYTES: bytes per rank */
        struct { int ranks_per_node; } split;                   /* SPLIT: the comm's node and cross-node endpoints */
    } u;
} zero__task;

typedef struct zero__stream {
    zero__thread thread;
    zero__mutex mu;
    zero__cond cv;              /* both directions: work arrived, work done */
    zero__task ring[ZERO__STREAM_CAP];
    uint64_t enqueued, done;
    int started;
    zero_result err;                /* first failure; later tasks are skipped */
    char err_msg[ZERO__MSG];
} zero__stream;

/* The device's operations (>>device). The engine reaches the memory
   of the arenas (params, grads, master, moments, gradient staging, the gather arena,
   tiles) only through these, never by dereferencing it, so one engine drives the CPU,
   the CUDA device and the EMU device (CPU memory the host cannot touch, which proves
   the rule in the tests). s is the stream an op is ordered on: ZERO__S_COMPUTE (the
   caller's thread; desc.cuda_stream on CUDA) or ZERO__S_COMM (the comm stream).
   Ops on host and device memory alike: a copy on the compute stream waits for the copy to
   finish; sumsq returns its value on the host; an op on the comm stream that writes
   memory the host can read is done when it returns, one that writes device memory is
   ordered on the comm stream and done after `flush` (the local comm calls it before other
   ranks read what it wrote, or read its buffers). The others may run asynchronously on the
   compute stream; `sync` waits for them. A task on the comm stream waits (task_begin) for
   the compute-stream work queued before it was enqueued (mark), and task_end waits for the
   task's own device work, so a finished ticket means finished device work. */
enum { ZERO__S_COMPUTE = 0, ZERO__S_COMM = 1 };
typedef struct zero__dev_vt {
    const char *name;
    int host_access;                /* 1: the host may dereference device memory (the CPU device) */
    zero_result (*init)(zero_ctx *ctx);                          /* zero_create */
    void (*fini)(zero_ctx *ctx);                                 /* zero_destroy */
    void *(*alloc)(zero_ctx *ctx, int64_t bytes);                /* zero-filled; NULL: out of memory */
    void (*free)(zero_ctx *ctx, void *p);
    void *(*host_alloc)(zero_ctx *ctx, int64_t bytes);           /* host memory for transfers (CUDA: pinned), zeroed */
    void (*host_free)(zero_ctx *ctx, void *p);
    zero_result (*prepare)(zero_ctx *ctx);                       /* end of zero_build: tables */
    zero_result (*copy)(zero_ctx *ctx, int s, void *dst, const void *src, int64_t bytes);
    zero_result (*fill0)(zero_ctx *ctx, int s, void *dst, int64_t bytes);
    /* out (rdt) = [out +] sum over k in order of ins[k] (sdt), in fp32 (zero__sum_into) */
    zero_result (*sum_into)(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                            int64_t count, int accumulate);
    zero_result (*grad_sumsq)(zero_ctx *ctx, int r, double *out); /* the norm's sum of squares of rank r's grad slice */
    /* sum_into, then blk[b] = the norm's block b of out's count elements (blk not NULL) and
       out copied to copies[0..ncopies) (zero__sum_norm_k); host memory only. NULL: the device
       cannot (the norm is then taken by sumsq, and the local comm reduces and gathers) */
    zero_result (*sum_norm)(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                          int64_t count, int accumulate, double *blk, void *const *copies, int ncopies);
    /* a device without sum_norm: the norm's blocks of out (this rank's slice of a module's
       reduced gradient, count elements, the grad arena's dtype), kept on the device where blk
       (its place in ctx->opt.norm_part) says, for grad_sumsq to use instead of reading out
       again. NULL: the norm reads every slice at the step */
    zero_result (*norm_blocks)(zero_ctx *ctx, int s, const void *out, int64_t count, double *blk);
    /* ZeRO++'s payloads (>>kernels: zero__qp_*): dst = the payload of n values of x (xdt);
       out (rdt) = [out +] the values of np payloads added in fp32, in order. NULL: the
       device has no such kernels (ZeRO++ is refused) */
    zero_result (*qp_encode)(zero_ctx *ctx, int s, void *dst, const void *x, int xdt, int64_t n, int bits, int block);
    zero_result (*qp_sum)(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ps, int np, int64_t n, int bits,
                          int block, int accumulate);
    zero_result (*optimizer)(zero_ctx *ctx, float gscale);       /* the fused pass over the segments */
    zero_result (*gemm)(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                        const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc);
    /* y[r*ldy + j] += b[j] (b in bdt); gb[j] (gdt) += sum over r in order of dy[r*ld + j] */
    zero_result (*bias_add)(zero_ctx *ctx, float *y, int64_t ldy, const void *b, int bdt, int64_t rows, int64_t n);
    zero_result (*bias_grad)(zero_ctx *ctx, void *gb, int gdt, const float *dy, int64_t ld, int64_t rows, int64_t n);
    /* the trainer helpers (zero_gelu, zero_gelu_backward, zero_softmax_xent), fp32 */
    zero_result (*gelu)(zero_ctx *ctx, float *y, const float *x, int64_t n);
    zero_result (*gelu_bwd)(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n);
    zero_result (*xent)(zero_ctx *ctx, float *loss, float *dlogits, const float *logits, const int32_t *labels,
                        int64_t rows, int64_t classes, float dscale);
    void (*mark)(zero_ctx *ctx, uint64_t ticket);                /* compute side, when a task is enqueued */
    zero_result (*task_begin)(zero_ctx *ctx, uint64_t ticket);   /* comm thread, before the task */
    zero_result (*task_end)(zero_ctx *ctx);                      /* comm thread, after it */
    zero_result (*sync)(zero_ctx *ctx, int s);
    /* the comm stream's ops issued so far done (the local comm, before other ranks read what
       they wrote, or read buffers they wrote). NULL: they are done on return */
    zero_result (*flush)(zero_ctx *ctx);
    /* fp32 host values <-> device memory of dtype dt (done on return). NULL: the CPU's
       conversion through a small host buffer and copy (zero__dev_put_f32) */
    zero_result (*put_f32)(zero_ctx *ctx, void *dst, int dt, const float *src, int64_t n);
    zero_result (*get_f32)(zero_ctx *ctx, float *dst, const void *src, int dt, int64_t n);
    /* a pipeline's copies (the host tier's step): copy_async (to_host: device -> host, else
       host -> device) may still be in flight on return, ordered after the compute stream's
       work queued before the pipeline's first copy; fence(slot) marks the copies to the
       host issued so far, fence_wait(slot) waits for them; close orders the compute
       stream's later work after every copy (then `sync` waits for all); drain, after a
       pipeline's failure, leaves nothing in flight and the first error kept. NULL: copy,
       and fences with nothing to wait for (the copies are done on return) */
    zero_result (*copy_async)(zero_ctx *ctx, int to_host, void *dst, const void *src, int64_t bytes);
    zero_result (*fence)(zero_ctx *ctx, int slot);
    zero_result (*fence_wait)(zero_ctx *ctx, int slot);
    zero_result (*close)(zero_ctx *ctx);
    void (*drain)(zero_ctx *ctx);
    int qp_max_inputs;              /* qp_sum adds at most this many payloads; 0: any number */
    /* device bytes of the fused pass's tables for this many chunks (of at most table_chunk
       elements of a segment each) and norm blocks, planned under ZERO_CAT_BUFFERS; NULL: the
       device needs none */
    int64_t (*table_bytes)(int64_t chunks, int64_t blocks);
    int64_t table_chunk;
} zero__dev_vt;

/* The tiers (>>offload): where this rank's optimizer state lives and what touches it. The
   engine asks its tier, never which buffers exist. mem: the master and moments are arenas
   (device memory, or host memory on the CPU device); host: ZeRO-Offload on a device (they
   are in pinned host memory, the gradient shard goes down and the new params up around
   the CPU's fused pass); nvme: the NVMe tier's blocks, with offload_params = nvme also the
   trainable modules' stage-3 param shard. In read/write, which is 0 the fp32 master, 1 the
   first moment (or SGD momentum), 2 the second moment, or ZERO__TIER_PARAMS the params in
   the tier, as fp32; idx is the state index. */
#define ZERO__TIER_PARAMS (-1)
typedef struct zero__tier_vt {
    const char *name;
    zero_result (*build)(zero_ctx *ctx);                         /* zero_build, after the arenas */
    void (*free)(zero_ctx *ctx);                                 /* idempotent */
    int (*has_master)(const zero_ctx *ctx);                      /* an fp32 master apart from the params */
    int (*holds_params)(const zero_ctx *ctx);                    /* the stage-3 shard of trainable modules */
    int build_agreed;               /* build's success is agreed by every rank (files: every rank's, or none) */
    zero_result (*step)(zero_ctx *ctx, float gscale);            /* the fused pass (nvme: agreed by every rank,
                                                                    undone on failure) */
    zero_result (*read)(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *out, const char *fn);
    zero_result (*write)(zero_ctx *ctx, int which, int64_t idx, int64_t n, const float *in, const char *fn);
    zero_result (*flush)(zero_ctx *ctx, const char *fn);         /* writes back what writes left buffered */
    int blocked;                    /* the state is in blocks: move it a block at a time (run) */
    int64_t (*run)(const zero_ctx *ctx, int64_t idx);            /* state elements from idx in idx's block */
    /* state elements [idx, idx+n) of the params, in the param dtype, for a stage-3 gather
       (holds_params only) */
    zero_result (*gather)(zero_ctx *ctx, int64_t idx, int64_t n, char *dst);
    /* this rank's fp32 slice of trainable module mi's master, for its gather (the comm
       stream; a failure leaves its message in ctx->comm->err) */
    zero_result (*master_slice)(zero_ctx *ctx, int mi, float *mine);
} zero__tier_vt;
typedef struct zero__comm_vt {
    /* each rank contributes `bytes` at send; recv gets all ranks' pieces in rank order */
    zero_result (*all_gather)(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms);
    /* recv (count elements of rdt) = [recv +] sum over ranks of their send slice r (sdt);
       sums are taken in fp32, in rank order */
    zero_result (*reduce_scatter)(zero_comm *c, const void *send, int sdt, void *recv, int rdt,
                                  int64_t count, int accumulate, int timeout_ms);
    zero_result (*all_reduce)(zero_comm *c, void *buf, int dt, int64_t count, int timeout_ms);
    zero_result (*broadcast)(zero_comm *c, void *buf, int64_t bytes, int root, int timeout_ms);
    zero_result (*barrier)(zero_comm *c, int timeout_ms);
    /* send holds size chunks of `bytes`, chunk k for rank k; recv gets rank k's chunk for
       this rank at recv + k * bytes (ZeRO++'s quantized reduce-scatter) */
    zero_result (*all_to_all)(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms);
    /* collective: make this rank's endpoints of its node (ranks r / ranks_per_node, in rank
       order) and of its cross-node peers (ranks with its r % ranks_per_node, in node order);
       NULL: the communicator cannot (ZeRO++ is refused) */
    zero_result (*split)(zero_comm *c, int ranks_per_node, zero_comm **intra, zero_comm **inter);
    /* the endpoint's own end (its split's endpoints are gone already): frees c and what
       the backend holds (MPI_Comm, NCCL communicator, the group it owns) */
    void (*destroy)(zero_comm *c);
    /* zero_comm_set_nodes on this backend, after the shared checks; NULL: only the
       endpoint's own node_size changes (the local comm's group learns the nodes too) */
    zero_result (*set_nodes)(zero_comm *c, int ranks_per_node);
    /* zero_create hands the endpoint its context: the backend's checks (the device it
       needs) and settings (stream, reduce mode); NULL: none. On failure it undoes
       nothing, and leaves the sentence in why and its log item in *item. */
    zero_result (*attach)(zero_comm *c, zero_ctx *ctx, zero__why *why);
} zero__comm_vt;

struct zero_comm {
    const zero__comm_vt *vt;
    int rank, size;
    zero_group *group;
    int64_t tag;                    /* set before a collective: what it moves (a module), -1: nothing */
    int64_t bad_tag[2];             /* after ZERO_ERR_MISMATCH: rank 0's tag and bad_rank's tag */
    int bad_rank;
    int in_use;                     /* a context owns this endpoint (one at a time) */
    char err[ZERO__MSG];            /* written by the thread that runs this rank's collectives */
    int owns_group;                 /* zero_comm_from_env's world of one: destroy frees the group */
    zero_ctx *ctx;                  /* the context using this endpoint (its device moves the data); NULL: none */
    void *cuda_stream;              /* nccl: the cudaStream_t its collectives run on; NULL: its own */
    int device_ordered;             /* it reads and writes only this rank's memory, on the context's comm
                                       stream (nccl, attached): a comm task may wait for the compute
                                       stream on the device (cudaStreamWaitEvent) instead of the host */
    int64_t scratch_bytes;          /* nccl: device bytes it holds (headers, scratch grown on demand) */
    /* the node topology (zero_comm_set_nodes): 0 unknown (one node) */
    int node_size;
    int scope;                      /* ZERO__SCOPE_*: a whole communicator, or a node's or the cross-node one */
    zero_comm *intra, *inter;       /* vt->split's endpoints (ZeRO++), destroyed with this one */
    int split_ns;                   /* the ranks_per_node they were made for */
    int64_t sent_within, sent_across;   /* zero_comm_bytes: written by the thread running the collectives */
    /* zero_stats (written by the thread running the collectives): collective headers
       exchanged (nccl's mismatch check), host waits on the comm's stream, device allocations */
    int64_t headers, host_syncs, device_allocs;
    int64_t link_ns;                /* local: the modelled link's sleeps so far (build/bench_zpp reads it) */
    /* set by the caller around one reduce-scatter (NULL otherwise): its output's gradient-norm
       blocks go to sq_blk (zero__sum_norm_k), and the comm sets sq_done if it took them */
    double *sq_blk;
    int sq_done;
    char node_why[ZERO__MSG];       /* zero_comm_from_env: why the launcher's nodes were not taken */
};
#define ZERO__SCOPE_WORLD 0
#define ZERO__SCOPE_NODE 1         /* every peer in this rank's node */
#define ZERO__SCOPE_CROSS 2        /* every peer in another node */

typedef struct zero__slot {
    uint64_t gen;                   /* the op generation this rank arrived at */
    int kind, sdt, rdt;
    int cross;                      /* the op writes into the other ranks' buffers (zero__local_all_reduce) */
    int64_t count, tag;
    const void *send;
    void *recv;
} zero__slot;

struct zero_group {
    zero__mutex mu;
    zero__cond cv;
    int n, endpoints;
    uint64_t gen;                   /* current op; starts at 1 */
    uint64_t seq;                   /* ops completed, for messages */
    int arrived, departed, running;
    int writers;                    /* ranks that may still write into others' buffers (a cross op) */
    zero_result broken;             /* ZERO_OK while healthy */
    char broken_msg[ZERO__MSG];
    int64_t bad_tag[2];
    int bad_rank;
    int *left;                      /* rank destroyed its endpoint */
    zero__slot *slots;
    double link_latency_us, link_gbps;  /* a modelled link (zero_group_set_link); 0: none */
    double cross_latency_us, cross_gbps;    /* between nodes (zero_group_set_cross_link); -1: the same */
    int node_size;                  /* zero_group_set_nodes; 0: one node */
    int scope;                      /* ZERO__SCOPE_*: a sub-group's peers are all in or all across nodes */
    int sub_ns;                     /* the sub-groups' ranks_per_node; 0: none made yet */
    struct zero_group **sub;        /* [nodes] node groups, then [ranks_per_node] cross-node groups */
    int nsub;
    int rank0, rstride;             /* a sub-group: member k is rank rank0 + k * rstride of its parent */
};
typedef struct zero__param_rec {
    char *name;
    int module;
    int ndim;
    int64_t shape[ZERO_MAX_DIMS];
    int64_t numel;
    int64_t offset;                 /* inside the module's span */
    int64_t out_offset;             /* in registration order, unpadded (gathers) */
    int no_decay;
} zero__param_rec;

/* a module (zero_add_module), its fields grouped by the region that owns them */
typedef struct zero__module_rec {
    char *name;
    int frozen;
    struct {                        /* where it lies (>>plan) */
        int64_t used;               /* elements before padding the span */
        int64_t span;               /* padded to a multiple of N * align */
        int64_t param_off;          /* full param arena (stages 0-2) */
        int64_t train_off;          /* full train arenas (grads/master/optim); -1 if frozen */
    } lay;
    struct {                        /* stage 3's gathers (>>schedule) */
        int fetched;                /* fetch count */
        int64_t goff;               /* the gathered span in the gather arena or the persist region; -1: none */
        uint64_t gticket;           /* its gather task */
        int live;                   /* the span at goff holds (or is being gathered with) current values */
        int persistent, prefetched, kept;
    } gat;
    struct {                        /* its gradients this step (>>grads) */
        int calls;                  /* zero_grads_ready calls (ready: reductions queued) */
        int ready;
        int open_rec;               /* the open micro-batch's record in the staging area; -1: none */
        int open_own;               /* the open micro-batch is in the module's own slot (shared modules) */
        int shared;                 /* zero_module_desc.shared, or a tied param's owner: a slot of its own */
        int tie_users;              /* modules other than this one that use its params */
        int64_t shared_off;         /* its own slot: bytes after the ring */
        uint64_t shared_ticket;     /* the slot's last reduce task (ZERO__QUEUED: in the open bucket) */
    } grad;
    struct {                        /* ZeRO++ hpz: its chunk of the secondary partition (>>zpp) */
        int64_t sec_off;            /* in ctx->zpp.sec, bytes */
        int sec_fresh;              /* the chunk holds the params (else the next gather refreshes it) */
    } zpp;
    struct {                        /* the gradient norm's blocks of this rank's slice (>>optim) */
        int64_t first;              /* its first block in ctx->opt.norm_part (trainable modules) */
        int taken;                  /* this step's blocks are in norm_part already: its last reduction
                                       took them (comm thread; cleared by zero__end_step) */
    } norm;
} zero__module_rec;

/* a tied param: module `module` uses param `target` (of another module, usually) as `name` */
typedef struct zero__tie {
    char *name;
    int module, target;
} zero__tie;
#define ZERO__QUEUED (~(uint64_t)0)     /* a shared slot's reduction is in the bucket, not yet enqueued */

/* One run of optimizer work: part of one param that lies in this rank's region.
   Indices are elements into the arenas. */
typedef struct zero__segment {
    int64_t n, grad_idx, state_idx, param_idx;
    int decay;
} zero__segment;

/* a module's reduction in the open bucket: its micro-batch's gradient in staging record
   rec (-1: none), or in the module's own slot (own), or in place */
typedef struct zero__bucket_item { int mod, micro, rec, own; } zero__bucket_item;

typedef struct zero__staging_rec {
    int64_t off, bytes;
    uint64_t ticket;                /* reduce task's ticket; 0 while open or queued */
} zero__staging_rec;

typedef struct zero__tiled {
    int first_module, first_param, tiles, bias;
    int64_t in, out;
} zero__tiled;

typedef struct zero__sizes {        /* what the planner needs */
    int64_t numel, padded, trainable, max_span, max_train_span, persist_bytes;
    int64_t tile_elems;             /* largest tile of any tiled linear (0: none) */
    int64_t shared_bytes;           /* staging slots of shared trainable modules (staging mode) */
    int num_trainable;
    int64_t dev_tables;             /* CUDA: bytes of the optimizer's and the norm's tables */
    int num_acts;                   /* activation stash slots (>>stash) */
    int64_t act_mem, act_file, act_max; /* their bytes in memory (64-aligned), in files (4 KiB areas), the largest area */
    int node_size;                  /* ZeRO++: ranks per node (0: desc.hpz, or one node) */
} zero__sizes;
typedef struct zero__act_rec {      /* a stash slot (zero_act_add; >>stash) */
    char *name;
    int64_t bytes;
    int64_t off;                    /* in the memory arena, or in file `dir` (nvme) */
    int dir;
    int state;                      /* ZERO__ACT_EMPTY, _PUT (bytes held), _TAKEN (zero_act_get done) */
    int buf;                        /* nvme: the staging buffer holding its bytes; -1: none */
    int64_t put_step;               /* the step of its last put */
    uint64_t gen;                   /* puts so far: sealed into the trailer */
} zero__act_rec;
/* a record of the trainer's state for checkpoints (zero_ckpt_put; >>ckpt): the key, its
   value's bytes (data: allocated, NULL when empty) */
#define ZERO__CK_KEY_MAX 64
typedef struct zero__ck_rec {
    char key[ZERO__CK_KEY_MAX + 1];
    int64_t bytes;
    unsigned char *data;
} zero__ck_rec;

struct zero_ctx {
    zero_desc desc;                 /* effective values */
    zero_comm *comm;
    zero_group *own_group;          /* when desc.comm was NULL */
    int rank, world;
    int prank;                      /* which slice of every module this rank owns: its rank, or with
                                       ZeRO++ its place in node-major order (zero__part) */
    uint32_t salt;
    char err[ZERO__MSG];
    int built;

    /* the model as registered (>>public: zero_add_module, zero_add_param, zero_tiled_linear_add) */
    zero__param_rec *params;
    int num_params, cap_params;
    zero__module_rec *modules;
    int num_modules, cap_modules;
    zero__tiled *tiled;
    int num_tiled, cap_tiled;
    zero__tie *ties;                /* zero_add_tied_param; handles past the params' (zero__param_index) */
    int num_ties, cap_ties;

    struct {                        /* what zero_build laid out (>>plan, >>build) */
        zero_plan plan;
        int64_t bytes[ZERO_TIER_NUM][ZERO_CAT_NUM];
        int staging_mode;           /* user gradients go through the staging area */
        int num_trainable;
        int64_t shard_padded, shard_trainable;
        int64_t max_span;
        zero__segment *segs;        /* the optimizer's runs over this rank's region */
        int num_segs;
    } lay;
    struct {                        /* the arenas, in device memory (>>build) */
        void *param;                /* full (stages 0-2) or shard (stage 3) */
        void *grad;                 /* full (stages 0-1) or shard (2-3), grad_accum_dtype */
        float *master, *m, *v;      /* master NULL when params are f32 (the params are it) */
        char *fparam, *fgrad;       /* desc.flat_layout's views, in the flat order (NULL: none),
                                       at the end of param's and grad's allocations */
    } arena;
    struct {                        /* the staging area and the open bucket (>>grads) */
        char *ring;                 /* user gradient buffers, grad_dtype */
        int64_t ring_bytes, head, inuse, peak;
        zero__staging_rec *recs;    /* FIFO of staging records */
        int rec_head, rec_count, rec_cap;
        zero__bucket_item *bucket;  /* modules queued for reduction, not yet flushed */
        int bucket_len;
        int64_t bucket_fill, total_ready;
    } grads;
    struct {                        /* stage 3: gather arena, persist region, recorded order (>>schedule) */
        char *arena, *persist;
        int64_t arena_bytes, max_live, prefetch_budget;
        int64_t *free_off, *free_len;   /* the arena's free ranges (first fit), sorted by offset */
        int nfree;
        int64_t gathered, inuse_bytes, pending_bytes, peak_gathered;
        int *order;                 /* fetch order recorded in the first step */
        int len, cap, active, pos, off_pos;
        int64_t hits, misses, prefetched_bytes;
        double wait_ms;
    } sched;
    struct {                        /* tiled linears' buffers (>>tiling) */
        float *w, *g, *gemm_ws;
    } tile;
    struct {                        /* the optimizer and the step (>>kernels, >>optim) */
        int simd;                   /* optimizer kernel path, ZERO__SIMD_* */
        struct zero__pool *pool;    /* optimizer threads (cpu_threads), from zero_build */
        double *norm_part;          /* the gradient norm's block sums */
        int64_t norm_blocks;
        int64_t steps, skipped;
        int64_t micro;              /* zero_stats' micro_batches */
        float loss_scale;
        int dynamic_scale, good_steps;
        double grad_norm;
        int grads_cleared;          /* this step's pass also cleared the gradients (>>device, >>optim) */
    } opt;
    struct {                        /* where the optimizer states live (>>offload) */
        const zero__tier_vt *vt;
        struct zero__nvme *nvme;    /* the nvme tier's state */
        void *hgrad, *hparam;       /* ZeRO-Offload on a device: host copies of the gradient shard and new params */
    } tier;
    struct {                        /* the trainer's records for checkpoints (zero_ckpt_put) */
        zero__ck_rec rec[ZERO_CKPT_MAX_RECORDS];
        int n;
    } ckrec;
    const zero__dev_vt *dev;        /* the device (>>device) */
    void *dev_state;                /* the device's own state (CUDA: streams, events, cuBLAS, tables) */
    int64_t host_syncs;             /* zero_stats: the device's host waits (atomic: caller and comm thread) */
    int64_t device_allocs;          /* zero_stats: the device's allocations of device memory */
    zero__stream stream;            /* the comm stream (>>stream) */
    struct {                        /* traffic issued, per collective (zero_stats) */
        int64_t calls[ZERO_COLL_NUM], elems[ZERO_COLL_NUM], bytes[ZERO_COLL_NUM];
    } traffic;
    struct zero__trace *trace;      /* zero_trace_enable; NULL: off (>>trace) */
    struct {                        /* the activation stash (>>stash) */
        zero__act_rec *recs;        /* zero_act_add */
        int num, cap;
        struct zero__stash *st;     /* zero_build's buffers, files and schedule; NULL: none */
    } act;
    struct {                        /* ZeRO++ (>>schedule: zero__zpp_*) */
        int on;                     /* qwz, qgz or hpz: collectives run in two levels */
        int ns, nn;                 /* ranks per node, nodes */
        int bits;                   /* qgz: 8 or 4; 0: exact sums */
        zero_comm *intra, *inter;   /* ctx->comm's node and cross-node endpoints (vt->split) */
        char *sec;                  /* hpz: the secondary partition, each module's chunk at sec_off */
        char *buf;                  /* payloads: a (this rank's), b (arrived), f (qgz's fp32 partial) */
        int64_t a_bytes, b_bytes, f_bytes;
        int64_t sets;               /* hpz: setter calls since the last step (they must agree) */
    } zpp;
};

/* >>base -------------------------------------------------------------------------------
   Allocation hooks, the last error and logging, sizes, clocks, condition variables. */
#if defined(ZERO_MALLOC) && !defined(ZERO_FREE)
#error "zero.h: define ZERO_FREE together with ZERO_MALLOC (both or neither)"
#endif
#if defined(ZERO_FREE) && !defined(ZERO_MALLOC)
#error "zero.h: define ZERO_MALLOC together with ZERO_FREE (both or neither)"
#endif
#ifndef ZERO_MALLOC
#  define ZERO_MALLOC(sz, u) ((void)(u), malloc(sz))
#  define ZERO_FREE(p, u) ((void)(u), free(p))
#endif

/* the slice of every module that rank r owns: r, or with ZeRO++ (nodes of ns ranks, nn
   nodes; r = node n, place l) l * nn + n, so that the slices of ranks with one place l are
   one contiguous chunk of the span (>>zpp) */
static int zero__part(const zero_ctx *ctx, int r) {
    return ctx->zpp.on ? (r % ctx->zpp.ns) * ctx->zpp.nn + r / ctx->zpp.ns : r;
}
/* Process-wide state, all of it; everything else hangs off a context:
     - the thread's last error (zero__tls_err, thread-local; zero_last_error(NULL));
     - this counter, which gives each context its own handle salt, so a handle from one
       context is rejected by another;
     - counters that make the names of the NVMe tier's and the stash's files and of the EMU
       device's mapped files unique in this process (atomic);
     - the EMU device's address map (zero__emu_maps, under its mutex: the local comm's ops
       read other ranks' device memory, >>device);
     - zero__fops, the file operations tests replace to provoke faults (>>io). */
static uint32_t zero__next_salt(void) {
    static uint32_t counter = 0;
    return (__atomic_add_fetch(&counter, 1u, __ATOMIC_RELAXED) & 0x7ffu) + 1u;
}
static ZERO__TLS char zero__tls_err[ZERO__MSG];

static const char *zero__log_item_name[] = {
#define ZERO__X(name, text) #name,
    ZERO_LOG_ITEMS(ZERO__X)
#undef ZERO__X
};

static int64_t zero__align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* a*b with overflow check; 0 on overflow */
static int zero__mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > INT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static double zero__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* host allocation through the hooks, re-aligned to ZERO__ALIGN */
static void *zero__raw_alloc(const zero_allocator *a, size_t size) {
    size_t total = size + ZERO__ALIGN + sizeof(void *);
    void *raw;
    uintptr_t p;
    if (total < size) return NULL;
    raw = a && a->alloc ? a->alloc(total, a->user_data) : ZERO_MALLOC(total, a ? a->user_data : NULL);
    if (!raw) return NULL;
    p = ((uintptr_t)raw + sizeof(void *) + ZERO__ALIGN - 1) & ~(uintptr_t)(ZERO__ALIGN - 1);
    ((void **)p)[-1] = raw;
    return (void *)p;
}
static void zero__raw_free(const zero_allocator *a, void *ptr) {
    void *raw;
    if (!ptr) return;
    raw = ((void **)ptr)[-1];
    if (a && a->free) a->free(raw, a->user_data);
    else ZERO_FREE(raw, a ? a->user_data : NULL);
}
static char *zero__strdup(const zero_allocator *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)zero__raw_alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

static size_t zero__esize(int dt) { return dt == ZERO_F32 ? 4 : dt == ZERO__F64 ? 8 : 2; }
static char *zero__at(void *base, int64_t idx, int dt) { return (char *)base + idx * (int64_t)zero__esize(dt); }
/* a variable holding an integer in [lo, hi]; 0: unset, 1: ok, -1: malformed */
static int zero__env_int(const char *var, int lo, int hi, int *out) {
    const char *s = getenv(var);
    char *end;
    long v;
    if (!s) return 0;
    v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) return -1;
    *out = (int)v;
    return 1;
}
static int zero__grow(zero_ctx *ctx, void **arr, int *cap, int count, size_t elem) {
    int ncap;
    void *n;
    if (count < *cap) return 1;
    ncap = *cap ? *cap * 2 : 16;
    if (ncap > 0xfffff) ncap = 0xfffff;
    if (count >= ncap) return 0;
    n = zero__raw_alloc(&ctx->desc.allocator, elem * (size_t)ncap);
    if (!n) return 0;
    if (*arr) memcpy(n, *arr, elem * (size_t)count);
    zero__raw_free(&ctx->desc.allocator, *arr);
    *arr = n;
    *cap = ncap;
    return 1;
}
static void zero__logv(const zero_ctx *ctx, zero_log_level lvl, zero_log_item item, const char *msg) {
    const zero_logger *lg = ctx ? &ctx->desc.logger : NULL;
    if (lg && lg->func && lvl <= lg->level) lg->func(lg->user_data, lvl, item, ctx->rank, msg);
}
static void zero__log(const zero_ctx *ctx, zero_log_level lvl, zero_log_item item, const char *fmt, ...) {
    char msg[ZERO__MSG];
    va_list ap;
    if (!ctx || !ctx->desc.logger.func || lvl > ctx->desc.logger.level) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zero__logv(ctx, lvl, item, msg);
}
/* Records a failure: the message goes to the context (if any), the thread's last
   error and the logger. Returns r so callers can `return zero__fail(...)`. Before a
   context exists, zero__fail_lg reports to the logger of the desc being checked. */
static zero_result zero__report(zero_ctx *ctx, const zero_logger *lg, int rank, zero_result r,
                                zero_log_item item, const char *fmt, va_list ap) {
    char msg[ZERO__MSG];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(zero__tls_err, sizeof zero__tls_err, "%s", msg);
    if (ctx) snprintf(ctx->err, sizeof ctx->err, "%s", msg);
    if (lg && lg->func && ZERO_LOG_ERROR <= ZERO__DEF(lg->level, ZERO_LOG_WARN))
        lg->func(lg->user_data, ZERO_LOG_ERROR, item, rank, msg);
    return r;
}
static zero_result zero__fail(zero_ctx *ctx, zero_result r, zero_log_item item, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    r = zero__report(ctx, ctx ? &ctx->desc.logger : NULL, ctx ? ctx->rank : -1, r, item, fmt, ap);
    va_end(ap);
    return r;
}
/* a failure kept for the caller to report (zero__fail_lg) once it has undone its work */
static zero_result zero__why_set(zero__why *w, zero_result r, zero_log_item item, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->r = r;
    w->item = item;
    return r;
}
static zero_result zero__fail_lg(const zero_logger *lg, zero_result r, zero_log_item item, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    r = zero__report(NULL, lg, -1, r, item, fmt, ap);
    va_end(ap);
    return r;
}

/* names and element sizes (also the public zero_result_str, zero_dtype_str, zero_dtype_size) */
static const char *zero__result_name(zero_result r) {
    switch (r) {
    case ZERO_OK: return "ZERO_OK";
    case ZERO_STEP_SKIPPED: return "ZERO_STEP_SKIPPED";
    case ZERO_ERR_INVALID_ARG: return "ZERO_ERR_INVALID_ARG";
    case ZERO_ERR_INVALID_STAGE: return "ZERO_ERR_INVALID_STAGE";
    case ZERO_ERR_INVALID_SIZE: return "ZERO_ERR_INVALID_SIZE";
    case ZERO_ERR_INVALID_DTYPE: return "ZERO_ERR_INVALID_DTYPE";
    case ZERO_ERR_INVALID_HANDLE: return "ZERO_ERR_INVALID_HANDLE";
    case ZERO_ERR_ALREADY_BUILT: return "ZERO_ERR_ALREADY_BUILT";
    case ZERO_ERR_NOT_BUILT: return "ZERO_ERR_NOT_BUILT";
    case ZERO_ERR_GRADS_NOT_READY: return "ZERO_ERR_GRADS_NOT_READY";
    case ZERO_ERR_NOT_FETCHED: return "ZERO_ERR_NOT_FETCHED";
    case ZERO_ERR_STATE: return "ZERO_ERR_STATE";
    case ZERO_ERR_MISMATCH: return "ZERO_ERR_MISMATCH";
    case ZERO_ERR_TIMEOUT: return "ZERO_ERR_TIMEOUT";
    case ZERO_ERR_COMM: return "ZERO_ERR_COMM";
    case ZERO_ERR_OUT_OF_MEMORY: return "ZERO_ERR_OUT_OF_MEMORY";
    case ZERO_ERR_OVER_CAP: return "ZERO_ERR_OVER_CAP";
    case ZERO_ERR_IO: return "ZERO_ERR_IO";
    case ZERO_ERR_NO_DEVICE: return "ZERO_ERR_NO_DEVICE";
    case ZERO_ERR_UNSUPPORTED: return "ZERO_ERR_UNSUPPORTED";
    case ZERO_ERR_CORRUPT: return "ZERO_ERR_CORRUPT";
    case ZERO_ERR_VERSION: return "ZERO_ERR_VERSION";
    case ZERO_ERR_DEVICE: return "ZERO_ERR_DEVICE";
    case ZERO_ERR_NOT_FOUND: return "ZERO_ERR_NOT_FOUND";
    }
    return "ZERO_ERR_(unknown)";
}
static const char *zero__dtype_name(zero_dtype t) {
    switch (t) {
    case ZERO_F32: return "f32";
    case ZERO_BF16: return "bf16";
    case ZERO_F16: return "f16";
    default: return "(unknown dtype)";
    }
}
static size_t zero__dtype_size(zero_dtype t) {
    return t == ZERO_F32 ? 4 : (t == ZERO_BF16 || t == ZERO_F16) ? 2 : 0;
}
static const char *zero__last_err(const zero_ctx *ctx) {
    return ctx ? ctx->err : zero__tls_err;
}

static void zero__to_f32(float *dst, const void *src, zero_dtype t, int64_t n) {
    int64_t i;
    if (t == ZERO_F32) { memmove(dst, src, (size_t)n * 4); return; }
    for (i = 0; i < n; i++) dst[i] = zero__ld(src, i, (int)t);
}
static void zero__from_f32(void *dst, zero_dtype t, const float *src, int64_t n) {
    int64_t i;
    if (t == ZERO_F32) { memmove(dst, src, (size_t)n * 4); return; }
    for (i = 0; i < n; i++) zero__st(dst, i, (int)t, src[i]);
}
static void zero__add_f32(void *dst, zero_dtype t, const float *src, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) zero__st(dst, i, (int)t, zero__ld(dst, i, (int)t) + src[i]);
}

static zero_result zero__run_task(zero_ctx *ctx, const zero__task *t);   /* defined in >>schedule */

/* >>trace: a timeline of spans, exported as Chrome / Perfetto Trace Event JSON -----------
   Each context owns a fixed buffer of events, allocated by zero_trace_enable. The
   compute thread (user spans, fetch waits), the comm stream (every collective it runs)
   and zero_step (the optimizer pass) append to it by reserving a slot with one atomic
   add, so recording takes no lock and a full buffer only counts what it dropped. With
   tracing off every hook is one NULL test. Times are CLOCK_MONOTONIC microseconds, one
   clock for every rank of the machine. */
#define ZERO__TRACE_NAME 48
#define ZERO__TRACE_DEPTH 32
enum { ZERO__TRACK_COMPUTE = 0, ZERO__TRACK_COMM, ZERO__TRACK_OPTIM, ZERO__TRACK_NVME, ZERO__TRACK_ACT, ZERO__TRACK_NUM };
static const char *zero__track_name[ZERO__TRACK_NUM] = { "compute", "comm", "optimizer", "nvme", "activations" };

typedef struct zero__trace_event {   /* 72 bytes on 64-bit targets */
    double ts, dur;                  /* microseconds */
    int32_t track, rank;
    char name[ZERO__TRACE_NAME];
} zero__trace_event;

struct zero__trace {
    zero__trace_event *ev;
    int64_t cap, count;              /* count: slots reserved (atomic); may pass cap */
    double open_ts[ZERO__TRACE_DEPTH];   /* zero_trace_begin's stack (compute thread only) */
    char open_name[ZERO__TRACE_DEPTH][ZERO__TRACE_NAME];
    int depth;
};

/* ctx->trace is published once by zero_trace_enable while the comm stream may be running */
static struct zero__trace *zero__trace_get(const zero_ctx *ctx) {
    return ctx ? __atomic_load_n(&ctx->trace, __ATOMIC_ACQUIRE) : NULL;
}
static double zero__trace_t0(const zero_ctx *ctx) { return zero__trace_get(ctx) ? zero__now_ms() * 1e3 : 0.0; }

static void zero__trace_add(zero_ctx *ctx, int track, const char *name, const char *arg, double t0) {
    struct zero__trace *tr = zero__trace_get(ctx);
    zero__trace_event *e;
    int64_t i;
    if (!tr) return;
    i = __atomic_fetch_add(&tr->count, 1, __ATOMIC_RELAXED);
    if (i >= tr->cap) return;
    e = &tr->ev[i];
    e->ts = t0;
    e->dur = zero__now_ms() * 1e3 - t0;
    e->track = track;
    e->rank = ctx->rank;
    if (arg) snprintf(e->name, sizeof e->name, "%s %s", name, arg);
    else snprintf(e->name, sizeof e->name, "%s", name);
}

/* the comm stream runs every task through here */
/* a task's name on the trace's comm track and in its failure's message ("all-gather") */
static const char *zero__task_label(int kind) {
    static const char *labels[] = {
#define ZERO__X(kind, runner, label, module_task) label,
        ZERO__TASK_KINDS(ZERO__X)
#undef ZERO__X
    };
    return kind >= 0 && kind < ZERO__TASK_NUM ? labels[kind] : "?";
}
static zero_result zero__trace_run_task(zero_ctx *ctx, const zero__task *t) {
    double t0 = zero__trace_t0(ctx);
    zero_result r = zero__run_task(ctx, t);
    if (zero__trace_get(ctx)) {
        int mod = t->mod >= 0 && t->mod < ctx->num_modules;
        zero__trace_add(ctx, ZERO__TRACK_COMM, zero__task_label(t->kind), mod ? ctx->modules[t->mod].name : NULL, t0);
    }
    return r;
}

static void zero__trace_free(zero_ctx *ctx) {
    if (!ctx->trace) return;
    zero__raw_free(&ctx->desc.allocator, ctx->trace->ev);
    zero__raw_free(&ctx->desc.allocator, ctx->trace);
    ctx->trace = NULL;
}
static void zero__json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static int zero__trace_write(const char *path, const zero__trace_event *ev, const int64_t *counts, int64_t stride,
                             int world) {
    FILE *f = fopen(path, "w");
    double t_min = 0.0;
    int r, k, first = 1, any = 0, ok;
    int64_t i;
    if (!f) return 0;
    for (r = 0; r < world; r++)
        for (i = 0; i < counts[r]; i++)
            if (!any || ev[r * stride + i].ts < t_min) { t_min = ev[r * stride + i].ts; any = 1; }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (r = 0; r < world; r++) {
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
                first ? "" : ",\n", r, r);
        first = 0;
        for (k = 0; k < ZERO__TRACK_NUM; k++)
            fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    r, k, zero__track_name[k]);
        for (i = 0; i < counts[r]; i++) {
            const zero__trace_event *e = &ev[r * stride + i];
            fprintf(f, ",\n{\"name\":");
            zero__json_str(f, e->name);
            fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d}",
                    zero__track_name[e->track >= 0 && e->track < ZERO__TRACK_NUM ? e->track : 0], e->ts - t_min,
                    e->dur, r, e->track);
        }
    }
    fprintf(f, "\n]}\n");
    ok = !ferror(f);
    if (fclose(f) != 0) ok = 0;
    return ok;
}

/* zero_trace_enable: the event buffer, published to the comm stream once ready */
static zero_result zero__trace_enable(zero_ctx *ctx, int64_t max_events) {
    struct zero__trace *tr;
    int64_t bytes;
    if (max_events <= 0 || !zero__mul(max_events, (int64_t)sizeof(zero__trace_event), &bytes) || (size_t)bytes != (uint64_t)bytes)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_trace_enable: max_events must be positive (got %lld)", (long long)max_events);
    if (ctx->trace)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE, "zero_trace_enable: tracing is already on");
    tr = (struct zero__trace *)zero__raw_alloc(&ctx->desc.allocator, sizeof *tr);
    if (tr) memset(tr, 0, sizeof *tr);
    if (tr && !(tr->ev = (zero__trace_event *)zero__raw_alloc(&ctx->desc.allocator, (size_t)bytes))) {
        zero__raw_free(&ctx->desc.allocator, tr);
        tr = NULL;
    }
    if (!tr)
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_trace_enable: cannot allocate %lld bytes of trace events", (long long)bytes);
    tr->cap = max_events;
    /* the comm stream reads ctx->trace: publish it once the buffer is ready */
    __atomic_store_n(&ctx->trace, tr, __ATOMIC_RELEASE);
    zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_TRACE, "tracing on: %lld events, %lld bytes", (long long)max_events,
              (long long)bytes);
    return ZERO_OK;
}

/* >>stream -----------------------------------------------------------------------------
   A stream is a FIFO worker thread; an event is a ticket: the count of tasks enqueued
   when it was recorded. Waiting for a ticket waits until that many tasks are done. On
   the CPU the caller's thread is the compute stream, so the comm stream overlaps the
   gradient reductions with the backward pass for real. Tasks are small records in a
   fixed ring: enqueuing allocates nothing. */

static void *zero__stream_main(void *arg) {
    zero_ctx *ctx = (zero_ctx *)arg;
    zero__stream *s = &ctx->stream;
    for (;;) {
        zero__task t;
        uint64_t ticket;
        int skip;
        zero_result r = ZERO_OK;
        zero__mutex_lock(&s->mu);
        while (s->done == s->enqueued) zero__cond_wait(&s->cv, &s->mu);
        t = s->ring[s->done % ZERO__STREAM_CAP];
        ticket = s->done + 1;
        skip = s->err != ZERO_OK;
        zero__mutex_unlock(&s->mu);
        if (t.kind == ZERO__TASK_STOP) {
            zero__mutex_lock(&s->mu);
            s->done++;
            zero__cond_broadcast(&s->cv);
            zero__mutex_unlock(&s->mu);
            return NULL;
        }
        if (!skip) {
            zero_result r2;
            r = ctx->dev->task_begin(ctx, ticket);
            if (r == ZERO_OK) r = zero__trace_run_task(ctx, &t);
            r2 = ctx->dev->task_end(ctx);
            if (r == ZERO_OK) r = r2;
        }
        zero__mutex_lock(&s->mu);
        if (r != ZERO_OK && s->err == ZERO_OK) {    /* what was running, then the comm's own words */
            int mod = t.mod >= 0 && t.mod < ctx->num_modules;
            s->err = r;
            snprintf(s->err_msg, sizeof s->err_msg, "%s%s%.100s%s: %.380s", zero__task_label(t.kind),
                     mod ? " of module '" : "", mod ? ctx->modules[t.mod].name : "", mod ? "'" : "", ctx->comm->err);
        }
        s->done++;
        zero__cond_broadcast(&s->cv);
        zero__mutex_unlock(&s->mu);
    }
}

/* the collective a module's reduction runs for micro-batch `micro` (1-based): stages 2-3
   reduce-scatter every micro-batch into the shard; stages 0-1 accumulate and reduce the last
   one (stage 0 all-reduces); -1: this micro-batch is only accumulated */
static int zero__reduce_coll(const zero_desc *d, int micro) {
    if (d->stage >= 2) return ZERO_COLL_REDUCE_SCATTER;
    if (micro < d->accum_steps) return -1;
    return d->stage == 0 ? ZERO_COLL_ALL_REDUCE : ZERO_COLL_REDUCE_SCATTER;
}
/* The traffic a task will send from this rank (ring volume: (N-1)/N of the data for
   an all-gather or reduce-scatter, twice that for an all-reduce). Counted when the
   task is issued, so the figures after a call do not depend on how far the comm
   stream has got. Caller holds the stream lock. */
static void zero__count_task(zero_ctx *ctx, const zero__task *t) {
    const zero_desc *d = &ctx->desc;
    int64_t N = ctx->world, per = t->mod >= 0 && t->mod < ctx->num_modules ? ctx->modules[t->mod].lay.span / N : 0;
    int64_t elems = 0, es = 0;
    int coll = -1;
    if (ctx->zpp.on) return;        /* ZeRO++'s collectives count themselves (zero__coll_count) */
    switch (t->kind) {
    case ZERO__TASK_REDUCE:
        coll = zero__reduce_coll(d, t->u.reduce.micro);
        elems = per * (N - 1) * (coll == ZERO_COLL_ALL_REDUCE ? 2 : 1);
        es = (int64_t)zero__esize((int)(d->stage >= 2 ? d->grad_dtype : d->grad_accum_dtype));
        break;
    case ZERO__TASK_GATHER_MODULE:
    case ZERO__TASK_GATHER_PARAMS:
        coll = ZERO_COLL_ALL_GATHER; elems = per * (N - 1); es = (int64_t)zero__esize((int)d->param_dtype); break;
    case ZERO__TASK_GATHER_MASTER:
        coll = ZERO_COLL_ALL_GATHER; elems = per * (N - 1); es = 4; break;
    case ZERO__TASK_ALLREDUCE_F64:
        coll = ZERO_COLL_ALL_REDUCE; elems = 2 * (int64_t)t->u.f64.n * (N - 1) / N; es = 8; break;
    case ZERO__TASK_ALLGATHER_BYTES:
        coll = ZERO_COLL_ALL_GATHER; elems = t->u.all.bytes * (N - 1); es = 1; break;
    default:
        break;
    }
    if (coll < 0) return;
    ctx->traffic.calls[coll]++;
    ctx->traffic.elems[coll] += elems;
    ctx->traffic.bytes[coll] += elems * es;
}

static uint64_t zero__enqueue(zero_ctx *ctx, const zero__task *task) {
    zero__stream *s = &ctx->stream;
    uint64_t ticket;
    zero__mutex_lock(&s->mu);
    zero__count_task(ctx, task);
    while (s->enqueued - s->done >= ZERO__STREAM_CAP) zero__cond_wait(&s->cv, &s->mu);
    s->ring[s->enqueued % ZERO__STREAM_CAP] = *task;
    if (task->kind != ZERO__TASK_STOP) ctx->dev->mark(ctx, s->enqueued + 1);   /* before the worker can see it */
    ticket = ++s->enqueued;
    zero__cond_broadcast(&s->cv);
    zero__mutex_unlock(&s->mu);
    return ticket;
}
/* a task of a kind (and a module: -1 for none), its fields zeroed; the posts below fill them */
static zero__task zero__task_of(int kind, int mod) {
    zero__task t;
    memset(&t, 0, sizeof t);
    t.kind = kind;
    t.mod = mod;
    return t;
}
static uint64_t zero__post_reduce(zero_ctx *ctx, int mi, int micro, int64_t staging_off) {
    zero__task t = zero__task_of(ZERO__TASK_REDUCE, mi);
    t.u.reduce.micro = micro;
    t.u.reduce.staging_off = staging_off;
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_gather_module(zero_ctx *ctx, int mi, int refresh, void *dst) {
    zero__task t = zero__task_of(ZERO__TASK_GATHER_MODULE, mi);
    t.u.gather.refresh = refresh;
    t.u.gather.dst = dst;
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_gather_params(zero_ctx *ctx, int mi) {
    zero__task t = zero__task_of(ZERO__TASK_GATHER_PARAMS, mi);
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_gather_master(zero_ctx *ctx, int mi, float *buf) {
    zero__task t = zero__task_of(ZERO__TASK_GATHER_MASTER, mi);
    t.u.master.buf = buf;
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_allreduce_f64(zero_ctx *ctx, double *v, int n) {
    zero__task t = zero__task_of(ZERO__TASK_ALLREDUCE_F64, -1);
    t.u.f64.v = v;
    t.u.f64.n = n;
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_allgather(zero_ctx *ctx, const void *send, void *recv, int64_t bytes) {
    zero__task t = zero__task_of(ZERO__TASK_ALLGATHER_BYTES, -1);
    t.u.all.send = send;
    t.u.all.recv = recv;
    t.u.all.bytes = bytes;
    return zero__enqueue(ctx, &t);
}
static uint64_t zero__post_split(zero_ctx *ctx, int ranks_per_node) {
    zero__task t = zero__task_of(ZERO__TASK_SPLIT, -1);
    t.u.split.ranks_per_node = ranks_per_node;
    return zero__enqueue(ctx, &t);
}
/* zero_create: the comm stream's worker thread */
static zero_result zero__stream_start(zero_ctx *ctx) {
    zero__mutex_init(&ctx->stream.mu);
    zero__cond_init(&ctx->stream.cv);
    if (zero__thread_start(&ctx->stream.thread, zero__stream_main, ctx) != 0) {
        zero__mutex_destroy(&ctx->stream.mu);
        zero__cond_destroy(&ctx->stream.cv);
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    ctx->stream.started = 1;
    return ZERO_OK;
}
/* zero_destroy: the worker runs what is queued, then stops */
static void zero__stream_stop(zero_ctx *ctx) {
    if (!ctx->stream.started) return;
    {
        zero__task stop = zero__task_of(ZERO__TASK_STOP, -1);
        zero__enqueue(ctx, &stop);
    }
    zero__thread_join(ctx->stream.thread);
    zero__mutex_destroy(&ctx->stream.mu);
    zero__cond_destroy(&ctx->stream.cv);
    ctx->stream.started = 0;
}

static int zero__ticket_done(zero_ctx *ctx, uint64_t ticket) {
    int d;
    zero__mutex_lock(&ctx->stream.mu);
    d = ctx->stream.done >= ticket;
    zero__mutex_unlock(&ctx->stream.mu);
    return d;
}

/* Waits for a ticket. Never unbounded: every task is a collective with a timeout. */
/* (a collective that failed because a rank left the group says so in its message: the
   local comm's "rank N left the group before arriving", logged as RANK_LEFT) */
static zero_result zero__wait(zero_ctx *ctx, uint64_t ticket) {
    zero__stream *s = &ctx->stream;
    zero_result r;
    zero__mutex_lock(&s->mu);
    while (s->done < ticket) zero__cond_wait(&s->cv, &s->mu);
    r = s->err;
    if (r != ZERO_OK) {
        snprintf(ctx->err, sizeof ctx->err, "%s", s->err_msg);
        snprintf(zero__tls_err, sizeof zero__tls_err, "%s", s->err_msg);
    }
    zero__mutex_unlock(&s->mu);
    if (r != ZERO_OK)
        zero__logv(ctx, ZERO_LOG_ERROR,
                   r == ZERO_ERR_TIMEOUT ? ZERO_LOGITEM_COLL_TIMEOUT :
                   r == ZERO_ERR_MISMATCH ? ZERO_LOGITEM_COLL_MISMATCH :
                   strstr(ctx->err, " left the group") ? ZERO_LOGITEM_RANK_LEFT : ZERO_LOGITEM_COMM_BROKEN, ctx->err);
    return r;
}
static zero_result zero__drain(zero_ctx *ctx) {
    uint64_t t;
    zero__mutex_lock(&ctx->stream.mu);
    t = ctx->stream.enqueued;
    zero__mutex_unlock(&ctx->stream.mu);
    return zero__wait(ctx, t);
}

/* The bytes a collective sends, counted by the endpoint (zero_comm_bytes): per_peer bytes to
   each other rank, as point-to-point exchanges move them, split into the peers of this
   rank's node and the others. Only the thread running the endpoint's collectives adds. */
static void zero__coll_count(zero_ctx *ctx, zero_comm *c, int kind, int64_t per_peer, int es) {
    int64_t in = 0, out = 0, ns;
    if (ctx->zpp.on) {              /* zero_stats' per-collective counts (else zero__count_task's) */
        zero__mutex_lock(&ctx->stream.mu);
        ctx->traffic.calls[kind]++;
        ctx->traffic.bytes[kind] += per_peer * (c->size - 1);
        ctx->traffic.elems[kind] += per_peer * (c->size - 1) / es;
        zero__mutex_unlock(&ctx->stream.mu);
    }
    if (per_peer <= 0 || c->size < 2) return;
    if (c->scope == ZERO__SCOPE_NODE) in = c->size - 1;
    else if (c->scope == ZERO__SCOPE_CROSS) out = c->size - 1;
    else {
        ns = c->node_size > 0 ? c->node_size : c->size;
        in = ns - 1;
        out = c->size - ns;
    }
    if (in) __atomic_fetch_add(&c->sent_within, in * per_peer, __ATOMIC_RELAXED);
    if (out) __atomic_fetch_add(&c->sent_across, out * per_peer, __ATOMIC_RELAXED);
}
/* a collective on a node's or the cross-node endpoint is a span of its own on the comm
   track, inside its task's ("node all-gather", "cross all-to-all", ...) */
static zero_result zero__c_span(zero_ctx *ctx, zero_comm *c, int kind, double t0, zero_result r) {
    static const char *node[] = { "node all-gather", "node reduce-scatter", "node all-reduce", "node broadcast",
                                  "node barrier", "node all-to-all" };
    static const char *cross[] = { "cross all-gather", "cross reduce-scatter", "cross all-reduce", "cross broadcast",
                                   "cross barrier", "cross all-to-all" };
    if (c->scope != ZERO__SCOPE_WORLD && zero__trace_get(ctx))
        zero__trace_add(ctx, ZERO__TRACK_COMM, (c->scope == ZERO__SCOPE_NODE ? node : cross)[kind],
                        c->tag >= 0 && c->tag < ctx->num_modules ? ctx->modules[c->tag].name : NULL, t0);
    return r;
}
/* every collective zero.h issues goes through these (on any endpoint: the context's, or its
   node or cross-node one), which count its bytes */
static zero_result zero__c_all_gather(zero_ctx *ctx, zero_comm *c, const void *send, void *recv, int64_t bytes) {
    double t0 = zero__trace_t0(ctx);
    zero__coll_count(ctx, c, ZERO_COLL_ALL_GATHER, bytes, 1);
    return zero__c_span(ctx, c, ZERO_COLL_ALL_GATHER, t0, c->vt->all_gather(c, send, recv, bytes, ctx->desc.timeout_ms));
}
static zero_result zero__c_reduce_scatter(zero_ctx *ctx, zero_comm *c, const void *send, int sdt, void *recv,
                                          int rdt, int64_t count, int accumulate) {
    double t0 = zero__trace_t0(ctx);
    zero__coll_count(ctx, c, ZERO_COLL_REDUCE_SCATTER, count * (int64_t)zero__esize(sdt), (int)zero__esize(sdt));
    return zero__c_span(ctx, c, ZERO_COLL_REDUCE_SCATTER, t0,
                        c->vt->reduce_scatter(c, send, sdt, recv, rdt, count, accumulate, ctx->desc.timeout_ms));
}
static zero_result zero__c_all_to_all(zero_ctx *ctx, zero_comm *c, const void *send, void *recv, int64_t bytes) {
    double t0 = zero__trace_t0(ctx);
    zero__coll_count(ctx, c, ZERO_COLL_ALL_TO_ALL, bytes, 1);
    return zero__c_span(ctx, c, ZERO_COLL_ALL_TO_ALL, t0, c->vt->all_to_all(c, send, recv, bytes, ctx->desc.timeout_ms));
}
static zero_result zero__c_all_reduce(zero_ctx *ctx, zero_comm *c, void *buf, int dt, int64_t count) {
    zero__coll_count(ctx, c, ZERO_COLL_ALL_REDUCE, dt == ZERO__F64 ? count * 8 : 2 * (count / c->size) * (int64_t)zero__esize(dt),
                     (int)zero__esize(dt));
    return c->vt->all_reduce(c, buf, dt, count, ctx->desc.timeout_ms);
}
/* comm wrappers, run by the comm stream (the traffic was counted when the task was issued) */
static zero_result zero__all_gather(zero_ctx *ctx, const void *send, void *recv, int64_t count, int dt) {
    return zero__c_all_gather(ctx, ctx->comm, send, recv, count * (int64_t)zero__esize(dt));
}
static zero_result zero__reduce_scatter(zero_ctx *ctx, const void *send, int sdt, void *recv, int rdt,
                                        int64_t count, int accumulate) {
    return zero__c_reduce_scatter(ctx, ctx->comm, send, sdt, recv, rdt, count, accumulate);
}
static zero_result zero__all_reduce(zero_ctx *ctx, void *buf, int dt, int64_t count) {
    return zero__c_all_reduce(ctx, ctx->comm, buf, dt, count);
}

/* >>kernels: the CPU's math: optimizer loops (portable, AVX2, AVX-512), thread pool, SGEMM --
   The fused optimizer pass is one streaming loop per segment: widen the gradient,
   multiply by the unscale*clip factor, update master and moments, narrow into the
   param. Each loop is written once per instruction set and instantiated per dtype
   combination (the dtype arguments are constants where the always-inline loop is
   expanded), so no element pays for a dtype branch. The vector paths compute exactly
   the scalar ZERO_HD formulas: the same operations in the same order, no FMA, IEEE
   sqrt and division, and the same round-to-nearest-even narrowing, so every path
   gives bitwise-identical results (tests/test_cpuopt.c checks this). The path is
   picked at run time from what the CPU supports; ZERO_SIMD=scalar|avx2|avx512|neon in the
   environment caps it (tests and benchmarks compare paths with it). */

enum { ZERO__SIMD_SCALAR = 0, ZERO__SIMD_AVX2 = 1, ZERO__SIMD_AVX512 = 2, ZERO__SIMD_NEON = 3, ZERO__SIMD_NUM };
static const char *zero__simd_name[ZERO__SIMD_NUM] = { "scalar", "avx2", "avx512", "neon" };

/* 1 when x is neither infinite nor NaN, read from its bits: a compiler told
   -ffinite-math-only may fold isfinite() to 1, and a NaN gradient would then be applied */
static int zero__finite64(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

/* An includer linked with -Ofast or -ffast-math gets crtfastmath, which sets the x86
   MXCSR's flush-to-zero and denormals-are-zero bits for the whole process (and its new
   threads): subnormal gradients, moments and decayed weights would then become 0. The
   kernels (each optimizer loop, the norm's blocks, the reductions' sums) clear the two
   bits while they run and put them back. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#  define ZERO__MXCSR_FAST 0x8040u          /* FTZ (bit 15) | DAZ (bit 6) */
static unsigned zero__fpenv_enter(void) {
    unsigned c = __builtin_ia32_stmxcsr();
    if (c & ZERO__MXCSR_FAST) __builtin_ia32_ldmxcsr(c & ~ZERO__MXCSR_FAST);
    return c;
}
static void zero__fpenv_leave(unsigned c) {
    if (c & ZERO__MXCSR_FAST) __builtin_ia32_ldmxcsr(c);
}
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
/* AArch64: crtfastmath sets FPCR.FZ (bit 24; FZ16, bit 19, for halves), which flushes
   subnormal inputs and results of the scalar and the vector units alike */
#  define ZERO__FPCR_FAST 0x1080000u
static unsigned zero__fpenv_enter(void) {
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    if (c & ZERO__FPCR_FAST) {
        uint64_t n = c & ~(uint64_t)ZERO__FPCR_FAST;
        __asm__ __volatile__("msr fpcr, %0" : : "r"(n));
    }
    return (unsigned)c;
}
static void zero__fpenv_leave(unsigned c) {
    if (c & ZERO__FPCR_FAST) {
        uint64_t n = c;
        __asm__ __volatile__("msr fpcr, %0" : : "r"(n));
    }
}
#else
static unsigned zero__fpenv_enter(void) { return 0; }
static void zero__fpenv_leave(unsigned c) { (void)c; }
#endif

/* The kernel contract: elements [lo, hi) of one segment. g: gradients (adt); w: fp32
   master (the params themselves when pdt is f32); p: params (pdt), written when pdt is
   not f32; m, v: moments (m is SGD's momentum buffer, NULL without momentum). */
typedef void (*zero__opt_fn)(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v,
                             int64_t lo, int64_t hi);

ZERO__INLINE void zero__opt_scalar_t(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v,
                                     int64_t lo, int64_t hi, int opt, int adt, int pdt) {
    int64_t i;
    if (opt == ZERO_OPTIM_SGD) {
        for (i = lo; i < hi; i++) {
            zero__sgd_elem(&w[i], m ? &m[i] : NULL, zero__nf(zero__ld(g, i, adt) * k->gscale), &k->sh, k->decay);
            if (pdt != ZERO_F32) zero__st(p, i, pdt, w[i]);
        }
    } else {
        for (i = lo; i < hi; i++) {
            zero__adamw_elem(&w[i], &m[i], &v[i], zero__nf(zero__ld(g, i, adt) * k->gscale), &k->ah, k->decay);
            if (pdt != ZERO_F32) zero__st(p, i, pdt, w[i]);
        }
    }
}

/* one instantiation per (optimizer, grad dtype, param dtype) for a path named P */
#define ZERO__OPT_INSTANCES(P, ATTR)                                                                   \
    ZERO__OPT_INST(P, ATTR, adamw_f32_f32, ZERO_OPTIM_ADAMW, ZERO_F32, ZERO_F32)                        \
    ZERO__OPT_INST(P, ATTR, adamw_f32_bf16, ZERO_OPTIM_ADAMW, ZERO_F32, ZERO_BF16)                     \
    ZERO__OPT_INST(P, ATTR, adamw_f32_f16, ZERO_OPTIM_ADAMW, ZERO_F32, ZERO_F16)                       \
    ZERO__OPT_INST(P, ATTR, adamw_bf16_f32, ZERO_OPTIM_ADAMW, ZERO_BF16, ZERO_F32)                     \
    ZERO__OPT_INST(P, ATTR, adamw_bf16_bf16, ZERO_OPTIM_ADAMW, ZERO_BF16, ZERO_BF16)                   \
    ZERO__OPT_INST(P, ATTR, adamw_bf16_f16, ZERO_OPTIM_ADAMW, ZERO_BF16, ZERO_F16)                     \
    ZERO__OPT_INST(P, ATTR, adamw_f16_f32, ZERO_OPTIM_ADAMW, ZERO_F16, ZERO_F32)                       \
    ZERO__OPT_INST(P, ATTR, adamw_f16_bf16, ZERO_OPTIM_ADAMW, ZERO_F16, ZERO_BF16)                     \
    ZERO__OPT_INST(P, ATTR, adamw_f16_f16, ZERO_OPTIM_ADAMW, ZERO_F16, ZERO_F16)                       \
    ZERO__OPT_INST(P, ATTR, sgd_f32_f32, ZERO_OPTIM_SGD, ZERO_F32, ZERO_F32)                           \
    ZERO__OPT_INST(P, ATTR, sgd_f32_bf16, ZERO_OPTIM_SGD, ZERO_F32, ZERO_BF16)                         \
    ZERO__OPT_INST(P, ATTR, sgd_f32_f16, ZERO_OPTIM_SGD, ZERO_F32, ZERO_F16)                           \
    ZERO__OPT_INST(P, ATTR, sgd_bf16_f32, ZERO_OPTIM_SGD, ZERO_BF16, ZERO_F32)                         \
    ZERO__OPT_INST(P, ATTR, sgd_bf16_bf16, ZERO_OPTIM_SGD, ZERO_BF16, ZERO_BF16)                       \
    ZERO__OPT_INST(P, ATTR, sgd_bf16_f16, ZERO_OPTIM_SGD, ZERO_BF16, ZERO_F16)                         \
    ZERO__OPT_INST(P, ATTR, sgd_f16_f32, ZERO_OPTIM_SGD, ZERO_F16, ZERO_F32)                           \
    ZERO__OPT_INST(P, ATTR, sgd_f16_bf16, ZERO_OPTIM_SGD, ZERO_F16, ZERO_BF16)                         \
    ZERO__OPT_INST(P, ATTR, sgd_f16_f16, ZERO_OPTIM_SGD, ZERO_F16, ZERO_F16)
/* the table, indexed [opt == SGD][adt - 1][pdt - 1] */
#define ZERO__OPT_TABLE(P) {                                                                           \
    { { zero__opt_##P##_adamw_f32_f32, zero__opt_##P##_adamw_f32_bf16, zero__opt_##P##_adamw_f32_f16 },  \
      { zero__opt_##P##_adamw_bf16_f32, zero__opt_##P##_adamw_bf16_bf16, zero__opt_##P##_adamw_bf16_f16 },\
      { zero__opt_##P##_adamw_f16_f32, zero__opt_##P##_adamw_f16_bf16, zero__opt_##P##_adamw_f16_f16 } }, \
    { { zero__opt_##P##_sgd_f32_f32, zero__opt_##P##_sgd_f32_bf16, zero__opt_##P##_sgd_f32_f16 },        \
      { zero__opt_##P##_sgd_bf16_f32, zero__opt_##P##_sgd_bf16_bf16, zero__opt_##P##_sgd_bf16_f16 },     \
      { zero__opt_##P##_sgd_f16_f32, zero__opt_##P##_sgd_f16_bf16, zero__opt_##P##_sgd_f16_f16 } } }
#define ZERO__OPT_INST(P, ATTR, NAME, OPT, ADT, PDT)                                                   \
    ATTR static void zero__opt_##P##_##NAME(const zero__optk *k, const void *g, void *p, float *w,      \
                                            float *m, float *v, int64_t lo, int64_t hi) {              \
        unsigned fpenv = zero__fpenv_enter();                                                          \
        zero__opt_##P##_t(k, g, p, w, m, v, lo, hi, OPT, ADT, PDT);                                    \
        zero__fpenv_leave(fpenv);                                                                      \
    }
ZERO__OPT_INSTANCES(scalar, )

/* The gradient norm's sum of squares is defined blockwise, so that it can be computed
   with vectors and threads and still be one exact double, the same at every stage, rank
   count, path and thread count: each rank's slice of each module is cut into blocks of
   ZERO__NORM_BLOCK elements from the slice's start; within a block, element j adds its
   square (exact in double) into lane j % 8, in order; a block's sum is
   ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); the block sums are added in order. */
typedef double (*zero__sumsq_fn)(const void *g, int64_t n, int adt);
ZERO__INLINE void zero__sumsq_tail(const void *g, int64_t j, int64_t n, double *lanes, int adt) {
    for (; j < n; j++) {
        double x = (double)zero__ld(g, j, adt);
        lanes[j & 7] += zero__nfd(x * x);
    }
}
static double zero__sumsq_scalar(const void *g, int64_t n, int adt) {
    double lanes[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    if (adt == ZERO_F32) zero__sumsq_tail(g, 0, n, lanes, ZERO_F32);
    else if (adt == ZERO_BF16) zero__sumsq_tail(g, 0, n, lanes, ZERO_BF16);
    else zero__sumsq_tail(g, 0, n, lanes, ZERO_F16);
    return zero__lanes_sum(lanes);
}
/* four whole consecutive blocks at once, out[q] = block q's sum, each block exactly as
   above: a block's lanes are one chain of dependent adds, so the vector paths run four
   chains side by side to keep the adder busy (one chain ran at half the memory speed) */
typedef void (*zero__sumsq4_fn)(const void *g, int adt, double *out);
static void zero__sumsq4_scalar(const void *g, int adt, double *out) {
    int q;
    for (q = 0; q < 4; q++) out[q] = zero__sumsq_scalar(zero__at(ZERO__UNCONST(void *, g), (int64_t)q * ZERO__NORM_BLOCK, adt), ZERO__NORM_BLOCK, adt);
}

/* The reductions' sum (zero__sum_into, below): elements [lo, hi) of
   out (rdt) = [out +] ins[0] + ins[1] + ... (sdt), each element summed in fp32 in input
   order, the stored value added first when accumulating, narrowed once. Element i's
   result depends on element i of the inputs only, so a path may take any number of
   elements at a time and the pool may cut the range anywhere: every path and thread
   count gives the same bits. Each element is read from every input before it is
   written, so out may be one of the inputs (at the same offset). One instantiation per
   (sdt, rdt) per path, as for the optimizer loops. */
typedef void (*zero__sum_fn)(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi, int accumulate);
ZERO__INLINE void zero__sum_scalar_t(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi, int accumulate,
                                     int sdt, int rdt) {
    float acc[256];
    int64_t base, i;
    int k;
    for (base = lo; base < hi; base += 256) {
        int64_t n = hi - base < 256 ? hi - base : 256;
        for (i = 0; i < n; i++) acc[i] = zero__ld(ins[0], base + i, sdt);
        for (k = 1; k < nin; k++)
            for (i = 0; i < n; i++) acc[i] += zero__ld(ins[k], base + i, sdt);
        if (accumulate)
            for (i = 0; i < n; i++) acc[i] = zero__ld(out, base + i, rdt) + acc[i];
        for (i = 0; i < n; i++) zero__st(out, base + i, rdt, acc[i]);
    }
}
#define ZERO__SUM_INSTANCES(P, ATTR)                                                                   \
    ZERO__SUM_INST(P, ATTR, f32_f32, ZERO_F32, ZERO_F32)                                               \
    ZERO__SUM_INST(P, ATTR, f32_bf16, ZERO_F32, ZERO_BF16)                                             \
    ZERO__SUM_INST(P, ATTR, f32_f16, ZERO_F32, ZERO_F16)                                               \
    ZERO__SUM_INST(P, ATTR, bf16_f32, ZERO_BF16, ZERO_F32)                                             \
    ZERO__SUM_INST(P, ATTR, bf16_bf16, ZERO_BF16, ZERO_BF16)                                           \
    ZERO__SUM_INST(P, ATTR, bf16_f16, ZERO_BF16, ZERO_F16)                                             \
    ZERO__SUM_INST(P, ATTR, f16_f32, ZERO_F16, ZERO_F32)                                               \
    ZERO__SUM_INST(P, ATTR, f16_bf16, ZERO_F16, ZERO_BF16)                                             \
    ZERO__SUM_INST(P, ATTR, f16_f16, ZERO_F16, ZERO_F16)
/* the table, indexed [sdt - 1][rdt - 1] */
#define ZERO__SUM_TABLE(P) {                                                                           \
    { zero__sum_##P##_f32_f32, zero__sum_##P##_f32_bf16, zero__sum_##P##_f32_f16 },                      \
    { zero__sum_##P##_bf16_f32, zero__sum_##P##_bf16_bf16, zero__sum_##P##_bf16_f16 },                   \
    { zero__sum_##P##_f16_f32, zero__sum_##P##_f16_bf16, zero__sum_##P##_f16_f16 } }
#define ZERO__SUM_INST(P, ATTR, NAME, SDT, RDT)                                                        \
    ATTR static void zero__sum_##P##_##NAME(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi, \
                                            int accumulate) {                                          \
        unsigned fpenv = zero__fpenv_enter();                                                          \
        zero__sum_##P##_t(out, ins, nin, lo, hi, accumulate, SDT, RDT);                                \
        zero__fpenv_leave(fpenv);                                                                      \
    }
ZERO__SUM_INSTANCES(scalar, )

#if defined(ZERO__X86)
/* The vector arithmetic is written with operators (GNU vector extensions), not with the
   add/mul/div intrinsics: clang's intrinsics are inline functions of its headers, compiled
   under the includer's flags (-ffast-math: fusable into FMAs, divisions by a loop
   invariant turned into reciprocals) and inlined with those flags kept, while an operator
   here is compiled under ZERO__FP_PIN_BEGIN (GCC recompiles an inlined intrinsic under its
   caller's options; clang does not). Square roots: zero__vsqrt8/16 (see zero__sqrtf). */
#define ZERO__VADD(a, b) ((a) + (b))
#define ZERO__VDIV(a, b) ((a) / (b))
/* products through zero__nf8 / nf16 / nf4d / nf8d (see zero__nf): ZERO__VMUL for floats,
   ZERO__VMULD for doubles, each section defining them for its width */
#if defined(__clang__)
#  define ZERO__NF_ASM(x, c) __asm__("" : "+" c(x))
#else
#  define ZERO__NF_ASM(x, c) (void)0
#endif
/* ---- AVX2 (+F16C): 8 lanes ---- */
#define ZERO__AVX2_ATTR __attribute__((target("avx2,f16c")))
#define ZERO__AVX2_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))
ZERO__AVX2_INLINE __m256 zero__nf8(__m256 x) { ZERO__NF_ASM(x, "x"); return x; }
ZERO__AVX2_INLINE __m256d zero__nf4d(__m256d x) { ZERO__NF_ASM(x, "x"); return x; }
#define ZERO__VMUL(a, b) zero__nf8((a) * (b))
#define ZERO__VMULD(a, b) zero__nf4d((a) * (b))
/* Software prefetch ZERO__AHEAD elements ahead on every stream: the optimizer's long
   dependency chains (sqrt, two divisions) keep fewer loads in flight than a plain copy
   does, and the hardware prefetcher alone left ~8% of the bandwidth unused (bench_optim).
   Prefetching past the end of an array is harmless: a prefetch never faults. */
#define ZERO__AHEAD 512
#define ZERO__PREFETCH(ptr, i, es) _mm_prefetch((const char *)(ptr) + ((i) + ZERO__AHEAD) * (int64_t)(es), _MM_HINT_T0)

ZERO__AVX2_INLINE __m256 zero__vsqrt8(__m256 x) {
#if defined(ZERO__SQRT_ASM)
    __asm__("vsqrtps %1, %0" : "=x"(x) : "x"(x));
    return x;
#else
    return _mm256_sqrt_ps(x);
#endif
}
ZERO__AVX2_INLINE __m256 zero__avx2_ld(const void *g, int64_t i, int adt) {
    __m256i x;
    if (adt == ZERO_F32) return _mm256_loadu_ps((const float *)g + i);
    x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)g + i)));
    if (adt == ZERO_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    {   /* f16, as zero__f16_to_f32: normal, inf/NaN (payload kept), subnormal via m * 2^-24 */
        __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x8000)), 16);
        __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fff));
        __m256i e = _mm256_srli_epi32(ax, 10), sh = _mm256_slli_epi32(ax, 13);
        __m256i r = _mm256_add_epi32(sh, _mm256_set1_epi32(0x38000000));
        __m256i sub = _mm256_castps_si256(ZERO__VMUL(_mm256_cvtepi32_ps(ax), _mm256_set1_ps(5.9604644775390625e-8f)));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(sh, _mm256_set1_epi32(0x7f800000)),
                               _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x1f)));
        r = _mm256_blendv_epi8(r, sub, _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
        return _mm256_castsi256_ps(_mm256_or_si256(r, sign));
    }
}
/* narrow 8 floats to bf16 or f16 bits, exactly as zero__f32_to_bf16 / zero__f32_to_f16 */
ZERO__AVX2_INLINE void zero__avx2_st(void *p, int64_t i, int pdt, __m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m128i out;
    if (pdt == ZERO_BF16) {
        __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i rnd = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1))));
        __m256i r = _mm256_blendv_epi8(_mm256_srli_epi32(rnd, 16), _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
        out = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    } else {
        /* F16C rounds to nearest even with subnormals and overflow to inf, like the scalar
           code; only NaN differs (F16C keeps payload bits; zero.h gives sign | 0x7e00) */
        __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i qn = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
                                     _mm256_set1_epi32(0x7e00));
        __m128i qn16 = _mm_packus_epi32(_mm256_castsi256_si128(qn), _mm256_extracti128_si256(qn, 1));
        __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
        out = _mm_blendv_epi8(h, qn16, nan16);
    }
    _mm_storeu_si128((__m128i *)((uint16_t *)p + i), out);
}
ZERO__AVX2_INLINE void zero__opt_avx2_t(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v,
                                        int64_t lo, int64_t hi, int opt, int adt, int pdt) {
    int64_t i = lo;
    const __m256 gs = _mm256_set1_ps(k->gscale);
    if (opt == ZERO_OPTIM_SGD) {
        const zero__sgd_hp *h = &k->sh;
        const __m256 wd = _mm256_set1_ps(h->weight_decay), mu = _mm256_set1_ps(h->momentum);
        const __m256 omd = _mm256_set1_ps(h->one_minus_dampening), nlr = _mm256_set1_ps(h->neg_lr);
        int use_wd = k->decay && h->weight_decay != 0.0f;
        for (; i + 8 <= hi; i += 8) {
            __m256 pp, d;
            ZERO__PREFETCH(w, i, 4); ZERO__PREFETCH(g, i, adt == ZERO_F32 ? 4 : 2);
            if (m) ZERO__PREFETCH(m, i, 4);
            if (pdt != ZERO_F32) ZERO__PREFETCH(p, i, 2);
            pp = _mm256_loadu_ps(w + i);
            d = ZERO__VMUL(zero__avx2_ld(g, i, adt), gs);
            if (use_wd) d = ZERO__VADD(d, ZERO__VMUL(wd, pp));
            if (m) {
                __m256 b = h->first ? d : (__m256)ZERO__VADD(ZERO__VMUL(_mm256_loadu_ps(m + i), mu), ZERO__VMUL(omd, d));
                _mm256_storeu_ps(m + i, b);
                d = h->nesterov ? (__m256)ZERO__VADD(d, ZERO__VMUL(mu, b)) : b;
            }
            pp = ZERO__VADD(pp, ZERO__VMUL(nlr, d));
            _mm256_storeu_ps(w + i, pp);
            if (pdt != ZERO_F32) zero__avx2_st(p, i, pdt, pp);
        }
    } else {
        const zero__adamw_hp *h = &k->ah;
        const __m256 b1 = _mm256_set1_ps(h->beta1), b2 = _mm256_set1_ps(h->beta2);
        const __m256 omb1 = _mm256_set1_ps(h->one_minus_beta1), omb2 = _mm256_set1_ps(h->one_minus_beta2);
        const __m256 eps = _mm256_set1_ps(h->eps), dm = _mm256_set1_ps(h->decay_mul);
        const __m256 nss = _mm256_set1_ps(h->neg_step_size), bc2 = _mm256_set1_ps(h->bc2_sqrt);
        for (; i + 8 <= hi; i += 8) {
            __m256 gg;
            ZERO__PREFETCH(w, i, 4); ZERO__PREFETCH(m, i, 4); ZERO__PREFETCH(v, i, 4);
            ZERO__PREFETCH(g, i, adt == ZERO_F32 ? 4 : 2);
            if (pdt != ZERO_F32) ZERO__PREFETCH(p, i, 2);
            gg = ZERO__VMUL(zero__avx2_ld(g, i, adt), gs);
            __m256 pp = _mm256_loadu_ps(w + i);
            __m256 mm = ZERO__VADD(ZERO__VMUL(_mm256_loadu_ps(m + i), b1), ZERO__VMUL(omb1, gg));
            __m256 vv = ZERO__VADD(ZERO__VMUL(_mm256_loadu_ps(v + i), b2), ZERO__VMUL(ZERO__VMUL(omb2, gg), gg));
            __m256 den = ZERO__VADD(ZERO__VDIV(zero__vsqrt8(vv), bc2), eps);
            if (k->decay) pp = ZERO__VMUL(pp, dm);
            pp = ZERO__VADD(pp, ZERO__VDIV(ZERO__VMUL(nss, mm), den));
            _mm256_storeu_ps(w + i, pp);
            _mm256_storeu_ps(m + i, mm);
            _mm256_storeu_ps(v + i, vv);
            if (pdt != ZERO_F32) zero__avx2_st(p, i, pdt, pp);
        }
    }
    zero__opt_scalar_t(k, g, p, w, m, v, i, hi, opt, adt, pdt);
}
ZERO__OPT_INSTANCES(avx2, ZERO__AVX2_ATTR)

ZERO__AVX2_INLINE double zero__sumsq_avx2_t(const void *g, int64_t n, int adt) {
    double lanes[8];
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {        /* a0: lanes 0-3, a1: lanes 4-7 */
        __m256 x = zero__avx2_ld(g, j, adt);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        a0 = ZERO__VADD(a0, ZERO__VMULD(lo, lo));
        a1 = ZERO__VADD(a1, ZERO__VMULD(hi, hi));
    }
    _mm256_storeu_pd(lanes, a0);
    _mm256_storeu_pd(lanes + 4, a1);
    zero__sumsq_tail(g, j, n, lanes, adt);
    return zero__lanes_sum(lanes);
}
ZERO__AVX2_ATTR static double zero__sumsq_avx2(const void *g, int64_t n, int adt) {
    if (adt == ZERO_F32) return zero__sumsq_avx2_t(g, n, ZERO_F32);
    if (adt == ZERO_BF16) return zero__sumsq_avx2_t(g, n, ZERO_BF16);
    return zero__sumsq_avx2_t(g, n, ZERO_F16);
}
/* the next four blocks, as many bytes as one step (16 elements of each block) reads:
   gradients just written by the backward pass read back faster with it (bench_step) */
#define ZERO__SQ4_PREFETCH(g, j, adt) do {                                                             \
        const char *pf_ = (const char *)(g) + (4 * ZERO__NORM_BLOCK + (j) * 4) * (int64_t)zero__esize(adt); \
        _mm_prefetch(pf_, _MM_HINT_T0);                                                                \
        _mm_prefetch(pf_ + 64, _MM_HINT_T0);                                                           \
        if ((adt) == ZERO_F32) { _mm_prefetch(pf_ + 128, _MM_HINT_T0); _mm_prefetch(pf_ + 192, _MM_HINT_T0); } \
    } while (0)
#define ZERO__SQ4_AVX2_STEP(a0, a1, q) do {                                                            \
        __m256 x = zero__avx2_ld(g, (int64_t)(q) * ZERO__NORM_BLOCK + j, adt);                           \
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); \
        a0 = ZERO__VADD(a0, ZERO__VMULD(lo, lo));                                                      \
        a1 = ZERO__VADD(a1, ZERO__VMULD(hi, hi));                                                      \
    } while (0)
ZERO__AVX2_INLINE void zero__sumsq4_avx2_t(const void *g, int adt, double *out) {
    double lanes[8];
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    int64_t j;
    for (j = 0; j < ZERO__NORM_BLOCK; j += 8) {
        if (!(j & 8)) ZERO__SQ4_PREFETCH(g, j, adt);
        ZERO__SQ4_AVX2_STEP(a0, a1, 0);
        ZERO__SQ4_AVX2_STEP(b0, b1, 1);
        ZERO__SQ4_AVX2_STEP(c0, c1, 2);
        ZERO__SQ4_AVX2_STEP(d0, d1, 3);
    }
    _mm256_storeu_pd(lanes, a0); _mm256_storeu_pd(lanes + 4, a1); out[0] = zero__lanes_sum(lanes);
    _mm256_storeu_pd(lanes, b0); _mm256_storeu_pd(lanes + 4, b1); out[1] = zero__lanes_sum(lanes);
    _mm256_storeu_pd(lanes, c0); _mm256_storeu_pd(lanes + 4, c1); out[2] = zero__lanes_sum(lanes);
    _mm256_storeu_pd(lanes, d0); _mm256_storeu_pd(lanes + 4, d1); out[3] = zero__lanes_sum(lanes);
}
#undef ZERO__SQ4_AVX2_STEP
ZERO__AVX2_ATTR static void zero__sumsq4_avx2(const void *g, int adt, double *out) {
    if (adt == ZERO_F32) zero__sumsq4_avx2_t(g, ZERO_F32, out);
    else if (adt == ZERO_BF16) zero__sumsq4_avx2_t(g, ZERO_BF16, out);
    else zero__sumsq4_avx2_t(g, ZERO_F16, out);
}
/* the reductions' sum, 8 elements at a time: the same adds in the same order */
ZERO__AVX2_INLINE void zero__sum_avx2_t(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi,
                                        int accumulate, int sdt, int rdt) {
    int64_t i = lo;
    int k;
    for (; i + 8 <= hi; i += 8) {
        __m256 acc = zero__avx2_ld(ins[0], i, sdt);
        for (k = 1; k < nin; k++) acc = ZERO__VADD(acc, zero__avx2_ld(ins[k], i, sdt));
        if (accumulate) acc = ZERO__VADD(zero__avx2_ld(out, i, rdt), acc);
        if (rdt == ZERO_F32) _mm256_storeu_ps((float *)out + i, acc);
        else zero__avx2_st(out, i, rdt, acc);
    }
    zero__sum_scalar_t(out, ins, nin, i, hi, accumulate, sdt, rdt);
}
ZERO__SUM_INSTANCES(avx2, ZERO__AVX2_ATTR)

/* ---- AVX-512F: 16 lanes ---- */
#define ZERO__AVX512_ATTR __attribute__((target("avx512f")))
/* every lane: the masked forms of the rounding intrinsics, whose unmasked forms are macros in
   gcc's headers at -O0 that convert -1 to a mask (a -Wsign-conversion in the includer's build) */
#define ZERO__M16_ALL ((__mmask16)0xffffu)
#define ZERO__AVX512_INLINE static inline __attribute__((always_inline, target("avx512f")))
ZERO__AVX512_INLINE __m512 zero__nf16(__m512 x) { ZERO__NF_ASM(x, "v"); return x; }
ZERO__AVX512_INLINE __m512d zero__nf8d(__m512d x) { ZERO__NF_ASM(x, "v"); return x; }
#undef ZERO__VMUL
#undef ZERO__VMULD
#define ZERO__VMUL(a, b) zero__nf16((a) * (b))
#define ZERO__VMULD(a, b) zero__nf8d((a) * (b))

ZERO__AVX512_INLINE __m512 zero__vsqrt16(__m512 x) {
#if defined(ZERO__SQRT_ASM)
    __asm__("vsqrtps %1, %0" : "=v"(x) : "v"(x));
    return x;
#else
    return _mm512_sqrt_ps(x);
#endif
}
ZERO__AVX512_INLINE __m512 zero__avx512_ld(const void *g, int64_t i, int adt) {
    __m512i x;
    if (adt == ZERO_F32) return _mm512_loadu_ps((const float *)g + i);
    x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)g + i)));
    if (adt == ZERO_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    {
        __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x8000)), 16);
        __m512i ax = _mm512_and_si512(x, _mm512_set1_epi32(0x7fff));
        __m512i e = _mm512_srli_epi32(ax, 10), sh = _mm512_slli_epi32(ax, 13);
        __m512i r = _mm512_add_epi32(sh, _mm512_set1_epi32(0x38000000));
        __m512i sub = _mm512_castps_si512(ZERO__VMUL(_mm512_cvtepi32_ps(ax), _mm512_set1_ps(5.9604644775390625e-8f)));
        r = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0x1f)), r,
                                    _mm512_or_si512(sh, _mm512_set1_epi32(0x7f800000)));
        r = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), r, sub);
        return _mm512_castsi512_ps(_mm512_or_si512(r, sign));
    }
}
ZERO__AVX512_INLINE void zero__avx512_st(void *p, int64_t i, int pdt, __m512 x) {
    __m512i u = _mm512_castps_si512(x), r;
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i hi = _mm512_srli_epi32(u, 16);
    if (pdt == ZERO_BF16) {
        __m512i rnd = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1))));
        r = _mm512_mask_blend_epi32(nan, _mm512_srli_epi32(rnd, 16), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    } else {   /* see zero__avx2_st: hardware RNE, NaN replaced by sign | 0x7e00 */
        __m256i h = _mm512_mask_cvtps_ph(_mm256_setzero_si256(), ZERO__M16_ALL, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_mask_blend_epi32(nan, _mm512_cvtepu16_epi32(h),
                                    _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7e00)));
    }
    _mm256_storeu_si256((__m256i *)((uint16_t *)p + i), _mm512_cvtepi32_epi16(r));
}
ZERO__AVX512_INLINE void zero__opt_avx512_t(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v,
                                            int64_t lo, int64_t hi, int opt, int adt, int pdt) {
    int64_t i = lo;
    const __m512 gs = _mm512_set1_ps(k->gscale);
    if (opt == ZERO_OPTIM_SGD) {
        const zero__sgd_hp *h = &k->sh;
        const __m512 wd = _mm512_set1_ps(h->weight_decay), mu = _mm512_set1_ps(h->momentum);
        const __m512 omd = _mm512_set1_ps(h->one_minus_dampening), nlr = _mm512_set1_ps(h->neg_lr);
        int use_wd = k->decay && h->weight_decay != 0.0f;
        for (; i + 16 <= hi; i += 16) {
            __m512 pp, d;
            ZERO__PREFETCH(w, i, 4); ZERO__PREFETCH(g, i, adt == ZERO_F32 ? 4 : 2);
            if (m) ZERO__PREFETCH(m, i, 4);
            if (pdt != ZERO_F32) ZERO__PREFETCH(p, i, 2);
            pp = _mm512_loadu_ps(w + i);
            d = ZERO__VMUL(zero__avx512_ld(g, i, adt), gs);
            if (use_wd) d = ZERO__VADD(d, ZERO__VMUL(wd, pp));
            if (m) {
                __m512 b = h->first ? d : (__m512)ZERO__VADD(ZERO__VMUL(_mm512_loadu_ps(m + i), mu), ZERO__VMUL(omd, d));
                _mm512_storeu_ps(m + i, b);
                d = h->nesterov ? (__m512)ZERO__VADD(d, ZERO__VMUL(mu, b)) : b;
            }
            pp = ZERO__VADD(pp, ZERO__VMUL(nlr, d));
            _mm512_storeu_ps(w + i, pp);
            if (pdt != ZERO_F32) zero__avx512_st(p, i, pdt, pp);
        }
    } else {
        const zero__adamw_hp *h = &k->ah;
        const __m512 b1 = _mm512_set1_ps(h->beta1), b2 = _mm512_set1_ps(h->beta2);
        const __m512 omb1 = _mm512_set1_ps(h->one_minus_beta1), omb2 = _mm512_set1_ps(h->one_minus_beta2);
        const __m512 eps = _mm512_set1_ps(h->eps), dm = _mm512_set1_ps(h->decay_mul);
        const __m512 nss = _mm512_set1_ps(h->neg_step_size), bc2 = _mm512_set1_ps(h->bc2_sqrt);
        for (; i + 16 <= hi; i += 16) {
            __m512 gg;
            ZERO__PREFETCH(w, i, 4); ZERO__PREFETCH(m, i, 4); ZERO__PREFETCH(v, i, 4);
            ZERO__PREFETCH(g, i, adt == ZERO_F32 ? 4 : 2);
            if (pdt != ZERO_F32) ZERO__PREFETCH(p, i, 2);
            gg = ZERO__VMUL(zero__avx512_ld(g, i, adt), gs);
            __m512 pp = _mm512_loadu_ps(w + i);
            __m512 mm = ZERO__VADD(ZERO__VMUL(_mm512_loadu_ps(m + i), b1), ZERO__VMUL(omb1, gg));
            __m512 vv = ZERO__VADD(ZERO__VMUL(_mm512_loadu_ps(v + i), b2), ZERO__VMUL(ZERO__VMUL(omb2, gg), gg));
            __m512 den = ZERO__VADD(ZERO__VDIV(zero__vsqrt16(vv), bc2), eps);
            if (k->decay) pp = ZERO__VMUL(pp, dm);
            pp = ZERO__VADD(pp, ZERO__VDIV(ZERO__VMUL(nss, mm), den));
            _mm512_storeu_ps(w + i, pp);
            _mm512_storeu_ps(m + i, mm);
            _mm512_storeu_ps(v + i, vv);
            if (pdt != ZERO_F32) zero__avx512_st(p, i, pdt, pp);
        }
    }
    zero__opt_scalar_t(k, g, p, w, m, v, i, hi, opt, adt, pdt);
}
ZERO__OPT_INSTANCES(avx512, ZERO__AVX512_ATTR)

ZERO__AVX512_INLINE double zero__sumsq_avx512_t(const void *g, int64_t n, int adt) {
    double lanes[8];
    __m512d acc = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {      /* elements j..j+7, then j+8..j+15, into lanes 0-7 */
        __m512 x = zero__avx512_ld(g, j, adt);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
        acc = ZERO__VADD(acc, ZERO__VMULD(lo, lo));
        acc = ZERO__VADD(acc, ZERO__VMULD(hi, hi));
    }
    _mm512_storeu_pd(lanes, acc);
    zero__sumsq_tail(g, j, n, lanes, adt);
    return zero__lanes_sum(lanes);
}
ZERO__AVX512_ATTR static double zero__sumsq_avx512(const void *g, int64_t n, int adt) {
    if (adt == ZERO_F32) return zero__sumsq_avx512_t(g, n, ZERO_F32);
    if (adt == ZERO_BF16) return zero__sumsq_avx512_t(g, n, ZERO_BF16);
    return zero__sumsq_avx512_t(g, n, ZERO_F16);
}
#define ZERO__SQ4_AVX512_STEP(acc, q) do {                                                              \
        __m512 x = zero__avx512_ld(g, (int64_t)(q) * ZERO__NORM_BLOCK + j, adt);                         \
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));                                       \
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));  \
        acc = ZERO__VADD(acc, ZERO__VMULD(lo, lo));                                                    \
        acc = ZERO__VADD(acc, ZERO__VMULD(hi, hi));                                                    \
    } while (0)
ZERO__AVX512_INLINE void zero__sumsq4_avx512_t(const void *g, int adt, double *out) {
    double lanes[8];
    __m512d a = _mm512_setzero_pd(), b = a, c = a, d = a;
    int64_t j;
    for (j = 0; j < ZERO__NORM_BLOCK; j += 16) {
        ZERO__SQ4_PREFETCH(g, j, adt);
        ZERO__SQ4_AVX512_STEP(a, 0);
        ZERO__SQ4_AVX512_STEP(b, 1);
        ZERO__SQ4_AVX512_STEP(c, 2);
        ZERO__SQ4_AVX512_STEP(d, 3);
    }
    _mm512_storeu_pd(lanes, a); out[0] = zero__lanes_sum(lanes);
    _mm512_storeu_pd(lanes, b); out[1] = zero__lanes_sum(lanes);
    _mm512_storeu_pd(lanes, c); out[2] = zero__lanes_sum(lanes);
    _mm512_storeu_pd(lanes, d); out[3] = zero__lanes_sum(lanes);
}
#undef ZERO__SQ4_AVX512_STEP
ZERO__AVX512_ATTR static void zero__sumsq4_avx512(const void *g, int adt, double *out) {
    if (adt == ZERO_F32) zero__sumsq4_avx512_t(g, ZERO_F32, out);
    else if (adt == ZERO_BF16) zero__sumsq4_avx512_t(g, ZERO_BF16, out);
    else zero__sumsq4_avx512_t(g, ZERO_F16, out);
}
ZERO__AVX512_INLINE void zero__sum_avx512_t(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi,
                                            int accumulate, int sdt, int rdt) {
    int64_t i = lo;
    int k;
    for (; i + 16 <= hi; i += 16) {
        __m512 acc = zero__avx512_ld(ins[0], i, sdt);
        for (k = 1; k < nin; k++) acc = ZERO__VADD(acc, zero__avx512_ld(ins[k], i, sdt));
        if (accumulate) acc = ZERO__VADD(zero__avx512_ld(out, i, rdt), acc);
        if (rdt == ZERO_F32) _mm512_storeu_ps((float *)out + i, acc);
        else zero__avx512_st(out, i, rdt, acc);
    }
    zero__sum_scalar_t(out, ins, nin, i, hi, accumulate, sdt, rdt);
}
ZERO__SUM_INSTANCES(avx512, ZERO__AVX512_ATTR)
#undef ZERO__VMUL
#undef ZERO__VMULD
#endif /* ZERO__X86 */
#if defined(ZERO__NEON)
/* ---- NEON: 4 lanes. The arithmetic by operators (GNU vector extensions on the NEON types),
   under ZERO__FP_PIN as the x86 paths' (no FMA: fmla only where the scalar formula would be
   one, and it never is); square roots by vsqrtq_f32 (IEEE); the dtype conversions in
   integers, exactly as zero__ld / zero__st. ---- */
#if !defined(ZERO__X86)
#  define ZERO__VADD(a, b) ((a) + (b))
#  define ZERO__VDIV(a, b) ((a) / (b))
#endif
#define ZERO__VMUL(a, b) ((a) * (b))
#define ZERO__VMULD(a, b) ((a) * (b))
#define ZERO__NPF(ptr, i, es) __builtin_prefetch((const char *)(ptr) + ((i) + 512) * (int64_t)(es))
ZERO__INLINE float32x4_t zero__neon_ld(const void *g, int64_t i, int adt) {
    uint32x4_t x;
    if (adt == ZERO_F32) return vld1q_f32((const float *)g + i);
    x = vmovl_u16(vld1_u16((const uint16_t *)g + i));
    if (adt == ZERO_BF16) return vreinterpretq_f32_u32(vshlq_n_u32(x, 16));
    {   /* f16, as zero__f16_to_f32: normal, inf/NaN (payload kept), subnormal via m * 2^-24 */
        uint32x4_t sign = vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x8000)), 16);
        uint32x4_t ax = vandq_u32(x, vdupq_n_u32(0x7fff));
        uint32x4_t e = vshrq_n_u32(ax, 10), sh = vshlq_n_u32(ax, 13);
        uint32x4_t r = vaddq_u32(sh, vdupq_n_u32(0x38000000));
        uint32x4_t sub = vreinterpretq_u32_f32(ZERO__VMUL(vcvtq_f32_u32(ax), vdupq_n_f32(5.9604644775390625e-8f)));
        r = vbslq_u32(vceqq_u32(e, vdupq_n_u32(0x1f)), vorrq_u32(sh, vdupq_n_u32(0x7f800000)), r);
        r = vbslq_u32(vceqq_u32(e, vdupq_n_u32(0)), sub, r);
        return vreinterpretq_f32_u32(vorrq_u32(r, sign));
    }
}
/* narrow 4 floats to bf16 or f16 bits, exactly as zero__f32_to_bf16 / zero__f32_to_f16 */
ZERO__INLINE void zero__neon_st(void *p, int64_t i, int pdt, float32x4_t x) {
    uint32x4_t u = vreinterpretq_u32_f32(x), ax = vandq_u32(u, vdupq_n_u32(0x7fffffff));
    uint32x4_t nan = vcgtq_u32(ax, vdupq_n_u32(0x7f800000)), r;
    if (pdt == ZERO_BF16) {
        uint32x4_t hi = vshrq_n_u32(u, 16);
        uint32x4_t rnd = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), vandq_u32(hi, vdupq_n_u32(1))));
        r = vbslq_u32(nan, vorrq_u32(hi, vdupq_n_u32(0x40)), vshrq_n_u32(rnd, 16));
    } else {
        uint32x4_t sign = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x8000));
        uint32x4_t odd = vandq_u32(vshrq_n_u32(ax, 13), vdupq_n_u32(1));
        uint32x4_t nrm = vshrq_n_u32(vaddq_u32(vaddq_u32(ax, vdupq_n_u32(0xc8000fffu)), odd), 13);
        /* subnormal or zero: the FPU rounds ax + 0.5 (see zero__f32_to_f16) */
        uint32x4_t sub = vsubq_u32(vreinterpretq_u32_f32(ZERO__VADD(vreinterpretq_f32_u32(ax), vdupq_n_f32(0.5f))),
                                   vdupq_n_u32(0x3f000000));
        r = vbslq_u32(vcgeq_u32(ax, vdupq_n_u32(0x38800000)), nrm, sub);
        r = vbslq_u32(vcgeq_u32(ax, vdupq_n_u32(0x477ff000)), vdupq_n_u32(0x7c00), r);
        r = vbslq_u32(nan, vdupq_n_u32(0x7e00), r);
        r = vorrq_u32(r, sign);
    }
    vst1_u16((uint16_t *)p + i, vmovn_u32(r));
}
ZERO__INLINE void zero__opt_neon_t(const zero__optk *k, const void *g, void *p, float *w, float *m, float *v,
                                   int64_t lo, int64_t hi, int opt, int adt, int pdt) {
    int64_t i = lo;
    const float32x4_t gs = vdupq_n_f32(k->gscale);
    if (opt == ZERO_OPTIM_SGD) {
        const zero__sgd_hp *h = &k->sh;
        const float32x4_t wd = vdupq_n_f32(h->weight_decay), mu = vdupq_n_f32(h->momentum);
        const float32x4_t omd = vdupq_n_f32(h->one_minus_dampening), nlr = vdupq_n_f32(h->neg_lr);
        int use_wd = k->decay && h->weight_decay != 0.0f;
        for (; i + 4 <= hi; i += 4) {
            float32x4_t pp, d;
            ZERO__NPF(w, i, 4); ZERO__NPF(g, i, adt == ZERO_F32 ? 4 : 2);
            if (m) ZERO__NPF(m, i, 4);
            pp = vld1q_f32(w + i);
            d = ZERO__VMUL(zero__neon_ld(g, i, adt), gs);
            if (use_wd) d = ZERO__VADD(d, ZERO__VMUL(wd, pp));
            if (m) {
                float32x4_t b = h->first ? d : ZERO__VADD(ZERO__VMUL(vld1q_f32(m + i), mu), ZERO__VMUL(omd, d));
                vst1q_f32(m + i, b);
                d = h->nesterov ? ZERO__VADD(d, ZERO__VMUL(mu, b)) : b;
            }
            pp = ZERO__VADD(pp, ZERO__VMUL(nlr, d));
            vst1q_f32(w + i, pp);
            if (pdt != ZERO_F32) zero__neon_st(p, i, pdt, pp);
        }
    } else {
        const zero__adamw_hp *h = &k->ah;
        const float32x4_t b1 = vdupq_n_f32(h->beta1), b2 = vdupq_n_f32(h->beta2);
        const float32x4_t omb1 = vdupq_n_f32(h->one_minus_beta1), omb2 = vdupq_n_f32(h->one_minus_beta2);
        const float32x4_t eps = vdupq_n_f32(h->eps), dm = vdupq_n_f32(h->decay_mul);
        const float32x4_t nss = vdupq_n_f32(h->neg_step_size), bc2 = vdupq_n_f32(h->bc2_sqrt);
        for (; i + 4 <= hi; i += 4) {
            float32x4_t gg, pp, mm, vv, den;
            ZERO__NPF(w, i, 4); ZERO__NPF(m, i, 4); ZERO__NPF(v, i, 4);
            ZERO__NPF(g, i, adt == ZERO_F32 ? 4 : 2);
            gg = ZERO__VMUL(zero__neon_ld(g, i, adt), gs);
            pp = vld1q_f32(w + i);
            mm = ZERO__VADD(ZERO__VMUL(vld1q_f32(m + i), b1), ZERO__VMUL(omb1, gg));
            vv = ZERO__VADD(ZERO__VMUL(vld1q_f32(v + i), b2), ZERO__VMUL(ZERO__VMUL(omb2, gg), gg));
            den = ZERO__VADD(ZERO__VDIV(vsqrtq_f32(vv), bc2), eps);
            if (k->decay) pp = ZERO__VMUL(pp, dm);
            pp = ZERO__VADD(pp, ZERO__VDIV(ZERO__VMUL(nss, mm), den));
            vst1q_f32(w + i, pp);
            vst1q_f32(m + i, mm);
            vst1q_f32(v + i, vv);
            if (pdt != ZERO_F32) zero__neon_st(p, i, pdt, pp);
        }
    }
    zero__opt_scalar_t(k, g, p, w, m, v, i, hi, opt, adt, pdt);
}
ZERO__OPT_INSTANCES(neon, )

/* the norm's lanes j % 8 as four pairs of doubles: each lane adds its squares in order */
ZERO__INLINE double zero__sumsq_neon_t(const void *g, int64_t n, int adt) {
    double lanes[8];
    float64x2_t a0 = vdupq_n_f64(0.0), a1 = a0, a2 = a0, a3 = a0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        float32x4_t x = zero__neon_ld(g, j, adt), y = zero__neon_ld(g, j + 4, adt);
        float64x2_t x0 = vcvt_f64_f32(vget_low_f32(x)), x1 = vcvt_high_f64_f32(x);
        float64x2_t y0 = vcvt_f64_f32(vget_low_f32(y)), y1 = vcvt_high_f64_f32(y);
        a0 = ZERO__VADD(a0, ZERO__VMULD(x0, x0));
        a1 = ZERO__VADD(a1, ZERO__VMULD(x1, x1));
        a2 = ZERO__VADD(a2, ZERO__VMULD(y0, y0));
        a3 = ZERO__VADD(a3, ZERO__VMULD(y1, y1));
    }
    vst1q_f64(lanes, a0); vst1q_f64(lanes + 2, a1); vst1q_f64(lanes + 4, a2); vst1q_f64(lanes + 6, a3);
    zero__sumsq_tail(g, j, n, lanes, adt);
    return zero__lanes_sum(lanes);
}
static double zero__sumsq_neon(const void *g, int64_t n, int adt) {     /* (callers set the FP env) */
    if (adt == ZERO_F32) return zero__sumsq_neon_t(g, n, ZERO_F32);
    if (adt == ZERO_BF16) return zero__sumsq_neon_t(g, n, ZERO_BF16);
    return zero__sumsq_neon_t(g, n, ZERO_F16);
}
/* four whole blocks side by side (as zero__sumsq4_avx2): block q's lanes in acc[q][0..3] */
ZERO__INLINE void zero__sumsq4_neon_t(const void *g, int adt, double *out) {
    float64x2_t acc[4][4];
    double lanes[8];
    int64_t j;
    int q, k;
    for (q = 0; q < 4; q++)
        for (k = 0; k < 4; k++) acc[q][k] = vdupq_n_f64(0.0);
    for (j = 0; j < ZERO__NORM_BLOCK; j += 8)
        for (q = 0; q < 4; q++) {
            float32x4_t x = zero__neon_ld(g, (int64_t)q * ZERO__NORM_BLOCK + j, adt);
            float32x4_t y = zero__neon_ld(g, (int64_t)q * ZERO__NORM_BLOCK + j + 4, adt);
            float64x2_t x0 = vcvt_f64_f32(vget_low_f32(x)), x1 = vcvt_high_f64_f32(x);
            float64x2_t y0 = vcvt_f64_f32(vget_low_f32(y)), y1 = vcvt_high_f64_f32(y);
            acc[q][0] = ZERO__VADD(acc[q][0], ZERO__VMULD(x0, x0));
            acc[q][1] = ZERO__VADD(acc[q][1], ZERO__VMULD(x1, x1));
            acc[q][2] = ZERO__VADD(acc[q][2], ZERO__VMULD(y0, y0));
            acc[q][3] = ZERO__VADD(acc[q][3], ZERO__VMULD(y1, y1));
        }
    for (q = 0; q < 4; q++) {
        for (k = 0; k < 4; k++) vst1q_f64(lanes + 2 * k, acc[q][k]);
        out[q] = zero__lanes_sum(lanes);
    }
}
static void zero__sumsq4_neon(const void *g, int adt, double *out) {
    if (adt == ZERO_F32) zero__sumsq4_neon_t(g, ZERO_F32, out);
    else if (adt == ZERO_BF16) zero__sumsq4_neon_t(g, ZERO_BF16, out);
    else zero__sumsq4_neon_t(g, ZERO_F16, out);
}
/* the reductions' sum, 4 elements at a time: the same adds in the same order */
ZERO__INLINE void zero__sum_neon_t(void *out, const void *const *ins, int nin, int64_t lo, int64_t hi, int accumulate,
                                   int sdt, int rdt) {
    int64_t i = lo;
    int k;
    for (; i + 4 <= hi; i += 4) {
        float32x4_t acc = zero__neon_ld(ins[0], i, sdt);
        for (k = 1; k < nin; k++) acc = ZERO__VADD(acc, zero__neon_ld(ins[k], i, sdt));
        if (accumulate) acc = ZERO__VADD(zero__neon_ld(out, i, rdt), acc);
        if (rdt == ZERO_F32) vst1q_f32((float *)out + i, acc);
        else zero__neon_st(out, i, rdt, acc);
    }
    zero__sum_scalar_t(out, ins, nin, i, hi, accumulate, sdt, rdt);
}
ZERO__SUM_INSTANCES(neon, )
#undef ZERO__NPF
#undef ZERO__VMUL
#undef ZERO__VMULD
#endif /* ZERO__NEON */
#undef ZERO__OPT_INST
#undef ZERO__SUM_INST

static int zero__simd_supported(int level) {
    if (level == ZERO__SIMD_SCALAR) return 1;
#if defined(ZERO__X86)
    __builtin_cpu_init();
    if (level == ZERO__SIMD_AVX2) {    /* F16C: CPUID.1:ECX bit 29 (clang's builtin does not know "f16c") */
        unsigned a, b, c, d;
        return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
    }
    if (level == ZERO__SIMD_AVX512) return __builtin_cpu_supports("avx512f");
#endif
#if defined(ZERO__NEON)
    if (level == ZERO__SIMD_NEON) return 1;
#endif
    return 0;
}
/* the best supported path, capped by ZERO_SIMD=scalar|avx2|avx512|neon (neon: AArch64's only) */
static int zero__simd_pick(void) {
    const char *e = getenv("ZERO_SIMD");
    int cap = ZERO__SIMD_NUM - 1, l;
    if (e) for (l = 0; l < ZERO__SIMD_NUM; l++) if (strcmp(e, zero__simd_name[l]) == 0) cap = l;
    for (l = cap; l > 0; l--) if (zero__simd_supported(l)) return l;
    return ZERO__SIMD_SCALAR;
}
static zero__sumsq_fn zero__sumsq_kernel(int level) {
#if defined(ZERO__X86)
    if (level == ZERO__SIMD_AVX512) return zero__sumsq_avx512;
    if (level == ZERO__SIMD_AVX2) return zero__sumsq_avx2;
#endif
#if defined(ZERO__NEON)
    if (level == ZERO__SIMD_NEON) return zero__sumsq_neon;
#endif
    (void)level;
    return zero__sumsq_scalar;
}
static zero__sumsq4_fn zero__sumsq4_kernel(int level) {
#if defined(ZERO__X86)
    if (level == ZERO__SIMD_AVX512) return zero__sumsq4_avx512;
    if (level == ZERO__SIMD_AVX2) return zero__sumsq4_avx2;
#endif
#if defined(ZERO__NEON)
    if (level == ZERO__SIMD_NEON) return zero__sumsq4_neon;
#endif
    (void)level;
    return zero__sumsq4_scalar;
}
/* NULL for a dtype outside f32 / bf16 / f16 */
static zero__sum_fn zero__sum_kernel(int level, int sdt, int rdt) {
    static const zero__sum_fn scalar[3][3] = ZERO__SUM_TABLE(scalar);
#if defined(ZERO__X86)
    static const zero__sum_fn avx2[3][3] = ZERO__SUM_TABLE(avx2);
    static const zero__sum_fn avx512[3][3] = ZERO__SUM_TABLE(avx512);
#endif
    if (sdt < ZERO_F32 || sdt > ZERO_F16 || rdt < ZERO_F32 || rdt > ZERO_F16) return NULL;
#if defined(ZERO__X86)
    if (level == ZERO__SIMD_AVX512) return avx512[sdt - 1][rdt - 1];
    if (level == ZERO__SIMD_AVX2) return avx2[sdt - 1][rdt - 1];
#endif
#if defined(ZERO__NEON)
    if (level == ZERO__SIMD_NEON) {
        static const zero__sum_fn neon[3][3] = ZERO__SUM_TABLE(neon);
        return neon[sdt - 1][rdt - 1];
    }
#endif
    (void)level;
    return scalar[sdt - 1][rdt - 1];
}
static zero__opt_fn zero__opt_kernel(int level, int opt, int adt, int pdt) {
    static const zero__opt_fn scalar[2][3][3] = ZERO__OPT_TABLE(scalar);
#if defined(ZERO__X86)
    static const zero__opt_fn avx2[2][3][3] = ZERO__OPT_TABLE(avx2);
    static const zero__opt_fn avx512[2][3][3] = ZERO__OPT_TABLE(avx512);
    if (level == ZERO__SIMD_AVX512) return avx512[opt == ZERO_OPTIM_SGD][adt - 1][pdt - 1];
    if (level == ZERO__SIMD_AVX2) return avx2[opt == ZERO_OPTIM_SGD][adt - 1][pdt - 1];
#endif
#if defined(ZERO__NEON)
    if (level == ZERO__SIMD_NEON) {
        static const zero__opt_fn neon[2][3][3] = ZERO__OPT_TABLE(neon);
        return neon[opt == ZERO_OPTIM_SGD][adt - 1][pdt - 1];
    }
#endif
    (void)level;
    return scalar[opt == ZERO_OPTIM_SGD][adt - 1][pdt - 1];
}

/* ---- the optimizer thread pool ----
   cpu_threads - 1 workers, started at zero_build and parked on a condition variable;
   zero__pool_run wakes them with a new generation number, runs part 0 on the caller
   and waits until every part is done. Nothing is created or freed per step.
   The pool is the caller's threads, idle outside zero_step on the CPU device; the comm
   stream borrows it for a reduction's sum (zero__sum_into_k), so a run may come from
   two threads at once: the one that finds the pool busy does all its parts itself.
   Every job run on the pool gives the same bits at any part count, so that only
   changes how fast it goes. */
typedef void (*zero__pool_fn)(void *arg, int part, int nparts);
typedef struct zero__pool zero__pool;
typedef struct zero__worker { zero__pool *pool; int part; zero__thread thread; } zero__worker;
struct zero__pool {
    zero__mutex mu;
    zero__cond work, done;
    zero__worker *workers;
    int nworkers, started, stop, pending;
    int busy;                       /* a run is in progress (on another thread, maybe) */
    uint64_t gen;
    zero__pool_fn fn;
    void *arg;
};

static void *zero__pool_main(void *arg) {
    zero__worker *me = (zero__worker *)arg;
    zero__pool *pl = me->pool;
    uint64_t seen = 0;
    zero__mutex_lock(&pl->mu);
    for (;;) {
        zero__pool_fn fn;
        void *a;
        int n;
        while (pl->gen == seen && !pl->stop) zero__cond_wait(&pl->work, &pl->mu);
        if (pl->stop) break;
        seen = pl->gen;
        fn = pl->fn;
        a = pl->arg;
        n = pl->nworkers + 1;
        zero__mutex_unlock(&pl->mu);
        fn(a, me->part, n);
        zero__mutex_lock(&pl->mu);
        if (--pl->pending == 0) zero__cond_signal(&pl->done);
    }
    zero__mutex_unlock(&pl->mu);
    return NULL;
}

static void zero__pool_destroy(zero__pool *pl, const zero_allocator *a) {
    int i;
    if (!pl->started) return;
    zero__mutex_lock(&pl->mu);
    pl->stop = 1;
    zero__cond_broadcast(&pl->work);
    zero__mutex_unlock(&pl->mu);
    for (i = 0; i < pl->nworkers; i++) zero__thread_join(pl->workers[i].thread);
    zero__mutex_destroy(&pl->mu);
    zero__cond_destroy(&pl->work);
    zero__cond_destroy(&pl->done);
    zero__raw_free(a, pl->workers);
    memset(pl, 0, sizeof *pl);
}

/* 0 on success; on failure everything started is stopped again */
static int zero__pool_init(zero__pool *pl, int threads, const zero_allocator *a) {
    int i;
    memset(pl, 0, sizeof *pl);
    zero__mutex_init(&pl->mu);
    zero__cond_init(&pl->work);
    zero__cond_init(&pl->done);
    pl->started = 1;
    if (threads <= 1) return 0;
    pl->workers = (zero__worker *)zero__raw_alloc(a, sizeof(zero__worker) * (size_t)(threads - 1));
    if (!pl->workers) { zero__pool_destroy(pl, a); return -1; }
    for (i = 0; i < threads - 1; i++) {
        pl->workers[i].pool = pl;
        pl->workers[i].part = i + 1;
        if (zero__thread_start(&pl->workers[i].thread, zero__pool_main, &pl->workers[i]) != 0) {
            zero__pool_destroy(pl, a);   /* joins the i started so far */
            return -1;
        }
        pl->nworkers = i + 1;
    }
    return 0;
}

static struct zero__pool *zero__pool_create(int threads, const zero_allocator *a) {
    zero__pool *pl = (zero__pool *)zero__raw_alloc(a, sizeof *pl);
    if (pl && zero__pool_init(pl, threads, a) != 0) { zero__raw_free(a, pl); pl = NULL; }
    return pl;
}
static void zero__pool_free(zero__pool *pl, const zero_allocator *a) {
    if (!pl) return;
    zero__pool_destroy(pl, a);
    zero__raw_free(a, pl);
}

/* runs fn(arg, part, nparts) for every part, the caller taking part 0 */
static void zero__pool_run(zero__pool *pl, zero__pool_fn fn, void *arg, int serial) {
    if (!pl || pl->nworkers == 0 || serial) { fn(arg, 0, 1); return; }
    zero__mutex_lock(&pl->mu);
    if (pl->busy) { zero__mutex_unlock(&pl->mu); fn(arg, 0, 1); return; }
    pl->busy = 1;
    pl->fn = fn;
    pl->arg = arg;
    pl->pending = pl->nworkers;
    pl->gen++;
    zero__cond_broadcast(&pl->work);
    zero__mutex_unlock(&pl->mu);
    fn(arg, 0, pl->nworkers + 1);
    zero__mutex_lock(&pl->mu);
    while (pl->pending > 0) zero__cond_wait(&pl->done, &pl->mu);
    pl->busy = 0;
    zero__mutex_unlock(&pl->mu);
}

/* Part `part` of nparts of [0, total): contiguous, boundaries on multiples of 64
   elements (whole cache lines for every dtype) */
static void zero__chunk(int64_t total, int part, int nparts, int64_t *lo, int64_t *hi) {
    int64_t blocks = (total + 63) / 64;
    *lo = blocks * part / nparts * 64;
    *hi = blocks * (part + 1) / nparts * 64;
    if (*lo > total) *lo = total;
    if (*hi > total) *hi = total;
}

/* int8 block quantization on the CPU: the reference of zero__k_quantize_i8 and
   zero__k_dequantize_i8 (the element math and the NaN / inf rules: zero__q8_* in the shared
   section). x has n elements in blocks of `block` (>= 1); the last block may be short. */
static inline void zero__quantize_i8(int8_t *q, float *scales, const void *x, int xdt, int64_t n, int block) {
    int64_t lo, i;
    for (lo = 0; lo < n; lo += block) {
        int64_t hi = n - lo < block ? n : lo + block;
        float m = 0.0f, s;
        for (i = lo; i < hi; i++) m = zero__q8_absmax(m, zero__ld(x, i, xdt));
        scales[lo / block] = s = zero__q8_scale(m);
        for (i = lo; i < hi; i++) q[i] = zero__q8(zero__ld(x, i, xdt), s);
    }
}
static inline void zero__dequantize_i8(void *x, int xdt, const int8_t *q, const float *scales, int64_t n, int block) {
    int64_t i;
    for (i = 0; i < n; i++) zero__st(x, i, xdt, zero__dq8(q[i], scales[i / block]));
}

/* out[i] = [out[i] +] sum_k in_k[i], in fp32, ranks in order (the kernels above
   zero__sum_scalar_t: no dtype branch per element), cut into one contiguous part per
   pool thread (pool may be NULL: the calling thread alone). out may alias one input. */
typedef struct zero__sum_job {
    zero__sum_fn fn;
    void *out;
    const void *const *ins;
    int nin, accumulate;
    int64_t count;
} zero__sum_job;
static void zero__sum_part(void *arg, int part, int nparts) {
    const zero__sum_job *j = (const zero__sum_job *)arg;
    int64_t lo, hi;
    zero__chunk(j->count, part, nparts, &lo, &hi);
    if (lo < hi) j->fn(j->out, j->ins, j->nin, lo, hi, j->accumulate);
}
static void zero__sum_into_k(zero__pool *pool, int simd, void *out, int rdt, const void *const *ins, int nin, int sdt,
                             int64_t count, int accumulate) {
    zero__sum_job job;
    if (count <= 0 || nin < 1) return;
    job.fn = zero__sum_kernel(simd, sdt, rdt);
    if (!job.fn) return;                /* not a float dtype: the callers never pass one */
    job.out = out; job.ins = ins; job.nin = nin; job.accumulate = accumulate; job.count = count;
    /* below ~64K elements read waking the pool costs more than it saves */
    zero__pool_run(pool, zero__sum_part, &job, count * (nin + accumulate) < 65536);
}
/* the same, on the calling thread, the path from ZERO_SIMD and the CPU (the MPI comm's
   sums and a local comm endpoint that no context uses) */
static void zero__sum_into(void *out, int rdt, const void *const *ins, int nin, int sdt,
                           int64_t count, int accumulate) {
    zero__sum_into_k(NULL, zero__simd_pick(), out, rdt, ins, nin, sdt, count, accumulate);
}
/* A reduction that also takes the gradient norm's blocks of what it wrote, and may copy
   it out: out as zero__sum_into_k; unless blk is NULL, blk[b] = the sum of squares of
   out's block b (blocks of ZERO__NORM_BLOCK elements from out's start, each summed by the
   norm's own kernels, so the same double as zero__norm_part's); then out's elements are
   copied to each of copies[0..ncopies) (the local comm's all-reduce: the sum goes
   straight to every rank). Tile by tile: a tile of four blocks is summed, then read back
   from the cache for the norm and the copies, which cost no pass over memory of their
   own. One input reduced into itself (a one-rank reduce-scatter in place) is not
   rewritten: only its blocks are taken. */
#define ZERO__SQ_TILE (4 * ZERO__NORM_BLOCK)
typedef struct zero__sum_norm_job {
    zero__sum_job s;
    int rdt, sum, ncopies;
    zero__sumsq_fn fn;
    zero__sumsq4_fn fn4;
    double *blk;
    void *const *copies;
} zero__sum_norm_job;
static void zero__sum_norm_part(void *arg, int part, int nparts) {
    const zero__sum_norm_job *j = (const zero__sum_norm_job *)arg;
    int64_t tiles = (j->s.count + ZERO__SQ_TILE - 1) / ZERO__SQ_TILE, t, b;
    unsigned fpenv = zero__fpenv_enter();
    for (t = tiles * part / nparts; t < tiles * (part + 1) / nparts; t++) {
        int64_t lo = t * ZERO__SQ_TILE, hi = lo + ZERO__SQ_TILE < j->s.count ? lo + ZERO__SQ_TILE : j->s.count;
        int k;
        if (j->sum) j->s.fn(j->s.out, j->s.ins, j->s.nin, lo, hi, j->s.accumulate);
        if (j->blk && hi - lo == ZERO__SQ_TILE)
            j->fn4(zero__at(j->s.out, lo, j->rdt), j->rdt, &j->blk[lo / ZERO__NORM_BLOCK]);
        else if (j->blk)
            for (b = lo; b < hi; b += ZERO__NORM_BLOCK)
                j->blk[b / ZERO__NORM_BLOCK] = j->fn(zero__at(j->s.out, b, j->rdt),
                                                     hi - b < ZERO__NORM_BLOCK ? hi - b : ZERO__NORM_BLOCK, j->rdt);
        for (k = 0; k < j->ncopies; k++)
            memcpy(zero__at(j->copies[k], lo, j->rdt), zero__at(j->s.out, lo, j->rdt), (size_t)(hi - lo) * zero__esize(j->rdt));
    }
    zero__fpenv_leave(fpenv);
}
static void zero__sum_norm_k(zero__pool *pool, int simd, void *out, int rdt, const void *const *ins, int nin, int sdt,
                           int64_t count, int accumulate, double *blk, void *const *copies, int ncopies) {
    zero__sum_norm_job job;
    if (count <= 0 || nin < 1) return;
    job.s.fn = zero__sum_kernel(simd, sdt, rdt);
    if (!job.s.fn) return;
    job.s.out = out; job.s.ins = ins; job.s.nin = nin; job.s.accumulate = accumulate; job.s.count = count;
    job.rdt = rdt;
    job.sum = !(nin == 1 && ins[0] == out && sdt == rdt && !accumulate);
    job.fn = zero__sumsq_kernel(simd);
    job.fn4 = zero__sumsq4_kernel(simd);
    job.blk = blk;
    job.copies = copies;
    job.ncopies = ncopies;
    zero__pool_run(pool, zero__sum_norm_part, &job, count * (nin + accumulate + ncopies) < 65536);
}
/* ---- ZeRO++'s quantized payloads (qwz, qgz) ------------------------------------------
   A payload of n values is their codes (int8, or int4 two to a byte, the even element in
   the low nibble), padded to 4 bytes, then one fp32 scale per block of `block` values (the
   last block may be short). int8 follows zero__quantize_i8 (scale absmax / 127, codes
   round-half-even in [-127, 127]; a block holding a NaN or an infinity gets scale NaN and
   decodes to NaN); int4 the same with absmax / 7 and codes in [-7, 7]. So a value comes
   back within scale / 2 of itself: absmax / 254 (int8) or absmax / 14 (int4) of its
   block's largest magnitude. Everything runs in chunks of ZERO__QP_CH values through fp32
   buffers on the stack, the conversions through the vector sums (zero__sum_into). */
#define ZERO__QP_CH 512
static int64_t zero__qp_bytes(int64_t n, int bits, int block) {
    return zero__qp_codes(n, bits) + (n + block - 1) / block * 4;
}
#if defined(ZERO__X86) || defined(ZERO__NEON)
/* the vector int8 sums' last elements [i, hi), one at a time: the same bits (inlined into
   the AVX-512 kernel, whose FMA clang's -ffp-contract=fast would fuse: zero__nf) */
static void zero__qp_sum8_tail(void *out, int rdt, const void *const *ps, int np, int64_t cb, int64_t i, int64_t hi,
                               int block, int accumulate) {
    int k;
    for (; i < hi; i++) {
        float a = accumulate ? zero__ld(out, i, rdt) : 0.0f;
        for (k = 0; k < np; k++) {
            const uint8_t *q = (const uint8_t *)ps[k];
            float v = zero__nf((float)(int8_t)q[i] * ((const float *)(q + cb))[i / block]);
            a = k == 0 && !accumulate ? v : a + v;
        }
        zero__st(out, i, rdt, a);
    }
}
/* int8 codes of x's elements [i, hi) at scale s (finite, not 0), one at a time */
static void zero__qp_enc8_tail(uint8_t *codes, const void *x, int xdt, float s, int64_t i, int64_t hi) {
    for (; i < hi; i++) {
        float r = rintf(zero__ld(x, i, xdt) / s);
        codes[i] = (uint8_t)(int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
    }
}
#endif
#if defined(ZERO__NEON)
/* the three int8 kernels on NEON, 8 values a step: the same bits as the scalar loops (the
   absmax from the magnitudes' bits, a division, vrndnq_f32's round half to even, a clamp;
   products by the scale, sums in order) */
ZERO__INLINE float zero__qp_enc8_neon_t(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    const uint32x4_t mag = vdupq_n_u32(0x7fffffff);
    uint32x4_t mb = vdupq_n_u32(0);
    uint32_t m, sb;
    int64_t i = lo;
    float s;
    for (; i + 4 <= hi; i += 4) mb = vmaxq_u32(mb, vandq_u32(vreinterpretq_u32_f32(zero__neon_ld(x, i, xdt)), mag));
    m = vmaxvq_u32(mb);
    for (; i < hi; i++) {
        uint32_t b = zero__f32_bits(zero__ld(x, i, xdt)) & 0x7fffffffu;
        m = b > m ? b : m;
    }
    s = m >= 0x7f800000u ? zero__bits_f32(0x7fc00000u) : zero__bits_f32(m) / 127.0f;
    sb = zero__f32_bits(s);
    if (sb == 0u || sb >= 0x7f800000u) { memset(codes + lo, 0, (size_t)(hi - lo)); return s; }
    {
        const float32x4_t sv = vdupq_n_f32(s), top = vdupq_n_f32(127.0f), bot = vdupq_n_f32(-127.0f);
        for (i = lo; i + 8 <= hi; i += 8) {
            float32x4_t a = vminq_f32(vmaxq_f32(vrndnq_f32(zero__neon_ld(x, i, xdt) / sv), bot), top);
            float32x4_t b = vminq_f32(vmaxq_f32(vrndnq_f32(zero__neon_ld(x, i + 4, xdt) / sv), bot), top);
            int16x8_t h = vcombine_s16(vmovn_s32(vcvtq_s32_f32(a)), vmovn_s32(vcvtq_s32_f32(b)));
            vst1_s8((int8_t *)(codes + i), vmovn_s16(h));
        }
        zero__qp_enc8_tail(codes, x, xdt, s, i, hi);
    }
    return s;
}
static float zero__qp_enc8_neon(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    if (xdt == ZERO_BF16) return zero__qp_enc8_neon_t(codes, x, ZERO_BF16, lo, hi);
    if (xdt == ZERO_F16) return zero__qp_enc8_neon_t(codes, x, ZERO_F16, lo, hi);
    return zero__qp_enc8_neon_t(codes, x, ZERO_F32, lo, hi);
}
/* 8 int8 codes times s, as two vectors of 4 */
ZERO__INLINE void zero__qp_dec8x8_neon(const uint8_t *q, float32x4_t s, float32x4_t *a, float32x4_t *b) {
    int16x8_t w = vmovl_s8(vld1_s8((const int8_t *)q));
    *a = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))) * s;
    *b = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))) * s;
}
/* as zero__qp_sum8_avx2_t: block and lo multiples of 8 */
ZERO__INLINE void zero__qp_sum8_neon_t(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo,
                                       int64_t hi, int block, int accumulate) {
    int64_t cb = zero__qp_codes(n, 8), i, b = lo / block, r = lo % block;
    int k;
    for (i = lo; i + 8 <= hi; i += 8) {
        float32x4_t a0 = accumulate ? zero__neon_ld(out, i, rdt) : vdupq_n_f32(0.0f);
        float32x4_t a1 = accumulate ? zero__neon_ld(out, i + 4, rdt) : vdupq_n_f32(0.0f);
        int64_t b0 = b;
        if ((r += 8) == block) { r = 0; b++; }
        for (k = 0; k < np; k++) {
            const uint8_t *q = (const uint8_t *)ps[k];
            float32x4_t v0, v1;
            zero__qp_dec8x8_neon(q + i, vdupq_n_f32(((const float *)(q + cb))[b0]), &v0, &v1);
            a0 = k == 0 && !accumulate ? v0 : a0 + v0;
            a1 = k == 0 && !accumulate ? v1 : a1 + v1;
        }
        if (rdt == ZERO_F32) { vst1q_f32((float *)out + i, a0); vst1q_f32((float *)out + i + 4, a1); }
        else { zero__neon_st(out, i, rdt, a0); zero__neon_st(out, i + 4, rdt, a1); }
    }
    zero__qp_sum8_tail(out, rdt, ps, np, cb, i, hi, block, accumulate);
}
static void zero__qp_sum8_neon(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo, int64_t hi,
                               int block, int accumulate) {
    if (rdt == ZERO_BF16) zero__qp_sum8_neon_t(out, ZERO_BF16, ps, np, n, lo, hi, block, accumulate);
    else if (rdt == ZERO_F16) zero__qp_sum8_neon_t(out, ZERO_F16, ps, np, n, lo, hi, block, accumulate);
    else zero__qp_sum8_neon_t(out, ZERO_F32, ps, np, n, lo, hi, block, accumulate);
}
/* acc[k] (+)= (float)q[k] * s, k < n */
static void zero__qp_dec8_neon(float *acc, const uint8_t *q, float s, int64_t n, int first) {
    const float32x4_t sv = vdupq_n_f32(s);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        float32x4_t v0, v1;
        zero__qp_dec8x8_neon(q + k, sv, &v0, &v1);
        vst1q_f32(acc + k, first ? v0 : vld1q_f32(acc + k) + v0);
        vst1q_f32(acc + k + 4, first ? v1 : vld1q_f32(acc + k + 4) + v1);
    }
    for (; k < n; k++) {
        float v = (float)(int8_t)q[k] * s;
        acc[k] = first ? v : acc[k] + v;
    }
}
#endif
#if defined(ZERO__X86)
/* int8 codes of one block [lo, hi) of x: the same bits as the scalar loop below (the absmax
   from the magnitudes' bits, a division, round half to even, a clamp) */
ZERO__AVX2_INLINE float zero__qp_enc8_avx2_t(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    const __m256i mag = _mm256_set1_epi32(0x7fffffff);
    __m256i mb = _mm256_setzero_si256();
    uint32_t m = 0, lanes[8], sb;
    int64_t i = lo;
    int k;
    float s;
    for (; i + 8 <= hi; i += 8) mb = _mm256_max_epu32(mb, _mm256_and_si256(_mm256_castps_si256(zero__avx2_ld(x, i, xdt)), mag));
    _mm256_storeu_si256((__m256i *)lanes, mb);
    for (k = 0; k < 8; k++) m = lanes[k] > m ? lanes[k] : m;
    for (; i < hi; i++) {
        uint32_t b = zero__f32_bits(zero__ld(x, i, xdt)) & 0x7fffffffu;
        m = b > m ? b : m;
    }
    s = m >= 0x7f800000u ? zero__bits_f32(0x7fc00000u) : zero__bits_f32(m) / 127.0f;
    sb = zero__f32_bits(s);
    if (sb == 0u || sb >= 0x7f800000u) { memset(codes + lo, 0, (size_t)(hi - lo)); return s; }
    {
        const __m256 sv = _mm256_set1_ps(s), hi_ = _mm256_set1_ps(127.0f), lo_ = _mm256_set1_ps(-127.0f);
        for (i = lo; i + 8 <= hi; i += 8) {
            __m256 v = zero__avx2_ld(x, i, xdt) / sv;
            __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT |
                                                                                       _MM_FROUND_NO_EXC), lo_), hi_));
            __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64((__m128i *)(codes + i), _mm_packs_epi16(p16, p16));
        }
        zero__qp_enc8_tail(codes, x, xdt, s, i, hi);
    }
    return s;
}
/* the same, compiled once per input dtype */
ZERO__AVX2_ATTR static float zero__qp_enc8_avx2(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    if (xdt == ZERO_BF16) return zero__qp_enc8_avx2_t(codes, x, ZERO_BF16, lo, hi);
    if (xdt == ZERO_F16) return zero__qp_enc8_avx2_t(codes, x, ZERO_F16, lo, hi);
    return zero__qp_enc8_avx2_t(codes, x, ZERO_F32, lo, hi);
}
/* out (rdt) = [out +] the values of np int8 payloads of n, elements [lo, hi), for a block
   and an lo that are multiples of 8 (so 8 values share a scale, found by counting, not
   dividing): each 8 values summed in registers and narrowed once, the same bits as the
   chunked path of zero__qp_sum */
ZERO__AVX2_INLINE void zero__qp_sum8_avx2_t(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo,
                                           int64_t hi, int block, int accumulate) {
    int64_t cb = zero__qp_codes(n, 8), i, b = lo / block, r = lo % block;
    int k;
    for (i = lo; i + 8 <= hi; i += 8) {
        __m256 acc = accumulate ? zero__avx2_ld(out, i, rdt) : _mm256_setzero_ps();
        int64_t b0 = b;
        if ((r += 8) == block) { r = 0; b++; }
        for (k = 0; k < np; k++) {
            const uint8_t *q = (const uint8_t *)ps[k];
            __m256 s = _mm256_set1_ps(((const float *)(q + cb))[b0]);
            __m256 v = zero__nf8(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)))) * s);
            acc = k == 0 && !accumulate ? v : (__m256)(acc + v);
        }
        if (rdt == ZERO_F32) _mm256_storeu_ps((float *)out + i, acc);
        else zero__avx2_st(out, i, rdt, acc);
    }
    zero__qp_sum8_tail(out, rdt, ps, np, cb, i, hi, block, accumulate);
}
ZERO__AVX2_ATTR static void zero__qp_sum8_avx2(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo,
                                               int64_t hi, int block, int accumulate) {
    if (rdt == ZERO_BF16) zero__qp_sum8_avx2_t(out, ZERO_BF16, ps, np, n, lo, hi, block, accumulate);
    else if (rdt == ZERO_F16) zero__qp_sum8_avx2_t(out, ZERO_F16, ps, np, n, lo, hi, block, accumulate);
    else zero__qp_sum8_avx2_t(out, ZERO_F32, ps, np, n, lo, hi, block, accumulate);
}
/* acc[k] (+)= (float)q[k] * s, k < n */
ZERO__AVX2_ATTR static void zero__qp_dec8_avx2(float *acc, const uint8_t *q, float s, int64_t n, int first) {
    const __m256 sv = _mm256_set1_ps(s);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v = zero__nf8(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + k)))) * sv);
        _mm256_storeu_ps(acc + k, first ? v : (__m256)(_mm256_loadu_ps(acc + k) + v));
    }
    for (; k < n; k++) {
        float v = (float)(int8_t)q[k] * s;
        acc[k] = first ? v : acc[k] + v;
    }
}
/* the two int8 kernels again on AVX-512F, 16 lanes: the same bits (the same round half
   to even, clamp and products; the codes narrowed by vpmovdb, exact once clamped). The
   encoder's division is a product by 1 / s where that rounds the same: |x / s| <= 127 (1 +
   2^-23) (a little more for a subnormal s, still far below 256) and the product is within
   2^-23 |x / s| of it, under 2^-15, so a product within 1/2 - 2^-14 of an integer rounds to
   that integer, as x / s does; a vector with a product farther off (near a tie, or NaN
   when 1 / s is infinite) divides. 15-25% faster than dividing here; on AVX2, whose
   division is relatively cheaper, the check cost more than it saved, so it divides. */
#define ZERO__QP_NEAR (0.5f - 1.0f / 16384.0f)
/* (gcc's headers make _mm512_*roundscale_ps a macro at -O0 that hands its builtin a mask of
   type short: a -Wsign-conversion of theirs reported in our code) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#endif
ZERO__AVX512_INLINE float zero__qp_enc8_avx512_t(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    const __m512i mag = _mm512_set1_epi32(0x7fffffff);
    __m512i mb = _mm512_setzero_si512();
    uint32_t m, sb;
    int64_t i = lo;
    float s;
    for (; i + 16 <= hi; i += 16)
        mb = _mm512_max_epu32(mb, _mm512_and_si512(_mm512_castps_si512(zero__avx512_ld(x, i, xdt)), mag));
    m = (uint32_t)_mm512_reduce_max_epu32(mb);
    for (; i < hi; i++) {
        uint32_t b = zero__f32_bits(zero__ld(x, i, xdt)) & 0x7fffffffu;
        m = b > m ? b : m;
    }
    s = m >= 0x7f800000u ? zero__bits_f32(0x7fc00000u) : zero__bits_f32(m) / 127.0f;
    sb = zero__f32_bits(s);
    if (sb == 0u || sb >= 0x7f800000u) { memset(codes + lo, 0, (size_t)(hi - lo)); return s; }
    {
        const __m512 sv = _mm512_set1_ps(s), rv = _mm512_set1_ps(1.0f / s), hi_ = _mm512_set1_ps(127.0f);
        const __m512 lo_ = _mm512_set1_ps(-127.0f), near = _mm512_set1_ps(ZERO__QP_NEAR);
        for (i = lo; i + 16 <= hi; i += 16) {
            __m512 xv = zero__avx512_ld(x, i, xdt), y = zero__nf16(xv * rv), v, d;
            __m512i q;
            v = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            d = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(zero__nf16(y - v)), mag));
            if (_mm512_cmp_ps_mask(d, near, _CMP_NLT_UQ))     /* near a tie */
                v = _mm512_roundscale_ps((__m512)(xv / sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo_), hi_));
            _mm_storeu_si128((__m128i *)(codes + i), _mm512_cvtepi32_epi8(q));
        }
        zero__qp_enc8_tail(codes, x, xdt, s, i, hi);
    }
    return s;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ZERO__AVX512_ATTR static float zero__qp_enc8_avx512(uint8_t *codes, const void *x, int xdt, int64_t lo, int64_t hi) {
    if (xdt == ZERO_BF16) return zero__qp_enc8_avx512_t(codes, x, ZERO_BF16, lo, hi);
    if (xdt == ZERO_F16) return zero__qp_enc8_avx512_t(codes, x, ZERO_F16, lo, hi);
    return zero__qp_enc8_avx512_t(codes, x, ZERO_F32, lo, hi);
}
/* 16 values at a time, each half of the vector with its own block's scale (a block is a
   multiple of 8) */
ZERO__AVX512_INLINE void zero__qp_sum8_avx512_t(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo,
                                               int64_t hi, int block, int accumulate) {
    int64_t cb = zero__qp_codes(n, 8), i, b = lo / block, r = lo % block;
    int k;
    for (i = lo; i + 16 <= hi; i += 16) {
        __m512 acc = accumulate ? zero__avx512_ld(out, i, rdt) : _mm512_setzero_ps();
        int64_t b0 = b, b1;
        if ((r += 8) == block) { r = 0; b++; }
        b1 = b;
        if ((r += 8) == block) { r = 0; b++; }
        for (k = 0; k < np; k++) {
            const uint8_t *q = (const uint8_t *)ps[k];
            const float *sc = (const float *)(q + cb);
            __m512 s = _mm512_mask_blend_ps((__mmask16)0xff00, _mm512_set1_ps(sc[b0]), _mm512_set1_ps(sc[b1]));
            __m512 v = zero__nf16(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))) * s);
            acc = k == 0 && !accumulate ? v : (__m512)(acc + v);
        }
        if (rdt == ZERO_F32) _mm512_storeu_ps((float *)out + i, acc);
        else zero__avx512_st(out, i, rdt, acc);
    }
    zero__qp_sum8_tail(out, rdt, ps, np, cb, i, hi, block, accumulate);
}
ZERO__AVX512_ATTR static void zero__qp_sum8_avx512(void *out, int rdt, const void *const *ps, int np, int64_t n, int64_t lo,
                                                   int64_t hi, int block, int accumulate) {
    if (rdt == ZERO_BF16) zero__qp_sum8_avx512_t(out, ZERO_BF16, ps, np, n, lo, hi, block, accumulate);
    else if (rdt == ZERO_F16) zero__qp_sum8_avx512_t(out, ZERO_F16, ps, np, n, lo, hi, block, accumulate);
    else zero__qp_sum8_avx512_t(out, ZERO_F32, ps, np, n, lo, hi, block, accumulate);
}
#endif
/* the encoding's work, cut into parts on block boundaries for the pool (an int4 part
   starts on an even element: its bytes are its own) */
typedef struct zero__qp_job {
    void *out;                      /* encode: the payload; sum: the values (rdt) */
    const void *x;                  /* encode: the values (xdt) */
    const void *const *ps;          /* sum: np payloads */
    int dt, bits, block, np, accumulate, simd;
    int64_t n;
} zero__qp_job;
static void zero__qp_encode_blocks(const zero__qp_job *j, int64_t b0, int64_t b1) {
    uint8_t *codes = (uint8_t *)j->out;
    float *scales = (float *)((char *)j->out + zero__qp_codes(j->n, j->bits));
    float v[ZERO__QP_CH], qmax = j->bits == 4 ? 7.0f : 127.0f;
    const void *x = j->x;
    int64_t lo, i, n = j->n, block = j->block;
    int xdt = j->dt, bits = j->bits, simd = j->simd;
    for (lo = b0 * block; lo < n && lo < b1 * block; lo += block) {
        int64_t hi = n - lo < block ? n : lo + block, c;
        uint32_t mb = 0;
        float s;
#if defined(ZERO__X86)
        if (bits == 8 && simd >= ZERO__SIMD_AVX512) {
            scales[lo / block] = zero__qp_enc8_avx512(codes, x, xdt, lo, hi);
            continue;
        }
        if (bits == 8 && simd >= ZERO__SIMD_AVX2) {
            scales[lo / block] = zero__qp_enc8_avx2(codes, x, xdt, lo, hi);
            continue;
        }
#endif
#if defined(ZERO__NEON)
        if (bits == 8 && simd == ZERO__SIMD_NEON) {
            scales[lo / block] = zero__qp_enc8_neon(codes, x, xdt, lo, hi);
            continue;
        }
#endif
        for (c = lo; c < hi; c += ZERO__QP_CH) {       /* the absmax: the largest magnitude's bits */
            int64_t len = hi - c < ZERO__QP_CH ? hi - c : ZERO__QP_CH;
            const void *in = (const char *)x + c * (int64_t)zero__esize(xdt);
            zero__sum_into_k(NULL, simd, v, ZERO_F32, &in, 1, xdt, len, 0);
            for (i = 0; i < len; i++) {
                uint32_t b = zero__f32_bits(v[i]) & 0x7fffffffu;
                mb = b > mb ? b : mb;
            }
        }
        /* NaN or infinity: scale NaN, codes 0 (it decodes to NaN) */
        s = mb >= 0x7f800000u ? zero__bits_f32(0x7fc00000u) : zero__bits_f32(mb) / qmax;
        scales[lo / block] = s;
        for (c = lo; c < hi; c += ZERO__QP_CH) {
            int64_t len = hi - c < ZERO__QP_CH ? hi - c : ZERO__QP_CH;
            const void *in = (const char *)x + c * (int64_t)zero__esize(xdt);
            uint32_t sb = zero__f32_bits(s);
            zero__sum_into_k(NULL, simd, v, ZERO_F32, &in, 1, xdt, len, 0);
            for (i = 0; i < len; i++) {
                float r = 0.0f;
                if (sb != 0u && sb < 0x7f800000u) {
                    r = rintf(v[i] / s);
                    r = r > qmax ? qmax : r < -qmax ? -qmax : r;
                }
                if (bits == 8) codes[c + i] = (uint8_t)(int8_t)r;
                else {
                    uint8_t nib = (uint8_t)((int)r & 0xf);
                    int64_t e = c + i;
                    if (e & 1) codes[e >> 1] = (uint8_t)(codes[e >> 1] | (nib << 4));
                    else codes[e >> 1] = nib;
                }
            }
        }
    }
}
static void zero__qp_encode_part(void *arg, int part, int nparts) {
    const zero__qp_job *j = (const zero__qp_job *)arg;
    int64_t nb = (j->n + j->block - 1) / j->block, unit = j->bits == 4 && (j->block & 1) ? 2 : 1;
    int64_t nu = (nb + unit - 1) / unit;
    unsigned fpenv = zero__fpenv_enter();
    zero__qp_encode_blocks(j, nu * part / nparts * unit, nu * (part + 1) / nparts * unit);
    zero__fpenv_leave(fpenv);
}
/* the payload of x's n values (xdt), on the pool (NULL: the calling thread) */
static void zero__qp_encode_k(zero__pool *pool, int simd, void *dst, const void *x, int xdt, int64_t n, int bits,
                              int block) {
    zero__qp_job job;
    uint8_t *codes = (uint8_t *)dst;
    int64_t i;
    memset(&job, 0, sizeof job);
    job.out = dst; job.x = x; job.dt = xdt; job.n = n; job.bits = bits; job.block = block; job.simd = simd;
    zero__pool_run(pool, zero__qp_encode_part, &job, n < 65536);
    for (i = bits == 4 ? (n + 1) / 2 : n; i < zero__qp_codes(n, bits); i++) codes[i] = 0;
}
/* the same on the calling thread, the path from ZERO_SIMD and the CPU (the reference of the
   CUDA kernels' tests) */
static ZERO__MAYBE_UNUSED void zero__qp_encode(void *dst, const void *x, int xdt, int64_t n, int bits, int block) {
    zero__qp_encode_k(NULL, zero__simd_pick(), dst, x, xdt, n, bits, block);
}
/* acc (+)= values [lo, lo + len) of a payload of n (first: acc =) */
static void zero__qp_decode_into(float *acc, int first, const void *p, int64_t n, int bits, int block, int64_t lo,
                                 int64_t len, int simd) {
    const uint8_t *codes = (const uint8_t *)p;
    const float *scales = (const float *)((const char *)p + zero__qp_codes(n, bits));
    int64_t i = 0;
    (void)simd;
    while (i < len) {
        int64_t e = lo + i, end = (e / block + 1) * block - lo, k;
        float s = scales[e / block];
        if (end > len) end = len;
#if defined(ZERO__X86)
        if (bits == 8 && simd >= ZERO__SIMD_AVX2) { zero__qp_dec8_avx2(acc + i, codes + lo + i, s, end - i, first); i = end; continue; }
#endif
#if defined(ZERO__NEON)
        if (bits == 8 && simd == ZERO__SIMD_NEON) { zero__qp_dec8_neon(acc + i, codes + lo + i, s, end - i, first); i = end; continue; }
#endif
        for (k = i; k < end; k++) {
            int64_t x = lo + k;
            int c = bits == 8 ? (int8_t)codes[x] : (x & 1) ? (int8_t)codes[x >> 1] >> 4 : (int8_t)(uint8_t)(codes[x >> 1] << 4) >> 4;
            float v = (float)c * s;
            acc[k] = first ? v : acc[k] + v;
        }
        i = end;
    }
}
/* out (rdt, n values) = [out +] the sum over k in order of payload k's values, in fp32:
   the stored value first, then each payload added to it in turn (zero__sum_into instead
   adds the stored value to its inputs' sum; the CUDA kernel and the vector path follow
   this order). Each element on its own, so the pool's parts (zero__chunk) and the chunks
   change nothing. */
static void zero__qp_sum_range(const zero__qp_job *j, int64_t lo0, int64_t hi0) {
    float acc[ZERO__QP_CH];
    int64_t lo, es = (int64_t)zero__esize(j->dt);
    int k;
#if defined(ZERO__X86)
    if (j->bits == 8 && j->block % 8 == 0 && j->simd >= ZERO__SIMD_AVX512) {
        zero__qp_sum8_avx512(j->out, j->dt, j->ps, j->np, j->n, lo0, hi0, j->block, j->accumulate);
        return;
    }
    if (j->bits == 8 && j->block % 8 == 0 && j->simd >= ZERO__SIMD_AVX2) {
        zero__qp_sum8_avx2(j->out, j->dt, j->ps, j->np, j->n, lo0, hi0, j->block, j->accumulate);
        return;
    }
#endif
#if defined(ZERO__NEON)
    if (j->bits == 8 && j->block % 8 == 0 && j->simd == ZERO__SIMD_NEON) {
        zero__qp_sum8_neon(j->out, j->dt, j->ps, j->np, j->n, lo0, hi0, j->block, j->accumulate);
        return;
    }
#endif
    for (lo = lo0; lo < hi0; lo += ZERO__QP_CH) {
        int64_t len = hi0 - lo < ZERO__QP_CH ? hi0 - lo : ZERO__QP_CH;
        void *o = (char *)j->out + lo * es;
        const void *oc = o, *ac = acc;
        if (j->accumulate) zero__sum_into_k(NULL, j->simd, acc, ZERO_F32, &oc, 1, j->dt, len, 0);
        for (k = 0; k < j->np; k++)
            zero__qp_decode_into(acc, k == 0 && !j->accumulate, j->ps[k], j->n, j->bits, j->block, lo, len, j->simd);
        zero__sum_into_k(NULL, j->simd, o, j->dt, &ac, 1, ZERO_F32, len, 0);
    }
}
static void zero__qp_sum_part(void *arg, int part, int nparts) {
    const zero__qp_job *j = (const zero__qp_job *)arg;
    int64_t lo, hi;
    unsigned fpenv = zero__fpenv_enter();
    zero__chunk(j->n, part, nparts, &lo, &hi);
    if (lo < hi) zero__qp_sum_range(j, lo, hi);
    zero__fpenv_leave(fpenv);
}
static void zero__qp_sum_k(zero__pool *pool, int simd, void *out, int rdt, const void *const *ps, int np, int64_t n,
                           int bits, int block, int accumulate) {
    zero__qp_job job;
    memset(&job, 0, sizeof job);
    job.out = out; job.dt = rdt; job.ps = ps; job.np = np; job.n = n; job.bits = bits; job.block = block;
    job.accumulate = accumulate; job.simd = simd;
    zero__pool_run(pool, zero__qp_sum_part, &job, n * (np + accumulate) < 65536);
}
static ZERO__MAYBE_UNUSED void zero__qp_sum(void *out, int rdt, const void *const *ps, int np, int64_t n, int bits,
                                            int block, int accumulate) {
    zero__qp_sum_k(NULL, zero__simd_pick(), out, rdt, ps, np, n, bits, block, accumulate);
}
#define ZERO__MR 4
#define ZERO__NR 16
#define ZERO__KC 256
#define ZERO__MC 64
#define ZERO__NC 512
/* ---- the SGEMM (the CPU and EMU devices' GEMM) -----------------------------------------
   The SGEMM: B is packed in panels of NR columns, A in panels of MR rows; the
   micro-kernel starts each MR x NR block of C from C itself and adds a*b in order
   over k, so splitting K between calls (the tiles of a backward pass) adds in the
   same order as one call. */
#ifndef ZERO_CBLAS
typedef void (*zero__gemm_micro_fn)(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int mr, int nr);
#define ZERO__GEMM_MICRO_BODY                                                          \
    float acc[ZERO__MR][ZERO__NR];                                                     \
    int64_t k;                                                                         \
    int i, j;                                                                          \
    for (i = 0; i < ZERO__MR; i++)                                                     \
        for (j = 0; j < ZERO__NR; j++) acc[i][j] = i < mr && j < nr ? c[i * ldc + j] : 0.0f; \
    for (k = 0; k < kc; k++) {                                                         \
        const float *a = ap + k * ZERO__MR, *b = bp + k * ZERO__NR;                     \
        for (i = 0; i < ZERO__MR; i++)                                                 \
            for (j = 0; j < ZERO__NR; j++) acc[i][j] += a[i] * b[j];                   \
    }                                                                                  \
    for (i = 0; i < mr; i++)                                                           \
        for (j = 0; j < nr; j++) c[i * ldc + j] = acc[i][j];
static void zero__gemm_micro(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int mr, int nr) {
    ZERO__GEMM_MICRO_BODY
}
#if defined(ZERO__X86)
/* the same loops compiled for AVX2 (no FMA: each product is rounded before the add,
   exactly as in the portable kernel, so both paths give the same bits) */
ZERO__AVX2_ATTR static void zero__gemm_micro_avx2(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                                                  int mr, int nr) {
    ZERO__GEMM_MICRO_BODY
}
#endif
static zero__gemm_micro_fn zero__gemm_micro_for(int simd) {
#if defined(ZERO__X86)
    if (simd >= ZERO__SIMD_AVX2) return zero__gemm_micro_avx2;
#endif
    (void)simd;
    return zero__gemm_micro;
}

static void zero__gemm_cpu(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                           const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc, float *ws,
                           zero__gemm_micro_fn micro) {
    float *pa = ws, *pb = ws + ZERO__MC * ZERO__KC;
    int64_t jc, pc, ic, i, j, k;
    if (!accumulate)
        for (i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    for (jc = 0; jc < N; jc += ZERO__NC) {
        int64_t nc = N - jc < ZERO__NC ? N - jc : ZERO__NC;
        for (pc = 0; pc < K; pc += ZERO__KC) {
            int64_t kc = K - pc < ZERO__KC ? K - pc : ZERO__KC;
            for (j = 0; j < nc; j += ZERO__NR) {            /* pack op(B)[pc.., jc+j..] */
                float *dst = pb + j * kc;
                for (k = 0; k < kc; k++)
                    for (i = 0; i < ZERO__NR; i++) {
                        int64_t col = jc + j + i, row = pc + k;
                        dst[k * ZERO__NR + i] = j + i >= nc ? 0.0f : tb ? B[col * ldb + row] : B[row * ldb + col];
                    }
            }
            for (ic = 0; ic < M; ic += ZERO__MC) {
                int64_t mc = M - ic < ZERO__MC ? M - ic : ZERO__MC;
                for (i = 0; i < mc; i += ZERO__MR) {        /* pack op(A)[ic+i.., pc..] */
                    float *dst = pa + i * kc;
                    for (k = 0; k < kc; k++)
                        for (j = 0; j < ZERO__MR; j++) {
                            int64_t row = ic + i + j, col = pc + k;
                            dst[k * ZERO__MR + j] = i + j >= mc ? 0.0f : ta ? A[col * lda + row] : A[row * lda + col];
                        }
                }
                for (j = 0; j < nc; j += ZERO__NR)
                    for (i = 0; i < mc; i += ZERO__MR)
                        micro(kc, pa + i * kc, pb + j * kc, C + (ic + i) * ldc + jc + j, ldc,
                                         (int)(mc - i < ZERO__MR ? mc - i : ZERO__MR),
                                         (int)(nc - j < ZERO__NR ? nc - j : ZERO__NR));
            }
        }
    }
}

#endif

/* the CPU device's GEMM (the EMU device's too, on its aliases) */
static zero_result zero__gemm_host(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                                   int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc) {
#ifdef ZERO_CBLAS
    (void)ctx;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                1.0f, A, (int)lda, B, (int)ldb, accumulate ? 1.0f : 0.0f, C, (int)ldc);
#else
    if (!ctx->tile.gemm_ws)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_sgemm: the context has no GEMM workspace (it is planned for contexts with a tiled linear)");
    zero__gemm_cpu(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc, ctx->tile.gemm_ws, zero__gemm_micro_for(ctx->opt.simd));
#endif
    return ZERO_OK;
}
/* Sum of squares of rank r's slice of every trainable module (blockwise, as defined
   in >>kernels above zero__sumsq_scalar). Every rank computes its own slice's value this
   way at every stage (zero_step adds them in rank order in an all-reduce), so the global
   norm is the same double at every stage. The pool computes the block sums into ctx->opt.norm_part; they are then
   added in order, so the thread count does not change the result either. */
typedef struct zero__norm_job {
    const zero_ctx *ctx;
    const void *grads;
    int r;
    zero__sumsq_fn fn;
    zero__sumsq4_fn fn4;
} zero__norm_job;

static void zero__norm_part(void *arg, int part, int nparts) {
    const zero__norm_job *j = (const zero__norm_job *)arg;
    const zero_ctx *ctx = j->ctx;
    int N = ctx->world, adt = (int)ctx->desc.grad_accum_dtype, i;
    int64_t lo, hi, first = 0;
    unsigned fpenv = zero__fpenv_enter();
    zero__chunk(ctx->opt.norm_blocks, part, nparts, &lo, &hi);
    for (i = 0; i < ctx->num_modules && first < hi; i++) {
        const zero__module_rec *m = &ctx->modules[i];
        int64_t per = m->lay.span / N, nb = (per + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK, base, b;
        if (m->frozen) continue;
        if (m->norm.taken) { first += nb; continue; }      /* its reduction took them */
        base = ctx->desc.stage < 2 ? m->lay.train_off + (int64_t)j->r * per : m->lay.train_off / N;
        for (b = lo - first > 0 ? lo - first : 0; b < nb && first + b < hi; b++) {
            int64_t s = b * ZERO__NORM_BLOCK, n = per - s < ZERO__NORM_BLOCK ? per - s : ZERO__NORM_BLOCK;
            if (first + b + 4 <= hi && per - s >= 4 * ZERO__NORM_BLOCK) {     /* four whole blocks */
                j->fn4(zero__at(ZERO__UNCONST(void *, j->grads), base + s, adt), adt, &ctx->opt.norm_part[first + b]);
                b += 3;
                continue;
            }
            ctx->opt.norm_part[first + b] = j->fn(zero__at(ZERO__UNCONST(void *, j->grads), base + s, adt), n, adt);
        }
        first += nb;
    }
    zero__fpenv_leave(fpenv);
}

/* grads: the grad arena as the host sees it (the CPU device: itself; EMU: its alias) */
static double zero__sumsq_slice(const zero_ctx *ctx, const void *grads, int r) {
    zero__norm_job job;
    double s = 0.0;
    int64_t b;
    job.ctx = ctx;
    job.grads = grads;
    job.r = r;
    job.fn = zero__sumsq_kernel(ctx->opt.simd);
    job.fn4 = zero__sumsq4_kernel(ctx->opt.simd);
    zero__pool_run(ctx->opt.pool, zero__norm_part, &job, ctx->opt.norm_blocks < 256);
    for (b = 0; b < ctx->opt.norm_blocks; b++) s += ctx->opt.norm_part[b];
    return s;
}

/* One fused pass over this rank's part of the model: widen the gradient, unscale and
   clip (one factor), update master and moments, narrow into the params. The segments
   are concatenated and cut into one contiguous chunk per pool thread. */
/* The segments that meet [lo, hi) of their concatenation (the state index space of this
   rank's trainable slice), in order, each with the part [s, e) of it that lies inside:
       zero__seg_walk w = zero__seg_begin(ctx, lo, hi);
       while (zero__seg_next(&w)) ... w.sg, w.s, w.e ... */
typedef struct zero__seg_walk {
    const zero_ctx *ctx;
    int64_t lo, hi, off, s, e;
    int si;
    const zero__segment *sg;
} zero__seg_walk;
static zero__seg_walk zero__seg_begin(const zero_ctx *ctx, int64_t lo, int64_t hi) {
    zero__seg_walk w;
    memset(&w, 0, sizeof w);
    w.ctx = ctx; w.lo = lo; w.hi = hi;
    return w;
}
static int zero__seg_next(zero__seg_walk *w) {
    while (w->si < w->ctx->lay.num_segs && w->off < w->hi) {
        const zero__segment *sg = &w->ctx->lay.segs[w->si++];
        int64_t off = w->off;
        w->off += sg->n;
        w->s = w->lo - off > 0 ? w->lo - off : 0;
        w->e = w->hi - off < sg->n ? w->hi - off : sg->n;
        if (w->s < w->e) { w->sg = sg; return 1; }
    }
    return 0;
}

typedef struct zero__opt_job {
    zero_ctx *ctx;
    zero__optk k;
    zero__opt_fn fn;
    int64_t total;
    void *params, *grads;           /* the arenas as the host sees them (EMU: their aliases) */
    float *master, *m, *v;
    int by_state;                   /* params and grads are compact host copies indexed like the state */
    int clear;                      /* zero each gradient right after its use (zero__pass_clears) */
} zero__opt_job;

static void zero__opt_part(void *arg, int part, int nparts) {
    const zero__opt_job *j = (const zero__opt_job *)arg;
    zero_ctx *ctx = j->ctx;
    int pdt = j->k.pdt, adt = j->k.adt;
    int64_t lo, hi;
    zero__seg_walk w;
    zero__chunk(j->total, part, nparts, &lo, &hi);
    w = zero__seg_begin(ctx, lo, hi);
    while (zero__seg_next(&w)) {
        const zero__segment *sg = w.sg;
        int64_t s = w.s, e = w.e;
        void *p;
        zero__optk k = j->k;
        k.decay = sg->decay;
        p = zero__at(j->params, j->by_state ? sg->state_idx : sg->param_idx, pdt);
        if (j->clear) {     /* a piece at a time, zeroed while its gradients are still in cache */
            char *g = zero__at(j->grads, sg->grad_idx, adt);
            int64_t b, be;
            for (b = s; b < e; b = be) {
                be = e - b < 8192 ? e : b + 8192;
                j->fn(&k, g, p, j->master ? j->master + sg->state_idx : (float *)p, j->m ? j->m + sg->state_idx : NULL,
                      j->v ? j->v + sg->state_idx : NULL, b, be);
                memset(g + b * (int64_t)zero__esize(adt), 0, (size_t)((be - b) * (int64_t)zero__esize(adt)));
            }
            continue;
        }
        j->fn(&k, zero__at(j->grads, j->by_state ? sg->state_idx : sg->grad_idx, adt), p,
              j->master ? j->master + sg->state_idx : (float *)p,
              j->m ? j->m + sg->state_idx : NULL,
              j->v ? j->v + sg->state_idx : NULL, s, e);
    }
}

/* the kernel and its hyperparameters for this step (also the NVMe tier's, >>offload) */
static void zero__opt_setup(zero_ctx *ctx, float gscale, zero__optk *k, zero__opt_fn *fn) {
    const zero_desc *d = &ctx->desc;
    const zero_optim_desc *o = &d->optim;
    zero__adamw_hp *ah = &k->ah;
    zero__sgd_hp *sh = &k->sh;
    double t = (double)(ctx->opt.steps + 1);
    memset(k, 0, sizeof *k);
    k->opt = (int)o->type;
    k->adt = (int)d->grad_accum_dtype;
    k->pdt = (int)d->param_dtype;
    k->gscale = gscale;
    ah->beta1 = (float)o->beta1;
    ah->beta2 = (float)o->beta2;
    ah->one_minus_beta1 = (float)(1.0 - o->beta1);
    ah->one_minus_beta2 = (float)(1.0 - o->beta2);
    ah->eps = (float)o->eps;
    ah->decay_mul = (float)(1.0 - o->lr * o->weight_decay);
    ah->neg_step_size = (float)(-(o->lr / (1.0 - pow(o->beta1, t))));
    ah->bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
    sh->neg_lr = (float)(-o->lr);
    sh->weight_decay = (float)o->weight_decay;
    sh->momentum = (float)o->momentum;
    sh->one_minus_dampening = (float)(1.0 - o->dampening);
    sh->nesterov = o->nesterov;
    sh->first = ctx->opt.steps == 0;
    *fn = zero__opt_kernel(ctx->opt.simd, k->opt, k->adt, k->pdt);
}

/* the CPU pass over host-visible arenas (the CPU device: the arenas; EMU: their aliases);
   over the arena's gradients (by_state 0) with ctx->opt.grads_cleared set, it also clears
   them as it goes (zero__pass_clears) */
static void zero__apply_optimizer(zero_ctx *ctx, float gscale, void *params, void *grads, float *master, float *m,
                                  float *v, int by_state) {
    zero__opt_job job;
    int si;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.params = params; job.grads = grads; job.master = master; job.m = m; job.v = v; job.by_state = by_state;
    job.clear = ctx->opt.grads_cleared && !by_state;
    zero__opt_setup(ctx, gscale, &job.k, &job.fn);
    for (si = 0; si < ctx->lay.num_segs; si++) job.total += ctx->lay.segs[si].n;
    /* below ~64K elements waking the pool costs more than it saves */
    zero__pool_run(ctx->opt.pool, zero__opt_part, &job, job.total < 65536);
}
/* The pass over the arena's gradients may clear them as it goes, saving zero__end_step
   a pass of its own: at stage 0 with the gradients accumulated in place, where this
   rank's segments are every gradient a user can write (the padding around them stays
   zero: the reductions add zeros there). Returns whether it does. */
static int zero__pass_clears(const zero_ctx *ctx) { return ctx->desc.stage == 0 && !ctx->lay.staging_mode; }

/* >>device ------------------------------------------------------------------------------
   The devices behind zero__dev_vt (declared in >>structs): cpu, emu and (ZERO_CUDA) cuda. */

/* -- cpu: arenas are host memory, the caller's thread computes, every op is done when
   it returns -- */
static zero_result zero__cpu_init(zero_ctx *ctx) { (void)ctx; return ZERO_OK; }
static void zero__cpu_fini(zero_ctx *ctx) { (void)ctx; }
static void *zero__cpu_alloc(zero_ctx *ctx, int64_t bytes) {
    void *p = zero__raw_alloc(&ctx->desc.allocator, (size_t)bytes);
    if (p) memset(p, 0, (size_t)bytes);
    return p;
}
static void zero__cpu_free(zero_ctx *ctx, void *p) { zero__raw_free(&ctx->desc.allocator, p); }
static zero_result zero__cpu_prepare(zero_ctx *ctx) { (void)ctx; return ZERO_OK; }
static zero_result zero__cpu_copy(zero_ctx *ctx, int s, void *dst, const void *src, int64_t bytes) {
    (void)ctx; (void)s;
    if (bytes > 0 && dst != src) memcpy(dst, src, (size_t)bytes);
    return ZERO_OK;
}
typedef struct zero__fill_job { char *dst; int64_t bytes; } zero__fill_job;
static void zero__fill0_part(void *arg, int part, int nparts) {
    const zero__fill_job *j = (const zero__fill_job *)arg;
    int64_t lo, hi;
    zero__chunk(j->bytes, part, nparts, &lo, &hi);
    if (lo < hi) memset(j->dst + lo, 0, (size_t)(hi - lo));
}
/* large fills (the gradients' clearing at the end of a step) on the pool */
static zero_result zero__cpu_fill0(zero_ctx *ctx, int s, void *dst, int64_t bytes) {
    zero__fill_job job;
    (void)s;
    if (bytes <= 0) return ZERO_OK;
    job.dst = (char *)dst; job.bytes = bytes;
    zero__pool_run(ctx->opt.pool, zero__fill0_part, &job, bytes < ((int64_t)1 << 20));
    return ZERO_OK;
}
static zero_result zero__cpu_sum_into(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                      int64_t count, int accumulate) {
    (void)s;    /* the comm stream too borrows the pool (see the pool's comment above) */
    zero__sum_into_k(ctx->opt.pool, ctx->opt.simd, out, rdt, ins, nin, sdt, count, accumulate);
    return ZERO_OK;
}
static zero_result zero__cpu_sum_norm(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                    int64_t count, int accumulate, double *blk, void *const *copies, int ncopies) {
    (void)s;
    zero__sum_norm_k(ctx->opt.pool, ctx->opt.simd, out, rdt, ins, nin, sdt, count, accumulate, blk, copies, ncopies);
    return ZERO_OK;
}
static zero_result zero__cpu_sumsq(zero_ctx *ctx, int r, double *out) {
    *out = zero__sumsq_slice(ctx, ctx->arena.grad, r);
    return ZERO_OK;
}
static zero_result zero__cpu_qp_encode(zero_ctx *ctx, int s, void *dst, const void *x, int xdt, int64_t n, int bits,
                                       int block) {
    (void)s;    /* the pool as zero__cpu_sum_into */
    zero__qp_encode_k(ctx->opt.pool, ctx->opt.simd, dst, x, xdt, n, bits, block);
    return ZERO_OK;
}
static zero_result zero__cpu_qp_sum(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ps, int np, int64_t n,
                                    int bits, int block, int accumulate) {
    (void)s;
    zero__qp_sum_k(ctx->opt.pool, ctx->opt.simd, out, rdt, ps, np, n, bits, block, accumulate);
    return ZERO_OK;
}
static zero_result zero__cpu_optimizer(zero_ctx *ctx, float gscale) {
    ctx->opt.grads_cleared = zero__pass_clears(ctx);
    zero__apply_optimizer(ctx, gscale, ctx->arena.param, ctx->arena.grad, ctx->arena.master, ctx->arena.m, ctx->arena.v, 0);
    return ZERO_OK;
}
static zero_result zero__cpu_bias_add(zero_ctx *ctx, float *y, int64_t ldy, const void *b, int bdt, int64_t rows,
                                      int64_t n) {
    int64_t j, r;
    (void)ctx;
    for (j = 0; j < n; j++) {
        float bj = zero__ld(b, j, bdt);
        for (r = 0; r < rows; r++) y[r * ldy + j] += bj;
    }
    return ZERO_OK;
}
static zero_result zero__cpu_bias_grad(zero_ctx *ctx, void *gb, int gdt, const float *dy, int64_t ld, int64_t rows,
                                       int64_t n) {
    int64_t j, r;
    (void)ctx;
    for (j = 0; j < n; j++) {
        float s = 0.0f;
        for (r = 0; r < rows; r++) s += dy[r * ld + j];
        zero__st(gb, j, gdt, zero__ld(gb, j, gdt) + s);
    }
    return ZERO_OK;
}
static zero_result zero__cpu_gelu(zero_ctx *ctx, float *y, const float *x, int64_t n) {
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) y[i] = zero__gelu(x[i], zero__gelu_th(x[i]));
    return ZERO_OK;
}
static zero_result zero__cpu_gelu_bwd(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n) {
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) dx[i] = dy[i] * zero__gelu_grad(x[i], zero__gelu_th(x[i]));
    return ZERO_OK;
}
static zero_result zero__cpu_xent(zero_ctx *ctx, float *loss, float *dlogits, const float *logits, const int32_t *labels,
                                  int64_t rows, int64_t classes, float dscale) {
    int64_t b, c;
    for (b = 0; b < rows; b++)
        if (labels[b] < 0 || labels[b] >= classes)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "zero_softmax_xent: label %d of row %lld is outside [0, %lld)", (int)labels[b], (long long)b,
                              (long long)classes);
    for (b = 0; b < rows; b++) {
        const float *l = logits + b * classes;
        float *d = dlogits + b * classes, mx = l[0], sum = 0.0f, inv;
        for (c = 1; c < classes; c++) mx = l[c] > mx ? l[c] : mx;
        for (c = 0; c < classes; c++) { d[c] = zero__expf(l[c] - mx); sum += d[c]; }
        loss[b] = zero__xent_loss(sum, l[labels[b]], mx);
        inv = 1.0f / sum;
        for (c = 0; c < classes; c++) d[c] = zero__xent_grad(d[c], inv, c == labels[b], dscale);
    }
    return ZERO_OK;
}
static void zero__cpu_mark(zero_ctx *ctx, uint64_t ticket) { (void)ctx; (void)ticket; }
static zero_result zero__cpu_task_begin(zero_ctx *ctx, uint64_t ticket) { (void)ctx; (void)ticket; return ZERO_OK; }
static zero_result zero__cpu_task_end(zero_ctx *ctx) { (void)ctx; return ZERO_OK; }
static zero_result zero__cpu_sync(zero_ctx *ctx, int s) { (void)ctx; (void)s; return ZERO_OK; }

ZERO__VT_BEGIN(zero__dev_vt, zero__cpu_dev)
    ZERO__VT_SET(name, "cpu") ZERO__VT_SET(host_access, 1) ZERO__VT_SET(init, zero__cpu_init)
    ZERO__VT_SET(fini, zero__cpu_fini) ZERO__VT_SET(alloc, zero__cpu_alloc) ZERO__VT_SET(free, zero__cpu_free)
    ZERO__VT_SET(host_alloc, zero__cpu_alloc) ZERO__VT_SET(host_free, zero__cpu_free)
    ZERO__VT_SET(prepare, zero__cpu_prepare) ZERO__VT_SET(copy, zero__cpu_copy)
    ZERO__VT_SET(fill0, zero__cpu_fill0) ZERO__VT_SET(sum_into, zero__cpu_sum_into)
    ZERO__VT_SET(grad_sumsq, zero__cpu_sumsq) ZERO__VT_SET(sum_norm, zero__cpu_sum_norm)
    ZERO__VT_SET(qp_encode, zero__cpu_qp_encode) ZERO__VT_SET(qp_sum, zero__cpu_qp_sum)
    ZERO__VT_SET(optimizer, zero__cpu_optimizer) ZERO__VT_SET(gemm, zero__gemm_host)
    ZERO__VT_SET(bias_add, zero__cpu_bias_add) ZERO__VT_SET(bias_grad, zero__cpu_bias_grad)
    ZERO__VT_SET(gelu, zero__cpu_gelu) ZERO__VT_SET(gelu_bwd, zero__cpu_gelu_bwd)
    ZERO__VT_SET(xent, zero__cpu_xent) ZERO__VT_SET(mark, zero__cpu_mark)
    ZERO__VT_SET(task_begin, zero__cpu_task_begin) ZERO__VT_SET(task_end, zero__cpu_task_end)
    ZERO__VT_SET(sync, zero__cpu_sync)
ZERO__VT_END(zero__dev_vt, zero__cpu_dev)

/* -- emu: the CPU device, except that device memory is a file mapped twice: the
   "device" address the engine and the user get is mapped PROT_NONE, so any host access
   to it faults, and the ops reach the memory through a second, writable mapping. It runs
   the engine exactly as the CUDA device does (only through the ops), on the CPU, with the
   CPU's arithmetic, so its results equal the CPU device's bit for bit. The address map is
   process-wide (see the list of process-wide state in >>base): the local comm's ops read
   other ranks' device memory. -- */
#if defined(__unix__) || defined(__APPLE__)
#define ZERO__HAVE_EMU 1
#define ZERO__EMU_MAX 4096
typedef struct zero__emu_map { char *dev, *alias; int64_t bytes; } zero__emu_map;
static zero__emu_map zero__emu_maps[ZERO__EMU_MAX];
static int zero__emu_used;         /* slots [0, used) may be occupied */
static zero__mutex zero__emu_mu = ZERO__MUTEX_INITIALIZER;

/* a device address -> the host-visible alias; any other address is returned as it is */
static void *zero__emu_tr(const void *p) {
    uintptr_t a = (uintptr_t)p;
    void *out = (void *)(uintptr_t)p;
    int i;
    if (!p) return NULL;
    zero__mutex_lock(&zero__emu_mu);
    for (i = 0; i < zero__emu_used; i++) {
        const zero__emu_map *m = &zero__emu_maps[i];
        if (m->dev && a >= (uintptr_t)m->dev && a < (uintptr_t)m->dev + (uintptr_t)m->bytes) {
            out = m->alias + (a - (uintptr_t)m->dev);
            break;
        }
    }
    zero__mutex_unlock(&zero__emu_mu);
    return out;
}
static int zero__emu_file(int64_t bytes) {
    const char *dirs[3];
    char path[512];
    int i, fd;
    dirs[0] = getenv("TMPDIR"); dirs[1] = "/tmp"; dirs[2] = "/dev/shm";
    for (i = 0; i < 3; i++) {
        static unsigned counter;        /* a unique name: pid, counter (O_EXCL refuses a clash) */
        if (!dirs[i] || !dirs[i][0]) continue;
        snprintf(path, sizeof path, "%s/zero_emu_%ld_%u", dirs[i], (long)getpid(),
                 __atomic_add_fetch(&counter, 1u, __ATOMIC_RELAXED));
        if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0) continue;
        unlink(path);
        if (ftruncate(fd, (off_t)bytes) == 0) return fd;
        close(fd);
    }
    return -1;
}
static void *zero__emu_alloc(zero_ctx *ctx, int64_t bytes) {
    int64_t len = zero__align_up(bytes, 1 << 16);
    void *dev, *alias;
    int fd, i;
    (void)ctx;
    if ((fd = zero__emu_file(len)) < 0) return NULL;
    dev = mmap(NULL, (size_t)len, PROT_NONE, MAP_SHARED, fd, 0);
    alias = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (dev == MAP_FAILED || alias == MAP_FAILED) {
        if (dev != MAP_FAILED) munmap(dev, (size_t)len);
        if (alias != MAP_FAILED) munmap(alias, (size_t)len);
        return NULL;
    }
    zero__mutex_lock(&zero__emu_mu);
    for (i = 0; i < ZERO__EMU_MAX && zero__emu_maps[i].dev; i++) {}
    if (i < ZERO__EMU_MAX) {
        zero__emu_maps[i].dev = (char *)dev;
        zero__emu_maps[i].alias = (char *)alias;
        zero__emu_maps[i].bytes = len;
        if (i >= zero__emu_used) zero__emu_used = i + 1;
    }
    zero__mutex_unlock(&zero__emu_mu);
    if (i == ZERO__EMU_MAX) { munmap(dev, (size_t)len); munmap(alias, (size_t)len); return NULL; }
    return dev;
}
static void zero__emu_free(zero_ctx *ctx, void *p) {
    int i;
    (void)ctx;
    if (!p) return;
    zero__mutex_lock(&zero__emu_mu);
    for (i = 0; i < zero__emu_used; i++)
        if (zero__emu_maps[i].dev == (char *)p) {
            munmap(zero__emu_maps[i].dev, (size_t)zero__emu_maps[i].bytes);
            munmap(zero__emu_maps[i].alias, (size_t)zero__emu_maps[i].bytes);
            memset(&zero__emu_maps[i], 0, sizeof zero__emu_maps[i]);
            break;
        }
    zero__mutex_unlock(&zero__emu_mu);
}
static zero_result zero__emu_copy(zero_ctx *ctx, int s, void *dst, const void *src, int64_t bytes) {
    return zero__cpu_copy(ctx, s, zero__emu_tr(dst), zero__emu_tr(src), bytes);
}
/* A kernel's argument: device memory, as a GPU kernel requires (copies may take host
   memory, kernels may not); anything else is refused, as a GPU would fault on it. */
static void *zero__emu_k(zero_ctx *ctx, int s, const void *p, const char *op, int *bad) {
    void *a = zero__emu_tr(p);
    if (p && a == p && !*bad) {
        *bad = 1;
        if (s == ZERO__S_COMM && ctx->comm)
            snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s (EMU device): %p is not device memory", op, p);
        else
            zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                       "%s (EMU device): %p is not device memory; on a device, kernels take device pointers "
                       "(zero_device_alloc, zero_copy)", op, p);
    }
    return a;
}
#define ZERO__EMU_K(p, op) zero__emu_k(ctx, s, (p), (op), &bad)
static zero_result zero__emu_fill0(zero_ctx *ctx, int s, void *dst, int64_t bytes) {
    int bad = 0;
    void *d = ZERO__EMU_K(dst, "fill");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_fill0(ctx, s, d, bytes);
}
static zero_result zero__emu_sum_into(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                      int64_t count, int accumulate) {
    const void *tr[ZERO__MAX_RANKS];
    void *o;
    int k, bad = 0;
    if (nin > ZERO__MAX_RANKS) return ZERO_ERR_UNSUPPORTED;
    for (k = 0; k < nin; k++) tr[k] = ZERO__EMU_K(ins[k], "sum");
    o = ZERO__EMU_K(out, "sum");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_sum_into(ctx, s, o, rdt, tr, nin, sdt, count, accumulate);
}
static zero_result zero__emu_qp_encode(zero_ctx *ctx, int s, void *dst, const void *x, int xdt, int64_t n, int bits,
                                       int block) {
    int bad = 0;
    void *d = ZERO__EMU_K(dst, "ZeRO++ encode");
    const void *xx = ZERO__EMU_K(x, "ZeRO++ encode");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_qp_encode(ctx, s, d, xx, xdt, n, bits, block);
}
static zero_result zero__emu_qp_sum(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ps, int np, int64_t n,
                                    int bits, int block, int accumulate) {
    const void *tr[ZERO__MAX_RANKS];
    void *o;
    int k, bad = 0;
    if (np > ZERO__MAX_RANKS) return ZERO_ERR_UNSUPPORTED;
    for (k = 0; k < np; k++) tr[k] = ZERO__EMU_K(ps[k], "ZeRO++ decode");
    o = ZERO__EMU_K(out, "ZeRO++ decode");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_qp_sum(ctx, s, o, rdt, tr, np, n, bits, block, accumulate);
}
static zero_result zero__emu_sumsq(zero_ctx *ctx, int r, double *out) {
    *out = zero__sumsq_slice(ctx, zero__emu_tr(ctx->arena.grad), r);
    return ZERO_OK;
}
static zero_result zero__emu_optimizer(zero_ctx *ctx, float gscale) {
    ctx->opt.grads_cleared = zero__pass_clears(ctx);
    zero__apply_optimizer(ctx, gscale, zero__emu_tr(ctx->arena.param), zero__emu_tr(ctx->arena.grad),
                          (float *)zero__emu_tr(ctx->arena.master), (float *)zero__emu_tr(ctx->arena.m),
                          (float *)zero__emu_tr(ctx->arena.v), 0);
    return ZERO_OK;
}
static zero_result zero__emu_gemm(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                                  int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc) {
    int s = ZERO__S_COMPUTE, bad = 0;
    const float *a = (const float *)ZERO__EMU_K(A, "zero_sgemm"), *b = (const float *)ZERO__EMU_K(B, "zero_sgemm");
    float *c = (float *)ZERO__EMU_K(C, "zero_sgemm");
    return bad ? ZERO_ERR_INVALID_ARG : zero__gemm_host(ctx, ta, tb, M, N, K, a, lda, b, ldb, accumulate, c, ldc);
}
static zero_result zero__emu_bias_add(zero_ctx *ctx, float *y, int64_t ldy, const void *b, int bdt, int64_t rows,
                                      int64_t n) {
    int s = ZERO__S_COMPUTE, bad = 0;
    float *yy = (float *)ZERO__EMU_K(y, "bias");
    const void *bb = ZERO__EMU_K(b, "bias");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_bias_add(ctx, yy, ldy, bb, bdt, rows, n);
}
static zero_result zero__emu_bias_grad(zero_ctx *ctx, void *gb, int gdt, const float *dy, int64_t ld, int64_t rows,
                                       int64_t n) {
    int s = ZERO__S_COMPUTE, bad = 0;
    void *g = ZERO__EMU_K(gb, "bias gradient");
    const float *d = (const float *)ZERO__EMU_K(dy, "bias gradient");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_bias_grad(ctx, g, gdt, d, ld, rows, n);
}
static zero_result zero__emu_gelu(zero_ctx *ctx, float *y, const float *x, int64_t n) {
    int s = ZERO__S_COMPUTE, bad = 0;
    float *yy = (float *)ZERO__EMU_K(y, "zero_gelu");
    const float *xx = (const float *)ZERO__EMU_K(x, "zero_gelu");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_gelu(ctx, yy, xx, n);
}
static zero_result zero__emu_gelu_bwd(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n) {
    int s = ZERO__S_COMPUTE, bad = 0;
    float *d = (float *)ZERO__EMU_K(dx, "zero_gelu_backward");
    const float *xx = (const float *)ZERO__EMU_K(x, "zero_gelu_backward");
    const float *g = (const float *)ZERO__EMU_K(dy, "zero_gelu_backward");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_gelu_bwd(ctx, d, xx, g, n);
}
static zero_result zero__emu_xent(zero_ctx *ctx, float *loss, float *dlogits, const float *logits, const int32_t *labels,
                                  int64_t rows, int64_t classes, float dscale) {
    int s = ZERO__S_COMPUTE, bad = 0;
    float *l = (float *)ZERO__EMU_K(loss, "zero_softmax_xent"), *d = (float *)ZERO__EMU_K(dlogits, "zero_softmax_xent");
    const float *lg = (const float *)ZERO__EMU_K(logits, "zero_softmax_xent");
    const int32_t *lb = (const int32_t *)ZERO__EMU_K(labels, "zero_softmax_xent");
    return bad ? ZERO_ERR_INVALID_ARG : zero__cpu_xent(ctx, l, d, lg, lb, rows, classes, dscale);
}
#undef ZERO__EMU_K
ZERO__VT_BEGIN(zero__dev_vt, zero__emu_dev)
    ZERO__VT_SET(name, "emu") ZERO__VT_SET(host_access, 0) ZERO__VT_SET(init, zero__cpu_init)
    ZERO__VT_SET(fini, zero__cpu_fini) ZERO__VT_SET(alloc, zero__emu_alloc) ZERO__VT_SET(free, zero__emu_free)
    ZERO__VT_SET(host_alloc, zero__cpu_alloc) ZERO__VT_SET(host_free, zero__cpu_free)
    ZERO__VT_SET(prepare, zero__cpu_prepare) ZERO__VT_SET(copy, zero__emu_copy)
    ZERO__VT_SET(fill0, zero__emu_fill0) ZERO__VT_SET(sum_into, zero__emu_sum_into)
    ZERO__VT_SET(grad_sumsq, zero__emu_sumsq) ZERO__VT_SET(sum_norm, NULL)
    ZERO__VT_SET(qp_encode, zero__emu_qp_encode) ZERO__VT_SET(qp_sum, zero__emu_qp_sum)
    ZERO__VT_SET(optimizer, zero__emu_optimizer) ZERO__VT_SET(gemm, zero__emu_gemm)
    ZERO__VT_SET(bias_add, zero__emu_bias_add) ZERO__VT_SET(bias_grad, zero__emu_bias_grad)
    ZERO__VT_SET(gelu, zero__emu_gelu) ZERO__VT_SET(gelu_bwd, zero__emu_gelu_bwd)
    ZERO__VT_SET(xent, zero__emu_xent) ZERO__VT_SET(mark, zero__cpu_mark)
    ZERO__VT_SET(task_begin, zero__cpu_task_begin) ZERO__VT_SET(task_end, zero__cpu_task_end)
    ZERO__VT_SET(sync, zero__cpu_sync)
ZERO__VT_END(zero__dev_vt, zero__emu_dev)
#endif /* emu */

/* the CUDA device's pinned staging buffers: two of ZERO_STAGING_BYTES each (the includer may
   define it: a multiple of 64, at least 64; ZERO_STAGE_BYTES is its old name, still taken) */
#if defined(ZERO_STAGE_BYTES) && !defined(ZERO_STAGING_BYTES)
#define ZERO_STAGING_BYTES ZERO_STAGE_BYTES
#endif
#ifndef ZERO_STAGING_BYTES
#define ZERO_STAGING_BYTES (4 << 20)
#endif
#if (ZERO_STAGING_BYTES) < 64 || (ZERO_STAGING_BYTES) % 64 != 0
#error "ZERO_STAGING_BYTES must be a multiple of 64, at least 64"
#endif

/* -- cuda (ZERO_CUDA): arenas in the memory of the thread's current device at
   zero_create; the compute stream is desc.cuda_stream (your kernels' stream), the comm
   stream a non-blocking stream of our own; an event per stream-ring slot orders each
   comm task after the compute work queued before it; kernels from zero_kernels.cu,
   GEMMs through cuBLAS on the compute stream. -- */
/* fp32 host values <-> device memory of dtype dt, through a small host buffer (the
   conversion is the CPU's, so every device stores the same bits): the devices' put_f32 /
   get_f32 when they have none of their own (the CUDA device's, until zero_build made its
   pinned staging buffers) */
#define ZERO__XFER 4096
static zero_result zero__bounce_put_f32(zero_ctx *ctx, void *dst, int dt, const float *src, int64_t n) {
    unsigned char buf[ZERO__XFER * 4];
    int64_t i, es = (int64_t)zero__esize(dt);
    zero_result r;
    for (i = 0; i < n; i += ZERO__XFER) {
        int64_t c = n - i < ZERO__XFER ? n - i : ZERO__XFER;
        zero__from_f32(buf, (zero_dtype)dt, src + i, c);
        if ((r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, (char *)dst + i * es, buf, c * es)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}
static zero_result zero__bounce_get_f32(zero_ctx *ctx, float *dst, const void *src, int dt, int64_t n) {
    unsigned char buf[ZERO__XFER * 4];
    int64_t i, es = (int64_t)zero__esize(dt);
    zero_result r;
    for (i = 0; i < n; i += ZERO__XFER) {
        int64_t c = n - i < ZERO__XFER ? n - i : ZERO__XFER;
        if ((r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, buf, (const char *)src + i * es, c * es)) != ZERO_OK) return r;
        zero__to_f32(dst + i, buf, (zero_dtype)dt, c);
    }
    return ZERO_OK;
}

#ifdef ZERO_CUDA

typedef struct zero__cuda {
    int device;
    cudaStream_t compute, comm;
    cudaEvent_t ev[ZERO__STREAM_CAP];
    int mark_err[ZERO__STREAM_CAP]; /* cudaEventRecord's result per slot, reported by task_begin */
    int nev;
    cublasHandle_t blas;
    zero__kchunk *chunks;           /* device: the optimizer's chunk table */
    int64_t nchunks;
    zero__knblk *blk;               /* device: norm blocks, rank-major (stage 0: every rank's slice) */
    int64_t nblk;                   /* per slice */
    double *bout;                   /* device: the blocks' sums */
    unsigned char *staging[2];      /* pinned: zero__cuda_put_f32 / get_f32's double buffer */
    cudaEvent_t xev[2];             /* the copy out of / into staging[i]; the host tier's pipeline */
    int nxev;
    /* the host tier's pipeline: its copies to the host and to the device on streams of their
       own, so the two directions overlap; pev[0]: the compute stream's work before it,
       pev[1]: its last copy to the device; pipe: a pipeline is open (its streams waited) */
    cudaStream_t d2h, h2d;
    cudaEvent_t pev[2];
    int npev, pipe;
    int comm_pending;               /* comm-stream ops issued since the comm stream was last waited for */
} zero__cuda;

/* a failed CUDA call: the message goes where the stream's error goes (comm thread) or to
   the context (caller's thread) */
static zero_result zero__cuda_err(zero_ctx *ctx, int s, int e, const char *what) {
    if (e == 0) return ZERO_OK;
    if (s == ZERO__S_COMM && ctx->comm)
        snprintf(ctx->comm->err, sizeof ctx->comm->err, "CUDA: %s failed: %s (%s)", what,
                 cudaGetErrorName((cudaError_t)e), cudaGetErrorString((cudaError_t)e));
    else
        zero__fail(ctx, ZERO_ERR_DEVICE, ZERO_LOGITEM_DEVICE_ERROR, "CUDA: %s failed: %s (%s)", what,
                   cudaGetErrorName((cudaError_t)e), cudaGetErrorString((cudaError_t)e));
    return ZERO_ERR_DEVICE;
}
static zero__cuda *zero__cu(zero_ctx *ctx) { return (zero__cuda *)ctx->dev_state; }
/* the host waiting for the device, and device allocations: every one goes through these,
   counted for zero_stats (host_syncs, device_allocs). cudaFree synchronizes the device too. */
static int zero__cu_sync(zero_ctx *ctx, cudaStream_t s) {
    __atomic_add_fetch(&ctx->host_syncs, 1, __ATOMIC_RELAXED);
    return (int)cudaStreamSynchronize(s);
}
static int zero__cu_wait(zero_ctx *ctx, cudaEvent_t ev) {
    __atomic_add_fetch(&ctx->host_syncs, 1, __ATOMIC_RELAXED);
    return (int)cudaEventSynchronize(ev);
}
static int zero__cu_malloc(zero_ctx *ctx, void **p, size_t bytes) {
    __atomic_add_fetch(&ctx->device_allocs, 1, __ATOMIC_RELAXED);
    return (int)cudaMalloc(p, bytes);
}
static void zero__cu_free(zero_ctx *ctx, void *p) {
    if (!p) return;
    __atomic_add_fetch(&ctx->host_syncs, 1, __ATOMIC_RELAXED);
    cudaFree(p);
}
static void *zero__cuda_comm_stream(zero_ctx *ctx) { return (void *)zero__cu(ctx)->comm; }
static cudaStream_t zero__cu_stream(zero_ctx *ctx, int s) {
    return s == ZERO__S_COMM ? zero__cu(ctx)->comm : zero__cu(ctx)->compute;
}

static void zero__cuda_fini(zero_ctx *ctx) {
    zero__cuda *cu = zero__cu(ctx);
    int i;
    if (!cu) return;
    cudaSetDevice(cu->device);
    if (cu->comm) zero__cu_sync(ctx, cu->comm);
    if (cu->compute) zero__cu_sync(ctx, cu->compute);
    if (cu->d2h) zero__cu_sync(ctx, cu->d2h);
    if (cu->h2d) zero__cu_sync(ctx, cu->h2d);
    zero__cu_free(ctx, cu->chunks);
    zero__cu_free(ctx, cu->blk);
    zero__cu_free(ctx, cu->bout);
    for (i = 0; i < 2; i++) if (cu->staging[i]) cudaFreeHost(cu->staging[i]);
    for (i = 0; i < cu->nev; i++) cudaEventDestroy(cu->ev[i]);
    for (i = 0; i < cu->nxev; i++) cudaEventDestroy(cu->xev[i]);
    for (i = 0; i < cu->npev; i++) cudaEventDestroy(cu->pev[i]);
    if (cu->blas) cublasDestroy(cu->blas);
    if (cu->comm) cudaStreamDestroy(cu->comm);
    if (cu->d2h) cudaStreamDestroy(cu->d2h);
    if (cu->h2d) cudaStreamDestroy(cu->h2d);
    zero__raw_free(&ctx->desc.allocator, cu);
    ctx->dev_state = NULL;
}
static zero_result zero__cuda_init(zero_ctx *ctx) {
    zero__cuda *cu;
    int n = 0, e;
    if ((e = (int)cudaGetDeviceCount(&n)) != 0 || n <= 0) {
        const char *why = e ? cudaGetErrorString((cudaError_t)e) : "it returned 0 devices";
        return zero__fail(ctx, ZERO_ERR_NO_DEVICE, ZERO_LOGITEM_NO_DEVICE,
                          "zero_create: desc.device is ZERO_DEVICE_CUDA but there is no CUDA device: cudaGetDeviceCount: %s",
                          why);
    }
    if (!(cu = (zero__cuda *)zero__raw_alloc(&ctx->desc.allocator, sizeof *cu)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_create: out of memory");
    memset(cu, 0, sizeof *cu);
    ctx->dev_state = cu;
    cu->compute = (cudaStream_t)ctx->desc.cuda_stream;
    if ((e = (int)cudaGetDevice(&cu->device)) != 0 ||
        (e = (int)cudaStreamCreateWithFlags(&cu->comm, cudaStreamNonBlocking)) != 0) {
        zero__cuda_fini(ctx);
        return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "creating the comm stream");
    }
    for (cu->nev = 0; cu->nev < ZERO__STREAM_CAP; cu->nev++)
        if ((e = (int)cudaEventCreateWithFlags(&cu->ev[cu->nev], cudaEventDisableTiming)) != 0) {
            zero__cuda_fini(ctx);
            return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "cudaEventCreate");
        }
    for (cu->nxev = 0; cu->nxev < 2; cu->nxev++)
        if ((e = (int)cudaEventCreateWithFlags(&cu->xev[cu->nxev], cudaEventDisableTiming)) != 0) {
            zero__cuda_fini(ctx);
            return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "cudaEventCreate");
        }
    for (cu->npev = 0; cu->npev < 2; cu->npev++)
        if ((e = (int)cudaEventCreateWithFlags(&cu->pev[cu->npev], cudaEventDisableTiming)) != 0) {
            zero__cuda_fini(ctx);
            return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "cudaEventCreate");
        }
    if ((e = (int)cudaStreamCreateWithFlags(&cu->d2h, cudaStreamNonBlocking)) != 0 ||
        (e = (int)cudaStreamCreateWithFlags(&cu->h2d, cudaStreamNonBlocking)) != 0) {
        zero__cuda_fini(ctx);
        return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "creating the offload pipeline's streams");
    }
    if (cublasCreate(&cu->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(cu->blas, cu->compute) != CUBLAS_STATUS_SUCCESS) {
        cu->blas = NULL;
        zero__cuda_fini(ctx);
        return zero__fail(ctx, ZERO_ERR_DEVICE, ZERO_LOGITEM_DEVICE_ERROR, "zero_create: cublasCreate failed");
    }
    return ZERO_OK;
}
/* zeroed on the compute stream and waited for: a plain cudaMemset runs on the legacy
   default stream, which a non-blocking desc.cuda_stream does not wait for, so it could
   land after the first values written into the arena (zero_param_set_f32) */
static void *zero__cuda_alloc(zero_ctx *ctx, int64_t bytes) {
    zero__cuda *cu = zero__cu(ctx);
    void *p = NULL;
    cudaSetDevice(cu->device);
    if (zero__cu_malloc(ctx, &p, (size_t)bytes) != 0) { cudaGetLastError(); return NULL; }
    if (cudaMemsetAsync(p, 0, (size_t)bytes, cu->compute) != cudaSuccess || zero__cu_sync(ctx, cu->compute) != 0) {
        cudaGetLastError();
        zero__cu_free(ctx, p);
        return NULL;
    }
    return p;
}
static void zero__cuda_free(zero_ctx *ctx, void *p) {
    cudaSetDevice(zero__cu(ctx)->device);
    zero__cu_free(ctx, p);   /* implicitly synchronizes: nothing may still use p */
}
static void *zero__cuda_host_alloc(zero_ctx *ctx, int64_t bytes) {
    void *p = NULL;
    (void)ctx;
    if (cudaHostAlloc(&p, (size_t)bytes, cudaHostAllocDefault) != cudaSuccess) { cudaGetLastError(); return NULL; }
    memset(p, 0, (size_t)bytes);
    return p;
}
static void zero__cuda_host_free(zero_ctx *ctx, void *p) {
    (void)ctx;
    if (p) cudaFreeHost(p);
}
/* the optimizer's chunk table and the norm's block table, built once from the segments
   (counted in the plan: zero__cuda_table_bytes), and the pinned staging buffers (counted in
   the plan under ZERO_TIER_HOST, ZERO_CAT_BUFFERS: 2 * ZERO_STAGING_BYTES) */
static zero_result zero__cuda_prepare(zero_ctx *ctx) {
    zero__cuda *cu = zero__cu(ctx);
    zero__kchunk *ch;
    zero__knblk *bl;
    int64_t nch = 0, nb = 0, c, b, o;
    int si, i, r, R = ctx->desc.stage == 0 ? ctx->world : 1, e = 0;
    for (si = 0; si < ctx->lay.num_segs; si++) nch += (ctx->lay.segs[si].n + ZERO__KCHUNK - 1) / ZERO__KCHUNK;
    ch = (zero__kchunk *)zero__raw_alloc(&ctx->desc.allocator, sizeof *ch * (size_t)(nch + 1));
    bl = (zero__knblk *)zero__raw_alloc(&ctx->desc.allocator, sizeof *bl * (size_t)(ctx->opt.norm_blocks * R + 1));
    if (!ch || !bl) {
        zero__raw_free(&ctx->desc.allocator, ch);
        zero__raw_free(&ctx->desc.allocator, bl);
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: out of memory");
    }
    for (si = 0, c = 0; si < ctx->lay.num_segs; si++) {
        const zero__segment *sg = &ctx->lay.segs[si];
        for (o = 0; o < sg->n; o += ZERO__KCHUNK, c++) {
            ch[c].grad_idx = sg->grad_idx + o;
            ch[c].state_idx = sg->state_idx + o;
            ch[c].param_idx = sg->param_idx + o;
            ch[c].n = (int32_t)(sg->n - o < ZERO__KCHUNK ? sg->n - o : ZERO__KCHUNK);
            ch[c].decay = sg->decay;
        }
    }
    for (r = 0; r < R; r++) {       /* the same blocks as zero__norm_part */
        int rk = ctx->desc.stage == 0 ? r : ctx->prank;
        for (i = 0; i < ctx->num_modules; i++) {
            const zero__module_rec *m = &ctx->modules[i];
            int64_t per = m->lay.span / ctx->world, base;
            if (m->frozen) continue;
            base = ctx->desc.stage < 2 ? m->lay.train_off + (int64_t)rk * per : m->lay.train_off / ctx->world;
            for (b = 0; b * ZERO__NORM_BLOCK < per; b++, nb++) {
                bl[nb].idx = base + b * ZERO__NORM_BLOCK;
                bl[nb].n = per - b * ZERO__NORM_BLOCK < ZERO__NORM_BLOCK ? per - b * ZERO__NORM_BLOCK : ZERO__NORM_BLOCK;
            }
        }
    }
    cu->nchunks = nch;
    cu->nblk = ctx->opt.norm_blocks;
    /* the copies run on the compute stream, where the kernels that read the tables run (a
       cudaMemcpy from pageable memory may return before its legacy-stream DMA lands, and a
       non-blocking desc.cuda_stream does not wait for that stream), then are waited for */
    cudaSetDevice(cu->device);
    if (nch > 0 && (e = zero__cu_malloc(ctx, (void **)&cu->chunks, sizeof *ch * (size_t)nch)) == 0)
        e = (int)cudaMemcpyAsync(cu->chunks, ch, sizeof *ch * (size_t)nch, cudaMemcpyHostToDevice, cu->compute);
    if (e == 0 && nb > 0 && (e = zero__cu_malloc(ctx, (void **)&cu->blk, sizeof *bl * (size_t)nb)) == 0 &&
        (e = (int)cudaMemcpyAsync(cu->blk, bl, sizeof *bl * (size_t)nb, cudaMemcpyHostToDevice, cu->compute)) == 0)
        e = zero__cu_malloc(ctx, (void **)&cu->bout, sizeof(double) * (size_t)nb);
    if (e == 0) e = zero__cu_sync(ctx, cu->compute);
    zero__raw_free(&ctx->desc.allocator, ch);
    zero__raw_free(&ctx->desc.allocator, bl);
    if (e) return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "zero_build: the optimizer's tables");
    ctx->lay.bytes[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += (int64_t)sizeof *ch * nch + (int64_t)(sizeof *bl + sizeof(double)) * nb;
    for (i = 0; i < 2; i++)
        if (!cu->staging[i] && !(cu->staging[i] = (unsigned char *)zero__cuda_host_alloc(ctx, ZERO_STAGING_BYTES)))
            return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                              "zero_build: CUDA: cudaHostAlloc failed for the pinned staging buffers (2 x %lld bytes): out of memory",
                              (long long)ZERO_STAGING_BYTES);
    ctx->lay.bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += 2 * (int64_t)ZERO_STAGING_BYTES;
    return ZERO_OK;
}
/* device memory (not pinned, managed or plain host memory, which the host may read) */
static int zero__cu_on_device(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
    return a.type == cudaMemoryTypeDevice;
}
/* an op's launch result e (the ops' contract, >>device): an op on the comm stream that wrote
   device memory stays in flight, ordered on the comm stream (comm_pending: flush or task_end
   waits for it); one that wrote memory the host can read is waited for at once */
static zero_result zero__cuda_issued(zero_ctx *ctx, int s, int e, const char *what, const void *out) {
    zero__cuda *cu = zero__cu(ctx);
    if (e == 0 && s == ZERO__S_COMM) {
        if (zero__cu_on_device(out)) __atomic_store_n(&cu->comm_pending, 1, __ATOMIC_RELAXED);
        else e = zero__cu_sync(ctx, cu->comm);
    }
    return zero__cuda_err(ctx, s, e, what);
}
/* copies on the compute stream are waited for (the ops' contract: zero_copy's source may be
   the caller's memory, reused once it returns); on the comm stream, as zero__cuda_issued */
static zero_result zero__cuda_copy(zero_ctx *ctx, int s, void *dst, const void *src, int64_t bytes) {
    cudaStream_t st = zero__cu_stream(ctx, s);
    int e;
    if (bytes <= 0 || dst == src) return ZERO_OK;
    if ((e = (int)cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, st)) != 0)
        return zero__cuda_err(ctx, s, e, "cudaMemcpyAsync");
    if (s == ZERO__S_COMM) return zero__cuda_issued(ctx, s, 0, "a copy on the comm stream", dst);
    return zero__cuda_err(ctx, s, zero__cu_sync(ctx, st), "cudaStreamSynchronize after a copy");
}
/* the comm stream's ops done (the local comm, before other ranks read what they wrote or
   before they read this rank's buffers): a wait only when one is in flight; a failed wait
   leaves it pending, so the next one reports the (sticky) error too */
static zero_result zero__cuda_flush(zero_ctx *ctx) {
    zero__cuda *cu = zero__cu(ctx);
    int e;
    if (!__atomic_load_n(&cu->comm_pending, __ATOMIC_RELAXED)) return ZERO_OK;
    if ((e = zero__cu_sync(ctx, cu->comm)) != 0)
        return zero__cuda_err(ctx, ZERO__S_COMM, e, "cudaStreamSynchronize (the comm stream's ops)");
    __atomic_store_n(&cu->comm_pending, 0, __ATOMIC_RELAXED);
    return ZERO_OK;
}
static zero_result zero__cuda_fill0(zero_ctx *ctx, int s, void *dst, int64_t bytes) {
    if (bytes <= 0) return ZERO_OK;
    return zero__cuda_issued(ctx, s, (int)cudaMemsetAsync(dst, 0, (size_t)bytes, zero__cu_stream(ctx, s)), "cudaMemsetAsync",
                             dst);
}
static zero_result zero__cuda_sum_into(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                       int64_t count, int accumulate) {
    if (count <= 0) return ZERO_OK;
    return zero__cuda_issued(ctx, s, zero__k_sum_into(out, rdt, ins, nin, sdt, count, accumulate, zero__cu_stream(ctx, s)),
                             "the summing kernel", out);
}
/* ZeRO++'s payloads (zero_kernels.cu: zk_qp_*), on the stream of s */
static zero_result zero__cuda_qp_encode(zero_ctx *ctx, int s, void *dst, const void *x, int xdt, int64_t n, int bits,
                                        int block) {
    if (n <= 0) return ZERO_OK;
    return zero__cuda_issued(ctx, s, zero__k_qp_encode(dst, x, xdt, n, bits, block, zero__cu_stream(ctx, s)),
                             "the ZeRO++ encoding kernel", dst);
}
static zero_result zero__cuda_qp_sum(zero_ctx *ctx, int s, void *out, int rdt, const void *const *ps, int np, int64_t n,
                                     int bits, int block, int accumulate) {
    if (n <= 0) return ZERO_OK;
    if (np > ZERO__K_MAXIN) {       /* qgz: one payload per node */
        if (s == ZERO__S_COMM && ctx->comm)
            snprintf(ctx->comm->err, sizeof ctx->comm->err, "CUDA: the ZeRO++ decoding kernel adds at most %d payloads "
                     "(nodes) in order; this run has %d", ZERO__K_MAXIN, np);
        else
            zero__fail(ctx, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_DEVICE_ERROR, "CUDA: the ZeRO++ decoding kernel adds at "
                       "most %d payloads (nodes) in order; this run has %d", ZERO__K_MAXIN, np);
        return ZERO_ERR_UNSUPPORTED;
    }
    return zero__cuda_issued(ctx, s, zero__k_qp_sum(out, rdt, ps, np, n, bits, block, accumulate, zero__cu_stream(ctx, s)),
                             "the ZeRO++ decoding kernel", out);
}
/* the norm's blocks: computed into bout (rank r's slice at stage 0) by zk_sumsq, for the
   modules whose last reduction did not already (norm_blocks: norm.taken), in runs of
   consecutive blocks; then copied back and added in order, as on the CPU: one host wait */
static zero_result zero__cuda_sumsq(zero_ctx *ctx, int r, double *out) {
    zero__cuda *cu = zero__cu(ctx);
    int64_t off = ctx->desc.stage == 0 ? (int64_t)r * cu->nblk : 0, b, first = 0, run = 0, run0 = 0;
    double s = 0.0;
    int e = 0, i;
    if (cu->nblk == 0) { *out = 0.0; return ZERO_OK; }
    for (i = 0; i <= ctx->num_modules && e == 0; i++) {
        const zero__module_rec *m = i < ctx->num_modules ? &ctx->modules[i] : NULL;
        int64_t nb = m && !m->frozen ? (m->lay.span / ctx->world + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK : 0;
        if (m && m->frozen) continue;
        if (m && !m->norm.taken) {
            if (!run) run0 = first;
            run += nb;
        } else if (run) {           /* a taken module or the end: the run so far */
            e = zero__k_sumsq(ctx->arena.grad, (int)ctx->desc.grad_accum_dtype, cu->blk + off + run0, run,
                              cu->bout + off + run0, cu->compute);
            run = 0;
        }
        first += nb;
    }
    if (e == 0)
        e = (int)cudaMemcpyAsync(ctx->opt.norm_part, cu->bout + off, sizeof(double) * (size_t)cu->nblk,
                                 cudaMemcpyDeviceToHost, cu->compute);
    if (e == 0) e = zero__cu_sync(ctx, cu->compute);
    if (e) return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "the gradient norm");
    for (b = 0; b < cu->nblk; b++) s += ctx->opt.norm_part[b];      /* in order, as on the CPU */
    *out = s;
    return ZERO_OK;
}
/* the norm's blocks of a module's reduced slice, right after its reduction on the comm
   stream (zk_sumsq on the module's entries of the block table, into bout): grad_sumsq then
   skips it, so the step does not read the gradients again */
static zero_result zero__cuda_norm_blocks(zero_ctx *ctx, int s, const void *out, int64_t count, double *blk) {
    zero__cuda *cu = zero__cu(ctx);
    int64_t first = blk - ctx->opt.norm_part, nb = (count + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK;
    int64_t off = ctx->desc.stage == 0 ? (int64_t)ctx->prank * cu->nblk : 0, per = 0, idx = -1;
    int i;
    for (i = 0; i < ctx->num_modules; i++) {       /* the module whose blocks start at first */
        const zero__module_rec *m = &ctx->modules[i];
        if (m->frozen || m->norm.first != first) continue;
        per = m->lay.span / ctx->world;
        idx = ctx->desc.stage < 2 ? m->lay.train_off + (int64_t)ctx->prank * per : m->lay.train_off / ctx->world;
        break;
    }
    if (idx < 0 || per != count || first + nb > cu->nblk ||
        (const char *)out != (const char *)zero__at(ctx->arena.grad, idx, (int)ctx->desc.grad_accum_dtype))
        return zero__cuda_err(ctx, s, (int)cudaErrorInvalidValue, "the norm's blocks of a module's slice (internal: "
                              "not a module's slice)");
    return zero__cuda_issued(ctx, s, zero__k_sumsq(ctx->arena.grad, (int)ctx->desc.grad_accum_dtype, cu->blk + off + first, nb,
                                                   cu->bout + off + first, zero__cu_stream(ctx, s)),
                             "the norm's blocks", cu->bout + off + first);
}
static zero_result zero__cuda_optimizer(zero_ctx *ctx, float gscale) {
    zero__cuda *cu = zero__cu(ctx);
    zero__optk k;
    zero__opt_fn fn;
    if (cu->nchunks == 0) return ZERO_OK;
    zero__opt_setup(ctx, gscale, &k, &fn);
    return zero__cuda_err(ctx, ZERO__S_COMPUTE,
                          zero__k_opt(&k, cu->chunks, cu->nchunks, ctx->arena.grad, ctx->arena.param, ctx->arena.master,
                                      ctx->arena.m, ctx->arena.v, cu->compute), "the optimizer kernel");
}
/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
static zero_result zero__cuda_gemm(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                                   int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc) {
    float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t st;
    if (M == 0 || N == 0) return ZERO_OK;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
        return zero__fail(ctx, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION, "zero_sgemm: sizes beyond 2^31 (cuBLAS)");
    st = cublasSgemm(zero__cu(ctx)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
                     (int)K, &one, B, (int)ldb, A, (int)lda, &beta, C, (int)ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
        return zero__fail(ctx, ZERO_ERR_DEVICE, ZERO_LOGITEM_DEVICE_ERROR, "cublasSgemm failed (status %d)", (int)st);
    return ZERO_OK;
}
static zero_result zero__cuda_bias_add(zero_ctx *ctx, float *y, int64_t ldy, const void *b, int bdt, int64_t rows,
                                       int64_t n) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, zero__k_bias_add(y, ldy, b, bdt, rows, n, zero__cu(ctx)->compute),
                          "the bias kernel");
}
static zero_result zero__cuda_bias_grad(zero_ctx *ctx, void *gb, int gdt, const float *dy, int64_t ld, int64_t rows,
                                        int64_t n) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, zero__k_bias_grad(gb, gdt, dy, ld, rows, n, zero__cu(ctx)->compute),
                          "the bias-gradient kernel");
}
static zero_result zero__cuda_gelu(zero_ctx *ctx, float *y, const float *x, int64_t n) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, zero__k_gelu_fwd(y, x, n, zero__cu(ctx)->compute), "the GELU kernel");
}
static zero_result zero__cuda_gelu_bwd(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, zero__k_gelu_bwd(dx, x, dy, n, zero__cu(ctx)->compute), "the GELU kernel");
}
static zero_result zero__cuda_xent(zero_ctx *ctx, float *loss, float *dlogits, const float *logits, const int32_t *labels,
                                   int64_t rows, int64_t classes, float dscale) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE,
                          zero__k_xent(loss, dlogits, logits, labels, rows, classes, dscale, zero__cu(ctx)->compute),
                          "the cross-entropy kernel");
}
/* mark cannot fail, so a failed record is kept for task_begin: waiting on an event whose
   record failed returns at once (the event holds an older record, or none), so the comm task
   would run before the compute work it needs. (Runs under the stream lock, before the worker
   can see the task: task_begin reads mark_err after it.) */
static void zero__cuda_mark(zero_ctx *ctx, uint64_t ticket) {
    zero__cuda *cu = zero__cu(ctx);
    cu->mark_err[ticket % ZERO__STREAM_CAP] = (int)cudaEventRecord(cu->ev[ticket % ZERO__STREAM_CAP], cu->compute);
}
/* A comm task starts after the compute work queued before it (mark's event). Over NCCL
   (device_ordered: it touches only this rank's memory, on this comm stream) the comm stream
   waits for that event on the device and the comm thread goes on; the collective's one
   host wait (zero__nccl_wait: done, an error, or its timeout, which then also counts the
   compute work queued ahead of it) covers both. The local comm's other ranks read this
   rank's buffers from their own threads and streams, so with it the comm thread waits for
   the event on the host. task_end waits for what the task left in flight on the comm
   stream (comm_pending), so a finished ticket still means finished device work. */
static zero_result zero__cuda_task_begin(zero_ctx *ctx, uint64_t ticket) {
    zero__cuda *cu = zero__cu(ctx);
    cudaEvent_t ev = cu->ev[ticket % ZERO__STREAM_CAP];
    int e = cu->mark_err[ticket % ZERO__STREAM_CAP];
    if (e) return zero__cuda_err(ctx, ZERO__S_COMM, e, "cudaEventRecord on the compute stream before a comm task");
    if ((e = (int)cudaSetDevice(cu->device)) == 0) {
        if (ctx->comm && ctx->comm->device_ordered) e = (int)cudaStreamWaitEvent(cu->comm, ev, 0);
        else e = zero__cu_wait(ctx, ev);
    }
    return zero__cuda_err(ctx, ZERO__S_COMM, e, "waiting for the compute stream before a comm task");
}
static zero_result zero__cuda_task_end(zero_ctx *ctx) {
    return zero__cuda_flush(ctx);
}
static zero_result zero__cuda_sync(zero_ctx *ctx, int s) {
    int e = zero__cu_sync(ctx, zero__cu_stream(ctx, s));
    if (e == 0 && s == ZERO__S_COMM) __atomic_store_n(&zero__cu(ctx)->comm_pending, 0, __ATOMIC_RELAXED);
    return zero__cuda_err(ctx, s, e, "cudaStreamSynchronize");
}

/* fp32 host values <-> device memory through the pinned double buffer (zero_param_set_f32,
   zero_gather_params_f32, checkpoints, the mem tier's reads and writes): chunks of
   ZERO_STAGING_BYTES, each a cudaMemcpyAsync on the compute stream from / into staging[k % 2]
   and an event xev[k % 2] after it. Put: the host converts chunk k into staging[k % 2] once the
   copy of chunk k - 2 out of it is done (its event), so the H2D of chunk k - 1 runs while
   the host converts chunk k. Get: the D2H of chunk k + 1 is issued before the host waits for
   chunk k and converts it. Both end with nothing in flight (put: the stream is waited for, so
   the values are in place and an error surfaces here; get: every event was waited for), so
   the buffers are free for the next call and a failed call leaves none in use either. */
static zero_result zero__cuda_stage_fail(zero_ctx *ctx, int e, const char *what) {
    zero__cu_sync(ctx, zero__cu(ctx)->compute);  /* nothing may still read or write a buffer */
    cudaGetLastError();
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, what);
}
static zero_result zero__cuda_put_f32(zero_ctx *ctx, void *dst, int dt, const float *src, int64_t n) {
    zero__cuda *cu = zero__cu(ctx);
    int64_t es = (int64_t)zero__esize(dt), per = ZERO_STAGING_BYTES / es, i, k;
    int e;
    for (i = 0, k = 0; i < n; i += per, k++) {
        int b = (int)(k & 1);
        int64_t c = n - i < per ? n - i : per;
        if (k >= 2 && (e = zero__cu_wait(ctx, cu->xev[b])) != 0)
            return zero__cuda_stage_fail(ctx, e, "cudaEventSynchronize (a staging buffer)");
        zero__from_f32(cu->staging[b], (zero_dtype)dt, src + i, c);
        if ((e = (int)cudaMemcpyAsync((char *)dst + i * es, cu->staging[b], (size_t)(c * es), cudaMemcpyDefault,
                                      cu->compute)) != 0)
            return zero__cuda_stage_fail(ctx, e, "cudaMemcpyAsync (staged, to the device)");
        if ((e = (int)cudaEventRecord(cu->xev[b], cu->compute)) != 0)
            return zero__cuda_stage_fail(ctx, e, "cudaEventRecord (a staging buffer)");
    }
    if ((e = zero__cu_sync(ctx, cu->compute)) != 0)
        return zero__cuda_stage_fail(ctx, e, "cudaStreamSynchronize after the staged copies");
    return ZERO_OK;
}
static int zero__cuda_stage_issue(zero__cuda *cu, const void *src, int64_t es, int64_t n, int64_t per, int64_t k,
                                  const char **what) {
    int64_t i = k * per, c = n - i < per ? n - i : per;
    int b = (int)(k & 1), e;
    *what = "cudaMemcpyAsync (staged, to the host)";
    if ((e = (int)cudaMemcpyAsync(cu->staging[b], (const char *)src + i * es, (size_t)(c * es), cudaMemcpyDefault,
                                  cu->compute)) != 0)
        return e;
    *what = "cudaEventRecord (a staging buffer)";
    return (int)cudaEventRecord(cu->xev[b], cu->compute);
}
static zero_result zero__cuda_get_f32(zero_ctx *ctx, float *dst, const void *src, int dt, int64_t n) {
    zero__cuda *cu = zero__cu(ctx);
    int64_t es = (int64_t)zero__esize(dt), per = ZERO_STAGING_BYTES / es, nk = (n + per - 1) / per, k;
    const char *what = "";
    int e;
    if (n <= 0) return ZERO_OK;
    if ((e = zero__cuda_stage_issue(cu, src, es, n, per, 0, &what)) != 0) return zero__cuda_stage_fail(ctx, e, what);
    for (k = 0; k < nk; k++) {
        int64_t i = k * per, c = n - i < per ? n - i : per;
        /* staging[(k + 1) % 2] held chunk k - 1, converted already */
        if (k + 1 < nk && (e = zero__cuda_stage_issue(cu, src, es, n, per, k + 1, &what)) != 0)
            return zero__cuda_stage_fail(ctx, e, what);
        if ((e = zero__cu_wait(ctx, cu->xev[k & 1])) != 0)
            return zero__cuda_stage_fail(ctx, e, "cudaEventSynchronize (a staging buffer)");
        zero__to_f32(dst + i, cu->staging[k & 1], (zero_dtype)dt, c);
    }
    return ZERO_OK;
}
/* the host tier's pipeline (>>offload): the gradients come down on d2h while the new params
   go up on h2d (PCIe moves both ways at once); both streams first wait for the compute
   stream's work queued before the pipeline (pev[0]: the gradients are final and nothing
   still reads the params); fence(slot) is xev[slot] on d2h (the staging calls above leave
   none in flight), waited for by the host; close makes the compute stream wait for h2d's
   last copy (pev[1]) */
static zero_result zero__cuda_copy_async(zero_ctx *ctx, int to_host, void *dst, const void *src, int64_t bytes) {
    zero__cuda *cu = zero__cu(ctx);
    int e = 0;
    if (bytes <= 0) return ZERO_OK;
    if (!cu->pipe) {
        if ((e = (int)cudaEventRecord(cu->pev[0], cu->compute)) == 0 &&
            (e = (int)cudaStreamWaitEvent(cu->d2h, cu->pev[0], 0)) == 0)
            e = (int)cudaStreamWaitEvent(cu->h2d, cu->pev[0], 0);
        if (e) return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "ordering the offloaded optimizer's copies after the compute stream");
        cu->pipe = 1;
    }
    return zero__cuda_err(ctx, ZERO__S_COMPUTE,
                          (int)cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, to_host ? cu->d2h : cu->h2d),
                          "cudaMemcpyAsync (the offloaded optimizer's pipeline)");
}
static zero_result zero__cuda_fence(zero_ctx *ctx, int slot) {
    zero__cuda *cu = zero__cu(ctx);
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, (int)cudaEventRecord(cu->xev[slot & 1], cu->d2h),
                          "cudaEventRecord (the offloaded optimizer's pipeline)");
}
static zero_result zero__cuda_fence_wait(zero_ctx *ctx, int slot) {
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, zero__cu_wait(ctx, zero__cu(ctx)->xev[slot & 1]),
                          "cudaEventSynchronize (the offloaded optimizer's pipeline)");
}
static zero_result zero__cuda_close(zero_ctx *ctx) {
    zero__cuda *cu = zero__cu(ctx);
    int e = 0;
    if (!cu->pipe) return ZERO_OK;
    cu->pipe = 0;
    if ((e = (int)cudaEventRecord(cu->pev[1], cu->h2d)) == 0) e = (int)cudaStreamWaitEvent(cu->compute, cu->pev[1], 0);
    return zero__cuda_err(ctx, ZERO__S_COMPUTE, e, "ordering the compute stream after the offloaded optimizer's copies");
}
static int64_t zero__cuda_table_bytes(int64_t chunks, int64_t blocks) {
    return chunks * (int64_t)sizeof(zero__kchunk) + blocks * (int64_t)(sizeof(zero__knblk) + sizeof(double));
}
static void zero__cuda_drain(zero_ctx *ctx) {
    zero__cuda *cu = zero__cu(ctx);
    zero__cu_sync(ctx, cu->compute);
    zero__cu_sync(ctx, cu->d2h);
    zero__cu_sync(ctx, cu->h2d);
    cu->pipe = 0;
    cudaGetLastError();
}
/* through the pinned staging buffers once zero_build made them, else the CPU's bounce */
static zero_result zero__cuda_put_f32_op(zero_ctx *ctx, void *dst, int dt, const float *src, int64_t n) {
    if (!zero__cu(ctx)->staging[1]) return zero__bounce_put_f32(ctx, dst, dt, src, n);
    return zero__cuda_put_f32(ctx, dst, dt, src, n);
}
static zero_result zero__cuda_get_f32_op(zero_ctx *ctx, float *dst, const void *src, int dt, int64_t n) {
    if (!zero__cu(ctx)->staging[1]) return zero__bounce_get_f32(ctx, dst, src, dt, n);
    return zero__cuda_get_f32(ctx, dst, src, dt, n);
}
ZERO__VT_BEGIN(zero__dev_vt, zero__cuda_dev)
    ZERO__VT_SET(name, "cuda") ZERO__VT_SET(host_access, 0) ZERO__VT_SET(init, zero__cuda_init)
    ZERO__VT_SET(fini, zero__cuda_fini) ZERO__VT_SET(alloc, zero__cuda_alloc)
    ZERO__VT_SET(free, zero__cuda_free) ZERO__VT_SET(host_alloc, zero__cuda_host_alloc)
    ZERO__VT_SET(host_free, zero__cuda_host_free) ZERO__VT_SET(prepare, zero__cuda_prepare)
    ZERO__VT_SET(copy, zero__cuda_copy) ZERO__VT_SET(fill0, zero__cuda_fill0)
    ZERO__VT_SET(sum_into, zero__cuda_sum_into) ZERO__VT_SET(grad_sumsq, zero__cuda_sumsq)
    ZERO__VT_SET(sum_norm, NULL) ZERO__VT_SET(norm_blocks, zero__cuda_norm_blocks)
    ZERO__VT_SET(qp_encode, zero__cuda_qp_encode)
    ZERO__VT_SET(qp_sum, zero__cuda_qp_sum) ZERO__VT_SET(optimizer, zero__cuda_optimizer)
    ZERO__VT_SET(gemm, zero__cuda_gemm) ZERO__VT_SET(bias_add, zero__cuda_bias_add)
    ZERO__VT_SET(bias_grad, zero__cuda_bias_grad) ZERO__VT_SET(gelu, zero__cuda_gelu)
    ZERO__VT_SET(gelu_bwd, zero__cuda_gelu_bwd) ZERO__VT_SET(xent, zero__cuda_xent)
    ZERO__VT_SET(mark, zero__cuda_mark) ZERO__VT_SET(task_begin, zero__cuda_task_begin)
    ZERO__VT_SET(task_end, zero__cuda_task_end) ZERO__VT_SET(sync, zero__cuda_sync) ZERO__VT_SET(flush, zero__cuda_flush)
    ZERO__VT_SET(put_f32, zero__cuda_put_f32_op) ZERO__VT_SET(get_f32, zero__cuda_get_f32_op)
    ZERO__VT_SET(copy_async, zero__cuda_copy_async) ZERO__VT_SET(fence, zero__cuda_fence)
    ZERO__VT_SET(fence_wait, zero__cuda_fence_wait) ZERO__VT_SET(close, zero__cuda_close)
    ZERO__VT_SET(drain, zero__cuda_drain)
    ZERO__VT_SET(qp_max_inputs, ZERO__K_MAXIN) ZERO__VT_SET(table_bytes, zero__cuda_table_bytes)
    ZERO__VT_SET(table_chunk, ZERO__KCHUNK)
ZERO__VT_END(zero__dev_vt, zero__cuda_dev)
#endif /* ZERO_CUDA */
/* why device t is not in this build; NULL: it is */
static const char *zero__dev_missing(zero_device_type t) {
#ifndef ZERO_CUDA
    if (t == ZERO_DEVICE_CUDA)
        return "zero_desc.device is ZERO_DEVICE_CUDA but zero.h was compiled without ZERO_CUDA "
               "(make CUDA=1, or -DZERO_CUDA and link zero_kernels.o, cudart, cuBLAS and NCCL)";
#endif
#ifndef ZERO__HAVE_EMU
    if (t == ZERO_DEVICE_EMU) return "ZERO_DEVICE_EMU needs POSIX mmap";
#endif
    (void)t;
    return NULL;
}
static const zero__dev_vt *zero__dev_pick(zero_device_type t) {
#ifdef ZERO__HAVE_EMU
    if (t == ZERO_DEVICE_EMU) return &zero__emu_dev;
#endif
#ifdef ZERO_CUDA
    if (t == ZERO_DEVICE_CUDA) return &zero__cuda_dev;
#endif
    (void)t;
    return &zero__cpu_dev;
}

/* the engine's entry points to the ops that a device may leave NULL */
static zero_result zero__dev_put_f32(zero_ctx *ctx, void *dst, int dt, const float *src, int64_t n) {
    if (ctx->dev->host_access) { zero__from_f32(dst, (zero_dtype)dt, src, n); return ZERO_OK; }
    return ctx->dev->put_f32 ? ctx->dev->put_f32(ctx, dst, dt, src, n) : zero__bounce_put_f32(ctx, dst, dt, src, n);
}
static zero_result zero__dev_get_f32(zero_ctx *ctx, float *dst, const void *src, int dt, int64_t n) {
    if (ctx->dev->host_access) { zero__to_f32(dst, src, (zero_dtype)dt, n); return ZERO_OK; }
    return ctx->dev->get_f32 ? ctx->dev->get_f32(ctx, dst, src, dt, n) : zero__bounce_get_f32(ctx, dst, src, dt, n);
}
static zero_result zero__dev_copy_async(zero_ctx *ctx, int to_host, void *dst, const void *src, int64_t bytes) {
    if (ctx->dev->copy_async) return ctx->dev->copy_async(ctx, to_host, dst, src, bytes);
    return ctx->dev->copy(ctx, ZERO__S_COMPUTE, dst, src, bytes);
}
static zero_result zero__dev_close(zero_ctx *ctx) {
    return ctx->dev->close ? ctx->dev->close(ctx) : ZERO_OK;
}
static zero_result zero__dev_fence(zero_ctx *ctx, int slot) {
    return ctx->dev->fence ? ctx->dev->fence(ctx, slot) : ZERO_OK;
}
static zero_result zero__dev_fence_wait(zero_ctx *ctx, int slot) {
    return ctx->dev->fence_wait ? ctx->dev->fence_wait(ctx, slot) : ZERO_OK;
}
static void zero__dev_drain(zero_ctx *ctx) {
    if (ctx->dev->drain) ctx->dev->drain(ctx);
}

/* >>comm ------------------------------------------------------------------------------
   One interface; the local backend (ranks as threads of one process) is here, the MPI
   one (ZERO_MPI) after it, then NCCL (ZERO_CUDA). Every collective has a timeout. */
static const char *zero__coll_name(int kind) {
    switch (kind) {
    case ZERO_COLL_ALL_GATHER: return "all_gather";
    case ZERO_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case ZERO_COLL_ALL_REDUCE: return "all_reduce";
    case ZERO_COLL_BROADCAST: return "broadcast";
    case ZERO_COLL_ALL_TO_ALL: return "all_to_all";
    default: return "barrier";
    }
}

/* a member's rank in the whole group (messages name those), and where the sub-group is */
static int zero__wrank(const zero_group *g, int i) { return g->rstride ? g->rank0 + i * g->rstride : i; }
static const char *zero__where(const zero_group *g) {
    return g->scope == ZERO__SCOPE_NODE ? " within the node" : g->scope == ZERO__SCOPE_CROSS ? " across nodes" : "";
}

/* The device's comm-stream ops this rank issued, done (CUDA: one wait, when any is in
   flight): before other ranks read this rank's buffers (enter) and before they go on to
   use what this rank wrote (leave). A failed wait leaves them pending, so leave's reports
   the (sticky) error that enter's dropped. */
static zero_result zero__local_flush(zero_comm *c) {
    return c->ctx && c->ctx->dev->flush ? c->ctx->dev->flush(c->ctx) : ZERO_OK;
}

/* Arrive at the group's current op and wait until every rank has arrived with a
   matching call. On timeout the group is broken for good: every rank, now and
   later, fails fast instead of waiting for a partner that is gone. */
static zero_result zero__local_enter(zero_comm *c, const zero__slot *mine, int timeout_ms) {
    zero_group *g = c->group;
    zero_result r = ZERO_OK;
    struct timespec dl;
    int i;
    (void)zero__local_flush(c);
    dl = zero__deadline(timeout_ms);
    zero__mutex_lock(&g->mu);
    if (g->broken) {
        snprintf(c->err, sizeof c->err, "%s", g->broken_msg);
        r = g->broken == ZERO_ERR_TIMEOUT ? ZERO_ERR_COMM : g->broken;
        zero__mutex_unlock(&g->mu);
        return r;
    }
    g->slots[c->rank] = *mine;
    g->slots[c->rank].gen = g->gen;
    if (++g->arrived == g->n) {
        for (i = 1; i < g->n; i++) {
            const zero__slot *a = &g->slots[0], *b = &g->slots[i];
            if (a->kind != b->kind || a->count != b->count || a->sdt != b->sdt || a->rdt != b->rdt ||
                a->tag != b->tag || a->cross != b->cross) {
                g->broken = ZERO_ERR_MISMATCH;
                g->bad_tag[0] = a->tag;
                g->bad_tag[1] = b->tag;
                g->bad_rank = i;
                snprintf(g->broken_msg, sizeof g->broken_msg,
                         "collective #%llu%s: rank %d called %s(count=%lld, tag=%lld) but rank %d called "
                         "%s(count=%lld, tag=%lld); ranks must issue the same collectives in the same order",
                         (unsigned long long)g->seq, zero__where(g), zero__wrank(g, i), zero__coll_name(b->kind),
                         (long long)b->count, (long long)b->tag, zero__wrank(g, 0), zero__coll_name(a->kind),
                         (long long)a->count, (long long)a->tag);
                break;
            }
        }
        if (!g->broken) {
            g->running = 1;
            g->writers = mine->cross ? g->n : 0;
        }
        zero__cond_broadcast(&g->cv);
    }
    while (!g->running && !g->broken) {
        int missing_left = -1;
        for (i = 0; i < g->n; i++)
            if (g->slots[i].gen != g->gen && g->left[i]) { missing_left = i; break; }
        if (missing_left >= 0) {
            g->broken = ZERO_ERR_COMM;
            snprintf(g->broken_msg, sizeof g->broken_msg,
                     "%s #%llu%s: rank %d left the group before arriving",
                     zero__coll_name(mine->kind), (unsigned long long)g->seq, zero__where(g),
                     zero__wrank(g, missing_left));
            zero__cond_broadcast(&g->cv);
            break;
        }
        if (zero__cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && !g->running && !g->broken) {
            char who[128] = "";
            size_t len = 0;
            for (i = 0; i < g->n && len + 16 < sizeof who; i++)
                if (g->slots[i].gen != g->gen)
                    len += (size_t)snprintf(who + len, sizeof who - len, "%s%d", len ? ", " : "", zero__wrank(g, i));
            g->broken = ZERO_ERR_TIMEOUT;
            snprintf(g->broken_msg, sizeof g->broken_msg,
                     "%s #%llu%s timed out after %d ms: rank(s) %s never arrived",
                     zero__coll_name(mine->kind), (unsigned long long)g->seq, zero__where(g), timeout_ms, who);
            zero__cond_broadcast(&g->cv);
        }
    }
    if (g->broken) {
        snprintf(c->err, sizeof c->err, "%s", g->broken_msg);
        c->bad_tag[0] = g->bad_tag[0];
        c->bad_tag[1] = g->bad_tag[1];
        c->bad_rank = g->bad_rank;
        r = g->broken;
        if (g->running && mine->cross && g->writers > 0) {     /* counted as a writer: it writes nothing */
            g->writers--;
            zero__cond_broadcast(&g->cv);
        }
    }
    zero__mutex_unlock(&g->mu);
    return r;
}

/* a rank of a cross op (zero__slot.cross) has written all it writes into the others' buffers */
static void zero__local_wrote(zero_comm *c) {
    zero_group *g = c->group;
    (void)zero__local_flush(c);     /* (an error is leave's to report) */
    zero__mutex_lock(&g->mu);
    if (g->writers > 0) g->writers--;
    zero__cond_broadcast(&g->cv);
    zero__mutex_unlock(&g->mu);
}

/* Leave the op; wait until every rank has left, since the others read our send
   buffer until they are done. */
static zero_result zero__local_leave(zero_comm *c, int timeout_ms) {
    zero_group *g = c->group;
    zero_result r = ZERO_OK, rf = zero__local_flush(c);
    struct timespec dl = zero__deadline(timeout_ms);
    zero__mutex_lock(&g->mu);
    if (++g->departed == g->n) {
        g->arrived = g->departed = g->running = 0;
        g->gen++;
        g->seq++;
        zero__cond_broadcast(&g->cv);
    } else {
        uint64_t my = g->gen;
        while (g->gen == my && !g->broken)
            if (zero__cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && g->gen == my && !g->broken) {
                g->broken = ZERO_ERR_TIMEOUT;
                snprintf(g->broken_msg, sizeof g->broken_msg,
                         "collective #%llu%s: a rank stalled inside the collective for %d ms",
                         (unsigned long long)g->seq, zero__where(g), timeout_ms);
                zero__cond_broadcast(&g->cv);
            }
        if (g->gen == my && g->broken) {
            /* a cross op: the ranks still writing into this rank's buffer finish first (they
               only copy, so they do; bounded all the same), so its caller may free it */
            dl = zero__deadline(timeout_ms);
            while (g->writers > 0 && zero__cond_timedwait(&g->cv, &g->mu, &dl) != ETIMEDOUT) {}
            snprintf(c->err, sizeof c->err, "%s", g->broken_msg);
            r = g->broken;
        }
    }
    zero__mutex_unlock(&g->mu);
    return rf != ZERO_OK ? rf : r;
}

/* The modelled link: after moving the data, the comm thread sleeps for what sending
   `bytes` would take on it. The sleep costs no CPU, as a network transfer would not,
   so compute overlapping the collective shows up as it would on real hardware.
   With nodes (zero_group_set_nodes) and a cross-node link, the bytes to the peers of this
   rank's node and to the others move at once, on their own links: the longer one counts.
   per_peer: the bytes sent to each other rank. */
static zero_result zero__local_link(zero_comm *c, int64_t per_peer, zero_result r) {
    const zero_group *g = c->group;
    double us = 0, lat_x = g->cross_latency_us, gb_x = g->cross_gbps;
    int64_t in = c->size - 1, out = 0;
    struct timespec ts;
    if (r != ZERO_OK || c->size < 2) return r;
    if (g->node_size > 0 && g->node_size < c->size) { in = g->node_size - 1; out = c->size - g->node_size; }
    if (lat_x < 0) { lat_x = g->link_latency_us; gb_x = g->link_gbps; }
    if (in > 0 && (g->link_latency_us > 0 || g->link_gbps > 0))
        us = g->link_latency_us + (g->link_gbps > 0 ? (double)(in * per_peer) / (g->link_gbps * 1e3) : 0.0);
    if (out > 0 && (lat_x > 0 || gb_x > 0)) {
        double ux = lat_x + (gb_x > 0 ? (double)(out * per_peer) / (gb_x * 1e3) : 0.0);
        us = ux > us ? ux : us;
    }
    if (us <= 0) return r;
    __atomic_fetch_add(&c->link_ns, (int64_t)(us * 1e3), __ATOMIC_RELAXED);
    ts.tv_sec = (time_t)(us / 1e6);
    ts.tv_nsec = (long)((us - (double)ts.tv_sec * 1e6) * 1e3);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    return r;
}

/* The local comm moves data with its context's device: device copies and the summing
   kernel on CUDA (ranks as threads sharing one GPU), memcpy and zero__sum_into on the
   CPU, in the same rank order, so the sums are the same bits; an endpoint no context
   uses moves plain memory. */
static zero_result zero__comm_copy(zero_comm *c, void *dst, const void *src, int64_t bytes) {
    if (c->ctx) return c->ctx->dev->copy(c->ctx, ZERO__S_COMM, dst, src, bytes);
    if (bytes > 0) memcpy(dst, src, (size_t)bytes);
    return ZERO_OK;
}
static zero_result zero__comm_sum(zero_comm *c, void *out, int rdt, const void *const *ins, int nin, int sdt,
                                  int64_t count, int accumulate) {
    if (!c->ctx) { zero__sum_into(out, rdt, ins, nin, sdt, count, accumulate); return ZERO_OK; }
    return c->ctx->dev->sum_into(c->ctx, ZERO__S_COMM, out, rdt, ins, nin, sdt, count, accumulate);  /* done on return */
}

static zero_result zero__local_all_gather(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__slot s;
    zero_result r, r2 = ZERO_OK;
    int k;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_ALL_GATHER; s.count = bytes; s.send = send; s.recv = recv;
    if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
    for (k = 0; k < c->size && r2 == ZERO_OK; k++) {
        char *dst = (char *)recv + (int64_t)k * bytes;
        const void *src = c->group->slots[k].send;
        if (src != dst) r2 = zero__comm_copy(c, dst, src, bytes);
    }
    r = zero__local_link(c, bytes, zero__local_leave(c, timeout_ms));
    return r2 != ZERO_OK ? r2 : r;
}

static zero_result zero__local_reduce_scatter(zero_comm *c, const void *send, int sdt, void *recv, int rdt,
                                              int64_t count, int accumulate, int timeout_ms) {
    zero__slot s;
    zero_result r, r2;
    const void *ins[ZERO__MAX_RANKS];
    int k;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_REDUCE_SCATTER; s.count = count; s.sdt = sdt; s.rdt = rdt; s.send = send; s.recv = recv;
    if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
    for (k = 0; k < c->size; k++)
        ins[k] = (const char *)c->group->slots[k].send + (int64_t)c->rank * count * (int64_t)zero__esize(sdt);
    /* one rank reducing in place: the sum of one input is that input (a NaN's payload
       aside, bf16 / f16: a NaN gradient skips the step, which clears it), so no data moves.
       sq_blk (a module's last reduction, more than one rank): the norm's blocks too */
    if (c->sq_blk && c->ctx && c->ctx->dev->sum_norm) {
        r2 = c->ctx->dev->sum_norm(c->ctx, ZERO__S_COMM, recv, rdt, ins, c->size, sdt, count, accumulate, c->sq_blk, NULL, 0);
        c->sq_done = r2 == ZERO_OK;
    } else if (c->size == 1 && ins[0] == recv && sdt == rdt && !accumulate) r2 = ZERO_OK;
    else r2 = zero__comm_sum(c, recv, rdt, ins, c->size, sdt, count, accumulate);
    if (r2 == ZERO_OK && c->sq_blk && !c->sq_done && c->ctx && c->ctx->dev->norm_blocks)  /* CUDA */
        c->sq_done = (r2 = c->ctx->dev->norm_blocks(c->ctx, ZERO__S_COMM, recv, count, c->sq_blk)) == ZERO_OK;
    r = zero__local_link(c, count * (int64_t)zero__esize(sdt), zero__local_leave(c, timeout_ms));
    return r2 != ZERO_OK ? r2 : r;
}

/* all-reduce = reduce-scatter + all-gather, in place, so it sums in the same order
   (and rounds to dt at the same point) as the sharded stages do. Doubles (small
   scalar vectors) are summed directly into a temporary instead. */
static zero_result zero__local_all_reduce(zero_comm *c, void *buf, int dt, int64_t count, int timeout_ms) {
    zero__slot s;
    zero_result r;
    int k;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_ALL_REDUCE; s.count = count; s.sdt = dt; s.rdt = dt; s.send = buf; s.recv = buf;
    if (dt == ZERO__F64) {
        double tmp[64];
        int64_t i;
        if (count > 64) return ZERO_ERR_INVALID_SIZE;
        if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
        for (i = 0; i < count; i++) {
            tmp[i] = 0.0;
            for (k = 0; k < c->size; k++) tmp[i] += ((const double *)c->group->slots[k].send)[i];
        }
        if ((r = zero__local_leave(c, timeout_ms)) != ZERO_OK) return r;
        memcpy(buf, tmp, (size_t)count * sizeof(double));
        return ZERO_OK;
    } else {
        int64_t per = count / c->size, es = (int64_t)zero__esize(dt);
        char *mine = (char *)buf + (int64_t)c->rank * per * es;
        const void *ins[ZERO__MAX_RANKS];
        void *others[ZERO__MAX_RANKS];
        zero_result r2;
        int n;
        if (count % c->size) return ZERO_ERR_INVALID_SIZE;
        if (!c->ctx || !c->ctx->dev->sum_norm || c->size == 1) {
            if ((r = zero__local_reduce_scatter(c, buf, dt, mine, dt, per, 0, timeout_ms)) != ZERO_OK) return r;
            return zero__local_all_gather(c, mine, buf, per * es, timeout_ms);
        }
        /* host memory (the CPU device): each rank sums its slice of every rank's buffer, as
           the reduce-scatter would, and writes the sum into that slice of every buffer while
           it is in cache, instead of each rank then gathering the others' slices: the same
           bits, 8 bytes moved per byte of slice instead of 11, and one collective. Ranks
           touch only their own slice of each buffer. A rank returns once every rank has
           left, or, when the op fails, once no rank is still writing (g->writers). */
        s.cross = 1;
        if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
        for (k = 0, n = 0; k < c->size; k++) {
            ins[k] = (const char *)c->group->slots[k].send + (int64_t)c->rank * per * es;
            if (k != c->rank) others[n++] = (char *)c->group->slots[k].recv + (int64_t)c->rank * per * es;
        }
        r2 = c->ctx->dev->sum_norm(c->ctx, ZERO__S_COMM, mine, dt, ins, c->size, dt, per, 0, c->sq_blk, others, n);
        c->sq_done = r2 == ZERO_OK && c->sq_blk;
        zero__local_wrote(c);
        r = zero__local_leave(c, timeout_ms);
        /* the modelled link: a reduce-scatter's and an all-gather's transfers */
        r = zero__local_link(c, per * es, zero__local_link(c, per * es, r));
        return r2 != ZERO_OK ? r2 : r;
    }
}

static zero_result zero__local_broadcast(zero_comm *c, void *buf, int64_t bytes, int root, int timeout_ms) {
    zero__slot s;
    zero_result r;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_BROADCAST; s.count = bytes; s.rdt = root; s.send = buf; s.recv = buf;
    if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
    if (c->rank != root) {
        zero_result r2 = zero__comm_copy(c, buf, c->group->slots[root].send, bytes);
        r = zero__local_leave(c, timeout_ms);
        return r2 != ZERO_OK ? r2 : r;
    }
    return zero__local_leave(c, timeout_ms);
}

static zero_result zero__local_barrier(zero_comm *c, int timeout_ms) {
    zero__slot s;
    zero_result r;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_BARRIER;
    if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
    return zero__local_leave(c, timeout_ms);
}

static zero_result zero__local_all_to_all(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__slot s;
    zero_result r, r2 = ZERO_OK;
    int k;
    memset(&s, 0, sizeof s);
    s.tag = c->tag;
    s.kind = ZERO_COLL_ALL_TO_ALL; s.count = bytes; s.send = send; s.recv = recv;
    if ((r = zero__local_enter(c, &s, timeout_ms)) != ZERO_OK) return r;
    for (k = 0; k < c->size && r2 == ZERO_OK; k++)
        r2 = zero__comm_copy(c, (char *)recv + (int64_t)k * bytes,
                             (const char *)c->group->slots[k].send + (int64_t)c->rank * bytes, bytes);
    r = zero__local_link(c, bytes, zero__local_leave(c, timeout_ms));
    return r2 != ZERO_OK ? r2 : r;
}

/* ---- comm: groups and local endpoints ------------------------------------------------
   The public calls (zero_group_*, zero_comm_local, zero_comm_destroy, zero_run_*) check
   their arguments and land here; the backends below use these too. */
static zero_result zero__group_create(zero_group **out, int world_size) {
    zero_group *g;
    *out = NULL;
    if (world_size < 1 || world_size > ZERO__MAX_RANKS)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_group_create: world_size is %d; it must be 1..%d", world_size, ZERO__MAX_RANKS);
    g = (zero_group *)zero__raw_alloc(NULL, sizeof *g);
    if (!g) return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_group_create: out of memory");
    memset(g, 0, sizeof *g);
    g->slots = (zero__slot *)zero__raw_alloc(NULL, sizeof(zero__slot) * (size_t)world_size);
    g->left = (int *)zero__raw_alloc(NULL, sizeof(int) * (size_t)world_size);
    if (!g->slots || !g->left) {
        zero__raw_free(NULL, g->slots); zero__raw_free(NULL, g->left); zero__raw_free(NULL, g);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_group_create: out of memory");
    }
    memset(g->slots, 0, sizeof(zero__slot) * (size_t)world_size);
    memset(g->left, 0, sizeof(int) * (size_t)world_size);
    g->n = world_size;
    g->gen = 1;
    g->cross_latency_us = g->cross_gbps = -1;
    zero__mutex_init(&g->mu);
    zero__cond_init(&g->cv);
    *out = g;
    return ZERO_OK;
}
static void zero__group_destroy(zero_group *g) {
    int i;
    if (!g) return;
    for (i = 0; i < g->nsub; i++) zero__group_destroy(g->sub[i]);
    zero__raw_free(NULL, g->sub);
    zero__mutex_destroy(&g->mu);
    zero__cond_destroy(&g->cv);
    zero__raw_free(NULL, g->slots);
    zero__raw_free(NULL, g->left);
    zero__raw_free(NULL, g);
}
/* a modelled link: within the group (or a node), or across nodes */
static zero_result zero__set_link(zero_group *g, const char *fn, double latency_us, double gbytes_per_s, int cross) {
    if (!g || !(latency_us >= 0) || !(gbytes_per_s >= 0))
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "%s: group must not be NULL and latency/bandwidth must be >= 0", fn);
    zero__mutex_lock(&g->mu);
    *(cross ? &g->cross_latency_us : &g->link_latency_us) = latency_us;
    *(cross ? &g->cross_gbps : &g->link_gbps) = gbytes_per_s;
    zero__mutex_unlock(&g->mu);
    return ZERO_OK;
}
static zero_result zero__check_nodes(const char *fn, int size, int ranks_per_node) {
    if (ranks_per_node < 1 || ranks_per_node > size || size % ranks_per_node)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "%s: ranks_per_node is %d; it must divide the world size %d", fn, ranks_per_node, size);
    return ZERO_OK;
}
static zero_result zero__group_set_nodes(zero_group *g, int ranks_per_node) {
    zero_result r;
    if ((r = zero__check_nodes("zero_group_set_nodes", g->n, ranks_per_node)) != ZERO_OK) return r;
    zero__mutex_lock(&g->mu);
    if (g->sub_ns && g->sub_ns != ranks_per_node) r = ZERO_ERR_STATE;
    else g->node_size = ranks_per_node;
    zero__mutex_unlock(&g->mu);
    if (r != ZERO_OK)
        return zero__fail(NULL, r, ZERO_LOGITEM_BAD_OPTION, "zero_group_set_nodes: the group's ranks already work in "
                          "nodes of %d (a context split it); set the nodes before the ranks start", g->sub_ns);
    return ZERO_OK;
}
/* any backend: the shared checks, then the backend's say (vt->set_nodes) */
static zero_result zero__comm_set_nodes(zero_comm *c, int ranks_per_node) {
    zero_result r;
    if ((r = zero__check_nodes("zero_comm_set_nodes", c->size, ranks_per_node)) != ZERO_OK) return r;
    if (c->in_use || (c->split_ns && c->split_ns != ranks_per_node))
        return zero__fail(NULL, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_OPTION,
                          "zero_comm_set_nodes: the endpoint is in use by a context; set the nodes before zero_create");
    if (c->vt->set_nodes && (r = c->vt->set_nodes(c, ranks_per_node)) != ZERO_OK) return r;
    c->node_size = ranks_per_node;
    return ZERO_OK;
}
/* the local comm's endpoints share their group, so it learns the nodes too */
static zero_result zero__local_set_nodes(zero_comm *c, int ranks_per_node) {
    return zero__group_set_nodes(c->group, ranks_per_node);
}

/* any backend: the split's endpoints first (zero__comm_vt.split), then the endpoint itself */
static void zero__comm_destroy(zero_comm *c) {
    if (!c) return;
    zero__comm_destroy(c->intra);
    zero__comm_destroy(c->inter);
    c->intra = c->inter = NULL;
    c->vt->destroy(c);
}
static void zero__local_destroy(zero_comm *c) {
    zero_group *g = c->owns_group ? c->group : NULL;
    zero__mutex_lock(&c->group->mu);
    c->group->left[c->rank] = 1;      /* ranks waiting for this one fail fast */
    c->group->endpoints--;
    zero__cond_broadcast(&c->group->cv);
    zero__mutex_unlock(&c->group->mu);
    zero__raw_free(NULL, c);
    zero__group_destroy(g);
}
/* zero_create's hand-over of the endpoint to its context (zero__comm_vt.attach) */
static zero_result zero__comm_attach(zero_ctx *ctx, zero__why *why) {
    zero_comm *c = ctx->comm;
    return c->vt->attach ? c->vt->attach(c, ctx, why) : ZERO_OK;
}

static zero_result zero__comm_local(zero_comm **out, zero_group *g, int rank);

static zero_result zero__local_make_group(zero_group **out, int n, int scope, double lat, double gbps, int rank0,
                                          int rstride) {
    zero_result r = zero__group_create(out, n);
    if (r != ZERO_OK) return r;
    (*out)->scope = scope;
    (*out)->rank0 = rank0;
    (*out)->rstride = rstride;
    (*out)->link_latency_us = lat;
    (*out)->link_gbps = gbps;
    return ZERO_OK;
}
/* The group's node and cross-node sub-groups are made once (by the first rank to split),
   under its lock; each rank then takes its endpoints of them. */
static zero_result zero__local_split(zero_comm *c, int ns, zero_comm **intra, zero_comm **inter) {
    zero_group *g = c->group;
    zero_result r = ZERO_OK;
    int nn = c->size / ns, i;
    *intra = *inter = NULL;
    zero__mutex_lock(&g->mu);
    if (g->sub_ns && g->sub_ns != ns) {
        snprintf(c->err, sizeof c->err, "the local group was already split into nodes of %d ranks, not %d",
                 g->sub_ns, ns);
        r = ZERO_ERR_MISMATCH;
    } else if (!g->sub_ns) {
        double lx = g->cross_latency_us < 0 ? g->link_latency_us : g->cross_latency_us;
        double gx = g->cross_latency_us < 0 ? g->link_gbps : g->cross_gbps;
        g->sub = (zero_group **)zero__raw_alloc(NULL, sizeof(zero_group *) * (size_t)(nn + ns));
        if (!g->sub) r = ZERO_ERR_OUT_OF_MEMORY;
        else memset(g->sub, 0, sizeof(zero_group *) * (size_t)(nn + ns));
        for (i = 0; i < nn + ns && r == ZERO_OK; i++) {
            r = i < nn ? zero__local_make_group(&g->sub[i], ns, ZERO__SCOPE_NODE, g->link_latency_us, g->link_gbps,
                                                i * ns, 1)
                       : zero__local_make_group(&g->sub[i], nn, ZERO__SCOPE_CROSS, lx, gx, i - nn, ns);
            g->nsub = i + (r == ZERO_OK);
        }
        if (r == ZERO_OK) g->sub_ns = ns;
        else {
            for (i = 0; i < g->nsub; i++) zero__group_destroy(g->sub[i]);
            zero__raw_free(NULL, g->sub);
            g->sub = NULL;
            g->nsub = 0;
            snprintf(c->err, sizeof c->err, "out of memory making the local group's node groups");
        }
    }
    zero__mutex_unlock(&g->mu);
    if (r != ZERO_OK) return r;
    if ((r = zero__comm_local(intra, g->sub[c->rank / ns], c->rank % ns)) != ZERO_OK ||
        (r = zero__comm_local(inter, g->sub[nn + c->rank % ns], c->rank / ns)) != ZERO_OK) {
        zero__comm_destroy(*intra);
        *intra = NULL;
        snprintf(c->err, sizeof c->err, "%s", zero__tls_err);
        return r;
    }
    (*intra)->scope = ZERO__SCOPE_NODE;
    (*inter)->scope = ZERO__SCOPE_CROSS;
    return ZERO_OK;
}

ZERO__VT_BEGIN(zero__comm_vt, zero__local_vt)
    ZERO__VT_SET(all_gather, zero__local_all_gather) ZERO__VT_SET(reduce_scatter, zero__local_reduce_scatter)
    ZERO__VT_SET(all_reduce, zero__local_all_reduce) ZERO__VT_SET(broadcast, zero__local_broadcast)
    ZERO__VT_SET(barrier, zero__local_barrier) ZERO__VT_SET(all_to_all, zero__local_all_to_all)
    ZERO__VT_SET(split, zero__local_split) ZERO__VT_SET(destroy, zero__local_destroy)
    ZERO__VT_SET(set_nodes, zero__local_set_nodes) ZERO__VT_SET(attach, NULL)
ZERO__VT_END(zero__comm_vt, zero__local_vt)

/* rank `rank` (0 <= rank < g->n) of the local group g */
static zero_result zero__comm_local(zero_comm **out, zero_group *g, int rank) {
    zero_comm *c = (zero_comm *)zero__raw_alloc(NULL, sizeof *c);
    *out = NULL;
    if (!c) return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_comm_local: out of memory");
    memset(c, 0, sizeof *c);
    c->vt = &zero__local_vt;
    c->rank = rank;
    c->size = g->n;
    c->group = g;
    zero__mutex_lock(&g->mu);
    g->endpoints++;
    g->left[rank] = 0;
    c->node_size = g->node_size;
    c->scope = g->scope;
    zero__mutex_unlock(&g->mu);
    *out = c;
    return ZERO_OK;
}
/* zero_comm_from_env's world of one: the endpoint owns its group */
static zero_result zero__local_world_of_one(zero_comm **out) {
    zero_group *g = NULL;
    zero_result r;
    if ((r = zero__group_create(&g, 1)) != ZERO_OK) return r;
    if ((r = zero__comm_local(out, g, 0)) != ZERO_OK) { zero__group_destroy(g); return r; }
    (*out)->owns_group = 1;
    return ZERO_OK;
}

/* ---- comm: mpi -----------------------------------------------------------------------
   One process per rank (ZERO_MPI; Open MPI or MPICH). Every collective runs on the
   context's comm stream, so MPI is initialized with MPI_THREAD_MULTIPLE (SERIALIZED is
   accepted: then the comm stream of the one live context is the only thread that calls
   MPI, so make no MPI calls of your own while a context lives).
   Each collective is two phases, both nonblocking and polled with MPI_Test until the
   deadline, so nothing waits longer than timeout_ms:
     1. a header exchange: every rank sends (seq, kind, count, dtypes, tag) to every
        other one point to point. A rank whose header never comes is named in the
        ZERO_ERR_TIMEOUT message; headers that differ are ZERO_ERR_MISMATCH on every
        rank (as with the local comm), before any data moves.
     2. the data, as raw bytes point to point (MPI_Isend/MPI_Irecv with every peer, so
        a timeout still names the rank whose data never came). Nothing is summed by
        MPI: a reduce-scatter is an all-to-all of the inputs' slices followed by the
        fp32 sum in rank order that the local comm uses (zero__sum_into), so both
        communicators give bitwise-identical results.
   A split (ZeRO++'s node and cross-node endpoints) makes views of the same MPI_Comm: their
   members are mapped to its ranks and their messages carry tags of their own.
   After a failure the endpoint is broken for good: later collectives fail fast with
   ZERO_ERR_COMM, the requests left in flight are abandoned (MPI may still write into
   the buffers they name, so exit rather than reuse them) and zero_comm_destroy skips
   MPI_Comm_free and MPI_Finalize, which would wait for the missing rank. */
#ifdef ZERO_MPI

typedef struct zero__mpi_comm {
    zero_comm base;                 /* first: a zero_comm * is a zero__mpi_comm * */
    MPI_Comm comm;                  /* a dup of MPI_COMM_WORLD: our traffic stays apart; a split's
                                       endpoints use their parent's */
    int owns_init;                  /* we called MPI_Init_thread: destroy finalizes */
    struct zero__mpi_comm *parent;  /* a node or cross-node endpoint: the one it was split from */
    int rank0, rstride;             /* member k is rank rank0 + k * rstride of comm (the world's) */
    int mtag;                       /* MPI tags: mtag for headers, mtag + 1 for data; a split's
                                       endpoints have their own, so traffic never mixes */
    int broken;                     /* a collective failed: everything fails fast */
    uint64_t seq;                   /* collectives issued, for headers and messages */
    int64_t *hdr;                   /* [size][6] headers of the current collective */
    MPI_Request *reqs;              /* [2 * size] the current phase's receives, then sends */
    int *peer;                      /* [2 * size] the rank each receive comes from */
    void *scratch;                  /* all-to-all / f64 gather buffer, grows, never shrinks */
    int64_t scratch_bytes;
} zero__mpi_comm;

#define ZERO__MPI_HDR 6
#define ZERO__MPI_TAG 7001          /* the world's; + 10 * ZERO__SCOPE_* for a split's */
#define ZERO__MPI_SPLIT 0x5e11      /* a split's header: a barrier's, count ranks_per_node, this in both dtypes */

/* a header as the call that sent it, for ZERO_ERR_MISMATCH's sentence */
static void zero__mpi_hdr_str(char *s, size_t n, const int64_t *h) {
    if (h[1] == ZERO_COLL_BARRIER && h[3] == ZERO__MPI_SPLIT)
        snprintf(s, n, "split(ranks_per_node=%lld)", (long long)h[2]);
    else snprintf(s, n, "%s(count=%lld, tag=%lld)", zero__coll_name((int)h[1]), (long long)h[2], (long long)h[5]);
}

static int zero__mpi_world(const zero__mpi_comm *m, int k) { return m->rank0 + k * m->rstride; }
/* where a message says the collective ran: nowhere for the world's endpoint */
static const char *zero__mpi_where(const zero__mpi_comm *m) {
    int s = m->base.scope;
    return s == ZERO__SCOPE_NODE ? " within the node" : s == ZERO__SCOPE_CROSS ? " across nodes" : "";
}

/* the collective a message names: a split's header exchange is a barrier's but for its dtypes */
static const char *zero__mpi_name(const zero__mpi_comm *m, int kind) {
    const int64_t *mine = m->hdr + (int64_t)m->base.rank * ZERO__MPI_HDR;
    return kind == ZERO_COLL_BARRIER && mine[3] == ZERO__MPI_SPLIT ? "split" : zero__coll_name(kind);
}

static zero_result zero__mpi_err(zero__mpi_comm *m, const char *what, int rc) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    s[0] = '\0';
    MPI_Error_string(rc, s, &len);
    m->broken = 1;
    snprintf(m->base.err, sizeof m->base.err, "MPI: %s failed on rank %d (collective #%llu%s): %s", what,
             zero__mpi_world(m, m->base.rank), (unsigned long long)m->seq, zero__mpi_where(m), s);
    return ZERO_ERR_COMM;
}

/* MPI_Testall until done or the deadline; backs off to short sleeps so waiting ranks
   leave the cores to the ranks that compute (ranks often outnumber cores in tests). */
static int zero__mpi_poll(int n, MPI_Request *reqs, double deadline, int *rc) {
    int flag = 0, spins = 0;
    for (;;) {
        *rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (*rc != MPI_SUCCESS) return -1;
        if (flag) return 1;
        if (zero__now_ms() > deadline) return 0;
        if (++spins > 64) {
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = spins > 1000 ? 200000L : 20000L;
            nanosleep(&ts, NULL);
        }
    }
}

/* Posts nothing; waits for the nreq requests in m->reqs, the first nrecv of which are
   receives from the ranks m->peer[0 .. nrecv-1]. On timeout, names the ranks whose
   message never came. */
static zero_result zero__mpi_wait(zero__mpi_comm *m, int kind, int nrecv, int nreq, int timeout_ms,
                                  double deadline, const char *phase) {
    zero_comm *c = &m->base;
    char who[160] = "";
    size_t len = 0;
    int i, rc, got = zero__mpi_poll(nreq, m->reqs, deadline, &rc);
    if (got < 0) return zero__mpi_err(m, zero__mpi_name(m, kind), rc);
    if (got > 0) return ZERO_OK;
    for (i = 0; i < nrecv; i++) {
        int done = 0;
        if (m->reqs[i] == MPI_REQUEST_NULL) done = 1;
        else MPI_Test(&m->reqs[i], &done, MPI_STATUS_IGNORE);
        if (!done && len + 16 < sizeof who)
            len += (size_t)snprintf(who + len, sizeof who - len, "%s%d", len ? ", " : "",
                                    zero__mpi_world(m, m->peer[i]));
    }
    m->broken = 1;
    snprintf(c->err, sizeof c->err, "%s #%llu%s timed out after %d ms on rank %d: rank(s) %s %s",
             zero__mpi_name(m, kind), (unsigned long long)m->seq, zero__mpi_where(m), timeout_ms,
             zero__mpi_world(m, c->rank),
             len ? who : "(none: our sends did not complete)", phase);
    return ZERO_ERR_TIMEOUT;
}

/* Phase 1: the header exchange (see above). Returns ZERO_OK when every rank arrived
   with the same call. */
static zero_result zero__mpi_enter(zero__mpi_comm *m, int kind, int64_t count, int sdt, int rdt,
                                   int timeout_ms, double deadline) {
    zero_comm *c = &m->base;
    int n = c->size, me = c->rank, i, k, nreq = 0, rc;
    int64_t *mine = m->hdr + (int64_t)me * ZERO__MPI_HDR;   /* sends may outlive a timed-out call */
    zero_result r;
    if (m->broken) {
        if (!c->err[0]) snprintf(c->err, sizeof c->err, "the MPI communicator failed earlier");
        return ZERO_ERR_COMM;
    }
    m->seq++;
    mine[0] = (int64_t)m->seq; mine[1] = kind; mine[2] = count; mine[3] = sdt; mine[4] = rdt; mine[5] = c->tag;
    if (n == 1) return ZERO_OK;
    for (k = 0; k < n; k++) {
        if (k == me) continue;
        m->peer[nreq] = k;
        rc = MPI_Irecv(m->hdr + (int64_t)k * ZERO__MPI_HDR, ZERO__MPI_HDR, MPI_INT64_T, zero__mpi_world(m, k),
                       m->mtag, m->comm, &m->reqs[nreq++]);
        if (rc != MPI_SUCCESS) return zero__mpi_err(m, "MPI_Irecv", rc);
    }
    for (k = 0; k < n; k++) {
        if (k == me) continue;
        rc = MPI_Isend(mine, ZERO__MPI_HDR, MPI_INT64_T, zero__mpi_world(m, k), m->mtag, m->comm,
                       &m->reqs[nreq++]);
        if (rc != MPI_SUCCESS) return zero__mpi_err(m, "MPI_Isend", rc);
    }
    if ((r = zero__mpi_wait(m, kind, n - 1, nreq, timeout_ms, deadline,
                            "never arrived (dead, stalled or in another collective)")) != ZERO_OK)
        return r;
    for (i = 1; i < n; i++) {
        const int64_t *a = m->hdr, *b = m->hdr + (int64_t)i * ZERO__MPI_HDR;
        if (a[1] != b[1] || a[2] != b[2] || a[3] != b[3] || a[4] != b[4] || a[5] != b[5]) {
            char sa[80], sb[80];
            zero__mpi_hdr_str(sa, sizeof sa, a);
            zero__mpi_hdr_str(sb, sizeof sb, b);
            m->broken = 1;
            c->bad_tag[0] = a[5];
            c->bad_tag[1] = b[5];
            c->bad_rank = i;
            snprintf(c->err, sizeof c->err, "collective #%llu%s: rank %d called %s but rank %d called %s; ranks "
                     "must issue the same collectives in the same order", (unsigned long long)m->seq,
                     zero__mpi_where(m), zero__mpi_world(m, i), sb, zero__mpi_world(m, 0), sa);
            return ZERO_ERR_MISMATCH;
        }
    }
    return ZERO_OK;
}

/* Phase 2: the data, point to point, so a timeout can still name the rank whose data
   never came (it died or stalled after announcing the collective). Rank k's piece goes
   from send + k*sstride (sstride 0: the same piece to all) to recv + rank*rstride on k;
   root >= 0: only the root sends (a broadcast). Our own piece is the caller's business. */
static zero_result zero__mpi_data(zero__mpi_comm *m, int kind, const void *send, int64_t sstride, void *recv,
                                  int64_t rstride, int64_t bytes, int root, int timeout_ms, double deadline) {
    zero_comm *c = &m->base;
    int n = c->size, me = c->rank, k, nreq = 0, nrecv, rc;
    if (bytes > 0x7fffffff) {
        m->broken = 1;
        snprintf(c->err, sizeof c->err, "%s: %lld bytes per rank is over the MPI communicator's limit of INT_MAX "
                 "bytes per rank and call", zero__coll_name(kind), (long long)bytes);
        return ZERO_ERR_UNSUPPORTED;
    }
    if (n == 1 || bytes == 0) return ZERO_OK;
    for (k = 0; k < n; k++) {
        if (k == me || (root >= 0 && k != root)) continue;
        m->peer[nreq] = k;
        rc = MPI_Irecv((char *)recv + (int64_t)k * rstride, (int)bytes, MPI_BYTE, zero__mpi_world(m, k),
                       m->mtag + 1, m->comm, &m->reqs[nreq++]);
        if (rc != MPI_SUCCESS) return zero__mpi_err(m, "MPI_Irecv", rc);
    }
    nrecv = nreq;
    for (k = 0; k < n; k++) {
        if (k == me || (root >= 0 && me != root)) continue;
        rc = MPI_Isend((const char *)send + (int64_t)k * sstride, (int)bytes, MPI_BYTE, zero__mpi_world(m, k),
                       m->mtag + 1, m->comm, &m->reqs[nreq++]);
        if (rc != MPI_SUCCESS) return zero__mpi_err(m, "MPI_Isend", rc);
    }
    return zero__mpi_wait(m, kind, nrecv, nreq, timeout_ms, deadline,
                          "sent no data (died or stalled inside the collective)");
}

static void *zero__mpi_scratch(zero__mpi_comm *m, int64_t bytes) {
    if (bytes > m->scratch_bytes) {
        zero__raw_free(NULL, m->scratch);
        m->scratch = zero__raw_alloc(NULL, (size_t)bytes);
        m->scratch_bytes = m->scratch ? bytes : 0;
        if (!m->scratch) {
            m->broken = 1;
            snprintf(m->base.err, sizeof m->base.err, "MPI communicator: out of memory (%lld bytes of scratch)",
                     (long long)bytes);
        }
    }
    return m->scratch;
}

static zero_result zero__mpi_all_gather(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    char *dst = (char *)recv + (int64_t)c->rank * bytes;
    zero_result r;
    if ((r = zero__mpi_enter(m, ZERO_COLL_ALL_GATHER, bytes, 0, 0, timeout_ms, dl)) != ZERO_OK) return r;
    if ((r = zero__mpi_data(m, ZERO_COLL_ALL_GATHER, send, 0, recv, bytes, bytes, -1, timeout_ms, dl)) != ZERO_OK)
        return r;
    if ((const char *)send != dst) memmove(dst, send, (size_t)bytes);
    return ZERO_OK;
}

static zero_result zero__mpi_reduce_scatter(zero_comm *c, const void *send, int sdt, void *recv, int rdt,
                                            int64_t count, int accumulate, int timeout_ms) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    int64_t piece = count * (int64_t)zero__esize(sdt);
    const void *ins[ZERO__MAX_RANKS];
    zero_result r;
    char *tmp;
    int k;
    if ((r = zero__mpi_enter(m, ZERO_COLL_REDUCE_SCATTER, count, sdt, rdt, timeout_ms, dl)) != ZERO_OK) return r;
    if (!(tmp = (char *)zero__mpi_scratch(m, piece * c->size))) return ZERO_ERR_OUT_OF_MEMORY;
    /* an all-to-all of the slices: rank k's slice for us lands at tmp + k*piece */
    if ((r = zero__mpi_data(m, ZERO_COLL_REDUCE_SCATTER, send, piece, tmp, piece, piece, -1, timeout_ms, dl)) !=
        ZERO_OK)
        return r;
    for (k = 0; k < c->size; k++)
        ins[k] = k == c->rank ? (const char *)send + (int64_t)k * piece : tmp + (int64_t)k * piece;
    if (c->sq_blk && c->ctx && c->ctx->dev->sum_norm) {    /* the CPU device: take the norm's blocks too */
        zero_result r2 = c->ctx->dev->sum_norm(c->ctx, ZERO__S_COMM, recv, rdt, ins, c->size, sdt, count, accumulate,
                                             c->sq_blk, NULL, 0);
        c->sq_done = r2 == ZERO_OK;
        return r2;
    }
    zero__sum_into(recv, rdt, ins, c->size, sdt, count, accumulate);
    return ZERO_OK;
}

static zero_result zero__mpi_all_reduce(zero_comm *c, void *buf, int dt, int64_t count, int timeout_ms) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    if (dt == ZERO__F64) {
        double dl = zero__now_ms() + timeout_ms, *all;
        zero_result r;
        int64_t i;
        int k;
        if (count > 64) return ZERO_ERR_INVALID_SIZE;
        if ((r = zero__mpi_enter(m, ZERO_COLL_ALL_REDUCE, count, dt, dt, timeout_ms, dl)) != ZERO_OK) return r;
        if (!(all = (double *)zero__mpi_scratch(m, count * 8 * c->size))) return ZERO_ERR_OUT_OF_MEMORY;
        if ((r = zero__mpi_data(m, ZERO_COLL_ALL_REDUCE, buf, 0, all, count * 8, count * 8, -1, timeout_ms, dl)) !=
            ZERO_OK)
            return r;
        memcpy(all + (int64_t)c->rank * count, buf, (size_t)count * 8);
        for (i = 0; i < count; i++) {      /* rank order from 0.0, as the local comm sums */
            double s = 0.0;
            for (k = 0; k < c->size; k++) s += all[(int64_t)k * count + i];
            ((double *)buf)[i] = s;
        }
        return ZERO_OK;
    } else {
        /* reduce-scatter + all-gather, exactly as the local comm (and the sharded stages) */
        int64_t per = count / c->size, es = (int64_t)zero__esize(dt);
        char *mine = (char *)buf + (int64_t)c->rank * per * es;
        zero_result r;
        if (count % c->size) return ZERO_ERR_INVALID_SIZE;
        if ((r = zero__mpi_reduce_scatter(c, buf, dt, mine, dt, per, 0, timeout_ms)) != ZERO_OK) return r;
        return zero__mpi_all_gather(c, mine, buf, per * es, timeout_ms);
    }
}

static zero_result zero__mpi_broadcast(zero_comm *c, void *buf, int64_t bytes, int root, int timeout_ms) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    zero_result r;
    if ((r = zero__mpi_enter(m, ZERO_COLL_BROADCAST, bytes, 0, root, timeout_ms, dl)) != ZERO_OK) return r;
    /* the root sends buf to every rank; the others receive it at buf (rstride 0) */
    return zero__mpi_data(m, ZERO_COLL_BROADCAST, buf, 0, buf, 0, bytes, root, timeout_ms, dl);
}

static zero_result zero__mpi_barrier(zero_comm *c, int timeout_ms) {
    /* the header exchange is itself a barrier: every rank heard from every other */
    return zero__mpi_enter((zero__mpi_comm *)c, ZERO_COLL_BARRIER, 0, 0, 0, timeout_ms,
                           zero__now_ms() + timeout_ms);
}

/* The same exchange as the reduce-scatter's, with no sum: chunk k of send goes to rank k,
   rank k's chunk for us lands at recv + k*bytes (send and recv must not overlap). */
static zero_result zero__mpi_all_to_all(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    int64_t mine = (int64_t)c->rank * bytes;
    zero_result r;
    if ((r = zero__mpi_enter(m, ZERO_COLL_ALL_TO_ALL, bytes, 0, 0, timeout_ms, dl)) != ZERO_OK) return r;
    if (bytes < 0) {       /* after the exchange: every rank passed the same count, so all fail */
        snprintf(c->err, sizeof c->err, "all_to_all: %lld bytes per rank", (long long)bytes);
        return ZERO_ERR_INVALID_SIZE;
    }
    if ((r = zero__mpi_data(m, ZERO_COLL_ALL_TO_ALL, send, bytes, recv, bytes, bytes, -1, timeout_ms, dl)) != ZERO_OK)
        return r;
    if ((const char *)send + mine != (char *)recv + mine) memmove((char *)recv + mine, (const char *)send + mine,
                                                                  (size_t)bytes);
    return ZERO_OK;
}

static zero__mpi_comm *zero__mpi_alloc(int size);

/* A node's and the cross-node endpoints: views of this endpoint's ranks, on its MPI_Comm
   with tags of their own (node member j is our rank (r / ns) * ns + j, cross-node member j
   is j * ns + r % ns). No MPI_Comm_split: it has no timeout, and a rank that came to it
   after the others gave up would wait in it for good. The header exchange makes sure every
   rank is here with the same ns (a lost rank is named; another ns or another collective is
   ZERO_ERR_MISMATCH). A split's endpoints are not split again. */
static zero_result zero__mpi_split(zero_comm *c, int ns, zero_comm **intra, zero_comm **inter) {
    zero__mpi_comm *m = (zero__mpi_comm *)c, *e[2] = { NULL, NULL };
    int timeout_ms = c->ctx ? c->ctx->desc.timeout_ms : 120000, k;
    zero_result r;
    *intra = *inter = NULL;
    r = zero__mpi_enter(m, ZERO_COLL_BARRIER, ns, ZERO__MPI_SPLIT, ZERO__MPI_SPLIT, timeout_ms,
                        zero__now_ms() + timeout_ms);
    if (r != ZERO_OK) return r;
    /* every rank passed the same ns and has the same parent: all fail alike */
    if (ns < 1 || c->size % ns) {
        snprintf(c->err, sizeof c->err, "split: %d ranks per node does not divide the world of %d", ns, c->size);
        return ZERO_ERR_INVALID_ARG;
    }
    if (m->parent) {
        snprintf(c->err, sizeof c->err, "split: a node's or the cross-node endpoint cannot be split again");
        return ZERO_ERR_UNSUPPORTED;
    }
    for (k = 0; k < 2; k++) {
        if (!(e[k] = zero__mpi_alloc(k ? c->size / ns : ns))) {
            zero__comm_destroy(e[0] ? &e[0]->base : NULL);
            snprintf(c->err, sizeof c->err, "split: out of memory");
            return ZERO_ERR_OUT_OF_MEMORY;
        }
        e[k]->comm = m->comm;
        e[k]->parent = m;
        e[k]->base.vt = c->vt;
        e[k]->base.tag = -1;
        e[k]->base.scope = k ? ZERO__SCOPE_CROSS : ZERO__SCOPE_NODE;
        e[k]->base.size = k ? c->size / ns : ns;
        e[k]->base.rank = k ? c->rank / ns : c->rank % ns;
        e[k]->rank0 = zero__mpi_world(m, k ? c->rank % ns : c->rank / ns * ns);
        e[k]->rstride = k ? ns * m->rstride : m->rstride;
        e[k]->mtag = ZERO__MPI_TAG + 10 * e[k]->base.scope;
    }
    *intra = &e[0]->base;
    *inter = &e[1]->base;
    return ZERO_OK;
}

/* MPI moves host memory: a device the host cannot read is refused */
static zero_result zero__mpi_attach(zero_comm *c, zero_ctx *ctx, zero__why *why) {
    (void)c;
    if (ctx->dev->host_access) return ZERO_OK;
    return zero__why_set(why, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION, "zero_create: the MPI communicator moves "
                         "host memory; with device %s use the local or NCCL communicator", ctx->dev->name);
}

static void zero__mpi_destroy(zero_comm *c);

ZERO__VT_BEGIN(zero__comm_vt, zero__mpi_vt)
    ZERO__VT_SET(all_gather, zero__mpi_all_gather) ZERO__VT_SET(reduce_scatter, zero__mpi_reduce_scatter)
    ZERO__VT_SET(all_reduce, zero__mpi_all_reduce) ZERO__VT_SET(broadcast, zero__mpi_broadcast)
    ZERO__VT_SET(barrier, zero__mpi_barrier) ZERO__VT_SET(all_to_all, zero__mpi_all_to_all)
    ZERO__VT_SET(split, zero__mpi_split) ZERO__VT_SET(destroy, zero__mpi_destroy)
    ZERO__VT_SET(set_nodes, NULL) ZERO__VT_SET(attach, zero__mpi_attach)
ZERO__VT_END(zero__comm_vt, zero__mpi_vt)

/* An endpoint's memory for `size` ranks, zeroed but for its arrays, and a one-rank
   zero_group that only provides the lock zero_create takes to claim the endpoint. */
static zero__mpi_comm *zero__mpi_alloc(int size) {
    zero__mpi_comm *m = (zero__mpi_comm *)zero__raw_alloc(NULL, sizeof *m);
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->hdr = (int64_t *)zero__raw_alloc(NULL, sizeof(int64_t) * ZERO__MPI_HDR * (size_t)size);
    m->reqs = (MPI_Request *)zero__raw_alloc(NULL, sizeof(MPI_Request) * 2 * (size_t)size);
    m->peer = (int *)zero__raw_alloc(NULL, sizeof(int) * 2 * (size_t)size);
    if (!m->hdr || !m->reqs || !m->peer || zero__group_create(&m->base.group, 1) != ZERO_OK) {
        zero__raw_free(NULL, m->hdr); zero__raw_free(NULL, m->reqs); zero__raw_free(NULL, m->peer);
        zero__raw_free(NULL, m);
        return NULL;
    }
    m->rstride = 1;
    m->mtag = ZERO__MPI_TAG;
    return m;
}

/* An endpoint on comm, which it takes over (freed on failure too). owns_init: destroying
   it finalizes MPI. */
static zero_result zero__mpi_wrap(zero_comm **out, MPI_Comm comm, int owns_init, const char *fn) {
    zero__mpi_comm *m;
    int rank = 0, size = 0, rc;
    rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &size);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&comm);
        return zero__fail(NULL, ZERO_ERR_COMM, ZERO_LOGITEM_MPI_ERROR, "%s: MPI_Comm_rank/size failed", fn);
    }
    if (!(m = zero__mpi_alloc(size))) {
        MPI_Comm_free(&comm);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    m->comm = comm;
    m->base.vt = &zero__mpi_vt;
    m->base.rank = rank;
    m->base.size = size;
    m->base.tag = -1;
    m->owns_init = owns_init;
    *out = &m->base;
    return ZERO_OK;
}

/* An endpoint on MPI_COMM_WORLD (initialized here if nobody has). */
static zero_result zero__mpi_create(zero_comm **out) {
    MPI_Comm dup;
    int inited = 0, provided = 0, size = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return zero__fail(NULL, ZERO_ERR_COMM, ZERO_LOGITEM_MPI_ERROR, "zero_comm_from_env: MPI_Init_thread failed");
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_MPI_ERROR,
                          "zero_comm_from_env: MPI provides thread level %d; zero.h calls MPI from its comm-stream "
                          "thread and needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE", provided);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > ZERO__MAX_RANKS)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_comm_from_env: MPI world of %d ranks; at most %d", size, ZERO__MAX_RANKS);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &dup) != MPI_SUCCESS)
        return zero__fail(NULL, ZERO_ERR_COMM, ZERO_LOGITEM_MPI_ERROR, "zero_comm_from_env: MPI_Comm_dup failed");
    return zero__mpi_wrap(out, dup, !inited, "zero_comm_from_env");
}

/* A split's endpoints are destroyed before the one they came from (zero__comm_destroy) and
   free no MPI_Comm (they use its); one that broke left requests in flight on that comm, so
   it marks the parent broken, which then skips MPI_Comm_free and MPI_Finalize (they would
   wait for the lost rank). */
static void zero__mpi_destroy(zero_comm *c) {
    zero__mpi_comm *m = (zero__mpi_comm *)c;
    if (m->broken && m->parent) m->parent->broken = 1;
    if (!m->broken && !m->parent) {
        MPI_Comm_free(&m->comm);
        if (m->owns_init) {
            int fin = 0;
            MPI_Finalized(&fin);
            if (!fin) MPI_Finalize();
        }
    }
    zero__group_destroy(m->base.group);
    zero__raw_free(NULL, m->scratch);
    zero__raw_free(NULL, m->hdr);
    zero__raw_free(NULL, m->reqs);
    zero__raw_free(NULL, m->peer);
    zero__raw_free(NULL, m);
}
#endif /* ZERO_MPI */

/* ---- comm: rendezvous ----------------------------------------------------------------
   A TCP all-gather of a small blob among `world` processes, through rank 0 listening
   at MASTER_ADDR:MASTER_PORT (torchrun's variables). The NCCL communicator uses it to
   hand rank 0's ncclUniqueId to everyone; it is plain POSIX sockets, so the CPU tests
   exercise it. Every socket is nonblocking and every wait is a poll() bounded by the
   one deadline, so a missing process is ZERO_ERR_TIMEOUT naming it, never a hang.
   Protocol (big-endian, 24-byte header): a rank > 0 connects (retrying until rank 0
   listens) and sends {magic, version, world, rank, bytes} and its blob; rank 0 checks
   each header, and once all world-1 ranks are in, answers each with {magic, version,
   world, status 0, world*bytes} and the blobs in rank order. A header that disagrees
   (another world size or blob size, a rank out of range or claimed twice, another
   version) fails rank 0 with ZERO_ERR_MISMATCH and every connected rank hears why
   ({..., status = -result, message length} and the message), so they fail fast too;
   the same happens on rank 0's timeout. A connection whose first bytes are not our
   magic (a port scanner, a stray client) is dropped and the rendezvous goes on. */

#define ZERO__RDV_MAGIC 0x5a45524fu     /* "ZERO" */
#define ZERO__RDV_VERSION 1u
#define ZERO__RDV_HDR 24
#define ZERO__RDV_MAX_BYTES (1 << 20)   /* per rank: the rendezvous is for small blobs */

typedef struct zero__rdv_hdr {
    uint32_t magic, version, world, rank;   /* rank: in replies, the status (-zero_result) */
    uint64_t bytes;                         /* in replies, the payload's length */
} zero__rdv_hdr;

static void zero__rdv_pack(unsigned char *b, const zero__rdv_hdr *h) {
    uint32_t w[4];
    int i, j;
    w[0] = h->magic; w[1] = h->version; w[2] = h->world; w[3] = h->rank;
    for (i = 0; i < 4; i++)
        for (j = 0; j < 4; j++) b[4 * i + j] = (unsigned char)(w[i] >> (24 - 8 * j));
    for (j = 0; j < 8; j++) b[16 + j] = (unsigned char)(h->bytes >> (56 - 8 * j));
}
static void zero__rdv_unpack(const unsigned char *b, zero__rdv_hdr *h) {
    uint32_t w[4];
    int i, j;
    for (i = 0; i < 4; i++)
        for (w[i] = 0, j = 0; j < 4; j++) w[i] = (w[i] << 8) | b[4 * i + j];
    h->magic = w[0]; h->version = w[1]; h->world = w[2]; h->rank = w[3];
    for (h->bytes = 0, j = 0; j < 8; j++) h->bytes = (h->bytes << 8) | b[16 + j];
}

static int zero__rdv_left_ms(double deadline) {
    double left = deadline - zero__now_ms();
    return left <= 0 ? 0 : left > 1e9 ? 1000000000 : (int)left + 1;
}

static void zero__rdv_sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int zero__rdv_socket(int family) {
    int fd = socket(family, SOCK_STREAM, 0), fl;
    if (fd < 0) return -1;
    fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* poll one fd for ev until the deadline: 1 ready, 0 timed out, -1 error (errno) */
static int zero__rdv_wait(int fd, short ev, double deadline) {
    for (;;) {
        struct pollfd p;
        int n;
        p.fd = fd; p.events = ev; p.revents = 0;
        n = poll(&p, 1, zero__rdv_left_ms(deadline));
        if (n > 0) return 1;
        if (n == 0) return zero__now_ms() >= deadline ? 0 : 1;
        if (errno != EINTR) return -1;
    }
}

/* send or receive exactly n bytes before the deadline: 0 done, 1 timed out, 2 the
   peer closed, -1 error (errno) */
static int zero__rdv_io(int fd, void *buf, size_t n, int sending, double deadline) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = sending ? send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, n - done, 0);
        if (k > 0) { done += (size_t)k; continue; }
        if (k == 0 && !sending) return 2;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno == EPIPE || errno == ECONNRESET ? 2 : -1;
        k = zero__rdv_wait(fd, sending ? POLLOUT : POLLIN, deadline);
        if (k == 0) return 1;
        if (k < 0) return -1;
    }
    return 0;
}

/* a reply: the status (0 or -zero_result) and its payload (the blobs, or a message) */
static int zero__rdv_reply(int fd, int world, zero_result status, const void *payload, int64_t len,
                           double deadline) {
    unsigned char b[ZERO__RDV_HDR];
    zero__rdv_hdr h;
    h.magic = ZERO__RDV_MAGIC; h.version = ZERO__RDV_VERSION; h.world = (uint32_t)world;
    h.rank = (uint32_t)(-(int)status); h.bytes = (uint64_t)len;
    zero__rdv_pack(b, &h);
    if (zero__rdv_io(fd, b, sizeof b, 1, deadline) != 0) return -1;
    return zero__rdv_io(fd, ZERO__UNCONST(void *, payload), (size_t)len, 1, deadline) == 0 ? 0 : -1;
}

typedef struct zero__rdv_conn {
    int fd;
    int rank;                       /* -1 until its header is read */
    int done;                       /* header and blob read */
    size_t got;                     /* bytes of the current part read so far */
    unsigned char hdr[ZERO__RDV_HDR];
} zero__rdv_conn;

/* rank 0's side: the connections, and which ranks are in */
typedef struct zero__rdv_srv {
    const char *where;
    int world, timeout_ms;
    int64_t bytes;                  /* per rank */
    void *all;                      /* the blobs in rank order */
    zero__rdv_conn *conn;           /* [cap] */
    struct pollfd *pfd;             /* [cap + 1]: the listener, then conn */
    char *seen;                     /* [world] a header claimed the rank */
    int cap, nconn, have, strays;   /* have: blobs read; strays: connections dropped as not ours */
    char *err;
    size_t errlen;
} zero__rdv_srv;

/* listen on every interface at the port: MASTER_ADDR names this host for the others.
   The socket, or -1 with the reason in s->err. */
static int zero__rdv_listen(const struct addrinfo *ai, const zero__rdv_srv *s) {
    struct sockaddr_storage any;
    int lfd, one = 1;
    memset(&any, 0, sizeof any);
    memcpy(&any, ai->ai_addr, ai->ai_addrlen);
    if (ai->ai_family == AF_INET) ((struct sockaddr_in *)&any)->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (ai->ai_family == AF_INET6) ((struct sockaddr_in6 *)&any)->sin6_addr = in6addr_any;
    lfd = zero__rdv_socket(ai->ai_family);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (const struct sockaddr *)&any, ai->ai_addrlen) != 0 || listen(lfd, s->world + 16) != 0) {
        snprintf(s->err, s->errlen, "rendezvous: rank 0 cannot listen on %s: %s (is another job using the port? "
                 "set MASTER_PORT, or ZERO_RENDEZVOUS_PORT, to a free one)", s->where, strerror(errno));
        if (lfd >= 0) close(lfd);
        return -1;
    }
    return lfd;
}

/* the timeout's sentence: the ranks (the first few) that never came */
static void zero__rdv_missing(const zero__rdv_srv *s) {
    char *err = s->err;
    size_t errlen = s->errlen, len = 0;
    int i, k;
    len += (size_t)snprintf(err + len, errlen - len, "rendezvous: rank(s) ");
    for (k = 1, i = 0; k < s->world && len + 24 < errlen; k++)
        if (!s->seen[k]) {
            if (i++ == 8) { len += (size_t)snprintf(err + len, errlen - len, ", ..."); break; }
            len += (size_t)snprintf(err + len, errlen - len, "%s%d", i > 1 ? ", " : "", k);
        }
    if (len < errlen)
        len += (size_t)snprintf(err + len, errlen - len, " never connected to %s within %d ms", s->where,
                                s->timeout_ms);
    if (s->strays && len < errlen)
        snprintf(err + len, errlen - len, " (%d connection(s) that were not zero.h ranks were dropped)", s->strays);
}

/* a new connection, nonblocking, or dropped when there is no room for it */
static void zero__rdv_accept(zero__rdv_srv *s, int lfd) {
    int fd = accept(lfd, NULL, NULL), fl;
    if (fd < 0) return;
    fl = fcntl(fd, F_GETFL, 0);
    if (s->nconn == s->cap || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        close(fd);
        s->strays++;
        return;
    }
    memset(&s->conn[s->nconn], 0, sizeof s->conn[s->nconn]);
    s->conn[s->nconn].fd = fd;
    s->conn[s->nconn].rank = -1;
    s->nconn++;
}

/* a whole header is in: the rank it claims, or ZERO_ERR_MISMATCH with why in s->err */
static zero_result zero__rdv_header(zero__rdv_srv *s, zero__rdv_conn *cn) {
    zero__rdv_hdr h;
    int world = s->world;
    zero__rdv_unpack(cn->hdr, &h);
    if (h.version != ZERO__RDV_VERSION) {
        snprintf(s->err, s->errlen, "rendezvous: a process at %s speaks protocol version %u, rank 0 speaks "
                 "%u: run the same zero.h everywhere", s->where, h.version, ZERO__RDV_VERSION);
    } else if ((int64_t)h.world != world) {
        snprintf(s->err, s->errlen, "rendezvous: rank %u says the world has %u ranks, rank 0 says %d: "
                 "every process must be started with the same WORLD_SIZE", h.rank, h.world, world);
    } else if (h.rank < 1 || (int64_t)h.rank >= world) {
        snprintf(s->err, s->errlen, "rendezvous: a process at %s says it is rank %u of %d: ranks must be "
                 "1..%d (rank 0 is this listener); is RANK set right?", s->where, h.rank, world, world - 1);
    } else if ((int64_t)h.bytes != s->bytes) {
        snprintf(s->err, s->errlen, "rendezvous: rank %u sends %llu bytes, rank 0 sends %lld: the ranks "
                 "run different builds or configurations", h.rank, (unsigned long long)h.bytes,
                 (long long)s->bytes);
    } else if (s->seen[h.rank]) {
        snprintf(s->err, s->errlen, "rendezvous: two processes claim rank %u of %d: is RANK set right?", h.rank,
                 world);
    } else {
        cn->rank = (int)h.rank;
        cn->got = 0;
        s->seen[h.rank] = 1;
        if (s->bytes == 0) { cn->done = 1; s->have++; }
        return ZERO_OK;
    }
    cn->rank = (int)(h.rank < (uint32_t)world ? h.rank : 0);     /* it hears why */
    return ZERO_ERR_MISMATCH;
}

/* one read on a connection with something to read: its header (then checked into *r), or
   its blob. 1: drop it (it closed or failed, or it is not a zero.h rank) */
static int zero__rdv_recv(zero__rdv_srv *s, zero__rdv_conn *cn, zero_result *r) {
    ssize_t got;
    if (cn->rank < 0) {
        got = recv(cn->fd, cn->hdr + cn->got, ZERO__RDV_HDR - cn->got, 0);
        if (got > 0) cn->got += (size_t)got;
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 1;
        if (cn->got >= 4 && (cn->hdr[0] != 0x5a || cn->hdr[1] != 0x45 || cn->hdr[2] != 0x52 || cn->hdr[3] != 0x4f))
            return 1;     /* not our magic: not a zero.h rank */
        if (cn->got == ZERO__RDV_HDR) *r = zero__rdv_header(s, cn);
        return 0;
    }
    got = recv(cn->fd, (char *)s->all + (int64_t)cn->rank * s->bytes + cn->got, (size_t)s->bytes - cn->got, 0);
    if (got > 0 && (cn->got += (size_t)got) == (size_t)s->bytes) { cn->done = 1; s->have++; }
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        s->seen[cn->rank] = 0;  /* it left before its blob was in: it may come back */
        return 1;
    }
    return 0;
}

/* poll the listener and the connections until world-1 blobs are in, a header is wrong, or
   the deadline passes */
static zero_result zero__rdv_collect(zero__rdv_srv *s, int lfd, double deadline) {
    zero_result r = ZERO_OK;
    int i, n;
    while (s->have < s->world - 1 && r == ZERO_OK) {
        s->pfd[0].fd = lfd; s->pfd[0].events = POLLIN; s->pfd[0].revents = 0;
        for (i = 0; i < s->nconn; i++) {
            s->pfd[i + 1].fd = s->conn[i].done ? -1 : s->conn[i].fd;
            s->pfd[i + 1].events = POLLIN; s->pfd[i + 1].revents = 0;
        }
        n = poll(s->pfd, (nfds_t)(s->nconn + 1), zero__rdv_left_ms(deadline));
        if (n < 0 && errno != EINTR) {
            snprintf(s->err, s->errlen, "rendezvous: poll failed on rank 0: %s", strerror(errno));
            return ZERO_ERR_COMM;
        }
        if (n <= 0) {
            if (zero__now_ms() < deadline) continue;
            zero__rdv_missing(s);
            return ZERO_ERR_TIMEOUT;
        }
        if (s->pfd[0].revents & POLLIN) zero__rdv_accept(s, lfd);
        for (i = 0; i < s->nconn && r == ZERO_OK; i++) {
            zero__rdv_conn *cn = &s->conn[i];
            if (cn->done || !(s->pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (!zero__rdv_recv(s, cn, &r)) continue;
            if (cn->rank < 0) s->strays++;
            close(cn->fd);
            s->conn[i] = s->conn[--s->nconn];
            i--;
        }
    }
    return r;
}

/* answer: the blobs, or why rank 0 gave up (best effort, briefly, so that the others fail
   fast instead of waiting out their own timeouts); closes every connection */
static zero_result zero__rdv_answer(zero__rdv_srv *s, zero_result r, double deadline) {
    double dl = r == ZERO_OK ? deadline : zero__now_ms() + 500.0;
    int i;
    for (i = 0; i < s->nconn; i++) {
        const zero__rdv_conn *cn = &s->conn[i];
        if (cn->rank >= 0) {
            if (r == ZERO_OK) {
                if (zero__rdv_reply(cn->fd, s->world, ZERO_OK, s->all, s->bytes * s->world, dl) != 0) {
                    snprintf(s->err, s->errlen, "rendezvous: rank %d dropped its connection to %s before rank 0 "
                             "could answer (did it time out or die?)", cn->rank, s->where);
                    r = ZERO_ERR_COMM;
                    dl = zero__now_ms() + 500.0;
                }
            } else {
                zero__rdv_reply(cn->fd, s->world, r, s->err, (int64_t)strlen(s->err), dl);
            }
        }
        close(cn->fd);
    }
    return r;
}

/* rank 0: collect world-1 headers and blobs, then answer everyone. `all` holds the
   blobs in rank order (ours already at 0). */
static zero_result zero__rdv_serve(const struct addrinfo *ai, const char *where, int world, int64_t bytes,
                                   void *all, int timeout_ms, double deadline, char *err, size_t errlen) {
    zero__rdv_srv s;
    zero_result r = ZERO_ERR_COMM;
    int lfd;
    memset(&s, 0, sizeof s);
    s.where = where; s.world = world; s.timeout_ms = timeout_ms; s.bytes = bytes; s.all = all;
    s.err = err; s.errlen = errlen;
    s.cap = world - 1 + 16;
    s.conn = (zero__rdv_conn *)zero__raw_alloc(NULL, sizeof *s.conn * (size_t)s.cap);
    s.pfd = (struct pollfd *)zero__raw_alloc(NULL, sizeof *s.pfd * (size_t)(s.cap + 1));
    s.seen = (char *)zero__raw_alloc(NULL, (size_t)world);
    if (!s.conn || !s.pfd || !s.seen) {
        snprintf(err, errlen, "rendezvous: out of memory for %d ranks", world);
        r = ZERO_ERR_OUT_OF_MEMORY;
    } else {
        memset(s.seen, 0, (size_t)world);
        s.seen[0] = 1;
        if ((lfd = zero__rdv_listen(ai, &s)) >= 0) {
            r = zero__rdv_collect(&s, lfd, deadline);
            close(lfd);
            r = zero__rdv_answer(&s, r, deadline);
        }
    }
    zero__raw_free(NULL, s.conn); zero__raw_free(NULL, s.pfd); zero__raw_free(NULL, s.seen);
    return r;
}

/* rank > 0: connect to rank 0, again and again until it listens or the deadline passes */
static zero_result zero__rdv_connect(const struct addrinfo *ai, const char *where, int rank, int world,
                                     int timeout_ms, double deadline, int *out, char *err, size_t errlen) {
    int fd, last = 0, io;
    for (;;) {
        int e = 0;
        socklen_t el = sizeof e;
        fd = zero__rdv_socket(ai->ai_family);
        if (fd < 0) {
            snprintf(err, errlen, "rendezvous: rank %d cannot create a socket: %s", rank, strerror(errno));
            return ZERO_ERR_COMM;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        if (errno == EINPROGRESS || errno == EINTR) {
            io = zero__rdv_wait(fd, POLLOUT, deadline);
            if (io > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) break;
            last = io > 0 ? e : io == 0 ? ETIMEDOUT : errno;
        } else {
            last = errno;
        }
        close(fd);
        if (zero__now_ms() >= deadline) {
            snprintf(err, errlen, "rendezvous: rank %d of %d could not reach rank 0 at %s within %d ms (%s): is "
                     "rank 0 running, and MASTER_ADDR/MASTER_PORT the same everywhere?", rank, world, where,
                     timeout_ms, last ? strerror(last) : "no answer");
            return ZERO_ERR_TIMEOUT;
        }
        zero__rdv_sleep_ms(zero__rdv_left_ms(deadline) < 50 ? zero__rdv_left_ms(deadline) : 50);
    }
    *out = fd;
    return ZERO_OK;
}

/* rank > 0, its header and blob sent: rank 0's answer. ZERO_OK with *io the reading's
   zero__rdv_io code (0: the blobs are in `all`), or the failure rank 0 reported, or that
   whatever answered is not a zero.h rank 0. */
static zero_result zero__rdv_hear(int fd, const char *where, int world, int64_t bytes, void *all, double deadline,
                                  int *io, char *err, size_t errlen) {
    unsigned char b[ZERO__RDV_HDR];
    zero__rdv_hdr h;
    if ((*io = zero__rdv_io(fd, b, sizeof b, 0, deadline)) != 0) return ZERO_OK;
    zero__rdv_unpack(b, &h);
    if (h.magic != ZERO__RDV_MAGIC || h.version != ZERO__RDV_VERSION) {
        snprintf(err, errlen, "rendezvous: the process listening at %s is not a zero.h rank 0 (it answered "
                 "with something else)", where);
        return ZERO_ERR_COMM;
    }
    if (h.rank != 0) {
        char msg[ZERO__MSG];
        size_t n = h.bytes < sizeof msg - 1 ? (size_t)h.bytes : sizeof msg - 1;
        int st = (int)h.rank;
        msg[0] = '\0';
        if (zero__rdv_io(fd, msg, n, 0, zero__now_ms() + 500.0) == 0) msg[n] = '\0';
        else msg[0] = '\0';
        if (snprintf(err, errlen, "rendezvous: rank 0 at %s gave up: %s", where, msg[0] ? msg : "(no reason given)") < 0)
            err[0] = '\0';      /* (a long reason is cut short, which is fine) */
        return st == -ZERO_ERR_TIMEOUT || st == -ZERO_ERR_MISMATCH ? (zero_result)(-st) : ZERO_ERR_COMM;
    }
    if ((int64_t)h.bytes != bytes * world) {
        snprintf(err, errlen, "rendezvous: rank 0 at %s answered with %llu bytes, not %lld", where,
                 (unsigned long long)h.bytes, (long long)(bytes * world));
        return ZERO_ERR_MISMATCH;
    }
    *io = zero__rdv_io(fd, all, (size_t)(bytes * world), 0, deadline);
    return ZERO_OK;
}

/* rank > 0: connect (again and again until rank 0 listens), send, wait for the answer */
static zero_result zero__rdv_join(const struct addrinfo *ai, const char *where, int rank, int world,
                                  const void *mine, int64_t bytes, void *all, int timeout_ms, double deadline,
                                  char *err, size_t errlen) {
    unsigned char b[ZERO__RDV_HDR];
    zero__rdv_hdr h;
    zero_result r;
    int fd = -1, io;
    if ((r = zero__rdv_connect(ai, where, rank, world, timeout_ms, deadline, &fd, err, errlen)) != ZERO_OK) return r;
    h.magic = ZERO__RDV_MAGIC; h.version = ZERO__RDV_VERSION; h.world = (uint32_t)world;
    h.rank = (uint32_t)rank; h.bytes = (uint64_t)bytes;
    zero__rdv_pack(b, &h);
    io = zero__rdv_io(fd, b, sizeof b, 1, deadline);
    if (io == 0) io = zero__rdv_io(fd, ZERO__UNCONST(void *, mine), (size_t)bytes, 1, deadline);
    if (io == 0) r = zero__rdv_hear(fd, where, world, bytes, all, deadline, &io, err, errlen);
    close(fd);
    if (r != ZERO_OK) return r;
    if (io == 1) {
        snprintf(err, errlen, "rendezvous: rank %d of %d connected to rank 0 at %s but heard nothing back within "
                 "%d ms (rank 0 is still waiting for other ranks)", rank, world, where, timeout_ms);
        return ZERO_ERR_TIMEOUT;
    }
    if (io != 0) {
        snprintf(err, errlen, "rendezvous: rank 0 at %s closed the connection of rank %d (%s)", where, rank,
                 io == 2 ? "it failed or is not a zero.h rank 0" : strerror(errno));
        return ZERO_ERR_COMM;
    }
    memcpy((char *)all + (int64_t)rank * bytes, mine, (size_t)bytes);
    return ZERO_OK;
}

/* The all-gather: `all` (world*bytes) receives every rank's `mine` (bytes), in rank
   order. Rank 0 listens at addr:port; the others connect. */
static ZERO__MAYBE_UNUSED zero_result zero__tcp_allgather(const char *addr, int port, int rank, int world,
                                                          const void *mine, int64_t bytes, void *all,
                                                          int timeout_ms, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL;
    char portstr[16], where[300];
    double deadline = zero__now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    zero_result r;
    int gai;
    if (!err || errlen == 0) return ZERO_ERR_INVALID_ARG;
    err[0] = '\0';
    if (!addr || !*addr || port < 1 || port > 65535) {
        snprintf(err, errlen, "rendezvous: address '%s' port %d: need a host name or address and a port in 1..65535 "
                 "(MASTER_ADDR, MASTER_PORT)", addr ? addr : "(null)", port);
        return ZERO_ERR_INVALID_ARG;
    }
    if (world < 1 || world > ZERO__MAX_RANKS || rank < 0 || rank >= world || bytes < 0 ||
        bytes > ZERO__RDV_MAX_BYTES || (bytes && (!mine || !all)) || timeout_ms < 0) {
        snprintf(err, errlen, "rendezvous: rank %d of %d, %lld bytes, timeout %d ms: need 0 <= rank < world <= %d, "
                 "0..%d bytes and buffers, a timeout >= 0", rank, world, (long long)bytes, timeout_ms,
                 ZERO__MAX_RANKS, ZERO__RDV_MAX_BYTES);
        return ZERO_ERR_INVALID_ARG;
    }
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(where, sizeof where, "%s:%d", addr, port);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if ((gai = getaddrinfo(addr, portstr, &hints, &res)) != 0 || !res) {
        snprintf(err, errlen, "rendezvous: cannot resolve MASTER_ADDR '%s': %s", addr, gai_strerror(gai));
        if (res) freeaddrinfo(res);
        return ZERO_ERR_INVALID_ARG;
    }
    if (world == 1) {
        freeaddrinfo(res);
        if (bytes) memmove(all, mine, (size_t)bytes);
        return ZERO_OK;
    }
    if (rank == 0) {
        if (bytes) memmove(all, mine, (size_t)bytes);
        r = zero__rdv_serve(res, where, world, bytes, all, timeout_ms, deadline, err, errlen);
    } else {
        r = zero__rdv_join(res, where, rank, world, mine, bytes, all, timeout_ms, deadline, err, errlen);
    }
    freeaddrinfo(res);
    return r;
}

/* ---- comm: nccl ----------------------------------------------------------------------
   GPUs over NCCL (ZERO_CUDA): one endpoint per GPU, from zero_comm_from_env (one
   process per GPU; rank 0's ncclUniqueId reaches the others through the TCP
   rendezvous above, or through MPI when an MPI launcher started a ZERO_MPI build) or
   from zero_run_nccl (one thread per GPU in this process).
   Never a hang: the communicator is created non-blocking (ncclConfig_t.blocking = 0),
   so init and every call return at once (ncclInProgress) and the calling thread polls
   ncclCommGetAsyncError and cudaStreamQuery until done or until timeout_ms; then it
   aborts the communicator (ncclCommAbort), the endpoint is broken for good (later calls
   fail fast with ZERO_ERR_COMM), and the error names the collective.
   Like the MPI comm, each collective first all-gathers a small header (seq, kind,
   count, dtypes, tag), on the stream ahead of its data, and checks it in the collective's
   one wait: ranks that called different collectives get ZERO_ERR_MISMATCH with
   bad_tag/bad_rank set, also when the mismatched data collective failed or hung (the
   header is back by then; zero__nccl_fail looks). NCCL never sums: a reduce-scatter
   is an all-to-all of the slices (grouped ncclSend/ncclRecv) into a device scratch of
   N*count elements, then zero__k_sum_into adds them in fp32 in rank order, the sum the
   local comm takes, so both give bitwise-identical results (N <= 64: the kernel's
   limit). With reduce_mode ZERO_REDUCE_NCCL (zero_create sets it from the desc) the
   device f32/bf16/f16 reduce-scatter is ncclReduceScatter (into scratch, then
   zero__k_sum_into casts/accumulates, when the output dtype differs or accumulates) and
   the all-reduce is ncclAllReduce in place: NCCL's sums, not bitwise. An all-gather and a broadcast move bytes. Host pointers (the engine's small
   scalar collectives, zero_build's model check) are found with cudaPointerGetAttributes
   and staged through pinned host memory and the device scratch; doubles (ZERO__F64) are
   all-gathered and summed on the host in rank order.
   ZeRO++: all_to_all is the reduce-scatter's exchange without the sum; split (NCCL 2.18+:
   ncclCommSplit; older headers leave it NULL, so ZeRO++ is refused) makes the node's and
   the cross-node endpoints after a header exchange, on the parent's GPU, stream and scratch.
   Memory: the endpoint owns a stream (unless the caller sets c->cuda_stream), 48*(N+1)
   bytes of header on the device and in pinned memory, and a device scratch and a
   pinned staging buffer that grow to the largest collective's need (the all-to-all:
   N*count*sizeof(sdt) bytes) in the first step and never shrink; c->scratch_bytes
   counts the device bytes. */
#ifdef ZERO_CUDA

#define ZERO__NCCL_HDR 6
#define ZERO__NCCL_MAX_SUM 64           /* zero__k_sum_into's most inputs */
#define ZERO__NCCL_SPLIT ZERO_COLL_NUM   /* a split's header kind (a collective of no zero__comm_vt entry) */

static const char *zero__nccl_kind(int kind) { return kind == ZERO__NCCL_SPLIT ? "split" : zero__coll_name(kind); }

typedef struct zero__nccl_comm {
    zero_comm base;                 /* first: a zero_comm * is a zero__nccl_comm * */
    ncclComm_t comm;                /* NULL after an abort */
    int device;
    cudaStream_t own;               /* created at init; c->cuda_stream, when set, is used instead */
    int broken;
    uint64_t seq;                   /* collectives issued, for headers and messages */
    int64_t *hdr_host, *hdr_dev;    /* [size][6] (pinned, device) */
    cudaEvent_t hdr_ev;             /* after the header's copy back to hdr_host */
    int hdr_out;                    /* a header exchange issued and not checked yet */
    char *scratch;                  /* device, grows */
    int64_t scratch_cap;
    char *pinned;                   /* pinned host staging, grows */
    int64_t pinned_cap;
    int reduce_mode;                /* zero_reduce_mode: set by zero_create from its desc */
    struct zero__nccl_comm *parent; /* a node's or the cross-node endpoint (split): the one it came from */
} zero__nccl_comm;

/* a split's endpoints run on their parent's stream and follow its reduce_mode (zero_create
   sets both on the parent, which outlives them) */
static cudaStream_t zero__nccl_stream(const zero__nccl_comm *m) {
    if (m->parent) return zero__nccl_stream(m->parent);
    return m->base.cuda_stream ? (cudaStream_t)m->base.cuda_stream : m->own;
}
static int zero__nccl_mode(const zero__nccl_comm *m) { return m->parent ? zero__nccl_mode(m->parent) : m->reduce_mode; }

static void zero__nccl_abort(zero__nccl_comm *m) {
    if (m->comm) ncclCommAbort(m->comm);
    m->comm = NULL;
}

/* a failure: the message goes to c->err; after a timeout or an NCCL/CUDA error the
   communicator is aborted (its kernels may never finish otherwise) */
static zero_result zero__nccl_check(zero__nccl_comm *m);
/* the header exchange went through: every rank's row carries this collective's number (a
   failed all-gather of the headers leaves rows of an older one, or never-written bytes) */
static int zero__nccl_hdr_whole(const zero__nccl_comm *m) {
    int i;
    for (i = 0; i < m->base.size; i++)
        if (m->hdr_host[(int64_t)i * ZERO__NCCL_HDR] != (int64_t)m->seq) return 0;
    return 1;
}
static zero_result zero__nccl_fail(zero__nccl_comm *m, zero_result r, const char *fmt, ...) {
    va_list ap;
    /* a data collective that failed or hung after a header exchange that went through: a
       mismatch the headers show is the cause to name (the header is ahead of the data on
       the stream, so it is back unless a rank never issued it) */
    if (m->hdr_out && r != ZERO_ERR_MISMATCH && m->comm && cudaEventQuery(m->hdr_ev) == cudaSuccess &&
        zero__nccl_hdr_whole(m) && zero__nccl_check(m) == ZERO_ERR_MISMATCH) {
        zero__nccl_abort(m);
        return ZERO_ERR_MISMATCH;
    }
    (void)cudaGetLastError();       /* (a not-ready query) */
    m->hdr_out = 0;
    va_start(ap, fmt);
    vsnprintf(m->base.err, sizeof m->base.err, fmt, ap);
    va_end(ap);
    m->broken = 1;
    if (r == ZERO_ERR_TIMEOUT || r == ZERO_ERR_COMM) zero__nccl_abort(m);
    return r;
}

static zero_result zero__nccl_cuda(zero__nccl_comm *m, int kind, const char *what, cudaError_t e) {
    (void)cudaGetLastError();
    return zero__nccl_fail(m, ZERO_ERR_COMM, "%s #%llu on rank %d: %s failed: %s", zero__nccl_kind(kind),
                           (unsigned long long)m->seq, m->base.rank, what, cudaGetErrorString(e));
}

static void zero__nccl_backoff(int *spins) {
    if (++*spins > 64) {
        struct timespec ts;
        ts.tv_sec = 0;
        ts.tv_nsec = *spins > 1000 ? 200000L : 20000L;
        nanosleep(&ts, NULL);
    }
}

/* after an NCCL call on the non-blocking communicator: wait until it is enqueued */
static zero_result zero__nccl_issued(zero__nccl_comm *m, int kind, const char *what, ncclResult_t rc,
                                     int timeout_ms, double deadline) {
    int spins = 0;
    while (rc == ncclInProgress) {
        if (zero__now_ms() > deadline)
            return zero__nccl_fail(m, ZERO_ERR_TIMEOUT, "%s #%llu timed out after %d ms on rank %d: %s never got "
                                   "going; the NCCL communicator was aborted", zero__nccl_kind(kind),
                                   (unsigned long long)m->seq, timeout_ms, m->base.rank, what);
        zero__nccl_backoff(&spins);
        if (ncclCommGetAsyncError(m->comm, &rc) != ncclSuccess) rc = ncclInternalError;
    }
    if (rc != ncclSuccess)
        return zero__nccl_fail(m, ZERO_ERR_COMM, "%s #%llu on rank %d: %s failed: %s (%s)", zero__nccl_kind(kind),
                               (unsigned long long)m->seq, m->base.rank, what, ncclGetErrorString(rc),
                               ncclGetLastError(m->comm));
    return ZERO_OK;
}

/* wait for everything on the stream: done, an NCCL/CUDA error, or the deadline */
static zero_result zero__nccl_wait(zero__nccl_comm *m, int kind, const char *phase, int timeout_ms, double deadline) {
    cudaStream_t s = zero__nccl_stream(m);
    int spins = 0;
    __atomic_add_fetch(&m->base.host_syncs, 1, __ATOMIC_RELAXED);
    for (;;) {
        ncclResult_t ar = ncclSuccess;
        cudaError_t e = cudaStreamQuery(s);
        /* not-ready is no error, but the runtime leaves it as the thread's last error, and
           the next kernel launch (zero__k_sum_into returns cudaGetLastError) would report it */
        if (e == cudaErrorNotReady) (void)cudaGetLastError();
        if (e != cudaSuccess && e != cudaErrorNotReady) return zero__nccl_cuda(m, kind, "the stream", e);
        if (ncclCommGetAsyncError(m->comm, &ar) != ncclSuccess) ar = ncclInternalError;
        if (ar != ncclSuccess && ar != ncclInProgress)
            return zero__nccl_fail(m, ZERO_ERR_COMM, "%s #%llu on rank %d (%s): NCCL failed: %s (%s); the NCCL "
                                   "communicator was aborted", zero__nccl_kind(kind), (unsigned long long)m->seq,
                                   m->base.rank, phase, ncclGetErrorString(ar), ncclGetLastError(m->comm));
        if (e == cudaSuccess) {
            /* the stream is idle: the context's comm-stream ops queued before are done too */
            const zero__nccl_comm *o = m->parent ? m->parent : m;
            if (o->base.ctx && o->base.ctx->desc.device == ZERO_DEVICE_CUDA && o->base.ctx->dev_state &&
                zero__cu(o->base.ctx)->comm == s)
                __atomic_store_n(&zero__cu(o->base.ctx)->comm_pending, 0, __ATOMIC_RELAXED);
            return m->hdr_out ? zero__nccl_check(m) : ZERO_OK;
        }
        if (zero__now_ms() > deadline)
            return zero__nccl_fail(m, ZERO_ERR_TIMEOUT, "%s #%llu timed out after %d ms on rank %d (%s): a rank "
                                   "never arrived, died or stalled (NCCL cannot say which); the NCCL communicator "
                                   "was aborted", zero__nccl_kind(kind), (unsigned long long)m->seq, timeout_ms,
                                   m->base.rank, phase);
        zero__nccl_backoff(&spins);
    }
}

/* device scratch and pinned staging: grown on demand (the first steps), never shrunk. A
   split's endpoints use their parent's (their collectives and the parent's run one at a
   time on one thread, and each is done with them when it returns) */
static char *zero__nccl_scratch(zero__nccl_comm *m, int kind, int64_t bytes) {
    zero__nccl_comm *o = m->parent ? m->parent : m;
    cudaError_t e;
    if (bytes <= o->scratch_cap) return o->scratch;
    if (o->scratch) { cudaFree(o->scratch); __atomic_add_fetch(&o->base.host_syncs, 1, __ATOMIC_RELAXED); }
    o->base.scratch_bytes -= o->scratch_cap;
    o->scratch = NULL;
    o->scratch_cap = 0;
    __atomic_add_fetch(&o->base.device_allocs, 1, __ATOMIC_RELAXED);
    if ((e = cudaMalloc((void **)&o->scratch, (size_t)bytes)) != cudaSuccess) {
        (void)cudaGetLastError();
        o->scratch = NULL;
        zero__nccl_fail(m, ZERO_ERR_OUT_OF_MEMORY, "%s #%llu on rank %d: cudaMalloc of %lld bytes of scratch "
                        "failed: %s", zero__nccl_kind(kind), (unsigned long long)m->seq, m->base.rank,
                        (long long)bytes, cudaGetErrorString(e));
        return NULL;
    }
    o->scratch_cap = bytes;
    o->base.scratch_bytes += bytes;
    return o->scratch;
}
static char *zero__nccl_pinned(zero__nccl_comm *m, int kind, int64_t bytes) {
    zero__nccl_comm *o = m->parent ? m->parent : m;
    cudaError_t e;
    if (bytes <= o->pinned_cap) return o->pinned;
    if (o->pinned) cudaFreeHost(o->pinned);
    o->pinned = NULL;
    o->pinned_cap = 0;
    if ((e = cudaMallocHost((void **)&o->pinned, (size_t)bytes)) != cudaSuccess) {
        (void)cudaGetLastError();
        o->pinned = NULL;
        zero__nccl_fail(m, ZERO_ERR_OUT_OF_MEMORY, "%s #%llu on rank %d: cudaMallocHost of %lld bytes failed: %s",
                        zero__nccl_kind(kind), (unsigned long long)m->seq, m->base.rank, (long long)bytes,
                        cudaGetErrorString(e));
        return NULL;
    }
    o->pinned_cap = bytes;
    return o->pinned;
}

/* host memory (plain or registered) is staged; device and managed memory go to NCCL */
static int zero__nccl_on_host(const void *p) {
    struct cudaPointerAttributes a;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

/* The header check, once the header is back in hdr_host (the collective's wait, or
   zero__nccl_fail finding hdr_ev done): the ranks' calls must match */
static zero_result zero__nccl_check(zero__nccl_comm *m) {
    zero_comm *c = &m->base;
    int i;
    m->hdr_out = 0;
    for (i = 1; i < c->size; i++) {
        const int64_t *a = m->hdr_host, *b = m->hdr_host + (int64_t)i * ZERO__NCCL_HDR;
        if (a[1] != b[1] || a[2] != b[2] || a[3] != b[3] || a[4] != b[4] || a[5] != b[5]) {
            c->bad_tag[0] = a[5];
            c->bad_tag[1] = b[5];
            c->bad_rank = i;
            return zero__nccl_fail(m, ZERO_ERR_MISMATCH, "collective #%llu: rank %d called %s(%s=%lld, tag=%lld) "
                                   "but rank 0 called %s(%s=%lld, tag=%lld); ranks must issue the same "
                                   "collectives in the same order", (unsigned long long)m->seq, i,
                                   zero__nccl_kind((int)b[1]), b[1] == ZERO__NCCL_SPLIT ? "ranks_per_node" : "count",
                                   (long long)b[2], (long long)b[5], zero__nccl_kind((int)a[1]),
                                   a[1] == ZERO__NCCL_SPLIT ? "ranks_per_node" : "count", (long long)a[2],
                                   (long long)a[5]);
        }
    }
    return ZERO_OK;
}
/* a collective that returns without a wait of its own (nothing to move; a barrier, a
   split): its header exchange waited for and checked */
static zero_result zero__nccl_settle(zero__nccl_comm *m, int kind, int timeout_ms, double deadline) {
    if (!m->hdr_out) return ZERO_OK;
    return zero__nccl_wait(m, kind, "header exchange", timeout_ms, deadline);
}

/* Phase 1: the header all-gather (see above), issued, not waited for: the collective's
   own wait checks it (zero__nccl_wait: zero__nccl_check), so a collective costs the host
   one wait, not two. Also makes the device current. */
static zero_result zero__nccl_enter(zero__nccl_comm *m, int kind, int64_t count, int sdt, int rdt, int timeout_ms,
                                    double deadline) {
    zero_comm *c = &m->base;
    cudaStream_t s;
    int64_t *mine;
    cudaError_t e;
    zero_result r;
    int n = c->size;
    if (m->broken || !m->comm) {
        if (!c->err[0]) snprintf(c->err, sizeof c->err, "the NCCL communicator failed earlier");
        m->broken = 1;
        return ZERO_ERR_COMM;
    }
    /* the context's memory must be on the communicator's GPU (NCCL moves it on that GPU's
       stream); zero_create checks it first, this keeps a later cudaSetDevice honest */
    if (c->ctx && c->ctx->desc.device == ZERO_DEVICE_CUDA && c->ctx->dev_state &&
        zero__cu(c->ctx)->device != m->device)
        return zero__nccl_fail(m, ZERO_ERR_INVALID_ARG, "%s #%llu on rank %d: the NCCL communicator is on GPU %d but "
                               "the context's memory is on GPU %d (cudaSetDevice(%d) before zero_create)",
                               zero__nccl_kind(kind), (unsigned long long)m->seq + 1, c->rank, m->device,
                               zero__cu(c->ctx)->device, m->device);
    if ((e = cudaSetDevice(m->device)) != cudaSuccess) return zero__nccl_cuda(m, kind, "cudaSetDevice", e);
    /* the previous collective's header, when it returned early (an argument every rank got
       wrong alike): checked before hdr_host is written again */
    if ((r = zero__nccl_settle(m, kind, timeout_ms, deadline)) != ZERO_OK) return r;
    m->seq++;
    mine = m->hdr_host + (int64_t)c->rank * ZERO__NCCL_HDR;
    mine[0] = (int64_t)m->seq; mine[1] = kind; mine[2] = count; mine[3] = sdt; mine[4] = rdt; mine[5] = c->tag;
    if (n == 1) return ZERO_OK;
    __atomic_add_fetch(&c->headers, 1, __ATOMIC_RELAXED);
    s = zero__nccl_stream(m);
    e = cudaMemcpyAsync(m->hdr_dev + (int64_t)c->rank * ZERO__NCCL_HDR, mine, ZERO__NCCL_HDR * sizeof(int64_t),
                        cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) return zero__nccl_cuda(m, kind, "cudaMemcpyAsync (header)", e);
    r = zero__nccl_issued(m, kind, "ncclAllGather (header)",
                          ncclAllGather(m->hdr_dev + (int64_t)c->rank * ZERO__NCCL_HDR, m->hdr_dev, ZERO__NCCL_HDR,
                                        ncclInt64, m->comm, s), timeout_ms, deadline);
    if (r != ZERO_OK) return r;
    e = cudaMemcpyAsync(m->hdr_host, m->hdr_dev, (size_t)n * ZERO__NCCL_HDR * sizeof(int64_t),
                        cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaEventRecord(m->hdr_ev, s);
    if (e != cudaSuccess) return zero__nccl_cuda(m, kind, "cudaMemcpyAsync (header)", e);
    m->hdr_out = 1;
    return ZERO_OK;
}

static zero_result zero__nccl_copy(zero__nccl_comm *m, int kind, void *dst, const void *src, int64_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, zero__nccl_stream(m));
    return e == cudaSuccess ? ZERO_OK : zero__nccl_cuda(m, kind, "cudaMemcpyAsync", e);
}

static zero_result zero__nccl_all_gather(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    int64_t total = bytes * c->size;
    int hs, hr;
    zero_result r;
    char *dev = NULL, *pin = NULL;
    if ((r = zero__nccl_enter(m, ZERO_COLL_ALL_GATHER, bytes, 0, 0, timeout_ms, dl)) != ZERO_OK) return r;
    if (bytes == 0) return zero__nccl_settle(m, ZERO_COLL_ALL_GATHER, timeout_ms, dl);
    hs = zero__nccl_on_host(send);
    hr = zero__nccl_on_host(recv);
    if (hs != hr)
        return zero__nccl_fail(m, ZERO_ERR_INVALID_ARG, "all_gather: send and recv must both be device memory or "
                               "both host memory");
    if (hs) {
        /* host: through pinned memory and the device scratch */
        if (!(pin = zero__nccl_pinned(m, ZERO_COLL_ALL_GATHER, total)) ||
            !(dev = zero__nccl_scratch(m, ZERO_COLL_ALL_GATHER, total)))
            return ZERO_ERR_OUT_OF_MEMORY;
        memcpy(pin + (int64_t)c->rank * bytes, send, (size_t)bytes);
        if ((r = zero__nccl_copy(m, ZERO_COLL_ALL_GATHER, dev + (int64_t)c->rank * bytes,
                                pin + (int64_t)c->rank * bytes, bytes)) != ZERO_OK)
            return r;
        send = dev + (int64_t)c->rank * bytes;
    }
    r = zero__nccl_issued(m, ZERO_COLL_ALL_GATHER, "ncclAllGather",
                          ncclAllGather(send, hs ? (void *)dev : recv, (size_t)bytes, ncclUint8, m->comm,
                                        zero__nccl_stream(m)), timeout_ms, dl);
    if (r == ZERO_OK && hs) r = zero__nccl_copy(m, ZERO_COLL_ALL_GATHER, pin, dev, total);
    if (r == ZERO_OK) r = zero__nccl_wait(m, ZERO_COLL_ALL_GATHER, "data", timeout_ms, dl);
    if (r == ZERO_OK && hs) memcpy(recv, pin, (size_t)total);
    return r;
}

static zero_result zero__nccl_broadcast(zero_comm *c, void *buf, int64_t bytes, int root, int timeout_ms) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    zero_result r;
    char *dev = NULL, *pin = NULL;
    int host;
    if ((r = zero__nccl_enter(m, ZERO_COLL_BROADCAST, bytes, 0, root, timeout_ms, dl)) != ZERO_OK) return r;
    if (bytes == 0 || c->size == 1) return zero__nccl_settle(m, ZERO_COLL_BROADCAST, timeout_ms, dl);
    if ((host = zero__nccl_on_host(buf)) != 0) {
        if (!(pin = zero__nccl_pinned(m, ZERO_COLL_BROADCAST, bytes)) ||
            !(dev = zero__nccl_scratch(m, ZERO_COLL_BROADCAST, bytes)))
            return ZERO_ERR_OUT_OF_MEMORY;
        if (c->rank == root) {
            memcpy(pin, buf, (size_t)bytes);
            if ((r = zero__nccl_copy(m, ZERO_COLL_BROADCAST, dev, pin, bytes)) != ZERO_OK) return r;
        }
    }
    r = zero__nccl_issued(m, ZERO_COLL_BROADCAST, "ncclBroadcast",
                          ncclBroadcast(host ? (void *)dev : buf, host ? (void *)dev : buf, (size_t)bytes, ncclUint8,
                                        root, m->comm, zero__nccl_stream(m)), timeout_ms, dl);
    if (r == ZERO_OK && host) r = zero__nccl_copy(m, ZERO_COLL_BROADCAST, pin, dev, bytes);
    if (r == ZERO_OK) r = zero__nccl_wait(m, ZERO_COLL_BROADCAST, "data", timeout_ms, dl);
    if (r == ZERO_OK && host && c->rank != root) memcpy(buf, pin, (size_t)bytes);
    return r;
}

/* NCCL's datatype for a zero dtype that NCCL can sum; -1: none */
static int zero__nccl_type(int dt) {
    return dt == ZERO_F32 ? (int)ncclFloat32 : dt == ZERO_BF16 ? (int)ncclBfloat16 : dt == ZERO_F16 ? (int)ncclFloat16 : -1;
}

/* reduce-scatter: the all-to-all of slices, then the fp32 sum in rank order (ZERO_REDUCE_NCCL:
   ncclReduceScatter) */
/* chunk k of send (piece bytes each, device memory) to rank k, rank k's chunk for us into
   recv + k * piece, in one group of sends and receives (our own chunk is not moved) */
static ncclResult_t zero__nccl_exchange(zero__nccl_comm *m, const char *send, char *recv, int64_t piece, cudaStream_t s) {
    int n = m->base.size, me = m->base.rank, k;
    ncclResult_t nr = ncclGroupStart(), ne;
    if (nr != ncclSuccess) return nr;
    for (k = 0; k < n && nr == ncclSuccess; k++) {
        if (k == me) continue;
        nr = ncclSend(send + (int64_t)k * piece, (size_t)piece, ncclUint8, k, m->comm, s);
        if (nr == ncclSuccess || nr == ncclInProgress)
            nr = ncclRecv(recv + (int64_t)k * piece, (size_t)piece, ncclUint8, k, m->comm, s);
        if (nr == ncclInProgress) nr = ncclSuccess;
    }
    /* the group is closed even after a failed call: one left open would take in the next
       collective (the communicator is aborted on the failure anyway) */
    ne = ncclGroupEnd();
    return nr == ncclSuccess ? ne : nr;
}

/* a module's last reduction (c->sq_blk, set by the engine): the norm's blocks of its slice,
   on the stream after the sum (the context's norm_blocks; its error is in c->err) */
static zero_result zero__nccl_norm(zero__nccl_comm *m, int host, const void *out, int64_t count) {
    zero_comm *c = &m->base;
    zero_result r;
    if (host || !c->sq_blk || !c->ctx || !c->ctx->dev->norm_blocks) return ZERO_OK;
    if ((r = c->ctx->dev->norm_blocks(c->ctx, ZERO__S_COMM, out, count, c->sq_blk)) == ZERO_OK) c->sq_done = 1;
    return r;
}
static zero_result zero__nccl_reduce_scatter(zero_comm *c, const void *send, int sdt, void *recv, int rdt,
                                             int64_t count, int accumulate, int timeout_ms) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    const int kind = ZERO_COLL_REDUCE_SCATTER;
    int64_t piece = count * (int64_t)zero__esize(sdt), rbytes = count * (int64_t)zero__esize(rdt);
    int64_t total = piece * c->size;
    const void *ins[ZERO__NCCL_MAX_SUM];
    cudaStream_t s;
    char *slices, *dsend, *drecv, *pin = NULL;
    int n = c->size, me = c->rank, k, host, rc;
    zero_result r;
    if ((r = zero__nccl_enter(m, kind, count, sdt, rdt, timeout_ms, dl)) != ZERO_OK) return r;
    if (count == 0) return zero__nccl_settle(m, kind, timeout_ms, dl);
    if (n > ZERO__NCCL_MAX_SUM)
        return zero__nccl_fail(m, ZERO_ERR_UNSUPPORTED, "reduce_scatter: the NCCL communicator sums at most %d "
                               "ranks' slices in order (zero__k_sum_into); this world has %d", ZERO__NCCL_MAX_SUM, n);
    host = zero__nccl_on_host(send);
    if (host != zero__nccl_on_host(recv))
        return zero__nccl_fail(m, ZERO_ERR_INVALID_ARG, "reduce_scatter: send and recv must both be device memory "
                               "or both host memory");
    /* scratch: [the other ranks' slices][host: our send][host: our recv] */
    if (!(slices = zero__nccl_scratch(m, kind, total + (host ? total + rbytes : 0)))) return ZERO_ERR_OUT_OF_MEMORY;
    s = zero__nccl_stream(m);
    dsend = ZERO__UNCONST(char *, send);
    drecv = (char *)recv;
    if (host) {
        if (!(pin = zero__nccl_pinned(m, kind, total + rbytes))) return ZERO_ERR_OUT_OF_MEMORY;
        dsend = slices + total;
        drecv = slices + 2 * total;
        memcpy(pin, send, (size_t)total);
        if (accumulate) memcpy(pin + total, recv, (size_t)rbytes);
        if ((r = zero__nccl_copy(m, kind, dsend, pin, total + (accumulate ? rbytes : 0))) != ZERO_OK) return r;
    }
    if (zero__nccl_mode(m) == ZERO_REDUCE_NCCL && zero__nccl_type(sdt) >= 0) {
        /* NCCL sums (its order and precision) into our slice, or into scratch when the
           output needs another dtype or accumulation */
        int direct = sdt == rdt && !accumulate;
        r = zero__nccl_issued(m, kind, "ncclReduceScatter",
                              ncclReduceScatter(dsend, direct ? (void *)drecv : (void *)slices, (size_t)count,
                                                (ncclDataType_t)zero__nccl_type(sdt), ncclSum, m->comm, s),
                              timeout_ms, dl);
        if (r != ZERO_OK) return r;
        ins[0] = slices;
        if (!direct && (rc = zero__k_sum_into(drecv, rdt, ins, 1, sdt, count, accumulate, (void *)s)) != 0)
            return zero__nccl_cuda(m, kind, "zero__k_sum_into", (cudaError_t)rc);
        if ((r = zero__nccl_norm(m, host, drecv, count)) != ZERO_OK) return r;
        if (host && (r = zero__nccl_copy(m, kind, pin + total, drecv, rbytes)) != ZERO_OK) return r;
        if ((r = zero__nccl_wait(m, kind, "data", timeout_ms, dl)) != ZERO_OK) return r;
        if (host) memcpy(recv, pin + total, (size_t)rbytes);
        return ZERO_OK;
    }
    if (n > 1) {
        ncclResult_t nr = zero__nccl_exchange(m, dsend, slices, piece, s);
        if ((r = zero__nccl_issued(m, kind, "ncclSend/ncclRecv (all-to-all)", nr, timeout_ms, dl)) != ZERO_OK) return r;
    }
    for (k = 0; k < n; k++) ins[k] = k == me ? dsend + (int64_t)me * piece : slices + (int64_t)k * piece;
    if ((const char *)ins[me] == drecv) {
        /* in place (an all-reduce): our slice is both an input and the output */
        if ((r = zero__nccl_copy(m, kind, slices + (int64_t)me * piece, ins[me], piece)) != ZERO_OK) return r;
        ins[me] = slices + (int64_t)me * piece;
    }
    if ((rc = zero__k_sum_into(drecv, rdt, ins, n, sdt, count, accumulate, (void *)s)) != 0)
        return zero__nccl_cuda(m, kind, "zero__k_sum_into", (cudaError_t)rc);
    if ((r = zero__nccl_norm(m, host, drecv, count)) != ZERO_OK) return r;
    if (host && (r = zero__nccl_copy(m, kind, pin + total, drecv, rbytes)) != ZERO_OK) return r;
    if ((r = zero__nccl_wait(m, kind, "data", timeout_ms, dl)) != ZERO_OK) return r;
    if (host) memcpy(recv, pin + total, (size_t)rbytes);
    return ZERO_OK;
}

static zero_result zero__nccl_all_reduce(zero_comm *c, void *buf, int dt, int64_t count, int timeout_ms) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    if (dt == ZERO__F64) {
        /* a few doubles: all-gathered, then summed on the host in rank order from 0.0 */
        double dl = zero__now_ms() + timeout_ms, *all;
        int64_t bytes = count * 8, i;
        zero_result r;
        char *dev;
        int k, host;
        if (count > 64) {
            snprintf(c->err, sizeof c->err, "all_reduce: %lld doubles; the f64 all-reduce takes at most 64",
                     (long long)count);
            return ZERO_ERR_INVALID_SIZE;
        }
        if ((r = zero__nccl_enter(m, ZERO_COLL_ALL_REDUCE, count, dt, dt, timeout_ms, dl)) != ZERO_OK) return r;
        if (count <= 0) return zero__nccl_settle(m, ZERO_COLL_ALL_REDUCE, timeout_ms, dl);
        if (!(all = (double *)zero__nccl_pinned(m, ZERO_COLL_ALL_REDUCE, bytes * c->size)) ||
            !(dev = zero__nccl_scratch(m, ZERO_COLL_ALL_REDUCE, bytes * c->size)))
            return ZERO_ERR_OUT_OF_MEMORY;
        host = zero__nccl_on_host(buf);
        if (host) {
            memcpy(all + (int64_t)c->rank * count, buf, (size_t)bytes);
            r = zero__nccl_copy(m, ZERO_COLL_ALL_REDUCE, dev + (int64_t)c->rank * bytes, all + (int64_t)c->rank * count,
                               bytes);
        } else {
            r = zero__nccl_copy(m, ZERO_COLL_ALL_REDUCE, dev + (int64_t)c->rank * bytes, buf, bytes);
        }
        if (r == ZERO_OK)
            r = zero__nccl_issued(m, ZERO_COLL_ALL_REDUCE, "ncclAllGather",
                                  ncclAllGather(dev + (int64_t)c->rank * bytes, dev, (size_t)bytes, ncclUint8, m->comm,
                                                zero__nccl_stream(m)), timeout_ms, dl);
        if (r == ZERO_OK) r = zero__nccl_copy(m, ZERO_COLL_ALL_REDUCE, all, dev, bytes * c->size);
        if (r == ZERO_OK) r = zero__nccl_wait(m, ZERO_COLL_ALL_REDUCE, "data", timeout_ms, dl);
        if (r != ZERO_OK) return r;
        for (i = 0; i < count; i++) {
            double sum = 0.0;
            for (k = 0; k < c->size; k++) sum += all[(int64_t)k * count + i];
            all[i] = sum;       /* row 0 is read only by this i */
        }
        if (host) {
            memcpy(buf, all, (size_t)bytes);
            return ZERO_OK;
        }
        if ((r = zero__nccl_copy(m, ZERO_COLL_ALL_REDUCE, buf, all, bytes)) != ZERO_OK) return r;
        return zero__nccl_wait(m, ZERO_COLL_ALL_REDUCE, "copy back", timeout_ms, dl);
    } else if (zero__nccl_mode(m) == ZERO_REDUCE_NCCL && zero__nccl_type(dt) >= 0 &&
               !zero__nccl_on_host(buf)) {
        /* NCCL's own all-reduce, in place (its order and precision) */
        double dl = zero__now_ms() + timeout_ms;
        zero_result r;
        if ((r = zero__nccl_enter(m, ZERO_COLL_ALL_REDUCE, count, dt, dt, timeout_ms, dl)) != ZERO_OK) return r;
        if (count <= 0) return zero__nccl_settle(m, ZERO_COLL_ALL_REDUCE, timeout_ms, dl);
        r = zero__nccl_issued(m, ZERO_COLL_ALL_REDUCE, "ncclAllReduce",
                              ncclAllReduce(buf, buf, (size_t)count, (ncclDataType_t)zero__nccl_type(dt), ncclSum,
                                            m->comm, zero__nccl_stream(m)), timeout_ms, dl);
        return r == ZERO_OK ? zero__nccl_wait(m, ZERO_COLL_ALL_REDUCE, "data", timeout_ms, dl) : r;
    } else {
        /* reduce-scatter + all-gather in place, exactly as the local comm */
        int64_t per = count / c->size, es = (int64_t)zero__esize(dt);
        char *mine = (char *)buf + (int64_t)c->rank * per * es;
        zero_result r;
        if (count % c->size) {
            snprintf(c->err, sizeof c->err, "all_reduce: count %lld is not a multiple of the world size %d",
                     (long long)count, c->size);
            return ZERO_ERR_INVALID_SIZE;
        }
        if ((r = zero__nccl_reduce_scatter(c, buf, dt, mine, dt, per, 0, timeout_ms)) != ZERO_OK) return r;
        return zero__nccl_all_gather(c, mine, buf, per * es, timeout_ms);
    }
}

static zero_result zero__nccl_barrier(zero_comm *c, int timeout_ms) {
    /* the header all-gather is itself a barrier: every rank heard from every other */
    double dl = zero__now_ms() + timeout_ms;
    zero_result r = zero__nccl_enter((zero__nccl_comm *)c, ZERO_COLL_BARRIER, 0, 0, 0, timeout_ms, dl);
    return r == ZERO_OK ? zero__nccl_settle((zero__nccl_comm *)c, ZERO_COLL_BARRIER, timeout_ms, dl) : r;
}

/* The reduce-scatter's exchange with no sum: chunk k of send goes to rank k (grouped
   ncclSend/ncclRecv), rank k's chunk for us lands at recv + k * bytes, ours by a copy on
   the stream; send and recv must not overlap. Host memory goes through the pinned staging
   and the device scratch. */
static zero_result zero__nccl_all_to_all(zero_comm *c, const void *send, void *recv, int64_t bytes, int timeout_ms) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    double dl = zero__now_ms() + timeout_ms;
    const int kind = ZERO_COLL_ALL_TO_ALL;
    int n = c->size, me = c->rank, host;
    int64_t total;
    const char *dsend = (const char *)send;
    char *drecv = (char *)recv, *dev = NULL, *pin = NULL;
    cudaStream_t s;
    zero_result r;
    if ((r = zero__nccl_enter(m, kind, bytes, 0, 0, timeout_ms, dl)) != ZERO_OK) return r;
    if ((r = zero__nccl_settle(m, kind, timeout_ms, dl)) != ZERO_OK) return r;
    if (bytes < 0 || bytes > INT64_MAX / 2 / n) {   /* every rank passed the same bytes: all fail alike */
        snprintf(c->err, sizeof c->err, "all_to_all: %lld bytes per rank", (long long)bytes);
        return ZERO_ERR_INVALID_SIZE;
    }
    if (bytes == 0) return ZERO_OK;
    total = bytes * n;
    host = zero__nccl_on_host(send);
    if (host != zero__nccl_on_host(recv))
        return zero__nccl_fail(m, ZERO_ERR_INVALID_ARG, "all_to_all: send and recv must both be device memory or "
                               "both host memory");
    if (dsend < drecv + total && drecv < dsend + total)
        return zero__nccl_fail(m, ZERO_ERR_INVALID_ARG, "all_to_all: send and recv overlap");
    s = zero__nccl_stream(m);
    if (host) {
        if (!(pin = zero__nccl_pinned(m, kind, 2 * total)) || !(dev = zero__nccl_scratch(m, kind, 2 * total)))
            return ZERO_ERR_OUT_OF_MEMORY;
        memcpy(pin, send, (size_t)total);
        if ((r = zero__nccl_copy(m, kind, dev, pin, total)) != ZERO_OK) return r;
        dsend = dev;
        drecv = dev + total;
    }
    if (n > 1) {
        ncclResult_t nr = zero__nccl_exchange(m, dsend, drecv, bytes, s);
        if ((r = zero__nccl_issued(m, kind, "ncclSend/ncclRecv (all-to-all)", nr, timeout_ms, dl)) != ZERO_OK) return r;
    }
    if ((r = zero__nccl_copy(m, kind, drecv + (int64_t)me * bytes, dsend + (int64_t)me * bytes, bytes)) != ZERO_OK)
        return r;
    if (host && (r = zero__nccl_copy(m, kind, pin + total, drecv, total)) != ZERO_OK) return r;
    if ((r = zero__nccl_wait(m, kind, "data", timeout_ms, dl)) != ZERO_OK) return r;
    if (host) memcpy(recv, pin + total, (size_t)total);
    return ZERO_OK;
}

#ifdef ZERO__NCCL_HAS_SPLIT
static zero_result zero__nccl_split(zero_comm *c, int ns, zero_comm **intra, zero_comm **inter);
#else
#  define zero__nccl_split NULL
#endif

/* NCCL moves device memory on the context's GPU, on its comm stream, and sums as its
   desc says (reduce_mode) */
static zero_result zero__nccl_attach(zero_comm *c, zero_ctx *ctx, zero__why *why) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    if (ctx->desc.device != ZERO_DEVICE_CUDA)
        return zero__why_set(why, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: an NCCL communicator needs desc.device = ZERO_DEVICE_CUDA");
    if (zero__cu(ctx)->device != m->device)
        return zero__why_set(why, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: the NCCL communicator is on GPU %d but the context would be on GPU %d, "
                             "the thread's current device (cudaSetDevice(%d) before zero_create)", m->device,
                             zero__cu(ctx)->device, m->device);
    c->cuda_stream = zero__cuda_comm_stream(ctx);
    c->device_ordered = 1;
    m->reduce_mode = (int)ctx->desc.reduce_mode;
    return ZERO_OK;
}

static void zero__nccl_destroy(zero_comm *c);

ZERO__VT_BEGIN(zero__comm_vt, zero__nccl_vt)
    ZERO__VT_SET(all_gather, zero__nccl_all_gather) ZERO__VT_SET(reduce_scatter, zero__nccl_reduce_scatter)
    ZERO__VT_SET(all_reduce, zero__nccl_all_reduce) ZERO__VT_SET(broadcast, zero__nccl_broadcast)
    ZERO__VT_SET(barrier, zero__nccl_barrier) ZERO__VT_SET(all_to_all, zero__nccl_all_to_all)
    ZERO__VT_SET(split, zero__nccl_split) ZERO__VT_SET(destroy, zero__nccl_destroy)
    ZERO__VT_SET(set_nodes, NULL) ZERO__VT_SET(attach, zero__nccl_attach)
ZERO__VT_END(zero__comm_vt, zero__nccl_vt)

static void zero__nccl_destroy(zero_comm *c) {
    zero__nccl_comm *m = (zero__nccl_comm *)c;
    cudaSetDevice(m->device);
    if (m->comm && !m->broken) {
        /* finalize flushes what is in flight; bounded, then abort */
        double dl = zero__now_ms() + 10000.0;
        ncclResult_t rc = ncclCommFinalize(m->comm);
        int spins = 0;
        while (rc == ncclInProgress && zero__now_ms() < dl) {
            zero__nccl_backoff(&spins);
            if (ncclCommGetAsyncError(m->comm, &rc) != ncclSuccess) rc = ncclInternalError;
        }
        if (rc == ncclSuccess) {
            ncclCommDestroy(m->comm);
            m->comm = NULL;
        }
    }
    zero__nccl_abort(m);
    if (m->own) cudaStreamDestroy(m->own);
    if (m->scratch) cudaFree(m->scratch);
    if (m->hdr_dev) cudaFree(m->hdr_dev);
    if (m->pinned) cudaFreeHost(m->pinned);
    if (m->hdr_host) cudaFreeHost(m->hdr_host);
    if (m->hdr_ev) cudaEventDestroy(m->hdr_ev);
    (void)cudaGetLastError();
    zero__group_destroy(m->base.group);
    zero__raw_free(NULL, m);
}

/* the CUDA devices this process sees; 0 with a message in err when there are none */
static int zero__nccl_devices(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        snprintf(err, errlen, "no CUDA device: cudaGetDeviceCount %s%s; NCCL needs a GPU per rank",
                 e != cudaSuccess ? "failed: " : "found 0 devices", e != cudaSuccess ? cudaGetErrorString(e) : "");
        return 0;
    }
    return n;
}

/* rendezvous and init timeout: ZERO_RENDEZVOUS_TIMEOUT_MS, default 300 s (the
   processes of a job may start minutes apart) */
static int zero__nccl_init_timeout_ms(void) {
    int v = 300000;
    if (zero__env_int("ZERO_RENDEZVOUS_TIMEOUT_MS", 1, 0x7fffffff, &v) < 0) v = 300000;
    return v;
}

/* An endpoint's memory, rank `rank` of `size` on GPU `device` (current): its header buffers,
   a one-rank zero_group (the lock zero_create takes to claim it) and, with own_stream, a
   stream of its own; no NCCL communicator yet. A message in err on failure. */
static zero_result zero__nccl_alloc(zero__nccl_comm **out, int rank, int size, int device, int own_stream, char *err,
                                    size_t errlen) {
    zero__nccl_comm *m = (zero__nccl_comm *)zero__raw_alloc(NULL, sizeof *m);
    int64_t hb = (int64_t)(size + 1) * ZERO__NCCL_HDR * (int64_t)sizeof(int64_t);
    cudaError_t e = cudaSuccess;
    *out = NULL;
    if (!m) {
        snprintf(err, errlen, "NCCL communicator: out of memory");
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    memset(m, 0, sizeof *m);
    m->device = device;
    m->base.rank = rank;
    m->base.size = size;
    m->base.tag = -1;
    if (zero__group_create(&m->base.group, 1) != ZERO_OK) {
        zero__raw_free(NULL, m);
        snprintf(err, errlen, "NCCL communicator: out of memory");
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    if (own_stream) e = cudaStreamCreateWithFlags(&m->own, cudaStreamNonBlocking);
    if (e == cudaSuccess && (e = cudaMalloc((void **)&m->hdr_dev, (size_t)hb)) == cudaSuccess) m->base.device_allocs++;
    if (e == cudaSuccess) e = cudaMallocHost((void **)&m->hdr_host, (size_t)hb);
    if (e == cudaSuccess && (e = cudaEventCreateWithFlags(&m->hdr_ev, cudaEventDisableTiming)) != cudaSuccess)
        m->hdr_ev = NULL;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        m->broken = 1;
        zero__nccl_destroy(&m->base);
        snprintf(err, errlen, "NCCL rank %d: a stream or header buffers on GPU %d: %s", rank, device,
                 cudaGetErrorString(e));
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    m->base.scratch_bytes = hb;
    *out = m;
    return ZERO_OK;
}

/* One endpoint on GPU `device`, rank `rank` of `size`, from rank 0's unique id. */
static zero_result zero__nccl_create(zero_comm **out, int rank, int size, int device, const ncclUniqueId *id,
                                     int timeout_ms) {
    zero__nccl_comm *m;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t rc;
    cudaError_t e;
    zero_result r;
    double dl = zero__now_ms() + timeout_ms;
    int spins = 0;
    char msg[ZERO__MSG];
    *out = NULL;
    if ((e = cudaSetDevice(device)) != cudaSuccess) {
        (void)cudaGetLastError();
        return zero__fail(NULL, ZERO_ERR_NO_DEVICE, ZERO_LOGITEM_NO_DEVICE, "NCCL rank %d: cudaSetDevice(%d) failed: %s",
                          rank, device, cudaGetErrorString(e));
    }
    if ((r = zero__nccl_alloc(&m, rank, size, device, 1, msg, sizeof msg)) != ZERO_OK)
        return zero__fail(NULL, r, ZERO_LOGITEM_OUT_OF_MEMORY, "%s", msg);
    m->base.vt = &zero__nccl_vt;
    cfg.blocking = 0;   /* init and calls return at once; we poll to our deadlines */
    rc = ncclCommInitRankConfig(&m->comm, size, *id, rank, &cfg);
    if (rc != ncclSuccess && rc != ncclInProgress) m->comm = NULL;   /* it failed before it began: nothing to abort */
    while (rc == ncclInProgress && zero__now_ms() < dl) {
        zero__nccl_backoff(&spins);
        if (ncclCommGetAsyncError(m->comm, &rc) != ncclSuccess) rc = ncclInternalError;
    }
    if (rc != ncclSuccess) {
        const char *why = rc == ncclInProgress ? "not every rank joined" : ncclGetErrorString(rc);
        const char *more = m->comm ? ncclGetLastError(m->comm) : ncclGetLastError(NULL);
        snprintf(msg, sizeof msg, "ncclCommInitRankConfig: rank %d of %d on GPU %d: %s%s%s%s", rank, size, device,
                 why, rc == ncclInProgress ? " within the timeout" : "", more && *more ? ": " : "", more ? more : "");
        m->broken = 1;
        zero__nccl_destroy(&m->base);
        return zero__fail(NULL, rc == ncclInProgress ? ZERO_ERR_TIMEOUT : ZERO_ERR_COMM,
                          rc == ncclInProgress ? ZERO_LOGITEM_COLL_TIMEOUT : ZERO_LOGITEM_COMM_BROKEN, "%s", msg);
    }
    *out = &m->base;
    return ZERO_OK;
}

#ifdef ZERO__NCCL_HAS_SPLIT
/* One ncclCommSplit of m's communicator into e (allocated, its rank `key` in its color),
   polled to the deadline with the parent: the split is non-blocking like the parent. On
   failure or timeout both are broken (the parent's ranks no longer agree on what ran on
   it: it is aborted) and m's err says which split. */
static zero_result zero__nccl_split_one(zero__nccl_comm *m, zero__nccl_comm *e, int color, int key, const char *what,
                                        int timeout_ms, double deadline) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t rc, pr = ncclInProgress;
    int spins = 0;
    cfg.blocking = 0;
    rc = ncclCommSplit(m->comm, color, key, &e->comm, &cfg);
    if (rc != ncclSuccess && rc != ncclInProgress) e->comm = NULL;    /* nothing began: nothing to abort */
    while (zero__now_ms() <= deadline) {
        if (rc == ncclInProgress && ncclCommGetAsyncError(e->comm, &rc) != ncclSuccess) rc = ncclInternalError;
        if (pr == ncclInProgress && ncclCommGetAsyncError(m->comm, &pr) != ncclSuccess) pr = ncclInternalError;
        if (rc != ncclInProgress && pr != ncclInProgress) break;
        zero__nccl_backoff(&spins);
    }
    if (rc == ncclSuccess && pr == ncclSuccess && e->comm) {
        int ur = -1, un = -1;       /* the rank and size the split's keys promise */
        if (ncclCommUserRank(e->comm, &ur) == ncclSuccess && ncclCommCount(e->comm, &un) == ncclSuccess &&
            ur == key && un == e->base.size)
            return ZERO_OK;
        e->broken = 1;
        return zero__nccl_fail(m, ZERO_ERR_COMM, "split #%llu on rank %d: ncclCommSplit (%s) made rank %d of %d, not "
                               "rank %d of %d; the NCCL communicator was aborted", (unsigned long long)m->seq,
                               m->base.rank, what, ur, un, key, e->base.size);
    }
    e->broken = 1;
    if (rc == ncclInProgress || pr == ncclInProgress)
        return zero__nccl_fail(m, ZERO_ERR_TIMEOUT, "split #%llu timed out after %d ms on rank %d: ncclCommSplit (%s) "
                               "did not finish: a rank never got there or NCCL stalled; the NCCL communicator was "
                               "aborted", (unsigned long long)m->seq, timeout_ms, m->base.rank, what);
    if (rc == ncclSuccess) rc = pr;
    return zero__nccl_fail(m, ZERO_ERR_COMM, "split #%llu on rank %d: ncclCommSplit (%s) failed: %s (%s); the NCCL "
                           "communicator was aborted", (unsigned long long)m->seq, m->base.rank, what,
                           ncclGetErrorString(rc), ncclGetLastError(e->comm ? e->comm : m->comm));
}

/* A node's and the cross-node endpoints by ncclCommSplit (NCCL 2.18+): color r / ns, key
   r % ns (the node's ranks in rank order), then color r % ns, key r / ns (the cross-node
   peers in node order). First the header exchange (kind split, count ns): a rank that
   called another collective or passed another ns is ZERO_ERR_MISMATCH before NCCL sees
   anything, and a rank that never comes times the others out there. The endpoints are on
   the parent's GPU, run on its stream with its scratch and have headers of their own;
   zero_comm_destroy of the parent destroys them first, and destroying them leaves the
   parent working. A split's endpoints are not split again. */
static zero_result zero__nccl_split(zero_comm *c, int ns, zero_comm **intra, zero_comm **inter) {
    zero__nccl_comm *m = (zero__nccl_comm *)c, *e[2] = { NULL, NULL };
    int timeout_ms = c->ctx ? c->ctx->desc.timeout_ms : 120000, k;
    double dl = zero__now_ms() + timeout_ms;
    zero_result r;
    *intra = *inter = NULL;
    if ((r = zero__nccl_enter(m, ZERO__NCCL_SPLIT, ns, 0, 0, timeout_ms, dl)) != ZERO_OK ||
        (r = zero__nccl_settle(m, ZERO__NCCL_SPLIT, timeout_ms, dl)) != ZERO_OK)
        return r;
    /* every rank passed the same ns and has the same parent: all fail alike */
    if (ns < 1 || c->size % ns) {
        snprintf(c->err, sizeof c->err, "split: %d ranks per node does not divide the world of %d", ns, c->size);
        return ZERO_ERR_INVALID_ARG;
    }
    if (m->parent) {
        snprintf(c->err, sizeof c->err, "split: a node's or the cross-node endpoint cannot be split again");
        return ZERO_ERR_UNSUPPORTED;
    }
    for (k = 0; k < 2 && r == ZERO_OK; k++) {
        int size = k ? c->size / ns : ns, rank = k ? c->rank / ns : c->rank % ns;
        if ((r = zero__nccl_alloc(&e[k], rank, size, m->device, 0, c->err, sizeof c->err)) != ZERO_OK) break;
        e[k]->parent = m;
        e[k]->base.vt = c->vt;
        e[k]->base.scope = k ? ZERO__SCOPE_CROSS : ZERO__SCOPE_NODE;
        r = zero__nccl_split_one(m, e[k], k ? c->rank % ns : c->rank / ns, rank,
                                 k ? "the cross-node endpoint" : "the node's endpoint", timeout_ms, dl);
    }
    if (r != ZERO_OK) {
        for (k = 0; k < 2; k++) if (e[k]) zero__nccl_destroy(&e[k]->base);
        return r;
    }
    *intra = &e[0]->base;
    *inter = &e[1]->base;
    return ZERO_OK;
}
#endif /* ZERO__NCCL_HAS_SPLIT */

/* zero_comm_from_env's NCCL endpoint: rank/size from the launcher (a world of one
   without one), the GPU from the local rank, the unique id through MPI or the TCP rendezvous. */
/* The rendezvous port: ZERO_RENDEZVOUS_PORT, else MASTER_PORT, or MASTER_PORT + 1 when
   torchrun's agent serves its own TCPStore at MASTER_PORT (it says so by exporting
   TORCHELASTIC_USE_AGENT_STORE=True to its workers). 0 when unset or malformed. */
static int zero__nccl_rdv_port(const char **which) {
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    int port = 0;
    *which = "ZERO_RENDEZVOUS_PORT";
    if (getenv("ZERO_RENDEZVOUS_PORT")) return zero__env_int("ZERO_RENDEZVOUS_PORT", 1, 65535, &port) == 1 ? port : 0;
    *which = "MASTER_PORT";
    if (zero__env_int("MASTER_PORT", 1, 65535, &port) != 1) return 0;
    if (agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1")))
        port = port < 65535 ? port + 1 : port - 1;
    return port;
}

static zero_result zero__nccl_from_env(zero_comm **out, int mpi_launcher, const char *launcher, int rank, int size) {
    static const char *local_vars[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID" };
    char err[ZERO__MSG];
    const char *addr = getenv("MASTER_ADDR"), *port_var = "MASTER_PORT";
    ncclUniqueId id;
    ncclResult_t nr;
    int ndev, local = -1, i, timeout_ms = 300000, use_mpi = 0, port = 0;
    *out = NULL;
    (void)launcher;
#ifdef ZERO_MPI
    use_mpi = mpi_launcher;
#endif
    /* the environment first (the same answer on every machine), then the GPU */
    if (zero__env_int("ZERO_RENDEZVOUS_TIMEOUT_MS", 1, 0x7fffffff, &timeout_ms) < 0)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_comm_from_env: ZERO_RENDEZVOUS_TIMEOUT_MS='%s' is not a positive number of ms",
                          getenv("ZERO_RENDEZVOUS_TIMEOUT_MS"));
    for (i = 0; i < 4 && local < 0; i++)
        if (zero__env_int(local_vars[i], 0, ZERO__MAX_RANKS - 1, &local) < 0)
            return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                              "zero_comm_from_env: %s='%s' is not a local rank (0..%d)", local_vars[i],
                              getenv(local_vars[i]), ZERO__MAX_RANKS - 1);
    if (size > 1 && !use_mpi && (!addr || !*addr || (port = zero__nccl_rdv_port(&port_var)) == 0))
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: NCCL over %d ranks needs MASTER_ADDR and %s (1..65535) for its "
                          "rendezvous (MASTER_ADDR=%s, %s=%s)%s", size, port_var, addr ? addr : "(unset)", port_var,
                          getenv(port_var) ? getenv(port_var) : "(unset)",
                          mpi_launcher ? ", or a ZERO_MPI build under an MPI launcher" : "");
    if ((ndev = zero__nccl_devices(err, sizeof err)) == 0)
        return zero__fail(NULL, ZERO_ERR_NO_DEVICE, ZERO_LOGITEM_NO_DEVICE, "zero_comm_from_env: %s", err);
    if (local < 0) local = rank % ndev;
    if (local >= ndev)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: local rank %d, but this process sees %d CUDA device(s); start at most "
                          "one process per GPU (torchrun --nproc-per-node=%d)", local, ndev, ndev);
    memset(&id, 0, sizeof id);
    if (rank == 0 && (nr = ncclGetUniqueId(&id)) != ncclSuccess)
        return zero__fail(NULL, ZERO_ERR_COMM, ZERO_LOGITEM_COMM_BROKEN, "zero_comm_from_env: ncclGetUniqueId failed: %s",
                          ncclGetErrorString(nr));
#ifdef ZERO_MPI
    if (size > 1 && use_mpi) {
        zero_comm *mc = NULL;
        zero_result r = zero__mpi_create(&mc);
        if (r != ZERO_OK) return r;
        if (mc->rank != rank || mc->size != size) {
            zero__mpi_destroy(mc);
            return zero__fail(NULL, ZERO_ERR_MISMATCH, ZERO_LOGITEM_NO_LAUNCHER,
                              "zero_comm_from_env: MPI and %s disagree about this process's rank", launcher);
        }
        mc->tag = -1;
        r = mc->vt->broadcast(mc, &id, (int64_t)sizeof id, 0, timeout_ms);
        if (r != ZERO_OK) {
            snprintf(err, sizeof err, "%s", mc->err);
            zero__mpi_destroy(mc);
            return zero__fail(NULL, r, ZERO_LOGITEM_COMM_BROKEN, "zero_comm_from_env: sending the NCCL id over MPI: %s",
                              err);
        }
        zero__mpi_destroy(mc);
    }
#endif
    if (size > 1 && !use_mpi) {
        unsigned char *all = (unsigned char *)zero__raw_alloc(NULL, sizeof id * (size_t)size);
        zero_result r;
        if (!all)
            return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_comm_from_env: out of memory");
        r = zero__tcp_allgather(addr, port, rank, size, &id, (int64_t)sizeof id, all, timeout_ms, err, sizeof err);
        if (r == ZERO_OK) memcpy(&id, all, sizeof id);   /* rank 0's */
        zero__raw_free(NULL, all);
        if (r != ZERO_OK)
            return zero__fail(NULL, r, r == ZERO_ERR_TIMEOUT ? ZERO_LOGITEM_COLL_TIMEOUT : ZERO_LOGITEM_NO_LAUNCHER,
                              "zero_comm_from_env: %s", err);
    }
    return zero__nccl_create(out, rank, size, local, &id, timeout_ms);
}

typedef struct zero__nccl_run_arg {
    ncclUniqueId id;
    zero_rank_fn fn;
    void *user;
    int rank, size;
    zero_result result;
    char err[ZERO__MSG];
} zero__nccl_run_arg;

static void *zero__nccl_run_main(void *p) {
    zero__nccl_run_arg *a = (zero__nccl_run_arg *)p;
    zero_comm *c = NULL;
    a->result = zero__nccl_create(&c, a->rank, a->size, a->rank, &a->id, zero__nccl_init_timeout_ms());
    if (a->result == ZERO_OK) a->result = a->fn(c, a->rank, a->user);
    if (a->result != ZERO_OK)
        snprintf(a->err, sizeof a->err, "%s", c && c->err[0] ? c->err : zero__last_err(NULL));
    zero__comm_destroy(c);
    return NULL;
}

/* zero_run_nccl: one thread per GPU in this process, each with its NCCL endpoint */
static zero_result zero__run_nccl(int world_size, zero_rank_fn fn, void *user) {
    zero__nccl_run_arg *args;
    zero__thread *th;
    ncclResult_t nr;
    ncclUniqueId id;
    char err[ZERO__MSG];
    int i, started = 0, ndev;
    zero_result r = ZERO_OK;
    if ((ndev = zero__nccl_devices(err, sizeof err)) == 0)
        return zero__fail(NULL, ZERO_ERR_NO_DEVICE, ZERO_LOGITEM_NO_DEVICE, "zero_run_nccl: %s", err);
    if (world_size < 1 || world_size > ndev)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_run_nccl: world_size %d, but %d CUDA device(s) are visible; it runs one rank per GPU "
                          "(zero_run_local runs several ranks on one)", world_size, ndev);
    if ((nr = ncclGetUniqueId(&id)) != ncclSuccess)
        return zero__fail(NULL, ZERO_ERR_COMM, ZERO_LOGITEM_COMM_BROKEN, "zero_run_nccl: ncclGetUniqueId failed: %s",
                          ncclGetErrorString(nr));
    args = (zero__nccl_run_arg *)zero__raw_alloc(NULL, sizeof *args * (size_t)world_size);
    th = (zero__thread *)zero__raw_alloc(NULL, sizeof *th * (size_t)world_size);
    if (!args || !th) {
        zero__raw_free(NULL, args); zero__raw_free(NULL, th);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_run_nccl: out of memory");
    }
    for (i = 0; i < world_size; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].id = id; args[i].fn = fn; args[i].user = user; args[i].rank = i; args[i].size = world_size;
        /* a rank that never starts leaves the others to time out in init, never to hang */
        if (zero__thread_start(&th[i], zero__nccl_run_main, &args[i]) != 0) {
            r = zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                           "zero_run_nccl: could not start the thread for rank %d", i);
            break;
        }
        started++;
    }
    for (i = 0; i < started; i++) zero__thread_join(th[i]);
    for (i = 0; i < started && r == ZERO_OK; i++)
        if (args[i].result != ZERO_OK)
            r = zero__fail(NULL, args[i].result, ZERO_LOGITEM_COMM_BROKEN, "zero_run_nccl: rank %d: %s", i, args[i].err);
    zero__raw_free(NULL, args);
    zero__raw_free(NULL, th);
    return r;
}

#else
static zero_result zero__run_nccl(int world_size, zero_rank_fn fn, void *user) {
    (void)world_size; (void)fn; (void)user;
    return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_DEVICE,
                      "zero_run_nccl: zero.h was compiled without ZERO_CUDA (make CUDA=1, or -DZERO_CUDA)");
}
#endif /* ZERO_CUDA */

/* ---- comm: bootstrap from the launcher's environment (zero_comm_from_env) ----------- */

typedef struct zero__launcher {
    const char *name, *rank_var, *size_var;
    int mpi;                        /* started by an MPI-capable launcher */
    const char *node_var;           /* its ranks per node (the node topology) */
} zero__launcher;

/* The launcher's ranks per node into *ns (0: unset). Slurm writes "2" or "2(x4)" (2 tasks
   on each of 4 nodes): the leading count, when every node has it. It must divide the
   world: ZeRO++ takes ranks_per_node consecutive ranks as a node. */
/* The launcher's ranks per node in *ns, or 0 with the reason in why: a value that is not
   a number, does not divide the world, or (where the launcher says the local rank) nodes
   that are not runs of consecutive ranks. Never fatal: only ZeRO++ needs the topology, and
   zero_create says why it has none (zero_comm.node_why). */
static zero_result zero__env_node_size(const zero__launcher *L, int rank, int size, int *ns, char *why, size_t nwhy) {
    static const char *local_rank[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK" };
    const char *s = getenv(L->node_var), *p, *q;
    int v = 0, digits = 0, k;
    *ns = 0;
    why[0] = '\0';
    if (!s) return ZERO_OK;
    for (p = s; *p >= '0' && *p <= '9'; p++, digits++)
        if (v <= ZERO__MAX_RANKS) v = v * 10 + (*p - '0');
    if (digits && p[0] == '(' && p[1] == 'x') {      /* "N(xM)": M nodes of N, and nothing after */
        for (q = p + 2; *q >= '0' && *q <= '9'; q++) {}
        if (q > p + 2 && q[0] == ')') p = q + 1;
    }
    if (!digits || *p != '\0' || v < 1) {
        snprintf(why, nwhy, "zero_comm_from_env: %s='%s' is not a number of ranks per node (the same on every node)",
                 L->node_var, s);
        return ZERO_OK;
    }
    if (v > size || size % v) {
        snprintf(why, nwhy, "zero_comm_from_env: %s='%s' ranks per node does not divide the world size %s=%d "
                 "(zero.h's nodes are equal runs of consecutive ranks)", L->node_var, s, L->size_var, size);
        return ZERO_OK;
    }
    for (k = 0; k < 4; k++) {
        const char *lr = getenv(local_rank[k]);
        if (lr && !strcmp(L->node_var, k == 0 ? "OMPI_COMM_WORLD_LOCAL_SIZE" : k == 1 ? "MPI_LOCALNRANKS" :
                                       k == 2 ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE") &&
            atoi(lr) != rank % v) {
            snprintf(why, nwhy, "zero_comm_from_env: %s=%s but rank %d would be place %d of a node of %d consecutive "
                     "ranks (%s='%s'): the launcher did not place ranks in consecutive runs per node (by slot, not "
                     "round robin)", local_rank[k], lr, rank, rank % v, v, L->node_var, s);
            return ZERO_OK;
        }
    }
    *ns = v;
    return ZERO_OK;
}

/* the backend zero_comm_from_env was asked for (NULL or "": auto) */
enum { ZERO__ENV_AUTO, ZERO__ENV_LOCAL, ZERO__ENV_MPI, ZERO__ENV_NCCL };
static zero_result zero__env_backend(const char *backend, int *want) {
    if (!backend || !*backend) backend = "auto";
    *want = !strcmp(backend, "mpi") ? ZERO__ENV_MPI : !strcmp(backend, "local") ? ZERO__ENV_LOCAL :
            !strcmp(backend, "nccl") ? ZERO__ENV_NCCL : ZERO__ENV_AUTO;
    if (*want == ZERO__ENV_AUTO && strcmp(backend, "auto") != 0)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_comm_from_env: backend '%s' is not one of auto, local, mpi, nccl (NULL means auto)",
                          backend);
#ifndef ZERO_CUDA
    if (*want == ZERO__ENV_NCCL)
        return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: backend nccl, but zero.h was built without ZERO_CUDA: NCCL needs a "
                          "CUDA build (make CUDA=1, or -DZERO_CUDA and -lcudart -lnccl)");
#endif
    return ZERO_OK;
}

/* torchrun's RANK and WORLD_SIZE come with LOCAL_RANK, MASTER_ADDR and MASTER_PORT; a world
   of more than one needs them all */
static zero_result zero__env_torchrun_vars(int size) {
    static const char *need[3] = { "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT" };
    char miss[96] = "";
    size_t len = 0;
    int j;
    for (j = 0; j < 3; j++)
        if (!getenv(need[j])) len += (size_t)snprintf(miss + len, sizeof miss - len, "%s%s", len ? ", " : "", need[j]);
    if (len && size > 1)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: RANK and WORLD_SIZE are set (torchrun style) but %s %s not",
                          miss, strchr(miss, ',') ? "are" : "is");
    return ZERO_OK;
}

/* The first launcher whose variables are set (*L stays NULL when none is), the rank and
   world size it gives this process, and its ranks per node (zero__env_node_size) */
static zero_result zero__env_launcher(const zero__launcher **L, int *rank, int *size, int *ns, char *why,
                                      size_t nwhy) {
    static const zero__launcher launchers[] = {
        { "Open MPI's mpirun/mpiexec", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", 1, "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "an MPICH/Intel MPI mpiexec (PMI)", "PMI_RANK", "PMI_SIZE", 1, "MPI_LOCALNRANKS" },
        { "Slurm's srun", "SLURM_PROCID", "SLURM_NTASKS", 1, "SLURM_NTASKS_PER_NODE" },
        { "torchrun", "RANK", "WORLD_SIZE", 0, "LOCAL_WORLD_SIZE" },
    };
    const zero__launcher *l = NULL;
    zero_result r;
    int i, a, b;
    for (i = 0; i < (int)(sizeof launchers / sizeof launchers[0]) && !l; i++)
        if (getenv(launchers[i].rank_var) || getenv(launchers[i].size_var)) l = &launchers[i];
    if (!(*L = l)) return ZERO_OK;
    a = zero__env_int(l->rank_var, 0, ZERO__MAX_RANKS - 1, rank);
    b = zero__env_int(l->size_var, 1, ZERO__MAX_RANKS, size);
    if (a == 0 || b == 0)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: %s is set but %s is not: %s sets both; set the missing one",
                          a ? l->rank_var : l->size_var, a ? l->size_var : l->rank_var, l->name);
    if (a < 0 || b < 0 || *rank >= *size)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: %s='%s' and %s='%s' must be integers with 0 <= rank < size <= %d",
                          l->rank_var, getenv(l->rank_var), l->size_var, getenv(l->size_var), ZERO__MAX_RANKS);
    if (!l->mpi && (r = zero__env_torchrun_vars(*size)) != ZERO_OK) return r;
    zero__env_node_size(l, *rank, *size, ns, why, nwhy);
    return ZERO_OK;
}

/* no launcher: a world of one (NCCL's when asked for), except that MPI needs a launcher */
static zero_result zero__env_alone(zero_comm **out, int want) {
#ifdef ZERO_CUDA
    if (want == ZERO__ENV_NCCL) return zero__nccl_from_env(out, 0, "no launcher", 0, 1);
#endif
    if (want != ZERO__ENV_MPI) return zero__local_world_of_one(out);
    return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                      "zero_comm_from_env: backend mpi, but no launcher's variables are set; looked for "
                      "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI mpirun), PMI_RANK/PMI_SIZE (MPICH, "
                      "Intel MPI), SLURM_PROCID/SLURM_NTASKS (srun) and RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/"
                      "MASTER_PORT (torchrun); start the program with mpirun -np N");
}

/* an MPI launcher started this process: the MPI endpoint, which must agree with it */
static zero_result zero__env_mpi(zero_comm **out, const zero__launcher *L, int want, int rank, int size) {
#ifdef ZERO_MPI
    zero_result r = zero__mpi_create(out);
    (void)want;
    if (r != ZERO_OK) return r;
    if ((*out)->rank != rank || (*out)->size != size) {
        int mr = (*out)->rank, ms = (*out)->size;
        zero__mpi_destroy(*out);
        *out = NULL;
        return zero__fail(NULL, ZERO_ERR_MISMATCH, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: MPI says rank %d of %d, but %s=%d and %s=%d (%s); the "
                          "launcher and the MPI library disagree (with srun, pass --mpi=pmix or launch with "
                          "mpirun)", mr, ms, L->rank_var, rank, L->size_var, size, L->name);
    }
    return ZERO_OK;
#else
    if (size == 1 && want != ZERO__ENV_MPI) return zero__local_world_of_one(out);
    return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_LAUNCHER,
                      "zero_comm_from_env: %s started this process as rank %d of %d (%s, %s), but zero.h was built "
                      "without ZERO_MPI; rebuild with mpicc -DZERO_MPI", L->name, rank, size, L->rank_var, L->size_var);
#endif
}

/* launcher L started this process as rank of size: the endpoint for the backend wanted */
static zero_result zero__env_launched(zero_comm **out, const zero__launcher *L, int want, int rank, int size) {
    if (want == ZERO__ENV_LOCAL) {
        if (size > 1)
            return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NO_LAUNCHER,
                              "zero_comm_from_env: backend local spans one process, but %s started %d "
                              "(%s=%d); use backend mpi, or zero_run_local for ranks as threads", L->name, size,
                              L->size_var, size);
        return zero__local_world_of_one(out);
    }
#ifdef ZERO_CUDA
    /* torchrun: NCCL (a world of one stays local unless nccl is asked for); an MPI
       launcher: NCCL when asked for, MPI otherwise */
    if (want == ZERO__ENV_NCCL || (!L->mpi && want != ZERO__ENV_MPI && size > 1))
        return zero__nccl_from_env(out, L->mpi, L->name, rank, size);
#endif
    if (!L->mpi) {
        if (size == 1 && want != ZERO__ENV_MPI) return zero__local_world_of_one(out);
#ifdef ZERO_CUDA
        return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: backend mpi, but torchrun-style variables (RANK=%d, WORLD_SIZE=%d) are "
                          "set and no MPI launcher's; use backend nccl (or auto), or launch with mpirun or srun",
                          rank, size);
#else
        return zero__fail(NULL, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_LAUNCHER,
                          "zero_comm_from_env: torchrun-style variables (RANK=%d, WORLD_SIZE=%d) mean NCCL over a TCP "
                          "rendezvous at MASTER_ADDR:MASTER_PORT, and NCCL needs a CUDA build (make CUDA=1, or "
                          "-DZERO_CUDA); or launch with mpirun or srun and a ZERO_MPI build", rank, size);
#endif
    }
    return zero__env_mpi(out, L, want, rank, size);
}

/* the endpoint, and the launcher's ranks per node in *ns (0: none said, the reason in why) */
static zero_result zero__from_env(zero_comm **out, const char *backend, int *ns, char *why, size_t nwhy) {
    const zero__launcher *L = NULL;
    int want = ZERO__ENV_AUTO, rank = 0, size = 0;
    zero_result r;
    *out = NULL;
    if ((r = zero__env_backend(backend, &want)) != ZERO_OK) return r;
    if ((r = zero__env_launcher(&L, &rank, &size, ns, why, nwhy)) != ZERO_OK) return r;
    if (!L) return zero__env_alone(out, want);
    return zero__env_launched(out, L, want, rank, size);
}

/* zero_comm_from_env: the endpoint with the launcher's nodes, or why it has none (node_why) */
static zero_result zero__comm_from_env(zero_comm **out, const char *backend) {
    int ns = 0;
    char why[ZERO__MSG];
    zero_result r;
    why[0] = '\0';
    r = zero__from_env(out, backend, &ns, why, sizeof why);
    if (r == ZERO_OK && why[0]) snprintf((*out)->node_why, sizeof (*out)->node_why, "%s", why);
    if (r != ZERO_OK || ns == 0) return r;
    if ((r = zero__comm_set_nodes(*out, ns)) != ZERO_OK) {   /* checked already: not expected */
        zero__comm_destroy(*out);
        *out = NULL;
    }
    return r;
}

/* ---- comm: ranks as threads (zero_run_group, zero_run_local) ------------------------ */

typedef struct zero__run_arg {
    zero_group *g;
    zero_rank_fn fn;
    void *user;
    int rank;
    zero_result result;
    char err[ZERO__MSG];        /* the rank thread's last error when it failed */
} zero__run_arg;

static void *zero__run_main(void *p) {
    zero__run_arg *a = (zero__run_arg *)p;
    zero_comm *c = NULL;
    a->result = zero__comm_local(&c, a->g, a->rank);
    if (a->result == ZERO_OK) a->result = a->fn(c, a->rank, a->user);
    if (a->result != ZERO_OK) snprintf(a->err, sizeof a->err, "%s", zero__tls_err);
    zero__comm_destroy(c);
    return NULL;
}

/* one thread per rank of g, each with its endpoint; the first failing rank's result */
static zero_result zero__run_group(zero_group *g, zero_rank_fn fn, void *user, const char *who) {
    zero__run_arg *args;
    zero__thread *th;
    zero_result r;
    int i, started = 0, world_size = g->n;
    args = (zero__run_arg *)zero__raw_alloc(NULL, sizeof *args * (size_t)world_size);
    th = (zero__thread *)zero__raw_alloc(NULL, sizeof *th * (size_t)world_size);
    if (!args || !th) {
        zero__raw_free(NULL, args); zero__raw_free(NULL, th);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_run_group: out of memory");
    }
    r = ZERO_OK;
    for (i = 0; i < world_size; i++) {
        args[i].g = g; args[i].fn = fn; args[i].user = user; args[i].rank = i; args[i].result = ZERO_OK;
        args[i].err[0] = 0;
        if (zero__thread_start(&th[i], zero__run_main, &args[i]) != 0) {
            r = zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                           "zero_run_group: could not start thread for rank %d", i);
            break;
        }
        started++;
    }
    if (started < world_size) {
        /* the missing ranks count as gone, so the started ones fail fast */
        zero__mutex_lock(&g->mu);
        for (i = started; i < world_size; i++) g->left[i] = 1;
        zero__cond_broadcast(&g->cv);
        zero__mutex_unlock(&g->mu);
    }
    for (i = 0; i < started; i++) zero__thread_join(th[i]);
    for (i = 0; i < started && r == ZERO_OK; i++)     /* the caller's last error says why */
        if (args[i].result != ZERO_OK)
            r = zero__fail(NULL, args[i].result, ZERO_LOGITEM_COMM_BROKEN, "%s: rank %d: %s", who, i,
                           args[i].err[0] ? args[i].err : "its function returned this result without a message");
    zero__raw_free(NULL, args);
    zero__raw_free(NULL, th);
    return r;
}

static zero_result zero__run_local(int world_size, zero_rank_fn fn, void *user) {
    zero_group *g = NULL;
    zero_result r;
    if ((r = zero__group_create(&g, world_size)) != ZERO_OK) return r;
    r = zero__run_group(g, fn, user, "zero_run_local");
    zero__group_destroy(g);
    return r;
}

/* the bytes this endpoint (and its node and cross-node ones) sent within and across nodes */
/* zero_stats' host_syncs, device_allocs (added to the context's) and comm_headers: the
   endpoint's and its split's */
static void zero__comm_costs(const zero_comm *c, zero_stats *out) {
    const zero_comm *e[3];
    int i;
    e[0] = c; e[1] = c ? c->intra : NULL; e[2] = c ? c->inter : NULL;
    for (i = 0; i < 3; i++)
        if (e[i]) {
            out->comm_headers += __atomic_load_n(&e[i]->headers, __ATOMIC_RELAXED);
            out->host_syncs += __atomic_load_n(&e[i]->host_syncs, __ATOMIC_RELAXED);
            out->device_allocs += __atomic_load_n(&e[i]->device_allocs, __ATOMIC_RELAXED);
        }
}
static void zero__comm_bytes(const zero_comm *c, int64_t *within, int64_t *across) {
    int64_t w = 0, a = 0;
    const zero_comm *e[3];
    int i;
    e[0] = c; e[1] = c ? c->intra : NULL; e[2] = c ? c->inter : NULL;
    for (i = 0; i < 3; i++)
        if (e[i]) {
            w += __atomic_load_n(&e[i]->sent_within, __ATOMIC_RELAXED);
            a += __atomic_load_n(&e[i]->sent_across, __ATOMIC_RELAXED);
        }
    if (within) *within = w;
    if (across) *across = a;
}

/* >>io: the NVMe tier's files and its I/O engine ------------------------------------------
   Every file access goes through zero__fops, a table of function pointers that tests
   replace to provoke faults (ENOSPC, short reads). A block is queued as requests of at
   most one chunk, reads and writes in queues of their own; at most lim[0] reads and
   lim[1] writes are in flight (zero__io_limits; depth together), reads taken first, and a
   waiter wakes when its whole batch is done, not per request. Two engines serve the
   queues, both started at zero_build and stopped at zero_destroy:
     threads   queue_depth threads, each request one contiguous pread/pwrite;
     io_uring  (ZERO_IO_URING) one thread that owns a ring of queue_depth entries and
               keeps up to queue_depth requests in flight, resubmitting the rest of a
               short transfer; each completion's result passes through zero__fops.io_result
               when a test set it, so faults reach this path too.
   The engine is io_uring when built with it and the kernel allows it (a ring can be
   created and supports READ/WRITE), else threads with an INFO line; ZERO_IO=uring or
   ZERO_IO=threads in the environment at zero_build forces one. */
#define ZERO__IO_ALIGN 4096

typedef struct zero__fileops {      /* each returns >= 0 on success, -errno on failure */
    int (*open)(const char *path, int flags, int mode);
    int64_t (*pread)(int fd, void *buf, size_t n, int64_t off);
    int64_t (*pwrite)(int fd, const void *buf, size_t n, int64_t off);
    int (*allocate)(int fd, int64_t len);
    int (*close)(int fd);
    /* NULL, or (tests) the io_uring engine's completion result passed through it */
    int64_t (*io_result)(int fd, int write, int64_t off, int64_t res);
} zero__fileops;
static int zero__sys_open(const char *path, int flags, int mode) {
    int fd = open(path, flags, (mode_t)mode);
    return fd < 0 ? -errno : fd;
}
static int64_t zero__sys_pread(int fd, void *buf, size_t n, int64_t off) {
    ssize_t r = pread(fd, buf, n, (off_t)off);
    return r < 0 ? -(int64_t)errno : (int64_t)r;
}
static int64_t zero__sys_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    ssize_t r = pwrite(fd, buf, n, (off_t)off);
    return r < 0 ? -(int64_t)errno : (int64_t)r;
}
#if defined(ZERO_NO_LINUX)            /* (macOS has no posix_fallocate: the file's size, sparse) */
static int zero__sys_allocate(int fd, int64_t len) { return ftruncate(fd, (off_t)len) < 0 ? -errno : 0; }
#else
static int zero__sys_allocate(int fd, int64_t len) { return -posix_fallocate(fd, 0, (off_t)len); }
#endif
static int zero__sys_close(int fd) { return close(fd) < 0 ? -errno : 0; }
/* process-wide on purpose: a test hook, never changed by zero.h itself */
static zero__fileops zero__fops = { zero__sys_open, zero__sys_pread, zero__sys_pwrite, zero__sys_allocate,
                                    zero__sys_close, NULL };

typedef struct zero__iobatch {      /* the requests of one block; err: the first failure */
    int pending, err, fd;           /* err: an errno, or -1 for a short transfer */
    int64_t err_off;
    zero_ctx *trace_ctx;            /* tracing: the I/O thread that finishes the batch records it */
    double trace_t0;
    int write;
    int act;                        /* the activation stash's (>>stash): traced on its own track */
} zero__iobatch;

typedef struct zero__ioreq {
    int fd, write;
    char *buf;
    int64_t len, off;
    zero__iobatch *batch;
} zero__ioreq;

#define ZERO__IOQ_CAP 512
typedef struct zero__iopool {
    zero__mutex mu;
    zero__cond work, done, room;    /* done: a batch finished; room: a queue has room */
    zero__ioreq q[2][ZERO__IOQ_CAP];    /* queued reads [0] and writes [1], each in order */
    int qhead[2], qlen[2], stop, nthreads;
    int lim[2], fly[2];             /* reads / writes in flight: at most lim, and depth together */
    zero__thread *threads;
    int uring, depth;               /* uring: the io_uring engine serves the queue (one thread) */
    void *uslots;                   /* its depth requests in flight (zero__uslot) */
#ifdef ZERO_IO_URING
    struct io_uring ring;
#endif
} zero__iopool;

/* a request's outcome, folded into its batch (under io->mu) */
static void zero__io_finish(zero__iopool *io, zero__iobatch *b, int err, int fd, int64_t err_off) {
    if (err && !b->err) { b->err = err; b->err_off = err_off; b->fd = fd; }
    if (--b->pending > 0) return;
    if (b->trace_ctx)           /* from submit to the last byte */
        zero__trace_add(b->trace_ctx, b->act ? ZERO__TRACK_ACT : ZERO__TRACK_NVME,
                        b->act ? (b->write ? "act write" : "act read") : b->write ? "nvme write" : "nvme read", NULL, b->trace_t0);
    zero__cond_broadcast(&io->done);      /* only a whole batch wakes its waiters */
}

/* the next request the limits admit (reads first: a step waits on them), moved to *rq
   and counted in flight; 0 when none (under io->mu) */
static int zero__io_take(zero__iopool *io, zero__ioreq *rq) {
    int d;
    if (io->fly[0] + io->fly[1] >= io->depth) return 0;
    for (d = 0; d < 2; d++) {
        if (io->qlen[d] == 0 || io->fly[d] >= io->lim[d]) continue;
        *rq = io->q[d][io->qhead[d]];
        io->qhead[d] = (io->qhead[d] + 1) % ZERO__IOQ_CAP;
        if (io->qlen[d]-- == ZERO__IOQ_CAP) zero__cond_broadcast(&io->room);
        io->fly[d]++;
        return 1;
    }
    return 0;
}

static void zero__io_one(const zero__ioreq *rq) {
    int64_t done = 0, r = 0;
    int err = 0;
    while (done < rq->len) {
        r = rq->write ? zero__fops.pwrite(rq->fd, rq->buf + done, (size_t)(rq->len - done), rq->off + done)
                      : zero__fops.pread(rq->fd, rq->buf + done, (size_t)(rq->len - done), rq->off + done);
        if (r == -EINTR) continue;
        if (r < 0) { err = (int)-r; break; }
        if (r == 0) { err = -1; break; }
        done += r;
    }
    (void)r;
    if (err && !rq->batch->err) { rq->batch->err = err; rq->batch->err_off = rq->off + done; rq->batch->fd = rq->fd; }
}

static void *zero__io_main(void *arg) {
    zero__iopool *io = (zero__iopool *)arg;
    zero__mutex_lock(&io->mu);
    for (;;) {
        zero__ioreq rq;
        zero__iobatch tmp;
        int got;
        while (!(got = zero__io_take(io, &rq)) && !(io->stop && io->qlen[0] + io->qlen[1] == 0))
            zero__cond_wait(&io->work, &io->mu);
        if (!got) break;
        zero__mutex_unlock(&io->mu);
        memset(&tmp, 0, sizeof tmp);
        {   /* the transfer runs unlocked; its outcome is folded in under the lock */
            zero__iobatch *b = rq.batch;
            rq.batch = &tmp;
            zero__io_one(&rq);
            zero__mutex_lock(&io->mu);
            io->fly[rq.write]--;
            if (io->qlen[rq.write]) zero__cond_signal(&io->work);     /* a thread held back by the limit */
            zero__io_finish(io, b, tmp.err, tmp.fd, tmp.err_off);
        }
    }
    zero__mutex_unlock(&io->mu);
    return NULL;
}

#ifdef ZERO_IO_URING
/* The io_uring engine: one thread moves queued requests into the ring (at most depth in
   flight, lim of each direction) and reaps completions; a short transfer's rest is
   resubmitted from where it stopped. A ring that fails to submit (broken) fails the
   requests instead of hanging. */
typedef struct zero__uslot { zero__ioreq rq; int64_t done; } zero__uslot;

static int zero__ur_prep(zero__iopool *io, zero__uslot *s) {
    struct io_uring_sqe *e = io_uring_get_sqe(&io->ring);
    if (!e) return -1;
    if (s->rq.write)
        io_uring_prep_write(e, s->rq.fd, s->rq.buf + s->done, (unsigned)(s->rq.len - s->done), (uint64_t)(s->rq.off + s->done));
    else
        io_uring_prep_read(e, s->rq.fd, s->rq.buf + s->done, (unsigned)(s->rq.len - s->done), (uint64_t)(s->rq.off + s->done));
    io_uring_sqe_set_data(e, s);
    return 0;
}

/* submits what was prepared; 0, or the errno that broke the ring */
static int zero__ur_submit(zero__iopool *io) {
    int rc, tries = 0;
    while ((rc = io_uring_submit(&io->ring)) < 0 && (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) && ++tries < 1000) {}
    return rc < 0 ? -rc : 0;
}

static void *zero__io_uring_main(void *arg) {
    zero__iopool *io = (zero__iopool *)arg;
    zero__uslot *slots = (zero__uslot *)io->uslots;
    zero__uslot *fresh[256];
    int inflight = 0, broken = 0, i, nfree = io->depth, freel[256];
    for (i = 0; i < io->depth; i++) freel[i] = i;
    zero__mutex_lock(&io->mu);
    for (;;) {
        int n = 0, rc;
        struct io_uring_cqe *cqe;
        zero__ioreq rq;
        while (!io->stop && io->qlen[0] + io->qlen[1] == 0 && inflight == 0) zero__cond_wait(&io->work, &io->mu);
        if (io->qlen[0] + io->qlen[1] == 0 && inflight == 0) break;
        while (nfree > 0 && zero__io_take(io, &rq)) {
            zero__uslot *s = &slots[freel[--nfree]];
            s->rq = rq;
            s->done = 0;
            if (broken || zero__ur_prep(io, s) != 0) {     /* cannot happen with a sane ring: fail, never hang */
                io->fly[rq.write]--;
                zero__io_finish(io, s->rq.batch, broken ? broken : EIO, s->rq.fd, s->rq.off);
                freel[nfree++] = (int)(s - slots);
                continue;
            }
            fresh[n++] = s;
        }
        zero__mutex_unlock(&io->mu);
        if (n && (rc = zero__ur_submit(io)) != 0) {
            broken = rc;
            zero__mutex_lock(&io->mu);
            for (i = 0; i < n; i++) { io->fly[fresh[i]->rq.write]--;
                                      zero__io_finish(io, fresh[i]->rq.batch, rc, fresh[i]->rq.fd, fresh[i]->rq.off);
                                      freel[nfree++] = (int)(fresh[i] - slots); }
            continue;
        }
        inflight += n;
        if (inflight == 0) { zero__mutex_lock(&io->mu); continue; }
        rc = io_uring_wait_cqe(&io->ring, &cqe);
        zero__mutex_lock(&io->mu);
        while (rc == 0) {       /* every completion there is, under one hold of the lock */
            zero__uslot *s = (zero__uslot *)io_uring_cqe_get_data(cqe);
            int64_t res = cqe->res;
            int err = 0, again = 0;
            io_uring_cqe_seen(&io->ring, cqe);
            {   /* a test may set the hook while this thread runs (another rank's fault) */
                int64_t (*hook)(int, int, int64_t, int64_t) = __atomic_load_n(&zero__fops.io_result, __ATOMIC_RELAXED);
                if (hook) res = hook(s->rq.fd, s->rq.write, s->rq.off + s->done, res);
            }
            if (res == -EINTR || res == -EAGAIN) again = 1;
            else if (res < 0) err = (int)-res;
            else if (res == 0) err = -1;        /* end of file: a short transfer */
            else if ((s->done += res) < s->rq.len) again = 1;
            if (again && !broken) {             /* the rest of a short transfer */
                int e = zero__ur_prep(io, s) == 0 ? zero__ur_submit(io) : EIO;
                if (e == 0) { rc = io_uring_peek_cqe(&io->ring, &cqe); continue; }
                broken = e;                     /* a prepared entry may stay queued: submit nothing more */
            }
            if (again) err = broken ? broken : EIO;
            io->fly[s->rq.write]--;
            zero__io_finish(io, s->rq.batch, err, s->rq.fd, s->rq.off + s->done);
            freel[nfree++] = (int)(s - slots);
            inflight--;
            rc = io_uring_peek_cqe(&io->ring, &cqe);
        }
    }
    zero__mutex_unlock(&io->mu);
    return NULL;
}

/* 0 and a ring, or the errno why not (old kernel, seccomp, no READ/WRITE opcodes) */
static int zero__ur_init(zero__iopool *io) {
    struct io_uring_probe *p;
    int rc = io_uring_queue_init((unsigned)io->depth, &io->ring, 0), ok;
    if (rc < 0) return -rc;
    p = io_uring_get_probe_ring(&io->ring);
    ok = p && io_uring_opcode_supported(p, IORING_OP_READ) && io_uring_opcode_supported(p, IORING_OP_WRITE);
    if (p) io_uring_free_probe(p);
    if (!ok) { io_uring_queue_exit(&io->ring); return ENOSYS; }
    return 0;
}
#endif

static void zero__io_stop(zero__iopool *io, const zero_allocator *a) {
    int i;
    if (!io->threads) return;
    zero__mutex_lock(&io->mu);
    io->stop = 1;
    zero__cond_broadcast(&io->work);
    zero__mutex_unlock(&io->mu);
    for (i = 0; i < io->nthreads; i++) zero__thread_join(io->threads[i]);
    zero__raw_free(a, io->threads);
    io->threads = NULL;
#ifdef ZERO_IO_URING
    if (io->uring) io_uring_queue_exit(&io->ring);
#endif
    zero__raw_free(a, io->uslots);
    io->uslots = NULL;
    zero__mutex_destroy(&io->mu);
    zero__cond_destroy(&io->work);
    zero__cond_destroy(&io->done);
    zero__cond_destroy(&io->room);
}

/* engine: 1 io_uring (when built with it and the kernel allows), 0 threads. Returns 0, or
   -1 when out of memory or threads; *why: the errno that refused io_uring (0: none) */
static int zero__io_start(zero__iopool *io, int depth, int engine, const zero_allocator *a, int *why) {
    int i, threads = depth;
    memset(io, 0, sizeof *io);
    *why = 0;
    zero__mutex_init(&io->mu);
    zero__cond_init(&io->work);
    zero__cond_init(&io->done);
    zero__cond_init(&io->room);
    io->depth = io->lim[0] = io->lim[1] = depth;
#ifdef ZERO_IO_URING
    if (engine == 1 && (*why = zero__ur_init(io)) == 0) {
        io->uring = 1;
        threads = 1;
        if (!(io->uslots = zero__raw_alloc(a, sizeof(zero__uslot) * (size_t)depth))) {
            io_uring_queue_exit(&io->ring);
            io->uring = 0;
            threads = 0;
        }
    }
#else
    if (engine == 1) *why = ENOSYS;
#endif
    io->threads = threads ? (zero__thread *)zero__raw_alloc(a, sizeof(zero__thread) * (size_t)threads) : NULL;
    if (!io->threads) { zero__raw_free(a, io->uslots); io->uslots = NULL;
                        zero__mutex_destroy(&io->mu); zero__cond_destroy(&io->work); zero__cond_destroy(&io->done);
                        zero__cond_destroy(&io->room); return -1; }
    for (i = 0; i < threads; i++) {
#ifdef ZERO_IO_URING
        if (zero__thread_start(&io->threads[i], io->uring ? zero__io_uring_main : zero__io_main, io) != 0) break;
#else
        if (zero__thread_start(&io->threads[i], zero__io_main, io) != 0) break;
#endif
        io->nthreads = i + 1;
    }
    if (io->nthreads < threads) { zero__io_stop(io, a); return -1; }
    return 0;
}

/* An I/O buffer of n bytes, 4 KiB-aligned for O_DIRECT (*raw: what to free), its pages
   advised huge (2 MiB) before anything touches them. An O_DIRECT request is pinned and
   handed to the device page by page: in 4 KiB pages a 1 MiB request is 256 segments (a
   virtio disk takes 254 in one request, so it is split, and the host walks every one), in
   huge pages a few. On a virtio disk (bench_nvme) that is 1.2-1.5x the throughput of the
   same requests from 4 KiB pages. Advice only: with transparent huge pages off, or memory
   from an allocator hook that is not anonymous, the buffer stays as it was. No memory is
   added: the 2 MiB regions inside the buffer get huge pages, its two ends stay small. */
static char *zero__io_alloc(const zero_allocator *a, int64_t n, char **raw) {
    char *b;
    if (!(*raw = (char *)zero__raw_alloc(a, (size_t)(n + ZERO__IO_ALIGN)))) return NULL;
    b = (char *)(((uintptr_t)*raw + ZERO__IO_ALIGN - 1) & ~(uintptr_t)(ZERO__IO_ALIGN - 1));
#ifdef ZERO__MADV_HUGEPAGE
    (void)madvise(b, (size_t)n / ZERO__IO_ALIGN * ZERO__IO_ALIGN, ZERO__MADV_HUGEPAGE);
#endif
    return b;
}

/* queues [buf, buf+len) <-> fd at off in chunks; the batch counts them */
static void zero__io_submit(zero__iopool *io, zero__iobatch *b, int fd, int write, char *buf, int64_t len,
                            int64_t off, int64_t chunk) {
    int64_t o;
    write = write != 0;
    zero__mutex_lock(&io->mu);
    for (o = 0; o < len; o += chunk) {
        zero__ioreq *rq;
        while (io->qlen[write] == ZERO__IOQ_CAP) {
            zero__cond_broadcast(&io->work);
            zero__cond_wait(&io->room, &io->mu);
        }
        rq = &io->q[write][(io->qhead[write] + io->qlen[write]) % ZERO__IOQ_CAP];
        rq->fd = fd; rq->write = write; rq->buf = buf + o; rq->off = off + o;
        rq->len = len - o < chunk ? len - o : chunk;
        rq->batch = b;
        b->pending++;
        io->qlen[write]++;
    }
    zero__cond_broadcast(&io->work);
    zero__mutex_unlock(&io->mu);
}

/* at most rdepth reads and wdepth writes in flight (each 1..depth; zero__io_start: depth
   each); set before the first submit */
static void zero__io_limits(zero__iopool *io, int rdepth, int wdepth) {
    zero__mutex_lock(&io->mu);
    io->lim[0] = rdepth < 1 ? 1 : rdepth > io->depth ? io->depth : rdepth;
    io->lim[1] = wdepth < 1 ? 1 : wdepth > io->depth ? io->depth : wdepth;
    zero__mutex_unlock(&io->mu);
}

static void zero__io_wait(zero__iopool *io, zero__iobatch *b) {
    zero__mutex_lock(&io->mu);
    while (b->pending > 0) zero__cond_wait(&io->done, &io->mu);
    zero__mutex_unlock(&io->mu);
}

/* 4 lanes of 64-bit multiply-xor: any change of one word changes the sum */
static uint64_t zero__blk_sum(const char *p, int64_t n, uint64_t seed) {
    uint64_t h[4], w;
    int64_t i;
    int l;
    h[0] = seed ^ 0x243f6a8885a308d3ull; h[1] = seed ^ 0x13198a2e03707344ull;
    h[2] = seed ^ 0xa4093822299f31d0ull; h[3] = seed ^ 0x082efa98ec4e6c89ull;
    for (i = 0; i + 32 <= n; i += 32)
        for (l = 0; l < 4; l++) { memcpy(&w, p + i + 8 * l, 8); h[l] = (h[l] ^ w) * 0x100000001b3ull; }
    for (; i < n; i++) h[0] = (h[0] ^ (unsigned char)p[i]) * 0x100000001b3ull;
    w = h[0];
    for (l = 1; l < 4; l++) { w ^= h[l] + 0x9e3779b97f4a7c15ull + (w << 6) + (w >> 2); }
    return w ^ (w >> 29);
}

/* the NVMe tier's block sums (>>offload): 8 lanes of 64-bit multiply-xor, each step a
   bijection of the word, so any change of one word changes the sum; twice the speed of
   zero__blk_sum on data in cache (more multiplies in flight) */
static uint64_t zero__blk_sum8(const char *p, int64_t n, uint64_t seed) {
    uint64_t h[8], w[8], r;
    int64_t i;
    int l;
    for (l = 0; l < 8; l++) h[l] = seed ^ ((uint64_t)0x243f6a8885a308d3ull * (uint64_t)(2 * l + 1));
    for (i = 0; i + 64 <= n; i += 64) {
        memcpy(w, p + i, 64);
        h[0] = (h[0] ^ w[0]) * 0x100000001b3ull; h[1] = (h[1] ^ w[1]) * 0x100000001b3ull;
        h[2] = (h[2] ^ w[2]) * 0x100000001b3ull; h[3] = (h[3] ^ w[3]) * 0x100000001b3ull;
        h[4] = (h[4] ^ w[4]) * 0x100000001b3ull; h[5] = (h[5] ^ w[5]) * 0x100000001b3ull;
        h[6] = (h[6] ^ w[6]) * 0x100000001b3ull; h[7] = (h[7] ^ w[7]) * 0x100000001b3ull;
    }
    for (; i < n; i++) h[0] = (h[0] ^ (unsigned char)p[i]) * 0x100000001b3ull;
    r = seed ^ (uint64_t)n;
    for (l = 0; l < 8; l++) r = (r ^ h[l]) * 0x9e3779b97f4a7c15ull;
    return r ^ (r >> 29);
}

/* ---- the files and the engine choice, shared by every tier that writes files (the
   optimizer's NVMe tier, the activation stash) ---- */
/* Creates path for the I/O engine: O_DIRECT where its filesystem takes it (*buffered set
   where it refused, tmpfs and friends), preallocated to bytes. *fd is set once the file
   exists, so the caller closes and removes it on any failure. `what` names the file in
   the messages ("offload", "activation"). */
static zero_result zero__io_create(zero_ctx *ctx, const char *path, int64_t bytes, const char *what, int *fd,
                                   int *buffered) {
    int f = zero__fops.open(path, O_RDWR | O_CREAT | O_EXCL | ZERO__O_DIRECT, 0600), e;
    if (f == -EINVAL && ZERO__O_DIRECT != 0) {
        f = zero__fops.open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
        *buffered = 1;
    }
#if defined(F_NOCACHE)                  /* macOS: its O_DIRECT, set after the open */
    if (f >= 0 && fcntl(f, F_NOCACHE, 1) != 0) *buffered = 1;
#endif
    if (f < 0)
        return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO, "zero_build: cannot create the %s file %s: %s",
                          what, path, strerror(-f));
    *fd = f;
    if ((e = zero__fops.allocate(f, bytes)) != 0)
        return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                          "zero_build: cannot preallocate %lld bytes for the %s file %s: %s",
                          (long long)bytes, what, path, strerror(-e));
    return ZERO_OK;
}
/* the I/O engine to start: ZERO_IO=uring|threads forces one; by default io_uring where
   the build has it (zero__io_start falls back to threads where the kernel refuses) */
static zero_result zero__io_engine(zero_ctx *ctx, int *want_uring) {
    const char *e = getenv("ZERO_IO");
#ifdef ZERO_IO_URING
    *want_uring = 1;
#else
    *want_uring = 0;
#endif
    if (!e || !*e) return ZERO_OK;
    if (strcmp(e, "uring") == 0) *want_uring = 1;
    else if (strcmp(e, "threads") == 0) *want_uring = 0;
    else return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "zero_build: ZERO_IO=%s: want uring or threads", e);
    return ZERO_OK;
}
/* why io_uring is not the engine, for the INFO line (why: zero__io_start's errno) */
static const char *zero__io_no_uring(int why) {
#ifdef ZERO_IO_URING
    return strerror(why);
#else
    (void)why;
    return "built without ZERO_IO_URING";
#endif
}

/* >>zpp: ZeRO++ (ON ZERO++) in one place ---------------------------------------------------
   Its option checks, its buffers' plan, the context's nodes and partition order, the node
   and cross-node endpoints made at zero_build, and the comm stream's ZeRO++ collectives:
   qwz's quantized gathers, hpz's secondary partition, qgz's quantized reductions. It sits
   above >>plan because the planner, the build and the schedule call into it; its payload
   kernels are the device's ops (qp_encode, qp_sum).
   Every collective runs in two levels: on ctx->comm's node endpoint (zpp.intra, the ns
   ranks of this rank's node) and on its cross-node one (zpp.inter, the nn ranks at its
   place l in their nodes). Rank r (node n, place l) owns slice l * nn + n of each module
   (zero__part), so its cross-node peers' slices make one contiguous chunk of span / ns,
   [l * chunk, (l + 1) * chunk): a gather is a cross-node all-gather of the slices into
   the chunk, then a node all-gather of the chunks into the span; a reduce-scatter is a
   node reduce-scatter of the chunks, then a cross-node one of the slices. No copies.
   qwz sends int8 payloads (zero__qp_*) instead of the params, qgz payloads of the
   gradients by all-to-all, decoded and summed in fp32 in rank order at each level;
   hpz keeps each module's chunk (the secondary partition), refreshed by the first
   gather after the params change, and later gathers only run the node level. */
/* ns ranks per node: the comm's nodes, else desc.hpz, else one node of every rank */
static int zero__zpp_on(const zero_desc *d) { return d->qwz || d->qgz || d->hpz; }
static int zero__zpp_ns(const zero_desc *d, int world, const zero__sizes *z) {
    return z->node_size > 0 ? z->node_size : d->hpz > 0 ? d->hpz : world;
}
/* zero_desc's ZeRO++ options checked, and their defaults filled (zero__fill_desc) */
static zero_result zero__zpp_check_desc(zero_desc *d, const zero_logger *lg) {
    if (d->qwz < 0 || d->qwz > 1 || !(d->qgz == 0 || d->qgz == 1 || d->qgz == 4 || d->qgz == 8) || d->hpz < 0 ||
        d->hpz > ZERO__MAX_RANKS || d->quant_block < 0 || d->quant_block > (1 << 20))
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "a ZeRO++ option is out of range (qwz=%d qgz=%d hpz=%d quant_block=%d): qwz is 0 or 1, "
                             "qgz 0, 8 or 4 (bits), hpz 0 or the ranks per node, quant_block 0 (256) to 1048576",
                             d->qwz, d->qgz, d->hpz, d->quant_block);
    if ((d->qwz || d->hpz) && d->stage != 3)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_desc.%s is set at stage %d: qwz and hpz change stage 3's parameter gathers; "
                             "use stage 3 (qgz works at stages 1-3)", d->qwz ? "qwz" : "hpz", d->stage);
    if (d->qgz && d->stage == 0)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_desc.qgz is set at stage 0, which all-reduces; qgz quantizes the reduce-scatter of "
                             "stages 1-3");
    if (zero__zpp_on(d) && d->offload_params != ZERO_OFFLOAD_NONE)
        return zero__fail_lg(lg, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "ZeRO++ (qwz, qgz, hpz) with offload_params is not supported yet; offload the optimizer "
                             "instead, or turn ZeRO++ off");
    if (d->qgz == 1) d->qgz = 8;
    if (d->quant_block == 0) d->quant_block = 256;
    return ZERO_OK;
}
/* zero_create: the context's nodes and partition order, checked against its communicator
   and device; a failure is left in why for zero_create to report */
static zero_result zero__zpp_attach(zero_ctx *ctx, zero__why *why) {
    int cn = ctx->comm->node_size, hz = ctx->desc.hpz, ns = hz ? hz : cn ? cn : ctx->world;
    if (!zero__zpp_on(&ctx->desc)) return ZERO_OK;
    if (!cn && ctx->comm->node_why[0] && ctx->world > 1)
        return zero__why_set(why, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "zero_create: ZeRO++ needs the "
                             "nodes, and %s; set them with zero_comm_set_nodes", ctx->comm->node_why);
    if (hz && cn && hz != cn)
        return zero__why_set(why, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: zero_desc.hpz is %d but the communicator's nodes have %d ranks "
                             "(hpz is the ranks per node: 0 takes the communicator's)", hz, cn);
    if (ctx->world % ns)
        return zero__why_set(why, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: zero_desc.hpz is %d, which does not divide the world size %d", ns, ctx->world);
    if (!ctx->dev->qp_encode || !ctx->dev->qp_sum)
        return zero__why_set(why, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: ZeRO++ (qwz, qgz, hpz) has no kernels on the %s device (the CPU, EMU and "
                             "CUDA devices have them)", ctx->dev->name);
    if (!ctx->comm->vt->split || !ctx->comm->vt->all_to_all)
        return zero__why_set(why, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: ZeRO++ (qwz, qgz, hpz) needs a communicator that splits into nodes; "
                             "this one cannot (the local and MPI ones can, and NCCL's from version 2.18 on)");
    if (ctx->desc.qgz && ctx->dev->qp_max_inputs && ctx->world / ns > ctx->dev->qp_max_inputs)
        return zero__why_set(why, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: qgz on the CUDA device adds at most %d nodes' payloads; this run has %d "
                             "nodes", ctx->dev->qp_max_inputs, ctx->world / ns);
    ctx->zpp.on = 1;
    ctx->zpp.ns = ns;
    ctx->zpp.nn = ctx->world / ns;
    ctx->zpp.bits = ctx->desc.qgz;
    ctx->prank = zero__part(ctx, ctx->rank);
    return ZERO_OK;
}
/* Its buffers: the secondary partition (hpz: every module's span / ns, param dtype), and the
   payload scratch, sized for the largest module: a holds what this rank sends, b what
   arrives, f qgz's fp32 partial sum of a node (each a multiple of ZERO__ALIGN). */
static void zero__zpp_plan(const zero_desc *d, int world, const zero__sizes *z, int64_t *sec, int64_t *a, int64_t *b,
                           int64_t *f) {
    int ns = zero__zpp_ns(d, world, z), nn = world / ns, bits = d->qgz == 4 ? 4 : 8, blk = d->quant_block;
    /* every module's span (max_train_span leaves out the shared ones, reduced through their
       own staging slots, and ZeRO++ reduces those too) */
    int64_t per = z->max_span / world, tper = per, chunk = z->max_span / ns;
    *sec = *a = *b = *f = 0;
    if (!zero__zpp_on(d)) return;
    if (d->hpz) *sec = z->padded / ns * (int64_t)zero__dtype_size(d->param_dtype);
    if (d->qwz) {
        int64_t P = zero__qp_bytes(per, 8, blk);
        *a = (1 + nn) * P;
        *b = (int64_t)world * P;
    }
    if (d->qgz && z->trainable > 0 && nn > 1) {     /* one payload per node (qgz quantizes what crosses nodes) */
        int64_t p2 = nn * zero__qp_bytes(tper, bits, blk);
        if (p2 > *a) *a = p2;
        if (p2 > *b) *b = p2;
    }
    if (z->trainable > 0 && ns > 1 && nn > 1) *f = chunk * 4;     /* the node's sums, in fp32 */
    *a = zero__align_up(*a, ZERO__ALIGN);
    *b = zero__align_up(*b, ZERO__ALIGN);
    *f = zero__align_up(*f, ZERO__ALIGN);
}
/* ZeRO++: this rank's node and cross-node endpoints (>>schedule: ZeRO++), made once per
   endpoint and node size, on the comm stream (the thread that runs the endpoint's
   collectives: MPI's split is a collective of the endpoint) */
static zero_result zero__zpp_split(zero_ctx *ctx) {
    zero_comm *c = ctx->comm;
    zero_result r;
    if (!c->intra || c->split_ns != ctx->zpp.ns) {
        if ((r = zero__wait(ctx, zero__post_split(ctx, ctx->zpp.ns))) != ZERO_OK)
            return zero__fail(ctx, r, ZERO_LOGITEM_COMM_BROKEN,
                              "zero_build: splitting the communicator into nodes of %d ranks failed: %s", ctx->zpp.ns,
                              ctx->err);
    }
    ctx->zpp.intra = c->intra;
    ctx->zpp.inter = c->inter;
    c->intra->ctx = c->inter->ctx = ctx;        /* their copies run on this context's device */
    c->intra->tag = c->inter->tag = -1;
    return ZERO_OK;
}
/* a failed sub-collective: its message becomes the comm stream's (it reports comm->err),
   unless the device already wrote one there (a copy or sum that failed) */
static zero_result zero__zpp_err(zero_ctx *ctx, zero_comm *sub, zero_result r) {
    if (r != ZERO_OK && sub != ctx->comm && sub->err[0]) snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s", sub->err);
    sub->err[0] = '\0';
    return r;
}
/* an encoding that failed: the level's collective still runs (the peers wait for it; its
   payload is garbage, and every rank's step fails), then the device's error */
static zero_result zero__zpp_join(zero_ctx *ctx, zero_comm *c, int a2a, const void *send, void *recv, int64_t bytes,
                                  zero_result r) {
    char keep[ZERO__MSG];
    snprintf(keep, sizeof keep, "%s", ctx->comm->err);
    (void)(a2a ? zero__c_all_to_all(ctx, c, send, recv, bytes) : zero__c_all_gather(ctx, c, send, recv, bytes));
    snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s", keep);
    c->err[0] = '\0';
    return r;
}
/* the two-level all-gather of this rank's slice `mine` (per elements of dt; its place in
   full may be mine itself) into full, the span */
static zero_result zero__zpp_gather_exact(zero_ctx *ctx, const void *mine, void *full, int64_t per, int dt) {
    int64_t es = (int64_t)zero__esize(dt), chunk = per * ctx->zpp.nn;
    char *mc = (char *)full + (int64_t)(ctx->rank % ctx->zpp.ns) * chunk * es;
    zero_result r;
    ctx->zpp.inter->tag = ctx->zpp.intra->tag = ctx->comm->tag;
    if ((r = zero__c_all_gather(ctx, ctx->zpp.inter, mine, mc, per * es)) != ZERO_OK)
        return zero__zpp_err(ctx, ctx->zpp.inter, r);
    return zero__zpp_err(ctx, ctx->zpp.intra, zero__c_all_gather(ctx, ctx->zpp.intra, mc, full, chunk * es));
}
/* hpz: module mi's chunk of the secondary partition from the cross-node peers' shards
   (through int8 payloads with qwz) */
static zero_result zero__zpp_refresh(zero_ctx *ctx, int mi, const char *shard) {
    const zero__module_rec *m = &ctx->modules[mi];
    int pdt = (int)ctx->desc.param_dtype, blk = ctx->desc.quant_block, k;
    int64_t per = m->lay.span / ctx->world, es = (int64_t)zero__esize(pdt), P = zero__qp_bytes(per, 8, blk);
    char *sec = ctx->zpp.sec + m->zpp.sec_off, *a = ctx->zpp.buf, *b = a + ctx->zpp.a_bytes;
    zero_result r;
    if (!ctx->desc.qwz)
        return zero__zpp_err(ctx, ctx->zpp.inter, zero__c_all_gather(ctx, ctx->zpp.inter, shard, sec, per * es));
    if ((r = ctx->dev->qp_encode(ctx, ZERO__S_COMM, a, shard, pdt, per, 8, blk)) != ZERO_OK)
        return zero__zpp_join(ctx, ctx->zpp.inter, 0, a, b, P, r);
    if ((r = zero__c_all_gather(ctx, ctx->zpp.inter, a, b, P)) != ZERO_OK) return zero__zpp_err(ctx, ctx->zpp.inter, r);
    for (k = 0; k < ctx->zpp.nn && r == ZERO_OK; k++) {
        const void *pk = b + (int64_t)k * P;
        r = ctx->dev->qp_sum(ctx, ZERO__S_COMM, sec + (int64_t)k * per * es, pdt, &pk, 1, per, 8, blk, 0);
    }
    return r;
}
/* stage 3: module mi gathered into dst (its span) from this rank's shard of it; refresh:
   hpz's chunk is stale */
static zero_result zero__zpp_gather(zero_ctx *ctx, int mi, const char *shard, char *dst, int refresh) {
    const zero__module_rec *m = &ctx->modules[mi];
    int pdt = (int)ctx->desc.param_dtype, blk = ctx->desc.quant_block, N = ctx->world, k;
    int64_t per = m->lay.span / N, es = (int64_t)zero__esize(pdt), P = zero__qp_bytes(per, 8, blk);
    char *a = ctx->zpp.buf, *b = a + ctx->zpp.a_bytes;
    zero_result r;
    ctx->zpp.inter->tag = ctx->zpp.intra->tag = mi;
    if (ctx->desc.hpz) {
        const char *sec = ctx->zpp.sec + m->zpp.sec_off;
        if (refresh && (r = zero__zpp_refresh(ctx, mi, shard)) != ZERO_OK) return r;
        return zero__zpp_err(ctx, ctx->zpp.intra, zero__c_all_gather(ctx, ctx->zpp.intra, sec, dst,
                                                                      m->lay.span / ctx->zpp.ns * es));
    }
    if (!ctx->desc.qwz) return zero__zpp_gather_exact(ctx, shard, dst, per, pdt);
    /* qwz: this rank's payload, its cross-node peers' (after it in a), then every rank's in b,
       in node-major order: payload k is slice k */
    if ((r = ctx->dev->qp_encode(ctx, ZERO__S_COMM, a, shard, pdt, per, 8, blk)) != ZERO_OK) {
        zero__zpp_join(ctx, ctx->zpp.inter, 0, a, a + P, P, r);
        return zero__zpp_join(ctx, ctx->zpp.intra, 0, a + P, b, P * ctx->zpp.nn, r);
    }
    if ((r = zero__c_all_gather(ctx, ctx->zpp.inter, a, a + P, P)) != ZERO_OK) return zero__zpp_err(ctx, ctx->zpp.inter, r);
    if ((r = zero__c_all_gather(ctx, ctx->zpp.intra, a + P, b, P * ctx->zpp.nn)) != ZERO_OK)
        return zero__zpp_err(ctx, ctx->zpp.intra, r);
    for (k = 0; k < N && r == ZERO_OK; k++) {
        const void *pk = b + (int64_t)k * P;
        r = ctx->dev->qp_sum(ctx, ZERO__S_COMM, dst + (int64_t)k * per * es, pdt, &pk, 1, per, 8, blk, 0);
    }
    return r;
}
/* recv (rdt, per elements) = [recv +] the sum over every rank of its slice of send (sdt,
   the span). The node's level is exact: a reduce-scatter of the chunks, summed in fp32 into
   f (a node's link is fast; one quantization instead of two). The cross-node level is a
   reduce-scatter too, or with qgz an all-to-all of payloads (each peer's slice of the
   node's sums, quantized), decoded and summed in fp32 in node order. With qgz and bf16
   gradients the node's sums are kept in bf16 (half the bytes to write and encode; its
   rounding, 2^-9 of a value, is far below int8's, 1/254 of its block's largest). */
static zero_result zero__zpp_reduce(zero_ctx *ctx, int mi, const void *send, int sdt, void *recv, int rdt, int64_t per,
                                    int accumulate) {
    int ns = ctx->zpp.ns, nn = ctx->zpp.nn, bits = ctx->zpp.bits, blk = ctx->desc.quant_block, k;
    int64_t chunk = per * nn, P = zero__qp_bytes(per, bits ? bits : 8, blk), es;
    char *a = ctx->zpp.buf, *b = a + ctx->zpp.a_bytes;
    float *f = (float *)(b + ctx->zpp.b_bytes);
    const void *src = send, *ins[ZERO__MAX_RANKS];
    int srcdt = sdt;
    zero_result r;
    ctx->zpp.inter->tag = ctx->zpp.intra->tag = mi;
    if (nn == 1)        /* one node: its level alone */
        return zero__zpp_err(ctx, ctx->zpp.intra, zero__c_reduce_scatter(ctx, ctx->zpp.intra, send, sdt, recv, rdt, per,
                                                                         accumulate));
    if (ns > 1) {
        srcdt = bits && sdt == ZERO_BF16 ? ZERO_BF16 : ZERO_F32;
        if ((r = zero__c_reduce_scatter(ctx, ctx->zpp.intra, send, sdt, f, srcdt, chunk, 0)) != ZERO_OK)
            return zero__zpp_err(ctx, ctx->zpp.intra, r);
        src = f;
    }
    if (!bits)
        return zero__zpp_err(ctx, ctx->zpp.inter, zero__c_reduce_scatter(ctx, ctx->zpp.inter, src, srcdt, recv, rdt, per,
                                                                         accumulate));
    es = (int64_t)zero__esize(srcdt);
    for (k = 0; k < nn; k++)
        if ((r = ctx->dev->qp_encode(ctx, ZERO__S_COMM, a + k * P, (const char *)src + k * per * es, srcdt, per, bits,
                                     blk)) != ZERO_OK)
            return zero__zpp_join(ctx, ctx->zpp.inter, 1, a, b, P, r);
    if ((r = zero__c_all_to_all(ctx, ctx->zpp.inter, a, b, P)) != ZERO_OK) return zero__zpp_err(ctx, ctx->zpp.inter, r);
    for (k = 0; k < nn; k++) ins[k] = b + k * P;
    return ctx->dev->qp_sum(ctx, ZERO__S_COMM, recv, rdt, ins, nn, per, bits, blk, accumulate);
}
/* >>plan ----------------------------------------------------------------------------
   Every buffer zero_build allocates is computed here first, from sizes alone. */
static int zero__staging_mode(const zero_desc *d) {
    return d->stage >= 2 || d->grad_accum_dtype != d->grad_dtype;
}
/* desc.flat_layout's gradient view: where the user's gradients stay whole (stages 0-1, not
   through the staging area) */
static int zero__flat_grads(const zero_desc *d) { return d->flat_layout && !zero__staging_mode(d); }
/* bucket_bytes, or its default from the model (ON BUCKETS): an eighth of the trainable
   elements' gradient bytes, rounded down to ZERO__ALIGN, within [ZERO__ALIGN, 16 MiB].
   An eighth keeps the staging area (two buckets) within the gradient bytes stage 2
   shards away at any N >= 2, so a small model's ring stays small beside its states. */
static int64_t zero__bucket_bytes(const zero_desc *d, int64_t trainable) {
    int64_t b;
    if (d->bucket_bytes > 0) return d->bucket_bytes;
    b = trainable * (int64_t)zero__dtype_size(d->grad_dtype) / 8 / ZERO__ALIGN * ZERO__ALIGN;
    return b < ZERO__ALIGN ? ZERO__ALIGN : b > ((int64_t)16 << 20) ? (int64_t)16 << 20 : b;
}
static int64_t zero__staging_capacity(const zero_desc *d, const zero__sizes *z) {
    int64_t gsz = (int64_t)zero__dtype_size(d->grad_dtype);
    int64_t want = 2 * zero__bucket_bytes(d, z->trainable);
    int64_t all = z->trainable * gsz + (int64_t)z->num_trainable * ZERO__ALIGN;
    int64_t need = zero__align_up(z->max_train_span * gsz, ZERO__ALIGN);
    if (want > all) want = all;
    want = zero__align_up(want, ZERO__ALIGN);
    return want > need ? want : need;
}
static int64_t zero__gbytes(const zero_desc *d, int64_t span) {
    return zero__align_up(span * (int64_t)zero__dtype_size(d->param_dtype), ZERO__ALIGN);
}
/* The CUDA device's tables (zero__cuda_prepare): a chunk record per ZERO__KCHUNK elements
   of each param's part of this rank's optimizer region, and for every gradient-norm block
   a record and its double sum (stage 0: the blocks of every rank's slice). Needs the
   layout (spans); zero_estimate, which knows modules only, counts one param per module. */
#define ZERO__OFF_MAGIC 0x5a45524f4f464631ull   /* "ZEROOFF1" */
#define ZERO__OFF_TRAILER 64
/* how the state of Tstate elements is cut: K arrays per element, G elements per block */
static void zero__nvme_geom(const zero_desc *d, int64_t tstate, int *K, int64_t *G, int64_t *bb, int64_t *nblocks) {
    int64_t psz = (int64_t)zero__dtype_size(d->param_dtype), per, g, budget;
    int k = d->param_dtype == ZERO_F32 ? 0 : 1;
    k += d->optim.type == ZERO_OPTIM_SGD ? (d->optim.momentum != 0.0) : 2;
    *K = k;
    if ((k == 0 && d->offload_params != ZERO_OFFLOAD_NVME) || tstate == 0) { *G = *bb = *nblocks = 0; return; }
    per = k * 4 + psz;
    budget = d->offload.buffer_bytes ? d->offload.buffer_bytes : (int64_t)64 << 20;
    g = (budget / 3 - ZERO__IO_ALIGN) / per / 1024 * 1024;
    if (g < 1024) g = 1024;
    if (g > zero__align_up(tstate, 1024)) g = zero__align_up(tstate, 1024);
    *G = g;
    *bb = zero__align_up(g * per + ZERO__OFF_TRAILER, ZERO__IO_ALIGN);
    *nblocks = (tstate + g - 1) / g;
}
/* the optimizer states in host memory while the rest is on a device (ZeRO-Offload on a GPU) */
static int zero__dev_offload(const zero_desc *d) {
    return d->device != ZERO_DEVICE_CPU && d->offload_optimizer == ZERO_OFFLOAD_HOST;
}
static int zero__cat_tier(const zero_desc *d, int cat) {
    int opt = (int)d->offload_optimizer, par = (int)d->offload_params;
    if (cat == ZERO_CAT_PARAMS)
        return par == ZERO_OFFLOAD_NONE ? ZERO_TIER_DEVICE : par == ZERO_OFFLOAD_HOST ? ZERO_TIER_HOST : ZERO_TIER_NVME;
    if (cat == ZERO_CAT_GRADS)      /* a GPU reduces into device memory; the host gets a copy (ZERO_CAT_BUFFERS) */
        return opt == ZERO_OFFLOAD_NONE || zero__dev_offload(d) ? ZERO_TIER_DEVICE : ZERO_TIER_HOST;
    if (cat == ZERO_CAT_MASTER || cat == ZERO_CAT_OPTIM)
        return opt == ZERO_OFFLOAD_NONE ? ZERO_TIER_DEVICE : opt == ZERO_OFFLOAD_HOST ? ZERO_TIER_HOST : ZERO_TIER_NVME;
    return ZERO_TIER_DEVICE;
}
/* bytes of a category held in memory (device + host) */
static int64_t zero__pcat(int64_t (*b)[ZERO_CAT_NUM], int cat) {
    return b[ZERO_TIER_DEVICE][cat] + b[ZERO_TIER_HOST][cat];
}

/* moves the categories the plan computed on the device to their tiers, adds the I/O buffers */
static void zero__offload_plan(const zero_desc *d, int world, const zero__sizes *z, zero_plan *p) {
    int c, K;
    int64_t G, bb, nb, tstate = d->stage == 0 ? z->trainable : z->trainable / world;
    for (c = 0; c < ZERO_CAT_BUFFERS; c++) {
        int t = zero__cat_tier(d, c);
        if (t != ZERO_TIER_DEVICE) { p->bytes[t][c] += p->bytes[ZERO_TIER_DEVICE][c]; p->bytes[ZERO_TIER_DEVICE][c] = 0; }
    }
    if (d->offload_params == ZERO_OFFLOAD_NVME) {
        /* frozen modules have no optimizer state, so no block: their shards stay in memory */
        int64_t frozen = (z->padded - z->trainable) / world * (int64_t)zero__dtype_size(d->param_dtype);
        p->bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] -= frozen;
        p->bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] += frozen;
    }
    if (d->offload_optimizer == ZERO_OFFLOAD_NVME) {
        zero__nvme_geom(d, tstate, &K, &G, &bb, &nb);
        if (nb > 0) p->bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += 3 * bb;
        if (nb > 0 && d->offload_params == ZERO_OFFLOAD_NVME)     /* the gathers' param-area buffer */
            p->bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += bb - (int64_t)K * G * 4;
    }
}
/* The part [*s, *e) of param p (positions in its module's span) whose optimizer
   state this rank holds: all of it in stage 0, its slice of the span otherwise;
   *lo is where that region starts. Empty when *s >= *e. */
/* the region of slice q of p's module (stage 0: all of it) and the part [*s, *e) of p in it,
   in module positions; zero__param_region: this rank's slice */
static void zero__param_region_of(const zero_ctx *ctx, const zero__param_rec *p, int q, int64_t *lo, int64_t *s,
                                  int64_t *e) {
    const zero__module_rec *m = &ctx->modules[p->module];
    int64_t per = m->lay.span / ctx->world;
    int64_t l = ctx->desc.stage == 0 ? 0 : q * per, h = ctx->desc.stage == 0 ? m->lay.span : l + per;
    *lo = l;
    *s = p->offset > l ? p->offset : l;
    *e = p->offset + p->numel < h ? p->offset + p->numel : h;
}
static void zero__param_region(const zero_ctx *ctx, const zero__param_rec *p, int64_t *lo, int64_t *s, int64_t *e) {
    zero__param_region_of(ctx, p, ctx->prank, lo, s, e);
}
/* index of span position pos (inside this rank's region starting at lo) in the state arenas */
static int64_t zero__state_index(const zero_ctx *ctx, const zero__module_rec *m, int64_t pos, int64_t lo) {
    return ctx->desc.stage == 0 ? m->lay.train_off + pos : m->lay.train_off / ctx->world + (pos - lo);
}

static int64_t zero__dev_tables_for(const zero_desc *d, int64_t chunks, int64_t blocks) {
    const zero__dev_vt *v = zero__dev_pick(d->device);
    return v->table_bytes ? v->table_bytes(chunks, blocks) : 0;
}
static int64_t zero__dev_tables(const zero_ctx *ctx) {
    int64_t chunks = 0, blocks = 0;
    int i;
    if (!ctx->dev->table_bytes) return 0;
    for (i = 0; i < ctx->num_params; i++) {
        int64_t lo, s, e;
        zero__param_region(ctx, &ctx->params[i], &lo, &s, &e);
        if (!ctx->modules[ctx->params[i].module].frozen && s < e)
            chunks += (e - s + ctx->dev->table_chunk - 1) / ctx->dev->table_chunk;
    }
    for (i = 0; i < ctx->num_modules; i++)
        if (!ctx->modules[i].frozen)
            blocks += (ctx->modules[i].lay.span / ctx->world + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK;
    if (ctx->desc.stage == 0) blocks *= ctx->world;
    return ctx->dev->table_bytes(chunks, blocks);
}

static int64_t zero__max_live(const zero_desc *d, const zero__sizes *z) {
    return d->max_live_bytes ? zero__align_up(d->max_live_bytes, ZERO__ALIGN) : zero__gbytes(d, z->max_span);
}

static int64_t zero__gemm_workspace_bytes(const zero_desc *d) {
#ifdef ZERO_CBLAS
    (void)d;
    return 0;
#else
    return d->device == ZERO_DEVICE_CUDA ? 0 : (int64_t)(ZERO__MC * ZERO__KC + ZERO__KC * ZERO__NC) * 4;
#endif
}

/* The activation stash (>>stash): with offload_activations none or host every slot has its
   bytes in memory; with nvme each slot has a 4 KiB-aligned area in the files (its bytes and a
   64-byte trailer) and act_live_bytes of staging buffers, each the largest area, in host memory. */
#define ZERO__ACT_TRAILER 64
static int64_t zero__act_area(int64_t bytes) { return zero__align_up(bytes + ZERO__ACT_TRAILER, ZERO__IO_ALIGN); }
static int zero__act_nbuf(const zero_desc *d, const zero__sizes *z) {
    int64_t live = d->act_live_bytes ? d->act_live_bytes : 2 * z->act_max, n;
    if (z->num_acts == 0 || z->act_max == 0) return 0;
    n = live / z->act_max;
    if (n > z->num_acts) n = z->num_acts;
    return n < 1 ? 1 : (int)n;
}
static void zero__act_plan(const zero_desc *d, const zero__sizes *z, int64_t (*b)[ZERO_CAT_NUM]) {
    if (z->num_acts == 0) return;
    if (d->offload_activations == ZERO_OFFLOAD_NVME) {
        b[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS] += z->act_file;
        b[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS] += (int64_t)zero__act_nbuf(d, z) * z->act_max;
    } else {
        b[d->offload_activations == ZERO_OFFLOAD_HOST ? ZERO_TIER_HOST : ZERO_TIER_DEVICE][ZERO_CAT_ACTIVATIONS] += z->act_mem;
    }
}
/* a slot's sizes added to z */
static void zero__act_size(zero__sizes *z, int64_t bytes) {
    int64_t area = zero__act_area(bytes);
    z->num_acts++;
    z->act_mem += zero__align_up(bytes, ZERO__ALIGN);
    z->act_file += area;
    if (area > z->act_max) z->act_max = area;
}

/* one tier's bytes, all categories */
static int64_t zero__tier_total(const int64_t *cats) {
    int64_t t = 0;
    int c;
    for (c = 0; c < ZERO_CAT_NUM; c++) t += cats[c];
    return t;
}
static void zero__plan_compute(const zero_desc *d, int world, const zero__sizes *z, zero_plan *p) {
    int64_t psz = (int64_t)zero__dtype_size(d->param_dtype);
    int64_t asz = (int64_t)zero__dtype_size(d->grad_accum_dtype);
    int64_t P = z->padded, T = z->trainable, N = world;
    int64_t Tstate = d->stage == 0 ? T : T / N;       /* elements of optimizer state held here */
    int64_t (*b)[ZERO_CAT_NUM] = p->bytes;
    int t, c;
    memset(p, 0, sizeof *p);
    p->stage = d->stage;
    p->world_size = world;
    p->numel = z->numel;
    p->numel_padded = P;
    p->trainable_padded = T;
    b[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] = (d->stage < 3 ? P : P / N) * psz;
    b[ZERO_TIER_DEVICE][ZERO_CAT_GRADS] = (d->stage < 2 ? T : T / N) * asz;
    /* with f32 params the params are the master, except when the optimizer runs on the host
       while the params live on a device (zero__dev_offload) */
    b[ZERO_TIER_DEVICE][ZERO_CAT_MASTER] = d->param_dtype == ZERO_F32 && !zero__dev_offload(d) ? 0 : Tstate * 4;
    if (d->optim.type == ZERO_OPTIM_SGD)
        b[ZERO_TIER_DEVICE][ZERO_CAT_OPTIM] = d->optim.momentum != 0.0 ? Tstate * 4 : 0;
    else
        b[ZERO_TIER_DEVICE][ZERO_CAT_OPTIM] = 2 * Tstate * 4;
    if (zero__staging_mode(d) && T > 0) b[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += zero__staging_capacity(d, z) + z->shared_bytes;
    if (d->flat_layout) {   /* the flat views, after the arenas' own bytes (zero__build_arenas) */
        int64_t fp = z->numel * psz, fg = zero__flat_grads(d) ? z->numel * asz : 0;
        p->flat_bytes = fp + fg;
        b[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] += fp;
        b[ZERO_TIER_DEVICE][ZERO_CAT_GRADS] += fg;
    }
    if (z->tile_elems)      /* f32 copies of a tile and of its gradient, and the GEMM's packing buffers */
        b[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += 2 * z->tile_elems * 4 + zero__gemm_workspace_bytes(d);
    if (d->stage == 3)      /* the budget, room for the largest module in use, and persistent modules */
        b[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += zero__max_live(d, z) + zero__gbytes(d, z->max_span) + z->persist_bytes;
    b[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += z->dev_tables;
    zero__offload_plan(d, world, z, p);
    {
        int64_t sec, za, zb, zf;
        zero__zpp_plan(d, world, z, &sec, &za, &zb, &zf);
        b[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] += sec;
        b[ZERO_TIER_DEVICE][ZERO_CAT_BUFFERS] += za + zb + zf;
        p->hpz_bytes = sec;
        p->zpp_buffer_bytes = za + zb + zf;
    }
    if (zero__dev_offload(d))   /* pinned host copies of the gradient shard and of the new params */
        b[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += Tstate * (asz + (d->param_dtype == ZERO_F32 ? 0 : psz));
    if (d->device == ZERO_DEVICE_CUDA)     /* pinned staging of the host <-> device copies */
        b[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += 2 * (int64_t)ZERO_STAGING_BYTES;
    zero__act_plan(d, z, b);
    for (t = 0; t < ZERO_TIER_NUM; t++)
        for (c = 0; c < ZERO_CAT_NUM; c++) {
            p->total_bytes += b[t][c];
            if (c != ZERO_CAT_BUFFERS && c != ZERO_CAT_ACTIVATIONS) p->model_state_bytes += b[t][c];
        }
}

/* Validates a desc and fills its defaults, in one place. */
/* zero_desc's stage, dtypes and sizes */
static zero_result zero__check_desc_sizes(const zero_desc *d, const zero_logger *lg) {
    if (d->stage < 0 || d->stage > 3)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_STAGE, ZERO_LOGITEM_INVALID_STAGE,
                          "zero_desc.stage is %d; it must be 0, 1, 2 or 3", d->stage);
    if ((int)d->param_dtype < 0 || d->param_dtype >= ZERO_DTYPE_NUM ||
        (int)d->grad_dtype < 0 || d->grad_dtype >= ZERO_DTYPE_NUM ||
        (int)d->grad_accum_dtype < 0 || d->grad_accum_dtype >= ZERO_DTYPE_NUM)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE,
                          "unknown dtype (param_dtype=%d grad_dtype=%d grad_accum_dtype=%d); "
                          "use ZERO_F32, ZERO_BF16 or ZERO_F16",
                          (int)d->param_dtype, (int)d->grad_dtype, (int)d->grad_accum_dtype);
    if (d->accum_steps < 0 || d->bucket_bytes < 0 || d->align_elems < 0 || d->max_live_bytes < 0 ||
        d->persist_bytes < 0 || d->reuse_distance < 0 ||
        d->device_bytes_cap < 0 || d->host_bytes_cap < 0 || d->loss_scale_window < 0)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "negative size in zero_desc (accum_steps=%d bucket_bytes=%lld align_elems=%lld "
                          "max_live_bytes=%lld persist_bytes=%lld reuse_distance=%d caps=%lld/%lld "
                          "loss_scale_window=%d)",
                          d->accum_steps, (long long)d->bucket_bytes, (long long)d->align_elems,
                          (long long)d->max_live_bytes, (long long)d->persist_bytes, d->reuse_distance,
                          (long long)d->device_bytes_cap, (long long)d->host_bytes_cap, d->loss_scale_window);
    if (d->align_elems > (1 << 20))
        return zero__fail_lg(lg, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_desc.align_elems is %lld; at most 1048576", (long long)d->align_elems);
    if (d->flat_layout < 0 || d->flat_layout > 1)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_desc.flat_layout is %d; it is 0 or 1", d->flat_layout);
    if (d->flat_layout && d->stage == 3)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_desc.flat_layout is set at stage 3, which holds a module's params only between "
                          "zero_fetch and zero_release: there is no whole model to point into; use stages 0-2, "
                          "or zero_param_data per param (a stack's slice l is its handle l)");
    return ZERO_OK;
}
/* the optimizer's, the loss scale's and the threads' options */
static zero_result zero__check_desc_optim(const zero_desc *d, const zero_logger *lg) {
    const zero_optim_desc *o = &d->optim;
    if ((int)o->type < 0 || o->type >= ZERO_OPTIM_NUM || o->lr < 0 || o->beta1 < 0 || o->beta1 >= 1 ||
        o->beta2 < 0 || o->beta2 >= 1 || o->eps < 0 || o->weight_decay < 0 || o->momentum < 0 ||
        o->dampening < 0 || d->clip_norm < 0 || d->loss_scale < 0 || d->loss_scale_init < 0 ||
        d->loss_scale_min < 0 || d->timeout_ms < 0 || d->cpu_threads < 0 || d->cpu_threads > 4096 || !(o->lr == o->lr) || !(d->clip_norm == d->clip_norm))
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "an optimizer or loss-scale option is out of range (lr=%g beta1=%g beta2=%g eps=%g "
                          "weight_decay=%g momentum=%g clip_norm=%g loss_scale=%g timeout_ms=%d cpu_threads=%d)",
                          o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->momentum,
                          (double)d->clip_norm, (double)d->loss_scale, d->timeout_ms, d->cpu_threads);
    return ZERO_OK;
}
/* where things go: the offload tiers, the device, the activation stash */
static zero_result zero__check_desc_places(const zero_desc *d, const zero_logger *lg) {
    if ((int)d->offload_optimizer < 0 || d->offload_optimizer >= ZERO_OFFLOAD_NUM || (int)d->offload_params < 0 ||
        d->offload_params >= ZERO_OFFLOAD_NUM || d->offload.buffer_bytes < 0 || d->offload.queue_depth < 0 ||
        d->offload.queue_depth > 256)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "an offload option is out of range (offload_optimizer=%d offload_params=%d buffer_bytes=%lld "
                          "queue_depth=%d; queue_depth at most 256)", (int)d->offload_optimizer, (int)d->offload_params,
                          (long long)d->offload.buffer_bytes, d->offload.queue_depth);
    if ((int)d->device < 0 || d->device >= ZERO_DEVICE_NUM)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_desc.device is %d; use ZERO_DEVICE_CPU, ZERO_DEVICE_CUDA or ZERO_DEVICE_EMU", (int)d->device);
    if (zero__dev_missing(d->device))
        return zero__fail_lg(lg, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_NO_DEVICE, "%s", zero__dev_missing(d->device));
    if ((int)d->offload_activations < 0 || d->offload_activations >= ZERO_OFFLOAD_NUM || d->act_live_bytes < 0)
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "an activation option is out of range (offload_activations=%d act_live_bytes=%lld)",
                             (int)d->offload_activations, (long long)d->act_live_bytes);
    if (d->offload_activations == ZERO_OFFLOAD_NVME && !d->offload.nvme_dirs[0])
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "offload_activations is ZERO_OFFLOAD_NVME but offload.nvme_dirs[0] is NULL");
    return ZERO_OK;
}
/* the offload combinations this build runs */
static zero_result zero__check_desc_offload(const zero_desc *d, const zero_logger *lg) {
    if ((d->device == ZERO_DEVICE_CUDA || d->device == ZERO_DEVICE_EMU) &&
        (d->offload_optimizer == ZERO_OFFLOAD_NVME || d->offload_params != ZERO_OFFLOAD_NONE))
        return zero__fail_lg(lg, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                             "with device %s only offload_optimizer = ZERO_OFFLOAD_HOST is supported yet (NVMe and "
                             "offload_params run on the CPU device)",
                             d->device == ZERO_DEVICE_CUDA ? "ZERO_DEVICE_CUDA" : "ZERO_DEVICE_EMU");
    if (d->offload_optimizer == ZERO_OFFLOAD_NVME && !d->offload.nvme_dirs[0])
        return zero__fail_lg(lg, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "offload_optimizer is ZERO_OFFLOAD_NVME but offload.nvme_dirs[0] is NULL");
    if (d->offload_params == ZERO_OFFLOAD_NVME && (d->stage != 3 || d->offload_optimizer != ZERO_OFFLOAD_NVME))
        return zero__fail_lg(lg, ZERO_ERR_UNSUPPORTED, ZERO_LOGITEM_BAD_OPTION,
                          "offload_params = ZERO_OFFLOAD_NVME needs stage 3 and offload_optimizer = ZERO_OFFLOAD_NVME "
                          "(stage %d; other stages: use ZERO_OFFLOAD_HOST)", d->stage);
    return ZERO_OK;
}
/* every zero field of a checked desc given its default (zero_query_desc shows them) */
static void zero__desc_defaults(zero_desc *d) {
    zero_optim_desc *o = &d->optim;
    d->offload.buffer_bytes = ZERO__DEF(d->offload.buffer_bytes, (int64_t)64 << 20);
    d->offload.queue_depth = ZERO__DEF(d->offload.queue_depth, 16);
    d->param_dtype = ZERO__DEF(d->param_dtype, ZERO_BF16);
    d->grad_dtype = ZERO__DEF(d->grad_dtype, d->param_dtype);
    d->grad_accum_dtype = ZERO__DEF(d->grad_accum_dtype, d->grad_dtype);
    d->accum_steps = ZERO__DEF(d->accum_steps, 1);
    /* bucket_bytes 0 stays 0 until zero_build: its default depends on the model */
    d->align_elems = ZERO__DEF(d->align_elems, 16);
    o->type = ZERO__DEF(o->type, ZERO_OPTIM_ADAMW);
    o->lr = ZERO__DEF(o->lr, 1e-3);
    o->beta1 = ZERO__DEF(o->beta1, 0.9);
    o->beta2 = ZERO__DEF(o->beta2, 0.999);
    o->eps = ZERO__DEF(o->eps, 1e-8);
    d->loss_scale_init = ZERO__DEF(d->loss_scale_init, 65536.0f);
    d->loss_scale_window = ZERO__DEF(d->loss_scale_window, 1000);
    d->loss_scale_min = ZERO__DEF(d->loss_scale_min, 1.0f);
    d->timeout_ms = ZERO__DEF(d->timeout_ms, 120000);
    d->cpu_threads = ZERO__DEF(d->cpu_threads, 1);
    d->device = ZERO__DEF(d->device, ZERO_DEVICE_CPU);
    d->logger.level = ZERO__DEF(d->logger.level, ZERO_LOG_WARN);
}
/* a copy of the user's desc checked and completed: what zero_create and zero_estimate use */
static zero_result zero__fill_desc(zero_desc *d) {
    const zero_logger *lg = &d->logger;
    zero_result r;
    if ((r = zero__check_desc_sizes(d, lg)) != ZERO_OK || (r = zero__check_desc_optim(d, lg)) != ZERO_OK ||
        (r = zero__check_desc_places(d, lg)) != ZERO_OK || (r = zero__zpp_check_desc(d, lg)) != ZERO_OK ||
        (r = zero__check_desc_offload(d, lg)) != ZERO_OK)
        return r;
    zero__desc_defaults(d);
    return ZERO_OK;
}

/* Lays out the modules for a world of N: param offsets are set at registration;
   here spans are padded and arena offsets assigned. */
static zero_result zero__layout(zero_ctx *ctx, zero__sizes *z) {
    int64_t unit, poff = 0, toff = 0;
    int i;
    memset(z, 0, sizeof *z);
    z->node_size = ctx->zpp.ns;
    if (!zero__mul(ctx->desc.align_elems, ctx->world, &unit))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE, "align_elems * world overflows");
    /* tied params: the owner counts the trainable modules that use them (each once) */
    for (i = 0; i < ctx->num_modules; i++) ctx->modules[i].grad.tie_users = 0;
    for (i = 0; i < ctx->num_ties; i++) {
        int u = ctx->ties[i].module, o = ctx->params[ctx->ties[i].target].module, k, seen = 0;
        for (k = 0; k < i; k++)
            seen |= ctx->ties[k].module == u && ctx->params[ctx->ties[k].target].module == o;
        if (u != o && !seen) ctx->modules[o].grad.tie_users++;
        if (u != o) ctx->modules[o].grad.shared = 1;
    }
    for (i = 0; i < ctx->num_modules; i++) {
        zero__module_rec *m = &ctx->modules[i];
        if (m->lay.used == 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "module '%s' has no parameters%s", m->name,
                              ctx->num_ties ? " of its own (tied params do not count: put a tie in a module that "
                                              "has params, next to where it is used)" : "");
        if (m->lay.used > INT64_MAX / 4 - unit)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "module '%s' is too large", m->name);
        m->lay.span = zero__align_up(m->lay.used, unit);
        m->lay.param_off = poff;
        m->lay.train_off = m->frozen ? -1 : toff;
        if (poff > INT64_MAX / 16 - m->lay.span)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE, "the model is too large");
        poff += m->lay.span;
        if (!m->frozen) {
            toff += m->lay.span;
            z->num_trainable++;
            if (m->grad.shared && zero__staging_mode(&ctx->desc)) {     /* a slot of its own after the ring */
                m->grad.shared_off = z->shared_bytes;
                z->shared_bytes += zero__align_up(m->lay.span * (int64_t)zero__dtype_size(ctx->desc.grad_dtype), ZERO__ALIGN);
            } else if (m->lay.span > z->max_train_span) {
                z->max_train_span = m->lay.span;    /* the ring holds any other module's gradient whole */
            }
        }
        if (m->lay.span > z->max_span) z->max_span = m->lay.span;
        m->gat.persistent = ctx->desc.stage == 3 && zero__gbytes(&ctx->desc, m->lay.span) <= ctx->desc.persist_bytes;
        if (m->gat.persistent) z->persist_bytes += zero__gbytes(&ctx->desc, m->lay.span);
    }
    for (i = 0; i < ctx->num_params; i++) z->numel += ctx->params[i].numel;
    z->padded = poff;
    z->trainable = toff;
    z->dev_tables = zero__dev_tables(ctx);
    for (i = 0; i < ctx->act.num; i++) zero__act_size(z, ctx->act.recs[i].bytes);
    for (i = 0; i < ctx->num_tiled; i++) {
        const zero__tiled *t = &ctx->tiled[i];
        int64_t rows = (t->out + t->tiles - 1) / t->tiles;
        if (rows * t->in > z->tile_elems) z->tile_elems = rows * t->in;
    }
    return ZERO_OK;
}

/* handles: 11-bit context salt, 20-bit index + 1 */
static uint32_t zero__handle(const zero_ctx *ctx, int index) { return (ctx->salt << 20) | (uint32_t)(index + 1); }
/* the index a handle of this context names, or -1 (with the message) */
static int zero__handle_index(const zero_ctx *ctx, uint32_t id, int count, const char *kind, const char *fn) {
    int i = (int)(id & 0xfffffu) - 1;
    if (!ctx || (id >> 20) != ctx->salt || i < 0 || i >= count) {
        zero__fail(ZERO__UNCONST(zero_ctx *, ctx), ZERO_ERR_INVALID_HANDLE, ZERO_LOGITEM_INVALID_HANDLE,
                   "%s: handle 0x%08x is not a %s of this context%s", fn, (unsigned)id, kind,
                   id == 0 ? " (handle 0: never set, or left by a zero_add_* that failed)" : "");
        return -1;
    }
    return i;
}
static int zero__module_index(zero_ctx *ctx, zero_module m, const char *fn) {
    return zero__handle_index(ctx, m.id, ctx->num_modules, "module", fn);
}
/* a tied param's handle counts down from the top of the index space and names its target */
#define ZERO__TIE_INDEX(t) (0xffffe - (t))
static int zero__param_index(const zero_ctx *ctx, zero_param p, const char *fn) {
    int i = (int)(p.id & 0xfffffu) - 1, t = ZERO__TIE_INDEX(i);
    if (ctx && (p.id >> 20) == ctx->salt && i >= ctx->num_params && t >= 0 && t < ctx->num_ties)
        return ctx->ties[t].target;
    return zero__handle_index(ctx, p.id, ctx->num_params, "param", fn);
}

/* zero_estimate: the plan of a model of num_modules trainable modules, without a context */
static zero_result zero__estimate(const zero_desc *desc, int world_size, int num_modules,
                                  const int64_t *module_numels, zero_plan *out) {
    zero_desc d;
    zero__sizes z;
    zero_result r;
    int64_t unit, chunks = 0, blocks = 0, tc;
    int i;
    d = *desc;
    if ((r = zero__fill_desc(&d)) != ZERO_OK) return r;
    tc = zero__dev_pick(d.device)->table_chunk;
    if (d.hpz && world_size % d.hpz)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_estimate: desc.hpz is %d, which does not divide world_size %d", d.hpz, world_size);
    memset(&z, 0, sizeof z);
    unit = d.align_elems * world_size;
    for (i = 0; i < num_modules; i++) {
        int64_t span;
        if (module_numels[i] <= 0 || module_numels[i] > ((int64_t)1 << 52))
            return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "zero_estimate: module %d has %lld elements", i, (long long)module_numels[i]);
        span = zero__align_up(module_numels[i], unit);
        if (z.padded > INT64_MAX / 16 - span)
            return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE, "zero_estimate: the model is too large");
        z.numel += module_numels[i];
        z.padded += span;
        z.trainable += span;
        z.num_trainable++;
        if (span > z.max_span) z.max_span = z.max_train_span = span;
        if (tc) {
            int64_t per = span / world_size, mine = d.stage == 0 ? span : per;
            chunks += (mine + tc - 1) / tc;
            blocks += (per + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK * (d.stage == 0 ? world_size : 1);
        }
    }
    z.dev_tables = zero__dev_tables_for(&d, chunks, blocks);
    zero__plan_compute(&d, world_size, &z, out);
    return ZERO_OK;
}

/* A module or param name is a line of the checkpoint's manifest and part of a safetensors
   JSON key: not empty, at most 255 bytes, no control characters, quotes or backslashes */
static zero_result zero__name_check(zero_ctx *ctx, const char *fn, const char *kind, const char *name) {
    const unsigned char *c;
    size_t n = strlen(name);
    if (n == 0 || n > 255)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "%s: the %s name is %s; names are 1 to 255 bytes", fn, kind, n ? "longer than 255 bytes" : "empty");
    for (c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '"' || *c == '\\')
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "%s: the %s name '%.64s' has a %s at byte %d; names are written into checkpoint "
                              "manifests and safetensors keys, which take no control characters, quotes or backslashes",
                              fn, kind, name, *c == '"' ? "quote" : *c == '\\' ? "backslash" : "control character",
                              (int)((const char *)c - name));
    return ZERO_OK;
}
/* module mi's param `name` would be saved as the same "module.param" safetensors key as
   another param's (module "a.b" param "c" and module "a" param "b.c"): its index, or -1 */
static int zero__key_clash(const zero_ctx *ctx, int mi, const char *name) {
    const char *mn = ctx->modules[mi].name;
    size_t lm = strlen(mn), ln = strlen(name);
    int i;
    if (!strchr(mn, '.') && !strchr(name, '.')) return -1;     /* a clash needs a dot in both pairs */
    for (i = 0; i < ctx->num_params; i++) {
        const char *m2 = ctx->modules[ctx->params[i].module].name, *n2 = ctx->params[i].name;
        size_t l2 = strlen(m2);
        if (ctx->params[i].module == mi || l2 + 1 + strlen(n2) != lm + 1 + ln) continue;
        if (l2 < lm ? memcmp(m2, mn, l2) == 0 && mn[l2] == '.' && memcmp(mn + l2 + 1, n2, lm - l2 - 1) == 0 &&
                          n2[lm - l2 - 1] == '.' && strcmp(n2 + (lm - l2), name) == 0
                    : memcmp(mn, m2, lm) == 0 && m2[lm] == '.' && memcmp(m2 + lm + 1, name, l2 - lm - 1) == 0 &&
                          name[l2 - lm - 1] == '.' && strcmp(name + (l2 - lm), n2) == 0)
            return i;
    }
    return -1;
}
/* "ma.na" and "mb.nb" are the same key */
static int zero__same_key(const char *ma, const char *na, const char *mb, const char *nb) {
    size_t la = strlen(ma), lb = strlen(mb);
    if (la + strlen(na) != lb + strlen(nb)) return 0;
    if (la == lb) return strcmp(ma, mb) == 0 && strcmp(na, nb) == 0;
    if (la > lb) {                      /* the shorter module name first */
        const char *t = ma; size_t lt = la;
        ma = mb; mb = t; la = lb; lb = lt;
        t = na; na = nb; nb = t;
    }
    return memcmp(ma, mb, la) == 0 && mb[la] == '.' && memcmp(mb + la + 1, na, lb - la - 1) == 0 &&
           na[lb - la - 1] == '.' && strcmp(na + (lb - la), nb) == 0;
}
/* the tied param (index) whose safetensors key "module.name" is module mi's name, or -1 */
static int zero__tie_clash(const zero_ctx *ctx, int mi, const char *name) {
    int i;
    for (i = 0; i < ctx->num_ties; i++)
        if (zero__same_key(ctx->modules[ctx->ties[i].module].name, ctx->ties[i].name, ctx->modules[mi].name, name))
            return i;
    return -1;
}
/* module mi has a param or a tied param of that name */
static int zero__param_named(const zero_ctx *ctx, int mi, const char *name) {
    int i;
    for (i = 0; i < ctx->num_params; i++)
        if (ctx->params[i].module == mi && strcmp(ctx->params[i].name, name) == 0) return 1;
    for (i = 0; i < ctx->num_ties; i++)
        if (ctx->ties[i].module == mi && strcmp(ctx->ties[i].name, name) == 0) return 1;
    return 0;
}
static zero_result zero__add_param(zero_ctx *ctx, zero_module mod, const zero_param_desc *desc, zero_param *out) {
    zero__param_rec *p;
    zero__module_rec *m;
    zero_result r;
    int mi, i;
    int64_t numel = 1, off;
    if (!ctx || !desc || !out || !desc->name)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_add_param: ctx, desc, desc->name and out must not be NULL");
    out->id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_add_param('%s'): the model cannot change after zero_build", desc->name);
    if ((mi = zero__module_index(ctx, mod, "zero_add_param")) < 0) return ZERO_ERR_INVALID_HANDLE;
    m = &ctx->modules[mi];
    if (desc->ndim < 1 || desc->ndim > ZERO_MAX_DIMS)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_add_param('%s'): ndim is %d; it must be 1..%d", desc->name, desc->ndim, ZERO_MAX_DIMS);
    for (i = 0; i < desc->ndim; i++) {
        if (desc->shape[i] <= 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "zero_add_param('%s'): shape[%d] is %lld; sizes must be positive",
                              desc->name, i, (long long)desc->shape[i]);
        if (!zero__mul(numel, desc->shape[i], &numel) || numel > ((int64_t)1 << 48))
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "zero_add_param('%s'): the element count overflows", desc->name);
    }
    if ((r = zero__name_check(ctx, "zero_add_param", "param", desc->name)) != ZERO_OK) return r;
    if (zero__param_named(ctx, mi, desc->name))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_param: module '%s' already has a param named '%s'", m->name, desc->name);
    if ((i = zero__key_clash(ctx, mi, desc->name)) >= 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_param: '%s.%s' would be saved under the same safetensors key as '%s.%s'",
                          m->name, desc->name, ctx->modules[ctx->params[i].module].name, ctx->params[i].name);
    if ((i = zero__tie_clash(ctx, mi, desc->name)) >= 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_param: '%s.%s' would be saved under the same safetensors key as the tied param "
                          "'%s.%s'", m->name, desc->name, ctx->modules[ctx->ties[i].module].name, ctx->ties[i].name);
    off = zero__align_up(m->lay.used, ctx->desc.align_elems);
    if (off > ((int64_t)1 << 52) - numel)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_add_param('%s'): module '%s' is too large", desc->name, m->name);
    if (ctx->num_params + ctx->num_ties >= ZERO__TIE_INDEX(0))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_add_param('%s'): too many params (the limit is %d, tied ones included)",
                          desc->name, ZERO__TIE_INDEX(0));
    if (!zero__grow(ctx, (void **)&ctx->params, &ctx->cap_params, ctx->num_params, sizeof *p))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_param: out of memory");
    p = &ctx->params[ctx->num_params];
    memset(p, 0, sizeof *p);
    if (!(p->name = zero__strdup(&ctx->desc.allocator, desc->name)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_param: out of memory");
    p->module = mi;
    p->ndim = desc->ndim;
    memcpy(p->shape, desc->shape, sizeof p->shape);
    p->numel = numel;
    p->offset = off;
    p->out_offset = ctx->num_params ? ctx->params[ctx->num_params - 1].out_offset + ctx->params[ctx->num_params - 1].numel : 0;
    p->no_decay = desc->no_decay != 0;
    m->lay.used = off + numel;
    out->id = zero__handle(ctx, ctx->num_params++);
    return ZERO_OK;
}
static zero_result zero__add_tied_param(zero_ctx *ctx, zero_module mod, const char *name, zero_param target,
                                       zero_param *out) {
    zero__tie *t;
    zero_result r;
    int mi, ti, o, i;
    if (!ctx || !name || !out)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_add_tied_param: ctx, name and out must not be NULL");
    out->id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_add_tied_param('%s'): the model cannot change after zero_build", name);
    if ((mi = zero__module_index(ctx, mod, "zero_add_tied_param")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if ((ti = zero__param_index(ctx, target, "zero_add_tied_param")) < 0) return ZERO_ERR_INVALID_HANDLE;
    o = ctx->params[ti].module;
    if ((r = zero__name_check(ctx, "zero_add_tied_param", "param", name)) != ZERO_OK) return r;
    i = (int)(target.id & 0xfffffu) - 1;
    if (i >= ctx->num_params) {         /* a tied handle: no chains, tie to the owner's param */
        const zero__tie *tt = &ctx->ties[ZERO__TIE_INDEX(i)];
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_tied_param('%s.%s'): the target is the tied param '%s.%s' (no chains): tie to the "
                          "param it uses, '%s.%s', instead", ctx->modules[mi].name, name, ctx->modules[tt->module].name,
                          tt->name, ctx->modules[o].name, ctx->params[ti].name);
    }
    if (mi == o)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_tied_param('%s.%s'): the target '%s.%s' is in the same module: a tie joins two "
                          "modules (within one, use the param's own handle)", ctx->modules[mi].name, name,
                          ctx->modules[o].name, ctx->params[ti].name);
    if (zero__param_named(ctx, mi, name))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_tied_param: module '%s' already has a param named '%s'", ctx->modules[mi].name, name);
    /* its key and its owner's go into the safetensors metadata as "user=owner,...": unique, and
       without ',' or '=' */
    if ((i = zero__key_clash(ctx, mi, name)) >= 0 || zero__tie_clash(ctx, mi, name) >= 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_tied_param: '%s.%s' would be saved under the same safetensors key as another param",
                          ctx->modules[mi].name, name);
    if (strpbrk(name, ",=") || strpbrk(ctx->modules[mi].name, ",=") || strpbrk(ctx->modules[o].name, ",=") ||
        strpbrk(ctx->params[ti].name, ",="))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_add_tied_param('%s.%s'): a tie's names and its owner's are written into the safetensors "
                          "metadata as 'user=owner,...', so none of them may have a ',' or '='", ctx->modules[mi].name, name);
    /* one level only: an owner uses no ties, a user owns no tied-to params (no chains, no cycles) */
    for (i = 0; i < ctx->num_ties; i++) {
        int u = ctx->ties[i].module, uo = ctx->params[ctx->ties[i].target].module;
        if (u == o)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "zero_add_tied_param('%s.%s'): module '%s' uses tied params itself, so its params cannot "
                              "be tied to (tie every user to the param's own module instead)",
                              ctx->modules[mi].name, name, ctx->modules[o].name);
        if (uo == mi)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "zero_add_tied_param('%s.%s'): module '%s' owns params other modules are tied to, so it "
                              "cannot use tied params itself", ctx->modules[mi].name, name, ctx->modules[mi].name);
    }
    if (ctx->num_params + ctx->num_ties >= ZERO__TIE_INDEX(0))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_add_tied_param('%s'): too many params (the limit is %d, tied ones included)",
                          name, ZERO__TIE_INDEX(0));
    if (!zero__grow(ctx, (void **)&ctx->ties, &ctx->cap_ties, ctx->num_ties, sizeof *t))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_tied_param: out of memory");
    t = &ctx->ties[ctx->num_ties];
    if (!(t->name = zero__strdup(&ctx->desc.allocator, name)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_tied_param: out of memory");
    t->module = mi;
    t->target = ti;
    out->id = zero__handle(ctx, ZERO__TIE_INDEX(ctx->num_ties++));
    return ZERO_OK;
}
/* the params registered after the first `keep` taken back (zero_add_param_stack's undo):
   each was the last of its module, so the module ends where its param before it ends */
static void zero__params_truncate(zero_ctx *ctx, int keep) {
    while (ctx->num_params > keep) {
        const zero__param_rec *p = &ctx->params[--ctx->num_params];
        zero__module_rec *m = &ctx->modules[p->module];
        int j;
        m->lay.used = 0;
        for (j = ctx->num_params - 1; j >= 0; j--)
            if (ctx->params[j].module == p->module) { m->lay.used = ctx->params[j].offset + ctx->params[j].numel; break; }
        zero__raw_free(&ctx->desc.allocator, p->name);
    }
}
/* zero_add_param_stack: the slice each module gets (shape[1..], or [1] for a 1-D tensor),
   its element count checked */
static zero_result zero__stack_slice(zero_ctx *ctx, const char *fn, int n, const zero_param_desc *desc,
                                     zero_param_desc *out, int64_t *numel_out) {
    zero_param_desc slice;
    int64_t numel = 1, total;
    int i;
    memset(&slice, 0, sizeof slice);
    slice.name = desc->name;
    slice.no_decay = desc->no_decay;
    slice.ndim = desc->ndim > 1 ? desc->ndim - 1 : 1;
    slice.shape[0] = 1;
    for (i = 1; i < desc->ndim; i++) slice.shape[i - 1] = desc->shape[i];
    for (i = 0; i < slice.ndim; i++) {
        if (slice.shape[i] <= 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "%s('%s'): shape[%d] is %lld; sizes must be positive", fn, desc->name, i + 1,
                              (long long)slice.shape[i]);
        if (!zero__mul(numel, slice.shape[i], &numel) || numel > ((int64_t)1 << 48))
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "%s('%s'): a slice's element count overflows", fn, desc->name);
    }
    if (!zero__mul(numel, n, &total))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "%s('%s'): the element count overflows", fn, desc->name);
    *out = slice;
    *numel_out = numel;
    return ZERO_OK;
}
/* zero_add_param_stack: the n modules, each distinct, free of the name and with room */
static zero_result zero__stack_modules(zero_ctx *ctx, const char *fn, const zero_module *modules, int n, const char *name,
                                       int64_t numel) {
    int i, j, mi;
    for (i = 0; i < n; i++) {
        const zero__module_rec *m;
        if ((mi = zero__module_index(ctx, modules[i], fn)) < 0) return ZERO_ERR_INVALID_HANDLE;
        m = &ctx->modules[mi];
        for (j = 0; j < i; j++)
            if (modules[j].id == modules[i].id)
                return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                                  "%s('%s'): modules[%d] and modules[%d] are both module '%s'; each slice needs a "
                                  "module of its own", fn, name, j, i, m->name);
        if (zero__param_named(ctx, mi, name))
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "%s: module '%s' (modules[%d]) already has a param named '%s'", fn, m->name, i,
                              name);
        if ((j = zero__key_clash(ctx, mi, name)) >= 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "%s: '%s.%s' would be saved under the same safetensors key as '%s.%s'", fn, m->name,
                              name, ctx->modules[ctx->params[j].module].name, ctx->params[j].name);
        if ((j = zero__tie_clash(ctx, mi, name)) >= 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "%s: '%s.%s' would be saved under the same safetensors key as the tied param '%s.%s'", fn,
                              m->name, name, ctx->modules[ctx->ties[j].module].name, ctx->ties[j].name);
        if (zero__align_up(m->lay.used, ctx->desc.align_elems) > ((int64_t)1 << 52) - numel)
            return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "%s('%s'): module '%s' (modules[%d]) is too large", fn, name, m->name, i);
    }
    return ZERO_OK;
}
static zero_result zero__add_param_stack(zero_ctx *ctx, const zero_module *modules, int n,
                                         const zero_param_desc *desc, zero_param *out) {
    static const char *fn = "zero_add_param_stack";
    zero_param_desc slice;
    zero_result r;
    int i, j, keep;
    int64_t numel = 1;
    if ((r = zero__name_check(ctx, fn, "param", desc->name)) != ZERO_OK) return r;
    if (n < 1)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "%s('%s'): n is %d; a stack has at least one module", fn, desc->name, n);
    if (desc->ndim < 1 || desc->ndim > ZERO_MAX_DIMS)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "%s('%s'): ndim is %d; it must be 1..%d", fn, desc->name, desc->ndim, ZERO_MAX_DIMS);
    if (desc->shape[0] != n)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "%s('%s'): shape[0] is %lld but %d modules were given; the first axis is split one slice "
                          "per module", fn, desc->name, (long long)desc->shape[0], n);
    if ((r = zero__stack_slice(ctx, fn, n, desc, &slice, &numel)) != ZERO_OK ||
        (r = zero__stack_modules(ctx, fn, modules, n, desc->name, numel)) != ZERO_OK)
        return r;
    /* checked; only running out of memory can fail now, and that takes back the slices added */
    keep = ctx->num_params;
    for (i = 0; i < n; i++)
        if ((r = zero__add_param(ctx, modules[i], &slice, &out[i])) != ZERO_OK) {
            zero__params_truncate(ctx, keep);
            for (j = 0; j < n; j++) out[j].id = 0;
            return r;
        }
    return ZERO_OK;
}
static zero_result zero__add_module(zero_ctx *ctx, const zero_module_desc *desc, zero_module *out) {
    zero__module_rec *m;
    zero_result r;
    int i;
    if (!ctx || !desc || !out || !desc->name)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_add_module: ctx, desc, desc->name and out must not be NULL");
    out->id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_add_module('%s'): the model cannot change after zero_build", desc->name);
    if ((r = zero__name_check(ctx, "zero_add_module", "module", desc->name)) != ZERO_OK) return r;
    for (i = 0; i < ctx->num_modules; i++)
        if (strcmp(ctx->modules[i].name, desc->name) == 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "zero_add_module: a module named '%s' already exists", desc->name);
    if (!zero__grow(ctx, (void **)&ctx->modules, &ctx->cap_modules, ctx->num_modules, sizeof *m))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_module: out of memory");
    m = &ctx->modules[ctx->num_modules];
    memset(m, 0, sizeof *m);
    if (!(m->name = zero__strdup(&ctx->desc.allocator, desc->name)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_add_module: out of memory");
    m->frozen = desc->frozen != 0;
    m->grad.shared = desc->shared != 0;
    m->gat.goff = -1;
    m->grad.open_rec = -1;
    out->id = zero__handle(ctx, ctx->num_modules++);
    return ZERO_OK;
}
/* zero_estimate_activations: the stash's slots added to a plan */
static zero_result zero__estimate_activations(const zero_desc *desc, int num_acts, const int64_t *act_bytes,
                                              zero_plan *plan) {
    zero_desc d;
    zero__sizes z;
    zero_result r;
    int64_t add[ZERO_TIER_NUM][ZERO_CAT_NUM];
    int i, t, c;
    d = *desc;
    if ((r = zero__fill_desc(&d)) != ZERO_OK) return r;
    memset(&z, 0, sizeof z);
    for (i = 0; i < num_acts; i++) {
        if (act_bytes[i] <= 0 || act_bytes[i] > ((int64_t)1 << 48))
            return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                              "zero_estimate_activations: slot %d has %lld bytes", i, (long long)act_bytes[i]);
        zero__act_size(&z, act_bytes[i]);
    }
    if (d.offload_activations == ZERO_OFFLOAD_NVME && d.act_live_bytes && d.act_live_bytes < z.act_max)
        return zero__fail(NULL, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_OVER_CAP,
                          "zero_estimate_activations: act_live_bytes %lld is less than the largest slot's %lld bytes "
                          "(its bytes and trailer rounded up to 4 KiB)", (long long)d.act_live_bytes, (long long)z.act_max);
    memset(add, 0, sizeof add);
    zero__act_plan(&d, &z, add);
    for (t = 0; t < ZERO_TIER_NUM; t++)
        for (c = 0; c < ZERO_CAT_NUM; c++) { plan->bytes[t][c] += add[t][c]; plan->total_bytes += add[t][c]; }
    return ZERO_OK;
}

/* >>offload: the tiers behind zero__tier_vt (mem, host, nvme), and the NVMe tier's blocks -----
   The rank's optimizer state (fp32 master when params are not f32, then the moments) is
   cut into sub-groups of G elements of the state index space. Sub-group b is one block:
       [K arrays of G floats][G old params, param dtype][padding][64-byte trailer]
   (trailer: checksum, block index, slot, magic, and with the params on NVMe the param
   area's own checksum: there the area holds the current params), a multiple of 4 KiB, in file
   b % ndirs at offset (slot * blocks_per_file + b / ndirs) * block_bytes. Each block has two slots:
   a step reads the current slot and writes the other, and flips only when every rank's
   pass succeeded, so a failed step leaves the states as they were, and the old params
   saved in the written blocks put the params back. */

typedef struct zero__nvme_piece { int seg; int64_t a, b; } zero__nvme_piece;   /* a segment's [a, b) in a block */
#define ZERO__SUM_MAXP 1024                             /* checksum pieces per block at most */
#define ZERO__SUM_MAXS (ZERO__SUM_MAXP * 4 + 1)         /* their sums: K arrays and the params, + the padding */

typedef struct zero__nvme {
    int ndirs, K, has_master, psz, slot;
    int fd[ZERO_MAX_NVME_DIRS];
    char path[ZERO_MAX_NVME_DIRS][512];
    int64_t G, bb, nblocks, tstate, file_bytes;
    int depth, rdepth, wdepth;      /* the I/O engine's depth, reads and writes in flight at most (zero__nvme_tune) */
    int64_t rchunk, wchunk;         /* request sizes of reads and of writes */
    int64_t E;                      /* elements per checksum piece (zero__nvme_psums) */
    int np;                         /* pieces per block */
    uint64_t sv[ZERO__SUM_MAXS], ss[ZERO__SUM_MAXS];  /* piece sums: the block read, the block written */
    char *raw[3], *buf[3];
    zero__iobatch rb[3], wb[3];
    int64_t bufblk[3];              /* block computed in buf[x] and still there; -1: none */
    int64_t done;                   /* blocks computed in the step in progress */
    zero__iopool io;
    zero__nvme_piece *pieces;
    int npieces;
    int64_t bytes_read, bytes_written;
    int64_t cached;                 /* between steps: the block in buf[0] (current slot); -1: none */
    int dirty;                      /* buf[0] changed and not yet written */
    zero_ctx *ctx;                  /* for trace events of the I/O threads */
    /* offload_params = NVMe (stage 3): the block's param area holds the current params */
    int params;
    zero__mutex mu;             /* buf[0]'s cache and gbuf: the comm stream's gathers vs the caller */
    char *graw, *gbuf;              /* the param area and trailer of one block, read by gathers */
    int64_t gblk;                   /* the block (current slot) in gbuf; -1: none */
    zero__iobatch gb;
} zero__nvme;

/* the param area of a block starts here (the K float arrays are 4 KiB multiples) and
   runs to the block's end, trailer included */
static int64_t zero__nvme_parea(const zero__nvme *o) { return (int64_t)o->K * o->G * 4; }

static zero_result zero__nvme_fail_io(zero_ctx *ctx, zero__nvme *o, const zero__iobatch *b, int64_t blk, const char *what) {
    int i, f = 0;
    for (i = 0; i < o->ndirs; i++) if (o->fd[i] == b->fd) f = i;
    if (b->err == -1)
        return zero__fail(ctx, ZERO_ERR_CORRUPT, ZERO_LOGITEM_OFFLOAD_CORRUPT,
                          "%s: offload block %lld of %s is truncated (short %s at offset %lld)", what, (long long)blk,
                          o->path[f], "transfer", (long long)b->err_off);
    return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO, "%s: %s of offload block %lld in %s at offset %lld failed: %s",
                      what, b->write ? "write" : "read", (long long)blk,
                      o->path[f], (long long)b->err_off, strerror(b->err));
}

static int zero__nvme_fd(const zero__nvme *o, int64_t blk) { return o->fd[blk % o->ndirs]; }
/* slot s is the s-th half of every file, so a step reads one half and writes the other sequentially */
static int64_t zero__nvme_pos(const zero__nvme *o, int64_t blk, int slot) {
    return ((int64_t)slot * ((o->nblocks + o->ndirs - 1) / o->ndirs) + blk / o->ndirs) * o->bb;
}

/* The block checksum. A block's G elements are cut into np pieces of E elements; piece p
   has a sum (zero__blk_sum) for each of the K arrays and for the param area over its
   elements, then the padding after the param area has one: S, np * (K + 1) + 1 sums. The
   trailer holds the sum of S (t[0]) and, for the gathers that read the param area alone,
   the sum of the param and padding sums (t[4]). The pieces are independent and small
   enough to stay in cache, so zero_step sums each piece on the optimizer's threads just
   before and just after the pass over it (zero__nvme_part): the block is read from memory
   once, and the I/O thread never checksums. The sums are zero__blk_sum8's. */
static void zero__nvme_layout(zero__nvme *o) {
    int64_t e = (o->G + ZERO__SUM_MAXP - 1) / ZERO__SUM_MAXP;
    o->E = e < 16384 ? 16384 : zero__align_up(e, 1024);
    if (o->E > o->G) o->E = o->G;
    o->np = (int)((o->G + o->E - 1) / o->E);
}
static uint64_t zero__nvme_seed(uint64_t seed, int64_t i) { return seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull; }
/* piece p's sums into S: the K arrays' (a: 0..K-1), the params' (a = K); pbuf: the param area */
static void zero__nvme_psums(const zero__nvme *o, const char *buf, const char *pbuf, int p, uint64_t seed, uint64_t *S) {
    int64_t e0 = (int64_t)p * o->E, n = o->G - e0 < o->E ? o->G - e0 : o->E;
    int a;
    if (buf)
        for (a = 0; a < o->K; a++)
            S[(int64_t)p * (o->K + 1) + a] = zero__blk_sum8(buf + ((int64_t)a * o->G + e0) * 4, n * 4,
                                                           zero__nvme_seed(seed, (int64_t)p * (o->K + 1) + a));
    S[(int64_t)p * (o->K + 1) + o->K] = zero__blk_sum8(pbuf + e0 * o->psz, n * o->psz,
                                                      zero__nvme_seed(seed, (int64_t)p * (o->K + 1) + o->K));
}
/* the padding's sum (pbuf: the param area), then t[0] and t[4] from S */
static void zero__nvme_combine(const zero__nvme *o, const char *pbuf, uint64_t seed, uint64_t *S, uint64_t *t0, uint64_t *t4) {
    int64_t ns = (int64_t)o->np * (o->K + 1), g = o->G * o->psz, i;
    uint64_t h = zero__nvme_seed(seed, -1);
    S[ns] = zero__blk_sum8(pbuf + g, o->bb - ZERO__OFF_TRAILER - zero__nvme_parea(o) - g, zero__nvme_seed(seed, ns));
    if (t0) *t0 = zero__blk_sum8((const char *)S, (ns + 1) * 8, seed);
    for (i = 0; i < o->np; i++) h = (h ^ S[i * (o->K + 1) + o->K]) * 0x100000001b3ull;
    *t4 = zero__blk_sum8((const char *)&h, 8, seed ^ S[ns]);
}
typedef struct zero__nvme_sumjob { const zero__nvme *o; const char *buf; uint64_t seed, *S; } zero__nvme_sumjob;
static void zero__nvme_sum_part(void *arg, int part, int nparts) {
    const zero__nvme_sumjob *j = (const zero__nvme_sumjob *)arg;
    int p, p1 = (int)((int64_t)j->o->np * (part + 1) / nparts);
    for (p = (int)((int64_t)j->o->np * part / nparts); p < p1; p++)
        zero__nvme_psums(j->o, j->buf, j->buf + zero__nvme_parea(j->o), p, j->seed, j->S);
}
/* a whole block's t[0] and t[4], the pieces on pl (NULL: the calling thread) */
static void zero__nvme_bsum(const zero__nvme *o, zero__pool *pl, const char *buf, uint64_t seed, uint64_t *S, uint64_t *t0,
                           uint64_t *t4) {
    zero__nvme_sumjob j;
    j.o = o; j.buf = buf; j.seed = seed; j.S = S;
    zero__pool_run(pl, zero__nvme_sum_part, &j, o->np < 2);
    zero__nvme_combine(o, buf + zero__nvme_parea(o), seed, S, t0, t4);
}
static uint64_t zero__nvme_sseed(int64_t blk, int slot) { return (uint64_t)blk * 2 + (uint64_t)slot; }

/* the trailer from t0, t4 (t4 kept only with the params on NVMe) */
static void zero__nvme_trailer(zero__nvme *o, char *buf, int64_t blk, int slot, uint64_t t0, uint64_t t4) {
    uint64_t t[5];
    t[0] = t0; t[1] = (uint64_t)blk; t[2] = (uint64_t)slot; t[3] = ZERO__OFF_MAGIC;
    t[4] = o->params ? t4 : 0;
    memcpy(buf + o->bb - ZERO__OFF_TRAILER, t, sizeof t);
}
/* the checksums run on pl, the optimizer's thread pool (NULL: the calling thread) */
static void zero__nvme_seal(zero__nvme *o, zero__pool *pl, char *buf, int64_t blk, int slot) {
    uint64_t t0, t4;
    zero__nvme_bsum(o, pl, buf, zero__nvme_sseed(blk, slot), o->ss, &t0, &t4);
    zero__nvme_trailer(o, buf, blk, slot, t0, t4);
}
/* the trailer names block blk of the slot and, when sum is not NULL, holds *sum */
static zero_result zero__nvme_check(zero_ctx *ctx, zero__nvme *o, const char *buf, int64_t blk, int slot, const uint64_t *sum,
                                   const char *what) {
    uint64_t t[4];
    memcpy(t, buf + o->bb - ZERO__OFF_TRAILER, sizeof t);
    if (t[3] != ZERO__OFF_MAGIC || t[1] != (uint64_t)blk || t[2] != (uint64_t)slot || (sum && t[0] != *sum))
        return zero__fail(ctx, ZERO_ERR_CORRUPT, ZERO_LOGITEM_OFFLOAD_CORRUPT,
                          "%s: offload block %lld (slot %d) of %s at offset %lld fails its checksum", what,
                          (long long)blk, slot, o->path[blk % o->ndirs], (long long)zero__nvme_pos(o, blk, slot));
    return ZERO_OK;
}
static zero_result zero__nvme_verify(zero_ctx *ctx, zero__nvme *o, zero__pool *pl, const char *buf, int64_t blk, int slot,
                                    const char *what) {
    uint64_t t0, t4;
    zero_result r = zero__nvme_check(ctx, o, buf, blk, slot, NULL, what);
    if (r != ZERO_OK) return r;
    zero__nvme_bsum(o, pl, buf, zero__nvme_sseed(blk, slot), o->sv, &t0, &t4);
    return zero__nvme_check(ctx, o, buf, blk, slot, &t0, what);
}

static void zero__nvme_issue(zero__nvme *o, zero__iobatch *b, int64_t blk, int slot, char *buf, int write) {
    memset(b, 0, sizeof *b);
    b->write = write;
    if ((b->trace_t0 = zero__trace_t0(o->ctx)) > 0) b->trace_ctx = o->ctx;
    zero__io_submit(&o->io, b, zero__nvme_fd(o, blk), write, buf, o->bb, zero__nvme_pos(o, blk, slot), write ? o->wchunk : o->rchunk);
    if (write) o->bytes_written += o->bb; else o->bytes_read += o->bb;
}

/* one block, synchronously (between steps: buf[0] is free) */
static zero_result zero__nvme_sync(zero_ctx *ctx, int64_t blk, int write, const char *what) {
    zero__nvme *o = ctx->tier.nvme;
    o->cached = -1;
    if (write && blk == o->gblk) o->gblk = -1;
    zero__nvme_issue(o, &o->rb[0], blk, o->slot, o->buf[0], write);
    zero__io_wait(&o->io, &o->rb[0]);
    if (o->rb[0].err) return zero__nvme_fail_io(ctx, o, &o->rb[0], blk, what);
    return write ? ZERO_OK : zero__nvme_verify(ctx, o, NULL, o->buf[0], blk, o->slot, what);
}

/* writes back the block cached in buf[0] if it changed, and forgets it */
static zero_result zero__nvme_flush(zero_ctx *ctx, const char *what) {
    zero__nvme *o = ctx->tier.nvme;
    int64_t blk = o->cached;
    if (blk < 0 || !o->dirty) { o->cached = -1; return ZERO_OK; }
    o->dirty = 0;
    zero__nvme_seal(o, NULL, o->buf[0], blk, o->slot);
    return zero__nvme_sync(ctx, blk, 1, what);
}

/* reads (out) or writes (in) elements [idx, idx+n) of state array `which` (0: master,
   1: first moment / momentum, 2: second moment), block by block. The last block stays
   in buf[0] (written back when another block is needed, at zero_step and after
   zero_load), so setting params one by one reads and writes each block about once. */
static zero_result zero__nvme_rw_locked(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *out, const float *in,
                                       const char *what) {
    zero__nvme *o = ctx->tier.nvme;
    int a = which == 0 ? 0 : o->has_master + which - 1, pdt = (int)ctx->desc.param_dtype;
    zero_result r;
    while (n > 0) {
        int64_t blk = idx / o->G, at = idx - blk * o->G, c = o->G - at < n ? o->G - at : n;
        float *arr;
        if (o->cached != blk) {
            if ((r = zero__nvme_flush(ctx, what)) != ZERO_OK) return r;
            if ((r = zero__nvme_sync(ctx, blk, 0, what)) != ZERO_OK) return r;
            o->cached = blk;
        }
        if (which == ZERO__TIER_PARAMS) {    /* the param area, in the param dtype */
            char *p = o->buf[0] + zero__nvme_parea(o) + at * o->psz;
            if (out) { zero__to_f32(out, p, (zero_dtype)pdt, c); out += c; }
            else { zero__from_f32(p, (zero_dtype)pdt, in, c); in += c; o->dirty = 1; }
        } else {
            arr = (float *)(o->buf[0] + (int64_t)a * o->G * 4) + at;
            if (out) { memcpy(out, arr, (size_t)c * 4); out += c; }
            else { memcpy(arr, in, (size_t)c * 4); in += c; o->dirty = 1; }
        }
        idx += c; n -= c;
    }
    return ZERO_OK;
}
static zero_result zero__nvme_rw(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *out, const float *in,
                                const char *what) {
    zero_result r;
    zero__mutex_lock(&ctx->tier.nvme->mu);
    r = zero__nvme_rw_locked(ctx, which, idx, n, out, in, what);
    zero__mutex_unlock(&ctx->tier.nvme->mu);
    return r;
}

/* The stage-3 gather's read (the comm stream, ahead of the fetch when prefetched): state
   elements [idx, idx+n) of the params, in the param dtype, into dst. Per block only the
   param area and trailer are read (into gbuf, kept for the next module in the block) and
   checked against the area's own sum; a block changed by zero_param_set_f32 and not yet
   written back is taken from buf[0]. */
/* t[4] of a param area alone (the gathers' read, on the comm stream: no pool) */
static uint64_t zero__nvme_gsum(const zero__nvme *o, const char *pbuf, uint64_t seed) {
    uint64_t S[ZERO__SUM_MAXS], t4;
    int p;
    for (p = 0; p < o->np; p++) zero__nvme_psums(o, NULL, pbuf, p, seed, S);
    zero__nvme_combine(o, pbuf, seed, S, NULL, &t4);
    return t4;
}
static zero_result zero__nvme_gather(zero_ctx *ctx, int64_t idx, int64_t n, char *dst) {
    zero__nvme *o = ctx->tier.nvme;
    int64_t pa = zero__nvme_parea(o), len = o->bb - pa;
    zero_result r = ZERO_OK;
    zero__mutex_lock(&o->mu);
    while (n > 0 && r == ZERO_OK) {
        int64_t blk = idx / o->G, at = idx - blk * o->G, c = o->G - at < n ? o->G - at : n;
        const char *src;
        if (o->cached == blk) src = o->buf[0] + pa;
        else {
            if (o->gblk != blk) {
                uint64_t t[5];
                o->gblk = -1;
                memset(&o->gb, 0, sizeof o->gb);
                if ((o->gb.trace_t0 = zero__trace_t0(ctx)) > 0) o->gb.trace_ctx = ctx;    /* on the nvme track */
                zero__io_submit(&o->io, &o->gb, zero__nvme_fd(o, blk), 0, o->gbuf, len, zero__nvme_pos(o, blk, o->slot) + pa,
                                o->rchunk);
                o->bytes_read += len;
                zero__io_wait(&o->io, &o->gb);
                if (o->gb.err) { r = zero__nvme_fail_io(ctx, o, &o->gb, blk, "zero_fetch (stage-3 gather)"); break; }
                memcpy(t, o->gbuf + len - ZERO__OFF_TRAILER, sizeof t);
                if (t[3] != ZERO__OFF_MAGIC || t[1] != (uint64_t)blk || t[2] != (uint64_t)o->slot ||
                    t[4] != zero__nvme_gsum(o, o->gbuf, zero__nvme_sseed(blk, o->slot))) {
                    r = zero__fail(ctx, ZERO_ERR_CORRUPT, ZERO_LOGITEM_OFFLOAD_CORRUPT,
                                   "zero_fetch (stage-3 gather): the params of offload block %lld (slot %d) of %s at "
                                   "offset %lld fail their checksum", (long long)blk, o->slot, o->path[blk % o->ndirs],
                                   (long long)(zero__nvme_pos(o, blk, o->slot) + pa));
                    break;
                }
                o->gblk = blk;
            }
            src = o->gbuf;
        }
        memcpy(dst, src + at * o->psz, (size_t)(c * o->psz));
        dst += c * o->psz; idx += c; n -= c;
    }
    zero__mutex_unlock(&o->mu);
    return r;
}

/* Stage 3: where module mi's shard starts in the param arena (elements). With the params
   on NVMe the arena holds the frozen modules' shards alone (they have no block in the
   tier), packed in module order; a trainable module's shard is in the tier's blocks. */
static int64_t zero__pshard(const zero_ctx *ctx, int mi) {
    int64_t off = 0;
    int i;
    if (ctx->desc.offload_params != ZERO_OFFLOAD_NVME) return ctx->modules[mi].lay.param_off / ctx->world;
    for (i = 0; i < mi; i++)
        if (ctx->modules[i].frozen) off += ctx->modules[i].lay.span;
    return off / ctx->world;
}

static void zero__nvme_free(zero_ctx *ctx) {
    zero__nvme *o = ctx->tier.nvme;
    const zero_allocator *a = &ctx->desc.allocator;
    int i;
    if (!o) return;
    zero__io_stop(&o->io, a);
    for (i = 0; i < 3; i++) zero__raw_free(a, o->raw[i]);
    zero__raw_free(a, o->graw);
    zero__mutex_destroy(&o->mu);
    for (i = 0; i < o->ndirs; i++)
        if (o->fd[i] >= 0) { zero__fops.close(o->fd[i]); unlink(o->path[i]); }
    zero__raw_free(a, o->pieces);
    zero__raw_free(a, o);
    ctx->tier.nvme = NULL;
}

/* the I/O engine's shape for o->bb: queue_depth (0: the default, 16) requests in flight,
   half of them reads and half writes at most, each request 1 MiB */
static void zero__nvme_tune(zero__nvme *o, int queue_depth) {
    o->depth = queue_depth ? queue_depth : 16;
    o->rdepth = o->wdepth = o->depth / 2 > 1 ? o->depth / 2 : 1;
    o->rchunk = o->wchunk = (int64_t)1 << 20;
}

/* the NVMe tier's I/O engine (zero__io_engine picks it) */
static zero_result zero__nvme_io_start(zero_ctx *ctx, zero__nvme *o) {
    int depth, why = 0, want;
    zero_result r;
    zero__nvme_tune(o, ctx->desc.offload.queue_depth);
    depth = o->depth;
    if ((r = zero__io_engine(ctx, &want)) != ZERO_OK) return r;
    if (zero__io_start(&o->io, depth, want, &ctx->desc.allocator, &why) != 0)
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: could not start the I/O threads");
    zero__io_limits(&o->io, o->rdepth, o->wdepth);
    if (want && !o->io.uring)
        zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_OFFLOAD_ENGINE, "io_uring is not available (%s): the NVMe tier uses %d I/O threads",
                  zero__io_no_uring(why), depth);
    return ZERO_OK;
}

/* ---- the tiers behind zero__tier_vt (declared in >>structs) ------------------------------ */
static float *zero__mem_state(zero_ctx *ctx, int which) {
    return which == 0 ? ctx->arena.master : which == 1 ? ctx->arena.m : ctx->arena.v;
}
static zero_result zero__mem_build(zero_ctx *ctx) { (void)ctx; return ZERO_OK; }
static void zero__mem_free(zero_ctx *ctx) { (void)ctx; }
static int zero__mem_has_master(const zero_ctx *ctx) { return ctx->arena.master != NULL; }
static int zero__mem_holds_params(const zero_ctx *ctx) { (void)ctx; return 0; }
static zero_result zero__mem_step(zero_ctx *ctx, float gscale) { return ctx->dev->optimizer(ctx, gscale); }
static zero_result zero__mem_read(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *out, const char *fn) {
    (void)fn;
    return zero__dev_get_f32(ctx, out, zero__mem_state(ctx, which) + idx, ZERO_F32, n);
}
static zero_result zero__mem_write(zero_ctx *ctx, int which, int64_t idx, int64_t n, const float *in, const char *fn) {
    (void)fn;
    return zero__dev_put_f32(ctx, zero__mem_state(ctx, which) + idx, ZERO_F32, in, n);
}
static zero_result zero__mem_flush(zero_ctx *ctx, const char *fn) { (void)ctx; (void)fn; return ZERO_OK; }
static int64_t zero__mem_run(const zero_ctx *ctx, int64_t idx) { (void)ctx; (void)idx; return INT64_MAX; }
static zero_result zero__mem_gather(zero_ctx *ctx, int64_t idx, int64_t n, char *dst) {
    (void)idx; (void)n; (void)dst;
    return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE, "internal: a param gather from a tier without params");
}
/* a module's slice of the params widened to fp32: the master where there is none */
static zero_result zero__widen_slice(zero_ctx *ctx, int mi, float *mine) {
    const zero__module_rec *m = &ctx->modules[mi];
    int pdt = (int)ctx->desc.param_dtype;
    int64_t per = m->lay.span / ctx->world;
    const void *src = zero__at(ctx->arena.param, ctx->desc.stage == 3 ? zero__pshard(ctx, mi)
                                                 : m->lay.param_off + (int64_t)ctx->prank * per, pdt);
    return ctx->dev->sum_into(ctx, ZERO__S_COMM, mine, ZERO_F32, &src, 1, pdt, per, 0);
}
/* the master's slice: the arena's (device or pinned host memory), else the params widened */
static zero_result zero__mem_master_slice(zero_ctx *ctx, int mi, float *mine) {
    const zero__module_rec *m = &ctx->modules[mi];
    if (!ctx->arena.master) return zero__widen_slice(ctx, mi, mine);
    return ctx->dev->copy(ctx, ZERO__S_COMM, mine, ctx->arena.master + m->lay.train_off / ctx->world,
                          m->lay.span / ctx->world * 4);
}
ZERO__VT_BEGIN(zero__tier_vt, zero__tier_mem)
    ZERO__VT_SET(name, "memory") ZERO__VT_SET(build, zero__mem_build) ZERO__VT_SET(free, zero__mem_free)
    ZERO__VT_SET(has_master, zero__mem_has_master) ZERO__VT_SET(holds_params, zero__mem_holds_params)
    ZERO__VT_SET(step, zero__mem_step) ZERO__VT_SET(read, zero__mem_read) ZERO__VT_SET(write, zero__mem_write)
    ZERO__VT_SET(flush, zero__mem_flush) ZERO__VT_SET(blocked, 0) ZERO__VT_SET(run, zero__mem_run)
    ZERO__VT_SET(gather, zero__mem_gather) ZERO__VT_SET(master_slice, zero__mem_master_slice)
ZERO__VT_END(zero__tier_vt, zero__tier_mem)

/* the nvme tier's build: files created, preallocated and filled with zero states (slot 0) */
static zero_result zero__nvme_build(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    const zero_allocator *a = &d->allocator;
    zero__nvme *o;
    int i, nd = 0, K, direct_refused = 0;
    int64_t G, bb, nb, tstate = d->stage == 0 ? ctx->lay.plan.trainable_padded : ctx->lay.plan.trainable_padded / ctx->world, blk;
    static uint32_t seq = 0;
    uint32_t id = __atomic_add_fetch(&seq, 1u, __ATOMIC_RELAXED);
    zero_result r = ZERO_OK;
    if (d->offload_params == ZERO_OFFLOAD_NVME) {
        /* the param arena zero_build allocated holds the frozen modules' shards (in memory,
           ZERO_TIER_DEVICE as planned); zero__arena counted it under the params' tier */
        ctx->lay.bytes[ZERO_TIER_DEVICE][ZERO_CAT_PARAMS] += ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS];
        ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] = ctx->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS];
    }
    zero__nvme_geom(d, tstate, &K, &G, &bb, &nb);
    if (nb == 0) { ctx->tier.vt = &zero__tier_mem; return ZERO_OK; }    /* no optimizer state to offload */
    while (nd < ZERO_MAX_NVME_DIRS && d->offload.nvme_dirs[nd]) nd++;
    if (!(o = (zero__nvme *)zero__raw_alloc(a, sizeof *o)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: out of memory");
    memset(o, 0, sizeof *o);
    zero__mutex_init(&o->mu);
    ctx->tier.nvme = o;
    o->ctx = ctx;
    o->params = d->offload_params == ZERO_OFFLOAD_NVME;
    o->gblk = -1;
    o->ndirs = nd; o->K = K; o->G = G; o->bb = bb; o->nblocks = nb; o->tstate = tstate;
    o->cached = -1;
    o->has_master = d->param_dtype != ZERO_F32;
    o->psz = (int)zero__dtype_size(d->param_dtype);
    o->file_bytes = ((nb + nd - 1) / nd) * 2 * bb;
    zero__nvme_layout(o);
    for (i = 0; i < 3; i++) o->bufblk[i] = -1;
    for (i = 0; i < nd; i++) o->fd[i] = -1;
    for (i = 0; i < 3; i++) {
        if (!(o->buf[i] = zero__io_alloc(a, bb, &o->raw[i]))) break;
    }
    o->pieces = (zero__nvme_piece *)zero__raw_alloc(a, sizeof *o->pieces * (size_t)(ctx->num_params + 1));
    if (o->params) o->gbuf = zero__io_alloc(a, bb - zero__nvme_parea(o), &o->graw);
    if (i < 3 || !o->pieces || (o->params && !o->gbuf)) { zero__nvme_free(ctx); return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                                                                      "zero_build: out of memory for the offload buffers"); }
    for (i = 0; i < nd && r == ZERO_OK; i++) {
        snprintf(o->path[i], sizeof o->path[i], "%s/zero_optim.r%d.p%ld.c%u", d->offload.nvme_dirs[i], ctx->rank,
                 (long)getpid(), (unsigned)id);
        r = zero__io_create(ctx, o->path[i], o->file_bytes, "offload", &o->fd[i], &direct_refused);
    }
    if (r == ZERO_OK && direct_refused)
        zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_OFFLOAD_BUFFERED,
                  "the filesystem of %s refused O_DIRECT: the offload files use buffered I/O", o->path[0]);
    if (r == ZERO_OK) r = zero__nvme_io_start(ctx, o);
    if (r == ZERO_OK) {     /* zero states, sealed, in slot 0 */
        memset(o->buf[0], 0, (size_t)bb);
        for (blk = 0; blk < nb && r == ZERO_OK; blk++) {
            zero__nvme_seal(o, ctx->opt.pool, o->buf[0], blk, 0);
            r = zero__nvme_sync(ctx, blk, 1, "zero_build");
        }
    }
    if (r != ZERO_OK) { zero__nvme_free(ctx); return r; }
    ctx->lay.bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += 3 * bb + (o->params ? bb - zero__nvme_parea(o) : 0);
    ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS] = ctx->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_PARAMS];
    ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER] = ctx->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_MASTER];
    ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM] = ctx->lay.plan.bytes[ZERO_TIER_NVME][ZERO_CAT_OPTIM];
    return ZERO_OK;
}

/* the optimizer pass over one block: segment pieces in [s0, s0 + G) */
typedef struct zero__nvme_job {
    zero_ctx *ctx;
    zero__optk k;
    zero__opt_fn fn;
    char *buf;
    int64_t s0, total;
    uint64_t seed_r, seed_w;        /* the checksum seeds of the block read and of the block written */
} zero__nvme_job;

static void zero__nvme_pieces(zero_ctx *ctx, int64_t s0, int64_t s1, int64_t *total) {
    zero__nvme *o = ctx->tier.nvme;
    int si;
    o->npieces = 0;
    *total = 0;
    for (si = 0; si < ctx->lay.num_segs; si++) {
        const zero__segment *sg = &ctx->lay.segs[si];
        int64_t a = s0 - sg->state_idx > 0 ? s0 - sg->state_idx : 0;
        int64_t b = s1 - sg->state_idx < sg->n ? s1 - sg->state_idx : sg->n;
        if (a >= b) continue;
        o->pieces[o->npieces].seg = si;
        o->pieces[o->npieces].a = a;
        o->pieces[o->npieces].b = b;
        o->npieces++;
        *total += b - a;
    }
}

/* copies the params of the block's pieces into (save 1) or out of (save 0) the block */
static void zero__nvme_params(zero_ctx *ctx, char *buf, int64_t s0, int save) {
    zero__nvme *o = ctx->tier.nvme;
    int i, pdt = (int)ctx->desc.param_dtype;
    char *pold = buf + (int64_t)o->K * o->G * 4;
    for (i = 0; i < o->npieces; i++) {
        const zero__segment *sg = &ctx->lay.segs[o->pieces[i].seg];
        int64_t a = o->pieces[i].a, n = o->pieces[i].b - a;
        char *p = zero__at(ctx->arena.param, sg->param_idx + a, pdt), *q = pold + (sg->state_idx + a - s0) * o->psz;
        if (save) memcpy(q, p, (size_t)(n * o->psz)); else memcpy(p, q, (size_t)(n * o->psz));
    }
}

/* the pass over checksum pieces [np * part / nparts, np * (part + 1) / nparts): each piece
   summed as read (o->sv), updated, summed as written (o->ss), while it is in cache */
static void zero__nvme_part(void *arg, int part, int nparts) {
    const zero__nvme_job *j = (const zero__nvme_job *)arg;
    zero_ctx *ctx = j->ctx;
    zero__nvme *o = ctx->tier.nvme;
    int pdt = j->k.pdt, adt = j->k.adt, i, q, q1 = (int)((int64_t)o->np * (part + 1) / nparts);
    char *pbuf = j->buf + zero__nvme_parea(o);
    float *arr[3] = { NULL, NULL, NULL };
    for (i = 0; i < o->K; i++) arr[i] = (float *)(j->buf + (int64_t)i * o->G * 4);
    for (q = (int)((int64_t)o->np * part / nparts); q < q1; q++) {
        int64_t lo = (int64_t)q * o->E, hi = lo + o->E < o->G ? lo + o->E : o->G;
        zero__nvme_psums(o, j->buf, pbuf, q, j->seed_r, o->sv);
        for (i = 0; i < o->npieces; i++) {      /* the segment pieces in [lo, hi) of the block */
            const zero__segment *sg = &ctx->lay.segs[o->pieces[i].seg];
            int64_t a = o->pieces[i].a, n = o->pieces[i].b - a, at = sg->state_idx + a - j->s0;
            int64_t s = lo - at > 0 ? lo - at : 0, e = hi - at < n ? hi - at : n;
            void *p;
            float *w, *m, *v;
            zero__optk k;
            if (s >= e) continue;
            k = j->k;
            k.decay = sg->decay;
            /* params on NVMe: updated in the block's param area, written to the other slot with
               the states; else in the arena, the old values saved in the block for an undo */
            p = o->params ? pbuf + at * o->psz : zero__at(ctx->arena.param, sg->param_idx + a, pdt);
            w = o->has_master ? arr[0] + at : (float *)p;
            m = o->K > o->has_master ? arr[o->has_master] + at : NULL;
            v = o->K > o->has_master + 1 ? arr[o->has_master + 1] + at : NULL;
            if (!o->params)
                memcpy(pbuf + (at + s) * o->psz, zero__at(p, s, pdt), (size_t)((e - s) * o->psz));
            j->fn(&k, zero__at(ctx->arena.grad, sg->grad_idx + a, adt), p, w, m, v, s, e);
        }
        zero__nvme_psums(o, j->buf, pbuf, q, j->seed_w, o->ss);
    }
}

/* The streamed optimizer pass: read block i+1 while computing block i and writing
   block i-1 (three buffers). Reads come from the current slot, writes go to the other. */
static zero_result zero__nvme_step(zero_ctx *ctx, float gscale) {
    zero__nvme *o = ctx->tier.nvme;
    zero__nvme_job job;
    int so = o->slot, sn = 1 - o->slot, x;
    int64_t i, nb = o->nblocks;
    uint64_t tsum, t0, t4;
    zero_result r;
    if ((r = zero__nvme_flush(ctx, "zero_step")) != ZERO_OK) return r;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    zero__opt_setup(ctx, gscale, &job.k, &job.fn);
    for (x = 0; x < 3; x++) { o->bufblk[x] = -1; memset(&o->wb[x], 0, sizeof o->wb[x]); }
    o->done = 0;
    zero__nvme_issue(o, &o->rb[0], 0, so, o->buf[0], 0);
    for (i = 0; i < nb; i++) {
        int b = (int)(i % 3), nx = (int)((i + 1) % 3);
        zero__io_wait(&o->io, &o->rb[b]);
        if (o->rb[b].err) { r = zero__nvme_fail_io(ctx, o, &o->rb[b], i, "zero_step"); break; }
        if (i + 1 < nb) {       /* block i+1 queued before block i is checked, so the reads barely
                                   pause; buf[nx] held block i-2: its write must be done */
            zero__io_wait(&o->io, &o->wb[nx]);
            if (o->wb[nx].err) { r = zero__nvme_fail_io(ctx, o, &o->wb[nx], i - 2, "zero_step"); break; }
            o->bufblk[nx] = -1;
            zero__nvme_issue(o, &o->rb[nx], i + 1, so, o->buf[nx], 0);
        }
        /* the checksums and the pass run on the optimizer's threads, the I/O on its own; the
           read's sum is known after the pass: a block that fails it fails the step, and the
           params it changed come back from the block's saved ones (bufblk) in the undo */
        if ((r = zero__nvme_check(ctx, o, o->buf[b], i, so, NULL, "zero_step")) != ZERO_OK) break;
        memcpy(&tsum, o->buf[b] + o->bb - ZERO__OFF_TRAILER, sizeof tsum);
        job.buf = o->buf[b];
        job.s0 = i * o->G;
        job.seed_r = zero__nvme_sseed(i, so);
        job.seed_w = zero__nvme_sseed(i, sn);
        zero__nvme_pieces(ctx, job.s0, job.s0 + o->G, &job.total);
        o->bufblk[b] = i;
        zero__pool_run(ctx->opt.pool, zero__nvme_part, &job, job.total < 65536 && o->np < 2);
        zero__nvme_combine(o, o->buf[b] + zero__nvme_parea(o), job.seed_r, o->sv, &t0, &t4);
        if (t0 != tsum) {
            r = zero__nvme_check(ctx, o, o->buf[b], i, so, &t0, "zero_step");
            break;
        }
        o->done = i + 1;
        zero__nvme_combine(o, o->buf[b] + zero__nvme_parea(o), job.seed_w, o->ss, &t0, &t4);
        zero__nvme_trailer(o, o->buf[b], i, sn, t0, t4);
        zero__nvme_issue(o, &o->wb[b], i, sn, o->buf[b], 1);
    }
    for (x = 0; x < 3; x++) {
        zero__io_wait(&o->io, &o->rb[x]);
        zero__io_wait(&o->io, &o->wb[x]);
    }
    for (x = 0; x < 3 && r == ZERO_OK; x++)
        if (o->wb[x].err) r = zero__nvme_fail_io(ctx, o, &o->wb[x], o->bufblk[x], "zero_step");
    return r;
}

/* after a failed step (here or on another rank): the params of every computed block
   back from the old values saved in it; the slot does not flip, so states stay too */
static zero_result zero__nvme_undo(zero_ctx *ctx) {
    zero__nvme *o = ctx->tier.nvme;
    int64_t i;
    int x, sn = 1 - o->slot;
    zero_result r = ZERO_OK;
    int64_t kept[3], t;
    if (o->params) { o->done = 0; return ZERO_OK; }    /* the current slot still holds the params */
    for (x = 0; x < 3; x++) {
        kept[x] = o->bufblk[x];
        if (kept[x] < 0) continue;
        zero__nvme_pieces(ctx, kept[x] * o->G, (kept[x] + 1) * o->G, &t);
        zero__nvme_params(ctx, o->buf[x], kept[x] * o->G, 0);
    }
    for (i = 0; i < o->done; i++) {
        if (kept[0] == i || kept[1] == i || kept[2] == i) continue;
        for (x = 0; x < 3; x++) o->bufblk[x] = -1;
        zero__nvme_issue(o, &o->rb[0], i, sn, o->buf[0], 0);
        zero__io_wait(&o->io, &o->rb[0]);
        if (o->rb[0].err) { r = zero__nvme_fail_io(ctx, o, &o->rb[0], i, "zero_step (undo)"); continue; }
        if (zero__nvme_verify(ctx, o, ctx->opt.pool, o->buf[0], i, sn, "zero_step (undo)") != ZERO_OK) { r = ZERO_ERR_CORRUPT; continue; }
        zero__nvme_pieces(ctx, i * o->G, (i + 1) * o->G, &t);
        zero__nvme_params(ctx, o->buf[0], i * o->G, 0);
    }
    o->done = 0;
    return r;
}

/* zero_step's optimizer phase on the NVMe tier: every rank's outcome is shared, so
   a failure anywhere fails the step everywhere with the params put back */
static zero_result zero__nvme_apply(zero_ctx *ctx, float gscale) {
    zero_result r = zero__nvme_step(ctx, gscale), rr;
    double v[2];
    ctx->tier.nvme->gblk = -1;
    v[0] = r != ZERO_OK;
    v[1] = r != ZERO_OK ? (double)r : 0.0;
    if ((rr = zero__wait(ctx, zero__post_allreduce_f64(ctx, v, 2))) != ZERO_OK) return rr;
    if (v[0] == 0) { ctx->tier.nvme->slot = 1 - ctx->tier.nvme->slot; return ZERO_OK; }
    zero__nvme_undo(ctx);
    if (r != ZERO_OK) return r;
    return zero__fail(ctx, v[0] == 1 ? (zero_result)(int)v[1] : ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                      "zero_step: the offloaded optimizer pass failed on another rank; step undone");
}

/* ZeRO-Offload on a device (zero__dev_offload): the gradient shard comes to pinned host
   memory, the CPU's fused pass (the same code and bits as the CPU device's) updates the
   host master and moments and narrows the new params into host memory, and they go back
   to the device. The state's elements (the segments concatenated, as zero__opt_part cuts
   them) are cut into sub-groups, pipelined on the CUDA device: while the CPU pass runs on
   sub-group g, the D2H copy of g + 1's gradients and the H2D copy of g - 1's params are in
   flight, each on a stream of its own (CUDA: d2h, h2d), so the two directions overlap.
   Pieces of consecutive segments whose positions advance in lockstep in both layouts move
   as one copy, so a sub-group makes a few large transfers; the padding between them too,
   but only when the segments are in order in all three layouts (gaps_ok): then a gap holds
   no other segment's elements. (Out of order, a gap may hold a later sub-group's elements:
   its host params being written by the CPU pass while this copy reads them is a race, even
   where that sub-group's own copy, issued later, leaves the right bits.) */
#define ZERO__HOST_SUBGROUP ((int64_t)1 << 22)      /* elements: at most 16 MiB of f32 per copy */
typedef struct zero__hostjob {
    zero_ctx *ctx;
    zero__optk k;
    zero__opt_fn fn;
    int64_t lo, total;              /* the sub-group: [lo, lo + total) of the concatenation */
    void *params;                   /* host params, indexed like the state */
} zero__hostjob;
static void zero__host_part(void *arg, int part, int nparts) {
    const zero__hostjob *j = (const zero__hostjob *)arg;
    zero_ctx *ctx = j->ctx;
    int pdt = j->k.pdt, adt = j->k.adt;
    int64_t lo, hi;
    zero__seg_walk w;
    zero__chunk(j->total, part, nparts, &lo, &hi);
    w = zero__seg_begin(ctx, lo + j->lo, hi + j->lo);
    while (zero__seg_next(&w)) {
        const zero__segment *sg = w.sg;
        int64_t s = w.s, e = w.e;
        void *p;
        zero__optk k = j->k;
        k.decay = sg->decay;
        p = zero__at(j->params, sg->state_idx, pdt);
        j->fn(&k, zero__at(ctx->tier.hgrad, sg->state_idx, adt), p,
              ctx->arena.master ? ctx->arena.master + sg->state_idx : (float *)p,
              ctx->arena.m ? ctx->arena.m + sg->state_idx : NULL,
              ctx->arena.v ? ctx->arena.v + sg->state_idx : NULL, s, e);
    }
}
/* the copies of [lo, hi) of the concatenation: gradients to the host or params to the device */
static zero_result zero__host_xfer(zero_ctx *ctx, int to_host, int64_t lo, int64_t hi, void *host, void *dev_base, int dt,
                                   int gaps_ok) {
    int64_t es = (int64_t)zero__esize(dt), off = 0, hs = -1, ds = 0, he = 0;
    int si;
    zero_result r;
    for (si = 0; si <= ctx->lay.num_segs; off += si < ctx->lay.num_segs ? ctx->lay.segs[si].n : 0, si++) {
        const zero__segment *sg = si < ctx->lay.num_segs ? &ctx->lay.segs[si] : NULL;
        int64_t s = 0, e = 0, h = 0, d = 0;
        if (sg) {
            s = lo - off > 0 ? lo - off : 0;
            e = hi - off < sg->n ? hi - off : sg->n;
            if (s >= e) { if (off >= hi) sg = NULL; else continue; }
        }
        if (sg) { h = sg->state_idx + s; d = (to_host ? sg->grad_idx : sg->param_idx) + s; }
        if (hs >= 0 && sg && h - hs == d - ds && (h == he || (gaps_ok && h > he))) { he = h + e - s; continue; }
        if (hs >= 0) {
            r = to_host ? zero__dev_copy_async(ctx, 1, (char *)host + hs * es, zero__at(dev_base, ds, dt), (he - hs) * es)
                        : zero__dev_copy_async(ctx, 0, zero__at(dev_base, ds, dt), (char *)host + hs * es, (he - hs) * es);
            if (r != ZERO_OK) return r;
        }
        if (!sg) break;
        hs = h; ds = d; he = h + e - s;
    }
    return ZERO_OK;
}
static zero_result zero__dev_offload_step(zero_ctx *ctx, float gscale) {
    int pdt = (int)ctx->desc.param_dtype, adt = (int)ctx->desc.grad_accum_dtype, si;
    void *hp = pdt == ZERO_F32 ? (void *)ctx->arena.master : ctx->tier.hparam;
    int64_t total = 0, sub, g, ng;
    int gaps_ok = 1;
    zero__hostjob job;
    zero_result r = ZERO_OK;
    for (si = 0; si < ctx->lay.num_segs; si++) {
        const zero__segment *a = &ctx->lay.segs[si], *b = a + 1;
        total += a->n;
        if (si + 1 < ctx->lay.num_segs && (b->state_idx < a->state_idx + a->n || b->grad_idx < a->grad_idx + a->n ||
                                           b->param_idx < a->param_idx + a->n))
            gaps_ok = 0;
    }
    if (total <= 0) return ZERO_OK;
    /* an eighth of the shard per sub-group, at most ZERO__HOST_SUBGROUP elements, cut at a
       multiple of 64 like zero__chunk's cuts (the kernels are element-wise: the same bits
       however the elements are cut) */
    sub = zero__align_up((total + 7) / 8, 64);
    if (sub > ZERO__HOST_SUBGROUP) sub = ZERO__HOST_SUBGROUP;
    ng = (total + sub - 1) / sub;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.params = hp;
    zero__opt_setup(ctx, gscale, &job.k, &job.fn);
    if ((r = zero__host_xfer(ctx, 1, 0, sub, ctx->tier.hgrad, ctx->arena.grad, adt, gaps_ok)) != ZERO_OK ||
        (r = zero__dev_fence(ctx, 0)) != ZERO_OK)
        goto out;
    for (g = 0; g < ng; g++) {
        /* fence (g + 1) % 2 was last recorded for g - 1 and waited for */
        if (g + 1 < ng && ((r = zero__host_xfer(ctx, 1, (g + 1) * sub, (g + 2) * sub, ctx->tier.hgrad, ctx->arena.grad,
                                                adt, gaps_ok)) != ZERO_OK ||
                           (r = zero__dev_fence(ctx, (int)((g + 1) & 1))) != ZERO_OK))
            break;
        if ((r = zero__dev_fence_wait(ctx, (int)(g & 1))) != ZERO_OK) break;
        job.lo = g * sub;
        job.total = total - job.lo < sub ? total - job.lo : sub;
        /* below ~64K elements waking the pool costs more than it saves */
        zero__pool_run(ctx->opt.pool, zero__host_part, &job, job.total < 65536);
        if ((r = zero__host_xfer(ctx, 0, job.lo, job.lo + job.total, hp, ctx->arena.param, pdt, gaps_ok)) != ZERO_OK) break;
    }
out:
    /* the params in place, and no copy left reading or writing the host buffers */
    if (r == ZERO_OK) r = zero__dev_close(ctx);
    if (r != ZERO_OK) { zero__dev_drain(ctx); return r; }
    return ctx->dev->sync(ctx, ZERO__S_COMPUTE);
}

/* host: the arenas of the master and moments are in pinned host memory (zero__cat_tier);
   the tier adds the host copies of the gradient shard and of the new params */
static zero_result zero__host_build(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    int64_t ts = d->stage == 0 ? ctx->lay.plan.trainable_padded : ctx->lay.shard_trainable, gb, pb;
    if (ctx->lay.shard_trainable <= 0) return ZERO_OK;
    gb = ts * (int64_t)zero__esize((int)d->grad_accum_dtype);
    pb = d->param_dtype == ZERO_F32 ? 0 : ts * (int64_t)zero__esize((int)d->param_dtype);
    ctx->tier.hgrad = ctx->dev->host_alloc(ctx, gb);
    if (pb) ctx->tier.hparam = ctx->dev->host_alloc(ctx, pb);
    if (!ctx->tier.hgrad || (pb && !ctx->tier.hparam))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_build: out of pinned host memory for the offloaded optimizer (%lld bytes)",
                          (long long)(gb + pb));
    ctx->lay.bytes[ZERO_TIER_HOST][ZERO_CAT_BUFFERS] += gb + pb;
    return ZERO_OK;
}
static void zero__host_free(zero_ctx *ctx) {
    if (ctx->tier.hgrad) ctx->dev->host_free(ctx, ctx->tier.hgrad);
    if (ctx->tier.hparam) ctx->dev->host_free(ctx, ctx->tier.hparam);
    ctx->tier.hgrad = ctx->tier.hparam = NULL;
}
static zero_result zero__host_step(zero_ctx *ctx, float gscale) {
    return ctx->tier.hgrad ? zero__dev_offload_step(ctx, gscale) : ZERO_OK;   /* no hgrad: nothing to train */
}
ZERO__VT_BEGIN(zero__tier_vt, zero__tier_host)
    ZERO__VT_SET(name, "host") ZERO__VT_SET(build, zero__host_build) ZERO__VT_SET(free, zero__host_free)
    ZERO__VT_SET(has_master, zero__mem_has_master) ZERO__VT_SET(holds_params, zero__mem_holds_params)
    ZERO__VT_SET(step, zero__host_step) ZERO__VT_SET(read, zero__mem_read)
    ZERO__VT_SET(write, zero__mem_write) ZERO__VT_SET(flush, zero__mem_flush) ZERO__VT_SET(blocked, 0)
    ZERO__VT_SET(run, zero__mem_run) ZERO__VT_SET(gather, zero__mem_gather)
    ZERO__VT_SET(master_slice, zero__mem_master_slice)
ZERO__VT_END(zero__tier_vt, zero__tier_host)

/* nvme: the blocks of zero__nvme (an optimizer state of no element has none: then the
   context runs on the mem tier) */
static int zero__nvme_has_master(const zero_ctx *ctx) { return ctx->tier.nvme->has_master; }
static int zero__nvme_holds_params(const zero_ctx *ctx) { return ctx->tier.nvme->params; }
static int64_t zero__nvme_run(const zero_ctx *ctx, int64_t idx) { return ctx->tier.nvme->G - idx % ctx->tier.nvme->G; }
static zero_result zero__nvme_read(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *out, const char *fn) {
    return zero__nvme_rw(ctx, which, idx, n, out, NULL, fn);
}
static zero_result zero__nvme_write(zero_ctx *ctx, int which, int64_t idx, int64_t n, const float *in, const char *fn) {
    return zero__nvme_rw(ctx, which, idx, n, NULL, in, fn);
}
/* the master's slice from the blocks: the fp32 master, or the params themselves when they
   are f32 and on NVMe; the tier's failure message goes to the comm, which reports it */
static zero_result zero__nvme_master_slice(zero_ctx *ctx, int mi, float *mine) {
    const zero__module_rec *m = &ctx->modules[mi];
    const zero__nvme *o = ctx->tier.nvme;
    zero_result r;
    if (ctx->arena.master || (!o->has_master && !o->params)) return zero__mem_master_slice(ctx, mi, mine);
    r = zero__nvme_read(ctx, o->has_master ? 0 : ZERO__TIER_PARAMS, m->lay.train_off / ctx->world,
                        m->lay.span / ctx->world, mine, "gather");
    if (r != ZERO_OK) snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s", ctx->err);
    return r;
}
ZERO__VT_BEGIN(zero__tier_vt, zero__tier_nvme)
    ZERO__VT_SET(build_agreed, 1)
    ZERO__VT_SET(name, "nvme") ZERO__VT_SET(build, zero__nvme_build) ZERO__VT_SET(free, zero__nvme_free)
    ZERO__VT_SET(has_master, zero__nvme_has_master) ZERO__VT_SET(holds_params, zero__nvme_holds_params)
    ZERO__VT_SET(step, zero__nvme_apply) ZERO__VT_SET(read, zero__nvme_read)
    ZERO__VT_SET(write, zero__nvme_write) ZERO__VT_SET(flush, zero__nvme_flush) ZERO__VT_SET(blocked, 1)
    ZERO__VT_SET(run, zero__nvme_run) ZERO__VT_SET(gather, zero__nvme_gather)
    ZERO__VT_SET(master_slice, zero__nvme_master_slice)
ZERO__VT_END(zero__tier_vt, zero__tier_nvme)

static const zero__tier_vt *zero__tier_pick(const zero_desc *d) {
    if (d->offload_optimizer == ZERO_OFFLOAD_NVME) return &zero__tier_nvme;
    return zero__dev_offload(d) ? &zero__tier_host : &zero__tier_mem;
}

/* >>build ---------------------------------------------------------------------------- */
static uint64_t zero__fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ull; }
    return h;
}
static uint64_t zero__model_hash(const zero_ctx *ctx) {
    uint64_t h = 14695981039346656037ull;
    int64_t cfg[8];
    int i;
    cfg[0] = ctx->desc.stage; cfg[1] = ctx->desc.param_dtype; cfg[2] = ctx->desc.grad_dtype;
    cfg[3] = ctx->desc.grad_accum_dtype; cfg[4] = ctx->desc.accum_steps; cfg[5] = ctx->desc.align_elems;
    cfg[6] = ctx->desc.optim.type; cfg[7] = ctx->num_modules;
    h = zero__fnv(h, cfg, sizeof cfg);
    cfg[0] = ctx->desc.qwz; cfg[1] = ctx->desc.qgz; cfg[2] = ctx->desc.hpz; cfg[3] = ctx->desc.quant_block;
    cfg[4] = ctx->zpp.ns; cfg[5] = cfg[6] = cfg[7] = 0;
    h = zero__fnv(h, cfg, sizeof cfg);      /* ZeRO++: ranks must agree on the payloads and the nodes */
    for (i = 0; i < ctx->num_modules; i++) {
        h = zero__fnv(h, ctx->modules[i].name, strlen(ctx->modules[i].name) + 1);
        h = zero__fnv(h, &ctx->modules[i].frozen, sizeof(int));
        h = zero__fnv(h, &ctx->modules[i].grad.shared, sizeof(int));
    }
    for (i = 0; i < ctx->num_ties; i++) {
        h = zero__fnv(h, ctx->ties[i].name, strlen(ctx->ties[i].name) + 1);
        h = zero__fnv(h, &ctx->ties[i].module, sizeof(int));
        h = zero__fnv(h, &ctx->ties[i].target, sizeof(int));
    }
    for (i = 0; i < ctx->num_params; i++) {
        const zero__param_rec *p = &ctx->params[i];
        h = zero__fnv(h, p->name, strlen(p->name) + 1);
        h = zero__fnv(h, &p->module, sizeof p->module);
        h = zero__fnv(h, &p->ndim, sizeof p->ndim);
        h = zero__fnv(h, p->shape, sizeof(int64_t) * (size_t)p->ndim);
        h = zero__fnv(h, &p->no_decay, sizeof p->no_decay);
    }
    return h;
}

/* an arena, zero-filled: in host memory for a category on the host tier (pinned on CUDA),
   else in device memory (on the CPU device both are host memory through the allocator
   hooks); zero__free_arenas frees it by the same rule */
static void *zero__arena(zero_ctx *ctx, int64_t bytes, zero_category cat, int *ok) {
    void *p;
    if (bytes <= 0) return NULL;
    p = zero__cat_tier(&ctx->desc, (int)cat) == ZERO_TIER_HOST ? ctx->dev->host_alloc(ctx, bytes) : ctx->dev->alloc(ctx, bytes);
    if (!p) { *ok = 0; return NULL; }
    ctx->lay.bytes[zero__cat_tier(&ctx->desc, (int)cat)][cat] += bytes;
    return p;
}

static void zero__make_segments(zero_ctx *ctx) {
    int N = ctx->world, i;
    ctx->lay.num_segs = 0;
    for (i = 0; i < ctx->num_params; i++) {
        const zero__param_rec *p = &ctx->params[i];
        const zero__module_rec *m = &ctx->modules[p->module];
        int64_t lo, s, e;
        zero__segment *sg;
        zero__param_region(ctx, p, &lo, &s, &e);
        if (m->frozen || s >= e) continue;
        sg = &ctx->lay.segs[ctx->lay.num_segs++];
        sg->n = e - s;
        sg->grad_idx = ctx->desc.stage < 2 ? m->lay.train_off + s : m->lay.train_off / N + (s - lo);
        sg->state_idx = zero__state_index(ctx, m, s, lo);
        sg->param_idx = ctx->desc.stage < 3 ? m->lay.param_off + s : m->lay.param_off / N + (s - lo);
        sg->decay = !p->no_decay;
    }
}

typedef struct zero__build_rec { int64_t status, nmod, nparam, numel; uint64_t hash; } zero__build_rec;

static void zero__free_arenas(zero_ctx *ctx) {
    const zero_allocator *a = &ctx->desc.allocator;
    /* the arenas (zero__arena) with their categories, which say where they were allocated */
    void *dbufs[] = { ctx->arena.param, ctx->arena.grad, ctx->arena.master, ctx->arena.m, ctx->arena.v, ctx->grads.ring,
                      ctx->sched.arena, ctx->sched.persist, ctx->tile.w, ctx->tile.g, ctx->zpp.sec, ctx->zpp.buf };
    static const int dcats[] = { ZERO_CAT_PARAMS, ZERO_CAT_GRADS, ZERO_CAT_MASTER, ZERO_CAT_OPTIM, ZERO_CAT_OPTIM,
                                 ZERO_CAT_BUFFERS, ZERO_CAT_BUFFERS, ZERO_CAT_BUFFERS, ZERO_CAT_BUFFERS, ZERO_CAT_BUFFERS,
                                 ZERO_CAT_PARAMS, ZERO_CAT_BUFFERS };
    void *bufs[] = { ctx->sched.free_off, ctx->sched.free_len, ctx->sched.order, ctx->lay.segs, ctx->grads.recs, ctx->grads.bucket, ctx->tile.gemm_ws,
                     ctx->opt.norm_part };
    size_t i;
    ctx->tier.vt->free(ctx);
    ctx->tier.vt = &zero__tier_mem;     /* nothing is left in a tier: no op reaches its freed state */
    for (i = 0; i < sizeof dbufs / sizeof dbufs[0]; i++) {
        if (!dbufs[i]) continue;
        if (zero__cat_tier(&ctx->desc, dcats[i]) == ZERO_TIER_HOST) ctx->dev->host_free(ctx, dbufs[i]);
        else ctx->dev->free(ctx, dbufs[i]);
    }
    for (i = 0; i < sizeof bufs / sizeof bufs[0]; i++) zero__raw_free(a, bufs[i]);
    ctx->arena.param = ctx->arena.grad = NULL;
    ctx->arena.fparam = ctx->arena.fgrad = NULL;
    ctx->arena.master = ctx->arena.m = ctx->arena.v = NULL;
    ctx->grads.ring = ctx->sched.arena = ctx->sched.persist = NULL;
    ctx->sched.free_off = ctx->sched.free_len = NULL;
    ctx->sched.order = NULL;
    ctx->grads.bucket = NULL;
    ctx->sched.len = ctx->sched.cap = ctx->sched.nfree = 0;
    ctx->tile.w = ctx->tile.g = ctx->tile.gemm_ws = NULL;
    ctx->zpp.sec = ctx->zpp.buf = NULL;
    ctx->lay.segs = NULL;
    ctx->grads.recs = NULL;
    ctx->opt.norm_part = NULL;
    memset(ctx->lay.bytes, 0, sizeof ctx->lay.bytes);
}

/* zero_build's first collective: every rank shows the others its model (a hash) and
   whether its own checks passed, so a rank with a different or broken model stops every
   rank here with a message, instead of leaving the others in a later collective */
static zero_result zero__build_agree(zero_ctx *ctx, zero__sizes *z) {
    zero__build_rec mine, *all;
    zero_result local, r;
    int k;
    if (ctx->num_modules == 0)
        local = zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE, "zero_build: no modules registered");
    else
        local = zero__layout(ctx, z);
    memset(&mine, 0, sizeof mine);
    mine.status = local; mine.nmod = ctx->num_modules; mine.nparam = ctx->num_params;
    mine.numel = z->numel; mine.hash = zero__model_hash(ctx);
    all = (zero__build_rec *)zero__raw_alloc(&ctx->desc.allocator, sizeof *all * (size_t)ctx->world);
    if (!all) return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: out of memory");
    r = zero__wait(ctx, zero__post_allgather(ctx, &mine, all, (int64_t)sizeof mine));
    for (k = 0; r == ZERO_OK && local == ZERO_OK && k < ctx->world; k++) {
        if (all[k].status != ZERO_OK)
            r = zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_MODEL_MISMATCH,
                           "zero_build: rank %d rejected its model (%s); every rank must register the same valid model",
                           k, zero__result_name((zero_result)all[k].status));
        else if (all[k].hash != all[0].hash)
            r = zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_MODEL_MISMATCH,
                           "zero_build: rank %d registered a different model or config than rank 0 "
                           "(%lld modules, %lld params, %lld elements vs %lld, %lld, %lld)",
                           k, (long long)all[k].nmod, (long long)all[k].nparam, (long long)all[k].numel,
                           (long long)all[0].nmod, (long long)all[0].nparam, (long long)all[0].numel);
    }
    zero__raw_free(&ctx->desc.allocator, all);
    return local != ZERO_OK ? local : r;
}

/* the plan's bytes in one tier against the user's cap for it (0: none) */
static zero_result zero__check_cap(zero_ctx *ctx, const int64_t *cats, int64_t cap, const char *tier, const char *field) {
    int64_t total = zero__tier_total(cats);
    if (!cap || total <= cap) return ZERO_OK;
    return zero__fail(ctx, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_OVER_CAP,
                      "zero_build: the plan needs %lld %s bytes per rank (params %lld, grads %lld, master %lld, "
                      "optimizer %lld, buffers %lld) but %s is %lld",
                      (long long)total, tier, (long long)cats[ZERO_CAT_PARAMS], (long long)cats[ZERO_CAT_GRADS],
                      (long long)cats[ZERO_CAT_MASTER], (long long)cats[ZERO_CAT_OPTIM],
                      (long long)cats[ZERO_CAT_BUFFERS], field, (long long)cap);
}

/* ZeRO++'s secondary partition and payload buffers, and each module's place in the first */
static void zero__build_zpp(zero_ctx *ctx, const zero__sizes *z, int *ok) {
    const zero_desc *d = &ctx->desc;
    int64_t sec, za, zb, zf, off = 0;
    int k;
    zero__zpp_plan(d, ctx->world, z, &sec, &za, &zb, &zf);
    ctx->zpp.sec = (char *)zero__arena(ctx, sec, ZERO_CAT_PARAMS, ok);
    ctx->zpp.buf = (char *)zero__arena(ctx, za + zb + zf, ZERO_CAT_BUFFERS, ok);
    ctx->zpp.a_bytes = za; ctx->zpp.b_bytes = zb; ctx->zpp.f_bytes = zf;
    for (k = 0; k < ctx->num_modules; k++) {
        ctx->modules[k].zpp.sec_off = off;
        ctx->modules[k].zpp.sec_fresh = 0;
        if (d->hpz) off += ctx->modules[k].lay.span / ctx->zpp.ns * (int64_t)zero__dtype_size(d->param_dtype);
    }
}

/* the planned arenas in device / host memory (the NVMe tier's are its own, >>offload);
   *ok is cleared when one cannot be had */
static void zero__build_arenas(zero_ctx *ctx, const zero__sizes *z, int *ok) {
    const zero_desc *d = &ctx->desc;
    int64_t (*b)[ZERO_CAT_NUM] = ctx->lay.plan.bytes;
    ctx->arena.param = zero__arena(ctx, zero__pcat(b, ZERO_CAT_PARAMS) - ctx->lay.plan.hpz_bytes, ZERO_CAT_PARAMS, ok);
    ctx->arena.grad = zero__arena(ctx, zero__pcat(b, ZERO_CAT_GRADS), ZERO_CAT_GRADS, ok);
    if (d->flat_layout && ctx->arena.param)     /* the views end their arenas (zero__plan_compute) */
        ctx->arena.fparam = (char *)ctx->arena.param + zero__pcat(b, ZERO_CAT_PARAMS) -
                            z->numel * (int64_t)zero__dtype_size(d->param_dtype);
    if (zero__flat_grads(d) && ctx->arena.grad)
        ctx->arena.fgrad = (char *)ctx->arena.grad + zero__pcat(b, ZERO_CAT_GRADS) -
                           z->numel * (int64_t)zero__dtype_size(d->grad_dtype);
    ctx->arena.master = (float *)zero__arena(ctx, zero__pcat(b, ZERO_CAT_MASTER), ZERO_CAT_MASTER, ok);
    if (d->optim.type == ZERO_OPTIM_SGD) {
        ctx->arena.m = (float *)zero__arena(ctx, zero__pcat(b, ZERO_CAT_OPTIM), ZERO_CAT_OPTIM, ok);
    } else {
        ctx->arena.m = (float *)zero__arena(ctx, zero__pcat(b, ZERO_CAT_OPTIM) / 2, ZERO_CAT_OPTIM, ok);
        ctx->arena.v = (float *)zero__arena(ctx, zero__pcat(b, ZERO_CAT_OPTIM) / 2, ZERO_CAT_OPTIM, ok);
    }
    if (ctx->lay.staging_mode && z->trainable > 0) {
        ctx->grads.ring_bytes = zero__staging_capacity(d, z);     /* then the shared modules' slots */
        ctx->grads.ring = (char *)zero__arena(ctx, ctx->grads.ring_bytes + z->shared_bytes, ZERO_CAT_BUFFERS, ok);
    }
    if (d->stage == 3) {
        ctx->sched.max_live = zero__max_live(d, z);
        ctx->sched.prefetch_budget = d->prefetch_bytes < 0 ? -1 : d->prefetch_bytes ? d->prefetch_bytes : ctx->sched.max_live;
        ctx->sched.arena_bytes = ctx->sched.max_live + zero__gbytes(d, z->max_span);
        ctx->sched.arena = (char *)zero__arena(ctx, ctx->sched.arena_bytes, ZERO_CAT_BUFFERS, ok);
        ctx->sched.persist = (char *)zero__arena(ctx, z->persist_bytes, ZERO_CAT_BUFFERS, ok);
    }
    if (ctx->zpp.on) zero__build_zpp(ctx, z, ok);
    if (z->tile_elems) {
        ctx->tile.w = (float *)zero__arena(ctx, z->tile_elems * 4, ZERO_CAT_BUFFERS, ok);
        ctx->tile.g = (float *)zero__arena(ctx, z->tile_elems * 4, ZERO_CAT_BUFFERS, ok);
        if (zero__gemm_workspace_bytes(d) > 0) {   /* host memory: the CPU GEMM's packing buffers */
            ctx->tile.gemm_ws = (float *)zero__raw_alloc(&d->allocator, (size_t)zero__gemm_workspace_bytes(d));
            if (ctx->tile.gemm_ws) ctx->lay.bytes[zero__cat_tier(d, ZERO_CAT_BUFFERS)][ZERO_CAT_BUFFERS] += zero__gemm_workspace_bytes(d);
            else *ok = 0;
        }
    }
}

/* the bookkeeping (not model state; a few bytes per module and param); 0: out of memory */
static int zero__build_books(zero_ctx *ctx, const zero__sizes *z) {
    const zero_allocator *a = &ctx->desc.allocator;
    int k;
    ctx->grads.rec_cap = z->num_trainable + 1;
    ctx->grads.recs = (zero__staging_rec *)zero__raw_alloc(a, sizeof(zero__staging_rec) * (size_t)ctx->grads.rec_cap);
    ctx->grads.bucket = (zero__bucket_item *)zero__raw_alloc(a, sizeof(zero__bucket_item) * (size_t)ctx->num_modules);
    ctx->lay.segs = (zero__segment *)zero__raw_alloc(a, sizeof(zero__segment) * (size_t)ctx->num_params);
    ctx->sched.free_off = (int64_t *)zero__raw_alloc(a, sizeof(int64_t) * (size_t)(ctx->num_modules + 1));
    ctx->sched.free_len = (int64_t *)zero__raw_alloc(a, sizeof(int64_t) * (size_t)(ctx->num_modules + 1));
    ctx->opt.norm_blocks = 0;
    for (k = 0; k < ctx->num_modules; k++) {
        ctx->modules[k].norm.first = ctx->opt.norm_blocks;
        ctx->modules[k].norm.taken = 0;
        if (!ctx->modules[k].frozen)
            ctx->opt.norm_blocks += (ctx->modules[k].lay.span / ctx->world + ZERO__NORM_BLOCK - 1) / ZERO__NORM_BLOCK;
    }
    ctx->opt.norm_part = (double *)zero__raw_alloc(a, sizeof(double) * (size_t)(ctx->opt.norm_blocks + 1));
    return ctx->grads.recs && ctx->grads.bucket && ctx->lay.segs && ctx->sched.free_off && ctx->sched.free_len &&
           ctx->opt.norm_part;
}

/* every rank's files, or none: this rank's result r of creating its `what` files, failed
   on every rank when any rank's failed */
static zero_result zero__files_agreed(zero_ctx *ctx, zero_result r, const char *what) {
    double v = r != ZERO_OK;
    zero_result r2 = zero__wait(ctx, zero__post_allreduce_f64(ctx, &v, 1));
    if (r == ZERO_OK && (r2 != ZERO_OK || v > 0))
        r = r2 != ZERO_OK ? r2 : zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                                            "zero_build: another rank could not create its %s files", what);
    return r;
}
/* zero__build's allocations let go of (a failed build, or a failure after it) */
static void zero__unbuild(zero_ctx *ctx) {
    zero__pool_free(ctx->opt.pool, &ctx->desc.allocator);
    ctx->opt.pool = NULL;
    zero__free_arenas(ctx);
    ctx->built = 0;
}

/* the optimizer's threads and its tier (agreed by every rank where the tier asks) */
static zero_result zero__build_tier(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    zero_result r;
    if (!(ctx->opt.pool = zero__pool_create(d->cpu_threads, &d->allocator)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_build: could not start %d optimizer threads (cpu_threads)", d->cpu_threads - 1);
    ctx->tier.vt = zero__tier_pick(d);
    r = ctx->tier.vt->build(ctx);
    return ctx->tier.vt->build_agreed ? zero__files_agreed(ctx, r, "offload") : r;
}

/* the stage-3 gather arena's free list and its persistent modules' fixed places */
static void zero__build_gather_places(zero_ctx *ctx) {
    int64_t off = 0;
    int k;
    ctx->sched.nfree = ctx->sched.arena_bytes > 0;
    ctx->sched.free_off[0] = 0;
    ctx->sched.free_len[0] = ctx->sched.arena_bytes;
    if (ctx->desc.stage != 3) return;
    for (k = 0; k < ctx->num_modules; k++)
        if (ctx->modules[k].gat.persistent) { ctx->modules[k].gat.goff = off; off += zero__gbytes(&ctx->desc, ctx->modules[k].lay.span); }
}

/* zero_build after its argument checks: every rank checks the others registered the same
   model, then the plan is computed, checked against the caps and allocated */
static zero_result zero__build(zero_ctx *ctx) {
    zero__sizes z;
    zero_result r;
    zero_desc *d = &ctx->desc;
    int64_t (*b)[ZERO_CAT_NUM];
    int ok = 1;
    memset(&z, 0, sizeof z);
    if ((r = zero__build_agree(ctx, &z)) != ZERO_OK) return r;
    if (ctx->zpp.on && (r = zero__zpp_split(ctx)) != ZERO_OK) return r;
    zero__plan_compute(d, ctx->world, &z, &ctx->lay.plan);
    b = ctx->lay.plan.bytes;
    if ((r = zero__check_cap(ctx, b[ZERO_TIER_DEVICE], d->device_bytes_cap, "device", "device_bytes_cap")) != ZERO_OK ||
        (r = zero__check_cap(ctx, b[ZERO_TIER_HOST], d->host_bytes_cap, "host", "host_bytes_cap")) != ZERO_OK)
        return r;
    ctx->lay.staging_mode = zero__staging_mode(d);
    ctx->lay.shard_padded = z.padded / ctx->world;
    ctx->lay.shard_trainable = z.trainable / ctx->world;
    ctx->lay.max_span = z.max_span;
    zero__build_arenas(ctx, &z, &ok);
    if (!zero__build_books(ctx, &z) || !ok) {
        zero__free_arenas(ctx);
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_build: out of memory allocating %lld planned bytes", (long long)ctx->lay.plan.total_bytes);
    }
    r = zero__build_tier(ctx);
    if (r == ZERO_OK) {
        zero__build_gather_places(ctx);
        zero__make_segments(ctx);
        r = ctx->dev->prepare(ctx);
    }
    if (r != ZERO_OK) {
        zero__unbuild(ctx);
        return r;
    }
    ctx->lay.num_trainable = z.num_trainable;
    ctx->built = 1;
    zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_PLAN,
              "plan per rank: device %lld bytes, host %lld, nvme %lld (model states %lld, total %lld)",
              (long long)zero__tier_total(b[ZERO_TIER_DEVICE]), (long long)zero__tier_total(b[ZERO_TIER_HOST]),
              (long long)zero__tier_total(b[ZERO_TIER_NVME]), (long long)ctx->lay.plan.model_state_bytes,
              (long long)ctx->lay.plan.total_bytes);
    zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_BUILT,
              "built: stage %d, %d ranks, %lld params (%lld padded), model states %lld bytes per rank, buffers %lld",
              d->stage, ctx->world, (long long)z.numel, (long long)z.padded, (long long)ctx->lay.plan.model_state_bytes,
              (long long)b[0][ZERO_CAT_BUFFERS]);
    return ZERO_OK;
}

/* >>schedule: stage 3's fetch / prefetch / release, and the tasks the comm stream runs ------- */

/* this rank's slice `mine` into full, in one level or two (the gathers of every stage) */
static zero_result zero__gather_slice(zero_ctx *ctx, const void *mine, void *full, int64_t per, int dt) {
    if (ctx->zpp.on) return zero__zpp_gather_exact(ctx, mine, full, per, dt);
    return zero__all_gather(ctx, mine, full, per, dt);
}

static zero_result zero__task_reduce_run(zero_ctx *ctx, int mi, int micro, int64_t staging_off) {
    const zero_desc *d = &ctx->desc;
    const zero__module_rec *m = &ctx->modules[mi];
    int N = ctx->world, gdt = (int)d->grad_dtype, adt = (int)d->grad_accum_dtype;
    int64_t per = m->lay.span / N;
    void *full = zero__at(ctx->arena.grad, m->lay.train_off, adt);
    zero_result r;
    if (ctx->lay.staging_mode) {
        const void *src = ctx->grads.ring + staging_off;
        if (d->stage >= 2 && ctx->zpp.on)
            return zero__zpp_reduce(ctx, mi, src, gdt, zero__at(ctx->arena.grad, m->lay.train_off / N, adt), adt, per,
                                    micro > 1);
        if (d->stage >= 2)      /* straight into this rank's shard, summed over micro-batches */
            return zero__reduce_scatter(ctx, src, gdt, zero__at(ctx->arena.grad, m->lay.train_off / N, adt), adt,
                                        per, micro > 1);
        /* stages 0-1 with a wider accumulator: accumulate locally, reduce on the last micro-batch */
        if ((r = ctx->dev->sum_into(ctx, ZERO__S_COMM, full, adt, &src, 1, gdt, m->lay.span, micro > 1)) != ZERO_OK) return r;
        if (zero__reduce_coll(d, micro) < 0) return ZERO_OK;
    }
    /* (without staging, stages 0-1 post their reduction on the last micro-batch only) */
    if (zero__reduce_coll(d, micro) == ZERO_COLL_ALL_REDUCE) return zero__all_reduce(ctx, full, adt, m->lay.span);
    if (ctx->zpp.on) return zero__zpp_reduce(ctx, mi, full, adt, zero__at(full, (int64_t)ctx->prank * per, adt), adt, per, 0);
    r = zero__reduce_scatter(ctx, full, adt, zero__at(full, (int64_t)ctx->rank * per, adt), adt, per, 0);
    return r;
}

/* A module's reduction. Its last of the step (the last micro-batch's, without ZeRO++) writes
   this rank's slice of the gradient as the norm will read it: the comm (local, or MPI on the
   CPU device) then takes the slice's norm blocks on the way, while the data is in cache
   (zero__sum_norm_k), and zero_step's sumsq skips the module. One rank reduces nothing: its
   norm stays in zero_step, on the threads that wrote the gradients (read from another
   core, the blocks took twice as long: bench_step). */
static zero_result zero__task_reduce(zero_ctx *ctx, int mi, int micro, int64_t staging_off) {
    zero_comm *c = ctx->comm;
    zero_result r;
    c->sq_blk = ctx->world > 1 && micro == ctx->desc.accum_steps && !ctx->zpp.on ?
                ctx->opt.norm_part + ctx->modules[mi].norm.first : NULL;
    c->sq_done = 0;
    r = zero__task_reduce_run(ctx, mi, micro, staging_off);
    if (r == ZERO_OK && c->sq_blk && c->sq_done) ctx->modules[mi].norm.taken = 1;
    c->sq_blk = NULL;
    return r;
}

/* buf: the module's span in fp32, in device memory (host memory on the CPU device); this
   rank's slice from its tier (a frozen module's: the params widened) */
static zero_result zero__task_gather_master(zero_ctx *ctx, int mi, float *buf) {
    int64_t per = ctx->modules[mi].lay.span / ctx->world;
    float *mine = buf + (int64_t)ctx->prank * per;
    zero_result r = ctx->modules[mi].frozen ? zero__widen_slice(ctx, mi, mine) : ctx->tier.vt->master_slice(ctx, mi, mine);
    char keep[ZERO__MSG];
    if (r == ZERO_OK) return zero__gather_slice(ctx, mine, buf, per, ZERO_F32);
    /* the others wait for this rank's slice: the gather still runs, and this rank's own
       failure, not the gather's, is what the stream reports */
    snprintf(keep, sizeof keep, "%s", ctx->comm->err);
    zero__gather_slice(ctx, mine, buf, per, ZERO_F32);
    snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s", keep);
    return r;
}

/* ---- tasks: what the comm stream runs (one runner per kind of ZERO__TASK_KINDS) ---------- */
static zero_result zero__do_reduce(zero_ctx *ctx, const zero__task *t) {
    zero_result r = zero__task_reduce(ctx, t->mod, t->u.reduce.micro, t->u.reduce.staging_off);
    if (r == ZERO_OK)
        zero__log(ctx, ZERO_LOG_DEBUG, ZERO_LOGITEM_REDUCED, "reduced module '%s' (micro-batch %d)",
                  ctx->modules[t->mod].name, t->u.reduce.micro);
    return r;
}
/* stage 3: the module gathered into its place from every rank's shard (the tier's, when
   the params are on NVMe) */
static zero_result zero__do_gather_module(zero_ctx *ctx, const zero__task *t) {
    const zero__module_rec *m = &ctx->modules[t->mod];
    int N = ctx->world, pdt = (int)ctx->desc.param_dtype;
    int64_t per = m->lay.span / N;
    char *dst = (char *)t->u.gather.dst, *mine = zero__at(dst, (int64_t)ctx->rank * per, pdt);
    /* (no param arena when every module's shard is the tier's: no pointer arithmetic on NULL) */
    const char *shard = ctx->arena.param ? zero__at(ctx->arena.param, zero__pshard(ctx, t->mod), pdt) : NULL;
    zero_result r, rr = ZERO_OK, rc = ZERO_OK;
    if (ctx->zpp.on) return zero__zpp_gather(ctx, t->mod, shard, dst, t->u.gather.refresh);
    if (!ctx->tier.vt->holds_params(ctx)) {     /* out of place: the shard (device memory) is sent */
        r = zero__all_gather(ctx, shard, dst, per, pdt);
    } else {
        if (!m->frozen)                             /* on failure the others still get their gather */
            rr = ctx->tier.vt->gather(ctx, m->lay.train_off / N, per, mine);
        else
            rc = ctx->dev->copy(ctx, ZERO__S_COMM, mine, shard, per * (int64_t)zero__esize(pdt));
        r = zero__all_gather(ctx, mine, dst, per, pdt);
    }
    if (rc != ZERO_OK) return rc;       /* the device wrote its message into comm->err */
    if (rr != ZERO_OK) { snprintf(ctx->comm->err, sizeof ctx->comm->err, "%s", ctx->err); return rr; }
    if (r == ZERO_ERR_MISMATCH && ctx->comm->bad_tag[0] >= 0 && ctx->comm->bad_tag[1] >= 0 &&
        ctx->comm->bad_tag[0] < ctx->num_modules && ctx->comm->bad_tag[1] < ctx->num_modules)
        snprintf(ctx->comm->err, sizeof ctx->comm->err,
                 "stage 3: rank %d fetched module '%s' while rank 0 fetched '%s': the ranks' fetch orders differ",
                 ctx->comm->bad_rank, ctx->modules[ctx->comm->bad_tag[1]].name,
                 ctx->modules[ctx->comm->bad_tag[0]].name);
    return r;
}
/* stages 1-2 after the optimizer: every rank's new slice of the params into the full copy */
static zero_result zero__do_gather_params(zero_ctx *ctx, const zero__task *t) {
    const zero__module_rec *m = &ctx->modules[t->mod];
    int pdt = (int)ctx->desc.param_dtype;
    int64_t per = m->lay.span / ctx->world;
    char *full = zero__at(ctx->arena.param, m->lay.param_off, pdt);
    return zero__gather_slice(ctx, zero__at(full, (int64_t)ctx->prank * per, pdt), full, per, pdt);
}
static zero_result zero__do_gather_master(zero_ctx *ctx, const zero__task *t) {
    return zero__task_gather_master(ctx, t->mod, t->u.master.buf);
}
static zero_result zero__do_allreduce_f64(zero_ctx *ctx, const zero__task *t) {
    return zero__all_reduce(ctx, t->u.f64.v, ZERO__F64, t->u.f64.n);
}
static zero_result zero__do_allgather_bytes(zero_ctx *ctx, const zero__task *t) {
    return zero__c_all_gather(ctx, ctx->comm, t->u.all.send, t->u.all.recv, t->u.all.bytes);
}
/* ZeRO++: the comm's node and cross-node endpoints, made anew */
static zero_result zero__do_split(zero_ctx *ctx, const zero__task *t) {
    zero_comm *c = ctx->comm;
    zero_result r;
    zero__comm_destroy(c->intra);
    zero__comm_destroy(c->inter);
    c->intra = c->inter = NULL;
    c->split_ns = 0;
    c->err[0] = '\0';
    if ((r = c->vt->split(c, t->u.split.ranks_per_node, &c->intra, &c->inter)) != ZERO_OK) {
        if (!c->err[0]) snprintf(c->err, sizeof c->err, "%s", zero__result_name(r));
        return r;
    }
    c->split_ns = t->u.split.ranks_per_node;
    return ZERO_OK;
}
/* (the stream's worker stops at a STOP task before it would run) */
static zero_result zero__do_stop(zero_ctx *ctx, const zero__task *t) {
    (void)t;
    snprintf(ctx->comm->err, sizeof ctx->comm->err, "internal error: a stop task was run");
    return ZERO_ERR_STATE;
}

static zero_result zero__run_task(zero_ctx *ctx, const zero__task *t) {
    static zero_result (*const runners[])(zero_ctx *, const zero__task *) = {
#define ZERO__X(kind, runner, label, module_task) zero__do_##runner,
        ZERO__TASK_KINDS(ZERO__X)
#undef ZERO__X
    };
    if (t->kind < 0 || t->kind >= ZERO__TASK_NUM) {
        snprintf(ctx->comm->err, sizeof ctx->comm->err, "internal error: unknown task kind %d", t->kind);
        return ZERO_ERR_STATE;
    }
    /* module tasks carry the module as the collective's tag: the local comm checks every
       rank moves the same module, so a divergent program is named, not garbled */
    ctx->comm->tag = t->mod;
    return runners[t->kind](ctx, t);
}
/* ---- fetch / release --------------------------------------------------------------- */
static zero_result zero__check_built(zero_ctx *ctx, const char *fn) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: ctx is NULL", fn);
    if (!ctx->built) return zero__fail(ctx, ZERO_ERR_NOT_BUILT, ZERO_LOGITEM_NOT_BUILT, "%s: call zero_build first", fn);
    return ZERO_OK;
}

/* The gather arena: first-fit over a sorted free list, coalescing on free. */
static int64_t zero__garena_alloc(zero_ctx *ctx, int64_t bytes) {
    int i;
    for (i = 0; i < ctx->sched.nfree; i++)
        if (ctx->sched.free_len[i] >= bytes) {
            int64_t off = ctx->sched.free_off[i];
            ctx->sched.free_off[i] += bytes;
            ctx->sched.free_len[i] -= bytes;
            if (ctx->sched.free_len[i] == 0) {
                memmove(ctx->sched.free_off + i, ctx->sched.free_off + i + 1, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 1));
                memmove(ctx->sched.free_len + i, ctx->sched.free_len + i + 1, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 1));
                ctx->sched.nfree--;
            }
            return off;
        }
    return -1;
}
static void zero__garena_free(zero_ctx *ctx, int64_t off, int64_t bytes) {
    int i = 0;
    while (i < ctx->sched.nfree && ctx->sched.free_off[i] < off) i++;
    memmove(ctx->sched.free_off + i + 1, ctx->sched.free_off + i, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i));
    memmove(ctx->sched.free_len + i + 1, ctx->sched.free_len + i, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i));
    ctx->sched.free_off[i] = off;
    ctx->sched.free_len[i] = bytes;
    ctx->sched.nfree++;
    if (i + 1 < ctx->sched.nfree && ctx->sched.free_off[i] + ctx->sched.free_len[i] == ctx->sched.free_off[i + 1]) {
        ctx->sched.free_len[i] += ctx->sched.free_len[i + 1];
        memmove(ctx->sched.free_off + i + 1, ctx->sched.free_off + i + 2, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 2));
        memmove(ctx->sched.free_len + i + 1, ctx->sched.free_len + i + 2, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 2));
        ctx->sched.nfree--;
    }
    if (i > 0 && ctx->sched.free_off[i - 1] + ctx->sched.free_len[i - 1] == ctx->sched.free_off[i]) {
        ctx->sched.free_len[i - 1] += ctx->sched.free_len[i];
        memmove(ctx->sched.free_off + i, ctx->sched.free_off + i + 1, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 1));
        memmove(ctx->sched.free_len + i, ctx->sched.free_len + i + 1, sizeof(int64_t) * (size_t)(ctx->sched.nfree - i - 1));
        ctx->sched.nfree--;
    }
}

static char *zero__gather_base(zero_ctx *ctx, const zero__module_rec *m) {
    return (m->gat.persistent ? ctx->sched.persist : ctx->sched.arena) + m->gat.goff;
}

/* Queue the all-gather of module mi into its place. Every rank makes the same
   decisions at the same calls (they depend on the schedule and the byte counts
   only, never on timing), so the ranks' comm streams stay matched. */
static void zero__issue_gather(zero_ctx *ctx, int mi) {
    zero__module_rec *m = &ctx->modules[mi];
    int refresh = ctx->desc.hpz && !m->zpp.sec_fresh;      /* hpz: its chunk is stale */
    m->gat.live = 1;
    m->zpp.sec_fresh = 1;
    m->gat.gticket = zero__post_gather_module(ctx, mi, refresh, zero__gather_base(ctx, m));
    if (!m->gat.persistent) {
        ctx->sched.gathered += zero__gbytes(&ctx->desc, m->lay.span);
        if (ctx->sched.gathered > ctx->sched.peak_gathered) ctx->sched.peak_gathered = ctx->sched.gathered;
    }
}

/* Drop a gathered, unused module. A gather still in flight writes into its place,
   so wait for it first. */
static zero_result zero__drop(zero_ctx *ctx, int mi) {
    zero__module_rec *m = &ctx->modules[mi];
    int64_t b = zero__gbytes(&ctx->desc, m->lay.span);
    zero_result r = ZERO_OK;
    if (!m->gat.live) return ZERO_OK;
    if (m->gat.gticket && !zero__ticket_done(ctx, m->gat.gticket)) r = zero__wait(ctx, m->gat.gticket);
    if (m->gat.prefetched) ctx->sched.pending_bytes -= b;
    m->gat.live = m->gat.prefetched = m->gat.kept = 0;
    m->gat.gticket = 0;
    if (!m->gat.persistent) {
        zero__garena_free(ctx, m->gat.goff, b);
        ctx->sched.gathered -= b;
        m->gat.goff = -1;
    }
    return r;
}

/* Issue the gathers of the next scheduled modules, within both budgets. When no
   module is in use, the next ones may also take the in-use allowance (the arena's
   room for the largest module), as many in a row as fit in it: that is where the
   forward pass turns into the backward pass, releasing a module (or a module and the
   owner of its tied params, fetched with it) that is fetched again right away. */
static void zero__prefetch(zero_ctx *ctx) {
    int j;
    int64_t room;
    if (!ctx->sched.active || ctx->sched.off_pos || ctx->sched.prefetch_budget < 0) return;
    room = ctx->sched.inuse_bytes == 0 ? zero__gbytes(&ctx->desc, ctx->lay.max_span) : 0;
    for (j = ctx->sched.pos; j < ctx->sched.len; j++) {
        int mi = ctx->sched.order[j];
        zero__module_rec *m = &ctx->modules[mi];
        int64_t b = zero__gbytes(&ctx->desc, m->lay.span), off;
        int next_in_use = 0;
        if (!m->gat.persistent) {           /* the allowance is for the next modules in a row only */
            if (b <= room) { next_in_use = 1; room -= b; } else room = 0;
        }
        if (m->gat.live) continue;
        if (!m->gat.persistent) {
            if (!next_in_use && ctx->sched.pending_bytes + b > ctx->sched.prefetch_budget) break;
            if (!next_in_use && ctx->sched.gathered - ctx->sched.inuse_bytes + b > ctx->sched.max_live) break;
            if ((off = zero__garena_alloc(ctx, b)) < 0) break;
            m->gat.goff = off;
            ctx->sched.pending_bytes += b;
            ctx->sched.prefetched_bytes += b;
            m->gat.prefetched = 1;
        }
        zero__issue_gather(ctx, mi);
    }
}

static void zero__record_fetch(zero_ctx *ctx, int mi) {
    if (ctx->sched.active) {
        if (ctx->sched.off_pos) return;
        if (ctx->sched.pos < ctx->sched.len && ctx->sched.order[ctx->sched.pos] == mi) { ctx->sched.pos++; return; }
        ctx->sched.off_pos = 1;
        zero__log(ctx, ZERO_LOG_WARN, ZERO_LOGITEM_SCHEDULE_CHANGED,
                  "step %lld: fetch #%d is module '%s', not '%s' as recorded: fetching on demand for this step",
                  (long long)ctx->opt.steps, ctx->sched.pos, ctx->modules[mi].name,
                  ctx->sched.pos < ctx->sched.len ? ctx->modules[ctx->sched.order[ctx->sched.pos]].name : "(end)");
        return;
    }
    /* the first step: record (allocation happens only here, never in a steady-state step) */
    if (!zero__grow(ctx, (void **)&ctx->sched.order, &ctx->sched.cap, ctx->sched.len, sizeof(int))) {
        ctx->sched.off_pos = 1;                 /* no schedule: on demand, still correct */
        return;
    }
    ctx->sched.order[ctx->sched.len++] = mi;
}

/* is module mi fetched again within the next `dist` scheduled fetches? */
static int zero__reused_soon(const zero_ctx *ctx, int mi, int dist) {
    int j;
    if (!ctx->sched.active || ctx->sched.off_pos) return 0;
    for (j = ctx->sched.pos; j < ctx->sched.len && j < ctx->sched.pos + dist; j++)
        if (ctx->sched.order[j] == mi) return 1;
    return 0;
}

/* The step's end for stage 3: gathered copies are stale once the optimizer has run.
   Before the optimizer, the first step's order is checked across ranks. */
static zero_result zero__schedule_check(zero_ctx *ctx) {
    enum { K = 32 };
    int64_t mine[K + 2], *all;
    zero_result r;
    int i, k, n = ctx->sched.len < K ? ctx->sched.len : K;
    mine[0] = ctx->sched.len;
    mine[1] = (int64_t)zero__fnv(14695981039346656037ull, ctx->sched.order, sizeof(int) * (size_t)ctx->sched.len);
    for (i = 0; i < K; i++) mine[2 + i] = i < n ? ctx->sched.order[i] : -1;
    all = (int64_t *)zero__raw_alloc(&ctx->desc.allocator, sizeof mine * (size_t)ctx->world);
    if (!all) return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_step: out of memory");
    r = zero__wait(ctx, zero__post_allgather(ctx, mine, all, (int64_t)sizeof mine));
    for (k = 1; r == ZERO_OK && k < ctx->world; k++) {
        const int64_t *o = all + (K + 2) * k;
        if (o[0] == all[0] && o[1] == all[1]) continue;
        for (i = 0; i < K && o[2 + i] == all[2 + i]; i++) {}
        if (i < K && o[2 + i] >= 0 && all[2 + i] >= 0)
            r = zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_SCHEDULE_MISMATCH,
                           "zero_step: fetch #%d of the first step was module '%s' on rank %d but '%s' on rank 0; "
                           "every rank must fetch modules in the same order", i,
                           ctx->modules[o[2 + i]].name, k, ctx->modules[all[2 + i]].name);
        else
            r = zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_SCHEDULE_MISMATCH,
                           "zero_step: rank %d fetched %lld modules in the first step, rank 0 %lld (or in another "
                           "order after fetch #%d); every rank must fetch modules in the same order",
                           k, (long long)o[0], (long long)all[0], K);
    }
    zero__raw_free(&ctx->desc.allocator, all);
    return r;
}

static zero_result zero__stage3_step_end(zero_ctx *ctx) {
    zero_result r = ZERO_OK, r2;
    int i;
    for (i = 0; i < ctx->num_modules; i++)
        if (ctx->modules[i].gat.live && (r2 = zero__drop(ctx, i)) != ZERO_OK && r == ZERO_OK) r = r2;
    ctx->sched.active = 1;
    ctx->sched.pos = 0;
    ctx->sched.off_pos = 0;
    return r;
}

/* After the optimizer: gather the persistent modules and prefetch the next step's first. */
static void zero__stage3_step_start(zero_ctx *ctx) {
    int i;
    for (i = 0; i < ctx->num_modules; i++)
        if (ctx->modules[i].gat.persistent) zero__issue_gather(ctx, i);
    zero__prefetch(ctx);
}

/* The owner of tie i when it is one of module mi's ties into another module, counted at
   its first such tie only; else -1. (The modules whose params mi uses, each once.) */
static int zero__tie_owner(const zero_ctx *ctx, int mi, int i) {
    int o = ctx->params[ctx->ties[i].target].module, k;
    if (ctx->ties[i].module != mi || o == mi) return -1;
    for (k = 0; k < i; k++)
        if (ctx->ties[k].module == mi && ctx->params[ctx->ties[k].target].module == o) return -1;
    return o;
}

/* zero_fetch of one module (not its tied params' owners) */
static zero_result zero__fetch(zero_ctx *ctx, int mi) {
    zero__module_rec *m;
    zero_result r;
    int64_t b;
    m = &ctx->modules[mi];
    if (ctx->desc.stage < 3 || m->gat.fetched > 0) { m->gat.fetched++; return ZERO_OK; }
    zero__record_fetch(ctx, mi);
    b = zero__gbytes(&ctx->desc, m->lay.span);
    if (m->gat.live) {
        if (ctx->sched.active) ctx->sched.hits++;
        if (m->gat.prefetched) ctx->sched.pending_bytes -= b;
    } else {
        if (ctx->sched.active) ctx->sched.misses++;
        if (!m->gat.persistent) {
            int64_t off;
            int i;
            /* make room: drop kept and prefetched modules, those needed last first */
            while ((off = zero__garena_alloc(ctx, b)) < 0) {
                int victim = -1;
                for (i = 0; i < ctx->num_modules; i++)
                    if (ctx->modules[i].gat.live && !ctx->modules[i].gat.fetched && !ctx->modules[i].gat.persistent) victim = i;
                if (victim < 0)
                    return zero__fail(ctx, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_BUFFER_FULL,
                                      "zero_fetch('%s'): the gather arena (%lld bytes: max_live_bytes %lld + the largest "
                                      "module) is full of modules in use; release one first or raise max_live_bytes",
                                      m->name, (long long)ctx->sched.arena_bytes, (long long)ctx->sched.max_live);
                if ((r = zero__drop(ctx, victim)) != ZERO_OK) return r;
            }
            m->gat.goff = off;
        }
        zero__issue_gather(ctx, mi);
    }
    m->gat.prefetched = m->gat.kept = 0;
    if (m->gat.gticket) {
        double t0 = ctx->sched.active ? zero__now_ms() : 0, tt = zero__trace_t0(ctx);
        r = zero__wait(ctx, m->gat.gticket);
        zero__trace_add(ctx, ZERO__TRACK_COMPUTE, "fetch wait", m->name, tt);
        if (ctx->sched.active) ctx->sched.wait_ms += zero__now_ms() - t0;
        if (r != ZERO_OK) { zero__drop(ctx, mi); return r; }
        m->gat.gticket = 0;
    }
    m->gat.fetched = 1;
    if (!m->gat.persistent) ctx->sched.inuse_bytes += b;
    zero__prefetch(ctx);
    return ZERO_OK;
}

/* zero_release of one fetched module; the caller issues the prefetch after it (once for
   a module and the owners of its tied params, released together) */
static zero_result zero__release(zero_ctx *ctx, int mi) {
    zero__module_rec *m = &ctx->modules[mi];
    zero_result r;
    if (--m->gat.fetched > 0 || ctx->desc.stage < 3) return ZERO_OK;
    if (!m->gat.persistent) ctx->sched.inuse_bytes -= zero__gbytes(&ctx->desc, m->lay.span);
    if (m->gat.persistent) {
        /* stays gathered until the step changes the parameters */
    } else if (ctx->desc.reuse_distance > 0 && zero__reused_soon(ctx, mi, ctx->desc.reuse_distance)) {
        m->gat.kept = 1;
    } else if ((r = zero__drop(ctx, mi)) != ZERO_OK) {
        return r;
    }
    return ZERO_OK;
}

/* zero_fetch of module mi: first the modules whose params it uses through ties, then mi;
   on failure the owners fetched so far are let go */
static zero_result zero__fetch_tied(zero_ctx *ctx, int mi) {
    zero_result r = ZERO_OK;
    int i, k;
    for (i = 0; i < ctx->num_ties; i++) {
        int o = zero__tie_owner(ctx, mi, i);
        if (o >= 0 && (r = zero__fetch(ctx, o)) != ZERO_OK) break;
    }
    if (r == ZERO_OK) r = zero__fetch(ctx, mi);
    if (r != ZERO_OK)
        for (k = i - 1; k >= 0; k--) {
            int o = zero__tie_owner(ctx, mi, k);
            if (o >= 0) (void)zero__release(ctx, o);
        }
    return r;
}
/* zero_release of module mi, then of the owners of its tied params; the prefetch goes on */
static zero_result zero__release_tied(zero_ctx *ctx, int mi) {
    zero_result r, r2;
    int i;
    if (ctx->modules[mi].gat.fetched == 0)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_release('%s'): the module is not fetched", ctx->modules[mi].name);
    r = zero__release(ctx, mi);
    for (i = ctx->num_ties - 1; i >= 0; i--) {
        int o = zero__tie_owner(ctx, mi, i);
        if (o >= 0 && ctx->modules[o].gat.fetched > 0 && (r2 = zero__release(ctx, o)) != ZERO_OK && r == ZERO_OK) r = r2;
    }
    zero__prefetch(ctx);
    return r;
}
/* zero_param_data of param pi: in the params arena (stages 0-2) or its module's gathered span */
static void *zero__param_data(zero_ctx *ctx, int pi) {
    const zero__param_rec *pr;
    const zero__module_rec *m;
    int pdt;
    pr = &ctx->params[pi];
    m = &ctx->modules[pr->module];
    pdt = (int)ctx->desc.param_dtype;
    if (ctx->arena.fparam) return zero__at(ctx->arena.fparam, pr->out_offset, pdt);
    if (ctx->desc.stage < 3) return zero__at(ctx->arena.param, m->lay.param_off + pr->offset, pdt);
    if (!m->gat.fetched) {
        zero__fail(ctx, ZERO_ERR_NOT_FETCHED, ZERO_LOGITEM_NOT_FETCHED,
                   "zero_param_data('%s.%s'): stage 3 needs zero_fetch('%s') first", m->name, pr->name, m->name);
        return NULL;
    }
    return zero__at(zero__gather_base(ctx, m), pr->offset, pdt);
}

/* zero_trace_save: every rank's events gathered to rank 0, which writes them; every rank
   returns rank 0's result */
static zero_result zero__trace_save(zero_ctx *ctx, const char *path) {
    const zero_allocator *a;
    int64_t mine, stride = 0, *counts = NULL, res = 0, *all_res = NULL, bytes;
    zero__trace_event *send = NULL, *all = NULL;
    zero_result r;
    int i, N;
    a = &ctx->desc.allocator;
    N = ctx->world;
    if ((r = zero__drain(ctx)) != ZERO_OK) return r;
    /* events the comm stream adds from here on (this call's own gathers) are not saved */
    mine = __atomic_load_n(&ctx->trace->count, __ATOMIC_RELAXED);
    if (mine > ctx->trace->cap) mine = ctx->trace->cap;
    counts = (int64_t *)zero__raw_alloc(a, sizeof(int64_t) * 2 * (size_t)N);
    if (!counts) return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_trace_save: out of memory");
    all_res = counts + N;
    r = zero__wait(ctx, zero__post_allgather(ctx, &mine, counts, 8));
    for (i = 0; r == ZERO_OK && i < N; i++) if (counts[i] > stride) stride = counts[i];
    if (stride < 1) stride = 1;
    bytes = stride * (int64_t)sizeof(zero__trace_event);
    if (r == ZERO_OK) {
        send = (zero__trace_event *)zero__raw_alloc(a, (size_t)bytes);
        all = (zero__trace_event *)zero__raw_alloc(a, (size_t)bytes * (size_t)N);
        res = send && all ? 0 : ZERO_ERR_OUT_OF_MEMORY;
        /* agree on the allocation before moving stride * N events */
        r = zero__wait(ctx, zero__post_allgather(ctx, &res, all_res, 8));
        for (i = 0; r == ZERO_OK && i < N; i++)
            if (all_res[i] != 0) r = zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                                               "zero_trace_save: rank %d cannot allocate the event buffers", i);
    }
    if (r == ZERO_OK) {
        memset(send, 0, (size_t)bytes);
        memcpy(send, ctx->trace->ev, (size_t)mine * sizeof(zero__trace_event));
        r = zero__wait(ctx, zero__post_allgather(ctx, send, all, bytes));
    }
    if (r == ZERO_OK) {
        res = ctx->rank == 0 && !zero__trace_write(path, all, counts, stride, N) ? ZERO_ERR_IO : 0;
        /* every rank returns rank 0's result */
        r = zero__wait(ctx, zero__post_allgather(ctx, &res, all_res, 8));
        if (r == ZERO_OK && all_res[0] != 0)
            r = zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_TRACE, "zero_trace_save: cannot write '%s'", path);
    }
    zero__raw_free(a, send);
    zero__raw_free(a, all);
    zero__raw_free(a, counts);
    return r;
}

/* >>grads: staging area, buckets --------------------------------------------------------
   In stages 2-3 (and 0-1 with a wider accumulator) the user's gradient buffers come
   from a ring. Records are allocated in order and retired in order once the reduce
   task that read them is done (its ticket), so the ring needs no lock. */
/* where a record goes depends on the records before it only, never on which of them are
   retired yet (an empty ring too starts at head), so every rank lays the ring out alike */
static int zero__staging_fit(zero_ctx *ctx, int64_t bytes, int64_t *off) {
    int64_t head = ctx->grads.head, cap = ctx->grads.ring_bytes, tail;
    if (ctx->grads.rec_count == 0) { *off = cap - head >= bytes ? head : 0; return bytes <= cap; }
    tail = ctx->grads.recs[ctx->grads.rec_head].off;
    if (head > tail) {
        if (cap - head >= bytes) { *off = head; return 1; }
        if (tail >= bytes) { *off = 0; return 1; }
        return 0;
    }
    if (tail - head >= bytes) { *off = head; return 1; }
    return 0;
}

static void zero__flush(zero_ctx *ctx) {
    int i;
    for (i = 0; i < ctx->grads.bucket_len; i++) {
        const zero__bucket_item *b = &ctx->grads.bucket[i];
        int mi = b->mod, rec = b->rec;
        int64_t off = rec >= 0 ? ctx->grads.recs[rec].off : b->own ? ctx->grads.ring_bytes + ctx->modules[mi].grad.shared_off : 0;
        uint64_t t = zero__post_reduce(ctx, mi, b->micro, off);
        if (rec >= 0) ctx->grads.recs[rec].ticket = t;
        if (b->own) ctx->modules[mi].grad.shared_ticket = t;
    }
    ctx->grads.bucket_len = 0;
    ctx->grads.bucket_fill = 0;
}

static int zero__staging_alloc(zero_ctx *ctx, int64_t bytes, zero_result *res) {
    int64_t off = 0;
    for (;;) {
        while (ctx->grads.rec_count > 0 && ctx->grads.recs[ctx->grads.rec_head].ticket &&
               zero__ticket_done(ctx, ctx->grads.recs[ctx->grads.rec_head].ticket)) {
            ctx->grads.inuse -= ctx->grads.recs[ctx->grads.rec_head].bytes;
            ctx->grads.rec_head = (ctx->grads.rec_head + 1) % ctx->grads.rec_cap;
            ctx->grads.rec_count--;
        }
        if (ctx->grads.rec_count < ctx->grads.rec_cap && zero__staging_fit(ctx, bytes, &off)) {
            int idx = (ctx->grads.rec_head + ctx->grads.rec_count) % ctx->grads.rec_cap;
            ctx->grads.recs[idx].off = off;
            ctx->grads.recs[idx].bytes = bytes;
            ctx->grads.recs[idx].ticket = 0;
            ctx->grads.rec_count++;
            ctx->grads.head = off + bytes;
            ctx->grads.inuse += bytes;
            if (ctx->grads.inuse > ctx->grads.peak) ctx->grads.peak = ctx->grads.inuse;
            if ((*res = ctx->dev->fill0(ctx, ZERO__S_COMPUTE, ctx->grads.ring + off, bytes)) != ZERO_OK) return -2;
            return idx;
        }
        /* full: wait for the reductions in flight first, and flush the queued bucket only
           when none is left. Whether a reduction is done yet differs between ranks, so a
           flush decided by it would queue the reduce tasks at a different place among a
           stage-3 prefetch's gathers on each rank: the collectives would not match */
        if (ctx->grads.rec_count > 0 && ctx->grads.recs[ctx->grads.rec_head].ticket) {
            if ((*res = zero__wait(ctx, ctx->grads.recs[ctx->grads.rec_head].ticket)) != ZERO_OK) return -2;
            continue;
        }
        if (ctx->grads.bucket_len) { zero__flush(ctx); continue; }
        return -1;
    }
}

/* Opens module mi's gradient buffer for this micro-batch (once; later calls find it open):
   its byte offset in ctx->grads.ring, or -1 with *res set. A shared module's slot lies
   after the ring: it waits for the slot's previous reduction, never for other modules. */
static int64_t zero__open_staging(zero_ctx *ctx, int mi, zero_result *res) {
    zero__module_rec *m = &ctx->modules[mi];
    int64_t bytes = zero__align_up(m->lay.span * (int64_t)zero__dtype_size(ctx->desc.grad_dtype), ZERO__ALIGN), off;
    int idx;
    if (m->grad.open_rec >= 0) return ctx->grads.recs[m->grad.open_rec].off;
    if (m->grad.shared) {
        off = ctx->grads.ring_bytes + m->grad.shared_off;
        if (m->grad.open_own) return off;
        if (m->grad.shared_ticket) {         /* its last reduction reads the slot: let it finish */
            if (m->grad.shared_ticket == ZERO__QUEUED) zero__flush(ctx);     /* still in the open bucket */
            if ((*res = zero__wait(ctx, m->grad.shared_ticket)) != ZERO_OK) return -1;
            m->grad.shared_ticket = 0;
        }
        if ((*res = ctx->dev->fill0(ctx, ZERO__S_COMPUTE, ctx->grads.ring + off, bytes)) != ZERO_OK) return -1;
        m->grad.open_own = 1;
        return off;
    }
    idx = zero__staging_alloc(ctx, bytes, res);
    if (idx == -1) {
        /* the oldest open module blocks the ring: name it, and say what helps */
        int i, old = -1;
        for (i = 0; i < ctx->num_modules && ctx->grads.rec_count > 0; i++)
            if (ctx->modules[i].grad.open_rec == ctx->grads.rec_head) old = i;
        if (old >= 0 && old != mi && !ctx->modules[old].gat.fetched)
            *res = zero__fail(ctx, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_BUFFER_FULL,
                       "gradient staging (%lld bytes) is full: module '%s' was released with its gradients open and "
                       "without zero_grads_ready; if its gradient comes in several windows of a micro-batch (a tied "
                       "weight), register it with zero_module_desc.shared = 1 (or use zero_add_tied_param)",
                       (long long)ctx->grads.ring_bytes, ctx->modules[old].name);
        else
            *res = zero__fail(ctx, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_BUFFER_FULL,
                       "gradient staging (%lld bytes) is full of modules whose gradients are open; call zero_grads_ready "
                       "for a module before opening many others, or raise bucket_bytes", (long long)ctx->grads.ring_bytes);
    }
    if (idx < 0) return -1;
    m->grad.open_rec = idx;
    return ctx->grads.recs[idx].off;
}

/* desc.flat_layout at stages 0-1: module mi's gradients, summed by the caller in the flat
   view over the step's micro-batches, into its span of the grad arena, which the reduction
   reads (one copy per param on the compute stream, ordered before the reduction) */
static zero_result zero__flat_grads_in(zero_ctx *ctx, int mi) {
    int gdt = (int)ctx->desc.grad_dtype;
    int64_t off = ctx->modules[mi].lay.train_off;
    zero_result r;
    int i;
    for (i = 0; i < ctx->num_params; i++) {
        const zero__param_rec *pr = &ctx->params[i];
        if (pr->module == mi &&
            (r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, zero__at(ctx->arena.grad, off + pr->offset, gdt),
                                zero__at(ctx->arena.fgrad, pr->out_offset, gdt), pr->numel * (int64_t)zero__esize(gdt))) != ZERO_OK)
            return r;
    }
    return ZERO_OK;
}

/* Module mi's gradient of one more micro-batch is complete: into the bucket (stages 2-3,
   or the step's last micro-batch), flushed when full or when every module is in */
static zero_result zero__module_ready(zero_ctx *ctx, int mi) {
    zero__module_rec *m = &ctx->modules[mi];
    zero_result r = ZERO_OK;
    int rec = -1, own = 0;
    if (ctx->arena.fgrad && m->grad.ready + 1 == ctx->desc.accum_steps && (r = zero__flat_grads_in(ctx, mi)) != ZERO_OK)
        return r;
    if (ctx->lay.staging_mode) {
        /* a rank that wrote no gradient still takes part in the reduction, with zeros */
        if (zero__open_staging(ctx, mi, &r) < 0) return r;
        rec = m->grad.open_rec;
        own = m->grad.open_own;
        m->grad.open_rec = -1;
        m->grad.open_own = 0;
        if (own) m->grad.shared_ticket = ZERO__QUEUED;  /* zero__flush gives the ticket */
    }
    m->grad.ready++;
    ctx->grads.total_ready++;
    if (ctx->lay.staging_mode || m->grad.ready == ctx->desc.accum_steps) {
        if (ctx->grads.bucket_len == ctx->num_modules) zero__flush(ctx);
        ctx->grads.bucket[ctx->grads.bucket_len].mod = mi;
        ctx->grads.bucket[ctx->grads.bucket_len].micro = m->grad.ready;
        ctx->grads.bucket[ctx->grads.bucket_len].rec = rec;
        ctx->grads.bucket[ctx->grads.bucket_len].own = own;
        ctx->grads.bucket_len++;
        ctx->grads.bucket_fill += m->lay.span * (int64_t)zero__dtype_size(ctx->desc.grad_dtype);
    }
    if (ctx->grads.bucket_fill >= ctx->desc.bucket_bytes || ctx->grads.total_ready % ctx->lay.num_trainable == 0) zero__flush(ctx);
    return ZERO_OK;
}

/* module mi uses a tied param of another trainable module */
static int zero__uses_ties(const zero_ctx *ctx, int mi) {
    int i;
    for (i = 0; i < ctx->num_ties; i++) {
        int o = ctx->params[ctx->ties[i].target].module;
        if (ctx->ties[i].module == mi && o != mi && !ctx->modules[o].frozen) return 1;
    }
    return 0;
}

/* the micro-batches whose gradient of module o is complete: its own zero_grads_ready
   calls, and as many of every module that uses its params (zero_add_tied_param) */
static int zero__tie_complete(const zero_ctx *ctx, int o) {
    int n = ctx->modules[o].grad.calls, i;
    if (!ctx->modules[o].grad.tie_users) return n;
    for (i = 0; i < ctx->num_ties; i++) {
        int u = ctx->ties[i].module;
        if (u != o && ctx->params[ctx->ties[i].target].module == o && ctx->modules[u].grad.calls < n) n = ctx->modules[u].grad.calls;
    }
    return n;
}

/* zero_grads_ready(mi) after its checks: mi's own reduction, and that of every module
   whose tied params mi uses once all their users are in */
static zero_result zero__grads_ready(zero_ctx *ctx, int mi) {
    zero_result r;
    int i;
    ctx->modules[mi].grad.calls++;
    for (i = -1; i < ctx->num_ties; i++) {
        int o = i < 0 ? mi : ctx->params[ctx->ties[i].target].module;
        if (i >= 0 && (ctx->ties[i].module != mi || o == mi)) continue;
        if (ctx->modules[o].frozen) continue;
        while (ctx->modules[o].grad.ready < zero__tie_complete(ctx, o))
            if ((r = zero__module_ready(ctx, o)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

/* zero_param_grad of param pi: where this micro-batch's gradient is written */
static void *zero__param_grad(zero_ctx *ctx, int pi) {
    const zero__param_rec *pr;
    const zero__module_rec *m;
    zero_result r;
    int64_t off;
    pr = &ctx->params[pi];
    m = &ctx->modules[pr->module];
    if (m->frozen) {
        zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_FROZEN_GRAD,
                   "zero_param_grad('%s.%s'): module '%s' is frozen and has no gradients", m->name, pr->name, m->name);
        return NULL;
    }
    if (m->grad.ready >= ctx->desc.accum_steps) {
        zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                   "zero_param_grad('%s.%s'): all %d micro-batches of module '%s' are already reduced; call zero_step (zero_grad_shard_f32 and zero_grad_gather_f32 read the reduced gradient)",
                   m->name, pr->name, ctx->desc.accum_steps, m->name);
        return NULL;
    }
    if (ctx->arena.fgrad) return zero__at(ctx->arena.fgrad, pr->out_offset, (int)ctx->desc.grad_dtype);
    if (!ctx->lay.staging_mode) return zero__at(ctx->arena.grad, m->lay.train_off + pr->offset, (int)ctx->desc.grad_dtype);
    if ((off = zero__open_staging(ctx, pr->module, &r)) < 0) return NULL;
    return ctx->grads.ring + off + pr->offset * (int64_t)zero__dtype_size(ctx->desc.grad_dtype);
}
/* zero_grads_ready of module mi, checked against the micro-batches of this step */
static zero_result zero__module_grads_ready(zero_ctx *ctx, int mi) {
    zero__module_rec *m = &ctx->modules[mi];
    if (m->frozen && !zero__uses_ties(ctx, mi)) return ZERO_OK;
    if (m->grad.calls >= ctx->desc.accum_steps)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_grads_ready('%s'): called more than accum_steps=%d times before zero_step",
                          m->name, ctx->desc.accum_steps);
    return zero__grads_ready(ctx, mi);
}

/* >>optim ------------------------------------------------------------------------------
   zero_step: the step's end (gradients cleared for the next one) and its body. */
static void zero__end_step(zero_ctx *ctx) {
    int64_t fg = ctx->arena.fgrad ? ctx->lay.plan.numel * (int64_t)zero__esize((int)ctx->desc.grad_dtype) : 0;
    int i;
    /* an error here shows at the next sync; the CPU pass may have cleared them already (not
       the flat view's, which the user adds into) */
    if (ctx->desc.stage < 2 && !ctx->lay.staging_mode && !ctx->opt.grads_cleared)
        (void)ctx->dev->fill0(ctx, ZERO__S_COMPUTE, ctx->arena.grad, zero__pcat(ctx->lay.plan.bytes, ZERO_CAT_GRADS) - fg);
    if (fg) (void)ctx->dev->fill0(ctx, ZERO__S_COMPUTE, ctx->arena.fgrad, fg);
    ctx->opt.grads_cleared = 0;
    for (i = 0; i < ctx->num_modules; i++) ctx->modules[i].grad.ready = ctx->modules[i].grad.calls = ctx->modules[i].norm.taken = 0;
    ctx->grads.total_ready = 0;
}

/* desc.flat_layout: params [lo, hi) from the param arena into the flat view, those of
   frozen modules too unless trainable_only (after a step, which changes none of them) */
static zero_result zero__flat_params_out(zero_ctx *ctx, int lo, int hi, int trainable_only) {
    int pdt = (int)ctx->desc.param_dtype;
    zero_result r;
    int i;
    for (i = lo; ctx->arena.fparam && i < hi; i++) {
        const zero__param_rec *pr = &ctx->params[i];
        const zero__module_rec *m = &ctx->modules[pr->module];
        if (trainable_only && m->frozen) continue;
        if ((r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, zero__at(ctx->arena.fparam, pr->out_offset, pdt),
                                zero__at(ctx->arena.param, m->lay.param_off + pr->offset, pdt),
                                pr->numel * (int64_t)zero__esize(pdt))) != ZERO_OK)
            return r;
    }
    return ZERO_OK;
}

/* zero_create: the loss scale: the user's static one, dynamic with f16 anywhere, else 1 */
static void zero__opt_init_scale(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    if (d->loss_scale > 0) {
        ctx->opt.loss_scale = d->loss_scale;
    } else if (d->param_dtype == ZERO_F16 || d->grad_dtype == ZERO_F16 || d->grad_accum_dtype == ZERO_F16) {
        ctx->opt.loss_scale = d->loss_scale_init;
        ctx->opt.dynamic_scale = 1;
    } else {
        ctx->opt.loss_scale = 1.0f;
    }
}

/* every trainable module has had its zero_grads_ready calls (and stage 3: is released) */
static zero_result zero__step_ready(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    int i;
    for (i = 0; i < ctx->num_modules; i++) {
        const zero__module_rec *m = &ctx->modules[i];
        if (!m->frozen && m->grad.calls != d->accum_steps)
            return zero__fail(ctx, ZERO_ERR_GRADS_NOT_READY, ZERO_LOGITEM_GRADS_NOT_READY,
                              "zero_step: module '%s' has had %d of %d zero_grads_ready calls this step",
                              m->name, m->grad.calls, d->accum_steps);
        if (!m->frozen && m->grad.ready != d->accum_steps)
            return zero__fail(ctx, ZERO_ERR_GRADS_NOT_READY, ZERO_LOGITEM_GRADS_NOT_READY,
                              "zero_step: module '%s' has tied params whose users have not all called "
                              "zero_grads_ready %d times this step (its gradient is complete when they have)",
                              m->name, d->accum_steps);
        if (d->stage == 3 && m->gat.fetched)
            return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_STILL_FETCHED,
                              "zero_step: module '%s' is still fetched; release it before the step", m->name);
    }
    return ZERO_OK;
}

/* the sum of squares of every rank's gradient slice, summed from 0.0 in rank order: one
   rank adds its own; more add theirs in the all-reduce (stage 0 too, whose ranks all hold
   every slice: reading one slice each costs one tiny collective instead of N slices each).
   With hpz the param setters' calls ride along: every rank must have made as many. */
static zero_result zero__grad_sumsq_all(zero_ctx *ctx, double *total) {
    double v[2];
    zero_result r;
    if (ctx->world == 1) {
        if ((r = ctx->dev->grad_sumsq(ctx, 0, &v[0])) != ZERO_OK) return r;
        *total += v[0];
        return ZERO_OK;
    }
    v[1] = (double)ctx->zpp.sets;
    if ((r = ctx->dev->grad_sumsq(ctx, ctx->prank, &v[0])) != ZERO_OK) return r;
    if ((r = zero__wait(ctx, zero__post_allreduce_f64(ctx, v, ctx->desc.hpz ? 2 : 1))) != ZERO_OK)
        return r;
    *total = v[0];
    if (ctx->desc.hpz && v[1] != (double)ctx->zpp.sets * ctx->world)
        return zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_step: this rank called the param setters (zero_param_set_f32 and those built on "
                          "it) %lld times since the last step, and the ranks %g times together; with hpz the "
                          "setters are collective: call them on every rank, for the same params",
                          (long long)ctx->zpp.sets, v[1]);
    ctx->zpp.sets = 0;
    return ZERO_OK;
}

/* non-finite gradients: the step is skipped on every rank, the (dynamic) loss scale halved */
static zero_result zero__step_skip(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    float old = ctx->opt.loss_scale;
    zero__end_step(ctx);
    ctx->opt.skipped++;
    ctx->opt.micro += (int64_t)ctx->world * d->accum_steps;
    if (ctx->opt.dynamic_scale) {
        ctx->opt.loss_scale = old * 0.5f < d->loss_scale_min ? d->loss_scale_min : old * 0.5f;
        ctx->opt.good_steps = 0;
    }
    if (d->stage == 3) zero__stage3_step_start(ctx);
    /* not an error: a warning, and the last error stays what it was */
    zero__log(ctx, ZERO_LOG_WARN, ZERO_LOGITEM_STEP_SKIPPED,
              "zero_step: non-finite gradients at step %lld: step skipped on every rank, loss scale %g -> %g",
              (long long)ctx->opt.steps, (double)old, (double)ctx->opt.loss_scale);
    return ZERO_STEP_SKIPPED;
}

/* the tier's fused pass with the gradients multiplied by gscale, then (stages 1-2) the
   params gathered back */
static zero_result zero__step_apply(zero_ctx *ctx, float gscale) {
    const zero_desc *d = &ctx->desc;
    double t0 = zero__trace_t0(ctx);
    zero_result r;
    int i;
    for (i = 0; i < ctx->num_modules; i++)      /* hpz: the pass changes the trainable params */
        if (!ctx->modules[i].frozen) ctx->modules[i].zpp.sec_fresh = 0;
    ctx->opt.grads_cleared = 0;     /* the CPU device's pass sets it */
    if ((r = ctx->tier.vt->step(ctx, gscale)) != ZERO_OK) {
        if (d->stage == 3) zero__stage3_step_start(ctx);   /* next step's gathers, as after a skipped step */
        return r;
    }
    zero__trace_add(ctx, ZERO__TRACK_OPTIM, "optimizer", NULL, t0);
    if (d->stage == 1 || d->stage == 2) {
        for (i = 0; i < ctx->num_modules; i++)
            if (!ctx->modules[i].frozen) zero__post_gather_params(ctx, i);
        if ((r = zero__drain(ctx)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

/* zero_step on a built context: wait for the reductions, the gradient norm (with the
   non-finite flag) in one all-reduce, loss scale and clipping inside the tier's fused
   pass, then (stages 1-2) the params gathered back */
static zero_result zero__step(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    zero_result r;
    double total = 0.0, inv, norm, clip = 1.0;
    if ((r = zero__step_ready(ctx)) != ZERO_OK) return r;
    zero__flush(ctx);
    if ((r = zero__drain(ctx)) != ZERO_OK) return r;
    if (d->stage == 3) {
        if (!ctx->sched.active && (r = zero__schedule_check(ctx)) != ZERO_OK) return r;
        if ((r = zero__stage3_step_end(ctx)) != ZERO_OK) return r;
    }
    if ((r = zero__grad_sumsq_all(ctx, &total)) != ZERO_OK) return r;
    inv = 1.0 / ((double)ctx->world * d->accum_steps * (double)ctx->opt.loss_scale);
    norm = sqrt(total) * inv;
    ctx->opt.grad_norm = norm;
    if (!zero__finite64(norm)) return zero__step_skip(ctx);   /* a non-finite element makes the sum non-finite */
    if (d->clip_norm > 0 && norm > (double)d->clip_norm) clip = (double)d->clip_norm / (norm + 1e-6);
    if ((r = zero__step_apply(ctx, (float)(inv * clip))) != ZERO_OK) return r;
    if ((r = zero__flat_params_out(ctx, 0, ctx->num_params, 1)) != ZERO_OK) return r;
    zero__end_step(ctx);
    if (d->stage == 3) zero__stage3_step_start(ctx);
    ctx->opt.steps++;
    ctx->opt.micro += (int64_t)ctx->world * d->accum_steps;
    if (ctx->opt.dynamic_scale && ++ctx->opt.good_steps >= d->loss_scale_window) {
        ctx->opt.loss_scale *= 2.0f;
        ctx->opt.good_steps = 0;
        zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_LOSS_SCALE_GROWN, "loss scale grown to %g", (double)ctx->opt.loss_scale);
    }
    return ZERO_OK;
}

/* ---- the reduced gradient, read (zero_grad_shard_f32, zero_grad_gather_f32) ---------------- */
/* Every trainable module has every micro-batch's gradient of this step (what zero_step
   needs), so its last zero_grads_ready posted every reduction: waiting for them (the comm
   stream drained) posts no collective, and one rank may read alone. */
static zero_result zero__grad_read_ready(zero_ctx *ctx, int pi, const char *fn) {
    const zero__module_rec *p = &ctx->modules[ctx->params[pi].module];
    int i;
    if (p->frozen)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE, "%s('%s.%s'): module '%s' is frozen: no gradient",
                          fn, p->name, ctx->params[pi].name, p->name);
    for (i = 0; i < ctx->num_modules; i++) {
        const zero__module_rec *m = &ctx->modules[i];
        if (!m->frozen && m->grad.ready != ctx->desc.accum_steps)
            return zero__fail(ctx, ZERO_ERR_GRADS_NOT_READY, ZERO_LOGITEM_GRADS_NOT_READY,
                              "%s('%s.%s'): module '%s' has %d of %d micro-batches' gradients this step; the reduced "
                              "gradient is read between the step's last zero_grads_ready (of every module) and zero_step",
                              fn, p->name, ctx->params[pi].name, m->name, m->grad.ready, ctx->desc.accum_steps);
    }
    if (ctx->grads.bucket_len)          /* (the last ready flushed it; nothing to post here) */
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE, "%s: reductions still queued", fn);
    return zero__drain(ctx);
}
/* the part of param pi in slice q of its module (stage 0: all of it), as param elements
   [*b, *e), and where slice q's gradient of it starts in the grad arena */
static int64_t zero__grad_slice(const zero_ctx *ctx, int pi, int q, int64_t *b, int64_t *e) {
    const zero__param_rec *p = &ctx->params[pi];
    const zero__module_rec *m = &ctx->modules[p->module];
    int64_t lo, s, en;
    zero__param_region_of(ctx, p, q, &lo, &s, &en);
    *b = s - p->offset;
    *e = en > s ? en - p->offset : *b;
    return ctx->desc.stage < 2 ? m->lay.train_off + s : m->lay.train_off / ctx->world + (s - lo);    /* as segments' */
}
/* this rank's slice of the averaged reduced gradient: the sum divided by world x accum x the
   loss scale, in fp32, as zero_step's optimizer multiplies it (before clipping) */
static zero_result zero__grad_shard_f32(zero_ctx *ctx, int pi, float *out, int64_t *b, int64_t *e) {
    float inv = (float)(1.0 / ((double)ctx->world * ctx->desc.accum_steps * (double)ctx->opt.loss_scale));
    int64_t at = zero__grad_slice(ctx, pi, ctx->prank, b, e), i;
    zero_result r;
    if (*e > *b &&
        (r = zero__dev_get_f32(ctx, out, zero__at(ctx->arena.grad, at, (int)ctx->desc.grad_accum_dtype),
                               (int)ctx->desc.grad_accum_dtype, *e - *b)) != ZERO_OK)
        return r;
    for (i = 0; i < *e - *b; i++) out[i] *= inv;
    return ZERO_OK;
}
/* every rank's slice into out[numel]: one all-gather of a module slice per rank (stage 0:
   every rank has it all; no collective, but every rank must still call) */
static zero_result zero__grad_gather_f32(zero_ctx *ctx, int pi, float *out) {
    const zero__param_rec *p = &ctx->params[pi];
    int64_t per = ctx->modules[p->module].lay.span / ctx->world, b, e;
    float *mine, *all;
    zero_result r, rw;
    int k;
    if (ctx->desc.stage == 0 || ctx->world == 1) return zero__grad_shard_f32(ctx, pi, out, &b, &e);
    mine = (float *)zero__raw_alloc(&ctx->desc.allocator, sizeof(float) * (size_t)per * (size_t)(ctx->world + 1));
    if (!mine) return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_grad_gather_f32: out of memory");
    all = mine + per;
    memset(mine, 0, sizeof(float) * (size_t)per);
    r = zero__grad_shard_f32(ctx, pi, mine, &b, &e);
    /* every rank takes part in the all-gather, one whose read failed too: it fails after it */
    rw = zero__wait(ctx, zero__post_allgather(ctx, mine, all, per * 4));
    if (r == ZERO_OK) r = rw;
    for (k = 0; r == ZERO_OK && k < ctx->world; k++) {
        zero__grad_slice(ctx, pi, zero__part(ctx, k), &b, &e);
        if (e > b) memcpy(out + b, all + (int64_t)k * per, sizeof(float) * (size_t)(e - b));
    }
    zero__raw_free(&ctx->desc.allocator, mine);
    return r;
}

/* ---- params in and out (zero_param_set_f32, zero_gather_params_f32, zero_set_params_f32) ---- */
/* param pi's values from fp32: into the params (stages 0-2: the full copy; stage 3: this
   rank's shard, or the tier's) and the fp32 master where there is one */
static zero_result zero__param_set_f32(zero_ctx *ctx, int pi, const float *values) {
    const zero__param_rec *pr;
    const zero__module_rec *m;
    zero_result r = ZERO_OK;
    int pdt;
    int64_t lo, s, e;
    pr = &ctx->params[pi];
    m = &ctx->modules[pr->module];
    pdt = (int)ctx->desc.param_dtype;
    /* stage 3: a copy gathered ahead of the next fetch (or still being gathered from the
       shard) would be stale; wait for it and drop it, so the next fetch gathers anew */
    if (ctx->desc.stage == 3 && m->gat.live && !m->gat.fetched && (r = zero__drop(ctx, pr->module)) != ZERO_OK) return r;
    ctx->modules[pr->module].zpp.sec_fresh = 0;   /* hpz: its chunk of the secondary partition is stale */
    ctx->zpp.sets++;
    zero__param_region(ctx, pr, &lo, &s, &e);
    if (ctx->desc.stage < 3) {
        r = zero__dev_put_f32(ctx, zero__at(ctx->arena.param, m->lay.param_off + pr->offset, pdt), pdt, values, pr->numel);
        if (r == ZERO_OK) r = zero__flat_params_out(ctx, pi, pi + 1, 0);
    } else if (ctx->tier.vt->holds_params(ctx) && !m->frozen && s < e)
        r = ctx->tier.vt->write(ctx, ZERO__TIER_PARAMS, zero__state_index(ctx, m, s, lo), e - s, values + (s - pr->offset),
                                "zero_param_set_f32");
    else if (s < e)
        r = zero__dev_put_f32(ctx, zero__at(ctx->arena.param, zero__pshard(ctx, pr->module) + (s - lo), pdt), pdt,
                              values + (s - pr->offset), e - s);
    if (r != ZERO_OK) return r;
    if (ctx->tier.vt->has_master(ctx) && !m->frozen && s < e)
        return ctx->tier.vt->write(ctx, 0, zero__state_index(ctx, m, s, lo), e - s, values + (s - pr->offset),
                                   "zero_param_set_f32");
    return ZERO_OK;
}
/* every param's values, as fp32, in registration order (the master where there is one) */
/* module mi's fp32 values are all on this rank (stage 0; stages 1-2 where the params are the
   fp32 copy): read, not gathered */
static int zero__module_f32_local(const zero_ctx *ctx, int mi) {
    const zero_desc *d = &ctx->desc;
    return d->stage == 0 || (d->stage < 3 && (ctx->modules[mi].frozen || !ctx->tier.vt->has_master(ctx)));
}
/* module by module, each module's params in fp32 into a host buffer of one module's span
   (and a device one where its values are sharded), then fn(user, param index, values) on
   rank root (every rank when root < 0); every rank takes part in the gathers */
typedef void (*zero__param_visit)(void *user, zero_ctx *ctx, int pi, const float *values);
static zero_result zero__gather_params_each(zero_ctx *ctx, int root, zero__param_visit fn, void *user, const char *who) {
    const zero_desc *d = &ctx->desc;
    const zero_allocator *a = &d->allocator;
    float *tmp = NULL, *h = (float *)zero__raw_alloc(a, (size_t)ctx->lay.max_span * 4 + 4);
    zero_result r = ZERO_OK, rl = ZERO_OK;
    int i, j, pdt = (int)d->param_dtype, mine = root < 0 || root == ctx->rank, sharded = 0;
    double ok;
    for (i = 0; i < ctx->num_modules; i++)          /* the same on every rank: stage, tier, frozen */
        sharded |= !zero__module_f32_local(ctx, i);
    /* (a transient device buffer, outside the plan, as zero_gather_params_f32's always was; a
       device whose memory is the host's gathers into h itself) */
    tmp = !sharded || !h ? NULL : ctx->dev->host_access ? h : (float *)ctx->dev->alloc(ctx, ctx->lay.max_span * 4);
    ok = h && (!sharded || tmp) ? 1.0 : 0.0;
    /* with gathers ahead, the ranks first agree that each has its buffers (the count of those
       that do): one that lacks them must not leave the others waiting in a gather */
    if (sharded && ctx->world > 1) r = zero__wait(ctx, zero__post_allreduce_f64(ctx, &ok, 1));
    if (r == ZERO_OK && ok < (sharded && ctx->world > 1 ? (double)ctx->world : 1.0))
        r = zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "%s: out of memory%s", who,
                       h && (!sharded || tmp) ? " on another rank" : "");
    for (i = 0; r == ZERO_OK && i < ctx->num_modules; i++) {
        const zero__module_rec *m = &ctx->modules[i];
        int local = zero__module_f32_local(ctx, i);
        if (!local && (r = zero__wait(ctx, zero__post_gather_master(ctx, i, tmp))) != ZERO_OK) break;
        /* a read that fails here is this rank's alone: it stops reading and calling fn, and
           takes part in the remaining gathers, so no rank is left waiting */
        for (j = 0; rl == ZERO_OK && mine && j < ctx->num_params; j++) {
            const zero__param_rec *pr = &ctx->params[j];
            if (pr->module != i) continue;
            if (!local) rl = tmp == h ? ZERO_OK : zero__dev_get_f32(ctx, h + pr->offset, tmp + pr->offset, ZERO_F32, pr->numel);
            else if (ctx->tier.vt->has_master(ctx) && !m->frozen)
                rl = ctx->tier.vt->read(ctx, 0, m->lay.train_off + pr->offset, pr->numel, h + pr->offset, who);
            else
                rl = zero__dev_get_f32(ctx, h + pr->offset, zero__at(ctx->arena.param, m->lay.param_off + pr->offset, pdt),
                                       pdt, pr->numel);
            if (rl == ZERO_OK) fn(user, ctx, j, h + pr->offset);
        }
    }
    if (tmp && tmp != h) ctx->dev->free(ctx, tmp);
    zero__raw_free(a, h);
    return r != ZERO_OK ? r : rl;
}
typedef struct zero__gather_user { zero_param_fn fn; void *user; float *out; } zero__gather_user;
static void zero__gather_to_user(void *u, zero_ctx *ctx, int pi, const float *values) {
    const zero__gather_user *g = (const zero__gather_user *)u;
    const zero__param_rec *pr = &ctx->params[pi];
    zero_param p;
    p.id = zero__handle(ctx, pi);
    g->fn(g->user, p, ctx->modules[pr->module].name, pr->name, values, pr->numel);
}
static void zero__gather_to_out(void *u, zero_ctx *ctx, int pi, const float *values) {
    const zero__gather_user *g = (const zero__gather_user *)u;
    memcpy(g->out + ctx->params[pi].out_offset, values, sizeof(float) * (size_t)ctx->params[pi].numel);
}

/* >>tiling -----------------------------------------------------------------------------
   Memory-centric tiling: one linear layer cut into tiles, each tile a module of its own,
   fetched, used and released in turn. */

static int zero__tiled_index(zero_ctx *ctx, zero_tiled_linear tl, const char *fn) {
    return zero__handle_index(ctx, tl.id, ctx ? ctx->num_tiled : 0, "tiled linear", fn);
}
static int64_t zero__tile_row0(const zero__tiled *t, int k) { return (int64_t)k * t->out / t->tiles; }

/* the index of tile k's weight (bias 0) or bias (1) param */
static int zero__tile_pi(const zero__tiled *t, int k, int bias) { return t->first_param + k * (1 + t->bias) + bias; }

/* fetch tile k and give its weights as fp32 (the gathered tile itself when params are f32) */
static const float *zero__tile_fetch(zero_ctx *ctx, const zero__tiled *t, int k, zero_result *r) {
    int64_t rows = zero__tile_row0(t, k + 1) - zero__tile_row0(t, k);
    const void *w;
    if ((*r = zero__fetch_tied(ctx, t->first_module + k)) != ZERO_OK) return NULL;
    w = zero__param_data(ctx, zero__tile_pi(t, k, 0));
    if (ctx->desc.param_dtype == ZERO_F32) return (const float *)w;
    if ((*r = ctx->dev->sum_into(ctx, ZERO__S_COMPUTE, ctx->tile.w, ZERO_F32, &w, 1, (int)ctx->desc.param_dtype, rows * t->in, 0))
        != ZERO_OK) return NULL;
    return ctx->tile.w;
}

/* tile k of t: its module, its weight rows and its bias slice */
static zero_result zero__tile_add(zero_ctx *ctx, const zero__tiled *t, const char *name, int k) {
    char mname[256];
    zero_module_desc md;
    zero_param_desc pd;
    zero_module m;
    zero_param p;
    zero_result r;
    memset(&md, 0, sizeof md);
    memset(&pd, 0, sizeof pd);
    snprintf(mname, sizeof mname, "%s.tile%d", name, k);
    md.name = mname;
    if ((r = zero__add_module(ctx, &md, &m)) != ZERO_OK) return r;
    pd.name = "w"; pd.ndim = 2;
    pd.shape[0] = zero__tile_row0(t, k + 1) - zero__tile_row0(t, k);
    pd.shape[1] = t->in;
    if ((r = zero__add_param(ctx, m, &pd, &p)) != ZERO_OK) return r;
    if (!t->bias) return ZERO_OK;
    pd.name = "b"; pd.ndim = 1; pd.shape[1] = 0; pd.no_decay = 1;
    return zero__add_param(ctx, m, &pd, &p);
}
/* zero_tiled_linear_add: the tiles as modules NAME.tileK with params w (and b), registered */
static zero_result zero__tiled_add(zero_ctx *ctx, const zero_tiled_linear_desc *desc, zero_tiled_linear *out) {
    zero__tiled rec;
    zero_result r;
    int64_t tiles, wbytes;
    int k;
    if (desc->in_features <= 0 || desc->out_features <= 0 || desc->tiles < 0 || desc->tile_bytes < 0 ||
        !zero__mul(desc->in_features, desc->out_features, &wbytes) || wbytes > ((int64_t)1 << 48))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_tiled_linear_add('%s'): in_features %lld, out_features %lld, tiles %d, tile_bytes %lld",
                          desc->name, (long long)desc->in_features, (long long)desc->out_features, desc->tiles,
                          (long long)desc->tile_bytes);
    wbytes *= (int64_t)zero__dtype_size(ctx->desc.param_dtype);
    tiles = desc->tiles ? desc->tiles : desc->tile_bytes ? (wbytes + desc->tile_bytes - 1) / desc->tile_bytes : 1;
    if (tiles > desc->out_features) tiles = desc->out_features;
    if (tiles > 0xffff)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_tiled_linear_add('%s'): %lld tiles; at most 65535", desc->name, (long long)tiles);
    if (!zero__grow(ctx, (void **)&ctx->tiled, &ctx->cap_tiled, ctx->num_tiled, sizeof rec))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_tiled_linear_add: out of memory");
    rec.first_module = ctx->num_modules;
    rec.first_param = ctx->num_params;
    rec.tiles = (int)tiles;
    rec.bias = desc->bias != 0;
    rec.in = desc->in_features;
    rec.out = desc->out_features;
    for (k = 0; k < rec.tiles; k++)
        if ((r = zero__tile_add(ctx, &rec, desc->name, k)) != ZERO_OK) return r;
    ctx->tiled[ctx->num_tiled] = rec;
    out->id = zero__handle(ctx, ctx->num_tiled++);
    return ZERO_OK;
}
static zero_result zero__tiled_set_f32(zero_ctx *ctx, const zero__tiled *t, const float *w, const float *b) {
    zero_result r;
    int k;
    for (k = 0; k < t->tiles; k++) {
        int64_t r0 = zero__tile_row0(t, k);
        if ((r = zero__param_set_f32(ctx, zero__tile_pi(t, k, 0), w + r0 * t->in)) != ZERO_OK) return r;
        if (t->bias && b && (r = zero__param_set_f32(ctx, zero__tile_pi(t, k, 1), b + r0)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}
/* y = x W^T (+ b), a tile at a time */
static zero_result zero__tiled_forward(zero_ctx *ctx, const zero__tiled *t, const float *x, int64_t rows, float *y) {
    zero_result r;
    int k;
    for (k = 0; k < t->tiles; k++) {
        int64_t r0 = zero__tile_row0(t, k), n = zero__tile_row0(t, k + 1) - r0;
        const float *w = zero__tile_fetch(ctx, t, k, &r);
        if (!w) return r;
        if ((r = ctx->dev->gemm(ctx, 0, 1, rows, n, t->in, x, t->in, w, t->in, 0, y + r0, t->out)) != ZERO_OK) return r;
        if (t->bias && (r = ctx->dev->bias_add(ctx, y + r0, t->out, zero__param_data(ctx, zero__tile_pi(t, k, 1)),
                                               (int)ctx->desc.param_dtype, rows, n)) != ZERO_OK)
            return r;
        if ((r = zero__release_tied(ctx, t->first_module + k)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}
/* dx = dy W, and the tiles' gradients; tiles in forward order, so dx sums over the output
   features in order (see ON TILING) */
static zero_result zero__tiled_backward(zero_ctx *ctx, const zero__tiled *t, const float *x, const float *dy, int64_t rows,
                                        float *dx) {
    zero_result r;
    int k;
    for (k = 0; k < t->tiles; k++) {
        int64_t r0 = zero__tile_row0(t, k), n = zero__tile_row0(t, k + 1) - r0;
        int gdt = (int)ctx->desc.grad_dtype;
        const void *tg = ctx->tile.g;
        const float *w = zero__tile_fetch(ctx, t, k, &r);
        void *gw, *gb = NULL;
        if (!w) return r;
        if (!(gw = zero__param_grad(ctx, zero__tile_pi(t, k, 0)))) return ZERO_ERR_STATE;
        if (t->bias && !(gb = zero__param_grad(ctx, zero__tile_pi(t, k, 1)))) return ZERO_ERR_STATE;
        if (dx && (r = ctx->dev->gemm(ctx, 0, 0, rows, t->in, n, dy + r0, t->out, w, t->in, k > 0, dx, t->in)) != ZERO_OK)
            return r;
        if ((r = ctx->dev->gemm(ctx, 1, 0, n, t->in, rows, dy + r0, t->out, x, t->in, 0, ctx->tile.g, t->in)) != ZERO_OK ||
            (r = ctx->dev->sum_into(ctx, ZERO__S_COMPUTE, gw, gdt, &tg, 1, ZERO_F32, n * t->in, 1)) != ZERO_OK)
            return r;
        if (gb && (r = ctx->dev->bias_grad(ctx, gb, gdt, dy + r0, t->out, rows, n)) != ZERO_OK) return r;
        if ((r = zero__release_tied(ctx, t->first_module + k)) != ZERO_OK) return r;
        if ((r = zero__module_grads_ready(ctx, t->first_module + k)) != ZERO_OK) return r;
    }
    return ZERO_OK;
}

/* >>stash: the activation stash: slots put in the forward pass, read back for the backward --
   Each slot registered by zero_act_add has a place planned at zero_build (>>plan,
   zero__act_plan). offload_activations none or host: one arena holds every slot (device or
   host memory) and put / get are copies. nvme: a slot's bytes and a 64-byte trailer
   (checksum, slot, generation, magic) go to a 4 KiB-aligned area of a file in
   offload.nvme_dirs (slots striped over the directories) through a few staging buffers
   (act_live_bytes, each the largest area) and the I/O engine of >>io. A buffer is
   free, writing, reading, held (its slot's bytes, no I/O in flight) or failed (a write
   that failed: the bytes stay until zero_act_get takes them). zero_act_put copies into a
   buffer, seals it and queues the write; zero_act_get takes the bytes from a buffer that
   still holds them (the write cache or a read ahead: a hit) or reads them on demand (a
   miss). The first step records the order of the gets; from the second step on, each get
   queues reads of the next slots in that order into the free buffers, so the backward
   pass finds them read. A slot is read ahead only while it holds a put not yet taken, so
   a changed order costs misses (and a warning), never wrong bytes. */
enum { ZERO__ACT_EMPTY = 0, ZERO__ACT_PUT, ZERO__ACT_TAKEN, ZERO__ACT_DROPPED };
enum { ZERO__AB_FREE = 0, ZERO__AB_WRITE, ZERO__AB_READ, ZERO__AB_HELD, ZERO__AB_FAILED };
#define ZERO__ACT_MAGIC 0x5a45524f41435431ull   /* "ZEROACT1" */

typedef struct zero__actbuf {
    char *p;                        /* the largest area's bytes, 4 KiB-aligned */
    int state;                      /* ZERO__AB_* */
    int slot;                       /* whose bytes it holds; -1: none (stale) */
    int io_slot;                    /* whose transfer it runs or ran (messages) */
    uint64_t used;                  /* the stash's clock at its last use (least recently used goes first) */
    zero__iobatch b;
} zero__actbuf;

struct zero__stash {
    char *mem;                      /* none / host: every slot's bytes */
    int ndirs, fd[ZERO_MAX_NVME_DIRS];
    char path[ZERO_MAX_NVME_DIRS][512];
    char *raw;                      /* nvme: the staging buffers' allocation (host memory, pinned on CUDA) */
    zero__actbuf *bufs;
    int nbuf;
    int64_t area, chunk;
    zero__iopool io;
    int io_started;
    uint64_t clock;
    int *order;                     /* the gets of the first step, slot indices */
    int len, cap, overflow, active, pos, off;
    int64_t step;                   /* zero_steps since zero_build */
    int fail_slot, fail_err;        /* a failed write not yet reported: its slot (-1: none), errno (-1: short) */
    int64_t fail_off;
    int64_t hits, misses, written, read;
    double wait_ms;
};

static int zero__act_index(zero_ctx *ctx, zero_act a, const char *fn) {
    return zero__handle_index(ctx, a.id, ctx ? ctx->act.num : 0, "activation", fn);
}

/* the buffer's I/O has finished (no lock needed by the caller) */
static int zero__ab_idle(struct zero__stash *st, zero__actbuf *b) {
    int pend;
    zero__mutex_lock(&st->io.mu);
    pend = b->b.pending;
    zero__mutex_unlock(&st->io.mu);
    return pend == 0;
}

/* finished transfers: a write leaves its buffer held (or failed), a read held */
static void zero__stash_reap(zero_ctx *ctx) {
    struct zero__stash *st = ctx->act.st;
    int i;
    for (i = 0; i < st->nbuf; i++) {
        zero__actbuf *b = &st->bufs[i];
        if ((b->state != ZERO__AB_WRITE && b->state != ZERO__AB_READ) || !zero__ab_idle(st, b)) continue;
        if (b->state == ZERO__AB_WRITE && b->b.err) {
            b->state = b->slot >= 0 ? ZERO__AB_FAILED : ZERO__AB_FREE;     /* taken already: nothing to keep */
            if (st->fail_slot < 0) { st->fail_slot = b->io_slot; st->fail_err = b->b.err; st->fail_off = b->b.err_off; }
        } else {
            b->state = ZERO__AB_HELD;
        }
    }
}

static void zero__ab_wait(zero_ctx *ctx, zero__actbuf *b, const char *why) {
    struct zero__stash *st = ctx->act.st;
    double t0 = zero__now_ms(), tt = zero__trace_t0(ctx);
    if (zero__ab_idle(st, b)) return;
    zero__io_wait(&st->io, &b->b);
    st->wait_ms += zero__now_ms() - t0;
    zero__trace_add(ctx, ZERO__TRACK_COMPUTE, "act wait", why, tt);
}

/* forgets what buffer i holds (the slot's bytes are in its file) */
static void zero__ab_detach(zero_ctx *ctx, int i) {
    zero__actbuf *b = &ctx->act.st->bufs[i];
    if (b->slot >= 0 && ctx->act.recs[b->slot].buf == i) ctx->act.recs[b->slot].buf = -1;
    b->slot = -1;
}

/* a buffer to fill, waiting for I/O when every one is busy: a free one, else one whose
   bytes nobody needs, else the least recently used held one, else the oldest transfer's.
   -1 when every buffer keeps the bytes of a failed write (ZERO_ERR_IO). */
static int zero__stash_acquire(zero_ctx *ctx, const char *why) {
    struct zero__stash *st = ctx->act.st;
    for (;;) {
        int i, best = -1, busy = -1;
        zero__stash_reap(ctx);
        for (i = 0; i < st->nbuf; i++) {
            zero__actbuf *b = &st->bufs[i];
            if (b->state == ZERO__AB_FREE) { best = i; break; }
            if (b->state == ZERO__AB_HELD) {
                if (b->slot < 0 || ctx->act.recs[b->slot].state != ZERO__ACT_PUT) { best = i; break; }
                if (best < 0 || b->used < st->bufs[best].used) best = i;
            } else if (b->state == ZERO__AB_WRITE || b->state == ZERO__AB_READ) {
                if (busy < 0 || b->used < st->bufs[busy].used) busy = i;
            }
        }
        if (best >= 0) {
            zero__ab_detach(ctx, best);
            st->bufs[best].state = ZERO__AB_FREE;
            return best;
        }
        if (busy < 0) return -1;
        zero__ab_wait(ctx, &st->bufs[busy], why);
    }
}

static void zero__ab_issue(zero_ctx *ctx, int i, int slot, int write) {
    struct zero__stash *st = ctx->act.st;
    zero__actbuf *b = &st->bufs[i];
    const zero__act_rec *a = &ctx->act.recs[slot];
    memset(&b->b, 0, sizeof b->b);
    b->b.write = write;
    b->b.act = 1;
    if ((b->b.trace_t0 = zero__trace_t0(ctx)) > 0) b->b.trace_ctx = ctx;
    b->state = write ? ZERO__AB_WRITE : ZERO__AB_READ;
    b->slot = b->io_slot = slot;
    b->used = ++st->clock;
    ctx->act.recs[slot].buf = i;
    zero__io_submit(&st->io, &b->b, st->fd[a->dir], write, b->p, zero__act_area(a->bytes), a->off, st->chunk);
    if (write) st->written += zero__act_area(a->bytes); else st->read += zero__act_area(a->bytes);
}

static void zero__act_seal(const zero__act_rec *a, int slot, char *p) {
    uint64_t t[4];
    t[1] = (uint64_t)slot; t[2] = a->gen; t[3] = ZERO__ACT_MAGIC;
    t[0] = zero__blk_sum(p, a->bytes, (uint64_t)slot * (uint64_t)0x9e3779b97f4a7c15ull + a->gen);
    memcpy(p + zero__act_area(a->bytes) - ZERO__ACT_TRAILER, t, sizeof t);
}

/* the bytes in buffer i are slot's current ones */
static zero_result zero__act_verify(zero_ctx *ctx, int i, int slot) {
    struct zero__stash *st = ctx->act.st;
    const zero__act_rec *a = &ctx->act.recs[slot];
    const zero__actbuf *b = &st->bufs[i];
    uint64_t t[4];
    if (b->b.err)
        return zero__fail(ctx, b->b.err == -1 ? ZERO_ERR_CORRUPT : ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                          "zero_act_get('%s'): reading %s at offset %lld failed: %s", a->name, st->path[a->dir],
                          (long long)b->b.err_off, b->b.err == -1 ? "short file" : strerror(b->b.err));
    memcpy(t, b->p + zero__act_area(a->bytes) - ZERO__ACT_TRAILER, sizeof t);
    if (t[3] != ZERO__ACT_MAGIC || t[1] != (uint64_t)slot || t[2] != a->gen ||
        t[0] != zero__blk_sum(b->p, a->bytes, (uint64_t)slot * (uint64_t)0x9e3779b97f4a7c15ull + a->gen))
        return zero__fail(ctx, ZERO_ERR_CORRUPT, ZERO_LOGITEM_OFFLOAD_CORRUPT,
                          "zero_act_get('%s'): the bytes read from %s at offset %lld fail their checksum", a->name,
                          st->path[a->dir], (long long)a->off);
    return ZERO_OK;
}

/* a failed write not yet reported, as ZERO_ERR_IO (once) */
static zero_result zero__stash_failed(zero_ctx *ctx, const char *fn) {
    struct zero__stash *st = ctx->act.st;
    const zero__act_rec *a;
    if (!st || st->fail_slot < 0) return ZERO_OK;
    a = &ctx->act.recs[st->fail_slot];
    st->fail_slot = -1;
    return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                      "%s: writing activation '%s' to %s at offset %lld failed: %s (its bytes stay in memory until "
                      "zero_act_get takes them)", fn, a->name, st->path[a->dir], (long long)st->fail_off,
                      st->fail_err == -1 ? "short write" : strerror(st->fail_err));
}

/* reads of the next slots in the recorded order, into buffers nobody needs */
static void zero__stash_ahead(zero_ctx *ctx) {
    struct zero__stash *st = ctx->act.st;
    int k;
    if (!st->active || st->off || st->nbuf == 0) return;
    zero__stash_reap(ctx);
    for (k = st->pos; k < st->len; k++) {
        int s = st->order[k], i, pick = -1;
        if (ctx->act.recs[s].state != ZERO__ACT_PUT || ctx->act.recs[s].buf >= 0) continue;
        for (i = 0; i < st->nbuf && pick < 0; i++) {
            const zero__actbuf *b = &st->bufs[i];
            if (b->state == ZERO__AB_FREE ||
                (b->state == ZERO__AB_HELD && (b->slot < 0 || ctx->act.recs[b->slot].state != ZERO__ACT_PUT)))
                pick = i;
        }
        for (i = 0; i < st->nbuf && pick < 0; i++)    /* else a buffer whose bytes were taken, its write still running */
            if (st->bufs[i].state == ZERO__AB_WRITE && st->bufs[i].slot < 0) {
                zero__ab_wait(ctx, &st->bufs[i], ctx->act.recs[s].name);
                zero__stash_reap(ctx);
                if (st->bufs[i].state == ZERO__AB_HELD) pick = i;
            }
        if (pick < 0) return;
        zero__ab_detach(ctx, pick);
        zero__ab_issue(ctx, pick, s, 0);
    }
}

static zero_result zero__stash_put(zero_ctx *ctx, int s, const void *src) {
    struct zero__stash *st = ctx->act.st;
    zero__act_rec *a = &ctx->act.recs[s];
    zero_result r;
    int i;
    if (st->mem) {
        if ((r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, st->mem + a->off, src, a->bytes)) != ZERO_OK) return r;
    } else {
        for (i = 0; i < st->nbuf; i++)      /* the last put's write may still run: two writes of one area never overlap */
            if (st->bufs[i].state == ZERO__AB_WRITE && st->bufs[i].io_slot == s) zero__ab_wait(ctx, &st->bufs[i], a->name);
        zero__stash_reap(ctx);
        if ((i = a->buf) >= 0) {            /* an old transfer of this slot: let it finish, reuse its buffer */
            if (st->bufs[i].state == ZERO__AB_WRITE || st->bufs[i].state == ZERO__AB_READ)
                zero__ab_wait(ctx, &st->bufs[i], a->name);
            zero__stash_reap(ctx);
            zero__ab_detach(ctx, i);
            if (st->bufs[i].state == ZERO__AB_FAILED) i = -1;
            else st->bufs[i].state = ZERO__AB_FREE;
        }
        if (i < 0 && (i = zero__stash_acquire(ctx, a->name)) < 0) {
            st->fail_slot = -1;             /* reported here */
            return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                              "zero_act_put('%s'): not stashed: every staging buffer keeps the bytes of a failed write "
                              "to %s (%s); take them with zero_act_get", a->name, st->path[a->dir],
                              st->fail_err > 0 ? strerror(st->fail_err) : "a short write");
        }
        if ((r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, st->bufs[i].p, src, a->bytes)) != ZERO_OK) return r;
        a->gen++;
        zero__act_seal(a, s, st->bufs[i].p);
        zero__ab_issue(ctx, i, s, 1);
    }
    a->state = ZERO__ACT_PUT;
    a->put_step = st->step;
    return zero__stash_failed(ctx, "zero_act_put");
}

static zero_result zero__stash_get(zero_ctx *ctx, int s, void *dst) {
    struct zero__stash *st = ctx->act.st;
    zero__act_rec *a = &ctx->act.recs[s];
    zero_result r;
    int i, hit = 1;
    if (st->step == 0) {                    /* the first step records the order */
        if (st->len < st->cap) st->order[st->len++] = s;
        else st->overflow = 1;
    } else if (st->active && !st->off) {
        if (st->pos < st->len && st->order[st->pos] == s) st->pos++;
        else {
            st->off = 1;
            zero__log(ctx, ZERO_LOG_WARN, ZERO_LOGITEM_ACT_ORDER_CHANGED,
                      "zero_act_get('%s'): the activations are asked for in another order than in the first step: "
                      "reading them on demand this step", a->name);
        }
    }
    if (st->mem) {
        r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, dst, st->mem + a->off, a->bytes);
    } else {
        zero__stash_reap(ctx);
        if ((i = a->buf) < 0) {             /* only in its file: read it now */
            hit = 0;
            if ((i = zero__stash_acquire(ctx, a->name)) < 0) {
                st->fail_slot = -1;
                return zero__fail(ctx, ZERO_ERR_IO, ZERO_LOGITEM_OFFLOAD_IO,
                                  "zero_act_get('%s'): no staging buffer to read into: each keeps the bytes of a failed "
                                  "write to %s; take those first", a->name, st->path[a->dir]);
            }
            zero__ab_issue(ctx, i, s, 0);
        }
        if (st->bufs[i].state == ZERO__AB_READ) {   /* a write in flight already has the bytes in its buffer */
            zero__ab_wait(ctx, &st->bufs[i], a->name);
            zero__stash_reap(ctx);
        }
        /* bytes read are checked; bytes put (a write in flight, done or failed) are what was put */
        if (!st->bufs[i].b.write && (r = zero__act_verify(ctx, i, s)) != ZERO_OK) {
            zero__ab_detach(ctx, i);
            st->bufs[i].state = ZERO__AB_FREE;
            return r;
        }
        r = ctx->dev->copy(ctx, ZERO__S_COMPUTE, dst, st->bufs[i].p, a->bytes);
        zero__ab_detach(ctx, i);
        if (st->bufs[i].state != ZERO__AB_WRITE) st->bufs[i].state = ZERO__AB_FREE;
    }
    if (r != ZERO_OK) return r;
    if (st->active) { if (hit) st->hits++; else st->misses++; }
    a->state = ZERO__ACT_TAKEN;
    if (!st->mem) zero__stash_ahead(ctx);
    return zero__stash_failed(ctx, "zero_act_get");
}

/* zero_step, before anything else: every slot put this step must have been taken */
static zero_result zero__stash_step_check(zero_ctx *ctx) {
    struct zero__stash *st = ctx->act.st;
    int s, bad = -1, n = 0;
    if (!st) return ZERO_OK;
    for (s = 0; s < ctx->act.num; s++) {
        zero__act_rec *a = &ctx->act.recs[s];
        if (a->state != ZERO__ACT_PUT) continue;
        if (bad < 0) bad = s;
        n++;
        a->state = ZERO__ACT_DROPPED;
        if (a->buf >= 0) {
            int i = a->buf;
            if (st->bufs[i].state == ZERO__AB_WRITE || st->bufs[i].state == ZERO__AB_READ)
                zero__ab_wait(ctx, &st->bufs[i], a->name);
            zero__stash_reap(ctx);
            zero__ab_detach(ctx, i);
            if (st->bufs[i].state == ZERO__AB_FAILED) st->bufs[i].state = ZERO__AB_FREE;
        }
    }
    if (bad < 0) return ZERO_OK;
    return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_ACT_MISUSE,
                      "zero_step: activation '%s' (and %d more) was put and never asked for with zero_act_get; "
                      "its bytes are dropped", ctx->act.recs[bad].name, n - 1);
}

/* zero_step, once it applied or skipped the step: the order is recorded after the first */
static void zero__stash_step_end(zero_ctx *ctx) {
    struct zero__stash *st = ctx->act.st;
    int s;
    if (!st) return;
    if (st->step == 0 && !st->overflow && st->len > 0) st->active = 1;
    st->step++;
    st->pos = 0;
    st->off = 0;
    for (s = 0; s < ctx->act.num; s++)
        if (ctx->act.recs[s].state == ZERO__ACT_TAKEN) ctx->act.recs[s].state = ZERO__ACT_EMPTY;
}

static void zero__stash_free(zero_ctx *ctx) {
    struct zero__stash *st = ctx->act.st;
    const zero_allocator *a = &ctx->desc.allocator;
    int i;
    if (!st) return;
    if (st->io_started) zero__io_stop(&st->io, a);
    for (i = 0; i < st->ndirs; i++)
        if (st->fd[i] >= 0) { zero__fops.close(st->fd[i]); unlink(st->path[i]); }
    if (st->mem) {
        if (ctx->desc.offload_activations == ZERO_OFFLOAD_HOST) ctx->dev->host_free(ctx, st->mem);
        else ctx->dev->free(ctx, st->mem);
    }
    if (st->raw) ctx->dev->host_free(ctx, st->raw);
    zero__raw_free(a, st->bufs);
    zero__raw_free(a, st->order);
    zero__raw_free(a, st);
    ctx->act.st = NULL;
    for (i = 0; i < ZERO_TIER_NUM; i++) ctx->lay.bytes[i][ZERO_CAT_ACTIVATIONS] = 0;
}

/* the nvme stash's files (one per directory, preallocated) and I/O engine */
static zero_result zero__stash_files(zero_ctx *ctx, struct zero__stash *st) {
    const zero_desc *d = &ctx->desc;
    int64_t fbytes[ZERO_MAX_NVME_DIRS];
    static uint32_t seq = 0;
    uint32_t id = __atomic_add_fetch(&seq, 1u, __ATOMIC_RELAXED);
    zero_result r;
    int i, nd = 0, depth, why = 0, want, refused = 0;
    while (nd < ZERO_MAX_NVME_DIRS && d->offload.nvme_dirs[nd]) nd++;
    st->ndirs = nd;
    for (i = 0; i < nd; i++) { st->fd[i] = -1; fbytes[i] = 0; }
    for (i = 0; i < ctx->act.num; i++) {   /* slot i in directory i % nd, areas back to back */
        zero__act_rec *a = &ctx->act.recs[i];
        a->dir = i % nd;
        a->off = fbytes[a->dir];
        fbytes[a->dir] += zero__act_area(a->bytes);
    }
    for (i = 0; i < nd; i++) {
        if (fbytes[i] == 0) continue;
        snprintf(st->path[i], sizeof st->path[i], "%s/zero_acts.r%d.p%ld.c%u", d->offload.nvme_dirs[i], ctx->rank,
                 (long)getpid(), (unsigned)id);
        if ((r = zero__io_create(ctx, st->path[i], fbytes[i], "activation", &st->fd[i], &refused)) != ZERO_OK) return r;
    }
    if (refused)
        zero__log(ctx, ZERO_LOG_INFO, ZERO_LOGITEM_OFFLOAD_BUFFERED,
                  "the filesystem of %s refused O_DIRECT: the activation files use buffered I/O", st->path[0]);
    if ((r = zero__io_engine(ctx, &want)) != ZERO_OK) return r;
    depth = d->offload.queue_depth < 2 * st->nbuf ? d->offload.queue_depth : 2 * st->nbuf;
    if (zero__io_start(&st->io, depth, want, &d->allocator, &why) != 0)
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_build: could not start the activation stash's I/O threads");
    st->io_started = 1;
    return ZERO_OK;
}

/* zero_build, after the model states: the stash as planned (zero__act_plan) */
static zero_result zero__stash_build(zero_ctx *ctx) {
    const zero_desc *d = &ctx->desc;
    const zero_allocator *al = &d->allocator;
    struct zero__stash *st;
    zero__sizes z;
    zero_result r = ZERO_OK;
    int i, tier = (int)d->offload_activations;
    if (ctx->act.num == 0) return ZERO_OK;
    memset(&z, 0, sizeof z);
    for (i = 0; i < ctx->act.num; i++) zero__act_size(&z, ctx->act.recs[i].bytes);
    if (tier == ZERO_OFFLOAD_NVME && d->act_live_bytes && d->act_live_bytes < z.act_max)
        return zero__fail(ctx, ZERO_ERR_OVER_CAP, ZERO_LOGITEM_OVER_CAP,
                          "zero_build: act_live_bytes %lld is less than the largest activation slot's %lld bytes "
                          "(its bytes and trailer rounded up to 4 KiB)", (long long)d->act_live_bytes, (long long)z.act_max);
    if (!(st = (struct zero__stash *)zero__raw_alloc(al, sizeof *st)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: out of memory");
    memset(st, 0, sizeof *st);
    ctx->act.st = st;
    st->fail_slot = -1;
    st->cap = ctx->act.num * d->accum_steps;
    if (!(st->order = (int *)zero__raw_alloc(al, sizeof(int) * (size_t)st->cap))) r = ZERO_ERR_OUT_OF_MEMORY;
    for (i = 0; i < ctx->act.num; i++) {
        zero__act_rec *a = &ctx->act.recs[i];
        a->state = ZERO__ACT_EMPTY; a->buf = -1; a->gen = 0; a->put_step = -1;
    }
    if (r == ZERO_OK && tier != ZERO_OFFLOAD_NVME) {
        int64_t off = 0;
        for (i = 0; i < ctx->act.num; i++) {
            ctx->act.recs[i].off = off;
            off += zero__align_up(ctx->act.recs[i].bytes, ZERO__ALIGN);
        }
        st->mem = (char *)(tier == ZERO_OFFLOAD_HOST ? ctx->dev->host_alloc(ctx, z.act_mem) : ctx->dev->alloc(ctx, z.act_mem));
        if (!st->mem) r = ZERO_ERR_OUT_OF_MEMORY;
        else ctx->lay.bytes[tier == ZERO_OFFLOAD_HOST ? ZERO_TIER_HOST : ZERO_TIER_DEVICE][ZERO_CAT_ACTIVATIONS] += z.act_mem;
    } else if (r == ZERO_OK) {
        st->nbuf = zero__act_nbuf(d, &z);
        st->area = z.act_max;
        st->chunk = z.act_max < ((int64_t)1 << 20) ? z.act_max : (int64_t)1 << 20;
        st->bufs = (zero__actbuf *)zero__raw_alloc(al, sizeof *st->bufs * (size_t)st->nbuf);
        st->raw = (char *)ctx->dev->host_alloc(ctx, (int64_t)st->nbuf * st->area + ZERO__IO_ALIGN);
        if (!st->bufs || !st->raw) r = ZERO_ERR_OUT_OF_MEMORY;
        for (i = 0; r == ZERO_OK && i < st->nbuf; i++) {
            zero__actbuf *b = &st->bufs[i];
            memset(b, 0, sizeof *b);
            b->p = (char *)(((uintptr_t)st->raw + ZERO__IO_ALIGN - 1) & ~(uintptr_t)(ZERO__IO_ALIGN - 1)) + (int64_t)i * st->area;
            b->slot = b->io_slot = -1;
        }
        if (r == ZERO_OK) {
            ctx->lay.bytes[ZERO_TIER_HOST][ZERO_CAT_ACTIVATIONS] += (int64_t)st->nbuf * st->area;
            if ((r = zero__stash_files(ctx, st)) == ZERO_OK) {
                ctx->lay.bytes[ZERO_TIER_NVME][ZERO_CAT_ACTIVATIONS] += z.act_file;
                ctx->desc.act_live_bytes = (int64_t)st->nbuf * st->area;
            }
        }
    }
    if (r == ZERO_ERR_OUT_OF_MEMORY)
        r = zero__fail(ctx, r, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_build: out of memory for the activation stash");
    if (r != ZERO_OK) zero__stash_free(ctx);
    return r;
}

/* zero_act_add: a slot registered (its place is planned at zero_build) */
static zero_result zero__act_add(zero_ctx *ctx, const char *name, int64_t bytes, zero_act *out) {
    zero__act_rec *a;
    zero_result r;
    int i;
    if ((r = zero__name_check(ctx, "zero_act_add", "activation", name)) != ZERO_OK) return r;
    if (bytes <= 0 || bytes > ((int64_t)1 << 48))
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_act_add('%s'): %lld bytes; it must be 1..2^48", name, (long long)bytes);
    for (i = 0; i < ctx->act.num; i++)
        if (strcmp(ctx->act.recs[i].name, name) == 0)
            return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                              "zero_act_add: an activation named '%s' already exists", name);
    if (!zero__grow(ctx, (void **)&ctx->act.recs, &ctx->act.cap, ctx->act.num, sizeof *a))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_act_add: out of memory");
    a = &ctx->act.recs[ctx->act.num];
    memset(a, 0, sizeof *a);
    if (!(a->name = zero__strdup(&ctx->desc.allocator, name)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_act_add: out of memory");
    a->bytes = bytes;
    a->buf = -1;
    out->id = zero__handle(ctx, ctx->act.num++);
    return ZERO_OK;
}

/* zero_act_get of slot i: checked against the slot's state, then read */
static zero_result zero__act_get(zero_ctx *ctx, int i, void *dst) {
    const zero__act_rec *a = &ctx->act.recs[i];
    if (a->state == ZERO__ACT_TAKEN)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_ACT_MISUSE,
                          "zero_act_get('%s'): already taken; one zero_act_get per zero_act_put", a->name);
    if (a->state == ZERO__ACT_DROPPED)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_ACT_MISUSE,
                          "zero_act_get('%s'): used after the step: its bytes were dropped at zero_step (a slot "
                          "lives from zero_act_put to zero_act_get within one step)", a->name);
    if (a->state != ZERO__ACT_PUT)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_ACT_MISUSE,
                          "zero_act_get('%s'): nothing was put %s", a->name,
                          a->put_step >= 0 ? "since its last zero_act_get (used after the step?)" : "yet");
    return zero__stash_get(ctx, i, dst);
}

/* >>ckpt ------------------------------------------------------------------------------
   Sharded checkpoints and safetensors. A checkpoint directory holds one shard file per
   rank of the saving world, "rank<R>.g<G>" (G: the save's generation), and a text
   manifest "manifest" that names them. Data is keyed by param and global element range,
   not by the padded arenas: a record is one param's elements [begin, end) that one
   saving rank held (its slice of the module), stored as fp32 weights followed by the
   fp32 moments (m, then v), with 64-bit checksums of its weights and of its moments in
   the manifest (a rank that holds no optimizer state for a record reads its weights only).
   A loader in any world size and stage reads just the records that overlap what it
   holds, at the offsets the manifest gives. The manifest rename is the commit point:
   new shards get a new generation suffix, so the files an older manifest names stay
   until the new manifest is in place; stale generations are removed afterwards. */

/* the manifest's format: 2 adds micro_batches and the trainer's records after good_steps
   (a format-1 manifest is still read: micro_batches then unknown, no records) */
#define ZERO__CK_VERSION 2
#define ZERO__CK_SHARD_VERSION 1    /* the shards' header and records: unchanged by format 2 */
/* shard header, 64 bytes: magic, u32 version, rank, world, 0; u64 generation; i64 steps,
   skipped; f32 loss scale; i32 good steps; u64 checksum of the 56 bytes before it */
#define ZERO__CK_HEADER 64
#define ZERO__CK_MAGIC "ZEROSHD1"

/* 64-bit checksum: FNV-style over 8-byte words (each step is a bijection of the state,
   so any change confined to one word changes the result), then the tail and length.
   Streamed: zero__ck_hash_add takes the bytes in pieces of any size (a partial word
   waits in tail), so a record is checked or written without holding it whole. */
typedef struct zero__ck_hash { uint64_t h, n; unsigned char tail[8]; int nt; } zero__ck_hash;
static void zero__ck_hash_init(zero__ck_hash *s) { s->h = 14695981039346656037ull; s->n = 0; s->nt = 0; }
static void zero__ck_hash_add(zero__ck_hash *s, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t have = (size_t)s->nt, take;   /* 0..7 bytes of a word wait in tail */
    uint64_t w;
    s->n += n;
    if (have > 0) {                      /* complete the waiting word first */
        take = n < 8 - have ? n : 8 - have;
        memcpy(s->tail + have, p, take);
        p += take;
        n -= take;
        have += take;
        if (have < 8) { s->nt = (int)have; return; }
        memcpy(&w, s->tail, 8);
        s->h = (s->h ^ w) * 1099511628211ull;
        s->h ^= s->h >> 32;
    }
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        s->h = (s->h ^ w) * 1099511628211ull;
        s->h ^= s->h >> 32;
    }
    memcpy(s->tail, p, n);               /* n < 8 */
    s->nt = (int)n;
}
static uint64_t zero__ck_hash_end(const zero__ck_hash *s) {
    uint64_t h = s->h;
    int i;
    for (i = 0; i < s->nt; i++) h = (h ^ s->tail[i]) * 1099511628211ull;
    h ^= s->n;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}
static uint64_t zero__ck_sum(const void *data, size_t n) {
    zero__ck_hash s;
    zero__ck_hash_init(&s);
    zero__ck_hash_add(&s, data, n);
    return zero__ck_hash_end(&s);
}

/* Every checkpoint and safetensors file goes through zero__fops (>>io), so the tests'
   fault hooks (ENOSPC, EIO, EROFS) reach them too. Failures set errno for the messages. */
static int zero__ck_open(const char *path, int flags, int mode) {
    int fd = zero__fops.open(path, flags, mode);
    if (fd < 0) { errno = -fd; return -1; }
    return fd;
}
static int zero__ck_close(int fd) {
    int r = zero__fops.close(fd);
    if (r < 0) { errno = -r; return -1; }
    return 0;
}
/* 1: all n bytes written; 0: failure (errno says why) */
static int zero__ck_pwrite(int fd, const void *buf, size_t n, int64_t off) {
    const char *p = (const char *)buf;
    while (n > 0) {
        int64_t w = zero__fops.pwrite(fd, p, n, off);
        if (w == -EINTR) continue;
        if (w < 0) { errno = (int)-w; return 0; }
        if (w == 0) { errno = EIO; return 0; }
        p += w; n -= (size_t)w; off += w;
    }
    return 1;
}
/* 1: all n bytes read; 0: short read (truncated file); -1: OS error (errno) */
static int zero__ck_pread(int fd, void *buf, size_t n, int64_t off) {
    char *p = (char *)buf;
    while (n > 0) {
        int64_t r = zero__fops.pread(fd, p, n, off);
        if (r == -EINTR) continue;
        if (r < 0) { errno = (int)-r; return -1; }
        if (r == 0) return 0;
        p += r; n -= (size_t)r; off += r;
    }
    return 1;
}
/* out = a + b + c; 0 when it does not fit (no snprintf: paths may be long) */
static int zero__ck_join(char *out, size_t n, const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    if (la + lb + lc + 1 > n) { if (n) out[0] = 0; return 0; }
    memcpy(out, a, la);
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
    return 1;
}
static void zero__ck_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) { (void)fsync(fd); close(fd); }
}

/* number of fp32 moment arrays per trainable element */
static int zero__ck_moments(const zero_desc *d) {
    if (d->optim.type == ZERO_OPTIM_SGD) return d->optim.momentum != 0.0 ? 1 : 0;
    return 2;
}

/* the param-local element range [b, e) that rank r's slice of the module holds */
static void zero__ck_slice(const zero_ctx *ctx, int pi, int r, int world, int64_t *b, int64_t *e) {
    const zero__param_rec *p = &ctx->params[pi];
    int64_t per = ctx->modules[p->module].lay.span / world, lo = (int64_t)r * per, hi = lo + per;
    int64_t s = p->offset > lo ? p->offset : lo, t = p->offset + p->numel < hi ? p->offset + p->numel : hi;
    if (s >= t) { *b = *e = 0; return; }
    *b = s - p->offset;
    *e = t - p->offset;
}
/* where element o (param-local) of param pi lives in this rank's arenas; -1: not here */
static int64_t zero__ck_state_idx(const zero_ctx *ctx, int pi, int64_t o) {
    const zero__param_rec *p = &ctx->params[pi];
    const zero__module_rec *m = &ctx->modules[p->module];
    int64_t per = m->lay.span / ctx->world, lo = (int64_t)ctx->prank * per;
    if (m->frozen) return -1;
    if (ctx->desc.stage == 0) return m->lay.train_off + p->offset + o;
    return m->lay.train_off / ctx->world + (p->offset + o - lo);
}
static int64_t zero__ck_param_idx(const zero_ctx *ctx, int pi, int64_t o) {
    const zero__param_rec *p = &ctx->params[pi];
    const zero__module_rec *m = &ctx->modules[p->module];
    int64_t per = m->lay.span / ctx->world, lo = (int64_t)ctx->prank * per;
    if (ctx->desc.stage < 3) return m->lay.param_off + p->offset + o;
    return zero__pshard(ctx, p->module) + (p->offset + o - lo);
}
/* the range this rank must load: whole params at stages 0-2 (the param arena is full),
   its slice at stage 3; the optimizer state it holds is always inside that range */
static void zero__ck_need(const zero_ctx *ctx, int pi, int64_t *b, int64_t *e) {
    if (ctx->desc.stage < 3) { *b = 0; *e = ctx->params[pi].numel; return; }
    zero__ck_slice(ctx, pi, ctx->prank, ctx->world, b, e);
}
static int zero__ck_has_state(const zero_ctx *ctx, int pi, int64_t *b, int64_t *e) {
    if (ctx->modules[ctx->params[pi].module].frozen) return 0;
    if (ctx->desc.stage == 0) { *b = 0; *e = ctx->params[pi].numel; }
    else zero__ck_slice(ctx, pi, ctx->prank, ctx->world, b, e);
    return *b < *e;
}

/* ---- the checkpoint's only access to params, master weights and moments -------------
   Everything below reads and writes them through these five, in fp32: the arenas may
   live where the host cannot dereference them (a GPU), and the master and moments on
   the NVMe tier (>>offload), which zero__nvme_rw reads and writes block by block. which:
   0 the fp32 master, 1 the first moment (or SGD momentum), 2 the second moment; idx:
   the state index (zero__ck_state_idx). The params are addressed by param pi and
   param-local element o: in the param arena (zero__ck_param_idx), or with the stage-3
   params on NVMe in the param areas of the tier's blocks at the state index (a frozen
   module's shard, which has no block, stays in the arena). */
#define ZERO__CK_CHUNK 16384        /* elements per read or write while streaming a record */
static zero_result zero__ck_state_read(zero_ctx *ctx, int which, int64_t idx, int64_t n, float *buf, const char *fn) {
    return ctx->tier.vt->read(ctx, which, idx, n, buf, fn);
}
static zero_result zero__ck_state_write(zero_ctx *ctx, int which, int64_t idx, int64_t n, const float *buf,
                                        const char *fn) {
    return ctx->tier.vt->write(ctx, which, idx, n, buf, fn);
}
/* writes back what the state writes left in the tier's buffer, so its errors surface here */
static zero_result zero__ck_state_done(zero_ctx *ctx, const char *fn) { return ctx->tier.vt->flush(ctx, fn); }
static int zero__ck_param_in_tier(const zero_ctx *ctx, int pi) {
    return ctx->tier.vt->holds_params(ctx) && !ctx->modules[ctx->params[pi].module].frozen;
}
static zero_result zero__ck_param_read(zero_ctx *ctx, int pi, int64_t o, int64_t n, float *buf, const char *fn) {
    int pdt = (int)ctx->desc.param_dtype;
    if (zero__ck_param_in_tier(ctx, pi))
        return ctx->tier.vt->read(ctx, ZERO__TIER_PARAMS, zero__ck_state_idx(ctx, pi, o), n, buf, fn);
    return zero__dev_get_f32(ctx, buf, zero__at(ctx->arena.param, zero__ck_param_idx(ctx, pi, o), pdt), pdt, n);
}
static zero_result zero__ck_param_write(zero_ctx *ctx, int pi, int64_t o, int64_t n, const float *buf, const char *fn) {
    int pdt = (int)ctx->desc.param_dtype;
    if (zero__ck_param_in_tier(ctx, pi))
        return ctx->tier.vt->write(ctx, ZERO__TIER_PARAMS, zero__ck_state_idx(ctx, pi, o), n, buf, fn);
    return zero__dev_put_f32(ctx, zero__at(ctx->arena.param, zero__ck_param_idx(ctx, pi, o), pdt), pdt, buf, n);
}

/* ---- the manifest ---------------------------------------------------------------- */
typedef struct zero__ck_module { int frozen; char *name; } zero__ck_module;
typedef struct zero__ck_param {
    int module, ndim;
    int64_t shape[ZERO_MAX_DIMS], numel;
    char *name;
} zero__ck_param;
typedef struct zero__ck_file { int rank; int64_t bytes; char *name; } zero__ck_file;
typedef struct zero__ck_range {
    int param, rank;
    int64_t begin, end, offset;
    uint64_t sum, msum;             /* checksums of the weights, of the moments (0: none) */
} zero__ck_range;

typedef struct zero__ck_manifest {
    char *text;                     /* the file, names point into it */
    int version, stage, world, moments, nmod, nparam, nfile, nrange;
    zero_dtype pdt, gdt, gadt;      /* param, grad, grad_accum dtypes */
    zero_optim_type optim;
    uint64_t gen;
    int64_t steps, skipped, good_steps;
    int64_t micro;                  /* -1: not recorded (format 1) */
    int nrec;
    zero__ck_rec *recs;             /* the trainer's records, decoded (allocated) */
    float loss_scale;
    zero__ck_module *mods;
    zero__ck_param *params;
    zero__ck_file *files;
    zero__ck_range *ranges;
} zero__ck_manifest;

static void zero__ck_manifest_free(const zero_allocator *a, zero__ck_manifest *m) {
    int i;
    for (i = 0; i < m->nrec && m->recs; i++) zero__raw_free(a, m->recs[i].data);
    zero__raw_free(a, m->recs);
    zero__raw_free(a, m->text);
    zero__raw_free(a, m->mods);
    zero__raw_free(a, m->params);
    zero__raw_free(a, m->files);
    zero__raw_free(a, m->ranges);
    memset(m, 0, sizeof *m);
}

/* a line cursor over the manifest text */
typedef struct zero__ck_cur { char *p, *end; int line; } zero__ck_cur;

static char *zero__ck_next_line(zero__ck_cur *c) {
    char *s = c->p, *nl;
    if (c->p >= c->end) return NULL;
    nl = (char *)memchr(c->p, '\n', (size_t)(c->end - c->p));
    if (!nl) return NULL;                    /* every line ends with '\n': truncation */
    *nl = 0;
    c->p = nl + 1;
    c->line++;
    return s;
}
/* reads a word (space separated) from *s; NULL at the end */
static char *zero__ck_word(char **s) {
    char *w = *s, *sp;
    if (!*w) return NULL;
    sp = strchr(w, ' ');
    if (sp) { *sp = 0; *s = sp + 1; } else { *s = w + strlen(w); }
    return w;
}
static int zero__ck_i64(char **s, int64_t lo, int64_t hi, int64_t *out) {
    char *w = zero__ck_word(s), *e;
    long long v;
    if (!w || !*w) return 0;
    errno = 0;
    v = strtoll(w, &e, 10);
    if (*e || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}
static int zero__ck_u64(char **s, uint64_t *out) {
    char *w = zero__ck_word(s), *e;
    if (!w || !*w) return 0;
    errno = 0;
    *out = (uint64_t)strtoull(w, &e, 16);
    return !*e && !errno;
}
/* "key value" line with an integer value */
static int zero__ck_kv(zero__ck_cur *c, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    char *l = zero__ck_next_line(c), *w;
    if (!l || !(w = zero__ck_word(&l)) || strcmp(w, key) != 0) return 0;
    return zero__ck_i64(&l, lo, hi, out) && !*l;
}
static int zero__ck_kw(zero__ck_cur *c, const char *key, char **rest) {
    char *l = zero__ck_next_line(c), *w;
    if (!l || !(w = zero__ck_word(&l)) || strcmp(w, key) != 0) return 0;
    *rest = l;
    return 1;
}
/* the lines left: a count in the manifest ("ranges N") is at most this, so no array is
   sized from a number the file cannot back */
static int64_t zero__ck_lines_left(const zero__ck_cur *c) {
    const char *p = c->p;
    int64_t n = 0;
    while (p < c->end && (p = (const char *)memchr(p, '\n', (size_t)(c->end - p))) != NULL) { n++; p++; }
    return n;
}

static zero_dtype zero__ck_dtype(const char *s) {
    int t;
    for (t = ZERO_F32; t < ZERO_DTYPE_NUM; t++)
        if (strcmp(s, zero__dtype_name((zero_dtype)t)) == 0) return (zero_dtype)t;
    return ZERO_DTYPE_DEFAULT;
}

static int64_t zero__ck_range_bytes(const zero__ck_manifest *m, const zero__ck_range *r) {
    return (r->end - r->begin) * 4 * (1 + (m->mods[m->params[r->param].module].frozen ? 0 : m->moments));
}

/* qsort orders for zero__ck_validate (arrays of pointers, so no context is needed) */
static int zero__ck_cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}
static int zero__ck_cmp_param(const void *a, const void *b) {
    const zero__ck_param *p = *(const zero__ck_param *const *)a, *q = *(const zero__ck_param *const *)b;
    return p->module != q->module ? (p->module < q->module ? -1 : 1) : strcmp(p->name, q->name);
}
static int zero__ck_cmp_range(const void *a, const void *b) {
    const zero__ck_range *p = *(const zero__ck_range *const *)a, *q = *(const zero__ck_range *const *)b;
    if (p->param != q->param) return p->param < q->param ? -1 : 1;
    return p->begin < q->begin ? -1 : p->begin > q->begin;
}

/* A record that is not where zero_save puts it: name the record it overlaps, if any. */
static void zero__ck_misplaced(const zero__ck_manifest *m, const zero__ck_range *r, int64_t want, const char *path,
                               char *msg, size_t msgn) {
    const zero__ck_param *p = &m->params[r->param];
    int64_t bytes = zero__ck_range_bytes(m, r);
    int j;
    for (j = 0; j < m->nrange; j++) {
        const zero__ck_range *o = &m->ranges[j];
        if (o == r || o->rank != r->rank || o->offset >= r->offset + bytes ||
            r->offset >= o->offset + zero__ck_range_bytes(m, o))
            continue;
        snprintf(msg, msgn, "%.200s: param '%s.%s' elements [%lld, %lld) of rank %d: its record, bytes [%lld, %lld) "
                 "of %s, overlaps the record of param '%s.%s' elements [%lld, %lld)", path, m->mods[p->module].name,
                 p->name, (long long)r->begin, (long long)r->end, r->rank, (long long)r->offset,
                 (long long)(r->offset + bytes), m->files[r->rank].name, m->mods[m->params[o->param].module].name,
                 m->params[o->param].name, (long long)o->begin, (long long)o->end);
        return;
    }
    snprintf(msg, msgn, "%.200s: param '%s.%s' elements [%lld, %lld) of rank %d: its record is at byte %lld of "
             "%s, not at %lld (after the header, a file's records lie back to back)", path, m->mods[p->module].name,
             p->name, (long long)r->begin, (long long)r->end, r->rank, (long long)r->offset, m->files[r->rank].name,
             (long long)want);
}

/* zero__ck_validate's first checks: the optimizer's moment count, and no param larger
   than the shard files could hold */
static zero_result zero__ck_check_sizes(const zero__ck_manifest *m, const char *path, char *msg, size_t msgn) {
    int64_t data = 0;
    int i;
    if (m->optim == ZERO_OPTIM_SGD ? m->moments > 1 : m->moments != 2) {
        snprintf(msg, msgn, "%.300s: optimizer %s with %d moment(s)", path, m->optim == ZERO_OPTIM_SGD ? "sgd" : "adamw",
                 m->moments);
        return ZERO_ERR_CORRUPT;
    }
    for (i = 0; i < m->nfile; i++) {    /* the bytes after the headers (capped: only compared) */
        int64_t d = m->files[i].bytes - ZERO__CK_HEADER, room = ((int64_t)1 << 52) - data;
        data += d < room ? d : room;
    }
    for (i = 0; i < m->nparam; i++) {
        const zero__ck_param *p = &m->params[i];
        char shape[ZERO_MAX_DIMS * 22 + 2];
        size_t l = 0;
        int k;
        if (p->numel <= data / 4) continue;
        for (k = 0; k < p->ndim; k++)
            l += (size_t)snprintf(shape + l, sizeof shape - l, "%s%lld", k ? ", " : "", (long long)p->shape[k]);
        snprintf(msg, msgn, "%.200s: param '%s.%s' has shape [%s], elements [0, %lld): more fp32 weights than "
                 "the shard files hold (%lld bytes after their headers)", path, m->mods[p->module].name, p->name, shape,
                 (long long)p->numel, (long long)data);
        return ZERO_ERR_CORRUPT;
    }
    return ZERO_OK;
}

/* names: sorted (in ix, room for every module and param), neighbours differ; 0: msg says which */
static int zero__ck_check_names(const zero__ck_manifest *m, const void **ix, const char *path, char *msg, size_t msgn) {
    int i;
    for (i = 0; i < m->nmod; i++) ix[i] = m->mods[i].name;
    qsort(ix, (size_t)m->nmod, sizeof *ix, zero__ck_cmp_name);
    for (i = 1; i < m->nmod; i++)
        if (strcmp((const char *)ix[i - 1], (const char *)ix[i]) == 0) {
            snprintf(msg, msgn, "%.300s: two modules are named '%s'", path, (const char *)ix[i]);
            return 0;
        }
    for (i = 0; i < m->nparam; i++) ix[i] = &m->params[i];
    qsort(ix, (size_t)m->nparam, sizeof *ix, zero__ck_cmp_param);
    for (i = 1; i < m->nparam; i++)
        if (zero__ck_cmp_param(&ix[i - 1], &ix[i]) == 0) {
            const zero__ck_param *p = (const zero__ck_param *)ix[i];
            snprintf(msg, msgn, "%.300s: module '%s' has two params named '%s'", path, m->mods[p->module].name,
                     p->name);
            return 0;
        }
    return 1;
}

/* the files: each record where the one before it in the same file ends (next: a
   cursor per file), the last one at the file's end; 0: msg says which */
static int zero__ck_check_files(const zero__ck_manifest *m, int64_t *next, const char *path, char *msg, size_t msgn) {
    int i;
    for (i = 0; i < m->nfile; i++) next[i] = ZERO__CK_HEADER;
    for (i = 0; i < m->nrange; i++) {
        const zero__ck_range *r = &m->ranges[i];
        const zero__ck_param *p = &m->params[r->param];
        int64_t bytes = zero__ck_range_bytes(m, r);
        if (r->offset > m->files[r->rank].bytes - bytes) {
            snprintf(msg, msgn, "%.200s: param '%s.%s' elements [%lld, %lld) of rank %d: its record, %lld bytes at "
                     "offset %lld, lies outside %s (%lld bytes)", path, m->mods[p->module].name, p->name,
                     (long long)r->begin, (long long)r->end, r->rank, (long long)bytes, (long long)r->offset,
                     m->files[r->rank].name, (long long)m->files[r->rank].bytes);
            return 0;
        }
        if (r->offset != next[r->rank]) { zero__ck_misplaced(m, r, next[r->rank], path, msg, msgn); return 0; }
        next[r->rank] += bytes;
    }
    for (i = 0; i < m->nfile; i++)
        if (next[i] != m->files[i].bytes) {
            snprintf(msg, msgn, "%.300s: %s has %lld bytes, its records end at byte %lld", path, m->files[i].name,
                     (long long)m->files[i].bytes, (long long)next[i]);
            return 0;
        }
    return 1;
}

/* the params: the records sorted by (param, begin) in ix, each record begins where the
   one before ended, and the last ends at the param's end; 0: msg says where */
static int zero__ck_check_cover(const zero__ck_manifest *m, const void **ix, const char *path, char *msg, size_t msgn) {
    int i, j;
    for (i = 0; i < m->nrange; i++) ix[i] = &m->ranges[i];
    qsort(ix, (size_t)m->nrange, sizeof *ix, zero__ck_cmp_range);
    for (i = 0, j = 0; i < m->nparam; i++) {
        const zero__ck_param *p = &m->params[i];
        const zero__ck_range *prev = NULL;
        int64_t at = 0;
        for (; j < m->nrange && ((const zero__ck_range *)ix[j])->param == i; j++) {
            const zero__ck_range *r = (const zero__ck_range *)ix[j];
            if (r->begin < at) {
                snprintf(msg, msgn, "%.200s: param '%s.%s': the records of elements [%lld, %lld) (rank %d) and "
                         "[%lld, %lld) (rank %d) overlap", path, m->mods[p->module].name, p->name, (long long)prev->begin,
                         (long long)prev->end, prev->rank, (long long)r->begin, (long long)r->end, r->rank);
                return 0;
            }
            if (r->begin > at) break;
            at = r->end;
            prev = r;
        }
        if (at != p->numel) {
            const zero__ck_range *r = j < m->nrange ? (const zero__ck_range *)ix[j] : NULL;
            int64_t to = r && r->param == i ? r->begin : p->numel;
            snprintf(msg, msgn, "%.200s: param '%s.%s': no record holds its elements [%lld, %lld) (of [0, %lld))", path,
                     m->mods[p->module].name, p->name, (long long)at, (long long)to, (long long)p->numel);
            return 0;
        }
    }
    return 1;
}

/* The manifest as a whole, after each line was read: what zero_load and zero_ckpt_open
   rely on (both read manifests through zero__ck_read_manifest, so they refuse the same):
   the optimizer's moment count; module names unique, param names unique in a module;
   no param larger than the shard files could hold; each file's records back to back from
   its header to its last byte, in manifest order, as zero_save writes them (so a record
   can neither lie outside its file nor point at another record's bytes); each param's
   records cover its elements exactly once. Messages name the param and the range. */
static zero_result zero__ck_validate(const zero_allocator *a, const zero__ck_manifest *m, const char *path, char *msg,
                                     size_t msgn) {
    const void **ix;
    int64_t *next;
    int n = m->nmod > m->nparam ? m->nmod : m->nparam;
    zero_result res;
    if ((res = zero__ck_check_sizes(m, path, msg, msgn)) != ZERO_OK) return res;
    if (m->nrange > n) n = m->nrange;
    ix = (const void **)zero__raw_alloc(a, sizeof *ix * (size_t)(n + 1));
    next = (int64_t *)zero__raw_alloc(a, sizeof *next * (size_t)m->nfile);
    if (!ix || !next) {
        snprintf(msg, msgn, "%.300s: out of memory", path);
        res = ZERO_ERR_OUT_OF_MEMORY;
    } else if (!zero__ck_check_names(m, ix, path, msg, msgn) || !zero__ck_check_files(m, next, path, msg, msgn) ||
               !zero__ck_check_cover(m, ix, path, msg, msgn)) {
        res = ZERO_ERR_CORRUPT;
    }
    zero__raw_free(a, ix);
    zero__raw_free(a, next);
    return res;
}

/* A manifest that failed a line's check: freed, and msg names the line. */
static zero_result zero__ck_malformed(const zero_allocator *a, zero__ck_manifest *m, const char *path, int line,
                                      char *msg, size_t msgn) {
    zero__ck_manifest_free(a, m);
    snprintf(msg, msgn, "%.300s: malformed or truncated at line %d", path, line);
    return ZERO_ERR_CORRUPT;
}

/* path's bytes into m->text (NUL-terminated), c a cursor over them */
static zero_result zero__ck_read_text(const zero_allocator *a, const char *path, zero__ck_manifest *m, zero__ck_cur *c,
                                      char *msg, size_t msgn) {
    struct stat st;
    int fd, rr;
    int64_t total;
    fd = zero__ck_open(path, O_RDONLY, 0);
    if (fd < 0) { snprintf(msg, msgn, "%.300s: cannot open: %s", path, strerror(errno)); return ZERO_ERR_IO; }
    if (fstat(fd, &st) != 0 || st.st_size > ((int64_t)1 << 32)) {
        zero__ck_close(fd);
        snprintf(msg, msgn, "%.300s: cannot stat or too large", path);
        return ZERO_ERR_IO;
    }
    total = (int64_t)st.st_size;
    m->text = (char *)zero__raw_alloc(a, (size_t)total + 1);
    if (!m->text) { zero__ck_close(fd); snprintf(msg, msgn, "%.300s: out of memory", path); return ZERO_ERR_OUT_OF_MEMORY; }
    rr = zero__ck_pread(fd, m->text, (size_t)total, 0);
    zero__ck_close(fd);
    if (rr < 0) {
        snprintf(msg, msgn, "%.300s: read failed: %s", path, strerror(errno));
        zero__ck_manifest_free(a, m);
        return ZERO_ERR_IO;
    }
    m->text[total] = 0;
    c->p = m->text; c->end = m->text + total; c->line = 0;
    return ZERO_OK;
}

/* The checksum line "end <hex>", the last line, covers every byte before it. Read
   before parsing (which cuts the text into words): *body gets where the line begins;
   1: it matches, -1: it does not (*want stored, *got computed), 0: no such line. */
static int zero__ck_end_line(char *text, int64_t total, char **body, uint64_t *want, uint64_t *got) {
    char *p = text + total, tail[64], *t, *w;
    if (total < 2 || p[-1] != '\n') return 0;
    p--;
    while (p > text && p[-1] != '\n') p--;
    *body = p;
    if ((size_t)(text + total - p) >= sizeof tail) return 0;
    memcpy(tail, p, (size_t)(text + total - p));
    tail[text + total - p - 1] = 0;
    t = tail;
    if ((w = zero__ck_word(&t)) == NULL || strcmp(w, "end") != 0 || !zero__ck_u64(&t, want) || *t) return 0;
    *got = zero__ck_sum(text, (size_t)(p - text));
    return *got == *want ? 1 : -1;
}

/* The first line, the version, is checked first (a newer format may change everything
   after it), then the checksum line's verdict; the cursor then ends before that line.
   On failure m is freed and msg says why. */
static zero_result zero__ck_read_version(const zero_allocator *a, zero__ck_cur *c, zero__ck_manifest *m,
                                         const char *path, char *msg, size_t msgn) {
    char *body = NULL, *rest;
    uint64_t want = 0, sum = 0;
    int64_t v;
    int verdict = zero__ck_end_line(m->text, (int64_t)(c->end - m->text), &body, &want, &sum);
    if (!zero__ck_kw(c, "zero-checkpoint", &rest) || !zero__ck_i64(&rest, 1, 1000000, &v) || *rest)
        return zero__ck_malformed(a, m, path, c->line, msg, msgn);
    if (v > ZERO__CK_VERSION) {
        zero__ck_manifest_free(a, m);
        snprintf(msg, msgn, "%.300s: format version %lld is newer than this zero.h reads (%d)", path, (long long)v,
                 ZERO__CK_VERSION);
        return ZERO_ERR_VERSION;
    }
    m->version = (int)v;
    if (verdict < 0) {
        zero__ck_manifest_free(a, m);
        snprintf(msg, msgn, "%.300s: checksum mismatch (stored %016llx, computed %016llx)", path,
                 (unsigned long long)want, (unsigned long long)sum);
        return ZERO_ERR_CORRUPT;
    }
    if (verdict == 0) return zero__ck_malformed(a, m, path, c->line, msg, msgn);
    c->end = body;
    return ZERO_OK;
}

/* the save's settings: generation to good_steps, a line each; 0: a line is malformed */
static int zero__ck_read_settings(zero__ck_cur *c, zero__ck_manifest *m) {
    char *rest, *e;
    int64_t v;
    double d;
    if (!zero__ck_kw(c, "generation", &rest) || !zero__ck_u64(&rest, &m->gen) || *rest) return 0;
    if (!zero__ck_kv(c, "stage", 0, 3, &v)) return 0;
    m->stage = (int)v;
    if (!zero__ck_kv(c, "world", 1, ZERO__MAX_RANKS, &v)) return 0;
    m->world = (int)v;
    if (!zero__ck_kw(c, "param_dtype", &rest) || (m->pdt = zero__ck_dtype(rest)) == ZERO_DTYPE_DEFAULT) return 0;
    if (!zero__ck_kw(c, "grad_dtype", &rest) || (m->gdt = zero__ck_dtype(rest)) == ZERO_DTYPE_DEFAULT) return 0;
    if (!zero__ck_kw(c, "grad_accum_dtype", &rest) || (m->gadt = zero__ck_dtype(rest)) == ZERO_DTYPE_DEFAULT) return 0;
    if (!zero__ck_kw(c, "optimizer", &rest)) return 0;
    if (strcmp(rest, "adamw") == 0) m->optim = ZERO_OPTIM_ADAMW;
    else if (strcmp(rest, "sgd") == 0) m->optim = ZERO_OPTIM_SGD;
    else return 0;
    if (!zero__ck_kv(c, "moments", 0, 2, &v)) return 0;
    m->moments = (int)v;
    if (!zero__ck_kv(c, "steps", 0, INT64_MAX, &m->steps)) return 0;
    if (!zero__ck_kv(c, "skipped", 0, INT64_MAX, &m->skipped)) return 0;
    if (!zero__ck_kw(c, "loss_scale", &rest)) return 0;
    d = strtod(rest, &e);
    if (*e || !(d > 0) || d > 3.4e38) return 0;
    m->loss_scale = (float)d;
    return zero__ck_kv(c, "good_steps", 0, INT32_MAX, &m->good_steps);     /* an i32 in the shards */
}

/* a record key: 1-64 characters of A-Z a-z 0-9 _ . - */
static int zero__ck_key_ok(const char *k) {
    size_t n = 0;
    if (!k) return 0;
    for (; k[n]; n++)
        if (n >= ZERO__CK_KEY_MAX || !((k[n] >= 'a' && k[n] <= 'z') || (k[n] >= 'A' && k[n] <= 'Z') ||
                                       (k[n] >= '0' && k[n] <= '9') || k[n] == '_' || k[n] == '.' || k[n] == '-'))
            return 0;
    return n > 0;
}
static int zero__ck_hexval(char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}
/* format 2's micro_batches and record lines, each value decoded into m->recs (every key
   once); 1, 0 (malformed), -1 (out of memory) */
static int zero__ck_read_records(const zero_allocator *a, zero__ck_cur *c, zero__ck_manifest *m) {
    char *rest, *hex, *key;
    int64_t v, q;
    int i, k;
    if (!zero__ck_kv(c, "micro_batches", 0, INT64_MAX, &m->micro)) return 0;
    if (!zero__ck_kv(c, "records", 0, ZERO_CKPT_MAX_RECORDS, &v) || v > zero__ck_lines_left(c)) return 0;
    if (v > 0 && !(m->recs = (zero__ck_rec *)zero__raw_alloc(a, sizeof *m->recs * (size_t)v))) return -1;
    for (i = 0; i < (int)v; i++) {
        zero__ck_rec *rc = &m->recs[i];
        memset(rc, 0, sizeof *rc);
        m->nrec = i + 1;
        if (!zero__ck_kw(c, "record", &rest) || !zero__ck_i64(&rest, 0, ZERO_CKPT_RECORD_MAX, &rc->bytes) ||
            !(hex = zero__ck_word(&rest)) || !(key = zero__ck_word(&rest)) || *rest || !zero__ck_key_ok(key))
            return 0;
        if (rc->bytes == 0 ? strcmp(hex, "-") != 0 : (int64_t)strlen(hex) != 2 * rc->bytes) return 0;
        for (k = 0; k < i; k++)
            if (strcmp(m->recs[k].key, key) == 0) return 0;
        memcpy(rc->key, key, strlen(key) + 1);
        if (rc->bytes && !(rc->data = (unsigned char *)zero__raw_alloc(a, (size_t)rc->bytes))) return -1;
        for (q = 0; q < rc->bytes; q++) {
            int hi = zero__ck_hexval(hex[2 * q]), lo = zero__ck_hexval(hex[2 * q + 1]);
            if (hi < 0 || lo < 0) return 0;
            rc->data[q] = (unsigned char)(hi * 16 + lo);
        }
    }
    return 1;
}

/* the model: the module lines, then the param lines; 1, 0 (malformed), -1 (out of memory) */
static int zero__ck_read_model(const zero_allocator *a, zero__ck_cur *c, zero__ck_manifest *m) {
    char *rest;
    int64_t v;
    int i, k;
    if (!zero__ck_kv(c, "modules", 1, 1 << 20, &v) || v > zero__ck_lines_left(c)) return 0;
    m->nmod = (int)v;
    if (!(m->mods = (zero__ck_module *)zero__raw_alloc(a, sizeof *m->mods * (size_t)m->nmod))) return -1;
    for (i = 0; i < m->nmod; i++) {
        if (!zero__ck_kw(c, "module", &rest) || !zero__ck_i64(&rest, 0, 1, &v) || !*rest) return 0;
        m->mods[i].frozen = (int)v;
        m->mods[i].name = rest;
    }
    if (!zero__ck_kv(c, "params", 1, 1 << 20, &v) || v > zero__ck_lines_left(c)) return 0;
    m->nparam = (int)v;
    if (!(m->params = (zero__ck_param *)zero__raw_alloc(a, sizeof *m->params * (size_t)m->nparam))) return -1;
    for (i = 0; i < m->nparam; i++) {
        zero__ck_param *p = &m->params[i];
        memset(p, 0, sizeof *p);
        if (!zero__ck_kw(c, "param", &rest) || !zero__ck_i64(&rest, 0, m->nmod - 1, &v)) return 0;
        p->module = (int)v;
        if (!zero__ck_i64(&rest, 1, ZERO_MAX_DIMS, &v)) return 0;
        p->ndim = (int)v;
        p->numel = 1;
        for (k = 0; k < p->ndim; k++)
            if (!zero__ck_i64(&rest, 1, (int64_t)1 << 48, &p->shape[k]) ||
                !zero__mul(p->numel, p->shape[k], &p->numel) || p->numel > ((int64_t)1 << 48)) return 0;
        if (!*rest) return 0;
        p->name = rest;
    }
    return 1;
}

/* the layout: the file lines, then the range lines, and nothing after them; 1, 0
   (malformed), -1 (out of memory) */
static int zero__ck_read_layout(const zero_allocator *a, zero__ck_cur *c, zero__ck_manifest *m) {
    char *rest;
    int64_t v;
    int i;
    if (!zero__ck_kv(c, "files", 1, ZERO__MAX_RANKS, &v) || v != m->world) return 0;
    m->nfile = (int)v;
    if (!(m->files = (zero__ck_file *)zero__raw_alloc(a, sizeof *m->files * (size_t)m->nfile))) return -1;
    for (i = 0; i < m->nfile; i++) {
        if (!zero__ck_kw(c, "file", &rest) || !zero__ck_i64(&rest, i, i, &v) ||
            !zero__ck_i64(&rest, ZERO__CK_HEADER, INT64_MAX, &m->files[i].bytes) || !*rest ||
            strchr(rest, '/') || strchr(rest, ' '))
            return 0;
        m->files[i].rank = i;
        m->files[i].name = rest;
    }
    /* a range line is "range" and seven numbers, the offset at least 64: 21 bytes or more */
    if (!zero__ck_kv(c, "ranges", 0, INT32_MAX - 1, &v) || v > zero__ck_lines_left(c) || v > (c->end - c->p) / 21)
        return 0;
    m->nrange = (int)v;
    if (!(m->ranges = (zero__ck_range *)zero__raw_alloc(a, sizeof *m->ranges * (size_t)(m->nrange + 1)))) return -1;
    for (i = 0; i < m->nrange; i++) {
        zero__ck_range *r = &m->ranges[i];
        if (!zero__ck_kw(c, "range", &rest) || !zero__ck_i64(&rest, 0, m->nparam - 1, &v)) return 0;
        r->param = (int)v;
        if (!zero__ck_i64(&rest, 0, m->world - 1, &v)) return 0;
        r->rank = (int)v;
        if (!zero__ck_i64(&rest, 0, m->params[r->param].numel - 1, &r->begin) ||
            !zero__ck_i64(&rest, r->begin + 1, m->params[r->param].numel, &r->end) ||
            !zero__ck_i64(&rest, ZERO__CK_HEADER, INT64_MAX, &r->offset) || !zero__ck_u64(&rest, &r->sum) ||
            !zero__ck_u64(&rest, &r->msum) || *rest)
            return 0;
    }
    return c->p == c->end;
}

/* Reads and checks dir/manifest. On failure returns the code and writes a sentence
   naming the file into msg. The checks: complete lines, a known version (checked
   first: a newer format may change everything after it), the checksum line, every
   number in range, ranges inside their params; then zero__ck_validate. */
static zero_result zero__ck_read_manifest(const zero_allocator *a, const char *dir, zero__ck_manifest *m,
                                          char *msg, size_t msgn) {
    char path[4096];
    zero__ck_cur c;
    zero_result r;
    int ok;
    memset(m, 0, sizeof *m);
    zero__ck_join(path, sizeof path, dir, "/manifest", "");
    if ((r = zero__ck_read_text(a, path, m, &c, msg, msgn)) != ZERO_OK) return r;
    if ((r = zero__ck_read_version(a, &c, m, path, msg, msgn)) != ZERO_OK) return r;
    ok = zero__ck_read_settings(&c, m);
    m->micro = -1;
    if (ok > 0 && m->version >= 2) ok = zero__ck_read_records(a, &c, m);
    if (ok > 0) ok = zero__ck_read_model(a, &c, m);
    if (ok > 0) ok = zero__ck_read_layout(a, &c, m);
    if (ok == 0) return zero__ck_malformed(a, m, path, c.line, msg, msgn);
    if (ok < 0) {
        zero__ck_manifest_free(a, m);
        snprintf(msg, msgn, "%.300s: out of memory", path);
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    /* each line is well formed; now the whole (layout, coverage, names) */
    if ((r = zero__ck_validate(a, m, path, msg, msgn)) != ZERO_OK) zero__ck_manifest_free(a, m);
    return r;
}

/* Opens a shard file and checks its size and header. */
static zero_result zero__ck_open_shard(const char *dir, const zero__ck_manifest *m, int rank, int *fd_out,
                                       char *msg, size_t msgn) {
    char path[4096], hdr[ZERO__CK_HEADER];
    struct stat st;
    uint32_t u[4];
    uint64_t gen;
    int fd, rr;
    zero__ck_join(path, sizeof path, dir, "/", m->files[rank].name);
    *fd_out = -1;
    if ((fd = zero__ck_open(path, O_RDONLY, 0)) < 0) {
        snprintf(msg, msgn, "%.300s: cannot open: %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    if (fstat(fd, &st) != 0) { zero__ck_close(fd); snprintf(msg, msgn, "%.300s: cannot stat", path); return ZERO_ERR_IO; }
    if ((int64_t)st.st_size != m->files[rank].bytes) {
        zero__ck_close(fd);
        snprintf(msg, msgn, "%.300s: %lld bytes, the manifest says %lld (truncated or foreign file)", path,
                 (long long)st.st_size, (long long)m->files[rank].bytes);
        return ZERO_ERR_CORRUPT;
    }
    rr = zero__ck_pread(fd, hdr, sizeof hdr, 0);
    memcpy(u, hdr + 8, 16);
    memcpy(&gen, hdr + 24, 8);
    {
        int64_t steps, skipped;
        float scale;
        int32_t good;
        uint64_t hs;
        memcpy(&steps, hdr + 32, 8);
        memcpy(&skipped, hdr + 40, 8);
        memcpy(&scale, hdr + 48, 4);
        memcpy(&good, hdr + 52, 4);
        memcpy(&hs, hdr + 56, 8);
        if (rr == 1 && (hs != zero__ck_sum(hdr, 56) || steps != m->steps || skipped != m->skipped ||
                        scale != m->loss_scale || good != m->good_steps))
            rr = 0;
    }
    if (rr != 1 || memcmp(hdr, ZERO__CK_MAGIC, 8) != 0 || u[0] != ZERO__CK_SHARD_VERSION || (int)u[1] != rank ||
        (int)u[2] != m->world || u[3] != 0 || gen != m->gen) {
        zero__ck_close(fd);
        snprintf(msg, msgn, "%.300s: bad header (not shard %d of %d, generation %llu, of this save)", path, rank, m->world,
                 (unsigned long long)m->gen);
        return ZERO_ERR_CORRUPT;
    }
    *fd_out = fd;
    return ZERO_OK;
}

/* ---- save ------------------------------------------------------------------------- */
static zero_result zero__ck_check(zero_ctx *ctx, const char *fn, const char *path) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, fn)) != ZERO_OK) return r;
    if (!path) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: path is NULL", fn);
    if (!*path) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "%s: path is empty", fn);
    for (i = 0; i < ctx->num_modules; i++)
        if (ctx->modules[i].gat.fetched || ctx->modules[i].grad.ready)
            return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                              "%s: module '%s' is fetched or has gradients pending; call it between steps", fn,
                              ctx->modules[i].name);
    return zero__drain(ctx);
}

/* A load changed the params under the stage-3 gathers: the modules gathered between
   steps (persistent, prefetched, kept) hold the old values. Drop them and gather again
   as zero_step left them (every rank makes the same decisions: the same collectives). */
static zero_result zero__ck_regather(zero_ctx *ctx) {
    zero_result r = ZERO_OK, r2;
    int i, any = 0;
    if (ctx->desc.stage != 3) return ZERO_OK;
    for (i = 0; i < ctx->num_modules; i++) ctx->modules[i].zpp.sec_fresh = 0;
    for (i = 0; i < ctx->num_modules; i++)
        if (ctx->modules[i].gat.live) {
            any = 1;
            if ((r2 = zero__drop(ctx, i)) != ZERO_OK && r == ZERO_OK) r = r2;
        }
    if (any && ctx->sched.active && r == ZERO_OK) zero__stage3_step_start(ctx);
    return r;
}

/* the highest generation named by any file in dir (shards, temporaries, manifest) */
static uint64_t zero__ck_max_gen(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t g = 0;
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        const char *s = strstr(e->d_name, ".g");
        if (strncmp(e->d_name, "rank", 4) == 0 && s) {
            uint64_t v = strtoull(s + 2, NULL, 10);
            if (v > g) g = v;
        }
    }
    closedir(d);
    return g;
}

/* removes shard files of other generations and temporaries (rank 0, after the commit) */
static void zero__ck_cleanup(const char *dir, uint64_t gen) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        const char *s = strstr(e->d_name, ".g");
        int stale = strcmp(e->d_name, "manifest.tmp") == 0;
        if (strncmp(e->d_name, "rank", 4) == 0 && s) {
            char *end;
            uint64_t v = strtoull(s + 2, &end, 10);
            stale = v != gen || *end != 0;
        }
        if (stale) {
            zero__ck_join(path, sizeof path, dir, "/", e->d_name);
            (void)unlink(path);
        }
    }
    closedir(d);
}

/* one chunk of part q (0: weights, 1, 2: moments) of param p's record, which starts at
   param-local element b: its elements [o, o+c) from the state (si: the state index of
   b, -1: none) or the params, hashed into h (when not NULL), written at pos */
static int zero__ck_put(zero_ctx *ctx, int fd, int q, int p, int64_t b, int64_t si, int64_t o, int64_t c, int64_t pos,
                        float *buf, zero__ck_hash *h, zero_result *r, int *err) {
    if (q > 0 || (si >= 0 && ctx->tier.vt->has_master(ctx))) *r = zero__ck_state_read(ctx, q, si + o, c, buf, "zero_save");
    else *r = zero__ck_param_read(ctx, p, b + o, c, buf, "zero_save");
    if (*r != ZERO_OK) return 0;
    if (h) zero__ck_hash_add(h, buf, (size_t)c * 4);
    if (!zero__ck_pwrite(fd, buf, (size_t)c * 4, pos)) { *err = errno; return 0; }
    return 1;
}

/* the shard's 64-byte header (layout at ZERO__CK_HEADER) for this rank and generation */
static void zero__ck_shard_header(const zero_ctx *ctx, uint64_t gen, char *hdr) {
    uint32_t u[4];
    int32_t good = (int32_t)ctx->opt.good_steps;
    uint64_t hs;
    memset(hdr, 0, ZERO__CK_HEADER);
    memcpy(hdr, ZERO__CK_MAGIC, 8);
    u[0] = ZERO__CK_SHARD_VERSION; u[1] = (uint32_t)ctx->rank; u[2] = (uint32_t)ctx->world; u[3] = 0;
    memcpy(hdr + 8, u, 16);
    memcpy(hdr + 24, &gen, 8);
    memcpy(hdr + 32, &ctx->opt.steps, 8);
    memcpy(hdr + 40, &ctx->opt.skipped, 8);
    memcpy(hdr + 48, &ctx->opt.loss_scale, 4);
    memcpy(hdr + 52, &good, 4);
    hs = zero__ck_sum(hdr, 56);
    memcpy(hdr + 56, &hs, 8);
}

/* A record from the NVMe tier, whose n elements start at param-local b (state index
   si) and whose kp moments follow its weights at off: window by window, every part of
   a window from the one tier block that holds it (a block is read once, not once per
   part); v, whose checksum must follow all of m, is hashed afterwards, read back from
   the shard. 1: written; 0: failed (*r, *err as zero__ck_put). */
static int zero__ck_put_tiered(zero_ctx *ctx, int fd, int p, int64_t b, int64_t si, int64_t n, int kp, int64_t off,
                               float *buf, zero__ck_hash *hw, zero__ck_hash *hm, zero_result *r, int *err) {
    int64_t o, c;
    int q, ok = 1;
    for (o = 0; o < n && ok; o += c) {
        c = n - o < ZERO__CK_CHUNK ? n - o : ZERO__CK_CHUNK;
        if (si >= 0 && ctx->tier.vt->run(ctx, si + o) < c) c = ctx->tier.vt->run(ctx, si + o);
        for (q = 0; q <= kp && ok; q++)
            ok = zero__ck_put(ctx, fd, q, p, b, si, o, c, off + ((int64_t)q * n + o) * 4, buf,
                              q == 0 ? hw : q == 1 ? hm : NULL, r, err);
    }
    for (o = 0; o < n && ok && kp == 2; o += ZERO__CK_CHUNK) {
        c = n - o < ZERO__CK_CHUNK ? n - o : ZERO__CK_CHUNK;
        if (zero__ck_pread(fd, buf, (size_t)c * 4, off + (2 * n + o) * 4) != 1) { ok = 0; *err = errno ? errno : EIO; }
        else zero__ck_hash_add(hm, buf, (size_t)c * 4);
    }
    return ok;
}

/* Param p's record in this rank's shard at *off (advanced past it), its checksums in
   sums[2p], sums[2p+1]; in memory part by part, each hashed in file order. 1: written
   (or empty); 0: failed (*r, *err as zero__ck_put). */
static int zero__ck_put_record(zero_ctx *ctx, int fd, int p, int K, int64_t *off, float *buf, uint64_t *sums,
                               zero_result *r, int *err) {
    int64_t b, e, n, si, o, c;
    int kp = ctx->modules[ctx->params[p].module].frozen ? 0 : K, q, ok = 1;
    zero__ck_hash hw, hm;
    zero__ck_slice(ctx, p, ctx->prank, ctx->world, &b, &e);
    sums[2 * p] = sums[2 * p + 1] = 0;
    if ((n = e - b) == 0) return 1;
    si = zero__ck_state_idx(ctx, p, b);
    zero__ck_hash_init(&hw);
    zero__ck_hash_init(&hm);        /* the moments share one checksum, m then v */
    if (!ctx->tier.vt->blocked) {
        for (q = 0; q <= kp && ok; q++)
            for (o = 0; o < n && ok; o += ZERO__CK_CHUNK) {
                c = n - o < ZERO__CK_CHUNK ? n - o : ZERO__CK_CHUNK;
                ok = zero__ck_put(ctx, fd, q, p, b, si, o, c, *off + ((int64_t)q * n + o) * 4, buf, q ? &hm : &hw, r,
                                  err);
            }
    } else {
        ok = zero__ck_put_tiered(ctx, fd, p, b, si, n, kp, *off, buf, &hw, &hm, r, err);
    }
    sums[2 * p] = zero__ck_hash_end(&hw);
    if (kp) sums[2 * p + 1] = zero__ck_hash_end(&hm);
    *off += n * (1 + kp) * 4;
    return ok;
}

/* Writes this rank's shard; sums[2i], sums[2i+1]: the checksums of param i's record's
   weights and moments; returns the file's bytes or -1 (msg says why, naming the file;
   *code the result). Streamed: a record is read from the state and written
   ZERO__CK_CHUNK elements at a time, hashed on the way, so memory is one chunk however
   large the record or the state on the NVMe tier. */
static int64_t zero__ck_write_shard(zero_ctx *ctx, const char *dir, uint64_t gen, uint64_t *sums, zero_result *code,
                                    char *msg, size_t msgn) {
    const zero_allocator *a = &ctx->desc.allocator;
    char path[4096], tmp[4096], hdr[ZERO__CK_HEADER], nm[64];
    int K = zero__ck_moments(&ctx->desc), fd, i, ok = 1, err = 0;
    int64_t off = ZERO__CK_HEADER;
    float *buf;
    zero_result r = ZERO_OK;
    *code = ZERO_ERR_IO;
    snprintf(nm, sizeof nm, "/rank%d.g%llu", ctx->rank, (unsigned long long)gen);
    zero__ck_join(path, sizeof path, dir, nm, "");
    zero__ck_join(tmp, sizeof tmp, path, ".tmp", "");
    buf = (float *)zero__raw_alloc(a, (size_t)ZERO__CK_CHUNK * 4);
    if (!buf) { *code = ZERO_ERR_OUT_OF_MEMORY; snprintf(msg, msgn, "%.300s: out of memory", path); return -1; }
    fd = zero__ck_open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);     /* read back: the NVMe tier's v */
    if (fd < 0) {
        snprintf(msg, msgn, "%.300s: cannot create: %s", tmp, strerror(errno));
        zero__raw_free(a, buf);
        return -1;
    }
    zero__ck_shard_header(ctx, gen, hdr);
    if (!(ok = zero__ck_pwrite(fd, hdr, sizeof hdr, 0))) err = errno;
    for (i = 0; i < ctx->num_params && ok; i++) ok = zero__ck_put_record(ctx, fd, i, K, &off, buf, sums, &r, &err);
    zero__raw_free(a, buf);
    if (ok && fsync(fd) != 0) { ok = 0; err = errno; }
    if (zero__ck_close(fd) != 0 && ok) { ok = 0; err = errno; }
    if (ok && rename(tmp, path) != 0) { ok = 0; err = errno; }
    if (!ok) {
        if (r != ZERO_OK) {     /* reading the state failed (the NVMe tier): its message says where */
            *code = r;
            snprintf(msg, msgn, "%.200s: not written: %.250s", path, zero__last_err(ctx));
        } else {
            snprintf(msg, msgn, "%.300s: write failed: %s", path, strerror(err));
        }
        (void)unlink(tmp);
        return -1;
    }
    return off;
}

static zero_result zero__ck_write_manifest(zero_ctx *ctx, const char *dir, uint64_t gen, const uint64_t *all,
                                           int stride, char *msg, size_t msgn) {
    const zero_allocator *a = &ctx->desc.allocator;
    const zero_desc *d = &ctx->desc;
    int K = zero__ck_moments(d), i, k, j, fd, ok;
    size_t cap = 4096, len = 0;
    char *t = NULL, path[4096], tmp[4096];
    int64_t b, e;
    /* the text: generous size estimate first (names, numbers), then exact formatting */
    for (i = 0; i < ctx->num_modules; i++) cap += strlen(ctx->modules[i].name) + 32;
    for (i = 0; i < ctx->num_params; i++) cap += strlen(ctx->params[i].name) + 32 + 22 * ZERO_MAX_DIMS;
    cap += (size_t)ctx->world * (size_t)(ctx->num_params + 1) * 100;
    for (i = 0; i < ctx->ckrec.n; i++) cap += 2 * (size_t)ctx->ckrec.rec[i].bytes + ZERO__CK_KEY_MAX + 48;
    if (!(t = (char *)zero__raw_alloc(a, cap))) { snprintf(msg, msgn, "manifest: out of memory"); return ZERO_ERR_OUT_OF_MEMORY; }
#define ZERO__CK_P(...) (len += (size_t)snprintf(t + len, cap - len, __VA_ARGS__))
    ZERO__CK_P("zero-checkpoint %d\ngeneration %llx\nstage %d\nworld %d\nparam_dtype %s\ngrad_dtype %s\n"
               "grad_accum_dtype %s\noptimizer %s\nmoments %d\n",
               ZERO__CK_VERSION, (unsigned long long)gen, d->stage, ctx->world, zero__dtype_name(d->param_dtype),
               zero__dtype_name(d->grad_dtype), zero__dtype_name(d->grad_accum_dtype),
               d->optim.type == ZERO_OPTIM_SGD ? "sgd" : "adamw", K);
    ZERO__CK_P("steps %lld\nskipped %lld\nloss_scale %.9g\ngood_steps %lld\n", (long long)ctx->opt.steps,
               (long long)ctx->opt.skipped, (double)ctx->opt.loss_scale, (long long)ctx->opt.good_steps);
    /* format 2: the data position and the trainer's records, "record <bytes> <hex or -> <key>" */
    ZERO__CK_P("micro_batches %lld\nrecords %d\n", (long long)ctx->opt.micro, ctx->ckrec.n);
    for (i = 0; i < ctx->ckrec.n; i++) {
        const zero__ck_rec *rc = &ctx->ckrec.rec[i];
        static const char hx[] = "0123456789abcdef";
        int64_t q;
        ZERO__CK_P("record %lld ", (long long)rc->bytes);
        if (rc->bytes == 0) ZERO__CK_P("-");
        for (q = 0; q < rc->bytes && len + 2 < cap; q++) {
            t[len++] = hx[rc->data[q] >> 4];
            t[len++] = hx[rc->data[q] & 15];
        }
        ZERO__CK_P(" %s\n", rc->key);
    }
    ZERO__CK_P("modules %d\n", ctx->num_modules);
    for (i = 0; i < ctx->num_modules; i++) ZERO__CK_P("module %d %s\n", ctx->modules[i].frozen, ctx->modules[i].name);
    ZERO__CK_P("params %d\n", ctx->num_params);
    for (i = 0; i < ctx->num_params; i++) {
        const zero__param_rec *p = &ctx->params[i];
        ZERO__CK_P("param %d %d", p->module, p->ndim);
        for (k = 0; k < p->ndim; k++) ZERO__CK_P(" %lld", (long long)p->shape[k]);
        ZERO__CK_P(" %s\n", p->name);
    }
    ZERO__CK_P("files %d\n", ctx->world);
    for (k = 0; k < ctx->world; k++)
        ZERO__CK_P("file %d %lld rank%d.g%llu\n", k, (long long)all[(size_t)k * (size_t)stride + 1], k, (unsigned long long)gen);
    j = 0;
    for (k = 0; k < ctx->world; k++)
        for (i = 0; i < ctx->num_params; i++) {
            zero__ck_slice(ctx, i, zero__part(ctx, k), ctx->world, &b, &e);
            if (b < e) j++;
        }
    ZERO__CK_P("ranges %d\n", j);
    for (k = 0; k < ctx->world; k++) {
        int64_t off = ZERO__CK_HEADER;
        for (i = 0; i < ctx->num_params; i++) {
            int kp = ctx->modules[ctx->params[i].module].frozen ? 0 : K;
            zero__ck_slice(ctx, i, zero__part(ctx, k), ctx->world, &b, &e);
            if (b >= e) continue;
            ZERO__CK_P("range %d %d %lld %lld %lld %016llx %016llx\n", i, k, (long long)b, (long long)e,
                       (long long)off, (unsigned long long)all[(size_t)k * (size_t)stride + 2 + 2 * (size_t)i],
                       (unsigned long long)all[(size_t)k * (size_t)stride + 3 + 2 * (size_t)i]);
            off += (e - b) * 4 * (1 + kp);
        }
    }
    ZERO__CK_P("end %016llx\n", (unsigned long long)zero__ck_sum(t, len));
#undef ZERO__CK_P
    zero__ck_join(path, sizeof path, dir, "/manifest", "");
    zero__ck_join(tmp, sizeof tmp, dir, "/manifest.tmp", "");
    fd = zero__ck_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ok = fd >= 0 && len < cap && zero__ck_pwrite(fd, t, len, 0);
    if (fd >= 0) { if (ok) ok = fsync(fd) == 0; if (zero__ck_close(fd) != 0) ok = 0; }
    zero__raw_free(a, t);
    if (ok) ok = rename(tmp, path) == 0;          /* the commit point */
    if (!ok) {
        snprintf(msg, msgn, "%.300s: write failed: %s", path, strerror(errno));
        (void)unlink(tmp);
        return ZERO_ERR_IO;
    }
    zero__ck_fsync_dir(dir);
    return ZERO_OK;
}

/* Every rank learns every rank's status; returns the first failure (lowest rank) or OK.
   Up to 32 ranks, each status travels with its message (an all-gather of 256 bytes a
   rank, on the stack), so every rank's error names the failing rank's file; above 32,
   one all-reduce counts failures. */
#define ZERO__CK_AGREE_REC 256
static zero_result zero__ck_agree(zero_ctx *ctx, const char *fn, zero_result mine, const char *mymsg) {
    char rec[ZERO__CK_AGREE_REC], all[32 * ZERO__CK_AGREE_REC];
    zero_result r;
    int k;
    int32_t code;
    if (ctx->world > 32) {
        double v[2];
        v[0] = mine != ZERO_OK ? 1.0 : 0.0;
        v[1] = mine != ZERO_OK ? (double)-mine : 0.0;
        if ((r = zero__wait(ctx, zero__post_allreduce_f64(ctx, v, 2))) != ZERO_OK) return r;
        if (mine != ZERO_OK) return mine;
        if (v[0] > 0)
            return zero__fail(ctx, ZERO_ERR_MISMATCH, ZERO_LOGITEM_CKPT, "%s: %g rank(s) failed", fn, v[0]);
        return ZERO_OK;
    }
    memset(rec, 0, sizeof rec);
    code = (int32_t)mine;
    memcpy(rec, &code, 4);
    if (mine != ZERO_OK && mymsg) snprintf(rec + 4, sizeof rec - 4, "%s", mymsg);
    r = zero__wait(ctx, zero__post_allgather(ctx, rec, all, ZERO__CK_AGREE_REC));
    if (r != ZERO_OK) return r;
    if (mine != ZERO_OK) return mine;
    for (k = 0; k < ctx->world; k++) {
        char *o = all + (size_t)k * ZERO__CK_AGREE_REC;
        memcpy(&code, o, 4);
        if (code == ZERO_OK) continue;
        o[ZERO__CK_AGREE_REC - 1] = 0;
        if (code > 0 || code < ZERO_ERR_VERSION) code = ZERO_ERR_COMM;     /* garbage from a broken peer */
        return zero__fail(ctx, (zero_result)code, ZERO_LOGITEM_CKPT, "%s: rank %d failed (%s): %s", fn, k,
                          zero__result_name((zero_result)code), o[4] ? o + 4 : "see its error");
    }
    return ZERO_OK;
}

/* ---- load ------------------------------------------------------------------------- */
/* The manifest's model must be this context's: the same modules (name, frozen) and
   params (module, name, shape) in the same order, and the same optimizer state. */
/* "[5, 7]" */
static void zero__ck_shape_str(char *out, size_t n, int ndim, const int64_t *shape) {
    size_t len = 0;
    int k;
    out[0] = 0;
    len += (size_t)snprintf(out, n, "[");
    for (k = 0; k < ndim && len < n; k++) len += (size_t)snprintf(out + len, n - len, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (len < n) snprintf(out + len, n - len, "]");
}
static zero_result zero__ck_match(const zero_ctx *ctx, const zero__ck_manifest *m, const char *dir,
                                  char *msg, size_t msgn) {
    int i, k;
    if (m->nmod != ctx->num_modules || m->nparam != ctx->num_params) {
        snprintf(msg, msgn, "%.300s/manifest: a different model (%d modules, %d params; this one has %d, %d)", dir,
                 m->nmod, m->nparam, ctx->num_modules, ctx->num_params);
        return ZERO_ERR_MISMATCH;
    }
    for (i = 0; i < m->nmod; i++)
        if (strcmp(m->mods[i].name, ctx->modules[i].name) != 0 || m->mods[i].frozen != ctx->modules[i].frozen) {
            snprintf(msg, msgn, "%.300s/manifest: module %d is '%s'%s; this model's is '%s'%s", dir, i, m->mods[i].name,
                     m->mods[i].frozen ? " (frozen)" : "", ctx->modules[i].name, ctx->modules[i].frozen ? " (frozen)" : "");
            return ZERO_ERR_MISMATCH;
        }
    for (i = 0; i < m->nparam; i++) {
        const zero__param_rec *p = &ctx->params[i];
        int same = m->params[i].module == p->module && m->params[i].ndim == p->ndim &&
                   strcmp(m->params[i].name, p->name) == 0;
        for (k = 0; same && k < p->ndim; k++) same = m->params[i].shape[k] == p->shape[k];
        if (!same) {
            char a[16 * ZERO_MAX_DIMS + 4], b[16 * ZERO_MAX_DIMS + 4];
            zero__ck_shape_str(a, sizeof a, m->params[i].ndim, m->params[i].shape);
            zero__ck_shape_str(b, sizeof b, p->ndim, p->shape);
            size_t len;
            snprintf(msg, msgn, "%.300s/manifest: param %d is '%s.%s' ", dir, i, m->mods[m->params[i].module].name,
                     m->params[i].name);
            len = strlen(msg);
            snprintf(msg + len, msgn - len, "%s in the checkpoint, this model's is '%s.%s' %s", a,
                     ctx->modules[p->module].name, p->name, b);
            return ZERO_ERR_MISMATCH;
        }
    }
    if (m->optim != ctx->desc.optim.type || m->moments != zero__ck_moments(&ctx->desc)) {
        snprintf(msg, msgn, "%.300s/manifest: optimizer %s with %d moment(s); this context has %s with %d", dir,
                 m->optim == ZERO_OPTIM_SGD ? "sgd" : "adamw", m->moments,
                 ctx->desc.optim.type == ZERO_OPTIM_SGD ? "sgd" : "adamw", zero__ck_moments(&ctx->desc));
        return ZERO_ERR_MISMATCH;
    }
    return ZERO_OK;
}

/* What zero__ck_verify_range hands its weights to as it reads them (zero_ckpt_export):
   elements [o, o+n) of the record (o counted from its begin); a failure writes msg. The
   record's checksums are known only after its last chunk: a sink must be able to undo. */
typedef zero_result (*zero__ck_sink)(void *user, const zero__ck_range *r, int64_t o, const float *w, int64_t n,
                                     char *msg, size_t msgn);

/* Reads one record's weights (and its moments when `moments`) ZERO__CK_CHUNK elements
   at a time into buf, checking each part's checksum; the weights also go to sink (when
   not NULL) on the way. */
static zero_result zero__ck_verify_range(const char *dir, const zero__ck_manifest *m, const zero__ck_range *r, int fd,
                                         int moments, float *buf, zero__ck_sink sink, void *user, char *msg, size_t msgn) {
    int64_t n = r->end - r->begin, total = moments ? zero__ck_range_bytes(m, r) / 4 : n, o;
    zero__ck_hash hw, hm;
    int wrong_w, wrong_m;
    zero__ck_hash_init(&hw);
    zero__ck_hash_init(&hm);
    for (o = 0; o < total; o += ZERO__CK_CHUNK) {
        int64_t c = total - o < ZERO__CK_CHUNK ? total - o : ZERO__CK_CHUNK, cw = o < n ? (n - o < c ? n - o : c) : 0;
        int rr = zero__ck_pread(fd, buf, (size_t)c * 4, r->offset + o * 4);
        zero_result sr;
        if (rr != 1) {
            snprintf(msg, msgn, "%.300s/%s: %s at offset %lld", dir, m->files[r->rank].name,
                     rr == 0 ? "truncated" : "read error", (long long)(r->offset + o * 4));
            return rr == 0 ? ZERO_ERR_CORRUPT : ZERO_ERR_IO;
        }
        zero__ck_hash_add(&hw, buf, (size_t)cw * 4);
        zero__ck_hash_add(&hm, buf + cw, (size_t)(c - cw) * 4);
        if (sink && cw > 0 && (sr = sink(user, r, o, buf, cw, msg, msgn)) != ZERO_OK) return sr;
    }
    wrong_w = zero__ck_hash_end(&hw) != r->sum;
    wrong_m = total > n && zero__ck_hash_end(&hm) != r->msum;
    if (wrong_w || wrong_m) {
        const zero__ck_param *p = &m->params[r->param];
        snprintf(msg, msgn, "%.200s/%s: checksum mismatch in the %s of param '%s.%s' elements [%lld, %lld) "
                 "(the record at offset %lld)", dir, m->files[r->rank].name, wrong_w ? "weights" : "moments",
                 m->mods[p->module].name, p->name, (long long)r->begin, (long long)r->end, (long long)r->offset);
        return ZERO_ERR_CORRUPT;
    }
    return ZERO_OK;
}

/* The length of the next chunk of param pi from param-local element x (up to hi): at most
   ZERO__CK_CHUNK, and with tier (its state or params on the NVMe tier) wholly outside the
   state [sb, se) or inside it and inside one tier block. */
static int64_t zero__ck_chunk(const zero_ctx *ctx, int pi, int64_t x, int64_t hi, int tier, int64_t sb, int64_t se) {
    int64_t c = hi - x < ZERO__CK_CHUNK ? hi - x : ZERO__CK_CHUNK, run;
    if (tier && x < sb && sb - x < c) c = sb - x;
    if (tier && x >= sb && x < se) {
        if (se - x < c) c = se - x;
        run = ctx->tier.vt->run(ctx, zero__ck_state_idx(ctx, pi, x));
        if (run < c) c = run;
    }
    return c;
}

/* Applies one checked record: the part of its weights this rank needs to the params
   (and the master), its moments where this rank holds optimizer state; streamed, chunk
   by chunk, each chunk's weights and moments together (one pass over the NVMe tier's
   blocks). bw, bm: ZERO__CK_CHUNK floats each. */
static zero_result zero__ck_apply_range(zero_ctx *ctx, const char *dir, const zero__ck_manifest *m,
                                        const zero__ck_range *rg, int fd, int mom, float *bw, float *bm,
                                        char *msg, size_t msgn) {
    int64_t n = rg->end - rg->begin, b, e, sb = 0, se = 0, x, lo, hi, c;
    int K = zero__ck_moments(&ctx->desc), held, state, tier, k, rr = 1;
    zero_result r = ZERO_OK;
    zero__ck_need(ctx, rg->param, &b, &e);
    lo = rg->begin > b ? rg->begin : b;
    hi = rg->end < e ? rg->end : e;
    held = zero__ck_has_state(ctx, rg->param, &sb, &se);
    state = mom && held;
    tier = held && (state || zero__ck_param_in_tier(ctx, rg->param));     /* chunks cut at tier blocks */
    for (x = lo; x < hi && r == ZERO_OK; x += c) {
        int64_t s, t, si;
        c = zero__ck_chunk(ctx, rg->param, x, hi, tier, sb, se);
        if ((rr = zero__ck_pread(fd, bw, (size_t)c * 4, rg->offset + (x - rg->begin) * 4)) != 1) break;
        if ((r = zero__ck_param_write(ctx, rg->param, x, c, bw, "zero_load")) != ZERO_OK) break;
        s = x > sb ? x : sb;
        t = x + c < se ? x + c : se;
        if (!state || s >= t) continue;
        si = zero__ck_state_idx(ctx, rg->param, s);
        if (ctx->tier.vt->has_master(ctx)) r = zero__ck_state_write(ctx, 0, si, t - s, bw + (s - x), "zero_load");
        for (k = 1; k <= K && r == ZERO_OK; k++) {
            rr = zero__ck_pread(fd, bm, (size_t)(t - s) * 4, rg->offset + ((int64_t)k * n + s - rg->begin) * 4);
            if (rr != 1) break;
            r = zero__ck_state_write(ctx, k, si, t - s, bm, "zero_load");
        }
        if (rr != 1) break;
    }
    if (rr != 1) {
        snprintf(msg, msgn, "%.300s/%s: %s while loading (after it was checked)", dir, m->files[rg->rank].name,
                 rr == 0 ? "truncated" : strerror(errno));
        return rr == 0 ? ZERO_ERR_CORRUPT : ZERO_ERR_IO;
    }
    if (r != ZERO_OK) snprintf(msg, msgn, "%s", zero__last_err(ctx));
    return r;
}

/* ---- safetensors ------------------------------------------------------------------
   8-byte little-endian header length N, a JSON header of N bytes (padded with spaces
   to a multiple of 8), then the raw tensors in header order. Names are "module.param". */
typedef struct zero__st_tensor {
    const char *module, *name;
    int ndim;
    const int64_t *shape;
    int64_t numel;
} zero__st_tensor;

static const char *zero__st_dtype_name(zero_dtype t) {
    return t == ZERO_F32 ? "F32" : t == ZERO_BF16 ? "BF16" : "F16";
}

/* the JSON header, padded; *len gets its length (a multiple of 8); NULL on OOM. meta: the
   "__metadata__" object's members (JSON text, names already checked), or NULL */
static char *zero__st_header(const zero_allocator *a, const zero__st_tensor *t, int n, zero_dtype dt, const char *meta,
                             int64_t *len) {
    size_t cap = 64 + (meta ? strlen(meta) + 32 : 0), l = 0;
    int i, k;
    int64_t off = 0, es = (int64_t)zero__dtype_size(dt);
    char *h;
    for (i = 0; i < n; i++) cap += strlen(t[i].module) + strlen(t[i].name) + 96 + 22 * (size_t)t[i].ndim;
    if (!(h = (char *)zero__raw_alloc(a, cap))) return NULL;
#define ZERO__ST_P(...) (l += (size_t)snprintf(h + l, cap - l, __VA_ARGS__))
    ZERO__ST_P("{");
    if (meta && *meta) ZERO__ST_P("\"__metadata__\":{%s}%s", meta, n ? "," : "");
    for (i = 0; i < n; i++) {
        ZERO__ST_P("%s\"%s.%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t[i].module, t[i].name,
                   zero__st_dtype_name(dt));
        for (k = 0; k < t[i].ndim; k++) ZERO__ST_P("%s%lld", k ? "," : "", (long long)t[i].shape[k]);
        ZERO__ST_P("],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + t[i].numel * es));
        off += t[i].numel * es;
    }
    ZERO__ST_P("}");
#undef ZERO__ST_P
    while (l % 8) h[l++] = ' ';
    *len = (int64_t)l;
    return h;
}

/* writes n f32 values as dtype dt at off, in chunks */
static int zero__st_write_values(int fd, const float *v, int64_t n, zero_dtype dt, int64_t off) {
    char buf[4096 * 4];
    int64_t i, es = (int64_t)zero__dtype_size(dt);
    for (i = 0; i < n; i += 4096) {
        int64_t c = n - i < 4096 ? n - i : 4096;
        zero__from_f32(buf, dt, v + i, c);
        if (!zero__ck_pwrite(fd, buf, (size_t)(c * es), off + i * es)) return 0;
    }
    return 1;
}

/* the module's values in fp32 at buf[0..span): local copies where this rank has them,
   else the stage-3 / sharded-master all-gather (collective, like zero_gather_params_f32) */
static zero_result zero__st_module_f32(zero_ctx *ctx, int mi, float *buf) {
    const zero__module_rec *m = &ctx->modules[mi];
    int j;
    zero_result r;
    if (!zero__module_f32_local(ctx, mi))
        return zero__wait(ctx, zero__post_gather_master(ctx, mi, buf));
    for (j = 0; j < ctx->num_params; j++) {
        const zero__param_rec *pr = &ctx->params[j];
        if (pr->module != mi) continue;
        if (ctx->tier.vt->has_master(ctx) && !m->frozen)    /* stage 0: the whole master is here */
            r = zero__ck_state_read(ctx, 0, m->lay.train_off + pr->offset, pr->numel, buf + pr->offset, "zero_export_safetensors");
        else
            r = zero__ck_param_read(ctx, j, 0, pr->numel, buf + pr->offset, "zero_export_safetensors");
        if (r != ZERO_OK) return r;
    }
    return ZERO_OK;
}

typedef struct zero__st_entry {
    char *name;
    zero_dtype dt;
    int ndim;
    int64_t shape[ZERO_MAX_DIMS], begin, end;
} zero__st_entry;

static void zero__st_ws(char **p, const char *end) {
    while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')) (*p)++;
}
static int zero__st_ch(char **p, const char *end, char c) {
    zero__st_ws(p, end);
    if (*p >= end || **p != c) return 0;
    (*p)++;
    return 1;
}
/* a string without escapes; cut in place */
static char *zero__st_str(char **p, const char *end) {
    char *s, *q;
    if (!zero__st_ch(p, end, '"')) return NULL;
    s = *p;
    for (q = s; q < end && *q != '"'; q++)
        if (*q == '\\' || (unsigned char)*q < 0x20) return NULL;
    if (q >= end) return NULL;
    *q = 0;
    *p = q + 1;
    return s;
}
static int zero__st_int(char **p, const char *end, int64_t *v) {
    int64_t x = 0;
    int n = 0;
    zero__st_ws(p, end);
    while (*p < end && **p >= '0' && **p <= '9' && n < 18) { x = x * 10 + (**p - '0'); (*p)++; n++; }
    if (n == 0 || (*p < end && **p >= '0' && **p <= '9')) return 0;
    *v = x;
    return 1;
}
/* [int, ...] with at most max entries */
static int zero__st_ints(char **p, const char *end, int64_t *v, int max, int *n) {
    *n = 0;
    if (!zero__st_ch(p, end, '[')) return 0;
    if (zero__st_ch(p, end, ']')) return 1;
    do {
        if (*n >= max || !zero__st_int(p, end, &v[*n])) return 0;
        (*n)++;
    } while (zero__st_ch(p, end, ','));
    return zero__st_ch(p, end, ']');
}

/* Parses the header text [p, end) into entries; 0 on any syntax it does not know. */
static int zero__st_parse(char *p, const char *end, zero__st_entry *e, int cap, int *n) {
    *n = 0;
    if (!zero__st_ch(&p, end, '{')) return 0;
    if (zero__st_ch(&p, end, '}')) goto tail;
    do {
        char *key = zero__st_str(&p, end);
        if (!key || !zero__st_ch(&p, end, ':') || !zero__st_ch(&p, end, '{')) return 0;
        if (strcmp(key, "__metadata__") == 0) {      /* string to string */
            if (!zero__st_ch(&p, end, '}')) {
                do {
                    if (!zero__st_str(&p, end) || !zero__st_ch(&p, end, ':') || !zero__st_str(&p, end)) return 0;
                } while (zero__st_ch(&p, end, ','));
                if (!zero__st_ch(&p, end, '}')) return 0;
            }
        } else {
            zero__st_entry *t;
            int have = 0, k;
            if (*n >= cap) return 0;
            t = &e[(*n)++];
            memset(t, 0, sizeof *t);
            t->name = key;
            do {
                char *f = zero__st_str(&p, end);
                if (!f || !zero__st_ch(&p, end, ':')) return 0;
                if (strcmp(f, "dtype") == 0) {
                    char *d = zero__st_str(&p, end);
                    if (!d) return 0;
                    t->dt = strcmp(d, "F32") == 0 ? ZERO_F32 : strcmp(d, "BF16") == 0 ? ZERO_BF16 :
                            strcmp(d, "F16") == 0 ? ZERO_F16 : ZERO_DTYPE_DEFAULT;
                    have |= 1;
                } else if (strcmp(f, "shape") == 0) {
                    if (!zero__st_ints(&p, end, t->shape, ZERO_MAX_DIMS, &t->ndim)) return 0;
                    have |= 2;
                } else if (strcmp(f, "data_offsets") == 0) {
                    int64_t o[2];
                    if (!zero__st_ints(&p, end, o, 2, &k) || k != 2 || o[1] < o[0]) return 0;
                    t->begin = o[0];
                    t->end = o[1];
                    have |= 4;
                } else {
                    return 0;
                }
            } while (zero__st_ch(&p, end, ','));
            if (!zero__st_ch(&p, end, '}') || have != 7) return 0;
        }
    } while (zero__st_ch(&p, end, ','));
    if (!zero__st_ch(&p, end, '}')) return 0;
tail:
    zero__st_ws(&p, end);
    return p == end;
}

static const zero__st_entry *zero__st_find(const zero__st_entry *e, int n, const char *mod, const char *name) {
    size_t lm = strlen(mod);
    int i;
    for (i = 0; i < n; i++)
        if (strncmp(e[i].name, mod, lm) == 0 && e[i].name[lm] == '.' && strcmp(e[i].name + lm + 1, name) == 0)
            return &e[i];
    return NULL;
}

/* ---- inspection: zero_ckpt_* ---------------------------------------------------------
   zero_ckpt_*: a checkpoint directory read without a context (examples/zero_ckpt.c). The
   manifest goes through zero__ck_read_manifest, as in zero_load, so both accept and refuse
   the same checkpoints; the records are read and checked by zero__ck_verify_range, as in
   zero_load's first pass, one ZERO__CK_CHUNK at a time. */
struct zero_ckpt {
    zero_allocator alloc;           /* the caller's hooks; zeroed: ZERO_MALLOC / ZERO_FREE */
    char *dir;
    zero__ck_manifest m;
    int64_t numel, trainable, bytes;
};

/* ck, out and 0 <= i < n, or a failure naming fn */
static zero_result zero__ck_index(const zero_ckpt *ck, const void *out, int i, int n, const char *fn, const char *what) {
    if (!ck || !out)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: ck and out must not be NULL", fn);
    if (i < 0 || i >= n)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "%s: %s %d of %d", fn, what, i, n);
    return ZERO_OK;
}

/* Every shard's header, then every record in manifest order (a file's records in file
   order), weights and moments, each checked; the weights also go to sink. With a sink
   it stops at the first failure; without one it reads on past bad records and files and
   counts them. Reports the first failure under fn's name. */
static zero_result zero__ck_scan(zero_ckpt *ck, const char *fn, zero__ck_sink sink, void *user) {
    const zero__ck_manifest *m = &ck->m;
    char msg[ZERO__MSG] = "", first[ZERO__MSG] = "";
    zero_result r, res = ZERO_OK;
    float *buf = (float *)zero__raw_alloc(&ck->alloc, (size_t)ZERO__CK_CHUNK * 4);
    unsigned char *bad = (unsigned char *)zero__raw_alloc(&ck->alloc, (size_t)m->nfile);
    int i, fd = -1, cur = -1;
    int64_t more = 0;
    if (!buf || !bad) {
        zero__raw_free(&ck->alloc, buf);
        zero__raw_free(&ck->alloc, bad);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    for (i = 0; i < m->nfile && (res == ZERO_OK || !sink); i++) {
        r = zero__ck_open_shard(ck->dir, m, i, &fd, msg, sizeof msg);
        if (fd >= 0) zero__ck_close(fd);
        fd = -1;
        bad[i] = r != ZERO_OK;
        if (r != ZERO_OK && res == ZERO_OK) { res = r; snprintf(first, sizeof first, "%s", msg); }
        else if (r != ZERO_OK) more++;
    }
    for (i = 0; i < m->nrange && (res == ZERO_OK || !sink); i++) {
        const zero__ck_range *rg = &m->ranges[i];
        if (bad[rg->rank]) continue;
        r = ZERO_OK;
        if (rg->rank != cur) {      /* zero_save lists a file's records together: each file opens once */
            if (fd >= 0) zero__ck_close(fd);
            fd = -1;
            cur = rg->rank;
            if ((r = zero__ck_open_shard(ck->dir, m, cur, &fd, msg, sizeof msg)) != ZERO_OK) bad[cur] = 1;
        }
        if (r == ZERO_OK) r = zero__ck_verify_range(ck->dir, m, rg, fd, 1, buf, sink, user, msg, sizeof msg);
        if (r == ZERO_OK) continue;
        if (res == ZERO_OK) { res = r; snprintf(first, sizeof first, "%s", msg); }
        else more++;
        if (r != ZERO_ERR_CORRUPT) break;       /* an OS error: the rest would fail the same way */
    }
    if (fd >= 0) zero__ck_close(fd);
    zero__raw_free(&ck->alloc, buf);
    zero__raw_free(&ck->alloc, bad);
    if (res == ZERO_OK) return ZERO_OK;
    if (more) return zero__fail(NULL, res, ZERO_LOGITEM_CKPT, "%s: %s (and %lld more bad records or files)", fn, first,
                                (long long)more);
    return zero__fail(NULL, res, ZERO_LOGITEM_CKPT, "%s: %s", fn, first);
}

/* zero_ckpt_export's sink: the checked weights at their place in the output */
typedef struct zero__ck_out { int fd; zero_dtype dt; const int64_t *data_off; const char *tmp; } zero__ck_out;

static zero_result zero__ck_out_sink(void *user, const zero__ck_range *r, int64_t o, const float *w, int64_t n, char *msg,
                                     size_t msgn) {
    const zero__ck_out *s = (const zero__ck_out *)user;
    int64_t es = (int64_t)zero__dtype_size(s->dt);
    if (zero__st_write_values(s->fd, w, n, s->dt, s->data_off[r->param] + (r->begin + o) * es)) return ZERO_OK;
    snprintf(msg, msgn, "%.300s: write failed: %s", s->tmp, strerror(errno));
    return ZERO_ERR_IO;
}

/* ---- what the public checkpoint functions do ---------------------------------------
   Each public function checks its arguments and calls one of these. */

/* ---- zero_save */
/* the names go one to a manifest line: none may hold a newline */
static zero_result zero__ck_names_ok(zero_ctx *ctx) {
    int i, bad = 0;
    for (i = 0; i < ctx->num_params; i++)
        if (strchr(ctx->params[i].name, '\n')) bad = 1;
    for (i = 0; i < ctx->num_modules; i++)
        if (strchr(ctx->modules[i].name, '\n')) bad = 1;
    if (bad)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_CKPT,
                          "zero_save: a module or param name contains a newline");
    return ZERO_OK;
}

/* the generation: rank 0 picks one above every file in the directory, every rank learns
   it (a directory this rank cannot create: *local and msg, for the agreement later) */
static zero_result zero__ck_save_gen(zero_ctx *ctx, const char *dir, uint64_t *gen, zero_result *local, char *msg,
                                     size_t msgn) {
    uint64_t mine = 0, g[ZERO__MAX_RANKS];
    zero_result r;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        *local = ZERO_ERR_IO;
        snprintf(msg, msgn, "%.300s: cannot create the directory: %s", dir, strerror(errno));
    }
    if (ctx->rank == 0) mine = zero__ck_max_gen(dir) + 1;
    if ((r = zero__wait(ctx, zero__post_allgather(ctx, &mine, g, 8))) != ZERO_OK) return r;
    *gen = g[0];
    return ZERO_OK;
}

/* This rank writes its shard (unless *local failed already), and every rank learns every
   rank's { status, bytes, checksums } (stride words each, in all); *failed: some shard
   failed. Returns the all-gather's result. */
static zero_result zero__ck_save_shards(zero_ctx *ctx, const char *dir, uint64_t gen, uint64_t *mine, uint64_t *all,
                                        int stride, zero_result *local, int *failed, char *msg, size_t msgn) {
    zero_result r;
    int64_t bytes;
    int i;
    memset(mine, 0, sizeof(uint64_t) * (size_t)stride);
    if (*local == ZERO_OK) {
        bytes = zero__ck_write_shard(ctx, dir, gen, mine + 2, local, msg, msgn);
        if (bytes >= 0) { *local = ZERO_OK; mine[1] = (uint64_t)bytes; }
    }
    mine[0] = (uint64_t)(int64_t)*local;
    r = zero__wait(ctx, zero__post_allgather(ctx, mine, all, (int64_t)(8 * stride)));
    if (r != ZERO_OK) return r;
    if (*local != ZERO_OK) zero__fail(ctx, *local, ZERO_LOGITEM_CKPT, "zero_save: %s", msg);
    for (i = 0; i < ctx->world; i++) if (all[(size_t)i * (size_t)stride] != 0) *failed = 1;
    return ZERO_OK;
}

/* this rank's shard of generation gen removed */
static void zero__ck_save_undo(const zero_ctx *ctx, const char *dir, uint64_t gen) {
    char nm[64], path[4096];
    snprintf(nm, sizeof nm, "/rank%d.g%llu", ctx->rank, (unsigned long long)gen);
    if (zero__ck_join(path, sizeof path, dir, nm, "")) (void)unlink(path);
}

static zero_result zero__ck_save(zero_ctx *ctx, const char *dir) {
    const zero_allocator *a = &ctx->desc.allocator;
    char msg[ZERO__MSG] = "";
    zero_result r, local = ZERO_OK;
    uint64_t gen = 0, *mine, *all;
    int stride = 2 * ctx->num_params + 2, failed = 0;
    if ((r = zero__ck_names_ok(ctx)) != ZERO_OK) return r;
    if ((r = zero__ck_save_gen(ctx, dir, &gen, &local, msg, sizeof msg)) != ZERO_OK) return r;
    mine = (uint64_t *)zero__raw_alloc(a, sizeof(uint64_t) * (size_t)stride);
    all = (uint64_t *)zero__raw_alloc(a, sizeof(uint64_t) * (size_t)stride * (size_t)ctx->world);
    if (!mine || !all) {
        zero__raw_free(a, mine); zero__raw_free(a, all);
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_save: out of memory");
    }
    r = zero__ck_save_shards(ctx, dir, gen, mine, all, stride, &local, &failed, msg, sizeof msg);
    /* every shard is durable (each rank fsynced before the all-gather): commit */
    if (r == ZERO_OK && ctx->rank == 0 && !failed) {
        zero__ck_fsync_dir(dir);
        local = zero__ck_write_manifest(ctx, dir, gen, all, stride, msg, sizeof msg);
        if (local != ZERO_OK) zero__fail(ctx, local, ZERO_LOGITEM_CKPT, "zero_save: %s", msg);
        else zero__ck_cleanup(dir, gen);
    }
    zero__raw_free(a, mine);
    zero__raw_free(a, all);
    if (r != ZERO_OK) return r;
    r = zero__ck_agree(ctx, "zero_save", local, msg);
    /* No manifest names this generation (a shard failed, or the manifest did; not a
       broken communicator, after which rank 0 may have committed): remove this rank's
       shard, so a failed save leaves the directory as it was. */
    if (r != ZERO_OK && (failed || (r != ZERO_ERR_TIMEOUT && r != ZERO_ERR_COMM))) zero__ck_save_undo(ctx, dir, gen);
    return r;
}

/* zero_ckpt_put: the record of key set to a copy of data (checked: ctx, key, data) */
static zero_result zero__ck_rec_put(zero_ctx *ctx, const char *key, const void *data, int64_t bytes) {
    const zero_allocator *a;
    unsigned char *copy = NULL;
    int i;
    if (!zero__ck_key_ok(key))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_ckpt_put: key '%.80s' is not 1-%d characters of A-Z a-z 0-9 _ . -", key, ZERO__CK_KEY_MAX);
    if (bytes < 0 || bytes > ZERO_CKPT_RECORD_MAX)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_ckpt_put('%s'): %lld bytes; a record holds 0 to %d (ZERO_CKPT_RECORD_MAX)", key,
                          (long long)bytes, ZERO_CKPT_RECORD_MAX);
    for (i = 0; i < ctx->ckrec.n && strcmp(ctx->ckrec.rec[i].key, key) != 0; i++) {}
    if (i == ZERO_CKPT_MAX_RECORDS)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_ckpt_put('%s'): the context holds %d records already (ZERO_CKPT_MAX_RECORDS)", key,
                          ZERO_CKPT_MAX_RECORDS);
    a = &ctx->desc.allocator;
    if (bytes > 0) {
        if (!(copy = (unsigned char *)zero__raw_alloc(a, (size_t)bytes)))
            return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_ckpt_put('%s'): out of memory",
                              key);
        memcpy(copy, data, (size_t)bytes);
    }
    if (i == ctx->ckrec.n) {
        memcpy(ctx->ckrec.rec[i].key, key, strlen(key) + 1);
        ctx->ckrec.n++;
    } else {
        zero__raw_free(a, ctx->ckrec.rec[i].data);
    }
    ctx->ckrec.rec[i].data = copy;
    ctx->ckrec.rec[i].bytes = bytes;
    return ZERO_OK;
}

/* ---- zero_load, zero_load_safetensors */
/* The end of a load's writes (local: how they went): what the state writes left in the
   tier's buffer written back, the stage-3 gathers redone, and every rank agrees;
   failures are reported under fn's name. */
static zero_result zero__ck_load_finish(zero_ctx *ctx, const char *fn, zero_result local, char *msg, size_t msgn) {
    zero_result r;
    if (local == ZERO_OK && (local = zero__ck_state_done(ctx, fn)) != ZERO_OK)
        snprintf(msg, msgn, "%s", zero__last_err(ctx));
    if ((r = zero__ck_regather(ctx)) != ZERO_OK && local == ZERO_OK) {
        local = r;
        snprintf(msg, msgn, "%s", zero__last_err(ctx));
    }
    if (local == ZERO_OK && (r = zero__flat_params_out(ctx, 0, ctx->num_params, 0)) != ZERO_OK) {
        local = r;
        snprintf(msg, msgn, "%s", zero__last_err(ctx));
    }
    if (local != ZERO_OK) zero__fail(ctx, local, ZERO_LOGITEM_CKPT, "%s: %s", fn, msg);
    return zero__ck_agree(ctx, fn, local, msg);
}

/* zero_load's state: the manifest, an fd per shard (-1: not open), the records this rank
   needs (need[k]: an index in m.ranges; mom[k]: its moments too), two chunks (bw) */
typedef struct zero__ck_loader {
    zero__ck_manifest m;
    int *fds, *need, *mom, nneed;
    float *bw;
} zero__ck_loader;

static void zero__ck_loader_free(const zero_allocator *a, zero__ck_loader *L) {
    int k;
    if (L->fds) for (k = 0; k < L->m.world; k++) if (L->fds[k] >= 0) zero__ck_close(L->fds[k]);
    zero__raw_free(a, L->bw);
    zero__raw_free(a, L->fds);
    zero__raw_free(a, L->need);
    zero__raw_free(a, L->mom);
    zero__ck_manifest_free(a, &L->m);
}

/* The manifest read and matched to this model, and which records overlap what this
   rank holds (zero__ck_validate: they cover every element once). */
static zero_result zero__ck_load_plan(zero_ctx *ctx, const char *dir, zero__ck_loader *L, char *msg, size_t msgn) {
    const zero_allocator *a = &ctx->desc.allocator;
    const zero__ck_manifest *m = &L->m;
    zero_result local;
    int k;
    memset(L, 0, sizeof *L);
    local = zero__ck_read_manifest(a, dir, &L->m, msg, msgn);
    if (local == ZERO_OK) local = zero__ck_match(ctx, m, dir, msg, msgn);
    if (local != ZERO_OK) return local;
    L->fds = (int *)zero__raw_alloc(a, sizeof(int) * (size_t)m->world);
    L->need = (int *)zero__raw_alloc(a, sizeof(int) * (size_t)(m->nrange + 1));
    L->mom = (int *)zero__raw_alloc(a, sizeof(int) * (size_t)(m->nrange + 1));
    L->bw = (float *)zero__raw_alloc(a, (size_t)ZERO__CK_CHUNK * 2 * 4);
    for (k = 0; L->fds && k < m->world; k++) L->fds[k] = -1;
    if (!L->fds || !L->need || !L->mom || !L->bw) {
        snprintf(msg, msgn, "out of memory");
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    for (k = 0; k < m->nrange; k++) {
        const zero__ck_range *rg = &m->ranges[k];
        int64_t b, e;
        zero__ck_need(ctx, rg->param, &b, &e);
        if (rg->begin < e && b < rg->end) {     /* weights needed; moments only where state is held */
            L->mom[L->nneed] = zero__ck_has_state(ctx, rg->param, &b, &e) && rg->begin < e && b < rg->end;
            L->need[L->nneed++] = k;
        }
    }
    return ZERO_OK;
}

/* the first pass: every record this rank needs read and checked (checksums) */
static zero_result zero__ck_load_verify(const char *dir, zero__ck_loader *L, char *msg, size_t msgn) {
    zero_result local = ZERO_OK;
    int k;
    for (k = 0; local == ZERO_OK && k < L->nneed; k++) {
        const zero__ck_range *rg = &L->m.ranges[L->need[k]];
        if (L->fds[rg->rank] < 0) local = zero__ck_open_shard(dir, &L->m, rg->rank, &L->fds[rg->rank], msg, msgn);
        if (local == ZERO_OK)
            local = zero__ck_verify_range(dir, &L->m, rg, L->fds[rg->rank], L->mom[k], L->bw, NULL, NULL, msg, msgn);
    }
    return local;
}

/* the second pass: the records into the params, master and moments; then the step count
   and loss scale, once every rank succeeded */
static zero_result zero__ck_load_apply(zero_ctx *ctx, const char *dir, zero__ck_loader *L, char *msg, size_t msgn) {
    zero__ck_manifest *m = &L->m;
    zero_result r, local = ZERO_OK;
    int k;
    for (k = 0; local == ZERO_OK && k < L->nneed; k++) {
        const zero__ck_range *rg = &m->ranges[L->need[k]];
        local = zero__ck_apply_range(ctx, dir, m, rg, L->fds[rg->rank], L->mom[k], L->bw, L->bw + ZERO__CK_CHUNK, msg,
                                     msgn);
    }
    r = zero__ck_load_finish(ctx, "zero_load", local, msg, msgn);
    if (r == ZERO_OK) {
        ctx->opt.steps = m->steps;
        ctx->opt.skipped = m->skipped;
        ctx->opt.loss_scale = m->loss_scale;
        ctx->opt.good_steps = (int)m->good_steps;
        /* format 1 did not record it: every step taken as this context's world and accum_steps */
        ctx->opt.micro = m->micro >= 0 ? m->micro : (m->steps + m->skipped) * ctx->world * ctx->desc.accum_steps;
        /* the checkpoint's records replace the context's (moved: they cannot fail now) */
        for (k = 0; k < ctx->ckrec.n; k++) zero__raw_free(&ctx->desc.allocator, ctx->ckrec.rec[k].data);
        for (k = 0; k < m->nrec; k++) {
            ctx->ckrec.rec[k] = m->recs[k];
            m->recs[k].data = NULL;
        }
        ctx->ckrec.n = m->nrec;
    }
    return r;
}

/* Two passes over the records this rank needs, with memory bounded by two chunks: the
   first reads and checks every one (checksums), the ranks agree, and only then the
   second reads them again into the params, master and moments (the NVMe tier's blocks
   directly). So a bad file changes nothing; an OS error in the second pass (the file
   changed under us, the tier failed) leaves the state partly loaded, and every rank
   returns it. */
static zero_result zero__ck_load(zero_ctx *ctx, const char *dir) {
    zero__ck_loader L;
    char msg[ZERO__MSG] = "";
    zero_result r, local = zero__ck_load_plan(ctx, dir, &L, msg, sizeof msg);
    if (local == ZERO_OK) local = zero__ck_load_verify(dir, &L, msg, sizeof msg);
    if (local != ZERO_OK) zero__fail(ctx, local, ZERO_LOGITEM_CKPT, "zero_load: %s", msg);
    r = zero__ck_agree(ctx, "zero_load", local, msg);
    if (r == ZERO_OK) r = zero__ck_load_apply(ctx, dir, &L, msg, sizeof msg);
    zero__ck_loader_free(&ctx->desc.allocator, &L);
    return r;
}

/* ---- zero_export_safetensors, zero_ckpt_export */
/* the 8-byte little-endian header length, then the header; 0: failed (errno) */
static int zero__st_write_header(int fd, const char *hdr, int64_t hlen) {
    unsigned char lenb[8];
    int i;
    for (i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    return zero__ck_pwrite(fd, lenb, 8, 0) && zero__ck_pwrite(fd, hdr, (size_t)hlen, 8);
}

/* the end of a file written as tmp (ok: so far without failure): made durable, closed,
   renamed to path; 0 on failure (errno says why; tmp is the caller's to remove) */
static int zero__ck_seal(int fd, int ok, const char *tmp, const char *path) {
    ok = ok && fsync(fd) == 0;
    if (zero__ck_close(fd) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    return ok;
}

/* rank 0's start: the header of every param in order, written to path.tmp (tmp, *fd,
   *hlen) */
/* The ties in "__metadata__": "tied" is "user.param=owner.param" for each, comma-separated
   (a string, as safetensors metadata must be); "" without ties; NULL: out of memory */
static char *zero__st_tie_meta(const zero_ctx *ctx) {
    size_t cap = 32, l = 0;
    char *t;
    int i;
    for (i = 0; i < ctx->num_ties; i++)
        cap += strlen(ctx->modules[ctx->ties[i].module].name) + strlen(ctx->ties[i].name) +
               strlen(ctx->modules[ctx->params[ctx->ties[i].target].module].name) +
               strlen(ctx->params[ctx->ties[i].target].name) + 4;
    if (!(t = (char *)zero__raw_alloc(&ctx->desc.allocator, cap))) return NULL;
    t[0] = 0;
    if (ctx->num_ties) l += (size_t)snprintf(t + l, cap - l, "\"tied\":\"");
    for (i = 0; i < ctx->num_ties; i++) {
        const zero__param_rec *o = &ctx->params[ctx->ties[i].target];
        l += (size_t)snprintf(t + l, cap - l, "%s%s.%s=%s.%s", i ? "," : "", ctx->modules[ctx->ties[i].module].name,
                              ctx->ties[i].name, ctx->modules[o->module].name, o->name);
    }
    if (ctx->num_ties) snprintf(t + l, cap - l, "\"");
    return t;
}

/* the tensors in file order: every param, then (copies) each tie under its user's name */
static zero_result zero__st_export_begin(zero_ctx *ctx, const char *path, zero_dtype dtype, int copies, char *tmp,
                                         size_t tmpn, int *fd, int64_t *hlen, char *msg, size_t msgn) {
    const zero_allocator *a = &ctx->desc.allocator;
    int nt = ctx->num_params + (copies ? ctx->num_ties : 0);
    zero__st_tensor *ts = (zero__st_tensor *)zero__raw_alloc(a, sizeof *ts * (size_t)nt);
    char *hdr = NULL, *meta = zero__st_tie_meta(ctx);
    zero_result local = ZERO_OK;
    int i;
    for (i = 0; ts && i < nt; i++) {
        const zero__param_rec *p = &ctx->params[i < ctx->num_params ? i : ctx->ties[i - ctx->num_params].target];
        ts[i].module = i < ctx->num_params ? ctx->modules[p->module].name
                                           : ctx->modules[ctx->ties[i - ctx->num_params].module].name;
        ts[i].name = i < ctx->num_params ? p->name : ctx->ties[i - ctx->num_params].name;
        ts[i].ndim = p->ndim;
        ts[i].shape = p->shape;
        ts[i].numel = p->numel;
    }
    if (ts && meta) hdr = zero__st_header(a, ts, nt, dtype, meta, hlen);
    zero__raw_free(a, meta);
    if (!ts || !hdr) {
        local = ZERO_ERR_OUT_OF_MEMORY;
        snprintf(msg, msgn, "out of memory");
    } else if (!zero__ck_join(tmp, tmpn, path, ".tmp", "") ||
               (*fd = zero__ck_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        local = ZERO_ERR_IO;
        snprintf(msg, msgn, "%.300s: cannot create: %s", path, strerror(errno));
    } else if (!zero__st_write_header(*fd, hdr, *hlen)) {
        local = ZERO_ERR_IO;
    }
    zero__raw_free(a, ts);
    zero__raw_free(a, hdr);
    return local;
}

/* module by module (memory: one module span, buf): every rank takes part in the
   gathers, rank 0 writes each of the module's params at its offset in fd (while *local
   is ZERO_OK). Returns the gathers' result. */
static zero_result zero__st_export_modules(zero_ctx *ctx, const char *path, zero_dtype dtype, int copies, int fd,
                                           int64_t hlen, float *buf, zero_result *local, char *msg, size_t msgn) {
    zero_result r;
    int64_t off, es = (int64_t)zero__dtype_size(dtype);
    int i, j, n = ctx->num_params + (copies ? ctx->num_ties : 0);
    for (i = 0; i < ctx->num_modules; i++) {
        if ((r = zero__st_module_f32(ctx, i, buf)) != ZERO_OK) return r;
        if (ctx->rank != 0 || *local != ZERO_OK) continue;
        off = 8 + hlen;
        for (j = 0; j < n && *local == ZERO_OK; j++) {     /* a tie's copy: its target's values again */
            const zero__param_rec *pr = &ctx->params[j < ctx->num_params ? j : ctx->ties[j - ctx->num_params].target];
            if (pr->module == i && !zero__st_write_values(fd, buf + pr->offset, pr->numel, dtype, off)) {
                *local = ZERO_ERR_IO;
                snprintf(msg, msgn, "%.300s: write failed: %s", path, strerror(errno));
            }
            off += pr->numel * es;
        }
    }
    return ZERO_OK;
}

static zero_result zero__st_export(zero_ctx *ctx, const char *path, zero_dtype dtype, int copies) {
    const zero_allocator *a = &ctx->desc.allocator;
    char msg[ZERO__MSG] = "", tmp[4096];
    zero_result r, local = ZERO_OK;
    float *buf;
    int64_t hlen = 0;
    int fd = -1;
    if (!(buf = (float *)zero__raw_alloc(a, (size_t)ctx->lay.max_span * 4 + 4)))
        return zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_export_safetensors: out of memory");
    if (ctx->rank == 0)
        local = zero__st_export_begin(ctx, path, dtype, copies, tmp, sizeof tmp, &fd, &hlen, msg, sizeof msg);
    r = zero__st_export_modules(ctx, path, dtype, copies, fd, hlen, buf, &local, msg, sizeof msg);
    zero__raw_free(a, buf);
    if (r != ZERO_OK) {
        if (fd >= 0) { zero__ck_close(fd); (void)unlink(tmp); }
        return r;
    }
    if (fd >= 0 && !zero__ck_seal(fd, local == ZERO_OK, tmp, path)) {
        (void)unlink(tmp);
        if (local == ZERO_OK) {
            local = ZERO_ERR_IO;
            snprintf(msg, sizeof msg, "%.300s: write failed: %s", path, strerror(errno));
        }
    }
    if (local != ZERO_OK) zero__fail(ctx, local, ZERO_LOGITEM_CKPT, "zero_export_safetensors: %s", msg);
    return zero__ck_agree(ctx, "zero_export_safetensors", local, msg);
}

/* zero_ckpt_export's layout, zero_export_safetensors's (params in order, one header
   writer): the header (*hlen bytes; NULL: out of memory), and in *data_off (the
   caller's to free) each param's data offset in the file */
static char *zero__ck_export_layout(const zero_ckpt *ck, zero_dtype dtype, int64_t **data_off, int64_t *hlen) {
    const zero__ck_manifest *m = &ck->m;
    const zero_allocator *a = &ck->alloc;
    zero__st_tensor *ts = (zero__st_tensor *)zero__raw_alloc(a, sizeof *ts * (size_t)m->nparam);
    char *hdr = NULL;
    int64_t off;
    int i;
    *data_off = (int64_t *)zero__raw_alloc(a, sizeof **data_off * (size_t)m->nparam);
    for (i = 0; ts && i < m->nparam; i++) {
        ts[i].module = m->mods[m->params[i].module].name;
        ts[i].name = m->params[i].name;
        ts[i].ndim = m->params[i].ndim;
        ts[i].shape = m->params[i].shape;
        ts[i].numel = m->params[i].numel;
    }
    if (ts && *data_off) hdr = zero__st_header(a, ts, m->nparam, dtype, NULL, hlen);
    zero__raw_free(a, ts);
    if (!hdr) return NULL;
    off = 8 + *hlen;
    for (i = 0; i < m->nparam; i++) {
        (*data_off)[i] = off;
        off += m->params[i].numel * (int64_t)zero__dtype_size(dtype);
    }
    return hdr;
}

/* zero_ckpt_export_as (fn: its name in messages): every record's weights and moments
   checked, the weights written to path.tmp on the way, renamed to path at the end */
static zero_result zero__ck_export(zero_ckpt *ck, const char *path, zero_dtype dtype, const char *fn) {
    const zero_allocator *a = &ck->alloc;
    int64_t *data_off = NULL, hlen = 0;
    char tmp[4096], *hdr;
    zero__ck_out s;
    zero_result r = ZERO_OK;
    if (!zero__ck_join(tmp, sizeof tmp, path, ".tmp", ""))
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "%s: the output path is too long", fn);
    if (!(hdr = zero__ck_export_layout(ck, dtype, &data_off, &hlen))) {
        r = zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "%s: out of memory", fn);
    } else if ((s.fd = zero__ck_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        r = zero__fail(NULL, ZERO_ERR_IO, ZERO_LOGITEM_CKPT, "%s: %.300s: cannot create: %s", fn, tmp, strerror(errno));
    } else {
        s.dt = dtype;
        s.data_off = data_off;
        s.tmp = tmp;
        if (!zero__st_write_header(s.fd, hdr, hlen))
            r = zero__fail(NULL, ZERO_ERR_IO, ZERO_LOGITEM_CKPT, "%s: %.300s: write failed: %s", fn, tmp,
                           strerror(errno));
        if (r == ZERO_OK) r = zero__ck_scan(ck, fn, zero__ck_out_sink, &s);
        if (!zero__ck_seal(s.fd, r == ZERO_OK, tmp, path)) {
            int e = errno;
            (void)unlink(tmp);
            if (r == ZERO_OK)
                r = zero__fail(NULL, ZERO_ERR_IO, ZERO_LOGITEM_CKPT, "%s: %.300s: write failed: %s", fn, path,
                               strerror(e));
        }
    }
    zero__raw_free(a, data_off);
    zero__raw_free(a, hdr);
    return r;
}

/* ---- zero_load_safetensors */
/* its state: the file, its header parsed into entries, each param's entry (map), a chunk
   of raw values and one of fp32 values */
typedef struct zero__st_reader {
    int fd, nent;
    int64_t hlen, fsize;
    char *hdr;
    zero__st_entry *ents;
    const zero__st_entry **map;
    unsigned char *raw;
    float *vals;
} zero__st_reader;

static void zero__st_reader_free(const zero_allocator *a, zero__st_reader *s) {
    zero__raw_free(a, s->raw);
    zero__raw_free(a, s->vals);
    if (s->fd >= 0) zero__ck_close(s->fd);
    zero__raw_free(a, s->hdr);
    zero__raw_free(a, s->ents);
    zero__raw_free(a, s->map);
}

/* opens path, reads its header length and its header, parsed into s->ents */
static zero_result zero__st_open(zero_ctx *ctx, const char *path, zero__st_reader *s, char *msg, size_t msgn) {
    const zero_allocator *a = &ctx->desc.allocator;
    unsigned char lenb[8];
    struct stat st;
    int i, rr, cap;
    memset(s, 0, sizeof *s);
    if ((s->fd = zero__ck_open(path, O_RDONLY, 0)) < 0 || fstat(s->fd, &st) != 0) {
        snprintf(msg, msgn, "%.300s: cannot open: %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    s->fsize = (int64_t)st.st_size;
    rr = zero__ck_pread(s->fd, lenb, 8, 0);
    for (i = 7; i >= 0; i--) s->hlen = (s->hlen << 8) | lenb[i];
    if (rr != 1 || s->hlen < 2 || s->hlen > ((int64_t)1 << 30) || s->hlen > s->fsize - 8) {
        snprintf(msg, msgn, "%.300s: not a safetensors file (header length)", path);
        return ZERO_ERR_CORRUPT;
    }
    cap = (int)(s->hlen / 16) + 1;
    s->hdr = (char *)zero__raw_alloc(a, (size_t)s->hlen + 1);
    s->ents = (zero__st_entry *)zero__raw_alloc(a, sizeof *s->ents * (size_t)cap);
    s->map = (const zero__st_entry **)zero__raw_alloc(a, sizeof *s->map * (size_t)ctx->num_params);
    s->raw = (unsigned char *)zero__raw_alloc(a, (size_t)ZERO__CK_CHUNK * 4);
    s->vals = (float *)zero__raw_alloc(a, (size_t)ZERO__CK_CHUNK * 4);
    if (!s->hdr || !s->ents || !s->map || !s->raw || !s->vals) {
        snprintf(msg, msgn, "out of memory");
        return ZERO_ERR_OUT_OF_MEMORY;
    }
    if (zero__ck_pread(s->fd, s->hdr, (size_t)s->hlen, 8) != 1 ||
        !zero__st_parse(s->hdr, s->hdr + s->hlen, s->ents, cap, &s->nent)) {
        snprintf(msg, msgn, "%.300s: malformed safetensors header", path);
        return ZERO_ERR_CORRUPT;
    }
    return ZERO_OK;
}

/* every param's entry checked (name, shape, dtype, extent) into s->map */
static zero_result zero__st_match(const zero_ctx *ctx, const char *path, zero__st_reader *s, char *msg, size_t msgn) {
    int i, k;
    for (i = 0; i < ctx->num_params; i++) {
        const zero__param_rec *p = &ctx->params[i];
        const char *mn = ctx->modules[p->module].name;
        const zero__st_entry *e = zero__st_find(s->ents, s->nent, mn, p->name);
        int same = e && e->ndim == p->ndim;
        for (k = 0; same && k < p->ndim; k++) same = e->shape[k] == p->shape[k];
        if (!same) {
            snprintf(msg, msgn, "%.200s: %s '%.80s.%.80s' %s", path, e ? "tensor" : "no tensor", mn, p->name,
                     e ? "has a different shape" : "");
            return ZERO_ERR_MISMATCH;
        }
        if (e->dt == ZERO_DTYPE_DEFAULT || e->end - e->begin != p->numel * (int64_t)zero__dtype_size(e->dt) ||
            e->end > s->fsize - 8 - s->hlen) {
            snprintf(msg, msgn, "%.200s: tensor '%.80s.%.80s' has an unknown dtype or bad data_offsets", path, mn,
                     p->name);
            return ZERO_ERR_CORRUPT;
        }
        s->map[i] = e;
    }
    return ZERO_OK;
}

/* param i's elements this rank needs, streamed ZERO__CK_CHUNK elements at a time into
   the params and (where this rank holds it) the master; on the NVMe tier a chunk stays
   in one block: the param area and the master of a chunk are written to the block
   cached once */
static zero_result zero__st_load_param(zero_ctx *ctx, const char *path, const zero__st_reader *s, int i, char *msg,
                                       size_t msgn) {
    const zero__st_entry *e = s->map[i];
    int64_t b, e_, sb = 0, se = 0, o, c, es = (int64_t)zero__dtype_size(e->dt);
    int held, state, tier, rr;
    zero_result local = ZERO_OK;
    zero__ck_need(ctx, i, &b, &e_);
    held = zero__ck_has_state(ctx, i, &sb, &se);
    state = ctx->tier.vt->has_master(ctx) && held;
    tier = held && ctx->tier.vt->blocked && (state || zero__ck_param_in_tier(ctx, i));
    for (o = b; o < e_ && local == ZERO_OK; o += c) {
        int64_t lo, hi;
        c = zero__ck_chunk(ctx, i, o, e_, tier, sb, se);
        lo = o > sb ? o : sb;
        hi = o + c < se ? o + c : se;
        rr = zero__ck_pread(s->fd, s->raw, (size_t)(c * es), 8 + s->hlen + e->begin + o * es);
        if (rr != 1) {
            snprintf(msg, msgn, "%.300s: %s", path, rr == 0 ? "truncated" : strerror(errno));
            return rr == 0 ? ZERO_ERR_CORRUPT : ZERO_ERR_IO;
        }
        zero__to_f32(s->vals, s->raw, e->dt, c);
        local = zero__ck_param_write(ctx, i, o, c, s->vals, "zero_load_safetensors");
        if (local == ZERO_OK && state && lo < hi)
            local = zero__ck_state_write(ctx, 0, zero__ck_state_idx(ctx, i, lo), hi - lo, s->vals + (lo - o),
                                         "zero_load_safetensors");
        if (local != ZERO_OK && !msg[0]) snprintf(msg, msgn, "%s", zero__last_err(ctx));
    }
    return local;
}

/* Every rank reads the header, checks every param's entry (name, dtype, shape, extent),
   the ranks agree, then each reads only the elements it holds. Sets params (and the
   fp32 master copy, on the NVMe tier too); optimizer state and step count are left alone. */
static zero_result zero__st_load(zero_ctx *ctx, const char *path) {
    zero__st_reader s;
    char msg[ZERO__MSG] = "";
    zero_result r, local = zero__st_open(ctx, path, &s, msg, sizeof msg);
    int i;
    if (local == ZERO_OK) local = zero__st_match(ctx, path, &s, msg, sizeof msg);
    if (local != ZERO_OK) zero__fail(ctx, local, ZERO_LOGITEM_CKPT, "zero_load_safetensors: %s", msg);
    r = zero__ck_agree(ctx, "zero_load_safetensors", local, msg);
    if (r == ZERO_OK) {
        local = ZERO_OK;
        for (i = 0; local == ZERO_OK && i < ctx->num_params; i++)
            local = zero__st_load_param(ctx, path, &s, i, msg, sizeof msg);
        r = zero__ck_load_finish(ctx, "zero_load_safetensors", local, msg, sizeof msg);
    }
    zero__st_reader_free(&ctx->desc.allocator, &s);
    return r;
}

/* ---- zero_ckpt_* */
static void zero__ck_ckpt_free(zero_ckpt *ck) {
    zero_allocator a;
    if (!ck) return;
    a = ck->alloc;
    zero__ck_manifest_free(&a, &ck->m);
    zero__raw_free(&a, ck->dir);
    zero__raw_free(&a, ck);
}

/* zero_ckpt_open after its argument checks: the manifest read and checked, every shard's
   size and header checked, and the totals */
static zero_result zero__ck_ckpt_open(const char *dir, const zero_allocator *alloc, zero_ckpt **out) {
    zero_allocator a;
    zero_ckpt *ck;
    char msg[ZERO__MSG] = "";
    zero_result r;
    int i, fd;
    memset(&a, 0, sizeof a);
    if (alloc) a = *alloc;
    if (!(ck = (zero_ckpt *)zero__raw_alloc(&a, sizeof *ck)))
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_ckpt_open: out of memory");
    memset(ck, 0, sizeof *ck);
    ck->alloc = a;
    if (!(ck->dir = zero__strdup(&a, dir))) {
        zero__ck_ckpt_free(ck);
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_ckpt_open: out of memory");
    }
    r = zero__ck_read_manifest(&ck->alloc, dir, &ck->m, msg, sizeof msg);
    /* every shard's size (the manifest's sizes bound everything read or written later) and header */
    for (i = 0; r == ZERO_OK && i < ck->m.nfile; i++) {
        r = zero__ck_open_shard(dir, &ck->m, i, &fd, msg, sizeof msg);
        if (fd >= 0) zero__ck_close(fd);
        ck->bytes += ck->m.files[i].bytes;
    }
    if (r != ZERO_OK) {
        zero__ck_ckpt_free(ck);
        return zero__fail(NULL, r, ZERO_LOGITEM_CKPT, "zero_ckpt_open: %s", msg);
    }
    for (i = 0; i < ck->m.nparam; i++) {
        ck->numel += ck->m.params[i].numel;
        if (!ck->m.mods[ck->m.params[i].module].frozen) ck->trainable += ck->m.params[i].numel;
    }
    *out = ck;
    return ZERO_OK;
}

static void zero__ck_ckpt_info(const zero_ckpt *ck, struct zero_ckpt_info *out) {
    const zero__ck_manifest *m = &ck->m;
    memset(out, 0, sizeof *out);
    out->format_version = m->version;
    out->generation = m->gen;
    out->stage = m->stage;
    out->world_size = m->world;
    out->param_dtype = m->pdt;
    out->grad_dtype = m->gdt;
    out->grad_accum_dtype = m->gadt;
    out->optimizer = m->optim;
    out->moments = m->moments;
    out->steps = m->steps;
    out->skipped_steps = m->skipped;
    out->micro_batches = m->micro;
    out->num_records = m->nrec;
    out->good_steps = m->good_steps;
    out->loss_scale = m->loss_scale;
    out->num_modules = m->nmod;
    out->num_params = m->nparam;
    out->num_files = m->nfile;
    out->num_ranges = m->nrange;
    out->numel = ck->numel;
    out->trainable_numel = ck->trainable;
    out->total_bytes = ck->bytes;
}

static void zero__ck_module_info(const zero_ckpt *ck, int i, zero_ckpt_module_info *out) {
    int k;
    memset(out, 0, sizeof *out);
    out->name = ck->m.mods[i].name;
    out->frozen = ck->m.mods[i].frozen;
    for (k = 0; k < ck->m.nparam; k++) out->num_params += ck->m.params[k].module == i;
}

static void zero__ck_param_info(const zero_ckpt *ck, int i, zero_ckpt_param_info *out) {
    const zero__ck_param *p = &ck->m.params[i];
    memset(out, 0, sizeof *out);
    out->name = p->name;
    out->module = ck->m.mods[p->module].name;
    out->module_index = p->module;
    out->frozen = ck->m.mods[p->module].frozen;
    out->dtype = ck->m.pdt;
    out->ndim = p->ndim;
    memcpy(out->shape, p->shape, sizeof out->shape);
    out->numel = p->numel;
}

static void zero__ck_file_info(const zero_ckpt *ck, int i, zero_ckpt_file_info *out) {
    int k;
    memset(out, 0, sizeof *out);
    out->name = ck->m.files[i].name;
    out->rank = ck->m.files[i].rank;
    out->bytes = ck->m.files[i].bytes;
    for (k = 0; k < ck->m.nrange; k++) out->num_ranges += ck->m.ranges[k].rank == i;
}

/* zero_ckpt_read_f32's sink: the checked weights at their place in the flat order */
typedef struct zero__ck_flat { float *out; const int64_t *param_off; } zero__ck_flat;

static zero_result zero__ck_flat_sink(void *user, const zero__ck_range *r, int64_t o, const float *w, int64_t n, char *msg,
                                      size_t msgn) {
    const zero__ck_flat *s = (const zero__ck_flat *)user;
    (void)msg;
    (void)msgn;
    memcpy(s->out + s->param_off[r->param] + r->begin + o, w, (size_t)n * 4);
    return ZERO_OK;
}

static zero_result zero__ck_read_f32(zero_ckpt *ck, float *out) {
    zero__ck_flat s;
    int64_t *off, o = 0;
    zero_result r;
    int i;
    /* the manifest lists the params in the saver's registration order: the flat order */
    if (!(off = (int64_t *)zero__raw_alloc(&ck->alloc, sizeof *off * (size_t)ck->m.nparam)))
        return zero__fail(NULL, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                          "zero_ckpt_read_f32: out of memory");
    for (i = 0; i < ck->m.nparam; i++) { off[i] = o; o += ck->m.params[i].numel; }
    s.out = out;
    s.param_off = off;
    r = zero__ck_scan(ck, "zero_ckpt_read_f32", zero__ck_flat_sink, &s);
    zero__raw_free(&ck->alloc, off);
    return r;
}

/* >>context: the context's life: zero_create and zero_destroy, and what it reports --------
   On top of every region: creating a context binds a device, a communicator, ZeRO++'s nodes
   and a comm stream; destroying it lets go of all each region holds. */

/* the context's endpoint let go of: its own world destroyed, or a user's endpoint freed for
   another context */
static void zero__release_comm(zero_ctx *ctx) {
    if (ctx->own_group) {
        zero__comm_destroy(ctx->comm);
        zero__group_destroy(ctx->own_group);
    } else if (ctx->comm) {
        zero__mutex_lock(&ctx->comm->group->mu);
        ctx->comm->in_use = 0;
        ctx->comm->ctx = NULL;
        if (ctx->comm->intra) ctx->comm->intra->ctx = ctx->comm->inter->ctx = NULL;
        zero__mutex_unlock(&ctx->comm->group->mu);
    }
}

/* zero_destroy: the comm stream stopped, then what every region holds, then the context */
static void zero__destroy(zero_ctx *ctx) {
    const zero_allocator *a = &ctx->desc.allocator;
    int i;
    zero__stream_stop(ctx);
    zero__pool_free(ctx->opt.pool, a);
    zero__trace_free(ctx);
    zero__stash_free(ctx);
    zero__free_arenas(ctx);
    if (ctx->dev) ctx->dev->fini(ctx);
    for (i = 0; i < ctx->act.num; i++) zero__raw_free(a, ctx->act.recs[i].name);
    zero__raw_free(a, ctx->act.recs);
    for (i = 0; i < ctx->num_params; i++) zero__raw_free(a, ctx->params[i].name);
    for (i = 0; i < ctx->num_modules; i++) zero__raw_free(a, ctx->modules[i].name);
    zero__raw_free(a, ctx->params);
    zero__raw_free(a, ctx->modules);
    zero__raw_free(a, ctx->tiled);
    for (i = 0; i < ctx->num_ties; i++) zero__raw_free(a, ctx->ties[i].name);
    zero__raw_free(a, ctx->ties);
    for (i = 0; i < ctx->ckrec.n; i++) zero__raw_free(a, ctx->ckrec.rec[i].data);
    zero__release_comm(ctx);
    zero__raw_free(a, ctx);
}

/* zero_create: the context's endpoint of the communicator (one context at a time), or a
   world of one of its own when desc.comm is NULL. A failure this function reported itself
   (the own world's) leaves why->msg empty. */
static zero_result zero__create_comm(zero_ctx *ctx, zero__why *why) {
    zero_comm *c = ctx->desc.comm;
    zero_result r;
    int busy;
    if (!c) {
        if ((r = zero__group_create(&ctx->own_group, 1)) != ZERO_OK ||
            (r = zero__comm_local(&ctx->comm, ctx->own_group, 0)) != ZERO_OK) {
            zero__group_destroy(ctx->own_group);
            ctx->own_group = NULL;
            return r;
        }
        ctx->comm->ctx = ctx;
        return ZERO_OK;
    }
    /* a context's comm stream issues collectives on its own; two contexts on one endpoint
       would interleave them differently on different ranks */
    zero__mutex_lock(&c->group->mu);
    busy = c->in_use;
    c->in_use = 1;
    if (!busy) c->ctx = ctx;
    zero__mutex_unlock(&c->group->mu);
    if (busy)
        return zero__why_set(why, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                             "zero_create: rank %d's zero_comm is already used by another context; give each "
                             "context its own endpoint (its own zero_group)", c->rank);
    ctx->comm = c;
    return ZERO_OK;
}

/* zero_create's checks that need the context: ZeRO++'s nodes, the reduce mode, the
   communicator's own (NCCL: the GPU; MPI: host memory) */
static zero_result zero__create_checks(zero_ctx *ctx, zero__why *why) {
    zero_result r;
    if ((r = zero__zpp_attach(ctx, why)) != ZERO_OK) return r;
    if ((int)ctx->desc.reduce_mode < 0 || ctx->desc.reduce_mode >= ZERO_REDUCE_NUM)
        return zero__why_set(why, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                             "zero_create: zero_desc.reduce_mode is %d; use ZERO_REDUCE_EXACT or ZERO_REDUCE_NCCL",
                             (int)ctx->desc.reduce_mode);
    return zero__comm_attach(ctx, why);
}

/* zero_create after its argument checks */
static zero_result zero__create(zero_ctx **out, const zero_desc *desc) {
    zero_ctx *ctx;
    zero_desc d = *desc;
    zero__why why;
    zero_result r;
    if ((r = zero__fill_desc(&d)) != ZERO_OK) return r;
    if (!(ctx = (zero_ctx *)zero__raw_alloc(&d.allocator, sizeof *ctx)))
        return zero__fail_lg(&d.logger, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY, "zero_create: out of memory");
    memset(ctx, 0, sizeof *ctx);
    ctx->desc = d;
    ctx->salt = zero__next_salt();
    ctx->opt.simd = zero__simd_pick();
    ctx->dev = zero__dev_pick(d.device);
    ctx->tier.vt = &zero__tier_mem;         /* until zero_build picks the planned tier */
    if ((r = ctx->dev->init(ctx)) != ZERO_OK) {
        zero__raw_free(&d.allocator, ctx);
        return r;
    }
    why.msg[0] = '\0';
    if ((r = zero__create_comm(ctx, &why)) != ZERO_OK) {     /* nothing else to undo: the endpoint is not ours */
        ctx->dev->fini(ctx);
        zero__raw_free(&d.allocator, ctx);
        return why.msg[0] ? zero__fail_lg(&d.logger, why.r, why.item, "%s", why.msg) : r;
    }
    ctx->rank = ctx->comm->rank;
    ctx->world = ctx->comm->size;
    ctx->prank = ctx->rank;
    ctx->desc.comm = ctx->comm;
    if ((r = zero__create_checks(ctx, &why)) == ZERO_OK) {
        zero__opt_init_scale(ctx);
        if (zero__stream_start(ctx) == ZERO_OK) {
            *out = ctx;
            return ZERO_OK;
        }
        zero__why_set(&why, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                      "zero_create: could not start the comm stream thread");
    }
    zero__destroy(ctx);
    return zero__fail_lg(&d.logger, why.r, why.item, "%s", why.msg);
}

/* zero_build: the model states (>>build), then the activation stash; a failure undoes both */
static zero_result zero__build_all(zero_ctx *ctx) {
    zero_result r;
    if ((r = zero__build(ctx)) != ZERO_OK) return r;
    r = zero__stash_build(ctx);
    if (ctx->act.num > 0 && ctx->desc.offload_activations == ZERO_OFFLOAD_NVME)
        r = zero__files_agreed(ctx, r, "activation");
    if (r != ZERO_OK) {
        zero__stash_free(ctx);
        zero__unbuild(ctx);
        return r;
    }
    /* the defaults that depend on the model, as the plan used them (zero_query_desc) */
    ctx->desc.bucket_bytes = zero__bucket_bytes(&ctx->desc, ctx->lay.plan.trainable_padded);
    if (ctx->desc.stage == 3 && !ctx->desc.max_live_bytes) ctx->desc.max_live_bytes = ctx->sched.max_live;
    if (ctx->desc.stage == 3 && !ctx->desc.prefetch_bytes) ctx->desc.prefetch_bytes = ctx->sched.prefetch_budget;
    return ZERO_OK;
}

/* zero_stats_get: the bytes allocated now, the traffic counted so far and the step's figures */
static void zero__stats_get(const zero_ctx *ctx, zero_stats *out) {
    zero_ctx *c = ZERO__UNCONST(zero_ctx *, ctx);
    int t, k;
    memset(out, 0, sizeof *out);
    memcpy(out->bytes, ctx->lay.bytes, sizeof out->bytes);
    for (t = 0; t < ZERO_TIER_NUM; t++)
        for (k = 0; k < ZERO_CAT_NUM; k++) {
            out->total_bytes += ctx->lay.bytes[t][k];
            if (k != ZERO_CAT_BUFFERS && k != ZERO_CAT_ACTIVATIONS) out->model_state_bytes += ctx->lay.bytes[t][k];
        }
    zero__mutex_lock(&c->stream.mu);
    memcpy(out->comm_calls, ctx->traffic.calls, sizeof out->comm_calls);
    memcpy(out->comm_elems, ctx->traffic.elems, sizeof out->comm_elems);
    memcpy(out->comm_bytes, ctx->traffic.bytes, sizeof out->comm_bytes);
    zero__mutex_unlock(&c->stream.mu);
    out->steps = ctx->opt.steps;
    out->skipped_steps = ctx->opt.skipped;
    out->micro_batches = ctx->opt.micro;
    out->loss_scale = ctx->opt.loss_scale;
    out->grad_norm = ctx->opt.grad_norm;
    out->prefetch_hits = ctx->sched.hits;
    out->prefetch_misses = ctx->sched.misses;
    out->prefetched_bytes = ctx->sched.prefetched_bytes;
    out->gathered_bytes = ctx->sched.gathered;
    out->peak_gathered_bytes = ctx->sched.peak_gathered;
    out->peak_staging_bytes = ctx->grads.peak;
    out->fetch_wait_ms = ctx->sched.wait_ms;
    if (ctx->act.st) {
        out->act_hits = ctx->act.st->hits;
        out->act_misses = ctx->act.st->misses;
        out->act_bytes_written = ctx->act.st->written;
        out->act_bytes_read = ctx->act.st->read;
        out->act_wait_ms = ctx->act.st->wait_ms;
    }
    zero__comm_bytes(ctx->comm, &out->comm_bytes_within, &out->comm_bytes_across);
    out->host_syncs = __atomic_load_n(&ctx->host_syncs, __ATOMIC_RELAXED);
    out->device_allocs = __atomic_load_n(&ctx->device_allocs, __ATOMIC_RELAXED);
    zero__comm_costs(ctx->comm, out);
}

/* >>dsjson ------------------------------------------------------------------------------
   A DeepSpeed config's JSON into a zero_desc, without allocating. Two steps:
     zero__js_*   a strict recursive-descent check of the whole text (RFC 8259), which
                  records the position of the first error; duplicate keys are found by
                  keeping the offsets of the keys of the objects open at the moment (at most
                  ZERO__JS_KEYS), and nesting is bounded (ZERO__JS_DEPTH), so the stack is too.
     zero__dsc_*  a walk over the checked text: every key is looked up in a table of the
                  keys DeepSpeed documents, mapped onto the desc or reported, one line each.
                  It reads the text in place; values are decoded when they are used.
   DeepSpeed's meaning of each key is taken from its config classes (deepspeed/runtime/
   config.py, zero/config.py, zero/offload_config.py, precision_config.py) and engine.py's
   optimizer choice; where those classes refuse a value (a stage of 4, a negative size), so
   does this. The offsets are size_t; ZERO__JS_NONE is "no such value". */
#define ZERO__JS_DEPTH 64               /* nesting levels (a DeepSpeed config uses 4) */
#define ZERO__JS_KEYS 256               /* keys of the objects open at once (the duplicate check) */
#define ZERO__JS_NUMLEN 100             /* characters of one number */
#define ZERO__JS_NONE ((size_t)-1)

typedef struct zero__js {               /* the text being checked and its first error */
    const char *s;
    size_t err_at;                      /* the error's byte offset */
    char err[384];                      /* "" while there is none */
    size_t keys[ZERO__JS_KEYS];         /* the open objects' keys (offsets of their quotes) */
    int nkeys;
} zero__js;

static int zero__js_fail(zero__js *j, size_t at, const char *fmt, ...) {
    va_list ap;
    if (!j || j->err[0]) return 0;      /* the first error stands */
    j->err_at = at;
    va_start(ap, fmt);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    va_end(ap);
    return 0;
}
static int zero__js_isws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int zero__js_digit(char c) { return c >= '0' && c <= '9'; }
static int zero__js_alnum(char c) {
    return zero__js_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static size_t zero__js_ws(const char *s, size_t i) {
    while (zero__js_isws(s[i])) i++;
    return i;
}
/* line and column (from 1) of byte offset at; a column counts UTF-8 characters */
static void zero__js_linecol(const char *s, size_t at, unsigned long long *line, unsigned long long *col) {
    size_t i;
    *line = 1;
    *col = 1;
    for (i = 0; i < at && s[i]; i++) {
        if (s[i] == '\n') { (*line)++; *col = 1; }
        else if (((unsigned char)s[i] & 0xC0u) != 0x80u) (*col)++;
    }
}
static int zero__js_hex4(const char *s, size_t i, unsigned long *out) {
    unsigned long u = 0;
    int k;
    for (k = 0; k < 4; k++) {               /* stops at the first non-hex byte: never past a NUL */
        char c = s[i + (size_t)k];
        unsigned long d = zero__js_digit(c) ? (unsigned long)(c - '0') : (c >= 'a' && c <= 'f') ?
                          (unsigned long)(c - 'a' + 10) : (c >= 'A' && c <= 'F') ? (unsigned long)(c - 'A' + 10) : 16u;
        if (d > 15u) return 0;
        u = u * 16u + d;
    }
    *out = u;
    return 1;
}
/* The next character of a string, *i at it (the first after the opening quote, or the one
   after the last): its code point; -1 at the closing quote (*i then just past it); -2 on an
   error (recorded in j when j is given; on checked text there is none). */
static long zero__js_char(zero__js *j, const char *s, size_t *i) {
    size_t at = *i;
    unsigned char b = (unsigned char)s[at];
    unsigned long u, lo, cp;
    int n, k;
    if (b == '"') { *i = at + 1; return -1; }
    if (b == 0) return zero__js_fail(j, at, "the text ends inside a string (a '\"' is missing)"), -2;
    if (b < 0x20)
        return zero__js_fail(j, at, "a control character (U+%04X) inside a string; write it as an escape (\\n, \\t, "
                             "\\u%04X)", (unsigned)b, (unsigned)b), -2;
    if (b == '\\') {
        char e = s[at + 1];
        *i = at + 2;
        switch (e) {
        case '"': return '"';
        case '\\': return '\\';
        case '/': return '/';
        case 'b': return 8;
        case 'f': return 12;
        case 'n': return 10;
        case 'r': return 13;
        case 't': return 9;
        case 'u':
            if (!zero__js_hex4(s, at + 2, &u))
                return zero__js_fail(j, at, "\\u must be followed by four hex digits"), -2;
            *i = at + 6;
            if (u >= 0xDC00u && u <= 0xDFFFu)
                return zero__js_fail(j, at, "\\u%04lX is the low half of a surrogate pair, without its high half", u), -2;
            if (u >= 0xD800u && u <= 0xDBFFu) {
                if (s[at + 6] != '\\' || s[at + 7] != 'u' || !zero__js_hex4(s, at + 8, &lo) || lo < 0xDC00u || lo > 0xDFFFu)
                    return zero__js_fail(j, at, "\\u%04lX is the high half of a surrogate pair, without its low half", u), -2;
                *i = at + 12;
                return (long)(0x10000u + ((u - 0xD800u) << 10) + (lo - 0xDC00u));
            }
            return (long)u;
        case 0:
            return zero__js_fail(j, at, "the text ends inside a string (a '\"' is missing)"), -2;
        default:
            if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                return zero__js_fail(j, at, "an invalid escape \\%c (JSON's are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX)",
                                     e), -2;
            return zero__js_fail(j, at, "an invalid escape: a backslash before byte 0x%02X", (unsigned)(unsigned char)e), -2;
        }
    }
    if (b < 0x80) { *i = at + 1; return (long)b; }
    n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;     /* 0x80-0xC1: a stray continuation, an overlong */
    if (n == 0 || b > 0xF4) return zero__js_fail(j, at, "invalid UTF-8 (byte 0x%02X)", (unsigned)b), -2;
    cp = (unsigned long)(b & (0x7Fu >> n));
    for (k = 1; k < n; k++) {               /* a NUL is not a continuation byte: never past the end */
        unsigned char c = (unsigned char)s[at + (size_t)k];
        if ((c & 0xC0u) != 0x80u) return zero__js_fail(j, at, "invalid UTF-8 (byte 0x%02X)", (unsigned)b), -2;
        cp = (cp << 6) | (unsigned long)(c & 0x3Fu);
    }
    if ((n == 3 && (cp < 0x800u || (cp >= 0xD800u && cp <= 0xDFFFu))) || (n == 4 && (cp < 0x10000u || cp > 0x10FFFFu)))
        return zero__js_fail(j, at, "invalid UTF-8 (an overlong form, a surrogate or a code point past U+10FFFF)"), -2;
    *i = at + (size_t)n;
    return (long)cp;
}
static int zero__js_string(zero__js *j, size_t *i) {       /* *i at the opening quote; then past the closing one */
    long c;
    (*i)++;
    while ((c = zero__js_char(j, j->s, i)) >= 0) {}
    return c == -1;
}
/* two checked strings (offsets of their opening quotes) decode to the same characters */
static int zero__js_str_eq(const char *s, size_t a, size_t b) {
    long ca, cb;
    a++;
    b++;
    do {
        ca = zero__js_char(NULL, s, &a);
        cb = zero__js_char(NULL, s, &b);
        if (ca != cb) return 0;
    } while (ca >= 0);
    return 1;
}
static long zero__js_lower(long c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }
/* the checked string at a (or ZERO__JS_NONE, or another value) is lit (ASCII); ci: ignoring ASCII case */
static int zero__js_str_is(const char *s, size_t a, const char *lit, int ci) {
    const unsigned char *l = (const unsigned char *)lit;
    long c;
    if (a == ZERO__JS_NONE || s[a] != '"') return 0;
    a++;
    for (;; l++) {
        c = zero__js_char(NULL, s, &a);
        if (c < 0) return *l == 0;
        if (*l == 0 || (ci ? zero__js_lower(c) != zero__js_lower((long)*l) : c != (long)*l)) return 0;
    }
}
static int zero__js_finite(double x) {     /* on the bit pattern: the includer's -ffast-math cannot drop it */
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return ((u >> 52) & 0x7FFu) != 0x7FFu;
}
/* The value of the number in s[a, b) (checked grammar, at most ZERO__JS_NUMLEN characters),
   correctly rounded: its digits without the point and an adjusted exponent go to strtod,
   which reads no radix character, so the C locale's decimal point cannot change the value.
   *nonzero: a digit other than 0 was written (a value that underflowed to 0 is an error). */
static double zero__js_numval(const char *s, size_t a, size_t b, int *nonzero) {
    char buf[ZERO__JS_NUMLEN + 24];
    size_t n = 0, i = a;
    long exp = 0, frac = 0;             /* the exponent written; digits after the point */
    int neg = 0, point = 0;
    *nonzero = 0;
    if (s[i] == '-') { buf[n++] = '-'; i++; }
    for (; i < b && (zero__js_digit(s[i]) || s[i] == '.'); i++) {
        if (s[i] == '.') { point = 1; continue; }
        frac += point;
        if (s[i] != '0') *nonzero = 1;
        buf[n++] = s[i];
    }
    if (i < b) {                                /* 'e' or 'E' */
        i++;
        if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
        for (; i < b; i++)
            if (exp < 1000000L) exp = exp * 10 + (s[i] - '0');   /* beyond that, any exponent is out of range */
        if (neg) exp = -exp;
    }
    snprintf(buf + n, sizeof buf - n, "e%ld", exp - frac);
    return strtod(buf, NULL);
}
static int zero__js_value(zero__js *j, size_t *i, int depth);
static int zero__js_unexpected(zero__js *j, size_t at, const char *what) {
    unsigned char c = (unsigned char)j->s[at];
    if (c == 0) return zero__js_fail(j, at, "the text ends where %s should be", what);
    if (c == '\'') return zero__js_fail(j, at, "expected %s, found a single quote (JSON strings take double quotes)", what);
    if (c == '/') return zero__js_fail(j, at, "expected %s, found '/' (JSON has no comments)", what);
    if (c >= 0x20 && c < 0x7f) return zero__js_fail(j, at, "expected %s, found '%c'", what, (char)c);
    return zero__js_fail(j, at, "expected %s, found byte 0x%02X", what, (unsigned)c);
}
static int zero__js_number(zero__js *j, size_t *i) {
    const char *s = j->s;
    size_t p = *i, start = p;
    int nonzero;
    double v;
    if (s[p] == '-') p++;
    if (s[p] == '0') {
        p++;
        if (zero__js_digit(s[p])) return zero__js_fail(j, start, "a number with a leading zero");
    } else if (zero__js_digit(s[p])) {
        while (zero__js_digit(s[p])) p++;
    } else {
        return zero__js_unexpected(j, p, "a digit after '-'");
    }
    if (s[p] == '.') {
        p++;
        if (!zero__js_digit(s[p])) return zero__js_unexpected(j, p, "a digit after the decimal point");
        while (zero__js_digit(s[p])) p++;
    }
    if (s[p] == 'e' || s[p] == 'E') {
        p++;
        if (s[p] == '+' || s[p] == '-') p++;
        if (!zero__js_digit(s[p])) return zero__js_unexpected(j, p, "a digit in the exponent");
        while (zero__js_digit(s[p])) p++;
    }
    if (p - start > ZERO__JS_NUMLEN)
        return zero__js_fail(j, start, "a number of more than %d characters", ZERO__JS_NUMLEN);
    v = zero__js_numval(s, start, p, &nonzero);
    if (!zero__js_finite(v) || (v == 0 && nonzero))
        return zero__js_fail(j, start, "the number %.*s is out of the range of a double", (int)(p - start), s + start);
    *i = p;
    return 1;
}
static int zero__js_word(zero__js *j, size_t *i) {     /* true, false, null; a word that is none of them */
    const char *s = j->s;
    size_t p = *i, n;
    while (zero__js_alnum(s[p])) p++;
    n = p - *i;
    if ((n == 4 && !memcmp(s + *i, "true", 4)) || (n == 5 && !memcmp(s + *i, "false", 5)) ||
        (n == 4 && !memcmp(s + *i, "null", 4))) {
        *i = p;
        return 1;
    }
    if ((n == 3 && !memcmp(s + *i, "NaN", 3)) || (n == 8 && !memcmp(s + *i, "Infinity", 8)))
        return zero__js_fail(j, *i, "%.*s is not JSON (JSON numbers are finite)", (int)n, s + *i);
    if ((n == 4 && !memcmp(s + *i, "True", 4)) || (n == 5 && !memcmp(s + *i, "False", 5)) ||
        (n == 4 && !memcmp(s + *i, "None", 4)))
        return zero__js_fail(j, *i, "Python's %.*s is not JSON (write true, false or null)", (int)n, s + *i);
    return zero__js_fail(j, *i, "an unknown word '%.*s' (JSON's are true, false and null)", (int)(n > 24 ? 24 : n),
                         s + *i);
}
static int zero__js_object(zero__js *j, size_t *i, int depth) {
    const char *s = j->s;
    size_t p = zero__js_ws(s, *i + 1), k;
    int base = j->nkeys, ok = 1, n;
    unsigned long long line, col;
    if (s[p] == '}') { *i = p + 1; return 1; }
    for (;;) {
        if (s[p] != '"') { ok = zero__js_unexpected(j, p, "a key (a string in double quotes)"); break; }
        k = p;
        if (!zero__js_string(j, &p)) { ok = 0; break; }
        for (n = base; n < j->nkeys && !zero__js_str_eq(s, j->keys[n], k); n++) {}
        if (n < j->nkeys) {
            zero__js_linecol(s, j->keys[n], &line, &col);
            ok = zero__js_fail(j, k, "the key %.*s%s is in this object twice (first at line %llu, column %llu)",
                               (int)(p - k > 40 ? 40 : p - k), s + k, p - k > 40 ? "..." : "", line, col);
            break;
        }
        if (j->nkeys == ZERO__JS_KEYS) {
            ok = zero__js_fail(j, k, "more than %d keys in the objects open here", ZERO__JS_KEYS);
            break;
        }
        j->keys[j->nkeys++] = k;
        p = zero__js_ws(s, p);
        if (s[p] != ':') { ok = zero__js_unexpected(j, p, "':' after the key"); break; }
        p = zero__js_ws(s, p + 1);
        if (!zero__js_value(j, &p, depth)) { ok = 0; break; }
        p = zero__js_ws(s, p);
        if (s[p] == '}') { p++; break; }
        if (s[p] != ',') {
            ok = s[p] ? zero__js_unexpected(j, p, "',' or '}' after an object's member")
                      : zero__js_fail(j, p, "the text ends inside an object (a '}' is missing)");
            break;
        }
        k = p;
        p = zero__js_ws(s, p + 1);
        if (s[p] == '}') { ok = zero__js_fail(j, k, "a comma before '}' (JSON has no trailing commas)"); break; }
    }
    j->nkeys = base;
    *i = p;
    return ok;
}
static int zero__js_array(zero__js *j, size_t *i, int depth) {
    const char *s = j->s;
    size_t p = zero__js_ws(s, *i + 1), c;
    if (s[p] == ']') { *i = p + 1; return 1; }
    for (;;) {
        if (!zero__js_value(j, &p, depth)) return 0;
        p = zero__js_ws(s, p);
        if (s[p] == ']') { *i = p + 1; return 1; }
        if (s[p] != ',')
            return s[p] ? zero__js_unexpected(j, p, "',' or ']' after an array's element")
                        : zero__js_fail(j, p, "the text ends inside an array (a ']' is missing)");
        c = p;
        p = zero__js_ws(s, p + 1);
        if (s[p] == ']') return zero__js_fail(j, c, "a comma before ']' (JSON has no trailing commas)");
    }
}
static int zero__js_value(zero__js *j, size_t *i, int depth) {
    char c = j->s[*i];
    if (c == '{' || c == '[') {
        if (depth >= ZERO__JS_DEPTH) return zero__js_fail(j, *i, "more than %d levels of nesting", ZERO__JS_DEPTH);
        return c == '{' ? zero__js_object(j, i, depth + 1) : zero__js_array(j, i, depth + 1);
    }
    if (c == '"') return zero__js_string(j, i);
    if (c == '-' || zero__js_digit(c)) return zero__js_number(j, i);
    if (zero__js_alnum(c)) return zero__js_word(j, i);
    return zero__js_unexpected(j, *i, "a value");
}
static const char *zero__js_kind(const char *s, size_t v) {
    switch (s[v]) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}
/* the whole text: one JSON value, an object */
static int zero__js_check(zero__js *j) {
    const char *s = j->s;
    size_t p;
    if ((unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        return zero__js_fail(j, 0, "a UTF-8 byte-order mark (JSON text starts without one)");
    p = zero__js_ws(s, 0);
    if (!s[p]) return zero__js_fail(j, p, "no JSON value: the text is empty");
    if (!zero__js_value(j, &p, 0)) return 0;
    p = zero__js_ws(s, p);
    if (s[p]) return zero__js_fail(j, p, "more text after the JSON value");
    p = zero__js_ws(s, 0);
    if (s[p] != '{')
        return zero__js_fail(j, p, "the root is %s; a DeepSpeed config is an object ({...})", zero__js_kind(s, p));
    return 1;
}

/* Reading checked text: skip a value, walk an object's members or an array's elements. */
static size_t zero__js_skip(const char *s, size_t i) {     /* i at a value: the offset just past it */
    int depth = 0;
    do {
        char c = s[i];
        if (c == '"') {
            for (i++; s[i] != '"'; i += s[i] == '\\' ? 2 : 1) {}
            i++;
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            depth--;
            i++;
        } else if (c == ',' || c == ':' || zero__js_isws(c)) {
            i++;
        } else {
            while (zero__js_alnum(s[i]) || s[i] == '-' || s[i] == '+' || s[i] == '.') i++;
        }
    } while (depth > 0);
    return i;
}
/* the next member of the object whose text continues at *it (just after '{' or a member):
   1 with *k at its key's quote and *v at its value; 0 after the last */
static int zero__js_member(const char *s, size_t *it, size_t *k, size_t *v) {
    size_t p = zero__js_ws(s, *it);
    if (s[p] == ',') p = zero__js_ws(s, p + 1);
    if (s[p] == '}') return 0;
    *k = p;
    p = zero__js_ws(s, zero__js_skip(s, p));
    *v = zero__js_ws(s, p + 1);
    *it = zero__js_skip(s, *v);
    return 1;
}
static int zero__js_elem(const char *s, size_t *it, size_t *v) {
    size_t p = zero__js_ws(s, *it);
    if (s[p] == ',') p = zero__js_ws(s, p + 1);
    if (s[p] == ']') return 0;
    *v = p;
    *it = zero__js_skip(s, p);
    return 1;
}
/* the value of key name in the object at o (or ZERO__JS_NONE: no object, no such key, or null) */
static size_t zero__js_get(const char *s, size_t o, const char *name) {
    size_t it, k, v;
    if (o == ZERO__JS_NONE) return ZERO__JS_NONE;
    o = zero__js_ws(s, o);              /* (the root: 0, before any whitespace of the text's start) */
    if (s[o] != '{') return ZERO__JS_NONE;
    it = o + 1;
    while (zero__js_member(s, &it, &k, &v))
        if (zero__js_str_is(s, k, name, 0)) return s[v] == 'n' ? ZERO__JS_NONE : v;
    return ZERO__JS_NONE;
}
static int zero__js_true(const char *s, size_t v) { return v != ZERO__JS_NONE && s[v] == 't'; }
static int zero__js_isnum(const char *s, size_t v) { return v != ZERO__JS_NONE && (s[v] == '-' || zero__js_digit(s[v])); }
static double zero__js_num(const char *s, size_t v) {      /* a checked number */
    size_t e = v;
    int nonzero;
    while (zero__js_digit(s[e]) || s[e] == '-' || s[e] == '+' || s[e] == '.' || s[e] == 'e' || s[e] == 'E') e++;
    return zero__js_numval(s, v, e, &nonzero);
}
static double zero__js_num_or(const char *s, size_t v, double dflt) {
    return zero__js_isnum(s, v) ? zero__js_num(s, v) : dflt;
}
static int zero__js_isint(const char *s, size_t v, double lo, double hi, double *out) {
    double x;
    if (!zero__js_isnum(s, v)) return 0;
    x = zero__js_num(s, v);
    if (x != floor(x) || x < lo || x > hi) return 0;
    if (out) *out = x;
    return 1;
}
/* The value at v as it is written, without the whitespace outside strings, cut to 48 bytes
   (at a character's start) with "..." after: what report lines and errors quote. */
static void zero__js_snip(const char *s, size_t v, char *out, size_t cap) {
    size_t end = zero__js_skip(s, v), i = v, n = 0, max = cap - 5;
    int in_str = 0;
    if (max > 48) max = 48;
    for (; i < end && n < max; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\' && n + 1 < max) { out[n++] = c; c = s[++i]; }
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (zero__js_isws(c)) {
            continue;
        }
        out[n++] = c;
    }
    if (i < end) {
        while (n > 0 && ((unsigned char)out[n - 1] & 0xC0u) == 0x80u) n--;      /* not half a character */
        if (n > 0 && (unsigned char)out[n - 1] >= 0xC0u) n--;
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = 0;
}

/* ---- the DeepSpeed keys ----------------------------------------------------------------- */
typedef struct zero__dsk {          /* a key the walk knows */
    const char *name;
    char kind;                      /* 'f': its case of the object's function (id); 'F': the same, and the
                                       function reads "auto" itself; 'b': a boolean, honoured when it is
                                       id (1 or 0); 'v': an integer, honoured when it is id; 'n': never
                                       honoured; 's': a section, honoured while empty or "enabled": false;
                                       'z': type-checked, no line (it does nothing in DeepSpeed either, or
                                       only what zero.h does anyway) */
    char type;                      /* 'b' boolean, 'i' integer, 'n' number, 's' string, 'o' object,
                                       'a' array, '*' any: a value of another type is an error */
    int id;
    const char *why;                /* 'b' 'v' 'n' 's': the line's reason; 'f': zero.h's default, named in the
                                       line of an "auto" value (NULL: none to name) */
} zero__dsk;

enum {                              /* the cases of the objects' functions */
    ZERO__DSC_TBS = 1, ZERO__DSC_MICRO, ZERO__DSC_GAS, ZERO__DSC_OPTIM, ZERO__DSC_CLIP, ZERO__DSC_FP16,
    ZERO__DSC_BF16, ZERO__DSC_BF16_OLD, ZERO__DSC_ZERO, ZERO__DSC_PREDIV, ZERO__DSC_REDOP, ZERO__DSC_COMMDT,
    ZERO__DSC_DTYPES, ZERO__DSC_AIO,
    /* zero_optimization */
    ZERO__DSC_STAGE, ZERO__DSC_BUCKET, ZERO__DSC_PREFETCH, ZERO__DSC_PERSIST, ZERO__DSC_OFF_OPT, ZERO__DSC_OFF_PAR,
    ZERO__DSC_CPU_OFF, ZERO__DSC_CPU_OFF_PAR, ZERO__DSC_QWZ, ZERO__DSC_QGZ, ZERO__DSC_HPZ,
    /* offload_optimizer, offload_param */
    ZERO__DSC_DEVICE, ZERO__DSC_PATH, ZERO__DSC_PIN, ZERO__DSC_NVME_ONLY, ZERO__DSC_MAX_IN_CPU, ZERO__DSC_PIPE,
    ZERO__DSC_FAST_INIT,
    ZERO__DSC_RATIO,
    /* fp16, bf16 */
    ZERO__DSC_ENABLED, ZERO__DSC_LOSS_SCALE, ZERO__DSC_SCALE_POWER, ZERO__DSC_SCALE_WINDOW, ZERO__DSC_HYST,
    ZERO__DSC_CONSEC_HYST, ZERO__DSC_MIN_SCALE, ZERO__DSC_HALF_TRUE,    /* true: a line (while enabled) */
    ZERO__DSC_HALF_FALSE,           /* false: a line (while enabled) */
    /* optimizer */
    ZERO__DSC_TYPE, ZERO__DSC_PARAMS, ZERO__DSC_LR, ZERO__DSC_BETAS, ZERO__DSC_EPS, ZERO__DSC_WD, ZERO__DSC_WMODE,
    ZERO__DSC_MAXNORM, ZERO__DSC_MOMENTUM, ZERO__DSC_DAMPENING, ZERO__DSC_NESTEROV,
    /* aio, data_types */
    ZERO__DSC_AIO_BLOCK, ZERO__DSC_AIO_QD, ZERO__DSC_AIO_THREADS, ZERO__DSC_AIO_TRUE, ZERO__DSC_AIO_FALSE,
    ZERO__DSC_ACC_DTYPE
};
enum { ZERO__DSC_OPT_NONE, ZERO__DSC_OPT_ADAM, ZERO__DSC_OPT_ADAMW, ZERO__DSC_OPT_SGD, ZERO__DSC_OPT_OTHER };

static const zero__dsk zero__dsc_root_keys[] = {
    {"train_batch_size", 'f', 'i', ZERO__DSC_TBS, NULL},
    {"train_micro_batch_size_per_gpu", 'f', 'i', ZERO__DSC_MICRO, NULL},
    {"gradient_accumulation_steps", 'f', 'i', ZERO__DSC_GAS, "accum_steps 1"},
    {"optimizer", 'f', 'o', ZERO__DSC_OPTIM, NULL},
    {"scheduler", 'n', '*', 0, "zero.h has no learning-rate schedule: optim.lr stays what it is at zero_create"},
    {"gradient_clipping", 'f', 'n', ZERO__DSC_CLIP, "clip_norm 0: no clipping"},
    {"fp16", 'f', 'o', ZERO__DSC_FP16, NULL},
    {"bf16", 'f', 'o', ZERO__DSC_BF16, NULL},
    {"bfloat16", 'f', 'o', ZERO__DSC_BF16_OLD, NULL},
    {"zero_optimization", 'f', '*', ZERO__DSC_ZERO, "stage 0"},
    {"data_types", 'f', 'o', ZERO__DSC_DTYPES, NULL},
    {"aio", 'f', 'o', ZERO__DSC_AIO, NULL},
    {"gradient_predivide_factor", 'f', 'n', ZERO__DSC_PREDIV, NULL},
    {"gradient_allreduce_op", 'f', 's', ZERO__DSC_REDOP, NULL},
    {"communication_data_type", 'f', 's', ZERO__DSC_COMMDT, NULL},
    {"steps_per_print", 'n', 'i', 0, "zero.h prints nothing: print from your loop"},
    {"wall_clock_breakdown", 'b', 'b', 0, "zero.h's timeline is zero_trace_enable (ON TRACING)"},
    {"memory_breakdown", 'b', 'b', 0, "zero.h prints nothing: zero_plan_get and zero_stats_get give the bytes"},
    {"dump_state", 'b', 'b', 0, "zero.h prints nothing: zero_query_desc gives the settings in effect"},
    {"prescale_gradients", 'b', 'b', 0, "zero.h divides the summed gradients inside the optimizer pass"},
    {"sparse_gradients", 'b', 'b', 0, "zero.h reduces every gradient dense"},
    {"disable_allgather", 'b', 'b', 0, "zero.h always gathers the updated params"},
    {"zero_allow_untested_optimizer", 'b', 'b', 0, "zero.h runs only its own optimizers"},
    {"zero_force_ds_cpu_optimizer", 'b', 'b', 1, "an offloaded step is always zero.h's own CPU pass"},
    {"dataloader_drop_last", 'b', 'b', 0, "zero.h has no data loader"},
    {"activation_checkpointing", 's', '*', 0,
     "zero.h keeps checkpointed activations through zero_act_* and desc.offload_activations (ON ACTIVATIONS)"},
    {"amp", 's', '*', 0, "zero.h has no Apex AMP: param_dtype sets the precision"},
    {"torch_autocast", 's', '*', 0, "zero.h does not cast your forward pass: param_dtype sets the precision"},
    {"tensorboard", 's', '*', 0, "zero.h writes no monitor logs"},
    {"wandb", 's', '*', 0, "zero.h writes no monitor logs"},
    {"comet", 's', '*', 0, "zero.h writes no monitor logs"},
    {"csv_monitor", 's', '*', 0, "zero.h writes no monitor logs"},
    {"flops_profiler", 's', '*', 0, "zero.h has no FLOPS profiler (zero_trace_enable times its own work)"},
    {"comms_logger", 's', '*', 0, "zero.h logs no collectives: zero_stats_get counts their calls and bytes"},
    {"autotuning", 's', '*', 0, "zero.h has no autotuner: zero_estimate gives a setting's bytes"},
    {"elasticity", 's', '*', 0, "zero.h has no elastic training (its checkpoints load at any world size)"},
    {"sparse_attention", 's', '*', 0, "zero.h has no model code"},
    {"data_efficiency", 's', '*', 0, "zero.h does not touch your data"},
    {"curriculum_learning", 's', '*', 0, "zero.h does not touch your data"},
    {"compression_training", 's', '*', 0, "zero.h has no model compression"},
    {"checkpoint", 's', '*', 0, "zero.h's checkpoints are zero_save and zero_load (ON CHECKPOINTS)"},
    {"pipeline", 's', '*', 0, "zero.h is data parallel only"},
    {"tensor_parallel", 's', '*', 0, "zero.h is data parallel only"},
    {"expert_parallel", 's', '*', 0, "zero.h is data parallel only"},
    {"hybrid_engine", 's', '*', 0, "zero.h has no inference engine"}
};
static const zero__dsk zero__dsc_zero_keys[] = {
    {"stage", 'f', '*', ZERO__DSC_STAGE, "stage 0"},     /* its function names the range in an error */
    {"reduce_bucket_size", 'f', 'i', ZERO__DSC_BUCKET, "bucket_bytes: min(16 MiB, the gradient bytes / 8)"},
    {"stage3_prefetch_bucket_size", 'f', 'i', ZERO__DSC_PREFETCH, "prefetch_bytes: max_live_bytes"},
    {"prefetch_bucket_size", 'f', 'i', ZERO__DSC_PREFETCH, "prefetch_bytes: max_live_bytes"},
    {"stage3_param_persistence_threshold", 'f', 'i', ZERO__DSC_PERSIST, "persist_bytes 0: none"},
    {"param_persistence_threshold", 'f', 'i', ZERO__DSC_PERSIST, "persist_bytes 0: none"},
    {"offload_optimizer", 'f', 'o', ZERO__DSC_OFF_OPT, "none"},
    {"offload_param", 'f', 'o', ZERO__DSC_OFF_PAR, "none"},
    {"cpu_offload", 'f', 'b', ZERO__DSC_CPU_OFF, "none"},
    {"cpu_offload_param", 'f', 'b', ZERO__DSC_CPU_OFF_PAR, "none"},
    {"cpu_offload_use_pin_memory", 'z', 'b', 0, NULL},     /* deprecated; DeepSpeed ignores it */
    {"zero_quantized_weights", 'f', 'b', ZERO__DSC_QWZ, "qwz off"},
    {"zero_quantized_gradients", 'f', 'b', ZERO__DSC_QGZ, "qgz off"},
    {"zero_hpz_partition_size", 'f', 'i', ZERO__DSC_HPZ, "hpz off"},
    {"contiguous_gradients", 'b', 'b', 1, "zero.h always stages gradients in one contiguous area"},
    {"reduce_scatter", 'b', 'b', 1, "zero.h always reduce-scatters (stage 0: and all-gathers); the sums are the same"},
    {"overlap_comm", 'b', 'b', 1, "zero.h always overlaps the gradient reduction with your backward pass"},
    {"allgather_partitions", 'b', 'b', 1, "zero.h always all-gathers the updated params"},
    {"load_from_fp32_weights", 'b', 'b', 1, "zero_load always restores the fp32 master weights"},
    {"elastic_checkpoint", 'b', 'b', 0, "zero.h's checkpoints load at any world size anyway"},
    {"ignore_unused_parameters", 'b', 'b', 1,
     "zero.h does not look for unused parameters (a gradient you never add is reduced as zeros)"},
    {"round_robin_gradients", 'b', 'b', 0, "zero.h copies no gradients to the host round robin"},
    {"legacy_stage1", 'b', 'b', 0, "zero.h has one stage 1"},
    {"zero_quantized_nontrainable_weights", 'b', 'b', 0, "zero.h keeps frozen modules in param_dtype"},
    {"mics_hierarchical_params_gather", 'b', 'b', 0, "zero.h has no MiCS"},
    {"stage3_gather_16bit_weights_on_model_save", 'b', 'b', 0,
     "the desc has no say in saving: zero_export_safetensors(z, path, ZERO_BF16) writes the 16-bit weights"},
    {"gather_16bit_weights_on_model_save", 'b', 'b', 0,
     "the desc has no say in saving: zero_export_safetensors(z, path, ZERO_BF16) writes the 16-bit weights"},
    {"stage3_gather_fp16_weights_on_model_save", 'b', 'b', 0,
     "the desc has no say in saving: zero_export_safetensors(z, path, ZERO_BF16) writes the 16-bit weights"},
    {"stage3_use_all_reduce_for_fetch_params", 'b', 'b', 0, "zero.h fetches with all-gathers"},
    {"use_all_reduce_for_fetch_params", 'b', 'b', 0, "zero.h fetches with all-gathers"},
    {"stage3_allgather_sequential", 'b', 'b', 0, "zero.h gathers a module's params as one span"},
    {"allgather_sequential", 'b', 'b', 0, "zero.h gathers a module's params as one span"},
    {"pipeline_loading_checkpoint", 'b', 'b', 0, "zero.h is data parallel only"},
    {"log_trace_cache_warnings", 'b', 'b', 0, "zero.h logs a changed fetch order as SCHEDULE_CHANGED (LOGGING)"},
    {"save_muon_momentum_buffer_in_memory", 'b', 'b', 0, "zero.h has no Muon"},
    {"grad_hooks", 'b', 'b', 1, "zero.h learns that gradients are ready from zero_grads_ready, not from hooks"},
    {"enable_sanity_checks", 'z', 'b', 0, NULL},           /* zero.h always checks what it can */
    {"stage3_module_granularity_threshold", 'v', 'i', 0, "zero.h fetches the modules you register, as registered"},
    {"module_granularity_threshold", 'v', 'i', 0, "zero.h fetches the modules you register, as registered"},
    {"mics_shard_size", 'v', 'i', -1, "zero.h has no MiCS: the partition spans every rank"},
    {"allgather_bucket_size", 'n', 'i', 0, "zero.h gathers the updated params module by module, with no bucket"},
    {"use_multi_rank_bucket_allreduce", 'n', 'b', 0, "zero.h reduce-scatters each bucket, never all-reduces them"},
    {"sub_group_size", 'n', 'i', 0,
     "zero.h steps the rank's whole shard in one pass (NVMe: through offload.buffer_bytes of buffers)"},
    {"stage3_max_live_parameters", 'n', 'i', 0,
     "zero.h allocates max_live_bytes as its gather arena at zero_build, where DeepSpeed's is a limit: left at "
     "zero.h's default (the largest module)"},
    {"max_live_parameters", 'n', 'i', 0,
     "zero.h allocates max_live_bytes as its gather arena at zero_build, where DeepSpeed's is a limit: left at "
     "zero.h's default (the largest module)"},
    {"stage3_max_reuse_distance", 'n', 'i', 0, "zero.h's reuse_distance counts fetches, not elements: left at 0"},
    {"max_reuse_distance", 'n', 'i', 0, "zero.h's reuse_distance counts fetches, not elements: left at 0"},
    {"stage3_model_persistence_threshold", 'n', 'i', 0, "zero.h bounds the kept modules by persist_bytes alone"},
    {"model_persistence_threshold", 'n', 'i', 0, "zero.h bounds the kept modules by persist_bytes alone"},
    {"memory_efficient_linear", 'n', 'b', 0, "zero.h runs none of your layers (its own tiled linear: ON TILING)"},
    {"override_module_apply", 'n', 'b', 0, "zero.h does not hook your modules"},
    {"zeropp_loco_param", 'n', 'o', 0, "zero.h's qgz has no error feedback (LoCo)"},
    {"leaf_module", 'n', 'o', 0, "zero.h fetches the modules you register; it has no leaf modules to mark"},
    {"zenflow", 's', '*', 0, "zero.h has no ZenFlow"}
};
static const zero__dsk zero__dsc_off_keys[] = {       /* offload_optimizer and offload_param */
    {"device", 'f', 's', ZERO__DSC_DEVICE, "none"},
    {"nvme_path", 'f', 's', ZERO__DSC_PATH, NULL},
    {"pin_memory", 'f', 'b', ZERO__DSC_PIN, NULL},
    {"buffer_count", 'f', 'i', ZERO__DSC_NVME_ONLY, NULL},
    {"buffer_size", 'f', 'i', ZERO__DSC_NVME_ONLY, NULL},            /* offload_param's */
    {"max_in_cpu", 'f', 'i', ZERO__DSC_MAX_IN_CPU, NULL},            /* offload_param's */
    {"pipeline_read", 'f', 'b', ZERO__DSC_PIPE, NULL},               /* offload_optimizer's from here on */
    {"pipeline_write", 'f', 'b', ZERO__DSC_PIPE, NULL},
    {"fast_init", 'f', 'b', ZERO__DSC_FAST_INIT, NULL},
    {"ratio", 'f', 'n', ZERO__DSC_RATIO, NULL},
    {"super_offload", 'b', 'b', 0, "zero.h has no Superchip mode"},
    {"cpuadam_cores_perc", 'n', 'n', 0, "zero.h's CPU pass runs on desc.cpu_threads threads"}
};
static const zero__dsk zero__dsc_fp16_keys[] = {
    {"enabled", 'F', 'b', ZERO__DSC_ENABLED, NULL},
    {"loss_scale", 'f', 'n', ZERO__DSC_LOSS_SCALE, "loss_scale 0: dynamic"},
    {"initial_scale_power", 'f', 'i', ZERO__DSC_SCALE_POWER, "loss_scale_init 65536"},
    {"loss_scale_window", 'f', 'i', ZERO__DSC_SCALE_WINDOW, "loss_scale_window 1000"},
    {"hysteresis", 'f', 'i', ZERO__DSC_HYST, "1"},
    {"consecutive_hysteresis", 'f', 'b', ZERO__DSC_CONSEC_HYST, NULL},
    {"min_loss_scale", 'f', 'i', ZERO__DSC_MIN_SCALE, "loss_scale_min 1"},
    {"auto_cast", 'f', 'b', ZERO__DSC_HALF_TRUE, NULL},
    {"fp16_master_weights_and_grads", 'f', 'b', ZERO__DSC_HALF_TRUE, NULL}
};
static const zero__dsk zero__dsc_bf16_keys[] = {
    {"enabled", 'F', 'b', ZERO__DSC_ENABLED, NULL},
    {"immediate_grad_update", 'f', 'b', ZERO__DSC_HALF_TRUE, NULL},
    {"bf16_master_weights_and_grads", 'f', 'b', ZERO__DSC_HALF_TRUE, NULL},
    {"bf16_optimizer_states", 'f', 'b', ZERO__DSC_HALF_TRUE, NULL},
    {"check_grad_overflow", 'f', 'b', ZERO__DSC_HALF_FALSE, NULL}
};
static const zero__dsk zero__dsc_optim_keys[] = {
    {"type", 'f', 's', ZERO__DSC_TYPE, "AdamW"},
    {"params", 'f', 'o', ZERO__DSC_PARAMS, NULL},
    {"legacy_fusion", 'b', 'b', 0, "zero.h has one fused optimizer pass"}
};
static const zero__dsk zero__dsc_adam_keys[] = {      /* Adam and AdamW (engine.py: FusedAdam, DeepSpeedCPUAdam) */
    {"lr", 'f', 'n', ZERO__DSC_LR, "1e-3"},
    {"betas", 'f', 'a', ZERO__DSC_BETAS, "0.9, 0.999"},
    {"eps", 'f', 'n', ZERO__DSC_EPS, "1e-8"},
    {"weight_decay", 'f', 'n', ZERO__DSC_WD, "0"},
    {"adam_w_mode", 'f', 'b', ZERO__DSC_WMODE, NULL},
    {"max_grad_norm", 'f', '*', ZERO__DSC_MAXNORM, NULL},
    {"torch_adam", 'z', 'b', 0, NULL},                     /* torch's Adam(W): the same update */
    {"bias_correction", 'b', 'b', 1, "zero.h's AdamW always corrects the moments' bias"},
    {"amsgrad", 'b', 'b', 0, "zero.h's AdamW has no AMSGrad"},
    {"fp32_optimizer_states", 'b', 'b', 1, "zero.h keeps its moments in fp32"},
    {"maximize", 'b', 'b', 0, "zero.h minimizes"}
};
static const zero__dsk zero__dsc_sgd_keys[] = {       /* torch.optim.SGD */
    {"lr", 'f', 'n', ZERO__DSC_LR, "1e-3"},
    {"momentum", 'f', 'n', ZERO__DSC_MOMENTUM, "0"},
    {"dampening", 'f', 'n', ZERO__DSC_DAMPENING, "0"},
    {"weight_decay", 'f', 'n', ZERO__DSC_WD, "0"},
    {"nesterov", 'f', 'b', ZERO__DSC_NESTEROV, "off"},
    {"max_grad_norm", 'f', '*', ZERO__DSC_MAXNORM, NULL},
    {"maximize", 'b', 'b', 0, "zero.h minimizes"},
    {"foreach", 'z', '*', 0, NULL},                         /* how torch loops: the same update */
    {"fused", 'z', '*', 0, NULL},
    {"differentiable", 'b', 'b', 0, "zero.h's step is not differentiated"}
};
static const zero__dsk zero__dsc_aio_keys[] = {       /* the NVMe tier's I/O: lines only while it is in use */
    {"block_size", 'f', 'i', ZERO__DSC_AIO_BLOCK, NULL},
    {"queue_depth", 'f', 'i', ZERO__DSC_AIO_QD, "queue_depth 16"},
    {"thread_count", 'f', 'i', ZERO__DSC_AIO_THREADS, NULL},
    {"intra_op_parallelism", 'f', 'i', ZERO__DSC_AIO_THREADS, NULL},
    {"single_submit", 'f', 'b', ZERO__DSC_AIO_TRUE, NULL},
    {"use_gds", 'f', 'b', ZERO__DSC_AIO_TRUE, NULL},
    {"overlap_events", 'f', 'b', ZERO__DSC_AIO_FALSE, NULL}
};
static const zero__dsk zero__dsc_dtypes_keys[] = {
    {"grad_accum_dtype", 'f', 's', ZERO__DSC_ACC_DTYPE, "grad_accum_dtype: grad_dtype"}
};
#define ZERO__DSC_N(tab) ((int)(sizeof tab / sizeof tab[0]))

typedef struct zero__dsc {          /* the walk's state */
    zero__js js;                    /* the text and the first error */
    zero_desc d;                    /* what it fills */
    char *rep;                      /* the caller's report, rep_cap bytes; rep_len used */
    size_t rep_cap, rep_len;
    int rep_full, lines;
    char path[200];                 /* the key being read, "zero_optimization.stage" */
    size_t plen;
    /* what the first look at the text found (zero__dsc_scan), for keys that depend on others */
    int stage;                      /* zero_optimization.stage */
    int dtype;                      /* param_dtype: ZERO_F16, ZERO_BF16, ZERO_F32 (neither enabled), 0 ("auto") */
    int fp16_dyn;                   /* fp16 enabled with a dynamic loss scale */
    double hyst;                    /* fp16.hysteresis, when an integer (else 2, DeepSpeed's default) */
    zero_offload_tier opt_dev, par_dev;     /* the offload devices asked for */
    zero_offload_tier opt_eff, par_eff;     /* what the desc gets */
    size_t opt_path;                /* offload_optimizer.nvme_path (a string) or ZERO__JS_NONE */
    int optim;                      /* ZERO__DSC_OPT_*: optimizer.type */
    int adam_l2;                    /* Adam with adam_w_mode false: weight decay goes into the gradient */
    double wd, momentum, dampening; /* optimizer.params' values (0 when absent or not numbers) */
    const char *opt_why, *par_why;  /* why the desc does not get the device asked for (NULL: no line) */
    int off_param;                  /* the offload object being read is offload_param */
    int in_fp16;                    /* the precision section being read is fp16 (else bf16) */
} zero__dsc;

static void zero__dsc_emit(zero__dsc *c, const char *line) {     /* whole lines only, while they fit */
    size_t n = strlen(line);
    c->lines++;
    if (!c->rep || c->rep_full) return;
    if (c->rep_len + n + 2 > c->rep_cap) { c->rep_full = 1; return; }
    memcpy(c->rep + c->rep_len, line, n);
    c->rep_len += n;
    c->rep[c->rep_len++] = '\n';
    c->rep[c->rep_len] = 0;
}
/* the line of the key at the path, value v: "<path>=<value>: not honoured: <why>" */
static void zero__dsc_note(zero__dsc *c, size_t v, const char *fmt, ...) {
    char why[400], val[64], line[720];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    zero__js_snip(c->js.s, v, val, sizeof val);
    snprintf(line, sizeof line, "%.200s=%.64s: not honoured: %.400s", c->path, val, why);
    zero__dsc_emit(c, line);
}
/* the line of an absent key whose DeepSpeed default zero.h does not follow */
static void zero__dsc_absent(zero__dsc *c, const char *key, const char *dflt, const char *why) {
    char line[720];
    snprintf(line, sizeof line, "%.200s%s%s (absent%s%s): not honoured: %s", c->path, c->plen ? "." : "", key,
             dflt ? ", DeepSpeed's default " : "", dflt ? dflt : "", why);
    zero__dsc_emit(c, line);
}
/* an error at value v: "<path>: expected <what>, found <value>" */
static int zero__dsc_bad(zero__dsc *c, size_t v, const char *what) {
    char val[64];
    zero__js_snip(c->js.s, v, val, sizeof val);
    return zero__js_fail(&c->js, v, "%s: expected %s, found %s", c->path, what, val);
}
static size_t zero__dsc_push(zero__dsc *c, size_t k) {         /* ".key" onto the path; the old length */
    const char *s = c->js.s;
    size_t old = c->plen, i = k + 1, cap = sizeof c->path - 1;
    if (c->plen && c->plen < cap) c->path[c->plen++] = '.';
    for (; s[i] != '"' && c->plen < cap; i++) {
        if (s[i] == '\\' && c->plen + 1 < cap) c->path[c->plen++] = s[i++];
        c->path[c->plen++] = s[i];
    }
    while (s[i] != '"' && c->plen > old && ((unsigned char)c->path[c->plen - 1] & 0xC0u) == 0x80u) c->plen--;
    if (s[i] != '"' && c->plen > old && (unsigned char)c->path[c->plen - 1] >= 0xC0u) c->plen--;
    c->path[c->plen] = 0;
    return old;
}
static void zero__dsc_pop(zero__dsc *c, size_t old) { c->plen = old; c->path[old] = 0; }

/* the value at v of the type a key takes; else an error */
static int zero__dsc_type(zero__dsc *c, size_t v, char type) {
    const char *s = c->js.s;
    switch (type) {
    case 'b': return s[v] == 't' || s[v] == 'f' ? 1 : zero__dsc_bad(c, v, "true or false");
    case 'i': return zero__js_isint(s, v, -9.3e18, 9.3e18, NULL) ? 1 : zero__dsc_bad(c, v, "an integer");
    case 'n': return zero__js_isnum(s, v) ? 1 : zero__dsc_bad(c, v, "a number");
    case 's': return s[v] == '"' ? 1 : zero__dsc_bad(c, v, "a string");
    case 'o': return s[v] == '{' ? 1 : zero__dsc_bad(c, v, "an object");
    case 'a': return s[v] == '[' ? 1 : zero__dsc_bad(c, v, "an array");
    default: return 1;
    }
}
/* an integer in [lo, hi] (DeepSpeed's own range: outside it, an error naming what) */
static int zero__dsc_int(zero__dsc *c, size_t v, double lo, double hi, const char *what, double *out) {
    return zero__js_isint(c->js.s, v, lo, hi, out) ? 1 : zero__dsc_bad(c, v, what);
}
static double zero__dsc_esize(const zero__dsc *c) {            /* bytes of a param (and gradient) element */
    return c->dtype == ZERO_F32 ? 4.0 : 2.0;
}
/* elements (DeepSpeed's sizes) as bytes of param_dtype; 0 when they do not fit zero.h's int64 */
static int zero__dsc_bytes(zero__dsc *c, double elems, int64_t *out) {
    double b = elems * zero__dsc_esize(c);
    if (b > 9.2e18) return 0;
    *out = (int64_t)b;
    return 1;
}
static const char *zero__dsc_dtype_name(int t) {
    return t == ZERO_F32 ? "fp32" : t == ZERO_F16 ? "fp16" : "bf16";
}

typedef int (*zero__dsc_fn)(zero__dsc *c, int id, size_t k, size_t v);

/* Every member of the object at o, in the text's order, by tab; fn takes the 'f' and 'F' keys.
   null is an absent key; "auto" a line (but for 'F' and 'z' keys). */
static int zero__dsc_walk(zero__dsc *c, size_t o, const zero__dsk *tab, int n, zero__dsc_fn fn) {
    const char *s = c->js.s;
    size_t it = o + 1, k, v, old;
    int t, ok = 1, b;
    double x;
    while (ok && zero__js_member(s, &it, &k, &v)) {
        const zero__dsk *e = NULL;
        for (t = 0; t < n && !e; t++)
            if (zero__js_str_is(s, k, tab[t].name, 0)) e = &tab[t];
        if (s[v] == 'n') continue;
        old = zero__dsc_push(c, k);
        if (!e) {
            zero__dsc_note(c, v, "zero.h does not know this key");
        } else if (e->kind == 'z' && zero__js_str_is(s, v, "auto", 0)) {
            /* nothing to honour either way */
        } else if (e->kind != 'F' && zero__js_str_is(s, v, "auto", 0)) {
            if (e->kind == 'f' && e->why)
                zero__dsc_note(c, v, "\"auto\" is for the HF Trainer to fill in: left at zero.h's default (%s)", e->why);
            else if (e->kind == 'b' || e->kind == 'v' || e->kind == 'n' || e->kind == 's')
                zero__dsc_note(c, v, "\"auto\" is for the HF Trainer to fill in; %s", e->why);
            else
                zero__dsc_note(c, v, "\"auto\" is for the HF Trainer to fill in");
        } else if (e->kind == 'f' || e->kind == 'F') {
            ok = (e->kind == 'F' || zero__dsc_type(c, v, e->type)) && fn(c, e->id, k, v);
        } else if (!zero__dsc_type(c, v, e->type)) {
            ok = 0;
        } else if (e->kind == 'b') {
            b = s[v] == 't';
            if (b != e->id) zero__dsc_note(c, v, "%s", e->why);
        } else if (e->kind == 'v') {
            x = zero__js_num(s, v);
            if (x != (double)e->id) zero__dsc_note(c, v, "%s", e->why);
        } else if (e->kind == 'n') {
            zero__dsc_note(c, v, "%s", e->why);
        } else if (e->kind == 's') {
            size_t en = zero__js_get(s, v, "enabled"), it2 = v + 1, k2, v2;
            int empty = s[v] == '{' && !zero__js_member(s, &it2, &k2, &v2);
            if (!(s[v] == '{' && (empty || (en != ZERO__JS_NONE && s[en] == 'f')))) zero__dsc_note(c, v, "%s", e->why);
        }
        zero__dsc_pop(c, old);
    }
    return ok;
}

/* ---- the sections ------------------------------------------------------------------------ */
static int zero__dsc_offload_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    int par = c->off_param, b = s[v] == 't';
    /* the keys matter only where the desc offloads: where it does not (a device DeepSpeed
       ignores too, or one reported at "device"), they give no line of their own */
    zero_offload_tier eff = par ? c->par_eff : c->opt_eff;
    double x;
    size_t i;
    long ch;
    (void)k;
    switch (id) {
    case ZERO__DSC_DEVICE:
        if (!zero__js_str_is(s, v, "none", 0) && !zero__js_str_is(s, v, "cpu", 0) && !zero__js_str_is(s, v, "nvme", 0))
            return zero__dsc_bad(c, v, "\"none\", \"cpu\" or \"nvme\"");
        if (par ? c->par_why : c->opt_why) zero__dsc_note(c, v, "%s", par ? c->par_why : c->opt_why);
        return 1;
    case ZERO__DSC_PATH:
        if (eff != ZERO_OFFLOAD_NVME) return 1;     /* used only with device nvme, here as in DeepSpeed */
        i = v + 1;
        while ((ch = zero__js_char(NULL, s, &i)) > 0) {}
        if (ch == 0) return zero__js_fail(&c->js, v, "%s: a path with a NUL character (\\u0000)", c->path);
        if (par && c->opt_path != ZERO__JS_NONE && !zero__js_str_eq(s, c->opt_path, v))
            zero__dsc_note(c, v, "zero.h keeps the params in the optimizer states' files (offload_optimizer.nvme_path)");
        return 1;
    case ZERO__DSC_PIN:
        if (!b && eff != ZERO_OFFLOAD_NONE)
            zero__dsc_note(c, v, "zero.h always pins its host copies on a GPU (on the CPU device there is nothing to pin)");
        return 1;
    case ZERO__DSC_NVME_ONLY:
    case ZERO__DSC_MAX_IN_CPU:
        if (!zero__dsc_int(c, v, 0, 9.3e18, "an integer >= 0", NULL)) return 0;
        if (eff == ZERO_OFFLOAD_NVME && id == ZERO__DSC_MAX_IN_CPU)
            zero__dsc_note(c, v, "zero.h keeps no params in host memory but one block of the NVMe tier's buffers");
        else if (eff == ZERO_OFFLOAD_NVME)
            zero__dsc_note(c, v, "zero.h streams the NVMe tier through three host buffers sharing offload.buffer_bytes "
                                 "(default 64 MiB)");
        return 1;
    case ZERO__DSC_PIPE:
        if (!b && eff == ZERO_OFFLOAD_NVME)
            zero__dsc_note(c, v, "zero.h always overlaps the NVMe reads and writes with the optimizer pass");
        return 1;
    case ZERO__DSC_FAST_INIT:
        if (b && eff == ZERO_OFFLOAD_NVME) zero__dsc_note(c, v, "zero.h writes the NVMe files' initial state at zero_build");
        return 1;
    case ZERO__DSC_RATIO:
        x = zero__js_num(s, v);
        if (x < 0 || x > 1) return zero__dsc_bad(c, v, "a ratio in [0, 1]");
        if (x < 1 && c->stage != 3) return zero__dsc_bad(c, v, "1 (DeepSpeed offloads part of the states at stage 3 only)");
        if (x < 1 && eff != ZERO_OFFLOAD_NONE)
            zero__dsc_note(c, v, "zero.h offloads all of the optimizer states or none");
        return 1;
    default:
        return 1;
    }
}
static int zero__dsc_zero_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    size_t zo = zero__js_get(s, 0, "zero_optimization");
    int b = s[v] == 't';
    double x = 0;
    int64_t bytes;
    (void)k;
    switch (id) {
    case ZERO__DSC_STAGE:
        if (!zero__dsc_int(c, v, 0, 3, "an integer 0-3", &x)) return 0;
        c->d.stage = (int)x;
        return 1;
    case ZERO__DSC_BUCKET:
        if (!zero__dsc_int(c, v, 0, 9.3e18, "an integer >= 0 (elements)", &x)) return 0;
        if (x == 0)
            zero__dsc_note(c, v, "0 is zero.h's \"default\" (min(16 MiB, the gradient bytes / 8)), not an empty bucket");
        else if (!zero__dsc_bytes(c, x, &bytes))
            zero__dsc_note(c, v, "%.0f elements of %s are more bytes than zero.h's int64 holds", x, zero__dsc_dtype_name(c->dtype));
        else
            c->d.bucket_bytes = bytes;
        return 1;
    case ZERO__DSC_PREFETCH:
    case ZERO__DSC_PERSIST:
        if (!zero__dsc_int(c, v, 0, 9.3e18, "an integer >= 0 (elements)", &x)) return 0;
        if (c->stage != 3) return 1;            /* stage 3's, in both */
        if (!zero__dsc_bytes(c, x, &bytes))
            zero__dsc_note(c, v, "%.0f elements of %s are more bytes than zero.h's int64 holds", x, zero__dsc_dtype_name(c->dtype));
        else if (id == ZERO__DSC_PREFETCH)
            c->d.prefetch_bytes = bytes ? bytes : -1;           /* DeepSpeed's 0: no prefetch */
        else
            c->d.persist_bytes = bytes;     /* a module of at most this stays gathered (DeepSpeed: a param) */
        return 1;
    case ZERO__DSC_OFF_OPT:
    case ZERO__DSC_OFF_PAR:
        c->off_param = id == ZERO__DSC_OFF_PAR;
        if (c->off_param) c->d.offload_params = c->par_eff;
        else c->d.offload_optimizer = c->opt_eff;
        return zero__dsc_walk(c, v, zero__dsc_off_keys, ZERO__DSC_N(zero__dsc_off_keys), zero__dsc_offload_key);
    case ZERO__DSC_CPU_OFF:
    case ZERO__DSC_CPU_OFF_PAR:
        if (b && zero__js_get(s, zo, id == ZERO__DSC_CPU_OFF ? "offload_optimizer" : "offload_param") != ZERO__JS_NONE)
            return zero__js_fail(&c->js, v, "%s: deprecated, and DeepSpeed refuses it together with %s", c->path,
                                 id == ZERO__DSC_CPU_OFF ? "offload_optimizer" : "offload_param");
        if (id == ZERO__DSC_CPU_OFF) c->d.offload_optimizer = c->opt_eff;
        else c->d.offload_params = c->par_eff;
        return 1;
    case ZERO__DSC_QWZ:
    case ZERO__DSC_QGZ:
    case ZERO__DSC_HPZ:
        if (id == ZERO__DSC_HPZ) {
            if (!zero__dsc_int(c, v, 0, 9.3e18, "an integer >= 0", &x)) return 0;
            b = x > 1;                              /* 1: no secondary partition */
        }
        if (!b || c->stage != 3) return 1;         /* stage 3's, in both */
        if (c->par_eff != ZERO_OFFLOAD_NONE) {
            zero__dsc_note(c, v, "zero.h's ZeRO++ does not work with offload_param yet");
            return 1;
        }
        if (id == ZERO__DSC_QWZ) c->d.qwz = 1;
        else if (id == ZERO__DSC_QGZ) c->d.qgz = 4;     /* DeepSpeed's qgZ sends int4 */
        else if (x > ZERO__MAX_RANKS) zero__dsc_note(c, v, "zero.h's hpz is at most %d ranks", ZERO__MAX_RANKS);
        else c->d.hpz = (int)x;
        return 1;
    default:
        return 1;
    }
}
static int zero__dsc_half_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    int fp16 = c->in_fp16, b = s[v] == 't';
    int on = c->dtype == (fp16 ? ZERO_F16 : ZERO_BF16), other;
    double x = 0;
    (void)k;
    switch (id) {
    case ZERO__DSC_ENABLED:
        if (zero__js_str_is(s, v, "auto", 0)) {
            other = c->dtype == (fp16 ? ZERO_BF16 : ZERO_F16);
            zero__dsc_note(c, v, "\"auto\" is for the HF Trainer to fill in: param_dtype %s", other ?
                           (fp16 ? "is bf16, from bf16.enabled" : "is fp16, from fp16.enabled") :
                           "left at zero.h's default (bf16)");
            return 1;
        }
        return zero__dsc_type(c, v, 'b');       /* read by zero__dsc_scan */
    case ZERO__DSC_LOSS_SCALE:
        x = zero__js_num(s, v);
        if (x < 0) return zero__dsc_bad(c, v, "a loss scale >= 0 (0: dynamic)");
        if (!on || x == 0) return 1;
        if (x > 3.4028234663852886e38 || (float)x == 0.0f) zero__dsc_note(c, v, "outside a float's range");
        else c->d.loss_scale = (float)x;
        return 1;
    case ZERO__DSC_SCALE_POWER:
        if (!zero__dsc_int(c, v, -9.3e18, 9.3e18, "an integer", &x)) return 0;
        if (!c->fp16_dyn) return 1;
        if (x < -126 || x > 127) zero__dsc_note(c, v, "2^%.0f is outside a float's range", x);
        else c->d.loss_scale_init = ldexpf(1.0f, (int)x);
        return 1;
    case ZERO__DSC_SCALE_WINDOW:
    case ZERO__DSC_MIN_SCALE:
        if (!zero__dsc_int(c, v, -9.3e18, 9.3e18, "an integer", &x)) return 0;
        if (!c->fp16_dyn) return 1;
        if (x <= 0) return zero__dsc_bad(c, v, "an integer > 0 (DeepSpeed refuses others with a dynamic loss scale)");
        if (id == ZERO__DSC_SCALE_WINDOW && x > 2147483647.0) zero__dsc_note(c, v, "zero.h's loss_scale_window is an int");
        else if (id == ZERO__DSC_SCALE_WINDOW) c->d.loss_scale_window = (int)x;
        else if (x > 3.4028234663852886e38) zero__dsc_note(c, v, "outside a float's range");
        else c->d.loss_scale_min = (float)x;
        return 1;
    case ZERO__DSC_HYST:
        if (!zero__dsc_int(c, v, -9.3e18, 9.3e18, "an integer", &x)) return 0;
        if (c->fp16_dyn && x != 1)
            zero__dsc_note(c, v, "zero.h lowers the loss scale at the first overflow (hysteresis 1)");
        return 1;
    case ZERO__DSC_CONSEC_HYST:
        if (c->fp16_dyn && b && c->hyst != 1)
            zero__dsc_note(c, v, "zero.h has no hysteresis to refill: it lowers the loss scale at every overflow");
        return 1;
    case ZERO__DSC_HALF_TRUE:
    case ZERO__DSC_HALF_FALSE:
        if (on && b == (id == ZERO__DSC_HALF_TRUE)) {
            const char *key = c->path + c->plen;
            while (key > c->path && key[-1] != '.') key--;
            zero__dsc_note(c, v, "%s", !strcmp(key, "auto_cast") ? "zero.h does not cast your forward pass's inputs"
                               : !strcmp(key, "immediate_grad_update") ? "zero.h updates the params in zero_step, once a step"
                               : !strcmp(key, "check_grad_overflow") ? "zero.h always skips a step whose gradients are "
                                                                       "not finite"
                               : !strcmp(key, "bf16_optimizer_states") ? "zero.h keeps its optimizer moments in fp32"
                               : "zero.h keeps fp32 master weights");
        }
        return 1;
    default:
        return 1;
    }
}
static int zero__dsc_param_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    double x = 0, b1, b2;
    size_t it, e1, e2, e3;
    (void)k;
    if (id != ZERO__DSC_BETAS && id != ZERO__DSC_NESTEROV && id != ZERO__DSC_WMODE && id != ZERO__DSC_MAXNORM)
        x = zero__js_num(s, v);
    switch (id) {
    case ZERO__DSC_LR:
    case ZERO__DSC_EPS:
        if (x < 0) zero__dsc_note(c, v, "outside zero.h's range (>= 0)");
        else if (x == 0) zero__dsc_note(c, v, "0 is zero.h's \"default\" (%s), not 0", id == ZERO__DSC_LR ? "1e-3" : "1e-8");
        else if (id == ZERO__DSC_LR) c->d.optim.lr = x;
        else c->d.optim.eps = x;
        return 1;
    case ZERO__DSC_BETAS:
        it = v + 1;
        if (!zero__js_elem(s, &it, &e1) || !zero__js_elem(s, &it, &e2) || zero__js_elem(s, &it, &e3) ||
            !zero__js_isnum(s, e1) || !zero__js_isnum(s, e2))
            return zero__dsc_bad(c, v, "[beta1, beta2], two numbers");
        b1 = zero__js_num(s, e1);
        b2 = zero__js_num(s, e2);
        if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) zero__dsc_note(c, v, "outside zero.h's range (each in [0, 1))");
        else if (b1 == 0 || b2 == 0) zero__dsc_note(c, v, "a beta of 0 is zero.h's \"default\" (0.9, 0.999), not 0");
        else { c->d.optim.beta1 = b1; c->d.optim.beta2 = b2; }
        return 1;
    case ZERO__DSC_WD:
        if (x < 0) zero__dsc_note(c, v, "outside zero.h's range (>= 0)");
        else if (c->adam_l2 && x > 0)
            zero__dsc_note(c, v, "with adam_w_mode false DeepSpeed's Adam adds weight_decay x param to the gradient "
                                 "(L2); zero.h's AdamW decays decoupled");
        else c->d.optim.weight_decay = x;
        return 1;
    case ZERO__DSC_WMODE:
        if (c->adam_l2 && c->wd > 0)
            zero__dsc_note(c, v, "zero.h has only decoupled weight decay (AdamW): weight_decay is not applied");
        return 1;                           /* AdamW ignores it; without weight decay both modes are one update */
    case ZERO__DSC_MAXNORM:
        return zero__js_fail(&c->js, v, "%s: DeepSpeed refuses it as an optimizer parameter (use gradient_clipping)",
                             c->path);
    case ZERO__DSC_MOMENTUM:
    case ZERO__DSC_DAMPENING:
        if (x < 0) zero__dsc_note(c, v, "outside zero.h's range (>= 0)");
        else if (id == ZERO__DSC_MOMENTUM) c->d.optim.momentum = x;
        else c->d.optim.dampening = x;
        return 1;
    case ZERO__DSC_NESTEROV:
        if (s[v] != 't') return 1;
        if (c->momentum <= 0 || c->dampening != 0)
            zero__dsc_note(c, v, "torch.optim.SGD refuses Nesterov without momentum or with dampening");
        else c->d.optim.nesterov = 1;
        return 1;
    default:
        return 1;
    }
}
static int zero__dsc_optim_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    size_t prm;
    (void)k;
    if (id == ZERO__DSC_TYPE) {
        if (c->optim == ZERO__DSC_OPT_OTHER)
            zero__dsc_note(c, v, "zero.h runs AdamW or SGD: optim is left at its default (AdamW, lr 1e-3)");
        else
            c->d.optim.type = c->optim == ZERO__DSC_OPT_SGD ? ZERO_OPTIM_SGD : ZERO_OPTIM_ADAMW;
        return 1;
    }
    if (id == ZERO__DSC_PARAMS) {
        if (c->optim == ZERO__DSC_OPT_NONE || c->optim == ZERO__DSC_OPT_OTHER) {
            zero__dsc_note(c, v, "the params of an optimizer zero.h does not run");
            return 1;
        }
        if (c->optim == ZERO__DSC_OPT_SGD)
            return zero__dsc_walk(c, v, zero__dsc_sgd_keys, ZERO__DSC_N(zero__dsc_sgd_keys), zero__dsc_param_key);
        if (!zero__dsc_walk(c, v, zero__dsc_adam_keys, ZERO__DSC_N(zero__dsc_adam_keys), zero__dsc_param_key)) return 0;
        /* torch_adam: torch.optim.AdamW, whose weight_decay defaults to 0.01 (FusedAdam's to 0) */
        prm = zero__js_get(s, v, "torch_adam");
        if (!c->adam_l2 && prm != ZERO__JS_NONE && s[prm] == 't' && zero__js_get(s, v, "weight_decay") == ZERO__JS_NONE)
            c->d.optim.weight_decay = 0.01;
        return 1;
    }
    return 1;
}
static int zero__dsc_small_key(zero__dsc *c, int id, size_t k, size_t v) {     /* aio, data_types */
    const char *s = c->js.s;
    int nvme = c->opt_eff == ZERO_OFFLOAD_NVME, b = s[v] == 't';
    double x = 0;
    (void)k;
    switch (id) {
    case ZERO__DSC_AIO_BLOCK:
        if (nvme && zero__js_num(s, v) != 1048576.0) zero__dsc_note(c, v, "zero.h moves the NVMe tier's data in 1 MiB requests");
        return 1;
    case ZERO__DSC_AIO_QD:
        x = zero__js_num(s, v);
        if (x >= 1 && x <= 256) c->d.offload.queue_depth = (int)x;
        else if (nvme) zero__dsc_note(c, v, "outside zero.h's range (1-256)");
        return 1;
    case ZERO__DSC_AIO_THREADS:
        if (nvme) zero__dsc_note(c, v, "zero.h's NVMe I/O runs on io_uring or on offload.queue_depth threads");
        return 1;
    case ZERO__DSC_AIO_TRUE:
        if (nvme && b) zero__dsc_note(c, v, "zero.h's NVMe tier has no such mode");
        return 1;
    case ZERO__DSC_AIO_FALSE:
        if (nvme && !b) zero__dsc_note(c, v, "zero.h always keeps offload.queue_depth requests in flight");
        return 1;
    case ZERO__DSC_ACC_DTYPE:       /* DeepSpeed's DtypeEnum names */
        if (zero__js_str_is(s, v, "fp32", 0) || zero__js_str_is(s, v, "float32", 0) || zero__js_str_is(s, v, "float", 0) ||
            zero__js_str_is(s, v, "torch.float32", 0))
            c->d.grad_accum_dtype = ZERO_F32;
        else if (zero__js_str_is(s, v, "bf16", 0) || zero__js_str_is(s, v, "bfloat16", 0) ||
                 zero__js_str_is(s, v, "torch.bfloat16", 0))
            c->d.grad_accum_dtype = ZERO_BF16;
        else if (zero__js_str_is(s, v, "fp16", 0) || zero__js_str_is(s, v, "float16", 0) || zero__js_str_is(s, v, "half", 0) ||
                 zero__js_str_is(s, v, "torch.float16", 0))
            c->d.grad_accum_dtype = ZERO_F16;
        else if (zero__js_str_is(s, v, "int8", 0) || zero__js_str_is(s, v, "torch.int8", 0))
            zero__dsc_note(c, v, "zero.h accumulates gradients in fp32, bf16 or fp16");
        else
            return zero__dsc_bad(c, v, "\"fp32\", \"bf16\" or \"fp16\"");
        return 1;
    default:
        return 1;
    }
}
static int zero__dsc_root_key(zero__dsc *c, int id, size_t k, size_t v) {
    const char *s = c->js.s;
    double x = 0, micro = 0, gas = 0;
    int has_micro, has_gas, t;
    char extra[200];
    (void)k;
    switch (id) {
    case ZERO__DSC_TBS:
    case ZERO__DSC_MICRO:
        if (!zero__dsc_int(c, v, 1, 9.3e18, "an integer > 0", &x)) return 0;
        if (id == ZERO__DSC_MICRO) {
            zero__dsc_note(c, v, "the micro-batch is your loop's: zero.h sees only the gradients you add");
            return 1;
        }
        has_micro = zero__js_isint(s, zero__js_get(s, 0, "train_micro_batch_size_per_gpu"), 1, 9.3e18, &micro);
        has_gas = zero__js_isint(s, zero__js_get(s, 0, "gradient_accumulation_steps"), 1, 9.3e18, &gas);
        extra[0] = 0;
        if (has_micro && has_gas && fmod(x, micro * gas) != 0)
            return zero__js_fail(&c->js, v, "train_batch_size %.0f is not train_micro_batch_size_per_gpu %.0f x "
                                 "gradient_accumulation_steps %.0f x a world size: DeepSpeed refuses it", x, micro, gas);
        if (has_micro && has_gas)
            snprintf(extra, sizeof extra, " (here with a world size of %.0f)", x / (micro * gas));
        else if (has_micro)
            snprintf(extra, sizeof extra, "; gradient_accumulation_steps is absent: set desc.accum_steps to %.0f / "
                     "(%.0f x the world size)", x, micro);
        zero__dsc_note(c, v, "the batch is your loop's: DeepSpeed's is micro-batch x gradient_accumulation_steps x "
                             "world size%s", extra);
        return 1;
    case ZERO__DSC_GAS:
        if (!zero__dsc_int(c, v, 1, 9.3e18, "an integer > 0", &x)) return 0;
        if (x > 2147483647.0) zero__dsc_note(c, v, "zero.h's accum_steps is an int");
        else c->d.accum_steps = (int)x;
        return 1;
    case ZERO__DSC_OPTIM:
        if (c->optim == ZERO__DSC_OPT_NONE && zero__js_get(s, v, "type") == ZERO__JS_NONE)
            zero__dsc_absent(c, "type", NULL, "DeepSpeed runs the optimizer your program passes it; zero.h runs its own "
                                              "(AdamW, lr 1e-3, unless you set desc.optim)");
        return zero__dsc_walk(c, v, zero__dsc_optim_keys, ZERO__DSC_N(zero__dsc_optim_keys), zero__dsc_optim_key);
    case ZERO__DSC_CLIP:
        x = zero__js_num(s, v);
        if (x < 0 || x > 3.4028234663852886e38) zero__dsc_note(c, v, "outside zero.h's range (a float >= 0)");
        else c->d.clip_norm = (float)x;
        return 1;
    case ZERO__DSC_FP16:
    case ZERO__DSC_BF16:
    case ZERO__DSC_BF16_OLD:
        if (id == ZERO__DSC_BF16_OLD && zero__js_get(s, 0, "bf16") != ZERO__JS_NONE) {
            zero__dsc_note(c, v, "DeepSpeed reads bf16, not its old name, when both are given");
            return 1;
        }
        c->in_fp16 = id == ZERO__DSC_FP16;
        if (!zero__dsc_walk(c, v, id == ZERO__DSC_FP16 ? zero__dsc_fp16_keys : zero__dsc_bf16_keys,
                            id == ZERO__DSC_FP16 ? ZERO__DSC_N(zero__dsc_fp16_keys) : ZERO__DSC_N(zero__dsc_bf16_keys),
                            zero__dsc_half_key))
            return 0;
        if (id == ZERO__DSC_FP16 && c->fp16_dyn && zero__js_get(s, v, "hysteresis") == ZERO__JS_NONE)
            zero__dsc_absent(c, "hysteresis", "2", "zero.h lowers the loss scale at the first overflow (hysteresis 1)");
        return 1;
    case ZERO__DSC_ZERO:
        if (s[v] == 't' || s[v] == 'f') {               /* the old form: true is stage 1 (zero__dsc_scan) */
            c->d.stage = c->stage;
            return 1;
        }
        if (s[v] != '{') return zero__dsc_bad(c, v, "an object");
        return zero__dsc_walk(c, v, zero__dsc_zero_keys, ZERO__DSC_N(zero__dsc_zero_keys), zero__dsc_zero_key);
    case ZERO__DSC_DTYPES:
        return zero__dsc_walk(c, v, zero__dsc_dtypes_keys, ZERO__DSC_N(zero__dsc_dtypes_keys), zero__dsc_small_key);
    case ZERO__DSC_AIO:
        return zero__dsc_walk(c, v, zero__dsc_aio_keys, ZERO__DSC_N(zero__dsc_aio_keys), zero__dsc_small_key);
    case ZERO__DSC_PREDIV:
        if (zero__js_num(s, v) != 1.0)
            zero__dsc_note(c, v, "zero.h divides the summed gradients once, by world size x accum_steps, in the optimizer pass");
        return 1;
    case ZERO__DSC_REDOP:
        if (zero__js_str_is(s, v, "mean", 1)) return 1;
        if (!zero__js_str_is(s, v, "sum", 1)) return zero__dsc_bad(c, v, "\"mean\" or \"sum\"");
        zero__dsc_note(c, v, "zero.h averages the gradients over the ranks (\"mean\")");
        return 1;
    case ZERO__DSC_COMMDT:
        t = zero__js_str_is(s, v, "fp32", 1) ? ZERO_F32 : zero__js_str_is(s, v, "fp16", 1) ? ZERO_F16 :
            zero__js_str_is(s, v, "bf16", 1) ? ZERO_BF16 : 0;
        if (t == 0) return zero__dsc_bad(c, v, "\"fp32\", \"fp16\" or \"bf16\"");
        if (t != (c->dtype ? c->dtype : ZERO_BF16))
            zero__dsc_note(c, v, "zero.h reduces gradients in grad_dtype, the dtype you add them in (here %s): set "
                                 "desc.grad_dtype to change both", zero__dsc_dtype_name(c->dtype));
        return 1;
    default:
        return 1;
    }
}

/* the device an offload object asks for; old: the deprecated boolean that stands for {"device": "cpu"} */
static zero_offload_tier zero__dsc_device(const char *s, size_t off, size_t old) {
    size_t dv = zero__js_get(s, off, "device");
    if (off == ZERO__JS_NONE) return zero__js_true(s, old) ? ZERO_OFFLOAD_HOST : ZERO_OFFLOAD_NONE;
    return zero__js_str_is(s, dv, "cpu", 0) ? ZERO_OFFLOAD_HOST : zero__js_str_is(s, dv, "nvme", 0) ? ZERO_OFFLOAD_NVME
                                                                                                : ZERO_OFFLOAD_NONE;
}
/* The first look: the keys others depend on, read leniently (the walk checks them). */
static int zero__dsc_scan(zero__dsc *c) {
    const char *s = c->js.s;
    size_t zo = zero__js_get(s, 0, "zero_optimization"), f16 = zero__js_get(s, 0, "fp16");
    size_t b16 = zero__js_get(s, 0, "bf16"), fe, be, oo, op, opt, prm, ty;
    double x;
    if (b16 == ZERO__JS_NONE) b16 = zero__js_get(s, 0, "bfloat16");
    if (zo != ZERO__JS_NONE && s[zo] == 't') c->stage = 1;
    if (zero__js_isint(s, zero__js_get(s, zo, "stage"), 0, 3, &x)) c->stage = (int)x;
    fe = zero__js_get(s, f16, "enabled");
    be = zero__js_get(s, b16, "enabled");
    if (fe != ZERO__JS_NONE && be != ZERO__JS_NONE && s[fe] == 't' && s[be] == 't')
        return zero__js_fail(&c->js, fe > be ? fe : be, "fp16.enabled and bf16.enabled are both true: DeepSpeed refuses it");
    c->dtype = fe != ZERO__JS_NONE && s[fe] == 't' ? ZERO_F16 : be != ZERO__JS_NONE && s[be] == 't' ? ZERO_BF16 :
               zero__js_str_is(s, fe, "auto", 0) || zero__js_str_is(s, be, "auto", 0) ? 0 : ZERO_F32;
    c->fp16_dyn = c->dtype == ZERO_F16 && zero__js_num_or(s, zero__js_get(s, f16, "loss_scale"), 0) == 0;
    c->hyst = 2;
    zero__js_isint(s, zero__js_get(s, f16, "hysteresis"), -9.3e18, 9.3e18, &c->hyst);
    /* offload: what is asked for, then what the desc gets */
    oo = zero__js_get(s, zo, "offload_optimizer");
    op = zero__js_get(s, zo, "offload_param");
    c->opt_dev = zero__dsc_device(s, oo, zero__js_get(s, zo, "cpu_offload"));
    c->par_dev = zero__dsc_device(s, op, zero__js_get(s, zo, "cpu_offload_param"));
    c->opt_path = zero__js_get(s, oo, "nvme_path");
    /* (an "auto" path is none: its line says so, and the NVMe tier is not used) */
    if (c->opt_path != ZERO__JS_NONE && (s[c->opt_path] != '"' || zero__js_str_is(s, c->opt_path, "auto", 0)))
        c->opt_path = ZERO__JS_NONE;
    /* DeepSpeed offloads in ZeRO only, and params at stage 3 only: elsewhere it ignores the
       devices, as the desc does (no line, the same run) */
    c->opt_eff = c->stage == 0 ? ZERO_OFFLOAD_NONE : c->opt_dev;
    if (c->opt_eff == ZERO_OFFLOAD_NVME && c->opt_path == ZERO__JS_NONE) {
        c->opt_eff = ZERO_OFFLOAD_NONE;
        c->opt_why = "no nvme_path: the optimizer states stay on the device";
    }
    c->par_eff = c->stage != 3 ? ZERO_OFFLOAD_NONE : c->par_dev;
    if (c->par_eff == ZERO_OFFLOAD_NVME && c->opt_eff != ZERO_OFFLOAD_NVME) {
        c->par_eff = ZERO_OFFLOAD_NONE;
        c->par_why = "zero.h keeps params on NVMe only together with the optimizer states (offload_optimizer.device "
                     "\"nvme\" with its nvme_path): the params stay on the device";
    }
    /* the optimizer (engine.py: DeepSpeed's own names case-insensitive, torch's "SGD" as written) */
    opt = zero__js_get(s, 0, "optimizer");
    ty = zero__js_get(s, opt, "type");
    prm = zero__js_get(s, opt, "params");
    c->optim = ty == ZERO__JS_NONE || zero__js_str_is(s, ty, "auto", 0) ? ZERO__DSC_OPT_NONE
             : zero__js_str_is(s, ty, "adam", 1) ? ZERO__DSC_OPT_ADAM
             : zero__js_str_is(s, ty, "adamw", 1) ? ZERO__DSC_OPT_ADAMW
             : zero__js_str_is(s, ty, "sgd", 1) ? ZERO__DSC_OPT_SGD : ZERO__DSC_OPT_OTHER;
    c->wd = zero__js_num_or(s, zero__js_get(s, prm, "weight_decay"), 0);
    c->momentum = zero__js_num_or(s, zero__js_get(s, prm, "momentum"), 0);
    c->dampening = zero__js_num_or(s, zero__js_get(s, prm, "dampening"), 0);
    ty = zero__js_get(s, prm, "adam_w_mode");
    c->adam_l2 = c->optim == ZERO__DSC_OPT_ADAM && ty != ZERO__JS_NONE && s[ty] == 'f';
    return 1;
}

/* decodes the checked string at q in place (text[q] on: the UTF-8 bytes, then a NUL): the
   decoded form is never longer than the escaped one; returns its start */
static char *zero__dsc_decode(char *text, size_t q) {
    size_t i = q + 1, o = q;
    long cp;
    while ((cp = zero__js_char(NULL, text, &i)) >= 0) {
        unsigned long u = (unsigned long)cp;
        if (u < 0x80u) {
            text[o++] = (char)u;
        } else if (u < 0x800u) {
            text[o++] = (char)(0xC0u | (u >> 6));
            text[o++] = (char)(0x80u | (u & 0x3Fu));
        } else if (u < 0x10000u) {
            text[o++] = (char)(0xE0u | (u >> 12));
            text[o++] = (char)(0x80u | ((u >> 6) & 0x3Fu));
            text[o++] = (char)(0x80u | (u & 0x3Fu));
        } else {
            text[o++] = (char)(0xF0u | (u >> 18));
            text[o++] = (char)(0x80u | ((u >> 12) & 0x3Fu));
            text[o++] = (char)(0x80u | ((u >> 6) & 0x3Fu));
            text[o++] = (char)(0x80u | (u & 0x3Fu));
        }
    }
    text[o] = 0;
    return text + q;
}

static zero_result zero__desc_from_json(char *json, zero_desc *out, char *report, size_t report_size,
                                        int *unhonoured) {
    zero__dsc *c, cs;
    zero_desc check;
    size_t opt;
    unsigned long long line, col;
    zero_result r;
    int ok;
    c = &cs;
    memset(c, 0, sizeof *c);
    c->js.s = json;
    c->rep = report && report_size ? report : NULL;
    c->rep_cap = report_size;
    if (c->rep) c->rep[0] = 0;
    c->opt_path = ZERO__JS_NONE;
    ok = zero__js_check(&c->js) && zero__dsc_scan(c) &&
         zero__dsc_walk(c, zero__js_ws(json, 0), zero__dsc_root_keys, ZERO__DSC_N(zero__dsc_root_keys), zero__dsc_root_key);
    if (!ok) {
        zero__js_linecol(json, c->js.err_at, &line, &col);
        r = zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "zero_desc_from_json: line %llu, column %llu: %s",
                       line, col, c->js.err);
        if (c->rep) snprintf(c->rep, report_size, "%s\n", zero__last_err(NULL));
        if (unhonoured) *unhonoured = 0;
        return r;
    }
    /* what the walk does not meet: absent keys */
    opt = zero__js_get(json, 0, "optimizer");
    if (opt == ZERO__JS_NONE)
        zero__dsc_absent(c, "optimizer", NULL, "DeepSpeed runs the optimizer your program passes it; zero.h runs its own "
                                              "(AdamW, lr 1e-3, unless you set desc.optim)");
    if (zero__js_get(json, 0, "gradient_clipping") == ZERO__JS_NONE)
        c->d.clip_norm = 1.0f;                  /* DeepSpeed's default since mid-2026 (#8068; 0 before) */
    c->d.param_dtype = (zero_dtype)c->dtype;
    /* the check zero_create makes (on a copy: it fills the defaults); the NVMe path is decoded after it */
    check = c->d;
    if (check.offload_optimizer == ZERO_OFFLOAD_NVME) check.offload.nvme_dirs[0] = ".";
    if ((r = zero__fill_desc(&check)) != ZERO_OK) {
        if (c->rep) snprintf(c->rep, report_size, "zero_desc_from_json: %s\n", zero__last_err(NULL));
        if (unhonoured) *unhonoured = 0;
        return r;
    }
    if (c->d.offload_optimizer == ZERO_OFFLOAD_NVME) {
        c->d.offload.nvme_dirs[0] = zero__dsc_decode(json, c->opt_path);
        if (!c->d.offload.nvme_dirs[0][0]) c->d.offload.nvme_dirs[0] = ".";      /* Python's Path("") */
    }
    *out = c->d;
    if (unhonoured) *unhonoured = c->lines;
    return ZERO_OK;
}

/* >>public -------------------------------------------------------------------------------
   The public functions, on top of everything above. */
/* ---- basics ------------------------------------------------------------------------- */
ZERO_API const char *zero_result_str(zero_result r) { return zero__result_name(r); }
ZERO_API const char *zero_dtype_str(zero_dtype t) { return zero__dtype_name(t); }
ZERO_API size_t zero_dtype_size(zero_dtype t) { return zero__dtype_size(t); }
ZERO_API const char *zero_log_item_str(zero_log_item item) {
    return (int)item >= 0 && item < ZERO_LOGITEM_NUM ? zero__log_item_name[item] : "(unknown item)";
}
ZERO_API const char *zero_last_error(const zero_ctx *ctx) { return zero__last_err(ctx); }
ZERO_API void zero_to_f32(float *dst, const void *src, zero_dtype t, int64_t n) { zero__to_f32(dst, src, t, n); }
ZERO_API void zero_from_f32(void *dst, zero_dtype t, const float *src, int64_t n) { zero__from_f32(dst, t, src, n); }
ZERO_API void zero_add_f32(void *dst, zero_dtype t, const float *src, int64_t n) { zero__add_f32(dst, t, src, n); }
ZERO_API float zero_expf(float x) { return zero__expf(x); }
ZERO_API float zero_logf(float x) { return zero__logf(x); }
ZERO_API float zero_tanhf(float x) { return zero__tanhf(x); }

/* ---- communicators ------------------------------------------------------------------ */
ZERO_API zero_result zero_group_create(zero_group **out, int world_size) {
    if (!out) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_group_create: out is NULL");
    return zero__group_create(out, world_size);
}
ZERO_API void zero_group_destroy(zero_group *g) { zero__group_destroy(g); }
ZERO_API zero_result zero_group_set_link(zero_group *g, double latency_us, double gbytes_per_s) {
    return zero__set_link(g, "zero_group_set_link", latency_us, gbytes_per_s, 0);
}
ZERO_API zero_result zero_group_set_cross_link(zero_group *g, double latency_us, double gbytes_per_s) {
    return zero__set_link(g, "zero_group_set_cross_link", latency_us, gbytes_per_s, 1);
}
ZERO_API zero_result zero_group_set_nodes(zero_group *g, int ranks_per_node) {
    if (!g) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_group_set_nodes: group is NULL");
    return zero__group_set_nodes(g, ranks_per_node);
}
ZERO_API zero_result zero_comm_set_nodes(zero_comm *c, int ranks_per_node) {
    if (!c) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_comm_set_nodes: comm is NULL");
    return zero__comm_set_nodes(c, ranks_per_node);
}
ZERO_API int zero_comm_ranks_per_node(const zero_comm *c) { return c ? c->node_size : 0; }
ZERO_API void zero_comm_bytes(const zero_comm *c, int64_t *within, int64_t *across) {
    zero__comm_bytes(c, within, across);
}

ZERO_API zero_result zero_comm_local(zero_comm **out, zero_group *g, int rank) {
    if (!out || !g) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_comm_local: NULL argument");
    *out = NULL;
    if (rank < 0 || rank >= g->n)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_comm_local: rank %d is outside the group of %d", rank, g->n);
    return zero__comm_local(out, g, rank);
}
ZERO_API void zero_comm_destroy(zero_comm *c) { zero__comm_destroy(c); }
ZERO_API int zero_comm_rank(const zero_comm *c) { return c ? c->rank : -1; }
ZERO_API int zero_comm_size(const zero_comm *c) { return c ? c->size : -1; }

ZERO_API zero_result zero_run_group(zero_group *g, zero_rank_fn fn, void *user) {
    if (!fn || !g) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_run_group: NULL argument");
    return zero__run_group(g, fn, user, "zero_run_group");
}

ZERO_API zero_result zero_run_local(int world_size, zero_rank_fn fn, void *user) {
    if (!fn) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_run_local: fn is NULL");
    return zero__run_local(world_size, fn, user);
}
/* ---- context and registration -------------------------------------------------------- */
ZERO_API zero_result zero_create(zero_ctx **out, const zero_desc *desc) {
    if (out) *out = NULL;
    if (!out || !desc)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_create: %s is NULL", out ? "desc" : "out");
    return zero__create(out, desc);
}
ZERO_API void zero_destroy(zero_ctx *ctx) {
    if (ctx) zero__destroy(ctx);
}

ZERO_API zero_desc zero_query_desc(const zero_ctx *ctx) {
    zero_desc d;
    if (ctx) return ctx->desc;
    memset(&d, 0, sizeof d);
    return d;
}

ZERO_API zero_result zero_desc_from_json(char *json, zero_desc *out, char *report, size_t report_size, int *unhonoured) {
    if (unhonoured) *unhonoured = 0;
    if (report && report_size) report[0] = 0;
    if (!json || !out) {
        zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_desc_from_json: %s is NULL", json ? "out" : "json");
        if (report && report_size) snprintf(report, report_size, "%s\n", zero_last_error(NULL));
        return ZERO_ERR_INVALID_ARG;
    }
    return zero__desc_from_json(json, out, report, report_size, unhonoured);
}
ZERO_API int zero_rank(const zero_ctx *ctx) { return ctx ? ctx->rank : -1; }
ZERO_API int zero_world_size(const zero_ctx *ctx) { return ctx ? ctx->world : -1; }

ZERO_API zero_result zero_add_module(zero_ctx *ctx, const zero_module_desc *desc, zero_module *out) {
    return zero__add_module(ctx, desc, out);
}

ZERO_API zero_result zero_add_param(zero_ctx *ctx, zero_module mod, const zero_param_desc *desc, zero_param *out) {
    return zero__add_param(ctx, mod, desc, out);
}

ZERO_API zero_result zero_add_tied_param(zero_ctx *ctx, zero_module mod, const char *name, zero_param target,
                                        zero_param *out) {
    return zero__add_tied_param(ctx, mod, name, target, out);
}

ZERO_API zero_result zero_add_param_stack(zero_ctx *ctx, const zero_module *modules, int n,
                                          const zero_param_desc *desc, zero_param *out) {
    int i;
    if (!ctx || !modules || !desc || !out || !desc->name)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_add_param_stack: ctx, modules, desc, desc->name and out must not be NULL");
    for (i = 0; i < n; i++) out[i].id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_add_param_stack('%s'): the model cannot change after zero_build", desc->name);
    return zero__add_param_stack(ctx, modules, n, desc, out);
}

ZERO_API int64_t zero_param_numel(const zero_ctx *ctx, zero_param p) {
    int i;
    if (!ctx || (i = zero__param_index(ctx, p, "zero_param_numel")) < 0) return -1;
    return ctx->params[i].numel;
}
ZERO_API int64_t zero_num_params(const zero_ctx *ctx) {
    int64_t n = 0;
    int i;
    if (!ctx) return -1;
    for (i = 0; i < ctx->num_params; i++) n += ctx->params[i].numel;
    return n;
}
ZERO_API int64_t zero_param_offset(const zero_ctx *ctx, zero_param p) {
    int i;
    if (!ctx || (i = zero__param_index(ctx, p, "zero_param_offset")) < 0) return -1;
    return ctx->params[i].out_offset;
}

ZERO_API zero_result zero_plan_get(zero_ctx *ctx, zero_plan *out) {
    zero__sizes z;
    zero_result r;
    if (!ctx || !out) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_plan_get: NULL argument");
    if (ctx->built) { *out = ctx->lay.plan; return ZERO_OK; }
    if (ctx->num_modules == 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE, "zero_plan_get: no modules registered");
    if ((r = zero__layout(ctx, &z)) != ZERO_OK) return r;
    zero__plan_compute(&ctx->desc, ctx->world, &z, out);
    return ZERO_OK;
}

ZERO_API zero_result zero_estimate(const zero_desc *desc, int world_size, int num_modules,
                                   const int64_t *module_numels, zero_plan *out) {
    if (!desc || !out || (num_modules > 0 && !module_numels))
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_estimate: NULL argument");
    if (world_size < 1 || world_size > ZERO__MAX_RANKS)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_estimate: world_size is %d; it must be 1..%d", world_size, ZERO__MAX_RANKS);
    if (num_modules < 1)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_estimate: num_modules is %d; it must be at least 1", num_modules);
    return zero__estimate(desc, world_size, num_modules, module_numels, out);
}
ZERO_API zero_result zero_estimate_activations(const zero_desc *desc, int num_acts, const int64_t *act_bytes,
                                               zero_plan *plan) {
    if (!desc || !plan || (num_acts > 0 && !act_bytes))
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_estimate_activations: NULL argument");
    if (num_acts < 0 || num_acts > 0xfffff)
        return zero__fail(NULL, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_estimate_activations: num_acts is %d", num_acts);
    return zero__estimate_activations(desc, num_acts, act_bytes, plan);
}
/* ---- build ------------------------------------------------------------------------- */
ZERO_API zero_result zero_build(zero_ctx *ctx) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_build: ctx is NULL");
    if (ctx->built) return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT, "zero_build: already built");
    return zero__build_all(ctx);
}
/* ---- the activation stash (>>stash) --------------------------------------------------- */
ZERO_API zero_result zero_act_add(zero_ctx *ctx, const char *name, int64_t bytes, zero_act *out) {
    if (!ctx || !name || !out)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_act_add: ctx, name and out must not be NULL");
    out->id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_act_add('%s'): activation slots are planned at zero_build: add them before it", name);
    return zero__act_add(ctx, name, bytes, out);
}

ZERO_API zero_result zero_act_put(zero_ctx *ctx, zero_act act, const void *src) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, "zero_act_put")) != ZERO_OK) return r;
    if ((i = zero__act_index(ctx, act, "zero_act_put")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if (!src) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_act_put('%s'): src is NULL",
                                ctx->act.recs[i].name);
    if (ctx->act.recs[i].state == ZERO__ACT_PUT)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_ACT_MISUSE,
                          "zero_act_put('%s'): put twice without a zero_act_get between", ctx->act.recs[i].name);
    return zero__stash_put(ctx, i, src);
}

ZERO_API zero_result zero_act_get(zero_ctx *ctx, zero_act act, void *dst) {
    zero_result r;
    const zero__act_rec *a;
    int i;
    if ((r = zero__check_built(ctx, "zero_act_get")) != ZERO_OK) return r;
    if ((i = zero__act_index(ctx, act, "zero_act_get")) < 0) return ZERO_ERR_INVALID_HANDLE;
    a = &ctx->act.recs[i];
    if (!dst) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_act_get('%s'): dst is NULL", a->name);
    return zero__act_get(ctx, i, dst);
}

/* ---- the training step: fetch, release, gradients, step ------------------------------ */
ZERO_API zero_result zero_fetch(zero_ctx *ctx, zero_module mod) {
    zero_result r;
    int mi;
    if ((r = zero__check_built(ctx, "zero_fetch")) != ZERO_OK) return r;
    if ((mi = zero__module_index(ctx, mod, "zero_fetch")) < 0) return ZERO_ERR_INVALID_HANDLE;
    return zero__fetch_tied(ctx, mi);
}
ZERO_API zero_result zero_release(zero_ctx *ctx, zero_module mod) {
    zero_result r;
    int mi;
    if ((r = zero__check_built(ctx, "zero_release")) != ZERO_OK) return r;
    if ((mi = zero__module_index(ctx, mod, "zero_release")) < 0) return ZERO_ERR_INVALID_HANDLE;
    return zero__release_tied(ctx, mi);
}
ZERO_API void *zero_param_data(zero_ctx *ctx, zero_param p) {
    int pi;
    if (zero__check_built(ctx, "zero_param_data") != ZERO_OK) return NULL;
    if ((pi = zero__param_index(ctx, p, "zero_param_data")) < 0) return NULL;
    return zero__param_data(ctx, pi);
}
ZERO_API void *zero_param_grad(zero_ctx *ctx, zero_param p) {
    int pi;
    if (zero__check_built(ctx, "zero_param_grad") != ZERO_OK) return NULL;
    if ((pi = zero__param_index(ctx, p, "zero_param_grad")) < 0) return NULL;
    return zero__param_grad(ctx, pi);
}
ZERO_API zero_result zero_grads_ready(zero_ctx *ctx, zero_module mod) {
    zero_result r;
    int mi;
    if ((r = zero__check_built(ctx, "zero_grads_ready")) != ZERO_OK) return r;
    if ((mi = zero__module_index(ctx, mod, "zero_grads_ready")) < 0) return ZERO_ERR_INVALID_HANDLE;
    return zero__module_grads_ready(ctx, mi);
}
ZERO_API zero_result zero_step(zero_ctx *ctx) {
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_step")) != ZERO_OK) return r;
    if ((r = zero__stash_step_check(ctx)) != ZERO_OK) return r;
    r = zero__step(ctx);
    if (r == ZERO_OK || r == ZERO_STEP_SKIPPED) zero__stash_step_end(ctx);
    return r;
}

ZERO_API float zero_loss_scale(const zero_ctx *ctx) { return ctx ? ctx->opt.loss_scale : 0.0f; }

/* ---- GEMM, tiling and the trainer helpers ------------------------------------------- */
ZERO_API zero_result zero_sgemm(zero_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                                int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc) {
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_sgemm")) != ZERO_OK) return r;
    if (M < 0 || N < 0 || K < 0 || !A || !B || !C)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "zero_sgemm: bad sizes or NULL matrices");
    return ctx->dev->gemm(ctx, ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}
ZERO_API zero_result zero_tiled_linear_add(zero_ctx *ctx, const zero_tiled_linear_desc *desc, zero_tiled_linear *out) {
    if (!ctx || !desc || !out || !desc->name)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_tiled_linear_add: ctx, desc, desc->name and out must not be NULL");
    out->id = 0;
    if (ctx->built)
        return zero__fail(ctx, ZERO_ERR_ALREADY_BUILT, ZERO_LOGITEM_ALREADY_BUILT,
                          "zero_tiled_linear_add('%s'): the model cannot change after zero_build", desc->name);
    return zero__tiled_add(ctx, desc, out);
}
ZERO_API int zero_tiled_linear_tiles(const zero_ctx *ctx, zero_tiled_linear tl) {
    int i = zero__tiled_index(ZERO__UNCONST(zero_ctx *, ctx), tl, "zero_tiled_linear_tiles");
    return i < 0 ? -1 : ctx->tiled[i].tiles;
}
ZERO_API zero_result zero_tiled_linear_set_f32(zero_ctx *ctx, zero_tiled_linear tl, const float *w, const float *b) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, "zero_tiled_linear_set_f32")) != ZERO_OK) return r;
    if ((i = zero__tiled_index(ctx, tl, "zero_tiled_linear_set_f32")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if (!w) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_tiled_linear_set_f32: w is NULL");
    return zero__tiled_set_f32(ctx, &ctx->tiled[i], w, b);
}
ZERO_API zero_result zero_tiled_linear_forward(zero_ctx *ctx, zero_tiled_linear tl, const float *x, int64_t rows, float *y) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, "zero_tiled_linear_forward")) != ZERO_OK) return r;
    if ((i = zero__tiled_index(ctx, tl, "zero_tiled_linear_forward")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if (!x || !y || rows < 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_tiled_linear_forward: bad arguments");
    return zero__tiled_forward(ctx, &ctx->tiled[i], x, rows, y);
}
ZERO_API zero_result zero_tiled_linear_backward(zero_ctx *ctx, zero_tiled_linear tl, const float *x, const float *dy,
                                                int64_t rows, float *dx) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, "zero_tiled_linear_backward")) != ZERO_OK) return r;
    if ((i = zero__tiled_index(ctx, tl, "zero_tiled_linear_backward")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if (!x || !dy || rows < 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_tiled_linear_backward: bad arguments");
    return zero__tiled_backward(ctx, &ctx->tiled[i], x, dy, rows, dx);
}

ZERO_API zero_result zero_copy(zero_ctx *ctx, void *dst, const void *src, int64_t bytes) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_copy: ctx is NULL");
    if (bytes < 0 || (bytes > 0 && (!dst || !src)))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_copy: NULL pointer or negative size");
    return ctx->dev->copy(ctx, ZERO__S_COMPUTE, dst, src, bytes);
}
ZERO_API void *zero_device_alloc(zero_ctx *ctx, int64_t bytes) {
    void *p;
    if (!ctx || bytes <= 0) {
        zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_device_alloc: NULL ctx or size %lld <= 0",
                   (long long)bytes);
        return NULL;
    }
    if (!(p = ctx->dev->alloc(ctx, bytes)))
        zero__fail(ctx, ZERO_ERR_OUT_OF_MEMORY, ZERO_LOGITEM_OUT_OF_MEMORY,
                   "zero_device_alloc: %lld bytes of %s memory are not available", (long long)bytes, ctx->dev->name);
    return p;
}
ZERO_API void zero_device_free(zero_ctx *ctx, void *ptr) {
    if (ctx && ptr) ctx->dev->free(ctx, ptr);
}
static zero_result zero__helper_args(zero_ctx *ctx, const char *fn, int64_t n, const void *a, const void *b,
                                     const void *c) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: ctx is NULL", fn);
    if (n < 0 || (n > 0 && (!a || !b || !c)))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: NULL pointer or negative size", fn);
    return ZERO_OK;
}
ZERO_API zero_result zero_gelu(zero_ctx *ctx, float *y, const float *x, int64_t n) {
    zero_result r = zero__helper_args(ctx, "zero_gelu", n, y, x, x);
    return r != ZERO_OK || n == 0 ? r : ctx->dev->gelu(ctx, y, x, n);
}
ZERO_API zero_result zero_gelu_backward(zero_ctx *ctx, float *dx, const float *x, const float *dy, int64_t n) {
    zero_result r = zero__helper_args(ctx, "zero_gelu_backward", n, dx, x, dy);
    return r != ZERO_OK || n == 0 ? r : ctx->dev->gelu_bwd(ctx, dx, x, dy, n);
}
ZERO_API zero_result zero_softmax_xent(zero_ctx *ctx, float *loss, float *dlogits, const float *logits,
                                       const int32_t *labels, int64_t rows, int64_t classes, float dscale) {
    zero_result r = zero__helper_args(ctx, "zero_softmax_xent", rows, loss, dlogits, logits);
    if (r != ZERO_OK) return r;
    if (rows > 0 && (!labels || classes < 1))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_softmax_xent: no labels or classes < 1");
    return rows == 0 ? ZERO_OK : ctx->dev->xent(ctx, loss, dlogits, logits, labels, rows, classes, dscale);
}

/* ---- tracing ------------------------------------------------------------------------ */
ZERO_API zero_result zero_trace_enable(zero_ctx *ctx, int64_t max_events) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_trace_enable: ctx is NULL");
    return zero__trace_enable(ctx, max_events);
}

ZERO_API zero_result zero_trace_begin(zero_ctx *ctx, const char *name) {
    struct zero__trace *tr;
    if (!ctx || !name) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_trace_begin: NULL argument");
    if (!(tr = ctx->trace)) return ZERO_OK;   /* off: free */
    if (tr->depth >= ZERO__TRACE_DEPTH)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_trace_begin('%s'): more than %d spans open", name, ZERO__TRACE_DEPTH);
    snprintf(tr->open_name[tr->depth], ZERO__TRACE_NAME, "%s", name);
    tr->open_ts[tr->depth++] = zero__now_ms() * 1e3;
    return ZERO_OK;
}

ZERO_API zero_result zero_trace_end(zero_ctx *ctx) {
    struct zero__trace *tr;
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_trace_end: ctx is NULL");
    if (!(tr = ctx->trace)) return ZERO_OK;
    if (tr->depth <= 0)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE, "zero_trace_end: no span is open");
    tr->depth--;
    zero__trace_add(ctx, ZERO__TRACK_COMPUTE, tr->open_name[tr->depth], NULL, tr->open_ts[tr->depth]);
    return ZERO_OK;
}

ZERO_API int64_t zero_trace_count(const zero_ctx *ctx) {
    int64_t n;
    if (!ctx || !ctx->trace) return 0;
    n = __atomic_load_n(&ctx->trace->count, __ATOMIC_RELAXED);
    return n;
}

ZERO_API zero_result zero_trace_save(zero_ctx *ctx, const char *path) {
    if (!ctx) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_trace_save: ctx is NULL");
    if (!path) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_trace_save: path is NULL");
    if (!ctx->trace)
        return zero__fail(ctx, ZERO_ERR_STATE, ZERO_LOGITEM_BAD_SEQUENCE,
                          "zero_trace_save: tracing is off (call zero_trace_enable first)");
    return zero__trace_save(ctx, path);
}

/* ---- parameters in and out ------------------------------------------------------------ */
ZERO_API zero_result zero_param_set_f32(zero_ctx *ctx, zero_param p, const float *values) {
    zero_result r;
    int pi;
    if ((r = zero__check_built(ctx, "zero_param_set_f32")) != ZERO_OK) return r;
    if ((pi = zero__param_index(ctx, p, "zero_param_set_f32")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if (!values) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_param_set_f32: values is NULL");
    return zero__param_set_f32(ctx, pi, values);
}

ZERO_API zero_result zero_gather_params_f32(zero_ctx *ctx, float *out) {
    zero__gather_user g;
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_gather_params_f32")) != ZERO_OK) return r;
    if (!out) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_gather_params_f32: out is NULL");
    g.fn = NULL; g.user = NULL; g.out = out;
    return zero__gather_params_each(ctx, -1, zero__gather_to_out, &g, "zero_gather_params_f32");
}

ZERO_API zero_result zero_set_params_f32(zero_ctx *ctx, const float *all) {
    zero_result r;
    int i;
    if ((r = zero__check_built(ctx, "zero_set_params_f32")) != ZERO_OK) return r;
    if (!all) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_set_params_f32: all is NULL");
    /* param by param, so every stage, tier and device takes its own path, and nothing is
       copied whole */
    for (i = 0; i < ctx->num_params; i++)
        if ((r = zero__param_set_f32(ctx, i, all + ctx->params[i].out_offset)) != ZERO_OK) return r;
    return ZERO_OK;
}

ZERO_API zero_result zero_allreduce_f64(zero_ctx *ctx, double *values, int n) {
    zero_result r;
    int i;
    if (!ctx || (!values && n > 0) || n < 0)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_allreduce_f64: bad arguments");
    for (i = 0; i < n; i += 64) {
        int c = n - i < 64 ? n - i : 64;
        if ((r = zero__wait(ctx, zero__post_allreduce_f64(ctx, values + i, c))) != ZERO_OK)
            return r;
    }
    return ZERO_OK;
}

ZERO_API zero_result zero_stats_get(const zero_ctx *ctx, zero_stats *out) {
    if (!ctx || !out)
        return zero__fail(ZERO__UNCONST(zero_ctx *, ctx), ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_stats_get: NULL argument");
    zero__stats_get(ctx, out);
    return ZERO_OK;
}

/* ---- communicators from a launcher's environment ------------------------------------ */
ZERO_API zero_result zero_comm_from_env(zero_comm **out, const char *backend) {
    if (!out) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_comm_from_env: out is NULL");
    return zero__comm_from_env(out, backend);
}

ZERO_API zero_result zero_run_nccl(int world_size, zero_rank_fn fn, void *user) {
    if (!fn) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_run_nccl: fn is NULL");
    return zero__run_nccl(world_size, fn, user);
}

/* ---- checkpoints and safetensors ---------------------------------------------------- */
ZERO_API zero_result zero_save(zero_ctx *ctx, const char *dir) {
    zero_result r;
    if ((r = zero__ck_check(ctx, "zero_save", dir)) != ZERO_OK) return r;
    return zero__ck_save(ctx, dir);
}

ZERO_API zero_result zero_load(zero_ctx *ctx, const char *dir) {
    zero_result r;
    if ((r = zero__ck_check(ctx, "zero_load", dir)) != ZERO_OK) return r;
    return zero__ck_load(ctx, dir);
}

ZERO_API zero_result zero_gather_params_f32_root(zero_ctx *ctx, int root, float *out) {
    zero__gather_user g;
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_gather_params_f32_root")) != ZERO_OK) return r;
    if (root < -1 || root >= ctx->world)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_gather_params_f32_root: root %d is not a rank of this world of %d (or -1: every rank)",
                          root, ctx->world);
    if (!out && (root < 0 || root == ctx->rank))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_gather_params_f32_root: out must not be NULL on rank %d", ctx->rank);
    g.fn = NULL; g.user = NULL; g.out = out;
    return zero__gather_params_each(ctx, root, zero__gather_to_out, &g, "zero_gather_params_f32_root");
}

ZERO_API zero_result zero_gather_params_each(zero_ctx *ctx, int root, zero_param_fn fn, void *user) {
    zero__gather_user g;
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_gather_params_each")) != ZERO_OK) return r;
    if (!fn) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_gather_params_each: fn is NULL");
    if (root < -1 || root >= ctx->world)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_gather_params_each: root %d is not a rank of this world of %d (or -1: every rank)",
                          root, ctx->world);
    g.fn = fn; g.user = user; g.out = NULL;
    return zero__gather_params_each(ctx, root, zero__gather_to_user, &g, "zero_gather_params_each");
}

ZERO_API zero_result zero_grad_shard_f32(zero_ctx *ctx, zero_param p, float *out, int64_t *begin, int64_t *end) {
    int pi;
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_grad_shard_f32")) != ZERO_OK) return r;
    if (!out || !begin || !end)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_grad_shard_f32: out, begin and end must not be NULL");
    *begin = *end = 0;
    if ((pi = zero__param_index(ctx, p, "zero_grad_shard_f32")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if ((r = zero__grad_read_ready(ctx, pi, "zero_grad_shard_f32")) != ZERO_OK) return r;
    return zero__grad_shard_f32(ctx, pi, out, begin, end);
}

ZERO_API zero_result zero_grad_gather_f32(zero_ctx *ctx, zero_param p, float *out) {
    int pi;
    zero_result r;
    if ((r = zero__check_built(ctx, "zero_grad_gather_f32")) != ZERO_OK) return r;
    if (!out) return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_grad_gather_f32: out is NULL");
    if ((pi = zero__param_index(ctx, p, "zero_grad_gather_f32")) < 0) return ZERO_ERR_INVALID_HANDLE;
    if ((r = zero__grad_read_ready(ctx, pi, "zero_grad_gather_f32")) != ZERO_OK) return r;
    return zero__grad_gather_f32(ctx, pi, out);
}

ZERO_API zero_result zero_ckpt_put(zero_ctx *ctx, const char *key, const void *data, int64_t bytes) {
    if (!ctx || !key || (bytes > 0 && !data))
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_ckpt_put: ctx and key must not be NULL, nor data when bytes > 0");
    return zero__ck_rec_put(ctx, key, data, bytes);
}

ZERO_API zero_result zero_ckpt_get(const zero_ctx *ctx, const char *key, void *out, int64_t cap, int64_t *bytes) {
    zero_ctx *c = ZERO__UNCONST(zero_ctx *, ctx);       /* for the last error only */
    int i;
    if (bytes) *bytes = 0;
    if (!ctx || !key || (cap > 0 && !out))
        return zero__fail(c, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG,
                          "zero_ckpt_get: ctx and key must not be NULL, nor out when cap > 0");
    for (i = 0; i < ctx->ckrec.n && strcmp(ctx->ckrec.rec[i].key, key) != 0; i++) {}
    if (i == ctx->ckrec.n)
        return zero__fail(c, ZERO_ERR_NOT_FOUND, ZERO_LOGITEM_BAD_OPTION, "zero_ckpt_get: no record '%.80s'%s", key,
                          ctx->ckrec.n ? "" : " (the context has none: zero_ckpt_put, or zero_load of a checkpoint with records)");
    if (bytes) *bytes = ctx->ckrec.rec[i].bytes;
    if (cap < ctx->ckrec.rec[i].bytes)
        return zero__fail(c, ZERO_ERR_INVALID_SIZE, ZERO_LOGITEM_INVALID_SIZE,
                          "zero_ckpt_get('%s'): the record has %lld bytes, out only %lld", key,
                          (long long)ctx->ckrec.rec[i].bytes, (long long)cap);
    if (ctx->ckrec.rec[i].bytes) memcpy(out, ctx->ckrec.rec[i].data, (size_t)ctx->ckrec.rec[i].bytes);
    return ZERO_OK;
}

ZERO_API zero_result zero_export_safetensors(zero_ctx *ctx, const char *path, zero_dtype dtype) {
    zero_result r;
    if ((r = zero__ck_check(ctx, "zero_export_safetensors", path)) != ZERO_OK) return r;
    if (dtype != ZERO_F32 && dtype != ZERO_BF16)
        return zero__fail(ctx, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE,
                          "zero_export_safetensors: dtype must be ZERO_F32 or ZERO_BF16");
    return zero__st_export(ctx, path, dtype, 0);
}

ZERO_API zero_result zero_export_safetensors_ex(zero_ctx *ctx, const char *path, const zero_export_desc *desc) {
    zero_result r;
    zero_dtype dt;
    if ((r = zero__ck_check(ctx, "zero_export_safetensors_ex", path)) != ZERO_OK) return r;
    if (!desc)
        return zero__fail(ctx, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_export_safetensors_ex: desc is NULL");
    dt = desc->dtype == ZERO_DTYPE_DEFAULT ? ZERO_F32 : desc->dtype;
    if (dt != ZERO_F32 && dt != ZERO_BF16)
        return zero__fail(ctx, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE,
                          "zero_export_safetensors_ex: desc->dtype must be ZERO_F32 or ZERO_BF16");
    return zero__st_export(ctx, path, dt, desc->tied_copies != 0);
}

ZERO_API zero_result zero_load_safetensors(zero_ctx *ctx, const char *path) {
    zero_result r;
    if ((r = zero__ck_check(ctx, "zero_load_safetensors", path)) != ZERO_OK) return r;
    return zero__st_load(ctx, path);
}

/* ---- checkpoint inspection ------------------------------------------------------------ */
ZERO_API void zero_ckpt_close(zero_ckpt *ck) { zero__ck_ckpt_free(ck); }

ZERO_API zero_result zero_ckpt_open(const char *dir, const zero_allocator *alloc, zero_ckpt **out) {
    if (out) *out = NULL;
    if (!dir || !out)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_ckpt_open: dir and out must not be NULL");
    if (!*dir)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_ckpt_open: the checkpoint directory path is empty");
    if (strlen(dir) > 3500)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_ckpt_open: the checkpoint directory path is longer than 3500 bytes");
    if (alloc && !alloc->alloc != !alloc->free)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION,
                          "zero_ckpt_open: alloc->alloc and alloc->free must be set together");
    return zero__ck_ckpt_open(dir, alloc, out);
}

ZERO_API zero_result zero_ckpt_info(const zero_ckpt *ck, struct zero_ckpt_info *out) {
    if (!ck || !out)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_ckpt_info: ck and out must not be NULL");
    zero__ck_ckpt_info(ck, out);
    return ZERO_OK;
}

ZERO_API zero_result zero_ckpt_module(const zero_ckpt *ck, int i, zero_ckpt_module_info *out) {
    zero_result r = zero__ck_index(ck, out, i, ck ? ck->m.nmod : 0, "zero_ckpt_module", "module");
    if (r != ZERO_OK) return r;
    zero__ck_module_info(ck, i, out);
    return ZERO_OK;
}

ZERO_API zero_result zero_ckpt_param(const zero_ckpt *ck, int i, zero_ckpt_param_info *out) {
    zero_result r = zero__ck_index(ck, out, i, ck ? ck->m.nparam : 0, "zero_ckpt_param", "param");
    if (r != ZERO_OK) return r;
    zero__ck_param_info(ck, i, out);
    return ZERO_OK;
}

ZERO_API zero_result zero_ckpt_record(const zero_ckpt *ck, int i, zero_ckpt_record_info *out) {
    zero_result r;
    if ((r = zero__ck_index(ck, out, i, ck ? ck->m.nrec : 0, "zero_ckpt_record", "record")) != ZERO_OK) return r;
    out->key = ck->m.recs[i].key;
    out->data = ck->m.recs[i].data;
    out->bytes = ck->m.recs[i].bytes;
    return ZERO_OK;
}

ZERO_API zero_result zero_ckpt_file(const zero_ckpt *ck, int i, zero_ckpt_file_info *out) {
    zero_result r = zero__ck_index(ck, out, i, ck ? ck->m.nfile : 0, "zero_ckpt_file", "file");
    if (r != ZERO_OK) return r;
    zero__ck_file_info(ck, i, out);
    return ZERO_OK;
}

ZERO_API zero_result zero_ckpt_verify(zero_ckpt *ck) {
    if (!ck) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_ckpt_verify: ck is NULL");
    return zero__ck_scan(ck, "zero_ckpt_verify", NULL, NULL);
}

ZERO_API zero_result zero_ckpt_export_as(zero_ckpt *ck, const char *path, zero_dtype dtype) {
    static const char *fn = "zero_ckpt_export";
    if (!ck || !path)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "%s: ck and path must not be NULL", fn);
    if (!*path) return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_BAD_OPTION, "%s: the output path is empty", fn);
    if (dtype != ZERO_F32 && dtype != ZERO_BF16)
        return zero__fail(NULL, ZERO_ERR_INVALID_DTYPE, ZERO_LOGITEM_INVALID_DTYPE, "%s: dtype must be ZERO_F32 or ZERO_BF16",
                          fn);
    return zero__ck_export(ck, path, dtype, fn);
}

ZERO_API zero_result zero_ckpt_export(zero_ckpt *ck, const char *path) {
    return zero_ckpt_export_as(ck, path, ZERO_F32);
}

ZERO_API zero_result zero_ckpt_read_f32(zero_ckpt *ck, float *out) {
    if (!ck || !out)
        return zero__fail(NULL, ZERO_ERR_INVALID_ARG, ZERO_LOGITEM_NULL_ARG, "zero_ckpt_read_f32: ck and out must not be NULL");
    return zero__ck_read_f32(ck, out);
}

ZERO__FP_PIN_END   /* the includer's floating-point rules again (>>platform) */
ZERO__C_IN_CXX_END
#endif /* ZERO_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
MIT License

Copyright (c) 2026 the zero.h authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
