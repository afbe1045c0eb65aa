/* fuzz_ex_conn_step.c (hostile-review harness): the listener's per-connection state machine (sfv__ex_conn_step)
   fed a stranger's byte stream through a socketpair, in fuzz-chosen chunks, so frames split at
   any point, a hang-up at any point, and (flag) a correctly signed proof after a fuzzed hello.
   Input: byte0 world n (2..9), byte1 rank (1..n-1), byte2 seen bits, byte3 flags
   (bit0: replace the second frame by the right proof, bit1: hang up at the end), then
   [len byte, len bytes]... chunks. */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"
#include <sys/socket.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sfv__ex x;
    sfv__ex_conn c;
    sfv__ex_frame h;
    bool seen[16];
    uint8_t stream[4096];
    size_t sl = 0, fed = 0, i;
    int sv[2], st = 0, flags;
    char why[64];
    if (size < 4) return 0;
    memset(&x, 0, sizeof x);
    x.n = 2 + data[0] % 8u;
    x.rank = 1 + data[1] % (x.n - 1);
    for (i = 0; i < 16; i++) seen[i] = (data[2] >> (i % 8)) & 1;
    seen[x.rank] = true;
    x.seen = seen;
    x.key.bytes = (const uint8_t *)"k";
    x.key.len = 1;
    x.key.proof_ms = 1000;
    flags = data[3];
    data += 4, size -= 4;
    /* the stream: chunks */
    while (size && sl < sizeof stream) {
        size_t l = data[0] % 97u;
        data++, size--;
        if (l > size) l = size;
        if (l > sizeof stream - sl) l = sizeof stream - sl;
        memcpy(stream + sl, data, l);
        data += l, size -= l;
        sl += l;
        stream[sl < sizeof stream ? sl : sizeof stream - 1] = stream[sl < sizeof stream ? sl : sizeof stream - 1]; /* no-op */
        if (sl < sizeof stream) { /* mark a chunk boundary: remember by pushing a sentinel length */ }
    }
    FZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    memset(&c, 0, sizeof c);
    c.fd = sv[0];
    memset(&h, 0, sizeof h);
    h.type = SFV__EX_HELLO;
    h.rank = (uint32_t)x.rank;
    h.world = (uint32_t)x.n;
    memset(h.body, 0x42, sizeof h.body);
    sfv__ex_encode(&h, c.out);
    c.out_len = SFV__EX_FRAME;
    /* feed in pieces of 1..17 bytes (derived from the stream itself), stepping after each */
    while (fed < sl && st == 0) {
        size_t piece = 1 + stream[fed] % 17u;
        if (piece > sl - fed) piece = sl - fed;
        if ((flags & 1) && fed < 48 && fed + piece > 48) piece = 48 - fed; /* the proof is made after the hello is in */
        if ((flags & 1) && fed >= 48 && fed < 96 && c.out_len == 2 * SFV__EX_FRAME) {
            /* the right proof over the hello it sent and ours */
            sfv__ex_frame p;
            memset(&p, 0, sizeof p);
            p.type = SFV__EX_PROOF;
            sfv__ex_mac(&x.key, 'C', c.in, c.out, NULL, 0, p.body);
            sfv__ex_encode(&p, stream + 48);
        }
        FZ_CHECK(send(sv[1], stream + fed, piece, MSG_NOSIGNAL) == (ssize_t)piece);
        fed += piece;
        { char drain[256]; while (recv(sv[1], drain, sizeof drain, 0) > 0) {} }
        st = sfv__ex_conn_step(&x, &c, why, sizeof why);
        FZ_CHECK(c.got <= 2 * SFV__EX_FRAME && c.sent <= c.out_len && c.out_len <= 2 * SFV__EX_FRAME);
    }
    if (st == 0 && (flags & 2)) {
        close(sv[1]);
        sv[1] = -1;
        st = sfv__ex_conn_step(&x, &c, why, sizeof why);
        FZ_CHECK(st == -1 || (c.got == 2 * SFV__EX_FRAME));
    }
    if (st < 0) FZ_CHECK(why[0] != '\0');
    if (getenv("FZ_VERBOSE")) fprintf(stderr, "st=%d got=%zu why=%s\n", st, c.got, st < 0 ? why : "");
    if (st == 1) {
        sfv__ex_frame hh, pp;
        uint8_t want[32];
        FZ_CHECK(c.got == 96 && sfv__ex_decode(c.in, 48, &hh) == NULL && hh.type == SFV__EX_HELLO);
        FZ_CHECK(hh.rank < x.rank && !seen[hh.rank]);
        FZ_CHECK(sfv__ex_decode(c.in + 48, 48, &pp) == NULL && pp.type == SFV__EX_PROOF);
        sfv__ex_mac(&x.key, 'C', c.in, c.out, NULL, 0, want);
        FZ_CHECK(memcmp(want, pp.body, 32) == 0);
    }
    close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    return 0;
}
