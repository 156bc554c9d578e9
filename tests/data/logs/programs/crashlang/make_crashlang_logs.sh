#!/usr/bin/env bash
# Makes tests/data/logs/crashlang_*.log: real crashes (and healthy runs) of runtimes other than
# CPython, printed here by rustc 1.95.0, go1.19.8 (Debian golang-go), OpenJDK 17.0.15, Node.js v20.20.2 and g++ 12.2.0 (libstdc++).
# Run from anywhere: bash tests/data/logs/programs/crashlang/make_crashlang_logs.sh
# Each log is the program's stdout+stderr (2>&1) as printed, the checkout's path replaced by /src.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../../.." && pwd)"
out="$root/tests/data/logs"
tmp="$(mktemp -d)"
run() {  # run NAME CMD...: keep the output, the checkout path made /src
  local name="$1"; shift
  "$@" > "$tmp/$name.raw" 2>&1
  sed "s#$root#/src#g" "$tmp/$name.raw" > "$out/crashlang_$name.log"
}
rustc -O -o "$tmp/train_panic" "$here/train_panic.rs"
for m in unwrap index thread healthy; do run "rust_$m" env -u RUST_BACKTRACE "$tmp/train_panic" "$m"; done
run rust_unwrap_backtrace env RUST_BACKTRACE=1 "$tmp/train_panic" unwrap
javac -d "$tmp" "$here/TrainCrash.java"
for m in main thread healthy; do run "java_$m" java -cp "$tmp" TrainCrash "$m"; done
for m in throw reject healthy; do run "node_$m" node "$here/train_crash.js" "$m"; done
g++ -O1 -o "$tmp/train_abort" "$here/train_abort.cpp"
run node_heap_oom node --max-old-space-size=32 "$here/heap_oom.js"
for m in throw healthy; do run "cxx_$m" "$tmp/train_abort" "$m"; done
go build -o "$tmp/train_panic_go" "$here/train_panic.go"
for m in nil index panic deadlock healthy; do run "go_$m" "$tmp/train_panic_go" "$m"; done
rm -rf "$tmp"
