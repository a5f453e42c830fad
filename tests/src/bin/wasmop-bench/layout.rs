//! How current the measured host's function order is. The release host is linked with its
//! functions in the order of `host/layout/<target>.order` (`host/build.rs`); the linker skips
//! the names it does not find. An edit of the host that changes a type renames the instances of
//! generic code over it (their hash covers the type), which then lie scattered among the rest,
//! and a host keeps more of its code resident: its RSS is then not the laid-out host's.
//! A host built before the order last changed (run without `make bench`'s build) defines its
//! names but was linked in another order. The report says how many of the order's names the
//! host defines, and how many of them follow the one before at a higher address, as linked in
//! this order; the bench warns when either is too few (`tests/testbed/layout.sh --rename`
//! names them anew; a build links the host in the current order).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use wasmop_tests::workspace_root;

/// The order of this machine's release build, relative to the workspace.
const ORDER: &str = "host/layout/x86_64-unknown-linux-gnu.order";

/// Of the order's names, how many the host defines, and how many lie in the order's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// The order's names the host defines.
    pub found: usize,
    /// Of those, how many keep the order's sequence: nearly all of them in a host linked in
    /// this order. A name defined once does where it lies at a higher address than the one
    /// before it (the first does); an alias of a name before it (identical functions folded
    /// into one) and a name defined more than once (local symbols of several objects) count
    /// without a say.
    pub in_sequence: usize,
    /// The order's names.
    pub names: usize,
}

impl Layout {
    /// The layout of the host `binary` (read with `nm`), or `None` where no order applies (a
    /// build for another target than the committed order's).
    pub fn of(binary: &Path) -> anyhow::Result<Option<Self>> {
        let order = workspace_root().join(ORDER);
        if !cfg!(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")) || !order.exists() {
            return Ok(None);
        }
        let symbols = std::process::Command::new("nm")
            .arg("--defined-only")
            .arg(binary)
            .output()
            .context("running nm (binutils) on the host")?;
        anyhow::ensure!(
            symbols.status.success(),
            "nm {}: {}",
            binary.display(),
            String::from_utf8_lossy(&symbols.stderr)
        );
        let order = std::fs::read_to_string(&order).with_context(|| format!("reading {}", order.display()))?;
        Ok(Some(Self::count(&String::from_utf8_lossy(&symbols.stdout), &order)))
    }

    /// Counts the names of `order` (one per line) among the symbols `nm` listed (`<address>
    /// <type> <name>`), and those of them that follow the previous one at a higher address.
    fn count(nm: &str, order: &str) -> Self {
        // Each name's address, `None` for a name defined more than once (local symbols of
        // several objects), whose place says nothing.
        let mut defined: HashMap<&str, Option<u64>> = HashMap::new();
        for line in nm.lines() {
            let mut fields = line.split_whitespace();
            let (Some(address), Some(_), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            let address = u64::from_str_radix(address, 16).ok();
            defined.entry(name).and_modify(|known| *known = None).or_insert(address);
        }
        let (mut seen, mut placed) = (HashSet::new(), HashSet::new());
        let (mut found, mut in_sequence, mut previous) = (0, 0, None);
        for name in order.lines().map(str::trim).filter(|name| !name.is_empty()) {
            if !seen.insert(name) {
                continue;
            }
            let Some(&address) = defined.get(name) else { continue };
            found += 1;
            let Some(address) = address.filter(|address| !placed.contains(address)) else {
                in_sequence += 1;
                continue;
            };
            if previous.is_none_or(|previous| address > previous) {
                in_sequence += 1;
            }
            placed.insert(address);
            previous = Some(address);
        }
        Self { found, in_sequence, names: seen.len() }
    }

    /// Whether the host defines nearly all (99%) of the order's names, nearly all of them
    /// (99%) in its sequence.
    pub fn current(&self) -> bool {
        self.found * 100 >= self.names * 99 && self.in_sequence * 100 >= self.found * 99
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the host defines {} of the {} names of {ORDER}, {} of them in its sequence",
            self.found, self.names, self.in_sequence
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_orders_names_the_host_defines_once_each() {
        let nm = "0000000000001000 T _ZN6wasmop3run17h1E\n\
                  0000000000002000 t _ZN4core3ops17h2E.llvm.42\n\
                  0000000000003000 T main\n";
        let order = "_ZN6wasmop3run17h1E\n_ZN4core3ops17h2E.llvm.7\n\n_ZN6wasmop3run17h1E\nmain\n";
        let layout = Layout::count(nm, order);
        assert_eq!(layout, Layout { found: 2, in_sequence: 2, names: 3 });
        assert!(!layout.current(), "a renamed function is missing: {layout}");
        assert!(Layout::count(nm, "main\n").current());
    }

    #[test]
    fn a_host_linked_in_another_order_is_not_current() {
        let nm = "0000000000001000 T a\n0000000000002000 T b\n0000000000003000 T c\n";
        let laid_out = Layout::count(nm, "a\nb\nc\n");
        assert_eq!(laid_out, Layout { found: 3, in_sequence: 3, names: 3 });
        assert!(laid_out.current());
        // b was appended to the order after the host was linked: it lies before a.
        let stale = Layout::count(nm, "a\nc\nb\n");
        assert_eq!(stale, Layout { found: 3, in_sequence: 2, names: 3 });
        assert!(!stale.current(), "{stale}");
    }

    #[test]
    fn a_name_defined_twice_or_an_alias_says_nothing_of_the_sequence() {
        let nm = "0000000000001000 t a\n0000000000009000 t a\n0000000000002000 T b\n\
                  0000000000003000 T c\n0000000000002000 T b2\n0000000000004000 T d\n";
        let layout = Layout::count(nm, "b\na\nc\nb2\nd\n");
        assert_eq!(layout, Layout { found: 5, in_sequence: 5, names: 5 });
    }
}
