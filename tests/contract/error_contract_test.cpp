// The error contract: misuse and bad input, one row each, with what the message must name. A
// row fails if nothing is raised, if the kind differs, or if the message leaves out its phrase.
// The table is printed, so `iron_tests --gtest_filter=ErrorContract*` documents the messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_test_util.hpp"
#include "sanitized.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/io/files.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/iron.hpp"
#include "iron/models/bert.hpp"
#include "iron/models/describe.hpp"
#include "iron/models/llama.hpp"
#include "iron/models/runner.hpp"

namespace F = iron::functional;
using namespace iron;

namespace {

struct CacheAndSilu : Graph {
  Input x = input("x");
  Scratchpad rows = scratchpad("rows");
  Scratchpad at_row = scratchpad("at_row", 0);
  State cache = state("cache", {4, 3});
  CacheAndSilu() : Graph("net") {}
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
  auto path = (std::filesystem::temp_directory_path() / ("iron_contract_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

TEST(ErrorContract, EveryRowRaisesWhatItNames) {
  IRON_NEEDS_STORIES();
  CacheAndSilu net;
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
  // Bad input, round two (issue 17).
  const std::string fifo = (std::filesystem::temp_directory_path() / ("iron_contract_" + std::to_string(::getpid()) + ".fifo")).string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  io::testing::TinyHfModel i32_weight;
  i32_weight.dtypes["model.layers.0.self_attn.q_proj.weight"] = "I32";
  io::testing::TinyHfModel many_missing;
  many_missing.layers = 500;
  many_missing.omitted = "mlp.up_proj.weight";  // missing from each of 500 layers
  io::testing::TinyHfModel too_many_layers;
  too_many_layers.config_layers = 500;  // a bad num_hidden_layers: the weights hold one layer
  io::testing::TinyHfModel small_tokenizer;
  small_tokenizer.vocab = 300;
  small_tokenizer.tokenizer_json = std::string(IRON_SOURCE_DIR) + "/fuzz/corpus/tokenizer_json/gpt2.json";
  io::testing::TinyHfModel odd_names;
  odd_names.extra_tensors = {"evil\x1b[2J\n", std::string(70000, 'n')};
  // A config string that is not UTF-8 (the JSON parser quotes the bytes it stopped at).
  io::testing::TinyHfModel bad_utf8;
  const std::string bad_utf8_dir = bad_utf8.write("utf8");
  std::ofstream(bad_utf8_dir + "/config.json") << "{\"model_type\": \"lla\xff\x1b[2J\"}";
  const models::LlamaConfig stories_config = runner->config();
  std::string missing_message, last_message, utf8_message;
  // A row's run that also keeps its message, for the checks after the table.
  auto keeping = [](std::string& message, std::function<void()> fn) -> std::function<void()> {
    return [&message, fn] {
      try {
        fn();
      } catch (const Error& e) {
        message = e.what();
        throw;
      }
    };
  };

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
      {"a FIFO as a model (no hang)", [&] { io::MappedFile::open(fifo); }, ErrorKind::io,
       "is a FIFO, not a regular file"},
      {"a FIFO as a JSON file", [&] { io::read_json_file(fifo); }, ErrorKind::io, "is a FIFO, not a regular file"},
      {"a device as a profile", [&] { io::read_file("/dev/zero", io::kProfileLimit, "a profile"); }, ErrorKind::io,
       "/dev/zero: is a character device, not a regular file"},
      {"a profile over its cap", [&] { io::read_file(profile_op, 10, "a profile"); }, ErrorKind::value,
       "a profile is over the 10-byte limit"},
      {"a context past 2^30 positions",
       [&] {
         models::LlamaOptions huge;
         huge.context = huge.chunk = int64_t(1) << 62;  // context + chunk would overflow
         models::LlamaModel model(stories_config, huge);
       },
       ErrorKind::value, "context + chunk rows are positions, at most 2^30"},
      {"a write to a full device", [&] { io::write_file("/dev/full", "{}", "the trace"); }, ErrorKind::io,
       "/dev/full: cannot write the trace: No space left on device"},
      {"a config that is not there",
       [&] {
         models::DescribeOptions o;
         o.config_path = "/nonexistent/config.json";
         models::describe_checkpoint(iron::io::testing::stories_path(), o);
       },
       ErrorKind::io, "/nonexistent/config.json: cannot open the config"},
      {"an I32 weight matrix", [&] { models::LlamaRunner::open(i32_weight.write("i32")); }, ErrorKind::value,
       "wrong kind layers.0.attn.q i32, not a float or quantised type"},
      {"thousands of missing tensors",
       keeping(missing_message, [&] { models::LlamaRunner::open(many_missing.write("missing")); }),
       ErrorKind::value, ", ... and 480 more"},
      {"a layer count the weights do not hold", [&] { models::LlamaRunner::open(too_many_layers.write("layers")); },
       ErrorKind::value, "the config's layer count 500 is more than the weights hold: 1 (layers.0 to layers.0)"},
      {"a tokenizer short of the vocabulary", [&] { models::LlamaRunner::open(small_tokenizer.write("vocab")); },
       ErrorKind::value, "the tokenizer has 271 tokens, fewer than the model's vocabulary of 300"},
      {"control bytes, a 70 KB tensor name",
       keeping(last_message, [&] { models::LlamaRunner::open(odd_names.write("names")); }), ErrorKind::value, "extra evil\\x1b[2J\\n, nnnnn"},
      {"invalid UTF-8 in config.json", keeping(utf8_message, [&] { models::LlamaRunner::open(bad_utf8_dir); }),
       ErrorKind::value, "last read: '\"lla\\xff'"},
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
  // The cut lists: the one line stays short (it was 763 KB), a 70 KB name is cut at 200
  // characters, and no raw control byte reaches the terminal.
  EXPECT_LT(missing_message.size(), 2000u) << missing_message.substr(0, 3000);
  EXPECT_LT(last_message.size(), 1000u) << last_message.substr(0, 2000);
  EXPECT_EQ(last_message.find('\x1b'), std::string::npos);
  EXPECT_NE(last_message.find(std::string(200, 'n') + "..."), std::string::npos);
  EXPECT_EQ(utf8_message.find('\xff'), std::string::npos) << utf8_message;
  std::filesystem::remove(fifo);
  // A full KV cache is reported as the reason generation stopped, not an error.
  std::vector<int32_t> out;
  auto stats = runner->generate({1}, 100, [&](int32_t id) { out.push_back(id); });
  EXPECT_EQ(stats.stop, "context full");
  EXPECT_EQ(out.size(), 7u);
}

// A path is cut in the middle in every message that names it (a 5,051-byte line came from a
// long model path): the start and the file's name stay, with the path's length.
TEST(ErrorContract, LongPathsAreCutInTheMiddle) {
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 0; i < 20; ++i) dir += "/" + std::string(250, 'd');
  const std::string model = dir + "/model.gguf";
  const std::vector<std::pair<const char*, std::function<void()>>> entries = {
      {"a mapped file", [&] { io::MappedFile::open(model); }},
      {"a model", [&] { models::LlamaRunner::open(model); }},
      {"a safetensors directory", [&] { models::LlamaRunner::open(dir + "/model.safetensors"); }},
      {"a description", [&] { models::describe_checkpoint(model); }},
      {"a JSON file", [&] { io::read_json_file(dir + "/config.json"); }},
      {"a profile", [&] { Profile::load(dir + "/profile.json"); }},
      {"a sentence encoder", [&] { models::SentenceEncoder::open(dir); }},
  };
  for (const auto& [what, run] : entries) {
    try {
      run();
      ADD_FAILURE() << what << ": nothing was raised";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_LT(message.size(), 400u) << what << ": " << message.substr(0, 600);
      EXPECT_NE(message.find("ddd..."), std::string::npos) << what << ": " << message.substr(0, 600);
      EXPECT_NE(message.find(" bytes)"), std::string::npos) << what << ": " << message.substr(0, 600);
    }
  }
}

// A model size the weights do not bear out is refused in one line before anything is sized
// from it: no "a context of ... takes 4 GiB" warning first (a run of bad inputs found two
// lines, the warning then the error, for each of these).
TEST(ErrorContract, AbsurdSizesAreRefusedBeforeTheContextIsAnnounced) {
  IRON_NEEDS_STORIES();
  // stories260K claiming 4,096 blocks, or a key length of 4,096 ("llama.rope.dimension_count"
  // renamed in place: the two names are as long).
  const std::vector<uint8_t> stories = io::testing::read_bytes(io::testing::stories_path());
  auto patched = [&](const std::string& key, const std::string& new_key, uint32_t value) {
    std::vector<uint8_t> bytes = stories;
    const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
    EXPECT_NE(at, bytes.end()) << key;
    std::copy(new_key.begin(), new_key.end(), at);
    uint32_t type = 0;
    std::memcpy(&type, &*(at + std::ptrdiff_t(key.size())), 4);
    EXPECT_EQ(type, 4u) << key << " is not a u32";
    std::memcpy(&*(at + std::ptrdiff_t(key.size()) + 4), &value, 4);
    return temp_file(new_key + ".gguf", bytes);
  };
  const std::string blocks = patched("llama.block_count", "llama.block_count", 4096);
  const std::string key_length = patched("llama.rope.dimension_count", "llama.attention.key_length", 4096);
  // config.json claiming 4,096 layers, or a head_dim of 4,096, with a context long enough that
  // the cache for either would take gigabytes.
  io::testing::TinyHfModel layers, head_dim;
  layers.config_layers = 4096;
  head_dim.config_head_dim = 4096;
  layers.context = head_dim.context = 131072;
  models::RunnerOptions long_context;
  long_context.model.context = 131072;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"4,096 blocks", blocks, "the config's layer count 4096 is more than the weights hold: 5 (layers.0 to layers.4)"},
      {"a key length of 4,096", key_length,
       "the config's head size (head_dim) 4096 does not fit the weights: 8 heads of it make 32768 query rows, and "
       "layers.0.attn.q has 64"},
      {"num_hidden_layers 4096", layers.write("layers"), "the config's layer count 4096 is more than the weights hold: 1 "},
      {"head_dim 4096", head_dim.write("head_dim"), "the config's head size (head_dim) 4096 does not fit the weights"},
  };
  for (const auto& [what, path, phrase] : cases) {
    std::vector<std::string> logged;
    set_log_sink([&](LogLevel, std::string_view m) { logged.emplace_back(m); });
    try {
      models::LlamaRunner::open(path, long_context);
      ADD_FAILURE() << what << ": nothing was raised";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << what << ": " << e.what();
      EXPECT_LT(std::string(e.what()).size(), 300u) << what << ": " << e.what();
    }
    set_log_sink(nullptr);
    EXPECT_TRUE(logged.empty()) << what << ": logged before the error: " << logged[0];
  }
  std::filesystem::remove(blocks);
  std::filesystem::remove(key_length);
}

// Sets this process's address-space limit (RLIMIT_AS, what `ulimit -v` sets) to what it maps
// now and `more` bytes beyond.
void limit_memory_to_now_and(size_t more) {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t limit = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + rlim_t(more);
  const rlimit r{limit, limit};
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &r), 0);
}

// Under a memory limit the allocation that fails says what it was for, its size and the options
// that ask for less, in one line ("out of memory" alone said none of it). Run in a fresh process
// of this program (a death test), so that the limit holds there alone.
TEST(ErrorContractDeathTest, AFailedAllocationSaysWhatItWasForAndHowToAskForLess) {
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "a sanitizer's shadow memory does not fit under a memory limit";
#endif
  IRON_NEEDS_STORIES();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto open_under_a_limit = [] {
    limit_memory_to_now_and(size_t(256) << 20);
    models::RunnerOptions o;
    o.model.slots = 256;  // ten cache states of 69 MB: the fourth is past the limit
    try {
      models::LlamaRunner::open(io::testing::stories_path(), o);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(3);
    }
    std::_Exit(0);
  };
  EXPECT_EXIT(open_under_a_limit(), ::testing::ExitedWithCode(3),
              "out of memory: cannot allocate [0-9,]+ bytes for the state layers\\.[0-9]\\.[kv]_cache \\([0-9, ]+\\) [a-z0-9]+; "
              "a context of 2048 rows \\(\\+ [0-9]+ batch rows\\) takes [0-9.]+ MiB \\(KV cache and RoPE table\\); ask for less with "
              "-c/--ctx-size, -b/--batch-size or a smaller cache type");
}

// A thread that cannot start (no room for its stack) is an error of the call that needed it,
// not a wait for ever: the run queue's thread once left ~Graph waiting on a run nothing took.
TEST(ErrorContractDeathTest, AThreadThatCannotStartIsAnErrorNotAHang) {
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "a sanitizer's shadow memory does not fit under a memory limit";
#endif
  IRON_NEEDS_STORIES();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto generate_under_a_limit = [] {
    ::alarm(60);  // a hang dies of SIGALRM instead of holding the test
    models::RunnerOptions o;
    o.model.context = 64;
    auto runner = models::LlamaRunner::open(io::testing::stories_path(), o);
    limit_memory_to_now_and(size_t(1) << 20);  // less than a thread's stack
    try {
      runner->generate({1}, 4, [](int32_t) {});
      runner.reset();
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      runner.reset();
      std::_Exit(3);
    }
    std::_Exit(0);
  };
  EXPECT_EXIT(generate_under_a_limit(), ::testing::ExitedWithCode(3), "cannot start the thread that runs a graph's calls");
}

}  // namespace
