// Several sequences decoded together (include/iron/models/batch.hpp).
#include "iron/models/batch.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "iron/error.hpp"
#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;

BatchDecoder::BatchDecoder(DecoderModel& model, CompileOptions compile) : model_(model), compile_(compile) {}

namespace {
// The rows of the version a prefill call of `rows` rows runs in: calls of many sizes share few
// versions, the rows past a call's own bounded off.
int64_t version_rows(int64_t rows) { return int64_t(std::bit_ceil(uint64_t(rows))); }
}  // namespace

std::vector<int32_t> BatchDecoder::run(std::vector<int32_t> tokens, std::vector<int32_t> positions,
                                       std::vector<int32_t> slots, const std::vector<int32_t>& pick,
                                       const std::vector<int32_t>& draws, const std::vector<SamplingRow>& sampling,
                                       int64_t capacity) {
  const int64_t valid = int64_t(tokens.size()), picked = int64_t(pick.size());
  const int64_t rows = std::max(capacity, valid);
  // The rows past the call's own: token 0 at position 0 of slot 0, bounded off (never computed).
  tokens.resize(size_t(rows), 0);
  positions.resize(size_t(rows), 0);
  slots.resize(size_t(rows), 0);
  for (int32_t p : pick)
    if (p < 0 || p >= valid)
      index_error("BatchDecoder: a pick of row " + std::to_string(p) + " in a call of " + std::to_string(valid) + " rows");
  Tensor settings = Tensor::zeros({picked, F::kSampleSettingsWords}, i32);
  for (int64_t p = 0; p < picked; ++p)
    std::memcpy(settings.mutable_data_as<int32_t>() + p * F::kSampleSettingsWords, sampling[size_t(p)].words.data(),
                sizeof(SamplingRow::words));
  // In the order the graph declares its inputs: tokens, sampling, positions, slots, pick, draws.
  const Tensor inputs[] = {Tensor::from_ints(tokens, {rows}),     settings,
                           Tensor::from_ints(positions, {rows}),  Tensor::from_ints(slots, {rows}),
                           Tensor::from_ints(pick, {picked}),     Tensor::from_ints(draws, {picked, 2})};
  const Shapes shapes{{"tokens", InputSpec({rows}, i32)},
                      {"sampling", InputSpec({picked, F::kSampleSettingsWords}, i32)},
                      {"positions", InputSpec({rows}, i32)},
                      {"slots", InputSpec({rows}, i32)},
                      {"pick", InputSpec({picked}, i32)},
                      {"draws", InputSpec({picked, 2}, i32)}};
  const std::vector<ValueArg> values{{"batch_rows", valid}};
  const auto& result = model_.compile(shapes, compile_)(std::span<const Tensor>(inputs), values);
  logits_ = result.outputs.at(0);
  const int32_t* next = result.outputs.at(1).data_as<int32_t>();
  return {next, next + picked};
}

int32_t BatchDecoder::prefill(int64_t slot, int64_t position, std::span<const int32_t> ids, const SamplingRow& sampling,
                              int64_t step) {
  Prompt prompt{slot, position, ids, 0, sampling, step};
  return prefill(std::span(&prompt, 1))[0];
}

std::vector<int32_t> BatchDecoder::prefill(std::span<Prompt> prompts) {
  std::vector<int32_t> first(prompts.size());
  std::vector<size_t> left(prompts.size());
  for (size_t i = 0; i < left.size(); ++i) left[i] = i;
  while (!left.empty()) {
    std::vector<Prompt> going;
    for (size_t i : left) going.push_back(prompts[i]);
    const std::vector<std::optional<int32_t>> drawn = prefill_parts(going);
    std::vector<size_t> still;
    for (size_t k = 0; k < left.size(); ++k) {
      prompts[left[k]].at = going[k].at;
      if (drawn[k])
        first[left[k]] = *drawn[k];
      else
        still.push_back(left[k]);
    }
    left = std::move(still);
  }
  return first;
}

int64_t BatchDecoder::shared_prefill_rows() const {
  const int64_t chunk = model_.options().chunk;
  return model_.options().precision == Precision::highest ? std::min(chunk, kAloneRows) : chunk;
}

std::vector<std::optional<int32_t>> BatchDecoder::prefill_parts(std::span<Prompt> prompts, size_t always) {
  const int64_t context = model_.options().context, chunk = model_.options().chunk;
  for (const Prompt& p : prompts) {
    const int64_t total = int64_t(p.ids.size());
    if (p.ids.empty()) value_error("BatchDecoder::prefill: no ids");
    if (p.position < 0 || p.position + total > context)
      value_error("BatchDecoder::prefill: " + std::to_string(total) + " ids from position " +
                  std::to_string(p.position) + " do not fit a context of " + std::to_string(context));
    if (p.at < 0 || p.at >= total) value_error("BatchDecoder::prefill_parts: no ids left from " + std::to_string(p.at));
  }
  // Each prompt's next part: `chunk` ids, else (at highest) the largest power of two below it that
  // its ids left fill, down to 1, or (at high and medium) all its ids left; so a prompt is always
  // cut the same way, whatever else shares its calls. Highest keeps each part to the row counts
  // whose sums a prompt alone also meets; medium and high promise a tolerance, not the bits,
  // and a prompt shorter than the chunk then goes in one call, not up to log2(chunk) of them
  // (a serve's 12-id prompt took two calls, 8 and 4 rows, each reading every weight).
  const bool powers = model_.options().precision == Precision::highest;
  auto part = [&](const Prompt& p) {
    const int64_t left = int64_t(p.ids.size()) - p.at;
    if (!powers) return std::min(chunk, left);
    int64_t n = chunk;
    while (n > left) n /= 2;
    return n < 1 ? int64_t(1) : n;
  };
  const int64_t budget = shared_prefill_rows();
  // Which prompts go: in order, each whose part still fits the budget (the first `always`
  // whatever their rows).
  std::vector<int64_t> taken(prompts.size(), 0);  // each prompt's part in this call (0: not taken)
  const size_t first = std::max<size_t>(always, 1);
  int64_t rows = 0, picked = 0;
  size_t going = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t n = part(prompts[i]);
    if (i >= first && rows + n > budget) continue;
    taken[i] = n;
    rows += n;
    ++going;
    picked += prompts[i].at + n == int64_t(prompts[i].ids.size());
    if (rows >= budget && i + 1 >= first) break;
  }
  // Each new (rows rounded up to a power of two, picked) is a version compiled and kept (about 3
  // MiB and 0.5 MiB a picked row on SmolLM2), and shared calls meet many: past kSharedVersions of
  // them, a call that would need another takes only its first prompts, whose shapes a call of
  // them alone has.
  const std::pair<int64_t, int64_t> shape{version_rows(rows), std::max<int64_t>(picked, 1)};
  if (going > first && !shapes_.count(shape)) {
    if (shared_versions_ >= kSharedVersions) {
      for (size_t i = first; i < prompts.size(); ++i) taken[i] = 0;
    } else {
      ++shared_versions_;
    }
  }
  std::vector<int32_t> tokens, positions, slots, pick, draws;
  std::vector<SamplingRow> sampling;
  std::vector<size_t> finishing;  // the prompts whose last id goes in, in pick order
  rows = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Prompt& p = prompts[i];
    const int64_t n = taken[i];
    if (n == 0) continue;
    for (int64_t r = 0; r < n; ++r) {
      tokens.push_back(p.ids[size_t(p.at + r)]);
      positions.push_back(int32_t(p.position + p.at + r));
      slots.push_back(int32_t(p.slot));
    }
    rows += n;
    if (p.at + n == int64_t(p.ids.size())) {
      // The first token is drawn at the position where LlamaRunner::generate's last prompt call
      // (chunks of `chunk` rows) begins, as its prefill draws: one seed, one answer either way.
      pick.push_back(int32_t(rows - 1));
      draws.push_back(int32_t(p.step));
      draws.push_back(int32_t(p.position + (int64_t(p.ids.size()) - 1) / chunk * chunk));
      sampling.push_back(p.sampling);
      finishing.push_back(i);
    }
  }
  const int64_t capacity = version_rows(rows);
  shapes_.insert({capacity, std::max<int64_t>(int64_t(pick.size()), 1)});
  std::vector<std::optional<int32_t>> next(prompts.size());
  // A call picks at least one row: where no prompt finishes in it, its last row's draw is made
  // and dropped.
  const bool none = pick.empty();
  if (none) {
    pick.push_back(int32_t(rows - 1));
    draws.insert(draws.end(), {0, 0});
    sampling.push_back(prompts[0].sampling);
  }
  const std::vector<int32_t> drawn = run(tokens, positions, slots, pick, draws, sampling, capacity);
  for (size_t i = 0; i < prompts.size(); ++i) prompts[i].at += taken[i];
  if (!none)
    for (size_t k = 0; k < finishing.size(); ++k) next[finishing[k]] = drawn[k];
  return next;
}

std::vector<int32_t> BatchDecoder::step(std::span<const Row> rows) {
  if (rows.empty()) return {};
  const size_t n = rows.size();
  std::vector<int32_t> tokens(n), positions(n), slots(n), pick(n), draws(2 * n);
  std::vector<SamplingRow> sampling;
  sampling.reserve(n);
  for (size_t b = 0; b < n; ++b) {
    const Row& r = rows[b];
    tokens[b] = r.token;
    positions[b] = int32_t(r.position);
    slots[b] = int32_t(r.slot);
    pick[b] = int32_t(b);
    draws[2 * b] = int32_t(r.step);
    draws[2 * b + 1] = int32_t(r.position);
    sampling.push_back(r.sampling);
  }
  shapes_.insert({int64_t(n), int64_t(n)});
  return run(tokens, positions, slots, pick, draws, sampling, int64_t(n));
}

}  // namespace iron::models
