// tests/slow_resolver_shim.cpp: an LD_PRELOAD shim of getaddrinfo for the
// name-resolution tests. Names ending in ".tally-test" resolve to 127.0.0.1
// after a delay (TALLY_SLOW_RESOLVER_MS at start, then whatever the test sets
// through tally_slow_resolver_set_ms); every other name goes to the real
// resolver untouched. Built as its own shared library; never linked into a
// test, only preloaded into a child process of one.
#include <dlfcn.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

std::atomic<int> delay_ms{[] {
    const char* v = std::getenv("TALLY_SLOW_RESOLVER_MS");
    return v != nullptr ? std::atoi(v) : 0;
}()};
std::atomic<int> slow_calls{0};

using GetaddrinfoFn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);

bool is_test_name(const char* node) {
    static constexpr char suffix[] = ".tally-test";
    if (node == nullptr) return false;
    const std::size_t n = std::strlen(node), s = sizeof suffix - 1;
    return n > s && std::strcmp(node + n - s, suffix) == 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void tally_slow_resolver_set_ms(int ms) { delay_ms.store(ms); }
__attribute__((visibility("default"))) int tally_slow_resolver_calls() { return slow_calls.load(); }

__attribute__((visibility("default"))) int getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                                                       addrinfo** res) {
    static const auto real = reinterpret_cast<GetaddrinfoFn>(dlsym(RTLD_NEXT, "getaddrinfo"));
    if (real == nullptr) return EAI_SYSTEM;
    if (!is_test_name(node)) return real(node, service, hints, res);
    slow_calls.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    return real("127.0.0.1", service, hints, res);
}

}  // extern "C"
