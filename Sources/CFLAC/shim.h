#ifndef TAPEDECK_CFLAC_SHIM_H
#define TAPEDECK_CFLAC_SHIM_H
#include <FLAC/format.h>
#include <FLAC/metadata.h>
#include <FLAC/stream_encoder.h>
#include <FLAC/stream_decoder.h>
#endif
