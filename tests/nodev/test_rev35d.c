/* test_rev35d.c - hostile review 35d on the fake NIC: devices, contexts, PDs, queries, the
   launcher and the log hook. No behaviour in this area failed; the one finding is a false doc
   sentence (sfv_result_from_errno), whose test pins the behaviour the corrected sentence states
   (it passes at tag base too: the fix is to the words only). */
#include "fake_env.h"

#include <errno.h>

/* Promise (sfv_result_from_errno's doc): "EINVAL -> INVALID; ... anything else -> DRIVER". The
   sentence was false for errno 0, which maps to SFV_OK (a caller that turns a failed call's
   errno into a result gets success where the call set none); the doc now says so and what to do.
   Every listed errno maps to its class; an unlisted one and a negative one to DRIVER. */
static void t_result_from_errno_zero(void) {
    CHECK(sfv_result_from_errno(0) == SFV_OK);
    CHECK(sfv_result_from_errno(EINVAL) == SFV_ERR_INVALID);
    CHECK(sfv_result_from_errno(ENOMEM) == SFV_ERR_RESOURCE);
    CHECK(sfv_result_from_errno(EAGAIN) == SFV_ERR_RESOURCE);
    CHECK(sfv_result_from_errno(EMFILE) == SFV_ERR_RESOURCE);
    CHECK(sfv_result_from_errno(EPERM) == SFV_ERR_PERMISSION);
    CHECK(sfv_result_from_errno(EACCES) == SFV_ERR_PERMISSION);
    CHECK(sfv_result_from_errno(ENOENT) == SFV_ERR_NOT_FOUND);
    CHECK(sfv_result_from_errno(ENODEV) == SFV_ERR_NOT_FOUND);
    CHECK(sfv_result_from_errno(EOPNOTSUPP) == SFV_ERR_UNSUPPORTED);
    CHECK(sfv_result_from_errno(EIO) == SFV_ERR_DRIVER);
    CHECK(sfv_result_from_errno(-EINVAL) == SFV_ERR_DRIVER);
}

static const harness_test TESTS[] = {
    TEST(t_result_from_errno_zero, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
