#ifndef TAPEDECK_CSTREAMCODECS_SHIM_H
#define TAPEDECK_CSTREAMCODECS_SHIM_H
// The decoders of network streams that no other Tapedeck module links: Ogg Vorbis through
// libvorbisfile (read callbacks only: a live stream cannot seek) and MP3 through libmpg123's
// feed API (bytes pushed in as they arrive).
#define OV_EXCLUDE_STATIC_CALLBACKS 1
#include <vorbis/vorbisfile.h>
#include <mpg123.h>
#endif
