#include "tapedeck_ring.h"

// Element types that may sit at any address: the caller's buffers need not be aligned.
typedef float tapedeck_unaligned_f32 __attribute__((aligned(1)));
typedef int16_t tapedeck_unaligned_s16 __attribute__((aligned(1)));

void tapedeck_f32_to_s16(const void *source, void *destination, size_t count) {
    const tapedeck_unaligned_f32 *in = source;
    tapedeck_unaligned_s16 *out = destination;
    // Selects and a truncating conversion only, so the compiler makes it SIMD: scaled by 2^15,
    // clipped, NaN as 0, halves rounded away from zero (+-0.5, then truncated).
    for (size_t i = 0; i < count; i++) {
        float v = in[i];
        float x = v * 32768.0f;
        x = x < -32768.0f ? -32768.0f : x;
        x = x > 32767.0f ? 32767.0f : x;
        x = v != v ? 0.0f : x;
        out[i] = (int16_t)(int32_t)(x + (x < 0.0f ? -0.5f : 0.5f));
    }
}
