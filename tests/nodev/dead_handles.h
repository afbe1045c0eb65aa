/* dead_handles.h - what the tests of the set of live handles (test_rev38a, test_rev39a) share:
   SFV_ASSERT counts here and returns, so a broken contract is seen as the SFV_ERR_INVALID that
   follows it; the fake librdmacm is compiled into the including file (the Makefile links
   test_rev* with fake_verbs.c only), so the uio and TSan tiers build it as any test_rev*.
   Include it first, once, in place of fake_env.h. */
#ifndef DEAD_HANDLES_H
#define DEAD_HANDLES_H
#define SAFEVERBS_RDMACM
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)        \
    do {                     \
        if (!(c)) asserts++; \
    } while (0)
#include "fake_env.h"
#include "fake_rdmacm.h"
#include "fake_rdmacm.c"

/* The call was refused as a dead handle's, once, and said so. */
#define DEAD_REFUSED(call, kind)                                                      \
    do {                                                                              \
        const int before_ = asserts;                                                  \
        CHECK_RESULT((call), SFV_ERR_INVALID);                                        \
        CHECK_EQ(asserts, before_ + 1);                                               \
        CHECK(strstr(sfv_last_error()->message, "not a live " kind) != NULL);         \
    } while (0)
#endif
