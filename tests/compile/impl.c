/* The implementation translation unit of the compile matrix. */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
