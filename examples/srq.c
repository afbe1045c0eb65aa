/* srq.c - a shared receive queue: one server, many clients, one pool of receives.

   A server that talks to many clients would otherwise post receives on every client's channel,
   most of them idle. With an SRQ it posts one pool of receives, and whichever client sends
   takes the next one; each completion says which channel (so which client) it came in on.
   Here, in one process: the server's channels on device -s (default rxe0) are created on one
   SRQ (sfv_channel_desc.srq), CLIENTS client channels on device -c (default rxe1) connect to
   them, and each client sends ROUNDS requests, at uneven rates. The server keeps RECEIVES
   receives posted (re-posting each as it is consumed), sets a low-water limit and reports the
   SRQ_LIMIT_REACHED event if the pool runs low, and at the end checks that every request came
   in once, on its own client's channel.

       build/srq [-s rxe0] [-c rxe1]

   Exits 0 only if every request arrived once, on the right channel. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENTS 4
#define ROUNDS 25
#define RECEIVES 8
#define MSG 32

#define TRY(call)                                                                              \
    do {                                                                                       \
        sfv_result r_ = (call);                                                                \
        if (r_ != SFV_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, sfv_last_error()->message); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv) {
    const char *sdev = "rxe0", *cdev = "rxe1";
    static char sbuf[RECEIVES * MSG], cbuf[CLIENTS * MSG];
    sfv_context *sctx, *cctx;
    sfv_pd *spd, *cpd;
    sfv_mr *smr, *cmr;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel_desc d;
    sfv_channel *server[CLIENTS], *client[CLIENTS];
    sfv_pending rx[RECEIVES];
    sfv_scatter_element slot[RECEIVES];
    int got[CLIENTS][ROUNDS], sent[CLIENTS], total = 0, turn, c, opt, k, bad = 0;
    size_t i;
    while ((opt = getopt(argc, argv, "s:c:")) != -1) {
        if (opt == 's') sdev = optarg;
        else if (opt == 'c') cdev = optarg;
        else {
            fprintf(stderr, "usage: %s [-s server device] [-c client device]\n", argv[0]);
            return 2;
        }
    }
    TRY(sfv_open_device(sdev, &sctx));
    TRY(sfv_open_device(cdev, &cctx));
    TRY(sfv_alloc_pd(sctx, &spd));
    TRY(sfv_alloc_pd(cctx, &cpd));
    TRY(sfv_reg_mr_local(spd, sbuf, sizeof sbuf, &smr));
    TRY(sfv_reg_mr_local(cpd, cbuf, sizeof cbuf, &cmr));

    /* the pool: RECEIVES receives kept posted, an event when fewer than 2 are left. Places free
       in posting order (a receive taken before an older one keeps its place until the older is
       taken too), so the SRQ has room for twice what is kept posted. */
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 2 * RECEIVES;
    sd.limit = 2;
    TRY(sfv_create_srq(spd, &sd, &srq));
    memset(&d, 0, sizeof d);
    for (c = 0; c < CLIENTS; c++) {
        sfv_endpoint es, ec;
        d.srq = srq; /* the server's channels take their receives from the pool */
        TRY(sfv_create_channel(spd, &d, &server[c]));
        d.srq = NULL;
        TRY(sfv_create_channel(cpd, &d, &client[c]));
        TRY(sfv_channel_endpoint(server[c], &es));
        TRY(sfv_channel_endpoint(client[c], &ec));
        TRY(sfv_channel_handshake(server[c], &ec));
        TRY(sfv_channel_handshake(client[c], &es));
    }
    TRY(sfv_destroy_srq(srq)); /* the channels hold it now; it goes with the last of them */
    for (i = 0; i < RECEIVES; i++) {
        slot[i] = sfv_mr_scatter_element(smr, sbuf + i * MSG, MSG);
        TRY(sfv_srq_post_receive(srq, &slot[i], 1, &rx[i]));
    }

    memset(got, 0, sizeof got);
    memset(sent, 0, sizeof sent);
    for (turn = 0; total < CLIENTS * ROUNDS; turn++) {
        /* every client with requests left sends one, client c only every (c + 1)th turn */
        for (c = 0; c < CLIENTS; c++) {
            sfv_gather_element g = sfv_mr_gather_element(cmr, cbuf + c * MSG, MSG);
            if (sent[c] == ROUNDS || turn % (c + 1)) continue;
            snprintf(cbuf + c * MSG, MSG, "client %d request %d", c, sent[c]++);
            TRY(sfv_channel_send(client[c], &g, 1, NULL));
        }
        /* the server takes what came in: each receive says its channel, and is posted again */
        for (i = 0; i < RECEIVES; i++) {
            sfv_work_completion wc;
            int who = -1, from, req;
            sfv_result r = sfv_pending_poll(&rx[i], &wc);
            if (r == SFV_NOT_DONE) continue;
            TRY(r);
            for (c = 0; c < CLIENTS; c++)
                if (wc.channel == server[c]) who = c;
            if (sscanf(sbuf + i * MSG, "client %d request %d", &from, &req) != 2 || from != who || req < 0 ||
                req >= ROUNDS || got[from][req]++) {
                fprintf(stderr, "wrong request \"%s\" on channel %d\n", sbuf + i * MSG, who);
                bad = 1;
            }
            total++;
            TRY(sfv_srq_post_receive(srq, &slot[i], 1, &rx[i]));
        }
        {
            sfv_event ev[4];
            size_t n, e;
            TRY(sfv_context_events(sctx, ev, 4, &n));
            for (e = 0; e < n; e++)
                printf("event %s%s\n", sfv_event_type_str(ev[e].type), ev[e].srq == srq ? " (our SRQ is running low)" : "");
        }
    }
    for (c = 0; c < CLIENTS; c++)
        for (k = 0; k < ROUNDS; k++)
            if (got[c][k] != 1) bad = 1;
    printf("%d requests from %d clients through one SRQ of %d receives: %s\n", total, CLIENTS, RECEIVES,
           bad ? "WRONG" : "each once, on its client's channel");
    for (c = 0; c < CLIENTS; c++) {
        TRY(sfv_destroy_channel(server[c])); /* the last one takes the SRQ, and its posted receives */
        TRY(sfv_destroy_channel(client[c]));
    }
    TRY(sfv_dereg_mr(smr));
    TRY(sfv_dereg_mr(cmr));
    TRY(sfv_dealloc_pd(spd));
    TRY(sfv_dealloc_pd(cpd));
    TRY(sfv_close_device(sctx));
    TRY(sfv_close_device(cctx));
    return bad;
}
