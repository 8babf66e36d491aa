#include "report/tensorboard_export.h"

#include <filesystem>
#include <map>
#include <stdexcept>

#include "report/runs.h"
#include "train/run_directory.h"
#include "train/tensorboard.h"

namespace xgrad::report {

namespace fs = std::filesystem;

namespace {

// The last name of `dir` ("sweeps/dk/" and "sweeps/dk" give "dk"; "." gives the working directory's name).
std::string last_name(const std::string& dir) {
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  const std::string name = path.filename().string();
  if (!name.empty() && name != "." && name != "..") return name;
  return fs::absolute(path).lexically_normal().filename().string();
}

// The subdirectory of --out a run gets: `input`'s name, then the run's path below it.
std::string export_name(const std::string& input, const std::string& run_dir) {
  const fs::path below = fs::path(run_dir).lexically_normal().lexically_relative(fs::path(input).lexically_normal());
  const fs::path name = fs::path(last_name(input));
  return (below.empty() || below == "." ? name : name / below).string();
}

}  // namespace

std::vector<ExportedRun> export_tensorboard(const std::vector<std::string>& inputs, const std::string& out) {
  std::map<std::string, std::string> run_of_name;  // subdirectory -> run directory, to refuse two runs in one
  std::vector<std::pair<std::string, std::string>> planned;
  for (const std::string& input : inputs)
    for (const std::string& run_dir : find_run_dirs({input}, {}, "export tensorboard").dirs) {
      const std::string name = export_name(input, run_dir);
      const auto [it, added] = run_of_name.emplace(name, run_dir);
      if (!added && it->second != run_dir)
        throw std::invalid_argument("export tensorboard: the runs " + it->second + " and " + run_dir +
                                    " would both be written to " + (fs::path(out) / name).string() +
                                    " (inputs of one name); export them to different --out directories");
      if (added) planned.emplace_back(run_dir, name);
    }
  // A symbolic link below --out (a colleague's directory may hold one) is refused before anything is written.
  for (const auto& [run_dir, name] : planned) train::check_not_linked(out, fs::path(out) / name, "--out");
  std::vector<ExportedRun> exported;
  for (const auto& [run_dir, name] : planned)
    exported.push_back({run_dir, train::export_event_file(run_dir, fs::path(out) / name).string()});
  return exported;
}

}  // namespace xgrad::report
