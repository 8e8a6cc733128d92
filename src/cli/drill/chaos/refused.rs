//! The placement members the controller refused to use (a `DuplicateCluster`, say): the soak
//! runs on the others, and the report names these rather than soaking one member fewer than
//! it says without a word.

use std::collections::BTreeMap;

use kube::{Api, Client};
use spanset_api::MemberCluster;

/// Each of `members` whose MemberCluster says the controller refuses it, with `REASON: message`.
pub async fn refused_members(client: &Client, members: impl IntoIterator<Item = &String>) -> BTreeMap<String, String> {
    let api: Api<MemberCluster> = Api::all(client.clone());
    let mut refused = BTreeMap::new();
    for m in members {
        let Ok(Some(mc)) = api.get_opt(m).await else { continue };
        if let Some((reason, message)) = mc.status.as_ref().and_then(|s| s.refusal()) {
            refused.insert(m.clone(), format!("{reason}: {message}"));
        }
    }
    refused
}

/// Says on stderr which of `refused` were not in `known`, as the drill finds them.
pub fn say(refused: &BTreeMap<String, String>, known: &BTreeMap<String, String>) {
    for (m, why) in refused.iter().filter(|(m, _)| !known.contains_key(*m)) {
        eprintln!("member {m} refused by the controller ({why}): the soak runs on the others");
    }
}
