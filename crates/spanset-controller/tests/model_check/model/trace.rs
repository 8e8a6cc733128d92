//! Counterexamples as people read them: each effect and each world in a line.

use super::state::{Effect, MEMBERS, World};

/// An effect, in words.
pub fn effect(e: &Effect) -> String {
    match e {
        Effect::Store { status } => {
            let moves: Vec<String> = serde_json::from_str::<spanset_api::FederatedStatefulSetStatus>(status)
                .map(|s| s.moves.iter().map(|m| format!("{} {}→{} {}", m.ordinal, m.from, m.to, m.phase)).collect())
                .unwrap_or_default();
            format!("store status (moves [{}])", moves.join(", "))
        }
        Effect::Write { member, start, replicas, expected_rv, term, rehomed, .. } => {
            let rv = expected_rv.map_or("create".to_string(), |rv| format!("if rv {rv}"));
            let fresh = if rehomed.is_empty() { String::new() } else { format!(" (re-homes {rehomed:?} fresh)") };
            format!("write {} [{start},{}) term {term} {rv}{fresh}", MEMBERS[*member as usize], start + replicas)
        }
        Effect::Release { member, ordinal, uid, term, .. } => {
            format!("release {}/redis-{ordinal} (uid {uid}) term {term}", MEMBERS[*member as usize])
        }
        Effect::Handover { from, to, ordinal } => {
            format!("hand ordinal {ordinal}'s volume {} → {}", MEMBERS[*from as usize], MEMBERS[*to as usize])
        }
        Effect::DeletePod { member, ordinal, uid } => {
            format!("delete {}/redis-{ordinal} (uid {uid})", MEMBERS[*member as usize])
        }
        Effect::Retire { member, ordinal, volume, term } => {
            let which = volume.map_or("whichever claim".to_string(), |v| format!("its claim on volume {v}"));
            format!("retire {}/data-redis-{ordinal}: {which}, term {term}", MEMBERS[*member as usize])
        }
    }
}

/// The world in one line: each member's StatefulSet, pods and API/node state; the Lease; the
/// controllers' terms and pending effects.
pub fn world(w: &World) -> String {
    let mut parts = Vec::new();
    for (i, m) in w.members.iter().enumerate() {
        let sts = m.sts.as_ref().map_or("-".to_string(), |s| {
            format!(
                "[{},{})t{}rv{}{}",
                s.start,
                s.start + s.replicas,
                s.term,
                s.rv,
                if s.observed < s.generation { "*" } else { "" }
            )
        });
        let pods: Vec<String> = m
            .pods
            .iter()
            .map(|(k, p)| {
                let state = match (p.running, p.gated, p.deleting) {
                    (true, _, true) => "run,deleting",
                    (true, _, false) => "run",
                    (false, true, _) => "gated",
                    (false, false, true) => "deleting",
                    (false, false, false) => "starting",
                };
                format!("{k}:{state}{}", p.volume.map(|v| format!("@v{v}")).unwrap_or_default())
            })
            .collect();
        let paused = m.paused_sync.as_ref().map(|s| format!("sync paused on [{},{})", s.start, s.start + s.replicas));
        let flags = [
            (!m.api_up, "partitioned".to_string()),
            (m.fenced, "fenced".to_string()),
            (m.node != super::state::Node::Up, "node-lost".to_string()),
            (paused.is_some(), paused.unwrap_or_default()),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, f)| f.as_str())
        .collect::<Vec<_>>()
        .join(",");
        parts.push(format!(
            "{} {sts} {{{}}}{}",
            MEMBERS[i],
            pods.join(" "),
            if flags.is_empty() { String::new() } else { format!(" ({flags})") }
        ));
    }
    let ctls: Vec<String> = w
        .controllers
        .iter()
        .enumerate()
        .map(|(i, c)| match (c.up, c.term) {
            (false, _) => format!("c{i} down"),
            (true, Some(t)) if c.frozen => format!("c{i} frozen t{t} pending {}", c.pending.len()),
            (true, Some(t)) => format!("c{i} t{t} pending {}", c.pending.len()),
            (true, None) => format!("c{i} standby"),
        })
        .collect();
    let leases = w.leases.as_ref().map_or(String::new(), |l| {
        let objects: Vec<String> = l
            .objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let names = spanset_controller::pod_lease::render_ordinals(&super::lease::ordinals(o.names));
                format!("{} #{} [{names}]", MEMBERS[i], o.extension)
            })
            .collect();
        let flying = if l.in_flight.is_empty() { String::new() } else { format!(", {} in flight", l.in_flight.len()) };
        format!(" | tick {}: pod leases {}{flying}", l.now, objects.join(", "))
    });
    format!("{} | lease {:?} t{} | {}{leases}", parts.join(" | "), w.host.holder, w.host.term, ctls.join(", "))
}
