// Writes explain.html from a JSON file with write_explain_html, for the browser test (ctest explain_page_html, then
// explain_page_browser) until `xgrad explain` writes the page itself.
//   explain_page_fixture DATA_JSON OUT_HTML      (OUT_HTML's directory is created)
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "report/explain_html.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: explain_page_fixture DATA_JSON OUT_HTML\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    const nlohmann::json data = nlohmann::json::parse(in);
    const std::filesystem::path out(argv[2]);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    const std::size_t bytes = xgrad::train::write_explain_html(data, argv[2]);
    std::cout << "wrote " << argv[2] << " (" << bytes << " bytes)\n";
  } catch (const std::exception& e) {
    std::cerr << "explain_page_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
