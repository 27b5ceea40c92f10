#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// The first command of a chained step (a CarriedLoop's body stepped on the device, lower.cpp):
// this step's per-call words, made from the carried values the step before emitted, as the
// host's Image::write_values makes them for a call. The carried values go to their slots, every
// derived word is evaluated again from its value (graph/plan.hpp's WordTable, Affine::eval in
// int64 as the host does), and the words are checked as the host checks them: each constraint's
// bounds, every derived word within 30 bits, every carried value in [0, 2^30). Only words that
// pass replace the live ones; otherwise the step runs again with the words before it (which
// recomputes the step before, writing what it wrote) and the outcome says so, for the host to
// report as the call would have failed. A refusal sticks: every step queued after it is refused
// too, whatever the rerun emitted. One invocation: a few dozen words.
//   binding 0: the words (i32): the live words [0, n), then room for n candidates [n, 2n), then
//              at 2n whether a step was refused (the host zeroes it when the chain starts)
//   binding 1: the program (i32), built by lower.cpp:
//              n, values, carried, derived, constraints, the emitted values' first element,
//              then per carried value its slot,
//              per derived word its value slot, its step count and per step (op, lo, hi),
//              per constraint its word, lo (lo, hi halves), hi (lo, hi halves)
//   binding 2: the buffer the Emit step wrote (i32)
//   binding 3: this step's outcome (i32): [0] 0 when the words held, 1 when refused
layout(local_size_x = 1) in;

layout(std430, set = 0, binding = 0) buffer Words { int words[]; };
layout(std430, set = 0, binding = 1) readonly buffer Program { int program[]; };
layout(std430, set = 0, binding = 2) readonly buffer Emitted { int emitted[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Outcome { int outcome[]; };

// iron::kValueLimit. (An int64 constant written as a literal, `int64_t(1) << 30` or
// 1073741824l, compared wrong as glslc compiled it and lavapipe ran it: every carried value
// was refused. Made from an int, it compares right.)
const int kLimit32 = 1 << 30;
const int64_t kLimit = int64_t(kLimit32);
// Affine::Op
const int kMul = 0, kAdd = 1, kFloorDiv = 2, kShr = 3, kMin = 4, kMax = 5;

int64_t wide(int at) { return int64_t(uint(program[at])) | (int64_t(program[at + 1]) << 32); }

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t apply(int op, int64_t x, int64_t operand) {
  if (op == kMul) return x * operand;
  if (op == kAdd) return x + operand;
  if (op == kFloorDiv) return floor_div(x, operand);
  if (op == kShr) return x >> operand;
  if (op == kMin) return min(x, operand);
  return max(x, operand);
}

void main() {
  const int n = program[0], values = program[1], carried = program[2], derived = program[3];
  const int constraints = program[4], first = program[5];
  if (words[2 * n] != 0) {
    outcome[0] = 1;
    return;
  }
  bool held = true;
  for (int i = 0; i < n; ++i) words[n + i] = words[i];
  int at = 6;
  for (int c = 0; c < carried; ++c, ++at) {
    const int v = emitted[first + c];
    held = held && v >= 0 && v < kLimit32;
    words[n + program[at]] = v;
  }
  for (int d = 0; d < derived; ++d) {
    int64_t x = int64_t(words[n + program[at]]);
    const int steps = program[at + 1];
    at += 2;
    for (int s = 0; s < steps; ++s, at += 3) {
      const int64_t operand = wide(at + 1);
      // A divisor of zero never reaches the table (the recorder refuses it); guarded anyway.
      if (program[at] == kFloorDiv && operand == 0) held = false;
      else x = apply(program[at], x, operand);
    }
    held = held && x > -kLimit && x < kLimit;
    words[n + values + d] = int(x);
  }
  for (int k = 0; k < constraints; ++k, at += 5) {
    const int64_t v = int64_t(words[n + program[at]]);
    held = held && v >= wide(at + 1) && v < wide(at + 3);
  }
  if (held)
    for (int i = 0; i < n; ++i) words[i] = words[n + i];
  else
    words[2 * n] = 1;
  outcome[0] = held ? 0 : 1;
}
