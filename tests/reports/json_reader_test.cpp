#include "reports/json_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace scalescope {
namespace {

// A key named twice in one object: parse_json keeps the last (nlohmann's rule), while a file a
// person wrote is refused, since which of the two was meant is not known.
TEST(JsonText, AKeyTwiceInOneObjectIsRefusedWhereAPersonWroteTheFile) {
  const std::string twice = R"({"a": {"x": 1, "y": [{"z": 1}, {"z": 2}], "x": 2}})";
  EXPECT_EQ(parse_json(twice, "f")["a"]["x"], 2);
  const std::string error =
      testing_util::error_of([&] { parse_json_unique_keys(twice, "config file f"); });
  EXPECT_CONTAINS(error, "config file f gives the key 'x' twice in one object");
  // One key in several objects, siblings or nested, is no repetition.
  const nlohmann::json ok =
      parse_json_unique_keys(R"({"x": {"x": 1}, "y": [{"x": 2}, {"x": 3}], "z": {}})", "f");
  EXPECT_EQ(ok["y"][1]["x"], 3);
  EXPECT_CONTAINS(testing_util::error_of([] { parse_json_unique_keys("{\"a\": ", "f"); }),
                  "f is not valid JSON");
}

}  // namespace
}  // namespace scalescope
