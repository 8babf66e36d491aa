// A task registered under the name of a built-in one (sort), and xgrad's command line: the mistake an extension
// author makes without reading the reserved names. The executable must say which entry and both files, exit 2.
#include <memory>

#include "cli/main.h"
#include "data/registry.h"

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

const xgrad::Registration<xgrad::data::TaskEntry> registration{sort_entry()};

}  // namespace

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
