/* Wire formats of the verbs transport (wire.h). */
#include "net/core/wire.h"
