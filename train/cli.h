// Command-line flags of the `xgrad` executable (CLI11 stays out of the libraries).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "train/config.h"

namespace xgrad::train {

/// A plain decimal whole number in [lo, hi]. CLI11 2.1 would turn "-1" into 2^64 - 1 for an unsigned flag; this
/// validator rejects it, and empty strings, naming the allowed range.
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi);
/// A finite decimal number (no hex, no inf/nan, not empty).
CLI::Validator decimal_number();
/// true/false (also 1/0).
CLI::Validator boolean_word();

/// Flags shared by `train`, `experiment`, `sweep` and `probe` (model, task, optimiser). `with_model_size` adds
/// --d-model and --scale, which the multi-run commands set per run themselves.
void add_training_flags(CLI::App& app, TrainConfig& config, std::string& scale, bool with_model_size);

}  // namespace xgrad::train
