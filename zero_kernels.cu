/* zero_kernels.cu - the CUDA kernels of zero.h (fused optimizers, casts, norms, quantize,
   tiling helpers). `make CUDA=1` compiles it with nvcc into build/cuda/zero_kernels.o and
   links it into every CUDA program. It defines ZERO_KERNELS and includes zero.h so that the
   element-wise ZERO_HD functions are shared with the CPU path.
   Placeholder for now: the kernels land with the CUDA device. */
#define ZERO_KERNELS
#include "zero.h"
