/* atomics.c - RDMA atomics: a shared counter and a spinlock in one process's memory, used by two.

   The server owns a small struct (a counter, a lock word, a plain "guarded" number) registered
   with SFV_ACCESS_REMOTE_ATOMIC, and its channels are made with REMOTE_ATOMIC in desc.access:
   both are needed before a peer's NIC may do atomics on it. It sends its endpoint and the
   struct's remote descriptor over TCP. Then the client, and the server itself through a loopback
   channel, do the same work at the same time, each ROUNDS times:
   - fetch-and-add 1 on the counter (sfv_channel_post_fetch_add, several in flight);
   - take the lock with compare-and-swap (0 -> its id, retried while someone else holds it),
     read the guarded number, add 1, write it back, release the lock (id -> 0).
   At the end the server checks that the counter and the guarded number both equal 2 * ROUNDS:
   no add and no update under the lock was lost. The server's CPU writes none of the words while
   the peers work: most NICs (rxe too) make atomics atomic only against other atomics.
   The words are plain uint64_t in the server's byte order; every old value comes back in the
   caller's own byte order (printed below as a plain number).

       build/atomics -d rxe0 [-p 18517]                    server
       build/atomics -d rxe1 [-p 18517] 127.0.0.1          client
       build/atomics -d rxe0 --loopback                    one process, one loopback channel

   Each side exits 0 only if everything it checked was right. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "tcp.h"

#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 500, IN_FLIGHT = 8 };

/* The server's memory: every word 8-byte aligned, as atomics want. */
struct shared {
    uint64_t counter;
    uint64_t lock;      /* 0: free; else the id of the holder */
    uint64_t guarded;   /* changed only by the lock's holder, with plain RDMA read and write */
};

/* A failed call says why: the last error names the work, its status and a hint (REMOTE_ATOMIC
   when the server's MR or channel does not allow atomics). */
static bool ok(sfv_result r, const char *what, const sfv_work_completion *wc) {
    if (r == SFV_OK) return true;
    fprintf(stderr, "atomics: %s: %s", what, sfv_last_error()->message);
    if (r == SFV_ERR_WORK && wc) fprintf(stderr, " (vendor error 0x%x)", (unsigned)wc->vendor_err);
    fprintf(stderr, "\n");
    return false;
}

static uint64_t load(const uint64_t *p) { return *(volatile const uint64_t *)p; }

/* One participant's work on the server's struct. `scratch` is 8 words of local memory in `mr`. */
static bool work(sfv_channel *ch, sfv_mr *mr, uint64_t *scratch, sfv_remote_mr region, uint64_t id) {
    sfv_remote_mr counter, lock, guarded;
    sfv_pending pending[IN_FLIGHT];
    sfv_work_completion wc;
    sfv_scatter_element old[IN_FLIGHT];
    sfv_scatter_element in = sfv_mr_scatter_element(mr, &scratch[IN_FLIGHT], 8);
    sfv_gather_element out = sfv_mr_gather_element(mr, &scratch[IN_FLIGHT], 8);
    uint64_t first = 0, spins = 0;
    int i;
    /* Narrow the struct to its words: each atomic touches the first 8 bytes of its region. */
    if (!ok(SFV_REMOTE_STRUCT_FIELD(region, struct shared, counter, &counter), "counter field", NULL) ||
        !ok(SFV_REMOTE_STRUCT_FIELD(region, struct shared, lock, &lock), "lock field", NULL) ||
        !ok(SFV_REMOTE_STRUCT_FIELD(region, struct shared, guarded, &guarded), "guarded field", NULL))
        return false;
    for (i = 0; i < IN_FLIGHT; i++) old[i] = sfv_mr_scatter_element(mr, &scratch[i], 8);

    /* The counter: up to IN_FLIGHT adds in flight (they share the read depth with RDMA reads). */
    for (i = 0; i < ROUNDS; i++) {
        if (i >= IN_FLIGHT && !ok(sfv_pending_wait(&pending[i % IN_FLIGHT], -1, &wc), "fetch-and-add", &wc)) return false;
        if (i == IN_FLIGHT) first = load(&scratch[0]); /* the value the first add saw */
        if (!ok(sfv_channel_post_fetch_add(ch, &old[i % IN_FLIGHT], counter, 1, &pending[i % IN_FLIGHT]), "post fetch-and-add", NULL))
            return false;
    }
    for (i = ROUNDS - IN_FLIGHT; i < ROUNDS; i++)
        if (!ok(sfv_pending_wait(&pending[i % IN_FLIGHT], -1, &wc), "fetch-and-add", &wc)) return false;
    printf("participant %llu: %d fetch-and-adds; the first saw the counter at %llu\n", (unsigned long long)id, ROUNDS,
           (unsigned long long)first);

    /* The spinlock. */
    for (i = 0; i < ROUNDS; i++) {
        for (;;) {
            if (!ok(sfv_channel_compare_swap(ch, &old[0], lock, 0, id, &wc), "take the lock", &wc)) return false;
            if (load(&scratch[0]) == 0) break; /* it was free, and now it is ours */
            spins++;
            sched_yield();
        }
        if (!ok(sfv_channel_read(ch, &in, 1, guarded, &wc), "read", &wc)) return false;
        scratch[IN_FLIGHT] = load(&scratch[IN_FLIGHT]) + 1;
        if (!ok(sfv_channel_write(ch, &out, 1, guarded, &wc), "write", &wc)) return false;
        if (!ok(sfv_channel_compare_swap(ch, &old[0], lock, id, 0, &wc), "release the lock", &wc)) return false;
        if (load(&scratch[0]) != id) {
            fprintf(stderr, "atomics: the lock was %llu, not ours (%llu), at release\n", (unsigned long long)load(&scratch[0]),
                    (unsigned long long)id);
            return false;
        }
    }
    printf("participant %llu: %d updates under the lock (%llu tries found it taken)\n", (unsigned long long)id, ROUNDS,
           (unsigned long long)spins);
    return true;
}

static bool check(const struct shared *s, uint64_t participants) {
    const uint64_t want = participants * ROUNDS;
    if (load(&s->counter) != want || load(&s->guarded) != want || load(&s->lock) != 0) {
        fprintf(stderr, "atomics: counter %llu, guarded %llu, lock %llu; want %llu, %llu, 0\n", (unsigned long long)load(&s->counter),
                (unsigned long long)load(&s->guarded), (unsigned long long)load(&s->lock), (unsigned long long)want,
                (unsigned long long)want);
        return false;
    }
    printf("counter %llu and guarded %llu: nothing lost between %llu participants\n", (unsigned long long)want,
           (unsigned long long)want, (unsigned long long)participants);
    return true;
}

static bool connect_self(sfv_channel *ch) {
    sfv_endpoint me;
    return ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL) && ok(sfv_channel_handshake(ch, &me), "sfv_channel_handshake", NULL);
}

static void usage(void) {
    fprintf(stderr, "usage: atomics [-d device] [-p port] [--loopback | server-host]\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option longs[] = {{"loopback", no_argument, NULL, 'L'}, {NULL, 0, NULL, 0}};
    static struct shared shared;
    static uint64_t scratch[IN_FLIGHT + 1];
    const char *device = NULL, *servername = NULL;
    int port = 18517, c, fd = -1;
    bool loopback = false, good = false;
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_mr *shared_mr = NULL, *scratch_mr = NULL;
    sfv_channel *ch = NULL, *self = NULL;
    sfv_channel_desc desc;
    uint8_t blob[SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_endpoint me, peer;
    sfv_remote_mr region;
    char verdict = 'F';
    while ((c = getopt_long(argc, argv, "d:p:", longs, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'L': loopback = true; break;
        default: usage();
        }
    }
    if (optind < argc) servername = argv[optind++];
    if (optind < argc || (loopback && servername)) usage();

    /* The owner's channels let peers do atomics (the default access leaves them out). */
    memset(&desc, 0, sizeof desc);
    desc.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC;
    if (!ok(sfv_open_device(device, &ctx), "sfv_open_device", NULL) || !ok(sfv_alloc_pd(ctx, &pd), "sfv_alloc_pd", NULL) ||
        !ok(sfv_reg_mr_local(pd, scratch, sizeof scratch, &scratch_mr), "sfv_reg_mr_local", NULL))
        goto out;
    if (servername) { /* the client: its memory is not a target */
        if (!ok(sfv_create_channel(pd, NULL, &ch), "sfv_create_channel", NULL)) goto out;
        if ((fd = tcp_connect(servername, port)) < 0) {
            fprintf(stderr, "atomics: could not connect to %s:%d\n", servername, port);
            goto out;
        }
        if (!ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL)) goto out;
        sfv_endpoint_encode(&me, blob);
        good = write_all(fd, blob, SFV_ENDPOINT_ENCODED_SIZE) && read_all(fd, blob, sizeof blob) &&
               ok(sfv_endpoint_decode(blob, SFV_ENDPOINT_ENCODED_SIZE, &peer), "sfv_endpoint_decode", NULL) &&
               ok(sfv_remote_mr_decode(blob + SFV_ENDPOINT_ENCODED_SIZE, SFV_REMOTE_MR_ENCODED_SIZE, &region), "sfv_remote_mr_decode", NULL) &&
               ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL) && write_all(fd, "G", 1) && /* go */
               work(ch, scratch_mr, scratch, region, 2);
        verdict = good ? 'D' : 'F';
        good = write_all(fd, &verdict, 1) && good;
        goto out;
    }
    /* The server (and loopback): the struct is the target of everyone's atomics. */
    if (!ok(sfv_reg_mr_access(pd, &shared, sizeof shared, desc.access, &shared_mr), "sfv_reg_mr_access", NULL) ||
        !ok(sfv_create_channel(pd, &desc, &self), "sfv_create_channel", NULL) || !connect_self(self))
        goto out;
    region = sfv_mr_remote(shared_mr);
    if (loopback) {
        good = work(self, scratch_mr, scratch, region, 1) && check(&shared, 1);
        goto out;
    }
    if (!ok(sfv_create_channel(pd, &desc, &ch), "sfv_create_channel", NULL)) goto out;
    if ((fd = tcp_accept(port)) < 0) {
        perror("atomics: accept");
        goto out;
    }
    if (!read_all(fd, blob, SFV_ENDPOINT_ENCODED_SIZE) || !ok(sfv_endpoint_decode(blob, SFV_ENDPOINT_ENCODED_SIZE, &peer), "sfv_endpoint_decode", NULL) ||
        !ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL) || !ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL))
        goto out;
    sfv_endpoint_encode(&me, blob);
    sfv_remote_mr_encode(region, blob + SFV_ENDPOINT_ENCODED_SIZE);
    if (!write_all(fd, blob, sizeof blob)) goto out;
    /* Once the client is connected, both work at once: this process through its loopback channel. */
    if (!read_all(fd, &verdict, 1) || verdict != 'G') goto out;
    good = work(self, scratch_mr, scratch, region, 1);
    if (!read_all(fd, &verdict, 1) || verdict != 'D') {
        fprintf(stderr, "atomics: the client reported a failure\n");
        good = false;
    }
    good = good && check(&shared, 2);
out:
    if (fd >= 0) close(fd);
    sfv_destroy_channel(ch);
    sfv_destroy_channel(self);
    sfv_dereg_mr(scratch_mr);
    sfv_dereg_mr(shared_mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return good ? 0 : 1;
}
