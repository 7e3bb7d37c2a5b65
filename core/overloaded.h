// A visitor for std::visit built from one lambda per alternative:
//   std::visit(Overloaded{[](const A&) {...}, [](const B&) {...}}, v);
#pragma once

namespace scalescope {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// C++20 aggregates deduce their template arguments without this guide, but clang 16 does not
// implement that yet (P1816); the guide makes Overloaded{...} compile with both compilers.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace scalescope
