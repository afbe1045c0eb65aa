/* bench_report.c - turns bench/run.sh's measurements into bench/RESULTS.md and the data files
   bench/plot.gp draws.

       build/bench_report RESULTS_CSV META_TXT OUT_MD DATA_DIR

   RESULTS_CSV: test,op,variant,size,impl,metric,value (a header line first); impl is sfv, raw
   or perftest. META_TXT: key=value lines about the machine and the run. Writes OUT_MD (tables
   per measurement, ratios safeverbs/raw and safeverbs/perftest, every target marked met or
   NOT met, a summary of the targets first) and DATA_DIR/lat_<op>.dat, DATA_DIR/bw_<op>.dat
   (size, then safeverbs, raw, perftest; "?" where a figure is missing). Missing figures show
   as "-" and their targets as "no data": the report never invents a number.

   Its other modes read the tools' output for bench/run.sh, which only runs programs and hands
   over their files; ROW is a CSV line's first five fields (test,op,variant,size,impl), and
   each prints ROW,metric,value lines (iters: a number), or exits 1 saying what is missing:

       bench_report perftest FILE ROW ITERS       latency (ROW's test lat) or bandwidth figures
                                                  of an ib_*_lat / ib_*_bw client's output
       bench_report rate BEFORE AFTER ROW ITERS   ib_send_bw's message rate: the mean of two runs
       bench_report iters CSV ROW SECONDS         iterations for a perftest run of about SECONDS,
                                                  from ROW's figure (impl raw) already in CSV
       bench_report callgrind ROW N1 N2 BATCH BASE1 BASE2
                                                  instructions per work request from
                                                  callgrind_annotate's BASE.incl and BASE.self
                                                  (--inclusive=yes / no) of runs of N1 and N2
                                                  (N1 0, BASE1 -: one run, zeroed after warm-up)
       bench_report peerfit ROW FILE              a peer's instructions per message: FILE's lines
                                                  "N IR POLLS [TICKS]" (callgrind runs), fitted
                                                  as IR = a N + b POLLS [+ t TICKS] + c
                                                  (bench/peers.sh)
       bench_report syscalls ROW N FILE1 FILE2    system calls per operation from strace -c of
                                                  runs of N and 2N operations
       bench_report hostload FILE                 the host_load= meta line from the host's
                                                  samples ("load1 qemu_processes" lines) */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec {
    char test[16], op[16], variant[40], impl[16], metric[64];
    long size;
    double value;
} rec;

static rec *g_recs;
static size_t g_nrecs;
static char g_meta[64][2][512];
static int g_nmeta;

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "bench_report: %s%s\n", msg, arg ? arg : "");
    exit(1);
}

static void load_csv(const char *path) {
    char line[512];
    size_t cap = 0;
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read ", path);
    while (fgets(line, sizeof line, f)) {
        rec r;
        char *field[7], *p = line, *end;
        int n = 0;
        line[strcspn(line, "\r\n")] = 0;
        while (n < 7) {
            field[n++] = p;
            p = strchr(p, ',');
            if (!p) break;
            *p++ = 0;
        }
        if (n != 7) continue; /* the header or a damaged line */
        memset(&r, 0, sizeof r);
        r.size = strtol(field[3], &end, 10);
        if (*end) continue;
        r.value = strtod(field[6], &end);
        if (*end || end == field[6] || !isfinite(r.value)) continue; /* perftest can print "inf" */
        snprintf(r.test, sizeof r.test, "%s", field[0]);
        snprintf(r.op, sizeof r.op, "%s", field[1]);
        snprintf(r.variant, sizeof r.variant, "%s", field[2]);
        snprintf(r.impl, sizeof r.impl, "%s", field[4]);
        snprintf(r.metric, sizeof r.metric, "%s", field[5]);
        if (g_nrecs == cap) {
            cap = cap ? 2 * cap : 256;
            g_recs = realloc(g_recs, cap * sizeof *g_recs);
            if (!g_recs) die("out of memory", NULL);
        }
        g_recs[g_nrecs++] = r;
    }
    fclose(f);
}

static void load_meta(const char *path) {
    char line[512];
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read ", path);
    while (g_nmeta < 64 && fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        line[strcspn(line, "\r\n")] = 0;
        if (!eq) continue;
        *eq = 0;
        snprintf(g_meta[g_nmeta][0], sizeof g_meta[0][0], "%s", line);
        snprintf(g_meta[g_nmeta][1], sizeof g_meta[0][1], "%s", eq + 1);
        g_nmeta++;
    }
    fclose(f);
}

static const char *meta(const char *key) {
    for (int i = g_nmeta - 1; i >= 0; i--)
        if (strcmp(g_meta[i][0], key) == 0) return g_meta[i][1][0] ? g_meta[i][1] : "unknown";
    return "unknown";
}

/* The figure, NAN if there is none (the last one wins). */
static double fig(const char *test, const char *op, const char *variant, long size, const char *impl, const char *metric) {
    double v = NAN;
    for (size_t i = 0; i < g_nrecs; i++) {
        const rec *r = &g_recs[i];
        if (r->size == size && !strcmp(r->test, test) && !strcmp(r->op, op) && !strcmp(r->variant, variant) &&
            !strcmp(r->impl, impl) && !strcmp(r->metric, metric))
            v = r->value;
    }
    return v;
}

/* The sizes measured for (test, op, variant), ascending. */
static int sizes_of(const char *test, const char *op, const char *variant, long *out, int max) {
    int n = 0;
    for (size_t i = 0; i < g_nrecs; i++) {
        const rec *r = &g_recs[i];
        int j;
        if (strcmp(r->test, test) || strcmp(r->op, op) || strcmp(r->variant, variant)) continue;
        for (j = 0; j < n && out[j] != r->size; j++) {}
        if (j == n && n < max) out[n++] = r->size;
    }
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && out[b - 1] > out[b]; b--) {
            long t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

/* ---- formatting ---------------------------------------------------------------------------- */
static char g_ring[32][48];
static int g_ringi;
static char *slot(void) { return g_ring[g_ringi++ % 32]; }

static const char *num(double v, int decimals) {
    char *s = slot();
    if (isnan(v)) return "-";
    snprintf(s, 48, "%.*f", decimals, v);
    return s;
}
/* Three significant digits at least, never in exponent form. */
static const char *sig(double v) {
    double a = fabs(v);
    return num(v, isnan(v) ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 2 : 3);
}
static const char *ratio(double a, double b) { return (isnan(a) || isnan(b) || b == 0) ? "-" : num(a / b, 3); }
/* The ratio a target is judged on: the paired one (A-B-B-A rounds) when there is one. */
static double judged(double paired, double a, double b) {
    if (!isnan(paired)) return paired;
    return (isnan(a) || isnan(b) || b == 0) ? NAN : a / b;
}
static const char *bytes(long n) {
    char *s = slot();
    if (n >= 1048576 && n % 1048576 == 0) snprintf(s, 48, "%ld MiB", n / 1048576);
    else if (n >= 1024 && n % 1024 == 0) snprintf(s, 48, "%ld KiB", n / 1024);
    else snprintf(s, 48, "%ld B", n);
    return s;
}

/* ---- targets ----------------------------------------------------------------------------- */
typedef struct target {
    const char *name, *rule;
    int met, missed, nodata;
    double worst;       /* the ratio furthest on the wrong side */
    char worst_at[96];
    bool upper;         /* a ceiling (ratio <= limit) or a floor (ratio >= limit) */
    double limit;
} target;

enum { T_MEDIAN, T_P99, T_BW, T_RATE1, T_RATEB, T_IR, T_IRH, T_IR_INJ, T_PEER_IR, T_PEER_INJ, T_PEER_LAT, T_CONNECT, T_IR_PEERS, T_ALLOC,
       T_SYSCALL, T_COUNT };
static target g_t[T_COUNT] = {
    {"latency median, safeverbs/raw", "<= 1.02", 0, 0, 0, NAN, "", true, 1.02},
    {"latency p99, safeverbs/raw", "<= 1.10", 0, 0, 0, NAN, "", true, 1.10},
    {"throughput, safeverbs/raw", ">= 0.98", 0, 0, 0, NAN, "", false, 0.98},
    {"message rate one per post, safeverbs/raw", ">= 0.95", 0, 0, 0, NAN, "", false, 0.95},
    {"batched message rate 64 B, safeverbs/ib_send_bw default", ">= 1.5", 0, 0, 0, NAN, "", false, 1.5},
    {"user-space instructions per op, safeverbs/raw", "<= 1.2", 0, 0, 0, NAN, "", true, 1.2},
    {"user-space instructions per op, safeverbs/hand-tracked raw", "<= 1.10", 0, 0, 0, NAN, "", true, 1.10},
    {"user-space instructions per op, safeverbs inject + receive/raw (counting completions)", "<= 1", 0, 0, 0, NAN, "", true, 1.0},
    {"instructions per message, safeverbs/peer (perftest, qperf: signalled path)", "< 1", 0, 0, 0, NAN, "", true, 0.9999},
    {"instructions per message, safeverbs inject/peer (UCX am_short, libfabric inject)", "< 1", 0, 0, 0, NAN, "", true, 0.9999},
    {"latency, peer/safeverbs, median of per-round ratios (a tie if the spread holds 1)", "not < 1", 0, 0, 0, NAN, "", false, 1.0},
    {"node connect time, t(16 ranks)/t(2 ranks) (no worse than linear)", "<= 8", 0, 0, 0, NAN, "", true, 8},
    {"instructions per op, 64 peers / 1 peer (flat in peers)", "<= 1.05", 0, 0, 0, NAN, "", true, 1.05},
    {"heap allocations per op (safeverbs)", "= 0", 0, 0, 0, NAN, "", true, 0},
    {"system calls per op, safeverbs - raw", "= 0", 0, 0, 0, NAN, "", true, 0},
};

static bool g_tie; /* T_PEER_LAT: the spread of the per-round ratios holds 1 */
/* Judges one ratio (or value) against target t; returns the table cell. */
static const char *judge(int t, double v, const char *where) {
    target *g = &g_t[t];
    bool ok;
    if (isnan(v)) {
        g->nodata++;
        return "no data";
    }
    ok = g->upper ? v <= g->limit + 1e-9 : v >= g->limit - 1e-9;
    if (t == T_PEER_LAT) ok = g_tie || v >= 1.0; /* a peer ahead only outside the spread */
    if (t == T_SYSCALL) ok = fabs(v) < 0.005;
    if (ok) g->met++;
    else g->missed++;
    if (isnan(g->worst) || (t == T_SYSCALL ? fabs(v) > fabs(g->worst) : g->upper ? v > g->worst : v < g->worst)) {
        g->worst = v;
        snprintf(g->worst_at, sizeof g->worst_at, "%s", where);
    }
    return ok ? "met" : "**NOT met**";
}

/* ---- sections -------------------------------------------------------------------------------- */
static const char *const LAT_OPS[] = {"send", "write", "write_imm", "read"};
static const char *const BW_OPS[] = {"write", "read", "send"};

static void write_dat(const char *dir, const char *name, const char *test, const char *op, const char *variant,
                      const char *m1, const char *m2) {
    char path[1024];
    long sz[64];
    int n = sizes_of(test, op, variant, sz, 64);
    const char *impls[3] = {"sfv", "raw", "perftest"};
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    if (!f) die("cannot write ", path);
    fprintf(f, "# size sfv raw perftest (%s)%s%s\n", m1, m2 ? ", then " : "", m2 ? m2 : "");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%ld", sz[i]);
        for (int k = 0; k < 3; k++) {
            double v = fig(test, op, variant, sz[i], impls[k], m1);
            if (isnan(v)) fprintf(f, " ?");
            else fprintf(f, " %g", v);
        }
        for (int k = 0; m2 && k < 3; k++) {
            double v = fig(test, op, variant, sz[i], impls[k], m2);
            if (isnan(v)) fprintf(f, " ?");
            else fprintf(f, " %g", v);
        }
        fprintf(f, "\n");
    }
    fclose(f);
}

static void latency_section(FILE *o) {
    fprintf(o, "## Latency (ping-pong, busy polling)\n\n"
               "Two processes, rxe1 (client) <-> rxe0 (server), one work request per post, every one signaled. "
               "send: the server echoes each send. write: RDMA write into the peer's buffer, the peer spins on the "
               "last byte and writes back (as ib_write_lat). write_imm: RDMA write with immediate, the peer's receive "
               "completion is the signal (perftest has no such latency test). read: RDMA read, the peer stays idle. "
               "Half the round trip for send and write (perftest's convention), the whole round trip for read. "
               "perftest's t_typical is its median. Microseconds.\n\n"
               "safeverbs and raw verbs run in the same two processes after a warm-up, in short runs (about 20 ms) "
               "alternating A-B-B-A for the whole measurement. *sfv/raw* divides the medians of all samples; "
               "*paired* is the median over the A-B-B-A rounds of (A1 + A2) / (B1 + B2) of the runs' medians, which "
               "cancels the machine's drift (its speed changes by tens of percent within seconds when other guests "
               "run) and is what the median target is judged on. p99 is judged on all samples.\n\n");
    for (size_t k = 0; k < sizeof LAT_OPS / sizeof *LAT_OPS; k++) {
        const char *op = LAT_OPS[k];
        long sz[64];
        int n = sizes_of("lat", op, "busy", sz, 64);
        if (!n) continue;
        fprintf(o, "### %s\n\n| size | figure | safeverbs | raw verbs | perftest | sfv/raw | paired | sfv/perftest | target (sfv/raw) |\n"
                   "|---:|---|---:|---:|---:|---:|---:|---:|---|\n", op);
        for (int i = 0; i < n; i++) {
            static const char *const metrics[3] = {"median_us", "p99_us", "mean_us"};
            static const char *const names[3] = {"median", "p99", "mean"};
            for (int m = 0; m < 3; m++) {
                double s = fig("lat", op, "busy", sz[i], "sfv", metrics[m]);
                double r = fig("lat", op, "busy", sz[i], "raw", metrics[m]);
                double p = fig("lat", op, "busy", sz[i], "perftest", metrics[m]);
                double pr = m == 0 ? fig("lat", op, "busy", sz[i], "sfv", "median_ratio_paired") : NAN;
                char where[96], cell[64] = "";
                snprintf(where, sizeof where, "%s %s", op, bytes(sz[i]));
                if (m < 2)
                    snprintf(cell, sizeof cell, "%s %s", m == 0 ? "<= 1.02" : "<= 1.10",
                             judge(m == 0 ? T_MEDIAN : T_P99, judged(pr, s, r), where));
                fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m == 0 ? bytes(sz[i]) : "", names[m], sig(s),
                        sig(r), sig(p), ratio(s, r), num(pr, 3), ratio(s, p), cell);
            }
        }
        fprintf(o, "\nSamples (runs) per implementation and size: ");
        for (int i = 0; i < n; i++)
            fprintf(o, "%s%s %s (%s)", i ? ", " : "", bytes(sz[i]), num(fig("lat", op, "busy", sz[i], "sfv", "iters"), 0),
                    num(fig("lat", op, "busy", sz[i], "sfv", "runs"), 0));
        fprintf(o, ".\n\n");
    }
}

static void throughput_section(FILE *o) {
    fprintf(o, "## Throughput (128 work requests in flight)\n\n"
               "The client keeps 128 work requests in flight, one per post, every one signaled; a send's server keeps "
               "512 receives posted. MiB/s (2^20 bytes), from the first post to the last completion of each run; "
               "safeverbs and raw alternate A-B-B-A in runs of about a second (*paired*: the median over the rounds of "
               "(A1 + A2) / (B1 + B2) of the runs' rates, what the target is judged on). perftest: ib_write_bw, "
               "ib_read_bw, ib_send_bw with -s and -n, otherwise their defaults (tx depth 128, reads in flight: the "
               "device's maximum). The guest's netdev_max_backlog is raised to 16384: a 1 MiB read response is 1024 "
               "packets, and at the default 1000 the drops stall reads in retries (for perftest as for us).\n\n");
    for (size_t k = 0; k < sizeof BW_OPS / sizeof *BW_OPS; k++) {
        const char *op = BW_OPS[k];
        long sz[64];
        int n = sizes_of("bw", op, "stream", sz, 64);
        if (!n) continue;
        fprintf(o, "### %s\n\n| size | safeverbs | raw verbs | perftest | sfv/raw | paired | sfv/perftest | target >= 0.98 |\n"
                   "|---:|---:|---:|---:|---:|---:|---:|---|\n", op);
        for (int i = 0; i < n; i++) {
            double s = fig("bw", op, "stream", sz[i], "sfv", "mib_s");
            double r = fig("bw", op, "stream", sz[i], "raw", "mib_s");
            double p = fig("bw", op, "stream", sz[i], "perftest", "mib_s");
            char where[96];
            snprintf(where, sizeof where, "%s %s", op, bytes(sz[i]));
            double pr = fig("bw", op, "stream", sz[i], "sfv", "rate_ratio_paired");
            fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", bytes(sz[i]), sig(s), sig(r), sig(p), ratio(s, r),
                    num(pr, 3), ratio(s, p), judge(T_BW, judged(pr, s, r), where));
        }
        fprintf(o, "\n");
    }
}

/* The message-rate runs' variant names: batches, and batches with inline data. */
static void rate_variants(char vb[40], char vi[40]) {
    snprintf(vb, 40, "batch%s", meta("rate_batch"));
    snprintf(vi, 40, "batch%s-inline", meta("rate_batch"));
}

static void rate_section(FILE *o) {
    const char *batch = meta("rate_batch"), *inl = meta("rate_inline");
    char vb[40], vi[40];
    long sizes[2] = {8, 64};
    rate_variants(vb, vi);
    fprintf(o, "## Message rate (small sends)\n\n"
               "Sends with 128 in flight, the server re-posting receives (512 posted). *one per post*: one signaled "
               "work request per post call (safeverbs: sfv_channel_post_send; the server re-posts receives one by "
               "one). *batch %s*: sfv_channel_post_send_batch of %s work requests, one doorbell, only the last "
               "signaled, receives re-posted %s at a time with sfv_channel_post_receive_batch (raw: linked lists "
               "the same way). *+ inline*: the same with max_inline_data = %s, so the sends carry their data in the "
               "work request. Completions polled 16 at a time everywhere; runs of about 250 ms alternate A-B-B-A "
               "(*paired* as for throughput). perftest: ib_send_bw with its defaults, run before and after each of "
               "ours; each row's figure is the mean of the two runs beside it (each in parentheses) "
               "(one work request per post, a completion every 100). Thousands of messages per second.\n\n"
               "| size | posting | safeverbs | raw verbs | perftest (ib_send_bw default) | sfv/raw | paired | sfv/perftest | target |\n"
               "|---:|---|---:|---:|---:|---:|---:|---:|---|\n",
            batch, batch, batch, inl);
    for (int i = 0; i < 2; i++) {
        const char *variants[3] = {"post1", vb, vi};
        char names[3][64];
        snprintf(names[0], sizeof names[0], "one per post");
        snprintf(names[1], sizeof names[1], "batch %s", batch);
        snprintf(names[2], sizeof names[2], "batch %s + inline", batch);
        for (int v = 0; v < 3; v++) {
            double s = fig("bw", "send", variants[v], sizes[i], "sfv", "kmsg_s");
            double r = fig("bw", "send", variants[v], sizes[i], "raw", "kmsg_s");
            double pr = fig("bw", "send", variants[v], sizes[i], "sfv", "rate_ratio_paired");
            double p = fig("bw", "send", variants[v], sizes[i], "perftest", "kmsg_s");
            double b4 = fig("bw", "send", variants[v], sizes[i], "perftest", "kmsg_s_before");
            double af = fig("bw", "send", variants[v], sizes[i], "perftest", "kmsg_s_after");
            char where[96], cell[64] = "-";
            snprintf(where, sizeof where, "send %s, %s", bytes(sizes[i]), names[v]);
            if (v == 0)
                snprintf(cell, sizeof cell, "sfv/raw >= 0.95 %s", judge(T_RATE1, judged(pr, s, r), where));
            else if (sizes[i] == 64)
                snprintf(cell, sizeof cell, "sfv/perftest >= 1.5 %s", judge(T_RATEB, isnan(s) || isnan(p) ? NAN : s / p, where));
            char ptcell[96];
            if (isnan(b4) || isnan(af)) snprintf(ptcell, sizeof ptcell, "%s", sig(p));
            else snprintf(ptcell, sizeof ptcell, "%s (%s, %s)", sig(p), sig(b4), sig(af));
            fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", bytes(sizes[i]), names[v], sig(s), sig(r), ptcell,
                    ratio(s, r), num(pr, 3), ratio(s, p), cell);
        }
    }
    fprintf(o, "\n");
}

/* Repeatability: each measurement's A-B-B-A rounds split in two halves, taken as two runs. For
   one kind of measurement: how far the halves differ, |half1 / half2 - 1|, median and worst over
   its points, for each figure. */
typedef struct spread {
    double d[256];
    int n;
} spread;
static void spread_add(spread *sp, double a, double b) {
    if (!isnan(a) && !isnan(b) && b != 0 && sp->n < 256) sp->d[sp->n++] = fabs(a / b - 1);
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static const char *spread_cell(spread *sp) {
    char *c = slot();
    if (!sp->n) return "-";
    qsort(sp->d, (size_t)sp->n, sizeof *sp->d, cmp_double);
    snprintf(c, 48, "%.1f%% / %.1f%%", 100 * (sp->n % 2 ? sp->d[sp->n / 2] : (sp->d[sp->n / 2 - 1] + sp->d[sp->n / 2]) / 2),
             100 * sp->d[sp->n - 1]);
    return c;
}
static void repeat_row(FILE *o, const char *label, const char *test, const char *op, const char *variant) {
    long sz[64];
    int n = sizes_of(test, op, variant, sz, 64);
    spread s = {{0}, 0}, r = {{0}, 0}, p = {{0}, 0};
    for (int i = 0; i < n; i++) {
        spread_add(&s, fig(test, op, variant, sz[i], "sfv", "half1"), fig(test, op, variant, sz[i], "sfv", "half2"));
        spread_add(&r, fig(test, op, variant, sz[i], "raw", "half1"), fig(test, op, variant, sz[i], "raw", "half2"));
        spread_add(&p, fig(test, op, variant, sz[i], "sfv", "paired_half1"), fig(test, op, variant, sz[i], "sfv", "paired_half2"));
    }
    if (!s.n && !r.n && !p.n) return;
    fprintf(o, "| %s | %d | %s | %s | %s |\n", label, n, spread_cell(&s), spread_cell(&r), spread_cell(&p));
}
static void repeat_section(FILE *o) {
    char label[96], vb[40], vi[40];
    fprintf(o, "## Repeatability\n\n"
               "Each measurement above is many short runs in A-B-B-A rounds. Here its rounds are split in two "
               "halves, as if it had been run twice in a row: how far the two halves differ, |half 1 / half 2 - 1| "
               "of the median latency or the rate (for *paired*: of the paired sfv/raw ratio), the median and the "
               "worst over the measurement's sizes. A target can be told met from missed only where this is well "
               "below the margin it allows (2%% for latency medians and throughput). The halves come from the same "
               "minutes; on this shared machine runs minutes apart can differ more than the halves do.\n\n"
               "| measurement | sizes | safeverbs (median / worst) | raw verbs | paired sfv/raw |\n"
               "|---|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < sizeof LAT_OPS / sizeof *LAT_OPS; k++) {
        snprintf(label, sizeof label, "latency, %s", LAT_OPS[k]);
        repeat_row(o, label, "lat", LAT_OPS[k], "busy");
    }
    for (size_t k = 0; k < sizeof BW_OPS / sizeof *BW_OPS; k++) {
        snprintf(label, sizeof label, "throughput, %s", BW_OPS[k]);
        repeat_row(o, label, "bw", BW_OPS[k], "stream");
    }
    rate_variants(vb, vi);
    repeat_row(o, "message rate, one per post", "bw", "send", "post1");
    snprintf(label, sizeof label, "message rate, batch %s", meta("rate_batch"));
    repeat_row(o, label, "bw", "send", vb);
    snprintf(label, sizeof label, "message rate, batch %s + inline", meta("rate_batch"));
    repeat_row(o, label, "bw", "send", vi);
    fprintf(o, "\n");
}

static void wait_section(FILE *o) {
    long sz[16];
    int n = sizes_of("lat", "send", "event", sz, 16);
    if (!n) return;
    fprintf(o, "## Waiting: SFV_WAIT_EVENT against busy polling\n\n"
               "Send ping-pong as above. *event*: safeverbs sleeps on the channel's completion channel "
               "(SFV_WAIT_EVENT); raw arms the CQ, polls it once more, then poll(2)s the completion channel's fd "
               "with the deadline, takes and acknowledges the event (the same deadline-bounded wait). *busy*: the "
               "figures of the latency table. CPU: user + system time of the client per round trip.\n\n"
               "| size | impl | busy median (us) | event median (us) | event/busy | busy CPU (us/op) | event CPU (us/op) | event p99 (us) |\n"
               "|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            const char *impl = k ? "raw" : "sfv";
            double b = fig("lat", "send", "busy", sz[i], impl, "median_us");
            double e = fig("lat", "send", "event", sz[i], impl, "median_us");
            fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", k ? "" : bytes(sz[i]), k ? "raw verbs" : "safeverbs",
                    sig(b), sig(e), ratio(e, b), sig(fig("lat", "send", "busy", sz[i], impl, "cpu_us_per_op")),
                    sig(fig("lat", "send", "event", sz[i], impl, "cpu_us_per_op")),
                    sig(fig("lat", "send", "event", sz[i], impl, "p99_us")));
        }
        fprintf(o, "| | sfv/raw | %s | %s | | | | |\n",
                ratio(fig("lat", "send", "busy", sz[i], "sfv", "median_us"), fig("lat", "send", "busy", sz[i], "raw", "median_us")),
                ratio(fig("lat", "send", "event", sz[i], "sfv", "median_us"), fig("lat", "send", "event", sz[i], "raw", "median_us")));
    }
    fprintf(o, "\n");
}

/* Where the instructions go, function by function (callgrind's own counts per work request,
   safeverbs.h's functions and the harness's), for safeverbs and the hand-tracked loop. */
static void cost_functions(FILE *o) {
    char variants[2][40];
    snprintf(variants[0], sizeof variants[0], "batch1");
    snprintf(variants[1], sizeof variants[1], "batch%s", meta("rate_batch"));
    fprintf(o, "Where the instructions go, function by function (each function's own instructions per work request, "
               "the functions inlined into it included; safeverbs.h and the harness; the rest is the rxe provider, "
               "libibverbs and libc, alike for all):\n\n"
               "| loop | safeverbs: function (own instructions per op) | hand-tracked raw: function |\n|---|---|---|\n");
    for (int v = 0; v < 2; v++) {
        const char *impls[2] = {"sfv", "hand"};
        char cells[2][2048];
        for (int m = 0; m < 2; m++) {
            const rec *pick[64];
            int np = 0;
            size_t len = 0;
            cells[m][0] = 0;
            for (size_t i = 0; i < g_nrecs && np < 64; i++) {
                const rec *r = &g_recs[i];
                if (!strcmp(r->test, "cost") && !strcmp(r->variant, variants[v]) && !strcmp(r->impl, impls[m]) &&
                    !strncmp(r->metric, "fn_", 3))
                    pick[np++] = r;
            }
            for (int a = 1; a < np; a++) /* the largest first */
                for (int b = a; b > 0 && pick[b - 1]->value < pick[b]->value; b--) {
                    const rec *t = pick[b];
                    pick[b] = pick[b - 1];
                    pick[b - 1] = t;
                }
            for (int i = 0; i < np && len + 100 < sizeof cells[m]; i++)
                len += (size_t)snprintf(cells[m] + len, sizeof cells[m] - len, "%s`%s` %s", i ? ", " : "",
                                        pick[i]->metric + 3, num(pick[i]->value, 1));
            if (!np) snprintf(cells[m], sizeof cells[m], "-");
        }
        fprintf(o, "| %s | %s | %s |\n", v ? variants[1] : "one per post", cells[0], cells[1]);
    }
    fprintf(o, "\n");
}

static void cost_section(FILE *o) {
    static const char *const steps[5] = {"post_recv", "post_send", "poll_send", "poll_recv", "per_op"};
    static const char *const names[5] = {"post a receive", "post a send", "poll the send's completion",
                                         "poll the receive's completion", "**one send + one receive, total**"};
    const char *batch = meta("rate_batch");
    char variants[2][40];
    snprintf(variants[0], sizeof variants[0], "batch1");
    snprintf(variants[1], sizeof variants[1], "batch%s", batch);
    fprintf(o, "## User-space instructions per operation (callgrind)\n\n"
               "One process, a channel (raw: a QP) connected to itself on one device, 64-byte messages: post a "
               "receive, post a send, let the completions arrive (a sleep, outside the counted code), poll the send's "
               "completion, then the receive's. Each step is a function of the harness; valgrind --tool=callgrind "
               "--toggle-collect='cost_*' counts the instructions inside them, the library's, libibverbs', the rxe "
               "provider's and libc's included (the kernel's not). One run per loop, its counters zeroed after a "
               "warm-up (CALLGRIND_ZERO_STATS), its count over its N iterations (N a multiple of every period of the "
               "loops: signals, reaps), so start-up is excluded and the counts repeat exactly. *batch %s*: the same "
               "with batches of %s "
               "(per work request).\n\n"
               "*raw verbs* counts completions only (what the throughput loops do). *hand-tracked raw* is raw verbs "
               "with the least a careful C programmer adds to get the guarantees safeverbs gives (bench/sfv_bench.c, "
               "\"hand-tracked raw verbs\"): a record per request that wr_id indexes, where the completion's status "
               "and byte_len are stored and the waiter checks its own; a channel state (the first failed completion "
               "breaks the channel); a capacity check per post; a sequence number per request (a stale ticket is "
               "refused). The fair target is safeverbs against that loop.\n\n"
               "*safeverbs* is the default build (the library's functions called, as from another file); "
               "*static* is the same loop with SAFEVERBS_STATIC, where the data path's public functions are inlined "
               "into the harness's loop as the hand-tracked loop's are (bench/sfv_bench_static). The targets are "
               "judged on both.\n\n"
               "| loop | step | safeverbs | static | raw verbs | hand-tracked raw | sfv/raw | sfv/hand | static/hand | target sfv/raw <= 1.2 | target sfv/hand <= 1.10 (default, static) |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
            batch, batch);
    for (int v = 0; v < 2; v++) {
        for (int k = 0; k < 5; k++) {
            char metric[32], where[96], where_st[112], both[64] = "";
            double s, st, r, h;
            snprintf(metric, sizeof metric, "ir_%s", steps[k]);
            s = fig("cost", "send", variants[v], 64, "sfv", metric);
            st = fig("cost", "send", variants[v], 64, "sfv_static", metric);
            r = fig("cost", "send", variants[v], 64, "raw", metric);
            h = fig("cost", "send", variants[v], 64, "hand", metric);
            snprintf(where, sizeof where, "%s, %s", variants[v], names[k]);
            snprintf(where_st, sizeof where_st, "%s, static", where);
            if (k == 4)
                snprintf(both, sizeof both, "%s, %s", judge(T_IRH, isnan(s) || isnan(h) ? NAN : s / h, where),
                         judge(T_IRH, isnan(st) || isnan(h) ? NAN : st / h, where_st));
            fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k ? "" : (v ? "batch" : "one per post"), names[k],
                    num(s, 1), num(st, 1), num(r, 1), num(h, 1), ratio(s, r), ratio(s, h), ratio(st, h),
                    k == 4 ? judge(T_IR, isnan(s) || isnan(r) ? NAN : s / r, where) : "", both);
        }
    }
    fprintf(o, "\nWhere the gap to the hand-tracked loop is. That loop, as raw verbs and perftest do, posts work requests "
               "it built once, before its loop (only the record's wr_id is written per post); a call that takes the "
               "caller's elements, as safeverbs' do, builds its work requests at each call. *hand, built per call* is "
               "the same hand-tracked loop building them at each call from an array of elements (bench/sfv_bench.c, "
               "hand_post_send_built: one on the stack for a single post, a linked array for a batch; --impl handbuilt). "
               "What safeverbs costs above it is its own tracking; what that loop costs above the prebuilt one is what "
               "building the work requests costs anyone. Information only: the target stays against the prebuilt loop.\n\n"
               "| loop | hand-tracked raw (prebuilt) | hand, built per call | safeverbs | static | built/prebuilt | sfv/built | static/built |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int v = 0; v < 2; v++) {
        const double h = fig("cost", "send", variants[v], 64, "hand", "ir_per_op"), b = fig("cost", "send", variants[v], 64, "handbuilt", "ir_per_op");
        const double s = fig("cost", "send", variants[v], 64, "sfv", "ir_per_op"), st = fig("cost", "send", variants[v], 64, "sfv_static", "ir_per_op");
        fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", v ? "batch" : "one per post", num(h, 1), num(b, 1), num(s, 1), num(st, 1),
                ratio(b, h), ratio(s, b), ratio(st, b));
    }
    fprintf(o, "\n*inject + receive*: the same loop with sfv_channel_inject (64 bytes from plain memory, inline, no "
               "handle and no send completion to poll; a signaled one every half send queue gives back the places), "
               "against raw verbs counting completions, and against the peers' own small-message paths counted the "
               "same way (one process, loopback on the same device, the same sleep outside the counted code): "
               "*UCX*: uct_ep_am_short over rc_verbs (64 bytes: an 8-byte header and 56 of payload, inline) and "
               "uct_worker_progress until the handler ran, which polls the receive, reposts UCX's receive buffers "
               "and reaps the send completions it asks for now and then (bench/uct_cost.c); *libfabric*: fi_inject "
               "and fi_recv over the verbs provider, FI_EP_MSG, fi_cq_read for the receive (bench/fi_cost.c). "
               "One per post only: neither peer loop batches. *hand inject*: the hand-tracked loop's receives with "
               "the least a careful C programmer writes for the inject's promise (a prebuilt inline work request from "
               "plain memory, a count of the send queue's places, a signal every half queue whose one record gives "
               "them back; bench/sfv_bench.c, hand_inject_post): where it is above raw verbs, no loop that tracks its "
               "receives and its queue's places can meet the target <= raw, safeverbs' included.\n\n"
               "| loop | safeverbs inject + receive | static | raw verbs | hand inject | UCX am_short | libfabric fi_inject | "
               "inject/raw | hand inject/raw | inject/UCX | inject/libfabric | target <= raw (default, static) | target < UCX, < libfabric |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    for (int v = 0; v < 2; v++) {
        const double s = fig("cost", "send", variants[v], 64, "inject", "ir_per_op"), r = fig("cost", "send", variants[v], 64, "raw", "ir_per_op");
        const double st = fig("cost", "send", variants[v], 64, "inject_static", "ir_per_op");
        const double u = v ? NAN : fig("cost", "send", variants[v], 64, "uct", "ir_per_op");
        const double f = v ? NAN : fig("cost", "send", variants[v], 64, "fi_inject", "ir_per_op");
        const double hi = fig("cost", "send", variants[v], 64, "handinject", "ir_per_op");
        char where[96], where_st[112], both[64], peers[64] = "";
        snprintf(where, sizeof where, "inject, %s", variants[v]);
        snprintf(where_st, sizeof where_st, "%s, static", where);
        snprintf(both, sizeof both, "%s, %s", judge(T_IR_INJ, isnan(s) || isnan(r) ? NAN : s / r, where),
                 judge(T_IR_INJ, isnan(st) || isnan(r) ? NAN : st / r, where_st));
        if (!v)
            snprintf(peers, sizeof peers, "%s, %s", judge(T_PEER_INJ, isnan(s) || isnan(u) ? NAN : s / u, "inject vs UCX am_short"),
                     judge(T_PEER_INJ, isnan(s) || isnan(f) ? NAN : s / f, "inject vs libfabric fi_inject"));
        fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v ? "batch" : "one per post", num(s, 1),
                num(st, 1), num(r, 1), num(hi, 1), num(u, 1), num(f, 1), ratio(s, r), ratio(hi, r), ratio(s, u), ratio(s, f), both, peers);
    }
    fprintf(o, "\nThe targets are judged on the total per operation; the steps show where the instructions go.\n\n"
               "The same instructions by whose code runs them (the rxe provider and libibverbs run the same work "
               "for all three; raw verbs has no library: its harness counts its own completions, and the "
               "hand-tracked loop's tracking is harness code too):\n\n"
               "| loop | code | safeverbs | raw verbs | hand-tracked raw |\n|---|---|---:|---:|---:|\n");
    for (int v = 0; v < 2; v++) {
        static const char *const parts[3] = {"part_lib", "part_harness", "part_verbs"};
        static const char *const whose[3] = {"safeverbs.h", "the harness (sfv_bench.c)",
                                             "rxe provider, libibverbs, libc"};
        for (int k = 0; k < 3; k++) {
            char metric[32];
            snprintf(metric, sizeof metric, "ir_%s", parts[k]);
            fprintf(o, "| %s | %s | %s | %s | %s |\n", k ? "" : (v ? "batch" : "one per post"), whose[k],
                    num(fig("cost", "send", variants[v], 64, "sfv", metric), 1),
                    k ? num(fig("cost", "send", variants[v], 64, "raw", metric), 1) : "-",
                    k ? num(fig("cost", "send", variants[v], 64, "hand", metric), 1) : "-");
        }
    }
    fprintf(o, "\n");
    cost_functions(o);
}

static void alloc_section(FILE *o) {
    char seen[128][96];
    int nseen = 0;
    fprintf(o, "## Heap allocations per operation\n\n"
               "Every timed loop counts the calls to malloc, calloc, realloc and posix_memalign of the whole "
               "process (libibverbs and the provider included) through an interposed counter; the most per operation "
               "over the sizes of each run.\n\n"
               "| run | safeverbs | raw verbs | target: safeverbs = 0 |\n|---|---:|---:|---|\n");
    for (size_t i = 0; i < g_nrecs; i++) {
        const rec *r = &g_recs[i];
        char key[96];
        double worst[2] = {NAN, NAN};
        int j;
        if (strcmp(r->metric, "allocs_per_op")) continue;
        snprintf(key, sizeof key, "%s %s %s", r->test, r->op, r->variant);
        for (j = 0; j < nseen && strcmp(seen[j], key); j++) {}
        if (j < nseen || nseen == 128) continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", key);
        for (size_t k = i; k < g_nrecs; k++) {
            const rec *q = &g_recs[k];
            int x = !strcmp(q->impl, "raw");
            if (strcmp(q->metric, "allocs_per_op") || strcmp(q->test, r->test) || strcmp(q->op, r->op) ||
                strcmp(q->variant, r->variant))
                continue;
            if (isnan(worst[x]) || q->value > worst[x]) worst[x] = q->value;
        }
        fprintf(o, "| %s | %s | %s | %s |\n", key, num(worst[0], 3), num(worst[1], 3), judge(T_ALLOC, worst[0], key));
    }
    fprintf(o, "\n");
}

/* Where safeverbs' and raw's system calls differ, call by call (the per-call figures of
   cmd_syscalls), one line per run. */
static void syscall_split(FILE *o, const char *const cases[][2]) {
    bool any = false;
    for (int c = 0; c < 3; c++) {
        char variant[40], line[1024] = "";
        size_t used = 0;
        if (c == 2) snprintf(variant, sizeof variant, "rate-batch%s", meta("rate_batch"));
        else snprintf(variant, sizeof variant, "%s", cases[c][0]);
        for (size_t i = 0; i < g_nrecs; i++) {
            const rec *q = &g_recs[i];
            bool seen = false;
            double s, r, d;
            if (strcmp(q->test, "syscalls") || strcmp(q->variant, variant) || strncmp(q->metric, "syscalls_per_op:", 16)) continue;
            for (size_t j = 0; j < i && !seen; j++) /* each name once */
                seen = !strcmp(g_recs[j].test, "syscalls") && !strcmp(g_recs[j].variant, variant) && !strcmp(g_recs[j].metric, q->metric);
            if (seen) continue;
            s = fig("syscalls", "send", variant, 8, "sfv", q->metric);
            r = fig("syscalls", "send", variant, 8, "raw", q->metric);
            d = (isnan(s) ? 0 : s) - (isnan(r) ? 0 : r);
            if (fabs(d) < 0.005 || used >= sizeof line - 64) continue;
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %+.3f", used ? ", " : "", q->metric + 16, d);
        }
        if (!used) continue;
        if (!any) fprintf(o, "Where they differ, call by call (safeverbs - raw, per op):\n\n");
        any = true;
        fprintf(o, "- %s: %s\n", cases[c][1], line);
    }
    if (any)
        fprintf(o, "\nHow to read it: a sleep is the same three calls in both loops (poll(2) on the completion channel with a "
                   "timeout, ioctl(2) to arm the CQ, read(2) for the event), so "
                   "where those three differ by the same amount the loops slept a different number of times (timing: a wait "
                   "whose completion is already there sleeps not), not a call one makes and the other does not. A busy wait "
                   "of safeverbs also reads the device's events (read(2)) after every 10 ms it spins (SFV__EVENTS_EVERY_NS), "
                   "which raw's loop does not watch.\n\n");
}

static void syscall_section(FILE *o) {
    static const char *const cases[3][2] = {{"lat-busy", "send ping-pong, busy polling"},
                                            {"lat-event", "send ping-pong, SFV_WAIT_EVENT"},
                                            {"rate-batch", "send batches (message rate)"}};
    fprintf(o, "## System calls per operation (strace)\n\n"
               "strace -c -f on the client, runs of N and 2N operations, 8-byte sends; the difference over N. On rxe "
               "every post of send-queue work is one write(2) to the kernel (the doorbell), receives and polling none. "
               "In the SFV_WAIT_EVENT run the server pauses 10 ms before each echo, so every wait of the client "
               "sleeps (arm, poll, read the event) and the count does not depend on timing (with 2 ms, a client kept off "
               "the CPU that long now and then found a reply already there and slept once less: 0.06 calls per op "
               "between two runs of the same loop).\n\n"
               "| run | safeverbs | raw verbs | safeverbs - raw | target: equal |\n|---|---:|---:|---:|---|\n");
    for (int c = 0; c < 3; c++) {
        char variant[40];
        double s, r;
        if (c == 2) snprintf(variant, sizeof variant, "rate-batch%s", meta("rate_batch"));
        else snprintf(variant, sizeof variant, "%s", cases[c][0]);
        s = fig("syscalls", "send", variant, 8, "sfv", "syscalls_per_op");
        r = fig("syscalls", "send", variant, 8, "raw", "syscalls_per_op");
        fprintf(o, "| %s | %s | %s | %s | %s |\n", cases[c][1], num(s, 3), num(r, 3), isnan(s) || isnan(r) ? "-" : num(s - r, 3),
                judge(T_SYSCALL, isnan(s) || isnan(r) ? NAN : s - r, cases[c][1]));
    }
    fprintf(o, "\n");
    syscall_split(o, cases);
}

/* ---- reading the tools' output: the subcommands bench/run.sh calls between runs ------------- */
/* Each prints CSV lines (ROW,metric,value, ROW being a line's first five fields) or one number
   on stdout, and exits 1 with a line on stderr when the figures are not there. The figures are
   written as bench/run.sh's awk programs wrote them before these moved here: the tools' own
   text where a figure is copied, awk's number format (awk_num) where one is computed. */

/* A computed number as awk prints it: an integer within int range as such, otherwise %.6g. */
static const char *awk_num(double v) {
    char *s = slot();
    if (fabs(v) <= 2147483647.0 && v == (double)(long)v) snprintf(s, 48, "%.0f", v);
    else snprintf(s, 48, "%.6g", v);
    return s;
}

/* awk's int(): towards zero (v is finite) */
static double whole(double v) { return fabs(v) < 9e18 ? (double)(long long)v : v; }

/* Splits line at blanks (awk's fields); returns their number (NF), keeps the first max. */
static int split_fields(char *line, char **f, int max) {
    int n = 0;
    for (char *p = strtok(line, " \t\r\n"); p; p = strtok(NULL, " \t\r\n"))
        if (n++ < max) f[n - 1] = p;
    return n;
}
static bool all_of(const char *s, const char *set) { return *s && s[strspn(s, set)] == 0; }
/* awk's $1 == s: numerically when the field is a number, else as text */
static bool same_size(const char *field, long size) {
    char *end, buf[32];
    double v = strtod(field, &end);
    if (end != field && !*end) return v == (double)size;
    snprintf(buf, sizeof buf, "%ld", size);
    return !strcmp(field, buf);
}

/* A row key "test,op,variant,size,impl", in its fields. */
typedef struct key {
    char test[16], op[16], variant[40], impl[16];
    long size;
} key;
static key parse_key(const char *s) {
    key k;
    memset(&k, 0, sizeof k);
    if (sscanf(s, "%15[^,],%15[^,],%39[^,],%ld,%15[^,]", k.test, k.op, k.variant, &k.size, k.impl) != 5)
        die("a key is test,op,variant,size,impl, not ", s);
    return k;
}

/* The last line of a perftest report for this size: latency (#bytes #iterations t_min t_max
   t_typical t_avg t_stdev 99% 99.9%) or bandwidth (#bytes #iterations BW_peak BW_average
   MsgRate); rate also wants MsgRate to be a number. Copies the line's fields into f. */
enum { PT_LAT, PT_BW, PT_RATE };
static bool perftest_line(const char *path, int kind, long size, char f[9][48]) {
    char line[1024], *fl[16];
    bool found = false;
    FILE *in = fopen(path, "r");
    if (!in) return false;
    while (fgets(line, sizeof line, in)) {
        int nf = split_fields(line, fl, 16);
        if (nf < 5 || !same_size(fl[0], size) || !all_of(fl[1], "0123456789")) continue;
        if (kind == PT_LAT ? nf < 9 || !all_of(fl[4], "0123456789.") || !all_of(fl[7], "0123456789.")
                           : nf != 5 || (kind == PT_RATE && !all_of(fl[4], "0123456789.")))
            continue;
        for (int i = 0; i < 9 && i < nf; i++) snprintf(f[i], 48, "%s", fl[i]);
        found = true;
    }
    fclose(in);
    return found;
}

/* Says on stderr what is missing, then how the file at path ends (its last 3 lines). */
static void missing(const char *what, const char *path) {
    char lines[3][512] = {"", "", ""};
    int n = 0;
    FILE *in = fopen(path, "r");
    fprintf(stderr, "bench_report: no %s in %s%s\n", what, path, in ? "; it ends:" : " (not there)");
    if (!in) return;
    while (fgets(lines[n % 3], sizeof lines[0], in)) n++;
    fclose(in);
    for (int i = n > 3 ? n - 3 : 0; i < n; i++) fputs(lines[i % 3], stderr);
}

/* perftest FILE ROW ITERS: a latency (ROW's test "lat") or bandwidth report's figures */
static int cmd_perftest(const char *path, const char *row, const char *iters) {
    key k = parse_key(row);
    char f[9][48];
    bool lat = !strcmp(k.test, "lat");
    if (!perftest_line(path, lat ? PT_LAT : PT_BW, k.size, f)) {
        missing(lat ? "latency figures for this size" : "bandwidth figures for this size", path);
        return 1;
    }
    if (lat) printf("%s,median_us,%s\n%s,p99_us,%s\n%s,mean_us,%s\n", row, f[4], row, f[7], row, f[5]);
    else printf("%s,mib_s,%s\n%s,kmsg_s,%s\n", row, f[3], row, awk_num(strtod(f[4], NULL) * 1000));
    printf("%s,iters,%s\n", row, iters);
    return 0;
}

/* rate BEFORE AFTER ROW ITERS: ib_send_bw's message rate, thousands/s, the mean of the runs
   before and after one of ours, and each */
static int cmd_rate(const char *before, const char *after, const char *row, const char *iters) {
    key k = parse_key(row);
    char fa[9][48], fb[9][48], a[48], b[48];
    if (!perftest_line(before, PT_RATE, k.size, fa)) {
        missing("message rate for this size", before);
        return 1;
    }
    if (!perftest_line(after, PT_RATE, k.size, fb)) {
        missing("message rate for this size", after);
        return 1;
    }
    snprintf(a, sizeof a, "%s", awk_num(strtod(fa[4], NULL) * 1000));
    snprintf(b, sizeof b, "%s", awk_num(strtod(fb[4], NULL) * 1000));
    printf("%s,kmsg_s,%s\n", row, awk_num((strtod(a, NULL) + strtod(b, NULL)) / 2));
    printf("%s,kmsg_s_before,%s\n%s,kmsg_s_after,%s\n%s,iters,%s\n", row, a, row, b, row, iters);
    return 0;
}

/* The value of the last line of the CSV at path that starts with prefix, "" if none. */
static void csv_last(const char *path, const char *prefix, char *out, size_t cap) {
    char line[512];
    size_t n = strlen(prefix);
    FILE *in = fopen(path, "r");
    *out = 0;
    if (!in) die("cannot read ", path);
    while (fgets(line, sizeof line, in)) {
        char *v = line + n;
        if (strncmp(line, prefix, n)) continue;
        v[strcspn(v, ",\r\n")] = 0;
        snprintf(out, cap, "%s", v);
    }
    fclose(in);
}

/* iters CSV ROW SECONDS: how many iterations make a perftest run of about SECONDS, from our
   raw figure already in the CSV (ROW names it: lat -> its median, bw -> its MiB/s). Latency:
   between 200 and 4000 (a round trip for read, two half round trips otherwise); bandwidth: 16
   at least, 100 when there is no figure. */
static int cmd_iters(const char *csv, const char *row, const char *seconds) {
    key k = parse_key(row);
    char prefix[200], v[64];
    bool lat = !strcmp(k.test, "lat");
    double t = strtod(seconds, NULL), m, n;
    snprintf(prefix, sizeof prefix, "%s,%s,", row, lat ? "median_us" : "mib_s");
    csv_last(csv, prefix, v, sizeof v);
    m = strtod(v, NULL);
    if (lat) {
        double e = strtod(awk_num((strcmp(k.op, "read") ? 2 * m : m) / 1e6), NULL); /* seconds per operation */
        n = e > 0 ? whole(t / e) : 4000;
        n = n < 200 ? 200 : n > 4000 ? 4000 : n;
    } else {
        n = m > 0 ? whole(t * m * 1048576 / (double)k.size) : 100;
        n = n < 16 ? 16 : n;
    }
    printf("%s\n", awk_num(n));
    return 0;
}

/* Instruction counts from callgrind_annotate: --inclusive=yes (FILE.incl) gives each cost_<impl>_<step>
   function's, --inclusive=no (FILE.self) every function's own, summed by whose code it is. */
static const char *const CG_STEPS[] = {"post_recv", "post_send", "poll_send", "poll_recv",
                                       "part_lib", "part_harness", "part_verbs"};
enum { CG_NSTEPS = 7, CG_NPARTS = 3 };
/* Each run's own instructions per function of safeverbs.h and of the harness (from FILE.self). */
#define CG_MAXFN 96
typedef struct cg_fn {
    char name[56];
    double ir;
} cg_fn;
static cg_fn g_fn[2][CG_MAXFN];
static int g_nfn[2];
static void strip_commas(char *s) {
    char *d = s;
    for (; *s; s++)
        if (*s != ',') *d++ = *s;
    *d = 0;
}
/* Reads one run's counts into v (text, "" where there is none). */
static void callgrind_counts(const char *base, char v[CG_NSTEPS][48], int run) {
    char path[1024], line[4096], copy[4096], *fl[64];
    FILE *in;
    for (int i = 0; i < CG_NSTEPS; i++) v[i][0] = 0;
    /* "  12,345 (10.0%)  /x/sfv_bench.c:cost_sfv_post_send [/x/build/sfv_bench]" */
    snprintf(path, sizeof path, "%s.incl", base);
    if ((in = fopen(path, "r"))) {
        while (fgets(line, sizeof line, in)) {
            int nf;
            char *c = strstr(line, ":cost_");
            if (!c || !strstr(c, " [")) continue;
            snprintf(copy, sizeof copy, "%s", line);
            nf = split_fields(copy, fl, 64);
            strip_commas(fl[0]);
            for (int i = 1; i < nf && i < 64; i++) {
                char *step = NULL;
                for (char *p = strstr(fl[i], ":cost_"); p; p = strstr(p + 1, ":cost_")) {
                    size_t letters = strspn(p + 6, "abcdefghijklmnopqrstuvwxyz");
                    if (letters && p[6 + letters] == '_') step = p + 7 + letters;
                }
                for (int s = 0; step && s < CG_NSTEPS - CG_NPARTS; s++)
                    if (!strcmp(step, CG_STEPS[s])) snprintf(v[s], 48, "%s", fl[0]);
            }
        }
        fclose(in);
    }
    /* the table after the "file:function" header, between two lines of dashes:
       "  1,234 (5.0%)  /x/safeverbs.h:sfv_channel_post_send [/x/build/sfv_bench]" */
    snprintf(path, sizeof path, "%s.self", base);
    if ((in = fopen(path, "r"))) {
        double part[CG_NPARTS] = {0, 0, 0}, total = 0;
        int on = 0;
        while (fgets(line, sizeof line, in)) {
            char *p = line, *file;
            size_t len;
            if (strstr(line, "PROGRAM TOTALS")) { /* "294,925 (100.0%)  PROGRAM TOTALS" */
                snprintf(copy, sizeof copy, "%s", line + strspn(line, " "));
                copy[strspn(copy, "0123456789,")] = 0;
                strip_commas(copy);
                total = strtod(copy, NULL);
                continue;
            }
            if (strstr(line, "file:function")) { on = 1; continue; }
            if (on && !strncmp(line, "-----", 5)) {
                if (on == 2) break;
                on = 2;
                continue;
            }
            if (on != 2) continue;
            p += strspn(p, " ");
            len = strspn(p, "0123456789,");
            if (!len || p[len] != ' ' || p[len + strspn(p + len, " ")] != '(') continue;
            snprintf(copy, sizeof copy, "%.*s", (int)len, p);
            strip_commas(copy);
            if (!(file = strchr(p, ')'))) continue;
            file += 1 + strspn(file + 1, " ");
            {
                char *fn = file + strcspn(file, ":\r\n");
                if (*fn == ':' && g_nfn[run] < CG_MAXFN &&
                    (strstr(file, "safeverbs.h:") == fn - 11 || strstr(file, "bench/sfv_bench.c:") == fn - 17)) {
                    cg_fn *f = &g_fn[run][g_nfn[run]++];
                    snprintf(f->name, sizeof f->name, "%.*s", (int)strcspn(fn + 1, " \r\n"), fn + 1);
                    f->ir = strtod(copy, NULL);
                }
            }
            file[strcspn(file, ":\r\n")] = 0;
            len = strlen(file);
            part[len >= 11 && !strcmp(file + len - 11, "safeverbs.h")          ? 0
                 : len >= 17 && !strcmp(file + len - 17, "bench/sfv_bench.c") ? 1
                                                                                : 2] += strtod(copy, NULL);
        }
        fclose(in);
        /* everything else: the total less the two; a run whose counters were zeroed lists the
           functions on the stack at the zeroing (main, libc's start) with the whole total as
           their own, so they are not summed */
        if (total > 0) part[2] = total - part[0] - part[1];
        for (int i = 0; i < CG_NPARTS; i++) snprintf(v[CG_NSTEPS - CG_NPARTS + i], 48, "%s", awk_num(part[i]));
    }
}

/* callgrind ROW N1 N2 BATCH BASE1 BASE2: instructions per work request of each step and in
   total, from runs of N1 and N2 iterations of BATCH work requests (BASE1.incl, BASE1.self, ...);
   N1 0 (BASE1 "-"): one run of N2 iterations, its counters zeroed after its warm-up. */
static int cmd_callgrind(const char *row, const char *n1, const char *n2, const char *batch, const char *b1,
                         const char *b2) {
    char v1[CG_NSTEPS][48], v2[CG_NSTEPS][48], total[48] = "0";
    double n = (double)(atol(n2) - atol(n1)), k = atof(batch);
    int rc = 0;
    callgrind_counts(b1, v1, 0);
    callgrind_counts(b2, v2, 1);
    if (atol(n1) == 0) /* one run whose counters were zeroed after its warm-up: its count over N2 */
        for (int s = 0; s < CG_NSTEPS; s++) snprintf(v1[s], sizeof v1[s], "%s", v2[s][0] ? "0" : "");
    /* per function: the difference of the two runs per work request, where it is at least 0.5 */
    for (int i = 0; i < g_nfn[1]; i++) {
        double a = 0, per;
        for (int j = 0; j < g_nfn[0]; j++)
            if (!strcmp(g_fn[0][j].name, g_fn[1][i].name)) a = g_fn[0][j].ir;
        per = (g_fn[1][i].ir - a) / n / k;
        if (per >= 0.5) printf("%s,fn_%s,%.1f\n", row, g_fn[1][i].name, per);
    }
    int steps_seen = 0;
    for (int s = 0; s < CG_NSTEPS - CG_NPARTS; s++) steps_seen += v1[s][0] && v2[s][0];
    for (int s = 0; s < CG_NSTEPS; s++) {
        char per[48];
        /* a loop without this step (an inject polls no send completion; UCX's progress posts the
           receives): 0, where the runs counted its other steps */
        if (!v1[s][0] && !v2[s][0] && s < CG_NSTEPS - CG_NPARTS && steps_seen > 0) {
            printf("%s,ir_%s,0\n", row, CG_STEPS[s]);
            continue;
        }
        if (!v1[s][0] || !v2[s][0]) {
            fprintf(stderr, "bench_report: callgrind gave no count for %s %s\n", row, CG_STEPS[s]);
            rc = 1;
            continue;
        }
        snprintf(per, sizeof per, "%.1f", (strtod(v2[s], NULL) - strtod(v1[s], NULL)) / n / k);
        printf("%s,ir_%s,%s\n", row, CG_STEPS[s], per);
        if (s < CG_NSTEPS - CG_NPARTS) snprintf(total, sizeof total, "%s", awk_num(strtod(total, NULL) + strtod(per, NULL)));
    }
    printf("%s,ir_per_op,%s\n", row, total);
    return rc;
}



/* ---- scaling (build/sfv_scale) ----------------------------------------------------------- */
static void scale_dat(const char *dir, const char *name, const char *what, const char *variant, const char *m1, const char *m2) {
    char path[1024];
    long x[64];
    int n = sizes_of("scale", what, variant, x, 64);
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "w"))) die("cannot write ", path);
    fprintf(f, "# x %s%s%s\n", m1, m2 ? " " : "", m2 ? m2 : "");
    for (int i = 0; i < n; i++) {
        double a = fig("scale", what, variant, x[i], "sfv", m1), b = m2 ? fig("scale", what, variant, x[i], "sfv", m2) : NAN;
        fprintf(f, "%ld ", x[i]);
        if (isnan(a)) fprintf(f, "?");
        else fprintf(f, "%g", a);
        if (m2) {
            if (isnan(b)) fprintf(f, " ?");
            else fprintf(f, " %g", b);
        }
        fprintf(f, "\n");
    }
    fclose(f);
}
static void scale_section(FILE *o, const char *dir) {
    long x[64];
    int n;
    bool any = false;
    for (size_t i = 0; i < g_nrecs && !any; i++) any = !strcmp(g_recs[i].test, "scale");
    if (!any) return;
    scale_dat(dir, "scale_connect.dat", "connect", "tree", "connect_ms", NULL);
    scale_dat(dir, "scale_mem.dat", "mem", "default", "heap_per_channel", "mapped_per_channel");
    scale_dat(dir, "scale_rate_peers.dat", "rate", "peers-d64", "kmsg_s", NULL);
    scale_dat(dir, "scale_rate_depth.dat", "rate", "depth-c1", "kmsg_s", NULL);
    fprintf(o, "## How cost grows with the work\n\n![scaling](scaling.png)\n\n"
               "**Connecting a node** (build/sfv_scale --test connect): every rank a process in the guest, rxe0 and "
               "rxe1 in turn, sfv_create_node then timed: sfv_node_connect (the TCP exchange on 127.0.0.1, the "
               "handshakes, the sync over the exchange's kept connections) and one barrier; the slowest rank's time, "
               "the least of 3 rounds (noise only adds), and the CPU time of the same calls summed over the ranks "
               "(the least round). Each rank connects a channel to "
               "every rank, so the work per rank grows with the ranks, and the whole job's with their square. "
               "*raw floor*: the same queue pairs (one per rank, itself included, each rank a process, rxe0 and rxe1 "
               "in turn) created and moved to INIT untimed, then timed as the node's connect is: RTR and RTS for every "
               "one with libibverbs alone, the queue pair numbers exchanged through shared memory, between two "
               "process-shared barriers (bench/raw_connect.c: no TCP, no handshake, no library); 5 rounds, each "
               "the slowest rank's time, the least of them (noise only adds). *raw CPU*: the CPU time of that "
               "timed part summed over the ranks (the modify_qp system calls run in the calling process; the "
               "kernel counts CPU time in ticks, so a few ms are rough), the least round.\n\n"
               "| ranks | connect + barrier (ms) | per rank (ms) | CPU, all ranks (ms) | raw floor (ms) | raw CPU, all ranks (ms) |\n"
               "|---:|---:|---:|---:|---:|---:|\n");
    n = sizes_of("scale", "connect", "tree", x, 64);
    for (int i = 0; i < n; i++) {
        double t = fig("scale", "connect", "tree", x[i], "sfv", "connect_ms");
        fprintf(o, "| %ld | %s | %s | %s | %s | %s |\n", x[i], num(t, 1), num(t / (double)x[i], 2),
                num(fig("scale", "connect", "tree", x[i], "sfv", "cpu_ms"), 1), num(fig("scale", "connect", "raw", x[i], "raw", "connect_ms"), 1),
                num(fig("scale", "connect", "raw", x[i], "raw", "cpu_ms"), 1));
    }
    {
        double t2 = fig("scale", "connect", "tree", 2, "sfv", "connect_ms"), t16 = fig("scale", "connect", "tree", 16, "sfv", "connect_ms");
        double r2 = fig("scale", "connect", "raw", 2, "raw", "connect_ms"), r16 = fig("scale", "connect", "raw", 16, "raw", "connect_ms");
        double c2 = fig("scale", "connect", "raw", 2, "raw", "cpu_ms"), c16 = fig("scale", "connect", "raw", 16, "raw", "cpu_ms");
        char where[160];
        snprintf(where, sizeof where, "16 ranks over 2 (raw floor: %s)", ratio(r16, r2));
        fprintf(o, "\nt(16)/t(2) = %s (linear: 8): %s\n\n", ratio(t16, t2),
                judge(T_CONNECT, isnan(t2) || isnan(t16) || t2 <= 0 ? NAN : t16 / t2, where));
        if (!isnan(r2) && !isnan(r16)) {
            const double p16 = fig("scale", "connect", "phases", 16, "sfv", "cpu_ms");
            fprintf(o, "The floor: t_raw(16)/t_raw(2) = %s against the target's 8; t_raw(16)/t(2) = %s (the raw work at "
                       "16 ranks against safeverbs' whole connect at 2); raw CPU(16)/CPU(2) = %s (rough: a few ms at 2 "
                       "ranks are a tick or two). ",
                    ratio(r16, r2), ratio(r16, t2), ratio(c16, c2));
            if (r16 / r2 > 8)
                fprintf(o, "The raw work alone grows faster than linearly here: a node connects every rank to every rank, "
                           "W x W queue pairs (256 at 16 ranks, 4 at 2), and the guest's 2 vCPUs run all of them whatever "
                           "the number of processes, so the time follows the whole job's work, not one rank's. A connect "
                           "comes under 8 here only by costing more at 2 ranks than the work there (a fixed cost of at "
                           "least t_raw(16)/8 - t_raw(2) = %s ms), not by being faster at 16: on this machine the target "
                           "is out of reach for any connect that costs about its raw work. ",
                        num(r16 / 8 - r2, 1));
            else
                fprintf(o, "The raw work alone stays within linear here: what safeverbs adds decides the row. ");
            fprintf(o, "safeverbs' connect at 16 ranks takes %s times the floor, its ranks %s times the floor's CPU time "
                       "(the steps below).\n\n",
                    ratio(t16, r16), ratio(p16, c16));
        }
    }
    {
        static const char *const step[] = {"start", "exchange", "handshake", "sync", "barrier", "connect", "cpu"};
        static const char *const what[] = {"(before: an exchange of nothing, untimed, until every rank is up)",
                                           "endpoint exchange (TCP, every rank to every rank)", "sfv_node_handshake (RTR, RTS)",
                                           "sync exchange (TCP)", "barrier (RDMA writes)", "total of the four",
                                           "CPU time of the four, all ranks"};
        long px[8];
        int np = sizes_of("scale", "connect", "phases", px, 8);
        if (np > 0) {
            fprintf(o, "**A node connected by hand, step by step** (sfv_scale --variant phases: sfv_node_connect's steps called one by one "
                       "through the public API, each the slowest rank's time; one run each, ms; the sync by hand is an "
                       "exchange of 0 bytes over new connections, where sfv_node_connect sends one frame each way over "
                       "the connections its exchange kept). The node connect "
                       "above starts its clock in each rank when that rank is ready, so its time holds the wait "
                       "for the last rank to start; here an untimed exchange first lines the ranks up:\n\n| step |");
            for (int i = 0; i < np; i++) fprintf(o, " %ld ranks |", px[i]);
            fprintf(o, "\n|---|");
            for (int i = 0; i < np; i++) fprintf(o, "---:|");
            fprintf(o, "\n");
            for (int k = 0; k < 7; k++) {
                char m[32];
                snprintf(m, sizeof m, "%s_ms", step[k]);
                fprintf(o, "| %s |", what[k]);
                for (int i = 0; i < np; i++) fprintf(o, " %s |", num(fig("scale", "connect", "phases", px[i], "sfv", m), 1));
                fprintf(o, "\n");
            }
            fprintf(o, "\n");
        }
    }
    fprintf(o, "**Memory per channel** (--test mem): a multi-channel of n channels with the default desc (128 send "
               "and 128 receive work requests, a CQ of 256); *heap*: the bytes malloc holds after it (safeverbs' "
               "request tracking, libibverbs' and the provider's bookkeeping), *mapped*: the address space it added "
               "(the provider's queue and CQ buffers, shared with the kernel; the kernel's own memory is not seen "
               "from here), both per channel.\n\n| channels | heap per channel (bytes) | mapped per channel (bytes) |\n|---:|---:|---:|\n");
    n = sizes_of("scale", "mem", "default", x, 64);
    for (int i = 0; i < n; i++)
        fprintf(o, "| %ld | %s | %s |\n", x[i], num(fig("scale", "mem", "default", x[i], "sfv", "heap_per_channel"), 0),
                num(fig("scale", "mem", "default", x[i], "sfv", "mapped_per_channel"), 0));
    fprintf(o, "\n**Message rate** (--test rate): two processes, a multi-channel of C channels each side (rxe1 to rxe0), "
               "64-byte sends round-robin over the channels, D in flight in all, one per post, every one signalled; "
               "the server re-posts receives. Thousands of messages per second; one run each, so the machine's "
               "noise (tens of percent) is in every point.\n\n| channels (D = 64) | kmsg/s | | depth (C = 1) | kmsg/s |\n|---:|---:|---|---:|---:|\n");
    {
        long xp[64], xd[64];
        int np = sizes_of("scale", "rate", "peers-d64", xp, 64), nd = sizes_of("scale", "rate", "depth-c1", xd, 64);
        for (int i = 0; i < np || i < nd; i++) {
            char a[32] = "", b[32] = "";
            if (i < np) snprintf(a, sizeof a, "%ld", xp[i]);
            if (i < nd) snprintf(b, sizeof b, "%ld", xd[i]);
            fprintf(o, "| %s | %s | | %s | %s |\n", a, i < np ? num(fig("scale", "rate", "peers-d64", xp[i], "sfv", "kmsg_s"), 1) : "", b,
                    i < nd ? num(fig("scale", "rate", "depth-c1", xd[i], "sfv", "kmsg_s"), 1) : "");
        }
    }
    {
        double i1 = fig("scale", "cost", "peers1", 64, "sfv", "ir_per_op"), i64 = fig("scale", "cost", "peers64", 64, "sfv", "ir_per_op");
        fprintf(o, "\n**Instructions per operation against peers** (--test cost, callgrind): two multi-channels of C "
                   "channels in one process connected to each other, one 64-byte send + receive per iteration, the "
                   "channel rotating over all C (so 64 peers' queues and CQs are all in use).\n\n"
                   "| peers | instructions per send + receive | target |\n|---:|---:|---|\n"
                   "| 1 | %s | |\n| 64 | %s | 64/1 = %s <= 1.05 %s |\n\n",
                num(i1, 1), num(i64, 1), ratio(i64, i1), judge(T_IR_PEERS, isnan(i1) || isnan(i64) || i1 <= 0 ? NAN : i64 / i1, "64 peers"));
    }
}

/* ---- what the in-flight tracking costs (issue 15) --------------------------------------------- */
static void inflight_section(FILE *o) {
    const double t = fig("inflight", "send", "debug", 64, "track", "ir_per_op"), n = fig("inflight", "send", "debug", 64, "notrack", "ir_per_op");
    fprintf(o, "\n## What the in-flight tracking costs\n\n"
               "SFV_TRACK_INFLIGHT (on by default in debug builds, absent from release builds): callgrind "
               "instructions per 64 B send + receive (one per post, loopback), the bench built without NDEBUG, "
               "with the tracking on and off.\n\n"
               "| build | instructions per send + receive |\n|---|---:|\n"
               "| debug, tracking on | %s |\n| debug, tracking off (-DSFV_TRACK_INFLIGHT=0) | %s |\n| on / off | %s |\n",
            num(t, 1), num(n, 1), ratio(t, n));
}

/* ---- RDMA-CM connection set-up (build/cm_setup) -------------------------------------------- */
static void setup_section(FILE *o) {
    const double sm = fig("setup", "connect", "cm", 0, "sfv", "median_us"), sp = fig("setup", "connect", "cm", 0, "sfv", "p90_us");
    const double rm = fig("setup", "connect", "cm", 0, "raw", "median_us"), rp = fig("setup", "connect", "cm", 0, "raw", "p90_us");
    fprintf(o, "\n## Connection set-up through RDMA-CM\n\n"
               "From the start of connecting to the first completed send (address and route resolution, a QP, "
               "connect, RTR/RTS, establish, one send): safeverbs' `sfv_cm_connect` + `sfv_channel_send` against "
               "the same steps written on librdmacm and libibverbs, rxe1 to rxe0 in one process, rounds "
               "alternating A-B-B-A (bench/cm_setup.c).\n\n"
               "| | median (us) | p90 (us) |\n|---|---:|---:|\n"
               "| safeverbs | %s | %s |\n| raw librdmacm | %s | %s |\n| safeverbs / raw | %s | %s |\n",
            num(sm, 0), num(sp, 0), num(rm, 0), num(rp, 0), ratio(sm, rm), ratio(sp, rp));
    if (isnan(sm) || isnan(rm)) fprintf(o, "\nno data: build/cm_setup did not run (it needs librdmacm and rdma_ucm in the guest).\n");
}

/* ---- the peers on one device (bench/peers.sh) ---------------------------------------------- */
static const char *const PEER_TOOLS[] = {"sfv", "raw", "perftest", "uct", "ucp", "fi", "qperf"};
static const char *const PEER_NAMES[] = {"safeverbs (sfv_bench --impl sfv)", "raw verbs (sfv_bench --impl raw)",
                                         "perftest ib_send_lat", "UCX uct am_lat, rc_verbs (ucx_perftest)",
                                         "UCX ucp tag_lat, rc_verbs (ucx_perftest)",
                                         "libfabric fi_pingpong, verbs, FI_EP_MSG", "qperf rc_lat (-cm1 -cp1)"};
enum { NPEER = 7 };
/* Why a peer is ahead where it is, one line each (printed for a peer the table finds ahead). */
static const char *const PEER_WHY[] = {
    "", "the raw loop counts completions only: no per-request record, no state or capacity check (see the cost section)",
    "ib_send_lat's loop is bare verbs, as the bench's raw loop is (its instructions per round trip, a + 2b in the table "
    "below, are about the raw loop's): work requests built once, one completion per poll, no record of its work; what "
    "safeverbs adds per request (a record, state, capacity and sequence checks, a deadline) is what the cost section's "
    "hand-tracked loop measures at its least",
    "UCX sends 64 B inline (am_short) and asks for a send completion only every 64 sends (rc_verbs' CQ moderation), "
    "so a round trip polls one receive; safeverbs signals and waits for every send (sfv_channel_inject is to close this)",
    "UCX ucp tag matching over the same rc_verbs transport (see uct)",
    "not analysed yet: fi_pingpong's loop over the verbs provider",
    "qperf's rc_lat loop is verbs with little bookkeeping of its own (fewer instructions per round trip than safeverbs' "
    "tracked path, below)"};
static void peer_why_lines(FILE *o, const char *dir) {
    char path[1024], line[512];
    FILE *in;
    snprintf(path, sizeof path, "%s/peers-why.txt", dir);
    if (!(in = fopen(path, "r"))) return;
    for (int first = 1; fgets(line, sizeof line, in); first = 0) {
        if (first) fprintf(o, "Tools that gave no figure, and why:\n\n");
        char *c = strchr(line, ',');
        line[strcspn(line, "\r\n")] = 0;
        if (!c) continue;
        *c = 0;
        fprintf(o, "- **%s**: %s\n", line, c + 1);
    }
    fprintf(o, "\n");
    fclose(in);
}
static void peers_section(FILE *o, const char *dir) {
    double lat[NPEER][64];
    int nr[NPEER] = {0}, rounds = 0;
    long size = 64;
    bool any = false;
    for (size_t i = 0; i < g_nrecs; i++)
        if (!strcmp(g_recs[i].test, "peers")) any = true, size = g_recs[i].size;
    if (!any) return;
    fprintf(o, "## The peers on one device\n\n"
               "Both ends of every tool on one device (%s), as UCX, libfabric and qperf are usually run, %s-byte "
               "send ping-pong. **Timing**: rounds in one guest boot, every tool once per round in an order rotated "
               "each round; for each round the peer's latency over safeverbs' (> 1: safeverbs is faster); the median "
               "of those per-round ratios and their spread (lowest .. highest). A difference whose spread holds 1 is a "
               "tie. Latency is half the round trip (every tool's convention), the run's mean (fi_pingpong and qperf give "
               "nothing else; sfv_bench's mean, perftest's t_avg, ucx_perftest's *overall*: its *50.0%%ile* is no "
               "median of the run here, 12 us where the wall clock says 680 us). No tool runs under SCHED_IDLE here "
               "(the other stages' setting). With both ends and rxe's own work on the guest's 2 vCPUs, a loop that "
               "polls without entering the kernel keeps the CPU the other end and rxe need. safeverbs' wait reads the "
               "clock every 64 empty polls for its deadline, and with this guest's clocksource (HPET) that is a "
               "system call, which gives the kernel its chance to run rxe's pending work and the other process; the "
               "raw loop and the other tools spin in user space. How long a spin keeps the CPU from rxe varies from "
               "run to run by orders of magnitude, so the per-round ratios spread over two or three decades and "
               "every difference in this table is within its spread (the same safeverbs and raw loops, rxe1 to rxe0 "
               "under SCHED_IDLE and alternating in one process pair, are within a few percent: the latency "
               "section).\n\n",
            meta("peer_dev"), num((double)size, 0));
    for (int t = 0; t < NPEER; t++) {
        for (int r = 1; r <= 64; r++) {
            char v[40];
            snprintf(v, sizeof v, "r%d", r);
            lat[t][r - 1] = fig("peers", "lat", v, size, PEER_TOOLS[t], "lat_us");
            if (!isnan(lat[t][r - 1])) {
                nr[t]++;
                if (r > rounds) rounds = r;
            }
        }
    }
    fprintf(o, "| tool | rounds | latency, median of the rounds (us) | peer/safeverbs per round: median | spread | verdict | target: not ahead of safeverbs |\n"
               "|---|---:|---:|---:|---|---|---|\n");
    for (int t = 0; t < NPEER; t++) {
        double ratios[64], l[64], med, lo = NAN, hi = NAN;
        int n = 0, m = 0;
        if (!nr[t]) {
            fprintf(o, "| %s | 0 | - | - | - | no figures | %s |\n", PEER_NAMES[t], t ? judge(T_PEER_LAT, NAN, PEER_TOOLS[t]) : "");
            continue;
        }
        for (int r = 0; r < rounds; r++) {
            if (!isnan(lat[t][r])) l[m++] = lat[t][r];
            if (isnan(lat[t][r]) || isnan(lat[0][r]) || lat[0][r] <= 0) continue;
            ratios[n++] = lat[t][r] / lat[0][r];
            if (isnan(lo) || ratios[n - 1] < lo) lo = ratios[n - 1];
            if (isnan(hi) || ratios[n - 1] > hi) hi = ratios[n - 1];
        }
        qsort(l, (size_t)m, sizeof *l, cmp_double);
        qsort(ratios, (size_t)n, sizeof *ratios, cmp_double);
        med = n ? (n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2) : NAN;
        {
            char spr[64], where[96];
            const char *verdict;
            snprintf(spr, sizeof spr, "%s .. %s", num(lo, 2), num(hi, 2));
            g_tie = n && lo <= 1.0 && hi >= 1.0;
            verdict = !n ? "-" : t == 0 ? "(the reference)" : g_tie ? "tie" : med > 1 ? "safeverbs ahead" : "**peer ahead**";
            snprintf(where, sizeof where, "%s latency", PEER_TOOLS[t]);
            fprintf(o, "| %s | %d | %s | %s | %s | %s | %s |\n", PEER_NAMES[t], m,
                    num(m % 2 ? l[m / 2] : (l[m / 2 - 1] + l[m / 2]) / 2, 1), t ? num(med, 3) : "1", t ? spr : "-",
                    verdict, t ? judge(T_PEER_LAT, med, where) : "");
        }
    }
    {
        bool first = true;
        for (int t = 1; t < NPEER; t++) {
            double ratios[64];
            int n = 0;
            for (int r = 0; r < rounds; r++)
                if (!isnan(lat[t][r]) && !isnan(lat[0][r]) && lat[0][r] > 0) ratios[n++] = lat[t][r] / lat[0][r];
            if (!n) continue;
            qsort(ratios, (size_t)n, sizeof *ratios, cmp_double);
            if (ratios[n - 1] < 1.0) { /* ahead in every round */
                if (first) fprintf(o, "\nWhere a peer is ahead (every round), why:\n\n");
                first = false;
                fprintf(o, "- %s: %s.\n", PEER_NAMES[t], PEER_WHY[t]);
            }
        }
    }
    fprintf(o, "\n**Instructions** (callgrind, user space, the client; the server not under valgrind): runs of N, 2N, "
               "3N, 2N and 3N round trips (N a multiple of 64; qperf: 2, 4, 6, 4 and 6 seconds, its own count of "
               "messages), each counted only inside the tool's measurement loop (callgrind --toggle-collect: "
               "sfv_bench's lib_lat; in Debian's stripped ib_send_lat and qperf, which callgrind names by offset, the "
               "function that posts and polls once per message: perftest's latency loop, qperf's rc_lat client "
               "function), so start-up, connection and report are left out. Inside the loop two things vary with "
               "timing and are taken out: clock reads made while waiting (gettimeofday, clock_gettime, and safeverbs' "
               "deadline check every 64 empty polls), and callees of the loop function called fewer than 16 times, "
               "with all below them (set-up: ib_send_lat's loop measures the CPU clock by spinning on gettimeofday, "
               "0.6 to 0.8 million instructions that differ in every run; qperf's rc_lat sets up its rdma_cm "
               "connection). What remains is fitted as *a* x round trips + *b* x polls + *c* (polls: calls of the rxe "
               "provider's poll function, the same code for every tool; how many come back empty depends on timing), "
               "plus *t* x ticks where the number of clock reads left out differs between runs (safeverbs' wait checks "
               "its deadline after every 64 empty polls of a wait, so those call sites, a few instructions each, are "
               "not a fixed share of the polls). "
               "*b* is one poll call with the tool's loop around it, *a* the rest of a round trip (post a send, post a "
               "receive, the tool's bookkeeping). The figure compared is *a* + 2*b*: one round trip of the signalled "
               "path with no empty poll, one poll per completion (the send's and the receive's), every tool counted "
               "the same way. That holds where every poll that finds work finds one completion: ib_send_lat polls one "
               "at a time; sfv_bench's server waits 1 ms before each echo here, so the send's completion is always "
               "taken before the reply comes (without it safeverbs' drain takes both in one call in some round trips); "
               "qperf polls several at a time and its server cannot be slowed, so where its send's completion and "
               "its reply meet in one poll its count drifts (about 1%% lower where the guest ran it ten times faster, "
               "and the two land in one poll more often). Queues of 16 for safeverbs and perftest (sfv_bench --depth/--rx-depth, "
               "ib_send_lat -r; ib_send_lat with its default 512 posts all its receives before its loop in runs this "
               "short, and counts none): a post's or a completion's cost varies a little with its place in the rings, "
               "so counts are linear in N only over whole turns. *residual*: how far the five runs are from their "
               "fit, the largest difference per round trip; the target is judged only where it is under 1%% of "
               "*a* + 2*b* for safeverbs and the tool, otherwise *no data*. ib_send_lat's count is exact (residual 0, "
               "the same figure in every run); safeverbs' can still move by an instruction or so per round trip "
               "(whether a wait finds its completion at once). "
               "*naive*: the slopes (Ir(kN) - Ir(jN)) / (k - j)N between whole runs, empty polls included: how far "
               "apart whole counts are. One round trip is one send and one receive on each side. UCX's and "
               "libfabric's small-message paths are counted in the cost loop instead (above), by loops of their "
               "own. *raw verbs* is sfv_bench's same ping-pong on libibverbs alone (raw_lat: the same verbs, "
               "completions counted, nothing tracked), counted the same way: where perftest's loop costs about what "
               "it costs, perftest is a loop of bare verbs too, and a layer that tracks its work (records, states, "
               "checks) cannot be below it: the cost test above measures what that tracking costs at the least "
               "(*hand-tracked raw*).\n\n"
               "| tool | a: per round trip | b: per poll | a + 2b | residual | polls per round trip (fewest) | naive per round trip (range) | safeverbs/tool (a + 2b) | target |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    double sa = fig("peers", "cg", "fit", size, "sfv", "ir_rt"), sres = fig("peers", "cg", "fit", size, "sfv", "ir_resid_max");
    for (int t = 0; t < NPEER; t++) {
        double a = fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_rt"),
               res = fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_resid_max");
        const char *cell = "";
        char where[96];
        snprintf(where, sizeof where, "%s instructions", PEER_TOOLS[t]);
        /* judged only where both counts repeat: the fourth run within 1% of the fit of all four */
        bool steady = !isnan(a) && !isnan(sa) && a > 0 && sa > 0 && !isnan(res) && !isnan(sres) && res <= 0.01 * a &&
                      sres <= 0.01 * sa;
        if (!strcmp(PEER_TOOLS[t], "perftest") || !strcmp(PEER_TOOLS[t], "qperf"))
            cell = judge(T_PEER_IR, steady ? sa / a : NAN, where);
        char naive[64];
        snprintf(naive, sizeof naive, "%s .. %s", num(fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_msg_naive_lo"), 0),
                 num(fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_msg_naive_hi"), 0));
        fprintf(o, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", PEER_NAMES[t],
                num(fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_msg"), 0),
                num(fig("peers", "cg", "fit", size, PEER_TOOLS[t], "ir_poll"), 0), num(a, 0), num(res, 1),
                num(fig("peers", "cg", "fit", size, PEER_TOOLS[t], "polls_per_msg_min"), 1), naive, t ? ratio(sa, a) : "-", cell);
    }
    fprintf(o, "| safeverbs inject + receive (against UCX am_short / libfabric inject) | - | - | - | - | - | - | - | counted "
               "deterministically in the cost loop instead (above: *inject + receive*, beside UCX's and libfabric's own "
               "loops) |\n\n");
    peer_why_lines(o, dir);
}

/* peerfit ROW FILE: FILE holds "N IR POLLS [TICKS]" lines (one callgrind run each); prints
   ROW,ir_msg (a), ROW,ir_poll (b), ROW,polls_per_msg_min, ROW,ir_msg_naive from the least-squares
   fit IR = a * N + b * POLLS [+ t * TICKS] + c (b = 0 where the polls do not vary apart from N;
   TICKS, where they differ between runs: the calls of a waiting loop's clock check every so many empty
   polls, whose call sites cost a few instructions each and are not a fixed share of the polls),
   ROW,ir_rt (a + 2b), and with more runs than unknowns ROW,ir_resid_max (the largest residual per
   N). */
static int cmd_peerfit(const char *row, const char *path) {
    enum { MAXK = 4 };
    double x[16][MAXK], y[16], m[MAXK][MAXK + 1] = {{0}}, best = NAN, co[MAXK] = {0};
    int n = 0, k = 3;
    bool ticks = false;
    char line[256];
    FILE *in = fopen(path, "r");
    if (!in) die("cannot read ", path);
    while (n < 16 && fgets(line, sizeof line, in)) {
        double a, b, c, t = 0;
        int got = sscanf(line, "%lf %lf %lf %lf", &a, &b, &c, &t);
        if (got < 3 || a <= 0) continue;
        x[n][0] = a, x[n][1] = c, x[n][2] = t, y[n] = b;
        if (n > 0 && t != x[0][2]) ticks = true; /* the same in every run: part of the constant */
        if (isnan(best) || c / a < best) best = c / a;
        n++;
    }
    fclose(in);
    if (ticks) k = 4;
    for (int i = 0; i < n; i++) x[i][k - 1] = 1; /* the constant, last (over the ticks' place without them) */
    if (n < k) {
        fprintf(stderr, "bench_report: peerfit %s: %d usable runs of %d (%s)\n", row, n, k, path);
        return 1;
    }
    for (int i = 0; i < n; i++)
        for (int r = 0; r < k; r++) {
            for (int c = 0; c < k; c++) m[r][c] += x[i][r] * x[i][c];
            m[r][k] += x[i][r] * y[i];
        }
    /* Gaussian elimination with partial pivoting; a singular system (polls proportional to N):
       no figure */
    double a = NAN, b = 0;
    {
        double w[MAXK][MAXK + 1];
        bool ok = true;
        memcpy(w, m, sizeof w);
        for (int c = 0; c < k && ok; c++) {
            int p = c;
            for (int r = c + 1; r < k; r++)
                if (fabs(w[r][c]) > fabs(w[p][c])) p = r;
            if (fabs(w[p][c]) < 1e-9 * (fabs(m[c][c]) + 1)) ok = false; /* singular: polls proportional to N */
            for (int j = 0; ok && j <= k; j++) {
                double t = w[c][j];
                w[c][j] = w[p][j];
                w[p][j] = t;
            }
            for (int r = 0; ok && r < k; r++) {
                if (r == c) continue;
                double f = w[r][c] / w[c][c];
                for (int j = c; j <= k; j++) w[r][j] -= f * w[c][j];
            }
        }
        if (ok) {
            for (int c = 0; c < k; c++) co[c] = w[c][k] / w[c][c];
            a = co[0];
            b = co[1];
        }
    }
    /* with more runs than unknowns, how far the runs are from the fit: the largest residual per
       round trip (0 where the count is exact: every empty poll costs the same, nothing else varies);
       printed even where the fit is refused below, as the evidence */
    if (isfinite(a) && isfinite(b) && n > k) {
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double f = 0, r;
            for (int c = 0; c < k; c++) f += co[c] * x[i][c];
            r = fabs(y[i] - f) / x[i][0];
            if (r > worst) worst = r;
        }
        printf("%s,ir_resid_max,%.2f\n", row, worst);
    }
    if (!isfinite(a) || !isfinite(b) || b < -0.5 || a < 0) /* the runs disagree: no figure */
        a = b = NAN;
    /* the slopes between every two runs, for the report's range */
    {
        double lo = NAN, hi = NAN;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double d;
                if (x[j][0] <= x[i][0]) continue;
                d = (y[j] - y[i]) / (x[j][0] - x[i][0]);
                if (isnan(lo) || d < lo) lo = d;
                if (isnan(hi) || d > hi) hi = d;
            }
        if (!isnan(lo)) printf("%s,ir_msg_naive_lo,%.1f\n%s,ir_msg_naive_hi,%.1f\n", row, lo, row, hi);
    }
    if (!isnan(a)) printf("%s,ir_msg,%.1f\n", row, a);
    if (!isnan(b)) printf("%s,ir_poll,%.1f\n", row, b);
    /* the signalled path without an empty poll: two polls per round trip, one per completion (the
       send's and the receive's), each at the fitted cost of a poll call */
    if (!isnan(a)) printf("%s,ir_rt,%.1f\n", row, a + 2 * b);
    printf("%s,polls_per_msg_min,%.2f\n", row, best);
    return 0;
}

/* syscalls ROW N FILE1 FILE2: system calls per operation from `strace -c` of runs of N and 2N */
static bool strace_total(const char *path, char *out) {
    char line[1024], *fl[16];
    FILE *in = fopen(path, "r");
    *out = 0;
    if (!in) return false;
    while (!*out && fgets(line, sizeof line, in)) {
        int nf = split_fields(line, fl, 16);
        if (nf >= 4 && nf <= 16 && !strcmp(fl[nf - 1], "total")) snprintf(out, 48, "%s", fl[3]);
    }
    fclose(in);
    return *out != 0;
}
/* Each system call's count in an `strace -c` table (up to max names). */
typedef struct strace_row { char name[40]; double calls; } strace_row;
static int strace_rows(const char *path, strace_row *rows, int max) {
    char line[1024], *fl[16];
    int n = 0;
    FILE *in = fopen(path, "r");
    if (!in) return 0;
    while (n < max && fgets(line, sizeof line, in)) {
        int nf = split_fields(line, fl, 16);
        if (nf < 5 || nf > 6 || fl[0][0] == '%' || fl[0][0] == '-' || !strcmp(fl[nf - 1], "total")) continue;
        snprintf(rows[n].name, sizeof rows[n].name, "%s", fl[nf - 1]);
        rows[n++].calls = strtod(fl[3], NULL);
    }
    fclose(in);
    return n;
}
static double strace_calls(const strace_row *rows, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return rows[i].calls;
    return 0;
}
static int cmd_syscalls(const char *row, const char *n, const char *f1, const char *f2) {
    char a[48], b[48];
    strace_row r1[64], r2[64];
    int n1, n2;
    if (!strace_total(f1, a) || !strace_total(f2, b)) {
        missing("strace total", strace_total(f1, a) ? f2 : f1);
        return 1;
    }
    printf("%s,syscalls_per_op,%.3f\n", row, (strtod(b, NULL) - strtod(a, NULL)) / strtod(n, NULL));
    /* each call's share, so the report can say where two loops differ */
    n1 = strace_rows(f1, r1, 64);
    n2 = strace_rows(f2, r2, 64);
    for (int i = 0; i < n2; i++)
        printf("%s,syscalls_per_op:%s,%.3f\n", row, r2[i].name, (r2[i].calls - strace_calls(r1, n1, r2[i].name)) / strtod(n, NULL));
    for (int i = 0; i < n1; i++)
        if (!strace_calls(r2, n2, r1[i].name)) printf("%s,syscalls_per_op:%s,%.3f\n", row, r1[i].name, -r1[i].calls / strtod(n, NULL));
    return 0;
}

/* hostload FILE: the meta line summing the host's samples ("load1 qemu_processes" lines) */
static int cmd_hostload(const char *path) {
    char line[256], lo[48] = "", hi[48] = "", *fl[4];
    int samples = 0, other = 0;
    FILE *in = fopen(path, "r");
    if (!in) die("cannot read ", path);
    while (fgets(line, sizeof line, in)) {
        int nf = split_fields(line, fl, 4);
        const char *l = nf > 0 ? fl[0] : "";
        if (samples++ == 0 || strtod(l, NULL) < strtod(lo, NULL)) snprintf(lo, sizeof lo, "%s", l);
        if (samples == 1 || strtod(l, NULL) > strtod(hi, NULL)) snprintf(hi, sizeof hi, "%s", l);
        if (nf > 1 && strtod(fl[1], NULL) > 1) other++;
    }
    fclose(in);
    printf("host_load=%s .. %s (1-minute load average, %d samples); another QEMU guest running in %d of them\n", lo, hi,
           samples, other);
    return 0;
}

int main(int argc, char **argv) {
    FILE *body, *o;
    char *text = NULL;
    size_t len = 0;
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "perftest") && argc == 5) return cmd_perftest(argv[2], argv[3], argv[4]);
    if (!strcmp(cmd, "rate") && argc == 6) return cmd_rate(argv[2], argv[3], argv[4], argv[5]);
    if (!strcmp(cmd, "iters") && argc == 5) return cmd_iters(argv[2], argv[3], argv[4]);
    if (!strcmp(cmd, "peerfit") && argc == 4) return cmd_peerfit(argv[2], argv[3]);
    if (!strcmp(cmd, "callgrind") && argc == 8) return cmd_callgrind(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7]);
    if (!strcmp(cmd, "syscalls") && argc == 6) return cmd_syscalls(argv[2], argv[3], argv[4], argv[5]);
    if (!strcmp(cmd, "hostload") && argc == 3) return cmd_hostload(argv[2]);
    if (argc != 5) {
        fprintf(stderr, "usage: bench_report RESULTS_CSV META_TXT OUT_MD DATA_DIR\n"
                        "       bench_report perftest FILE ROW ITERS\n"
                        "       bench_report rate BEFORE AFTER ROW ITERS\n"
                        "       bench_report iters CSV ROW SECONDS\n"
                        "       bench_report callgrind ROW N1 N2 BATCH BASE1 BASE2\n"
                        "       bench_report syscalls ROW N FILE1 FILE2\n"
                        "       bench_report hostload FILE\n");
        return 2;
    }
    load_csv(argv[1]);
    load_meta(argv[2]);
    for (size_t k = 0; k < sizeof LAT_OPS / sizeof *LAT_OPS; k++) {
        char name[64];
        snprintf(name, sizeof name, "lat_%s.dat", LAT_OPS[k]);
        write_dat(argv[4], name, "lat", LAT_OPS[k], "busy", "median_us", "p99_us");
    }
    for (size_t k = 0; k < sizeof BW_OPS / sizeof *BW_OPS; k++) {
        char name[64];
        snprintf(name, sizeof name, "bw_%s.dat", BW_OPS[k]);
        write_dat(argv[4], name, "bw", BW_OPS[k], "stream", "mib_s", NULL);
    }
    /* the sections first (they judge the targets), then the page with the summary on top */
    body = open_memstream(&text, &len);
    if (!body) die("out of memory", NULL);
    latency_section(body);
    throughput_section(body);
    rate_section(body);
    repeat_section(body);
    wait_section(body);
    cost_section(body);
    peers_section(body, argv[4]);
    scale_section(body, argv[4]);
    inflight_section(body);
    setup_section(body);
    alloc_section(body);
    syscall_section(body);
    fclose(body);

    o = fopen(argv[3], "w");
    if (!o) die("cannot write ", argv[3]);
    fprintf(o, "# safeverbs benchmark results\n\n"
               "Written by `make bench` (bench/run.sh, build/sfv_bench, build/bench_report) on %s; every figure is "
               "in results.csv. safeverbs %s (commit %s), measured against the same work written directly on "
               "libibverbs (the raw side of bench/sfv_bench.c: same harness, same QP settings) and against "
               "perftest's binaries, on the same devices in the same run.%s\n\n",
            meta("date"), meta("safeverbs"), meta("commit"),
            strcmp(meta("quick"), "1") == 0 ? " **Quick run (SAFEVERBS_BENCH_QUICK=1): fewer sizes and iterations.**" : "");
    fprintf(o, "## Machine\n\n"
               "| | |\n|---|---|\n"
               "| host | `%s`, %s CPUs |\n"
               "| where it ran | %s |\n"
               "| kernel there | `%s`, %s CPUs, %s, clocksource %s |\n"
               "| rdma-core / libibverbs | %s / %s |\n"
               "| perftest | %s |\n"
               "| UCX / libfabric / qperf | %s / %s / %s |\n"
               "| valgrind | %s |\n"
               "| devices | %s, active MTU %s |\n"
               "| host load during the run | %s |\n"
               "| run time | %s s (%s)%s |\n\n",
            meta("host_uname"), meta("host_nproc"),
            strcmp(meta("in_vm"), "1") == 0 ? "QEMU guest under TCG emulation (tests/vm/run.sh): 2 vCPUs, Soft-RoCE (rxe) on a veth pair"
                                            : "this host",
            meta("guest_uname"), meta("guest_nproc"), meta("cpu"), meta("clocksource"), meta("rdma_core"),
            meta("libibverbs"), meta("perftest"), meta("ucx"), meta("libfabric"), meta("qperf"), meta("valgrind"), meta("devices"), meta("mtu"), meta("host_load"),
            meta("seconds"), meta("stages"),
            strcmp(meta("failures"), "0") == 0 ? "" : ", **with failures: see the run's log**");
    fprintf(o, "Everything here, the kernel's RDMA stack included, runs under instruction-set emulation on a shared "
               "2-core machine: absolute figures are far below real hardware; only ratios within this run mean "
               "anything, and tails (p99) are noisy.\n\n");
    fprintf(o, "## Targets\n\n| target | rule | met | NOT met | no data | worst | at |\n|---|---|---:|---:|---:|---:|---|\n");
    for (int t = 0; t < T_COUNT; t++) {
        const target *g = &g_t[t];
        fprintf(o, "| %s | %s | %d | %d | %d | %s | %s |\n", g->name, g->rule, g->met, g->missed, g->nodata,
                isnan(g->worst) ? "-" : num(g->worst, 3), g->worst_at[0] ? g->worst_at : "-");
    }
    fprintf(o, "\n![latency](latency.png)\n\n![throughput](throughput.png)\n\n");
    fwrite(text, 1, len, o);
    free(text);
    if (fclose(o) != 0) die("cannot write ", argv[3]);
    free(g_recs);
    return 0;
}
