#include "fuzzer_main.h"

#ifdef TAPEDECK_FUZZING
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int tapedeck_fuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
#else
// An ordinary build: the replay tool's Swift @main is the entry point.
typedef int tapedeck_fuzzer_main_unused;
#endif
