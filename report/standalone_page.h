// The frame of report.html and explain.html: one HTML file with the JSON, uPlot and the page's script inline.
#pragma once

#include <string>

namespace xgrad::report {

/// JSON safe in a <script> block: "<" escaped (no "</script>"), and C1 controls (`cat page.html` drives no terminal).
std::string script_safe(const std::string& json);

/// What one page holds besides uPlot.
struct StandalonePage {
  std::string file;      // the file's kind, for messages ("report.html")
  std::string title;     // plain text (escaped here)
  std::string data_id;   // id of the <script type="application/json"> block
  std::string data;      // its contents: JSON already through script_safe
  std::string noscript;  // plain text shown without JavaScript (escaped here)
  const char* css;       // the page's own style, after uPlot's
  const char* js;        // the page's own script, after uPlot
};

/// The whole HTML file of `page`. Throws std::logic_error when an embedded script or style holds "</".
std::string standalone_page_html(const StandalonePage& page);

}  // namespace xgrad::report
