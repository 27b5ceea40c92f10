// The error contract: misuse and bad input, one row each, with what the message must name. A
// row fails if nothing is raised, if the kind differs, or if the message leaves out its phrase.
// The table is printed, so `iron_tests --gtest_filter=ErrorContract*` documents the messages.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "io/io_test_util.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/io/gguf.hpp"
#include "iron/iron.hpp"
#include "iron/models/runner.hpp"

namespace F = iron::functional;
using namespace iron;

namespace {

struct Net : Graph {
  Input x = input("x");
  Scratchpad rows = scratchpad("rows");
  Scratchpad at_row = scratchpad("at_row", 0);
  State cache = state("cache", {4, 3});
  Net() : Graph("net") {}
  Outputs body() override {
    Handle(cache)[at(at_row)].assign(F::copy(x[0]));
    return {F::silu(x[upto(rows)])};
  }
};

struct Lookup : Graph {
  Input ids = input("ids");
  Weight table = weight("table", Tensor::zeros({5, 2}, f32));
  Lookup() : Graph("lookup") {}
  Outputs body() override { return {F::copy(table[ids])}; }
};

struct Row {
  const char* what;
  std::function<void()> run;
  ErrorKind kind;
  std::string phrase;
};

std::string temp_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  auto path = (std::filesystem::temp_directory_path() / ("iron_contract_" + name)).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

TEST(ErrorContract, EveryRowRaisesWhatItNames) {
  IRON_NEEDS_STORIES();
  Net net;
  CompiledGraph& v = net.compile({{"x", {2, 3}}});
  Tensor x = Tensor::zeros({2, 3}, f32);
  auto stories = iron::io::testing::read_bytes(iron::io::testing::stories_path());
  std::vector<uint8_t> truncated(stories.begin(), stories.begin() + 5000);
  std::vector<uint8_t> short_data(stories.begin(), stories.end() - 4096);  // last tensor runs past the end
  std::string truncated_path = temp_file("truncated.gguf", truncated);
  std::string short_path = temp_file("short.gguf", short_data);
  std::string profile_op = temp_file("op.json", {});
  std::ofstream(profile_op) << R"({"entries": [{"operator": "Conv7", "tile_n": 8}]})";
  std::string profile_field = temp_file("field.json", {});
  std::ofstream(profile_field) << R"({"entries": [{"operator": "GEMM", "tile_q": 8}]})";
  Lookup lookup;
  CompiledGraph& gather = lookup.compile({{"ids", InputSpec({3}, i32)}});
  models::RunnerOptions small;
  small.model.context = 8;
  auto runner = models::LlamaRunner::open(iron::io::testing::stories_path(), small);

  std::vector<Row> table = {
      {"wrong input shape", [&] { v({Tensor::zeros({3, 3}, f32)}, {{"rows", 1}}); }, ErrorKind::value,
       "input 'x' is (3, 3) f32; this version takes (2, 3) f32"},
      {"wrong input dtype", [&] { v({Tensor::zeros({2, 3}, bf16)}, {{"rows", 1}}); }, ErrorKind::value,
       "input 'x' is (2, 3) bf16"},
      {"missing per-call value", [&] { v({x}, {}); }, ErrorKind::type, "per-call value 'rows' is missing"},
      {"unknown per-call value", [&] { v({x}, {{"rows", 1}, {"colums", 2}}); }, ErrorKind::type,
       "no per-call value 'colums' (it takes: rows, at_row)"},
      {"value outside 30 bits", [&] { v({x}, {{"rows", int64_t(1) << 31}}); }, ErrorKind::value,
       "rows=2147483648 is outside 30 bits"},
      {"bound outside a view", [&] { v({x}, {{"rows", 3}}); }, ErrorKind::index, "bound rows of axis 0"},
      {"index outside a view", [&] { v({x}, {{"rows", 1}, {"at_row", 4}}); }, ErrorKind::index,
       "index at_row of axis 0 of cache(4, 3) f32 is 4, outside [0, 4)"},
      {"id outside its table", [&] { gather({Tensor::from_ints({0, 4, 5}, {3})}); }, ErrorKind::index,
       "id 5 at position 2 of input 'ids' is outside table's 5 rows [0, 5)"},
      {"tensor larger than its file", [&] { io::GgufFile::open(short_path); }, ErrorKind::value,
       "runs past the end of the file"},
      {"truncated file", [&] { open_checkpoint(truncated_path); }, ErrorKind::value, truncated_path},
      {"prompt longer than the context", [&] { runner->generate(std::vector<int32_t>(9, 1), 1, [](int32_t) {}); },
       ErrorKind::value, "the prompt has 9 tokens; the context holds 8"},
      {"profile naming an unknown operator", [&] { Profile::load(profile_op); }, ErrorKind::value,
       "no operator 'Conv7' in the catalog"},
      {"profile naming an unknown field", [&] { Profile::load(profile_field); }, ErrorKind::value,
       "GEMM declares no field 'tile_q'"},
  };
  std::printf("%-36s %-6s %s\n", "misuse or bad input", "kind", "message");
  for (const Row& row : table) {
    try {
      row.run();
      ADD_FAILURE() << row.what << ": nothing was raised";
    } catch (const Error& e) {
      static const char* kinds[] = {"value", "type", "index", "io"};
      std::printf("%-36s %-6s %s\n", row.what, kinds[int(e.kind())], e.what());
      EXPECT_EQ(int(e.kind()), int(row.kind)) << row.what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(row.phrase), std::string::npos)
          << row.what << ": '" << row.phrase << "' not in: " << e.what();
    }
  }
  // A full KV cache is reported as the reason generation stopped, not an error.
  std::vector<int32_t> out;
  auto stats = runner->generate({1}, 100, [&](int32_t id) { out.push_back(id); });
  EXPECT_EQ(stats.stop, "context full");
  EXPECT_EQ(out.size(), 7u);
}

}  // namespace
