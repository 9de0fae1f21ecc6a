//! A local process's state and start time from `/proc/PID/stat`: together with the pid they
//! name one process, which a recycled pid does not share. The daemon checks its masters and
//! tasks this way, and clients the daemon they are connected to.

/// What `/proc/PID/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T`, `Z` (zombie), ...
    pub state: char,
    /// Clock ticks after boot.
    pub start_time: u64,
}

/// The process `pid` as it is now; `None` once it is gone (reaped).
pub fn read(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse(&text)
}

/// Fields after the parenthesised command name (which may itself hold spaces or parentheses):
/// the state is the first, the start time the 20th.
pub fn parse(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_start_time_past_odd_names() {
        let line = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1 2 3";
        let stat = parse(line).unwrap();
        assert_eq!((stat.state, stat.start_time), ('S', 987_654));
    }

    #[test]
    fn this_process_reads_as_running() {
        let me = read(std::process::id()).unwrap();
        assert!(matches!(me.state, 'R' | 'S'));
    }
}
