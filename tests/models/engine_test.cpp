// The engine (models::Engine) on stories260K: sequences submitted from several threads, decoding
// together in a batch of cache slots, each get exactly the tokens they get alone from
// LlamaRunner::generate (greedy and seeded); one slot runs generate's own loop; stop strings are
// cut in the engine, across tokens, on both paths; a full queue refuses (or waits), a cancel
// leaves at once, destruction ends what is queued; bad requests are refused naming the field; a
// slot's cache is reused only when asked. Run under ThreadSanitizer too (scripts/test.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "io/io_test_util.hpp"
#include "iron/models/engine.hpp"

namespace {

using namespace iron;
using iron::io::testing::expect_error;
using iron::io::testing::stories_path;
using models::Engine;
using models::Request;
using models::Stream;
using namespace std::chrono_literals;

std::unique_ptr<models::LlamaRunner> open_stories(int64_t context = 256, int64_t slots = 1) {
  models::RunnerOptions o;
  o.model.context = context;
  o.model.slots = slots;
  return models::LlamaRunner::open(stories_path(), o);
}

struct Drained {
  std::vector<int32_t> ids;
  std::string text, finish;
};

// Every token and the text of `s`, and how it ended.
Drained drain(Stream& s) {
  Drained d;
  for (int i = 0; i < 6000 && s.take(d.text, &d.ids, 10ms); ++i) {
  }
  d.finish = s.finish();
  return d;
}

Request ids_request(std::vector<int32_t> ids, std::optional<int64_t> max_tokens, Sampling sampling = {}) {
  Request r;
  r.prompt = std::move(ids);
  r.max_tokens = max_tokens;
  r.sampling = sampling;
  r.stop_at_end = false;
  return r;
}

// What LlamaRunner::generate gives for `r` alone.
std::vector<int32_t> alone(models::LlamaRunner& runner, const Request& r) {
  std::vector<int32_t> ids;
  runner.generate(std::get<std::vector<int32_t>>(r.prompt), r.max_tokens.value_or(-1),
                  [&](int32_t id) { ids.push_back(id); }, r.stop_at_end, 0, nullptr, &r.sampling);
  return ids;
}

// A stop string that spans pieces never leaks, not even its first characters; text that only
// looked like its start is let through once it cannot be one.
TEST(EngineStop, HoldsBackWhatCouldBecomeAStopString) {
  models::StopFilter f({"\n\nUser:", "END"});
  EXPECT_EQ(f.push("Hello"), "Hello");
  EXPECT_EQ(f.push(" wor"), " wor");
  EXPECT_EQ(f.push("ld\n"), "ld");   // "\n" may begin "\n\nUser:"
  EXPECT_EQ(f.push("\nUs"), "");     // still may
  EXPECT_EQ(f.push("e"), "");
  EXPECT_EQ(f.push("r: hi"), "");    // complete: nothing of it, nothing after it
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("more"), "");
  EXPECT_EQ(f.flush(), "");

  models::StopFilter g({"END"});
  EXPECT_EQ(g.push("the EN"), "the ");
  EXPECT_EQ(g.push("D"), "");
  EXPECT_TRUE(g.stopped());

  models::StopFilter h({"END"});
  EXPECT_EQ(h.push("an E"), "an ");
  EXPECT_EQ(h.push("xit"), "Exit");  // not a stop after all
  EXPECT_EQ(h.push(" E"), " ");
  EXPECT_EQ(h.flush(), "E");         // the end: what was held back
  EXPECT_FALSE(h.stopped());

  models::StopFilter none({});
  EXPECT_EQ(none.push("abc"), "abc");
  models::StopFilter inside({"b"});
  EXPECT_EQ(inside.push("abc"), "a");  // a stop inside one piece cuts it there
}

TEST(Engine, ConcurrentSequencesGetTheirOwnTokens) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(256, 3);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i)
    requests.push_back(ids_request({1, int32_t(300 + i), int32_t(400 - i)}, 20 + 7 * i,
                                   i % 2 ? Sampling{0.9, 20, 0.9, uint64_t(i)} : Sampling{0, 40, 0.95, 0}));
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : requests) expected.push_back(alone(*runner, r));
  // Three slots for six requests: rows join as others finish (their lengths differ).
  Engine engine(*runner, 3, 8);
  std::vector<Drained> got(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i)
    clients.emplace_back([&, i] {
      auto s = engine.submit(requests[i]);
      ASSERT_NE(s, nullptr);
      got[i] = drain(*s);
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].ids, expected[i]) << "sequence " << i;
    EXPECT_EQ(got[i].finish, "length");
  }
  const models::EngineStats st = engine.stats();
  EXPECT_EQ(st.sequences, int64_t(requests.size()));
  EXPECT_EQ(st.active, 0);
  EXPECT_EQ(st.queued, 0);
  EXPECT_EQ(st.prompt_tokens, 3 * int64_t(requests.size()));
}

// One slot runs LlamaRunner::generate's own loop: the same ids, the text `iron generate` prints
// (the end token's text dropped), and generate's stats.
TEST(Engine, OneSlotGivesGeneratesTokensAndText) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories();
  const std::vector<int32_t> prompt = runner->prompt_ids("Once upon a time", false);
  Request r = ids_request(prompt, 40);
  r.stop_at_end = true;
  const std::vector<int32_t> expected = alone(*runner, r);
  Engine engine(*runner);
  Request text = r;
  text.prompt = std::string("Once upon a time");
  const Drained got = drain(*engine.submit(text));
  EXPECT_EQ(got.ids, expected);
  std::vector<int32_t> shown = expected;
  if (!shown.empty() && runner->tokenizer().is_end(shown.back())) shown.pop_back();
  EXPECT_EQ(got.text, runner->tokenizer().decode(shown));
  EXPECT_FALSE(got.text.empty());
}

// A stop string met across tokens ends the sequence at once ("stop"); the text ends right before
// it, with no part of it, on one slot and in the batch alike.
TEST(Engine, StopStringsAreCutInTheEngine) {
  IRON_NEEDS_STORIES();
  for (int parallel : {1, 2}) {
    auto runner = open_stories(256, parallel);
    Engine engine(*runner, parallel);
    Request r;
    r.prompt = std::string("Once upon a time");
    r.max_tokens = 60;
    r.stop_at_end = false;
    const Drained whole = drain(*engine.submit(r));
    ASSERT_GT(whole.text.size(), 40u) << whole.text;
    // A stop string from the middle of the text, longer than one token's piece.
    const std::string stop = whole.text.substr(20, 7);
    const size_t at = whole.text.find(stop);
    r.stop = {"zzzz-never", stop};
    auto s = engine.submit(r);
    const Drained cut = drain(*s);
    EXPECT_EQ(cut.text, whole.text.substr(0, at)) << "parallel " << parallel << ", stop '" << stop << "'";
    EXPECT_EQ(cut.finish, "stop");
    EXPECT_EQ(s->stats().stop, "stop string");
    EXPECT_LT(cut.ids.size(), whole.ids.size()) << "the sequence ended at the stop string";
  }
}

// An id the model cannot embed fails its call; the engine finds which sequence it was and ends
// only that one with the error; the sequences whose calls it shared get their tokens as alone.
TEST(Engine, AFailingPromptEndsOnlyItsOwnSequence) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(64, 3);
  std::vector<Request> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(ids_request({1, int32_t(300 + i), int32_t(400 - i)}, 12));
  requests[1] = ids_request({1, 5, 100000}, 12);  // outside stories260K's 512 ids
  std::vector<std::vector<int32_t>> expected(requests.size());
  for (size_t i : {size_t(0), size_t(2)}) expected[i] = alone(*runner, requests[i]);
  Engine engine(*runner, 3, 8);
  std::vector<std::shared_ptr<Stream>> streams;
  for (const Request& r : requests) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_NE(streams[i], nullptr);
    const Drained d = drain(*streams[i]);
    if (i == 1) {
      EXPECT_EQ(d.finish, "error");
      EXPECT_NE(streams[i]->error().find("100000"), std::string::npos) << streams[i]->error();
      EXPECT_TRUE(d.ids.empty());
    } else {
      EXPECT_EQ(d.finish, "length") << i;
      EXPECT_EQ(d.ids, expected[i]) << "sequence " << i;
    }
  }
}

TEST(Engine, AFullQueueRefusesOrWaitsACancelLeavesAtOnce) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(2048);
  Engine engine(*runner, 1, 1);
  const Request long_request = ids_request({1}, std::nullopt);  // until the context is full: 2047 tokens
  auto first = engine.submit(long_request), second = engine.submit(long_request);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(engine.submit(long_request), nullptr) << "one slot and one queue place are taken";
  // A submit that waits gets the place the first frees.
  std::shared_ptr<Stream> third;
  std::thread waiter([&] { third = engine.submit(ids_request({1}, 3), /*wait=*/true); });
  std::vector<int32_t> some;
  std::string text;
  while (some.empty()) first->take(text, &some, 10ms);
  first->cancel();
  const Drained rest = drain(*first);
  EXPECT_EQ(rest.finish, "cancelled");
  EXPECT_LT(some.size() + rest.ids.size(), 2047u);
  EXPECT_EQ(first->stats().stop, "interrupted");
  second->cancel();
  EXPECT_EQ(drain(*second).finish, "cancelled");
  waiter.join();
  ASSERT_NE(third, nullptr);
  const Drained last = drain(*third);
  EXPECT_EQ(last.finish, "length");
  EXPECT_EQ(last.ids.size(), 3u);
}

TEST(Engine, DestructionEndsWhatIsQueued) {
  IRON_NEEDS_STORIES();
  for (int parallel : {1, 2}) {
    auto runner = open_stories(2048, parallel);
    std::vector<std::shared_ptr<Stream>> streams;
    {
      Engine engine(*runner, parallel, 4);
      for (int i = 0; i < 4; ++i) streams.push_back(engine.submit(ids_request({1}, std::nullopt)));
    }
    for (auto& s : streams) {
      ASSERT_NE(s, nullptr);
      std::string text;
      EXPECT_FALSE(s->take(text, nullptr, 0ms)) << "every sequence is over once the engine is gone";
      EXPECT_TRUE(s->finish() == "cancelled" || s->finish() == "length") << s->finish();
    }
  }
}

TEST(Engine, BadRequestsAreRefusedNamingTheField) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(64);
  Engine engine(*runner);
  auto refused = [&](Request r, const std::string& field, const std::string& phrase, const std::string& code = {}) {
    try {
      engine.submit(std::move(r));
      ADD_FAILURE() << "no error; expected one mentioning '" << phrase << "'";
    } catch (const models::RequestError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
      EXPECT_EQ(int(e.kind()), int(ErrorKind::value));
    }
  };
  Request chat;
  chat.prompt = std::vector<text::ChatMessage>{{"user", "hi"}, {"bot", "hello"}};
  refused(chat, "messages", "message 1: the role 'bot' is not system, user or assistant");
  chat.prompt = std::vector<text::ChatMessage>{};
  refused(chat, "messages", "no messages");
  // stories260K has no chat template: refused, not guessed.
  chat.prompt = std::vector<text::ChatMessage>{{"user", "hi"}};
  refused(chat, "messages", "this model's chat cannot be rendered", "unsupported_chat_template");
  refused(ids_request({1, 2}, -3), "max_tokens", "max_tokens is at least 0");
  refused(ids_request({}, 3), "prompt", "the prompt has no tokens");
  refused(ids_request(std::vector<int32_t>(64, 5), 3), "prompt", "the prompt has 64 tokens; the context holds 64",
          "context_length_exceeded");
  refused(ids_request({1, 2}, 3, Sampling{-1, 40, 0.9, 0}), "sampling", "temperature");
  refused(ids_request({1, 2}, 3, Sampling{0.5, 40, 0, 0}), "sampling", "top_p");
  Request stop = ids_request({1, 2}, 3);
  stop.stop = {"a", ""};
  refused(stop, "stop", "a stop string is empty");
  expect_error([&] { Engine two(*runner, 2); }, "the runner has 1 (open it with options.model.slots = 2)");
  expect_error([&] { Engine none(*runner, 0); }, "parallel is at least 1");
  // No tokens asked for: over at once, for length.
  EXPECT_EQ(drain(*engine.submit(ids_request({1, 2}, 0))).finish, "length");
}

// A request that asks may start from what its slot's cache holds (a conversation's next turn);
// with short prompts (calls of at most 8 rows) the tokens are those of the whole prompt
// prefilled. One that does not ask prefills it all.
TEST(Engine, ASlotsCacheIsReusedOnlyWhenAsked) {
  IRON_NEEDS_STORIES();
  for (int parallel : {1, 2}) {
    auto runner = open_stories(256, parallel);
    Engine engine(*runner, parallel);
    const Drained first = drain(*engine.submit(ids_request({1, 300, 400}, 4)));
    ASSERT_EQ(first.ids.size(), 4u);
    // The cache holds the prompt and the answer but its last token: 6 of the next prompt's 8.
    std::vector<int32_t> next = {1, 300, 400};
    next.insert(next.end(), first.ids.begin(), first.ids.end());
    next.push_back(7);
    Request again = ids_request(next, 5);
    again.reuse_cache = true;
    auto reusing = engine.submit(again);
    const Drained reused = drain(*reusing);
    EXPECT_EQ(reusing->reused_tokens(), 6) << "parallel " << parallel;
    EXPECT_EQ(reusing->stats().prompt_tokens, 2);
    auto not_asked = engine.submit(ids_request(next, 5));
    EXPECT_EQ(drain(*not_asked).ids, reused.ids);
    EXPECT_EQ(not_asked->reused_tokens(), 0);
    EXPECT_EQ(not_asked->stats().prompt_tokens, int64_t(next.size()));
  }
}

}  // namespace
