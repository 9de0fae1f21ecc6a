//! A signal as the kill tools take it: a number, or a name whose number POSIX fixes (so it
//! means the same on Linux, BSD and macOS hosts). Answers name signals; an agent may pass a
//! name back.

use serde::Deserialize;

/// The names a kill tool takes, with their numbers (the same on every POSIX system).
const NAMES: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("ALRM", 14),
    ("TERM", 15),
];

/// A signal for command_kill or task_kill: a number (1..64, checked by the daemon) or one
/// of [`NAMES`] (a `SIG` prefix is fine).
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Signal {
    Number(i32),
    Name(String),
}

/// Published inline as one line: the field that takes it describes both forms.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Signal {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Signal".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": ["integer", "string"]})
    }
}

impl Signal {
    /// The number of an agent's optional signal, or `invalid_arguments`.
    pub fn number_of(signal: Option<Signal>) -> Result<Option<i32>, crate::DaemonError> {
        signal
            .map(|signal| signal.number())
            .transpose()
            .map_err(crate::DaemonError::invalid_arguments)
    }

    /// The signal's number; a name no kill tool takes is an `invalid_arguments` message.
    pub fn number(&self) -> Result<i32, String> {
        match self {
            Self::Number(number) => Ok(*number),
            Self::Name(name) => {
                let name = name.trim();
                // A number written as a string is that number.
                if let Ok(number) = name.parse() {
                    return Ok(number);
                }
                // `get`: a name's third byte may fall inside a character.
                let bare = match name.get(..3) {
                    Some(sig) if name.len() > 3 && sig.eq_ignore_ascii_case("SIG") => &name[3..],
                    _ => name,
                };
                NAMES
                    .iter()
                    .find(|(known, _)| known.eq_ignore_ascii_case(bare))
                    .map(|(_, number)| *number)
                    .ok_or_else(unknown_name)
            }
        }
    }
}

/// What an agent learns of a signal name no kill tool takes: the names they do, and how to
/// find the number of another on its host (USR1 is 10 on Linux, 30 on BSD and macOS).
fn unknown_name() -> String {
    let names: Vec<&str> = NAMES.iter().map(|(name, _)| *name).collect();
    format!(
        "invalid value for field: signal: a name of {} (a `SIG` prefix is fine), or a number \
         1..64 (the numbers of other names differ between systems: give the host's number)",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> Result<i32, String> {
        serde_json::from_value::<Signal>(value)
            .map_err(|e| e.to_string())?
            .number()
    }

    #[test]
    fn names_and_numbers_are_one_signal() {
        for (given, number) in [
            (serde_json::json!(15), 15),
            (serde_json::json!("TERM"), 15),
            (serde_json::json!("SIGKILL"), 9),
            (serde_json::json!("hup"), 1),
            (serde_json::json!(" sigterm"), 15),
            (serde_json::json!("10"), 10),
        ] {
            assert_eq!(parse(given.clone()), Ok(number), "{given}");
        }
    }

    #[test]
    fn a_name_whose_number_differs_between_systems_is_refused() {
        // USR1 is 10 on Linux and 30 on BSD and macOS.
        let refused = parse(serde_json::json!("USR1")).unwrap_err();
        assert!(refused.starts_with("invalid value for field: signal: a name of HUP, INT,"));
        assert!(refused.contains("give the host's number"), "{refused}");
        assert!(parse(serde_json::json!("TERMINATE")).is_err());
        assert!(
            parse(serde_json::json!("SI\u{e9}")).is_err(),
            "no panic inside a character"
        );
    }
}
