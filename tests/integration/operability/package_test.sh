#!/usr/bin/env bash
# Builds the Debian packages of a build tree with cpack, installs them with
# `dpkg -i` on this machine (as root; purged again on exit), and uses them from
# the installed paths: dowserd --version, dowserctl validate with the installed
# handlers, systemd-analyze verify on the unit, and the plain-C example handler
# built against the installed dowser-sdk only. Without root, dpkg installs into
# a scratch root with its own database instead.
#
# usage: package_test.sh <build-dir> <source-dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build-dir> <source-dir>" >&2
  exit 2
fi
build_dir=$(realpath "$1")
source_dir=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/dowser-packages.XXXXXX")
trap 'rm -rf "$work"' EXIT
packages="$work/packages"
root="$work/root"
log="$work/step.log"

step() { echo "== $*"; }
fail() {
  echo "package_test: FAILED: $*" >&2
  exit 1
}
run() {  # quietly; on failure shows the output and stops
  local what=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what"
  fi
}
contains() {  # <what> <file-with-listing> <pattern>...
  local what=$1 listing=$2
  shift 2
  for pattern in "$@"; do
    grep -qE -- "$pattern" "$listing" || { cat "$listing" >&2; fail "$what lacks $pattern"; }
  done
}

step "cpack -G DEB"
run "cpack" cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$packages"
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build_dir/CPackConfig.cmake")
dowser_deb=$(ls "$packages"/dowser_*.deb 2>/dev/null) || fail "no dowser package in $packages"
sdk_deb=$(ls "$packages"/dowser-sdk_*.deb 2>/dev/null) || fail "no dowser-sdk package in $packages"
onvif_deb=$(ls "$packages"/dowser-handler-onvif_*.deb 2>/dev/null || true)
if [[ -e "$build_dir/lib/dowser/handlers/libdowser-handler-onvif.so" && -z "$onvif_deb" ]]; then
  fail "the ONVIF handler is built but there is no dowser-handler-onvif package"
fi

step "package contents and control data"
dpkg-deb -c "$dowser_deb" >"$work/dowser.list"
contains "dowser" "$work/dowser.list" '\./usr/bin/dowserd$' '\./usr/bin/dowserctl$' \
  '\./usr/lib/dowser/handlers/libdowser-handler-debug-echo\.so$' \
  '\./usr/lib/dowser/libdowser-kubernetes\.so$' \
  '\./lib/systemd/system/dowser\.service$' '\./etc/dowser/dowserd\.env$' \
  '\./etc/dowser/configurations/$'
for built in "$build_dir"/lib/dowser/handlers/*.so; do
  name=$(basename "$built")
  [[ $name == libdowser-handler-* ]] || continue
  if [[ $name == libdowser-handler-onvif.so ]]; then
    ! grep -q "$name" "$work/dowser.list" || fail "the ONVIF handler belongs in its own package"
  else
    contains "dowser" "$work/dowser.list" "/usr/lib/dowser/handlers/$name\$"
  fi
done
dpkg-deb -c "$sdk_deb" >"$work/sdk.list"
contains "dowser-sdk" "$work/sdk.list" '/usr/include/dowser/handler\.h$' \
  '/usr/include/dowser/handler\.hpp$' '/dowser-sdk/dowser-sdkConfig\.cmake$' \
  '/pkgconfig/dowser-sdk\.pc$' '\./usr/bin/dowser-handler-check$'
[[ $(dpkg-deb -f "$dowser_deb" Package) == dowser ]] || fail "dowser package name"
[[ $(dpkg-deb -f "$dowser_deb" Version) == "$version" ]] || fail "dowser version is not $version"
grep -q 'libc6' <<<"$(dpkg-deb -f "$dowser_deb" Depends)" ||
  fail "dowser's Depends (from dpkg-shlibdeps) lacks libc6: $(dpkg-deb -f "$dowser_deb" Depends)"
grep -q 'libgrpc++-dev' <<<"$(dpkg-deb -f "$sdk_deb" Depends)" || fail "dowser-sdk does not depend on libgrpc++-dev"
dpkg-deb -e "$dowser_deb" "$work/control"
grep -qx '/etc/dowser/dowserd.env' "$work/control/conffiles" || fail "dowserd.env is not a conffile"

installed_packages=(dowser-sdk dowser)
[[ -n $onvif_deb ]] && installed_packages=(dowser-handler-onvif "${installed_packages[@]}")
if ((EUID == 0)); then
  # The real thing: this machine's dpkg, database and dependencies. A dowser
  # that was here before is not ours to replace or purge.
  root=""
  for package in "${installed_packages[@]}"; do
    if dpkg -s "$package" >/dev/null 2>&1; then
      fail "$package is already installed on this machine; remove it first (dpkg -P $package)"
    fi
  done
  trap 'dpkg -P "${installed_packages[@]}" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  step "dpkg -i on this machine"
  run "dpkg -i" dpkg -i "$dowser_deb" "$sdk_deb" ${onvif_deb:+"$onvif_deb"}
  dpkg_root=()
else
  step "dpkg -i into $root (not root: a scratch root)"
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
  touch "$root/var/lib/dpkg/status"
  # Dependencies are this machine's; maintainer scripts run against
  # $DPKG_ROOT, where no systemd runs, so they do nothing.
  run "dpkg -i" dpkg --root="$root" --log=/dev/null --force-not-root --force-depends \
    --force-script-chrootless -i "$dowser_deb" "$sdk_deb" ${onvif_deb:+"$onvif_deb"}
  dpkg_root=(--root="$root")
fi
for package in "${installed_packages[@]}"; do
  status=$(dpkg "${dpkg_root[@]}" -s "$package" | sed -n 's/^Status: //p')
  [[ $status == "install ok installed" ]] || fail "$package: dpkg status is '$status'"
done

step "dowserd --version from the installed path"
installed_version=$("$root/usr/bin/dowserd" --version)
[[ $installed_version == *"$version"* ]] || fail "dowserd --version says '$installed_version', not $version"

step "dowserd loads its Kubernetes module from the installed path"
# Only the module reads --kubeconfig: its complaint about the file shows it loaded.
if "$root/usr/bin/dowserd" --store=kubernetes --node-name=package-test \
  --kubeconfig="$work/no-kubeconfig" >"$log" 2>&1; then
  fail "dowserd started without a kubeconfig"
fi
if ! grep -q "Kubernetes: $work/no-kubeconfig" "$log"; then
  cat "$log" >&2
  fail "dowserd did not load $root/usr/lib/dowser/libdowser-kubernetes.so"
fi

step "dowserctl validate with the installed handlers"
handlers="$root/usr/lib/dowser/handlers"
example="$root/usr/share/doc/dowser/examples/debug-echo.yaml"
run "dowserctl validate $example" "$root/usr/bin/dowserctl" validate --handler-dir="$handlers" "$example"
grep -q 'valid (handler debugEcho)' "$log" || { cat "$log" >&2; fail "validate did not ask debugEcho"; }
sed 's/foo0/{{{/' "$example" >"$work/bad.yaml"
if "$root/usr/bin/dowserctl" validate --handler-dir="$handlers" "$work/bad.yaml" >"$log" 2>&1; then
  cat "$log" >&2
  fail "dowserctl validate accepted bad discovery details"
fi

step "systemd-analyze verify the unit"
unit="$root/lib/systemd/system/dowser.service"
grep -qx 'ProtectSystem=strict' "$unit" || fail "the unit lacks ProtectSystem=strict"
grep -qx 'NoNewPrivileges=yes' "$unit" || fail "the unit lacks NoNewPrivileges=yes"
grep -q '^ExecStart=/usr/bin/dowserd ' "$unit" || fail "the unit does not start /usr/bin/dowserd"
if command -v systemd-analyze >/dev/null; then
  # Verified in place of the installed paths: ExecStart must exist and every
  # directive must parse.
  sed "s|/usr/bin/dowserd|$root/usr/bin/dowserd|; s|/etc/dowser/|$root/etc/dowser/|" "$unit" \
    >"$work/dowser.service"
  run "systemd-analyze verify" systemd-analyze verify --man=no "$work/dowser.service"
  if grep -qi 'unknown\|ignoring' "$log"; then
    cat "$log" >&2
    fail "systemd-analyze verify warned about the unit"
  fi
else
  echo "systemd-analyze is not installed: unit syntax not verified"
fi

step "build the example handler against the installed dowser-sdk"
example_dir="$source_dir/docs/examples/plain-c-handler"
run "configuring the example" cmake -S "$example_dir" -B "$work/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
sdk_dir=$(sed -n 's/^dowser-sdk_DIR:PATH=//p' "$work/example/CMakeCache.txt")
[[ $sdk_dir == "$root/usr"/* ]] || fail "find_package(dowser-sdk) found '$sdk_dir', not the package's"
run "building the example" cmake --build "$work/example"
run "the example's conformance test" ctest --test-dir "$work/example" --output-on-failure --no-tests=error

echo "package_test: passed"
