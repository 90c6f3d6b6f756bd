#include <jack/jack.h>
#include <jack/types.h>
