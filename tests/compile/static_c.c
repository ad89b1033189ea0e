/* Compile test: the implementation under ZERO_STATIC (every public function static;
   unused ones must not warn under -Wall -Wextra -Werror), linked and run. */
#define ZERO_STATIC
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
