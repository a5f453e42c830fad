//! What the commands print.

/// Writes `text` to stdout. A reader that went away (`wasmop inspect ... | head`) ends the output
/// quietly, as Unix tools do; Rust ignores SIGPIPE, so the write fails with `BrokenPipe`.
pub fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
        _ => Ok(()),
    }
}
