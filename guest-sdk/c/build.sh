#!/bin/sh
# Build a sluice plugin written in C into a component of sluice:plugin@0.2.0:
#
#     guest-sdk/c/build.sh plugin.c plugin.wasm [wit-dir]
#
# WORLD=classifier builds a classifier plugin (sluice_classifier.h,
# wit/classifier.wit) instead of a parse plugin.
#
# Needs Debian's clang, lld, wasi-libc and libclang-rt-14-dev-wasm32, and
# wit-bindgen and wasm-tools from crates.io (scripts/setup c installs them;
# WIT_BINDGEN and WASM_TOOLS may name the programs). Extra C files of the
# plugin may follow in CFILES; CFLAGS adds compiler flags.
set -eu
src=${1:?usage: build.sh plugin.c out.wasm [wit-dir]}
out=${2:?usage: build.sh plugin.c out.wasm [wit-dir]}
here=$(cd "$(dirname "$0")" && pwd)
wit=${3:-$here/../../wit}
wit_bindgen=${WIT_BINDGEN:-wit-bindgen}
wasm_tools=${WASM_TOOLS:-wasm-tools}
clang=${CLANG:-clang}
# Each tool, or what to do to get it (the build needs all three).
need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "build.sh: $1 not found. $2" >&2
        exit 127
    fi
}
need "$clang" "Install Debian's clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32), or set CLANG."
need "$wit_bindgen" "Install it with: cargo install --locked wit-bindgen-cli@0.63.0 --no-default-features --features c (with wasm-tools, about 12 minutes of 2 cores; guest-sdk/c/README.md), or set WIT_BINDGEN to the program."
need "$wasm_tools" "Install it with: cargo install --locked wasm-tools@1.263.0 --no-default-features --features component,parse,print (with wit-bindgen, about 12 minutes of 2 cores), or set WASM_TOOLS to the program."
world=${WORLD:-plugin}
case "$world" in
plugin) sdk="$here/sluice_plugin.c" ;;
classifier) sdk="$here/sluice_classifier.c" ;;
*) echo "build.sh: WORLD=$world: plugin or classifier" >&2; exit 2 ;;
esac
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT

# The bindings of the contract: plugin.h, plugin.c, plugin_component_type.o
# (classifier.h … for a classifier).
if ! said=$("$wit_bindgen" c --world "$world" --out-dir "$gen" "$wit" 2>&1); then
    echo "$said" >&2
    exit 1
fi
# A reactor module (no main); -Wl,--export-dynamic is not needed: the
# bindings export what the component model calls.
"$clang" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Werror \
    -Wno-unused-function ${CFLAGS:-} \
    -I "$here" -I "$gen" \
    -o "$gen/core.wasm" \
    "$src" ${CFILES:-} "$sdk" "$here/sluice_json_read.c" "$gen/$world.c" "$gen/${world}_component_type.o"
# A plugin imports only the host's log and clock. wasi-libc's stdio brings
# a few WASI calls along (snprintf links stdout's writer); no-wasi.wat
# answers those in place of a WASI adapter, so the component imports no
# WASI at all. Any other import (a libc call that needs the outside world:
# files, the clock of libc, the environment) is refused here, by name.
stubbed='"wasi_snapshot_preview1" "\(fd_write\|fd_seek\|fd_close\|proc_exit\)"'
imports=$("$wasm_tools" print "$gen/core.wasm" | grep '(import ' | grep -v '"sluice:plugin/' | grep -v "$stubbed" || true)
if [ -n "$imports" ]; then
    echo "build.sh: $src imports what a plugin cannot have (a libc call that needs WASI?):" >&2
    echo "$imports" >&2
    exit 1
fi
"$wasm_tools" parse "$here/no-wasi.wat" -o "$gen/no-wasi.wasm"
"$wasm_tools" component new "$gen/core.wasm" --adapt wasi_snapshot_preview1="$gen/no-wasi.wasm" -o "$out"
echo "built $out ($(wc -c <"$out") bytes)"
