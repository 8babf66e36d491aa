#include "report/explain_html.h"

#include <stdexcept>

#include "platform/atomic_file.h"
#include "report/standalone_page.h"
#include "report/web_assets.h"

namespace xgrad::report {

std::string explain_html(const nlohmann::json& data) {
  StandalonePage page;
  page.file = "explain.html";
  page.title = data.contains("title") && data.at("title").is_string() ? data.at("title").get<std::string>()
                                                                      : std::string("xgrad explain");
  page.data_id = "xgrad-explain";
  // nlohmann writes NaN and Inf as null; invalid UTF-8 in a string becomes U+FFFD rather than an exception.
  page.data = script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  page.noscript = "This page draws its figures with JavaScript.";
  page.css = web_assets::kExplainCss;
  page.js = web_assets::kExplainJs;
  return standalone_page_html(page);
}

std::size_t write_explain_html(const nlohmann::json& data, const std::string& path) {
  const std::string html = explain_html(data);
  try {
    platform::write_file_atomically(path, html);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("explain: ") + e.what());
  }
  return html.size();
}

}  // namespace xgrad::report
