/* fake_verbs.c - a fake NIC for the device-free tests (see fake_verbs.h). It defines the ibv_*
   functions that safeverbs.h calls: the exported ones by name, and the inline ones of
   <infiniband/verbs.h> (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) through the
   context's ops table, as a provider does. Link it instead of -libverbs.

   What it models (RC, enough for the library's paths):
   - a QP moves RESET -> INIT -> RTR -> RTS (each step needs its attribute mask) and to ERR from
     any state; RTR refuses (EINVAL) a peer's IPv4 GID of another /24 than this side's (rxe
     answers ETIMEDOUT there; the fake plays a driver that says EINVAL, for that hint's test); ERR flushes every outstanding work request (IBV_WC_WR_FLUSH_ERR), and work posted
     to a QP in ERR is flushed at once;
   - work runs when the fake makes progress (every post, poll and state change), in order per
     QP: a send or a write with immediate waits while the peer has no receive posted (RNR,
     retried forever) and while the peer QP is only in INIT (its packets are dropped and retried);
     a peer that is gone or in ERR, or that is not connected back to this QP with the PSN this QP
     sends, fails the work with RETRY_EXC_ERR;
   - keys: an element's lkey must name a live MR of the QP's PD that holds the bytes (and has
     LOCAL_WRITE where the NIC writes), else LOC_PROT_ERR; a remote region must lie in a live MR
     of the peer's PD whose rkey it names, with the access (REMOTE_WRITE / REMOTE_READ) in the MR
     and in the peer QP, else REM_ACCESS_ERR (a zero-length write or read checks no key, IB C9-88:
     only the peer QP's access); a message longer than the receive gives the receiver
     LOC_LEN_ERR and the sender REM_INV_REQ_ERR; every error moves the QP to ERR;
   - completion channels: a pipe; an armed CQ writes one event into it on its next completion;
     destroying a CQ whose events were not all acknowledged aborts (real libibverbs hangs);
   - atomics (compare-and-swap, fetch-and-add) on an aligned 8-byte word of a live MR with
     REMOTE_ATOMIC (MR and peer QP; else REM_ACCESS_ERR), in host byte order, the old value
     scattered into one 8-byte element; the device says IBV_ATOMIC_HCA (fk_set_atomic_cap);
   - a CQ that would overflow aborts (the library sizes its CQs for everything it posts).
   The data path (post, poll, arm) takes one lock, so ranks on threads can share the fake (the
   node barrier); the control verbs are for one thread (all of them take the lock after
   fk_set_threaded). */
#define _GNU_SOURCE
#include "fake_verbs.h"

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define FK_NDEV 2
#define FK_MAX_SGE 16
#define FK_GIDS 4
#define FK_MAX_TRACE 65536

/* ---- failure injection and accounting ------------------------------------------------------ */
static long fk_ncalls, fk_fail_at;
static const char *fk_failed_name;
static const char *fk_trace[FK_MAX_TRACE], *fk_trace_detail[FK_MAX_TRACE];
static void *fk_trace_pc[FK_MAX_TRACE];
static void *fk_pc; /* where the library called the verb or allocator being counted */
/* fk_set_threaded: every counted entry point runs under fk_lock (recursive: the data path's
   entries take it too), held to the end of its scope by the cleanup attribute. */
static bool fk_threaded;
static pthread_mutex_t fk_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
#if defined(__SANITIZE_THREAD__)
/* Under TSan the lock orders nothing of the library's (a real provider has no one lock that
   every verb takes: through this one, any two calls of the library on two threads would be
   ordered, hiding its races), and the fake's own accesses, which the lock orders, are not
   looked at. */
void AnnotateIgnoreSyncBegin(const char *file, int line);
void AnnotateIgnoreSyncEnd(const char *file, int line);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
static void fk_lock_take(void) {
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    pthread_mutex_lock(&fk_lock);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
}
static void fk_lock_give(void) {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    pthread_mutex_unlock(&fk_lock);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
}
#else
static void fk_lock_take(void) { pthread_mutex_lock(&fk_lock); }
static void fk_lock_give(void) { pthread_mutex_unlock(&fk_lock); }
#endif
static int fk_guard_enter(void) {
    if (!fk_threaded) return 0;
    fk_lock_take();
    return 1;
}
static void fk_guard_leave(const int *held) { if (*held) fk_lock_give(); }
void fk_set_threaded(bool on) { fk_threaded = on; }
/* At the top of every counted entry point: remembers the library's call site. */
#define FK_SITE() __attribute__((cleanup(fk_guard_leave))) const int fk_held = fk_guard_enter(); (void)fk_held; (fk_pc = __builtin_return_address(0))
static long fk_live_n[FK_KINDS];
static int fk_link_layer = IBV_LINK_LAYER_ETHERNET;
static int fk_port_state = IBV_PORT_ACTIVE;
static enum ibv_atomic_cap fk_atomic_cap = IBV_ATOMIC_HCA;
static unsigned fk_max_inline = 65536; /* the largest max_inline_data a QP may ask for */
static int fk_rd_atom = 16, fk_init_rd_atom = 16; /* max_qp_rd_atom, max_qp_init_rd_atom */
static bool fk_no_flush;               /* ERR flushes nothing: a NIC that never flushes */
static bool fk_flush_quiet;            /* ERR flushes unsignaled send work with no completion (against IBA) */
static bool fk_mw_on;                  /* type 2 memory windows (max_mw, MEM_WINDOW_TYPE_2B) */
static int fk_mw_dealloc_fail;         /* that many ibv_dealloc_mw calls fail with EIO */
static int fk_bind_fail;               /* that many binds complete with MW_BIND_ERR */
#define FK_FAIL_NAMES 4
static const char *fk_fail_name_s[FK_FAIL_NAMES]; /* the next fk_fail_name_n[i] calls of verb i fail */
static int fk_fail_name_n[FK_FAIL_NAMES];
static int fk_partial; /* a failed post of a list first posts this many of its work requests */
static bool fk_partial_runs; /* and that part runs before the call returns */
static bool fk_dmabuf_on;              /* ibv_reg_dmabuf_mr registers (as rdma-core: mr->addr = offset) */
static uint32_t fk_gids = FK_GIDS, fk_gid_v4 = 1; /* RoCE GID table length, the IPv4 GID's index */
static unsigned fk_addr_gen; /* added to every LID and to each GID's byte 14: the port's address changed */
static int fk_max_cqe = 1 << 16;       /* ibv_device_attr.max_cqe the devices report (fk_set_max_cqe) */
static int fk_ports = 1;               /* ports each device has (fk_set_ports); a QP comes up only on port 1 */

static bool fk_inject_detail(const char *name, const char *detail) {
    fk_ncalls++;
    if (fk_ncalls <= FK_MAX_TRACE) {
        fk_trace[fk_ncalls - 1] = name;
        fk_trace_detail[fk_ncalls - 1] = detail;
        fk_trace_pc[fk_ncalls - 1] = fk_pc;
    }
    if (fk_fail_at && fk_ncalls == fk_fail_at) {
        fk_failed_name = name;
        return true;
    }
    for (int i = 0; i < FK_FAIL_NAMES; i++)
        if (fk_fail_name_n[i] > 0 && strcmp(name, fk_fail_name_s[i]) == 0) {
            fk_fail_name_n[i]--;
            fk_failed_name = name;
            return true;
        }
    return false;
}
static bool fk_inject(const char *name) { return fk_inject_detail(name, ""); }

static char fk_dev_path[IBV_SYSFS_PATH_MAX]; /* fake0's uverbs node (fk_set_dev_path), "" by default */
static int fk_list_errno; /* fk_set_device_list_errno: ibv_get_device_list fails with it; 0: works */
void fk_reset(void) {
    fk_ncalls = 0;
    fk_fail_at = 0;
    fk_failed_name = NULL;
    fk_link_layer = IBV_LINK_LAYER_ETHERNET;
    fk_port_state = IBV_PORT_ACTIVE;
    fk_partial = 0;
    fk_partial_runs = false;
    fk_max_inline = 65536;
    fk_rd_atom = fk_init_rd_atom = 16;
    fk_no_flush = false;
    fk_flush_quiet = false;
    fk_mw_on = false;
    fk_mw_dealloc_fail = 0;
    fk_bind_fail = 0;
    memset(fk_fail_name_n, 0, sizeof fk_fail_name_n);
    fk_atomic_cap = IBV_ATOMIC_HCA;
    fk_dmabuf_on = false;
    fk_gids = FK_GIDS;
    fk_gid_v4 = 1;
    fk_addr_gen = 0;
    fk_max_cqe = 1 << 16;
    fk_ports = 1;
    fk_dev_path[0] = 0;
    fk_list_errno = 0;
}
void fk_set_device_list_errno(int errnum) { fk_list_errno = errnum; }
void fk_set_dev_path(const char *path) { snprintf(fk_dev_path, sizeof fk_dev_path, "%s", path ? path : ""); }
void fk_set_dmabuf(bool on) { fk_dmabuf_on = on; }
void fk_set_addr_gen(unsigned gen) { fk_addr_gen = gen; }
void fk_set_gid_table(uint32_t len, uint32_t ipv4_index) {
    fk_gids = len;
    fk_gid_v4 = ipv4_index;
}
void fk_set_partial_post(int n) { fk_partial = n; }
void fk_set_partial_post_runs(bool on) { fk_partial_runs = on; }
/* How many work requests of a failing list of `len` to post first: fk_partial, if fewer. */
static int fk_budget(int len) { return fk_partial < len ? fk_partial : 0; }
void fk_set_link_layer(int link_layer) { fk_link_layer = link_layer; }
void fk_set_port_state(int state) { fk_port_state = state; }
void fk_set_max_cqe(int n) { fk_max_cqe = n; }
void fk_set_ports(int n) { fk_ports = n; }
void fk_set_atomic_cap(int cap) { fk_atomic_cap = (enum ibv_atomic_cap)cap; }
void fk_set_max_inline(unsigned max) { fk_max_inline = max; }
void fk_set_rd_atom(int qp_rd_atom, int qp_init_rd_atom) {
    fk_rd_atom = qp_rd_atom;
    fk_init_rd_atom = qp_init_rd_atom;
}
void fk_set_no_flush(bool on) { fk_no_flush = on; }
void fk_set_flush_unsignaled_quiet(bool on) { fk_flush_quiet = on; }
void fk_set_mw(bool on) { fk_mw_on = on; }
void fk_set_mw_dealloc_fail(int n) { fk_mw_dealloc_fail = n; }
void fk_set_bind_fail(int n) { fk_bind_fail = n; }
static void fk_bug(const char *what);
void fk_fail_name(const char *verb, int n) {
    int i, free_at = -1;
    for (i = 0; i < FK_FAIL_NAMES; i++) {
        if (fk_fail_name_n[i] > 0 && strcmp(fk_fail_name_s[i], verb) == 0) break;
        if (fk_fail_name_n[i] <= 0 && free_at < 0) free_at = i;
    }
    if (i == FK_FAIL_NAMES) i = free_at;
    if (i < 0) fk_bug("fk_fail_name: more than 4 verbs at once");
    fk_fail_name_s[i] = verb;
    fk_fail_name_n[i] = n;
}
void fk_fail_nth(long n) {
    fk_ncalls = 0;
    fk_fail_at = n;
    fk_failed_name = NULL;
}
long fk_calls(void) { return fk_ncalls; }
const char *fk_call_name(long i) { return i >= 1 && i <= fk_ncalls && i <= FK_MAX_TRACE ? fk_trace[i - 1] : NULL; }
unsigned long fk_call_site(long i) {
    Dl_info info;
    void *pc = i >= 1 && i <= fk_ncalls && i <= FK_MAX_TRACE ? fk_trace_pc[i - 1] : NULL;
    if (!pc) return 0;
    if (dladdr(pc, &info) && info.dli_fbase) return (unsigned long)((char *)pc - (char *)info.dli_fbase) - 1; /* the call */
    return (unsigned long)pc;
}
const char *fk_call_detail(long i) { return i >= 1 && i <= fk_ncalls && i <= FK_MAX_TRACE ? fk_trace_detail[i - 1] : NULL; }
const char *fk_failed(void) { return fk_failed_name; }
long fk_live(enum fk_kind kind) { return fk_live_n[kind]; }
long fk_live_total(void) {
    long t = 0;
    int k;
    for (k = 0; k < FK_KINDS; k++) t += fk_live_n[k];
    return t;
}
const char *fk_kind_name(enum fk_kind kind) {
    static const char *const names[FK_KINDS] = {"device lists", "contexts", "PDs", "MRs", "CQs", "QPs", "completion channels"};
    return names[kind];
}

void *fk_malloc(size_t size) {
    FK_SITE();
    return fk_inject("malloc") ? NULL : malloc(size);
}
void *fk_calloc(size_t n, size_t size) {
    FK_SITE();
    return fk_inject("calloc") ? NULL : calloc(n, size);
}
void fk_free(void *p) { free(p); }

/* Allocates a fake object (never fails by itself: the verb decides) and counts it. */
static void *fk_new(size_t size, enum fk_kind kind) {
    void *p = calloc(1, size);
    if (!p) abort();
    fk_live_n[kind]++;
    return p;
}
static void fk_delete(void *p, enum fk_kind kind) {
    free(p);
    fk_live_n[kind]--;
}

static void fk_bug(const char *what) {
    fprintf(stderr, "fake_verbs: %s\n", what);
    abort();
}

/* ---- objects ------------------------------------------------------------------------------- */
#define FK_EVENTS 16
typedef struct fk_ctx {
    struct ibv_context ctx;
    int index;
    int pds, cqs, ccs;
    int ev_wfd;                                  /* the write end of async_fd's pipe */
    struct ibv_async_event ev[FK_EVENTS];        /* injected, not yet read */
    int ev_first, ev_n;
} fk_ctx;
static unsigned long fk_async_read, fk_async_acked;
typedef struct fk_pd { struct ibv_pd pd; int mrs, qps, mws; } fk_pd;
/* A type 2 memory window: bound by a work request to one QP, a slice and access. */
typedef struct fk_mw { struct ibv_mw mw; int bound; uint32_t qpn, rkey; uint64_t addr, len; unsigned access; struct fk_mw *next; } fk_mw;
static fk_mw *fk_mws;
static long fk_mw_live;
long fk_mw_count(void) { return fk_mw_live; }
typedef struct fk_mr { struct ibv_mr mr; unsigned access; struct fk_mr *next; } fk_mr;
typedef struct fk_cc { struct ibv_comp_channel cc; int wfd; int cqs; } fk_cc;
typedef struct fk_cq {
    struct ibv_cq cq;
    struct ibv_wc *wcs;
    int head, count, qps;
    bool armed;
    unsigned long events, acked;
} fk_cq;
typedef struct fk_swr {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned flags;
    uint32_t imm_be;
    uint64_t raddr;
    uint32_t rkey;
    uint64_t compare_add, swap; /* atomics */
    int n;
    struct ibv_sge sg[FK_MAX_SGE];
    unsigned char *inl; /* inline data, copied at post */
    struct ibv_mw *bmw; /* a bind's window, slice and new rkey */
    struct ibv_mw_bind_info binfo;
    uint32_t brkey;
    uint32_t inl_len;
} fk_swr;
typedef struct fk_rwr { uint64_t wr_id; int n; struct ibv_sge sg[FK_MAX_SGE]; } fk_rwr;
typedef struct fk_srq { struct ibv_srq srq; fk_rwr *rq; uint32_t head, count, max; int qps; } fk_srq;
typedef struct fk_qp {
    struct ibv_qp qp;
    fk_srq *srq;
    struct fk_qp *next;
    struct ibv_qp_cap cap;
    int sq_sig_all;
    unsigned access;
    uint32_t dest_qpn, rq_psn, sq_psn;
    fk_swr *sq;
    uint32_t sq_head, sq_count;
    fk_rwr *rq;
    uint32_t rq_head, rq_count;
} fk_qp;

static struct ibv_device fk_devs[FK_NDEV];
static fk_mr *fk_mrs;
static fk_qp *fk_qps;
static uint32_t fk_next_key = 0x100, fk_next_qpn = 0x11;
void fk_set_next_key(uint32_t key) { fk_next_key = key; }

static int fk_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int fk_req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* The ops table's entries: the unlocked bodies below under one lock (fk_lock, above). */
static int fk_locked_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    int r;
    if (!fk_threaded) pthread_mutex_lock(&fk_lock); /* (threaded: FK_SITE's lock) */
    FK_SITE();
    r = fk_poll_cq(cq, n, wc);
    if (!fk_threaded) pthread_mutex_unlock(&fk_lock);
    return r;
}
static int fk_locked_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
    int r;
    if (!fk_threaded) pthread_mutex_lock(&fk_lock); /* (threaded: FK_SITE's lock) */
    FK_SITE();
    r = fk_req_notify_cq(cq, solicited_only);
    if (!fk_threaded) pthread_mutex_unlock(&fk_lock);
    return r;
}
static int fk_locked_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    int r;
    if (!fk_threaded) pthread_mutex_lock(&fk_lock); /* (threaded: FK_SITE's lock) */
    FK_SITE();
    r = fk_post_send(qp, wr, bad);
    if (!fk_threaded) pthread_mutex_unlock(&fk_lock);
    return r;
}
static struct ibv_mw *fk_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
static int fk_dealloc_mw(struct ibv_mw *mw);
static int fk_locked_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    int r;
    if (!fk_threaded) pthread_mutex_lock(&fk_lock); /* (threaded: FK_SITE's lock) */
    FK_SITE();
    r = fk_post_recv(qp, wr, bad);
    if (!fk_threaded) pthread_mutex_unlock(&fk_lock);
    return r;
}

/* ---- devices ------------------------------------------------------------------------------- */
struct ibv_device **ibv_get_device_list(int *num) {
    struct ibv_device **l;
    int i;
    FK_SITE();
    if (fk_inject("ibv_get_device_list")) {
        errno = ENOMEM;
        return NULL;
    }
    if (fk_list_errno) { /* (a host without RDMA in its kernel: rdma-core says ENOSYS) */
        errno = fk_list_errno;
        return NULL;
    }
    l = (struct ibv_device **)fk_new((FK_NDEV + 1) * sizeof *l, FK_DEVICE_LIST);
    for (i = 0; i < FK_NDEV; i++) {
        snprintf(fk_devs[i].name, sizeof fk_devs[i].name, "fake%d", i);
        snprintf(fk_devs[i].ibdev_path, sizeof fk_devs[i].ibdev_path, "/nonexistent/fake%d", i);
        snprintf(fk_devs[i].dev_path, sizeof fk_devs[i].dev_path, "%s", i == 0 ? fk_dev_path : ""); /* (fk_set_dev_path) */
        fk_devs[i].node_type = IBV_NODE_CA;
        fk_devs[i].transport_type = IBV_TRANSPORT_IB;
        l[i] = &fk_devs[i];
    }
    if (num) *num = FK_NDEV;
    return l;
}
void ibv_free_device_list(struct ibv_device **list) {
    FK_SITE(); /* (not counted: under the lock of fk_set_threaded only) */
    if (list) fk_delete(list, FK_DEVICE_LIST);
}
const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }
__be64 ibv_get_device_guid(struct ibv_device *device) {
    uint64_t g = 0x0002c90300a0b000ull + (uint64_t)(device - fk_devs);
    uint8_t b[8];
    __be64 out;
    int i;
    for (i = 0; i < 8; i++) b[i] = (uint8_t)(g >> (56 - 8 * i));
    memcpy(&out, b, 8);
    return out;
}

struct ibv_context *ibv_open_device(struct ibv_device *device) {
    fk_ctx *c;
    FK_SITE();
    if (fk_inject("ibv_open_device")) {
        errno = ENODEV;
        return NULL;
    }
    c = (fk_ctx *)fk_new(sizeof *c, FK_CONTEXT);
    c->index = (int)(device - fk_devs);
    c->ctx.device = device;
    c->ctx.cmd_fd = -1;
    {   /* the async event fd: a pipe, one byte per injected event (fk_inject_async_event) */
        int fds[2];
        if (pipe(fds) != 0) fk_bug("pipe");
        c->ctx.async_fd = fds[0];
        c->ev_wfd = fds[1];
    }
    c->ctx.num_comp_vectors = 1;
    c->ctx.abi_compat = NULL; /* not extended: ibv_query_port takes the exported path */
    c->ctx.ops.poll_cq = fk_locked_poll_cq;
    c->ctx.ops.req_notify_cq = fk_locked_req_notify_cq;
    c->ctx.ops.post_send = fk_locked_post_send;
    c->ctx.ops.post_recv = fk_locked_post_recv;
    c->ctx.ops.alloc_mw = fk_alloc_mw;
    c->ctx.ops.dealloc_mw = fk_dealloc_mw;
    return &c->ctx;
}
int ibv_close_device(struct ibv_context *context) {
    fk_ctx *c = (fk_ctx *)context;
    FK_SITE();
    if (fk_inject("ibv_close_device")) return EIO;
    if (c->pds || c->cqs || c->ccs) return EBUSY; /* kept, so the live count shows the leak */
    if (fk_async_read != fk_async_acked) fk_bug("ibv_close_device with async events read and not acked");
    close(c->ctx.async_fd);
    close(c->ev_wfd);
    fk_delete(c, FK_CONTEXT);
    return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a) {
    FK_SITE();
    if (fk_inject("ibv_query_device")) return EIO;
    memset(a, 0, sizeof *a);
    snprintf(a->fw_ver, sizeof a->fw_ver, "fake");
    a->max_mr_size = UINT64_MAX;
    a->max_qp = 1 << 16;
    a->max_qp_wr = 4096;
    a->max_sge = FK_MAX_SGE;
    a->max_sge_rd = FK_MAX_SGE;
    a->max_cq = 1 << 16;
    a->max_cqe = fk_max_cqe;
    a->max_mr = 1 << 16;
    a->max_pd = 1 << 16;
    a->max_qp_rd_atom = fk_rd_atom;
    a->max_qp_init_rd_atom = fk_init_rd_atom;
    a->max_res_rd_atom = 1 << 20;
    a->max_srq = 1 << 10;
    a->max_srq_wr = 4096;
    a->max_srq_sge = FK_MAX_SGE;
    if (fk_mw_on) {
        a->max_mw = 1 << 10;
        a->device_cap_flags |= IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    }
    a->atomic_cap = fk_atomic_cap;
    a->node_guid = ibv_get_device_guid(context->device);
    a->vendor_id = 0x02c9;
    a->vendor_part_id = 4119;
    a->phys_port_cnt = (uint8_t)fk_ports;
    return 0;
}

static int fk_port_ok(struct ibv_context *context, uint32_t port) {
    (void)context;
    return port >= 1 && port <= (uint32_t)fk_ports;
}

int (ibv_query_port)(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr) {
    struct ibv_port_attr *pa = (struct ibv_port_attr *)port_attr; /* the macro passes the whole struct */
    fk_ctx *c = (fk_ctx *)context;
    FK_SITE();
    if (fk_inject("ibv_query_port")) return EIO;
    if (!fk_port_ok(context, port_num)) return EINVAL;
    memset(pa, 0, sizeof *pa);
    pa->state = (enum ibv_port_state)fk_port_state;
    pa->max_mtu = IBV_MTU_4096;
    pa->active_mtu = IBV_MTU_1024;
    pa->gid_tbl_len = (int)fk_gids;
    pa->max_msg_sz = 1u << 31;
    pa->pkey_tbl_len = 1;
    pa->lid = fk_link_layer == IBV_LINK_LAYER_INFINIBAND ? (uint16_t)(1 + c->index + fk_addr_gen) : 0;
    pa->link_layer = (uint8_t)fk_link_layer;
    pa->phys_state = 5;
    return 0;
}

/* GID table. RoCE: 0 fe80::<dev> (v2), 1 ::ffff:10.0.0.<dev+1> (v2), 2 and 3 empty.
   InfiniBand: 0 fe80::<guid> (IB), the rest empty. */
static bool fk_gid(const fk_ctx *c, uint32_t index, struct ibv_gid_entry *e) {
    memset(e, 0, sizeof *e);
    e->gid_index = index;
    e->port_num = 1;
    e->gid.raw[14] = (uint8_t)fk_addr_gen;
    if (fk_link_layer == IBV_LINK_LAYER_INFINIBAND) {
        if (index != 0) return false;
        e->gid.raw[0] = 0xfe;
        e->gid.raw[1] = 0x80;
        e->gid.raw[15] = (uint8_t)(1 + c->index);
        e->gid_type = IBV_GID_TYPE_IB;
        return true;
    }
    if (index == 0) {
        e->gid.raw[0] = 0xfe;
        e->gid.raw[1] = 0x80;
        e->gid.raw[15] = (uint8_t)(1 + c->index);
    } else if (index == fk_gid_v4) {
        e->gid.raw[10] = e->gid.raw[11] = 0xff;
        e->gid.raw[12] = 10;
        e->gid.raw[15] = (uint8_t)(1 + c->index);
    } else {
        return false;
    }
    e->gid_type = IBV_GID_TYPE_ROCE_V2;
    e->ndev_ifindex = 2 + (uint32_t)c->index;
    return true;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size) {
    FK_SITE();
    (void)flags;
    if (fk_inject("ibv_query_gid_ex")) return EIO;
    if (entry_size < sizeof *entry || !fk_port_ok(context, port_num) || gid_index >= fk_gids) return EINVAL;
    return fk_gid((const fk_ctx *)context, gid_index, entry) ? 0 : ENODATA;
}

/* ---- PDs and MRs --------------------------------------------------------------------------- */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
    fk_pd *p;
    FK_SITE();
    if (fk_inject("ibv_alloc_pd")) {
        errno = ENOMEM;
        return NULL;
    }
    p = (fk_pd *)fk_new(sizeof *p, FK_PD);
    p->pd.context = context;
    ((fk_ctx *)context)->pds++;
    return &p->pd;
}
int ibv_dealloc_pd(struct ibv_pd *pd) {
    fk_pd *p = (fk_pd *)pd;
    FK_SITE();
    if (fk_inject("ibv_dealloc_pd")) return EIO;
    if (p->mrs || p->qps || p->mws) return EBUSY;
    ((fk_ctx *)pd->context)->pds--;
    fk_delete(p, FK_PD);
    return 0;
}

static struct ibv_mr *fk_reg(struct ibv_pd *pd, void *addr, size_t length, unsigned access) {
    fk_mr *m;
    if (fk_inject("ibv_reg_mr")) {
        errno = ENOMEM;
        return NULL;
    }
    if (!addr || !length || ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
        errno = EINVAL;
        return NULL;
    }
    m = (fk_mr *)fk_new(sizeof *m, FK_MR);
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.lkey = fk_next_key++;
    m->mr.rkey = 0x800000u + fk_next_key++; /* never equal to an lkey */
    m->access = access;
    m->next = fk_mrs;
    fk_mrs = m;
    ((fk_pd *)pd)->mrs++;
    return &m->mr;
}
struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access) {
    FK_SITE();
    return fk_reg(pd, addr, length, (unsigned)access);
}
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access) {
    FK_SITE();
    if (iova != (uint64_t)(uintptr_t)addr) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return fk_reg(pd, addr, length, access);
}
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
    FK_SITE();
    (void)iova; (void)fd;
    if (fk_inject("ibv_reg_dmabuf_mr")) {
        errno = ENOMEM;
        return NULL;
    }
    if (fk_dmabuf_on) { /* keys only (nothing posts to it); addr as rdma-core sets it: the offset */
        fk_mr *m = (fk_mr *)fk_new(sizeof *m, FK_MR);
        m->mr.context = pd->context;
        m->mr.pd = pd;
        m->mr.addr = (void *)(uintptr_t)offset;
        m->mr.length = length;
        m->mr.lkey = fk_next_key++;
        m->mr.rkey = 0x800000u + fk_next_key++;
        m->access = (unsigned)access;
        m->next = fk_mrs;
        fk_mrs = m;
        ((fk_pd *)pd)->mrs++;
        return &m->mr;
    }
    errno = EOPNOTSUPP; /* no DMA-BUF in the fake unless fk_set_dmabuf */
    return NULL;
}
int ibv_dereg_mr(struct ibv_mr *mr) {
    fk_mr **pp;
    FK_SITE();
    if (fk_inject("ibv_dereg_mr")) return EIO;
    for (pp = &fk_mrs; *pp; pp = &(*pp)->next)
        if (&(*pp)->mr == mr) {
            fk_mr *m = *pp;
            *pp = m->next;
            ((fk_pd *)mr->pd)->mrs--;
            fk_delete(m, FK_MR);
            return 0;
        }
    fk_bug("ibv_dereg_mr of an MR that is not registered");
    return EINVAL;
}

/* ---- memory windows (fk_set_mw) ------------------------------------------------------------ */
static struct ibv_mw *fk_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type) {
    fk_mw *m;
    FK_SITE();
    if (fk_inject("ibv_alloc_mw")) {
        errno = ENOMEM;
        return NULL;
    }
    if (!fk_mw_on) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (type != IBV_MW_TYPE_2) {
        errno = EINVAL;
        return NULL;
    }
    m = (fk_mw *)calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    m->mw.context = pd->context;
    m->mw.pd = pd;
    m->mw.type = type;
    m->mw.rkey = 0x400000u + ((fk_next_key++ & 0xFFFF) << 8);
    m->next = fk_mws;
    fk_mws = m;
    ((fk_pd *)pd)->mws++;
    fk_mw_live++;
    return &m->mw;
}
static int fk_dealloc_mw(struct ibv_mw *mw) {
    fk_mw **pp;
    FK_SITE();
    if (fk_inject("ibv_dealloc_mw")) return EIO;
    if (fk_mw_dealloc_fail > 0) {
        fk_mw_dealloc_fail--;
        return EIO;
    }
    for (pp = &fk_mws; *pp; pp = &(*pp)->next)
        if (&(*pp)->mw == mw) {
            fk_mw *m = *pp;
            *pp = m->next;
            ((fk_pd *)mw->pd)->mws--;
            fk_mw_live--;
            free(m);
            return 0;
        }
    fk_bug("ibv_dealloc_mw of an unknown window");
    return EINVAL;
}
/* The bound window a remote access by QP qpn with rkey goes through, if it allows it. */
static fk_mw *fk_mw_for(uint32_t qpn, uint32_t rkey, uint64_t addr, uint64_t len, unsigned access) {
    fk_mw *m;
    for (m = fk_mws; m; m = m->next) {
        if (!m->bound || m->rkey != rkey) continue;
        if (m->qpn != qpn) return NULL;
        if (addr < m->addr || len > m->len || addr - m->addr > m->len - len) return NULL;
        if ((m->access & access) != access) return NULL;
        return m;
    }
    return NULL;
}

/* ---- completion channels and CQs ----------------------------------------------------------- */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context) {
    fk_cc *cc;
    int fds[2];
    FK_SITE();
    if (fk_inject("ibv_create_comp_channel")) {
        errno = EMFILE;
        return NULL;
    }
    if (pipe2(fds, O_CLOEXEC) != 0) return NULL;
    cc = (fk_cc *)fk_new(sizeof *cc, FK_COMP_CHANNEL);
    cc->cc.context = context;
    cc->cc.fd = fds[0];
    cc->wfd = fds[1];
    ((fk_ctx *)context)->ccs++;
    return &cc->cc;
}
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel) {
    fk_cc *cc = (fk_cc *)channel;
    FK_SITE();
    if (fk_inject("ibv_destroy_comp_channel")) return EIO;
    if (cc->cqs) return EBUSY;
    close(cc->cc.fd);
    close(cc->wfd);
    ((fk_ctx *)channel->context)->ccs--;
    fk_delete(cc, FK_COMP_CHANNEL);
    return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel, int comp_vector) {
    fk_cq *q;
    FK_SITE();
    (void)comp_vector;
    if (fk_inject("ibv_create_cq")) {
        errno = ENOMEM;
        return NULL;
    }
    if (cqe < 1 || cqe > (1 << 16) || (fk_max_cqe > 0 && cqe > fk_max_cqe)) { /* (over the max_cqe it reports: refused, as rxe does) */
        errno = EINVAL;
        return NULL;
    }
    q = (fk_cq *)fk_new(sizeof *q, FK_CQ);
    q->wcs = (struct ibv_wc *)calloc((size_t)cqe, sizeof *q->wcs);
    if (!q->wcs) abort();
    q->cq.context = context;
    q->cq.channel = channel;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    if (channel) ((fk_cc *)channel)->cqs++;
    ((fk_ctx *)context)->cqs++;
    return &q->cq;
}
int ibv_destroy_cq(struct ibv_cq *cq) {
    fk_cq *q = (fk_cq *)cq;
    FK_SITE();
    if (fk_inject("ibv_destroy_cq")) return EIO;
    if (q->qps) return EBUSY;
    if (q->events != q->acked) fk_bug("ibv_destroy_cq with unacknowledged events (libibverbs would hang here)");
    if (cq->channel) ((fk_cc *)cq->channel)->cqs--;
    ((fk_ctx *)cq->context)->cqs--;
    free(q->wcs);
    fk_delete(q, FK_CQ);
    return 0;
}

static void fk_cq_push(fk_cq *q, const struct ibv_wc *wc) {
    if (q->count == q->cq.cqe) fk_bug("CQ overrun (more completions than the CQ holds)");
    q->wcs[(q->head + q->count) % q->cq.cqe] = *wc;
    q->count++;
    if (q->armed && q->cq.channel) {
        struct ibv_cq *p = &q->cq;
        q->armed = false;
        q->events++;
        if (write(((fk_cc *)q->cq.channel)->wfd, &p, sizeof p) != (ssize_t)sizeof p) fk_bug("event pipe full");
    }
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context) {
    struct ibv_cq *p;
    /* Not a failure site: its one failure is "no event yet", which every wait meets anyway. */
    if (read(channel->fd, &p, sizeof p) != (ssize_t)sizeof p) return -1; /* EAGAIN on a non-blocking fd */
    *cq = p;
    *cq_context = p->cq_context;
    return 0;
}
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents) { ((fk_cq *)cq)->acked += nevents; }

static int fk_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
    (void)solicited_only;
    if (fk_inject("ibv_req_notify_cq")) return EIO;
    if (!cq->channel) return EINVAL;
    ((fk_cq *)cq)->armed = true;
    return 0;
}

/* ---- QPs ----------------------------------------------------------------------------------- */
static fk_qp *fk_find_qp(uint32_t qpn) {
    fk_qp *q;
    for (q = fk_qps; q; q = q->next)
        if (q->qp.qp_num == qpn) return q;
    return NULL;
}

static void fk_progress(void);

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
    fk_qp *q;
    FK_SITE();
    if (fk_inject("ibv_create_qp")) {
        errno = ENOMEM;
        return NULL;
    }
    if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq || a->cap.max_send_wr < 1 ||
        (!a->srq && a->cap.max_recv_wr < 1) || a->cap.max_send_wr > 4096 || a->cap.max_recv_wr > 4096 ||
        a->cap.max_send_sge > FK_MAX_SGE || a->cap.max_recv_sge > FK_MAX_SGE || a->cap.max_inline_data > fk_max_inline) {
        errno = EINVAL;
        return NULL;
    }
    q = (fk_qp *)fk_new(sizeof *q, FK_QP);
    q->sq = (fk_swr *)calloc(a->cap.max_send_wr, sizeof *q->sq);
    q->rq = (fk_rwr *)calloc(a->cap.max_recv_wr ? a->cap.max_recv_wr : 1, sizeof *q->rq);
    q->srq = (fk_srq *)a->srq;
    if (q->srq) q->srq->qps++;
    if (!q->sq || !q->rq) abort();
    q->qp.context = pd->context;
    q->qp.qp_context = a->qp_context;
    q->qp.pd = pd;
    q->qp.send_cq = a->send_cq;
    q->qp.recv_cq = a->recv_cq;
    q->qp.qp_num = fk_next_qpn++ & 0xFFFFFFu;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = IBV_QPT_RC;
    q->cap = a->cap;
    q->sq_sig_all = a->sq_sig_all;
    ((fk_cq *)a->send_cq)->qps++;
    ((fk_cq *)a->recv_cq)->qps++;
    ((fk_pd *)pd)->qps++;
    q->next = fk_qps;
    fk_qps = q;
    return &q->qp;
}

static void fk_free_swr(fk_swr *w) {
    free(w->inl);
    w->inl = NULL;
}

static void fk_complete(struct ibv_cq *cq, fk_qp *q, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
                        uint32_t byte_len, bool imm, uint32_t imm_be) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = byte_len;
    wc.qp_num = q->qp.qp_num;
    wc.vendor_err = st == IBV_WC_SUCCESS || st == IBV_WC_WR_FLUSH_ERR ? 0 : 0x100 + (uint32_t)st;
    if (imm) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = imm_be;
    }
    fk_cq_push((fk_cq *)cq, &wc);
}

static enum ibv_wc_opcode fk_send_wc_op(enum ibv_wr_opcode op) {
    switch (op) {
    case IBV_WR_RDMA_WRITE: case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    default: return IBV_WC_SEND;
    }
}

/* Flushes everything outstanding (the QP is in ERR). */
static void fk_flush(fk_qp *q) {
    for (; q->sq_count; q->sq_count--, q->sq_head = (q->sq_head + 1) % q->cap.max_send_wr) {
        fk_swr *w = &q->sq[q->sq_head];
        if (!fk_flush_quiet || (w->flags & IBV_SEND_SIGNALED) || q->sq_sig_all)
            fk_complete(q->qp.send_cq, q, w->wr_id, IBV_WC_WR_FLUSH_ERR, fk_send_wc_op(w->opcode), 0, false, 0);
        fk_free_swr(w);
    }
    for (; q->rq_count; q->rq_count--, q->rq_head = (q->rq_head + 1) % q->cap.max_recv_wr)
        fk_complete(q->qp.recv_cq, q, q->rq[q->rq_head].wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
}

static void fk_to_error(fk_qp *q) {
    q->qp.state = IBV_QPS_ERR;
    if (!fk_no_flush) fk_flush(q);
}

static bool fk_gid_ipv4(const uint8_t *raw) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(raw, prefix, sizeof prefix) == 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
    fk_qp *q = (fk_qp *)qp;
    enum ibv_qp_state cur = qp->state;
    int need;
    static const char *const to[] = {"to RESET", "to INIT", "to RTR", "to RTS", "to SQD", "to SQE", "to ERR"};
    FK_SITE();
    if (fk_inject_detail("ibv_modify_qp", (mask & IBV_QP_STATE) && (unsigned)a->qp_state <= IBV_QPS_ERR ? to[a->qp_state] : "")) return EIO;
    if (!(mask & IBV_QP_STATE)) return EINVAL;
    switch (a->qp_state) {
    case IBV_QPS_RESET:
        q->sq_count = q->rq_count = 0; /* no completions: the queues are simply emptied */
        qp->state = IBV_QPS_RESET;
        return 0;
    case IBV_QPS_ERR:
        fk_to_error(q);
        fk_progress();
        return 0;
    case IBV_QPS_INIT:
        need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        if ((cur != IBV_QPS_RESET && cur != IBV_QPS_INIT) || (cur == IBV_QPS_RESET && (mask & need) != need)) return EINVAL;
        if ((mask & IBV_QP_PORT) && a->port_num != 1) return EINVAL;
        if (mask & IBV_QP_ACCESS_FLAGS) q->access = a->qp_access_flags;
        qp->state = IBV_QPS_INIT;
        return 0;
    case IBV_QPS_RTR: {
        struct ibv_gid_entry g;
        need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        if (cur != IBV_QPS_INIT || (mask & need) != need) return EINVAL;
        if (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_1024) return EINVAL; /* above the active MTU */
        if (a->dest_qp_num == 0 || a->dest_qp_num > 0xFFFFFFu || a->rq_psn > 0xFFFFFFu) return EINVAL;
        if (a->ah_attr.port_num != 1) return EINVAL;
        if (fk_link_layer == IBV_LINK_LAYER_ETHERNET && !a->ah_attr.is_global) return EINVAL; /* RoCE needs a GRH */
        if (a->ah_attr.is_global && !fk_gid((const fk_ctx *)qp->context, a->ah_attr.grh.sgid_index, &g)) return EINVAL;
        if (a->ah_attr.is_global && fk_gid_ipv4(g.gid.raw) && fk_gid_ipv4(a->ah_attr.grh.dgid.raw) &&
            memcmp(g.gid.raw + 12, a->ah_attr.grh.dgid.raw + 12, 3) != 0)
            return EINVAL; /* an IPv4 GID of another /24 than this side's: no path (as some drivers answer) */
        q->dest_qpn = a->dest_qp_num;
        q->rq_psn = a->rq_psn;
        qp->state = IBV_QPS_RTR;
        fk_progress();
        return 0;
    }
    case IBV_QPS_RTS:
        need = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
        if (cur != IBV_QPS_RTR || (mask & need) != need) return EINVAL;
        if (a->sq_psn > 0xFFFFFFu) return EINVAL;
        q->sq_psn = a->sq_psn;
        qp->state = IBV_QPS_RTS;
        fk_progress();
        return 0;
    default:
        return EINVAL;
    }
}

int ibv_destroy_qp(struct ibv_qp *qp) {
    fk_qp **pp, *q = (fk_qp *)qp;
    uint32_t i;
    FK_SITE();
    if (fk_inject("ibv_destroy_qp")) return EIO;
    for (pp = &fk_qps; *pp != q; pp = &(*pp)->next)
        if (!*pp) fk_bug("ibv_destroy_qp of an unknown QP");
    *pp = q->next;
    for (i = 0; i < q->cap.max_send_wr; i++) fk_free_swr(&q->sq[i]);
    free(q->sq);
    free(q->rq);
    if (q->srq) q->srq->qps--;
    ((fk_cq *)qp->send_cq)->qps--;
    ((fk_cq *)qp->recv_cq)->qps--;
    ((fk_pd *)qp->pd)->qps--;
    fk_delete(q, FK_QP);
    return 0;
}

/* ---- the data path ------------------------------------------------------------------------- */
/* The MR of `pd` that a key names and that holds [addr, addr+len) with `access`; NULL if none. */
static fk_mr *fk_mr_for(struct ibv_pd *pd, uint32_t key, bool remote, uint64_t addr, uint64_t len, unsigned access) {
    fk_mr *m;
    for (m = fk_mrs; m; m = m->next) {
        uint64_t a = (uint64_t)(uintptr_t)m->mr.addr;
        if (m->mr.pd != pd || (remote ? m->mr.rkey : m->mr.lkey) != key) continue;
        if (addr < a || len > m->mr.length || addr - a > m->mr.length - len) return NULL;
        if ((m->access & access) != access) return NULL;
        return m;
    }
    return NULL;
}

/* Checks a local element list; adds up its bytes. */
static bool fk_local_ok(struct ibv_pd *pd, const struct ibv_sge *sg, int n, bool nic_writes, uint64_t *total) {
    int k;
    *total = 0;
    for (k = 0; k < n; k++) {
        if (sg[k].length && !fk_mr_for(pd, sg[k].lkey, false, sg[k].addr, sg[k].length, nic_writes ? IBV_ACCESS_LOCAL_WRITE : 0))
            return false;
        *total += sg[k].length;
    }
    return true;
}

/* The NIC's DMA: sanitizers do not see it (safeverbs poisons memory the NIC owns, and the real
   NIC writes it all the same), so neither may the fake's copies. */
#if defined(__SANITIZE_ADDRESS__)
#define FK_NO_ASAN __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FK_NO_ASAN __attribute__((no_sanitize_address))
#endif
#endif
#ifndef FK_NO_ASAN
#define FK_NO_ASAN
#endif
/* Valgrind does not see a real NIC's DMA either: safeverbs makes the memory the NIC owns
   NOACCESS, and the fake's copy into it is no access of the program's. */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define FK_VALGRIND 1
#endif
#endif
FK_NO_ASAN static void fk_dma(void *dst, const void *src, uint64_t n) {
    volatile unsigned char *d = (volatile unsigned char *)dst;
    const volatile unsigned char *s = (const volatile unsigned char *)src;
    uint64_t i;
#if FK_VALGRIND
    VALGRIND_DISABLE_ERROR_REPORTING;
#endif
    for (i = 0; i < n; i++) d[i] = s[i];
#if FK_VALGRIND
    VALGRIND_ENABLE_ERROR_REPORTING;
#endif
}

static void fk_gather(const fk_swr *w, unsigned char *buf) {
    int k;
    if (w->inl) {
        memcpy(buf, w->inl, w->inl_len);
        return;
    }
    for (k = 0; k < w->n; k++) {
        fk_dma(buf, (const void *)(uintptr_t)w->sg[k].addr, w->sg[k].length);
        buf += w->sg[k].length;
    }
}
static void fk_scatter(const struct ibv_sge *sg, int n, const unsigned char *buf, uint64_t len) {
    int k;
    for (k = 0; k < n && len; k++) {
        uint64_t c = sg[k].length < len ? sg[k].length : len;
        fk_dma((void *)(uintptr_t)sg[k].addr, buf, c);
        buf += c;
        len -= c;
    }
}

static void fk_sq_pop(fk_qp *q) {
    fk_free_swr(&q->sq[q->sq_head]);
    q->sq_head = (q->sq_head + 1) % q->cap.max_send_wr;
    q->sq_count--;
}
static bool fk_rq_has(fk_qp *d) { return d->srq ? d->srq->count != 0 : d->rq_count != 0; }
static fk_rwr *fk_rq_front(fk_qp *d) { return d->srq ? &d->srq->rq[d->srq->head] : &d->rq[d->rq_head]; }
static void fk_rq_pop(fk_qp *q) {
    if (q->srq) { q->srq->head = (q->srq->head + 1) % q->srq->max; q->srq->count--; return; }
    q->rq_head = (q->rq_head + 1) % q->cap.max_recv_wr;
    q->rq_count--;
}

/* Ends the head send work request with `st`; an error moves the QP to ERR. */
static void fk_send_done(fk_qp *q, enum ibv_wc_status st, uint32_t byte_len) {
    fk_swr *w = &q->sq[q->sq_head];
    if (st != IBV_WC_SUCCESS || (w->flags & IBV_SEND_SIGNALED) || q->sq_sig_all)
        fk_complete(q->qp.send_cq, q, w->wr_id, st, fk_send_wc_op(w->opcode), byte_len, false, 0);
    fk_sq_pop(q);
    if (st != IBV_WC_SUCCESS) fk_to_error(q);
}

/* Runs the head of q's send queue. False: it has to wait (RNR, or the peer not ready yet). */
static bool fk_exec(fk_qp *q) {
    fk_swr *w = &q->sq[q->sq_head];
    fk_qp *d = fk_find_qp(q->dest_qpn);
    const bool is_atomic = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    const bool is_read = w->opcode == IBV_WR_RDMA_READ || is_atomic;
    const bool is_write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool has_imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool uses_recv = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    uint64_t total = 0;
    unsigned char *buf;
    if (w->opcode == IBV_WR_BIND_MW) { /* local: binds the window to this QP */
        fk_mw *m = (fk_mw *)w->bmw;
        const fk_mr *mr = (const fk_mr *)w->binfo.mr;
        if (!mr || !(mr->access & IBV_ACCESS_MW_BIND) || m->mw.pd != q->qp.pd || (fk_bind_fail > 0 && fk_bind_fail--)) {
            fk_send_done(q, IBV_WC_MW_BIND_ERR, 0);
            return true;
        }
        m->bound = 1;
        m->rkey = w->brkey;
        m->qpn = q->qp.qp_num;
        m->addr = w->binfo.addr;
        m->len = w->binfo.length;
        m->access = w->binfo.mw_access_flags;
        fk_send_done(q, IBV_WC_SUCCESS, 0);
        return true;
    }
    if (w->inl) total = w->inl_len;
    else if (!fk_local_ok(q->qp.pd, w->sg, w->n, is_read, &total)) {
        fk_send_done(q, IBV_WC_LOC_PROT_ERR, 0);
        return true;
    }
    if (d && d->qp.state == IBV_QPS_INIT) return false; /* the peer drops it; retried */
    if (!d || (d->qp.state != IBV_QPS_RTR && d->qp.state != IBV_QPS_RTS) || d->dest_qpn != q->qp.qp_num ||
        d->rq_psn != q->sq_psn) {
        fk_send_done(q, IBV_WC_RETRY_EXC_ERR, 0);
        return true;
    }
    if (is_write || is_read) {
        const unsigned need = is_atomic ? IBV_ACCESS_REMOTE_ATOMIC : is_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
        if (!(d->access & need) || ((total || is_atomic) && !fk_mr_for(d->qp.pd, w->rkey, true, w->raddr, total, need) &&
                                        !fk_mw_for(d->qp.qp_num, w->rkey, w->raddr, total, need)) ||
            (is_atomic && (total != 8 || (w->raddr & 7)))) {
            fk_send_done(q, IBV_WC_REM_ACCESS_ERR, 0);
            return true;
        }
    }
    if (is_atomic) { /* the word in host byte order; the old value to the requester in its own */
        uint64_t word, old;
        fk_dma(&old, (const void *)(uintptr_t)w->raddr, 8);
        word = w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? old + w->compare_add : old == w->compare_add ? w->swap : old;
        fk_dma((void *)(uintptr_t)w->raddr, &word, 8);
        fk_scatter(w->sg, w->n, (const unsigned char *)&old, 8);
        fk_send_done(q, IBV_WC_SUCCESS, 8);
        return true;
    }
    if (uses_recv && !fk_rq_has(d)) return false; /* receiver not ready: RNR, retried forever */
    buf = (unsigned char *)malloc(total ? total : 1);
    if (!buf) abort();
    if (is_read) {
        fk_dma(buf, (const void *)(uintptr_t)w->raddr, total);
        fk_scatter(w->sg, w->n, buf, total);
        fk_send_done(q, IBV_WC_SUCCESS, (uint32_t)total);
    } else if (is_write) {
        fk_gather(w, buf);
        fk_dma((void *)(uintptr_t)w->raddr, buf, total);
        if (has_imm) {
            fk_complete(d->qp.recv_cq, d, fk_rq_front(d)->wr_id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (uint32_t)total, true, w->imm_be);
            fk_rq_pop(d);
        }
        fk_send_done(q, IBV_WC_SUCCESS, 0);
    } else {
        fk_rwr *r = fk_rq_front(d);
        uint64_t room;
        if (!fk_local_ok(d->qp.pd, r->sg, r->n, true, &room)) {
            fk_complete(d->qp.recv_cq, d, r->wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0);
            fk_rq_pop(d);
            fk_to_error(d);
            fk_send_done(q, IBV_WC_REM_OP_ERR, 0);
        } else if (room < total) {
            fk_complete(d->qp.recv_cq, d, r->wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0);
            fk_rq_pop(d);
            fk_to_error(d);
            fk_send_done(q, IBV_WC_REM_INV_REQ_ERR, 0);
        } else {
            fk_gather(w, buf);
            fk_scatter(r->sg, r->n, buf, total);
            fk_complete(d->qp.recv_cq, d, r->wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)total, has_imm, w->imm_be);
            fk_rq_pop(d);
            fk_send_done(q, IBV_WC_SUCCESS, 0);
        }
    }
    free(buf);
    return true;
}

static void fk_progress(void) {
    bool moved;
    do {
        fk_qp *q;
        moved = false;
        for (q = fk_qps; q; q = q->next)
            while (q->qp.state == IBV_QPS_RTS && q->sq_count && fk_exec(q)) moved = true;
    } while (moved);
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    fk_qp *q = (fk_qp *)qp;
    int len = 0, budget;
    const struct ibv_send_wr *it;
    for (it = wr; it; it = it->next) len++;
    budget = fk_inject("ibv_post_send") ? fk_budget(len) : -1; /* >= 0: fail after that many */
    *bad = NULL;
    for (; wr; wr = wr->next) {
        fk_swr *w;
        int k;
        if (budget-- == 0) {
            *bad = wr; /* the part posted runs later (an ERR before that flushes it), or now */
            if (fk_partial_runs) fk_progress();
            return ENOMEM;
        }
        if ((qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) || wr->num_sge < 0 ||
            (uint32_t)wr->num_sge > q->cap.max_send_sge ||
            (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM && wr->opcode != IBV_WR_RDMA_WRITE &&
             wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM && wr->opcode != IBV_WR_RDMA_READ &&
             wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD && wr->opcode != IBV_WR_BIND_MW)) {
            *bad = wr;
            return EINVAL;
        }
        if (q->sq_count == q->cap.max_send_wr) {
            *bad = wr;
            return ENOMEM;
        }
        w = &q->sq[(q->sq_head + q->sq_count) % q->cap.max_send_wr];
        memset(w, 0, sizeof *w);
        w->wr_id = wr->wr_id;
        w->opcode = wr->opcode;
        w->flags = wr->send_flags;
        w->imm_be = wr->imm_data;
        if (wr->opcode == IBV_WR_BIND_MW) {
            w->bmw = wr->bind_mw.mw;
            w->binfo = wr->bind_mw.bind_info;
            w->brkey = wr->bind_mw.rkey;
        } else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
            w->raddr = wr->wr.atomic.remote_addr;
            w->rkey = wr->wr.atomic.rkey;
            w->compare_add = wr->wr.atomic.compare_add;
            w->swap = wr->wr.atomic.swap;
        } else {
            w->raddr = wr->wr.rdma.remote_addr;
            w->rkey = wr->wr.rdma.rkey;
        }
        w->n = wr->num_sge;
        for (k = 0; k < wr->num_sge; k++) w->sg[k] = wr->sg_list[k];
        if (wr->send_flags & IBV_SEND_INLINE) {
            uint64_t total = 0;
            for (k = 0; k < wr->num_sge; k++) total += wr->sg_list[k].length;
            if (total > q->cap.max_inline_data || wr->opcode == IBV_WR_RDMA_READ) {
                *bad = wr;
                return EINVAL;
            }
            {
                unsigned char *copy = (unsigned char *)malloc(total ? total : 1);
                if (!copy) abort();
                fk_gather(w, copy); /* from the elements: inl is still NULL */
                w->inl = copy;
                w->inl_len = (uint32_t)total;
            }
        }
        q->sq_count++;
        if (qp->state == IBV_QPS_ERR) fk_flush(q);
    }
    fk_progress();
    return 0;
}

static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    fk_qp *q = (fk_qp *)qp;
    int len = 0, budget;
    const struct ibv_recv_wr *it;
    for (it = wr; it; it = it->next) len++;
    budget = fk_inject("ibv_post_recv") ? fk_budget(len) : -1; /* >= 0: fail after that many */
    *bad = NULL;
    for (; wr; wr = wr->next) {
        fk_rwr *r;
        int k;
        if (budget-- == 0) {
            *bad = wr; /* the part posted runs later: an ERR before that flushes it */
            return ENOMEM;
        }
        if (qp->state == IBV_QPS_RESET || wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge) {
            *bad = wr;
            return EINVAL;
        }
        if (q->rq_count == q->cap.max_recv_wr) {
            *bad = wr;
            return ENOMEM;
        }
        r = &q->rq[(q->rq_head + q->rq_count) % q->cap.max_recv_wr];
        r->wr_id = wr->wr_id;
        r->n = wr->num_sge;
        for (k = 0; k < wr->num_sge; k++) r->sg[k] = wr->sg_list[k];
        q->rq_count++;
        if (qp->state == IBV_QPS_ERR) fk_flush(q);
    }
    fk_progress();
    return 0;
}

static int fk_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    fk_cq *q = (fk_cq *)cq;
    int got = 0;
    if (fk_inject("ibv_poll_cq")) return -2; /* a provider's own code, as mlx5 gives */
    fk_progress();
    while (got < n && q->count) {
        wc[got++] = q->wcs[q->head];
        q->head = (q->head + 1) % cq->cqe;
        q->count--;
    }
    return got;
}

/* ---- async events -------------------------------------------------------------------------- */
void fk_inject_async_event(struct ibv_context *context, int type, void *object, int port) {
    fk_ctx *c = (fk_ctx *)context;
    struct ibv_async_event *e;
    const char one = 1;
    if (c->ev_n == FK_EVENTS) fk_bug("too many async events injected and not read");
    e = &c->ev[(c->ev_first + c->ev_n++) % FK_EVENTS];
    memset(e, 0, sizeof *e);
    e->event_type = (enum ibv_event_type)type;
    switch (e->event_type) {
    case IBV_EVENT_CQ_ERR: e->element.cq = (struct ibv_cq *)object; break;
    case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED: e->element.srq = (struct ibv_srq *)object; break;
    case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE: case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE: case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER: e->element.port_num = port; break;
    case IBV_EVENT_DEVICE_FATAL: break;
    default: e->element.qp = (struct ibv_qp *)object; break;
    }
    if (write(c->ev_wfd, &one, 1) != 1) fk_bug("async event pipe");
}
unsigned long fk_async_unacked(void) { return fk_async_read - fk_async_acked; }
int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event) {
    fk_ctx *c = (fk_ctx *)context;
    char b;
    if (read(c->ctx.async_fd, &b, 1) != 1) return -1; /* errno EAGAIN on the non-blocking fd, as the real one */
    *event = c->ev[c->ev_first];
    c->ev_first = (c->ev_first + 1) % FK_EVENTS;
    c->ev_n--;
    fk_async_read++;
    return 0;
}
void ibv_ack_async_event(struct ibv_async_event *event) {
    (void)event;
    fk_async_acked++;
}

/* ---- shared receive queues: created, destroyed, posted to (receives are kept by nobody and
   never complete: the fake's QPs keep their own receive queues; SRQ traffic is tested on rxe,
   tests/test_srq.c) ------------------------------------------------------------------------- */
static int fk_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    fk_srq *q = (fk_srq *)srq;
    int len = 0, budget; const struct ibv_recv_wr *it;
    for (it = wr; it; it = it->next) len++;
    budget = fk_inject("ibv_post_srq_recv") ? fk_budget(len) : -1;
    *bad = NULL;
    for (; wr; wr = wr->next) {
        fk_rwr *r; int k;
        if (budget-- == 0) { *bad = wr; return ENOMEM; }
        if (wr->num_sge < 0 || wr->num_sge > FK_MAX_SGE || q->count == q->max) { *bad = wr; return q->count == q->max ? ENOMEM : EINVAL; }
        r = &q->rq[(q->head + q->count) % q->max];
        r->wr_id = wr->wr_id; r->n = wr->num_sge;
        for (k = 0; k < wr->num_sge; k++) r->sg[k] = wr->sg_list[k];
        q->count++;
    }
    fk_progress();
    return 0;
}
static int fk_locked_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    int r;
    if (!fk_threaded) pthread_mutex_lock(&fk_lock); /* (threaded: FK_SITE's lock) */
    FK_SITE();
    r = fk_post_srq_recv(srq, wr, bad);
    if (!fk_threaded) pthread_mutex_unlock(&fk_lock);
    return r;
}
struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr) {
    fk_srq *q;
    FK_SITE();
    if (fk_inject("ibv_create_srq")) { errno = ENOMEM; return NULL; }
    q = (fk_srq *)calloc(1, sizeof *q);
    if (!q) fk_bug("calloc");
    q->max = attr->attr.max_wr ? attr->attr.max_wr : 1;
    q->rq = (fk_rwr *)calloc(q->max, sizeof *q->rq);
    q->srq.context = pd->context;
    q->srq.pd = pd;
    pd->context->ops.post_srq_recv = fk_locked_post_srq_recv;
    return &q->srq;
}
int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask) {
    (void)srq; (void)attr; (void)mask;
    FK_SITE();
    return fk_inject("ibv_modify_srq") ? EIO : 0;
}
int ibv_destroy_srq(struct ibv_srq *srq) {
    FK_SITE();
    if (fk_inject("ibv_destroy_srq")) return EIO;
    if (((fk_srq *)srq)->qps) return EBUSY;
    free(((fk_srq *)srq)->rq);
    free(srq);
    return 0;
}
