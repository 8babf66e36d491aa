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

std::string html_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

namespace {

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
  std::string html;
  html.reserve(page.data.size() + 200000);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + html_escape(page.title) + "</title>\n<style>\n";
  html += web_assets::kUplotCss;
  html += "\n";
  html += page.css;
  html += "\n</style>\n</head>\n<body>\n<div id=\"app\"><p id=\"loading\">Loading…</p></div>\n";
  html += "<noscript>" + html_escape(page.noscript) + "</noscript>\n";
  html += "<script type=\"application/json\" id=\"" + html_escape(page.data_id) + "\">";
  html += page.data;
  html += "</script>\n<script>\n/* uPlot, vendored from npm (report/web/VENDORED.md). Its licence:\n";
  html += license_comment();
  html += "*/\n";
  html += web_assets::kUplotJs;
  html += "\n</script>\n<script>\n";
  html += page.js;
  html += "\n</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace xgrad::report
