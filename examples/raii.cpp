// raii.cpp - safeverbs from C++: every handle in a std::unique_ptr with its deleter, a scope run
// from a capturing lambda, zero-initialised descs without warnings (SFV_ZERO_INIT or {}), and
// results checked through a small exception wrapper. Loops "hello, C++" back through one channel
// on one device; prints "raii: ... all right" and exits 0.
//
//     build/raii [-d DEVICE]     (default: the first device)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace sfv {

// A failed call as an exception, with sfv_last_error()'s message.
struct error : std::runtime_error {
    sfv_result result;
    explicit error(sfv_result r) : std::runtime_error(sfv_last_error()->message), result(r) {}
};
inline void check(sfv_result r) {
    if (r != SFV_OK) throw error(r);
}

// One deleter per handle type: a release that fails can only be reported here, not thrown.
struct deleter {
    static void report(sfv_result r) {
        if (r != SFV_OK) std::fprintf(stderr, "raii: release failed: %s\n", sfv_last_error()->message);
    }
    void operator()(sfv_context *p) const { report(sfv_close_device(p)); }
    void operator()(sfv_pd *p) const { report(sfv_dealloc_pd(p)); }
    void operator()(sfv_mr *p) const { report(sfv_dereg_mr(p)); }
    void operator()(sfv_channel *p) const { report(sfv_destroy_channel(p)); }
};
using context = std::unique_ptr<sfv_context, deleter>;
using pd = std::unique_ptr<sfv_pd, deleter>;
using mr = std::unique_ptr<sfv_mr, deleter>;
using channel = std::unique_ptr<sfv_channel, deleter>;

inline context open_device(const char *name) {
    sfv_context *p = nullptr;
    check(sfv_open_device(name, &p));
    return context(p);
}
inline pd alloc_pd(sfv_context *ctx) {
    sfv_pd *p = nullptr;
    check(sfv_alloc_pd(ctx, &p));
    return pd(p);
}
inline mr reg_mr_local(sfv_pd *pd_, void *addr, size_t len) {
    sfv_mr *p = nullptr;
    check(sfv_reg_mr_local(pd_, addr, len, &p));
    return mr(p);
}
inline channel create_channel(sfv_pd *pd_, const sfv_channel_desc &desc) {
    sfv_channel *p = nullptr;
    check(sfv_create_channel(pd_, &desc, &p));
    return channel(p);
}

// A scope from any callable, capturing lambdas included: the C callback gets the callable's
// address as its user pointer. fn returns sfv_result; the scope's verdict is returned.
template <class F>
sfv_result scope(sfv_channel *ch, F &&fn, sfv_scope_report *report = nullptr) {
    using Fn = typename std::remove_reference<F>::type;
    return sfv_channel_scope(
        ch, [](sfv_channel *c, void *user) -> sfv_result { return (*static_cast<Fn *>(user))(c); },
        const_cast<void *>(static_cast<const void *>(&fn)), report);
}

} // namespace sfv

int main(int argc, char **argv) {
    const char *dev = argc > 2 && std::strcmp(argv[1], "-d") == 0 ? argv[2] : nullptr;
    try {
        static char buf[8192];
        sfv::context ctx = sfv::open_device(dev);
        sfv::pd pd = sfv::alloc_pd(ctx.get());
        sfv::mr mr = sfv::reg_mr_local(pd.get(), buf, sizeof buf);
        sfv_channel_desc desc = SFV_ZERO_INIT; // or `desc{}`: every default, no warning
        sfv::channel ch = sfv::create_channel(pd.get(), desc);
        sfv_endpoint me{};
        sfv::check(sfv_channel_endpoint(ch.get(), &me));
        sfv::check(sfv_channel_handshake(ch.get(), &me)); // loopback: connect to itself

        const std::string text = "hello, C++";
        std::memcpy(buf, text.c_str(), text.size() + 1);
        sfv_work_completion got{};
        size_t sent = 0;
        sfv_scope_report report{};
        // Everything posted in the scope is done when it returns; the lambda captures by reference.
        sfv::check(sfv::scope(
            ch.get(),
            [&](sfv_channel *c) -> sfv_result {
                sfv_scatter_element in = sfv_mr_scatter_element(mr.get(), buf + 4096, 64);
                sfv_gather_element out = sfv_mr_gather_element(mr.get(), buf, text.size() + 1);
                sfv_pending rx;
                sfv_result r = sfv_channel_post_receive(c, &in, 1, &rx);
                if (r == SFV_OK) r = sfv_channel_post_send(c, &out, 1, nullptr); // the scope polls it
                if (r == SFV_OK) r = sfv_pending_wait(&rx, -1, &got);
                if (r == SFV_OK) sent = text.size() + 1;
                return r;
            },
            &report));
        if (got.byte_len != sent || text != buf + 4096) {
            std::fprintf(stderr, "raii: received %u bytes: \"%.64s\"\n", got.byte_len, buf + 4096);
            return 1;
        }
        std::printf("raii: %s looped \"%s\" back (%u bytes, %zu auto-polled), all right\n",
                    sfv_context_name(ctx.get()), buf + 4096, got.byte_len, report.auto_polled);
        // ch, mr, pd and ctx are released here, in reverse order (any order would do).
    } catch (const sfv::error &e) {
        std::fprintf(stderr, "raii: %s (%s)\n", e.what(), sfv_result_str(e.result));
        return 1;
    }
    return 0;
}
