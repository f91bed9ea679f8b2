// Redis Cluster key routing (tally/redis/cluster.hpp): CRC16 and hash tags
// against the values the Redis Cluster specification and CLUSTER KEYSLOT give.
#include <tally/redis/cluster.hpp>

#include <string>

#include "catch.hpp"

using tally::redis::cluster_slot;
using tally::redis::crc16;
using tally::redis::hash_tag;

TEST_CASE("cluster routing: CRC16 and slots as Redis Cluster computes them", "[redis][cluster]") {
    // The specification's check value, and CLUSTER KEYSLOT examples from the
    // Redis documentation.
    static_assert(crc16("123456789") == 0x31C3);
    CHECK(crc16("") == 0);
    CHECK(cluster_slot("123456789") == 0x31C3);
    CHECK(cluster_slot("somekey") == 11058);
    CHECK(cluster_slot("foo{hash_tag}") == 2515);
    CHECK(cluster_slot("bar{hash_tag}") == 2515);
    // Binary keys are bytes.
    const std::string binary("a\0b", 3);
    CHECK(cluster_slot(binary) == (crc16(binary) & 16383));
    CHECK(crc16(binary) != crc16("a"));
}

TEST_CASE("cluster routing: hash tags", "[redis][cluster]") {
    CHECK(hash_tag("{tenant:7}:user:42") == "tenant:7");
    CHECK(hash_tag("tally:{tenant:7}:user:42") == "tenant:7");
    CHECK(cluster_slot("tally:{tenant:7}:user:42") == cluster_slot("{tenant:7}:global"));
    CHECK(hash_tag("{}x") == "{}x");          // empty tag: the whole key
    CHECK(hash_tag("{x") == "{x");            // no closing brace
    CHECK(hash_tag("a}{b}c") == "b");         // the first '{', then the first '}' after it
    CHECK(hash_tag("{a}{b}") == "a");
    CHECK(hash_tag("{{a}}") == "{a");
    CHECK(hash_tag("plain") == "plain");
}
