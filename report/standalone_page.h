// The frame shared by xgrad's self-contained pages (report.html of `xgrad compare`, explain.html of `xgrad explain`):
// one HTML file with the page's JSON, the vendored uPlot (with its licence), the page's own script and style inline,
// no server and no network.
#pragma once

#include <string>

namespace xgrad::report {

/// JSON made safe for a <script> block: "<" escaped everywhere (no "</script>" can end it), and the C1 controls (no
/// `cat page.html` can drive a terminal).
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

/// The whole HTML file of `page`. Throws std::logic_error when an embedded script or style holds "</" (it would end
/// its element early).
std::string standalone_page_html(const StandalonePage& page);

}  // namespace xgrad::report
