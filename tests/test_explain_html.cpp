// explain.html of `xgrad explain` (explain_html): the file holds the data as JSON, uPlot with its licence and
// the page's own script and style, and nothing from the network; text in the data cannot end its block. What the
// page does in a browser is tests/browser/explain_page_test.js, on the same fixture.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "report/explain.h"
#include "report/web_assets.h"
#include "tests/support/paths.h"
#include "tests/support/run_files.h"

using namespace xgrad::report;
namespace fs = std::filesystem;
using xgrad::testing::read_text;

namespace {

const std::string kOpen = "<script type=\"application/json\" id=\"xgrad-explain\">";

// The hand-written data of tests/browser/explain_fixture.json: 6 d_ks x 2 scales, T 17.
nlohmann::json fixture() {
  return nlohmann::json::parse(read_text(fs::path(xgrad::test::source_dir()) / "tests/browser/explain_fixture.json"));
}

// The page's JSON block: from its opening tag to the first "</script>" after it (where a browser ends it).
std::string data_block(const std::string& html) {
  const auto begin = html.find(kOpen);
  REQUIRE(begin != std::string::npos);
  const auto end = html.find("</script>", begin);
  REQUIRE(end != std::string::npos);
  return html.substr(begin + kOpen.size(), end - begin - kOpen.size());
}

}  // namespace

TEST_CASE("explain_html: the data, uPlot and its licence, the page's script and style, in one file") {
  const nlohmann::json data = fixture();
  const std::string html = explain_html(data);
  CHECK(nlohmann::json::parse(data_block(html)) == data);
  CHECK(html.find("<title>" + data.at("title").get<std::string>() + "</title>") != std::string::npos);
  CHECK(html.find(web_assets::kExplainJs) != std::string::npos);
  CHECK(html.find(web_assets::kExplainCss) != std::string::npos);
  CHECK(html.find(web_assets::kUplotJs) != std::string::npos);
  CHECK(html.find(web_assets::kUplotLicense) != std::string::npos);  // uPlot's MIT notice, whole
  CHECK(html.find(web_assets::kPageJs) == std::string::npos);        // report.html's script is not this page's
  // Offline: nothing is loaded from anywhere (no src or href that names a server).
  const std::regex from_a_server(R"((src|href)\s*=\s*["']?\s*(https?:)?//)");
  CHECK_FALSE(std::regex_search(html, from_a_server));
}

TEST_CASE("explain_html: a string with </script> cannot end the data block; NaN is null") {
  nlohmann::json data = fixture();
  data["notes"].push_back("</script><script>document.title='owned'</script> and </SCRIPT >");
  data["setup"] = "<!-- a comment --> & \"quotes\"";
  data["points"][0]["score_std"] = std::numeric_limits<double>::quiet_NaN();
  data["points"][1]["score_std"] = std::numeric_limits<double>::infinity();
  const std::string block = data_block(explain_html(data));
  CHECK(block.find('<') == std::string::npos);
  const nlohmann::json back = nlohmann::json::parse(block);
  CHECK(back.at("notes").back() == data.at("notes").back());
  CHECK(back.at("setup") == data.at("setup"));
  CHECK(back.at("points")[0].at("score_std").is_null());
  CHECK(back.at("points")[1].at("score_std").is_null());
  CHECK(back.at("sections") == data.at("sections"));
}

TEST_CASE("explain_html: a title with markup is escaped in <title>") {
  nlohmann::json data = fixture();
  data["title"] = "a </title><script>x</script> & b";
  const std::string html = explain_html(data);
  CHECK(html.find("<title>a &lt;/title&gt;&lt;script&gt;x&lt;/script&gt; &amp; b</title>") != std::string::npos);
}
