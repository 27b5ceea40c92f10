// The operators the Vulkan device has kernels for: each records its dispatches from its own
// folder (src/ops/<op>/<op>_vulkan.cpp, its shaders beside it). An operator missing here is
// refused by the Vulkan device with an error naming it.
#include <map>

#include "devices/vulkan/kernel.hpp"

namespace iron::ops {
void record_elementwise(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_matmul(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_copy(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_rowwise(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_unary(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_softmax(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_rope(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_attention(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_sample(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_scalar(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_emit(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_slot_rows(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
void record_segment_mean(const Operator&, const vulkan::KernelArgs&, vulkan::CommandList&);
}  // namespace iron::ops

namespace iron::vulkan {

KernelRecorder find_kernel(std::string_view name) {
  static const std::map<std::string, KernelRecorder, std::less<>> kKernels{
      {"Add", &ops::record_elementwise},
      {"Sub", &ops::record_elementwise},
      {"Mul", &ops::record_elementwise},
      {"Div", &ops::record_elementwise},
      {"SwiGLU", &ops::record_elementwise},
      {"GEMM", &ops::record_matmul},
      {"ProjectionGEMM", &ops::record_matmul},
      {"GEMV", &ops::record_matmul},
      {"Copy", &ops::record_copy},
      {"Gather", &ops::record_copy},
      {"Transpose", &ops::record_copy},
      {"RMSNorm", &ops::record_rowwise},
      {"LayerNorm", &ops::record_rowwise},
      {"SiLU", &ops::record_unary},
      {"GELU", &ops::record_unary},
      {"Softmax", &ops::record_softmax},
      {"RoPE", &ops::record_rope},
      {"Attention", &ops::record_attention},
      {"Sample", &ops::record_sample},
      {"Scalar", &ops::record_scalar},
      {"Emit", &ops::record_emit},
      {"SlotRows", &ops::record_slot_rows},
      {"SegmentMean", &ops::record_segment_mean},
  };
  auto it = kKernels.find(name);
  return it == kKernels.end() ? nullptr : it->second;
}

}  // namespace iron::vulkan
