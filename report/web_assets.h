// report.html's and explain.html's scripts and styles, compiled into xgrad from report/web (report/web/embed.cmake):
// the vendored uPlot (version and licence: report/web/VENDORED.md) and each page's own script and style.
#pragma once

#include <cstddef>

namespace xgrad::report::web_assets {

extern const char kUplotJs[];       // vendor/uPlot.iife.min.js
extern const char kUplotCss[];      // vendor/uPlot.min.css
extern const char kUplotLicense[];  // vendor/LICENSE (MIT: the notice goes with every copy, so into every page)
extern const char kPageJs[];        // page.js
extern const char kPageCss[];       // page.css
extern const char kExplainJs[];     // explain.js (explain.html of `xgrad explain`)
extern const char kExplainCss[];    // explain.css
// report/text/*.md, the report's sentence templates (read through report/text.h): kTextCount files, each named by
// its file name without ".md" ("claims").
extern const char* const kTextNames[];
extern const char* const kTexts[];
extern const std::size_t kTextCount;

}  // namespace xgrad::report::web_assets
