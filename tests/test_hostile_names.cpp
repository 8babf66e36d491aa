// Names from the data that try to become commands or paths: an optimizer in a run's config.json holding shell,
// gnuplot or Markdown syntax, `../`, a leading '-', control characters or ten thousand bytes. `xgrad compare` (with
// real gnuplot) runs no command of theirs, writes only inside its output directory, names its figures from a safe
// alphabet, and still writes its report; the functions those names pass through are checked on their own.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/file_name.h"
#include "platform/process.h"
#include "report/plots.h"
#include "tests/support/fake_run.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/shown_text.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using xgrad::is_safe_file_stem;
using xgrad::safe_file_stem;
using xgrad::testing::FakeRun;
using xgrad::testing::read_text;
using xgrad::testing::run_xgrad;
using xgrad::testing::TempDir;

namespace {

// Each reaches a shell, gnuplot, a path or Markdown differently; the files they would create are kTrapFiles.
const std::vector<std::string> kHostile{
    "sgd;cd ..;cd ..;touch PWNED;echo",
    "`touch BACKTICK`",
    "$(touch DOLLAR)",
    "q'.system('touch GNUPWNED').'",
    "q\"; touch QUOTED; \"",
    "a\nsystem 'touch NEWLINE'\n#",
    "../../../../escaped",
    "-rf",
    ".hidden",
    "\x1b]0;title\x07\x1b[31mred\r\x7f",
    "x](http://evil.example/)",
    "<script>alert(1)</script>",
    std::string(10000, 'L'),
    "",
};
const std::vector<std::string> kTrapFiles{"PWNED", "BACKTICK", "DOLLAR", "GNUPWNED", "QUOTED", "NEWLINE", "escaped"};

// Every regular file under `root` (relative paths).
std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (!e.is_directory()) out.insert(fs::relative(e.path(), root).string());
  return out;
}

// The files named like a trap anywhere under `root`.
std::vector<std::string> traps_under(const fs::path& root) {
  std::vector<std::string> found;
  for (const std::string& f : files_under(root))
    for (const std::string& trap : kTrapFiles)
      if (fs::path(f).filename().string().find(trap) != std::string::npos) found.push_back(f);
  return found;
}

}  // namespace

TEST_CASE("safe_file_stem: hostile text becomes a bounded name of [A-Za-z0-9._-], distinct texts stay apart") {
  std::set<std::string> stems;
  for (const std::string& text : kHostile) {
    const std::string stem = safe_file_stem(text);
    INFO(stem);
    CHECK(is_safe_file_stem(stem));
    CHECK(stem.size() <= xgrad::kMaxReducedStem);
    CHECK(stem.find('/') == std::string::npos);
    CHECK(stem.front() != '.');
    CHECK(stem.front() != '-');
    CHECK(stem == safe_file_stem(text));  // the same name in every comparison
    stems.insert(stem);
  }
  CHECK(stems.size() == kHostile.size());
  // Texts that reduce alike, or share their first kMaxReducedStem bytes, keep apart names.
  CHECK(safe_file_stem("a;b") != safe_file_stem("a b"));
  CHECK(safe_file_stem(std::string(200, 'x') + "1") != safe_file_stem(std::string(200, 'x') + "2"));
  for (const char* text : {".", "..", "-", "--help", "a/b", "é"}) CHECK(is_safe_file_stem(safe_file_stem(text)));
  // A name that is one already is kept: the registered optimizers' figures keep their names.
  for (const char* text : {"adamw_dk16", "lr_final_loss_vs_lr_sgd_dk64", "a.b-c_D9"})
    CHECK(safe_file_stem(text) == text);
  CHECK_FALSE(is_safe_file_stem(std::string(xgrad::kMaxFileStem + 1, 'a')));
}

TEST_CASE("run_program passes hostile arguments to the program as they are, never through a shell") {
  const TempDir dir("hostile_run_program");
  const std::vector<std::string> words{"$(touch DOLLAR)", "`touch BACKTICK`", "a;touch PWNED", "'\"", "-rf", "x\ny"};
  std::vector<std::string> argv{"printf", "%s|"};
  argv.insert(argv.end(), words.begin(), words.end());
  xgrad::platform::ProgramOptions in_dir;
  in_dir.working_directory = dir.string();
  const xgrad::platform::ProgramResult r = xgrad::platform::run_program(argv, in_dir);
  CHECK(r.exit_code == 0);
  std::string expected;
  for (const std::string& w : words) expected += w + "|";
  CHECK(r.output == expected);
  CHECK(traps_under(dir).empty());

  // The working directory and the output file are the ones given; a link in the output file's place is refused.
  xgrad::platform::ProgramOptions logged = in_dir;
  logged.output_file = (dir / "out.log").string();
  CHECK(xgrad::platform::run_program({"pwd"}, logged).exit_code == 0);
  CHECK(xgrad::platform::run_program({"sh", "-c", "exit 3"}, logged).exit_code == 3);
  CHECK(read_text(dir / "out.log") == fs::canonical(dir.path()).string() + "\n");
  std::ofstream(dir / "target") << "kept";
  fs::create_symlink(dir / "target", dir / "link.log");
  logged.output_file = (dir / "link.log").string();
  CHECK_THROWS_AS(xgrad::platform::run_program({"pwd"}, logged), std::runtime_error);
  CHECK(read_text(dir / "target") == "kept");
  // No descriptor of this process but stdin, stdout and stderr reaches the program (ls opens one of its own).
  const int leaked = ::open(dir.string().c_str(), O_RDONLY);
  REQUIRE(leaked > 2);
  const std::string listed = xgrad::platform::run_program({"ls", "/proc/self/fd"}).output;
  ::close(leaked);
  CHECK(listed == "0\n1\n2\n3\n");
  CHECK_THROWS_AS(xgrad::platform::run_program({"xgrad-no-such-program"}), std::runtime_error);
  CHECK(xgrad::platform::find_program("xgrad-no-such-program").empty());
  CHECK(xgrad::platform::find_program("sh").find("/sh") != std::string::npos);
}

TEST_CASE("draw_figure and write_summary_plots refuse a figure name that is not a safe file stem") {
  REQUIRE(xgrad::report::gnuplot_available());
  const TempDir root("hostile_draw_figure");
  const fs::path plots = root / "a" / "plots";
  fs::create_directories(plots);
  for (const std::string& name : kHostile) CHECK_FALSE(xgrad::report::draw_figure(plots.string(), name));
  xgrad::report::SummaryFigure f = xgrad::report::summary_figure(
      "../../x;touch PWNED", "title", "caption", "x", xgrad::report::Axis::linear, "y", xgrad::report::Axis::linear);
  xgrad::report::SummaryLine line = xgrad::report::summary_line("line", "none");
  line.points.push_back({1.0, 2.0, 1.5, 2.5, 1, 0});
  f.lines.push_back(line);
  xgrad::report::PlotOutcome outcome;
  xgrad::report::write_summary_plots({f}, plots.string(), outcome);
  CHECK(outcome.summary_drawn.empty());
  CHECK(outcome.note.find("not a safe file name") != std::string::npos);
  CHECK(files_under(root).empty());
  CHECK(traps_under(root).empty());
}

TEST_CASE(
    "compare on an lr sweep whose runs name hostile optimizers: skipped by name, no command, nothing outside --out") {
  REQUIRE(xgrad::report::gnuplot_available());
  const TempDir root("hostile_compare");
  // Deep enough that every "cd .." of the names stays inside root, where the test looks.
  const fs::path sweep = root / "a" / "b" / "c" / "sweep", out = root / "a" / "b" / "c" / "report";
  fs::create_directories(sweep);
  std::ofstream(sweep / "sweep.json") << R"({"preset": {"name": "lr", "quick": false}})";
  std::vector<std::string> optimizers = kHostile;
  optimizers.push_back("adamw");  // a registered one keeps its figure names
  std::size_t n = 0;
  for (std::size_t i = 0; i < optimizers.size(); ++i)
    for (const double lr : {0.01, 0.1}) {
      FakeRun r;
      r.optimizer = optimizers[i];
      r.lr = lr;
      // Every other hostile optimizer's runs name a hostile scaling, attention layer and task too.
      if (i % 2 && i + 1 < optimizers.size()) {
        r.scale = optimizers[i];
        r.extra_config = {{"task", optimizers[i]}, {"attention", optimizers[i]}};
      }
      for (int step = 0; step < 20; ++step) r.loss.push_back(2.0 / (1.0 + 0.1 * step * lr * 10));
      xgrad::testing::write_run(sweep / "runs" / ("run" + std::to_string(n++)), r);
    }
  const std::set<std::string> before = files_under(root);
  const xgrad::testing::ProcessResult compared =
      run_xgrad({"compare", sweep.string(), "--out", out.string()}, xgrad::testing::merged_output());
  INFO(compared.out);
  CHECK(compared.exit_code == 0);
  CHECK(compared.out.find("gnuplot failed") == std::string::npos);  // every hostile label reached gnuplot as text
  CHECK(traps_under(root).empty());
  for (const std::string& f : files_under(root))
    if (!before.count(f)) CHECK_MESSAGE(fs::path(f).lexically_relative("a/b/c/report").string().rfind("..", 0) != 0, f);

  // Every figure file has a safe name; the registered optimizer's are drawn under their usual names.
  REQUIRE(fs::exists(out / "report.md"));
  for (const auto& e : fs::directory_iterator(out / "plots"))
    if (e.is_regular_file()) CHECK_MESSAGE(is_safe_file_stem(e.path().stem().string()), e.path().string());
  CHECK(fs::exists(out / "plots" / "lr_final_loss_vs_lr_adamw_dk16.png"));
  // No build registers such names (is_entry_name): every run naming one is skipped, naming the key, and reaches no
  // figure; the adamw runs make the report.
  std::size_t skipped = 0;
  for (std::size_t at = 0; (at = compared.out.find("must be an entry name", at)) != std::string::npos; ++at) ++skipped;
  CHECK(skipped == 2 * kHostile.size());

  // report.md: every image is one of plots/, its alt text cannot end early, and no control character is raw.
  const std::string md = read_text(out / "report.md");
  // Parsed by hand: std::regex recurses once per character, and a 10,000-byte alt text overflows the stack under
  // AddressSanitizer.
  std::istringstream lines(md);
  std::size_t images = 0;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("![", 0) != 0) continue;
    INFO(l);
    const std::size_t link = l.rfind("](");
    REQUIRE(link != std::string::npos);
    const std::string alt = l.substr(2, link - 2), target = l.substr(link + 2);
    REQUIRE(target.size() > 5);
    CHECK(target.compare(target.size() - 5, 5, ".png)") == 0);
    const std::string stem = target.substr(0, target.size() - 5);
    CHECK(stem.rfind("plots/", 0) == 0);
    const std::string file = stem.substr(std::min<std::size_t>(6, stem.size()));
    CHECK(!file.empty());
    CHECK(file.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
          std::string::npos);
    CHECK((file.empty() || (file[0] != '.' && file[0] != '-')));
    bool escaped = false, bare_bracket = false;  // a [ or ] not escaped by a backslash would end the alt text early
    for (char ch : alt) {
      if (!escaped && (ch == '[' || ch == ']')) bare_bracket = true;
      escaped = !escaped && ch == '\\';
    }
    CHECK_FALSE(bare_bracket);
    ++images;
  }
  CHECK(images >= 1);
  for (std::size_t at = 0; (at = md.find("](http://evil.example/)", at)) != std::string::npos; ++at)
    CHECK((at > 0 && md[at - 1] == '\\'));  // a ']' that could close a link is escaped wherever the name is shown
  CHECK(std::none_of(md.begin(), md.end(), [](char ch) { return ch == '\x1b' || ch == '\x07' || ch == '\r'; }));
}

TEST_CASE("sweep run-one: a point name in sweep.json that is a path writes its config inside the sweep directory") {
  const TempDir root("hostile_run_one");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad({"sweep",   "--out",   out.string(), "--scale",       "none",      "--d-k",      "4",
                     "--seeds", "0",       "--arms",     "adamw@0.01",    "--d-model", "16",         "--batch-size",
                     "8",       "--steps", "5",          "--print-every", "100000",    "--launcher", "slurm"},
                    xgrad::testing::merged_output())
              .exit_code == 0);
  nlohmann::json index = nlohmann::json::parse(read_text(out / "sweep.json"));
  index["runs"][0]["name"] = "../../PWNED_CONFIG";
  std::ofstream(out / "sweep.json") << index.dump(2);
  const xgrad::testing::ProcessResult r =
      run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, xgrad::testing::merged_output());
  INFO(r.out);
  CHECK(r.exit_code == 0);
  for (const std::string& f : files_under(root)) CHECK_MESSAGE(f.rfind("sweep/", 0) == 0, f);
  for (const auto& e : fs::directory_iterator(out / "configs")) CHECK(is_safe_file_stem(e.path().stem().string()));
  CHECK(fs::is_regular_file(out / "configs" / (safe_file_stem("../../PWNED_CONFIG") + ".json")));
}

TEST_CASE("compare and export show a run directory's newline and invalid UTF-8 escaped: no forged line, no raw byte") {
  const TempDir root("hostile_dir_lines");
  const fs::path runs = root / "hn";
  FakeRun r;  // one seed in every run: compare warns of the duplicates, naming each directory
  for (int step = 0; step < 10; ++step) r.loss.push_back(2.0 - 0.1 * step);
  xgrad::testing::write_run(runs / "plain", r);
  // Copies, as `cp -r` makes them: config.json keeps the UTF-8 path it was written under.
  for (const std::string name : {"nl\nforged: ok", "\xff\xfe"}) fs::copy(runs / "plain", runs / name);

  const xgrad::testing::ProcessResult compared =
      run_xgrad({"compare", runs.string(), "--out", (root / "hnc").string()}, xgrad::testing::merged_output());
  INFO(compared.out);
  REQUIRE(compared.exit_code == 0);
  CHECK(compared.out.find("duplicate seed") != std::string::npos);
  CHECK(xgrad::testing::raw_lines(compared.out).empty());
  CHECK_FALSE(xgrad::testing::has_line_starting(compared.out, "forged"));
  const std::string md = read_text(root / "hnc" / "report.md");
  CHECK(xgrad::testing::raw_lines(md).empty());
  CHECK_FALSE(xgrad::testing::has_line_starting(md, "forged"));

  const xgrad::testing::ProcessResult exported = run_xgrad(
      {"export", "tensorboard", runs.string(), "--out", (root / "hnt").string()}, xgrad::testing::merged_output());
  INFO(exported.out);
  REQUIRE(exported.exit_code == 0);
  CHECK(xgrad::testing::raw_lines(exported.out).empty());
  CHECK_FALSE(xgrad::testing::has_line_starting(exported.out, "forged"));
}

TEST_CASE("report.md shows run directories named like a Markdown link or image as text, not as a link or image") {
  const TempDir root("hostile_dir_markdown");
  const fs::path runs = root / "hm";
  FakeRun r;
  for (int step = 0; step < 10; ++step) r.loss.push_back(2.0 - 0.1 * step);
  for (const std::string name : {"[click](javascript:alert(1))", "![img](http:x.example|y)", "a\\|b"})
    xgrad::testing::write_run(runs / name, r);
  const xgrad::testing::ProcessResult compared =
      run_xgrad({"compare", runs.string(), "--out", (root / "hmc").string()}, xgrad::testing::merged_output());
  INFO(compared.out);
  REQUIRE(compared.exit_code == 0);
  const std::string md = read_text(root / "hmc" / "report.md");
  INFO(md);
  // A live link or image needs "](" after an unescaped "[": escaped, the name's brackets are "\[" and "\]".
  CHECK(md.find("[click](") == std::string::npos);
  CHECK(md.find("[img](") == std::string::npos);
  // Every row of the runs table has its five cells: a name's '|' after a backslash does not split a cell.
  std::istringstream lines(md);
  for (std::string l; std::getline(lines, l);)
    if (l.find("a\\\\") != std::string::npos && l.rfind("| ", 0) == 0) {
      std::size_t cells = 0;
      for (std::size_t i = 0, slashes = 0; i < l.size(); slashes = l[i] == '\\' ? slashes + 1 : 0, ++i)
        cells += l[i] == '|' && slashes % 2 == 0;
      CHECK_MESSAGE(cells == 6, l);
    }
}

TEST_CASE("report.md shows names from sweep.json and config.json as text: no link, image or HTML of theirs") {
  // An unregistered preset's name is shown twice; lr's sections name the arms in their own tables and titles.
  for (const std::string preset : {"![pre](http://evil.example/p.png) <b>", "lr"}) {
    CAPTURE(preset);
    const TempDir root("hostile_data_markdown");
    // The sweep's directory names explain.html's link.
    const fs::path sweep = root / "[dir](javascript:alert(1))", out = root / "report";
    fs::create_directories(sweep / "explain");
    std::ofstream(sweep / "explain" / "explain.html") << "<html></html>\n";
    std::ofstream(sweep / "sweep.json") << nlohmann::json{{"preset", {{"name", preset}, {"quick", true}}}}.dump();
    // A key no build declares is a setting of its own: in the arm table's header, the summary tables' line labels
    // and the note that scalings are not compared (the key differs with the scaling).
    const std::string key = "<img src=x>[key](javascript:alert(2))";
    for (const std::string scale : {"none", "sqrt_dk"})
      for (const std::size_t d_k : {16, 64})
        for (const double lr : {0.01, 0.1}) {
          FakeRun r;
          r.scale = scale, r.d_k = d_k, r.lr = lr;
          r.extra_config = {{key, scale == "none" ? "![img](http://evil.example/i.png)" : "[click](javascript:3)"}};
          for (int step = 0; step < 10; ++step) r.loss.push_back(2.0 - lr * step);
          xgrad::testing::write_run(sweep / "runs" / (scale + std::to_string(d_k) + std::to_string(lr)), r);
        }
    const xgrad::testing::ProcessResult compared = run_xgrad(
        {"compare", sweep.string(), "--out", out.string(), "--plots", "false"}, xgrad::testing::merged_output());
    INFO(compared.out);
    REQUIRE(compared.exit_code == 0);
    const std::string md = read_text(out / "report.md");
    INFO(md);
    REQUIRE(md.find("explain.html") != std::string::npos);  // the link is written, its text escaped
    REQUIRE(md.find("line \\ d_k") != std::string::npos);   // a summary table with the key in its labels
    CHECK((preset == "lr") == (md.find("lr-sensitivity-table") != std::string::npos));  // lr's own table
    // Escaped, a name's brackets are "\[" and "\]" and its '<' is "\<" or "&lt;": none is left after an even number
    // of backslashes (a name's own backslash is "\\").
    for (const std::string live : {"[dir](", "[pre](", "[key](", "[img](", "[click](", "<b>", "<img"})
      for (std::size_t at = 0; (at = md.find(live, at)) != std::string::npos; ++at) {
        std::size_t slashes = 0;
        while (slashes < at && md[at - 1 - slashes] == '\\') ++slashes;
        CHECK_MESSAGE(slashes % 2 == 1, md.substr(at > 40 ? at - 40 : 0, 80));
      }
  }
}
