// Conversations that keep their cache: each turn prefills only what the cache does not hold, a
// saved conversation continues exactly, a full context drops the oldest turns.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "iron/models/conversation.hpp"
#include "sanitized.hpp"

namespace iron {
namespace {

using io::testing::local_model_path;
using models::Conversation;
using models::LlamaRunner;
using models::RunnerOptions;

std::unique_ptr<LlamaRunner> open_smollm2(int64_t context = 512) {
  RunnerOptions o;
  o.model.context = context;
  o.threads = 2;
  return LlamaRunner::open(local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf"), o);
}

// Whole-model conversations run in the Release build; the sanitizer builds check the small cases.
#ifdef IRON_SANITIZED_BUILD
#define IRON_NEEDS_SMOLLM2() GTEST_SKIP() << "sanitizer build: the Release build runs whole-model conversations"
#else
#define IRON_NEEDS_SMOLLM2()                                                         \
  if (!std::filesystem::exists(local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))) \
  GTEST_SKIP() << local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf") << " is absent: run scripts/fetch-model.sh"
#endif

std::string answer(Conversation& c, const std::string& user, models::TurnStats* stats = nullptr, int64_t n = 24) {
  std::string text;
  models::TurnStats s = c.reply(user, n, [&](const std::string& piece) { text += piece; });
  if (stats) *stats = s;
  return text;
}

TEST(Conversation, EachTurnPrefillsOnlyItsNewTokens) {
  IRON_NEEDS_SMOLLM2();
  auto runner = open_smollm2();
  models::Engine engine(*runner);
  Conversation c(engine);
  models::TurnStats first, second, third;
  answer(c, "Hi, who are you?", &first);
  const int64_t after_first = c.cached_tokens();
  EXPECT_EQ(first.cached, after_first);
  answer(c, "What is 2+2?", &second);
  // The second turn's prompt: the first answer's end of turn, then the new user turn and the
  // assistant's start; nothing the cache held is prefilled again.
  const std::vector<int32_t> second_turn =
      runner->tokenizer().encode("<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", false);
  // A cut answer's last token was sampled, never fed: it is new too.
  const int64_t cut = first.stop == "end of sequence" ? 0 : 1;
  EXPECT_EQ(second.prefilled, int64_t(second_turn.size()) + cut) << first.stop;
  answer(c, "And 3+3?", &third);
  EXPECT_LT(third.prefilled, 24);
  EXPECT_EQ(c.messages().size(), 6u);  // the template's default system message is not one of them
  // The piped form of one turn is generate --chat's: the same tokens.
  Conversation fresh(engine);
  std::vector<int32_t> direct;
  // The runner alone (the engine idle meanwhile; its slot's record is stale after this, which a
  // fresh conversation's first turn does not read).
  runner->generate(runner->prompt_ids("Hi, who are you?", true), 24, [&](int32_t id) { direct.push_back(id); });
  answer(fresh, "Hi, who are you?");
  std::vector<int32_t> ids = fresh.messages().back().ids;
  if (!direct.empty() && runner->tokenizer().is_end(direct.back())) direct.pop_back();
  EXPECT_EQ(ids, direct);
}

TEST(Conversation, ASavedConversationContinuesExactly) {
  IRON_NEEDS_SMOLLM2();
  auto runner = open_smollm2();
  models::Engine engine(*runner);
  Conversation c(engine, "You are a terse assistant.");
  answer(c, "Name a colour.");
  const nlohmann::json saved = c.to_json();
  const std::string next = answer(c, "Name another one.");
  Conversation loaded(engine);
  loaded.load_json(nlohmann::json::parse(saved.dump()));
  EXPECT_EQ(loaded.cached_tokens(), 0);
  models::TurnStats s;
  EXPECT_EQ(answer(loaded, "Name another one.", &s), next);
  EXPECT_GT(s.prefilled, 20);  // the whole conversation, once
  // /clear keeps the system message and empties the cache.
  loaded.clear();
  ASSERT_EQ(loaded.messages().size(), 1u);
  EXPECT_EQ(loaded.messages()[0].role, "system");
  EXPECT_EQ(loaded.cached_tokens(), 0);
}

TEST(Conversation, AFullContextDropsTheOldestTurns) {
  IRON_NEEDS_SMOLLM2();
  auto runner = open_smollm2(160);
  models::Engine engine(*runner);
  Conversation c(engine, "Be brief.");
  models::TurnStats s;
  int64_t dropped = 0;
  for (int turn = 0; turn < 6; ++turn) {
    answer(c, "Tell me one fact about the number " + std::to_string(turn) + ".", &s, 30);
    dropped += s.dropped_messages;
    EXPECT_LE(s.cached, 160);
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(c.messages()[0].role, "system");  // kept
  // A message that cannot fit at all is refused, and the conversation keeps what it had.
  const size_t before = c.messages().size();
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "word ";
  io::testing::expect_error([&] { answer(c, huge); }, "the context holds 160");
  EXPECT_EQ(c.messages().size(), before);
}

TEST(Conversation, AnInterruptedAnswerStaysInTheConversation) {
  IRON_NEEDS_SMOLLM2();
  auto runner = open_smollm2();
  models::Engine engine(*runner);
  Conversation c(engine);
  std::atomic<bool> stop{false};
  int pieces = 0;
  models::TurnStats s = c.reply("Write a long story about a dragon.", -1, [&](const std::string&) {
    if (++pieces == 5) stop = true;
  }, &stop);
  EXPECT_EQ(s.stop, "interrupted");
  EXPECT_LE(s.generated, 6);
  EXPECT_EQ(c.messages().back().role, "assistant");
  EXPECT_FALSE(c.messages().back().content.empty());
  answer(c, "Go on.");  // the conversation continues from the cut answer
}

TEST(Conversation, MalformedSavedConversationsAreNamed) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 64;
  auto runner = LlamaRunner::open(io::testing::stories_path(), o);
  models::Engine engine(*runner);
  Conversation c(engine);
  using nlohmann::json;
  io::testing::expect_error([&] { c.load_json(json::array()); }, "\"messages\" list");
  io::testing::expect_error([&] { c.load_json({{"messages", {{{"role", "user"}}}}}); }, "message 0 has no");
  io::testing::expect_error([&] { c.load_json({{"messages", {{{"role", "tool"}, {"content", "x"}}}}}); },
                            "role \"tool\"");
  io::testing::expect_error(
      [&] { c.load_json({{"messages", {{{"role", "assistant"}, {"content", "x"}, {"ids", {1, 99999}}}}}}); },
      "an id 99999 is not one of the model's 512");
  io::testing::expect_error(
      [&] { c.load_json({{"messages", {{{"role", "user"}, {"content", "x"}}, {{"role", "system"}, {"content", "s"}}}}}); },
      "a system message comes first");
}

// begin_turn() and end_turn(): the answer is reply()'s, whoever takes the stream and however
// much of it; while the turn is open nothing else changes the conversation; a turn's own
// sampling settings are the ones it draws with, and settings the engine refuses leave the
// conversation as it was.
TEST(Conversation, ATurnInTwoHalvesAnswersAsReply) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 128;
  auto runner = LlamaRunner::open(io::testing::stories_path(), o);
  models::Engine engine(*runner);
  Conversation whole(engine);
  whole.reply("Once", 12, [](const std::string&) {});
  Conversation halves(engine);
  models::TurnOptions options;
  options.max_tokens = 12;
  const std::shared_ptr<models::Stream> stream = halves.begin_turn("Once", options);
  ASSERT_TRUE(stream && halves.in_turn());
  io::testing::expect_error([&] { halves.clear(); }, "a turn is in progress");
  io::testing::expect_error([&] { halves.begin_turn("Twice", options); }, "a turn is in progress");
  // Some of it taken here, the rest by end_turn().
  std::string text;
  std::vector<int32_t> taken;
  stream->take(text, &taken, std::chrono::milliseconds(1000));
  halves.end_turn(taken);
  EXPECT_FALSE(halves.in_turn());
  ASSERT_EQ(halves.messages().size(), 2u);
  EXPECT_EQ(halves.messages().back().ids, whole.messages().back().ids);
  EXPECT_EQ(halves.messages().back().content, whole.messages().back().content);
  io::testing::expect_error([&] { halves.end_turn({}); }, "no turn is in progress");

  // Seeded draws at a temperature: the same answer twice, and for some seed not the greedy one.
  auto drawn = [&](uint64_t seed) {
    Conversation c(engine);
    models::TurnOptions t;
    t.max_tokens = 12;
    t.sampling = Sampling{1.0, 0, 1.0, seed};
    c.begin_turn("Once", t);
    c.end_turn({});
    return c.messages().back().ids;
  };
  bool differs = false;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EXPECT_EQ(drawn(seed), drawn(seed)) << seed;
    differs = differs || drawn(seed) != whole.messages().back().ids;
  }
  EXPECT_TRUE(differs) << "four seeds at temperature 1 all drew the greedy answer";
  models::TurnOptions bad;
  bad.sampling = Sampling{-1.0, 40, 0.95, 0};
  io::testing::expect_error([&] { halves.begin_turn("Again", bad); }, "temperature");
  EXPECT_EQ(halves.messages().size(), 2u);
  EXPECT_FALSE(halves.in_turn());
}

}  // namespace
}  // namespace iron
