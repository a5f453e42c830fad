# Sourced by build-js-plugins.sh and test-js.sh: the TypeScript plugins of the repository.
#
#   js_plugin_dirs            every directory under plugins/ holding a plugin.ts (one per line)
#   js_plugin_name DIR        its component's name: the directory's name, `fixture-` + it for
#                             plugins/fixtures/*, as the Rust fixtures' crates are named

js_plugin_dirs() {
  find "$JS_ROOT/plugins" -name plugin.ts -not -path '*/node_modules/*' -printf '%h\n' | sort
}

js_plugin_name() {
  case "$1" in
    "$JS_ROOT"/plugins/fixtures/*) echo "fixture-$(basename "$1")" ;;
    *) basename "$1" ;;
  esac
}
