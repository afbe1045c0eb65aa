/* SAFEVERBS_STATIC: the whole library static in one file (no sfv_ symbol exported), with the
   warnings of the matrix: no unused-function warning for the functions this file never calls. */
#define SAFEVERBS_STATIC
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

int main(void) {
    sfv_remote_mr r = sfv_remote_mr_make(0, 16, 1), o;
    return sfv_remote_mr_sub(r, 4, &o) == SFV_OK && o.length == 12 && sfv_pending_wait_all(NULL, 0, 0, NULL) == SFV_OK ? 0 : 1;
}
