// Round trips of the records our JSON readers read back (reports, messages between processes):
// a record whose every key is set reads back to what was written, so a key that is written but
// not read (or read into the wrong field) shows as a difference.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

namespace scalescope::testing_util {

// Every leaf of `written` differs from the same place in `defaults` (the record
// default-constructed, a list of records holding one default element, compared with each
// element), so that a reader that forgot its key would give something else back. Keys that
// `defaults` lacks (written only when set) count as set.
inline void expect_every_key_set(const nlohmann::json& written, const nlohmann::json& defaults,
                                 const std::string& path = "") {
  if (written.is_object() && defaults.is_object()) {
    for (const auto& [key, value] : written.items()) {
      if (defaults.contains(key)) expect_every_key_set(value, defaults[key], path + "." + key);
    }
    return;
  }
  if (written.is_array() && defaults.is_array() && defaults.size() == 1 &&
      defaults[0].is_object()) {
    ASSERT_FALSE(written.empty()) << path << " is empty: the test sets nothing in it";
    for (size_t i = 0; i < written.size(); ++i) {
      expect_every_key_set(written[i], defaults[0], path + "[" + std::to_string(i) + "]");
    }
    return;
  }
  EXPECT_NE(written, defaults) << path << " is left at its default (" << written.dump()
                               << "): set it, so that the round trip tests it";
}

// `written` has every key set (against `defaults`, as above), and `reread` (what the reader
// made of it, written again) equals it.
inline void expect_round_trip(const nlohmann::json& written, const nlohmann::json& defaults,
                              const nlohmann::json& reread) {
  expect_every_key_set(written, defaults);
  EXPECT_EQ(reread, written) << "written: " << written.dump() << "\nread back: " << reread.dump()
                             << "\ndifference: " << nlohmann::json::diff(written, reread).dump();
}

}  // namespace scalescope::testing_util
