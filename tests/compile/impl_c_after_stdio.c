/* Compile test: the implementation after the includer's own system headers, as a C trainer
   writes it (stdio.h first). Under a strict -std=c99 glibc then hides the POSIX names the
   implementation uses; zero.h's platform region must still compile and run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZERO_IMPLEMENTATION
#include "zero.h"

int main(void) {
    zero_desc d;
    zero_ctx *z = 0;
    zero_result r;
    memset(&d, 0, sizeof d);
    r = zero_create(&z, &d);
    if (r != ZERO_OK || !z) {
        printf("zero_create: %s (%s)\n", zero_result_str(r), zero_last_error(0));
        return 1;
    }
    zero_destroy(z);
    return 0;
}
