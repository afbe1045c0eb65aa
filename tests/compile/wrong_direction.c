/* Must NOT compile: the element types keep the NIC's directions apart. WRONG selects the misuse:
   1: receive into gather elements (memory the NIC may only read)
   2: send from scatter elements
   3: read into gather elements
   4: a gather element where a scatter element is built (checked constructor's out-parameter) */
#include "safeverbs.h"

void misuse(sfv_channel *ch, sfv_mr *mr, char *buf, sfv_pending *p);
void misuse(sfv_channel *ch, sfv_mr *mr, char *buf, sfv_pending *p) {
    sfv_gather_element g = sfv_mr_gather_element(mr, buf, 8);
    sfv_scatter_element s = sfv_mr_scatter_element(mr, buf, 8);
    sfv_remote_mr r = sfv_remote_mr_make(0, 8, 0);
    (void)g; (void)s; (void)r;
#if WRONG == 1
    sfv_channel_post_receive(ch, &g, 1, p);
#elif WRONG == 2
    sfv_channel_post_send(ch, &s, 1, p);
#elif WRONG == 3
    sfv_channel_post_read(ch, &g, 1, r, p);
#elif WRONG == 4
    sfv_mr_scatter_element_checked(mr, buf, 8, &g);
#else
    (void)ch; (void)p;
#endif
}
