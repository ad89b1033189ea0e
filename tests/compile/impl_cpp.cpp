// Compile test: the implementation as C++, linked and run.
#define ZERO_IMPLEMENTATION
#include "zero.h"
#include <cstdio>

int main() {
    zero_desc d = {};
    zero_ctx *z = nullptr;
    zero_result r = zero_create(&z, &d);
    if (r != ZERO_OK || !z) {
        std::printf("zero_create: %s (%s)\n", zero_result_str(r), zero_last_error(nullptr));
        return 1;
    }
    zero_destroy(z);
    return 0;
}
