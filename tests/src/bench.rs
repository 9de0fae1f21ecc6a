//! What the benchmark examples share: running two measurements in turn, and printing a ratio
//! beside its goal.

use std::future::Future;

/// Runs `a` and `b` one after the other, `a` first in even rounds and `b` in odd ones, so a
/// drift of the machine during a run (caches warming, other work starting) favours neither.
pub async fn in_turn<A: Future, B: Future>(round: usize, a: A, b: B) -> (A::Output, B::Output) {
    if round.is_multiple_of(2) {
        let first = a.await;
        (first, b.await)
    } else {
        let second = b.await;
        (a.await, second)
    }
}

/// `ratio` to two decimals; when it misses its goal, rounded away from the goal, so a miss
/// never prints as the goal's own figure (0.7996 against "≥ 0.8" shows as 0.79, not 0.80).
/// `at_least`: the goal is a figure to reach, not one to stay under.
pub fn shown_ratio(ratio: f64, met: bool, at_least: bool) -> String {
    let hundredths = ratio * 100.0;
    let shown = match (met, at_least) {
        (true, _) => hundredths.round(),
        (false, true) => hundredths.floor(),
        (false, false) => hundredths.ceil(),
    };
    format!("{:.2}", shown / 100.0)
}

/// A ratio that must reach `goal`, as printed beside it: the ratio (see `shown_ratio`), and
/// "met" or "not met".
pub fn judged_at_least(ratio: f64, goal: f64) -> (String, &'static str) {
    let met = ratio >= goal;
    (
        shown_ratio(ratio, met, true),
        if met { "met" } else { "not met" },
    )
}

#[cfg(test)]
mod tests {
    use super::shown_ratio;

    #[test]
    fn a_missed_goal_never_prints_as_its_own_figure() {
        assert_eq!(shown_ratio(0.7996, false, true), "0.79");
        assert_eq!(shown_ratio(1.0004, false, false), "1.01");
        assert_eq!(shown_ratio(0.7996, true, false), "0.80");
        assert_eq!(shown_ratio(1.504, true, true), "1.50");
    }
}
