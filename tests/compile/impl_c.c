/* Compile test: the implementation as C99, linked and run. zero.h is included once
   plain and then again with ZERO_IMPLEMENTATION: the implementation sits outside the
   include guard, so an earlier plain include must not swallow it. */
#include "zero.h"
#define ZERO_IMPLEMENTATION
#include "zero.h"
#include <stdio.h>

int main(void) {
    zero_desc d = {0};
    zero_ctx *z = 0;
    zero_result r = zero_create(&z, &d);
    if (r != ZERO_OK || !z) {
        printf("zero_create: %s (%s)\n", zero_result_str(r), zero_last_error(0));
        return 1;
    }
    zero_destroy(z);
    return 0;
}
