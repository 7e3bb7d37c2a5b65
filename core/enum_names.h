// The names of an enum's values, in value order, for enums whose values count from 0: one
// table per enum, which both prints a value and reads a name back, instead of a switch and a
// chain of comparisons that can drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/spelling.h"

namespace scalescope {

template <class Enum, size_t N>
class EnumNames {
 public:
  constexpr explicit EnumNames(std::array<std::string_view, N> names) : names_(names) {}

  // "?" for a value outside the table (a cast of a bad integer).
  constexpr std::string_view operator()(Enum value) const {
    const auto i = static_cast<size_t>(value);
    return i < N ? names_[i] : std::string_view("?");
  }
  // The value called `name`; nullopt when none is.
  constexpr std::optional<Enum> parse(std::string_view name) const {
    for (size_t i = 0; i < N; ++i) {
      if (names_[i] == name) return static_cast<Enum>(i);
    }
    return std::nullopt;
  }
  constexpr const std::array<std::string_view, N>& names() const { return names_; }
  // " (did you mean X?)" where `typed` is a slip away from a name (core/spelling.h), else "".
  std::string meant(std::string_view typed) const {
    return did_you_mean(typed, {names_.begin(), names_.end()});
  }
  // "a, b or c": what parse() accepts, for an error message.
  std::string accepted() const {
    std::string text;
    for (size_t i = 0; i < N; ++i) {
      text += i == 0 ? "" : i + 1 == N ? " or " : ", ";
      text += names_[i];
    }
    return text;
  }

 private:
  std::array<std::string_view, N> names_;
};

template <class Enum, class... Names>
constexpr EnumNames<Enum, sizeof...(Names)> enum_names(Names... names) {
  return EnumNames<Enum, sizeof...(Names)>({std::string_view(names)...});
}

}  // namespace scalescope
