#ifndef TAPEDECK_CSNDFILE_SHIM_H
#define TAPEDECK_CSNDFILE_SHIM_H
#include <sndfile.h>
#endif
