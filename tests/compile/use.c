/* A user translation unit: the declarations alone, with the header included twice. */
#include "safeverbs.h"
#include "safeverbs.h"
#include <string.h>

int main(void) {
    sfv_remote_mr r = sfv_remote_mr_make(0, 16, 1), o;
    sfv_channel_desc desc;
    memset(&desc, 0, sizeof desc);
    (void)desc;
    return sfv_remote_mr_sub(r, 4, &o) == SFV_OK && o.length == 12 ? 0 : 1;
}
