//! What the benchmark examples share: running two measurements in turn.

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
