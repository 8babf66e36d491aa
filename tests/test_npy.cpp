// The .npy reader: files numpy wrote (versions 1, 2, 3; int32 and int64), and every malformed file it must refuse
// with a message naming the problem, without reading out of bounds.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "data/npy.h"
#include "data/task.h"
#include "tests/support/bad_files.h"
#include "tests/support/bytes.h"
#include "tests/support/temp_dir.h"

using namespace xgrad::data;
namespace fs = std::filesystem;

namespace {

using xgrad::testing::raw;

std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  return xgrad::testing::npy_image(dict, data, major);
}

std::string parse_error(const std::string& bytes) {
  return xgrad::testing::error_message<TaskError>([&] { parse_npy(bytes.data(), bytes.size(), "test.npy"); });
}

}  // namespace

TEST_CASE("npy: reads what numpy writes (byte for byte a file from np.save)") {
  // np.save of np.array([[1, -1, 2], [3, 4, -1]], dtype=np.int32), numpy 1.24.
  const std::string from_numpy(
      "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"
      "                                                          \n"
      "\x01\x00\x00\x00\xff\xff\xff\xff\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\xff\xff",
      152);
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(npy(dict, raw<std::int32_t>({1, -1, 2, 3, 4, -1})) == from_numpy);
  const NpyArray a = parse_npy(from_numpy.data(), from_numpy.size(), "numpy");
  CHECK(a.shape == std::vector<std::size_t>{2, 3});
  CHECK(a.int32_values == NpyValues<std::int32_t>{1, -1, 2, 3, 4, -1});
  CHECK(a.int64_values.empty());  // int32 stays int32
  CHECK(a.descr == "<i4");
}

TEST_CASE("npy: versions 2 and 3, int64, 1-d, 0-d and empty arrays, Python 2 long literals") {
  const std::string i64 = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }";
  const std::string values = raw<std::int64_t>({5, 6, 7, 8, -1, 9000000000});
  for (int version : {1, 2, 3}) {
    INFO("version " << version);
    const std::string bytes = npy(i64, values, version);
    const NpyArray a = parse_npy(bytes.data(), bytes.size(), "v");
    CHECK(a.shape == std::vector<std::size_t>{3, 2});
    CHECK(a.int64_values == NpyValues<std::int64_t>{5, 6, 7, 8, -1, 9000000000});
    CHECK(a.int32_values.empty());
  }
  const std::string one_d =
      npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", raw<std::int32_t>({1, 2, 3}));
  CHECK(parse_npy(one_d.data(), one_d.size(), "1d").shape == std::vector<std::size_t>{3});
  const std::string scalar = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", raw<std::int64_t>({4}));
  const NpyArray s = parse_npy(scalar.data(), scalar.size(), "0d");
  CHECK(s.shape.empty());
  CHECK(s.int64_values == NpyValues<std::int64_t>{4});
  const std::string empty = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }", "");
  CHECK(parse_npy(empty.data(), empty.size(), "empty").size() == 0);
  const std::string old =
      npy("{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"<i4\"}", raw<std::int32_t>({1, 2}));
  CHECK(parse_npy(old.data(), old.size(), "old").shape == std::vector<std::size_t>{2, 1});
}

TEST_CASE("npy: malformed files are refused with a message naming the problem") {
  const std::string ok_dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = raw<std::int32_t>({1, 2});
  const std::string good = npy(ok_dict, two);
  REQUIRE(parse_error(good).empty());
  std::string huge_v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4) + "{}";
  std::string past_end = good.substr(0, 10) + "{}";
  const std::vector<xgrad::testing::BadFile> cases{
      {"empty", "", "no \\x93NUMPY magic"},
      {"not npy", "PK\x03\x04 a zip file, maybe .npz", "no \\x93NUMPY magic"},
      {"version 4", std::string("\x93NUMPY\x04\x00\x10\x00", 10) + "{}", "version 4.0 is not supported"},
      {"version 1.1", std::string("\x93NUMPY\x01\x01\x10\x00", 10) + "{}", "version 1.1 is not supported"},
      {"v2 length cut", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "ends inside the header length"},
      {"huge header", huge_v2, "exceeds the limit"},
      {"header past the end", past_end, "runs past the end of the file"},
      {"not a dict", npy("['descr']", ""), "expected '{'"},
      {"unclosed dict", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,)", two), "expected ',' or '}'"},
      {"unclosed string", npy("{'descr: 1}", two), "not closed"},
      {"escape", npy("{'de\\scr': '<i4'}", two), "escape sequences"},
      {"text after dict", npy(ok_dict + " x", two), "text after its closing"},
      {"unknown key", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two), "unknown key 'x'"},
      {"repeated key", npy("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", two),
       "repeats the key 'descr'"},
      {"missing shape", npy("{'descr': '<i4', 'fortran_order': False}", two), "no 'shape' key"},
      {"missing descr", npy("{'fortran_order': False, 'shape': (2,)}", two), "no 'descr' key"},
      {"float dtype", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two),
       "dtype '<f4' is not supported"},
      {"big-endian", npy("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", two),
       "dtype '>i4' is not supported"},
      {"object array", npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", two), "dtype '|O'"},
      {"structured", npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", two),
       "descr is not a string"},
      {"fortran order", npy("{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", two), "fortran_order is True"},
      {"bad bool", npy("{'descr': '<i4', 'fortran_order': 0, 'shape': (2,), }", two), "neither True nor False"},
      {"negative dim", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (-2,), }", two), "whole numbers"},
      {"shape not a tuple", npy("{'descr': '<i4', 'fortran_order': False, 'shape': [2], }", two), "expected '('"},
      {"dim overflow", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }", two),
       "does not fit in 64 bits"},
      {"element overflow", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", two),
       "more elements"},
      {"truncated data", good.substr(0, good.size() - 1), "(truncated file)"},
      {"trailing bytes", good + "x", "is 9 bytes, but the shape and dtype need 8"},
  };
  xgrad::testing::check_bad_files(cases, good, "npy: test.npy: ", parse_error);
}

TEST_CASE("npy: read_npy names missing files and directories") {
  const xgrad::testing::TempDir dir("npy");
  CHECK_THROWS_WITH_AS(read_npy((dir / "absent.npy").string()), doctest::Contains("absent.npy: no such file"),
                       TaskError);
  CHECK_THROWS_WITH_AS(read_npy(dir.string()), doctest::Contains("not a regular file"), TaskError);
  {
    std::ofstream out(dir / "a.npy", std::ios::binary);
    out << npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", raw<std::int32_t>({7, 8}));
  }
  const NpyArray a = read_npy((dir / "a.npy").string());
  CHECK(a.int32_values == NpyValues<std::int32_t>{7, 8});
  CHECK(a.bytes() == 8);
}
