/* fuzz_cm_private.c - the bytes a peer's connection manager hands over (>>impl rdmacm): the
   private data of a connection request or answer as sfv__cm_take_private splits it (our "SC"
   header with the read depth, then the peer's own bytes), and a node's request or answer over
   the CM as sfv__ncm_check judges it (sfv_node_connect_cm).
   No device: the internal functions are called directly (the implementation is in this file);
   sfv__ncm_check reads nothing of the node but its rank, world size and (to make a good
   message) its barrier MR, which is a stand-in here. If they are renamed or split, this file
   follows.
   Input: byte 0 picks the world size (2 .. 17), byte 1 this node's rank, byte 2 which message
   kind to judge ('C' or 'A'), byte 3 a position and byte 4 a value for a one-byte change; the
   rest is private data as it came (any length up to 256, as the CM hands it).
   Properties:
   - take_private reads only the bytes it was given; the read depth is the header's 4th byte
     when the bytes start with "SC", 1 and are at least 4 long, else 0; the caller's bytes are
     the rest, cut to the buffer, copied exactly.
   - ncm_check takes the input only if it is a well-formed message of that kind to this rank
     (header, world size, a rank of the world other than this one, a barrier region with room,
     zeros after the 52 bytes) with the right proof; a taken one says its rank and region, a
     refused one leaves both zero.
   - A good message made by sfv__ncm_make is taken, with the sender's rank and region; the same
     message with any one byte of its 52 changed is refused.
   - Judging leaves the thread's last error as it was.
   Build and run: make fuzz (or make check-fuzz). */
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

static const char fz_key_text[] = "the fuzz target's job key";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t buf[256], msg[SFV__NCM_SIZE];
    uint8_t rd;
    size_t len, world, me, from, pos, i;
    char kind;
    sfv__ex_key key;
    sfv_node nd;
    sfv_mr fake_mr;
    struct ibv_mr fake_ibv_mr;
    sfv_remote_mr barrier;
    fz_error before;
    const char *why;
    uint64_t mark = 0;
    if (size < 5) return 0;
    world = 2 + data[0] % 16u;
    me = data[1] % world;
    kind = (data[2] & 1) ? 'A' : 'C';
    pos = data[3] % SFV__NCM_SIZE;
    data += 5, size -= 5;
    if (size > 256) size = 256;

    /* take_private */
    memset(buf, 0xA5, sizeof buf);
    sfv__cm_take_private(size ? data : NULL, size, &rd, buf, sizeof buf, &len);
    if (!size) {
        FZ_CHECK(rd == 0 && len == 0);
    } else if (size >= 4 && data[0] == 'S' && data[1] == 'C' && data[2] == 1) {
        FZ_CHECK(rd == data[3] && len == size - 4 && memcmp(buf, data + 4, len) == 0);
    } else {
        FZ_CHECK(rd == 0 && len == size && memcmp(buf, data, len) == 0);
    }
    for (i = len; i < sizeof buf; i++) FZ_CHECK(buf[i] == 0xA5); /* nothing past what it said */

    /* ncm_check on the bytes as they came */
    memset(&key, 0, sizeof key);
    key.bytes = (const uint8_t *)fz_key_text;
    key.len = sizeof fz_key_text - 1;
    memset(&nd, 0, sizeof nd);
    nd.rank = me;
    nd.world = world;
    fz_prime_error();
    before = fz_error_now();
    why = sfv__ncm_check(&key, size ? data : NULL, size, kind, &nd, 0x1234u, NULL, &from, &barrier);
    fz_check_error_kept(&before);
    if (!why) {
        FZ_CHECK(size >= SFV__NCM_SIZE && data[0] == 'S' && data[1] == 'N' && data[2] == (uint8_t)kind && data[3] == 1);
        FZ_CHECK(fz_be(data + 8, 4) == world && from == fz_be(data + 4, 4) && from < world && from != me);
        FZ_CHECK(fz_remote_mr_valid(data + 12, SFV_REMOTE_MR_ENCODED_SIZE) && barrier.length >= world * 8);
        FZ_CHECK(fz_zero(data + SFV__NCM_SIZE, size - SFV__NCM_SIZE));
    } else {
        FZ_CHECK(from == 0 && fz_remote_mr_is_zero(barrier));
    }

    /* a good message from the sender's side, taken; any one byte changed, refused */
    memset(&fake_ibv_mr, 0, sizeof fake_ibv_mr);
    fake_ibv_mr.rkey = 0x5151u;
    memset(&fake_mr, 0, sizeof fake_mr);
    fake_mr.mr = &fake_ibv_mr;
    fake_mr.addr = (uint64_t)(uintptr_t)&mark;
    fake_mr.length = world * 8;
    nd.in_mr = &fake_mr;
    nd.rank = (me + 1) % world;                   /* the sender */
    sfv__ncm_make(&key, kind, &nd, me, 0x1234u, kind == 'A' ? buf : NULL, msg);
    nd.rank = me;                                 /* the receiver */
    why = sfv__ncm_check(&key, msg, sizeof msg, kind, &nd, 0x1234u, kind == 'A' ? buf : NULL, &from, &barrier);
    FZ_CHECK(why == NULL && from == (me + 1) % world && barrier.rkey == 0x5151u && barrier.length == world * 8);
    if (data[-1] != 0 || size == 0) {
        const uint8_t v = (uint8_t)(msg[pos] ^ (data[-1] ? data[-1] : 1));
        msg[pos] = v;
        why = sfv__ncm_check(&key, msg, sizeof msg, kind, &nd, 0x1234u, kind == 'A' ? buf : NULL, &from, &barrier);
        FZ_CHECK(why != NULL);
    }
    fz_check_error_kept(&before);
    return 0;
}
