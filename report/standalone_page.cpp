#include "report/standalone_page.h"

#include <stdexcept>

#include <fmt/format.h>

#include "report/web_assets.h"

namespace xgrad::report {

std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const auto ch = static_cast<unsigned char>(json[i]);
    const auto next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if (ch == '<') {
      out += "\\u003c";
    } else if (ch == 0xC2 && next >= 0x80 && next <= 0x9F) {  // a C1 control (U+0080..U+009F), which terminals obey
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += json[i];
    }
  }
  return out;
}

namespace {

// `text` with &, <, > and " as entities: safe inside an element or attribute.
std::string html_escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const char* entity = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&quot;" : nullptr;
    out += entity ? std::string(entity) : std::string(1, ch);
  }
  return out;
}

// uPlot's licence for a /* */ comment: the MIT notice goes with every copy, so into every page.
std::string license_comment() {
  std::string license = web_assets::kUplotLicense;
  for (std::size_t at = license.find("*/"); at != std::string::npos; at = license.find("*/", at))
    license.replace(at, 2, "* /");  // inside a /* */ comment
  return license;
}

}  // namespace

std::string standalone_page_html(const StandalonePage& page) {
  for (const char* asset : {web_assets::kUplotJs, page.js, web_assets::kUplotCss, page.css})
    if (std::string(asset).find("</") != std::string::npos)
      throw std::logic_error(page.file + ": an embedded script or style holds \"</\", which would end its element");
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>\n{}\n{}\n"
      "</style>\n</head>\n<body>\n<div id=\"app\"><p id=\"loading\">Loading…</p></div>\n<noscript>{}</noscript>\n"
      "<script type=\"application/json\" id=\"{}\">{}</script>\n<script>\n/* uPlot, vendored from npm "
      "(report/web/VENDORED.md). Its licence:\n{}*/\n{}\n</script>\n<script>\n{}\n</script>\n</body>\n</html>\n",
      html_escape(page.title), web_assets::kUplotCss, page.css, html_escape(page.noscript), html_escape(page.data_id),
      page.data, license_comment(), web_assets::kUplotJs, page.js);
}

}  // namespace xgrad::report
