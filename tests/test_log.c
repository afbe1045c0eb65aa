/* test_log.c - the log hook (sfv_set_log) and SAFEVERBS_LOG on a real device (rxe0 by default):
   nothing by default; errors, state changes and handshakes with their objects' names at the
   level asked; the environment variable read once. tests/nodev/test_log.c runs the same tests
   (but the broken channel, which needs a NIC's error completion) on the fake NIC. */
#ifndef TEST_LOG_NODEV
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"
#define LOG_DEVICE test_device(0)
#else
#define LOG_DEVICE NULL
#endif

#include <stdarg.h>

/* What the hook saw: every message, one per line, each prefixed with its level as "[2] ". */
static char g_log[16384];
static int g_calls;
static void capture(void *user, sfv_log_level level, const char *message) {
    size_t k = strlen(g_log);
    CHECK(user == (void *)g_log);
    g_calls++;
    snprintf(g_log + k, sizeof g_log - k, "[%d] %s\n", (int)level, message);
}
static bool seen(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool seen(const char *fmt, ...) {
    char want[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    return strstr(g_log, want) != NULL;
}

typedef struct lg { sfv_context *ctx; sfv_pd *pd; sfv_mr *mr; sfv_channel *ch; char *buf; } lg;
static void lg_open(lg *l) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    l->buf = (char *)calloc(1, 8192);
    CHECK(l->buf);
    CHECK_OK(sfv_open_device(LOG_DEVICE, &l->ctx));
    CHECK_OK(sfv_alloc_pd(l->ctx, &l->pd));
    CHECK_OK(sfv_reg_mr_local(l->pd, l->buf, 8192, &l->mr));
    CHECK_OK(sfv_create_channel(l->pd, &d, &l->ch));
}
static void lg_close(lg *l) {
    CHECK_OK(sfv_destroy_channel(l->ch));
    CHECK_OK(sfv_dereg_mr(l->mr));
    CHECK_OK(sfv_dealloc_pd(l->pd));
    CHECK_OK(sfv_close_device(l->ctx));
    free(l->buf);
}
static uint32_t qpn_of(sfv_channel *ch) {
    sfv_endpoint me;
    CHECK_OK(sfv_channel_endpoint(ch, &me));
    return me.qpn;
}

/* stderr into a file for the rest of the test (each test runs in its own process). */
static FILE *g_err;
static void capture_stderr(void) {
    g_err = tmpfile();
    CHECK(g_err);
    fflush(stderr);
    CHECK(dup2(fileno(g_err), 2) == 2);
}
static size_t read_stderr(char *out, size_t size) {
    size_t k;
    fflush(stderr);
    rewind(g_err);
    k = fread(out, 1, size - 1, g_err);
    out[k] = 0;
    return k;
}

/* No hook, no SAFEVERBS_LOG: a whole session with failures prints nothing. */
static void t_log_silent_by_default(void) {
    lg l;
    sfv_context *none;
    char err[4096];
    unsetenv("SAFEVERBS_LOG");
    capture_stderr();
    lg_open(&l);
    CHECK_RESULT(sfv_channel_post_send(l.ch, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    lg_close(&l);
    CHECK_EQ(read_stderr(err, sizeof err), 0);
}

/* The hook at INFO: opened, connected (both qpns), errors with the refusing call; no DEBUG. */
static void t_log_hook_info(void) {
    lg l;
    sfv_endpoint me;
    uint32_t qpn;
    char name[64];
    sfv_set_log(capture, g_log, SFV_LOG_INFO);
    lg_open(&l);
    CHECK(seen("[2] %s: opened", sfv_context_name(l.ctx)));
    qpn = qpn_of(l.ch);
    CHECK(!seen("created")); /* DEBUG */
    CHECK_OK(sfv_channel_endpoint(l.ch, &me));
    CHECK_OK(sfv_channel_handshake(l.ch, &me));
    CHECK(seen("[2] %s qp %u: connected to qp %u", sfv_context_name(l.ctx), qpn, qpn));
    CHECK_RESULT(sfv_channel_handshake(l.ch, &me), SFV_ERR_INVALID);
    CHECK(seen("[1] sfv_channel_handshake: the channel is already connected (SFV_ERR_INVALID"));
    CHECK_RESULT(sfv_channel_post_send(l.ch, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK(seen("(SFV_ERR_INVALID: invalid input)"));
    snprintf(name, sizeof name, "%s", sfv_context_name(l.ctx));
    lg_close(&l);
    CHECK(seen("[2] %s: closed", name));
    CHECK(!seen("[3] "));
}

/* DEBUG adds creation and destruction; ERROR keeps only failures; OFF nothing at all. */
static void t_log_levels(void) {
    lg l;
    int before;
    sfv_context *none;
    sfv_set_log(capture, g_log, SFV_LOG_DEBUG);
    lg_open(&l);
    CHECK(seen("[3] %s qp %u: created (port 1", sfv_context_name(l.ctx), qpn_of(l.ch)));
    sfv_set_log(capture, g_log, SFV_LOG_ERROR);
    g_log[0] = 0;
    CHECK_RESULT(sfv_channel_post_send(l.ch, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK(seen("[1] ") && !seen("[2] ") && !seen("[3] "));
    sfv_set_log(capture, g_log, SFV_LOG_OFF);
    before = g_calls;
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    sfv_set_log(capture, g_log, (sfv_log_level)-1); /* below OFF: off, not every message */
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    lg_close(&l);
    CHECK_EQ(g_calls, before);
    sfv_set_log(capture, g_log, (sfv_log_level)99); /* above DEBUG: DEBUG */
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    CHECK(g_calls > before);
    sfv_set_log(capture, g_log, SFV_LOG_OFF);
}

/* SAFEVERBS_LOG=debug: to stderr as "safeverbs: LEVEL: ...", read once (a later change of the
   variable changes nothing; sfv_set_log does). */
static void t_log_env_read_once(void) {
    lg l;
    char err[8192];
    sfv_context *none;
    setenv("SAFEVERBS_LOG", "debug", 1);
    capture_stderr();
    lg_open(&l);
    setenv("SAFEVERBS_LOG", "off", 1);
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    lg_close(&l);
    read_stderr(err, sizeof err);
    CHECK(strstr(err, "safeverbs: info: ") && strstr(err, ": opened"));
    CHECK(strstr(err, "safeverbs: debug: ") && strstr(err, ": created"));
    CHECK(strstr(err, "safeverbs: error: sfv_open_device: no RDMA device named no-such-device"));
    sfv_set_log(NULL, NULL, SFV_LOG_OFF);
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    CHECK_EQ(read_stderr(err, sizeof err) > 0 && strstr(strstr(err, "no-such-device") + 1, "no-such-device") == NULL, 1);
}

/* A value it does not know is said once, and ignored. */
static void t_log_env_bad_value(void) {
    sfv_context *none;
    char err[2048];
    setenv("SAFEVERBS_LOG", "loud", 1);
    capture_stderr();
    CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
    read_stderr(err, sizeof err);
    CHECK(strstr(err, "SAFEVERBS_LOG=loud is not off, error, info, debug or 0..3: ignored"));
    CHECK(!strstr(err, "no-such-device"));
}

#ifndef TEST_LOG_NODEV
/* A receive too small for the send: the channel breaks, and the log says which one. */
static void t_log_broken_channel(void) {
    lg l;
    sfv_endpoint me;
    sfv_pending rx;
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_work_completion wc;
    sfv_set_log(capture, g_log, SFV_LOG_INFO);
    lg_open(&l);
    CHECK_OK(sfv_channel_endpoint(l.ch, &me));
    CHECK_OK(sfv_channel_handshake(l.ch, &me));
    g = sfv_mr_gather_element(l.mr, l.buf, 64);
    sc = sfv_mr_scatter_element(l.mr, l.buf + 4096, 8);
    CHECK_OK(sfv_channel_post_receive(l.ch, &sc, 1, &rx));
    (void)!sfv_channel_send(l.ch, &g, 1, &wc);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    CHECK(seen("[2] %s qp %u: broken", sfv_context_name(l.ctx), me.qpn));
    CHECK(seen("[1] completion: "));
    lg_close(&l);
}
#endif

static const harness_test TESTS[] = {
    TEST(t_log_silent_by_default, 30),
    TEST(t_log_hook_info, 30),
    TEST(t_log_levels, 30),
    TEST(t_log_env_read_once, 30),
    TEST(t_log_env_bad_value, 30),
#ifndef TEST_LOG_NODEV
    TEST(t_log_broken_channel, 30),
#endif
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
