/* fuzz_ncm_signed.c (hostile-review harness): sfv__ncm_check past its MAC. The existing fuzz_cm_private can only
   reach the branches after the proof with a message sfv__ncm_make built (always a good rank and
   region), so "another world size", "a rank out of this world" and the barrier region decode and
   length check are never fed fuzzed values. Here the fuzzed 52-byte message is signed first.
   Input: byte0 world (2..17 or 4096), byte1/2 me (16 bits), byte3 kind; rest: the message (its
   MAC bytes are overwritten with the right MAC). */
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

static const char key_text[] = "k";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t msg[256], req[SFV__NCM_SIZE];
    size_t world, me, n, from;
    char kind;
    sfv__ex_key key;
    sfv_node nd;
    sfv_remote_mr b;
    const char *why;
    fz_error before;
    if (size < 4) return 0;
    world = data[0] == 255 ? 4096 : 2 + data[0] % 16u;
    me = ((size_t)data[1] << 8 | data[2]) % world;
    kind = (data[3] & 1) ? 'A' : 'C';
    data += 4, size -= 4;
    n = size > sizeof msg ? sizeof msg : size;
    memset(msg, 0, sizeof msg);
    memcpy(msg, data, n);
    if (n < SFV__NCM_SIZE) n = SFV__NCM_SIZE;
    /* force the header so that the fuzzer spends its time past it */
    msg[0] = 'S'; msg[1] = 'N'; msg[2] = (uint8_t)kind; msg[3] = 1;
    memset(&key, 0, sizeof key);
    key.bytes = (const uint8_t *)key_text;
    key.len = 1;
    memset(req, 0x11, sizeof req);
    sfv__ncm_mac(&key, msg, me, 0x77u, kind == 'A' ? req : NULL, msg + SFV__NCM_BODY);
    memset(&nd, 0, sizeof nd);
    nd.rank = me;
    nd.world = world;
    fz_prime_error();
    before = fz_error_now();
    why = sfv__ncm_check(&key, msg, n, kind, &nd, 0x77u, kind == 'A' ? req : NULL, &from, &b);
    fz_check_error_kept(&before);
    {
        const int ok = fz_be(msg + 8, 4) == world && fz_be(msg + 4, 4) < world && fz_be(msg + 4, 4) != me &&
                       fz_remote_mr_valid(msg + 12, SFV_REMOTE_MR_ENCODED_SIZE) && fz_be(msg + 24, 8) >= world * 8 &&
                       fz_zero(msg + SFV__NCM_SIZE, n - SFV__NCM_SIZE);
        FZ_CHECK((why == NULL) == ok);
        if (why) FZ_CHECK(from == 0 && fz_remote_mr_is_zero(b));
        else FZ_CHECK(from == fz_be(msg + 4, 4) && b.addr == fz_be(msg + 16, 8) && b.length == fz_be(msg + 24, 8) && b.rkey == fz_be(msg + 32, 4));
    }
    return 0;
}
