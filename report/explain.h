// `xgrad explain`: the argument for dividing attention scores by sqrt(d_k) (Vaswani et al. 2017, sec. 3.2.1 and
// footnote 4) in five steps, each measured on the actual model, with a verdict computed from the numbers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/explain_measure.h"
#include "report/text.h"
#include "train/config.h"

namespace xgrad::report {

struct ExplainOptions {
  std::vector<std::size_t> d_ks{4, 16, 64, 256, 1024, 4096};
  std::vector<std::string> scales{"none", "sqrt_dk"};
  std::vector<std::string> runs;  // run or sweep directories whose training supplies the evidence of section 5
  double loss_threshold = -1;     // as compare's: < 0 is half of each run's chance loss
};

/// The training evidence of `--runs`, per arm (runs that differ only in seed) of the runs read.
struct TrainingPoint {
  std::size_t d_k = 0;
  std::string scale;
  std::string label;  // scale, and the settings that tell this arm from others of its (d_k, scale)
  std::string group;  // the label without the scale: arms of one group differ in scale and d_k only
  std::size_t n_runs = 0;
  double final_loss = 0;           // mean over seeds, nats
  double steps_to_loss = 0;        // mean over the seeds that reached the loss threshold; NaN if none did
  std::size_t reached = 0;         // seeds that reached it
  double saturated_share = 0;      // mean over seeds of the median over measured steps of the saturated share
  double score_grad_relative = 0;  // mean over seeds of RunStats::score_grad_relative
  std::string versus_reference;    // how its final loss compares with the unscaled arm's ("" for that arm)
  nlohmann::json settings;         // the arm's settings (arm_settings of its runs' config.json)
};

struct TrainingEvidence {
  std::vector<TrainingPoint> points;  // by label, then d_k
  std::vector<std::string> notes;     // runs left out and why; control characters escaped
};

/// A verdict ("holds", ...), its class (holds, fails, partly), its text, and its explain.md key and fields.
struct SectionVerdict {
  std::string verdict, verdict_class, text, key;
  Fields fields = {};  // the numbers its text names, by field ("mild": the first d_k 10% saturated, 0 for none)
};

struct ExplainSection {
  std::string id;  // growth, saturation, gradient, scaling, sizes
  int number = 0;
  std::string title, claim;
  SectionVerdict verdict;
  std::vector<std::string> paragraphs;
  std::vector<std::string> figures;  // figure ids, in the order the section draws them
};

struct Explanation {
  std::string setup;  // the model, task and batch in one line
  std::vector<std::size_t> d_ks;
  std::vector<std::string> scales;
  std::vector<ArmMeasurement> arms;  // d_ks × scales, d_k outer
  SoftmaxCurves curves;              // over the first arm's key counts
  std::optional<TrainingEvidence> training;
  std::vector<ExplainSection> sections;  // the five steps, in order
  std::vector<std::string> notes;        // what the page leaves out, one line each (escape_control)

  /// The arm of (d_k, scale), or null.
  const ArmMeasurement* arm(std::size_t d_k, const std::string& scale) const;
};

/// Measures, reads options.runs and decides the five sections. Throws ConfigError for bad settings (measure_arms).
Explanation explain(const train::TrainConfig& base, const ExplainOptions& options);

/// The sections of `e` (its arms, curves and training evidence), each verdict computed from them.
std::vector<ExplainSection> explain_sections(const Explanation& e);

/// The runs at `inputs` (an unreadable one left out with a note). Throws std::invalid_argument for an input of none.
TrainingEvidence training_evidence(const std::vector<std::string>& inputs, double loss_threshold);

/// The JSON explain.html embeds: figures' data, sections, notes (non-finite numbers NaN: null in the page).
nlohmann::json explain_json(const Explanation& e);

/// explain.html, one self-contained page of `data` (explain_json's), uPlot and report/web/explain.{js,css}.
std::string explain_html(const nlohmann::json& data);

struct ExplainOutcome {
  std::string markdown_path, html_path;
  std::size_t html_bytes = 0;
  std::vector<std::string> figures_drawn;  // figure ids with a PNG and SVG in figures/
  std::string plot_note;                   // why figures are missing ("" when all were drawn)
};

/// Writes out_dir/explain.md, explain.html and figures/, renamed in together: the old outputs or the new ones stay.
/// Throws std::runtime_error naming a path that cannot be written and the reason.
ExplainOutcome write_explanation(const Explanation& e, const std::string& out_dir);

}  // namespace xgrad::report
