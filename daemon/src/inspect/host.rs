//! `host_info`: what a host tells of itself (system, processors, memory, load, uptime, the
//! space of the file systems holding some paths), from one POSIX program that asks only
//! what the host has: `/etc/os-release` and `/proc` on Linux, `sysctl` and `sw_vers` on macOS
//! and the BSDs, `uname`, `df -Pk`. A fact no source gives is left out, never guessed.

use sshmcp_proto::DaemonError;
use sshmcp_proto::inspect::{FileSystemSpace, HostInfo, HostInfoRequest, MAX_HOST_INFO_PATHS};

use super::{TIMEOUT, path_bytes, run_program};
use crate::session::Session;

/// The program. Every fact is one line, `NAME VALUE`; a file system is a `fs PATH` line and,
/// when `df` could tell, its `df` line. The paths come on stdin, one per line (none: home and
/// `/`). Its stderr goes nowhere: a source the host lacks only leaves its fact out.
const SCRIPT: &str = r#"exec 2>/dev/null
export LC_ALL=C
echo ok
_say() { printf '%s %s\n' "$1" "$2"; }
_os=
if [ -r /etc/os-release ]; then
  while IFS= read -r _l || [ -n "$_l" ]; do
    case $_l in PRETTY_NAME=*) _os=${_l#PRETTY_NAME=} ;; esac
  done </etc/os-release
  case $_os in \"*\") _os=${_os#\"}; _os=${_os%\"} ;; \'*\') _os=${_os#\'}; _os=${_os%\'} ;; esac
fi
_k=$(uname -sr)
if [ -z "$_os" ] && command -v sw_vers >/dev/null; then
  _os="$(sw_vers -productName) $(sw_vers -productVersion)"
fi
[ -n "$_os" ] || _os=$_k
[ -n "$_os" ] && _say os "$_os"
[ -n "$_k" ] && _say kernel "$_k"
_say arch "$(uname -m)"
_say cpus "$(getconf _NPROCESSORS_ONLN || nproc || sysctl -n hw.ncpu)"
if [ -r /proc/meminfo ]; then
  while read -r _n _v _r; do
    case $_n in
      MemTotal:) _say mem_total_kib "$_v" ;;
      MemAvailable:) _say mem_available_kib "$_v" ;;
    esac
  done </proc/meminfo
else
  _say mem_total "$(sysctl -n hw.memsize || sysctl -n hw.physmem)"
fi
if [ -r /proc/loadavg ]; then
  read -r _1 _5 _15 _r </proc/loadavg && _say load "$_1 $_5 $_15"
else
  _say load "$(sysctl -n vm.loadavg | tr -d '{}')"
fi
if [ -r /proc/uptime ]; then
  read -r _u _r </proc/uptime && _say uptime "$_u"
else
  _b=$(sysctl -n kern.boottime)
  _b=${_b#*sec = }
  _b=${_b%%,*}
  case $_b in '' | *[!0-9]*) ;; *) _say uptime "$(($(date +%s) - _b))" ;; esac
fi
_fs() {
  _say fs "$1"
  df -Pk -- "$2" | { read -r _h; read -r _d && _say df "$_d"; }
}
_any=
while IFS= read -r _p; do
  _any=1
  _fs "$_p" "$_p"
done
if [ -z "$_any" ]; then
  _fs '~' "$HOME"
  _fs / /
fi
exit 0
"#;

pub async fn host_info(session: &Session, req: HostInfoRequest) -> Result<HostInfo, DaemonError> {
    let stdin = stdin_of(&req.paths)?;
    let (_, out) = run_program(
        session,
        SCRIPT.to_string(),
        stdin,
        b"host_info",
        64 * 1024,
        TIMEOUT,
        false,
    )
    .await?;
    Ok(parse(&String::from_utf8_lossy(&out)))
}

/// The paths, a line each: at most [`MAX_HOST_INFO_PATHS`], each a path the other tools
/// would take, and none with a newline (which would split it).
fn stdin_of(paths: &[String]) -> Result<Vec<u8>, DaemonError> {
    if paths.len() > MAX_HOST_INFO_PATHS {
        return Err(DaemonError::invalid_arguments(format!(
            "`paths` holds {} paths; host_info measures at most {MAX_HOST_INFO_PATHS}",
            paths.len()
        )));
    }
    let mut stdin = Vec::new();
    for path in paths {
        let bytes = path_bytes(&sshmcp_proto::inspect::RemotePath {
            path: path.clone(),
            encoding: sshmcp_proto::exec::Encoding::Utf8,
        })?;
        if bytes.contains(&b'\n') {
            return Err(DaemonError::invalid_arguments(
                "`paths` holds a path with a newline, which host_info cannot measure",
            ));
        }
        stdin.extend_from_slice(&bytes);
        stdin.push(b'\n');
    }
    Ok(stdin)
}

/// The facts of the program's lines; a line that does not read as its fact is left out.
fn parse(out: &str) -> HostInfo {
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
    let text = |value: &str| Some(value.trim().to_string()).filter(|v| !v.is_empty());
    let kib = |value: &str| value.trim().parse::<u64>().ok().map(|k| k * 1024);
    for line in out.lines() {
        let (name, value) = line.split_once(' ').unwrap_or((line, ""));
        match name {
            "os" => info.os = text(value),
            "kernel" => info.kernel = text(value),
            "arch" => info.arch = text(value),
            "cpus" => info.cpus = value.trim().parse().ok().filter(|n| *n > 0),
            "mem_total_kib" => info.memory_total = kib(value),
            "mem_available_kib" => info.memory_available = kib(value),
            "mem_total" => info.memory_total = value.trim().parse().ok(),
            "load" => info.load = load(value),
            "uptime" => {
                info.uptime = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|u: &f64| u.is_finite() && *u >= 0.0)
            }
            "fs" => info.filesystems.push(FileSystemSpace {
                path: value.to_string(),
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
    info
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

/// A `df -Pk` line: `FILESYSTEM BLOCKS USED AVAILABLE CAPACITY% MOUNT`, where the file
/// system's name and the mount point may hold spaces: the capacity, the first word after
/// three numbers that ends in `%`, tells where the numbers are. Sizes in bytes.
fn df_line(line: &str) -> Option<(u64, u64, String)> {
    let words: Vec<(usize, &str)> = line
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - line.as_ptr() as usize, w))
        .collect();
    let number = |w: &str| w.parse::<u64>().ok();
    for i in 4..words.len() {
        let (at, word) = words[i];
        let numbers = (
            number(words[i - 3].1),
            number(words[i - 2].1),
            number(words[i - 1].1),
        );
        if let (true, (Some(total), Some(_used), Some(free))) = (word.ends_with('%'), numbers) {
            let mount = line[at + word.len()..].trim().to_string();
            if mount.is_empty() {
                return None;
            }
            return Some((total * 1024, free * 1024, mount));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_read_and_a_line_that_does_not_read_is_left_out() {
        let out = "os Debian GNU/Linux 12 (bookworm)\nkernel Linux 6.1.0\narch x86_64\ncpus 2\n\
                   mem_total_kib 2048\nmem_available_kib 1024\nload 0.5 0.25 0.10\n\
                   uptime 12.5\nfs ~\ndf /dev/sda1 100 40 60 40% /home/a b\nfs /gone\n\
                   cpus \nload 1 2\n";
        let info = parse(out);
        assert_eq!(info.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
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
            ("~", Some("/home/a b"))
        );
        assert_eq!(
            (home.total_bytes, home.free_bytes),
            (Some(102_400), Some(61_440))
        );
        assert_eq!(info.filesystems[1].total_bytes, None);
    }

    #[test]
    fn df_lines_with_spaces_in_names_and_mounts() {
        assert_eq!(
            df_line("map auto_home 0 0 0 100% /System/Volumes/Data/home"),
            Some((0, 0, "/System/Volumes/Data/home".into()))
        );
        assert_eq!(df_line("/dev/sda1 100 40 60 40%"), None);
        assert_eq!(df_line("nonsense"), None);
    }

    #[test]
    fn paths_are_bounded_and_never_split() {
        let paths = |n: usize| vec!["/srv".to_string(); n];
        assert_eq!(
            stdin_of(&paths(MAX_HOST_INFO_PATHS)).unwrap().len(),
            5 * MAX_HOST_INFO_PATHS
        );
        let e = stdin_of(&paths(MAX_HOST_INFO_PATHS + 1)).unwrap_err();
        assert!(e.message.contains("at most 16"), "{}", e.message);
        assert!(stdin_of(&["a\nb".into()]).is_err());
        assert!(stdin_of(&[String::new()]).is_err());
    }

    /// The program under every shell a host may have as `/bin/sh` (dash, bash, a strict POSIX
    /// shell, and BusyBox with only its own applets on PATH, as on Alpine), on this machine:
    /// each answers every fact Linux gives.
    #[test]
    fn the_program_runs_under_every_posix_shell() {
        let applets = tempfile::tempdir().unwrap();
        let listed = std::process::Command::new("busybox")
            .arg("--list")
            .output()
            .expect("busybox (scripts/test.sh installs busybox-static)");
        for applet in String::from_utf8_lossy(&listed.stdout).lines() {
            std::os::unix::fs::symlink("/bin/busybox", applets.path().join(applet)).unwrap();
        }
        let busybox_only = applets.path().display().to_string();
        let busybox_sh = applets.path().join("sh").display().to_string();
        let system = std::env::var("PATH").unwrap_or_default();
        let shells: [(&[&str], &str); 4] = [
            (&["dash"], &system),
            (&["bash", "--posix"], &system),
            (&["posh"], &system),
            (&[busybox_sh.as_str()], &busybox_only),
        ];
        for (shell, path) in shells {
            let mut child = std::process::Command::new(shell[0])
                .args(&shell[1..])
                .args(["-c", SCRIPT])
                .env("PATH", path)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{shell:?} (scripts/test.sh installs it): {e}"));
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"/tmp\n/no/such/dir\n")
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{shell:?}");
            let out = String::from_utf8(out.stdout).unwrap();
            assert!(out.starts_with("ok\n"), "{shell:?}: {out}");
            let info = parse(&out);
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
            let [tmp, gone] = &info.filesystems[..] else {
                panic!("{shell:?}: {out}");
            };
            assert_eq!(tmp.path, "/tmp");
            let space = (tmp.total_bytes.unwrap(), tmp.free_bytes.unwrap());
            assert!(space.0 >= space.1, "{shell:?}: {out}");
            assert!(tmp.mount.as_deref().is_some_and(|m| m.starts_with('/')));
            assert_eq!(
                (gone.path.as_str(), gone.total_bytes),
                ("/no/such/dir", None)
            );
        }
    }
}
