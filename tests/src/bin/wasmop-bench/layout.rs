//! How current the measured host's function order is. The release host is linked with its
//! functions in the order of `host/layout/<target>.order` (`host/build.rs`); the linker skips
//! the names it does not find. An edit of the host renames some of its functions (the `.llvm.N`
//! suffix ThinLTO gives, the hash of a generic instance), which then lie scattered among the
//! rest, and a host keeps more of its code resident: its RSS is then not the laid-out host's.
//! The report says how many of the order's names the host defines, and the bench warns when
//! they are too few (`tests/testbed/layout.sh --rename` names them anew).

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use wasmop_tests::workspace_root;

/// The order of this machine's release build, relative to the workspace.
const ORDER: &str = "host/layout/x86_64-unknown-linux-gnu.order";

/// Of the order's names, how many the host defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// The order's names the host defines.
    pub found: usize,
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

    /// Counts the names of `order` (one per line) among the symbols `nm` listed.
    fn count(nm: &str, order: &str) -> Self {
        let defined: HashSet<&str> = nm.lines().filter_map(|line| line.split_whitespace().nth(2)).collect();
        let names: HashSet<&str> = order.lines().map(str::trim).filter(|name| !name.is_empty()).collect();
        Self { found: names.iter().filter(|name| defined.contains(**name)).count(), names: names.len() }
    }

    /// Whether the host defines nearly all (99%) of the order's names.
    pub fn current(&self) -> bool {
        self.found * 100 >= self.names * 99
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the host defines {} of the {} names of {ORDER}", self.found, self.names)
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
        assert_eq!(layout, Layout { found: 2, names: 3 });
        assert!(!layout.current(), "a renamed function is missing: {layout}");
        assert!(Layout::count(nm, "main\n").current());
    }
}
