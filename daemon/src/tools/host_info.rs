//! `host_info`: what a host tells of itself (system, processors, memory, load, uptime, the
//! space of the file systems holding some paths), from one POSIX program that asks only
//! what the host has: `/etc/os-release` and `/proc` on Linux, `sysctl` and `sw_vers` on macOS
//! and the BSDs, `uname`, `df -Pk`. A fact no source gives is left out, never guessed.

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::inspect::{FileSystemSpace, HostInfo, HostInfoRequest, MAX_HOST_INFO_PATHS};
use sshmcp_proto::service::tools;

use crate::inspect::MAX_PATH_BYTES;
use crate::operation::Operation;
use crate::remote::status::{TIMEOUT, run_program};
use crate::session::{Registry, Session};

/// The program. Every fact is one line, `NAME VALUE`; a file system is a `fs` line (naming
/// the path only for home, which the caller did not give) and, when `df` could tell, its
/// `df` line. The paths come on stdin, one per line, each byte as a
/// `\0ooo` escape that `printf %b` turns back (so a newline or any other byte is data); with
/// none, home and `/`. Each `df` gets 5 s where the host has `timeout` (a hung network mount
/// then loses only its own entry). Its stderr goes nowhere: a source the host lacks only
/// leaves its fact out. Tools run through `command`: a login environment's exported
/// functions cannot stand in for them.
const SCRIPT: &str = include_str!("host_info.sh");

pub async fn host_info(session: &Session, req: HostInfoRequest) -> Result<HostInfo, DaemonError> {
    let stdin = stdin_of(&req.paths)?;
    // Each path comes back twice (its `fs` line and the mount of its `df` line).
    let asked: usize = req.paths.iter().map(String::len).sum();
    let cap = 16 * 1024 + 3 * asked as u64;
    let (_, out) = run_program(
        &session.host,
        SCRIPT.to_string(),
        stdin,
        b"host_info",
        cap,
        TIMEOUT,
        false,
    )
    .await?;
    Ok(parse(&String::from_utf8_lossy(&out), &req.paths))
}

/// The paths, a line each, every byte a `\0ooo` escape: at most [`MAX_HOST_INFO_PATHS`], none
/// empty, none with a NUL, none longer than a host's system calls take.
fn stdin_of(paths: &[String]) -> Result<Vec<u8>, DaemonError> {
    let invalid = |why: String| Err(DaemonError::invalid_arguments(format!("`paths` {why}")));
    if paths.len() > MAX_HOST_INFO_PATHS {
        return invalid(format!(
            "holds {} paths; host_info measures at most {MAX_HOST_INFO_PATHS}",
            paths.len()
        ));
    }
    let mut stdin = String::new();
    for path in paths {
        if path.is_empty() || path.contains('\0') {
            return invalid("holds an empty path or one with a NUL byte".into());
        }
        if path.starts_with('~') {
            return invalid(crate::inspect::NO_TILDE.into());
        }
        if path.len() > MAX_PATH_BYTES {
            return invalid(format!(
                "holds a path longer than {MAX_PATH_BYTES} bytes, the most a host's system calls take"
            ));
        }
        for byte in path.bytes() {
            stdin.push_str(&format!("\\0{byte:03o}"));
        }
        stdin.push('\n');
    }
    Ok(stdin.into_bytes())
}

/// The facts of the program's lines; a line that does not read as its fact is left out. The
/// file systems are those of `asked`, in order (a path is not echoed: it may hold a newline),
/// or, when none was asked, of the paths their lines name.
fn parse(out: &str, asked: &[String]) -> HostInfo {
    let mut info = HostInfo {
        os: None,
        kernel: None,
        arch: None,
        cpus: None,
        memory_total: None,
        memory_available: None,
        load: None,
        uptime: None,
        filesystems: Vec::new(),
    };
    let mut os_release = OsRelease::default();
    let text = |value: &str| Some(value.trim().to_string()).filter(|v| !v.is_empty());
    let kib = |value: &str| {
        value
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|k| k.checked_mul(1024))
    };
    for line in out.lines() {
        let (name, value) = line.split_once(' ').unwrap_or((line, ""));
        match name {
            "osr" => os_release.read(value),
            "os" => info.os = text(value),
            "kernel" => info.kernel = text(value),
            "arch" => info.arch = text(value),
            "cpus" => info.cpus = value.trim().parse().ok().filter(|n| *n > 0),
            "mem_total_kib" => info.memory_total = kib(value),
            "mem_available_kib" => info.memory_available = kib(value),
            "mem_total" => info.memory_total = value.trim().parse().ok().filter(|m| *m > 0),
            "load" => info.load = load(value),
            "uptime" => {
                info.uptime = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|u: &f64| u.is_finite() && *u >= 0.0)
            }
            "fs" => info.filesystems.push(FileSystemSpace {
                path: match asked.get(info.filesystems.len()) {
                    Some(path) => path.clone(),
                    None => value.to_string(),
                },
                mount: None,
                total_bytes: None,
                free_bytes: None,
            }),
            "df" => {
                if let (Some(fs), Some((total, free, mount))) =
                    (info.filesystems.last_mut(), df_line(value))
                {
                    fs.total_bytes = Some(total);
                    fs.free_bytes = Some(free);
                    fs.mount = Some(mount);
                }
            }
            _ => {}
        }
    }
    // os-release names the system best; macOS's product comes next; the kernel last.
    info.os = os_release
        .name()
        .or(info.os)
        .or_else(|| info.kernel.clone());
    info
}

/// The fields of `/etc/os-release` that name the system.
#[derive(Default)]
struct OsRelease {
    pretty_name: Option<String>,
    name: Option<String>,
    version_id: Option<String>,
}

impl OsRelease {
    /// One `KEY=value` line, the value unquoted as os-release(5) writes it: in double or
    /// single quotes, `\` escaping `"`, `\`, `$` and `` ` `` in double quotes.
    fn read(&mut self, line: &str) {
        let Some((key, raw)) = line.split_once('=') else {
            return;
        };
        let value = unquote(raw.trim());
        let value = Some(value).filter(|v| !v.is_empty());
        match key {
            "PRETTY_NAME" => self.pretty_name = value,
            "NAME" => self.name = value,
            "VERSION_ID" => self.version_id = value,
            _ => {}
        }
    }

    fn name(self) -> Option<String> {
        self.pretty_name.or(match (self.name, self.version_id) {
            (Some(name), Some(version)) => Some(format!("{name} {version}")),
            (name, _) => name,
        })
    }
}

fn unquote(raw: &str) -> String {
    if let Some(inner) = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        return inner.to_string();
    }
    let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return raw.to_string();
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('"' | '\\' | '$' | '`'))) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Three load averages, or none.
fn load(value: &str) -> Option<Vec<f64>> {
    let averages: Vec<f64> = value
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (averages.len() == 3 && averages.iter().all(|a| a.is_finite() && *a >= 0.0)).then_some(averages)
}

/// A `df -Pk` line: `FILESYSTEM BLOCKS USED AVAILABLE CAPACITY MOUNT`, where the file
/// system's name and the mount point may hold spaces: the capacity (`40%`, or `-` for a file
/// system of no size), the first word after three numbers, tells where the numbers are. A
/// full BSD file system's available space is negative (root's reserve in use): none is
/// left. Sizes in bytes.
fn df_line(line: &str) -> Option<(u64, u64, String)> {
    let words: Vec<(usize, &str)> = line
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - line.as_ptr() as usize, w))
        .collect();
    let count = |w: &str| w.parse::<u64>().ok();
    for i in 4..words.len() {
        let (at, word) = words[i];
        let capacity = word == "-" || word.ends_with('%');
        let (total, used, free) = (
            count(words[i - 3].1),
            count(words[i - 2].1),
            words[i - 1].1.parse::<i64>().ok(),
        );
        if let (true, Some(total), Some(_), Some(free)) = (capacity, total, used, free) {
            let mount = line[at + word.len()..].trim().to_string();
            let bytes = |kib: u64| kib.checked_mul(1024);
            return Some((bytes(total)?, bytes(free.max(0) as u64)?, mount))
                .filter(|f| !f.2.is_empty());
        }
    }
    None
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::inspect::HostInfo {}

impl Operation for tools::HostInfo {
    fn summary(req: &HostInfoRequest) -> String {
        match req.paths.as_slice() {
            [] => "~ /".to_string(),
            paths => paths.join(" "),
        }
    }

    async fn run(
        req: HostInfoRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<HostInfo, DaemonError> {
        host_info(&session, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_read_and_a_line_that_does_not_read_is_left_out() {
        let out = "osr NAME=\"Debian GNU/Linux\"\nosr VERSION_ID=\"12\"\nkernel Linux 6.1.0\n\
                   arch x86_64\ncpus 2\nmem_total_kib 2048\nmem_available_kib 1024\n\
                   load 0.5 0.25 0.10\nuptime 12.5\nfs /home/a\n\
                   df /dev/sda1 100 40 60 40% /home/a b\nfs /gone\ncpus \nload 1 2\n";
        let info = parse(out, &[]);
        assert_eq!(info.os.as_deref(), Some("Debian GNU/Linux 12"));
        assert_eq!(info.kernel.as_deref(), Some("Linux 6.1.0"));
        assert_eq!(info.cpus, None, "a later empty line leaves it out");
        assert_eq!(
            (info.memory_total, info.memory_available),
            (Some(2048 * 1024), Some(1024 * 1024))
        );
        assert_eq!(info.load, None, "two averages are no load");
        assert_eq!(info.uptime, Some(12.5));
        assert_eq!(info.filesystems.len(), 2);
        let home = &info.filesystems[0];
        assert_eq!(
            (home.path.as_str(), home.mount.as_deref()),
            ("/home/a", Some("/home/a b"))
        );
        assert_eq!(
            (home.total_bytes, home.free_bytes),
            (Some(102_400), Some(61_440))
        );
        assert_eq!(info.filesystems[1].total_bytes, None);
        // A size past what a byte count holds is no fact.
        assert_eq!(
            parse("mem_total_kib 18446744073709551615\n", &[]).memory_total,
            None
        );
    }

    #[test]
    fn the_system_is_named_by_os_release_then_the_product_then_the_kernel() {
        let named = |out: &str| parse(out, &[]).os;
        let pretty = "osr PRETTY_NAME=\"Alpine \\\"edge\\\" \\$x\"\nos macOS 15\nkernel Linux 6\n";
        assert_eq!(named(pretty).as_deref(), Some("Alpine \"edge\" $x"));
        assert_eq!(
            named("osr NAME='Void'\nkernel Linux 6\n").as_deref(),
            Some("Void")
        );
        assert_eq!(
            named("os macOS 15.1\nkernel Darwin 24.1.0\n").as_deref(),
            Some("macOS 15.1")
        );
        assert_eq!(
            named("kernel FreeBSD 14.1-RELEASE\n").as_deref(),
            Some("FreeBSD 14.1-RELEASE")
        );
    }

    #[test]
    fn df_lines_with_spaces_a_full_bsd_disk_and_no_size() {
        assert_eq!(
            df_line("map auto_home 0 0 0 100% /System/Volumes/Data/home"),
            Some((0, 0, "/System/Volumes/Data/home".into()))
        );
        assert_eq!(
            df_line("/dev/ada0p2 1000 1050 -50 105% /"),
            Some((1_024_000, 0, "/".into()))
        );
        assert_eq!(df_line("proc 0 0 0 - /proc"), Some((0, 0, "/proc".into())));
        assert_eq!(df_line("/dev/sda1 100 40 60 40%"), None);
        assert_eq!(df_line("nonsense"), None);
    }

    #[test]
    fn paths_are_bounded_and_every_byte_is_data() {
        let paths = |n: usize| vec!["/srv".to_string(); n];
        assert_eq!(
            stdin_of(&paths(MAX_HOST_INFO_PATHS)).unwrap().len(),
            21 * MAX_HOST_INFO_PATHS
        );
        let e = stdin_of(&paths(MAX_HOST_INFO_PATHS + 1)).unwrap_err();
        assert!(
            e.message.contains("`paths`") && e.message.contains("at most 16"),
            "{}",
            e.message
        );
        assert_eq!(stdin_of(&["a\n'".into()]).unwrap(), b"\\0141\\0012\\0047\n");
        assert!(stdin_of(&[String::new()]).is_err());
        assert!(stdin_of(&["a\0b".into()]).is_err());
        assert!(stdin_of(&["~/data".into()]).is_err());
        assert!(stdin_of(&["./~".into()]).is_ok());
        assert!(stdin_of(&["a".repeat(MAX_PATH_BYTES)]).is_ok());
        assert!(stdin_of(&["a".repeat(MAX_PATH_BYTES + 1)]).is_err());
    }

    /// Runs the program under `shell` with `path` as PATH and `paths` on stdin.
    #[cfg(target_os = "linux")]
    fn run_under(shell: &[String], path: &str, program: &str, paths: &[String]) -> String {
        let home = tempfile::tempdir().unwrap();
        let stdin = stdin_of(paths).unwrap();
        let out = crate::programs::run_under(shell, path, home.path(), program, &stdin);
        assert!(out.starts_with("ok\n"), "{shell:?}: {out}");
        out
    }

    /// The program under every shell a host may have as `/bin/sh` (dash, bash, a strict POSIX
    /// shell, and BusyBox with only its own applets on PATH, as on Alpine), on this machine:
    /// each answers every fact Linux gives, and a path with a newline and a quote is measured.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_program_runs_under_every_posix_shell() {
        let odd = tempfile::tempdir().unwrap();
        let odd = odd.path().join("a\nb 'c'");
        std::fs::create_dir(&odd).unwrap();
        let odd = odd.display().to_string();
        for (shell, path) in crate::programs::Shells::new().each() {
            let paths = [odd.clone(), "/no/such/dir".into()];
            let out = run_under(&shell, &path, SCRIPT, &paths);
            let info = parse(&out, &paths);
            let linux = info
                .kernel
                .as_deref()
                .is_some_and(|k| k.starts_with("Linux"));
            assert!(info.os.is_some() && linux, "{shell:?}: {out}");
            let cpus = info.cpus.is_some_and(|n| n >= 1);
            assert!(info.arch.is_some() && cpus, "{shell:?}: {out}");
            let (total, available) = (info.memory_total.unwrap(), info.memory_available.unwrap());
            assert!(total >= available && available > 0, "{shell:?}: {out}");
            assert_eq!(
                info.load.as_ref().map(Vec::len),
                Some(3),
                "{shell:?}: {out}"
            );
            assert!(info.uptime.is_some_and(|u| u > 0.0), "{shell:?}: {out}");
            let [measured, gone] = &info.filesystems[..] else {
                panic!("{shell:?}: {out}");
            };
            assert_eq!(measured.path, odd, "{shell:?}");
            let space = (measured.total_bytes.unwrap(), measured.free_bytes.unwrap());
            assert!(space.0 >= space.1, "{shell:?}: {out}");
            assert!(
                measured
                    .mount
                    .as_deref()
                    .is_some_and(|m| m.starts_with('/'))
            );
            assert_eq!(
                (gone.path.as_str(), gone.total_bytes),
                ("/no/such/dir", None)
            );
            // Asked nothing, it measures home and `/`.
            let out = run_under(&shell, &path, SCRIPT, &[]);
            let paths: Vec<String> = parse(&out, &[])
                .filesystems
                .into_iter()
                .map(|f| f.path)
                .collect();
            assert_eq!(paths.len(), 2, "{shell:?}: {out}");
            assert_eq!(paths[1], "/", "{shell:?}: {out}");
        }
    }

    /// The branches of macOS and the BSDs, which have no `/proc` and no os-release: the
    /// program with those files renamed away, and `sysctl` and `sw_vers` answering as macOS's
    /// do.
    #[cfg(target_os = "linux")]
    #[test]
    fn without_proc_the_program_asks_sysctl_as_on_macos() {
        let fakes = tempfile::tempdir().unwrap();
        let fake = |name: &str, body: &str| {
            let path = fakes.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        fake(
            "sysctl",
            "case $2 in hw.ncpu) echo 8 ;; hw.memsize) echo 17179869184 ;; \
             vm.loadavg) echo '{ 1.50 1.25 1.00 }' ;; \
             kern.boottime) echo \"{ sec = $(($(date +%s) - 3600)), usec = 5 } Thu Dec  5\" ;; \
             *) exit 1 ;; esac",
        );
        fake(
            "sw_vers",
            "case $1 in -productName) echo macOS ;; -productVersion) echo 15.1 ;; esac",
        );
        fake("getconf", "exit 1");
        fake("nproc", "exit 1");
        let path = format!(
            "{}:{}",
            fakes.path().display(),
            std::env::var("PATH").unwrap()
        );
        let program = SCRIPT
            .replace("/proc/", "/nonexistent/")
            .replace("/etc/os-release /usr/lib/os-release", "/nonexistent");
        let info = parse(&run_under(&["dash".to_string()], &path, &program, &[]), &[]);
        assert_eq!(info.os.as_deref(), Some("macOS 15.1"));
        assert_eq!(info.cpus, Some(8));
        assert_eq!(info.memory_total, Some(17_179_869_184));
        assert_eq!(
            info.memory_available, None,
            "macOS says no such figure: left out"
        );
        assert_eq!(info.load, Some(vec![1.5, 1.25, 1.0]));
        let uptime = info.uptime.unwrap();
        assert!((3600.0..3660.0).contains(&uptime), "{uptime}");
    }
}
