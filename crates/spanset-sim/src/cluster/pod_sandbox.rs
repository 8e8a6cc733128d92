//! A pod whose sandbox ended under it, as a kubelet handles one: when the process holding a
//! pod's shared PID namespace (the pause container's part, [`super::processes`]) ends, every
//! container of the pod has ended with it; the kubelet says "Pod sandbox changed, it will be
//! killed and re-created." (`SandboxChanged`), makes a new sandbox and runs the pod's init
//! containers again from the first, then its containers, each start counted as a restart.
//! A pod's own guard ends its sandbox this way to stop itself (`spanset guard watch`).

use serde_json::{Value, json};

use crate::store::object;

/// The Event reason a kubelet gives a pod whose sandbox it recreates.
pub const REASON: &str = "SandboxChanged";

/// The kubelet's message with it.
pub const MESSAGE: &str = "Pod sandbox changed, it will be killed and re-created.";

/// What a container's status becomes when the sandbox under it ended: it ran (or had ended),
/// so its next start is a restart; a running state becomes its last state, killed.
fn restarting(status: &mut Value, now: &str) {
    let state = status["state"].clone();
    if let Some(running) = state.get("running") {
        status["lastState"] = json!({"terminated": {"exitCode": 137, "reason": "Error",
            "startedAt": running["startedAt"], "finishedAt": now, "containerID": status["containerID"]}});
    } else if state.get("terminated").is_some() {
        status["lastState"] = state;
    } else {
        // It never started in the old sandbox: nothing to count.
        return;
    }
    status["restartCount"] = json!(status["restartCount"].as_u64().unwrap_or(0) + 1);
    status["state"] = json!({"waiting": {"reason": "PodInitializing"}});
    status["ready"] = json!(false);
    status["started"] = json!(false);
}

/// Shows a pod whose sandbox ended as back at its init stage: `Pending`, not initialized nor
/// ready, every container that ran waiting to run again with its restart counted.
pub fn reset_status(pod: &mut Value) {
    let now = object::now_rfc3339();
    let status = &mut pod["status"];
    for list in ["initContainerStatuses", "containerStatuses"] {
        if let Some(statuses) = status.get_mut(list).and_then(Value::as_array_mut) {
            statuses.iter_mut().for_each(|s| restarting(s, &now));
        }
    }
    status["phase"] = json!("Pending");
    let message = "the pod's sandbox is being re-created";
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    for (kind, reason) in [
        ("Initialized", "ContainersNotInitialized"),
        ("ContainersReady", "ContainersNotReady"),
        ("Ready", "ContainersNotReady"),
    ] {
        let c =
            json!({"type": kind, "status": "False", "reason": reason, "message": message, "lastTransitionTime": now});
        match conditions.iter_mut().find(|e| e["type"] == kind) {
            Some(e) => *e = c,
            None => conditions.push(c),
        }
    }
    status["conditions"] = json!(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_whose_sandbox_ended_goes_back_to_its_init_stage_with_its_restarts_counted() {
        let mut pod = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                           {"type": "example.com/gate", "status": "True"}],
            "initContainerStatuses": [
                {"name": "wait", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                {"name": "watch", "restartCount": 2, "state": {"running": {"startedAt": "t0"}}, "ready": true}],
            "containerStatuses": [
                {"name": "main", "restartCount": 0, "state": {"running": {"startedAt": "t1"}}, "ready": true},
                {"name": "later", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}});
        reset_status(&mut pod);
        let s = &pod["status"];
        assert_eq!(s["phase"], "Pending");
        let counts = |list: &str| -> Vec<u64> {
            s[list].as_array().unwrap().iter().map(|c| c["restartCount"].as_u64().unwrap()).collect()
        };
        assert_eq!((counts("initContainerStatuses"), counts("containerStatuses")), (vec![1, 3], vec![1, 0]));
        assert_eq!(s["initContainerStatuses"][0]["lastState"]["terminated"]["reason"], "Completed");
        assert_eq!(s["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 137);
        assert_eq!(s["containerStatuses"][0]["state"]["waiting"]["reason"], "PodInitializing");
        assert_eq!(s["containerStatuses"][0]["ready"], false);
        let status_of = |kind: &str| {
            s["conditions"].as_array().unwrap().iter().find(|c| c["type"] == kind).unwrap()["status"].clone()
        };
        assert_eq!((status_of("Initialized"), status_of("Ready")), (json!("False"), json!("False")));
        assert_eq!(status_of("example.com/gate"), "True", "others' conditions stay");
    }
}
