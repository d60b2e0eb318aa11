#!/usr/bin/env bash
# Fails when a C or C++ file of the project is not formatted as .clang-format says.
set -euo pipefail
cd "$1"
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null ||
                     find sdk host handlers tests bench docs -name '*.[ch]' -o -name '*.[ch]pp')
((${#files[@]})) || { echo "no source files found under $1" >&2; exit 1; }
clang-format --dry-run -Werror "${files[@]}"
echo "${#files[@]} files formatted"
