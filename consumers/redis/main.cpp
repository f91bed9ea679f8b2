// Smallest real use of tally::redis: a limiter on a server that is not there
// answers from its fail mode, degraded, without hanging.
#include <tally/redis.hpp>

#include <cstdio>

int main() {
    tally::redis::Options o;
    o.connect_timeout = std::chrono::milliseconds{20};
    o.on_error = tally::redis::FailMode::open;
    auto client = tally::redis::Client::connect("127.0.0.1", 1, o);  // port 1: nothing listens
    tally::redis::GcraLimiter limiter(client, tally::Quota::per_second(10), o);
    const tally::Decision d = limiter.try_acquire("consumer");
    std::printf("tally::redis consumer: allowed=%d degraded=%d (%s)\n", d.allowed, d.degraded, limiter.last_error().c_str());
    return d.allowed && d.degraded && limiter.degraded_count() == 1 ? 0 : 1;
}
