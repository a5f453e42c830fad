//! Which sides run (`BENCH_SIDES`), and in which order each round starts them.

use super::process::Side;

/// Whether `BENCH_SIDES` (comma-separated labels; default all but `native twin`) selects `side`.
fn side_selected(side: Side) -> bool {
    match std::env::var("BENCH_SIDES") {
        Ok(sides) => sides.split(',').any(|s| s.trim() == side.label()),
        Err(_) => side != Side::NativeTwin,
    }
}

/// Those of `sides` that `BENCH_SIDES` selects, to run side by side.
pub(super) fn chosen(sides: &[Side]) -> Vec<Side> {
    sides.iter().copied().filter(|s| side_selected(*s)).collect()
}

/// `sides` in the order in which `round` starts them: as given in odd rounds, reversed in even
/// ones. Side by side, the side whose requests go out first each time could keep a head start at
/// the shared API server; alternating spreads it over the sides, and in turn (`paced`), so does
/// running first.
pub(super) fn in_round_order(mut sides: Vec<Side>, round: usize) -> Vec<Side> {
    if round.is_multiple_of(2) {
        sides.reverse();
    }
    sides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_which_side_starts() {
        let sides = vec![Side::Native, Side::Wasmop];
        assert_eq!(in_round_order(sides.clone(), 1), [Side::Native, Side::Wasmop]);
        assert_eq!(in_round_order(sides.clone(), 2), [Side::Wasmop, Side::Native]);
        assert_eq!(in_round_order(sides, 3), [Side::Native, Side::Wasmop]);
    }
}
