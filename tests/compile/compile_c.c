/* Compile test: zero.h's public section as C99, declarations only (compiled with -c). */
#include "zero.h"
#include "zero.h" /* the include guard must make a second include harmless */

/* Takes the addresses of API functions and uses the public types; never linked. */
int compile_c_check(void);
int compile_c_check(void) {
    zero_result (*create)(zero_ctx **, const zero_desc *) = zero_create;
    void (*destroy)(zero_ctx *) = zero_destroy;
    zero_result (*step)(zero_ctx *) = zero_step;
    zero_desc d = {0};
    zero_module_desc md = {0};
    zero_param_desc pd = {0};
    zero_plan plan = {0};
    zero_stats stats = {0};
    zero_module m = {0};
    zero_param p = {0};
    d.stage = 3;
    d.param_dtype = ZERO_BF16;
    d.optim.type = ZERO_OPTIM_ADAMW;
    md.name = "layer";
    pd.ndim = 1;
    pd.shape[0] = ZERO_MAX_DIMS;
    return (create != 0) + (destroy != 0) + (step != 0) + d.stage + (md.name != 0) + pd.ndim +
           plan.stage + (int)stats.steps + (int)m.id + (int)p.id + ZERO_LOGITEM_NUM +
           (int)zero_dtype_size(ZERO_F32) + (zero_last_error(0) != 0) + ZERO_VERSION_MAJOR;
}
