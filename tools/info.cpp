// `iron info MODEL [--config config.json] [--no-tensors]`, `iron info --devices` and
// `iron info --kernels [--device D]`
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "devices/vulkan/report.hpp"
#include "iron/cpu.hpp"
#include "iron/models/describe.hpp"

namespace iron::tools {

void add_info_command(CLI::App& app, bool execute) {
  struct Options {
    std::string model;
    models::DescribeOptions describe;
    bool no_tensors = false;
    bool devices = false;
    bool kernels = false;
    std::string device = "cpu";
    int64_t array_items = int64_t(models::DescribeOptions().array_items);
    int64_t string_chars = int64_t(models::DescribeOptions().string_chars);
  };
  auto options = std::make_shared<Options>();
  CLI::App* info = app.add_subcommand(
      "info",
      "Describe a checkpoint: format and version, metadata (type and value of every key), the "
      "tensor table (name, dtype, row-major shape, bytes, offset), totals, and for Llama-family "
      "models the model configuration and tokenizer. With --devices: the compute devices");
  CLI::Option* model = info->add_option("MODEL", options->model, "A GGUF or safetensors file, or a Hugging Face directory (not needed with --devices)");
  info->add_flag("--devices", options->devices,
                 "List the compute devices: the CPU's features, and each Vulkan device with its memory, "
                 "features and limits, marking the one a run would use (IRON_VULKAN_DEVICE=N picks another)");
  info->add_flag("--kernels", options->kernels,
                 "For each kind of step the models run (each weight kind of a matmul at highest and "
                 "medium, each cache type of attention, ...), the kernel it takes on this machine and why "
                 "the faster ones were passed over");
  info->add_option("--device", options->device, "With --kernels: cpu (the default) or vulkan")
      ->check(CLI::IsMember({"cpu", "vulkan"}));
  info->add_option("--config", options->describe.config_path,
                   "A Hugging Face config.json describing a safetensors model (a tokenizer.json "
                   "next to it is summarised too)");
  info->add_flag("--no-tensors", options->no_tensors,
                 "Print only the tensor totals, not one line per tensor");
  add_integer(*info, "--array-items", options->array_items, 0, INT32_MAX, "How many entries of each array value to show");
  add_integer(*info, "--string-chars", options->string_chars, 0, INT32_MAX,
              "Longer string values are cut to this many characters");
  // The callback holds the options: a parse without `execute` (the fuzz target) keeps them too.
  info->callback([options, model, execute] {
    if (model->count() == 0 && !options->devices && !options->kernels)
      throw CLI::RequiredError("MODEL (or --devices or --kernels)");
    if (!execute) return;
    if (options->kernels) {
      std::cout << cpu_device::describe_kernels(options->device);
      if (model->count() == 0 && !options->devices) return;
      std::cout << "\n";
    }
    if (options->devices) {
      std::cout << "cpu: " << cpu_device::available_cpus() << " CPUs available; features: " << cpu_device::features()
                << "\n"
                << vulkan::describe_devices();
      if (model->count() == 0) return;
      std::cout << "\n";
    }
    options->describe.tensors = !options->no_tensors;
    options->describe.array_items = size_t(options->array_items);
    options->describe.string_chars = size_t(options->string_chars);
    std::cout << models::describe_checkpoint(options->model, options->describe);
  });
}

}  // namespace iron::tools
