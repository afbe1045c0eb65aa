/* harness.h - the small test harness of safeverbs' own tests.

   Every test runs in a forked child with a timeout (alarm), so a crash or a hang fails that
   test and the run goes on. A binary prints one line per test and closes with
   "N passed, N failed"; tests/run.sh adds the binaries up.

       static void t_something(void) { CHECK(1 + 1 == 2); CHECK_OK(sfv_open_device(...)); }
       static const harness_test TESTS[] = { TEST(t_something, 10), };
       int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }

   `./test_x NAME` runs only the tests whose name contains NAME. */
#ifndef HARNESS_H
#define HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct harness_test {
    const char *name;
    void (*fn)(void);
    unsigned timeout_s;
} harness_test;

#define TEST(fn, timeout_s) { #fn, fn, timeout_s }
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

#define FAIL(...)                                                         \
    do {                                                                  \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);               \
        fprintf(stderr, __VA_ARGS__);                                     \
        fprintf(stderr, "\n");                                            \
        exit(1);                                                          \
    } while (0)

/* A test that cannot run here says why and is counted as skipped, never as passed. In the test
   guest (SAFEVERBS_IN_VM) nothing may skip: there it is a failure. */
#define SKIP_CODE 77
#define SKIP(...)                                                         \
    do {                                                                  \
        fprintf(stderr, "    skipped: ");                                 \
        fprintf(stderr, __VA_ARGS__);                                     \
        fprintf(stderr, "\n");                                            \
        exit(getenv("SAFEVERBS_IN_VM") ? 1 : SKIP_CODE);              \
    } while (0)

#define CHECK(c)                                                          \
    do {                                                                  \
        if (!(c)) FAIL("CHECK(%s) failed", #c);                           \
    } while (0)

#define CHECK_EQ(a, b)                                                    \
    do {                                                                  \
        long long a_ = (long long)(a), b_ = (long long)(b);               \
        if (a_ != b_) FAIL("CHECK_EQ(%s, %s): %lld != %lld", #a, #b, a_, b_); \
    } while (0)

/* The call must return `want`; on a mismatch the last error's detail is printed. */
#define CHECK_RESULT(call, want)                                          \
    do {                                                                  \
        sfv_result r_ = (call);                                           \
        if (r_ != (want))                                                 \
            FAIL("%s returned %s, want %s (last error: %s, errno %d, verb %s)", #call, \
                 sfv_result_str(r_), sfv_result_str(want), sfv_last_error()->message, \
                 sfv_last_error()->errnum, sfv_last_error()->verb);       \
    } while (0)
#define CHECK_OK(call) CHECK_RESULT(call, SFV_OK)

/* Runs `stmt` in a child and expects it to die by SIGABRT (a broken contract). */
#define CHECK_ABORTS(stmt)                                                \
    do {                                                                  \
        int st_;                                                          \
        pid_t pid_ = fork();                                              \
        CHECK(pid_ >= 0);                                                 \
        if (pid_ == 0) {                                                  \
            freopen("/dev/null", "w", stderr);                            \
            stmt;                                                         \
            _exit(0);                                                     \
        }                                                                 \
        CHECK(waitpid(pid_, &st_, 0) == pid_);                            \
        if (!(WIFSIGNALED(st_) && WTERMSIG(st_) == SIGABRT))              \
            FAIL("%s did not abort (status 0x%x)", #stmt, st_);           \
    } while (0)

static inline const char *test_device(int which) {
    const char *e = getenv(which == 0 ? "SAFEVERBS_TEST_DEVICE" : "SAFEVERBS_TEST_DEVICE2");
    if (e && *e) return e;
    return which == 0 ? "rxe0" : "rxe1";
}

static inline double test_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Where a test takes a link down and back (test_channel, test_events): whether port 1 of dev
   reaches the state `want` ("ACTIVE", "DOWN") within `seconds`; whether its GID 1 (the IPv4 one)
   is back within `seconds`. */
/* Reads a sysfs file every 20 ms for up to `seconds` until its text is not empty, holds `has`
   (unless NULL) and does not hold `lacks` (unless NULL): 1, else 0. */
static inline int sysfs_poll(const char *path, double seconds, const char *has, const char *lacks) {
    char text[64];
    double end = test_seconds() + seconds;
    while (test_seconds() < end) {
        FILE *f = fopen(path, "r");
        size_t k = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        text[k] = 0;
        if (k && (!has || strstr(text, has)) && (!lacks || !strstr(text, lacks))) return 1;
        usleep(20000);
    }
    return 0;
}
static inline int port_state_is(const char *dev, const char *want, double seconds) {
    char path[128];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/state", dev);
    return sysfs_poll(path, seconds, want, NULL);
}
static inline int gid1_present(const char *dev, double seconds) {
    char path[128];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/gids/1", dev);
    return sysfs_poll(path, seconds, NULL, "0000:0000:0000:0000:0000:0000:0000:0000");
}

static inline int harness_main(int argc, char **argv, const harness_test *tests, size_t n) {
    size_t i;
    int passed = 0, failed = 0, skipped = 0;
    const char *filter = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (i = 0; i < n; i++) {
        int st = 0;
        double t0;
        pid_t pid;
        if (filter && !strstr(tests[i].name, filter)) continue;
        fflush(stdout);
        fflush(stderr);
        t0 = test_seconds();
        pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            setpgid(0, 0); /* a test's own children die with it on timeout */
            alarm(tests[i].timeout_s);
            tests[i].fn();
            exit(0); /* not _exit: LeakSanitizer checks at exit() in the sanitizer build */
        }
        waitpid(pid, &st, 0);
        kill(-pid, SIGKILL);
        if (WIFEXITED(st) && WEXITSTATUS(st) == SKIP_CODE) {
            skipped++;
            printf("skip %-44s\n", tests[i].name);
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
            printf("ok   %-44s %6.2fs\n", tests[i].name, test_seconds() - t0);
        } else {
            failed++;
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
                printf("FAIL %-44s timed out after %us\n", tests[i].name, tests[i].timeout_s);
            else if (WIFSIGNALED(st))
                printf("FAIL %-44s killed by signal %d\n", tests[i].name, WTERMSIG(st));
            else
                printf("FAIL %-44s exit %d\n", tests[i].name, WEXITSTATUS(st));
        }
    }
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif
