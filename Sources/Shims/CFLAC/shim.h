#ifndef TAPEDECK_CFLAC_SHIM_H
#define TAPEDECK_CFLAC_SHIM_H
#include <FLAC/format.h>
#include <FLAC/metadata.h>
#include <FLAC/stream_encoder.h>
#include <FLAC/stream_decoder.h>

// From libFLAC's protected API (include/protected/stream_encoder.h, not installed; exported by
// libFLAC since 1.2): Tapedeck computes STREAMINFO's MD5 itself, over the frames actually written,
// so a take cut short by a full disk keeps a signature without being decoded again.
FLAC_API FLAC__bool FLAC__stream_encoder_set_do_md5(FLAC__StreamEncoder *encoder, FLAC__bool value);
#endif
