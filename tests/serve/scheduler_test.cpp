// `iron serve`'s scheduler on stories260K, without HTTP: sequences submitted from several
// threads, decoding together in a batch of cache slots, each get exactly the tokens they get
// alone from LlamaRunner::generate (greedy and seeded), a full queue refuses, a cancel leaves at
// once, and destruction ends what is queued. Run under ThreadSanitizer too (scripts/test.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "io/io_test_util.hpp"
#include "serve/scheduler.hpp"

namespace {

using namespace iron;
using iron::io::testing::stories_path;
using namespace std::chrono_literals;

std::unique_ptr<models::LlamaRunner> open_stories(int64_t context = 256, int64_t slots = 1) {
  models::RunnerOptions o;
  o.model.context = context;
  o.model.slots = slots;
  return models::LlamaRunner::open(stories_path(), o);
}

// Every token of `s`, and how it ended.
std::pair<std::vector<int32_t>, std::string> drain(serve::Sequence& s) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 6000 && !s.take(ids, 10ms); ++i) {
  }
  return {ids, s.finish()};
}

TEST(ServeScheduler, ConcurrentSequencesGetTheirOwnTokens) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(256, 3);
  std::vector<serve::Job> jobs;
  for (int i = 0; i < 6; ++i) {
    serve::Job j;
    j.prompt = {1, int32_t(300 + i), int32_t(400 - i)};
    j.max_tokens = 20 + 7 * i;
    j.sampling = i % 2 ? models::Sampling{0.9, 20, 0.9, uint64_t(i)} : models::Sampling{0, 40, 0.95, 0};
    j.stop_at_end = false;
    jobs.push_back(j);
  }
  std::vector<std::vector<int32_t>> alone;
  for (const serve::Job& j : jobs) {
    std::vector<int32_t> ids;
    runner->generate(j.prompt, j.max_tokens, [&](int32_t id) { ids.push_back(id); }, false, 0, nullptr, &j.sampling);
    alone.push_back(ids);
  }
  // Three slots for six jobs: rows join as others finish (their lengths differ).
  serve::Scheduler scheduler(*runner, 3, 8);
  std::vector<std::pair<std::vector<int32_t>, std::string>> got(jobs.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < jobs.size(); ++i)
    clients.emplace_back([&, i] {
      auto s = scheduler.submit(jobs[i]);
      ASSERT_NE(s, nullptr);
      got[i] = drain(*s);
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(got[i].first, alone[i]) << "sequence " << i;
    EXPECT_EQ(got[i].second, "length");
  }
  const serve::SchedulerStats st = scheduler.stats();
  EXPECT_EQ(st.sequences, int64_t(jobs.size()));
  EXPECT_EQ(st.active, 0);
  EXPECT_EQ(st.queued, 0);
  EXPECT_EQ(st.prompt_tokens, 3 * int64_t(jobs.size()));
}

// A prompt the model refuses (longer than the context: the server refuses it before, the
// scheduler must not rely on that) ends its own sequence with the error; the sequences whose
// calls it shared get their tokens as alone.
TEST(ServeScheduler, AFailingPromptEndsOnlyItsOwnSequence) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(64, 3);
  std::vector<serve::Job> jobs(3);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].prompt = {1, int32_t(300 + i), int32_t(400 - i)};
    jobs[i].max_tokens = 12;
    jobs[i].stop_at_end = false;
  }
  jobs[1].prompt.assign(100, 7);  // past the context of 64
  std::vector<std::vector<int32_t>> alone(jobs.size());
  for (size_t i : {size_t(0), size_t(2)})
    runner->generate(jobs[i].prompt, jobs[i].max_tokens, [&](int32_t id) { alone[i].push_back(id); }, false, 0,
                     nullptr, &jobs[i].sampling);
  serve::Scheduler scheduler(*runner, 3, 8);
  std::vector<std::shared_ptr<serve::Sequence>> seqs;
  for (const serve::Job& j : jobs) seqs.push_back(scheduler.submit(j));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_NE(seqs[i], nullptr);
    const auto [ids, finish] = drain(*seqs[i]);
    if (i == 1) {
      EXPECT_EQ(finish, "error");
      EXPECT_NE(seqs[i]->error().find("do not fit a context of 64"), std::string::npos) << seqs[i]->error();
      EXPECT_TRUE(ids.empty());
    } else {
      EXPECT_EQ(finish, "length") << i;
      EXPECT_EQ(ids, alone[i]) << "sequence " << i;
    }
  }
}

TEST(ServeScheduler, AFullQueueRefusesACancelLeavesAtOnce) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(2048);
  serve::Scheduler scheduler(*runner, 1, 1);
  serve::Job long_job;
  long_job.prompt = {1};
  long_job.max_tokens = -1;  // until the context is full: 2047 tokens
  long_job.stop_at_end = false;
  auto first = scheduler.submit(long_job), second = scheduler.submit(long_job);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(scheduler.submit(long_job), nullptr) << "one slot and one queue place are taken";
  std::vector<int32_t> some;
  while (some.empty()) first->take(some, 10ms);
  first->cancel();
  auto [ids, finish] = drain(*first);
  EXPECT_EQ(finish, "cancelled");
  EXPECT_LT(some.size() + ids.size(), 2047u);
  second->cancel();
  EXPECT_EQ(drain(*second).second, "cancelled");
}

TEST(ServeScheduler, DestructionEndsWhatIsQueued) {
  IRON_NEEDS_STORIES();
  auto runner = open_stories(2048);
  std::vector<std::shared_ptr<serve::Sequence>> seqs;
  {
    serve::Scheduler scheduler(*runner, 1, 4);
    serve::Job j;
    j.prompt = {1};
    j.max_tokens = -1;
    j.stop_at_end = false;
    for (int i = 0; i < 4; ++i) seqs.push_back(scheduler.submit(j));
  }
  for (auto& s : seqs) {
    ASSERT_NE(s, nullptr);
    std::vector<int32_t> ids;
    EXPECT_TRUE(s->take(ids, 0ms)) << "every sequence is over once the scheduler is gone";
    EXPECT_TRUE(s->finish() == "cancelled" || s->finish() == "length") << s->finish();
  }
}

}  // namespace
