// Bad invocations of the `xgrad` command line, as a table: each must exit with the expected code and print one
// line on stderr, "xgrad: ...", naming the flag (and the allowed values where there is a list or a range).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string_view>

#include "nn/checkpoint.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/refusals.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/run_files.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

// Whether `taskset -c 0` can pin a process to CPU 0 here.
bool taskset_pins() { return run_process({"taskset", "-c", "0", "true"}).exit_code == 0; }

// `xgrad ARGS` under `taskset -c 0`: a process allowed one CPU, whatever the machine has.
std::vector<std::string> on_cpu_0(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"taskset", "-c", "0"};
  for (const std::string& word : xgrad_command(args)) argv.push_back(word);
  return argv;
}

// "10,11,...,74": 65 lengths, one more than a run evaluates.
std::string lengths_10_to_74() {
  std::string list = "10";
  for (int n = 11; n <= 74; ++n) list += "," + std::to_string(n);
  return list;
}

}  // namespace

// function-lengths: a table of inputs (each bad invocation, its exit code and message, one line each)
TEST_CASE("xgrad: a table of bad invocations, each with its exit code and a one-line message naming the flag") {
  const TempDir root("cli_errors");
  fs::create_directories(root / "empty");
  const std::string out = (root / "new").string(), run_dir = (root / "run").string(),
                    file = (root / "file.txt").string(), empty = (root / "empty").string();
  {
    std::ofstream f(file);
    f << "not a directory\n";
  }
  // A finished run to resume or refuse to overwrite, a corrupt one, and a checkpoint of another model width.
  train::TrainConfig c = tiny_run(run_dir, 3);
  c.model.d_model = 8;
  train::train(c);
  const std::string checkpoint = run_dir + "/checkpoint.safetensors";
  const std::string corrupt_dir = (root / "corrupt").string();
  fs::copy(run_dir, corrupt_dir);
  {
    std::ofstream f(corrupt_dir + "/checkpoint.safetensors", std::ios::trunc);
    f << "{}";
  }

  const std::string bad_key = (root / "bad_key.json").string();
  {
    std::ofstream f(bad_key);
    f << "{\"d_modle\": 16}";
  }
  const std::vector<Refusal> cases{
      {{},
       2,
       "a command is required (allowed: train, sweep, experiment, probe, explain, compare, sample, export, settings;"},
      {{"bogus"},
       2,
       "unknown command 'bogus' (allowed: train, sweep, experiment, probe, explain, compare, sample, export,"},
      {{"train"}, 2, "--out: a run directory is required"},
      {{"train", "--out", out, "--bogus"}, 2, "--bogus"},
      {{"train", "--out", out, "--scal", "none"}, 2, "--scal: not a flag of train (see 'xgrad train --help')"},
      {{"train", "--out", out, "--d-model", "32", "64"}, 2, "unexpected argument '64' of train"},
      {{"train", "--out", out, "--steps", "abc"}, 2, "--steps: must be a whole number in [1, 1000000000], got 'abc'"},
      {{"train", "--out", out, "--steps", "0"}, 2, "--steps: must be in [1, 1000000000], got 0"},
      {{"train", "--out", out, "--steps", "-3"}, 2, "--steps: must be a whole number in [1, 1000000000]"},
      {{"train", "--out", out, "--batch-size", "0"}, 2, "--batch-size: must be in [1, 1048576]"},
      {{"train", "--out", out, "--lr", "-1"}, 2, "--lr: must be in [1.17549435e-38, 3.40282347e+38], got -1"},
      {{"train", "--out", out, "--lr", "nan"}, 2, "--lr: must be a decimal number, got 'nan'"},
      {{"train", "--out", out, "--lr", "1e999"}, 2, "--lr: must be finite"},
      {{"train", "--out", out, "--optimizer", "adam"}, 2, "--optimizer: adam not in {sgd,adamw,muon}"},
      {{"train", "--out", out, "--scale", "sqrt"},
       2,
       "--scale: sqrt not in {none,sqrt_dk,dk,qk_layernorm,qk_norm,qk_clip,learned,softcap,ssmax,sigma_reparam}"},
      {{"train", "--out", out, "--scale", "qk_norm", "--qk-norm-scale", "0"},
       2,
       "--qk-norm-scale: must be inv_sqrt_dk or a number in (0, inf), got '0'"},
      {{"train", "--out", out, "--scale", "qk_norm", "--qk-norm-scale", "sqrt_dk"},
       2,
       "--qk-norm-scale: must be inv_sqrt_dk or a number in (0, inf), got 'sqrt_dk'"},
      {{"sweep", "--out", out, "--scale", "qk_norm", "--grid", "qk_norm_scale=1,-0.5"},
       2,
       "must be inv_sqrt_dk or a number in (0, inf), got '-0.5'"},
      {{"train", "--out", out, "--task", "mnist"}, 2, "--task: mnist not in {kv_recall,copy,reverse,sort,majority,"},
      {{"train", "--out", out, "--mlp", "maybe"}, 2, "--mlp: must be true or false, got 'maybe'"},
      {{"train", "--out", out, "--kv-encoding", "triple"}, 2, "--kv-encoding: triple not in {pair,sum}"},
      {{"train", "--out", out, "--task", "copy", "--kv-encoding", "sum"},
       2,
       "--kv-encoding is read only by --task kv_recall (the task is copy)"},
      {{"train", "--out", out, "--attn-out-proj", "maybe"}, 2, "--attn-out-proj: must be true or false, got 'maybe'"},
      {{"train", "--out", out, "--attn-out-proj", "false", "--d-k", "16"},
       2,
       "--attn-out-proj false: the heads' concatenation is the attention output, so --n-heads x --d-k must equal "
       "--d-model; got 1 x 16 = 16 and --d-model 64"},
      {{"sweep", "--out", out, "--attn-out-proj", "false", "--d-k", "16,64"}, 2, "--attn-out-proj false: "},
      {{"train", "--out", out, "--d-model", "10", "--n-heads", "3"},
       2,
       "--d-model (10) must be divisible by --n-heads (3)"},
      {{"train", "--out", out, "--n-keys", "4", "--n-pairs", "8"}, 2, "n_pairs"},
      {{"train", "--out", out, "--optimizer", "sgd", "--momentum", "1"},
       2,
       "--momentum: must be in [0, 0.99999994], got 1"},
      // The optimizers compute in float: betas that round to 1.0f and an eps below the smallest normal float are
      // refused at the flag.
      {{"train", "--out", out, "--beta2", "0.99999999"}, 2, "--beta2: must be in [0, 0.99999994], got 0.99999999"},
      {{"train", "--out", out, "--beta2", "0.9999999999999999"}, 2, "--beta2: must be in [0, 0.99999994], got"},
      {{"train", "--out", out, "--beta1", "0.99999999"}, 2, "--beta1: must be in [0, 0.99999994], got 0.99999999"},
      {{"train", "--out", out, "--optimizer", "sgd", "--momentum", "0.99999999"},
       2,
       "--momentum: must be in [0, 0.99999994]"},
      {{"train", "--out", out, "--eps", "1e-320"}, 2, "--eps: must be in [1.17549435e-38, 1], got"},
      {{"train", "--out", out, "--eps", "1e-46"}, 2, "--eps: must be in [1.17549435e-38, 1], got"},
      // --base-width is read only under muP: refused with sp, as a grid axis, and by probe (which measures sp).
      {{"train", "--out", out, "--base-width", "32"},
       2,
       "--base-width is read only by --parametrization mup (the parametrization is sp)"},
      {{"train", "--out", out, "--base-width", "64"},
       2,
       "--base-width is read only by --parametrization mup (the parametrization is sp)"},
      {{"sweep", "--out", out, "--grid", "base_width=16,32"},
       2,
       "--grid base_width: --base-width is read only by --parametrization mup (the parametrization is sp); an axis "
       "must change every run"},
      {{"sweep", "--out", out, "--base-width", "32"},
       2,
       "--base-width is read only by --parametrization mup (the parametrization is sp)"},
      {{"probe", "--parametrization", "mup"}, 2, "--parametrization: probe measures the standard parametrization"},
      {{"probe", "--base-width", "32"}, 2, "--base-width: probe measures the standard parametrization"},
      // A setting of a component the run does not select is refused, naming its owners and the selection.
      {{"train", "--out", out, "--momentum", "0.5"},
       2,
       "--momentum is read only by --optimizer sgd, muon (the optimizer is adamw)"},
      {{"train", "--out", out, "--task", "copy", "--n-keys", "4"},
       2,
       "--n-keys is read only by --task kv_recall, mqar (the task is copy)"},
      {{"train", "--out", out, "--seq-len", "8"},
       2,
       "--seq-len is read only by --task copy, reverse, sort, majority, induction, mqar, char_lm (the task is "
       "kv_recall)"},
      {{"train", "--out", out, "--beta1", "0.5", "--optimizer", "sgd"},
       2,
       "--beta1 is read only by --optimizer adamw, muon (the optimizer is sgd)"},
      {{"train", "--out", out, "--eval-seq-len", "32"},
       2,
       "--eval-seq-len: the task kv_recall has no --seq-len (evaluation at another seq_len is defined for --task "
       "copy, reverse, sort, majority, induction, mqar, char_lm); kv_recall's length is --n-pairs: use --eval-n-pairs"},
      {{"train", "--out", out, "--eval-n-pairs", "16"},
       2,
       "--eval-n-pairs 16: kv_recall: n_keys (8) must be >= n_pairs (16)"},
      {{"sweep", "--out", out, "--task", "copy", "--eval-n-pairs", "16"},
       2,
       "--eval-n-pairs: the task copy has no --n-pairs (evaluation at another n_pairs is defined for --task kv_recall, "
       "mqar)"},
      {{"train", "--out", out, "--task", "mqar", "--seq-len", "15"},
       2,
       "mqar: --seq-len (15) must be >= 4 x --n-pairs = 16 (the pairs take 2 x --n-pairs tokens and the queries every "
       "other position after them): give --seq-len >= 16, or --n-pairs <= 3"},
      // Evaluation lists: a value given twice, an empty list; each list is evaluated with the other trained setting.
      {{"train", "--out", out, "--eval-n-pairs", "4,4"}, 2, "--eval-n-pairs: 4 is given twice in '4,4'"},
      {{"train", "--out", out, "--task", "copy", "--eval-seq-len", lengths_10_to_74()},
       2,
       "--eval-seq-len: more than 64 lengths to evaluate"},  // each a summary.json entry: its readers bound the file
      {{"train", "--out", out, "--eval-n-pairs", ""},
       2,
       "--eval-n-pairs: empty entry in '' (leave the flag out to evaluate at no other length)"},
      {{"sweep", "--out", out, "--task", "copy", "--eval-seq-len", ""}, 2, "--eval-seq-len: empty entry in ''"},
      {{"train", "--out", out, "--task", "mqar", "--eval-n-pairs", "8", "--eval-seq-len", "32"},
       2,
       "--eval-n-pairs 8: mqar: --seq-len (16) must be >= 4 x --n-pairs = 32"},
      {{"train", "--out", out, "--task", "mqar", "--eval-n-pairs", "8", "--eval-seq-len", "32"},
       2,
       "; each --eval-n-pairs value is evaluated at the trained --seq-len 16 (--eval-seq-len and --eval-n-pairs are "
       "not combined): train with a longer --seq-len"},
      // The memory estimate of an evaluation names the evaluation's flag, not the training's.
      {{"train", "--out", out, "--task", "copy", "--eval-seq-len", "65536"},
       2,
       "T^2 x --n-layers; T = the evaluated sequence length, set by --eval-seq-len 65536)"},
      {{"train", "--out", out, "--n-keys", "4096", "--kv-encoding", "sum", "--eval-n-pairs", "4096"},
       2,
       "T = the evaluated sequence length, set by --eval-n-pairs 4096"},
      {{"train", "--out", out, "--lr-schedule", "linear"}, 2, "--lr-schedule: linear not in {constant,cosine}"},
      {{"train", "--out", out, "--min-lr", "0.001"},
       2,
       "--min-lr is read only by --lr-schedule cosine (the lr_schedule is constant)"},
      {{"train", "--out", out, "--lr-schedule", "cosine", "--lr", "0.001", "--min-lr", "0.01"},
       2,
       "--min-lr: 0.01 is above --lr 0.001 (allowed: 0 to 0.001)"},
      {{"train", "--out", out, "--warmup-steps", "900", "--steps", "800"},
       2,
       "--warmup-steps: 900 is more than the run's 800 steps (allowed: 0 to 800)"},
      {{"train", "--out", out, "--softcap-cap", "3"},
       2,
       "--softcap-cap is read only by --scale softcap (the scale is sqrt_dk)"},
      {{"train", "--out", out, "--steps", "5", "--steps", "6"}, 2, "--steps: given more than once"},
      {{"train", "--config", file}, 2, "--config: " + file + " is not valid JSON"},
      {{"train", "--config", (root / "absent.json").string()}, 2, "--config: File does not exist"},
      {{"train", "--config", bad_key}, 2, bad_key + ": 'd_modle' is not a setting of xgrad"},
      {{"train", "--resume", run_dir, "--config", run_dir + "/config.json"},
       2,
       "--resume and --config exclude each other"},
      {{"sweep", "--out", out, "--grid", "d_model"}, 2, "--grid: 'd_model' is not KEY=V1,V2,..."},
      {{"sweep", "--out", out, "--grid", "d_model=8,x"},
       2,
       "--grid: d_model=x: must be a whole number in [1, 16384], got 'x'"},
      {{"sweep", "--out", out, "--grid", "scale=none"}, 2, "--grid: scale is an axis of its own: give it with --scale"},
      {{"sweep", "--out", out, "--grid", "bogus=1"}, 2, "--grid: 'bogus' is not a setting"},
      {{"sweep", "--out", out, "--grid", "d_model=8,8"}, 2, "--grid: d_model=8 is given twice"},
      {{"sweep", "--out", out, "--grid", "data=/tmp"}, 2, "--grid: sweep does not pass --data to its runs"},
      {{"sweep", "--out", out, "--task", "copy", "--n-keys", "3"},
       2,
       "--n-keys is read only by --task kv_recall, mqar (the task is copy)"},
      {{"train", "--out", out, "--threads", "0"}, 2, "--threads: must be in [1, 64], got 0"},
      {{"train", "--out", out, "--seed", "-1"}, 2, "--seed: must be a whole number in [0, 18446744073709551615]"},
      {{"train", "--out", out, "--d-model", "16384", "--batch-size", "4096"}, 2, "GiB (limit 12)"},
      // The memory refusal names the flags of what needs the memory.
      {{"train", "--out", out, "--task", "copy", "--seq-len", "65536"},
       2,
       "the attention scores (--batch-size x --n-heads x --seq-len^2 x --n-layers)"},
      {{"train", "--out", out, "--task", "copy", "--n-heads", "64", "--d-k", "8192"}, 2, "--n-heads x --d-k"},
      {{"train", "--out", out, "--task", "copy", "--d-model", "16384", "--batch-size", "1", "--seq-len", "4"},
       2,
       "the MLP weights (--n-layers x --d-model x --d-ff)"},
      // T and V named by what sets them where no flag is T or V.
      {{"train", "--out", out, "--n-keys", "4096", "--n-values", "4096"},
       2,
       "V = the task's vocabulary size, set by --n-keys, --n-values and --kv-encoding"},
      // config.json records --out as JSON text: UTF-8 only; a name longer than a file name may be.
      {{"train", "--out", out + "/bad\xffutf"}, 2, "--out: '" + out + "/bad\\xffutf' is not valid UTF-8"},
      {{"sweep", "--out", out + "/bad\xffutf"},
       2,
       "/bad\\xffutf/runs/dk16-sqrt_dk-adamw-lr0.003-s0' is not valid UTF-8"},
      {{"train", "--out", out + "/" + std::string(300, 'a')},
       2,
       "is 300 bytes, more than the 255 a file name may have"},
      {{"sweep", "--out", out, "--task", "char_lm", "--grid", "text=" + std::string(250, 'a')},
       2,
       "--grid: the run name dk16-sqrt_dk-adamw-lr0.003-text"},
      {{"train", "--out", out, "--on-nan", "ignore"}, 2, "--on-nan: ignore not in {stop,skip}"},
      {{"train", "--out", out, "--parametrization", "ntk"}, 2, "--parametrization: ntk not in {sp,mup}"},
      {{"train", "--out", out, "--weight-decay-params", "biases"},
       2,
       "--weight-decay-params: biases not in {all,matrices}"},
      {{"train", "--out", out, "--checkpoint-every", "-1"}, 2, "--checkpoint-every: must be a whole number in [0, "},
      {{"train", "--out", out, "--init-from", (root / "absent.safetensors").string()},
       2,
       "--init-from: '" + (root / "absent.safetensors").string() + "' is not a file"},
      {{"train", "--out", out, "--d-model", "16", "--init-from", checkpoint},
       2,
       "--init-from: checkpoint " + checkpoint +
           ": tensor 'model.tok_emb.weight' has shape [72, 8], the model needs [72, 16]"},
      {{"train", "--out", out, "--init-from", file}, 2, "--init-from: safetensors: " + file + ": header length"},
      {{"train", "--out", run_dir},
       2,
       "already holds a run (config.json, metrics.csv or a checkpoint); pass --overwrite"},
      {{"train", "--out", file}, 2, "--out: " + file + " exists and is not a directory"},
      {{"train", "--out", file + "/run"}, 2, "--out: cannot create run directory " + file + "/run"},
      {{"train", "--out", ""}, 2, "--out: a run directory is required"},
      {{"train", "--resume", (root / "absent").string()}, 2, "--resume: Directory does not exist"},
      {{"train", "--resume", empty}, 2, "--resume: " + empty + " holds no run (no config.json)"},
      {{"train", "--resume", run_dir, "--d-model", "16"},
       2,
       "--d-model: the run in " + run_dir + " was trained with 8, not 16"},
      {{"train", "--resume", run_dir, "--scale", "none"},
       2,
       "--scale: the run in " + run_dir + " was trained with \"sqrt_dk\""},
      {{"train", "--resume", run_dir, "--steps", "2"},
       2,
       "--steps: the run in " + run_dir + " was set to 3 steps; a resumed run may raise"},
      {{"train", "--resume", run_dir, "--overwrite"}, 2, "--resume and --overwrite exclude each other"},
      {{"train", "--resume", run_dir, "--out", empty}, 2, "--out: " + empty + " is not the --resume directory"},
      {{"train", "--resume", corrupt_dir}, 1, "cannot resume: safetensors: " + corrupt_dir + "/checkpoint.safetensors"},
      {{"train", "--out", out, "--task", "data"}, 2, "--data: data: no directory given"},
      {{"train", "--out", out, "--task", "data", "--data", empty},
       2,
       "--data: npy: " + empty + "/inputs.npy: no such file"},
      {{"train", "--out", out, "--data", empty}, 2, "--data is read only by --task data (the task is kv_recall)"},
      {{"train", "--out", out, "--vocab-size", "5"}, 2, "--vocab-size is read only by --task data"},
      {{"train", "--out", out, "--task", "data", "--data", file}, 2, "--data: data: '" + file + "' is not a directory"},
      {{"train", "--out", out, "--task", "char_lm", "--text", "/dev/zero"}, 2, "'/dev/zero' is not a regular file"},
      {{"train", "--out", out, "--task", "char_lm", "--text", (root / "absent.txt").string()}, 2, "does not exist"},
      {{"train", "--out", out, "--text", file}, 2, "--text is read only by --task char_lm"},
      {{"sweep", "--out", out, "--jobs", "0"}, 2, "--jobs: must be in [1, 256], got 0"},
      {{"sweep", "--out", out, "--arms", "adam@0.1"}, 2, "--arms: unknown optimizer 'adam'"},
      {{"sweep", "--out", out, "--d-k", "4,4"}, 2, "--d-k: 4"},
      // Grid axes that would repeat runs: values one run name cannot tell apart, a setting no run of the sweep reads,
      // one that changes only how a run is recorded or executed.
      {{"sweep", "--out", out, "--task", "char_lm", "--grid", "text=a/b.txt,a_b.txt"},
       2,
       "--grid text: the values a/b.txt and a_b.txt give runs the same name dk16-sqrt_dk-adamw-lr0.003-texta_b.txt-s0"},
      {{"sweep", "--out", out, "--task", "copy", "--grid", "text=" + file + "," + empty},
       2,
       "--grid text: --text is read only by --task char_lm (the task is copy); an axis must change every run"},
      {{"sweep", "--out", out, "--grid", "momentum=0.5,0.9"},
       2,
       "--grid momentum: --momentum is read only by --optimizer sgd, muon (the optimizer is adamw)"},
      {{"sweep", "--out", out, "--arms", "sgd@0.1,adamw@0.01", "--grid", "momentum=0.5,0.9"},
       2,
       "--grid momentum: --momentum is read only by --optimizer sgd, muon (the optimizer is adamw)"},
      {{"sweep", "--out", out, "--grid", "print_every=1,2"},
       2,
       "--grid print_every: --print-every changes how a run is recorded or executed, not what it computes"},
      {{"sweep", "--out", out, "--grid", "threads=1,2"}, 2, "--grid threads: --threads changes how a run is recorded"},
      {{"probe", "--d-k", "-1"}, 2, "--d-k: must be a whole number in [1, 8192]"},
      {{"train", "--out", out, "--task", "char_lm"}, 2, "char_lm: --text is required: name a UTF-8 text file"},
      // Flags a multi-run command sets itself, or probe never reads: refused, naming what to use instead.
      {{"sweep", "--out", out, "--lr", "0.1"},
       2,
       "--lr: sweep takes learning rates through --arms (e.g. --arms sgd@0.01,adamw@0.001)"},
      {{"sweep", "--out", out, "--optimizer", "sgd"}, 2, "--optimizer: sweep takes optimizers through --arms"},
      {{"sweep", "--out", out, "--seed", "3"},
       2,
       "--seed: sweep sets each run's seed from --seeds (e.g. --seeds 0,1,2"},
      {{"sweep", "--out", out, "--seed=3"}, 2, "--seed: sweep sets each run's seed from --seeds"},
      {{"sweep", "--out", out, "--lr"}, 2, "--lr: sweep takes learning rates through --arms"},
      {{"experiment", "--out", out, "--lr", "0.1"}, 2, "--lr: experiment takes learning rates through --arms"},
      {{"experiment", "--out", out, "--seed", "1"}, 2, "--seed: experiment sets each run's seed from --seeds"},
      {{"probe", "--lr", "0.1"}, 2, "--lr: probe trains nothing (one forward batch at initialisation)"},
      {{"probe", "--optimizer", "sgd"}, 2, "--optimizer: probe trains nothing"},
      {{"probe", "--steps", "10"}, 2, "--steps: probe trains nothing"},
      {{"probe", "--weight-decay", "0.1"}, 2, "--weight-decay: probe trains nothing"},
      {{"probe", "--warmup-steps", "10"}, 2, "--warmup-steps: probe trains nothing"},
      {{"experiment", "--preset", "text", "--quick", "--text", "README.md", "--out", out, "--d-k", "512"},
       2,
       "the preset keeps no run of this grid (grid: scale × 2"},
      {{"explain", "--min-lr", "0.1"}, 2, "--min-lr: explain trains nothing"},
      {{"probe", "--d-k", "16,16"}, 2, "--d-k: 16 is given twice"},
      {{"explain", "--d-k", "16,16"}, 2, "--d-k: 16 is given twice"},
      {{"explain", "--d-k", "0"}, 2, "--d-k: must be in [1, 8192], got 0"},
      {{"explain", "--scale", "bogus"}, 2, "--scale: bogus not in {"},
      {{"explain", "--scale", "none,none"}, 2, "--scale: none is given twice"},
      {{"explain", "--scale", "none,"}, 2, "--scale: empty entry in 'none,'"},
      {{"explain", "--scale", ",sqrt_dk"}, 2, "--scale: empty entry in ',sqrt_dk'"},
      {{"explain", "--runs", "/nonexistent/runs"}, 2, "--runs: Directory does not exist: /nonexistent/runs"},
      {{"explain", "--lr", "0.1"},
       2,
       "--lr: explain trains nothing (one forward and backward batch at initialisation)"},
      {{"explain", "--parametrization", "mup"}, 2, "--parametrization: explain measures the standard parametrization"},
      {{"explain", "--d-model", "16384", "--batch-size", "4096"}, 2, "GiB (limit 12)"},
      {{"compare", run_dir, "--out", out, "--loss-threshold", "-1"},
       2,
       "--loss-threshold: must be in (0, inf), got -1"},
      {{"compare", run_dir, "--out", out, "--loss-threshold", "0"}, 2, "--loss-threshold: must be in (0, inf), got 0"},
      {{"compare", run_dir, "--out", out, "--loss-threshold", "nan"},
       2,
       "--loss-threshold: must be a decimal number, got 'nan' in (0, inf)"},
      {{"compare", run_dir, "--out", out, "--accuracy-threshold", "1.5"},
       2,
       "--accuracy-threshold: must be in (0, 1], got 1.5"},
      {{"compare", run_dir, "--out", out, "--accuracy-threshold", "0"},
       2,
       "--accuracy-threshold: must be in (0, 1], got 0"},
      {{"compare", run_dir, "--out", out, "--accuracy-threshold", "nan"},
       2,
       "--accuracy-threshold: must be a decimal number, got 'nan'"},
      // An unknown flag of compare is named, not taken for a directory (its value would be).
      {{"compare", run_dir, "--lr", "0.1"}, 2, "--lr: not a flag of compare (flags: --out, --loss-threshold,"},
      {{"compare", run_dir, "--lr=0.1"}, 2, "--lr: not a flag of compare"},
      {{"compare", (root / "absent").string()}, 2, "compare: Directory does not exist"},
      {{"compare", run_dir, "--out", ""}, 2, "--out: empty; name a report directory, or leave --out out to write into"},
      {{"export"}, 2, "export: a format is required (allowed: tensorboard; see 'xgrad export --help')"},
      {{"export", "csv"}, 2, "export: unknown format 'csv' (allowed: tensorboard; see 'xgrad export --help')"},
      {{"export", "tensorboard", run_dir}, 2, "--out is required"},
      {{"export", "tensorboard", run_dir, "--out", ""}, 2, "--out: empty; name the directory to write the event files"},
      {{"export", "tensorboard", (root / "absent").string(), "--out", out},
       2,
       "export tensorboard: " + (root / "absent").string() + " is not a directory"},
      {{"export", "tensorboard", empty, "--out", out}, 2, "export tensorboard: " + empty + " holds no run"},
      {{"export", "tensorboard", run_dir, "--out", out, "--lr", "0.1"}, 2, "--lr: not a flag of export"},
      // --d-model is a flag of sweep, experiment and probe (only --scale and --d-k are lists there).
      {{"sweep", "--out", out, "--d-model", "0"}, 2, "--d-model: must be in [1, 16384], got 0"},
      {{"experiment", "--out", out, "--d-model", "abc"}, 2, "--d-model: must be a whole number in [1, 16384]"},
      {{"probe", "--d-model", "16384", "--batch-size", "4096"}, 2, "GiB (limit 12)"},
      // The data task: probe reads --data; sweep and experiment cannot pass it to their runs and say so.
      {{"probe", "--task", "data"}, 2, "--data: data: no directory given"},
      {{"probe", "--task", "data", "--data", empty}, 2, "--data: npy: " + empty + "/inputs.npy: no such file"},
      {{"sweep", "--out", out, "--task", "data"}, 2, "--task: data is not taken by sweep (its runs get no --data"},
      {{"experiment", "--out", out, "--task", "data"}, 2, "--task: data is not taken by experiment"},
      {{"sweep", "--out", out, "--data", empty}, 2, "--data: sweep does not pass --data to its runs"},
      {{"sweep", "--out", out, "--shuffle"}, 2, "--shuffle: sweep does not pass --shuffle to its runs"},
      // List flags: an empty entry is refused, not dropped; an arm's lr is a decimal like --lr; no spaces.
      {{"sweep", "--out", out, "--arms", "sgd@0.1,"}, 2, "--arms: empty entry in 'sgd@0.1,'"},
      {{"sweep", "--out", out, "--arms", ",sgd@0.1"}, 2, "--arms: empty entry in ',sgd@0.1'"},
      {{"sweep", "--out", out, "--seeds", "0,,1"}, 2, "--seeds: empty entry in '0,,1'"},
      {{"sweep", "--out", out, "--d-k", "4,,"}, 2, "--d-k: empty entry in '4,,'"},
      {{"sweep", "--out", out, "--scale", "none,"}, 2, "--scale: empty entry in 'none,'"},
      {{"sweep", "--out", out, "--scale", ""}, 2, "--scale: empty entry in ''"},
      {{"experiment", "--out", out, "--seeds", ",1"}, 2, "--seeds: empty entry in ',1'"},
      {{"probe", "--d-k", "4,"}, 2, "--d-k: empty entry in '4,'"},
      {{"sweep", "--out", out, "--arms", "sgd@ 0.1"},
       2,
       "--arms: learning rate in 'sgd@ 0.1' must be a decimal number, got ' 0.1'"},
      {{"sweep", "--out", out, "--arms", " sgd@0.1"}, 2, "--arms: unknown optimizer ' sgd'"},
      {{"sweep", "--out", out, "--arms", "sgd@0x1p-3"},
       2,
       "--arms: learning rate in 'sgd@0x1p-3' must be a decimal number, got '0x1p-3'"},
      {{"sweep", "--out", out, "--arms", "sgd@-0.1"}, 2, "--arms: learning rate '-0.1' in 'sgd@-0.1' must be"},
      {{"sweep", "--out", out, "--seeds", "0, 1"}, 2, "--seeds: must be a whole number in [0, "},
  };
  CHECK(cases.size() >= 20);
  check_refusals(cases);
  CHECK_FALSE(fs::exists(out));  // no refused invocation left a run directory behind
}

TEST_CASE("xgrad sample: a table of refused run directories and flags, each one line naming RUN_DIR or the flag") {
  const TempDir root("cli_sample_errors");
  const std::string text = (root / "text.txt").string(), run = (root / "run").string();
  {
    std::ofstream f(text);
    for (int i = 0; i < 20; ++i) f << "a few words of text, line " << i << "\n";
  }
  train::train(tiny_char_lm_run(run, text, 2));
  train::TrainConfig c = tiny_char_lm_run((root / "noncausal").string(), text, 2);
  c.model.causal = false;
  train::train(c);
  train::train(tiny_run((root / "kv").string(), 2));
  c = tiny_char_lm_run((root / "wide").string(), text, 2);
  c.model.d_model = 32;
  train::train(c);
  // Copies of the run: without its checkpoint, with an empty one, with the checkpoint of a wider model, with a
  // config.json cut short.
  for (const std::string name : {"none", "empty", "mismatched", "corrupt"}) fs::copy(run, root / name);
  std::ofstream(root / "corrupt" / "config.json", std::ios::trunc) << "{\"d_model\": ";
  fs::remove(root / "none" / "checkpoint.safetensors");
  std::ofstream(root / "empty" / "checkpoint.safetensors", std::ios::trunc).close();
  fs::copy_file(root / "wide" / "checkpoint.safetensors", root / "mismatched" / "checkpoint.safetensors",
                fs::copy_options::overwrite_existing);
  fs::create_directories(root / "bare");
  const auto dir = [&](const std::string& name) { return (root / name).string(); };
  // config.json's record of the vocabulary and context the run trained with, edited to sizes no char_lm run has:
  // named by file and key, before a model of that size is built (1e12 tokens would need terabytes).
  std::vector<Refusal> absurd;
  for (const std::string key : {"vocab_size", "seq_len"})
    for (const nlohmann::json& value : {nlohmann::json(0), nlohmann::json(-3), nlohmann::json(1e12),
                                        nlohmann::json(1000000000000), nlohmann::json("16"), nlohmann::json(nullptr)}) {
      const std::string name = "absurd_" + key + "_" + std::to_string(absurd.size());
      fs::copy(run, root / name);
      nlohmann::json config = nlohmann::json::parse(read_text(root / name / "config.json"));
      config["derived"][key] = value;
      std::ofstream(root / name / "config.json", std::ios::trunc) << config.dump(2);
      absurd.push_back(
          {{"sample", dir(name)}, 2, dir(name) + "/config.json: 'derived." + key + "' holds " + value.dump()});
    }
  check_refusals(absurd);
  check_refusals({
      {{"sample"}, 2, "run_dir is required"},
      {{"sample", dir("bare")}, 2, "RUN_DIR: no config.json in '" + dir("bare") + "'"},
      {{"sample", dir("corrupt")}, 2, "RUN_DIR: " + dir("corrupt") + "/config.json is not valid JSON"},
      {{"sample", dir("kv")}, 2, "RUN_DIR: the run's task is kv_recall; xgrad sample generates text from char_lm"},
      {{"sample", dir("noncausal")}, 2, "RUN_DIR: the run's model is not causal (--causal false)"},
      {{"sample", dir("none")}, 2, "RUN_DIR: no checkpoint.safetensors in '" + dir("none") + "'"},
      {{"sample", dir("empty")}, 2, "RUN_DIR: safetensors: " + dir("empty") + "/checkpoint.safetensors"},
      {{"sample", dir("mismatched")},
       2,
       "RUN_DIR: " + dir("mismatched") + "/config.json: 'd_model' gives 16, but " + dir("mismatched") +
           "/checkpoint.safetensors holds model.tok_emb.weight"},
      {{"sample", run, "--tokens", "0"}, 2, "--tokens: must be in [1, 1000000], got 0"},
      {{"sample", run, "--tokens", "1000001"}, 2, "--tokens: must be in [1, 1000000], got 1000001"},
      {{"sample", run, "--temperature", "-0.5"}, 2, "--temperature: must be in [0, inf), got -0.5"},
      {{"sample", run, "--temperature", "nan"}, 2, "--temperature: must be a decimal number, got 'nan'"},
      {{"sample", run, "--top-k", "0"}, 2, "--top-k: must be in [1, "},
      {{"sample", run, "--top-k", "257"}, 2, "--top-k: must be in [1, 256], got 257"},
      {{"sample", run, "--lr", "0.1"}, 2, "--lr: not a flag of sample"},
  });
}

TEST_CASE("xgrad sweep --d-model reaches its runs") {
  const TempDir root("cli_sweep_d_model");
  const std::string sweep_dir = (root / "sweep").string();
  const ProcessResult swept = run_xgrad({"sweep", "--out", sweep_dir, "--d-model", "16", "--steps", "2", "--batch-size",
                                         "2", "--d-k", "4", "--seeds", "0", "--scale", "none", "--arms", "sgd@0.1"});
  INFO("stderr: " << swept.err);
  CHECK(swept.exit_code == 0);
  {
    std::ifstream in(sweep_dir + "/runs/dk4-none-sgd-lr0.1-s0/config.json");
    REQUIRE(in);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j.at("d_model") == 16);
    CHECK(j.at("d_k") == 4);
  }
}

TEST_CASE("xgrad: corrupt config.json, a foreign checkpoint, float-vanishing values and sweep directories") {
  const TempDir root("cli_errors2");
  const std::string run_dir = (root / "run").string(), other_dir = (root / "other").string(),
                    out = (root / "new").string();
  train::TrainConfig c = tiny_run(run_dir, 3);
  c.model.d_model = 8;
  train::train(c);
  train::TrainConfig o = c;
  o.seed = 7;
  o.out = other_dir;
  train::train(o);
  auto copy_run = [&](const std::string& name) {
    const fs::path dir = root / name;
    fs::copy(run_dir, dir);
    return dir.string();
  };
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
  };
  const std::string negative = copy_run("negative"), nan_filled = copy_run("nan"), empty = copy_run("emptycfg"),
                    foreign = copy_run("foreign");
  {
    std::ifstream in(run_dir + "/config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["steps"] = -3;
    write(negative + "/config.json", j.dump());
  }
  write(nan_filled + "/config.json", "{\"d_model\": NaN, \"lr\": NaN}");
  write(empty + "/config.json", "");
  fs::copy_file(other_dir + "/checkpoint.safetensors", foreign + "/checkpoint.safetensors",
                fs::copy_options::overwrite_existing);

  const std::vector<Refusal> cases{
      {{"train", "--resume", negative},
       2,
       negative + "/config.json: 'steps' holds -3, which is not a whole number in [1, "},
      {{"train", "--resume", nan_filled}, 2, "--resume: " + nan_filled + "/config.json is not valid JSON"},
      {{"train", "--resume", empty}, 2, "--resume: " + empty + "/config.json is not valid JSON"},
      {{"train", "--resume", foreign, "--steps", "4"},
       2,
       "--resume: --seed is 7 in " + foreign + "/checkpoint.safetensors but 0 in " + foreign + "/config.json"},
      {{"train", "--out", out, "--lr", "1e-300"}, 2, "--lr: must be in [1.17549435e-38, 3.40282347e+38], got 1e-300"},
      {{"train", "--out", out, "--lr", "1e-46"}, 2, "--lr: must be in [1.17549435e-38"},
      {{"train", "--out", out, "--clip-grad-norm", "1e-300"},
       2,
       "--clip-grad-norm: must be 0 or at least 1.17549435e-38 in magnitude"},
      // Nonzero numbers that are 0 in float (or below any double) are refused, not read as 0 ("use --lr").
      {{"train", "--out", out, "--optimizer", "muon", "--muon-adamw-lr", "1e-400"},
       2,
       "--muon-adamw-lr: must be 0 or at least 1.17549435e-38 in magnitude (the smallest normal float), got 1e-400"},
      {{"train", "--out", out, "--optimizer", "muon", "--muon-adamw-lr", "1e-300"}, 2, "--muon-adamw-lr: must be 0 or"},
      {{"train", "--out", out, "--scale", "qk_norm", "--qk-norm-scale", "1e-320"},
       2,
       "--qk-norm-scale: must be at least 1.17549435e-38 in magnitude"},
      {{"train", "--out", out, "--scale", "qk_clip", "--qk-clip-tau", "1e-45"}, 2, "--qk-clip-tau: must be at least"},
      // A finite double above the largest float would be inf where xgrad computes (qk_norm's multiplier: every
      // score inf at step 0).
      {{"train", "--out", out, "--scale", "qk_norm", "--qk-norm-scale", "1e39"},
       2,
       "--qk-norm-scale: must be at most 3.40282347e+38 in magnitude (the largest float), got '1e+39'"},
      {{"sweep", "--out", run_dir, "--steps", "2", "--d-k", "4", "--seeds", "0", "--scale", "none"},
       2,
       "--out: " + run_dir + " holds an `xgrad train` run (config.json), not a sweep"},
  };
  check_refusals(cases);
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(run_dir + "/sweep.json"));
}

TEST_CASE("xgrad sweep: a run diverging at step 0 is a result; runs that cannot start fail the sweep at its end") {
  // A run diverging at step 0 is a sweep result (exit 0); runs that cannot start make the sweep fail (exit 1) at its
  // end, not abort it.
  const TempDir root("cli_errors_sweep_results");
  const std::string pg = (root / "pg").string(), sg = (root / "sg").string();
  const std::vector<std::string> sweep{"sweep",   "--steps", "2",       "--batch-size", "2",      "--d-k",  "4",
                                       "--seeds", "0",       "--scale", "none",         "--arms", "sgd@0.1"};
  std::vector<std::string> diverging = sweep;
  diverging.insert(diverging.end(), {"--out", pg, "--proj-init-gain", "99999999999999999999999"});
  CHECK(run_xgrad(diverging).exit_code == 0);
  {
    std::ifstream in(pg + "/sweep.json");
    CHECK(nlohmann::json::parse(in).at("runs").at(0).at("status") == "diverged");
  }
  fs::create_directories(sg + "/runs");
  std::ofstream(sg + "/runs/dk4-none-sgd-lr0.1-s0") << "a file where the run directory goes";
  std::vector<std::string> blocked = sweep;
  blocked.insert(blocked.end(), {"--out", sg});
  const ProcessResult r = run_xgrad(blocked);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("waitpid") == std::string::npos);
  {
    std::ifstream in(sg + "/sweep.json");
    CHECK(nlohmann::json::parse(in).at("runs").at(0).at("status") == "failed");
  }
}

TEST_CASE(
    "xgrad sweep: --jobs x --threads above the CPUs is refused as --threads is; by default no more runs at once "
    "than the CPUs hold") {
  if (!taskset_pins()) {
    MESSAGE("taskset cannot pin to CPU 0 here; skipped");
    return;
  }
  const TempDir root("cli_jobs");
  auto sweep = [&](const std::string& name, const std::string& flags) {
    return run_process(on_cpu_0(words("sweep --out " + (root / name).string() +
                                      " --scale none --d-k 4 --seeds 0,1 --arms adamw@0.01 --d-model 8 --batch-size 2 "
                                      "--steps 2 --print-every 100 " +
                                      flags)),
                       merged_output());
  };
  ProcessResult r = sweep("two", "--jobs 2");
  INFO("said: " << r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("xgrad: --jobs: 2 runs at a time of --threads 1 each make 2 threads, more than the 1 CPU "
                   "this process may use (allowed: --jobs x --threads up to 1;") == 0);
  CHECK_FALSE(fs::exists(root / "two"));
  r = sweep("default", "");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("2 runs into " + (root / "default").string() + ", 1 at a time") != std::string::npos);
}

TEST_CASE("xgrad train: --threads above the CPUs this process may use is refused, naming the allowed range") {
  // taskset gives the process one CPU, whatever the machine has; the check counts its affinity mask.
  if (!taskset_pins()) {
    MESSAGE("taskset cannot pin to CPU 0 here; skipped");
    return;
  }
  const TempDir root("cli_threads");
  const std::string out = (root / "run").string();
  auto train = [&](const std::string& flags, const ProcessOptions& options = {}) {
    return run_process(on_cpu_0(words("train --steps 1 --d-model 8 --batch-size 2 --out " + out + " " + flags)),
                       options);
  };
  ProcessResult r = train("--threads 2");
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("xgrad: --threads: 2 is more than the 1 CPU this process may use (allowed: 1 to 1;") == 0);
  CHECK(r.err.find("XGRAD_ALLOW_THREADS_ABOVE_CPUS=1") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // The override lets it run.
  ProcessOptions allowed;
  allowed.environment = {{"XGRAD_ALLOW_THREADS_ABOVE_CPUS", "1"}};
  r = train("--threads 2", allowed);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(out + "/summary.json"));
  // Within the range: accepted.
  r = train("--threads 1 --overwrite");
  CHECK(r.exit_code == 0);
}

TEST_CASE("xgrad sweep into a sweep of other settings: a setting the new sweep leaves unset is called 'not set'") {
  const TempDir root("cli_errors_not_set");
  const std::string out = (root / "sweep").string();
  const std::vector<std::string> sweep{"sweep", "--out",        out,    "--d-model", "8",      "--steps",
                                       "2",     "--batch-size", "2",    "--d-k",     "4",      "--seeds",
                                       "0",     "--scale",      "none", "--arms",    "sgd@0.1"};
  std::vector<std::string> with_eval = sweep;
  with_eval.insert(with_eval.end(), {"--eval-n-pairs", "4,8"});
  const ProcessResult first = run_xgrad(with_eval);
  INFO("stderr: " << first.err);
  REQUIRE(first.exit_code == 0);
  check_refused({sweep, 2, "holds a sweep with --eval-n-pairs 4,8 (this one: not set)"});
}

TEST_CASE("xgrad: an XGRAD_SIMD that names no kernel variant this CPU runs is refused before anything runs") {
  ProcessOptions options;
  options.environment = {{"XGRAD_SIMD", "sse9"}};
  const ProcessResult r = run_xgrad({"--version"}, options);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("XGRAD_SIMD: not a kernel variant (allowed: baseline, avx2, avx512f;") != std::string::npos);
}

TEST_CASE("xgrad: an error naming a path with terminal escapes shows them escaped, never sends them to the terminal") {
  const TempDir dir("cli_escapes");
  const std::string name = (dir.path() / "run\x1b]0;title\a\x1b[2J").string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"compare", name}, std::vector<std::string>{"train", "--resume", name},
        std::vector<std::string>{"sweep", "status", name}}) {
    const ProcessResult r = run_xgrad(args);
    INFO(args[0], " -> ", r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find('\x1b') == std::string::npos);
    CHECK(r.err.find('\a') == std::string::npos);
    CHECK(r.err.find("run\\e]0;title\\a\\e[2J") != std::string::npos);
  }
}

TEST_CASE("xgrad: a refused flag value with a newline is shown escaped on one line, so it cannot forge a line") {
  const std::string forged = "a\nxgrad: ok";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"train", "--on-nan", forged}, std::vector<std::string>{"train", "--scale", forged},
        std::vector<std::string>{"experiment", "--preset", forged}}) {
    const ProcessResult r = run_xgrad(args);
    INFO(args[1], " -> ", r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("\nxgrad: ok") == std::string::npos);
    CHECK(r.err.find("a\\nxgrad: ok") != std::string::npos);
  }
}

TEST_CASE("xgrad: log lines of a run whose name holds terminal escapes show them escaped (terminal and train.log)") {
  const TempDir dir("cli_log_escapes");
  const std::string name = (dir.path() / "run\x1b]0;title\a\x1b[2J").string();
  const ProcessResult train =
      run_xgrad({"train", "--d-model", "8", "--steps", "2", "--print-every", "1", "--out", name}, merged_output());
  REQUIRE(train.exit_code == 0);
  const std::string& text = train.out;
  INFO(text);
  CHECK(text.find("[run\\e]0;title\\a\\e[2J] training") != std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\a') == std::string::npos);
}

TEST_CASE("xgrad sweep status: run names from sweep.json with terminal escapes are shown escaped") {
  const TempDir root("cli_status_escapes");
  const std::string out = (root / "sweep").string();
  REQUIRE(run_xgrad(words("sweep --out " + out +
                          " --scale none --d-k 4 --seeds 0 --arms sgd@0.1 --d-model 8 --batch-size 2 --steps 1 "
                          "--jobs 1"))
              .exit_code == 0);
  const fs::path index = fs::path(out) / "sweep.json";
  nlohmann::json j = [&] {
    std::ifstream in(index);
    return nlohmann::json::parse(in);
  }();
  const std::string evil = "evil\x1b]0;PWNED\a\x1b[31mRED";
  const std::string old_dir = j["runs"][0]["dir"].get<std::string>();
  fs::rename(fs::path(out) / old_dir, fs::path(out) / "runs" / evil);
  j["runs"][0]["name"] = evil;
  j["runs"][0]["dir"] = "runs/" + evil;
  std::ofstream(index) << j.dump(2);
  const std::string output = run_xgrad({"sweep", "status", out}, merged_output()).out;
  INFO(output);
  CHECK(output.find("evil\\e]0;PWNED\\a\\e[31mRED") != std::string::npos);
  CHECK(output.find('\x1b') == std::string::npos);
  CHECK(output.find('\a') == std::string::npos);
}

TEST_CASE(
    "xgrad: JSON nested 100,000 deep, repeated keys and a config_version from elsewhere are refused naming "
    "the file, exit 2, never a crash") {
  const TempDir root("cli_hostile_json");
  train::TrainConfig c = tiny_run((root / "run").string(), 2);
  c.model.d_model = 8;
  train::train(c);
  const fs::path config = root / "run" / "config.json";
  const std::string good = [&] {
    std::ifstream in(config);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const std::string deep = "{\"lr\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  struct Hostile {
    std::string text, message;
  };
  const std::vector<Hostile> files{
      {deep, "deeper than 64 levels"},
      {"{\"lr\": 0.1, \"steps\": 2, \"lr\": 0.2}", "the key 'lr' appears twice"},
      {good + std::string(1, '\0') + "{\"lr\": 99}", "holds a NUL byte at offset " + std::to_string(good.size())},
      {std::regex_replace(good, std::regex("\"config_version\": *[0-9]+"), "\"config_version\": 99"),
       "config_version 99 is not a format"},
  };
  for (const Hostile& h : files) {
    // As a --config file.
    const std::string path = (root / "hostile.json").string();
    std::ofstream(path) << h.text;
    const ProcessResult r =
        check_refused({{"train", "--config", path, "--out", (root / "fresh").string()}, 2, h.message});
    CHECK(r.err.find(path) != std::string::npos);
    // As a run's config.json: train --resume refuses it (exit 2); compare skips the run with the reason (one over
    // kMaxRunJsonBytes: its size, unparsed), and with no other run to read fails (exit 1, as for any unreadable run).
    std::ofstream(config) << h.text;
    CHECK(check_refused({{"train", "--resume", (root / "run").string()}, 2, h.message}).err.find("config.json") !=
          std::string::npos);
    const bool over = h.text.size() > train::kMaxRunJsonBytes;
    CHECK(check_refused({{"compare", (root / "run").string()}, 1, over ? std::to_string(h.text.size()) : h.message})
              .err.find("config.json") != std::string::npos);
  }
}

TEST_CASE("xgrad sweep: the start names the grid's axes and their sizes, marking those taken from defaults") {
  const TempDir root("cli_sweep_grid");
  const std::string out = (root / "sweep").string();
  // --d-k and --scale given, --arms and --seeds left at their defaults: 2 x 1 x 1 x 2 x 3 = 12 runs.
  const ProcessResult run_output = run_xgrad(words("sweep --out " + out +
                                                   " --scale none,sqrt_dk --d-k 4 --grid d_model=8,16 --batch-size 2 "
                                                   "--steps 1 --print-every 100 --jobs 1"),
                                             merged_output());
  const std::string& output = run_output.out;
  INFO("output: " << output);
  CHECK(run_output.exit_code == 0);
  const std::string grid =
      "grid: scale × 2 (none, sqrt_dk) · d_k × 1 (4) · arms × 1 (default: adamw@0.003) · "
      "d_model × 2 (8, 16) · seed × 3 (default: 0, 1, 2) = 12 runs";
  const std::size_t at = output.find(grid);
  CHECK(at != std::string::npos);
  // At the start: before any run has finished.
  CHECK(at < output.find("runs done"));
}

TEST_CASE("xgrad: a whole-number setting written as 2.0 is 2; 2.5 is refused naming its fractional part") {
  const TempDir root("cli_whole_floats");
  const std::string out = (root / "flag").string();
  ProcessResult r = run_xgrad({"train", "--out", out, "--steps", "2.0", "--d-model", "8", "--batch-size", "2"});
  INFO("--steps 2.0: " << r.err);
  CHECK(r.exit_code == 0);
  const std::string written = [&] {
    std::ifstream in(out + "/config.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  CHECK(written.find("\"steps\": 2,") != std::string::npos);
  check_refused({{"train", "--out", (root / "half").string(), "--steps", "2.5"},
                 2,
                 "--steps: must be a whole number in [1, 1000000000]; 2.5 has a fractional part"});
  // In a --config file, as Python's json.dumps(float(2)) writes it.
  const std::string config = (root / "given.json").string();
  std::ofstream(config) << "{\"steps\": 2.0, \"d_model\": 8.0, \"batch_size\": 2}";
  r = run_xgrad({"train", "--config", config, "--out", (root / "file").string()});
  INFO("--config: " << r.err);
  CHECK(r.exit_code == 0);
  std::ofstream(config, std::ios::trunc) << "{\"steps\": 2.5, \"d_model\": 8, \"batch_size\": 2}";
  r = check_refused({{"train", "--config", config, "--out", (root / "file_half").string()},
                     2,
                     config + ": 'steps' holds 2.5, which is not a whole number"});
  CHECK(r.err.find("it has a fractional part") != std::string::npos);
  CHECK(r.err.find("got 2.0") == std::string::npos);
}

TEST_CASE(
    "xgrad compare: a metrics.csv cell that is not a number, or a row with too many fields, is named by file, "
    "row, line and column; a JSON syntax error names the file, line and column") {
  const TempDir root("cli_parse_errors");
  train::TrainConfig c = tiny_run((root / "run").string(), 3);
  c.model.d_model = 8;
  train::train(c);
  const fs::path metrics = root / "run" / "metrics.csv";
  const std::string good = [&] {
    std::ifstream in(metrics);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  // stdout and stderr: compare's warnings go to the log on stdout.
  auto compare = [&](std::string& output) {
    const ProcessResult o = run_xgrad({"compare", (root / "run").string()}, merged_output());
    output = o.out;
    return o.exit_code;
  };
  // Row 2 (line 3): its loss cell (column 2 in the header xgrad writes) replaced.
  const std::size_t row2 = good.find('\n', good.find('\n') + 1) + 1;
  const std::size_t loss_start = good.find(',', row2) + 1, loss_end = good.find(',', loss_start);
  REQUIRE(good.substr(0, good.find(',')) == "step");
  REQUIRE(good.substr(good.find(',') + 1, 5) == "loss,");
  std::ofstream(metrics, std::ios::trunc) << good.substr(0, loss_start) + "abc" + good.substr(loss_end);
  std::string output;
  int code = compare(output);
  INFO("bad cell: " << output);
  CHECK(code == 0);
  CHECK(output.find(metrics.string() + ": row 2 (line 3), column 2 (loss): 'abc' is not a number; drawn as a gap") !=
        std::string::npos);
  // One field too many in row 1: that row and the rest are dropped, and the report says where.
  const std::size_t row1_end = good.find('\n', good.find('\n') + 1);
  std::ofstream(metrics, std::ios::trunc) << good.substr(0, row1_end) + ",7" + good.substr(row1_end);
  code = compare(output);
  CHECK(code == 0);
  const std::string report = [&] {
    std::ifstream in(root / "run" / "report.md");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  INFO("extra field: " << report);
  // The reason is a cell of report.md's runs table: its markdown characters (the path's '_') are escaped.
  std::string cell;
  for (const char ch : metrics.string())
    cell += (std::string_view("\\`*_[]>#!~").find(ch) != std::string_view::npos ? "\\" : "") + std::string(1, ch);
  CHECK(report.find(cell + ": row 1 (line 2) has ") != std::string::npos);
  CHECK(report.find(" fields, the header ") != std::string::npos);
  // JSON: nlohmann's parse error gives line and column; the message names the file beside them.
  const std::string config = (root / "given.json").string();
  std::ofstream(config) << "{\"steps\": 2,\n \"lr\": 0.1,\n \"d_model\": 8x}\n";
  const ProcessResult r = check_refused(
      {{"train", "--config", config, "--out", (root / "fresh").string()}, 2, config + " is not valid JSON"});
  CHECK(r.err.find("line 3, column 14") != std::string::npos);
  std::ofstream(root / "run" / "config.json", std::ios::trunc) << "{\"steps\": 2,\n \"lr\": }\n";
  code = compare(output);
  INFO("config.json: " << output);
  CHECK(code != 0);
  CHECK(output.find((root / "run" / "config.json").string()) != std::string::npos);
  CHECK(output.find("line 2, column 8") != std::string::npos);
}

TEST_CASE("probe on sequences where no query may attend to two keys says so instead of a table of nan") {
  const TempDir root("cli_errors_probe_one_key");
  const fs::path data = root / "one_token";
  fs::create_directories(data);
  // inputs.npy and targets.npy of shape [8, 1]: every query sees only itself, so attention is 1 by construction.
  for (const char* name : {"inputs.npy", "targets.npy"}) {
    std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (8, 1), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream out(data / name, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
    out.write(length, 2);
    out << header;
    const std::int32_t token = 1;
    for (int i = 0; i < 8; ++i) out.write(reinterpret_cast<const char*>(&token), sizeof token);
  }
  for (const char* causal : {"true", "false"}) {
    INFO("--causal " << causal);
    const ProcessResult r =
        check_refused_in_one_line({{"probe", "--task", "data", "--data", data.string(), "--vocab-size", "4", "--d-k",
                                    "4", "--d-model", "16", "--batch-size", "4", "--causal", causal},
                                   2,
                                   "no query may attend to two keys"});
    CHECK(r.err.find("1 token") != std::string::npos);
  }
}

TEST_CASE("xgrad: an --out that cannot be a directory ('', a file, /dev/null) exits 2 naming --out in every command") {
  const TempDir root("cli_bad_out");
  const std::string run = (root / "run").string(), file = (root / "file.txt").string();
  std::ofstream(file) << "not a directory\n";
  train::TrainConfig c = tiny_run(run, 2);
  c.model.d_model = 8;
  train::train(c);
  const std::vector<std::vector<std::string>> commands{
      {"train", "--d-model", "8", "--steps", "2"},
      {"sweep", "--d-k", "4", "--scale", "none", "--seeds", "0", "--d-model", "8", "--steps", "2"},
      {"compare", run},
      {"explain", "--d-k", "4"},
      {"export", "tensorboard", run}};
  for (const std::string& out : {std::string(), file, std::string("/dev/null")})
    for (std::vector<std::string> args : commands) {
      args.insert(args.end(), {"--out", out});
      INFO("xgrad " << args[0] << " --out '" << out << "'");
      // In `root`: a command that took '' for its default directory would write there.
      const ProcessResult r = run_xgrad(args, in_directory(root));
      INFO("stderr: " << r.err);
      CHECK(r.exit_code == 2);
      CHECK(r.err.rfind("xgrad: --out: ", 0) == 0);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  CHECK(read_text(file) == "not a directory\n");
  std::size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(root.path())) entries += entry.path().filename() != "run";
  CHECK(entries == 1);  // file.txt: nothing written beside it
}

TEST_CASE("xgrad explain --runs: run names with terminal escapes, newlines or C1 controls are shown escaped") {
  const TempDir root("cli_explain_escapes");
  const std::string evil =
      "evil\x1b]0;PWNED\a\x1b[31m\nRED\xc2\x9b"
      "2J";
  const fs::path runs = root / "runs";
  train::TrainConfig c = tiny_run((runs / "good").string(), 3);
  c.model.d_model = 8;
  train::train(c);
  // A run that cannot be read (left out, with a note naming it) and one cut short (incomplete, named too).
  fs::copy(runs / "good", runs / (evil + "-broken"));
  std::ofstream(runs / (evil + "-broken") / "config.json", std::ios::trunc) << "{not json";
  fs::copy(runs / "good", runs / (evil + "-cut"));
  fs::remove(runs / (evil + "-cut") / "summary.json");
  const fs::path out = root / "explain";
  const ProcessResult r = run_xgrad(
      {"explain", "--d-k", "4", "--d-model", "8", "--runs", runs.string(), "--out", out.string()}, merged_output());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const std::string markdown = read_text(out / "explain.md");
  INFO(markdown);
  for (const std::string& text : {r.out, markdown}) {
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find('\a') == std::string::npos);
    CHECK(text.find("\xc2\x9b") == std::string::npos);
    // Each note stays one line: the name's newline is written out, never a line break.
    CHECK(text.find("\nRED") == std::string::npos);
  }
  CHECK(r.out.find("evil\\e]0;PWNED\\a\\e[31m\\nRED\\u009B2J-broken") != std::string::npos);
  CHECK(r.out.find("evil\\e]0;PWNED\\a\\e[31m\\nRED\\u009B2J-cut") != std::string::npos);
}

TEST_CASE("an --out too long for the file system is a usage error naming --out in every command that writes one") {
  const TempDir root("cli_long_out");
  const std::string input = root.string();
  const std::string long_name = input + "/" + std::string(5000, 'o');
  std::string long_path = input;
  while (long_path.size() < 5000) long_path += "/" + std::string(200, 'p');
  for (const std::string& out : {long_name, long_path})
    check_refusals({
        {{"compare", input, "--out", out}, 2, "--out: "},
        {{"explain", "--out", out}, 2, "--out: "},
        {{"export", "tensorboard", input, "--out", out}, 2, "--out: "},
        {{"train", "--out", out}, 2, "--out: "},
        {{"sweep", "--out", out}, 2, "--out: "},
    });
  CHECK_FALSE(fs::exists(root / std::string(200, 'p')));
}
