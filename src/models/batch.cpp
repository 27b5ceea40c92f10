// Several sequences decoded together (include/iron/models/batch.hpp).
#include "iron/models/batch.hpp"

#include <cstring>

#include "iron/error.hpp"
#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;

BatchDecoder::BatchDecoder(DecoderModel& model, CompileOptions compile) : model_(model), compile_(compile) {}

std::vector<int32_t> BatchDecoder::run(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                                       const std::vector<int32_t>& slots, const std::vector<int32_t>& pick,
                                       const std::vector<int32_t>& draws, const std::vector<Sampling>& sampling) {
  const int64_t rows = int64_t(tokens.size()), picked = int64_t(pick.size());
  Tensor settings = Tensor::zeros({picked, F::kSampleSettingsWords}, i32);
  for (int64_t p = 0; p < picked; ++p) {
    const Sampling& s = sampling[size_t(p)];
    const Tensor row = F::sample_settings(s.temperature, s.top_k, s.top_p, s.seed);
    std::memcpy(settings.mutable_data_as<int32_t>() + p * F::kSampleSettingsWords, row.data(), size_t(row.nbytes()));
  }
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
  const auto& result = model_.compile(shapes, compile_)(std::span<const Tensor>(inputs));
  logits_ = result.outputs.at(0);
  const int32_t* next = result.outputs.at(1).data_as<int32_t>();
  return {next, next + picked};
}

int32_t BatchDecoder::prefill(int64_t slot, int64_t position, std::span<const int32_t> ids, const Sampling& sampling,
                              int64_t step) {
  int64_t at = 0;
  for (;;)
    if (auto next = prefill_part(slot, position, ids, at, sampling, step)) return *next;
}

std::optional<int32_t> BatchDecoder::prefill_part(int64_t slot, int64_t position, std::span<const int32_t> ids,
                                                  int64_t& at, const Sampling& sampling, int64_t step) {
  const int64_t context = model_.options().context, total = int64_t(ids.size());
  if (ids.empty()) value_error("BatchDecoder::prefill: no ids");
  if (position < 0 || position + total > context)
    value_error("BatchDecoder::prefill: " + std::to_string(ids.size()) + " ids from position " +
                std::to_string(position) + " do not fit a context of " + std::to_string(context));
  if (at < 0 || at >= total) value_error("BatchDecoder::prefill_part: no ids left from " + std::to_string(at));
  const int64_t chunk = model_.options().chunk;
  int64_t n = chunk;
  while (n > total - at) n /= 2;  // the largest power of two below chunk that fits, down to 1
  if (n < 1) n = 1;
  const std::vector<int32_t> tokens(ids.begin() + at, ids.begin() + at + n);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  const std::vector<int32_t> slots(static_cast<size_t>(n), int32_t(slot));
  for (int64_t r = 0; r < n; ++r) positions[size_t(r)] = int32_t(position + at + r);
  // The first token is drawn at the position where LlamaRunner::generate's last prompt call
  // (chunks of `chunk` rows) begins, as its prefill draws: one seed, one answer either way.
  const int32_t draw_at = int32_t(position + (total - 1) / chunk * chunk);
  const int32_t next = run(tokens, positions, slots, {int32_t(n - 1)}, {int32_t(step), draw_at}, {sampling})[0];
  at += n;
  if (at < total) return std::nullopt;
  return next;
}

std::vector<int32_t> BatchDecoder::step(std::span<const Row> rows) {
  if (rows.empty()) return {};
  const size_t n = rows.size();
  std::vector<int32_t> tokens(n), positions(n), slots(n), pick(n), draws(2 * n);
  std::vector<Sampling> sampling(n);
  for (size_t b = 0; b < n; ++b) {
    const Row& r = rows[b];
    tokens[b] = r.token;
    positions[b] = int32_t(r.position);
    slots[b] = int32_t(r.slot);
    pick[b] = int32_t(b);
    draws[2 * b] = int32_t(r.step);
    draws[2 * b + 1] = int32_t(r.position);
    sampling[b] = r.sampling;
  }
  return run(tokens, positions, slots, pick, draws, sampling);
}

}  // namespace iron::models
