// explain.html of `xgrad explain`: one self-contained page (no server, no network) that embeds the measurements of
// attention at initialisation (report/explain.h builds them) as JSON with the vendored uPlot and the page's own
// script and style (report/web/explain.js, explain.css), and walks through why scores are scaled by 1/sqrt(d_k).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace xgrad::report {

/// The text of explain.html: `data` (the object `xgrad explain` builds, report/explain.h: title, setup, d_ks,
/// scales, sections, figures, per_dk, points, curves, runs, notes) with uPlot and the page's script and style inline,
/// as the <script type="application/json" id="xgrad-explain"> block (non-finite numbers as null, "<" escaped so that no
/// string in it can end the block).
std::string explain_html(const nlohmann::json& data);

/// Writes explain_html(data) to `path` whole or not at all (platform::write_file_atomically: a link at `path` is
/// replaced, never followed). Returns the file's size in bytes. Throws std::runtime_error naming the path and the
/// reason when it cannot be written.
std::size_t write_explain_html(const nlohmann::json& data, const std::string& path);

}  // namespace xgrad::report
