// Compile test: zero.h's public section as C++, declarations only (compiled with -c).
#include "zero.h"
#include "zero.h"  // the include guard must make a second include harmless

// Takes the addresses of API functions and uses the public types; never linked.
int compile_cpp_check();
int compile_cpp_check() {
    zero_result (*create)(zero_ctx **, const zero_desc *) = zero_create;
    void (*destroy)(zero_ctx *) = zero_destroy;
    zero_result (*step)(zero_ctx *) = zero_step;
    zero_desc d = {};
    zero_module_desc md = {};
    zero_param_desc pd = {};
    zero_plan plan = {};
    zero_stats stats = {};
    zero_module m = {};
    zero_param p = {};
    d.stage = 3;
    d.param_dtype = ZERO_BF16;
    d.optim.type = ZERO_OPTIM_ADAMW;
    md.name = "layer";
    pd.ndim = 1;
    pd.shape[0] = ZERO_MAX_DIMS;
    return (create != nullptr) + (destroy != nullptr) + (step != nullptr) + d.stage +
           (md.name != nullptr) + pd.ndim + plan.stage + static_cast<int>(stats.steps) +
           static_cast<int>(m.id) + static_cast<int>(p.id) + ZERO_LOGITEM_NUM +
           static_cast<int>(zero_dtype_size(ZERO_F32)) + (zero_last_error(nullptr) != nullptr) +
           ZERO_VERSION_MAJOR;
}
