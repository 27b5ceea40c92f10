// The libFuzzer entry point of one target, chosen at compile time (IRON_FUZZ_TARGET).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  iron::fuzz::IRON_FUZZ_TARGET(data, size);
  return 0;
}
