#!/usr/bin/python3
"""scripts/check-size.py: which braces open function bodies and how long each definition is, on
sources written to fool a brace counter; then the command's lines and exit status.

usage: check_size_test.py SOURCE_DIR
"""
import importlib.util
import os
import re
import subprocess
import sys

SOURCE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(SOURCE, "scripts", "check-size.py")
spec = importlib.util.spec_from_file_location("check_size", SCRIPT)
check_size = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_size)

# (source, [(first line, length, name), ...] in the order the definitions close)
CASES = {
    "literals, comments and preprocessor lines hold no braces": ("""\
#define OPEN {
#define LONG_MACRO(x) \\
  { x }
namespace a {
// a comment { with braces }
/* and { another
   } */
int f() {
  const char* s = "}{\\"}";
  char c = '}';
  auto r = R"x(}})" )x";
  int n = 1'000'000 + u8'{' + 0x1'F;
  return 0;
}
}  // namespace a
""", [(8, 7, "f")]),
    "classes, constructors' brace initializers, members and operators": ("""\
struct S : Base {
  S(int x) : Base{x}, a_{x}, b_(x) {
    ++a_;
  }
  ~S() override {}
  int a_{0};
  int b_ = {1};
  void g() const noexcept {}
  bool operator()(int) const { return true; }
  S& operator=(S&& other) noexcept {
    return *this;
  }
 private:
  int h() const override;
  enum class E { kA, kB };
  struct Inner {
    void i() {}
  };
};
""", [(2, 3, "S"), (5, 1, "~S"), (8, 1, "g"), (9, 1, "operator()"), (10, 3, "operator="),
      (17, 1, "i")]),
    "templates, trailing return types, default arguments in braces": ("""\
template <class T>
T first(const std::vector<T>& v,
        Options o = {}) {
  return v[0];
}
template <typename T, int N = sizeof(T)>
struct Holder {
  auto get() const -> T { return t; }
  T t;
};
auto Holder<int>::size() -> decltype(sizeof(int)) {
  return 4;
}
""", [(1, 5, "first"), (8, 1, "get"), (11, 3, "Holder::size")]),
    "tables are no functions, their lambdas and namespace-scope lambdas are": ("""\
const std::vector<Entry> kTable = {
    {"a", 1},
    {"b", [](int x) {
       return x;
     }},
};
const auto square = [](int x) {
  return x * x;
};
constexpr auto kList = [] {
  return 1;
}();
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return 0;
}
extern "C" {
void c_function() {}
}
""", [(3, 3, "(lambda)"), (7, 3, "(lambda)"), (10, 3, "(lambda)"),
      (13, 3, "LLVMFuzzerTestOneInput"), (17, 1, "c_function")]),
    "test macros, with lambdas in their arguments": ("""\
TEST(Suite, Name) {
  EXPECT_TRUE(true);
}
INSTANTIATE_TEST_SUITE_P(Cases, Fixture, testing::Values(Case{"a", {1, 2}}),
                         [](const auto& info) { return info.param.name; });
""", [(1, 3, "TEST(Suite, Name)"), (5, 1, "(lambda)")]),
    "CUDA kernels and their launches": ("""\
__global__ void __launch_bounds__(256) scale(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
void launch(float* x, int n, cudaStream_t s) {
  scale<<<(n + 255) / 256, 256, 0, s>>>(x, n);
}
""", [(1, 4, "scale"), (5, 3, "launch")]),
}


def main():
    failures = []
    for what, (text, expected) in CASES.items():
        got = check_size.Scanner("case.cpp", text).run()
        if got != expected:
            failures.append(f"{what}:\n  expected {expected}\n  got      {got}")
    for text in ("void f() {\n  if (x) {\n}\n", "void f() {}\n}\n"):
        try:
            check_size.Scanner("case.cpp", text).run()
            failures.append(f"unbalanced braces scanned without an error: {text!r}")
        except check_size.ScanError as e:
            print(f"refused as expected: {e}")

    def run(*args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              cwd=SOURCE)

    small = run("--max-function", "3", "--max-file", "10", "models/zoo_families.h")
    if small.returncode != 1 or not re.search(
            r"^models/zoo_families\.h:1: file is \d+ lines \(at most 10\)$", small.stdout, re.M
    ) or not re.search(r"^models/zoo_families\.h:\d+: function add is [4-9] lines \(at most 3\)$",
                       small.stdout, re.M):
        failures.append(f"tiny limits on zoo_families.h: exit {small.returncode}, {small.stdout}")
    ok = run("models/zoo.h")
    if ok.returncode != 0 or "0 over the limits" not in ok.stdout:
        failures.append(f"models/zoo.h within the limits: exit {ok.returncode}, {ok.stdout}")
    for f in failures:
        print("FAILED:", f)
    print(f"{len(CASES)} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
