#include "report/explain_html.h"

#include "report/standalone_page.h"
#include "report/web_assets.h"

namespace xgrad::train {

std::size_t write_explain_html(const nlohmann::json& data, const std::string& path) {
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
  const std::string html = standalone_page_html(page);
  write_page_file(path, html, "explain");
  return html.size();
}

}  // namespace xgrad::train
