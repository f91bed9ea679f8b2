// tally/limit/concurrency.hpp: adaptive concurrency limits. The algorithms
// (Aimd, Vegas, Gradient2, FixedConcurrency), limit-identical to Netflix
// concurrency-limits, and the limiters that hand out permits under them
// (ConcurrencyLimiter, PartitionedConcurrencyLimiter), with waiting.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../core/clock.hpp"
#include "../core/platform.hpp"
#include "../detail/throw.hpp"
#include "detail/concurrency_core.hpp"
#include "detail/java_math.hpp"

TALLY_BEGIN_NAMESPACE

/// What ConcurrencyLimiter folds samples into: constructible from its
/// Options, on_sample(start_ns, rtt_ns, inflight, dropped) returning the new
/// limit, and limit().
template <class A>
concept ConcurrencyAlgorithm = std::copy_constructible<A> && std::constructible_from<A, typename A::Options> &&
                               requires(A& a, const A& ca, std::uint64_t t, int n, bool d) {
                                   { a.on_sample(t, t, n, d) } noexcept -> std::same_as<int>;
                                   { ca.limit() } noexcept -> std::same_as<int>;
                               };

/// Aimd::Options: the fields and defaults of Netflix's builder.
struct AimdOptions {
    int initial_limit = 20;
    int min_limit = 20;
    int max_limit = 200;
    double backoff_ratio = 0.9;                ///< in [0.5, 1), as AIMDLimit checks
    std::uint64_t timeout_ns = 5'000'000'000;  ///< an RTT above it counts as a drop
};

/// Aimd: additive increase, multiplicative decrease on loss (Netflix
/// concurrency-limits' AIMDLimit). Per sample: a drop or rtt > timeout_ns
/// sets limit = (int)(limit * backoff_ratio); otherwise, if inflight * 2 >=
/// limit, limit + 1; the result is clamped to [min_limit, max_limit].
/// Identical to AIMDLimit.onSample + getLimit() on every sample sequence
/// (tests/fixtures/concurrency). Memory: 40 bytes. Thread safety: none (a
/// value type; ConcurrencyLimiter serializes it).
///
///   tally::Aimd a({.max_limit = 500});
///   int limit = a.on_sample(start_ns, rtt_ns, inflight, /*dropped=*/false);
class Aimd {
  public:
    using Options = AimdOptions;

    explicit Aimd(Options o = {}) : o_(check(o)), limit_(o.initial_limit) {}

    /// The limit after this sample. start_ns is not used (kept for the
    /// common shape); rtt_ns is compared as Java's long.
    int on_sample(std::uint64_t /*start_ns*/, std::uint64_t rtt_ns, int inflight, bool dropped) noexcept {
        int current = limit_;
        if (dropped || detail::java_long(rtt_ns) > detail::java_long(o_.timeout_ns)) {
            current = detail::java_d2i(static_cast<double>(current) * o_.backoff_ratio);
        } else if (detail::java_imul(inflight, 2) >= current) {
            current = detail::java_iadd(current, 1);
        }
        limit_ = std::min(o_.max_limit, std::max(o_.min_limit, current));
        return limit_;
    }
    [[nodiscard]] int limit() const noexcept { return limit_; }
    [[nodiscard]] const Options& options() const noexcept { return o_; }

  private:
    static Options check(const Options& o) {
        const char* who = "tally::Aimd::Aimd: ";
        if (!(o.backoff_ratio >= 0.5 && o.backoff_ratio < 1.0))
            detail::throw_invalid_argument(std::string(who) + "backoff_ratio " + std::to_string(o.backoff_ratio) +
                                           " is outside [0.5, 1)");
        if (o.timeout_ns == 0 || o.timeout_ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            detail::throw_invalid_argument(std::string(who) + "timeout_ns " + std::to_string(o.timeout_ns) +
                                           " is outside [1, 2^63 - 1]");
        if (o.min_limit < 0 || o.min_limit > o.max_limit)
            detail::throw_invalid_argument(std::string(who) + "min_limit " + std::to_string(o.min_limit) +
                                           " is outside [0, max_limit = " + std::to_string(o.max_limit) + "]");
        if (o.initial_limit < 0)
            detail::throw_invalid_argument(std::string(who) + "initial_limit " + std::to_string(o.initial_limit) +
                                           " is outside [0, 2^31 - 1]");
        return o;
    }

    Options o_;
    int limit_;
};

/// Vegas::Options: the fields and defaults of Netflix's builder.
struct VegasOptions {
    int initial_limit = 20;
    int max_concurrency = 1000;
    double smoothing = 1.0;  ///< in [0, 1]; 1 takes each new target whole
    int probe_multiplier = 30;
    int (*alpha)(int) = &detail::vegas_default_alpha;  ///< of (int) L; Netflix's alphaFunction
    int (*beta)(int) = &detail::vegas_default_beta;
    int (*threshold)(int) = &detail::vegas_default_threshold;
    double (*increase)(double) = &detail::vegas_default_increase;  ///< of L; Netflix's increaseFunction
    double (*decrease)(double) = &detail::vegas_default_decrease;
    std::uint64_t probe_seed = 0;  ///< seeds the probe jitter
};

/// Vegas: TCP Vegas's queue estimate applied to concurrency (Brakmo and
/// Peterson 1995; Netflix concurrency-limits' VegasLimit). The smallest RTT
/// seen is the no-load RTT; per sample, queue = ceil(L * (1 - rtt_noload /
/// rtt)) for the estimated limit L. A drop decreases L; a sample with
/// inflight * 2 < L leaves it; otherwise queue <= threshold(L) adds beta(L),
/// queue < alpha(L) increases, queue > beta(L) decreases, else no change.
/// The target is clamped to [1, max_concurrency] and smoothed: L = (1 - s) L
/// + s target. The limit is (int) L. Every probe_multiplier * L * j samples
/// (j uniform in [0.5, 1), drawn from probe_seed: Java draws it unseeded) the
/// no-load RTT is reset to the current RTT. Identical to VegasLimit.onSample
/// + getLimit() on every sample sequence (fixtures with probing out of
/// reach); rtt_ns of 0 or above 2^63 leaves everything unchanged (Java
/// throws). Memory: 112 bytes. Thread safety: none (a value type).
///
///   tally::Vegas v({.max_concurrency = 400, .probe_seed = 42});
///   int limit = v.on_sample(start_ns, rtt_ns, inflight, false);
class Vegas {
  public:
    /// Netflix's defaults: alpha 3 log10(L), beta 6 log10(L), threshold
    /// log10(L), increase L + log10(L), decrease L - log10(L), with
    /// Log10RootIntFunction's integer log10 (at least 1).
    static constexpr auto default_alpha = &detail::vegas_default_alpha;
    static constexpr auto default_beta = &detail::vegas_default_beta;
    static constexpr auto default_threshold = &detail::vegas_default_threshold;
    static constexpr auto default_increase = &detail::vegas_default_increase;
    static constexpr auto default_decrease = &detail::vegas_default_decrease;

    using Options = VegasOptions;

    explicit Vegas(Options o = {})
        : o_(check(o)), estimated_(o.initial_limit), limit_(o.initial_limit), rng_(o.probe_seed) {
        reset_probe_jitter();
    }

    int on_sample(std::uint64_t /*start_ns*/, std::uint64_t rtt_ns, int inflight, bool dropped) noexcept {
        const std::int64_t rtt = detail::java_long(rtt_ns);
        if (rtt <= 0) return limit_;
        probe_count_ = detail::java_iadd(probe_count_, 1);
        if (should_probe()) {
            reset_probe_jitter();
            probe_count_ = 0;
            rtt_noload_ = rtt;
            return limit_ = detail::java_d2i(estimated_);
        }
        if (rtt_noload_ == 0 || rtt < rtt_noload_) {
            rtt_noload_ = rtt;
            return limit_ = detail::java_d2i(estimated_);
        }
        return limit_ = update(rtt, inflight, dropped);
    }
    [[nodiscard]] int limit() const noexcept { return limit_; }
    [[nodiscard]] const Options& options() const noexcept { return o_; }
    /// The estimated limit before truncation, and the no-load RTT (0: none yet).
    [[nodiscard]] double estimated_limit() const noexcept { return estimated_; }
    [[nodiscard]] std::uint64_t rtt_noload_ns() const noexcept { return static_cast<std::uint64_t>(rtt_noload_); }
    /// Samples since the last probe, and the jitter of the next one.
    [[nodiscard]] int probe_count() const noexcept { return probe_count_; }
    [[nodiscard]] double probe_jitter() const noexcept { return probe_jitter_; }

  private:
    static Options check(const Options& o) {
        const char* who = "tally::Vegas::Vegas: ";
        if (o.initial_limit < 1)
            detail::throw_invalid_argument(std::string(who) + "initial_limit " + std::to_string(o.initial_limit) +
                                           " is outside [1, 2^31 - 1]");
        if (o.max_concurrency < 1)
            detail::throw_invalid_argument(std::string(who) + "max_concurrency " + std::to_string(o.max_concurrency) +
                                           " is outside [1, 2^31 - 1]");
        if (!(o.smoothing >= 0.0 && o.smoothing <= 1.0))
            detail::throw_invalid_argument(std::string(who) + "smoothing " + std::to_string(o.smoothing) +
                                           " is outside [0, 1]");
        if (o.probe_multiplier < 1)
            detail::throw_invalid_argument(std::string(who) + "probe_multiplier " + std::to_string(o.probe_multiplier) +
                                           " is outside [1, 2^31 - 1]");
        if (!o.alpha || !o.beta || !o.threshold || !o.increase || !o.decrease)
            detail::throw_invalid_argument(std::string(who) +
                                           "alpha, beta, threshold, increase and decrease must be non-null");
        return o;
    }

    void reset_probe_jitter() noexcept {
        // splitmix64, 53 bits, mapped onto [0.5, 1) as nextDouble(0.5, 1) does.
        std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
        probe_jitter_ = 0.5 + u * 0.5;
    }
    [[nodiscard]] bool should_probe() const noexcept {
        return probe_jitter_ * o_.probe_multiplier * estimated_ <= static_cast<double>(probe_count_);
    }

    // Java computes it first; nothing else reads it, so only the rules do.
    [[nodiscard]] int queue_size(std::int64_t rtt, double est) const noexcept {
        return detail::java_d2i(std::ceil(est * (1 - static_cast<double>(rtt_noload_) / static_cast<double>(rtt))));
    }
    [[nodiscard]] bool default_rules() const noexcept {
        return o_.alpha == default_alpha && o_.beta == default_beta && o_.threshold == default_threshold &&
               o_.increase == default_increase && o_.decrease == default_decrease;
    }

    int update(std::int64_t rtt, int inflight, bool dropped) noexcept {
        const double est = estimated_;
        double target;
        if (dropped) {
            target = o_.decrease(est);
        } else if (static_cast<double>(detail::java_imul(inflight, 2)) < est) {
            return detail::java_d2i(est);
        } else if (const int queue = queue_size(rtt, est); default_rules()) {
            // Netflix's five default rules share one log10 of (int) L: the
            // same values as the calls below, without five indirect calls.
            const int k = detail::log10_root_int(detail::java_d2i(est));
            if (queue <= k) {
                target = est + 6 * k;
            } else if (queue < 3 * k) {
                target = est + k;
            } else if (queue > 6 * k) {
                target = est - k;
            } else {
                return detail::java_d2i(est);
            }
        } else {
            const int l = detail::java_d2i(est);
            const int alpha = o_.alpha(l);
            const int beta = o_.beta(l);
            const int threshold = o_.threshold(l);
            if (queue <= threshold) {
                target = est + beta;
            } else if (queue < alpha) {
                target = o_.increase(est);
            } else if (queue > beta) {
                target = o_.decrease(est);
            } else {
                return detail::java_d2i(est);
            }
        }
        target = detail::java_max(1.0, detail::java_min(static_cast<double>(o_.max_concurrency), target));
        target = detail::rounded((1 - o_.smoothing) * est) + detail::rounded(o_.smoothing * target);
        estimated_ = target;
        return detail::java_d2i(target);
    }

    Options o_;
    double estimated_;
    std::int64_t rtt_noload_ = 0;
    int limit_;
    int probe_count_ = 0;
    double probe_jitter_ = 0;
    std::uint64_t rng_;
};

/// Gradient2::Options: the fields and defaults of Netflix's builder.
struct Gradient2Options {
    int initial_limit = 20;
    int min_limit = 20;
    int max_concurrency = 200;
    double smoothing = 0.2;      ///< in [0, 1]
    int queue_size = 4;          ///< growth allowed while latency stays low
    double rtt_tolerance = 1.5;  ///< >= 1, as Gradient2Limit checks
    int long_window = 600;       ///< samples in the long RTT's average
};

/// Gradient2: the limit follows the ratio of a long-term average RTT to the
/// current RTT (Netflix concurrency-limits' Gradient2Limit). Per sample: the
/// long RTT is an exponential average (window long_window, the first 10
/// samples a plain mean), cut by 5 % when above twice the sample's RTT; a
/// sample with inflight < L / 2 leaves the limit; otherwise gradient =
/// max(0.5, min(1, rtt_tolerance * long / rtt)), target = L * gradient +
/// queue_size, L = (1 - smoothing) L + smoothing target, clamped to
/// [min_limit, max_concurrency]; the limit is (int) L. Identical to
/// Gradient2Limit.onSample + getLimit() on every sample sequence. Memory: 96
/// bytes. Thread safety: none (a value type).
///
///   tally::Gradient2 g({.max_concurrency = 1000});
///   int limit = g.on_sample(start_ns, rtt_ns, inflight, false);
class Gradient2 {
  public:
    using Options = Gradient2Options;

    explicit Gradient2(Options o = {})
        : o_(check(o)),
          factor_(2.0 / detail::java_iadd(o.long_window, 1)),
          keep_(1 - factor_),
          estimated_(o.initial_limit),
          limit_(o.initial_limit) {}

    int on_sample(std::uint64_t /*start_ns*/, std::uint64_t rtt_ns, int inflight, bool /*dropped*/) noexcept {
        const double est = estimated_;
        const double queue = static_cast<double>(o_.queue_size);
        const double short_rtt = static_cast<double>(detail::java_long(rtt_ns));
        const double long_rtt = add_long_rtt(short_rtt);
        if (ratio_above_two(long_rtt, short_rtt)) long_value_ = long_value_ * 0.95;
        // limit_ is (int) estimated_ at all times, so the app-limited path returns it as it is
        if (static_cast<double>(inflight) < est / 2) return limit_;
        const double gradient = detail::java_max(0.5, detail::java_min(1.0, o_.rtt_tolerance * long_rtt / short_rtt));
        double target = detail::rounded(est * gradient) + queue;
        target = detail::rounded(est * (1 - o_.smoothing)) + detail::rounded(target * o_.smoothing);
        target = detail::java_max(static_cast<double>(o_.min_limit),
                                  detail::java_min(static_cast<double>(o_.max_concurrency), target));
        estimated_ = target;
        return limit_ = detail::java_d2i(target);
    }
    [[nodiscard]] int limit() const noexcept { return limit_; }
    [[nodiscard]] const Options& options() const noexcept { return o_; }
    [[nodiscard]] double estimated_limit() const noexcept { return estimated_; }
    /// The long-term RTT average, in ns (0 before the first sample).
    [[nodiscard]] double long_rtt_ns() const noexcept { return long_value_; }

  private:
    static constexpr int warmup = 10;

    static Options check(const Options& o) {
        const char* who = "tally::Gradient2::Gradient2: ";
        if (o.initial_limit < 1)
            detail::throw_invalid_argument(std::string(who) + "initial_limit " + std::to_string(o.initial_limit) +
                                           " is outside [1, 2^31 - 1]");
        if (o.min_limit < 0 || o.min_limit > o.max_concurrency)
            detail::throw_invalid_argument(std::string(who) + "min_limit " + std::to_string(o.min_limit) +
                                           " is outside [0, max_concurrency = " + std::to_string(o.max_concurrency) +
                                           "]");
        if (!(o.smoothing >= 0.0 && o.smoothing <= 1.0))
            detail::throw_invalid_argument(std::string(who) + "smoothing " + std::to_string(o.smoothing) +
                                           " is outside [0, 1]");
        if (!(o.rtt_tolerance >= 1.0) || std::isinf(o.rtt_tolerance))
            detail::throw_invalid_argument(std::string(who) + "rtt_tolerance " + std::to_string(o.rtt_tolerance) +
                                           " is outside [1, inf)");
        if (o.long_window < 1)
            detail::throw_invalid_argument(std::string(who) + "long_window " + std::to_string(o.long_window) +
                                           " is outside [1, 2^31 - 1]");
        return o;
    }

    // Java's `a / b > 2`, without the division on the path most samples
    // take. For b > 0, the rounded quotient exceeds 2 exactly when
    // a / b > 2 + 2^-52 (the midpoint to 2's successor rounds to 2, even),
    // i.e. a - 2b > b * 2^-52: 2b and b * 2^-52 are exact, and so is
    // a - 2b wherever the answer is close (Sterbenz: 2b <= a <= 4b); outside
    // that range its rounding cannot cross the bound.
    static bool ratio_above_two(double a, double b) noexcept {
        if (!(b > 0)) return a / b > 2;
        return a - 2 * b > b * 0x1p-52;
    }

    // Netflix's ExpAvgMeasurement(long_window, 10).
    double add_long_rtt(double sample) noexcept {
        if (long_count_ < warmup) {
            ++long_count_;
            long_sum_ += sample;
            long_value_ = long_sum_ / long_count_;
        } else {
            long_value_ = detail::rounded(long_value_ * keep_) + detail::rounded(sample * factor_);
        }
        return long_value_;
    }

    Options o_;
    // ExpAvgMeasurement's factor, 2 / (long_window + 1), and 1 - factor:
    // the values Java computes on every sample, computed once.
    double factor_;
    double keep_;
    double estimated_;
    double long_value_ = 0;
    double long_sum_ = 0;
    int long_count_ = 0;
    int limit_;
};

/// FixedConcurrency::Options: the fields and defaults of Netflix's builder.
struct FixedConcurrencyOptions {
    int limit = 20;
};

/// FixedConcurrency: a constant limit (Netflix's FixedLimit), for a
/// ConcurrencyLimiter that only counts. Samples are not even delivered to it
/// (ConcurrencyLimiter skips the fold), so a permit costs two atomics.
/// Memory: 4 bytes. Thread safety: immutable.
///
///   tally::ConcurrencyLimiter<tally::FixedConcurrency> lim(tally::FixedConcurrency({.limit = 64}));
class FixedConcurrency {
  public:
    using Options = FixedConcurrencyOptions;
    static constexpr bool ignores_samples = true;

    explicit FixedConcurrency(Options o = {}) : limit_(o.limit) {
        if (o.limit < 0)
            detail::throw_invalid_argument("tally::FixedConcurrency::FixedConcurrency: limit " +
                                           std::to_string(o.limit) + " is outside [0, 2^31 - 1]");
    }
    int on_sample(std::uint64_t, std::uint64_t, int, bool) noexcept { return limit_; }
    [[nodiscard]] int limit() const noexcept { return limit_; }

  private:
    int limit_;
};

/// A permit from a concurrency limiter: move-only, RAII. Give it a verdict:
/// success(now_ns) (the call worked: its RTT is a sample), dropped(now_ns)
/// (timed out or shed downstream: the limit backs off), ignore() (the
/// outcome says nothing about capacity, e.g. a client error: no sample). A
/// permit destroyed without a verdict is ignored. An empty permit (the
/// limiter was full) converts to false; verdicts on it do nothing. The
/// verdicts are Netflix's Limiter.Listener onSuccess / onDropped / onIgnore.
/// Memory: 32 bytes. Thread safety: one permit, one thread at a time; any
/// thread may give the verdict.
///
///   auto p = limiter.try_acquire(now_ns);  // see ConcurrencyLimiter
///   if (p) { serve(); p.success(tally::SteadyClock::now_ns()); }
template <class Owner>
class ConcurrencyPermit {
  public:
    ConcurrencyPermit() noexcept = default;
    ConcurrencyPermit(ConcurrencyPermit&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)),
          start_ns_(o.start_ns_),
          inflight_(o.inflight_),
          limit_(o.limit_),
          partition_(o.partition_) {}
    ConcurrencyPermit& operator=(ConcurrencyPermit&& o) noexcept {
        if (this != &o) {
            ignore();
            owner_ = std::exchange(o.owner_, nullptr);
            start_ns_ = o.start_ns_;
            inflight_ = o.inflight_;
            limit_ = o.limit_;
            partition_ = o.partition_;
        }
        return *this;
    }
    ConcurrencyPermit(const ConcurrencyPermit&) = delete;
    ConcurrencyPermit& operator=(const ConcurrencyPermit&) = delete;
    ~ConcurrencyPermit() { ignore(); }

    explicit operator bool() const noexcept { return owner_ != nullptr; }

    void success(std::uint64_t now_ns) noexcept { finish(now_ns, false); }
    void dropped(std::uint64_t now_ns) noexcept { finish(now_ns, true); }
    void ignore() noexcept {
        if (Owner* o = std::exchange(owner_, nullptr)) o->release_ignore(partition_);
    }

    /// When it was granted, and the permits in flight counting it then.
    [[nodiscard]] std::uint64_t start_ns() const noexcept { return start_ns_; }
    [[nodiscard]] int inflight_at_start() const noexcept { return inflight_; }
    /// The limit in force when it was granted, the one its admission was
    /// checked against: inflight_at_start() <= limit_at_start(), except for
    /// a PartitionedConcurrencyLimiter permit granted on its partition's
    /// guaranteed share.
    [[nodiscard]] int limit_at_start() const noexcept { return limit_; }

  private:
    friend Owner;
    ConcurrencyPermit(Owner* o, std::uint64_t start_ns, detail::ConcurrencyGrant g, std::size_t partition) noexcept
        : owner_(o), start_ns_(start_ns), inflight_(g.inflight), limit_(g.limit), partition_(partition) {}

    void finish(std::uint64_t now_ns, bool drop) noexcept {
        if (Owner* o = std::exchange(owner_, nullptr)) {
            // A clock that went backwards reads as 0; the core makes it 1 ns.
            const std::uint64_t rtt = now_ns > start_ns_ ? now_ns - start_ns_ : 0;
            o->release_sample(partition_, detail::ConcurrencySample{start_ns_, rtt, inflight_, drop});
        }
    }

    Owner* owner_ = nullptr;
    std::uint64_t start_ns_ = 0;
    int inflight_ = 0;
    int limit_ = 0;
    std::size_t partition_ = 0;
};

/// ConcurrencyLimiter: admits a call while fewer than limit() are in flight,
/// the limit set by an adaptive Algorithm (Aimd, Vegas, Gradient2) from the
/// RTT of each finished call, as Netflix concurrency-limits' SimpleLimiter.
/// Guarantee: a permit is granted only while inflight < the limit in force,
/// so no grant takes inflight() past the limit (a lowered limit admits
/// nobody until enough permits come back). Cost: try_acquire is one
/// compare-exchange; ignore() one fetch_sub; success/dropped one fetch_add
/// that also takes the fold lock, and two plain stores that publish the new
/// limit and unlock. The fold never delays an acquire: a releaser that finds
/// another folding queues its sample and leaves (two that arrive at once
/// fold in turn); every
/// sample is applied, in some order, by the next fold at the latest
/// (docs/concurrency.md). acquire_until waits, oldest or
/// newest waiter first (WaitOrder), never past its deadline. Memory: about
/// 2.5 KiB. Thread safety: all calls are thread-safe.
///
///   tally::ConcurrencyLimiter<tally::Gradient2> lim;
///   if (auto permit = lim.try_acquire(now_ns)) {
///       bool ok = call_backend();
///       ok ? permit.success(tally::SteadyClock::now_ns()) : permit.dropped(tally::SteadyClock::now_ns());
///   } else reply_503();
template <ConcurrencyAlgorithm Algorithm>
class ConcurrencyLimiter {
  public:
    using Permit = ConcurrencyPermit<ConcurrencyLimiter>;

    explicit ConcurrencyLimiter(Algorithm algorithm = Algorithm{}, WaitOrder order = WaitOrder::fifo)
        : core_(std::move(algorithm), order) {}
    ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
    ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;

    /// A permit if fewer than limit() are in flight, else an empty one.
    [[nodiscard]] Permit try_acquire(std::uint64_t now_ns) noexcept {
        const detail::ConcurrencyGrant g = core_.try_acquire();
        return g.inflight ? Permit(this, now_ns, g, 0) : Permit();
    }
    /// Waits for a permit until deadline_ns (SteadyClock time); empty if the
    /// deadline passed first. The permit's start is when it was granted.
    [[nodiscard]] Permit acquire_until(std::uint64_t deadline_ns) {
        const detail::ConcurrencyGrant g = core_.acquire_until(deadline_ns);
        return g.inflight ? Permit(this, SteadyClock::now_ns(), g, 0) : Permit();
    }
    [[nodiscard]] Permit acquire_for(std::uint64_t timeout_ns) {
        const std::uint64_t now = SteadyClock::now_ns();
        return acquire_until(now + std::min(timeout_ns, std::numeric_limits<std::uint64_t>::max() - now));
    }

    [[nodiscard]] int limit() const noexcept { return core_.limit(); }
    [[nodiscard]] int inflight() const noexcept { return core_.inflight(); }
    /// Callers blocked in acquire_until.
    [[nodiscard]] int waiters() const noexcept { return core_.waiters(); }
    /// A copy of the algorithm's state, every finished sample applied.
    [[nodiscard]] Algorithm algorithm() noexcept { return core_.algorithm(); }

  private:
    friend Permit;
    void release_ignore(std::size_t) noexcept { core_.release_ignore(); }
    void release_sample(std::size_t, const detail::ConcurrencySample& s) noexcept { core_.release_sample(s); }

    detail::ConcurrencyCore<Algorithm> core_;
};

/// PartitionedConcurrencyLimiter: one adaptive limit shared by partitions
/// with guaranteed shares (Netflix's AbstractPartitionedLimiter, e.g. live
/// 0.9, batch 0.1). Partition p's share is max(1, ceil(limit * share_p)). A
/// call in p is admitted while the total in flight is below the limit
/// (borrowing what others leave unused), and, once the total is at the limit,
/// while p holds fewer than its share: a partition is never shut out of its
/// share by another's borrowing, and borrowing never takes the total past the
/// limit (the total exceeds it only by shares reclaimed from borrowers, and
/// falls back as their permits return). An index past the partitions gets
/// an empty permit. Cost: two atomics more per call than ConcurrencyLimiter.
/// Memory: about 2.5 KiB + 128 bytes per partition. Thread safety: all calls.
///
///   tally::PartitionedConcurrencyLimiter<tally::Vegas> lim({0.9, 0.1});
///   auto permit = lim.try_acquire(is_batch ? 1 : 0, now_ns);
template <ConcurrencyAlgorithm Algorithm>
class PartitionedConcurrencyLimiter {
  public:
    using Permit = ConcurrencyPermit<PartitionedConcurrencyLimiter>;

    explicit PartitionedConcurrencyLimiter(std::vector<double> shares, Algorithm algorithm = Algorithm{})
        : core_(std::move(algorithm), WaitOrder::fifo), parts_(check(shares)) {
        for (std::size_t i = 0; i < shares.size(); ++i) parts_[i].share = shares[i];
    }
    PartitionedConcurrencyLimiter(const PartitionedConcurrencyLimiter&) = delete;
    PartitionedConcurrencyLimiter& operator=(const PartitionedConcurrencyLimiter&) = delete;

    [[nodiscard]] Permit try_acquire(std::size_t partition, std::uint64_t now_ns) noexcept {
        if (partition >= parts_.size()) return Permit();
        Part& p = parts_[partition];
        if (const detail::ConcurrencyGrant g = core_.try_acquire(); g.inflight) {
            p.busy.fetch_add(1, std::memory_order_relaxed);
            return Permit(this, now_ns, g, partition);
        }
        const int share = share_limit(partition);
        int b = p.busy.load(std::memory_order_relaxed);
        while (b < share) {
            if (p.busy.compare_exchange_weak(b, b + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
                if (const detail::ConcurrencyGrant g = core_.add_unchecked(); g.inflight)
                    return Permit(this, now_ns, g, partition);
                p.busy.fetch_sub(1, std::memory_order_relaxed);
                return Permit();
            }
        }
        return Permit();
    }

    [[nodiscard]] std::size_t partitions() const noexcept { return parts_.size(); }
    [[nodiscard]] double share(std::size_t partition) const noexcept { return parts_[partition].share; }
    /// max(1, ceil(limit() * share)), as Netflix computes a partition's limit.
    [[nodiscard]] int share_limit(std::size_t partition) const noexcept {
        return detail::java_d2i(
            detail::java_max(1.0, std::ceil(static_cast<double>(limit()) * parts_[partition].share)));
    }
    [[nodiscard]] int inflight(std::size_t partition) const noexcept {
        return parts_[partition].busy.load(std::memory_order_relaxed);
    }
    [[nodiscard]] int limit() const noexcept { return core_.limit(); }
    [[nodiscard]] int inflight() const noexcept { return core_.inflight(); }
    [[nodiscard]] Algorithm algorithm() noexcept { return core_.algorithm(); }

  private:
    friend Permit;
    struct alignas(false_sharing_size) Part {
        std::atomic<int> busy{0};
        double share = 0;
    };

    static std::size_t check(const std::vector<double>& shares) {
        const char* who = "tally::PartitionedConcurrencyLimiter::PartitionedConcurrencyLimiter: ";
        if (shares.empty()) detail::throw_invalid_argument(std::string(who) + "shares is empty; give at least one");
        double sum = 0;
        for (std::size_t i = 0; i < shares.size(); ++i) {
            if (!(shares[i] >= 0.0 && shares[i] <= 1.0))
                detail::throw_invalid_argument(std::string(who) + "shares[" + std::to_string(i) + "] " +
                                               std::to_string(shares[i]) + " is outside [0, 1]");
            sum += shares[i];
        }
        if (sum > 1.0 + 1e-9)
            detail::throw_invalid_argument(std::string(who) + "the shares sum to " + std::to_string(sum) + ", above 1");
        return shares.size();
    }

    void release_ignore(std::size_t partition) noexcept {
        parts_[partition].busy.fetch_sub(1, std::memory_order_release);
        core_.release_ignore();
    }
    void release_sample(std::size_t partition, const detail::ConcurrencySample& s) noexcept {
        parts_[partition].busy.fetch_sub(1, std::memory_order_release);
        core_.release_sample(s);
    }

    detail::ConcurrencyCore<Algorithm> core_;
    std::vector<Part> parts_;
};

TALLY_END_NAMESPACE
