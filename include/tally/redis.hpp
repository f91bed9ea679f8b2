// tally/redis.hpp: the whole tally::redis room (fleet-wide limits with the
// state in Redis; needs hiredis, CMake target tally::redis). Not part of
// tally/tally.hpp, which stays dependency-free.
#ifndef TALLY_REDIS_HPP
#define TALLY_REDIS_HPP

#include "redis/options.hpp"
#include "redis/protocol.hpp"
#include "redis/client.hpp"
#include "redis/cluster.hpp"
#include "redis/gcra.hpp"
#include "redis/sliding_window.hpp"

#endif  // TALLY_REDIS_HPP
