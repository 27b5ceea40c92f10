#version 450
#extension GL_GOOGLE_include_directive : require
// Sample: the next token from a row of logits, as a one-element i32, as the CPU's kernel draws it
// (sample.cpp): greedy at temperature 0 (the first index of the largest non-NaN logit, 0 when
// every one is NaN); otherwise the top_k most likely in order (larger first, the lower id on a
// tie), cut to the smallest prefix whose probability reaches top_p, and one draw of
// ops::sample_uniform (sample.hpp) keyed by the seed, the per-call counter and the position.
// The probabilities are f32 here (double on the CPU), so a draw that falls within rounding of a
// boundary between two tokens may pick the other one; the op tests and
// VulkanSample.DrawsAsTheCpu count how often.
//
// One workgroup. The top_k are found without sorting the vocabulary: a radix select over the
// logits' order-preserving keys (four passes of 8-bit histograms) finds the k-th largest key,
// the keys above it and the lowest ids of those equal to it are gathered (at most kMaxK), then
// sorted in shared memory. top_k of 0 (all) or above kMaxK is not drawn here: the token is -1,
// an id no vocabulary has, and LlamaRunner refuses such settings on Vulkan before any call.
// A batch of rows (B > 1, or per-row steps and positions) takes a workgroup per row: row r draws
// from logits row r with settings row r, keyed by steps[r] and positions[r], into token r.
//   specialization constant 0: the logits' kind (f32, f16 or bf16: elements.glsl)
//   bindings: the logits (words), the tokens (i32), the settings (i32 words, sample.hpp; the
//   logits again when has_settings is 0), the steps and positions (i32; the logits again for one
//   row), the words
#define kLanes 512u
#define kMaxK 256u
layout(local_size_x = 512) in;
layout(constant_id = 0) const int kX = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x_words[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { int y[]; };
layout(std430, set = 0, binding = 2) readonly buffer S { int s[]; };
layout(std430, set = 0, binding = 3) readonly buffer T { int steps[]; };
layout(std430, set = 0, binding = 4) readonly buffer U { int positions[]; };
#define WORDS_BINDING 5
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x_words)
float logit(uint i) { return load_x(kX, i); }

layout(push_constant) uniform Push {
  int x_base, x_offset, y_base, y_offset, s_base, s_offset;
  int n, has_settings;
  int counter, position;  // words: the sampler's per-call counter and the token's position
  // The params, when there is no settings operand: temperature and top_p rounded to f32, the
  // 64-bit seed in halves.
  float temperature, top_p;
  int top_k;
  uint seed_lo, seed_hi;
  int per_row;  // 1: a batch, keyed by the steps and positions operands
  int t_base, t_offset, u_base, u_offset;
} p;

shared float best_value[kLanes];
shared uint best_index[kLanes];
shared uint histogram[256];
shared uint chosen_key, chosen_mask, wanted;  // the radix select's state
shared uint found;                            // candidates gathered so far
shared uint cand_key[kMaxK], cand_id[kMaxK];
shared bool done_gathering;
shared uint ties_here;  // ids equal to the k-th key in the block being gathered

// ---- 64-bit words as uvec2 (low, high): the sampler's generator without shaderInt64 ----------
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  const uint low = uaddCarry(a.x, b.x, carry);
  return uvec2(low, a.y + b.y + carry);
}
uvec2 mul64(uvec2 a, uvec2 b) {
  uint high, low;
  umulExtended(a.x, b.x, high, low);
  return uvec2(low, high + a.x * b.y + a.y * b.x);
}
uvec2 shr64(uvec2 a, uint s) { return uvec2((a.x >> s) | (a.y << (32u - s)), a.y >> s); }  // 0 < s < 32
uvec2 mix64(uvec2 z) {
  z = mul64(z ^ shr64(z, 30u), uvec2(0x1CE4E5B9u, 0xBF58476Du));
  z = mul64(z ^ shr64(z, 27u), uvec2(0x133111EBu, 0x94D049BBu));
  return z ^ shr64(z, 31u);
}
// sample_uniform(seed, counter, position) with its top 24 bits: a uniform f32 in [0, 1).
float uniform01(uvec2 seed, uint counter, uint position) {
  const uvec2 words = uvec2(position, counter);  // (counter << 32) ^ position, both under 2^30
  const uvec2 z = mix64(mix64(add64(seed, uvec2(0x7F4A7C15u, 0x9E3779B9u))) ^ words);
  return float(z.y >> 8) * (1.0 / 16777216.0);
}

// A float64 from its two halves, rounded down to f32 (zero for what f32 cannot hold small).
float narrow(uint high, uint low) {
  const uint sign = high & 0x80000000u;
  const int e = int((high >> 20) & 0x7FFu) - 1023 + 127;
  if (((high >> 20) & 0x7FFu) == 0x7FFu) return uintBitsToFloat(sign | 0x7F800000u | (((high & 0xFFFFFu) | low) != 0u ? 1u : 0u));
  if (e <= 0) return uintBitsToFloat(sign);
  if (e >= 255) return uintBitsToFloat(sign | 0x7F800000u);
  return uintBitsToFloat(sign | (uint(e) << 23) | ((high & 0xFFFFFu) << 3) | (low >> 29));
}
// Settings word w's low 16 bits, and the 32-bit halves of the settings' 64-bit parts.
uint half16(uint s0, uint w) { return uint(s[s0 + w]) & 0xFFFFu; }
uint part32(uint s0, uint w) { return half16(s0, w) | (half16(s0, w + 1u) << 16); }

// An order-preserving key: a larger logit has a larger key; NaN has the smallest (0).
uint key_of(float v) {
  if (isnan(v)) return 0u;
  const uint b = floatBitsToUint(v);
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

void main() {
  const uint t = gl_LocalInvocationID.x, n = uint(p.n), row = gl_WorkGroupID.x;
  const uint x0 = uint(p.x_base + word(p.x_offset)) + row * n;
  float temperature = p.temperature, top_p = p.top_p;
  uint top_k = uint(p.top_k);
  uvec2 seed = uvec2(p.seed_lo, p.seed_hi);
  if (p.has_settings != 0) {
    // As decode_settings() reads them: a temperature that is not a positive number is greedy,
    // a top_p outside (0, 1] is 1, a top_k past 2^31 is 0.
    const uint s0 = uint(p.s_base + word(p.s_offset)) + row * 16u;
    temperature = narrow(part32(s0, 2u), part32(s0, 0u));
    top_p = narrow(part32(s0, 6u), part32(s0, 4u));
    seed = uvec2(part32(s0, 8u), part32(s0, 10u));
    top_k = part32(s0, 12u);
    if (top_k > 0x7FFFFFFFu) top_k = 0u;
    if (!(top_p > 0.0 && top_p <= 1.0)) top_p = 1.0;
  }
  const uint y0 = uint(p.y_base + word(p.y_offset)) + row;

  if (!(temperature > 0.0)) {
    // Greedy: each invocation takes strided logits, then a tree keeps the larger value, the lower
    // index on a tie.
    float best = -1.0 / 0.0;  // -inf: a logit of -inf still wins over "none" (index n)
    uint at = n;
    for (uint i = t; i < n; i += kLanes) {
      const float v = logit(x0 + i);
      if (v > best || (v == best && at == n)) {  // NaN compares false: it never wins
        best = v;
        at = i;
      }
    }
    best_value[t] = best;
    best_index[t] = at;
    barrier();
    for (uint half_size = kLanes / 2u; half_size > 0u; half_size >>= 1) {
      if (t < half_size) {
        const float v = best_value[t + half_size];
        const uint i = best_index[t + half_size];
        if (i < n && (best_index[t] == n || v > best_value[t] || (v == best_value[t] && i < best_index[t]))) {
          best_value[t] = v;
          best_index[t] = i;
        }
      }
      barrier();
    }
    if (t == 0u) y[y0] = best_index[0] == n ? 0 : int(best_index[0]);
    return;
  }

  const uint k = (top_k > 0u && top_k < n) ? top_k : n;
  if (k > kMaxK) {
    if (t == 0u) y[y0] = -1;
    return;
  }
  // The k-th largest key, 8 bits a pass from the top: `wanted` counts how many keys equal to the
  // prefix so far are still to be taken.
  if (t == 0u) {
    chosen_key = 0u;
    chosen_mask = 0u;
    wanted = k;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (uint b = t; b < 256u; b += kLanes) histogram[b] = 0u;
    barrier();
    const uint key_so_far = chosen_key, mask = chosen_mask;
    for (uint i = t; i < n; i += kLanes) {
      const uint key = key_of(logit(x0 + i));
      if ((key & mask) == key_so_far) atomicAdd(histogram[(key >> uint(shift)) & 255u], 1u);
    }
    barrier();
    if (t == 0u) {
      uint above = 0u;
      for (int b = 255; b >= 0; --b) {
        const uint here = histogram[b];
        if (above + here >= wanted) {
          wanted -= above;
          chosen_key |= uint(b) << uint(shift);
          chosen_mask |= 255u << uint(shift);
          break;
        }
        above += here;
      }
    }
    barrier();
  }
  // Gather the keys above the k-th (fewer than k) in any order, then the `wanted` lowest ids of
  // those equal to it, a block of kLanes ids at a time in order.
  const uint kth = chosen_key;
  if (t == 0u) {
    found = 0u;
    done_gathering = false;
    ties_here = 0u;
  }
  barrier();
  for (uint i = t; i < n; i += kLanes) {
    const uint key = key_of(logit(x0 + i));
    if (key > kth) {
      const uint slot = atomicAdd(found, 1u);
      cand_key[slot] = key;
      cand_id[slot] = i;
    }
  }
  barrier();
  for (uint block = 0u; block < n; block += kLanes) {
    const uint i = block + t;
    const bool tie = i < n && key_of(logit(x0 + i)) == kth;
    best_index[t] = tie ? 1u : 0u;
    if (tie) atomicAdd(ties_here, 1u);
    barrier();
    // Only a block that holds ties is scanned (lavapipe ends an invocation's loops after 65,535
    // turns in all: a scan of every block of a large vocabulary would pass it).
    if (t == 0u && ties_here > 0u) {
      for (uint j = 0u; j < kLanes && wanted > 0u; ++j)
        if (best_index[j] != 0u) {
          cand_key[found] = kth;
          cand_id[found] = block + j;
          ++found;
          --wanted;
        }
      done_gathering = wanted == 0u;
      ties_here = 0u;
    }
    barrier();
    if (done_gathering) break;
  }
  // Sort the k candidates, larger key first and the lower id on a tie (a bitonic sort over
  // kMaxK slots, the empty ones last).
  for (uint i = t; i < kMaxK; i += kLanes)
    if (i >= k) {
      cand_key[i] = 0u;
      cand_id[i] = 0xFFFFFFFFu;
    }
  barrier();
  for (uint size = 2u; size <= kMaxK; size <<= 1)
    for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
      if (t < kMaxK / 2u) {
        const uint a = 2u * t - (t & (stride - 1u)), b = a + stride;
        const bool before = cand_key[b] > cand_key[a] || (cand_key[b] == cand_key[a] && cand_id[b] < cand_id[a]);
        // Ascending blocks put the "before" entry first; descending ones after.
        if (before == ((a & size) == 0u)) {
          const uint key = cand_key[a], id = cand_id[a];
          cand_key[a] = cand_key[b];
          cand_id[a] = cand_id[b];
          cand_key[b] = key;
          cand_id[b] = id;
        }
      }
      barrier();
    }
  if (t != 0u) return;
  // The draw, as the CPU makes it: probabilities relative to the largest, the top_p prefix, one
  // uniform over what is kept.
  const float top = logit(x0 + cand_id[0]);
  float sum = 0.0;
  for (uint i = 0u; i < k; ++i) {
    best_value[i] = exp((logit(x0 + cand_id[i]) - top) / temperature);
    sum += best_value[i];
  }
  uint keep = 0u;
  float mass = 0.0;
  while (keep < k) {
    mass += best_value[keep++] / sum;
    if (mass >= top_p) break;
  }
  float kept = 0.0;
  for (uint i = 0u; i < keep; ++i) kept += best_value[i];
  const uint counter = p.per_row != 0 ? uint(steps[p.t_base + word(p.t_offset) + int(row)]) : uint(word(p.counter));
  const uint position = p.per_row != 0 ? uint(positions[p.u_base + word(p.u_offset) + int(row)]) : uint(word(p.position));
  float u = uniform01(seed, counter, position) * kept;
  int token = int(cand_id[keep - 1u]);
  for (uint i = 0u; i < keep; ++i) {
    u -= best_value[i];
    if (u < 0.0) {
      token = int(cand_id[i]);
      break;
    }
  }
  y[y0] = token;
}
