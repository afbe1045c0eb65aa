/* test_rev39c.c - hostile review, session 29 (c): a new user's first hour, the README's truth.
   Each test failed on the header and README before their fix.
   - The README's C examples are the code a new user copies first, and the README says its
     idioms build without a warning: they are compiled here as the README has them (extracted at
     run time), declarations only, with -Wall -Wextra -Werror, as C and as C++11. They ignored
     the results of SFV_NODISCARD calls: a warning each (an error with -Werror).
   - The "Use it" example, run on the fake NIC (one channel connected to itself).
   - The in-flight tracking's cost the README and the header quote is the one bench/RESULTS.md
     measured (they quoted an older run's).
   - The number of fake-NIC tests the README says run under the unsigned-overflow check is the
     Makefile's. */
#include "fake_env.h"
#include <stdarg.h>

/* The checkout's top: this file is tests/nodev/test_rev39c.c in it (make passes that path). */
static const char *repo_root(void) {
    static char root[4096];
    const char *tail = "tests/nodev/test_rev39c.c";
    size_t n = strlen(__FILE__), t = strlen(tail);
    CHECK(n >= t && strcmp(__FILE__ + n - t, tail) == 0);
    if (n == t) return ".";
    CHECK(n - t < sizeof root);
    memcpy(root, __FILE__, n - t);
    root[n - t] = 0;
    return root;
}

/* The whole file at `path`, NUL-terminated. */
static char *slurp_abs(const char *path) {
    FILE *f = fopen(path, "rb");
    char *s;
    long len;
    if (!f) FAIL("cannot open %s", path);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    len = ftell(f);
    CHECK(len >= 0);
    rewind(f);
    s = (char *)malloc((size_t)len + 1);
    CHECK(s);
    CHECK(fread(s, 1, (size_t)len, f) == (size_t)len);
    s[len] = 0;
    fclose(f);
    return s;
}

/* The same for a file of the checkout. */
static char *slurp(const char *rel) {
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", repo_root(), rel);
    return slurp_abs(path);
}

/* The README's fenced blocks of language `lang` ("c", "cpp"), in order: up to `max`, each a copy. */
static size_t fenced_blocks(const char *text, const char *lang, char **out, size_t max) {
    char open[16];
    size_t k = 0;
    const char *p = text;
    snprintf(open, sizeof open, "```%s\n", lang);
    while ((p = strstr(p, open)) != NULL) {
        const char *start, *end;
        if (p != text && p[-1] != '\n') { /* (only at the start of a line) */
            p++;
            continue;
        }
        start = p + strlen(open);
        end = strstr(start, "\n```\n");
        CHECK(end);
        CHECK(k < max);
        out[k] = strndup(start, (size_t)(end - start) + 1);
        CHECK(out[k]);
        k++;
        p = end + 5;
    }
    return k;
}

/* The line of `text` that starts with `prefix`, copied with its newline. */
static char *line_starting(const char *text, const char *prefix) {
    const char *p = strstr(text, prefix), *e;
    CHECK(p && (p == text || p[-1] == '\n'));
    e = strchr(p, '\n');
    CHECK(e);
    return strndup(p, (size_t)(e - p) + 1);
}

static bool have(const char *tool) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

/* Compiles `src` (declarations of safeverbs.h only: no verbs.h needed) with `cc` and the README's
   flags (a whole compile, not -fsyntax-only: gcc says an ignored warn_unused_result only after
   parsing); on a warning or error, fails with the compiler's words and the source. */
static void must_compile(const char *cc, const char *what, const char *src) {
    char dir[] = "/tmp/sfv_rev39c_XXXXXX", file[128], log[160], cmd[4608];
    FILE *f;
    int rc;
    CHECK(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/x.%s", dir, strstr(cc, "++") ? "cpp" : "c");
    snprintf(log, sizeof log, "%s/log", dir);
    f = fopen(file, "w");
    CHECK(f);
    CHECK(fputs(src, f) >= 0);
    CHECK(fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "%s -c -o /dev/null -Wall -Wextra -Werror -I'%s' '%s' >'%s' 2>&1", cc, repo_root(), file, log);
    rc = system(cmd);
    if (rc != 0) {
        char *out = slurp_abs(log);
        fprintf(stderr, "---- %s, as compiled:\n%s---- %s says:\n%s", what, src, cc, out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    if (rc != 0) FAIL("the README's %s does not compile cleanly with %s -Wall -Wextra -Werror", what, cc);
}

static char *cat3(const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = (char *)malloc(la + lb + lc + 1);
    CHECK(s);
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

/* Promise (README, "From C++" and "Use it"): the README's idioms build without a warning under
   -Wall -Wextra; every call whose result must not be ignored is SFV_NODISCARD. So the README's
   own examples must test those results: "Use it" (C and C++11), "Many peers", the version check,
   the MPI allgather, and the C++ scope template. Before: "Use it" alone ignored seven results
   (sfv_alloc_pd, sfv_create_channel, sfv_channel_send, ...): seven warnings, an error each with
   -Werror, and a program that carried on after a failed step with NULL handles. */
static void t_readme_examples_compile(void) {
    char *readme = slurp("README.md"), *c[16], *cpp[8], *try_line = NULL;
    size_t nc = fenced_blocks(readme, "c", c, 16), ncpp = fenced_blocks(readme, "cpp", cpp, 8), i;
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    bool use_it = false, peers = false, version = false, mpi = false, scope = false;
    if (!have(cc)) SKIP("no C compiler (%s) to compile the README's examples with", cc);
    for (i = 0; i < nc; i++) /* (the other blocks use the TRY that "Use it" defines) */
        if (strstr(c[i], "#define TRY(")) try_line = line_starting(c[i], "#define TRY(");
    if (!try_line) try_line = strdup("\n"); /* (no TRY: a block that uses one fails to compile) */
    for (i = 0; i < nc; i++) {
        const char *b = c[i];
        if (strstr(b, "#define SAFEVERBS_IMPLEMENTATION")) continue; /* (the implementation needs verbs.h: tests/compile_matrix.sh) */
        if (strstr(b, "sfv_open_device(")) {
            char *src = cat3("#include <stdio.h>\n#include \"safeverbs.h\"\nint readme(void);\nint readme(void) {\n", b, "return 0;\n}\n");
            must_compile(cc, "\"Use it\" example", src);
            if (have("g++")) must_compile("g++ -std=c++11 -x c++", "\"Use it\" example (as C++)", src);
            free(src);
            use_it = true;
        } else if (strstr(b, "sfv_node_connect(node")) {
            char *pre = cat3("#include <stdio.h>\n#include \"safeverbs.h\"\n", try_line,
                             "int readme(size_t rank, size_t n, sfv_pd *pd, const sfv_net_node *nodes, const size_t *ranks,\n"
                             "           sfv_gather_element out);\n"
                             "int readme(size_t rank, size_t n, sfv_pd *pd, const sfv_net_node *nodes, const size_t *ranks,\n"
                             "           sfv_gather_element out) {\nsfv_node *node;\n");
            char *src = cat3(pre, b, "return 0;\n}\n");
            must_compile(cc, "\"Many peers\" example", src);
            free(pre);
            free(src);
            peers = true;
        } else if (strstr(b, "SAFEVERBS_VERSION_AT_LEAST")) {
            must_compile(cc, "version check", b);
            version = true;
        } else if (strstr(b, "MPI_Allgather")) { /* a function, "/ * ... * /", then the calls */
            static const char mpi_stubs[] = "typedef int MPI_Comm;\ntypedef int MPI_Datatype;\nenum { MPI_SUCCESS = 0, MPI_BYTE = 1 };\n"
                                      "int MPI_Allgather(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);\n"
                                      "int MPI_Barrier(MPI_Comm);\n";
            const char *cut = strstr(b, "/* ... */\n");
            char *fn, *pre, *pre2, *src;
            CHECK(cut);
            fn = strndup(b, (size_t)(cut - b));
            pre = cat3("#include <stdio.h>\n#include \"safeverbs.h\"\n", mpi_stubs, try_line);
            pre2 = cat3(pre, fn, "int readme(sfv_pd *pd, MPI_Comm comm);\nint readme(sfv_pd *pd, MPI_Comm comm) {\nsfv_node *node;\n");
            src = cat3(pre2, cut, "return 0;\n}\n");
            must_compile(cc, "MPI example", src);
            free(fn);
            free(pre);
            free(pre2);
            free(src);
            mpi = true;
        } else {
            FAIL("a C block of the README this test does not know:\n%s", b);
        }
    }
    for (i = 0; i < ncpp; i++) {
        if (strstr(cpp[i], "template <class F>")) {
            char *src = cat3("#include \"safeverbs.h\"\n#include <type_traits>\n", cpp[i], "");
            if (have("g++")) must_compile("g++ -std=c++11 -x c++", "C++ scope template", src);
            free(src);
            scope = true;
        }
    }
    CHECK(use_it && peers && version && mpi && scope);
    for (i = 0; i < nc; i++) free(c[i]);
    for (i = 0; i < ncpp; i++) free(cpp[i]);
    free(try_line);
    free(readme);
}

/* The README's "Use it" example, run: its lines as the README has them, but for the device (the
   fake's first, as NULL says) and the endpoint exchange it leaves out (the channel connected to
   itself, the endpoint given back). Its printf is caught. */
static char readme_out[128];
static int readme_printf(const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(readme_out, sizeof readme_out, fmt, ap);
    va_end(ap);
    return n;
}
#define printf readme_printf
#define sfv_open_device(name, out) sfv_open_device(NULL, out) /* ("rxe0": the fake has fake0) */
static int readme_use_it(void) {
    /* Every call whose result must not be ignored is SFV_NODISCARD (From C++ below): test it. */
#define TRY(call) do { if ((call) != SFV_OK) { fprintf(stderr, "%s\n", sfv_last_error()->message); return 1; } } while (0)
    sfv_context *ctx; sfv_pd *pd; sfv_mr *mr; sfv_channel *ch;
    sfv_endpoint me, peer;
    static char buf[4096];

    TRY(sfv_open_device("rxe0", &ctx));  /* NULL: the first device; the message of a failure says */
    TRY(sfv_alloc_pd(ctx, &pd));         /* why, and sfv_last_error() keeps errno and verb per thread */
    TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));          /* local write only: safe */
    sfv_channel_desc desc = SFV_ZERO_INIT;                     /* zero = every default */
    TRY(sfv_create_channel(pd, &desc, &ch));
    TRY(sfv_channel_endpoint(ch, &me));  /* send sfv_endpoint_encode(&me, ...) to the peer,  */
    /* ... receive its 32 bytes into `peer` with sfv_endpoint_decode ...                  */
    peer = me; /* (the test's line: loopback) */
    TRY(sfv_channel_handshake(ch, &peer));

    sfv_scatter_element in  = sfv_mr_scatter_element(mr, buf + 2048, 2048); /* NIC writes */
    sfv_gather_element  out = sfv_mr_gather_element(mr, buf, 5);            /* NIC reads  */
    sfv_pending rx;
    TRY(sfv_channel_post_receive(ch, &in, 1, &rx)); /* a gather list here: a compile error in C++
                                                       and with -Werror, a warning in C (gcc 12, clang 14) */
    TRY(sfv_channel_send(ch, &out, 1, NULL));       /* blocks, with a deadline               */
    sfv_work_completion wc;
    if (sfv_pending_wait(&rx, -1, &wc) == SFV_OK)
        printf("got %u bytes\n", wc.byte_len);

    sfv_destroy_channel(ch); sfv_dereg_mr(mr);     /* any order: children keep parents alive */
    sfv_dealloc_pd(pd); sfv_close_device(ctx);
#undef TRY
    return 0;
}
#undef sfv_open_device
#undef printf

/* Promise (README, "Use it"): the example moves its 5 bytes and its teardown, in the order it
   has, leaves nothing behind; and the README still holds this code (the block above is its copy:
   every line of it but the test's own is in the README's "Use it" block). */
static void t_readme_use_it_runs(void) {
    char *readme = slurp("README.md"), *c[16];
    size_t nc = fenced_blocks(readme, "c", c, 16), i;
    const char *block = NULL;
    static const char *lines[] = {
        "TRY(sfv_open_device(\"rxe0\", &ctx));", "TRY(sfv_alloc_pd(ctx, &pd));",
        "TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));", "TRY(sfv_create_channel(pd, &desc, &ch));",
        "TRY(sfv_channel_endpoint(ch, &me));", "TRY(sfv_channel_handshake(ch, &peer));",
        "TRY(sfv_channel_post_receive(ch, &in, 1, &rx));", "TRY(sfv_channel_send(ch, &out, 1, NULL));",
        "if (sfv_pending_wait(&rx, -1, &wc) == SFV_OK)", "sfv_destroy_channel(ch); sfv_dereg_mr(mr);",
        "sfv_dealloc_pd(pd); sfv_close_device(ctx);",
    };
    for (i = 0; i < nc; i++)
        if (strstr(c[i], "sfv_open_device(")) block = c[i];
    CHECK(block);
    for (i = 0; i < COUNT_OF(lines); i++)
        if (!strstr(block, lines[i])) FAIL("the README's \"Use it\" has no line `%s`", lines[i]);
    CHECK_EQ(readme_use_it(), 0);
    CHECK(strcmp(readme_out, "got 5 bytes\n") == 0);
    CHECK_EQ(fk_live_total(), 0);
    for (i = 0; i < nc; i++) free(c[i]);
    free(readme);
}

/* The number in `text` after the first `key` (a table row's value), as an integer. */
static long number_after(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) FAIL("no `%s`", key);
    p += strlen(key);
    while (*p && (*p < '0' || *p > '9')) p++;
    return strtol(p, NULL, 10);
}

/* With a thousands comma, as the README writes it. */
static void thousands(long v, char *out, size_t len) {
    if (v >= 1000) snprintf(out, len, "%ld,%03ld", v / 1000, v % 1000);
    else snprintf(out, len, "%ld", v);
}

/* `text` with every run of whitespace (and a C comment's line-leading spaces) one space. */
static char *squeeze(const char *text) {
    char *s = strdup(text), *w = s;
    const char *r;
    CHECK(s);
    for (r = text; *r; r++) {
        if (*r == ' ' || *r == '\n' || *r == '\t') {
            if (w != s && w[-1] != ' ') *w++ = ' ';
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
    return s;
}

/* Promise (README, "Buffers the NIC owns are tracked", and the header's >>impl inflight): the
   tracking's cost quoted is what `make bench` measured (stage 5, bench/RESULTS.md). Before: both
   said 1,604 instructions with tracking and 881 without (1.82x); the run in bench/RESULTS.md,
   the one the README's other figures come from, says 1879 and 834 (2.25x). */
static void t_readme_inflight_cost_is_results(void) {
    char *results = slurp("bench/RESULTS.md"), *readme = slurp("README.md"), *header = slurp("safeverbs.h");
    char *r = squeeze(readme), *h = squeeze(header), on[32], off[32], want[256];
    long ton = number_after(results, "| debug, tracking on |"), toff = number_after(results, "| debug, tracking off (-DSFV_TRACK_INFLIGHT=0) |");
    CHECK(ton > 0 && toff > 0);
    thousands(ton, on, sizeof on);
    thousands(toff, off, sizeof off);
    snprintf(want, sizeof want, "takes %s instructions with tracking and %s without", on, off);
    if (!strstr(r, want)) FAIL("README.md does not say \"%s\" (bench/RESULTS.md)", want);
    snprintf(want, sizeof want, "%s instructions per iteration with tracking, %s with SFV_TRACK_INFLIGHT 0 (%.2fx;", on, off,
             (double)ton / (double)toff);
    if (!strstr(h, want)) FAIL("safeverbs.h does not say \"%s\" (bench/RESULTS.md)", want);
    free(r);
    free(h);
    free(results);
    free(readme);
    free(header);
}

/* Promise (README, "How it is tested": the fake-NIC tests run "plain and under ASan/UBSan (N of
   the widest once more under clang's unsigned-integer-overflow check"): N is the Makefile's
   UIO_TESTS. Before: "ten", where the Makefile (and so make check-nodev) runs twelve. */
static void t_readme_uio_count_is_makefile(void) {
    static const char *words[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                                  "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                                  "eighteen", "nineteen", "twenty"};
    char *make = slurp("Makefile"), *readme = slurp("README.md"), *r = squeeze(readme), *line, want[160];
    const char *p;
    size_t n = 0;
    bool in_word = false;
    line = line_starting(make, "UIO_TESTS :=");
    for (p = line + strlen("UIO_TESTS :="); *p; p++) { /* (its words: the tests) */
        bool w = *p != ' ' && *p != '\t' && *p != '\n';
        if (w && !in_word) n++;
        in_word = w;
    }
    CHECK(n > 0 && n < COUNT_OF(words));
    snprintf(want, sizeof want, "(%s of the widest once more under clang's unsigned-integer-overflow check", words[n]);
    if (!strstr(r, want)) FAIL("README.md does not say \"%s\" (the Makefile's UIO_TESTS has %zu)", want, n);
    free(line);
    free(r);
    free(readme);
    free(make);
}

static const harness_test TESTS[] = {
    TEST(t_readme_examples_compile, 120),
    TEST(t_readme_use_it_runs, 30),
    TEST(t_readme_inflight_cost_is_results, 10),
    TEST(t_readme_uio_count_is_makefile, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
