#!/usr/bin/env bash
# scripts/bundle.sh on this build: the bundle's folder (no archive, to stay fast) holds
# scalescope, the test binaries and a manifest; every ELF file has RPATH $ORIGIN/../lib
# ($ORIGIN in lib/); every library they load resolves inside it except NVIDIA's and glibc's,
# none of which it packs; moved elsewhere it still runs `scalescope devices` and a test binary
# with an empty LD_LIBRARY_PATH, and its check there finds a packed library removed and
# nothing else.
# The whole check on a system without the -dev packages is scripts/bundle-check.sh (slow: a
# debootstrap). Usage: bundle_layout_test.sh REPO BUILD_DIR; exits 77 (skipped) without
# patchelf.
set -uo pipefail
repo=$1
build=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v patchelf >/dev/null || { echo "SKIP: no patchelf (Debian: apt-get install patchelf)"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree="$work/a/scalescope-bundle"
mkdir -p "$work/a"
SECONDS=0
"$repo/scripts/bundle.sh" --build-dir "$build" --tree "$tree" || fail "bundle.sh exited $?"
echo "packed in $SECONDS s: $(du -sh "$tree" | cut -f1)"

[[ -x "$tree/bin/scalescope" && -x "$tree/tests/test_core" ]] || fail "no bin/scalescope or tests/test_core"
manifest="$tree/manifest.txt"
cut -c1-300 "$manifest"
grep -qE '^commit: [0-9a-f]{40} ' "$manifest" || fail "the manifest names no commit"
grep -qE '^dirty: (no|yes)' "$manifest" || fail "the manifest does not say whether the tree was dirty"
if grep -q 'SCALESCOPE_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  grep -qE '^cuda architectures: .*[0-9]' "$manifest" || fail "a CUDA build's manifest names no architectures"
  grep -qE '^nvidia libraries.*libcudart\.so' "$manifest" || fail "the manifest does not say the CUDA runtime comes from the GPU machine"
fi

# Nothing of NVIDIA's or glibc's is packed.
packed=$(find "$tree" -name '*.so*' -printf '%f\n')
if grep -E '^(libcuda|libcudart|libcudnn|libcublas|libnccl|libnvidia|libnvrtc|libc|libm|libpthread|libdl|librt|ld-linux)[.-]' <<<"$packed"; then
  fail "packed a library that the GPU machine supplies (above)"
fi

# RPATHs, read independently of bundle.sh: DT_RPATH, not RUNPATH.
elves=0
while IFS= read -r f; do
  [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] || continue
  elves=$((elves + 1))
  rel=${f#"$tree"/}
  rpath=$(readelf -d "$f" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  # shellcheck disable=SC2016  # $ORIGIN is the loader's, written literally
  case "$rel" in
    lib/*/*) want='$ORIGIN/..' ;;
    lib/*) want='$ORIGIN' ;;
    *) want='$ORIGIN/../lib' ;;
  esac
  [[ "$rpath" == "$want" ]] || fail "$rel: RPATH '$rpath', expected '$want'"
done < <(find "$tree" -type f)
echo "$elves ELF files with the expected RPATH"

# Moved, it runs: nothing points back at where it was packed.
mv "$work/a" "$work/moved"
tree="$work/moved/scalescope-bundle"
(cd "$work" && env -u LD_LIBRARY_PATH "$tree/bin/scalescope" devices) >"$work/devices.txt" 2>&1 ||
  { cat "$work/devices.txt"; fail "scalescope devices from the bundle exited non-zero"; }
env -u LD_LIBRARY_PATH "$tree/tests/test_core" --gtest_filter='DeviceSpec*' --gtest_brief=1 ||
  fail "test_core from the bundle failed"

# Its check, there, finds a packed library removed, and nothing else.
victim=$(find "$tree/lib" -maxdepth 1 -name 'libfmt.so*' -printf '%f\n' | head -1)
[[ -n "$victim" ]] || fail "libfmt is not packed"
rm "$tree/lib/$victim"
if "$repo/scripts/bundle.sh" --check "$tree" 2>"$work/check.txt"; then
  fail "the check passed without $victim"
fi
grep -q "$victim" "$work/check.txt" || fail "the check does not name $victim"
if grep -v "$victim" "$work/check.txt"; then fail "the moved bundle has other problems (above)"; fi
echo "ok"
