// `iron info MODEL [--config config.json] [--no-tensors]`
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "iron/models/describe.hpp"

namespace iron::tools {

void add_info_command(CLI::App& app) {
  struct Options {
    std::string model;
    models::DescribeOptions describe;
    bool no_tensors = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* info = app.add_subcommand(
      "info",
      "Describe a checkpoint: format and version, metadata (type and value of every key), the "
      "tensor table (name, dtype, row-major shape, bytes, offset), totals, and for Llama-family "
      "models the model configuration and tokenizer");
  info->add_option("MODEL", options->model, "A GGUF or safetensors file")->required();
  info->add_option("--config", options->describe.config_path,
                   "A Hugging Face config.json describing a safetensors model (a tokenizer.json "
                   "next to it is summarised too)");
  info->add_flag("--no-tensors", options->no_tensors,
                 "Print only the tensor totals, not one line per tensor");
  info->add_option("--array-items", options->describe.array_items,
                   "How many entries of each array value to show")
      ->capture_default_str();
  info->add_option("--string-chars", options->describe.string_chars,
                   "Longer string values are cut to this many characters")
      ->capture_default_str();
  info->callback([options] {
    options->describe.tensors = !options->no_tensors;
    std::cout << models::describe_checkpoint(options->model, options->describe);
  });
}

}  // namespace iron::tools
