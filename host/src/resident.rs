//! What the host keeps resident of its own binary once it has started.
//!
//! The kernel maps a binary's code into a process in 64 KiB windows around every page executed
//! (fault-around) and keeps it mapped. Start-up runs code a running host never runs again:
//! argument parsing, the kubeconfig's YAML, TLS setup, the engine's configuration, loading the
//! compiled plugins. Once the host is ready, [`release_start_up_code`] asks the kernel to reclaim
//! the binary's read-only pages (`MADV_PAGEOUT`) and to read them back one page at a time when
//! they run again (`MADV_RANDOM`: no read-ahead), so that what stays resident is the code the
//! running host executes. The cost is a read of each such page from the page cache or the disk
//! when it first runs again. Pages another process maps too (a second host from the same file)
//! are left alone by the kernel, and the writable and relocated ones are not touched.

use std::ops::Range;

/// The address ranges of `exe`'s read-only mappings in a `/proc/<pid>/maps` text: its code,
/// constants and tables, without the data it writes.
pub fn read_only_mappings(maps: &str, exe: &str) -> Vec<Range<usize>> {
    maps.lines()
        .filter_map(|line| {
            // address range, permissions, offset, device, inode, then the path (which may hold spaces).
            let mut rest = line;
            let mut fields = [""; 5];
            for field in &mut fields {
                (*field, rest) = rest.trim_start().split_once(' ')?;
            }
            let [range, perms, ..] = fields;
            if rest.trim_start() != exe || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some(start..end)
        })
        .collect()
}

/// Reclaims the host binary's read-only pages and turns read-ahead off for them (see the module
/// docs); returns the bytes of the mappings advised. Linux 5.4 or later; elsewhere it does
/// nothing.
#[cfg(target_os = "linux")]
#[allow(unsafe_code, reason = "madvise with advice that never changes what the pages hold")]
pub fn release_start_up_code() -> std::io::Result<usize> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut advised = 0;
    for range in read_only_mappings(&maps, &exe.to_string_lossy()) {
        let (start, len) = (range.start as *mut libc::c_void, range.len());
        for advice in [libc::MADV_RANDOM, libc::MADV_PAGEOUT] {
            // SAFETY: the range is a whole mapping of this process's own binary, read from its
            // maps, and binaries are never unmapped. MADV_RANDOM changes read-ahead only;
            // MADV_PAGEOUT reclaims clean file pages, which the next access reads back unchanged,
            // and leaves private (relocated) pages in place when there is no swap or swaps them.
            if unsafe { libc::madvise(start, len, advice) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        advised += len;
    }
    Ok(advised)
}

/// Does nothing outside Linux.
#[cfg(not(target_os = "linux"))]
pub fn release_start_up_code() -> std::io::Result<usize> {
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
563e19f7f000-563e1a710000 r--p 00000000 fd:00 1234 /work/bin/wasmop
563e1a710000-563e1be4f000 r-xp 00790000 fd:00 1234 /work/bin/wasmop
563e1be4f000-563e1bf3d000 r--p 01ece000 fd:00 1234 /work/bin/wasmop
563e1bf3d000-563e1bf43000 rw-p 01fbb000 fd:00 1234 /work/bin/wasmop
563e1bf43000-563e1bf50000 rw-p 00000000 00:00 0
563e1c000000-563e1c100000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000010000 r-xp 00000000 fd:00 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000020000-7f0000030000 r-xp 00000000 fd:00 77 /work/bin/wasmop-old
";

    #[test]
    fn picks_the_binarys_read_only_mappings_only() {
        assert_eq!(
            read_only_mappings(MAPS, "/work/bin/wasmop"),
            [0x563e19f7f000..0x563e1a710000, 0x563e1a710000..0x563e1be4f000, 0x563e1be4f000..0x563e1bf3d000]
        );
    }

    #[test]
    fn a_path_with_spaces_is_matched_whole() {
        let maps = "1000-2000 r-xp 00000000 fd:00 5 /opt/my host/wasmop\n3000-4000 r-xp 00000000 fd:00 6 /opt/my\n";
        assert_eq!(read_only_mappings(maps, "/opt/my host/wasmop"), vec![(0x1000..0x2000)]);
        assert_eq!(read_only_mappings(maps, "/opt/my"), vec![(0x3000..0x4000)]);
    }

    #[test]
    fn malformed_and_empty_lines_are_skipped() {
        let maps = "\nzz-2000 r-xp 0 fd:00 5 /w\n2000-1000 r-xp 0 fd:00 5 /w\n1000-2000 r-xp\n";
        assert!(read_only_mappings(maps, "/w").is_empty());
    }

    /// KiB of this process's binary that are resident, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn resident_kib_of_binary() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").unwrap().to_string_lossy().into_owned();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut in_binary = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if let Some(rss) = line.strip_prefix("Rss:") {
                if in_binary {
                    kib += rss.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            } else if line.split_whitespace().next().is_some_and(|f| f.contains('-') && !f.ends_with(':')) {
                in_binary = line.ends_with(&exe);
            }
        }
        kib
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_running_binarys_code_is_released() {
        let before = resident_kib_of_binary();
        let advised = release_start_up_code().expect("madvise on this test binary");
        let after = resident_kib_of_binary();
        assert!(advised > 0, "the test binary's own code is mapped read-only");
        assert!(after < before / 2, "resident before {before} KiB, after {after} KiB");
    }
}
