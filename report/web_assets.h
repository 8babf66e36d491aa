// report.html's and explain.html's scripts and styles, compiled into xgrad from report/web (report/web/embed.cmake):
// the vendored uPlot (version and licence: report/web/VENDORED.md) and each page's own script and style.
#pragma once

namespace xgrad::report::web_assets {

extern const char kUplotJs[];       // vendor/uPlot.iife.min.js
extern const char kUplotCss[];      // vendor/uPlot.min.css
extern const char kUplotLicense[];  // vendor/LICENSE (MIT: the notice goes with every copy, so into every page)
extern const char kPageJs[];        // page.js
extern const char kPageCss[];       // page.css
extern const char kExplainJs[];     // explain.js (explain.html of `xgrad explain`)
extern const char kExplainCss[];    // explain.css
extern const char kClaimsMd[];      // ../text/claims.md: the sentence templates of the claims (report/claims.h)
extern const char kFindingsMd[];    // ../text/findings.md: the sentence templates of report.md's findings
extern const char kGlossaryMd[];    // ../text/glossary.md: the terms of report.md's glossary
extern const char kExplainMd[];     // ../text/explain.md: the sentences of explain.md and explain.html

}  // namespace xgrad::report::web_assets
