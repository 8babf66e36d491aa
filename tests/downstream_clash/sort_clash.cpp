// A task registered under the name of a built-in one (sort), and xgrad's command line: the mistake an extension
// author makes without reading the reserved names. The executable must say which entry and both files, exit 2.
// Then the other mistakes an extension can make at registration, each reported on a line of its own: a name that
// cannot be a flag value, an entry without a build function, a setting under a key of xgrad's own (lr), and a key
// another entry declares otherwise (weight_decay_params as a number).
#include <memory>

#include "cli/main.h"
#include "data/registry.h"
#include "nn/optim.h"

namespace {

xgrad::data::TaskEntry sort_entry() {
  xgrad::data::TaskEntry e;
  e.name = "sort";
  e.description = "sort: a user's own sorting task, under a name xgrad already uses";
  e.order = 1000;
  // Never built: the executable refuses to start before any command runs.
  e.build = [](const xgrad::SettingValues&) -> std::unique_ptr<xgrad::data::Task> { return nullptr; };
  return e;
}

const xgrad::Registration<xgrad::data::TaskEntry> sort_registration{sort_entry()};

xgrad::nn::OptimizerEntry optimizer(const char* name, std::vector<xgrad::Setting> settings, bool with_build = true) {
  xgrad::nn::OptimizerEntry e;
  e.name = name;
  e.order = 1000;
  e.settings = std::move(settings);
  if (with_build)
    e.build = [](std::vector<xgrad::nn::OptimizerParameter>, double, const xgrad::SettingValues&) { return nullptr; };
  return e;
}

const xgrad::Registration<xgrad::nn::OptimizerEntry> bad_name{optimizer("my@opt", {})};
const xgrad::Registration<xgrad::nn::OptimizerEntry> no_build{optimizer("no_build", {}, false)};
const xgrad::Registration<xgrad::nn::OptimizerEntry> core_key{
    optimizer("core_key", {xgrad::number_setting("lr", 0.1, 0.0, 1.0, "a second --lr")})};
const xgrad::Registration<xgrad::nn::OptimizerEntry> other_form{
    optimizer("other_form", {xgrad::number_setting("weight_decay_params", 0.5, 0.0, 1.0, "not the choice adamw has")})};

}  // namespace

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
