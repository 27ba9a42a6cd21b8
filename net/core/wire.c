/* Wire formats of core and the socket transport (wire.h). */
#include "net/core/wire.h"
