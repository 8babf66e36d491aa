#include "train/sweep_manifest.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "train/config.h"
#include "train/json_file.h"
#include "train/run_directory.h"
#include "train/run_files.h"
#include "train/settings.h"

namespace xgrad::train {

namespace fs = std::filesystem;

namespace {

const char* const kMakeManifest = "write one with `xgrad sweep --out DIR ...` (any --launcher)";

// Entry `e` of `path` (the sweep.json of `sweep_dir`) into `p`: "" when it reads as a grid point, else why not, as a
// sentence naming the file ("<path> gives point 3 the run directory ...").
std::string read_point(const nlohmann::json& e, const std::string& sweep_dir, const fs::path& path, ManifestPoint& p) {
  if (!e.is_object() || !e.contains("index") || !e.at("index").is_number_unsigned() || !e.contains("name") ||
      !e.at("name").is_string() || !e.contains("dir") || !e.at("dir").is_string())
    return path.string() + " is an index written before sweep manifests (its runs have no index); run the sweep " +
           "command that made it again to write one";
  p.index = e.at("index").get<std::size_t>();
  p.name = e.at("name").get<std::string>();
  // A point trains only under DIR/runs/: a manifest edited to point elsewhere must not make run-one write there.
  const fs::path dir = fs::path(e.at("dir").get<std::string>()).lexically_normal();
  if (dir.is_absolute() || dir.empty() || *dir.begin() != "runs" || std::distance(dir.begin(), dir.end()) != 2)
    return path.string() + " gives point " + std::to_string(p.index) + " the run directory '" +
           e.at("dir").get<std::string>() + "' (allowed: runs/<name> inside the sweep directory)";
  p.dir = (fs::path(sweep_dir) / dir).string();
  if (e.contains("config")) p.config = e.at("config");
  if (!e.contains("status")) return "";
  const nlohmann::json& status = e.at("status");  // not a string (1, null): refused as any other unknown status
  try {
    p.recorded_status = parse_enum(kSweepStatusNames, status.is_string() ? status.get<std::string>() : status.dump());
  } catch (const EnumNameError& error) {
    return path.string() + ": point " + std::to_string(p.index) + "'s status " + error.what();
  }
  return "";
}

}  // namespace

ManifestEntries read_manifest_entries(const std::string& sweep_dir) {
  const fs::path path = fs::path(sweep_dir) / "sweep.json";
  std::error_code ec;
  if (!fs::is_directory(sweep_dir, ec)) throw ConfigError("DIR: " + sweep_dir + " is not a directory");
  // Opening a FIFO would wait for a writer forever.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw ConfigError("DIR: " + path.string() + " is not a regular file (a FIFO, device or directory), so no sweep " +
                      "manifest; remove it or " + kMakeManifest);
  std::ifstream in(path);
  if (!in) throw ConfigError("DIR: " + sweep_dir + " holds no sweep.json, so no sweep manifest; " + kMakeManifest);
  nlohmann::json index;
  try {
    index = parse_json(in, path.string());
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("DIR: " + path.string() + " is not valid JSON; " + kMakeManifest + " to write it again");
  }
  if (!index.is_object() || !index.contains("runs") || !index.at("runs").is_array() || index.at("runs").empty())
    throw ConfigError("DIR: " + path.string() + " lists no runs; " + kMakeManifest);
  ManifestEntries out;
  for (const nlohmann::json& e : index.at("runs")) {
    ManifestPoint p;
    const std::string refused = read_point(e, sweep_dir, path, p);
    refused.empty() ? out.points.push_back(std::move(p)) : out.refused.push_back(refused);
  }
  std::sort(out.points.begin(), out.points.end(),
            [](const ManifestPoint& a, const ManifestPoint& b) { return a.index < b.index; });
  return out;
}

std::vector<ManifestPoint> read_sweep_manifest(const std::string& sweep_dir) {
  ManifestEntries entries = read_manifest_entries(sweep_dir);
  if (!entries.refused.empty()) throw ConfigError("DIR: " + entries.refused.front());
  for (std::size_t i = 0; i < entries.points.size(); ++i)
    if (entries.points[i].index != i)
      throw ConfigError(
          fmt::format("DIR: {} does not number its grid points 0 to {} (point {} is missing); "
                      "{} to write it again",
                      (fs::path(sweep_dir) / "sweep.json").string(), entries.points.size() - 1, i, kMakeManifest));
  return std::move(entries.points);
}

long checkpoint_step(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char size_bytes[8] = {};
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) return -1;
  std::uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = size << 8 | size_bytes[i];
  if (size == 0 || size > (std::uint64_t{1} << 26)) return -1;
  std::string header(size, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(size))) return -1;
  try {
    std::istringstream text(header);
    const nlohmann::json j = parse_json(text, path);
    return std::stol(j.at("__metadata__").at("step").get<std::string>());
  } catch (const std::exception&) {
    return -1;
  }
}

namespace {

// Whether `dir`/config.json reads as a JSON object: a run without one is started over (on_disk), whatever else its
// directory holds.
bool config_readable(const fs::path& dir) {
  try {
    return read_json_file(dir / kConfigFile).is_object();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::optional<RunSummary> read_run_summary(const fs::path& dir) {
  const fs::path path = dir / kSummaryFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return RunSummary::from_json(read_json_file(path, kMaxRunJsonBytes));
  } catch (const nlohmann::json::parse_error&) {
    return std::nullopt;  // a write cut short
  } catch (const std::exception& e) {
    throw ConfigError(path.string() + " is refused (" + e.what() +
                      "): no trainer writes it, so its run is neither resumed nor redone over it; restore it, or "
                      "remove it to have the run resumed from its checkpoint (or trained again)");
  }
}

PointState point_state(const std::string& run_dir) {
  const fs::path dir(run_dir);
  PointState state;
  std::error_code ec;
  const bool has_config = config_readable(dir);
  try {
    if (const std::optional<RunSummary> s = has_config ? read_run_summary(dir) : std::nullopt) {
      if (!metrics_complete(dir, s->steps_done)) {  // metrics.csv deleted or cut short since: a rerun redoes it
        state.status = PointStatus::incomplete;
        return state;
      }
      state.status = s->diverged ? PointStatus::diverged : PointStatus::complete;
      state.step = s->diverged ? s->diverged_step : -1;
      state.final_loss = s->final_loss;
      return state;
    }
  } catch (const ConfigError& e) {
    state.status = PointStatus::invalid;
    state.refused = e.what();
    return state;
  }
  state.holder = run_lock_holder(dir);
  if (!state.holder.empty()) {
    state.status = PointStatus::running;
    state.step = static_cast<long>(count_metrics_rows(dir));
    return state;
  }
  if (!has_config && (fs::exists(dir / kSummaryFile, ec) || fs::exists(dir / kCheckpointFile, ec))) {
    state.status = PointStatus::incomplete;
    return state;
  }
  if (fs::exists(dir / kCheckpointFile, ec)) {
    state.status = PointStatus::interrupted;
    state.step = checkpoint_step((dir / kCheckpointFile).string());
    return state;
  }
  // The files an attempt leaves before its first checkpoint (train.log is opened before training starts).
  for (const char* file : {kConfigFile, kMetricsFile, "train.log"})
    if (fs::exists(dir / file, ec)) {
      state.status = PointStatus::failed;
      return state;
    }
  return state;
}

namespace {

// The settings a run's config.json (canonical) gave its run, every key filled: a key the file lacks is read as
// TrainConfig::from_json reads it, at its default for the components the file selects. Null when the file is not a
// configuration from_json accepts; its missing keys are then taken at their declared defaults.
nlohmann::json filled_config(const nlohmann::json& stored) {
  try {
    return TrainConfig::from_json(stored, "config.json").to_json();
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace

std::string first_conflicting_setting(const nlohmann::json& stored, const TrainConfig& want) {
  const nlohmann::json wanted = want.to_json();
  nlohmann::json filled;  // computed once, for the first key the file lacks
  for (auto& [key, value] : wanted.items()) {
    const Setting* declared = find_setting(key);
    // Where the run is written and how it reports progress do not make it another run.
    if (declared && declared->resumable && declared->role == Setting::Role::record) continue;
    if (stored.contains(key)) {
      if (stored.at(key) != value)
        return "'" + key + "' (" + stored.at(key).dump() + " there, " + value.dump() + " here)";
      continue;
    }
    // A key the file lacks is not a match: the run used what a missing key reads as.
    if (filled.is_null()) filled = filled_config(stored);
    const nlohmann::json there = filled.is_object() && filled.contains(key) ? filled.at(key)
                                 : declared                                 ? declared->default_value
                                                                            : nlohmann::json();
    if (there != value)
      return "'" + key + "' (missing there, read as " + (there.is_null() ? "nothing" : there.dump()) + "; " +
             value.dump() + " here)";
  }
  return "";
}

namespace {

// How the point contradicts sweep.json, with what follows, as `sweep status` shows it: settings in sweep.json that
// run-one refuses (absent, not an object, or refused as an edited file), or a run whose config.json differs from
// them or is refused; "" when nothing does or the run's config.json cannot be read at all (reported elsewhere).
std::string point_conflict(const ManifestPoint& point) {
  const std::string rewrite = "; run-one refuses it, and the sweep command run again rewrites sweep.json";
  if (!point.config.is_object()) return "its entry in sweep.json records no settings" + rewrite;
  TrainConfig want;
  try {
    want = TrainConfig::from_json(point.config, "sweep.json " + point.name);
  } catch (const std::exception& e) {
    return std::string("its settings in sweep.json are refused: ") + e.what() + rewrite;
  }
  const fs::path path = fs::path(point.dir) / kConfigFile;
  nlohmann::json stored;
  try {
    stored = read_json_file(path);
  } catch (const std::exception&) {
    return "";
  }
  const std::string refused = "; run-one and the sweep refuse it";
  try {
    const std::string setting = first_conflicting_setting(canonical_config_json(stored, path.string()), want);
    return setting.empty() ? "" : "its config.json differs from sweep.json in " + setting + refused;
  } catch (const std::exception& e) {
    return std::string("its config.json is refused: ") + e.what() + refused;
  }
}

}  // namespace

PointState point_state(const ManifestPoint& point) {
  PointState state = point_state(point.dir);
  std::error_code ec;
  if (state.status == PointStatus::pending && point.recorded_status && *point.recorded_status != SweepStatus::pending &&
      !fs::exists(point.dir, ec))
    state.status = PointStatus::missing;
  if (state.status == PointStatus::complete || state.status == PointStatus::diverged ||
      state.status == PointStatus::interrupted || state.status == PointStatus::failed ||
      state.status == PointStatus::invalid || state.status == PointStatus::pending) {
    state.conflict = point_conflict(point);
    if (!state.conflict.empty()) state.status = PointStatus::conflicting;
  }
  return state;
}

std::size_t SweepStanding::count_of(PointStatus status) const {
  const auto it = count.find(status);
  return it == count.end() ? 0 : it->second;
}

SweepStanding sweep_standing(const std::string& sweep_dir) {
  SweepStanding standing;
  const std::vector<ManifestPoint> points = read_manifest_entries(sweep_dir).points;
  standing.points = points.size();
  for (const ManifestPoint& p : points) {
    ++standing.count[point_state(p).status];
    for (fs::path& f : leftover_partial_writes(p.dir)) standing.leftovers.push_back(std::move(f));
  }
  return standing;
}

std::string standing_counts(const SweepStanding& standing) {
  std::string counts;
  for (const auto& [status, name] : kPointStatusNames)
    if (standing.count_of(status))
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", standing.count_of(status), name);
  return counts;
}

}  // namespace xgrad::train
