// Sentence embeddings' speed with IRON alone, for bench/embed_speed.py (which runs it beside
// sentence-transformers, alternating): a SentenceEncoder over the texts of FILE (one per line),
// BATCH sentences per call, first one warm-up pass (it compiles every version the texts need),
// then REPS timed passes; each prints "seconds S sentences N". The ids are made once, outside
// the timing (the other engine's tokenizer runs inside its encode(), and costs it about as
// little). With TRACE, the last pass is recorded as a timeline there (one span per operator and
// thread; bench/trace_summary.py TRACE prints the time per operator).
//   ./build/bench/bench_embed_speed MODEL_DIR FILE BATCH [reps=3] [threads=2] [precision=medium] [TRACE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "iron/error.hpp"
#include "iron/models/bert.hpp"
#include "iron/trace.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR FILE BATCH [reps=3] [threads=2] [precision=medium] [TRACE]\n", argv[0]);
    return 2;
  }
  try {
    iron::models::EncoderOptions options;
    options.max_batch = std::atoll(argv[3]);
    const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
    options.threads = argc > 5 ? std::atoi(argv[5]) : 2;
    options.precision = iron::precision_from_name(argc > 6 ? argv[6] : "medium");
    auto encoder = iron::models::SentenceEncoder::open(argv[1], options);
    std::ifstream in(argv[2]);
    std::vector<std::vector<int32_t>> ids;
    for (std::string line; std::getline(in, line);) ids.push_back(encoder->ids(line));
    encoder->embed_ids(ids);  // compiles the versions, uploads the weights
    const char* trace = argc > 7 ? argv[7] : nullptr;
    for (int r = 0; r < reps; ++r) {
      if (trace && r == reps - 1) iron::trace::start();
      const auto begin = std::chrono::steady_clock::now();
      encoder->embed_ids(ids);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      std::printf("seconds %.6f sentences %zu\n", s, ids.size());
      std::fflush(stdout);
    }
    if (trace) iron::trace::stop_and_write(trace);
  } catch (const iron::Error& e) {
    std::fprintf(stderr, "bench_embed_speed: %s\n", e.what());
    return 1;
  }
}
