// Every input the fuzzers ever crashed on (tests/fuzz_regressions/<target>/) and every seed
// (fuzz/corpus/<target>/), run through the same code as the fuzz target: the library must accept
// it or refuse it with iron::Error; any other exception or a broken invariant is a failure (and a
// crash or sanitizer report fails the sanitizer builds).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "targets.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* root : {"tests/fuzz_regressions", "fuzz/corpus"}) {
    const fs::path dir = fs::path(IRON_SOURCE_DIR) / root / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class FuzzRegressions : public ::testing::TestWithParam<iron::fuzz::NamedTarget> {};

TEST_P(FuzzRegressions, SavedInputsAreAcceptedOrRefusedWithIronError) {
  const auto& target = GetParam();
  const std::vector<fs::path> files = inputs_of(std::string(target.name));
  // The binary seeds (GGUF, safetensors) are git-ignored: the build writes them with
  // fuzz/make_corpus.py (the target iron_fuzz_seeds, fuzz/CMakeLists.txt).
  EXPECT_FALSE(files.empty()) << "no seeds or regressions for " << target.name
                              << " (the build writes the binary seeds with fuzz/make_corpus.py: build the target iron_fuzz_seeds, or run it by hand)";
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const std::vector<uint8_t> bytes = read_all(file);
    try {
      target.run(bytes.data(), bytes.size());  // iron::Error is caught inside
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "unexpected non-standard exception";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fuzz, FuzzRegressions, ::testing::ValuesIn(iron::fuzz::kTargets),
                         [](const auto& test) { return std::string(test.param.name); });

}  // namespace
