/* fuzz_exchange_frame.c - libFuzzer target for the exchange's frame decoder (sfv__ex_decode):
   the first bytes of every connection a rank accepts, a stranger's included. Any input must
   decode or be refused without a fault; a refused one leaves nothing behind; one that decodes
   must encode back to the same 48 bytes (so no byte of it, reserved ones included, went
   unchecked) and hold what the decoder promises (a rank inside its world, at most 64 MiB).
   (SHA-256 and HMAC-SHA256 are checked against their published vectors in tests/test_exchange.c.)

       clang -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_exchange_frame.c -libverbs -o /tmp/fx
       /tmp/fx -max_total_time=20 tests/fuzz/corpus/exchange_frame */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sfv__ex_frame f;
    uint8_t again[48];
    const char *why = sfv__ex_decode(data, size, &f);
    if (why == NULL) {
        if (size != 48) abort();
        sfv__ex_encode(&f, again);
        if (memcmp(again, data, 48) != 0) abort();
        if (f.type == 1 && (f.world == 0 || f.world > 4096 || f.rank >= f.world || f.size > (64u << 20))) abort();
        if (f.type != 1 && (f.rank || f.world || f.size || f.keeps)) abort();
    } else if (f.type != 0 || f.rank != 0 || f.world != 0 || f.size != 0 || f.keeps) {
        abort(); /* a refused frame leaves nothing behind */
    }
    return 0;
}
