//! The MCP tools, none written here: each one made from its `Described` declaration in
//! `sshmcp-proto` (one for each tool of `daemon_methods!`). Its arguments
//! become its request, the daemon runs it until it answers or the client cancels the call
//! (telling the client its progress meanwhile, when the tool follows a run and the client
//! asked), and its answer is shaped as its declaration says, then as every tool's is.

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use sshmcp_proto::described::{Described, Failure, Followed, Here, Visitor};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::transfer::TransferError;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress};
use crate::server::Shim;
use tokio_util::sync::CancellationToken;

/// Every tool's route.
pub(crate) fn router() -> ToolRouter<Shim> {
    let mut routes = Routes(ToolRouter::new());
    sshmcp_proto::service::visit_described(&mut routes);
    routes.0
}

struct Routes(ToolRouter<Shim>);

impl Visitor for Routes {
    fn visit<T: Described>(&mut self) {
        let route = ToolRoute::new_dyn(tool::<T>(), |call: ToolCallContext<Shim>| {
            Box::pin(async move { Ok(answer_of::<T>(call).await.into()) })
        });
        self.0.add_route(route);
    }
}

/// One call of `T`: its arguments decoded into its request, run by the daemon until it
/// answers or the client cancels the call, its progress told when asked, answered as `T`
/// shapes it.
async fn answer_of<T: Described>(call: ToolCallContext<'_, Shim>) -> CallToolResult {
    let context = call.request_context;
    let shim = call.service;
    let asked = Progress::asked(&context.meta, context.peer);
    let here = Here {
        local_root: shim.local_root_arg(),
        progress_key: asked.as_ref().map(|_| progress::new_key()),
        exposed: shim.exposed(),
    };
    let outcome = match args::decode::<T::Args>(call.arguments.unwrap_or_default())
        .and_then(|args| Ok((T::deadline(&args), T::request(args, &here)?)))
    {
        Ok((deadline, req)) => {
            let followed = T::progress(&req);
            let run = shim.daemon.run::<T>(context_with_timeout(deadline), req);
            let run = unless_cancelled(run, context.ct);
            match followed {
                Some(Followed::Run { auth, key }) => {
                    let poll = progress::of_run(shim.daemon.clone(), auth, key);
                    progress::follow(run, asked, poll).await
                }
                Some(Followed::Clock(words)) => {
                    progress::follow(run, asked, progress::clock(words)).await
                }
                None => run.await,
            }
        }
        Err(e) => Err(e),
    };
    let outcome = outcome.map_err(|mut e| {
        // The daemon may read another ssh config than this server's environment names.
        if e.code == ErrorCode::ConnectionStartFailed
            && let Some(note) = shim.daemon.settings_note()
        {
            e.message = format!("{} ({note})", e.message);
        }
        e
    });
    answer::respond_trimmed(outcome, |answer| {
        answer.retain(|name, _| !T::NOT_IN_ANSWER.contains(&name.as_str()));
        T::shape(answer);
    })
}

/// Runs a daemon call until it answers or the MCP client cancels. Dropping the call on
/// cancellation makes tarpc cancel it in the daemon, whose run then kills the remote process
/// group (an operation that must finish runs `to_the_end` there).
async fn unless_cancelled<T>(
    call: impl std::future::Future<Output = Result<T, DaemonError>>,
    cancel: CancellationToken,
) -> Result<T, DaemonError> {
    tokio::select! {
        r = call => r,
        _ = cancel.cancelled() => Err(DaemonError::new(ErrorCode::InternalError, "cancelled")),
    }
}

/// The tool as `tools/list` shows it, before the server slims it as it does every tool.
fn tool<T: Described>() -> Tool {
    let mut tool = Tool::new(
        T::TOOL.name(),
        T::DESCRIPTION,
        schema_for_input::<T::Args>().expect("object schema"),
    );
    let output = match T::FAILURE {
        Failure::Call => schema_for_output::<Answer<T::Answer>>(),
        Failure::Copy => schema_for_output::<Answer<T::Answer, TransferError>>(),
    };
    let mut schema = answer::schema_describing(output, T::ANSWER_FIELDS);
    schema = answer::schema_without(schema, None, T::NOT_IN_ANSWER);
    for (part, fields) in T::NOT_IN_PARTS {
        schema = answer::schema_without(schema, Some(part), fields);
    }
    for (part, fields) in T::SOMETIMES_IN_PARTS {
        schema = answer::schema_optional(schema, part, fields);
    }
    tool.output_schema = Some(schema);
    let hints = T::HINTS;
    tool.annotations = Some(ToolAnnotations::from_raw(
        Some(T::TITLE.into()),
        Some(hints.read_only),
        Some(hints.destructive),
        Some(hints.idempotent),
        Some(hints.open_world),
    ));
    tool
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use sshmcp_proto::described::{Described, Followed, Here};
    use sshmcp_proto::service::tools;
    use sshmcp_proto::tool::Tool;
    use sshmcp_proto::transfer::DownloadArgs;

    /// Where a call comes from: a shim exposing every tool, with `progress_key` when the
    /// client asked for progress.
    fn here(progress_key: Option<&str>) -> Here {
        Here {
            local_root: None,
            progress_key: progress_key.map(String::from),
            exposed: Tool::all().collect(),
        }
    }

    /// `T`'s request for the arguments `args`, sent from `here`.
    fn request<T: Described>(args: serde_json::Value, here: &Here) -> T::Request {
        let args: T::Args = serde_json::from_value(args).unwrap();
        T::request(args, here).unwrap_or_else(|e| panic!("{}", e.message))
    }

    /// `T`'s deadline for the arguments `args`.
    fn deadline<T: Described>(args: serde_json::Value) -> Duration {
        T::deadline(&serde_json::from_value(args).unwrap())
    }

    fn session() -> serde_json::Value {
        json!({"session_id": "s", "session_key": "k"})
    }

    fn with(mut base: serde_json::Value, more: serde_json::Value) -> serde_json::Value {
        base.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        base
    }

    /// An exec follows the run filed under the progress key only when the client asked (a
    /// key was made); a command_status follows its handle only when it waits; a connect
    /// counts its seconds.
    #[test]
    fn a_call_follows_its_run_only_when_there_is_one_to_follow() {
        let exec = with(session(), json!({"command": "true"}));
        let req = request::<tools::Exec>(exec.clone(), &here(None));
        assert_eq!(<tools::Exec as Described>::progress(&req), None);
        let req = request::<tools::SudoExec>(exec.clone(), &here(Some("p1")));
        match <tools::SudoExec as Described>::progress(&req) {
            Some(Followed::Run { auth, key }) => {
                assert_eq!((auth.session_id.as_str(), key.as_str()), ("s", "p1"));
            }
            other => panic!("{other:?}"),
        }
        for (wait, follows) in [(None, false), (Some(0.0), false), (Some(0.5), true)] {
            let args = with(session(), json!({"handle_id": "h1", "wait_seconds": wait}));
            let req = request::<tools::CommandStatus>(args, &here(Some("p2")));
            let followed = <tools::CommandStatus as Described>::progress(&req);
            match followed {
                Some(Followed::Run { key, .. }) if follows => assert_eq!(key, "h1"),
                None if !follows => {}
                other => panic!("wait {wait:?}: {other:?}"),
            }
        }
        let req = request::<tools::Connect>(json!({"alias": "web"}), &here(None));
        let clock = <tools::Connect as Described>::progress(&req);
        assert!(matches!(clock, Some(Followed::Clock(_))), "{clock:?}");
    }

    /// An exec waits for its command's timeout (or its hand-off, when sooner) and 30 s more; a
    /// connect for twice its timeout, within 1..=3600 s, and 60 s more.
    #[test]
    fn deadlines_follow_the_waits_asked() {
        let secs = Duration::from_secs;
        let exec =
            |more| deadline::<tools::Exec>(with(session(), with(json!({"command": "x"}), more)));
        assert_eq!(exec(json!({})), secs(90));
        assert_eq!(exec(json!({"timeout": 10, "handoff_after": 5})), secs(35));
        assert_eq!(exec(json!({"timeout": 5, "handoff_after": 10})), secs(35));
        assert_eq!(exec(json!({"handoff_after": 20})), secs(50));
        let connect = |args| deadline::<tools::Connect>(args);
        assert_eq!(connect(json!({"alias": "web"})), secs(150));
        assert_eq!(
            connect(json!({"alias": "web", "connect_timeout": 5})),
            secs(70)
        );
        assert_eq!(
            connect(json!({"alias": "web", "connect_timeout": 0.5})),
            secs(62)
        );
        let longest = json!({"alias": "web", "connect_timeout": 100000});
        assert_eq!(connect(longest), secs(3600 * 2 + 60));
    }

    /// An exec's answer holds the hand-off's fields only after one, and sudo_exec's never
    /// holds the spool's, whatever values the daemon sent.
    #[test]
    fn exec_answers_keep_only_the_fields_of_their_run() {
        let stream = json!({"data": "a", "next_offset": 5, "spool_path": "/x",
                            "spool_truncated": true});
        let answer = |handed_off: serde_json::Value| {
            json!({"exit_code": null, "stdout": stream, "stderr": stream,
                   "handed_off": handed_off, "handle_id": "h", "pid": 7})
            .as_object()
            .unwrap()
            .clone()
        };
        let mut ran = answer(serde_json::Value::Null);
        <tools::Exec as Described>::shape(&mut ran);
        for gone in ["handed_off", "handle_id", "pid"] {
            assert!(!ran.contains_key(gone), "{gone}: {ran:?}");
        }
        assert_eq!(
            ran["stdout"],
            json!({"data": "a", "spool_path": "/x", "spool_truncated": true})
        );
        let mut handed = answer(json!(true));
        <tools::SudoExec as Described>::shape(&mut handed);
        assert_eq!(
            (&handed["handle_id"], &handed["pid"]),
            (&json!("h"), &json!(7))
        );
        assert_eq!(handed["stderr"], json!({"data": "a", "next_offset": 5}));
    }

    /// The shim's local root reaches the daemon in the request of a tool that takes a local
    /// path (the daemon's own root would otherwise stand in for it, unseen).
    #[test]
    fn a_request_carries_the_shims_local_root() {
        let args = DownloadArgs {
            session_id: "s".into(),
            session_key: "k".into(),
            remote_path: "/etc/hosts".into(),
            remote_path_encoding: None,
            local_path: "hosts".into(),
            overwrite: None,
        };
        let here = Here {
            local_root: Some("/srv/agent-root".into()),
            progress_key: None,
            exposed: std::sync::Arc::new([]),
        };
        let req = <tools::DownloadStart as Described>::request(args, &here).unwrap();
        assert_eq!(req.local_root.as_deref(), Some("/srv/agent-root"));
        assert_eq!(req.local_path, "hosts");
    }

    /// A connect names an alias, or a host and a user; any other mix is refused naming
    /// fields only.
    #[test]
    fn a_connect_takes_an_alias_or_a_host_and_a_user() {
        use sshmcp_proto::session::{ConnectArgs, ConnectTarget};
        let here = Here {
            local_root: None,
            progress_key: None,
            exposed: std::sync::Arc::new([]),
        };
        let connect = |args: serde_json::Value| {
            let args: ConnectArgs = serde_json::from_value(args).unwrap();
            <tools::Connect as Described>::request(args, &here)
        };
        let alias = connect(json!({"alias": "web", "connect_timeout": 5})).unwrap();
        assert_eq!(alias.target.display(), "web");
        assert_eq!(alias.connect_timeout, Some(5.0));
        let direct = connect(json!({"host": "h", "user": "u", "port": 2222})).unwrap();
        assert!(matches!(
            direct.target,
            ConnectTarget::Direct {
                port: Some(2222),
                ..
            }
        ));
        for (args, message) in [
            (json!({"host": "h"}), "missing required fields: user"),
            (json!({"user": "u"}), "missing required fields: host"),
            (json!({}), "give either alias, or host and user"),
            (
                json!({"alias": "web", "port": 22}),
                "alias cannot be combined with host, user or port",
            ),
            (
                json!({"alias": "web", "host": "h", "user": "u"}),
                "alias cannot be combined with host, user or port",
            ),
        ] {
            let refused = connect(args.clone()).unwrap_err();
            assert_eq!(
                refused.code,
                sshmcp_proto::ErrorCode::InvalidArguments,
                "{args}"
            );
            assert_eq!(refused.message, message, "{args}");
        }
    }

    /// A command_status report as the agent gets it: shaped, then made lean.
    fn status_answer(report: serde_json::Value) -> serde_json::Value {
        let mut report = report.as_object().unwrap().clone();
        <tools::CommandStatus as Described>::shape(&mut report);
        crate::lean::answer(&mut report);
        serde_json::Value::Object(report)
    }

    fn chunk(data: &str, encoding: &str, truncated: bool) -> serde_json::Value {
        json!({"data": data, "encoding": encoding, "offset": 0, "next_offset": 3,
               "total_bytes": 3, "truncated": truncated})
    }

    #[test]
    fn only_an_ended_whole_utf8_stream_becomes_text() {
        let ended = |stdout| json!({"status": "completed", "exit_code": 0, "stdout": stdout});
        assert_eq!(
            status_answer(ended(chunk("abc", "utf-8", false)))["stdout"],
            "abc"
        );
        // Binary, or cut at the spool cap: an object with its offsets, as published.
        for stdout in [chunk("/w==", "base64", false), chunk("abc", "utf-8", true)] {
            let answer = status_answer(ended(stdout));
            assert_eq!(answer["stdout"]["next_offset"], 3, "{answer}");
        }
        let running = json!({"status": "running", "exit_code": null,
                             "stdout": chunk("abc", "utf-8", false)});
        assert_eq!(status_answer(running)["stdout"]["next_offset"], 3);
        // A running stream with no byte yet is left out, unless its spool stopped keeping it.
        for (truncated, kept) in [(false, false), (true, true)] {
            let nothing = json!({"data": "", "encoding": "utf-8", "offset": 0,
                                 "next_offset": 0, "total_bytes": 0, "truncated": truncated});
            let running = json!({"status": "running", "exit_code": null, "stdout": nothing});
            let answer = status_answer(running);
            assert_eq!(answer.get("stdout").is_some(), kept, "{answer}");
        }
    }
}
