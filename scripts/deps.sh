# Sourced by scripts/test, scripts/bench and scripts/ci-checks: installs what a
# fresh machine lacks. Debian/Ubuntu: apt-get. macOS: Homebrew. Elsewhere:
# prints exactly what to install and exits non-zero.
#
#   tally_need_packages <debian packages...> -- <brew formulae...>

tally_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else echo "tally: need root to run: $*" >&2; return 1
    fi
}

tally_need_packages() {
    local debs=() brews=() seen_sep=0
    for a in "$@"; do
        if [ "$a" = "--" ]; then seen_sep=1; continue; fi
        if [ $seen_sep -eq 0 ]; then debs+=("$a"); else brews+=("$a"); fi
    done
    case "$(uname -s)" in
    Linux)
        if command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then
            local missing=()
            for p in "${debs[@]}"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
            done
            if [ ${#missing[@]} -gt 0 ]; then
                echo "tally: installing ${missing[*]} (apt-get)"
                tally_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
                tally_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
            fi
            return 0
        fi
        ;;
    Darwin)
        if command -v brew >/dev/null 2>&1; then
            local missing=()
            for f in "${brews[@]}"; do brew list --formula "$f" >/dev/null 2>&1 || missing+=("$f"); done
            if [ ${#missing[@]} -gt 0 ]; then
                echo "tally: installing ${missing[*]} (brew)"
                brew install "${missing[@]}"
            fi
            return 0
        fi
        echo "tally: Homebrew not found. Install it (https://brew.sh), then: brew install ${brews[*]}" >&2
        exit 1
        ;;
    esac
    echo "tally: no apt-get or brew here. Install: a C++20 compiler (g++ >= 12 or clang >= 14), CMake >= 3.25," >&2
    echo "       Catch2 (v2.13 or v3), Google Benchmark, Python 3, redis-server, hiredis, pkg-config, PostgreSQL 15 with the hll and tdigest extensions and libpq; then re-run." >&2
    echo "       (Debian names: ${debs[*]})" >&2
    exit 1
}

# Base toolchain every script needs.
tally_base_deps() {
    tally_need_packages cmake make g++ catch2 libbenchmark-dev python3 python3-matplotlib redis-server redis-tools ca-certificates \
        libhiredis-dev pkg-config postgresql-15 postgresql-15-hll postgresql-15-tdigest libpq-dev \
        -- cmake catch2 google-benchmark python redis hiredis pkgconf postgresql@15 libpq
    # redis-server and redis-cli (redis-tools: the cluster test joins its nodes
    # with redis-cli --cluster create) are installed now: the Redis tests must find them and run
    # (tests/redis_server.hpp fails instead of skipping).
    export TALLY_REQUIRE_REDIS=1
    # PostgreSQL 15 with the hll and tdigest extensions, and libpq: tests/test_postgres.cpp
    # starts a server and must run (a missing server, extension or libpq fails). Homebrew
    # has no formulae for the two extensions, so on macOS the PostgreSQL tests may skip.
    if [ "$(uname -s)" = "Linux" ]; then export TALLY_REQUIRE_POSTGRES=1; fi
    # The presets (workflow presets, schema 6) need CMake 3.25.
    local v
    v=$(cmake --version | head -1 | sed 's/[^0-9.]*\([0-9][0-9.]*\).*/\1/')
    if [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -1)" != "3.25" ]; then
        echo "tally: CMake $v is too old; the presets need CMake >= 3.25 (Debian 12, Ubuntu 24.04, brew, or pip install cmake)" >&2
        exit 1
    fi
}

tally_jobs() {
    if command -v nproc >/dev/null 2>&1; then nproc; else sysctl -n hw.ncpu 2>/dev/null || echo 2; fi
}
