/* fake_rdmacm.h - the control side of tests/nodev/fake_rdmacm.c, a fake librdmacm for the
   device-free tests: it defines the rdma_* functions safeverbs.h calls (SAFEVERBS_RDMACM), on
   the fake NIC of fake_verbs.c, with no kernel CM behind them. Link it instead of -lrdmacm.

   What it models:
   - event channels: an eventfd that is readable exactly while a due event is queued (poll
     works); rdma_get_cm_event on an empty non-blocking channel fails with EAGAIN, on an empty
     blocking one it aborts (real librdmacm would block forever: a hang);
   - ids live on a channel; an event read counts against its id (a CONNECT_REQUEST against its
     listener, as librdmacm does) until acked; destroying or migrating an id with events read
     and not acked aborts (librdmacm waits for the acks forever), so does destroying a channel
     that still has ids (they would point to freed memory), and acking an event twice;
   - every event read is a fresh allocation, its private data one of exactly its length: a read
     past it or a use after the ack is ASan's to see;
   - addresses: FKCM_ADDR0 (127.0.0.1) belongs to device fake0, FKCM_ADDR1 (127.0.0.2) to fake1,
     FKCM_ADDR_NORDMA (127.0.0.9) to an interface without an RDMA device (a bind succeeds, with no
     device); a wildcard address binds without a device; anything else: EADDRNOTAVAIL. A port
     bound twice: EADDRINUSE;
   - replies: a call that succeeds queues what the peer and the CM would answer on the id's
     channel. Unless scripted (fkcm_on), the defaults are: resolve_addr -> ADDR_RESOLVED,
     resolve_route -> ROUTE_RESOLVED, connect -> CONNECT_RESPONSE (the peer's QP number and PSN
     of fkcm_set_peer, an "SC" header), establish and accept -> ESTABLISHED, disconnect ->
     DISCONNECTED (once per id), listen -> nothing (a script's CONNECT_REQUESTs come to the new
     listener: peers asking a listener made inside a call, as sfv_node_connect_cm's);
   - rdma_init_qp_attr gives what the fake NIC's ibv_modify_qp takes: RTR to the peer's QP
     number and PSN (fkcm_set_peer) over the GID ::ffff:10.0.0.2, RTS with the id's own PSN.
   Failures: fkcm_fail makes the n-th call of a function fail (-1, errno as given);
   fkcm_chaos makes every fallible call fail at random. Test-only; one thread calls the fake
   (a timer thread of its own delivers delayed events). */
#ifndef FAKE_RDMACM_H
#define FAKE_RDMACM_H

#include <stddef.h>
#include <stdint.h>

#define FKCM_ADDR0 "127.0.0.1"
#define FKCM_ADDR1 "127.0.0.2"
#define FKCM_ADDR_NORDMA "127.0.0.9"

/* The fallible functions, for fkcm_on and fkcm_fail. */
enum fkcm_fn {
    FKCM_CREATE_EVENT_CHANNEL, FKCM_CREATE_ID, FKCM_BIND_ADDR, FKCM_LISTEN, FKCM_RESOLVE_ADDR,
    FKCM_RESOLVE_ROUTE, FKCM_CONNECT, FKCM_ACCEPT, FKCM_REJECT, FKCM_ESTABLISH, FKCM_DISCONNECT,
    FKCM_MIGRATE_ID, FKCM_INIT_QP_ATTR, FKCM_GET_CM_EVENT, FKCM_FNS
};

/* One event to queue. type is an enum rdma_cm_event_type. */
typedef struct fkcm_event {
    int type;
    int status;
    const void *priv;     /* copied when queued; NULL with priv_len > 0: the event says so */
    size_t priv_len;      /* at most 255 (private_data_len is 8 bits) */
    uint32_t qpn;         /* param.conn.qp_num */
    uint8_t initiator_depth, responder_resources;
    int other_id;         /* nonzero: the event names an id nobody created here (not a request to a listener) */
    int delay_ms;         /* > 0: due that much later (a timer thread makes the fd readable) */
    const char *src;      /* a CONNECT_REQUEST: the peer's address (NULL: FKCM_ADDR1) */
} fkcm_event;

/* Back to the defaults: no script, no failure planned, no chaos, peer QP 0x77 and PSN 0x1234.
   Live ids and channels are kept (and still counted). */
void fkcm_reset(void);
/* The peer the default CONNECT_RESPONSE names and rdma_init_qp_attr connects to. */
void fkcm_set_peer(uint32_t qpn, uint32_t psn);
/* The PSN rdma_init_qp_attr gives for an id's own send queue (default 0x4321). */
void fkcm_set_local_psn(uint32_t psn);

/* The next successful call of fn (not yet answered by an earlier script) queues these n
   events (at most 8) instead of its default reply; n 0: nothing (a silent peer). Scripts for
   one function are used in order, one per call. */
void fkcm_on(enum fkcm_fn fn, const fkcm_event *ev, int n);
/* Queues ev on the channel whose fd is fd (sfv_cm_fd, sfv_cm_listener_fd), for its first id;
   a CONNECT_REQUEST makes a new id for the request on that channel, as the kernel does. */
void fkcm_push(int fd, const fkcm_event *ev);

/* Call nth (1: the next one) of fn from now fails: -1 with errno err (0: errno 0, a library
   that failed without saying why). every: that call and every later one. */
void fkcm_fail(enum fkcm_fn fn, int nth, int err, int every);
/* Every fallible call fails with probability permille/1000, errno one of a list (with_errno0:
   errno 0 among them); seeded. */
void fkcm_chaos(unsigned seed, int permille, int with_errno0);

/* What the library last sent: the private data of the last connect, accept or reject (NULL: none). */
const uint8_t *fkcm_sent(enum fkcm_fn fn, size_t *len);
/* Calls of fn that succeeded so far. */
long fkcm_calls(enum fkcm_fn fn);
/* Calls made to fail (fkcm_fail, fkcm_chaos) since fkcm_reset. */
long fkcm_failures(void);

/* Live ids, live channels, events read and not acked, events queued and not read. */
long fkcm_live_ids(void);
long fkcm_live_channels(void);
long fkcm_unacked(void);
long fkcm_queued(void);

#endif
