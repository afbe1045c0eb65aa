/* test_log.c (device-free tier): the tests of tests/test_log.c on the fake NIC of fake_verbs.c. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"
#define TEST_LOG_NODEV
#include "../test_log.c" /* tests/test_log.c */
