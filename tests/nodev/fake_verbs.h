/* fake_verbs.h - the control side of tests/nodev/fake_verbs.c, a fake NIC for the device-free
   tests: it defines the ibv_* functions safeverbs.h calls and moves bytes between queue pairs in
   this process (RC: send, receive, RDMA write and read, with immediates), so the library runs on
   a host without RDMA and without libibverbs.

   Failure injection (librpma's RPMA_FAULT_INJECTION is the idea): every fallible verb and every
   allocation made through fk_malloc/fk_calloc/fk_free counts as one call; fk_fail_nth(n) makes
   the n-th call from then on fail (a verb returns its error, an allocation NULL). Live objects
   (device lists, contexts, PDs, MRs, CQs, QPs, completion channels) are counted, so a test can
   check that a teardown left nothing behind. Test-only, single-threaded (but see fk_set_threaded). */
#ifndef FAKE_VERBS_H
#define FAKE_VERBS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus /* (a test built as C++ links the fake built as C: build/nodev/cxx/) */
extern "C" {
#endif

enum fk_kind { FK_DEVICE_LIST, FK_CONTEXT, FK_PD, FK_MR, FK_CQ, FK_QP, FK_COMP_CHANNEL, FK_KINDS };

/* Back to the defaults: RoCE (Ethernet link layer) with an IPv4 RoCE v2 GID, port ACTIVE,
   no failure planned, call counter at 0. Live objects are kept (and still counted). */
void fk_reset(void);
/* Link layer of every port: 1 InfiniBand (LIDs, an IB GID), 2 Ethernet (RoCE, GIDs only). */
void fk_set_link_layer(int link_layer);
/* enum ibv_atomic_cap the devices report (default IBV_ATOMIC_HCA); read when a device opens. */
void fk_set_atomic_cap(int cap);
/* The largest max_inline_data a QP may ask for (default 65536); more: ibv_create_qp fails with EINVAL. */
void fk_set_max_inline(unsigned max);
/* max_qp_rd_atom (a QP's responder depth) and max_qp_init_rd_atom (its initiator depth) the devices
   report (default 16 and 16), read when a device opens. */
void fk_set_rd_atom(int qp_rd_atom, int qp_init_rd_atom);
/* on: moving a QP to ERR flushes none of its work (a NIC that never flushes), until fk_reset. */
void fk_set_no_flush(bool on);
/* on: moving a QP to ERR flushes its unsignaled send work with NO completion (a provider that
   breaks IBA's rule that every work request ending in error completes), until fk_reset. */
void fk_set_flush_unsignaled_quiet(bool on);
/* on: the device has type 2 memory windows (max_mw, MEM_WINDOW_TYPE_2B); off (the default): none. */
void fk_set_mw(bool on);
/* The next n ibv_dealloc_mw calls fail with EIO. */
void fk_set_mw_dealloc_fail(int n);
/* The next n memory window binds complete with MW_BIND_ERR (the QP then goes to ERR). */
void fk_set_bind_fail(int n);
/* Memory windows allocated and not deallocated. */
long fk_mw_count(void);
/* The next n calls of `verb` (its name, as fk_call_name gives it) fail, until fk_reset; up to
   4 verbs at once (n 0 forgets one). */
void fk_fail_name(const char *verb, int n);
/* on: ibv_reg_dmabuf_mr registers an MR (keys only: nothing may post to it), its addr the
   offset as rdma-core's ibv_reg_dmabuf_mr sets it; off (the default): EOPNOTSUPP. */
void fk_set_dmabuf(bool on);
/* fake0's ibv_device.dev_path (its uverbs node in sysfs), for device lists made after the call;
   "" (reset) by default, a path that is never there. */
void fk_set_dev_path(const char *path);
/* Non-zero: every ibv_get_device_list fails with this errno (ENOSYS: rdma-core on a host whose
   kernel has no RDMA, ib_uverbs not loaded), until fk_reset. */
void fk_set_device_list_errno(int errnum);
/* RoCE GID table: `len` entries (default 4), the IPv4 RoCE v2 GID at `ipv4_index` (default 1),
   fe80:: at 0, the rest empty. */
void fk_set_gid_table(uint32_t len, uint32_t ipv4_index);
/* The port's address changes: every LID and each GID's byte 14 gain gen (0: as made). */
void fk_set_addr_gen(unsigned gen);
/* enum ibv_port_state of every port. */
void fk_set_port_state(int state);
/* ibv_device_attr.max_cqe the devices report (default 65536; negative: a driver's int that says
   "no limit" or was filled from a u32), read when a device opens; ibv_create_cq takes 1 .. 65536, and
   no more than a positive max_cqe (a device refuses a CQ over the limit it reports, as rxe does). */
void fk_set_max_cqe(int n);
/* Ports each device reports (phys_port_cnt, and ibv_query_port answers for them); a QP still
   comes up only on port 1 (the CM's fake puts every id there). */
void fk_set_ports(int n);

/* on: every counted verb and allocation runs under one lock (the data path's), so threads may
   share the control verbs too (a test of the library's thread safety); off by default, until
   turned off (fk_reset keeps it). */
void fk_set_threaded(bool on);

/* Fails call n (1-based, counted from the last fk_reset or fk_fail_nth); 0: none. */
void fk_fail_nth(long n);
/* A failed ibv_post_send / ibv_post_recv of a list first posts its first n work requests (a
   partial post: *bad_wr then points at the first one not posted; the part posted has not run
   when the call returns). Default 0. */
void fk_set_partial_post(int n);
/* on: the part of a failed list that was posted runs before the call returns (a provider that rang
   the doorbell for it, as mlx5 does for the work requests before *bad_wr), until fk_reset. Unsignaled
   work that ran then has no completion, and an ERR has nothing of it to flush. */
void fk_set_partial_post_runs(bool on);
/* The lkey of the next MR registered (then counting up from there): another device's MR may have
   the same lkey as one of this device's. */
void fk_set_next_key(uint32_t key);
/* Calls counted so far (verbs and allocations). */
long fk_calls(void);
/* The name of call i (1-based) of the calls counted since the last reset ("ibv_modify_qp",
   "calloc"), or NULL beyond what was recorded. */
const char *fk_call_name(long i);
/* Where in the program call i was made (an offset into its executable, for addr2line), 0 if unknown. */
unsigned long fk_call_site(long i);
/* What call i did, where the name alone does not say ("to ERR" for ibv_modify_qp), else "". */
const char *fk_call_detail(long i);
/* The verb or allocation the planned failure hit, NULL while it has not happened. */
const char *fk_failed(void);

/* Queues an asynchronous event on a context (enum ibv_event_type `type`; `object` the QP, CQ or
   SRQ it names, `port` for a port event) and makes its async_fd readable, as a device would.
   The context's async_fd is a pipe; ibv_get_async_event takes one event per byte. */
struct ibv_context;
void fk_inject_async_event(struct ibv_context *context, int type, void *object, int port);
/* Events read by ibv_get_async_event and not yet acked (closing a context aborts unless 0). */
unsigned long fk_async_unacked(void);

/* Live objects of one kind, and of all kinds. */
long fk_live(enum fk_kind kind);
long fk_live_total(void);
const char *fk_kind_name(enum fk_kind kind);

/* The allocator the tests hand to safeverbs.h (SFV_MALLOC, SFV_CALLOC, SFV_FREE). */
void *fk_malloc(size_t size);
void *fk_calloc(size_t n, size_t size);
void fk_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
