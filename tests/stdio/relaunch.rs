//! A relaunch on the same SQLite file, and a sealed file.

use super::*;

#[tokio::test]
async fn a_relaunch_on_the_same_sqlite_file_finds_and_resumes_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let mut first = Server::start(&store);
    let created = first
        .call26(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "kept.txt"}}),
        )
        .await;
    let task = created["taskId"].as_str().unwrap().to_owned();
    first.listen(&[&task]).await;
    let asked = first.until(&task, "input_required").await;
    first.close_and_wait(Duration::from_secs(10)).await;

    let mut second = Server::start(&store);
    let again = second.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(again["status"], "input_required", "{again}");
    assert_eq!(again["inputRequests"], asked["inputRequests"]);
    let listen = second.listen(&[&task]).await;
    second.confirm(&task, &again).await;
    second.push(&task, "completed").await;
    second.response(listen).await;
    let done = second.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted kept.txt.");
    second.close_and_wait(Duration::from_secs(10)).await;
}

/// `progress_job` (issue 19) on a SQLite file sealed with
/// `--seal-key-file`: the handler's "step k of n" messages come in order
/// (the first with the creating answer), the task completes, and the
/// database files hold none of its argument.
#[cfg(all(feature = "seal", feature = "sqlite"))]
#[tokio::test]
async fn progress_job_says_its_step_and_a_sealed_file_keeps_its_argument_secret() {
    const SECRET: &str = "stdio-secret-2b7e15";
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(
        &keys,
        format!("old-1:{}\nnew-2:{}\n", "ab".repeat(32), "cd".repeat(32)),
    )
    .unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let store = format!("sqlite:{}", db.join("tasks.db").display());
    let mut s = Server::start_with(&["--store", &store, "--seal-key-file", keys.to_str().unwrap()]);
    let created = s
        .call26(
            "tools/call",
            json!({"name": "progress_job", "arguments": {"steps": 4, "note": SECRET}}),
        )
        .await;
    assert_eq!(created["statusMessage"], "step 1 of 4", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let listen = s.listen(&[&task]).await;
    let mut steps = Vec::new();
    loop {
        let push = s
            .expect("a push", |m| {
                m["method"] == "notifications/tasks" && m["params"]["taskId"] == task.as_str()
            })
            .await;
        if push["params"]["status"] == "completed" {
            assert!(push["params"].get("statusMessage").is_none(), "{push}");
            break;
        }
        let message = push["params"]["statusMessage"].as_str().unwrap();
        let k: u32 = message
            .strip_prefix("step ")
            .and_then(|m| m.strip_suffix(" of 4"))
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{message}"));
        steps.push(k);
    }
    // Coalesced under load, never out of order.
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    assert!(
        !steps.is_empty() && steps.iter().all(|k| (2..=4).contains(k)),
        "{steps:?}"
    );
    s.response(listen).await;
    let done = s.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Finished 4 steps.");
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(&db).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    assert!(bytes.len() > 4096, "the database was written");
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the argument reached the file in clear"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}
