#ifndef TAPEDECK_CEBUR128_SHIM_H
#define TAPEDECK_CEBUR128_SHIM_H
#include <ebur128.h>
#endif
