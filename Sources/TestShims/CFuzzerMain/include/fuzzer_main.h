// The entry point of tapedeck-fuzz when scripts/fuzz builds it with libFuzzer.
//
// SwiftPM links an executable's `main` to the symbol `<module>_main` (tapedeck_fuzz_main), which
// the Swift side defines only in ordinary builds (the replay tool). With TAPEDECK_FUZZING defined
// (-Xcc -DTAPEDECK_FUZZING) this C file defines it instead and hands control to libFuzzer's driver
// with the Swift fuzz target, LLVMFuzzerTestOneInput. Nothing here is meant to be called from Swift.
#ifndef TAPEDECK_FUZZER_MAIN_H
#define TAPEDECK_FUZZER_MAIN_H
#endif
