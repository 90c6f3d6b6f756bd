#ifndef TAPEDECK_CQRENCODE_SHIM_H
#define TAPEDECK_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
