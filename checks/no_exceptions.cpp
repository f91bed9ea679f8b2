// Built with -fno-exceptions by scripts/ci-checks: proves the headers compile
// that way, that good input works, and that bad input aborts (SIGABRT) with a
// message instead of corrupting anything.
#include <tally/tally.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <limits>
#include <vector>

namespace {

int failures = 0;

// Runs `f` in a child; expects it to die of SIGABRT.
template <class F>
void expect_abort(const char* what, F&& f) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        f();
        std::_Exit(0);  // reaching here means no abort
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    std::printf("%-60s %s\n", what, aborted ? "aborted (ok)" : "DID NOT ABORT");
    if (!aborted) ++failures;
}

}  // namespace

int main() {
    static_assert(!TALLY_HAS_EXCEPTIONS, "build this file with -fno-exceptions");

    // Good input works.
    tally::ByteWriter w;
    w.header(tally::Family::hyperloglog, 1);
    w.u64(7);
    auto bytes = w.take();
    tally::ByteReader r(bytes);
    if (r.header(tally::Family::hyperloglog, 1) != 1 || r.u64() != 7) ++failures;

    // Bad input aborts.
    expect_abort("ByteReader past the end", [&] {
        tally::ByteReader e(std::span<const std::byte>(bytes.data(), 3));
        (void)e.u64();
    });
    expect_abort("ByteReader wrong family", [&] {
        tally::ByteReader e(bytes);
        (void)e.header(tally::Family::tdigest, 1);
    });
    expect_abort("merge_all of nothing", [] {
        struct S {
            S& merge(const S&) { return *this; }
            bool mergeable_with(const S&) const { return true; }
            std::vector<std::byte> serialize() const { return {}; }
            static S deserialize(std::span<const std::byte>) { return {}; }
        };
        std::vector<S> none;
        (void)tally::merge_all(none);
    });
#include "no_exceptions_components.inc"

    std::printf("no-exceptions check: %s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
