#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "iron/dtype.hpp"
#include "iron/error.hpp"
#include "iron/tensor.hpp"

namespace iron {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256 + 1.0f / 4096), 0x3f81);  // above halfway: up
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16RoundTripsAndRounds) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                    // overflow: infinity
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));   // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);   // halfway to it: ties to even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);   // 1.5 units: ties to even (2)
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);      // halfway: even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
  for (uint32_t h = 0; h < 0x7c00; ++h) EXPECT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h);
}

TEST(DType, Q8_0Dequantises) {
  uint8_t block[34] = {};
  uint16_t d = f32_to_f16(0.5f);
  std::memcpy(block, &d, 2);
  for (int i = 0; i < 32; ++i) block[2 + i] = uint8_t(int8_t(i - 16));
  float out[32];
  to_f32(DType::q8_0, block, out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * float(i - 16));
}

TEST(DType, Q8_0QuantisesEachBlockToItsLargestMagnitude) {
  // Two blocks: one spanning [-3.1, 3.1], one of zeros (a zero scale, not a division by zero).
  float x[64] = {};
  for (int i = 0; i < 32; ++i) x[i] = -3.1f + 0.2f * float(i);
  x[7] = 6.35f;  // the largest magnitude maps to 127
  uint8_t q[68];
  from_f32(DType::q8_0, x, q, 64);
  uint16_t d16;
  std::memcpy(&d16, q, 2);
  EXPECT_EQ(d16, f32_to_f16(6.35f / 127.0f));
  EXPECT_EQ(int8_t(q[2 + 7]), 127);
  float back[64];
  to_f32(DType::q8_0, q, back, 64);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 0.5f * 6.35f / 127.0f * 1.01f) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(back[i], 0.0f);
  EXPECT_THROW(from_f32(DType::q8_0, x, q, 40), Error);  // not whole blocks
  EXPECT_THROW(from_f32(DType::q4_0, x, q, 32), Error);  // no quantiser for the weight kinds
}

TEST(DType, Q8_0QuantisesTinyAndNonFiniteBlocksWithinInt8) {
  // A block whose scale is so small that its reciprocal overflows divides by the scale instead:
  // its quants are those of the same block scaled up (x / scale is the same quotient). A block
  // holding a NaN or an infinity writes quants inside int8 (clamped; a NaN's quotient as 0)
  // rather than convert out of int8's range.
  float tiny[32], big[32];
  for (int i = 0; i < 32; ++i) {
    big[i] = (i % 2 ? -1.0f : 1.0f) * float(i + 1);
    tiny[i] = big[i] * 1e-40f;  // largest 3.2e-39: scale 2.5e-41, 1 / scale overflows
  }
  uint8_t q_tiny[34], q_big[34];
  from_f32(DType::q8_0, tiny, q_tiny, 32);
  from_f32(DType::q8_0, big, q_big, 32);
  EXPECT_EQ(int8_t(q_tiny[2 + 31]), -127);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(int8_t(q_tiny[2 + i]), int8_t(q_big[2 + i]), 1) << i;
  float odd[32] = {};
  odd[0] = std::numeric_limits<float>::infinity();
  odd[1] = -2.0f;
  odd[2] = std::numeric_limits<float>::quiet_NaN();
  uint8_t q[34];
  from_f32(DType::q8_0, odd, q, 32);  // the scale is infinite: every quotient inf * 0 or NaN
  for (int i = 0; i < 32; ++i) EXPECT_LE(std::abs(int(int8_t(q[2 + i]))), 127) << i;
  EXPECT_EQ(int8_t(q[2 + 2]), 0);  // NaN
}

TEST(DType, Q4_1Dequantises) {
  uint8_t block[20] = {};
  uint16_t d = f32_to_f16(2.0f), m = f32_to_f16(-1.0f);
  std::memcpy(block, &d, 2);
  std::memcpy(block + 2, &m, 2);
  for (int i = 0; i < 16; ++i) block[4 + i] = uint8_t(i | ((15 - i) << 4));
  float out[32];
  to_f32(DType::q4_1, block, out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 2.0f * float(i) - 1.0f);
    EXPECT_EQ(out[16 + i], 2.0f * float(15 - i) - 1.0f);
  }
}

TEST(DType, StorageBytesRefusesPartialBlocks) {
  EXPECT_EQ(storage_bytes(DType::q4_0, 64), 36);
  EXPECT_THROW(storage_bytes(DType::q4_0, 33), Error);
  EXPECT_EQ(dtype_from_name("q4_1"), DType::q4_1);
  try {
    dtype_from_name("f8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'f8'"), std::string::npos);
  }
}

TEST(Tensor, ConvertsAndViews) {
  Tensor t = Tensor::from({1, 2, 3, 4, 5, 6}, {3, 2}, bf16);
  EXPECT_EQ(t.nbytes(), 12);
  Tensor r = t.rows(1, 3);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.to_floats(), (std::vector<float>{3, 4, 5, 6}));
  float backing[4] = {1, 2, 3, 4};
  Tensor view = Tensor::borrow(backing, {4}, f32);
  EXPECT_EQ(view.item(2), 3.0f);
  EXPECT_THROW(view.mutable_data(), Error);
  EXPECT_THROW(t.reshape({4}), Error);
}

}  // namespace
}  // namespace iron
