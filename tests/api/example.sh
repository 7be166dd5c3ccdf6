#!/usr/bin/env bash
# The library as a user gets it: install the build tree to a temporary prefix, build
# examples/custom_loop against it with find_package(Prism), run it, and check that the loss
# decreases and a restored session continues exactly.
set -euo pipefail
build_dir="$1"; source_dir="$2"
data=/usr/share/datasets/fashion-mnist
if [[ ! -f $data/train-images-idx3-ubyte.gz ]]; then
  echo "skipped: no Fashion-MNIST in $data"; exit 77
fi
work=$(mktemp -d /tmp/prism-library.XXXXXX)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT

# --strip: the installed `prism` without its debug information.
cmake --install "$build_dir" --prefix "$work/prefix" --strip >"$work/install.log"
for f in include/prism/Prism.h include/prism/Status.h include/prism/Tensor.h \
         lib/libprism.a lib/cmake/Prism/PrismConfig.cmake \
         lib/cmake/Prism/PrismConfigVersion.cmake bin/prism; do
  [[ -e $work/prefix/$f ]] || { echo "not installed: $f"; exit 1; }
done
"$work/prefix/bin/prism" --version

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$source_dir/examples/custom_loop" -B "$work/example" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/example" -j2 >"$work/build.log" || { cat "$work/build.log"; exit 1; }

out=$(timeout 300 "$work/example/custom_loop" "$source_dir/models/mlp.prism" --steps 100 \
  --checkpoint "$work/ckpt" 2>&1)
echo "$out"
grep -q "^loss decreased" <<<"$out"
grep -q "^saved .* at step 100" <<<"$out"
grep -q "^restored .* at step 100" <<<"$out"
grep -q "^restore continues exactly" <<<"$out"

# A bad model is a clear error, not a crash.
printf 'model m {\n  input x : f32[B, 784]\n  %%y = nosuchop(x)\n}\n' >"$work/bad.prism"
if bad=$("$work/example/custom_loop" "$work/bad.prism" 2>&1); then
  echo "a bad model was accepted"; exit 1
fi
echo "$bad"
grep -q "bad.prism:3:.*error" <<<"$bad"
