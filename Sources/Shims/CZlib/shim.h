#ifndef TAPEDECK_CZLIB_SHIM_H
#define TAPEDECK_CZLIB_SHIM_H
#include <zlib.h>
#endif
