// The compute shaders compiled into the library. Every src/**/*.comp is compiled to SPIR-V by
// glslc at build time and embedded (the generated vulkan_shaders.cpp in the build folder); a
// shader is known by its file name without .comp ("fill" for shaders/fill.comp), so names are
// unique across src/ (CMake checks).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace iron::vulkan {

/// The SPIR-V words of shader `name`, or an empty span when there is none by that name.
std::span<const uint32_t> find_shader(std::string_view name);
/// Every embedded shader's name, sorted: for messages.
std::vector<std::string> shader_names();

}  // namespace iron::vulkan
