// examples/overload.hpp: the discrete-event overload simulation behind
// examples/overload.cpp (and tests/test_overload.cpp).
//
// The server is processor-sharing: with n requests in service and capacity
// C, each progresses at rate min(1, C / n), so past C every request slows
// down with concurrency. A request needs about `work_ns` of service (uniform
// within +-5 %), the no-load latency. Requests arrive as a Poisson stream at
// `overload` times capacity (C / work_ns per ns); for the middle third of
// the run the capacity drops to C / drop. A limiter in front admits or
// rejects each arrival at once (a rejected request costs nothing and is not
// retried) and learns from the latency of each completion. Everything is
// deterministic for a seed: the same table on every run (and on every
// machine whose std::log rounds alike).
#pragma once

#include <tally/limit/concurrency.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <vector>

namespace overload {

struct Config {
    double capacity = 100;               // concurrent requests served at full speed
    std::uint64_t work_ns = 10'000'000;  // no-load latency, 10 ms
    double overload = 2.0;               // offered load / healthy capacity
    double drop = 4.0;                   // capacity divisor in the middle third
    std::uint64_t duration_ns = 30'000'000'000;
    std::uint64_t seed = 1;
};

struct Phase {
    std::uint64_t arrived = 0, admitted = 0, completed = 0, good = 0;
    double seconds = 0;
    double capacity_per_s = 0;  // requests per second the server can finish
    double p50_ms = 0, p99_ms = 0;
    [[nodiscard]] double goodput_per_s() const { return good / seconds; }
    [[nodiscard]] double goodput_share() const { return goodput_per_s() / capacity_per_s; }
};

struct Result {
    std::string name;
    Phase phases[3];
};

class Rng {
  public:
    explicit Rng(std::uint64_t seed) : s_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)

  private:
    std::uint64_t s_;
};

// Admission: returns a token (a permit index) or nothing; finish(token, now).
struct Gate {
    std::function<std::optional<std::size_t>(std::uint64_t now)> admit;
    std::function<void(std::size_t token, std::uint64_t now)> finish;
};

// A gate over any tally limiter whose permits are movable.
template <class Limiter>
Gate gate_for(Limiter& lim, std::vector<typename Limiter::Permit>& permits, std::vector<std::size_t>& free_slots) {
    Gate g;
    g.admit = [&](std::uint64_t now) -> std::optional<std::size_t> {
        auto p = lim.try_acquire(now);
        if (!p) return std::nullopt;
        std::size_t slot;
        if (!free_slots.empty()) {
            slot = free_slots.back();
            free_slots.pop_back();
            permits[slot] = std::move(p);
        } else {
            slot = permits.size();
            permits.push_back(std::move(p));
        }
        return slot;
    };
    g.finish = [&](std::size_t slot, std::uint64_t now) {
        permits[slot].success(now);
        free_slots.push_back(slot);
    };
    return g;
}

inline Result simulate(const std::string& name, const Config& c, Gate gate) {
    Result r{name, {}};
    const double healthy_rate = c.capacity / static_cast<double>(c.work_ns);  // completions per ns
    const double arrival_rate = c.overload * healthy_rate;
    const std::uint64_t third = c.duration_ns / 3;
    auto phase_of = [&](std::uint64_t t) { return static_cast<int>(std::min<std::uint64_t>(2, t / third)); };
    auto capacity_at = [&](std::uint64_t t) { return phase_of(t) == 1 ? c.capacity / c.drop : c.capacity; };

    struct Job {
        double finish_v;  // virtual time at which its work is done
        std::uint64_t arrival;
        std::size_t token;
        bool operator>(const Job& o) const { return finish_v > o.finish_v; }
    };
    std::priority_queue<Job, std::vector<Job>, std::greater<>> active;
    std::vector<double> latencies[3];
    Rng rng(c.seed);
    double v = 0;  // virtual time: the service each active request has received
    double t = 0;  // real time, ns
    double next_arrival = -std::log(rng.uniform()) / arrival_rate;
    const double end = static_cast<double>(c.duration_ns);
    // Service rate per request at time t with n active.
    auto rate = [&](double at, std::size_t n) {
        return n == 0 ? 1.0 : std::min(1.0, capacity_at(static_cast<std::uint64_t>(at)) / static_cast<double>(n));
    };
    while (t < end) {
        const double boundary = (std::floor(t / static_cast<double>(third)) + 1) * static_cast<double>(third);
        const double rt = rate(t, active.size());
        const double next_done = active.empty() ? end + 1 : t + (active.top().finish_v - v) / rt;
        const double next = std::min({next_arrival, next_done, boundary, end});
        v += (next - t) * rt;
        t = next;
        if (t >= end) break;
        const auto now = static_cast<std::uint64_t>(t);
        if (next == next_done) {
            const Job j = active.top();
            active.pop();
            gate.finish(j.token, now);
            Phase& ph = r.phases[phase_of(j.arrival)];
            const double lat = t - static_cast<double>(j.arrival);
            ++ph.completed;
            if (lat <= 2.0 * static_cast<double>(c.work_ns)) ++ph.good;
            latencies[phase_of(j.arrival)].push_back(lat);
        } else if (next == next_arrival) {
            Phase& ph = r.phases[phase_of(now)];
            ++ph.arrived;
            if (auto token = gate.admit(now)) {
                ++ph.admitted;
                const double work = static_cast<double>(c.work_ns) * (0.95 + 0.1 * rng.uniform());
                active.push(Job{v + work, now, *token});
            }
            next_arrival = t - std::log(rng.uniform()) / arrival_rate;
        }
        // A phase boundary only changes the rate; nothing to do.
    }
    for (int p = 0; p < 3; ++p) {
        Phase& ph = r.phases[p];
        ph.seconds = static_cast<double>(third) / 1e9;
        ph.capacity_per_s = (p == 1 ? c.capacity / c.drop : c.capacity) / (static_cast<double>(c.work_ns) / 1e9);
        auto& l = latencies[p];
        if (!l.empty()) {
            std::sort(l.begin(), l.end());
            ph.p50_ms = l[l.size() / 2] / 1e6;
            ph.p99_ms = l[std::min(l.size() - 1, l.size() * 99 / 100)] / 1e6;
        }
    }
    return r;
}

// What each limiter is given. The adaptive ones are told the one thing an
// operator knows about a server, the concurrency it serves at full speed, as
// their ceiling (max_limit / max_concurrency = capacity); everything else is
// Netflix's default except:
// - Aimd: timeout_ns = 2x the no-load latency (its only signal is a timeout);
// - Gradient2: rtt_tolerance 1 and a long window of 5 s of healthy traffic.
//   Gradient2 settles where rtt = rtt_tolerance * long_rtt / (1 - queue_size
//   / limit): at 1.5 that is 1.7x the no-load latency at a limit of 37,
//   too close to the 2x goodput deadline; and its long-term average takes a
//   latency that lasts about long_window / 2 samples as its new normal (600
//   samples is 60 ms of this server), so the window must outlast the
//   slowdowns it is meant to resist.
struct Contenders {
    tally::FixedConcurrencyOptions fixed;
    tally::AimdOptions aimd;
    tally::VegasOptions vegas;
    tally::Gradient2Options gradient2;
};

inline Contenders contenders(const Config& c) {
    const int capacity = static_cast<int>(c.capacity);
    const double healthy_per_s = c.capacity / (static_cast<double>(c.work_ns) / 1e9);
    Contenders k;
    k.fixed.limit = capacity;
    k.aimd.max_limit = capacity;
    k.aimd.min_limit = std::min(k.aimd.min_limit, capacity);
    k.aimd.timeout_ns = 2 * c.work_ns;
    k.vegas.max_concurrency = capacity;
    k.vegas.probe_seed = c.seed;
    k.gradient2.max_concurrency = capacity;
    k.gradient2.min_limit = std::min(k.gradient2.min_limit, capacity);
    k.gradient2.rtt_tolerance = 1.0;
    k.gradient2.long_window = static_cast<int>(std::min(5 * healthy_per_s, 1e9));
    return k;
}

// The rows of the table: no limit, the fixed limit, the three adaptive
// limiters with contenders(c), then Vegas and Gradient2 with Netflix's
// defaults (for comparison).
inline std::vector<Result> run_all(const Config& c) {
    std::vector<Result> out;
    {
        std::size_t next = 0;
        Gate none{[&](std::uint64_t) -> std::optional<std::size_t> { return next++; },
                  [](std::size_t, std::uint64_t) {}};
        out.push_back(simulate("no limit", c, none));
    }
    auto with = [&](const std::string& name, auto algorithm) {
        tally::ConcurrencyLimiter<decltype(algorithm)> lim(algorithm);
        std::vector<typename decltype(lim)::Permit> permits;
        std::vector<std::size_t> free_slots;
        out.push_back(simulate(name, c, gate_for(lim, permits, free_slots)));
    };
    const Contenders k = contenders(c);
    with("fixed " + std::to_string(k.fixed.limit), tally::FixedConcurrency(k.fixed));
    with("Aimd", tally::Aimd(k.aimd));
    with("Vegas", tally::Vegas(k.vegas));
    with("Gradient2", tally::Gradient2(k.gradient2));
    with("Vegas, defaults", tally::Vegas({.probe_seed = c.seed}));
    with("Gradient2, defaults", tally::Gradient2());
    return out;
}

// The claims: p99 within 3x the no-load latency in every phase, and goodput
// at least 80 % of capacity in the drop and after it.
inline bool keeps_p99(const Result& r, const Config& c) {
    for (const Phase& p : r.phases)
        if (p.completed == 0 || p.p99_ms > 3.0 * static_cast<double>(c.work_ns) / 1e6) return false;
    return true;
}
inline bool keeps_goodput(const Result& r) {
    return r.phases[1].goodput_share() >= 0.8 && r.phases[2].goodput_share() >= 0.8;
}

}  // namespace overload
