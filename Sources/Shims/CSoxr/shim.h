#ifndef TAPEDECK_CSOXR_SHIM_H
#define TAPEDECK_CSOXR_SHIM_H
#include <soxr.h>
#endif
