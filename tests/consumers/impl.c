/* The consumer's implementation file: the one translation unit that defines SAFEVERBS_IMPLEMENTATION. */
#define SAFEVERBS_IMPLEMENTATION
#include <safeverbs.h>
