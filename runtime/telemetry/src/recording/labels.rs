//! A run's place in a job of many ranks and nodes, as labels: from the
//! environment the launchers set (torchrun, SLURM) and from `--label`.

use std::collections::BTreeMap;

/// The environment variables that say where a process sits in a
/// distributed job, and the label each becomes. `GROUP_RANK` (torchrun's
/// name for a node's rank) counts only where `NODE_RANK` is not set.
pub const JOB_ENV: [(&str, &str); 8] = [
    ("RANK", "rank"),
    ("LOCAL_RANK", "local_rank"),
    ("WORLD_SIZE", "world_size"),
    ("NODE_RANK", "node_rank"),
    ("GROUP_RANK", "node_rank"),
    ("SLURM_PROCID", "slurm_procid"),
    ("SLURM_JOB_ID", "slurm_job_id"),
    ("TORCHELASTIC_RUN_ID", "torchelastic_run_id"),
];

/// Label names flatline's own series carry, and those Prometheus sets from
/// its scrape configuration: a `--label` cannot take them.
pub const RESERVED: [&str; 9] = [
    "channel", "unit", "kind", "host", "pid", "role", "verdict", "job", "instance",
];

/// The job labels in an environment (`KEY=VALUE` pairs).
pub fn from_env<K: AsRef<str>, V: AsRef<str>>(
    vars: impl IntoIterator<Item = (K, V)>,
) -> BTreeMap<String, String> {
    let vars: BTreeMap<String, String> = vars
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
        .collect();
    let mut out = BTreeMap::new();
    for (var, label) in JOB_ENV {
        if let Some(v) = vars.get(var).filter(|v| !v.is_empty()) {
            out.entry(label.to_owned()).or_insert_with(|| v.clone());
        }
    }
    out
}

/// The job labels in a running process's environment, from
/// `/proc/<pid>/environ` (its environment as it started). Another user's
/// process cannot be read without privileges: an error, said by the caller.
pub fn of_process(pid: u32) -> std::io::Result<BTreeMap<String, String>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(from_env(raw.split(|&b| b == 0).filter_map(|kv| {
        let kv = std::str::from_utf8(kv).ok()?;
        kv.split_once('=')
    })))
}

/// Checks a label given by hand, `KEY=VALUE`: a Prometheus label name not
/// taken by flatline or Prometheus, and a value.
pub fn parse(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, e.g. rank=3; got {s:?}"))?;
    let mut chars = k.chars();
    let name_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with("__");
    if !name_ok {
        return Err(format!(
            "{k:?} is not a label name: letters, digits and _, not starting with a digit or __"
        ));
    }
    if RESERVED.contains(&k) {
        return Err(format!(
            "{k:?} is taken (flatline's series carry channel, unit, kind, host, pid, role and \
             verdict; Prometheus sets job and instance): choose another name, e.g. run"
        ));
    }
    if v.is_empty() {
        return Err(format!("label {k} has no value"));
    }
    Ok((k.to_owned(), v.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launchers_environment_gives_the_ranks_and_nothing_else() {
        let env = [
            ("RANK", "5"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "16"),
            ("GROUP_RANK", "2"),
            ("SLURM_JOB_ID", "81234"),
            ("HOME", "/root"),
            ("SLURM_PROCID", ""),
        ];
        let got = from_env(env);
        let want: BTreeMap<String, String> = [
            ("rank", "5"),
            ("local_rank", "1"),
            ("world_size", "16"),
            ("node_rank", "2"),
            ("slurm_job_id", "81234"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(got, want);
        // NODE_RANK wins over GROUP_RANK whatever their order.
        let both = from_env([("GROUP_RANK", "2"), ("NODE_RANK", "7")]);
        assert_eq!(both["node_rank"], "7");
    }

    #[test]
    fn a_process_s_environment_is_read_from_proc() {
        // A child started with a launcher's variables and nothing else: its
        // labels, read from /proc/<pid>/environ, are those, and no more.
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .env_clear()
            .env("RANK", "3")
            .env("WORLD_SIZE", "4")
            .env("HOME", "/nowhere")
            .spawn()
            .unwrap();
        // Its environment appears once its exec has set it up, which can be
        // just after spawn returns (a vfork'd parent resumes as the exec
        // begins): wait for it (the deadline only ends a hang).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let got = loop {
            let got = of_process(child.id());
            if got.as_ref().is_ok_and(|g| !g.is_empty()) || std::time::Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = child.kill();
        let _ = child.wait();
        let want: BTreeMap<String, String> = [("rank", "3"), ("world_size", "4")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(got.unwrap(), want);
    }

    #[test]
    fn labels_by_hand_are_checked() {
        assert_eq!(parse("run=llama-7b"), Ok(("run".into(), "llama-7b".into())));
        assert_eq!(parse("rank=3"), Ok(("rank".into(), "3".into())));
        for bad in ["rank", "3x=1", "a-b=1", "__x=1", "host=a", "job=x", "rank="] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
