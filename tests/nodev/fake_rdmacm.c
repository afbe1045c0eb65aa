/* fake_rdmacm.c - a fake librdmacm for the device-free tests (see fake_rdmacm.h): the rdma_*
   functions safeverbs.h calls, with scripted events and failures, on the fake NIC of
   fake_verbs.c. Link it instead of -lrdmacm. */
#define _GNU_SOURCE
#include "fake_rdmacm.h"

#include <rdma/rdma_cma.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define FKCM_MAX_REPLY 8
#define FKCM_MAX_SCRIPT 64

typedef struct fkcm_ch fkcm_ch;
typedef struct fkcm_id {
    struct rdma_cm_id id;      /* first: the library's pointer is ours */
    struct fkcm_id *next;      /* every id, oldest first */
    fkcm_ch *ch;
    long unacked;              /* events read, counted against this id, not acked */
    bool reported;             /* a request's id is the caller's once its event was read */
    bool listening, disconnected;
    uint16_t port;             /* bound port, host order; 0: none */
    uint32_t peer_qpn;
} fkcm_id;

/* A queued event, not read yet. */
typedef struct fkcm_ev {
    struct fkcm_ev *next;
    struct rdma_cm_event ev;   /* id and listen_id set; private data below */
    fkcm_id *counts;           /* whose unacked count its read raises (NULL: a stranger's id) */
    uint8_t *priv;
    size_t priv_len;
    bool priv_null;            /* private_data NULL with priv_len */
    uint64_t due;              /* monotonic ns */
} fkcm_ev;

/* An event handed out by rdma_get_cm_event, until acked. */
typedef struct fkcm_read {
    struct rdma_cm_event ev;   /* first: the library's pointer is ours */
    struct fkcm_read *next;
    fkcm_id *counts;
} fkcm_read;

struct fkcm_ch {
    struct rdma_event_channel ec; /* first */
    fkcm_ch *next;
    fkcm_ev *q;
    bool signalled;            /* the eventfd holds a count */
};

typedef struct fkcm_script {
    int n;
    fkcm_event ev[FKCM_MAX_REPLY];
    uint8_t *priv[FKCM_MAX_REPLY];
} fkcm_script;

static pthread_mutex_t fkcm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fkcm_cv;
static bool fkcm_timer_up;
static fkcm_id *fkcm_ids;
static fkcm_ch *fkcm_chs;
static fkcm_read *fkcm_reads;
static long fkcm_nids, fkcm_nchs, fkcm_nunacked;
static struct rdma_cm_id fkcm_stranger; /* the id of an event for another id */
static struct ibv_device fkcm_dev[2];
static struct ibv_context fkcm_ctx[2];
static uint32_t fkcm_peer_qpn = 0x77, fkcm_peer_psn = 0x1234, fkcm_local_psn = 0x4321;
static uint16_t fkcm_next_port = 20000;
static fkcm_script fkcm_scripts[FKCM_FNS][FKCM_MAX_SCRIPT];
static int fkcm_script_first[FKCM_FNS], fkcm_script_n[FKCM_FNS];
static long fkcm_fail_at[FKCM_FNS], fkcm_fail_count[FKCM_FNS], fkcm_ok_calls[FKCM_FNS], fkcm_nfailed;
static int fkcm_fail_errno[FKCM_FNS];
static bool fkcm_fail_every[FKCM_FNS];
static unsigned fkcm_chaos_seed;
static int fkcm_chaos_permille;
static bool fkcm_chaos_errno0;
static uint8_t fkcm_sent_buf[FKCM_FNS][256];
static size_t fkcm_sent_len[FKCM_FNS];
static bool fkcm_sent_any[FKCM_FNS];

static void fkcm_bug(const char *what) {
    fprintf(stderr, "fake_rdmacm: %s\n", what);
    abort();
}

static uint64_t fkcm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- failures ------------------------------------------------------------------------------ */
void fkcm_fail(enum fkcm_fn fn, int nth, int err, int every) {
    pthread_mutex_lock(&fkcm_mu);
    fkcm_fail_at[fn] = nth;
    fkcm_fail_count[fn] = 0;
    fkcm_fail_errno[fn] = err;
    fkcm_fail_every[fn] = every != 0;
    pthread_mutex_unlock(&fkcm_mu);
}
void fkcm_chaos(unsigned seed, int permille, int with_errno0) {
    pthread_mutex_lock(&fkcm_mu);
    fkcm_chaos_seed = seed ? seed : 1;
    fkcm_chaos_permille = permille;
    fkcm_chaos_errno0 = with_errno0 != 0;
    pthread_mutex_unlock(&fkcm_mu);
}
/* Whether this call of fn fails; sets errno then. */
static bool fkcm_fails(enum fkcm_fn fn) {
    static const int errs[] = {EIO, EINVAL, ENOMEM, EAGAIN, ETIMEDOUT, ENODEV, EADDRNOTAVAIL, ECONNREFUSED, EHOSTUNREACH, EINTR, 0};
    if (fkcm_fail_at[fn]) {
        fkcm_fail_count[fn]++;
        if (fkcm_fail_count[fn] == fkcm_fail_at[fn] || (fkcm_fail_every[fn] && fkcm_fail_count[fn] > fkcm_fail_at[fn])) {
            errno = fkcm_fail_errno[fn];
            fkcm_nfailed++;
            return true;
        }
    }
    if (fkcm_chaos_permille && (int)(rand_r(&fkcm_chaos_seed) % 1000) < fkcm_chaos_permille) {
        errno = errs[rand_r(&fkcm_chaos_seed) % (sizeof errs / sizeof errs[0] - (fkcm_chaos_errno0 ? 0 : 1))];
        fkcm_nfailed++;
        return true;
    }
    return false;
}

void fkcm_reset(void) {
    int f;
    pthread_mutex_lock(&fkcm_mu);
    for (f = 0; f < FKCM_FNS; f++) {
        while (fkcm_script_n[f]) {
            fkcm_script *s = &fkcm_scripts[f][fkcm_script_first[f]];
            int k;
            for (k = 0; k < s->n; k++) free(s->priv[k]);
            fkcm_script_first[f] = (fkcm_script_first[f] + 1) % FKCM_MAX_SCRIPT;
            fkcm_script_n[f]--;
        }
        fkcm_fail_at[f] = fkcm_fail_count[f] = 0;
        fkcm_fail_every[f] = false;
        fkcm_sent_any[f] = false;
        fkcm_ok_calls[f] = 0;
    }
    fkcm_chaos_permille = 0;
    fkcm_nfailed = 0;
    fkcm_peer_qpn = 0x77;
    fkcm_peer_psn = 0x1234;
    fkcm_local_psn = 0x4321;
    pthread_mutex_unlock(&fkcm_mu);
}
void fkcm_set_peer(uint32_t qpn, uint32_t psn) {
    fkcm_peer_qpn = qpn;
    fkcm_peer_psn = psn;
}
void fkcm_set_local_psn(uint32_t psn) { fkcm_local_psn = psn; }

const uint8_t *fkcm_sent(enum fkcm_fn fn, size_t *len) {
    *len = fkcm_sent_any[fn] ? fkcm_sent_len[fn] : 0;
    return fkcm_sent_any[fn] ? fkcm_sent_buf[fn] : NULL;
}
static void fkcm_record(enum fkcm_fn fn, const void *p, size_t n) {
    fkcm_sent_any[fn] = true;
    fkcm_sent_len[fn] = n;
    if (n) memcpy(fkcm_sent_buf[fn], p, n);
}
long fkcm_calls(enum fkcm_fn fn) { return fkcm_ok_calls[fn]; }
long fkcm_failures(void) { return fkcm_nfailed; }
long fkcm_live_ids(void) {
    long n;
    pthread_mutex_lock(&fkcm_mu);
    n = fkcm_nids;
    pthread_mutex_unlock(&fkcm_mu);
    return n;
}
long fkcm_live_channels(void) { return fkcm_nchs; }
long fkcm_unacked(void) { return fkcm_nunacked; }
long fkcm_queued(void) {
    long n = 0;
    fkcm_ch *c;
    fkcm_ev *e;
    pthread_mutex_lock(&fkcm_mu);
    for (c = fkcm_chs; c; c = c->next)
        for (e = c->q; e; e = e->next) n++;
    pthread_mutex_unlock(&fkcm_mu);
    return n;
}

/* ---- channels and their fds ---------------------------------------------------------------- */
/* The eventfd is readable exactly while a due event is queued. */
static void fkcm_sync(fkcm_ch *c) {
    const uint64_t now = fkcm_now();
    bool ready = false;
    fkcm_ev *e;
    uint64_t v = 1;
    for (e = c->q; e && !ready; e = e->next) ready = e->due <= now;
    if (ready && !c->signalled) {
        if (write(c->ec.fd, &v, sizeof v) != (ssize_t)sizeof v) fkcm_bug("eventfd write");
        c->signalled = true;
    } else if (!ready && c->signalled) {
        if (read(c->ec.fd, &v, sizeof v) != (ssize_t)sizeof v) fkcm_bug("eventfd read");
        c->signalled = false;
    }
}

/* Delivers delayed events when they fall due: makes their channel's fd readable. */
static void *fkcm_timer(void *arg) {
    (void)arg;
    pthread_mutex_lock(&fkcm_mu);
    for (;;) {
        const uint64_t now = fkcm_now();
        uint64_t next = 0;
        fkcm_ch *c;
        fkcm_ev *e;
        for (c = fkcm_chs; c; c = c->next) {
            fkcm_sync(c);
            for (e = c->q; e; e = e->next)
                if (e->due > now && (!next || e->due < next)) next = e->due;
        }
        if (!next) {
            pthread_cond_wait(&fkcm_cv, &fkcm_mu);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)(next / 1000000000u);
            ts.tv_nsec = (long)(next % 1000000000u);
            pthread_cond_timedwait(&fkcm_cv, &fkcm_mu, &ts);
        }
    }
    return NULL;
}
static void fkcm_timer_kick(void) {
    if (!fkcm_timer_up) {
        pthread_condattr_t a;
        pthread_t t;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&fkcm_cv, &a);
        pthread_condattr_destroy(&a);
        if (pthread_create(&t, NULL, fkcm_timer, NULL) != 0) fkcm_bug("pthread_create");
        pthread_detach(t);
        fkcm_timer_up = true;
    }
    pthread_cond_signal(&fkcm_cv);
}

static fkcm_ch *fkcm_ch_of_fd(int fd) {
    fkcm_ch *c;
    for (c = fkcm_chs; c; c = c->next)
        if (c->ec.fd == fd) return c;
    return NULL;
}

struct rdma_event_channel *rdma_create_event_channel(void) {
    fkcm_ch *c;
    pthread_mutex_lock(&fkcm_mu);
    if (fkcm_fails(FKCM_CREATE_EVENT_CHANNEL)) {
        pthread_mutex_unlock(&fkcm_mu);
        return NULL;
    }
    c = (fkcm_ch *)calloc(1, sizeof *c);
    if (!c) fkcm_bug("calloc");
    c->ec.fd = eventfd(0, EFD_CLOEXEC); /* blocking, as librdmacm's: the library must make it non-blocking */
    if (c->ec.fd < 0) fkcm_bug("eventfd");
    c->next = fkcm_chs;
    fkcm_chs = c;
    fkcm_nchs++;
    fkcm_ok_calls[FKCM_CREATE_EVENT_CHANNEL]++;
    pthread_mutex_unlock(&fkcm_mu);
    return &c->ec;
}

static void fkcm_ev_free(fkcm_ev *e) {
    free(e->priv);
    free(e);
}
static void fkcm_id_free(fkcm_id *d);
static void fkcm_reply(enum fkcm_fn fn, fkcm_id *d, const fkcm_event *def);

/* Drops the queued events of c that match (id NULL: all); a dropped request takes its id along. */
static void fkcm_drop(fkcm_ch *c, const fkcm_id *id) {
    fkcm_ev **pp = &c->q;
    while (*pp) {
        fkcm_ev *e = *pp;
        if (id && (fkcm_id *)(void *)e->ev.id != id && e->counts != id) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        if (e->ev.listen_id) fkcm_id_free((fkcm_id *)(void *)e->ev.id); /* a request's own id, never reported */
        fkcm_ev_free(e);
    }
    fkcm_sync(c);
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel) {
    fkcm_ch *c = (fkcm_ch *)(void *)channel, **pp;
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    for (pp = &fkcm_chs; *pp && *pp != c; pp = &(*pp)->next) {}
    if (!*pp) fkcm_bug("rdma_destroy_event_channel of a channel that is not live");
    for (d = fkcm_ids; d; d = d->next)
        if (d->ch == c && d->reported) fkcm_bug("rdma_destroy_event_channel with ids still on it (they would point to freed memory)");
    fkcm_drop(c, NULL);
    *pp = c->next;
    close(c->ec.fd);
    free(c);
    fkcm_nchs--;
    pthread_mutex_unlock(&fkcm_mu);
}

/* ---- ids ----------------------------------------------------------------------------------- */
static fkcm_id *fkcm_id_new(fkcm_ch *c, void *context, bool reported) {
    fkcm_id *d = (fkcm_id *)calloc(1, sizeof *d), **pp;
    if (!d) fkcm_bug("calloc");
    d->id.channel = &c->ec;
    d->id.context = context;
    d->id.ps = RDMA_PS_TCP;
    d->id.qp_type = IBV_QPT_RC;
    d->ch = c;
    d->reported = reported;
    for (pp = &fkcm_ids; *pp; pp = &(*pp)->next) {}
    *pp = d;
    fkcm_nids++;
    return d;
}
static void fkcm_id_free(fkcm_id *d) {
    fkcm_id **pp;
    for (pp = &fkcm_ids; *pp && *pp != d; pp = &(*pp)->next) {}
    if (!*pp) fkcm_bug("an id that is not live");
    *pp = d->next;
    free(d);
    fkcm_nids--;
}
static fkcm_id *fkcm_live(struct rdma_cm_id *id, const char *fn) {
    fkcm_id *d;
    for (d = fkcm_ids; d; d = d->next)
        if (&d->id == id) return d;
    fprintf(stderr, "fake_rdmacm: %s of an id that is not live\n", fn);
    abort();
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context, enum rdma_port_space ps) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    *id = NULL;
    if (fkcm_fails(FKCM_CREATE_ID)) {
        pthread_mutex_unlock(&fkcm_mu);
        return -1;
    }
    if (!channel || ps != RDMA_PS_TCP) fkcm_bug("rdma_create_id: no channel, or not RDMA_PS_TCP");
    d = fkcm_id_new((fkcm_ch *)(void *)channel, context, true);
    *id = &d->id;
    fkcm_ok_calls[FKCM_CREATE_ID]++;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id) {
    fkcm_id *d;
    fkcm_read *r;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_destroy_id");
    if (d->unacked) fkcm_bug("rdma_destroy_id with events read and not acked (librdmacm waits for the acks forever)");
    for (r = fkcm_reads; r; r = r->next)
        if (r->ev.id == id && !r->ev.listen_id) fkcm_bug("rdma_destroy_id with an event of it not acked");
    fkcm_drop(d->ch, d);
    fkcm_id_free(d);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
}

/* 0: the address's device (NULL: none), -1: no interface has it. */
static int fkcm_device_of(const struct sockaddr *sa, struct ibv_context **verbs) {
    char text[INET6_ADDRSTRLEN] = "";
    *verbs = NULL;
    if (!fkcm_dev[0].name[0]) {
        int i;
        for (i = 0; i < 2; i++) {
            snprintf(fkcm_dev[i].name, sizeof fkcm_dev[i].name, "fake%d", i);
            fkcm_ctx[i].device = &fkcm_dev[i];
        }
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
        if (s->sin_addr.s_addr == htonl(INADDR_ANY)) return 0;
        inet_ntop(AF_INET, &s->sin_addr, text, sizeof text);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)sa;
        static const struct in6_addr any = IN6ADDR_ANY_INIT;
        if (memcmp(&s->sin6_addr, &any, sizeof any) == 0) return 0;
        return -1;
    } else {
        return -1;
    }
    if (strcmp(text, FKCM_ADDR0) == 0) *verbs = &fkcm_ctx[0];
    else if (strcmp(text, FKCM_ADDR1) == 0) *verbs = &fkcm_ctx[1];
    else if (strcmp(text, FKCM_ADDR_NORDMA) != 0) return -1;
    return 0;
}
static uint16_t fkcm_port_of(const struct sockaddr *sa) {
    return ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)(const void *)sa)->sin_port
                                          : ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
}
static size_t fkcm_sa_len(const struct sockaddr *sa) {
    return sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr) {
    fkcm_id *d, *o;
    struct ibv_context *verbs;
    uint16_t port;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_bind_addr");
    if (fkcm_fails(FKCM_BIND_ADDR)) goto fail;
    if (d->port || fkcm_device_of(addr, &verbs) != 0) {
        errno = d->port ? EINVAL : EADDRNOTAVAIL;
        goto fail;
    }
    port = fkcm_port_of(addr);
    for (o = fkcm_ids; o && port; o = o->next)
        if (o->port == port) {
            errno = EADDRINUSE;
            goto fail;
        }
    if (!port) port = fkcm_next_port++;
    d->port = port;
    d->id.verbs = verbs;
    d->id.port_num = verbs ? 1 : 0;
    memcpy(&d->id.route.addr.src_storage, addr, fkcm_sa_len(addr));
    fkcm_ok_calls[FKCM_BIND_ADDR]++;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

__be16 rdma_get_src_port(struct rdma_cm_id *id) {
    fkcm_id *d;
    uint16_t p;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_get_src_port");
    p = d->port;
    pthread_mutex_unlock(&fkcm_mu);
    return htons(p);
}

int rdma_listen(struct rdma_cm_id *id, int backlog) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_listen");
    if (fkcm_fails(FKCM_LISTEN)) goto fail;
    if (!d->port || backlog <= 0) {
        errno = EINVAL;
        goto fail;
    }
    d->listening = true;
    fkcm_reply(FKCM_LISTEN, d, NULL); /* nothing, unless scripted: requests to the new listener */
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

/* ---- events -------------------------------------------------------------------------------- */
/* Queues e on c for d (a listener's CONNECT_REQUEST: for a new id of the request). */
static void fkcm_queue(fkcm_ch *c, fkcm_id *d, const fkcm_event *e) {
    fkcm_ev *q = (fkcm_ev *)calloc(1, sizeof *q), **pp;
    if (!q) fkcm_bug("calloc");
    if (e->priv_len > 255) fkcm_bug("private data over 255 bytes");
    q->ev.event = (enum rdma_cm_event_type)e->type;
    q->ev.status = e->status;
    q->ev.param.conn.qp_num = e->qpn;
    q->ev.param.conn.initiator_depth = e->initiator_depth;
    q->ev.param.conn.responder_resources = e->responder_resources;
    q->ev.param.conn.private_data_len = (uint8_t)e->priv_len;
    q->priv_len = e->priv_len;
    q->priv_null = !e->priv && e->priv_len;
    if (e->priv && e->priv_len) {
        q->priv = (uint8_t *)malloc(e->priv_len);
        if (!q->priv) fkcm_bug("malloc");
        memcpy(q->priv, e->priv, e->priv_len);
    }
    q->due = fkcm_now() + (e->delay_ms > 0 ? (uint64_t)e->delay_ms * 1000000u : 0);
    if (e->type == RDMA_CM_EVENT_CONNECT_REQUEST && d && d->listening) { /* always a fresh id: other_id means nothing here */
        fkcm_id *n = fkcm_id_new(c, d->id.context, false);
        struct sockaddr_in *dst = &n->id.route.addr.dst_sin;
        n->id.verbs = d->id.verbs ? d->id.verbs : &fkcm_ctx[0];
        n->id.port_num = 1;
        n->peer_qpn = e->qpn;
        n->id.route.addr.src_storage = d->id.route.addr.src_storage;
        dst->sin_family = AF_INET;
        dst->sin_port = htons(40000);
        inet_pton(AF_INET, e->src ? e->src : FKCM_ADDR1, &dst->sin_addr);
        q->ev.id = &n->id;
        q->ev.listen_id = &d->id;
        q->counts = d;
    } else if (e->other_id || !d) {
        q->ev.id = &fkcm_stranger;
    } else {
        q->ev.id = &d->id;
        q->counts = d;
        if (e->type == RDMA_CM_EVENT_DISCONNECTED) d->disconnected = true;
    }
    for (pp = &c->q; *pp; pp = &(*pp)->next) {}
    *pp = q;
    fkcm_sync(c);
    if (e->delay_ms > 0) fkcm_timer_kick();
}

void fkcm_push(int fd, const fkcm_event *ev) {
    fkcm_ch *c;
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    c = fkcm_ch_of_fd(fd);
    if (!c) fkcm_bug("fkcm_push: no channel has that fd");
    for (d = fkcm_ids; d && !(d->ch == c && d->reported); d = d->next) {}
    fkcm_queue(c, d, ev);
    pthread_mutex_unlock(&fkcm_mu);
}

void fkcm_on(enum fkcm_fn fn, const fkcm_event *ev, int n) {
    fkcm_script *s;
    int k;
    pthread_mutex_lock(&fkcm_mu);
    if (fkcm_script_n[fn] == FKCM_MAX_SCRIPT || n > FKCM_MAX_REPLY) fkcm_bug("fkcm_on: script too long");
    s = &fkcm_scripts[fn][(fkcm_script_first[fn] + fkcm_script_n[fn]++) % FKCM_MAX_SCRIPT];
    s->n = n;
    for (k = 0; k < n; k++) {
        s->ev[k] = ev[k];
        s->priv[k] = NULL;
        if (ev[k].priv && ev[k].priv_len) {
            s->priv[k] = (uint8_t *)malloc(ev[k].priv_len);
            if (!s->priv[k]) fkcm_bug("malloc");
            memcpy(s->priv[k], ev[k].priv, ev[k].priv_len);
            s->ev[k].priv = s->priv[k];
        }
    }
    pthread_mutex_unlock(&fkcm_mu);
}

/* What the peer and the CM answer to a successful call of fn on d: the script's next, else def
   (type < 0: nothing). */
static void fkcm_reply(enum fkcm_fn fn, fkcm_id *d, const fkcm_event *def) {
    fkcm_ok_calls[fn]++;
    if (fkcm_script_n[fn]) {
        fkcm_script *s = &fkcm_scripts[fn][fkcm_script_first[fn]];
        int k;
        fkcm_script_first[fn] = (fkcm_script_first[fn] + 1) % FKCM_MAX_SCRIPT;
        fkcm_script_n[fn]--;
        for (k = 0; k < s->n; k++) {
            fkcm_queue(d->ch, d, &s->ev[k]);
            free(s->priv[k]);
        }
        return;
    }
    if (def && def->type >= 0) fkcm_queue(d->ch, d, def);
}
static void fkcm_reply_type(enum fkcm_fn fn, fkcm_id *d, int type) {
    fkcm_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    fkcm_reply(fn, d, &e);
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event) {
    fkcm_ch *c = (fkcm_ch *)(void *)channel;
    const uint64_t now = fkcm_now();
    fkcm_ev **pp;
    fkcm_read *r;
    pthread_mutex_lock(&fkcm_mu);
    if (!fkcm_ch_of_fd(channel->fd) || fkcm_ch_of_fd(channel->fd) != c) fkcm_bug("rdma_get_cm_event on a channel that is not live");
    if (fkcm_fails(FKCM_GET_CM_EVENT)) goto fail;
    for (pp = &c->q; *pp && (*pp)->due > now; pp = &(*pp)->next) {}
    if (!*pp) {
        if (!(fcntl(c->ec.fd, F_GETFL) & O_NONBLOCK)) fkcm_bug("rdma_get_cm_event on an empty blocking channel (it would block forever)");
        errno = EAGAIN;
        goto fail;
    }
    {
        fkcm_ev *q = *pp;
        *pp = q->next;
        r = (fkcm_read *)malloc(sizeof *r);
        if (!r) fkcm_bug("malloc");
        r->ev = q->ev;
        r->counts = q->counts;
        r->ev.param.conn.private_data = NULL;
        if (q->priv) {
            uint8_t *p = (uint8_t *)malloc(q->priv_len); /* exactly its length: ASan sees a read past it */
            if (!p) fkcm_bug("malloc");
            memcpy(p, q->priv, q->priv_len);
            r->ev.param.conn.private_data = p;
        }
        if (q->ev.listen_id) ((fkcm_id *)(void *)q->ev.id)->reported = true;
        /* the answer's QP is the one rdma_init_qp_attr connects to, once the answer is read */
        if (q->ev.event == RDMA_CM_EVENT_CONNECT_RESPONSE && q->counts) q->counts->peer_qpn = q->ev.param.conn.qp_num;
        fkcm_ev_free(q);
    }
    if (r->counts) r->counts->unacked++;
    fkcm_nunacked++;
    r->next = fkcm_reads;
    fkcm_reads = r;
    fkcm_sync(c);
    *event = &r->ev;
    fkcm_ok_calls[FKCM_GET_CM_EVENT]++;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_ack_cm_event(struct rdma_cm_event *event) {
    fkcm_read **pp;
    pthread_mutex_lock(&fkcm_mu);
    for (pp = &fkcm_reads; *pp && &(*pp)->ev != event; pp = &(*pp)->next) {}
    if (!*pp) fkcm_bug("rdma_ack_cm_event of an event that is not outstanding (acked twice?)");
    {
        fkcm_read *r = *pp;
        *pp = r->next;
        if (r->counts) r->counts->unacked--;
        fkcm_nunacked--;
        free((void *)(uintptr_t)r->ev.param.conn.private_data);
        free(r);
    }
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event) {
    static const char *const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
        "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE", "RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
        "RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
    return (unsigned)event < sizeof names / sizeof names[0] ? names[event] : "UNKNOWN EVENT";
}

/* ---- connecting ---------------------------------------------------------------------------- */
int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr, int timeout_ms) {
    fkcm_id *d;
    struct ibv_context *verbs = NULL;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_resolve_addr");
    if (fkcm_fails(FKCM_RESOLVE_ADDR)) goto fail;
    if (!dst_addr || timeout_ms <= 0 || (src_addr && fkcm_device_of(src_addr, &verbs) != 0)) {
        errno = !dst_addr || timeout_ms <= 0 ? EINVAL : EADDRNOTAVAIL;
        goto fail;
    }
    if (!src_addr || !verbs) (void)fkcm_device_of(dst_addr, &verbs);
    d->id.verbs = verbs ? verbs : &fkcm_ctx[0];
    d->id.port_num = 1;
    memcpy(&d->id.route.addr.dst_storage, dst_addr, fkcm_sa_len(dst_addr));
    fkcm_reply_type(FKCM_RESOLVE_ADDR, d, RDMA_CM_EVENT_ADDR_RESOLVED);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_resolve_route");
    if (fkcm_fails(FKCM_RESOLVE_ROUTE)) goto fail;
    if (timeout_ms <= 0 || !d->id.verbs) {
        errno = EINVAL;
        goto fail;
    }
    fkcm_reply_type(FKCM_RESOLVE_ROUTE, d, RDMA_CM_EVENT_ROUTE_RESOLVED);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

/* The kernel copies private data from the caller: more than the message holds is EINVAL, a
   NULL pointer with a length EFAULT. */
static int fkcm_check_priv(const void *p, size_t n, size_t max) {
    if (n > max) return EINVAL;
    if (n && !p) return EFAULT;
    return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param) {
    static const uint8_t sc[4] = {'S', 'C', 1, 4};
    fkcm_id *d;
    fkcm_event e;
    int err;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_connect");
    if (fkcm_fails(FKCM_CONNECT)) goto fail;
    if (!conn_param || (err = fkcm_check_priv(conn_param->private_data, conn_param->private_data_len, 56)) != 0 || !d->id.verbs) {
        errno = conn_param && d->id.verbs ? err : EINVAL;
        goto fail;
    }
    fkcm_record(FKCM_CONNECT, conn_param->private_data, conn_param->private_data_len);
    memset(&e, 0, sizeof e);
    e.type = RDMA_CM_EVENT_CONNECT_RESPONSE;
    e.qpn = fkcm_peer_qpn;
    e.priv = sc;
    e.priv_len = sizeof sc;
    e.initiator_depth = e.responder_resources = 4;
    fkcm_reply(FKCM_CONNECT, d, &e);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param) {
    fkcm_id *d;
    int err;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_accept");
    if (fkcm_fails(FKCM_ACCEPT)) goto fail;
    if (!conn_param || (err = fkcm_check_priv(conn_param->private_data, conn_param->private_data_len, 196)) != 0) {
        errno = conn_param ? err : EINVAL;
        goto fail;
    }
    fkcm_record(FKCM_ACCEPT, conn_param->private_data, conn_param->private_data_len);
    fkcm_reply_type(FKCM_ACCEPT, d, RDMA_CM_EVENT_ESTABLISHED);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len) {
    fkcm_id *d;
    int err;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_reject");
    if (fkcm_fails(FKCM_REJECT)) goto fail;
    if ((err = fkcm_check_priv(private_data, private_data_len, 148)) != 0) {
        errno = err;
        goto fail;
    }
    fkcm_record(FKCM_REJECT, private_data, private_data_len);
    fkcm_reply_type(FKCM_REJECT, d, -1);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_establish(struct rdma_cm_id *id) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_establish");
    if (fkcm_fails(FKCM_ESTABLISH)) goto fail;
    fkcm_reply_type(FKCM_ESTABLISH, d, RDMA_CM_EVENT_ESTABLISHED);
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_disconnect(struct rdma_cm_id *id) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_disconnect");
    if (fkcm_fails(FKCM_DISCONNECT)) goto fail;
    fkcm_reply_type(FKCM_DISCONNECT, d, d->disconnected ? -1 : RDMA_CM_EVENT_DISCONNECTED);
    d->disconnected = true;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel) {
    fkcm_id *d;
    fkcm_ch *to = (fkcm_ch *)(void *)channel, *from;
    fkcm_ev **pp, **tail;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_migrate_id");
    if (fkcm_fails(FKCM_MIGRATE_ID)) goto fail;
    if (!channel) {
        errno = EINVAL;
        goto fail;
    }
    if (d->unacked) fkcm_bug("rdma_migrate_id with events read and not acked (librdmacm waits for the acks forever)");
    from = d->ch;
    /* its queued events go along, in order, as the kernel moves them */
    for (tail = &to->q; *tail; tail = &(*tail)->next) {}
    for (pp = &from->q; *pp;) {
        fkcm_ev *e = *pp;
        if ((fkcm_id *)(void *)e->ev.id == d && !e->ev.listen_id) {
            *pp = e->next;
            e->next = NULL;
            *tail = e;
            tail = &e->next;
        } else {
            pp = &e->next;
        }
    }
    d->ch = to;
    d->id.channel = channel;
    fkcm_sync(from);
    fkcm_sync(to);
    fkcm_ok_calls[FKCM_MIGRATE_ID]++;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask) {
    fkcm_id *d;
    pthread_mutex_lock(&fkcm_mu);
    d = fkcm_live(id, "rdma_init_qp_attr");
    if (fkcm_fails(FKCM_INIT_QP_ATTR)) goto fail;
    if (qp_attr->qp_state == IBV_QPS_RTR) {
        qp_attr->path_mtu = IBV_MTU_1024;
        qp_attr->dest_qp_num = d->peer_qpn;
        qp_attr->rq_psn = fkcm_peer_psn;
        qp_attr->max_dest_rd_atomic = 4;
        qp_attr->min_rnr_timer = 12;
        memset(&qp_attr->ah_attr, 0, sizeof qp_attr->ah_attr);
        qp_attr->ah_attr.port_num = 1;
        qp_attr->ah_attr.is_global = 1;
        qp_attr->ah_attr.grh.sgid_index = 1;
        qp_attr->ah_attr.grh.hop_limit = 64;
        qp_attr->ah_attr.grh.dgid.raw[10] = qp_attr->ah_attr.grh.dgid.raw[11] = 0xff;
        qp_attr->ah_attr.grh.dgid.raw[12] = 10;
        qp_attr->ah_attr.grh.dgid.raw[15] = 2;
        *qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                        IBV_QP_MIN_RNR_TIMER;
    } else if (qp_attr->qp_state == IBV_QPS_RTS) {
        qp_attr->sq_psn = fkcm_local_psn;
        qp_attr->timeout = 14;
        qp_attr->retry_cnt = 7;
        qp_attr->rnr_retry = 7;
        qp_attr->max_rd_atomic = 4;
        *qp_attr_mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    } else {
        errno = EINVAL;
        goto fail;
    }
    fkcm_ok_calls[FKCM_INIT_QP_ATTR]++;
    pthread_mutex_unlock(&fkcm_mu);
    return 0;
fail:
    pthread_mutex_unlock(&fkcm_mu);
    return -1;
}
