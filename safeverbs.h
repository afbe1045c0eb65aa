/* safeverbs.h - v0.4.0 - safe RDMA verbs for C, on top of libibverbs (rdma-core).
   MIT licence at the end of this file.

   Its design follows the Rust crate ibverbs-rs ("the crate" below): the same objects, the same
   words (gather/scatter element, remote region, channel, pending work, scope, endpoint), with
   run-time checks where Rust has borrows.

   CONTENTS (each part starts at a ">>name" line: search for it)
   ========
   Declarations     >>results >>log >>handles >>devices >>pd and cq >>memory regions >>raw verbs
                    >>remote regions >>elements >>channel (>>pending >>batches >>atomics >>scopes >>inject)
                    >>events >>srq >>leases >>multi-channel >>exchange >>node >>rdmacm (SAFEVERBS_RDMACM)
   Implementation   >>inflight hooks >>impl log >>impl results >>impl locks >>impl refcounts >>impl handles
                    >>impl devices >>impl pd and cq >>impl memory regions >>impl elements >>impl remote regions >>impl channel
                    >>impl inflight >>impl completions >>impl posting >>impl inject
                    >>impl pending work >>impl scopes >>impl events >>impl srq >>impl leases
                    >>impl channel internals >>impl multi-channel >>impl exchange >>impl node >>impl rdmacm
                    >>impl raw verbs
   Licence          >>licence

   LAYERS
   ======
   devices -> PD -> MR and elements -> channel -> multi-channel -> node; the exchange stands
   beside them (the node uses it). Each layer is built on the public calls of the layers below,
   plus the few named helpers in >>impl channel internals (scopes and many-peer calls over
   several channels, a channel's room and state); none reads another layer's struct fields.

   DO THIS
   =======
   In exactly one C or C++ file, define SAFEVERBS_IMPLEMENTATION before including:

       #define SAFEVERBS_IMPLEMENTATION
       #include "safeverbs.h"

   Every other file includes "safeverbs.h" without the macro. Link with -libverbs (and, with a
   C library older than glibc 2.34, -lpthread: the exchange looks names up on a thread).
   The declarations need only <stddef.h>, <stdint.h> and <stdbool.h>; the implementation
   includes <infiniband/verbs.h> (Debian: libibverbs-dev).

   CONFIGURATION MACROS
   ====================
   SFV_DEBUG        1 or 0. Turns the debug-only checks (SFV_DEBUG_ASSERT, the pending-handle
                    registry) on or off. Default: 1 unless NDEBUG is defined (a CMake Release
                    build defines NDEBUG: define SFV_DEBUG 1 to keep the checks there).
                    Implementation-only: only the implementation reads it; it never changes a
                    struct.
   SFV_TRACK_INFLIGHT  1 or 0. Default: SFV_DEBUG. Remembers every posted element until its
                    completion is consumed: overlapping posts and sfv_dereg_mr of an MR in use
                    trip SFV_ASSERT; under ASan / valgrind memcheck the memory the NIC will
                    write is poisoned / inaccessible meanwhile (>>impl inflight). 0: none of it
                    is compiled. Implementation-only. SFV_NO_VALGRIND: skip <valgrind/memcheck.h>
                    (used where found: by this tracking, and on a refused post, which reads
                    the handle it was given, maybe never written, to see whether it holds work).
   SFV_ASSERT(c)    What a broken contract does. Default: print the condition, file and line to
                    stderr and abort(). Implementation-only.
   SFV_DEBUG_ASSERT(c)  SFV_ASSERT when SFV_DEBUG is 1, nothing otherwise. Implementation-only;
                    may be defined to something else (it must not call verbs).
   SFV_MALLOC(sz), SFV_CALLOC(n, sz), SFV_FREE(p)
                    The allocator behind every allocation and free of the library (default:
                    malloc, calloc, free). Define all three or none. Implementation-only.
                    They must not call safeverbs (some are called under the lock of the set
                    of live handles: a call back would wait for it forever).
   SAFEVERBS_RDMACM Defined: the >>rdmacm part (connect by IP address through librdmacm) is
                    declared and implemented, and the program links -lrdmacm as well (Debian:
                    librdmacm-dev). Not defined: neither, and -libverbs alone is enough. Global:
                    define it (or not) the same way in every file.
   SAFEVERBS_API    Put in front of every public function (default: extern). Global: define it the
                    same way in every file.
   SAFEVERBS_STATIC Defined (before the first include of the header) in the one file that
                    includes the implementation, and SAFEVERBS_API not defined: every function is
                    static there, for a program of one file or a library that must not export
                    sfv_ names. Only that file can call the library then. With gcc and clang the
                    data path's functions (posts, injects, pending polls and waits) are always
                    inlined into your loop: some 50 instructions less per 64-byte send + receive
                    (bench/RESULTS.md). gcc -Og then refuses to take the address of one of them.

   STEP BY STEP
   ============
   1. Open a device:           sfv_open_device("rxe0", &ctx)   (NULL: the first one)
   2. Allocate a PD:           sfv_alloc_pd(ctx, &pd)
   3. Register memory:         sfv_reg_mr_local(pd, buf, len, &mr)
   4. Make a channel:          sfv_create_channel(pd, &desc, &ch)  (desc zero-filled: defaults)
   5. Swap endpoints with the peer (sfv_endpoint_encode / _decode over any byte stream), then
                               sfv_channel_handshake(ch, &peer)
                               (the peer's NIC drops what comes before its own handshake; the
                               default retries cover about half a second: measured on rxe (6.1
                               and 6.12), a send to a peer that handshakes 0.1 s later arrives,
                               one to a peer 1 s or 4 s late fails with RETRY_EXC_ERR after
                               0.47-0.49 s; a sync over your stream covers any delay)
   6. Move data:               sfv_channel_send(ch, &sge, 1, &wc) and sfv_channel_receive(...)
   7. Tear down in any order:  sfv_destroy_channel, sfv_dereg_mr, sfv_dealloc_pd, sfv_close_device
                               (an MR that work in flight still uses goes after that work's
                               channel, whose destroy flushes it: deregistering it first is a
                               broken contract, DEBUG CHECKS)

       #define TRY(call) do { if ((call) != SFV_OK) { puts(sfv_last_error()->message); return 1; } } while (0)
       sfv_context *ctx; sfv_pd *pd; sfv_mr *mr; sfv_channel *ch; sfv_endpoint me;
       static char buf[64] = "hello";
       TRY(sfv_open_device(NULL, &ctx));
       TRY(sfv_alloc_pd(ctx, &pd));
       TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
       sfv_channel_desc desc = {0};
       TRY(sfv_create_channel(pd, &desc, &ch));
       TRY(sfv_channel_endpoint(ch, &me));
       TRY(sfv_channel_handshake(ch, &me));             (loopback: connect to itself)
       sfv_scatter_element in  = sfv_mr_scatter_element(mr, buf + 32, 32);
       sfv_gather_element  out = sfv_mr_gather_element(mr, buf, 6);
       sfv_pending rx;
       TRY(sfv_channel_post_receive(ch, &in, 1, &rx));
       TRY(sfv_channel_send(ch, &out, 1, NULL));
       TRY(sfv_pending_wait(&rx, -1, NULL));            (buf + 32 now holds "hello")
       sfv_destroy_channel(ch); sfv_dereg_mr(mr); sfv_dealloc_pd(pd); sfv_close_device(ctx);

   Many peers: sfv_create_multi_channel makes a channel per peer (sfv_multi_channel_peer(mc, i)
   is an ordinary channel) with calls that reach many peers at once. A job of N processes makes
   one node per rank (sfv_create_node) and connects it with sfv_node_connect (endpoints over
   TCP, the handshake, a sync), and then has a channel to every rank and sfv_node_barrier.

   LIFETIME
   ========
   Every release returns sfv_result: one the verb refuses (a busy or failing destroy) keeps the
   object, and the caller's reference, so the call can be repeated; an MR whose deregistration
   failed is still registered. (A parent released by its last child's destroy is kept quietly if
   its own verb refuses: its reference is the caller's again, so sfv_dealloc_pd (a PD's) or
   sfv_close_device (a context's) called again tries again.)
   Handles are opaque and reference counted. A child holds a reference on its parent:
   MR -> PD -> context, CQ -> context, channel -> PD, SRQ -> PD, channel on an SRQ -> SRQ
   (>>srq). Releasing a parent while children live is
   safe; the device is closed when the last reference goes. Releasing NULL does nothing.
   Each handle you are given is one reference, released once: a context, PD or SRQ released
   again while its children keep it alive is a broken contract (SFV_ASSERT; should it return,
   SFV_ERR_INVALID, nothing released), which would otherwise free it under them. So is, in every
   build, a destroy, release, revoke, close, accept or reject of a handle that is no longer live
   (freed already, answered already, never made), a parent no longer live given to a call that
   makes a child from it (a context, PD, CQ, MR, channel, SRQ, multi-channel, node, lease, CM
   request or CM connection), and one given to a call that queries, configures or connects it
   (sfv_query_*, sfv_choose_gid, sfv_device_list_guid, sfv_context_event_fd, sfv_context_events,
   sfv_context_bind_thread_to_numa, sfv_channel_desc_resolve, sfv_channel_endpoint, _handshake,
   _reset, _arm, _ack_events, sfv_srq_set_limit, sfv_multi_channel_endpoints, _handshake,
   sfv_node_endpoint, _handshake, _connect*, _barrier*, sfv_cm_events): the library keeps the
   set of live handles (O(1) per handle made, destroyed or checked) and checks it before reading
   the handle. Not checked: the data path (posts, waits, polls, scopes, many-peer calls, element
   and remote-region builders) and the getters (sfv_*_len, _name, _pd, _context, _fd, _raw ...),
   which read their handles as given. A new handle of the same kind at a freed one's address is
   that one.
   A context or PD wrapped without ownership (sfv_context_wrap, sfv_pd_wrap) is never closed by
   safeverbs: its owner frees it after the last safeverbs object made from it (RAW VERBS).
   A memory region never owns its buffer: the buffer must outlive the MR and any work that uses it.
   A multi-channel owns its channels (never destroy one of them yourself); a node owns its
   multi-channel and the memory of its barrier, which peers write into until it is destroyed.
   Elements (sfv_gather_element, sfv_scatter_element) and remote regions are plain values that
   hold no reference: build them right before posting.
   Destroying a channel with work in flight first moves its queue pair to the error state and
   drains the flushed work (or, if that does not finish, destroys the queue pair), so the NIC
   touches no buffer after sfv_destroy_channel returns.

   ERRORS
   ======
   Fallible functions return sfv_result: SFV_OK (0) or a negative error class, and set their
   out-parameters to NULL/zero on failure. The detail of the last failure on the calling thread
   (errno, the verb that failed, a message) is in sfv_last_error(); it is per thread, like errno,
   so threads never see each other's errors. A failed completion carries its own detail in
   sfv_work_completion (status, vendor code, class; sfv_wc_status_hint gives a hint for the
   status, and the last error's message the channel's own). A broken contract (a plain element
   outside its MR in a debug build, a manual scope that left work unpolled, a stale pending
   handle) goes through SFV_ASSERT.
   Why a thread-local and not an out-parameter on every call: the objects it would live in
   (context, PD, MR) are shared across threads, and an extra argument on every call buries the
   call; per-thread state races with nothing and costs nothing until a call fails.

   DEBUG CHECKS
   ============
   Always on (cheap, guard memory): NULL arguments, counts against limits, address and size
   arithmetic that could wrap, elements of a write or read against the remote region's length.
   Debug only (SFV_DEBUG): the plain element constructors check that the slice lies inside its MR
   and fits in 32 bits. The _checked constructors always check; the _unchecked ones never do
   (the NIC then fails the work with a local protection error; a send that goes inline is
   copied by the CPU at the post instead, unchecked: so is a plain element in a release build).
   Debug only (SFV_TRACK_INFLIGHT, on with SFV_DEBUG): the buffers the NIC owns. A scatter
   element over memory in flight, a gather element over memory in flight as scatter (an inline
   send's and an inject's bytes included: the CPU copies them at the post), and
   sfv_dereg_mr of an MR that work in flight uses are broken contracts (SFV_ASSERT, after a
   message naming both); ASan and valgrind see the NIC's ownership (>>impl inflight). Not
   caught: a CPU write to a buffer the NIC reads, code built without the sanitizer, a peer's
   one-sided access (see >>leases), work on raw verbs objects, the elements of two DMA-BUF MRs
   over the same buffer (a DMA-BUF MR's iovas are compared with its own elements' only).

   THREAD SAFETY
   =============
   Device lists, contexts, PDs, MRs and CQs may be shared between threads (libibverbs is
   thread-safe; reference counts are atomic). A channel, and every pending handle of it, is for
   one thread at a time: its completion bookkeeping takes no lock. So are a multi-channel and a
   node, with all of their channels, and an SRQ with every channel on it. A context's device
   events (>>events) may be read from any thread (a spin lock guards them); the thread that reads
   one marks the channels it breaks, and each channel's own thread flushes its channel.
   sfv_exchange_all keeps no state and may run anywhere.

   RAW VERBS
   =========
   For what safeverbs does not do, sfv_context_raw, sfv_pd_raw, sfv_mr_raw, sfv_cq_raw,
   sfv_channel_raw_qp and sfv_channel_raw_cq give the libibverbs objects behind the handles
   (include <infiniband/verbs.h> to use them; the declarations here do not need it). They stay
   safeverbs' objects, valid while their handle is (a channel's QP only until the channel
   replaces or destroys it: >>raw verbs). With them you may:
   - query: ibv_query_device(_ex), ibv_query_port, ibv_query_gid, ibv_query_qp, the fields of
     the structs (an MR's keys, a QP's qp_num);
   - create objects of your own on a raw context or PD: your own QPs (on the CQ of an sfv_cq),
     MRs, SRQs, address handles, memory windows. They are yours: destroy them before the last
     reference of the safeverbs handle they were made on goes (its context closes then, and a PD
     or CQ that still has them cannot be freed: it leaks);
   - post to your own QPs (a safeverbs MR's keys in their elements are fine), and poll an
     sfv_cq's CQ (through sfv_poll_cq or ibv_poll_cq).
   You may not, on a channel's QP and CQ (sfv_channel_raw_qp, sfv_channel_raw_cq):
   - post (ibv_post_send, ibv_post_recv): the channel's rings would never see those completions,
     and its polling would meet wr_ids that are not its own;
   - poll its CQ, or ibv_req_notify_cq / ibv_get_cq_event / ibv_ack_cq_events on it: the
     completions you take are lost to the channel's pending handles, and its event bookkeeping
     (sfv_channel_arm, sfv_channel_ack_events) is the only one that may ack;
   - modify the QP (ibv_modify_qp): the channel keeps its own state (connected, broken);
   nor, on any context safeverbs uses, read its async events (ibv_get_async_event): safeverbs
   reads and acks them itself (>>events) and hands them to you through sfv_context_events;
   nor, on any raw object: destroy, deregister, dealloc or close it (ibv_destroy_qp,
   ibv_destroy_cq, ibv_dereg_mr, ibv_dealloc_pd, ibv_close_device): safeverbs frees it again;
   nor change it under safeverbs (ibv_rereg_mr, ibv_resize_cq): the range, access and capacity
   it recorded would be stale.
   The other way round, sfv_context_wrap and sfv_pd_wrap put safeverbs on a device context and
   a PD you opened: without take_ownership, close them yourself only after every safeverbs
   object made from them is gone, in the usual order (ibv_dealloc_pd, then ibv_close_device).
*/
/* The implementation uses POSIX (clock_gettime, poll, sockets) and Linux's CPU affinity. Under a
   strict -std=c99/c11 it asks for them here, which works only before the first system header:
   in the implementation's file, include safeverbs.h first, or define _GNU_SOURCE yourself
   before any header. Otherwise the build stops with an #error that says this (and with only
   _POSIX_C_SOURCE, 200809L or newer, NUMA binding reports SFV_ERR_UNSUPPORTED; an older one is
   that #error too). With -std=gnu* any order works (unless you define an older _POSIX_C_SOURCE). */
#if defined(SAFEVERBS_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _GNU_SOURCE
#endif

#ifndef SAFEVERBS_H_INCLUDED
#define SAFEVERBS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define SAFEVERBS_VERSION_MAJOR 0
#define SAFEVERBS_VERSION_MINOR 4
#define SAFEVERBS_VERSION_PATCH 0
#define SAFEVERBS_VERSION_STRING "0.4.0"
/* True when this header is version maj.min.patch or newer; for #if:
   #if !SAFEVERBS_VERSION_AT_LEAST(0, 4, 0)
   #error "needs safeverbs 0.4.0 or newer"
   #endif */
#define SAFEVERBS_VERSION_AT_LEAST(maj, min, patch)                                            \
    (SAFEVERBS_VERSION_MAJOR > (maj) ||                                                        \
     (SAFEVERBS_VERSION_MAJOR == (maj) && (SAFEVERBS_VERSION_MINOR > (min) ||                  \
      (SAFEVERBS_VERSION_MINOR == (min) && SAFEVERBS_VERSION_PATCH >= (patch)))))

#ifndef SAFEVERBS_API
#if defined(SAFEVERBS_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define SAFEVERBS_API static __attribute__((unused))
#define SFV__API_STATIC /* the header made every function static: the data path may be inlined */
#elif defined(SAFEVERBS_STATIC)
#define SAFEVERBS_API static
#else
#define SAFEVERBS_API extern
#endif
#endif
/* In front of the functions whose result must not be ignored (all that return sfv_result but
   the releases): [[nodiscard]] in C++17, warn_unused_result in gcc and clang (gcc's cannot be
   silenced by a (void) cast: test the result). #define SFV_NODISCARD (empty) before including
   to turn it off. */
#ifndef SFV_NODISCARD
#if defined(__cplusplus) && __cplusplus >= 201703L
#define SFV_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#define SFV_NODISCARD __attribute__((warn_unused_result))
#else
#define SFV_NODISCARD
#endif
#endif

/* A zero initialiser for any safeverbs struct (a desc: every default) that no compiler warns
   about: {0} in C, {} in C++ (where {0} warns under -Wextra). sfv_channel_desc d = SFV_ZERO_INIT; */
#ifdef __cplusplus
#define SFV_ZERO_INIT {}
#else
#define SFV_ZERO_INIT {0}
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>results ---------------------------------------------------------------------------------- */
/* X(name, value, description). Errors are negative; SFV_NOT_DONE is a non-error "not yet". */
#define SFV_RESULT_LIST(X)                                                                     \
    X(SFV_OK, 0, "success")                                                                    \
    X(SFV_NOT_DONE, 1, "work not complete yet")                                                \
    X(SFV_ERR_INVALID, -1, "invalid input")                                                    \
    X(SFV_ERR_RESOURCE, -2, "out of resources")                                                \
    X(SFV_ERR_PERMISSION, -3, "permission denied")                                             \
    X(SFV_ERR_NOT_FOUND, -4, "not found")                                                      \
    X(SFV_ERR_UNSUPPORTED, -5, "operation not supported")                                      \
    X(SFV_ERR_DRIVER, -6, "driver or OS error")                                                \
    X(SFV_ERR_SLICE_TOO_BIG, -7, "slice too big (over UINT32_MAX bytes)")                      \
    X(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, -8, "slice not within bounds")                          \
    X(SFV_ERR_WORK, -9, "work completed with an error")                                        \
    X(SFV_ERR_TIMEOUT, -10, "timed out")                                                       \
    X(SFV_ERR_BROKEN, -11, "channel is in the error state")                                    \
    X(SFV_ERR_SCOPE_FN, -12, "scope function failed")                                          \
    X(SFV_ERR_SCOPE_AUTOPOLL, -13, "work auto-polled at scope end failed")                    \
    X(SFV_ERR_UNREACHABLE, -14, "address or peer unreachable")                                 \
    X(SFV_ERR_REFUSED, -15, "connection refused: nothing listens there")                      \
    X(SFV_ERR_REJECTED, -16, "connection rejected by the peer")                               \
    X(SFV_ERR_ADDR_IN_USE, -17, "address in use")

typedef enum sfv_result {
#define SFV__X(name, value, text) name = value,
    SFV_RESULT_LIST(SFV__X)
#undef SFV__X
    SFV__RESULT_FORCE_INT = 0x7fffffff
} sfv_result;

/* The name of a result ("SFV_ERR_INVALID: invalid input"); never NULL. */
SAFEVERBS_API const char *sfv_result_str(sfv_result r);

/* Detail of the last failure on this thread. */
typedef struct sfv_error {
    sfv_result result;   /* what the failing call returned */
    int errnum;          /* errno of the failing verb or check, 0 if none */
    const char *verb;    /* never NULL: the call that failed, a verb or a libc call ("ibv_reg_mr",
                            "calloc", "poll") or the safeverbs function that refused its
                            arguments ("sfv_reg_mr_access"); or one of these checks: "element",
                            "remote region", "post", "wait", "completion" (a failed work
                            request), "pending", "scope", "inject", "multi-channel", "exchange",
                            "network config", "node", "node endpoint", "barrier", "numa",
                            "rdma_cm" (a connection manager's call refused its arguments),
                            "channel" (a channel already connected or broken),
                            "sfv_channel_desc", "sfv_node_desc" (a desc field out of range) */
    char message[256];   /* a sentence for humans */
} sfv_error;
/* Never NULL. Valid until the next failing safeverbs call on the same thread. */
SAFEVERBS_API const sfv_error *sfv_last_error(void);
/* Maps an errno to its class as the crate does: EINVAL -> INVALID; ENOMEM, EAGAIN, EMFILE ->
   RESOURCE; EPERM, EACCES -> PERMISSION; ENOENT, ENODEV -> NOT_FOUND; EOPNOTSUPP -> UNSUPPORTED;
   0 (no error) -> SFV_OK: after a call that failed without setting errno, say EIO yourself;
   anything else -> DRIVER. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_result_from_errno(int errnum);

/* >>log -------------------------------------------------------------------------------------- */
/* A trace of what the library does, for debugging a handshake on a real fabric without a
   debugger: errors (every failure a call records in sfv_last_error, refusals included, and those
   the library records and then takes back: a try it repeats, a cleanup's, a fallback's, which
   sfv_last_error does not keep but the log shows at ERROR as they happen), state
   changes and handshakes (devices opened and closed, channels created, connected, broken, reset and
   destroyed, nodes connected) and, at debug, the exchange's steps, each naming its objects
   ("rxe0 qp 17"). Nothing is reported by default, and the data path pays nothing for it: a post
   or poll that succeeds never looks at the log; a failure tests one flag. */
typedef enum sfv_log_level {
    SFV_LOG_OFF = 0,     /* nothing */
    SFV_LOG_ERROR = 1,   /* failures, with the verb or check and the message of sfv_last_error */
    SFV_LOG_INFO = 2,    /* and state changes: opened, connected (with the peer), broken, reset, closed */
    SFV_LOG_DEBUG = 3    /* and object creation and the exchange's steps */
} sfv_log_level;
/* Called on the thread that does the work, with one line without its newline. */
typedef void (*sfv_log_fn)(void *user, sfv_log_level level, const char *message);
/* Reports messages of `level` and below to fn(user, ...); fn NULL: to stderr as
   "safeverbs: LEVEL: message"; SFV_LOG_OFF: nothing. Without a call, the environment variable
   SAFEVERBS_LOG (off, error, info, debug or 0..3; read once, at the first failure or the first
   sfv_get_device_list, sfv_open_device, sfv_context_wrap or exchange) sets the level, to stderr.
   A call overrides it. Thread safety: set it before other threads use safeverbs (the hook is
   read without a lock); fn may be called from any thread that uses safeverbs, and must not call
   safeverbs itself (it may run while the library holds a lock, and a failure there would take
   the place of the one being reported in sfv_last_error). */
SAFEVERBS_API void sfv_set_log(sfv_log_fn fn, void *user, sfv_log_level level);

/* >>handles ---------------------------------------------------------------------------------- */
typedef struct sfv_device_list sfv_device_list;
typedef struct sfv_context sfv_context;
typedef struct sfv_pd sfv_pd;
typedef struct sfv_cq sfv_cq;
typedef struct sfv_mr sfv_mr;
typedef struct sfv_channel sfv_channel;
typedef struct sfv_srq sfv_srq;
/* The libibverbs objects behind them, for the raw accessors (>>raw verbs). Declared, not
   defined: a file that never includes <infiniband/verbs.h> can still pass them around. */
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_qp;
struct ibv_srq;

/* >>devices ---------------------------------------------------------------------------------- */
/* The RDMA devices of this machine (none, a kernel without RDMA included: an empty list and
   SFV_OK; free it with sfv_free_device_list), and how many it holds (0 for NULL). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_get_device_list(sfv_device_list **out);
SAFEVERBS_API size_t sfv_device_list_len(const sfv_device_list *list);
/* NULL when i is out of range. Valid until sfv_free_device_list. */
SAFEVERBS_API const char *sfv_device_list_name(const sfv_device_list *list, size_t i);
/* The node GUID in host byte order (its bytes as printed, most significant first). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_device_list_guid(const sfv_device_list *list, size_t i, uint64_t *out);
SAFEVERBS_API void sfv_free_device_list(sfv_device_list *list);
/* The crate's Guid helpers: the IEEE OUI (the top 24 bits), and "reserved" (all zero). */
SAFEVERBS_API uint32_t sfv_guid_oui(uint64_t guid);
SAFEVERBS_API bool sfv_guid_is_reserved(uint64_t guid);

/* Opens a device by name (NULL or "" = the first one; unknown name = SFV_ERR_NOT_FOUND) and
   checks that port 1 is ACTIVE or ARMED (otherwise SFV_ERR_RESOURCE naming the state). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_open_device(const char *name, sfv_context **out);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_open_device_at(const sfv_device_list *list, size_t i, sfv_context **out);
/* Drops the caller's reference; the device closes when no PD, CQ, MR or channel uses it. */
SAFEVERBS_API sfv_result sfv_close_device(sfv_context *ctx);
SAFEVERBS_API const char *sfv_context_name(const sfv_context *ctx);
/* NUMA (the crate's numa feature). The node the device hangs off, from sysfs; -1 when the
   platform does not say (virtual devices such as rxe, single-node machines). */
SAFEVERBS_API int sfv_context_numa_node(const sfv_context *ctx);
/* Binds the calling thread to the CPUs of NUMA node `node`. SFV_ERR_NOT_FOUND for a node this
   machine does not have (SFV_ERR_INVALID for a negative one, such as sfv_context_numa_node's -1);
   SFV_ERR_UNSUPPORTED when built without _GNU_SOURCE (see the top). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_bind_thread_to_numa_node(int node);
/* Binds the calling thread to the device's node. A device without one: SFV_OK and no change,
   or SFV_ERR_NOT_FOUND when `strict`. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_context_bind_thread_to_numa(const sfv_context *ctx, bool strict);

typedef enum sfv_port_state { /* values equal enum ibv_port_state */
    SFV_PORT_NOP = 0, SFV_PORT_DOWN = 1, SFV_PORT_INIT = 2, SFV_PORT_ARMED = 3,
    SFV_PORT_ACTIVE = 4, SFV_PORT_ACTIVE_DEFER = 5
} sfv_port_state;
typedef enum sfv_link_layer { /* values equal IBV_LINK_LAYER_* */
    SFV_LINK_LAYER_UNSPECIFIED = 0, SFV_LINK_LAYER_INFINIBAND = 1, SFV_LINK_LAYER_ETHERNET = 2
} sfv_link_layer;
typedef struct sfv_port_attr {
    sfv_port_state state;
    uint32_t active_mtu;     /* bytes: 256 .. 4096 */
    uint32_t max_mtu;        /* bytes */
    sfv_link_layer link_layer;
    uint16_t lid;
    uint32_t gid_tbl_len;
} sfv_port_attr;
/* A port's state, MTUs, link layer and LID; port: 1 .. the device's phys_port_cnt. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_query_port(sfv_context *ctx, uint8_t port, sfv_port_attr *out);

typedef enum sfv_atomic_cap { /* values equal enum ibv_atomic_cap */
    SFV_ATOMIC_NONE = 0,      /* no RDMA atomics */
    SFV_ATOMIC_HCA = 1,       /* atomic with respect to other atomics through this NIC only */
    SFV_ATOMIC_GLOBAL = 2     /* atomic with respect to every NIC and the CPUs */
} sfv_atomic_cap;
/* The limits of a device, to size queues, element lists and read depths (ibv_device_attr).
   Counts are per device except: max_qp_wr per queue of a QP (send or receive), max_sge per work
   request and max_sge_rd per RDMA read (some iWARP NICs: 1), max_srq_wr per SRQ and max_srq_sge
   per SRQ work request; max_qp_rd_atom: reads and atomics one QP answers at once (its responder
   depth), max_qp_init_rd_atom: those one QP may have outstanding as the requester,
   max_res_rd_atom: those the whole device answers at once. A negative value from the driver
   reads 0. */
typedef struct sfv_device_attr {
    char fw_ver[64];             /* firmware version, NUL-terminated ("" when the driver has none) */
    uint64_t node_guid;          /* host byte order, as sfv_device_list_guid */
    uint64_t sys_image_guid;     /* host byte order */
    uint64_t max_mr_size;        /* bytes, one MR */
    uint64_t page_size_cap;      /* the page sizes the NIC supports, one bit per size */
    uint32_t vendor_id;          /* IEEE OUI of the vendor */
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    uint32_t max_qp, max_qp_wr, max_sge, max_sge_rd;
    uint32_t max_cq, max_cqe;
    uint32_t max_mr, max_pd, max_mw, max_ah;
    uint32_t max_qp_rd_atom, max_qp_init_rd_atom, max_res_rd_atom;
    uint32_t max_srq, max_srq_wr, max_srq_sge;
    uint32_t max_pkeys;
    sfv_atomic_cap atomic_cap;
    uint8_t local_ca_ack_delay;  /* the NIC's ACK delay, as the exponent t of 4.096 us * 2^t */
    uint8_t phys_port_cnt;
} sfv_device_attr;
/* The device's limits, as queried when the context was opened or wrapped (they do not change
   while it is open: no verb is called). NULL out or context: SFV_ERR_INVALID; *out is zeroed
   on failure. Thread safety: any thread. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_query_device(sfv_context *ctx, sfv_device_attr *out);
SAFEVERBS_API const char *sfv_port_state_str(sfv_port_state s);

typedef struct sfv_gid { uint8_t raw[16]; } sfv_gid;
typedef enum sfv_gid_type {
    SFV_GID_TYPE_UNKNOWN = 0, SFV_GID_TYPE_IB = 1, SFV_GID_TYPE_ROCE_V1 = 2, SFV_GID_TYPE_ROCE_V2 = 3
} sfv_gid_type;
typedef struct sfv_gid_entry {
    sfv_gid gid;
    sfv_gid_type type;
    uint32_t ifindex;        /* the netdev behind a RoCE GID, 0 if none */
} sfv_gid_entry;
/* SFV_ERR_NOT_FOUND for an empty or missing table entry. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_query_gid(sfv_context *ctx, uint8_t port, uint32_t index, sfv_gid_entry *out);
/* True for ::ffff:a.b.c.d, the GID of an IPv4 address. */
SAFEVERBS_API bool sfv_gid_is_ipv4(const sfv_gid *gid);
/* How much a channel wants a GID when it picks one itself (higher is better; 0 for NULL):
   4 RoCE v2 with an IPv4 address (routable, what RoCE fabrics mostly use), 3 RoCE v2 with a
   global IPv6 address, 2 RoCE v2 link-local or an IB GID, 1 RoCE v1 (not routable, and many
   NICs and fabrics no longer take it) or a type the driver does not say. */
SAFEVERBS_API int sfv_gid_preference(const sfv_gid_entry *e);
/* The GID a channel picks by default: the usable one sfv_gid_preference likes best, the lowest
   index among equals, among indices 0 .. 255 (a queue pair's GRH takes an 8-bit index, as does
   sfv_channel_desc.gid_index). Where two hosts differ (an IPv6-only one, a second netdev, a
   VLAN), set the index yourself: both sides must use the same type, on the interface that
   reaches the peer. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_choose_gid(sfv_context *ctx, uint8_t port, uint32_t *index_out);

/* >>pd and cq -------------------------------------------------------------------------------- */
/* A protection domain on the device; it holds a reference on the context. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_alloc_pd(sfv_context *ctx, sfv_pd **out);
/* Drops a reference; MRs and channels keep it. NULL: SFV_OK. First it destroys again the channels
   a call that failed part-way (a create of a channel, multi-channel, node, SRQ or SRQ channel,
   sfv_cm_connect, sfv_cm_accept) could neither take apart (a verb refused) nor hand back, and
   deregisters again the barrier MR a failed sfv_create_node could not: the PD keeps them, and
   what they hold (the PD, its device) goes once their destroy is taken. One a verb refuses again
   fails the call (the verb's result, the last error naming it), which then keeps the PD and the
   caller's reference, drops nothing: call it again. */
SAFEVERBS_API sfv_result sfv_dealloc_pd(sfv_pd *pd);
SAFEVERBS_API sfv_context *sfv_pd_context(const sfv_pd *pd);

typedef enum sfv_wc_status { /* values equal enum ibv_wc_status */
    SFV_WC_SUCCESS = 0, SFV_WC_LOC_LEN_ERR, SFV_WC_LOC_QP_OP_ERR, SFV_WC_LOC_EEC_OP_ERR,
    SFV_WC_LOC_PROT_ERR, SFV_WC_WR_FLUSH_ERR, SFV_WC_MW_BIND_ERR, SFV_WC_BAD_RESP_ERR,
    SFV_WC_LOC_ACCESS_ERR, SFV_WC_REM_INV_REQ_ERR, SFV_WC_REM_ACCESS_ERR, SFV_WC_REM_OP_ERR,
    SFV_WC_RETRY_EXC_ERR, SFV_WC_RNR_RETRY_EXC_ERR, SFV_WC_LOC_RDD_VIOL_ERR,
    SFV_WC_REM_INV_RD_REQ_ERR, SFV_WC_REM_ABORT_ERR, SFV_WC_INV_EECN_ERR,
    SFV_WC_INV_EEC_STATE_ERR, SFV_WC_FATAL_ERR, SFV_WC_RESP_TIMEOUT_ERR, SFV_WC_GENERAL_ERR,
    SFV_WC_TM_ERR, SFV_WC_TM_RNDV_INCOMPLETE
} sfv_wc_status;

typedef enum sfv_work_error_class { /* the crate's WorkErrorClass */
    SFV_WORK_ERROR_NONE = 0,
    SFV_WORK_ERROR_LOCAL_PROGRAMMING, /* a bad element, length or opcode on this side */
    SFV_WORK_ERROR_LOCAL_RESOURCE,    /* flushed: the queue pair went to the error state */
    SFV_WORK_ERROR_REMOTE,            /* the peer refused: access, invalid request, ... */
    SFV_WORK_ERROR_TRANSPORT,         /* retries exhausted: peer gone or not receiving */
    SFV_WORK_ERROR_TIMEOUT,           /* a deadline expired and the channel flushed the work (result
                                         SFV_ERR_TIMEOUT, status WR_FLUSH_ERR); or RESP_TIMEOUT_ERR */
    SFV_WORK_ERROR_FATAL,
    SFV_WORK_ERROR_UNKNOWN
} sfv_work_error_class;

typedef enum sfv_wc_opcode {
    SFV_WC_OP_UNKNOWN = 0, SFV_WC_OP_SEND, SFV_WC_OP_RECV, SFV_WC_OP_WRITE, SFV_WC_OP_READ,
    SFV_WC_OP_RECV_IMM, SFV_WC_OP_COMP_SWAP, SFV_WC_OP_FETCH_ADD
} sfv_wc_opcode;

/* One finished work request: the crate's WorkSuccess and WorkError in one value. */
typedef struct sfv_work_completion {
    uint64_t wr_id;
    sfv_result result;               /* SFV_OK, or SFV_ERR_WORK with status below */
    sfv_wc_status status;
    sfv_work_error_class error_class;
    uint32_t vendor_err;
    sfv_wc_opcode opcode;
    uint32_t byte_len;               /* bytes written locally: receive, read, atomic (8); 0 otherwise
                                        (sfv_poll_cq's, of your own QPs: receives and atomics only).
                                        The receive of a write with immediate (RECV_IMM) says how
                                        many bytes that write placed in the region; it uses none
                                        of the receive's own elements (measured on rxe). */
    uint32_t imm_data;               /* host byte order; valid when has_imm */
    bool has_imm;
    const sfv_channel *channel;      /* a receive of an SRQ (>>srq): the channel it came in on (NULL
                                        if that channel is destroyed or reset by now, a reset
                                        giving it a new queue pair, or its queue pair was
                                        destroyed to stop its work, and when a consumed handle
                                        is read again); NULL for all else */
} sfv_work_completion;

/* A status's name ("REM_ACCESS_ERR"), its class, a hint for humans, and a class's name: never
   NULL, also for a value outside the enum. */
SAFEVERBS_API const char *sfv_wc_status_str(sfv_wc_status s);
SAFEVERBS_API sfv_work_error_class sfv_wc_status_class(sfv_wc_status s);
SAFEVERBS_API const char *sfv_wc_status_hint(sfv_wc_status s);
SAFEVERBS_API const char *sfv_work_error_class_str(sfv_work_error_class c);

/* A CQ for queue pairs of your own. Nothing in safeverbs posts to it (a channel makes its own
   CQ): it is the CQ you give to a QP you create with raw verbs (ibv_create_qp on sfv_pd_raw,
   with sfv_cq_raw as its send and receive CQ; see RAW VERBS at the top), and its completions
   come back through sfv_poll_cq with your wr_ids, as sfv_work_completion. min_entries: 1 ..
   the device's max_cqe (sfv_query_device). Destroy your QPs before sfv_destroy_cq (a CQ that a
   QP still uses cannot be destroyed, and would leak). No completion channel: poll it. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_create_cq(sfv_context *ctx, uint32_t min_entries, sfv_cq **out);
SAFEVERBS_API sfv_result sfv_destroy_cq(sfv_cq *cq);
SAFEVERBS_API uint32_t sfv_cq_capacity(const sfv_cq *cq);
/* Non-blocking: takes up to max completions, *count says how many (0: none ready). wr_id is
   your QP's own; byte_len is set for receives, and atomics (8); else 0. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_poll_cq(sfv_cq *cq, sfv_work_completion *out, size_t max, size_t *count);

/* >>memory regions --------------------------------------------------------------------------- */
/* Values equal IBV_ACCESS_*. */
enum {
    SFV_ACCESS_LOCAL_WRITE = 1,
    SFV_ACCESS_REMOTE_WRITE = 1 << 1,
    SFV_ACCESS_REMOTE_READ = 1 << 2,
    SFV_ACCESS_REMOTE_ATOMIC = 1 << 3,
    SFV_ACCESS_MW_BIND = 1 << 4,
    SFV_ACCESS_ZERO_BASED = 1 << 5,
    SFV_ACCESS_ON_DEMAND = 1 << 6,
    SFV_ACCESS_HUGETLB = 1 << 7,
    SFV_ACCESS_RELAXED_ORDERING = 1 << 20
};

/* Local write only: the NIC touches this memory only through elements you post. Safe. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_mr_local(sfv_pd *pd, void *addr, size_t length, sfv_mr **out);
/* Local write + remote read + remote write. YOU are responsible, as long as any peer holds the
   rkey: (1) keep the memory allocated, (2) have a way to revoke it (deregister, then tell the
   peers), (3) not read or write it locally while a peer may be writing it. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_mr_shared(sfv_pd *pd, void *addr, size_t length, sfv_mr **out);
/* Explicit SFV_ACCESS_* flags. With any remote flag, the duties of sfv_reg_mr_shared are yours.
   SFV_ACCESS_ZERO_BASED is refused (SFV_ERR_INVALID): an MR's elements and remote regions
   address it by its addresses (or, DMA-BUF, its iova), where a provider that honoured the flag
   would take offsets from 0. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_mr_access(sfv_pd *pd, void *addr, size_t length, unsigned access, sfv_mr **out);
/* DMA-BUF: the MR starts at `offset` in the buffer behind `fd`; the NIC addresses it at `iova`,
   whose offset within a page must equal offset's (refused with SFV_ERR_INVALID before the verb).
   Its elements hold iovas, not host addresses: once a device context has had a DMA-BUF MR, no
   send or write on its channels goes inline (the CPU would copy from the iova), those made before
   included, whatever their PD (another sfv_pd may wrap the same verbs PD) or sfv_context (every
   one over that verbs context: sfv_context_wrap twice); sfv_channel_inject (plain memory) still
   does. An element of it posted on a channel of another device is a misuse: the NIC refuses it,
   but there one small enough goes inline, copied by the CPU from the iova at the post (a crash,
   or whatever host memory lies there sent): register DMA-BUF MRs on the device whose channels
   post them. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_local(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, sfv_mr **out);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_shared(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, sfv_mr **out);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_access(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, unsigned access, sfv_mr **out);
/* Deregisters and frees. If the verb refuses, the MR stays registered and valid (a remote one's
   rkey still works: do not free its memory) and the call can be repeated. NULL: SFV_OK.
   Refused, the MR kept, with SFV_ERR_INVALID (errno EBUSY): while leases on it live (>>leases);
   in a debug build (SFV_TRACK_INFLIGHT), while work in flight uses it, which is a broken
   contract first (SFV_ASSERT, naming the work), the refusal only where SFV_ASSERT returns. */
SAFEVERBS_API sfv_result sfv_dereg_mr(sfv_mr *mr);

/* The MR's keys, address, length, SFV_ACCESS_* flags and PD (not a new reference); 0 or NULL
   for a NULL mr. */
SAFEVERBS_API uint32_t sfv_mr_lkey(const sfv_mr *mr);
SAFEVERBS_API uint32_t sfv_mr_rkey(const sfv_mr *mr);
SAFEVERBS_API uint64_t sfv_mr_addr(const sfv_mr *mr);   /* the iova for a DMA-BUF MR */
SAFEVERBS_API size_t sfv_mr_length(const sfv_mr *mr);
SAFEVERBS_API unsigned sfv_mr_access(const sfv_mr *mr);
SAFEVERBS_API sfv_pd *sfv_mr_pd(const sfv_mr *mr);
/* True when [ptr, ptr+len) lies inside the MR (an empty range at either end included). */
SAFEVERBS_API bool sfv_mr_encloses(const sfv_mr *mr, const void *ptr, size_t len);

/* >>raw verbs -------------------------------------------------------------------------------- */
/* The libibverbs objects behind safeverbs' handles, for what safeverbs does not do; the RAW
   VERBS rules at the top say what you may do with them. Each returns NULL for NULL and is valid
   as long as its handle is (a reference of yours, or a child's). Declaring them needs no
   <infiniband/verbs.h>; using the result does. Thread safety: any thread. */
SAFEVERBS_API struct ibv_context *sfv_context_raw(const sfv_context *ctx);
SAFEVERBS_API struct ibv_pd *sfv_pd_raw(const sfv_pd *pd);
SAFEVERBS_API struct ibv_mr *sfv_mr_raw(const sfv_mr *mr);
SAFEVERBS_API struct ibv_cq *sfv_cq_raw(const sfv_cq *cq);
/* A channel's RC queue pair and its CQ, which both of its queues complete to; on an SRQ (>>srq),
   its sends only: its receives complete to the SRQ's CQ. The QP is valid only while the channel
   keeps it: sfv_channel_reset destroys it and makes another, and a channel that destroyed it
   and lives on (work a deadline's flush did not end, a reset or destroy that failed part-way)
   has none (NULL). Ask for it again after those; never keep it. */
SAFEVERBS_API struct ibv_qp *sfv_channel_raw_qp(const sfv_channel *ch);
SAFEVERBS_API struct ibv_cq *sfv_channel_raw_cq(const sfv_channel *ch);
/* An SRQ's shared receive queue (query only: ibv_query_srq; posting to it or modifying it
   bypasses the SRQ's bookkeeping, as for a channel's QP). */
SAFEVERBS_API struct ibv_srq *sfv_srq_raw(const sfv_srq *srq);
/* A context over a device you opened yourself (ibv_open_device). It is checked like
   sfv_open_device's: ibv_query_device (sfv_query_device's values), and port 1 must be ACTIVE or
   ARMED (otherwise SFV_ERR_RESOURCE naming the state). With take_ownership, safeverbs calls
   ibv_close_device when the context's last reference goes; without it, never: then close it
   yourself, after every safeverbs object made from it is gone (sfv_close_device and every
   child's destroy or release; a multi-channel's or node's channels go with it). A wrap made
   its async fd non-blocking (safeverbs reads the events), and it stays so. On failure *out is
   NULL and `raw` is still yours, as it was, whatever take_ownership said. NULL raw or out:
   SFV_ERR_INVALID; so is take_ownership of a verbs context another live sfv_context owns already
   (an opened one's sfv_context_raw, or another such wrap: it would be closed twice). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_context_wrap(struct ibv_context *raw, bool take_ownership, sfv_context **out);
/* A PD over one you allocated yourself (ibv_alloc_pd) on ctx's device context, which must be
   the very one (sfv_context_raw(ctx); another context, even of the same device: SFV_ERR_INVALID).
   The PD holds a reference on ctx as sfv_alloc_pd's does. With take_ownership, safeverbs calls
   ibv_dealloc_pd when its last reference goes; without it, never: dealloc it yourself after
   sfv_dealloc_pd and after every MR, SRQ, channel, multi-channel and node made on it is destroyed,
   and before you close its context. On failure *out is NULL and `raw` is still yours. NULL
   ctx, raw or out: SFV_ERR_INVALID; so is take_ownership of a verbs PD another live sfv_pd owns
   already (sfv_alloc_pd's sfv_pd_raw, or another such wrap: it would be deallocated twice). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_pd_wrap(sfv_context *ctx, struct ibv_pd *raw, bool take_ownership, sfv_pd **out);

/* >>remote regions --------------------------------------------------------------------------- */
/* [addr, addr + length) of a peer's memory, with its rkey. No region may pass 2^64: one that
   does ("wraps") is refused with SFV_ERR_INVALID by every call that narrows it (_sub, _slice,
   _array_field) or posts to it (write, read), before anything reaches the NIC; decode refuses it. */
typedef struct sfv_remote_mr { uint64_t addr; uint64_t length; uint32_t rkey; } sfv_remote_mr;
/* The MR's region; all zero for NULL. */
SAFEVERBS_API sfv_remote_mr sfv_mr_remote(const sfv_mr *mr);
/* Never fails: it keeps what it is given, a wrapping region included (see above). */
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_make(uint64_t addr, uint64_t length, uint32_t rkey);
SAFEVERBS_API uint64_t sfv_remote_mr_addr(sfv_remote_mr region);
SAFEVERBS_API uint64_t sfv_remote_mr_length(sfv_remote_mr region);
SAFEVERBS_API uint32_t sfv_remote_mr_rkey(sfv_remote_mr region);
/* Every checked helper below zeroes *out when it refuses (and NULL out is SFV_ERR_INVALID).
   [offset, length): SFV_ERR_SLICE_NOT_WITHIN_BOUNDS when offset > length, and for the empty
   region at the end of one that ends at 2^64 (an address that does not exist). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_remote_mr_sub(sfv_remote_mr region, uint64_t offset, sfv_remote_mr *out);
/* No check against the length; still no wrap: the address saturates at 2^64 - 1, the length
   floors at 0 and is cut to what fits below 2^64. A region outside the peer's MR fails there
   with a remote access error. */
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_sub_unchecked(sfv_remote_mr region, uint64_t offset);
/* [offset, offset+length) inside r, or SFV_ERR_SLICE_NOT_WITHIN_BOUNDS (as an empty one at 2^64). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_remote_mr_slice(sfv_remote_mr region, uint64_t offset, uint64_t length, sfv_remote_mr *out);
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_slice_unchecked(sfv_remote_mr region, uint64_t offset, uint64_t length);
/* Field [field_offset, +field_size) of element `index` of an array of elem_size-byte items at
   the start of r; every product and sum is overflow-checked. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_remote_mr_array_field(sfv_remote_mr region, uint64_t elem_size, uint64_t index, uint64_t field_offset, uint64_t field_size, sfv_remote_mr *out);
/* The same without the bounds check; saturating arithmetic, so still no wrap. */
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_array_field_unchecked(sfv_remote_mr region, uint64_t elem_size, uint64_t index, uint64_t field_offset, uint64_t field_size);

/* The crate's remote_struct_field!, remote_array_field! and remote_struct_array_field!:
   a remote region that holds a `type` (or an array of them), narrowed to one field or element.
       sfv_remote_mr f; if (SFV_REMOTE_STRUCT_FIELD(r, struct msg, seq, &f) != SFV_OK) ...    */
#define SFV_REMOTE_STRUCT_FIELD(r, type, field, out) \
    sfv_remote_mr_slice((r), offsetof(type, field), sizeof(((type *)0)->field), (out))
#define SFV_REMOTE_ARRAY_FIELD(r, type, index, out) \
    sfv_remote_mr_array_field((r), sizeof(type), (uint64_t)(index), 0, sizeof(type), (out))
#define SFV_REMOTE_STRUCT_ARRAY_FIELD(r, type, index, field, out)                               \
    sfv_remote_mr_array_field((r), sizeof(type), (uint64_t)(index), offsetof(type, field), \
                              sizeof(((type *)0)->field), (out))
#define SFV_REMOTE_STRUCT_FIELD_UNCHECKED(r, type, field) \
    sfv_remote_mr_slice_unchecked((r), offsetof(type, field), sizeof(((type *)0)->field))
#define SFV_REMOTE_ARRAY_FIELD_UNCHECKED(r, type, index) \
    sfv_remote_mr_array_field_unchecked((r), sizeof(type), (uint64_t)(index), 0, sizeof(type))
#define SFV_REMOTE_STRUCT_ARRAY_FIELD_UNCHECKED(r, type, index, field)                          \
    sfv_remote_mr_array_field_unchecked((r), sizeof(type), (uint64_t)(index), offsetof(type, field), \
                                        sizeof(((type *)0)->field))

/* A fixed 24-byte encoding, big-endian: "SR", version 1, 0, addr, length, rkey. Encoding into
   NULL does nothing. */
#define SFV_REMOTE_MR_ENCODED_SIZE 24
SAFEVERBS_API void sfv_remote_mr_encode(sfv_remote_mr region, uint8_t out[SFV_REMOTE_MR_ENCODED_SIZE]);
/* SFV_ERR_INVALID for short input, a bad magic, version or reserved byte, or addr+length wrapping. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_remote_mr_decode(const uint8_t *in, size_t size, sfv_remote_mr *out);

/* >>elements --------------------------------------------------------------------------------- */
/* Two layouts of struct ibv_sge that the compiler keeps apart: a gather element is memory the
   NIC reads (send, write source), a scatter element is memory the NIC writes (receive, read
   destination). Build them through an MR; the fields are readable, not meant to be set. */
typedef struct sfv_gather_element { uint64_t addr; uint32_t length; uint32_t lkey; } sfv_gather_element;
typedef struct sfv_scatter_element { uint64_t addr; uint32_t length; uint32_t lkey; } sfv_scatter_element;

/* Plain: containment and the 32-bit limit are asserted in debug builds only. A NULL mr gives an
   element with lkey 0, which the NIC refuses (a local protection error); no assert. */
SAFEVERBS_API sfv_gather_element sfv_mr_gather_element(const sfv_mr *mr, const void *data, size_t len);
SAFEVERBS_API sfv_scatter_element sfv_mr_scatter_element(const sfv_mr *mr, void *data, size_t len);
/* Checked: SFV_ERR_SLICE_TOO_BIG or SFV_ERR_SLICE_NOT_WITHIN_BOUNDS (a NULL mr or out:
   SFV_ERR_INVALID), *out zeroed. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_mr_gather_element_checked(const sfv_mr *mr, const void *data, size_t len, sfv_gather_element *out);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_mr_scatter_element_checked(const sfv_mr *mr, void *data, size_t len, sfv_scatter_element *out);
/* Unchecked: no checks at all; a length over 32 bits is truncated. The NIC reports a local
   protection error for memory outside the MR, except in a send, write or write with immediate
   small enough to go inline (sfv_channel_desc.max_inline_data): the CPU copies those bytes at the
   post, with no MR check, so they must be memory the program may read (as must a plain
   element's in a release build, where nothing checks it). */
SAFEVERBS_API sfv_gather_element sfv_mr_gather_element_unchecked(const sfv_mr *mr, const void *data, size_t len);
SAFEVERBS_API sfv_scatter_element sfv_mr_scatter_element_unchecked(const sfv_mr *mr, void *data, size_t len);

/* >>channel ---------------------------------------------------------------------------------- */
typedef enum sfv_wait_mode {
    SFV_WAIT_DEFAULT = 0,   /* = SFV_WAIT_BUSY */
    SFV_WAIT_BUSY,          /* spin on the CQ: lowest latency, one core busy */
    SFV_WAIT_EVENT          /* sleep on a completion channel: sfv_channel_fd() for poll/epoll */
} sfv_wait_mode;

/* A zero-filled desc means every default:
     cq_entries       max_send_wr + max_recv_wr      max_send_wr, max_recv_wr   128
                      Memory a channel costs with these defaults (measured by make bench on rxe,
                      bench/sfv_scale --test mem, 1 to 64 channels): about 7.5 KB of heap (6 KB of it
                      safeverbs' own tracking: a place of 24 bytes per work request, the rings
                      rounded up to a power of two; the rest libibverbs' and the provider's) and
                      about 240 KB of queue memory mapped with the kernel (the provider's send and
                      receive queues and CQ). Both grow with max_send_wr, max_recv_wr, cq_entries,
                      the element counts and max_inline_data; debug builds add the in-flight
                      tracking (>>impl inflight).
     max_send_sge     4        max_recv_sge  4
     max_inline_data  0: what the device grants, capped at SFV_INLINE_DEFAULT (256 bytes).
                      A send, write or write with immediate whose byte total fits goes inline
                      (the CPU copies the bytes into the work request at the post: no memory
                      region read by the NIC, and the buffer is free on return; never once the
                      context has had a DMA-BUF MR, whose iovas are no host addresses); sfv_channel_inject
                      needs it. SFV_INLINE_NONE: no inline data at all. Another value: asked of
                      the device (at most 65536; the channel uses what it grants, at most that).
                      An ask the QP creation refuses (EINVAL: devices do not say their limit) is
                      halved until one is taken, down to none. sfv_channel_get_desc gives what
                      the channel uses (SFV_INLINE_NONE where that is nothing);
                      sfv_channel_desc_resolve, which makes no QP, the ask. Inline bytes are read
                      by the CPU at the post, so no MR is checked for them (an element outside
                      its MR is not refused by the NIC): SFV_INLINE_NONE where that matters.
                      Why 256: the measurement at SFV_INLINE_DEFAULT.
     access           LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ (what the QP lets peers do; add
                      REMOTE_ATOMIC on the side whose memory peers' atomics target: >>atomics)
     port             1
     gid_index        chosen by sfv_choose_gid (RoCE v2 with an IPv4 address first);
                      set gid_index_set to use gid_index as it is (0 is a valid index)
     path_mtu         the port's active MTU (bytes; 256, 512, 1024, 2048 or 4096; never above it:
                      a larger packet than the link carries is dropped, and the work fails late)
     send_psn         0: a random one, chosen at creation, so that a late packet of an earlier
                      connection on a reused QP number is not taken for this one's (24 bits;
                      the peer learns it from the endpoint)
     min_rnr_timer    12 (IB code: 0.64 ms)       ack_timeout  14 (IB code: 4.096 us * 2^14 = 67 ms)
     ack_retries      6: a peer that is gone is found by the transport, in (1 + 6) ack timeouts,
                      about 0.5 s (measured on rxe: RETRY_EXC_ERR after ~0.5-0.6 s). 7 is what
                      many programs use, but rxe takes it as "retry for ever" (the IB spec gives
                      that meaning only to the RNR count), and then only timeout_ms ends a wait.
     rnr_retries      7 (= retry forever on RNR: waits are bounded by timeout_ms); set
                      ack_retries_set / rnr_retries_set to use a value as it is (0 = none)
     service_level    0 (IB SL, 0 .. 15)          traffic_class  0 (the GRH's IPv6 traffic class
                      on RoCE: DSCP << 2, which lossless fabrics key their PFC priority on)
     max_rd_atomic    the device's limit for reads and atomics in flight (they share it), as
                      initiator and as responder; the handshake lowers the initiator side to
                      what the peer answers (its endpoint)
     timeout_ms       10000, the deadline of every blocking call and scope
     wait_mode        SFV_WAIT_BUSY
     srq              NULL (a receive queue of its own; see >>srq)
   Values out of range are refused by sfv_create_channel with SFV_ERR_INVALID naming the field. */
/* The default cap of desc.max_inline_data (0): a device that grants more is used up to this.
   Where inline stops paying, measured on rxe (Linux 6.1 guest, rxe0 -> rxe1 over veth, send
   round trips, bench/sfv_bench --test lat --impl sfv --inline 0 against --inline 512, 4
   alternating rounds of 1500 per size; the fastest samples, min and 10th percentile, as the
   host's cores were shared): inline was faster by 5% (min) at 8 B, 5-6% at 64 B and 128 B, 7% /
   5% at 256 B, and by 1-2% at 384 B and 512 B, within the noise. Up to 256 B it pays; beyond,
   the copy through the CPU costs what it saves. (rxe grants up to 512 B; a NIC's own limit is
   often near 256 B too.) */
#define SFV_INLINE_DEFAULT 256u
/* desc.max_inline_data: no inline data (sends and writes always read their elements from their
   MR; sfv_channel_inject is refused). */
#define SFV_INLINE_NONE 0xFFFFFFFFu
typedef struct sfv_channel_desc {
    uint32_t cq_entries;
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
    unsigned access;
    uint8_t port;
    bool gid_index_set;
    uint8_t gid_index;
    uint32_t path_mtu;
    uint32_t send_psn;
    uint8_t min_rnr_timer;
    uint8_t ack_timeout;
    bool ack_retries_set;
    uint8_t ack_retries;
    bool rnr_retries_set;
    uint8_t rnr_retries;
    uint8_t service_level;
    uint8_t traffic_class;
    uint32_t max_rd_atomic;
    uint32_t timeout_ms;
    sfv_wait_mode wait_mode;
    sfv_srq *srq;                 /* NULL: the channel's own receive queue. Else its receives come
                                     from this SRQ (>>srq; made on the same PD, or one wrapping the
                                     same verbs PD on the same context, else SFV_ERR_INVALID): it holds a
                                     reference on it, and refuses receives of its own */
} sfv_channel_desc;

/* What the peer needs to connect. */
typedef struct sfv_endpoint {
    uint32_t qpn;         /* 24 bits */
    uint16_t lid;
    uint32_t psn;         /* 24 bits: the first PSN this side sends */
    uint32_t mtu;         /* bytes: the path MTU this side uses */
    uint8_t rd_atomic;    /* RDMA reads this side answers at once; 0: not said (a version 1 blob) */
    bool has_gid;
    sfv_gid gid;
} sfv_endpoint;
#define SFV_ENDPOINT_ENCODED_SIZE 32
/* "SE", version 2, flags, qpn, lid, mtu, read depth, psn (3 bytes), gid; big-endian. Version 1
   (no read depth: that byte is 0) still decodes. An endpoint the handshake refuses for its QPN,
   PSN or MTU never encodes as one decode takes (a PSN over 24 bits goes out whole, in version 1's
   layout). Encoding into NULL does nothing; a NULL ep encodes 32 zero bytes (which decode
   refuses). Decode takes at least SFV_ENDPOINT_ENCODED_SIZE bytes and reads the first that many;
   anything else is SFV_ERR_INVALID with *out zeroed, and so is a GID no port has under the GID
   flag (all zero, multicast, the IPv4 0.0.0.0). */
SAFEVERBS_API void sfv_endpoint_encode(const sfv_endpoint *ep, uint8_t out[SFV_ENDPOINT_ENCODED_SIZE]);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_endpoint_decode(const uint8_t *in, size_t size, sfv_endpoint *out);

/* The desc with every default filled in for this PD's device (port and GID resolved). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_desc_resolve(sfv_pd *pd, const sfv_channel_desc *desc, sfv_channel_desc *out);
/* A channel (an RC queue pair with its own CQ) in INIT, so receives can be posted before the
   handshake. Needs the port ACTIVE (else SFV_ERR_RESOURCE naming its state); desc fields out of
   range: SFV_ERR_INVALID naming the field. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_create_channel(sfv_pd *pd, const sfv_channel_desc *desc, sfv_channel **out);
/* Flushes work in flight (the QP goes to the error state and the flushed work is drained), then
   frees; the NIC touches none of the channel's buffers afterwards. If a verb refuses to destroy,
   the channel stays valid and the call can be retried: nothing is freed if the queue pair's
   destroy refused (but its leases have ended: their windows go first, >>leases); if a later one
   did (its CQ's, its completion channel's, or its SRQ's where the channel held the SRQ's last
   reference), the queue pair is gone already, so the channel is broken (its work flushed), and a
   retry frees the rest. NULL: SFV_OK. A
   channel destroyed already is a broken contract, caught in debug builds (SFV_ASSERT, then
   SFV_ERR_INVALID) unless a newer channel took its address; release builds would read freed
   memory. */
SAFEVERBS_API sfv_result sfv_destroy_channel(sfv_channel *ch);
/* What this side's peer needs (send it, sfv_endpoint_encode). A channel with no queue pair (a
   reset that could not make one, a destroy that failed part-way): SFV_ERR_BROKEN, *out zeroed. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_endpoint(const sfv_channel *ch, sfv_endpoint *out);
/* RESET -> INIT -> RTR -> RTS against the peer's endpoint; sets a GRH when the peer has a GID
   and this side one too (a GID index chosen or set: on RoCE always).
   A peer endpoint decode would refuse (its QPN, PSN, MTU, a GID no port has): SFV_ERR_INVALID,
   nothing done. Once only (again: SFV_ERR_INVALID); a channel broken before it connected (an
   event, a reset that could not make its QP): SFV_ERR_BROKEN, saying why (sfv_channel_reset
   recovers it, unless its CQ, its device or its SRQ failed: >>events). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_handshake(sfv_channel *ch, const sfv_endpoint *peer);
/* Recovers a broken channel (or moves a working one to a new peer) without destroying it: the
   work in flight is flushed first (the QP to the error state, drained; every pending handle of
   it then reports WR_FLUSH_ERR, and its buffers are free), the QP is destroyed and a new one is
   made in its place (INIT: receives may be posted again), with a new random first PSN. So the
   channel has a NEW QP number and PSN, and its endpoint (sfv_channel_endpoint) must go to the
   peer again before sfv_channel_handshake with the peer's new endpoint (the peer resets too, or
   is a new channel: a peer that restarted). A late packet of the old connection names the old
   QP number, which the new QP does not answer to, and the new PSNs start elsewhere: nothing of
   the old connection is taken for the new one. The port's address is read again (the LID an
   InfiniBand subnet manager assigned anew, the GID at desc.gid_index that a RoCE address change
   rewrote; kept as it was where that read fails or the port is not ACTIVE), so the new endpoint
   says where the channel is now. The desc is kept (a send_psn set in it is not reused). Refused
   inside a scope (SFV_ERR_INVALID), and for a channel whose CQ or device failed (a CQ_ERR or
   DEVICE_FATAL event: the reset keeps the CQ) or whose SRQ failed (no QP takes from
   it again), or whose destroy failed part-way (its CQ gone): SFV_ERR_BROKEN before anything is
   touched, destroy it; a verb that fails leaves the channel broken with no QP (or, where the old
   QP's destroy was refused, with that QP, moved to the error state if the device let it; where
   the new QP's move to INIT and then its destroy were refused, with the new one), and the call
   can be repeated. Handles of the old work stay valid until consumed; leases
   (>>leases) on the old QP end (their rkeys dead; sfv_lease_revoke frees them). An event that breaks the channel while it
   is reset (read on another thread) breaks the new QP: the reset never undoes it.
   Thread safety: as the channel's. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_reset(sfv_channel *ch);
SAFEVERBS_API sfv_pd *sfv_channel_pd(const sfv_channel *ch);
SAFEVERBS_API const sfv_channel_desc *sfv_channel_get_desc(const sfv_channel *ch);
/* The completion channel's fd (SFV_WAIT_EVENT), else -1. Readable after sfv_channel_arm once
   a completion arrives; then call sfv_channel_ack_events and poll your pending work. (A channel
   on an SRQ: its receives complete to the SRQ's CQ, which has no fd: they never make this one
   readable; poll the SRQ's handles.)
   In your own event loop, keep this order, or a completion that lands between a poll and the
   sleep is missed until the next one: (1) sfv_channel_arm, (2) poll every pending handle you
   wait for (sfv_pending_poll) and handle what is done, (3) only if none was done, sleep in
   poll/epoll on the fd, (4) when it is readable, sfv_channel_ack_events, and go to (1). The
   channel's own waits do exactly this. sfv_channel_arm also takes every completion already in
   the CQ (they raise no event), so the polls of (2) find them, and, as a wait does, flushes
   the work of a channel an event broke (>>events), so they find that done too. */
SAFEVERBS_API int sfv_channel_fd(const sfv_channel *ch);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_arm(sfv_channel *ch);
SAFEVERBS_API sfv_result sfv_channel_ack_events(sfv_channel *ch);
/* Places taken in the channel's two queues: work posted and not yet consumed by a pending
   handle or a scope, plus work consumed before older work that is not (its place frees when
   the older work is consumed). A post that finds its queue's places all taken is refused. */
SAFEVERBS_API size_t sfv_channel_outstanding(const sfv_channel *ch);

/* Blocking: post, then wait (deadline: desc.timeout_ms; the flush after an expiry may add up to
   5 s on a NIC slow to flush, after which the QP is destroyed). On SFV_ERR_TIMEOUT (or a wait that fails:
   a CQ error, SFV_ERR_DRIVER from the verb ibv_poll_cq; in SFV_WAIT_EVENT mode also the verb
   ibv_req_notify_cq or poll, with the result of its errno) the channel has flushed the work (and is
   broken), so the buffers are free again; only if the channel could not stop it (it was not
   flushed, and destroying the queue pair was refused) is the result SFV_ERR_DRIVER instead, its
   sfv_last_error saying the buffers are still the NIC's (destroy the channel, or the
   multi-channel it belongs to): the
   SFV_ERR_DRIVERs differ in sfv_last_error()->verb (the verb that failed against "wait"). Work that
   completed after all, as the flush after an expiry began (a message that came in just then),
   keeps its own result (SFV_OK with its data, or SFV_ERR_WORK with its own status), though the
   channel is broken all the same.
   A scope's and a many-peer call's deadline end the same way. wc may be NULL. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_send(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_send_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, uint32_t imm, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_receive(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_write(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_write_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, uint32_t imm, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_read(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote, sfv_work_completion *wc);

/* >>pending ---------------------------------------------------------------------------------- */
/* Pending work lives in storage the caller provides (a local, an array): no allocation per
   operation. Treat the fields as private. */
struct sfv__ring;
typedef struct sfv_pending {
    struct sfv__ring *q_;     /* the channel's send or receive queue */
    uint64_t seq_;            /* the (last) work request's place in that queue */
    uint32_t state_;
    uint32_t batch_;          /* work requests this handle covers (a batch), ending at seq_ */
    void *s_;                 /* while waiting: seq_'s place in the queue */
    uint64_t done_[2];        /* once done: the completion as the channel recorded it */
} sfv_pending;

/* Unpolled posts. The buffers belong to the NIC until the pending work is done: wait for it
   (sfv_pending_wait), or post inside a scope, which waits for you. `pending` may be NULL only
   inside a scope (the scope then polls it). A handle names the work of its last successful post;
   a refused post zeroes it, unless it still holds work of that channel (waiting, or done and not
   consumed), which it keeps. A successful post into a handle that still holds work leaves that
   work with no handle: it stays the channel's until the scope it was posted in ends,
   sfv_channel_reset flushes it or sfv_destroy_channel ends it; until then its buffers are the
   NIC's. Its place stays taken until the scope ends or the channel is destroyed (a reset frees
   its buffers, not its place): it counts in sfv_channel_outstanding, and every place posted
   after it stays taken too (the queue fills). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_send(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_send_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, uint32_t imm, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_receive(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_write(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_write_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, uint32_t imm, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_read(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote, sfv_pending *pending);

/* >>batches ---------------------------------------------------------------------------------- */
/* Batches: `count` work requests (at most SFV_BATCH_MAX) behind one post call, so one doorbell
   (on rxe: one system call) for all of them. Work request i uses elements
   sges[i * per_wr .. i * per_wr + per_wr). Send, write and read batches ask the NIC for one
   completion, on the last work request (selective signalling: RC completes a send queue in
   order), and one pending handle covers the whole batch: it is done when all are, and reports
   the first failure. Write and read batches take one remote region per work request. A receive
   batch fills `count` pending handles, one per receive (every receive completes on its own;
   `pendings` may be NULL only inside a scope, as a single post's handle, the scope consuming them); if
   the verb takes only part of it, the call fails, its message says how many were taken, and
   those handles wait as after a success (the rest are zeroed). A receive batch refused for its
   count (0, or over SFV_BATCH_MAX: SFV_ERR_INVALID) leaves its handles untouched (the array may
   be shorter than the count). A send-side batch the verb took only part of: SFV_ERR_BROKEN, and
   its QP goes to the error state at once (its unsignaled work can only end by a flush: a scope
   around it returns then, not at its deadline); posted with a handle, the part taken ends (flushed,
   or done where it had already run) before the call returns and its places are free (a reset then leaves no place taken but those
   of older work whose handles are not yet consumed); only if the channel could not stop it (not
   flushed, and destroying its queue pair refused) is the result SFV_ERR_DRIVER instead, saying
   its buffers are still the NIC's (destroy the channel, or its multi-channel). */
#define SFV_BATCH_MAX 64
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_send_batch(sfv_channel *ch, const sfv_gather_element *sges, size_t per_wr, size_t count, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_write_batch(sfv_channel *ch, const sfv_gather_element *sges, size_t per_wr, size_t count, const sfv_remote_mr *remotes, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_read_batch(sfv_channel *ch, const sfv_scatter_element *sges, size_t per_wr, size_t count, const sfv_remote_mr *remotes, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_receive_batch(sfv_channel *ch, const sfv_scatter_element *sges, size_t per_wr, size_t count, sfv_pending *pendings);

/* A read batch's completion (wc->byte_len) gives the bytes of the whole batch, every request's
   (at most UINT32_MAX), not only its last request's. (Each read a scope consumes itself, posted
   with a NULL handle or left by fn with its handle unconsumed, gives its own: sfv_channel_scope_wc.)
   Request batches: the same, one work request per entry, each with its own element count, and
   sends and writes each with or without an immediate (has_imm, imm). Element counts are checked
   per request (each within the channel's max_send_sge, or its read limit for reads); NULL sges
   is allowed only with n 0. One doorbell, only the last request signaled, one pending handle for
   all, and the same rules for a partial post, as the batches above. The plain batches stay the
   faster form where every request has the same count and no immediate (they pay for no
   per-request test). Receive batches keep one count for all (a receive's elements only bound
   what it may take: give each the largest). */
typedef struct sfv_send_request { const sfv_gather_element *sges; size_t n; bool has_imm; uint32_t imm; } sfv_send_request;
typedef struct sfv_write_request { const sfv_gather_element *sges; size_t n; sfv_remote_mr remote; bool has_imm; uint32_t imm; } sfv_write_request;
typedef struct sfv_read_request { const sfv_scatter_element *sges; size_t n; sfv_remote_mr remote; } sfv_read_request;
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_sends(sfv_channel *ch, const sfv_send_request *reqs, size_t count, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_writes(sfv_channel *ch, const sfv_write_request *reqs, size_t count, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_reads(sfv_channel *ch, const sfv_read_request *reqs, size_t count, sfv_pending *pending);

/* A pending handle dies with its channel: using one after sfv_destroy_channel is a broken contract,
   caught by SFV_ASSERT in debug builds (a registry of live channels, one lookup per poll or wait);
   release builds skip that check and would read freed memory. A handle whose post was refused
   is zeroed (unless it holds earlier work, see above), and polling or waiting on it is
   SFV_ERR_INVALID.
   wc, when given, is filled on every return but SFV_NOT_DONE (which leaves it as it was): the
   completion, or zeros with wc->result holding the result when there is no completion (a
   pending wait's timeout, a refused call), never a zero that reads as SFV_OK. (A blocking call
   whose deadline passed gives the flushed completion, with wc->result SFV_ERR_TIMEOUT.) Every
   non-OK result leaves a matching sfv_last_error(): for SFV_ERR_WORK it names the operation,
   the status, its class and a hint.
   Checks once: SFV_OK (done), SFV_NOT_DONE, or SFV_ERR_WORK (done, failed; detail in wc). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_pending_poll(sfv_pending *pending, sfv_work_completion *wc);
/* Waits up to timeout_ms (< 0: the channel's timeout_ms; 0: one look, no sleep). SFV_ERR_TIMEOUT
   leaves the work tracked: wait again, or destroy the channel. A wait (a look too) that finds its
   channel broken by an event flushes it first (>>events), which may add up to 5 s on a NIC slow
   to flush, as a blocking call's flush does. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_pending_wait(sfv_pending *pending, int timeout_ms, sfv_work_completion *wc);
/* Waits for pendings[0 .. count) in order, each as sfv_pending_wait would, under one deadline:
   timeout_ms from the first time one of them has to wait long enough to read the clock (< 0:
   the timeout_ms of that handle's channel, for all that follow too, on whatever channel). The
   handles of a receive batch, say, in one call. wcs: NULL, or count completions (wcs[i] for
   pendings[i]), all filled on return.
   SFV_OK: every one succeeded and is consumed. SFV_ERR_WORK: every one is consumed and at least
   one failed (the last error describes the first failure; wcs[i].result tells each). Any other
   result stopped it at the handle that gave it (SFV_ERR_TIMEOUT: still waiting, as after
   sfv_pending_wait; SFV_ERR_INVALID: not posted, or its channel destroyed, which debug builds
   report through SFV_ASSERT, or waited for from a scope's on_wc on that scope's channel): the handles before it are consumed, it and those after it are as
   they were; its wcs entry holds that result, those after it zeros with result SFV_NOT_DONE.
   sfv_pending_done tells which are consumed. count 0: SFV_OK. pendings NULL with count > 0:
   SFV_ERR_INVALID, every wcs entry SFV_NOT_DONE (none written where count wcs would pass
   PTRDIFF_MAX bytes: no array holds them). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_pending_wait_all(sfv_pending *pendings, size_t count, int timeout_ms, sfv_work_completion *wcs);
SAFEVERBS_API bool sfv_pending_done(const sfv_pending *pending);

/* >>atomics ---------------------------------------------------------------------------------- */
/* RDMA atomics on one 8-byte word of a peer's memory, done by the peer's NIC with no help from
   its CPU: compare-and-swap (if the word equals `compare`, it becomes `swap`) and fetch-and-add
   (the word becomes word + `add`, modulo 2^64). Either way the word's value from before the
   operation lands in `old`.
   - The target is the first 8 bytes of `remote`: the region must hold at least 8 bytes
     (else SFV_ERR_SLICE_NOT_WITHIN_BOUNDS) and start on an 8-byte boundary (else
     SFV_ERR_INVALID); a wrapping region is SFV_ERR_INVALID. Narrow a region to its word with
     SFV_REMOTE_STRUCT_FIELD or SFV_REMOTE_ARRAY_FIELD (a uint64_t field).
   - `old` is a scatter element of exactly 8 bytes in an MR (local write); any other length, or
     NULL, is SFV_ERR_INVALID. It belongs to the NIC until the work is done, like any element.
   - Byte order: the peer's word is read and written as a uint64_t in the PEER's host byte
     order (the NIC does the arithmetic on the value the peer's CPU sees), and `compare`, `swap`
     and `add` are plain numbers in this host's order; the old value arrives in `old` in THIS
     host's byte order: read it as a uint64_t (memcpy), never swap it. (Tested on rxe, where
     both hosts are little-endian: tests/test_channel.c t_atomic_byte_order. On the wire the
     operands and the old value travel big-endian; each NIC converts to its own host's order.)
   - What the peer must allow: its MR registered with SFV_ACCESS_REMOTE_ATOMIC
     (sfv_reg_mr_access) or a lease of it with REMOTE_ATOMIC (>>leases), and its channel created
     with SFV_ACCESS_REMOTE_ATOMIC in desc.access
     (the default access leaves it out). A refusal is a failed completion (SFV_ERR_WORK) of
     class SFV_WORK_ERROR_REMOTE: REM_ACCESS_ERR for the MR, and for the QP whatever the NIC
     says (REM_INV_REQ_ERR on rxe); the hint names REMOTE_ATOMIC. As after a refused RDMA read
     or write, this channel is then broken, and the peer's NIC may put the peer's in the error
     state too.
   - The device must support atomics (ibv_device_attr.atomic_cap not IBV_ATOMIC_NONE), else
     SFV_ERR_UNSUPPORTED before posting. Most NICs, rxe among them, say IBV_ATOMIC_HCA: atomic
     against other atomics through the NIC, NOT against the peer's CPU. While peers may use
     the word, the peer's own CPU should not write it (reading it is fine).
   - An atomic takes a place in the send queue like a write, and counts against the read depth
     (max_rd_atomic) like an RDMA read: reads and atomics in flight on a channel share that
     limit, and the NIC holds back the ones over it (no error, they just wait).
   This side's refusals (device, element, region, and those of every post: channel state,
   queue room, a NULL handle outside a scope) happen before posting, leave *pending zeroed (unless
   it still holds work of that channel, which it keeps: >>pending) and the channel usable, and set sfv_last_error() (verb "post"). The blocking forms wait as sfv_channel_read does
   (deadline desc.timeout_ms). `pending` may be NULL inside a scope. Thread safety: as the
   channel's. */
/* Blocking: SFV_OK once the peer's NIC did it (a compare that did not match is SFV_OK too: the
   old value says whether the swap happened, old == compare); SFV_ERR_WORK when the peer
   refused; a refusal before posting as above; SFV_ERR_TIMEOUT after desc.timeout_ms (the channel
   flushed the work and is broken). wc may be NULL; opcode SFV_WC_OP_COMP_SWAP / _FETCH_ADD,
   byte_len 8. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_compare_swap(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t compare, uint64_t swap, sfv_work_completion *wc);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_fetch_add(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t add, sfv_work_completion *wc);
/* Pending: the same work, unpolled; `old` is valid once sfv_pending_poll / _wait says SFV_OK. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_compare_swap(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t compare, uint64_t swap, sfv_pending *pending);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_fetch_add(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t add, sfv_pending *pending);

/* >>scopes ----------------------------------------------------------------------------------- */
/* Scopes: fn posts work through ch; when the scope returns, all of it has completed, whether fn
   succeeded or not, so every buffer it used is free again. Work posted before the scope opened
   is not the scope's: it stays with its own pending handles (a scope waits only for what was
   posted from the moment it opened, and leaves older work in flight as it was). Work fn posted
   with a pending handle and left unconsumed is the scope's too: the scope consumes it (it
   counts in auto_polled, and goes to on_wc), which spends the handle: a wait or poll on it
   after the scope returns is a broken contract (SFV_ASSERT). */
typedef sfv_result (*sfv_scope_fn)(sfv_channel *ch, void *user);
typedef struct sfv_scope_report {
    sfv_result fn_result;          /* what fn returned */
    size_t auto_polled;            /* work fn left for the scope to poll */
    size_t failed;                 /* auto-polled work that failed */
    sfv_work_completion first_error;
} sfv_scope_report;
/* SFV_OK; SFV_ERR_SCOPE_FN (fn failed: report->fn_result; the last error also says where the work
   fn left could not be stopped, its buffers still the NIC's); SFV_ERR_SCOPE_AUTOPOLL (fn succeeded,
   `failed` auto-polled work requests did not: report->first_error; a deadline that expired shows
   as first_error.result == SFV_ERR_TIMEOUT, after the channel flushed the work). report may be NULL. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_scope(sfv_channel *ch, sfv_scope_fn fn, void *user, sfv_scope_report *report);
/* sfv_channel_scope, handing the caller the completion of every work request the scope
   consumed for fn (those posted with a NULL pending handle, and those fn posted with a handle
   and left unconsumed): on_wc(wc, wc_user) once for each, as
   it is consumed, the send queue's in posting order, then the receive queue's in posting order.
   So a scope's receives give their byte_len, immediate and opcode, and each failure its status
   (a deadline that expired: wc->result SFV_ERR_TIMEOUT). The work's buffers are free when on_wc
   runs, but for work the channel could not stop (not flushed, its queue pair's destroy refused):
   wc->result SFV_ERR_DRIVER, the last error's verb "wait" (not "ibv_poll_cq", a failed poll's,
   whose work was flushed) saying its buffers are still the NIC's, as the scope's result does
   then. on_wc may not post to the channel (any post, inject or blocking call), wait for work of
   it that has not completed (a poll, or a wait on work already done, still works), nor destroy
   or reset it or its multi-channel: each is refused with SFV_ERR_INVALID, the last error naming
   on_wc, and the channel takes work again when the scope returns. on_wc NULL: as
   sfv_channel_scope. */
typedef void (*sfv_scope_wc_fn)(const sfv_work_completion *wc, void *wc_user);
/* Selective signalling chosen by the caller: inside a scope only, not a manual one (else
   SFV_ERR_INVALID: a manual scope takes only work consumed by its handle), these
   post without asking the NIC for a completion (no CQ entry, nothing to poll: cheaper for the NIC
   and the poller). "When the scope returns, every buffer is free" still holds: RC completes a
   send queue in order, so a later signaled completion completes this work too; and if the last
   work the scope leaves on the send queue is unsignaled, the scope posts a signaled zero-length
   RDMA write (a fence: no memory of the peer is touched and no key checked, IB C9-88) and waits
   for it. The fence needs the peer's channel to allow SFV_ACCESS_REMOTE_WRITE (the default
   access does); refused, it fails the scope (SFV_ERR_SCOPE_AUTOPOLL; first_error says the
   peer's refusal, REM_INV_REQ_ERR on rxe) after the work before it completed. A failure of unsignaled work shows on the next signaled completion,
   or as the scope's auto-polled failure. (This takes the NIC at IBA's word that work which fails
   or is flushed always completes, signaled or not: unsignaled work with no completion of its own
   below a later one, a flush included, succeeded. A provider that flushed unsignaled work
   without a completion would have it reported as succeeded.) Each needs room for itself and the fence
   (SFV_ERR_RESOURCE otherwise). The fence is not counted in the report, nor handed to on_wc,
   unless it failed. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_send_unsignaled(sfv_channel *ch, const sfv_gather_element *sges, size_t n);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_write_unsignaled(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_post_read_unsignaled(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_scope_wc(sfv_channel *ch, sfv_scope_fn fn, void *user, sfv_scope_wc_fn on_wc, void *wc_user,
                                              sfv_scope_report *report);
/* Returns fn's result as it is. If fn succeeded but left work unconsumed by a pending handle,
   that is a broken contract (SFV_ASSERT; should it return, SFV_ERR_INVALID, the work drained);
   if fn failed, remaining work is drained quietly, within desc.timeout_ms: work that drain
   could not stop (not flushed, the queue pair's destroy refused)
   makes the result SFV_ERR_DRIVER, saying its buffers are still the NIC's (destroy the channel,
   or its multi-channel).
   Injects need no handle: the scope neither fences nor waits for them (an inject's failure shows
   on the channel's next call, as outside a scope). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_manual_scope(sfv_channel *ch, sfv_scope_fn fn, void *user);

/* >>inject ----------------------------------------------------------------------------------- */
/* Fire and forget, as libfabric's fi_inject: `len` bytes from plain memory (no memory region, no
   element) go INLINE, so they are copied into the work request before the call returns, and
   `buf` is the caller's again at once. No pending handle, no completion per operation: an inject
   is posted unsignaled, except every SFV_INJECT_SIGNAL_EVERY(max_send_wr)-th one (half the send
   queue, at least 1), and one that leaves no room for another, which are signaled: RC completes a
   send queue in order, so that completion gives back the places of every inject before it. An
   inject polls the channel's CQ (one ibv_poll_cq) when it posts a signaled one, and when the send
   queue has no room: then it polls until room comes back, within desc.timeout_ms (else
   SFV_ERR_TIMEOUT; room taken by work waiting for its own pending handle or scope, which polling
   cannot free: SFV_ERR_RESOURCE at once; injects whose places only such work's completion would
   give back, RC completing in order: at the deadline, SFV_ERR_TIMEOUT). Completions it polls for other work wait in their
   places for their handles, as any poll's do. Injects keep one place of the send queue free
   (a scope's fence, a signaled post): a channel needs max_send_wr >= 2 for them.
   The weaker promise: SFV_OK means POSTED, not delivered. A send inject needs a receive posted
   by the peer, as any send (the default rnr_retries waits for one for ever). An inject that
   fails (the peer gone: retries exhausted; RNR with a finite rnr_retries; a refused remote key)
   breaks the channel as any failed work does; that failure is seen by the first call that polls
   after it came in (a wait, a blocking call, an inject that polls), and every post from then on
   is refused with SFV_ERR_BROKEN whose sfv_last_error() names the inject, e.g. "inject #1234
   (send, 64 B) failed: RETRY_EXC_ERR ...", counted from 1 on the channel; a pending handle
   flushed by it names it too, when consumed before sfv_channel_reset (after it, one of the old
   queue pair says that the old queue pair ended: a reset forgets the inject that failed). After
   sfv_channel_reset the count goes on.
   Refused (SFV_ERR_INVALID, nothing posted): len over the channel's granted inline limit, or a
   channel without inline data (desc.max_inline_data SFV_INLINE_NONE, or a device that grants
   none), the message naming both numbers; buf NULL with len > 0 (len 0 with buf NULL is a
   zero-length message). A write's remote region is checked as sfv_channel_post_write's: `len`
   bytes that do not fit it, SFV_ERR_SLICE_NOT_WITHIN_BOUNDS; a region that wraps, SFV_ERR_INVALID.
   Every other refusal of a post (not connected, broken) as sfv_channel_post_send's.
   Injects need no in-flight tracking (SFV_TRACK_INFLIGHT: the NIC reads no memory of the caller's
   after the post); a debug build still checks that their bytes are no memory in flight as
   scatter (a broken contract: SFV_ASSERT, then SFV_ERR_INVALID). A place an inject holds counts in sfv_channel_outstanding until a later
   completion (or flush) gives it back, and one given back while older work waits for its pending
   handle or scope counts on (and takes its room) until that work is consumed, as work consumed
   before older work does (sfv_channel_outstanding). Inside a scope, an inject left last on the send queue is
   fenced as an unsignaled post is (not in a manual scope, which has no handle to consume the
   fence by: its injects are as outside one), and the scope does not wait for injects themselves,
   nor report them. Destroy and reset flush them like any work. The data path allocates nothing and makes
   no system call beyond the post's own. Thread safety: as the channel's. */
#define SFV_INJECT_SIGNAL_EVERY(max_send_wr) ((max_send_wr) / 2 > 0 ? (max_send_wr) / 2 : 1)
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_inject(sfv_channel *ch, const void *buf, size_t len);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_inject_write(sfv_channel *ch, const void *buf, size_t len, sfv_remote_mr remote);
/* The peer's receive completes with the immediate (SFV_WC_OP_RECV_IMM, imm_data) as for
   sfv_channel_post_write_imm: the peer must have a receive posted. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_channel_inject_write_imm(sfv_channel *ch, const void *buf, size_t len, sfv_remote_mr remote, uint32_t imm);

/* >>events ----------------------------------------------------------------------------------- */
/* The device's asynchronous events (ibv_get_async_event): a port that went down or came up, a
   QP or CQ that hit an error, an SRQ below its limit. safeverbs reads them itself and acts at
   once: a port that goes down (PORT_ERR) breaks every channel on that port of the context, a
   QP event that moves the QP to the error state (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR) breaks
   its channel, a CQ error (CQ_ERR) breaks the channel of that CQ (or every channel of an SRQ's
   CQ), DEVICE_FATAL breaks every channel of the context. Every event is acknowledged as soon as
   it is read (ibv_ack_async_event), so a destroy never waits for one.
   WHO READS THEM, AND WHEN. Reading costs a system call, so no post and no completion that is
   already there pays for it; only a wait that has to wait does:
   - SFV_WAIT_EVENT: the wait's one poll(2) watches the device's event fd beside the completion
     channel, so an event wakes it at once (no extra system call). A sleep lasts at most 50 ms at
     a time, so an event that another thread read for this channel is seen within 50 ms.
   - SFV_WAIT_BUSY: after each 10 ms of spinning on its CQ, and once more when its deadline
     passes, the wait reads the events (one non-blocking read, and one stat(2): a DEVICE DELETED,
     below). A wait that its completion ends sooner (a ping-pong's) never reads them.
   - sfv_context_events (below) reads them too, and sfv_pending_wait(p, 0, wc) looks at the
     channel's state: in your own event loop, watch sfv_context_event_fd beside sfv_channel_fd.
   A channel broken by an event stops taking posts (SFV_ERR_BROKEN, the message names the event),
   and the first wait (or sfv_channel_arm) that notices it moves its QP to the error state and
   flushes everything in flight (waiting for the flush, whatever the wait's own timeout, up to
   5 s on a NIC slow to flush, then destroying the QP): every pending handle of the channel then completes with
   SFV_ERR_WORK (WR_FLUSH_ERR, class LOCAL_RESOURCE for a port that went down, FATAL for a QP,
   CQ or device error) and a hint naming the event; the buffers are free. On rxe (Linux 6.1 and 6.12) a link taken down
   (`ip link set DEV down`) gives PORT_ERR and its return PORT_ACTIVE; rxe never reports QP_FATAL
   (measured, tests/test_events.c).
   A DEVICE DELETED while open (`rdma link delete`, a driver unloaded): a NIC that can let go of a
   process's queues sends DEVICE_FATAL and fails every verb after it. rxe and siw cannot: the
   kernel sends nothing and holds the delete until the process closes the device. So whoever reads
   the events (the waits above, sfv_context_events) also looks whether the device's uverbs node
   (ibv_device.dev_path) is still in sysfs, and where it was there at open and is gone now (or is
   another node: the kernel gives its number to the next device at once), acts as on DEVICE_FATAL
   (the event is queued as one, once: none where the device sent its own, before or after it: a
   NIC with disassociate loses its node first, then sends DEVICE_FATAL). A channel or SRQ made after
   that is broken by it as it is made. The wait ends within 10 ms (busy) or 50 ms
   (event) with SFV_ERR_WORK, class FATAL, "deleted" in its hint. Close everything of the device
   then (destroys and the close succeed, and let the delete finish); open it again once it is
   back. (Measured on rxe, 6.1 and 6.12: tests/test_events.c.) Nothing makes
   sfv_context_event_fd readable for such a deletion: an event loop of your own learns of it
   when it calls sfv_context_events (a timer's tick will do) or a wait does.
   A wrapped context (sfv_context_wrap) has its event fd made non-blocking and its events read by
   safeverbs: take them from sfv_context_events, not from ibv_get_async_event. A verbs context
   under two safeverbs contexts (wrapped twice, or an opened one's sfv_context_raw wrapped) gives
   each event once, to whichever reads first: that one acts on it for both (their channels break
   as above) and queues it on both. */
typedef enum sfv_event_type {
    SFV_EVENT_OTHER = 0,          /* one safeverbs does not name: raw_type says which */
    SFV_EVENT_PORT_ACTIVE, SFV_EVENT_PORT_ERR, SFV_EVENT_LID_CHANGE, SFV_EVENT_PKEY_CHANGE,
    SFV_EVENT_GID_CHANGE, SFV_EVENT_SM_CHANGE, SFV_EVENT_CLIENT_REREGISTER,
    SFV_EVENT_QP_FATAL, SFV_EVENT_QP_REQ_ERR, SFV_EVENT_QP_ACCESS_ERR, SFV_EVENT_COMM_EST,
    SFV_EVENT_SQ_DRAINED, SFV_EVENT_PATH_MIG, SFV_EVENT_PATH_MIG_ERR, SFV_EVENT_QP_LAST_WQE_REACHED,
    SFV_EVENT_CQ_ERR, SFV_EVENT_SRQ_LIMIT_REACHED, SFV_EVENT_SRQ_ERR, SFV_EVENT_DEVICE_FATAL
} sfv_event_type;
typedef struct sfv_event {
    sfv_event_type type;
    int raw_type;                 /* enum ibv_event_type */
    uint8_t port;                 /* port events: the port; else 0 */
    uint32_t qp_num;              /* QP events: the QP's number; else 0 */
    const sfv_channel *channel;   /* QP and CQ events of a safeverbs channel: which one, else NULL.
                                     To compare with your handles only: it may be destroyed by now */
    const sfv_srq *srq;           /* SRQ events of a safeverbs SRQ (the same caution), else NULL */
    uint32_t channels_broken;     /* channels this event broke */
    uint64_t lost_before;         /* events dropped before this one, the oldest left: the queue
                                     holds the last 64 (take them sooner) */
} sfv_event;
SAFEVERBS_API const char *sfv_event_type_str(sfv_event_type t);
/* An fd (an epoll set of the device's event fd and the queue's own eventfd) that is readable
   while events wait, in the device or in the context's queue; made on the first call, kept
   until the context closes (do not close it). Then call sfv_context_events until it gives 0.
   Thread safety: any thread. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_context_event_fd(sfv_context *ctx, int *fd_out);
/* Reads what the device has (non-blocking), acting on it as above, then takes up to max of the
   queued events, oldest first, into out; *count says how many (0: none). The queue keeps the
   last 64 events read by anyone (a wait included) until they are taken here. Thread safety:
   any thread. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_context_events(sfv_context *ctx, sfv_event *out, size_t max, size_t *count);
/* Whether the channel is broken (an error completion, a flush, an expired deadline, or an event
   above), and the event that broke it, SFV_EVENT_OTHER if none did. NULL: true. */
SAFEVERBS_API bool sfv_channel_broken(const sfv_channel *ch, sfv_event_type *by_event);

/* >>srq -------------------------------------------------------------------------------------- */
/* A shared receive queue: receives posted once, taken by whichever channel on it a message comes
   in on first (a server with many clients posts for all of them, not per client). A channel is
   put on it at creation (sfv_channel_desc.srq); so are all the channels of a multi-channel or a
   node, by the same field of their desc. The channel must be on the SRQ's PD, or on one that
   wraps the same verbs PD (sfv_pd_wrap) on the SRQ's context (a receive lands in MRs of the
   SRQ's PD, and a NIC may check it against the QP's; the SRQ's events and list of channels are
   its context's, so a second sfv_context_wrap of the same device context is another): else
   SFV_ERR_INVALID.
   - Completions: every channel on the SRQ completes its receives to the SRQ's one CQ (its sends
     stay on its own CQ), so a wait on an SRQ receive polls one CQ, whichever channel the message
     came in on, and wc->channel says which channel that was. Waits are busy (the SRQ has no
     completion channel) under the SRQ's timeout_ms; SRQ receives complete in any order (not in
     posting order), each signaled.
   - Receives are posted with sfv_srq_post_receive(_batch) and always need a pending handle (no
     scope covers an SRQ). Places free in posting order, as a channel's do: a receive consumed
     before an older one keeps its place until the older one is consumed, so give max_wr some
     room over what you keep posted (messages from many channels finish in any order); a channel on an SRQ refuses sfv_channel_post_receive and the blocking
     and many-peer receives with SFV_ERR_INVALID ("its receives come from an SRQ").
   - When a channel on it breaks, receives the SRQ holds stay posted for the other channels (the
     channel's own message in progress, if any, completes flushed, with wc->channel naming it).
     A receive that fails breaks the channel it came in on (its queue pair is in the error state),
     as a channel's own receive would, once the SRQ's CQ is polled (a wait on the SRQ, or the
     channel's first flushed send-queue work, which reads the SRQ's CQ first to learn why).
   - The low-water limit (desc.limit, sfv_srq_set_limit): when fewer receives than that are
     posted, the device raises SRQ_LIMIT_REACHED once (>>events: sfv_context_events, with
     event.srq); set the limit again to re-arm it. 0: off.
   - Lifetime: reference counted. sfv_destroy_srq drops the caller's reference; every channel on
     it holds one, so the SRQ goes when its last channel does. Then the NIC takes none of its
     receives any more, and their pending handles die with it (as a channel's do).
   Thread safety: as a channel, for the SRQ and all of its channels together. */
typedef struct sfv_srq_desc {     /* zero-filled: the defaults */
    uint32_t max_wr;              /* receives posted and not consumed, at most; 0: 256 (1 .. max_srq_wr, and
                                     at most max_cqe: they complete to a CQ of max_wr entries) */
    uint32_t max_sge;             /* elements per receive; 0: 4 (1 .. max_srq_sge) */
    uint32_t limit;               /* the low-water limit; 0: none (below max_wr) */
    uint32_t timeout_ms;          /* waits on its receives (sfv_pending_wait with < 0); 0: 10000 */
} sfv_srq_desc;
/* SFV_ERR_INVALID for a desc field out of range (naming it), SFV_ERR_UNSUPPORTED for a device
   without SRQs (max_srq 0). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_create_srq(sfv_pd *pd, const sfv_srq_desc *desc, sfv_srq **out);
/* Drops the caller's reference (see Lifetime above). NULL: SFV_OK. */
SAFEVERBS_API sfv_result sfv_destroy_srq(sfv_srq *srq);
/* Posts one receive to the SRQ: the same rules as sfv_channel_post_receive (elements, room in
   max_wr, a handle that is not NULL); the handle is done when some channel's message filled it. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_srq_post_receive(sfv_srq *srq, const sfv_scatter_element *sges, size_t n, sfv_pending *pending);
/* count receives behind one call, as sfv_channel_post_receive_batch. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_srq_post_receive_batch(sfv_srq *srq, const sfv_scatter_element *sges, size_t per_wr, size_t count, sfv_pending *pendings);
/* Arms the low-water limit (0 < limit < max_wr; 0 disarms where the device allows). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_srq_set_limit(sfv_srq *srq, uint32_t limit);
/* Places taken in the SRQ: receives posted and not yet consumed by a pending handle, plus
   receives consumed before older ones that are not (their places free when the older ones are
   consumed), as sfv_channel_outstanding. A post that finds them all taken is refused. */
SAFEVERBS_API size_t sfv_srq_outstanding(const sfv_srq *srq);

/* >>leases ----------------------------------------------------------------------------------- */
/* Remote access that can be revoked: a lease gives one channel's peer access to a slice of a
   registered region through a type 2 memory window bound to the channel's queue pair. Send the
   peer sfv_lease_remote(lease) (any byte stream, like an MR's region); its writes, reads or
   atomics there work until sfv_lease_revoke, and fail after it with a remote access error (the
   peer's work completes with SFV_WC_REM_ACCESS_ERR, class SFV_WORK_ERROR_REMOTE, and the
   responder's side breaks as for any access outside a region). The rkey works only on the queue
   pair it was bound to: the same peer on another channel, or another peer, is refused alike.
   Rules:
   - the MR must be registered with SFV_ACCESS_MW_BIND (sfv_reg_mr_access), on the channel's
     PD, with LOCAL_WRITE for a lease of write or atomic access (IBTA C10-74); it needs no
     remote access of its own (an MR without any is reached only through its leases, so a
     revoke ends all remote access); access is one or more of REMOTE_WRITE, REMOTE_READ,
     REMOTE_ATOMIC, each also in the channel's desc.access (its queue pair refuses the peer any
     other, window or not: the default access leaves REMOTE_ATOMIC out, >>atomics); the slice
     [offset, offset + length) must lie inside it: else
     SFV_ERR_INVALID or SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, before any verb;
   - the channel must be connected (the bind is a work request on its send queue; granting
     waits for its completion, with the channel's deadline);
   - sfv_dereg_mr refuses an MR with live leases (SFV_ERR_INVALID, errno EBUSY, retryable):
     revoke them first. A lease holds a reference on the PD;
   - a lease outlives its channel's queue pair: sfv_destroy_channel, sfv_channel_reset (its
     new queue pair may face another peer), and a deadline or failure that destroys the queue
     pair to stop its work, end the windows of its leases (their rkeys are dead
     from then on, a reconnected peer's access included) and leave the leases, which
     sfv_lease_revoke frees; grant again after the new handshake;
   - where the device has no type 2 memory windows (device_cap_flags without
     MEM_WINDOW_TYPE_2A/2B, or max_mw 0), sfv_lease_grant says SFV_ERR_UNSUPPORTED: then give a
     separate MR per peer and slice (sfv_reg_mr_shared) and deregister it to revoke, which
     costs a registration each time and ends every peer's access to that MR at once.
   - the slice's bounds are the NIC's to enforce, and rxe (Linux 6.1 and 6.12, measured) does
     not: it checks a window's key, queue pair, access and validity, then only the MR's range,
     so a peer that forges a longer region from the lease's rkey reaches the whole MR (within the
     lease's access). A peer using safeverbs never does (its posts keep inside the region it was
     given); where bounds matter against a hostile peer on rxe, lease an MR that holds just the
     slice. Revocation, the queue pair binding and the access rights are enforced on both.
   A revoked lease is freed: the handle is gone. Thread safety: a lease is its channel's (grant
   and revoke on the thread that uses the channel). */
typedef struct sfv_lease sfv_lease;
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_lease_grant(sfv_channel *ch, sfv_mr *mr, size_t offset, size_t length, unsigned access, sfv_lease **out);
/* What to send the peer: the slice's address, length and the window's rkey (zeros for NULL). */
SAFEVERBS_API sfv_remote_mr sfv_lease_remote(const sfv_lease *lease);
/* Invalidates the rkey (the peer's next access fails) and frees the lease. NULL: SFV_OK. If the
   verb refuses, the lease stays live and the call can be repeated. */
SAFEVERBS_API sfv_result sfv_lease_revoke(sfv_lease *lease);

/* >>multi-channel ---------------------------------------------------------------------------- */
/* The crate's MultiChannel: n channels under one PD, channel i for peer i, each with its own
   queue pair and CQ, so waiting on one peer never takes another peer's completions. Every
   channel call works on sfv_multi_channel_peer(mc, i); the calls below add work for many peers
   at once. Thread safety: as a channel (one thread at a time), for all of its channels. */
typedef struct sfv_multi_channel sfv_multi_channel;
/* n channels made with the same desc (NULL or zero-filled: defaults); n is 1 .. 4096, else
   SFV_ERR_INVALID (the largest node's world). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_create_multi_channel(sfv_pd *pd, size_t n, const sfv_channel_desc *desc, sfv_multi_channel **out);
/* Destroys every channel as sfv_destroy_channel does (work in flight is flushed first), the last
   first. If one refuses, the multi-channel stays valid with that channel and those before it
   (its length says how many: those after it are gone) and the call can be retried. NULL: SFV_OK. */
SAFEVERBS_API sfv_result sfv_destroy_multi_channel(sfv_multi_channel *mc);
SAFEVERBS_API size_t sfv_multi_channel_len(const sfv_multi_channel *mc);
/* Channel `peer`, owned by mc: sfv_destroy_channel refuses it (SFV_ERR_INVALID), mc's destroy
   destroys it. NULL when peer is out of range. */
SAFEVERBS_API sfv_channel *sfv_multi_channel_peer(const sfv_multi_channel *mc, size_t peer);
/* out[i] = channel i's endpoint; n must equal the length (else SFV_ERR_INVALID, out's n entries
   zeroed; none where n * sizeof(sfv_endpoint) passes PTRDIFF_MAX, as no array has that many). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_endpoints(const sfv_multi_channel *mc, sfv_endpoint *out, size_t n);
/* Connects channel i with peers[i]; n must equal the length. Every endpoint is checked before any
   channel connects (SFV_ERR_INVALID, nothing done, can be repeated); a verb that refuses after
   some channel connected: SFV_ERR_BROKEN (destroy the multi-channel). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_handshake(sfv_multi_channel *mc, const sfv_endpoint *peers, size_t n);

/* One work request for one peer. The element types keep the directions apart here too. */
typedef struct sfv_peer_send { size_t peer; const sfv_gather_element *sges; size_t n; bool has_imm; uint32_t imm; } sfv_peer_send;
typedef struct sfv_peer_write { size_t peer; const sfv_gather_element *sges; size_t n; sfv_remote_mr remote; bool has_imm; uint32_t imm; } sfv_peer_write;
typedef struct sfv_peer_receive { size_t peer; const sfv_scatter_element *sges; size_t n; } sfv_peer_receive;
typedef struct sfv_peer_read { size_t peer; const sfv_scatter_element *sges; size_t n; sfv_remote_mr remote; } sfv_peer_read;

/* Blocking, for many peers: posts every request (all of them before waiting for any), then
   waits for all, each within its channel's timeout_ms; when the call returns, no buffer of any
   request is in flight. wcs: `count` completions in request order, or NULL.
   SFV_OK: all succeeded. SFV_ERR_WORK: some completed with an error (each in wcs; the first in
   sfv_last_error); a deadline that expired flushed that channel (its wcs say SFV_ERR_TIMEOUT).
   Every request is checked by every rule its channel's post would apply before any is posted
   (a peer out of range, a NULL request or element array, too many elements, a remote region
   too small or wrapping, a broken or unconnected channel, a queue without room for all of its
   requests): a refusal posts nothing, and every wc carries its result (but for a count no array
   holds, its requests or wcs past PTRDIFF_MAX bytes: SFV_ERR_INVALID, no wc written). Only a
   verb that fails after that (ibv_post_*) stops the call part-way; it returns that error after the requests
   already posted have completed, and the wcs of the requests not posted carry it. A wait that
   fails (a CQ error) returns that error the same way, after flushing its channel. Work a
   channel could not stop (not flushed, its queue pair's destroy refused) makes it SFV_ERR_DRIVER,
   before any other failure: its buffers are still the NIC's (destroy the multi-channel). No
   allocation: as the channel's own calls. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_scatter_send(sfv_multi_channel *mc, const sfv_peer_send *reqs, size_t count, sfv_work_completion *wcs);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_scatter_write(sfv_multi_channel *mc, const sfv_peer_write *reqs, size_t count, sfv_work_completion *wcs);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_gather_receive(sfv_multi_channel *mc, const sfv_peer_receive *reqs, size_t count, sfv_work_completion *wcs);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_gather_read(sfv_multi_channel *mc, const sfv_peer_read *reqs, size_t count, sfv_work_completion *wcs);
/* The same message to each of peers[0 .. npeers); wcs: npeers entries or NULL. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_multicast_send(sfv_multi_channel *mc, const size_t *peers, size_t npeers, const sfv_gather_element *sges, size_t n, sfv_work_completion *wcs);

/* A scope over every channel of mc: fn posts through sfv_multi_channel_peer(mc, i) (pending
   handles may be NULL); when the scope returns, all of it has completed. Results and report as
   sfv_channel_scope and sfv_channel_manual_scope, summed over the channels. The many-peer calls
   work inside it; a second scope of the same mc inside it is refused (SFV_ERR_INVALID). */
typedef sfv_result (*sfv_multi_scope_fn)(sfv_multi_channel *mc, void *user);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_scope(sfv_multi_channel *mc, sfv_multi_scope_fn fn, void *user, sfv_scope_report *report);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_multi_channel_manual_scope(sfv_multi_channel *mc, sfv_multi_scope_fn fn, void *user);

/* >>exchange --------------------------------------------------------------------------------- */
/* The crate's NetworkConfig and Exchanger: how the ranks of a job find each other. */
typedef struct sfv_net_node {
    const char *host;     /* name or address this rank listens on */
    uint16_t port;
    uint32_t rank;
    const char *device;   /* the RDMA device this rank uses, for the program's own use; may be NULL */
} sfv_net_node;
/* SFV_ERR_INVALID, naming the rank, unless: 1 <= n <= 4096, nodes[i].rank == i (the first is 0,
   no gap, no duplicate), every host is a non-empty string and every port non-zero. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_net_config_check(const sfv_net_node *nodes, size_t n);
/* Every rank gives `size` bytes and receives everyone's: all[r * size ..] holds rank r's, its
   own included. Over TCP: a rank listens on its own host and port and accepts every lower rank,
   and connects to every higher rank (retrying while it does not listen yet). size is at most
   64 MiB; 0 (mine and all may be NULL) makes a barrier over TCP. Blocking; no state and no file
   descriptor survives the call, and the next exchange may use the same ports at once.

   WHO MAY TAKE PART. The ports are open to anyone who can reach them, so every connection
   proves, both ways, that it holds the job key, a secret shared by the ranks of one job:
     1. both sides send a HELLO frame: rank, world size, message size, a fresh random nonce;
     2. the listening side sends HMAC-SHA256(key, "L" + both hellos); the connecting side checks
        it (so it knows the listener is genuine), then sends HMAC-SHA256(key, "C" + both hellos);
     3. then each side's bytes go, each followed by an HMAC-SHA256 tag over them and both hellos.
   The key never crosses the wire; the nonces make every proof good for one connection and one
   direction only. MACs are compared in constant time. Nothing is encrypted: the bytes are
   authenticated, not secret.
   A connection that does not prove the key (nonsense, a wrong proof, a rank not due or already
   heard, silence) uses no rank's place and fails nothing: the listener drops it. An accepted
   connection has proof_timeout_ms (1 s) to prove itself, and at most 16 unproven connections
   are kept (more are closed at once; a real rank that was closed tries again), so a slow or
   flooding stranger delays the exchange by at most that, unless it keeps flooding to the
   deadline. Such a flood can make the exchange time out, never take a wrong rank's bytes.

   THE KEY: sfv_exchange_desc.key, else the environment variable SAFEVERBS_JOB_KEY (the launcher
   sets it, e.g. to 32 random bytes in hex, the same for every rank of the job; a guessable key
   can be found offline from one proof a listener sends, so make it random). WITHOUT A KEY
   the exchange only runs where nobody else can reach it: every address it listens on or
   connects to must be a loopback address (127.0.0.0/8, ::1), else SFV_ERR_PERMISSION before any
   socket is opened. It then proves an empty key, which keeps out only accidents (a port scanner,
   another job on a reused port), not another user of the same machine. Why refuse rather than
   run keyless over a network: the bytes become QP numbers, GIDs and rkeys, so a stranger's bytes
   let it write into this job's memory; a job that wants that anyway (a closed fabric) sets
   insecure_without_key.

   ERRORS. The whole exchange ends within timeout_ms (< 0: 60 s): SFV_ERR_TIMEOUT naming the rank
   that did not come (and the last stranger dropped while waiting for it, as "a connection from
   ADDR:PORT that did not prove the job key"). A listener that does not prove the key to a
   connecting rank (a wrong key on either side, or something else on that port):
   SFV_ERR_PERMISSION at once on the connecting side (one that takes the connection and says
   nothing, or hangs up before its proof, as a real rank does with a connection it does not take
   yet, so it is tried again: SFV_ERR_TIMEOUT at the deadline, naming its address); the listening side cannot tell that rank
   from a stranger, so it waits for the real one and times out. A rank that proved the key but
   has another world size or message size, or a listener that proves another rank:
   SFV_ERR_INVALID. Bytes that fail their tag: SFV_ERR_PERMISSION. A host that does not resolve:
   SFV_ERR_NOT_FOUND. A numeric address is parsed at once; a name is looked up on a short-lived
   thread of its own, so a resolver that does not answer costs the deadline, not its own
   timeouts: SFV_ERR_TIMEOUT ("looking up NAME took past the deadline"; the thread, left behind,
   frees what it finds when it ends). A socket call that fails (bind, accept, a proven peer that hangs up): the
   class of its errno, mostly SFV_ERR_DRIVER, with the errno in sfv_last_error. On failure `all`
   is zeroed (n * size bytes), so no rank's bytes are half taken; except when the call refuses the
   shape itself (all NULL, n above 4096, size above 64 MiB, n * size past SIZE_MAX: SFV_ERR_INVALID
   before anything is done): `all` is then left untouched, since n * size may not be the size of
   the caller's buffer (a garbage n would turn a clean refusal into a wild memset). sfv_exchange_all is sfv_exchange_all_keyed with desc NULL.
   Thread safety: no shared state, but it reads SAFEVERBS_JOB_KEY (getenv): no setenv meanwhile. */
typedef struct sfv_exchange_desc {  /* zero-filled: the defaults */
    const void *key;                /* the job key, key_len bytes; key_len 0: $SAFEVERBS_JOB_KEY, else none
                                       (NULL with key_len > 0: SFV_ERR_INVALID, before any socket) */
    size_t key_len;
    uint32_t proof_timeout_ms;      /* how long an accepted connection has to prove the key; 0: 1000 */
    bool insecure_without_key;      /* no key at all: run on any address anyway (see above) */
} sfv_exchange_desc;
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_exchange_all(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all, int timeout_ms);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_exchange_all_keyed(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all,
                                                const sfv_exchange_desc *desc, int timeout_ms);

/* >>node ------------------------------------------------------------------------------------- */
/* The crate's Node: one rank of a job of world_size ranks. It holds a multi-channel with a
   channel per rank (its own rank's channel is connected to itself) and a barrier. Thread
   safety: as a channel. */
typedef enum sfv_barrier_kind {
    SFV_BARRIER_DEFAULT = 0,     /* = SFV_BARRIER_BINARY_TREE */
    SFV_BARRIER_CENTRALIZED,     /* the lowest rank collects everyone, then releases them */
    SFV_BARRIER_BINARY_TREE,     /* wait for the children, tell the parent, wait for it, release the children */
    SFV_BARRIER_DISSEMINATION    /* log2(n) rounds: tell rank + 2^k, wait for rank - 2^k */
} sfv_barrier_kind;
typedef struct sfv_node_desc {
    size_t rank;
    size_t world_size;           /* 1 .. 4096; 0: rank and world size from the launcher (sfv_launcher_rank; none: SFV_ERR_INVALID) */
    sfv_barrier_kind barrier;    /* the same on every rank (DEFAULT is BINARY_TREE): ranks of different kinds wait for
                                    different ranks, so a barrier could return before every rank entered it. The node
                                    endpoint carries it and the handshake refuses another (SFV_ERR_INVALID);
                                    sfv_node_connect_cm does not carry it (there, a disagreement goes unseen) */
    sfv_channel_desc channel;    /* for every channel; zero-filled: defaults */
} sfv_node_desc;
typedef struct sfv_node sfv_node;
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_create_node(sfv_pd *pd, const sfv_node_desc *desc, sfv_node **out);
/* As sfv_destroy_multi_channel, then frees the barrier's memory. NULL: SFV_OK. Refused
   (SFV_ERR_INVALID) from the allgather of sfv_node_connect_with on this node. */
SAFEVERBS_API sfv_result sfv_destroy_node(sfv_node *node);
SAFEVERBS_API size_t sfv_node_rank(const sfv_node *node);
SAFEVERBS_API size_t sfv_node_world_size(const sfv_node *node);
/* Every multi-channel call works on the node's: the peer index is the rank. Owned by the node:
   sfv_destroy_multi_channel refuses it (SFV_ERR_INVALID), sfv_destroy_node destroys it. */
SAFEVERBS_API sfv_multi_channel *sfv_node_multi_channel(const sfv_node *node);

/* What every other rank needs from this one: an endpoint per rank and the barrier's region.
   Give it to sfv_exchange_all as `mine` and hand what comes back to sfv_node_handshake. */
#define SFV_NODE_ENDPOINT_SIZE(world_size) \
    (16 + (size_t)(world_size) * (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE))
/* size must be SFV_NODE_ENDPOINT_SIZE(world size), else SFV_ERR_INVALID, out's size bytes zeroed
   (none where size passes PTRDIFF_MAX, as no buffer is that large). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_endpoint(const sfv_node *node, uint8_t *out, size_t size);
/* all: world_size blobs of SFV_NODE_ENDPOINT_SIZE bytes in rank order. Takes from each the part
   meant for this rank and connects that rank's channel. Every entry is checked before any channel
   connects: SFV_ERR_INVALID (nothing connected, the call can be repeated) for a wrong size, a blob
   that is not an endpoint (a reserved byte not 0 included), says another rank than its place,
   another world size or another barrier kind (sfv_node_desc.barrier), or a GID of another kind
   than this side's. A verb that still refuses after
   another channel connected returns SFV_ERR_BROKEN: the node is part connected and can only be
   destroyed (every later handshake, connect or barrier says SFV_ERR_BROKEN).
   Before the first barrier or any work, every rank must be past its handshake: a rank's NIC
   drops what comes to a channel not connected yet, and after the retries the work fails (by
   default about half a second: on rxe a send to a peer 1 s or 4 s late failed with
   RETRY_EXC_ERR after 0.47-0.49 s; 0.1 s late was delivered). Sync the ranks (sfv_exchange_all of 0 bytes), or connect with
   sfv_node_connect, which does it all. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_handshake(sfv_node *node, const uint8_t *all, size_t size);
/* Connects the node to the job in one call: its endpoint to every rank and theirs back
   (sfv_exchange_all over nodes, world_size of them), the handshake, then a sync, so that when
   it returns every rank's channels are connected. The sync goes over the exchange's own
   connections, kept open for it (world_size - 1 sockets a rank while it runs, within the
   process's limit of open files, RLIMIT_NOFILE, beside its other descriptors: else the exchange
   fails with the accept's or socket's EMFILE; one authenticated frame each way); above 256 ranks
   it is an exchange of its own, as sfv_exchange_all of 0 bytes. So every rank of a job connects
   with sfv_node_connect (or every rank by hand, as sfv_node_handshake says), not some each way:
   up to 256 ranks the exchange refuses a rank that connects the other way (SFV_ERR_INVALID, on
   both sides). One deadline for all of it
   (timeout_ms < 0: 60 s; no cap). It allocates world_size * SFV_NODE_ENDPOINT_SIZE(world_size)
   bytes for the exchange while it runs (0.9 MB at 128 ranks, about 940 MB at 4096). Errors:
   those of the exchange and the handshake; a failed sync after the handshake (a rank gone, a
   frame that fails its tag: SFV_ERR_PERMISSION) leaves the ranks unsynced, so it also breaks
   the node (every later connect, handshake and barrier on it: SFV_ERR_BROKEN; destroy it);
   a node already connected is refused
   at once (SFV_ERR_INVALID), a broken one with SFV_ERR_BROKEN, before any exchange. The
   exchange and the sync prove the job key as sfv_exchange_all_keyed says: sfv_node_connect takes it from
   SAFEVERBS_JOB_KEY (without one, loopback addresses only), sfv_node_connect_keyed from desc
   (NULL: as sfv_node_connect). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_connect(sfv_node *node, const sfv_net_node *nodes, int timeout_ms);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_connect_keyed(sfv_node *node, const sfv_net_node *nodes, const sfv_exchange_desc *desc, int timeout_ms);
/* Pluggable bootstrap. An allgather: every rank calls it with its own `size` bytes at `mine`,
   and it returns with rank r's bytes at all + r * size for every rank of the job, in rank order
   (size 0: a barrier, all may be NULL); SFV_OK, or a failure (SFV_ERR_TIMEOUT when it could not
   finish in time, ...). MPI_Allgather is one (examples/mpi_allgather.c), the TCP exchange another
   (sfv_exchange_allgather). */
typedef sfv_result (*sfv_allgather_fn)(void *user, const void *mine, void *all, size_t size);
/* sfv_node_connect over any allgather: the endpoints through it, the handshake, then an
   allgather of 0 bytes, so that when it returns every rank's channels are connected. A failure
   of fn that set no sfv_last_error (or another result than it returned) is recorded as the
   result fn returned (one that is no sfv_result failure: SFV_ERR_DRIVER); a failure of the
   allgather after the handshake breaks the node, as in sfv_node_connect. fn must be collective
   over exactly the node's world, in rank order, and write exactly world_size blobs into `all`: a
   blob that says another rank or world size is refused by the handshake (SFV_ERR_INVALID).
   sfv_exchange_allgather's context (user) that names another world size or rank than the
   node's is refused before anything runs (SFV_ERR_INVALID). It allocates as sfv_node_connect does.
   fn may not destroy the node nor connect it: sfv_destroy_node refuses it meanwhile
   (SFV_ERR_INVALID), and so do sfv_node_connect_with, sfv_node_connect(_keyed),
   sfv_node_connect_cm and sfv_node_handshake on it. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_connect_with(sfv_node *node, sfv_allgather_fn fn, void *user);
/* The TCP exchange as an sfv_allgather_fn: user points to an sfv_exchange_allgather_ctx, and
   each call is sfv_exchange_all_keyed(nodes, n, rank, mine, size, all, desc, timeout_ms). */
typedef struct sfv_exchange_allgather_ctx {
    const sfv_net_node *nodes;
    size_t n, rank;
    const sfv_exchange_desc *desc;   /* NULL: the key from SAFEVERBS_JOB_KEY, as sfv_exchange_all */
    int timeout_ms;                  /* for each call */
} sfv_exchange_allgather_ctx;
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_exchange_allgather(void *user, const void *mine, void *all, size_t size);
/* This process's rank and the job's size from its launcher's environment: Open MPI's mpirun
   (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), PMI launchers such as MPICH's hydra and Slurm
   with --mpi=pmi2 (PMI_RANK, PMI_SIZE), Slurm's srun (SLURM_PROCID, SLURM_NTASKS), looked for in
   that order. SFV_ERR_NOT_FOUND when none is set; SFV_ERR_INVALID when a pair is partial, not a
   number, or the rank is not below the size. Outputs 0 on failure. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_launcher_rank(size_t *rank, size_t *world_size);
/* Returns once every rank in peers[0 .. n) has entered the same barrier (peers NULL: every rank,
   whatever n).
   peers must be sorted, without duplicates, in range and include this rank (else
   SFV_ERR_INVALID, the barrier stays usable): a sub-group barrier. Every member must call it
   with the same peers. Each other member's channel (this rank's own is never written to)
   needs room for one write (else SFV_ERR_RESOURCE), must not be broken (else SFV_ERR_BROKEN,
   naming why) and must be connected (one reset since the handshake: SFV_ERR_INVALID), all checked before anything is sent. SFV_ERR_TIMEOUT when
   the other ranks do not all come within timeout_ms (< 0: the channels' timeout_ms); each of
   this rank's writes is bounded by its channel's timeout_ms. A channel that breaks while the
   barrier waits for its rank (its peer's disconnect through the CM, or a device event: the port
   down, the queue pair or the device failed, read every 10 ms of waiting) ends the wait with
   SFV_ERR_BROKEN then, not at the deadline. A timeout or a failed write or break leaves the barrier half done on some ranks,
   so it poisons it: every later barrier, connect and handshake returns SFV_ERR_BROKEN (its
   multi-channel's calls and sfv_node_endpoint still run). Each rank's NIC writes its barrier
   count into this rank's memory; a rank can be one barrier ahead, never two (it cannot leave the
   next one before this rank enters it), so a count two or more ahead (a peer that is not a rank
   of this node, say) is SFV_ERR_BROKEN, and poisons it too. A count one ahead, or members that
   pass different groups, cannot be told from a faster rank: every member must pass the same
   peers. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_barrier(sfv_node *node, const size_t *peers, size_t n, int timeout_ms);
/* The same without checking that peers are sorted and unique (the caller vouches that every
   member passes the same list); ranks are still checked against the world, as they index memory. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_barrier_unchecked(sfv_node *node, const size_t *peers, size_t n, int timeout_ms);

#ifdef SAFEVERBS_RDMACM
/* >>rdmacm ----------------------------------------------------------------------------------- */
/* Connect by IP address through the RDMA connection manager (librdmacm). Only with
   SAFEVERBS_RDMACM defined (in every file, before including), and then link -lrdmacm too.
   A listener is bound to an address (IPv4 "192.0.2.1", IPv6 "fe80::1%eth0" with its scope) and
   port, on whichever RDMA device owns that address; sfv_cm_get_request takes the next
   connection request, sfv_cm_accept or sfv_cm_reject answers it. sfv_cm_connect connects to an
   address and port. Either gives an sfv_cm_conn that owns an ordinary channel (sfv_cm_channel:
   the whole channel API works on it; never destroy it yourself) made on the caller's PD, which
   must be on the device that owns the address (else SFV_ERR_INVALID saying which devices).
   The CM negotiates the path, PSNs and read depths; this side's read depth also travels in the
   private data (a 4-byte header, 'S', 'C', 1 and the depth, which a peer without it, such as
   rdma-core's rping, may omit: such a peer's bytes that happen to begin 'S', 'C', 1 are read as
   the header, their fourth byte as its read depth, and not handed on), after which come up to SFV_CM_CONNECT_PRIVATE_MAX / SFV_CM_ACCEPT_PRIVATE_MAX bytes of the
   caller's own (more: SFV_ERR_INVALID). A reject carries up to SFV_CM_REJECT_PRIVATE_MAX bytes.
   Every step has a deadline (timeout_ms; 0 or < 0: the desc's timeout_ms, 10 s without a desc;
   sfv_cm_get_request and sfv_cm_close say their own); nothing blocks past it.
   Errors, each with a last-error message that says it:
     SFV_ERR_NOT_FOUND    no RDMA device has this address (listen), or the address is not valid
     SFV_ERR_UNREACHABLE  no route to the address, or no answer from the peer's CM (sfv_cm_accept:
                          also a connecting peer that gave up, before our answer or on it)
     SFV_ERR_REFUSED      nothing listens on that address and port
     SFV_ERR_REJECTED     the listener rejected us: sfv_cm_reject_reason() gives its bytes
     SFV_ERR_TIMEOUT      a step did not finish before its deadline
     SFV_ERR_ADDR_IN_USE  another listener has this address and port
   Events: a peer's disconnect ends the channel's waits at once: a wait that has to wait also
   watches the connection's CM fd (in event mode it polls it beside the completion fd; a busy
   wait reads it as often as the device's events: after each 10 ms of spinning), so its work is
   flushed and the wait returns SFV_ERR_WORK, class SFV_WORK_ERROR_TRANSPORT, the hint "the peer
   disconnected", not at its deadline; later posts say SFV_ERR_BROKEN (receives of a channel on
   an SRQ wait on the SRQ, which no connection watches). The CM's DEVICE_REMOVAL (its device
   going away) ends them the same way, in class SFV_WORK_ERROR_FATAL with the hint "the device
   was removed". sfv_cm_fd (a connection)
   and sfv_cm_listener_fd are non-blocking fds for poll/epoll; when one is readable call
   sfv_cm_events (a connection: SFV_ERR_BROKEN once the peer disconnected or the device went) or sfv_cm_get_request
   with timeout_ms -1 (a listener: just looks). A connection's events are read by the thread
   that uses its channel (the channel's rule: one thread at a time). */
typedef struct sfv_cm_listener sfv_cm_listener;
typedef struct sfv_cm_request sfv_cm_request;
typedef struct sfv_cm_conn sfv_cm_conn;
#define SFV_CM_CONNECT_PRIVATE_MAX 52   /* 56 bytes of an RC REQ, less the 4-byte header */
#define SFV_CM_ACCEPT_PRIVATE_MAX 192   /* 196 of an RC REP, less the header */
#define SFV_CM_REJECT_PRIVATE_MAX 148   /* a REJ's, all the caller's */

/* Opens the RDMA device that owns the local address addr (numeric), for the PD of a listener's
   or a connection's channels. None: SFV_ERR_NOT_FOUND. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_open_device(const char *addr, sfv_context **out);
/* A listener on addr (a numeric IPv4 or IPv6 address, NULL: every address) and port (0: one the
   kernel chooses, see sfv_cm_listener_port). backlog <= 0: 16. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_listen(const char *addr, uint16_t port, int backlog, sfv_cm_listener **out);
SAFEVERBS_API uint16_t sfv_cm_listener_port(const sfv_cm_listener *l);
SAFEVERBS_API int sfv_cm_listener_fd(const sfv_cm_listener *l);
/* Rejects every request not yet answered (their connecting sides see SFV_ERR_REJECTED or
   SFV_ERR_REFUSED), then frees. Requests taken and not answered must be answered first (their
   connections live on the listener's until then): while any is, SFV_ERR_INVALID (errno EBUSY),
   the listener kept. */
SAFEVERBS_API sfv_result sfv_cm_destroy_listener(sfv_cm_listener *l);
/* The next connection request, waiting up to timeout_ms (0 or < 0: not at all: SFV_ERR_TIMEOUT
   at once if none is there; a listener has no desc whose timeout 0 could mean). Once the CM said
   the listener's device was removed (DEVICE_REMOVAL): SFV_ERR_BROKEN (errno ENODEV), at once. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_get_request(sfv_cm_listener *l, int timeout_ms, sfv_cm_request **out);
/* The caller's bytes the connecting side sent (without the header). On RoCE and InfiniBand the
   CM pads a request's private data to its fixed size with zeros, so *len is at least what the
   peer sent (a safeverbs peer's request: SFV_CM_CONNECT_PRIVATE_MAX): frame a length of your own
   where it matters; *len may be 0 (nothing after the header, or a peer whose CM pads nothing). */
SAFEVERBS_API const uint8_t *sfv_cm_request_private(const sfv_cm_request *req, size_t *len);
/* Opens the RDMA device the request came to, for the PD to answer it with (sfv_cm_accept wants
   the PD on that device): what a listener on every address (addr NULL, or 0.0.0.0 / ::), whose
   requests come to any device, needs. The request stays unanswered. NULL req or out:
   SFV_ERR_INVALID. */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_request_open_device(const sfv_cm_request *req, sfv_context **out);
/* Answers the request (freed, whatever the result, a NULL out included: then rejected): a channel
   on pd made from desc, connected; waits for the connection to be established, up to timeout_ms.
   The channel is on the port the request came to: desc.port 0 (or a NULL desc) takes it, another
   port is SFV_ERR_INVALID naming both (as sfv_cm_connect, on the port its route goes from). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_accept(sfv_cm_request *req, sfv_pd *pd, const sfv_channel_desc *desc, const void *priv, size_t len,
                                       int timeout_ms, sfv_cm_conn **out);
/* Rejects the request, with up to SFV_CM_REJECT_PRIVATE_MAX bytes of reason, and frees it,
   whatever the result: a reason too long (or NULL with len > 0) is SFV_ERR_INVALID, and the
   request is still rejected, without one, and freed (do not use req again). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_reject(sfv_cm_request *req, const void *reason, size_t len);
/* Resolves addr (numeric) and its route, then connects to the listener at port. src: the local
   address to connect from (numeric; NULL: the one routing picks), whose device the PD must be on;
   the channel is on the port the route goes from (desc.port 0 takes it, another is SFV_ERR_INVALID). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_connect(sfv_pd *pd, const char *src, const char *addr, uint16_t port, const sfv_channel_desc *desc, const void *priv,
                                        size_t len, int timeout_ms, sfv_cm_conn **out);
/* The same on a channel of the caller's (a multi-channel's peer, say): it must be fresh (made or
   reset, not connected since, no connection on it: else SFV_ERR_INVALID, and accept rejects the
   request; sfv_channel_reset ends a connection's hold on a channel of yours, not on one
   sfv_cm_connect or sfv_cm_accept made, which goes with its connection), on the device and port
   that own the address (else SFV_ERR_INVALID naming them). The connection does not own it: the
   channel and the connection may be destroyed in either order (sfv_cm_close breaks the channel
   it still has, flushing its work; sfv_destroy_channel first leaves the connection nothing to
   watch). A failure after the channel was brought up leaves it broken (destroy it). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_accept_channel(sfv_cm_request *req, sfv_channel *ch, const void *priv, size_t len, int timeout_ms,
                                                             sfv_cm_conn **out);
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_connect_channel(sfv_channel *ch, const char *src, const char *addr, uint16_t port, const void *priv,
                                                              size_t len, int timeout_ms, sfv_cm_conn **out);
/* A node (>>node) connected through the CM instead of the endpoint exchange: rank r listens on
   nodes[r].host (a numeric address of the device its PD is on; nodes[r].port is its CM port),
   connects to every lower rank in turn (retrying while one does not listen yet) and accepts
   every higher rank, each on the node's channel for that rank; its own is connected to itself.
   The barrier regions travel in the CM's private data. Every request and answer proves the job
   key (desc->key, else SAFEVERBS_JOB_KEY; none: SFV_ERR_PERMISSION before anything is done,
   unless desc->insecure_without_key): a 16-byte HMAC-SHA256 over the sender's and receiver's
   ranks, the world size, the barrier region and the sender's QP number (an answer's also over
   its request), and the source address a request names (as the CM reports it: a check against
   mistakes, not against someone who forges CM packets) must be its rank's. A request that
   fails any of it (nonsense, no or a wrong proof, a rank not due or already connected, another
   world size, another address) is rejected with the reason and takes no rank's place. The MAC
   has no nonce of the run: give every job a fresh random key (a request recorded in a job is
   good in another job with the same key); within a job, a request replayed before the real
   one arrives carries the real rank's QP number, so it can make the real rank's connection
   fail (at its deadline), never put other bytes in its place. A rank whose request is
   rejected without a reason (a full backlog) or refused (not listening yet) tries again until
   the deadline. When it returns every channel is connected (no sync is needed: a channel is up
   on both sides once its connection is). One deadline for all (timeout_ms < 0: 60 s).
   Errors: a node already connected (SFV_ERR_INVALID) or broken (SFV_ERR_BROKEN), at once; nodes
   that fail sfv_net_config_check or are not numeric; a listener's (SFV_ERR_ADDR_IN_USE, ...);
   SFV_ERR_TIMEOUT naming the rank that did not listen or connect in time; SFV_ERR_PERMISSION
   for an answer that does not prove the key. Before any channel was brought up the node is as
   it was (the call can be repeated); after, the result is still what failed, the last error
   says the node is broken, and every later connect, handshake and barrier on it says
   SFV_ERR_BROKEN: destroy it. The
   connections live with the node; a peer's disconnect ends waits on its channel at once, as
   above, and so a barrier's wait for that rank too (SFV_ERR_BROKEN; one that has not begun yet
   refuses that channel, as a broken one). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_node_connect_cm(sfv_node *node, const sfv_net_node *nodes, const sfv_exchange_desc *desc, int timeout_ms);
/* After SFV_ERR_REJECTED: the reason bytes the listener gave (this thread's last reject). */
SAFEVERBS_API const uint8_t *sfv_cm_reject_reason(size_t *len);
SAFEVERBS_API sfv_channel *sfv_cm_channel(const sfv_cm_conn *c);
/* The peer's own bytes (accepting side's answer, or the request's), padded by the CM as
   sfv_cm_request_private says (an answer to its fixed size: SFV_CM_ACCEPT_PRIVATE_MAX after a
   safeverbs header); *len may be 0. */
SAFEVERBS_API const uint8_t *sfv_cm_peer_private(const sfv_cm_conn *c, size_t *len);
SAFEVERBS_API int sfv_cm_fd(const sfv_cm_conn *c);
/* Handles what arrived on the connection's CM fd without waiting: SFV_OK (still connected),
   SFV_ERR_BROKEN (the peer disconnected, or the device was removed: the channel is broken, its
   work flushed; the last error says which), or the
   failure of rdma_get_cm_event (the fd may stay readable: the connection is not to be trusted). */
SFV_NODISCARD SAFEVERBS_API sfv_result sfv_cm_events(sfv_cm_conn *c);
/* Disconnects (the channel's work flushed first) and frees everything. timeout_ms > 0: first
   waits up to that long for the peer to confirm (it does when it handles its own events or
   closes); <= 0: does not wait (the kernel's CM finishes the exchange). NULL: SFV_OK. When a
   verb refuses to destroy the channel the connection made (sfv_destroy_channel), that failure
   is returned and the connection kept, disconnected: close it again. */
SAFEVERBS_API sfv_result sfv_cm_close(sfv_cm_conn *c, int timeout_ms);
#endif /* SAFEVERBS_RDMACM */

#ifdef __cplusplus
}
#endif
#endif /* SAFEVERBS_H_INCLUDED */

/* ============================================================================================
   IMPLEMENTATION
   ============================================================================================ */
#if defined(SAFEVERBS_IMPLEMENTATION) && !defined(SAFEVERBS_IMPL_INCLUDED)
#define SAFEVERBS_IMPL_INCLUDED

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* (O_CLOEXEC: POSIX.1-2008, which the implementation needs; a _POSIX_C_SOURCE of 200112L or older
   has clock_gettime but not it, nor all of getaddrinfo's) */
#if !defined(CLOCK_MONOTONIC) || !defined(O_CLOEXEC)
#error "safeverbs: the implementation needs POSIX.1-2008 (clock_gettime, O_CLOEXEC). In its file, put #define SAFEVERBS_IMPLEMENTATION and #include \"safeverbs.h\" before any system header, or define _GNU_SOURCE (or _POSIX_C_SOURCE 200809L) before the first one."
#endif

#ifndef SFV_DEBUG
#ifdef NDEBUG
#define SFV_DEBUG 0
#else
#define SFV_DEBUG 1
#endif
#endif

/* (the library's own "this cannot be" is SFV_ASSERT(0 && "why"): clang's -Wconversion warns of
   !"why", a string made a bool) */
#ifndef SFV_ASSERT
#define SFV_ASSERT(c)                                                                         \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "safeverbs: contract broken: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)
#endif

#if defined(SFV_MALLOC) != defined(SFV_FREE) || defined(SFV_MALLOC) != defined(SFV_CALLOC)
#error "safeverbs.h: define all of SFV_MALLOC, SFV_CALLOC and SFV_FREE, or none"
#endif
#ifndef SFV_MALLOC
#define SFV_MALLOC(sz) malloc(sz)
#define SFV_CALLOC(n, sz) calloc(n, sz)
#define SFV_FREE(p) free(p)
#endif

#ifndef SFV_DEBUG_ASSERT
#if SFV_DEBUG
#define SFV_DEBUG_ASSERT(c) SFV_ASSERT(c)
#else
#define SFV_DEBUG_ASSERT(c) ((void)0)
#endif
#endif

#if defined(__cplusplus)
#define SFV__THREAD_LOCAL thread_local
#define SFV__STATIC_ASSERT(c, m) static_assert(c, #m)
#else
#define SFV__THREAD_LOCAL __thread
#define SFV__STATIC_ASSERT(c, m) typedef char sfv__static_assert_##m[(c) ? 1 : -1]
#endif

#if defined(__GNUC__)
#define SFV__LIKELY(x) __builtin_expect(!!(x), 1)
#define SFV__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SFV__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define SFV__HOT_INLINE static inline __attribute__((always_inline))
#define SFV__SLOW static __attribute__((noinline))
#define SFV__NONNULL(p) (p ? (void)0 : __builtin_unreachable()) /* (what the caller's test proved, for the compiler) */
#if defined(SFV__API_STATIC)
/* Under SAFEVERBS_STATIC (where the header chose SAFEVERBS_API itself), the data path's public
   functions are always inlined into the caller: the single and batch posts, the unsignaled
   posts, the injects, the SRQ's receive posts, sfv_pending_poll, _wait and _wait_all (not the
   request lists or the atomics). Their slow paths stay out of line. Measured in
   bench/RESULTS.md (make bench, stage 5). */
#define SFV__API_HOT static inline __attribute__((always_inline, unused))
#endif
#else
#define SFV__SLOW static
#define SFV__HOT_INLINE static inline
#define SFV__LIKELY(x) (x)
#define SFV__UNLIKELY(x) (x)
#define SFV__PRINTF(a, b)
#define SFV__NONNULL(p) ((void)0)
#endif
/* A function whose unsigned arithmetic wraps on purpose (a hash, a generator): no size or offset
   sum anywhere else may wrap, even where it is then tested, which clang's
   -fsanitize=unsigned-integer-overflow enforces (the fuzzers' build, and check-nodev's). */
#if defined(__clang__)
#define SFV__WRAPS __attribute__((no_sanitize("unsigned-integer-overflow")))
#else
#define SFV__WRAPS
#endif
#ifndef SFV__API_HOT
#define SFV__API_HOT SAFEVERBS_API /* the data path's public functions (see above) */
#endif

/* The layouts this library relies on. */
SFV__STATIC_ASSERT(sizeof(sfv_gather_element) == sizeof(struct ibv_sge), gather_is_sge);
SFV__STATIC_ASSERT(sizeof(sfv_scatter_element) == sizeof(struct ibv_sge), scatter_is_sge);
SFV__STATIC_ASSERT(offsetof(sfv_gather_element, length) == offsetof(struct ibv_sge, length), gather_len);
SFV__STATIC_ASSERT(offsetof(sfv_gather_element, lkey) == offsetof(struct ibv_sge, lkey), gather_lkey);
SFV__STATIC_ASSERT(offsetof(sfv_scatter_element, length) == offsetof(struct ibv_sge, length), scatter_len);
SFV__STATIC_ASSERT(offsetof(sfv_scatter_element, lkey) == offsetof(struct ibv_sge, lkey), scatter_lkey);
SFV__STATIC_ASSERT((int)SFV_ACCESS_LOCAL_WRITE == (int)IBV_ACCESS_LOCAL_WRITE, acc_lw);
SFV__STATIC_ASSERT((int)SFV_ACCESS_REMOTE_WRITE == (int)IBV_ACCESS_REMOTE_WRITE, acc_rw);
SFV__STATIC_ASSERT((int)SFV_ACCESS_REMOTE_READ == (int)IBV_ACCESS_REMOTE_READ, acc_rr);
SFV__STATIC_ASSERT((int)SFV_ACCESS_REMOTE_ATOMIC == (int)IBV_ACCESS_REMOTE_ATOMIC, acc_ra);
SFV__STATIC_ASSERT((int)SFV_ACCESS_MW_BIND == (int)IBV_ACCESS_MW_BIND, acc_mw);
SFV__STATIC_ASSERT((int)SFV_ACCESS_ZERO_BASED == (int)IBV_ACCESS_ZERO_BASED, acc_zb);
SFV__STATIC_ASSERT((int)SFV_ACCESS_ON_DEMAND == (int)IBV_ACCESS_ON_DEMAND, acc_od);
SFV__STATIC_ASSERT((int)SFV_ACCESS_HUGETLB == (int)IBV_ACCESS_HUGETLB, acc_ht);
SFV__STATIC_ASSERT((int)SFV_ACCESS_RELAXED_ORDERING == (int)IBV_ACCESS_RELAXED_ORDERING, acc_ro);
SFV__STATIC_ASSERT((int)SFV_WC_TM_RNDV_INCOMPLETE == (int)IBV_WC_TM_RNDV_INCOMPLETE, wc_status);
SFV__STATIC_ASSERT((int)SFV_PORT_ACTIVE_DEFER == (int)IBV_PORT_ACTIVE_DEFER, port_state);
SFV__STATIC_ASSERT(sizeof(((sfv_device_attr *)0)->fw_ver) == sizeof(((struct ibv_device_attr *)0)->fw_ver), fw_ver_size);
SFV__STATIC_ASSERT((int)SFV_ATOMIC_HCA == (int)IBV_ATOMIC_HCA && (int)SFV_ATOMIC_GLOBAL == (int)IBV_ATOMIC_GLOB, atomic_cap);

#define SFV__ACCESS_ALL                                                                       \
    (SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ |               \
     SFV_ACCESS_REMOTE_ATOMIC | SFV_ACCESS_MW_BIND | SFV_ACCESS_ZERO_BASED |                   \
     SFV_ACCESS_ON_DEMAND | SFV_ACCESS_HUGETLB | SFV_ACCESS_RELAXED_ORDERING)

/* >>inflight hooks --------------------------------------------------------------------------- */
/* What the posting, completion, destroy and dereg code calls of >>impl inflight: one line each,
   nothing at all when SFV_TRACK_INFLIGHT is 0 (a release build). */
#ifndef SFV_TRACK_INFLIGHT
#define SFV_TRACK_INFLIGHT SFV_DEBUG
#endif
/* Valgrind's client requests where its header is found (no-ops outside valgrind; failure paths
   and SFV_TRACK_INFLIGHT only). */
#if !defined(SFV_NO_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define SFV__VALGRIND 1
#endif
#endif
#ifndef SFV__VALGRIND
#define SFV__VALGRIND 0 /* (defined either way: a user's -Wundef warns of an #if on a name never defined) */
#endif
#if SFV__VALGRIND
/* Bytes of the caller's that a check reads whatever they hold (a handle never posted): defined. */
#define SFV__VALGRIND_DEFINED(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED(p, n))
#else
#define SFV__VALGRIND_DEFINED(p, n) ((void)0)
#endif
#if SFV_TRACK_INFLIGHT
#if defined(__SANITIZE_ADDRESS__)
#define SFV__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SFV__ASAN 1
#endif
#endif
#ifndef SFV__ASAN
#define SFV__ASAN 0 /* (as SFV__VALGRIND) */
#endif
struct sfv__ring;
struct ibv_send_wr;
struct ibv_recv_wr;
static size_t sfv__inflight_bytes(const sfv_channel_desc *d, bool recv);
static void sfv__inflight_ring_init(struct sfv__ring *q, const sfv_channel_desc *d, bool recv, uint64_t slots);
static bool sfv__inflight_post(struct sfv__ring *q, const struct ibv_send_wr *s, const struct ibv_recv_wr *rw);
static void sfv__inflight_posted(struct sfv__ring *q, const struct ibv_send_wr *s, const struct ibv_recv_wr *rw, size_t posted);
static void sfv__inflight_done(struct sfv__ring *q, uint64_t first, uint64_t last);
static void sfv__inflight_forget(struct sfv__ring *q);
static bool sfv__inflight_mr_busy(const sfv_mr *mr);
static sfv_result sfv__inflight_refused(const struct sfv__ring *q, sfv_pending *pending, size_t count);
static sfv_result sfv__inflight_dereg_refused(void);
static bool sfv__inflight_dmabuf(sfv_mr *mr, bool registered);
/* Room per slot, after a ring's slots, for the elements of its work (calloc'd with them). */
#define SFV__INFLIGHT_BYTES(ch, q) sfv__inflight_bytes(&(ch)->desc, (q) == &(ch)->rq)
#define SFV__INFLIGHT_RING_INIT(ch, q, slots) sfv__inflight_ring_init(q, &(ch)->desc, (q) == &(ch)->rq, slots)
/* Before the verb: checks and records the work requests (a list); refuses the post on a race. */
#define SFV__INFLIGHT_POST(q, swr, rwr, pending, count) \
    if (SFV__UNLIKELY(!sfv__inflight_post(q, swr, rwr))) return sfv__inflight_refused(q, pending, count)
/* After the verb, whatever it said: the memory the first `posted` work requests' NIC writes is
   the NIC's from here (poisoned for ASan, no access for valgrind); the rest, which the verb did
   not take, are forgotten, their memory as it was before the post (definedness included). */
#define SFV__INFLIGHT_POSTED(q, swr, rwr, posted) sfv__inflight_posted(q, swr, rwr, posted)
/* A ring's slots first .. last consumed: their memory is the program's again. */
#define SFV__INFLIGHT_DONE(q, first, last) sfv__inflight_done(q, first, last)
/* A channel freed: whatever of its work was never consumed is forgotten. */
#define SFV__INFLIGHT_FORGET(ch) (sfv__inflight_forget(&(ch)->sq), sfv__inflight_forget(&(ch)->rq))
/* sfv_dereg_mr while work in flight uses the MR: SFV_ASSERT (then a retryable refusal). */
#define SFV__INFLIGHT_DEREG(mr) \
    if (SFV__UNLIKELY(sfv__inflight_mr_busy(mr))) return sfv__inflight_dereg_refused()
/* A DMA-BUF MR registered / deregistered: its elements hold iovas, no host addresses. */
#define SFV__INFLIGHT_DMABUF(mr, registered) ((void)sfv__inflight_dmabuf(mr, registered))
/* Before its deregistration: off that list (every post reads the listed MRs' keys, which the verb
   frees); true if it was listed (a DMA-BUF MR: listed again if the verb refuses). */
#define SFV__INFLIGHT_DMABUF_OFF(mr) sfv__inflight_dmabuf(mr, false)
#else
#define SFV__INFLIGHT_BYTES(ch, q) 0
#define SFV__INFLIGHT_RING_INIT(ch, q, slots) ((void)0)
#define SFV__INFLIGHT_POST(q, swr, rwr, pending, count) ((void)0)
#define SFV__INFLIGHT_POSTED(q, swr, rwr, posted) ((void)0)
#define SFV__INFLIGHT_DONE(q, first, last) ((void)0)
#define SFV__INFLIGHT_FORGET(ch) ((void)0)
#define SFV__INFLIGHT_DEREG(mr) ((void)0)
#define SFV__INFLIGHT_DMABUF(mr, registered) ((void)0)
#define SFV__INFLIGHT_DMABUF_OFF(mr) ((void)(mr), false)
#endif

/* >>impl log ------------------------------------------------------------------------------- */
/* The hook and its level. sfv__log_level is the only thing a hot path may test (a failure's
   path, never a success's); SFV__LOG evaluates its arguments only when the level is on. */
static sfv_log_fn sfv__log_fn;
static void *sfv__log_user;
static int sfv__log_level;
static int sfv__log_ready; /* 0: SAFEVERBS_LOG not read yet; 1: being read; 2: read or overridden */
#define SFV__LOG(level, ...)                                                               \
    do {                                                                                   \
        if (SFV__UNLIKELY(__atomic_load_n(&sfv__log_level, __ATOMIC_RELAXED) >= (level))) \
            sfv__log(level, __VA_ARGS__);                                                  \
    } while (0)

static void sfv__log_stderr(void *user, sfv_log_level level, const char *message) {
    static const char *const names[] = {"off", "error", "info", "debug"};
    (void)user;
    fprintf(stderr, "safeverbs: %s: %s\n", names[level >= 0 && level <= SFV_LOG_DEBUG ? level : 0], message);
}

/* The level SAFEVERBS_LOG names (warn: say so on stderr when it names none). */
static int sfv__log_env_level(bool warn) {
    const char *v = getenv("SAFEVERBS_LOG");
    if (!v || !*v) return SFV_LOG_OFF;
    if (!strcmp(v, "error") || !strcmp(v, "1")) return SFV_LOG_ERROR;
    if (!strcmp(v, "info") || !strcmp(v, "2")) return SFV_LOG_INFO;
    if (!strcmp(v, "debug") || !strcmp(v, "3")) return SFV_LOG_DEBUG;
    if (warn && strcmp(v, "off") && strcmp(v, "0"))
        fprintf(stderr, "safeverbs: SAFEVERBS_LOG=%s is not off, error, info, debug or 0..3: ignored\n", v);
    return SFV_LOG_OFF;
}
/* Reads SAFEVERBS_LOG once (the first caller wins; sfv_set_log first: never). The hook is not
   set here: NULL is stderr's (sfv__log), so no thread ever waits for another's read. */
static void sfv__log_init(void) {
    int expect = 0, off = SFV_LOG_OFF;
    if (SFV__LIKELY(__atomic_load_n(&sfv__log_ready, __ATOMIC_ACQUIRE) == 2)) return;
    if (!__atomic_compare_exchange_n(&sfv__log_ready, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* another thread is reading it: read it too, or this thread's failure, tested against a
           level still off, would go unreported (once per process, at the first failure). Not a
           wait for that thread: a child forked in that moment has its 1 but not the thread. */
        const int level = sfv__log_env_level(false);
        if (expect == 1) (void)__atomic_compare_exchange_n(&sfv__log_level, &off, level, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return;
    }
    __atomic_store_n(&sfv__log_level, sfv__log_env_level(true), __ATOMIC_RELEASE);
    __atomic_store_n(&sfv__log_ready, 2, __ATOMIC_RELEASE);
}

SAFEVERBS_API void sfv_set_log(sfv_log_fn fn, void *user, sfv_log_level level) {
    __atomic_store_n(&sfv__log_ready, 2, __ATOMIC_RELEASE); /* SAFEVERBS_LOG no longer counts */
    __atomic_store_n(&sfv__log_level, SFV_LOG_OFF, __ATOMIC_RELEASE);
    sfv__log_fn = fn ? fn : sfv__log_stderr;
    sfv__log_user = fn ? user : NULL;
    if ((int)level < (int)SFV_LOG_OFF) level = SFV_LOG_OFF; /* (the enum may be unsigned: compared as int) */
    else if (level > SFV_LOG_DEBUG) level = SFV_LOG_DEBUG;
    __atomic_store_n(&sfv__log_level, (int)level, __ATOMIC_RELEASE);
}

static SFV__PRINTF(2, 3) void sfv__log(sfv_log_level level, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    const int saved = errno;
    const sfv_log_fn fn = sfv__log_fn ? sfv__log_fn : sfv__log_stderr; /* (NULL: sfv_set_log never called) */
    if (__atomic_load_n(&sfv__log_level, __ATOMIC_ACQUIRE) < (int)level) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(sfv__log_user, level, msg);
    errno = saved;
}

/* >>impl results ----------------------------------------------------------------------------- */
/* A result deliberately dropped (gcc's warn_unused_result, SFV_NODISCARD, ignores a (void) cast). */
static inline void sfv__ignore(sfv_result r) { (void)r; }
static SFV__THREAD_LOCAL sfv_error sfv__last = {SFV_OK, 0, "", ""};

SAFEVERBS_API const char *sfv_result_str(sfv_result r) {
    switch (r) {
#define SFV__X(name, value, text) case name: return #name ": " text;
        SFV_RESULT_LIST(SFV__X)
#undef SFV__X
    default: return "SFV_?: unknown result";
    }
}

SAFEVERBS_API const sfv_error *sfv_last_error(void) { return &sfv__last; }

SAFEVERBS_API sfv_result sfv_result_from_errno(int errnum) {
    switch (errnum) {
    case 0: return SFV_OK;
    case EINVAL: return SFV_ERR_INVALID;
    case ENOMEM: case EAGAIN: case EMFILE: return SFV_ERR_RESOURCE;
    case EPERM: case EACCES: return SFV_ERR_PERMISSION;
    case ENOENT: case ENODEV: return SFV_ERR_NOT_FOUND;
    case EOPNOTSUPP: return SFV_ERR_UNSUPPORTED;
    default: return SFV_ERR_DRIVER;
    }
}

/* Failures recorded on this thread so far: tells whether a call in between set a new one. One
   taken back (sfv__error_back) is not counted: the last error is not its. */
static SFV__THREAD_LOCAL unsigned long sfv__failures;
/* The last error and the count, for taking back what is recorded after (a cleanup's failure, a
   try that is tried again, a choice with a fallback): as if it had never been recorded, so that
   a scope or an allgather that asks "did fn record a failure?" is not shown an older one. */
typedef struct sfv__error_mark { sfv_error last; unsigned long failures; } sfv__error_mark;
static sfv__error_mark sfv__error_mark_now(void) {
    sfv__error_mark m;
    m.last = sfv__last;
    m.failures = sfv__failures;
    return m;
}
static void sfv__error_back(const sfv__error_mark *m) {
    sfv__last = m->last;
    sfv__failures = m->failures;
}

/* Runs `cleanup` (which may record failures of its own) and keeps the error that made the caller
   clean up as the last one. */
#define SFV__KEEPING_ERROR(cleanup)                              \
    do {                                                         \
        const sfv__error_mark sfv__kept_ = sfv__error_mark_now(); \
        cleanup;                                                 \
        sfv__error_back(&sfv__kept_);                            \
    } while (0)
/* Failures recorded while the last scope's fn ran (a scope in fn: the innermost's). */
static SFV__THREAD_LOCAL unsigned long sfv__fn_failures;
/* The errno of the last scope's fence post that failed (sfv__scope_fence), 0: none failed. */
static SFV__THREAD_LOCAL int sfv__fence_errno;
/* The last scope left work its channel could not stop (not flushed, its QP's destroy refused). */
static SFV__THREAD_LOCAL bool sfv__scope_stuck;
/* ... and that work's channel belongs to a multi-channel (or node), which is what to destroy. */
static SFV__THREAD_LOCAL bool sfv__scope_stuck_owned;
/* What to destroy to end work a channel could not stop (sfv_destroy_channel refuses a multi-channel's). */
static const char *sfv__stuck_destroy(bool owned) { return owned ? "multi-channel (or node) it belongs to" : "channel"; }

/* Records a failure on this thread and returns r: `return sfv__fail(...)`. Never on a fast path.
   The message is formatted aside first: an argument may be the last error's own message. */
static SFV__PRINTF(4, 5) sfv_result sfv__fail(sfv_result r, int errnum, const char *verb, const char *fmt, ...) {
    va_list ap;
    char msg[sizeof sfv__last.message];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sfv__last.result = r;
    sfv__last.errnum = errnum;
    sfv__last.verb = verb;
    memcpy(sfv__last.message, msg, sizeof msg);
    sfv__failures++;
    sfv__log_init();
    SFV__LOG(SFV_LOG_ERROR, "%s: %s (%s)", verb, msg, sfv_result_str(r));
    return r;
}

/* A failed verb: class from errno, message from strerror. */
static sfv_result sfv__fail_verb(const char *verb, int errnum) {
    if (errnum == 0) errnum = EIO; /* a verb that failed without saying why */
    return sfv__fail(sfv_result_from_errno(errnum), errnum, verb, "%s failed: %s", verb, strerror(errnum));
}
/* ibv_poll_cq's negative result is the provider's own code (mlx5 says -2), not an errno. */
static sfv_result sfv__fail_poll(int n) {
    return sfv__fail(SFV_ERR_DRIVER, EIO, "ibv_poll_cq", "ibv_poll_cq failed (the provider returned %d)", n);
}

/* The verb a refused argument is reported under (sfv_error.verb): the public function's name,
   or, where an internal one checks for several public calls, the check's (sfv_error's list). */
static const char *sfv__arg_verb(const char *fn) {
    static const struct { const char *prefix, *verb; } map[] = {
        {"sfv__post", "post"}, {"sfv__scope", "scope"}, {"sfv__mc_scope", "scope"}, {"sfv__mc", "multi-channel"},
        {"sfv__exchange", "exchange"}, {"sfv__barrier", "barrier"}, {"sfv__cm", "rdma_cm"},
        {"sfv__choose_gid", "sfv_choose_gid"}, {"sfv__desc", "sfv_channel_desc"},
    };
    size_t i;
    if (strncmp(fn, "sfv__", 5) != 0) return fn;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strncmp(fn, map[i].prefix, strlen(map[i].prefix)) == 0) return map[i].verb;
    return "safeverbs";
}
#define SFV__CHECK_ARG(cond, name)                                                            \
    do {                                                                                      \
        if (SFV__UNLIKELY(!(cond))) {                                                         \
            const char *verb_ = sfv__arg_verb(__func__);                                      \
            return sfv__fail(SFV_ERR_INVALID, EINVAL, verb_, "%s: invalid %s", verb_, name);  \
        }                                                                                     \
    } while (0)

/* Makes fd non-blocking, and close-on-exec when asked (for systems without SOCK_CLOEXEC or
   accept4). False if fcntl refused (errno says why). */
static bool sfv__fd_flags(int fd, bool cloexec) {
    const int fl = fcntl(fd, F_GETFL);
    if (cloexec && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return false;
    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

/* >>impl locks ------------------------------------------------------------------------------- */
/* The spin locks any thread may take for a shared context (its events' ev_lock, the list of
   contexts) are ticket locks: a waiter takes its turn. With a test-and-set lock, a thread that
   lets go and takes it again at once (a loop of sfv_context_events) kept it from one that was not
   running at that moment (one CPU, or more threads than CPUs): a busy wait of 50 ms, which reads
   the events under the same locks, ended after seconds. */
typedef struct sfv__spin { unsigned next, serving; } sfv__spin;
static void sfv__spin_enter(sfv__spin *l) {
    const unsigned me = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED);
    while (__atomic_load_n(&l->serving, __ATOMIC_ACQUIRE) != me) sched_yield();
}
/* (SFV__WRAPS: the counters go round after 2^32 turns, on purpose; the turn after UINT_MAX is 0) */
SFV__WRAPS static void sfv__spin_leave(sfv__spin *l) {
    __atomic_store_n(&l->serving, __atomic_load_n(&l->serving, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

/* >>impl refcounts --------------------------------------------------------------------------- */
static void sfv__ref(int *rc) { __atomic_fetch_add(rc, 1, __ATOMIC_RELAXED); }
/* True when this was the last reference. */
static bool sfv__unref(int *rc) { return __atomic_sub_fetch(rc, 1, __ATOMIC_ACQ_REL) == 0; }

/* >>impl handles ----------------------------------------------------------------------------- */
/* Every handle the library hands out is in one set, by address and kind, from its allocation to
   its free, in every build: a destroy or release of one that is not (destroyed already, never
   made, another kind's) is a broken contract caught before anything reads it (SFV_ASSERT, then
   SFV_ERR_INVALID), where it would otherwise free memory twice. An open-addressing hash set
   behind a spin lock: O(1) per handle made, destroyed or checked, none of it on the data path.
   A new handle at a freed one's address (same kind) is that handle: nothing can tell them apart. */
enum { SFV__H_LIST = 1, SFV__H_CONTEXT, SFV__H_PD, SFV__H_CQ, SFV__H_MR, SFV__H_CHANNEL, SFV__H_SRQ, SFV__H_LEASE,
       SFV__H_MULTI, SFV__H_NODE, SFV__H_CM_LISTENER, SFV__H_CM_REQUEST, SFV__H_CM_CONN };
typedef struct sfv__hentry { const void *p; unsigned kind; } sfv__hentry;
static sfv__hentry *sfv__hs;
static size_t sfv__hs_n, sfv__hs_cap; /* cap: 0, or a power of 2 at least twice n */
static sfv__spin sfv__hs_lock;
/* (SFV__WRAPS: the multiply is a hash, modulo 2^64 on purpose; the uio tier stopped at the first handle made) */
SFV__WRAPS static size_t sfv__hs_home(const void *p, size_t mask) { return (size_t)(((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) >> 32) & mask; }
/* The place of (p, kind) in t, or the empty place where it would go (t has one: cap >= 2n). */
static size_t sfv__hs_find(const sfv__hentry *t, size_t cap, const void *p, unsigned kind) {
    size_t i = sfv__hs_home(p, cap - 1);
    while (t[i].p && !(t[i].p == p && t[i].kind == kind)) i = (i + 1) & (cap - 1);
    return i;
}
static bool sfv__handle_add(const void *p, unsigned kind) {
    bool ok = true;
    size_t i;
    sfv__spin_enter(&sfv__hs_lock);
    if (2 * (sfv__hs_n + 1) > sfv__hs_cap) {
        const size_t cap = sfv__hs_cap ? 2 * sfv__hs_cap : 64;
        sfv__hentry *const t = cap <= SIZE_MAX / 2 / sizeof *t ? (sfv__hentry *)SFV_CALLOC(cap, sizeof *t) : NULL;
        if (t) {
            for (i = 0; i < sfv__hs_cap; i++)
                if (sfv__hs[i].p) t[sfv__hs_find(t, cap, sfv__hs[i].p, sfv__hs[i].kind)] = sfv__hs[i];
            SFV_FREE(sfv__hs);
            sfv__hs = t;
            sfv__hs_cap = cap;
        }
        ok = t != NULL;
    }
    if (ok) {
        i = sfv__hs_find(sfv__hs, sfv__hs_cap, p, kind);
        if (!sfv__hs[i].p) {
            sfv__hs[i].p = p;
            sfv__hs[i].kind = kind;
            sfv__hs_n++;
        }
    }
    sfv__spin_leave(&sfv__hs_lock);
    return ok;
}
static void sfv__handle_remove(const void *p, unsigned kind) {
    sfv__spin_enter(&sfv__hs_lock);
    if (sfv__hs_cap) {
        const size_t mask = sfv__hs_cap - 1;
        size_t i = sfv__hs_find(sfv__hs, sfv__hs_cap, p, kind), j = i;
        if (sfv__hs[i].p) {
            for (;;) { /* the entries after it that could not sit at their home, moved back (no tombstones) */
                size_t home;
                j = (j + 1) & mask;
                if (!sfv__hs[j].p) break;
                home = sfv__hs_home(sfv__hs[j].p, mask);
                if ((j > i) ? (home <= i || home > j) : (home <= i && home > j)) {
                    sfv__hs[i] = sfv__hs[j];
                    i = j;
                }
            }
            sfv__hs[i].p = NULL;
            if (--sfv__hs_n == 0) { /* nothing left: nothing held, for leak checkers */
                SFV_FREE(sfv__hs);
                sfv__hs = NULL;
                sfv__hs_cap = 0;
            }
        }
    }
    sfv__spin_leave(&sfv__hs_lock);
}
static bool sfv__handle_live(const void *p, unsigned kind) {
    bool live;
    sfv__spin_enter(&sfv__hs_lock);
    live = sfv__hs_cap && sfv__hs[sfv__hs_find(sfv__hs, sfv__hs_cap, p, kind)].p;
    sfv__spin_leave(&sfv__hs_lock);
    return live;
}
/* A handle's memory, zeroed and in the set (NULL: no memory for either). */
static void *sfv__handle_new(size_t size, unsigned kind) {
    void *p = SFV_CALLOC(1, size);
    if (p && !sfv__handle_add(p, kind)) {
        SFV_FREE(p);
        p = NULL;
    }
    return p;
}
/* Out of the set, then freed. */
static void sfv__handle_free(void *p, unsigned kind) {
    if (!p) return;
    sfv__handle_remove(p, kind);
    SFV_FREE(p);
}
static const char *const sfv__handle_names[] = {"", "device list", "context", "PD", "CQ", "MR", "channel", "SRQ", "lease",
                                                "multi-channel", "node", "CM listener", "CM request", "CM connection"};
/* A destroy of a handle that is not live, or a child made from one: a broken contract, refused
   before anything reads it. `done`: what the call did all the same, for its message (an accept
   answers its request whatever the result: "nothing done" would have it tried again). */
SFV__SLOW sfv_result sfv__handle_dead_doing(const char *fn, unsigned kind, const char *done) {
    SFV_ASSERT(0 && "a handle used after it was destroyed (released), or one never made: the call would read (and free) freed memory");
    return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: not a live %s (destroyed or released already, or never made): %s",
                     fn, sfv__handle_names[kind], done);
}
SFV__SLOW sfv_result sfv__handle_dead(const char *fn, unsigned kind) { return sfv__handle_dead_doing(fn, kind, "nothing done"); }
#define SFV__LIVE_OR_REFUSE(p, kind, fn) \
    if (SFV__UNLIKELY(!sfv__handle_live((p), (kind)))) return sfv__handle_dead((fn), (kind))
/* The same for a parent handle a call is given (not NULL: SFV__CHECK_ARG said so), named as it names it. */
#define SFV__CHECK_LIVE(p, kind) SFV__LIVE_OR_REFUSE(p, kind, sfv__arg_verb(__func__))
/* The handle a call acts on: given (not NULL, SFV_ERR_INVALID "invalid name"), then live. */
#define SFV__CHECK_HANDLE(p, kind, name) \
    do {                                 \
        SFV__CHECK_ARG(p, name);         \
        SFV__CHECK_LIVE(p, kind);        \
    } while (0)

struct sfv_device_list { struct ibv_device **devs; int n; };
#define SFV__EVENT_QUEUE 64
struct sfv_context {
    int refs;
    bool owned;                   /* safeverbs closes ctx (false: wrapped without ownership) */
    bool dropped;                 /* the caller's reference is gone (sfv__drop_once) */
    struct ibv_context *ctx;
    struct ibv_device_attr attr;
    char name[IBV_SYSFS_NAME_MAX];
    /* >>impl events: under ev_lock (any thread may read the device's events) */
    sfv__spin ev_lock;
    sfv_channel *channels;        /* every live channel of the context (ch->ctx_next) */
    sfv_srq *srqs;                /* every live SRQ of the context (srq->ctx_next) */
    sfv_event ev_queue[SFV__EVENT_QUEUE];
    size_t ev_first, ev_n;        /* the queue: oldest, count */
    int ev_efd, ev_epfd;          /* sfv_context_event_fd's eventfd and epoll set, -1 until made */
    bool probe;                   /* the device's uverbs node (dev_path) was there at open (or a twin's: sfv__contexts_add): its absence says it was deleted
                                     (cleared under ev_lock by a DEVICE_FATAL the device sent: one is enough) */
    ino_t node;                   /* that node (a device registered since may take its number, and so its path) */
    bool gone;                    /* and it is absent: taken as DEVICE_FATAL, once (sfv__device_probe); a channel or SRQ made since is broken as by it */
    bool dmabuf;                  /* it, or a twin, has had a DMA-BUF MR: its channels send nothing inline (under ev_lock: sfv__pd_no_inline) */
    sfv_context *all_next;        /* every live context (sfv__contexts, under sfv__contexts_lock) */
    bool twinned;                 /* another live context is over the same verbs context (>>impl events: sfv__events_read) */
};
struct sfv_pd { int refs; bool owned; bool dropped; /* sfv__drop_once */ struct ibv_pd *pd; sfv_context *ctx; sfv_pd *owned_next; /* sfv__pds_owned */
                sfv_channel *orphans; /* sfv__pd_orphan */
                sfv_mr *orphan_mrs; /* sfv__pd_orphan_mr */ };
struct sfv_cq { struct ibv_cq *cq; sfv_context *ctx; uint32_t capacity; };
struct sfv_mr { struct ibv_mr *mr; sfv_pd *pd; uint64_t addr; size_t length; unsigned access; int leases; /* >>impl leases */
                sfv_mr *iv_next; /* >>impl inflight: the process's DMA-BUF MRs (SFV_TRACK_INFLIGHT only) */
                sfv_mr *orphan_next; void *orphan_mem; /* on pd->orphan_mrs, and the memory freed once it is deregistered */ };
static sfv_result sfv__leases_live(const sfv_mr *mr);
static void sfv__leases_drop(sfv_channel *ch);
static void sfv__pd_no_inline(sfv_pd *pd);

static void sfv__ev_enter(sfv_context *ctx);
static void sfv__ev_leave(sfv_context *ctx);
static void sfv__device_probe(sfv_context *ctx);
/* Every live context, for what two of them over one verbs context (sfv_context_wrap of one in use
   already) share: the device's events, which come once, to whichever reads first (>>impl events).
   Taken only where a context is made or freed, and by a reader of a twinned context's events. */
static sfv_context *sfv__contexts;
static sfv__spin sfv__contexts_lock;
static void sfv__contexts_enter(void) { sfv__spin_enter(&sfv__contexts_lock); }
static void sfv__contexts_leave(void) { sfv__spin_leave(&sfv__contexts_lock); }
/* False, adding nothing, where ctx would close a verbs context another live one closes already
   (both owned: the second ibv_close_device would be on freed memory). */
static bool sfv__contexts_add(sfv_context *ctx) {
    sfv_context *c;
    sfv__contexts_enter();
    for (c = sfv__contexts; c; c = c->all_next)
        if (c->ctx == ctx->ctx && c->owned && ctx->owned) {
            sfv__contexts_leave();
            return false;
        }
    for (c = sfv__contexts; c; c = c->all_next)
        if (c->ctx == ctx->ctx) {
            /* under c's ev_lock: a reader of c's events looks at twinned again under it
               (sfv__events_lock), so none takes an event from now on without handing it to ctx */
            sfv__ev_enter(c);
            __atomic_store_n(&c->twinned, true, __ATOMIC_RELEASE);
            if (c->dmabuf) ctx->dmabuf = true; /* its channels send nothing inline either (sfv__pd_no_inline) */
            if (c->probe || c->gone) { /* one device: watch the node c saw at its open (sfv__device_probe): ctx's own
                                          stat found none, or another device's, where it was deleted before this wrap */
                ctx->probe = true;
                ctx->node = c->node;
            }
            sfv__ev_leave(c);
            __atomic_store_n(&ctx->twinned, true, __ATOMIC_RELEASE);
        }
    ctx->all_next = sfv__contexts;
    sfv__contexts = ctx;
    sfv__contexts_leave();
    return true;
}
static void sfv__contexts_remove(sfv_context *ctx) {
    sfv_context **at, *c, *alone = NULL;
    sfv__contexts_enter();
    for (at = &sfv__contexts; *at; at = &(*at)->all_next)
        if (*at == ctx) {
            *at = ctx->all_next;
            break;
        }
    for (c = sfv__contexts; c; c = c->all_next) /* a twin left alone reads its events alone again */
        if (c->ctx == ctx->ctx) {
            alone = alone ? NULL : c;
            if (!alone) break;
        }
    if (alone) __atomic_store_n(&alone->twinned, false, __ATOMIC_RELEASE);
    sfv__contexts_leave();
}

/* Every live PD that deallocates its verbs PD (sfv_alloc_pd's, owned wraps), under
   sfv__contexts_lock: a second owner of one verbs PD (sfv_pd_wrap of an owned one's
   sfv_pd_raw) would deallocate it twice, the second time on freed memory. Taken only where
   such a PD is made or deallocated. False, adding nothing: another owns raw already. */
static sfv_pd *sfv__pds_owned;
static bool sfv__pds_owned_add(sfv_pd *pd) {
    sfv_pd *p;
    sfv__contexts_enter();
    for (p = sfv__pds_owned; p; p = p->owned_next)
        if (p->pd == pd->pd) {
            sfv__contexts_leave();
            return false;
        }
    pd->owned_next = sfv__pds_owned;
    sfv__pds_owned = pd;
    sfv__contexts_leave();
    return true;
}
static void sfv__pds_owned_remove(sfv_pd *pd) {
    sfv_pd **at;
    sfv__contexts_enter();
    for (at = &sfv__pds_owned; *at; at = &(*at)->owned_next)
        if (*at == pd) {
            *at = pd->owned_next;
            break;
        }
    sfv__contexts_leave();
}

/* >>impl devices ----------------------------------------------------------------------------- */
SAFEVERBS_API sfv_result sfv_get_device_list(sfv_device_list **out) {
    sfv_device_list *list;
    int n = 0;
    sfv__log_init();
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    list = (sfv_device_list *)sfv__handle_new(sizeof *list, SFV__H_LIST);
    if (!list) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
    list->devs = ibv_get_device_list(&n);
    if (!list->devs) {
        int errnum = errno;
        if (errnum == ENOSYS) { /* a kernel without RDMA (no ib_uverbs): rdma-core's way of saying there are no devices */
            *out = list; /* (empty: devs NULL, n 0) */
            return SFV_OK;
        }
        sfv__handle_free(list, SFV__H_LIST);
        return sfv__fail_verb("ibv_get_device_list", errnum);
    }
    list->n = n;
    *out = list;
    return SFV_OK;
}

SAFEVERBS_API size_t sfv_device_list_len(const sfv_device_list *list) { return list ? (size_t)list->n : 0; }

SAFEVERBS_API const char *sfv_device_list_name(const sfv_device_list *list, size_t i) {
    return (list && i < (size_t)list->n) ? ibv_get_device_name(list->devs[i]) : NULL;
}

/* A GUID as verbs keeps it (network byte order) in host order: its bytes as printed. */
static uint64_t sfv__guid_host(__be64 g) {
    const uint8_t *b = (const uint8_t *)&g;
    uint64_t v = 0;
    int k;
    for (k = 0; k < 8; k++) v = (v << 8) | b[k];
    return v;
}

SAFEVERBS_API sfv_result sfv_device_list_guid(const sfv_device_list *list, size_t i, uint64_t *out) {
    SFV__CHECK_ARG(out, "out");
    *out = 0;
    SFV__CHECK_HANDLE(list, SFV__H_LIST, "list");
    if (i >= (size_t)list->n)
        return sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, __func__, "device index %zu out of range (%d devices)", i, list->n);
    *out = sfv__guid_host(ibv_get_device_guid(list->devs[i]));
    return SFV_OK;
}

SAFEVERBS_API void sfv_free_device_list(sfv_device_list *list) {
    if (!list) return;
    if (SFV__UNLIKELY(!sfv__handle_live(list, SFV__H_LIST))) {
        sfv__ignore(sfv__handle_dead("sfv_free_device_list", SFV__H_LIST)); /* (the call says nothing: sfv_last_error does) */
        return;
    }
    if (list->devs) ibv_free_device_list(list->devs); /* (NULL: the empty list of a kernel without RDMA) */
    sfv__handle_free(list, SFV__H_LIST);
}

SAFEVERBS_API const char *sfv_port_state_str(sfv_port_state s) {
    switch (s) {
    case SFV_PORT_NOP: return "NOP";
    case SFV_PORT_DOWN: return "DOWN";
    case SFV_PORT_INIT: return "INIT";
    case SFV_PORT_ARMED: return "ARMED";
    case SFV_PORT_ACTIVE: return "ACTIVE";
    case SFV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    }
    return "UNKNOWN";
}

static uint32_t sfv__mtu_bytes(enum ibv_mtu m) {
    return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << (int)m : 0;
}
static enum ibv_mtu sfv__mtu_enum(uint32_t bytes) {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return (enum ibv_mtu)0;
    }
}

/* What an opened and a wrapped context both go through: the device's limits cached, port 1
   ACTIVE or ARMED. */
static sfv_result sfv__context_check(sfv_context *ctx) {
    struct ibv_port_attr pa;
    struct stat st;
    int rc = ibv_query_device(ctx->ctx, &ctx->attr);
    if (rc) return sfv__fail_verb("ibv_query_device", rc);
    /* ibv_device_attr's counts are ints: a negative one reads 0 (>>devices) here too, where every
       check takes them as uint32_t (sfv_create_cq's min_entries, a channel's or an SRQ's desc):
       -1 would let any size through, cast to int for the verb */
#define SFV__CLAMP(n) ((n) = (n) > 0 ? (n) : 0)
    SFV__CLAMP(ctx->attr.max_qp); SFV__CLAMP(ctx->attr.max_qp_wr); SFV__CLAMP(ctx->attr.max_sge);
    SFV__CLAMP(ctx->attr.max_sge_rd); SFV__CLAMP(ctx->attr.max_cq); SFV__CLAMP(ctx->attr.max_cqe);
    SFV__CLAMP(ctx->attr.max_mr); SFV__CLAMP(ctx->attr.max_pd); SFV__CLAMP(ctx->attr.max_mw);
    SFV__CLAMP(ctx->attr.max_ah); SFV__CLAMP(ctx->attr.max_qp_rd_atom); SFV__CLAMP(ctx->attr.max_qp_init_rd_atom);
    SFV__CLAMP(ctx->attr.max_res_rd_atom); SFV__CLAMP(ctx->attr.max_srq); SFV__CLAMP(ctx->attr.max_srq_wr);
    SFV__CLAMP(ctx->attr.max_srq_sge);
#undef SFV__CLAMP
    ctx->ev_efd = ctx->ev_epfd = -1;
    rc = ibv_query_port(ctx->ctx, 1, &pa);
    if (rc) return sfv__fail_verb("ibv_query_port", rc);
    if (pa.state != IBV_PORT_ACTIVE && pa.state != IBV_PORT_ARMED)
        return sfv__fail(SFV_ERR_RESOURCE, ENETDOWN, "ibv_query_port",
                         "%s port 1 is in state %s (expected ACTIVE or ARMED)", ctx->name,
                         sfv_port_state_str((sfv_port_state)pa.state));
    ctx->probe = ctx->ctx->device && stat(ctx->ctx->device->dev_path, &st) == 0; /* (>>impl events: sfv__device_probe) */
    ctx->node = ctx->probe ? st.st_ino : 0;
    /* last: a wrapped context refused is left as it came */
    if (!sfv__fd_flags(ctx->ctx->async_fd, false)) /* safeverbs reads its events without blocking (>>events) */
        return sfv__fail_verb("fcntl", errno);
    return SFV_OK;
}

static sfv_result sfv__open(struct ibv_device *dev, sfv_context **out) {
    sfv_context *ctx;
    sfv_result r;
    ctx = (sfv_context *)sfv__handle_new(sizeof *ctx, SFV__H_CONTEXT);
    if (!ctx) return sfv__fail_verb("calloc", ENOMEM);
    snprintf(ctx->name, sizeof ctx->name, "%s", ibv_get_device_name(dev));
    errno = 0;
    ctx->ctx = ibv_open_device(dev);
    if (!ctx->ctx) {
        r = sfv__fail_verb("ibv_open_device", errno);
        goto free_ctx;
    }
    r = sfv__context_check(ctx);
    if (r) goto close_dev;
    ctx->owned = true;
    ctx->refs = 1;
    (void)sfv__contexts_add(ctx); /* (a verbs context just opened: no other context has it) */
    *out = ctx;
    SFV__LOG(SFV_LOG_INFO, "%s: opened (%u ports, max_qp_wr %d)", ctx->name, ctx->attr.phys_port_cnt, ctx->attr.max_qp_wr);
    return SFV_OK;
close_dev:
    ibv_close_device(ctx->ctx);
free_ctx:
    sfv__handle_free(ctx, SFV__H_CONTEXT);
    return r;
}

SAFEVERBS_API sfv_result sfv_context_wrap(struct ibv_context *raw, bool take_ownership, sfv_context **out) {
    sfv_context *ctx;
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    sfv__log_init();
    SFV__CHECK_ARG(raw, "raw context (NULL)");
    ctx = (sfv_context *)sfv__handle_new(sizeof *ctx, SFV__H_CONTEXT);
    if (!ctx) return sfv__fail_verb("calloc", ENOMEM);
    snprintf(ctx->name, sizeof ctx->name, "%s", raw->device ? ibv_get_device_name(raw->device) : "?");
    ctx->ctx = raw;
    r = sfv__context_check(ctx);
    if (r) {
        sfv__handle_free(ctx, SFV__H_CONTEXT); /* raw stays the caller's */
        return r;
    }
    ctx->owned = take_ownership;
    ctx->refs = 1;
    if (!sfv__contexts_add(ctx)) { /* (a verbs context in use already: the two share its events, unless both would close it) */
        sfv__handle_free(ctx, SFV__H_CONTEXT); /* raw stays the caller's (its fd was non-blocking already: the owner made it so) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__,
                         "%s: take_ownership, but another live sfv_context owns this verbs context already (it would be closed twice): wrap it without ownership",
                         __func__);
    }
    *out = ctx;
    SFV__LOG(SFV_LOG_INFO, "%s: wrapped (%s)", ctx->name, take_ownership ? "owned" : "not owned");
    sfv__device_probe(ctx); /* a twin's device deleted already: noticed now, before any channel of it is made */
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_open_device(const char *name, sfv_context **out) {
    sfv_device_list *list;
    sfv_result r;
    int i;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    r = sfv_get_device_list(&list);
    if (r) return r;
    for (i = 0; i < list->n; i++)
        if (!name || !*name || strcmp(name, ibv_get_device_name(list->devs[i])) == 0) break;
    if (i == list->n)
        r = sfv__fail(SFV_ERR_NOT_FOUND, ENODEV, "sfv_open_device", "no RDMA device %s%s%s",
                      name && *name ? "named " : "", name && *name ? name : "found", "");
    else
        r = sfv__open(list->devs[i], out);
    sfv_free_device_list(list);
    return r;
}

SAFEVERBS_API sfv_result sfv_open_device_at(const sfv_device_list *list, size_t i, sfv_context **out) {
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(list, "list");
    SFV__CHECK_LIVE(list, SFV__H_LIST); /* (the context is made from its device) */
    if (i >= (size_t)list->n)
        return sfv__fail(SFV_ERR_NOT_FOUND, ENODEV, __func__, "device index %zu out of range (%d devices)", i, list->n);
    return sfv__open(list->devs[i], out);
}

/* Drops a reference; the last one closes the device. A close the verb refuses keeps the context
   and its reference (the caller may try again). */
/* The caller's one reference of a context, PD or SRQ, dropped once: a second drop while children
   keep the object alive would take one of theirs and free it under them (a broken contract,
   reported; should SFV_ASSERT return, refused). A drop that is refused (the verb refused: the
   object kept) leaves the reference the caller's again, to try again. */
SFV__SLOW sfv_result sfv__dropped_twice(const char *fn) {
    SFV_ASSERT(0 && "a context, PD or SRQ released twice (its children keep it alive: the second release took one of theirs)");
    return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: this handle was released already (its children keep it alive): releasing it again "
                     "would free it under them", fn);
}
#define SFV__DROP_ONCE(obj, kind, fn, unref)                                                     \
    do {                                                                                         \
        sfv_result r_;                                                                           \
        if (!(obj)) return SFV_OK;                                                               \
        SFV__LIVE_OR_REFUSE(obj, kind, fn);                                                      \
        if (__atomic_exchange_n(&(obj)->dropped, true, __ATOMIC_ACQ_REL)) return sfv__dropped_twice(fn); \
        if ((r_ = (unref)) != SFV_OK) __atomic_store_n(&(obj)->dropped, false, __ATOMIC_RELEASE); \
        return r_;                                                                               \
    } while (0)

static sfv_result sfv__context_unref(sfv_context *ctx) {
    if (ctx && sfv__unref(&ctx->refs)) {
        int rc;
        sfv__contexts_remove(ctx); /* (first: a context opened once this one's is closed may have its address) */
        rc = ctx->owned ? ibv_close_device(ctx->ctx) : 0;
        if (rc) {
            (void)sfv__contexts_add(ctx); /* (back where it was: the one owner, if it owns) */
            sfv__ref(&ctx->refs);
            /* the last reference, kept: the caller's again, even where a child dropped it (kept
               quietly), so sfv_close_device may try again and is no release twice */
            __atomic_store_n(&ctx->dropped, false, __ATOMIC_RELEASE);
            return sfv__fail_verb("ibv_close_device", rc < 0 ? errno : rc);
        }
        if (ctx->ev_epfd >= 0) close(ctx->ev_epfd);
        if (ctx->ev_efd >= 0) close(ctx->ev_efd);
        SFV__LOG(SFV_LOG_INFO, "%s: closed", ctx->name);
        sfv__handle_free(ctx, SFV__H_CONTEXT);
    }
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_close_device(sfv_context *ctx) { SFV__DROP_ONCE(ctx, SFV__H_CONTEXT, "sfv_close_device", sfv__context_unref(ctx)); }
SAFEVERBS_API const char *sfv_context_name(const sfv_context *ctx) { return ctx ? ctx->name : NULL; }

SAFEVERBS_API uint32_t sfv_guid_oui(uint64_t guid) { return (uint32_t)(guid >> 40); }
SAFEVERBS_API bool sfv_guid_is_reserved(uint64_t guid) { return guid == 0; }

/* Reads a small sysfs file into buf (NUL-terminated); false if it cannot. */
static bool sfv__read_small(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    size_t k;
    if (!f) return false;
    k = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[k] = 0;
    return k > 0;
}

SAFEVERBS_API int sfv_context_numa_node(const sfv_context *ctx) {
    char path[256 + IBV_SYSFS_PATH_MAX], buf[32];
    if (!ctx || !ctx->ctx->device) return -1; /* (a wrapped context may have no device) */
    snprintf(path, sizeof path, "%s/device/numa_node", ctx->ctx->device->ibdev_path);
    return sfv__read_small(path, buf, sizeof buf) ? atoi(buf) : -1;
}

#ifdef CPU_SET
/* (node >= 0) */
static sfv_result sfv__bind_numa(int node) {
    char path[96], list[4096];
    const char *p = list;
    cpu_set_t set;
    int cpus = 0;
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    if (!sfv__read_small(path, list, sizeof list))
        return sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, "numa", "this machine has no NUMA node %d (%s)", node, path);
    CPU_ZERO(&set);
    while (*p >= '0' && *p <= '9') { /* "0-3,8-11" */
        char *end;
        long lo = strtol(p, &end, 10), hi = lo, c;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        for (c = lo; c <= hi && c < CPU_SETSIZE; c++, cpus++) CPU_SET((size_t)c, &set); /* (glibc's macro takes it as a size_t: an int warns under -Wsign-conversion) */
        p = *end == ',' ? end + 1 : end;
    }
    if (!cpus) return sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, "numa", "NUMA node %d has no CPUs", node);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return sfv__fail_verb("sched_setaffinity", errno);
    return SFV_OK;
}
#endif
SAFEVERBS_API sfv_result sfv_bind_thread_to_numa_node(int node) {
    if (node < 0) return sfv__fail(SFV_ERR_INVALID, EINVAL, "numa", "NUMA node %d", node); /* (with or without _GNU_SOURCE) */
#ifdef CPU_SET
    return sfv__bind_numa(node);
#else
    return sfv__fail(SFV_ERR_UNSUPPORTED, EOPNOTSUPP, "numa", "built without _GNU_SOURCE: no CPU affinity");
#endif
}

SAFEVERBS_API sfv_result sfv_context_bind_thread_to_numa(const sfv_context *ctx, bool strict) {
    int node;
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    node = sfv_context_numa_node(ctx);
    if (node < 0)
        return strict ? sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, "numa", "%s has no NUMA node", ctx->name) : SFV_OK;
    return sfv_bind_thread_to_numa_node(node);
}

SAFEVERBS_API sfv_result sfv_query_port(sfv_context *ctx, uint8_t port, sfv_port_attr *out) {
    struct ibv_port_attr pa;
    int rc;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    SFV__CHECK_ARG(port >= 1 && port <= ctx->attr.phys_port_cnt, "port");
    rc = ibv_query_port(ctx->ctx, port, &pa);
    if (rc) return sfv__fail_verb("ibv_query_port", rc);
    out->state = (sfv_port_state)pa.state;
    out->active_mtu = sfv__mtu_bytes(pa.active_mtu);
    out->max_mtu = sfv__mtu_bytes(pa.max_mtu);
    out->link_layer = (sfv_link_layer)pa.link_layer;
    out->lid = pa.lid;
    out->gid_tbl_len = (uint32_t)pa.gid_tbl_len;
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_query_device(sfv_context *ctx, sfv_device_attr *out) {
    const struct ibv_device_attr *a;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    a = &ctx->attr;
#define SFV__COUNT(n) ((n) > 0 ? (uint32_t)(n) : 0u) /* ibv_device_attr's counts are ints */
    memcpy(out->fw_ver, a->fw_ver, sizeof out->fw_ver - 1); /* the last byte stays 0 */
    out->node_guid = sfv__guid_host(a->node_guid);
    out->sys_image_guid = sfv__guid_host(a->sys_image_guid);
    out->max_mr_size = a->max_mr_size;
    out->page_size_cap = a->page_size_cap;
    out->vendor_id = a->vendor_id;
    out->vendor_part_id = a->vendor_part_id;
    out->hw_ver = a->hw_ver;
    out->max_qp = SFV__COUNT(a->max_qp);
    out->max_qp_wr = SFV__COUNT(a->max_qp_wr);
    out->max_sge = SFV__COUNT(a->max_sge);
    out->max_sge_rd = SFV__COUNT(a->max_sge_rd);
    out->max_cq = SFV__COUNT(a->max_cq);
    out->max_cqe = SFV__COUNT(a->max_cqe);
    out->max_mr = SFV__COUNT(a->max_mr);
    out->max_pd = SFV__COUNT(a->max_pd);
    out->max_mw = SFV__COUNT(a->max_mw);
    out->max_ah = SFV__COUNT(a->max_ah);
    out->max_qp_rd_atom = SFV__COUNT(a->max_qp_rd_atom);
    out->max_qp_init_rd_atom = SFV__COUNT(a->max_qp_init_rd_atom);
    out->max_res_rd_atom = SFV__COUNT(a->max_res_rd_atom);
    out->max_srq = SFV__COUNT(a->max_srq);
    out->max_srq_wr = SFV__COUNT(a->max_srq_wr);
    out->max_srq_sge = SFV__COUNT(a->max_srq_sge);
    out->max_pkeys = a->max_pkeys;
#undef SFV__COUNT
    switch (a->atomic_cap) {
    case IBV_ATOMIC_HCA: out->atomic_cap = SFV_ATOMIC_HCA; break;
    case IBV_ATOMIC_GLOB: out->atomic_cap = SFV_ATOMIC_GLOBAL; break;
    default: out->atomic_cap = SFV_ATOMIC_NONE; break;
    }
    out->local_ca_ack_delay = a->local_ca_ack_delay;
    out->phys_port_cnt = a->phys_port_cnt;
    return SFV_OK;
}

/* One GID table entry, recording nothing: 0; -1 for an empty entry; else the verb's error
   (sfv__gid_missing: no entry there). out is zeroed unless 0. */
static int sfv__gid_at(sfv_context *ctx, uint8_t port, uint32_t index, sfv_gid_entry *out) {
    struct ibv_gid_entry e;
    static const sfv_gid zero = {{0}};
    const int rc = ibv_query_gid_ex(ctx->ctx, port, index, &e, 0);
    memset(out, 0, sizeof *out);
    if (rc) return rc;
    if (memcmp(e.gid.raw, &zero, sizeof zero) == 0) return -1;
    memcpy(out->gid.raw, e.gid.raw, 16);
    switch (e.gid_type) {
    case IBV_GID_TYPE_IB: out->type = SFV_GID_TYPE_IB; break;
    case IBV_GID_TYPE_ROCE_V1: out->type = SFV_GID_TYPE_ROCE_V1; break;
    case IBV_GID_TYPE_ROCE_V2: out->type = SFV_GID_TYPE_ROCE_V2; break;
    default: out->type = SFV_GID_TYPE_UNKNOWN; break;
    }
    out->ifindex = e.ndev_ifindex;
    return 0;
}
static bool sfv__gid_missing(int rc) { return rc < 0 || rc == ENODATA || rc == EINVAL || rc == ENOENT; }

SAFEVERBS_API sfv_result sfv_query_gid(sfv_context *ctx, uint8_t port, uint32_t index, sfv_gid_entry *out) {
    int rc;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    SFV__CHECK_ARG(port >= 1 && port <= ctx->attr.phys_port_cnt, "port");
    rc = sfv__gid_at(ctx, port, index, out);
    if (rc < 0)
        return sfv__fail(SFV_ERR_NOT_FOUND, ENODATA, "ibv_query_gid_ex", "%s port %u GID %u is empty",
                         ctx->name, (unsigned)port, (unsigned)index);
    if (sfv__gid_missing(rc))
        return sfv__fail(SFV_ERR_NOT_FOUND, rc, "ibv_query_gid_ex", "%s port %u has no GID at index %u",
                         ctx->name, (unsigned)port, (unsigned)index);
    if (rc) return sfv__fail_verb("ibv_query_gid_ex", rc);
    return SFV_OK;
}

SAFEVERBS_API bool sfv_gid_is_ipv4(const sfv_gid *gid) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return gid && memcmp(gid->raw, prefix, sizeof prefix) == 0;
}

SAFEVERBS_API int sfv_gid_preference(const sfv_gid_entry *e) {
    if (!e) return 0;
    switch (e->type) {
    case SFV_GID_TYPE_ROCE_V2:
        if (sfv_gid_is_ipv4(&e->gid)) return 4;
        return (e->gid.raw[0] == 0xfe && (e->gid.raw[1] & 0xc0) == 0x80) ? 2 : 3; /* fe80::/10 */
    case SFV_GID_TYPE_IB: return 2;
    default: return 1;
    }
}

/* sfv_choose_gid, also giving the chosen entry. */
static sfv_result sfv__choose_gid(sfv_context *ctx, uint8_t port, uint32_t *index_out, sfv_gid_entry *chosen_out) {
    sfv_port_attr pa;
    sfv_gid_entry e;
    sfv_result r;
    uint32_t i, chosen = 0;
    int best = 0;
    SFV__CHECK_ARG(index_out, "index_out");
    *index_out = 0;
    memset(chosen_out, 0, sizeof *chosen_out);
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    SFV__CHECK_ARG(port >= 1 && port <= ctx->attr.phys_port_cnt, "port");
    r = sfv_query_port(ctx, port, &pa);
    if (r) return r;
    /* an empty entry skipped is no failure of this call (nothing recorded, nothing logged); a
       queue pair's GRH takes an 8-bit index: 0 .. 255 */
    for (i = 0; i < pa.gid_tbl_len && i <= UINT8_MAX && best < 4; i++) {
        int pref;
        const int rc = sfv__gid_at(ctx, port, i, &e);
        if (sfv__gid_missing(rc)) continue;
        if (rc) return sfv__fail_verb("ibv_query_gid_ex", rc); /* the driver failed: no quiet second choice */
        pref = sfv_gid_preference(&e);
        if (pref > best) {
            best = pref;
            chosen = i;
            *chosen_out = e;
        }
    }
    if (!best) {
        memset(chosen_out, 0, sizeof *chosen_out);
        return sfv__fail(SFV_ERR_NOT_FOUND, ENODATA, "sfv_choose_gid", "%s port %u has no usable GID", ctx->name, (unsigned)port);
    }
    *index_out = chosen;
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_choose_gid(sfv_context *ctx, uint8_t port, uint32_t *index_out) {
    sfv_gid_entry e;
    return sfv__choose_gid(ctx, port, index_out, &e);
}

/* >>impl pd and cq --------------------------------------------------------------------------- */
SAFEVERBS_API sfv_result sfv_alloc_pd(sfv_context *ctx, sfv_pd **out) {
    sfv_pd *pd;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(ctx, "context");
    SFV__CHECK_LIVE(ctx, SFV__H_CONTEXT);
    pd = (sfv_pd *)sfv__handle_new(sizeof *pd, SFV__H_PD);
    if (!pd) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
    pd->pd = ibv_alloc_pd(ctx->ctx);
    if (!pd->pd) {
        int errnum = errno;
        sfv__handle_free(pd, SFV__H_PD);
        return sfv__fail_verb("ibv_alloc_pd", errnum);
    }
    sfv__ref(&ctx->refs);
    pd->ctx = ctx;
    pd->owned = true;
    pd->refs = 1;
    (void)sfv__pds_owned_add(pd); /* (a verbs PD just allocated: no other PD has it) */
    *out = pd;
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_pd_wrap(sfv_context *ctx, struct ibv_pd *raw, bool take_ownership, sfv_pd **out) {
    sfv_pd *pd;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(ctx, "context");
    SFV__CHECK_LIVE(ctx, SFV__H_CONTEXT);
    SFV__CHECK_ARG(raw, "raw PD (NULL)");
    if (raw->context != ctx->ctx)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__,
                         "%s: the raw PD was allocated on another device context than %s's", __func__, ctx->name);
    pd = (sfv_pd *)sfv__handle_new(sizeof *pd, SFV__H_PD);
    if (!pd) return sfv__fail_verb("calloc", ENOMEM);
    pd->pd = raw;
    if (take_ownership && !sfv__pds_owned_add(pd)) {
        sfv__handle_free(pd, SFV__H_PD);
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__,
                         "%s: take_ownership, but another live sfv_pd owns this verbs PD already (it would be deallocated twice): wrap it without ownership",
                         __func__);
    }
    sfv__ref(&ctx->refs);
    pd->ctx = ctx;
    pd->owned = take_ownership;
    pd->refs = 1;
    *out = pd;
    return SFV_OK;
}

/* Drops a reference; the last one deallocates the PD (it cannot be busy: every MR and QP made
   through safeverbs held a reference). A dealloc the verb refuses keeps the PD and its reference. */
static sfv_result sfv__pd_unref(sfv_pd *pd) {
    if (pd && sfv__unref(&pd->refs)) {
        int rc = 0;
        if (pd->owned) { /* off the list first: a PD allocated on another thread once this one's is freed may
                            have its address, and must find no stale owner there (sfv__pds_owned_add) */
            sfv__pds_owned_remove(pd);
            rc = ibv_dealloc_pd(pd->pd);
        }
        if (rc) {
            if (pd->owned) (void)sfv__pds_owned_add(pd); /* (still allocated: its owner again) */
            sfv__ref(&pd->refs);
            __atomic_store_n(&pd->dropped, false, __ATOMIC_RELEASE); /* (the caller's again, as a context's) */
            return sfv__fail_verb("ibv_dealloc_pd", rc);
        }
        SFV__KEEPING_ERROR((void)sfv__context_unref(pd->ctx)); /* not the caller's handle: a refusal keeps it, unreported */
        sfv__handle_free(pd, SFV__H_PD);
    }
    return SFV_OK;
}
/* (sfv_dealloc_pd: >>impl channel internals, beside sfv_destroy_channel, whose refusals it retries) */
SAFEVERBS_API sfv_context *sfv_pd_context(const sfv_pd *pd) { return pd ? pd->ctx : NULL; }

/* X(name, class, hint) for every ibv_wc_status, in order. */
#define SFV__WC_LIST(X)                                                                                \
    X(SUCCESS, NONE, "no error")                                                                     \
    X(LOC_LEN_ERR, LOCAL_PROGRAMMING, "a receive buffer is smaller than the message, or a length exceeds the port's limit") \
    X(LOC_QP_OP_ERR, LOCAL_PROGRAMMING, "the work request is not valid for this QP or its state (rxe also says this for a receive smaller than the message, and for a local link that went down)")   \
    X(LOC_EEC_OP_ERR, LOCAL_PROGRAMMING, "EE context operation error (RD only)")                     \
    X(LOC_PROT_ERR, LOCAL_PROGRAMMING, "an element lies outside its MR or the MR lacks the access flag (check LOCAL_WRITE/REMOTE_READ/REMOTE_WRITE)") \
    X(WR_FLUSH_ERR, LOCAL_RESOURCE, "QP entered the error state; outstanding work requests were flushed (with no failure before it: rxe on Linux 6.12 flushes a send or write from outside its MR so)") \
    X(MW_BIND_ERR, LOCAL_RESOURCE, "memory window bind failed")                                     \
    X(BAD_RESP_ERR, UNKNOWN, "unexpected transport response from the peer")                         \
    X(LOC_ACCESS_ERR, LOCAL_PROGRAMMING, "local access error on an inbound RDMA request")           \
    X(REM_INV_REQ_ERR, REMOTE, "the peer found the request invalid (length, opcode or QP access flags)") \
    X(REM_ACCESS_ERR, REMOTE, "the peer refused access: check the rkey, the region bounds and that the peer registered it with remote access") \
    X(REM_OP_ERR, REMOTE, "the peer could not complete the operation")                             \
    X(RETRY_EXC_ERR, TRANSPORT, "no acknowledgement within the retries: the peer is gone, or unreachable (GID, routing, UDP 4791)") \
    X(RNR_RETRY_EXC_ERR, TRANSPORT, "the peer had no receive posted within the RNR retries")       \
    X(LOC_RDD_VIOL_ERR, LOCAL_PROGRAMMING, "RD domain violation")                                  \
    X(REM_INV_RD_REQ_ERR, REMOTE, "the peer found the RDMA read request invalid")                   \
    X(REM_ABORT_ERR, REMOTE, "the peer aborted the operation")                                     \
    X(INV_EECN_ERR, LOCAL_PROGRAMMING, "invalid EE context number")                                \
    X(INV_EEC_STATE_ERR, LOCAL_PROGRAMMING, "invalid EE context state")                            \
    X(FATAL_ERR, FATAL, "fatal device error")                                                      \
    X(RESP_TIMEOUT_ERR, TIMEOUT, "response timeout")                                               \
    X(GENERAL_ERR, UNKNOWN, "general error")                                                       \
    X(TM_ERR, UNKNOWN, "tag matching error")                                                       \
    X(TM_RNDV_INCOMPLETE, UNKNOWN, "tag matching rendezvous incomplete")

SAFEVERBS_API const char *sfv_wc_status_str(sfv_wc_status s) {
    switch (s) {
#define SFV__X(n, c, h) case SFV_WC_##n: return #n;
        SFV__WC_LIST(SFV__X)
#undef SFV__X
    }
    return "UNKNOWN_STATUS";
}
SAFEVERBS_API sfv_work_error_class sfv_wc_status_class(sfv_wc_status s) {
    switch (s) {
#define SFV__X(n, c, h) case SFV_WC_##n: return SFV_WORK_ERROR_##c;
        SFV__WC_LIST(SFV__X)
#undef SFV__X
    }
    return SFV_WORK_ERROR_UNKNOWN;
}
SAFEVERBS_API const char *sfv_wc_status_hint(sfv_wc_status s) {
    switch (s) {
#define SFV__X(n, c, h) case SFV_WC_##n: return h;
        SFV__WC_LIST(SFV__X)
#undef SFV__X
    }
    return "unknown completion status";
}
SAFEVERBS_API const char *sfv_work_error_class_str(sfv_work_error_class c) {
    switch (c) {
    case SFV_WORK_ERROR_NONE: return "none";
    case SFV_WORK_ERROR_LOCAL_PROGRAMMING: return "local programming error";
    case SFV_WORK_ERROR_LOCAL_RESOURCE: return "local resource error";
    case SFV_WORK_ERROR_REMOTE: return "remote error";
    case SFV_WORK_ERROR_TRANSPORT: return "transport error";
    case SFV_WORK_ERROR_TIMEOUT: return "timeout";
    case SFV_WORK_ERROR_FATAL: return "fatal";
    case SFV_WORK_ERROR_UNKNOWN: return "unknown";
    }
    return "unknown";
}

static sfv_wc_opcode sfv__wc_opcode(enum ibv_wc_opcode op) {
    switch (op) {
    case IBV_WC_SEND: return SFV_WC_OP_SEND;
    case IBV_WC_RDMA_WRITE: return SFV_WC_OP_WRITE;
    case IBV_WC_RDMA_READ: return SFV_WC_OP_READ;
    case IBV_WC_RECV: return SFV_WC_OP_RECV;
    case IBV_WC_RECV_RDMA_WITH_IMM: return SFV_WC_OP_RECV_IMM;
    case IBV_WC_COMP_SWAP: return SFV_WC_OP_COMP_SWAP;
    case IBV_WC_FETCH_ADD: return SFV_WC_OP_FETCH_ADD;
    default: return SFV_WC_OP_UNKNOWN;
    }
}

/* 24 bytes: the raw facts of one completion; sfv_work_completion is built from them only when
   the work is consumed. */
typedef struct sfv__slot {
    uint64_t seq;
    uint8_t state;       /* state, op, status, has_imm: set by one 4-byte store at post */
    uint8_t op;          /* sfv_wc_opcode posted; a receive becomes RECV_IMM by its completion */
    uint8_t status;      /* enum ibv_wc_status */
    uint8_t has_imm;     /* a success: whether imm_be holds an immediate; a failure: its class
                            (sfv_work_error_class) where the channel knew better than the status */
    uint32_t byte_len;   /* posted: what a read will scatter; completed: what a receive got */
    uint32_t imm_be;     /* immediate data as it came off the wire */
    uint32_t vendor_err;
} sfv__slot;
SFV__STATIC_ASSERT(offsetof(sfv__slot, has_imm) == offsetof(sfv__slot, state) + 3, slot_small_fields_adjacent);

static bool sfv__op_is_atomic(uint8_t op) { return op == SFV_WC_OP_COMP_SWAP || op == SFV_WC_OP_FETCH_ADD; }
/* Injects (>>impl inject): the ops their places are tracked as (never one the user posts; the
   place's state is SFV__SLOT_INJECT while in flight), and the wr_id bit that takes every completion of one off the common path (a place's seq stays
   below 2^62: sfv__ring_init). */
#define SFV__OP_INJECT_SEND 0x7C
#define SFV__OP_INJECT_WRITE 0x7D
#define SFV__OP_INJECT_WRITE_IMM 0x7E
#define SFV__OP_ABORT_MARK 0x7B /* an abort's own zero-length write, tracked as an inject (sfv__abort_mark): no inject of the caller's */
#define SFV__WRID_INJECT (1ull << 63)


/* The user's view of a finished slot, built only when someone asks for it: a success's (inlined
   where a wait hands one back), and any slot's. wc->channel is NULL: for an SRQ's receive, its
   taker fills it in (sfv__srq_fill, sfv__pending_result). */
SFV__HOT_INLINE void sfv__wc_make_ok(sfv_work_completion *wc, const sfv__slot *s) {
    const bool recv = s->op == SFV_WC_OP_RECV || s->op == SFV_WC_OP_RECV_IMM;
    wc->wr_id = s->seq << 1 | recv;
    wc->channel = NULL;
    wc->result = SFV_OK;
    wc->status = SFV_WC_SUCCESS;
    wc->vendor_err = 0;
    wc->error_class = SFV_WORK_ERROR_NONE;
    /* (a place of the channel's own work, a scope's fence taken in its settle, holds no value of
       the enum: in C++ making one of it is undefined; the fence is a zero-length write) */
    wc->opcode = SFV__UNLIKELY(s->op > SFV_WC_OP_FETCH_ADD) ? SFV_WC_OP_WRITE : (sfv_wc_opcode)s->op;
    wc->byte_len = (recv || s->op == SFV_WC_OP_READ || sfv__op_is_atomic(s->op)) ? s->byte_len : 0;
    wc->has_imm = s->has_imm != 0;
    wc->imm_data = s->has_imm ? ntohl(s->imm_be) : 0; /* the one byte-order conversion */
}
static void sfv__wc_make(sfv_work_completion *wc, const sfv__slot *s) {
    const bool recv = s->op == SFV_WC_OP_RECV || s->op == SFV_WC_OP_RECV_IMM;
    if (SFV__LIKELY(s->status == IBV_WC_SUCCESS)) {
        sfv__wc_make_ok(wc, s);
    } else {
        wc->wr_id = s->seq << 1 | recv;
        wc->channel = NULL; /* an SRQ's receive: its taker fills it in (sfv__srq_fill) */
        wc->result = SFV_ERR_WORK;
        wc->status = (sfv_wc_status)s->status;
        wc->vendor_err = s->vendor_err;
        wc->error_class = s->has_imm ? (sfv_work_error_class)s->has_imm : sfv_wc_status_class(wc->status);
        wc->opcode = SFV_WC_OP_UNKNOWN; /* not valid in an error completion */
        wc->byte_len = 0;
        wc->has_imm = false;
        wc->imm_data = 0;
    }
}

/* A completion of the public CQ, as the channel's completions are shown. */
/* A completion's status in the one byte a slot keeps: a provider's status past the last one
   verbs defines is a failure all the same (IBV_WC_GENERAL_ERR, its vendor_err kept), never read
   as IBV_WC_SUCCESS (0) once truncated, nor handed out as no value of sfv_wc_status (which C++
   may not hold: undefined behaviour past the enum's range). */
static uint8_t sfv__status_byte(enum ibv_wc_status status) {
    return (unsigned)status > (unsigned)IBV_WC_TM_RNDV_INCOMPLETE ? (uint8_t)IBV_WC_GENERAL_ERR : (uint8_t)status;
}
static void sfv__wc_fill(sfv_work_completion *o, const struct ibv_wc *w) {
    sfv__slot s;
    memset(&s, 0, sizeof s);
    s.op = (uint8_t)sfv__wc_opcode(w->opcode);
    s.status = sfv__status_byte(w->status);
    s.has_imm = w->status == IBV_WC_SUCCESS && (w->wc_flags & IBV_WC_WITH_IMM) != 0;
    s.byte_len = (w->opcode & IBV_WC_RECV) ? w->byte_len : sfv__op_is_atomic(s.op) ? 8 : 0;
    s.imm_be = w->imm_data;
    s.vendor_err = w->vendor_err;
    sfv__wc_make(o, &s);
    o->wr_id = w->wr_id; /* the caller's own, not a slot's place */
}

SAFEVERBS_API sfv_result sfv_create_cq(sfv_context *ctx, uint32_t min_entries, sfv_cq **out) {
    sfv_cq *cq;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(ctx, "context");
    SFV__CHECK_LIVE(ctx, SFV__H_CONTEXT);
    if (min_entries == 0 || min_entries > (uint32_t)ctx->attr.max_cqe)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__, "min_entries %u outside 1..%d (device max_cqe)",
                         (unsigned)min_entries, ctx->attr.max_cqe);
    cq = (sfv_cq *)sfv__handle_new(sizeof *cq, SFV__H_CQ);
    if (!cq) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
    cq->cq = ibv_create_cq(ctx->ctx, (int)min_entries, NULL, NULL, 0);
    if (!cq->cq) {
        int errnum = errno;
        sfv__handle_free(cq, SFV__H_CQ);
        return sfv__fail_verb("ibv_create_cq", errnum);
    }
    sfv__ref(&ctx->refs);
    cq->ctx = ctx;
    cq->capacity = (uint32_t)cq->cq->cqe;
    *out = cq;
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_destroy_cq(sfv_cq *cq) {
    int rc;
    if (!cq) return SFV_OK;
    SFV__LIVE_OR_REFUSE(cq, SFV__H_CQ, "sfv_destroy_cq");
    rc = ibv_destroy_cq(cq->cq);
    if (rc) return sfv__fail_verb("ibv_destroy_cq", rc); /* the CQ stays: try again */
    SFV__KEEPING_ERROR((void)sfv__context_unref(cq->ctx)); /* (a refusal keeps it, unreported: as a PD's) */
    sfv__handle_free(cq, SFV__H_CQ);
    return SFV_OK;
}
SAFEVERBS_API uint32_t sfv_cq_capacity(const sfv_cq *cq) { return cq ? cq->capacity : 0; }

SAFEVERBS_API sfv_result sfv_poll_cq(sfv_cq *cq, sfv_work_completion *out, size_t max, size_t *count) {
    struct ibv_wc wc[16];
    size_t got = 0;
    SFV__CHECK_ARG(count, "count");
    *count = 0;
    SFV__CHECK_ARG(cq, "cq");
    SFV__CHECK_ARG(out || max == 0, "out");
    while (got < max) {
        int want = (int)((max - got) < 16 ? (max - got) : 16), n, k;
        n = ibv_poll_cq(cq->cq, want, wc);
        if (n < 0) return got ? SFV_OK : sfv__fail_poll(n); /* what was taken is the caller's; the error comes again next call */
        for (k = 0; k < n; k++) sfv__wc_fill(&out[got + (size_t)k], &wc[k]);
        got += (size_t)n;
        *count = got;
        if (n < want) break;
    }
    return SFV_OK;
}

/* >>impl memory regions ---------------------------------------------------------------------- */
/* An MR's memory, taken before the verb: an allocation that failed after it would leave a registration to
   undo, and a deregistration refused then would lose it (holding the PD, whose dealloc then refuses for
   good, and the caller's memory, which a peer may still write). */
static sfv_mr *sfv__mr_alloc(void) { return (sfv_mr *)sfv__handle_new(sizeof(sfv_mr), SFV__H_MR); }
static void sfv__mr_finish(sfv_pd *pd, sfv_mr *mr, struct ibv_mr *m, unsigned access, sfv_mr **out) {
    sfv__ref(&pd->refs);
    mr->mr = m;
    mr->pd = pd;
    mr->addr = (uint64_t)(uintptr_t)m->addr;
    mr->length = m->length;
    mr->access = access;
    *out = mr;
}

/* A registration pins its pages; ENOMEM mostly means the locked-memory limit, so say it. */
static sfv_result sfv__fail_reg(size_t length, int errnum) {
    struct rlimit rl;
    if (errnum == ENOMEM && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        return sfv__fail(SFV_ERR_RESOURCE, errnum, "ibv_reg_mr",
                         "ibv_reg_mr failed: %s (pinning %zu bytes; the locked-memory limit, ulimit -l, is %llu KiB: raise it)",
                         strerror(errnum), length, (unsigned long long)(rl.rlim_cur / 1024));
    return sfv__fail_verb("ibv_reg_mr", errnum);
}

/* The access flags of a registration; the verbs' rule, remote write or atomic needs local write,
   said here, not as EINVAL from the verb later. */
#define SFV__CHECK_MR_ACCESS(access)                                                                               \
    SFV__CHECK_ARG(((access) & ~(unsigned)SFV__ACCESS_ALL) == 0, "access flags");                                  \
    SFV__CHECK_ARG(!((access) & (SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC)) || ((access) & SFV_ACCESS_LOCAL_WRITE), \
                   "access flags (REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE)");                                   \
    SFV__CHECK_ARG(!((access) & SFV_ACCESS_ZERO_BASED), "access flags (ZERO_BASED: an MR's elements and remote regions address it by "   \
                   "its addresses, not by offsets from 0)")

SAFEVERBS_API sfv_result sfv_reg_mr_access(sfv_pd *pd, void *addr, size_t length, unsigned access, sfv_mr **out) {
    struct ibv_mr *m;
    sfv_mr *mr;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    SFV__CHECK_ARG(addr, "addr (NULL)");
    SFV__CHECK_ARG(length > 0, "length (0)");
    SFV__CHECK_ARG(length - 1 <= UINTPTR_MAX - (uintptr_t)addr, "length (addr + length wraps)"); /* (no sum that wraps, even tested) */
    SFV__CHECK_MR_ACCESS(access);
    mr = sfv__mr_alloc();
    if (!mr) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
#ifdef ibv_reg_mr /* rdma-core's macro (the function behind it takes int) takes the flags unsigned: an int warns under -Wsign-conversion */
    m = ibv_reg_mr(pd->pd, addr, length, access);
#else
    m = ibv_reg_mr(pd->pd, addr, length, (int)access);
#endif
    if (!m) {
        const int errnum = errno;
        sfv__handle_free(mr, SFV__H_MR);
        return sfv__fail_reg(length, errnum);
    }
    sfv__mr_finish(pd, mr, m, access, out);
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_reg_mr_local(sfv_pd *pd, void *addr, size_t length, sfv_mr **out) {
    return sfv_reg_mr_access(pd, addr, length, SFV_ACCESS_LOCAL_WRITE, out);
}
SAFEVERBS_API sfv_result sfv_reg_mr_shared(sfv_pd *pd, void *addr, size_t length, sfv_mr **out) {
    return sfv_reg_mr_access(pd, addr, length, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE, out);
}

SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_access(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, unsigned access, sfv_mr **out) {
    struct ibv_mr *m;
    sfv_mr *mr;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    SFV__CHECK_ARG(fd >= 0, "fd (negative)");
    SFV__CHECK_ARG(length > 0, "length (0)");
    SFV__CHECK_ARG(length - 1 <= UINT64_MAX - offset, "length (offset + length wraps)"); /* (no sum that wraps, even tested) */
    SFV__CHECK_ARG(length - 1 <= UINT64_MAX - iova, "length (iova + length wraps)");
    SFV__CHECK_MR_ACCESS(access);
    if ((iova & (page - 1)) != (offset & (page - 1)))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__,
                         "iova 0x%llx and offset 0x%llx differ in their offset within a page",
                         (unsigned long long)iova, (unsigned long long)offset);
    mr = sfv__mr_alloc();
    if (!mr) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
    m = ibv_reg_dmabuf_mr(pd->pd, offset, length, iova, fd, (int)access);
    if (!m) {
        const int errnum = errno;
        sfv__handle_free(mr, SFV__H_MR);
        return sfv__fail_verb("ibv_reg_dmabuf_mr", errnum);
    }
    sfv__mr_finish(pd, mr, m, access, out);
    (*out)->addr = iova; /* where the NIC addresses it (rdma-core sets m->addr to the offset) */
    sfv__pd_no_inline(pd); /* its elements are no host memory: never copied by the CPU */
    SFV__INFLIGHT_DMABUF(*out, true); /* nor tracked as host memory */
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_local(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, sfv_mr **out) {
    return sfv_reg_dmabuf_mr_access(pd, fd, offset, length, iova, SFV_ACCESS_LOCAL_WRITE, out);
}
SAFEVERBS_API sfv_result sfv_reg_dmabuf_mr_shared(sfv_pd *pd, int fd, uint64_t offset, size_t length, uint64_t iova, sfv_mr **out) {
    return sfv_reg_dmabuf_mr_access(pd, fd, offset, length, iova,
                                    SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE, out);
}

SAFEVERBS_API sfv_result sfv_dereg_mr(sfv_mr *mr) {
    int rc;
    bool dmabuf;
    if (!mr) return SFV_OK;
    SFV__LIVE_OR_REFUSE(mr, SFV__H_MR, "sfv_dereg_mr");
    SFV__INFLIGHT_DEREG(mr);
    if (SFV__UNLIKELY(__atomic_load_n(&mr->leases, __ATOMIC_RELAXED) > 0)) return sfv__leases_live(mr); /* >>impl leases */
    dmabuf = SFV__INFLIGHT_DMABUF_OFF(mr); /* before the verb frees mr->mr: a post on another thread reads it there */
    rc = ibv_dereg_mr(mr->mr);
    if (rc) {
        if (dmabuf) SFV__INFLIGHT_DMABUF(mr, true); /* still registered: its elements are still iovas */
        return sfv__fail_verb("ibv_dereg_mr", rc); /* still registered (its rkey still works): try again */
    }
    SFV__KEEPING_ERROR((void)sfv__pd_unref(mr->pd));
    sfv__handle_free(mr, SFV__H_MR);
    return SFV_OK;
}

SAFEVERBS_API uint32_t sfv_mr_lkey(const sfv_mr *mr) { return mr ? mr->mr->lkey : 0; }
SAFEVERBS_API uint32_t sfv_mr_rkey(const sfv_mr *mr) { return mr ? mr->mr->rkey : 0; }
SAFEVERBS_API uint64_t sfv_mr_addr(const sfv_mr *mr) { return mr ? mr->addr : 0; }
SAFEVERBS_API size_t sfv_mr_length(const sfv_mr *mr) { return mr ? mr->length : 0; }
SAFEVERBS_API unsigned sfv_mr_access(const sfv_mr *mr) { return mr ? mr->access : 0; }
SAFEVERBS_API sfv_pd *sfv_mr_pd(const sfv_mr *mr) { return mr ? mr->pd : NULL; }

/* [p, p+len) inside [addr, addr+length), with no addition that can wrap. */
static bool sfv__encloses(uint64_t addr, uint64_t length, uint64_t p, uint64_t len) {
    return p >= addr && len <= length && p - addr <= length - len;
}
SAFEVERBS_API bool sfv_mr_encloses(const sfv_mr *mr, const void *ptr, size_t len) {
    return mr && sfv__encloses(mr->addr, mr->length, (uint64_t)(uintptr_t)ptr, len);
}
SAFEVERBS_API sfv_remote_mr sfv_mr_remote(const sfv_mr *mr) {
    sfv_remote_mr x = {0, 0, 0};
    if (mr) {
        x.addr = mr->addr;
        x.length = mr->length;
        x.rkey = mr->mr->rkey;
    }
    return x;
}

/* >>impl elements ---------------------------------------------------------------------------- */
static sfv_result sfv__element_check(const sfv_mr *mr, const void *data, size_t len) {
    if (!mr) return sfv__fail(SFV_ERR_INVALID, EINVAL, "element", "element: NULL memory region");
    if ((uint64_t)len > UINT32_MAX)
        return sfv__fail(SFV_ERR_SLICE_TOO_BIG, EOVERFLOW, "element", "element: %zu bytes is over UINT32_MAX", len);
    if (!sfv_mr_encloses(mr, data, len))
        return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, "element",
                         "element: [%p, +%zu) is not within the MR [0x%llx, +%zu)", data, len,
                         (unsigned long long)mr->addr, mr->length);
    return SFV_OK;
}

/* Both element types share one layout; one maker serves both. */
#define SFV__ELEMENT(T, r, data, len) \
    T e;                              \
    e.addr = (uint64_t)(uintptr_t)(data); e.length = (uint32_t)(len); e.lkey = (r) ? (r)->mr->lkey : 0

SAFEVERBS_API sfv_gather_element sfv_mr_gather_element_unchecked(const sfv_mr *mr, const void *data, size_t len) {
    SFV__ELEMENT(sfv_gather_element, mr, data, len);
    return e;
}
SAFEVERBS_API sfv_scatter_element sfv_mr_scatter_element_unchecked(const sfv_mr *mr, void *data, size_t len) {
    SFV__ELEMENT(sfv_scatter_element, mr, data, len);
    return e;
}
SAFEVERBS_API sfv_gather_element sfv_mr_gather_element(const sfv_mr *mr, const void *data, size_t len) {
    SFV_DEBUG_ASSERT(!mr || ((uint64_t)len <= UINT32_MAX && sfv_mr_encloses(mr, data, len)));
    return sfv_mr_gather_element_unchecked(mr, data, len);
}
SAFEVERBS_API sfv_scatter_element sfv_mr_scatter_element(const sfv_mr *mr, void *data, size_t len) {
    SFV_DEBUG_ASSERT(!mr || ((uint64_t)len <= UINT32_MAX && sfv_mr_encloses(mr, data, len)));
    return sfv_mr_scatter_element_unchecked(mr, data, len);
}
SAFEVERBS_API sfv_result sfv_mr_gather_element_checked(const sfv_mr *mr, const void *data, size_t len, sfv_gather_element *out) {
    sfv_result res;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    res = sfv__element_check(mr, data, len);
    if (res == SFV_OK) *out = sfv_mr_gather_element_unchecked(mr, data, len);
    return res;
}
SAFEVERBS_API sfv_result sfv_mr_scatter_element_checked(const sfv_mr *mr, void *data, size_t len, sfv_scatter_element *out) {
    sfv_result res;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    res = sfv__element_check(mr, data, len);
    if (res == SFV_OK) *out = sfv_mr_scatter_element_unchecked(mr, data, len);
    return res;
}

/* >>impl remote regions ---------------------------------------------------------------------- */
static uint64_t sfv__sat_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; } /* (no sum that wraps, even tested) */
static uint64_t sfv__sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
static uint64_t sfv__sat_mul(uint64_t a, uint64_t b) { return (b && a > UINT64_MAX / b) ? UINT64_MAX : a * b; }

SAFEVERBS_API sfv_remote_mr sfv_remote_mr_make(uint64_t addr, uint64_t length, uint32_t rkey) {
    sfv_remote_mr region;
    region.addr = addr;
    region.length = length;
    region.rkey = rkey;
    return region;
}
SAFEVERBS_API uint64_t sfv_remote_mr_addr(sfv_remote_mr region) { return region.addr; }
SAFEVERBS_API uint64_t sfv_remote_mr_length(sfv_remote_mr region) { return region.length; }
SAFEVERBS_API uint32_t sfv_remote_mr_rkey(sfv_remote_mr region) { return region.rkey; }

/* A region describes [addr, addr + length): it wraps when that passes 2^64. */
static bool sfv__remote_wraps(sfv_remote_mr region) { return region.length && region.length - 1 > UINT64_MAX - region.addr; }
static sfv_result sfv__remote_wrapping(sfv_remote_mr region, const char *verb) {
    return sfv__fail(SFV_ERR_INVALID, EINVAL, verb, "remote region [0x%llx, +%llu bytes) wraps past 2^64",
                     (unsigned long long)region.addr, (unsigned long long)region.length);
}
/* The largest length that keeps a region at addr below 2^64. */
static uint64_t sfv__remote_room(uint64_t addr) { return addr ? UINT64_MAX - addr + 1 : UINT64_MAX; }

static sfv_result sfv__remote_oob(sfv_remote_mr region, uint64_t off, uint64_t len, sfv_remote_mr *out) {
    memset(out, 0, sizeof *out);
    return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, "remote region",
                     "remote region: [+%llu, +%llu bytes) is not within its %llu bytes",
                     (unsigned long long)off, (unsigned long long)len, (unsigned long long)region.length);
}

SAFEVERBS_API sfv_result sfv_remote_mr_slice(sfv_remote_mr region, uint64_t offset, uint64_t length, sfv_remote_mr *out) {
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    if (sfv__remote_wraps(region)) return sfv__remote_wrapping(region, "sfv_remote_mr_slice");
    if (offset > region.length || length > region.length - offset) return sfv__remote_oob(region, offset, length, out);
    if (offset > UINT64_MAX - region.addr) return sfv__remote_oob(region, offset, length, out); /* an empty slice at 2^64 */
    *out = sfv_remote_mr_make(region.addr + offset, length, region.rkey); /* no wrap: region does not */
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_remote_mr_sub(sfv_remote_mr region, uint64_t offset, sfv_remote_mr *out) {
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    if (sfv__remote_wraps(region)) return sfv__remote_wrapping(region, "sfv_remote_mr_sub");
    if (offset > region.length) return sfv__remote_oob(region, offset, 0, out);
    return sfv_remote_mr_slice(region, offset, region.length - offset, out);
}
/* The unchecked forms saturate: the address stops at 2^64 - 1 and the length at what still fits
   below 2^64, so what they make never wraps. */
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_slice_unchecked(sfv_remote_mr region, uint64_t offset, uint64_t length) {
    const uint64_t addr = sfv__sat_add(region.addr, offset), room = sfv__remote_room(addr);
    return sfv_remote_mr_make(addr, length < room ? length : room, region.rkey);
}
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_sub_unchecked(sfv_remote_mr region, uint64_t offset) {
    return sfv_remote_mr_slice_unchecked(region, offset, sfv__sat_sub(region.length, offset));
}
SAFEVERBS_API sfv_result sfv_remote_mr_array_field(sfv_remote_mr region, uint64_t elem_size, uint64_t index, uint64_t field_offset, uint64_t field_size, sfv_remote_mr *out) {
    uint64_t off;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    SFV__CHECK_ARG(elem_size > 0 && field_offset <= elem_size && field_size <= elem_size - field_offset, "field (not inside its element)");
    if (sfv__remote_wraps(region)) return sfv__remote_wrapping(region, "sfv_remote_mr_array_field");
    if (index > UINT64_MAX / elem_size || field_offset > UINT64_MAX - index * elem_size) /* past 2^64: past any region */
        return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, "remote region",
                         "remote region: field +%llu of element %llu (of %llu bytes) lies past 2^64, not within its %llu bytes",
                         (unsigned long long)field_offset, (unsigned long long)index, (unsigned long long)elem_size,
                         (unsigned long long)region.length); /* (no offset to name: it does not fit 64 bits) */
    off = index * elem_size + field_offset;
    return sfv_remote_mr_slice(region, off, field_size, out);
}
SAFEVERBS_API sfv_remote_mr sfv_remote_mr_array_field_unchecked(sfv_remote_mr region, uint64_t elem_size, uint64_t index, uint64_t field_offset, uint64_t field_size) {
    return sfv_remote_mr_slice_unchecked(region, sfv__sat_add(sfv__sat_mul(index, elem_size), field_offset), field_size);
}

static void sfv__put_be(uint8_t *p, uint64_t v, int bytes) {
    int i;
    for (i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static uint64_t sfv__get_be(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return v;
}

SAFEVERBS_API void sfv_remote_mr_encode(sfv_remote_mr region, uint8_t out[SFV_REMOTE_MR_ENCODED_SIZE]) {
    if (!out) return;
    out[0] = 'S'; out[1] = 'R'; out[2] = 1; out[3] = 0;
    sfv__put_be(out + 4, region.addr, 8);
    sfv__put_be(out + 12, region.length, 8);
    sfv__put_be(out + 20, region.rkey, 4);
}

static sfv_result sfv__bad_encoding(const char *what, const char *why) {
    return sfv__fail(SFV_ERR_INVALID, EINVAL, what, "%s: %s", what, why);
}

SAFEVERBS_API sfv_result sfv_remote_mr_decode(const uint8_t *in, size_t size, sfv_remote_mr *out) {
    sfv_remote_mr region;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    if (!in) return sfv__bad_encoding("sfv_remote_mr_decode", "no input (NULL)");
    if (size < SFV_REMOTE_MR_ENCODED_SIZE) return sfv__bad_encoding("sfv_remote_mr_decode", "input too short");
    if (in[0] != 'S' || in[1] != 'R') return sfv__bad_encoding("sfv_remote_mr_decode", "bad magic");
    if (in[2] != 1) return sfv__bad_encoding("sfv_remote_mr_decode", "unknown version");
    if (in[3] != 0) return sfv__bad_encoding("sfv_remote_mr_decode", "reserved byte is not 0");
    region.addr = sfv__get_be(in + 4, 8);
    region.length = sfv__get_be(in + 12, 8);
    region.rkey = (uint32_t)sfv__get_be(in + 20, 4);
    if (sfv__remote_wraps(region)) return sfv__bad_encoding("sfv_remote_mr_decode", "addr + length wraps");
    *out = region;
    return SFV_OK;
}

/* >>impl channel ----------------------------------------------------------------------------- */
/* Each queue (send, receive) is a ring of slots in post order: wr_id = seq << 1 | is_receive.
   A slot lives from post until its completion is consumed (by a pending handle or a scope), so
   a completion polled on behalf of another handle waits in its slot: fixed memory, no map.
   RC completes each queue in order, so `completed` also completes unsignaled work before it.
   Only [tail, head) is ever read: a batch consumed at the tail leaves the places before its last
   as they were, behind the tail, until they are posted anew. */
enum { SFV__SLOT_FREE = 0, SFV__SLOT_INFLIGHT = 1, SFV__SLOT_DONE = 2,
       SFV__SLOT_INJECT = 3 /* an inject in flight (>>impl inject): nobody consumes it, a completion frees it */ };
/* A handle's state_: posted and waiting for one work request (the common path's one test), done,
   or waiting for a batch of them (batch_ > 1: the slow path). */
enum { SFV__PENDING_NONE = 0, SFV__PENDING_WAITING = 1, SFV__PENDING_DONE = 2, SFV__PENDING_WAITING_BATCH = 3 };


typedef struct sfv__ring {
    sfv__slot *slots;
    struct sfv__iv *iv; uint32_t iv_per; /* >>impl inflight: iv_per elements per slot, after the slots */
    sfv_channel *ch;     /* the ring's channel, for a pending handle that must poll */
    uint64_t mask;       /* ring size - 1; ring size is a power of two >= cap */
    uint64_t cap;        /* work requests posted and not yet consumed, at most */
    uint64_t head;       /* next seq to post */
    uint64_t tail;       /* oldest seq not consumed */
    uint64_t completed;  /* next seq without a completion; an INFLIGHT slot below it is done (sfv__slot_done) */
    uint64_t base;       /* the seq of the ring's first work request */
    uint64_t inject_top; /* the seq + 1 of the newest inject's place (0: none): a catch-up looks at no place from it on */
    uint64_t sig_top;    /* the seq + 1 of the newest signaled work request (0: none): an inject's reap waits only for a completion that will come */
    bool gaps;           /* a place in (tail, head) may be free: a release at the tail then looks past itself */
} sfv__ring;

/* An SRQ's receive ring's `completed` (>>impl srq): its receives complete in any order, each with
   its own completion, so none is completed by another's. */
#define SFV__SRQ_UNORDERED UINT64_MAX

/* Whether slot s still holds work request seq, and it has completed. A completion completes the
   unsignaled work before it (RC completes a queue in order) without a store to their slots: what
   is still INFLIGHT below `completed` succeeded (its status says so since its post). (The seq
   test: a stale handle's place, reused by work in flight, is never taken for its own.) */
static bool sfv__slot_done(const sfv__ring *q, const sfv__slot *s, uint64_t seq) {
    return s->seq == seq &&
           (s->state == SFV__SLOT_DONE || (s->state == SFV__SLOT_INFLIGHT && seq < q->completed && q->completed != SFV__SRQ_UNORDERED));
}

struct sfv_channel {
    sfv_pd *pd;
    sfv_channel *orphan_next;     /* on pd->orphans (sfv__pd_orphan) */
    bool unmade;                  /* sfv__channel_new could not take it apart: an orphan, not a channel */
    struct ibv_qp *qp;
    struct ibv_cq *cq;
    struct ibv_comp_channel *cc;
    sfv_channel_desc desc;        /* resolved: no zero means "default" any more */
    sfv_gid gid;
    uint16_t lid;
    sfv_link_layer link_layer;
    bool connected, broken, armed;
    bool aborted;                 /* we moved the QP to the error state (a deadline, a destroy) */
    bool abort_pending, abort_flushing; /* an SRQ's failure stopping its channels: this one's flushes still to drain, and whether its QP went to ERR */
    struct ibv_qp *qp_spare;      /* a new QP that never reached INIT whose destroy was refused (sfv__qp_make): no work on
                                     it, never used; destroyed first by sfv__destroy_qp (the channel's destroy, a reset) */
    bool qp_err;                  /* an abort moved this QP to the error state (aborted alone does not say so: the verb may have refused) */
    uint8_t first_status;         /* the channel's first failed completion (enum ibv_wc_status), 0: none */
    uint8_t first_op;             /* and what it was (sfv_wc_opcode) */
    uint8_t first_cause;          /* what the channel found out about it (sfv__cause) */
    bool can_send, can_recv;      /* the post paths' summary of the state above (set by sfv__set_can) */
    size_t lim_send, lim_read, lim_recv; /* and the one test they make of it: elements per work request
                                     + 1 where the queue takes work, 0 where it does not */
    uint32_t max_read_sge;        /* elements per RDMA read: max_send_sge, or less where the device
                                     reads into fewer (max_sge_rd; 1 on some iWARP NICs) */
    int scope_depth;
    bool scope_manual;            /* the innermost open scope is a manual one: no unsignaled post (it has no handle to consume it by) */
    bool cq_dead;                 /* a CQ_ERR of its CQ or a DEVICE_FATAL was read (set under ev_lock, whatever broke it first): a reset, which keeps the CQ, is refused */
    int scope_auto;               /* open scopes that are not manual: an inject left last is fenced by the innermost of them */
    int settling;                 /* a scope is consuming what fn left (its on_wc may run): no destroy or reset */
    bool owned;                   /* a multi-channel's (>>impl multi-channel): only its destroy frees it */
    sfv__ring sq, rq;
    struct sfv_lease *leases;     /* >>impl leases: the live leases bound to this queue pair (and failed grants' windows) */
    sfv_channel *ctx_next;        /* the context's list of channels (>>impl events) */
    sfv_srq *srq;                 /* the SRQ its receives come from (>>impl srq), or NULL */
    sfv_channel *srq_next;        /* the SRQ's list of its channels */
    sfv_srq *core_of;             /* non-NULL only in an SRQ's own inner channel (its CQ and ring) */
    uint64_t last_unsignaled;     /* the place + 1 of the last unsignaled post (>>scopes), 0: none */
    uint64_t reset_sq, reset_rq;  /* each queue's head at the last sfv_channel_reset: what it flushed lies below (its hint) */
    uint32_t inline_max;          /* the granted inline limit (0: none; 0 once the context has a DMA-BUF MR): a post's one compare */
    uint32_t inject_lim;          /* the granted inline limit + 1 (with a DMA-BUF MR too: injects are from plain memory), 0 without inline: an inject's one compare */
    uint32_t inject_every;        /* SFV_INJECT_SIGNAL_EVERY(max_send_wr) (>>impl inject) */
    uint32_t inject_left;         /* injects until the next signaled one */
    uint64_t injects;             /* injects posted, ever: the number of the last one */
    struct {                      /* the first inject that failed (no == 0: none) */
        uint64_t no;
        uint32_t len, vendor_err;
        uint8_t op, status, cls;
    } inject_failed;
    uint8_t async_cause;          /* set by whichever thread read the event that broke it (sfv__cause), 0: none */
    uint8_t async_event;          /* and that event (sfv_event_type) */
    uint32_t port_errs;           /* PORT_ERR events read for its port (under ev_lock, counted even when
                                     broken already): one read while a reset runs outlives it */
    struct sfv__watch *watch;     /* what else may end its waits (>>impl rdmacm), or NULL */
};

/* Another thread that reads an event may break a channel (sfv__event_break, under the context's
   ev_lock) while the channel's own thread uses it. What that writes (broken, can_send, can_recv,
   the lim_* below, async_cause, async_event) is read and written whole (relaxed atomics: on x86 a
   plain load or store, so the post path is unchanged), and what opens a queue again does it under
   the same lock (sfv__open_send, sfv__open_recv), so an event's break is never undone. */
#define SFV__XLOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)
#define SFV__XSET(f, v) __atomic_store_n(&(f), (v), __ATOMIC_RELAXED)
/* (acquire: async_event, stored before it, is the event's) */
static uint8_t sfv__async_cause(const sfv_channel *ch) { return __atomic_load_n(&ch->async_cause, __ATOMIC_ACQUIRE); }

/* Whether the channel's queues take work now, and the one test its posts make of that (sfv__postable):
   every change of can_send or can_recv goes through here. */
/* (release stores: a post refused by one of them reads why with acquire, sfv__post_refused) */
static void sfv__set_can_send(sfv_channel *ch, bool send) {
    __atomic_store_n(&ch->lim_send, send ? (size_t)ch->desc.max_send_sge + 1 : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&ch->lim_read, send ? (size_t)ch->max_read_sge + 1 : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&ch->can_send, send, __ATOMIC_RELEASE);
}
static void sfv__set_can_recv(sfv_channel *ch, bool recv) {
    __atomic_store_n(&ch->lim_recv, recv ? (size_t)ch->desc.max_recv_sge + 1 : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&ch->can_recv, recv, __ATOMIC_RELEASE);
}
static void sfv__set_can(sfv_channel *ch, bool send, bool recv) {
    sfv__set_can_send(ch, send);
    sfv__set_can_recv(ch, recv);
}
/* A connection made: the send queue takes work, unless an event broke the channel meanwhile (the
   receive side as it is). */
static void sfv__open_send(sfv_channel *ch) {
    sfv__ev_enter(ch->pd->ctx);
    sfv__set_can_send(ch, !SFV__XLOAD(ch->broken) && !ch->settling); /* (connected from a scope's on_wc: when the scope ends, sfv__settle_open) */
    sfv__ev_leave(ch->pd->ctx);
}
/* A new QP not connected yet (a channel made, or reset): the send queue closed, the receive
   queue open if `recv`, unless an event broke the channel meanwhile. */
static void sfv__open_recv(sfv_channel *ch, bool recv) {
    sfv__ev_enter(ch->pd->ctx);
    sfv__set_can(ch, false, recv && !SFV__XLOAD(ch->broken));
    sfv__ev_leave(ch->pd->ctx);
}

/* Something besides the device that can end a channel's waits: the RDMA-CM connection over it,
   whose peer may disconnect (>>impl rdmacm). A wait that has to wait polls fd as well (event
   mode) or calls check as often as it reads the device's events (busy mode); check breaks the
   channel if it must (sfv__channel_peer_gone). The channel's destroy calls detach, after which
   neither side points to the other. */
typedef struct sfv__watch {
    int fd;
    void (*check)(struct sfv__watch *w);
    void (*detach)(struct sfv__watch *w, bool destroyed); /* destroyed: the channel goes; else a reset */
} sfv__watch;

/* A shared receive queue (>>impl srq). Its inner channel `core` has no QP: its CQ is the receive
   CQ of every channel on the SRQ, its receive ring the SRQ's receives, so pending handles, waits
   and deadlines are a channel's. */
struct sfv_srq {
    int refs;                     /* the creator's, and one per channel on it */
    bool dropped;                 /* the creator's reference is gone (sfv__drop_once) */
    struct ibv_srq *srq;
    sfv_srq_desc desc;            /* resolved */
    sfv_channel core;
    sfv_channel *channels;        /* the channels on it (ch->srq_next) */
    sfv_srq *ctx_next;            /* the context's list of SRQs (>>impl events) */
};

static void sfv__events_read(sfv_context *ctx);
static void sfv__device_probe(sfv_context *ctx);
static void sfv__srq_attach(sfv_srq *srq, sfv_channel *ch);
static sfv_result sfv__srq_detach(sfv_srq *srq, sfv_channel *ch);
static void sfv__events_add_channel(sfv_context *ctx, sfv_channel *ch);
static void sfv__events_remove_channel(sfv_context *ctx, sfv_channel *ch);

/* Debug builds keep the address of every live channel, so that a pending handle whose channel
   was destroyed is caught by SFV_ASSERT before anything reads the freed ring (release builds
   read it: a use after free). One sorted array behind a spinlock: O(log n) per wait, O(n) per
   channel created or destroyed. A new channel at a dead one's address passes this check; the
   slot check after it (its sequence number) then catches the handle all but always. */
#if SFV_DEBUG
static bool sfv__live_lock;
static uintptr_t *sfv__live;
static size_t sfv__live_n, sfv__live_cap;
static void sfv__live_enter(void) { while (__atomic_test_and_set(&sfv__live_lock, __ATOMIC_ACQUIRE)) sched_yield(); }
static void sfv__live_leave(void) { __atomic_clear(&sfv__live_lock, __ATOMIC_RELEASE); }
/* The place of the first entry >= key. */
static size_t sfv__live_find(uintptr_t key) {
    size_t lo = 0, hi = sfv__live_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sfv__live[mid] < key) lo = mid + 1; else hi = mid;
    }
    return lo;
}
static bool sfv__live_add(const sfv_channel *ch) {
    const uintptr_t key = (uintptr_t)ch;
    size_t at;
    bool ok = true;
    sfv__live_enter();
    if (sfv__live_n == sfv__live_cap) {
        size_t cap = sfv__live_cap ? 2 * sfv__live_cap : 16;
        uintptr_t *grown = (uintptr_t *)SFV_MALLOC(cap * sizeof *grown);
        if (grown) {
            if (sfv__live_n) memcpy(grown, sfv__live, sfv__live_n * sizeof *grown);
            SFV_FREE(sfv__live);
            sfv__live = grown;
            sfv__live_cap = cap;
        }
        ok = grown != NULL;
    }
    if (ok) {
        at = sfv__live_find(key);
        memmove(sfv__live + at + 1, sfv__live + at, (sfv__live_n - at) * sizeof *sfv__live);
        sfv__live[at] = key;
        sfv__live_n++;
    }
    sfv__live_leave();
    return ok;
}
static void sfv__live_remove(const sfv_channel *ch) {
    size_t at;
    sfv__live_enter();
    at = sfv__live_find((uintptr_t)ch);
    if (at < sfv__live_n && sfv__live[at] == (uintptr_t)ch) {
        memmove(sfv__live + at, sfv__live + at + 1, (sfv__live_n - at - 1) * sizeof *sfv__live);
        if (--sfv__live_n == 0) { /* nothing left: nothing held, for leak checkers */
            SFV_FREE(sfv__live);
            sfv__live = NULL;
            sfv__live_cap = 0;
        }
    }
    sfv__live_leave();
}
/* Whether q is one of the two rings of a live channel. */
static bool sfv__live_ring(const struct sfv__ring *q) {
    const uintptr_t key = (uintptr_t)q;
    size_t at;
    bool live = false;
    sfv__live_enter();
    at = sfv__live_find(key + 1); /* the last channel that starts at or before q */
    if (at > 0) {
        const sfv_channel *ch = (const sfv_channel *)sfv__live[at - 1];
        live = (const void *)q == (const void *)&ch->sq || (const void *)q == (const void *)&ch->rq;
    }
    sfv__live_leave();
    return live;
}
#else
static bool sfv__live_add(const sfv_channel *ch) { (void)ch; return true; }
static void sfv__live_remove(const sfv_channel *ch) { (void)ch; }
#endif

/* The wait loops read the clock while they spin. CLOCK_MONOTONIC_COARSE comes from the vDSO even
   where CLOCK_MONOTONIC is a system call (an HPET or ACPI PM clocksource, common in VMs), so a
   busy wait makes no system call; it lags by up to a tick, which sfv__timeout_ns adds back. */
static uint64_t sfv__now_ns(void) {
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left before `deadline`, for poll(2); 0 once it has passed. */
static int sfv__ms_left(uint64_t deadline) {
    uint64_t now = sfv__now_ns();
    uint64_t ms = now >= deadline ? 0 : (deadline - now + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}
/* The same, uncapped (up to INT_MAX): a deadline handed on to a call that takes milliseconds. */
static int sfv__ms_until(uint64_t deadline) {
    uint64_t now = sfv__now_ns();
    uint64_t ms = now >= deadline ? 0 : (deadline - now + 999999) / 1000000;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* A timeout in ns plus the clock's resolution: a deadline never passes early. */
static uint64_t sfv__timeout_ns(uint32_t ms) {
    static uint64_t res_ns; /* read once (every thread reads the same value: a race would be harmless) */
    uint64_t r = __atomic_load_n(&res_ns, __ATOMIC_RELAXED);
    if (SFV__UNLIKELY(r == 0)) {
        struct timespec res = {0, 1};
#ifdef CLOCK_MONOTONIC_COARSE
        if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) res.tv_sec = 0, res.tv_nsec = 1;
#endif
        r = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
        if (r == 0) r = 1;
        __atomic_store_n(&res_ns, r, __ATOMIC_RELAXED);
    }
    return (uint64_t)ms * 1000000u + r;
}

static sfv_result sfv__bad_field(const char *field, unsigned long long v, const char *allowed) {
    return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_channel_desc", "sfv_channel_desc.%s = %llu is out of range (%s)",
                     field, v, allowed);
}
/* sfv_channel_desc.timeout_ms (0, the default, resolved before): at most a day. */
static sfv_result sfv__timeout_field(uint32_t ms) {
    return ms > 86400000u ? sfv__bad_field("timeout_ms", ms, "1 .. 86400000") : SFV_OK;
}

/* What resolving a desc learnt of its port, for the channels made from it. */
typedef struct sfv__port_facts {
    uint16_t lid;
    sfv_link_layer link_layer;
    sfv_gid gid;                  /* the GID at desc.gid_index, when gid_index_set */
} sfv__port_facts;

static sfv_result sfv__desc_resolve(sfv_pd *pd, const sfv_channel_desc *in, sfv_channel_desc *o, sfv__port_facts *facts) {
    const struct ibv_device_attr *a;
    sfv_port_attr pa;
    sfv_gid_entry ge;
    sfv_result r;
    uint32_t rd_max;
    SFV__CHECK_ARG(o, "out");
    memset(o, 0, sizeof *o);
    memset(facts, 0, sizeof *facts);
    SFV__CHECK_ARG(pd, "pd");
    if (in) *o = *in; /* else the zeroes are every default (SFV_WAIT_DEFAULT is 0) */
    /* the SRQ is the channel's parent as its PD is (read below, its PD and context): a destroyed
       one is refused before that, as a dead PD is by the callers */
    if (o->srq) SFV__CHECK_LIVE(o->srq, SFV__H_SRQ);
    a = &pd->ctx->attr;
    if (!o->port) o->port = 1;
    if (o->port > a->phys_port_cnt) return sfv__bad_field("port", o->port, "1 .. the device's port count");
    r = sfv_query_port(pd->ctx, o->port, &pa);
    if (r) return r;
    if (pa.state != SFV_PORT_ACTIVE) /* ARMED opens a device, but carries no data yet */
        return sfv__fail(SFV_ERR_RESOURCE, ENETDOWN, "sfv_channel_desc", "%s port %u is in state %s (a channel needs it ACTIVE)",
                         pd->ctx->name, (unsigned)o->port, sfv_port_state_str(pa.state));
    facts->lid = pa.lid;
    facts->link_layer = pa.link_layer;
    if (!o->max_send_wr) o->max_send_wr = 128;
    if (!o->max_recv_wr) o->max_recv_wr = 128;
    if (o->max_send_wr > (uint32_t)a->max_qp_wr) return sfv__bad_field("max_send_wr", o->max_send_wr, "1 .. device max_qp_wr");
    if (o->max_recv_wr > (uint32_t)a->max_qp_wr) return sfv__bad_field("max_recv_wr", o->max_recv_wr, "1 .. device max_qp_wr");
    if (!o->max_send_sge) o->max_send_sge = 4;
    if (!o->max_recv_sge) o->max_recv_sge = 4;
    if (o->max_send_sge > (uint32_t)a->max_sge) return sfv__bad_field("max_send_sge", o->max_send_sge, "1 .. device max_sge");
    if (o->max_recv_sge > (uint32_t)a->max_sge) return sfv__bad_field("max_recv_sge", o->max_recv_sge, "1 .. device max_sge");
    if (!o->cq_entries) o->cq_entries = o->max_send_wr + o->max_recv_wr;
    if (o->cq_entries < o->max_send_wr + o->max_recv_wr || o->cq_entries > (uint32_t)a->max_cqe)
        return sfv__bad_field("cq_entries", o->cq_entries, "max_send_wr + max_recv_wr .. device max_cqe");
    if (!o->max_inline_data) o->max_inline_data = SFV_INLINE_DEFAULT;
    if (o->max_inline_data > 65536 && o->max_inline_data != SFV_INLINE_NONE)
        return sfv__bad_field("max_inline_data", o->max_inline_data, "0 .. 65536, or SFV_INLINE_NONE");
    if (!o->access) o->access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ;
    if (o->access & ~(unsigned)(SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC))
        return sfv__bad_field("access", o->access, "LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC");
    if (o->gid_index_set) {
        if (o->gid_index >= pa.gid_tbl_len) return sfv__bad_field("gid_index", o->gid_index, "below the port's GID table length");
        r = sfv_query_gid(pd->ctx, o->port, o->gid_index, &ge);
        if (r) return r;
        facts->gid = ge.gid;
    } else {
        uint32_t gi = 0;
        const sfv__error_mark saved = sfv__error_mark_now();
        r = sfv__choose_gid(pd->ctx, o->port, &gi, &ge);
        facts->gid = ge.gid;
        /* RoCE cannot connect without one; InfiniBand can (by LID), but not past a failed verb */
        if (r && (pa.link_layer == SFV_LINK_LAYER_ETHERNET || r != SFV_ERR_NOT_FOUND)) return r;
        if (r) sfv__error_back(&saved);
        o->gid_index = (uint8_t)gi;
        o->gid_index_set = (r == SFV_OK);
    }
    if (!o->path_mtu) o->path_mtu = pa.active_mtu;
    if (!sfv__mtu_enum(o->path_mtu) || o->path_mtu > pa.active_mtu)
        return sfv__bad_field("path_mtu", o->path_mtu, "256, 512, 1024, 2048 or 4096, up to the port's active MTU");
    if (o->send_psn > 0xFFFFFFu) return sfv__bad_field("send_psn", o->send_psn, "24 bits");
    if (!o->min_rnr_timer) o->min_rnr_timer = 12;
    if (o->min_rnr_timer > 31) return sfv__bad_field("min_rnr_timer", o->min_rnr_timer, "1 .. 31");
    if (!o->ack_timeout) o->ack_timeout = 14;
    if (o->ack_timeout > 31) return sfv__bad_field("ack_timeout", o->ack_timeout, "1 .. 31");
    if (!o->ack_retries_set) o->ack_retries = 6; /* not 7: rxe takes 7 as "retry for ever" */
    if (o->ack_retries > 7) return sfv__bad_field("ack_retries", o->ack_retries, "0 .. 7");
    if (!o->rnr_retries_set) o->rnr_retries = 7;
    if (o->rnr_retries > 7) return sfv__bad_field("rnr_retries", o->rnr_retries, "0 .. 7 (7 = forever)");
    if (o->service_level > 15) return sfv__bad_field("service_level", o->service_level, "0 .. 15");
    o->ack_retries_set = o->rnr_retries_set = true;
    rd_max = (uint32_t)(a->max_qp_rd_atom < a->max_qp_init_rd_atom ? a->max_qp_rd_atom : a->max_qp_init_rd_atom);
    if (rd_max > 255) rd_max = 255;
    if (!o->max_rd_atomic) o->max_rd_atomic = rd_max ? rd_max : 1;
    if (o->max_rd_atomic > (rd_max ? rd_max : 1)) { /* (the lesser of two limits: named with its number, or max_qp_rd_atom alone misled) */
        char allowed[96];
        snprintf(allowed, sizeof allowed, "1 .. %u: the device's max_qp_rd_atom and max_qp_init_rd_atom, the lesser, at most 255",
                 (unsigned)(rd_max ? rd_max : 1));
        return sfv__bad_field("max_rd_atomic", o->max_rd_atomic, allowed);
    }
    if (!o->timeout_ms) o->timeout_ms = 10000;
    if ((r = sfv__timeout_field(o->timeout_ms)) != SFV_OK) return r;
    if (o->srq && o->srq->core.pd->ctx != pd->ctx)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_channel_desc", "sfv_channel_desc.srq belongs to another device context (%s) than the PD's (%s; a second sfv_context_wrap of one counts as another)",
                         o->srq->core.pd->ctx->name, pd->ctx->name);
    if (o->srq && o->srq->core.pd->pd != pd->pd) /* (a PD that wraps the same verbs PD is the same) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_channel_desc", "sfv_channel_desc.srq was made on another PD than the channel's: its receives' "
                         "buffers are in MRs of the SRQ's PD, which a NIC may check against the QP's (make the channel on the SRQ's PD)");
    if (o->wait_mode == SFV_WAIT_DEFAULT) o->wait_mode = SFV_WAIT_BUSY;
    if (o->wait_mode != SFV_WAIT_BUSY && o->wait_mode != SFV_WAIT_EVENT)
        return sfv__bad_field("wait_mode", (unsigned long long)o->wait_mode, "SFV_WAIT_BUSY or SFV_WAIT_EVENT");
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_channel_desc_resolve(sfv_pd *pd, const sfv_channel_desc *desc, sfv_channel_desc *out) {
    sfv_channel_desc in;
    sfv__port_facts facts;
    sfv_result r;
    if (desc) in = *desc; /* desc and out may be the same struct */
    /* it reads the PD's device (its ports, GIDs and limits): a dead PD is refused first, as
       sfv_create_channel refuses it (NULL: sfv__desc_resolve says it) */
    r = pd && !sfv__handle_live(pd, SFV__H_PD) ? sfv__handle_dead(__func__, SFV__H_PD)
                                                : sfv__desc_resolve(pd, desc ? &in : NULL, out, &facts);
    if (r && out) memset(out, 0, sizeof *out); /* nothing half-resolved is left behind */
    return r;
}

/* Every ring of the process numbers its work from its own base, 2^40 apart (2^21 rings before
   the bases come round again; every seq stays below 2^62, so wr_id's top bit is free for
   SFV__WRID_INJECT), so a stale pending handle never names a place of a newer ring
   that reuses a dead one's memory: its slot check fails instead. */
static uint64_t sfv__ring_bases;

static sfv_result sfv__ring_init(sfv__ring *q, sfv_channel *ch, uint32_t cap) {
    uint64_t size = 1;
    while (size < cap) size <<= 1;
    q->slots = (sfv__slot *)SFV_CALLOC((size_t)size, sizeof *q->slots + SFV__INFLIGHT_BYTES(ch, q));
    if (!q->slots) return sfv__fail_verb("calloc", ENOMEM);
    SFV__INFLIGHT_RING_INIT(ch, q, size);
    q->ch = ch;
    q->mask = size - 1;
    q->cap = cap;
    q->base = ((__atomic_fetch_add(&sfv__ring_bases, 1, __ATOMIC_RELAXED) & ((1u << 21) - 1)) + 1) << 40;
    q->head = q->tail = q->completed = q->base;
    q->inject_top = 0;
    q->gaps = false;
    return SFV_OK;
}

static sfv_result sfv__modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, const char *step) {
    int rc = ibv_modify_qp(qp, attr, mask);
    if (!rc) return SFV_OK;
    if (rc == EINVAL && attr->qp_state == IBV_QPS_RTR && attr->ah_attr.is_global)
        return sfv__fail(SFV_ERR_INVALID, rc, "ibv_modify_qp", "ibv_modify_qp to RTR failed: %s (if the path is the cause: are both GIDs of the same type and subnet, and does a route lead from this GID's interface to the peer's?)",
                         strerror(rc));
    if (rc == ETIMEDOUT || rc == ENETUNREACH || rc == EHOSTUNREACH)
        return sfv__fail(SFV_ERR_RESOURCE, rc, "ibv_modify_qp", "ibv_modify_qp to %s failed: %s (the peer's GID is not reachable from this GID: check the GID index, routing and UDP port 4791)",
                         step, strerror(rc));
    return sfv__fail(sfv_result_from_errno(rc), rc, "ibv_modify_qp", "ibv_modify_qp to %s failed: %s", step, strerror(rc));
}

/* A PSN no earlier connection is likely to have used: the clock, the process, the channel's
   address and a count of the draws, mixed (splitmix64's finalizer). The count: the clock is the
   coarse one (a tick of 1 to 4 ms), and a QP made at the address of the one just freed (as the
   allocator hands it out again) drew the same PSN in the same tick (a reset's new PSN was the
   old one). Not for secrets; only to tell connections apart. */
static uint64_t sfv__psn_draws;
SFV__WRAPS static uint32_t sfv__random_psn(const void *salt) {
    uint64_t x = sfv__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)salt;
    x += __atomic_add_fetch(&sfv__psn_draws, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ull; /* (splitmix64's step) */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(x ^ (x >> 31)) & 0xFFFFFFu;
}

/* Destroys the channel's spare QP, if any (sfv__qp_make's, never used: no work, no event of it
   is looked for): 0, or the verb's errno, the spare kept. */
static int sfv__spare_destroy(sfv_channel *ch) {
    int rc = 0;
    if (ch->qp_spare && (rc = ibv_destroy_qp(ch->qp_spare)) == 0) ch->qp_spare = NULL;
    return rc;
}

/* The channel's RC queue pair on its CQ (and SRQ), taken to INIT so receives can be posted
   before the handshake. On failure ch->qp is NULL and nothing is left, unless the destroy of a
   QP that did not reach INIT was refused: then ch->qp_spare is that QP (no work on it, and the
   channel has no QP to use: its endpoint and posts are refused as without one), for the
   channel's destroy or its next reset to destroy (forgotten, it would hold the CQ for good, whose
   destroy then refuses for ever). Used at creation and by sfv_channel_reset. */
static sfv_result sfv__srq_failed(void) {
    return sfv__fail(SFV_ERR_BROKEN, EIO, "channel", "the SRQ failed (its receives are flushed, or will be at its next wait; the device may still hold them): no queue pair takes from it again; destroy it and make a new one");
}
static sfv_result sfv__qp_make(sfv_channel *ch, sfv_pd *pd) {
    struct ibv_qp_init_attr qi;
    struct ibv_qp_attr qa;
    sfv_result r;
    uint32_t ask, granted;
    if (ch->desc.srq && !ch->desc.srq->srq)
        return sfv__fail(SFV_ERR_BROKEN, EIO, "channel", "the SRQ is gone (a destroy failed part-way: call sfv_destroy_srq again)");
    if (ch->desc.srq && sfv_channel_broken(&ch->desc.srq->core, NULL)) return sfv__srq_failed(); /* its receives said flushed may still be the device's */
    memset(&qi, 0, sizeof qi);
    qi.send_cq = qi.recv_cq = ch->cq;
    qi.qp_type = IBV_QPT_RC;
    qi.sq_sig_all = 0;
    qi.cap.max_send_wr = ch->desc.max_send_wr;
    qi.cap.max_recv_wr = ch->desc.max_recv_wr;
    qi.cap.max_send_sge = ch->desc.max_send_sge;
    qi.cap.max_recv_sge = ch->desc.max_recv_sge;
    if (ch->desc.srq) { /* receives from the SRQ, completing to its CQ (>>impl srq) */
        qi.srq = ch->desc.srq->srq;
        qi.recv_cq = ch->desc.srq->core.cq;
        qi.cap.max_recv_wr = qi.cap.max_recv_sge = 0;
    }
    /* Inline data as asked; an ask the device refuses (EINVAL: over its limit, which no attribute
       tells) is halved until one is taken, down to none. */
    ask = ch->desc.max_inline_data == SFV_INLINE_NONE ? 0 : ch->desc.max_inline_data;
    for (;;) {
        const struct ibv_qp_cap cap = qi.cap;
        qi.cap.max_inline_data = ask;
        errno = 0;
        SFV__XSET(ch->qp, ibv_create_qp(pd->pd, &qi)); /* (whole: a reset's, while another thread reads an event) */
        if (ch->qp || errno != EINVAL || ask == 0) break;
        qi.cap = cap;
        ask /= 2;
    }
    if (!ch->qp) {
        r = sfv__fail_verb("ibv_create_qp", errno);
        return r;
    }
    /* The caps come back at least as asked (rxe gives room for max_send_sge elements, 64 bytes at
       the default 4); never more than the ask is used. */
    granted = qi.cap.max_inline_data < ask ? qi.cap.max_inline_data : ask;
    ch->desc.max_inline_data = granted ? granted : SFV_INLINE_NONE;
    sfv__ev_enter(pd->ctx); /* (against sfv__pd_no_inline: no channel of a DMA-BUF context is missed) */
    SFV__XSET(ch->inline_max, pd->ctx->dmabuf ? 0 : granted);
    sfv__ev_leave(pd->ctx);
    ch->inject_lim = granted ? granted + 1 : 0; /* injects are from plain memory: inline with a DMA-BUF MR too */
    ch->inject_every = SFV_INJECT_SIGNAL_EVERY(ch->desc.max_send_wr);
    ch->inject_left = ch->inject_every;
    ch->max_read_sge = ch->desc.max_send_sge;
    if (pd->ctx->attr.max_sge_rd > 0 && (uint32_t)pd->ctx->attr.max_sge_rd < ch->max_read_sge)
        ch->max_read_sge = (uint32_t)pd->ctx->attr.max_sge_rd;
    /* To INIT now, so receives can be posted before the handshake (no RNR at start). */
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = ch->desc.port;
    qa.qp_access_flags = (unsigned)ch->desc.access;
    r = sfv__modify(ch->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
    if (r) {
        struct ibv_qp *const qp = ch->qp;
        sfv__ev_enter(pd->ctx); /* off what an event is compared with before its memory may be another QP's */
        SFV__XSET(ch->qp, NULL);
        sfv__ev_leave(pd->ctx);
        if (ibv_destroy_qp(qp) != 0) ch->qp_spare = qp; /* kept: see above */
    }
    return r;
}

static void sfv__pd_orphan(sfv_channel *ch);
/* A channel (or an SRQ's inner one) a failed create could not take apart, every field it holds
   set: marked unmade, holding pd, left to it (sfv__channel_unmade_free, from sfv_dealloc_pd). */
static void sfv__pd_orphan_unmade(sfv_pd *pd, sfv_channel *ch) {
    ch->pd = pd; /* (not set yet where the create failed early) */
    ch->unmade = true;
    sfv__ref(&pd->refs);
    sfv__pd_orphan(ch);
}
/* A channel from a desc sfv__desc_resolve filled in, and what it learnt of the port. */
static sfv_result sfv__channel_new(sfv_pd *pd, const sfv_channel_desc *resolved, const sfv__port_facts *facts, sfv_channel **out) {
    sfv_channel *ch;
    sfv_result r;
    *out = NULL;
    ch = (sfv_channel *)sfv__handle_new(sizeof *ch, SFV__H_CHANNEL);
    if (!ch) return sfv__fail_verb("calloc", ENOMEM);
    ch->desc = *resolved;
    if (!ch->desc.send_psn) ch->desc.send_psn = sfv__random_psn(ch);
    if (!ch->desc.send_psn) ch->desc.send_psn = 1; /* 0 came out (1 in 2^24): any other will do */
    ch->lid = facts->lid;
    ch->link_layer = facts->link_layer;
    ch->gid = facts->gid;
    r = sfv__ring_init(&ch->sq, ch, ch->desc.max_send_wr);
    if (r) goto free_ch;
    r = sfv__ring_init(&ch->rq, ch, ch->desc.max_recv_wr);
    if (r) goto free_sq;
    if (ch->desc.wait_mode == SFV_WAIT_EVENT) {
        errno = 0;
        ch->cc = ibv_create_comp_channel(pd->ctx->ctx);
        if (!ch->cc) {
            r = sfv__fail_verb("ibv_create_comp_channel", errno);
            goto free_rq;
        }
        if (!sfv__fd_flags(ch->cc->fd, false)) {
            r = sfv__fail_verb("fcntl", errno);
            goto destroy_cc;
        }
    }
    errno = 0;
    ch->cq = ibv_create_cq(pd->ctx->ctx, (int)ch->desc.cq_entries, ch, ch->cc, 0);
    if (!ch->cq) {
        r = sfv__fail_verb("ibv_create_cq", errno);
        goto destroy_cc;
    }
    ch->pd = pd; /* before it is listed: whoever walks the context's channels finds it whole (its reference is taken below) */
    sfv__events_add_channel(pd->ctx, ch); /* before its QP: an event that breaks every channel (DEVICE_FATAL, PORT_ERR) read from now on breaks it */
    r = sfv__qp_make(ch, pd);
    if (r) (void)sfv__spare_destroy(ch); /* a spare's destroy was refused: tried once more, or the CQ below cannot go either */
    if (r) goto unlist;
    if (!sfv__live_add(ch)) {
        r = sfv__fail_verb("malloc", ENOMEM);
        goto destroy_qp;
    }
    sfv__ref(&pd->refs);
    sfv__open_recv(ch, true);
    if (ch->desc.srq) sfv__srq_attach(ch->desc.srq, ch);
    *out = ch;
    return SFV_OK;
destroy_qp:
    sfv__events_remove_channel(pd->ctx, ch); /* (off the list before its QP's memory may be another's) */
    if (ibv_destroy_qp(ch->qp) != 0) goto unmade;
    ch->qp = NULL;
    goto destroy_cq;
unlist:
    sfv__events_remove_channel(pd->ctx, ch);
    if (ch->qp_spare) goto unmade; /* its QP's destroy refused twice: the CQ cannot go either */
destroy_cq: /* a refusal here or below leaves the rest to the PD as well: dropped, the CQ and completion
               channel would hold the device for good (its close refused as busy) */
    if (ibv_destroy_cq(ch->cq) != 0) goto unmade;
    ch->cq = NULL;
destroy_cc:
    if (ch->cc && ibv_destroy_comp_channel(ch->cc) != 0) goto unmade;
free_rq:
    SFV_FREE(ch->rq.slots);
free_sq:
    SFV_FREE(ch->sq.slots);
free_ch:
    sfv__handle_free(ch, SFV__H_CHANNEL);
    return r;
unmade: /* a QP no verb would destroy holds the CQ (or a CQ or completion channel refused): all of it left to the
           PD (sfv__channel_unmade_free) */
    if (ch->desc.srq && (ch->qp || ch->qp_spare)) { /* a QP on the SRQ (it refuses to go while the QP is there): held as a channel holds it */
        sfv__ref(&ch->desc.srq->refs);
        ch->srq = ch->desc.srq;
    }
    sfv__pd_orphan_unmade(pd, ch);
    return r;
}

SAFEVERBS_API sfv_result sfv_create_channel(sfv_pd *pd, const sfv_channel_desc *desc, sfv_channel **out) {
    sfv_channel_desc resolved;
    sfv__port_facts facts;
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    if (pd) SFV__CHECK_LIVE(pd, SFV__H_PD); /* (NULL: sfv__desc_resolve says it) */
    r = sfv__desc_resolve(pd, desc, &resolved, &facts);
    r = r ? r : sfv__channel_new(pd, &resolved, &facts, out);
    if (r == SFV_OK)
        SFV__LOG(SFV_LOG_DEBUG, "%s qp %u: created (port %u, gid index %u, path mtu %u, %u/%u work requests)",
                 sfv_context_name(sfv_pd_context(pd)), (*out)->qp->qp_num, resolved.port, resolved.gid_index,
                 resolved.path_mtu, resolved.max_send_wr, resolved.max_recv_wr);
    return r;
}

static sfv_result sfv__refuse_broken(const sfv_channel *ch, const char *fn);
SAFEVERBS_API sfv_result sfv_channel_endpoint(const sfv_channel *ch, sfv_endpoint *out) {
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    SFV__CHECK_HANDLE(ch, SFV__H_CHANNEL, "channel");
    if (!ch->qp) return sfv__refuse_broken(ch, "sfv_channel_endpoint"); /* no QP number a peer could connect to */
    out->qpn = ch->qp->qp_num;
    out->lid = ch->lid;
    out->psn = ch->desc.send_psn;
    out->mtu = ch->desc.path_mtu;
    out->rd_atomic = (uint8_t)ch->desc.max_rd_atomic;
    out->has_gid = ch->desc.gid_index_set;
    out->gid = ch->gid;
    return SFV_OK;
}

SAFEVERBS_API void sfv_endpoint_encode(const sfv_endpoint *ep, uint8_t out[SFV_ENDPOINT_ENCODED_SIZE]) {
    bool wide_psn;
    if (!out) return;
    memset(out, 0, SFV_ENDPOINT_ENCODED_SIZE);
    if (!ep) return;
    /* A PSN over 24 bits (no handshake takes it) goes out whole, in version 1's layout, whose PSN
       has 4 bytes: decode refuses it. Its low 24 bits alone made another, valid endpoint. */
    wide_psn = ep->psn > 0xFFFFFFu;
    out[0] = 'S'; out[1] = 'E'; out[2] = ep->rd_atomic && !wide_psn ? 2 : 1; out[3] = ep->has_gid ? 1 : 0;
    sfv__put_be(out + 4, ep->qpn, 4);
    sfv__put_be(out + 8, ep->lid, 2);
    sfv__put_be(out + 10, ep->mtu <= 0xFFFFu ? ep->mtu : 0, 2); /* never a valid MTU by truncation */
    out[12] = wide_psn ? (uint8_t)(ep->psn >> 24) : ep->rd_atomic;
    sfv__put_be(out + 13, ep->psn & 0xFFFFFFu, 3);
    if (ep->has_gid) memcpy(out + 16, ep->gid.raw, 16); /* no GID: zero bytes, as decode wants */
}

/* A GID no port has, so no peer's address: all zero (an empty table entry, as sfv_query_gid
   says; no endpoint of ours carries one), or multicast, which a connected queue pair cannot
   have as its destination: ff00::/8, or IPv4 224.0.0.0/4; or the IPv4 0.0.0.0 ("any"). */
static bool sfv__gid_no_port_has(const sfv_gid *g) {
    static const sfv_gid zero = {{0}};
    if (memcmp(g, &zero, sizeof zero) == 0 || g->raw[0] == 0xff) return true;
    return sfv_gid_is_ipv4(g) && ((g->raw[12] & 0xf0) == 0xe0 || (g->raw[12] | g->raw[13] | g->raw[14] | g->raw[15]) == 0);
}

SAFEVERBS_API sfv_result sfv_endpoint_decode(const uint8_t *in, size_t size, sfv_endpoint *out) {
    sfv_endpoint ep;
    SFV__CHECK_ARG(out, "out");
    memset(out, 0, sizeof *out);
    memset(&ep, 0, sizeof ep);
    if (!in || size < SFV_ENDPOINT_ENCODED_SIZE) return sfv__bad_encoding("sfv_endpoint_decode", "input too short");
    if (in[0] != 'S' || in[1] != 'E') return sfv__bad_encoding("sfv_endpoint_decode", "bad magic");
    if (in[2] != 1 && in[2] != 2) return sfv__bad_encoding("sfv_endpoint_decode", "unknown version");
    if (in[3] & ~1u) return sfv__bad_encoding("sfv_endpoint_decode", "unknown flags");
    ep.has_gid = (in[3] & 1) != 0;
    ep.qpn = (uint32_t)sfv__get_be(in + 4, 4);
    ep.lid = (uint16_t)sfv__get_be(in + 8, 2);
    ep.mtu = (uint32_t)sfv__get_be(in + 10, 2);
    ep.psn = (uint32_t)sfv__get_be(in + 13, 3);
    if (in[2] == 1 && in[12] != 0) return sfv__bad_encoding("sfv_endpoint_decode", "PSN over 24 bits");
    if (in[2] == 2 && in[12] == 0) return sfv__bad_encoding("sfv_endpoint_decode", "read depth 0");
    ep.rd_atomic = in[2] == 2 ? in[12] : 0;
    memcpy(ep.gid.raw, in + 16, 16);
    if (ep.qpn > 0xFFFFFFu || ep.qpn == 0) return sfv__bad_encoding("sfv_endpoint_decode", "QPN is not a 24-bit QP number");
    if (!sfv__mtu_enum(ep.mtu)) return sfv__bad_encoding("sfv_endpoint_decode", "MTU is not 256 .. 4096");
    if (!ep.has_gid) {
        static const sfv_gid zero = {{0}};
        if (memcmp(&ep.gid, &zero, sizeof zero) != 0) return sfv__bad_encoding("sfv_endpoint_decode", "GID bytes without the GID flag");
    } else if (sfv__gid_no_port_has(&ep.gid)) {
        return sfv__bad_encoding("sfv_endpoint_decode", "a GID no port has (all zero, multicast, or the IPv4 0.0.0.0)");
    }
    *out = ep;
    return SFV_OK;
}

static void sfv__break(sfv_channel *ch);

/* Whether ch can be connected to peer: every refusal of the handshake that comes before a verb. */
static sfv_result sfv__handshake_check(const sfv_channel *ch, const sfv_endpoint *peer) {
    static const char fn[] = "sfv_channel_handshake";
    if (ch->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "the channel is already connected");
    if (SFV__XLOAD(ch->broken) || !ch->qp) return sfv__refuse_broken(ch, fn);
    if (peer->qpn == 0 || peer->qpn > 0xFFFFFFu) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "peer QPN %u is not 24 bits", (unsigned)peer->qpn);
    if (peer->psn > 0xFFFFFFu) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "peer PSN %u is over 24 bits", (unsigned)peer->psn);
    if (!sfv__mtu_enum(peer->mtu)) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "peer MTU %u is not 256 .. 4096", (unsigned)peer->mtu);
    if (peer->has_gid && sfv__gid_no_port_has(&peer->gid))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "the peer's GID %02x%02x..%02x%02x is one no port has (all zero, multicast, or the IPv4 "
                         "0.0.0.0)", peer->gid.raw[0], peer->gid.raw[1], peer->gid.raw[14], peer->gid.raw[15]);
    if (ch->link_layer == SFV_LINK_LAYER_ETHERNET && !(peer->has_gid && ch->desc.gid_index_set))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "RoCE needs a GID on both sides (the peer's endpoint has none)");
    if (peer->has_gid && ch->desc.gid_index_set && sfv_gid_is_ipv4(&peer->gid) != sfv_gid_is_ipv4(&ch->gid))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn,
                         "the GIDs are of different kinds: this side's (index %u) is %s, the peer's is %s; "
                         "both sides must use the same GID type (set gid_index)", (unsigned)ch->desc.gid_index,
                         sfv_gid_is_ipv4(&ch->gid) ? "an IPv4 address" : "IPv6", sfv_gid_is_ipv4(&peer->gid) ? "an IPv4 address" : "IPv6");
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_channel_handshake(sfv_channel *ch, const sfv_endpoint *peer) {
    struct ibv_qp_attr qa;
    sfv_result r;
    uint32_t mtu;
    SFV__CHECK_HANDLE(ch, SFV__H_CHANNEL, "channel");
    SFV__CHECK_ARG(peer, "peer");
    if ((r = sfv__handshake_check(ch, peer)) != SFV_OK) return r;
    mtu = peer->mtu < ch->desc.path_mtu ? peer->mtu : ch->desc.path_mtu;

    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = sfv__mtu_enum(mtu);
    qa.dest_qp_num = peer->qpn;
    qa.rq_psn = peer->psn;
    qa.max_dest_rd_atomic = (uint8_t)ch->desc.max_rd_atomic;
    qa.min_rnr_timer = ch->desc.min_rnr_timer;
    qa.ah_attr.dlid = peer->lid;
    qa.ah_attr.sl = ch->desc.service_level;
    qa.ah_attr.src_path_bits = 0;
    qa.ah_attr.port_num = ch->desc.port;
    if (peer->has_gid && ch->desc.gid_index_set) {
        qa.ah_attr.is_global = 1;
        memcpy(qa.ah_attr.grh.dgid.raw, peer->gid.raw, 16);
        qa.ah_attr.grh.sgid_index = ch->desc.gid_index;
        qa.ah_attr.grh.hop_limit = 64;
        qa.ah_attr.grh.traffic_class = ch->desc.traffic_class;
        qa.ah_attr.grh.flow_label = 0;
    }
    r = sfv__modify(ch->qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
    if (r) return r;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = ch->desc.ack_timeout;
    qa.retry_cnt = ch->desc.ack_retries;
    qa.rnr_retry = ch->desc.rnr_retries;
    qa.sq_psn = ch->desc.send_psn;
    /* never more reads in flight than the peer answers (an old peer does not say: then ours) */
    qa.max_rd_atomic = (uint8_t)(peer->rd_atomic && peer->rd_atomic < ch->desc.max_rd_atomic ? peer->rd_atomic
                                                                                              : ch->desc.max_rd_atomic);
    r = sfv__modify(ch->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                    IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
    if (r) { /* stuck in RTR: the handshake cannot be redone */
        const sfv_error why = sfv__last;
        sfv__break(ch);
        return sfv__fail(SFV_ERR_BROKEN, why.errnum, why.verb, "the channel is broken (sfv_channel_reset recovers it, or destroy it): %s", why.message);
    }
    ch->connected = true;
    sfv__open_send(ch);
    SFV__LOG(SFV_LOG_INFO, "%s qp %u: connected to qp %u (lid %u, %s gid %02x%02x..%02x%02x, mtu %u, read depth %u)",
             sfv_context_name(sfv_pd_context(ch->pd)), ch->qp->qp_num, peer->qpn, peer->lid, peer->has_gid ? "with" : "no",
             peer->gid.raw[0], peer->gid.raw[1], peer->gid.raw[14], peer->gid.raw[15], mtu, qa.max_rd_atomic);
    return SFV_OK;
}

SAFEVERBS_API sfv_pd *sfv_channel_pd(const sfv_channel *ch) { return ch ? ch->pd : NULL; }
SAFEVERBS_API const sfv_channel_desc *sfv_channel_get_desc(const sfv_channel *ch) { return ch ? &ch->desc : NULL; }
SAFEVERBS_API int sfv_channel_fd(const sfv_channel *ch) { return ch && ch->cc ? ch->cc->fd : -1; }
SAFEVERBS_API size_t sfv_channel_outstanding(const sfv_channel *ch) {
    return ch ? (size_t)((ch->sq.head - ch->sq.tail) + (ch->rq.head - ch->rq.tail)) : 0;
}

/* >>impl inflight ---------------------------------------------------------------------------- */
/* SFV_TRACK_INFLIGHT: every element posted is remembered, from its post until its completion is
   consumed (a pending handle, a scope, a many-peer call) or its channel is destroyed, in one of
   two interval trees of the process: memory the NIC writes (scatter: receives, reads, an
   atomic's old value) and memory it reads (gather: sends, writes; not inline sends, whose bytes
   the NIC took at the post). A scatter element overlapping either tree, or a gather element
   overlapping the scatter tree, is a data race on the buffer: SFV_ASSERT, after a message that
   names both posts. Each tree is a treap ordered by start address, each node carrying the
   largest end in its subtree, so an overlap query, an insert and a removal are O(log n) in the
   elements in flight. The nodes live after each ring's slots (slots x max elements, allocated
   with them at channel creation): the data path allocates nothing. One process-wide lock.
   Measured (callgrind, one 64 B send + receive in loopback on rxe, -O2, SFV_DEBUG build, Linux
   6.1 guest; `make bench` stage 5, or tools/inflight_cost.sh): 1,879 instructions per
   iteration with tracking, 834 with SFV_TRACK_INFLIGHT 0 (2.25x; the run in bench/RESULTS.md).
   Under AddressSanitizer, scatter memory is poisoned from post until consumed, or until its QP is
   destroyed (a reset, a destroy: the NIC touches none of it after, handle or not); under valgrind
   memcheck it is NOACCESS, and at consumption the bytes the completion says were written are
   DEFINED (a receive's byte_len, a read's length, an atomic's 8 bytes), the rest UNDEFINED (a
   failed or flushed work request may have written any part of its elements), except after a
   success on an element whose bytes were all DEFINED when posted: the NIC left the rest as they
   were, so all of it is DEFINED again (a program that checks a receive's buffer past byte_len is
   untouched reads its own bytes; one that reads there bytes it never wrote is still told). ASan tracks 8-byte
   granules: an element that starts or ends inside a granule shared with other memory poisons
   only the granules it covers whole, so up to 7 bytes at each unaligned end go unreported.
   An element of a DMA-BUF MR holds an iova, an address in that MR's own space, not the host's:
   it overlaps only elements of the same MR (its lkey, on its verbs PD), and nothing of it is
   poisoned (the host bytes at that number, if any, are someone else's). So the elements of two
   DMA-BUF MRs over the same buffer are not compared. Intervals keep their last byte, not their
   end: an iova range may end at 2^64. */
#if SFV_TRACK_INFLIGHT
#if SFV__ASAN
#ifdef __cplusplus
extern "C" {
#endif
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
void *__asan_region_is_poisoned(void *beg, size_t size);
#ifdef __cplusplus
}
#endif
#endif

typedef struct sfv__iv {
    uint64_t lo, hi;          /* [lo, hi]: the element's bytes (hi its last: one ending at 2^64 has no end below it) */
    uint64_t max_hi;          /* the largest hi in this subtree */
    struct sfv__iv *l, *r;
    const sfv__ring *q;       /* the ring and place of its work request */
    uint64_t seq;
    uint32_t prio;
    uint32_t lkey;
    uint8_t op;               /* sfv_wc_opcode */
    uint8_t scatter;          /* the NIC writes it */
    uint8_t in_tree;
    uint8_t poisoned;         /* ASan: its bytes were all addressable, and this library poisoned them */
    uint8_t marked;           /* its bytes were handed to the NIC (sfv__iv_poison): given back when it goes */
    uint8_t dmabuf;           /* its lkey is a DMA-BUF MR's: lo and hi are iovas */
    uint8_t defined;          /* valgrind: its bytes were all DEFINED when posted (a success gives them back so) */
} sfv__iv;

static bool sfv__iv_lock;
static sfv__iv *sfv__iv_root[2];  /* [0]: gather, [1]: scatter */
static sfv_mr *sfv__iv_dmabufs;   /* the DMA-BUF MRs registered (under sfv__iv_lock) */
static uint32_t sfv__iv_seed = 0x9e3779b9u;
/* The next treap priority (a linear congruential generator's step). */
SFV__WRAPS static uint32_t sfv__iv_prio(void) { return sfv__iv_seed = sfv__iv_seed * 1664525u + 1013904223u; }

static void sfv__iv_enter(void) { while (__atomic_test_and_set(&sfv__iv_lock, __ATOMIC_ACQUIRE)) sched_yield(); }
static void sfv__iv_leave(void) { __atomic_clear(&sfv__iv_lock, __ATOMIC_RELEASE); }

static size_t sfv__inflight_bytes(const sfv_channel_desc *d, bool recv) {
    return (size_t)(recv ? d->max_recv_sge : d->max_send_sge) * sizeof(sfv__iv);
}
static void sfv__inflight_ring_init(sfv__ring *q, const sfv_channel_desc *d, bool recv, uint64_t slots) {
    q->iv = (sfv__iv *)(void *)(q->slots + slots);
    q->iv_per = recv ? d->max_recv_sge : d->max_send_sge;
}

static bool sfv__iv_less(const sfv__iv *a, const sfv__iv *b) {
    return a->lo < b->lo || (a->lo == b->lo && (uintptr_t)a < (uintptr_t)b); /* nodes of different rings: compare as integers */
}
static void sfv__iv_fix(sfv__iv *t) {
    uint64_t m = t->hi;
    if (t->l && t->l->max_hi > m) m = t->l->max_hi;
    if (t->r && t->r->max_hi > m) m = t->r->max_hi;
    t->max_hi = m;
}
/* Splits t into the nodes before n and the rest. */
static void sfv__iv_split(sfv__iv *t, const sfv__iv *n, sfv__iv **l, sfv__iv **r) {
    if (!t) { *l = *r = NULL; return; }
    if (sfv__iv_less(t, n)) { sfv__iv_split(t->r, n, &t->r, r); *l = t; }
    else { sfv__iv_split(t->l, n, l, &t->l); *r = t; }
    sfv__iv_fix(t);
}
static sfv__iv *sfv__iv_merge(sfv__iv *a, sfv__iv *b) {
    if (!a) return b;
    if (!b) return a;
    if (a->prio > b->prio) { a->r = sfv__iv_merge(a->r, b); sfv__iv_fix(a); return a; }
    b->l = sfv__iv_merge(a, b->l);
    sfv__iv_fix(b);
    return b;
}
static sfv__iv *sfv__iv_insert(sfv__iv *t, sfv__iv *n) {
    if (!t) return n;
    if (n->prio > t->prio) { sfv__iv_split(t, n, &n->l, &n->r); sfv__iv_fix(n); return n; }
    if (sfv__iv_less(n, t)) t->l = sfv__iv_insert(t->l, n); else t->r = sfv__iv_insert(t->r, n);
    sfv__iv_fix(t);
    return t;
}
static sfv__iv *sfv__iv_remove(sfv__iv *t, const sfv__iv *n) {
    if (!t) return NULL; /* cannot happen: n is in t */
    if (t == n) return sfv__iv_merge(t->l, t->r);
    if (sfv__iv_less(n, t)) t->l = sfv__iv_remove(t->l, n); else t->r = sfv__iv_remove(t->r, n);
    sfv__iv_fix(t);
    return t;
}
/* The verbs PD of a node's work. */
static const struct ibv_pd *sfv__iv_pd(const sfv__iv *t) { return t->q && t->q->ch ? t->q->ch->pd->pd : NULL; }
/* Whether node t may touch the bytes of `like` (NULL: of MR mr): one of mr's elements (its lkey,
   on a channel of its verbs PD, whichever sfv_pd wraps it: lkeys of other devices may be equal);
   host memory against host memory; a DMA-BUF MR's iovas only against the same MR's. */
static bool sfv__iv_same_space(const sfv__iv *t, const sfv__iv *like, const sfv_mr *mr) {
    if (mr) return t->lkey == mr->mr->lkey && sfv__iv_pd(t) == mr->pd->pd;
    return t->dmabuf == like->dmabuf && (!like->dmabuf || (t->lkey == like->lkey && sfv__iv_pd(t) == sfv__iv_pd(like)));
}
/* The first node that overlaps [lo, hi] in the space of `like` or of mr (sfv__iv_same_space). */
static const sfv__iv *sfv__iv_find(const sfv__iv *t, uint64_t lo, uint64_t hi, const sfv__iv *like, const sfv_mr *mr) {
    while (t && t->max_hi >= lo) {
        const sfv__iv *f = sfv__iv_find(t->l, lo, hi, like, mr);
        if (f) return f;
        if (t->lo > hi) return NULL; /* everything right of here starts later */
        if (t->hi >= lo && sfv__iv_same_space(t, like, mr)) return t;
        t = t->r;
    }
    return NULL;
}

static const char *sfv__iv_op(uint8_t op) {
    switch (op) {
    case SFV_WC_OP_SEND: return "send";
    case SFV_WC_OP_RECV: return "receive";
    case SFV_WC_OP_WRITE: return "RDMA write";
    case SFV_WC_OP_READ: return "RDMA read";
    case SFV_WC_OP_COMP_SWAP: return "atomic compare-and-swap";
    case SFV_WC_OP_FETCH_ADD: return "atomic fetch-and-add";
    default: return "work request";
    }
}
static uint8_t sfv__iv_send_op(const struct ibv_send_wr *w) {
    switch (w->opcode) {
    case IBV_WR_RDMA_READ: return SFV_WC_OP_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return SFV_WC_OP_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return SFV_WC_OP_FETCH_ADD;
    case IBV_WR_SEND: case IBV_WR_SEND_WITH_IMM: return SFV_WC_OP_SEND;
    default: return SFV_WC_OP_WRITE;
    }
}

#if SFV__VALGRIND
/* Whether valgrind holds every byte of [p, p + len) DEFINED (false outside valgrind). */
static bool sfv__vg_defined(const unsigned char *p, size_t len) {
    unsigned char bits[256];
    size_t at, i, n;
    if (!RUNNING_ON_VALGRIND) return false;
    for (at = 0; at < len; at += n) {
        n = len - at < sizeof bits ? len - at : sizeof bits;
        if (VALGRIND_GET_VBITS(p + at, bits, n) != 1) return false;
        for (i = 0; i < n; i++)
            if (bits[i]) return false; /* (a set bit: undefined) */
    }
    return true;
}
#endif
static void sfv__iv_poison(sfv__iv *n) {
    n->marked = 1;
#if SFV__ASAN
    /* Only memory the program may use: an unchecked element can name any address (outside ASan's
       memory, ASan stops the process) or ASan's own redzones (unpoisoning them later would hide
       the program's overflows). Such an element's bytes are left as ASan keeps them. */
    n->poisoned = __asan_region_is_poisoned((void *)(uintptr_t)n->lo, (size_t)(n->hi - n->lo + 1)) == NULL;
    if (n->poisoned) __asan_poison_memory_region((const void *)(uintptr_t)n->lo, (size_t)(n->hi - n->lo + 1));
#endif
#if SFV__VALGRIND
    n->defined = sfv__vg_defined((const unsigned char *)(uintptr_t)n->lo, (size_t)(n->hi - n->lo + 1));
    (void)VALGRIND_MAKE_MEM_NOACCESS((const void *)(uintptr_t)n->lo, (size_t)(n->hi - n->lo + 1));
#endif
    (void)n;
}
/* Gives n's bytes back: `written` of them were written by the NIC (defined), the rest not, unless
   the NIC left the rest as it was (ok: a success) on bytes that were all defined when posted: a
   program that reads them (a receive's buffer past byte_len, checked untouched) reads its own
   bytes. */
static void sfv__iv_unpoison(const sfv__iv *n, uint64_t written, bool ok) {
    const size_t len = (size_t)(n->hi - n->lo + 1);
    if (written > len) written = len;
#if SFV__ASAN
    if (n->poisoned) __asan_unpoison_memory_region((const void *)(uintptr_t)n->lo, len);
#endif
#if SFV__VALGRIND
    if (ok && n->defined) written = len;
    (void)VALGRIND_MAKE_MEM_UNDEFINED((const void *)(uintptr_t)n->lo, len);
    if (written) (void)VALGRIND_MAKE_MEM_DEFINED((const void *)(uintptr_t)n->lo, (size_t)written);
#endif
    (void)len; (void)written; (void)ok;
}

/* Takes node n out of its tree (the lock is held); its memory back to the program. */
static void sfv__iv_out(sfv__iv *n, uint64_t written, bool ok) {
    sfv__iv_root[n->scatter] = sfv__iv_remove(sfv__iv_root[n->scatter], n);
    n->l = n->r = NULL;
    n->in_tree = 0;
    if (n->marked) sfv__iv_unpoison(n, written, ok);
}

SFV__SLOW void sfv__iv_race(const sfv__iv *n, const sfv__iv *f) {
    fprintf(stderr, "safeverbs: data race on a buffer the NIC owns: a %s's %s element [0x%llx, 0x%llx] (%llu bytes) overlaps "
                    "the %s element [0x%llx, 0x%llx] of a %s posted on channel %p, in flight until its completion is consumed\n",
            sfv__iv_op(n->op), n->scatter ? "scatter" : "gather", (unsigned long long)n->lo, (unsigned long long)n->hi,
            (unsigned long long)(n->hi - n->lo + 1), f->scatter ? "scatter" : "gather", (unsigned long long)f->lo,
            (unsigned long long)f->hi, sfv__iv_op(f->op), (void *)(f->q ? f->q->ch : NULL));
}

/* Records the elements of one work request into its slot's nodes; false (after the message) on
   a race, with nothing of this work request recorded. */
/* Node n for element e of work request wr_id (an inject's included); false for an element that
   covers nothing (empty, or wrapping: the verb refuses it). */
static bool sfv__iv_node(sfv__iv *n, sfv__ring *q, uint64_t wr_id, uint8_t op, bool scatter, const struct ibv_sge *e) {
    const sfv_mr *m;
    if (!e->length || e->length - 1 > UINT64_MAX - e->addr) return false; /* (ending at 2^64 is no wrap) */
    memset(n, 0, sizeof *n);
    n->lo = e->addr;
    n->hi = e->addr + (e->length - 1);
    n->max_hi = n->hi;
    for (m = sfv__iv_dmabufs; m; m = m->iv_next) /* (none but in a program with DMA-BUF MRs) */
        if (m->mr->lkey == e->lkey && q->ch && m->pd->pd == q->ch->pd->pd) n->dmabuf = 1;
    n->q = q;
    n->seq = (wr_id & ~SFV__WRID_INJECT) >> 1;
    n->lkey = e->lkey;
    n->op = op;
    n->scatter = scatter;
    return true;
}
static bool sfv__iv_add_wr(sfv__ring *q, uint64_t wr_id, uint8_t op, bool scatter, const struct ibv_sge *sg, int num) {
    sfv__iv *nodes = q->iv + ((wr_id >> 1) & q->mask) * q->iv_per;
    int k, used = 0;
    for (k = 0; k < num; k++) {
        sfv__iv *n = &nodes[used];
        const sfv__iv *f;
        if (!sfv__iv_node(n, q, wr_id, op, scatter, &sg[k])) continue;
        n->prio = sfv__iv_prio();
        f = sfv__iv_find(sfv__iv_root[1], n->lo, n->hi, n, NULL);
        if (!f && scatter) f = sfv__iv_find(sfv__iv_root[0], n->lo, n->hi, n, NULL);
        if (f) {
            sfv__iv_race(n, f);
            while (used > 0) sfv__iv_out(&nodes[--used], 0, false);
            return false;
        }
        sfv__iv_root[scatter] = sfv__iv_insert(sfv__iv_root[scatter], n);
        n->in_tree = 1; /* (its bytes handed over once the verb takes it: sfv__inflight_posted) */
        used++;
    }
    if (used < (int)q->iv_per) nodes[used].in_tree = 0; /* where the slot's nodes end */
    return true;
}
/* An inline gather (a send's, an inject's): copied at the post, so never in flight, but not from
   memory in flight as scatter either (the CPU would copy bytes the NIC is writing). */
static bool sfv__iv_check_gather(sfv__ring *q, uint64_t wr_id, uint8_t op, const struct ibv_sge *sg, int num) {
    int k;
    for (k = 0; k < num; k++) {
        sfv__iv n;
        const sfv__iv *f;
        if (!sfv__iv_node(&n, q, wr_id, op, false, &sg[k])) continue;
        if ((f = sfv__iv_find(sfv__iv_root[1], n.lo, n.hi, &n, NULL)) != NULL) {
            sfv__iv_race(&n, f);
            return false;
        }
    }
    return true;
}
/* Forgets the nodes of the slot behind wr_id; `written`: bytes the NIC wrote, in element order;
   ok: the rest is untouched (sfv__iv_intact). */
static void sfv__iv_drop_slot(sfv__ring *q, uint64_t seq, uint64_t written, bool ok) {
    sfv__iv *nodes = q->iv + (seq & q->mask) * q->iv_per;
    uint32_t k;
    for (k = 0; k < q->iv_per && nodes[k].in_tree && nodes[k].seq == seq; k++) {
        const uint64_t len = nodes[k].hi - nodes[k].lo + 1;
        sfv__iv_out(&nodes[k], written, ok);
        written = written > len ? written - len : 0;
    }
}

static bool sfv__inflight_post(sfv__ring *q, const struct ibv_send_wr *s, const struct ibv_recv_wr *rw) {
    const struct ibv_send_wr *const s0 = s;
    const struct ibv_recv_wr *const rw0 = rw;
    bool ok = true;
    sfv__iv_enter();
    for (; ok && s; s = s->next) {
        const uint8_t op = sfv__iv_send_op(s);
        const bool scatter = op == SFV_WC_OP_READ || op == SFV_WC_OP_COMP_SWAP || op == SFV_WC_OP_FETCH_ADD;
        if (!scatter && (s->send_flags & IBV_SEND_INLINE)) { /* the NIC has the bytes once posted: checked, not kept */
            if (q->iv_per) q->iv[((s->wr_id >> 1) & q->mask) * q->iv_per].in_tree = 0;
            ok = sfv__iv_check_gather(q, s->wr_id, op, s->sg_list, s->num_sge);
            continue;
        }
        ok = sfv__iv_add_wr(q, s->wr_id, op, scatter, s->sg_list, s->num_sge);
    }
    for (; ok && rw; rw = rw->next) ok = sfv__iv_add_wr(q, rw->wr_id, SFV_WC_OP_RECV, true, rw->sg_list, rw->num_sge);
    sfv__iv_leave();
    if (!ok) sfv__inflight_posted(q, s0, rw0, 0); /* a race in a list: none of it was posted */
    return ok;
}
/* The scatter elements of the slot behind seq are the NIC's now. (Not before the verb takes the
   work: a post it refuses leaves its memory as the program had it, valgrind's definedness too.) */
static void sfv__iv_mark_slot(sfv__ring *q, uint64_t seq) {
    sfv__iv *nodes = q->iv + (seq & q->mask) * q->iv_per;
    uint32_t k;
    for (k = 0; k < q->iv_per && nodes[k].in_tree && nodes[k].seq == seq; k++)
        if (nodes[k].scatter && !nodes[k].dmabuf) sfv__iv_poison(&nodes[k]); /* (an iova is no host memory) */
}
static void sfv__inflight_posted(sfv__ring *q, const struct ibv_send_wr *s, const struct ibv_recv_wr *rw, size_t posted) {
    size_t i;
    sfv__iv_enter();
    for (i = 0; s; s = s->next, i++) {
        const uint64_t seq = (s->wr_id & ~SFV__WRID_INJECT) >> 1;
        if (i >= posted) sfv__iv_drop_slot(q, seq, 0, false);
        else sfv__iv_mark_slot(q, seq);
    }
    for (i = 0; rw; rw = rw->next, i++)
        if (i >= posted) sfv__iv_drop_slot(q, rw->wr_id >> 1, 0, false);
        else sfv__iv_mark_slot(q, rw->wr_id >> 1);
    sfv__iv_leave();
}
/* Whether the NIC left what the completion of slot s does not say it wrote as it was: a success
   (it wrote what it says). Not a flush: the work a NIC was running when its QP failed completes
   flushed too (rxe's, mlx5's), maybe with part of its bytes written. */
static bool sfv__iv_intact(const sfv__slot *s) { return s->status == IBV_WC_SUCCESS; }
/* What the completion of slot s says the NIC wrote into its scatter elements. */
static uint64_t sfv__iv_written(const sfv__slot *s) {
    if (s->status != IBV_WC_SUCCESS) return 0;
    /* (a RECV_IMM is the receive of a write with immediate: its byte_len is what the write put in
       the region; it writes none of the receive's own elements) */
    if (s->op == SFV_WC_OP_RECV || s->op == SFV_WC_OP_READ) return s->byte_len;
    if (s->op == SFV_WC_OP_COMP_SWAP || s->op == SFV_WC_OP_FETCH_ADD) return 8;
    return 0;
}
static void sfv__inflight_done(sfv__ring *q, uint64_t first, uint64_t last) {
    uint64_t seq;
    sfv__iv_enter();
    for (seq = first; seq <= last; seq++) {
        const sfv__slot *s = &q->slots[seq & q->mask];
        sfv__iv_drop_slot(q, seq, sfv__iv_written(s), sfv__iv_intact(s));
    }
    sfv__iv_leave();
}
static void sfv__inflight_forget(sfv__ring *q) {
    uint64_t seq;
    sfv__iv_enter();
    for (seq = q->tail; seq < q->head; seq++) {
        const sfv__slot *s = &q->slots[seq & q->mask];
        if (s->state != SFV__SLOT_FREE && s->seq == seq) {
            const bool done = sfv__slot_done(q, s, seq);
            sfv__iv_drop_slot(q, seq, done ? sfv__iv_written(s) : 0, done && sfv__iv_intact(s));
        }
    }
    sfv__iv_leave();
}
/* Whether work in flight uses mr (its lkey, inside its range); says which on stderr. */
static bool sfv__inflight_mr_busy(const sfv_mr *mr) {
    const sfv__iv *f;
    uint64_t lo, hi;
    if (!mr->length) return false;
    lo = mr->addr; /* (a DMA-BUF MR's: its iova; its last byte may be 2^64 - 1) */
    hi = lo + (mr->length - 1);
    sfv__iv_enter();
    f = sfv__iv_find(sfv__iv_root[1], lo, hi, NULL, mr);
    if (!f) f = sfv__iv_find(sfv__iv_root[0], lo, hi, NULL, mr);
    if (f)
        fprintf(stderr, "safeverbs: sfv_dereg_mr of the MR [0x%llx, 0x%llx] while work in flight uses it: the %s element "
                        "[0x%llx, 0x%llx] of a %s posted on channel %p (consume its completion, or destroy the channel, first)\n",
                (unsigned long long)lo, (unsigned long long)hi, f->scatter ? "scatter" : "gather", (unsigned long long)f->lo,
                (unsigned long long)f->hi, sfv__iv_op(f->op), (void *)(f->q ? f->q->ch : NULL));
    sfv__iv_leave();
    return f != NULL;
}
static void sfv__pending_clear(const sfv_channel *ch, sfv_pending *pending, size_t count);
SFV__SLOW sfv_result sfv__inflight_refused(const sfv__ring *q, sfv_pending *pending, size_t count) {
    SFV_ASSERT(0 && "an element overlaps memory the NIC owns (a data race: see the message above)");
    sfv__pending_clear(q->ch, pending, count);
    return sfv__fail(SFV_ERR_INVALID, EBUSY, "post", "an element overlaps memory in flight (a data race on the buffer)");
}
/* Adds a DMA-BUF MR to the list sfv__iv_node reads, or takes one out (any MR: not there, nothing);
   true if it is listed now (added), or was (taken out). */
static bool sfv__inflight_dmabuf(sfv_mr *mr, bool registered) {
    sfv_mr **pp;
    bool listed = registered;
    sfv__iv_enter();
    if (registered) {
        mr->iv_next = sfv__iv_dmabufs;
        sfv__iv_dmabufs = mr;
    } else {
        for (pp = &sfv__iv_dmabufs; *pp; pp = &(*pp)->iv_next)
            if (*pp == mr) {
                *pp = mr->iv_next;
                listed = true;
                break;
            }
    }
    sfv__iv_leave();
    return listed;
}
SFV__SLOW sfv_result sfv__inflight_dereg_refused(void) {
    SFV_ASSERT(0 && "sfv_dereg_mr while work in flight uses the MR (see the message above)");
    return sfv__fail(SFV_ERR_INVALID, EBUSY, "sfv_dereg_mr", "work in flight uses the MR: consume its completions (or destroy its channel), then deregister");
}
#endif

/* >>impl completions ------------------------------------------------------------------------ */
/* After an error completion, a flush or a partial post: nothing more may be posted. */
/* Broken, without a word (under ev_lock, where the log fn may not call safeverbs), and with one. */
static void sfv__mark_broken(sfv_channel *ch) {
    SFV__XSET(ch->broken, true);
    sfv__set_can(ch, false, false);
}
static void sfv__break(sfv_channel *ch) {
    if (!SFV__XLOAD(ch->broken)) SFV__LOG(SFV_LOG_INFO, "%s qp %u: broken (no more work; destroy it)", sfv_context_name(sfv_pd_context(ch->pd)), ch->qp ? ch->qp->qp_num : 0);
    sfv__mark_broken(ch);
}

static sfv__ring *sfv__ring_of(sfv_channel *ch, uint64_t wr_id) { return (wr_id & 1) ? &ch->rq : &ch->sq; }

/* Marks done a slot that gets no completion of its own (unsignaled, or never to complete
   because its queue pair is gone): a success, or flushed. */
static void sfv__finish_quiet(sfv__slot *s, bool flushed) {
    s->status = (uint8_t)(flushed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS);
    s->vendor_err = 0;
    if (flushed) s->byte_len = 0; /* (no length of an earlier work request in its place: an SRQ's failed receive keeps a QP number there) */
    s->state = SFV__SLOT_DONE;
}

/* What a channel can find out about its first failure beyond the status, which providers use
   loosely: rxe reports a link that went down and a receive smaller than the message both as
   LOC_QP_OP_ERR, and rxe in Linux 6.12 flushes a send or write whose element lies outside its MR
   with no completion that says so. */
enum { SFV__CAUSE_NONE = 0, SFV__CAUSE_PORT_DOWN, SFV__CAUSE_RECV_TOO_SMALL, SFV__CAUSE_UNEXPLAINED_FLUSH, SFV__CAUSE_RECV_FLUSH,
       SFV__CAUSE_FATAL_EVENT, /* a QP, CQ or device error the device reported as an event (>>events) */
       SFV__CAUSE_PEER_GONE, /* the peer disconnected: its connection manager said so (>>impl rdmacm) */
       SFV__CAUSE_DEVICE_GONE, /* the connection manager said DEVICE_REMOVAL (>>impl rdmacm) */
       SFV__CAUSE_FENCE_UNPOSTED /* a scope's fence could not be posted (sfv__scope_fence) */ };

static bool sfv__port_active(const sfv_channel *ch) {
    struct ibv_port_attr pa;
    return ibv_query_port(ch->pd->ctx->ctx, ch->desc.port, &pa) != 0 || pa.state == IBV_PORT_ACTIVE;
}

/* The class of a failed completion. The channel's first failure is looked at once (a port query,
   on this slow path only); the flushes that follow it take their class from it. */
/* The class of a flush on a channel whose first failure's cause is known (NONE: the status's own). */
static sfv_work_error_class sfv__flush_class(const sfv_channel *ch) {
    switch (ch->first_cause) {
    case SFV__CAUSE_PORT_DOWN: return SFV_WORK_ERROR_LOCAL_RESOURCE;
    case SFV__CAUSE_UNEXPLAINED_FLUSH: return SFV_WORK_ERROR_LOCAL_PROGRAMMING;
    case SFV__CAUSE_FATAL_EVENT: return SFV_WORK_ERROR_FATAL;
    case SFV__CAUSE_PEER_GONE: return SFV_WORK_ERROR_TRANSPORT;
    case SFV__CAUSE_DEVICE_GONE: return SFV_WORK_ERROR_FATAL;
    default: return SFV_WORK_ERROR_NONE;
    }
}
SFV__SLOW void sfv__srq_read_failures(sfv_channel *ch);
SFV__SLOW sfv_work_error_class sfv__failure_class(sfv_channel *ch, uint8_t op, enum ibv_wc_status status) {
    const bool flush = status == IBV_WC_WR_FLUSH_ERR;
    sfv_work_error_class cls;
    if (!ch->first_status && flush && op != SFV_WC_OP_RECV && ch->srq && !ch->aborted && !ch->first_cause)
        sfv__srq_read_failures(ch); /* a receive that failed on the SRQ's CQ may be why: it is the first failure then */
    if (!ch->first_status) {
        ch->first_status = sfv__status_byte(status);
        ch->first_op = op;
        if (ch->first_cause) { /* an event said it first (>>events) */
        } else if ((status == IBV_WC_LOC_QP_OP_ERR || (flush && !ch->aborted)) &&
                   (sfv__async_cause(ch) == SFV__CAUSE_PORT_DOWN || !sfv__port_active(ch)))
            ch->first_cause = SFV__CAUSE_PORT_DOWN; /* (a PORT_ERR read already says so, though the port be back by now) */
        else if (flush && !ch->aborted && sfv__async_cause(ch))
            ch->first_cause = sfv__async_cause(ch); /* the device flushed the QP itself after an event read already (a QP_FATAL
                                                        moves it to the error state, and the NIC flushes its work): the event is why */
        else if (status == IBV_WC_LOC_QP_OP_ERR && op == SFV_WC_OP_RECV)
            ch->first_cause = SFV__CAUSE_RECV_TOO_SMALL;
        else if (flush && !ch->aborted && op != SFV_WC_OP_RECV)
            ch->first_cause = SFV__CAUSE_UNEXPLAINED_FLUSH; /* a send or write: see the hint */
        else if (flush && !ch->aborted)
            ch->first_cause = SFV__CAUSE_RECV_FLUSH; /* the peer's doing, most likely */
    }
    if (flush && (cls = sfv__flush_class(ch)) != SFV_WORK_ERROR_NONE) return cls;
    if (ch->first_cause == SFV__CAUSE_PORT_DOWN && status == IBV_WC_LOC_QP_OP_ERR) return SFV_WORK_ERROR_LOCAL_RESOURCE;
    return sfv_wc_status_class((sfv_wc_status)status);
}

/* Moves q's tail past the places freed at its front (work consumed out of order, injects given
   back by a completion). Inline: on a release's path, a call would cost the caller its registers. */
SFV__HOT_INLINE void sfv__tail_free(sfv__ring *q) {
    const sfv__slot *const slots = q->slots;
    const uint64_t mask = q->mask, head = q->head;
    uint64_t t = q->tail;
    while (t < head && slots[t & mask].state == SFV__SLOT_FREE) t++;
    q->tail = t;
    q->gaps = t != head; /* (what is free past the first place it stopped at stays to be passed) */
}

/* An inject's place completed with `status` (a failure): the channel remembers the first inject
   that failed, by its number (injects posted before it + 1), for the message of every refusal
   that follows (>>impl inject). Never on a fast path. */
SFV__SLOW void sfv__inject_failed(sfv_channel *ch, const sfv__ring *q, const sfv__slot *s, enum ibv_wc_status status) {
    const uint8_t cls = (uint8_t)sfv__failure_class(ch, s->op, status);
    uint64_t later = 0, t;
    if (ch->inject_failed.no || (status == IBV_WC_WR_FLUSH_ERR && (ch->aborted || SFV__XLOAD(ch->broken)))) return; /* flushed by our abort or after another failure: not its failure */
    for (t = s->seq + 1; t < q->head; t++) { /* the injects after it have not completed: count them */
        const sfv__slot *u = &q->slots[t & q->mask];
        if (u->seq == t && u->state == SFV__SLOT_INJECT && u->op != SFV__OP_ABORT_MARK) later++;
    }
    ch->inject_failed.no = ch->injects - later;
    ch->inject_failed.len = s->byte_len;
    ch->inject_failed.op = s->op;
    ch->inject_failed.status = sfv__status_byte(status);
    ch->inject_failed.cls = cls;
}

/* A queue completes in order, so the unsignaled work before a completion is finished too, and
   successfully, whatever that completion says: work that fails or is flushed always gets a
   completion of its own, signaled or not (IBA: every work request that ends in error, a flush
   included, completes), so what still waits below a flush's place ran before the QP failed (a
   send delivered, then the next one flushed by a deadline: the first is no failure). False: not
   ours. */
SFV__SLOW bool sfv__catch_up(sfv__ring *q, uint64_t seq) {
    sfv__slot *const slots = q->slots; /* in registers: the byte stores below may alias q's fields */
    const uint64_t mask = q->mask;
    const uint64_t c0 = q->completed;
    sfv__slot *s, *const wrap = slots + mask + 1; /* one pointer along the ring */
    uint64_t c, freed = 0;
    if (seq < q->completed || seq >= q->head) return false; /* cannot happen: the CQ is ours */
    s = &slots[c0 & mask];
    for (c = c0; c < seq; c++) { /* nobody consumes an inject: its place is free now */
        if (s->state == SFV__SLOT_INJECT) {
            s->state = SFV__SLOT_FREE;
            freed++;
        }
        if (++s == wrap) s = slots;
    }
    q->completed = c;
    if (freed && q->tail == c0 && freed == c - c0) q->tail = c; /* only injects from the tail on: past them */
    else if (freed) sfv__tail_free(q);
    return true;
}

/* A successful completion's facts, into its slot. */
/* What a receive's successful completion tells: its length, immediate and opcode. */
SFV__HOT_INLINE void sfv__complete_recv(sfv__slot *s, const struct ibv_wc *w) {
    s->byte_len = w->byte_len;
    s->has_imm = (uint8_t)(w->wc_flags & IBV_WC_WITH_IMM); /* (nonzero: an immediate) */
    s->imm_be = w->imm_data;
    if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM) s->op = SFV_WC_OP_RECV_IMM;
}
SFV__HOT_INLINE void sfv__complete_ok(sfv__slot *s, const struct ibv_wc *w) {
    s->status = IBV_WC_SUCCESS;
    if (s->op == SFV_WC_OP_RECV) sfv__complete_recv(s, w);
}

static void sfv__srq_complete(sfv__ring *q, const struct ibv_wc *w);

/* A completion out of order (unsignaled work came before it) or a failed one: out of line, so
   the common path keeps one test and no call. */
SFV__SLOW void sfv__complete_slow(sfv_channel *ch, sfv__ring *q, const struct ibv_wc *w) {
    const uint64_t seq = (w->wr_id & ~SFV__WRID_INJECT) >> 1;
    sfv__slot *s;
    if (seq != q->completed) {
        /* the common case: unsignaled work before it (a batch's last, say) that succeeded, no inject
           among it: moving `completed` completes it (sfv__slot_done); the rest is sfv__catch_up's */
        if (w->status != IBV_WC_WR_FLUSH_ERR && seq > q->completed && seq < q->head && q->completed >= q->inject_top) {
            q->completed = seq;
        } else if (!sfv__catch_up(q, seq)) {
            if (ch->core_of) sfv__srq_complete(q, w); /* an SRQ's: every completion comes here (>>impl srq) */
            return;
        }
    }
    s = &q->slots[seq & q->mask];
    if (w->wr_id & SFV__WRID_INJECT) { /* an inject's (>>impl inject): nobody consumes it, its place is free now */
        if (w->status != IBV_WC_SUCCESS) {
            sfv__inject_failed(ch, q, s, w->status);
            sfv__break(ch);
        }
        s->state = SFV__SLOT_FREE;
        q->completed = seq + 1;
        sfv__tail_free(q);
        return;
    }
    if (w->status == IBV_WC_SUCCESS) {
        sfv__complete_ok(s, w);
    } else {
        s->status = sfv__status_byte(w->status);
        s->vendor_err = w->vendor_err; /* read only for an error */
        s->has_imm = (uint8_t)sfv__failure_class(ch, s->op, w->status);
        sfv__break(ch); /* an error completion leaves the QP in the error state */
    }
    s->state = SFV__SLOT_DONE;
    q->completed = seq + 1;
}

/* Records one completion in its slot: the next one due, and a success, on the common path. The
   slot's status is already IBV_WC_SUCCESS (set at post), and wr_id's low bit says a receive (the
   receive ring holds nothing else), so a send's completion stores only its state. */
SFV__HOT_INLINE void sfv__complete(sfv_channel *ch, const struct ibv_wc *w) {
    const uint64_t wr_id = w->wr_id, seq = wr_id >> 1;
    sfv__ring *q = sfv__ring_of(ch, wr_id);
    sfv__slot *s;
    if (SFV__UNLIKELY(((seq ^ q->completed) | (uint64_t)w->status) != 0)) { /* out of order, or a failure: one test */
        sfv__complete_slow(ch, q, w);
        return;
    }
    s = &q->slots[seq & q->mask];
    if (wr_id & 1) sfv__complete_recv(s, w);
    s->state = SFV__SLOT_DONE;
    q->completed = seq + 1;
}

/* Polls the CQ once, for up to SFV__POLL_N completions. Returns completions seen, or a negative errno. */
#define SFV__POLL_N 16
SFV__HOT_INLINE int sfv__drain(sfv_channel *ch) {
    struct ibv_wc wc[SFV__POLL_N];
    const int n = ibv_poll_cq(ch->cq, SFV__POLL_N, wc);
    if (n > 0) {
        const struct ibv_wc *w = wc, *const end = wc + n;
        do sfv__complete(ch, w);
        while (++w != end);
    }
    return n;
}

/* A channel of an SRQ takes its receives' completions on the SRQ's CQ, not its own (>>impl srq): a
   receive that failed there moved its QP to the error state, flushing its send queue, whose
   flushes its own CQ gives first. The SRQ's CQ is read before such a flush is taken as the
   channel's first failure, so the channel breaks for the receive, as with a receive queue of its own. */
SFV__SLOW void sfv__srq_read_failures(sfv_channel *ch) {
    while (ch->srq->srq && sfv__drain(&ch->srq->core) > 0) {}
}

static bool sfv__inflight(const sfv_channel *ch) {
    return ch->sq.completed != ch->sq.head || ch->rq.completed != ch->rq.head;
}

/* Marks what never completed as flushed (the QP is gone, so nothing will), in the class its
   channel's first failure gives a flush (an event's FATAL, say), as a NIC's flush would say. */
static void sfv__ring_flush(sfv__ring *q) {
    for (; q->completed < q->head; q->completed++) {
        sfv__slot *s = &q->slots[q->completed & q->mask];
        if (s->state == SFV__SLOT_INJECT) {
            s->state = SFV__SLOT_FREE; /* nobody waits for an inject */
        } else if (s->state == SFV__SLOT_INFLIGHT) {
            sfv__finish_quiet(s, true);
            if (q->ch) s->has_imm = (uint8_t)sfv__flush_class(q->ch);
        }
    }
    sfv__tail_free(q);
}

static void sfv__srq_forget_qp(sfv_srq *srq, uint32_t qpn);
static bool sfv__destroy_qp(sfv_channel *ch) {
    struct ibv_qp *const qp = ch->qp;
    const uint32_t qpn = qp ? qp->qp_num : 0;
    const int spare_rc = sfv__spare_destroy(ch);
    if (spare_rc != 0) {
        errno = spare_rc;
        return false;
    }
    if (qp) { /* off what an event is compared with before its memory may be another QP's */
        int rc;
        /* its leases' windows first, on every path (an abort's too, not only a reset's or a
           destroy's): a window bound to the QP holds it (>>impl leases: rxe waits ~50 s) */
        sfv__leases_drop(ch);
        sfv__ev_enter(ch->pd->ctx);
        SFV__XSET(ch->qp, NULL);
        sfv__ev_leave(ch->pd->ctx);
        rc = ibv_destroy_qp(qp);
        if (rc != 0) {
            SFV__XSET(ch->qp, qp);
            errno = rc; /* the verb's own, for the caller's report */
            return false;
        }
    }
    if (qp && ch->srq) { /* its receives still in the SRQ's CQ recorded first, then its number forgotten (before it is another QP's) */
        while (ch->srq->srq && sfv__drain(&ch->srq->core) > 0) {}
        sfv__srq_forget_qp(ch->srq, qpn);
    }
    if (qp) sfv__mark_broken(ch); /* without a QP it takes no work (a reset that makes a new one opens it again) */
    sfv__ring_flush(&ch->sq);
    sfv__ring_flush(&ch->rq);
    SFV__INFLIGHT_FORGET(ch); /* the NIC touches none of it any more, handle or not (>>impl inflight) */
    return true;
}

/* Unsignaled work left last on the send queue (injects, >>impl inject; a scope's unsignaled post or
   a batch the verb took only in part, sig_top below head) may have completed with no completion to say so. With the QP in ERR, one
   more work request is flushed at once, with a completion, which ends them all, as succeeded
   where the NIC gave them no flush of their own (sfv__catch_up); it is tracked as an inject: its
   place frees itself. Without it, unsignaled work that was done kept the abort waiting for its
   deadline, and the QP's destroy then called it flushed (sfv__ring_flush): delivered work
   reported lost. (Not after a scope's fence the verb refused: the scope says that its work "may
   have completed", and the verb would most likely refuse the mark too.) */
static void sfv__abort_mark(sfv_channel *ch) {
    sfv__ring *q = &ch->sq;
    struct ibv_send_wr wr, *bad = NULL;
    const sfv__slot *s = &q->slots[(q->head - 1) & q->mask];
    if (q->head == q->completed || q->head - q->tail >= q->cap ||
        (s->state != SFV__SLOT_INJECT &&
         (s->state != SFV__SLOT_INFLIGHT || q->sig_top == q->head || ch->first_cause == SFV__CAUSE_FENCE_UNPOSTED)))
        return;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = q->head << 1 | SFV__WRID_INJECT;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(ch->qp, &wr, &bad) == 0) { /* tracked as sfv__track does */
        sfv__slot *t = &q->slots[q->head & q->mask];
        memset(t, 0, sizeof *t);
        t->seq = q->head++;
        t->state = SFV__SLOT_INJECT;
        t->op = SFV__OP_ABORT_MARK;
        q->inject_top = q->head;
        q->sig_top = q->head;
    }
}
/* Whether work whose buffers are the caller's is still in flight: injects at the end of the send
   queue hold none (their bytes were copied at the post), so a drain never waits for them. */
static bool sfv__inflight_owned(const sfv_channel *ch) {
    const sfv__ring *q = &ch->sq;
    uint64_t end = q->head;
    while (end > q->completed && q->slots[(end - 1) & q->mask].state == SFV__SLOT_INJECT) end--;
    return ch->rq.completed != ch->rq.head || q->completed != end;
}

/* How long sfv__abort waits for the flushed work of a QP moved to ERR before it destroys the QP
   instead. A flush needs no peer, so it normally ends in microseconds; 5 s leaves room for a
   loaded host or emulated NIC (rxe flushes on a kernel work queue that shares the CPUs) without
   letting a destroy hang on a NIC that never flushes. */
#ifndef SFV__ABORT_DRAIN_NS /* (tests of a NIC that never flushes set less) */
#define SFV__ABORT_DRAIN_NS 5000000000ull
#endif
/* Stops all work so no buffer stays in the NIC's hands: QP to ERR, drain the flushed work;
   if that does not finish in time, destroy the QP, after which the NIC touches nothing. In two
   halves, so that many channels stopped together (an SRQ's) share one deadline: the first moves
   the QP to ERR (false: it has none, or the verb refused, so nothing will flush its work)... */
static bool sfv__abort_start(sfv_channel *ch) {
    struct ibv_qp_attr qa;
    sfv__break(ch);
    ch->aborted = true;
    if (!ch->qp) return false;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_ERR;
    if (ibv_modify_qp(ch->qp, &qa, IBV_QP_STATE) != 0) return false;
    ch->qp_err = true;
    sfv__abort_mark(ch);
    return true;
}
/* ... the second drains what it flushed until the deadline, then destroys a QP with work left. */
static void sfv__abort_end(sfv_channel *ch, bool flushing, uint64_t deadline) {
    if (!ch->qp) return;
    if (flushing) {
        while (sfv__inflight_owned(ch) && sfv__now_ns() < deadline)
            if (sfv__drain(ch) < 0) break;
        while (sfv__inflight(ch) && sfv__drain(ch) > 0) {} /* what came of the injects: their places */
    }
    if (sfv__inflight(ch)) (void)sfv__destroy_qp(ch);
}
static void sfv__abort(sfv_channel *ch) {
    const uint64_t deadline = sfv__now_ns() + SFV__ABORT_DRAIN_NS;
    sfv__abort_end(ch, sfv__abort_start(ch), deadline);
}

/* Arms ch's CQ for its next completion (ch->cq not NULL): 0, or the verb's errno, not recorded
   (sfv_channel_arm records it; an event-mode wait first looks for the event behind it). */
static int sfv__arm(sfv_channel *ch) {
    const int rc = ibv_req_notify_cq(ch->cq, 0);
    if (!rc) ch->armed = true;
    return rc;
}

SFV__SLOW void sfv__async_abort(sfv_channel *ch);
SAFEVERBS_API sfv_result sfv_channel_arm(sfv_channel *ch) {
    int rc, n;
    SFV__CHECK_HANDLE(ch, SFV__H_CHANNEL, "channel");
    SFV__CHECK_ARG(ch->cc, "channel (not in SFV_WAIT_EVENT mode)");
    SFV__CHECK_ARG(ch->cq, "channel (its destroy failed part-way: destroy it again)"); /* (its CQ gone, its completion channel not) */
    /* An event's break first, as the channel's own waits look at it before they arm (sfv__wait_sleep):
       the loop's step (2) polls, which never look at the channel's state, then find its work
       flushed, where nothing else would complete it and the loop would sleep on a silent fd
       for good. A device that fails every verb after its event (DEVICE_FATAL) fails the arm:
       its event, unread yet, is read then and acted on the same way (the work's own result
       tells it, not the arm's failure). */
    if (SFV__UNLIKELY(sfv__async_cause(ch)) && !ch->aborted) sfv__async_abort(ch);
    if (!ch->armed) {
        rc = sfv__arm(ch);
        if (rc) {
            sfv__events_read(ch->pd->ctx);
            if (!sfv__async_cause(ch)) return sfv__fail_verb("ibv_req_notify_cq", rc);
            if (!ch->aborted) sfv__async_abort(ch);
        }
    }
    /* Completions already in the CQ raise no event, and the poll of the loop's step (2) takes at
       most SFV__POLL_N of them: one behind more than that (sends consumed later, say) would be
       left there while the loop sleeps on a silent fd. All of them are taken now (each handle's
       poll then finds its own), as the channel's own waits take all before they sleep. */
    while ((n = sfv__drain(ch)) > 0) {}
    if (n < 0) return sfv__fail_poll(n);
    return SFV_OK;
}

/* One read: the CQ raises one event per arm, and sfv_channel_arm arms only after the last event
   was taken, so a second read would only say EAGAIN (a system call per wake-up). */
static void sfv__ack_events(sfv_channel *ch) {
    struct ibv_cq *cq;
    void *cq_ctx;
    if (ibv_get_cq_event(ch->cc, &cq, &cq_ctx) == 0) { /* fd is non-blocking */
        ibv_ack_cq_events(cq, 1);
        ch->armed = false;
    }
}
SAFEVERBS_API sfv_result sfv_channel_ack_events(sfv_channel *ch) {
    SFV__CHECK_HANDLE(ch, SFV__H_CHANNEL, "channel");
    SFV__CHECK_ARG(ch->cc, "channel (not in SFV_WAIT_EVENT mode)");
    sfv__ack_events(ch);
    return SFV_OK;
}

/* A channel an event broke (>>events): the first wait that notices moves its QP to the error
   state and flushes everything in flight, so every pending handle completes, with the event's
   cause in its class and hint. */
SFV__SLOW void sfv__async_abort(sfv_channel *ch) {
    if (ch->aborted) return;
    SFV__LOG(SFV_LOG_INFO, "%s qp %u: broken by the device's %s event (no more work; destroy it)", sfv_context_name(sfv_pd_context(ch->pd)),
             ch->qp ? ch->qp->qp_num : 0, sfv_event_type_str((sfv_event_type)SFV__XLOAD(ch->async_event)));
    if (!ch->first_status && !ch->first_cause) ch->first_cause = sfv__async_cause(ch);
    sfv__abort(ch);
    if (ch->core_of) { /* an SRQ (or its CQ) failed: none of its receives will complete */
        const uint64_t deadline = sfv__now_ns() + SFV__ABORT_DRAIN_NS;
        uint64_t seq;
        sfv_channel *c;
        bool stopped = true;
        /* before its receives are said done (their buffers the program's again), no queue pair may
           take one: every channel on it stops (an SRQ and its channels are one thread's), all of
           them first, then their flushes are drained within one deadline (not one each) */
        for (c = ch->core_of->channels; c; c = c->srq_next)
            if (!c->aborted) {
                if (!c->first_status && !c->first_cause) c->first_cause = SFV__CAUSE_FATAL_EVENT; /* its flushes say why */
                c->abort_flushing = sfv__abort_start(c);
                c->abort_pending = true;
            }
        for (c = ch->core_of->channels; c; c = c->srq_next) {
            if (c->abort_pending) {
                c->abort_pending = false;
                sfv__abort_end(c, c->abort_flushing, deadline);
            }
            /* a QP the move to ERR missed, now or in an abort before this one (a channel aborted
               already, whose blocking call said SFV_ERR_DRIVER, say: its QP still in RTS), takes
               the SRQ's receives though none of its own work is left (sfv__abort_end destroys
               only a QP with some): destroyed, or the receives stay the NIC's (in flight,
               >>impl inflight) */
            if (c->qp && !c->qp_err && !sfv__destroy_qp(c)) stopped = false;
        }
        /* a receive that completed before its queue pair stopped (a message that came in as the
           stop began) has its completion in the SRQ's CQ: read first, it keeps its own result,
           not a flush's (a CQ that fails to poll has nothing to give) */
        while (sfv__drain(ch) > 0) {}
        for (seq = ch->rq.tail; stopped && seq < ch->rq.head; seq++) {
            sfv__slot *s = &ch->rq.slots[seq & ch->rq.mask];
            if (s->state == SFV__SLOT_INFLIGHT && s->seq == seq) {
                sfv__finish_quiet(s, true);
                s->has_imm = SFV_WORK_ERROR_FATAL;
            }
        }
    }
}

/* A busy wait reads the device's events (one read(2)) after each SFV__EVENTS_EVERY_NS of spinning,
   counted from its first tick (64 empty polls), and once when its deadline passes (a short wait
   still sees an event before it says timed out), so a wait that its completion ends sooner, as a
   ping-pong's do, makes no system call. An event-mode sleep lasts at most SFV__SLEEP_MAX_MS (an
   event another thread read for this channel is seen then). */
#define SFV__EVENTS_EVERY_NS 10000000ull
#define SFV__SLEEP_MAX_MS 50
/* A wait's timeout in ns: 0 is a look (no sleep, and no spinning for the clock's resolution,
   4 ms with a 250 Hz tick, which sfv__timeout_ns adds so that a longer one never ends early). */
static uint64_t sfv__wait_ns(uint32_t timeout_ms) { return timeout_ms ? sfv__timeout_ns(timeout_ms) : 0; }

/* One sleep of an event-mode wait: look at the channel's state, or arm, or sleep on the
   completion channel and the device's event fd. 0: go on polling; 1: the deadline passed; else
   the failure. Out of line, as is the busy wait's tick: the loop stays small. */
SFV__SLOW int sfv__wait_sleep(sfv_channel *ch, uint64_t *deadline, uint32_t timeout_ms) {
    struct pollfd pfd[3];
    uint64_t now;
    int ms;
    /* an event's break first: the flush it calls for needs no arm, and a device whose verbs fail
       after its event (DEVICE_FATAL) would fail the arm, which would end every wait with that
       failure and leave the work in flight */
    if (SFV__UNLIKELY(sfv__async_cause(ch)) && !ch->aborted) {
        sfv__async_abort(ch);
        return 0;
    }
    if (!ch->armed) { /* (sfv__arm: a failure recorded only once it is the wait's) */
        int rc;
        if (!*deadline && timeout_ms == 0) return 1; /* a look sleeps not: it needs no arm (a verb, a system call
                                                        on rxe) and must not fail for one */
        rc = sfv__arm(ch); /* (its CQ is there: the wait polled it) */
        if (SFV__UNLIKELY(rc)) { /* a device that failed refuses every verb: its DEVICE_FATAL, unread yet (the
                                    arm comes before the poll that would see it), is why, and ends the wait */
            sfv__events_read(ch->pd->ctx);
            if (sfv__async_cause(ch) && !ch->aborted) {
                sfv__async_abort(ch); /* (the work's own result tells it, not the arm's failure) */
                return 0;
            }
            if (*deadline && sfv__now_ns() >= *deadline) return 1; /* a wait with no time left needed no arm: timed out */
            return (int)sfv__fail_verb("ibv_req_notify_cq", rc);
        }
        return 0; /* poll once more: a completion may have come before the arm */
    }
    now = sfv__now_ns();
    if (!*deadline) *deadline = now + sfv__wait_ns(timeout_ms);
    if (now >= *deadline) return 1;
    pfd[0].fd = ch->cc->fd;
    pfd[1].fd = ch->pd->ctx->ctx->async_fd;
    pfd[2].fd = ch->watch ? ch->watch->fd : -1; /* poll skips a negative fd */
    pfd[0].events = pfd[1].events = pfd[2].events = POLLIN;
    pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
    ms = sfv__ms_left(*deadline);
    if (poll(pfd, 3, ms < SFV__SLEEP_MAX_MS ? ms : SFV__SLEEP_MAX_MS) < 0 && errno != EINTR) return (int)sfv__fail_verb("poll", errno);
    if (pfd[1].revents) sfv__events_read(ch->pd->ctx);
    else if (!pfd[0].revents && !pfd[2].revents) sfv__device_probe(ch->pd->ctx); /* a sleep that ended with nothing: still there? */
    if (pfd[2].revents && ch->watch) ch->watch->check(ch->watch);
    if (pfd[0].revents) sfv__ack_events(ch);
    return 0;
}
/* Every 64 empty polls of a busy wait: the clock, the device's events when their time came
   (*events_at, 0 at the wait's first tick), the channel's state. 0: go on; 1: the deadline passed. */
SFV__SLOW int sfv__wait_tick(sfv_channel *ch, uint64_t *events_at, uint64_t *deadline, uint32_t timeout_ms) {
    const uint64_t now = sfv__now_ns();
    if (!*deadline) *deadline = now + sfv__wait_ns(timeout_ms);
    if (!*events_at) {
        *events_at = now + SFV__EVENTS_EVERY_NS;
    }
    if (now >= *events_at || (now >= *deadline && *events_at != UINT64_MAX && timeout_ms > 0)) { /* (and once before a wait times out; not a look, timeout 0) */
        *events_at = now >= *deadline ? UINT64_MAX : now + SFV__EVENTS_EVERY_NS;
        sfv__events_read(ch->pd->ctx);
        if (ch->watch) ch->watch->check(ch->watch);
    }
    if (SFV__UNLIKELY(sfv__async_cause(ch)) && !ch->aborted) {
        sfv__async_abort(ch);
        return 0;
    }
    return now >= *deadline;
}

/* A caller's timeout_ms: < 0 means `otherwise` ms. */
static uint32_t sfv__ms_or(int timeout_ms, uint32_t otherwise) { return timeout_ms < 0 ? otherwise : (uint32_t)timeout_ms; }
/* A wait's deadline passed: why, in words. */
SFV__SLOW sfv_result sfv__wait_timed_out(const sfv_channel *ch) {
    if (ch->sq.completed == ch->sq.base && ch->rq.completed == ch->rq.base) /* a fresh channel: the classic first mistake */
        return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "wait",
                         "work request not complete within the deadline; nothing has completed on this channel yet: "
                         "has the peer connected (sfv_channel_handshake with this side's endpoint) and posted its side?");
    return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "wait", "work request not complete within the deadline");
}

/* Waits until work request `seq` (in slot s of q) is done, or *deadline (monotonic ns) passes,
   after a look at the slot or a poll that did not find it done: it polls first, and looks at the
   slot only after a poll that found work, or after a sleep or a tick (the device's events may
   have flushed it). *deadline 0: timeout_ms (< 0: the channel's) from the first time the clock
   is read, which a completion that comes quickly never needs; the deadline then stays in
   *deadline for the caller's next wait (sfv_pending_wait_all: one deadline for many). The
   device's events are read only once the wait has to wait (>>events). signaled: the work request
   has a completion of its own (a pending handle's), so only its slot's DONE says it is done; else
   a later completion may complete it (sfv__slot_done). Inlined into the handle's wait, so a wait
   that has to spin costs no second call and no set-up its first poll does not. */
SFV__HOT_INLINE sfv_result sfv__wait_slot(sfv_channel *ch, const sfv__ring *q, const sfv__slot *s, uint64_t seq, uint64_t *deadline,
                                          int timeout_ms, bool signaled) {
    unsigned spins = 0;
    uint64_t events_at = 0;
    for (;;) {
        int n = sfv__drain(ch);
        if (n == 0) {
            if (ch->cc) {
                n = sfv__wait_sleep(ch, deadline, sfv__ms_or(timeout_ms, ch->desc.timeout_ms));
                if (n < 0) return (sfv_result)n;
                if (n) break;
            } else if ((++spins & 63) != 0) {
                continue; /* an empty poll changes no slot */
            } else if (sfv__wait_tick(ch, &events_at, deadline, sfv__ms_or(timeout_ms, ch->desc.timeout_ms))) {
                break;
            }
        } else if (SFV__UNLIKELY(n < 0)) {
            return sfv__fail_poll(n);
        }
        if (signaled ? s->state == SFV__SLOT_DONE && s->seq == seq : sfv__slot_done(q, s, seq)) return SFV_OK;
    }
    return sfv__wait_timed_out(ch);
}

/* The deadline `ms` from now (monotonic ns). */
static uint64_t sfv__deadline(uint32_t ms) { return sfv__now_ns() + sfv__timeout_ns(ms); }



static const char *sfv__op_name(uint8_t op) {
    switch (op) {
    case SFV_WC_OP_SEND: return "send";
    case SFV_WC_OP_RECV: case SFV_WC_OP_RECV_IMM: return "receive";
    case SFV_WC_OP_WRITE: return "RDMA write";
    case SFV_WC_OP_READ: return "RDMA read";
    case SFV_WC_OP_COMP_SWAP: return "atomic compare-and-swap";
    case SFV_WC_OP_FETCH_ADD: return "atomic fetch-and-add";
    case 0x7F: return "the scope's fence (a zero-length RDMA write after unsignaled work)";
    case SFV__OP_INJECT_SEND: return "inject (send)";
    case SFV__OP_INJECT_WRITE: return "inject (RDMA write)";
    case SFV__OP_INJECT_WRITE_IMM: return "inject (RDMA write with immediate)";
    default: return "work request";
    }
}

/* The hint for a failed completion: what its channel found out, where it knows more than the
   status says (ch NULL: the status alone). */
static const char *sfv__failure_hint(const sfv_channel *ch, const sfv__slot *s) {
    const bool first = ch && ch->first_status == s->status;
    const uint8_t ev = ch ? SFV__XLOAD(ch->async_event) : 0;
    if (ch && s->status == IBV_WC_WR_FLUSH_ERR && s->seq < (s->op == SFV_WC_OP_RECV ? ch->reset_rq : ch->reset_sq)) /* (the old QP's: what it knew of its failures went with it) */
        return "flushed: it was in flight on the channel's old queue pair, which sfv_channel_reset (or a failure before it) ended; its buffers are free";
    if (ch && ch->first_cause == SFV__CAUSE_PORT_DOWN && sfv__async_cause(ch))
        return "the local port went down (the device's PORT_ERR event): the channel flushed its work and is broken";
    if (ch && ch->first_cause == SFV__CAUSE_PORT_DOWN)
        return "the local port is not ACTIVE: the link or port went down (rxe reports that as LOC_QP_OP_ERR and flushes the rest)";
    if (ch && ch->first_cause == SFV__CAUSE_FATAL_EVENT)
        /* (a CQ_ERR of its own CQ marks it cq_dead; one without is its SRQ's CQ's, or the SRQ's own inner channel's) */
        return ev == SFV_EVENT_CQ_ERR && SFV__XLOAD(ch->cq_dead) ? "the channel's CQ failed (the device's CQ_ERR event: an overrun?): the channel flushed its work and is broken"
             : ev == SFV_EVENT_DEVICE_FATAL ? "the device failed or was deleted (DEVICE_FATAL event): the channel flushed its work and is broken; close the device"
             : ev == SFV_EVENT_SRQ_ERR || ev == SFV_EVENT_CQ_ERR || (ch->srq && !ev)
                 ? "the channel's SRQ failed (the device's SRQ_ERR or CQ_ERR event): every channel on it flushed its work and is broken"
             : "the QP hit an error the device reported as an event (QP_FATAL, QP_REQ_ERR or QP_ACCESS_ERR): the channel flushed its work and is broken";
    if (ch && ch->first_cause == SFV__CAUSE_PEER_GONE)
        return "the peer disconnected (its connection manager said so): the channel flushed its work and is broken";
    if (ch && ch->first_cause == SFV__CAUSE_DEVICE_GONE)
        return "the device was removed (the connection manager's DEVICE_REMOVAL): the channel flushed its work and is broken; close the device";
    if (ch && ch->first_cause == SFV__CAUSE_FENCE_UNPOSTED)
        return "the scope could not post its fence after unsignaled work (ibv_post_send failed), so it flushed the channel, which is broken; work before the fence may have completed";
    if (s->op == 0x7F && s->status != IBV_WC_WR_FLUSH_ERR) /* SFV__OP_FENCE */
        return "the scope's fence after unsignaled work was refused: the peer's channel must allow SFV_ACCESS_REMOTE_WRITE in its desc.access (the default); the work before it completed";
    if (sfv__op_is_atomic(s->op) && (s->status == IBV_WC_REM_ACCESS_ERR || s->status == IBV_WC_REM_INV_REQ_ERR))
        return "the peer refused the atomic: it needs SFV_ACCESS_REMOTE_ATOMIC both on the MR (sfv_reg_mr_access) and in its channel's desc.access, and the 8-byte target inside that MR with the rkey given";
    if (first && ch->first_cause == SFV__CAUSE_RECV_TOO_SMALL)
        return "most likely a receive smaller than the message that arrived (rxe reports it as LOC_QP_OP_ERR, not LOC_LEN_ERR); else a work request this QP cannot take";
    if (first && ch->first_cause == SFV__CAUSE_UNEXPLAINED_FLUSH)
        return "an element outside its MR (or without its access)? rxe on Linux 6.12 flushes such a send or write with no error of its own";
    if (first && ch->first_cause == SFV__CAUSE_RECV_FLUSH)
        return "the QP went to the error state with no failed completion on this side: most likely the peer sent something it refused (an RDMA write, read or atomic outside the region or without its access moves the responder's QP to the error state)";
    if (ch && ch->first_status && !first && s->status == IBV_WC_WR_FLUSH_ERR)
        return "flushed: an earlier work request of this channel failed and put its QP in the error state";
    if (ch && first && ch->aborted && !ch->first_cause && s->status == IBV_WC_WR_FLUSH_ERR) /* the flush was ours (sfv__abort), nothing failed */
        return "flushed by the channel itself, no work request failed: a deadline expired, a poll failed, a batch was taken only in part, or its connection was closed, and it stopped all of its work";
    return sfv_wc_status_hint((sfv_wc_status)s->status);
}

/* What an inject was, in its failure's message. */
static const char *sfv__inject_kind(uint8_t op) {
    return op == SFV__OP_INJECT_WRITE ? "RDMA write" : op == SFV__OP_INJECT_WRITE_IMM ? "RDMA write with immediate" : "send";
}

/* Records a failed completion as the thread's last error: SFV_ERR_WORK. Never on a fast path. */
SFV__SLOW sfv_result sfv__fail_work(const sfv_channel *ch, const sfv__slot *s) {
    const sfv_work_error_class c = s->has_imm ? (sfv_work_error_class)s->has_imm : sfv_wc_status_class((sfv_wc_status)s->status);
    /* (not work of the old queue pair, which a reset ended before any inject of the new one failed) */
    if (ch && ch->inject_failed.no && s->status == IBV_WC_WR_FLUSH_ERR && s->seq >= (s->op == SFV_WC_OP_RECV ? ch->reset_rq : ch->reset_sq))
        return sfv__fail(SFV_ERR_WORK, 0, "completion", "%s failed: %s (%s): flushed after inject #%llu (%s, %u B) failed: %s",
                         sfv__op_name(s->op), sfv_wc_status_str((sfv_wc_status)s->status), sfv_work_error_class_str(c),
                         (unsigned long long)ch->inject_failed.no, sfv__inject_kind(ch->inject_failed.op), (unsigned)ch->inject_failed.len,
                         sfv_wc_status_str((sfv_wc_status)ch->inject_failed.status));
    return sfv__fail(SFV_ERR_WORK, 0, "completion", "%s failed: %s (%s): %s", sfv__op_name(s->op),
                     sfv_wc_status_str((sfv_wc_status)s->status), sfv_work_error_class_str(c), sfv__failure_hint(ch, s));
}

/* After slots first .. last were freed: if first is the ring's tail, the tail moves past them, and
   past the free places after them where there may be some (work is mostly consumed in order, so
   there mostly are none: `gaps` says so without a look). */
SFV__HOT_INLINE void sfv__tail_past(sfv__ring *q, uint64_t first, uint64_t last) {
    if (first != q->tail) {
        q->gaps = true; /* freed ahead of older work */
        return;
    }
    q->tail = last + 1;
    if (SFV__UNLIKELY(q->gaps)) sfv__tail_free(q);
}
/* Frees consumed slots first .. last. */
SFV__HOT_INLINE void sfv__release_range(sfv__ring *q, uint64_t first, uint64_t last) {
    uint64_t seq;
    SFV__INFLIGHT_DONE(q, first, last);
    for (seq = first; seq <= last; seq++) q->slots[seq & q->mask].state = SFV__SLOT_FREE;
    sfv__tail_past(q, first, last);
}
/* Frees one consumed slot, of work request seq. */
SFV__HOT_INLINE void sfv__release_seq(sfv__ring *q, sfv__slot *s, uint64_t seq) {
    SFV__INFLIGHT_DONE(q, seq, seq);
    s->state = SFV__SLOT_FREE;
    sfv__tail_past(q, seq, seq);
}
SFV__HOT_INLINE void sfv__release(sfv__ring *q, sfv__slot *s) { sfv__release_seq(q, s, s->seq); }

/* What a batch of empty work requests points its element list at (per_wr 0 and no elements
   given), so that no pointer arithmetic is done on NULL; the NIC reads none of it. */
static const struct ibv_sge sfv__no_sge = {0, 0, 0};

/* >>impl posting ---------------------------------------------------------------------------- */
/* What is posted, for the element limit: a receive, an RDMA read (which some devices scatter
   into fewer elements), or any other send-queue work. */
typedef enum sfv__post_kind { SFV__POST_SEND, SFV__POST_RECV, SFV__POST_READ } sfv__post_kind;

SFV__HOT_INLINE uint32_t sfv__max_sge(const sfv_channel *ch, sfv__post_kind kind) {
    return kind == SFV__POST_RECV ? ch->desc.max_recv_sge : kind == SFV__POST_READ ? ch->max_read_sge : ch->desc.max_send_sge;
}

/* Every rule of posting in one test (ch is not NULL); when it fails, sfv__post_refused works
   out which rule it was, so the common path pays for no message. */
SFV__HOT_INLINE bool sfv__postable(const sfv_channel *ch, sfv__post_kind kind, const void *sges, size_t n, size_t count, const sfv_pending *pending) {
    const bool recv = kind == SFV__POST_RECV;
    const sfv__ring *q = recv ? &ch->rq : &ch->sq;
    return n < (recv ? SFV__XLOAD(ch->lim_recv) : kind == SFV__POST_READ ? SFV__XLOAD(ch->lim_read) : SFV__XLOAD(ch->lim_send)) &&
           (sges != NULL || n == 0) && count >= 1 && count <= SFV_BATCH_MAX && (pending != NULL || ch->scope_depth > 0) &&
           q->head - q->tail + count <= q->cap;
}

/* A refused or failed post leaves its handles zeroed (a wait on one is then SFV_ERR_INVALID):
   `count` of them for a receive batch, else one; but never one that still holds earlier work of
   the same channel (a handle passed again by mistake, say in a retry loop on a full queue),
   which stays as it was, so that work can still be consumed. */
/* Whether a handle given to a post holds earlier work of that channel, still to be consumed (read
   only through the channel's own rings: a handle that was never posted holds whatever bytes it
   holds). */
static bool sfv__pending_holds(const sfv_channel *ch, const sfv_pending *p) {
    const sfv__ring *q;
    const sfv__slot *s;
    SFV__VALGRIND_DEFINED(p, sizeof *p); /* (it is zeroed next, or it holds work and was defined) */
    if (!ch || (p->state_ != SFV__PENDING_WAITING && p->state_ != SFV__PENDING_WAITING_BATCH)) return false;
    q = p->q_ == &ch->sq ? &ch->sq : p->q_ == &ch->rq ? &ch->rq : NULL;
    if (!q || p->s_ != (const void *)&q->slots[p->seq_ & q->mask]) return false;
    s = (const sfv__slot *)p->s_;
    return s->seq == p->seq_ && s->state != SFV__SLOT_FREE;
}
static void sfv__pending_clear(const sfv_channel *ch, sfv_pending *pending, size_t count) {
    size_t i;
    for (i = 0; pending && count <= SFV_BATCH_MAX && i < count; i++)
        if (!sfv__pending_holds(ch, &pending[i])) memset(&pending[i], 0, sizeof pending[i]);
}
SFV__SLOW sfv_result sfv__post_failed(const sfv_channel *ch, sfv_pending *pending, size_t count, const char *verb, int rc) {
    sfv__pending_clear(ch, pending, count);
    return sfv__fail_verb(verb, rc);
}
/* A receive batch the verb took only part of: the first `posted` receives are the NIC's, and their
   handles wait; the rest are zeroed. */
SFV__SLOW sfv_result sfv__recv_batch_failed(const sfv_channel *ch, sfv_pending *pendings, size_t posted, size_t count, int rc, const char *verb) {
    sfv__pending_clear(ch, pendings ? pendings + posted : NULL, count - posted);
    if (!posted) return sfv__fail_verb(verb, rc);
    return sfv__fail(sfv_result_from_errno(rc), rc, verb, "%s took %zu of %zu receives, then failed: %s; wait on the first %zu handles (or destroy the %s)",
                     verb, posted, count, strerror(rc), posted, ch->core_of ? "SRQ" : sfv__stuck_destroy(ch->owned)); /* (an SRQ's receives end with it, not with a channel of it) */
}

/* A send-queue batch the verb refused at work request `posted`: with some posted, their unsignaled
   work can only end by a flush, so the channel is broken and flushed at once. */
SFV__SLOW sfv_result sfv__batch_failed(sfv_channel *ch, sfv_pending *pending, size_t posted, int rc) {
    const uint64_t first = ch->sq.head - posted;
    sfv__pending_clear(ch, pending, 1);
    if (!posted) return sfv__fail_verb("ibv_post_send", rc);
    sfv__break(ch);
    sfv__abort(ch); /* its unsignaled part ends only by a flush: now, not at a scope's deadline */
    /* the part posted has no handle (a scope consumes it where there is none): once flushed, its
       places are free, or a reset would leave them taken for good; an abort that could not end it
       (not flushed, the QP's destroy refused) leaves it the NIC's, and says so, as sfv__stuck */
    if (pending && ch->qp && sfv__inflight(ch))
        return sfv__fail(SFV_ERR_DRIVER, rc, "ibv_post_send", "ibv_post_send took %zu work requests of the batch, then failed: %s; the channel "
                         "could not stop them (they were not flushed, and destroying the queue pair was refused): their buffers are still "
                         "the NIC's; destroy the %s", posted, strerror(rc), sfv__stuck_destroy(ch->owned)); /* (as sfv__stuck) */
    if (pending) sfv__release_range(&ch->sq, first, first + posted - 1);
    return sfv__fail(SFV_ERR_BROKEN, rc, "ibv_post_send", "ibv_post_send took %zu work requests of the batch, then failed: %s; the channel is broken",
                     posted, strerror(rc));
}

/* The refusal of every post after an inject failed: it names the inject (>>inject). */
SFV__SLOW sfv_result sfv__inject_failure(const sfv_channel *ch);
/* Why a broken channel refuses work (fn: a post, a handshake): the event that broke it, the
   inject that failed, or its first failed work request. */
SFV__SLOW sfv_result sfv__refuse_broken(const sfv_channel *ch, const char *fn) {
    const uint8_t cause = sfv__async_cause(ch);
    if (cause)
        return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "the %s is broken: the device reported %s%s", ch->core_of ? "SRQ" : "channel", /* (an SRQ's post: its inner channel is no channel of the caller's) */
                         sfv_event_type_str((sfv_event_type)SFV__XLOAD(ch->async_event)), cause == SFV__CAUSE_PORT_DOWN ? " (its port went down)" : "");
    if (SFV__XLOAD(ch->broken) && ch->inject_failed.no) return sfv__inject_failure(ch);
    /* (a connection's end that the abort stopped by destroying the QP, its NIC flushing nothing: the
       cause below, not the QP it took; a destroy that failed part-way, no CQ left, says so first) */
    if (!ch->qp && !ch->core_of && !ch->first_status &&
        (!ch->cq || (ch->first_cause != SFV__CAUSE_PEER_GONE && ch->first_cause != SFV__CAUSE_DEVICE_GONE))) /* no work request failed: say what is missing (an SRQ has no QP of its own) */
        return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "%s", ch->cq ? "the channel has no queue pair (a reset could not make one, or it was destroyed "
                         "to stop work): sfv_channel_reset makes a new one" : "the channel's destroy failed part-way: call sfv_destroy_channel again");
    if (ch->first_cause == SFV__CAUSE_PEER_GONE) /* (set only when nothing had failed before: the flushes that followed are its doing) */
        return sfv__fail(SFV_ERR_BROKEN, ECONNRESET, fn, "the channel is broken: the peer disconnected (its connection manager said so), "
                         "and the channel flushed its work");
    if (ch->first_cause == SFV__CAUSE_DEVICE_GONE)
        return sfv__fail(SFV_ERR_BROKEN, ENODEV, fn, "the channel is broken: its device was removed (the connection manager's DEVICE_REMOVAL), "
                         "and the channel flushed its work");
    if (ch->aborted && !ch->first_cause && (!ch->first_status || ch->first_status == IBV_WC_WR_FLUSH_ERR)) /* flushed by us, nothing failed */
        return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "the %s is in the error state: it flushed its work itself, no work request failed (a deadline "
                         "expired, a poll failed, a batch was taken only in part, or its connection was closed)", ch->core_of ? "SRQ" : "channel");
    if (!ch->connected && !ch->first_status && !ch->core_of) /* nothing ran on it: its handshake broke it, between RTR and RTS */
        return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "the channel is broken: its handshake failed part-way (its queue pair is stuck before RTS): "
                         "destroy it, or sfv_channel_reset makes a new one");
    return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "the %s is in the error state (an earlier work request failed%s%s%s%s)",
                     ch->core_of ? "SRQ" : "channel", ch->first_status ? ": " : "", ch->first_status ? sfv__op_name(ch->first_op) : "",
                     ch->first_status ? ", " : "", ch->first_status ? sfv_wc_status_str((sfv_wc_status)ch->first_status) : "");
}
SFV__SLOW sfv_result sfv__inject_failure(const sfv_channel *ch) {
    sfv__slot s;
    memset(&s, 0, sizeof s);
    s.seq = ch->reset_sq; /* (on the current QP: a reset forgets the inject that failed, so no reset's hint) */
    s.op = ch->inject_failed.op;
    s.status = ch->inject_failed.status;
    return sfv__fail(SFV_ERR_BROKEN, EIO, "post", "inject #%llu (%s, %u B) failed: %s (%s): %s; the channel is broken (reset or destroy it)",
                     (unsigned long long)ch->inject_failed.no, sfv__inject_kind(ch->inject_failed.op), (unsigned)ch->inject_failed.len,
                     sfv_wc_status_str((sfv_wc_status)s.status), sfv_work_error_class_str((sfv_work_error_class)ch->inject_failed.cls),
                     sfv__failure_hint(ch, &s));
}

/* A post or a wait from a scope's on_wc on a channel the scope is consuming (sfv__settle_shut). */
SFV__SLOW sfv_result sfv__settling_refused(const char *what) {
    return sfv__fail(SFV_ERR_INVALID, EINVAL, what, "a scope's on_wc may not %s the channel the scope is consuming the work of: "
                     "do it after the scope returns", strcmp(what, "wait") == 0 ? "wait for unfinished work of" : "post to");
}
static sfv_result sfv__post_refused(sfv_channel *ch, sfv__post_kind kind, const void *sges, size_t n, size_t count, sfv_pending *pending) {
    const bool recv = kind == SFV__POST_RECV;
    const sfv__ring *q;
    uint32_t max_sge;
    sfv__pending_clear(ch, pending, recv ? count : 1);
    SFV__CHECK_ARG(ch, "channel");
    if (SFV__UNLIKELY(ch->settling)) return sfv__settling_refused("post"); /* its queues shut: nothing else is worth saying */
    /* the limit the post found closed, again with acquire: an event's break published why before it
       (sfv__event_break), so the reason below is read whole, on any CPU */
    (void)__atomic_load_n(recv ? &ch->lim_recv : kind == SFV__POST_READ ? &ch->lim_read : &ch->lim_send, __ATOMIC_ACQUIRE);
    q = recv ? &ch->rq : &ch->sq;
    max_sge = sfv__max_sge(ch, kind);
    SFV__CHECK_ARG(sges || n == 0, "elements (NULL)");
    if (SFV__UNLIKELY(count == 0 || count > SFV_BATCH_MAX))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "batch of %zu work requests (1 .. %d)", count, SFV_BATCH_MAX);
    if (SFV__UNLIKELY(n > max_sge))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "%zu elements, over the %s's %u%s", n, ch->core_of ? "SRQ" : "channel", (unsigned)max_sge,
                         kind == SFV__POST_READ ? " for an RDMA read (the device's max_sge_rd)" : ""); /* (an SRQ's: its desc.max_sge, no channel's) */
    if (SFV__UNLIKELY(!pending && ch->scope_depth == 0))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", ch->core_of ? "a NULL pending handle: an SRQ's receives each need one (no scope covers an SRQ)"
                                                                    : "a NULL pending handle is allowed only inside a scope");
    if (SFV__UNLIKELY(recv && ch->srq))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "the channel's receives come from an SRQ: post them with sfv_srq_post_receive");
    if (SFV__UNLIKELY(sfv__async_cause(ch) || SFV__XLOAD(ch->broken) || (!ch->qp && !ch->core_of))) /* an SRQ's inner channel has no QP */
        return sfv__refuse_broken(ch, "post");
    if (SFV__UNLIKELY(!recv && !ch->connected))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "the channel is not connected (call sfv_channel_handshake)");
    if (SFV__UNLIKELY(count > q->cap))
        return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "post", "a batch of %zu work requests is larger than the whole queue (%llu places)",
                         count, (unsigned long long)q->cap);
    if (SFV__UNLIKELY(q->head - q->tail + count > q->cap))
        return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "post", "queue full: %llu work requests posted and not yet consumed",
                         (unsigned long long)(q->head - q->tail));
    return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "refused"); /* unreachable: every rule is named above */
}

/* Takes the next n slots for n posted work requests (the ring's fields stay in registers), in
   `state` (INFLIGHT; INJECT for an inject's). */
/* Place s now holds work request seq, posted in `state` as op (status SUCCESS until its completion
   says otherwise, has_imm 0): the small fields in one store. The op is a byte, not an
   sfv_wc_opcode: the ops of a channel's own work (an inject's, a fence's: SFV__OP_*) are no value
   of that enum, and in C++ making one of it is undefined behaviour (UBSan's -fsanitize=enum). */
SFV__HOT_INLINE void sfv__slot_posted(sfv__slot *s, uint64_t seq, uint8_t state, uint8_t op) {
    const uint8_t small[4] = {state, op, 0, 0}; /* state, op, status, has_imm */
    s->seq = seq;
    memcpy(&s->state, small, sizeof small);
}
SFV__HOT_INLINE sfv__slot *sfv__track_state(sfv__ring *q, uint8_t state, uint8_t op, const uint32_t *read_len, size_t n) {
    sfv__slot *const slots = q->slots, *s = NULL;
    const uint64_t mask = q->mask;
    /* the length a completion will not say: a read's, an atomic's, an inject's (for its failure);
       a receive's comes with its completion, and no one reads a send's or a write's */
    const bool keep_len = op == SFV_WC_OP_READ || sfv__op_is_atomic(op) || state == SFV__SLOT_INJECT;
    uint64_t head = q->head;
    size_t i;
    for (i = 0; i < n; i++, head++) {
        s = &slots[head & mask];
        sfv__slot_posted(s, head, state, op);
        if (keep_len) s->byte_len = read_len[i];
    }
    q->head = head;
    if (state == SFV__SLOT_INJECT) q->inject_top = head;
    return s; /* the last place taken */
}
SFV__HOT_INLINE sfv__slot *sfv__track_n(sfv__ring *q, uint8_t op, const uint32_t *read_len, size_t n) {
    return sfv__track_state(q, SFV__SLOT_INFLIGHT, op, read_len, n);
}

SFV__HOT_INLINE sfv__slot *sfv__track(sfv__ring *q, uint8_t op, uint32_t read_len) { return sfv__track_n(q, op, &read_len, 1); }

/* Points `p` (if any) at the last `batch` work requests posted on q, the last in place `last`. */
SFV__HOT_INLINE void sfv__cover(sfv__ring *q, sfv_pending *pending, uint32_t batch, sfv__slot *last) {
    if (!pending) return;
    pending->q_ = q;
    pending->seq_ = last->seq;
    pending->state_ = batch == 1 ? SFV__PENDING_WAITING : SFV__PENDING_WAITING_BATCH;
    pending->batch_ = batch;
    pending->s_ = last;
}

SFV__HOT_INLINE uint8_t sfv__op_of(enum ibv_wr_opcode opcode) { /* (an sfv_wc_opcode, as a place keeps it: sfv__slot_posted) */
    if (opcode == IBV_WR_RDMA_READ) return SFV_WC_OP_READ;
    if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP) return SFV_WC_OP_COMP_SWAP;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) return SFV_WC_OP_FETCH_ADD;
    if (opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM) return SFV_WC_OP_SEND;
    return SFV_WC_OP_WRITE;
}

/* Why `total` bytes may not go to the start of remote: the region wraps, or they do not fit. The
   wrap first, as every call that narrows a region and an atomic test it (>>remote regions: a
   region that wraps is SFV_ERR_INVALID, whatever is posted to it). */
SFV__SLOW sfv_result sfv__remote_refused(const sfv_remote_mr *remote, uint64_t total) {
    if (sfv__remote_wraps(*remote)) return sfv__remote_wrapping(*remote, "post");
    return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, "post", "%llu bytes do not fit the remote region's %llu",
                     (unsigned long long)total, (unsigned long long)remote->length);
}

/* Fills one send-queue work request. The byte total is summed only where it is needed: to keep
   a write or read inside its remote region, and to decide on inline data, which is one compare
   against the limit the channel cached at creation, read once per call (sfv__inline_max). */
/* The inline limit of a post: the channel's, 0 for a read (never inline); the channel's is 0 on
   a context that has had a DMA-BUF MR (sfv__pd_no_inline): an element of one holds an iova, which the
   CPU's copy would read as a host address. */
SFV__HOT_INLINE uint32_t sfv__inline_max(const sfv_channel *ch, enum ibv_wr_opcode opcode) { return opcode == IBV_WR_RDMA_READ ? 0 : SFV__XLOAD(ch->inline_max); }
SFV__HOT_INLINE sfv_result sfv__fill_send(struct ibv_send_wr *w, uint64_t seq, enum ibv_wr_opcode opcode, uint32_t inline_max,
                                          const struct ibv_sge *sg, size_t n, const sfv_remote_mr *remote, uint32_t imm,
                                          unsigned flags, uint32_t *total_out, struct ibv_send_wr *next) {
    uint64_t total = 0;
    size_t k;
    if (remote || inline_max) {
        bool keyless = false; /* an element of no MR (lkey 0) goes to the NIC, which refuses it, never inline */
        for (k = 0; k < n; k++) {
            total += sg[k].length;
            keyless |= sg[k].lkey == 0;
        }
        if (remote && SFV__UNLIKELY(total > remote->length || sfv__remote_wraps(*remote))) return sfv__remote_refused(remote, total);
        if (total >= 1 && total <= inline_max && !keyless) flags |= IBV_SEND_INLINE;
    }
    w->wr_id = seq << 1;
    w->next = next;
    w->sg_list = (struct ibv_sge *)(uintptr_t)sg;
    w->num_sge = (int)n;
    w->opcode = opcode;
    w->send_flags = flags;
    w->imm_data = htonl(imm);
    if (remote) {
        w->wr.rdma.remote_addr = remote->addr;
        w->wr.rdma.rkey = remote->rkey;
    }
    if (total_out) *total_out = (uint32_t)total;
    return SFV_OK;
}

/* One signaled work request on the send queue: the data path of every single post. */
SFV__HOT_INLINE sfv_result sfv__post_one(sfv_channel *ch, enum ibv_wr_opcode opcode, const void *sges, size_t n,
                                         const sfv_remote_mr *remote, uint32_t imm, sfv_pending *pending, unsigned signaled) {
    struct ibv_send_wr wr, *bad; /* (one work request: nothing to read in bad) */
    uint32_t total = 0;
    sfv_result r;
    int rc;
    const sfv__post_kind kind = opcode == IBV_WR_RDMA_READ ? SFV__POST_READ : SFV__POST_SEND;
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, kind, sges, n, 1, pending))) return sfv__post_refused(ch, kind, sges, n, 1, pending);
    r = sfv__fill_send(&wr, ch->sq.head, opcode, sfv__inline_max(ch, opcode), (const struct ibv_sge *)sges, n, remote, imm, signaled, &total, NULL);
    if (SFV__UNLIKELY(r)) {
        sfv__pending_clear(ch, pending, 1);
        return r;
    }
    SFV__INFLIGHT_POST(&ch->sq, &wr, NULL, pending, 1);
    rc = ibv_post_send(ch->qp, &wr, &bad);
    SFV__INFLIGHT_POSTED(&ch->sq, &wr, NULL, rc ? 0 : 1);
    if (SFV__UNLIKELY(rc)) return sfv__post_failed(ch, pending, 1, "ibv_post_send", rc);
    sfv__cover(&ch->sq, pending, 1, sfv__track(&ch->sq, sfv__op_of(opcode), total));
    if (signaled) ch->sq.sig_top = ch->sq.head;
    return SFV_OK;
}

/* A batch's work requests, each linked to the next (the last's link and signal set after), and
   their places written in the same pass: places past head are nobody's, so the verb's refusal
   leaves nothing to undo there. Inlined twice, with and without inline, so that a channel without
   it pays for no length sum. */
SFV__HOT_INLINE sfv_result sfv__fill_batch(struct ibv_send_wr *wrs, sfv__slot *slots, uint64_t head, uint64_t mask, enum ibv_wr_opcode opcode,
                                           uint32_t inline_max, const struct ibv_sge *sg, size_t per_wr, size_t count,
                                           const sfv_remote_mr *remotes) {
    const bool rdma = opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_READ;
    const uint8_t op = sfv__op_of(opcode);
    sfv__slot *const wrap = slots + mask + 1;
    sfv__slot *s = &slots[head & mask];
    size_t i;
    for (i = 0; i < count; i++, s = s + 1 == wrap ? slots : s + 1) { /* (s: one pointer along the ring) */
        uint32_t total = 0;
        const sfv_result r = sfv__fill_send(&wrs[i], head + i, opcode, inline_max, sg + i * per_wr, per_wr, rdma ? &remotes[i] : NULL, 0,
                                            0, opcode == IBV_WR_RDMA_READ ? &total : NULL, &wrs[i + 1]);
        if (r) return r;
        sfv__slot_posted(s, head + i, SFV__SLOT_INFLIGHT, op);
        if (opcode == IBV_WR_RDMA_READ) s->byte_len = total; /* (only a read's length is kept: its completion will not say it) */
    }
    return SFV_OK;
}

/* `count` work requests of `per_wr` elements each behind one call; only the last is signaled.
   remotes: one per work request for write and read, else NULL. Inlined into each public batch
   call, so its opcode is a constant there. */
SFV__HOT_INLINE sfv_result sfv__post_batch(sfv_channel *ch, enum ibv_wr_opcode opcode, const void *sges, size_t per_wr,
                                  size_t count, const sfv_remote_mr *remotes, sfv_pending *pending) {
    struct ibv_send_wr wrs[SFV_BATCH_MAX], *bad = NULL;
    const struct ibv_sge *sg = sges ? (const struct ibv_sge *)sges : &sfv__no_sge; /* never arithmetic on NULL */
    const bool rdma = opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_READ;
    sfv__slot *slots, *last;
    uint32_t inline_max;
    uint64_t head, mask;
    size_t posted;
    sfv_result r;
    int rc;
    const sfv__post_kind kind = opcode == IBV_WR_RDMA_READ ? SFV__POST_READ : SFV__POST_SEND;
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, kind, sges, per_wr, count, pending)))
        return sfv__post_refused(ch, kind, sges, per_wr, count, pending);
    if (rdma && !remotes) {
        sfv__pending_clear(ch, pending, 1);
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "remote regions (NULL)");
    }
    inline_max = sfv__inline_max(ch, opcode); /* once, with the ring's fields: the stores below may alias the channel */
    head = ch->sq.head;
    slots = ch->sq.slots;
    mask = ch->sq.mask;
    r = inline_max ? sfv__fill_batch(wrs, slots, head, mask, opcode, inline_max, sg, per_wr, count, remotes)
                   : sfv__fill_batch(wrs, slots, head, mask, opcode, 0, sg, per_wr, count, remotes);
    if (r) {
        sfv__pending_clear(ch, pending, 1);
        return r;
    }
    wrs[count - 1].next = NULL;
    wrs[count - 1].send_flags |= IBV_SEND_SIGNALED;
    SFV__INFLIGHT_POST(&ch->sq, wrs, NULL, pending, 1);
    rc = ibv_post_send(ch->qp, wrs, &bad);
    /* What was posted is the NIC's: tracked, so nothing lets go of its buffers. After a partial
       post, unsignaled work can only end by a flush: the channel is broken from there. */
    posted = rc ? (bad ? (size_t)(bad - wrs) : 0) : count;
    SFV__INFLIGHT_POSTED(&ch->sq, wrs, NULL, posted);
    ch->sq.head = head + posted;
    if (SFV__UNLIKELY(rc)) return sfv__batch_failed(ch, pending, posted, rc);
    ch->sq.sig_top = ch->sq.head; /* (only once the signaled last was taken: a part taken is unsignaled work left last, which the abort's mark ends) */
    last = &slots[(head + count - 1) & mask];
    sfv__cover(&ch->sq, pending, (uint32_t)count, last);
    return SFV_OK;
}

/* Which rule of >>atomics an atomic breaks, SFV_OK if none: the device, the old value's element,
   the target word. Each test is O(1); the common path runs them all and pays for no message. */
static sfv_result sfv__atomic_refused(const sfv_channel *ch, const sfv_scatter_element *old, const sfv_remote_mr *remote) {
    if (SFV__UNLIKELY(ch->pd->ctx->attr.atomic_cap == IBV_ATOMIC_NONE))
        return sfv__fail(SFV_ERR_UNSUPPORTED, EOPNOTSUPP, "post", "%s does not support atomics (atomic_cap IBV_ATOMIC_NONE)", ch->pd->ctx->name);
    if (SFV__UNLIKELY(old->length != 8))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "the old value's element holds %u bytes; an atomic returns exactly 8", (unsigned)old->length);
    if (SFV__UNLIKELY(sfv__remote_wraps(*remote))) return sfv__remote_wrapping(*remote, "post");
    if (SFV__UNLIKELY(remote->length < 8))
        return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, "post", "the remote region's %llu bytes cannot hold the atomic's 8-byte word",
                         (unsigned long long)remote->length);
    if (SFV__UNLIKELY(remote->addr & 7))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "the atomic's target 0x%llx is not 8-byte aligned", (unsigned long long)remote->addr);
    return SFV_OK;
}

/* A refusal by the rules every post keeps, with the atomic's own words for a missing element. */
SFV__SLOW sfv_result sfv__atomic_post_refused(sfv_channel *ch, const sfv_scatter_element *old, sfv_pending *pending) {
    if (ch && !old && !ch->settling) { /* (from a scope's on_wc: refused as every post is there) */
        sfv__pending_clear(ch, pending, 1);
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "the old value's element is NULL (an atomic needs one 8-byte element)");
    }
    return sfv__post_refused(ch, SFV__POST_SEND, old, 1, 1, pending);
}

/* One signaled atomic on the send queue: the old value's one element, the word, the operands. */
static sfv_result sfv__post_atomic(sfv_channel *ch, enum ibv_wr_opcode opcode, const sfv_scatter_element *old, const sfv_remote_mr *remote,
                                   uint64_t compare_add, uint64_t swap, sfv_pending *pending) {
    struct ibv_send_wr wr, *bad = NULL;
    sfv_result r;
    int rc;
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, SFV__POST_SEND, old, 1, 1, pending))) return sfv__atomic_post_refused(ch, old, pending);
    if (SFV__UNLIKELY((r = sfv__atomic_refused(ch, old, remote)) != SFV_OK)) {
        sfv__pending_clear(ch, pending, 1);
        return r;
    }
    memset(&wr, 0, sizeof wr);
    wr.wr_id = ch->sq.head << 1;
    wr.sg_list = (struct ibv_sge *)(uintptr_t)old;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = remote->addr;
    wr.wr.atomic.rkey = remote->rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    SFV__INFLIGHT_POST(&ch->sq, &wr, NULL, pending, 1);
    rc = ibv_post_send(ch->qp, &wr, &bad);
    SFV__INFLIGHT_POSTED(&ch->sq, &wr, NULL, rc ? 0 : 1);
    if (SFV__UNLIKELY(rc)) return sfv__post_failed(ch, pending, 1, "ibv_post_send", rc);
    sfv__cover(&ch->sq, pending, 1, sfv__track(&ch->sq, sfv__op_of(opcode), 8));
    ch->sq.sig_top = ch->sq.head;
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_channel_post_compare_swap(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t compare, uint64_t swap, sfv_pending *pending) {
    return sfv__post_atomic(ch, IBV_WR_ATOMIC_CMP_AND_SWP, old, &remote, compare, swap, pending);
}
SAFEVERBS_API sfv_result sfv_channel_post_fetch_add(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t add, sfv_pending *pending) {
    return sfv__post_atomic(ch, IBV_WR_ATOMIC_FETCH_AND_ADD, old, &remote, add, 0, pending);
}

/* The receives of a channel's own queue (on_srq false) and of an SRQ (ch: the SRQ's inner
   channel `core`, srq its ibv_srq): one body for sfv_channel_post_receive(_batch) and
   sfv_srq_post_receive(_batch), always inlined with a constant on_srq, so each public call keeps
   its own branch only (callgrind: no instruction added to sfv_channel_post_receive). */
SFV__HOT_INLINE sfv_result sfv__post_recv(sfv_channel *ch, bool on_srq, struct ibv_srq *srq, const sfv_scatter_element *sges,
                                          size_t n, sfv_pending *pending) {
    struct ibv_recv_wr wr, *bad; /* (one work request: nothing to read in bad) */
    int rc;
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, SFV__POST_RECV, sges, n, 1, pending)))
        return sfv__post_refused(ch, SFV__POST_RECV, sges, n, 1, pending);
    wr.wr_id = ch->rq.head << 1 | 1;
    wr.next = NULL;
    wr.sg_list = (struct ibv_sge *)(uintptr_t)sges;
    wr.num_sge = (int)n;
    SFV__INFLIGHT_POST(&ch->rq, NULL, &wr, pending, 1);
    rc = on_srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(ch->qp, &wr, &bad);
    SFV__INFLIGHT_POSTED(&ch->rq, NULL, &wr, rc ? 0 : 1);
    if (SFV__UNLIKELY(rc)) return sfv__post_failed(ch, pending, 1, on_srq ? "ibv_post_srq_recv" : "ibv_post_recv", rc);
    sfv__cover(&ch->rq, pending, 1, sfv__track(&ch->rq, SFV_WC_OP_RECV, 0));
    return SFV_OK;
}
SFV__HOT_INLINE sfv_result sfv__post_recv_batch(sfv_channel *ch, bool on_srq, struct ibv_srq *srq, const sfv_scatter_element *sges,
                                                size_t per_wr, size_t count, sfv_pending *pendings) {
    struct ibv_recv_wr wrs[SFV_BATCH_MAX], *bad = NULL;
    const struct ibv_sge *sg = sges ? (const struct ibv_sge *)sges : &sfv__no_sge; /* never arithmetic on NULL */
    uint64_t head;
    size_t i, posted;
    int rc;
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, SFV__POST_RECV, sges, per_wr, count, pendings)))
        return sfv__post_refused(ch, SFV__POST_RECV, sges, per_wr, count, pendings);
    head = ch->rq.head; /* (in a register: the stores below may alias the channel) */
    for (i = 0; i < count; i++) { /* each linked to the next; the last's link set after */
        wrs[i].wr_id = (head + i) << 1 | 1;
        wrs[i].next = &wrs[i + 1];
        wrs[i].sg_list = (struct ibv_sge *)(uintptr_t)(sg + i * per_wr);
        wrs[i].num_sge = (int)per_wr;
    }
    wrs[count - 1].next = NULL;
    SFV__INFLIGHT_POST(&ch->rq, NULL, wrs, pendings, count);
    rc = on_srq ? ibv_post_srq_recv(srq, wrs, &bad) : ibv_post_recv(ch->qp, wrs, &bad);
    posted = rc ? (bad ? (size_t)(bad - wrs) : 0) : count; /* what was posted is the NIC's: track it */
    SFV__INFLIGHT_POSTED(&ch->rq, NULL, wrs, posted);
    { /* each its place and its handle, the ring's fields in registers (sfv__track per receive reloads them) */
        sfv__ring *const q = &ch->rq;
        sfv__slot *const slots = q->slots, *const wrap = slots + q->mask + 1, *s = &slots[head & q->mask];
        if (pendings)
            for (i = 0; i < posted; i++, s = s + 1 == wrap ? slots : s + 1) {
                sfv__slot_posted(s, head + i, SFV__SLOT_INFLIGHT, SFV_WC_OP_RECV);
                sfv__cover(q, &pendings[i], 1, s);
            }
        else /* (inside a scope, as a single post's NULL handle) */
            for (i = 0; i < posted; i++, s = s + 1 == wrap ? slots : s + 1) sfv__slot_posted(s, head + i, SFV__SLOT_INFLIGHT, SFV_WC_OP_RECV);
        q->head = head + posted;
    }
    if (SFV__UNLIKELY(rc)) return sfv__recv_batch_failed(ch, pendings, posted, count, rc, on_srq ? "ibv_post_srq_recv" : "ibv_post_recv");
    return SFV_OK;
}
SFV__API_HOT sfv_result sfv_channel_post_receive(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_pending *pending) {
    return sfv__post_recv(ch, false, NULL, sges, n, pending);
}
SFV__API_HOT sfv_result sfv_channel_post_receive_batch(sfv_channel *ch, const sfv_scatter_element *sges, size_t per_wr, size_t count, sfv_pending *pendings) {
    return sfv__post_recv_batch(ch, false, NULL, sges, per_wr, count, pendings);
}
SFV__API_HOT sfv_result sfv_channel_post_send_batch(sfv_channel *ch, const sfv_gather_element *sges, size_t per_wr, size_t count, sfv_pending *pending) {
    return sfv__post_batch(ch, IBV_WR_SEND, sges, per_wr, count, NULL, pending);
}
SFV__API_HOT sfv_result sfv_channel_post_write_batch(sfv_channel *ch, const sfv_gather_element *sges, size_t per_wr, size_t count, const sfv_remote_mr *remotes, sfv_pending *pending) {
    return sfv__post_batch(ch, IBV_WR_RDMA_WRITE, sges, per_wr, count, remotes, pending);
}
SFV__API_HOT sfv_result sfv_channel_post_read_batch(sfv_channel *ch, const sfv_scatter_element *sges, size_t per_wr, size_t count, const sfv_remote_mr *remotes, sfv_pending *pending) {
    return sfv__post_batch(ch, IBV_WR_RDMA_READ, sges, per_wr, count, remotes, pending);
}

/* One request of a request batch, whatever its kind. */
typedef struct sfv__request { const struct ibv_sge *sg; size_t n; const sfv_remote_mr *remote; bool has_imm; uint32_t imm; } sfv__request;
static sfv__request sfv__request_at(sfv__post_kind kind, bool write, const void *reqs, size_t i) {
    sfv__request o;
    memset(&o, 0, sizeof o);
    if (kind == SFV__POST_READ) {
        const sfv_read_request *req = (const sfv_read_request *)reqs + i;
        o.sg = (const struct ibv_sge *)req->sges; o.n = req->n; o.remote = &req->remote;
    } else if (write) {
        const sfv_write_request *req = (const sfv_write_request *)reqs + i;
        o.sg = (const struct ibv_sge *)req->sges; o.n = req->n; o.remote = &req->remote; o.has_imm = req->has_imm; o.imm = req->imm;
    } else {
        const sfv_send_request *req = (const sfv_send_request *)reqs + i;
        o.sg = (const struct ibv_sge *)req->sges; o.n = req->n; o.has_imm = req->has_imm; o.imm = req->imm;
    }
    return o;
}

/* Request batches (>>batches): each request its own element count and immediate. */
static sfv_result sfv__post_requests(sfv_channel *ch, sfv__post_kind kind, bool write, const void *reqs, size_t count, sfv_pending *pending) {
    struct ibv_send_wr wrs[SFV_BATCH_MAX], *bad = NULL;
    uint32_t totals[SFV_BATCH_MAX];
    size_t i, posted, max_n = 0;
    sfv__slot *last;
    int rc;
    if (ch && reqs && count >= 1 && count <= SFV_BATCH_MAX) /* (bounds, as sfv__postable's: count - 1 wrapped at 0) */
        for (i = 0; i < count; i++) {
            const sfv__request q = sfv__request_at(kind, write, reqs, i);
            if (!q.sg && q.n) {
                /* from a scope's on_wc, refused as every post is there, whatever its requests
                   (tested here, off the common path) */
                if (ch->settling) return sfv__post_refused(ch, kind, &sfv__no_sge, 0, count, pending);
                sfv__pending_clear(ch, pending, 1);
                return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "request %zu: %zu elements at NULL", i, q.n);
            }
            if (q.n > max_n) max_n = q.n;
        }
    if (!reqs && ch) {
        if (ch->settling) return sfv__post_refused(ch, kind, &sfv__no_sge, 0, count, pending); /* (from on_wc: as above) */
        sfv__pending_clear(ch, pending, 1);
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "requests (NULL)");
    }
    if (SFV__UNLIKELY(!ch || !sfv__postable(ch, kind, &sfv__no_sge, max_n, count, pending)))
        return sfv__post_refused(ch, kind, &sfv__no_sge, max_n, count, pending);
    for (i = 0; i < count; i++) {
        const sfv__request q = sfv__request_at(kind, write, reqs, i);
        const enum ibv_wr_opcode opcode = kind == SFV__POST_READ ? IBV_WR_RDMA_READ
                                        : write ? (q.has_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE)
                                                : (q.has_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND);
        sfv_result r = sfv__fill_send(&wrs[i], ch->sq.head + i, opcode, sfv__inline_max(ch, opcode), q.sg ? q.sg : &sfv__no_sge, q.n, q.remote, q.imm,
                                      i + 1 == count ? IBV_SEND_SIGNALED : 0, &totals[i], NULL);
        if (r) {
            sfv__pending_clear(ch, pending, 1);
            return r;
        }
        if (i) wrs[i - 1].next = &wrs[i];
    }
    SFV__INFLIGHT_POST(&ch->sq, wrs, NULL, pending, 1);
    rc = ibv_post_send(ch->qp, wrs, &bad);
    posted = rc ? (bad ? (size_t)(bad - wrs) : 0) : count;
    SFV__INFLIGHT_POSTED(&ch->sq, wrs, NULL, posted);
    last = sfv__track_n(&ch->sq, kind == SFV__POST_READ ? SFV_WC_OP_READ : write ? SFV_WC_OP_WRITE : SFV_WC_OP_SEND, totals, posted);
    if (SFV__UNLIKELY(rc)) return sfv__batch_failed(ch, pending, posted, rc);
    ch->sq.sig_top = ch->sq.head; /* (as in sfv__post_batch: not for a part taken) */
    sfv__cover(&ch->sq, pending, (uint32_t)count, last);
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_channel_post_sends(sfv_channel *ch, const sfv_send_request *reqs, size_t count, sfv_pending *pending) {
    return sfv__post_requests(ch, SFV__POST_SEND, false, reqs, count, pending);
}
SAFEVERBS_API sfv_result sfv_channel_post_writes(sfv_channel *ch, const sfv_write_request *reqs, size_t count, sfv_pending *pending) {
    return sfv__post_requests(ch, SFV__POST_SEND, true, reqs, count, pending);
}
SAFEVERBS_API sfv_result sfv_channel_post_reads(sfv_channel *ch, const sfv_read_request *reqs, size_t count, sfv_pending *pending) {
    return sfv__post_requests(ch, SFV__POST_READ, false, reqs, count, pending);
}
SFV__API_HOT sfv_result sfv_channel_post_send(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_pending *pending) {
    return sfv__post_one(ch, IBV_WR_SEND, sges, n, NULL, 0, pending, IBV_SEND_SIGNALED);
}
SFV__API_HOT sfv_result sfv_channel_post_send_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, uint32_t imm, sfv_pending *pending) {
    return sfv__post_one(ch, IBV_WR_SEND_WITH_IMM, sges, n, NULL, imm, pending, IBV_SEND_SIGNALED);
}
SFV__API_HOT sfv_result sfv_channel_post_write(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, sfv_pending *pending) {
    return sfv__post_one(ch, IBV_WR_RDMA_WRITE, sges, n, &remote, 0, pending, IBV_SEND_SIGNALED);
}
SFV__API_HOT sfv_result sfv_channel_post_write_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, uint32_t imm, sfv_pending *pending) {
    return sfv__post_one(ch, IBV_WR_RDMA_WRITE_WITH_IMM, sges, n, &remote, imm, pending, IBV_SEND_SIGNALED);
}
SFV__API_HOT sfv_result sfv_channel_post_read(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote, sfv_pending *pending) {
    return sfv__post_one(ch, IBV_WR_RDMA_READ, sges, n, &remote, 0, pending, IBV_SEND_SIGNALED);
}

/* Unsignaled posts (>>scopes): only inside a scope, with room for themselves and the fence the
   scope may need; the last one's place is kept, so the scope knows whether a fence must follow. */
SFV__SLOW sfv_result sfv__unsignaled_refused(sfv_channel *ch, sfv__post_kind kind, const void *sges, size_t n) {
    sfv_pending stands_in; /* the scope consumes it: only the channel's own rules apply */
    if (!ch) return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "channel (NULL)");
    if (ch->settling) return sfv__settling_refused("post");
    if (ch->scope_depth == 0) return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "an unsignaled post is allowed only inside a scope (it has no completion of its own)");
    if (ch->scope_manual)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "an unsignaled post has no pending handle to consume it by, and a manual scope takes only work consumed so: post it inside sfv_channel_scope (a multi-channel's: sfv_multi_channel_scope)");
    /* the rules of every post before the room, as sfv__post_one keeps them: a broken channel says
       SFV_ERR_BROKEN and why (a failed inject named), whatever room its scope's work holds (the
       element limit is 0 where the queue takes no work) */
    memset(&stands_in, 0, sizeof stands_in);
    if (n >= (kind == SFV__POST_READ ? SFV__XLOAD(ch->lim_read) : SFV__XLOAD(ch->lim_send)) || (!sges && n))
        return sfv__post_refused(ch, kind, sges, n, 1, &stands_in);
    return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "post", "queue full: an unsignaled post needs room for itself and the scope's fence (%llu of %llu places taken)",
                     (unsigned long long)(ch->sq.head - ch->sq.tail), (unsigned long long)ch->sq.cap);
}
static sfv_result sfv__post_unsignaled(sfv_channel *ch, enum ibv_wr_opcode opcode, const void *sges, size_t n, const sfv_remote_mr *remote) {
    sfv_result r;
    if (!ch || ch->scope_depth == 0 || ch->scope_manual || ch->sq.head - ch->sq.tail + 2 > ch->sq.cap)
        return sfv__unsignaled_refused(ch, opcode == IBV_WR_RDMA_READ ? SFV__POST_READ : SFV__POST_SEND, sges, n);
    r = sfv__post_one(ch, opcode, sges, n, remote, 0, NULL, 0);
    if (!r) ch->last_unsignaled = ch->sq.head; /* one past its place: 0 is never a place */
    return r;
}
SFV__API_HOT sfv_result sfv_channel_post_send_unsignaled(sfv_channel *ch, const sfv_gather_element *sges, size_t n) {
    return sfv__post_unsignaled(ch, IBV_WR_SEND, sges, n, NULL);
}
SFV__API_HOT sfv_result sfv_channel_post_write_unsignaled(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote) {
    return sfv__post_unsignaled(ch, IBV_WR_RDMA_WRITE, sges, n, &remote);
}
SFV__API_HOT sfv_result sfv_channel_post_read_unsignaled(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote) {
    return sfv__post_unsignaled(ch, IBV_WR_RDMA_READ, sges, n, &remote);
}

/* >>impl inject ----------------------------------------------------------------------------- */
/* An inject (>>inject) is one inline work request from plain memory, its place in the send ring
   tracked as SFV__OP_INJECT_* with its length, and wr_id's top bit set: its completion (the
   signaled ones, a failure, a flush) takes the slow path of sfv__complete, which frees its place
   instead of leaving it for a handle, and a completion after unsignaled injects frees theirs
   (sfv__catch_up). No element is tracked in flight: the bytes are in the work request. */

/* Why an inject is refused before anything is posted (the rules of every post last). */
SFV__SLOW sfv_result sfv__inject_refused(sfv_channel *ch, const void *buf, size_t len) {
    sfv_pending stands_in; /* an inject needs no handle: only the channel's own rules apply */
    if (!ch) return sfv__fail(SFV_ERR_INVALID, EINVAL, "inject", "channel (NULL)");
    if (ch->settling) return sfv__settling_refused("inject");
    (void)__atomic_load_n(&ch->can_send, __ATOMIC_ACQUIRE); /* as sfv__post_refused: an event's why, whole */
    if (!ch->inject_lim)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "inject", "%zu bytes over the channel's inline limit of 0 bytes: it has no inline data "
                         "(desc.max_inline_data SFV_INLINE_NONE, or a device that grants none), and an inject goes inline", len);
    if (len >= ch->inject_lim)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "inject", "%zu bytes over the channel's inline limit of %u bytes (desc.max_inline_data): "
                         "post them from a memory region instead", len, (unsigned)(ch->inject_lim - 1));
    if (!buf && len) return sfv__fail(SFV_ERR_INVALID, EINVAL, "inject", "buf NULL with %zu bytes", len);
    memset(&stands_in, 0, sizeof stands_in);
    return sfv__post_refused(ch, SFV__POST_SEND, &sfv__no_sge, 0, 1, &stands_in);
}

/* Before a signaled inject, or when the send queue has no room for an inject and one more place:
   polls the CQ once, and while the room is missing, until the completion that gives back the
   places of the injects at the queue's front comes, within desc.timeout_ms. */
SFV__SLOW sfv_result sfv__inject_reap(sfv_channel *ch) {
    sfv__ring *q = &ch->sq;
    uint64_t deadline = 0, events_at = 0;
    unsigned spins = 0;
    int n;
    ch->inject_left = ch->inject_every;
    if (SFV__UNLIKELY(q->cap < 2))
        return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "inject", "the send queue has %llu place: an inject needs max_send_wr >= 2 (one place stays free)",
                         (unsigned long long)q->cap);
    n = sfv__drain(ch);
    if (n < 0) return sfv__fail_poll(n);
    while (SFV__XLOAD(ch->can_send) && q->head - q->tail + 2 > q->cap) {
        const sfv__slot *t = &q->slots[q->tail & q->mask];
        if (t->state != SFV__SLOT_INJECT || q->sig_top <= q->tail) /* (no signaled work after the injects at the front: no completion will free them) */
            return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "inject", "send queue full: %llu of %llu places, the oldest held by work that waits for its "
                             "pending handle or scope, or by injects before the open scope's unsignaled work (polling cannot give it back; "
                             "an inject keeps one place free)",
                             (unsigned long long)(q->head - q->tail), (unsigned long long)q->cap);
        n = sfv__drain(ch);
        if (n < 0) return sfv__fail_poll(n);
        if (n == 0 && (++spins & 63) == 0 && sfv__wait_tick(ch, &events_at, &deadline, ch->desc.timeout_ms))
            return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "inject", "send queue full for desc.timeout_ms (%u ms): no completion gave back the places "
                             "of the injects in flight (is the peer there, and for a send, has it posted receives?)", (unsigned)ch->desc.timeout_ms);
    }
    if (SFV__UNLIKELY(!SFV__XLOAD(ch->can_send))) return sfv__inject_refused(ch, "", 0); /* it broke: say why */
    return SFV_OK;
}

/* The verb refused an inject tracked before it: its place and number are taken back. */
SFV__SLOW sfv_result sfv__inject_unpost(sfv_channel *ch, int rc) {
    ch->sq.head--;
    ch->injects--;
    ch->sq.slots[ch->sq.head & ch->sq.mask].state = SFV__SLOT_FREE;
    return sfv__fail_verb("ibv_post_send", rc);
}

SFV__HOT_INLINE sfv_result sfv__inject(sfv_channel *ch, enum ibv_wr_opcode opcode, uint8_t op, const void *buf, size_t len,
                                       const sfv_remote_mr *remote, uint32_t imm) {
    struct ibv_send_wr wr, *bad = NULL;
    struct ibv_sge sge;
    sfv__ring *q;
    unsigned flags = IBV_SEND_INLINE;
    int rc;
    if (SFV__UNLIKELY(!ch || !SFV__XLOAD(ch->can_send) || len >= ch->inject_lim || (!buf && len))) return sfv__inject_refused(ch, buf, len);
    if (remote && SFV__UNLIKELY(len > remote->length || sfv__remote_wraps(*remote))) return sfv__remote_refused(remote, len);
    q = &ch->sq;
    /* every inject_every-th is signaled, and one that leaves no room for the next: the reap of a
       full queue then always has a completion to wait for */
    if (SFV__UNLIKELY(--ch->inject_left == 0 || q->head - q->tail + 3 > q->cap)) {
        const sfv_result r = sfv__inject_reap(ch);
        if (r) return r;
        flags |= IBV_SEND_SIGNALED;
    }
    sge.addr = (uint64_t)(uintptr_t)buf;
    sge.length = (uint32_t)len;
    sge.lkey = 0; /* inline: no memory region */
    wr.wr_id = q->head << 1 | SFV__WRID_INJECT;
    wr.next = NULL;
    wr.sg_list = &sge;
    wr.num_sge = len != 0;
    wr.opcode = opcode;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    if (remote) {
        wr.wr.rdma.remote_addr = remote->addr;
        wr.wr.rdma.rkey = remote->rkey;
    }
    SFV__INFLIGHT_POST(q, &wr, NULL, NULL, 0); /* (debug builds: not from memory in flight as scatter) */
    { /* tracked before the post, so little stays live across the call; taken back if the verb refuses */
        const uint32_t len32 = (uint32_t)len;
        sfv__track_state(q, SFV__SLOT_INJECT, op, &len32, 1);
    }
    ch->injects++;
    rc = ibv_post_send(ch->qp, &wr, &bad);
    if (SFV__UNLIKELY(rc)) return sfv__inject_unpost(ch, rc);
    if (flags & IBV_SEND_SIGNALED) q->sig_top = q->head; /* (posted: a refused one names no place) */
    if (SFV__UNLIKELY(ch->scope_depth > 0) && !(flags & IBV_SEND_SIGNALED) && ch->scope_auto > 0)
        ch->last_unsignaled = ch->sq.head; /* the scope fences it (not a manual one: nothing of the caller's is in flight) */
    return SFV_OK;
}
SFV__API_HOT sfv_result sfv_channel_inject(sfv_channel *ch, const void *buf, size_t len) {
    return sfv__inject(ch, IBV_WR_SEND, SFV__OP_INJECT_SEND, buf, len, NULL, 0);
}
SFV__API_HOT sfv_result sfv_channel_inject_write(sfv_channel *ch, const void *buf, size_t len, sfv_remote_mr remote) {
    return sfv__inject(ch, IBV_WR_RDMA_WRITE, SFV__OP_INJECT_WRITE, buf, len, &remote, 0);
}
SFV__API_HOT sfv_result sfv_channel_inject_write_imm(sfv_channel *ch, const void *buf, size_t len, sfv_remote_mr remote, uint32_t imm) {
    return sfv__inject(ch, IBV_WR_RDMA_WRITE_WITH_IMM, SFV__OP_INJECT_WRITE_IMM, buf, len, &remote, imm);
}

/* >>impl pending work ----------------------------------------------------------------------- */
/* A done handle keeps its slot's facts after seq (state .. vendor_err); seq_ is its seq. */
#define SFV__SLOT_FACTS (sizeof(sfv__slot) - offsetof(sfv__slot, state))
SFV__STATIC_ASSERT(SFV__SLOT_FACTS <= sizeof(((sfv_pending *)0)->done_), pending_holds_a_slot);
SFV__STATIC_ASSERT(offsetof(sfv__slot, state) == sizeof(uint64_t), slot_facts_after_seq);

/* The slot behind a waiting handle, and whether it is done. A slot in [tail, head) that is not
   free holds a work request, and its seq names which one: the handle's seq and the slot's state are
   the whole check, on every wait. A done slot of the handle's seq passes it on the common path;
   any other goes to one poll of the CQ, and is checked by sfv__pending_check if that did not
   finish it (sfv__poll_once_as). */
SFV__HOT_INLINE bool sfv__pending_slot(sfv_pending *pending, sfv__ring **qo, sfv__slot **so) {
    sfv__slot *s = (sfv__slot *)pending->s_;
    *qo = pending->q_;
    *so = s;
    return s->seq == pending->seq_ && s->state == SFV__SLOT_DONE;
}
/* A handle whose slot was consumed (or reused) is a broken contract. */
SFV__HOT_INLINE void sfv__pending_check(const sfv_pending *pending, const sfv__slot *s) {
    SFV_ASSERT(s->seq == pending->seq_ && s->state != SFV__SLOT_FREE &&
               "pending handle used after its scope ended or after it was consumed");
    (void)pending, (void)s;
}

/* A call that returns without a completion: wc (if any) zeroed, with the result in it, so it never
   reads as SFV_OK. Out of line: only failures come here. */
/* A completion flushed because a deadline expired (the one waited for, and what the abort flushed
   after it): a timeout, in its result and its class, wherever it is handed out (a blocking call,
   a scope, a many-peer call). */
static void sfv__wc_timed_out(sfv_work_completion *wc) {
    wc->result = SFV_ERR_TIMEOUT;
    wc->error_class = SFV_WORK_ERROR_TIMEOUT;
}
/* The same for work taken after its channel's deadline passed (expired), w the take's result:
   flushed work is a timeout; what completed as the flush began keeps its own result; a take
   that could not end its work (SFV_ERR_DRIVER) says so. */
static void sfv__wc_expired(sfv_work_completion *wc, sfv_result w, bool expired) {
    if (expired && wc->status == SFV_WC_WR_FLUSH_ERR && (w == SFV_OK || w == SFV_ERR_TIMEOUT)) sfv__wc_timed_out(wc);
}
SFV__SLOW sfv_result sfv__wc_none(sfv_work_completion *wc, sfv_result r) {
    if (wc) {
        memset(wc, 0, sizeof *wc);
        wc->result = r;
    }
    return r;
}

/* A consumed handle's result; ch (NULL once the channel may be gone) only sharpens the hint. */
static const sfv_channel *sfv__srq_channel(const sfv_srq *srq, const sfv__slot *s);
SFV__SLOW sfv_result sfv__pending_result_slow(const sfv_pending *pending, const sfv_channel *ch, sfv_work_completion *wc) {
    sfv__slot d;
    d.seq = pending->seq_;
    memcpy(&d.state, pending->done_, SFV__SLOT_FACTS);
    if (wc) {
        sfv__wc_make(wc, &d);
        if (ch && ch->core_of) wc->channel = sfv__srq_channel(ch->core_of, &d);
    }
    return d.status == IBV_WC_SUCCESS ? SFV_OK : sfv__fail_work(ch, &d);
}
/* The common one, a success whose completion is asked for (not an SRQ's receive), is built here
   with no stack frame; the rest is sfv__pending_result_slow's. */
static sfv_result sfv__pending_result(const sfv_pending *pending, const sfv_channel *ch, sfv_work_completion *wc) {
    sfv__slot d;
    d.seq = pending->seq_;
    memcpy(&d.state, pending->done_, SFV__SLOT_FACTS);
    if (SFV__LIKELY(wc && d.status == IBV_WC_SUCCESS && !(ch && ch->core_of))) {
        sfv__wc_make_ok(wc, &d);
        return SFV_OK;
    }
    return sfv__pending_result_slow(pending, ch, wc);
}

/* Consumes a batch's handle: keeps the first failure, else the last completion. Only the last
   work request of a batch is signaled, and a queue completes in order, so when the last one
   succeeded every one before it did too. A read batch's success gives the bytes of every read
   (>>batches, sfv__batch_read_len), summed from each read's own place: each place keeps its own
   read's length, so a read of the batch that a scope consumes on its own (its handle left
   unconsumed, or lost) says its own bytes, not the batch's. */
/* The bytes of all a read batch's reads, at most UINT32_MAX, in place of its last read's own in
   the handle taken (out of line: only a read batch pays for it). */
SFV__SLOW void sfv__batch_read_len(sfv_pending *pending, const sfv__ring *q, uint64_t first, uint64_t last) {
    uint64_t seq, total = 0;
    uint32_t len;
    for (seq = first; seq <= last; seq++) total += q->slots[seq & q->mask].byte_len;
    len = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    memcpy((unsigned char *)pending->done_ + (offsetof(sfv__slot, byte_len) - offsetof(sfv__slot, state)), &len, sizeof len);
}
SFV__SLOW void sfv__pending_take_batch(sfv_pending *pending, sfv__ring *q, const sfv__slot *last_slot) {
    const uint64_t last = pending->seq_, first = last + 1 - pending->batch_;
    const sfv__slot *pick = last_slot;
    uint64_t seq;
    if (last_slot->status != IBV_WC_SUCCESS)
        for (seq = first; seq <= last; seq++) {
            const sfv__slot *t = &q->slots[seq & q->mask];
            if (t->status != IBV_WC_SUCCESS) { pick = t; break; }
        }
    pending->seq_ = pick->seq; /* (done: seq_ names the completion kept) */
    memcpy(pending->done_, &pick->state, SFV__SLOT_FACTS);
    if (SFV__UNLIKELY(pick->op == SFV_WC_OP_READ) && pick->status == IBV_WC_SUCCESS) sfv__batch_read_len(pending, q, first, last);
    if (SFV__LIKELY(first == q->tail)) {
        /* the oldest work: the tail moves past the batch, so no one looks at its places again until
           they are posted anew; only the last, which a copy of the handle names, is marked free */
        SFV__INFLIGHT_DONE(q, first, last);
        q->slots[last & q->mask].state = SFV__SLOT_FREE;
        sfv__tail_past(q, first, last);
        return;
    }
    sfv__release_range(q, first, last);
    /* A scope consumed the batch's first reads on their own (fn left the handle, and its on_wc
       polls it: the batch's last is done): the tail moved onto the batch, into places freed
       here, which no later release passes (it is not the tail's): past them now, or they stay
       taken for good. */
    if (q->tail > first && q->tail <= last) sfv__tail_free(q);
}

/* Consumes the handle's work (a whole batch, unless `one`: a handle of one work request) and gives
   its result. */
SFV__HOT_INLINE sfv_result sfv__pending_take_as(sfv_pending *pending, sfv__ring *q, sfv__slot *last_slot, sfv_work_completion *wc, bool one) {
    if (SFV__LIKELY(one || pending->batch_ == 1)) {
        const uint64_t seq = last_slot->seq; /* (before the copy, which the compiler may think aliases it) */
        memcpy(pending->done_, &last_slot->state, SFV__SLOT_FACTS);
        sfv__release_seq(q, last_slot, seq);
    } else {
        sfv__pending_take_batch(pending, q, last_slot);
    }
    pending->state_ = SFV__PENDING_DONE;
    if (wc) return sfv__pending_result(pending, q->ch, wc); /* (out of line: the common path, no wc, keeps its registers) */
    /* no completion asked for: the status byte is the result (no second copy of the slot) */
    if (SFV__LIKELY(((const unsigned char *)pending->done_)[offsetof(sfv__slot, status) - offsetof(sfv__slot, state)] == IBV_WC_SUCCESS)) return SFV_OK;
    return sfv__pending_result(pending, q->ch, NULL);
}
SFV__HOT_INLINE sfv_result sfv__pending_take(sfv_pending *pending, sfv__ring *q, sfv__slot *last_slot, sfv_work_completion *wc) {
    return sfv__pending_take_as(pending, q, last_slot, wc, false);
}

SAFEVERBS_API bool sfv_pending_done(const sfv_pending *pending) { return pending && pending->state_ == SFV__PENDING_DONE; }

/* A handle already consumed gives its result again; anything else is a broken contract. */
SFV__SLOW sfv_result sfv__pending_again(const sfv_pending *pending, sfv_work_completion *wc) {
    if (!pending || pending->state_ != SFV__PENDING_DONE)
        return sfv__wc_none(wc, sfv__fail(SFV_ERR_INVALID, EINVAL, "pending", "pending handle: %s",
                                          pending ? "not posted (or its post was refused)" : "NULL"));
    return sfv__pending_result(pending, NULL, wc); /* its channel may be gone: the status's own hint */
}

/* Polls the CQ for `p`: its result if that finished it, else SFV_NOT_DONE. Once, or (full) again
   while a poll comes back full, so that a wait whose completion is behind a full poll's worth of
   others finds it without entering the wait loop. (one: a handle of one work request, as
   sfv__pending_take_as) */
SFV__HOT_INLINE sfv_result sfv__poll_once_as(sfv_pending *pending, sfv__ring *q, sfv__slot *s, sfv_work_completion *wc, bool one, bool full) {
    int n;
    do {
        n = sfv__drain(q->ch);
        if (SFV__UNLIKELY(n < 0)) return sfv__wc_none(wc, sfv__fail_poll(n));
        if (s->state == SFV__SLOT_DONE && s->seq == pending->seq_) return sfv__pending_take_as(pending, q, s, wc, one);
    } while (full && n == SFV__POLL_N);
    sfv__pending_check(pending, s); /* not done, or no longer the handle's place (checked here, not before the poll:
                                       a poll that finds the work done needs no more) */
    return SFV_NOT_DONE;
}
SFV__HOT_INLINE sfv_result sfv__poll_once(sfv_pending *pending, sfv__ring *q, sfv__slot *s, sfv_work_completion *wc) {
    return sfv__poll_once_as(pending, q, s, wc, false, false);
}

/* The slow paths are out of line, so the common one (the work is done: consume it) needs no
   stack frame. */
SFV__SLOW sfv_result sfv__pending_poll_cq(sfv_pending *pending, sfv__ring *q, sfv__slot *s, sfv_work_completion *wc) {
    return sfv__poll_once(pending, q, s, wc);
}

/* A wait from a scope's on_wc on the channel the scope consumes: work already done is taken, as
   outside one, and only work still in flight refused (the handle as it was). Done: its completion
   is in the CQ, maybe behind more than one poll's worth of others (the scope polls only as far
   as the work it consumes), so the CQ is read to its end first, as a wait's polls would. */
SFV__SLOW sfv_result sfv__settling_wait(sfv_pending *pending, sfv__ring *q, sfv__slot *s, sfv_work_completion *wc) {
    int n;
    while ((n = sfv__drain(q->ch)) > 0) {}
    if (n < 0) return sfv__wc_none(wc, sfv__fail_poll(n));
    if (s->state == SFV__SLOT_DONE && s->seq == pending->seq_) return sfv__pending_take(pending, q, s, wc);
    return sfv__wc_none(wc, sfv__settling_refused("wait"));
}
/* The wait loop of a handle the first poll did not finish. deadline: NULL for timeout_ms from the
   first clock read, or a deadline shared by several waits (0 until that first read). */
SFV__SLOW sfv_result sfv__pending_block_wait(sfv_pending *pending, sfv__ring *q, sfv__slot *s, int timeout_ms, uint64_t *deadline,
                                             sfv_work_completion *wc) {
    uint64_t own = 0;
    sfv_result r;
    if (SFV__UNLIKELY(q->ch->settling)) return sfv__settling_wait(pending, q, s, wc);
    r = sfv__wait_slot(q->ch, q, s, pending->seq_, deadline ? deadline : &own, timeout_ms, true);
    if (SFV__UNLIKELY(r)) return sfv__wc_none(wc, r);
    return sfv__pending_take(pending, q, s, wc);
}
/* One poll first: with work in flight ahead of this call, it mostly finds the completion, and
   the wait loop (deadline, clock, sleeping) is never entered. */
SFV__HOT_INLINE sfv_result sfv__pending_block_as(sfv_pending *pending, sfv__ring *q, sfv__slot *s, int timeout_ms, uint64_t *deadline,
                                                 sfv_work_completion *wc, bool one) {
    const sfv_result r = sfv__poll_once_as(pending, q, s, wc, one, !one); /* (a batch's handle: behind its batch, often a full poll) */
    if (r != SFV_NOT_DONE) return r;
    return sfv__pending_block_wait(pending, q, s, timeout_ms, deadline, wc);
}
SFV__HOT_INLINE sfv_result sfv__pending_block(sfv_pending *pending, sfv__ring *q, sfv__slot *s, int timeout_ms, uint64_t *deadline,
                                              sfv_work_completion *wc) {
    return sfv__pending_block_as(pending, q, s, timeout_ms, deadline, wc, false);
}

/* Debug builds: a handle whose channel is gone is a broken contract; should SFV_ASSERT return,
   the call still reads nothing of the dead channel. */
#if SFV_DEBUG
SFV__SLOW sfv_result sfv__pending_dead(sfv_work_completion *wc) {
    SFV_ASSERT(0 && "pending handle used after its channel was destroyed");
    return sfv__wc_none(wc, sfv__fail(SFV_ERR_INVALID, EINVAL, "pending", "pending handle used after its channel was destroyed"));
}
/* (the handle's place must be its ring's: a ring of another channel, at a freed one's address,
   would pass the first test) */
#define SFV__PENDING_GONE(p) (!sfv__live_ring((p)->q_) || (p)->s_ != (void *)&(p)->q_->slots[(p)->seq_ & (p)->q_->mask])
#define SFV__PENDING_LIVE(p, wc) \
    if (SFV__UNLIKELY(SFV__PENDING_GONE(p))) return sfv__pending_dead(wc)
#else
#define SFV__PENDING_LIVE(p, wc) ((void)0)
#endif

/* A handle that is not waiting for one work request: a batch's (polled, or waited for, as the
   common path does, with the batch's take), or one already consumed (or never posted). */
/* Its place (checked) where the call goes on to the CQ; NULL where it is over, *r its result. */
SFV__HOT_INLINE sfv__slot *sfv__pending_other(sfv_pending *pending, sfv__ring **q, sfv_work_completion *wc, sfv_result *r) {
    sfv__slot *s;
    if (!pending || pending->state_ != SFV__PENDING_WAITING_BATCH) {
        *r = sfv__pending_again(pending, wc);
        return NULL;
    }
#if SFV_DEBUG
    if (SFV__UNLIKELY(SFV__PENDING_GONE(pending))) {
        *r = sfv__pending_dead(wc);
        return NULL;
    }
#endif
    if (sfv__pending_slot(pending, q, &s)) {
        *r = sfv__pending_take(pending, *q, s, wc);
        return NULL;
    }
    sfv__pending_check(pending, s);
    return s;
}
SFV__SLOW sfv_result sfv__pending_other_poll(sfv_pending *pending, sfv_work_completion *wc) {
    sfv__ring *q = NULL; /* (set whenever s is: gcc -Og -Wall cannot see that) */
    sfv_result r = SFV_OK;
    sfv__slot *s = sfv__pending_other(pending, &q, wc, &r);
    return s ? sfv__poll_once(pending, q, s, wc) : r;
}
SFV__SLOW sfv_result sfv__pending_other_wait(sfv_pending *pending, int timeout_ms, uint64_t *deadline, sfv_work_completion *wc) {
    sfv__ring *q = NULL; /* (as above) */
    sfv_result r = SFV_OK;
    sfv__slot *s = sfv__pending_other(pending, &q, wc, &r);
    return s ? sfv__pending_block(pending, q, s, timeout_ms, deadline, wc) : r;
}

SFV__API_HOT sfv_result sfv_pending_poll(sfv_pending *pending, sfv_work_completion *wc) {
    if (SFV__LIKELY(pending && pending->state_ == SFV__PENDING_WAITING)) {
        sfv__ring *q;
        sfv__slot *s;
        SFV__PENDING_LIVE(pending, wc);
        if (SFV__LIKELY(sfv__pending_slot(pending, &q, &s))) return sfv__pending_take_as(pending, q, s, wc, true);
        return sfv__pending_poll_cq(pending, q, s, wc);
    }
    return sfv__pending_other_poll(pending, wc);
}

/* sfv_pending_wait, with the deadline of sfv__pending_block. */
/* A wait that must poll, out of line: sfv_pending_wait called from another file then returns a done
   handle without the stack frame a poll needs (the CQ array, the registers kept across the verb).
   (Inlined into the caller, SAFEVERBS_STATIC, and in sfv_pending_wait_all, one body does better.) */
SFV__SLOW sfv_result sfv__pending_wait_poll(sfv_pending *pending, sfv__ring *q, sfv__slot *s, int timeout_ms, uint64_t *deadline,
                                            sfv_work_completion *wc) {
    return sfv__pending_block_as(pending, q, s, timeout_ms, deadline, wc, true);
}
SFV__HOT_INLINE sfv_result sfv__pending_wait(sfv_pending *pending, int timeout_ms, uint64_t *deadline, sfv_work_completion *wc,
                                             bool poll_out_of_line) {
    if (SFV__LIKELY(pending && pending->state_ == SFV__PENDING_WAITING)) {
        sfv__ring *q;
        sfv__slot *s;
        SFV__PENDING_LIVE(pending, wc);
        if (SFV__LIKELY(sfv__pending_slot(pending, &q, &s))) return sfv__pending_take_as(pending, q, s, wc, true);
        if (poll_out_of_line) return sfv__pending_wait_poll(pending, q, s, timeout_ms, deadline, wc);
        return sfv__pending_block_as(pending, q, s, timeout_ms, deadline, wc, true);
    }
    return sfv__pending_other_wait(pending, timeout_ms, deadline, wc);
}
#if defined(SFV__API_STATIC)
#define SFV__WAIT_POLL_OUT_OF_LINE false
#else
#define SFV__WAIT_POLL_OUT_OF_LINE true
#endif
SFV__API_HOT sfv_result sfv_pending_wait(sfv_pending *pending, int timeout_ms, sfv_work_completion *wc) {
    return sfv__pending_wait(pending, timeout_ms, NULL, wc, SFV__WAIT_POLL_OUT_OF_LINE);
}

/* A wait after a failed one: the last error keeps describing the first failure, unless this
   one stops the call (a timeout, a handle not posted), whose error is the one to read then. */
SFV__SLOW sfv_result sfv__keep_first(sfv_pending *pending, int timeout_ms, uint64_t *deadline, sfv_work_completion *wc) {
    const sfv_error kept = sfv__last;
    const sfv_result r = sfv__pending_wait(pending, timeout_ms, deadline, wc, false);
    if (r == SFV_OK || r == SFV_ERR_WORK) sfv__last = kept;
    return r;
}

/* What sfv_pending_wait_all says of the handles it did not reach: zeros, SFV_NOT_DONE. */
SFV__SLOW void sfv__wcs_not_reached(sfv_work_completion *wcs, size_t from, size_t count) {
    size_t i;
    for (i = from; wcs && i < count; i++) {
        memset(&wcs[i], 0, sizeof wcs[i]);
        wcs[i].result = SFV_NOT_DONE;
    }
}
/* sfv_pending_wait_all's common path: waits for pendings[0 ..] in turn until one does not
   succeed; gives the index of that one (count: none) and its result in *r. Inlined twice, with
   and without wcs, so each handle costs no test of it. */
SFV__HOT_INLINE size_t sfv__wait_run(sfv_pending *pendings, size_t count, int timeout_ms, uint64_t *deadline, sfv_work_completion *wcs,
                                     sfv_result *r) {
    size_t i;
    for (i = 0; i < count; i++) {
        sfv_pending *const p = &pendings[i];
        SFV__NONNULL(p); /* (pendings is not NULL here: no test of each handle) */
        if (SFV__UNLIKELY((*r = sfv__pending_wait(p, timeout_ms, deadline, wcs ? &wcs[i] : NULL, false)) != SFV_OK)) break;
    }
    return i;
}
/* The handles after a failed work request (from on): the first failure is the one kept. */
SFV__SLOW sfv_result sfv__wait_rest(sfv_pending *pendings, size_t from, size_t count, int timeout_ms, uint64_t *deadline,
                                    sfv_work_completion *wcs) {
    size_t i;
    for (i = from; i < count; i++) {
        const sfv_result r = sfv__keep_first(&pendings[i], timeout_ms, deadline, wcs ? &wcs[i] : NULL);
        if (r != SFV_OK && r != SFV_ERR_WORK) { /* it stopped here: this handle and those after it are as they were */
            sfv__wcs_not_reached(wcs, i + 1, count);
            return r;
        }
    }
    return SFV_ERR_WORK;
}
SFV__API_HOT sfv_result sfv_pending_wait_all(sfv_pending *pendings, size_t count, int timeout_ms, sfv_work_completion *wcs) {
    uint64_t deadline = 0; /* one for all, read from the clock only when a handle has to wait */
    sfv_result r = SFV_OK;
    size_t i;
    if (SFV__UNLIKELY(!pendings && count)) { /* (no wc written for a count no array holds: a garbage count crashed here) */
        if (count <= (size_t)PTRDIFF_MAX / sizeof *wcs) sfv__wcs_not_reached(wcs, 0, count);
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_pending_wait_all", "pending handles (NULL) with count %zu", count);
    }
    i = wcs ? sfv__wait_run(pendings, count, timeout_ms, &deadline, wcs, &r) : sfv__wait_run(pendings, count, timeout_ms, &deadline, NULL, &r);
    if (SFV__LIKELY(i == count)) return SFV_OK;
    if (r != SFV_ERR_WORK) { /* it stopped here: this handle and those after it are as they were */
        sfv__wcs_not_reached(wcs, i + 1, count);
        return r;
    }
    return sfv__wait_rest(pendings, i + 1, count, timeout_ms, &deadline, wcs);
}

/* Whether a scope, a many-peer call or a scope's on_wc holds the channel: no destroy, no reset. */
static bool sfv__scoped(const sfv_channel *ch) { return ch->scope_depth > 0 || ch->settling > 0; }
/* While a scope consumes what fn left, its channels' queues are shut (their limits 0): a post
   from its on_wc, which the scope would take for its own (it consumes up to the queue's head)
   and hand to on_wc again, then takes the refusal path, which says why (sfv__post_refused), so
   no post pays for a test of it. They open again as the channel's state says when the last
   settle on it ends, under ev_lock as sfv__open_send: an event's break meanwhile stays. */
static void sfv__settle_shut(sfv_channel *ch) {
    if (ch->settling++) return;
    sfv__set_can(ch, false, false); /* (no lock: another thread's event only ever shuts them too) */
}
static void sfv__settle_open(sfv_channel *ch) {
    bool broken;
    if (--ch->settling) return;
    sfv__ev_enter(ch->pd->ctx);
    broken = SFV__XLOAD(ch->broken); /* (without a QP it is broken too: sfv__destroy_qp) */
    sfv__set_can(ch, ch->connected && !broken, !ch->srq && !broken);
    sfv__ev_leave(ch->pd->ctx);
}
/* Whether an abort left work in the NIC's hands: moving the QP to ERR and destroying it were
   both refused (nothing else stops it). */
static bool sfv__abort_stuck(const sfv_channel *ch) { return ch->qp && sfv__inflight(ch); }
SFV__SLOW sfv_result sfv__stuck(const sfv_channel *ch) {
    return sfv__fail(SFV_ERR_DRIVER, EIO, "wait", "the work did not complete, and the channel could not stop it (it was not flushed, and destroying the queue pair was refused): its buffers are still the NIC's; destroy the %s",
                     sfv__stuck_destroy(ch->owned));
}
/* After a wait that failed with r (a deadline, a failed poll): the channel aborted, so the work
   is flushed and consumed, the wait's error kept; r, or sfv__stuck's where nothing stopped it
   ("the buffers are free" would be untrue). */
static sfv_result sfv__abort_consume(sfv_channel *ch, sfv_pending *pending, sfv_work_completion *wc, sfv_result r) {
    bool stuck;
    SFV__KEEPING_ERROR(sfv__abort(ch); stuck = sfv__abort_stuck(ch); if (!stuck) sfv__ignore(sfv_pending_wait(pending, -1, wc)));
    return stuck ? sfv__wc_none(wc, sfv__stuck(ch)) : r;
}
/* Whether a consumed handle's work was flushed (its status byte, as sfv__pending_take_as reads it). */
static bool sfv__pending_flushed(const sfv_pending *pending) {
    return ((const unsigned char *)pending->done_)[offsetof(sfv__slot, status) - offsetof(sfv__slot, state)] == IBV_WC_WR_FLUSH_ERR;
}
/* Blocking calls: post, wait with the channel's deadline; on expiry flush, so buffers are free.
   Work that completed after all, between the wait's last poll and the flush (a message that came
   in just then), keeps its own result: a receive's data is there, and a timeout would have the
   caller drop a message taken from the stream; a failure is its own status's (the error the wait
   recorded is undone with it). Only work the flush ended is a timeout. (A wait that failed, the
   CQ's poll, stays that failure: the CQ is not to be trusted.) */
static sfv_result sfv__blocking(sfv_channel *ch, sfv_result posted, sfv_pending *pending, sfv_work_completion *wc) {
    sfv_result r;
    sfv__error_mark kept; /* (with the count: a scope's fn that made this call did not fail by it) */
    if (SFV__UNLIKELY(posted)) return sfv__wc_none(wc, posted); /* never a zero (SFV_OK) completion for a refused post */
    kept = sfv__error_mark_now();
    r = sfv_pending_wait(pending, -1, wc);
    if (r != SFV_OK && r != SFV_ERR_WORK) { /* timed out, or the wait failed (the CQ): flush all the same */
        r = sfv__abort_consume(ch, pending, wc, r);
        if (r == SFV_ERR_TIMEOUT && sfv_pending_done(pending) && !sfv__pending_flushed(pending)) { /* (not stuck) it completed as the flush began */
            sfv__error_back(&kept);
            return sfv__pending_result(pending, ch, wc);
        }
        if (wc && r == SFV_ERR_TIMEOUT) sfv__wc_timed_out(wc);
        else if (wc) wc->result = r;
    }
    return r;
}

SAFEVERBS_API sfv_result sfv_channel_send(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_send(ch, sges, n, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_send_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, uint32_t imm, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_send_imm(ch, sges, n, imm, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_receive(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_receive(ch, sges, n, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_write(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_write(ch, sges, n, remote, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_write_imm(sfv_channel *ch, const sfv_gather_element *sges, size_t n, sfv_remote_mr remote, uint32_t imm, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_write_imm(ch, sges, n, remote, imm, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_read(sfv_channel *ch, const sfv_scatter_element *sges, size_t n, sfv_remote_mr remote, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_read(ch, sges, n, remote, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_compare_swap(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t compare, uint64_t swap, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_compare_swap(ch, old, remote, compare, swap, &p), &p, wc);
}
SAFEVERBS_API sfv_result sfv_channel_fetch_add(sfv_channel *ch, const sfv_scatter_element *old, sfv_remote_mr remote, uint64_t add, sfv_work_completion *wc) {
    sfv_pending p;
    p.state_ = SFV__PENDING_NONE; /* (read by a refused post) */
    return sfv__blocking(ch, sfv_channel_post_fetch_add(ch, old, remote, add, &p), &p, wc);
}

/* >>impl scopes ----------------------------------------------------------------------------- */
/* Waits for work request `seq` of q until `deadline` and consumes it into wc. If the wait
   fails (the deadline passed), the channel is aborted first, so the work is flushed and its
   buffers are free. Returns what the wait returned. Work the abort could not end is not
   consumed: it stays posted, its buffers the NIC's (and in flight, >>impl inflight) until the
   channel is destroyed, as after a blocking call's (sfv__abort_consume). (The wait's timeout -1,
   the channel's: its deadline is given, and a wait with one reads the device's events once more
   when it passes, >>events.) */
static sfv_result sfv__take_by(sfv_channel *ch, sfv__ring *q, uint64_t seq, uint64_t deadline, sfv_work_completion *wc, bool *stuck_out) {
    sfv__slot *s = &q->slots[seq & q->mask];
    sfv_result w = SFV_OK;
    /* (an abort that could not end the channel's work, not flushed and its QP's destroy refused,
       is not tried again for each work request after it: each try waits out its drain, up to 5 s,
       so a scope of many would overrun its deadline by that many times) */
    if (!sfv__slot_done(q, s, seq) && (w = sfv__wait_slot(ch, q, s, seq, &deadline, -1, false)) != SFV_OK &&
        !(ch->aborted && sfv__abort_stuck(ch)))
        sfv__abort(ch);
    if (!sfv__slot_done(q, s, seq)) { /* the abort could not end it: never a success, and said so */
        sfv__slot stuck = *s;
        sfv__finish_quiet(&stuck, true);
        sfv__wc_make(wc, &stuck);
        if (stuck_out) *stuck_out = true;
        return sfv__stuck(ch);
    }
    sfv__wc_make(wc, s);
    sfv__release(q, s);
    return w;
}

/* Waits for and consumes every work request of q from seq `from` on; counts the failures.
   After the deadline, the channel is aborted so that nothing stays in flight. */
/* The op a scope's fence is tracked as (sfv__scope_fence): never one the user posts, and never
   handed to the user unless it failed. */
#define SFV__OP_FENCE 0x7F

/* Where a scope hands its completions (sfv_channel_scope_wc); fn NULL: nowhere. */
typedef struct sfv__sink { sfv_scope_wc_fn fn; void *user; } sfv__sink;

/* (*expired: the channel's deadline passed, and what it flushed after that are timeouts too, as in
   a many-peer call; *stuck: work it took could not be ended, its buffers still the NIC's) */
static void sfv__settle(sfv_channel *ch, sfv__ring *q, uint64_t from, uint64_t deadline, sfv_scope_report *rep, const sfv__sink *sink, bool *expired,
                        bool *stuck) {
    uint64_t seq;
    for (seq = from > q->tail ? from : q->tail; seq < q->head; seq++) {
        const sfv__slot *s = &q->slots[seq & q->mask];
        sfv_work_completion wc;
        sfv_result w;
        bool fence, failed;
        /* consumed by its handle; below the tail too, whatever its state: a batch at the tail that
           on_wc took keeps every place's state but its last's (sfv__pending_take_batch) */
        if (seq < q->tail || s->state == SFV__SLOT_FREE || s->seq != seq) continue;
        if (s->state == SFV__SLOT_INJECT) continue; /* its place comes back with the work after it (the fence) */
        fence = s->op == SFV__OP_FENCE; /* the scope's own (sfv__scope_fence): the user's only if it failed */
        w = sfv__take_by(ch, q, seq, deadline, &wc, stuck);
        if (w == SFV_ERR_TIMEOUT) *expired = true;
        if (w == SFV_ERR_TIMEOUT && wc.status != SFV_WC_WR_FLUSH_ERR) w = SFV_OK; /* it completed as the flush began: its own result (sfv__blocking) */
        failed = wc.result != SFV_OK || w != SFV_OK;
        if (!fence || failed) rep->auto_polled++;
        if (failed) { /* a failed wait aborted the channel: a failure */
            if (w != SFV_OK) wc.result = w;
            sfv__wc_expired(&wc, w, *expired);
            if (rep->failed++ == 0) rep->first_error = wc;
        }
        if (sink->fn && (!fence || failed)) sink->fn(&wc, sink->user);
    }
}

/* >>impl events ----------------------------------------------------------------------------- */
/* Any thread may read a context's events (a wait, sfv_context_events), so the reading, the
   context's lists of channels and SRQs and its queue of events are under ev_lock. Whoever reads
   an event marks what it breaks (a flag and the channel's post tests: aligned words, written by
   this thread, read by the channel's owner); the owner's next wait flushes the channel. A
   channel on the list is alive: destroy takes it off under the lock before it frees it. */
static void sfv__ev_enter(sfv_context *ctx) { sfv__spin_enter(&ctx->ev_lock); }
static void sfv__ev_leave(sfv_context *ctx) { sfv__spin_leave(&ctx->ev_lock); }

static uint32_t sfv__event_break_dead(sfv_channel *ch, sfv_event_type type);
/* A channel or SRQ made after the device was found deleted (under ev_lock): broken as by its
   DEVICE_FATAL (sfv__device_probe). The device's verbs may still work (rxe and siw keep a deleted
   device until the process closes it), and nothing else would ever end its waits. */
static void sfv__events_gone(sfv_context *ctx, sfv_channel *ch) {
    if (ctx->gone) (void)sfv__event_break_dead(ch, SFV_EVENT_DEVICE_FATAL);
}
static void sfv__events_add_channel(sfv_context *ctx, sfv_channel *ch) {
    sfv__ev_enter(ctx);
    ch->ctx_next = ctx->channels;
    ctx->channels = ch;
    sfv__events_gone(ctx, ch);
    sfv__ev_leave(ctx);
}
/* A DMA-BUF MR on pd: from now on no channel of its context sends inline (its elements may hold
   iovas, which the CPU's copy would read as host addresses; any PD of the context may wrap the
   same verbs PD, sfv_pd_wrap); injects, from plain memory, still do. A channel is listed before
   its QP is made, whose inline limit is set under the same lock. Nor of a twin (another context
   over the same verbs context): its PDs may wrap that verbs PD too; a twin made later takes the
   mark in sfv__contexts_add. */
static void sfv__pd_no_inline(sfv_pd *pd) {
    sfv_context *c;
    sfv_channel *ch;
    sfv__contexts_enter(); /* (before any ev_lock, as sfv__contexts_add takes them) */
    for (c = sfv__contexts; c; c = c->all_next) {
        if (c != pd->ctx && c->ctx != pd->ctx->ctx) continue;
        sfv__ev_enter(c);
        c->dmabuf = true;
        for (ch = c->channels; ch; ch = ch->ctx_next) SFV__XSET(ch->inline_max, 0);
        sfv__ev_leave(c);
    }
    sfv__contexts_leave();
}
static void sfv__events_remove_channel(sfv_context *ctx, sfv_channel *ch) {
    sfv_channel **at;
    sfv__ev_enter(ctx);
    for (at = &ctx->channels; *at; at = &(*at)->ctx_next)
        if (*at == ch) {
            *at = ch->ctx_next;
            break;
        }
    sfv__ev_leave(ctx);
}

SAFEVERBS_API const char *sfv_event_type_str(sfv_event_type t) {
    switch (t) {
    case SFV_EVENT_OTHER: return "OTHER";
    case SFV_EVENT_PORT_ACTIVE: return "PORT_ACTIVE";
    case SFV_EVENT_PORT_ERR: return "PORT_ERR";
    case SFV_EVENT_LID_CHANGE: return "LID_CHANGE";
    case SFV_EVENT_PKEY_CHANGE: return "PKEY_CHANGE";
    case SFV_EVENT_GID_CHANGE: return "GID_CHANGE";
    case SFV_EVENT_SM_CHANGE: return "SM_CHANGE";
    case SFV_EVENT_CLIENT_REREGISTER: return "CLIENT_REREGISTER";
    case SFV_EVENT_QP_FATAL: return "QP_FATAL";
    case SFV_EVENT_QP_REQ_ERR: return "QP_REQ_ERR";
    case SFV_EVENT_QP_ACCESS_ERR: return "QP_ACCESS_ERR";
    case SFV_EVENT_COMM_EST: return "COMM_EST";
    case SFV_EVENT_SQ_DRAINED: return "SQ_DRAINED";
    case SFV_EVENT_PATH_MIG: return "PATH_MIG";
    case SFV_EVENT_PATH_MIG_ERR: return "PATH_MIG_ERR";
    case SFV_EVENT_QP_LAST_WQE_REACHED: return "QP_LAST_WQE_REACHED";
    case SFV_EVENT_CQ_ERR: return "CQ_ERR";
    case SFV_EVENT_SRQ_LIMIT_REACHED: return "SRQ_LIMIT_REACHED";
    case SFV_EVENT_SRQ_ERR: return "SRQ_ERR";
    case SFV_EVENT_DEVICE_FATAL: return "DEVICE_FATAL";
    }
    return "UNKNOWN";
}

static sfv_event_type sfv__event_type(enum ibv_event_type t) {
    switch (t) {
    case IBV_EVENT_PORT_ACTIVE: return SFV_EVENT_PORT_ACTIVE;
    case IBV_EVENT_PORT_ERR: return SFV_EVENT_PORT_ERR;
    case IBV_EVENT_LID_CHANGE: return SFV_EVENT_LID_CHANGE;
    case IBV_EVENT_PKEY_CHANGE: return SFV_EVENT_PKEY_CHANGE;
    case IBV_EVENT_GID_CHANGE: return SFV_EVENT_GID_CHANGE;
    case IBV_EVENT_SM_CHANGE: return SFV_EVENT_SM_CHANGE;
    case IBV_EVENT_CLIENT_REREGISTER: return SFV_EVENT_CLIENT_REREGISTER;
    case IBV_EVENT_QP_FATAL: return SFV_EVENT_QP_FATAL;
    case IBV_EVENT_QP_REQ_ERR: return SFV_EVENT_QP_REQ_ERR;
    case IBV_EVENT_QP_ACCESS_ERR: return SFV_EVENT_QP_ACCESS_ERR;
    case IBV_EVENT_COMM_EST: return SFV_EVENT_COMM_EST;
    case IBV_EVENT_SQ_DRAINED: return SFV_EVENT_SQ_DRAINED;
    case IBV_EVENT_PATH_MIG: return SFV_EVENT_PATH_MIG;
    case IBV_EVENT_PATH_MIG_ERR: return SFV_EVENT_PATH_MIG_ERR;
    case IBV_EVENT_QP_LAST_WQE_REACHED: return SFV_EVENT_QP_LAST_WQE_REACHED;
    case IBV_EVENT_CQ_ERR: return SFV_EVENT_CQ_ERR;
    case IBV_EVENT_SRQ_LIMIT_REACHED: return SFV_EVENT_SRQ_LIMIT_REACHED;
    case IBV_EVENT_SRQ_ERR: return SFV_EVENT_SRQ_ERR;
    case IBV_EVENT_DEVICE_FATAL: return SFV_EVENT_DEVICE_FATAL;
    default: return SFV_EVENT_OTHER;
    }
}

/* Marks a channel broken by an event (under ev_lock, from any thread): its posts are refused at
   once, and its owner's next wait flushes it (sfv__async_abort). */
static uint32_t sfv__event_break(sfv_channel *ch, uint8_t cause, sfv_event_type type) {
    if (sfv__async_cause(ch)) return 0;
    SFV__XSET(ch->async_event, (uint8_t)type);
    __atomic_store_n(&ch->async_cause, cause, __ATOMIC_RELEASE);
    sfv__mark_broken(ch); /* after why (its limits' stores release it: sfv__post_refused) */
    return 1;
}
/* The same for an event after which its CQ is not to be used again (CQ_ERR, DEVICE_FATAL): a
   reset, which keeps the CQ, is refused. */
static uint32_t sfv__event_break_dead(sfv_channel *ch, sfv_event_type type) {
    SFV__XSET(ch->cq_dead, true);
    return sfv__event_break(ch, SFV__CAUSE_FATAL_EVENT, type);
}

static void sfv__srq_event(sfv_context *ctx, const struct ibv_async_event *e, sfv_event *ev);

/* What one event breaks, and its record for the queue. False: not to be queued (the device's
   DEVICE_FATAL after its deletion was queued as one already). */
static bool sfv__event_handle(sfv_context *ctx, const struct ibv_async_event *e, sfv_event *ev) {
    sfv_channel *ch;
    bool queue = true;
    memset(ev, 0, sizeof *ev);
    ev->type = sfv__event_type(e->event_type);
    ev->raw_type = (int)e->event_type;
    switch (ev->type) {
    case SFV_EVENT_PORT_ACTIVE: case SFV_EVENT_LID_CHANGE: case SFV_EVENT_PKEY_CHANGE: case SFV_EVENT_GID_CHANGE:
    case SFV_EVENT_SM_CHANGE: case SFV_EVENT_CLIENT_REREGISTER:
        ev->port = (uint8_t)e->element.port_num;
        break;
    case SFV_EVENT_PORT_ERR:
        ev->port = (uint8_t)e->element.port_num;
        for (ch = ctx->channels; ch; ch = ch->ctx_next)
            if (ch->desc.port == ev->port) {
                SFV__XSET(ch->port_errs, ch->port_errs + 1); /* (a reset running beside keeps it: sfv_channel_reset) */
                ev->channels_broken += sfv__event_break(ch, SFV__CAUSE_PORT_DOWN, ev->type);
            }
        break;
    case SFV_EVENT_DEVICE_FATAL: {
        sfv_srq *srq;
        SFV__XSET(ctx->probe, false); /* once: its node going after it adds no second one */
        /* nor the device's own after the probe saw its node go: a NIC with disassociate loses its
           node first (ib_uverbs_remove_one: cdev_device_del), then sends each process DEVICE_FATAL */
        queue = !ctx->gone;
        for (ch = ctx->channels; ch; ch = ch->ctx_next) ev->channels_broken += sfv__event_break_dead(ch, ev->type);
        for (srq = ctx->srqs; srq; srq = srq->ctx_next) (void)sfv__event_break(&srq->core, SFV__CAUSE_FATAL_EVENT, ev->type); /* (no user channel) */
        break;
    }
    case SFV_EVENT_QP_FATAL: case SFV_EVENT_QP_REQ_ERR: case SFV_EVENT_QP_ACCESS_ERR: case SFV_EVENT_COMM_EST:
    case SFV_EVENT_SQ_DRAINED: case SFV_EVENT_PATH_MIG: case SFV_EVENT_PATH_MIG_ERR: case SFV_EVENT_QP_LAST_WQE_REACHED:
        ev->qp_num = e->element.qp ? e->element.qp->qp_num : 0;
        for (ch = ctx->channels; ch; ch = ch->ctx_next)
            if (SFV__XLOAD(ch->qp) && SFV__XLOAD(ch->qp) == e->element.qp) {
                ev->channel = ch;
                if (ev->type == SFV_EVENT_QP_FATAL || ev->type == SFV_EVENT_QP_REQ_ERR || ev->type == SFV_EVENT_QP_ACCESS_ERR)
                    ev->channels_broken += sfv__event_break(ch, SFV__CAUSE_FATAL_EVENT, ev->type);
                break;
            }
        break;
    case SFV_EVENT_CQ_ERR:
        for (ch = ctx->channels; ch; ch = ch->ctx_next)
            if (SFV__XLOAD(ch->cq) && SFV__XLOAD(ch->cq) == e->element.cq) {
                ev->channel = ch;
                ev->channels_broken += sfv__event_break_dead(ch, ev->type);
            }
        sfv__srq_event(ctx, e, ev);
        break;
    case SFV_EVENT_SRQ_LIMIT_REACHED: case SFV_EVENT_SRQ_ERR:
        sfv__srq_event(ctx, e, ev);
        break;
    case SFV_EVENT_OTHER:
        break;
    }
    return queue;
}

/* Queues an event (the oldest goes when the queue is full) and wakes sfv_context_event_fd. */
static void sfv__event_queue(sfv_context *ctx, const sfv_event *ev) {
    if (ctx->ev_n == SFV__EVENT_QUEUE) { /* the oldest goes; the next oldest counts it */
        const uint64_t lost = ctx->ev_queue[ctx->ev_first].lost_before + 1;
        ctx->ev_first = (ctx->ev_first + 1) % SFV__EVENT_QUEUE;
        ctx->ev_n--;
        ctx->ev_queue[ctx->ev_first].lost_before += lost;
    }
    ctx->ev_queue[(ctx->ev_first + ctx->ev_n) % SFV__EVENT_QUEUE] = *ev;
    ctx->ev_n++;
    if (ctx->ev_efd >= 0) {
        const uint64_t one = 1;
        ssize_t w = write(ctx->ev_efd, &one, sizeof one); /* it cannot block: a counter far from its limit */
        (void)w;
    }
}

/* A device deleted while a process has it open: a NIC that can let go of the process's queues
   (disassociate) sends DEVICE_FATAL; rxe and siw cannot, so the kernel sends nothing and holds the
   delete until the process closes the device. What shows it is the device's uverbs node leaving
   sysfs (dev_path) at once: whoever reads the events looks for it too, and its absence is handled,
   once, as a DEVICE_FATAL (queued, raw_type IBV_EVENT_DEVICE_FATAL). The kernel frees its number
   at once, so a device registered since may have the same path: another node there (another
   inode) is the deletion too. One stat(2), only where the events are read or an event-mode sleep
   found nothing (>>events). */
static void sfv__device_probe(sfv_context *ctx) {
    struct ibv_async_event e;
    struct stat st;
    sfv_event ev;
    if (!SFV__XLOAD(ctx->probe) || SFV__XLOAD(ctx->gone)) return;
    if (stat(ctx->ctx->device->dev_path, &st) == 0 ? st.st_ino == ctx->node : errno != ENOENT) return;
    sfv__ev_enter(ctx);
    if (ctx->gone || !ctx->probe) {
        sfv__ev_leave(ctx);
        return;
    }
    memset(&e, 0, sizeof e);
    e.event_type = IBV_EVENT_DEVICE_FATAL;
    (void)sfv__event_handle(ctx, &e, &ev); /* (before gone: this one is queued) */
    SFV__XSET(ctx->gone, true);
    sfv__event_queue(ctx, &ev);
    sfv__ev_leave(ctx);
    SFV__LOG(SFV_LOG_INFO, "%s: the device was deleted (%s is gone): DEVICE_FATAL, %u channel(s) broken; close it", ctx->name,
             ctx->ctx->device->dev_path, (unsigned)ev.channels_broken);
}

/* An event read through ctx, for the other contexts over its verbs context (sfv_context_wrap
   twice): each breaks what it has of it and queues it, as if it had read it itself. Under
   sfv__contexts_lock and ctx's ev_lock: a twin's ev_lock is taken only so, after both. */
static uint32_t sfv__events_to_twins(sfv_context *ctx, const struct ibv_async_event *e) {
    sfv_context *t;
    uint32_t broken = 0;
    for (t = sfv__contexts; t; t = t->all_next) {
        sfv_event ev;
        if (t == ctx || t->ctx != ctx->ctx) continue;
        sfv__ev_enter(t);
        if (sfv__event_handle(t, e, &ev)) sfv__event_queue(t, &ev);
        sfv__ev_leave(t);
        broken += ev.channels_broken;
    }
    return broken;
}

/* Reads every event the device has (its fd is non-blocking), acts on each, acks it at once; and
   whether the device is still there (sfv__device_probe). A verbs context under two safeverbs
   contexts gives each event once, to whichever reads first: that one hands it to the other too. */
/* Takes what reading ctx's events needs: its ev_lock and, where it has a twin, first
   sfv__contexts_lock (whoever holds two ev_locks holds this). A twin is made under ctx's ev_lock
   (sfv__contexts_add), so twinned is looked at again under it: one made while this thread waited
   for the lock, or logged with both released, is not missed. True: the contexts' lock is held. */
static bool sfv__events_lock(sfv_context *ctx) {
    for (;;) {
        const bool twinned = __atomic_load_n(&ctx->twinned, __ATOMIC_ACQUIRE);
        if (twinned) sfv__contexts_enter();
        sfv__ev_enter(ctx);
        if (twinned || !__atomic_load_n(&ctx->twinned, __ATOMIC_ACQUIRE)) return twinned; /* (a twin gone since: harmless) */
        sfv__ev_leave(ctx);
    }
}
static void sfv__events_read(sfv_context *ctx) {
    struct ibv_async_event e;
    bool twinned = sfv__events_lock(ctx);
    while (ibv_get_async_event(ctx->ctx, &e) == 0) {
        sfv_event ev;
        uint32_t broken;
        const bool queue = sfv__event_handle(ctx, &e, &ev);
        broken = ev.channels_broken + (twinned ? sfv__events_to_twins(ctx, &e) : 0);
        ibv_ack_async_event(&e); /* at once: a destroy of its object waits for the ack */
        if (queue) sfv__event_queue(ctx, &ev);
        if (broken) { /* logged with the locks released: the log fn may call safeverbs */
            sfv__ev_leave(ctx);
            if (twinned) sfv__contexts_leave();
            SFV__LOG(SFV_LOG_INFO, "%s: %s broke %u channel(s)", ctx->name, sfv_event_type_str(ev.type), (unsigned)broken);
            twinned = sfv__events_lock(ctx); /* (a twin may have been made meanwhile) */
        }
    }
    sfv__ev_leave(ctx);
    if (twinned) sfv__contexts_leave();
    sfv__device_probe(ctx);
}

SAFEVERBS_API sfv_result sfv_context_event_fd(sfv_context *ctx, int *fd_out) {
    struct epoll_event ee;
    int efd = -1, epfd = -1;
    SFV__CHECK_ARG(fd_out, "fd_out");
    *fd_out = -1;
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    sfv__ev_enter(ctx);
    if (ctx->ev_epfd < 0) {
        efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        epfd = efd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
        memset(&ee, 0, sizeof ee);
        ee.events = EPOLLIN;
        if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ctx->ctx->async_fd, &ee) != 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ee) != 0) {
            const int errnum = errno;
            if (epfd >= 0) close(epfd);
            if (efd >= 0) close(efd);
            sfv__ev_leave(ctx);
            return sfv__fail_verb(efd < 0 ? "eventfd" : epfd < 0 ? "epoll_create1" : "epoll_ctl", errnum);
        }
        ctx->ev_efd = efd;
        ctx->ev_epfd = epfd;
        if (ctx->ev_n) {
            const uint64_t one = 1;
            ssize_t w = write(efd, &one, sizeof one);
            (void)w;
        }
    }
    *fd_out = ctx->ev_epfd;
    sfv__ev_leave(ctx);
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_context_events(sfv_context *ctx, sfv_event *out, size_t max, size_t *count) {
    size_t k;
    SFV__CHECK_ARG(count, "count");
    *count = 0;
    SFV__CHECK_HANDLE(ctx, SFV__H_CONTEXT, "context");
    SFV__CHECK_ARG(out || max == 0, "out");
    sfv__events_read(ctx);
    sfv__ev_enter(ctx);
    for (k = 0; k < max && ctx->ev_n; k++) {
        out[k] = ctx->ev_queue[ctx->ev_first];
        ctx->ev_first = (ctx->ev_first + 1) % SFV__EVENT_QUEUE;
        ctx->ev_n--;
    }
    if (!ctx->ev_n && ctx->ev_efd >= 0) {
        uint64_t v;
        ssize_t rd = read(ctx->ev_efd, &v, sizeof v); /* the queue is empty: the fd is quiet again */
        (void)rd;
    }
    sfv__ev_leave(ctx);
    *count = k;
    return SFV_OK;
}

SAFEVERBS_API bool sfv_channel_broken(const sfv_channel *ch, sfv_event_type *by_event) {
    if (by_event) *by_event = SFV_EVENT_OTHER;
    if (!ch) return true;
    if (by_event && sfv__async_cause(ch)) *by_event = (sfv_event_type)SFV__XLOAD(ch->async_event);
    return SFV__XLOAD(ch->broken) || sfv__async_cause(ch);
}

/* >>impl srq -------------------------------------------------------------------------------- */
/* The SRQ's receives live in its inner channel's receive ring; its `completed` is kept at a value
   no place has, so that every completion takes the slow path (sfv__complete_slow -> here): an
   SRQ's receives complete in any order, so nothing is caught up in order. A success keeps the
   QP number of the channel it came in on in vendor_err (unused by a success), a failure in
   byte_len (unused by a failure). (That value, SFV__SRQ_UNORDERED, is defined with the ring.) */

static void sfv__srq_complete(sfv__ring *q, const struct ibv_wc *w) {
    const uint64_t seq = w->wr_id >> 1;
    sfv__slot *s;
    if (!(w->wr_id & 1) || seq < q->tail || seq >= q->head) return; /* not one of its receives */
    s = &q->slots[seq & q->mask];
    if (s->seq != seq || s->state != SFV__SLOT_INFLIGHT) return;
    if (w->status == IBV_WC_SUCCESS) {
        sfv__complete_ok(s, w);
        s->vendor_err = w->qp_num;
    } else {
        sfv_channel *c; /* the channel it came in on: a failed receive left its QP in the error state */
        for (c = q->ch->core_of->channels; c && !(c->qp && c->qp->qp_num == w->qp_num); c = c->srq_next) {}
        s->status = sfv__status_byte(w->status);
        s->vendor_err = w->vendor_err;
        s->has_imm = (uint8_t)(c ? sfv__failure_class(c, SFV_WC_OP_RECV, w->status) : sfv_wc_status_class((sfv_wc_status)w->status));
        s->byte_len = w->qp_num;
        if (c) sfv__break(c); /* as its own receive's failure would (sfv__complete_slow): its later work says why */
    }
    s->state = SFV__SLOT_DONE;
}

/* The channel a finished SRQ receive came in on, if it still lives. */
static const sfv_channel *sfv__srq_channel(const sfv_srq *srq, const sfv__slot *s) {
    const uint32_t qpn = s->status == IBV_WC_SUCCESS ? s->vendor_err : s->byte_len;
    const sfv_channel *ch;
    for (ch = srq->channels; ch; ch = ch->srq_next)
        if (ch->qp && ch->qp->qp_num == qpn) return ch;
    return NULL;
}

/* A queue pair of the SRQ is gone (its channel destroyed or reset): its receives done and not
   consumed say no channel, not whichever takes its number next (sfv__srq_channel). */
static void sfv__srq_forget_qp(sfv_srq *srq, uint32_t qpn) {
    sfv__ring *q = &srq->core.rq;
    uint64_t seq;
    for (seq = q->tail; seq < q->head; seq++) {
        sfv__slot *s = &q->slots[seq & q->mask];
        if (s->seq != seq || s->state != SFV__SLOT_DONE) continue;
        if (s->status == IBV_WC_SUCCESS && s->vendor_err == qpn) s->vendor_err = 0; /* (no RC queue pair is number 0) */
        else if (s->status != IBV_WC_SUCCESS && s->byte_len == qpn) s->byte_len = 0;
    }
}

/* The SRQ's list of channels is under ev_lock, as the context's: an event read on any thread
   breaks every channel on it (sfv__srq_event). */
static void sfv__srq_attach(sfv_srq *srq, sfv_channel *ch) {
    sfv__ref(&srq->refs);
    ch->srq = srq;
    sfv__set_can_recv(ch, false); /* its receives are the SRQ's */
    sfv__ev_enter(ch->pd->ctx);
    ch->srq_next = srq->channels;
    srq->channels = ch;
    if (sfv__async_cause(&srq->core)) /* an event broke the SRQ after sfv__qp_make looked: this channel too */
        (void)sfv__event_break(ch, SFV__CAUSE_FATAL_EVENT, (sfv_event_type)SFV__XLOAD(srq->core.async_event));
    sfv__ev_leave(ch->pd->ctx);
}

static sfv_result sfv__srq_unref(sfv_srq *srq);
/* Takes ch off the SRQ and drops its reference. Where that was the last one and the SRQ's destroy
   is refused, ch stays on it (the reference back as ch's) and the failure is returned: nobody else
   holds the SRQ, so only ch's destroy, repeated, can free it. */
static sfv_result sfv__srq_detach(sfv_srq *srq, sfv_channel *ch) {
    sfv_channel **at;
    sfv_result r;
    sfv__ev_enter(ch->pd->ctx);
    for (at = &srq->channels; *at; at = &(*at)->srq_next)
        if (*at == ch) {
            *at = ch->srq_next;
            break;
        }
    sfv__ev_leave(ch->pd->ctx);
    ch->srq = NULL;
    r = sfv__srq_unref(srq);
    if (r) {
        sfv__ev_enter(ch->pd->ctx);
        ch->srq_next = srq->channels;
        srq->channels = ch;
        sfv__ev_leave(ch->pd->ctx);
        ch->srq = srq;
    }
    return r;
}

static void sfv__srq_event(sfv_context *ctx, const struct ibv_async_event *e, sfv_event *ev) {
    sfv_srq *srq;
    for (srq = ctx->srqs; srq; srq = srq->ctx_next) {
        if (ev->type == SFV_EVENT_CQ_ERR ? srq->core.cq != e->element.cq : SFV__XLOAD(srq->srq) != e->element.srq) continue;
        ev->srq = srq;
        if (ev->type != SFV_EVENT_SRQ_LIMIT_REACHED) { /* the SRQ (not a user channel: not counted) and every channel on it */
            sfv_channel *c;
            (void)sfv__event_break(&srq->core, SFV__CAUSE_FATAL_EVENT, ev->type);
            for (c = srq->channels; c; c = c->srq_next) ev->channels_broken += sfv__event_break(c, SFV__CAUSE_FATAL_EVENT, ev->type);
        }
        return;
    }
}

SAFEVERBS_API sfv_result sfv_create_srq(sfv_pd *pd, const sfv_srq_desc *desc, sfv_srq **out) {
    static const char fn[] = "sfv_create_srq";
    struct ibv_srq_init_attr si;
    sfv_srq_desc d;
    sfv_srq *srq;
    sfv_channel *core;
    sfv_result r;
    const struct ibv_device_attr *a;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    a = &pd->ctx->attr;
    if (desc) d = *desc; else memset(&d, 0, sizeof d);
    if (a->max_srq <= 0) return sfv__fail(SFV_ERR_UNSUPPORTED, EOPNOTSUPP, fn, "%s has no shared receive queues (max_srq 0)", pd->ctx->name);
    if (!d.max_wr) d.max_wr = 256;
    if (!d.max_sge) d.max_sge = 4;
    if (!d.timeout_ms) d.timeout_ms = 10000;
    if (d.max_wr > (uint32_t)a->max_srq_wr) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_srq_desc.max_wr = %u is out of range (1 .. %d, the device's max_srq_wr)", (unsigned)d.max_wr, a->max_srq_wr);
    /* its receives complete to a CQ of max_wr entries, which a device makes only up to its max_cqe
       (rxe on Linux 6.x: max_srq_wr 2^20, max_cqe 32767): said here, not as EINVAL from the CQ's verb */
    if (d.max_wr > (uint32_t)a->max_cqe)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_srq_desc.max_wr = %u is out of range (1 .. %d, the device's max_cqe: its receives complete to a CQ of max_wr entries)",
                         (unsigned)d.max_wr, a->max_cqe);
    if (d.max_sge > (uint32_t)a->max_srq_sge) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_srq_desc.max_sge = %u is out of range (1 .. %d, the device's max_srq_sge)", (unsigned)d.max_sge, a->max_srq_sge);
    if (d.limit >= d.max_wr) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_srq_desc.limit = %u is out of range (0 .. max_wr - 1)", (unsigned)d.limit);
    if (d.timeout_ms > 86400000u) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_srq_desc.timeout_ms = %u is out of range (1 .. 86400000)", (unsigned)d.timeout_ms);
    srq = (sfv_srq *)sfv__handle_new(sizeof *srq, SFV__H_SRQ);
    if (!srq) return sfv__fail_verb("calloc", ENOMEM);
    srq->desc = d;
    core = &srq->core;
    core->core_of = srq;
    core->desc.max_recv_wr = d.max_wr;
    core->desc.max_recv_sge = d.max_sge;
    core->desc.timeout_ms = d.timeout_ms;
    core->desc.wait_mode = SFV_WAIT_BUSY;
    r = sfv__ring_init(&core->sq, core, 1);
    if (r) goto free_srq;
    r = sfv__ring_init(&core->rq, core, d.max_wr);
    if (r) goto free_sq;
    core->rq.completed = SFV__SRQ_UNORDERED;
    errno = 0;
    core->cq = ibv_create_cq(pd->ctx->ctx, (int)d.max_wr, core, NULL, 0);
    if (!core->cq) {
        r = sfv__fail_verb("ibv_create_cq", errno);
        goto free_rq;
    }
    memset(&si, 0, sizeof si);
    si.attr.max_wr = d.max_wr;
    si.attr.max_sge = d.max_sge;
    si.attr.srq_limit = d.limit;
    errno = 0;
    srq->srq = ibv_create_srq(pd->pd, &si);
    if (!srq->srq) {
        r = sfv__fail_verb("ibv_create_srq", errno);
        goto destroy_cq;
    }
    if (d.limit) { /* armed by ibv_modify_srq: srq_limit is "irrelevant for ibv_create_srq" (its man page) */
        struct ibv_srq_attr sa;
        int rc;
        memset(&sa, 0, sizeof sa);
        sa.srq_limit = d.limit;
        rc = ibv_modify_srq(srq->srq, &sa, IBV_SRQ_LIMIT);
        if (rc) {
            r = sfv__fail_verb("ibv_modify_srq", rc);
            goto destroy_srq;
        }
    }
    if (!sfv__live_add(core)) {
        r = sfv__fail_verb("malloc", ENOMEM);
        goto destroy_srq;
    }
    sfv__ref(&pd->refs);
    core->pd = pd;
    sfv__set_can(core, false, true);
    srq->refs = 1;
    sfv__ev_enter(pd->ctx);
    srq->ctx_next = pd->ctx->srqs;
    pd->ctx->srqs = srq;
    sfv__events_gone(pd->ctx, core);
    sfv__ev_leave(pd->ctx);
    *out = srq;
    return SFV_OK;
destroy_srq: /* a refusal here or below leaves the rest to the PD, as a channel's create does: dropped, the SRQ and
                CQ would hold the device for good */
    if (ibv_destroy_srq(srq->srq) != 0) goto unmade;
    srq->srq = NULL;
destroy_cq:
    if (ibv_destroy_cq(core->cq) != 0) goto unmade;
free_rq:
    SFV_FREE(core->rq.slots);
free_sq:
    SFV_FREE(core->sq.slots);
free_srq:
    sfv__handle_free(srq, SFV__H_SRQ);
    return r;
unmade: /* its inner channel on the PD's orphans (sfv__channel_unmade_free: the SRQ, then its CQ) */
    sfv__pd_orphan_unmade(pd, core);
    return r;
}

/* Drops a reference; the last one destroys the SRQ (no channel uses it then). What it held is
   never taken by the NIC after ibv_destroy_srq: its slots are marked flushed. */
static sfv_result sfv__srq_unref(sfv_srq *srq) {
    sfv_context *ctx;
    sfv_srq **at;
    uint64_t seq;
    int rc;
    if (!srq || !sfv__unref(&srq->refs)) return SFV_OK;
    ctx = srq->core.pd->ctx;
    /* off the context's list first: an event is compared with its SRQ and CQ, whose memory may be
       another's once destroyed (no channel uses it: nothing else for an event to break) */
    sfv__ev_enter(ctx);
    for (at = &ctx->srqs; *at; at = &(*at)->ctx_next)
        if (*at == srq) {
            *at = srq->ctx_next;
            break;
        }
    sfv__ev_leave(ctx);
    rc = srq->srq ? ibv_destroy_srq(srq->srq) : 0; /* NULL: gone in an earlier try */
    if (rc) {
        sfv__ev_enter(ctx);
        srq->ctx_next = ctx->srqs;
        ctx->srqs = srq;
        sfv__ev_leave(ctx);
        sfv__ref(&srq->refs);
        return sfv__fail_verb("ibv_destroy_srq", rc);
    }
    srq->srq = NULL;
    rc = ibv_destroy_cq(srq->core.cq);
    if (rc) { /* the SRQ is gone, its CQ is not: kept, refusing posts, so the call can be repeated */
        sfv__break(&srq->core);
        sfv__ref(&srq->refs);
        return sfv__fail_verb("ibv_destroy_cq", rc);
    }
    for (seq = srq->core.rq.tail; seq < srq->core.rq.head; seq++) {
        sfv__slot *s = &srq->core.rq.slots[seq & srq->core.rq.mask];
        if (s->state == SFV__SLOT_INFLIGHT) sfv__finish_quiet(s, true);
    }
    SFV__INFLIGHT_FORGET(&srq->core);
    sfv__live_remove(&srq->core);
    SFV_FREE(srq->core.sq.slots);
    SFV_FREE(srq->core.rq.slots);
    SFV__KEEPING_ERROR((void)sfv__pd_unref(srq->core.pd));
    sfv__handle_free(srq, SFV__H_SRQ);
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_destroy_srq(sfv_srq *srq) { SFV__DROP_ONCE(srq, SFV__H_SRQ, "sfv_destroy_srq", sfv__srq_unref(srq)); }

/* A post to a NULL SRQ: its handles zeroed as any refused post's, the message naming the SRQ. */
SFV__SLOW sfv_result sfv__srq_null(sfv_pending *pending, size_t count) {
    sfv__pending_clear(NULL, pending, count);
    return sfv__fail(SFV_ERR_INVALID, EINVAL, "post", "invalid SRQ (NULL)");
}
SFV__API_HOT sfv_result sfv_srq_post_receive(sfv_srq *srq, const sfv_scatter_element *sges, size_t n, sfv_pending *pending) {
    if (SFV__UNLIKELY(!srq)) return sfv__srq_null(pending, 1);
    return sfv__post_recv(&srq->core, true, srq->srq, sges, n, pending);
}
SFV__API_HOT sfv_result sfv_srq_post_receive_batch(sfv_srq *srq, const sfv_scatter_element *sges, size_t per_wr, size_t count, sfv_pending *pendings) {
    if (SFV__UNLIKELY(!srq)) return sfv__srq_null(pendings, count);
    return sfv__post_recv_batch(&srq->core, true, srq->srq, sges, per_wr, count, pendings);
}

SAFEVERBS_API sfv_result sfv_srq_set_limit(sfv_srq *srq, uint32_t limit) {
    struct ibv_srq_attr sa;
    int rc;
    SFV__CHECK_HANDLE(srq, SFV__H_SRQ, "srq");
    if (!srq->srq) return sfv__fail(SFV_ERR_BROKEN, EIO, __func__, "the SRQ is gone (a destroy failed part-way: call sfv_destroy_srq again)");
    if (limit >= srq->desc.max_wr)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, __func__, "limit %u is out of range (0 .. max_wr - 1 = %u)", (unsigned)limit, (unsigned)srq->desc.max_wr - 1);
    memset(&sa, 0, sizeof sa);
    sa.srq_limit = limit;
    rc = ibv_modify_srq(srq->srq, &sa, IBV_SRQ_LIMIT);
    if (rc) return sfv__fail_verb("ibv_modify_srq", rc);
    srq->desc.limit = limit;
    return SFV_OK;
}

SAFEVERBS_API size_t sfv_srq_outstanding(const sfv_srq *srq) { return srq ? (size_t)(srq->core.rq.head - srq->core.rq.tail) : 0; }

/* A reset is refused before anything is touched where its SRQ failed (no QP takes from it
   again: the channel keeps why) or its CQ or device did (a new QP would be on the CQ that failed:
   destroy it), whichever event broke the channel first. */
static bool sfv__reset_barred(const sfv_channel *ch) {
    return (ch->srq && sfv_channel_broken(&ch->srq->core, NULL)) || SFV__XLOAD(ch->cq_dead);
}
static sfv_result sfv__reset_refused(const sfv_channel *ch) {
    const sfv_event_type by = (sfv_event_type)SFV__XLOAD(ch->async_event);
    /* its own CQ or device first: a DEVICE_FATAL breaks the SRQ too, and "make a new SRQ" would be
       no remedy on a device that failed */
    if (ch->srq && sfv_channel_broken(&ch->srq->core, NULL) && !SFV__XLOAD(ch->cq_dead)) return sfv__srq_failed();
    /* why the reset is refused, not only what broke the channel first: that may be an event a reset
       recovers (a PORT_ERR, a QP_FATAL), read before the CQ_ERR or DEVICE_FATAL that bars it */
    return sfv__fail(SFV_ERR_BROKEN, EIO, "sfv_channel_reset", "the channel's CQ or its device failed (the device reported %s): a reset, "
                     "which keeps the CQ, cannot recover it; destroy the %s",
                     by == SFV_EVENT_CQ_ERR || by == SFV_EVENT_DEVICE_FATAL ? sfv_event_type_str(by) : "CQ_ERR or DEVICE_FATAL",
                     sfv__stuck_destroy(ch->owned));
}
/* The port's address as it is now, for the endpoint of a reset channel: a LID a subnet manager
   gave anew, a GID its IP address rewrote. Only from an ACTIVE port (one down may say LID 0); a
   query that fails, or a port not ACTIVE, keeps the old, unreported. */
static void sfv__address_refresh(sfv_channel *ch) {
    const sfv__error_mark kept = sfv__error_mark_now();
    sfv_port_attr pa;
    sfv_gid_entry ge;
    if (sfv_query_port(ch->pd->ctx, ch->desc.port, &pa) != SFV_OK || pa.state != SFV_PORT_ACTIVE) {
        sfv__error_back(&kept);
        return;
    }
    ch->lid = pa.lid;
    if (ch->desc.gid_index_set && sfv_query_gid(ch->pd->ctx, ch->desc.port, ch->desc.gid_index, &ge) == SFV_OK)
        ch->gid = ge.gid; /* (an empty entry, all zero, is no success of sfv_query_gid's) */
    sfv__error_back(&kept);
}
SAFEVERBS_API sfv_result sfv_channel_reset(sfv_channel *ch) {
    sfv_result r;
    uint32_t port_errs, old_qpn, old_psn;
    SFV__CHECK_HANDLE(ch, SFV__H_CHANNEL, "channel");
    if (sfv__scoped(ch))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_channel_reset", "the channel is inside an open scope (or many-peer call, or a scope's on_wc): reset it after the scope returns");
    if (!ch->cq) /* a destroy refused after its CQ went (its completion channel's, or its SRQ's last reference) */
        return sfv__fail(SFV_ERR_BROKEN, EIO, "sfv_channel_reset", "the channel's destroy failed part-way (its CQ is gone): call sfv_destroy_channel again");
    if (sfv__reset_barred(ch)) return sfv__reset_refused(ch);
    port_errs = SFV__XLOAD(ch->port_errs); /* a PORT_ERR read from here on is the new QP's port going down too */
    old_qpn = ch->qp ? ch->qp->qp_num : 0;
    old_psn = ch->desc.send_psn;
    sfv__leases_drop(ch); /* windows bound to the old QP hold it (>>impl leases); its leases end, dead, until revoked */
    sfv__mark_broken(ch); /* quietly: the flush below is the reset's, not a failure's ("broken ... destroy it" in the log) */
    SFV__LOG(SFV_LOG_INFO, "%s qp %u: reset: its work flushed, for a new queue pair (to be connected again)", ch->pd->ctx->name, (unsigned)old_qpn);
    if (sfv__inflight(ch) || (ch->qp && !ch->aborted)) sfv__abort(ch); /* everything in flight flushed */
    if (!sfv__destroy_qp(ch)) return sfv__fail_verb("ibv_destroy_qp", errno);
    ch->connected = false; /* (the old QP's connection is over, whether a new QP comes or not) */
    if (ch->watch) ch->watch->detach(ch->watch, false); /* the old QP's connection is over: it forgets the channel */
    while (sfv__drain(ch) > 0) {} /* the old QP's last completions: their places are done already */
    sfv__ev_enter(ch->pd->ctx); /* the old QP's breaks forgotten before the new QP is made: what an event breaks from now on stays broken */
    if (sfv__reset_barred(ch)) { /* read since the check above (refused with the lock released) */
        sfv__ev_leave(ch->pd->ctx);
        return sfv__reset_refused(ch);
    }
    if (ch->port_errs == port_errs) {
        SFV__XSET(ch->broken, false);
        SFV__XSET(ch->async_cause, 0);
        SFV__XSET(ch->async_event, 0);
    } else { /* the port went down while the reset ran (read on another thread): that break stays, whatever broke the old QP */
        SFV__XSET(ch->async_event, (uint8_t)SFV_EVENT_PORT_ERR);
        __atomic_store_n(&ch->async_cause, (uint8_t)SFV__CAUSE_PORT_DOWN, __ATOMIC_RELEASE);
    }
    sfv__ev_leave(ch->pd->ctx);
    ch->first_status = ch->first_op = ch->first_cause = 0; /* the old QP's failures: a new QP that cannot be made is refused for its own reason */
    ch->reset_sq = ch->sq.head; /* the old QP's work, flushed: its handles, consumed from now on, say the reset ended it */
    ch->reset_rq = ch->rq.head;
    memset(&ch->inject_failed, 0, sizeof ch->inject_failed); /* the count of injects goes on */
    r = sfv__qp_make(ch, ch->pd);
    if (r) { /* broken, without a QP: try again */
        sfv__mark_broken(ch);
        return r;
    }
    do ch->desc.send_psn = sfv__random_psn(ch->qp);
    while (!ch->desc.send_psn || ch->desc.send_psn == old_psn); /* a NEW first PSN (0 means "random" in a desc) */
    sfv__address_refresh(ch);
    ch->aborted = ch->qp_err = false;
    sfv__open_recv(ch, ch->srq == NULL);
    return SFV_OK;
}

/* >>impl leases ------------------------------------------------------------------------------ */
struct sfv_lease {
    struct ibv_mw *mw;            /* NULL once its channel was destroyed (the window went with it) */
    sfv_channel *ch;              /* the channel it is bound to, NULL once destroyed */
    struct sfv_lease *prev, *next; /* the channel's list */
    sfv_mr *mr;                   /* its live-lease count keeps it registered */
    sfv_pd *pd;                   /* a reference: the window is the PD's */
    sfv_remote_mr remote;
};

static bool sfv__device_has_mw2(const sfv_context *ctx) {
    return ctx->attr.max_mw > 0 && (ctx->attr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
}

/* Everything sfv_lease_grant refuses before a verb. */
static sfv_result sfv__lease_refused(const sfv_channel *ch, const sfv_mr *mr, size_t offset, size_t length, unsigned access) {
    static const char fn[] = "sfv_lease_grant";
    const unsigned remote = SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC;
    if (!sfv__device_has_mw2(ch->pd->ctx))
        return sfv__fail(SFV_ERR_UNSUPPORTED, EOPNOTSUPP, fn, "%s has no type 2 memory windows (device_cap_flags, max_mw): register a separate MR per peer and slice instead, and deregister it to revoke",
                         ch->pd->ctx->name);
    if (mr->pd->pd != ch->pd->pd) /* (a PD that wraps the same verbs PD is the same: the window binds there) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "the MR and the channel belong to different PDs");
    if (!(mr->access & SFV_ACCESS_MW_BIND))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "the MR was registered without SFV_ACCESS_MW_BIND (sfv_reg_mr_access)");
    if (!access || (access & ~remote))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "access 0x%x: give one or more of REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC", access);
    if ((access & (SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC)) && !(mr->access & SFV_ACCESS_LOCAL_WRITE))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "remote write or atomic through a lease needs an MR with SFV_ACCESS_LOCAL_WRITE");
    /* the responder checks its queue pair's remote access enables on every request, whatever the
       key (rxe answers REM_INV_REQ_ERR, the fake REM_ACCESS_ERR): a window with more would be
       granted and never work */
    if (access & ~ch->desc.access)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "access 0x%x: the channel's desc.access (0x%x) does not allow 0x%x, so its queue pair refuses the peer's access there; create the channel with it",
                         access, ch->desc.access, access & ~ch->desc.access);
    if (!length) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "a lease of 0 bytes");
    if (offset > mr->length || length > mr->length - offset)
        return sfv__fail(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, ERANGE, fn, "[%zu, %zu + %zu) is not inside the MR's %zu bytes", offset, offset, length,
                         mr->length);
    if (!ch->connected || SFV__XLOAD(ch->broken))
        return sfv__fail(SFV__XLOAD(ch->broken) ? SFV_ERR_BROKEN : SFV_ERR_INVALID, EINVAL, fn, "the channel is %s (the bind is work on its queue pair)",
                         SFV__XLOAD(ch->broken) ? "in the error state" : "not connected");
    return SFV_OK;
}

/* Posts one bind work request on ch's send queue and waits for it, as any signaled post. */
static sfv_result sfv__lease_bind(sfv_channel *ch, struct ibv_send_wr *wr) {
    struct ibv_send_wr *bad = NULL;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_result r;
    int rc;
    memset(&p, 0, sizeof p);
    if (!sfv__postable(ch, SFV__POST_SEND, NULL, 0, 1, &p)) return sfv__post_refused(ch, SFV__POST_SEND, NULL, 0, 1, &p);
    wr->wr_id = ch->sq.head << 1;
    wr->send_flags = IBV_SEND_SIGNALED;
    rc = ibv_post_send(ch->qp, wr, &bad);
    if (rc) return sfv__post_failed(ch, &p, 1, "ibv_post_send", rc);
    sfv__cover(&ch->sq, &p, 1, sfv__track(&ch->sq, SFV_WC_OP_UNKNOWN, 0));
    ch->sq.sig_top = ch->sq.head;
    r = sfv_pending_wait(&p, -1, &wc);
    if (r != SFV_OK && r != SFV_ERR_WORK) /* a deadline, a failed poll: never leave the bind in flight */
        r = sfv__abort_consume(ch, &p, NULL, r); /* (stuck: sfv_lease_grant keeps the window under its bind) */
    return r;
}

/* Puts l on ch's list, with a reference on the PD; mr NULL: a failed grant's window that no one
   holds, freed with the lease by sfv__leases_drop. */
static void sfv__lease_link(sfv_channel *ch, sfv_lease *l, sfv_mr *mr) {
    l->mr = mr;
    l->pd = ch->pd;
    l->ch = ch;
    l->next = ch->leases;
    if (ch->leases) ch->leases->prev = l;
    ch->leases = l;
    if (mr) __atomic_fetch_add(&mr->leases, 1, __ATOMIC_RELAXED);
    sfv__ref(&ch->pd->refs);
}

SAFEVERBS_API sfv_result sfv_lease_grant(sfv_channel *ch, sfv_mr *mr, size_t offset, size_t length, unsigned access, sfv_lease **out) {
    struct ibv_send_wr wr;
    sfv_lease *l;
    sfv_result r;
    uint64_t head;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(ch, "channel");
    SFV__CHECK_ARG(mr, "mr");
    SFV__CHECK_LIVE(ch, SFV__H_CHANNEL);
    SFV__CHECK_LIVE(mr, SFV__H_MR);
    if ((r = sfv__lease_refused(ch, mr, offset, length, access)) != SFV_OK) return r;
    l = (sfv_lease *)sfv__handle_new(sizeof *l, SFV__H_LEASE);
    if (!l) return sfv__fail_verb("calloc", ENOMEM);
    errno = 0;
    l->mw = ibv_alloc_mw(ch->pd->pd, IBV_MW_TYPE_2);
    if (!l->mw) {
        r = errno == EOPNOTSUPP || errno == ENOSYS
                ? sfv__fail(SFV_ERR_UNSUPPORTED, EOPNOTSUPP, "ibv_alloc_mw", "%s cannot allocate memory windows", ch->pd->ctx->name)
                : sfv__fail_verb("ibv_alloc_mw", errno ? errno : ENOMEM);
        sfv__handle_free(l, SFV__H_LEASE);
        return r;
    }
    memset(&wr, 0, sizeof wr);
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = l->mw;
    wr.bind_mw.rkey = ibv_inc_rkey(l->mw->rkey);
    wr.bind_mw.bind_info.mr = mr->mr;
    wr.bind_mw.bind_info.addr = mr->addr + offset;
    wr.bind_mw.bind_info.length = length;
    wr.bind_mw.bind_info.mw_access_flags = access;
    head = ch->sq.head;
    r = sfv__lease_bind(ch, &wr);
    if (r) { /* a bind refused before its post leaves nothing under its window; else never under a bind still in flight (left to the device):
                the bind's own place tells, not the channel's other work (receives whose flushes come after a bind that failed) */
        if ((ch->sq.head == head || ch->sq.completed > head) && ibv_dealloc_mw(l->mw) != 0)
            sfv__lease_link(ch, l, NULL); /* a window that refused to go: the channel's destroy or reset frees it */
        else
            sfv__handle_free(l, SFV__H_LEASE);
        return r;
    }
    l->remote.addr = mr->addr + offset;
    l->remote.length = length;
    l->remote.rkey = wr.bind_mw.rkey; /* a bind by work request leaves mw->rkey as it was */
    sfv__lease_link(ch, l, mr);
    *out = l;
    return SFV_OK;
}

SAFEVERBS_API sfv_remote_mr sfv_lease_remote(const sfv_lease *lease) {
    sfv_remote_mr none = {0, 0, 0};
    return lease ? lease->remote : none;
}

SAFEVERBS_API sfv_result sfv_lease_revoke(sfv_lease *lease) {
    int rc;
    if (!lease) return SFV_OK;
    SFV__LIVE_OR_REFUSE(lease, SFV__H_LEASE, "sfv_lease_revoke");
    if (lease->mw && (rc = ibv_dealloc_mw(lease->mw)) != 0)
        return sfv__fail_verb("ibv_dealloc_mw", rc); /* still bound: the rkey still works */
    if (lease->ch) { /* off its channel's list */
        if (lease->prev) lease->prev->next = lease->next; else lease->ch->leases = lease->next;
        if (lease->next) lease->next->prev = lease->prev;
    }
    __atomic_fetch_sub(&lease->mr->leases, 1, __ATOMIC_RELAXED);
    SFV__KEEPING_ERROR((void)sfv__pd_unref(lease->pd));
    sfv__handle_free(lease, SFV__H_LEASE);
    return SFV_OK;
}

/* A channel's destroy ends its leases' windows first: a window bound to a queue pair holds it
   (rxe on Linux 6.1 then waits ~50 s in ibv_destroy_qp and warns). The leases stay, dead, until
   revoked. */
static void sfv__leases_drop(sfv_channel *ch) {
    sfv_lease *l, *next;
    for (l = ch->leases; l; l = next) {
        next = l->next;
        if (l->mw && ibv_dealloc_mw(l->mw) == 0) l->mw = NULL; /* else kept: sfv_lease_revoke tries it again */
        l->ch = NULL;
        if (!l->mr) { /* a failed grant's (sfv__lease_link): no one holds it (refused again: it stays the device's) */
            (void)sfv__pd_unref(l->pd);
            sfv__handle_free(l, SFV__H_LEASE);
        }
    }
    ch->leases = NULL;
}

/* sfv_dereg_mr's refusal of an MR with live leases. */
static sfv_result sfv__leases_live(const sfv_mr *mr) {
    return sfv__fail(SFV_ERR_INVALID, EBUSY, "sfv_dereg_mr", "%d lease(s) on this MR are live: sfv_lease_revoke them first",
                     __atomic_load_n(&mr->leases, __ATOMIC_RELAXED));
}

/* >>impl channel internals ---------------------------------------------------------------- */
/* What the layers above a channel (multi-channel, node) use of it, besides its public calls:
   these helpers. Those layers read no field of a channel. */

/* Where the next work of a channel's two queues will go. */
typedef struct sfv__mark { uint64_t sq, rq; } sfv__mark;

/* A channel as a scope or a many-peer call sees it. */
typedef struct sfv__peer {
    sfv_channel *ch;
    sfv__mark scope_from;   /* an open scope: where its work starts in the two queues */
    bool was_manual;        /* an open scope: the kind of the scope around it (restored at its close) */
    uint64_t next;          /* a many-peer call: the place of this channel's next request */
    bool expired;           /* a many-peer call: its deadline passed, the rest was flushed */
} sfv__peer;

/* A scope opens on every channel it covers: marks where its work starts, and lets posts leave
   their pending handle NULL. */
static void sfv__scope_open(sfv__peer *peers, size_t n, bool manual) {
    size_t i;
    for (i = 0; i < n; i++) {
        peers[i].scope_from.sq = peers[i].ch->sq.head;
        peers[i].scope_from.rq = peers[i].ch->rq.head;
        peers[i].ch->scope_depth++;
        peers[i].was_manual = peers[i].ch->scope_manual;
        peers[i].ch->scope_manual = manual;
        if (!manual) peers[i].ch->scope_auto++;
    }
}
static void sfv__scope_close(sfv__peer *peers, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        peers[i].ch->scope_depth--;
        if (!peers[i].ch->scope_manual) peers[i].ch->scope_auto--;
        peers[i].ch->scope_manual = peers[i].was_manual; /* the scope around it decides again */
    }
}
/* Waits for and consumes what fn left on each channel, each within its own deadline; fn's error
   detail survives the drain. */
/* When the last work on ch's send queue is unsignaled, nothing would ever complete it: the scope
   posts one signaled zero-length RDMA write after it (no remote memory is touched, no key is
   checked: IB C9-88; the peer's QP must allow REMOTE_WRITE), whose completion completes all the
   work before it. A fence that cannot be posted aborts the channel (flushed: the buffers are free). */
static void sfv__scope_fence(sfv_channel *ch) {
    struct ibv_send_wr wr, *bad = NULL;
    int rc;
    const uint64_t last = ch->sq.head - 1;
    const bool needed = ch->last_unsignaled == ch->sq.head; /* nothing was posted after it */
    const sfv__slot *s = &ch->sq.slots[last & ch->sq.mask];
    ch->last_unsignaled = 0;
    if (!needed || s->seq != last || last < ch->sq.completed || (s->state != SFV__SLOT_INFLIGHT && s->state != SFV__SLOT_INJECT))
        return; /* completed by later work already */
    if (!SFV__XLOAD(ch->can_send) || !ch->qp) { /* broken: only a flush ends the work */
        sfv__abort(ch);
        return;
    }
    memset(&wr, 0, sizeof wr);
    wr.wr_id = ch->sq.head << 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    if ((rc = ibv_post_send(ch->qp, &wr, &bad)) != 0) {
        sfv__fence_errno = rc; /* (kept for the verdict: a later channel's fence does not clear it) */
        if (!ch->first_cause) ch->first_cause = SFV__CAUSE_FENCE_UNPOSTED; /* the flushes' hint says it */
        sfv__abort(ch);
        return;
    }
    sfv__track(&ch->sq, SFV__OP_FENCE, 0);
    ch->sq.sig_top = ch->sq.head;
}

static void sfv__scope_settle(sfv__peer *peers, size_t n, sfv_scope_report *rep, const sfv__sink *sink, bool manual) {
    const sfv__error_mark kept = sfv__error_mark_now();
    const uint64_t t0 = sfv__now_ns();
    size_t i;
    int fence_errno;
    bool stuck = false, owned = false;
    sfv__fence_errno = 0;
    /* the fences first, while the queues take work (a manual scope: the scope around it fences);
       only for unsignaled work posted in this scope: a scope around it that left its own last on
       the queue fences it itself, and a scope waits only for its own work (a fence here waited
       for the outer send, and a deadline on it flushed that) */
    for (i = 0; i < n; i++)
        if (peers[i].ch->last_unsignaled > peers[i].scope_from.sq && !manual) sfv__scope_fence(peers[i].ch);
    fence_errno = sfv__fence_errno;
    for (i = 0; i < n; i++) sfv__settle_shut(peers[i].ch); /* an on_wc that posts to, waits on, destroys or resets one is refused */
    for (i = 0; i < n; i++) {
        sfv_channel *ch = peers[i].ch;
        const uint64_t deadline = t0 + sfv__timeout_ns(ch->desc.timeout_ms);
        bool expired = false;
        sfv__settle(ch, &ch->sq, peers[i].scope_from.sq, deadline, rep, sink, &expired, &stuck);
        sfv__settle(ch, &ch->rq, peers[i].scope_from.rq, deadline, rep, sink, &expired, &stuck);
        if (stuck && !owned) owned = ch->owned; /* (the first stuck one's: a many-peer scope's are all owned) */
    }
    for (i = 0; i < n; i++) sfv__settle_open(peers[i].ch);
    sfv__fence_errno = fence_errno; /* for the verdict: an on_wc that ran a scope of its own cleared it */
    sfv__scope_stuck_owned = stuck && owned;
    sfv__scope_stuck = stuck; /* (after on_wc, which may have run a scope of its own; only this scope's work counts) */
    sfv__error_back(&kept);
}

/* A many-peer call begins: each channel's requests start at its queue's next place, and posts
   may leave their pending handle NULL (the call waits for each by its place). */
static void sfv__many_open(sfv__peer *peers, size_t n, bool recv) {
    size_t i;
    for (i = 0; i < n; i++) {
        peers[i].next = recv ? peers[i].ch->rq.head : peers[i].ch->sq.head;
        peers[i].expired = false;
        peers[i].ch->scope_depth++;
    }
}
/* Waits for and consumes this channel's next request of a many-peer call (its deadline counted
   from t0). Once one expired, the channel was flushed, and the failures after it are timeouts.
   *stuck: as sfv__take_by's. */
static sfv_result sfv__many_take(sfv__peer *peer, bool recv, uint64_t t0, sfv_work_completion *wc, bool *stuck) {
    sfv_channel *ch = peer->ch;
    const sfv_result w = sfv__take_by(ch, recv ? &ch->rq : &ch->sq, peer->next++, t0 + sfv__timeout_ns(ch->desc.timeout_ms), wc, stuck);
    if (w == SFV_ERR_TIMEOUT) peer->expired = true;
    sfv__wc_expired(wc, w, peer->expired);
    return w;
}

/* Whether ch can take `count` more send-queue work requests now: -1 not at all (not connected,
   or broken), 0 not now (its queue is full), 1 yes. */
static int sfv__channel_send_room(const sfv_channel *ch, size_t count) {
    if (!SFV__XLOAD(ch->can_send)) return -1;
    return ch->sq.head - ch->sq.tail + count <= ch->sq.cap;
}
static bool sfv__channel_broken(const sfv_channel *ch) { return SFV__XLOAD(ch->broken); }
/* Why ch takes no send-queue work (sfv__channel_send_room said -1, and no scope is settling it):
   broken, and what broke it, as its own post would say; or not connected (made, or reset, and not
   connected since), which breaks nothing. */
static sfv_result sfv__channel_unsendable(const sfv_channel *ch, const char *fn) {
    if (SFV__XLOAD(ch->broken) || sfv__async_cause(ch) || !ch->qp) return sfv__refuse_broken(ch, fn);
    return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "the channel is not connected (made or reset since the handshake): connect it first");
}
/* A multi-channel holds ch (sfv_destroy_channel refuses it), or lets it go to be destroyed. */
static void sfv__channel_own(sfv_channel *ch, bool owned) { ch->owned = owned; }
/* Whether a scope is consuming ch's work (its on_wc may be the caller): its queues are shut. */
static bool sfv__channel_settling(const sfv_channel *ch) { return ch->settling > 0; }
#ifdef SAFEVERBS_RDMACM
/* A channel brought to RTR and RTS from attributes someone else worked out (the connection
   manager's rdma_init_qp_attr, >>impl rdmacm), instead of the endpoint handshake. The channel
   records the path MTU and send PSN the attributes set, and is connected, as after a handshake. */
static sfv_result sfv__channel_ready_from(sfv_channel *ch, struct ibv_qp_attr *rtr, int rtr_mask, struct ibv_qp_attr *rts, int rts_mask) {
    sfv_result r;
    if (ch->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, "channel", "the channel is already connected");
    if (SFV__XLOAD(ch->broken) || !ch->qp) return sfv__refuse_broken(ch, "channel");
    r = sfv__modify(ch->qp, rtr, rtr_mask, "RTR");
    if (r) return r;
    r = sfv__modify(ch->qp, rts, rts_mask, "RTS");
    if (r) {
        const sfv_error why = sfv__last;
        sfv__break(ch);
        return sfv__fail(SFV_ERR_BROKEN, why.errnum, why.verb, "the channel is broken (sfv_channel_reset recovers it, or destroy it): %s", why.message);
    }
    if ((rtr_mask & IBV_QP_PATH_MTU) && sfv__mtu_bytes(rtr->path_mtu)) ch->desc.path_mtu = sfv__mtu_bytes(rtr->path_mtu);
    if (rts_mask & IBV_QP_SQ_PSN) ch->desc.send_psn = rts->sq_psn;
    ch->connected = true;
    sfv__open_send(ch);
    return SFV_OK;
}
/* The connection is gone: the channel breaks and its work is flushed now, so that waits on it
   end at once instead of at their deadlines. by_peer: the peer disconnected (the failures say
   so); else this side closed the connection. */
/* cause: why, for its flushes (SFV__CAUSE_PEER_GONE, _DEVICE_GONE), or SFV__CAUSE_NONE (ours). */
static void sfv__channel_peer_gone(sfv_channel *ch, uint8_t cause) {
    if (cause && !ch->first_status && !ch->first_cause) ch->first_cause = cause;
    if (!ch->aborted) sfv__abort(ch);
}
/* Made and never connected nor broken: a connection manager may bring it up. */
static bool sfv__channel_fresh(const sfv_channel *ch) { return ch->qp && !ch->connected && !SFV__XLOAD(ch->broken) && !ch->watch; }
/* w watches ch from now on (NULL: nothing does). */
static void sfv__channel_watch(sfv_channel *ch, sfv__watch *w) { ch->watch = w; }
static bool sfv__channel_watched_by(const sfv_channel *ch, const sfv__watch *w) { return ch->watch == w; }
#endif /* SAFEVERBS_RDMACM */

/* Free places in ch's send or receive queue. */
static uint64_t sfv__channel_room(const sfv_channel *ch, bool recv) {
    const sfv__ring *q = recv ? &ch->rq : &ch->sq;
    return q->cap - (q->head - q->tail);
}

/* Whether ch would take one more request of a many-peer call (its elements, and the remote region
   of a write or read), by every rule of posting but the room, which the caller checks for all of
   its requests at once. SFV_OK, or the refusal with its last error. */
static sfv_result sfv__channel_would_take(sfv_channel *ch, bool recv, bool read, const void *sges, size_t n, const sfv_remote_mr *remote) {
    const sfv__post_kind kind = recv ? SFV__POST_RECV : read ? SFV__POST_READ : SFV__POST_SEND;
    const struct ibv_sge *sg = (const struct ibv_sge *)sges;
    sfv_pending stands_in; /* the call's own posts take none: it waits for them by place */
    uint64_t total = 0;
    size_t k;
    memset(&stands_in, 0, sizeof stands_in);
    if ((!sges && n) || n > sfv__max_sge(ch, kind) || /* the elements first: the sum below reads them, whatever the room */
        (!sfv__postable(ch, kind, sges, n, 1, &stands_in) && sfv__channel_room(ch, recv) > 0))
        return sfv__post_refused(ch, kind, sges, n, 1, &stands_in);
    if (!(recv ? SFV__XLOAD(ch->can_recv) : SFV__XLOAD(ch->can_send))) return sfv__post_refused(ch, kind, sges, n, 1, &stands_in);
    if (!remote) return SFV_OK;
    for (k = 0; k < n; k++) total += sg[k].length;
    if (total > remote->length || sfv__remote_wraps(*remote)) return sfv__remote_refused(remote, total);
    return SFV_OK;
}

static sfv_result sfv__scope_run(sfv_channel *ch, sfv_scope_fn fn, void *user, sfv_scope_report *rep, const sfv__sink *sink, bool manual) {
    sfv__peer one;
    unsigned long f0, fn_failures;
    memset(rep, 0, sizeof *rep);
    SFV__CHECK_ARG(ch, "channel");
    SFV__CHECK_ARG(fn, "fn");
    memset(&one, 0, sizeof one);
    one.ch = ch;
    sfv__scope_open(&one, 1, manual);
    f0 = sfv__failures;
    rep->fn_result = fn(ch, user);
    fn_failures = sfv__failures - f0;
    sfv__scope_close(&one, 1);
    sfv__scope_settle(&one, 1, rep, sink, manual);
    sfv__fn_failures = fn_failures; /* for the verdict: set after the settle, whose on_wc may run a scope of its own */
    return SFV_OK;
}

/* After fn failed: the last error says so, keeping fn's own detail when fn left one (a failure
   recorded while fn ran, with fn's result; not an older one). */
static sfv_result sfv__fn_failed(sfv_result as, sfv_result fn_result) {
    const sfv_error inner = sfv__last;
    const bool detail = sfv__fn_failures != 0 && inner.result == fn_result;
    if (sfv__scope_stuck) /* the drain of what fn left could not stop it: said, never fn's failure alone, after which the
                             caller would take back buffers still the NIC's (a manual scope, which has no report: SFV_ERR_DRIVER) */
        return sfv__fail(as == fn_result ? SFV_ERR_DRIVER : as, EIO, "scope", "the scope's function returned %s%s%s; the channel could not stop the "
                         "work it left (it was not flushed, and destroying the queue pair was refused): its buffers are still the NIC's; "
                         "destroy the %s", sfv_result_str(fn_result), detail ? ": " : "", detail ? inner.message : "",
                         sfv__stuck_destroy(sfv__scope_stuck_owned));
    if (detail && as == fn_result) return as; /* it already says it */
    return sfv__fail(as, detail ? inner.errnum : 0, detail ? inner.verb : "scope", "the scope's function returned %s%s%s",
                     sfv_result_str(fn_result), detail ? ": " : "", detail ? inner.message : "");
}

/* What a scope returns: the run's own failure, else the verdict of its report. */
static sfv_result sfv__scope_verdict(sfv_result ran, const sfv_scope_report *rep) {
    if (ran) return ran;
    if (rep->fn_result != SFV_OK) return sfv__fn_failed(SFV_ERR_SCOPE_FN, rep->fn_result);
    if (rep->failed) {
        const sfv_work_completion *f = &rep->first_error; /* SFV_ERR_WORK, or the wait's own failure */
        if (sfv__scope_stuck) /* never "flushed": some of its buffers are still the NIC's (sfv__stuck) */
            sfv__fail(SFV_ERR_SCOPE_AUTOPOLL, EIO, "scope", "%zu auto-polled work request(s) failed; first: %s; the channel could not stop its work (it was not flushed, and destroying the queue pair was refused): the buffers of what did not complete are still the NIC's; destroy the %s",
                      rep->failed, f->result == SFV_ERR_WORK ? sfv_wc_status_str(f->status) : sfv_result_str(f->result),
                      sfv__stuck_destroy(sfv__scope_stuck_owned));
        else if (sfv__fence_errno) /* the flushes are the scope's own doing: say why */
            sfv__fail(SFV_ERR_SCOPE_AUTOPOLL, sfv__fence_errno, "scope", "%zu auto-polled work request(s) failed; first: %s (the scope could not post its fence after unsignaled work: ibv_post_send failed: %s; it flushed the channel, which is broken)",
                      rep->failed, f->result == SFV_ERR_WORK ? sfv_wc_status_str(f->status) : sfv_result_str(f->result), strerror(sfv__fence_errno));
        else
            sfv__fail(SFV_ERR_SCOPE_AUTOPOLL, 0, "scope", "%zu auto-polled work request(s) failed; first: %s, class %s (%s)", rep->failed,
                      f->result == SFV_ERR_WORK ? sfv_wc_status_str(f->status) : sfv_result_str(f->result),
                      sfv_work_error_class_str(f->error_class),
                      f->result != SFV_ERR_WORK ? "waiting for it failed; the channel flushed its work"
                      : f->status == SFV_WC_WR_FLUSH_ERR && f->error_class != SFV_WORK_ERROR_LOCAL_PROGRAMMING
                          ? "flushed: the channel was broken before it ran, by an earlier failure, a deadline or an event"
                          : sfv_wc_status_hint(f->status));
        return SFV_ERR_SCOPE_AUTOPOLL;
    }
    return SFV_OK;
}
/* What a manual scope returns. The work is drained first, so even an SFV_ASSERT that returns
   leaves no buffer in flight. */
static sfv_result sfv__manual_verdict(sfv_result ran, const sfv_scope_report *rep) {
    if (ran) return ran;
    SFV_ASSERT((rep->fn_result != SFV_OK || rep->auto_polled == 0) &&
               "manual scope: fn succeeded but left work unpolled");
    if (sfv__scope_stuck || (rep->fn_result != SFV_OK && rep->fn_result != SFV_NOT_DONE)) return sfv__fn_failed(rep->fn_result, rep->fn_result);
    if (rep->fn_result == SFV_OK && rep->auto_polled) /* an SFV_ASSERT that returned: never a success over work fn left (which may have failed) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "scope", "manual scope: fn returned SFV_OK but left %zu work request(s) unconsumed (a broken "
                         "contract: consume each by its pending handle); the scope drained them, %zu of them failed", rep->auto_polled, rep->failed);
    return rep->fn_result;
}

static const sfv__sink sfv__no_sink = {NULL, NULL};
SAFEVERBS_API sfv_result sfv_channel_scope(sfv_channel *ch, sfv_scope_fn fn, void *user, sfv_scope_report *report) {
    sfv_scope_report local, *rep = report ? report : &local;
    return sfv__scope_verdict(sfv__scope_run(ch, fn, user, rep, &sfv__no_sink, false), rep);
}
SAFEVERBS_API sfv_result sfv_channel_scope_wc(sfv_channel *ch, sfv_scope_fn fn, void *user, sfv_scope_wc_fn on_wc, void *wc_user,
                                              sfv_scope_report *report) {
    sfv_scope_report local, *rep = report ? report : &local;
    sfv__sink sink;
    sink.fn = on_wc;
    sink.user = wc_user;
    return sfv__scope_verdict(sfv__scope_run(ch, fn, user, rep, &sink, false), rep);
}
SAFEVERBS_API sfv_result sfv_channel_manual_scope(sfv_channel *ch, sfv_scope_fn fn, void *user) {
    sfv_scope_report rep;
    return sfv__manual_verdict(sfv__scope_run(ch, fn, user, &rep, &sfv__no_sink, true), &rep);
}

SAFEVERBS_API sfv_result sfv_destroy_channel(sfv_channel *ch) {
    if (!ch) return SFV_OK;
    SFV__LIVE_OR_REFUSE(ch, SFV__H_CHANNEL, "sfv_destroy_channel");
    SFV__LOG(SFV_LOG_DEBUG, "%s qp %u: destroying (%zu work requests outstanding)", sfv_context_name(sfv_pd_context(ch->pd)),
             ch->qp ? ch->qp->qp_num : 0, sfv_channel_outstanding(ch));
    if (sfv__scoped(ch))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_channel", "the channel is inside an open scope (or many-peer call, or a scope's on_wc): destroy it after the scope returns");
    if (ch->owned) /* the multi-channel still holds it: freed here, its next call would read freed memory */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_channel", "the channel is a multi-channel's (or a node's): sfv_destroy_multi_channel (sfv_destroy_node) destroys it");
    sfv__leases_drop(ch); /* >>impl leases */
    if (sfv__inflight(ch)) sfv__abort(ch);
    if (!sfv__destroy_qp(ch)) return sfv__fail_verb("ibv_destroy_qp", errno);
    if (ch->watch) ch->watch->detach(ch->watch, true); /* it forgets the channel, and the channel it */
    if (ch->cc) sfv__ack_events(ch);
    if (ch->cq) {
        struct ibv_cq *const cq = ch->cq;
        int rc;
        sfv__ev_enter(ch->pd->ctx); /* off what an event is compared with before its memory may be another CQ's */
        SFV__XSET(ch->cq, NULL);
        sfv__ev_leave(ch->pd->ctx);
        rc = ibv_destroy_cq(cq);
        if (rc) {
            SFV__XSET(ch->cq, cq);
            return sfv__fail_verb("ibv_destroy_cq", rc);
        }
    }
    if (ch->cc) {
        int rc = ibv_destroy_comp_channel(ch->cc);
        if (rc) return sfv__fail_verb("ibv_destroy_comp_channel", rc);
        ch->cc = NULL;
    }
    SFV__INFLIGHT_FORGET(ch);
    sfv__events_remove_channel(ch->pd->ctx, ch);
    if (ch->srq) {
        sfv_result r = sfv__srq_detach(ch->srq, ch);
        if (r) return r; /* its SRQ's last reference: the SRQ stays, and so does the channel, for a retry */
    }
    sfv__live_remove(ch);
    SFV_FREE(ch->sq.slots);
    SFV_FREE(ch->rq.slots);
    SFV__KEEPING_ERROR((void)sfv__pd_unref(ch->pd));
    sfv__handle_free(ch, SFV__H_CHANNEL);
    return SFV_OK;
}

/* A channel nobody holds whose destroy a verb refused (a failed create's, sfv_cm_connect's or
   sfv_cm_accept's, which cannot hand it to the caller): kept on its PD, which it holds, for
   sfv_dealloc_pd to destroy again, so that neither it nor its PD and device are lost. */
/* Pushes item (a T *) onto the list at *headp through its field `link`: a list any thread may
   push to (a PD is shared), taken whole (__atomic_exchange_n) by the one that retries. */
#define SFV__ORPHAN_PUSH(T, headp, item, link) \
    do { \
        T *sfv__head = __atomic_load_n((headp), __ATOMIC_RELAXED); \
        do (item)->link = sfv__head; \
        while (!__atomic_compare_exchange_n((headp), &sfv__head, (item), true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)); \
    } while (0)
static void sfv__pd_orphan(sfv_channel *ch) { SFV__ORPHAN_PUSH(sfv_channel, &ch->pd->orphans, ch, orphan_next); }
/* What sfv__channel_new left of a channel it could not take apart (sfv__pd_orphan): its QP, its
   CQ and completion channel, its memory, then its hold on the PD; a verb that refuses again
   keeps the rest for the next try. ch->srq: the SRQ its QP was on, which it holds until the QP
   is gone (never attached: no receives of it to drain or forget). ch->core_of: the inner channel
   of an SRQ sfv_create_srq could not take apart (never listed, no receives): that SRQ, its CQ,
   and its memory. */
static sfv_result sfv__channel_unmade_free(sfv_channel *ch) {
    sfv_pd *const pd = ch->pd;
    struct ibv_qp *const qp = ch->qp ? ch->qp : ch->qp_spare;
    sfv_srq *const of = ch->core_of; /* an SRQ's inner channel (a failed sfv_create_srq's): its SRQ first, which is on the CQ */
    sfv_result r;
    int rc;
    if (of && of->srq && (rc = ibv_destroy_srq(of->srq)) != 0) return sfv__fail_verb("ibv_destroy_srq", rc);
    if (of) of->srq = NULL;
    if (qp && (rc = ibv_destroy_qp(qp)) != 0) return sfv__fail_verb("ibv_destroy_qp", rc);
    ch->qp = ch->qp_spare = NULL;
    if (ch->srq && (r = sfv__srq_unref(ch->srq)) != SFV_OK) return r; /* (its last reference: kept for a retry) */
    ch->srq = NULL;
    if (ch->cq && (rc = ibv_destroy_cq(ch->cq)) != 0) return sfv__fail_verb("ibv_destroy_cq", rc);
    ch->cq = NULL;
    if (ch->cc && (rc = ibv_destroy_comp_channel(ch->cc)) != 0) return sfv__fail_verb("ibv_destroy_comp_channel", rc);
    SFV_FREE(ch->rq.slots);
    SFV_FREE(ch->sq.slots);
    if (of) sfv__handle_free(of, SFV__H_SRQ); /* (ch is inside it) */
    else sfv__handle_free(ch, SFV__H_CHANNEL);
    return sfv__pd_unref(pd);
}
/* The same for an MR nobody holds whose deregistration was refused (a failed sfv_create_node's
   barrier MR), with the memory it covers: freed only once it is deregistered (peers may write
   it until then). */
static void sfv__pd_orphan_mr(sfv_mr *mr, void *mem) {
    mr->orphan_mem = mem;
    SFV__ORPHAN_PUSH(sfv_mr, &mr->pd->orphan_mrs, mr, orphan_next);
}
static sfv_result sfv__pd_release(sfv_pd *pd) {
    /* The first refusal again, and what it said. The call then fails and keeps the caller's
       reference: this call is the only one that retries them, so a reference dropped here (an
       SFV_OK) left them, the PD and its device for good, and a second call is a release twice. */
    sfv_result kept = SFV_OK;
    sfv_error why;
    if (pd) {
        sfv_channel *ch = __atomic_exchange_n(&pd->orphans, NULL, __ATOMIC_ACQUIRE);
        sfv_mr *mr;
        while (ch) { /* (the caller's reference keeps pd while they go) */
            sfv_channel *const next = ch->orphan_next;
            sfv_result r;
            sfv_error said;
            SFV__KEEPING_ERROR(r = ch->unmade ? sfv__channel_unmade_free(ch) : sfv_destroy_channel(ch); said = sfv__last); /* (said below, if refused) */
            if (r) {
                sfv__pd_orphan(ch);
                if (!kept) {
                    kept = r;
                    why = said;
                }
            }
            ch = next;
        }
        mr = __atomic_exchange_n(&pd->orphan_mrs, NULL, __ATOMIC_ACQUIRE); /* after the channels: no work of theirs uses it */
        while (mr) {
            sfv_mr *const next = mr->orphan_next;
            void *const mem = mr->orphan_mem;
            sfv_result r;
            sfv_error said;
            SFV__KEEPING_ERROR(r = sfv_dereg_mr(mr); said = sfv__last); /* (as above) */
            if (r) {
                sfv__pd_orphan_mr(mr, mem);
                if (!kept) {
                    kept = r;
                    why = said;
                }
            } else {
                SFV_FREE(mem);
            }
            mr = next;
        }
    }
    if (kept)
        return sfv__fail(kept, why.errnum, why.verb, "sfv_dealloc_pd: what a failed call left to this PD could not be taken apart again (%s): "
                         "the PD keeps it, and your reference: call sfv_dealloc_pd again", why.message);
    return sfv__pd_unref(pd);
}
SAFEVERBS_API sfv_result sfv_dealloc_pd(sfv_pd *pd) { SFV__DROP_ONCE(pd, SFV__H_PD, "sfv_dealloc_pd", sfv__pd_release(pd)); }

/* >>impl multi-channel ----------------------------------------------------------------------- */
#define SFV__MAX_PEERS 4096

struct sfv_multi_channel {
    size_t n;
    sfv__peer *peers;    /* peers[i].ch: the channel to peer i */
    bool in_scope;
    bool owned;          /* a node's (>>impl node): only sfv_destroy_node destroys it */
};

/* Destroys channels from the last; stops at one that refuses (the rest stay valid). */
static sfv_result sfv__mc_destroy_channels(sfv_multi_channel *mc) {
    for (; mc->n > 0; mc->n--) {
        sfv_channel *const ch = mc->peers[mc->n - 1].ch;
        sfv_result r;
        sfv__channel_own(ch, false);
        if ((r = sfv_destroy_channel(ch)) != SFV_OK) {
            sfv__channel_own(ch, true); /* kept: still the multi-channel's */
            return r;
        }
        mc->peers[mc->n - 1].ch = NULL;
    }
    return SFV_OK;
}

/* A node holds mc (sfv_destroy_multi_channel refuses it), or lets it go to be destroyed. */
static void sfv__mc_own(sfv_multi_channel *mc, bool owned) { mc->owned = owned; }

static void sfv__mc_free(sfv_multi_channel *mc) {
    SFV_FREE(mc->peers);
    sfv__handle_free(mc, SFV__H_MULTI);
}
/* A multi-channel nobody will hold (a create's cleanup) destroyed and freed: a channel whose
   destroy a verb refuses is left to its PD (sfv__pd_orphan), not lost with mc. */
static void sfv__mc_discard(sfv_multi_channel *mc) {
    while (mc->n > 0) {
        sfv_result r;
        SFV__KEEPING_ERROR(r = sfv__mc_destroy_channels(mc));
        if (r) {
            sfv_channel *const ch = mc->peers[mc->n - 1].ch;
            sfv__channel_own(ch, false);
            sfv__pd_orphan(ch);
            mc->n--;
        }
    }
    sfv__mc_free(mc);
}

SAFEVERBS_API sfv_result sfv_create_multi_channel(sfv_pd *pd, size_t n, const sfv_channel_desc *desc, sfv_multi_channel **out) {
    sfv_multi_channel *mc;
    sfv_channel_desc resolved;
    sfv__port_facts facts;
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    if (n == 0 || n > SFV__MAX_PEERS)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_create_multi_channel", "%zu channels (1 .. %d)", n, SFV__MAX_PEERS);
    mc = (sfv_multi_channel *)sfv__handle_new(sizeof *mc, SFV__H_MULTI);
    if (!mc) return sfv__fail_verb("calloc", ENOMEM);
    mc->peers = (sfv__peer *)SFV_CALLOC(n, sizeof *mc->peers);
    if (!mc->peers) {
        r = sfv__fail_verb("calloc", ENOMEM);
        goto free_mc;
    }
    r = sfv__desc_resolve(pd, desc, &resolved, &facts); /* once, for every channel */
    if (r) goto free_mc;
    for (; mc->n < n; mc->n++) {
        r = sfv__channel_new(pd, &resolved, &facts, &mc->peers[mc->n].ch);
        if (r) goto destroy_channels;
        sfv__channel_own(mc->peers[mc->n].ch, true);
    }
    *out = mc;
    return SFV_OK;
destroy_channels:
    sfv__mc_discard(mc); /* (fresh channels: no work) */
    return r;
free_mc:
    sfv__mc_free(mc);
    return r;
}

SAFEVERBS_API sfv_result sfv_destroy_multi_channel(sfv_multi_channel *mc) {
    sfv_result r;
    size_t i;
    if (!mc) return SFV_OK;
    SFV__LIVE_OR_REFUSE(mc, SFV__H_MULTI, "sfv_destroy_multi_channel");
    if (mc->in_scope)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_multi_channel", "a scope of this multi-channel is open: destroy it after the scope returns");
    for (i = 0; i < mc->n; i++) /* all or none: no channel goes while one of them would refuse */
        if (mc->peers[i].ch && sfv__scoped(mc->peers[i].ch))
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_multi_channel",
                             "the channel to peer %zu is inside an open scope (or many-peer call, or a scope's on_wc): destroy the multi-channel after the scope returns", i);
    if (mc->owned) /* the node still holds it: freed here, its next call would read freed memory */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_multi_channel", "the multi-channel is a node's (sfv_node_multi_channel): sfv_destroy_node destroys it");
    r = sfv__mc_destroy_channels(mc);
    if (r) return r;
    sfv__mc_free(mc);
    return SFV_OK;
}

SAFEVERBS_API size_t sfv_multi_channel_len(const sfv_multi_channel *mc) { return mc ? mc->n : 0; }

SAFEVERBS_API sfv_channel *sfv_multi_channel_peer(const sfv_multi_channel *mc, size_t peer) {
    return mc && peer < mc->n ? mc->peers[peer].ch : NULL;
}

static sfv_result sfv__mc_count(const sfv_multi_channel *mc, size_t n) {
    SFV__CHECK_HANDLE(mc, SFV__H_MULTI, "multi-channel");
    if (n != mc->n)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "multi-channel", "%zu endpoints for %zu channels", n, mc->n);
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_multi_channel_endpoints(const sfv_multi_channel *mc, sfv_endpoint *out, size_t n) {
    size_t i;
    sfv_result r;
    SFV__CHECK_ARG(out || n == 0, "out");
    r = sfv__mc_count(mc, n);
    for (i = 0; r == SFV_OK && i < n; i++) r = sfv_channel_endpoint(mc->peers[i].ch, &out[i]);
    /* Refused: the caller's n entries zeroed, but only where n entries can exist: no object is
       larger than PTRDIFF_MAX bytes, and a memset for a garbage n (SIZE_MAX / sizeof *out, say)
       crashed a call that refuses. */
    if (r && out && n <= (size_t)PTRDIFF_MAX / sizeof *out) memset(out, 0, n * sizeof *out);
    return r;
}

SAFEVERBS_API sfv_result sfv_multi_channel_handshake(sfv_multi_channel *mc, const sfv_endpoint *peers, size_t n) {
    size_t i;
    sfv_result r = sfv__mc_count(mc, n);
    if (r) return r;
    SFV__CHECK_ARG(peers, "peer endpoints");
    for (i = 0; i < n; i++) /* every refusal that needs no verb, before any channel connects */
        if ((r = sfv__handshake_check(mc->peers[i].ch, &peers[i])) != SFV_OK) return r;
    for (i = 0; i < n; i++)
        if ((r = sfv_channel_handshake(mc->peers[i].ch, &peers[i])) != SFV_OK) {
            const sfv_error why = sfv__last;
            if (i == 0 && r != SFV_ERR_BROKEN) return r; /* nothing connected: it can be repeated */
            return sfv__fail(SFV_ERR_BROKEN, why.errnum, why.verb, "channel %zu failed to connect part-way, so the multi-channel is broken (destroy it): %s",
                             i, why.message);
        }
    return SFV_OK;
}

/* Work for many peers: `count` requests of one kind. */
typedef enum sfv__many_kind { SFV__MANY_SEND, SFV__MANY_WRITE, SFV__MANY_RECEIVE, SFV__MANY_READ, SFV__MANY_MULTICAST } sfv__many_kind;
typedef struct sfv__many {
    sfv__many_kind kind;
    const void *reqs;                   /* sfv_peer_send, _write, _receive or _read; multicast: size_t peers */
    size_t count;
    const sfv_gather_element *sges;     /* multicast: the one message */
    size_t n;
} sfv__many;

/* The peer request i is for. */
static size_t sfv__many_peer(const sfv__many *m, size_t i) {
    switch (m->kind) {
    case SFV__MANY_SEND: return ((const sfv_peer_send *)m->reqs)[i].peer;
    case SFV__MANY_WRITE: return ((const sfv_peer_write *)m->reqs)[i].peer;
    case SFV__MANY_RECEIVE: return ((const sfv_peer_receive *)m->reqs)[i].peer;
    case SFV__MANY_READ: return ((const sfv_peer_read *)m->reqs)[i].peer;
    case SFV__MANY_MULTICAST: break;
    }
    return ((const size_t *)m->reqs)[i];
}

/* The size of one request of m's kind. */
static size_t sfv__many_req_size(sfv__many_kind kind) {
    switch (kind) {
    case SFV__MANY_SEND: return sizeof(sfv_peer_send);
    case SFV__MANY_WRITE: return sizeof(sfv_peer_write);
    case SFV__MANY_RECEIVE: return sizeof(sfv_peer_receive);
    case SFV__MANY_READ: return sizeof(sfv_peer_read);
    case SFV__MANY_MULTICAST: break;
    }
    return sizeof(size_t);
}

/* Request i's elements and remote region (NULL: none). */
static void sfv__many_req(const sfv__many *m, size_t i, const void **sges, size_t *n, const sfv_remote_mr **remote) {
    *remote = NULL;
    switch (m->kind) {
    case SFV__MANY_SEND: *sges = ((const sfv_peer_send *)m->reqs)[i].sges; *n = ((const sfv_peer_send *)m->reqs)[i].n; return;
    case SFV__MANY_WRITE:
        *sges = ((const sfv_peer_write *)m->reqs)[i].sges;
        *n = ((const sfv_peer_write *)m->reqs)[i].n;
        *remote = &((const sfv_peer_write *)m->reqs)[i].remote;
        return;
    case SFV__MANY_RECEIVE: *sges = ((const sfv_peer_receive *)m->reqs)[i].sges; *n = ((const sfv_peer_receive *)m->reqs)[i].n; return;
    case SFV__MANY_READ:
        *sges = ((const sfv_peer_read *)m->reqs)[i].sges;
        *n = ((const sfv_peer_read *)m->reqs)[i].n;
        *remote = &((const sfv_peer_read *)m->reqs)[i].remote;
        return;
    case SFV__MANY_MULTICAST: break;
    }
    *sges = m->sges;
    *n = m->n;
}

/* Every refusal a channel's post would make, for every request, before any is posted: so a
   refused call has posted nothing. Counts each channel's requests in peers[].next on the way. */
static sfv_result sfv__many_check(sfv_multi_channel *mc, const sfv__many *m) {
    const bool recv = m->kind == SFV__MANY_RECEIVE, read = m->kind == SFV__MANY_READ;
    size_t i;
    for (i = 0; i < mc->n; i++) mc->peers[i].next = 0;
    for (i = 0; i < m->count; i++) {
        const size_t peer = sfv__many_peer(m, i);
        const void *sges;
        size_t n;
        const sfv_remote_mr *remote;
        sfv_result r;
        sfv__many_req(m, i, &sges, &n, &remote);
        if ((r = sfv__channel_would_take(mc->peers[peer].ch, recv, read, sges, n, remote)) != SFV_OK) {
            const sfv_error why = sfv__last;
            return sfv__fail(r, why.errnum, why.verb, "request %zu (peer %zu), nothing posted: %s", i, peer, why.message);
        }
        mc->peers[peer].next++;
    }
    for (i = 0; i < mc->n; i++)
        if (mc->peers[i].next > sfv__channel_room(mc->peers[i].ch, recv))
            return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "multi-channel", "%llu requests for peer %zu, whose queue has room for %llu; nothing posted",
                             (unsigned long long)mc->peers[i].next, i, (unsigned long long)sfv__channel_room(mc->peers[i].ch, recv));
    return SFV_OK;
}

/* Posts request i on ch, with no pending handle (the call waits for it by its place). */
static sfv_result sfv__many_post_one(sfv_channel *ch, const sfv__many *m, size_t i) {
    switch (m->kind) {
    case SFV__MANY_SEND: {
        const sfv_peer_send *req = &((const sfv_peer_send *)m->reqs)[i];
        return req->has_imm ? sfv_channel_post_send_imm(ch, req->sges, req->n, req->imm, NULL)
                            : sfv_channel_post_send(ch, req->sges, req->n, NULL);
    }
    case SFV__MANY_WRITE: {
        const sfv_peer_write *req = &((const sfv_peer_write *)m->reqs)[i];
        return req->has_imm ? sfv_channel_post_write_imm(ch, req->sges, req->n, req->remote, req->imm, NULL)
                            : sfv_channel_post_write(ch, req->sges, req->n, req->remote, NULL);
    }
    case SFV__MANY_RECEIVE: {
        const sfv_peer_receive *req = &((const sfv_peer_receive *)m->reqs)[i];
        return sfv_channel_post_receive(ch, req->sges, req->n, NULL);
    }
    case SFV__MANY_READ: {
        const sfv_peer_read *req = &((const sfv_peer_read *)m->reqs)[i];
        return sfv_channel_post_read(ch, req->sges, req->n, req->remote, NULL);
    }
    case SFV__MANY_MULTICAST: break;
    }
    return sfv_channel_post_send(ch, m->sges, m->n, NULL);
}

/* wcs[from .. count) of requests never posted: zero, with the result that kept them back. */
static sfv_result sfv__wcs_unposted(sfv_work_completion *wcs, size_t from, size_t count, sfv_result r) {
    for (; wcs && from < count; from++) (void)sfv__wc_none(&wcs[from], r);
    return r;
}

static sfv_result sfv__many_run(sfv_multi_channel *mc, const sfv__many *m, sfv_work_completion *wcs) {
    const bool recv = m->kind == SFV__MANY_RECEIVE;
    size_t i, posted, failed = 0, first_at = 0;
    sfv_result post_r = SFV_OK, wait_r = SFV_OK;
    sfv__error_mark post_err; /* (with the count: a success takes back the timeouts of waits whose work completed) */
    sfv_error wait_err, stuck_err;
    bool stuck = false; /* some work could not be ended (sfv__stuck): said before any other failure, a failed wait's
                           (also SFV_ERR_DRIVER) included, whose "flushed" would have the caller take back buffers still the NIC's */
    sfv_work_completion first;
    uint64_t t0;
    /* A count no array holds (more than PTRDIFF_MAX bytes of requests or of wcs): refused before
       a request is read or a wc written, as no array of the caller's has that many: a garbage
       count with NULL requests (or NULL mc) wrote wcs[0 .. count) until it crashed. */
    if (m->count > (size_t)PTRDIFF_MAX / sfv__many_req_size(m->kind) || (wcs && m->count > (size_t)PTRDIFF_MAX / sizeof *wcs))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "multi-channel", "%zu requests: more than any array holds (nothing read, no wc written)", m->count);
    if (!mc || (!m->reqs && m->count))
        return sfv__wcs_unposted(wcs, 0, m->count, sfv__fail(SFV_ERR_INVALID, EINVAL, "multi-channel", "%s (NULL)", mc ? "requests" : "multi-channel"));
    for (i = 0; i < m->count; i++)
        if (sfv__many_peer(m, i) >= mc->n)
            return sfv__wcs_unposted(wcs, 0, m->count, sfv__fail(SFV_ERR_INVALID, EINVAL, "multi-channel", "request %zu is for peer %zu, of %zu", i, sfv__many_peer(m, i), mc->n));
    if ((post_r = sfv__many_check(mc, m)) != SFV_OK) return sfv__wcs_unposted(wcs, 0, m->count, post_r);
    sfv__many_open(mc->peers, mc->n, recv);
    for (posted = 0; posted < m->count; posted++) {
        post_r = sfv__many_post_one(mc->peers[sfv__many_peer(m, posted)].ch, m, posted);
        if (post_r) break;
    }
    post_err = sfv__error_mark_now();
    wait_err = sfv__last;
    for (i = 0; i < mc->n; i++) mc->peers[i].ch->scope_depth--; /* (sfv__many_open's; no scope's kind to restore) */
    memset(&first, 0, sizeof first);
    t0 = sfv__now_ns();
    for (i = 0; i < posted; i++) { /* a queue's work is in request order from where the call began */
        sfv_work_completion wc;
        bool took_stuck = false;
        const sfv_result w = sfv__many_take(&mc->peers[sfv__many_peer(m, i)], recv, t0, &wc, &took_stuck);
        if (took_stuck && !stuck) {
            stuck = true;
            stuck_err = sfv__last;
        }
        if (w != SFV_OK && w != SFV_ERR_TIMEOUT) { /* the wait failed (the CQ): the channel was aborted */
            wc.result = w;
            if (!wait_r) {
                wait_r = w;
                wait_err = sfv__last;
            }
        }
        if (wc.result != SFV_OK && failed++ == 0) {
            first = wc;
            first_at = i;
        }
        if (wcs) wcs[i] = wc;
    }
    sfv__wcs_unposted(wcs, posted, m->count, post_r);
    if (stuck) { /* (said first: the post's own failure would have the caller take back buffers still the NIC's) */
        sfv__last = stuck_err;
        return SFV_ERR_DRIVER;
    }
    if (post_r) {
        sfv__error_back(&post_err);
        return post_r;
    }
    if (wait_r) {
        sfv__last = wait_err;
        return wait_r;
    }
    if (failed)
        return sfv__fail(SFV_ERR_WORK, 0, "multi-channel", "%zu of %zu work requests failed; first: request %zu (peer %zu): %s (%s)",
                         failed, m->count, first_at, sfv__many_peer(m, first_at),
                         first.result == SFV_ERR_TIMEOUT ? "timed out (its channel was flushed)" : sfv_wc_status_str(first.status),
                         sfv_work_error_class_str(first.error_class));
    sfv__error_back(&post_err); /* (a wait that expired as its work completed recorded the timeout: a success leaves none) */
    return SFV_OK;
}

static sfv_result sfv__many_call(sfv_multi_channel *mc, sfv__many_kind kind, const void *reqs, size_t count, sfv_work_completion *wcs) {
    sfv__many m;
    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.reqs = reqs;
    m.count = count;
    return sfv__many_run(mc, &m, wcs);
}

SAFEVERBS_API sfv_result sfv_multi_channel_scatter_send(sfv_multi_channel *mc, const sfv_peer_send *reqs, size_t count, sfv_work_completion *wcs) {
    return sfv__many_call(mc, SFV__MANY_SEND, reqs, count, wcs);
}
SAFEVERBS_API sfv_result sfv_multi_channel_scatter_write(sfv_multi_channel *mc, const sfv_peer_write *reqs, size_t count, sfv_work_completion *wcs) {
    return sfv__many_call(mc, SFV__MANY_WRITE, reqs, count, wcs);
}
SAFEVERBS_API sfv_result sfv_multi_channel_gather_receive(sfv_multi_channel *mc, const sfv_peer_receive *reqs, size_t count, sfv_work_completion *wcs) {
    return sfv__many_call(mc, SFV__MANY_RECEIVE, reqs, count, wcs);
}
SAFEVERBS_API sfv_result sfv_multi_channel_gather_read(sfv_multi_channel *mc, const sfv_peer_read *reqs, size_t count, sfv_work_completion *wcs) {
    return sfv__many_call(mc, SFV__MANY_READ, reqs, count, wcs);
}
SAFEVERBS_API sfv_result sfv_multi_channel_multicast_send(sfv_multi_channel *mc, const size_t *peers, size_t npeers, const sfv_gather_element *sges, size_t n, sfv_work_completion *wcs) {
    sfv__many m;
    memset(&m, 0, sizeof m);
    m.kind = SFV__MANY_MULTICAST;
    m.reqs = peers;
    m.count = npeers;
    m.sges = sges;
    m.n = n;
    return sfv__many_run(mc, &m, wcs);
}

static sfv_result sfv__mc_scope_run(sfv_multi_channel *mc, sfv_multi_scope_fn fn, void *user, sfv_scope_report *rep, bool manual) {
    unsigned long f0;
    memset(rep, 0, sizeof *rep);
    SFV__CHECK_ARG(mc, "multi-channel");
    SFV__CHECK_ARG(fn, "fn");
    if (mc->in_scope) /* as in the crate, where the open scope holds the multi-channel */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "scope", "a scope of this multi-channel is already open");
    mc->in_scope = true;
    sfv__scope_open(mc->peers, mc->n, manual);
    f0 = sfv__failures;
    rep->fn_result = fn(mc, user);
    sfv__fn_failures = sfv__failures - f0;
    mc->in_scope = false;
    sfv__scope_close(mc->peers, mc->n);
    {
        static const sfv__sink none = {NULL, NULL};
        sfv__scope_settle(mc->peers, mc->n, rep, &none, manual);
    }
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_multi_channel_scope(sfv_multi_channel *mc, sfv_multi_scope_fn fn, void *user, sfv_scope_report *report) {
    sfv_scope_report local, *rep = report ? report : &local;
    return sfv__scope_verdict(sfv__mc_scope_run(mc, fn, user, rep, false), rep);
}
SAFEVERBS_API sfv_result sfv_multi_channel_manual_scope(sfv_multi_channel *mc, sfv_multi_scope_fn fn, void *user) {
    sfv_scope_report rep;
    return sfv__manual_verdict(sfv__mc_scope_run(mc, fn, user, &rep, true), &rep);
}

/* >>impl exchange ---------------------------------------------------------------------------- */
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/random.h>

SAFEVERBS_API sfv_result sfv_net_config_check(const sfv_net_node *nodes, size_t n) {
    size_t i;
    SFV__CHECK_ARG(nodes || n == 0, "nodes (NULL)");
    if (n == 0) return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "the network is empty");
    if (n > SFV__MAX_PEERS) return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "%zu ranks (at most %d)", n, SFV__MAX_PEERS);
    for (i = 0; i < n; i++) {
        const uint32_t r = nodes[i].rank;
        if (i == 0 && r != 0) return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "the first rank is %u, not 0", (unsigned)r);
        if (i > 0 && r == nodes[i - 1].rank) return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "rank %u appears twice", (unsigned)r);
        if (r != i) return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "rank %u where rank %zu belongs (ranks go 0, 1, 2, ... without gaps)", (unsigned)r, i);
        if (!nodes[i].host || !nodes[i].host[0] || !nodes[i].port)
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "network config", "rank %zu has no host or port", i);
    }
    return SFV_OK;
}

/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): what the exchange's proofs of the job key
   are made of. Plain and small, not fast (a few hundred MB/s): the exchange hashes kilobytes. */
typedef struct sfv__sha256 {
    uint32_t h[8];
    uint64_t bytes;      /* hashed so far */
    uint8_t block[64];
    size_t fill;         /* bytes waiting in block */
} sfv__sha256;

static const uint32_t sfv__sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t sfv__ror32(uint32_t x, int n) { return (x >> n) | ((x & ((1u << n) - 1)) << (32 - n)); } /* (no bit shifted out) */

/* SHA-256's sums are modulo 2^32 by its definition: the one place where unsigned arithmetic wraps
   on purpose (clang's -fsanitize=unsigned-integer-overflow is told so). */
#if defined(__clang__)
__attribute__((no_sanitize("unsigned-integer-overflow")))
#endif
static void sfv__sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    int i;
    for (i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (i = 16; i < 64; i++)
        w[i] = w[i - 16] + (sfv__ror32(w[i - 15], 7) ^ sfv__ror32(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (sfv__ror32(w[i - 2], 17) ^ sfv__ror32(w[i - 2], 19) ^ (w[i - 2] >> 10));
    for (i = 0; i < 64; i++) { /* the working variables a .. h (k: h) move down one each round, in registers */
        const uint32_t t1 = k + (sfv__ror32(e, 6) ^ sfv__ror32(e, 11) ^ sfv__ror32(e, 25)) + ((e & f) ^ (~e & g)) + sfv__sha256_k[i] + w[i];
        const uint32_t t2 = (sfv__ror32(a, 2) ^ sfv__ror32(a, 13) ^ sfv__ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

static void sfv__sha256_init(sfv__sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->bytes = 0;
    s->fill = 0;
}

static void sfv__sha256_update(sfv__sha256 *s, const void *data, size_t len) {
    const uint8_t *p = (const uint8_t *)data;
    s->bytes += len;
    while (len) {
        size_t k = 64 - s->fill < len ? 64 - s->fill : len;
        if (s->fill == 0 && len >= 64) { /* whole blocks straight from the input */
            sfv__sha256_block(s->h, p);
            p += 64;
            len -= 64;
            continue;
        }
        memcpy(s->block + s->fill, p, k);
        s->fill += k;
        p += k;
        len -= k;
        if (s->fill == 64) {
            sfv__sha256_block(s->h, s->block);
            s->fill = 0;
        }
    }
}

static void sfv__sha256_final(sfv__sha256 *s, uint8_t out[32]) {
    static const uint8_t pad[64] = {0x80};
    const uint64_t bits = s->bytes * 8;
    uint8_t len[8];
    int i;
    sfv__put_be(len, bits, 8);
    sfv__sha256_update(s, pad, (s->fill < 56 ? 56 : 120) - s->fill);
    sfv__sha256_update(s, len, 8);
    for (i = 0; i < 8; i++) sfv__put_be(out + 4 * i, s->h[i], 4);
}

typedef struct sfv__hmac { sfv__sha256 inner, outer; } sfv__hmac;

static void sfv__hmac_init(sfv__hmac *m, const void *key, size_t key_len) {
    uint8_t k[64], pad[64];
    int i;
    memset(k, 0, sizeof k);
    if (key_len > 64) { /* a long key is its hash */
        sfv__sha256_init(&m->inner);
        sfv__sha256_update(&m->inner, key, key_len);
        sfv__sha256_final(&m->inner, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (i = 0; i < 64; i++) pad[i] = (uint8_t)(k[i] ^ 0x36);
    sfv__sha256_init(&m->inner);
    sfv__sha256_update(&m->inner, pad, 64);
    for (i = 0; i < 64; i++) pad[i] = (uint8_t)(k[i] ^ 0x5c);
    sfv__sha256_init(&m->outer);
    sfv__sha256_update(&m->outer, pad, 64);
}
static void sfv__hmac_update(sfv__hmac *m, const void *data, size_t len) { sfv__sha256_update(&m->inner, data, len); }
static void sfv__hmac_final(sfv__hmac *m, uint8_t out[32]) {
    uint8_t d[32];
    sfv__sha256_final(&m->inner, d);
    sfv__sha256_update(&m->outer, d, sizeof d);
    sfv__sha256_final(&m->outer, out);
}

/* Equal or not, in a time that does not depend on where they differ. */
static bool sfv__same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    volatile uint8_t d = 0;
    size_t i;
    for (i = 0; i < n; i++) d = (uint8_t)(d | (a[i] ^ b[i]));
    return d == 0;
}

/* Fills out with bytes from the kernel's CSPRNG (getrandom, else /dev/urandom). */
static sfv_result sfv__random(uint8_t *out, size_t len) {
    size_t got = 0;
    int tries, err = EIO;
    for (tries = 0; got < len && tries < 100; tries++) {
        ssize_t k = getrandom(out + got, len - got, 0);
        if (k > 0) got += (size_t)k;
        else if (k < 0 && errno != EINTR) { err = errno; break; }
    }
    if (got < len) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0) err = errno;
        for (tries = 0; fd >= 0 && got < len && tries < 100; tries++) {
            ssize_t k = read(fd, out + got, len - got);
            if (k > 0) got += (size_t)k;
            else if (k == 0 || errno != EINTR) { err = k ? errno : EIO; break; }
        }
        if (fd >= 0) close(fd);
    }
    if (got < len) return sfv__fail(SFV_ERR_DRIVER, err, "getrandom", "no random bytes for the exchange's nonces: %s", strerror(err));
    return SFV_OK;
}

/* The exchange's frames, each 48 bytes: "SX", version 2, a type, three 32-bit big-endian words
   and a 32-byte body.
     HELLO  words: rank, world size, message size (bit 31: the side keeps the connection for
            sfv_node_connect's sync after it); body: a fresh random nonce
     PROOF  words: 0, 0, 0 (reserved);             body: HMAC-SHA256 of the transcript
     TAG    words: 0, 0, 0 (reserved);             body: HMAC-SHA256 of the message bytes
   Every byte of a frame from a peer is checked (sfv__ex_decode) before any is believed. */
enum { SFV__EX_FRAME = 48, SFV__EX_VERSION = 2, SFV__EX_HELLO = 1, SFV__EX_PROOF = 2, SFV__EX_TAG = 3 };
/* At most this many accepted connections not yet proven; more are closed at once. */
enum { SFV__EX_PENDING = 16 };
#define SFV__EX_MAX_SIZE ((size_t)64 << 20)

typedef struct sfv__ex_frame {
    uint8_t type;
    uint32_t rank, world, size; /* a HELLO's; 0 in the others */
    bool keeps;                 /* a HELLO's: its side keeps the connection for a sync (>>node) */
    uint8_t body[32];
} sfv__ex_frame;
#define SFV__EX_KEEPS 0x80000000u

static void sfv__ex_encode(const sfv__ex_frame *f, uint8_t out[SFV__EX_FRAME]) {
    out[0] = 'S'; out[1] = 'X'; out[2] = SFV__EX_VERSION; out[3] = f->type;
    sfv__put_be(out + 4, f->rank, 4);
    sfv__put_be(out + 8, f->world, 4);
    sfv__put_be(out + 12, f->size | (f->keeps ? SFV__EX_KEEPS : 0), 4);
    memcpy(out + 16, f->body, sizeof f->body);
}

/* Decodes a frame that came from the network (from anyone). NULL when it is well formed, else
   what is wrong with it; out is zeroed first, and filled only when well formed. It does not know
   the job: whether the rank is due, the world and size ours, the MAC right, is the caller's. */
static const char *sfv__ex_decode(const uint8_t *in, size_t size, sfv__ex_frame *out) {
    int i;
    memset(out, 0, sizeof *out);
    if (!in || size != SFV__EX_FRAME) return "not a 48-byte frame";
    if (in[0] != 'S' || in[1] != 'X') return "not an exchange frame";
    if (in[2] != SFV__EX_VERSION) return "another version of the exchange";
    switch (in[3]) {
    case SFV__EX_HELLO: {
        const uint64_t rank = sfv__get_be(in + 4, 4), world = sfv__get_be(in + 8, 4), word = sfv__get_be(in + 12, 4),
                       bytes = word & ~(uint64_t)SFV__EX_KEEPS;
        if (world == 0 || world > SFV__MAX_PEERS) return "a world size out of range";
        if (rank >= world) return "a rank outside its world";
        if (bytes > SFV__EX_MAX_SIZE) return "a message size over 64 MiB";
        out->rank = (uint32_t)rank;
        out->world = (uint32_t)world;
        out->size = (uint32_t)bytes;
        out->keeps = (word & SFV__EX_KEEPS) != 0;
        break;
    }
    case SFV__EX_PROOF:
    case SFV__EX_TAG:
        for (i = 4; i < 16; i++)
            if (in[i] != 0) return "a reserved byte that is not 0";
        break;
    default:
        return "an unknown frame type";
    }
    out->type = in[3];
    memcpy(out->body, in + 16, sizeof out->body);
    return NULL;
}

/* Where the key comes from, and what a run without one may do. */
typedef struct sfv__ex_key {
    const uint8_t *bytes;
    size_t len;
    bool loopback_only;   /* no key: every address must be this machine's loopback */
    uint32_t proof_ms;
} sfv__ex_key;

static sfv_result sfv__ex_key_pick(const sfv_exchange_desc *desc, sfv__ex_key *k) {
    const char *env = getenv("SAFEVERBS_JOB_KEY");
    memset(k, 0, sizeof *k);
    k->proof_ms = desc && desc->proof_timeout_ms ? desc->proof_timeout_ms : 1000;
    if (desc && desc->key_len && !desc->key)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "sfv_exchange_desc.key is NULL with key_len %zu", desc->key_len);
    if (desc && desc->key && desc->key_len) {
        k->bytes = (const uint8_t *)desc->key;
        k->len = desc->key_len;
    } else if (env && env[0]) {
        k->bytes = (const uint8_t *)env;
        k->len = strlen(env);
    } else {
        k->loopback_only = !(desc && desc->insecure_without_key);
    }
    return SFV_OK;
}

/* HMAC-SHA256(key, label, what, the connecting side's hello, the listening side's hello, data).
   what: 'C'/'L' the connecting/listening side's proof, 'c'/'l' its message bytes. Both hellos
   carry a fresh nonce, so no proof or tag is good for another connection or direction. */
static void sfv__ex_mac(const sfv__ex_key *k, char what, const uint8_t *hello_c, const uint8_t *hello_l, const void *data, size_t len,
                        uint8_t out[32]) {
    static const char label[] = "safeverbs exchange v2";
    const uint8_t w = (uint8_t)what;
    sfv__hmac m;
    sfv__hmac_init(&m, k->bytes, k->len);
    sfv__hmac_update(&m, label, sizeof label);
    sfv__hmac_update(&m, &w, 1);
    sfv__hmac_update(&m, hello_c, SFV__EX_FRAME);
    sfv__hmac_update(&m, hello_l, SFV__EX_FRAME);
    if (len) sfv__hmac_update(&m, data, len);
    sfv__hmac_final(&m, out);
}

/* One exchange in progress. */
typedef struct sfv__ex {
    const sfv_net_node *nodes;
    size_t n, rank, size;
    const void *mine;
    uint8_t *all;
    sfv__ex_key key;
    uint64_t deadline;
    bool *seen;            /* seen[r]: rank r proved the key and swapped (or is swapping) */
    size_t heard;          /* lower ranks seen */
    unsigned strangers;    /* connections dropped, for the message of a timeout */
    char stranger[64];     /* the last one's ADDR:PORT */
    char why[64];          /* and what it did */
    struct sfv__ex_link *links; /* NULL: each connection closes when its swap is done */
} sfv__ex;

/* A connection of a finished exchange kept for one more round, sfv_node_connect's sync after the
   handshake (sfv__ex_sync): its socket and the two hellos its tags are bound to. fd -1: none. */
typedef struct sfv__ex_link {
    int fd;
    bool listening;
    uint8_t hello_c[SFV__EX_FRAME], hello_l[SFV__EX_FRAME];
} sfv__ex_link;

static void sfv__ex_links_close(sfv__ex_link *links, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (links[i].fd >= 0) close(links[i].fd);
}
/* The end of one swap: the connection kept (x->links, a swap that succeeded) or closed. */
static void sfv__ex_end(sfv__ex *x, int fd, size_t peer, bool listening, const uint8_t *hello_c, const uint8_t *hello_l, sfv_result r) {
    sfv__ex_link *l = x->links ? &x->links[peer] : NULL;
    if (r != SFV_OK || !l || l->fd >= 0) {
        close(fd);
        return;
    }
    l->fd = fd;
    l->listening = listening;
    memcpy(l->hello_c, hello_c, SFV__EX_FRAME);
    memcpy(l->hello_l, hello_l, SFV__EX_FRAME);
}

/* An accepted connection not proven yet. */
typedef struct sfv__ex_conn {
    int fd;
    uint64_t deadline;     /* to prove the key by */
    size_t got, sent, out_len;
    uint8_t in[2 * SFV__EX_FRAME];   /* its hello, then its proof */
    uint8_t out[2 * SFV__EX_FRAME];  /* our hello, then our proof */
    char addr[64];
} sfv__ex_conn;

static sfv_result sfv__ex_timeout(const sfv__ex *x, size_t peer) {
    if (!x->strangers) return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange", "rank %zu did not complete the exchange in time", peer);
    return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange",
                     "rank %zu did not come in time; dropped a connection from %s that did not prove the job key: %s (%u in all)",
                     peer, x->stranger, x->why, x->strangers);
}

/* Waits until fd is ready for `events`: SFV_OK, or the timeout (naming rank `peer`) or socket error. */
static sfv_result sfv__fd_wait(int fd, short events, uint64_t deadline, size_t peer) {
    for (;;) {
        struct pollfd pfd;
        int rc;
        pfd.fd = fd;
        pfd.events = events;
        pfd.revents = 0;
        rc = poll(&pfd, 1, sfv__ms_left(deadline));
        if (rc > 0) return SFV_OK;
        if (rc < 0 && errno != EINTR) return sfv__fail_verb("poll", errno);
        if (rc == 0 && sfv__now_ns() >= deadline)
            return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange", "rank %zu did not complete the exchange in time", peer);
    }
}

/* Moves len bytes through a non-blocking socket, before the deadline. */
static sfv_result sfv__fd_io(int fd, void *buf, size_t len, bool writing, uint64_t deadline, size_t peer) {
    uint8_t *p = (uint8_t *)buf;
    while (len) {
        ssize_t k = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
        } else if (k == 0) {
            return sfv__fail(SFV_ERR_DRIVER, ECONNRESET, "exchange", "rank %zu closed the connection mid-exchange", peer);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            sfv_result r = sfv__fd_wait(fd, writing ? POLLOUT : POLLIN, deadline, peer);
            if (r) return r;
        } else if (errno == ECONNRESET || errno == EPIPE) { /* closed with our bytes unread: a reset */
            return sfv__fail(SFV_ERR_DRIVER, errno, "exchange", "rank %zu closed the connection mid-exchange (%s)", peer, strerror(errno));
        } else {
            return sfv__fail_verb(writing ? "send" : "recv", errno);
        }
    }
    return SFV_OK;
}

/* The lowest rank below ours not heard from yet: the one an accepting side waits for. */
static size_t sfv__ex_awaited(const sfv__ex *x) {
    size_t lower = 0;
    while (lower + 1 < x->rank && x->seen[lower]) lower++;
    return lower;
}

/* A proven peer's world and message size must be ours, and so must what comes after: a sync on
   these connections (sfv_node_connect) or none (an exchange of its own). */
static sfv_result sfv__ex_same_job(const sfv__ex *x, const sfv__ex_frame *hello, size_t peer) {
    if (hello->world != x->n || hello->size != x->size)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "rank %zu has another world size or message size (%u, %u; ours %zu, %zu)", peer,
                         (unsigned)hello->world, (unsigned)hello->size, x->n, x->size);
    if (hello->keeps != (x->links != NULL))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "rank %zu %s: every rank of a node connects the same way", peer,
                         hello->keeps ? "connects its node with sfv_node_connect, this rank with a plain exchange (by hand)"
                                      : "runs a plain exchange (a node connected by hand), this rank sfv_node_connect");
    return SFV_OK;
}

/* The message bytes, each way followed by a TAG frame over them: the listening side sends
   first. A proven peer whose bytes fail their tag were changed on the way: SFV_ERR_PERMISSION. */
static sfv_result sfv__ex_data(sfv__ex *x, int fd, bool listening, size_t peer, const uint8_t *hello_c, const uint8_t *hello_l) {
    uint8_t mine_tag[SFV__EX_FRAME], in[SFV__EX_FRAME], want[32];
    sfv__ex_frame f;
    const char *bad;
    sfv_result r;
    if (!x->size) return SFV_OK; /* all may be NULL; the proofs covered the hellos */
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_TAG;
    sfv__ex_mac(&x->key, listening ? 'l' : 'c', hello_c, hello_l, x->mine, x->size, f.body);
    sfv__ex_encode(&f, mine_tag);
    if (listening && ((r = sfv__fd_io(fd, (void *)(uintptr_t)x->mine, x->size, true, x->deadline, peer)) != SFV_OK ||
                      (r = sfv__fd_io(fd, mine_tag, sizeof mine_tag, true, x->deadline, peer)) != SFV_OK))
        return r;
    if ((r = sfv__fd_io(fd, x->all + peer * x->size, x->size, false, x->deadline, peer)) != SFV_OK) return r;
    if ((r = sfv__fd_io(fd, in, sizeof in, false, x->deadline, peer)) != SFV_OK) return r;
    bad = sfv__ex_decode(in, sizeof in, &f);
    if (!bad && f.type != SFV__EX_TAG) bad = "a frame that is not a tag";
    sfv__ex_mac(&x->key, listening ? 'c' : 'l', hello_c, hello_l, x->all + peer * x->size, x->size, want);
    if (!bad && !sfv__same_bytes(f.body, want, sizeof want)) bad = "bytes that do not match their tag (changed on the way?)";
    if (bad) return sfv__fail(SFV_ERR_PERMISSION, EACCES, "exchange", "rank %zu sent %s", peer, bad);
    if (!listening && ((r = sfv__fd_io(fd, (void *)(uintptr_t)x->mine, x->size, true, x->deadline, peer)) != SFV_OK ||
                       (r = sfv__fd_io(fd, mine_tag, sizeof mine_tag, true, x->deadline, peer)) != SFV_OK))
        return r;
    return SFV_OK;
}

/* Every socket of the exchange, listening or connecting, with SO_REUSEADDR: a connection closed
   first on our side waits in TIME_WAIT on its local port for a minute, and that port, picked by
   the kernel, can be a rank's not listening yet; Linux lets the rank bind it then only if both
   sockets said SO_REUSEADDR. */
static int sfv__socket_for(const struct addrinfo *a) {
    const int one = 1;
#ifdef SOCK_CLOEXEC
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
#else
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0) (void)sfv__fd_flags(fd, true);
#endif
    if (fd >= 0) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return fd;
}

/* The exchange sends small frames back to back: no Nagle wait (a delayed ACK, 40 ms) between them. */
static void sfv__nodelay(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Accepts a connection (non-blocking, close-on-exec) and writes its "ADDR:PORT" to addr. */
static int sfv__accept(int lfd, char *addr, size_t addr_len) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[64], port[16];
#if defined(_GNU_SOURCE) && defined(SOCK_CLOEXEC) /* accept4 is a GNU call */
    int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
#else
    int fd = accept(lfd, (struct sockaddr *)&ss, &len);
    if (fd >= 0) {
        (void)sfv__fd_flags(fd, true);
    }
#endif
    if (fd >= 0) {
        sfv__nodelay(fd);
        if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
            snprintf(addr, addr_len, "an unknown address");
        else
            snprintf(addr, addr_len, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
    }
    return fd;
}

/* 127.0.0.0/8, ::1 or ::ffff:127.x.y.z. */
static bool sfv__is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        return IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr) || (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127);
    }
    return false;
}

/* A name lookup that keeps the deadline. getaddrinfo has none of its own (a resolver that does
   not answer costs its timeout times its attempts, seconds), so a name (not a numeric address,
   which is parsed at once) is looked up on a short-lived thread; when the deadline passes first
   the caller goes and the thread, on its own, frees what it finds. Shared by both: a count. */
typedef struct sfv__lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs, done, rc, err; /* err: errno where rc is EAI_SYSTEM */
    struct addrinfo hints, *res;
    char port[8];
    char host[1]; /* grows: the name and its NUL */
} sfv__lookup;

static void sfv__lookup_unref(sfv__lookup *l) {
    int left;
    pthread_mutex_lock(&l->mu);
    left = --l->refs;
    pthread_mutex_unlock(&l->mu);
    if (left) return;
    if (l->res) freeaddrinfo(l->res);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    SFV_FREE(l);
}

static void *sfv__lookup_run(void *arg) {
    sfv__lookup *l = (sfv__lookup *)arg;
    struct addrinfo *res = NULL;
    const int rc = getaddrinfo(l->host, l->port, &l->hints, &res);
    const int err = errno; /* (EAI_SYSTEM's: this thread's, given to the caller's) */
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->err = err;
    l->res = res;
    l->done = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    sfv__lookup_unref(l);
    return NULL;
}

/* getaddrinfo(host, port, hints) by the deadline: its result, or EAI_AGAIN with *timed_out set
   when the deadline came first (or a thread could not be had: EAI_SYSTEM with errno). */
static int sfv__getaddrinfo_by(const char *host, const char *port, const struct addrinfo *hints, uint64_t deadline,
                               struct addrinfo **out, bool *timed_out) {
    struct addrinfo numeric = *hints;
    pthread_condattr_t ca;
    pthread_attr_t ta;
    pthread_t t;
    sfv__lookup *l;
    size_t len;
    int rc, lookup_errno = 0;
    *timed_out = false;
    numeric.ai_flags |= AI_NUMERICHOST;
    rc = getaddrinfo(host, port, &numeric, out);
    if (rc != EAI_NONAME || !host) return rc; /* numeric (or no host: the wildcard), done at once */
    len = strlen(host);
    l = (sfv__lookup *)SFV_CALLOC(1, sizeof *l + len);
    if (!l) { errno = ENOMEM; return EAI_SYSTEM; }
    memcpy(l->host, host, len + 1);
    snprintf(l->port, sizeof l->port, "%s", port);
    l->hints = *hints;
    l->refs = 2; /* this caller and the thread */
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &ta, sfv__lookup_run, l);
    pthread_attr_destroy(&ta);
    if (rc) {
        l->refs = 1;
        sfv__lookup_unref(l);
        errno = rc;
        return EAI_SYSTEM;
    }
    {   /* CLOCK_MONOTONIC_COARSE (the deadline's clock) is CLOCK_MONOTONIC read at tick resolution */
        struct timespec ts;
        ts.tv_sec = (time_t)(deadline / 1000000000ull);
        ts.tv_nsec = (long)(deadline % 1000000000ull);
        pthread_mutex_lock(&l->mu);
        while (!l->done && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT) {}
    }
    if (l->done) {
        rc = l->rc;
        lookup_errno = l->err;
        *out = l->res;
        l->res = NULL;
    } else {
        rc = EAI_AGAIN;
        *timed_out = true;
    }
    pthread_mutex_unlock(&l->mu);
    sfv__lookup_unref(l);
    if (rc == EAI_SYSTEM) errno = lookup_errno; /* (the lookup thread's, not this one's) */
    return rc;
}

/* Resolves a rank's address by the deadline; without a job key, only to loopback addresses
   (SFV_ERR_PERMISSION). */
static sfv_result sfv__resolve(const sfv_net_node *node, bool passive, bool loopback_only, uint64_t deadline,
                               struct addrinfo **out) {
    struct addrinfo hints, *a;
    char port[8];
    bool late;
    int rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(port, sizeof port, "%u", (unsigned)node->port);
    *out = NULL;
    rc = sfv__getaddrinfo_by(node->host, port, &hints, deadline, out, &late);
    if (late)
        return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "getaddrinfo", "rank %u: looking up %s took past the deadline",
                         (unsigned)node->rank, node->host);
    if (rc == EAI_SYSTEM) { /* (a system error without an errno is a failure all the same, never SFV_OK) */
        const int err = errno ? errno : EIO;
        return sfv__fail(sfv_result_from_errno(err), err, "getaddrinfo", "rank %u: %s: %s", (unsigned)node->rank, node->host, strerror(err));
    }
    if (rc)
        return sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, "getaddrinfo", "rank %u: %s:%s: %s", (unsigned)node->rank, node->host, port, gai_strerror(rc));
    for (a = *out; loopback_only && a; a = a->ai_next)
        if (!sfv__is_loopback(a->ai_addr)) {
            freeaddrinfo(*out);
            *out = NULL;
            return sfv__fail(SFV_ERR_PERMISSION, EACCES, "exchange",
                             "rank %u's %s is not a loopback address: set a job key (SAFEVERBS_JOB_KEY) to exchange over a network",
                             (unsigned)node->rank, node->host);
        }
    return SFV_OK;
}

static sfv_result sfv__ex_listen(const sfv_net_node *me, bool loopback_only, uint64_t deadline, int *out) {
    struct addrinfo *ai, *a;
    int fd = -1, err = EADDRNOTAVAIL;
    sfv_result r = sfv__resolve(me, true, loopback_only, deadline, &ai);
    if (r) return r;
    for (a = ai; a && fd < 0; a = a->ai_next) {
        fd = sfv__socket_for(a);
        if (fd < 0) { err = errno; continue; }
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SFV__MAX_PEERS < 128 ? SFV__MAX_PEERS : 128) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) return sfv__fail(sfv_result_from_errno(err), err, "bind", "cannot listen on %s:%u: %s", me->host, (unsigned)me->port, strerror(err));
    *out = fd;
    return SFV_OK;
}

/* What a peer that is not up yet answers: worth another try. */
static bool sfv__not_up_yet(int err) {
    return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
}

/* Sleeps *pause_ms (never past deadline), then doubles it up to cap_ms: a retry of something a
   moment late costs a moment, of something long gone a poll every cap_ms. */
static void sfv__backoff(uint64_t deadline, int *pause_ms, int cap_ms) {
    const int left = sfv__ms_left(deadline);
    (void)poll(NULL, 0, left < *pause_ms ? left : *pause_ms);
    if (*pause_ms < cap_ms) *pause_ms = *pause_ms * 2 < cap_ms ? *pause_ms * 2 : cap_ms;
}

/* A connection to a port no one listens on can be one to itself: the kernel picks the local
   port, and when that is the port asked for, TCP's simultaneous open connects the socket to
   itself (Linux: to an even port of the ephemeral range, after some thousands of refused tries),
   and our hello comes back as the "listener's". No rank is there yet, so it is tried again; and
   it is reset, not closed in order, which would leave it in TIME_WAIT on the rank's port for a
   minute, where the rank could not listen. */
static bool sfv__connected_to_itself(int fd) {
    struct sockaddr_storage me, peer;
    socklen_t me_len = sizeof me, peer_len = sizeof peer;
    struct linger reset;
    memset(&me, 0, sizeof me);
    memset(&peer, 0, sizeof peer);
    if (getsockname(fd, (struct sockaddr *)&me, &me_len) != 0 || getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0 ||
        me_len != peer_len || memcmp(&me, &peer, me_len) != 0)
        return false;
    reset.l_onoff = 1;
    reset.l_linger = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    return true;
}

/* Connects to a rank's address, retrying while it does not listen yet. The name is resolved
   once (a slow resolver then costs one lookup, which is checked against the deadline), the
   connection attempts are retried after 1 ms, doubling to 50 ms, until the deadline. Every
   address of the name is tried, as the listening side tries each until one binds: one that
   fails for good (a family this kernel lacks, EAFNOSUPPORT: "localhost" is ::1 first where IPv6
   is off) fails the call only when no other is worth another try, and one that does not answer
   (a filtered address) is left after a second for the next, not waited on to the deadline. */
#define SFV__EX_ATTEMPT_NS 1000000000ull /* one address's connect, where the name has others */
static sfv_result sfv__ex_connect(const sfv_net_node *peer, bool loopback_only, uint64_t deadline, int *out) {
    struct addrinfo *ai, *a;
    int last = 0, pause_ms = 1;
    sfv_result r = sfv__resolve(peer, false, loopback_only, deadline, &ai);
    if (r) return r;
    for (;;) {
        int hard = EADDRNOTAVAIL;  /* an address's failure for good, the last one's (none: as the listening side's) */
        bool hard_socket = false;  /* that failure was socket()'s */
        bool waiting = false;      /* an address that does not listen yet: worth another round */
        if (sfv__now_ns() >= deadline) {
            freeaddrinfo(ai);
            return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange", "rank %u did not complete the exchange in time (connect: %s)",
                             (unsigned)peer->rank, strerror(last ? last : ETIMEDOUT));
        }
        for (a = ai; a; a = a->ai_next) {
            int fd = sfv__socket_for(a), err = 0;
            socklen_t len = sizeof err;
            if (fd < 0) {
                hard = errno;
                hard_socket = true;
                continue;
            }
            if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
                err = errno;
            } else { /* with other addresses to try, one that does not answer (filtered) gets a second, not the whole deadline */
                const uint64_t slice = ai->ai_next ? sfv__now_ns() + SFV__EX_ATTEMPT_NS : deadline;
                const sfv__error_mark before = sfv__error_mark_now();
                if ((r = sfv__fd_wait(fd, POLLOUT, slice < deadline ? slice : deadline, peer->rank)) != SFV_OK) {
                    if (r != SFV_ERR_TIMEOUT || slice >= deadline) {
                        close(fd);
                        freeaddrinfo(ai);
                        return r;
                    }
                    sfv__error_back(&before);
                    err = ETIMEDOUT; /* (no answer yet: tried again next round) */
                } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
                    err = errno;
                }
            }
            if (err == 0 && sfv__connected_to_itself(fd)) err = ECONNREFUSED; /* (not listening yet) */
            if (err == 0) {
                freeaddrinfo(ai);
                sfv__nodelay(fd);
                *out = fd;
                return SFV_OK;
            }
            close(fd);
            if (!sfv__not_up_yet(err)) {
                hard = err;
                hard_socket = false;
                continue;
            }
            last = err;
            waiting = true;
        }
        if (!waiting) { /* every address failed for good */
            freeaddrinfo(ai);
            if (hard_socket) return sfv__fail_verb("socket", hard);
            return sfv__fail(sfv_result_from_errno(hard), hard, "connect", "rank %u at %s:%u: %s", (unsigned)peer->rank,
                             peer->host, (unsigned)peer->port, strerror(hard));
        }
        sfv__backoff(deadline, &pause_ms, 50); /* not listening yet */
    }
}

/* Moves a connection not yet proven as far as it goes without blocking: sends our hello, reads
   its hello (a rank below ours not heard yet), sends our proof, reads and checks its proof.
   1: proven (its hello is in c->in); 0: not yet; -1: dropped, why says what it did. */
static int sfv__ex_conn_step(const sfv__ex *x, sfv__ex_conn *c, char *why, size_t why_len) {
    for (;;) {
        const size_t need = c->out_len > SFV__EX_FRAME ? 2 * SFV__EX_FRAME : SFV__EX_FRAME;
        bool moved = false;
        sfv__ex_frame f;
        const char *bad;
        if (c->sent < c->out_len) {
            ssize_t k = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
            if (k > 0) {
                c->sent += (size_t)k;
                moved = true;
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                snprintf(why, why_len, "send: %s", strerror(errno));
                return -1;
            }
        }
        if (c->got < need) {
            ssize_t k = recv(c->fd, c->in + c->got, need - c->got, 0);
            if (k > 0) {
                c->got += (size_t)k;
                moved = true;
            } else if (k == 0) {
                snprintf(why, why_len, "it hung up");
                return -1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                snprintf(why, why_len, "recv: %s", strerror(errno));
                return -1;
            }
        }
        if (c->got == SFV__EX_FRAME && c->out_len == SFV__EX_FRAME) { /* its hello, new */
            bad = sfv__ex_decode(c->in, SFV__EX_FRAME, &f);
            if (!bad && f.type != SFV__EX_HELLO) bad = "a frame that is not a hello";
            if (bad) {
                snprintf(why, why_len, "it sent %s", bad);
                return -1;
            }
            if (f.rank >= x->rank || x->seen[f.rank]) {
                snprintf(why, why_len, "it named rank %u, not due here", (unsigned)f.rank);
                return -1;
            }
            memset(&f, 0, sizeof f);
            f.type = SFV__EX_PROOF;
            sfv__ex_mac(&x->key, 'L', c->in, c->out, NULL, 0, f.body);
            sfv__ex_encode(&f, c->out + SFV__EX_FRAME);
            c->out_len = 2 * SFV__EX_FRAME;
            moved = true;
        }
        if (c->got == 2 * SFV__EX_FRAME) { /* its proof */
            uint8_t want[32];
            sfv__ex_frame hello;
            bad = sfv__ex_decode(c->in + SFV__EX_FRAME, SFV__EX_FRAME, &f);
            if (!bad && f.type != SFV__EX_PROOF) bad = "a frame that is not a proof";
            sfv__ex_mac(&x->key, 'C', c->in, c->out, NULL, 0, want);
            if (!bad && !sfv__same_bytes(f.body, want, sizeof want)) bad = "a wrong proof";
            if (bad) {
                snprintf(why, why_len, "it sent %s", bad);
                return -1;
            }
            (void)sfv__ex_decode(c->in, SFV__EX_FRAME, &hello);
            if (x->seen[hello.rank]) { /* another connection proved it first: a replay cannot, so a bug of its */
                snprintf(why, why_len, "it named rank %u, heard already", (unsigned)hello.rank);
                return -1;
            }
            return 1;
        }
        if (!moved) return 0;
    }
}

/* Records a dropped connection for the message of a later timeout, and closes it. */
static void sfv__ex_drop(sfv__ex *x, int fd, const char *addr, const char *why) {
    close(fd);
    x->strangers++;
    snprintf(x->stranger, sizeof x->stranger, "%s", addr);
    snprintf(x->why, sizeof x->why, "%s", why);
}

/* The listening side: accepts until every lower rank has proven the key and swapped. Connections
   are served side by side until proven (at most SFV__EX_PENDING, each for proof_ms), so a
   stranger holds no rank's place; a proven rank's bytes are then swapped before the next. */
static sfv_result sfv__ex_accept_lower(sfv__ex *x) {
    sfv__ex_conn *conns = (sfv__ex_conn *)SFV_CALLOC(SFV__EX_PENDING, sizeof *conns);
    size_t live = 0, i;
    int lfd = -1;
    sfv_result r;
    if (!conns) return sfv__fail_verb("calloc", ENOMEM);
    r = sfv__ex_listen(&x->nodes[x->rank], x->key.loopback_only, x->deadline, &lfd);
    while (r == SFV_OK && x->heard < x->rank) {
        struct pollfd pfd[1 + SFV__EX_PENDING];
        uint64_t wake = x->deadline, now = sfv__now_ns();
        int rc, accepted;
        if (now >= x->deadline) {
            r = sfv__ex_timeout(x, sfv__ex_awaited(x));
            break;
        }
        pfd[0].fd = lfd;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        for (i = 0; i < live; i++) {
            pfd[1 + i].fd = conns[i].fd;
            pfd[1 + i].events = (short)(POLLIN | (conns[i].sent < conns[i].out_len ? POLLOUT : 0));
            pfd[1 + i].revents = 0;
            if (conns[i].deadline < wake) wake = conns[i].deadline;
        }
        rc = poll(pfd, (nfds_t)(1 + live), sfv__ms_left(wake));
        if (rc < 0 && errno != EINTR) {
            r = sfv__fail_verb("poll", errno);
            break;
        }
        for (accepted = 0; rc > 0 && (pfd[0].revents & POLLIN) && accepted < 64; accepted++) {
            char addr[64];
            sfv__ex_conn *c;
            sfv__ex_frame hello;
            int fd = sfv__accept(lfd, addr, sizeof addr);
            if (fd < 0) {
                /* a connection that died before we took it (accept(2) passes on its network error):
                   a stranger's problem, not the exchange's */
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO ||
                    errno == ENETDOWN || errno == ENOPROTOOPT || errno == EHOSTDOWN || errno == EHOSTUNREACH ||
                    errno == EOPNOTSUPP || errno == ENETUNREACH || errno == ENONET)
                    break;
                r = sfv__fail_verb("accept", errno);
                break;
            }
            if (live == SFV__EX_PENDING) { /* a flood: the newest waits nowhere (a real rank tries again) */
                sfv__ex_drop(x, fd, addr, "over the cap of connections not yet proven");
                continue;
            }
            c = &conns[live];
            memset(c, 0, sizeof *c);
            c->fd = fd;
            c->deadline = sfv__deadline(x->key.proof_ms);
            snprintf(c->addr, sizeof c->addr, "%s", addr);
            memset(&hello, 0, sizeof hello);
            hello.type = SFV__EX_HELLO;
            hello.rank = (uint32_t)x->rank;
            hello.world = (uint32_t)x->n;
            hello.size = (uint32_t)x->size;
            hello.keeps = x->links != NULL;
            if ((r = sfv__random(hello.body, sizeof hello.body)) != SFV_OK) {
                close(fd);
                break;
            }
            sfv__ex_encode(&hello, c->out);
            c->out_len = SFV__EX_FRAME;
            live++;
        }
        for (i = 0; r == SFV_OK && i < live;) {
            sfv__ex_conn c;
            char why[64];
            sfv__ex_frame hello;
            size_t k;
            int st = sfv__ex_conn_step(x, &conns[i], why, sizeof why);
            if (st == 0 && sfv__now_ns() >= conns[i].deadline) {
                snprintf(why, sizeof why, "it did not prove it within %u ms", (unsigned)x->key.proof_ms);
                st = -1;
            }
            if (st == 0) {
                i++;
                continue;
            }
            c = conns[i];
            conns[i] = conns[--live];
            if (st < 0) {
                sfv__ex_drop(x, c.fd, c.addr, why);
                continue;
            }
            (void)sfv__ex_decode(c.in, SFV__EX_FRAME, &hello); /* proven: its rank is due */
            x->seen[hello.rank] = true;
            if (++x->heard == x->rank) { /* every lower rank is in: close before the last swap, so that */
                close(lfd);             /* rank's next exchange cannot land in this one's backlog (it retries) */
                lfd = -1;
                for (k = 0; k < live; k++) close(conns[k].fd);
                live = 0;
            }
            r = sfv__ex_same_job(x, &hello, hello.rank);
            if (r == SFV_OK) r = sfv__ex_data(x, c.fd, true, hello.rank, c.in, c.out);
            sfv__ex_end(x, c.fd, hello.rank, true, c.in, c.out, r);
            for (k = 0; k < live; k++) { /* the proof clock of those kept waiting starts again */
                const uint64_t again = sfv__deadline(x->key.proof_ms);
                if (conns[k].deadline < again) conns[k].deadline = again;
            }
        }
    }
    for (i = 0; i < live; i++) close(conns[i].fd);
    if (lfd >= 0) close(lfd);
    SFV_FREE(conns);
    return r;
}

/* The deadline met after the rank's address took the connection and hung up before its proof. */
static sfv_result sfv__ex_hung_up(const sfv__ex *x, size_t peer, unsigned hangups) {
    const sfv_net_node *pn = &x->nodes[peer];
    return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange", "rank %zu did not complete the exchange in time: its address %s:%u took the connection and hung up before proving the job key (%u tries)",
                     peer, pn->host, (unsigned)pn->port, hangups);
}

/* The connecting side, to a higher rank: proves the key to it after it proved it to us. A
   connection the listener closes before its proof (its table of unproven connections full, say)
   is tried again; a listener that proves no key is refused. */
static sfv_result sfv__ex_meet(sfv__ex *x, size_t peer) {
    const sfv_net_node *pn = &x->nodes[peer];
    const sfv__error_mark saved = sfv__error_mark_now(); /* a try that is tried again leaves no error behind */
    unsigned hangups = 0;                /* tries its address took, then hung up before its proof */
    for (;;) {
        static const uint8_t head[4] = {'S', 'X', SFV__EX_VERSION, SFV__EX_HELLO};
        uint8_t hello_c[SFV__EX_FRAME], in[2 * SFV__EX_FRAME], proof[SFV__EX_FRAME], want[32];
        sfv__ex_frame f, hello_l;
        const char *bad = NULL;
        size_t got, step;
        int fd = -1;
        sfv_result r = sfv__ex_connect(pn, x->key.loopback_only, x->deadline, &fd);
        if (r == SFV_ERR_TIMEOUT && hangups) return sfv__ex_hung_up(x, peer, hangups);
        if (r) return r;
        memset(&f, 0, sizeof f);
        f.type = SFV__EX_HELLO;
        f.rank = (uint32_t)x->rank;
        f.world = (uint32_t)x->n;
        f.size = (uint32_t)x->size;
        f.keeps = x->links != NULL;
        r = sfv__random(f.body, sizeof f.body);
        sfv__ex_encode(&f, hello_c);
        if (r == SFV_OK) r = sfv__fd_io(fd, hello_c, sizeof hello_c, true, x->deadline, peer);
        /* Its hello is judged before its proof is awaited, its first bytes one at a time: something
           else on the port (a server that sends a banner, or any frame, then waits for ours, or
           hangs up) is refused at once, not held to the deadline or retried as a rank's hang-up. */
        for (got = 0; r == SFV_OK && !bad && got < SFV__EX_FRAME; got += step) {
            step = got < sizeof head ? 1 : SFV__EX_FRAME - got;
            r = sfv__fd_io(fd, in + got, step, false, x->deadline, peer);
            if (r == SFV_OK && got < sizeof head && in[got] != head[got])
                bad = got < 2 ? "not an exchange frame" : got == 2 ? "another version of the exchange" : "a frame that is not a hello";
        }
        if (r == SFV_OK && !bad) bad = sfv__ex_decode(in, SFV__EX_FRAME, &hello_l);
        if (r == SFV_OK && !bad && memcmp(in, hello_c, SFV__EX_FRAME) == 0) bad = "our own hello back (an echo)"; /* (its fresh nonce: no rank's) */
        if (r == SFV_OK && !bad) r = sfv__fd_io(fd, in + SFV__EX_FRAME, SFV__EX_FRAME, false, x->deadline, peer);
        if (r != SFV_OK) {
            const int err = sfv__last.errnum;
            close(fd);
            if (r != SFV_ERR_TIMEOUT && err != ECONNRESET && err != EPIPE) return r;
            if (r != SFV_ERR_TIMEOUT) hangups++;
            /* (the deadline met inside a try after hang-ups: the hang-ups are what the rank did) */
            if (hangups && (r == SFV_ERR_TIMEOUT || sfv__now_ns() >= x->deadline)) return sfv__ex_hung_up(x, peer, hangups);
            if (r == SFV_ERR_TIMEOUT)
                return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "exchange", "rank %zu's address %s:%u took the connection but proved no job key before the deadline (rank %zu is not there yet, or something else holds the port)",
                                 peer, pn->host, (unsigned)pn->port, peer);
            sfv__error_back(&saved);
            (void)poll(NULL, 0, sfv__ms_left(x->deadline) < 20 ? sfv__ms_left(x->deadline) : 20);
            continue;
        }
        if (!bad) bad = sfv__ex_decode(in + SFV__EX_FRAME, SFV__EX_FRAME, &f);
        if (!bad && f.type != SFV__EX_PROOF) bad = "a frame that is not a proof";
        if (!bad) sfv__ex_mac(&x->key, 'L', hello_c, in, NULL, 0, want);
        if (!bad && !sfv__same_bytes(f.body, want, sizeof want)) bad = "a wrong proof (another job key?)";
        if (bad) {
            close(fd);
            return sfv__fail(SFV_ERR_PERMISSION, EACCES, "exchange", "the listener at %s:%u, rank %zu's address, did not prove the job key: it sent %s",
                             pn->host, (unsigned)pn->port, peer, bad);
        }
        /* Our proof goes first even to a proven listener of another rank or job: it can only be
           one of this job's ranks (it holds the key), and with the proof it learns the mismatch
           too, so both sides report it instead of one waiting for its deadline. */
        memset(&f, 0, sizeof f);
        f.type = SFV__EX_PROOF;
        sfv__ex_mac(&x->key, 'C', hello_c, in, NULL, 0, f.body);
        sfv__ex_encode(&f, proof);
        r = sfv__fd_io(fd, proof, sizeof proof, true, x->deadline, peer);
        if (r == SFV_OK && hello_l.rank != peer)
            r = sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "the listener at rank %zu's address says it is rank %u", peer, (unsigned)hello_l.rank);
        if (r == SFV_OK) r = sfv__ex_same_job(x, &hello_l, peer);
        if (r == SFV_OK) {
            x->seen[peer] = true;
            r = sfv__ex_data(x, fd, false, peer, hello_c, in);
        }
        sfv__ex_end(x, fd, peer, false, hello_c, in, r);
        return r;
    }
}

/* Without a key, every address this rank listens on (its own, unless it is rank 0) and connects
   to (every higher rank's) is checked before its first socket: a rank whose later peer is off
   loopback refuses at once, not after swapping bytes with the ranks before it (or waiting for
   them to its deadline). A numeric address is parsed at once; a name costs one lookup more. */
static sfv_result sfv__ex_loopback_only(const sfv_net_node *nodes, size_t n, size_t rank, uint64_t deadline) {
    size_t i;
    for (i = rank ? rank : 1; i < n; i++) {
        struct addrinfo *ai;
        const sfv_result r = sfv__resolve(&nodes[i], i == rank, true, deadline, &ai);
        if (r) return r;
        freeaddrinfo(ai);
    }
    return SFV_OK;
}

static sfv_result sfv__exchange(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all,
                                const sfv_exchange_desc *desc, int timeout_ms, sfv__ex_link *links, const sfv__ex_key *key) {
    const uint64_t deadline = sfv__deadline(sfv__ms_or(timeout_ms, 60000u));
    sfv_result r = sfv_net_config_check(nodes, n);
    sfv__ex x;
    size_t i;
    if (r) return r;
    SFV__CHECK_ARG(nodes, "nodes (NULL)"); /* (sfv_net_config_check refused it: said again for the compiler) */
    if (rank >= n) return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "rank %zu of %zu", rank, n);
    SFV__CHECK_ARG(mine || size == 0, "mine (NULL)");
    SFV__CHECK_ARG(all || size == 0, "all (NULL)");
    if (size > SFV__EX_MAX_SIZE) return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "%zu bytes (at most 64 MiB)", size);
    if (size && n > SIZE_MAX / size) return sfv__fail(SFV_ERR_INVALID, EINVAL, "exchange", "%zu ranks of %zu bytes do not fit in memory", n, size);
    memset(&x, 0, sizeof x);
    if (key) x.key = *key; /* (sfv_node_connect's: picked once for the exchange and its sync) */
    else if ((r = sfv__ex_key_pick(desc, &x.key)) != SFV_OK) return r;
    if (x.key.loopback_only && (r = sfv__ex_loopback_only(nodes, n, rank, deadline)) != SFV_OK) return r;
    x.nodes = nodes;
    x.n = n;
    x.rank = rank;
    x.size = size;
    x.mine = mine;
    x.all = (uint8_t *)all;
    x.deadline = deadline;
    x.links = links;
    x.seen = (bool *)SFV_CALLOC(n, sizeof *x.seen);
    if (!x.seen) return sfv__fail_verb("calloc", ENOMEM);
    if (size) {
        memmove(x.all + rank * size, mine, size); /* (mine may be that very block of all: in place) */
        /* sent from that copy, not from mine: a mine in another rank's block of all (all itself,
           at rank 1) takes that rank's bytes as they arrive, and went out after them as this rank's */
        x.mine = x.all + rank * size;
    }
    x.seen[rank] = true;
    if (rank > 0) r = sfv__ex_accept_lower(&x); /* the lower ranks come to us, in any order */
    for (i = rank + 1; r == SFV_OK && i < n; i++) r = sfv__ex_meet(&x, i); /* we go to the higher ones */
    SFV_FREE(x.seen);
    return r;
}

/* links: NULL, or n of them (fd -1), where every connection of the exchange is kept, with the
   key (>>node: its sync). */
static sfv_result sfv__exchange_all(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all,
                                    const sfv_exchange_desc *desc, int timeout_ms, sfv__ex_link *links, const sfv__ex_key *key) {
    sfv_result r;
    sfv__log_init();
    SFV__LOG(SFV_LOG_DEBUG, "exchange: rank %zu of %zu, %zu bytes each%s", rank, n, size, size ? "" : " (a barrier)");
    r = sfv__exchange(nodes, n, rank, mine, size, all, desc, timeout_ms, links, key);
    if (r && all && size && n <= SFV__MAX_PEERS && size <= SFV__EX_MAX_SIZE && n <= SIZE_MAX / size) memset(all, 0, n * size); /* no half-exchange left */
    if (r == SFV_OK) SFV__LOG(SFV_LOG_DEBUG, "exchange: rank %zu of %zu: done", rank, n);
    return r;
}
SAFEVERBS_API sfv_result sfv_exchange_all_keyed(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all,
                                                const sfv_exchange_desc *desc, int timeout_ms) {
    return sfv__exchange_all(nodes, n, rank, mine, size, all, desc, timeout_ms, NULL, NULL);
}

/* The sync of sfv_node_connect over the connections its exchange kept (one to every rank but
   `rank`): each side sends a tag frame bound to the connection's hellos ('s' from the listening
   side, 'S' from the connecting one), then reads and checks the peer's. All sends go first (a
   frame fits any socket buffer), so no two ranks wait for each other. Closes every link. */
static void sfv__ex_sync_tag(const sfv__ex_key *key, const sfv__ex_link *l, bool ours, uint8_t out[32]) {
    const bool from_listener = l->listening == ours;
    sfv__ex_mac(key, from_listener ? 's' : 'S', l->hello_c, l->hello_l, NULL, 0, out);
}
static sfv_result sfv__ex_sync(sfv__ex_link *links, size_t n, size_t rank, const sfv__ex_key *key, uint64_t deadline) {
    sfv_result r = SFV_OK;
    size_t i;
    for (i = 0; r == SFV_OK && i < n; i++) {
        uint8_t out[SFV__EX_FRAME];
        sfv__ex_frame f;
        if (i == rank) continue;
        if (links[i].fd < 0) { /* (an exchange that succeeded keeps one to every rank) */
            r = sfv__fail(SFV_ERR_DRIVER, EIO, "exchange", "no connection kept to rank %zu", i);
            break;
        }
        memset(&f, 0, sizeof f);
        f.type = SFV__EX_TAG;
        sfv__ex_sync_tag(key, &links[i], true, f.body);
        sfv__ex_encode(&f, out);
        r = sfv__fd_io(links[i].fd, out, sizeof out, true, deadline, i);
    }
    for (i = 0; r == SFV_OK && i < n; i++) {
        uint8_t in[SFV__EX_FRAME], want[32];
        sfv__ex_frame f;
        const char *bad;
        if (i == rank) continue;
        if ((r = sfv__fd_io(links[i].fd, in, sizeof in, false, deadline, i)) != SFV_OK) break;
        bad = sfv__ex_decode(in, sizeof in, &f);
        if (!bad && f.type != SFV__EX_TAG) bad = "a frame that is not a tag";
        sfv__ex_sync_tag(key, &links[i], false, want);
        if (!bad && !sfv__same_bytes(f.body, want, sizeof want)) bad = "a sync that does not match its connection";
        if (bad) r = sfv__fail(SFV_ERR_PERMISSION, EACCES, "exchange", "rank %zu sent %s", i, bad);
    }
    sfv__ex_links_close(links, n);
    if (r != SFV_OK) { /* said as the sync's, not the exchange's */
        const sfv_error why = sfv__last;
        r = sfv__fail(r, why.errnum, why.verb, "the sync: %s", why.message);
    }
    return r;
}

SAFEVERBS_API sfv_result sfv_exchange_all(const sfv_net_node *nodes, size_t n, size_t rank, const void *mine, size_t size, void *all, int timeout_ms) {
    return sfv_exchange_all_keyed(nodes, n, rank, mine, size, all, NULL, timeout_ms);
}

/* >>impl node -------------------------------------------------------------------------------- */
struct sfv_node {
    sfv_multi_channel *mc;
    size_t rank, world;
    sfv_barrier_kind kind;
    bool connected, poisoned;
    bool in_allgather;       /* sfv_node_connect_with is in the caller's allgather: no destroy (it reads the node after) */
    const char *poisoned_by; /* poisoned: what broke it, said by every refusal after (sfv__node_broken) */
    uint64_t *in;            /* in[r]: the epoch rank r last announced; its NIC writes it (little-endian) */
    uint64_t *out;           /* out[r]: the epoch last announced to r (little-endian), the write's source */
    uint64_t *expected;      /* expected[r]: the epoch awaited from r */
    sfv_remote_mr *peer_in;  /* rank r's in[] */
    sfv_mr *in_mr, *out_mr;
    void *keep;              /* what connected it, kept until destroyed (>>impl rdmacm), or NULL */
    void (*keep_free)(void *keep);
};

/* After a destroy that a verb refused part-way, the node has lost channels: it can only be
   destroyed again. */
static bool sfv__node_whole(const sfv_node *node) { return sfv_multi_channel_len(node->mc) == node->world; }
static sfv_result sfv__node_torn(void) {
    return sfv__fail(SFV_ERR_BROKEN, EIO, "node", "the node lost channels to a destroy that failed part-way: destroy it again");
}
/* Broken for good, by a handshake or connect that failed part-way or by a barrier left half done:
   every later refusal names the cause that broke it, not a barrier that never ran. */
static void sfv__node_poison(sfv_node *node, const char *why) {
    node->poisoned = true;
    node->poisoned_by = why;
}
static sfv_result sfv__node_broken(const sfv_node *node, const char *fn) {
    return sfv__fail(SFV_ERR_BROKEN, EIO, fn, "%s: destroy it", node->poisoned_by);
}

/* Epochs travel little-endian, whatever the host's byte order (the same conversion both ways). */
static uint64_t sfv__le64(uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static void sfv__node_free(sfv_node *node) {
    SFV_FREE(node->in);
    SFV_FREE(node->out);
    SFV_FREE(node->expected);
    SFV_FREE(node->peer_in);
    sfv__handle_free(node, SFV__H_NODE);
}

SAFEVERBS_API sfv_result sfv_create_node(sfv_pd *pd, const sfv_node_desc *desc, sfv_node **out) {
    sfv_node *node;
    sfv_result r;
    size_t w, rank;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    SFV__CHECK_ARG(desc, "desc");
    w = desc->world_size;
    rank = desc->rank;
    if (w == 0 && (r = sfv_launcher_rank(&rank, &w)) != SFV_OK)
        return r != SFV_ERR_NOT_FOUND ? r : sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_desc", "sfv_node_desc.world_size = 0 and no launcher's rank in the environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS)");
    if (w == 0 || w > SFV__MAX_PEERS) /* (the size may be the launcher's: say whose) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_desc", "%s = %zu is out of range (1 .. %d)",
                         desc->world_size ? "sfv_node_desc.world_size" : "the launcher's world size (sfv_launcher_rank)", w, SFV__MAX_PEERS);
    if (rank >= w)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_desc", "sfv_node_desc.rank = %zu is out of range (below world_size %zu)", rank, w);
    if (desc->channel.access && !(desc->channel.access & SFV_ACCESS_REMOTE_WRITE))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_desc", "sfv_node_desc.channel.access must let peers write (SFV_ACCESS_REMOTE_WRITE): the barrier writes into them");
    if ((unsigned)desc->barrier > (unsigned)SFV_BARRIER_DISSEMINATION)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_desc", "sfv_node_desc.barrier = %d is not a barrier kind", (int)desc->barrier);
    node = (sfv_node *)sfv__handle_new(sizeof *node, SFV__H_NODE);
    if (!node) return sfv__fail_verb("calloc", ENOMEM);
    node->rank = rank;
    node->world = w;
    node->kind = desc->barrier == SFV_BARRIER_DEFAULT ? SFV_BARRIER_BINARY_TREE : desc->barrier;
    node->in = (uint64_t *)SFV_CALLOC(w, sizeof *node->in);
    node->out = (uint64_t *)SFV_CALLOC(w, sizeof *node->out);
    node->expected = (uint64_t *)SFV_CALLOC(w, sizeof *node->expected);
    node->peer_in = (sfv_remote_mr *)SFV_CALLOC(w, sizeof *node->peer_in);
    if (!node->in || !node->out || !node->expected || !node->peer_in) {
        r = sfv__fail_verb("calloc", ENOMEM);
        goto free_node;
    }
    r = sfv_create_multi_channel(pd, w, &desc->channel, &node->mc);
    if (r) goto free_node;
    /* Peers write only in[]; out[] is read by our own NIC only. */
    r = sfv_reg_mr_access(pd, node->in, w * sizeof *node->in, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE, &node->in_mr);
    if (r) goto destroy_mc;
    r = sfv_reg_mr_local(pd, node->out, w * sizeof *node->out, &node->out_mr);
    if (r) goto dereg_in;
    sfv__mc_own(node->mc, true); /* sfv_destroy_multi_channel refuses it from here on: the node holds it */
    *out = node;
    return SFV_OK;
dereg_in: {
    sfv_result d;
    SFV__KEEPING_ERROR(d = sfv_dereg_mr(node->in_mr));
    if (d) { /* still registered, peers' writes allowed: left to the PD with its memory, as a refused channel is
                (dropped, the MR would hold the PD and device for good) */
        sfv__pd_orphan_mr(node->in_mr, node->in);
        node->in = NULL;
    }
}
destroy_mc:
    sfv__mc_discard(node->mc); /* (not the node's yet: sfv__mc_own comes last) */
free_node:
    sfv__node_free(node);
    return r;
}

SAFEVERBS_API sfv_result sfv_destroy_node(sfv_node *node) {
    sfv_result r;
    if (!node) return SFV_OK;
    SFV__LIVE_OR_REFUSE(node, SFV__H_NODE, "sfv_destroy_node");
    if (node->in_allgather) /* freed here, sfv_node_connect_with would go on with freed memory when fn returns */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_destroy_node", "sfv_node_connect_with's allgather is running: destroy the node after sfv_node_connect_with returns");
    if (node->mc) { /* first: after it, no NIC touches in[] or out[] */
        sfv__mc_own(node->mc, false);
        if ((r = sfv_destroy_multi_channel(node->mc)) != SFV_OK) {
            sfv__mc_own(node->mc, true); /* kept: still the node's */
            return r;
        }
        node->mc = NULL;
    }
    if (node->keep) node->keep_free(node->keep);
    node->keep = NULL;
    /* a refused deregistration keeps the node, and its memory, for another try */
    if (node->in_mr && (r = sfv_dereg_mr(node->in_mr)) != SFV_OK) return r;
    node->in_mr = NULL;
    if (node->out_mr && (r = sfv_dereg_mr(node->out_mr)) != SFV_OK) return r;
    node->out_mr = NULL;
    sfv__node_free(node);
    return SFV_OK;
}

/* A connect of the node from sfv_node_connect_with's allgather (fn): the outer call handshakes and
   syncs with what fn returns, and its guard keeps fn from destroying the node; an inner connect
   would leave it a node already connected, the outer call failing with a result about neither. */
SFV__SLOW sfv_result sfv__node_in_allgather(const char *fn) {
    return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "sfv_node_connect_with's allgather is running on this node: connect it once, from outside it");
}
#ifdef SAFEVERBS_RDMACM
/* For the node's connection through the connection manager (sfv_node_connect_cm, >>impl rdmacm):
   whether it may connect now, its barrier region, and the end of it: the node takes the peers'
   barrier regions and keeps `keep` (the connections) until it is destroyed. */
static sfv_result sfv__node_may_connect(const sfv_node *node, const char *fn) {
    if (node->in_allgather) return sfv__node_in_allgather(fn);
    if (node->poisoned) return sfv__node_broken(node, fn); /* (first: a timed-out barrier leaves it connected) */
    if (node->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: the node is already connected", fn);
    if (!sfv__node_whole(node)) return sfv__node_torn();
    return SFV_OK;
}
static sfv_remote_mr sfv__node_barrier(const sfv_node *node) { return sfv_mr_remote(node->in_mr); }
static void sfv__node_connected(sfv_node *node, const sfv_remote_mr *barriers, void *keep, void (*keep_free)(void *)) {
    memcpy(node->peer_in, barriers, node->world * sizeof *barriers);
    node->keep = keep;
    node->keep_free = keep_free;
    node->connected = true;
}
#endif

SAFEVERBS_API size_t sfv_node_rank(const sfv_node *node) { return node ? node->rank : 0; }
SAFEVERBS_API size_t sfv_node_world_size(const sfv_node *node) { return node ? node->world : 0; }
SAFEVERBS_API sfv_multi_channel *sfv_node_multi_channel(const sfv_node *node) { return node ? node->mc : NULL; }

/* A node endpoint: "SN", version 1, 0, rank, world size (32-bit big-endian), 3 zero bytes, the
   barrier kind; then for each rank d: the endpoint of our channel d and our barrier region (in[]). */
#define SFV__NODE_ENTRY (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE)

static sfv_result sfv__node_endpoint(const sfv_node *node, uint8_t *out, size_t size) {
    const sfv_remote_mr barrier = sfv_mr_remote(node->in_mr);
    size_t d;
    if (!sfv__node_whole(node)) return sfv__node_torn();
    if (size != SFV_NODE_ENDPOINT_SIZE(node->world))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_endpoint", "%zu bytes, not SFV_NODE_ENDPOINT_SIZE(%zu) = %zu",
                         size, node->world, (size_t)SFV_NODE_ENDPOINT_SIZE(node->world));
    memset(out, 0, 16);
    out[0] = 'S'; out[1] = 'N'; out[2] = 1;
    sfv__put_be(out + 4, node->rank, 4);
    sfv__put_be(out + 8, node->world, 4);
    out[15] = (uint8_t)node->kind; /* (never DEFAULT: sfv_create_node made it BINARY_TREE) */
    for (d = 0; d < node->world; d++) {
        uint8_t *e = out + 16 + d * SFV__NODE_ENTRY;
        sfv_endpoint ep;
        sfv_result r = sfv_channel_endpoint(sfv_multi_channel_peer(node->mc, d), &ep);
        if (r) return r;
        sfv_endpoint_encode(&ep, e);
        sfv_remote_mr_encode(barrier, e + SFV_ENDPOINT_ENCODED_SIZE);
    }
    return SFV_OK;
}
SAFEVERBS_API sfv_result sfv_node_endpoint(const sfv_node *node, uint8_t *out, size_t size) {
    sfv_result r;
    SFV__CHECK_ARG(out || size == 0, "out");
    r = !node ? sfv__fail(SFV_ERR_INVALID, EINVAL, __func__, "%s: invalid node", __func__)
        : !sfv__handle_live(node, SFV__H_NODE) ? sfv__handle_dead(__func__, SFV__H_NODE) : sfv__node_endpoint(node, out, size);
    /* Refused: the caller's size bytes zeroed, but only where a buffer of that size can exist (no
       object is larger than PTRDIFF_MAX bytes): a garbage size (SIZE_MAX, or
       SFV_NODE_ENDPOINT_SIZE(-1), which wraps to SIZE_MAX - 39) crashed the call that refuses it,
       as it did sfv_multi_channel_endpoints. */
    if (r && out && size <= (size_t)PTRDIFF_MAX) memset(out, 0, size);
    return r;
}

/* Rank r's entry for this node, from its blob at `b`. */
static sfv_result sfv__node_entry(const sfv_node *node, const uint8_t *b, size_t rank, sfv_endpoint *ep, sfv_remote_mr *barrier) {
    const uint8_t *e = b + 16 + node->rank * SFV__NODE_ENTRY;
    if (b[0] != 'S' || b[1] != 'N' || b[2] != 1 || b[3] != 0)
        return sfv__bad_encoding("node endpoint", "not a node endpoint (magic or version)");
    if (sfv__get_be(b + 12, 3) != 0) return sfv__bad_encoding("node endpoint", "reserved bytes are not 0");
    if (sfv__get_be(b + 4, 4) != rank || sfv__get_be(b + 8, 4) != node->world)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake", "the endpoint in place %zu says rank %llu of %llu (this world: %zu)",
                         rank, (unsigned long long)sfv__get_be(b + 4, 4), (unsigned long long)sfv__get_be(b + 8, 4), node->world);
    /* Ranks of different barrier kinds await different ranks: a rank could leave a barrier that
       another has not entered (3 ranks, one DISSEMINATION: its first write releases a
       BINARY_TREE child before the third rank came), so every rank must run the same one. */
    if (b[15] != (uint8_t)node->kind)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake",
                         "rank %zu's node runs barrier kind %u, this one %u (sfv_node_desc.barrier): every rank must pass the same", rank,
                         (unsigned)b[15], (unsigned)node->kind);
    if (sfv_endpoint_decode(e, SFV_ENDPOINT_ENCODED_SIZE, ep) || sfv_remote_mr_decode(e + SFV_ENDPOINT_ENCODED_SIZE, SFV_REMOTE_MR_ENCODED_SIZE, barrier))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake", "rank %zu's entry for rank %zu is malformed", rank, node->rank);
    if (barrier->length < node->world * sizeof *node->in)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake", "rank %zu's barrier region is too small", rank);
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_node_handshake(sfv_node *node, const uint8_t *all, size_t size) {
    size_t rank, each;
    int pass;
    SFV__CHECK_HANDLE(node, SFV__H_NODE, "node");
    SFV__CHECK_ARG(all, "endpoints (NULL)");
    if (node->in_allgather) return sfv__node_in_allgather("sfv_node_handshake");
    if (node->poisoned) return sfv__node_broken(node, "sfv_node_handshake"); /* (first: a failed sync leaves it connected) */
    if (node->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake", "the node is already connected");
    if (!sfv__node_whole(node)) return sfv__node_torn();
    each = SFV_NODE_ENDPOINT_SIZE(node->world);
    if (size != node->world * each)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_handshake", "%zu bytes, not %zu endpoints of %zu", size, node->world, each);
    for (pass = 0; pass < 2; pass++) /* check every entry before connecting any channel */
        for (rank = 0; rank < node->world; rank++) {
            sfv_channel *ch = sfv_multi_channel_peer(node->mc, rank);
            sfv_endpoint ep;
            sfv_remote_mr barrier;
            sfv_result r = sfv__node_entry(node, all + rank * each, rank, &ep, &barrier);
            if (r == SFV_OK) r = pass == 0 ? sfv__handshake_check(ch, &ep) : sfv_channel_handshake(ch, &ep);
            if (r && pass == 1 && (rank > 0 || sfv__channel_broken(ch))) { /* a verb refused part-way: no way back */
                const sfv_error why = sfv__last;
                sfv__node_poison(node, "the node is broken: a handshake failed part-way");
                return sfv__fail(SFV_ERR_BROKEN, why.errnum, why.verb, "rank %zu's channel failed to connect part-way, so the node is broken (destroy it): %s",
                                 rank, why.message);
            }
            if (r) return r;
            if (pass == 1) node->peer_in[rank] = barrier;
        }
    node->connected = true;
    return SFV_OK;
}

/* A failed sync after the handshake: the node is connected but its ranks are not synced, so it
   is broken for good; the failure keeps its result, its message says so. */
static sfv_result sfv__node_unsynced(sfv_node *node, sfv_result r) {
    const sfv_error why = sfv__last;
    sfv__node_poison(node, "the node is broken: the sync after its handshake failed, so the ranks are not synced");
    return sfv__fail(r, why.errnum, why.verb, "%s (after the handshake: the ranks are not synced, so the node is broken: destroy it)", why.message);
}
/* A caller's allgather that failed (r, with sfv__failures at `failures` before it ran): what it
   recorded if it recorded r, else r itself (one that is no sfv_result failure: SFV_ERR_DRIVER). */
static sfv_result sfv__allgather_failed(sfv_result r, unsigned long failures, const char *what) {
    if (failures != sfv__failures && sfv__last.result == r) return r;
    return sfv__fail(r < 0 && r >= SFV_ERR_ADDR_IN_USE ? r : SFV_ERR_DRIVER, EIO, "node", "the allgather of %s failed (it returned %d: %s)", what, (int)r,
                     sfv_result_str(r));
}
/* Up to this world size sfv_node_connect keeps its exchange's connections (world - 1 sockets a
   rank) for the sync; above it the sync is an exchange of its own, as sfv_exchange_all of 0 bytes.
   A constant, not the process's limit of open files: every rank must sync the same way. */
#define SFV__NODE_LINKS_MAX 256
SAFEVERBS_API sfv_result sfv_node_connect_keyed(sfv_node *node, const sfv_net_node *nodes, const sfv_exchange_desc *desc, int timeout_ms) {
    const uint64_t deadline = sfv__deadline(sfv__ms_or(timeout_ms, 60000u));
    size_t each, i;
    uint8_t *mine, *all;
    sfv__ex_link *links = NULL;
    sfv__ex_key key; /* one pick for the exchange and its sync */
    bool keep;       /* the exchange's connections kept for the sync */
    sfv_result r;
    SFV__CHECK_HANDLE(node, SFV__H_NODE, "node");
    SFV__CHECK_ARG(nodes, "nodes (NULL)");
    if (node->in_allgather) return sfv__node_in_allgather("sfv_node_connect");
    if (node->poisoned) return sfv__node_broken(node, "sfv_node_connect");
    if (node->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_connect", "the node is already connected");
    each = SFV_NODE_ENDPOINT_SIZE(node->world);
    mine = (uint8_t *)SFV_MALLOC(each);
    all = (uint8_t *)SFV_MALLOC(node->world * each);
    keep = node->world > 1 && node->world <= SFV__NODE_LINKS_MAX;
    if (keep) {
        links = (sfv__ex_link *)SFV_MALLOC(node->world * sizeof *links);
        for (i = 0; links && i < node->world; i++) links[i].fd = -1;
    }
    r = mine && all && (links || !keep) ? SFV_OK : sfv__fail_verb("malloc", ENOMEM);
    if (r == SFV_OK) r = sfv__ex_key_pick(desc, &key);
    if (r == SFV_OK) r = sfv_node_endpoint(node, mine, each);
    if (r == SFV_OK) r = sfv__exchange_all(nodes, node->world, node->rank, mine, each, all, desc, sfv__ms_until(deadline), links, &key);
    if (r == SFV_OK) r = sfv_node_handshake(node, all, node->world * each);
    if (r == SFV_OK) { /* the sync: over the exchange's connections where it kept them */
        r = links ? sfv__ex_sync(links, node->world, node->rank, &key, deadline)
                  : sfv__exchange_all(nodes, node->world, node->rank, NULL, 0, NULL, desc, sfv__ms_until(deadline), NULL, &key);
        if (r != SFV_OK) r = sfv__node_unsynced(node, r);
    } else if (links) {
        sfv__ex_links_close(links, node->world);
    }
    SFV_FREE(links);
    SFV_FREE(mine);
    SFV_FREE(all);
    if (r == SFV_OK) SFV__LOG(SFV_LOG_INFO, "node rank %u of %u: connected to every rank", (unsigned)node->rank, (unsigned)node->world);
    return r;
}

SAFEVERBS_API sfv_result sfv_node_connect(sfv_node *node, const sfv_net_node *nodes, int timeout_ms) {
    return sfv_node_connect_keyed(node, nodes, NULL, timeout_ms);
}

SAFEVERBS_API sfv_result sfv_node_connect_with(sfv_node *node, sfv_allgather_fn fn, void *user) {
    size_t each;
    uint8_t *mine, *all;
    sfv_result r;
    unsigned long failures;
    SFV__CHECK_HANDLE(node, SFV__H_NODE, "node");
    SFV__CHECK_ARG(fn, "allgather function (NULL)");
    /* From the allgather of another sfv_node_connect_with on this node: it would clear the flag
       that keeps fn from destroying the node when it returns, while the outer call still holds it. */
    if (node->in_allgather) return sfv__node_in_allgather("sfv_node_connect");
    if (node->poisoned) return sfv__node_broken(node, "sfv_node_connect");
    if (node->connected) return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_connect", "the node is already connected");
    if (fn == sfv_exchange_allgather && user) { /* the library's own allgather: its world must be the node's (it writes n blobs into all) */
        const sfv_exchange_allgather_ctx *x = (const sfv_exchange_allgather_ctx *)user;
        if (x->n != node->world || x->rank != node->rank)
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_node_connect", "the sfv_exchange_allgather_ctx says rank %zu of %zu, the node rank %zu of %zu",
                             x->rank, x->n, node->rank, node->world);
    }
    each = SFV_NODE_ENDPOINT_SIZE(node->world);
    mine = (uint8_t *)SFV_MALLOC(each);
    all = (uint8_t *)SFV_CALLOC(node->world, each);
    r = mine && all ? SFV_OK : sfv__fail_verb("malloc", ENOMEM);
    if (r == SFV_OK) r = sfv_node_endpoint(node, mine, each);
    if (r == SFV_OK) {
        failures = sfv__failures;
        node->in_allgather = true;
        r = fn(user, mine, all, each);
        node->in_allgather = false;
        r = r == SFV_OK ? sfv_node_handshake(node, all, node->world * each) : sfv__allgather_failed(r, failures, "the endpoints");
    }
    if (r == SFV_OK) {
        failures = sfv__failures;
        node->in_allgather = true;
        r = fn(user, NULL, NULL, 0);
        node->in_allgather = false;
        if (r != SFV_OK) r = sfv__node_unsynced(node, sfv__allgather_failed(r, failures, "the sync after the handshake"));
    }
    SFV_FREE(mine);
    SFV_FREE(all);
    if (r == SFV_OK) SFV__LOG(SFV_LOG_INFO, "node rank %u of %u: connected to every rank (through the caller's allgather)", (unsigned)node->rank, (unsigned)node->world);
    return r;
}

SAFEVERBS_API sfv_result sfv_exchange_allgather(void *user, const void *mine, void *all, size_t size) {
    const sfv_exchange_allgather_ctx *x = (const sfv_exchange_allgather_ctx *)user;
    SFV__CHECK_ARG(x, "user (NULL: no sfv_exchange_allgather_ctx)");
    return sfv_exchange_all_keyed(x->nodes, x->n, x->rank, mine, size, all, x->desc, x->timeout_ms);
}

/* A decimal size_t from the environment: 1 found, 0 not set, -1 set but not a number. */
static int sfv__env_size(const char *name, size_t *out) {
    const char *v = getenv(name);
    char *end;
    unsigned long long x;
    if (!v) return 0;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno || x > SIZE_MAX) return -1; /* (strtoull takes " -1" and "+1": digits only) */
    *out = (size_t)x;
    return 1;
}

SAFEVERBS_API sfv_result sfv_launcher_rank(size_t *rank, size_t *world_size) {
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
    size_t i, r = 0, n = 0;
    if (world_size) *world_size = 0; /* (first: "outputs 0 on failure" holds for a NULL rank too) */
    SFV__CHECK_ARG(rank, "rank");
    *rank = 0;
    SFV__CHECK_ARG(world_size, "world_size");
    for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const int a = sfv__env_size(vars[i][0], &r), b = sfv__env_size(vars[i][1], &n);
        if (a == 0 && b == 0) continue;
        if (a != 1 || b != 1 || n == 0 || r >= n)
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "sfv_launcher_rank", "%s=%s and %s=%s are not a rank below a world size",
                             vars[i][0], getenv(vars[i][0]) ? getenv(vars[i][0]) : "(unset)", vars[i][1],
                             getenv(vars[i][1]) ? getenv(vars[i][1]) : "(unset)");
        *rank = r;
        *world_size = n;
        return SFV_OK;
    }
    return sfv__fail(SFV_ERR_NOT_FOUND, ENOENT, "sfv_launcher_rank",
                     "no launcher's rank in the environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS)");
}

/* Tells rank `to` that we reached the next epoch: one RDMA write of out[to] into its in[rank]. */
static sfv_result sfv__notify(sfv_node *node, size_t to) {
    sfv_gather_element g;
    node->out[to] = sfv__le64(sfv__le64(node->out[to]) + 1);
    g = sfv_mr_gather_element(node->out_mr, &node->out[to], sizeof node->out[to]);
    /* in bounds: the handshake checked the region's length */
    return sfv_channel_write(sfv_multi_channel_peer(node->mc, to), &g, 1, sfv_remote_mr_slice_unchecked(node->peer_in[to], node->rank * sizeof *node->in, sizeof *node->in), NULL);
}

/* Waits until rank `from` announced the next epoch (or the one after: it may be a barrier
   ahead, never two, since it cannot leave the next barrier before this rank enters it). An
   aligned 8-byte write lands whole, and epochs only grow. Any other epoch is not one a rank of
   this node writes (a peer that is not a safeverbs node, or a group the ranks do not agree on):
   it breaks the barrier rather than let it pass early. The wait yields the CPU now and then: a
   barrier often has more ranks than cores. */
static sfv_result sfv__await(sfv_node *node, size_t from, uint64_t deadline) {
    const uint64_t want = ++node->expected[from];
    const sfv_channel *const ch = sfv_multi_channel_peer(node->mc, from);
    unsigned spins = 0;
    uint64_t got, look_at = 0;
    while ((got = sfv__le64(__atomic_load_n(&node->in[from], __ATOMIC_ACQUIRE))) < want) {
        if ((++spins & 255) == 0) {
            const uint64_t now = sfv__now_ns();
            if (now >= deadline)
                return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "barrier", "rank %zu did not reach the barrier in time", from);
            /* a node connected through the CM: rank from's disconnect ends the wait at once, as it
               ends its channel's (>>impl rdmacm), read as often as a busy wait reads it; and the
               device's events, as a busy wait reads them (after every SFV__EVENTS_EVERY_NS of
               waiting): a port gone down, the queue pair or the device failed, which no write of
               rank from passes. Its write, if it sent one, came before: the memory is looked at
               once more. */
            if (now >= look_at) {
                const bool events = look_at != 0; /* (not at the first look: a barrier that waits briefly reads nothing) */
                look_at = now + SFV__EVENTS_EVERY_NS;
                if (ch->watch) ch->watch->check(ch->watch);
                if (events) sfv__events_read(ch->pd->ctx);
                if ((sfv__channel_broken(ch) || sfv__async_cause(ch)) && sfv__le64(__atomic_load_n(&node->in[from], __ATOMIC_ACQUIRE)) < want) {
                    sfv_error why;
                    sfv__ignore(sfv__refuse_broken(ch, "barrier"));
                    why = sfv__last;
                    return sfv__fail(SFV_ERR_BROKEN, why.errnum, "barrier", "the channel to rank %zu broke while this rank awaited it: %s", from,
                                     why.message);
                }
            }
            sched_yield();
        }
    }
    if (SFV__UNLIKELY(got - want > 1))
        return sfv__fail(SFV_ERR_BROKEN, EPROTO, "barrier", "rank %zu announced barrier %llu while this rank awaits its barrier %llu "
                             "(no rank of this node runs two barriers ahead: a peer that is not one, or ranks passing different groups)",
                             from, (unsigned long long)got, (unsigned long long)want);
    return SFV_OK;
}

/* Member k of the group: peers[k], or rank k when the group is everyone. */
static size_t sfv__member(const size_t *peers, size_t k) { return peers ? peers[k] : k; }

static sfv_result sfv__barrier_run(sfv_node *node, const size_t *peers, size_t m, size_t me, uint64_t deadline) {
    sfv_result r = SFV_OK;
    size_t k, d;
    switch (node->kind) {
    case SFV_BARRIER_CENTRALIZED:
        if (me == 0) {
            for (k = 1; !r && k < m; k++) r = sfv__await(node, sfv__member(peers, k), deadline);
            for (k = 1; !r && k < m; k++) r = sfv__notify(node, sfv__member(peers, k));
        } else {
            r = sfv__notify(node, sfv__member(peers, 0));
            if (!r) r = sfv__await(node, sfv__member(peers, 0), deadline);
        }
        break;
    case SFV_BARRIER_DISSEMINATION:
        for (d = 1; !r && d < m; d <<= 1) {
            r = sfv__notify(node, sfv__member(peers, (me + d) % m));
            if (!r) r = sfv__await(node, sfv__member(peers, (me + m - d) % m), deadline);
        }
        break;
    default: /* binary tree over the group's positions: children 2i+1 and 2i+2 */
        for (k = 2 * me + 1; !r && k <= 2 * me + 2 && k < m; k++) r = sfv__await(node, sfv__member(peers, k), deadline);
        if (!r && me > 0) {
            r = sfv__notify(node, sfv__member(peers, (me - 1) / 2));
            if (!r) r = sfv__await(node, sfv__member(peers, (me - 1) / 2), deadline);
        }
        for (k = 2 * me + 1; !r && k <= 2 * me + 2 && k < m; k++) r = sfv__notify(node, sfv__member(peers, k));
        break;
    }
    if (r) sfv__node_poison(node, "the barrier is poisoned: an earlier barrier timed out or failed");
    return r;
}

/* Range checks guard memory, so they hold in the unchecked barrier too; order and duplicates
   only decide whether the group agrees (a wrong group times out), so those are skippable. */
static sfv_result sfv__barrier(sfv_node *node, const size_t *peers, size_t n, int timeout_ms, bool check) {
    size_t k, m, me = (size_t)-1;
    uint32_t ms;
    SFV__CHECK_HANDLE(node, SFV__H_NODE, "node");
    if (node->poisoned) return sfv__node_broken(node, "barrier");
    if (!sfv__node_whole(node)) return sfv__node_torn();
    if (!node->connected)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "the node is not connected (call sfv_node_handshake)");
    m = peers ? n : node->world;
    if (m == 0) return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "an empty group");
    for (k = 0; k < m; k++) {
        const size_t member = sfv__member(peers, k);
        if (member >= node->world)
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "rank %zu is not in the world of %zu", member, node->world);
        if (check && peers && k > 0 && member == peers[k - 1])
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "rank %zu appears twice in the group", member);
        if (check && peers && k > 0 && member < peers[k - 1])
            return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "the group is not sorted (rank %zu after rank %zu)", member, peers[k - 1]);
        if (member == node->rank && me == (size_t)-1) me = k;
    }
    if (me == (size_t)-1)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, "barrier", "this rank (%zu) is not in the group", node->rank);
    /* Every algorithm writes at most once to each member: with room for one write on each
       channel, nothing can be refused once the barrier has begun (and left it half done). */
    for (k = 0; k < m; k++) {
        const sfv_channel *ch = sfv_multi_channel_peer(node->mc, sfv__member(peers, k));
        int room;
        if (sfv__member(peers, k) == node->rank) continue;
        /* a node connected through the CM: a disconnect its CM has already delivered breaks the
           channel now (>>impl rdmacm), so it is refused here, not awaited to the deadline */
        if (ch->watch) ch->watch->check(ch->watch);
        room = sfv__channel_send_room(ch, 1);
        if (room < 0 && sfv__channel_settling(ch)) return sfv__settling_refused("barrier"); /* shut, not broken */
        if (room < 0) { /* broken (SFV_ERR_BROKEN, and why), or not connected (a reset: SFV_ERR_INVALID, the barrier usable) */
            const sfv_result why = sfv__channel_unsendable(ch, "barrier");
            const sfv_error e = sfv__last;
            return sfv__fail(why, e.errnum, e.verb, "the channel to rank %zu: %s", sfv__member(peers, k), e.message);
        }
        if (room == 0)
            return sfv__fail(SFV_ERR_RESOURCE, ENOMEM, "barrier", "the channel to rank %zu has no room for a write (its send queue is full)",
                             sfv__member(peers, k));
    }
    ms = sfv__ms_or(timeout_ms, sfv_channel_get_desc(sfv_multi_channel_peer(node->mc, node->rank))->timeout_ms);
    return sfv__barrier_run(node, peers, m, me, sfv__deadline(ms));
}

SAFEVERBS_API sfv_result sfv_node_barrier(sfv_node *node, const size_t *peers, size_t n, int timeout_ms) {
    return sfv__barrier(node, peers, n, timeout_ms, true);
}
SAFEVERBS_API sfv_result sfv_node_barrier_unchecked(sfv_node *node, const size_t *peers, size_t n, int timeout_ms) {
    return sfv__barrier(node, peers, n, timeout_ms, false);
}

#ifdef SAFEVERBS_RDMACM
/* >>impl rdmacm ------------------------------------------------------------------------------ */
/* Built on the channel's public calls plus sfv__channel_ready_from and sfv__channel_peer_gone
   (>>impl channel internals). The QP is the channel's own (user-managed for the CM: its number
   goes in rdma_conn_param), moved to RTR and RTS with what rdma_init_qp_attr gives. Each
   connection has its own event channel (an accepted id is migrated to one), non-blocking and
   polled against the step's deadline. */
#include <rdma/rdma_cma.h>

enum { SFV__CM_HDR = 4 };
struct sfv_cm_listener {
    struct rdma_event_channel *ec;
    struct rdma_cm_id *id;
    uint16_t port;
    size_t taken;                    /* requests taken and not answered: their ids live on ec (atomic) */
    bool removed;                    /* the CM said DEVICE_REMOVAL of its own id: it listens no more */
};
struct sfv_cm_request {
    struct rdma_cm_id *id;
    sfv_cm_listener *l;              /* the listener it came from (its ec holds the id until migrated or destroyed) */
    struct rdma_conn_param param;    /* what the peer asked for (read depths) */
    uint8_t rd_atomic;               /* the peer's read depth from our header, 0: none */
    size_t len;
    uint8_t priv[256];
};
struct sfv_cm_conn {
    struct rdma_event_channel *ec;
    struct rdma_cm_id *id;
    sfv_channel *ch;                 /* NULL once a channel of the caller's was destroyed */
    bool owns_ch;                    /* sfv_cm_connect / sfv_cm_accept made it: it goes with the connection */
    bool disconnected;               /* the CM said the connection is gone */
    bool removed;                    /* ... by DEVICE_REMOVAL: its device went */
    bool reset;                      /* the channel it owns was reset: its disconnect breaks it no more */
    uint32_t peer_qpn;               /* the peer's QP number, as its CM message said */
    sfv__watch watch;                /* the channel's waits read the CM's events through it */
    size_t len;
    uint8_t priv[256];               /* the peer's own bytes */
};
static SFV__THREAD_LOCAL uint8_t sfv__reject_buf[256];
static SFV__THREAD_LOCAL size_t sfv__reject_len;

static int sfv__cm_timeout(int timeout_ms, const sfv_channel_desc *desc) {
    if (timeout_ms > 0) return timeout_ms;
    return desc && desc->timeout_ms ? (int)desc->timeout_ms : 10000;
}

/* A numeric address and port; scope ids ("%eth0") for IPv6 link-local. */
static sfv_result sfv__cm_addr(const char *fn, const char *addr, uint16_t port, struct sockaddr_storage *ss) {
    struct addrinfo hints, *ai = NULL;
    char svc[8];
    int rc;
    memset(ss, 0, sizeof *ss);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    snprintf(svc, sizeof svc, "%u", (unsigned)port);
    rc = getaddrinfo(addr, svc, &hints, &ai);
    if (rc || !ai) return sfv__fail(SFV_ERR_NOT_FOUND, EINVAL, fn, "%s: \"%s\" is not a numeric IPv4 or IPv6 address (%s)", fn,
                                    addr ? addr : "(null)", gai_strerror(rc));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return SFV_OK;
}

/* Whether ss is a wildcard address (0.0.0.0, ::): bound, it listens on every device, and has none. */
static bool sfv__cm_any(const struct sockaddr_storage *ss) {
    static const struct in6_addr any6 = IN6ADDR_ANY_INIT;
    if (ss->ss_family == AF_INET) return ((const struct sockaddr_in *)(const void *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return ss->ss_family == AF_INET6 && memcmp(&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr, &any6, sizeof any6) == 0;
}

/* sfv__ms_until, at least 1 ms (the clock read once): for a call where 0 means a default of its own. */
static int sfv__ms_until_some(uint64_t deadline) {
    const int ms = sfv__ms_until(deadline);
    return ms ? ms : 1;
}

/* A failed rdma_* call, with the classes people act on. */
static sfv_result sfv__cm_fail(const char *verb, int e, const char *what) {
    if (e == 0) e = EIO; /* a call that failed without saying why: still a failure */
    if (e == EADDRINUSE) return sfv__fail(SFV_ERR_ADDR_IN_USE, e, verb, "%s: address in use (%s)", verb, what);
    if (e == EADDRNOTAVAIL || e == ENODEV)
        return sfv__fail(SFV_ERR_NOT_FOUND, e, verb, "%s: no RDMA device has the address %s", verb, what);
    if (e == ENETUNREACH || e == EHOSTUNREACH)
        return sfv__fail(SFV_ERR_UNREACHABLE, e, verb, "%s: %s is unreachable (%s)", verb, what, strerror(e));
    if (e == ETIMEDOUT) return sfv__fail(SFV_ERR_TIMEOUT, e, verb, "%s: %s did not answer in time", verb, what);
    return sfv__fail(sfv_result_from_errno(e), e, verb, "%s failed: %s (%s)", verb, strerror(e), what);
}

/* Whether the kernel has a route to dst (from src): the CM's address resolution retries a missing
   route until its timeout, where a UDP socket's connect says so at once. */
static sfv_result sfv__cm_route(const struct sockaddr_storage *src, const struct sockaddr_storage *dst, const char *where) {
    const socklen_t n = dst->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int e = 0, fd = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return SFV_OK; /* no socket to ask: the CM answers, later */
    if (src && src->ss_family == dst->ss_family) {
        struct sockaddr_storage s = *src;
        if (s.ss_family == AF_INET) ((struct sockaddr_in *)&s)->sin_port = 0; else ((struct sockaddr_in6 *)&s)->sin6_port = 0;
        if (bind(fd, (const struct sockaddr *)&s, n) < 0) e = errno;
    }
    if (!e && connect(fd, (const struct sockaddr *)dst, n) < 0) e = errno;
    close(fd);
    if (e == ENETUNREACH || e == EHOSTUNREACH) return sfv__cm_fail("connect", e, where);
    if (e == EADDRNOTAVAIL) return sfv__cm_fail("bind", e, "of the source");
    return SFV_OK;
}

static struct rdma_event_channel *sfv__cm_channel(void) {
    struct rdma_event_channel *ec;
    errno = 0;
    ec = rdma_create_event_channel();
    if (!ec) {
        const int e = errno ? errno : ENOMEM;
        if (e == ENODEV || e == ENOENT) /* (no rdma_cm device node: no RDMA device, or rdma_ucm not loaded) */
            sfv__fail(SFV_ERR_NOT_FOUND, e, "rdma_create_event_channel", "rdma_create_event_channel: no RDMA-CM device (%s): is an RDMA device there, and the rdma_ucm module loaded?", strerror(e));
        else
            sfv__cm_fail("rdma_create_event_channel", e, "the CM's event channel");
        return NULL;
    }
    if (!sfv__fd_flags(ec->fd, true)) {
        const int e = errno;
        rdma_destroy_event_channel(ec);
        sfv__fail_verb("fcntl", e);
        return NULL;
    }
    return ec;
}

/* The next event of ec before the deadline: SFV_OK with *ev (ack it), or SFV_ERR_TIMEOUT. */
static sfv_result sfv__cm_next(struct rdma_event_channel *ec, uint64_t deadline, const char *step, struct rdma_cm_event **ev) {
    *ev = NULL;
    for (;;) {
        struct pollfd p;
        int n;
        if (rdma_get_cm_event(ec, ev) == 0) return SFV_OK;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return sfv__fail_verb("rdma_get_cm_event", errno);
        p.fd = ec->fd;
        p.events = POLLIN;
        p.revents = 0;
        if (sfv__ms_left(deadline) == 0) break;
        n = poll(&p, 1, sfv__ms_left(deadline));
        if (n < 0 && errno != EINTR) return sfv__fail_verb("poll", errno);
    }
    return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "wait", "%s did not finish before the deadline", step);
}

/* The CM's DEVICE_REMOVAL ended a step: this side's device went away (no peer's doing). */
static sfv_result sfv__cm_removed(const char *step, const char *where) {
    return sfv__fail(SFV_ERR_BROKEN, ENODEV, "rdma_cm", "%s: the device was removed (DEVICE_REMOVAL) while connecting to %s; close the device",
                     step, where);
}

/* Waits for `want` on ec; any other event ends the step with the error it stands for. A
   rejection's reason bytes are kept for sfv_cm_reject_reason. On success *ev is acked by the caller. */
static sfv_result sfv__cm_expect(struct rdma_event_channel *ec, enum rdma_cm_event_type want, uint64_t deadline, const char *step,
                                 const char *where, struct rdma_cm_event **out) {
    struct rdma_cm_event *ev;
    sfv_result r;
    *out = NULL;
    r = sfv__cm_next(ec, deadline, step, &ev);
    if (r) return r;
    if (ev->event == want) { *out = ev; return SFV_OK; }
    switch (ev->event) {
    case RDMA_CM_EVENT_REJECTED:
        /* IB CM reason 8 (invalid service ID): no listener on that port; 28: the consumer rejected */
        if (ev->status == 8) {
            r = sfv__fail(SFV_ERR_REFUSED, ECONNREFUSED, "rdma_connect", "%s: connection refused: nothing listens at %s", step, where);
        } else {
            const size_t n = ev->param.conn.private_data && ev->param.conn.private_data_len ? ev->param.conn.private_data_len : 0;
            sfv__reject_len = n > sizeof sfv__reject_buf ? sizeof sfv__reject_buf : n;
            if (sfv__reject_len) memcpy(sfv__reject_buf, ev->param.conn.private_data, sfv__reject_len);
            r = sfv__fail(SFV_ERR_REJECTED, ECONNREFUSED, "rdma_connect", "%s: the peer at %s rejected the connection (reason %d, %zu reason bytes: sfv_cm_reject_reason)",
                          step, where, ev->status, sfv__reject_len);
        }
        break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR: {
        const int e = ev->status < 0 && ev->status > -4096 ? -ev->status : EHOSTUNREACH; /* an errno (the kernel's are below 4096); -INT_MIN would overflow */
        r = sfv__cm_fail(ev->event == RDMA_CM_EVENT_ADDR_ERROR ? "rdma_resolve_addr" : "rdma_resolve_route", e, where);
        if (r != SFV_ERR_TIMEOUT && r != SFV_ERR_NOT_FOUND && r != SFV_ERR_UNREACHABLE)
            r = sfv__fail(SFV_ERR_UNREACHABLE, e, sfv__last.verb, "%s: %s is unreachable (%s)", step, where, strerror(e));
        break;
    }
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
        r = sfv__fail(SFV_ERR_UNREACHABLE, EHOSTUNREACH, "rdma_connect", "%s: the peer's CM at %s did not answer (%s, status %d)", step, where,
                      rdma_event_str(ev->event), ev->status);
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        r = sfv__fail(SFV_ERR_BROKEN, ECONNRESET, "rdma_cm", "%s: the connection to %s ended (%s)", step, where, rdma_event_str(ev->event));
        break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: /* this side's device, not the peer: as sfv_cm_events says it */
        r = sfv__cm_removed(step, where);
        break;
    default:
        r = sfv__fail(SFV_ERR_DRIVER, EPROTO, "rdma_cm", "%s: unexpected event %s (status %d) from %s", step, rdma_event_str(ev->event),
                      ev->status, where);
    }
    rdma_ack_cm_event(ev);
    return r;
}

/* The PD must be on the device the CM chose for the address. */
static sfv_result sfv__cm_same_device(sfv_pd *pd, struct rdma_cm_id *id, const char *fn, const char *where) {
    const char *mine = sfv_context_name(sfv_pd_context(pd));
    if (!id->verbs) return sfv__fail(SFV_ERR_NOT_FOUND, ENODEV, fn, "%s: no RDMA device has the address %s", fn, where);
    if (!mine || strcmp(mine, ibv_get_device_name(id->verbs->device)) != 0)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: the PD is on %s, but %s belongs to %s: allocate the PD on that device", fn,
                         mine ? mine : "?", where, ibv_get_device_name(id->verbs->device));
    return SFV_OK;
}

/* Header plus the caller's bytes. */
static sfv_result sfv__cm_private(const char *fn, const void *priv, size_t len, size_t max, uint8_t rd, uint8_t *buf) {
    if (len > max) return sfv__fail(SFV_ERR_INVALID, EMSGSIZE, fn, "%s: %zu bytes of private data, at most %zu fit", fn, len, max);
    if (len && !priv) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: priv is NULL with len %zu", fn, len);
    buf[0] = 'S'; buf[1] = 'C'; buf[2] = 1; buf[3] = rd;
    if (len) memcpy(buf + SFV__CM_HDR, priv, len);
    return SFV_OK;
}
/* The peer's private data: its read depth (0: no header) and its own bytes. */
static void sfv__cm_take_private(const void *data, size_t n, uint8_t *rd, uint8_t *buf, size_t cap, size_t *len) {
    const uint8_t *p = (const uint8_t *)data;
    *rd = 0;
    *len = 0;
    if (!p) return;
    if (n >= SFV__CM_HDR && p[0] == 'S' && p[1] == 'C' && p[2] == 1) { *rd = p[3]; p += SFV__CM_HDR; n -= SFV__CM_HDR; }
    /* the CM pads private data to the message's size with zeroes: they are the caller's to judge */
    if (n > cap) n = cap;
    memcpy(buf, p, n);
    *len = n;
}

static void sfv__cm_conn_free(sfv_cm_conn *c) {
    if (c->ch) {
        if (sfv__channel_watched_by(c->ch, &c->watch)) sfv__channel_watch(c->ch, NULL);
        /* (only a failed connect or accept frees a channel here: its failure stays the last error; a
           destroy refused leaves the channel to its PD, whose sfv_dealloc_pd tries again) */
        if (c->owns_ch) {
            sfv_result r;
            SFV__KEEPING_ERROR(r = sfv_destroy_channel(c->ch));
            if (r) sfv__pd_orphan(c->ch);
        }
    }
    if (c->id) rdma_destroy_id(c->id);
    if (c->ec) rdma_destroy_event_channel(c->ec);
    sfv__handle_free(c, SFV__H_CM_CONN);
}

/* Handles what arrived on c's CM fd, without waiting. True: the peer disconnected (now or
   before), and the channel is broken, its work flushed. Also what the channel's waits call
   (sfv__watch), so a disconnect ends them at once. */
static bool sfv__cm_poll(sfv_cm_conn *c, int *err) {
    struct rdma_cm_event *ev;
    const int saved = errno; /* a wait may call this between its own calls */
    while (rdma_get_cm_event(c->ec, &ev) == 0) { /* every event read and acked: the fd never stays readable */
        if (!c->disconnected && (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
                                 ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT)) {
            c->disconnected = true;
            c->removed = ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;
            (void)rdma_disconnect(c->id); /* answer the peer's DREQ */
            /* only while the channel is this connection's (after a reset it may have a new peer) */
            if (c->ch && !c->reset && sfv__channel_watched_by(c->ch, &c->watch))
                sfv__channel_peer_gone(c->ch, c->removed ? SFV__CAUSE_DEVICE_GONE : SFV__CAUSE_PEER_GONE);
        }
        rdma_ack_cm_event(ev);
    }
    if (err) *err = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : errno ? errno : EIO;
    errno = saved;
    return c->disconnected;
}
#define SFV__CM_OF(w) ((sfv_cm_conn *)(void *)((char *)(w) - offsetof(sfv_cm_conn, watch)))
static void sfv__cm_watch_check(sfv__watch *w) { (void)sfv__cm_poll(SFV__CM_OF(w), NULL); }
static void sfv__cm_watch_detach(sfv__watch *w, bool destroyed) {
    sfv_cm_conn *c = SFV__CM_OF(w);
    if (!destroyed && c->owns_ch) {
        /* a channel it owns, only reset, still goes with it: it stays watched, so that a destroy
           by the caller still tells c (which would else free it again), but the old connection
           no longer wakes its waits nor breaks it */
        c->reset = true;
        w->fd = -1;
        return;
    }
    if (c->ch && sfv__channel_watched_by(c->ch, w)) sfv__channel_watch(c->ch, NULL);
    c->ch = NULL;
}
/* From now on the channel's waits read c's events too. */
static void sfv__cm_watch(sfv_cm_conn *c) {
    c->watch.fd = c->ec->fd;
    c->watch.check = sfv__cm_watch_check;
    c->watch.detach = sfv__cm_watch_detach;
    sfv__channel_watch(c->ch, &c->watch);
}

/* RTR and RTS from the CM, with the read depths both sides agreed on. */
static sfv_result sfv__cm_ready(sfv_cm_conn *c, uint8_t peer_rd) {
    struct ibv_qp_attr rtr, rts;
    int rtr_mask = 0, rts_mask = 0;
    const sfv_channel_desc *d = sfv_channel_get_desc(c->ch);
    memset(&rtr, 0, sizeof rtr);
    memset(&rts, 0, sizeof rts);
    rtr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(c->id, &rtr, &rtr_mask)) return sfv__fail_verb("rdma_init_qp_attr", errno);
    rts.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(c->id, &rts, &rts_mask)) return sfv__fail_verb("rdma_init_qp_attr", errno);
    rtr.max_dest_rd_atomic = (uint8_t)d->max_rd_atomic;
    rtr.min_rnr_timer = d->min_rnr_timer;
    rtr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    rts.max_rd_atomic = (uint8_t)(peer_rd && peer_rd < d->max_rd_atomic ? peer_rd : d->max_rd_atomic);
    rts.timeout = d->ack_timeout;
    rts.retry_cnt = d->ack_retries;
    rts.rnr_retry = d->rnr_retries;
    rts_mask |= IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    return sfv__channel_ready_from(c->ch, &rtr, rtr_mask, &rts, rts_mask);
}

/* A channel's port against the one the CM chose for the connection (where: whose address). */
static sfv_result sfv__cm_port_fits(unsigned port, const struct rdma_cm_id *id, const char *fn, const char *where) {
    if (port != id->port_num)
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: the channel is on port %u, but %s is on port %u: make the channel with desc.port %u", fn,
                         port, where, (unsigned)id->port_num, (unsigned)id->port_num);
    return SFV_OK;
}
/* The connection's own channel, on the port the CM chose: desc.port 0 takes it, another is refused
   (the QP would come up with the CM's path on a port it is not on). */
static sfv_result sfv__cm_make_channel(sfv_cm_conn *c, sfv_pd *pd, const sfv_channel_desc *desc, const char *fn, const char *where) {
    sfv_channel_desc d;
    if (desc) d = *desc; else memset(&d, 0, sizeof d);
    if (d.port) {
        const sfv_result r = sfv__cm_port_fits(d.port, c->id, fn, where);
        if (r) return r;
    }
    d.port = c->id->port_num;
    return sfv_create_channel(pd, &d, &c->ch);
}

static void sfv__cm_param(struct rdma_conn_param *p, const sfv_channel *ch, const uint8_t *priv, size_t len) {
    const sfv_channel_desc *d = sfv_channel_get_desc(ch);
    sfv_endpoint me;
    memset(p, 0, sizeof *p);
    sfv__ignore(sfv_channel_endpoint(ch, &me));
    p->private_data = priv;
    p->private_data_len = (uint8_t)len;
    p->responder_resources = (uint8_t)d->max_rd_atomic;
    p->initiator_depth = (uint8_t)d->max_rd_atomic;
    p->retry_count = d->ack_retries;
    p->rnr_retry_count = d->rnr_retries;
    p->flow_control = 1;
    p->qp_num = me.qpn;
}

SAFEVERBS_API sfv_result sfv_cm_listen(const char *addr, uint16_t port, int backlog, sfv_cm_listener **out) {
    static const char fn[] = "sfv_cm_listen";
    struct sockaddr_storage ss;
    sfv_cm_listener *l;
    char where[80];
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    if (addr) {
        r = sfv__cm_addr(fn, addr, port, &ss);
        if (r) return r;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        memset(&ss, 0, sizeof ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
    }
    snprintf(where, sizeof where, "%s port %u", addr ? addr : "(any)", (unsigned)port);
    l = (sfv_cm_listener *)sfv__handle_new(sizeof *l, SFV__H_CM_LISTENER);
    if (!l) return sfv__fail_verb("calloc", ENOMEM);
    l->ec = sfv__cm_channel();
    if (!l->ec) { r = sfv__last.result; goto fail; }
    if (rdma_create_id(l->ec, &l->id, l, RDMA_PS_TCP)) { r = sfv__cm_fail("rdma_create_id", errno, where); goto fail; }
    if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) { r = sfv__cm_fail("rdma_bind_addr", errno, where); goto fail; }
    if (addr && !l->id->verbs && !sfv__cm_any(&ss)) { r = sfv__cm_fail("rdma_bind_addr", ENODEV, where); goto fail; } /* (a wildcard has none) */
    if (rdma_listen(l->id, backlog > 0 ? backlog : 16)) { r = sfv__cm_fail("rdma_listen", errno, where); goto fail; }
    l->port = ntohs(rdma_get_src_port(l->id));
    *out = l;
    return SFV_OK;
fail:
    if (l->id) rdma_destroy_id(l->id);
    if (l->ec) rdma_destroy_event_channel(l->ec);
    sfv__handle_free(l, SFV__H_CM_LISTENER);
    return r;
}
SAFEVERBS_API sfv_result sfv_cm_open_device(const char *addr, sfv_context **out) {
    static const char fn[] = "sfv_cm_open_device";
    struct sockaddr_storage ss;
    struct rdma_event_channel *ec;
    struct rdma_cm_id *id = NULL;
    char name[IBV_SYSFS_NAME_MAX];
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(addr, "addr");
    r = sfv__cm_addr(fn, addr, 0, &ss);
    if (r) return r;
    ec = sfv__cm_channel();
    if (!ec) return sfv__last.result;
    if (rdma_create_id(ec, &id, NULL, RDMA_PS_TCP)) r = sfv__cm_fail("rdma_create_id", errno, addr);
    else if (rdma_bind_addr(id, (struct sockaddr *)&ss)) r = sfv__cm_fail("rdma_bind_addr", errno, addr);
    else if (!id->verbs) r = sfv__cm_fail("rdma_bind_addr", ENODEV, addr);
    else snprintf(name, sizeof name, "%s", ibv_get_device_name(id->verbs->device));
    if (id) rdma_destroy_id(id);
    rdma_destroy_event_channel(ec);
    return r ? r : sfv_open_device(name, out);
}
SAFEVERBS_API uint16_t sfv_cm_listener_port(const sfv_cm_listener *l) { return l ? l->port : 0; }
SAFEVERBS_API int sfv_cm_listener_fd(const sfv_cm_listener *l) { return l ? l->ec->fd : -1; }

SAFEVERBS_API sfv_result sfv_cm_get_request(sfv_cm_listener *l, int timeout_ms, sfv_cm_request **out) {
    const uint64_t deadline = sfv__now_ns() + (timeout_ms > 0 ? sfv__timeout_ns((uint32_t)timeout_ms) : 0);
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(l, "listener");
    SFV__CHECK_LIVE(l, SFV__H_CM_LISTENER); /* (a request is its child: a destroyed one's event channel is freed) */
    for (;;) {
        struct rdma_cm_event *ev;
        sfv_cm_request *req;
        sfv_result r;
        if (l->removed) /* (its device gone: no request will come, not even at the deadline) */
            return sfv__fail(SFV_ERR_BROKEN, ENODEV, "sfv_cm_get_request", "the listener's device was removed (DEVICE_REMOVAL): it takes no "
                             "more requests; destroy it");
        if ((r = sfv__cm_next(l->ec, deadline, "sfv_cm_get_request", &ev)) != SFV_OK) return r;
        if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL && ev->id == l->id) {
            l->removed = true;
            rdma_ack_cm_event(ev);
            continue;
        }
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) { /* a listener sees nothing else worth a caller's time */
            rdma_ack_cm_event(ev);
            continue;
        }
        req = (sfv_cm_request *)sfv__handle_new(sizeof *req, SFV__H_CM_REQUEST);
        if (!req) {
            (void)rdma_reject(ev->id, NULL, 0);
            rdma_destroy_id(ev->id);
            rdma_ack_cm_event(ev);
            return sfv__fail_verb("calloc", ENOMEM);
        }
        req->id = ev->id;
        req->l = l;
        __atomic_add_fetch(&l->taken, 1, __ATOMIC_RELAXED);
        req->param = ev->param.conn;
        sfv__cm_take_private(ev->param.conn.private_data, ev->param.conn.private_data_len, &req->rd_atomic, req->priv,
                             sizeof req->priv, &req->len);
        req->param.private_data = NULL;
        rdma_ack_cm_event(ev);
        *out = req;
        return SFV_OK;
    }
}

/* An answered request: freed, and no longer holds its listener. */
static void sfv__cm_request_free(sfv_cm_request *req) {
    __atomic_sub_fetch(&req->l->taken, 1, __ATOMIC_RELEASE);
    sfv__handle_free(req, SFV__H_CM_REQUEST);
}

SAFEVERBS_API const uint8_t *sfv_cm_request_private(const sfv_cm_request *req, size_t *len) {
    if (len) *len = req ? req->len : 0;
    return req ? req->priv : NULL;
}

SAFEVERBS_API sfv_result sfv_cm_request_open_device(const sfv_cm_request *req, sfv_context **out) {
    char name[IBV_SYSFS_NAME_MAX];
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(req, "request");
    SFV__CHECK_LIVE(req, SFV__H_CM_REQUEST); /* (the context is made from its device) */
    if (!req->id->verbs) return sfv__fail(SFV_ERR_NOT_FOUND, ENODEV, "sfv_cm_request_open_device", "the request came to no RDMA device"); /* (the CM always gives one) */
    snprintf(name, sizeof name, "%s", ibv_get_device_name(req->id->verbs->device));
    return sfv_open_device(name, out);
}

SAFEVERBS_API sfv_result sfv_cm_reject(sfv_cm_request *req, const void *reason, size_t len) {
    static const char fn[] = "sfv_cm_reject";
    sfv_result r = SFV_OK;
    SFV__CHECK_ARG(req, "request");
    SFV__LIVE_OR_REFUSE(req, SFV__H_CM_REQUEST, fn);
    if (len > SFV_CM_REJECT_PRIVATE_MAX || (len && !reason))
        r = sfv__fail(SFV_ERR_INVALID, EMSGSIZE, fn, "%s: a reason of %zu bytes (at most %d, not NULL)", fn, len, SFV_CM_REJECT_PRIVATE_MAX);
    /* EINVAL: the request is no longer waiting (its side gave up): nothing is left to refuse */
    if (rdma_reject(req->id, r ? NULL : reason, r ? 0 : (uint8_t)len) && !r && errno != EINVAL) r = sfv__fail_verb("rdma_reject", errno);
    rdma_destroy_id(req->id);
    sfv__cm_request_free(req);
    return r;
}

/* A caller's channel for a connection: not connected yet, on the device and port the CM chose. */
static sfv_result sfv__cm_channel_fits(sfv_channel *ch, struct rdma_cm_id *id, const char *fn, const char *where) {
    sfv_result r = sfv__cm_same_device(sfv_channel_pd(ch), id, fn, where);
    if (r) return r;
    return sfv__cm_port_fits(sfv_channel_get_desc(ch)->port, id, fn, where);
}
/* A caller's channel must be fresh: made, not connected, not broken. */
static sfv_result sfv__cm_channel_fresh(const sfv_channel *ch, const char *fn) {
    if (!ch) return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: invalid channel", fn);
    if (!sfv__channel_fresh(ch) && ch->watch && !ch->connected && !sfv__channel_broken(ch)) /* (reset, still watched: sfv__cm_watch_detach) */
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: the channel is a connection's (sfv_cm_connect's or sfv_cm_accept's, reset since): "
                         "it goes with that connection (sfv_cm_close); connect a channel of your own", fn);
    if (!sfv__channel_fresh(ch))
        return sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: the channel is %s: only a channel that never connected can", fn,
                         sfv__channel_broken(ch) ? "broken" : "already connected");
    return SFV_OK;
}

/* A request refused before it is accepted (NULL: none): answered (rejected) and freed whatever
   the result, as documented, the refusal's result and last error kept. */
static sfv_result sfv__cm_refuse(sfv_cm_request *req, sfv_result r) {
    if (req) SFV__KEEPING_ERROR(sfv__ignore(sfv_cm_reject(req, NULL, 0)));
    return r;
}

/* sfv_cm_accept and sfv_cm_accept_channel: ch NULL makes a channel on pd from desc. */
static sfv_result sfv__cm_accept(sfv_cm_request *req, sfv_pd *pd, sfv_channel *ch, const sfv_channel_desc *desc, const void *priv, size_t len,
                                 int timeout_ms, const char *fn, sfv_cm_conn **out) {
    uint8_t buf[SFV__CM_HDR + SFV_CM_ACCEPT_PRIVATE_MAX];
    struct rdma_conn_param param;
    struct rdma_cm_event *ev;
    sfv_cm_conn *c;
    uint64_t deadline;
    bool up = false;
    sfv_result r;
    deadline = sfv__deadline((uint32_t)sfv__cm_timeout(timeout_ms, desc));
    c = (sfv_cm_conn *)sfv__handle_new(sizeof *c, SFV__H_CM_CONN);
    if (!c) return sfv__cm_refuse(req, sfv__fail_verb("calloc", ENOMEM));
    c->id = req->id;
    c->peer_qpn = req->param.qp_num;
    memcpy(c->priv, req->priv, req->len);
    c->len = req->len;
    if (ch) {
        c->ch = ch;
        r = sfv__cm_channel_fits(ch, c->id, fn, "the request's address");
    } else {
        r = sfv__cm_same_device(pd, c->id, fn, "the request's address");
        if (!r && (r = sfv__cm_make_channel(c, pd, desc, fn, "the request's address")) == SFV_OK) c->owns_ch = true;
    }
    if (!r) r = sfv__cm_private(fn, priv, len, SFV_CM_ACCEPT_PRIVATE_MAX, (uint8_t)sfv_channel_get_desc(c->ch)->max_rd_atomic, buf);
    if (!r && (c->ec = sfv__cm_channel()) == NULL) r = sfv__last.result;
    if (!r && rdma_migrate_id(c->id, c->ec)) r = sfv__fail_verb("rdma_migrate_id", errno);
    if (!r) up = (r = sfv__cm_ready(c, req->rd_atomic ? req->rd_atomic : req->param.initiator_depth)) == SFV_OK;
    if (r) { /* refuse the peer rather than leave it to its deadline */
        SFV__KEEPING_ERROR((void)rdma_reject(c->id, NULL, 0));
        goto fail;
    }
    sfv__cm_param(&param, c->ch, buf, SFV__CM_HDR + len);
    if (rdma_accept(c->id, &param)) {
        const int e = errno;
        /* EINVAL: the request no longer waits (its side gave up, or its CM timed out waiting), as
           rdma_reject says it (the parameters are ours, made for this device) */
        r = e == EINVAL ? sfv__fail(SFV_ERR_UNREACHABLE, e, "rdma_accept", "%s: the connecting peer is gone (it gave up, or its request timed out): rdma_accept said EINVAL", fn)
                        : sfv__cm_fail("rdma_accept", e, "the request");
        goto fail;
    }
    r = sfv__cm_next(c->ec, deadline, fn, &ev);
    if (!r && ev->event == RDMA_CM_EVENT_DISCONNECTED) {
        /* the peer connected and already left (its RTU and DREQ came together): connected, and
           gone, as if sfv_cm_events had seen it */
        rdma_ack_cm_event(ev);
        c->disconnected = true;
        (void)rdma_disconnect(c->id);
        sfv__channel_peer_gone(c->ch, SFV__CAUSE_PEER_GONE);
        sfv__cm_request_free(req);
        sfv__cm_watch(c);
        *out = c;
        return SFV_OK;
    }
    if (!r) {
        if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) { /* our device went: no peer's doing (a driver's failure, as before) */
            r = sfv__fail(SFV_ERR_DRIVER, ENODEV, "rdma_accept", "%s: the device was removed (DEVICE_REMOVAL) before the connection was "
                          "established; close the device", fn);
        } else if (ev->event != RDMA_CM_EVENT_ESTABLISHED) { /* the peer gave up or its CM timed out */
            r = sfv__fail(ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
                                  ev->event == RDMA_CM_EVENT_CONNECT_ERROR ? SFV_ERR_UNREACHABLE : SFV_ERR_DRIVER,
                          EPROTO, "rdma_accept", "%s: the connecting peer did not complete the connection (%s, status %d)", fn,
                          rdma_event_str(ev->event), ev->status);
        }
        rdma_ack_cm_event(ev);
    }
    if (r) goto fail;
    sfv__cm_request_free(req);
    sfv__cm_watch(c);
    *out = c;
    return SFV_OK;
fail:
    if (up && !c->owns_ch) sfv__channel_peer_gone(c->ch, SFV__CAUSE_NONE); /* connected to nobody: broken */
    sfv__cm_conn_free(c); /* (its id first: it lives on the listener's channel until the request is freed) */
    sfv__cm_request_free(req);
    return r;
}

SAFEVERBS_API sfv_result sfv_cm_accept(sfv_cm_request *req, sfv_pd *pd, const sfv_channel_desc *desc, const void *priv, size_t len,
                                       int timeout_ms, sfv_cm_conn **out) {
    static const char fn[] = "sfv_cm_accept";
    if (req) SFV__LIVE_OR_REFUSE(req, SFV__H_CM_REQUEST, fn); /* (before anything: an answered request is freed) */
    if (!out) return sfv__cm_refuse(req, sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: out is NULL%s", fn, req ? " (the request was rejected)" : ""));
    *out = NULL;
    SFV__CHECK_ARG(req, "request");
    if (!pd) return sfv__cm_refuse(req, sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: invalid pd (the request was rejected)", fn));
    if (SFV__UNLIKELY(!sfv__handle_live(pd, SFV__H_PD))) return sfv__cm_refuse(req, sfv__handle_dead_doing(fn, SFV__H_PD, "the request was rejected"));
    return sfv__cm_accept(req, pd, NULL, desc, priv, len, timeout_ms, fn, out);
}

SAFEVERBS_API sfv_result sfv_cm_accept_channel(sfv_cm_request *req, sfv_channel *ch, const void *priv, size_t len, int timeout_ms, sfv_cm_conn **out) {
    static const char fn[] = "sfv_cm_accept_channel";
    sfv_result r;
    if (req) SFV__LIVE_OR_REFUSE(req, SFV__H_CM_REQUEST, fn); /* (as sfv_cm_accept's) */
    if (!out) return sfv__cm_refuse(req, sfv__fail(SFV_ERR_INVALID, EINVAL, fn, "%s: out is NULL%s", fn, req ? " (the request was rejected)" : ""));
    *out = NULL;
    SFV__CHECK_ARG(req, "request");
    if (ch && SFV__UNLIKELY(!sfv__handle_live(ch, SFV__H_CHANNEL))) /* (before anything reads it; answered, as sfv_cm_accept's dead PD) */
        return sfv__cm_refuse(req, sfv__handle_dead_doing(fn, SFV__H_CHANNEL, "the request was rejected"));
    if ((r = sfv__cm_channel_fresh(ch, fn)) != SFV_OK) return sfv__cm_refuse(req, r);
    return sfv__cm_accept(req, sfv_channel_pd(ch), ch, sfv_channel_get_desc(ch), priv, len, timeout_ms, fn, out);
}

/* sfv_cm_connect and sfv_cm_connect_channel: ch NULL makes a channel on pd from desc. */
static sfv_result sfv__cm_connect(sfv_pd *pd, sfv_channel *ch, const char *src, const char *addr, uint16_t port, const sfv_channel_desc *desc,
                                  const void *priv, size_t len, int timeout_ms, const char *fn, sfv_cm_conn **out) {
    uint8_t buf[SFV__CM_HDR + SFV_CM_CONNECT_PRIVATE_MAX];
    struct sockaddr_storage ss, from;
    struct rdma_conn_param param;
    struct rdma_cm_event *ev;
    sfv_cm_conn *c;
    char where[80];
    uint64_t deadline;
    uint8_t peer_rd = 0;
    bool up = false;
    sfv_result r;
    SFV__CHECK_ARG(addr, "addr");
    if (len > SFV_CM_CONNECT_PRIVATE_MAX || (len && !priv))
        return sfv__fail(SFV_ERR_INVALID, EMSGSIZE, fn, "%s: %zu bytes of private data, at most %d fit (and not NULL)", fn, len,
                         SFV_CM_CONNECT_PRIVATE_MAX);
    /* the desc's timeout times the steps before its channel is made (which would refuse it only
       then): one out of range would let a silent resolution wait for days */
    if (desc && (r = sfv__timeout_field(desc->timeout_ms)) != SFV_OK) return r;
    r = sfv__cm_addr(fn, addr, port, &ss);
    if (!r && src) r = sfv__cm_addr(fn, src, 0, &from);
    if (r) return r;
    snprintf(where, sizeof where, "%s port %u", addr, (unsigned)port);
    deadline = sfv__deadline((uint32_t)sfv__cm_timeout(timeout_ms, desc));
    r = sfv__cm_route(src ? &from : NULL, &ss, where);
    if (r) return r;
    c = (sfv_cm_conn *)sfv__handle_new(sizeof *c, SFV__H_CM_CONN);
    if (!c) return sfv__fail_verb("calloc", ENOMEM);
    c->ec = sfv__cm_channel();
    if (!c->ec) { r = sfv__last.result; goto fail; }
    if (rdma_create_id(c->ec, &c->id, c, RDMA_PS_TCP)) { r = sfv__cm_fail("rdma_create_id", errno, where); goto fail; }
    if (rdma_resolve_addr(c->id, src ? (struct sockaddr *)&from : NULL, (struct sockaddr *)&ss, sfv__ms_until_some(deadline))) {
        r = sfv__cm_fail("rdma_resolve_addr", errno, where);
        goto fail;
    }
    r = sfv__cm_expect(c->ec, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "address resolution", where, &ev);
    if (r) goto fail;
    rdma_ack_cm_event(ev);
    r = ch ? sfv__cm_channel_fits(ch, c->id, fn, where) : sfv__cm_same_device(pd, c->id, fn, where);
    if (r) goto fail;
    if (rdma_resolve_route(c->id, sfv__ms_until_some(deadline))) {
        r = sfv__cm_fail("rdma_resolve_route", errno, where);
        goto fail;
    }
    r = sfv__cm_expect(c->ec, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "route resolution", where, &ev);
    if (r) goto fail;
    rdma_ack_cm_event(ev);
    if (ch) c->ch = ch;
    else if ((r = sfv__cm_make_channel(c, pd, desc, fn, where)) == SFV_OK) c->owns_ch = true;
    if (!r) r = sfv__cm_private(fn, priv, len, SFV_CM_CONNECT_PRIVATE_MAX, (uint8_t)sfv_channel_get_desc(c->ch)->max_rd_atomic, buf);
    if (r) goto fail;
    sfv__cm_param(&param, c->ch, buf, SFV__CM_HDR + len);
    if (rdma_connect(c->id, &param)) { r = sfv__cm_fail("rdma_connect", errno, where); goto fail; }
    /* a user-managed QP gets CONNECT_RESPONSE: we bring it up, then rdma_establish */
    r = sfv__cm_expect(c->ec, RDMA_CM_EVENT_CONNECT_RESPONSE, deadline, "connect", where, &ev);
    if (r) goto fail;
    sfv__cm_take_private(ev->param.conn.private_data, ev->param.conn.private_data_len, &peer_rd, c->priv, sizeof c->priv, &c->len);
    if (!peer_rd) peer_rd = ev->param.conn.initiator_depth; /* the reads we may issue: the peer's responder resources */
    c->peer_qpn = ev->param.conn.qp_num;
    rdma_ack_cm_event(ev);
    up = (r = sfv__cm_ready(c, peer_rd)) == SFV_OK;
    if (r) { SFV__KEEPING_ERROR((void)rdma_reject(c->id, NULL, 0)); goto fail; }
    if (rdma_establish(c->id)) { r = sfv__cm_fail("rdma_establish", errno, where); goto fail; }
    sfv__cm_watch(c);
    *out = c;
    return SFV_OK;
fail:
    if (up && !c->owns_ch) sfv__channel_peer_gone(c->ch, SFV__CAUSE_NONE); /* connected to nobody: broken */
    sfv__cm_conn_free(c);
    return r;
}

SAFEVERBS_API sfv_result sfv_cm_connect(sfv_pd *pd, const char *src, const char *addr, uint16_t port, const sfv_channel_desc *desc,
                                        const void *priv, size_t len, int timeout_ms, sfv_cm_conn **out) {
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    SFV__CHECK_ARG(pd, "pd");
    SFV__CHECK_LIVE(pd, SFV__H_PD);
    return sfv__cm_connect(pd, NULL, src, addr, port, desc, priv, len, timeout_ms, "sfv_cm_connect", out);
}

SAFEVERBS_API sfv_result sfv_cm_connect_channel(sfv_channel *ch, const char *src, const char *addr, uint16_t port, const void *priv, size_t len,
                                                int timeout_ms, sfv_cm_conn **out) {
    static const char fn[] = "sfv_cm_connect_channel";
    sfv_result r;
    SFV__CHECK_ARG(out, "out");
    *out = NULL;
    if (ch) SFV__LIVE_OR_REFUSE(ch, SFV__H_CHANNEL, fn); /* (NULL: sfv__cm_channel_fresh says it) */
    r = sfv__cm_channel_fresh(ch, fn);
    if (r) return r;
    return sfv__cm_connect(sfv_channel_pd(ch), ch, src, addr, port, sfv_channel_get_desc(ch), priv, len, timeout_ms, fn, out);
}

SAFEVERBS_API const uint8_t *sfv_cm_reject_reason(size_t *len) {
    if (len) *len = sfv__reject_len;
    return sfv__reject_buf;
}
SAFEVERBS_API sfv_channel *sfv_cm_channel(const sfv_cm_conn *c) { return c ? c->ch : NULL; }
SAFEVERBS_API const uint8_t *sfv_cm_peer_private(const sfv_cm_conn *c, size_t *len) {
    if (len) *len = c ? c->len : 0;
    return c ? c->priv : NULL;
}
SAFEVERBS_API int sfv_cm_fd(const sfv_cm_conn *c) { return c ? c->ec->fd : -1; }

SAFEVERBS_API sfv_result sfv_cm_events(sfv_cm_conn *c) {
    int err = 0;
    SFV__CHECK_HANDLE(c, SFV__H_CM_CONN, "connection");
    if (sfv__cm_poll(c, &err))
        return c->removed ? sfv__fail(SFV_ERR_BROKEN, ENODEV, "rdma_cm", "the device was removed (DEVICE_REMOVAL): the channel is broken, its work flushed; close the device")
                          : sfv__fail(SFV_ERR_BROKEN, ECONNRESET, "rdma_cm", "the peer disconnected: the channel is broken, its work flushed");
    if (err) return sfv__fail_verb("rdma_get_cm_event", err);
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_cm_close(sfv_cm_conn *c, int timeout_ms) {
    uint64_t deadline;
    if (!c) return SFV_OK;
    SFV__LIVE_OR_REFUSE(c, SFV__H_CM_CONN, "sfv_cm_close");
    deadline = sfv__now_ns() + (timeout_ms > 0 ? sfv__timeout_ns((uint32_t)timeout_ms) : 0);
    if (c->ch) sfv__channel_peer_gone(c->ch, SFV__CAUSE_NONE); /* nothing of ours is in the NIC's hands past this point */
    if (!c->disconnected && rdma_disconnect(c->id) == 0 && timeout_ms > 0) {
        struct rdma_cm_event *ev;
        const sfv__error_mark before = sfv__error_mark_now(); /* a peer that does not confirm in time is no failure of close */
        while (sfv__cm_next(c->ec, deadline, "disconnect", &ev) == SFV_OK) {
            const bool done = ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;
            rdma_ack_cm_event(ev);
            if (done) break;
        }
        sfv__error_back(&before);
    }
    c->disconnected = true; /* (a close repeated after a refusal below disconnects no second time) */
    if (c->ch && c->owns_ch) { /* its own channel first: a destroy a verb refuses keeps the connection for another close */
        sfv_channel *const ch = c->ch;
        const sfv_result r = sfv_destroy_channel(ch); /* (past its QP it detaches the watch, and c forgets ch) */
        if (r) {
            c->ch = ch;
            if (!sfv__channel_watched_by(ch, &c->watch)) sfv__cm_watch(c); /* detached past its QP: a destroy of it by the caller tells c again */
            return r;
        }
        c->ch = NULL;
    }
    sfv__cm_conn_free(c);
    return SFV_OK;
}

SAFEVERBS_API sfv_result sfv_cm_destroy_listener(sfv_cm_listener *l) {
    struct rdma_cm_event *ev;
    size_t taken;
    if (!l) return SFV_OK;
    SFV__LIVE_OR_REFUSE(l, SFV__H_CM_LISTENER, "sfv_cm_destroy_listener");
    if ((taken = __atomic_load_n(&l->taken, __ATOMIC_ACQUIRE)) != 0) /* their ids live on l's event channel */
        return sfv__fail(SFV_ERR_INVALID, EBUSY, "sfv_cm_destroy_listener",
                         "sfv_cm_destroy_listener: %zu request%s taken from it not answered yet (sfv_cm_accept or sfv_cm_reject them first); the listener is kept",
                         taken, taken == 1 ? "" : "s");
    while (rdma_get_cm_event(l->ec, &ev) == 0) { /* requests nobody took: refuse them now */
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            struct rdma_cm_id *id = ev->id;
            (void)rdma_reject(id, NULL, 0);
            rdma_ack_cm_event(ev);
            rdma_destroy_id(id);
        } else {
            rdma_ack_cm_event(ev);
        }
    }
    rdma_destroy_id(l->id);
    rdma_destroy_event_channel(l->ec);
    sfv__handle_free(l, SFV__H_CM_LISTENER);
    return SFV_OK;
}

/* A node over the connection manager (sfv_node_connect_cm). A request's and an answer's private
   data: "SN", 'C' (request) or 'A' (answer), version 1; the sender's rank and the world size
   (32-bit big-endian); its barrier region (sfv_remote_mr_encode); the first 16 bytes of
   HMAC-SHA256(job key, label, those 36 bytes, the receiver's rank, the sender's QP number, and
   for an answer the request's 52 bytes). 52 bytes: what a request carries after our header. */
enum { SFV__NCM_BODY = 36, SFV__NCM_SIZE = SFV__NCM_BODY + 16 };
SFV__STATIC_ASSERT(SFV__NCM_SIZE <= SFV_CM_CONNECT_PRIVATE_MAX && SFV__NCM_BODY == 12 + SFV_REMOTE_MR_ENCODED_SIZE, ncm_fits);

static void sfv__ncm_mac(const sfv__ex_key *k, const uint8_t *body, size_t to, uint32_t qpn, const uint8_t *req, uint8_t out[16]) {
    static const char label[] = "safeverbs node cm v1";
    uint8_t full[32], be[8];
    sfv__hmac m;
    sfv__hmac_init(&m, k->bytes, k->len);
    sfv__hmac_update(&m, label, sizeof label);
    sfv__hmac_update(&m, body, SFV__NCM_BODY);
    sfv__put_be(be, to, 4);
    sfv__put_be(be + 4, qpn, 4);
    sfv__hmac_update(&m, be, sizeof be);
    if (req) sfv__hmac_update(&m, req, SFV__NCM_SIZE);
    sfv__hmac_final(&m, full);
    memcpy(out, full, 16);
}
static void sfv__ncm_make(const sfv__ex_key *k, char kind, const sfv_node *node, size_t to, uint32_t qpn, const uint8_t *req, uint8_t out[SFV__NCM_SIZE]) {
    out[0] = 'S'; out[1] = 'N'; out[2] = (uint8_t)kind; out[3] = 1;
    sfv__put_be(out + 4, sfv_node_rank(node), 4);
    sfv__put_be(out + 8, sfv_node_world_size(node), 4);
    sfv_remote_mr_encode(sfv__node_barrier(node), out + 12);
    sfv__ncm_mac(k, out, to, qpn, req, out + SFV__NCM_BODY);
}
/* NULL when p (n bytes) is a good `kind` message to this node from a rank of its world: *from
   and *barrier say whose and where its barrier is. Else what is wrong with it (both zero). */
static const char *sfv__ncm_judge(const sfv__ex_key *k, const uint8_t *p, size_t n, char kind, const sfv_node *node, uint32_t qpn,
                                  const uint8_t *req, size_t *from, sfv_remote_mr *barrier) {
    uint8_t mac[16];
    sfv_result decoded;
    size_t i;
    memset(barrier, 0, sizeof *barrier);
    *from = 0;
    if (!p || n < SFV__NCM_SIZE || p[0] != 'S' || p[1] != 'N' || p[2] != (uint8_t)kind || p[3] != 1) return "not a safeverbs node's connection";
    for (i = SFV__NCM_SIZE; i < n; i++)
        if (p[i]) return "bytes after the message are not 0"; /* the CM pads with zeroes */
    sfv__ncm_mac(k, p, sfv_node_rank(node), qpn, req, mac);
    if (!sfv__same_bytes(mac, p + SFV__NCM_BODY, sizeof mac)) return "it did not prove the job key";
    if (sfv__get_be(p + 8, 4) != sfv_node_world_size(node)) return "another world size";
    *from = (size_t)sfv__get_be(p + 4, 4);
    if (*from >= sfv_node_world_size(node) || *from == sfv_node_rank(node)) return "a rank out of this world";
    SFV__KEEPING_ERROR(decoded = sfv_remote_mr_decode(p + 12, SFV_REMOTE_MR_ENCODED_SIZE, barrier)); /* a stranger's: not the caller's failure */
    if (decoded || sfv_remote_mr_length(*barrier) < sfv_node_world_size(node) * sizeof(uint64_t)) return "a barrier region that is malformed or too small";
    return NULL;
}
static const char *sfv__ncm_check(const sfv__ex_key *k, const uint8_t *p, size_t n, char kind, const sfv_node *node, uint32_t qpn,
                                  const uint8_t *req, size_t *from, sfv_remote_mr *barrier) {
    const char *why = sfv__ncm_judge(k, p, n, kind, node, qpn, req, from, barrier);
    if (why) {
        *from = 0;
        memset(barrier, 0, sizeof *barrier);
    }
    return why;
}

/* Whether a and b are the same host address (the port aside). */
static bool sfv__cm_same_host(const struct sockaddr *a, const struct sockaddr_storage *b) {
    if (!a || a->sa_family != b->ss_family) return false;
    if (a->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)(const void *)a)->sin_addr, &((const struct sockaddr_in *)(const void *)b)->sin_addr, 4) == 0;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr, 16) == 0;
    return false;
}

/* Whether any of the node's channels broke (a failed bring-up). */
static bool sfv__ncm_any_broken(const sfv_node *node) {
    size_t i;
    for (i = 0; i < sfv_node_world_size(node); i++)
        if (sfv__channel_broken(sfv_multi_channel_peer(sfv_node_multi_channel(node), i))) return true;
    return false;
}

/* What a node connected through the CM keeps: a connection per rank (its own: NULL). */
typedef struct sfv__ncm { size_t n; sfv_cm_conn *conns[1]; } sfv__ncm;
static void sfv__ncm_free(void *p) {
    sfv__ncm *st = (sfv__ncm *)p;
    size_t i;
    for (i = 0; i < st->n; i++) sfv__ignore(sfv_cm_close(st->conns[i], 0));
    SFV_FREE(st);
}

/* Rank `to`'s answer must prove the key and come from it. */
static sfv_result sfv__ncm_answer(const sfv__ex_key *k, sfv_node *node, size_t to, const sfv_cm_conn *c, const uint8_t *req, sfv_remote_mr *barrier) {
    size_t n, from;
    const uint8_t *p = sfv_cm_peer_private(c, &n);
    const char *why = sfv__ncm_check(k, p, n, 'A', node, c->peer_qpn, req, &from, barrier);
    if (!why && from != to) why = "it says another rank";
    if (why) return sfv__fail(SFV_ERR_PERMISSION, EACCES, "sfv_node_connect_cm", "sfv_node_connect_cm: rank %zu's answer is refused: %s", to, why);
    return SFV_OK;
}

/* This rank's connection to lower rank j: retried while j does not listen yet. */
static sfv_result sfv__ncm_connect(sfv_node *node, const sfv_net_node *nodes, size_t j, const uint8_t *req, uint64_t deadline, sfv_cm_conn **out) {
    sfv_channel *ch = sfv_multi_channel_peer(sfv_node_multi_channel(node), j);
    const size_t me = sfv_node_rank(node);
    int pause_ms = 1;
    for (;;) {
        const int ms = sfv__ms_until(deadline);
        sfv_result r;
        size_t i;
        if (ms == 0)
            return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "sfv_node_connect_cm", "sfv_node_connect_cm: rank %zu (%s port %u) did not listen before the deadline", j,
                             nodes[j].host, (unsigned)nodes[j].port);
        r = sfv_cm_connect_channel(ch, nodes[me].host, nodes[j].host, nodes[j].port, req, SFV__NCM_SIZE, ms, out);
        /* not listening yet, or a full backlog, or a rank that failed while accepting: a reject
           with no reason (the IB CM pads a reason to 148 bytes, so none arrives as zeroes; a
           refusal of ours says why), tried again until the deadline */
        for (i = 0; i < sfv__reject_len && !sfv__reject_buf[i]; i++) {}
        if (r == SFV_ERR_TIMEOUT) {
            const sfv_error why = sfv__last;
            return sfv__fail(r, why.errnum, why.verb, "sfv_node_connect_cm: rank %zu (%s port %u) did not answer in time: %s", j, nodes[j].host,
                             (unsigned)nodes[j].port, why.message);
        }
        if (r != SFV_ERR_REFUSED && !(r == SFV_ERR_REJECTED && i == sfv__reject_len)) return r;
        sfv__backoff(deadline, &pause_ms, 20);
    }
}

/* The next request from a higher rank that proves the key, accepted on its channel; strangers
   are rejected and take no place. */
static sfv_result sfv__ncm_accept(const sfv__ex_key *k, sfv_node *node, sfv_cm_listener *l, const struct sockaddr_storage *addrs, sfv__ncm *st,
                                  sfv_remote_mr *barriers, uint64_t deadline) {
    const size_t me = sfv_node_rank(node);
    for (;;) {
        const int ms = sfv__ms_until(deadline);
        uint8_t rep[SFV__NCM_SIZE];
        sfv_cm_request *q;
        sfv_remote_mr b;
        sfv_endpoint ep;
        const uint8_t *p;
        const char *why;
        size_t n, from, r0;
        sfv_result r = ms ? sfv_cm_get_request(l, ms, &q) : SFV_ERR_TIMEOUT;
        if (r == SFV_ERR_TIMEOUT) {
            for (r0 = me + 1; r0 < st->n && st->conns[r0]; r0++) {}
            return sfv__fail(SFV_ERR_TIMEOUT, ETIMEDOUT, "sfv_node_connect_cm", "sfv_node_connect_cm: rank %zu did not connect before the deadline", r0);
        }
        if (r) return r;
        p = sfv_cm_request_private(q, &n);
        why = sfv__ncm_check(k, p, n, 'C', node, q->param.qp_num, NULL, &from, &b);
        if (!why && from < me) why = "a lower rank (this rank connects to it)";
        if (!why && st->conns[from]) why = "a rank already connected";
        if (!why && !sfv__cm_same_host(rdma_get_peer_addr(q->id), &addrs[from])) why = "not from that rank's address";
        if (why) {
            SFV__LOG(SFV_LOG_INFO, "sfv_node_connect_cm: rank %zu rejected a connection request: %s", me, why);
            sfv__ignore(sfv_cm_reject(q, why, strlen(why)));
            continue;
        }
        r = sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(node), from), &ep);
        if (r) { SFV__KEEPING_ERROR(sfv__ignore(sfv_cm_reject(q, NULL, 0))); return r; }
        sfv__ncm_make(k, 'A', node, from, ep.qpn, p, rep);
        r = sfv_cm_accept_channel(q, sfv_multi_channel_peer(sfv_node_multi_channel(node), from), rep, sizeof rep, sfv__ms_until_some(deadline),
                                  &st->conns[from]); /* (0 would be the channel's own timeout) */
        if (r == SFV_ERR_TIMEOUT) {
            const sfv_error late = sfv__last;
            return sfv__fail(r, late.errnum, late.verb, "sfv_node_connect_cm: rank %zu did not complete its connection in time: %s", from, late.message);
        }
        if (r) return r;
        barriers[from] = b;
        return SFV_OK;
    }
}

SAFEVERBS_API sfv_result sfv_node_connect_cm(sfv_node *node, const sfv_net_node *nodes, const sfv_exchange_desc *desc, int timeout_ms) {
    static const char fn[] = "sfv_node_connect_cm";
    const uint64_t deadline = sfv__deadline(sfv__ms_or(timeout_ms, 60000u));
    const sfv__error_mark before = sfv__error_mark_now(); /* retries and strangers fail on the way: a success leaves no error */
    struct sockaddr_storage *addrs = NULL;
    sfv_remote_mr *barriers = NULL;
    sfv_cm_listener *l = NULL;
    sfv__ncm *st = NULL;
    bool touched = false; /* a channel was brought up: a failure now breaks the node */
    sfv__ex_key key;
    size_t me, world, j;
    sfv_endpoint ep;
    sfv_result r;
    SFV__CHECK_HANDLE(node, SFV__H_NODE, "node");
    SFV__CHECK_ARG(nodes, "nodes (NULL)");
    if ((r = sfv__node_may_connect(node, fn)) != SFV_OK) return r;
    me = sfv_node_rank(node);
    world = sfv_node_world_size(node);
    if ((r = sfv_net_config_check(nodes, world)) != SFV_OK) return r;
    if ((r = sfv__ex_key_pick(desc, &key)) != SFV_OK) return r;
    if (key.loopback_only)
        return sfv__fail(SFV_ERR_PERMISSION, EACCES, fn, "%s: no job key (sfv_exchange_desc.key or SAFEVERBS_JOB_KEY): a connection request names its rank, "
                         "and without a key anyone who reaches the port could claim one (insecure_without_key allows it)", fn);
    addrs = (struct sockaddr_storage *)SFV_CALLOC(world, sizeof *addrs);
    barriers = (sfv_remote_mr *)SFV_CALLOC(world, sizeof *barriers);
    st = (sfv__ncm *)SFV_CALLOC(1, sizeof *st + world * sizeof st->conns[0]);
    if (!addrs || !barriers || !st) { r = sfv__fail_verb("calloc", ENOMEM); goto done; }
    st->n = world;
    for (j = 0; j < world && !r; j++) r = sfv__cm_addr(fn, nodes[j].host, nodes[j].port, &addrs[j]);
    if (!r && me + 1 < world) r = sfv_cm_listen(nodes[me].host, nodes[me].port, (int)world, &l);
    for (j = 0; j < me && !r; j++) { /* the lower ranks, in order; each of them accepts */
        uint8_t req[SFV__NCM_SIZE];
        r = sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(node), j), &ep);
        if (r) break;
        sfv__ncm_make(&key, 'C', node, j, ep.qpn, NULL, req);
        r = sfv__ncm_connect(node, nodes, j, req, deadline, &st->conns[j]);
        touched = touched || st->conns[j] || sfv__channel_broken(sfv_multi_channel_peer(sfv_node_multi_channel(node), j));
        if (!r) r = sfv__ncm_answer(&key, node, j, st->conns[j], req, &barriers[j]);
    }
    for (j = me + 1; j < world && !r; j++) { /* the higher ranks, in whatever order they come */
        r = sfv__ncm_accept(&key, node, l, addrs, st, barriers, deadline);
        touched = touched || r == SFV_OK || sfv__ncm_any_broken(node); /* a failed accept may have brought its channel up */
    }
    if (!r) { /* its own rank: a loopback channel */
        sfv_channel *self = sfv_multi_channel_peer(sfv_node_multi_channel(node), me);
        r = sfv_channel_endpoint(self, &ep);
        if (!r) r = sfv_channel_handshake(self, &ep);
        touched = true;
        barriers[me] = sfv__node_barrier(node);
    }
done:
    if (l) SFV__KEEPING_ERROR(sfv__ignore(sfv_cm_destroy_listener(l))); /* rejects whoever still asks */
    if (r == SFV_OK) {
        sfv__node_connected(node, barriers, st, sfv__ncm_free);
        sfv__error_back(&before);
        SFV__LOG(SFV_LOG_INFO, "node rank %zu of %zu: connected to every rank through the CM", me, world);
    } else {
        if (st) SFV__KEEPING_ERROR(sfv__ncm_free(st));
        if (touched) { /* the result stays what went wrong; the node can only be destroyed */
            const sfv_error why = sfv__last;
            sfv__node_poison(node, "the node is broken: its connection through the connection manager failed after some channels connected");
            sfv__fail(why.result, why.errnum, why.verb, "%s: failed after some channels connected, so the node is broken (destroy it): %s", fn,
                      why.message);
        }
    }
    SFV_FREE(addrs);
    SFV_FREE(barriers);
    return r;
}
#endif /* SAFEVERBS_RDMACM */

/* >>impl raw verbs --------------------------------------------------------------------------- */
SAFEVERBS_API struct ibv_srq *sfv_srq_raw(const sfv_srq *srq) { return srq ? srq->srq : NULL; }
SAFEVERBS_API struct ibv_context *sfv_context_raw(const sfv_context *ctx) { return ctx ? ctx->ctx : NULL; }
SAFEVERBS_API struct ibv_pd *sfv_pd_raw(const sfv_pd *pd) { return pd ? pd->pd : NULL; }
SAFEVERBS_API struct ibv_mr *sfv_mr_raw(const sfv_mr *mr) { return mr ? mr->mr : NULL; }
SAFEVERBS_API struct ibv_cq *sfv_cq_raw(const sfv_cq *cq) { return cq ? cq->cq : NULL; }
SAFEVERBS_API struct ibv_qp *sfv_channel_raw_qp(const sfv_channel *ch) { return ch ? ch->qp : NULL; }
SAFEVERBS_API struct ibv_cq *sfv_channel_raw_cq(const sfv_channel *ch) { return ch ? ch->cq : NULL; }
/* (sfv_context_wrap is in >>impl devices, sfv_pd_wrap in >>impl pd and cq.) */

/* Helper macros end here, so they cannot collide with the including file's. */
#undef SFV__THREAD_LOCAL
#undef SFV__STATIC_ASSERT
#undef SFV__LIKELY
#undef SFV__UNLIKELY
#undef SFV__PRINTF
#undef SFV__HOT_INLINE
#undef SFV__SLOW
#undef SFV__API_HOT
#undef SFV__ACCESS_ALL
#undef SFV__EX_MAX_SIZE
#undef SFV__NODE_ENTRY
#undef SFV__MAX_PEERS
#undef SFV__CHECK_ARG
#undef SFV__ELEMENT
#undef SFV__WC_LIST
#undef SFV__KEEPING_ERROR
#undef SFV__PENDING_LIVE
#undef SFV__ABORT_DRAIN_NS
#endif /* SAFEVERBS_IMPLEMENTATION */

/* >>licence
------------------------------------------------------------------------------
MIT License

Copyright (c) 2026 the safeverbs authors

Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
