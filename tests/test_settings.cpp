// One definition per setting: the declarations behind TrainConfig, config.json of this release and of the release
// before it (tests/fixtures/legacy_run_d6e25a8, written by xgrad at d6e25a8's format: `xgrad train --steps 4
// --d-model 8 --batch-size 4 --n-keys 4 --n-values 4 --n-pairs 4 --optimizer sgd --lr 0.1 --checkpoint-every 2`).
#include <doctest/doctest.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "data/registry.h"
#include "nn/optim.h"
#include "report/runs.h"
#include "report/stats.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "train/settings.h"
#include "train/sweep_manifest.h"

using namespace xgrad;
using namespace xgrad::train;
using xgrad::testing::read_json;
using xgrad::testing::run_xgrad;
namespace fs = std::filesystem;

namespace {

const fs::path kLegacyRun = fs::path(XGRAD_SOURCE_DIR) / "tests/fixtures/legacy_run_d6e25a8";

fs::path temp_copy_of_legacy_run(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("xgrad_test_settings_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  fs::copy(kLegacyRun, p, fs::copy_options::recursive);
  return p;
}

std::vector<double> loss_column(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header: step,loss,...
  std::vector<double> out;
  while (std::getline(in, line)) out.push_back(std::stod(line.substr(line.find(',') + 1)));
  return out;
}

}  // namespace

TEST_CASE("every core setting and every registered entry's setting is declared once, with a flag from its key") {
  std::set<std::string> keys;
  for (const CoreSetting& c : core_settings()) {
    CHECK(keys.insert(c.setting.key).second);
    CHECK(check_setting_value(c.setting, c.setting.default_value) == "");
  }
  for (const ComponentSetting& c : component_settings()) {
    INFO(c.setting.key);
    CHECK(keys.insert(c.setting.key).second);  // keys unique across core and registries
    CHECK(check_setting_value(c.setting, c.setting.default_value) == "");
  }
  CHECK(flag_of("d_model") == "--d-model");
  CHECK(flag_of("n_keys") == "--n-keys");
  // The trainer's defaults are the declarations': the default experiment is unchanged (n_keys and n_values 8).
  const TrainConfig c;
  CHECK(c.task == "kv_recall");
  CHECK(get_setting(c, "n_keys") == 8);
  CHECK(get_setting(c, "n_values") == 8);
  CHECK(get_setting(c, "n_pairs") == 8);
  CHECK(c.optimizer == "adamw");
  CHECK(get_setting(c, "beta2") == 0.999);
  CHECK(get_setting(c, "momentum").is_null());  // adamw does not read it
  // The owners of a shared declaration: every sequence task and char_lm read seq_len.
  for (const ComponentSetting& s : component_settings())
    if (s.setting.key == "seq_len")
      CHECK(s.owners ==
            std::vector<std::string>{"copy", "reverse", "sort", "majority", "induction", "mqar", "char_lm"});
}

TEST_CASE("set_setting checks the declaration; selecting another task drops only the settings it does not read") {
  TrainConfig c;
  CHECK_THROWS_WITH_AS(set_setting(c, "d_model", 0), "--d-model: must be in [1, 16384], got 0", ConfigError);
  CHECK_THROWS_WITH_AS(set_setting(c, "task", "mnist"), doctest::Contains("--task: mnist is not a registered task"),
                       ConfigError);
  const std::string allowed = "(allowed: " + nn::OptimizerRegistry::instance().joined_names() + ")";
  CHECK_THROWS_WITH_AS(set_setting(c, "optimizer", "adam"), doctest::Contains(allowed.c_str()), ConfigError);
  set_setting(c, "task", "copy");
  set_setting(c, "seq_len", 10);
  set_setting(c, "task", "char_lm");  // char_lm reads seq_len too
  CHECK(get_setting(c, "seq_len") == 10);
  set_setting(c, "task", "kv_recall");
  CHECK_FALSE(c.settings.contains("seq_len"));
  c.settings.set("momentum", 0.5);
  CHECK(unread_setting_error(c, "momentum") ==
        "--momentum is read only by --optimizer sgd, muon (the optimizer is adamw)");
}

TEST_CASE("config.json: to_json and from_json round-trip every setting; d_k is resolved; derived values apart") {
  TrainConfig c;
  set_setting(c, "task", "majority");
  set_setting(c, "n_symbols", 5);
  set_setting(c, "optimizer", "sgd");
  set_setting(c, "momentum", 0.25);
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.out = "somewhere";
  const nlohmann::json j = c.to_json();
  CHECK(j.at("d_k") == 16);
  CHECK(j.at("n_symbols") == 5);
  CHECK(j.at("seq_len") == 16);
  CHECK_FALSE(j.contains("n_keys"));
  CHECK(j.at("config_version") == kConfigVersion);
  const TrainConfig back = TrainConfig::from_json(j, "test");
  CHECK(back.to_json() == j);
  CHECK(differing_settings(c, back).empty());
}

TEST_CASE("a legacy config.json (d6e25a8) reads in the canonical form: keys renamed, unread settings dropped") {
  const nlohmann::json legacy = read_json(kLegacyRun / "config.json");
  REQUIRE_FALSE(legacy.contains("config_version"));
  REQUIRE(legacy.contains("task_seq_len"));
  const nlohmann::json j = canonical_config_json(legacy, "fixture");
  CHECK(j.at("derived").at("vocab_size") == 20);
  CHECK(j.at("derived").at("seq_len") == 5);
  CHECK(j.at("derived").at("chance_loss") == doctest::Approx(std::log(4.0)));
  for (const char* gone : {"task_seq_len", "text_path", "data_dir", "data_vocab_size", "seq_len", "n_symbols",
                           "vocab_size", "chance_loss", "num_parameters"})
    CHECK_FALSE(j.contains(gone));
  CHECK(j.at("n_keys") == 4);
  CHECK(j.at("momentum") == 0.9);
  const TrainConfig c = TrainConfig::from_json(legacy, "fixture");
  CHECK(c.optimizer == "sgd");
  CHECK(get_setting(c, "n_pairs") == 4);
  CHECK(c.head_size() == 8);
}

TEST_CASE("a --config file of a few keys without config_version: every key is applied, or refused by name") {
  // Such a file lacks the component keys: its settings of the default task, schedule and layer were dropped unseen.
  const TrainConfig warm = TrainConfig::from_json({{"warmup_steps", 2}}, "c.json");
  CHECK(get_setting(warm, "warmup_steps") == 2);
  CHECK(get_setting(TrainConfig::from_json({{"kv_encoding", "sum"}}, "c.json"), "kv_encoding") == "sum");
  CHECK(get_setting(TrainConfig::from_json({{"n_keys", 16}}, "c.json"), "n_keys") == 16);
  CHECK(get_setting(TrainConfig::from_json({{"attn_out_proj", false}}, "c.json"), "attn_out_proj") == false);
  CHECK_THROWS_WITH_AS(TrainConfig::from_json({{"warmup_steps", -1}}, "c.json"),
                       doctest::Contains("c.json: 'warmup_steps' holds -1"), ConfigError);
  // A key no selected entry reads is refused as on the command line, not dropped.
  TrainConfig momentum = TrainConfig::from_json({{"momentum", 0.5}}, "c.json");
  momentum.out = "unused";
  CHECK_THROWS_WITH_AS(momentum.validate(), doctest::Contains("--momentum is read only by --optimizer sgd, muon"),
                       ConfigError);
}

TEST_CASE("a run directory of the previous release loads in compare and resumes with xgrad train --resume") {
  const report::RunRecord run = report::load_run(kLegacyRun.string());
  CHECK_FALSE(run.incomplete);
  CHECK(run.steps_planned == 4);
  CHECK(run.series.size() == 4);
  const nlohmann::json arm = report::arm_settings(run.config);
  CHECK(arm.at("chance_loss") == doctest::Approx(std::log(4.0)));
  CHECK(arm.at("n_keys") == 4);
  CHECK_FALSE(arm.contains("seed"));

  // Resumed to 6 steps, the curve is the one a run of 6 steps from the start draws.
  const fs::path dir = temp_copy_of_legacy_run("resume");
  REQUIRE(run_xgrad({"train", "--resume", dir.string(), "--steps", "6"}).exit_code == 0);
  const fs::path fresh = dir.string() + "_fresh";
  fs::remove_all(fresh);
  REQUIRE(run_xgrad({"train",
                     "--out",
                     fresh.string(),
                     "--steps",
                     "6",
                     "--d-model",
                     "8",
                     "--batch-size",
                     "4",
                     "--n-keys",
                     "4",
                     "--n-values",
                     "4",
                     "--n-pairs",
                     "4",
                     "--optimizer",
                     "sgd",
                     "--lr",
                     "0.1",
                     "--checkpoint-every",
                     "2"})
              .exit_code == 0);
  const std::vector<double> resumed = loss_column(dir / "metrics.csv"), whole = loss_column(fresh / "metrics.csv");
  REQUIRE(resumed.size() == 6);
  REQUIRE(whole.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) CHECK(resumed[i] == doctest::Approx(whole[i]).epsilon(1e-5));
  // The resumed run's config.json is rewritten in this release's format.
  CHECK(read_json(dir / "config.json").at("config_version") == kConfigVersion);
  // A changed setting is still refused by its flag.
  CHECK(run_xgrad({"train", "--resume", dir.string(), "--d-model", "16"}).exit_code != 0);
  // compare reads the legacy copy and a new run side by side as one arm per setting.
  const fs::path copy = temp_copy_of_legacy_run("compare");
  REQUIRE(run_xgrad({"compare", copy.string(), fresh.string(), "--plots", "false", "--out", (copy / "report").string()})
              .exit_code == 0);
  CHECK(fs::exists(copy / "report" / "report.md"));
  for (const auto& p : {dir, fresh, copy}) fs::remove_all(p);
}

namespace {

// Every name of `table` parses to its value and prints back as itself.
template <class E, std::size_t N>
void check_round_trip(const EnumName<E> (&table)[N]) {
  for (const EnumName<E>& e : table) {
    INFO(e.name);
    CHECK(enum_name(table, parse_enum(table, e.name)) == e.name);
  }
}

}  // namespace

TEST_CASE("enumerations: each value's name round-trips, and another name is refused naming the allowed ones") {
  check_round_trip(kOnNanNames);
  check_round_trip(nn::kParametrizationNames);
  check_round_trip(nn::kWeightDecayParamsNames);
  check_round_trip(kSweepStatusNames);
  CHECK_THROWS_WITH_AS(parse_enum(kOnNanNames, "ignore"), "'ignore' is not one of stop, skip", EnumNameError);
  // The settings offer the table's names (--help, the check of a flag's or config.json's value).
  CHECK(find_setting("on_nan")->choices == enum_names(kOnNanNames));
  CHECK(find_setting("parametrization")->choices == enum_names(nn::kParametrizationNames));
  CHECK(find_setting("weight_decay_params")->choices == enum_names(nn::kWeightDecayParamsNames));
  // A config.json value goes through the member's type and back to the same text.
  TrainConfig c;
  set_setting(c, "on_nan", "skip");
  set_setting(c, "parametrization", "mup");
  CHECK(c.on_nan == OnNan::skip);
  CHECK(c.model.parametrization == nn::Parametrization::mup);
  const TrainConfig back = TrainConfig::from_json(c.to_json(), "config.json");
  CHECK(back.to_json().at("on_nan") == "skip");
  CHECK(back.to_json().at("parametrization") == "mup");
  // An unknown value in config.json is refused naming the allowed values.
  struct Bad {
    const char* key;
    const char* value;
    const char* allowed;
  };
  for (const Bad& bad : {Bad{"on_nan", "ignore", "one of stop, skip"}, Bad{"parametrization", "ntk", "one of sp, mup"},
                         Bad{"weight_decay_params", "biases", "one of all, matrices"}}) {
    nlohmann::json j = TrainConfig().to_json();
    j[bad.key] = bad.value;
    INFO(std::string(bad.key));
    CHECK_THROWS_WITH_AS(TrainConfig::from_json(j, "config.json"), doctest::Contains(bad.allowed), ConfigError);
  }
}

TEST_CASE("a text setting that takes a number holds one text per value: --qk-norm-scale 1.0, 1e0, 01 are 1") {
  const xgrad::Setting* declared = xgrad::train::find_setting("qk_norm_scale");
  REQUIRE(declared != nullptr);
  for (const char* text : {"1", "1.0", "1e0", "01", "+1.000"}) {
    nlohmann::json value;
    CHECK(xgrad::parse_setting_value(*declared, text, value).empty());
    CHECK(value == "1");
  }
  nlohmann::json value;
  CHECK(xgrad::parse_setting_value(*declared, "0.12", value).empty());
  CHECK(value == "0.12");  // the shortest text of the double, not 0.11999999999999999
  CHECK(xgrad::parse_setting_value(*declared, "inv_sqrt_dk", value).empty());
  CHECK(value == "inv_sqrt_dk");
}

TEST_CASE("config.json's qk_norm_scale \"1.0\" or 1.0 reads as \"1\", as the flag does") {
  for (const nlohmann::json& given : {nlohmann::json("1.0"), nlohmann::json(1.0), nlohmann::json(1)}) {
    const auto c = xgrad::train::TrainConfig::from_json({{"scale", "qk_norm"}, {"qk_norm_scale", given}}, "test");
    CHECK(c.settings.json().at("qk_norm_scale") == "1");
  }
}
