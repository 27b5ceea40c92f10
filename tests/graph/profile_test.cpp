// Profiles: most specific entry wins, equal specificity that disagrees is an error, a subclass
// matches its base's entries, and save/load round-trips one entry a line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "graph/recording.hpp"
#include "iron/iron.hpp"
#include "test_util.hpp"

using namespace iron;
using iron::testing::expect_error;

namespace {

const Declaration& gemm() { return *catalog_entry("GEMM").declaration; }
const Declaration& projection() { return *catalog_entry("ProjectionGEMM").declaration; }

TEST(Profile, MostSpecificEntryWins) {
  Profile p;
  p.add("GEMM", {{"tile_n", int64_t(8)}});
  p.add("GEMM", {{"N", int64_t(576)}, {"tile_n", int64_t(32)}});
  p.add("GEMM", {{"N", int64_t(576)}, {"K", int64_t(1536)}, {"tile_n", int64_t(64)}});
  EXPECT_EQ(p.tunables_for(gemm(), {{"M", int64_t(1)}, {"K", int64_t(64)}, {"N", int64_t(64)}}).integer("tile_n"), 8);
  EXPECT_EQ(p.tunables_for(gemm(), {{"M", int64_t(1)}, {"K", int64_t(64)}, {"N", int64_t(576)}}).integer("tile_n"), 32);
  EXPECT_EQ(p.tunables_for(gemm(), {{"M", int64_t(1)}, {"K", int64_t(1536)}, {"N", int64_t(576)}}).integer("tile_n"), 64);
  auto op = p.make("GEMM", {{"M", int64_t(2)}, {"K", int64_t(1536)}, {"N", int64_t(576)}});
  EXPECT_EQ(op->tunables().integer("tile_n"), 64);
  // A tunable given explicitly is pinned: the profile does not override it.
  auto pinned = p.make("GEMM", {{"M", int64_t(2)}, {"K", int64_t(1536)}, {"N", int64_t(576)}, {"tile_n", int64_t(4)}});
  EXPECT_EQ(pinned->tunables().integer("tile_n"), 4);
}

TEST(Profile, EqualSpecificityThatDisagreesIsAnError) {
  Profile p;
  p.add("GEMM", {{"N", int64_t(576)}, {"tile_n", int64_t(32)}});
  p.add("GEMM", {{"K", int64_t(64)}, {"tile_n", int64_t(16)}});
  expect_error([&] { p.tunables_for(gemm(), {{"M", int64_t(1)}, {"K", int64_t(64)}, {"N", int64_t(576)}}); },
               ErrorKind::value, {"profile is ambiguous for GEMM", "tile_n=32", "tile_n=16", "equal specificity"});
  // Equal specificity that agrees is fine.
  Profile q;
  q.add("GEMM", {{"N", int64_t(576)}, {"tile_n", int64_t(32)}});
  q.add("GEMM", {{"K", int64_t(64)}, {"tile_n", int64_t(32)}});
  EXPECT_EQ(q.tunables_for(gemm(), {{"M", int64_t(1)}, {"K", int64_t(64)}, {"N", int64_t(576)}}).integer("tile_n"), 32);
}

TEST(Profile, ASubclassMatchesItsBasesEntries) {
  Profile p;
  p.add("GEMM", {{"tile_n", int64_t(24)}});
  EXPECT_EQ(p.tunables_for(projection(), {{"M", int64_t(4)}, {"K", int64_t(8)}, {"N", int64_t(8)}}).integer("tile_n"), 24);
  // ...but a base does not take its subclass's.
  Profile q;
  q.add("ProjectionGEMM", {{"tile_n", int64_t(40)}});
  EXPECT_TRUE(q.tunables_for(gemm(), {{"M", int64_t(4)}, {"K", int64_t(8)}, {"N", int64_t(8)}}).empty());
}

TEST(Profile, AddRefusesUnknownFieldsAndEntriesWithoutATunable) {
  Profile p;
  expect_error([&] { p.add("GEMM", {{"tile_q", int64_t(3)}}); }, ErrorKind::type, {"GEMM declares no field", "tile_q"});
  expect_error([&] { p.add("GEMM", {{"N", int64_t(3)}}); }, ErrorKind::type, {"must give a tunable"});
  expect_error([&] { p.add("Nope", {{"tile_n", int64_t(3)}}); }, ErrorKind::value, {"no operator 'Nope'"});
}

TEST(Profile, SaveLoadRoundTripsOneEntryALine) {
  Profile p;
  p.add("GEMM", {{"N", int64_t(576)}, {"tile_n", int64_t(32)}});
  p.add("ProjectionGEMM", {{"epilogue", std::string("silu")}, {"tile_n", int64_t(8)}});
  auto dir = std::filesystem::temp_directory_path() / ("iron_profile_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "cpu.json").string();
  p.save(path);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text,
            "{\"entries\": [\n  {\"operator\":\"GEMM\",\"N\":576,\"tile_n\":32},\n"
            "  {\"operator\":\"ProjectionGEMM\",\"epilogue\":\"silu\",\"tile_n\":8}\n]}\n");
  Profile q = Profile::load(path);
  ASSERT_EQ(q.entries().size(), 2u);
  EXPECT_EQ(q.entries()[1].dims, (Fields{{"epilogue", std::string("silu")}}));
  EXPECT_EQ(q.entries()[1].tunables, (Fields{{"tile_n", int64_t(8)}}));
  // A graph takes a directory of <device>.json.
  Profile from_dir = Profile::load_for_device(dir.string(), "cpu");
  EXPECT_EQ(from_dir.entries().size(), 2u);
  EXPECT_TRUE(Profile::load_for_device(dir.string(), "cuda").empty());
}

TEST(Profile, LoadNamesWhatIsWrong) {
  auto path = (std::filesystem::temp_directory_path() / ("iron_bad_profile_" + std::to_string(::getpid()) + ".json")).string();
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("[1, 2]");
  expect_error([&] { Profile::load(path); }, ErrorKind::value, {path, "a profile is {\"entries\": [...]}"});
  write("{\"entries\": [{\"operator\": \"Conv9\", \"tile_n\": 4}]}");
  expect_error([&] { Profile::load(path); }, ErrorKind::value, {"entry 0", "no operator 'Conv9'"});
  write("{\"entries\": [{\"operator\": \"GEMM\", \"tile_z\": 4}]}");
  expect_error([&] { Profile::load(path); }, ErrorKind::value, {"entry 0", "declares no field", "tile_z"});
  write("{\"entries\": [");
  expect_error([&] { Profile::load(path); }, ErrorKind::value, {"not JSON"});
}

TEST(Profile, AGraphsProfileReachesItsSteps) {
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {8, 4});
    Outputs body() override { return {functional::linear(x, w)}; }
  } net;
  Profile p;
  p.add("GEMM", {{"N", int64_t(8)}, {"tile_n", int64_t(2)}});
  net.set_profile(p);
  net.load_state_dict({{"w", iron::testing::random_tensor({8, 4})}});
  EXPECT_EQ(net.compile({{"x", {3, 4}}}).recording().steps[0].op->tunables().integer("tile_n"), 2);
}

// What a binding recording a graph's body its own way (Python's child graphs) uses: the steps
// recorded inside the scope take its profile, those after it the graph's again.
TEST(Profile, AProfileScopeReachesTheStepsRecordedInIt) {
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {8, 4});
    Profile inner;
    Outputs body() override {
      Handle a;
      {
        ProfileScope scope(inner, "net");
        a = functional::linear(x, w);
      }
      return {a, functional::linear(x + x, w)};
    }
  } net;
  net.inner.add("GEMM", {{"N", int64_t(8)}, {"tile_n", int64_t(2)}});
  net.load_state_dict({{"w", iron::testing::random_tensor({8, 4})}});
  const auto& steps = net.compile({{"x", {3, 4}}}).recording().steps;
  EXPECT_EQ(steps.front().op->tunables().integer("tile_n"), 2);
  EXPECT_NE(steps.back().op->tunables().integer("tile_n"), 2);
  expect_error([&] { ProfileScope scope(net.inner, "outside"); }, ErrorKind::type, {"outside", "graph's body"});
}

}  // namespace
