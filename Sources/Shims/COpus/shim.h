#ifndef TAPEDECK_COPUS_SHIM_H
#define TAPEDECK_COPUS_SHIM_H
#include <opusenc.h>
#include <opusfile.h>

/* ope_encoder_ctl is variadic, which Swift cannot call: one fixed-argument wrapper per request. */
static inline int tapedeck_ope_set_bitrate(OggOpusEnc *enc, opus_int32 bitrate) {
    return ope_encoder_ctl(enc, OPUS_SET_BITRATE(bitrate));
}

static inline int tapedeck_ope_set_muxing_delay(OggOpusEnc *enc, opus_int32 samples48k) {
    return ope_encoder_ctl(enc, OPE_SET_MUXING_DELAY(samples48k));
}

static inline int tapedeck_ope_set_decision_delay(OggOpusEnc *enc, opus_int32 samples48k) {
    return ope_encoder_ctl(enc, OPE_SET_DECISION_DELAY(samples48k));
}

static inline int tapedeck_ope_set_complexity(OggOpusEnc *enc, opus_int32 complexity) {
    return ope_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity));
}

#endif
